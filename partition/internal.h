/*
 * internal.h: what the files of partition/ share and nobody else includes: the per-partition queue of the
 * append gate and the set's FIFO of gated callers (gate.c), kept in the partition objects (partition.c), and
 * the leader's replication state (replica.c), kept behind one pointer per partition.
 * Read next: partition/gate.c, partition/replica.c.
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

/* The replication state of one partition (replica.c): NULL until gr_partition_set_role. */
struct gr_partition_repl;

/* Returns borrowed: the slot holding the replication state of `part` (freed with the partition). */
struct gr_partition_repl **gr_partition_repl_slot(struct gr_partition *part);
struct gr_partition_repl *gr_partition_repl_of(const struct gr_partition *part);
/* Returns borrowed: the replication settings of the set `part` belongs to (gr_partitions_set_replication). */
const struct gr_partition_repl_config *gr_partition_repl_config(const struct gr_partition *part);

/* The high watermark a replicated partition shows as its visible offset, kept in the partition object:
   replica.c (which calls into partition.c, never the reverse) writes `on`, `follower`, `blocked`, `floor` and
   `followers_low` from the followers' states; partition.c's gr_partition_visible_offset moves `hw` from them
   and the leader's share (its log end offset, or its durable offset with gregor.acks.all.fsync), so appends
   and flushes move it without a call back into replica.c (Partition.maybeIncrementLeaderHW split in two). */
struct gr_partition_hw {
    bool on;       /* the visible offset is `hw` (a leader with followers, or a follower); else the share */
    bool follower; /* a follower: `hw` as its follower side sets it, clamped to its log end offset */
    bool blocked;  /* a leader whose ISR is smaller than the effective min ISR: `hw` does not move */
    int64_t floor; /* a leader: the smallest log end offset among the followers that count (the maximal
                      ISR and caught-up ISR-eligible followers), INT64_MAX when none does */
    int64_t hw;    /* the high watermark: only moves up while leading */
    int64_t followers_low; /* a leader: the smallest log start offset among its live followers as replica.c
                              last computed it (-1: one has not fetched), INT64_MAX when none counts; the
                              low watermark waits read min(it, the log start offset) */
    int64_t isr_end;    /* a leader: the smallest log end offset it knows among the followers of the maximal
                           ISR (one not fetched since this broker leads is unknown, skipped), INT64_MAX when
                           it knows none; replica.c keeps it at every fetch-state and membership change */
    int32_t isr_end_id; /* the follower whose log end offset isr_end is, -1 none */
};
/* The high watermark invariant of issue #20 on a leader with followers: hw <= its own log end offset and
   hw <= isr_end (Partition.maybeIncrementLeaderHW keeps the high watermark within the maximal ISR's log end
   offsets). Called by partition.c at every move of hw and by replica.c at every fetch-state or membership
   change. A violation logs one ERROR line starting "high watermark invariant violated: ", adds one to the
   set's count (gr_partitions_hw_violations) and, in builds without NDEBUG, asserts unless the set's
   replication config has hw_violation_no_abort. Two comparisons, no allocation. */
void gr_partition_hw_check(struct gr_partition *part);
/* Returns borrowed: the set `part` belongs to. */
struct gr_partitions *gr_partition_partitions(const struct gr_partition *part);
/* Returns borrowed: the high watermark state of `part`. */
struct gr_partition_hw *gr_partition_hw(struct gr_partition *part);
/* Done hooks of every queued committed waiter, follower-fetch waiter (gr_partition_wait_fetchable with
   GR_FETCH_LOG_END) and low watermark waiter, with `err` (< 0): a leader became follower. */
void gr_partition_end_leader_waits(struct gr_partition *part, int err);
/* Queues `w` until the low watermark reaches `offset` (gr_partition_wait_low_watermark's wait, whose caller
   in replica.c refreshed `followers_low` first). */
void gr_partition_wait_low(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset);
/* Done hooks of the low watermark waiters whose condition now holds: replica.c raised `followers_low`. */
void gr_partition_low_watermark_moved(struct gr_partition *part);
/* The owner's monotonic clock, ms (gr_partitions_set_replication's now_ms hook, else gr_time_mono_ms). */
int64_t gr_partition_now_ms(const struct gr_partition *part);

#endif
