/*
 * image.h: the metadata image, what this broker knows about the cluster (Kafka's MetadataImage, reduced to
 * what Gregor serves): the cluster id, this node's id, the controller, the brokers (rack, broker epoch,
 * fenced and shutting-down flags, listeners), and the topics (name, id, internal flag, and per partition
 * the leader, leader epoch, replicas, ISR and offline replicas), each topic linked to the local storage
 * topic when this broker holds its partitions.
 *
 * It is plain memory: no I/O, no event loop, no sockets. Two sources feed it through the mutators below and
 * nothing else: the single-node source (cluster/local.h, from the log directory) and, later, the etcd
 * watch. Handlers read it (through server/route.h for partitions), so they answer the same way in both
 * modes. The module is named "image" because gr_metadata_* is the Metadata API's generated codec.
 *
 * Invariants: topic names are unique and topic ids are unique (putting a name under a new id replaces the
 * old topic: a deleted and re-created topic); lookups by name and by id are O(1) (hash chains, grown with
 * the count); topic_at lists topics in bytewise name order and broker_at brokers in node id order; every
 * count and string is bounded by common/limits.h (GR_IMAGE_*, GR_LISTENERS_MAX, ...), and a mutator given
 * more returns -EINVAL or -ENOSPC with the image unchanged. Pointers returned (topics, partitions, brokers)
 * are borrowed: a topic stays valid until it is removed or replaced, a partition until its topic grows or
 * goes, a broker until the next broker mutation. Network thread only (one writer, no locks).
 *
 * Read next: cluster/local.h (the single-node source), server/route.h (how requests use it).
 */
#ifndef GR_CLUSTER_IMAGE_H
#define GR_CLUSTER_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

struct gr_topic; /* storage/store.h: the local topic, only linked, never touched here */

/* One listener of a broker: its name (PLAINTEXT, INTERNAL...) and the host and port clients that came in
 * through a listener of that name are told to use (Kafka's advertised.listeners entry). */
struct gr_image_listener {
    char name[GR_LISTENER_NAME_BYTES_MAX + 1];
    char host[GR_HOST_BYTES_MAX + 1];
    int32_t port; /* 0..65535 */
};

/* One broker as registered (Kafka's BrokerRegistration): node id, rack (has_rack false = none), broker
 * epoch (the registration's etcd create_revision; the single-node source uses 0), and its listeners. */
struct gr_image_broker {
    int32_t node_id; /* >= 0 */
    int64_t epoch;
    bool fenced;        /* not live: left out of Metadata and DescribeCluster (unless asked for fenced) */
    bool shutting_down; /* live, but on its way out (controlled shutdown) */
    bool log_dir_new;   /* its registration says its process started on a new or emptied log dir */
    bool has_rack;
    char rack[GR_RACK_BYTES_MAX + 1];
    int listener_count; /* 0..GR_LISTENERS_MAX */
    struct gr_image_listener listeners[GR_LISTENERS_MAX];
};

/* The state of one partition (Kafka's PartitionRegistration): leader (-1: none, the partition is offline),
 * leader epoch, and three node lists: replicas (the first is the preferred leader), ISR and offline replicas,
 * each at most GR_IMAGE_REPLICAS_MAX. The lists share one array: replicas, then ISR, then offline. */
struct gr_image_partition {
    int32_t leader;
    int32_t leader_epoch;
    int64_t partition_epoch; /* the state's version: its etcd key's mod_revision (0: no state written yet, and
                                always 0 in single-node mode); the controller compares it in its txns */
    int16_t replica_count, isr_count, offline_count;
    int16_t adding_count, removing_count; /* a reassignment (KIP-455) in progress: both subsets of replicas
                                             (cluster/values.h gr_cluster_assignment), stored after offline */
    int32_t *nodes;                       /* inline_nodes, or heap when the five lists need more */
    int32_t inline_nodes[3];              /* one replica in the ISR: no allocation */
};

