/*
 * test_idempotence.c: the idempotence rules of gr_log_append (storage/producer_state.h), each against
 * Kafka 4.1.1's ProducerAppendInfo / ProducerStateEntry behaviour: a new producer at any sequence, the next
 * sequence, gaps and repeats that are not a remembered batch (OUT_OF_ORDER), duplicates of each of the last
 * 5 batches (the original's offsets, nothing written), the 6th-oldest (OUT_OF_ORDER), older epoch
 * (INVALID_PRODUCER_EPOCH), higher epoch (must start at 0), wrap-around at INT32_MAX, a producer forgotten by
 * DeleteRecords or by producer.id.expiration.ms (any sequence), recognition of a retry after a clean
 * restart, after a kill -9 (copy of a running store) and from a snapshot plus the log after it, and a
 * duplicate of a batch not yet durable (its answer must wait for the original's last offset).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/internal.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_log *log;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    th_flush_hook(&f->cfg);
    th_flush_reset();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"1000"};
    assert_int_equal(gr_store_topic_create(f->store, "i", 1, k, v, 1, &t), 0);
    f->log = gr_topic_log(t, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->store) gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static void reopen(struct fx *f)
{
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "i", 1), 0);
    assert_non_null(f->log);
}

/* Appends `count` records of producer pid/epoch from base sequence seq; returns gr_log_append's result. */
static int send(struct gr_log *log, int64_t pid, int16_t epoch, int32_t seq, int32_t count,
                struct gr_append_result *res)
{
    static uint32_t tag;
    struct th_batch_spec s = {.count = count,
                              .ts0 = 1700000000000 + tag,
                              .ts_step = 1,
                              .tag = tag++,
                              .value_bytes = 10,
                              .producer_id = pid,
                              .producer_epoch = epoch,
                              .base_sequence = seq};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    memset(res, 0xab, sizeof(*res));
    int err = gr_log_append(log, b, len, -1, res);
    free(b);
    gr_store_quiesce(
        log->store); /* a spare asked for at half a limit is ready at the roll (storage/roll.c) */
    return err;
}

/* Appends and expects acceptance (a real write); returns the base offset. */
static int64_t send_ok(struct gr_log *log, int64_t pid, int16_t epoch, int32_t seq, int32_t count)
{
    struct gr_append_result res;
    int64_t leo = gr_log_end_offset(log);
    assert_int_equal(send(log, pid, epoch, seq, count, &res), 0);
    assert_false(res.duplicate);
    assert_int_equal(res.base_offset, leo);
    assert_int_equal(res.last_offset, leo + count - 1);
    assert_int_equal(gr_log_end_offset(log), leo + count);
    return res.base_offset;
}

/* Expects a duplicate answered with the original's base offset; nothing is written. */
static void send_dup(struct gr_log *log, int64_t pid, int16_t epoch, int32_t seq, int32_t count, int64_t base)
{
    struct gr_append_result res;
    int64_t leo = gr_log_end_offset(log);
    assert_int_equal(send(log, pid, epoch, seq, count, &res), 0);
    assert_true(res.duplicate);
    assert_int_equal(res.base_offset, base);
    assert_int_equal(res.last_offset, base + count - 1);
    assert_int_equal(res.log_start_offset, gr_log_start_offset(log));
    assert_int_equal(gr_log_end_offset(log), leo);
}

static void send_err(struct gr_log *log, int64_t pid, int16_t epoch, int32_t seq, int32_t count, int want)
{
    struct gr_append_result res;
    int64_t leo = gr_log_end_offset(log);
    assert_int_equal(send(log, pid, epoch, seq, count, &res), want);
    assert_int_equal(gr_log_end_offset(log), leo);
}

static int32_t last_seq(struct gr_log *log, int64_t pid)
{
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(log), pid);
    return e ? gr_producer_entry_last_seq(e) : -2;
}

static void test_new_producer_any_sequence(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 7, 0, 0, 3);
    send_ok(f->log, 8, 2, 12345, 2); /* unknown producer: accepted at any sequence (Kafka 4.x) */
    assert_int_equal(last_seq(f->log, 8), 12346);
    send_ok(f->log, 8, 2, 12347, 1);
    send_ok(f->log, 7, 0, 3, 1);
    assert_int_equal(last_seq(f->log, 7), 3);
}

