/*
 * test_produce_timestamps.c: the Produce handler's timestamp rules (Kafka's LogValidator) against a real
 * store: a batch whose records say "now" and whose header says now + 10 years is stored with the header's
 * max timestamp corrected to the records' maximum and a valid CRC-32C (uncompressed and each codec), so
 * ListOffsets max-timestamp answers the record's real time; LogAppendTime stores the broker's clock; the
 * before/after bounds apply to every record, not only the first or the header; a producer-set
 * LogAppendTime bit is handled as Kafka does; a refused batch names every refused record in record_errors
 * (batch index, Kafka's message), sums them up in error_message and reports the log start offset; Kafka
 * 4.4's max.decompressed.message.bytes bounds each record of a compressed batch. Read next:
 * server/handlers/produce.c, protocol/record_batch.h (gr_batch_apply_timestamps).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/time.h"
#include "server/handlers/handlers.h"
#include "storage/sys.h"
#include "storage/tests/helpers.h"

void gr_broker_init_watchers(struct gr_broker *b);

#define TEN_YEARS_MS (3650LL * 24 * 3600 * 1000)
#define HOUR_MS (3600LL * 1000)

struct fx {
    char dir[64];
    struct gr_broker *b;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    struct gr_broker *b = calloc(1, sizeof *b);
    gr_config_init(&b->cfg);
    b->loop = ev_loop_new(EVFLAG_AUTO);
    gr_broker_init_watchers(b);
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &b->store), 0);
    b->parts = gr_partitions_create(&(struct gr_partitions_config){b->store, false});
    assert_non_null(b->parts);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(b->store, "c", 1, NULL, NULL, 0, &t), 0);
    const char *lk[] = {"message.timestamp.type"}, *lv[] = {"LogAppendTime"};
    assert_int_equal(gr_store_topic_create(b->store, "l", 1, lk, lv, 1, &t), 0);
    const char *bk[] = {"message.timestamp.before.max.ms"}, *bv[] = {"3600000"};
    assert_int_equal(gr_store_topic_create(b->store, "b", 1, bk, bv, 1, &t), 0);
    const char *kk[] = {"cleanup.policy", "message.timestamp.before.max.ms"}, *kv[] = {"compact", "3600000"};
    assert_int_equal(gr_store_topic_create(b->store, "k", 1, kk, kv, 2, &t), 0);
    const char *dk[] = {"cleanup.policy", "max.decompressed.message.bytes"}, *dv[] = {"compact", "40"};
    assert_int_equal(gr_store_topic_create(b->store, "d", 1, dk, dv, 2, &t), 0);
    f->b = b;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_store_close(f->b->store);
    gr_sys_reset();
    ev_loop_destroy(f->b->loop);
    gr_config_free(&f->b->cfg);
    gr_partitions_destroy(f->b->parts);
    free(f->b->flushed);
    free(f->b);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* A batch of `n` records with the given timestamps (each value "v"), codec `codec`; then, as a lying
   client would, the header's max timestamp set to `header_max` (unless -2) and extra attribute bits
   `attrs` set, with a CRC that matches. Returns malloc'd bytes. */
static uint8_t *lying_batch(const int64_t *ts, int n, enum gr_codec codec, int64_t header_max, int16_t attrs,
                            size_t *len)
{
    struct gr_record_in recs[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++)
        recs[i] =
            (struct gr_record_in){.timestamp = ts[i], .key = {NULL, -1}, .value = {(const uint8_t *)"v", 1}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .codec = codec,
                                 .log_append_time = -1,
                                 .producer_id = -1,
                                 .producer_epoch = -1,
                                 .base_sequence = -1};
    uint8_t *b;
    assert_int_equal(gr_batch_build(&bp, recs, n, &b, len), 0);
    if (header_max != -2) gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)header_max);
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)(gr_batch_attributes(b) | attrs));
    gr_batch_crc_store(b, *len);
    return b;
}

