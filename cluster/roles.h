/*
 * roles.h: the role binding (issue #20), which gives this broker's local partitions the roles the metadata
 * image assigns them, as Kafka's ReplicaManager.applyDelta does with makeLeaders / makeFollowers. It is an
 * image observer (cluster/image.h gr_image_observe) beside the replica manager (cluster/replicas.h, which
 * makes and deletes the local logs). For every local partition (an image topic linked to a store topic
 * holding that partition's log) whose state is written (replicas known), each pass does:
 *   - leader here (leader = node.id): gr_partition_set_role LEADER with the leader epoch, partition epoch,
 *     replicas, ISR and the topic's min.insync.replicas (its topic config, else the broker's); the fetch of
 *     it stops (fetcher_remove);
 *   - follower here (a replica, the leader elsewhere or -1): set_role FOLLOWER, then fetcher_add with that
 *     leader and leader epoch (ReplicaManager.makeFollowers: partitionsToStartFetching); with leader -1
 *     (offline) the fetch stops instead;
 *   - no longer a replica (a stray the replica manager deletes): the fetch stops, the ISR change pending is
 *     cancelled; no set_role.
 * set_role is called only when something it takes changed (role, leader, leader epoch, partition epoch;
 * replicas and ISR change only with the partition epoch, the state key's mod_revision); a min.insync.replicas
 * change alone goes through gr_partition_set_min_insync_replicas. A state older than the one applied (a
 * smaller leader epoch, or the same one with a smaller partition epoch, e.g. the image not yet showing this
 * broker's own ISR write) is skipped. Partitions that left the image (or lost their local link) stop being
 * fetched and lose their pending ISR change at the end of the pass. Nothing runs while the image is loading
 * (a partial snapshot) or this broker is self-fenced (cluster/member.h: it leads nothing until registered
 * again).
 *
 * The ISR-change hook: gr_roles_new gives the partitions (gr_partitions_set_replication) the broker
 * registrations of the image (broker epoch, -1 when unknown or fenced; shutting_down) and a propose_isr that
 * hands each change to the ISR writer (cluster/isr_writer.h, through ops.isr_propose). Its outcome returns to
 * the partition as Partition.handleAlterPartitionUpdate / handleAlterPartitionError do:
 *   GR_ISR_OK          gr_partition_isr_committed with the new partition epoch;
 *   GR_ISR_INELIGIBLE  gr_partition_isr_failed (Kafka's INELIGIBLE_REPLICA: back to the committed ISR);
 *   GR_ISR_STALE, GR_ISR_FENCED, GR_ISR_STALE_BROKER, GR_ISR_UNKNOWN  nothing: the change stays in flight
 *                      (no other is proposed) until the image brings the partition's new state, whose
 *                      set_role drops it (Kafka: INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH,
 *                      UNKNOWN_TOPIC_OR_PARTITION are not retried; STALE_BROKER_EPOCH means this broker is
 *                      fenced, and the controller moves its leaderships).
 * A proposal the writer refuses at once (-EINVAL, -EEXIST, -EBUSY, ...: nothing sent) is reverted with
 * gr_partition_isr_failed, so the next fetch or shrink tick may propose again.
 *
 * Logs (INFO): each role applied with a new role, leader or leader epoch (Partition.makeLeader's and
 * makeFollower's lines: leader epoch, partition epoch, log end offset, high watermark, ISR, the previous
 * leader), and each ISR change handed to the writer (expanding or shrinking, from and to).
 *
 * The shrink timer: every replica.lag.time.max.ms / 2, gr_partition_maybe_shrink_isr on every partition led
 * here (ReplicaManager.startup schedules maybeShrinkIsr at that period).
 *
 * The fetcher and the ISR writer are reached through an ops table (struct gr_roles_ops), so that tests use
 * fakes and a broker without a fetcher yet runs with NULL fetcher functions (followers then take their role
 * but copy nothing). Network thread only; every table bounded by the image's partition count. Read next:
 * cluster/roles.c, partition/partition.h (set_role and the leader side), cluster/fetcher.h,
 * cluster/isr_writer.h.
 */
#ifndef GR_CLUSTER_ROLES_H
#define GR_CLUSTER_ROLES_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/isr_writer.h"

struct ev_loop;
struct gr_fetcher;
struct gr_image;
struct gr_log;
struct gr_partition;
struct gr_partitions;
struct gr_topic;

