/*
 * controller.h: the cluster controller (issue #19, "A controller"): elected by compare-and-swap on the
 * lease-bound `controller` key (cluster/layout.h), whose create_revision is the controller epoch, and the
 * only writer of leaders and leader epochs in the partition state (issue #20: elections from the ISR,
 * controlled shutdown; a partition's leader changes only its ISR, at the same leader epoch, through
 * cluster/isr_writer.h). It runs on the broker's libev loop through the etcd client (cluster/etcd.h) and
 * reads nothing but the metadata image (cluster/image.h), which the member's watch keeps current and which
 * calls this module's observer after each applied batch.
 *
 * Controlled shutdown, the controller's half: a registration marked shutting_down (cluster/member.h, at
 * SIGTERM) is not live, so the plan moves every leadership it holds to another live ISR member and takes it
 * out of every ISR. The broker's half (server/membership.c gr_membership_shutdown_begin): the SIGTERM path
 * marks the registration (gr_member_mark), keeps serving until gr_controller_movable_leaderships is 0 (at
 * most GR_CONTROLLED_SHUTDOWN_WAIT_MS), then stops its fetchers, flushes and revokes its lease.
 *
 * Invariants:
 * - Every broker runs one; it campaigns only with a lease (gr_controller_set_lease: the controller lease of
 *   cluster/ctl_lease.h, so a dead controller is replaced within controller.quorum.fetch.timeout.ms), its own
 * registration in the image (the controller record carries its broker epoch) and no controller in the image.
 * A lost or changed lease stops it at once (its in-flight request is cancelled, its plan dropped).
 * - Every partition write is one txn comparing the controller key's create_revision with this controller's
 *   epoch, each touched partition key's mod_revision with the partition epoch the plan read (an absent key
 *   compares as 0, etcd's rule for a missing key's revisions), and, for a partition written for the first
 *   time, its topic record's mod_revision with the image's record_revision: a topic deleted (or deleted and
 *   created again) after the plan was made fails that compare, so a racing deletion can never re-create its
 *   partition keys. The value stores the writer's controller epoch. A deposed controller's txn fails, so it
 *   applies nothing; the txn's failure branch reads the controller key and a controller that sees another
 *   epoch there (or none) steps down.
 * - At most one request in flight (a campaign or a txn), at most GR_CONTROLLER_TXN_PARTITIONS_MAX partitions
 *   and GR_ETCD_TXN_OPS_MAX compares per txn, at most GR_CONTROLLER_PLAN_MAX partitions per planning pass.
 *   After a txn succeeds, the next pass waits until the image shows its revision (so it never re-plans what
 *   it just wrote); after a failure, it re-plans when the image moves past the plan's revision, or after a
 *   doubling back-off (GR_CONTROLLER_BACKOFF_MIN_MS..MAX_MS) if the image stays put. Lost requests (timeout,
 *   unreachable) wait the same back-off; their compares make the retry safe.
 *
 * What the image must provide (the member slice): brokers with epoch (create_revision of the registration;
 * a broker whose lease expired is removed or marked fenced), controller_id and controller_epoch from the
 * controller key (-1 / 0 when absent), per topic record_revision, per partition the replicas from the
 * topic record's assignment and, once a state exists, leader, leader epoch, ISR and partition_epoch (the
 * state key's mod_revision; 0 = none yet), and image->revision, the etcd revision it reflects.
 *
 * Read next: cluster/controller.c (the election and the txns), cluster/tests/test_controller_plan.c (the
 * plan), cluster/tests/test_controller.c (two controllers against a real etcd).
 */
#ifndef GR_CLUSTER_CONTROLLER_H
#define GR_CLUSTER_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/image.h"
#include "cluster/layout.h"
#include "cluster/reassign.h"
#include "cluster/values.h"

struct ev_loop;
struct gr_etcd;

/* Partitions planned in one pass: the rest waits for the next pass (1,000-partition topics fit in one). */
#define GR_CONTROLLER_PLAN_MAX 2048
/* Partitions written per txn (the issue: "txns of at most 64 partitions"); with one compare per partition,
 * one per first-written topic and the controller's, a txn stays within etcd's 128 compares and 128 ops. */
