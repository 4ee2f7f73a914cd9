/*
 * test_part_summary.c: the coordinator's cache of leaders' partition summaries (cluster/part_summary.h):
 * lookups, a leader's refresh replacing its entries, leadership moving, a leader dropped, offsets lookup.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cluster/part_summary.h"

/* A summary with high watermark `hw` and committed offsets offs[0..n) (sorted), lag bytes = 10 * offset. */
static struct gr_part_summary_entry entry(const char *topic, int32_t partition, int64_t hw,
                                          const int64_t *offs, int32_t n)
{
    struct gr_part_summary_entry e = {.topic = topic, .partition = partition};
    e.summary.high_watermark = hw;
    e.summary.offset_count = n;
    e.summary.offsets = n ? calloc((size_t)n, sizeof *e.summary.offsets) : NULL;
    for (int32_t i = 0; i < n; i++) {
        e.summary.offsets[i].committed = offs[i];
        e.summary.offsets[i].lag.bytes = 10 * offs[i];
    }
    return e;
}

static void test_find_and_refresh(void **state)
{
    (void)state;
    struct gr_part_summaries *s = gr_part_summaries_new();
    assert_non_null(s);
    int64_t offs[] = {3, 7};
    struct gr_part_summary_entry a[] = {entry("t", 1, 100, offs, 2), entry("t", 0, 50, NULL, 0),
                                        entry("a", 4, 9, offs, 1)};
    assert_int_equal(gr_part_summaries_replace_leader(s, 2, a, 3, 1000), 0);
    assert_int_equal(gr_part_summaries_count(s), 3);
    int32_t leader = -1;
    int64_t at = -1;
    const struct gr_part_summary *p = gr_part_summaries_find(s, "t", 1, &leader, &at);
    assert_non_null(p);
    assert_int_equal(p->high_watermark, 100);
    assert_int_equal(leader, 2);
    assert_int_equal(at, 1000);
    assert_int_equal(gr_part_summaries_find(s, "t", 0, NULL, NULL)->high_watermark, 50);
    assert_int_equal(gr_part_summaries_find(s, "a", 4, NULL, NULL)->high_watermark, 9);
    assert_null(gr_part_summaries_find(s, "t", 2, NULL, NULL));
    assert_null(gr_part_summaries_find(s, "u", 1, NULL, NULL));
    /* offsets: the ones asked about, nothing else */
    const struct gr_log_lag *l = gr_part_summary_lag(p, 7);
    assert_non_null(l);
    assert_int_equal(l->bytes, 70);
    assert_int_equal(gr_part_summary_lag(p, 3)->bytes, 30);
    assert_null(gr_part_summary_lag(p, 5));
    assert_null(gr_part_summary_lag(gr_part_summaries_find(s, "t", 0, NULL, NULL), 0));
    /* the caught-up offset: the leader's within [0, hw], else the high watermark (not sent: -1) */
    struct gr_part_summary cu = {.high_watermark = 10, .caught_up_offset = 9};
    assert_int_equal(gr_part_summary_caught_up(&cu), 9);
    cu.caught_up_offset = -1;
    assert_int_equal(gr_part_summary_caught_up(&cu), 10);
    cu.caught_up_offset = 11; /* above the hw: bounded */
    assert_int_equal(gr_part_summary_caught_up(&cu), 10);

    /* leader 3 answers for t/0 (leadership moved) and b/0: t/0 is now leader 3's */
    struct gr_part_summary_entry b[] = {entry("t", 0, 60, NULL, 0), entry("b", 0, 1, NULL, 0)};
    assert_int_equal(gr_part_summaries_replace_leader(s, 3, b, 2, 2000), 0);
    assert_int_equal(gr_part_summaries_count(s), 4);
    assert_int_equal(gr_part_summaries_find(s, "t", 0, &leader, &at)->high_watermark, 60);
    assert_int_equal(leader, 3);
    assert_int_equal(at, 2000);

    /* leader 2's next refresh no longer names a/4: it goes; t/1 is updated */
    struct gr_part_summary_entry c[] = {entry("t", 1, 120, offs, 1)};
    assert_int_equal(gr_part_summaries_replace_leader(s, 2, c, 1, 3000), 0);
    assert_int_equal(gr_part_summaries_count(s), 3);
    assert_null(gr_part_summaries_find(s, "a", 4, NULL, NULL));
    assert_int_equal(gr_part_summaries_find(s, "t", 1, NULL, NULL)->high_watermark, 120);
    assert_null(gr_part_summary_lag(gr_part_summaries_find(s, "t", 1, NULL, NULL), 7));

    /* leader 3 fails a refresh: its entries go, leader 2's stay */
    assert_int_equal(gr_part_summaries_drop_leader(s, 3), 2);
    assert_int_equal(gr_part_summaries_count(s), 1);
    assert_null(gr_part_summaries_find(s, "t", 0, NULL, NULL));
    assert_non_null(gr_part_summaries_find(s, "t", 1, NULL, NULL));
    assert_int_equal(gr_part_summaries_drop_leader(s, 3), 0);

    gr_part_summaries_clear(s);
    assert_int_equal(gr_part_summaries_count(s), 0);
    assert_null(gr_part_summaries_find(s, "t", 1, NULL, NULL));
    gr_part_summaries_free(s);
    gr_part_summaries_free(NULL);
}

/* Many partitions from several leaders: every one found with its own value after interleaved refreshes. */
static void test_many(void **state)
{
    (void)state;
    struct gr_part_summaries *s = gr_part_summaries_new();
    assert_non_null(s);
    enum { P = 500 };
    static char names[P][16];
    for (int round = 0; round < 3; round++)
        for (int32_t leader = 1; leader <= 3; leader++) {
            struct gr_part_summary_entry *e = calloc(P, sizeof *e);
            assert_non_null(e);
            int32_t n = 0;
            for (int32_t i = 0; i < P; i++)
                if (i % 3 + 1 == leader) {
                    snprintf(names[i], sizeof names[i], "topic-%d", i % 7);
                    e[n++] = entry(names[i], i, (int64_t)round * 10000 + i, NULL, 0);
                }
            assert_int_equal(gr_part_summaries_replace_leader(s, leader, e, n, round), 0);
            free(e);
        }
    assert_int_equal(gr_part_summaries_count(s), P);
    for (int32_t i = 0; i < P; i++) {
        int32_t leader;
        const struct gr_part_summary *p = gr_part_summaries_find(s, names[i], i, &leader, NULL);
        assert_non_null(p);
        assert_int_equal(p->high_watermark, 20000 + i);
        assert_int_equal(leader, i % 3 + 1);
    }
    gr_part_summaries_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_find_and_refresh), cmocka_unit_test(test_many)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
