/*
 * test_golden.c: request frames captured from real clients (and Apache Kafka 4.1.1's responses to them),
 * decoded with the generated codec. Who made each frame and how: protocol/tests/golden/README.md.
 *
 * For every frame: the header and body decode, the decode consumes exactly the frame, and encoding the
 * decoded structs gives back the identical bytes (real clients write canonical encodings). Produce
 * batches validate as client batches and iterate; Fetch responses' record sets split into batches that
 * validate under the stored-data rules. Then, per client, specific decoded values are asserted (client
 * id, topic and group names, acks, timeouts, max_wait_ms, partition indexes, offsets, record counts and
 * codecs, record keys/values/headers), so that a field read from the wrong place cannot go unnoticed.
 *
 * The frames are read at run time from GR_GOLDEN_DIR (compiled in by golden.cmake) or from argv[1]:
 *   <dir>/<client>/NN-<Api>-v<version>.req.hex   request frame, size prefix removed, hex
 *   <dir>/<client>/NN-<Api>-v<version>.resp.hex  the broker's response frame, when there was one
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"
#include "protocol/tests/support.h"

#ifndef GR_GOLDEN_DIR
#define GR_GOLDEN_DIR "protocol/tests/golden"
#endif

static const char *golden_dir = GR_GOLDEN_DIR;

/* ---- loading ---- */

/* Reads `rel` (relative to golden_dir) as hex, whitespace ignored. Returns false if the file is missing;
 * a bad digit fails the test. *out is malloc'ed. */
static bool load_hex(const char *rel, uint8_t **out, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", golden_dir, rel);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t cap = 4096, n = 0;
    char *hex = malloc(cap);
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (n == cap) hex = realloc(hex, cap *= 2);
        hex[n++] = (char)c;
    }
    fclose(f);
    *out = malloc(n / 2 + 1);
    long got = gr_hex_decode(hex, n, *out);
    free(hex);
    if (got < 0) fail_msg("%s: not hex", rel);
    *len = (size_t)got;
    return true;
}

/* ---- decoding one frame, with the exactness and round-trip checks ---- */

struct frame {
    char rel[512];
    uint8_t *bytes;
    size_t len;
    struct gr_arena arena;
    const struct gr_msg_ops *ops;
    int16_t api_key, version;
    struct gr_request_header hdr; /* requests */
    void *body;
};

/* Encodes header (request) + body of a decoded frame and compares with the original bytes. */
static void check_reencode_request(struct frame *fr, int16_t hv)
{
    size_t hn = gr_request_header_size(&fr->hdr, hv);
    size_t bn = fr->ops->size(fr->body, fr->version);
    if (hn + bn != fr->len)
        fail_msg("%s: re-encoding is %zu + %zu bytes, frame is %zu", fr->rel, hn, bn, fr->len);
    uint8_t *buf = malloc(fr->len);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, fr->len);
    gr_request_header_encode(&wr, &fr->hdr, hv);
    fr->ops->encode(&wr, fr->body, fr->version);
    assert_ptr_equal(wr.p, buf + fr->len);
    for (size_t i = 0; i < fr->len; i++)
        if (buf[i] != fr->bytes[i]) fail_msg("%s: re-encoding differs at byte %zu", fr->rel, i);
    free(buf);
}

/* Loads and decodes a request frame; checks key/version/client id and exactness. Returns the body. */
static void *request_open(struct frame *fr, const char *rel, int16_t key, int16_t version,
                          const char *client_id)
{
    memset(fr, 0, sizeof *fr);
    snprintf(fr->rel, sizeof fr->rel, "%s", rel);
    if (!load_hex(rel, &fr->bytes, &fr->len)) fail_msg("%s: missing", rel);
    gr_arena_init(&fr->arena, 32 * fr->len + (1 << 20));
    int32_t corr;
    assert_int_equal(gr_request_header_peek(fr->bytes, fr->len, &fr->api_key, &fr->version, &corr), 0);
    if (key >= 0 && fr->api_key != key) fail_msg("%s: api key %d, expected %d", rel, fr->api_key, key);
    if (version >= 0 && fr->version != version)
        fail_msg("%s: version %d, expected %d", rel, fr->version, version);
    fr->ops = gr_msg_ops_find(fr->api_key, false);
    if (!fr->ops) fail_msg("%s: no codec for api key %d", rel, fr->api_key);
    if (fr->version < fr->ops->version_min || fr->version > fr->ops->version_max)
        fail_msg("%s: %s v%d outside the codec's range", rel, fr->ops->name, fr->version);
    struct gr_rd rd;
    gr_rd_init(&rd, fr->bytes, fr->len, &fr->arena);
    int16_t hv = gr_request_header_version(fr->version, fr->ops->flexible_min);
    int err = gr_request_header_decode(&rd, hv, &fr->hdr);
    if (err) fail_msg("%s: header decode error %d", rel, err);
    if (client_id && !gr_str_eq_c(fr->hdr.client_id, client_id))
        fail_msg("%s: client id '%.*s', expected '%s'", rel, fr->hdr.client_id.len, fr->hdr.client_id.ptr,
                 client_id);
    fr->body = gr_arena_alloc(&fr->arena, fr->ops->struct_bytes);
    err = fr->ops->decode(&rd, fr->version, fr->body);
    if (err) fail_msg("%s: body decode error %d", rel, err);
    if (gr_rd_left(&rd) != 0) fail_msg("%s: %zu bytes left after the body", rel, gr_rd_left(&rd));
    check_reencode_request(fr, hv);
    return fr->body;
}

/* Loads and decodes a response frame to a request of (key, version); checks exactness and the round
 * trip. Returns the body. */
static void *response_open(struct frame *fr, const char *rel, int16_t key, int16_t version)
{
    memset(fr, 0, sizeof *fr);
    snprintf(fr->rel, sizeof fr->rel, "%s", rel);
    if (!load_hex(rel, &fr->bytes, &fr->len)) fail_msg("%s: missing", rel);
    gr_arena_init(&fr->arena, 32 * fr->len + (1 << 20));
    fr->api_key = key;
    fr->version = version;
    fr->ops = gr_msg_ops_find(key, true);
    assert_non_null(fr->ops);
    int16_t hv = gr_response_header_version(fr->ops, version);
    struct gr_rd rd;
    gr_rd_init(&rd, fr->bytes, fr->len, &fr->arena);
    int32_t corr = gr_rd_int32(&rd);
    if (hv >= 1) assert_int_equal(gr_rd_tag_count(&rd), 0); /* Kafka writes no response header tags */
    assert_int_equal(rd.err, 0);
    fr->body = gr_arena_alloc(&fr->arena, fr->ops->struct_bytes);
    int err = fr->ops->decode(&rd, version, fr->body);
    if (err) fail_msg("%s: body decode error %d", rel, err);
    if (gr_rd_left(&rd) != 0) fail_msg("%s: %zu bytes left after the body", rel, gr_rd_left(&rd));
    size_t n = gr_response_header_size(hv) + fr->ops->size(fr->body, version);
    if (n != fr->len) fail_msg("%s: re-encoding is %zu bytes, frame is %zu", rel, n, fr->len);
    uint8_t *buf = malloc(n);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, n);
    gr_response_header_encode(&wr, hv, corr);
    fr->ops->encode(&wr, fr->body, version);
    if (memcmp(buf, fr->bytes, n) != 0) fail_msg("%s: re-encoding differs", rel);
    free(buf);
    return fr->body;
}

