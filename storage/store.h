/*
 * store.h: the segment store, Gregor's on-disk home for every partition log. One store owns one log
 * directory (Kafka's log.dirs with a single entry) laid out as Kafka lays it out:
 *
 *   <log_dir>/meta.properties                      cluster.id, node.id, version (Kafka's properties format)
 *   <log_dir>/.kafka_cleanshutdown                 present only between a clean close and the next open
 *   <log_dir>/recovery-point-offset-checkpoint     "0\n<count>\n<topic> <partition> <offset>\n..." (Kafka
 * text) <log_dir>/log-start-offset-checkpoint          same format: the log start offset of each partition
 *   <log_dir>/replication-offset-checkpoint        same format: the high watermark the server last reported
 *   <log_dir>/__gregor_topics/<topic id>.topic     topic metadata: name, topic id, partitions, configs
 *   <log_dir>/<topic>-<partition>/                 one partition log, see storage/log.h and storage/segment.h
 *   <log_dir>/<topic>-<partition>.<32 hex>-delete  a deleted partition waiting for its files to be unlinked
 *
 * Every file other than segments and indexes is replaced atomically: write "<name>.tmp", fdatasync, rename,
 * fsync the directory (storage/checkpoint.c). The formats are tables in storage/format.md.
 *
 * Threading: every function here and in log.h is called from ONE thread (the server's network thread).
 * The store runs `flusher_threads` threads that do the blocking file work: fdatasync (or one syncfs for many
 * logs), naming segments made ahead of a roll and writing sealed index files (storage/roll.c), making the
 * next segment's unnamed file, writing snapshot and checkpoint files (DeleteRecords' too), truncating the
 * bytes of a failed write and unlinking deleted files; they report durability
 * through cfg->on_flushed. Reads that might wait for the disk are the server's to hand to an I/O pool
 * (storage/iopool.h, gr_log_read_nowait, gr_log_slice_prefetch), and so is the file work of topic
 * metadata operations (gr_topic_op_*: only their run step leaves the network thread, touching nothing but
 * the files and the operation's private state). Invariants: topic names are unique among
 * live topics; a deleted topic's gr_topic and gr_log structs stay allocated (marked deleted, offline) until
 * gr_store_close so a pointer held by the server never dangles.
 *
 * Read next: storage/log.h (one partition), storage/producer_state.h, storage/sys.h (fault-injection shim).
 */
#ifndef GR_STORE_H
#define GR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct gr_store;
struct gr_topic;
struct gr_log;
struct gr_iopool;

/* compression.type (broker key and topic key), parsed: Kafka's names; an unknown name reads as PRODUCER
 * (keep the producer's codec), as the string comparisons it replaces did. Values 0..4 are the codec ids
 * of protocol/record_batch.h (enum gr_codec). */
enum gr_compression_type {
    GR_COMPRESSION_PRODUCER = -1,
    GR_COMPRESSION_UNCOMPRESSED = 0,
    GR_COMPRESSION_GZIP = 1,
    GR_COMPRESSION_SNAPPY = 2,
    GR_COMPRESSION_LZ4 = 3,
    GR_COMPRESSION_ZSTD = 4,
};

/* compression.type text -> enum (an unknown name: GR_COMPRESSION_PRODUCER). */
static inline enum gr_compression_type gr_compression_type_parse(const char *name)
{
    static const struct {
        const char *name;
        enum gr_compression_type type;
    } names[] = {{"uncompressed", GR_COMPRESSION_UNCOMPRESSED},
                 {"gzip", GR_COMPRESSION_GZIP},
                 {"snappy", GR_COMPRESSION_SNAPPY},
                 {"lz4", GR_COMPRESSION_LZ4},
                 {"zstd", GR_COMPRESSION_ZSTD}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) return names[i].type;
    return GR_COMPRESSION_PRODUCER;
}

