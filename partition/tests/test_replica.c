/*
 * test_replica.c: the leader side of a replicated partition (partition/replica.c) on a real log in a
 * temporary directory, with hand-built states: the test plays the owning thread, the owner's hooks (a table
 * of broker registrations, a recorder of proposed ISR changes, a clock it moves by hand) and the followers
 * (their fetches as gr_partition_update_follower_fetch_state calls).
 *
 * Covers: the pure high watermark rule (min ISR, maximal ISR, caught-up eligible followers, never back);
 * with replication factor 3: min ISR 2 holds the high watermark while the ISR is {leader}; a member being
 * added counts; a member being removed counts until its change is committed; the fsync mode counts the
 * leader's durable offset; lastCaughtUpTime's two branches; ISR eligibility (stale broker epoch, shutting
 * down, restarted, not registered); expansion below the high watermark and below the epoch's start offset;
 * shrinking after replica.lag.time.max.ms; a caught-up follower outside the ISR holds the high watermark
 * until its lag passes; one change in flight; a failed change reverts; set_role with stale epochs, a
 * re-elected leader keeping its followers' offsets and a newer state dropping the change in flight; committed
 * waiters done when followers move the high watermark, ended with -EXDEV on becoming follower; the
 * NOT_ENOUGH_REPLICAS and _AFTER_APPEND decisions; the low watermark; one replica as today; the high
 * watermark invariant check (an ISR member or a member being added below the high watermark: one ERROR line,
 * one count; the other tests run with its assert on, so their paths never trip it).
 * Read next: partition/replica.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/tests/capture.h"
#include "partition/partition.h"
#include "partition/tests/counted.h"
#include "protocol/errors.h"
#include "storage/tests/helpers.h"

#define LAG_MS 30000
#define BROKERS 4 /* broker ids 1..3 */

/* The owner's side: registrations, proposals, the clock. */
struct owner {
    int64_t epoch[BROKERS]; /* registered broker epoch, -1: not registered */
    bool shutting[BROKERS];
    int proposals;
    struct {
        int32_t isr[8];
        int64_t epochs[8];
        int count;
        int32_t leader_epoch, partition_epoch;
        bool expand;
    } last;
    int64_t now;
};

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    struct owner own;
};

static int64_t hook_broker_epoch(void *ctx, int32_t broker_id, bool *shutting_down)
{
    struct owner *o = ctx;
    if (broker_id < 1 || broker_id >= BROKERS) return -1;
    *shutting_down = o->shutting[broker_id];
    return o->epoch[broker_id];
}

static void hook_propose(void *ctx, struct gr_partition *part, const struct gr_partition_isr_change *c)
{
    struct owner *o = ctx;
    (void)part;
    o->proposals++;
    assert_true(c->isr_count <= 8);
    memcpy(o->last.isr, c->isr, sizeof(int32_t) * (size_t)c->isr_count);
    memcpy(o->last.epochs, c->broker_epochs, sizeof(int64_t) * (size_t)c->isr_count);
    o->last.count = c->isr_count;
    o->last.leader_epoch = c->leader_epoch;
    o->last.partition_epoch = c->partition_epoch;
    o->last.expand = c->expand;
}

