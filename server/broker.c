/*
 * broker.c: parked requests, high watermarks, and the bridge from the storage flusher threads to the loop.
 *
 * Flusher threads call on_flushed(); it only sends an ev_async, and the loop then re-checks every parked
 * request (acks=-1 produces waiting for durability, long-poll fetches waiting for data). The high
 * watermark of a partition is its durable offset when gregor.acks.all.fsync is on, else its log end offset.
 * Read next: server/handlers/produce.c.
 */
#include <stdlib.h>

#include "common/log.h"
#include "common/time.h"
#include "server/broker.h"

int64_t gr_broker_update_hwm(struct gr_broker *b, struct gr_log *log)
{
    int64_t hwm = b->hwm_durable ? gr_log_durable_offset(log) : gr_log_end_offset(log);
    if (hwm != gr_log_high_watermark(log)) gr_log_set_high_watermark(log, hwm);
    return hwm;
}

static void arm_wait_timer(struct gr_broker *b)
{
    int64_t earliest = INT64_MAX;
    for (struct gr_req *r = b->parked_head; r; r = r->wait_next)
        if (r->deadline_ms < earliest) earliest = r->deadline_ms;
    ev_timer_stop(b->loop, &b->wait_timer);
    if (earliest == INT64_MAX) return;
    double after = (double)(earliest - gr_time_mono_ms()) / 1000.0;
    ev_timer_set(&b->wait_timer, after > 0 ? after : 0, 0);
    ev_timer_start(b->loop, &b->wait_timer);
}

void gr_broker_park(struct gr_broker *b, struct gr_req *req, int64_t deadline_ms)
{
    req->deadline_ms = deadline_ms;
    req->parked = true;
    req->wait_prev = NULL;
    req->wait_next = b->parked_head;
    if (b->parked_head) b->parked_head->wait_prev = req;
    b->parked_head = req;
    b->parked_count++;
    arm_wait_timer(b);
}

void gr_broker_wake_parked(struct gr_broker *b)
{
    struct gr_req *r = b->parked_head;
    while (r) {
        struct gr_req *next = r->wait_next;
        /* recheck may finish (and unlink/free) r; `next` stays valid because only r is touched */
        if (r->recheck) r->recheck(r);
        r = next;
    }
    arm_wait_timer(b);
}

static void wait_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    int64_t now = gr_time_mono_ms();
    struct gr_req *r = b->parked_head;
    while (r) {
        struct gr_req *next = r->wait_next;
        if (r->deadline_ms <= now && r->expire) r->expire(r);
        r = next;
    }
    arm_wait_timer(b);
}

static void flush_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop;
    (void)revents;
    gr_broker_wake_parked(w->data);
}

/* storage callback, on a flusher thread: only wakes the loop */
void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err);
void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err)
{
    (void)log;
    (void)durable_end_offset;
    struct gr_broker *b = ctx;
    if (err) GR_ERROR("flush failed (%d): partition taken offline", err);
    ev_async_send(b->loop, &b->flush_async);
}

void gr_broker_init_watchers(struct gr_broker *b);
void gr_broker_init_watchers(struct gr_broker *b)
{
    ev_async_init(&b->flush_async, flush_async_cb);
    b->flush_async.data = b;
    ev_async_start(b->loop, &b->flush_async);
    ev_timer_init(&b->wait_timer, wait_timer_cb, 0, 0);
    b->wait_timer.data = b;
}
