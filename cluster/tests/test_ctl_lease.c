/*
 * test_ctl_lease.c: the controller's lease (cluster/ctl_lease.h) against a real etcd (run by
 * cluster/tests/etcd-tests.sh): granted when wanted, kept alive past several TTLs, a lease revoked behind its
 * back reported lost (0) and replaced by a new one, and unwanted: reported 0 and revoked, so a key bound to
 * it goes at once. Prints "controller lease: N passed, N failed".
 */
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/ctl_lease.h"
#include "cluster/etcd.h"
#include "cluster/tests/testkit.h"
#include "common/time.h"

static struct ev_loop *loop;
static struct gr_etcd *etcd;

/* every value the keeper reported, in order */
static int64_t reported[16];
static int nreported;

static void on_lease(void *ctx, int64_t lease_id)
{
    (void)ctx;
    if (nreported < 16) reported[nreported++] = lease_id;
}

static bool reports_at_least(void *arg)
{
    return nreported >= *(int *)arg;
}

struct outcome {
    bool fired;
    enum gr_etcd_status status;
    int64_t count;
    int64_t lease;
};

static void on_done(void *ctx, const struct gr_etcd_result *res)
{
    struct outcome *o = ctx;
    o->fired = true;
    o->status = res->status;
    o->count = res->op.count;
    o->lease = res->op.kv_count == 1 ? res->op.kvs[0].lease : 0;
}

static bool fired(void *arg)
{
    return ((struct outcome *)arg)->fired;
}

#define KEY "/gregor-ctl-lease-test/controller"

static bool put_bound(int64_t lease)
{
    struct outcome o = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_PUT, .key = KEY, .value = "x", .value_len = 1, .lease = lease};
    if (!gr_etcd_put(etcd, &op, on_done, &o)) return false;
    return testkit_run_until(loop, fired, &o, 5000) && o.status == GR_ETCD_OK;
}

/* The key's count (0 or 1); -1 when etcd did not answer. */
static int64_t key_count(void)
{
    struct outcome o = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE, .key = KEY};
    if (!gr_etcd_range(etcd, &op, on_done, &o)) return -1;
    if (!testkit_run_until(loop, fired, &o, 5000) || o.status != GR_ETCD_OK) return -1;
    return o.count;
}

static bool key_gone(void *arg)
{
    (void)arg;
    return key_count() == 0;
}

static void sleep_loop(int64_t ms)
{
    int never = 1000;
    testkit_run_until(loop, reports_at_least, &never, ms);
}

int main(void)
{
    const char *endpoint = getenv("ETCD_ENDPOINT");
    if (!endpoint) {
        printf("ETCD_ENDPOINT not set (run cluster/tests/etcd-tests.sh)\ncontroller lease: 0 passed, 1 "
               "failed\n");
        return 1;
    }
    loop = ev_default_loop(0);
    char err[256];
    struct gr_etcd_config cfg = {.endpoints = endpoint, .request_timeout_ms = 3000};
    if (!(etcd = gr_etcd_new(loop, &cfg, err, sizeof err))) {
        printf("setup: %s\ncontroller lease: 0 passed, 1 failed\n", err);
        return 1;
    }
    /* TTL 1 s (1,000 ms rounds to 1 s), keepalives every third of it */
    struct gr_ctl_lease *cl = gr_ctl_lease_new(loop, etcd, 1000, on_lease, NULL);
    CHECK(cl != NULL);
    CHECK(gr_ctl_lease_id(cl) == 0); /* nothing before it is wanted */

    /* wanted: granted and reported once */
    gr_ctl_lease_want(cl, true);
    int want = 1;
    CHECK(testkit_run_until(loop, reports_at_least, &want, 5000));
    int64_t first = nreported >= 1 ? reported[0] : 0;
    CHECK(first != 0 && gr_ctl_lease_id(cl) == first);
    CHECK(put_bound(first));

    /* kept alive: the key bound to it outlives four TTLs */
    sleep_loop(4000);
    CHECK(key_count() == 1);
    CHECK(nreported == 1);

    /* revoked behind its back: a keepalive finds it gone -> 0 reported, then a new lease */
    struct outcome rv = {0};
    CHECK(gr_etcd_lease_revoke(etcd, first, on_done, &rv) != NULL);
    CHECK(testkit_run_until(loop, fired, &rv, 5000) && rv.status == GR_ETCD_OK);
    want = 3;
    CHECK(testkit_run_until(loop, reports_at_least, &want, 5000));
    CHECK(nreported >= 3 && reported[1] == 0 && reported[2] != 0 && reported[2] != first);
    int64_t second = gr_ctl_lease_id(cl);
    CHECK(second != 0 && second != first);
    CHECK(gr_ctl_lease_grants(cl) == 2);

    /* unwanted: 0 reported at once, no grant follows */
    int before = nreported;
    gr_ctl_lease_want(cl, false);
    CHECK(nreported == before + 1 && reported[before] == 0 && gr_ctl_lease_id(cl) == 0);
    sleep_loop(1500);
    CHECK(gr_ctl_lease_id(cl) == 0 && gr_ctl_lease_grants(cl) == 2 && nreported == before + 1);
    gr_ctl_lease_free(cl);

    /* released: the lease is revoked, so a key bound to it goes at once; with a 10 s TTL, a key gone
       within 5 s was revoked, not expired */
    cl = gr_ctl_lease_new(loop, etcd, 10000, on_lease, NULL);
    before = nreported;
    gr_ctl_lease_want(cl, true);
    want = before + 1;
    CHECK(testkit_run_until(loop, reports_at_least, &want, 5000));
    int64_t third = gr_ctl_lease_id(cl);
    CHECK(third != 0 && put_bound(third));
    CHECK(key_count() == 1);
    int64_t t0 = gr_time_mono_ms();
    gr_ctl_lease_want(cl, false);
    CHECK(testkit_run_until(loop, key_gone, NULL, 5000));
    printf("controller lease: key gone %" PRId64 " ms after the release (TTL 10 s)\n",
           gr_time_mono_ms() - t0);

    gr_ctl_lease_free(cl);
    gr_etcd_free(etcd);
    printf("controller lease: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