#define GR_CONTROLLER_TXN_PARTITIONS_MAX 64
/* Back-off after a failed or lost request, doubling from MIN to MAX (milliseconds). */
#define GR_CONTROLLER_BACKOFF_MIN_MS 100
#define GR_CONTROLLER_BACKOFF_MAX_MS 5000
/* unclean.leader.election.interval.ms, Kafka's default (5 minutes): how often the controller's plan also
 * elects outside the ISR for partitions already offline whose topic allows it. */
#define GR_CONTROLLER_UNCLEAN_INTERVAL_MS_DEFAULT 300000

/* One partition-state write of a plan: which key (topic id, partition; the topic's name for its record's
 * compare), what the plan read (partition_epoch, the topic record's revision) and the new state
 * (state.controller_epoch is filled when the txn is built). */
struct gr_controller_write {
    uint8_t topic_id[16];
    char topic[GR_TOPIC_NAME_BYTES_MAX + 1];
    int32_t topic_len;
    int64_t topic_revision;  /* the topic record's mod_revision (compared when partition_epoch is 0) */
    int32_t partition;       /* index */
    int64_t partition_epoch; /* the state key's mod_revision the plan read (0: absent) */
    struct gr_cluster_partition state;
};

/* Counters (tests, logs). */
struct gr_controller_stats {
    uint64_t campaigns;            /* campaign txns sent */
    uint64_t elected;              /* times this broker became controller */
    uint64_t txns_ok, txns_failed; /* partition-state txns whose compares held / failed */
    uint64_t txns_lost;            /* txns that timed out or lost their connection (outcome unknown) */
    uint64_t partitions_written;   /* partition states in succeeded txns */
    uint64_t reassign_txns_ok; /* topic-record txns (reassignment asks and completions) whose compares held */
    uint64_t reassignments_completed; /* partitions whose reassignment completed */
};

struct gr_controller;

/* Whether broker `node_id` may lead: registered in `img`, not fenced, not shutting down (Kafka's
 * BrokerHeartbeatManager "active" brokers; a shutting-down broker's partitions move away). */
bool gr_controller_broker_live(const struct gr_image *img, int32_t node_id);

/* Controlled shutdown, the broker's wait (Kafka's broker waits for the controller to answer its
 * WantShutDown heartbeat with ShouldShutDown, which the controller gives once the broker leads nothing it
 * can move: BrokerHeartbeatManager / ReplicationControlManager): the number of partitions broker `node_id`
 * leads in `img` whose ISR holds another live member (gr_controller_broker_live), i.e. the leaderships the
 * controller can still move away. A partition whose ISR is only this broker (or whose other members are
 * gone or shutting down) does not count: no one can take it. *first_topic and *first_partition (each may
 * be NULL; set only when the count is > 0) name the first such partition in image order, for the log.
 * O(partitions). */
int32_t gr_controller_movable_leaderships(const struct gr_image *img, int32_t node_id,
                                          const struct gr_image_topic **first_topic,
                                          int32_t *first_partition);

/* What a plan may do beyond clean elections (Kafka's unclean.leader.election.enable). */
struct gr_controller_plan_opts {
    bool unclean_default; /* the broker's unclean.leader.election.enable, for a topic without its own */
    bool unclean_pass;    /* also elect uncleanly where the partition was already offline (Kafka's periodic
                             check, every unclean.leader.election.interval.ms); otherwise only where this plan
                             takes the leader away */
    bool preferred_pass;  /* the automatic rebalance (auto.leader.rebalance.enable): every partition whose
                             preferred replica (the first) is fresh, in the ISR and not the leader gets it back
                             as leader (QuorumController.maybeBalancePartitionLeaders) */
    /* ElectLeaders: the election type (GR_ELECTION_*) asked for partition `partition` of the topic with id
     * `topic_id`, or -1 for none. NULL: none asked. */
    int (*asked)(void *ctx, const uint8_t topic_id[16], int32_t partition);
    void *asked_ctx;
};

