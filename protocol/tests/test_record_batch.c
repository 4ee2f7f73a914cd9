/*
 * test_record_batch.c: RecordBatch v2 validation, splitting, iteration and building.
 *
 * Golden batches: GOLDEN_NONE below is written out field by field; it and the GOLDEN_* hex strings were
 * produced by kafka-clients 4.1.1 (MemoryRecordsBuilder, CREATE_TIME, base offset 0, leader epoch -1,
 * gzip / snappy-java 1.1.10.7 / lz4-java 1.8.0 / zstd-jni 1.5.6-10 with Kafka's default settings) from
 * three records:
 *   r0: timestamp 1700000000000, key "k0", value "v0", no headers
 *   r1: timestamp 1700000000005, key null, value "" , headers h1 = null, h2 = ""
 *   r2: timestamp 1699999999990, key "", value null, no headers
 * so they are real Java-client bytes (snappy xerial-framed, lz4 with Kafka's frame settings).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include <snappy-c.h>
#include <zstd.h>

#include "common/limits.h"
#include "protocol/compress.h"
#include "protocol/crc32c.h"
#include "protocol/record_batch.h"

#define MiB (1024 * 1024)
static const enum gr_codec all_codecs[] = {GR_CODEC_NONE, GR_CODEC_GZIP, GR_CODEC_SNAPPY, GR_CODEC_LZ4,
                                           GR_CODEC_ZSTD};
#define NCODECS 5

/* ---- the golden batch, field by field ---- */

/* clang-format off */
static const uint8_t GOLDEN_NONE[94] = {
    0, 0, 0, 0, 0, 0, 0, 0,                         /*  0 base offset 0 */
    0x00, 0x00, 0x00, 0x52,                         /*  8 batch length 82 (total 94) */
    0xff, 0xff, 0xff, 0xff,                         /* 12 partition leader epoch -1 */
    0x02,                                           /* 16 magic 2 */
    0xe7, 0x7b, 0x08, 0xe1,                         /* 17 CRC-32C 0xE77B08E1 of bytes 21..93 */
    0x00, 0x00,                                     /* 21 attributes: no codec, CreateTime */
    0x00, 0x00, 0x00, 0x02,                         /* 23 last offset delta 2 */
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, /* 27 base timestamp 1700000000000 */
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x05, /* 35 max timestamp 1700000000005 */
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* 43 producer id -1 */
    0xff, 0xff,                                     /* 51 producer epoch -1 */
    0xff, 0xff, 0xff, 0xff,                         /* 53 base sequence -1 */
    0x00, 0x00, 0x00, 0x03,                         /* 57 record count 3 */
    /* 61 r0: length 10, attributes 0, timestamp delta 0, offset delta 0, key "k0", value "v0", 0 headers */
    0x14, 0x00, 0x00, 0x00, 0x04, 'k', '0', 0x04, 'v', '0', 0x00,
    /* 72 r1: length 14, attributes 0, timestamp delta 5, offset delta 1, key null, value "", 2 headers:
     *    "h1" = null, "h2" = "" */
    0x1c, 0x00, 0x0a, 0x02, 0x01, 0x00, 0x04, 0x04, 'h', '1', 0x01, 0x04, 'h', '2', 0x00,
    /* 87 r2: length 6, attributes 0, timestamp delta -10, offset delta 2, key "", value null, 0 headers */
    0x0c, 0x00, 0x13, 0x04, 0x00, 0x01, 0x00,
};
/* clang-format on */

static const char *GOLDEN_HEX[NCODECS] = {
    NULL, /* GOLDEN_NONE */
    "000000000000000000000066ffffffff02c87bf1240001000000020000018bcfe568000000018bcfe56805ffffffffff"
    "ffffffffffffffffff000000031f8b08000000000000ff1361606060c936602933609061e06262646061c9306464c930"
    "62e06110666160640000b5b60b2e21000000",
    "000000000000000000000068ffffffff02734449f60002000000020000018bcfe568000000018bcfe56805ffffffffff"
    "ffffffffffffffffff0000000382534e4150505900000000010000000100000023218014000000046b30047630001c00"
    "0a0201000404683101046832000c001304000100",
    "000000000000000000000061ffffffff02431519e90003000000020000018bcfe568000000018bcfe56805ffffffffff"
    "ffffffffffffffffff0000000304224d186040822100008014000000046b30047630001c000a02010004046831010468"
    "32000c00130400010000000000",
    "00000000000000000000005effffffff021e2f31230004000000020000018bcfe568000000018bcfe56805ffffffffff"
    "ffffffffffffffffff0000000328b52ffd005808010014000000046b30047630001c000a020100040468310104683200"
    "0c001304000100010000",
};
/* The same records from an idempotent producer: producer id 1234, epoch 5, base sequence 42. */
static const char *GOLDEN_IDEMPOTENT_HEX =
    "000000000000000000000052ffffffff02919389610000000000020000018bcfe568000000018bcfe568050000000000"
    "0004d200050000002a0000000314000000046b30047630001c000a0201000404683101046832000c001304000100";

static uint8_t *from_hex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (uint8_t)v;
    }
    *len = n;
    return b;
}

/* The golden records as builder input. */
static const struct gr_record_header golden_r1_headers[2] = {
    {{(const uint8_t *)"h1", 2}, {NULL, -1}},
    {{(const uint8_t *)"h2", 2}, {(const uint8_t *)"", 0}},
};
static const struct gr_record_in golden_records[3] = {
    {1700000000000LL, {(const uint8_t *)"k0", 2}, {(const uint8_t *)"v0", 2}, NULL, 0},
    {1700000000005LL, {NULL, -1}, {(const uint8_t *)"", 0}, golden_r1_headers, 2},
    {1699999999990LL, {(const uint8_t *)"", 0}, {NULL, -1}, NULL, 0},
};

static struct gr_batch_params params(enum gr_codec codec)
{
    return (struct gr_batch_params){.base_offset = 0,
                                    .partition_leader_epoch = -1,
                                    .codec = codec,
                                    .producer_id = -1,
                                    .producer_epoch = -1,
                                    .base_sequence = -1};
}

static void assert_bytes(struct gr_bytes got, struct gr_bytes want)
{
    assert_int_equal(got.len, want.len);
    if (want.len > 0) assert_memory_equal(got.ptr, want.ptr, (size_t)want.len);
    if (want.len < 0) assert_null(got.ptr);
}

/* Iterates a batch and compares every record with `want`; base offset assumed `base`. */
static void assert_records(const uint8_t *b, size_t len, const struct gr_record_in *want, int32_t n,
                           int64_t base)
{
    struct gr_record_iter it;
    struct gr_record rec;
    assert_int_equal(gr_record_iter_init(&it, b, len), 0);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(gr_record_iter_next(&it, &rec), 1);
        assert_int_equal(rec.offset_delta, i);
        assert_int_equal(rec.offset, base + i);
        assert_int_equal(rec.timestamp, want[i].timestamp);
        assert_int_equal(rec.attributes, 0);
        assert_bytes(rec.key, want[i].key);
        assert_bytes(rec.value, want[i].value);
        assert_int_equal(rec.header_count, want[i].header_count);
        struct gr_bytes hs = rec.headers;
        struct gr_record_header h;
        for (int32_t k = 0; k < want[i].header_count; k++) {
            assert_true(gr_record_header_next(&hs, &h));
            assert_bytes(h.key, want[i].headers[k].key);
            assert_bytes(h.value, want[i].headers[k].value);
        }
        assert_false(gr_record_header_next(&hs, &h));
        assert_int_equal(hs.len, 0);
    }
    assert_int_equal(gr_record_iter_next(&it, &rec), 0);
    assert_int_equal(gr_record_iter_next(&it, &rec), 0);
    gr_record_iter_close(&it);
    gr_record_iter_close(&it); /* twice is harmless */
}

