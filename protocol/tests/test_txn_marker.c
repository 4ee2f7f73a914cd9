/*
 * test_txn_marker.c: the end-transaction marker (protocol/txn_marker.h): key and value bytes, Kafka's
 * reading rules (a negative version refused, a higher one read as version 0, trailing bytes ignored, other
 * control types not a marker), every short or null key and value refused, and the record and whole control
 * batch byte for byte against what Kafka's own classes write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/record_batch.h"
#include "protocol/txn_marker.h"

/* What Kafka writes, captured 2026-12-03 with kafka-clients 4.4.0 (the oracle's classpath,
 * protocol/oracle/target/classpath.txt) by a one-off Java main printing in hex the buffer of
 * org.apache.kafka.common.record.internal.MemoryRecords.withEndTransactionMarker(0L, 1000L, 0, 42L,
 * (short) 3, new EndTransactionMarker(ControlRecordType.COMMIT, 7)): base offset 0, timestamp 1000,
 * leader epoch 0, producer id 42, epoch 3, coordinator epoch 7. */
static const char kafka_commit_hex[] =
    "0000000000000000000000420000000002dbc3b9ad00300000000000000000000003e800000000000003"
    "e8000000000000002a0003ffffffff000000012000000008000000010c00000000000700";
/* the same with ABORT */
static const char kafka_abort_hex[] =
    "00000000000000000000004200000000022ffd6fe500300000000000000000000003e800000000000003"
    "e8000000000000002a0003ffffffff000000012000000008000000000c00000000000700";