/* A batch of `n` records with the given timestamps, record i keyed ("k") when keyed[i], else null. */
static uint8_t *keyed_batch(const int64_t *ts, const bool *keyed, int n, enum gr_codec codec, size_t *len)
{
    struct gr_record_in recs[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++)
        recs[i] = (struct gr_record_in){.timestamp = ts[i],
                                        .key = keyed[i] ? (struct gr_bytes){(const uint8_t *)"k", 1}
                                                        : (struct gr_bytes){NULL, -1},
                                        .value = {(const uint8_t *)"vv", 2}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .codec = codec,
                                 .log_append_time = -1,
                                 .producer_id = -1,
                                 .producer_epoch = -1,
                                 .base_sequence = -1};
    uint8_t *b;
    assert_int_equal(gr_batch_build(&bp, recs, n, &b, len), 0);
    return b;
}

/* What a test checks of one partition answer (copied out of the request arena). */
struct answer {
    int16_t err;
    int64_t log_start_offset;
    int nerr;
    int32_t index[8];
    char msg[8][320];
    char summary[1600]; /* "(null)" when null */
};

static void copy_str(char *dst, size_t cap, struct gr_str s)
{
    snprintf(dst, cap, "%.*s", s.len < 0 ? 6 : s.len, s.len < 0 ? "(null)" : s.ptr);
}

/* Sends one Produce v9 acks=1 of `batch` to `topic`-0 and copies the partition's answer to *a. */
static void produce_full(struct fx *f, const char *topic, const uint8_t *batch, size_t len, struct answer *a)
{
    struct gr_req *req = calloc(1, sizeof *req);
    req->broker = f->b;
    gr_arena_init(&req->arena, 1 << 20);
    req->hdr.request_api_key = 0;
    req->hdr.request_api_version = 9;
    uint8_t *copy = gr_arena_alloc(&req->arena, len);
    memcpy(copy, batch, len);
    struct gr_produce_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_produce_request_init(body);
    body->transactional_id = GR_STR_NULL;
    body->acks = 1;
    body->timeout_ms = 30000;
    body->topic_data.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topic_data.items);
    body->topic_data.count = 1;
    body->topic_data.items[0].name = gr_str_c(topic);
    body->topic_data.items[0].partition_data.items =
        gr_arena_calloc(&req->arena, 1, sizeof *body->topic_data.items[0].partition_data.items);
    body->topic_data.items[0].partition_data.count = 1;
    body->topic_data.items[0].partition_data.items[0].records = (struct gr_bytes){copy, (int32_t)len};
    req->body = body;
    struct gr_produce_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
    gr_produce_response_init(resp);
    req->resp = resp;
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    struct gr_produce_response_partition_produce_response *pr =
        &resp->responses.items[0].partition_responses.items[0];
    memset(a, 0, sizeof *a);
    a->err = pr->error_code;
    a->log_start_offset = pr->log_start_offset;
    a->nerr = pr->record_errors.count;
    for (int i = 0; i < a->nerr && i < 8; i++) {
        a->index[i] = pr->record_errors.items[i].batch_index;
        copy_str(a->msg[i], sizeof a->msg[i], pr->record_errors.items[i].batch_index_error_message);
    }
    copy_str(a->summary, sizeof a->summary, pr->error_message);
    gr_req_free(req);
}

/* Sends one Produce v9 acks=1 of `batch` to `topic`-0 and returns the partition's error code. */
static int16_t produce(struct fx *f, const char *topic, const uint8_t *batch, size_t len)
{
    struct answer a;
    produce_full(f, topic, batch, len, &a);
    return a.err;
}

static struct gr_log *log_of(struct fx *f, const char *topic)
{
    return gr_topic_log(gr_store_topic_find(f->b->store, topic, strlen(topic)), 0);
}

/* The stored batches of `topic`-0: count returned, headers (CRC checked by th_read_all) in *seen. */
static int stored(struct fx *f, const char *topic, struct th_seen **seen)
{
    struct gr_log *log = log_of(f, topic);
    return th_read_all(log, 0, gr_log_end_offset(log), seen);
}

