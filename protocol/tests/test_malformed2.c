/*
 * test_malformed2.c: more malformed-input shapes, one small test each, completing test_wire.c (primitives)
 * and test_malformed.c (tags, array bound, arena ceiling) on the paths those do not reach: the request
 * header's own tag loop, nested structs, known tagged fields whose declared size disagrees with their
 * content, nulls before the version that allows them, compact 0 on non-nullable bytes and arrays, lengths
 * near INT32_MAX / UINT32_MAX, unknown API keys and versions outside the codec's ranges (which must equal
 * Kafka 4.4.0's validVersions). Batch-level shapes (bad CRC, wrong batch length, offset deltas out of
 * sequence, decompression bombs) are in test_record_batch.c. Inputs that the fuzzer (protocol/fuzz/)
 * found interesting are at the end. Every test asserts the exact gr_wire_err and that no arena memory was
 * taken for elements that cannot be there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/compress.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"

#define ARENA_BYTES (1 << 16)

/* Decodes `b` as the body of (api key, version) request or response with a fresh arena; returns the
 * gr_wire_err; *left (may be NULL) gets the bytes not consumed, *arena_used the arena bytes taken. */
static int decode_body(int16_t key, bool response, int16_t version, const uint8_t *b, size_t n, size_t *left,
                       size_t *arena_used)
{
    const struct gr_msg_ops *ops = gr_msg_ops_find(key, response);
    assert_non_null(ops);
    assert_in_range(version, ops->version_min, ops->version_max);
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    uint8_t msg[4096];
    assert_true(ops->struct_bytes <= sizeof msg);
    struct gr_rd rd;
    gr_rd_init(&rd, b, n, &a);
    int err = ops->decode(&rd, version, msg);
    if (left) *left = gr_rd_left(&rd);
    if (arena_used) *arena_used = a.used_bytes;
    gr_arena_reset(&a);
    return err;
}

static int decode_req(int16_t key, int16_t version, const uint8_t *b, size_t n)
{
    return decode_body(key, false, version, b, n, NULL, NULL);
}

/* ---- arrays ---- */

static void test_negative_array_count(void **state)
{
    (void)state;
    /* Produce v3: transactional id null, acks -1, timeout 30000, topic_data count ... */
    uint8_t b[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0};
    assert_int_equal(decode_req(0, 3, b, sizeof b), GR_WIRE_BAD_LENGTH); /* -2 */
    b[11] = 0xff;
    assert_int_equal(decode_req(0, 3, b, sizeof b), GR_WIRE_NULL); /* -1 on a non-nullable array */
    b[8] = 0x80, b[9] = 0, b[10] = 0, b[11] = 0;
    assert_int_equal(decode_req(0, 3, b, sizeof b), GR_WIRE_BAD_LENGTH); /* INT32_MIN */
}

static void test_oversized_compact_array_count(void **state)
{
    (void)state;
    /* Metadata v9: topics compact count uvarint 0xffffffff (count 2^32 - 2), then a few bytes */
    static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0, 0, 0};
    size_t used = 1;
    assert_int_equal(decode_body(3, false, 9, huge, sizeof huge, NULL, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);
    /* 100 topics claimed with 4 bytes left: each needs at least 2 (compact name + tags) */
    static const uint8_t many[] = {101, 1, 0, 1, 0};
    assert_int_equal(decode_body(3, false, 9, many, sizeof many, NULL, &used), GR_WIRE_BAD_LENGTH);
    assert_int_equal(used, 0);
    /* int32 array (Metadata v9 request has none; OffsetFetch v6 partition_indexes): 1000 ints in 8 bytes.
     * OffsetFetch v6: group id compact "g", topics compact count 1, name "t", partition_indexes count 1000 */
    static const uint8_t ints[] = {2, 'g', 2, 2, 't', 0xe9, 0x07, 0, 0, 0, 1, 0, 0, 0, 2};
    assert_int_equal(decode_body(9, false, 6, ints, sizeof ints, NULL, &used), GR_WIRE_BAD_LENGTH);
}

/* ---- strings and bytes ---- */

