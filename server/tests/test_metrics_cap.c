/*
 * test_metrics_cap.c: issue #22's per-partition series cap (server/metrics_cap.c) and the page written in
 * slices (server/metrics_page.c, the slice writers of metrics_groups.c and metrics_lagtime.c), pure: the
 * cap's order (larger lag first, ties by group/topic/partition, unknown lag last), the exact kept lines with
 * the aggregates over every row and the exact count of left-out samples, and a page cut into slices and
 * blocks of several sizes, byte for byte the one-shot text.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/prom_text.h"
#include "server/metrics_cap.h"
#include "server/metrics_groups.h"
#include "server/metrics_lagtime.h"
#include "server/metrics_page.h"

/* Group "a": t/0 committed 4 of hw 10 (lag 6), t/1 no commit (lag unknown), t/2 committed 12 above hw 10
   (lag -2), u/0 committed 2 of 9 (lag 7), u/1 led elsewhere (committed 7, lag unknown). Group "b\"q": no
   commits. Group "c": t/0 committed 4 of 10 (lag 6: a tie with a's t/0). */
static struct gr_group_lag_part a_parts[] = {
    {"t", 0, 4, true, 10, 0, 10, false, 0, 0, 0, 0},   {"t", 1, -1, true, 10, 0, 10, false, 0, 0, 0, 0},
    {"t", 2, 12, true, 10, 0, 10, false, 0, 0, 0, 0},  {"u", 0, 2, true, 9, 5, 9, false, 0, 0, 0, 0},
    {"u", 1, 7, false, -1, -1, -1, false, 0, 0, 0, 0},
};
static struct gr_group_lag_part c_parts[] = {{"t", 0, 4, true, 10, 0, 10, false, 0, 0, 0, 0}};
static const struct gr_group_lag groups[] = {
    {.group = "a", .state = "Empty", .members = 0, .parts = a_parts, .count = 5},
    {.group = "b\"q", .state = "Stable", .members = 2},
    {.group = "c", .state = "Stable", .members = 1, .parts = c_parts, .count = 1},
};
#define NGROUPS 3

/* The selection's rows of `groups`, as the page makes them (lag known: a commit and a known watermark). */
static int64_t rows_of(struct gr_metrics_cap_row *rows)
{
    int64_t n = 0;
    for (int g = 0; g < NGROUPS; g++)
        for (int32_t i = 0; i < groups[g].count; i++) {
            const struct gr_group_lag_part *p = &groups[g].parts[i];
            bool known = p->committed >= 0 && p->known;
            rows[n++] = (struct gr_metrics_cap_row){groups[g].group, p->topic, p->partition, known,
                                                    known ? p->high_watermark - p->committed : 0};
        }
    return n;
}

static void order_rules(void **state)
{
    (void)state;
    struct gr_metrics_cap_row big = {"z", "t", 9, true, 100}, small = {"a", "t", 0, true, 1},
                              neg = {"a", "t", 0, true, -5}, unknown = {"a", "a", 0, false, 0},
                              tie_a = {"a", "t", 3, true, 1}, tie_b = {"b", "a", 0, true, 1},
                              tie_p = {"a", "t", 10, true, 1}, tie_t = {"a", "u", 0, true, 1};
    assert_true(gr_metrics_cap_order(&big, &small) < 0); /* larger lag first, whatever the names */
    assert_true(gr_metrics_cap_order(&small, &big) > 0);
    assert_true(gr_metrics_cap_order(&neg, &unknown) < 0); /* a known negative lag before an unknown one */
    assert_true(gr_metrics_cap_order(&unknown, &neg) > 0);
    assert_true(gr_metrics_cap_order(&small, &tie_a) < 0); /* ties: partition */
    assert_true(gr_metrics_cap_order(&tie_a, &tie_b) < 0); /* group first */
    assert_true(gr_metrics_cap_order(&tie_a, &tie_p) < 0); /* 3 < 10 as numbers, not as text */
    assert_true(gr_metrics_cap_order(&tie_p, &tie_t) < 0); /* then topic */
    assert_int_equal(gr_metrics_cap_order(&tie_a, &tie_a), 0);
}

