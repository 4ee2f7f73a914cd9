/*
 * fuzz_protocol.c: one libFuzzer target over everything in protocol/ that reads untrusted bytes: the
 * request header + body decode of every API x version (as the broker's dispatch does it), the response
 * decode of every API x version (as a client or the oracle does it), and RecordBatch v2 validation plus
 * the record iterator. One target, so that one process covers all of it (the machine is shared).
 *
 * Input layout (byte 0 picks the mode, modulo 3):
 *   OFFSET SIZE MEANING
 *    0      1   mode: 0 request frame, 1 response frame, 2 record batch
 *   mode 0 (request):
 *    1      -   a request frame without its int32 size prefix: api key, api version, correlation id,
 *               client id, tags (header v2), body. The api key and version come from the frame itself,
 *               as in server/dispatch.c.
 *   mode 1 (response):
 *    1      2   api key (int16)
 *    3      2   api version (int16)
 *    5      -   response header (v0 or v1) + body
 *   mode 2 (batch):
 *    1      1   flags: bit 0 GR_BATCH_CHECK_CLIENT, bit 1 GR_BATCH_CHECK_HEADER_ONLY, bit 2 recompute the
 *               CRC first (so mutations reach the record scan instead of stopping at the CRC check),
 *               bit 3 recompress a batch that validated, as the produce handler does, to codec
 *               (bits 4-7) % 5
 *    2      -   the batch bytes
 *
 * What is asserted (abort on failure, so libFuzzer reports a crash):
 *   - no sanitizer report on any input (ASan: out-of-bounds, use after free, leaks; UBSan: overflow,
 *     shifts, misaligned or null access);
 *   - when a header and body decode: size() == bytes encode() writes; the re-encoding decodes again,
 *     consuming exactly its bytes, and encodes to identical bytes (encode . decode is a fixed point);
 *   - when a batch validates: the iterator accepts it too and yields exactly record_count records whose
 *     offsets are base offset + 0..n-1 (client rules) and increasing (stored-data rules), with the
 *     validator's maximum create timestamp and null-key answer; the looser modes (stored-data rules,
 *     header only) accept it too; the produce handler's timestamp rules (gr_batch_apply_timestamps) leave
 *     a client batch valid with the records' maximum in its header; gr_batch_next / gr_batches_count find
 * exactly one batch; recompressed (gr_decompress whole + gr_batch_assemble) it validates again and holds the
 * same records. Produce requests that decode also have each partition's records validated and iterated
 * (client rules). Seeds: protocol/fuzz/make_seeds.c and the golden frames (protocol/tests/golden/). Run:
 * protocol/fuzz/run.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "protocol/compress.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"

#define FUZZ_CHECK(cond, ...)                                                                                \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "fuzz_protocol: check failed: %s: ", #cond);                                     \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
            abort();                                                                                         \
        }                                                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Iterates a batch that validated and checks the iterator agrees with the validator: the same records,
 * the same maximum create timestamp, the same answer about null keys. */