/* ---- goldens ---- */

static void test_golden_field_by_field(void **state)
{
    (void)state;
    const uint8_t *b = GOLDEN_NONE;
    assert_int_equal(gr_crc32c(0, b + 21, sizeof GOLDEN_NONE - 21), 0xE77B08E1u);
    assert_int_equal(gr_batch_crc_compute(b, sizeof GOLDEN_NONE), 0xE77B08E1u);
    assert_int_equal(gr_batch_crc(b), 0xE77B08E1u);
    assert_int_equal(gr_batch_total_bytes(b), 94);
    struct gr_batch_info info;
    const char *why = NULL;
    assert_int_equal(gr_batch_validate(b, sizeof GOLDEN_NONE, &info, &why), 0);
    assert_int_equal(info.base_offset, 0);
    assert_int_equal(info.batch_length, 82);
    assert_int_equal(info.partition_leader_epoch, -1);
    assert_int_equal(info.attributes, 0);
    assert_int_equal(info.codec, GR_CODEC_NONE);
    assert_int_equal(info.last_offset_delta, 2);
    assert_int_equal(info.base_timestamp, 1700000000000LL);
    assert_int_equal(info.max_timestamp, 1700000000005LL);
    assert_int_equal(info.producer_id, -1);
    assert_int_equal(info.producer_epoch, -1);
    assert_int_equal(info.base_sequence, -1);
    assert_int_equal(info.record_count, 3);
    assert_int_equal(info.records_max_timestamp, 1700000000005LL);
    assert_int_equal(info.records_max_timestamp_offset_delta, 1);
    assert_true(info.has_null_key);
    assert_int_equal(info.records_bytes, 33);
    assert_records(b, sizeof GOLDEN_NONE, golden_records, 3, 0);
}

static void test_golden_java_batches_all_codecs(void **state)
{
    (void)state;
    for (int c = 1; c < NCODECS; c++) {
        size_t len;
        uint8_t *b = from_hex(GOLDEN_HEX[c], &len);
        struct gr_batch_info info;
        const char *why = NULL;
        int r = gr_batch_validate(b, len, &info, &why);
        if (r) fail_msg("codec %d: %d %s", c, r, why);
        assert_int_equal(info.codec, all_codecs[c]);
        assert_int_equal(info.record_count, 3);
        assert_int_equal(info.records_max_timestamp, 1700000000005LL);
        assert_int_equal(info.records_max_timestamp_offset_delta, 1);
        assert_true(info.has_null_key);
        assert_int_equal(info.records_bytes, 33);
        assert_records(b, len, golden_records, 3, 0);
        free(b);
    }
    size_t len;
    uint8_t *b = from_hex(GOLDEN_IDEMPOTENT_HEX, &len);
    struct gr_batch_info info;
    assert_int_equal(gr_batch_validate(b, len, &info, NULL), 0);
    assert_int_equal(info.producer_id, 1234);
    assert_int_equal(info.producer_epoch, 5);
    assert_int_equal(info.base_sequence, 42);
    free(b);
}

static void test_builder_matches_java_bytes(void **state)
{
    (void)state;
    uint8_t *b;
    size_t len;
    struct gr_batch_params bp = params(GR_CODEC_NONE);
    assert_int_equal(gr_batch_build(&bp, golden_records, 3, &b, &len), 0);
    assert_int_equal(len, sizeof GOLDEN_NONE);
    assert_memory_equal(b, GOLDEN_NONE, len);
    free(b);
    bp.producer_id = 1234;
    bp.producer_epoch = 5;
    bp.base_sequence = 42;
    assert_int_equal(gr_batch_build(&bp, golden_records, 3, &b, &len), 0);
    size_t glen;
    uint8_t *g = from_hex(GOLDEN_IDEMPOTENT_HEX, &glen);
    assert_int_equal(len, glen);
    assert_memory_equal(b, g, len);
    free(g);
    free(b);
    /* Compressed: the header up to the CRC differs only in length; the decoded records are equal. */
    for (int c = 1; c < NCODECS; c++) {
        bp = params(all_codecs[c]);
        assert_int_equal(gr_batch_build(&bp, golden_records, 3, &b, &len), 0);
        assert_int_equal(gr_batch_attributes(b), all_codecs[c]);
        assert_int_equal(gr_batch_validate(b, len, NULL, NULL), 0);
        assert_records(b, len, golden_records, 3, 0);
        free(b);
    }
}

/* ---- build / validate / iterate round trips ---- */

static void test_roundtrip_edge_records_each_codec(void **state)
{
    (void)state;
    static const struct gr_record_header hs[3] = {
        {{(const uint8_t *)"null-value", 10}, {NULL, -1}},
        {{(const uint8_t *)"empty-value", 11}, {(const uint8_t *)"", 0}},
        {{(const uint8_t *)"", 0}, {(const uint8_t *)"x", 1}},
    };
    const struct gr_record_in recs[5] = {
        {5, {NULL, -1}, {(const uint8_t *)"null key", 8}, NULL, 0},
        {4, {(const uint8_t *)"", 0}, {(const uint8_t *)"empty key", 9}, NULL, 0},
        {-7, {(const uint8_t *)"k", 1}, {NULL, -1}, hs, 3},
        {INT64_C(1) << 40, {(const uint8_t *)"k", 1}, {(const uint8_t *)"", 0}, hs, 1},
        {100, {NULL, -1}, {NULL, -1}, NULL, 0},
    };
    for (int c = 0; c < NCODECS; c++) {
        struct gr_batch_params bp = params(all_codecs[c]);
        bp.base_offset = 1000;
        bp.partition_leader_epoch = 7;
        uint8_t *b;
        size_t len;
        assert_int_equal(gr_batch_build(&bp, recs, 5, &b, &len), 0);
        struct gr_batch_info info;
        assert_int_equal(gr_batch_validate(b, len, &info, NULL), 0);
        assert_int_equal(info.base_offset, 1000);
        assert_int_equal(info.partition_leader_epoch, 7);
        assert_int_equal(info.last_offset_delta, 4);
        assert_int_equal(info.base_timestamp, 5);
        assert_int_equal(info.max_timestamp, INT64_C(1) << 40);
        assert_int_equal(info.records_max_timestamp, INT64_C(1) << 40);
        assert_int_equal(info.records_max_timestamp_offset_delta, 3);
        assert_true(info.has_null_key);
        assert_records(b, len, recs, 5, 1000);
        free(b);
    }
}