static void select_and_keep(void **state)
{
    (void)state;
    struct gr_metrics_cap_row rows[8];
    int64_t n = rows_of(rows);
    assert_int_equal(n, 6);
    struct gr_metrics_cap c;
    assert_int_equal(gr_metrics_cap_select(&c, rows, n, 3), 0);
    assert_true(c.capped);
    /* kept: a/u/0 (lag 7), a/t/0 (6), c/t/0 (6, after a's by group); out: a/t/2 (-2), a/t/1, a/u/1 (unknown)
     */
    assert_true(gr_metrics_cap_keep(&c, "a", "u", 0));
    assert_true(gr_metrics_cap_keep(&c, "a", "t", 0));
    assert_true(gr_metrics_cap_keep(&c, "c", "t", 0));
    assert_int_equal(c.dropped, 0);
    assert_false(gr_metrics_cap_keep(&c, "a", "t", 2));
    assert_false(gr_metrics_cap_keep(&c, "a", "t", 1));
    assert_false(gr_metrics_cap_keep(&c, "a", "u", 1));
    assert_false(gr_metrics_cap_keep(&c, "zz", "t", 0)); /* not seen by the selection */
    assert_int_equal(c.dropped, 4);
    gr_metrics_cap_free(&c);

    n = rows_of(rows); /* at the cap: everything kept, nothing counted */
    assert_int_equal(gr_metrics_cap_select(&c, rows, n, 6), 0);
    assert_false(c.capped);
    assert_true(gr_metrics_cap_keep(&c, "a", "t", 1));
    assert_int_equal(c.dropped, 0);
    gr_metrics_cap_free(&c);

    n = rows_of(rows); /* 0: no per-partition series at all */
    assert_int_equal(gr_metrics_cap_select(&c, rows, n, 0), 0);
    assert_false(gr_metrics_cap_keep(&c, "a", "u", 0));
    assert_int_equal(c.dropped, 1);
    gr_metrics_cap_free(&c);
    assert_true(gr_metrics_cap_keep(NULL, "a", "t", 1)); /* no cap */
}