static void check_iterate(const uint8_t *b, size_t len, unsigned flags, const struct gr_batch_info *info)
{
    struct gr_record_iter it;
    int rc = gr_record_iter_init(&it, b, len);
    FUZZ_CHECK(rc == 0, "iter_init %d on a batch that validated", rc);
    struct gr_record rec;
    int32_t n = 0;
    int64_t prev = -1, max_ts = -1;
    bool null_key = false;
    bool log_append = (info->attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    while ((rc = gr_record_iter_next(&it, &rec)) == 1) {
        if (flags & GR_BATCH_CHECK_CLIENT)
            FUZZ_CHECK(rec.offset_delta == n, "record %d has offset delta %d", n, rec.offset_delta);
        FUZZ_CHECK(rec.offset_delta > prev, "offset delta %d after %lld", rec.offset_delta, (long long)prev);
        FUZZ_CHECK(rec.offset == (int64_t)((uint64_t)info->base_offset + (uint64_t)(int64_t)rec.offset_delta),
                   "offset");
        FUZZ_CHECK(rec.key.len >= -1 && rec.value.len >= -1, "lengths");
        if (log_append)
            FUZZ_CHECK(rec.timestamp == info->max_timestamp, "log append time");
        else if (rec.timestamp > max_ts)
            max_ts = rec.timestamp;
        null_key |= rec.key.len < 0;
        struct gr_bytes hs = rec.headers;
        struct gr_record_header h;
        int32_t hn = 0;
        while (gr_record_header_next(&hs, &h))
            hn++;
        FUZZ_CHECK(hn == rec.header_count, "headers walked %d of %d", hn, rec.header_count);
        prev = rec.offset_delta;
        n++;
    }
    FUZZ_CHECK(rc == 0, "iter_next %d after %d records on a batch that validated", rc, n);
    FUZZ_CHECK(n == info->record_count, "iterated %d records, header says %d", n, info->record_count);
    FUZZ_CHECK(null_key == info->has_null_key, "null key: iterator %d, validator %d", null_key,
               info->has_null_key);
    if (!log_append)
        FUZZ_CHECK(max_ts == info->records_max_timestamp, "max timestamp: iterator %lld, validator %lld",
                   (long long)max_ts, (long long)info->records_max_timestamp);
    gr_record_iter_close(&it);
}

/* The produce handler's recompression (server/handlers/produce.c, when a topic's compression.type differs
 * from the producer's): decompress the validated batch's records whole, re-wrap them with gr_batch_assemble
 * in `codec`, and the result must validate under the same rules and hold the same records. */
static void check_recompress(const uint8_t *b, size_t len, unsigned flags, const struct gr_batch_info *info,
                             enum gr_codec codec)
{
    const uint8_t *records = b + GR_BATCH_HEADER_BYTES;
    size_t records_len = len - GR_BATCH_HEADER_BYTES;
    uint8_t *plain = NULL;
    if (info->codec != GR_CODEC_NONE) {
        size_t plain_len = 0;
        int rc = gr_decompress(info->codec, records, records_len, GR_DECOMPRESSED_BATCH_BYTES_MAX, &plain,
                               &plain_len);
        FUZZ_CHECK(rc == 0, "validated batch (codec %d) does not decompress whole: %d", info->codec, rc);
        FUZZ_CHECK(plain_len == info->records_bytes, "whole decompress %zu bytes, streaming %llu", plain_len,
                   (unsigned long long)info->records_bytes);
        records = plain;
        records_len = plain_len;
    }
    struct gr_batch_params bp = {
        0,
        -1,
        codec,
        (int16_t)(info->attributes & ~GR_BATCH_ATTR_CODEC_MASK & ~GR_BATCH_ATTR_LOG_APPEND_TIME),
        -1,
        info->producer_id,
        info->producer_epoch,
        info->base_sequence};
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = gr_batch_assemble(&bp, info->record_count, info->last_offset_delta, info->base_timestamp,
                               info->max_timestamp, records, records_len, &out, &out_len);
    FUZZ_CHECK(rc == 0, "assemble %d", rc);
    free(plain);
    struct gr_batch_info info2;
    const char *why = NULL;
    rc = gr_batch_validate_ex(out, out_len, flags & GR_BATCH_CHECK_CLIENT, &info2, &why);
    FUZZ_CHECK(rc == 0, "recompressed (%d -> %d) batch refused: %d (%s)", info->codec, codec, rc, why);
    FUZZ_CHECK(info2.codec == codec && info2.record_count == info->record_count &&
                   info2.records_bytes == info->records_bytes && info2.producer_id == info->producer_id &&
                   info2.base_sequence == info->base_sequence &&
                   info2.last_offset_delta == info->last_offset_delta,
               "recompressed batch header differs");
    /* The handler drops the producer's LogAppendTime bit (the topic decides the timestamp type), so the
     * original's records read as the max timestamp and the copy's as their create times. */
    bool log_append = (info->attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    struct gr_record_iter ia, ib;
    FUZZ_CHECK(gr_record_iter_init(&ia, b, len) == 0 && gr_record_iter_init(&ib, out, out_len) == 0,
               "iter init");
    struct gr_record ra, rb;
    int na, nb;
    while ((na = gr_record_iter_next(&ia, &ra)) == 1) {
        nb = gr_record_iter_next(&ib, &rb);
        FUZZ_CHECK(nb == 1, "recompressed batch ended early: %d", nb);
        FUZZ_CHECK(ra.offset_delta == rb.offset_delta && (log_append || ra.timestamp == rb.timestamp) &&
                       ra.key.len == rb.key.len && ra.value.len == rb.value.len &&
                       ra.header_count == rb.header_count && ra.headers.len == rb.headers.len,
                   "recompressed record differs");
        FUZZ_CHECK(ra.key.len <= 0 || memcmp(ra.key.ptr, rb.key.ptr, (size_t)ra.key.len) == 0, "key differs");
        FUZZ_CHECK(ra.value.len <= 0 || memcmp(ra.value.ptr, rb.value.ptr, (size_t)ra.value.len) == 0,
                   "value differs");
        FUZZ_CHECK(ra.headers.len <= 0 || memcmp(ra.headers.ptr, rb.headers.ptr, (size_t)ra.headers.len) == 0,
                   "headers differ");
    }
    FUZZ_CHECK(na == 0 && gr_record_iter_next(&ib, &rb) == 0, "record streams end differently");
    gr_record_iter_close(&ia);
    gr_record_iter_close(&ib);
    free(out);
}

/* The produce handler's timestamp rules on a copy of a client batch that validated, with the clock and the
 * bounds taken from the batch's own header fields (so that mutated extremes reach them): the answer is 0
 * or GR_BATCH_ERR_TIMESTAMP; after 0 the copy validates again (CRC recomputed) and under CreateTime its
 * header says the records' maximum with the LogAppendTime bit clear. */
static void check_timestamps(const uint8_t *b, size_t len, const struct gr_batch_info *info)
{
    uint8_t *copy = malloc(len);
    FUZZ_CHECK(copy != NULL, "malloc");
    memcpy(copy, b, len);
    struct gr_batch_info ci = *info;
    bool lat = info->producer_epoch & 1;
    int64_t before = (int64_t)((uint64_t)info->producer_id & INT64_MAX);
    int64_t after = info->base_sequence & INT32_MAX;
    const char *why = NULL;
    int rc = gr_batch_apply_timestamps(copy, len, &ci, lat, before, after, info->base_timestamp, &why);
    FUZZ_CHECK(rc == 0 || (rc == GR_BATCH_ERR_TIMESTAMP && why), "apply_timestamps returned %d", rc);
    if (rc == 0) {
        struct gr_batch_info again;
        rc = gr_batch_validate_ex(copy, len, GR_BATCH_CHECK_CLIENT, &again, &why);
        FUZZ_CHECK(rc == 0, "batch no longer validates after apply_timestamps: %d (%s)", rc, why);
        FUZZ_CHECK(again.max_timestamp == ci.max_timestamp && again.attributes == ci.attributes, "info");
        if (!lat) {
            bool was_lat = info->attributes & GR_BATCH_ATTR_LOG_APPEND_TIME;
            int64_t want =
                was_lat ? (info->max_timestamp > -1 ? info->max_timestamp : -1) : info->records_max_timestamp;
            FUZZ_CHECK(again.max_timestamp == want && !(again.attributes & GR_BATCH_ATTR_LOG_APPEND_TIME),
                       "header max timestamp %lld, want %lld", (long long)again.max_timestamp,
                       (long long)want);
        } else {
            FUZZ_CHECK(memcmp(copy, b, len) == 0, "LogAppendTime changed the batch before the append");
        }
    }
    free(copy);
}

/* Validates one batch (any outcome is fine) and, if it validated fully, iterates it and checks that the
 * looser modes accept it too: client rules imply stored-data rules, a full check implies the header check. */
static void fuzz_batch(const uint8_t *b, size_t len, unsigned flags, int recompress_codec)
{
    struct gr_batch_info info;
    const char *why = NULL;
    int rc = gr_batch_validate_ex(b, len, flags, &info, &why);
    FUZZ_CHECK(rc <= 0 && rc >= GR_BATCH_ERR_NO_MEMORY, "validate returned %d", rc);
    if (rc != 0) {
        FUZZ_CHECK(why != NULL, "no reason for error %d", rc);
        (void)gr_batch_err_kafka(rc);
        return;
    }
    FUZZ_CHECK(info.batch_length >= 49 && (size_t)info.batch_length + 12 == len, "batch length");
    if (!(flags & GR_BATCH_CHECK_HEADER_ONLY)) {
        check_iterate(b, len, flags, &info);
        rc = gr_batch_validate_ex(b, len, flags | GR_BATCH_CHECK_HEADER_ONLY, NULL, &why);
        FUZZ_CHECK(rc == 0, "full check passed, header-only check failed: %d (%s)", rc, why);
        if (flags & GR_BATCH_CHECK_CLIENT) {
            rc = gr_batch_validate_ex(b, len, 0, NULL, &why);
            FUZZ_CHECK(rc == 0, "client rules passed, stored-data rules failed: %d (%s)", rc, why);
            check_timestamps(b, len, &info);
        }
        /* The handler recompresses producer batches, which hold >= 1 record. A stored batch may hold none
         * and have an empty records section even with a codec set (Kafka's cleaner writes such header-only
         * batches): nothing to decompress (see test_malformed2.c test_fuzz_empty_compressed_batch). */
        if (recompress_codec >= 0 && info.record_count > 0)
            check_recompress(b, len, flags, &info, (enum gr_codec)recompress_codec);
    }
    /* A stored-data split of the same bytes must find exactly this one batch. */
    size_t pos = 0, blen = 0, tail = 1;
    const uint8_t *one = NULL;
    FUZZ_CHECK(gr_batch_next(b, len, &pos, &one, &blen) == 1 && blen == len && pos == len, "gr_batch_next");
    FUZZ_CHECK(gr_batches_count(b, len, &tail) == 1 && tail == 0, "gr_batches_count");
}

/* encode(m) -> decode -> encode must give the same bytes, and size() must be exact. */
static void check_reencode(const struct gr_msg_ops *ops, const void *m, int16_t version)
{
    size_t n = ops->size(m, version);
    uint8_t *buf1 = malloc(n + 1), *buf2 = malloc(n + 1);
    FUZZ_CHECK(buf1 && buf2, "malloc %zu", n);
    struct gr_wr wr;
    gr_wr_init(&wr, buf1, n);
    ops->encode(&wr, m, version);
    FUZZ_CHECK((size_t)(wr.p - buf1) == n, "%s v%d: size() %zu, encode wrote %zu", ops->name, version, n,
               (size_t)(wr.p - buf1));

    struct gr_arena a;
    gr_arena_init(&a, 0);
    void *m2 = gr_arena_alloc(&a, ops->struct_bytes);
    FUZZ_CHECK(m2 != NULL, "arena");
    struct gr_rd rd;
    gr_rd_init(&rd, buf1, n, &a);
    int err = ops->decode(&rd, version, m2);
    FUZZ_CHECK(err == 0, "%s v%d: our own encoding does not decode (error %d)", ops->name, version, err);
    FUZZ_CHECK(gr_rd_left(&rd) == 0, "%s v%d: %zu bytes left decoding our own encoding", ops->name, version,
               gr_rd_left(&rd));
    size_t n2 = ops->size(m2, version);
    FUZZ_CHECK(n2 == n, "%s v%d: size changed %zu -> %zu", ops->name, version, n, n2);
    gr_wr_init(&wr, buf2, n2);
    ops->encode(&wr, m2, version);
    FUZZ_CHECK(memcmp(buf1, buf2, n) == 0, "%s v%d: re-encoding differs", ops->name, version);
    gr_arena_reset(&a);
    free(buf1);
    free(buf2);
}

static void check_header_reencode(const struct gr_request_header *h, int16_t hv)
{
    size_t n = gr_request_header_size(h, hv);
    uint8_t *buf1 = malloc(n + 1), *buf2 = malloc(n + 1);
    FUZZ_CHECK(buf1 && buf2, "malloc");
    struct gr_wr wr;
    gr_wr_init(&wr, buf1, n);
    gr_request_header_encode(&wr, h, hv);
    FUZZ_CHECK((size_t)(wr.p - buf1) == n, "header size() %zu, wrote %zu", n, (size_t)(wr.p - buf1));
    struct gr_arena a;
    gr_arena_init(&a, 0);
    struct gr_rd rd;
    gr_rd_init(&rd, buf1, n, &a);
    struct gr_request_header h2;
    FUZZ_CHECK(gr_request_header_decode(&rd, hv, &h2) == 0 && gr_rd_left(&rd) == 0, "header re-decode");
    FUZZ_CHECK(gr_request_header_size(&h2, hv) == n, "header size changed");
    gr_wr_init(&wr, buf2, n);
    gr_request_header_encode(&wr, &h2, hv);
    FUZZ_CHECK(memcmp(buf1, buf2, n) == 0, "header re-encoding differs");
    gr_arena_reset(&a);
    free(buf1);
    free(buf2);
}

/* Produce: each partition's records field, as the produce handler would see it. */
static void fuzz_produce_records(const struct gr_produce_request *req)
{
    for (int32_t t = 0; t < req->topic_data.count; t++) {
        const struct gr_produce_request_topic_produce_data *td = &req->topic_data.items[t];
        for (int32_t p = 0; p < td->partition_data.count; p++) {
            struct gr_bytes r = td->partition_data.items[p].records.mem;
            if (r.len > 0) fuzz_batch(r.ptr, (size_t)r.len, GR_BATCH_CHECK_CLIENT, -1);
        }
    }
}

static void fuzz_request(const uint8_t *p, size_t len)
{
    int16_t key, version;
    int32_t corr;
    if (gr_request_header_peek(p, len, &key, &version, &corr) != 0) return;
    const struct gr_msg_ops *ops = gr_msg_ops_find(key, false);
    if (!ops || version < ops->version_min || version > ops->version_max) return;
    struct gr_arena a;
    gr_arena_init(&a, 32 * len + (1 << 20)); /* as server/net.c sizes a request's arena */
    struct gr_rd rd;
    gr_rd_init(&rd, p, len, &a);
    struct gr_request_header h;
    int16_t hv = gr_request_header_version(version, ops->flexible_min);
    int err = gr_request_header_decode(&rd, hv, &h);
    FUZZ_CHECK(err >= 0 && err <= GR_WIRE_NULL, "header error %d", err);
    if (err == 0) {
        FUZZ_CHECK(h.request_api_key == key && h.request_api_version == version && h.correlation_id == corr,
                   "header disagrees with peek");
        check_header_reencode(&h, hv);
        void *m = gr_arena_alloc(&a, ops->struct_bytes);
        if (m) {
            const uint8_t *body = rd.p;
            err = ops->decode(&rd, version, m);
            FUZZ_CHECK(err >= 0 && err <= GR_WIRE_NULL, "%s v%d: decode error %d", ops->name, version, err);
            FUZZ_CHECK(rd.p >= body && rd.p <= rd.end, "reader out of range");
            if (err == 0) {
                check_reencode(ops, m, version);
                if (key == 0) fuzz_produce_records(m);
            }
        }
    }
    gr_arena_reset(&a);
}

static void fuzz_response(const uint8_t *p, size_t len)
{
    if (len < 4) return;
    int16_t key = (int16_t)gr_be16(p), version = (int16_t)gr_be16(p + 2);
    const struct gr_msg_ops *ops = gr_msg_ops_find(key, true);
    if (!ops || version < ops->version_min || version > ops->version_max) return;
    struct gr_arena a;
    gr_arena_init(&a, 32 * len + (1 << 20));
    struct gr_rd rd;
    gr_rd_init(&rd, p + 4, len - 4, &a);
    (void)gr_rd_int32(&rd); /* correlation id */
    if (gr_response_header_version(ops, version) >= 1) {
        uint32_t n = gr_rd_tag_count(&rd);
        for (uint32_t i = 0; i < n && !rd.err; i++) {
            (void)gr_rd_uvarint(&rd);
            gr_rd_skip(&rd, gr_rd_uvarint(&rd));
        }
    }
    void *m = rd.err ? NULL : gr_arena_alloc(&a, ops->struct_bytes);
    if (m) {
        int err = ops->decode(&rd, version, m);
        FUZZ_CHECK(err >= 0 && err <= GR_WIRE_NULL, "%s v%d: decode error %d", ops->name, version, err);
        if (err == 0) check_reencode(ops, m, version);
    }
    gr_arena_reset(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_request(data + 1, size - 1);
        break;
    case 1:
        fuzz_response(data + 1, size - 1);
        break;
    default: {
        if (size < 2) return 0;
        unsigned flags = data[1] & (GR_BATCH_CHECK_CLIENT | GR_BATCH_CHECK_HEADER_ONLY);
        int recodec = (data[1] & 8) ? (data[1] >> 4) % 5 : -1;
        size_t len = size - 2;
        if ((data[1] & 4) && len >= GR_BATCH_HEADER_BYTES) {
            uint8_t *copy = malloc(len);
            FUZZ_CHECK(copy != NULL, "malloc");
            memcpy(copy, data + 2, len);
            gr_batch_crc_store(copy, len);
            fuzz_batch(copy, len, flags, recodec);
            free(copy);
        } else {
            fuzz_batch(data + 2, len, flags, recodec);
        }
        break;
    }
    }
    return 0;
}
