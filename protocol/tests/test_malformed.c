/*
 * test_malformed.c: one small test per malformed message shape. Each must be rejected by the decoder with
 * the right error and without allocating more than the arena ceiling.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/gen/messages.h"

static int decode_metadata(const uint8_t *b, size_t n, int16_t v, struct gr_arena *a)
{
    struct gr_rd rd;
    gr_rd_init(&rd, b, n, a);
    struct gr_metadata_request m;
    return gr_metadata_request_decode(&rd, v, &m);
}

static void test_descending_tags(void **state)
{
    (void)state;
    /* Metadata v9: topics compact array empty (1), allow_auto_topic_creation (1),
     * include_cluster_authorized_operations (0), include_topic_authorized_operations (0),
     * tags: count 2, tag 5 len 0, tag 3 len 0 -> descending */
    static const uint8_t b[] = {1, 1, 0, 0, 2, 5, 0, 3, 0};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    assert_int_equal(decode_metadata(b, sizeof b, 9, &a), GR_WIRE_BAD_TAGS);
    gr_arena_reset(&a);
}

static void test_duplicate_tags(void **state)
{
    (void)state;
    static const uint8_t b[] = {1, 1, 0, 0, 2, 7, 0, 7, 0};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    assert_int_equal(decode_metadata(b, sizeof b, 9, &a), GR_WIRE_BAD_TAGS);
    gr_arena_reset(&a);
}

static void test_tag_length_past_end(void **state)
{
    (void)state;
    static const uint8_t b[] = {1, 1, 0, 0, 1, 7, 50, 1};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    assert_int_equal(decode_metadata(b, sizeof b, 9, &a), GR_WIRE_SHORT);
    gr_arena_reset(&a);
}

static void test_oversized_array_count(void **state)
{
    (void)state;
    /* Metadata v1 topics count 0x7fffffff with 2 bytes left: rejected before allocating */
    static const uint8_t b[] = {0x7f, 0xff, 0xff, 0xff, 0, 0};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    assert_int_equal(decode_metadata(b, sizeof b, 1, &a), GR_WIRE_BAD_LENGTH);
    assert_true(a.used_bytes == 0);
    gr_arena_reset(&a);
}

static void test_compact_zero_on_non_nullable(void **state)
{
    (void)state;
    /* CreateTopics v5: one topic whose name (a non-nullable compact string) has length byte 0 = null */
    uint8_t b[64] = {2, 0 /* name null */};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    struct gr_rd rd;
    gr_rd_init(&rd, b, sizeof b, &a);
    struct gr_create_topics_request m;
    assert_int_equal(gr_create_topics_request_decode(&rd, 5, &m), GR_WIRE_NULL);
    gr_arena_reset(&a);
}

static void test_truncated_body(void **state)
{
    (void)state;
    /* Produce v3: transactional id null, acks -1, timeout cut short */
    static const uint8_t b[] = {0xff, 0xff, 0xff, 0xff, 0, 0};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    struct gr_rd rd;
    gr_rd_init(&rd, b, sizeof b, &a);
    struct gr_produce_request m;
    assert_int_equal(gr_produce_request_decode(&rd, 3, &m), GR_WIRE_SHORT);
    gr_arena_reset(&a);
}

static void test_arena_ceiling(void **state)
{
    (void)state;
    /* Metadata v1 with 1000 empty-named topics (2 bytes each) against an arena of 1 KiB */
    uint8_t b[4 + 2000];
    b[0] = 0;
    b[1] = 0;
    b[2] = 0x03;
    b[3] = 0xe8;
    memset(b + 4, 0, 2000);
    struct gr_arena a;
    gr_arena_init(&a, 1024);
    assert_int_equal(decode_metadata(b, sizeof b, 1, &a), GR_WIRE_NO_MEMORY);
    gr_arena_reset(&a);
    gr_arena_init(&a, 1 << 20);
    assert_int_equal(decode_metadata(b, sizeof b, 1, &a), 0);
    gr_arena_reset(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descending_tags),
        cmocka_unit_test(test_duplicate_tags),
        cmocka_unit_test(test_tag_length_past_end),
        cmocka_unit_test(test_oversized_array_count),
        cmocka_unit_test(test_compact_zero_on_non_nullable),
        cmocka_unit_test(test_truncated_body),
        cmocka_unit_test(test_arena_ceiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