static void capped_lines_and_aggregates(void **state)
{
    (void)state;
    struct gr_metrics_cap_row rows[8];
    int64_t n = rows_of(rows);
    struct gr_metrics_cap c;
    assert_int_equal(gr_metrics_cap_select(&c, rows, n, 2), 0); /* a/u/0 and a/t/0; c/t/0 loses the tie */
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    struct gr_metrics_groups_cursor cur = {0};
    assert_true(gr_metrics_groups_write_slice(groups, NGROUPS, &c, &cur, SIZE_MAX, &b));
    assert_string_equal(
        b.data, "# TYPE kafka_consumergroup_current_offset gauge\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 4\n"
                "kafka_consumergroup_current_offset{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 2\n"
                "# TYPE kafka_consumergroup_current_offset_sum untyped\n"
                "kafka_consumergroup_current_offset_sum{consumergroup=\"a\",topic=\"t\"} 15\n"
                "kafka_consumergroup_current_offset_sum{consumergroup=\"a\",topic=\"u\"} 9\n"
                "kafka_consumergroup_current_offset_sum{consumergroup=\"c\",topic=\"t\"} 4\n"
                "# TYPE kafka_consumergroup_lag gauge\n"
                "kafka_consumergroup_lag{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 6\n"
                "kafka_consumergroup_lag{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 7\n"
                "# TYPE kafka_consumergroup_lag_sum untyped\n"
                "kafka_consumergroup_lag_sum{consumergroup=\"a\",topic=\"t\"} 4\n"
                "kafka_consumergroup_lag_sum{consumergroup=\"c\",topic=\"t\"} 6\n"
                "# TYPE kafka_consumergroup_members gauge\n"
                "kafka_consumergroup_members{consumergroup=\"a\"} 0\n"
                "kafka_consumergroup_members{consumergroup=\"b\\\"q\"} 2\n"
                "kafka_consumergroup_members{consumergroup=\"c\"} 1\n"
                "# TYPE gregor_consumergroup_lag_records gauge\n"
                "gregor_consumergroup_lag_records{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 6\n"
                "gregor_consumergroup_lag_records{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 4\n");
    /* left out: current_offset a/t/1, a/t/2, a/u/1, c/t/0 (4); lag a/t/1 (-1), a/t/2, c/t/0 (3; a/u/1 has
       none: led elsewhere); lag_records a/t/2, c/t/0 (2) */
    assert_int_equal(c.dropped, 9);
    /* the lag families of the same rows, the same cap: a/t/0 and a/u/0 kept, c/t/0 left out, the min
       headroom over all rows of the group (c's 5 from its left-out row) */
    struct gr_lagtime_row lr[3] = {
        {"a", "t", 0, {.bytes = 10, .seconds = 1, .headroom_records = 4, .headroom_seconds = 50}},
        {"a", "u", 0, {.bytes = 20, .seconds = -1, .headroom_records = -3, .headroom_seconds = 0}},
        {"c", "t", 0, {.bytes = 30, .seconds = 2, .headroom_records = 4, .headroom_seconds = 5}},
    };
    gr_prom_buf_free(&b);
    gr_prom_buf_init(&b, 0);
    struct gr_metrics_lagtime_cursor lc = {0};
    assert_true(gr_metrics_lagtime_write_slice(lr, 3, &c, &lc, SIZE_MAX, &b));
    assert_string_equal(
        b.data,
        "# TYPE gregor_consumergroup_lag_bytes gauge\n"
        "gregor_consumergroup_lag_bytes{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 10\n"
        "gregor_consumergroup_lag_bytes{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 20\n"
        "# TYPE gregor_consumergroup_lag_seconds gauge\n"
        "gregor_consumergroup_lag_seconds{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 1\n"
        "# TYPE gregor_consumergroup_retention_headroom_records gauge\n"
        "gregor_consumergroup_retention_headroom_records{consumergroup=\"a\",topic=\"t\",partition=\"0\"} 4\n"
        "gregor_consumergroup_retention_headroom_records{consumergroup=\"a\",topic=\"u\",partition=\"0\"} "
        "-3\n"
        "# TYPE gregor_consumergroup_retention_headroom_seconds gauge\n"
        "gregor_consumergroup_retention_headroom_seconds{consumergroup=\"a\",topic=\"t\",partition=\"0\"} "
        "50\n"
        "gregor_consumergroup_retention_headroom_seconds{consumergroup=\"a\",topic=\"u\",partition=\"0\"} 0\n"
        "# TYPE gregor_consumergroup_min_retention_headroom_seconds gauge\n"
        "gregor_consumergroup_min_retention_headroom_seconds{consumergroup=\"a\"} 0\n"
        "gregor_consumergroup_min_retention_headroom_seconds{consumergroup=\"c\"} 5\n");
    assert_int_equal(c.dropped, 9 + 4); /* c/t/0's four samples */
    gr_prom_buf_free(&b);
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_cap_render(&c, &b));
    assert_string_equal(b.data,
                        "# TYPE gregor_metrics_series_dropped gauge\ngregor_metrics_series_dropped 13\n");
    gr_prom_buf_free(&b);
    gr_metrics_cap_free(&c);
}

/* A bigger snapshot: 7 groups x 2 topics x 9 partitions, lag rows for each committed one. */
#define BG 7
#define BT 2
#define BP 9
static struct gr_group_lag_part big_parts[BG][BT * BP];
static struct gr_group_lag big_groups[BG];
static struct gr_lagtime_row big_lag[BG * BT * BP];
static char gnames[BG][8];
static int nbig_lag;

static void make_big(void)
{
    static const char *const topics[BT] = {"alpha", "be\"ta"};
    nbig_lag = 0;
    for (int g = 0; g < BG; g++) {
        snprintf(gnames[g], sizeof gnames[g], "g%d", g);
        for (int t = 0; t < BT; t++)
            for (int p = 0; p < BP; p++) {
                int64_t committed = (g + p) % 4 == 0 ? -1 : (g * 7 + p * 3) % 50;
                big_parts[g][t * BP + p] = (struct gr_group_lag_part){
                    topics[t], p, committed, (p % 5) != 4, 60, (p % 3), 60, false, 0, 0, 0, 0};
                if (committed >= 0)
                    big_lag[nbig_lag++] = (struct gr_lagtime_row){gnames[g],
                                                                  topics[t],
                                                                  p,
                                                                  {.bytes = committed * 100,
                                                                   .seconds = p % 2 ? -1 : p * 0.5,
                                                                   .headroom_records = committed,
                                                                   .headroom_seconds = 1000.0 - p}};
            }
        big_groups[g] = (struct gr_group_lag){
            .group = gnames[g], .state = "Stable", .members = g, .parts = big_parts[g], .count = BT * BP};
    }
}

