/*
 * test_netlimits.c: the accounting behind the network's limits (server/netlimits.h): the request pool
 * follows Kafka's SimpleMemoryPool in non-strict mode (a reservation succeeds while anything is left, may
 * overshoot by one, and a frame larger than the whole pool passes when it is otherwise free); the pool of
 * 64 MiB under the partial-frame flood of issue 26 (200 connections announcing 16 MiB each) reserves for 4
 * of them, the rest wait, and each release lets exactly one more in; the unsent-answer rule stops a
 * connection at its own bound and, when the broker-wide pool is spent, only connections that hold unsent
 * answers; an out-of-descriptors episode starts once, counts, and ends only once an accept succeeded and no
 * failure came for a quiet period; the config defaults equal the limits header.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/limits.h"
#include "server/config.h"
#include "server/netlimits.h"

#define MIB (1024 * 1024)

static void pool_non_strict(void **state)
{
    (void)state;
    struct gr_mempool pool;
    gr_mempool_init(&pool, 100);
    assert_true(gr_mempool_try_take(&pool, 60));
    assert_int_equal(pool.used_bytes, 60);
    assert_true(gr_mempool_try_take(&pool, 60)); /* 40 left: taken, overshooting to 120 */
    assert_int_equal(pool.used_bytes, 120);
    assert_true(gr_mempool_spent(&pool));
    assert_false(gr_mempool_try_take(&pool, 1)); /* spent: refused, nothing taken */
    assert_int_equal(pool.used_bytes, 120);
    gr_mempool_give(&pool, 60);
    assert_false(gr_mempool_spent(&pool));
    assert_true(gr_mempool_try_take(&pool, 1));
    assert_int_equal(pool.used_bytes, 61);
}

static void pool_frame_larger_than_pool(void **state)
{
    (void)state;
    struct gr_mempool pool;
    gr_mempool_init(&pool, 64 * MIB);
    assert_true(gr_mempool_try_take(&pool, 100 * MIB)); /* free pool: a frame over the bound still passes */
    assert_false(gr_mempool_try_take(&pool, 8));        /* and nothing else until it is given back */
    gr_mempool_give(&pool, 100 * MIB);
    assert_int_equal(pool.used_bytes, 0);
    assert_true(gr_mempool_try_take(&pool, 8));
}

static void pool_unbounded(void **state)
{
    (void)state;
    struct gr_mempool pool;
    gr_mempool_init(&pool, -1); /* queued.max.request.bytes=-1, Kafka's default */
    for (int i = 0; i < 1000; i++)
        assert_true(gr_mempool_try_take(&pool, 100 * MIB));
    assert_false(gr_mempool_spent(&pool));
    assert_int_equal(pool.used_bytes, (int64_t)1000 * 100 * MIB);
}

/* Issue 26 defect 4's flood: 200 connections announce 16 MiB with the bound at 64 MiB. */
static void pool_partial_frame_flood(void **state)
{
    (void)state;
    struct gr_mempool pool;
    gr_mempool_init(&pool, 64 * MIB);
    int reserved = 0;
    for (int c = 0; c < 200; c++)
        reserved += gr_mempool_try_take(&pool, 16 * MIB);
    assert_int_equal(reserved, 4);
    assert_int_equal(pool.used_bytes, 64 * MIB);
    /* one reserved connection closes: exactly one waiting connection gets in */
    gr_mempool_give(&pool, 16 * MIB);
    int more = 0;
    for (int c = 0; c < 196; c++)
        more += gr_mempool_try_take(&pool, 16 * MIB);
    assert_int_equal(more, 1);
    assert_int_equal(pool.used_bytes, 64 * MIB);
    for (int c = 0; c < 4; c++)
        gr_mempool_give(&pool, 16 * MIB);
    assert_int_equal(pool.used_bytes, 0);
}

