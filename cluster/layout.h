/*
 * layout.h: the etcd key layout of a Gregor cluster (issue #19): builders for every key and a parser that
 * classifies a key seen in a watch event. Pure and I/O-free. Every key lives under the cluster's root
 * `<prefix>/<cluster id>/` except `<prefix>/cluster_id`, which holds the id itself:
 *
 *   KEY (under <prefix>/<cluster id>/)   VALUE (cluster/values.h)   REVISIONS, WRITERS
 *   features                              features                   mod_revision = FinalizedFeaturesEpoch
 *   controller                            controller record          lease-bound; create_revision =
 *                                                                    controller epoch; CAS on absence
 *   brokers/<node id>                     broker registration        lease-bound; create_revision = broker
 *                                                                    epoch; CAS on absence
 *   topics/<topic name>                   topic record (id,          written by the broker that received the
 *                                         assignment, configs)       change: absence (create) or mod_revision
 *   partitions/<topic id>/<partition>     partition state            the controller; the leader for an ISR
 *                                                                    change (same leader epoch); CAS on
 *                                                                    mod_revision = partition epoch
 *   producer_ids                          producer id block counter  CAS on mod_revision (absent: first
 * block)
 *
 * Invariants: a node id and a partition index are canonical decimals (no sign, no leading zero) within
 * 0..INT32_MAX and 0..GR_PARTITIONS_PER_TOPIC_MAX-1; a topic name is Kafka's (1..249 bytes of
 * [a-zA-Z0-9._-], not "." or ".."); a topic id and the cluster id are Kafka's Uuid text (22 base64url
 * characters, canonical); the prefix is absolute, has no trailing slash, no empty, "." or ".." segment, only
 * [a-zA-Z0-9._-/] and at most GR_CLUSTER_PREFIX_BYTES_MAX bytes. So every key fits GR_CLUSTER_KEY_BYTES_MAX
 * and a builder never truncates. Partition state is keyed by topic id, not name: a topic deleted and created
 * again under the same name never meets its predecessor's state. README "Cluster metadata in etcd" has the
 * same table with the reasons. Read next: cluster/values.h (the values), cluster/placement.h.
 */
#ifndef GR_CLUSTER_LAYOUT_H
#define GR_CLUSTER_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"
#include "protocol/wire.h" /* struct gr_uuid */

/* Text of a Kafka Uuid (base64url, no padding) and a buffer for it. */
#define GR_UUID_TEXT_BYTES 22
/* A buffer that holds any key of the layout plus its NUL. */
#define GR_CLUSTER_KEY_BUF (GR_CLUSTER_KEY_BYTES_MAX + 1)

/* The cluster's root, "<prefix>/<cluster id>/", built once (gr_cluster_layout_init) and borrowed by the
 * key builders and the parser. */
struct gr_cluster_layout {
    char prefix[GR_CLUSTER_PREFIX_BYTES_MAX + 1];
    size_t prefix_len;
    char root[GR_CLUSTER_PREFIX_BYTES_MAX + GR_UUID_TEXT_BYTES + 3]; /* "<prefix>/<cluster id>/" */
    size_t root_len;
};

/* What a key of the layout names. */
enum gr_cluster_key_kind {
    GR_CLUSTER_KEY_FEATURES = 1,
    GR_CLUSTER_KEY_CONTROLLER,
    GR_CLUSTER_KEY_BROKER,       /* node_id */
    GR_CLUSTER_KEY_TOPIC,        /* topic, topic_len */
    GR_CLUSTER_KEY_PARTITION,    /* topic_id, partition */
    GR_CLUSTER_KEY_PRODUCER_IDS, /* the producer id block counter */
};

/* A parsed key (gr_cluster_key_parse); only the fields its kind names are set. */
struct gr_cluster_key {
    enum gr_cluster_key_kind kind;
    int32_t node_id;
    char topic[GR_TOPIC_NAME_BYTES_MAX + 1]; /* NUL-terminated */
    size_t topic_len;
    struct gr_uuid topic_id;
    int32_t partition;
};

/* Checks gregor.metadata.etcd.prefix (rules in the opening comment). Returns 0, or -EINVAL with a one-line
 * reason in `err` (at least 160 bytes; e.g. "must start with '/'"). */
int gr_cluster_prefix_check(const char *prefix, char *err, size_t err_cap);
/* Checks a Kafka topic name: 1..249 bytes of [a-zA-Z0-9._-], not "." or ".." (Kafka's Topic.validate).
 * Returns 0 or -EINVAL. */
int gr_cluster_topic_name_check(const char *name, size_t len);
/* Checks a cluster id as Gregor writes it in meta.properties (22 canonical base64url characters, Kafka's
 * Uuid text). Returns 0 or -EINVAL. */