static int64_t hook_now(void *ctx)
{
    return ((struct owner *)ctx)->now;
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
    assert_int_equal(gr_store_topic_create(f->store, "r", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    struct gr_partitions_config pc = {f->store, durable};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    for (int i = 1; i < BROKERS; i++)
        f->own.epoch[i] = 100 + i;
    f->own.now = 1000000;
    struct gr_partition_repl_config rc = {LAG_MS, hook_broker_epoch, hook_propose, hook_now, &f->own, false};
    gr_partitions_set_replication(f->ps, &rc);
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
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
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Appends `count` records to the log and tells the partition (the produce path). Returns the log end. */
static int64_t append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000, 7, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    gr_partition_appended(f->part);
    return res.last_offset + 1;
}

/* Makes this broker (id 1) the leader of replicas {1,2,3} with `isr` (n members). */
static int lead(struct fx *f, const int32_t *isr, int n, int32_t leader_epoch, int32_t partition_epoch,
                int min_isr)
{
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {
        GR_PARTITION_LEADER, 1, leader_epoch, partition_epoch, replicas, 3, isr, n, min_isr, f->own.now};
    return gr_partition_set_role(f->part, &c);
}

/* A fetch of follower `id` at `offset` carrying its registered broker epoch, at the owner's clock. */
static int fetch(struct fx *f, int32_t id, int64_t offset)
{
    struct gr_follower_fetch ff = {id, f->own.epoch[id], offset, 0, f->own.now};
    return gr_partition_update_follower_fetch_state(f->part, &ff);
}

/* The same without a broker epoch (ReplicaState.ReplicaEpoch -1: not given): never taken for a late request.
 */
static int fetch_no_epoch(struct fx *f, int32_t id, int64_t offset)
{
    struct gr_follower_fetch ff = {id, -1, offset, 0, f->own.now};
    return gr_partition_update_follower_fetch_state(f->part, &ff);
}

static const int32_t ISR_ALL[] = {1, 2, 3};
static const int32_t ISR_12[] = {1, 2};
static const int32_t ISR_1[] = {1};

static void test_hw_of_pure(void **state)
{
    (void)state;
    struct gr_replica_state fs[2] = {
        {.broker_id = 2, .log_end_offset = 7, .in_isr = true},
        {.broker_id = 3, .log_end_offset = 5, .in_isr = true},
    };
    /* ISR {1,2,3}: the smallest log end offset */
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 0, fs, 2, 3, 2, 0, LAG_MS), 5);
    /* the leader's share (durable offset 4) below the followers */
    assert_int_equal(gr_partition_high_watermark_of(4, 10, 0, fs, 2, 3, 2, 0, LAG_MS), 4);
    /* never goes back */
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 6, fs, 2, 3, 2, 0, LAG_MS), 6);
    /* committed ISR below the effective min ISR: unchanged */
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 2, fs, 2, 1, 2, 0, LAG_MS), 2);
    /* outside the maximal ISR, not caught up: does not count */
    fs[1].in_isr = false;
    fs[1].isr_eligible = true;
    fs[1].last_caught_up_time_ms = 0;
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 0, fs, 2, 2, 2, LAG_MS + 1, LAG_MS), 7);
    /* caught up within the lag and eligible: holds it back; not eligible: does not */
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 0, fs, 2, 2, 2, LAG_MS, LAG_MS), 5);
    fs[1].isr_eligible = false;
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 0, fs, 2, 2, 2, LAG_MS, LAG_MS), 7);
    /* a member of the maximal ISR whose offset is unknown holds it where it is */
    fs[0].log_end_offset = -1;
    assert_int_equal(gr_partition_high_watermark_of(10, 10, 3, fs, 2, 2, 2, 0, LAG_MS), 3);
}

static void test_min_isr_blocks_hw(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_1, 1, 1, 1, 2), 0);
    assert_int_equal(gr_partition_effective_min_isr(f->part), 2);
    int64_t end = append(f, 10);
    assert_int_equal(end, 10);
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* ISR {1} < min ISR 2 */
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 10);
    assert_int_equal(w.calls, 0);
    /* follower 2 catches up: expansion proposed, HW still held by the committed ISR's size */
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(f->own.proposals, 1);
    assert_true(f->own.last.expand);
    assert_int_equal(f->own.last.count, 2);
    assert_int_equal(f->own.last.isr[1], 2);
    assert_int_equal(f->own.last.epochs[1], 102);
    assert_int_equal(f->own.last.partition_epoch, 1);
    assert_int_equal(gr_partition_visible_offset(f->part), 0);
    assert_int_equal(w.calls, 0);
    /* committed at partition epoch 2: ISR {1,2} reaches min ISR, the HW moves, the waiter is done */
    assert_int_equal(gr_partition_isr_committed(f->part, 1, 2, ISR_12, 2), 0);
    assert_int_equal(gr_partition_partition_epoch(f->part), 2);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    assert_int_equal(gr_log_high_watermark(f->log), 10); /* storage was told */
}

static void test_followers_move_hw_and_wake_committed(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 2), 0);
    append(f, 10);
    assert_int_equal(gr_partition_visible_offset(f->part), 0);
    struct counted w, d;
    counted_init(&w);
    counted_init(&d);
    gr_partition_wait_committed(f->part, &w.w, 10);
    gr_partition_wait_data(f->part, &d.w, 5);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(w.calls, 0); /* 3 has not fetched: its offset is unknown */
    assert_int_equal(fetch(f, 3, 6), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 6);
    assert_int_equal(d.calls, 1); /* data past 5 is visible */
    assert_int_equal(w.calls, 0);
    assert_int_equal(fetch(f, 3, 10), 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    assert_int_equal(gr_partition_check_enough_replicas(f->part), GR_ERR_NONE);
    assert_int_equal(f->own.proposals, 0); /* everyone was in the ISR */
    assert_int_equal(gr_partitions_hw_violations(f->ps), 0);
}

