/*
 * test_hw_bounds.c: what the high watermark bounds on a leader whose high watermark a follower holds back
 * (issue #20, "What the high watermark bounds"), on real logs in a temporary directory: the test plays the
 * owning thread and the followers (their fetches as gr_partition_update_follower_fetch_state calls). This
 * broker is 1, the leader of replicas {1,2,3} (gr_partition_set_role), every broker registered.
 *
 * Covers: retention (time) deletes only segments whose next offset is <= the high watermark
 * (UnifiedLog.deletableSegments), and goes further once the follower catches up; after a restart, before
 * the partition layer tells storage a high watermark, retention stops at the one restored from
 * replication-offset-checkpoint, not at the durable offset; the cleaner cleans below
 * min(high watermark, active segment base) only (LogCleanerManager.cleanableOffsets); the low watermark wait
 * (DelayedDeleteRecords) is done only when every live follower reported a log start offset at or past the
 * offset, at once on a one-node partition, when a dead follower stops counting at the shrink tick, and with
 * -EXDEV when the leader becomes follower; ListOffsets on a new leader whose high watermark is below its
 * epoch's start offset answers OFFSET_NOT_AVAILABLE for latest and for lookups finding a record at or past
 * the high watermark, earliest as always, and latest again once the high watermark passes the epoch start
 * (Partition.fetchOffsetForTimestamp).
 * Read next: partition/replica.c, storage/log.c (gr_log_retention), storage/cleaner.c (dirty_bounds).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "partition/partition.h"
#include "partition/tests/counted.h"
#include "protocol/errors.h"
#include "storage/cleaner.h"
#include "storage/tests/helpers.h"

#define BROKERS 4            /* broker ids 1..3 */
#define NOW_WALL_MS 10000000 /* the wall clock retention and the cleaner run at: every record is older */

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_topic *t;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    int64_t epoch[BROKERS]; /* registered broker epochs, -1: gone */
    int64_t now;
};

static int64_t hook_broker_epoch(void *ctx, int32_t broker_id, bool *shutting_down)
{
    struct fx *f = ctx;
    *shutting_down = false;
    return broker_id >= 1 && broker_id < BROKERS ? f->epoch[broker_id] : -1;
}

static int64_t hook_now(void *ctx)
{
    return ((struct fx *)ctx)->now;
}

/* A store with topic "h" (one partition) of `policy` and 100-byte segments (one small batch each). */
static int setup_policy(void **state, const char *policy)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    const char *keys[] = {"segment.bytes", "retention.ms", "cleanup.policy"};
    const char *values[] = {"100", "60000", policy};
    assert_int_equal(gr_store_topic_create(f->store, "h", 1, keys, values, 3, &f->t), 0);
    f->log = gr_topic_log(f->t, 0);
    struct gr_partitions_config pc = {f->store, false};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    for (int i = 1; i < BROKERS; i++)
        f->epoch[i] = 100 + i;
    f->now = 1000000;
    struct gr_partition_repl_config rc = {.broker_epoch = hook_broker_epoch, .now_ms = hook_now, .ctx = f};
    gr_partitions_set_replication(f->ps, &rc);
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    *state = f;
    return 0;
}

static int setup_delete(void **state)
{
    return setup_policy(state, "delete");
}

static int setup_compact(void **state)
{
    return setup_policy(state, "compact");
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

/* Appends one batch of one record with key `key` at timestamp 1000 + its offset, through the partition, and
   lets the spare file be made so that the next batch rolls (one batch per segment). */
static void append_one(struct fx *f, const char *key)
{
    int64_t offset = gr_log_end_offset(f->log);
    char value[16];
    int vl = snprintf(value, sizeof value, "v%lld", (long long)offset);
    struct gr_record_in rec = {.timestamp = 1000 + offset,
                               .key = {(const uint8_t *)key, (int32_t)strlen(key)},
                               .value = {(const uint8_t *)value, vl}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .log_append_time = -1,
                                 .producer_id = -1,
                                 .producer_epoch = -1,
                                 .base_sequence = -1};
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_build(&bp, &rec, 1, &b, &len), 0);
    struct gr_append_result res;
    assert_int_equal(gr_partition_append(f->part, b, len, -1, &res), 0);
    free(b);
    gr_store_quiesce(f->store);
}

/* Makes broker 1 the leader of {1,2,3}, ISR all, min.insync.replicas 1, at `leader_epoch`. */
static void lead(struct fx *f, int32_t leader_epoch)
{
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {
        GR_PARTITION_LEADER, 1, leader_epoch, leader_epoch, replicas, 3, replicas, 3, 1, f->now};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
}

/* A fetch of follower `id` at `offset` reporting log start offset `log_start`. */
static void fetch(struct fx *f, int32_t id, int64_t offset, int64_t log_start)
{
    struct gr_follower_fetch ff = {id, f->epoch[id], offset, log_start, f->now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &ff), 0);
}

