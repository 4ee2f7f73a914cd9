/*
 * test_fetch_follower.c: a leader answers its followers' fetches (partition/read.c gr_partition_fetch with a
 * replica id, partition.c's follower-fetch wait), on a real log in a temporary directory. This broker (id 1)
 * leads replicas {1,2,3} (gr_partition_set_role); the test plays the owner (registrations, the clock) and the
 * fetchers (struct gr_fetch_read as server/handlers/fetch.c fills it).
 *
 * Covers: a follower reads up to the log end offset while a consumer stops at the high watermark, both told
 * the leader's high watermark; the followers' fetch offsets move the high watermark (min over the ISR) and
 * wake committed waiters; a re-read (update_fetch_state false) records nothing; the errors Kafka gives: a
 * fetch from a broker that is not a replica (UNKNOWN_LEADER_EPOCH with a leader epoch, else
 * NOT_LEADER_OR_FOLLOWER: Partition.followerReplicaOrThrow), a stale broker epoch (NOT_LEADER_OR_FOLLOWER,
 * no records, no budget charged, nothing recorded), a fetch offset past the log end offset, a partition that
 * is a follower here or never got a role; a parked follower fetch wakes on an append that does not move the
 * high watermark (and with gregor.acks.all.fsync before the flush), waits again past the new log end offset,
 * and ends with -EXDEV when the leader becomes follower.
 * Read next: partition/read.c, partition/partition.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "partition/partition.h"
#include "partition/tests/counted.h"
#include "protocol/errors.h"
#include "storage/tests/helpers.h"

#define BROKERS 4 /* broker ids 1..3 */

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    struct gr_cold cold;
    int64_t epoch[BROKERS]; /* registered broker epochs */
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

static void cold_done(struct gr_cold *c)
{
    (void)c;
    fail_msg("no pool: no cold-read round");
}

static int setup_mode(void **state, bool durable)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "ff", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    struct gr_partitions_config pc = {f->store, durable};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    for (int i = 1; i < BROKERS; i++)
        f->epoch[i] = 100 + i;
    f->now = 5000000;
    struct gr_partition_repl_config rc = {30000, hook_broker_epoch, NULL, hook_now, f, false};
    gr_partitions_set_replication(f->ps, &rc);
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    gr_cold_init(&f->cold, f->ps, NULL, cold_done, f); /* no pool: lookups read the blocking way */
    *state = f;
    return 0;
}

static int setup_end(void **state)
{
    return setup_mode(state, false);
}

static int setup_durable(void **state)
{
    return setup_mode(state, true);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_cold_release(&f->cold);
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Appends one batch of `count` records through the partition (the produce path). Returns its length. */
static size_t append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000, 7, &len);
    struct gr_append_result res;
    assert_int_equal(gr_partition_append(f->part, b, len, -1, &res), 0);
    free(b);
    return len;
}

/* Makes this broker (id 1) the leader of replicas {1,2,3}, all in the ISR, min.insync.replicas 2. */
static void lead(struct fx *f)
{
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_LEADER, 1, 1, 1, replicas, 3, replicas, 3, 2, f->now};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
}

/* One partition of a Fetch from `replica_id` (-1: a consumer) at `offset` with the registered broker epoch,
   recording the follower's state (a first read). Fills *rd; returns gr_partition_fetch's code. The caller
   releases rd->slice. */
static struct gr_fetch_read make_rd(struct fx *f, int32_t replica_id, int64_t offset)
{
    bool known = replica_id >= 1 && replica_id < BROKERS;
    return (struct gr_fetch_read){.fetch_offset = offset,
                                  .current_leader_epoch = 1,
                                  .partition_max_bytes = 1 << 20,
                                  .version = 15,
                                  .last_fetched_epoch = -1,
                                  .replica_id = replica_id,
                                  .replica_epoch = known ? f->epoch[replica_id] : 7,
                                  .replica_log_start_offset = 0,
                                  .update_fetch_state = true};
}

static int fetch_at(struct fx *f, int32_t replica_id, int64_t offset, struct gr_fetch_read *rd)
{
    *rd = make_rd(f, replica_id, offset);
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
    return gr_partition_fetch(f->part, &f->cold, &bud, rd);
}

/* The bytes one read of `replica_id` at `offset` returns (error NONE asserted). */
static int64_t read_bytes(struct fx *f, int32_t replica_id, int64_t offset)
{
    struct gr_fetch_read rd;
    assert_int_equal(fetch_at(f, replica_id, offset, &rd), GR_ERR_NONE);
    int64_t bytes = rd.slice.bytes;
    if (bytes > 0) assert_int_equal(rd.slice.first_batch_offset, offset);
    gr_log_slice_release(&rd.slice);
    return bytes;
}