static void frame_close(struct frame *fr)
{
    gr_arena_reset(&fr->arena);
    free(fr->bytes);
    fr->bytes = NULL;
}

/* ---- record batches ---- */

static bool bytes_eq_c(struct gr_bytes b, const char *s)
{
    return b.len >= 0 && (size_t)b.len == strlen(s) && memcmp(b.ptr, s, (size_t)b.len) == 0;
}

/* What every flow appends to its record values, so that they compress (see golden/README.md). */
#define GOLDEN_FILLER                                                                                        \
    " gregor golden frame gregor golden frame gregor golden frame gregor golden frame gregor golden frame"   \
    " gregor golden frame gregor golden frame gregor golden frame"

struct batch_expect {
    enum gr_codec codec;
    const char *codec_name; /* the values are "<codec_name> value <i>" */
    bool idempotent;        /* producer id >= 0, base sequence 0 */
    int32_t base_sequence;  /* when not idempotent: -1, except kafkajs, which always writes 0 */
    int32_t header_count0;  /* headers on record 0 (record 1 always has h=x) */
};

/* Validates one Produce `records` field as a single client batch and checks its records: two records,
 * keys k0/k1, values "<codec> value 0/1" + GOLDEN_FILLER, offset deltas 0/1, header h=x on record 1. */
static void check_produce_batch(const char *rel, struct gr_bytes records, const struct batch_expect *e)
{
    assert_true(records.len > GR_BATCH_HEADER_BYTES);
    struct gr_batch_info info;
    const char *why = NULL;
    int rc = gr_batch_validate(records.ptr, (size_t)records.len, &info, &why);
    if (rc != 0) fail_msg("%s: batch refused: %d (%s)", rel, rc, why ? why : "?");
    if (info.codec != e->codec)
        fail_msg("%s: codec %d, expected %d (%s)", rel, info.codec, e->codec, e->codec_name);
    assert_int_equal(info.record_count, 2);
    assert_int_equal(info.last_offset_delta, 1);
    assert_int_equal(info.base_offset, 0);
    assert_int_equal(info.attributes & ~GR_BATCH_ATTR_CODEC_MASK, 0); /* create time, not transactional */
    if (e->idempotent) {
        if (info.producer_id < 0) fail_msg("%s: idempotent producer without producer id", rel);
        assert_int_equal(info.base_sequence, 0);
        assert_true(info.producer_epoch >= 0);
    } else {
        assert_int_equal(info.producer_id, -1);
        assert_int_equal(info.base_sequence, e->base_sequence);
    }
    assert_true(info.base_timestamp > 1600000000000LL); /* wall-clock ms, after 2020 */
    assert_true(info.max_timestamp >= info.base_timestamp);

    struct gr_record_iter it;
    assert_int_equal(gr_record_iter_init(&it, records.ptr, (size_t)records.len), 0);
    struct gr_record rec;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(gr_record_iter_next(&it, &rec), 1);
        assert_int_equal(rec.offset_delta, i);
        char key[8], value[256];
        snprintf(key, sizeof key, "k%d", i);
        snprintf(value, sizeof value, "%s value %d%s", e->codec_name, i, GOLDEN_FILLER);
        if (!bytes_eq_c(rec.key, key)) fail_msg("%s: record %d key '%.*s'", rel, i, rec.key.len, rec.key.ptr);
        if (!bytes_eq_c(rec.value, value))
            fail_msg("%s: record %d value '%.*s', expected '%s'", rel, i, rec.value.len, rec.value.ptr,
                     value);
        assert_int_equal(rec.header_count, i == 0 ? e->header_count0 : 1);
        if (rec.header_count > 0) {
            struct gr_bytes hs = rec.headers;
            struct gr_record_header h;
            assert_true(gr_record_header_next(&hs, &h));
            assert_true(bytes_eq_c(h.key, "h"));
            assert_true(bytes_eq_c(h.value, "x"));
        }
    }
    assert_int_equal(gr_record_iter_next(&it, &rec), 0);
    gr_record_iter_close(&it);
}

/* Splits a Fetch response's record set into batches, validates each under the stored-data rules and
 * iterates it. Returns the number of records; *batches gets the number of batches, *codec_mask a bit per
 * codec seen. The last offset must be `last_offset` when there are records. */
static int32_t check_fetched_records(const char *rel, struct gr_bytes records, int32_t *batches,
                                     unsigned *codec_mask, int64_t last_offset)
{
    *batches = 0;
    *codec_mask = 0;
    if (records.len <= 0) return 0;
    size_t pos = 0, blen;
    const uint8_t *b;
    int32_t total = 0;
    int64_t next_offset = -1;
    int rc;
    while ((rc = gr_batch_next(records.ptr, (size_t)records.len, &pos, &b, &blen)) == 1) {
        struct gr_batch_info info;
        const char *why = NULL;
        rc = gr_batch_validate_ex(b, blen, 0, &info, &why);
        if (rc != 0) fail_msg("%s: fetched batch %d refused: %d (%s)", rel, *batches, rc, why ? why : "?");
        if (next_offset >= 0) assert_int_equal(info.base_offset, next_offset);
        next_offset = info.base_offset + info.last_offset_delta + 1;
        assert_true(info.partition_leader_epoch >= 0); /* set by the broker */
        *codec_mask |= 1u << info.codec;
        struct gr_record_iter it;
        assert_int_equal(gr_record_iter_init(&it, b, blen), 0);
        struct gr_record rec;
        int32_t n = 0;
        while ((rc = gr_record_iter_next(&it, &rec)) == 1) {
            assert_int_equal(rec.offset, info.base_offset + n);
            n++;
        }
        assert_int_equal(rc, 0);
        gr_record_iter_close(&it);
        assert_int_equal(n, info.record_count);
        total += n;
        (*batches)++;
    }
    if (rc != 0) fail_msg("%s: record set does not split: %d", rel, rc);
    assert_int_equal(next_offset - 1, last_offset);
    return total;
}

/* ---- shared shapes ---- */

struct client {
    const char *dir;       /* golden/<dir>/ */
    const char *client_id; /* header client id */
    const char *topic;
    const char *group;
};

static void path(char *out, size_t n, const struct client *c, const char *file)
{
    snprintf(out, n, "%s/%s", c->dir, file);
}

/* Produce: acks -1, timeout 30000 ms, one topic (by name before v13, by id from v13), partition 0, one
 * batch as in batch_expect; the response gives base offset `base_offset` on partition 0 without error. */
static void check_produce(const struct client *c, const char *file, int16_t version,
                          const struct batch_expect *e, int64_t base_offset)
{
    char rel[512];
    path(rel, sizeof rel, c, file);
    strcat(rel, ".req.hex");
    struct frame fr;
    struct gr_produce_request *req = request_open(&fr, rel, 0, version, c->client_id);
    assert_int_equal(req->transactional_id.len, -1);
    assert_int_equal(req->acks, -1);
    assert_int_equal(req->timeout_ms, 30000);
    assert_int_equal(req->topic_data.count, 1);
    struct gr_produce_request_topic_produce_data *td = &req->topic_data.items[0];
    if (version >= 13) {
        static const struct gr_uuid zero;
        assert_true(memcmp(&td->topic_id, &zero, sizeof zero) != 0);
    } else if (!gr_str_eq_c(td->name, c->topic)) {
        fail_msg("%s: topic '%.*s'", rel, td->name.len, td->name.ptr);
    }
    assert_int_equal(td->partition_data.count, 1);
    assert_int_equal(td->partition_data.items[0].index, 0);
    check_produce_batch(rel, td->partition_data.items[0].records.mem, e);
    frame_close(&fr);

    path(rel, sizeof rel, c, file);
    strcat(rel, ".resp.hex");
    struct gr_produce_response *resp = response_open(&fr, rel, 0, version);
    assert_int_equal(resp->responses.count, 1);
    assert_int_equal(resp->responses.items[0].partition_responses.count, 1);
    struct gr_produce_response_partition_produce_response *pr =
        &resp->responses.items[0].partition_responses.items[0];
    assert_int_equal(pr->index, 0);
    assert_int_equal(pr->error_code, 0);
    if (pr->base_offset != base_offset)
        fail_msg("%s: base offset %lld, expected %lld", rel, (long long)pr->base_offset,
                 (long long)base_offset);
    assert_int_equal(pr->log_append_time_ms, -1);
    frame_close(&fr);
}

