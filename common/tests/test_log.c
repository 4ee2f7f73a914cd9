/*
 * test_log.c: the diagnostic log's per-site rate limiter (common/log.h) with a fake monotonic clock and
 * stderr captured in a file: GR_LOG_RATELIMIT_LINES lines per window from one site, then one line with
 * the exact count suppressed, sites independent, the count reported by gr_log_ratelimit_flush when the
 * site stays quiet, levels below the configured one neither printed nor counted, plain GR_WARN never
 * limited. Read next: common/log.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/tests/capture.h"

static int64_t fake_now = 1000000;
static int64_t fake_clock(void)
{
    return fake_now;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void site_a(int i)
{
    GR_WARN_RATELIMITED("connection peer-%d: malformed frame, closing", i);
}
static void site_b(int i)
{
    GR_WARN_RATELIMITED("append to t-%d failed: No space left on device", i);
}

static void site_kv(int i)
{
    GR_WARN_KV_RATELIMITED("slow request", "api=%s correlation_id=%d client_id=%s", "Produce", i, "my app");
}

static void test_kv_lines_limited(void **state)
{
    (void)state;
    gr_log_set_clock(fake_clock);
    capture();
    for (int i = 0; i < 12; i++)
        site_kv(i);
    fake_now += GR_LOG_RATELIMIT_WINDOW_MS;
    site_kv(99);
    char *out = captured();
    assert_int_equal(count_of(out, "msg=\"slow request\""), GR_LOG_RATELIMIT_LINES + 1);
    assert_non_null(strstr(out, "msg=\"slow request\" api=Produce correlation_id=9 client_id=\"my app\"\n"));
    assert_null(strstr(out, "correlation_id=10 "));
    assert_non_null(strstr(out, " suppressed=2 max_lines=10 window_s=10\n"));
    assert_true(strstr(out, "suppressed=2") < strstr(out, "correlation_id=99 "));
    free(out);
    gr_log_set_clock(NULL);
}

static void test_lines_then_suppressed_count(void **state)
{
    (void)state;
    gr_log_set_clock(fake_clock);
    capture();
    for (int i = 0; i < 25; i++)
        site_a(i);
    for (int i = 0; i < 3; i++)
        site_b(i);
    fake_now += GR_LOG_RATELIMIT_WINDOW_MS - 1; /* same window: still suppressed */
    site_a(100);
    fake_now += 1; /* the window ended: the count first, then the line */
    site_a(101);
    char *out = captured();
    assert_int_equal(count_of(out, "malformed frame"), GR_LOG_RATELIMIT_LINES + 1);
    assert_non_null(strstr(out, "peer-9: malformed"));
    assert_null(strstr(out, "peer-10: malformed"));
    assert_null(strstr(out, "peer-100: malformed"));
    assert_non_null(strstr(out, "peer-101: malformed"));
    assert_int_equal(count_of(out, "similar messages suppressed"), 1);
    /* a logfmt line of its own at the site's level and component, the count in a key */
    assert_non_null(strstr(out, " level=warn component=common msg=\"similar messages suppressed\" "
                                "site=tests/test_log.c:"));
    assert_non_null(
        strstr(out, " suppressed=16 max_lines=10 window_s=10\n")); /* 25 - 10 + the one at +9.999 s */
    assert_true(strstr(out, "suppressed") < strstr(out, "peer-101"));
    assert_int_equal(count_of(out, "No space left"), 3); /* another site: its own budget */
    free(out);
    gr_log_set_clock(NULL);
}

static void test_flush_reports_quiet_site(void **state)
{
    (void)state;
    gr_log_set_clock(fake_clock);
    fake_now += 10 * GR_LOG_RATELIMIT_WINDOW_MS;
    capture();
    for (int i = 0; i < 40; i++)
        site_b(i);
    gr_log_ratelimit_flush(fake_now + 5); /* window not over: nothing yet */
    gr_log_ratelimit_flush(fake_now + GR_LOG_RATELIMIT_WINDOW_MS);
    gr_log_ratelimit_flush(fake_now + 3 * GR_LOG_RATELIMIT_WINDOW_MS); /* reported once only */
    char *out = captured();
    assert_int_equal(count_of(out, "No space left"), GR_LOG_RATELIMIT_LINES);
    assert_int_equal(count_of(out, "similar messages suppressed"), 1);
    assert_non_null(strstr(out, " suppressed=30 max_lines=10 window_s=10\n"));
    free(out);
    gr_log_set_clock(NULL);
}

static void test_level_filter_and_plain_warn(void **state)
{
    (void)state;
    gr_log_set_clock(fake_clock);
    fake_now += 10 * GR_LOG_RATELIMIT_WINDOW_MS;
    capture();
    gr_log_set_level(GR_LOG_ERROR);
    for (int i = 0; i < 50; i++)
        site_a(i); /* below the level: not printed, not counted */
    gr_log_set_level(GR_LOG_INFO);
    fake_now += GR_LOG_RATELIMIT_WINDOW_MS;
    site_a(7);
    for (int i = 0; i < 30; i++)
        GR_WARN("net-thread disk call: open %d", i); /* never limited: tests count these */
    char *out = captured();
    assert_int_equal(count_of(out, "malformed frame"), 1);
    assert_int_equal(count_of(out, "suppressed"), 0);
    assert_int_equal(count_of(out, "net-thread disk call"), 30);
    free(out);
    gr_log_set_clock(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_then_suppressed_count),
        cmocka_unit_test(test_kv_lines_limited),
        cmocka_unit_test(test_flush_reports_quiet_site),
        cmocka_unit_test(test_level_filter_and_plain_warn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
