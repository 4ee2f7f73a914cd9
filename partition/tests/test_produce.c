/*
 * test_produce.c: one partition's produce (gr_partition_produce, partition/produce.c) on a real log in a
 * temporary directory, no server and no event loop; the topic's typed policy is the store's default for a
 * new topic with the field under test changed.
 *
 * Covers the validation answers with exact Kafka error codes and values: a bad CRC (CORRUPT_MESSAGE, nothing
 * appended), a batch over max.message.bytes (MESSAGE_TOO_LARGE), a record timestamp out of the CreateTime
 * bounds (INVALID_TIMESTAMP with the refused record's index and LogValidator's message), null keys on a
 * compacted topic (INVALID_RECORD, every record listed, the summary as Java prints it), LogAppendTime
 * (the stored batch stamped with `now`, its CRC valid), recompression to the topic's codec, zstd before
 * Produce v7, an accepted append's offsets and an idempotent retry answered with the original's; acks=-1
 * on a leader of replicas {1,2,3} (gr_partition_set_role, followers' fetches played by the test):
 * NOT_ENOUGH_REPLICAS before the append under min ISR (acks 1 and 0 appended), the answer pending until the
 * high watermark passes the batch, an ISR shrink while waiting (pending; NOT_ENOUGH_REPLICAS_AFTER_APPEND
 * for a batch judged after it), a leader turned follower (NOT_LEADER_OR_FOLLOWER).
 * Read next: partition/partition.h (struct gr_produce_result).
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
#include "storage/tests/helpers.h"

#define NOW_MS 1700000000000LL

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    struct gr_log_config policy; /* the new topic's defaults; tests change one field */
    struct gr_arena arena;
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
    f->policy = *gr_topic_policy(t);
    struct gr_partitions_config pc = {f->store, false};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    gr_arena_init(&f->arena, 0);
    *state = f;
    return 0;
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

/* Produces `b` (`len` bytes, patched in place) at Produce v`version`. */
static int16_t produce(struct fx *f, uint8_t *b, size_t len, int16_t version, struct gr_produce_result *r)
{
    struct gr_produce_args args = {
        .records = b, .records_len = (int64_t)len, .api_version = version, .now_ms = NOW_MS};
    int16_t err = gr_partition_produce(f->part, &f->policy, &args, &f->arena, r);
    assert_int_equal(err, r->error_code);
    return err;
}

/* A batch of `count` records (null keys), timestamps ts0, ts0 + step, ... */
static uint8_t *batch(int32_t count, int64_t ts0, int64_t step, enum gr_codec codec, size_t *len)
{
    struct th_batch_spec s = {.count = count,
                              .ts0 = ts0,
                              .ts_step = step,
                              .tag = 7,
                              .value_bytes = 100,
                              .codec = codec,
                              .producer_id = -1,
                              .producer_epoch = -1,
                              .base_sequence = -1};
    return th_batch(&s, len);
}

/* The stored batch at `offset` (malloc'd, caller frees). */
static uint8_t *stored(struct fx *f, int64_t offset)
{
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, offset, 1 << 20, gr_log_end_offset(f->log), true, &s), 0);
    assert_true(s.bytes > 0);
    uint8_t *b = th_slice_bytes(&s);
    gr_log_slice_release(&s);
    return b;
}

/* Asserts a refusal that appended nothing and names no record. */
static void assert_plain_refusal(struct fx *f, const struct gr_produce_result *r, int16_t code, int64_t lso)
{
    assert_int_equal(r->error_code, code);
    assert_null(r->error_message);
    assert_int_equal(r->base_offset, -1);
    assert_int_equal(r->log_append_time_ms, -1);
    assert_int_equal(r->log_start_offset, lso);
    assert_int_equal(r->end_offset, -1);
    assert_int_equal(r->record_error_count, 0);
    assert_int_equal(gr_log_end_offset(f->log), 0);
}

/* ---- acks=-1 on a replicated leader (Partition.appendRecordsToLeader, DelayedProduce) ---- */

#define LAG_MS 30000

/* The owner's side for the replicated tests: brokers 1..3 registered at epoch 100 + id, a hand-moved clock,
   the partition epoch the last proposed ISR change was based on. */
struct owner {
    int64_t now;
    int proposals;
    int32_t partition_epoch;
};

static struct owner own;

static int64_t hook_broker_epoch(void *ctx, int32_t broker_id, bool *shutting_down)
{
    (void)ctx;
    *shutting_down = false;
    return broker_id >= 1 && broker_id <= 3 ? 100 + broker_id : -1;
}

