/*
 * records.h: the key/value formats of the internal topic __consumer_offsets, written as Kafka's group
 * coordinator writes them so that Kafka's own tools (kafka-dump-log --offsets-decoder, the console
 * consumer's offsets formatter) read Gregor's files. Every key and value starts with an int16 schema
 * version; the rest is Kafka's classic (non-flexible) encoding: int16-length strings (-1 null), int32-length
 * bytes, int32-count arrays, big-endian integers. A null record value is a tombstone for its key.
 *
 * Keys (the version tells the record type):
 *   OffsetCommitKey v0/v1 (written as v1)     GroupMetadataKey v2
 *   OFFSET SIZE MEANING                        OFFSET SIZE MEANING
 *   0      2    version (1)                    0      2    version (2)
 *   2      2+g  group (string)                 2      2+g  group (string)
 *   ...    2+t  topic (string)
 *   ...    4    partition (int32)
 *
 * OffsetCommitValue, written as v3 (or v1 when the commit carried a retention time, as Kafka does):
 *   FIELD              v0  v1  v2  v3  v4(flexible)
 *   offset int64       x   x   x   x   x
 *   leaderEpoch int32              x   x        (-1 = none)
 *   metadata string    x   x   x   x   x
 *   commitTimestamp    x   x   x   x   x        (int64 ms, wall clock)
 *   expireTimestamp        x                    (int64 ms)
 *
 * GroupMetadataValue, written as v3:
 *   protocolType string, generation int32, protocol nullable string, leader nullable string,
 *   currentStateTimestamp int64 (v2+, -1 none), members array of:
 *     memberId string, groupInstanceId nullable string (v3+), clientId string, clientHost string,
 *     rebalanceTimeout int32 (v1+), sessionTimeout int32, subscription bytes, assignment bytes.
 *   v4 is the same in the flexible encoding (compact lengths, tagged-field sections).
 *
 * Also here: the partition of a group (Kafka: abs(groupId.hashCode()) % partitions, Java's String hash
 * over UTF-16 code units) and the topics of a consumer-protocol subscription (ConsumerProtocol v0 prefix).
 * Facts from Kafka's group-coordinator message definitions (OffsetCommitKey/Value, GroupMetadataKey/Value).
 * Read next: coordinator/coordinator.h.
 */
#ifndef GR_COORD_RECORDS_H
#define GR_COORD_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "protocol/wire.h"

#define GR_OFFSET_COMMIT_KEY_VERSION 1
#define GR_GROUP_METADATA_KEY_VERSION 2
#define GR_OFFSET_COMMIT_VALUE_VERSION 3
#define GR_OFFSET_COMMIT_VALUE_VERSION_EXPIRE 1
#define GR_GROUP_METADATA_VALUE_VERSION 3

/* A record for __consumer_offsets: owned key and value bytes; value NULL (len 0) is a tombstone. */
struct gr_coord_record {
    uint8_t *key;
    size_t key_len;
    uint8_t *value;
    size_t value_len;
};

/* Frees the key and value of `count` records (not the array). */
void gr_coord_records_free(struct gr_coord_record *recs, int count);

enum gr_coord_key_type { GR_COORD_KEY_UNKNOWN = 0, GR_COORD_KEY_OFFSET_COMMIT, GR_COORD_KEY_GROUP_METADATA };

struct gr_offset_commit_key {
    struct gr_str group, topic;
    int32_t partition;
};

struct gr_offset_commit_value {
    int64_t offset;
    int32_t leader_epoch;   /* -1 none */
    struct gr_str metadata; /* never null after decode ("" when absent) */
    int64_t commit_timestamp_ms;
    int64_t expire_timestamp_ms; /* -1 none (only version 1 carries one) */
};

struct gr_group_metadata_member {
    struct gr_str member_id, group_instance_id, client_id, client_host; /* group_instance_id len -1: null */
    int32_t rebalance_timeout_ms;                                       /* -1 when absent (v0) */
    int32_t session_timeout_ms;
    struct gr_bytes subscription, assignment;
};

struct gr_group_metadata_value {
    struct gr_str protocol_type; /* "" = none */
    int32_t generation;
    struct gr_str protocol, leader;           /* len -1: null */
    int64_t current_state_timestamp_ms;       /* -1 none */
    struct gr_group_metadata_member *members; /* in the decode arena */
    int32_t member_count;
};

/* Decodes a record key. Returns the key type (UNKNOWN for versions Gregor does not use, e.g. the new
 * consumer-group records, or for bytes that do not parse) and fills the matching struct; views borrow
 * `key`. */
enum gr_coord_key_type gr_coord_key_decode(const uint8_t *key, size_t len, struct gr_offset_commit_key *ok,
                                           struct gr_str *group);

/* Decodes an OffsetCommitValue of any version 0-4. Returns 0, or -1 when the bytes do not parse.
 * Views borrow `value`. */
int gr_offset_commit_value_decode(const uint8_t *value, size_t len, struct gr_offset_commit_value *out);

/* Decodes a GroupMetadataValue of any version 0-4; the members array comes from `arena`. Returns 0, or -1
 * when the bytes do not parse or the arena is exhausted. Views borrow `value`. */
int gr_group_metadata_value_decode(const uint8_t *value, size_t len, struct gr_arena *arena,
                                   struct gr_group_metadata_value *out);

/* Encoders: fill `rec` with newly allocated key/value bytes. Return 0 or -ENOMEM (rec untouched). */
int gr_offset_commit_record(struct gr_coord_record *rec, const char *group, const char *topic,
                            int32_t partition,
                            const struct gr_offset_commit_value *value); /* value NULL: tombstone */
int gr_group_metadata_record(struct gr_coord_record *rec, const char *group,
                             const struct gr_group_metadata_value *value); /* value NULL: tombstone */

/* Java's String.hashCode of the UTF-8 string `s` (decoded to UTF-16 code units; an invalid byte counts as
 * U+FFFD). */
int32_t gr_java_string_hash(struct gr_str s);
/* Java's String.length of the UTF-8 string `s` (UTF-16 code units). */
int32_t gr_java_string_length(struct gr_str s);
/* The __consumer_offsets partition of a group: Kafka's Utils.abs(groupId.hashCode()) % partitions
 * (abs(INT32_MIN) is 0). `partitions` >= 1. */
int32_t gr_coord_partition_for(struct gr_str group_id, int32_t partitions);

/* Calls `fn` for each topic of a consumer-protocol subscription (`protocol_type` "consumer": int16
 * version, then the v0 layout every version starts with: int32 count of int16-length topic names).
 * Returns 0, or -1 when the bytes do not parse (then the subscribed topics are unknown, as in Kafka). */
int gr_consumer_subscription_topics(struct gr_bytes metadata, void (*fn)(void *ctx, struct gr_str topic),
                                    void *ctx);

#endif
