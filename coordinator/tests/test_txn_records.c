/*
 * test_txn_records.c: __transaction_state keys and values against bytes made by Kafka's own generated
 * classes (kafka-transaction-coordinator 4.4.0 TransactionLogKey / TransactionLogValue with
 * MessageUtil.toCoordinatorTypePrefixedBytes / toVersionPrefixedBytes, run with kafka-clients 4.4.0 from a
 * small Java program; the values each vector was made from are in its comment), the transactional id ->
 * partition hash against Java's String.hashCode, and one test per malformed shape.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/txn_records.h"

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

static void assert_bytes_hex(const uint8_t *p, size_t len, const char *hex)
{
    uint8_t want[1024];
    size_t n = unhex(hex, want);
    assert_int_equal(len, n);
    assert_memory_equal(p, want, n);
}

/* Ongoing {pid 1000, epoch 2, timeout 60000, t:[0,3], __consumer_offsets:[7], last 1700000000000,
 * start 1699999999000}; Empty {pid 1000, epoch 0, partitions null, start -1}. */
#define ONGOING_V1                                                                                           \
    "000100000000000003e800020000ea600103027403000000000000000300135f5f636f6e73756d65725f6f6666736574730200" \
    "000007000000018bcfe568000000018bcfe5641800"
#define ONGOING_V0                                                                                           \
    "000000000000000003e800020000ea60010000000200017400000002000000000000000300125f5f636f6e73756d65725f6f66" \
    "667365747300000001000000070000018bcfe568000000018bcfe56418"
#define EMPTY_V1 "000100000000000003e800000000ea6000000000018bcfe56800ffffffffffffffff00"
#define EMPTY_V0 "000000000000000003e800000000ea6000ffffffff0000018bcfe56800ffffffffffffffff"
/* CompleteCommit {pid 5, previous 4, next 6, epoch 0, timeout 1000, partitions [], last 10, start 9,
 * clientTransactionVersion 2}: every tagged field present. */
#define TAGGED_V1                                                                                            \
    "000100000000000000050000000003e80401000000000000000a00000000000000090300080000000000000004010800000000" \
    "0000000602020002"

static const int32_t t_parts[] = {0, 3}, co_parts[] = {7};
static const struct gr_txn_topic_parts ongoing_topics[] = {{{"t", 1}, t_parts, 2},
                                                           {{"__consumer_offsets", 18}, co_parts, 1}};

static struct gr_txn_log_value ongoing_value(void)
{
    return (struct gr_txn_log_value){
        1000, -1, -1, 2, 60000, GR_TXN_ONGOING, ongoing_topics, 2, 1700000000000LL, 1699999999000LL, 0};
}
static struct gr_txn_log_value empty_value(void)
{
    return (struct gr_txn_log_value){1000, -1, -1, 0, 60000, GR_TXN_EMPTY, NULL, -1, 1700000000000LL, -1, 0};
}

static void test_encode_matches_kafka(void **state)
{
    (void)state;
    struct gr_coord_record rec;
    struct gr_txn_log_value v = ongoing_value();
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 1), 0);
    assert_bytes_hex(rec.key, rec.key_len, "0000000374786e");
    assert_bytes_hex(rec.value, rec.value_len, ONGOING_V1);
    gr_coord_records_free(&rec, 1);
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 0), 0);
    assert_bytes_hex(rec.value, rec.value_len, ONGOING_V0);
    gr_coord_records_free(&rec, 1);
    v = empty_value();
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 1), 0);
    assert_bytes_hex(rec.value, rec.value_len, EMPTY_V1);
    gr_coord_records_free(&rec, 1);
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 0), 0);
    assert_bytes_hex(rec.value, rec.value_len, EMPTY_V0);
    gr_coord_records_free(&rec, 1);
    struct gr_txn_log_value t = {5, 4, 6, 0, 1000, GR_TXN_COMPLETE_COMMIT, NULL, 0, 10, 9, 2};
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &t, 1), 0);
    assert_bytes_hex(rec.value, rec.value_len, TAGGED_V1);
    gr_coord_records_free(&rec, 1);
    /* tombstone: the key alone */
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), NULL, 1), 0);
    assert_bytes_hex(rec.key, rec.key_len, "0000000374786e");
    assert_null(rec.value);
    assert_int_equal(rec.value_len, 0);
    gr_coord_records_free(&rec, 1);
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 2), -EINVAL);
}

static void check_ongoing(const struct gr_txn_log_value *d)
{
    assert_int_equal(d->producer_id, 1000);
    assert_int_equal(d->producer_epoch, 2);
    assert_int_equal(d->timeout_ms, 60000);
    assert_int_equal(d->state, GR_TXN_ONGOING);
    assert_int_equal(d->topic_count, 2);
    assert_true(gr_str_eq_c(d->topics[0].topic, "t"));
    assert_int_equal(d->topics[0].count, 2);
    assert_int_equal(d->topics[0].partitions[1], 3);
    assert_true(gr_str_eq_c(d->topics[1].topic, "__consumer_offsets"));
    assert_int_equal(d->topics[1].partitions[0], 7);
    assert_int_equal(d->last_update_ms, 1700000000000LL);
    assert_int_equal(d->start_ms, 1699999999000LL);
    assert_int_equal(d->previous_producer_id, -1);
    assert_int_equal(d->next_producer_id, -1);
    assert_int_equal(d->client_transaction_version, 0);
}

