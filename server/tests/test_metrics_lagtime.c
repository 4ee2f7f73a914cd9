/*
 * test_metrics_lagtime.c: the exact lines of the lag-in-bytes/seconds and retention-headroom families
 * (server/metrics_lagtime.c gr_metrics_lagtime_write): one # TYPE per family, labels in the order
 * consumergroup, topic, partition, +Inf as Prometheus spells it, an unknown lag_seconds left out, and the
 * group's min headroom (+Inf for a group with commits but no partition reported here).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/prom_text.h"
#include "server/metrics_lagtime.h"

static void writes_exact_lines(void **state)
{
    (void)state;
    struct gr_lagtime_row rows[4] = {
        {"g1", "t", 0, {.bytes = 1300, .seconds = 4.5, .headroom_records = 12, .headroom_seconds = 80}},
        {"g1", "t", 1, {.bytes = 0, .seconds = -1, .headroom_records = -3, .headroom_seconds = 0}},
        {"g2", "u\"v", 0, {.bytes = 7, .seconds = 0, .headroom_records = 5, .headroom_seconds = INFINITY}},
        {"g3", NULL, -1, {0}},
    };
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_lagtime_write(rows, 4, &b));
    assert_string_equal(
        b.data, "# TYPE gregor_consumergroup_lag_bytes gauge\n"
                "gregor_consumergroup_lag_bytes{consumergroup=\"g1\",topic=\"t\",partition=\"0\"} 1300\n"
                "gregor_consumergroup_lag_bytes{consumergroup=\"g1\",topic=\"t\",partition=\"1\"} 0\n"
                "gregor_consumergroup_lag_bytes{consumergroup=\"g2\",topic=\"u\\\"v\",partition=\"0\"} 7\n"
                "# TYPE gregor_consumergroup_lag_seconds gauge\n"
                "gregor_consumergroup_lag_seconds{consumergroup=\"g1\",topic=\"t\",partition=\"0\"} 4.5\n"
                "gregor_consumergroup_lag_seconds{consumergroup=\"g2\",topic=\"u\\\"v\",partition=\"0\"} 0\n"
                "# TYPE gregor_consumergroup_retention_headroom_records gauge\n"
                "gregor_consumergroup_retention_headroom_records{consumergroup=\"g1\",topic=\"t\",partition="
                "\"0\"} 12\n"
                "gregor_consumergroup_retention_headroom_records{consumergroup=\"g1\",topic=\"t\",partition="
                "\"1\"} -3\n"
                "gregor_consumergroup_retention_headroom_records{consumergroup=\"g2\",topic=\"u\\\"v\","
                "partition=\"0\"} 5\n"
                "# TYPE gregor_consumergroup_retention_headroom_seconds gauge\n"
                "gregor_consumergroup_retention_headroom_seconds{consumergroup=\"g1\",topic=\"t\",partition="
                "\"0\"} 80\n"
                "gregor_consumergroup_retention_headroom_seconds{consumergroup=\"g1\",topic=\"t\",partition="
                "\"1\"} 0\n"
                "gregor_consumergroup_retention_headroom_seconds{consumergroup=\"g2\",topic=\"u\\\"v\","
                "partition=\"0\"} +Inf\n"
                "# TYPE gregor_consumergroup_min_retention_headroom_seconds gauge\n"
                "gregor_consumergroup_min_retention_headroom_seconds{consumergroup=\"g1\"} 0\n"
                "gregor_consumergroup_min_retention_headroom_seconds{consumergroup=\"g2\"} +Inf\n"
                "gregor_consumergroup_min_retention_headroom_seconds{consumergroup=\"g3\"} +Inf\n");
    gr_prom_buf_free(&b);
}

static void no_groups_types_only(void **state)
{
    (void)state;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_lagtime_write(NULL, 0, &b));
    assert_string_equal(b.data, "# TYPE gregor_consumergroup_lag_bytes gauge\n"
                                "# TYPE gregor_consumergroup_lag_seconds gauge\n"
                                "# TYPE gregor_consumergroup_retention_headroom_records gauge\n"
                                "# TYPE gregor_consumergroup_retention_headroom_seconds gauge\n"
                                "# TYPE gregor_consumergroup_min_retention_headroom_seconds gauge\n");
    gr_prom_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_exact_lines),
        cmocka_unit_test(no_groups_types_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