/* ElectLeaders' election types (ElectLeadersRequest.ElectionType, KIP-460). */
#define GR_ELECTION_PREFERRED 0
#define GR_ELECTION_UNCLEAN 1

/* What an election of one partition would do now (ReplicationControlManager.electLeader). */
enum gr_elect_check {
    GR_ELECT_NEEDED = 0,            /* the plan would elect (gr_controller_plan_opts.asked) */
    GR_ELECT_NOT_NEEDED,            /* PREFERRED: the preferred replica leads; UNCLEAN: a leader exists */
    GR_ELECT_PREFERRED_UNAVAILABLE, /* PREFERRED: the preferred replica is not fresh or not in the ISR */
    GR_ELECT_ELIGIBLE_UNAVAILABLE,  /* UNCLEAN: no live replica */
};
/* The check of an ElectLeaders election of type `type` (GR_ELECTION_*) on partition `p` of `img`, by the
 * plan's rules (controller.h gr_controller_plan_with): PREFERRED needs the first replica to be fresh and in
 * the ISR; UNCLEAN applies only to a partition without a leader and needs a live replica. A partition with no
 * state yet (partition_epoch 0) or a bad state (empty ISR) is PREFERRED_UNAVAILABLE / ELIGIBLE_UNAVAILABLE
 * unless it has a leader already (NOT_NEEDED). */
enum gr_elect_check gr_controller_elect_check(const struct gr_image *img, const struct gr_image_partition *p,
                                              int type);

/* The plan: a pure function of the image (Kafka's ReplicationControlManager and PartitionChangeBuilder, for
 * any replication factor). Writes into `out` (at most `cap` entries) the partition states the controller
 * must write, topics in name order and partitions in index order. "Live": registered, not fenced, not
 * shutting down (gr_controller_broker_live); "fresh": live with a broker epoch <= the partition epoch (a
 * newer registration is a restart Kafka would have fenced and unfenced, its log maybe short).
 * - A partition of a topic record with no state yet (partition_epoch 0, replicas known, the record's
 *   revision known): ISR = the live replicas, leader = the first of them, leader epoch 0; with no live
 *   replica, leader -1 and ISR = the replicas (ReplicationControlManager.createTopic).
 * - A partition whose leader is fresh and in the ISR: the ISR loses every member that is not fresh (gone,
 *   shutting down, registered again: handleBrokerFenced / handleBrokerInControlledShutdown), leader and
 *   leader epoch unchanged; nothing when no member goes.
 * - Otherwise an election, leader epoch + 1, in assignment order: the first fresh ISR member leads and the
 *   ISR is the fresh members; else the ISR's only member, live again (the last ISR member back), leads with
 *   ISR = it alone, unless its registration says its process started on a new or emptied log dir
 *   (log_dir_new: a replaced disk; electing it would truncate the other replicas to its empty log; Kafka
 *   4.x keeps such a broker out by KIP-966's unclean-shutdown handling); else, when the topic's
 * unclean.leader.election.enable (or opts->unclean_default) is true and the partition had a leader (or
 * opts->unclean_pass), the first live replica (one not on a new or emptied log dir first), ISR = it alone,
 * logged as a possible loss; else the partition goes offline: leader -1, ISR = the old leader alone (never
 * empty); one already offline stays as it is (nothing written).
 * - Preferred elections (opts->preferred_pass, or opts->asked gives PREFERRED for the partition): where the
 *   leader stays (the second rule) and the first replica is fresh, in the new ISR and not the leader, it
 *   leads instead, leader epoch + 1 (the old leader stays in the ISR as a follower). An UNCLEAN ask allows
 *   the unclean election of the third rule for that partition whatever its topic's setting.
 * A partition whose leader epoch is INT32_MAX or whose stored ISR is empty is skipped (logged). opts may be
 * NULL (no unclean election: gr_controller_plan). Returns the number written (<= cap); *more (may be NULL)
 * says whether writes were left out at the cap. */
