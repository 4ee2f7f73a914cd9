/*
 * test_group_status.c: Burrow's status rules (coordinator/group_status.c) on scripted commit windows, with
 * Burrow's own evaluator cases (linkedin/Burrow core/internal/evaluator/caching_test.go, cases 0-11: times
 * in ms here, their "now" seconds times 1000), a WARN case, the group rollup, the recent high watermarks, the
 * records-lost arithmetic, and the windows the coordinator keeps: filled by OffsetCommit with the lag at
 * commit, 10 deep, gone with the offset, not filled by a replay.
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

#define S(o, t, l)                                                                                           \
    {                                                                                                        \
        (o), (t), (l)                                                                                        \
    }
#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static enum gr_status eval(const struct gr_commit_sample *s, int n, int64_t current_lag, const int64_t *hw,
                           int nhw, int64_t now_s)
{
    return gr_status_partition(s, n, current_lag, hw, nhw, now_s * 1000);
}

static void test_burrow_cases(void **state)
{
    (void)state;
    /* 0: lag 0 at the first commit: OK (lag not decreasing, but rule 1 stops the checks) */
    struct gr_commit_sample a[] = {S(1000, 100000, 0), S(2000, 200000, 50), S(3000, 300000, 100),
                                   S(4000, 400000, 150), S(5000, 500000, 200)};
    int64_t hw_a[] = {5200};
    assert_int_equal(eval(a, N(a), 200, hw_a, 1, 600), GR_STATUS_OK);
    /* 1: 400 s since the last commit equals the span (500 - 100): not stopped (strict) */
    assert_int_equal(eval(a, N(a), 200, hw_a, 1, 900), GR_STATUS_OK);
    /* 2: 500 s > 400 s: STOP even though the lag was 0 at the start */
    assert_int_equal(eval(a, N(a), 200, hw_a, 1, 1000), GR_STATUS_STOP);
    /* 3: STOP with the lag never 0 */
    struct gr_commit_sample b[] = {S(1000, 100000, 50), S(2000, 200000, 100), S(3000, 300000, 150),
                                   S(4000, 400000, 200), S(5000, 500000, 250)};
    int64_t hw_b[] = {5250};
    assert_int_equal(eval(b, N(b), 250, hw_b, 1, 1000), GR_STATUS_STOP);
    /* the same window before the stop: offsets advance, lag never decreases: WARN */
    assert_int_equal(eval(b, N(b), 250, hw_b, 1, 600), GR_STATUS_WARN);
    /* 8: current lag 0: OK although the timestamps say stopped */
    assert_int_equal(eval(b, N(b), 0, hw_b, 1, 1000), GR_STATUS_OK);
    /* 4: same offset throughout but lag 0 once: OK */
    struct gr_commit_sample c[] = {S(1000, 100000, 0), S(1000, 200000, 50), S(1000, 300000, 100),
                                   S(1000, 400000, 150), S(1000, 500000, 200)};
    int64_t hw_c[] = {1200};
    assert_int_equal(eval(c, N(c), 200, hw_c, 1, 600), GR_STATUS_OK);
    /* 5: the same with lag never 0: STALL */
    struct gr_commit_sample d[] = {S(1000, 100000, 100), S(1000, 200000, 150), S(1000, 300000, 200),
                                   S(1000, 400000, 250), S(1000, 500000, 300)};
    int64_t hw_d[] = {1300};
    assert_int_equal(eval(d, N(d), 300, hw_d, 1, 600), GR_STATUS_STALL);
    /* 6: STALL with a constant lag */
    struct gr_commit_sample e[] = {S(1000, 100000, 100), S(1000, 200000, 100), S(1000, 300000, 100),
                                   S(1000, 400000, 100), S(1000, 500000, 100)};
    int64_t hw_e[] = {1100};
    assert_int_equal(eval(e, N(e), 100, hw_e, 1, 600), GR_STATUS_STALL);
    /* 7: an offset goes back: REWIND although the lag decreases */
    struct gr_commit_sample f[] = {S(1000, 100000, 100), S(2000, 200000, 150), S(3000, 300000, 200),
                                   S(2000, 400000, 1250), S(4000, 500000, 300)};
    int64_t hw_f[] = {4300};
    assert_int_equal(eval(f, N(f), 300, hw_f, 1, 600), GR_STATUS_REWIND);
    /* 9: caught up at every commit, then stopped while records arrive (broker offsets all past it): STOP */
    struct gr_commit_sample g[15];
    for (int i = 0; i < 15; i++)
        g[i] = (struct gr_commit_sample){792748079 + i, 1512224618356 + i * 1001, 0};
    int64_t hw_g9[] = {792749024, 792749000, 792748800, 792748600, 792748500};
    assert_int_equal(eval(g, 15, 931, hw_g9, 5, 1512224650), GR_STATUS_STOP);
    /* 10: the same, but a recent broker offset equals the last commit: the lag was 0 recently: OK */
    int64_t hw_g10[] = {792748094, 792748093, 792748093, 792748093};
    assert_int_equal(eval(g, 15, 1, hw_g10, 4, 1512224650), GR_STATUS_OK);
    /* 11: case 0 with unknown lags between: unknown is not 0 and is skipped by the decrease check: OK */
    struct gr_commit_sample h[] = {S(1000, 100000, 0),   S(1500, 150000, -1),  S(2000, 200000, 50),
                                   S(2500, 250000, -1),  S(3000, 300000, 100), S(3500, 350000, -1),
                                   S(4000, 400000, 150), S(4500, 450000, -1),  S(5000, 500000, 200),
                                   S(5500, 550000, -1)};
    int64_t hw_h[] = {5700};
    assert_int_equal(eval(h, N(h), 200, hw_h, 1, 600), GR_STATUS_OK);
    /* without the first commit's lag 0, the unknown lags are skipped: increasing known lags: WARN */
    assert_int_equal(eval(h + 1, N(h) - 1, 200, hw_h, 1, 600), GR_STATUS_WARN);
    /* one lag decrease anywhere: OK */
    struct gr_commit_sample k[] = {S(1000, 100000, 100), S(2000, 200000, 150), S(3000, 300000, 120)};
    int64_t hw_k[] = {3120};
    assert_int_equal(eval(k, N(k), 120, hw_k, 1, 400), GR_STATUS_OK);
    /* a single commit: stopped as soon as any time passed (span 0), unless the lag was 0 recently */
    struct gr_commit_sample one[] = {S(10, 1000, 5)};
    int64_t hw_one[] = {15};
    assert_int_equal(gr_status_partition(one, 1, 5, hw_one, 1, 1000), GR_STATUS_STALL);
    assert_int_equal(gr_status_partition(one, 1, 5, hw_one, 1, 1001), GR_STATUS_STOP);
    int64_t hw_one_zero[] = {10, 15};
    assert_int_equal(gr_status_partition(one, 1, 5, hw_one_zero, 2, 1001), GR_STATUS_STALL);
    /* nothing to evaluate: OK as Burrow */
    assert_int_equal(gr_status_partition(NULL, 0, 5, NULL, 0, 1000), GR_STATUS_OK);
}

