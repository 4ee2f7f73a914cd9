/*
 * topic_writer.h: the one interface through which a broker changes topics (issue #19, "Topic changes"):
 * create a topic, delete one, add partitions, set its configs. The handlers of CreateTopics, Metadata
 * auto-creation, CreatePartitions, DeleteTopics, AlterConfigs and IncrementalAlterConfigs call it and never
 * know which implementation answers, so they have no "if (cluster)":
 *   - single node (gr_topic_writer_local_new): today's storage topic operations (storage/store.h
 *     gr_topic_op_*), one at a time in arrival order, file work on the I/O pool; the completion comes once
 *     the change is live in the store (and so in the image, through cluster/local.h);
 *   - cluster (gr_topic_writer_etcd_new, cluster/topic_writer_etcd.c): the topic record is written to etcd
 *     in one txn fenced by compares (the record's absence for a create, its mod_revision otherwise), and the
 *     completion waits until this broker's image shows the result (a leader for every new partition, or the
 *     topic gone), or the request's timeout passes (REQUEST_TIMED_OUT; the change itself stays made, as in
 *     Kafka).
 *
 * Contract (both implementations; network thread only): every call completes exactly once, through `cb`, on
 * the loop; it may complete before the call returns (a refusal found at once) and always completes, also
 * at shutdown (gr_topic_writer_free completes what is pending with UNKNOWN_SERVER_ERROR before it returns).
 * The result (error code and message, Kafka's) and everything it points to is borrowed for the callback's
 * duration. Arguments are copied before the call returns. Names, counts and config lists are bounded
 * (GR_PARTITIONS_PER_TOPIC_MAX, GR_CLUSTER_REPLICAS_MAX, GR_CLUSTER_TOPIC_CONFIGS_MAX and the config
 * name/value caps); a call over a bound completes with an error, never allocates without one.
 *
 * Read next: cluster/topic_writer_local.c, cluster/topic_writer_etcd.c, server/handlers/topic_ops.c (how a
 * request waits for its changes).
 */
#ifndef GR_CLUSTER_TOPIC_WRITER_H
#define GR_CLUSTER_TOPIC_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_topic;
struct gr_store;
struct gr_iopool;
struct gr_image;
struct gr_etcd;
struct gr_cluster_layout;
struct ev_loop;

/* Changes of the etcd writer talking to etcd at once (each holds one txn or range, so one connection); more
 * wait in submission order: a CreateTopics naming thousands of topics never opens thousands of connections.
 * Waiting for the image takes no slot. */
#define GR_TOPIC_WRITER_INFLIGHT_MAX 32
/* How long a Metadata auto-creation waits for the new partitions' leaders (Metadata has no timeout field:
 * the clients' default request.timeout.ms). */
#define GR_TOPIC_WRITER_AUTO_CREATE_WAIT_MS 30000
/* Bytes of a result message built by a writer (formatted ones; static ones may be longer). */
#define GR_TOPIC_WRITER_MSG_BYTES 256

/* The outcome of one change. error_code is Kafka's (0 = NONE); message is NULL with NONE, else a one-line
 * reason (borrowed). For a create and add-partitions: the topic's id and partition count once done. local
 * is this broker's storage topic when it holds the topic's partitions (always in single-node mode after a
 * create, add partitions or config change; NULL in cluster mode until the replica manager made it). */
struct gr_topic_change {
    int16_t error_code;
    const char *message;
    uint8_t topic_id[16];
    int32_t partition_count;
    int32_t replication_factor;
    struct gr_topic *local;
};

typedef void gr_topic_change_cb(void *ctx, const struct gr_topic_change *res);

/* A topic creation (CreateTopics' CreatableTopic, a Metadata auto-creation, the first group use creating
 * __consumer_offsets). Either partitions + replication_factor (-1: the broker default, resolved by the
 * caller before the call) or an explicit assignment (assignment non-NULL: partitions x assignment_rf node
 * ids, partition p's replicas at assignment[p * assignment_rf], the first the preferred leader). Configs:
 * config_count (name, value) pairs, names known and values checked by the caller (the topic policy).
 * validate_only: check everything a creation checks, write nothing, complete with NONE and the id the
 * topic would get. timeout_ms: the request's timeout (CreateTopics' timeout_ms; <= 0 answers once written,
 * without waiting for leaders). refuse_collision: refuse a name colliding with a live topic once '.' and '_'
 * are treated alike (Kafka's Topic.hasCollision). */
