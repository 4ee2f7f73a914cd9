/*
 * test_txn.c: the partition layer's transactions (issue #21, slice E) on a real log, no server: the
 * produce check (a transactional batch only with txn_verified, a client's control batch never, a
 * non-transactional batch while its producer's transaction is open INVALID_TXN_STATE), markers written as
 * the leader (gr_partition_write_marker: their epoch checks, the aborted-transaction entries), the last
 * stable offset against the visible offset with interleaved producers, and the read_committed wait
 * (gr_partition_wait_fetchable with GR_FETCH_TXN_COMMITTED) woken when the last stable offset moves.
 * Read next: partition/partition.h (REPLICATION AND TRANSACTIONS), storage/tests/test_txn.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"
#include "storage/producer_state.h"
#include "storage/tests/helpers.h"

#define NOW_MS 1700000000000LL

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    struct gr_log_config policy;
    struct gr_arena arena;
};

static int setup_mode(void **state, bool durable)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    th_flush_hook(&sc);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "x", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    f->policy = *gr_topic_policy(t);
    struct gr_partitions_config pc = {f->store, durable};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    gr_arena_init(&f->arena, 0);
    *state = f;
    return 0;
}

static int setup(void **state)
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
    gr_arena_reset(&f->arena);
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Produces `count` records of pid/epoch/seq; `txn`: transactional; `verified`: the caller's flag. */
/* One batch of `count` records from `pid` at `seq`; `guarded`: the append must still hold `guard`. */
static int16_t produce_at(struct fx *f, int64_t pid, int32_t seq, int32_t count, bool txn, bool verified,
                          bool guarded, uint64_t guard, struct gr_produce_result *r)
{
    struct th_batch_spec s = {.count = count,
                              .ts0 = NOW_MS,
                              .ts_step = 1,
                              .tag = 1,
                              .value_bytes = 20,
                              .producer_id = pid,
                              .producer_epoch = 0,
                              .base_sequence = seq,
                              .transactional = txn};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    struct gr_produce_args args = {.records = b,
                                   .records_len = (int64_t)len,
                                   .api_version = 9,
                                   .now_ms = NOW_MS,
                                   .acks = 1,
                                   .txn_verified = verified,
                                   .txn_guarded = guarded,
                                   .txn_guard = guard};
    int16_t err = gr_partition_produce(f->part, &f->policy, &args, &f->arena, r);
    free(b);
    return err;
}

static int16_t produce(struct fx *f, int64_t pid, int32_t seq, int32_t count, bool txn, bool verified,
                       struct gr_produce_result *r)
{
    return produce_at(f, pid, seq, count, txn, verified, false, 0, r);
}

static int marker(struct fx *f, int64_t pid, int32_t coord, bool commit, struct gr_append_result *res)
{
    struct gr_partition_marker m = {.producer_id = pid,
                                    .producer_epoch = 0,
                                    .coordinator_epoch = coord,
                                    .commit = commit,
                                    .now_ms = NOW_MS};
    return gr_partition_write_marker(f->part, &m, res);
}

static int woken, woken_err;
static void on_done(struct gr_partition_waiter *w, int err)
{
    (void)w;
    woken++;
    woken_err = err;
}

