/*
 * waitq.c: per-log wait lists (see waitq.h). Doubly linked, insertion at the tail so that waiters are
 * woken oldest first (the order in which they parked).
 */
#include "server/waitq.h"

#include <stddef.h>

void gr_waitq_add(struct gr_waitq *q, struct gr_wait_node *n, void *owner)
{
    n->q = q;
    n->owner = owner;
    n->next = NULL;
    if (!q->head) {
        n->prev = n; /* head->prev is the tail */
        q->head = n;
    } else {
        struct gr_wait_node *tail = q->head->prev;
        tail->next = n;
        n->prev = tail;
        q->head->prev = n;
    }
    q->count++;
}

void gr_waitq_remove(struct gr_wait_node *n)
{
    struct gr_waitq *q = n->q;
    if (!q) return;
    if (n == q->head) {
        q->head = n->next;
        if (q->head) q->head->prev = n->prev;
    } else {
        n->prev->next = n->next;
        if (n->next)
            n->next->prev = n->prev;
        else
            q->head->prev = n->prev;
    }
    n->q = NULL;
    n->prev = n->next = NULL;
    q->count--;
}

int gr_waitq_wake(struct gr_waitq *q, void (*fn)(void *owner, void *ctx), void *ctx)
{
    int calls = 0;
    /* fn may remove the node it was called for and that owner's other nodes; an owner has at most one
       node per queue, so `next` belongs to another owner and stays valid. */
    struct gr_wait_node *n = q->head;
    while (n) {
        struct gr_wait_node *next = n->next;
        fn(n->owner, ctx);
        calls++;
        n = next;
    }
    return calls;
}
