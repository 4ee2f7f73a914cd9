/*
 * test_lag.c: the lag formulas of storage/lag.h with exact numbers (lag bytes, lag seconds, retention
 * headroom for k < n and k = n, retention -1, rate 0, compact, c below the log start), the sample history
 * (the one-second sampling rule, thinning, pruning, truncation, the 15-minute rate), and on a real log: the
 * samples appends take, gr_log_lag's bytes against the segments' sizes and the in-memory offset index, and
 * the history rebuilt at reopen.
 * No timing: every time is given.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/time.h"
#include "storage/internal.h"
#include "storage/lag.h"
#include "storage/tests/helpers.h"

/* ---------------------------------------------------------------- the history */

static void test_ring_sampling_interval(void **state)
{
    (void)state;
    struct gr_lag_ring r;
    gr_lag_ring_init(&r, 0);
    gr_lag_ring_append(&r, 0, 0, 100, 1000, 0);    /* first append: sampled */
    gr_lag_ring_append(&r, 5, 100, 100, 1500, 0);  /* 500 ms later: not */
    gr_lag_ring_append(&r, 10, 200, 100, 1999, 0); /* 999 ms: not */
    gr_lag_ring_append(&r, 15, 300, 100, 2000, 0); /* 1000 ms: sampled */
    gr_lag_ring_append(&r, 20, 400, 100, 2500, 0);
    gr_lag_ring_append(&r, 25, 500, 100, 1200, 0); /* the clock went back: sampled */
    assert_int_equal(r.count, 3);
    assert_int_equal(r.appended, 600);
    assert_int_equal(r.s[0].offset, 0);
    assert_int_equal(r.s[0].time_ms, 1000);
    assert_int_equal(r.s[0].appended, 0);
    assert_int_equal(r.s[1].offset, 15);
    assert_int_equal(r.s[1].time_ms, 2000);
    assert_int_equal(r.s[1].pos, 300);
    assert_int_equal(r.s[1].appended, 300);
    assert_int_equal(r.s[2].offset, 25);
    assert_int_equal(r.s[2].appended, 500);
    /* find: the largest offset at or below */
    assert_null(gr_lag_ring_find(&r, -1));
    assert_int_equal(gr_lag_ring_find(&r, 0)->offset, 0);
    assert_int_equal(gr_lag_ring_find(&r, 14)->offset, 0);
    assert_int_equal(gr_lag_ring_find(&r, 15)->offset, 15);
    assert_int_equal(gr_lag_ring_find(&r, 1000)->offset, 25);
    /* truncation to 20 drops the sample at 25 */
    gr_lag_ring_truncate(&r, 20);
    assert_int_equal(r.count, 2);
    gr_lag_ring_truncate(&r, 15);
    assert_int_equal(r.count, 1);
    gr_lag_ring_free(&r);
    assert_int_equal(r.count, 0);
}

static void test_ring_thin_and_prune(void **state)
{
    (void)state;
    struct gr_lag_ring r;
    gr_lag_ring_init(&r, 0);
    for (int i = 0; i < GR_LAG_SAMPLES_MAX; i++)
        gr_lag_ring_append(&r, (int64_t)i * 10, 0, 10, (int64_t)i * 1000, 0);
    assert_int_equal(r.count, GR_LAG_SAMPLES_MAX);
    assert_int_equal(r.cap, GR_LAG_SAMPLES_MAX);
    /* Full: the next sample thins the older half (indexes 0, 2, 4 ... 510 stay), the newer half stays whole.
     */
    gr_lag_ring_append(&r, (int64_t)GR_LAG_SAMPLES_MAX * 10, 0, 10, (int64_t)GR_LAG_SAMPLES_MAX * 1000, 0);
    int half = GR_LAG_SAMPLES_MAX / 2;
    assert_int_equal(r.count, 1 + (half - 2) / 2 + half + 1); /* 769 */
    assert_int_equal(r.s[0].offset, 0);
    assert_int_equal(r.s[1].offset, 20);
    assert_int_equal(r.s[(half - 2) / 2].offset, (int64_t)(half - 2) * 10);
    assert_int_equal(r.s[1 + (half - 2) / 2].offset, (int64_t)half * 10);
    for (int i = 1 + (half - 2) / 2; i + 1 < r.count; i++)
        assert_int_equal(r.s[i + 1].time_ms - r.s[i].time_ms, 1000);
    assert_int_equal(r.cap, GR_LAG_SAMPLES_MAX); /* bounded */
    /* The log start moved to 5125: samples wholly below it go, the last one at or below it stays. */
    gr_lag_ring_append(&r, 10250, 0, 10, 1025000, 5125);
    assert_int_equal(r.s[0].offset, 5120);
    assert_int_equal(r.s[1].offset, 5130);
    gr_lag_ring_free(&r);
}