/* The high watermark invariant (issue #20): an ISR member reporting a fetch offset below the high watermark
   is one ERROR line and one count (the high watermark does not go back); so is a member being added that
   does; members outside the maximal ISR, unknown offsets and the normal paths count nothing. */
static void test_hw_invariant_violation(void **state)
{
    struct fx *f = *state;
    struct gr_partition_repl_config rc = {LAG_MS, hook_broker_epoch, hook_propose, hook_now, &f->own, true};
    gr_partitions_set_replication(f->ps, &rc); /* log and count, no assert */
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    append(f, 5);
    assert_int_equal(fetch(f, 3, 4), 0); /* outside the ISR, below the high watermark 10: not a member */
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 15);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 0);
    capture();
    assert_int_equal(fetch_no_epoch(f, 2, 12), 0); /* an ISR member back at 12 < 15 (no epoch: stored) */
    char *text = captured();
    assert_int_equal(gr_partitions_hw_violations(f->ps), 1);
    assert_non_null(
        strstr(text, " level=error component=partition msg=\"high watermark invariant violated: r-0 hw 15 > "
                     "replica 2 log end offset 12"));
    free(text);
    assert_int_equal(gr_partition_visible_offset(f->part), 15); /* never back */
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 1);
    /* 3 catches up: its expansion is in flight, it is in the maximal ISR; a fetch below the HW counts */
    assert_int_equal(fetch(f, 3, 15), 0);
    assert_int_equal(f->own.proposals, 1);
    capture();
    assert_int_equal(fetch_no_epoch(f, 3, 14), 0);
    text = captured();
    assert_int_equal(gr_partitions_hw_violations(f->ps), 2);
    assert_non_null(strstr(text, "hw 15 > replica 3 log end offset 14"));
    free(text);
}

/* A fetch under the broker epoch and leader epoch of the follower's last stored fetch, below that fetch's
   offset, is a request delivered late (a TCP retransmission after a healed network cut, issue #24): answered
   (0), nothing stored, no violation, the high watermark where it was. Under a new leader epoch of the same
   leader, or a new registration, the lower offset is stored (and, for an ISR member below the high watermark,
   counted as the violation it then is). */
static void test_late_fetch_not_stored(void **state)
{
    struct fx *f = *state;
    struct gr_partition_repl_config rc = {LAG_MS, hook_broker_epoch, hook_propose, hook_now, &f->own, true};
    gr_partitions_set_replication(f->ps, &rc); /* log and count, no assert */
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    append(f, 5);
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 15);
    capture();
    assert_int_equal(fetch(f, 2, 4), 0); /* the Fetch sent at offset 4, delivered now */
    char *text = captured();
    assert_non_null(strstr(text,
                           "r-0: a Fetch of broker 2 at offset 4 delivered late (its last stored fetch was "
                           "at 15 in leader epoch 1): not stored"));
    free(text);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 15);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 0);
    assert_int_equal(fetch(f, 3, 12), 0); /* outside the ISR, the same rule */
    assert_int_equal(fetch(f, 3, 4), 0);
    assert_int_equal(gr_partition_replica(f->part, 3)->log_end_offset, 12);
    append(f, 5); /* log end 20 */
    assert_int_equal(fetch(f, 2, 20), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 20);
    assert_int_equal(fetch(f, 2, 17), 0);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 20);
    assert_int_equal(gr_partition_visible_offset(f->part), 20);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 0);
    assert_int_equal(fetch(f, 2, 20), 0); /* the same offset again is stored as usual */
    assert_int_equal(gr_partition_replica(f->part, 2)->fetch_leader_epoch, 1);
    /* the same leader at leader epoch 2: the states are kept (Replica.resetReplicaState), a lower offset is
       stored: the rule holds within one leader epoch only */
    assert_int_equal(lead(f, ISR_12, 2, 2, 2, 1), 0);
    capture();
    assert_int_equal(fetch(f, 2, 18), 0);
    free(captured());
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 18);
    assert_int_equal(gr_partition_replica(f->part, 2)->fetch_leader_epoch, 2);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 1);
    assert_int_equal(fetch(f, 2, 20), 0);
    f->own.epoch[2]++; /* 2 registered again (a restart that lost records), still in the ISR */
    capture();
    assert_int_equal(fetch(f, 2, 12), 0);
    free(captured());
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 12);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 2);
}

/* A violation against a follower's log end offset is input from another process (a Fetch naming a replica
   id with any offset): logged and counted, never an abort, also with hw_violation_no_abort off (this
   fixture's setting). */
