/*
 * isr_writer.h: a partition leader's ISR changes (issue #20; Kafka's AlterPartition, sent by
 * Partition.scala's leader to its controller and checked by ReplicationControlManager.alterPartition), here
 * written by the leader itself as etcd txns through the etcd client (cluster/etcd.h) on the broker's loop.
 *
 * A change names the partition (topic id, index), the leader epoch and the partition epoch (the state key's
 * mod_revision) the leader holds, and the new ISR. It is written only when, at that moment in etcd, the
 * partition state still has that partition epoch (so the same leader and leader epoch: an ISR change never
 * moves the leader epoch, the controller's elections do), this broker's registration is the one whose epoch
 * the image shows, and every member being added is registered with the broker epoch its fetch carried
 * (KIP-903: a fetch sent before a restart never re-admits it). The value written keeps leader and leader
 * epoch, takes the new ISR, and carries the controller epoch the image shows (informational: the partition
 * epoch is the fence; 1 when no controller is known, since the value requires >= 1).
 *
 * Checked at propose (nothing sent; Kafka's INVALID_REQUEST / INELIGIBLE_REPLICA): the ISR is 1..
 * GR_CLUSTER_REPLICAS_MAX distinct replicas of the partition (as the image shows its assignment), it holds
 * the leader (this broker), and every member not in the image's ISR is registered, not fenced, not shutting
 * down, with the broker epoch given for it.
 *
 * Outcomes (done, exactly once per accepted proposal, from the loop, never inside a call):
 *   GR_ISR_OK             written; new_partition_epoch is the state key's new mod_revision. Also when a
 *                         lost answer's retry finds the state already as proposed (its own earlier write):
 *                         no duplicate change.
 *   GR_ISR_STALE          the partition epoch moved, leader and leader epoch unchanged (Kafka's
 *                         INVALID_UPDATE_VERSION): re-read the image, propose again.
 *   GR_ISR_FENCED         the stored leader or leader epoch is not the proposal's (FENCED_LEADER_EPOCH /
 *                         NOT_LEADER_OR_FOLLOWER): stop leading at that epoch.
 *   GR_ISR_INELIGIBLE     an added member's registration is gone or of another broker epoch.
 *   GR_ISR_STALE_BROKER   this broker's registration is not the one the image showed (STALE_BROKER_EPOCH):
 *                         it is fenced; stop leading.
 *   GR_ISR_UNKNOWN        the partition state is gone (topic deleted: UNKNOWN_TOPIC_OR_PARTITION).
 * etcd unreachable or slow (timeout, lost connection): the txn is sent again after a doubling back-off
 * (GR_ISR_WRITER_BACKOFF_MIN_MS..MAX_MS); meanwhile the stored ISR stays as it was, and the compares make the
 * retry safe. A change waits until done or cancelled; the leader cancels when it stops leading.
 *
 * Bounds: at most GR_ISR_WRITER_PENDING_MAX changes pending (queued or in the txn), at most one per
 * partition (Partition.scala's one pending ISR state; a cancelled one still in the txn does not count), one
 * txn in flight holding up to GR_ISR_WRITER_TXN_PARTITIONS_MAX changes with every compare and operation count
 * within GR_ETCD_TXN_OPS_MAX.
 *
 * Read next: cluster/isr_writer.c, cluster/tests/test_isr_writer.c (against a real etcd).
 */
#ifndef GR_CLUSTER_ISR_WRITER_H
#define GR_CLUSTER_ISR_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/image.h"
#include "cluster/layout.h"
#include "cluster/values.h"

struct ev_loop;
struct gr_etcd;

/* Changes pending at once (a broker leading 4,096 partitions shrinking every ISR at once waits for room). */
#define GR_ISR_WRITER_PENDING_MAX 4096
/* Changes per txn: compares = 1 + partitions + added members, operations = partitions (puts) + 1 +
 * partitions + added members (the failure branch's reads); with 32 partitions and up to 63 added members
 * both stay within etcd's 128. */