/* All five codecs in the flow's order, two records each: base offsets 0, 2, 4, 6, 8. */
static void check_produce_all(const struct client *c, const char *const *files, int16_t version,
                              bool idempotent, int32_t base_sequence, int32_t header_count0, int ncodecs)
{
    static const char *names[] = {"none", "gzip", "snappy", "lz4", "zstd"};
    for (int i = 0; i < ncodecs; i++) {
        struct batch_expect e = {(enum gr_codec)i, names[i], idempotent, base_sequence, header_count0};
        check_produce(c, files[i], version, &e, 2 * i);
    }
}

static void check_api_versions(const struct client *c, const char *file, int16_t version, const char *sw_name,
                               const char *sw_version)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_api_versions_request *req = request_open(&fr, rel, 18, version, c->client_id);
    if (version >= 3) {
        assert_true(gr_str_eq_c(req->client_software_name, sw_name));
        assert_true(gr_str_eq_c(req->client_software_version, sw_version));
    }
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_api_versions_response *resp = response_open(&fr, rel, 18, version);
    assert_int_equal(resp->error_code, 0);
    bool produce = false, fetch = false;
    for (int32_t i = 0; i < resp->api_keys.count; i++) {
        const struct gr_api_versions_response_api_version *av = &resp->api_keys.items[i];
        assert_true(av->min_version <= av->max_version);
        if (av->api_key == 0) {
            produce = true;
            assert_int_equal(av->max_version, 13); /* Kafka 4.1.1 */
            assert_int_equal(av->min_version, 0);  /* KAFKA-18659: advertised from v0 */
        }
        if (av->api_key == 1) {
            fetch = true;
            assert_int_equal(av->max_version, 18);
        }
    }
    assert_true(produce && fetch);
    assert_true(resp->api_keys.count >= 40);
    frame_close(&fr);
}

/* CreateTopics of the flow's topic, 2 partitions, replication 1, timeout within [timeout_min_ms,
 * timeout_max_ms] (the Java admin client sends what is left of its 30 s budget). */
static void check_create_topics(const struct client *c, const char *file, int16_t version,
                                int32_t timeout_min_ms, int32_t timeout_max_ms)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_create_topics_request *req = request_open(&fr, rel, 19, version, c->client_id);
    assert_int_equal(req->topics.count, 1);
    assert_true(gr_str_eq_c(req->topics.items[0].name, c->topic));
    assert_int_equal(req->topics.items[0].num_partitions, 2);
    assert_int_equal(req->topics.items[0].replication_factor, 1);
    assert_int_equal(req->topics.items[0].assignments.count, 0);
    assert_int_equal(req->topics.items[0].configs.count, 0);
    assert_in_range(req->timeout_ms, timeout_min_ms, timeout_max_ms);
    assert_false(req->validate_only);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_create_topics_response *resp = response_open(&fr, rel, 19, version);
    assert_int_equal(resp->topics.count, 1);
    assert_true(gr_str_eq_c(resp->topics.items[0].name, c->topic));
    assert_int_equal(resp->topics.items[0].error_code, 0);
    if (version >= 5) {
        assert_int_equal(resp->topics.items[0].num_partitions, 2);
        assert_int_equal(resp->topics.items[0].replication_factor, 1);
        assert_true(resp->topics.items[0].configs.count > 10); /* Kafka returns the topic's configs */
    }
    frame_close(&fr);
}

/* Metadata request for the flow's topic (or all topics when `topic_named` is false). */
static void check_metadata(const struct client *c, const char *file, int16_t version, int topics,
                           bool auto_create)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_metadata_request *req = request_open(&fr, rel, 3, version, c->client_id);
    assert_int_equal(req->topics.count, topics);
    if (topics == 1) assert_true(gr_str_eq_c(req->topics.items[0].name, c->topic));
    if (version >= 4) assert_int_equal(req->allow_auto_topic_creation, auto_create);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_metadata_response *resp = response_open(&fr, rel, 3, version);
    assert_int_equal(resp->brokers.count, 1);
    assert_int_equal(resp->brokers.items[0].node_id, 1);
    assert_true(gr_str_eq_c(resp->brokers.items[0].host, "127.0.0.1"));
    assert_true(resp->brokers.items[0].port > 0);
    if (version >= 1) assert_int_equal(resp->controller_id, 1);
    if (topics == 1) {
        assert_int_equal(resp->topics.count, 1);
        assert_true(gr_str_eq_c(resp->topics.items[0].name, c->topic));
        if (resp->topics.items[0].error_code == 0) assert_true(resp->topics.items[0].partitions.count >= 2);
    }
    frame_close(&fr);
}

/* FindCoordinator for the flow's group; the response carries `error` (0, or COORDINATOR_NOT_AVAILABLE (15)
 * while the broker was still creating __consumer_offsets, as kcat's first try met it). */
static void check_find_coordinator(const struct client *c, const char *file, int16_t version, int16_t error)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_find_coordinator_request *req = request_open(&fr, rel, 10, version, c->client_id);
    if (version >= 4) {
        assert_int_equal(req->coordinator_keys.count, 1);
        assert_true(gr_str_eq_c(req->coordinator_keys.items[0], c->group));
    } else {
        assert_true(gr_str_eq_c(req->key, c->group));
    }
    assert_int_equal(req->key_type, 0); /* group */
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_find_coordinator_response *resp = response_open(&fr, rel, 10, version);
    if (version >= 4) {
        assert_int_equal(resp->coordinators.count, 1);
        assert_true(gr_str_eq_c(resp->coordinators.items[0].key, c->group));
        assert_int_equal(resp->coordinators.items[0].error_code, error);
        assert_int_equal(resp->coordinators.items[0].node_id, error ? -1 : 1);
    } else {
        assert_int_equal(resp->error_code, error);
        assert_int_equal(resp->node_id, error ? -1 : 1);
        assert_true(gr_str_eq_c(resp->host, error ? "" : "127.0.0.1"));
        if (version >= 1 && error) assert_true(resp->error_message.len > 0);
    }
    frame_close(&fr);
}

/* JoinGroup with an empty member id (the first join; Kafka >= 2.2 answers MEMBER_ID_REQUIRED (79) to
 * v4+, and the client rejoins with the id it got). Protocol type "consumer". Returns nothing. */
