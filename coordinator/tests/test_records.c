/*
 * test_records.c: __consumer_offsets keys/values against bytes produced by Kafka's own generated classes
 * (kafka-group-coordinator 4.1.1, MessageUtil.toVersionPrefixedByteBuffer; the generator is described in
 * the comment of each vector), the group -> partition hash against Java's String.hashCode, and the
 * consumer-protocol subscription parse against ConsumerProtocol.serializeSubscription v3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/records.h"

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

/* OffsetCommitKey v1 {grp, topic, 3}; OffsetCommitValue v3 {42, 5, "md", 1700000000000}; v1 with expire */
static void test_offset_commit_encode(void **state)
{
    (void)state;
    struct gr_coord_record rec;
    struct gr_offset_commit_value v = {42, 5, gr_str_c("md"), 1700000000000LL, -1};
    assert_int_equal(gr_offset_commit_record(&rec, "grp", "topic", 3, &v), 0);
    assert_bytes_hex(rec.key, rec.key_len, "000100036772700005746f70696300000003");
    assert_bytes_hex(rec.value, rec.value_len, "0003000000000000002a0000000500026d640000018bcfe56800");
    gr_coord_records_free(&rec, 1);
    struct gr_offset_commit_value v1 = {42, -1, gr_str_c(""), 1000, 2000};
    assert_int_equal(gr_offset_commit_record(&rec, "grp", "topic", 3, &v1), 0);
    assert_bytes_hex(rec.value, rec.value_len, "0001000000000000002a000000000000000003e800000000000007d0");
    gr_coord_records_free(&rec, 1);
    assert_int_equal(gr_offset_commit_record(&rec, "grp", "topic", 3, NULL), 0);
    assert_null(rec.value);
    gr_coord_records_free(&rec, 1);
}

static void test_offset_commit_decode(void **state)
{
    (void)state;
    uint8_t b[256];
    size_t n = unhex("000100036772700005746f70696300000003", b);
    struct gr_offset_commit_key ok;
    struct gr_str g;
    assert_int_equal(gr_coord_key_decode(b, n, &ok, &g), GR_COORD_KEY_OFFSET_COMMIT);
    assert_int_equal(ok.group.len, 3);
    assert_memory_equal(ok.group.ptr, "grp", 3);
    assert_memory_equal(ok.topic.ptr, "topic", 5);
    assert_int_equal(ok.partition, 3);
    struct gr_offset_commit_value v;
    const char *vals[] = {"0003000000000000002a0000000500026d640000018bcfe56800",
                          "0004000000000000002a00000005036d640000018bcfe5680000"}; /* v3, v4 (flexible) */
    for (int i = 0; i < 2; i++) {
        n = unhex(vals[i], b);
        assert_int_equal(gr_offset_commit_value_decode(b, n, &v), 0);
        assert_int_equal(v.offset, 42);
        assert_int_equal(v.leader_epoch, 5);
        assert_int_equal(v.metadata.len, 2);
        assert_int_equal(v.commit_timestamp_ms, 1700000000000LL);
        assert_int_equal(v.expire_timestamp_ms, -1);
        assert_int_equal(gr_offset_commit_value_decode(b, n - 1, &v), -1); /* truncated */
    }
    n = unhex("0001000000000000002a000000000000000003e800000000000007d0", b);
    assert_int_equal(gr_offset_commit_value_decode(b, n, &v), 0);
    assert_int_equal(v.leader_epoch, -1);
    assert_int_equal(v.expire_timestamp_ms, 2000);
    n = unhex("0009000000000000002a", b);
    assert_int_equal(gr_offset_commit_value_decode(b, n, &v), -1); /* unknown version */
    /* other key versions (KIP-848 records) are not ours */
    n = unhex("00030003677270", b);
    assert_int_equal(gr_coord_key_decode(b, n, &ok, &g), GR_COORD_KEY_UNKNOWN);
}

#define GVAL3                                                                                                \
    "00030008636f6e73756d657200000007000572616e676500036d2d3100000000000004d20000000200036d2d31000269310001" \
    "63000a2f31"                                                                                             \
    "32372e302e302e31000075300000271000000003000102000000010900036d2d32ffff0002633200022f68ffffffff00001770" \
    "000000000000"                                                                                           \
    "0000"

/* GroupMetadataValue {consumer, 7, range, m-1, 1234, [m-1/i1/c//127.0.0.1/30000/10000/000102/09,
 * m-2/null/c2//h/-1/6000/-/-]} */
static void test_group_metadata_encode(void **state)
{
    (void)state;
    struct gr_group_metadata_member ms[2] = {
        {gr_str_c("m-1"),
         gr_str_c("i1"),
         gr_str_c("c"),
         gr_str_c("/127.0.0.1"),
         30000,
         10000,
         {(const uint8_t *)"\x00\x01\x02", 3},
         {(const uint8_t *)"\x09", 1}},
        {gr_str_c("m-2"),
         GR_STR_NULL,
         gr_str_c("c2"),
         gr_str_c("/h"),
         -1,
         6000,
         {(const uint8_t *)"", 0},
         {(const uint8_t *)"", 0}},
    };
    struct gr_group_metadata_value v = {
        gr_str_c("consumer"), 7, gr_str_c("range"), gr_str_c("m-1"), 1234, ms, 2};
    struct gr_coord_record rec;
    assert_int_equal(gr_group_metadata_record(&rec, "grp", &v), 0);
    assert_bytes_hex(rec.key, rec.key_len, "00020003677270");
    assert_bytes_hex(rec.value, rec.value_len, GVAL3);
    gr_coord_records_free(&rec, 1);
    /* the empty group Kafka writes for a new group */
    struct gr_group_metadata_value e = {gr_str_c(""), 0, GR_STR_NULL, GR_STR_NULL, -1, NULL, 0};
    assert_int_equal(gr_group_metadata_record(&rec, "grp", &e), 0);
    assert_bytes_hex(rec.value, rec.value_len, "0003000000000000ffffffffffffffffffffffff00000000");
    gr_coord_records_free(&rec, 1);
}

