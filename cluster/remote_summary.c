/*
 * remote_summary.c: the coordinator's PartitionSummary client (cluster/remote_summary.h).
 *
 * One struct leader per broker ever asked: its connection (opened on first need, kept), whether a request is
 * pending, the partitions it was asked (owned copies, sorted by topic then partition: the answer is matched
 * against them), and a timer that fails a request still waiting for its connection at the deadline (a
 * request sent carries the rest of the deadline as its own timeout).
 */
#include "cluster/remote_summary.h"

#include <errno.h>
#include <ev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/broker_client.h"
#include "cluster/image.h"
#include "common/log.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"

struct asked {
    char *topic;
    int32_t partition;
    int64_t *offs; /* distinct committed offsets, ascending */
    int32_t n;
};

struct leader {
    struct gr_remote_summary *rs;
    int32_t id;
    struct gr_broker_client_conn *conn;
    bool pending, sent;
    int64_t asked_ms;    /* monotonic time of the last request started, INT64_MIN never */
    int64_t deadline_ms; /* monotonic */
    uint64_t round;      /* the refresh collecting partitions for it */
    struct asked *asked;
    int32_t asked_n, asked_cap;
    ev_timer timer_w;
};

struct waiter {
    void (*cb)(void *ctx);
    void *ctx;
};

struct gr_remote_summary {
    struct ev_loop *loop;
    struct gr_image *img;
    struct gr_broker_client *bc;
    struct gr_part_summaries *cache;
    const struct gr_msg_ops *req_ops;
    int32_t node_id;
    int64_t interval_ms, timeout_ms;
    gr_remote_summary_start_cb *start_cb;
    void *start_ctx;
    struct leader **leaders;
    int32_t leader_n, leader_cap;
    int pending;
    uint64_t round;
    uint64_t errors;
    struct waiter waiters[GR_REMOTE_SUMMARY_WAITERS_MAX];
    int waiter_n;
    ev_timer notify_w; /* runs the waiters from the loop */
};

static void asked_clear(struct leader *l)
{
    for (int32_t i = 0; i < l->asked_n; i++) {
        free(l->asked[i].topic);
        free(l->asked[i].offs);
    }
    l->asked_n = 0;
}

static void notify_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_remote_summary *rs = w->data;
    if (rs->pending) return;
    int n = rs->waiter_n;
    struct waiter ws[GR_REMOTE_SUMMARY_WAITERS_MAX];
    memcpy(ws, rs->waiters, sizeof ws[0] * (size_t)n);
    rs->waiter_n = 0;
    for (int i = 0; i < n; i++)
        ws[i].cb(ws[i].ctx);
}

/* The leader's request ended (answered or failed). */
static void finish(struct leader *l)
{
    struct gr_remote_summary *rs = l->rs;
    l->pending = l->sent = false;
    asked_clear(l);
    ev_timer_stop(rs->loop, &l->timer_w);
    if (--rs->pending == 0 && rs->waiter_n) {
        ev_timer_set(&rs->notify_w, 0.0, 0.0);
        ev_timer_start(rs->loop, &rs->notify_w);
    }
}

/* No answer in time: its entries go, every partition asked counts. */
static void fail(struct leader *l, const char *why)
{
    GR_WARN_RATELIMITED("partition summary: broker %d did not answer (%s): %d partitions left out", l->id,
                        why, l->asked_n);
    gr_part_summaries_drop_leader(l->rs->cache, l->id);
    l->rs->errors += (uint64_t)l->asked_n;
    finish(l);
}

static int cmp_asked_key(const char *t, int32_t tlen, int32_t p, const struct asked *a)
{
    size_t al = strlen(a->topic);
    int c = memcmp(t, a->topic, (size_t)tlen < al ? (size_t)tlen : al);
    if (!c) c = ((size_t)tlen > al) - ((size_t)tlen < al);
    return c ? c : (p > a->partition) - (p < a->partition);
}

