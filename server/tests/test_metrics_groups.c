/*
 * test_metrics_groups.c: the consumer-group lag rules of server/metrics_groups.c, pure (hand-made group
 * rows, no broker): kafka_exporter's lag (-1 without a commit, negative kept when the committed offset is
 * above the high watermark), gregor_consumergroup_lag_records (never negative, from the log start when the
 * commit is below it), the exact /metrics lines with their sums, a partition led elsewhere left out, the
 * JSON of /v1/groups/<group>/lag, and the admin path's bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/broker.h"
#include "server/metrics_groups.h"

static void value_rules(void **state)
{
    (void)state;
    assert_int_equal(gr_group_lag_kafka(-1, 10), -1); /* no commit */
    assert_int_equal(gr_group_lag_kafka(4, 10), 6);
    assert_int_equal(gr_group_lag_kafka(0, 0), 0);
    assert_int_equal(gr_group_lag_kafka(12, 10), -2); /* committed above hw (truncation): not clamped */
    assert_int_equal(gr_group_lag_records(12, 10, 0, 10), 0);  /* ... but never negative in records */
    assert_int_equal(gr_group_lag_records(4, 10, 0, 10), 6);   /* hw - committed */
    assert_int_equal(gr_group_lag_records(2, 10, 5, 10), 5);   /* committed below log start: hw - log start */
    assert_int_equal(gr_group_lag_records(5, 10, 5, 10), 5);   /* at the log start */
    assert_int_equal(gr_group_lag_records(10, 10, 10, 10), 0); /* caught up, everything deleted */
    assert_int_equal(gr_group_lag_records(3, 10, 12, 10), 0);  /* log start above hw cannot give a negative */
    /* a transaction's records end at 1000, its marker at 1000, hw 1001: caught up at 1000 */
    assert_int_equal(gr_group_lag_records(1000, 1001, 0, 1000), 0);
    assert_int_equal(gr_group_lag_records(1001, 1001, 0, 1000), 0);
    assert_int_equal(gr_group_lag_records(995, 1001, 0, 1000), 6); /* below it: hw - committed, as before */
    assert_int_equal(gr_group_lag_records(999, 1001, 0, 1000), 2);
    assert_int_equal(gr_group_lag_kafka(1000, 1001), 1); /* kafka_exporter's keeps hw - committed */
}

/* Group "a": topic t (3 partitions: p0 committed 4 of 10, p1 no commit, p2 committed 12 above hw 10 after a
   truncation, log start 0) and topic u (p0 committed 2 below log start 5, hw 9; p1 led elsewhere, committed
   7). Group "b\"q": no commits, 2 members. */
static struct gr_group_lag_part a_parts[] = {
    /* t/0 and u/0 with their lag in bytes and seconds and headroom (gr_group_lag_fill_time's fields): u/0's
       seconds unknown (JSON null) and its headroom infinite (a compacted topic: "+Inf") */
    {"t", 0, 4, true, 10, 0, 10, true, 120, 4, 2.5, 3600.5},
    {"t", 1, -1, true, 10, 0, 10, false, 0, 0, 0, 0},
    {"t", 2, 12, true, 10, 0, 10, false, 0, 0, 0, 0},
    {"u", 0, 2, true, 9, 5, 9, true, 300, -3, -1, INFINITY},
    {"u", 1, 7, false, -1, -1, -1, false, 0, 0, 0, 0},
};
static const struct gr_group_lag groups[] = {
    {.group = "a", .state = "Empty", .members = 0, .parts = a_parts, .count = 5},
    {.group = "b\"q", .state = "Stable", .members = 2},
};

static void render_lines(void **state)
{
    (void)state;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_groups_render_lags(groups, 2, &b));
    assert_string_equal(
        b.data, "# TYPE kafka_consumergroup_current_offset gauge\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 4\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"t\",partition=\"1\"} -1\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"t\",partition=\"2\"} 12\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 2\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"u\",partition=\"1\"} 7\n"
                "# TYPE kafka_consumergroup_current_offset_sum untyped\n"
                "kafka_consumergroup_current_offset_sum{consumergroup=\"a\",topic=\"t\"} 15\n"
                "kafka_consumergroup_current_offset_sum{consumergroup=\"a\",topic=\"u\"} 9\n"
                "# TYPE kafka_consumergroup_lag gauge\n"
                "kafka_consumergroup_lag{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 6\n"
                "kafka_consumergroup_lag{consumergroup=\"a\",topic=\"t\",partition=\"1\"} -1\n"
                "kafka_consumergroup_lag{consumergroup=\"a\",topic=\"t\",partition=\"2\"} -2\n"
                "kafka_consumergroup_lag{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 7\n"
                "# TYPE kafka_consumergroup_lag_sum untyped\n"
                "kafka_consumergroup_lag_sum{consumergroup=\"a\",topic=\"t\"} 4\n"
                "# TYPE kafka_consumergroup_members gauge\n"
                "kafka_consumergroup_members{consumergroup=\"a\"} 0\n"
                "kafka_consumergroup_members{consumergroup=\"b\\\"q\"} 2\n"
                "# TYPE gregor_consumergroup_lag_records gauge\n"
                "gregor_consumergroup_lag_records{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 6\n"
                "gregor_consumergroup_lag_records{consumergroup=\"a\",topic=\"t\",partition=\"2\"} 0\n"
                "gregor_consumergroup_lag_records{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 4\n");
    gr_prom_buf_free(&b);

    gr_prom_buf_init(&b, 0); /* no group: each family's TYPE line only */
    assert_true(gr_metrics_groups_render_lags(NULL, 0, &b));
    assert_string_equal(b.data, "# TYPE kafka_consumergroup_current_offset gauge\n"
                                "# TYPE kafka_consumergroup_current_offset_sum untyped\n"
                                "# TYPE kafka_consumergroup_lag gauge\n"
                                "# TYPE kafka_consumergroup_lag_sum untyped\n"
                                "# TYPE kafka_consumergroup_members gauge\n"
                                "# TYPE gregor_consumergroup_lag_records gauge\n");
    gr_prom_buf_free(&b);

    gr_prom_buf_init(&b, 64); /* a buffer past its max: false */
    assert_false(gr_metrics_groups_render_lags(groups, 2, &b));
    gr_prom_buf_free(&b);
}