static void test_follower_violation_never_aborts(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    capture();
    assert_int_equal(fetch_no_epoch(f, 2, 3), 0);
    char *text = captured();
    assert_non_null(
        strstr(text, "high watermark invariant violated: r-0 hw 10 > replica 2 log end offset 3"));
    free(text);
    assert_int_equal(gr_partitions_hw_violations(f->ps), 1);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
}

static void test_pending_add_counts_and_failure_reverts(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10); /* 3 is neither in the ISR nor caught up */
    append(f, 5);
    assert_int_equal(fetch(f, 3, 10), 0); /* >= HW 10 and >= the epoch's start 0: expansion proposed */
    assert_int_equal(f->own.proposals, 1);
    assert_true(gr_partition_isr_inflight(f->part));
    assert_int_equal(gr_partition_maximal_isr_count(f->part), 3);
    int32_t isr[4];
    assert_int_equal(gr_partition_isr(f->part, isr, 4), 2); /* committed ISR unchanged */
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10); /* the member being added holds it */
    /* the change failed: back to ISR {1,2}; 3 no longer counts and the HW moves */
    assert_int_equal(gr_partition_isr_failed(f->part, 7), -ESTALE); /* not the change in flight */
    assert_int_equal(gr_partition_isr_failed(f->part, 1), 0);
    assert_false(gr_partition_isr_inflight(f->part));
    assert_int_equal(gr_partition_maximal_isr_count(f->part), 2);
    assert_int_equal(gr_partition_visible_offset(f->part), 15);
    assert_int_equal(gr_partition_isr_failed(f->part, 1), -ESTALE); /* nothing in flight any more */
    assert_int_equal(gr_partition_isr_committed(f->part, 1, 2, ISR_ALL, 3), -ESTALE);
}

static void test_pending_remove_counts_until_committed(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(fetch(f, 3, 10), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    append(f, 5);
    f->own.now += LAG_MS + 1;
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10); /* 3 still in the ISR */
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, f->own.now), 1);
    assert_false(f->own.last.expand);
    assert_int_equal(f->own.last.count, 2);
    assert_int_equal(f->own.last.isr[0], 1);
    assert_int_equal(f->own.last.isr[1], 2);
    assert_int_equal(f->own.last.epochs[0], -1); /* the leader's own */
    assert_int_equal(f->own.last.epochs[1], 102);
    assert_int_equal(gr_partition_maximal_isr_count(f->part), 3);
    assert_int_equal(gr_partition_visible_offset(f->part), 10); /* being removed: still counts */
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 15);
    assert_int_equal(gr_partition_isr_committed(f->part, 2, 2, ISR_12, 2), -ESTALE); /* other leader epoch */
    assert_true(gr_partition_isr_inflight(f->part));
    assert_int_equal(gr_partition_isr_committed(f->part, 1, 2, ISR_12, 2), 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(gr_partition_visible_offset(f->part), 15);
    assert_int_equal(gr_partition_maximal_isr_count(f->part), 2);
}

static void test_fsync_mode_uses_durable_offset(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 2), 0);
    int64_t end = append(f, 5); /* asks for a flush */
    assert_int_equal(th_wait_durable(f->log, end), 0);
    gr_partition_flushed(f->part);
    assert_int_equal(fetch(f, 2, 5), 0);
    assert_int_equal(fetch(f, 3, 5), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    /* three more records, not flushed (nothing asks: flush.messages and flush.ms are Kafka's "never") */
    size_t len;
    uint8_t *b = th_simple(3, 1000, 8, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    assert_int_equal(gr_log_durable_offset(f->log), 5);
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 8);
    assert_int_equal(fetch(f, 2, 8), 0);
    assert_int_equal(fetch(f, 3, 8), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 5); /* the leader's share is its durable offset */
    assert_int_equal(w.calls, 0);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 8), 0);
    gr_partition_flushed(f->part);
    assert_int_equal(w.calls, 1);
    assert_int_equal(gr_partition_visible_offset(f->part), 8);
}

