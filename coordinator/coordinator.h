/*
 * coordinator.h: the classic consumer-group coordinator (Kafka's GroupCoordinator for the "classic"
 * protocol: JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and the committed-offset store, as plain state and
 * functions. No sockets, no event loop, no disk: time comes from injected clocks, durability from an
 * injected append hook, and parked requests are opaque "waiters" the coordinator hands back through the
 * join_done/sync_done hooks. The server (server/handlers/join_group.c) binds the hooks to the libev loop,
 * to parked requests and to __consumer_offsets (coordinator/offsets_log.h).
 *
 * Semantics follow Kafka's GroupMetadataManager / ClassicGroup / OffsetMetadataManager (4.x):
 *   states        Empty -> PreparingRebalance -> CompletingRebalance -> Stable (-> PreparingRebalance ...)
 *   join          new dynamic members on JoinGroup v4+ get MEMBER_ID_REQUIRED and a pending id that expires
 *                 after the session timeout; the join phase ends when every member has rejoined (or at the
 *                 rebalance timeout: the largest member rebalance timeout; v0 uses the session timeout);
 *                 the first rebalance of an Empty group waits group.initial.rebalance.delay.ms, extended
 *                 while new members arrive, up to the rebalance timeout; the protocol is the one every
 *                 member supports that wins the members' votes (each votes its first supported choice)
 *   sync          the leader's assignments are kept byte for byte; a member it did not list gets an empty
 *                 assignment with error 0
 *   static        a known group.instance.id rejoining with an empty member id replaces the old member id
 *                 (which gets FENCED_INSTANCE_ID) and keeps generation and assignment when the group is
 *                 Stable and the selected protocol does not change
 *   fencing       ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS exactly as ClassicGroup
 *                 validateOffsetCommit / validateMember / the heartbeat and sync paths return them
 *   offsets       commits with generation -1 and no member create an Empty "simple" group; offsets of
 *                 empty groups expire after offsets.retention.minutes
 * Everything the coordinator changes that Kafka persists (group metadata after a completed sync or when
 * a group becomes empty, offsets, tombstones) is passed to hooks.append as __consumer_offsets records
 * (coordinator/records.h) before it is acknowledged; replay (gr_coord_replay) rebuilds the state at start.
 *
 * Invariants: a waiter is answered exactly once (through join_done / sync_done), possibly inside the call
 * that handed it over; after gr_coord_destroy no hook is called. Strings in results are borrowed and valid
 * only during the hook call or until the next coordinator call.
 * Read next: coordinator/records.h (formats), coordinator/offsets_log.h (storage binding).
 */
#ifndef GR_COORDINATOR_H
#define GR_COORDINATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/records.h"
#include "partition/partition.h"
#include "protocol/wire.h"

struct gr_coordinator;
struct gr_group;
struct gr_member;

enum gr_group_state {
    GR_GROUP_EMPTY = 0,
    GR_GROUP_PREPARING_REBALANCE,
    GR_GROUP_COMPLETING_REBALANCE,
    GR_GROUP_STABLE,
    GR_GROUP_DEAD,
};

/* Kafka's name of a state ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"). */
const char *gr_group_state_name(enum gr_group_state state);

struct gr_coord_config {                         /* Kafka config names in comments */
    int32_t min_session_timeout_ms;              /* group.min.session.timeout.ms (6000) */
    int32_t max_session_timeout_ms;              /* group.max.session.timeout.ms (1800000) */
    int32_t initial_rebalance_delay_ms;          /* group.initial.rebalance.delay.ms (3000) */
    int32_t max_size;                            /* group.max.size (INT32_MAX) */
    int32_t new_member_join_timeout_ms;          /* Kafka's fixed classic new-member join timeout (300000) */
    int64_t offsets_retention_ms;                /* offsets.retention.minutes * 60000 (7 days) */
    int64_t offsets_retention_check_interval_ms; /* offsets.retention.check.interval.ms (600000) */
    int32_t offset_metadata_max_bytes; /* offset.metadata.max.bytes (4096; compared with Java's length) */
    int32_t offsets_partitions;        /* partitions of __consumer_offsets (offsets.topic.num.partitions) */
    int32_t offsets_max_message_bytes; /* max.message.bytes of __consumer_offsets (message.max.bytes,
                                          1048588): a commit's records must fit one batch of this size */
    bool partitions_owned;             /* true (single node): every partition is coordinated from creation;
                                          false (cluster): none until loaded (gr_coord_partition_load_*) */
};

