/*
 * request_metrics.c: request timing, its quantiles and latency histogram, the slow-request log line and the
 * network thread's idle fractions (server/request_metrics.h).
 */
#include "server/request_metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "server/broker.h"

/* ---- the log-linear histogram in rotating windows ---- */

int gr_rt_bucket(uint64_t us)
{
    const uint64_t sub = 1u << GR_RT_SUB_BITS;
    if (us >= (1ull << GR_RT_MAX_EXP)) return GR_RT_BUCKETS - 1;
    if (us < 2 * sub) return (int)us;
    int e = 63 - __builtin_clzll(us); /* >= GR_RT_SUB_BITS + 1 */
    int shift = e - GR_RT_SUB_BITS;
    return (int)((uint64_t)shift * sub + (us >> shift));
}

double gr_rt_bucket_value_us(int idx)
{
    const int sub = 1 << GR_RT_SUB_BITS;
    if (idx < 2 * sub) return (double)idx;
    int shift = idx / sub - 1;
    uint64_t lower = (uint64_t)(idx - shift * sub) << shift;
    uint64_t width = 1ull << shift;
    return (double)lower + (double)(width - 1) / 2.0;
}

void gr_rt_hist_add(struct gr_rt_hist *h, uint64_t us, int64_t now_ms)
{
    int64_t e = now_ms / GR_RT_WINDOW_MS;
    int w = (int)(e % GR_RT_WINDOWS);
    if (h->epoch[w] != e) { /* the slot held an older window: it starts again */
        memset(h->counts[w], 0, sizeof h->counts[w]);
        h->epoch[w] = e;
    }
    h->counts[w][gr_rt_bucket(us)]++;
    h->total++;
}

/* Whether window slot `w` holds one of the windows current at epoch `e`. A slot never written has epoch 0
   and counts 0, so reading it adds nothing. */
static bool window_current(const struct gr_rt_hist *h, int w, int64_t e)
{
    return h->epoch[w] <= e && h->epoch[w] > e - GR_RT_WINDOWS;
}

void gr_rt_hist_quantiles_us(const struct gr_rt_hist *h, const uint32_t *q_ppm, int nq, int64_t now_ms,
                             double *out)
{
    int64_t e = now_ms / GR_RT_WINDOW_MS;
    uint64_t merged[GR_RT_BUCKETS] = {0}, n = 0; /* the current windows summed once */
    for (int w = 0; w < GR_RT_WINDOWS; w++)
        if (window_current(h, w, e))
            for (int i = 0; i < GR_RT_BUCKETS; i++)
                merged[i] += h->counts[w][i];
    for (int i = 0; i < GR_RT_BUCKETS; i++)
        n += merged[i];
    for (int q = 0; q < nq; q++) {
        out[q] = NAN;
        if (!n) continue;
        uint64_t rank = (q_ppm[q] * n + 999999) / 1000000; /* ceil(q * n), in integers */
        if (rank < 1) rank = 1;
        uint64_t cum = 0;
        for (int i = 0; i < GR_RT_BUCKETS && isnan(out[q]); i++)
            if ((cum += merged[i]) >= rank) out[q] = gr_rt_bucket_value_us(i);
    }
}

double gr_rt_hist_quantile_us(const struct gr_rt_hist *h, uint32_t q_ppm, int64_t now_ms)
{
    double v;
    gr_rt_hist_quantiles_us(h, &q_ppm, 1, now_ms, &v);
    return v;
}

/* ---- idle accounting ---- */

void gr_rt_idle_add(struct gr_rt_idle *id, int64_t from_us, int64_t to_us, bool busy)
{
    while (from_us < to_us) {
        int64_t e = from_us / GR_RT_IDLE_SLOT_US;
        int64_t slot_end = (e + 1) * GR_RT_IDLE_SLOT_US;
        int64_t upto = to_us < slot_end ? to_us : slot_end;
        int s = (int)(e % GR_RT_IDLE_SLOTS);
        if (id->epoch[s] != e) {
            id->epoch[s] = e;
            id->idle_us[s] = id->busy_us[s] = 0;
        }
        (busy ? id->busy_us : id->idle_us)[s] += upto - from_us;
        from_us = upto;
    }
}