static void hook_propose(void *ctx, struct gr_partition *part, const struct gr_partition_isr_change *c)
{
    (void)ctx;
    (void)part;
    own.proposals++;
    own.partition_epoch = c->partition_epoch;
}

static int64_t hook_now(void *ctx)
{
    (void)ctx;
    return own.now;
}

static int setup_replicated(void **state)
{
    setup(state);
    struct fx *f = *state;
    own = (struct owner){.now = 1000000};
    struct gr_partition_repl_config rc = {LAG_MS, hook_broker_epoch, hook_propose, hook_now, NULL, false};
    gr_partitions_set_replication(f->ps, &rc);
    return 0;
}

/* Gives this broker (id 1) `role` for replicas {1,2,3} with `isr` (n members) and min.insync.replicas. */
static void set_role(struct fx *f, enum gr_partition_role role, int32_t leader_epoch, const int32_t *isr,
                     int n, int min_isr)
{
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {
        role,   role == GR_PARTITION_LEADER ? 1 : 2, leader_epoch, leader_epoch, replicas, 3, isr, n, min_isr,
        own.now};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
}

/* A fetch of follower `id` at `offset` with its registered broker epoch, at the owner's clock. */
static void fetch(struct fx *f, int32_t id, int64_t offset)
{
    struct gr_follower_fetch ff = {id, 100 + id, offset, 0, own.now};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &ff), 0);
}

/* Produces `count` records with `acks` at Produce v9. */
static int16_t produce_acks(struct fx *f, int32_t count, int16_t acks, struct gr_produce_result *r)
{
    size_t len;
    uint8_t *b = batch(count, NOW_MS, 1, GR_CODEC_NONE, &len);
    struct gr_produce_args args = {
        .records = b, .records_len = (int64_t)len, .api_version = 9, .now_ms = NOW_MS, .acks = acks};
    int16_t err = gr_partition_produce(f->part, &f->policy, &args, &f->arena, r);
    free(b);
    assert_int_equal(err, r->error_code);
    return err;
}

struct counted {
    struct gr_partition_waiter w;
    int calls, err;
};

static void counted_done(struct gr_partition_waiter *w, int err)
{
    struct counted *c = (struct counted *)w;
    c->calls++;
    c->err = err;
}

/* Queues `w` until `end_offset` is committed. */
static void wait_committed(struct fx *f, struct counted *w, int64_t end_offset)
{
    *w = (struct counted){0};
    gr_partition_waiter_init(&w->w, counted_done, w);
    gr_partition_wait_committed(f->part, &w->w, end_offset);
}

/* gr_partition_produce_acked's answer for `end_offset`: 1 (pending) or 0 with *err. */
static int acked(struct fx *f, int64_t end_offset, int16_t *err)
{
    *err = -2;
    int rc = gr_partition_produce_acked(f->part, end_offset, err);
    if (rc) assert_int_equal(*err, GR_ERR_NONE);
    return rc;
}

static const int32_t ISR_ALL[] = {1, 2, 3};
static const int32_t ISR_12[] = {1, 2};
static const int32_t ISR_1[] = {1};

/* ISR {1} with min.insync.replicas 2: acks=-1 is refused before the append, acks 1 and 0 are appended. */
static void test_acks_all_not_enough_replicas(void **state)
{
    struct fx *f = *state;
    set_role(f, GR_PARTITION_LEADER, 1, ISR_1, 1, 2);
    struct gr_produce_result r;
    assert_int_equal(produce_acks(f, 4, -1, &r), GR_ERR_NOT_ENOUGH_REPLICAS);
    assert_null(r.error_message);
    assert_int_equal(r.base_offset, -1);
    assert_int_equal(r.end_offset, -1);
    assert_int_equal(r.log_start_offset, 0); /* Kafka's generic append failure: the log start offset */
    assert_int_equal(gr_log_end_offset(f->log), 0);
    assert_int_equal(produce_acks(f, 4, 1, &r), GR_ERR_NONE);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(r.end_offset, 4);
    assert_int_equal(produce_acks(f, 2, 0, &r), GR_ERR_NONE);
    assert_int_equal(r.base_offset, 4);
    assert_int_equal(gr_log_end_offset(f->log), 6);
    assert_int_equal(gr_partition_visible_offset(f->part), 0); /* under min ISR: the HW does not move */
}

