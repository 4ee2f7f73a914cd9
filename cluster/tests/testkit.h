/*
 * testkit.h: what the cluster tests that run against a real etcd share (test_etcd.c, test_controller.c,
 * test_topic_writer.c, test_isr_writer.c, test_producer_ids_etcd.c; run by cluster/tests/etcd-tests.sh):
 * checks counted into `passed` / `failed` (each program prints "<name>: N passed, N failed" from them, which
 * the script sums), running a libev loop until a condition holds or a time passes, the etcd client and key
 * layout a program starts with, and a table of named cases run in order. Header-only, static: include it
 * once per test program.
 */
#ifndef GR_CLUSTER_TESTKIT_H
#define GR_CLUSTER_TESTKIT_H

#include <ev.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "cluster/layout.h"
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

/* The etcd client of a test program, on ETCD_ENDPOINT (etcd-tests.sh sets it), each request timing out after
 * `timeout_ms`; stdout is made line-buffered. Returns new, or NULL after printing why. */
static inline struct gr_etcd *testkit_etcd(struct ev_loop *loop, int64_t timeout_ms)
{
    const char *endpoint = getenv("ETCD_ENDPOINT");
    if (!endpoint) {
        fprintf(stderr, "run through cluster/tests/etcd-tests.sh (needs ETCD_ENDPOINT)\n");
        return NULL;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char err[256];
    struct gr_etcd_config ecfg = {.endpoints = endpoint, .request_timeout_ms = timeout_ms};
    struct gr_etcd *etcd = gr_etcd_new(loop, &ecfg, err, sizeof err);
    if (!etcd) printf("client: %s\n", err);
    return etcd;
}

/* A key layout of this run's own: prefix "/gr-<name>-<pid>", cluster id the 16 bytes first_byte, 2, ..., 16.
 * Returns 0, or -1 (the name is too long). */
static inline int testkit_layout(struct gr_cluster_layout *lay, const char *name, uint8_t first_byte)
{
    char prefix[64], cid[GR_UUID_TEXT_BYTES + 1];
    snprintf(prefix, sizeof prefix, "/gr-%s-%d", name, (int)getpid());
    struct gr_uuid u = {{first_byte, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
    gr_cluster_uuid_format(u, cid);
    return gr_cluster_layout_init(lay, prefix, cid) == 0 ? 0 : -1;
}

/* One named case of a test program. */
struct testkit_case {
    const char *name;
    void (*fn)(void);
};

/* Runs the `n` cases in order, printing "ok   <name> (ms)" or "FAIL <name> (ms)" after each (a case fails
 * when a CHECK in it failed). */
static inline void testkit_run_cases(const struct testkit_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int before = failed;
        int64_t t0 = gr_time_mono_ms();
        cases[i].fn();
        printf("%s %s (%" PRId64 " ms)\n", failed == before ? "ok  " : "FAIL", cases[i].name,
               gr_time_mono_ms() - t0);
    }
}

#endif