double gr_rt_idle_fraction(const struct gr_rt_idle *id, int64_t now_us, bool busy)
{
    int64_t e = now_us / GR_RT_IDLE_SLOT_US;
    int64_t from = (e - (GR_RT_IDLE_SLOTS - 1)) * GR_RT_IDLE_SLOT_US;
    if (from < id->started_us) from = id->started_us;
    if (now_us <= from) return NAN;
    int64_t sum = 0;
    for (int s = 0; s < GR_RT_IDLE_SLOTS; s++)
        if (id->epoch[s] <= e && id->epoch[s] > e - GR_RT_IDLE_SLOTS)
            sum += (busy ? id->busy_us : id->idle_us)[s];
    double f = (double)sum / (double)(now_us - from);
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

/* ---- recording ---- */

static struct gr_rt_request *request_slot(struct gr_reqtime *rt, int slot, const char *name)
{
    if (slot < 0 || slot >= GR_RT_SLOTS) return NULL;
    if (!rt->req[slot]) { /* once per name: never per request */
        if (!(rt->req[slot] = calloc(1, sizeof *rt->req[slot]))) return NULL;
        rt->req[slot]->name = name;
    }
    return rt->req[slot];
}

/* The total time of a request less a Fetch's wait (its long poll: wake - local), never negative. */
static int64_t latency_us(const struct gr_req_times *t, int64_t end_us, int fetch_kind)
{
    int64_t recv = t->recv ? t->recv : end_us;
    int64_t wait = fetch_kind && t->wake && t->local ? t->wake - t->local : 0;
    int64_t latency = end_us - recv - (wait > 0 ? wait : 0);
    return latency > 0 ? latency : 0;
}

int64_t gr_reqtime_observe(struct gr_reqtime *rt, int slot, const char *name, int fetch_kind,
                           const struct gr_req_times *t, int64_t end_us, int64_t now_ms)
{
    /* a stamp not reached takes the one before it: e.g. no wait (local = done), no write (send = end) */
    int64_t recv = t->recv ? t->recv : end_us;
    int64_t start = t->start ? t->start : recv;
    int64_t done = t->done ? t->done : end_us;
    int64_t local = t->local ? t->local : done;
    int64_t send = t->send ? t->send : end_us;
    int64_t d[GR_RT_METRICS] = {start - recv, local - start, done - local,
                                send - done,  end_us - send, end_us - recv};
    int64_t latency = latency_us(t, end_us, fetch_kind);
    int slots[2] = {slot, fetch_kind};
    const char *names[2] = {name, fetch_kind == GR_RT_FETCH_FOLLOWER ? "FetchFollower" : "FetchConsumer"};
    for (int k = 0; k < (fetch_kind ? 2 : 1); k++) {
        struct gr_rt_request *r = request_slot(rt, slots[k], names[k]);
        if (!r) continue;
        for (int m = 0; m < GR_RT_METRICS; m++)
            gr_rt_hist_add(&r->h[m], d[m] > 0 ? (uint64_t)d[m] : 0, now_ms);
        if (k) continue; /* the latency histogram is by API name only */
        for (int i = 0; i < GR_RT_LAT_BUCKETS; i++)
            if (latency <= (256LL << i)) {
                r->lat[i]++;
                break;
            }
        r->lat_count++;
        r->lat_sum_s += (double)latency / 1e6;
    }
    return latency;
}

/* ---- the page ---- */

static const char *const metric_names[GR_RT_METRICS] = {
    "kafka_network_requestmetrics_requestqueuetimems", "kafka_network_requestmetrics_localtimems",
    "kafka_network_requestmetrics_remotetimems",       "kafka_network_requestmetrics_responsequeuetimems",
    "kafka_network_requestmetrics_responsesendtimems", "kafka_network_requestmetrics_totaltimems",
};
/* the JMX exporter's labels for Yammer's 50thPercentile ... 999thPercentile, and the quantiles in ppm */
#define GR_RT_QUANTILES 6
static const char *const quantile_labels[GR_RT_QUANTILES] = {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"};
static const uint32_t quantile_ppm[GR_RT_QUANTILES] = {500000, 750000, 950000, 980000, 990000, 999000};

bool gr_reqtime_render_at(const struct gr_reqtime *rt, int64_t now_us, struct gr_prom_buf *out)
{
    if (!rt) return !out->failed;
    int64_t now_ms = now_us / 1000;
    char name[96];
    for (int m = 0; m < GR_RT_METRICS; m++) {
        gr_prom_type(out, metric_names[m], "summary");
        for (int s = 0; s < GR_RT_SLOTS; s++) {
            const struct gr_rt_request *r = rt->req[s];
            if (!r) continue;
            double qv[GR_RT_QUANTILES];
            gr_rt_hist_quantiles_us(&r->h[m], quantile_ppm, GR_RT_QUANTILES, now_ms, qv);
            for (int q = 0; q < GR_RT_QUANTILES; q++) {
                struct gr_prom_label l[2] = {{"request", r->name}, {"quantile", quantile_labels[q]}};
                gr_prom_sample(out, metric_names[m], l, 2, qv[q] / 1000.0);
            }
            struct gr_prom_label l = {"request", r->name};
            snprintf(name, sizeof name, "%s_count", metric_names[m]);
            gr_prom_sample_u64(out, name, &l, 1, r->h[m].total);
        }
    }
    const char *lat = "gregor_request_latency_seconds";
    gr_prom_type(out, lat, "histogram");
    for (int s = 0; s < GR_RT_FETCH_CONSUMER; s++) {
        const struct gr_rt_request *r = rt->req[s];
        if (!r) continue;
        uint64_t cum = 0;
        char le[32];
        snprintf(name, sizeof name, "%s_bucket", lat);
        for (int i = 0; i < GR_RT_LAT_BUCKETS; i++) {
            cum += r->lat[i];
            snprintf(le, sizeof le, "%.6f", (double)(256LL << i) / 1e6);
            struct gr_prom_label l[2] = {{"request", r->name}, {"le", le}};
            gr_prom_sample_u64(out, name, l, 2, cum);
        }
        struct gr_prom_label l[2] = {{"request", r->name}, {"le", "+Inf"}};
        gr_prom_sample_u64(out, name, l, 2, r->lat_count);
        snprintf(name, sizeof name, "%s_sum", lat);
        gr_prom_sample(out, name, l, 1, r->lat_sum_s);
        snprintf(name, sizeof name, "%s_count", lat);
        gr_prom_sample_u64(out, name, l, 1, r->lat_count);
    }
    if (rt->loop) {
        const char *np = "kafka_network_socketserver_networkprocessoravgidlepercent";
        const char *hp = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent";
        double busy = gr_rt_idle_fraction(&rt->idle, now_us, true);
        gr_prom_type(out, np, "gauge");
        gr_prom_sample(out, np, NULL, 0, gr_rt_idle_fraction(&rt->idle, now_us, false));
        gr_prom_type(out, hp, "gauge");
        gr_prom_sample(out, hp, NULL, 0, isnan(busy) ? busy : 1.0 - busy);
    }
    return !out->failed;
}

bool gr_reqtime_render(struct gr_broker *b, struct gr_prom_buf *out)
{
    return gr_reqtime_render_at(b->metrics.reqtime, gr_time_mono_us(), out);
}

void gr_reqtime_free(struct gr_reqtime *rt)
{
    if (!rt) return;
    if (rt->loop) { /* unreferenced when started: referenced again before stopping, as libev asks */
        ev_ref(rt->loop);
        ev_prepare_stop(rt->loop, &rt->prepare_w);
        ev_ref(rt->loop);
        ev_check_stop(rt->loop, &rt->check_w);
    }
    for (int s = 0; s < GR_RT_SLOTS; s++)
        free(rt->req[s]);
    free(rt);
}

/* ---- the broker's hooks ---- */

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_reqtime *rt = w->data;
    rt->poll_from_us = gr_time_mono_us();
}

static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_reqtime *rt = w->data;
    if (rt->poll_from_us) gr_rt_idle_add(&rt->idle, rt->poll_from_us, gr_time_mono_us(), false);
    rt->poll_from_us = 0;
}

