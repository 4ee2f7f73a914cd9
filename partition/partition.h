/*
 * partition.h: the data plane of one partition, between storage/ (the log) and coordinator/ and server/.
 * One struct gr_partition per partition log: it wraps that log (storage/log.h), decides what is visible
 * (the visible offset: today the durable offset when the set was created with visible_is_durable, Gregor's
 * gregor.acks.all.fsync default, else the log end offset; with replication it becomes the high watermark
 * driven by the followers) and owns the partition's named waits.
 *
 * Named waits: a caller embeds a struct gr_partition_waiter in its own memory, sets its done hook
 * (gr_partition_waiter_init) and queues it with one of
 *   gr_partition_wait_committed          until the visible offset reaches an end offset (Produce acks=-1,
 *                                        OffsetCommit, the SyncGroup assignment's record);
 *   gr_partition_wait_data               until data is visible past an offset (long-poll Fetch);
 *   gr_partition_wait_log_start_durable  until a log-start-offset checkpoint is durable (DeleteRecords).
 * The done hook is called exactly once per wait: at once (inside the wait call) when the condition already
 * holds or cannot hold any more (err < 0), else from the event that makes it hold (gr_partition_appended,
 * gr_partition_flushed) or fails it (gr_partition_fail, an offline log); never after
 * gr_partition_wait_cancel. Cancelling a waiter that is done or was never queued does nothing. After its
 * done hook the waiter may be queued again (from inside the hook too). The partition never allocates for a
 * wait and never frees a waiter.
 *
 * Ownership rule: a partition's state (its waiters, its visible offset) is touched only by the thread that
 * owns the partition: today the one network thread owns every partition of the broker; a later step may run
 * one event loop per core, each owning a set (struct gr_partitions) of partitions. Other threads (the
 * storage flushers) never call in here: their completions are handed to the owning thread first, which then
 * calls gr_partition_flushed. No event loop, socket or request type is known here: the server turns done
 * hooks into request re-checks.
 *
 * The section at the end of this file declares, without implementing, the operations replication and
 * transactions will add (append as follower, truncation, role and leader epoch, the high watermark from the
 * replicas' offsets, the last stable offset, aborted transactions), each naming its Kafka counterpart.
 *
 * Read next: partition/partition.c, storage/log.h, server/broker.c (the server binding: flush completions,
 * request waits).
 */
#ifndef GR_PARTITION_H
#define GR_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/log.h"
#include "storage/store.h"

struct gr_partitions;
struct gr_partition;
struct gr_partition_waiter;

/* A waiter's done hook: err 0 when the condition holds, else -errno (-EROFS: the log went offline; the
   error given to gr_partition_fail; for a log start wait the checkpoint's error). Called exactly once per
   queued wait, on the owning thread. */
typedef void (*gr_partition_done_fn)(struct gr_partition_waiter *w, int err);

/* A waiter lives in its caller's memory. `done` and `ctx` are the caller's; the rest is private. */
struct gr_partition_waiter {
    gr_partition_done_fn done;
    void *ctx;
    /* private: */
    struct gr_partition *part;         /* the partition while queued, NULL when idle */
    struct gr_partition_waiter **list; /* the list it is queued on */
    struct gr_partition_waiter *prev, *next;
    int kind;
    int64_t arg; /* the end offset, the offset, or the checkpoint ticket */
};

/* The set of partitions one thread owns, and the settings they share. */
struct gr_partitions_config {
    struct gr_store *store;  /* borrowed (checkpoint tickets for gr_partition_wait_log_start_durable) */
    bool visible_is_durable; /* the visible offset is the durable offset (gregor.acks.all.fsync), else the log
                                end offset; set once at start */
};

/* Creates an empty set. Takes a copy of `cfg`. Returns new (gr_partitions_destroy), or NULL when out of
   memory. */
struct gr_partitions *gr_partitions_create(const struct gr_partitions_config *cfg);
/* Frees every partition object of the set without touching their logs (so before or after gr_store_close;
   the logs keep a dangling user pointer, so close the store too). Waiters still queued are dropped without
   a done call (shutdown: their owners are freed by the caller). */
void gr_partitions_destroy(struct gr_partitions *ps);
/* Whether the visible offset is the durable offset (the setting given at create). */
bool gr_partitions_visible_is_durable(const struct gr_partitions *ps);

/* Returns borrowed: the partition object of `log`, created on first use (kept in the log's user pointer,
   storage/log.h gr_log_set_user) and living until gr_partitions_destroy. NULL only when out of memory. */