static void test_header_max_timestamp_corrected_each_codec(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_GZIP, GR_CODEC_SNAPPY, GR_CODEC_LZ4, GR_CODEC_ZSTD};
    for (int c = 0; c < 5; c++) {
        int64_t ts[] = {now - 5, now - 3, now - 4}; /* max in the middle */
        size_t len;
        uint8_t *b = lying_batch(ts, 3, codecs[c], now + TEN_YEARS_MS, 0, &len);
        assert_int_equal(produce(f, "c", b, len), GR_ERR_NONE);
        free(b);
    }
    struct th_seen *seen;
    assert_int_equal(stored(f, "c", &seen), 5); /* th_read_all fails on a bad CRC */
    for (int c = 0; c < 5; c++)
        assert_int_equal(seen[c].max_timestamp, now - 3);
    free(seen);
    int64_t off, ts;
    int32_t epoch;
    struct gr_log *log = log_of(f, "c");
    assert_int_equal(gr_log_max_timestamp(log, gr_log_end_offset(log), &off, &ts, &epoch), 0);
    assert_int_equal(ts, now - 3); /* ListOffsets -3: the record's real time, not 10 years ahead */
    assert_int_equal(off, 1);
}

static void test_header_max_timestamp_below_records_raised(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    int64_t ts[] = {now - 10, now - 2};
    size_t len;
    uint8_t *b = lying_batch(ts, 2, GR_CODEC_LZ4, INT64_MIN, 0, &len); /* header near INT64_MIN */
    assert_int_equal(produce(f, "c", b, len), GR_ERR_NONE);
    free(b);
    struct th_seen *seen;
    assert_int_equal(stored(f, "c", &seen), 1);
    assert_int_equal(seen[0].max_timestamp, now - 2);
    free(seen);
}

