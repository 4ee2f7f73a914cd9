/*
 * counted.h: a partition waiter for tests (partition/partition.h named waits) that counts its done hook's
 * calls and keeps the last error it was given. Shared by the partition layer's replication tests.
 */
#ifndef GR_PARTITION_TESTS_COUNTED_H
#define GR_PARTITION_TESTS_COUNTED_H

#include "partition/partition.h"

struct counted {
    struct gr_partition_waiter w; /* first: the done hook casts back */
    int calls;                    /* done hook calls */
    int err;                      /* the last call's error (0 or -errno) */
};

static inline void counted_done(struct gr_partition_waiter *w, int err)
{
    struct counted *c = (struct counted *)w;
    c->calls++;
    c->err = err;
}

/* Zeroes `c` and makes its waiter call counted_done. */
static inline void counted_init(struct counted *c)
{
    *c = (struct counted){0};
    gr_partition_waiter_init(&c->w, counted_done, c);
}

#endif