int32_t gr_controller_plan_with(const struct gr_image *img, const struct gr_controller_plan_opts *opts,
                                struct gr_controller_write *out, int32_t cap, bool *more);
/* gr_controller_plan_with without unclean elections (opts NULL). */
int32_t gr_controller_plan(const struct gr_image *img, struct gr_controller_write *out, int32_t cap,
                           bool *more);
/* How many of the `count` writes at `w` go into one txn: at most GR_CONTROLLER_TXN_PARTITIONS_MAX, with
 * 1 + partitions + distinct topics of first writes compares <= GR_ETCD_TXN_OPS_MAX. Returns 0 only for
 * count 0. */
int32_t gr_controller_batch(const struct gr_controller_write *w, int32_t count);

/* Returns new: the controller of broker `node_id`, observing `img` (gr_image_observe), or NULL (out of
 * memory, or no observer slot left). loop, etcd, lay and img are borrowed and must outlive it. It does
 * nothing until gr_controller_set_lease gives it a lease. */
struct gr_controller *gr_controller_new(struct ev_loop *loop, struct gr_etcd *etcd,
                                        const struct gr_cluster_layout *lay, struct gr_image *img,
                                        int32_t node_id);
/* The controller lease (cluster/ctl_lease.h: its own, shorter than the registration's, held only while
 * this broker is registered); the controller key is bound to it; 0: none (not registered, fenced, or lost). A
 * different value than before stops the controller at once (request cancelled, plan dropped, epoch 0), then,
 * with a lease, it campaigns when the image shows no controller. */
void gr_controller_set_lease(struct gr_controller *ctl, int64_t lease_id);
/* The broker is stopping (SIGTERM): the lease's end that follows is its own doing, logged at INFO, not as a
 * lost lease (WARN). */
void gr_controller_shutting_down(struct gr_controller *ctl);
/* The broker's unclean.leader.election.enable (for topics without their own; default false) and
 * unclean.leader.election.interval.ms (< 1: GR_CONTROLLER_UNCLEAN_INTERVAL_MS_DEFAULT), the period of the
 * unclean pass (gr_controller_plan_opts). Plans made after the call use them. */
void gr_controller_set_unclean(struct gr_controller *ctl, bool enable_default, int64_t interval_ms);
/* auto.leader.rebalance.enable (Kafka's default true) and leader.imbalance.check.interval.seconds (< 1:
 * 300, Kafka's default): with it on, every interval the next plan is a preferred pass (opts.preferred_pass).
 * Kafka 4.x's controller (QuorumController / ReplicationControlManager.maybeBalancePartitionLeaders) moves
 * every imbalanced partition back whose preferred replica can lead, ignoring
 * leader.imbalance.per.broker.percentage (the ZooKeeper controller's per-broker threshold); Gregor does the
 * same (at most GR_CONTROLLER_PLAN_MAX partitions per pass; what a pass leaves out, at the cap or after a
 * failed txn, waits for the next check, where Kafka schedules the next balance at once). */
void gr_controller_set_rebalance(struct gr_controller *ctl, bool enable, int64_t interval_s);

/* ElectLeaders (KafkaApis/ControllerApis handleElectLeaders), the controller's half. Routing: the Java
 * AdminClient sends ElectLeaders to the controller named in Metadata (ControllerNodeProvider), and Gregor's
 * Metadata names the real controller (the image's controller key), so the controller's broker answers it
 * and any other broker answers NOT_CONTROLLER (41; the client then fails: the election is asked again),
 * with no forwarding and no etcd record. One asked partition: its topic id and index, and its leader epoch
 * when asked. */
struct gr_controller_elect_part {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t leader_epoch;
};
struct gr_controller_elect_req;
/* Makes the controller elect, at its next plans, the `n` partitions at `parts` (copied) by `type`
 * (GR_ELECTION_*), each checked NEEDED by gr_controller_elect_check just before; done(ctx) runs once (from
 * the image observer, never inside this call) when the image shows every one of them resolved: its leader
 * epoch moved past the one asked, or the check no longer says NEEDED, or the partition is gone. The
 * handler then reads the outcome from the image. Returns the ask (borrowed; valid until done runs or
 * gr_controller_elect_cancel), or NULL: not the controller, n out of 1..GR_IMAGE_PARTITIONS_MAX, already
 * GR_CONTROLLER_ELECT_ASKS_MAX asks waiting, or out of memory. gr_controller_free runs every waiting done. */
