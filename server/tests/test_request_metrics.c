/*
 * test_request_metrics.c: the request-timing structure (server/request_metrics.c) on known inputs: bucket
 * indices and the values a bucket reports, its error bound over a range, nearest-rank quantiles, the rotation
 * of windows, the six RequestMetrics times and the latency histogram of known requests (a long-poll Fetch's
 * wait counted in remotetimems, not in the latency), the page's lines, and the idle accounting split over
 * slots. No clock: every function is given its time.
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

#include "server/apis.h"
#include "server/broker.h"
#include "server/request_metrics.h"

static void buckets(void **state)
{
    (void)state;
    assert_int_equal(gr_rt_bucket(0), 0);
    assert_int_equal(gr_rt_bucket(15), 15);
    assert_int_equal(gr_rt_bucket(16), 16); /* 16..17 share a bucket of width 2 */
    assert_int_equal(gr_rt_bucket(17), 16);
    assert_int_equal(gr_rt_bucket(18), 17);
    assert_int_equal(gr_rt_bucket(31), 23);
    assert_int_equal(gr_rt_bucket(32), 24);
    assert_int_equal(gr_rt_bucket(1000), 63); /* 960..1023: 15 * 2^6 */
    assert_int_equal(gr_rt_bucket((1ull << 36) - 1), GR_RT_BUCKETS - 1);
    assert_int_equal(gr_rt_bucket(1ull << 36), GR_RT_BUCKETS - 1);
    assert_int_equal(gr_rt_bucket(UINT64_MAX), GR_RT_BUCKETS - 1);
    assert_int_equal(GR_RT_BUCKETS, 272);
    assert_true(gr_rt_bucket_value_us(7) == 7.0);
    assert_true(gr_rt_bucket_value_us(16) == 16.5);
    assert_true(gr_rt_bucket_value_us(63) == 991.5);      /* 960 + 63 / 2 */
    assert_true(gr_rt_bucket_value_us(143) == 1015807.5); /* 983040 + 65535 / 2 */
    /* the documented bound: every value's bucket reports within 1/16 of it, buckets never go down */
    int prev = 0;
    for (uint64_t v = 0; v < (1u << 20); v += 1 + v / 64) {
        int b = gr_rt_bucket(v);
        assert_true(b >= prev);
        prev = b;
        assert_true(fabs(gr_rt_bucket_value_us(b) - (double)v) <= (double)v / 16.0);
    }
}

static void quantiles_nearest_rank(void **state)
{
    (void)state;
    struct gr_rt_hist *h = calloc(1, sizeof *h);
    assert_true(isnan(gr_rt_hist_quantile_us(h, 500000, 0)));
    for (uint64_t v = 1; v <= 100; v++)
        gr_rt_hist_add(h, v, 1000);
    assert_int_equal(h->total, 100);
    assert_true(gr_rt_hist_quantile_us(h, 500000, 1000) == 49.5); /* rank 50: bucket 48..51 */
    assert_true(gr_rt_hist_quantile_us(h, 750000, 1000) == 75.5); /* rank 75: 72..79 */
    assert_true(gr_rt_hist_quantile_us(h, 950000, 1000) == 91.5); /* rank 95: 88..95 */
    assert_true(gr_rt_hist_quantile_us(h, 980000, 1000) == 99.5); /* rank 98: 96..103 */
    assert_true(gr_rt_hist_quantile_us(h, 999000, 1000) == 99.5); /* rank 100 */
    const uint32_t qs[3] = {750000, 500000, 950000}; /* any order, as a scrape asks them at once */
    double v[3];
    gr_rt_hist_quantiles_us(h, qs, 3, 1000, v);
    assert_true(v[0] == 75.5 && v[1] == 49.5 && v[2] == 91.5);
    free(h);

    h = calloc(1, sizeof *h); /* 1, 2, 3: the median's rank is ceil(1.5) = 2, not 1 */
    for (uint64_t x = 1; x <= 3; x++)
        gr_rt_hist_add(h, x, 0);
    assert_true(gr_rt_hist_quantile_us(h, 500000, 0) == 2.0);
    assert_true(gr_rt_hist_quantile_us(h, 980000, 0) == 3.0); /* ceil(2.94) = 3 */
    free(h);

    h = calloc(1, sizeof *h);
    for (int i = 0; i < 998; i++)
        gr_rt_hist_add(h, 3, 0);
    gr_rt_hist_add(h, 1000000, 0);
    gr_rt_hist_add(h, 1000000, 0);
    assert_true(gr_rt_hist_quantile_us(h, 990000, 0) == 3.0);       /* rank 990 */
    assert_true(gr_rt_hist_quantile_us(h, 998000, 0) == 3.0);       /* rank 998 */
    assert_true(gr_rt_hist_quantile_us(h, 999000, 0) == 1015807.5); /* rank 999 */
    free(h);
}