static void test_rollup(void **state)
{
    (void)state;
    assert_int_equal(gr_status_rollup(GR_STATUS_OK, GR_STATUS_OK), GR_STATUS_OK);
    assert_int_equal(gr_status_rollup(GR_STATUS_OK, GR_STATUS_WARN), GR_STATUS_WARN);
    assert_int_equal(gr_status_rollup(GR_STATUS_WARN, GR_STATUS_OK), GR_STATUS_WARN);
    assert_int_equal(gr_status_rollup(GR_STATUS_WARN, GR_STATUS_STALL), GR_STATUS_ERR);
    assert_int_equal(gr_status_rollup(GR_STATUS_OK, GR_STATUS_STOP), GR_STATUS_ERR);
    assert_int_equal(gr_status_rollup(GR_STATUS_OK, GR_STATUS_REWIND), GR_STATUS_ERR);
    assert_int_equal(gr_status_rollup(GR_STATUS_ERR, GR_STATUS_WARN), GR_STATUS_ERR);
    /* a group's partitions OK, WARN, STALL, OK: ERR (3) */
    enum gr_status parts[] = {GR_STATUS_OK, GR_STATUS_WARN, GR_STATUS_STALL, GR_STATUS_OK};
    enum gr_status g = GR_STATUS_OK;
    for (int i = 0; i < 4; i++)
        g = gr_status_rollup(g, parts[i]);
    assert_int_equal(g, 3);
}

static void test_recent_hw(void **state)
{
    (void)state;
    struct gr_commit_sample s[] = {S(10, 1000, 5), S(20, 50000, -1), S(30, 150000, 0), S(40, 200000, 7)};
    int64_t out[5];
    /* now 200000, recent 100000: commits at >= 100000 with a known lag (30+0, 40+7), then the current */
    int n = gr_status_recent_hw(s, 4, 99, 200000, 100000, out);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 30);
    assert_int_equal(out[1], 47);
    assert_int_equal(out[2], 99);
    /* all recent: the unknown lag is still left out; no current high watermark */
    n = gr_status_recent_hw(s, 4, -1, 200000, 1000000, out);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 15);
}