struct gr_partition *gr_partition_get(struct gr_partitions *ps, struct gr_log *log);
/* Returns borrowed: the log the partition wraps. */
struct gr_log *gr_partition_log(const struct gr_partition *part);

/* THE visible offset of the partition (what Fetch reads below, ListOffsets' latest, DeleteRecords' bound,
   what committed means): the durable offset when the set's visible_is_durable, else the log end offset.
   Also tells storage (gr_log_set_high_watermark: checkpointed, and the retention bound) when it moved.
   Returns the offset (log start <= it <= log end). */
int64_t gr_partition_visible_offset(struct gr_partition *part);

/* Appends one validated record batch to the partition's log: gr_log_append, whose contract (arguments,
   in-place patching, results, errors) it keeps, then, when a batch was written (0 and not a duplicate),
   gr_partition_appended. The partition layer's append for callers that append batch by batch (the group
   coordinator's __consumer_offsets writes). */
int gr_partition_append(struct gr_partition *part, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                        struct gr_append_result *res);
/* Told after records were appended to the log. With visible_is_durable it asks the flushers for a group
   commit (gr_log_flush_async: the visible offset follows fsync); otherwise the visible offset moved, and the
   committed and data waiters whose condition now holds are done. */
void gr_partition_appended(struct gr_partition *part);
/* Told on the owning thread after a flush or a log-start checkpoint covering this log completed (storage's
   on_flushed, handed over by the server), or the log went offline: the visible offset is recomputed and
   every waiter whose condition now holds is done (with -EROFS for committed and data waiters when the log
   is offline). Calling it when nothing changed is harmless. */
void gr_partition_flushed(struct gr_partition *part);
/* The partition is gone (its topic deleted) or taken offline: every queued waiter is done with `err`
   (< 0). Later waits still follow their conditions (a deleted log reads -EROFS, storage/log.h). */
void gr_partition_fail(struct gr_partition *part, int err);

/* Prepares an idle waiter (zeroes its private part). */
void gr_partition_waiter_init(struct gr_partition_waiter *w, gr_partition_done_fn done, void *ctx);
/* Until committed: done once gr_partition_visible_offset(part) >= end_offset (every offset below it is
   visible: Kafka's "the high watermark passed the append"), or with -EROFS once the log is offline. `w` must
   be idle. */
void gr_partition_wait_committed(struct gr_partition *part, struct gr_partition_waiter *w,
                                 int64_t end_offset);
/* Until data arrives: done once gr_partition_visible_offset(part) > offset (a record at or past `offset`
   is visible; appends and visible-offset moves wake it), or with -EROFS once the log is offline. */
void gr_partition_wait_data(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset);
/* Until the log start offset is durable: done once the log-start-offset checkpoint `ticket`
   (gr_store_log_start_checkpoint_async) finished: err 0 when durable, its -errno when the write failed. */
void gr_partition_wait_log_start_durable(struct gr_partition *part, struct gr_partition_waiter *w,
                                         int64_t ticket);
/* Takes `w` off its partition: its done hook will not be called for this wait. Nothing when idle. */
void gr_partition_wait_cancel(struct gr_partition_waiter *w);
/* True while `w` is queued (its done hook not yet called). */
bool gr_partition_waiting(const struct gr_partition_waiter *w);

/* Waiters queued on the partition now (all kinds): for tests and debug logs. */
int gr_partition_waiter_count(const struct gr_partition *part);

/* ==================================================================================================== *
 * REPLICATION AND TRANSACTIONS: DECLARED, NOT IMPLEMENTED.
 * The operations replication and transactions will add, declared now so that the signatures above stay when
 * they come. Nothing defines them yet (and nothing may call them: a call would fail to link). Each names its
 * counterpart in Apache Kafka 4.x: core/src/main/scala/kafka/cluster/Partition.scala (Partition.*),
 * storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java (UnifiedLog.*),
 * core/src/main/scala/kafka/server/ReplicaManager.scala (ReplicaManager.*). With them the visible offset
 * (gr_partition_visible_offset) becomes the high watermark, and the named waits above keep their contracts:
 * committed waiters wake when the followers move it, data waiters also when the last stable offset moves.
 * ==================================================================================================== */

/* A partition's role on this broker. Today every partition is GR_PARTITION_LEADER at leader epoch 0. */
enum gr_partition_role {
    GR_PARTITION_LEADER =
        0, /* takes produces, serves fetches, drives the high watermark (Partition.isLeader) */
    GR_PARTITION_FOLLOWER = 1, /* fetches from the leader, appends as follower, takes the leader's HW */
};

