/*
 * values.h: the JSON values stored under the cluster's etcd keys (cluster/layout.h), encoded and decoded
 * with jansson. Pure and I/O-free.
 *
 * Every value is one JSON object with a "version" field (1 today). Decoders are strict and bounded: the
 * value's byte length is checked against its kind's cap before parsing; the text must be UTF-8 without NUL
 * characters, with no duplicate object key; every required field must be present with the right JSON type
 * (an integer field refuses 1.0, "1" and 1e0) and within its range; arrays are counted against their cap
 * before anything is allocated. Unknown fields are ignored (forward compatibility: a later Gregor may add
 * fields, an older one reads the value as before); a version above 1 is refused (an incompatible change
 * bumps it). Encoders check the same rules before writing, so a value Gregor writes is always one it reads
 * back, and refuse with the same texts.
 *
 * Errors: functions return 0, -EINVAL (malformed or refused input, with a one-line reason in `err`, which
 * holds GR_CLUSTER_ERR_BYTES), -EMSGSIZE (a value over its byte cap) or -ENOMEM. A reason names the kind
 * and the field: "topic record: partitions[3]: replica 2 appears twice".
 *
 *   KIND                  FIELDS (required unless marked optional)
 *   cluster id            cluster_id: 22-char Kafka Uuid text
 *   broker registration   node_id 0..INT32_MAX; listeners: 1..8 of {name, host, port 1..65535}, names
 *                         unique; rack: string or null (optional, null); shutting_down: bool;
 *                         log_dir_new: bool (optional, false; written only when true)
 *   controller record     node_id; broker_epoch >= 1 (its registration's create_revision)
 *   topic record          topic_id: Uuid text, not zero; partitions: 1..GR_PARTITIONS_PER_TOPIC_MAX arrays
 *                         of 1..GR_CLUSTER_REPLICAS_MAX distinct node ids (the assignment; the first is the
 *                         preferred leader); configs: object of config name -> string (optional, empty)
 *   partition state       leader -1 (none) or a node id, in isr when >= 0; leader_epoch 0..INT32_MAX; isr:
 *                         0..GR_CLUSTER_REPLICAS_MAX distinct node ids; controller_epoch >= 1 (the writer's)
 *   producer id counter   next_producer_id 0..INT64_MAX - block size (the next block's first id); broker_id,
 *                         broker_epoch of the last taker (informational)
 *   features              features: object of name -> level 1..INT16_MAX, at most GR_CLUSTER_FEATURES_MAX
 *
 * Read next: cluster/placement.h.
 */
#ifndef GR_CLUSTER_VALUES_H
#define GR_CLUSTER_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/layout.h"
#include "common/limits.h"

/* Bytes of an error reason, NUL included. */
#define GR_CLUSTER_ERR_BYTES 256
/* The value format version this Gregor writes and the highest it reads. */
#define GR_CLUSTER_VALUE_VERSION 1

/* <prefix>/cluster_id. */
struct gr_cluster_id_value {
    char cluster_id[GR_UUID_TEXT_BYTES + 1];
};

/* One listener of a registration: its name and the address advertised on it (advertised.listeners). */
struct gr_cluster_listener {
    char name[GR_CLUSTER_LISTENER_NAME_BYTES_MAX + 1];
    char host[GR_CLUSTER_HOST_BYTES_MAX + 1];
    int32_t port;
};

/* brokers/<node id>: Kafka's BrokerRegistration (stage 1's part of it). The broker epoch is the key's
 * create_revision, not a field. */
struct gr_cluster_broker {
    int32_t node_id;
    int listener_count;
    struct gr_cluster_listener listeners[GR_CLUSTER_LISTENERS_MAX];
    bool has_rack; /* broker.rack set */
    char rack[GR_CLUSTER_RACK_BYTES_MAX + 1];
    bool shutting_down; /* set by a broker that received SIGTERM, before it revokes its lease */
    bool log_dir_new;   /* the first registration of a process started on a log dir without meta.properties
                           (new or emptied): it may lack what this node's replicas held before, so it is not
                           elected as the last ISR member back (cluster/controller.h); JSON "log_dir_new",
                           optional, false */
};

/* controller: who holds it. The controller epoch is the key's create_revision. */
struct gr_cluster_controller {
    int32_t node_id;
    int64_t broker_epoch;
};

/* One partition's replica assignment in a topic record. While a reassignment runs
 * (AlterPartitionReassignments, KIP-455) `replicas` is the union of the current and the target assignment
 * (the target first, then the replicas being removed: Kafka's PartitionReassignmentReplicas), `adding` the
 * target's replicas not in the old assignment and `removing` the old ones not in the target; both are subsets
 * of `replicas`, disjoint, and empty when no reassignment runs. Stored under the record's optional
 * "reassigning" object. */