static void test_ring_rate(void **state)
{
    (void)state;
    struct gr_lag_ring r;
    gr_lag_ring_init(&r, 0);
    assert_true(gr_lag_rate(&r, 0) == 0);
    assert_true(gr_lag_rate(&r, 5000) == 0); /* nothing appended */
    /* 1000 bytes every second from t = 1 s to t = 10 s. */
    for (int i = 1; i <= 10; i++)
        gr_lag_ring_append(&r, i * 10, 0, 1000, i * 1000, 0);
    /* Up 10 s: W = 10 s, all 10000 bytes since the first sample in it (t = 1 s, appended 0). */
    assert_true(gr_lag_rate(&r, 10000) == 1000.0);
    /* Up 20 s: W = 20 s, still 10000 bytes. */
    assert_true(gr_lag_rate(&r, 20000) == 500.0);
    /* 16 minutes later: no sample in the last 15 minutes: rate 0. */
    assert_true(gr_lag_rate(&r, 10000 + 960000) == 0);
    /* Appends 100 bytes each second for 20 minutes: the window is 15 minutes, 90000 bytes. */
    for (int i = 0; i < 1200; i++)
        gr_lag_ring_append(&r, 1000 + i, 0, 100, 2000000 + (int64_t)i * 1000, 0);
    int64_t now = 2000000 + 1199 * 1000 + 1000; /* one second after the last append */
    /* first sample at or after now - 900 s is the one at 2000000 + 300 s; bytes since: 900 appends */
    assert_true(gr_lag_rate(&r, now) == 900.0 * 100 / 900.0);
    /* Rebuilt samples never count (their times are record timestamps). */
    struct gr_lag_ring q;
    gr_lag_ring_init(&q, 0);
    gr_lag_ring_rebuilt(&q, 0, 500, -4000);
    assert_true(gr_lag_rate(&q, 1000) == 0);
    gr_lag_ring_free(&q);
    gr_lag_ring_free(&r);
}

/* ---------------------------------------------------------------- lag bytes and seconds */

static const struct gr_lag_seg SEGS[3] = {
    {.base_offset = 0, .size_bytes = 1000, .max_timestamp_ms = 10000, .first_timestamp_ms = 0},
    {.base_offset = 10, .size_bytes = 800, .max_timestamp_ms = 20000, .first_timestamp_ms = 12000},
    {.base_offset = 20, .size_bytes = 500, .max_timestamp_ms = 30000, .first_timestamp_ms = 25000},
};

static void test_lag_bytes(void **state)
{
    (void)state;
    /* log end 25: caught up at and past it */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 25, NULL, 0), 0);
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 40, NULL, 0), 0);
    /* c in segment 1 with nothing known inside it: from its start */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 12, NULL, 0), 800 + 500);
    /* an index entry at byte 300 of it (a batch ending below c) */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 12, NULL, 300), 500 + 500);
    /* a sample at offset 11, byte 400: the batch holding 12 starts there at the latest */
    struct gr_lag_ring r;
    gr_lag_ring_init(&r, 0);
    gr_lag_ring_append(&r, 9, 900, 100, 1000, 0);  /* in segment 0 */
    gr_lag_ring_append(&r, 11, 400, 100, 2000, 0); /* in segment 1 */
    gr_lag_ring_append(&r, 21, 100, 100, 3500, 0); /* in segment 2 */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 12, &r, 300), 400 + 500);
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 11, &r, 0), 400 + 500);
    /* c = 10: the sample at 9 lies in segment 0, not counted; from segment 1's start */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 10, &r, 0), 1300);
    /* k = n: c = 22, the sample at 21 (byte 100 of the active segment) */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 22, &r, 0), 400);
    assert_int_equal(gr_lag_bytes(SEGS, 3, 0, 25, 20, &r, 0), 500);
    /* c below the log start 5: counted from the log start's batch (segment 0, sample at 9 is above it) */
    assert_int_equal(gr_lag_bytes(SEGS, 3, 5, 25, 2, &r, 0), 2300);
    /* a sample past its segment's end (compaction shrank it) is not trusted */
    struct gr_lag_seg shrunk[3] = {SEGS[0], SEGS[1], SEGS[2]};
    shrunk[1].size_bytes = 350;
    assert_int_equal(gr_lag_bytes(shrunk, 3, 0, 25, 12, &r, 0), 350 + 500);
    gr_lag_ring_free(&r);
}

