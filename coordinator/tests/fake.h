/*
 * fake.h: a test environment for the coordinator: a fake clock (monotonic and wall, moved by hand), an
 * in-memory __consumer_offsets (every appended record kept in order, with failure injection) and waiters
 * that record the answer they get, so tests drive JoinGroup/SyncGroup sequences without sockets.
 * Read next: coordinator/tests/test_group.c.
 */
#ifndef GR_COORD_TEST_FAKE_H
#define GR_COORD_TEST_FAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/coordinator.h"

#define FAKE_MEMBERS_MAX 16

struct fake_rec {
    int32_t partition;
    uint8_t *key;
    size_t key_len;
    uint8_t *value; /* NULL: tombstone */
    size_t value_len;
    int64_t offset;      /* in its partition */
    int64_t producer_id; /* -1: not transactional */
    int16_t producer_epoch;
    int marker; /* 0: a record; GR_COORD_TXN_COMMIT / _ABORT: a marker (key and value NULL) */
};

struct fake_env {
    int64_t mono_ms, wall_ms;
    struct fake_rec *recs;
    int rec_count, rec_cap;
    int fail_append; /* a -errno returned by every append while non-zero */
    int64_t end_offsets[64];
    int64_t hint_ms;
    int not_durable; /* while non-zero the wait_committed hook keeps its waiter (positive: fake_committed
                        completes it) or completes it at once with this error (negative) */
    struct gr_partition_waiter *commit_waiter; /* the waiter kept while not_durable > 0 */
    int txn_appends;                           /* calls of the transactional append */
};

/* What a JoinGroup waiter was answered (deep copies). */
struct fake_join {
    int answers;
    int16_t error;
    int32_t generation;
    char *protocol_type, *protocol_name; /* NULL: null */
    char *leader, *member_id;
    bool skip_assignment;
    int member_count;
    char *members[FAKE_MEMBERS_MAX];
    char *member_instance[FAKE_MEMBERS_MAX];
    char *member_meta[FAKE_MEMBERS_MAX]; /* metadata bytes, NUL-terminated copy */
    int32_t member_meta_len[FAKE_MEMBERS_MAX];
};

struct fake_sync {
    int answers;
    int16_t error;
    char *protocol_type, *protocol_name;
    char *assignment; /* as a C string */
    int32_t assignment_len;
};

/* A coordinator on `env` with `cfg` (defaults when NULL; offsets_partitions 4). */
struct gr_coordinator *fake_coord(struct fake_env *env, const struct gr_coord_config *cfg);
void fake_env_free(struct fake_env *env);
void fake_join_reset(struct fake_join *j);
void fake_sync_reset(struct fake_sync *s);

/* Moves both clocks forward and runs due timers. */
void fake_advance(struct gr_coordinator *c, struct fake_env *env, int64_t ms);

/* JoinGroup with one protocol (name `proto`, metadata `meta` as text) of type "consumer".
 * instance NULL: dynamic. Returns the gr_coord_wait. */
enum gr_coord_wait fake_join(struct gr_coordinator *c, const char *group, const char *member,
                             const char *instance, int16_t version, int32_t session_ms, int32_t rebalance_ms,
                             const char *proto, const char *meta, struct fake_join *out);
/* JoinGroup with `n` protocols (names[i], metas[i]) and protocol type `type`. */
enum gr_coord_wait fake_join_protocols(struct gr_coordinator *c, const char *group, const char *member,
                                       const char *type, int16_t version, int32_t session_ms, int n,
                                       const char *const *names, const char *const *metas,
                                       struct fake_join *out);
/* JoinGroup v5 of a dynamic consumer with protocol `proto` and binary metadata. */
enum gr_coord_wait fake_join_bytes(struct gr_coordinator *c, const char *group, const char *member,
                                   const char *proto, const uint8_t *meta, int32_t meta_len,
                                   struct fake_join *out);
/* SyncGroup v3 (no protocol fields); `n` assignments member_ids[i] -> assigns[i] (text). */
enum gr_coord_wait fake_sync(struct gr_coordinator *c, const char *group, const char *member,
                             const char *instance, int32_t generation, int n, const char *const *member_ids,
                             const char *const *assigns, struct fake_sync *out);

/* A consumer-protocol subscription (version 0) for `n` topics; returns the byte length; `out` has room
 * for 256 bytes. */
int fake_subscription(uint8_t *out, int n, const char *const *topics);

/* Number of records appended so far for `group` with key type `type`, tombstones or not. */
int fake_count_records(const struct fake_env *env, enum gr_coord_key_type type, bool tombstones);
/* Replays every appended record into `c` with its offset and producer id, markers through
   gr_coord_txn_marker_apply (then gr_coord_load_done). */
void fake_replay_all(const struct fake_env *env, struct gr_coordinator *c);

/* Completes the waiter the wait_committed hook kept (not_durable > 0) with `err`, as a partition's flush
   completion would; nothing when none is kept. */
void fake_committed(struct fake_env *env, int err);

#endif
