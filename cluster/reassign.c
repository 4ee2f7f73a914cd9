/*
 * reassign.c: the reassignment stages on one partition (cluster/reassign.h). Pure: reads the image, fills a
 * change. Read next: cluster/controller.c.
 */
#include "cluster/reassign.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/controller.h"
#include "protocol/errors.h"

static bool has(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

/* dst = the ids of src (n) not in minus (m), in src's order; returns the count. */
static int32_t without(int32_t *dst, const int32_t *src, int32_t n, const int32_t *minus, int32_t m)
{
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (!has(minus, m, src[i])) dst[k++] = src[i];
    return k;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The partition's assignment as the image holds it. */
static void current(const struct gr_image_partition *p, struct gr_cluster_assignment *a)
{
    memset(a, 0, sizeof *a);
    a->replica_count = p->replica_count;
    memcpy(a->replicas, gr_image_replicas(p), sizeof(int32_t) * (size_t)p->replica_count);
    a->adding_count = p->adding_count;
    memcpy(a->adding, gr_image_adding(p), sizeof(int32_t) * (size_t)p->adding_count);
    a->removing_count = p->removing_count;
    memcpy(a->removing, gr_image_removing(p), sizeof(int32_t) * (size_t)p->removing_count);
}

/* validateManualPartitionAssignment: not empty, at most GR_CLUSTER_REPLICAS_MAX, every broker registered,
 * none twice (checked in id order, as Kafka does, so the first offending id is the same). */
static int16_t validate(const struct gr_image *img, const int32_t *target, int32_t n, char *msg)
{
    if (n == 0) {
        snprintf(msg, GR_REASSIGN_MSG_BYTES,
                 "The manual partition assignment includes an empty replica list.");
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    if (n > GR_CLUSTER_REPLICAS_MAX) {
        snprintf(msg, GR_REASSIGN_MSG_BYTES,
                 "The manual partition assignment includes %d replicas, more than the %d Gregor allows.",
                 (int)n, GR_CLUSTER_REPLICAS_MAX);
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    int32_t sorted[GR_CLUSTER_REPLICAS_MAX];
    memcpy(sorted, target, sizeof(int32_t) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i32);
    for (int32_t i = 0; i < n; i++) {
        if (sorted[i] < 0 || !gr_image_broker(img, sorted[i])) {
            snprintf(msg, GR_REASSIGN_MSG_BYTES,
                     "The manual partition assignment includes broker %d, but no such broker is registered.",
                     (int)sorted[i]);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
        if (i > 0 && sorted[i] == sorted[i - 1]) {
            snprintf(msg, GR_REASSIGN_MSG_BYTES,
                     "The manual partition assignment includes the broker %d more than once.",
                     (int)sorted[i]);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    return GR_ERR_NONE;
}

/* The state p would have with `isr` and `leader`; the leader epoch goes up when the leader changes or
 * `bump` (a replica leaves). */
static void state_of(const struct gr_image_partition *p, const int32_t *isr, int32_t isr_count,
                     int32_t leader, bool bump, struct gr_cluster_partition *st)
{
    memset(st, 0, sizeof *st);
    st->leader = leader;
    st->leader_epoch = p->leader_epoch + ((leader != p->leader || bump) ? 1 : 0);
    st->isr_count = isr_count;
    memcpy(st->isr, isr, sizeof(int32_t) * (size_t)isr_count);
}

/* PartitionReassignmentRevert. */
static int16_t cancel(const struct gr_image *img, const struct gr_image_topic *t, int32_t partition,
                      const struct gr_image_partition *p, bool unclean_allowed,
                      struct gr_reassign_change *out, bool *changed, char *msg)
{
    if (!gr_image_reassigning(p)) {
        msg[0] = 0; /* Kafka answers its default message as null */
        return GR_ERR_NO_REASSIGNMENT_IN_PROGRESS;
    }
    const int32_t *adding = gr_image_adding(p);
    struct gr_cluster_assignment *a = &out->assign;
    memset(a, 0, sizeof *a);
    a->replica_count = without(a->replicas, gr_image_replicas(p), p->replica_count, adding, p->adding_count);
    int32_t isr[GR_CLUSTER_REPLICAS_MAX];
    int32_t isr_count = without(isr, gr_image_isr(p), p->isr_count, adding, p->adding_count);
    if (a->replica_count == 0) {
        snprintf(msg, GR_REASSIGN_MSG_BYTES,
                 "Invalid replica assignment: addingReplicas contains all replicas.");
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    if (isr_count == 0) {
        if (!unclean_allowed) {
            snprintf(msg, GR_REASSIGN_MSG_BYTES,
                     "Unable to revert partition assignment for %.*s:%d because it would require an unclean "
                     "leader election.",
                     (int)t->name_len, t->name, (int)partition);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
        isr[isr_count++] = a->replicas[0];
    }
    int32_t leader = p->leader;
    if (!has(isr, isr_count, leader)) {
        leader = -1;
        for (int32_t i = 0; i < a->replica_count && leader < 0; i++)
            if (has(isr, isr_count, a->replicas[i]) && gr_controller_broker_live(img, a->replicas[i]))
                leader = a->replicas[i];
    }
    out->write_state = p->partition_epoch > 0; /* a new partition epoch: every replica applies the change */
    if (out->write_state) state_of(p, isr, isr_count, leader, p->adding_count > 0, &out->state);
    *changed = true;
    return GR_ERR_NONE;
}

int16_t gr_reassign_ask(const struct gr_image *img, const struct gr_image_topic *t, int32_t partition,
                        const int32_t *target, int32_t target_count, bool allow_rf_change,
                        bool unclean_allowed, struct gr_reassign_change *out, bool *changed, char *msg)
{
    memset(out, 0, sizeof *out);
    *changed = false;
    msg[0] = 0;
    const struct gr_image_partition *p = gr_image_partition(t, partition);
    if (!p || p->replica_count == 0) {
        snprintf(msg, GR_REASSIGN_MSG_BYTES, "Unable to find partition %.*s:%d.", (int)t->name_len, t->name,
                 (int)partition);
        return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    if (p->leader_epoch == INT32_MAX) {
        snprintf(msg, GR_REASSIGN_MSG_BYTES, "The leader epoch of %.*s:%d cannot advance.", (int)t->name_len,
                 t->name, (int)partition);
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    if (target_count < 0) return cancel(img, t, partition, p, unclean_allowed, out, changed, msg);
    int16_t err = validate(img, target, target_count, msg);
    if (err) return err;
    const int32_t *reps = gr_image_replicas(p);
    int32_t original = p->replica_count - p->adding_count; /* KIP-860: the assignment before any ask */
    if (!allow_rf_change && target_count != original) {    /* INVALID_REPLICATION_FACTOR, as Kafka 4.1+ */
        snprintf(
            msg, GR_REASSIGN_MSG_BYTES,
            "The reassignment changes the replication factor from %d to %d, and AllowReplicationFactorChange "
            "is false.",
            (int)original, (int)target_count);
        return GR_ERR_INVALID_REPLICATION_FACTOR;
    }
    /* PartitionReassignmentReplicas(current = the replicas now, target): removing and adding in id order,
     * replicas = target + removing */
    struct gr_cluster_assignment *a = &out->assign;
    a->removing_count = without(a->removing, reps, p->replica_count, target, target_count);
    a->adding_count = without(a->adding, target, target_count, reps, p->replica_count);
    qsort(a->removing, (size_t)a->removing_count, sizeof(int32_t), cmp_i32);
    qsort(a->adding, (size_t)a->adding_count, sizeof(int32_t), cmp_i32);
    if (target_count + a->removing_count > GR_CLUSTER_REPLICAS_MAX) {
        snprintf(msg, GR_REASSIGN_MSG_BYTES,
                 "The target and the replicas being removed together exceed the %d replicas Gregor allows.",
                 GR_CLUSTER_REPLICAS_MAX);
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    memcpy(a->replicas, target, sizeof(int32_t) * (size_t)target_count);
    memcpy(a->replicas + target_count, a->removing, sizeof(int32_t) * (size_t)a->removing_count);
    a->replica_count = target_count + a->removing_count;
    struct gr_cluster_assignment cur;
    current(p, &cur);
    *changed = memcmp(&cur, a, sizeof cur) != 0;
    /* the state written again, unchanged: a new partition epoch makes the leader and the replicas apply the
     * new assignment (Kafka's growth step is a PartitionChangeRecord too) and fences ISR changes in flight */
    out->write_state = *changed && p->partition_epoch > 0;
    if (out->write_state) state_of(p, gr_image_isr(p), p->isr_count, p->leader, false, &out->state);
    return GR_ERR_NONE;
}

bool gr_reassign_complete(const struct gr_image *img, const struct gr_image_topic *t, int32_t partition,
                          struct gr_reassign_change *out)
{
    (void)t;
    const struct gr_image_partition *p = gr_image_partition(t, partition);
    if (!p || !gr_image_reassigning(p) || p->partition_epoch == 0 || p->leader_epoch == INT32_MAX)
        return false;
    memset(out, 0, sizeof *out);
    const int32_t *removing = gr_image_removing(p);
    int32_t isr[GR_CLUSTER_REPLICAS_MAX];
    int32_t isr_count = without(isr, gr_image_isr(p), p->isr_count, removing, p->removing_count);
    struct gr_cluster_assignment *a = &out->assign;
    a->replica_count =
        without(a->replicas, gr_image_replicas(p), p->replica_count, removing, p->removing_count);
    if (isr_count == 0 || a->replica_count == 0) return false;
    for (int32_t i = 0; i < a->replica_count; i++)
        if (!has(isr, isr_count, a->replicas[i])) return false; /* a target replica still catching up */
    int32_t leader = p->leader;
    if (!has(a->replicas, a->replica_count, leader)) {
        leader = -1;
        for (int32_t i = 0; i < a->replica_count && leader < 0; i++)
            if (gr_controller_broker_live(img, a->replicas[i])) leader = a->replicas[i];
        if (leader < 0) return false; /* no live target replica to lead: wait */
    }
    state_of(p, isr, isr_count, leader, p->removing_count > 0, &out->state);
    out->write_state = true; /* a new partition epoch even when only replicas were added */
    return true;
}

int gr_reassign_record(const struct gr_image_topic *t, struct gr_cluster_topic *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->topic_id.b, t->id, 16);
    if (t->partition_count < 1) return -EINVAL;
    out->partitions = calloc((size_t)t->partition_count, sizeof *out->partitions);
    out->configs = t->config_count ? calloc((size_t)t->config_count, sizeof *out->configs) : NULL;
    if (!out->partitions || (t->config_count && !out->configs)) {
        gr_cluster_topic_free(out);
        return -ENOMEM;
    }
    out->partition_count = t->partition_count;
    for (int32_t p = 0; p < t->partition_count; p++) {
        if (t->parts[p].replica_count < 1 || t->parts[p].replica_count > GR_CLUSTER_REPLICAS_MAX) {
            gr_cluster_topic_free(out);
            return -EINVAL;
        }
        current(&t->parts[p], &out->partitions[p]);
    }
    for (int32_t i = 0; i < t->config_count; i++) {
        out->config_count = i + 1;
        if (!(out->configs[i].name = strdup(t->configs[i].name)) ||
            !(out->configs[i].value = strdup(t->configs[i].value))) {
            gr_cluster_topic_free(out);
            return -ENOMEM;
        }
    }
    return 0;
}