static void test_lag_seconds(void **state)
{
    (void)state;
    struct gr_lag_ring r;
    gr_lag_ring_init(&r, 0);
    gr_lag_ring_append(&r, 10, 0, 100, 1000, 0);
    gr_lag_ring_append(&r, 20, 100, 100, 2000, 0);
    gr_lag_ring_append(&r, 30, 200, 100, 3500, 0);
    /* high watermark 35, now 5000 */
    assert_true(gr_lag_seconds(&r, 10, 35, 35, 5000) == 0); /* caught up */
    assert_true(gr_lag_seconds(&r, 10, 35, 50, 5000) == 0);
    assert_true(gr_lag_seconds(&r, 10, 35, 10, 5000) == 4.0);
    assert_true(gr_lag_seconds(&r, 10, 35, 19, 5000) == 4.0);
    assert_true(gr_lag_seconds(&r, 10, 35, 25, 5000) == 3.0);
    assert_true(gr_lag_seconds(&r, 10, 35, 34, 5000) == 1.5);
    /* c below the log start 20: the log start's batch */
    assert_true(gr_lag_seconds(&r, 20, 35, 3, 5000) == 3.0);
    /* no sample at or below: unknown */
    assert_true(gr_lag_seconds(&r, 0, 35, 5, 5000) == -1);
    /* a sample from the future (clock stepped back): never negative */
    assert_true(gr_lag_seconds(&r, 10, 35, 30, 3000) == 0);
    /* the caught-up offset: data ends at 34, a marker at 34, hw 35: caught up at 34 */
    assert_int_equal(gr_lag_caught_up(34, 35), 34);
    assert_int_equal(gr_lag_caught_up(35, 35), 35);
    assert_int_equal(gr_lag_caught_up(40, 35), 35); /* data past the hw (not yet replicated): the hw */
    assert_true(gr_lag_seconds(&r, 10, gr_lag_caught_up(34, 35), 34, 5000) == 0);
    assert_true(gr_lag_seconds(&r, 10, gr_lag_caught_up(34, 35), 33, 5000) == 1.5);
    gr_lag_ring_free(&r);
}

/* ---------------------------------------------------------------- retention headroom */

static void test_headroom(void **state)
{
    (void)state;
    struct gr_lag_cfg cfg = {.segment_bytes = 1000,
                             .segment_ms = 60000,
                             .retention_ms = 100000,
                             .retention_bytes = 2000,
                             .delete_policy = true};
    int64_t now = 40000;
    double r = 10; /* bytes/s */
    /* k < n (c = 12 in segment 1): T_time = (20000 + 100000 - 40000) / 1000 = 80, T_size = (2000 - 500) / 10
       = 150 */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 12, r, now, &cfg) == 80.0);
    /* k = 0: T_time = (10000 + 100000 - 40000) / 1000 = 70, T_size = (2000 - 1300) / 10 = 70 */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 3, r, now, &cfg) == 70.0);
    /* retention.ms -1: T_size alone */
    struct gr_lag_cfg c2 = cfg;
    c2.retention_ms = -1;
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 12, r, now, &c2) == 150.0);
    /* retention.bytes -1 and retention.ms -1: +Inf */
    c2.retention_bytes = -1;
    assert_true(isinf(gr_lag_headroom_seconds(SEGS, 3, 0, 12, r, now, &c2)));
    /* rate 0: T_size +Inf, T_time alone */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 12, 0, now, &cfg) == 80.0);
    c2 = cfg;
    c2.retention_ms = -1;
    assert_true(isinf(gr_lag_headroom_seconds(SEGS, 3, 0, 12, 0, now, &c2)));
    /* past the deadline: 0, never negative */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 12, r, 200000, &cfg) == 0.0);
    /* (2000 - 500) bytes at 1000 B/s: 1.5 s before retention.bytes takes segment 1 */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 12, 1000, now, &cfg) == 1.5);
    /* c below the log start: 0 */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 5, 4, r, now, &cfg) == 0.0);
    /* compact only: +Inf, even below the log start */
    c2 = cfg;
    c2.delete_policy = false;
    assert_true(isinf(gr_lag_headroom_seconds(SEGS, 3, 0, 12, r, now, &c2)));
    assert_true(isinf(gr_lag_headroom_seconds(SEGS, 3, 5, 4, r, now, &c2)));
}