static void check_join_group(const struct client *c, const char *file, int16_t version, int32_t session_ms,
                             int32_t rebalance_ms, const char *protocol0, int nprotocols)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_join_group_request *req = request_open(&fr, rel, 11, version, c->client_id);
    assert_true(gr_str_eq_c(req->group_id, c->group));
    assert_int_equal(req->session_timeout_ms, session_ms);
    assert_int_equal(req->rebalance_timeout_ms, rebalance_ms);
    assert_int_equal(req->member_id.len, 0);
    if (version >= 5) assert_int_equal(req->group_instance_id.len, -1);
    assert_true(gr_str_eq_c(req->protocol_type, "consumer"));
    assert_int_equal(req->protocols.count, nprotocols);
    assert_true(gr_str_eq_c(req->protocols.items[0].name, protocol0));
    assert_true(req->protocols.items[0].metadata.len > 0);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_join_group_response *resp = response_open(&fr, rel, 11, version);
    if (version >= 4) {
        assert_int_equal(resp->error_code, 79); /* MEMBER_ID_REQUIRED, with the member id to use */
        assert_true(resp->member_id.len > (int32_t)strlen(c->client_id));
        assert_memory_equal(resp->member_id.ptr, c->client_id, strlen(c->client_id));
    } else {
        assert_int_equal(resp->error_code, 0);
        assert_int_equal(resp->generation_id, 1);
        assert_true(gr_str_eq(resp->leader, resp->member_id));
        assert_int_equal(resp->members.count, 1);
    }
    frame_close(&fr);
}

/* SyncGroup from the leader of generation 1 with one assignment for itself. */
static void check_sync_group(const struct client *c, const char *file, int16_t version)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_sync_group_request *req = request_open(&fr, rel, 14, version, c->client_id);
    assert_true(gr_str_eq_c(req->group_id, c->group));
    assert_true(req->generation_id >= 1);
    assert_true(req->member_id.len > (int32_t)strlen(c->client_id));
    assert_memory_equal(req->member_id.ptr, c->client_id, strlen(c->client_id));
    assert_int_equal(req->assignments.count, 1);
    assert_true(gr_str_eq(req->assignments.items[0].member_id, req->member_id));
    if (version >= 5) assert_true(gr_str_eq_c(req->protocol_type, "consumer"));
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_sync_group_response *resp = response_open(&fr, rel, 14, version);
    assert_int_equal(resp->error_code, 0);
    assert_true(resp->assignment.len >= 0);
    frame_close(&fr);
}

static void check_heartbeat(const struct client *c, const char *file, int16_t version)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_heartbeat_request *req = request_open(&fr, rel, 12, version, c->client_id);
    assert_true(gr_str_eq_c(req->group_id, c->group));
    assert_int_equal(req->generation_id, 1);
    assert_memory_equal(req->member_id.ptr, c->client_id, strlen(c->client_id));
    assert_int_equal(req->group_instance_id.len, -1);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_heartbeat_response *resp = response_open(&fr, rel, 12, version);
    assert_int_equal(resp->error_code, 0);
    frame_close(&fr);
}

/* OffsetCommit of offset `offset0` for partition 0 (partition 1, when present, commits 0). */
static void check_offset_commit(const struct client *c, const char *file, int16_t version, int64_t offset0)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_offset_commit_request *req = request_open(&fr, rel, 8, version, c->client_id);
    assert_true(gr_str_eq_c(req->group_id, c->group));
    assert_true(req->generation_id_or_member_epoch >= 1);
    assert_memory_equal(req->member_id.ptr, c->client_id, strlen(c->client_id));
    if (version >= 2 && version <= 4) assert_int_equal(req->retention_time_ms, -1);
    assert_int_equal(req->topics.count, 1);
    assert_true(gr_str_eq_c(req->topics.items[0].name, c->topic));
    bool seen0 = false;
    for (int32_t i = 0; i < req->topics.items[0].partitions.count; i++) {
        const struct gr_offset_commit_request_offset_commit_request_partition *p =
            &req->topics.items[0].partitions.items[i];
        assert_true(p->partition_index == 0 || p->partition_index == 1);
        if (p->partition_index == 0) {
            seen0 = true;
            assert_int_equal(p->committed_offset, offset0);
        } else {
            assert_int_equal(p->committed_offset, 0);
        }
    }
    assert_true(seen0);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_offset_commit_response *resp = response_open(&fr, rel, 8, version);
    assert_int_equal(resp->topics.count, 1);
    for (int32_t i = 0; i < resp->topics.items[0].partitions.count; i++)
        assert_int_equal(resp->topics.items[0].partitions.items[i].error_code, 0);
    frame_close(&fr);
}

/* OffsetFetch for partitions 0 and 1 of the topic (in either order); nothing committed yet. */
static void check_offset_fetch(const struct client *c, const char *file, int16_t version)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_offset_fetch_request *req = request_open(&fr, rel, 9, version, c->client_id);
    const struct gr_int32_array *parts;
    if (version >= 8) {
        assert_int_equal(req->groups.count, 1);
        assert_true(gr_str_eq_c(req->groups.items[0].group_id, c->group));
        assert_int_equal(req->groups.items[0].topics.count, 1);
        assert_true(gr_str_eq_c(req->groups.items[0].topics.items[0].name, c->topic));
        parts = &req->groups.items[0].topics.items[0].partition_indexes;
    } else {
        assert_true(gr_str_eq_c(req->group_id, c->group));
        assert_int_equal(req->topics.count, 1);
        assert_true(gr_str_eq_c(req->topics.items[0].name, c->topic));
        parts = &req->topics.items[0].partition_indexes;
    }
    assert_int_equal(parts->count, 2);
    assert_int_equal(parts->items[0] + parts->items[1], 1);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_offset_fetch_response *resp = response_open(&fr, rel, 9, version);
    if (version >= 8) {
        assert_int_equal(resp->groups.count, 1);
        assert_int_equal(resp->groups.items[0].error_code, 0);
        assert_int_equal(resp->groups.items[0].topics.items[0].partitions.count, 2);
        assert_int_equal(resp->groups.items[0].topics.items[0].partitions.items[0].committed_offset, -1);
    } else {
        assert_int_equal(resp->topics.count, 1);
        assert_int_equal(resp->topics.items[0].partitions.count, 2);
        assert_int_equal(resp->topics.items[0].partitions.items[0].committed_offset, -1);
    }
    frame_close(&fr);
}

/* ListOffsets for the earliest offset (timestamp -2) of the given partitions. */
static void check_list_offsets(const struct client *c, const char *file, int16_t version, int8_t isolation,
                               const int32_t *partitions, int n)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_list_offsets_request *req = request_open(&fr, rel, 2, version, c->client_id);
    assert_int_equal(req->replica_id, -1);
    if (version >= 2) assert_int_equal(req->isolation_level, isolation);
    assert_int_equal(req->topics.count, 1);
    assert_true(gr_str_eq_c(req->topics.items[0].name, c->topic));
    assert_int_equal(req->topics.items[0].partitions.count, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(req->topics.items[0].partitions.items[i].partition_index, partitions[i]);
        assert_int_equal(req->topics.items[0].partitions.items[i].timestamp, -2); /* earliest */
    }
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_list_offsets_response *resp = response_open(&fr, rel, 2, version);
    assert_int_equal(resp->topics.count, 1);
    assert_int_equal(resp->topics.items[0].partitions.count, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(resp->topics.items[0].partitions.items[i].error_code, 0);
        assert_int_equal(resp->topics.items[0].partitions.items[i].offset, 0);
    }
    frame_close(&fr);
}

/* Fetch request with `max_wait_ms`, partition `partition` of the topic (by name or id) at `offset`; the
 * response for partition 0 from offset 0 holds the flow's `records` records in `batches` batches. */