static void test_decode_kafka_bytes(void **state)
{
    (void)state;
    uint8_t b[512];
    struct gr_arena arena;
    gr_arena_init(&arena, 1 << 16);
    struct gr_txn_log_value d;
    size_t n = unhex(ONGOING_V1, b);
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 0);
    check_ongoing(&d);
    n = unhex(ONGOING_V0, b);
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 0);
    check_ongoing(&d);
    const char *empties[] = {EMPTY_V1, EMPTY_V0};
    for (int i = 0; i < 2; i++) {
        n = unhex(empties[i], b);
        assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 0);
        assert_int_equal(d.state, GR_TXN_EMPTY);
        assert_int_equal(d.topic_count, -1);
        assert_int_equal(d.start_ms, -1);
    }
    n = unhex(TAGGED_V1, b);
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 0);
    assert_int_equal(d.previous_producer_id, 4);
    assert_int_equal(d.next_producer_id, 6);
    assert_int_equal(d.client_transaction_version, 2);
    assert_int_equal(d.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(d.topic_count, 0);
    struct gr_str id;
    n = unhex("0000000374786e", b);
    assert_int_equal(gr_txn_log_key_decode(b, n, &id), 0);
    assert_true(gr_str_eq_c(id, "txn"));
    gr_arena_reset(&arena);
}

/* Every prefix of a value is refused (no read past the end, no crash); unknown versions are told apart. */
static void test_malformed(void **state)
{
    (void)state;
    uint8_t b[512];
    struct gr_arena arena;
    gr_arena_init(&arena, 1 << 16);
    struct gr_txn_log_value d;
    const char *vals[] = {ONGOING_V1, ONGOING_V0, EMPTY_V1, TAGGED_V1};
    for (int i = 0; i < 4; i++) {
        size_t n = unhex(vals[i], b);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(gr_txn_log_value_decode(b, k, &arena, &d), -1);
    }
    size_t n = unhex(ONGOING_V1, b);
    b[1] = 2; /* version 2: unknown (Kafka's UnknownValueVersion) */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 1);
    b[0] = 0xff; /* negative version */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 1);
    n = unhex(ONGOING_V1, b);
    b[16] = 8; /* state 8: no such TransactionState */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    b[16] = 0xff; /* state -1 */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    n = unhex(ONGOING_V1, b);
    b[17] = 0x7f; /* 126 topics in a few bytes */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    n = unhex(ONGOING_V0, b);
    memcpy(b + 17, "\x7f\xff\xff\xff", 4); /* v0: 2^31-1 topics */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    memcpy(b + 17, "\xff\xff\xff\xfe", 4); /* v0: count -2 */
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    /* a known tag with the wrong size: tag 2 (ClientTransactionVersion) of 3 bytes */
    n = unhex("000100000000000003e800000000ea6000000000018bcfe56800ffffffffffffffff0102030000ff", b);
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    /* an unknown tag (9) is skipped */
    n = unhex("000100000000000003e800000000ea6000000000018bcfe56800ffffffffffffffff010902abcd", b);
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), 0);
    /* a tag whose size runs past the end */
    n = unhex("000100000000000003e800000000ea6000000000018bcfe56800ffffffffffffffff010905abcd", b);
    assert_int_equal(gr_txn_log_value_decode(b, n, &arena, &d), -1);
    /* keys: short, truncated string, other record type */
    struct gr_str id;
    n = unhex("0000000374786e", b);
    for (size_t k = 0; k < n; k++)
        assert_int_equal(gr_txn_log_key_decode(b, k, &id), -1);
    n = unhex("0001000374786e", b);
    assert_int_equal(gr_txn_log_key_decode(b, n, &id), 1);
    n = unhex("0000ffff", b); /* a null id */
    assert_int_equal(gr_txn_log_key_decode(b, n, &id), -1);
    gr_arena_reset(&arena);
}

/* Values from Java: Utils.abs("...".hashCode()) % 50. */
static void test_partition_for(void **state)
{
    (void)state;
    assert_int_equal(gr_txn_partition_for(gr_str_c("txn"), 50), 6);
    assert_int_equal(gr_txn_partition_for(gr_str_c("my-transactional-id"), 50), 46);
    assert_int_equal(gr_txn_partition_for(gr_str_c("a"), 50), 47);
    assert_int_equal(gr_txn_partition_for(gr_str_c("polygenelubricants"), 50), 0); /* hash INT32_MIN */
    assert_int_equal(gr_txn_partition_for(gr_str_c("\xc3\xa9t\xc3\xa9-\xf0\x9f\x98\x80"), 50), 26);
    assert_string_equal(gr_txn_state_name(GR_TXN_PREPARE_EPOCH_FENCE), "PrepareEpochFence");
    assert_string_equal(gr_txn_state_name(GR_TXN_COMPLETE_ABORT), "CompleteAbort");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_matches_kafka),
        cmocka_unit_test(test_decode_kafka_bytes),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_partition_for),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
