/*
 * logwait.h: the named wait "until the local log is made" (issue 19). In cluster mode the metadata image can
 * say that this broker leads a partition before the replica manager (cluster/replicas.h) has made its local
 * log on the I/O pool: a 1,000-partition CreateTopics makes its logs a bounded batch per pass, while Metadata
 * already names this broker as leader. Kafka's broker applies a metadata delta and makes the log before it
 * publishes the new image, so a client never sees that window; here a Produce or Fetch that reaches it waits
 * (server/route.h gr_route.pending marks such a partition) instead of getting NOT_LEADER_OR_FOLLOWER.
 *
 * Two levels, in the style of partition/partition.h's waiters:
 *   - the registry (struct gr_logwaits, one per broker): waiters embedded in the caller's memory, keyed by
 *     (topic id, partition) in a fixed number of buckets; gr_logwait_signal runs the done hook of every
 *     waiter of that key exactly once, after unlinking it. The replica manager's on_log hook
 *     (server/membership.c) signals every log it makes or deletes.
 *   - the request side (declared in server/broker.h with the other request waits, built in request.c): a
 *     handler notes the partitions it found pending (gr_req_logs_note) and declares the wait
 *     (gr_req_await_logs; Produce): the request runs again once every noted log is made, or at its
 *     deadline with gr_req_logs_expired true, when the partitions still pending answer REQUEST_TIMED_OUT.
 *     A long-poll Fetch adds a wait whose done hook re-checks the request (gr_req_wait_log_data: then until
 *     data arrives on the new log). Handlers never park: request.c does (gr_req_await), and gr_req_unpark
 *     cancels every log wait of the request (gr_req_logs_cancel).
 * A partition that stops being led here while a request waits for its log (the broker fenced, leadership
 * moved, the topic deleted) wakes its waiter at the next image change (gr_logwait_signal_where, from the
 * image observer of server/membership.c): the request then gets the partition's new route's answer.
 * Invariants: a waiter is queued at most once; a done hook runs at most once per queueing and never after
 * its cancel; the bucket walk restarts after each done hook, which may cancel other waiters (a request
 * finished by the hook cancels its others). Network thread only. No timers: the request's deadline bounds
 * every wait. Read next: server/route.h, server/handlers/produce.c, server/handlers/fetch.c.
 */
#ifndef GR_SERVER_LOGWAIT_H
#define GR_SERVER_LOGWAIT_H

#include <stdbool.h>
#include <stdint.h>

/* Buckets of the registry, a power of two: waiters are few (the pending partitions of parked requests). */
#define GR_LOGWAIT_BUCKETS 64

/* One waiter (embedded in the caller's memory; request arena for requests). */
struct gr_logwait_waiter {
    uint8_t topic_id[16];
    int32_t partition;
    void (*done)(struct gr_logwait_waiter *w); /* the log was made (or deleted): re-route */
    struct gr_logwait_waiter *prev, *next;
    bool queued;
};

/* The broker's registry: zeroed is empty. */
struct gr_logwaits {
    struct gr_logwait_waiter *buckets[GR_LOGWAIT_BUCKETS];
    int32_t count; /* waiters queued */
};

/* Queues `w` (not queued; borrowed until done or cancelled) for partition `partition` of the topic with id
   `topic_id` (16 bytes); `done` runs once when gr_logwait_signal names that key. */
void gr_logwait_add(struct gr_logwaits *ws, struct gr_logwait_waiter *w, const uint8_t topic_id[16],
                    int32_t partition, void (*done)(struct gr_logwait_waiter *w));
/* Unqueues `w` without running its hook; nothing when it is not queued. */
void gr_logwait_cancel(struct gr_logwaits *ws, struct gr_logwait_waiter *w);
/* The local log of (topic_id, partition) was made or deleted: runs the done hook of every waiter of that
   key, each unlinked first. Returns how many ran. */
int gr_logwait_signal(struct gr_logwaits *ws, const uint8_t topic_id[16], int32_t partition);
/* Runs the done hook (each unlinked first) of every waiter whose key `settled` (given `ctx`) says no longer
   needs waiting (e.g. the partition is no longer led here: server/route.h gr_route_logwaits_settle).
   O(waiters) calls of `settled`, nothing when none waits. Returns how many ran. */
int gr_logwait_signal_where(struct gr_logwaits *ws,
                            bool (*settled)(void *ctx, const uint8_t topic_id[16], int32_t partition),
                            void *ctx);

#endif