static void check_fetch(const struct client *c, const char *file, int16_t version, int32_t max_wait_ms,
                        int32_t partition, int64_t offset, int32_t records, int32_t batches)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_fetch_request *req = request_open(&fr, rel, 1, version, c->client_id);
    if (version < 15)
        assert_int_equal(req->replica_id, -1);
    else
        assert_int_equal(req->replica_state.replica_id, -1);
    assert_int_equal(req->max_wait_ms, max_wait_ms);
    assert_int_equal(req->min_bytes, 1);
    assert_int_equal(req->topics.count, 1);
    if (version < 13) assert_true(gr_str_eq_c(req->topics.items[0].topic, c->topic));
    bool found = false;
    for (int32_t i = 0; i < req->topics.items[0].partitions.count; i++) {
        const struct gr_fetch_request_fetch_partition *p = &req->topics.items[0].partitions.items[i];
        if (p->partition == partition) {
            found = true;
            assert_int_equal(p->fetch_offset, offset);
            assert_int_equal(p->partition_max_bytes, 1048576);
        }
    }
    assert_true(found);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_fetch_response *resp = response_open(&fr, rel, 1, version);
    if (version >= 7) assert_int_equal(resp->error_code, 0);
    int32_t got = 0, nb = 0;
    for (int32_t t = 0; t < resp->responses.count; t++) {
        for (int32_t i = 0; i < resp->responses.items[t].partitions.count; i++) {
            const struct gr_fetch_response_partition_data *pd = &resp->responses.items[t].partitions.items[i];
            assert_int_equal(pd->error_code, 0);
            if (pd->partition_index != 0) continue;
            assert_int_equal(pd->high_watermark, records);
            unsigned mask;
            int32_t b;
            got += check_fetched_records(rel, pd->records.mem, &b, &mask, records - 1);
            nb += b;
        }
    }
    if (got != records || nb != batches)
        fail_msg("%s: fetched %d records in %d batches, expected %d in %d", rel, got, nb, records, batches);
    frame_close(&fr);
}

static void check_leave_group(const struct client *c, const char *file, int16_t version)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_leave_group_request *req = request_open(&fr, rel, 13, version, c->client_id);
    assert_true(gr_str_eq_c(req->group_id, c->group));
    struct gr_str member = version >= 3 ? req->members.items[0].member_id : req->member_id;
    if (version >= 3) assert_int_equal(req->members.count, 1);
    assert_memory_equal(member.ptr, c->client_id, strlen(c->client_id));
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_leave_group_response *resp = response_open(&fr, rel, 13, version);
    assert_int_equal(resp->error_code, 0);
    frame_close(&fr);
}

/* InitProducerId for an idempotent (non-transactional) producer; the response carries `error` (kafka-python's
 * first try met COORDINATOR_LOAD_IN_PROGRESS on the freshly started broker and was retried). */
static void check_init_producer_id(const struct client *c, const char *file, int16_t version,
                                   int32_t txn_timeout_ms, int16_t error)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.req.hex", c->dir, file);
    struct frame fr;
    struct gr_init_producer_id_request *req = request_open(&fr, rel, 22, version, c->client_id);
    assert_int_equal(req->transactional_id.len, -1);
    assert_int_equal(req->transaction_timeout_ms, txn_timeout_ms);
    assert_int_equal(req->producer_id, -1);
    assert_int_equal(req->producer_epoch, -1);
    frame_close(&fr);
    snprintf(rel, sizeof rel, "%s/%s.resp.hex", c->dir, file);
    struct gr_init_producer_id_response *resp = response_open(&fr, rel, 22, version);
    assert_int_equal(resp->error_code, error);
    if (error == 0) {
        assert_true(resp->producer_id >= 0);
        assert_int_equal(resp->producer_epoch, 0);
    } else {
        assert_int_equal(resp->producer_id, -1);
        assert_int_equal(resp->producer_epoch, -1);
    }
    frame_close(&fr);
}

/* ---- every frame: exactness and round trip ---- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_every_frame_decodes_exactly(void **state)
{
    (void)state;
    DIR *top = opendir(golden_dir);
    if (!top) fail_msg("cannot open %s", golden_dir);
    int requests = 0, responses = 0, clients = 0;
    bool seen[128] = {0};
    struct dirent *de;
    while ((de = readdir(top))) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "tools") == 0) continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", golden_dir, de->d_name);
        DIR *d = opendir(sub);
        if (!d) continue;
        clients++;
        char *names[512];
        int n = 0;
        struct dirent *fe;
        while ((fe = readdir(d)) && n < 512)
            if (strstr(fe->d_name, ".req.hex")) names[n++] = strdup(fe->d_name);
        closedir(d);
        qsort(names, (size_t)n, sizeof names[0], cmp_names);
        for (int i = 0; i < n; i++) {
            char rel[1024];
            snprintf(rel, sizeof rel, "%s/%s", de->d_name, names[i]);
            struct frame fr;
            request_open(&fr, rel, -1, -1, NULL);
            int16_t key = fr.api_key, version = fr.version;
            assert_true(key >= 0 && key < 128);
            seen[key] = true;
            if (key == 0) { /* every Produce batch validates as a client batch */
                struct gr_produce_request *req = fr.body;
                for (int32_t t = 0; t < req->topic_data.count; t++)
                    for (int32_t p = 0; p < req->topic_data.items[t].partition_data.count; p++) {
                        struct gr_bytes r = req->topic_data.items[t].partition_data.items[p].records.mem;
                        assert_int_equal(gr_batch_validate(r.ptr, (size_t)r.len, NULL, NULL), 0);
                    }
            }
            frame_close(&fr);
            requests++;
            char *dot = strstr(rel, ".req.hex");
            strcpy(dot, ".resp.hex");
            uint8_t *tmp;
            size_t tlen;
            if (load_hex(rel, &tmp, &tlen)) {
                free(tmp);
                response_open(&fr, rel, key, version);
                frame_close(&fr);
                responses++;
            }
            free(names[i]);
        }
    }
    closedir(top);
    assert_int_equal(clients, 9);
    assert_int_equal(requests, 139); /* as listed in golden/README.md */
    assert_int_equal(responses, 138);
    /* the APIs the flows exercise */
    static const int16_t keys[] = {0,  1,  2,  3,  8,  9,  10, 11, 12, 13, 14,
                                   18, 19, 22, 24, 25, 26, 27, 28, 65, 66};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!seen[keys[i]]) fail_msg("no golden frame for api key %d", keys[i]);
    print_message("%d request frames, %d response frames from %d clients\n", requests, responses, clients);
}

/* ---- per client ---- */

/* kcat 1.7.1 / librdkafka 2.0.2 (Debian bookworm). */
static void test_kcat(void **state)
{
    (void)state;
    const struct client c = {"kcat", "golden-kcat", "golden-kcat", "golden-kcat-group"};
    check_api_versions(&c, "01-ApiVersions-v3", 3, "librdkafka", "2.0.2");
    check_metadata(&c, "02-Metadata-v4", 4, 1, true);
    static const char *const produce[5] = {"03-Produce-v7", "04-Produce-v7", "05-Produce-v7", "06-Produce-v7",
                                           "07-Produce-v7"};
    check_produce_all(&c, produce, 7, false, -1, 1, 5); /* kcat -H puts h=x on every record */
    check_metadata(&c, "08-Metadata-v4", 4, 1, false);
    static const int32_t p0[] = {0};
    check_list_offsets(&c, "09-ListOffsets-v2", 2, 1, p0, 1);
    check_fetch(&c, "10-Fetch-v11", 11, 500, 0, 0, 10, 5);
    check_find_coordinator(&c, "12-FindCoordinator-v2", 2, 15); /* COORDINATOR_NOT_AVAILABLE */
    check_join_group(&c, "13-JoinGroup-v5", 5, 45000, 300000, "range", 2);
    check_sync_group(&c, "14-SyncGroup-v3", 3);
    check_heartbeat(&c, "15-Heartbeat-v3", 3);
    check_offset_commit(&c, "16-OffsetCommit-v7", 7, 10);
    check_leave_group(&c, "17-LeaveGroup-v1", 1);
}