int gr_reqtime_start(struct gr_broker *b)
{
    struct gr_reqtime *rt = b->metrics.reqtime;
    if (!rt && !(rt = b->metrics.reqtime = calloc(1, sizeof *rt))) return -ENOMEM;
    if (rt->loop) return 0;
    rt->loop = b->loop;
    rt->idle.started_us = gr_time_mono_us();
    ev_prepare_init(&rt->prepare_w, prepare_cb);
    rt->prepare_w.data = rt;
    ev_prepare_start(b->loop, &rt->prepare_w);
    ev_unref(b->loop);
    ev_check_init(&rt->check_w, check_cb);
    rt->check_w.data = rt;
    ev_check_start(b->loop, &rt->check_w);
    ev_unref(b->loop);
    return 0;
}

void gr_reqtime_received(struct gr_req *req)
{
    req->times.recv = gr_time_mono_us();
}

void gr_reqtime_started(struct gr_req *req)
{
    if (!req->times.start) req->times.start = gr_time_mono_us();
}

void gr_reqtime_parked(struct gr_req *req)
{
    if (!req->times.local) req->times.local = gr_time_mono_us();
}

void gr_reqtime_finishing(struct gr_req *req)
{
    if (req->times.local && !req->times.wake) req->times.wake = gr_time_mono_us();
}