struct gr_topic_create_args {
    const char *name; /* NUL-terminated, checked by the caller (Kafka's Topic.validate) */
    int32_t partitions;
    int32_t replication_factor;
    const int32_t *assignment;
    int32_t assignment_rf;
    const char *const *config_keys;
    const char *const *config_values;
    int config_count;
    bool validate_only;
    bool refuse_collision;
    int64_t timeout_ms;
};

struct gr_topic_writer;

/* The implementation's entry points (see the wrappers below for each one's rules). */
struct gr_topic_writer_ops {
    void (*create)(struct gr_topic_writer *w, const struct gr_topic_create_args *a, gr_topic_change_cb *cb,
                   void *ctx);
    void (*remove)(struct gr_topic_writer *w, const uint8_t id[16], int64_t timeout_ms,
                   gr_topic_change_cb *cb, void *ctx);
    void (*add_partitions)(struct gr_topic_writer *w, const uint8_t id[16], int32_t new_total,
                           const int32_t *assignment, int32_t assignment_count, int32_t assignment_rf,
                           int64_t timeout_ms, gr_topic_change_cb *cb, void *ctx);
    void (*set_configs)(struct gr_topic_writer *w, const uint8_t id[16], const char *const *keys,
                        const char *const *values, int count, int64_t timeout_ms, gr_topic_change_cb *cb,
                        void *ctx);
    int16_t (*check_rf)(const struct gr_topic_writer *w, int32_t rf, char *msg, size_t cap);
    int (*pending)(const struct gr_topic_writer *w);
    void (*barrier)(struct gr_topic_writer *w, gr_topic_change_cb *cb, void *ctx);
    void (*free)(struct gr_topic_writer *w);
};

struct gr_topic_writer {
    const struct gr_topic_writer_ops *ops;
};

/* Creates a topic (args copied). Completes with NONE (res->topic_id, partition_count, local), or
 * TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION (a colliding name), INVALID_PARTITIONS, INVALID_CONFIG,
 * INVALID_REPLICATION_FACTOR (placement: Kafka's StripedReplicaPlacer messages, e.g. more replicas than
 * registered brokers), INVALID_REPLICA_ASSIGNMENT (a node
 * not a live broker, or named twice in a partition), REQUEST_TIMED_OUT (written, but the image
 * showed no leader for every partition within timeout_ms), KAFKA_STORAGE_ERROR (single node: the files) or
 * UNKNOWN_SERVER_ERROR. */
static inline void gr_topic_writer_create(struct gr_topic_writer *w, const struct gr_topic_create_args *a,
                                          gr_topic_change_cb *cb, void *ctx)
{
    w->ops->create(w, a, cb, ctx);
}
/* Deletes the topic with this 16-byte id (Kafka's DeleteTopics). Completes once it is gone (from the
 * store; cluster: from the image) with NONE, UNKNOWN_TOPIC_ID when it is not live (deleted meanwhile),
 * REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR or UNKNOWN_SERVER_ERROR. */
static inline void gr_topic_writer_delete(struct gr_topic_writer *w, const uint8_t id[16], int64_t timeout_ms,
                                          gr_topic_change_cb *cb, void *ctx)
{
    w->ops->remove(w, id, timeout_ms, cb, ctx);
}
/* Grows the topic with this id to new_total partitions (Kafka's CreatePartitions), the existing assignment
 * kept; assignment (NULL: placed) names assignment_count x assignment_rf node ids, one row per new partition
 * (a count other than new_total minus the current count, as the writer finds it, is
 * INVALID_REPLICA_ASSIGNMENT). Completes with
 * NONE, UNKNOWN_TOPIC_ID, INVALID_PARTITIONS (not an increase, or over GR_PARTITIONS_PER_TOPIC_MAX),
 * INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICATION_FACTOR, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR. */