static void test_roundtrip_one_and_thousand_records(void **state)
{
    (void)state;
    struct gr_record_in *recs = calloc(1000, sizeof *recs);
    char(*vals)[32] = calloc(1000, 32);
    struct gr_record_header h = {{(const uint8_t *)"trace", 5}, {(const uint8_t *)"abc", 3}};
    for (int i = 0; i < 1000; i++) {
        snprintf(vals[i], 32, "value-%d", i);
        recs[i].timestamp = 1700000000000LL + (i * 7919) % 1000; /* not monotonic */
        recs[i].key = (struct gr_bytes){(const uint8_t *)vals[i], 6};
        recs[i].value = (struct gr_bytes){(const uint8_t *)vals[i], (int32_t)strlen(vals[i])};
        recs[i].headers = &h;
        recs[i].header_count = i % 2;
    }
    int64_t max = -1;
    int32_t max_delta = -1;
    for (int i = 0; i < 1000; i++)
        if (recs[i].timestamp > max) max = recs[i].timestamp, max_delta = i;
    for (int c = 0; c < NCODECS; c++)
        for (int n = 1; n <= 1000; n += 999) {
            struct gr_batch_params bp = params(all_codecs[c]);
            uint8_t *b;
            size_t len;
            assert_int_equal(gr_batch_build(&bp, recs, n, &b, &len), 0);
            struct gr_batch_info info;
            assert_int_equal(gr_batch_validate(b, len, &info, NULL), 0);
            assert_int_equal(info.record_count, n);
            assert_int_equal(info.last_offset_delta, n - 1);
            assert_false(info.has_null_key);
            assert_int_equal(info.records_max_timestamp, n == 1 ? recs[0].timestamp : max);
            assert_int_equal(info.records_max_timestamp_offset_delta, n == 1 ? 0 : max_delta);
            assert_records(b, len, recs, n, 0);
            free(b);
        }
    free(vals);
    free(recs);
}

static void test_large_records_stream_through_window(void **state)
{
    (void)state;
    /* Records far larger than validation's 64 KiB window: parsed while streaming, iterated with a grown
     * window. */
    size_t big = 300 * 1024;
    uint8_t *v = malloc(big);
    for (size_t i = 0; i < big; i++)
        v[i] = (uint8_t)(i * 31 + (i >> 9));
    struct gr_record_header h = {{(const uint8_t *)"h", 1}, {v, 70000}};
    const struct gr_record_in recs[3] = {
        {1, {v, 100000}, {v, (int32_t)big}, &h, 1},
        {2, {NULL, -1}, {(const uint8_t *)"small", 5}, NULL, 0},
        {3, {v, 5}, {v + 1, (int32_t)big - 1}, NULL, 0},
    };
    for (int c = 0; c < NCODECS; c++) {
        struct gr_batch_params bp = params(all_codecs[c]);
        uint8_t *b;
        size_t len;
        assert_int_equal(gr_batch_build(&bp, recs, 3, &b, &len), 0);
        struct gr_batch_info info;
        const char *why = NULL;
        int r = gr_batch_validate(b, len, &info, &why);
        if (r) fail_msg("codec %d: %d %s", c, r, why);
        assert_int_equal(info.records_max_timestamp_offset_delta, 2);
        assert_records(b, len, recs, 3, 0);
        free(b);
    }
    free(v);
}

/* ---- header-level refusals ---- */

static uint8_t *golden_copy(void)
{
    uint8_t *b = malloc(sizeof GOLDEN_NONE + 16);
    memcpy(b, GOLDEN_NONE, sizeof GOLDEN_NONE);
    return b;
}

static int validate(const uint8_t *b, size_t len, const char **why)
{
    *why = NULL;
    int r = gr_batch_validate(b, len, NULL, why);
    if (r) assert_non_null(*why);
    return r;
}

static void test_crc_flip_is_corrupt_message(void **state)
{
    (void)state;
    uint8_t *b = golden_copy();
    const char *why;
    /* Every covered byte, one bit each. */
    for (size_t i = GR_BATCH_OFF_ATTRIBUTES; i < sizeof GOLDEN_NONE; i++) {
        b[i] ^= 0x10;
        assert_int_equal(validate(b, sizeof GOLDEN_NONE, &why), GR_BATCH_ERR_CRC);
        b[i] ^= 0x10;
    }
    b[GR_BATCH_OFF_CRC + 3] ^= 1; /* the stored CRC itself */
    assert_int_equal(validate(b, sizeof GOLDEN_NONE, &why), GR_BATCH_ERR_CRC);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_CRC), 2);
    b[GR_BATCH_OFF_CRC + 3] ^= 1;
    /* Base offset and leader epoch are outside the CRC: patching them keeps the batch valid. */
    gr_batch_set_base_offset(b, 123456789);
    gr_batch_set_leader_epoch(b, 42);
    assert_int_equal(validate(b, sizeof GOLDEN_NONE, &why), 0);
    free(b);
}

static void test_framing_errors(void **state)
{
    (void)state;
    uint8_t *b = golden_copy();
    const char *why;
    size_t n = sizeof GOLDEN_NONE;
    /* Truncated: every shorter length. */
    for (size_t len = 0; len < n; len++) {
        int r = validate(b, len, &why);
        assert_int_equal(r, GR_BATCH_ERR_TRUNCATED);
    }
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_TRUNCATED), 87);
    /* Extra bytes after the batch (a second batch or garbage). */
    b[n] = 0;
    assert_int_equal(validate(b, n + 1, &why), GR_BATCH_ERR_EXTRA_BYTES);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_EXTRA_BYTES), 87);
    /* Wrong batch length fields. */
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, 83);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_TRUNCATED);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, 81);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_EXTRA_BYTES);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, 48);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_LENGTH);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, 0xFFFFFFF0u);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_LENGTH);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_LENGTH), 2);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, 82);
    /* Magic 1 and 0 (legacy message sets) are refused before anything else. */
    b[GR_BATCH_OFF_MAGIC] = 1;
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_MAGIC);
    b[GR_BATCH_OFF_MAGIC] = 0;
    assert_int_equal(validate(b, 20, &why), GR_BATCH_ERR_MAGIC);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_MAGIC), 87);
    b[GR_BATCH_OFF_MAGIC] = 2;
    assert_int_equal(validate(b, n, &why), 0);
    free(b);
}

/* Rewrites header fields covered by the CRC and recomputes it, so the check under test is reached. */
static void patch32(uint8_t *b, size_t len, size_t off, uint32_t v)
{
    gr_put_be32(b + off, v);
    gr_batch_crc_store(b, len);
}

static void test_offset_and_count_rules(void **state)
{
    (void)state;
    uint8_t *b = golden_copy();
    const char *why;
    size_t n = sizeof GOLDEN_NONE;
    /* KAFKA-6554: last offset delta must be record count - 1. */
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 3);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_OFFSETS);
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 1);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_OFFSETS);
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 0xFFFFFFFFu);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_OFFSETS);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_OFFSETS), 87);
    /* Record count above the records present (with a consistent last offset delta). */
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 3);
    patch32(b, n, GR_BATCH_OFF_RECORD_COUNT, 4);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_COUNT);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_COUNT), 87);
    /* A count too large for the bytes at all is refused up front. */
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 0x7FFFFFFE);
    patch32(b, n, GR_BATCH_OFF_RECORD_COUNT, 0x7FFFFFFF);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_COUNT);
    /* Record count below the records present: the rest are trailing bytes. */
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 1);
    patch32(b, n, GR_BATCH_OFF_RECORD_COUNT, 2);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_TRAILING);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_TRAILING), 87);
    /* Count 0 (and -1) from a client. */
    patch32(b, n, GR_BATCH_OFF_LAST_OFFSET_DELTA, 0xFFFFFFFFu);
    patch32(b, n, GR_BATCH_OFF_RECORD_COUNT, 0);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_OFFSETS);
    free(b);
}