/* A role change from the cluster's metadata (KRaft's PartitionRegistration as ReplicaManager.applyDelta
   hands it to Partition.makeLeader / makeFollower). The arrays are borrowed for the call. */
struct gr_partition_role_change {
    enum gr_partition_role role;
    int32_t leader_id;       /* the leader's broker id (node.id) */
    int32_t leader_epoch;    /* the new leader epoch; a change with an older epoch is refused */
    int32_t partition_epoch; /* the registration's version (Kafka's partitionEpoch), for AlterPartition */
    const int32_t *replicas; /* every assigned replica's broker id, leader included */
    int replica_count;
    const int32_t *isr; /* the in-sync replicas' broker ids (a subset of replicas) */
    int isr_count;
};

/* What the leader knows of one follower (Kafka's Replica / ReplicaState), as its fetches report it. */
struct gr_replica_state {
    int32_t broker_id;        /* the follower's broker id (node.id) */
    int64_t log_end_offset;   /* its fetch offset: every offset below it is in its log; -1 unknown */
    int64_t log_start_offset; /* its log start offset (the low watermark is their minimum); -1 unknown */
    int64_t
        last_caught_up_time_ms; /* wall clock, ms: the last fetch that reached the leader's log end offset
                                   of the time (ReplicaState.lastCaughtUpTimeMs; replica.lag.time.max.ms) */
    int64_t broker_epoch;       /* the follower's broker epoch at that fetch (KIP-903); -1 unknown */
    bool in_isr;                /* member of the ISR (Kafka's maximal ISR: pending additions included) */
};

/* One aborted transaction overlapping a fetch range (Kafka's AbortedTxn, an entry of the .txnindex file);
   Fetch answers producer_id and first_offset (FetchResponse AbortedTransaction). */
struct gr_aborted_txn {
    int64_t producer_id;        /* the transaction's producer */
    int64_t first_offset;       /* offset of its first record */
    int64_t last_offset;        /* offset of its ABORT marker */
    int64_t last_stable_offset; /* the last stable offset when the marker was written */
};

/* Appends record batches fetched from the leader (UnifiedLog.appendAsFollower(records, leaderEpoch), reached
   through Partition.appendRecordsToFollowerOrFutureReplica; Kafka's AppendOrigin.REPLICATION): base
   offsets, partitionLeaderEpoch and timestamps are kept as given (no offset assignment, no LogAppendTime
   rewrite, no recompression), each batch's CRC is checked (-EBADMSG: Kafka's CorruptRecordException),
   offsets must continue the log end offset (-ERANGE: UnexpectedAppendOffsetException /
   OffsetsOutOfOrderException), the leader-epoch cache learns each new epoch (UnifiedLog's
   maybeAssignEpochStartOffset), and producer state is rebuilt from the batches without sequence or epoch
   checks. `records` is one or more whole batches, `len` bytes; `leader_epoch` is the leader epoch the fetch
   was made under (refused with -ESTALE when it is not the partition's). Fills *res for the whole range
   (duplicate is false). Returns 0 or -errno (-EROFS offline, -ENOSPC, -EIO); then gr_partition_appended as
   gr_partition_append does. Followers only (-EPERM on a leader). */
int gr_partition_append_as_follower(struct gr_partition *part, const uint8_t *records, size_t len,
                                    int32_t leader_epoch, struct gr_append_result *res);

/* Truncates the log to `offset` (every record at or past it goes): Partition.truncateTo ->
   UnifiedLog.truncateTo(targetOffset), the follower's step after OffsetsForLeaderEpoch finds a divergence.
   Cuts the segments and their offset and time indexes, the leader-epoch cache
   (LeaderEpochFileCache.truncateFromEnd), producer state (rebuilt up to `offset`), and later the transaction
   index; the recovery point, the durable offset and the visible offset do not stay above it. Nothing when
   `offset` >= the log end offset. Data waiters past the new end keep waiting. Returns 0 or -errno (-EROFS
   offline, -EIO). */
int gr_partition_truncate_to(struct gr_partition *part, int64_t offset);
/* Drops the whole log and restarts it empty at `offset` (Partition.truncateFullyAndStartAt ->
   UnifiedLog.truncateFullyAndStartAt: a follower whose fetch offset is out of the leader's range). The log
   start, log end and visible offsets all become `offset`. Returns 0 or -errno. */
int gr_partition_truncate_fully_and_start_at(struct gr_partition *part, int64_t offset);