struct gr_store_config {             /* Kafka config names in comments */
    const char *log_dir;             /* log.dirs (one directory); created if missing */
    int64_t segment_bytes;           /* log.segment.bytes, default 1073741824, at most 2^31-1 */
    int64_t segment_ms;              /* log.roll.ms, default 7 days */
    int64_t retention_ms;            /* log.retention.ms, default 7 days, -1 unlimited */
    int64_t retention_bytes;         /* log.retention.bytes, default -1 (unlimited) */
    int32_t index_interval_bytes;    /* log.index.interval.bytes, default 4096 */
    int32_t segment_index_bytes;     /* log.index.size.max.bytes, default 10485760 */
    int64_t flush_interval_messages; /* log.flush.interval.messages, default INT64_MAX */
    int64_t flush_interval_ms;       /* log.flush.interval.ms, default INT64_MAX (= never by time) */
    int32_t max_message_bytes;       /* message.max.bytes, default 1048588 */
    int flusher_threads;             /* Gregor: threads doing fdatasync, default 2 */
    /* Called on a flusher thread after an fdatasync made offsets < durable_end_offset durable in `log`,
       or with err < 0 (-EIO...) when the flush failed and the partition went offline. Must be
       thread-safe (the server wakes its loop with ev_async). May be NULL. The log pointer stays valid
       until gr_store_close, even after its topic is deleted. */
    void (*on_flushed)(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err);
    void *on_flushed_ctx;
    /* Additions beyond the first contract (defaults set by gr_store_config_defaults): */
    int32_t node_id;              /* node.id written to meta.properties, default 1 */
    const char *cluster_id;       /* cluster.id written to a new meta.properties (cluster mode: etcd's, 22
                                     base64url characters, borrowed during gr_store_open); NULL: a random one */
    int32_t open_segment_fds_max; /* Gregor: .log files kept open at once, active ones included (LRU; idle
                                     ones closed, reopened on the I/O pool), default 1024 */
    /* Log compaction (storage/cleaner.h). Broker-level defaults of the topic configs: */
    int64_t delete_retention_ms;         /* log.cleaner.delete.retention.ms, default 86400000 */
    double min_cleanable_ratio;          /* log.cleaner.min.cleanable.ratio, default 0.5 */
    int64_t min_compaction_lag_ms;       /* log.cleaner.min.compaction.lag.ms, default 0 */
    int64_t max_compaction_lag_ms;       /* log.cleaner.max.compaction.lag.ms, default INT64_MAX */
    int64_t cleaner_dedupe_buffer_bytes; /* log.cleaner.dedupe.buffer.size, default 134217728: the key map's
                                            memory bound (24 bytes per key, at most 90% full) */
    double cleaner_io_bytes_per_second;  /* log.cleaner.io.max.bytes.per.second; 0 = unlimited (Kafka's
                                            default is Double.MaxValue) */
    bool cleaner_enable;                 /* log.cleaner.enable, default true */
    int64_t cleaner_backoff_ms;          /* log.cleaner.backoff.ms, default 15000: idle check interval */
    /* Gregor: group commit by one syncfs(2) of the log directory's file system instead of one fdatasync
       per file when at least this many logs wait for a flush at once (0: never). Default 16: measured with
       bench/storage_bench (sync table), syncfs made 10 dirty files durable 2-3x faster and 1,000 files 7-9x
       faster than fdatasync on 2 threads. A syncfs error names no file: every log of that round goes
       offline. syncfs also writes back other dirty data of the same file system. */
    int32_t flush_syncfs_min_logs;
    /* Gregor: a roll waiting for its next file (made ahead by the flusher's spare thread, storage/roll.c)
       stops waiting, and creates the files itself, once the active segment holds more than
       max(2 x segment.bytes, this many bytes). Default 67108864 (64 MiB): with a small segment.bytes and
       large batches a per-batch bound of 2 x segment.bytes was reached at nearly every roll. */
    int64_t roll_wait_bytes_min;
    /* log.cleanup.policy, the broker default of cleanup.policy: delete (default true), compact (false). */
    bool cleanup_delete, cleanup_compact;
    /* Broker defaults of the produce-validation topic configs: */
    bool log_append_time;            /* log.message.timestamp.type == LogAppendTime, default false */
    int64_t timestamp_before_max_ms; /* log.message.timestamp.before.max.ms, default INT64_MAX */
    int64_t timestamp_after_max_ms;  /* log.message.timestamp.after.max.ms, default 3600000 */
    enum gr_compression_type compression_type; /* compression.type, default producer */
    /* Called on the network thread when a topic operation completed and changed a topic (gr_topic_op_finish,
       and so the synchronous calls too): `t` was created, grew or got new configs (deleted false), or was
       deleted (still allocated, see the invariants above). Not called for the topics loaded by
       gr_store_open. The metadata image's single-node source (cluster/local.h) follows the store by it.
       May be NULL. */
    void (*on_topic_changed)(void *ctx, struct gr_topic *t, bool deleted);
    void *on_topic_changed_ctx;
};