static void unhex(const char *hex, uint8_t *out, size_t n)
{
    assert_int_equal(strlen(hex), 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void test_key_bytes(void **state)
{
    (void)state;
    uint8_t k[GR_TXN_MARKER_KEY_BYTES];
    gr_txn_marker_key_encode(k, GR_CONTROL_ABORT);
    static const uint8_t abort_key[] = {0, 0, 0, 0};
    assert_memory_equal(k, abort_key, 4);
    gr_txn_marker_key_encode(k, GR_CONTROL_COMMIT);
    static const uint8_t commit_key[] = {0, 0, 0, 1};
    assert_memory_equal(k, commit_key, 4);
    enum gr_control_type t = GR_CONTROL_UNKNOWN;
    assert_int_equal(gr_txn_marker_key_decode(k, 4, &t), 0);
    assert_int_equal(t, GR_CONTROL_COMMIT);
    /* KRaft's types are control types but not markers; ids Kafka does not define are UNKNOWN */
    static const uint8_t leader_change[] = {0, 0, 0, 2};
    assert_int_equal(gr_txn_marker_key_decode(leader_change, 4, &t), 0);
    assert_int_equal(t, GR_CONTROL_LEADER_CHANGE);
    static const uint8_t voters[] = {0, 0, 0, 6};
    assert_int_equal(gr_txn_marker_key_decode(voters, 4, &t), 0);
    assert_int_equal(t, GR_CONTROL_KRAFT_VOTERS);
    static const uint8_t seven[] = {0, 0, 0, 7};
    assert_int_equal(gr_txn_marker_key_decode(seven, 4, &t), 0);
    assert_int_equal(t, GR_CONTROL_UNKNOWN);
    static const uint8_t negative_type[] = {0, 0, 0xff, 0xfe};
    assert_int_equal(gr_txn_marker_key_decode(negative_type, 4, &t), 0);
    assert_int_equal(t, GR_CONTROL_UNKNOWN);
}

static void test_key_versions_and_lengths(void **state)
{
    (void)state;
    enum gr_control_type t = GR_CONTROL_UNKNOWN;
    /* a version above 0 is read as version 0 (ControlRecordType.parseTypeId logs and goes on) */
    static const uint8_t v5[] = {0, 5, 0, 1};
    assert_int_equal(gr_txn_marker_key_decode(v5, 4, &t), 0);
    assert_int_equal(t, GR_CONTROL_COMMIT);
    /* a negative version is corruption */
    static const uint8_t vneg[] = {0xff, 0xff, 0, 1};
    assert_int_equal(gr_txn_marker_key_decode(vneg, 4, &t), GR_TXN_MARKER_BAD_KEY_VERSION);
    static const uint8_t vmin[] = {0x80, 0x00, 0, 0};
    assert_int_equal(gr_txn_marker_key_decode(vmin, 4, &t), GR_TXN_MARKER_BAD_KEY_VERSION);
    /* bytes after the first four are ignored */
    static const uint8_t longer[] = {0, 0, 0, 0, 9, 9, 9};
    t = GR_CONTROL_UNKNOWN;
    assert_int_equal(gr_txn_marker_key_decode(longer, sizeof longer, &t), 0);
    assert_int_equal(t, GR_CONTROL_ABORT);
    /* every length under 4, null (-1, or a NULL pointer) and a negative length */
    for (int32_t len = -1; len < 4; len++)
        assert_int_equal(gr_txn_marker_key_decode(v5, len, &t), GR_TXN_MARKER_SHORT_KEY);
    assert_int_equal(gr_txn_marker_key_decode(NULL, 4, &t), GR_TXN_MARKER_SHORT_KEY);
    assert_int_equal(gr_txn_marker_key_decode(v5, INT32_MIN, &t), GR_TXN_MARKER_SHORT_KEY);
}

static void test_value_bytes_and_rules(void **state)
{
    (void)state;
    uint8_t v[GR_TXN_MARKER_VALUE_BYTES];
    gr_txn_marker_value_encode(v, 0x01020304);
    static const uint8_t want[] = {0, 0, 1, 2, 3, 4};
    assert_memory_equal(v, want, 6);
    int32_t epoch = 0;
    assert_int_equal(gr_txn_marker_value_decode(v, 6, &epoch), 0);
    assert_int_equal(epoch, 0x01020304);
    const int32_t extremes[] = {INT32_MIN, -1, 0, INT32_MAX};
    for (size_t i = 0; i < 4; i++) {
        gr_txn_marker_value_encode(v, extremes[i]);
        assert_int_equal(gr_txn_marker_value_decode(v, 6, &epoch), 0);
        assert_int_equal(epoch, extremes[i]);
    }
    /* a version above 0 is read as version 0, trailing bytes ignored */
    static const uint8_t v3[] = {0, 3, 0, 0, 0, 9, 0xaa, 0xbb};
    assert_int_equal(gr_txn_marker_value_decode(v3, sizeof v3, &epoch), 0);
    assert_int_equal(epoch, 9);
    /* negative version refused */
    static const uint8_t vneg[] = {0xff, 0xfe, 0, 0, 0, 9};
    assert_int_equal(gr_txn_marker_value_decode(vneg, 6, &epoch), GR_TXN_MARKER_BAD_VALUE_VERSION);
    /* every length under 6, null, negative */
    for (int32_t len = -1; len < 6; len++)
        assert_int_equal(gr_txn_marker_value_decode(want, len, &epoch), GR_TXN_MARKER_SHORT_VALUE);
    assert_int_equal(gr_txn_marker_value_decode(NULL, 6, &epoch), GR_TXN_MARKER_SHORT_VALUE);
    assert_int_equal(gr_txn_marker_value_decode(want, INT32_MIN, &epoch), GR_TXN_MARKER_SHORT_VALUE);
}

static void test_marker_decode(void **state)
{
    (void)state;
    uint8_t k[4], v[6];
    struct gr_txn_marker m = {false, 0};
    gr_txn_marker_key_encode(k, GR_CONTROL_COMMIT);
    gr_txn_marker_value_encode(v, 12);
    assert_int_equal(gr_txn_marker_decode(k, 4, v, 6, &m), 0);
    assert_true(m.commit);
    assert_int_equal(m.coordinator_epoch, 12);
    gr_txn_marker_key_encode(k, GR_CONTROL_ABORT);
    assert_int_equal(gr_txn_marker_decode(k, 4, v, 6, &m), 0);
    assert_false(m.commit);
    /* a control record that is not a marker (KRaft's, or an unknown type) */
    gr_txn_marker_key_encode(k, GR_CONTROL_SNAPSHOT_HEADER);
    assert_int_equal(gr_txn_marker_decode(k, 4, v, 6, &m), GR_TXN_MARKER_NOT_END_TXN);
    static const uint8_t unknown[] = {0, 0, 0x7f, 0xff};
    assert_int_equal(gr_txn_marker_decode(unknown, 4, v, 6, &m), GR_TXN_MARKER_NOT_END_TXN);
    /* the key is checked first, then the type, then the value */
    static const uint8_t bad_key[] = {0xff, 0xff, 0, 1};
    assert_int_equal(gr_txn_marker_decode(bad_key, 4, v, 3, &m), GR_TXN_MARKER_BAD_KEY_VERSION);
    assert_int_equal(gr_txn_marker_decode(k, 4, v, 3, &m), GR_TXN_MARKER_NOT_END_TXN);
    gr_txn_marker_key_encode(k, GR_CONTROL_COMMIT);
    assert_int_equal(gr_txn_marker_decode(k, 4, v, 5, &m), GR_TXN_MARKER_SHORT_VALUE);
    assert_int_equal(gr_txn_marker_decode(k, 4, NULL, -1, &m), GR_TXN_MARKER_SHORT_VALUE);
    assert_int_equal(gr_txn_marker_decode(NULL, -1, v, 6, &m), GR_TXN_MARKER_SHORT_KEY);
}

static void test_record_and_batch_match_kafka(void **state)
{
    (void)state;
    uint8_t kafka[GR_TXN_MARKER_BATCH_BYTES], ours[GR_TXN_MARKER_BATCH_BYTES];
    const struct {
        const char *hex;
        bool commit;
    } cases[] = {{kafka_commit_hex, true}, {kafka_abort_hex, false}};
    for (size_t i = 0; i < 2; i++) {
        unhex(cases[i].hex, kafka, sizeof kafka);
        struct gr_txn_marker m = {cases[i].commit, 7};
        uint8_t rec[GR_TXN_MARKER_RECORD_BYTES];
        gr_txn_marker_record_encode(rec, &m);
        assert_memory_equal(rec, kafka + GR_BATCH_HEADER_BYTES, sizeof rec);
        memset(ours, 0xee, sizeof ours);
        gr_txn_marker_batch_encode(ours, 0, 0, 1000, 42, 3, &m);
        assert_memory_equal(ours, kafka, sizeof ours);
        /* the record's key and value read back */
        struct gr_txn_marker back = {!cases[i].commit, 0};
        assert_int_equal(gr_txn_marker_decode(rec + 5, rec[4] / 2, rec + 10, rec[9] / 2, &back), 0);
        assert_int_equal(back.commit, cases[i].commit);
        assert_int_equal(back.coordinator_epoch, 7);
        /* Gregor's batch validator accepts it as stored data, refuses it from a producer (control batch) */
        struct gr_batch_info info;
        assert_int_equal(gr_batch_validate_ex(ours, sizeof ours, 0, &info, NULL), 0);
        assert_int_equal(gr_batch_validate_ex(ours, sizeof ours, GR_BATCH_CHECK_CLIENT, &info, NULL),
                         GR_BATCH_ERR_CONTROL);
    }
    /* base offset and leader epoch are outside the CRC: a different value changes nothing else */
    struct gr_txn_marker m = {true, -5};
    uint8_t a[GR_TXN_MARKER_BATCH_BYTES], b[GR_TXN_MARKER_BATCH_BYTES];
    gr_txn_marker_batch_encode(a, 0, 0, -1, 7, 0, &m);
    gr_txn_marker_batch_encode(b, 123456789012LL, 99, -1, 7, 0, &m);
    assert_memory_equal(a + GR_BATCH_OFF_MAGIC, b + GR_BATCH_OFF_MAGIC, sizeof a - GR_BATCH_OFF_MAGIC);
    assert_int_equal(gr_batch_base_offset(b), 123456789012LL);
    assert_int_equal(gr_batch_leader_epoch(b), 99);
    assert_int_equal(gr_batch_validate_ex(b, sizeof b, 0, NULL, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_bytes),
        cmocka_unit_test(test_key_versions_and_lengths),
        cmocka_unit_test(test_value_bytes_and_rules),
        cmocka_unit_test(test_marker_decode),
        cmocka_unit_test(test_record_and_batch_match_kafka),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