static void test_string_past_end_in_message(void **state)
{
    (void)state;
    /* Produce v3: one topic whose name claims 100 bytes with 3 left */
    static const uint8_t classic[] = {0xff, 0xff, 0xff, 0xff, 0,   0,   0x75, 0x30, 0,
                                      0,    0,    1,    0,    100, 'a', 'b',  'c'};
    assert_int_equal(decode_req(0, 3, classic, sizeof classic), GR_WIRE_BAD_LENGTH);
    /* Metadata v9: one topic, compact name claiming 49 bytes with 2 left */
    static const uint8_t compact[] = {2, 50, 'a', 'b'};
    assert_int_equal(decode_req(3, 9, compact, sizeof compact), GR_WIRE_BAD_LENGTH);
    /* Produce v3 records (int32-length bytes) claiming INT32_MAX bytes */
    static const uint8_t records[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30, 0, 0,    0,    1,    0,    1,
                                      't',  0,    0,    0,    1, 0, 0,    0,    0, 0x7f, 0xff, 0xff, 0xff, 0};
    assert_int_equal(decode_req(0, 3, records, sizeof records), GR_WIRE_BAD_LENGTH);
    /* Produce v9 records (compact bytes) claiming 2^32 - 2 bytes: no int32 overflow on the way */
    static const uint8_t compact_records[] = {0, 0xff, 0xff, 0, 0,    0x75, 0x30, 2,    2,    't', 2,
                                              0, 0,    0,    0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0};
    assert_int_equal(decode_req(0, 9, compact_records, sizeof compact_records), GR_WIRE_BAD_LENGTH);
}

static void test_compact_zero_on_non_nullable_bytes_and_array(void **state)
{
    (void)state;
    /* JoinGroup v6: group "g", session 10000, rebalance 10000, member id "", group instance null,
     * protocol type "consumer", protocols [ {name "range", metadata compact 0 = null} ] */
    static const uint8_t jg[] = {2,
                                 'g',
                                 0,
                                 0,
                                 0x27,
                                 0x10,
                                 0,
                                 0,
                                 0x27,
                                 0x10,
                                 1,
                                 0,
                                 9,
                                 'c',
                                 'o',
                                 'n',
                                 's',
                                 'u',
                                 'm',
                                 'e',
                                 'r',
                                 2,
                                 6,
                                 'r',
                                 'a',
                                 'n',
                                 'g',
                                 'e',
                                 0 /* metadata null */,
                                 0,
                                 0};
    assert_int_equal(decode_req(11, 6, jg, sizeof jg), GR_WIRE_NULL);
    /* CreateTopics v5: topics compact count 0 = null, not nullable */
    static const uint8_t ct[] = {0, 0, 0, 0x75, 0x30, 0, 0};
    assert_int_equal(decode_req(19, 5, ct, sizeof ct), GR_WIRE_NULL);
    /* ApiVersions v3: client software name compact 0 (non-nullable) */
    static const uint8_t av[] = {0, 1, 0};
    assert_int_equal(decode_req(18, 3, av, sizeof av), GR_WIRE_NULL);
}

static void test_null_before_its_nullable_version(void **state)
{
    (void)state;
    /* Metadata request topic name: nullable from v10 only. v9: [ {name null} ], auto create, 2 bools, tags */
    static const uint8_t v9[] = {2, 0, 0, 1, 0, 0, 0};
    assert_int_equal(decode_req(3, 9, v9, sizeof v9), GR_WIRE_NULL);
    /* v10: topics [ {topic id (16 bytes), name null, tags} ], allow auto topic creation,
     * include cluster authorized operations, include topic authorized operations, tags: fine */
    static const uint8_t v10[] = {2,  0x11, 2,  3,  4,  5, 6, 7, 8, 9, 10, 11,
                                  12, 13,   14, 15, 16, 0, 0, 1, 0, 0, 0};
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_rd rd;
    gr_rd_init(&rd, v10, sizeof v10, &a);
    struct gr_metadata_request m;
    assert_int_equal(gr_metadata_request_decode(&rd, 10, &m), 0);
    assert_int_equal(gr_rd_left(&rd), 0);
    assert_int_equal(m.topics.count, 1);
    assert_int_equal(m.topics.items[0].name.len, -1);
    assert_int_equal(m.topics.items[0].topic_id.b[0], 0x11);
    gr_arena_reset(&a);
}

/* ---- varints ---- */