/* kafka-python 2.0.2: old versions (ApiVersions v0, Metadata v0/v1, Fetch v4, FindCoordinator v0). */
static void test_kafka_python_2(void **state)
{
    (void)state;
    const struct client c = {"kafka-python-2.0.2", "golden-kp2", "golden-kp2", "golden-kp2-group"};
    check_api_versions(&c, "01-ApiVersions-v0", 0, NULL, NULL);
    check_metadata(&c, "02-Metadata-v0", 0, 0, false);
    struct frame fr;
    struct gr_metadata_request *md =
        request_open(&fr, "kafka-python-2.0.2/03-Metadata-v1.req.hex", 3, 1, "golden-kp2");
    assert_int_equal(md->topics.count, -1); /* null: all topics (v1+) */
    frame_close(&fr);
    check_create_topics(&c, "05-CreateTopics-v3", 3, 30000, 30000);
    static const char *const produce[5] = {"06-Produce-v7", "07-Produce-v7", "08-Produce-v7", "09-Produce-v7",
                                           "10-Produce-v7"};
    check_produce_all(&c, produce, 7, false, -1, 0, 5);
    check_find_coordinator(&c, "11-FindCoordinator-v0", 0, 0);
    check_metadata(&c, "12-Metadata-v1", 1, 1, false);
    check_join_group(&c, "13-JoinGroup-v2", 2, 10000, 300000, "range", 2);
    check_sync_group(&c, "14-SyncGroup-v1", 1);
    check_offset_fetch(&c, "15-OffsetFetch-v1", 1);
    static const int32_t p0[] = {0};
    check_list_offsets(&c, "16-ListOffsets-v1", 1, 0, p0, 1);
    check_fetch(&c, "17-Fetch-v4", 4, 200, 0, 0, 10, 5);
    check_offset_commit(&c, "18-OffsetCommit-v2", 2, 10);
    check_leave_group(&c, "19-LeaveGroup-v1", 1);
}

/* kafka-python 3.0.12: flexible versions, idempotent producer by default. */
static void test_kafka_python_3(void **state)
{
    (void)state;
    const struct client c = {"kafka-python-3.0.12", "golden-kp3", "golden-kp3", "golden-kp3-group"};
    check_api_versions(&c, "01-ApiVersions-v4", 4, "kafka-python", "3.0.12");
    check_metadata(&c, "02-Metadata-v13", 13, 0, true);
    check_create_topics(&c, "03-CreateTopics-v7", 7, 30000, 30000);
    check_init_producer_id(&c, "04-InitProducerId-v4", 4, 0, 14); /* COORDINATOR_LOAD_IN_PROGRESS */
    check_metadata(&c, "05-Metadata-v13", 13, 1, true);
    static const char *const produce[5] = {"06-Produce-v9", "07-Produce-v9", "08-Produce-v9", "09-Produce-v9",
                                           "10-Produce-v9"};
    check_produce_all(&c, produce, 9, true, 0, 0, 5);
    check_find_coordinator(&c, "11-FindCoordinator-v6", 6, 0);
    check_join_group(&c, "12-JoinGroup-v7", 7, 45000, 300000, "range", 2);
    check_sync_group(&c, "13-SyncGroup-v5", 5);
    check_offset_fetch(&c, "14-OffsetFetch-v8", 8);
    static const int32_t p01[] = {0, 1};
    check_list_offsets(&c, "15-ListOffsets-v10", 10, 0, p01, 2);
    check_fetch(&c, "16-Fetch-v12", 12, 200, 0, 0, 10, 5);
    check_offset_commit(&c, "17-OffsetCommit-v8", 8, 10);
    check_leave_group(&c, "18-LeaveGroup-v5", 5);
}

/* confluent-kafka 2.16.1 (librdkafka 2.16.0). */
static void test_confluent_kafka(void **state)
{
    (void)state;
    const struct client c = {"confluent-kafka", "golden-confluent", "golden-confluent",
                             "golden-confluent-group"};
    check_api_versions(&c, "01-ApiVersions-v3", 3, "confluent-kafka-python", "2.16.1-rdkafka-2.16.0");
    check_metadata(&c, "02-Metadata-v13", 13, 0, false);
    check_create_topics(&c, "03-CreateTopics-v4", 4, 60000, 60000);
    check_metadata(&c, "04-Metadata-v13", 13, 1, true);
    static const char *const produce[5] = {"05-Produce-v10", "06-Produce-v10", "07-Produce-v10",
                                           "08-Produce-v10", "09-Produce-v10"};
    check_produce_all(&c, produce, 10, false, -1, 0, 5);
    check_find_coordinator(&c, "10-FindCoordinator-v2", 2, 0);
    check_join_group(&c, "11-JoinGroup-v5", 5, 45000, 300000, "range", 2);
    check_sync_group(&c, "12-SyncGroup-v3", 3);
    check_heartbeat(&c, "13-Heartbeat-v3", 3);
    check_offset_fetch(&c, "14-OffsetFetch-v9", 9);
    static const int32_t p1[] = {1};
    check_list_offsets(&c, "15-ListOffsets-v7", 7, 1, p1, 1);
    check_fetch(&c, "17-Fetch-v16", 16, 200, 0, 0, 10, 5);
    check_offset_commit(&c, "18-OffsetCommit-v9", 9, 10);
    check_leave_group(&c, "19-LeaveGroup-v1", 1);
}

/* kafkajs 2.2.4 (only none and gzip without codec plugins). */
static void test_kafkajs(void **state)
{
    (void)state;
    const struct client c = {"kafkajs", "golden-kafkajs", "golden-kafkajs", "golden-kafkajs-group"};
    check_api_versions(&c, "01-ApiVersions-v2", 2, NULL, NULL);
    struct frame fr;
    struct gr_metadata_request *md =
        request_open(&fr, "kafkajs/02-Metadata-v6.req.hex", 3, 6, "golden-kafkajs");
    assert_int_equal(md->topics.count, -1);
    assert_false(md->allow_auto_topic_creation);
    frame_close(&fr);
    check_create_topics(&c, "03-CreateTopics-v3", 3, 5000, 5000);
    check_metadata(&c, "04-Metadata-v6", 6, 1, false);
    static const char *const produce[2] = {"05-Produce-v7", "06-Produce-v7"};
    check_produce_all(&c, produce, 7, false, 0, 0, 2); /* kafkajs: sequence 0 without producer id */
    check_find_coordinator(&c, "07-FindCoordinator-v2", 2, 0);
    check_join_group(&c, "08-JoinGroup-v5", 5, 30000, 60000, "RoundRobinAssigner", 1);
    check_sync_group(&c, "09-SyncGroup-v3", 3);
    check_offset_fetch(&c, "10-OffsetFetch-v4", 4);
    static const int32_t p01[] = {0, 1};
    check_list_offsets(&c, "11-ListOffsets-v3", 3, 1, p01, 2);
    check_fetch(&c, "12-Fetch-v11", 11, 200, 0, 0, 4, 2);
    check_offset_commit(&c, "13-OffsetCommit-v5", 5, 4);
    check_leave_group(&c, "14-LeaveGroup-v3", 3);
}

