/*
 * test_etcd_codec.c: the etcd client's JSON codec (cluster/etcd_codec.h) without an etcd: int64 fields as
 * strings, as numbers and absent (proto3 JSON), malformed int64 refused; base64 round trip with binary
 * bytes and every padding length, bad base64 refused; a KeyValue, a txn answer with both branches' shapes,
 * the gateway's two error shapes; the request bodies etcd expects (enum names, int64 as strings); the
 * prefix end. Read next: cluster/tests/test_etcd.c (against a real etcd).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/etcd_codec.h"

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    assert_non_null(j);
    return j;
}

static void test_i64_forms(void **state)
{
    (void)state;
    json_t *j = parse("{\"a\":\"9223372036854775807\",\"b\":42,\"c\":\"-7\",\"n\":null,"
                      "\"x\":\"12a\",\"y\":1.5,\"z\":\"\",\"big\":\"9223372036854775808\",\"w\":\" 1\"}");
    int64_t v = -1;
    assert_true(gr_etcd_codec_get_i64(j, "a", &v));
    assert_int_equal(v, INT64_MAX);
    assert_true(gr_etcd_codec_get_i64(j, "b", &v));
    assert_int_equal(v, 42);
    assert_true(gr_etcd_codec_get_i64(j, "c", &v));
    assert_int_equal(v, -7);
    v = 5;
    assert_true(gr_etcd_codec_get_i64(j, "absent", &v));
    assert_int_equal(v, 0);
    assert_true(gr_etcd_codec_get_i64(j, "n", &v));
    assert_int_equal(v, 0);
    assert_false(gr_etcd_codec_get_i64(j, "x", &v));
    assert_false(gr_etcd_codec_get_i64(j, "y", &v));
    assert_false(gr_etcd_codec_get_i64(j, "z", &v));
    assert_false(gr_etcd_codec_get_i64(j, "big", &v));
    assert_false(gr_etcd_codec_get_i64(j, "w", &v));
    json_decref(j);
}

static void test_base64(void **state)
{
    (void)state;
    const char bin[] = {'a', 0, (char)0xff, 'b', (char)0x80};
    for (size_t len = 0; len <= sizeof bin; len++) {
        json_t *s = gr_etcd_codec_b64(bin, len);
        assert_non_null(s);
        json_t *o = json_object();
        json_object_set_new(o, "k", s);
        struct gr_arena a;
        gr_arena_init(&a, 4096);
        const char *out;
        size_t out_len;
        assert_true(gr_etcd_codec_get_bytes(o, "k", &a, &out, &out_len));
        assert_int_equal(out_len, len);
        assert_memory_equal(out, bin, len);
        assert_int_equal(out[len], 0);
        gr_arena_reset(&a);
        json_decref(o);
    }
    json_t *bad = parse("{\"a\":\"abc\",\"b\":\"ab!d\",\"c\":7}");
    struct gr_arena a;
    gr_arena_init(&a, 4096);
    const char *out;
    size_t len;
    assert_false(gr_etcd_codec_get_bytes(bad, "a", &a, &out, &len));
    assert_false(gr_etcd_codec_get_bytes(bad, "b", &a, &out, &len));
    assert_false(gr_etcd_codec_get_bytes(bad, "c", &a, &out, &len));
    assert_true(gr_etcd_codec_get_bytes(bad, "absent", &a, &out, &len));
    assert_int_equal(len, 0);
    gr_arena_reset(&a);
    json_decref(bad);
}

static void test_kv_and_txn(void **state)
{
    (void)state;
    /* as etcd 3.4 answers a txn whose compare failed: no "succeeded", a range in the failure branch */
    json_t *j =
        parse("{\"header\":{\"revision\":\"12\"},\"responses\":[{\"response_range\":{\"header\":"
              "{\"revision\":\"12\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"mod_revision\":"
              "11,\"version\":\"3\",\"value\":\"YmFy\",\"lease\":\"4111120383271503112\"}],\"count\":\"1\"}},"
              "{\"response_put\":{\"header\":{}}},{\"response_delete_range\":{\"deleted\":\"2\"}}]}");
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    struct gr_etcd_result res = {0};
    assert_true(gr_etcd_codec_txn_result(j, &a, &res));
    assert_false(res.succeeded);
    assert_int_equal(res.revision, 12);
    assert_int_equal(res.response_count, 3);
    assert_int_equal(res.responses[0].type, GR_ETCD_OP_RANGE);
    assert_int_equal(res.responses[0].kv_count, 1);
    const struct gr_etcd_kv *kv = &res.responses[0].kvs[0];
    assert_string_equal(kv->key, "foo");
    assert_string_equal(kv->value, "bar");
    assert_int_equal(kv->create_revision, 2);
    assert_int_equal(kv->mod_revision, 11);
    assert_int_equal(kv->version, 3);
    assert_int_equal(kv->lease, 4111120383271503112LL);
    assert_int_equal(res.responses[1].type, GR_ETCD_OP_PUT);
    assert_int_equal(res.responses[2].type, GR_ETCD_OP_DELETE);
    assert_int_equal(res.responses[2].count, 2);
    json_decref(j);
    j = parse("{\"succeeded\":true,\"responses\":[{\"response_unknown\":{}}]}");
    assert_false(gr_etcd_codec_txn_result(j, &a, &res));
    json_decref(j);
    j = parse("{\"succeeded\":\"yes\"}");
    assert_false(gr_etcd_codec_txn_result(j, &a, &res));
    json_decref(j);
    gr_arena_reset(&a);
}