/* A topic's typed policy: each field is the topic-level config when set, else the broker default
   (struct gr_store_config), parsed once when the topic's configs or the broker defaults change
   (gr_store_topic_create/open, gr_topic_config_set_all, gr_store_set_defaults), never per request. Written
   and read on the network thread; work on other threads (cleaning, segment loads) copies it there first. */
struct gr_log_config {
    int64_t segment_bytes;
    int64_t segment_ms;
    int64_t retention_ms;
    int64_t retention_bytes;
    int32_t index_interval_bytes;
    int32_t segment_index_bytes;
    int32_t max_message_bytes; /* max.message.bytes: largest batch appended, in bytes */
    int64_t flush_messages;
    int64_t flush_ms;
    bool delete_policy; /* cleanup.policy contains "delete" */
    /* Compaction (storage/cleaner.c); Kafka's topic configs of the same names. */
    bool compact_policy;           /* cleanup.policy contains "compact" */
    int64_t delete_retention_ms;   /* delete.retention.ms, default 86400000 */
    double min_cleanable_ratio;    /* min.cleanable.dirty.ratio, default 0.5 */
    int64_t min_compaction_lag_ms; /* min.compaction.lag.ms, default 0 */
    int64_t max_compaction_lag_ms; /* max.compaction.lag.ms, default INT64_MAX */
    /* Produce validation (partition/produce.c, Kafka's LogValidator). */
    int32_t max_decompressed_message_bytes;    /* max.decompressed.message.bytes (no broker key) */
    bool log_append_time;                      /* message.timestamp.type == LogAppendTime */
    int64_t message_timestamp_before_max_ms;   /* message.timestamp.before.max.ms */
    int64_t message_timestamp_after_max_ms;    /* message.timestamp.after.max.ms */
    enum gr_compression_type compression_type; /* compression.type */
};

/* Returns borrowed: the typed policy of topic `t` (valid until its configs or the broker defaults change;
   network thread). */
const struct gr_log_config *gr_topic_policy(const struct gr_topic *t);

/* Fills `cfg` with the defaults above (log_dir NULL, on_flushed NULL). */
void gr_store_config_defaults(struct gr_store_config *cfg);

/* Opens (creating if needed) the log directory: writes meta.properties on first use (cluster.id: random
   16 bytes as 22-char base64url like Kafka's Uuid, node.id), loads topics, recovers every partition (see
   storage/log.h), starts the flusher threads. Returns 0 and *out (new, caller closes), or -errno
   (-EINVAL for a bad config or unreadable metadata, -ENOTDIR, -EACCES...). */
int gr_store_open(const struct gr_store_config *cfg, struct gr_store **out);

/* Gives the store the I/O pool (storage/iopool.h; borrowed; NULL takes it back: call that before destroying
   the pool) on which a follower's truncation does its reads (storage/truncate.c: finding the cut, the
   producer snapshot, the batch headers to replay), so the calling (network) thread never waits for the disk;
   without one they are read on the calling thread. Network thread. */
void gr_store_set_iopool(struct gr_store *store, struct gr_iopool *pool);

/* Clean shutdown (after every submitted topic operation completed: drain the I/O pool first): stops the
   flushers, fdatasyncs every log, writes indexes of active segments, producer snapshots, checkpoints and the
   clean-shutdown marker (only if every step succeeded), frees everything. Outstanding slices must have been
   released. */
void gr_store_close(struct gr_store *store);