/* The groups then lag families, one-shot (budget SIZE_MAX), with `cap` rows kept (-1: no cap); the dropped
   count in *dropped. */
static char *one_shot(int64_t cap, uint64_t *dropped)
{
    struct gr_metrics_cap c = {0};
    struct gr_metrics_cap_row rows[BG * BT * BP];
    int64_t n = 0;
    for (int g = 0; g < BG; g++)
        for (int i = 0; i < big_groups[g].count; i++) {
            const struct gr_group_lag_part *p = &big_parts[g][i];
            bool known = p->committed >= 0 && p->known;
            rows[n++] = (struct gr_metrics_cap_row){gnames[g], p->topic, p->partition, known,
                                                    known ? p->high_watermark - p->committed : 0};
        }
    if (cap >= 0) assert_int_equal(gr_metrics_cap_select(&c, rows, n, cap), 0);
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    struct gr_metrics_groups_cursor gc = {0};
    struct gr_metrics_lagtime_cursor lc = {0};
    assert_true(gr_metrics_groups_write_slice(big_groups, BG, &c, &gc, SIZE_MAX, &b));
    assert_true(gr_metrics_lagtime_write_slice(big_lag, nbig_lag, &c, &lc, SIZE_MAX, &b));
    *dropped = c.dropped;
    gr_metrics_cap_free(&c);
    return b.data;
}

/* A page over the same snapshot: the step writes the group families' slices, then the lag families'. */
struct fake {
    struct gr_metrics_cap c;
    struct gr_metrics_groups_cursor gc;
    struct gr_metrics_lagtime_cursor lc;
    bool groups_done;
    int steps, fail_at; /* fail_at > 0: that step fails */
};

static int fake_step(void *ctx, size_t budget, struct gr_prom_buf *out)
{
    struct fake *f = ctx;
    if (++f->steps == f->fail_at) return -1;
    if (!f->groups_done) {
        f->groups_done = gr_metrics_groups_write_slice(big_groups, BG, &f->c, &f->gc, budget, out);
        return out->failed ? -1 : 1;
    }
    bool done = gr_metrics_lagtime_write_slice(big_lag, nbig_lag, &f->c, &f->lc, budget, out);
    return out->failed ? -1 : done ? 0 : 1;
}

static void fake_free(void *ctx)
{
    gr_metrics_cap_free(&((struct fake *)ctx)->c);
    free(ctx);
}

/* Reads a whole page of budget `budget` in blocks of `block`; NULL when a read failed. */
static char *read_page(int64_t cap, size_t budget, size_t block, int fail_at, int *steps, uint64_t *dropped)
{
    struct fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->fail_at = fail_at;
    if (cap >= 0) {
        struct gr_metrics_cap_row rows[BG * BT * BP];
        int64_t n = 0;
        for (int g = 0; g < BG; g++)
            for (int i = 0; i < big_groups[g].count; i++) {
                const struct gr_group_lag_part *p = &big_parts[g][i];
                bool known = p->committed >= 0 && p->known;
                rows[n++] = (struct gr_metrics_cap_row){gnames[g], p->topic, p->partition, known,
                                                        known ? p->high_watermark - p->committed : 0};
            }
        assert_int_equal(gr_metrics_cap_select(&f->c, rows, n, cap), 0);
    }
    struct gr_metrics_page *pg = gr_metrics_page_new(fake_step, f, fake_free, budget);
    assert_non_null(pg);
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    char *blk = malloc(block);
    ssize_t n;
    while ((n = gr_metrics_page_read(pg, blk, block)) > 0) {
        assert_true((size_t)n <= block);
        gr_prom_put(&b, blk, (size_t)n);
    }
    free(blk);
    *steps = f->steps;
    *dropped = f->c.dropped;
    if (n < 0) assert_int_equal(gr_metrics_page_read(pg, (char[4]){0}, 4), -1); /* stays failed */
    gr_metrics_page_free(pg);
    if (n < 0) {
        gr_prom_buf_free(&b);
        return NULL;
    }
    if (!b.data) gr_prom_put(&b, "", 0);
    return b.data;
}