/* The Java client, kafka-clients 4.1.1: the newest versions (Produce v13 and Fetch v18 by topic id). */
static void test_java(void **state)
{
    (void)state;
    const struct client c = {"java", "golden-java", "golden-java", "golden-java-group"};
    check_api_versions(&c, "01-ApiVersions-v4", 4, "apache-kafka-java", "4.1.1");
    check_metadata(&c, "02-Metadata-v13", 13, 0, true);
    check_create_topics(&c, "03-CreateTopics-v7", 7, 25000, 30000);
    check_init_producer_id(&c, "04-InitProducerId-v5", 5, 2147483647, 0);
    check_metadata(&c, "05-Metadata-v13", 13, 1, true);
    static const char *const produce[5] = {"06-Produce-v13", "07-Produce-v13", "08-Produce-v13",
                                           "09-Produce-v13", "10-Produce-v13"};
    check_produce_all(&c, produce, 13, true, 0, 0, 5);
    check_find_coordinator(&c, "11-FindCoordinator-v6", 6, 0);
    check_join_group(&c, "12-JoinGroup-v9", 9, 45000, 300000, "range", 2);
    check_sync_group(&c, "13-SyncGroup-v5", 5);
    check_offset_fetch(&c, "14-OffsetFetch-v9", 9);
    static const int32_t p10[] = {1, 0};
    check_list_offsets(&c, "15-ListOffsets-v10", 10, 0, p10, 2);
    check_fetch(&c, "16-Fetch-v18", 18, 200, 0, 0, 10, 5);
    check_offset_commit(&c, "18-OffsetCommit-v9", 9, 10);
    check_leave_group(&c, "19-LeaveGroup-v5", 5);
}

/* ---- the transaction APIs (txn-kcat, txn-confluent, txn-tools): codec only, Gregor serves none yet ---- */

/* Opens golden/<dir>/<file>.req.hex (or .resp.hex when `resp`) as (key, version); returns the body. */
static void *txn_open(struct frame *fr, const char *dir, const char *file, bool resp, int16_t key,
                      int16_t version, const char *client_id)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s.%s.hex", dir, file, resp ? "resp" : "req");
    return resp ? response_open(fr, rel, key, version) : request_open(fr, rel, key, version, client_id);
}

/* AddPartitionsToTxn v0 from a client (one transaction) and v5 from Kafka's broker verifying it before the
 * first transactional append (KIP-890: batched, verify_only), with their answers. */
static void check_add_partitions(const char *dir, const char *file0, const char *file5, const char *id,
                                 int64_t producer_id, const int32_t *parts, int nparts)
{
    struct frame fr;
    struct gr_add_partitions_to_txn_request *req = txn_open(&fr, dir, file0, false, 24, 0, id);
    assert_true(gr_str_eq_c(req->v3_and_below_transactional_id, id));
    assert_int_equal(req->v3_and_below_producer_id, producer_id);
    assert_int_equal(req->v3_and_below_producer_epoch, 0);
    assert_int_equal(req->v3_and_below_topics.count, 1);
    assert_true(gr_str_eq_c(req->v3_and_below_topics.items[0].name, id)); /* topic named as the id */
    assert_int_equal(req->v3_and_below_topics.items[0].partitions.count, nparts);
    for (int i = 0; i < nparts; i++)
        assert_int_equal(req->v3_and_below_topics.items[0].partitions.items[i], parts[i]);
    frame_close(&fr);
    struct gr_add_partitions_to_txn_response *resp = txn_open(&fr, dir, file0, true, 24, 0, NULL);
    assert_int_equal(resp->results_by_topic_v3_and_below.count, 1);
    assert_int_equal(resp->results_by_topic_v3_and_below.items[0].results_by_partition.count, nparts);
    assert_int_equal(
        resp->results_by_topic_v3_and_below.items[0].results_by_partition.items[0].partition_error_code, 0);
    frame_close(&fr);
    struct gr_add_partitions_to_txn_request *v5 =
        txn_open(&fr, dir, file5, false, 24, 5, "AddPartitionsManager-client-1");
    assert_int_equal(v5->transactions.count, 1);
    assert_true(gr_str_eq_c(v5->transactions.items[0].transactional_id, id));
    assert_int_equal(v5->transactions.items[0].producer_id, producer_id);
    assert_true(v5->transactions.items[0].verify_only);
    assert_int_equal(v5->transactions.items[0].topics.count, 1);
    assert_int_equal(v5->transactions.items[0].topics.items[0].partitions.count, 1);
    frame_close(&fr);
    struct gr_add_partitions_to_txn_response *r5 = txn_open(&fr, dir, file5, true, 24, 5, NULL);
    assert_int_equal(r5->error_code, 0);
    assert_int_equal(r5->results_by_transaction.count, 1);
    assert_true(gr_str_eq_c(r5->results_by_transaction.items[0].transactional_id, id));
    assert_int_equal(r5->results_by_transaction.items[0].topic_results.items[0].results_by_partition.count,
                     1);
    frame_close(&fr);
}

static void check_end_txn(const char *dir, const char *file, const char *id, int64_t producer_id, bool commit)
{
    struct frame fr;
    struct gr_end_txn_request *req = txn_open(&fr, dir, file, false, 26, 1, id);
    assert_true(gr_str_eq_c(req->transactional_id, id));
    assert_int_equal(req->producer_id, producer_id);
    assert_int_equal(req->committed, commit);
    frame_close(&fr);
    struct gr_end_txn_response *resp = txn_open(&fr, dir, file, true, 26, 1, NULL);
    assert_int_equal(resp->error_code, 0);
    frame_close(&fr);
}

/* WriteTxnMarkers v2 from Kafka's coordinator (client id broker-1-txn-marker-sender): one marker; the first
 * topic named `topic` with partition 0, then `extra_topic` (may be NULL) with partition `extra_part`. */
static void check_markers(const char *dir, const char *file, bool with_resp, int64_t producer_id, bool commit,
                          const char *topic, const char *extra_topic, int32_t extra_part)
{
    struct frame fr;
    struct gr_write_txn_markers_request *req =
        txn_open(&fr, dir, file, false, 27, 2, "broker-1-txn-marker-sender");
    assert_int_equal(req->markers.count, 1);
    assert_int_equal(req->markers.items[0].producer_id, producer_id);
    assert_int_equal(req->markers.items[0].transaction_result, commit);
    assert_int_equal(req->markers.items[0].coordinator_epoch, 0);
    assert_int_equal(req->markers.items[0].transaction_version,
                     0); /* the clients ran transaction version 1 */
    assert_int_equal(req->markers.items[0].topics.count, extra_topic ? 2 : 1);
    assert_true(gr_str_eq_c(req->markers.items[0].topics.items[0].name, topic));
    assert_int_equal(req->markers.items[0].topics.items[0].partition_indexes.items[0], 0);
    if (extra_topic) {
        assert_true(gr_str_eq_c(req->markers.items[0].topics.items[1].name, extra_topic));
        assert_int_equal(req->markers.items[0].topics.items[1].partition_indexes.items[0], extra_part);
    }
    frame_close(&fr);
    if (!with_resp) return;
    struct gr_write_txn_markers_response *resp = txn_open(&fr, dir, file, true, 27, 2, NULL);
    assert_int_equal(resp->markers.items[0].producer_id, producer_id);
    assert_int_equal(resp->markers.items[0].topics.items[0].partitions.items[0].error_code, 0);
    frame_close(&fr);
}