/* Dynamic broker configs: replaces the broker-level defaults of the topic configs (segment_bytes,
   segment_ms, retention_ms, retention_bytes, index_interval_bytes, segment_index_bytes,
   flush_interval_messages, flush_interval_ms, max_message_bytes, delete_retention_ms, min_cleanable_ratio,
   min/max_compaction_lag_ms, cleanup_delete/compact, log_append_time, timestamp_before/after_max_ms,
   compression_type; the other fields of `cfg` are ignored) and recomputes
   every live topic's effective config, so topics without their own value follow at once (next append, roll,
   retention or cleaning run). Memory only; network thread. */
void gr_store_set_defaults(struct gr_store *store, const struct gr_store_config *cfg);

/* Returns borrowed: the 22-char base64url cluster id from meta.properties. */
const char *gr_store_cluster_id(const struct gr_store *store);
/* Reads the cluster.id of <log_dir>/meta.properties before the store opens (cluster mode compares it with
 * etcd's): returns 1 with the id in `out` (22 characters and a NUL), 0 when the directory or the file does
 * not exist (a new log directory), -EINVAL when the file has no valid cluster.id, or -errno. */
int gr_store_meta_cluster_id(const char *log_dir, char out[23]);

/* Queues writes of the three offset checkpoint files (recovery point, log start offset, high watermark)
   and of the leader-epoch checkpoints that changed to the housekeeping thread (no disk wait on the
   caller). Gregor addition: call it periodically (Kafka does every log.flush.offset.checkpoint.interval.ms,
   60 s); gr_store_retention_run does when log start offsets moved; gr_store_close writes them itself.
   Returns 0, or -ENOMEM when a write could not be queued (failed writes are logged). */
int gr_store_checkpoint(struct gr_store *store);

/* DeleteRecords' durable log start offsets (storage/log.h gr_log_delete_records_begin): queues one write
   of log-start-offset-checkpoint (every live log at max(log start offset, DeleteRecords in flight)) to the
   housekeeping thread, in FIFO order with every other checkpoint write (one writer per file), and returns
   its *ticket. When it finished, on_flushed is called (err 0, the log's current durable offset) for every
   log with a DeleteRecords in flight, so that parked requests are re-checked. Without flusher threads the
   write runs inline and nothing is called back. No disk wait on the caller. 0 or -ENOMEM. */
int gr_store_log_start_checkpoint_async(struct gr_store *store, int64_t *ticket);
/* 1 when the write of `ticket` (or a later one, which carries the same offsets) is durable, 0 while in
   progress, -errno when it failed. Thread-safe, no I/O. */
int gr_store_checkpoint_poll(struct gr_store *store, int64_t ticket);
/* Waits for `ticket`: 0 or -errno. BLOCKS: tests and tools only. */
int gr_store_checkpoint_wait(struct gr_store *store, int64_t ticket);

/* Waits until the flusher threads have no queued or running flush or housekeeping job (snapshot writes,
   unlinks). For tests and orderly shutdown; appends made meanwhile may queue more work. */
void gr_store_quiesce(struct gr_store *store);

/* Topics. Per-topic configs are Kafka topic config names/values (segment.bytes, segment.ms, retention.ms,
   retention.bytes, max.message.bytes, index.interval.bytes, segment.index.bytes, flush.messages, flush.ms,
   cleanup.policy, message.timestamp.type, and every other name Kafka's TopicConfig knows, stored as text).
   Keys/values are borrowed arrays of `config_count` NUL-terminated strings.
   Returns 0 and *out (borrowed, valid until gr_store_close), -EEXIST when a live topic has the name,
   -EINVAL for a bad name (1..249 chars of [a-zA-Z0-9._-], not "." or ".."), partition count
   (1..GR_PARTITIONS_PER_TOPIC_MAX), unknown config key or unparsable value, or -errno from the disk. */
int gr_store_topic_create(struct gr_store *store, const char *name, int32_t partitions,
                          const char *const *config_keys, const char *const *config_values, int config_count,
                          struct gr_topic **out);

/* Deletes a topic: renames each partition dir to Kafka's "<topic>-<p>.<32 hex uuid>-delete" form and
   removes the metadata file (both durable before return), then a flusher thread unlinks the files. Open
   slices keep their descriptors valid. The name is reusable at once; `topic` stays allocated (deleted,
   logs offline) until gr_store_close. Returns 0 or -errno (the topic is then still live). */