static void test_last_caught_up_time(void **state)
{
    struct fx *f = *state;
    f->own.now = 500;
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 1), 0);
    const struct gr_replica_state *r2 = gr_partition_replica(f->part, 2);
    assert_non_null(r2);
    assert_int_equal(r2->last_caught_up_time_ms, 500); /* an ISR member at makeLeader: now */
    assert_int_equal(r2->log_end_offset, -1);
    assert_null(gr_partition_replica(f->part, 1)); /* the leader is no follower */
    append(f, 10);
    f->own.now = 1000;
    assert_int_equal(fetch(f, 2, 0), 0); /* behind; the previous fetch's time is 0 */
    assert_int_equal(gr_partition_replica(f->part, 2)->last_caught_up_time_ms, 500);
    append(f, 5);
    f->own.now = 2000;
    /* 10 < the leader's 15 now, but >= its 10 at the previous fetch: the previous fetch's time */
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(gr_partition_replica(f->part, 2)->last_caught_up_time_ms, 1000);
    f->own.now = 3000;
    assert_int_equal(fetch(f, 2, 12), 0); /* below 15 at both fetches: unchanged */
    assert_int_equal(gr_partition_replica(f->part, 2)->last_caught_up_time_ms, 1000);
    f->own.now = 4000;
    assert_int_equal(fetch(f, 2, 15), 0); /* reached the leader's log end offset: this fetch's time */
    assert_int_equal(gr_partition_replica(f->part, 2)->last_caught_up_time_ms, 4000);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 15);
    /* bounds: beyond the log end or negative is refused, nothing stored */
    assert_int_equal(fetch(f, 2, 16), -ERANGE);
    assert_int_equal(fetch(f, 2, -1), -ERANGE);
    struct gr_follower_fetch stranger = {9, 1, 1, 0, f->own.now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &stranger), -ENOENT); /* no replica */
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, 15);
}

static void test_eligibility(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_1, 1, 1, 1, 1), 0);
    append(f, 4);
    assert_false(gr_partition_replica_isr_eligible(f->part, 2)); /* no fetch yet */
    /* a fetch sent before the follower's restart (older broker epoch) is fenced */
    struct gr_follower_fetch old = {2, 90, 4, 0, f->own.now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &old), -ESTALE);
    assert_int_equal(gr_partition_replica(f->part, 2)->log_end_offset, -1);
    /* shutting down: not eligible, no expansion */
    f->own.shutting[2] = true;
    assert_int_equal(fetch(f, 2, 4), 0);
    assert_false(gr_partition_replica_isr_eligible(f->part, 2));
    assert_int_equal(f->own.proposals, 0);
    f->own.shutting[2] = false;
    assert_true(gr_partition_replica_isr_eligible(f->part, 2));
    /* restarted since its fetch (a new broker epoch registered): not eligible until it fetches again */
    f->own.epoch[2] = 200;
    assert_false(gr_partition_replica_isr_eligible(f->part, 2));
    /* not registered (fenced) */
    f->own.epoch[3] = -1;
    assert_int_equal(fetch(f, 3, 4), 0);
    assert_false(gr_partition_replica_isr_eligible(f->part, 3));
    assert_int_equal(f->own.proposals, 0);
    /* a fetch without a broker epoch (-1) passes the epoch check (Kafka's bypass) */
    f->own.epoch[3] = 103;
    struct gr_follower_fetch none = {3, -1, 4, 0, f->own.now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &none), 0);
    assert_true(gr_partition_replica_isr_eligible(f->part, 3));
    assert_int_equal(f->own.proposals, 1);
    assert_int_equal(f->own.last.isr[1], 3);
}

static void test_expand_conditions(void **state)
{
    struct fx *f = *state;
    size_t len;
    uint8_t *b = th_simple(10, 1000, 9, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0); /* before leading: the epoch starts at 10 */
    free(b);
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* the log had no high watermark yet */
    assert_int_equal(fetch(f, 3, 5), 0); /* >= HW 0 but below the epoch's start offset 10 */
    assert_int_equal(f->own.proposals, 0);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    append(f, 5);
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 15);
    assert_int_equal(fetch(f, 3, 12), 0); /* >= the epoch's start but below HW 15 */
    assert_int_equal(f->own.proposals, 0);
    assert_int_equal(fetch(f, 3, 15), 0);
    assert_int_equal(f->own.proposals, 1);
    assert_true(f->own.last.expand);
}

static void test_shrink_after_lag(void **state)
{
    struct fx *f = *state;
    f->own.now = 1000;
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 1), 0);
    append(f, 10);
    f->own.now = 2000;
    assert_int_equal(fetch(f, 2, 10), 0);
    /* 3 never fetched: caught up at 1000 (makeLeader), out of sync only after 1000 + lag */
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, 1000 + LAG_MS), 0);
    assert_int_equal(f->own.proposals, 0);
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, 1000 + LAG_MS + 1), 1);
    assert_int_equal(f->own.last.count, 2);
    assert_int_equal(f->own.last.isr[1], 2);
    /* one change in flight: no second one, no expansion */
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, 1000000), 0);
    assert_int_equal(f->own.proposals, 1);
    assert_int_equal(gr_partition_isr_committed(f->part, 1, 5, ISR_12, 2), 0);
    /* a follower at the leader's log end offset is never out of sync, however long ago it caught up */
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, 1000000), 0);
    append(f, 1);
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, 1000000), 1);
    assert_int_equal(f->own.last.count, 1);
    assert_int_equal(f->own.last.partition_epoch, 5);
    f->own.now = 1000001;
    assert_int_equal(fetch(f, 3, 10), 0); /* eligible and caught up, but a change is in flight */
    assert_int_equal(f->own.proposals, 2);
}