#define GR_ISR_WRITER_TXN_PARTITIONS_MAX 32
/* Back-off after a lost txn (milliseconds), doubling from MIN to MAX. */
#define GR_ISR_WRITER_BACKOFF_MIN_MS 100
#define GR_ISR_WRITER_BACKOFF_MAX_MS 5000

/* One proposed ISR change (Kafka's AlterPartitionRequest PartitionData). */
struct gr_isr_change {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t leader_epoch;    /* the leader's epoch: the stored one must still be it */
    int64_t partition_epoch; /* the state key's mod_revision the leader read (>= 1) */
    int32_t isr_count;       /* 1..GR_CLUSTER_REPLICAS_MAX */
    int32_t isr[GR_CLUSTER_REPLICAS_MAX];
    /* per ISR member: the broker epoch of its latest fetch (AlterPartition v3 BrokerState.BrokerEpoch);
       read only for members not in the image's ISR (those being added) */
    int64_t broker_epochs[GR_CLUSTER_REPLICAS_MAX];
};

enum gr_isr_outcome {
    GR_ISR_OK = 0,
    GR_ISR_STALE,
    GR_ISR_FENCED,
    GR_ISR_INELIGIBLE,
    GR_ISR_STALE_BROKER,
    GR_ISR_UNKNOWN,
};

/* The done hook of a change: the change as proposed (borrowed for the call), its outcome, and for GR_ISR_OK
 * the new partition epoch (else 0). */
typedef void gr_isr_done(void *ctx, const struct gr_isr_change *chg, enum gr_isr_outcome outcome,
                         int64_t new_partition_epoch);

/* Counters (tests, logs). */
struct gr_isr_writer_stats {
    uint64_t txns_sent;   /* txns sent, retries included */
    uint64_t txns_ok;     /* txns whose compares held */
    uint64_t txns_failed; /* txns whose compares failed (each change then sorted by its reads) */
    uint64_t txns_lost;   /* timed out or lost connection: sent again after the back-off */
    uint64_t changes_ok;  /* changes reported GR_ISR_OK */
};

struct gr_isr_writer;

/* Returns new: the ISR writer of broker `node_id`, or NULL (out of memory). loop, etcd, lay and img are
 * borrowed and must outlive it. */
struct gr_isr_writer *gr_isr_writer_new(struct ev_loop *loop, struct gr_etcd *etcd,
                                        const struct gr_cluster_layout *lay, const struct gr_image *img,
                                        int32_t node_id);
/* Proposes `chg` (copied); done(ctx, ...) runs exactly once later unless cancelled. Returns 0, -EINVAL (the
 * ISR out of bounds, with duplicates, a member outside the assignment, without this broker, or
 * partition_epoch < 1), -ENOENT (topic or partition unknown to the image), -ESTALE (this broker is not
 * registered, or fenced, in the image: Kafka's STALE_BROKER_EPOCH), -EPERM (an added member not
 * eligible: Kafka's INELIGIBLE_REPLICA), -EEXIST (a change of this partition is pending) or -EBUSY
 * (GR_ISR_WRITER_PENDING_MAX pending); nothing is sent on error. */
int gr_isr_writer_propose(struct gr_isr_writer *w, const struct gr_isr_change *chg, gr_isr_done *done,
                          void *ctx);
/* Cancels the pending change of (topic id, partition): its done never runs (a txn already sent may still
 * apply it). Returns whether one was pending. */
bool gr_isr_writer_cancel(struct gr_isr_writer *w, const uint8_t topic_id[16], int32_t partition);
/* Changes pending (queued or in the txn). */
int32_t gr_isr_writer_pending(const struct gr_isr_writer *w);
/* Returns borrowed: the counters. */
const struct gr_isr_writer_stats *gr_isr_writer_stats(const struct gr_isr_writer *w);
/* Cancels the txn in flight and every pending change (no done runs) and frees; NULL ignored. */
void gr_isr_writer_free(struct gr_isr_writer *w);

#endif