/* Fills `cfg` with Kafka's defaults (offsets_partitions 50, partitions_owned true). */
void gr_coord_config_defaults(struct gr_coord_config *cfg);

/* One member of a JoinGroup response (the leader gets all of them). Borrowed views. */
struct gr_join_member_out {
    struct gr_str member_id;
    struct gr_str group_instance_id; /* len -1: null */
    struct gr_bytes metadata;
};

/* A JoinGroup answer, before version shaping (the handler turns a null protocol name into "" below v7). */
struct gr_join_result {
    int16_t error_code;
    int32_t generation_id;       /* -1 on errors */
    struct gr_str protocol_type; /* len -1: null */
    struct gr_str protocol_name; /* len -1: null */
    struct gr_str leader;        /* "" when none */
    bool skip_assignment;
    struct gr_str member_id;
    const struct gr_join_member_out *members;
    int32_t member_count;
};

/* A SyncGroup answer. */
struct gr_sync_result {
    int16_t error_code;
    struct gr_str protocol_type; /* len -1: null */
    struct gr_str protocol_name; /* len -1: null */
    struct gr_bytes assignment;  /* empty (len 0) on errors */
};

/* What a transactional write (the transactional append (gr_coord_set_append_txn)) carries. */
enum gr_coord_txn_kind {
    GR_COORD_TXN_RECORDS = 0, /* offset commit records of an open transaction (TxnOffsetCommit) */
    GR_COORD_TXN_COMMIT = 1,  /* the COMMIT marker (control type 1) */
    GR_COORD_TXN_ABORT = 2,   /* the ABORT marker (control type 0) */
};

struct gr_coord_txn_write {
    enum gr_coord_txn_kind kind;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t coordinator_epoch; /* markers: the transaction coordinator's epoch (EndTxnMarker) */
};

struct gr_coord_hooks {
    void *ctx;
    /* Monotonic milliseconds, for timers. */
    int64_t (*mono_ms)(void *ctx);
    /* Wall-clock milliseconds, for commit and state timestamps written to __consumer_offsets. */
    int64_t (*wall_ms)(void *ctx);
    /* Appends `count` records to partition `partition` of __consumer_offsets in order. Returns 0 and the
       log end offset after them (they are durable once the partition's durable offset reaches it), or
       -errno (nothing appended). */
    int (*append)(void *ctx, int32_t partition, const struct gr_coord_record *recs, int count,
                  int64_t *end_offset);
    /* Answers a parked JoinGroup / SyncGroup (exactly once per waiter). */
    void (*join_done)(void *ctx, void *waiter, const struct gr_join_result *res);
    void (*sync_done)(void *ctx, void *waiter, const struct gr_sync_result *res);
    /* Optional: a timer deadline (monotonic ms) was set earlier than before; call gr_coord_tick then. */
    void (*timer_hint)(void *ctx, int64_t deadline_ms);
    /* Optional: queues `w` (embedded in the coordinator's memory, its done hook set) to wait until
       partition `partition` of __consumer_offsets is committed up to `end_offset` (an append's end):
       partition/partition.h gr_partition_wait_committed on that partition, so the done hook runs exactly
       once, at once when already committed, with -errno when it never will be (the partition went
       offline); the coordinator cancels it with gr_partition_wait_cancel when the write no longer
       matters. Returns 0, or -errno when it cannot wait (the done hook is then not called). NULL:
       everything appended counts as committed at once. The leader's SyncGroup assignment is propagated only
       once its record is committed (as Kafka propagates it), woken by the partition, never polled. */
    int (*wait_committed)(void *ctx, int32_t partition, int64_t end_offset, struct gr_partition_waiter *w);
};

/* A transactional write to partition `partition` of __consumer_offsets (KIP-98; Kafka's CoordinatorRuntime
 * writes through its partition writer with the producer's id and epoch). `w->kind` GR_COORD_TXN_RECORDS:
 * `count` records as one transactional batch (attributes bit 4, w->producer_id / producer_epoch, base
 * sequence -1), as hooks.append writes them otherwise; GR_COORD_TXN_COMMIT / _ABORT: the end-transaction
 * marker as a control batch (bits 4 and 5, recs NULL, count 0; protocol/txn_marker.h) carrying
 * w->coordinator_epoch. Returns 0 and the log end offset after the write, or -errno (nothing appended; the
 * partition layer's producer-epoch refusals come back this way). `ctx` is hooks.ctx. */