int gr_store_topic_delete(struct gr_store *store, struct gr_topic *topic);

/* CreatePartitions: grows `topic` to `new_total` partitions (new logs empty). Returns 0, -EINVAL when
   new_total <= current count or above GR_PARTITIONS_PER_TOPIC_MAX, or -errno. */
int gr_store_topic_add_partitions(struct gr_store *store, struct gr_topic *topic, int32_t new_total);

/* Topic metadata operations split for an I/O pool (Gregor issue #4: nothing that can block on the disk runs
   on the network thread). Each operation runs in three steps:
     begin  (network thread): validates against the store's current state, allocates, reserves memory so
            that finish cannot fail, formats the topic file;
     run    (any thread, e.g. an I/O pool thread): file work only, on private state: directory renames and
            creation, segment files, partition.metadata, epochs, the topic file, fsyncs; undoes its own
            file work on failure;
     finish (network thread): publishes the result into the store (or drops it), returns the result.
   The commit points are those of the synchronous functions above (the topic file for create and delete).
   Constructors copy their arguments and validate nothing (begin does, against the state at that time);
   they return NULL when out of memory. The topic of delete/add_partitions/set_configs must stay allocated
   (it does: topics are freed only by gr_store_close). */
struct gr_topic_op;
/* CreateTopics: like gr_store_topic_create. With `refuse_collision`, begin also refuses (-ENOTUNIQ) a name
   equal to a live topic's once '.' and '_' are treated alike (Kafka's Topic.hasCollision). */
struct gr_topic_op *gr_topic_op_create(const char *name, int32_t partitions, const char *const *config_keys,
                                       const char *const *config_values, int config_count,
                                       bool refuse_collision);
/* For a create op: the new logs' active segment files are exempt from the open-file cap from the start
   (gr_log_keep_active_open before they are published), so that no later open is needed. */
void gr_topic_op_keep_active_open(struct gr_topic_op *op);
/* Cluster mode (issue 19): a topic of the cluster image that holds only the partitions this broker is a
   replica of. create_sparse makes a topic named `name` with the given 16-byte `id` (the image's, never a
   new one), `partitions` partitions and none of them held (gr_topic_log NULL for each): only its topic
   file (with "sparse=1") is written. begin: as create, and -EEXIST when the id is all zero or a live topic
   has it. CreatePartitions on a sparse topic (gr_topic_op_add_partitions) grows the count without
   holding the new partitions. */
struct gr_topic_op *gr_topic_op_create_sparse(const char *name, const uint8_t id[16], int32_t partitions,
                                              const char *const *config_keys,
                                              const char *const *config_values, int config_count);
/* replica_make: opens the local log of partition `partition` of sparse `topic`: creates "<topic>-<p>/" with
   partition.metadata carrying the topic id (Kafka's layout), an empty first segment and leader epoch 0; a
   leftover directory of that name is moved aside first (as topic creation does). The directory is the
   commit point. begin: -ENOENT (topic deleted), -EINVAL (not sparse, partition out of range), -EEXIST
   (already held). replica_delete: deletes the local log of `partition` (Kafka's stray-log removal): the
   directory is renamed "<topic>-<p>.<32 hex>-delete" (durable before finish), a flusher unlinks it; the
   gr_log stays allocated (deleted, offline) until gr_store_close, gr_topic_log(topic, p) is NULL from
   finish on. begin: -ENOENT (topic deleted or partition not held), -EINVAL (not sparse or out of range).
   Both call on_topic_changed(topic, false) when done. */
struct gr_topic_op *gr_topic_op_replica_make(struct gr_topic *topic, int32_t partition);
struct gr_topic_op *gr_topic_op_replica_delete(struct gr_topic *topic, int32_t partition);
/* DeleteTopics: like gr_store_topic_delete (begin: -ENOENT when `topic` is no longer live). */
struct gr_topic_op *gr_topic_op_delete(struct gr_topic *topic);
/* CreatePartitions: like gr_store_topic_add_partitions. */
struct gr_topic_op *gr_topic_op_add_partitions(struct gr_topic *topic, int32_t new_total);
/* AlterConfigs/IncrementalAlterConfigs: like gr_topic_config_set_all (a deleted topic: -ENOENT). */
struct gr_topic_op *gr_topic_op_set_configs(struct gr_topic *topic, const char *const *keys,
                                            const char *const *values, int count);