static void test_group_metadata_decode(void **state)
{
    (void)state;
    const char *vals[] = {
        GVAL3,
        /* v4, flexible */
        "000409636f6e73756d6572000000070672616e6765046d2d3100000000000004d203046d2d3103693102630b2f3132372e30"
        "2e302e3100"
        "0075300000271004000102020900046d2d3200036332032f68ffffffff0000177001010000",
        /* v0: no instance id, no rebalance timeout, no state timestamp */
        "00000008636f6e73756d657200000007000572616e676500036d2d310000000200036d2d31000163000a2f3132372e302e30"
        "2e310000"
        "271000000003000102000000010900036d2d320002633200022f68000017700000000000000000",
    };
    uint8_t b[512];
    for (int i = 0; i < 3; i++) {
        size_t n = unhex(vals[i], b);
        struct gr_arena arena;
        gr_arena_init(&arena, 0);
        struct gr_group_metadata_value v;
        assert_int_equal(gr_group_metadata_value_decode(b, n, &arena, &v), 0);
        assert_int_equal(v.protocol_type.len, 8);
        assert_int_equal(v.generation, 7);
        assert_memory_equal(v.protocol.ptr, "range", 5);
        assert_memory_equal(v.leader.ptr, "m-1", 3);
        assert_int_equal(v.current_state_timestamp_ms, i == 2 ? -1 : 1234);
        assert_int_equal(v.member_count, 2);
        assert_memory_equal(v.members[0].member_id.ptr, "m-1", 3);
        if (i == 2)
            assert_int_equal(v.members[0].group_instance_id.len, -1);
        else
            assert_memory_equal(v.members[0].group_instance_id.ptr, "i1", 2);
        assert_int_equal(v.members[1].group_instance_id.len, -1);
        assert_memory_equal(v.members[0].client_host.ptr, "/127.0.0.1", 10);
        assert_int_equal(v.members[0].rebalance_timeout_ms, i == 2 ? -1 : 30000);
        assert_int_equal(v.members[0].session_timeout_ms, 10000);
        assert_int_equal(v.members[0].subscription.len, 3);
        assert_int_equal(v.members[0].assignment.len, 1);
        assert_int_equal(v.members[0].assignment.ptr[0], 9);
        assert_int_equal(v.members[1].session_timeout_ms, 6000);
        assert_int_equal(v.members[1].assignment.len, 0);
        gr_arena_reset(&arena);
        /* every truncation fails cleanly */
        for (size_t cut = 0; cut < n; cut++) {
            gr_arena_init(&arena, 0);
            assert_int_equal(gr_group_metadata_value_decode(b, cut, &arena, &v), -1);
            gr_arena_reset(&arena);
        }
    }
}

/* Java String.hashCode and Utils.abs(h) % 50, from the JDK. */
static void test_partition_hash(void **state)
{
    (void)state;
    struct {
        const char *hex;
        int32_t hash;
        int32_t part50;
        int32_t length;
    } v[] = {
        {"", 0, 0, 0},
        {"67", 103, 3, 1},
        {"6d792d67726f7570", -1906497762, 12, 8},
        {"636f6e736f6c652d636f6e73756d65722d3132333435", 158455506, 6, 22},
        {"6772c3bcc39f65", 98768023, 23, 5},        /* grüße */
        {"f09f9880656d6f6a69", -1233692477, 27, 7}, /* U+1F600 then "emoji": a surrogate pair */
        {"706f6c7967656e656c7562726963616e7473", INT32_MIN, 0, 18}, /* abs(MIN_VALUE) -> 0 */
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t b[64];
        size_t n = unhex(v[i].hex, b);
        struct gr_str s = {(const char *)b, (int32_t)n};
        assert_int_equal(gr_java_string_hash(s), v[i].hash);
        assert_int_equal(gr_coord_partition_for(s, 50), v[i].part50);
        assert_int_equal(gr_java_string_length(s), v[i].length);
    }
}

static void add_topic(void *ctx, struct gr_str topic)
{
    char *acc = ctx;
    strncat(acc, topic.ptr, (size_t)topic.len);
    strcat(acc, ",");
}

/* ConsumerProtocol.serializeSubscription v3 {[alpha, bb], userData 0102, owned alpha-1, gen 5, rack1}:
 * only the v0 prefix (the topics) is read. */
static void test_subscription_topics(void **state)
{
    (void)state;
    uint8_t b[256];
    size_t n = unhex("0003000000020005616c70686100026262000000020102000000010005616c7068610000000100000001000"
                     "0000500057261636b31",
                     b);
    char acc[64] = "";
    assert_int_equal(gr_consumer_subscription_topics((struct gr_bytes){b, (int32_t)n}, add_topic, acc), 0);
    assert_string_equal(acc, "alpha,bb,");
    acc[0] = 0;
    assert_int_equal(gr_consumer_subscription_topics((struct gr_bytes){b, 12}, add_topic, acc),
                     -1); /* cut in a name */
    assert_string_equal(acc, "");
    assert_int_equal(gr_consumer_subscription_topics((struct gr_bytes){b, 1}, add_topic, acc), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offset_commit_encode),  cmocka_unit_test(test_offset_commit_decode),
        cmocka_unit_test(test_group_metadata_encode), cmocka_unit_test(test_group_metadata_decode),
        cmocka_unit_test(test_partition_hash),        cmocka_unit_test(test_subscription_topics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