void gr_reqtime_queued(struct gr_req *req)
{
    int64_t now = gr_time_mono_us();
    if (!req->times.local) req->times.local = now; /* never waited: its local time ends with the answer */
    if (!req->times.done) req->times.done = now;
    const struct gr_str *c = &req->hdr.client_id; /* points into the frame, freed once answered */
    int n = c->ptr && c->len > 0 ? (c->len < GR_RT_CLIENT_ID_BYTES ? c->len : GR_RT_CLIENT_ID_BYTES - 1) : 0;
    for (int i = 0; i < n; i++) /* a control byte could forge a log line: '?' instead */
        req->times.client_id[i] = (unsigned char)c->ptr[i] < 0x20 || c->ptr[i] == 0x7f ? '?' : c->ptr[i];
    req->times.client_id[n] = 0;
}

void gr_reqtime_sending(struct gr_req *req)
{
    if (!req->times.send) req->times.send = gr_time_mono_us();
}

/* GR_RT_FETCH_FOLLOWER for a follower's Fetch (replica id >= 0: from v15 in ReplicaState),
   GR_RT_FETCH_CONSUMER for a client's, 0 for other APIs (Kafka's RequestChannel.Request.isFromFollower). */
static int fetch_kind(const struct gr_req *req)
{
    if (req->hdr.request_api_key != GR_API_FETCH || !req->body) return 0;
    const struct gr_fetch_request *body = req->body;
    int32_t replica = req->hdr.request_api_version >= 15 ? body->replica_state.replica_id : body->replica_id;
    return replica >= 0 ? GR_RT_FETCH_FOLLOWER : GR_RT_FETCH_CONSUMER;
}

void gr_reqtime_sent(struct gr_req *req, const char *peer)
{
    struct gr_broker *b = req->broker;
    if (!req->api || !req->times.recv) return;  /* never dispatched (closed at once) or made outside net.c */
    struct gr_reqtime *rt = b->metrics.reqtime; /* NULL without gr_reqtime_start (unit tests): log only */
    int64_t now = gr_time_mono_us();
    int kind = fetch_kind(req);
    int64_t latency = rt ? gr_reqtime_observe(rt, req->hdr.request_api_key, req->api->name, kind, &req->times,
                                              now, now / 1000)
                         : latency_us(&req->times, now, kind);
    /* the slow-request line leaves out every long-poll wait: a Fetch's (as the histogram), and JoinGroup's
       and SyncGroup's waits for the rebalance (group.initial.rebalance.delay.ms alone is 3 s by default) */
    int16_t key = req->hdr.request_api_key;
    if (!kind && (key == GR_API_JOIN_GROUP || key == GR_API_SYNC_GROUP))
        latency = latency_us(&req->times, now, 1);
    int64_t slow_ms = b->cfg.settings.gregor_log_slow_request_ms;
    if (slow_ms >= 0 && latency > slow_ms * 1000) {
        GR_WARN_KV_RATELIMITED("slow request",
                               "api=%s version=%d client_id=%s correlation_id=%d peer=%s duration_ms=%.3f",
                               req->api->name, req->hdr.request_api_version, req->times.client_id,
                               req->hdr.correlation_id, peer ? peer : "", (double)latency / 1000.0);
    }
}

int64_t gr_reqtime_handler_enter(struct gr_broker *b)
{
    struct gr_reqtime *rt = b->metrics.reqtime;
    if (!rt) return -1;
    if (rt->handler_depth++) return 0; /* nested: the outermost call counts the time */
    return gr_time_mono_us();
}

void gr_reqtime_handler_exit(struct gr_broker *b, int64_t token)
{
    struct gr_reqtime *rt = b->metrics.reqtime;
    if (!rt || token < 0) return;
    rt->handler_depth--;
    if (!token) return;
    gr_rt_idle_add(&rt->idle, token, gr_time_mono_us(), true);
}