static void test_out_of_order(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 7, 0, 0, 3);                                    /* 0..2 */
    send_err(f->log, 7, 0, 4, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* gap */
    send_err(f->log, 7, 0, 2, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* inside the last batch, not equal */
    send_err(f->log, 7, 0, 0, 2, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* same first seq, other last seq */
    send_err(f->log, 7, 0, -5 + 5, 4, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    assert_int_equal(last_seq(f->log, 7), 2);
    send_ok(f->log, 7, 0, 3, 2); /* refusals changed nothing: the next sequence still fits */
}

static void test_duplicates_of_last_five(void **state)
{
    struct fx *f = *state;
    int64_t base[7];
    for (int i = 0; i < 7; i++)
        base[i] = send_ok(f->log, 9, 1, 2 * i, 2); /* batches seq 0-1, 2-3, ..., 12-13 */
    send_ok(f->log, 10, 0, 0, 1);                  /* another producer in between */
    for (int i = 2; i < 7; i++)                    /* the last 5 are remembered */
        send_dup(f->log, 9, 1, 2 * i, 2, base[i]);
    send_err(f->log, 9, 1, 2, 2, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* 6th-oldest: forgotten */
    send_err(f->log, 9, 1, 0, 2, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    send_ok(f->log, 9, 1, 14, 1);
    send_dup(f->log, 9, 1, 14, 1, gr_log_end_offset(f->log) - 1);
    send_dup(f->log, 9, 1, 6, 2, base[3]); /* still among the last 5 after one more batch */
    send_err(f->log, 9, 1, 4, 2, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* base[2] fell out */
}

static void test_duplicate_answer_fields(void **state)
{
    struct fx *f = *state;
    int64_t b0 = send_ok(f->log, 11, 0, 0, 4);
    struct gr_append_result res;
    assert_int_equal(send(f->log, 11, 0, 0, 4, &res), 0);
    assert_true(res.duplicate);
    assert_int_equal(res.base_offset, b0);
    assert_int_equal(res.last_offset, b0 + 3);
    /* Kafka answers a duplicate with the original batch's max timestamp as log append time. */
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(f->log), 11);
    assert_non_null(e);
    assert_int_equal(res.log_append_time_ms, e->batches[0].timestamp_ms);
    assert_true(res.log_append_time_ms >= 1700000000000);
}

static void test_epochs(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 12, 3, 0, 2);
    send_err(f->log, 12, 2, 2, 1, GR_LOG_ERR_INVALID_PRODUCER_EPOCH); /* older epoch, next seq */
    send_err(f->log, 12, 2, 0, 2, GR_LOG_ERR_INVALID_PRODUCER_EPOCH); /* older epoch, old seqs */
    send_err(f->log, 12, 4, 2, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);  /* new epoch must start at 0 */
    send_ok(f->log, 12, 4, 0, 1);                                     /* epoch bump */
    send_err(f->log, 12, 3, 2, 1, GR_LOG_ERR_INVALID_PRODUCER_EPOCH); /* the old epoch is fenced */
    send_err(f->log, 12, 3, 0, 2, GR_LOG_ERR_INVALID_PRODUCER_EPOCH); /* even its old batches */
    send_ok(f->log, 12, 4, 1, 1);
    send_dup(f->log, 12, 4, 0, 1, gr_log_end_offset(f->log) - 2);
    assert_int_equal(gr_producer_state_find(gr_log_producer_state(f->log), 12)->producer_epoch, 4);
}

static void test_sequence_wrap(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 13, 0, INT32_MAX - 3, 2); /* MAX-3..MAX-2 (new producer: any sequence) */
    send_ok(f->log, 13, 0, INT32_MAX - 1, 2); /* MAX-1..MAX */
    assert_int_equal(last_seq(f->log, 13), INT32_MAX);
    send_err(f->log, 13, 0, INT32_MAX, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    send_err(f->log, 13, 0, 1, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    int64_t b = send_ok(f->log, 13, 0, 0, 1); /* after INT32_MAX comes 0 */
    send_dup(f->log, 13, 0, 0, 1, b);
    /* A batch that itself wraps: MAX-1, MAX, 0, 1. */
    send_ok(f->log, 14, 0, INT32_MAX - 1, 4);
    assert_int_equal(last_seq(f->log, 14), 1);
    send_dup(f->log, 14, 0, INT32_MAX - 1, 4, gr_log_end_offset(f->log) - 4);
    send_ok(f->log, 14, 0, 2, 1);
}

static void test_forgotten_by_delete_records(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 15, 0, 0, 3);
    send_ok(f->log, 16, 0, 0, 3);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 6), 0);
    gr_log_set_high_watermark(f->log, 6);
    assert_int_equal(gr_log_delete_records(f->log, 3), 0);
    assert_null(gr_producer_state_find(gr_log_producer_state(f->log), 15));
    send_ok(f->log, 15, 0, 500, 1); /* its batches are gone: any sequence */
    send_err(f->log, 16, 0, 500, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* 16 is still known */
}

static void test_expiration(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 17, 0, 0, 2); /* timestamps ~1700000000000 */
    send_ok(f->log, 18, 0, 0, 2);
    int64_t last_ts = gr_producer_state_find(gr_log_producer_state(f->log), 17)->last_timestamp_ms;
    assert_int_equal(gr_log_expire_producers(f->log, last_ts + 999, 1000), 0);  /* silent 999 ms: kept */
    assert_int_equal(gr_log_expire_producers(f->log, last_ts + 1000, 1000), 1); /* 1000 ms: 17 expires */
    assert_null(gr_producer_state_find(gr_log_producer_state(f->log), 17));
    assert_non_null(gr_producer_state_find(gr_log_producer_state(f->log), 18));
    send_ok(f->log, 17, 0, 40, 1); /* an expired producer is unknown: any sequence */
    assert_int_equal(gr_log_expire_producers(f->log, INT64_MAX / 2, 86400000), 2);
    assert_int_equal(gr_producer_state_count(gr_log_producer_state(f->log)), 0);
}

static void test_retry_after_clean_restart(void **state)
{
    struct fx *f = *state;
    int64_t b0 = send_ok(f->log, 20, 0, 0, 3);
    int64_t b1 = send_ok(f->log, 20, 0, 3, 3);
    reopen(f);
    send_dup(f->log, 20, 0, 0, 3, b0);
    send_dup(f->log, 20, 0, 3, 3, b1);
    send_err(f->log, 20, 0, 7, 1, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    send_ok(f->log, 20, 0, 6, 1);
}

static void test_retry_after_kill(void **state)
{
    struct fx *f = *state;
    int64_t base[12];
    /* segment.bytes 1000: several rolls, so a snapshot plus the batches after it rebuild the state */
    for (int i = 0; i < 12; i++)
        base[i] = send_ok(f->log, 21, 0, 5 * i, 5);
    assert_true(gr_log_segment_count(f->log) > 1);
    gr_store_quiesce(f->store);
    char copy[128], cmd[512];
    snprintf(copy, sizeof(copy), "%s-copy", f->dir);
    snprintf(cmd, sizeof(cmd), "cp -a %s %s && rm -f %s/.kafka_cleanshutdown", f->dir, copy, copy);
    assert_int_equal(system(cmd), 0);
    struct gr_store_config cfg = f->cfg;
    cfg.log_dir = copy;
    struct gr_store *s2;
    assert_int_equal(gr_store_open(&cfg, &s2), 0);
    struct gr_log *log2 = gr_topic_log(gr_store_topic_find(s2, "i", 1), 0);
    for (int i = 7; i < 12; i++)
        send_dup(log2, 21, 0, 5 * i, 5, base[i]);
    send_err(log2, 21, 0, 30, 5, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    send_ok(log2, 21, 0, 60, 1);
    gr_store_close(s2);
    th_rmtree(copy);
}

static void test_rebuild_from_snapshot_and_log(void **state)
{
    struct fx *f = *state;
    int64_t base[10];
    for (int i = 0; i < 10; i++)
        base[i] = send_ok(f->log, 22, 1, 4 * i, 4);
    gr_store_quiesce(f->store);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls %s/i-0/*.snapshot >/dev/null 2>&1", f->dir);
    assert_int_equal(system(cmd), 0); /* rolls wrote snapshots */
    /* Remove the clean marker: recovery rebuilds from the newest snapshot plus the batches after it. */
    snprintf(cmd, sizeof(cmd), "%s/.kafka_cleanshutdown", f->dir);
    gr_store_close(f->store);
    assert_int_equal(unlink(cmd), 0);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "i", 1), 0);
    for (int i = 5; i < 10; i++)
        send_dup(f->log, 22, 1, 4 * i, 4, base[i]);
    send_err(f->log, 22, 1, 16, 4, GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE);
    send_err(f->log, 22, 0, 40, 1, GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    send_ok(f->log, 22, 1, 40, 1);
}

static void test_duplicate_of_batch_not_yet_durable(void **state)
{
    struct fx *f = *state;
    int64_t b0 = send_ok(f->log, 23, 0, 0, 3); /* written, no flush asked */
    send_ok(f->log, 24, 0, 0, 2);              /* later data of another producer */
    assert_true(gr_log_durable_offset(f->log) < b0 + 3);
    struct gr_append_result res;
    assert_int_equal(send(f->log, 23, 0, 0, 3, &res), 0);
    assert_true(res.duplicate);
    /* The produce handler waits until the durable offset reaches res.last_offset + 1: the ORIGINAL's end,
       which is not durable yet, and below the log end (so waiting for the log end is not what is asked). */
    assert_int_equal(res.last_offset + 1, b0 + 3);
    assert_true(gr_log_durable_offset(f->log) < res.last_offset + 1);
    assert_true(res.last_offset + 1 < gr_log_end_offset(f->log));
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, res.last_offset + 1), 0);
    assert_true(gr_log_durable_offset(f->log) >= res.last_offset + 1);
}

static void test_check_verdicts_direct(void **state)
{
    (void)state;
    /* The pure check on a state fed by headers, without a log. */
    struct gr_producer_state ps;
    gr_producer_state_init(&ps);
    struct th_batch_spec s = {.count = 2,
                              .ts0 = 5,
                              .ts_step = 1,
                              .value_bytes = 4,
                              .producer_id = 99,
                              .producer_epoch = 0,
                              .base_sequence = 0};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    const struct gr_producer_batch *dup;
    assert_int_equal(gr_producer_state_check(&ps, b, len, 0, &dup), GR_PRODUCER_ACCEPT);
    assert_null(dup);
    gr_batch_set_base_offset(b, 100);
    assert_int_equal(gr_producer_state_reserve(&ps, 99), 0);
    assert_int_equal(gr_producer_state_update(&ps, b, len, NULL), 0);
    assert_int_equal(gr_producer_state_check(&ps, b, len, 0, &dup), GR_PRODUCER_DUPLICATE);
    assert_non_null(dup);
    assert_int_equal(dup->last_offset, 101);
    assert_int_equal(dup->last_offset - dup->offset_delta, 100);
    /* A batch without a producer id is never judged. */
    struct th_batch_spec n = {.count = 1, .ts0 = 5, .ts_step = 1, .value_bytes = 4, .producer_id = -1};
    uint8_t *nb = th_batch(&n, &len);
    assert_int_equal(gr_producer_state_check(&ps, nb, len, 0, &dup), GR_PRODUCER_ACCEPT);
    free(nb);
    free(b);
    gr_producer_state_free(&ps);
}

/* A coordinator's data batches carry base sequence -1 (the group coordinator's transactional offset
 * commits): only the epoch is checked, never the sequence or duplicates (Kafka: origin COORDINATOR). Before,
 * the second such batch of a producer was OUT_OF_ORDER (or a DUPLICATE of the first with the same count). */
static void test_coordinator_batches_no_sequence(void **state)
{
    (void)state;
    struct gr_producer_state ps;
    gr_producer_state_init(&ps);
    struct th_batch_spec s = {.count = 1,
                              .ts0 = 5,
                              .ts_step = 1,
                              .value_bytes = 4,
                              .producer_id = 77,
                              .producer_epoch = 3,
                              .base_sequence = -1};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    const struct gr_producer_batch *dup;
    for (int64_t off = 0; off < 3; off++) {
        assert_int_equal(gr_producer_state_check(&ps, b, len, 0, &dup), GR_PRODUCER_ACCEPT);
        assert_null(dup);
        gr_batch_set_base_offset(b, off);
        assert_int_equal(gr_producer_state_reserve(&ps, 77), 0);
        assert_int_equal(gr_producer_state_update(&ps, b, len, NULL), 0);
    }
    s.producer_epoch = 2; /* an older epoch is still fenced */
    uint8_t *old = th_batch(&s, &len);
    assert_int_equal(gr_producer_state_check(&ps, old, len, 0, &dup), GR_PRODUCER_INVALID_EPOCH);
    free(old);
    free(b);
    gr_producer_state_free(&ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_producer_any_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates_of_last_five, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_answer_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epochs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sequence_wrap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forgotten_by_delete_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_clean_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_after_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebuild_from_snapshot_and_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_of_batch_not_yet_durable, setup, teardown),
        cmocka_unit_test(test_check_verdicts_direct),
        cmocka_unit_test(test_coordinator_batches_no_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