static void test_producer_rules_and_codec(void **state)
{
    (void)state;
    uint8_t *b = golden_copy();
    const char *why;
    size_t n = sizeof GOLDEN_NONE;
    /* Control batch from a client. */
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_BATCH_ATTR_CONTROL);
    gr_batch_crc_store(b, n);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_CONTROL);
    assert_int_equal(gr_batch_validate_ex(b, n, 0, NULL, NULL), 0); /* stored data may hold markers */
    /* Producer id without a base sequence. */
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, 0);
    gr_put_be64(b + GR_BATCH_OFF_PRODUCER_ID, 77);
    gr_batch_crc_store(b, n);
    assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_SEQUENCE);
    patch32(b, n, GR_BATCH_OFF_BASE_SEQUENCE, 0);
    assert_int_equal(validate(b, n, &why), 0);
    /* Unknown codecs 5, 6, 7. */
    for (uint16_t codec = 5; codec <= 7; codec++) {
        gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, codec);
        gr_batch_crc_store(b, n);
        assert_int_equal(validate(b, n, &why), GR_BATCH_ERR_CODEC);
        struct gr_record_iter it;
        assert_int_equal(gr_record_iter_init(&it, b, n), GR_BATCH_ERR_CODEC);
        gr_record_iter_close(&it);
    }
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_CODEC), 76);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_DECOMPRESS), 2);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_TOO_LARGE), 10);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_RECORD), 87);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_CONTROL), 87);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_SEQUENCE), 87);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_NO_MEMORY), -1);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_OK), 0);
    free(b);
}

/* ---- crafted record sections ---- */

struct w {
    uint8_t buf[4096];
    size_t n;
};
static void w_u8(struct w *w, uint8_t v)
{
    w->buf[w->n++] = v;
}
static void w_uvar(struct w *w, uint64_t v)
{
    while (v >= 0x80) {
        w_u8(w, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    w_u8(w, (uint8_t)v);
}
static void w_var(struct w *w, int64_t v)
{
    w_uvar(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
static void w_raw(struct w *w, const char *s, size_t n)
{
    memcpy(w->buf + w->n, s, n);
    w->n += n;
}
/* A well-formed record: length, attributes 0, timestamp delta, offset delta, key, value, no headers. */
static void w_record(struct w *w, int64_t ts_delta, int32_t offset_delta, const char *key, const char *value)
{
    struct w body = {.n = 0};
    w_u8(&body, 0);
    w_var(&body, ts_delta);
    w_var(&body, offset_delta);
    if (key) {
        w_var(&body, (int64_t)strlen(key));
        w_raw(&body, key, strlen(key));
    } else {
        w_var(&body, -1);
    }
    if (value) {
        w_var(&body, (int64_t)strlen(value));
        w_raw(&body, value, strlen(value));
    } else {
        w_var(&body, -1);
    }
    w_var(&body, 0);
    w_var(w, (int64_t)body.n);
    w_raw(w, (const char *)body.buf, body.n);
}

static int assemble_validate(enum gr_codec codec, unsigned flags, int32_t count, int32_t lod,
                             const struct w *sec, const char **why)
{
    struct gr_batch_params bp = params(codec);
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_assemble(&bp, count, lod, 1000, 1000, sec->buf, sec->n, &b, &len), 0);
    *why = NULL;
    int r = gr_batch_validate_ex(b, len, flags, NULL, why);
    if (r) assert_non_null(*why);
    free(b);
    return r;
}

static void test_offset_deltas_out_of_sequence(void **state)
{
    (void)state;
    const char *why;
    for (int c = 0; c < NCODECS; c++) {
        struct w sec = {.n = 0};
        w_record(&sec, 0, 0, "a", "1");
        w_record(&sec, 0, 2, "b", "2"); /* skips 1 */
        w_record(&sec, 0, 3, "c", "3");
        assert_int_equal(assemble_validate(all_codecs[c], GR_BATCH_CHECK_CLIENT, 3, 2, &sec, &why),
                         GR_BATCH_ERR_OFFSETS);
        /* As stored (compacted) data with last offset delta 3 the gaps are fine... */
        assert_int_equal(assemble_validate(all_codecs[c], 0, 3, 3, &sec, &why), 0);
        /* ...but not a delta past the last offset delta, nor going backwards. */
        assert_int_equal(assemble_validate(all_codecs[c], 0, 3, 2, &sec, &why), GR_BATCH_ERR_OFFSETS);
        sec.n = 0;
        w_record(&sec, 0, 1, "a", "1");
        w_record(&sec, 0, 0, "b", "2");
        assert_int_equal(assemble_validate(all_codecs[c], 0, 2, 1, &sec, &why), GR_BATCH_ERR_OFFSETS);
        assert_int_equal(assemble_validate(all_codecs[c], GR_BATCH_CHECK_CLIENT, 2, 1, &sec, &why),
                         GR_BATCH_ERR_OFFSETS);
    }
}

static void test_trailing_garbage_inside_each_codec(void **state)
{
    (void)state;
    const char *why;
    for (int c = 0; c < NCODECS; c++) {
        struct w sec = {.n = 0};
        w_record(&sec, 0, 0, "a", "1");
        w_record(&sec, 5, 1, NULL, "2");
        assert_int_equal(assemble_validate(all_codecs[c], GR_BATCH_CHECK_CLIENT, 2, 1, &sec, &why), 0);
        w_u8(&sec, 0); /* one byte after the last record */
        assert_int_equal(assemble_validate(all_codecs[c], GR_BATCH_CHECK_CLIENT, 2, 1, &sec, &why),
                         GR_BATCH_ERR_TRAILING);
        /* A whole extra record beyond the count. */
        sec.n--;
        w_record(&sec, 0, 2, "c", "3");
        assert_int_equal(assemble_validate(all_codecs[c], GR_BATCH_CHECK_CLIENT, 2, 1, &sec, &why),
                         GR_BATCH_ERR_TRAILING);
    }
}

static void test_malformed_records(void **state)
{
    (void)state;
    const char *why;
    struct w sec;
    for (int c = 0; c < NCODECS; c++) {
        enum gr_codec codec = all_codecs[c];
        /* Negative record length. */
        sec.n = 0;
        w_var(&sec, -5);
        w_raw(&sec, "\0\0\0\0\0\0", 6);
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        /* Length one larger / one smaller than the fields. */
        sec.n = 0;
        w_var(&sec, 7);
        w_raw(&sec, "\0\0\0\x01\x01\0", 6); /* attrs, ts 0, delta 0, null key, null value, 0 headers */
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        sec.buf[0] = 5 << 1;
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        sec.buf[0] = 6 << 1;
        sec.n = 7;
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why), 0);
        /* Negative header count. */
        sec.n = 0;
        w_var(&sec, 6);
        w_raw(&sec, "\0\0\0\x01\x01\x01", 6);
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        /* Header with a null key. */
        sec.n = 0;
        w_var(&sec, 8);
        w_raw(&sec, "\0\0\0\x01\x01\x02\x01\x01", 8);
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        /* Key longer than the record. */
        sec.n = 0;
        w_var(&sec, 7);
        w_raw(&sec, "\0\0\0\x10xyz", 7);
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        /* A 6-byte varint for the offset delta. */
        sec.n = 0;
        w_var(&sec, 11);
        w_raw(&sec, "\0\0\x80\x80\x80\x80\x80\x00\x01\x01\x00", 11);
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        /* Records ending inside a record. */
        sec.n = 0;
        w_record(&sec, 0, 0, "key", "value");
        sec.n -= 2;
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why),
                         GR_BATCH_ERR_RECORD);
        /* Key and value length -2 read as null, as Kafka reads any negative length. */
        sec.n = 0;
        w_var(&sec, 6);
        w_raw(&sec, "\0\0\0\x03\x03\0", 6);
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why), 0);
        /* Attributes with the high bit set are accepted (Kafka ignores record attributes). */
        sec.buf[1] = 0x80;
        assert_int_equal(assemble_validate(codec, GR_BATCH_CHECK_CLIENT, 1, 0, &sec, &why), 0);
    }
}