/* Index of an asked partition, -1 when it was not asked. */
static int32_t asked_find(const struct leader *l, struct gr_str topic, int32_t p)
{
    int32_t lo = 0, hi = l->asked_n - 1;
    while (lo <= hi && topic.len >= 0) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = cmp_asked_key(topic.ptr, topic.len, p, &l->asked[mid]);
        if (!c) return mid;
        if (c > 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int cmp_offset(const void *a, const void *b)
{
    int64_t x = ((const struct gr_part_summary_offset *)a)->committed;
    int64_t y = ((const struct gr_part_summary_offset *)b)->committed;
    return (x > y) - (x < y);
}

/* Reads an answer into the cache: only partitions asked, once each, offsets bounded. */
static void take_answer(struct leader *l, const struct gr_partition_summary_response *resp)
{
    struct gr_remote_summary *rs = l->rs;
    struct gr_part_summary_entry *e = calloc((size_t)l->asked_n + 1, sizeof *e);
    bool *seen = calloc((size_t)l->asked_n + 1, sizeof *seen);
    int32_t k = 0;
    for (int32_t t = 0; e && seen && t < resp->topics.count; t++) {
        const struct gr_partition_summary_response_partition_summary_topic_result *rt =
            &resp->topics.items[t];
        for (int32_t p = 0; p < rt->partitions.count; p++) {
            const struct gr_partition_summary_response_partition_summary_partition_result *rp =
                &rt->partitions.items[p];
            int32_t i = asked_find(l, rt->name, rp->partition_index);
            if (i < 0 || seen[i]) continue; /* not asked, or answered twice: ignored */
            seen[i] = true;
            if (rp->error_code != GR_ERR_NONE || rp->offsets.count < 0 ||
                rp->offsets.count > GR_PART_SUMMARY_OFFSETS_MAX)
                continue; /* left out (counted below) */
            struct gr_part_summary s = {.high_watermark = rp->high_watermark,
                                        .last_stable_offset = rp->last_stable_offset,
                                        .log_start_offset = rp->log_start_offset,
                                        .log_end_offset = rp->log_end_offset,
                                        .caught_up_offset = rp->caught_up_offset,
                                        .rate = rp->rate,
                                        .offset_count = rp->offsets.count,
                                        .offsets = NULL};
            if (s.offset_count && !(s.offsets = malloc(sizeof *s.offsets * (size_t)s.offset_count))) continue;
            for (int32_t o = 0; o < s.offset_count; o++) {
                const struct gr_partition_summary_response_partition_summary_offset *ro =
                    &rp->offsets.items[o];
                s.offsets[o] = (struct gr_part_summary_offset){
                    ro->committed_offset,
                    {ro->lag_bytes, ro->lag_seconds, ro->headroom_records, ro->headroom_seconds, rp->rate}};
            }
            if (s.offset_count > 1) qsort(s.offsets, (size_t)s.offset_count, sizeof *s.offsets, cmp_offset);
            const struct gr_part_summary *old =
                gr_part_summaries_find(rs->cache, l->asked[i].topic, l->asked[i].partition, NULL, NULL);
            if (old && rs->start_cb && s.log_start_offset > old->log_start_offset)
                rs->start_cb(rs->start_ctx, l->asked[i].topic, l->asked[i].partition, old->log_start_offset,
                             s.log_start_offset);
            e[k++] = (struct gr_part_summary_entry){l->asked[i].topic, l->asked[i].partition, s};
        }
    }
    if (gr_part_summaries_replace_leader(rs->cache, l->id, e ? e : &(struct gr_part_summary_entry){0},
                                         e ? k : 0, gr_time_mono_ms()) < 0)
        k = 0; /* out of memory: none of its entries kept */
    rs->errors += (uint64_t)(l->asked_n - k);
    free(e);
    free(seen);
    finish(l);
}

static void on_answer(void *ctx, enum gr_broker_client_status status, const void *resp, int16_t version,
                      struct gr_broker_client_answer *ans)
{
    (void)version;
    (void)ans;
    struct leader *l = ctx;
    if (status == GR_BROKER_CLIENT_OK)
        take_answer(l, resp);
    else
        fail(l, status == GR_BROKER_CLIENT_TIMEOUT        ? "timeout"
                : status == GR_BROKER_CLIENT_DISCONNECTED ? "disconnected"
                                                          : "bad answer");
}

/* Sends the leader's request when its connection is ready (else waits for it, up to the deadline). */
static void try_send(struct leader *l)
{
    struct gr_remote_summary *rs = l->rs;
    if (!l->pending || l->sent || !l->conn || !gr_broker_client_ready(l->conn)) return;
    /* the body: one topic per run of equal names in asked[] (sorted) */
    int32_t nt = 0;
    for (int32_t i = 0; i < l->asked_n; i++)
        nt += !i || strcmp(l->asked[i].topic, l->asked[i - 1].topic);
    struct gr_partition_summary_request body;
    gr_partition_summary_request_init(&body);
    struct gr_partition_summary_request_partition_summary_topic *ts = calloc((size_t)nt + 1, sizeof *ts);
    struct gr_partition_summary_request_partition_summary_partition *ps =
        calloc((size_t)l->asked_n + 1, sizeof *ps);
    int rc = -ENOMEM;
    if (ts && ps) {
        int32_t t = -1;
        for (int32_t i = 0; i < l->asked_n; i++) {
            if (!i || strcmp(l->asked[i].topic, l->asked[i - 1].topic)) {
                gr_partition_summary_request_partition_summary_topic_init(&ts[++t]);
                ts[t].name = gr_str_c(l->asked[i].topic);
                ts[t].partitions.items = &ps[i];
            }
            gr_partition_summary_request_partition_summary_partition_init(&ps[i]);
            ps[i].partition_index = l->asked[i].partition;
            ps[i].committed_offsets = (struct gr_int64_array){l->asked[i].offs, l->asked[i].n};
            ts[t].partitions.count++;
        }
        body.topics = (struct gr_partition_summary_request_partition_summary_topic_array){ts, nt};
        int64_t left = l->deadline_ms - gr_time_mono_ms();
        if (gr_broker_client_send(l->conn, rs->req_ops, 0, &body, left > 0 ? left : 1, on_answer, l, &rc))
            l->sent = true;
    }
    free(ts);
    free(ps);
    if (!l->sent) fail(l, rc == -ENOMEM ? "out of memory" : "cannot send");
}

static void state_cb(void *ctx, struct gr_broker_client_conn *conn, bool ready)
{
    (void)conn;
    if (ready) try_send(ctx);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct leader *l = w->data;
    if (l->pending && !l->sent) fail(l, "no connection");
}

static struct leader *leader_get(struct gr_remote_summary *rs, int32_t id)
{
    for (int32_t i = 0; i < rs->leader_n; i++)
        if (rs->leaders[i]->id == id) return rs->leaders[i];
    if (rs->leader_n == rs->leader_cap) {
        int32_t cap = rs->leader_cap ? rs->leader_cap * 2 : 8;
        struct leader **v = realloc(rs->leaders, sizeof *v * (size_t)cap);
        if (!v) return NULL;
        rs->leaders = v;
        rs->leader_cap = cap;
    }
    struct leader *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->rs = rs;
    l->id = id;
    l->asked_ms = INT64_MIN;
    ev_timer_init(&l->timer_w, timer_cb, 0.0, 0.0);
    l->timer_w.data = l;
    rs->leaders[rs->leader_n++] = l;
    return l;
}

struct gr_remote_summary *gr_remote_summary_new(struct ev_loop *loop, struct gr_image *img,
                                                const struct gr_remote_summary_config *cfg,
                                                gr_remote_summary_start_cb *start_cb, void *ctx, char *err,
                                                size_t err_len)
{
    if (cfg->interval_ms < 1 || cfg->timeout_ms < 1 || cfg->response_bytes_max < 0) {
        snprintf(err, err_len, "partition summary: interval and timeout must be >= 1 ms, the cap >= 0");
        return NULL;
    }
    struct gr_remote_summary *rs = calloc(1, sizeof *rs);
    if (!rs) return NULL;
    rs->loop = loop;
    rs->img = img;
    rs->node_id = cfg->node_id;
    rs->interval_ms = cfg->interval_ms;
    rs->timeout_ms = cfg->timeout_ms;
    rs->start_cb = start_cb;
    rs->start_ctx = ctx;
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!gr_msg_ops_table[i].response && !strcmp(gr_msg_ops_table[i].name, "partition_summary_request"))
            rs->req_ops = &gr_msg_ops_table[i];
    ev_timer_init(&rs->notify_w, notify_cb, 0.0, 0.0);
    rs->notify_w.data = rs;
    struct gr_broker_client_config bcc = {
        .node_id = cfg->node_id,
        .listener_name = cfg->listener_name,
        .request_timeout_ms = cfg->timeout_ms,
        .backoff_ms = cfg->timeout_ms,
        .in_flight_max = 1,
        .tls_ctx = cfg->tls_ctx,
        .tls_verify_host = cfg->tls_verify_host,
        .sasl_mechanism = cfg->sasl_mechanism,
        .sasl_username = cfg->sasl_username,
        .sasl_password = cfg->sasl_password,
        .sasl_oauth_login = cfg->sasl_oauth_login,
        .response_bytes_max =
            cfg->response_bytes_max ? cfg->response_bytes_max : GR_REMOTE_SUMMARY_RESPONSE_BYTES_DEFAULT};
    if (!rs->req_ops || !(rs->cache = gr_part_summaries_new()) ||
        !(rs->bc = gr_broker_client_new(loop, img, &bcc, err, err_len))) {
        gr_remote_summary_free(rs);
        return NULL;
    }
    return rs;
}

int gr_remote_summary_set_tls_ctx(struct gr_remote_summary *rs, struct ssl_ctx_st *ctx)
{
    return gr_broker_client_set_tls_ctx(rs->bc, ctx);
}

void gr_remote_summary_free(struct gr_remote_summary *rs)
{
    if (!rs) return;
    gr_broker_client_free(rs->bc); /* no callback runs */
    for (int32_t i = 0; i < rs->leader_n; i++) {
        ev_timer_stop(rs->loop, &rs->leaders[i]->timer_w);
        asked_clear(rs->leaders[i]);
        free(rs->leaders[i]->asked);
        free(rs->leaders[i]);
    }
    ev_timer_stop(rs->loop, &rs->notify_w);
    free(rs->leaders);
    gr_part_summaries_free(rs->cache);
    free(rs);
}

static int cmp_want(const void *a, const void *b)
{
    const struct gr_remote_want *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    if (!c) c = (x->partition > y->partition) - (x->partition < y->partition);
    return c ? c : (x->committed > y->committed) - (x->committed < y->committed);
}

/* Adds partition wants[from..to) (one partition, ascending distinct-able offsets) to l's request. */
static bool ask(struct leader *l, const struct gr_remote_want *w, int32_t from, int32_t to)
{
    if (l->asked_n >= GR_PART_SUMMARY_PARTITIONS_MAX) return true; /* the next refresh asks the rest */
    if (l->asked_n == l->asked_cap) {
        int32_t cap = l->asked_cap ? l->asked_cap * 2 : 16;
        struct asked *v = realloc(l->asked, sizeof *v * (size_t)cap);
        if (!v) return false;
        l->asked = v;
        l->asked_cap = cap;
    }
    struct asked *a = &l->asked[l->asked_n];
    a->topic = strdup(w[from].topic);
    a->partition = w[from].partition;
    a->offs = malloc(sizeof *a->offs * (size_t)(to - from));
    a->n = 0;
    if (!a->topic || !a->offs) {
        free(a->topic);
        free(a->offs);
        return false;
    }
    for (int32_t i = from; i < to && a->n < GR_PART_SUMMARY_OFFSETS_MAX; i++)
        if (w[i].committed >= 0 && (!a->n || a->offs[a->n - 1] != w[i].committed))
            a->offs[a->n++] = w[i].committed;
    l->asked_n++;
    return true;
}

int gr_remote_summary_refresh(struct gr_remote_summary *rs, struct gr_remote_want *wants, int32_t n,
                              int64_t now_ms)
{
    if (n > 1) qsort(wants, (size_t)n, sizeof *wants, cmp_want);
    uint64_t round = ++rs->round;
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && wants[j].partition == wants[i].partition && !strcmp(wants[j].topic, wants[i].topic))
            j++;
        const struct gr_image_topic *it =
            gr_image_topic_find(rs->img, wants[i].topic, strlen(wants[i].topic));
        const struct gr_image_partition *ip = it ? gr_image_partition(it, wants[i].partition) : NULL;
        int32_t id = ip ? ip->leader : -1;
        struct leader *l = id >= 0 && id != rs->node_id ? leader_get(rs, id) : NULL;
        if (l && l->round != round && !l->pending &&
            (l->asked_ms == INT64_MIN || now_ms - l->asked_ms >= rs->interval_ms)) {
            l->round = round; /* asked in this refresh */
            asked_clear(l);
        }
        if (l && l->round == round && !l->pending && !ask(l, wants, i, j))
            GR_WARN_RATELIMITED("partition summary: out of memory asking broker %d", id);
        i = j;
    }
    for (int32_t i = 0; i < rs->leader_n; i++) {
        struct leader *l = rs->leaders[i];
        if (l->round != round || l->pending) continue;
        l->pending = true;
        l->sent = false;
        l->asked_ms = now_ms;
        l->deadline_ms = now_ms + rs->timeout_ms;
        rs->pending++;
        ev_timer_set(&l->timer_w, (double)rs->timeout_ms / 1000.0, 0.0);
        ev_timer_start(rs->loop, &l->timer_w);
        if (!l->conn) {
            const struct gr_msg_ops *apis[1] = {rs->req_ops};
            int rc;
            l->conn =
                gr_broker_client_open(rs->bc, l->id, GR_BROKER_CLIENT_SUMMARY, 0, apis, 1, state_cb, l, &rc);
        }
        try_send(l);
    }
    return rs->pending;
}

int gr_remote_summary_pending(const struct gr_remote_summary *rs)
{
    return rs->pending;
}

int gr_remote_summary_wait(struct gr_remote_summary *rs, void (*cb)(void *ctx), void *ctx)
{
    if (!rs->pending) return -EALREADY;
    if (rs->waiter_n == GR_REMOTE_SUMMARY_WAITERS_MAX) return -ENOSPC;
    rs->waiters[rs->waiter_n++] = (struct waiter){cb, ctx};
    return 0;
}

void gr_remote_summary_unwait(struct gr_remote_summary *rs, void *ctx)
{
    int w = 0;
    for (int i = 0; i < rs->waiter_n; i++)
        if (rs->waiters[i].ctx != ctx) rs->waiters[w++] = rs->waiters[i];
    rs->waiter_n = w;
}

const struct gr_part_summaries *gr_remote_summary_cache(const struct gr_remote_summary *rs)
{
    return rs->cache;
}

uint64_t gr_remote_summary_errors(const struct gr_remote_summary *rs)
{
    return rs->errors;
}