struct gr_cluster_assignment {
    int32_t replica_count;
    int32_t replicas[GR_CLUSTER_REPLICAS_MAX];
    int32_t adding_count, removing_count;
    int32_t adding[GR_CLUSTER_REPLICAS_MAX];
    int32_t removing[GR_CLUSTER_REPLICAS_MAX];
};

/* One topic config, both strings owned by the record (malloc). */
struct gr_cluster_config {
    char *name;
    char *value;
};

/* topics/<name>: the topic record. Owns its arrays (gr_cluster_topic_free). */
struct gr_cluster_topic {
    struct gr_uuid topic_id;
    int32_t partition_count;
    struct gr_cluster_assignment *partitions; /* partition_count entries, by partition index */
    int32_t config_count;
    struct gr_cluster_config *configs;
};

/* partitions/<topic id>/<partition>: the partition state. The partition epoch is the key's mod_revision. */
struct gr_cluster_partition {
    int32_t leader; /* -1: none (offline) */
    int32_t leader_epoch;
    int32_t isr_count;
    int32_t isr[GR_CLUSTER_REPLICAS_MAX];
    int64_t controller_epoch; /* the controller key's create_revision of the controller that wrote it */
};

/* producer_ids: the block counter (Kafka's ProducerIdsRecord). */
struct gr_cluster_producer_ids {
    int64_t next_producer_id;
    int32_t broker_id;
    int64_t broker_epoch;
};

/* features: finalized feature levels (Kafka's FeatureLevelRecord set; empty in stage 1). */
struct gr_cluster_feature {
    char name[GR_CLUSTER_FEATURE_NAME_BYTES_MAX + 1];
    int16_t level;
};
struct gr_cluster_features {
    int count;
    struct gr_cluster_feature features[GR_CLUSTER_FEATURES_MAX];
};

/* Encoders: each validates `v` as its decoder would and writes compact JSON into *out (malloc'd, owned by
 * the caller, NUL-terminated) and its length into *len. Returns 0, -EINVAL (reason in err), -EMSGSIZE (over
 * the kind's byte cap) or -ENOMEM. */
int gr_cluster_id_encode(const struct gr_cluster_id_value *v, char **out, size_t *len, char *err);
int gr_cluster_broker_encode(const struct gr_cluster_broker *v, char **out, size_t *len, char *err);
int gr_cluster_controller_encode(const struct gr_cluster_controller *v, char **out, size_t *len, char *err);
int gr_cluster_topic_encode(const struct gr_cluster_topic *v, char **out, size_t *len, char *err);
int gr_cluster_partition_encode(const struct gr_cluster_partition *v, char **out, size_t *len, char *err);
int gr_cluster_producer_ids_encode(const struct gr_cluster_producer_ids *v, char **out, size_t *len,
                                   char *err);
int gr_cluster_features_encode(const struct gr_cluster_features *v, char **out, size_t *len, char *err);

/* Decoders: parse `len` bytes of `text` (a value as etcd returns it, not NUL-terminated) into `v`. Returns
 * 0, -EMSGSIZE (longer than the kind's cap: GR_CLUSTER_TOPIC_VALUE_BYTES_MAX for a topic record,
 * GR_CLUSTER_SMALL_VALUE_BYTES_MAX otherwise), -EINVAL (reason in err) or -ENOMEM. On failure `v` holds
 * nothing to free. */
int gr_cluster_id_decode(const char *text, size_t len, struct gr_cluster_id_value *v, char *err);
int gr_cluster_broker_decode(const char *text, size_t len, struct gr_cluster_broker *v, char *err);
int gr_cluster_controller_decode(const char *text, size_t len, struct gr_cluster_controller *v, char *err);
/* Allocates the record's arrays: free them with gr_cluster_topic_free. */
int gr_cluster_topic_decode(const char *text, size_t len, struct gr_cluster_topic *v, char *err);
int gr_cluster_partition_decode(const char *text, size_t len, struct gr_cluster_partition *v, char *err);
int gr_cluster_producer_ids_decode(const char *text, size_t len, struct gr_cluster_producer_ids *v,
                                   char *err);
int gr_cluster_features_decode(const char *text, size_t len, struct gr_cluster_features *v, char *err);

/* Frees what a decoded (or caller-built with malloc) topic record owns and zeroes it; NULL-safe. */
void gr_cluster_topic_free(struct gr_cluster_topic *v);

/* The producer id counter after a broker takes the block starting at `cur->next_producer_id` (an absent
 * key reads as 0, Kafka's first block): `next` gets next_producer_id + GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE and
 * the taker's id and epoch. Returns 0, or -ERANGE when the id space is used up (Kafka's
 * UNKNOWN_SERVER_ERROR "Exhausted all producerIds"). */
int gr_cluster_producer_ids_take(const struct gr_cluster_producer_ids *cur, int32_t broker_id,
                                 int64_t broker_epoch, struct gr_cluster_producer_ids *next);

#endif