#define GR_CONTROLLER_ELECT_ASKS_MAX 64
struct gr_controller_elect_req *gr_controller_elect(struct gr_controller *ctl, int type,
                                                    const struct gr_controller_elect_part *parts, int32_t n,
                                                    void (*done)(void *ctx), void *ctx);
/* Withdraws an ask whose done has not run (its deadline passed): done never runs, the ask is freed. */
void gr_controller_elect_cancel(struct gr_controller *ctl, struct gr_controller_elect_req *r);

/* AlterPartitionReassignments (KIP-455; ControllerApis handleAlterPartitionReassignments), the controller's
 * half, routed like ElectLeaders (the controller's broker answers, others NOT_CONTROLLER). One asked
 * partition: topic id and index, and the target (target_count node ids; -1: cancel the reassignment). The
 * controller judges each on the image when it writes (cluster/reassign.h gr_reassign_ask) and fills error
 * and message; a part with done already set (the handler refused it) is skipped. */
struct gr_controller_reassign_part {
    uint8_t topic_id[16];
    int32_t partition;
    int32_t target_count; /* -1: cancel; otherwise 0..GR_CLUSTER_REPLICAS_MAX */
    int32_t target[GR_CLUSTER_REPLICAS_MAX];
    bool done;     /* answered: error (0 = written, or nothing to write) and message are final */
    int16_t error; /* GR_ERR_* */
    char message[GR_REASSIGN_MSG_BYTES];
};
struct gr_controller_reassign_req;
#define GR_CONTROLLER_REASSIGN_ASKS_MAX 64
/* Asks the controller to start or cancel the reassignments of the `n` parts at `parts` (borrowed: they
 * must stay valid until done runs or the ask is cancelled; the controller writes their outcome into them),
 * with AllowReplicationFactorChange `allow_rf_change` (KIP-860). Each topic's parts are written in one
 * etcd txn (the topic record, and the partition states a cancel changes), at most
 * GR_CONTROLLER_TXN_PARTITIONS_MAX partitions per txn; a txn whose compares fail is judged again on the
 * newer image. Asks and completions are written only when the plan (elections, ISR changes) has nothing to
 * write, so a reassignment's txn that keeps failing never holds back an election. done(ctx) runs once (never
 * inside this call) when every part is answered and the image shows every write. Returns the ask, or NULL:
 * not the controller, n out of 1..GR_IMAGE_PARTITIONS_MAX, GR_CONTROLLER_REASSIGN_ASKS_MAX asks already
 * waiting, or out of memory. */
struct gr_controller_reassign_req *gr_controller_reassign(struct gr_controller *ctl,
                                                          struct gr_controller_reassign_part *parts,
                                                          int32_t n, bool allow_rf_change,
                                                          void (*done)(void *ctx), void *ctx);
/* Withdraws an ask whose done has not run (its deadline passed): done never runs; writes already made stay.
 */
void gr_controller_reassign_cancel(struct gr_controller *ctl, struct gr_controller_reassign_req *r);
/* Whether the topic allows an unclean election: its unclean.leader.election.enable, else `broker_default`. */
bool gr_controller_unclean_enabled(const struct gr_image_topic *t, bool broker_default);

/* The controller epoch this broker holds (the controller key's create_revision it created), 0 when it is not
 * the controller. */
int64_t gr_controller_epoch(const struct gr_controller *ctl);
/* Returns borrowed: the counters. */
const struct gr_controller_stats *gr_controller_stats(const struct gr_controller *ctl);
/* Stops observing, cancels any request (no callback runs afterwards) and frees; NULL ignored. Does not
 * delete the controller key (its lease does). */
void gr_controller_free(struct gr_controller *ctl);

#endif