static void test_log_append_time(void **state)
{
    struct fx *f = *state;
    int64_t t0 = gr_time_wall_ms();
    int64_t ts[] = {1000, 2000};
    size_t len;
    uint8_t *b = lying_batch(ts, 2, GR_CODEC_NONE, t0 + TEN_YEARS_MS, 0, &len);
    assert_int_equal(produce(f, "l", b, len), GR_ERR_NONE);
    free(b);
    int64_t t1 = gr_time_wall_ms();
    struct th_seen *seen;
    assert_int_equal(stored(f, "l", &seen), 1);
    assert_true(seen[0].max_timestamp >= t0 && seen[0].max_timestamp <= t1);
    free(seen);
    /* A producer that sets the LogAppendTime bit itself: Kafka refuses it on a LogAppendTime topic. */
    b = lying_batch(ts, 2, GR_CODEC_NONE, -2, GR_BATCH_ATTR_LOG_APPEND_TIME, &len);
    assert_int_equal(produce(f, "l", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
}

static void test_bounds_apply_to_every_record(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    size_t len;
    uint8_t *b;
    /* after.max.ms (1 h by default): a record in the middle 2 h ahead, the header saying "now". */
    int64_t ahead[] = {now, now + 2 * HOUR_MS, now};
    b = lying_batch(ahead, 3, GR_CODEC_NONE, now, 0, &len);
    assert_int_equal(produce(f, "c", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
    /* before.max.ms = 1 h on topic b: the first record (base timestamp) is now, the second 2 h old. */
    int64_t old[] = {now, now - 2 * HOUR_MS};
    b = lying_batch(old, 2, GR_CODEC_NONE, now, 0, &len);
    assert_int_equal(produce(f, "b", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
    b = lying_batch(old, 2, GR_CODEC_ZSTD, now, 0, &len); /* from the decompressed records too */
    assert_int_equal(produce(f, "b", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
    /* INT64_MIN with the default unlimited before.max.ms: now - INT64_MIN does not fit in 64 bits, beyond
       any bound (Kafka refuses it too, through its wrapped difference). */
    int64_t extreme[] = {now, INT64_MIN};
    b = lying_batch(extreme, 2, GR_CODEC_NONE, now, 0, &len);
    assert_int_equal(produce(f, "c", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
    /* Within the bounds, and -1 (no timestamp) exempt: accepted. */
    int64_t fine[] = {now - HOUR_MS / 2, -1, now + HOUR_MS / 2};
    b = lying_batch(fine, 3, GR_CODEC_NONE, -2, 0, &len);
    assert_int_equal(produce(f, "b", b, len), GR_ERR_NONE);
    free(b);
    assert_int_equal(gr_log_end_offset(log_of(f, "c")), 0);
    assert_int_equal(gr_log_end_offset(log_of(f, "b")), 3);
}

static void test_producer_log_append_time_bit_on_create_time_topic(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    int64_t ts[] = {now - 7, now - 6};
    size_t len;
    /* Kafka reads every record as the header's max timestamp, checks that, and stores CreateTime. */
    uint8_t *b = lying_batch(ts, 2, GR_CODEC_NONE, now - 1, GR_BATCH_ATTR_LOG_APPEND_TIME, &len);
    assert_int_equal(produce(f, "c", b, len), GR_ERR_NONE);
    free(b);
    b = lying_batch(ts, 2, GR_CODEC_NONE, now + TEN_YEARS_MS, GR_BATCH_ATTR_LOG_APPEND_TIME, &len);
    assert_int_equal(produce(f, "c", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
    b = lying_batch(ts, 2, GR_CODEC_NONE, -1, GR_BATCH_ATTR_LOG_APPEND_TIME, &len);
    assert_int_equal(produce(f, "c", b, len), GR_ERR_INVALID_TIMESTAMP);
    free(b);
    struct th_seen *seen;
    assert_int_equal(stored(f, "c", &seen), 1);
    assert_int_equal(seen[0].max_timestamp, now - 1);
    free(seen);
    struct gr_log_slice s;
    struct gr_log *log = log_of(f, "c");
    assert_int_equal(gr_log_read(log, 0, 1 << 20, gr_log_end_offset(log), true, &s), 0);
    uint8_t *bytes = th_slice_bytes(&s);
    assert_int_equal(gr_batch_attributes(bytes) & GR_BATCH_ATTR_LOG_APPEND_TIME, 0);
    free(bytes);
    gr_log_slice_release(&s);
}

/* A batch of `n` records timestamped now, record i with value_bytes[i] bytes of 'x' and key "k" unless
   keyless[i]: the record's body is 7 + value_bytes[i] bytes while that is below 64. */
static uint8_t *sized_batch(const int *value_bytes, const bool *keyless, int n, enum gr_codec codec,
                            size_t *len)
{
    static const uint8_t xs[64] = {[0 ... 63] = 'x'};
    struct gr_record_in recs[8];
    assert_true(n <= 8);
    int64_t now = gr_time_wall_ms();
    for (int i = 0; i < n; i++)
        recs[i] = (struct gr_record_in){.timestamp = now,
                                        .key = keyless[i] ? (struct gr_bytes){NULL, -1}
                                                          : (struct gr_bytes){(const uint8_t *)"k", 1},
                                        .value = {xs, value_bytes[i]}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .codec = codec,
                                 .log_append_time = -1,
                                 .producer_id = -1,
                                 .producer_epoch = -1,
                                 .base_sequence = -1};
    uint8_t *b;
    assert_int_equal(gr_batch_build(&bp, recs, n, &b, len), 0);
    return b;
}

/* Kafka 4.4's max.decompressed.message.bytes (topic "d": 40, compacted): a compressed batch with a record
   whose body exceeds it is INVALID_RECORD with no message and no record_errors, even when an earlier record
   broke another rule (the read stops there); records at the bound and uncompressed batches pass. */
static void test_max_decompressed_message_bytes(void **state)
{
    struct fx *f = *state;
    int at[] = {33, 10}, over[] = {10, 34};
    bool keyed[] = {false, false}, first_keyless[] = {true, false};
    enum gr_codec codecs[] = {GR_CODEC_GZIP, GR_CODEC_LZ4, GR_CODEC_ZSTD};
    struct answer a;
    size_t len;
    uint8_t *b;
    for (int c = 0; c < 3; c++) {
        b = sized_batch(over, keyed, 2, codecs[c], &len);
        produce_full(f, "d", b, len, &a);
        free(b);
        assert_int_equal(a.err, GR_ERR_INVALID_RECORD);
        assert_int_equal(a.nerr, 0);
        assert_string_equal(a.summary, "(null)");
        assert_int_equal(a.log_start_offset, 0); /* met in the log */
        b = sized_batch(over, first_keyless, 2, codecs[c], &len);
        produce_full(f, "d", b, len, &a);
        free(b);
        assert_int_equal(a.err, GR_ERR_INVALID_RECORD);
        assert_int_equal(a.nerr, 0); /* not the keyless record 0: the long record 1 ends the read */
        assert_string_equal(a.summary, "(null)");
    }
    assert_int_equal(gr_log_end_offset(log_of(f, "d")), 0);
    b = sized_batch(at, keyed, 2, GR_CODEC_LZ4, &len);
    assert_int_equal(produce(f, "d", b, len), GR_ERR_NONE);
    free(b);
    b = sized_batch(over, keyed, 2, GR_CODEC_NONE, &len); /* Kafka checks only what it decompresses */
    assert_int_equal(produce(f, "d", b, len), GR_ERR_NONE);
    free(b);
    assert_int_equal(gr_log_end_offset(log_of(f, "d")), 4);
    /* the default bound (no topic-level value) takes the same long record */
    b = sized_batch(over, keyed, 2, GR_CODEC_LZ4, &len);
    assert_int_equal(produce(f, "c", b, len), GR_ERR_NONE);
    free(b);
}

/* A partition named twice, in one topic entry and in a topic named twice, as Kafka 4.4 keeps them: one
   topic entry, one partition entry, only the LAST occurrence's records appended. */
static void test_duplicate_partitions_merged(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    int64_t ts[] = {now, now, now};
    size_t len[3];
    uint8_t *bs[3];
    for (int i = 0; i < 3; i++)
        bs[i] = lying_batch(ts, i + 1, GR_CODEC_NONE, -2, 0, &len[i]); /* 1, 2 and 3 records */
    struct gr_req *req = calloc(1, sizeof *req);
    req->broker = f->b;
    gr_arena_init(&req->arena, 1 << 20);
    req->hdr.request_api_key = 0;
    req->hdr.request_api_version = 9;
    struct gr_produce_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_produce_request_init(body);
    body->transactional_id = GR_STR_NULL;
    body->acks = 1;
    body->timeout_ms = 30000;
    body->topic_data.items = gr_arena_calloc(&req->arena, 2, sizeof *body->topic_data.items);
    body->topic_data.count = 2;
    static const int in_topic[] = {2, 1}; /* c:[0 <- 1 record, 0 <- 3 records], c:[0 <- 2 records] */
    static const int batch_of[2][2] = {{0, 2}, {1, -1}};
    for (int t = 0; t < 2; t++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[t];
        td->name = gr_str_c("c");
        td->partition_data.items = gr_arena_calloc(&req->arena, 2, sizeof *td->partition_data.items);
        td->partition_data.count = in_topic[t];
        for (int p = 0; p < in_topic[t]; p++) {
            int k = batch_of[t][p];
            uint8_t *copy = gr_arena_alloc(&req->arena, len[k]);
            memcpy(copy, bs[k], len[k]);
            td->partition_data.items[p].index = 0;
            td->partition_data.items[p].records = (struct gr_bytes){copy, (int32_t)len[k]};
        }
    }
    req->body = body;
    struct gr_produce_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
    gr_produce_response_init(resp);
    req->resp = resp;
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    assert_int_equal(resp->responses.count, 1);
    assert_int_equal(resp->responses.items[0].partition_responses.count, 1);
    assert_int_equal(resp->responses.items[0].partition_responses.items[0].error_code, GR_ERR_NONE);
    assert_int_equal(resp->responses.items[0].partition_responses.items[0].base_offset, 0);
    gr_req_free(req);
    assert_int_equal(gr_log_end_offset(log_of(f, "c")), 2); /* the 2-record batch alone */
    for (int i = 0; i < 3; i++)
        free(bs[i]);
}

/* Repeats across topics and partitions (sorted, not compared pairwise: a Produce may name millions of
   entries): topics answered in order of first occurrence, each partition once at its first place. Unknown
   topics, so the answer's shape is all there is: a [0, 1], b [0], a [1, 2] and 30,000 entries of z naming
   partitions 0-14,999 twice -> a [0, 1, 2], b [0], z [0..14999]. */
static void test_duplicate_shape(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = calloc(1, sizeof *req);
    req->broker = f->b;
    gr_arena_init(&req->arena, 8 << 20);
    req->hdr.request_api_key = 0;
    req->hdr.request_api_version = 9;
    struct gr_produce_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_produce_request_init(body);
    body->transactional_id = GR_STR_NULL;
    body->acks = 1;
    body->timeout_ms = 30000;
    static const char *names[] = {"a", "b", "a", "z"};
    static const int counts[] = {2, 1, 2, 30000};
    static const int first_index[] = {0, 0, 1, 0};
    body->topic_data.items = gr_arena_calloc(&req->arena, 4, sizeof *body->topic_data.items);
    body->topic_data.count = 4;
    for (int t = 0; t < 4; t++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[t];
        td->name = gr_str_c(names[t]);
        td->partition_data.items =
            gr_arena_calloc(&req->arena, (size_t)counts[t], sizeof *td->partition_data.items);
        td->partition_data.count = counts[t];
        for (int p = 0; p < counts[t]; p++) {
            td->partition_data.items[p].index = t == 3 ? p % 15000 : first_index[t] + p;
            td->partition_data.items[p].records = (struct gr_bytes){NULL, -1};
        }
    }
    req->body = body;
    struct gr_produce_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
    gr_produce_response_init(resp);
    req->resp = resp;
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    assert_int_equal(resp->responses.count, 3);
    static const char *want_names[] = {"a", "b", "z"};
    static const int want_counts[] = {3, 1, 15000};
    for (int t = 0; t < 3; t++) {
        assert_true(gr_str_eq_c(resp->responses.items[t].name, want_names[t]));
        assert_int_equal(resp->responses.items[t].partition_responses.count, want_counts[t]);
        for (int p = 0; p < want_counts[t]; p++) {
            assert_int_equal(resp->responses.items[t].partition_responses.items[p].index, p);
            assert_int_not_equal(resp->responses.items[t].partition_responses.items[p].error_code,
                                 GR_ERR_NONE);
        }
    }
    gr_req_free(req);
}

/* Errors Kafka 4.4 meets in the log carry no error_message (CRC, batch framing, batch-level INVALID_RECORD);
   only record validation refusals have one (see test_record_errors_*). */
static void test_log_errors_have_no_message(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    int64_t ts[] = {now, now};
    size_t len;
    struct answer a;
    uint8_t *b = lying_batch(ts, 2, GR_CODEC_NONE, -2, 0, &len);
    b[len - 1] ^= 1; /* CRC mismatch */
    produce_full(f, "c", b, len, &a);
    assert_int_equal(a.err, GR_ERR_CORRUPT_MESSAGE);
    assert_string_equal(a.summary, "(null)");
    free(b);
    b = lying_batch(ts, 2, GR_CODEC_NONE, -2, 0, &len);
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, 5); /* record count 2, last offset delta 5 */
    gr_batch_crc_store(b, len);
    produce_full(f, "c", b, len, &a);
    assert_int_equal(a.err, GR_ERR_INVALID_RECORD);
    assert_string_equal(a.summary, "(null)");
    free(b);
    assert_int_equal(gr_log_end_offset(log_of(f, "c")), 0);
}

#define KEY_MSG "Compacted topic cannot accept message without key in topic partition k-0"

/* KIP-467 as Kafka's LogValidator fills it: every keyless record of a batch to a compacted topic listed. */
static void test_record_errors_null_keys(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    int64_t ts[] = {now, now, now, now};
    bool keyed[] = {true, false, true, false};
    enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_LZ4};
    for (int c = 0; c < 2; c++) {
        size_t len;
        uint8_t *b = keyed_batch(ts, keyed, 4, codecs[c], &len);
        struct answer a;
        produce_full(f, "k", b, len, &a);
        free(b);
        assert_int_equal(a.err, GR_ERR_INVALID_RECORD);
        assert_int_equal(a.log_start_offset, 0); /* the partition's, not -1 */
        assert_int_equal(a.nerr, 2);
        assert_int_equal(a.index[0], 1);
        assert_int_equal(a.index[1], 3);
        assert_string_equal(a.msg[0], KEY_MSG);
        assert_string_equal(a.msg[1], KEY_MSG);
        assert_string_equal(a.summary,
                            "One or more records have been rejected due to 2 record errors in total, and "
                            "only showing the first three errors at most: [RecordError(batchIndex=1, "
                            "message='" KEY_MSG "'), RecordError(batchIndex=3, message='" KEY_MSG "')]");
    }
    assert_int_equal(gr_log_end_offset(log_of(f, "k")), 0);
}

/* Every out-of-bounds record listed with Kafka's message; a timestamp refusal makes the whole answer
   INVALID_TIMESTAMP even beside key refusals (LogValidator.processRecordErrors). */
static void test_record_errors_timestamps(void **state)
{
    struct fx *f = *state;
    int64_t now = gr_time_wall_ms();
    int64_t ts[] = {now, now - 2 * HOUR_MS, now, now - 3 * HOUR_MS};
    bool keyed[] = {false, true, true, true};
    size_t len;
    uint8_t *b = keyed_batch(ts, keyed, 4, GR_CODEC_NONE, &len);
    struct answer a;
    produce_full(f, "k", b, len, &a);
    free(b);
    assert_int_equal(a.err, GR_ERR_INVALID_TIMESTAMP);
    assert_int_equal(a.log_start_offset, 0);
    assert_string_equal(a.summary, "One or more records have been rejected due to invalid timestamp");
    assert_int_equal(a.nerr, 3);
    assert_int_equal(a.index[0], 0);
    assert_string_equal(a.msg[0], KEY_MSG); /* the key is checked first */
    for (int i = 1; i < 3; i++) {
        int64_t t = i == 1 ? now - 2 * HOUR_MS : now - 3 * HOUR_MS;
        long long lo, hi;
        char head[160];
        snprintf(head, sizeof head, "Timestamp %lld of message with offset %d is out of range. ",
                 (long long)t, 2 * i - 1);
        assert_int_equal(a.index[i], 2 * i - 1);
        assert_memory_equal(a.msg[i], head, strlen(head));
        assert_int_equal(
            sscanf(a.msg[i] + strlen(head), "The timestamp should be within [%lld, %lld]", &lo, &hi), 2);
        assert_true(lo >= now - HOUR_MS && lo <= now - HOUR_MS + 60000); /* now - before.max.ms */
        assert_true(hi == lo + HOUR_MS + HOUR_MS);                       /* now + after.max.ms (1 h) */
    }
}

/* A producer-set LogAppendTime bit on a LogAppendTime topic: every record named, printed as Kafka's
   DefaultRecord (a compressed batch kept in its codec: PartialDefaultRecord, raw key size). */
static void test_record_errors_timestamp_type(void **state)
{
    struct fx *f = *state;
    int64_t ts[] = {1000, 2000};
    enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_ZSTD};
    const char *want[] = {
        "Invalid timestamp type in message DefaultRecord(offset=%d, timestamp=2000, key=0 bytes, "
        "value=1 bytes). Producer should not set timestamp type to LogAppendTime.",
        "Invalid timestamp type in message PartialDefaultRecord(offset=%d, timestamp=2000, key=-1 "
        "bytes, value=1 bytes). Producer should not set timestamp type to LogAppendTime."};
    for (int c = 0; c < 2; c++) {
        size_t len;
        uint8_t *b = lying_batch(ts, 2, codecs[c], -2, GR_BATCH_ATTR_LOG_APPEND_TIME, &len);
        struct answer a;
        produce_full(f, "l", b, len, &a);
        free(b);
        assert_int_equal(a.err, GR_ERR_INVALID_TIMESTAMP);
        assert_int_equal(a.nerr, 2);
        for (int i = 0; i < 2; i++) {
            char m[320];
            snprintf(m, sizeof m, want[c], i);
            assert_int_equal(a.index[i], i);
            assert_string_equal(a.msg[i], m);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_header_max_timestamp_corrected_each_codec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_max_timestamp_below_records_raised, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_append_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds_apply_to_every_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_producer_log_append_time_bit_on_create_time_topic, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_record_errors_null_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_errors_timestamps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_errors_timestamp_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_decompressed_message_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_partitions_merged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_errors_have_no_message, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