typedef int (*gr_coord_append_txn_fn)(void *ctx, int32_t partition, const struct gr_coord_txn_write *w,
                                      const struct gr_coord_record *recs, int count, int64_t *end_offset);

/* Creates an empty coordinator. Takes copies of `cfg` and `hooks`. Returns new (gr_coord_destroy), or NULL
 * when out of memory. */
struct gr_coordinator *gr_coord_create(const struct gr_coord_config *cfg, const struct gr_coord_hooks *hooks);
/* Returns borrowed: hooks.ctx as given to gr_coord_create. */
void *gr_coord_hooks_ctx(const struct gr_coordinator *c);
/* Sets the transactional append (a setter beside struct gr_coord_hooks, not a member of it: the hooks are
 * filled by positional initializers under -Wmissing-field-initializers, server/groups.c's among them, which
 * a new member would break). Unset (NULL): TxnOffsetCommit and gr_coord_txn_complete answer
 * UNKNOWN_SERVER_ERROR and write nothing. */
void gr_coord_set_append_txn(struct gr_coordinator *c, gr_coord_append_txn_fn fn);
/* Frees everything. Waiters still held are dropped without a hook call (the server frees them). */
void gr_coord_destroy(struct gr_coordinator *c);

/* ---- JoinGroup / SyncGroup ---- */

struct gr_join_protocol {
    struct gr_str name;
    struct gr_bytes metadata;
};

struct gr_join_params {
    struct gr_str group_id, member_id, group_instance_id; /* group_instance_id len -1: null */
    struct gr_str protocol_type, client_id, client_host, reason;
    int32_t session_timeout_ms, rebalance_timeout_ms; /* rebalance -1 (v0): the session timeout is used */
    const struct gr_join_protocol *protocols;
    int32_t protocol_count;
    int16_t api_version;
    void *waiter; /* non-NULL */
};

enum gr_coord_wait { GR_COORD_ANSWERED = 0, GR_COORD_PARKED = 1 };

/* JoinGroup. The answer goes to hooks->join_done(waiter): inside this call (returns GR_COORD_ANSWERED) or
 * later, when the join phase completes, the member expires or is fenced (returns GR_COORD_PARKED). */
enum gr_coord_wait gr_coord_join(struct gr_coordinator *c, const struct gr_join_params *p);

struct gr_sync_assignment {
    struct gr_str member_id;
    struct gr_bytes assignment;
};

struct gr_sync_params {
    struct gr_str group_id, member_id, group_instance_id; /* len -1: null */
    struct gr_str protocol_type, protocol_name;           /* len -1: null (absent before v5) */
    int32_t generation_id;
    const struct gr_sync_assignment *assignments;
    int32_t assignment_count;
    int16_t api_version;
    void *waiter;
};

/* SyncGroup; answers through hooks->sync_done as gr_coord_join does. */
enum gr_coord_wait gr_coord_sync(struct gr_coordinator *c, const struct gr_sync_params *p);

/* Heartbeat: returns the error code (0, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID,
 * REBALANCE_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID). */
int16_t gr_coord_heartbeat(struct gr_coordinator *c, struct gr_str group_id, struct gr_str member_id,
                           struct gr_str group_instance_id, int32_t generation_id);

struct gr_leave_member {
    struct gr_str member_id, group_instance_id, reason; /* in */
    int16_t error_code;                                 /* out */
};

/* LeaveGroup (v3+ batch; v0-2 pass one member with a null instance id). Fills each member's error and
 * returns the top-level error (INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE; an unknown group gives 0 and
 * UNKNOWN_MEMBER_ID for every member, as Kafka answers). */
int16_t gr_coord_leave(struct gr_coordinator *c, struct gr_str group_id, struct gr_leave_member *members,
                       int32_t count);

/* ---- offsets ---- */

struct gr_commit_partition {
    int32_t partition;      /* in */
    int64_t offset;         /* in */
    int32_t leader_epoch;   /* in, -1 none */
    struct gr_str metadata; /* in, len -1: null (stored as "") */
    int16_t error_code;     /* out */
};