static void test_retention_keeps_segments_above_hw(void **state)
{
    struct fx *f = *state;
    lead(f, 1);
    for (int i = 0; i < 10; i++)
        append_one(f, "k");
    assert_int_equal(gr_log_segment_count(f->log), 10); /* segment i holds offset i */
    fetch(f, 2, 10, 0);
    fetch(f, 3, 4, 0); /* 3 holds the high watermark at 4 */
    assert_int_equal(gr_partition_visible_offset(f->part), 4);
    assert_int_equal(gr_log_high_watermark(f->log), 4);
    /* every record is past retention.ms: only the segments ending at or below 4 go */
    gr_store_retention_run(f->store, NOW_WALL_MS);
    assert_int_equal(gr_log_start_offset(f->log), 4);
    assert_int_equal(gr_log_segment_count(f->log), 6);
    gr_store_retention_run(f->store, NOW_WALL_MS); /* nothing more while 3 stays there */
    assert_int_equal(gr_log_start_offset(f->log), 4);
    /* 3 catches up to 7: segments 4..6 go */
    fetch(f, 3, 7, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 7);
    gr_store_retention_run(f->store, NOW_WALL_MS);
    assert_int_equal(gr_log_start_offset(f->log), 7);
    assert_int_equal(gr_log_segment_count(f->log), 3);
}

static void test_retention_after_restart_keeps_above_restored_hw(void **state)
{
    struct fx *f = *state;
    lead(f, 1);
    for (int i = 0; i < 10; i++)
        append_one(f, "k");
    fetch(f, 2, 10, 0);
    fetch(f, 3, 4, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 4);
    /* restart: the high watermark 4 comes back from replication-offset-checkpoint, the durable offset is 10;
       before the partition layer tells storage anything, retention stops at 4 */
    gr_partitions_destroy(f->ps);
    f->ps = NULL;
    gr_store_close(f->store);
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    f->t = gr_store_topic_find(f->store, "h", 1);
    assert_non_null(f->t);
    f->log = gr_topic_log(f->t, 0);
    assert_int_equal(gr_log_high_watermark(f->log), 4);
    assert_int_equal(gr_log_durable_offset(f->log), 10);
    gr_store_retention_run(f->store, NOW_WALL_MS);
    assert_int_equal(gr_log_start_offset(f->log), 4);
    struct gr_partitions_config pc = {f->store, false};
    assert_non_null(f->ps = gr_partitions_create(&pc)); /* for teardown */
}

/* The records of the log from its start: their count, the first one's offset into *first. */
static int records(struct fx *f, int64_t *first)
{
    struct th_seen *seen = NULL;
    int n = th_read_all(f->log, gr_log_start_offset(f->log), gr_log_end_offset(f->log), &seen);
    assert_true(n >= 1);
    int count = 0;
    *first = -1;
    for (int i = 0; i < n; i++) {
        if (seen[i].record_count > 0 && *first < 0) *first = seen[i].base_offset;
        count += seen[i].record_count;
    }
    free(seen);
    return count;
}