/* A partition state given to gr_image_set_partition (borrowed arrays, copied). */
struct gr_image_partition_state {
    int32_t leader;
    int32_t leader_epoch;
    int64_t partition_epoch; /* see struct gr_image_partition */
    const int32_t *replicas, *isr, *offline;
    int32_t replica_count, isr_count, offline_count;
    const int32_t *adding, *removing; /* a reassignment in progress (NULL / 0: none) */
    int32_t adding_count, removing_count;
};

/* One topic-level config of a topic (its own value, not a broker default), both strings owned by the image.
 */
struct gr_image_config {
    char *name;
    char *value;
};

/* One topic. */
struct gr_image_topic {
    char name[GR_TOPIC_NAME_BYTES_MAX + 1];
    int32_t name_len;
    uint8_t id[16];
    bool internal; /* Metadata's is_internal */
    int32_t partition_count;
    struct gr_image_partition *parts; /* partition_count entries */
    struct gr_topic *local;           /* this broker's storage topic, NULL when it holds none of them */
    int32_t config_count;             /* 0..GR_CLUSTER_TOPIC_CONFIGS_MAX (gr_image_set_topic_configs) */
    struct gr_image_config *configs;  /* sorted by name (bytewise), unique names; NULL when none */
    int64_t record_revision;          /* the topic record's etcd mod_revision, set by the source after
                                         gr_image_put_topic (0 in single-node mode): what a topic change
                                         compares in its txn */
    /* private: hash chains */
    uint32_t name_hash, id_hash;
    struct gr_image_topic *next_by_name, *next_by_id;
};

struct gr_image {
    char cluster_id[GR_CLUSTER_ID_BYTES_MAX + 1];
    int32_t node_id;          /* this broker's node.id */
    int32_t controller_id;    /* -1 when unknown */
    int64_t controller_epoch; /* the controller key's etcd create_revision (0: none known / single node) */
    int64_t revision; /* the etcd revision the image reflects (0 in single-node mode), set by the source */
    bool self_fenced; /* cluster mode: this broker has evidence its lease is gone (cluster/member.h) and leads
                         nothing until it has registered again; server/route.c answers NOT_LEADER_OR_FOLLOWER
                         for every partition meanwhile. Always false in single-node mode. */
    /* Finalized features (KIP-584; ApiVersions v3+): the transaction.version level (KIP-890, issue #25) and
       FinalizedFeaturesEpoch, the features key's mod_revision in a cluster (cluster/feed.c), the log
       directory's gregor-features file's epoch on one node (cluster/local.h gr_image_local_features); -1:
       not known (a cluster created before the key existed: the broker's gregor.transaction.version). */
    int16_t transaction_version;
    int64_t features_epoch;
    bool loading; /* a snapshot is being fed (gr_feed_snapshot_begin .. gr_feed_commit, cluster/feed.h): the
                     content is partial, so nothing may act on what is missing from it (cluster/replicas.c
                     deletes no local data meanwhile). */
    /* private */
    struct gr_image_broker *brokers; /* sorted by node id */
    int32_t broker_count, broker_cap;
    struct gr_image_topic **topics; /* sorted by name */
    int32_t topic_count, topic_cap;
    struct gr_image_topic **by_name, **by_id; /* bucket_count chains each */
    uint32_t bucket_count;                    /* power of two, >= topic_count */
    int64_t partition_total;
    struct {
        void (*fn)(void *ctx, struct gr_image *img);
        void *ctx;
    } observers[GR_IMAGE_OBSERVERS_MAX];
    int observer_count;
};

/* Returns new: an empty image for node `node_id` (no brokers, no topics, controller -1, cluster id ""), or
 * NULL when out of memory. Freed with gr_image_free (NULL ignored). */
struct gr_image *gr_image_new(int32_t node_id);
void gr_image_free(struct gr_image *img);