static void test_records_lost_arithmetic(void **state)
{
    (void)state;
    /* L0 = 100 -> L1 = 150 */
    assert_int_equal(gr_status_records_lost(40, 100, 150), 50);  /* c < L0: the whole move */
    assert_int_equal(gr_status_records_lost(100, 100, 150), 50); /* c = L0 */
    assert_int_equal(gr_status_records_lost(120, 100, 150), 30); /* L0 <= c < L1: L1 - c */
    assert_int_equal(gr_status_records_lost(149, 100, 150), 1);
    assert_int_equal(gr_status_records_lost(150, 100, 150), 0); /* c >= L1: nothing */
    assert_int_equal(gr_status_records_lost(900, 100, 150), 0);
    assert_int_equal(gr_status_records_lost(40, 150, 150), 0); /* no move */
    assert_int_equal(gr_status_records_lost(40, 150, 100), 0); /* a lowered start is no loss */
}

static void test_window_ring(void **state)
{
    (void)state;
    struct gr_commit_window w = {0};
    struct gr_commit_sample out[GR_STATUS_WINDOW];
    assert_int_equal(gr_commit_window_samples(&w, out), 0);
    for (int i = 0; i < 13; i++)
        gr_commit_window_add(&w, 100 + i, 1000 * i, i == 5 ? -7 : i);
    assert_int_equal(gr_commit_window_samples(&w, out), GR_STATUS_WINDOW);
    for (int i = 0; i < GR_STATUS_WINDOW; i++) { /* the last 10 of 13, oldest first */
        assert_int_equal(out[i].offset, 103 + i);
        assert_int_equal(out[i].time_ms, 1000 * (3 + i));
        assert_int_equal(out[i].lag, 3 + i == 5 ? -1 : 3 + i);
    }
}

/* ---- the coordinator's windows ---- */

static int64_t fake_hw = -1;
static int64_t hw_of(void *ctx, const char *topic, int32_t partition)
{
    (void)ctx;
    return strcmp(topic, "t") == 0 && partition == 0 ? fake_hw : -1;
}