static void test_headroom_active(void **state)
{
    (void)state;
    struct gr_lag_cfg cfg = {.segment_bytes = 1000,
                             .segment_ms = 60000,
                             .retention_ms = 100000,
                             .retention_bytes = 2000,
                             .delete_policy = true};
    int64_t now = 40000;
    /* k = n (c = 22): T_roll = min((1000 - 500) / 10 = 50, (25000 + 60000 - 40000) / 1000 = 45) = 45.
       T_time = min(T_roll + 100 = 145, the expired active segment: (30000 + 100000 - 40000) / 1000 = 90) =
       90; T_size = 45 + 2000 / 10 = 245. */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 22, 10, now, &cfg) == 90.0);
    struct gr_lag_cfg c2 = cfg;
    c2.retention_ms = -1;
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 22, 10, now, &c2) == 245.0);
    /* rate 0: T_roll by time only (45): T_time 90; with retention.ms -1: +Inf */
    assert_true(gr_lag_headroom_seconds(SEGS, 3, 0, 22, 0, now, &cfg) == 90.0);
    assert_true(isinf(gr_lag_headroom_seconds(SEGS, 3, 0, 22, 0, now, &c2)));
    /* The active segment's max timestamp ahead of the clock (CreateTime): T_roll + retention.ms = 145 wins.
     */
    struct gr_lag_seg s[3] = {SEGS[0], SEGS[1], SEGS[2]};
    s[2].max_timestamp_ms = 200000;
    assert_true(gr_lag_headroom_seconds(s, 3, 0, 22, 10, now, &cfg) == 145.0);
    /* The active segment over segment.bytes (a deferred roll): T_roll = 0, T_size = 0 + 200 */
    s[2].size_bytes = 1200;
    assert_true(gr_lag_headroom_seconds(s, 3, 0, 22, 10, now, &c2) == 200.0);
    /* One segment only (k = n = 0) */
    assert_true(gr_lag_headroom_seconds(&SEGS[2], 1, 20, 21, 10, now, &c2) == 245.0);
}

/* ---------------------------------------------------------------- on a log */