struct gr_commit_topic {
    struct gr_str name;
    struct gr_commit_partition *partitions;
    int32_t count;
};

struct gr_commit_params {
    struct gr_str group_id, member_id, group_instance_id; /* len -1: null */
    int32_t generation_id;     /* -1: not a group member (simple consumer / admin) */
    int64_t retention_time_ms; /* -1: default (OffsetCommit v2-4 may set it) */
    int16_t api_version;
    struct gr_commit_topic *topics; /* topics and partitions the caller checked exist */
    int32_t topic_count;
};

/* OffsetCommit. Validates the group as Kafka does (unknown group: created for generation < 0, else
 * GROUP_ID_NOT_FOUND from v9 and ILLEGAL_GENERATION before), then appends one record per accepted
 * partition and applies them. Every partition's error_code is set (the group-level error when the
 * request is refused, OFFSET_METADATA_TOO_LARGE per partition, INVALID_COMMIT_OFFSET_SIZE on every
 * other partition when the records as one batch exceed cfg.offsets_max_message_bytes (nothing written),
 * or the append error mapped to NOT_COORDINATOR / UNKNOWN_SERVER_ERROR). When records were appended,
 * *wait_partition and *wait_end_offset say what must become durable before answering; else *wait_end_offset
 * is -1. */
void gr_coord_commit(struct gr_coordinator *c, const struct gr_commit_params *p, int32_t *wait_partition,
                     int64_t *wait_end_offset);

/* OffsetFetch: the committed offset of one partition: returns true and fills the outputs (metadata borrowed),
 * or false when none is committed or the group does not exist (Kafka then answers offset -1). */
bool gr_coord_offset_get(struct gr_coordinator *c, struct gr_str group_id, struct gr_str topic,
                         int32_t partition, int64_t *offset, int32_t *leader_epoch, struct gr_str *metadata);
/* Calls `fn` for every committed offset of a group, topic by topic (partitions ascending). */
void gr_coord_offsets_foreach(struct gr_coordinator *c, struct gr_str group_id,
                              void (*fn)(void *ctx, const char *topic, int32_t partition, int64_t offset,
                                         int32_t leader_epoch, struct gr_str metadata),
                              void *ctx);

/* ---- transactional offsets (KIP-98, KIP-447; coordinator/txn_offsets.c) ----
 * Offsets committed inside a transaction stay pending per producer id until the transaction's marker reaches
 * the group's __consumer_offsets partition (Kafka 4's OffsetMetadataManager.pendingTransactionalOffsets): a
 * COMMIT makes each the group's committed offset unless the committed one was written later in the log (a
 * larger record offset wins, replayEndTransactionMarker), an ABORT drops them. A tombstone of a partition
 * (OffsetDelete, a deleted topic, DeleteGroups) drops every producer's pending offset of it. */

struct gr_txn_commit_params {
    struct gr_str group_id, member_id, group_instance_id; /* group_instance_id len -1: null */
    int32_t generation_id;                                /* -1: not a group member (v0-2 carry none) */
    int64_t producer_id;
    int16_t producer_epoch;
    struct gr_commit_topic *topics; /* topics and partitions the caller checked exist */
    int32_t topic_count;
};

/* TxnOffsetCommit (Kafka's OffsetMetadataManager.commitTransactionalOffset): an empty group id gives
 * INVALID_GROUP_ID; the ownership check as gr_coord_check; an unknown group is created (simple, Empty) for
 * generation < 0, else ILLEGAL_GENERATION; then ClassicGroup.validateOffsetCommit with isTransactional:
 * COORDINATOR_NOT_AVAILABLE (Dead), FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION (KIP-447), no
 * REBALANCE_IN_PROGRESS and no member needed when no generation, member or instance id is given. Accepted
 * partitions are written through the transactional append (gr_coord_set_append_txn) as one transactional
 * batch (producer id/epoch, no expire timestamp) and held as pending offsets of the producer. Per-partition
 * errors as gr_coord_commit (OFFSET_METADATA_TOO_LARGE, INVALID_COMMIT_OFFSET_SIZE, mapped append errors).
 * *wait_partition / *wait_end_offset as gr_coord_commit: answer once the write is committed (-1: nothing
 * written). */
