/*
 * test_part_summary_local.c: the leader's side of PartitionSummary (cluster/part_summary.h): the summary
 * gr_part_summary_local builds from a real log and its partition (distinct sorted committed offsets, the
 * figures storage/lag.h gr_log_lag gives for each, high watermark, log start and end), the
 * request bounds the handler enforces, and the codec's round trip of a request and an answer (a headroom of
 * +Inf included).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/part_summary.h"
#include "common/arena.h"
#include "common/time.h"
#include "partition/partition.h"
#include "protocol/gen/messages.h"
#include "storage/producer_state.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "s", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    struct gr_partitions_config pc = {f->store, false};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static void append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000, 7, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    gr_partition_appended(f->part);
}

static void test_local_summary(void **state)
{
    struct fx *f = *state;
    append(f, 3);
    append(f, 4); /* log end 7 */
    int64_t now = gr_time_wall_ms();
    int64_t asked[] = {5, 3, -1, 5, 7, 0}; /* unsorted, a repeat, a negative one */
    struct gr_part_summary_offset offs[6];
    struct gr_part_summary s = {.offsets = offs};
    assert_int_equal(gr_part_summary_local(f->part, f->log, asked, 6, now, &s), 0);
    assert_int_equal(s.high_watermark, 7);
    assert_int_equal(s.last_stable_offset, 7);
    assert_int_equal(s.log_start_offset, 0);
    assert_int_equal(s.log_end_offset, 7);
    assert_int_equal(s.caught_up_offset, 7); /* data only: the high watermark */
    int64_t want[] = {0, 3, 5, 7};
    assert_int_equal(s.offset_count, 4); /* distinct, non-negative, ascending */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s.offsets[i].committed, want[i]);
        struct gr_log_lag v;
        assert_int_equal(gr_log_lag(f->log, want[i], now, &v), 0);
        assert_int_equal(s.offsets[i].lag.bytes, v.bytes);
        assert_int_equal(s.offsets[i].lag.headroom_records, want[i]); /* c - log start 0 */
        assert_true(s.offsets[i].lag.seconds == v.seconds);
        assert_true(s.offsets[i].lag.headroom_seconds == v.headroom_seconds);
    }
    assert_true(s.offsets[0].lag.bytes > 0);
    assert_int_equal(s.offsets[3].lag.bytes, 0); /* caught up */
    assert_true(s.offsets[3].lag.seconds == 0);
    assert_true(s.rate == s.offsets[0].lag.rate);
    /* no offset asked: the partition's figures alone */
    struct gr_part_summary e = {.offsets = offs};
    assert_int_equal(gr_part_summary_local(f->part, f->log, NULL, 0, now, &e), 0);
    assert_int_equal(e.offset_count, 0);
    assert_int_equal(e.high_watermark, 7);
}

/* A transaction's records then its commit marker: the summary's caught-up offset is the records' end, one
   below the high watermark (the marker is not readable); plain data after it moves it to the high
   watermark. */
static void test_local_caught_up(void **state)
{
    struct fx *f = *state;
    struct th_batch_spec spec = {.count = 4,
                                 .ts0 = 1000,
                                 .ts_step = 1,
                                 .tag = 3,
                                 .value_bytes = 10,
                                 .producer_id = 42,
                                 .producer_epoch = 0,
                                 .base_sequence = 0,
                                 .transactional = true};
    size_t len;
    uint8_t *b = th_batch(&spec, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0); /* 0..3 */
    free(b);
    assert_int_equal(gr_log_write_marker(f->log, 42, 0, 0, GR_CONTROL_COMMIT, 0, 2000, &res), 0); /* 4 */
    assert_int_equal(res.base_offset, 4);
    gr_partition_appended(f->part);
    struct gr_part_summary_offset offs[2];
    struct gr_part_summary s = {.offsets = offs};
    int64_t asked[] = {4, 3};
    int64_t now = gr_time_wall_ms();
    assert_int_equal(gr_part_summary_local(f->part, f->log, asked, 2, now, &s), 0);
    assert_int_equal(s.high_watermark, 5);
    assert_int_equal(s.caught_up_offset, 4);
    assert_int_equal(gr_part_summary_caught_up(&s), 4);
    assert_int_equal(s.offsets[1].committed, 4); /* at the marker: nothing to read */
    assert_int_equal(s.offsets[1].lag.bytes, 0);
    assert_true(s.offsets[1].lag.seconds == 0);
    assert_true(s.offsets[0].lag.bytes > 0); /* at 3: one record left */
    append(f, 2);                            /* 5..6 */
    assert_int_equal(gr_part_summary_local(f->part, f->log, asked, 2, now, &s), 0);
    assert_int_equal(s.high_watermark, 7);
    assert_int_equal(s.caught_up_offset, 7);
}