/* ISR {1,2,3}: the acks=-1 answer waits until both followers' fetches moved the high watermark past it. */
static void test_acks_all_waits_for_high_watermark(void **state)
{
    struct fx *f = *state;
    set_role(f, GR_PARTITION_LEADER, 1, ISR_ALL, 3, 2);
    struct gr_produce_result r;
    assert_int_equal(produce_acks(f, 5, -1, &r), GR_ERR_NONE);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(r.end_offset, 5);
    int16_t err;
    assert_int_equal(acked(f, r.end_offset, &err), 1);
    struct counted w;
    wait_committed(f, &w, r.end_offset);
    fetch(f, 2, 5);
    assert_int_equal(w.calls, 0); /* 3 is in the ISR and has not fetched: it holds the HW */
    assert_int_equal(acked(f, r.end_offset, &err), 1);
    fetch(f, 3, 3);
    assert_int_equal(gr_partition_visible_offset(f->part), 3);
    assert_int_equal(w.calls, 0);
    assert_int_equal(acked(f, r.end_offset, &err), 1);
    fetch(f, 3, 5);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.err, 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    assert_int_equal(acked(f, r.end_offset, &err), 0);
    assert_int_equal(err, GR_ERR_NONE);
}

/* ISR {1,2} with min ISR 2: follower 2 falls behind and is removed while the second batch's answer waits.
   Under min ISR the high watermark stops (Kafka 4's maybeIncrementLeaderHW): the wait stays pending (the
   request's deadline answers REQUEST_TIMED_OUT); the first batch, which the high watermark had passed before
   the shrink, judged after it, is NOT_ENOUGH_REPLICAS_AFTER_APPEND (checkEnoughReplicasReachOffset: the
   maximal ISR below the effective min ISR). 2 catching up and re-admitted completes the wait. */
