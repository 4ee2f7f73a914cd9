/*
 * internal.h: the coordinator's private structures, shared by group.c (groups, members, the rebalance
 * state machine, timers) and offsets.c (committed offsets, expiration, snapshots).
 *
 * Ownership: the coordinator owns every group (a vector for iteration plus a chained hash index by id);
 * a group owns its members, pending member ids and committed offsets; a member owns its strings,
 * protocols and assignment. Waiters (parked requests) are borrowed and handed back exactly once.
 * Timers are deadlines in monotonic ms stored where they belong (member heartbeat, pending member,
 * group join/sync phase, the coordinator's expiration check); INT64_MAX means "not scheduled".
 * Read next: coordinator/group.c.
 */
#ifndef GR_COORD_INTERNAL_H
#define GR_COORD_INTERNAL_H

#include "coordinator/coordinator.h"

#define GR_NO_DEADLINE INT64_MAX

struct gr_member_protocol {
    char *name;
    uint8_t *metadata;
    int32_t metadata_len;
};

struct gr_member {
    char *member_id;
    char *group_instance_id; /* NULL: dynamic member */
    char *client_id, *client_host, *protocol_type;
    int32_t rebalance_timeout_ms, session_timeout_ms;
    struct gr_member_protocol *protocols;
    int32_t protocol_count;
    uint8_t *assignment; /* NULL and 0: empty */
    int32_t assignment_len;
    void *join_waiter; /* a parked JoinGroup (awaiting join) */
    void *sync_waiter; /* a parked SyncGroup (awaiting sync) */
    bool is_new;
    bool pending_sync;
    int64_t heartbeat_deadline_ms;
    uint8_t *next_assignment; /* the leader's assignment while its record becomes durable */
    int32_t next_assignment_len;
};

struct gr_pending_member {
    char *member_id;
    int64_t deadline_ms;
};

struct gr_offset_entry {
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch; /* -1 none */
    char *metadata;       /* never NULL */
    int64_t commit_timestamp_ms;
    int64_t expire_timestamp_ms; /* -1 none */
    int64_t record_offset;       /* offset of its record in __consumer_offsets (-1 unknown): a COMMIT marker
                                    materializes a pending offset only over an older record (Kafka's
                                    OffsetAndMetadata.recordOffset) */
    struct gr_commit_window *window; /* the last commits applied here (group_status.h), NULL none yet */
};

/* A transactional offset commit waiting for its producer's marker (txn_offsets.c). */
struct gr_txn_offset {
    int64_t producer_id;
    char *topic;
    struct gr_offset_entry e;
};

struct gr_offset_topic {
    char *name;
    struct gr_offset_entry *parts; /* ascending partition */
    int32_t count, cap;
};

enum gr_join_timer { GR_JOIN_TIMER_NONE = 0, GR_JOIN_TIMER_INITIAL, GR_JOIN_TIMER_NORMAL };

struct gr_group {
    char *group_id;
    int32_t partition; /* of __consumer_offsets */
    int32_t index;     /* in coordinator->groups */
    struct gr_group *hash_next;
    enum gr_group_state state, previous_state;
    int32_t generation_id;
    char *protocol_type, *protocol_name, *leader_id; /* NULL: none */
    int64_t state_timestamp_ms;                      /* wall ms of the last transition, -1 none */
    struct gr_member **members;                      /* join order */
    int32_t member_count, member_cap;
    struct gr_pending_member *pending;
    int32_t pending_count, pending_cap;
    int32_t awaiting_join_count;
    bool new_member_added;
    enum gr_join_timer join_timer;
    int64_t join_deadline_ms;
    int32_t initial_delay_ms, initial_remaining_ms;
    int64_t sync_deadline_ms;
    int32_t sync_generation;
    bool subscribed_known; /* Kafka's Optional<Set<String>> subscribedTopics is present */
    char **subscribed;
    int32_t subscribed_count, subscribed_cap;
    struct gr_offset_topic *topics;
    int32_t topic_count, topic_cap;
    struct gr_txn_offset *txn; /* pending transactional offsets, one per (producer, topic, partition) */
    int32_t txn_count, txn_cap;
    bool assignment_pending; /* the leader's assignment is written, not yet durable */
    int32_t assignment_generation;
    int64_t assignment_end_offset;
    struct gr_partition_waiter assignment_wait; /* until the assignment's record is committed */
    int64_t
        assignment_deadline_ms; /* the write's timeout (GR_COORD_WRITE_TIMEOUT_MS), GR_NO_DEADLINE: none */
    uint8_t *md_value;          /* last GroupMetadataValue written or replayed (for snapshots), NULL none */
    size_t md_value_len;
};

struct gr_coordinator {
    struct gr_coord_config cfg;
    struct gr_coord_hooks hooks;
    gr_coord_append_txn_fn append_txn; /* NULL: transactional writes refused */
    struct gr_group **groups;
    int32_t group_count, group_cap;
    struct gr_group **buckets;
    int32_t bucket_count;
    int64_t expiration_deadline_ms;
    int64_t deadline_hint;
    uint8_t *part_state;  /* cfg.offsets_partitions entries (enum gr_coord_part_state) */
    int32_t *part_epoch;  /* coordinator epoch per partition, -1 none */
    void *current_waiter; /* the waiter of the call in progress */
    bool current_answered;
    uint64_t rng;
    int64_t (*hw_fn)(void *ctx, const char *topic, int32_t partition); /* group_status.h, NULL unset */
    void *hw_ctx;
};

