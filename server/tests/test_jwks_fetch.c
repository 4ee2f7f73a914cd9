/*
 * test_jwks_fetch.c: the pure parts of the JWKS refresher (server/jwks_fetch.h): the retry schedule against
 * Kafka's Retry.execute (100 ms doubling within 10000 ms: waits 100, 200, ..., 3200, then what is left of the
 * budget, then give up), and the missing-kid rule of Kafka's RefreshingHttpsJwks.maybeExpediteRefresh (once
 * per kid per 60 s, at most 16 kids remembered with the least recently used forgotten, kids over 1000 bytes
 * never). The fetching itself is tested against a live HTTPS server in compat-tests/oauth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/jwks_fetch.h"

static void retry_schedule(void **state)
{
    (void)state;
    /* Kafka's defaults: after attempt n fails at elapsed e, wait min(100 * 2^(n-1), 10000 - e) */
    assert_int_equal(gr_jwks_retry_wait_ms(1, 100, 10000, 0), 100);
    assert_int_equal(gr_jwks_retry_wait_ms(2, 100, 10000, 100), 200);
    assert_int_equal(gr_jwks_retry_wait_ms(3, 100, 10000, 300), 400);
    assert_int_equal(gr_jwks_retry_wait_ms(6, 100, 10000, 3100), 3200);
    assert_int_equal(gr_jwks_retry_wait_ms(7, 100, 10000, 6300), 3700); /* capped by what is left */
    assert_int_equal(gr_jwks_retry_wait_ms(8, 100, 10000, 10000), -1);  /* budget spent: give up */
    assert_int_equal(gr_jwks_retry_wait_ms(8, 100, 10000, 12000), -1);
    /* a whole schedule with instant attempts: 100+200+400+800+1600+3200 = 6300, then 3700, then stop */
    int64_t elapsed = 0, w;
    int n = 0;
    while ((w = gr_jwks_retry_wait_ms(n + 1, 100, 10000, elapsed)) > 0) {
        elapsed += w;
        n++;
    }
    assert_int_equal(n, 7);
    assert_int_equal(elapsed, 10000);
    /* backoff 0 or max 0: no retry at all; huge attempt counts do not overflow */
    assert_int_equal(gr_jwks_retry_wait_ms(1, 0, 10000, 0), -1);
    assert_int_equal(gr_jwks_retry_wait_ms(1, 100, 0, 0), -1);
    assert_int_equal(gr_jwks_retry_wait_ms(200, 100, 10000, 0), 10000);
}

static void missing_kids(void **state)
{
    (void)state;
    struct gr_jwks_missing *m = calloc(1, sizeof *m);
    assert_non_null(m);
    assert_int_equal(gr_jwks_missing_ask(m, "b", 1000), 1);
    assert_int_equal(gr_jwks_missing_ask(m, "b", 1001), 0); /* in flight */
    assert_int_equal(gr_jwks_missing_ask(m, "b", 1000 + GR_JWKS_MISSING_MS - 1), 0);
    assert_int_equal(gr_jwks_missing_ask(m, "b", 1000 + GR_JWKS_MISSING_MS), 1); /* expired: asks again */
    assert_int_equal(gr_jwks_missing_ask(m, "c", 2000), 1);                      /* another kid asks */
    gr_jwks_missing_forget(m, "c");                                              /* a refresh found c */
    assert_int_equal(gr_jwks_missing_ask(m, "c", 2001), 1);
    /* a kid too long to remember never asks; one at the bound does */
    char big[GR_JWKS_MISSING_KID_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(gr_jwks_missing_ask(m, big, 3000), 0);
    big[GR_JWKS_MISSING_KID_MAX] = 0;
    assert_int_equal(gr_jwks_missing_ask(m, big, 3000), 1);
    assert_int_equal(gr_jwks_missing_ask(m, big, 3001), 0);
    /* 16 entries at most: filling with new kids forgets the least recently used ("b" touched last) */
    memset(m, 0, sizeof *m);
    char kid[16];
    for (int i = 0; i < GR_JWKS_MISSING_MAX; i++) {
        snprintf(kid, sizeof kid, "k%d", i);
        assert_int_equal(gr_jwks_missing_ask(m, kid, 5000), 1);
    }
    assert_int_equal(gr_jwks_missing_ask(m, "k0", 5001), 0);  /* k0 now the most recent */
    assert_int_equal(gr_jwks_missing_ask(m, "new", 5002), 1); /* evicts k1 */
    assert_int_equal(m->n, GR_JWKS_MISSING_MAX);
    assert_int_equal(gr_jwks_missing_ask(m, "k0", 5003), 0);
    assert_int_equal(gr_jwks_missing_ask(m, "k1", 5004), 1); /* forgotten: asks again */
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(retry_schedule),
        cmocka_unit_test(missing_kids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