/* The fetcher's and the ISR writer's functions (each may be NULL: that part does nothing). */
struct gr_roles_ops {
    /* cluster/fetcher.h gr_fetcher_add: start or move the fetch of `part` (0 or -errno) */
    int (*fetcher_add)(void *ctx, struct gr_partition *part, const char *topic, const uint8_t topic_id[16],
                       int32_t partition, int32_t leader_id, int32_t leader_epoch);
    /* cluster/fetcher.h gr_fetcher_remove: stop the fetch of `part` */
    void (*fetcher_remove)(void *ctx, struct gr_partition *part);
    void *fetcher_ctx;
    /* cluster/isr_writer.h gr_isr_writer_propose and gr_isr_writer_cancel */
    int (*isr_propose)(void *ctx, const struct gr_isr_change *chg, gr_isr_done *done, void *done_ctx);
    bool (*isr_cancel)(void *ctx, const uint8_t topic_id[16], int32_t partition);
    void *isr_ctx;
};

struct gr_roles_config {
    struct ev_loop *loop;        /* the shrink timer's (NULL: no timer; tests call gr_roles_shrink_tick) */
    struct gr_partitions *parts; /* the partitions of the local logs (borrowed; outlives the binding) */
    int64_t replica_lag_time_max_ms; /* replica.lag.time.max.ms; 0 or less: Kafka's 30000 */
    int32_t min_insync_replicas;     /* the broker's min.insync.replicas (topic configs override); < 1: 1 */
    /* The monotonic clock in ms (the partitions' and the shrink tick's). NULL: gr_time_mono_ms. */
    int64_t (*now_ms)(void *ctx);
    void *clock_ctx;
    struct gr_roles_ops ops;
};

/* Counters (tests, logs). */
struct gr_roles_stats {
    int64_t passes;       /* image passes run */
    int64_t set_roles;    /* gr_partition_set_role calls */
    int64_t leaders;      /* partitions led here now */
    int64_t followers;    /* partitions followed here now */
    int64_t fetcher_adds; /* fetcher_add calls that succeeded */
    int64_t proposals;    /* ISR changes handed to the writer and accepted */
    int64_t refused;      /* ISR changes the writer refused at once (reverted) */
    int64_t shrink_ticks; /* shrink timer runs */
    int64_t role_errors;  /* set_role calls that failed (logged) */
    int64_t isr_shrinks;  /* ISR changes of partitions led here the writer made (GR_ISR_OK) removing members:
                             Kafka's ReplicaManager IsrShrinksPerSec, marked on a successful AlterPartition */
    int64_t isr_expands;  /* ... adding a member (IsrExpandsPerSec) */
    int32_t tracked;      /* partitions with a role applied */
};

/* Fills `ops`' fetcher part with the real replica fetcher `f` (cluster/fetcher.h; borrowed, must outlive
   the binding). */
void gr_roles_ops_fetcher(struct gr_roles_ops *ops, struct gr_fetcher *f);
/* Fills `ops`' ISR part with the real writer `w` (borrowed; must outlive the binding). */
void gr_roles_ops_isr_writer(struct gr_roles_ops *ops, struct gr_isr_writer *w);

/* Returns new: a binding of `img` (borrowed; outlives it) with `cfg` (copied), not started; installs the
   replication hooks on cfg->parts (gr_partitions_set_replication). NULL when out of memory or without parts.
 */
struct gr_roles *gr_roles_new(const struct gr_roles_config *cfg, struct gr_image *img);
/* The image is loaded: observes it, runs the first pass and starts the shrink timer. Returns 0, -ENOSPC (no
   observer slot) or -EALREADY. */
int gr_roles_start(struct gr_roles *r);
/* The replica manager's on_log hook (cluster/replicas.h): a local log was made (made: its partition takes
   its role now, when started) or deleted (its fetch stops, its ISR change is cancelled, its role forgotten).
 */
void gr_roles_on_log(struct gr_roles *r, struct gr_topic *t, int32_t partition, struct gr_log *log,
                     bool made);
/* One run of the shrink timer (ReplicaManager.maybeShrinkIsr): gr_partition_maybe_shrink_isr at the clock's
   now on every partition led here. Returns how many changes were proposed. */
int gr_roles_shrink_tick(struct gr_roles *r);
/* Stops observing and the timer, stops every fetch, cancels every pending ISR change (no outcome runs after
   this), removes the replication hooks from the partitions, frees. NULL is ignored. */
void gr_roles_free(struct gr_roles *r);
/* Fills `st`. */
void gr_roles_stats(const struct gr_roles *r, struct gr_roles_stats *st);

#endif
