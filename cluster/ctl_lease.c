/*
 * ctl_lease.c: the controller's lease (cluster/ctl_lease.h): grant, keepalive, revoke on the broker's loop.
 * One grant or keepalive in flight (req) and, apart from it, at most one revoke (rv_req) so a revoke never
 * delays the next grant.
 */
#include "cluster/ctl_lease.h"

#include <ev.h>
#include <inttypes.h>
#include <stdlib.h>

#include "cluster/etcd.h"
#include "common/log.h"

struct gr_ctl_lease {
    struct ev_loop *loop;
    struct gr_etcd *etcd;
    int64_t ttl_s;
    gr_ctl_lease_fn *fn;
    void *ctx;
    bool want;
    int64_t lease_id;
    uint64_t grants;
    struct gr_etcd_req *req;    /* grant or keepalive */
    struct gr_etcd_req *rv_req; /* revoke */
    int64_t rv_lease;           /* the lease rv_req revokes */
    ev_timer ka_w;              /* keepalive period */
    ev_timer retry_w;           /* next grant after a failure */
};

static void grant_send(struct gr_ctl_lease *cl);

static void report(struct gr_ctl_lease *cl, int64_t lease)
{
    if (cl->lease_id == lease) return;
    cl->lease_id = lease;
    if (cl->fn) cl->fn(cl->ctx, lease);
}

static void grant_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_ctl_lease *cl = ctx;
    cl->req = NULL;
    if (!cl->want) return;
    if (res->status != GR_ETCD_OK) {
        ev_timer_start(cl->loop, &cl->retry_w);
        return;
    }
    cl->grants++;
    ev_timer_again(cl->loop, &cl->ka_w);
    report(cl, res->lease_id);
}

static void grant_send(struct gr_ctl_lease *cl)
{
    if (!cl->want || cl->req || cl->lease_id) return;
    if (!(cl->req = gr_etcd_lease_grant(cl->etcd, cl->ttl_s, 0, grant_cb, cl))) {
        GR_LOG_RATELIMITED(GR_LOG_WARN, "controller lease: %s", gr_etcd_last_error(cl->etcd));
        ev_timer_start(cl->loop, &cl->retry_w);
    }
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    grant_send(w->data);
}

static void ka_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_ctl_lease *cl = ctx;
    cl->req = NULL;
    if (res->status != GR_ETCD_LEASE_GONE) return; /* renewed, or no answer: no evidence either way */
    GR_WARN("controller lease %" PRId64 " lost: not acting as controller until a new one is granted",
            cl->lease_id);
    ev_timer_stop(cl->loop, &cl->ka_w);
    report(cl, 0);
    grant_send(cl);
}

static void ka_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_ctl_lease *cl = w->data;
    if (!cl->lease_id || cl->req) return;
    cl->req = gr_etcd_lease_keepalive(cl->etcd, cl->lease_id, ka_cb, cl);
}

static void revoke_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_ctl_lease *cl = ctx;
    cl->rv_req = NULL;
    if (res->status == GR_ETCD_OK || res->status == GR_ETCD_LEASE_GONE)
        GR_INFO("controller lease %" PRId64 " revoked", cl->rv_lease);
    else
        GR_WARN("controller lease %" PRId64 " not revoked (%s): it expires in %" PRId64 " s", cl->rv_lease,
                res->message, cl->ttl_s);
}

void gr_ctl_lease_want(struct gr_ctl_lease *cl, bool want)
{
    if (want == cl->want) return;
    cl->want = want;
    if (want) return grant_send(cl);
    ev_timer_stop(cl->loop, &cl->retry_w);
    ev_timer_stop(cl->loop, &cl->ka_w);
    if (cl->req) gr_etcd_cancel(cl->req);
    cl->req = NULL;
    int64_t held = cl->lease_id;
    report(cl, 0);
    if (!held) return;
    if (cl->rv_req) gr_etcd_cancel(cl->rv_req); /* an older revoke: its lease expires on its own */
    cl->rv_lease = held;
    cl->rv_req = gr_etcd_lease_revoke(cl->etcd, held, revoke_cb, cl);
}

struct gr_ctl_lease *gr_ctl_lease_new(struct ev_loop *loop, struct gr_etcd *etcd, int64_t ttl_ms,
                                      gr_ctl_lease_fn *fn, void *ctx)
{
    struct gr_ctl_lease *cl = calloc(1, sizeof *cl);
    if (!cl) return NULL;
    cl->loop = loop;
    cl->etcd = etcd;
    cl->ttl_s = ttl_ms <= 1000 ? 1 : (ttl_ms + 999) / 1000;
    cl->fn = fn;
    cl->ctx = ctx;
    double ka_s = (double)cl->ttl_s / 3.0;
    if (ka_s < 0.1) ka_s = 0.1;
    ev_init(&cl->ka_w, ka_timer_cb);
    cl->ka_w.repeat = ka_s;
    cl->ka_w.data = cl;
    ev_timer_init(&cl->retry_w, retry_cb, (double)GR_CTL_LEASE_RETRY_MS / 1000.0, 0.0);
    cl->retry_w.data = cl;
    return cl;
}

int64_t gr_ctl_lease_id(const struct gr_ctl_lease *cl)
{
    return cl->lease_id;
}

uint64_t gr_ctl_lease_grants(const struct gr_ctl_lease *cl)
{
    return cl->grants;
}

void gr_ctl_lease_free(struct gr_ctl_lease *cl)
{
    if (!cl) return;
    ev_timer_stop(cl->loop, &cl->ka_w);
    ev_timer_stop(cl->loop, &cl->retry_w);
    if (cl->req) gr_etcd_cancel(cl->req);
    if (cl->rv_req) gr_etcd_cancel(cl->rv_req);
    free(cl);
}
