/*
 * topic_config.c: the rows of the topic config table; see topic_config.h. Invariant: sorted by name, exactly
 * Kafka 4.4.0's non-internal LogConfig keys (server/tests/test_topic_configs.c checks them against Kafka's).
 */
#include "storage/topic_config.h"

#include <stddef.h>
#include <string.h>

#define I64MAX_S "9223372036854775807"
#define NOMIN INT64_MIN
#define NOMAX INT64_MAX
#define HOURS_MS 3600000
#define MINUTES_MS 60000
/* clang-format off */
#define SYN1(n, d) {{n, 1, d}} /* one broker synonym with the same unit */
#define NOSYN {{NULL, 0, NULL}}      /* no broker synonym */
/* name, type, default, min, max, choices, doc, broker synonyms (Kafka 4.4.0 LogConfig and ServerTopicConfigSynonyms;
 * the docs are Gregor's own). */
static const struct gr_tcfg_def defs[] = {
    {"cleanup.policy", GR_CFGT_LIST, "delete", 0, 0, "compact, delete",
     "How old segments are cleaned up: delete removes them by age or size, compact keeps the last record per key; both may be listed.",
     SYN1("log.cleanup.policy", "delete")},
    {"compression.gzip.level", GR_CFGT_INT, "-1", -1, 9, NULL,
     "Level used when the broker itself compresses with gzip (1-9, -1 for the codec default).",
     SYN1("compression.gzip.level", "-1")},
    {"compression.lz4.level", GR_CFGT_INT, "9", 1, 17, NULL,
     "Level used when the broker itself compresses with lz4.",
     SYN1("compression.lz4.level", "9")},
    {"compression.type", GR_CFGT_STRING, "producer", 0, 0, "uncompressed, zstd, lz4, snappy, gzip, producer",
     "Codec of stored batches; producer keeps the producer's codec (Gregor: producer only, it never recompresses).",
     SYN1("compression.type", "producer")},
    {"compression.zstd.level", GR_CFGT_INT, "3", -131072, 22, NULL,
     "Level used when the broker itself compresses with zstd.",
     SYN1("compression.zstd.level", "3")},
    {"delete.retention.ms", GR_CFGT_LONG, "86400000", 0, NOMAX, NULL,
     "How long delete markers (tombstones) survive compaction, in ms.",
     SYN1("log.cleaner.delete.retention.ms", "86400000")},
    {"errors.deadletterqueue.group.enable", GR_CFGT_BOOLEAN, "false", 0, 0, NULL,
     "Whether share groups may use the topic as a dead-letter queue (Kafka 4.4; Gregor: accepted, no effect, it has no share groups).",
     NOSYN},
    {"file.delete.delay.ms", GR_CFGT_LONG, "60000", 0, NOMAX, NULL,
     "Wait before a deleted segment's files are removed from disk, in ms (Gregor: accepted, no effect; readers keep a deleted segment's descriptor, so its files are unlinked at once).",
     SYN1("log.segment.delete.delay.ms", "60000")},
    {"flush.messages", GR_CFGT_LONG, I64MAX_S, 1, NOMAX, NULL,
     "Records appended to a partition before it is fsynced.",
     SYN1("log.flush.interval.messages", I64MAX_S)},
    {"flush.ms", GR_CFGT_LONG, I64MAX_S, 0, NOMAX, NULL,
     "Longest time appended data stays unsynced, in ms.",
     {{"log.flush.interval.ms", 1, NULL}, {"log.flush.scheduler.interval.ms", 1, I64MAX_S}}},
    {"follower.replication.throttled.replicas", GR_CFGT_LIST, "", 0, 0, NULL,
     "Replicas whose follower-side replication is throttled: * or partition:broker pairs (no effect on one node).",
     NOSYN},
    {"index.interval.bytes", GR_CFGT_INT, "4096", 0, NOMAX, NULL,
     "Bytes of records between two offset index entries.",
     SYN1("log.index.interval.bytes", "4096")},
    {"leader.replication.throttled.replicas", GR_CFGT_LIST, "", 0, 0, NULL,
     "Replicas whose leader-side replication is throttled: * or partition:broker pairs (no effect on one node).",
     NOSYN},
    {"local.retention.bytes", GR_CFGT_LONG, "-2", -2, NOMAX, NULL,
     "Local size bound when tiered storage is on; -2 follows retention.bytes (no effect without tiered storage).",
     SYN1("log.local.retention.bytes", "-2")},
    {"local.retention.ms", GR_CFGT_LONG, "-2", -2, NOMAX, NULL,
     "Local time bound when tiered storage is on; -2 follows retention.ms (no effect without tiered storage).",
     SYN1("log.local.retention.ms", "-2")},
    {"max.compaction.lag.ms", GR_CFGT_LONG, I64MAX_S, 1, NOMAX, NULL,
     "Longest time a record may stay uncompacted, in ms.",
     SYN1("log.cleaner.max.compaction.lag.ms", I64MAX_S)},
    {"max.decompressed.message.bytes", GR_CFGT_INT, "2147483639", 1, 2147483639, NULL,
     "Largest decompressed size of one record in a compressed batch the topic accepts, in bytes (Kafka 4.4).",
     SYN1("max.decompressed.message.bytes", "2147483639")},
    {"max.message.bytes", GR_CFGT_INT, "1048588", 0, NOMAX, NULL,
     "Largest record batch the topic accepts, in bytes.",
     SYN1("message.max.bytes", "1048588")},
    {"message.timestamp.after.max.ms", GR_CFGT_LONG, "3600000", 0, NOMAX, NULL,
     "How far a CreateTime timestamp may lie ahead of the broker clock, in ms.",
     SYN1("log.message.timestamp.after.max.ms", "3600000")},
    {"message.timestamp.before.max.ms", GR_CFGT_LONG, I64MAX_S, 0, NOMAX, NULL,
     "How far a CreateTime timestamp may lie behind the broker clock, in ms.",
     SYN1("log.message.timestamp.before.max.ms", I64MAX_S)},
    {"message.timestamp.type", GR_CFGT_STRING, "CreateTime", 0, 0, "CreateTime, LogAppendTime",
     "Whether batches keep the producer's timestamps (CreateTime) or get the broker's append time (LogAppendTime).",
     SYN1("log.message.timestamp.type", "CreateTime")},
    {"min.cleanable.dirty.ratio", GR_CFGT_DOUBLE, "0.5", 0, 1, NULL,
     "Share of a log that must be uncompacted before compaction runs.",
     SYN1("log.cleaner.min.cleanable.ratio", "0.5")},
    {"min.compaction.lag.ms", GR_CFGT_LONG, "0", 0, NOMAX, NULL,
     "Shortest time a record stays uncompacted, in ms.",
     SYN1("log.cleaner.min.compaction.lag.ms", "0")},
    {"min.insync.replicas", GR_CFGT_INT, "1", 1, NOMAX, NULL,
     "Replicas that must hold a batch before acks=all succeeds (Gregor: one node, so 1).",
     SYN1("min.insync.replicas", "1")},
    {"preallocate", GR_CFGT_BOOLEAN, "false", 0, 0, NULL,
     "Whether segment files are preallocated when created (Gregor: false only).",
     SYN1("log.preallocate", "false")},
    {"remote.copy.lag.bytes", GR_CFGT_LONG, "-1", -1, NOMAX, NULL,
     "Newer local bytes after a segment before it may be copied to tiered storage; -1 follows local.retention.bytes (Kafka 4.4; no effect without tiered storage).",
     SYN1("log.remote.copy.lag.bytes", "-1")},
    {"remote.copy.lag.ms", GR_CFGT_LONG, "0", -1, NOMAX, NULL,
     "Age of a segment's newest record before it may be copied to tiered storage, in ms; -1 follows local.retention.ms (Kafka 4.4; no effect without tiered storage).",
     SYN1("log.remote.copy.lag.ms", "0")},
    {"remote.log.copy.disable", GR_CFGT_BOOLEAN, "false", 0, 0, NULL,
     "Stops copying segments to tiered storage (no effect without tiered storage).",
     NOSYN},
    {"remote.log.delete.on.disable", GR_CFGT_BOOLEAN, "false", 0, 0, NULL,
     "Deletes tiered data when tiered storage is turned off (no effect without tiered storage).",
     NOSYN},
    {"remote.storage.enable", GR_CFGT_BOOLEAN, "false", 0, 0, NULL,
     "Whether the topic uses tiered storage (Gregor: false only).",
     NOSYN},
    {"retention.bytes", GR_CFGT_LONG, "-1", NOMIN, NOMAX, NULL,
     "Largest size of a partition before its oldest segments are deleted, in bytes; -1 unlimited.",
     SYN1("log.retention.bytes", "-1")},
    {"retention.ms", GR_CFGT_LONG, "604800000", -1, NOMAX, NULL,
     "How long a segment is kept after its newest record, in ms; -1 unlimited.",
     {{"log.retention.ms", 1, NULL}, {"log.retention.minutes", MINUTES_MS, NULL}, {"log.retention.hours", HOURS_MS, "168"}}},
    /* Minimum 14 as in Kafka 4.0, not 4.1's 1 MiB: a deliberate deviation so that small-segment tests
       (librdkafka 0077 uses segment.bytes=10000) run; see README. */
    {"segment.bytes", GR_CFGT_INT, "1073741824", 14, NOMAX, NULL,
     "Size at which the active segment is rolled, in bytes (Gregor accepts down to 14, as Kafka 4.0 did).",
     SYN1("log.segment.bytes", "1073741824")},
    {"segment.index.bytes", GR_CFGT_INT, "10485760", 4, NOMAX, NULL,
     "Largest size of a segment's offset index, in bytes.",
     SYN1("log.index.size.max.bytes", "10485760")},
    {"segment.jitter.ms", GR_CFGT_LONG, "0", 0, NOMAX, NULL,
     "Random reduction of segment.ms per segment, in ms (Gregor: 0 only).",
     {{"log.roll.jitter.ms", 1, NULL}, {"log.roll.jitter.hours", HOURS_MS, "0"}}},
    {"segment.ms", GR_CFGT_LONG, "604800000", 1, NOMAX, NULL,
     "Age at which the active segment is rolled even if not full, in ms.",
     {{"log.roll.ms", 1, NULL}, {"log.roll.hours", HOURS_MS, "168"}}},
    {"unclean.leader.election.enable", GR_CFGT_BOOLEAN, "false", 0, 0, NULL,
     "Whether an out-of-sync replica may become leader (no effect on one node: its only replica leads).",
     SYN1("unclean.leader.election.enable", "false")},
};
/* clang-format on */

#define NDEFS ((int)(sizeof defs / sizeof defs[0]))

const struct gr_tcfg_def *gr_tcfg_defs(int *count)
{
    *count = NDEFS;
    return defs;
}

const struct gr_tcfg_def *gr_tcfg_find(const char *name)
{
    if (!name) return NULL;
    for (int i = 0; i < NDEFS; i++)
        if (strcmp(defs[i].name, name) == 0) return &defs[i];
    return NULL;
}
