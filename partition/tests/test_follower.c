/*
 * test_follower.c: a follower partition (partition/follower.c) on a real log, no server: appends as follower
 * refused when not following or under another leader epoch; the visible offset is min(the leader's high
 * watermark as taken, the log end offset), never down but by truncation, and wakes data waiters; truncation
 * lowers it and leaves waiters past the new end waiting; the log start offset from the leader; a full
 * truncation; back to leading; failover under an idempotent producer (duplicates of batches held past the
 * high watermark, the next sequence, a gap; after a truncation).
 * Read next: partition/follower.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "partition/partition.h"
#include "partition/tests/counted.h"
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
    assert_int_equal(gr_store_topic_create(f->store, "p", 1, NULL, NULL, 0, &t), 0);
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

/* Makes this broker (id 2) a follower of broker 1 for replicas {1,2,3} at `leader_epoch`. */
static void follow(struct fx *f, int32_t leader_epoch)
{
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {
        GR_PARTITION_FOLLOWER, 1, leader_epoch, leader_epoch, replicas, 3, replicas, 3, 1, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
}

/* Makes this broker (id 2) the leader at `leader_epoch`. */
static void lead(struct fx *f, int32_t leader_epoch)
{
    static const int32_t replicas[] = {2};
    struct gr_partition_role_change c = {
        GR_PARTITION_LEADER, 2, leader_epoch, leader_epoch, replicas, 1, replicas, 1, 1, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
}

/* The leader's batch of `count` records at `base` in leader epoch `epoch`, appended as follower under
   `fetch_epoch`. Returns the append's result code. */
static int replicate(struct fx *f, int64_t base, int32_t epoch, int32_t count, int32_t fetch_epoch)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000 + base, (uint32_t)base, &len);
    gr_batch_set_base_offset(b, base);
    gr_batch_set_leader_epoch(b, epoch);
    struct gr_append_result res;
    int rc = gr_partition_append_as_follower(f->part, b, len, fetch_epoch, &res);
    if (rc == 0) {
        assert_int_equal(res.base_offset, base);
        assert_int_equal(res.last_offset, base + count - 1);
    }
    free(b);
    return rc;
}

static void test_not_a_follower(void **state)
{
    struct fx *f = *state;
    assert_int_equal(replicate(f, 0, 0, 3, 0), -EPERM);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 3), -EPERM);
    assert_int_equal(gr_partition_truncate_to(f->part, 0), -EPERM);
    assert_int_equal(gr_partition_truncate_fully_and_start_at(f->part, 9), -EPERM);
    assert_int_equal(gr_partition_raise_log_start_offset(f->part, 1), -EPERM);
    assert_int_equal(gr_log_end_offset(f->log), 0);
}

static void test_high_watermark_is_the_leaders(void **state)
{
    struct fx *f = *state;
    follow(f, 3);
    assert_int_equal(replicate(f, 0, 3, 3, 2), -ESTALE); /* fetched under an older leader epoch */
    assert_int_equal(replicate(f, 0, 3, 3, 3), 0);
    assert_int_equal(replicate(f, 3, 3, 6, 3), 0);
    assert_int_equal(gr_log_end_offset(f->log), 9);
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* nothing committed by the leader yet */
    struct counted w = {0};
    gr_partition_waiter_init(&w.w, counted_done, &w);
    gr_partition_wait_data(f->part, &w.w, 4);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 4), 4);
    assert_int_equal(w.calls, 0); /* offset 4 is not visible yet */
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 100), 9); /* within its own log */
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    assert_int_equal(gr_log_high_watermark(f->log), 9);                        /* storage checkpoints it */
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 5), 9); /* never down */
    assert_int_equal(replicate(f, 9, 4, 2, 3), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 9);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 11), 11);
}

static void test_truncation_lowers_it(void **state)
{
    struct fx *f = *state;
    follow(f, 3);
    assert_int_equal(replicate(f, 0, 2, 4, 3), 0);
    assert_int_equal(replicate(f, 4, 3, 4, 3), 0);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 8), 8);
    struct counted w = {0};
    gr_partition_waiter_init(&w.w, counted_done, &w);
    gr_partition_wait_data(f->part, &w.w, 8);
    /* The new leader's history diverges at 4 (OffsetForLeaderEpoch answered epoch 2 ending at 4). */
    follow(f, 4);
    assert_int_equal(gr_partition_truncate_to(f->part, 4), 0);
    assert_int_equal(gr_log_end_offset(f->log), 4);
    assert_int_equal(gr_partition_visible_offset(f->part), 4);
    assert_int_equal(gr_log_high_watermark(f->log), 4);
    assert_int_equal(w.calls, 0); /* waits past the new end keep waiting */
    gr_store_quiesce(f->store);   /* the file half is done: appends go on */
    assert_int_equal(replicate(f, 4, 4, 5, 4), 0);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 9), 9);
    assert_int_equal(w.calls, 1);
    int64_t end;
    int32_t ep;
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 3, &end, &ep), 0);
    assert_int_equal(ep, 2); /* epoch 3's entry was cut: the largest epoch below is 2, ending at 4 */
    assert_int_equal(end, 4);
    assert_int_equal(gr_partition_raise_log_start_offset(f->part, 2), 1);
    assert_int_equal(gr_log_start_offset(f->log), 2);
    assert_int_equal(gr_partition_raise_log_start_offset(f->part, 1), 0);
    assert_int_equal(gr_partition_truncate_fully_and_start_at(f->part, 40), 0);
    assert_int_equal(gr_log_start_offset(f->log), 40);
    assert_int_equal(gr_partition_visible_offset(f->part), 40);
    gr_store_quiesce(f->store);
    assert_int_equal(replicate(f, 40, 4, 1, 4), 0);
}