static int16_t commit(struct gr_coordinator *c, const char *group, const char *topic, int32_t partition,
                      int64_t offset)
{
    struct gr_commit_partition cp = {partition, offset, -1, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {gr_str_c(group), GR_STR_NULL, GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(c, &p, &wp, &we);
    return cp.error_code;
}

struct seen {
    int n;
    char topic[8];
    int32_t partition;
    int64_t committed;
    struct gr_commit_sample s[GR_STATUS_WINDOW];
    int count; /* -1: no window */
};

static void see(void *ctx, const char *topic, int32_t partition, int64_t committed,
                const struct gr_commit_window *w)
{
    struct seen *x = ctx;
    x->n++;
    strncpy(x->topic, topic, sizeof x->topic - 1);
    x->partition = partition;
    x->committed = committed;
    x->count = w ? gr_commit_window_samples(w, x->s) : -1;
}

static struct seen seen_of(struct gr_coordinator *c, const char *group)
{
    struct seen x = {0};
    struct gr_group *grp = gr_coord_group_find(c, gr_str_c(group));
    if (grp) gr_coord_status_foreach(grp, see, &x);
    return x;
}

struct committed {
    int n;
    int64_t sum;
    char groups[32];
};

static void on_committed(void *ctx, const char *group_id, int64_t committed)
{
    struct committed *x = ctx;
    x->n++;
    x->sum += committed;
    strncat(x->groups, group_id, sizeof x->groups - strlen(x->groups) - 2);
    strcat(x->groups, ",");
}

static void test_coordinator_windows(void **state)
{
    (void)state;
    struct fake_env env = {0};
    env.wall_ms = 1000000;
    struct gr_coordinator *c = fake_coord(&env, NULL);
    gr_coord_set_hw_fn(c, hw_of, NULL);
    fake_hw = 8;
    assert_int_equal(commit(c, "g", "t", 0, 5), 0);
    struct seen x = seen_of(c, "g");
    assert_int_equal(x.n, 1);
    assert_int_equal(x.count, 1);
    assert_int_equal(x.s[0].offset, 5);
    assert_int_equal(x.s[0].lag, 3); /* high watermark 8 - 5 */
    assert_int_equal(x.s[0].time_ms, 1000000);
    /* a partition whose high watermark is not known here: lag unknown (-1); one ahead of it: 0 */
    assert_int_equal(commit(c, "h", "u", 0, 5), 0);
    assert_int_equal(seen_of(c, "h").s[0].lag, -1);
    fake_hw = 4;
    assert_int_equal(commit(c, "g", "t", 0, 6), 0);
    x = seen_of(c, "g");
    assert_int_equal(x.count, 2);
    assert_int_equal(x.s[1].lag, 0);
    /* 12 more commits a second apart: the window keeps the last 10 */
    for (int i = 0; i < 12; i++) {
        env.wall_ms += 1000;
        fake_hw = 100 + i;
        assert_int_equal(commit(c, "g", "t", 0, 10 + i), 0);
    }
    x = seen_of(c, "g");
    assert_int_equal(x.count, GR_STATUS_WINDOW);
    assert_int_equal(x.committed, 21);
    for (int i = 0; i < GR_STATUS_WINDOW; i++) {
        assert_int_equal(x.s[i].offset, 12 + i);
        assert_int_equal(x.s[i].lag, 90);
        assert_int_equal(x.s[i].time_ms, 1000000 + 1000 * (3 + i));
    }
    /* the groups with a committed offset of t-0: g at 21 and k at 3 (h committed to u-0 only) */
    assert_int_equal(commit(c, "k", "t", 0, 3), 0);
    struct committed cm = {0};
    gr_coord_committed_foreach(c, "t", 0, on_committed, &cm);
    assert_int_equal(cm.n, 2);
    assert_int_equal(cm.sum, 24);
    assert_string_equal(cm.groups, "g,k,");

    /* a replay of the log into a fresh coordinator: offsets back, windows not (no high watermark then) */
    struct fake_env env2 = {0};
    struct gr_coordinator *c2 = fake_coord(&env2, NULL);
    gr_coord_set_hw_fn(c2, hw_of, NULL);
    for (int i = 0; i < env.rec_count; i++)
        assert_int_equal(gr_coord_replay(c2, env.recs[i].key, env.recs[i].key_len, env.recs[i].value,
                                         env.recs[i].value_len),
                         0);
    x = seen_of(c2, "g");
    assert_int_equal(x.n, 1);
    assert_int_equal(x.committed, 21);
    assert_int_equal(x.count, -1);
    /* removing the offset frees the window (the sanitizer stage checks the memory) */
    struct gr_offset_delete_partition dp = {0, -99};
    struct gr_offset_delete_topic dt = {gr_str_c("t"), &dp, 1};
    assert_int_equal(gr_coord_offset_delete(c, gr_str_c("g"), &dt, 1), 0);
    assert_int_equal(seen_of(c, "g").n, 0);
    gr_coord_destroy(c2);
    fake_env_free(&env2);
    gr_coord_destroy(c);
    fake_env_free(&env);
}

static int16_t txn_commit(struct gr_coordinator *c, const char *group, int64_t pid, int64_t offset)
{
    struct gr_commit_partition cp = {0, offset, -1, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c("t"), &cp, 1};
    struct gr_txn_commit_params p = {gr_str_c(group), gr_str_c(""), GR_STR_NULL, -1, pid, 0, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_txn_commit(c, &p, &wp, &we);
    return cp.error_code;
}

/* TxnOffsetCommit: into the window when the COMMIT marker is written, not before, not on ABORT, not when a
   marker already in the log is applied (gr_coord_txn_marker_apply: the load's path). */
static void test_txn_windows(void **state)
{
    (void)state;
    struct fake_env env = {0};
    env.wall_ms = 2000000;
    struct gr_coordinator *c = fake_coord(&env, NULL);
    gr_coord_set_hw_fn(c, hw_of, NULL);
    int32_t part = gr_coord_partition(c, gr_str_c("x"));
    int64_t end;
    fake_hw = 50;
    assert_int_equal(txn_commit(c, "x", 7, 40), 0);
    assert_int_equal(seen_of(c, "x").n, 0); /* pending: not committed yet */
    assert_int_equal(gr_coord_txn_complete(c, part, 7, 0, 5, true, &end), 0);
    struct seen x = seen_of(c, "x");
    assert_int_equal(x.count, 1);
    assert_int_equal(x.s[0].offset, 40);
    assert_int_equal(x.s[0].lag, 10);
    assert_int_equal(txn_commit(c, "x", 7, 45), 0);
    assert_int_equal(gr_coord_txn_complete(c, part, 7, 0, 5, false, &end), 0); /* ABORT */
    x = seen_of(c, "x");
    assert_int_equal(x.count, 1);
    assert_int_equal(x.committed, 40);
    assert_int_equal(txn_commit(c, "x", 8, 47), 0);
    assert_int_equal(gr_coord_txn_marker_apply(c, part, 8, true), 1); /* committed, as a load applies it */
    x = seen_of(c, "x");
    assert_int_equal(x.committed, 47);
    assert_int_equal(x.count, 1);
    gr_coord_destroy(c);
    fake_env_free(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burrow_cases), cmocka_unit_test(test_rollup),
        cmocka_unit_test(test_recent_hw),    cmocka_unit_test(test_records_lost_arithmetic),
        cmocka_unit_test(test_window_ring),  cmocka_unit_test(test_coordinator_windows),
        cmocka_unit_test(test_txn_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