/* A follower outside the ISR that caught up within the lag holds the high watermark at its log end offset;
   once the lag passes with no fetch, the shrink tick lets it move (a parked acks=-1 produce completes). */
static void test_caught_up_follower_outside_isr(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 3, 10), 0); /* caught up now; expansion proposed */
    assert_int_equal(f->own.proposals, 1);
    assert_int_equal(gr_partition_isr_failed(f->part, 1), 0); /* refused: 3 stays outside the ISR */
    append(f, 5);
    assert_int_equal(fetch(f, 2, 15), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10); /* 3 is caught up and eligible: it counts */
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 15);
    f->own.now += LAG_MS + 1;
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, f->own.now), 0); /* 2 is at the log end */
    assert_int_equal(w.calls, 1);
    assert_int_equal(gr_partition_visible_offset(f->part), 15);
}

static void test_set_role_epochs(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_LEADER);
    assert_int_equal(gr_partition_leader_epoch(f->part), gr_log_leader_epoch(f->log));
    assert_int_equal(gr_partition_partition_epoch(f->part), -1);
    append(f, 3);
    assert_int_equal(lead(f, ISR_ALL, 3, 5, 10, 2), 0);
    assert_int_equal(gr_partition_leader_epoch(f->part), 5);
    assert_int_equal(gr_log_leader_epoch(f->log), 5); /* new batches carry it */
    int32_t epoch;
    int64_t end;
    /* the leader-epoch cache has epoch 5 from the log end offset 3 on: epoch 4 ends there */
    assert_int_equal(gr_partition_epoch_end_offset(f->part, 5, 4, &epoch, &end), GR_ERR_NONE);
    assert_int_equal(end, 3);
    assert_int_equal(gr_partition_check_epoch(f->part, 4), GR_ERR_FENCED_LEADER_EPOCH);
    assert_int_equal(gr_partition_check_epoch(f->part, 5), GR_ERR_NONE);
    assert_int_equal(lead(f, ISR_ALL, 3, 4, 11, 2), -ESTALE); /* older leader epoch */
    assert_int_equal(lead(f, ISR_ALL, 3, 5, 9, 2), -ESTALE);  /* older partition epoch */
    assert_int_equal(gr_partition_leader_epoch(f->part), 5);
    assert_int_equal(gr_partition_partition_epoch(f->part), 10);
    assert_int_equal(lead(f, ISR_ALL, 3, 5, 10, 2), 0); /* the same: already applied */
    /* bounds */
    int32_t many[GR_IMAGE_REPLICAS_MAX + 1];
    for (int i = 0; i <= GR_IMAGE_REPLICAS_MAX; i++)
        many[i] = i + 1;
    struct gr_partition_role_change c = {GR_PARTITION_LEADER,       1,    6, 12, many,
                                         GR_IMAGE_REPLICAS_MAX + 1, many, 1, 1,  0};
    assert_int_equal(gr_partition_set_role(f->part, &c), -EINVAL);
    c.replica_count = 0;
    assert_int_equal(gr_partition_set_role(f->part, &c), -EINVAL);
    c.replica_count = 2;
    c.isr_count = 3;
    assert_int_equal(gr_partition_set_role(f->part, &c), -EINVAL);
    assert_int_equal(gr_partition_leader_epoch(f->part), 5);
}

/* Re-elected at a new leader epoch (Replica.resetReplicaState with isNewLeader false): the followers keep
   their offsets; from follower to leader they start unknown. A newer partition state drops the change in
   flight. */
