/*
 * waitq.h: wait lists for parked requests, one per partition log, so that an append or a flush completion
 * re-checks only the requests waiting on that log instead of every parked request (with thousands of
 * idle long-poll consumers parked, a broker-wide re-check per append costs O(parked)).
 *
 * A waiter (e.g. a Fetch naming three partitions) owns one node per queue it waits on; the nodes are
 * chained through owner_next so that unparking removes them all. Nodes live in the owner's memory (the
 * request arena): the queue never allocates.
 * Invariants: a node is in at most one queue; gr_waitq_wake calls fn once per node present when it
 * reached it; fn may remove any node of the owner it was called for (finishing the request does).
 * Read next: server/broker.c (gr_broker_wait_log, gr_broker_wake_log).
 */
#ifndef GR_WAITQ_H
#define GR_WAITQ_H

#include <stdbool.h>

struct gr_waitq;

struct gr_wait_node {
    struct gr_waitq *q; /* NULL when not queued */
    struct gr_wait_node *prev, *next;
    struct gr_wait_node *owner_next; /* the owner's other nodes */
    void *owner;
};

struct gr_waitq {
    struct gr_wait_node *head;
    int count;
};

/* Appends `n` (not queued) for `owner`. */
void gr_waitq_add(struct gr_waitq *q, struct gr_wait_node *n, void *owner);
/* Removes `n` from its queue; nothing if not queued. */
void gr_waitq_remove(struct gr_wait_node *n);
/* Calls fn(owner) for every node of `q`, oldest first; fn may remove the node it was called for (and other
   nodes of the same owner). Returns the number of calls. */
int gr_waitq_wake(struct gr_waitq *q, void (*fn)(void *owner, void *ctx), void *ctx);

#endif