static void lag_json(void **state)
{
    (void)state;
    json_t *o = gr_group_lag_json(&groups[0]);
    assert_non_null(o);
    char *s = json_dumps(o, JSON_COMPACT);
    assert_string_equal(s, "{\"group\":\"a\",\"state\":\"Empty\",\"members\":0,\"partitions\":["
                           "{\"topic\":\"t\",\"partition\":0,\"committed_offset\":4,\"high_watermark\":10,"
                           "\"log_start_offset\":0,\"lag_records\":6,"
                           "\"lag_bytes\":120,\"lag_seconds\":2.5,\"retention_headroom_records\":4,"
                           "\"retention_headroom_seconds\":3600.5},"
                           "{\"topic\":\"t\",\"partition\":2,\"committed_offset\":12,\"high_watermark\":10,"
                           "\"log_start_offset\":0,\"lag_records\":0,"
                           "\"lag_bytes\":null,\"lag_seconds\":null,\"retention_headroom_records\":null,"
                           "\"retention_headroom_seconds\":null},"
                           "{\"topic\":\"u\",\"partition\":0,\"committed_offset\":2,\"high_watermark\":9,"
                           "\"log_start_offset\":5,\"lag_records\":4,"
                           "\"lag_bytes\":300,\"lag_seconds\":null,\"retention_headroom_records\":-3,"
                           "\"retention_headroom_seconds\":\"+Inf\"},"
                           "{\"topic\":\"u\",\"partition\":1,\"committed_offset\":7,\"high_watermark\":null,"
                           "\"log_start_offset\":null,\"lag_records\":null,"
                           "\"lag_bytes\":null,\"lag_seconds\":null,\"retention_headroom_records\":null,"
                           "\"retention_headroom_seconds\":null}]}");
    free(s);
    json_decref(o);
    o = gr_group_lag_json(&groups[1]);
    s = json_dumps(o, JSON_COMPACT);
    assert_string_equal(s, "{\"group\":\"b\\\"q\",\"state\":\"Stable\",\"members\":2,\"partitions\":[]}");
    free(s);
    json_decref(o);
}

/* The admin path on a broker whose group coordinator is not started (no group exists). */
static void http_paths(void **state)
{
    (void)state;
    struct gr_broker *b = calloc(1, sizeof *b);
    assert_non_null(b);
    char *body = NULL;
    assert_int_equal(gr_metrics_groups_http(b, "/v1/groups/x/lagg", &body), 0);
    assert_int_equal(gr_metrics_groups_http(b, "/v1/groups/lag", &body), 0); /* no room for a group */
    assert_int_equal(gr_metrics_groups_http(b, "/v1/group/x/lag", &body), 0);
    assert_null(body);
    assert_int_equal(gr_metrics_groups_http(b, "/v1/groups/x/lag", &body), 404);
    assert_string_equal(body, "{\"error\":\"unknown group\",\"group\":\"x\"}");
    free(body);
    assert_int_equal(gr_metrics_groups_http(b, "/v1/groups//lag", &body), 404); /* the empty id: no group */
    free(body);
    char url[GR_GROUP_LAG_ID_MAX + 32];
    strcpy(url, "/v1/groups/");
    memset(url + strlen(url), 'g', GR_GROUP_LAG_ID_MAX);
    strcpy(url + strlen("/v1/groups/") + GR_GROUP_LAG_ID_MAX, "/lag");
    assert_int_equal(gr_metrics_groups_http(b, url, &body), 404); /* at the bound: looked up */
    free(body);
    strcpy(url + strlen("/v1/groups/") + GR_GROUP_LAG_ID_MAX, "g/lag");
    assert_int_equal(gr_metrics_groups_http(b, url, &body), 400); /* one byte over */
    assert_string_equal(body, "{\"error\":\"group id longer than 4096 bytes\"}");
    free(body);
    free(b);
}

/* Label values off the wire may be any bytes: each byte outside a valid UTF-8 sequence becomes U+FFFD
   (common/prom_text.c), so one odd group id cannot make Prometheus refuse the whole page. */
static void label_values_utf8(void **state)
{
    (void)state;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    struct gr_prom_label l = {"consumergroup", "a\xff\"b\xe2\x82\xac\xc0\xaf\xed\xa0\x80z\xe2\x82"};
    gr_prom_sample(&b, "m", &l, 1, 1);
    assert_string_equal(b.data, "m{consumergroup=\"a\xef\xbf\xbd\\\"b\xe2\x82\xac" /* valid U+20AC kept */
                                "\xef\xbf\xbd\xef\xbf\xbd"                         /* overlong C0 AF */
                                "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"             /* surrogate ED A0 80 */
                                "z\xef\xbf\xbd\xef\xbf\xbd\"} 1\n");               /* truncated at the end */
    assert_int_equal(gr_prom_utf8_len("\xf4\x8f\xbf\xbf"), 4);                     /* U+10FFFF */
    assert_int_equal(gr_prom_utf8_len("\xf4\x90\x80\x80"), 0);                     /* above it */
    gr_prom_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(value_rules), cmocka_unit_test(render_lines),      cmocka_unit_test(lag_json),
        cmocka_unit_test(http_paths),  cmocka_unit_test(label_values_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