/* Sets the cluster id (copied; 1..GR_CLUSTER_ID_BYTES_MAX bytes). Returns 0 or -EINVAL. */
int gr_image_set_cluster_id(struct gr_image *img, const char *id);
/* Observers: who must act when the image changes (the controller, requests waiting for a topic's leaders,
 * local replica management). gr_image_observe adds `fn` (called with `ctx` and the image), returning 0 or
 * -ENOSPC (GR_IMAGE_OBSERVERS_MAX already); gr_image_unobserve removes the pair (nothing when absent). A
 * source calls gr_image_changed once after applying a batch of changes (a watch response, a snapshot, a
 * topic operation), never in the middle of one: every observer then runs once, in the order added, and may
 * read the image but not mutate it. Observers are long-lived modules, not requests (a module keeps its own
 * waiters); one may remove itself while it runs, and an observer removed by another during a pass still
 * runs in that pass. */
int gr_image_observe(struct gr_image *img, void (*fn)(void *ctx, struct gr_image *img), void *ctx);
void gr_image_unobserve(struct gr_image *img, void (*fn)(void *ctx, struct gr_image *img), void *ctx);
void gr_image_changed(struct gr_image *img);

/* Sets the controller's node id (-1: none known). DescribeCluster and Metadata report it. */
void gr_image_set_controller(struct gr_image *img, int32_t node_id);

/* Adds or replaces (same node id) broker `br` (copied). Returns 0, -EINVAL (node id < 0, listener count out
 * of 0..GR_LISTENERS_MAX, a name, host or rack without its NUL in its array, an empty listener name, a port
 * out of 0..65535, two listeners with one name), -ENOSPC (GR_IMAGE_BROKERS_MAX brokers already), -ENOMEM. */
int gr_image_set_broker(struct gr_image *img, const struct gr_image_broker *br);
/* Removes broker `node_id`; returns whether it was there. */
bool gr_image_remove_broker(struct gr_image *img, int32_t node_id);
/* Returns borrowed: broker `node_id`, NULL when unknown. O(log brokers). */
const struct gr_image_broker *gr_image_broker(const struct gr_image *img, int32_t node_id);
/* Brokers, in node id order: count, and number i (0 <= i < count; borrowed). */
int32_t gr_image_broker_count(const struct gr_image *img);
const struct gr_image_broker *gr_image_broker_at(const struct gr_image *img, int32_t i);
/* Brokers a new topic's replicas may be placed on (cluster/topic_writer_etcd.c's placement: registered, not
 * fenced, not shutting down): the internal topics' creation (__consumer_offsets, __transaction_state) is
 * tried again when this count changes, as Kafka retries when the cluster grows to the replication factor. */
int32_t gr_image_usable_broker_count(const struct gr_image *img);
/* Returns borrowed: the listener of `br` named `name` (`len` bytes, not NUL-terminated), NULL when it has
 * none of that name (Kafka: the broker is left out of Metadata, its partitions get LISTENER_NOT_FOUND). */
const struct gr_image_listener *gr_image_broker_listener(const struct gr_image_broker *br, const char *name,
                                                         size_t len);

/* Adds a topic, or updates the one with this id: name (`name_len` bytes, 1..GR_TOPIC_NAME_BYTES_MAX), 16-byte
 * id, internal flag, partition count (1..GR_PARTITIONS_PER_TOPIC_MAX; an existing topic may only grow, as
 * CreatePartitions does: new partitions start with no leader, epoch -1 and no replicas) and the local
 * storage topic (may be NULL). A live topic of the same name under another id is removed first (the name
 * was deleted and re-created). Returns 0 and *out (borrowed; out may be NULL), -EINVAL (bad name or count,
 * a shrink, the id known under another name, the all-zero id), -ENOSPC (GR_IMAGE_TOPICS_MAX topics or
 * GR_IMAGE_PARTITIONS_MAX partitions exceeded), -ENOMEM; on error nothing changed. */
int gr_image_put_topic(struct gr_image *img, const char *name, size_t name_len, const uint8_t id[16],
                       bool internal, int32_t partitions, struct gr_topic *local,
                       struct gr_image_topic **out);
