/*
 * broker.c: the bridges from other threads to the network thread's loop, and the broker's partition objects.
 *
 * Flusher threads call gr_broker_on_flushed(): it appends the log to `flushed` (under flushed_mu) and sends
 * an ev_async; the loop then tells each of those partitions (gr_partition_flushed), which recomputes its
 * visible offset and calls the done hooks of exactly the waits whose condition now holds (acks=-1 produces
 * and offset commits waiting until committed, long-poll fetches waiting for data, DeleteRecords waiting for
 * its checkpoint), then tells the replica fetcher (gr_fetcher_flushed: a follower's next Fetch waits until
 * what it appended is durable, and a truncation's file work ends through the same report). Appends tell the
 * partition the same way (gr_partition_appended). I/O pool threads call
 * gr_broker_on_io_done(), whose ev_async runs the pool's completions on the loop. What is visible is the
 * partition layer's rule (gr_partition_visible_offset), set once at start from gregor.acks.all.fsync.
 * Parked requests and their waits are server/request.c; connections server/net.c.
 * Read next: partition/partition.h, server/request.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "cluster/fetcher.h"
#include "cluster/local.h"
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
    /* the visible offset moves even when nobody waits: retention and compaction are bounded by it, so a
       write-only partition must see it move */
    for (int i = 0; i < n; i++) {
        struct gr_partition *part = gr_broker_partition(b, logs[i]);
        gr_partition_flushed(part);
        if (b->fetcher) gr_fetcher_flushed(b->fetcher, part); /* a follower's next Fetch waited for it */
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

int gr_broker_image_load(struct gr_broker *b)
{
    struct gr_image_listener ls[GR_LISTENERS_MAX];
    int n = b->listener_count < GR_LISTENERS_MAX ? b->listener_count : GR_LISTENERS_MAX;
    for (int i = 0; i < n; i++) {
        const struct gr_listener *l = &b->listeners[i];
        snprintf(ls[i].name, sizeof ls[i].name, "%s", l->name);
        snprintf(ls[i].host, sizeof ls[i].host, "%s", l->adv_host);
        ls[i].port = l->adv_port;
    }
    return gr_image_local_load(b->image, b->store, ls, n);
}