static void test_cleaner_stops_at_hw(void **state)
{
    struct fx *f = *state;
    lead(f, 1);
    for (int i = 0; i < 10; i++)
        append_one(f, "k"); /* one key: each record replaces the one before */
    fetch(f, 2, 10, 0);
    fetch(f, 3, 4, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 4);
    struct gr_clean_stats st;
    assert_int_equal(gr_log_clean_now(f->log, NOW_WALL_MS, &st), 0);
    assert_int_equal(st.first_dirty_offset, 0);
    assert_int_equal(st.end_offset, 4); /* min(high watermark 4, active segment base 9) */
    int64_t first;
    assert_int_equal(records(f, &first), 7); /* 3 (the key's latest below 4) and 4..9 untouched */
    assert_int_equal(first, 3);
    /* 3 catches up: the cleaner goes up to the active segment's base */
    fetch(f, 3, 10, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    assert_int_equal(gr_log_clean_now(f->log, NOW_WALL_MS, &st), 0);
    assert_int_equal(st.first_dirty_offset, 4);
    assert_int_equal(st.end_offset, 9);
    assert_int_equal(records(f, &first), 2); /* 8 (the latest below 9) and the active segment's 9 */
    assert_int_equal(first, 8);
}

static void test_low_watermark_wait(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 10; i++)
        append_one(f, "k");
    /* one node: the low watermark is the log start offset, so the wait is done at once */
    struct counted w;
    counted_init(&w);
    gr_partition_wait_low_watermark(f->part, &w.w, 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    lead(f, 1);
    fetch(f, 2, 10, 0);
    fetch(f, 3, 10, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    assert_int_equal(gr_log_delete_records(f->log, 6), 0); /* DeleteRecords on the leader's log */
    assert_int_equal(gr_partition_low_watermark(f->part), 0);
    counted_init(&w);
    gr_partition_wait_low_watermark(f->part, &w.w, 6);
    assert_int_equal(w.calls, 0);
    fetch(f, 2, 10, 6); /* 2 took the leader's log start offset; 3 has not */
    assert_int_equal(gr_partition_low_watermark(f->part), 0);
    assert_int_equal(w.calls, 0);
    fetch(f, 3, 10, 6);
    assert_int_equal(w.calls, 1); /* woken inside 3's fetch */
    assert_int_equal(w.err, 0);
    assert_int_equal(gr_partition_low_watermark(f->part), 6);
    /* a follower that goes away stops counting at the next shrink tick */
    assert_int_equal(gr_log_delete_records(f->log, 8), 0);
    counted_init(&w);
    gr_partition_wait_low_watermark(f->part, &w.w, 8);
    fetch(f, 2, 10, 8);
    assert_int_equal(w.calls, 0);
    f->epoch[3] = -1;
    assert_true(gr_partition_maybe_shrink_isr(f->part, f->now) >= 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    assert_int_equal(gr_partition_low_watermark(f->part), 8);
    /* a leader that becomes follower ends the wait with -EXDEV */
    f->epoch[3] = 103;
    counted_init(&w);
    gr_partition_wait_low_watermark(f->part, &w.w, 9);
    assert_int_equal(w.calls, 0);
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 2, 2, replicas, 3, replicas, 3, 1, f->now};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, -EXDEV);
}

static void cold_done(struct gr_cold *c)
{
    (void)c;
}

/* ListOffsets at `ts` with no epoch given: the error code, the answer in *out. */
static int list_offset(struct fx *f, int64_t ts, struct gr_offset_answer *out)
{
    struct gr_cold c;
    gr_cold_init(&c, f->ps, NULL, cold_done, NULL); /* no pool: lookups read the blocking way */
    int err = gr_partition_list_offset(f->part, &c, 9, -1, ts, out);
    gr_cold_release(&c);
    return err;
}

static void test_list_offsets_new_leader(void **state)
{
    struct fx *f = *state;
    struct gr_offset_answer a;
    lead(f, 1);
    for (int i = 0; i < 5; i++)
        append_one(f, "k");                                    /* offset i at timestamp 1000 + i */
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* no follower fetched */
    assert_int_equal(gr_partition_leader_epoch_start_offset(f->part), 0);
    assert_int_equal(list_offset(f, -1, &a), GR_ERR_NONE); /* epoch 1 started at 0: not lagging */
    assert_int_equal(a.offset, 0);
    /* re-elected at epoch 2 with its high watermark still 0: the epoch starts at 5 */
    lead(f, 2);
    assert_int_equal(gr_partition_leader_epoch_start_offset(f->part), 5);
    assert_int_equal(list_offset(f, -1, &a), GR_ERR_OFFSET_NOT_AVAILABLE);
    assert_int_equal(a.offset, -1);
    assert_int_equal(list_offset(f, -2, &a), GR_ERR_NONE); /* earliest as always */
    assert_int_equal(a.offset, 0);
    assert_int_equal(list_offset(f, -4, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 0);
    assert_int_equal(list_offset(f, 1000, &a), GR_ERR_OFFSET_NOT_AVAILABLE); /* found at 0 >= HW 0 */
    /* the followers reach 3: a record found below the high watermark is answered, one past it is not */
    fetch(f, 2, 3, 0);
    fetch(f, 3, 3, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 3);
    assert_int_equal(list_offset(f, 1001, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 1);
    assert_int_equal(a.timestamp, 1001);
    assert_int_equal(list_offset(f, 1004, &a), GR_ERR_OFFSET_NOT_AVAILABLE);
    assert_int_equal(list_offset(f, 5000, &a), GR_ERR_OFFSET_NOT_AVAILABLE); /* none found */
    assert_int_equal(list_offset(f, -3, &a), GR_ERR_OFFSET_NOT_AVAILABLE);   /* max timestamp at 4 */
    assert_int_equal(list_offset(f, -1, &a), GR_ERR_OFFSET_NOT_AVAILABLE);
    /* the high watermark passes the epoch start: answered */
    fetch(f, 2, 5, 0);
    fetch(f, 3, 5, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    assert_int_equal(list_offset(f, -1, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 5);
    assert_int_equal(a.leader_epoch, 2);
    assert_int_equal(list_offset(f, -3, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 4);
    assert_int_equal(list_offset(f, 5000, &a), GR_ERR_NONE); /* none: -1, no error */
    assert_int_equal(a.offset, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_retention_keeps_segments_above_hw, setup_delete, teardown),
        cmocka_unit_test_setup_teardown(test_retention_after_restart_keeps_above_restored_hw, setup_delete,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_stops_at_hw, setup_compact, teardown),
        cmocka_unit_test_setup_teardown(test_low_watermark_wait, setup_delete, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_new_leader, setup_delete, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