/* Appends `count` records at timestamp ts; returns the batch's bytes. */
static int64_t append(struct gr_log *log, int32_t count, int64_t ts, uint32_t tag)
{
    size_t len;
    uint8_t *b = th_simple(count, ts, tag, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
    gr_store_quiesce(log->store);
    return (int64_t)len;
}

static void test_log_samples_and_rebuild(void **state)
{
    struct th_store_fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    const char *k[] = {"segment.bytes", "index.interval.bytes"}, *v[] = {"1000", "100000"};
    assert_int_equal(gr_store_topic_create(f->store, "t", 1, k, v, 2, &f->topic), 0);
    f->log = gr_topic_log(f->topic, 0);
    /* Appends within one second take one sample (the first): the history is at whole-second marks. */
    int64_t total = 0;
    for (int i = 0; i < 40; i++)
        total += append(f->log, 5, 1000 + i, (uint32_t)i);
    assert_true(f->log->seg_count >= 3);
    assert_int_equal(f->log->lag.appended, total);
    assert_true(f->log->lag.count >= 1);
    assert_int_equal(f->log->lag.s[0].offset, 0);
    assert_int_equal(f->log->lag.s[0].pos, 0);
    /* The checks below need a known history: only segment starts are known (no samples, no index entries). */
    gr_lag_ring_free(&f->log->lag);
    gr_lag_ring_init(&f->log->lag, 0);
    /* Lag bytes against the segments: a committed offset at a segment's base counts that segment and all
       after it; offset 0 counts the whole log; the log end counts nothing. */
    struct gr_log_lag out;
    int64_t now = gr_time_wall_ms();
    assert_int_equal(gr_log_lag(f->log, 0, now, &out), 0);
    assert_int_equal(out.bytes, total);
    assert_int_equal(out.headroom_records, 0);
    assert_int_equal(gr_log_lag(f->log, 200, now, &out), 0);
    assert_int_equal(out.bytes, 0);
    assert_true(out.seconds == 0);
    int last = f->log->seg_count - 1;
    int64_t base = f->log->segs[last]->base_offset;
    assert_int_equal(gr_log_lag(f->log, base, now, &out), 0);
    assert_int_equal(out.bytes, f->log->segs[last]->size_bytes);
    /* Inside a batch of a sealed segment (index interval too large for entries, only its start known): from
       the segment's start. c = 7 lies in segment 0's second batch. */
    assert_int_equal(gr_log_lag(f->log, 7, now, &out), 0);
    assert_int_equal(out.bytes, total);
    /* Rebuilt at reopen: one sample per segment at its base offset, position 0, timed by the first batch's
       timestamp where known (the active segment), else the previous segment's max timestamp. */
    int n = f->log->seg_count;
    int64_t bases[64], maxts[64];
    for (int i = 0; i < n; i++) {
        bases[i] = f->log->segs[i]->base_offset;
        maxts[i] = f->log->segs[i]->max_timestamp_ms;
    }
    gr_store_close(f->store);
    f->store = NULL;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->topic = gr_store_topic_find(f->store, "t", 1);
    f->log = gr_topic_log(f->topic, 0);
    assert_int_equal(f->log->seg_count, n);
    assert_int_equal(f->log->lag.count, n);
    int64_t suffix = total;
    for (int i = 0; i < n; i++) {
        const struct gr_lag_sample *s = &f->log->lag.s[i];
        assert_int_equal(s->offset, bases[i]);
        assert_true(s->rebuilt);
        assert_int_equal(s->pos, 0);
        assert_int_equal(s->appended, -suffix);
        /* batch b (5 records at ts 1000 + b, step 1) has max timestamp 1004 + b; base offset 5b */
        if (i == n - 1)
            assert_int_equal(s->time_ms, 1004 + bases[i] / 5);
        else if (i > 0)
            assert_int_equal(s->time_ms, maxts[i - 1]);
        else
            assert_int_equal(s->time_ms, maxts[0]);
        suffix -= f->log->segs[i]->size_bytes;
    }
    /* An append after the reopen samples again (live), after the rebuilt ones. */
    int64_t len = append(f->log, 5, 5000, 99);
    assert_int_equal(f->log->lag.count, n + 1);
    assert_false(f->log->lag.s[n].rebuilt);
    assert_int_equal(f->log->lag.s[n].offset, 200);
    assert_int_equal(f->log->lag.s[n].pos, f->log->segs[f->log->seg_count - 1]->size_bytes - len);
    assert_int_equal(f->log->lag.s[n].appended, 0);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    /* Lag seconds of an offset in segment 1 uses its rebuilt sample: now - segment 0's max timestamp. */
    assert_int_equal(gr_log_lag(f->log, bases[1], now, &out), 0);
    assert_true(out.seconds == (double)(now - maxts[0]) / 1000.0);
}

/* The in-memory offset index bounds lag bytes where no sample helps: with an entry for every batch but the
   first (index.interval.bytes 1), c inside batch i (i >= 2) counts from the start of batch i - 1, the last
   indexed batch ending below c: one batch more than the truth, as lag.h documents. */
static void test_log_index_bound(void **state)
{
    struct th_store_fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    const char *k[] = {"index.interval.bytes"}, *v[] = {"1"};
    assert_int_equal(gr_store_topic_create(f->store, "i", 1, k, v, 1, &f->topic), 0);
    f->log = gr_topic_log(f->topic, 0);
    int64_t pos[11] = {0};
    for (int i = 0; i < 10; i++)
        pos[i + 1] = pos[i] + append(f->log, 5, 1000 + i, (uint32_t)(100 + i));
    assert_int_equal(f->log->seg_count, 1);
    assert_int_equal(f->log->segs[0]->idx_count, 9);
    gr_lag_ring_free(&f->log->lag); /* no samples: the index alone */
    gr_lag_ring_init(&f->log->lag, 0);
    struct gr_log_lag out;
    for (int i = 2; i < 10; i++) {
        assert_int_equal(gr_log_lag(f->log, 5 * i + 2, 0, &out), 0);
        assert_int_equal(out.bytes, pos[10] - pos[i - 1]);
        assert_int_equal(gr_log_lag(f->log, 5 * i, 0, &out), 0); /* at the batch's base: same bound */
        assert_int_equal(out.bytes, pos[10] - pos[i - 1]);
    }
    assert_int_equal(gr_log_lag(f->log, 7, 0, &out), 0); /* batch 1: only the segment start below it */
    assert_int_equal(out.bytes, pos[10]);
    assert_true(out.seconds == -1); /* no sample at all: unknown */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_sampling_interval),
        cmocka_unit_test(test_ring_thin_and_prune),
        cmocka_unit_test(test_ring_rate),
        cmocka_unit_test(test_lag_bytes),
        cmocka_unit_test(test_lag_seconds),
        cmocka_unit_test(test_headroom),
        cmocka_unit_test(test_headroom_active),
        cmocka_unit_test_setup_teardown(test_log_samples_and_rebuild, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_log_index_bound, th_store_setup, th_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