static size_t put_var(uint8_t *p, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

/* One record with a `key`-byte key, larger than validation's 64 KiB window, so compressed batches take
 * the streaming parser; `tail` is what follows the key (value length, header count, ...). */
static int big_record_key_validate(enum gr_codec codec, size_t key, int32_t len_adjust, const uint8_t *tail,
                                   size_t tail_len, size_t extra_bytes)
{
    uint8_t *sec = calloc(1, key + tail_len + extra_bytes + 64);
    uint8_t body_head[16];
    size_t h = 0;
    body_head[h++] = 0;             /* attributes */
    h += put_var(body_head + h, 0); /* timestamp delta */
    h += put_var(body_head + h, 0); /* offset delta */
    h += put_var(body_head + h, (int64_t)key);
    size_t n = put_var(sec, (int64_t)(h + key + tail_len) + len_adjust);
    memcpy(sec + n, body_head, h);
    n += h + key; /* key bytes are zeros */
    memcpy(sec + n, tail, tail_len);
    n += tail_len + extra_bytes;
    struct gr_batch_params bp = params(codec);
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_assemble(&bp, 1, 0, 0, 0, sec, n, &b, &len), 0);
    const char *why = NULL;
    int r = gr_batch_validate(b, len, NULL, &why);
    free(b);
    free(sec);
    return r;
}

static int big_record_validate(enum gr_codec codec, int32_t len_adjust, const uint8_t *tail, size_t tail_len,
                               size_t extra_bytes)
{
    return big_record_key_validate(codec, 100000, len_adjust, tail, tail_len, extra_bytes);
}

static void test_malformed_big_records_streaming(void **state)
{
    (void)state;
    for (int c = 0; c < NCODECS; c++) {
        enum gr_codec codec = all_codecs[c];
        /* Well formed: null value, no headers. */
        assert_int_equal(big_record_validate(codec, 0, (const uint8_t *)"\x01\x00", 2, 0), 0);
        /* Negative header count. */
        assert_int_equal(big_record_validate(codec, 0, (const uint8_t *)"\x01\x01", 2, 0),
                         GR_BATCH_ERR_RECORD);
        /* Header key length negative. */
        assert_int_equal(big_record_validate(codec, 0, (const uint8_t *)"\x01\x02\x01\x01", 4, 0),
                         GR_BATCH_ERR_RECORD);
        /* Record length one more than its fields (a zero byte follows, so data does not just end). */
        assert_int_equal(big_record_validate(codec, 1, (const uint8_t *)"\x01\x00", 2, 1),
                         GR_BATCH_ERR_RECORD);
        /* Record length one less than its fields. */
        assert_int_equal(big_record_validate(codec, -1, (const uint8_t *)"\x01\x00", 2, 0),
                         GR_BATCH_ERR_RECORD);
        /* Value length 5 with the record (and the records) ending after 2 of its bytes. */
        assert_int_equal(big_record_validate(codec, 0, (const uint8_t *)"\x0a\x41\x42", 3, 0),
                         GR_BATCH_ERR_RECORD);
        /* A 6-byte varint as the value length. */
        assert_int_equal(big_record_validate(codec, 0, (const uint8_t *)"\x80\x80\x80\x80\x80\x00\x00", 7, 0),
                         GR_BATCH_ERR_RECORD);
        /* The value length varint straddling two fills of the 64 KiB window: the record starts with a
         * 3-byte length, then attributes, timestamp, offset delta, a 3-byte key length: 9 bytes, so a
         * 131062-byte key puts the 2-byte varint at stream offsets 131071..131072. */
        uint8_t tail[103] = {0xC8, 0x01}; /* value length 100, 100 value bytes, 0 headers */
        assert_int_equal(big_record_key_validate(codec, 131062, 0, tail, sizeof tail, 0), 0);
        /* Trailing byte after a well-formed big record. */
        assert_int_equal(big_record_validate(codec, 0, (const uint8_t *)"\x01\x00", 2, 1),
                         GR_BATCH_ERR_TRAILING);
    }
}

static void test_count_zero_stored_batch(void **state)
{
    (void)state;
    /* An empty batch (count 0) as log compaction leaves them: fine as stored data, not from a client. */
    struct gr_batch_params bp = params(GR_CODEC_NONE);
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_assemble(&bp, 0, 9, -1, -1, NULL, 0, &b, &len), 0);
    assert_int_equal(len, 61);
    struct gr_batch_info info;
    assert_int_equal(gr_batch_validate_ex(b, len, 0, &info, NULL), 0);
    assert_int_equal(info.records_max_timestamp, -1);
    assert_int_equal(info.records_max_timestamp_offset_delta, -1);
    assert_int_equal(gr_batch_validate(b, len, NULL, NULL), GR_BATCH_ERR_OFFSETS);
    struct gr_record_iter it;
    struct gr_record rec;
    assert_int_equal(gr_record_iter_init(&it, b, len), 0);
    assert_int_equal(gr_record_iter_next(&it, &rec), 0);
    gr_record_iter_close(&it);
    free(b);
}

/* ---- snappy forms, log append time, header-only, splitting ---- */

/* Re-wraps an uncompressed batch's records as one raw snappy block (librdkafka's form). */
static uint8_t *raw_snappy_batch(const uint8_t *plain, size_t plain_len, size_t *len)
{
    size_t rec_len = plain_len - 61, clen = snappy_max_compressed_length(rec_len);
    uint8_t *b = malloc(61 + clen);
    memcpy(b, plain, 61);
    assert_int_equal(snappy_compress((const char *)plain + 61, rec_len, (char *)b + 61, &clen), SNAPPY_OK);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, (uint32_t)(49 + clen));
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_CODEC_SNAPPY);
    *len = 61 + clen;
    gr_batch_crc_store(b, *len);
    return b;
}

static void test_snappy_raw_and_xerial_batches(void **state)
{
    (void)state;
    size_t len;
    uint8_t *raw = raw_snappy_batch(GOLDEN_NONE, sizeof GOLDEN_NONE, &len);
    assert_false(memcmp(raw + 61, "\x82SNAPPY", 7) == 0);
    struct gr_batch_info info;
    assert_int_equal(gr_batch_validate(raw, len, &info, NULL), 0);
    assert_int_equal(info.codec, GR_CODEC_SNAPPY);
    assert_int_equal(info.records_bytes, 33);
    assert_records(raw, len, golden_records, 3, 0);
    free(raw);
    /* Ours: xerial with the exact 16-byte header. */
    struct gr_batch_params bp = params(GR_CODEC_SNAPPY);
    uint8_t *b;
    assert_int_equal(gr_batch_build(&bp, golden_records, 3, &b, &len), 0);
    static const uint8_t header[16] = {0x82, 0x53, 0x4E, 0x41, 0x50, 0x50, 0x59, 0x00,
                                       0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01};
    assert_memory_equal(b + 61, header, 16);
    assert_int_equal(gr_batch_validate(b, len, NULL, NULL), 0);
    free(b);
}