static void test_kv_arena_ceiling(void **state)
{
    (void)state;
    json_t *j = parse("{\"kvs\":[{\"key\":\"YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh\"}]}");
    struct gr_arena a;
    gr_arena_init(&a, 32); /* less than one KeyValue struct: refused, not overrun */
    struct gr_etcd_op_result out;
    assert_false(gr_etcd_codec_op_result(j, GR_ETCD_OP_RANGE, &a, &out));
    gr_arena_reset(&a);
    json_decref(j);
}

static void test_errors(void **state)
{
    (void)state;
    int code = 0;
    const char *msg = NULL;
    json_t *j = parse("{\"error\":\"etcdserver: mvcc: required revision has been compacted\",\"message\":"
                      "\"etcdserver: mvcc: required revision has been compacted\",\"code\":11}");
    assert_true(gr_etcd_codec_error(j, &code, &msg));
    assert_int_equal(code, GR_ETCD_GRPC_OUT_OF_RANGE);
    assert_string_equal(msg, "etcdserver: mvcc: required revision has been compacted");
    json_decref(j);
    j = parse("{\"error\":{\"grpc_code\":5,\"http_code\":404,\"message\":\"etcdserver: requested lease not "
              "found\"}}");
    assert_true(gr_etcd_codec_error(j, &code, &msg));
    assert_int_equal(code, GR_ETCD_GRPC_NOT_FOUND);
    assert_string_equal(msg, "etcdserver: requested lease not found");
    json_decref(j);
    j = parse("{\"header\":{},\"ID\":\"5\",\"TTL\":\"9\",\"error\":\"\"}"); /* LeaseGrantResponse.error */
    assert_false(gr_etcd_codec_error(j, &code, &msg));
    json_decref(j);
}

static void test_bodies(void **state)
{
    (void)state;
    struct gr_etcd_compare cmp[] = {
        {.key = "k", .target = GR_ETCD_CREATE, .cmp = GR_ETCD_EQUAL, .number = 0},
        {.key = "k", .target = GR_ETCD_VALUE, .cmp = GR_ETCD_NOT_EQUAL, .value = "v", .value_len = 1}};
    struct gr_etcd_op succ[] = {
        {.type = GR_ETCD_OP_PUT, .key = "k", .value = "v", .value_len = 1, .lease = 7}};
    struct gr_etcd_op fail[] = {{.type = GR_ETCD_OP_RANGE, .key = "k", .range_end = "l", .limit = 3},
                                {.type = GR_ETCD_OP_DELETE, .key = "k", .prev_kv = true}};
    struct gr_etcd_txn txn = {cmp, 2, succ, 1, fail, 2};
    json_t *j = gr_etcd_codec_txn(&txn);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(
        text, "{\"compare\":[{\"create_revision\":\"0\",\"key\":\"aw==\",\"result\":\"EQUAL\",\"target\":"
              "\"CREATE\"},"
              "{\"key\":\"aw==\",\"result\":\"NOT_EQUAL\",\"target\":\"VALUE\",\"value\":\"dg==\"}],"
              "\"failure\":[{\"request_range\":{\"key\":\"aw==\",\"limit\":\"3\",\"range_end\":\"bA==\"}},"
              "{\"request_delete_range\":{\"key\":\"aw==\",\"prev_kv\":true}}],"
              "\"success\":[{\"request_put\":{\"key\":\"aw==\",\"lease\":\"7\",\"value\":\"dg==\"}}]}");
    free(text);
    json_decref(j);
    j = gr_etcd_codec_watch_create("ab", 2, "ac", 2, 17, true);
    text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text,
                        "{\"create_request\":{\"key\":\"YWI=\",\"prev_kv\":true,\"progress_notify\":true,"
                        "\"range_end\":\"YWM=\",\"start_revision\":\"17\"}}");
    free(text);
    json_decref(j);
}

static void test_prefix_end(void **state)
{
    (void)state;
    char out[8];
    assert_int_equal(gr_etcd_prefix_end("/gr", 3, out), 3);
    assert_memory_equal(out, "/gs", 3);
    assert_int_equal(gr_etcd_prefix_end("a\xff", 2, out), 1);
    assert_memory_equal(out, "b", 1);
    assert_int_equal(gr_etcd_prefix_end("\xff\xff", 2, out), 1);
    assert_int_equal(out[0], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_i64_forms),  cmocka_unit_test(test_base64),
        cmocka_unit_test(test_kv_and_txn), cmocka_unit_test(test_kv_arena_ceiling),
        cmocka_unit_test(test_errors),     cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_prefix_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