static void test_overlong_varint_in_message(void **state)
{
    (void)state;
    /* Metadata v9: topics compact count as a 6-byte uvarint */
    static const uint8_t count[] = {0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 0, 0};
    assert_int_equal(decode_req(3, 9, count, sizeof count), GR_WIRE_BAD_VARINT);
    /* Metadata v9: empty topics, 3 bools, then the tag count as a 6-byte uvarint */
    static const uint8_t tags[] = {1, 1, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    assert_int_equal(decode_req(3, 9, tags, sizeof tags), GR_WIRE_BAD_VARINT);
    /* a tag's size as a 5-byte uvarint above UINT32_MAX */
    static const uint8_t size[] = {1, 1, 0, 0, 1, 20, 0xff, 0xff, 0xff, 0xff, 0x7f};
    assert_int_equal(decode_req(3, 9, size, sizeof size), GR_WIRE_BAD_VARINT);
}

/* ---- tagged fields ---- */

static void test_request_header_tags(void **state)
{
    (void)state;
    /* header v2 of ApiVersions v3: key 18, version 3, correlation 7, client id "c", then tags */
    struct gr_request_header h;
    struct gr_rd rd;
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    static const uint8_t descending[] = {0, 18, 0, 3, 0, 0, 0, 7, 0, 1, 'c', 2, 5, 0, 3, 0};
    gr_rd_init(&rd, descending, sizeof descending, &a);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), GR_WIRE_BAD_TAGS);
    static const uint8_t duplicate[] = {0, 18, 0, 3, 0, 0, 0, 7, 0, 1, 'c', 2, 4, 1, 'x', 4, 0};
    gr_rd_init(&rd, duplicate, sizeof duplicate, &a);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), GR_WIRE_BAD_TAGS);
    static const uint8_t past_end[] = {0, 18, 0, 3, 0, 0, 0, 7, 0, 1, 'c', 1, 4, 9, 'x'};
    gr_rd_init(&rd, past_end, sizeof past_end, &a);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), GR_WIRE_SHORT);
    /* more fields than GR_TAGGED_FIELDS_MAX (1024): 2000 as a uvarint, with 4000 bytes of (tag, 0) pairs;
     * refused before anything is allocated */
    gr_arena_reset(&a);
    static uint8_t many[11 + 2 + 4000];
    memcpy(many, (const uint8_t[]){0, 18, 0, 3, 0, 0, 0, 7, 0, 1, 'c'}, 11);
    many[11] = 0xd0, many[12] = 0x0f; /* 2000 */
    for (int i = 0; i < 2000; i++)
        many[13 + 2 * i] = (uint8_t)(i & 0x7f), many[14 + 2 * i] = 0;
    gr_rd_init(&rd, many, sizeof many, &a);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), GR_WIRE_BAD_TAGS);
    assert_int_equal(a.used_bytes, 0);
    /* ascending unknown tags are kept, as views, and survive re-encoding */
    static const uint8_t kept[] = {0, 18, 0, 3, 0, 0, 0, 7, 0, 1, 'c', 2, 3, 1, 'x', 9, 0};
    gr_rd_init(&rd, kept, sizeof kept, &a);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), 0);
    assert_int_equal(gr_rd_left(&rd), 0);
    assert_int_equal(h.unknown_tags.count, 2);
    assert_int_equal(h.unknown_tags.items[0].tag, 3);
    assert_int_equal(h.unknown_tags.items[0].data.len, 1);
    assert_int_equal(h.unknown_tags.items[1].tag, 9);
    uint8_t out[sizeof kept];
    assert_int_equal(gr_request_header_size(&h, 2), sizeof kept);
    struct gr_wr wr;
    gr_wr_init(&wr, out, sizeof out);
    gr_request_header_encode(&wr, &h, 2);
    assert_memory_equal(out, kept, sizeof kept);
    gr_arena_reset(&a);
}

static void test_nested_struct_tags(void **state)
{
    (void)state;
    /* Metadata v9 request: one topic {name "t", tags: 2 fields, tag 4 then tag 1} */
    static const uint8_t descending[] = {2, 2, 't', 2, 4, 0, 1, 0, 1, 0, 0, 0};
    assert_int_equal(decode_req(3, 9, descending, sizeof descending), GR_WIRE_BAD_TAGS);
    static const uint8_t duplicate[] = {2, 2, 't', 2, 4, 0, 4, 0, 1, 0, 0, 0};
    assert_int_equal(decode_req(3, 9, duplicate, sizeof duplicate), GR_WIRE_BAD_TAGS);
    /* a tag count that cannot fit in the bytes left (each field needs 2 bytes) */
    static const uint8_t count[] = {2, 2, 't', 100, 4, 0, 1, 0, 0, 0};
    assert_int_equal(decode_req(3, 9, count, sizeof count), GR_WIRE_BAD_TAGS);
}