static void slices_are_the_one_shot_text(void **state)
{
    (void)state;
    make_big();
    const int64_t caps[] = {-1, 0, 17, 100};
    /* budget 1: every line its own slice, so every family is split; 100 splits families in mid-group */
    const size_t budgets[] = {1, 100, 700, 4096, GR_METRICS_PAGE_BLOCK, SIZE_MAX};
    const size_t blocks[] = {1, 7, 64, 65536};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        uint64_t want_dropped;
        char *want = one_shot(caps[k], &want_dropped);
        assert_true(strlen(want) > (caps[k] < 0 ? 10000u : 1000u));
        if (caps[k] == 17) assert_true(want_dropped > 0);
        for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++)
            for (size_t j = 0; j < sizeof blocks / sizeof blocks[0]; j++) {
                int steps;
                uint64_t dropped;
                char *got = read_page(caps[k], budgets[i], blocks[j], 0, &steps, &dropped);
                assert_non_null(got);
                assert_string_equal(got, want);
                assert_int_equal(dropped, want_dropped); /* the same samples left out, counted once */
                if (budgets[i] == 1) {                   /* about a line a step: every family split */
                    int lines = 0;
                    for (const char *q = want; *q; q++)
                        lines += *q == '\n';
                    assert_true(steps > 11 && 2 * steps >= lines);
                }
                if (budgets[i] == SIZE_MAX) assert_int_equal(steps, 2);
                free(got);
            }
        free(want);
    }
}

static void slice_budget_bounds_a_step(void **state)
{
    (void)state;
    make_big();
    struct gr_metrics_groups_cursor gc = {0};
    size_t longest = 0;
    int slices = 0;
    for (bool done = false; !done; slices++) {
        struct gr_prom_buf b;
        gr_prom_buf_init(&b, 0);
        done = gr_metrics_groups_write_slice(big_groups, BG, NULL, &gc, 300, &b);
        assert_false(b.failed);
        assert_true(b.len > 0); /* every call makes progress */
        if (b.len > longest) longest = b.len;
        gr_prom_buf_free(&b);
    }
    assert_true(longest < 300 + 200); /* the budget plus at most one line */
    assert_true(slices > 20);
}

static void failed_step_fails_the_page(void **state)
{
    (void)state;
    make_big();
    int steps;
    uint64_t dropped;
    assert_null(read_page(-1, 1000, 64, 5, &steps, &dropped)); /* step 5 fails: the read says -1 */
    assert_int_equal(steps, 5);
}

/* A client that goes away mid-page: the page is freed after a few blocks, snapshot and cap with it (the
   sanitizer build checks nothing leaks: scripts/sanitize-check.sh runs this test). */
static void freed_mid_page(void **state)
{
    (void)state;
    make_big();
    struct fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    struct gr_metrics_cap_row rows[1] = {{"g0", "alpha", 0, true, 1}};
    assert_int_equal(gr_metrics_cap_select(&f->c, rows, 1, 0), 0);
    struct gr_metrics_page *pg = gr_metrics_page_new(fake_step, f, fake_free, 500);
    assert_non_null(pg);
    char blk[64];
    for (int i = 0; i < 3; i++)
        assert_int_equal(gr_metrics_page_read(pg, blk, sizeof blk), (ssize_t)sizeof blk);
    gr_metrics_page_free(pg);
    gr_metrics_page_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(order_rules),
        cmocka_unit_test(select_and_keep),
        cmocka_unit_test(capped_lines_and_aggregates),
        cmocka_unit_test(slices_are_the_one_shot_text),
        cmocka_unit_test(slice_budget_bounds_a_step),
        cmocka_unit_test(failed_step_fails_the_page),
        cmocka_unit_test(freed_mid_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
