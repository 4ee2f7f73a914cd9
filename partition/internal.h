/*
 * internal.h: what the files of partition/ share and nobody else includes: the per-partition queue of the
 * append gate and the set's FIFO of gated callers (gate.c), kept in the partition objects (partition.c).
 * Read next: partition/gate.c.
 */
#ifndef GR_PARTITION_INTERNAL_H
#define GR_PARTITION_INTERNAL_H

#include "partition/partition.h"

/* A partition's gated callers, oldest first (struct gr_gate_entry, partition.h). */
struct gr_gate_queue {
    struct gr_gate_entry *head, *tail;
};

/* The set's gated callers in arrival order, and the pump's state (one owning thread: a pump started from
   inside a done hook only asks the running one to go over the FIFO again). */
struct gr_gate_fifo {
    struct gr_append_gate *head, *tail;
    bool pumping, repump;
};

/* Returns borrowed: the gate queue of `part`. */
struct gr_gate_queue *gr_partition_gate_queue(struct gr_partition *part);
/* Returns borrowed: the gate FIFO of `ps`. */
struct gr_gate_fifo *gr_partitions_gate_fifo(struct gr_partitions *ps);

#endif
