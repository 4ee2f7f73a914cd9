/*
 * test_produce_merge.c: gr_produce_merge_duplicates (server/handlers/produce_request.h), pure over a decoded
 * ProduceRequest and an arena: a topic named twice is one topic in the place of its first occurrence, a
 * partition named twice keeps its first place and its last occurrence's records, by name before v13 and by
 * topic id from v13; a request without repeats is left untouched; the transactional refusal check and the
 * response arrays (server/handlers/produce_request.h).
 * Read next: server/handlers/produce.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/record_batch.h"
#include "server/handlers/produce_request.h"

static const uint8_t REC_A[] = {1}, REC_B[] = {2, 2}, REC_C[] = {3, 3, 3};

static struct gr_produce_request_partition_produce_data part(int32_t index, const uint8_t *rec, int32_t len)
{
    return (struct gr_produce_request_partition_produce_data){
        .index = index, .records = {.kind = GR_RECORDS_MEM, .mem = {rec, len}}};
}

static struct gr_produce_request_topic_produce_data
topic(const char *name, uint8_t id, struct gr_produce_request_partition_produce_data *p, int32_t n)
{
    struct gr_produce_request_topic_produce_data t = {.name = gr_str_c(name), .partition_data = {p, n}};
    memset(t.topic_id.b, id, sizeof t.topic_id.b);
    return t;
}

/* a:[0 A, 1 B], b:[0 A], a:[0 C]  ->  a:[0 C, 1 B], b:[0 A] (by name; topic ids all differ) */
static void test_by_name(void **state)
{
    (void)state;
    struct gr_produce_request_partition_produce_data pa[] = {part(0, REC_A, 1), part(1, REC_B, 2)};
    struct gr_produce_request_partition_produce_data pb[] = {part(0, REC_A, 1)};
    struct gr_produce_request_partition_produce_data pa2[] = {part(0, REC_C, 3)};
    struct gr_produce_request_topic_produce_data td[] = {topic("a", 1, pa, 2), topic("b", 2, pb, 1),
                                                         topic("a", 3, pa2, 1)};
    struct gr_produce_request body = {.topic_data = {td, 3}};
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    assert_true(gr_produce_merge_duplicates(&body, false, &arena));
    assert_int_equal(body.topic_data.count, 2);
    struct gr_produce_request_topic_produce_data *t = body.topic_data.items;
    assert_int_equal(t[0].name.len, 1);
    assert_memory_equal(t[0].name.ptr, "a", 1);
    assert_int_equal(t[0].partition_data.count, 2);
    assert_int_equal(t[0].partition_data.items[0].index, 0);
    assert_ptr_equal(t[0].partition_data.items[0].records.mem.ptr, REC_C); /* the last occurrence's */
    assert_int_equal(t[0].partition_data.items[0].records.mem.len, 3);
    assert_int_equal(t[0].partition_data.items[1].index, 1);
    assert_ptr_equal(t[0].partition_data.items[1].records.mem.ptr, REC_B);
    assert_memory_equal(t[1].name.ptr, "b", 1);
    assert_int_equal(t[1].partition_data.count, 1);
    assert_ptr_equal(t[1].partition_data.items[0].records.mem.ptr, REC_A);
    gr_arena_reset(&arena);
}

/* From v13 topics are told apart by id: the same name with two ids is two topics, two names with one id
   one topic. */
static void test_by_id(void **state)
{
    (void)state;
    struct gr_produce_request_partition_produce_data p1[] = {part(0, REC_A, 1)};
    struct gr_produce_request_partition_produce_data p2[] = {part(0, REC_B, 2)};
    struct gr_produce_request_partition_produce_data p3[] = {part(0, REC_C, 3)};
    struct gr_produce_request_topic_produce_data td[] = {topic("", 7, p1, 1), topic("", 8, p2, 1),
                                                         topic("", 7, p3, 1)};
    struct gr_produce_request body = {.topic_data = {td, 3}};
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    assert_true(gr_produce_merge_duplicates(&body, true, &arena));
    assert_int_equal(body.topic_data.count, 2);
    assert_int_equal(body.topic_data.items[0].topic_id.b[0], 7);
    assert_int_equal(body.topic_data.items[0].partition_data.count, 1);
    assert_ptr_equal(body.topic_data.items[0].partition_data.items[0].records.mem.ptr, REC_C);
    assert_int_equal(body.topic_data.items[1].topic_id.b[0], 8);
    assert_ptr_equal(body.topic_data.items[1].partition_data.items[0].records.mem.ptr, REC_B);
    gr_arena_reset(&arena);
}

static void test_no_repeats_untouched(void **state)
{
    (void)state;
    struct gr_produce_request_partition_produce_data pa[] = {part(1, REC_A, 1), part(0, REC_B, 2)};
    struct gr_produce_request_partition_produce_data pb[] = {part(1, REC_C, 3)};
    struct gr_produce_request_topic_produce_data td[] = {topic("a", 1, pa, 2), topic("b", 2, pb, 1)};
    struct gr_produce_request body = {.topic_data = {td, 2}};
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    assert_true(gr_produce_merge_duplicates(&body, false, &arena));
    assert_ptr_equal(body.topic_data.items, td); /* the decoded arrays as they were */
    assert_int_equal(body.topic_data.count, 2);
    assert_true(arena.used_bytes > 0); /* sort keys only */
    assert_int_equal(pa[0].index, 1);
    assert_int_equal(pa[1].index, 0);
    gr_arena_reset(&arena);
}

/* The transactional refusal: a transactional id, else the first batch's transactional bit; and the response
   arrays mirror the request's counts (a null partition array answers none). */
static void test_transactional_and_response(void **state)
{
    (void)state;
    uint8_t b[GR_BATCH_HEADER_BYTES] = {0};
    gr_put_be16(b + 21, GR_BATCH_ATTR_TRANSACTIONAL); /* attributes */
    gr_put_be32(b + 8, GR_BATCH_HEADER_BYTES - 12);   /* batch length: a header only */
    b[16] = 2;                                        /* magic */
    struct gr_produce_request_partition_produce_data p[] = {part(0, REC_A, 1), part(1, REC_B, 2)};
    struct gr_produce_request_topic_produce_data td[] = {topic("a", 1, p, 2), topic("b", 2, NULL, -1)};
    struct gr_produce_request body = {.transactional_id = GR_STR_NULL, .topic_data = {td, 2}};
    assert_false(gr_produce_request_transactional(&body));
    body.transactional_id = gr_str_c("tx");
    assert_true(gr_produce_request_transactional(&body));
    body.transactional_id = GR_STR_NULL;
    p[1] = part(1, b, (int32_t)sizeof b);
    assert_true(gr_produce_request_transactional(&body));
    struct gr_produce_response resp = {0};
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    assert_true(gr_produce_response_alloc(&body, &resp, &arena));
    assert_int_equal(resp.responses.count, 2);
    assert_int_equal(resp.responses.items[0].partition_responses.count, 2);
    assert_int_equal(resp.responses.items[1].partition_responses.count, 0);
    gr_arena_reset(&arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_name),
        cmocka_unit_test(test_by_id),
        cmocka_unit_test(test_no_repeats_untouched),
        cmocka_unit_test(test_transactional_and_response),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