int gr_cluster_id_check(const char *id, size_t len);

/* Builds `<prefix>/cluster_id` into `out` (GR_CLUSTER_KEY_BUF bytes). Returns its length, or -EINVAL for a
 * prefix gr_cluster_prefix_check refuses. */
int gr_cluster_key_cluster_id(const char *prefix, char *out);
/* Fills `lay` for `prefix` and `cluster_id`. Returns 0 or -EINVAL (either refused by its check). */
int gr_cluster_layout_init(struct gr_cluster_layout *lay, const char *prefix, const char *cluster_id);

/* Key builders: each writes a NUL-terminated key into `out` (GR_CLUSTER_KEY_BUF bytes) and returns its
 * length, or -EINVAL for an argument outside the rules above (negative node id, bad topic name, partition
 * outside 0..GR_PARTITIONS_PER_TOPIC_MAX-1). */
int gr_cluster_key_features(const struct gr_cluster_layout *lay, char *out);
int gr_cluster_key_controller(const struct gr_cluster_layout *lay, char *out);
int gr_cluster_key_producer_ids(const struct gr_cluster_layout *lay, char *out);
int gr_cluster_key_broker(const struct gr_cluster_layout *lay, int32_t node_id, char *out);
int gr_cluster_key_topic(const struct gr_cluster_layout *lay, const char *topic, size_t topic_len, char *out);
int gr_cluster_key_partition(const struct gr_cluster_layout *lay, struct gr_uuid topic_id, int32_t partition,
                             char *out);

/* Prefixes for ranges, watches and range deletes, each ending in '/': the whole cluster (the root; one
 * watch covers every key above), every broker registration, every topic record, and every partition state
 * of one topic (deleted with its topic in one txn). Same returns as the key builders. */
int gr_cluster_prefix_root(const struct gr_cluster_layout *lay, char *out);
int gr_cluster_prefix_brokers(const struct gr_cluster_layout *lay, char *out);
int gr_cluster_prefix_topics(const struct gr_cluster_layout *lay, char *out);
int gr_cluster_prefix_partitions(const struct gr_cluster_layout *lay, struct gr_uuid topic_id, char *out);
/* etcd's range_end for "every key starting with `prefix`" (RangeRequest.range_end, the etcd v3 API):
 * `prefix` with its last byte incremented. Every layout prefix ends in '/', so this is '/' -> '0'. Writes
 * `len` bytes plus a NUL into `out` (at least len + 1 bytes); returns len, or -EINVAL for an empty prefix
 * or one whose last byte is 0xff. */
int gr_cluster_range_end(const char *prefix, size_t len, char *out);

/* A SCRAM user's key segment (the key is `<root>security/scram/<segment>`, server/security_etcd.h): the
 * name's bytes [A-Za-z0-9._-] as they are, every other byte (a '/', '%', control byte, space, each byte of
 * a non-ASCII UTF-8 character) as '%' and two upper-case hex digits, so the segment is one key level and
 * the mapping is one-to-one. Writes the segment and a NUL into `out` (`cap` bytes; 3 * len + 1 always
 * fits) and returns its length, or -EINVAL for an empty name or one that does not fit. */
int gr_cluster_scram_escape(const char *name, size_t len, char *out, size_t cap);
/* The inverse: decodes `seg` (`len` bytes) into `out` (`cap` bytes, no NUL added) and returns the name's
 * length, or -EINVAL for an empty segment, a '%' not followed by two upper-case hex digits, a byte that
 * would have been escaped standing bare, an escaped byte that needs none (not canonical: two segments
 * never name one user), or a name over `cap`. */
int gr_cluster_scram_unescape(const char *seg, size_t len, char *out, size_t cap);

/* Classifies `key` (`len` bytes, as a watch event or a range response carries it, not NUL-terminated) of
 * the layout `lay`. Returns 0 with `out` filled; -EINVAL when the key is not under the root or is malformed
 * under a known kind (a node id with a sign or a leading zero or out of range, an invalid topic name or
 * topic id, an extra or missing segment); -ENOENT for a well-formed key of an unknown kind (a later
 * version's key: callers ignore it, as decoders ignore unknown fields). */
int gr_cluster_key_parse(const struct gr_cluster_layout *lay, const char *key, size_t len,
                         struct gr_cluster_key *out);

/* Kafka's Uuid text: 16 bytes as 22 base64url characters, no padding, NUL-terminated (`out` 23 bytes), and
 * back (0, or -EINVAL for anything but 22 canonical characters). */
void gr_cluster_uuid_format(struct gr_uuid id, char *out);
int gr_cluster_uuid_parse(const char *text, size_t len, struct gr_uuid *out);

#endif