static void test_request_bounds(void **state)
{
    (void)state;
    static struct gr_partition_summary_request_partition_summary_partition ps[2];
    static int64_t offs[GR_PART_SUMMARY_OFFSETS_MAX + 1];
    struct gr_partition_summary_request_partition_summary_topic t = {.name = gr_str_c("t")};
    t.partitions.items = ps;
    t.partitions.count = 2;
    ps[0].committed_offsets = (struct gr_int64_array){offs, GR_PART_SUMMARY_OFFSETS_MAX};
    struct gr_partition_summary_request r = {.topics = {&t, 1}};
    assert_true(gr_part_summary_request_within_bounds(&r));
    ps[0].committed_offsets.count = GR_PART_SUMMARY_OFFSETS_MAX + 1; /* one offset too many */
    assert_false(gr_part_summary_request_within_bounds(&r));
    ps[0].committed_offsets.count = 1;
    char name[GR_PART_SUMMARY_TOPIC_BYTES_MAX + 2];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    t.name = (struct gr_str){name, GR_PART_SUMMARY_TOPIC_BYTES_MAX};
    assert_true(gr_part_summary_request_within_bounds(&r));
    t.name.len++; /* 250 bytes */
    assert_false(gr_part_summary_request_within_bounds(&r));
    t.name.len--;
    /* partitions over the cap, spread over topics */
    struct gr_partition_summary_request_partition_summary_topic many[3];
    for (int i = 0; i < 3; i++) {
        many[i] = t;
        many[i].partitions.count = GR_PART_SUMMARY_PARTITIONS_MAX / 3;
        many[i].partitions.items = calloc((size_t)many[i].partitions.count, sizeof *ps);
    }
    r.topics = (struct gr_partition_summary_request_partition_summary_topic_array){many, 3};
    assert_true(gr_part_summary_request_within_bounds(&r)); /* 99,999 */
    many[2].partitions.count += 2;                          /* 100,001 */
    assert_false(gr_part_summary_request_within_bounds(&r));
    for (int i = 0; i < 3; i++)
        free(many[i].partitions.items);
}

static void test_codec_round_trip(void **state)
{
    (void)state;
    struct gr_partition_summary_response_partition_summary_offset o = {.committed_offset = 3,
                                                                       .lag_bytes = 120,
                                                                       .lag_seconds = 2.5,
                                                                       .headroom_records = 3,
                                                                       .headroom_seconds = INFINITY};
    struct gr_partition_summary_response_partition_summary_partition_result p = {.partition_index = 2,
                                                                                 .error_code = 0,
                                                                                 .high_watermark = 7,
                                                                                 .last_stable_offset = 6,
                                                                                 .log_start_offset = 1,
                                                                                 .log_end_offset = 8,
                                                                                 .rate = 12.25,
                                                                                 .offsets = {&o, 1}};
    struct gr_partition_summary_response_partition_summary_topic_result t = {.name = gr_str_c("rl"),
                                                                             .partitions = {&p, 1}};
    struct gr_partition_summary_response r;
    gr_partition_summary_response_init(&r);
    r.topics.items = &t;
    r.topics.count = 1;
    size_t n = gr_partition_summary_response_size(&r, 0);
    uint8_t *buf = malloc(n);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, n);
    gr_partition_summary_response_encode(&wr, &r, 0);
    struct gr_arena arena;
    gr_arena_init(&arena, 4096);
    struct gr_rd rd;
    gr_rd_init(&rd, buf, n, &arena);
    struct gr_partition_summary_response d;
    gr_partition_summary_response_init(&d);
    assert_int_equal(gr_partition_summary_response_decode(&rd, 0, &d), 0);
    assert_int_equal(d.topics.count, 1);
    assert_int_equal(d.topics.items[0].name.len, 2);
    const struct gr_partition_summary_response_partition_summary_partition_result *dp =
        &d.topics.items[0].partitions.items[0];
    assert_int_equal(dp->partition_index, 2);
    assert_int_equal(dp->high_watermark, 7);
    assert_int_equal(dp->last_stable_offset, 6);
    assert_int_equal(dp->log_start_offset, 1);
    assert_int_equal(dp->log_end_offset, 8);
    assert_true(dp->rate == 12.25);
    assert_int_equal(dp->offsets.count, 1);
    assert_int_equal(dp->offsets.items[0].lag_bytes, 120);
    assert_true(dp->offsets.items[0].lag_seconds == 2.5);
    assert_true(isinf(dp->offsets.items[0].headroom_seconds));
    /* truncated: an error, never a crash */
    gr_arena_reset(&arena);
    gr_rd_init(&rd, buf, n - 3, &arena);
    gr_partition_summary_response_init(&d);
    assert_int_not_equal(gr_partition_summary_response_decode(&rd, 0, &d), 0);
    gr_arena_reset(&arena);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_local_summary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_caught_up, setup, teardown),
        cmocka_unit_test(test_request_bounds),
        cmocka_unit_test(test_codec_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