static void test_known_tag_size_disagrees(void **state)
{
    (void)state;
    /* Fetch v12, smallest body: replica id -1, max wait 500, min bytes 1, max bytes 1 MiB, isolation 0,
     * session id 0, session epoch -1, topics [], forgotten [], rack id "", then the top-level tags. */
    uint8_t b[64];
    static const uint8_t fixed[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0xf4, 0,    0,    0,    1, 0, 0x10,
                                    0,    0,    0,    0,    0, 0, 0,    0xff, 0xff, 0xff, 0xff, 1, 1, 1};
    memcpy(b, fixed, sizeof fixed);
    size_t n = sizeof fixed;
    /* tag 0 = cluster id (compact nullable string): declared size 5, but "ab" takes 3 bytes */
    static const uint8_t longer[] = {1, 0, 5, 3, 'a', 'b', 'x', 'x'};
    memcpy(b + n, longer, sizeof longer);
    assert_int_equal(decode_req(1, 12, b, n + sizeof longer), GR_WIRE_BAD_LENGTH);
    /* declared size 2, but the string says 3 bytes */
    static const uint8_t shorter[] = {1, 0, 2, 3, 'a', 'b'};
    memcpy(b + n, shorter, sizeof shorter);
    assert_int_equal(decode_req(1, 12, b, n + sizeof shorter), GR_WIRE_BAD_LENGTH);
    /* declared size past the end of the frame */
    static const uint8_t past[] = {1, 0, 40, 3, 'a', 'b'};
    memcpy(b + n, past, sizeof past);
    assert_int_equal(decode_req(1, 12, b, n + sizeof past), GR_WIRE_SHORT);
    /* and the well-formed one decodes, with the value */
    static const uint8_t good[] = {1, 0, 3, 3, 'a', 'b'};
    memcpy(b + n, good, sizeof good);
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_rd rd;
    gr_rd_init(&rd, b, n + sizeof good, &a);
    struct gr_fetch_request m;
    assert_int_equal(gr_fetch_request_decode(&rd, 12, &m), 0);
    assert_int_equal(gr_rd_left(&rd), 0);
    assert_true(gr_str_eq_c(m.cluster_id, "ab"));
    assert_int_equal(m.max_wait_ms, 500);
    assert_int_equal(m.session_epoch, -1);
    gr_arena_reset(&a);
}

/* ---- headers, API keys and versions ---- */

static void test_truncated_or_bad_request_header(void **state)
{
    (void)state;
    int16_t key, version;
    int32_t corr;
    static const uint8_t seven[] = {0, 3, 0, 9, 0, 0, 0};
    assert_int_equal(gr_request_header_peek(seven, sizeof seven, &key, &version, &corr), GR_WIRE_SHORT);
    struct gr_request_header h;
    struct gr_rd rd;
    static const uint8_t id_past_end[] = {0, 3, 0, 9, 0, 0, 0, 1, 0, 10, 'a', 'b', 'c'};
    gr_rd_init(&rd, id_past_end, sizeof id_past_end, NULL);
    assert_int_equal(gr_request_header_decode(&rd, 1, &h), GR_WIRE_BAD_LENGTH);
    static const uint8_t id_negative[] = {0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xfe, 0};
    gr_rd_init(&rd, id_negative, sizeof id_negative, NULL);
    assert_int_equal(gr_request_header_decode(&rd, 1, &h), GR_WIRE_BAD_LENGTH);
    /* header v2 without its tag section */
    static const uint8_t no_tags[] = {0, 3, 0, 9, 0, 0, 0, 1, 0, 1, 'c'};
    gr_rd_init(&rd, no_tags, sizeof no_tags, NULL);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), GR_WIRE_SHORT);
    /* header v2 where the client sent a compact client id (the classic first bug): "c" as {2, 'c'} reads
     * as an int16 length 0x0263 = 611, far past the end */
    static const uint8_t compact_id[] = {0, 3, 0, 9, 0, 0, 0, 1, 2, 'c', 0};
    gr_rd_init(&rd, compact_id, sizeof compact_id, NULL);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), GR_WIRE_BAD_LENGTH);
}

