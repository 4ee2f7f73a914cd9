/*
 * testkit.h: what the cluster tests that run against a real etcd share (test_etcd.c, test_controller.c,
 * test_topic_writer.c; run by cluster/tests/etcd-tests.sh): checks counted into `passed` / `failed` (each
 * program prints "<name>: N passed, N failed" from them, which the script sums), and running a libev loop
 * until a condition holds or a time passes. Header-only, static: include it once per test program.
 */
#ifndef GR_CLUSTER_TESTKIT_H
#define GR_CLUSTER_TESTKIT_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/time.h"

static int passed, failed;

/* Counts `cond`: passed, or failed with its file, line and text printed. */
#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (cond) {                                                                                          \
            passed++;                                                                                        \
        } else {                                                                                             \
            failed++;                                                                                        \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                           \
        }                                                                                                    \
    } while (0)

static void testkit_wake(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l;
    (void)t;
    (void)revents;
}

/* Runs `loop` one iteration at a time until pred(arg) holds or `ms` milliseconds (monotonic) pass; a 10 ms
 * timer keeps an idle loop from blocking past the deadline. Returns whether pred held. */
static inline bool testkit_run_until(struct ev_loop *loop, bool (*pred)(void *arg), void *arg, int64_t ms)
{
    int64_t end = gr_time_mono_ms() + ms;
    ev_timer guard;
    ev_timer_init(&guard, testkit_wake, 0.01, 0.01);
    ev_timer_start(loop, &guard);
    bool ok;
    while (!(ok = pred(arg)) && gr_time_mono_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &guard);
    return ok;
}

#endif