/* kcat 1.7.1 / librdkafka 2.0.2 with transactional.id, against Kafka 4.4.0: one committed transaction. */
static void test_txn_kcat(void **state)
{
    (void)state;
    const char *d = "txn-kcat", *id = "golden-txn-kcat";
    struct frame fr;
    struct gr_find_coordinator_request *fc = txn_open(&fr, d, "04-FindCoordinator-v2", false, 10, 2, id);
    assert_true(gr_str_eq_c(fc->key, id));
    assert_int_equal(fc->key_type, 1); /* transaction coordinator */
    frame_close(&fr);
    /* the first lookup finds no coordinator: Kafka is creating __transaction_state */
    struct gr_find_coordinator_response *fcr = txn_open(&fr, d, "04-FindCoordinator-v2", true, 10, 2, NULL);
    assert_int_equal(fcr->error_code, 15); /* COORDINATOR_NOT_AVAILABLE */
    frame_close(&fr);
    static const int32_t p0[] = {0};
    check_add_partitions(d, "06-AddPartitionsToTxn-v0", "09-AddPartitionsToTxn-v5", id, 0, p0, 1);
    check_end_txn(d, "10-EndTxn-v1", id, 0, true);
    check_markers(d, "11-WriteTxnMarkers-v2", false, 0, true, id, NULL, 0);
}

/* confluent-kafka 2.16.1 (librdkafka 2.16.0): a committed transaction over two partitions, then an aborted
 * one with offsets sent for a group. */
static void test_txn_confluent(void **state)
{
    (void)state;
    const char *d = "txn-confluent", *id = "golden-txn-confluent", *group = "golden-txn-confluent-group";
    static const int32_t p01[] = {0, 1};
    check_add_partitions(d, "09-AddPartitionsToTxn-v0", "12-AddPartitionsToTxn-v5", id, 1, p01, 2);
    check_end_txn(d, "13-EndTxn-v1", id, 1, true);
    struct frame fr;
    struct gr_add_offsets_to_txn_request *ao = txn_open(&fr, d, "15-AddOffsetsToTxn-v0", false, 25, 0, id);
    assert_true(gr_str_eq_c(ao->transactional_id, id));
    assert_true(gr_str_eq_c(ao->group_id, group));
    assert_int_equal(ao->producer_id, 1);
    frame_close(&fr);
    struct gr_add_offsets_to_txn_response *aor = txn_open(&fr, d, "15-AddOffsetsToTxn-v0", true, 25, 0, NULL);
    assert_int_equal(aor->error_code, 0);
    frame_close(&fr);
    struct gr_txn_offset_commit_request *oc = txn_open(&fr, d, "16-TxnOffsetCommit-v3", false, 28, 3, id);
    assert_true(gr_str_eq_c(oc->group_id, group));
    assert_int_equal(oc->generation_id_or_member_epoch, -1); /* a consumer that never joined */
    assert_true(gr_str_eq_c(oc->member_id, ""));
    assert_int_equal(oc->group_instance_id.len, -1);
    assert_int_equal(oc->topics.count, 1);
    assert_int_equal(oc->topics.items[0].partitions.items[0].committed_offset, 1);
    assert_int_equal(oc->topics.items[0].partitions.items[0].committed_leader_epoch, -1);
    frame_close(&fr);
    /* as captured: Kafka answered this first attempt NOT_COORDINATOR (librdkafka retried; the retry is not
     * kept) */
    struct gr_txn_offset_commit_response *ocr = txn_open(&fr, d, "16-TxnOffsetCommit-v3", true, 28, 3, NULL);
    assert_int_equal(ocr->topics.items[0].partitions.items[0].error_code, 16); /* NOT_COORDINATOR */
    frame_close(&fr);
    /* the markers of the previous flow's transaction, sent on the broker's connection through this proxy */
    check_markers(d, "02-WriteTxnMarkers-v2", true, 0, true, "golden-txn-kcat", NULL, 0);
}

/* Kafka 4.4.0's kafka-transactions.sh (its admin client) list and describe, after the two flows above. */
static void test_txn_tools(void **state)
{
    (void)state;
    const char *d = "txn-tools";
    struct frame fr;
    struct gr_list_transactions_request *lt = txn_open(&fr, d, "04-ListTransactions-v2", false, 66, 2, NULL);
    assert_int_equal(lt->state_filters.count, 0);
    assert_int_equal(lt->duration_filter, -1);
    assert_int_equal(lt->transactional_id_pattern.len, -1);
    frame_close(&fr);
    struct gr_list_transactions_response *ltr = txn_open(&fr, d, "04-ListTransactions-v2", true, 66, 2, NULL);
    assert_int_equal(ltr->transaction_states.count, 2);
    assert_true(gr_str_eq_c(ltr->transaction_states.items[0].transactional_id, "golden-txn-confluent"));
    assert_true(gr_str_eq_c(ltr->transaction_states.items[0].transaction_state, "CompleteAbort"));
    assert_true(gr_str_eq_c(ltr->transaction_states.items[1].transaction_state, "CompleteCommit"));
    frame_close(&fr);
    struct gr_find_coordinator_request *fc = txn_open(&fr, d, "05-FindCoordinator-v6", false, 10, 6, NULL);
    assert_int_equal(fc->key_type, 1);
    assert_true(gr_str_eq_c(fc->coordinator_keys.items[0], "golden-txn-confluent"));
    frame_close(&fr);
    struct gr_describe_transactions_request *dt =
        txn_open(&fr, d, "06-DescribeTransactions-v0", false, 65, 0, NULL);
    assert_int_equal(dt->transactional_ids.count, 1);
    frame_close(&fr);
    struct gr_describe_transactions_response *dtr =
        txn_open(&fr, d, "06-DescribeTransactions-v0", true, 65, 0, NULL);
    assert_int_equal(dtr->transaction_states.count, 1);
    assert_int_equal(dtr->transaction_states.items[0].error_code, 0);
    assert_true(gr_str_eq_c(dtr->transaction_states.items[0].transaction_state, "CompleteAbort"));
    assert_int_equal(dtr->transaction_states.items[0].transaction_timeout_ms, 60000);
    assert_int_equal(dtr->transaction_states.items[0].producer_id, 1);
    assert_int_equal(dtr->transaction_states.items[0].topics.count, 0); /* none once complete */
    frame_close(&fr);
    /* the aborted transaction's markers: its data partition and the group's offsets partition */
    check_markers(d, "02-WriteTxnMarkers-v2", true, 1, false, "golden-txn-confluent", "__consumer_offsets",
                  7);
}

int main(int argc, char **argv)
{
    if (argc > 1) golden_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_frame_decodes_exactly),
        cmocka_unit_test(test_kcat),
        cmocka_unit_test(test_kafka_python_2),
        cmocka_unit_test(test_kafka_python_3),
        cmocka_unit_test(test_confluent_kafka),
        cmocka_unit_test(test_kafkajs),
        cmocka_unit_test(test_java),
        cmocka_unit_test(test_txn_kcat),
        cmocka_unit_test(test_txn_confluent),
        cmocka_unit_test(test_txn_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