/* Durably replaces the small file `name` of the log directory with `data` (atomic replace as
   gr_store_meta_write, on the pool) in the FIFO of topic operations (e.g. the dynamic broker configs). */
struct gr_topic_op *gr_topic_op_meta_write(const char *name, const void *data, size_t len);
/* An operation that changes nothing: it completes once every operation submitted before it completed (a
   request that must see their results before it checks anything). */
struct gr_topic_op *gr_topic_op_barrier(void);
/* Step 1, network thread, one operation at a time per store (the next begin after the previous finish).
   Returns 0, or the operation's error (-EEXIST, -ENOTUNIQ, -EINVAL, -ENOENT, -ENOMEM): run then does
   nothing and finish returns that error. */
int gr_topic_op_begin(struct gr_store *store, struct gr_topic_op *op);
/* Step 2, any thread: the file work. Touches no store-wide state. */
void gr_topic_op_run(struct gr_topic_op *op);
/* Step 3, network thread: publishes (or drops) the result. Returns 0 or -errno (the begin error, or the
   disk's: -ENOSPC, -EIO...; the store is then as before the operation); *topic (may be NULL) gets the
   created or changed topic (NULL on error). Does not free the op. */
int gr_topic_op_finish(struct gr_store *store, struct gr_topic_op *op, struct gr_topic **topic);
/* Frees an operation (after finish, or one never begun). NULL is ignored. */
void gr_topic_op_free(struct gr_topic_op *op);
/* Callback of a submitted operation, on the network thread: err as gr_topic_op_finish returns it. */
typedef void (*gr_topic_op_cb)(void *ctx, int err, struct gr_topic *topic);
/* Queues `op` (taken over) behind every operation submitted before it: its begin runs once the previous
   operation finished, so its checks see every earlier result; run goes to `pool` (inline when NULL);
   finish and then cb(ctx, ...) run on the network thread (inside gr_iopool_complete), then the op is freed.
   cb may run before this returns (a begin error, or no pool). Network thread only. */
void gr_store_topic_op_submit(struct gr_store *store, struct gr_iopool *pool, struct gr_topic_op *op,
                              gr_topic_op_cb cb, void *ctx);
/* Operations submitted and not completed (queued or running). */
int gr_store_topic_ops_pending(const struct gr_store *store);

/* Returns borrowed: the live topic named by `name` (not NUL-terminated, `name_len` bytes), or NULL. */
struct gr_topic *gr_store_topic_find(struct gr_store *store, const char *name, size_t name_len);
/* Returns borrowed: the live topic with this 16-byte topic id, or NULL. */
struct gr_topic *gr_store_topic_find_id(struct gr_store *store, const uint8_t id[16]);
/* Number of live topics. */
int gr_store_topic_count(const struct gr_store *store);
/* Returns borrowed: live topic number i (0 <= i < count) in order of name (bytewise); the order is
   stable between topic creations/deletions. */
struct gr_topic *gr_store_topic_at(struct gr_store *store, int i);

/* Returns borrowed: NUL-terminated topic name. */
const char *gr_topic_name(const struct gr_topic *t);
/* Returns borrowed: 16-byte topic id (random UUID v4, new on every create). */
const uint8_t *gr_topic_id(const struct gr_topic *t);
int32_t gr_topic_partition_count(const struct gr_topic *t);
/* True for a topic holding only some partitions here (gr_topic_op_create_sparse); false for every
   single-node topic, which holds all of its partitions. */
bool gr_topic_sparse(const struct gr_topic *t);
/* Returns borrowed: the log of `partition`, NULL if out of range, the topic deleted, or (a sparse topic) the
   partition not held here. */