void gr_coord_txn_commit(struct gr_coordinator *c, const struct gr_txn_commit_params *p,
                         int32_t *wait_partition, int64_t *wait_end_offset);

/* Completes producer `producer_id`'s transaction on __consumer_offsets partition `partition` (Kafka's
 * GroupCoordinatorService.completeTransaction: the runtime writes the marker, then
 * replayEndTransactionMarker): writes the COMMIT / ABORT marker through the transactional append
 * (gr_coord_set_append_txn), then applies it (gr_coord_txn_marker_apply). Returns 0 with *wait_end_offset
 * (the marker is done once committed up to it), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the
 * partition is not OWNED, or the append error mapped as gr_coord_append_error (nothing changed,
 * *wait_end_offset -1). */
int16_t gr_coord_txn_complete(struct gr_coordinator *c, int32_t partition, int64_t producer_id,
                              int16_t producer_epoch, int32_t coordinator_epoch, bool commit,
                              int64_t *wait_end_offset);

/* Applies a marker already in the log (the load, or a marker path that wrote it itself): the pending
 * offsets of `producer_id` in the groups of `partition` (-1: every partition) become committed (COMMIT;
 * skipped where the committed offset's record offset is larger) or are dropped (ABORT). Returns the number
 * of pending offsets it ended. */
int32_t gr_coord_txn_marker_apply(struct gr_coordinator *c, int32_t partition, int64_t producer_id,
                                  bool commit);

/* Whether a transactional commit of group/topic/partition waits for its marker (Kafka's
 * hasPendingTransactionalOffsets; OffsetFetch with require_stable then answers UNSTABLE_OFFSET_COMMIT). */
bool gr_coord_offset_pending(struct gr_coordinator *c, struct gr_str group_id, struct gr_str topic,
                             int32_t partition);
/* OffsetFetch of one partition (OffsetMetadataManager.fetchOffsets): with `require_stable` (OffsetFetch
 * v7+, KIP-447) and a pending transactional commit of the partition, returns UNSTABLE_OFFSET_COMMIT with
 * offset -1, leader epoch -1, metadata ""; otherwise 0 with the last committed value (offset -1, epoch -1,
 * metadata "" when none; the group's existence is the caller's, as gr_coord_offset_get). */
int16_t gr_coord_offset_fetch(struct gr_coordinator *c, struct gr_str group_id, struct gr_str topic,
                              int32_t partition, bool require_stable, int64_t *offset, int32_t *leader_epoch,
                              struct gr_str *metadata);
/* Number of pending transactional offsets of a group (all producers), 0 when the group is unknown. */
int32_t gr_coord_txn_pending_count(struct gr_coordinator *c, struct gr_str group_id);

struct gr_offset_delete_partition {
    int32_t partition;  /* in */
    int16_t error_code; /* out */
};

struct gr_offset_delete_topic {
    struct gr_str name;
    struct gr_offset_delete_partition *partitions;
    int32_t count;
};

/* OffsetDelete. Returns the group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP for a non-empty group
 * that does not use the consumer protocol) or 0 with per-partition errors (GROUP_SUBSCRIBED_TO_TOPIC for a
 * topic the members subscribe to, or the append error); tombstones are appended for committed offsets. */
int16_t gr_coord_offset_delete(struct gr_coordinator *c, struct gr_str group_id,
                               struct gr_offset_delete_topic *topics, int32_t count);

/* A topic was deleted (DeleteTopics): every group's committed offsets of `topic` (NUL-terminated name) are
 * removed, with a tombstone appended to the group's __consumer_offsets partition first, as Kafka's
 * GroupCoordinatorService.onPartitionsDeleted does, so that a topic re-created under the same name is not
 * read from the old positions. A group whose append fails keeps its offsets (logged). Returns the number of
 * offsets removed. */
int32_t gr_coord_topic_deleted(struct gr_coordinator *c, const char *topic);

/* ---- administration ---- */

/* Number of groups, and group i (0 <= i < count, stable until the next group creation/deletion). */
int32_t gr_coord_group_count(const struct gr_coordinator *c);
struct gr_group *gr_coord_group_at(struct gr_coordinator *c, int32_t i);
/* The group named `group_id`, or NULL. */
struct gr_group *gr_coord_group_find(struct gr_coordinator *c, struct gr_str group_id);

