/*
 * test_codec.c: random self round trip of every message at every version of the schema: random fill ->
 * size -> encode (exactly size bytes) -> decode (consumes exactly the bytes) -> encode again -> same bytes,
 * and the JSON renderings of both structs agree. Unknown tagged fields must survive. Also request and
 * response header codecs. The cross-check against Kafka's own classes is oracle_tool.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/tests/support.h"

#define ROUNDS_PER_VERSION 40

static void roundtrip_one(const struct gr_msg_ops *ops, const struct gr_msg_test_ops *tops, int16_t v,
                          struct gr_rng *rng, int *tags_seen)
{
    struct gr_arena a;
    gr_arena_init(&a, 0);
    void *m1 = gr_arena_alloc(&a, ops->struct_bytes);
    void *m2 = gr_arena_alloc(&a, ops->struct_bytes);
    tops->random(rng, &a, m1, v);
    size_t n = ops->size(m1, v);
    uint8_t *buf1 = malloc(n + 1), *buf2 = malloc(n + 1);
    struct gr_wr wr;
    gr_wr_init(&wr, buf1, n);
    ops->encode(&wr, m1, v);
    assert_int_equal((size_t)(wr.p - buf1), n);

    struct gr_rd rd;
    gr_rd_init(&rd, buf1, n, &a);
    int err = ops->decode(&rd, v, m2);
    if (err) fail_msg("%s v%d: decode error %d", ops->name, v, err);
    assert_int_equal(gr_rd_left(&rd), 0);
    assert_int_equal(ops->size(m2, v), n);
    gr_wr_init(&wr, buf2, n);
    ops->encode(&wr, m2, v);
    if (memcmp(buf1, buf2, n) != 0) fail_msg("%s v%d: re-encoded bytes differ", ops->name, v);

    struct gr_sb j1, j2;
    gr_sb_init(&j1);
    gr_sb_init(&j2);
    tops->json(&j1, m1, v);
    tops->json(&j2, m2, v);
    if (strcmp(j1.buf, j2.buf) != 0) fail_msg("%s v%d: json differs\n%s\n%s", ops->name, v, j1.buf, j2.buf);
    /* look for unknown tags in the top struct: they must have been carried over */
    const struct gr_tags *t1 =
        (const struct gr_tags *)((const char *)m1 + ops->struct_bytes - sizeof(struct gr_tags));
    const struct gr_tags *t2 =
        (const struct gr_tags *)((const char *)m2 + ops->struct_bytes - sizeof(struct gr_tags));
    if (ops->flexible_min >= 0 && v >= ops->flexible_min && t1->count > 0) {
        assert_int_equal(t1->count, t2->count);
        assert_int_equal(t1->items[0].tag, t2->items[0].tag);
        (*tags_seen)++;
    }
    gr_sb_free(&j1);
    gr_sb_free(&j2);
    free(buf1);
    free(buf2);
    gr_arena_reset(&a);
}

static void test_random_roundtrip_all(void **state)
{
    (void)state;
    struct gr_rng rng;
    gr_rng_seed(&rng, 12345);
    int total = 0, tags_seen = 0;
    for (int i = 0; i < gr_msg_ops_count; i++) {
        const struct gr_msg_ops *ops = &gr_msg_ops_table[i];
        const struct gr_msg_test_ops *tops = gr_msg_test_ops_find(ops->api_key, ops->response);
        assert_non_null(tops);
        for (int16_t v = ops->version_min; v <= ops->version_max; v++)
            for (int r = 0; r < ROUNDS_PER_VERSION; r++, total++)
                roundtrip_one(ops, tops, v, &rng, &tags_seen);
    }
    assert_true(total > 1000);
    assert_true(tags_seen > 10); /* unknown tags were exercised and survived */
}

/* A hand-written Metadata v1 request: topics ["ab"] (classic array, classic string). */
static void test_metadata_v1_bytes(void **state)
{
    (void)state;
    static const uint8_t body[] = {0, 0, 0, 1, 0, 2, 'a', 'b'};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 20);
    struct gr_rd rd;
    gr_rd_init(&rd, body, sizeof body, &a);
    struct gr_metadata_request m;
    assert_int_equal(gr_metadata_request_decode(&rd, 1, &m), 0);
    assert_int_equal(m.topics.count, 1);
    assert_true(gr_str_eq_c(m.topics.items[0].name, "ab"));
    assert_true(m.allow_auto_topic_creation); /* default true, field is v4+ */
    assert_int_equal(gr_metadata_request_size(&m, 1), sizeof body);
    gr_arena_reset(&a);
}

/* A hand-written ApiVersions v3 request (flexible): client software name "gr", version "1", no tags. */
static void test_api_versions_v3_bytes(void **state)
{
    (void)state;
    static const uint8_t body[] = {3, 'g', 'r', 2, '1', 0};
    struct gr_arena a;
    gr_arena_init(&a, 1 << 20);
    struct gr_rd rd;
    gr_rd_init(&rd, body, sizeof body, &a);
    struct gr_api_versions_request m;
    assert_int_equal(gr_api_versions_request_decode(&rd, 3, &m), 0);
    assert_true(gr_str_eq_c(m.client_software_name, "gr"));
    assert_true(gr_str_eq_c(m.client_software_version, "1"));
    assert_int_equal(gr_rd_left(&rd), 0);
    gr_arena_reset(&a);
}

/* Request header v2 keeps the classic int16 client id, then tags. */
static void test_request_header_v2(void **state)
{
    (void)state;
    static const uint8_t hdr[] = {0, 18, 0, 3, 0, 0, 0, 7, 0, 3, 'c', 'i', 'd', 0};
    struct gr_rd rd;
    gr_rd_init(&rd, hdr, sizeof hdr, NULL);
    struct gr_request_header h;
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), 0);
    assert_int_equal(h.request_api_key, 18);
    assert_int_equal(h.request_api_version, 3);
    assert_int_equal(h.correlation_id, 7);
    assert_true(gr_str_eq_c(h.client_id, "cid"));
    assert_int_equal(gr_rd_left(&rd), 0);
    /* null client id (KAFKA-3088) */
    static const uint8_t hdr_null[] = {0, 3, 0, 1, 0, 0, 0, 9, 0xff, 0xff};
    gr_rd_init(&rd, hdr_null, sizeof hdr_null, NULL);
    assert_int_equal(gr_request_header_decode(&rd, 1, &h), 0);
    assert_int_equal(h.client_id.len, -1);
    /* ApiVersions (key 18) stays on header v0 at its flexible versions (KIP-511); Metadata (key 3) follows
       its flexible versions (v9+) */
    const struct gr_msg_ops *av = gr_msg_ops_find(18, true), *md = gr_msg_ops_find(3, true);
    assert_non_null(av);
    assert_non_null(md);
    assert_int_equal(av->flexible_min, 3);
    assert_int_equal(gr_response_header_version(av, 3), 0);
    assert_int_equal(gr_response_header_version(av, 0), 0);
    assert_int_equal(gr_response_header_version(md, 8), 0);
    assert_int_equal(gr_response_header_version(md, 9), 1);
    assert_int_equal(gr_request_header_version(8, 9), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_roundtrip_all),
        cmocka_unit_test(test_metadata_v1_bytes),
        cmocka_unit_test(test_api_versions_v3_bytes),
        cmocka_unit_test(test_request_header_v2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