static void test_log_append_time_iteration(void **state)
{
    (void)state;
    struct gr_batch_params bp = params(GR_CODEC_LZ4);
    bp.attributes = GR_BATCH_ATTR_LOG_APPEND_TIME;
    bp.log_append_time = 1800000000000LL;
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_build(&bp, golden_records, 3, &b, &len), 0);
    assert_int_equal(gr_batch_max_timestamp(b), 1800000000000LL);
    assert_int_equal(gr_batch_attributes(b), GR_BATCH_ATTR_LOG_APPEND_TIME | GR_CODEC_LZ4);
    struct gr_batch_info info;
    assert_int_equal(gr_batch_validate(b, len, &info, NULL), 0);
    assert_int_equal(info.records_max_timestamp, 1700000000005LL); /* as created, for the server's checks */
    struct gr_record_iter it;
    struct gr_record rec;
    assert_int_equal(gr_record_iter_init(&it, b, len), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gr_record_iter_next(&it, &rec), 1);
        assert_int_equal(rec.timestamp, 1800000000000LL);
    }
    gr_record_iter_close(&it);
    free(b);
}

/* Kafka LogValidator's per-record rules: each refused record once (its key first), all of them counted,
   only out_max written. */
static void test_refused_records(void **state)
{
    (void)state;
    int64_t now = 1700000000000LL, hour = 3600000;
    struct gr_record_in recs[5];
    int64_t ts[] = {now, now - 2 * hour, now, now + 2 * hour, -1};
    bool keyed[] = {true, false, true, false, true};
    for (int i = 0; i < 5; i++)
        recs[i] = (struct gr_record_in){.timestamp = ts[i],
                                        .key = keyed[i] ? (struct gr_bytes){(const uint8_t *)"k", 1}
                                                        : (struct gr_bytes){NULL, -1},
                                        .value = {(const uint8_t *)"vvv", 3}};
    enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_ZSTD};
    for (int c = 0; c < 2; c++) {
        struct gr_batch_params bp = params(codecs[c]);
        uint8_t *b;
        size_t len;
        assert_int_equal(gr_batch_build(&bp, recs, 5, &b, &len), 0);
        struct gr_record_rules rules = {
            .key_required = true, .before_max_ms = hour, .after_max_ms = hour, .now_ms = now};
        struct gr_record_refusal out[4];
        /* record 1: null key (checked before its timestamp); 3: null key; -1 is exempt from the bounds */
        assert_int_equal(gr_batch_refused_records(b, len, &rules, out, 4), 2);
        assert_int_equal(out[0].batch_index, 1);
        assert_int_equal(out[0].err, GR_BATCH_ERR_RECORD_KEY);
        assert_int_equal(out[1].batch_index, 3);
        assert_int_equal(out[1].err, GR_BATCH_ERR_RECORD_KEY);
        rules.key_required = false; /* now the timestamps of records 1 and 3 */
        assert_int_equal(gr_batch_refused_records(b, len, &rules, out, 1), 2); /* counted, one written */
        assert_int_equal(out[0].batch_index, 1);
        assert_int_equal(out[0].err, GR_BATCH_ERR_TIMESTAMP);
        assert_int_equal(out[0].timestamp, now - 2 * hour);
        assert_int_equal(out[0].offset, 1);
        assert_int_equal(out[0].key_bytes, -1);
        assert_int_equal(out[0].value_bytes, 3);
        assert_int_equal(gr_batch_refused_records(b, len, &rules, NULL, 0), 2);
        rules.log_append_time = true; /* no bounds, and no LogAppendTime bit from the producer */
        assert_int_equal(gr_batch_refused_records(b, len, &rules, NULL, 0), 0);
        free(b);
        bp.attributes = GR_BATCH_ATTR_LOG_APPEND_TIME; /* the producer set it: every record refused */
        bp.log_append_time = now;
        assert_int_equal(gr_batch_build(&bp, recs, 5, &b, &len), 0);
        assert_int_equal(gr_batch_refused_records(b, len, &rules, out, 4), 5);
        assert_int_equal(out[3].err, GR_BATCH_ERR_TIMESTAMP_TYPE);
        assert_int_equal(out[3].timestamp, now); /* read as the header's max timestamp */
        assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_TIMESTAMP_TYPE), 32);
        assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_RECORD_KEY), 87);
        free(b);
    }
}

static void test_header_only_mode(void **state)
{
    (void)state;
    /* Records garbage under a valid CRC: the header-only check passes, the full one does not. */
    struct w sec = {.n = 0};
    w_raw(&sec, "\x7f\x7f\x7f", 3);
    struct gr_batch_params bp = params(GR_CODEC_NONE);
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_assemble(&bp, 1, 0, 5, 5, sec.buf, sec.n, &b, &len), 0);
    assert_int_equal(
        gr_batch_validate_ex(b, len, GR_BATCH_CHECK_HEADER_ONLY | GR_BATCH_CHECK_CLIENT, NULL, NULL), 0);
    assert_int_equal(gr_batch_validate(b, len, NULL, NULL), GR_BATCH_ERR_COUNT);
    b[len - 1] ^= 1;
    assert_int_equal(gr_batch_validate_ex(b, len, GR_BATCH_CHECK_HEADER_ONLY, NULL, NULL), GR_BATCH_ERR_CRC);
    free(b);
}

static void test_split_batches(void **state)
{
    (void)state;
    size_t n = sizeof GOLDEN_NONE, zlen;
    uint8_t *z = from_hex(GOLDEN_HEX[4], &zlen);
    uint8_t *buf = malloc(2 * n + zlen + 30);
    memcpy(buf, GOLDEN_NONE, n);
    memcpy(buf + n, z, zlen);
    memcpy(buf + n + zlen, GOLDEN_NONE, n);
    size_t total = 2 * n + zlen, pos = 0, blen, tail;
    const uint8_t *b;
    assert_int_equal(gr_batch_next(buf, total, &pos, &b, &blen), 1);
    assert_ptr_equal(b, buf);
    assert_int_equal(blen, n);
    assert_int_equal(gr_batch_next(buf, total, &pos, &b, &blen), 1);
    assert_ptr_equal(b, buf + n);
    assert_int_equal(blen, zlen);
    assert_int_equal(gr_batch_validate(b, blen, NULL, NULL), 0);
    assert_int_equal(gr_batch_next(buf, total, &pos, &b, &blen), 1);
    assert_int_equal(pos, total);
    assert_int_equal(gr_batch_next(buf, total, &pos, &b, &blen), 0);
    assert_int_equal(gr_batches_count(buf, total, &tail), 3);
    assert_int_equal(tail, 0);
    /* A partial tail (as a crash can leave at a segment's end) is reported, not counted. */
    assert_int_equal(gr_batches_count(buf, total - 1, &tail), 2);
    assert_int_equal(tail, n - 1);
    assert_int_equal(gr_batches_count(buf, n + 5, &tail), 1);
    assert_int_equal(tail, 5);
    pos = n;
    assert_int_equal(gr_batch_next(buf, n + 5, &pos, &b, &blen), GR_BATCH_ERR_TRUNCATED);
    assert_int_equal(pos, n);
    /* Two batches where one is allowed. */
    assert_int_equal(gr_batch_validate(buf, 2 * n, NULL, NULL), GR_BATCH_ERR_EXTRA_BYTES);
    /* A bad length or magic in the second batch stops the walk. */
    buf[n + GR_BATCH_OFF_MAGIC] = 1;
    assert_int_equal(gr_batches_count(buf, total, NULL), GR_BATCH_ERR_MAGIC);
    buf[n + GR_BATCH_OFF_MAGIC] = 2;
    gr_put_be32(buf + n + GR_BATCH_OFF_LENGTH, 10);
    assert_int_equal(gr_batches_count(buf, total, NULL), GR_BATCH_ERR_LENGTH);
    assert_int_equal(gr_batches_count(buf, 0, &tail), 0);
    free(buf);
    free(z);
}