static void test_produce_checks(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    /* not verified (the server's Produce until the coordinator is wired): refused, nothing appended */
    assert_int_equal(produce(f, 1, 0, 2, true, false, &r), GR_ERR_INVALID_RECORD);
    assert_int_equal(gr_log_end_offset(f->log), 0);
    assert_int_equal(produce(f, 1, 0, 2, true, true, &r), GR_ERR_NONE);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(gr_producer_state_find(gr_log_producer_state(f->log), 1)->current_txn_first_offset, 0);
    /* a non-transactional batch while the transaction is open (ProducerAppendInfo.appendDataBatch) */
    assert_int_equal(produce(f, 1, 2, 1, false, true, &r), GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(r.log_start_offset, 0);
    assert_int_equal(gr_log_end_offset(f->log), 2);
    /* a client's control batch is refused even when verified */
    struct gr_record_in rec = {.timestamp = NOW_MS,
                               .key = {(const uint8_t *)"\0\0\0\1", 4},
                               .value = {(const uint8_t *)"\0\0\0\0\0\0", 6}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .attributes = GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL,
                                 .producer_id = 1,
                                 .producer_epoch = 0,
                                 .base_sequence = -1};
    uint8_t *cb;
    size_t clen;
    assert_int_equal(gr_batch_build(&bp, &rec, 1, &cb, &clen), 0);
    struct gr_produce_args args = {.records = cb,
                                   .records_len = (int64_t)clen,
                                   .api_version = 9,
                                   .now_ms = NOW_MS,
                                   .acks = 1,
                                   .txn_verified = true};
    assert_int_equal(gr_partition_produce(f->part, &f->policy, &args, &f->arena, &r), GR_ERR_INVALID_RECORD);
    free(cb);
    assert_int_equal(gr_log_end_offset(f->log), 2);
    /* the marker as the coordinator writes it; a lower coordinator epoch afterwards is fenced */
    struct gr_append_result res;
    assert_int_equal(marker(f, 1, 3, true, &res), 0);
    assert_int_equal(res.base_offset, 2);
    assert_int_equal(marker(f, 1, 2, false, &res), GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED);
    assert_int_equal(produce(f, 1, 2, 1, false, true, &r), GR_ERR_NONE); /* closed: idempotent again */
}

/* Interleaved producers: the last stable offset, the read_committed wait, the aborted transactions. */
static void test_last_stable_offset_and_waits(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    assert_int_equal(produce(f, 9, 0, 2, false, true, &r), GR_ERR_NONE); /* 0..1 */
    assert_int_equal(gr_partition_last_stable_offset(f->part), 2);       /* no transaction: = visible */
    assert_int_equal(gr_partition_first_unstable_offset(f->part), -1);
    assert_int_equal(produce(f, 1, 0, 3, true, true, &r), GR_ERR_NONE); /* 2..4 */
    assert_int_equal(produce(f, 2, 0, 2, true, true, &r), GR_ERR_NONE); /* 5..6 */
    assert_int_equal(gr_partition_visible_offset(f->part), 7);
    assert_int_equal(gr_partition_last_stable_offset(f->part), 2);
    assert_int_equal(gr_partition_fetch_bound(f->part, GR_FETCH_TXN_COMMITTED), 2);
    assert_int_equal(gr_partition_fetch_bound(f->part, GR_FETCH_HIGH_WATERMARK), 7);
    struct gr_partition_waiter w, u;
    gr_partition_waiter_init(&w, on_done, NULL);
    gr_partition_waiter_init(&u, on_done, NULL);
    woken = 0;
    gr_partition_wait_fetchable(f->part, &w, GR_FETCH_TXN_COMMITTED, 2);
    gr_partition_wait_fetchable(f->part, &u, GR_FETCH_HIGH_WATERMARK, 7);
    assert_true(gr_partition_waiting(&w));
    assert_int_equal(produce(f, 9, 2, 1, false, true, &r), GR_ERR_NONE); /* 7: visible moves, LSO not */
    assert_int_equal(woken, 1);                                          /* only the uncommitted reader */
    assert_true(gr_partition_waiting(&w));
    struct gr_append_result res;
    assert_int_equal(marker(f, 2, 0, false, &res), 0); /* 8: P2 aborts; P1 still open: LSO stays 2 */
    assert_int_equal(gr_partition_last_stable_offset(f->part), 2);
    assert_true(gr_partition_waiting(&w));
    assert_int_equal(marker(f, 1, 0, true, &res), 0); /* 9: P1 commits: the LSO reaches the visible offset */
    assert_int_equal(gr_partition_last_stable_offset(f->part), 10);
    assert_int_equal(woken, 2);
    assert_int_equal(woken_err, 0);
    assert_false(gr_partition_waiting(&w));
    /* a read_committed long poll's next round waits past the LSO; a plain append moves it */
    gr_partition_wait_data_again(f->part, &w);
    assert_true(gr_partition_waiting(&w));
    assert_int_equal(produce(f, 9, 3, 1, false, true, &r), GR_ERR_NONE);
    assert_int_equal(woken, 3);
    struct gr_aborted_txn a[2];
    assert_int_equal(gr_partition_aborted_txns(f->part, 0, 11, a, 2), 1);
    assert_int_equal(a[0].producer_id, 2);
    assert_int_equal(a[0].first_offset, 5);
    assert_int_equal(a[0].last_offset, 8);
    assert_int_equal(a[0].last_stable_offset, 2); /* P1's open transaction */
    assert_int_equal(gr_partition_aborted_txns(f->part, 9, 11, a, 2), 0);
}

/* With visible_is_durable the last stable offset never passes the durable offset. */
static void test_durable_bound(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    assert_int_equal(produce(f, 1, 0, 2, true, true, &r), GR_ERR_NONE);
    struct gr_append_result res;
    assert_int_equal(marker(f, 1, 0, true, &res), 0);
    /* the flusher thread may make more durable between two reads: read the LSO first, then the bounds, which
       only grow (comparing the LSO with a later visible offset for equality failed once under load) */
    int64_t lso = gr_partition_last_stable_offset(f->part);
    assert_true(lso <= gr_partition_visible_offset(f->part));
    assert_true(lso <= gr_log_durable_offset(f->log));
    assert_int_equal(th_wait_durable(f->log, 3), 0);
    gr_partition_flushed(f->part);
    assert_int_equal(gr_partition_last_stable_offset(f->part), 3);
    assert_int_equal(gr_partition_first_unstable_offset(f->part), -1);
}

/* read_committed reads (Fetch isolation_level 1, ListOffsets IsolationLevel 1): below the last stable
   offset, the aborted transactions' upper bound, ListOffsets latest = the LSO; read_uncommitted unchanged. */
static void test_read_committed_reads(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    assert_int_equal(produce(f, 1, 0, 2, true, true, &r), GR_ERR_NONE); /* 0..1 */
    struct gr_append_result res;
    assert_int_equal(marker(f, 1, 0, false, &res), 0);                   /* 2: abort */
    assert_int_equal(produce(f, 9, 0, 2, false, true, &r), GR_ERR_NONE); /* 3..4 */
    assert_int_equal(produce(f, 2, 0, 2, true, true, &r), GR_ERR_NONE);  /* 5..6: open */
    assert_int_equal(produce(f, 9, 2, 1, false, true, &r), GR_ERR_NONE); /* 7 */
    struct gr_cold c;
    gr_cold_init(&c, f->ps, NULL, NULL, NULL);
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
    struct gr_fetch_read rd = {.fetch_offset = 0,
                               .current_leader_epoch = -1,
                               .partition_max_bytes = 1 << 20,
                               .version = 12,
                               .last_fetched_epoch = -1,
                               .replica_id = -1,
                               .replica_epoch = -1,
                               .replica_log_start_offset = -1,
                               .read_committed = true};
    assert_int_equal(gr_partition_fetch(f->part, &c, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.high_watermark, 8);
    assert_int_equal(rd.last_stable_offset, 5);
    assert_true(rd.slice.bytes > 0);
    /* outside the slice (past its last offset 4), at most the log end offset: the offset of the first index
       entry at or past the slice's end (index.interval.bytes 100 here) */
    assert_true(rd.aborted_upper_bound > 4 && rd.aborted_upper_bound <= 8);
    uint8_t *bytes = th_slice_bytes(&rd.slice);
    size_t pos = 0, bl;
    const uint8_t *b;
    int64_t last = -1;
    while (gr_batch_next(bytes, (size_t)rd.slice.bytes, &pos, &b, &bl) == 1)
        last = gr_batch_last_offset(b);
    assert_int_equal(last, 4); /* nothing at or past the LSO */
    free(bytes);
    gr_log_slice_release(&rd.slice);
    struct gr_aborted_txn a[2];
    assert_int_equal(gr_partition_aborted_txns(f->part, 0, rd.aborted_upper_bound, a, 2), 1);
    assert_int_equal(a[0].producer_id, 1);
    assert_int_equal(a[0].first_offset, 0);
    /* read_uncommitted: up to the high watermark, no aborted list bound */
    rd.read_committed = false;
    gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
    assert_int_equal(gr_partition_fetch(f->part, &c, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.aborted_upper_bound, -1);
    assert_int_equal(rd.last_stable_offset, 5);
    bytes = th_slice_bytes(&rd.slice);
    pos = 0;
    while (gr_batch_next(bytes, (size_t)rd.slice.bytes, &pos, &b, &bl) == 1)
        last = gr_batch_last_offset(b);
    assert_int_equal(last, 7);
    free(bytes);
    gr_log_slice_release(&rd.slice);
    /* a read_committed fetch at the LSO: no records, no aborted list */
    rd.read_committed = true;
    rd.fetch_offset = 5;
    gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
    assert_int_equal(gr_partition_fetch(f->part, &c, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.slice.bytes, 0);
    assert_int_equal(rd.aborted_upper_bound, -1);
    /* ListOffsets latest: the LSO under read_committed, the high watermark otherwise */
    struct gr_offset_answer ans;
    assert_int_equal(gr_partition_list_offset_isolated(f->part, &c, 9, -1, -1, true, &ans), GR_ERR_NONE);
    assert_int_equal(ans.offset, 5);
    assert_int_equal(gr_partition_list_offset_isolated(f->part, &c, 9, -1, -1, false, &ans), GR_ERR_NONE);
    assert_int_equal(ans.offset, 8);
    assert_int_equal(gr_partition_list_offset(f->part, &c, 9, -1, -1, &ans), GR_ERR_NONE);
    assert_int_equal(ans.offset, 8);
    /* by time: a record at or past the LSO is not found under read_committed */
    assert_int_equal(gr_partition_list_offset_isolated(f->part, &c, 9, -1, NOW_MS, true, &ans), GR_ERR_NONE);
    assert_int_equal(ans.offset, 0);
    gr_cold_release(&c);
}

/* Only a leader takes markers (WriteTxnMarkers on a follower: NOT_LEADER_OR_FOLLOWER); a follower's
   read_committed waiter wakes when the high watermark it takes from the leader passes a commit. */
static void test_follower(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    assert_int_equal(produce(f, 1, 0, 2, true, true, &r), GR_ERR_NONE); /* 0..1, led here first */
    struct gr_append_result res;
    assert_int_equal(marker(f, 1, 0, true, &res), 0); /* 2 */
    static const int32_t replicas[] = {1, 2};
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 1, 5, 5, replicas, 2, replicas, 2, 1, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(marker(f, 1, 0, false, &res), -EXDEV);
    assert_int_equal(gr_log_end_offset(f->log), 3);
    /* the leader's next transaction arrives by replication */
    struct th_batch_spec s = {.count = 2,
                              .ts0 = NOW_MS,
                              .ts_step = 1,
                              .tag = 3,
                              .value_bytes = 20,
                              .producer_id = 1,
                              .producer_epoch = 0,
                              .base_sequence = 2,
                              .transactional = true};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    gr_batch_set_base_offset(b, 3);
    gr_batch_set_leader_epoch(b, 5);
    assert_int_equal(gr_partition_append_as_follower(f->part, b, len, 5, &res), 0);
    free(b);
    gr_partition_set_follower_high_watermark(f->part, 5);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    assert_int_equal(gr_partition_last_stable_offset(f->part), 3); /* the open transaction at 3 */
    struct gr_partition_waiter w;
    gr_partition_waiter_init(&w, on_done, NULL);
    woken = 0;
    gr_partition_wait_fetchable(f->part, &w, GR_FETCH_TXN_COMMITTED, 3);
    assert_true(gr_partition_waiting(&w));
    gr_partition_wait_cancel(&w);
    assert_false(gr_partition_waiting(&w));
    assert_int_equal(woken, 0);
}

/* Produces one transactional batch of pid (epoch 0) whose verdict came before the call, under `guard`. */
static int16_t produce_guarded(struct fx *f, int64_t pid, int32_t seq, uint64_t guard)
{
    struct gr_produce_result r;
    return produce_at(f, pid, seq, 1, true, true, true, guard, &r);
}

/* KIP-890 part 1's verification guard (Kafka's VerificationStateEntry): a marker that ends the producer's
   transaction between the coordinator's verdict and the append makes the append fail INVALID_TXN_STATE;
   without one the append goes and drops the guard; a producer whose transaction is open here needs none,
   and once a marker ends it the SENTINEL guard no longer lets a batch in. */
static void test_verification_guard(void **state)
{
    struct fx *f = *state;
    struct gr_append_result res;
    uint64_t g = 0, g2 = 0;
    /* the question is asked (guard taken), the coordinator says yes, then the abort marker lands first */
    assert_int_equal(gr_partition_txn_verify_start(f->part, 7, 0, &g), 0);
    assert_int_not_equal(g, GR_TXN_GUARD_SENTINEL);
    assert_int_equal(gr_partition_txn_verify_start(f->part, 7, 0, &g2), 0);
    assert_true(g2 == g); /* one entry per producer id, reused */
    assert_int_equal(marker(f, 7, 0, false, &res), 0);
    assert_false(gr_partition_txn_guard_holds(f->part, 7, 0, g));
    assert_int_equal(produce_guarded(f, 7, 0, g), GR_ERR_INVALID_TXN_STATE);
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(f->log), 7);
    assert_true(!e || e->current_txn_first_offset < 0); /* no transaction opened behind the coordinator */
    int64_t end = gr_log_end_offset(f->log);
    /* asked again (a retry): a new guard, no marker this time: appended, the entry dropped */
    assert_int_equal(gr_partition_txn_verify_start(f->part, 7, 0, &g2), 0);
    assert_true(g2 != g && g2 != GR_TXN_GUARD_SENTINEL);
    assert_int_equal(produce_guarded(f, 7, 0, g2), GR_ERR_NONE);
    assert_int_equal(gr_log_end_offset(f->log), end + 1);
    assert_false(gr_partition_txn_guard_holds(f->part, 7, 1, g2)); /* dropped; another epoch not ongoing */
    /* ongoing here: nothing to ask (SENTINEL), and the next batch goes */
    assert_int_equal(gr_partition_txn_verify_start(f->part, 7, 0, &g), 0);
    assert_true(g == GR_TXN_GUARD_SENTINEL);
    assert_int_equal(produce_guarded(f, 7, 1, g), GR_ERR_NONE);
    /* the commit marker lands before the next append that relied on "ongoing": refused */
    assert_int_equal(marker(f, 7, 0, true, &res), 0);
    assert_int_equal(produce_guarded(f, 7, 2, GR_TXN_GUARD_SENTINEL), GR_ERR_INVALID_TXN_STATE);
    /* another producer's marker leaves this producer's guard alone */
    assert_int_equal(gr_partition_txn_verify_start(f->part, 7, 0, &g), 0);
    assert_int_equal(gr_partition_txn_verify_start(f->part, 8, 0, &g2), 0);
    assert_int_equal(marker(f, 8, 0, false, &res), 0);
    assert_true(gr_partition_txn_guard_holds(f->part, 7, 0, g));
    assert_false(gr_partition_txn_guard_holds(f->part, 8, 0, g2));
    assert_int_equal(produce_guarded(f, 7, 2, g), GR_ERR_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_produce_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verification_guard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_stable_offset_and_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_durable_bound, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_read_committed_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