static void windows_rotate(void **state)
{
    (void)state;
    struct gr_rt_hist *h = calloc(1, sizeof *h);
    const int64_t W = GR_RT_WINDOW_MS;
    gr_rt_hist_add(h, 10, 0);                                       /* window 0 */
    gr_rt_hist_add(h, 1000, 4 * W);                                 /* window 4 */
    assert_true(gr_rt_hist_quantile_us(h, 500000, 4 * W) == 10.0);  /* both current: rank 1 */
    assert_true(gr_rt_hist_quantile_us(h, 500000, 5 * W) == 991.5); /* window 0 out of the last five */
    gr_rt_hist_add(h, 12, 5 * W + 1);                               /* window 5 reuses window 0's slot */
    assert_true(gr_rt_hist_quantile_us(h, 500000, 5 * W) == 12.0);  /* exact below 16 us */
    assert_true(gr_rt_hist_quantile_us(h, 999000, 5 * W) == 991.5);
    assert_true(gr_rt_hist_quantile_us(h, 999000, 9 * W) == 12.0); /* 1000 (window 4) gone */
    assert_true(isnan(gr_rt_hist_quantile_us(h, 500000, 10 * W)));
    assert_int_equal(h->total, 3); /* _count is since start */
    free(h);
}

/* The value of the sample line starting with `prefix` in `text` (fails when absent). */
static double sample(const char *text, const char *prefix)
{
    const char *p = strstr(text, prefix);
    if (!p) fail_msg("no line %s in:\n%s", prefix, text);
    return strtod(p + strlen(prefix), NULL);
}

