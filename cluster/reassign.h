/*
 * reassign.h: partition reassignment (KIP-455: AlterPartitionReassignments, ListPartitionReassignments), the
 * pure part: what an ask or the controller's completion check does to one partition, read from the metadata
 * image (cluster/image.h) and written by the controller (cluster/controller.h) as one etcd txn per topic:
 * the topic record (its assignment, with the reassignment's adding and removing lists: cluster/values.h
 * gr_cluster_assignment) and, where it changes, the partition state.
 *
 * The stages, as Kafka's ReplicationControlManager and PartitionReassignmentReplicas run them:
 * 1. The ask: replicas become the target followed by the replicas being removed (the old ones not in the
 *    target); adding = the target's new replicas; leader, leader epoch and ISR unchanged. With nothing to
 *    add or remove (the same set, maybe reordered) the assignment simply becomes the target.
 * 2. The added replicas' brokers create the partition and follow the leader (cluster/replicas.c,
 *    cluster/roles.c); the leader adds each to the ISR once caught up (cluster/isr_writer.h).
 * 3. Completion, as soon as the ISR without the removed replicas holds every target replica: replicas =
 *    the target, ISR = the ISR without the removed ones; a leader being removed hands over to the first
 *    live target replica; the leader epoch goes up when the leader changes or a replica leaves
 *    (PartitionChangeBuilder.triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). The removed brokers
 *    delete their copy when the image no longer lists them.
 * Cancel (replicas null in the request): PartitionReassignmentRevert at once: replicas = the current ones
 * without those being added, ISR likewise; a revert that would empty the ISR is an unclean election, refused
 * unless the topic allows one.
 *
 * Read next: cluster/controller.c (the writes), server/handlers/partition_reassignments.c (the APIs).
 */
#ifndef GR_CLUSTER_REASSIGN_H
#define GR_CLUSTER_REASSIGN_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/image.h"
#include "cluster/values.h"

#define GR_REASSIGN_MSG_BYTES 224

/* One partition's change: its assignment in the topic record and, when write_state, its new partition
 * state (controller_epoch is filled by the writer). */
struct gr_reassign_change {
    struct gr_cluster_assignment assign;
    bool write_state;
    struct gr_cluster_partition state;
};

/* An ask for partition `partition` of `t` in `img`: `target` (target_count node ids) or, with target_count
 * < 0, a cancel. `allow_rf_change` is AlterPartitionReassignments v1's AllowReplicationFactorChange (KIP-860;
 * true below v1); `unclean_allowed` whether the topic allows an unclean election (its
 * unclean.leader.election.enable, else the broker's). Returns 0 with *out filled and *changed whether
 * anything is to be written, or the error for the partition with its message in msg (GR_REASSIGN_MSG_BYTES):
 * UNKNOWN_TOPIC_OR_PARTITION (partition out of range), INVALID_REPLICA_ASSIGNMENT (an empty list, more than
 * GR_CLUSTER_REPLICAS_MAX, a broker not registered, a broker twice, a cancel needing an unclean election it
 * may not have), INVALID_REPLICATION_FACTOR (a replication factor change when not allowed: Kafka 4.1+'s
 * answer), NO_REASSIGNMENT_IN_PROGRESS (a cancel of a partition not being reassigned; message empty: Kafka
 * sends null). The ask is judged on the image as it is now. */
int16_t gr_reassign_ask(const struct gr_image *img, const struct gr_image_topic *t, int32_t partition,
                        const int32_t *target, int32_t target_count, bool allow_rf_change,
                        bool unclean_allowed, struct gr_reassign_change *out, bool *changed, char *msg);

/* The completion check of partition `partition` of `t` (stage 3 above): true with *out filled when its
 * reassignment can complete now (a state exists, the ISR without the removed replicas is not empty and
 * holds every target replica, and a leader that must move has a live target replica to move to). */
bool gr_reassign_complete(const struct gr_image *img, const struct gr_image_topic *t, int32_t partition,
                          struct gr_reassign_change *out);

/* The topic record of `t` as the image holds it (topic id, every partition's assignment with its adding
 * and removing lists, the topic's configs), to be changed and written back by the controller. Returns 0,
 * -EINVAL (a partition without an assignment: the record is not fully known) or -ENOMEM; free *out with
 * gr_cluster_topic_free. */
int gr_reassign_record(const struct gr_image_topic *t, struct gr_cluster_topic *out);

#endif