struct gr_log *gr_topic_log(struct gr_topic *t, int32_t partition);
/* Returns borrowed: the topic-level value of config `key`, NULL if not set at topic level. */
const char *gr_topic_config_get(const struct gr_topic *t, const char *key);
/* Number of topic-level configs, and the i-th key/value (borrowed), for DescribeConfigs. */
int gr_topic_config_count(const struct gr_topic *t);
void gr_topic_config_at(const struct gr_topic *t, int i, const char **key, const char **value);
/* Replaces the whole topic-level config set durably (IncrementalAlterConfigs/AlterConfigs computed the
   new set). Takes effect for the next append/roll/retention run. Returns 0, -EINVAL (unknown key or bad
   value; nothing changed), -ENOENT (the topic was deleted) or -errno (nothing changed). */
int gr_topic_config_set_all(struct gr_store *store, struct gr_topic *t, const char *const *keys,
                            const char *const *values, int count);
/* True if `key` is a row of the table of topic keys (storage/topic_config.h) or message.downconversion.enable
   (removed in Kafka 4.0), i.e. gr_store_topic_create accepts it. */
bool gr_topic_config_key_known(const char *key);

/* Called on the network thread each time a live log's start offset rises from `old_start` to `new_start`:
   retention deleting segments, DeleteRecords (and a follower raising it to its leader's), a follower's
   truncation that restarts the log further on. Not called at open. Issue #22's records-lost count. */
typedef void (*gr_store_start_hook)(void *ctx, struct gr_log *log, int64_t old_start, int64_t new_start);
/* Sets the hook above (NULL: none) and its `ctx`. */
void gr_store_set_start_hook(struct gr_store *store, gr_store_start_hook fn, void *ctx);

/* Retention: for every live log whose cleanup.policy includes "delete", deletes (oldest first) segments
   whose largest record timestamp is more than retention.ms before `now_ms`, then oldest segments while the
   log exceeds retention.bytes; -1 means unlimited. A segment is deleted only if all its offsets lie below
   the log's retention bound: the high watermark the server set (gr_log_set_high_watermark), else the
   durable offset. When every segment including the active one has expired, the active one is rolled first.
   Also drops segments wholly below the log start offset, advances the log start offset, prunes producer
   state and leader epochs, and writes checkpoints. Call periodically (~log.retention.check.interval.ms). */
void gr_store_retention_run(struct gr_store *store, int64_t now_ms);
/* The fd cap (open_segment_fds_max): closes least recently used .log files nobody pins (no unsynced data, no
   flush naming them, no read, slice or pool load holding them) until at most the cap are open. Files
   pinned past the cap are closed by a later call (the server calls it every second). No I/O beyond
   close(); network thread. */
void gr_store_fds_trim(struct gr_store *store);
/* .log descriptors open now (the LRU's count; for tests and metrics). */
int32_t gr_store_open_segment_fds(const struct gr_store *store);

/* Small files of the log directory kept by upper layers (e.g. the producer id block). meta_write durably
   replaces `name` (atomic replace: "<name>.tmp" written, fdatasynced, renamed, directory fsynced; the old or
   the new content survives a crash). Runs on the caller's thread and waits for the disk: call rarely.
   Returns 0 or -errno. meta_read reads exactly `len` bytes: 0, -ENOENT, -EINVAL (another size) or -errno. */
int gr_store_meta_write(struct gr_store *store, const char *name, const void *data, size_t len);
int gr_store_meta_read(struct gr_store *store, const char *name, void *buf, size_t len);

/* Writes a random v4 UUID that Kafka would accept as a topic or cluster id into `id` (16 bytes): not zero,
   not the metadata topic id (...0001), its base64url text not starting with '-' (Kafka's Uuid.randomUuid
   rules). Used for new topics, and for the id a validate_only CreateTopics reports (as Kafka's controller
   does). Never fails (getrandom is retried). */
void gr_uuid_random(uint8_t id[16]);
/* Kafka's Uuid text: 16 bytes as 22 base64url characters without padding, NUL-terminated (`out` 23 bytes),
   and back: decode takes exactly 22 canonical characters (the last one's 4 low bits zero) and returns 0 or
   -EINVAL. Topic ids in partition.metadata, the cluster id in meta.properties, cluster keys (cluster/). */
void gr_uuid_to_base64url(const uint8_t id[16], char out[23]);
int gr_uuid_from_base64url(const char *s, size_t len, uint8_t id[16]);

#endif