static void observe_and_render(void **state)
{
    (void)state;
    struct gr_reqtime *rt = calloc(1, sizeof *rt);
    /* a Produce answered at once: read 1000, dispatched 1100, encoded and queued 1600, written 1700..2000 */
    struct gr_req_times p = {.recv = 1000, .start = 1100, .done = 1600, .send = 1700};
    assert_int_equal(gr_reqtime_observe(rt, GR_API_PRODUCE, "Produce", 0, &p, 2000, 5), 1000);
    /* a client's long-poll Fetch: parked at 10110, woken 500 ms later, queued 100 us after, sent in 100 us */
    struct gr_req_times f = {
        .recv = 10000, .start = 10010, .local = 10110, .wake = 510110, .done = 510210, .send = 510210};
    assert_int_equal(gr_reqtime_observe(rt, GR_API_FETCH, "Fetch", GR_RT_FETCH_CONSUMER, &f, 510310, 5), 310);
    struct gr_prom_buf out;
    gr_prom_buf_init(&out, 0);
    assert_true(gr_reqtime_render_at(rt, 5000, &out));
    const char *t = out.data;
    const char *rq = "kafka_network_requestmetrics_";
    char k[256];
#define LINE(fam, req, q) (snprintf(k, sizeof k, "%s%s{request=\"%s\",quantile=\"%s\"} ", rq, fam, req, q), k)
    assert_true(sample(t, LINE("requestqueuetimems", "Produce", "0.50")) ==
                99.5 / 1000.0);                                                        /* 100 us: 96..103 */
    assert_true(sample(t, LINE("localtimems", "Produce", "0.999")) == 495.5 / 1000.0); /* 480..511 */
    assert_true(sample(t, LINE("remotetimems", "Produce", "0.50")) == 0.0);
    assert_true(sample(t, LINE("responsequeuetimems", "Produce", "0.75")) == 99.5 / 1000.0);
    assert_true(sample(t, LINE("responsesendtimems", "Produce", "0.95")) == 303.5 / 1000.0); /* 288..319 */
    assert_true(sample(t, LINE("totaltimems", "Produce", "0.99")) == 991.5 / 1000.0);
    /* the Fetch's 500.1 ms wait is remote time, under Fetch and FetchConsumer, not FetchFollower */
    assert_true(sample(t, LINE("remotetimems", "Fetch", "0.50")) == 507903.5 / 1000.0); /* 491520..524287 */
    assert_true(sample(t, LINE("remotetimems", "FetchConsumer", "0.50")) == 507903.5 / 1000.0);
    assert_null(strstr(t, "request=\"FetchFollower\""));
    assert_true(sample(t, "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"} ") == 1);
    assert_true(sample(t, "kafka_network_requestmetrics_totaltimems_count{request=\"FetchConsumer\"} ") == 1);
    assert_non_null(strstr(t, "# TYPE kafka_network_requestmetrics_totaltimems summary\n"));
    /* latency: Produce 1000 us in le=0.001024 (not 0.000512); the Fetch 310 us in le=0.000512 */
    const char *lb = "gregor_request_latency_seconds_bucket";
    snprintf(k, sizeof k, "%s{request=\"Produce\",le=\"0.000512\"} ", lb);
    assert_true(sample(t, k) == 0);
    snprintf(k, sizeof k, "%s{request=\"Produce\",le=\"0.001024\"} ", lb);
    assert_true(sample(t, k) == 1);
    snprintf(k, sizeof k, "%s{request=\"Produce\",le=\"33.554432\"} ", lb);
    assert_true(sample(t, k) == 1);
    snprintf(k, sizeof k, "%s{request=\"Fetch\",le=\"0.000256\"} ", lb);
    assert_true(sample(t, k) == 0);
    snprintf(k, sizeof k, "%s{request=\"Fetch\",le=\"0.000512\"} ", lb);
    assert_true(sample(t, k) == 1);
    snprintf(k, sizeof k, "%s{request=\"Fetch\",le=\"+Inf\"} ", lb);
    assert_true(sample(t, k) == 1);
    assert_true(sample(t, "gregor_request_latency_seconds_sum{request=\"Fetch\"} ") == 310 / 1e6);
    assert_true(sample(t, "gregor_request_latency_seconds_count{request=\"Produce\"} ") == 1);
    assert_null(strstr(t, "gregor_request_latency_seconds_bucket{request=\"FetchConsumer\""));
    assert_non_null(strstr(t, "# TYPE gregor_request_latency_seconds histogram\n"));
    /* no loop: no idle gauges */
    assert_null(strstr(t, "avgidlepercent"));
    gr_prom_buf_free(&out);
    gr_reqtime_free(rt);
}

static void idle_slots(void **state)
{
    (void)state;
    const int64_t S = GR_RT_IDLE_SLOT_US;
    struct gr_rt_idle id = {.started_us = S / 2};
    assert_true(isnan(gr_rt_idle_fraction(&id, S / 2, false)));
    gr_rt_idle_add(&id, S / 2, S / 2 + 3000000, false);          /* 3 s idle */
    gr_rt_idle_add(&id, S / 2 + 3000000, S / 2 + 4000000, true); /* 1 s busy */
    gr_rt_idle_add(&id, S / 2 + 4000000, 2 * S + S / 2, false);  /* idle across two slot boundaries */
    double span = (double)(2 * S);                               /* since started_us */
    assert_true(gr_rt_idle_fraction(&id, 2 * S + S / 2, false) == (double)(2 * S - 1000000) / span);
    assert_true(gr_rt_idle_fraction(&id, 2 * S + S / 2, true) == 1000000.0 / span);
    /* later: the window is the current slot (7) and the five before: only slot 2's half slot is in it */
    int64_t now = 7 * S + S / 2;
    assert_true(gr_rt_idle_fraction(&id, now, false) == (double)(S / 2) / (double)(now - 2 * S));
    assert_true(gr_rt_idle_fraction(&id, now, true) == 0.0);
}

static void handler_nesting(void **state)
{
    (void)state;
    struct gr_broker *b = calloc(1, sizeof *b);
    assert_int_equal(gr_reqtime_handler_enter(b), -1); /* no timing made: nothing counted */
    gr_reqtime_handler_exit(b, -1);
    b->metrics.reqtime = calloc(1, sizeof *b->metrics.reqtime);
    int64_t outer = gr_reqtime_handler_enter(b);
    assert_true(outer > 0);
    assert_int_equal(gr_reqtime_handler_enter(b), 0); /* nested: the outer call counts */
    gr_reqtime_handler_exit(b, 0);
    gr_reqtime_handler_exit(b, outer);
    assert_int_equal(b->metrics.reqtime->handler_depth, 0);
    gr_reqtime_free(b->metrics.reqtime);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets),        cmocka_unit_test(quantiles_nearest_rank),
        cmocka_unit_test(windows_rotate), cmocka_unit_test(observe_and_render),
        cmocka_unit_test(idle_slots),     cmocka_unit_test(handler_nesting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
