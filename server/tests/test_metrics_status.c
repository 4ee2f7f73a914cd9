/*
 * test_metrics_status.c: the records-lost counting and the group status of server/metrics_status.c against a
 * coordinator on the test clock (coordinator/tests/fake.h): several groups, committed offsets below, inside
 * and above the deleted range, another partition, two moves in a row; a group's status from its commits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/group_status.h"
#include "coordinator/tests/fake.h"
#include "server/metrics_status.h"

static void commit(struct gr_coordinator *c, const char *group, const char *topic, int32_t partition,
                   int64_t offset)
{
    struct gr_commit_partition cp = {partition, offset, -1, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {gr_str_c(group), GR_STR_NULL, GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(c, &p, &wp, &we);
    assert_int_equal(cp.error_code, 0);
}

static void test_count_lost(void **state)
{
    (void)state;
    struct fake_env env = {0};
    struct gr_coordinator *c = fake_coord(&env, NULL);
    struct gr_metrics_status s = {0};
    commit(c, "a", "t", 0, 3);  /* below L0 */
    commit(c, "b", "t", 0, 12); /* between L0 and L1 */
    commit(c, "c", "t", 0, 20); /* at or past L1 */
    commit(c, "d", "t", 1, 0);  /* another partition */
    commit(c, "e", "u", 0, 0);  /* another topic */
    /* 5 -> 15: a loses 15 - 5 = 10, b 15 - 12 = 3, c nothing */
    assert_int_equal(gr_metrics_status_count_lost(&s, c, "t", 0, 5, 15), 13);
    assert_int_equal(gr_metrics_status_lost(&s, "a", "t"), 10);
    assert_int_equal(gr_metrics_status_lost(&s, "b", "t"), 3);
    assert_int_equal(gr_metrics_status_lost(&s, "c", "t"), 0);
    assert_int_equal(gr_metrics_status_lost(&s, "d", "t"), 0);
    assert_int_equal(gr_metrics_status_lost(&s, "e", "u"), 0);
    /* 15 -> 25: a and b below the old start lose the whole move (10 each), c 25 - 20 = 5 */
    assert_int_equal(gr_metrics_status_count_lost(&s, c, "t", 0, 15, 25), 25);
    assert_int_equal(gr_metrics_status_lost(&s, "a", "t"), 20);
    assert_int_equal(gr_metrics_status_lost(&s, "b", "t"), 13);
    assert_int_equal(gr_metrics_status_lost(&s, "c", "t"), 5);
    /* no move, or a lower start: nothing; no coordinator: nothing */
    assert_int_equal(gr_metrics_status_count_lost(&s, c, "t", 0, 25, 25), 0);
    assert_int_equal(gr_metrics_status_count_lost(&s, c, "t", 0, 25, 10), 0);
    assert_int_equal(gr_metrics_status_count_lost(&s, NULL, "t", 0, 0, 100), 0);
    /* partition 1 of t: d at 0 loses 0 -> 7 */
    assert_int_equal(gr_metrics_status_count_lost(&s, c, "t", 1, 0, 7), 7);
    assert_int_equal(gr_metrics_status_lost(&s, "d", "t"), 7);
    assert_int_equal(gr_metrics_status_lost(&s, "a", "t"), 20);
    gr_metrics_status_free(&s);
    assert_int_equal(gr_metrics_status_lost(&s, "a", "t"), 0);
    gr_coord_destroy(c);
    fake_env_free(&env);
}

static int64_t hw_t0 = 0, hw_t1 = 0;
static int64_t hw_of(void *ctx, const char *topic, int32_t partition)
{
    (void)ctx;
    if (strcmp(topic, "t")) return -1; /* not held here */
    return partition == 0 ? hw_t0 : partition == 1 ? hw_t1 : -1;
}

static void test_group_status(void **state)
{
    (void)state;
    struct fake_env env = {0};
    env.wall_ms = 5000000;
    struct gr_coordinator *c = fake_coord(&env, NULL);
    gr_coord_set_hw_fn(c, hw_of, NULL);
    /* "ok": caught up at each commit and now; "stall": offset 2 while the log grows; "warn": advancing but
       the lag grows; "far": commits only to a partition not held here; "mix": one OK, one stalled partition
     */
    for (int i = 0; i < 3; i++) {
        hw_t0 = 10 * (i + 1);
        hw_t1 = 10 * (i + 1);
        commit(c, "ok", "t", 0, hw_t0);
        commit(c, "stall", "t", 0, 2);
        commit(c, "warn", "t", 0, 1 + i);
        commit(c, "far", "u", 0, 1);
        commit(c, "mix", "t", 0, hw_t0);
        commit(c, "mix", "t", 1, 2);
        env.wall_ms += 1000;
    }
    int64_t now = env.wall_ms - 1000 + 500; /* 0.5 s after the last commits, within the 2 s span */
    assert_int_equal(gr_metrics_status_group(c, "ok", now, hw_of, NULL), GR_STATUS_OK);
    assert_int_equal(gr_metrics_status_group(c, "stall", now, hw_of, NULL), GR_STATUS_ERR);
    assert_int_equal(gr_metrics_status_group(c, "warn", now, hw_of, NULL), GR_STATUS_WARN);
    assert_int_equal(gr_metrics_status_group(c, "far", now, hw_of, NULL), GR_STATUS_NOTFOUND);
    assert_int_equal(gr_metrics_status_group(c, "mix", now, hw_of, NULL), GR_STATUS_ERR);
    assert_int_equal(gr_metrics_status_group(c, "nosuch", now, hw_of, NULL), GR_STATUS_NOTFOUND);
    /* records arrive after "ok"'s last commit: lag 5 now; 2.5 s later (> the 2 s span) it is stopped unless
       the lag was 0 recently: its last commit saw the log end, 2.5 s ago: OK */
    hw_t0 = 35;
    assert_int_equal(gr_metrics_status_group(c, "ok", now + 2000, hw_of, NULL), GR_STATUS_OK);
    /* past GR_STATUS_RECENT_MS that commit is no longer recent: STOP, reported as ERR */
    assert_int_equal(gr_metrics_status_group(c, "ok", now + GR_STATUS_RECENT_MS + 1000, hw_of, NULL),
                     GR_STATUS_ERR);
    gr_coord_destroy(c);
    fake_env_free(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_lost),
        cmocka_unit_test(test_group_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