static void test_unknown_api_key(void **state)
{
    (void)state;
    /* keys Kafka has but the codec does not carry (inter-broker, ...) and keys nobody has: no
     * ops, so dispatch closes the connection (the transaction APIs 24-28, 65, 66 have codec rows but no
     * server/apis.def row, and dispatch looks up apis.def first) */
    static const int16_t unknown[] = {-1, 4, 5, 6, 7, 38, 1000, 32767, -32768};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_null(gr_msg_ops_find(unknown[i], false));
        assert_null(gr_msg_ops_find(unknown[i], true));
    }
    /* the header still peeks, so the broker can log which key it was */
    static const uint8_t frame[] = {0x03, 0xe8, 0, 0, 0, 0, 0, 42, 0xff, 0xff};
    int16_t key, version;
    int32_t corr;
    assert_int_equal(gr_request_header_peek(frame, sizeof frame, &key, &version, &corr), 0);
    assert_int_equal(key, 1000);
    assert_int_equal(corr, 42);
}

static void test_version_ranges_are_kafkas(void **state)
{
    (void)state;
    /* api key, validVersions and first flexible version of Kafka 4.4.0's message definitions */
    static const struct {
        int16_t key, min, max, flexible;
    } kafka[] = {
        {0, 3, 13, 9},  {1, 4, 18, 12}, {2, 1, 11, 6}, {3, 0, 13, 9}, {8, 2, 10, 8}, {9, 1, 10, 6},
        {10, 0, 6, 3},  {11, 0, 9, 6},  {12, 0, 4, 4}, {13, 0, 5, 4}, {14, 0, 5, 4}, {18, 0, 5, 3},
        {19, 2, 7, 5},  {22, 0, 6, 2},  {35, 1, 5, 2}, {42, 0, 3, 2}, {61, 0, 0, 0}, {24, 0, 5, 3},
        {25, 0, 4, 3},  {26, 0, 5, 3},  {27, 1, 2, 1}, {28, 0, 6, 3}, {65, 0, 0, 0}, {66, 0, 2, 0},
        {17, 0, 1, -1}, {36, 0, 2, 2},
    };
    for (size_t i = 0; i < sizeof kafka / sizeof kafka[0]; i++) {
        for (int r = 0; r < 2; r++) {
            const struct gr_msg_ops *ops = gr_msg_ops_find(kafka[i].key, r);
            assert_non_null(ops);
            if (ops->version_min != kafka[i].min || ops->version_max != kafka[i].max ||
                ops->flexible_min != kafka[i].flexible)
                fail_msg("%s: v%d-%d flexible %d, Kafka 4.4.0 has v%d-%d flexible %d", ops->name,
                         ops->version_min, ops->version_max, ops->flexible_min, kafka[i].min, kafka[i].max,
                         kafka[i].flexible);
        }
    }
    /* every table row: sane range; the header version switches exactly at the flexible boundary */
    for (int i = 0; i < gr_msg_ops_count; i++) {
        const struct gr_msg_ops *ops = &gr_msg_ops_table[i];
        assert_true(ops->version_min >= 0 && ops->version_min <= ops->version_max);
        if (ops->flexible_min < 0) continue;
        assert_int_equal(gr_request_header_version(ops->flexible_min, ops->flexible_min), 2);
        if (ops->flexible_min > 0)
            assert_int_equal(gr_request_header_version(ops->flexible_min - 1, ops->flexible_min), 1);
    }
    /* Produce v0-v2 and Fetch v0-v3 are outside the codec (Kafka 4 removed them, KIP-896) */
    assert_int_equal(gr_msg_ops_find(0, false)->version_min, 3);
    assert_int_equal(gr_msg_ops_find(1, false)->version_min, 4);
}

/* ---- records field: opaque to the codec, checked by the batch validator ---- */