/* ---- corrupt compressed data and bombs ---- */

static void test_corrupt_compressed_records(void **state)
{
    (void)state;
    const char *why;
    for (int c = 1; c < NCODECS; c++) {
        size_t len;
        uint8_t *b = from_hex(GOLDEN_HEX[c], &len);
        /* Damage the compressed section under a recomputed CRC: the last byte (gzip ISIZE, lz4 end mark,
         * zstd content checksum); snappy has no checksum, so its xerial block length instead. */
        size_t at = all_codecs[c] == GR_CODEC_SNAPPY ? 61 + 16 + 2 : len - 1;
        b[at] ^= 0xFF;
        gr_batch_crc_store(b, len);
        int r = validate(b, len, &why);
        if (r != GR_BATCH_ERR_DECOMPRESS) fail_msg("codec %d: %d (%s)", c, r, why);
        /* Cut the compressed section short. */
        b[at] ^= 0xFF;
        gr_put_be32(b + GR_BATCH_OFF_LENGTH, (uint32_t)(len - 12 - 3));
        gr_batch_crc_store(b, len - 3);
        r = validate(b, len - 3, &why);
        if (r != GR_BATCH_ERR_DECOMPRESS) fail_msg("codec %d truncated: %d (%s)", c, r, why);
        free(b);
    }
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* zstd-compresses `prefix` followed by `zeros` zero bytes, streaming, optionally declaring the size. */
static uint8_t *zstd_zeros(const uint8_t *prefix, size_t prefix_len, uint64_t zeros, bool declare,
                           size_t *out_len)
{
    size_t cap = 8 * MiB, chunk = MiB;
    uint8_t *out = malloc(cap), *z = calloc(1, chunk);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    if (declare) ZSTD_CCtx_setPledgedSrcSize(cc, prefix_len + zeros);
    ZSTD_outBuffer ob = {out, cap, 0};
    ZSTD_inBuffer ib = {prefix, prefix_len, 0};
    assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue)));
    while (zeros) {
        size_t n = zeros < chunk ? (size_t)zeros : chunk;
        ZSTD_inBuffer zb = {z, n, 0};
        while (zb.pos < zb.size)
            assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &ob, &zb, ZSTD_e_continue)));
        zeros -= n;
    }
    ZSTD_inBuffer none = {NULL, 0, 0};
    size_t left;
    do {
        left = ZSTD_compressStream2(cc, &ob, &none, ZSTD_e_end);
        assert_false(ZSTD_isError(left));
    } while (left);
    ZSTD_freeCCtx(cc);
    free(z);
    *out_len = ob.pos;
    return out;
}

static void test_decompression_bombs(void **state)
{
    (void)state;
    const char *why;
    long rss_before = max_rss_kib();
    /* 1. One record whose value is 1 GiB of zeros; the zstd frame declares 1 GiB: refused at once. */
    uint64_t gib = 1024ull * MiB;
    struct w pre = {.n = 0};
    w_var(&pre, (int64_t)(gib + 10)); /* record length */
    w_u8(&pre, 0);
    w_var(&pre, 0);
    w_var(&pre, 0);
    w_var(&pre, -1);
    w_var(&pre, (int64_t)gib);
    size_t zlen;
    uint8_t *z = zstd_zeros(pre.buf, pre.n, gib, true, &zlen);
    assert_true(zlen < 256 * 1024);
    struct gr_batch_params bp = params(GR_CODEC_NONE);
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_assemble(&bp, 1, 0, 0, 0, z, zlen, &b, &len), 0);
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_CODEC_ZSTD);
    gr_batch_crc_store(b, len);
    assert_int_equal(validate(b, len, &why), GR_BATCH_ERR_TOO_LARGE);
    assert_int_equal(gr_batch_err_kafka(GR_BATCH_ERR_TOO_LARGE), 10);
    struct gr_record_iter it;
    assert_int_equal(gr_record_iter_init(&it, b, len), GR_BATCH_ERR_TOO_LARGE);
    gr_record_iter_close(&it);
    free(b);
    free(z);
    /* 2. The same without a declared size: streamed and cut at the limit. */
    z = zstd_zeros(pre.buf, pre.n, gib, false, &zlen);
    assert_int_equal(gr_batch_assemble(&bp, 1, 0, 0, 0, z, zlen, &b, &len), 0);
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_CODEC_ZSTD);
    gr_batch_crc_store(b, len);
    assert_int_equal(validate(b, len, &why), GR_BATCH_ERR_TOO_LARGE);
    /* The iterator cannot hold a record over the limit either. */
    struct gr_record rec;
    assert_int_equal(gr_record_iter_init(&it, b, len), 0);
    assert_int_equal(gr_record_iter_next(&it, &rec), GR_BATCH_ERR_TOO_LARGE);
    gr_record_iter_close(&it);
    free(b);
    free(z);
    /* 3. Many honest 1 MiB records adding up past GR_DECOMPRESSED_BATCH_BYTES_MAX: each record is bigger
     * than validation's window, so this also runs the streaming record parser. */
    int32_t count = GR_DECOMPRESSED_BATCH_BYTES_MAX / MiB + 8;
    size_t cap = 8 * MiB, clen;
    uint8_t *cz = malloc(cap), *zero = calloc(1, MiB);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    ZSTD_outBuffer ob = {cz, cap, 0};
    for (int32_t i = 0; i < count; i++) {
        /* length, attributes 0, timestamp delta 0, offset delta i, null key, 1 MiB value, 0 headers */
        struct w hdr = {.n = 0};
        w_var(&hdr, (int64_t)MiB + 8 + (i < 64 ? 1 : 2));
        w_u8(&hdr, 0);
        w_var(&hdr, 0);
        w_var(&hdr, i);
        w_var(&hdr, -1);
        w_var(&hdr, (int64_t)MiB);
        ZSTD_inBuffer h = {hdr.buf, hdr.n, 0}, v = {zero, MiB, 0}, tail = {"\0", 1, 0};
        while (h.pos < h.size)
            assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &ob, &h, ZSTD_e_continue)));
        while (v.pos < v.size)
            assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &ob, &v, ZSTD_e_continue)));
        while (tail.pos < tail.size)
            assert_false(ZSTD_isError(ZSTD_compressStream2(cc, &ob, &tail, ZSTD_e_continue)));
    }
    ZSTD_inBuffer none = {NULL, 0, 0};
    while (ZSTD_compressStream2(cc, &ob, &none, ZSTD_e_end)) {
    }
    clen = ob.pos;
    ZSTD_freeCCtx(cc);
    assert_int_equal(gr_batch_assemble(&bp, count, count - 1, 0, 0, cz, clen, &b, &len), 0);
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_CODEC_ZSTD);
    gr_batch_crc_store(b, len);
    assert_int_equal(validate(b, len, &why), GR_BATCH_ERR_TOO_LARGE);
    free(b);
    free(cz);
    free(zero);
    long grown_mib = (max_rss_kib() - rss_before) / 1024;
    print_message("peak RSS growth during the bomb tests: %ld MiB\n", grown_mib);
    assert_true(grown_mib < 64);
}