/* Raises the log start offset to the leader's (UnifiedLog.maybeIncrementLogStartOffset(newLogStartOffset,
   LogStartOffsetIncrementReason.LeaderOffsetIncremented), called by the follower's fetcher,
   ReplicaFetcherThread.processPartitionData): only ever up, never past the log end offset. Returns 1 when
   raised (the checkpoint follows as DeleteRecords' does), 0 when `leader_log_start_offset` is not above the
   current one, or -errno. */
int gr_partition_raise_log_start_offset(struct gr_partition *part, int64_t leader_log_start_offset);

/* Sets role, leader and leader epoch (Partition.makeLeader / Partition.makeFollower, as
   ReplicaManager.applyDelta calls them). Becoming leader: the leader-epoch cache gets the new epoch at the
   log end offset (UnifiedLog.maybeAssignEpochStartOffset), the followers' states are reset (their offsets
   unknown until they fetch), the high watermark is what the log had. Becoming follower: committed waiters
   are done with -EXDEV (Kafka answers delayed produces NOT_LEADER_OR_FOLLOWER), data waiters keep waiting for
   the leader's data. Returns 0, -ESTALE (an epoch older than the current one: ignored, as Kafka skips a
   stale state change) or -errno. */
int gr_partition_set_role(struct gr_partition *part, const struct gr_partition_role_change *change);
/* The current role (Partition.isLeader) and leader epoch (Partition.getLeaderEpoch). */
enum gr_partition_role gr_partition_role(const struct gr_partition *part);
int32_t gr_partition_leader_epoch(const struct gr_partition *part);

/* The visible offset as a function of the replicas' offsets: Kafka's high watermark rule
   (Partition.maybeIncrementLeaderHW): the minimum of the leader's log end offset and the log end offsets of
   the followers in the ISR (and of caught-up followers eligible to join it, within replica.lag.time.max.ms
   of `now_ms`), never below `current_hw` (UnifiedLog.maybeIncrementHighWatermark only moves it up), and
   `current_hw` unchanged while the ISR is smaller than min.insync.replicas (Partition.isUnderMinIsr).
   Pure: reads only its arguments. Returns the new high watermark. */
int64_t gr_partition_high_watermark_of(int64_t leader_log_end_offset, int64_t current_hw,
                                       const struct gr_replica_state *followers, int follower_count,
                                       int min_insync_replicas, int64_t now_ms,
                                       int64_t replica_lag_time_max_ms);
/* A follower's fetch reached the leader (Partition.updateFollowerFetchState): stores its state, may add it
   to the ISR (Partition.maybeExpandIsr, through an AlterPartition the server sends), recomputes the high
   watermark with gr_partition_high_watermark_of, and when it moved, does what gr_partition_flushed does for
   the waiters (committed and data waiters whose condition now holds are done). Leaders only (-EPERM).
   Returns 0 or -errno. */
int gr_partition_update_follower_fetch_state(struct gr_partition *part,
                                             const struct gr_replica_state *follower, int64_t now_ms);
/* The low watermark: the minimum log start offset over the leader and its live followers
   (Partition.lowWatermarkIfLeader): what "until the log start offset is durable" will wait for (DeleteRecords
   completes when it passes the requested offset). Returns the offset, -1 when not the leader. */
int64_t gr_partition_low_watermark(const struct gr_partition *part);

/* The last stable offset (UnifiedLog.lastStableOffset): the first unstable offset when it is below the high
   watermark, else the high watermark; what read_committed fetches read below and ListOffsets' latest answers
   for them. Equal to gr_partition_visible_offset when no transaction is open. */
int64_t gr_partition_last_stable_offset(struct gr_partition *part);
/* The first offset of the oldest open transaction (UnifiedLog.firstUnstableOffset), -1 when none is open. */
int64_t gr_partition_first_unstable_offset(const struct gr_partition *part);
/* The aborted transactions a read_committed fetch of [start_offset, upper_bound_offset) must report
   (UnifiedLog.collectAbortedTransactions(startOffset, upperBoundOffset), from the transaction indexes of the
   segments the range touches): each one whose range overlaps it, in index order, into out[0..cap).
   Returns how many there are (more than `cap`: only cap written; call again with room for all), or -errno
   (-EIO). Reads index files: the caller has made them resident first (the cold-read wait). */
int gr_partition_aborted_txns(struct gr_partition *part, int64_t start_offset, int64_t upper_bound_offset,
                              struct gr_aborted_txn *out, int cap);

#endif