static void test_follower_reads_to_log_end(void **state)
{
    struct fx *f = *state;
    lead(f);
    size_t len1 = append(f, 5), len2 = append(f, 5); /* offsets 0-4 and 5-9 */
    assert_int_equal(gr_log_end_offset(f->log), 10);
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* the followers have not fetched */
    /* a consumer stops at the high watermark, a follower reads both batches, up to the log end offset */
    assert_int_equal(read_bytes(f, -1, 0), 0);
    struct gr_fetch_read rd;
    assert_int_equal(fetch_at(f, 2, 0, &rd), GR_ERR_NONE);
    assert_int_equal(rd.slice.bytes, (int64_t)(len1 + len2));
    assert_int_equal(rd.high_watermark, 0); /* the leader's high watermark, not its log end offset */
    assert_int_equal(rd.log_start_offset, 0);
    gr_log_slice_release(&rd.slice);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 0); /* its fetch offset recorded */
    assert_int_equal(gr_partition_replica(f->part, 2)->broker_epoch, 102);
    /* follower 2 at 10, follower 3 at 5: the high watermark is the ISR's smallest, 5 */
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 10);
    f->now += 10;
    assert_int_equal(read_bytes(f, 2, 10), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* 3's offset still unknown */
    assert_int_equal(fetch_at(f, 3, 5, &rd), GR_ERR_NONE);
    assert_int_equal(rd.slice.bytes, (int64_t)len2);
    assert_int_equal(rd.high_watermark, 0); /* read before its state moved the high watermark (Kafka) */
    gr_log_slice_release(&rd.slice);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    assert_int_equal(gr_partition_replica(f->part, 3)->last_fetch_time_ms, f->now);
    assert_int_equal(w.calls, 0);
    /* the consumer now reads the first batch only */
    assert_int_equal(read_bytes(f, -1, 0), (int64_t)len1);
    /* 3 at 10: the high watermark reaches the log end offset, the committed waiter is done */
    assert_int_equal(read_bytes(f, 3, 10), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    assert_int_equal(read_bytes(f, -1, 5), (int64_t)len2);
}

static void test_reread_records_nothing(void **state)
{
    struct fx *f = *state;
    lead(f);
    size_t len = append(f, 4);
    struct gr_fetch_read rd = {.fetch_offset = 0,
                               .current_leader_epoch = -1,
                               .partition_max_bytes = 1 << 20,
                               .version = 15,
                               .last_fetched_epoch = -1,
                               .replica_id = 2,
                               .replica_epoch = 102,
                               .replica_log_start_offset = 0,
                               .update_fetch_state = false};
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
    assert_int_equal(gr_partition_fetch(f->part, &f->cold, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.slice.bytes, (int64_t)len);
    gr_log_slice_release(&rd.slice);
    const struct gr_replica_state *rs = gr_partition_replica(f->part, 2);
    assert_false(rs->fetched);
    assert_int_equal(rs->log_end_offset, -1);
}

/* A follower read expecting `err`: no records, nothing charged. */
static void expect_refused(struct fx *f, struct gr_fetch_read *rd, int err)
{
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, 1000, 1 << 20);
    assert_int_equal(gr_partition_fetch(f->part, &f->cold, &bud, rd), err);
    assert_int_equal(rd->slice.bytes, 0);
    assert_int_equal(rd->slice.fd, -1);
    assert_int_equal(bud.left, 1000);
    assert_false(bud.have_data);
}

static void test_follower_fetch_errors(void **state)
{
    struct fx *f = *state;
    struct gr_fetch_read rd;
    append(f, 3);
    /* no role set (one replica, as single-node mode): no follower of it exists */
    rd = make_rd(f, 2, 0);
    rd.current_leader_epoch = gr_partition_leader_epoch(f->part);
    expect_refused(f, &rd, GR_ERR_UNKNOWN_LEADER_EPOCH);
    rd.current_leader_epoch = -1;
    expect_refused(f, &rd, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    lead(f);
    /* broker 5 is not a replica: UNKNOWN_LEADER_EPOCH with a leader epoch, else NOT_LEADER_OR_FOLLOWER */
    rd = make_rd(f, 5, 0);
    expect_refused(f, &rd, GR_ERR_UNKNOWN_LEADER_EPOCH);
    rd.current_leader_epoch = -1;
    expect_refused(f, &rd, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    rd = make_rd(f, 1, 0); /* the leader itself is not one of its followers */
    expect_refused(f, &rd, GR_ERR_UNKNOWN_LEADER_EPOCH);
    /* a stale broker epoch (sent before broker 2's restart): NOT_LEADER_OR_FOLLOWER, nothing recorded (the
       ISR members fetch at the high watermark 3 the log had, or above: below it would break its invariant) */
    fetch_at(f, 2, 3, &rd);
    gr_log_slice_release(&rd.slice);
    rd.replica_epoch = 101;
    rd.fetch_offset = 2;
    expect_refused(f, &rd, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 3);
    assert_int_equal(gr_partition_replica(f->part, 2)->broker_epoch, 102);
    /* past the log end offset */
    rd = make_rd(f, 2, 4);
    expect_refused(f, &rd, GR_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 3);
    /* an older leader epoch is fenced before anything else */
    fetch_at(f, 2, 3, &rd);
    gr_log_slice_release(&rd.slice);
    rd.current_leader_epoch = 0;
    expect_refused(f, &rd, GR_ERR_FENCED_LEADER_EPOCH);
    /* a follower here serves no follower */
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 2, 2, replicas, 3, replicas, 3, 2, f->now};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    rd = make_rd(f, 3, 0);
    rd.current_leader_epoch = 2;
    expect_refused(f, &rd, GR_ERR_NOT_LEADER_OR_FOLLOWER);
}

static void test_follower_wait_wakes_on_append(void **state)
{
    struct fx *f = *state;
    lead(f);
    append(f, 2);
    assert_int_equal(gr_partition_fetch_bound(f->part, GR_FETCH_LOG_END), 2);
    assert_int_equal(gr_partition_fetch_bound(f->part, GR_FETCH_HIGH_WATERMARK), 0);
    struct counted fw, cw;
    counted_init(&fw);
    counted_init(&cw);
    gr_partition_wait_fetchable(f->part, &fw.w, GR_FETCH_LOG_END, 2);
    gr_partition_wait_fetchable(f->part, &cw.w, GR_FETCH_HIGH_WATERMARK, 0);
    assert_int_equal(gr_partition_waiter_count(f->part), 2);
    /* the append moves the log end offset, not the high watermark (no follower fetched) */
    append(f, 1);
    assert_int_equal(fw.calls, 1);
    assert_int_equal(fw.err, 0);
    assert_int_equal(cw.calls, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 0);
    /* the long poll's next round: past the new log end offset (3), same isolation */
    gr_partition_wait_data_again(f->part, &fw.w);
    assert_true(gr_partition_waiting(&fw.w));
    assert_int_equal(read_bytes(f, 2, 3), 0); /* a follower's fetch at the end: no wake */
    assert_int_equal(fw.calls, 1);
    append(f, 1);
    assert_int_equal(fw.calls, 2);
    /* becoming follower ends a parked follower fetch; a new one on a follower is done at once */
    gr_partition_wait_data_again(f->part, &fw.w);
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 2, 2, replicas, 3, replicas, 3, 2, f->now};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(fw.calls, 3);
    assert_int_equal(fw.err, -EXDEV);
    assert_int_equal(cw.calls, 0); /* a consumer's wait goes on */
    gr_partition_wait_fetchable(f->part, &fw.w, GR_FETCH_LOG_END, 100);
    assert_int_equal(fw.calls, 4);
    assert_int_equal(fw.err, -EXDEV);
    gr_partition_wait_cancel(&cw.w);
}

static void test_follower_wait_before_flush(void **state)
{
    struct fx *f = *state; /* gregor.acks.all.fsync: the visible offset follows the flush */
    lead(f);
    struct counted fw, cw;
    counted_init(&fw);
    counted_init(&cw);
    gr_partition_wait_fetchable(f->part, &fw.w, GR_FETCH_LOG_END, 0);
    gr_partition_wait_data(f->part, &cw.w, 0);
    size_t len = append(f, 3);
    assert_int_equal(fw.calls, 1); /* woken by the append itself, before any flush */
    assert_int_equal(fw.err, 0);
    assert_int_equal(cw.calls, 0);
    assert_int_equal(read_bytes(f, 2, 0), (int64_t)len); /* unflushed data is readable by followers */
    assert_int_equal(read_bytes(f, -1, 0), 0);
    gr_partition_wait_cancel(&cw.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_follower_reads_to_log_end, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_reread_records_nothing, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_follower_fetch_errors, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_follower_wait_wakes_on_append, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_follower_wait_before_flush, setup_durable, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