static void test_reelected_leader(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_12, 2, 1, 1, 1), 0);
    append(f, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(fetch(f, 3, 10), 0); /* expansion of 3 in flight */
    assert_true(gr_partition_isr_inflight(f->part));
    f->own.now += 5;
    assert_int_equal(lead(f, ISR_12, 2, 2, 3, 1), 0);
    assert_false(gr_partition_isr_inflight(f->part)); /* the new state's ISR is the committed one */
    assert_int_equal(gr_partition_maximal_isr_count(f->part), 2);
    assert_int_equal(gr_partition_isr_committed(f->part, 2, 4, ISR_ALL, 3), -ESTALE);
    const struct gr_replica_state *r2 = gr_partition_replica(f->part, 2),
                                  *r3 = gr_partition_replica(f->part, 3);
    assert_int_equal(r2->log_end_offset, 10);
    assert_int_equal(r2->last_caught_up_time_ms, f->own.now); /* in the ISR: now */
    assert_int_equal(r2->last_fetch_leader_log_end_offset, 10);
    assert_int_equal(r3->log_end_offset, 10);
    assert_int_equal(r3->last_caught_up_time_ms, 0); /* outside the ISR: must not hold the HW back */
    assert_int_equal(r3->last_fetch_time_ms, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 10);
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 3, 5, replicas, 3, ISR_ALL, 3, 0, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(lead(f, ISR_ALL, 3, 4, 6, 1), 0);
    r2 = gr_partition_replica(f->part, 2);
    assert_int_equal(r2->log_end_offset, -1); /* a new leader knows nothing of its followers yet */
    assert_false(r2->fetched);
    assert_int_equal(gr_partition_visible_offset(f->part), 10); /* the high watermark it had */
}

static void test_become_follower(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 1), 0);
    append(f, 10);
    struct counted w, d;
    counted_init(&w);
    counted_init(&d);
    gr_partition_wait_committed(f->part, &w.w, 10);
    gr_partition_wait_data(f->part, &d.w, 10);
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 2, 2, replicas, 3, ISR_ALL, 3, 0, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_FOLLOWER);
    assert_int_equal(gr_partition_leader_epoch(f->part), 2);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, -EXDEV);
    assert_int_equal(d.calls, 0); /* data waiters wait for the leader's data */
    assert_int_equal(gr_partition_visible_offset(f->part),
                     0); /* the high watermark it had, not its log end */
    assert_true(gr_partition_waiting(&d.w));
    assert_int_equal(fetch(f, 3, 0), -EPERM);
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, 0), -EPERM);
    assert_int_equal(gr_partition_check_produce_acks(f->part, 1), GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(gr_partition_low_watermark(f->part), -1);
    /* a follower never commits: a later committed wait, even below its high watermark, ends at once */
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, -EXDEV);
    gr_partition_wait_cancel(&d.w);
}

/* The new leader of a kill -9 failover (issue #20, the make bench-cluster stall): a follower of broker 3 at
   leader epoch 0 becomes the leader at epoch 1 with ISR {1,2} and min.insync.replicas 2. A follower that
   never fetches from it is proposed out of the ISR once replica.lag.time.max.ms has passed since the
   election (Replica.resetReplicaState: caught up at the election, its log end offset unknown); one that
   fetches at the leader's log end offset stays in it however long no record comes, acks=-1 is accepted, and
   the high watermark follows its fetches. */
static void test_failover_new_leader(void **state)
{
    struct fx *f = *state;
    static const int32_t replicas[] = {1, 2, 3};
    int64_t end = append(f, 10);
    for (int fetching = 0; fetching < 2; fetching++) {
        f->own.now = 1000 + fetching * 1000000;
        struct gr_partition_role_change c = {
            GR_PARTITION_FOLLOWER, 3, 2 * fetching, 2 * fetching + 1, replicas, 3, ISR_ALL, 3, 2, f->own.now};
        assert_int_equal(gr_partition_set_role(f->part, &c), 0);
        int64_t elected = f->own.now;
        assert_int_equal(lead(f, ISR_12, 2, 2 * fetching + 1, 2 * fetching + 2, 2), 0);
        assert_int_equal(gr_partition_check_produce_acks(f->part, -1), GR_ERR_NONE);
        int before = f->own.proposals;
        if (!fetching) {
            assert_int_equal(gr_partition_maybe_shrink_isr(f->part, elected + LAG_MS), 0);
            assert_int_equal(gr_partition_maybe_shrink_isr(f->part, elected + LAG_MS + 1), 1);
            assert_int_equal(f->own.proposals, before + 1);
            assert_false(f->own.last.expand);
            assert_int_equal(f->own.last.count, 1);
            assert_int_equal(f->own.last.isr[0], 1);
            assert_int_equal(f->own.last.leader_epoch, 1);
            continue;
        }
        assert_int_equal(fetch(f, 2, end), 0);
        assert_int_equal(gr_partition_maybe_shrink_isr(f->part, elected + 10 * LAG_MS), 0);
        assert_int_equal(f->own.proposals, before);
        end = append(f, 1);
        assert_int_equal(gr_partition_visible_offset(f->part), end - 1); /* waits for broker 2 */
        f->own.now = elected + 10 * LAG_MS;
        assert_int_equal(fetch(f, 2, end), 0);
        assert_int_equal(gr_partition_visible_offset(f->part), end);
    }
}