static void test_produce_records_garbage(void **state)
{
    (void)state;
    /* Produce v3, one topic "t", partition 0, records = 20 bytes of 0xff: the codec takes them as a view,
     * the batch validator refuses them (17 bytes are there, so the magic byte is checked first: 0xff) */
    uint8_t b[64] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30, 0, 0, 0, 1, 0, 1,
                     't',  0,    0,    0,    1, 0, 0,    0,    0, 0, 0, 0, 20};
    memset(b + 27, 0xff, 20);
    struct gr_arena a;
    gr_arena_init(&a, ARENA_BYTES);
    struct gr_rd rd;
    gr_rd_init(&rd, b, 47, &a);
    struct gr_produce_request m;
    assert_int_equal(gr_produce_request_decode(&rd, 3, &m), 0);
    assert_int_equal(gr_rd_left(&rd), 0);
    struct gr_bytes r = m.topic_data.items[0].partition_data.items[0].records.mem;
    assert_int_equal(r.len, 20);
    assert_ptr_equal(r.ptr, b + 27); /* a view into the frame */
    assert_int_equal(gr_batch_validate(r.ptr, (size_t)r.len, NULL, NULL), GR_BATCH_ERR_MAGIC);
    /* records null (nullable): decodes, and there is nothing to validate */
    b[23] = b[24] = b[25] = b[26] = 0xff;
    gr_rd_init(&rd, b, 27, &a);
    assert_int_equal(gr_produce_request_decode(&rd, 3, &m), 0);
    assert_int_equal(m.topic_data.items[0].partition_data.items[0].records.mem.len, -1);
    gr_arena_reset(&a);
}

/* ---- inputs from the fuzzer ---- */

/* fuzz_protocol crash-97a5c370 (a harness check, not a codec bug): a 61-byte batch whose attributes say
 * zstd (plus the delete-horizon bit and an unused bit 7) but whose records section is empty and whose
 * record count is 0. The stored-data rules accept it (nothing to decompress; Kafka's cleaner writes such
 * header-only batches), the producer rules refuse it (count 0), and whole-buffer decompression of the
 * empty section is CORRUPT, so a recompression path must only see batches with records. */
static void test_fuzz_empty_compressed_batch(void **state)
{
    (void)state;
    uint8_t b[61] = {0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x31, 0x9d,
                     0x01, 0x00, 0xc4, 0x02, 0x16, 0x33, 0x00, 0x00, 0x00, 0xc4, 0x02, 0x16, 0x33,
                     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6c, 0x00, 0x00, 0x31, 0x9d, 0x01,
                     0x00, 0xc4, 0x02, 0x16, 0x33, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6c,
                     0x6f, 0x00, 0x46, 0x72, 0x00, 0x00, 0x00, 0x00, 0x00};
    gr_batch_crc_store(b, sizeof b); /* the fuzzer ran it with "recompute CRC" */
    struct gr_batch_info info;
    assert_int_equal(gr_batch_validate_ex(b, sizeof b, 0, &info, NULL), 0);
    assert_int_equal(info.codec, GR_CODEC_ZSTD);
    assert_int_equal(info.record_count, 0);
    assert_int_equal(info.records_bytes, 0);
    assert_int_equal(info.records_max_timestamp, -1);
    assert_int_equal(gr_batch_validate_ex(b, sizeof b, GR_BATCH_CHECK_CLIENT, NULL, NULL),
                     GR_BATCH_ERR_OFFSETS);
    struct gr_record_iter it;
    struct gr_record rec;
    assert_int_equal(gr_record_iter_init(&it, b, sizeof b), 0);
    assert_int_equal(gr_record_iter_next(&it, &rec), 0);
    gr_record_iter_close(&it);
    uint8_t *out = NULL;
    size_t out_len = 0;
    assert_int_equal(gr_decompress(GR_CODEC_ZSTD, b + 61, 0, 1 << 20, &out, &out_len),
                     GR_COMPRESS_ERR_CORRUPT);
    free(out);
}

/* fuzz_protocol crash-fd18be1d (a harness check, not a codec bug): a client batch, zstd, three records,
 * with the LogAppendTime bit set by the producer. Its records read as the batch's max timestamp; the
 * produce handler's recompression (gr_decompress whole + gr_batch_assemble without that bit, as
 * server/handlers/produce.c does it) keeps keys, values and headers and gives back the create times. */
