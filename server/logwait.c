/*
 * logwait.c: the registry of the wait until a local log is made (server/logwait.h): waiters keyed by (topic
 * id, partition) in buckets of doubly linked lists. The request side built on it lives in server/request.c
 * with the other request waits (declared in server/broker.h), so this file calls nothing of request.c.
 * Read next: server/request.c, server/handlers/produce.c.
 */
#include <assert.h>
#include <string.h>

#include "server/logwait.h"

static uint32_t bucket_of(const uint8_t id[16], int32_t partition)
{
    uint32_t h = (uint32_t)partition * 2654435761u;
    for (int i = 0; i < 16; i += 4)
        h ^= (uint32_t)id[i] | (uint32_t)id[i + 1] << 8 | (uint32_t)id[i + 2] << 16 |
             (uint32_t)id[i + 3] << 24;
    return (h ^ h >> 16) & (GR_LOGWAIT_BUCKETS - 1);
}

void gr_logwait_add(struct gr_logwaits *ws, struct gr_logwait_waiter *w, const uint8_t topic_id[16],
                    int32_t partition, void (*done)(struct gr_logwait_waiter *w))
{
    assert(!w->queued);
    memmove(w->topic_id, topic_id, 16); /* may be w's own copy */
    w->partition = partition;
    w->done = done;
    struct gr_logwait_waiter **head = &ws->buckets[bucket_of(topic_id, partition)];
    w->prev = NULL;
    w->next = *head;
    if (*head) (*head)->prev = w;
    *head = w;
    w->queued = true;
    ws->count++;
}

void gr_logwait_cancel(struct gr_logwaits *ws, struct gr_logwait_waiter *w)
{
    if (!w->queued) return;
    if (w->prev)
        w->prev->next = w->next;
    else
        ws->buckets[bucket_of(w->topic_id, w->partition)] = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->queued = false;
    ws->count--;
}

/* Wakes every waiter of bucket `i` that `match` accepts; a hook may cancel any other waiter, so the walk
 * starts from the head again after each. Returns how many woke. */
static int signal_bucket(struct gr_logwaits *ws, int i,
                         bool (*match)(void *ctx, const uint8_t topic_id[16], int32_t partition), void *ctx)
{
    int n = 0;
    bool again = true;
    while (again) {
        again = false;
        for (struct gr_logwait_waiter *w = ws->buckets[i]; w; w = w->next) {
            if (!match(ctx, w->topic_id, w->partition)) continue;
            gr_logwait_cancel(ws, w);
            n++;
            w->done(w);
            again = true;
            break;
        }
    }
    return n;
}

struct same_partition {
    const uint8_t *topic_id;
    int32_t partition;
};

static bool is_same_partition(void *ctx, const uint8_t topic_id[16], int32_t partition)
{
    const struct same_partition *want = ctx;
    return partition == want->partition && memcmp(topic_id, want->topic_id, 16) == 0;
}

int gr_logwait_signal(struct gr_logwaits *ws, const uint8_t topic_id[16], int32_t partition)
{
    struct same_partition want = {topic_id, partition};
    return signal_bucket(ws, (int)bucket_of(topic_id, partition), is_same_partition, &want);
}

int gr_logwait_signal_where(struct gr_logwaits *ws,
                            bool (*settled)(void *ctx, const uint8_t topic_id[16], int32_t partition),
                            void *ctx)
{
    int n = 0;
    for (int i = 0; i < GR_LOGWAIT_BUCKETS && ws->count > 0; i++)
        n += signal_bucket(ws, i, settled, ctx);
    return n;
}