/* Read-only views of a group (borrowed strings; protocol type/name NULL when none). */
const char *gr_group_id(const struct gr_group *grp);
enum gr_group_state gr_group_state(const struct gr_group *grp);
int32_t gr_group_generation(const struct gr_group *grp);
const char *gr_group_protocol_type(const struct gr_group *grp);
const char *gr_group_protocol_name(const struct gr_group *grp);
const char *gr_group_leader(const struct gr_group *grp);
int32_t gr_group_member_count(const struct gr_group *grp);
const struct gr_member *gr_group_member_at(const struct gr_group *grp, int32_t i);
const char *gr_member_id(const struct gr_member *m);
const char *gr_member_instance_id(const struct gr_member *m); /* NULL when dynamic */
const char *gr_member_client_id(const struct gr_member *m);
const char *gr_member_client_host(const struct gr_member *m);
/* The member's metadata for the group's selected protocol (len -1 when there is none). */
struct gr_bytes gr_member_metadata(const struct gr_member *m, const struct gr_group *grp);
struct gr_bytes gr_member_assignment(const struct gr_member *m);

/* DeleteGroups, one group: 0, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or an append error. Writes tombstones
 * for every offset and for the group metadata, then forgets the group. */
int16_t gr_coord_group_delete(struct gr_coordinator *c, struct gr_str group_id);

/* ---- timers ---- */

/* The earliest monotonic deadline of any timer (heartbeats, pending members, join/sync phases, the
 * offset-expiration check), INT64_MAX when none. */
int64_t gr_coord_next_deadline_ms(const struct gr_coordinator *c);
/* gr_coord_next_deadline_ms, which also becomes the hint: from now on a new deadline is reported through
 * hooks->timer_hint when it is earlier than the returned one. The server arms its one timer with this
 * whenever it re-arms on its own (after a tick, a partition loaded, an image change), so the hint always
 * equals what the timer is armed for; arming from gr_coord_next_deadline_ms alone left a stale, earlier
 * hint that kept a later new deadline from being reported (a group's initial rebalance then waited for an
 * unrelated event). */
int64_t gr_coord_rearm(struct gr_coordinator *c);
/* Runs every timer that is due at hooks->mono_ms() (may call join_done/sync_done/append). Returns the next
 * deadline, which becomes the hint as with gr_coord_rearm (arm the timer with it). */
int64_t gr_coord_tick(struct gr_coordinator *c);

/* ---- persistence ---- */

/* Applies one __consumer_offsets record during the load at start (value NULL: tombstone). Unknown key
 * versions are skipped. Returns 0, or -1 for bytes that do not parse (the record is skipped). The record
 * counts as non-transactional at record offset -1: gr_coord_replay_record is the full form. */
int gr_coord_replay(struct gr_coordinator *c, const uint8_t *key, size_t key_len, const uint8_t *value,
                    size_t value_len);
/* gr_coord_replay with the record's offset in the log and its batch's producer id when the batch is
 * transactional (-1 otherwise): an offset commit of a transactional batch becomes a pending offset of that
 * producer, completed by a later marker (gr_coord_txn_marker_apply); Kafka's OffsetMetadataManager.replay
 * (recordOffset, producerId). */
int gr_coord_replay_record(struct gr_coordinator *c, int64_t record_offset, int64_t producer_id,
                           const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len);
/* Ends the load: starts session timers of loaded members (Kafka's onLoaded) and rebalances groups above
 * group.max.size. */
void gr_coord_load_done(struct gr_coordinator *c);

/* Calls `emit` with the live record (latest value) of every key that belongs to `partition`: one group
 * metadata record per non-simple group, one offset record per committed offset (pending transactional
 * offsets are not emitted: a rewrite from a snapshot must wait until the partition has none, or keep the
 * open transactions' batches and markers as they are). Used to rewrite a
 * partition without its dead records (coordinator/offsets_log.c). Returns 0, or the first non-zero emit
 * result. */
int gr_coord_snapshot_partition(struct gr_coordinator *c, int32_t partition,
                                int (*emit)(void *ctx, const struct gr_coord_record *rec), void *ctx);
/* Number of live keys of `partition` (what a snapshot would write). */
int64_t gr_coord_live_records(const struct gr_coordinator *c, int32_t partition);

/* The __consumer_offsets partition of a group id. */
int32_t gr_coord_partition(const struct gr_coordinator *c, struct gr_str group_id);