static void unsent_rules(void **state)
{
    (void)state;
    struct gr_mempool unsent;
    gr_mempool_init(&unsent, 32 * MIB);
    assert_true(gr_netlimits_may_take(0, MIB, &unsent));
    assert_true(gr_netlimits_may_take(MIB - 1, MIB, &unsent));
    assert_false(gr_netlimits_may_take(MIB, MIB, &unsent)); /* at its own bound */
    gr_mempool_take(&unsent, 32 * MIB);                     /* the broker-wide pool spent */
    assert_false(gr_netlimits_may_take(1, MIB, &unsent));   /* holding answers: stops */
    assert_true(gr_netlimits_may_take(0, MIB, &unsent));    /* reads its answers: goes on */
    gr_mempool_give(&unsent, 1);
    assert_true(gr_netlimits_may_take(1, MIB, &unsent));
}

static void accept_episode(void **state)
{
    (void)state;
    struct gr_accept_episode ep;
    memset(&ep, 0, sizeof ep);
    assert_false(gr_accept_episode_try_end(&ep, 0, 1000)); /* none open */
    assert_true(gr_accept_episode_fail(&ep, 5000, EMFILE));
    for (int i = 1; i < 50; i++)
        assert_false(gr_accept_episode_fail(&ep, 5000 + 100 * i, EMFILE));
    for (int i = 0; i < 7; i++)
        gr_accept_episode_refused(&ep);
    assert_false(gr_accept_episode_try_end(&ep, 20000, 1000)); /* quiet, but no accept has succeeded yet */
    gr_accept_episode_ok(&ep, 20500);
    assert_true(gr_accept_episode_try_end(&ep, 20600, 1000));
    assert_int_equal(ep.failures, 50);
    assert_int_equal(ep.refused, 7);
    assert_int_equal(ep.last_fail_ms - ep.start_ms, 4900);
    assert_int_equal(ep.err, EMFILE);
    assert_false(ep.open);
    gr_accept_episode_refused(&ep); /* no episode: not counted */
    assert_int_equal(ep.refused, 7);
    assert_true(gr_accept_episode_fail(&ep, 30000, ENFILE)); /* a new episode starts fresh */
    assert_int_equal(ep.failures, 1);
    /* flapping at the limit: a success then a failure again keeps the episode open */
    gr_accept_episode_ok(&ep, 30050);
    assert_false(gr_accept_episode_fail(&ep, 30100, ENFILE));
    assert_false(gr_accept_episode_try_end(&ep, 31500, 1000)); /* no success since the last failure */
    gr_accept_episode_ok(&ep, 31050);
    assert_false(gr_accept_episode_try_end(&ep, 31050, 1000)); /* not quiet for 1 s yet */
    assert_true(gr_accept_episode_try_end(&ep, 31100, 1000));
    assert_int_equal(ep.failures, 2);
    assert_int_equal(ep.refused, 0);
    assert_int_equal(ep.err, ENFILE);
}

static void config_defaults(void **state)
{
    (void)state;
    struct gr_config cfg;
    gr_config_init(&cfg);
    assert_int_equal(gr_config_int(&cfg, "gregor.connection.unsent.bytes.max"), GR_CONN_UNSENT_BYTES_DEFAULT);
    assert_int_equal(gr_config_int(&cfg, "gregor.unsent.bytes.max"), GR_UNSENT_BYTES_DEFAULT);
    assert_int_equal(gr_config_int(&cfg, "queued.max.request.bytes"), -1);
    assert_int_equal(gr_config_set(&cfg, "gregor.unsent.bytes.max", "0"), -1); /* at least 1 */
    gr_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_non_strict), cmocka_unit_test(pool_frame_larger_than_pool),
        cmocka_unit_test(pool_unbounded),  cmocka_unit_test(pool_partial_frame_flood),
        cmocka_unit_test(unsent_rules),    cmocka_unit_test(accept_episode),
        cmocka_unit_test(config_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