static inline void gr_topic_writer_add_partitions(struct gr_topic_writer *w, const uint8_t id[16],
                                                  int32_t new_total, const int32_t *assignment,
                                                  int32_t assignment_count, int32_t assignment_rf,
                                                  int64_t timeout_ms, gr_topic_change_cb *cb, void *ctx)
{
    w->ops->add_partitions(w, id, new_total, assignment, assignment_count, assignment_rf, timeout_ms, cb,
                           ctx);
}
/* Replaces the topic's configs with `count` (key, value) pairs, checked by the caller (AlterConfigs and
 * IncrementalAlterConfigs compute the whole new set). Completes with NONE, UNKNOWN_TOPIC_OR_PARTITION (the
 * topic was deleted), INVALID_CONFIG, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR. */
static inline void gr_topic_writer_set_configs(struct gr_topic_writer *w, const uint8_t id[16],
                                               const char *const *keys, const char *const *values, int count,
                                               int64_t timeout_ms, gr_topic_change_cb *cb, void *ctx)
{
    w->ops->set_configs(w, id, keys, values, count, timeout_ms, cb, ctx);
}
/* Whether a replication factor (resolved: -1 already replaced by the default) can be served: returns NONE,
 * or INVALID_REPLICATION_FACTOR with a message in `msg` (`cap` bytes). Single node: anything but 1 (Kafka's
 * KRaft words for a one-broker cluster: "Unable to replicate the partition 3 time(s): The target replication
 * factor of 3 cannot be reached because only 1 broker(s) are registered."); cluster: below 1 or more than
 * GR_CLUSTER_REPLICAS_MAX. Whether enough brokers are
 * registered is placement's, at the create (Kafka's StripedReplicaPlacer). Called by CreateTopics where it
 * checks the request's layout, before the other checks (Kafka's order). */
static inline int16_t gr_topic_writer_check_rf(const struct gr_topic_writer *w, int32_t rf, char *msg,
                                               size_t cap)
{
    return w->ops->check_rf(w, rf, msg, cap);
}
/* Changes submitted and not completed. */
static inline int gr_topic_writer_pending(const struct gr_topic_writer *w)
{
    return w->ops->pending(w);
}
/* Completes (NONE) once every change submitted before it completed: a request that must see their results
 * before it checks anything (a CreateTopics pipelined after a DeleteTopics). */
static inline void gr_topic_writer_barrier(struct gr_topic_writer *w, gr_topic_change_cb *cb, void *ctx)
{
    w->ops->barrier(w, cb, ctx);
}
/* Frees the writer (NULL ignored); see the contract for what is pending. */
static inline void gr_topic_writer_free(struct gr_topic_writer *w)
{
    if (w) w->ops->free(w);
}

/* Returns new: the single-node writer over the store at *store with file work on the pool at *pool (NULL
 * runs it inline); both pointers are the broker's fields, borrowed and read at each call (a test may reopen
 * the store). NULL when out of memory. Its checks, messages and order are those of storage's topic
 * operations (storage/store.h gr_topic_op_*). */
struct gr_topic_writer *gr_topic_writer_local_new(struct gr_store *const *store,
                                                  struct gr_iopool *const *pool);

/* How the etcd writer is set up. Everything borrowed for the writer's life. */
struct gr_topic_writer_etcd_config {
    struct ev_loop *loop;
    struct gr_etcd *etcd;
    const struct gr_cluster_layout *layout; /* keys under <prefix>/<cluster id>/ */
    struct gr_image *image;                 /* live brokers (placement), topics, leaders (the waits) */
    uint64_t seed;                          /* placement's random start (0: from the clock) */
};
/* Returns new: the cluster-mode writer (cluster/topic_writer_etcd.c), or NULL when out of memory or the
 * image has no room for its observer (GR_IMAGE_OBSERVERS_MAX). It observes the image (one observer for
 * every waiting change) and needs the image's source (the etcd watch) to apply what it writes. */
struct gr_topic_writer *gr_topic_writer_etcd_new(const struct gr_topic_writer_etcd_config *cfg);
/* Times a writer made by gr_topic_writer_etcd_new found its compare stale and read the record again (tests
 * and logs). */
uint64_t gr_topic_writer_etcd_retries(const struct gr_topic_writer *w);
/* The most changes a writer made by gr_topic_writer_etcd_new had talking to etcd at once (tests). */
int gr_topic_writer_etcd_inflight_peak(const struct gr_topic_writer *w);

#endif