/* The error a group write's answer carries for the error of its append or of its wait for the high
 * watermark (`write_error`, a Kafka error code; NONE stays NONE): Kafka 4's
 * CoordinatorOperationExceptionHelper.handleOperationException (OffsetCommit, SyncGroup, ...; the same table
 * as GroupMetadataManager.appendGroupMetadataErrorToResponseError for the SyncGroup assignment):
 * UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE;
 * NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
 * INVALID_FETCH_SIZE -> UNKNOWN_SERVER_ERROR; any other kept. (Kafka 4 appends group records with acks=1 and
 * waits for the high watermark, so min.insync.replicas never refuses them.) */
int16_t gr_coord_write_error(int16_t write_error);

/* ---- partition ownership (cluster mode; coordinator/ownership.c) ----
 * The coordinator serves only the groups of the __consumer_offsets partitions it owns (Kafka 4.x
 * GroupCoordinatorService.onElection / onResignation, CoordinatorRuntime.scheduleLoadOperation /
 * scheduleUnloadOperation). Each partition is NOT_OWNED, LOADING (its records are being replayed:
 * gr_coord_replay between load_begin and load_done) or OWNED. With cfg.partitions_owned (single node)
 * every partition starts OWNED and nothing below needs to be called. */
enum gr_coord_part_state { GR_COORD_PART_NOT_OWNED = 0, GR_COORD_PART_LOADING, GR_COORD_PART_OWNED };

/* The error a group request for `group_id` gets from this coordinator before anything else is checked:
 * 0 when its partition is OWNED (or the id is empty: the call then answers INVALID_GROUP_ID),
 * COORDINATOR_LOAD_IN_PROGRESS while LOADING, NOT_COORDINATOR when NOT_OWNED (Kafka's
 * CoordinatorRuntime: NotCoordinatorException / CoordinatorLoadInProgressException). Every group entry
 * point (join, sync, heartbeat, leave, commit, offset delete, group delete) checks it itself; OffsetFetch,
 * DescribeGroups and ListGroups callers check it (the lookups answer "none" for a group not OWNED). */
int16_t gr_coord_check(const struct gr_coordinator *c, struct gr_str group_id);
/* The state of partition `partition` (NOT_OWNED when out of range) and the coordinator epoch it was
 * loaded with (the partition's leader epoch; -1 when never loaded or with cfg.partitions_owned). */
enum gr_coord_part_state gr_coord_partition_state(const struct gr_coordinator *c, int32_t partition);
int32_t gr_coord_partition_epoch(const struct gr_coordinator *c, int32_t partition);
/* Starts loading `partition` at coordinator epoch `epoch`: whatever it held is unloaded first
 * (gr_coord_partition_unload), then it is LOADING; the caller replays the partition's records with
 * gr_coord_replay and ends with gr_coord_partition_load_done. Returns 0, or -EINVAL (out of range). */
int gr_coord_partition_load_begin(struct gr_coordinator *c, int32_t partition, int32_t epoch);
/* Ends the load of `partition` (Kafka's onLoaded for its groups: members' session timers start, groups over
 * group.max.size rebalance) and makes it OWNED. Returns the number of its groups, or -EINVAL when it was
 * not LOADING (unloaded meanwhile). */
int32_t gr_coord_partition_load_done(struct gr_coordinator *c, int32_t partition);
/* Drops every group of `partition` (GroupMetadataManager.removeGroupsForPartition / onUnloaded): parked
 * JoinGroup and SyncGroup requests are answered NOT_COORDINATOR through the hooks, timers go with the
 * groups, the pending assignment wait is cancelled; nothing is appended. The partition becomes NOT_OWNED.
 * Returns the number of groups dropped (0 when out of range). */
int32_t gr_coord_partition_unload(struct gr_coordinator *c, int32_t partition);
/* Changes the partition count groups are mapped with (the cluster's __consumer_offsets may have another
 * count than offsets.topic.num.partitions). Only while no group exists and no partition is LOADING or OWNED
 * under cfg.partitions_owned false: returns 0, -EBUSY otherwise, -EINVAL for a count outside
 * 1..GR_PARTITIONS_PER_TOPIC_MAX, -ENOMEM. */
int gr_coord_set_partition_count(struct gr_coordinator *c, int32_t partitions);

#endif
