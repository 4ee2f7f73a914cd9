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
 * Produce v7, an accepted append's offsets and an idempotent retry answered with the original's.
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