static void test_fuzz_log_append_time_recompressed(void **state)
{
    (void)state;
    uint8_t b[] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6d, 0xff, 0xff,
                   0xff, 0xff, 0x02, 0x0b, 0xa8, 0xc3, 0x9a, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x02, 0x00,
                   0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x92, 0x53,
                   0x4e, 0x00, 0x00, 0x00, 0x00, 0x2f, 0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00,
                   0x00, 0x00, 0x00, 0x00, 0x03, 0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x37, 0x9d, 0x01, 0x00,
                   0xc4, 0x02, 0x16, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
                   0x46, 0x00, 0x0a, 0x02, 0x06, 0x6b, 0x65, 0x79, 0x22, 0x77, 0x6f, 0x72, 0x6c, 0x64,
                   0x20, 0x04, 0x04, 0x68, 0x31, 0x02, 0x76, 0x04, 0x68, 0x32, 0x01, 0x0c, 0x00, 0x06,
                   0x04, 0x07, 0x01, 0x00, 0x01, 0x00, 0xc7, 0x28, 0x63};
    gr_batch_crc_store(b, sizeof b); /* the fuzzer ran it with "recompute CRC" */
    struct gr_batch_info info;
    assert_int_equal(gr_batch_validate(b, sizeof b, &info, NULL), 0);
    assert_int_equal(info.codec, GR_CODEC_ZSTD);
    assert_int_equal(info.record_count, 3);
    assert_true(info.attributes & GR_BATCH_ATTR_LOG_APPEND_TIME);
    uint8_t *plain = NULL, *out = NULL;
    size_t plain_len = 0, out_len = 0;
    assert_int_equal(gr_decompress(info.codec, b + GR_BATCH_HEADER_BYTES, sizeof b - GR_BATCH_HEADER_BYTES,
                                   1 << 20, &plain, &plain_len),
                     0);
    assert_int_equal(plain_len, info.records_bytes);
    struct gr_batch_params bp = {
        0, -1, GR_CODEC_SNAPPY, 0, -1, info.producer_id, info.producer_epoch, info.base_sequence};
    assert_int_equal(gr_batch_assemble(&bp, info.record_count, info.last_offset_delta, info.base_timestamp,
                                       info.max_timestamp, plain, plain_len, &out, &out_len),
                     0);
    struct gr_batch_info info2;
    assert_int_equal(gr_batch_validate(out, out_len, &info2, NULL), 0);
    assert_int_equal(info2.codec, GR_CODEC_SNAPPY);
    assert_int_equal(info2.attributes & GR_BATCH_ATTR_LOG_APPEND_TIME, 0);
    struct gr_record_iter ia, ib;
    struct gr_record ra, rb;
    assert_int_equal(gr_record_iter_init(&ia, b, sizeof b), 0);
    assert_int_equal(gr_record_iter_init(&ib, out, out_len), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gr_record_iter_next(&ia, &ra), 1);
        assert_int_equal(gr_record_iter_next(&ib, &rb), 1);
        assert_int_equal(ra.timestamp, info.max_timestamp); /* LogAppendTime: the batch's */
        assert_true(rb.timestamp >= info.base_timestamp);   /* create time: base + delta */
        assert_int_equal(ra.key.len, rb.key.len);
        assert_int_equal(ra.value.len, rb.value.len);
        if (ra.value.len > 0) assert_memory_equal(ra.value.ptr, rb.value.ptr, (size_t)ra.value.len);
        assert_int_equal(ra.header_count, rb.header_count);
    }
    assert_int_equal(gr_record_iter_next(&ia, &ra), 0);
    assert_int_equal(gr_record_iter_next(&ib, &rb), 0);
    gr_record_iter_close(&ia);
    gr_record_iter_close(&ib);
    free(plain);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_negative_array_count),
        cmocka_unit_test(test_oversized_compact_array_count),
        cmocka_unit_test(test_string_past_end_in_message),
        cmocka_unit_test(test_compact_zero_on_non_nullable_bytes_and_array),
        cmocka_unit_test(test_null_before_its_nullable_version),
        cmocka_unit_test(test_overlong_varint_in_message),
        cmocka_unit_test(test_request_header_tags),
        cmocka_unit_test(test_nested_struct_tags),
        cmocka_unit_test(test_known_tag_size_disagrees),
        cmocka_unit_test(test_truncated_or_bad_request_header),
        cmocka_unit_test(test_unknown_api_key),
        cmocka_unit_test(test_version_ranges_are_kafkas),
        cmocka_unit_test(test_produce_records_garbage),
        cmocka_unit_test(test_fuzz_empty_compressed_batch),
        cmocka_unit_test(test_fuzz_log_append_time_recompressed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