/* Removes the topic with this id (its pointers die); returns whether it was there. */
bool gr_image_remove_topic(struct gr_image *img, const uint8_t id[16]);
/* Sets partition `partition` of `t` to `st` (arrays copied). Returns 0, -EINVAL (partition out of range,
 * a count out of 0..GR_IMAGE_REPLICAS_MAX, a node id < 0, a leader < -1) or -ENOMEM; nothing changed on
 * error. */
int gr_image_set_partition(struct gr_image *img, struct gr_image_topic *t, int32_t partition,
                           const struct gr_image_partition_state *st);

/* Replaces the topic-level configs of `t` with `count` (name, value) pairs (copied; in any order): what every
 * broker answers DescribeConfigs with, also one holding none of the topic's partitions (the single-node
 * source copies the store's; the etcd source the topic record's). An update of the topic (same id) keeps
 * them; a topic re-created under a new id starts with none. Returns 0, -EINVAL (count outside
 * 0..GR_CLUSTER_TOPIC_CONFIGS_MAX, a NULL or empty name, a name over GR_CLUSTER_CONFIG_NAME_BYTES_MAX or a
 * value over GR_CLUSTER_CONFIG_VALUE_BYTES_MAX bytes, a name given twice) or -ENOMEM; nothing changed on
 * error. */
int gr_image_set_topic_configs(struct gr_image *img, struct gr_image_topic *t, const char *const *names,
                               const char *const *values, int32_t count);
/* Returns borrowed: the value of topic-level config `name` of `t`, NULL when the topic has none of its own.
 * O(log configs). */
const char *gr_image_topic_config(const struct gr_image_topic *t, const char *name);
/* The topic's min.insync.replicas (Kafka's topic config, LogConfig): its own value when a valid
 * integer >= 1, else `broker_default` (the broker's min.insync.replicas). */
int32_t gr_image_topic_min_isr(const struct gr_image_topic *t, int32_t broker_default);

/* Returns borrowed: the topic named `name` (`len` bytes), NULL when unknown. One hash and one compare. */
struct gr_image_topic *gr_image_topic_find(const struct gr_image *img, const char *name, size_t len);
/* Returns borrowed: the topic with 16-byte id `id`, NULL when unknown. */
struct gr_image_topic *gr_image_topic_find_id(const struct gr_image *img, const uint8_t id[16]);
/* Topics, in bytewise name order: count, and number i (borrowed). */
int32_t gr_image_topic_count(const struct gr_image *img);
struct gr_image_topic *gr_image_topic_at(const struct gr_image *img, int32_t i);
/* Partitions held by every topic together. */
int64_t gr_image_partition_total(const struct gr_image *img);

/* Returns borrowed: partition `p` of `t`, NULL when out of range. */
static inline const struct gr_image_partition *gr_image_partition(const struct gr_image_topic *t, int32_t p)
{
    return p >= 0 && p < t->partition_count ? &t->parts[p] : NULL;
}
/* The three node lists of a partition (borrowed). */
static inline const int32_t *gr_image_replicas(const struct gr_image_partition *p)
{
    return p->nodes;
}
static inline const int32_t *gr_image_isr(const struct gr_image_partition *p)
{
    return p->nodes + p->replica_count;
}
static inline const int32_t *gr_image_offline(const struct gr_image_partition *p)
{
    return p->nodes + p->replica_count + p->isr_count;
}
/* A reassignment's replicas being added and removed (borrowed; counts adding_count / removing_count). */
static inline const int32_t *gr_image_adding(const struct gr_image_partition *p)
{
    return p->nodes + p->replica_count + p->isr_count + p->offline_count;
}
static inline const int32_t *gr_image_removing(const struct gr_image_partition *p)
{
    return gr_image_adding(p) + p->adding_count;
}
/* Whether a reassignment of p is in progress (Kafka's
 * PartitionReassignmentReplicas.isReassignmentInProgress). */
static inline bool gr_image_reassigning(const struct gr_image_partition *p)
{
    return p->adding_count > 0 || p->removing_count > 0;
}

#endif