/* ---- random damage: the validator never crashes, and what it accepts the iterator reads fully ---- */

static uint64_t mut_state = 0x2545F4914F6CDD1Dull;
static uint32_t mut_rand(void)
{
    mut_state ^= mut_state << 13;
    mut_state ^= mut_state >> 7;
    mut_state ^= mut_state << 17;
    return (uint32_t)(mut_state >> 16);
}

static void check_agreement(const uint8_t *b, size_t len, unsigned flags, int *accepted)
{
    struct gr_batch_info info;
    if (gr_batch_validate_ex(b, len, flags, &info, NULL) != 0) return;
    (*accepted)++;
    struct gr_record_iter it;
    struct gr_record rec;
    assert_int_equal(gr_record_iter_init(&it, b, len), 0);
    int64_t max_ts = -1;
    int32_t max_delta = -1, n = 0;
    int r;
    while ((r = gr_record_iter_next(&it, &rec)) == 1) {
        if (!(info.attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) && rec.timestamp > max_ts) {
            max_ts = rec.timestamp;
            max_delta = rec.offset_delta;
        }
        n++;
    }
    assert_int_equal(r, 0);
    assert_int_equal(n, info.record_count);
    if (!(info.attributes & GR_BATCH_ATTR_LOG_APPEND_TIME)) {
        assert_int_equal(max_ts, info.records_max_timestamp);
        assert_int_equal(max_delta, info.records_max_timestamp_offset_delta);
    }
    gr_record_iter_close(&it);
}

static void test_random_damage(void **state)
{
    (void)state;
    struct gr_batch_params bp = params(GR_CODEC_NONE);
    uint8_t *bases[2 * NCODECS];
    size_t lens[2 * NCODECS];
    bases[0] = golden_copy();
    lens[0] = sizeof GOLDEN_NONE;
    for (int c = 1; c < NCODECS; c++)
        bases[c] = from_hex(GOLDEN_HEX[c], &lens[c]);
    for (int c = 0; c < NCODECS; c++) {
        bp.codec = all_codecs[c];
        assert_int_equal(gr_batch_build(&bp, golden_records, 3, &bases[NCODECS + c], &lens[NCODECS + c]), 0);
    }
    int accepted = 0, tries = 0;
    uint8_t *m = malloc(4096);
    for (int k = 0; k < 2 * NCODECS; k++)
        for (int i = 0; i < 3000; i++, tries++) {
            size_t len = lens[k];
            memcpy(m, bases[k], len);
            int flips = 1 + (int)(mut_rand() % 3);
            for (int f = 0; f < flips; f++) {
                size_t at =
                    GR_BATCH_OFF_LAST_OFFSET_DELTA + mut_rand() % (len - GR_BATCH_OFF_LAST_OFFSET_DELTA);
                m[at] = (mut_rand() & 1) ? (uint8_t)mut_rand() : m[at] ^ (uint8_t)(1u << (mut_rand() % 8));
            }
            if (mut_rand() % 4 == 0) { /* also cut the tail, keeping the length field consistent */
                len -= mut_rand() % (len - GR_BATCH_HEADER_BYTES + 1);
                gr_put_be32(m + GR_BATCH_OFF_LENGTH, (uint32_t)(len - GR_BATCH_LOG_OVERHEAD));
            }
            gr_batch_crc_store(m, len);
            check_agreement(m, len, GR_BATCH_CHECK_CLIENT, &accepted);
            check_agreement(m, len, 0, &accepted);
        }
    /* Most damage is caught, some (a changed value byte, a changed timestamp) is legitimately not. */
    print_message("random damage: %d of %d validations accepted\n", accepted, 2 * tries);
    assert_true(accepted > 0);
    assert_true(accepted < tries);
    free(m);
    for (int k = 0; k < 2 * NCODECS; k++)
        free(bases[k]);
}

static int teardown(void **state)
{
    (void)state;
    gr_batch_thread_cleanup();
    return 0;
}

/* records_body_bytes_max: the largest record length varint of the batch, after decompression, in every
   codec (what Kafka 4.4 bounds by max.decompressed.message.bytes); 0 when the header checks fail first. */
static void test_records_body_bytes_max(void **state)
{
    (void)state;
    static const uint8_t xs[100] = {0};
    /* bodies: attributes, timestamp delta, offset delta, key length -1, value length, value, header count:
       6 + n bytes for n < 64 (value length 1 byte), 7 + n for 64 <= n < 8192 */
    struct gr_record_in recs[3] = {{.timestamp = 1, .key = {NULL, -1}, .value = {xs, 10}},
                                   {.timestamp = 1, .key = {NULL, -1}, .value = {xs, 70}},
                                   {.timestamp = 1, .key = {NULL, -1}, .value = {xs, 3}}};
    for (size_t c = 0; c < sizeof all_codecs / sizeof all_codecs[0]; c++) {
        struct gr_batch_params bp = params(all_codecs[c]);
        uint8_t *b;
        size_t len;
        assert_int_equal(gr_batch_build(&bp, recs, 3, &b, &len), 0);
        struct gr_batch_info info;
        assert_int_equal(gr_batch_validate(b, len, &info, NULL), 0);
        assert_int_equal(info.records_body_bytes_max, 77);
        b[GR_BATCH_OFF_CRC] ^= 1; /* CRC mismatch: nothing read */
        assert_int_equal(gr_batch_validate(b, len, &info, NULL), GR_BATCH_ERR_CRC);
        assert_int_equal(info.records_body_bytes_max, 0);
        free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decompression_bombs), /* first, so its peak RSS is measured from a low base */
        cmocka_unit_test(test_golden_field_by_field),
        cmocka_unit_test(test_golden_java_batches_all_codecs),
        cmocka_unit_test(test_builder_matches_java_bytes),
        cmocka_unit_test(test_roundtrip_edge_records_each_codec),
        cmocka_unit_test(test_roundtrip_one_and_thousand_records),
        cmocka_unit_test(test_large_records_stream_through_window),
        cmocka_unit_test(test_crc_flip_is_corrupt_message),
        cmocka_unit_test(test_framing_errors),
        cmocka_unit_test(test_offset_and_count_rules),
        cmocka_unit_test(test_producer_rules_and_codec),
        cmocka_unit_test(test_offset_deltas_out_of_sequence),
        cmocka_unit_test(test_trailing_garbage_inside_each_codec),
        cmocka_unit_test(test_malformed_records),
        cmocka_unit_test(test_malformed_big_records_streaming),
        cmocka_unit_test(test_count_zero_stored_batch),
        cmocka_unit_test(test_snappy_raw_and_xerial_batches),
        cmocka_unit_test(test_log_append_time_iteration),
        cmocka_unit_test(test_refused_records),
        cmocka_unit_test(test_header_only_mode),
        cmocka_unit_test(test_split_batches),
        cmocka_unit_test(test_corrupt_compressed_records),
        cmocka_unit_test(test_random_damage),
        cmocka_unit_test(test_records_body_bytes_max),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
