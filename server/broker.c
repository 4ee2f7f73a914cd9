/*
 * broker.c: parked requests, their waits on partitions, and the bridges from the storage flusher threads
 * and the I/O pool to the loop.
 *
 * Flusher threads call on_flushed(): it appends the log to `flushed` (under flushed_mu) and sends an
 * ev_async; the loop then tells each of those partitions (gr_partition_flushed), which recomputes its
 * visible offset and calls the done hooks of exactly the waits whose condition now holds (acks=-1
 * produces and offset commits waiting until committed, long-poll fetches waiting for data, DeleteRecords
 * waiting for its checkpoint). Appends tell the partition the same way (gr_partition_appended). A wait's
 * done hook re-checks its request (req->recheck). A parked request's deadline is its own ev_timer (libev
 * keeps timers in a heap: parking and expiry cost O(log parked)); its expiry finishes the request, and
 * finishing unparks it, which cancels its remaining waits. What is visible is the partition layer's rule
 * (gr_partition_visible_offset), set once at start from gregor.acks.all.fsync.
 * Read next: partition/partition.h, server/handlers/produce.c, server/handlers/fetch.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/time.h"
#include "server/broker.h"

struct gr_partition *gr_broker_partition(struct gr_broker *b, struct gr_log *log)
{
    struct gr_partition *part = gr_partition_get(b->parts, log);
    if (!part) {
        GR_ERROR("out of memory for the state of partition %s-%d", gr_topic_name(gr_log_topic(log)),
                 gr_log_partition(log));
        abort();
    }
    return part;
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

/* A wait's done hook: re-checks its request (see broker.h struct gr_req_wait). */
static void req_wait_done(struct gr_partition_waiter *w, int err)
{
    (void)err; /* the re-check reads the partition's state itself */
    struct gr_req_wait *rw = (struct gr_req_wait *)w;
    if (rw->arming) {
        rw->held_at_once = true;
        return;
    }
    struct gr_req *req = rw->req;
    struct gr_broker *b = req->broker;
    b->rechecks++;
    if (!req->recheck || req->recheck(req)) return; /* finished (maybe freed) */
    if (!rw->data || !req->parked || gr_partition_waiting(w)) return;
    /* long poll: wait for the next data past what is visible now */
    struct gr_partition *part = rw->part;
    rw->arming = true;
    gr_partition_wait_data(part, w, gr_partition_visible_offset(part));
    rw->arming = false;
}

/* Queues one wait of `req` on `log` with `start` (a gr_partition_wait_* call). */
static int req_wait(struct gr_req *req, struct gr_log *log, bool data,
                    void (*start)(struct gr_partition *, struct gr_partition_waiter *, int64_t), int64_t arg)
{
    struct gr_req_wait *rw = gr_arena_calloc(&req->arena, 1, sizeof *rw);
    if (!rw) return -ENOMEM;
    gr_partition_waiter_init(&rw->w, req_wait_done, NULL);
    rw->req = req;
    rw->part = gr_broker_partition(req->broker, log);
    rw->data = data;
    rw->next = req->waits;
    req->waits = rw;
    rw->arming = true;
    start(rw->part, &rw->w, arg);
    rw->arming = false;
    return rw->held_at_once ? 0 : 1;
}

int gr_req_wait_committed(struct gr_req *req, struct gr_log *log, int64_t end_offset)
{
    return req_wait(req, log, false, gr_partition_wait_committed, end_offset);
}

int gr_req_wait_data(struct gr_req *req, struct gr_log *log, int64_t offset)
{
    return req_wait(req, log, true, gr_partition_wait_data, offset);
}

int gr_req_wait_log_start(struct gr_req *req, struct gr_log *log, int64_t ticket)
{
    return req_wait(req, log, false, gr_partition_wait_log_start_durable, ticket);
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
    for (int i = 0; i < n; i++) /* the visible offset moves even when nobody waits: retention and
                                   compaction are bounded by it, so a write-only partition must see it move */
        gr_partition_flushed(gr_broker_partition(b, logs[i]));
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
