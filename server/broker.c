/*
 * broker.c: parked requests, per-log wait lists, high watermarks, and the bridges from the storage
 * flusher threads and the I/O pool to the loop.
 *
 * Flusher threads call on_flushed(): it appends the log to `flushed` (under flushed_mu) and sends an
 * ev_async; the loop then re-checks the requests waiting on each of those logs (acks=-1 produces waiting
 * for durability, long-poll fetches waiting for the high watermark to move, offset commits). Appends wake
 * the waiters of the appended log the same way (gr_broker_wake_log). A parked request's deadline is its
 * own ev_timer (libev keeps timers in a heap: parking and expiry cost O(log parked)). The high watermark
 * of a partition is its durable offset when gregor.acks.all.fsync is on, else its log end offset.
 * Read next: server/waitq.h, server/handlers/produce.c, server/handlers/fetch.c.
 */
#include <stdlib.h>

#include "common/log.h"
#include "common/time.h"
#include "server/broker.h"

/* The wait list of one log, reached through gr_log_user. */
struct gr_log_waiters {
    struct gr_waitq q;
    uint64_t last_park_seq; /* park_seq of the request that last registered here (dedupes a partition named
                               twice; a sequence, not a pointer: a freed request's address is reused) */
    uint64_t woken_gen;
    struct gr_log_waiters *all_next;
};

int64_t gr_broker_update_hwm(struct gr_broker *b, struct gr_log *log)
{
    int64_t hwm = b->hwm_durable ? gr_log_durable_offset(log) : gr_log_end_offset(log);
    if (hwm != gr_log_high_watermark(log)) gr_log_set_high_watermark(log, hwm);
    return hwm;
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_req *req = w->data;
    if (req->expire) req->expire(req);
}

void gr_broker_park(struct gr_broker *b, struct gr_req *req, int64_t deadline_ms)
{
    req->deadline_ms = deadline_ms;
    req->park_seq = ++b->park_seq;
    req->parked = true;
    req->wait_prev = NULL;
    req->wait_next = b->parked_head;
    if (b->parked_head) b->parked_head->wait_prev = req;
    b->parked_head = req;
    b->parked_count++;
    if (deadline_ms != INT64_MAX) {
        int64_t after_ms = deadline_ms - gr_time_mono_ms();
        ev_timer_init(&req->deadline_w, deadline_cb, after_ms > 0 ? (double)after_ms / 1000.0 : 0, 0);
        req->deadline_w.data = req;
        ev_timer_start(b->loop, &req->deadline_w);
    }
}

bool gr_broker_wait_log(struct gr_broker *b, struct gr_req *req, struct gr_log *log)
{
    struct gr_log_waiters *lw = gr_log_user(log);
    if (!lw) {
        lw = calloc(1, sizeof *lw);
        if (!lw) return false;
        lw->all_next = b->log_waiters;
        b->log_waiters = lw;
        gr_log_set_user(log, lw);
    }
    if (lw->last_park_seq == req->park_seq)
        return true; /* already waiting on it (a partition named twice):
                        one request's registrations come one after another */
    struct gr_wait_node *n = gr_arena_calloc(&req->arena, 1, sizeof *n);
    if (!n) return false;
    gr_waitq_add(&lw->q, n, req);
    lw->last_park_seq = req->park_seq;
    n->owner_next = req->waits;
    req->waits = n;
    return true;
}

static void recheck_one(void *owner, void *ctx)
{
    struct gr_req *req = owner;
    struct gr_broker *b = ctx;
    b->rechecks++;
    if (req->recheck) req->recheck(req);
}

void gr_broker_wake_log(struct gr_broker *b, struct gr_log *log)
{
    struct gr_log_waiters *lw = gr_log_user(log);
    if (lw && lw->q.head) gr_waitq_wake(&lw->q, recheck_one, b);
}

void gr_broker_wake_parked(struct gr_broker *b)
{
    struct gr_req *r = b->parked_head;
    while (r) {
        struct gr_req *next = r->wait_next;
        /* recheck may finish (and unlink/free) r; `next` stays valid because only r is touched */
        b->rechecks++;
        if (r->recheck) r->recheck(r);
        r = next;
    }
}

void gr_broker_free_waiters(struct gr_broker *b)
{
    while (b->log_waiters) {
        struct gr_log_waiters *lw = b->log_waiters;
        b->log_waiters = lw->all_next;
        free(lw);
    }
    /* the logs keep a dangling user pointer: the store is closed right after */
}

static void flush_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    pthread_mutex_lock(&b->flushed_mu);
    struct gr_log **logs = b->flushed;
    int n = b->flushed_count;
    b->flushed = NULL;
    b->flushed_count = b->flushed_cap = 0;
    pthread_mutex_unlock(&b->flushed_mu);
    uint64_t gen = ++b->wake_gen;
    for (int i = 0; i < n; i++) {
        /* The high watermark follows the durable offset even when nobody reads: retention and compaction
           are bounded by it, so a write-only partition must see it move too. */
        gr_broker_update_hwm(b, logs[i]);
        struct gr_log_waiters *lw = gr_log_user(logs[i]);
        if (!lw || lw->woken_gen == gen) continue; /* no waiters, or already woken in this round */
        lw->woken_gen = gen;
        gr_broker_wake_log(b, logs[i]);
    }
    free(logs);
}

static void io_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    if (b->iopool) gr_iopool_complete(b->iopool);
}

/* storage callback, on a flusher thread: records the log and wakes the loop */
void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err);
void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err)
{
    (void)durable_end_offset;
    struct gr_broker *b = ctx;
    if (err) GR_ERROR("flush failed (%d): partition taken offline", err);
    pthread_mutex_lock(&b->flushed_mu);
    if (b->flushed_count == b->flushed_cap) {
        int ncap = b->flushed_cap ? b->flushed_cap * 2 : 64;
        struct gr_log **nl = realloc(b->flushed, sizeof *nl * (size_t)ncap);
        if (nl) {
            b->flushed = nl;
            b->flushed_cap = ncap;
        }
    }
    bool queued = b->flushed_count < b->flushed_cap;
    if (queued) b->flushed[b->flushed_count++] = log;
    pthread_mutex_unlock(&b->flushed_mu);
    if (!queued) GR_ERROR("out of memory noting a flush completion: its waiters wait for their deadline");
    ev_async_send(b->loop, &b->flush_async);
}

/* I/O pool callback, on a pool thread: only wakes the loop */
void gr_broker_on_io_done(void *ctx);
void gr_broker_on_io_done(void *ctx)
{
    struct gr_broker *b = ctx;
    ev_async_send(b->loop, &b->io_async);
}

void gr_broker_init_watchers(struct gr_broker *b);
void gr_broker_init_watchers(struct gr_broker *b)
{
    pthread_mutex_init(&b->flushed_mu, NULL);
    ev_async_init(&b->flush_async, flush_async_cb);
    b->flush_async.data = b;
    ev_async_start(b->loop, &b->flush_async);
    ev_async_init(&b->io_async, io_async_cb);
    b->io_async.data = b;
    ev_async_start(b->loop, &b->io_async);
}