static void test_not_enough_replicas(void **state)
{
    struct fx *f = *state;
    assert_int_equal(lead(f, ISR_1, 1, 1, 1, 2), 0);
    assert_int_equal(gr_partition_check_produce_acks(f->part, -1), GR_ERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(gr_partition_check_produce_acks(f->part, 1), GR_ERR_NONE);
    assert_int_equal(gr_partition_check_produce_acks(f->part, 0), GR_ERR_NONE);
    assert_int_equal(lead(f, ISR_12, 2, 1, 2, 2), 0);
    assert_int_equal(gr_partition_check_produce_acks(f->part, -1), GR_ERR_NONE);
    append(f, 10);
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 10);
    assert_int_equal(fetch(f, 2, 10), 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(gr_partition_check_enough_replicas(f->part), GR_ERR_NONE);
    /* 2 falls out of sync: while its removal is in flight it still counts */
    append(f, 1);
    f->own.now += LAG_MS + 1;
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, f->own.now), 1);
    assert_int_equal(gr_partition_check_enough_replicas(f->part), GR_ERR_NONE);
    assert_int_equal(gr_partition_isr_committed(f->part, 1, 3, ISR_1, 1), 0);
    assert_int_equal(gr_partition_check_enough_replicas(f->part), GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    assert_int_equal(gr_partition_check_produce_acks(f->part, -1), GR_ERR_NOT_ENOUGH_REPLICAS);
    /* min.insync.replicas lowered to 1: both answers are NONE again, and the HW may move */
    assert_int_equal(gr_partition_set_min_insync_replicas(f->part, 0), -EINVAL);
    assert_int_equal(gr_partition_set_min_insync_replicas(f->part, 1), 0);
    assert_int_equal(gr_partition_check_enough_replicas(f->part), GR_ERR_NONE);
    assert_int_equal(gr_partition_check_produce_acks(f->part, -1), GR_ERR_NONE);
    assert_int_equal(gr_partition_visible_offset(f->part), 11);
}

static void test_low_watermark(void **state)
{
    struct fx *f = *state;
    append(f, 10);
    assert_int_equal(gr_log_delete_records_begin(f->log, 6), 1);
    assert_int_equal(gr_log_delete_records_end(f->log, 6, 0), 0);
    assert_int_equal(gr_partition_low_watermark(f->part), 6); /* alone: its own log start offset */
    assert_int_equal(lead(f, ISR_ALL, 3, 1, 1, 1), 0);
    struct gr_follower_fetch a = {2, 102, 10, 4, f->own.now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &a), 0);
    assert_int_equal(gr_partition_low_watermark(f->part), -1); /* 3 is registered and has not fetched */
    struct gr_follower_fetch b = {3, 103, 10, 5, f->own.now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &b), 0);
    assert_int_equal(gr_partition_low_watermark(f->part), 4);
    f->own.epoch[2] = -1; /* 2 is gone: not counted */
    assert_int_equal(gr_partition_low_watermark(f->part), 5);
}

static void test_one_replica_as_today(void **state)
{
    struct fx *f = *state;
    static const int32_t one[] = {1};
    struct gr_partition_role_change c = {GR_PARTITION_LEADER, 1, 1, 1, one, 1, one, 1, 2, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(gr_partition_effective_min_isr(f->part), 1); /* min(2, replication factor 1) */
    assert_int_equal(gr_partition_check_produce_acks(f->part, -1), GR_ERR_NONE);
    struct counted w;
    counted_init(&w);
    gr_partition_wait_committed(f->part, &w.w, 5);
    append(f, 5);
    assert_int_equal(w.calls, 1); /* the log end offset, as without replication */
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hw_of_pure),
        cmocka_unit_test_setup_teardown(test_min_isr_blocks_hw, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_followers_move_hw_and_wake_committed, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_hw_invariant_violation, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_late_fetch_not_stored, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_follower_violation_never_aborts, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_pending_add_counts_and_failure_reverts, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_pending_remove_counts_until_committed, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_mode_uses_durable_offset, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_last_caught_up_time, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_eligibility, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_expand_conditions, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_shrink_after_lag, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_caught_up_follower_outside_isr, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_set_role_epochs, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_reelected_leader, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_become_follower, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_failover_new_leader, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_not_enough_replicas, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_low_watermark, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_one_replica_as_today, setup_end, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