static void test_back_to_leading(void **state)
{
    struct fx *f = *state;
    follow(f, 1);
    assert_int_equal(replicate(f, 0, 1, 5, 1), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 0);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 3), 3);
    lead(f, 2); /* alone: the leader's own rule, the log end offset, from the high watermark it had */
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    assert_int_equal(replicate(f, 5, 1, 1, 2), -EPERM);
}

/* An idempotent batch of producer 7 at epoch 0: `count` records from sequence `seq`. Malloc'd, *len set. */
static uint8_t *idem_batch(int32_t seq, int32_t count, size_t *len)
{
    struct th_batch_spec s = {.count = count,
                              .ts0 = 1700000000000 + seq,
                              .ts_step = 1,
                              .tag = (uint32_t)seq,
                              .value_bytes = 10,
                              .producer_id = 7,
                              .producer_epoch = 0,
                              .base_sequence = seq};
    return th_batch(&s, len);
}

/* The leader's batch of sequences [seq, seq + count) at offset `base`, leader epoch 1, copied as follower. */
static void replicate_idem(struct fx *f, int64_t base, int32_t seq, int32_t count)
{
    size_t len;
    uint8_t *b = idem_batch(seq, count, &len);
    gr_batch_set_base_offset(b, base);
    gr_batch_set_leader_epoch(b, 1);
    struct gr_append_result res;
    assert_int_equal(gr_partition_append_as_follower(f->part, b, len, 1, &res), 0);
    assert_int_equal(res.base_offset, base);
    free(b);
}

/* The producer sends sequences [seq, seq + count) to this partition (as leader): the append's result code,
 *res its answer. */
static int produce_idem(struct fx *f, int32_t seq, int32_t count, struct gr_append_result *res)
{
    size_t len;
    uint8_t *b = idem_batch(seq, count, &len);
    int rc = gr_partition_append(f->part, b, len, -1, res);
    free(b);
    return rc;
}

/* Failover under an idempotent producer (Kafka: the follower's ProducerStateManager is built from the batches
   it copies, Partition.makeLeader keeps the log whole): the new leader holds batches past the high watermark
   it had as follower (the producer's retries of them must be duplicates answered with their offsets, never
   OUT_OF_ORDER_SEQUENCE_NUMBER) and takes the sequence after the last batch it holds; a gap is out of order.
 */
static void test_failover_producer_state(void **state)
{
    struct fx *f = *state;
    follow(f, 1);
    replicate_idem(f, 0, 0, 5);
    replicate_idem(f, 5, 5, 5);
    replicate_idem(f, 10, 10, 5);
    assert_int_equal(gr_partition_set_follower_high_watermark(f->part, 5), 5); /* 5..14 not yet committed */
    lead(f, 2);
    struct gr_append_result res;
    assert_int_equal(produce_idem(f, 5, 5, &res), 0); /* held past the old high watermark: a duplicate */
    assert_true(res.duplicate);
    assert_int_equal(res.base_offset, 5);
    assert_int_equal(res.last_offset, 9);
    assert_int_equal(produce_idem(f, 10, 5, &res), 0);
    assert_true(res.duplicate);
    assert_int_equal(res.base_offset, 10);
    assert_int_equal(produce_idem(f, 20, 5, &res), GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* 15..19 skipped */
    assert_int_equal(produce_idem(f, 15, 5, &res), 0); /* the next one: written */
    assert_false(res.duplicate);
    assert_int_equal(res.base_offset, 15);
    assert_int_equal(gr_log_end_offset(f->log), 20);
}

/* A follower that truncated (a diverging epoch: the batches past 10 were the old leader's alone, never
   acknowledged) and then leads: its producer state is that of the truncated log (ProducerStateManager
   truncateAndReload), so the producer's retry of the cut batch is written anew, not a duplicate of bytes
   that are gone nor out of order, and a batch still held stays a duplicate. */
static void test_failover_after_truncation(void **state)
{
    struct fx *f = *state;
    follow(f, 1);
    replicate_idem(f, 0, 0, 5);
    replicate_idem(f, 5, 5, 5);
    replicate_idem(f, 10, 10, 5);
    assert_int_equal(gr_partition_truncate_to(f->part, 10), 0);
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_end_offset(f->log), 10);
    lead(f, 2);
    struct gr_append_result res;
    assert_int_equal(produce_idem(f, 5, 5, &res), 0);
    assert_true(res.duplicate);
    assert_int_equal(res.base_offset, 5);
    assert_int_equal(produce_idem(f, 15, 5, &res), GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* 10..14 are gone */
    assert_int_equal(produce_idem(f, 10, 5, &res), 0);
    assert_false(res.duplicate);
    assert_int_equal(res.base_offset, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_not_a_follower, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_watermark_is_the_leaders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncation_lowers_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_back_to_leading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_producer_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_after_truncation, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