static void test_acks_all_isr_shrinks_while_waiting(void **state)
{
    struct fx *f = *state;
    set_role(f, GR_PARTITION_LEADER, 1, ISR_12, 2, 2);
    struct gr_produce_result first, second;
    assert_int_equal(produce_acks(f, 3, -1, &first), GR_ERR_NONE);
    fetch(f, 2, 3);
    assert_int_equal(gr_partition_visible_offset(f->part), 3); /* the first batch is committed */
    assert_int_equal(produce_acks(f, 4, -1, &second), GR_ERR_NONE);
    assert_int_equal(second.end_offset, 7);
    struct counted w;
    wait_committed(f, &w, second.end_offset);
    own.now += LAG_MS + 1;
    assert_int_equal(gr_partition_maybe_shrink_isr(f->part, own.now), 1); /* 2 is out of sync */
    int16_t err;
    assert_int_equal(acked(f, first.end_offset, &err), 0); /* being removed: 2 still counts */
    assert_int_equal(err, GR_ERR_NONE);
    assert_int_equal(gr_partition_isr_committed(f->part, 1, own.partition_epoch + 1, ISR_1, 1), 0);
    assert_int_equal(acked(f, second.end_offset, &err), 1);
    assert_int_equal(w.calls, 0);
    assert_int_equal(acked(f, first.end_offset, &err), 0);
    assert_int_equal(err, GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    /* 2 catches up: proposed for the ISR (the maximal ISR counts it), the HW waits for the commit */
    fetch(f, 2, 7);
    assert_int_equal(gr_partition_isr_inflight(f->part), true);
    assert_int_equal(w.calls, 0);
    assert_int_equal(gr_partition_isr_committed(f->part, 1, own.partition_epoch + 1, ISR_12, 2), 0);
    assert_int_equal(w.calls, 1);
    assert_int_equal(acked(f, second.end_offset, &err), 0);
    assert_int_equal(err, GR_ERR_NONE);
}

/* A leader turned follower: a waiting acks=-1 answer is NOT_LEADER_OR_FOLLOWER, and a new produce too. */
static void test_acks_all_leader_becomes_follower(void **state)
{
    struct fx *f = *state;
    set_role(f, GR_PARTITION_LEADER, 1, ISR_ALL, 3, 2);
    struct gr_produce_result r;
    assert_int_equal(produce_acks(f, 2, -1, &r), GR_ERR_NONE);
    int16_t err;
    assert_int_equal(acked(f, r.end_offset, &err), 1);
    set_role(f, GR_PARTITION_FOLLOWER, 2, ISR_ALL, 3, 2);
    assert_int_equal(acked(f, r.end_offset, &err), 0);
    assert_int_equal(err, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(produce_acks(f, 2, 1, &r), GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(r.log_start_offset, -1);
    assert_int_equal(gr_log_end_offset(f->log), 2);
}

/* Without replication (no role given) the answer is the visible offset's, as before. */
static void test_acks_all_unreplicated(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    assert_int_equal(produce_acks(f, 3, -1, &r), GR_ERR_NONE);
    int16_t err;
    assert_int_equal(acked(f, r.end_offset, &err), 0); /* visible = log end offset (no fsync mode) */
    assert_int_equal(err, GR_ERR_NONE);
    assert_int_equal(acked(f, r.end_offset + 1, &err), 1);
}

static void test_accepted_append(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    uint8_t *b = batch(3, NOW_MS - 10, 1, GR_CODEC_NONE, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    assert_null(r.error_message);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(r.end_offset, 3);
    assert_int_equal(r.log_append_time_ms, -1); /* CreateTime */
    assert_int_equal(r.log_start_offset, 0);
    assert_false(r.duplicate);
    free(b);
    b = batch(2, NOW_MS, 1, GR_CODEC_NONE, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    assert_int_equal(r.base_offset, 3);
    assert_int_equal(r.end_offset, 5);
    assert_int_equal(gr_log_end_offset(f->log), 5);
    free(b);
}

static void test_bad_crc(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    uint8_t *b = batch(2, NOW_MS, 1, GR_CODEC_NONE, &len);
    b[len - 1] ^= 0x5a;                             /* a record byte: the CRC-32C no longer matches */
    assert_int_equal(produce(f, b, len, 9, &r), 2); /* CORRUPT_MESSAGE */
    assert_plain_refusal(f, &r, 2, -1);             /* met before the log: log_start_offset -1 */
    free(b);
}

static void test_too_large(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    uint8_t *b = batch(2, NOW_MS, 1, GR_CODEC_NONE, &len);
    f->policy.max_message_bytes = (int32_t)len - 1;
    assert_int_equal(produce(f, b, len, 9, &r), 10); /* MESSAGE_TOO_LARGE */
    assert_plain_refusal(f, &r, 10, -1);
    f->policy.max_message_bytes = (int32_t)len; /* exactly the limit: taken */
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    assert_int_equal(r.end_offset, 2);
    free(b);
}

static void test_timestamp_out_of_bounds(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    f->policy.log_append_time = false;
    f->policy.message_timestamp_before_max_ms = 1000;
    f->policy.message_timestamp_after_max_ms = 1000;
    /* NOW-500 and NOW+500 are within [NOW-1000, NOW+1000]; NOW+1500 is not: the record at index 2 */
    uint8_t *b = batch(3, NOW_MS - 500, 1000, GR_CODEC_NONE, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 32); /* INVALID_TIMESTAMP */
    assert_string_equal(r.error_message, "One or more records have been rejected due to invalid timestamp");
    assert_int_equal(r.base_offset, -1);
    assert_int_equal(r.end_offset, -1);
    assert_int_equal(r.log_start_offset, 0); /* a refusal met in the log names the log start offset */
    assert_int_equal(r.record_error_count, 1);
    assert_int_equal(r.record_errors[0].batch_index, 2);
    assert_string_equal(
        r.record_errors[0].message,
        "Timestamp 1700000001500 of message with offset 2 is out of range. The timestamp should "
        "be within [1699999999000, 1700000001000]");
    assert_int_equal(gr_log_end_offset(f->log), 0);
    free(b);
}

static void test_null_keys_on_compacted_topic(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    f->policy.compact_policy = true;
    uint8_t *b = batch(2, NOW_MS, 1, GR_CODEC_NONE, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 87); /* INVALID_RECORD */
    const char *key = "Compacted topic cannot accept message without key in topic partition p-0";
    assert_int_equal(r.record_error_count, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r.record_errors[i].batch_index, i);
        assert_string_equal(r.record_errors[i].message, key);
    }
    assert_string_equal(
        r.error_message,
        "One or more records have been rejected due to 2 record errors in total, and only showing "
        "the first three errors at most: [RecordError(batchIndex=0, message='Compacted topic "
        "cannot accept message without key in topic partition p-0'), RecordError(batchIndex=1, "
        "message='Compacted topic cannot accept message without key in topic partition p-0')]");
    assert_int_equal(r.log_start_offset, 0);
    assert_int_equal(gr_log_end_offset(f->log), 0);
    free(b);
}

static void test_log_append_time(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    f->policy.log_append_time = true;
    uint8_t *b = batch(2, 1000, 1, GR_CODEC_NONE, &len); /* far out of any CreateTime bound: not checked */
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(r.log_append_time_ms, NOW_MS);
    free(b);
    uint8_t *s = stored(f, 0);
    assert_true(gr_batch_attributes(s) & GR_BATCH_ATTR_LOG_APPEND_TIME);
    assert_int_equal(gr_batch_max_timestamp(s), NOW_MS);
    struct gr_batch_info info;
    const char *why = NULL;
    assert_int_equal(gr_batch_validate(s, (size_t)gr_batch_total_bytes(s), &info, &why), 0); /* CRC */
    free(s);
}

static void test_recompression(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    f->policy.compression_type = GR_COMPRESSION_ZSTD;
    uint8_t *b = batch(4, NOW_MS, 1, GR_CODEC_GZIP, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(r.end_offset, 4);
    free(b);
    uint8_t *s = stored(f, 0);
    assert_int_equal(gr_batch_attributes(s) & GR_BATCH_ATTR_CODEC_MASK, GR_CODEC_ZSTD);
    assert_int_equal(gr_batch_record_count(s), 4);
    assert_int_equal(gr_batch_max_timestamp(s), NOW_MS + 3);
    struct gr_batch_info info;
    const char *why = NULL;
    assert_int_equal(gr_batch_validate(s, (size_t)gr_batch_total_bytes(s), &info, &why), 0);
    assert_int_equal(info.codec, GR_CODEC_ZSTD);
    free(s);
    /* compression.type=producer keeps the producer's codec */
    f->policy.compression_type = GR_COMPRESSION_PRODUCER;
    b = batch(1, NOW_MS, 1, GR_CODEC_LZ4, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    free(b);
    s = stored(f, 4);
    assert_int_equal(gr_batch_attributes(s) & GR_BATCH_ATTR_CODEC_MASK, GR_CODEC_LZ4);
    free(s);
}

static void test_zstd_before_v7(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    uint8_t *b = batch(1, NOW_MS, 1, GR_CODEC_ZSTD, &len);
    assert_int_equal(produce(f, b, len, 6, &r), 76); /* UNSUPPORTED_COMPRESSION_TYPE */
    assert_plain_refusal(f, &r, 76, -1);
    assert_int_equal(produce(f, b, len, 7, &r), 0);
    free(b);
}

static void test_idempotent_retry(void **state)
{
    struct fx *f = *state;
    struct gr_produce_result r;
    size_t len;
    struct th_batch_spec s = {.count = 2,
                              .ts0 = NOW_MS,
                              .ts_step = 1,
                              .tag = 1,
                              .value_bytes = 10,
                              .producer_id = 42,
                              .producer_epoch = 0,
                              .base_sequence = 0};
    uint8_t *b = th_batch(&s, &len);
    uint8_t *again = malloc(len);
    memcpy(again, b, len);
    assert_int_equal(produce(f, b, len, 9, &r), 0);
    assert_int_equal(r.base_offset, 0);
    assert_false(r.duplicate);
    assert_int_equal(produce(f, again, len, 9, &r), 0); /* the same batch again: the original's offsets */
    assert_true(r.duplicate);
    assert_int_equal(r.base_offset, 0);
    assert_int_equal(r.end_offset, 2);
    assert_int_equal(gr_log_end_offset(f->log), 2);
    free(again);
    free(b);
    s.base_sequence = 5; /* a gap: out of order, met in the log */
    b = th_batch(&s, &len);
    assert_int_equal(produce(f, b, len, 9, &r), 45); /* OUT_OF_ORDER_SEQUENCE_NUMBER */
    assert_null(r.error_message);
    assert_int_equal(r.base_offset, -1);
    assert_int_equal(r.log_start_offset, 0);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accepted_append, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_crc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timestamp_out_of_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_keys_on_compacted_topic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_append_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recompression, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zstd_before_v7, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotent_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acks_all_not_enough_replicas, setup_replicated, teardown),
        cmocka_unit_test_setup_teardown(test_acks_all_waits_for_high_watermark, setup_replicated, teardown),
        cmocka_unit_test_setup_teardown(test_acks_all_isr_shrinks_while_waiting, setup_replicated, teardown),
        cmocka_unit_test_setup_teardown(test_acks_all_leader_becomes_follower, setup_replicated, teardown),
        cmocka_unit_test_setup_teardown(test_acks_all_unreplicated, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