/* group.c */
int64_t gr_coord_now(struct gr_coordinator *c);
int64_t gr_coord_wall(struct gr_coordinator *c);
/* How long a group write may wait for the high watermark (Kafka 4's runtime: the write operation's timeout,
   offsets.commit.timeout.ms, default 5 s; OffsetCommit's handler keeps the same bound): the SyncGroup
   assignment then fails with REQUEST_TIMED_OUT, answered COORDINATOR_NOT_AVAILABLE (gr_coord_write_error). */
#define GR_COORD_WRITE_TIMEOUT_MS 5000
void gr_coord_set_deadline(struct gr_coordinator *c, int64_t *slot, int64_t deadline_ms);
struct gr_group *gr_coord_group_create(struct gr_coordinator *c, struct gr_str group_id);
void gr_coord_group_remove(struct gr_coordinator *c, struct gr_group *grp);
struct gr_member *gr_group_member_find(const struct gr_group *grp, const char *member_id, int32_t len);
bool gr_group_uses_consumer_protocol(const struct gr_group *grp);
bool gr_group_subscribed_to(const struct gr_group *grp, const char *topic, int32_t len);
/* OffsetCommit in Stable/PreparingRebalance keeps the member's session alive (rescheduleHeartbeat). */
void gr_coord_touch_member(struct gr_coordinator *c, struct gr_group *grp, struct gr_str member_id);
/* Maps an append -errno (hooks.append, or a committed wait's done hook) to the error Kafka's coordinator
   answers: -EMSGSIZE as MESSAGE_TOO_LARGE, -ETIMEDOUT as REQUEST_TIMED_OUT, anything else (-EROFS, -EIO,
   -EXDEV: a follower now, -ENOENT: not owned) as NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR, then
   gr_coord_write_error (UNKNOWN_SERVER_ERROR, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR). */
int16_t gr_coord_append_error(int rc);
char *gr_coord_strndup(const char *p, int32_t len);
/* Answers the group's parked JoinGroup/SyncGroup requests with `err` and forgets the group (no append). */
void gr_coord_group_drop(struct gr_coordinator *c, struct gr_group *grp, int16_t err);
/* Starts the session timers of the group's loaded members and rebalances it when over group.max.size. */
void gr_coord_group_loaded(struct gr_coordinator *c, struct gr_group *grp);

/* ownership.c */
/* Allocates the partition states for cfg.offsets_partitions (all OWNED under cfg.partitions_owned). Returns
 * 0 or -ENOMEM. */
int gr_coord_ownership_init(struct gr_coordinator *c);
/* Whether a group of `partition` is served now (OWNED). */
bool gr_coord_partition_owned(const struct gr_coordinator *c, int32_t partition);

/* offsets.c */
void gr_offsets_free(struct gr_group *grp);
int32_t gr_offsets_count(const struct gr_group *grp);
/* OffsetMetadataManager.replay: producer_id -1 for a non-transactional batch. */
int gr_offsets_replay(struct gr_coordinator *c, const struct gr_offset_commit_key *key, const uint8_t *value,
                      size_t value_len, int64_t record_offset, int64_t producer_id);
void gr_offsets_expire(struct gr_coordinator *c);
/* Offsets.put / get / remove on the committed store; put copies `v` and sets the record offset. */
void gr_offsets_put(struct gr_group *grp, struct gr_str topic, int32_t partition,
                    const struct gr_offset_commit_value *v, int64_t record_offset);
const struct gr_offset_entry *gr_offsets_find(const struct gr_group *grp, struct gr_str topic,
                                              int32_t partition);
bool gr_offsets_remove(struct gr_group *grp, struct gr_str topic, int32_t partition);
/* True when `k` records as one batch at `now_ms` exceed the offsets topic's max.message.bytes. */
bool gr_offsets_too_large(const struct gr_coordinator *c, const struct gr_coord_record *recs, int32_t k,
                          int64_t now_ms);

/* group_status.c */
/* A commit of topic/partition was just applied to `grp` (not a replay): adds it to the entry's window with
   the lag at commit (hw_fn). Out of memory: the commit is left out of the window (logged). */
void gr_coord_status_note(struct gr_coordinator *c, struct gr_group *grp, struct gr_str topic,
                          int32_t partition);

/* txn_offsets.c */
void gr_txn_offsets_free(struct gr_group *grp);
/* Holds `v` as producer `producer_id`'s pending offset of topic/partition (replacing its earlier one). */
void gr_txn_offsets_put(struct gr_group *grp, int64_t producer_id, struct gr_str topic, int32_t partition,
                        const struct gr_offset_commit_value *v, int64_t record_offset);
/* Whether any producer has a pending offset of topic/partition (openTransactions.contains). */
bool gr_txn_offsets_has(const struct gr_group *grp, struct gr_str topic, int32_t partition);
/* Drops every producer's pending offset of topic/partition (a tombstone's replay). */
void gr_txn_offsets_drop(struct gr_group *grp, struct gr_str topic, int32_t partition);

#endif
