/*
 * offsets_log.h: the coordinator's durable home, the internal topic __consumer_offsets, on top of the
 * segment store. Records (coordinator/records.h) are appended as uncompressed RecordBatch v2 batches with
 * no producer id, one batch per coordinator write when it fits (GR_OFFSETS_BATCH_BYTES_MAX), so a commit
 * of many partitions lands atomically as Kafka's does. The topic is created at start when missing with
 * offsets.topic.num.partitions partitions, cleanup.policy=compact (which also keeps time retention away
 * from it) and Kafka's offsets.topic.segment.bytes (100 MiB); an existing topic keeps its partition count.
 *
 * Bounded size by log compaction (storage/cleaner.c, as in Kafka): the store's cleaner keeps the latest
 * record per key and drops tombstones after delete.retention.ms; replay reads what is left (offset gaps
 * included) and gives the same state.
 *
 * In the broker the appends go through the partition layer (gr_offsets_log_set_partitions: the partition's
 * visible offset and waiters see them, and the coordinator waits "until committed" there, partition.h).
 * Threading: the server's network thread only (as storage/log.h and partition/partition.h).
 * Read next: coordinator/coordinator.h, server/handlers/join_group.c (the server binding).
 */
#ifndef GR_OFFSETS_LOG_H
#define GR_OFFSETS_LOG_H

#include <stdint.h>

#include "coordinator/coordinator.h"
#include "partition/partition.h"
#include "storage/log.h"
#include "storage/store.h"

#define GR_OFFSETS_TOPIC "__consumer_offsets"
/* Kafka's offsets.topic.segment.bytes default. */
#define GR_OFFSETS_SEGMENT_BYTES 104857600
/* Bytes of records per batch before a write is split (below the 1 MiB message.max.bytes default). */
#define GR_OFFSETS_BATCH_BYTES_MAX (512 * 1024)
/* Bytes read per step of a load (one read, one replay): bounds the buffer a load holds at once. */
#define GR_OFFSETS_LOAD_BYTES (1 << 20)

struct gr_offsets_log;

/* Finds or creates __consumer_offsets in `store` (borrowed; must outlive the offsets log) with
 * `partitions` partitions when created. Returns 0 and *out (new; gr_offsets_log_close), or -errno from
 * the store (-EINVAL, -ENOSPC, ...). */
int gr_offsets_log_open(struct gr_store *store, int32_t partitions, struct gr_offsets_log **out);
/* The creation of __consumer_offsets with `partitions` partitions and the coordinator's configs
 * (cleanup.policy=compact, segment.bytes) as a storage topic operation (store.h gr_topic_op_create), for a
 * caller that runs it off the network thread; gr_offsets_log_open then finds the topic. NULL when out of
 * memory. */
struct gr_topic_op *gr_offsets_log_create_op(int32_t partitions);
/* Wraps the existing storage topic `t` (borrowed; cluster mode: the sparse __consumer_offsets the replica
 * manager made, whose partitions this broker does not hold have no log) without creating anything. Returns
 * 0 and *out (new; gr_offsets_log_close), or -ENOMEM. */
int gr_offsets_log_attach(struct gr_store *store, struct gr_topic *t, struct gr_offsets_log **out);
/* Frees the offsets log (not the topic). */
void gr_offsets_log_close(struct gr_offsets_log *ol);

/* Partitions of the topic (what gr_coord_partition_for must use). */
int32_t gr_offsets_log_partitions(const struct gr_offsets_log *ol);
/* Returns borrowed: the log of `partition`. */
struct gr_log *gr_offsets_log_log(struct gr_offsets_log *ol, int32_t partition);

/* Replays every partition from its log start offset to its log end offset into `c`
 * (gr_offsets_log_replay_partition: transactional batches pending, markers completing them); then calls
 * gr_coord_load_done. Returns the number of records replayed, or -errno when a partition cannot be read (the
 * state is then partial: the caller should not serve). */
int64_t gr_offsets_log_load(struct gr_offsets_log *ol, struct gr_coordinator *c);
/* The same for partition `p` alone, on the calling thread, without gr_coord_load_done: returns the number
 * of records replayed, -ENOENT when this broker holds no log of `p`, or -errno from a read. */
int64_t gr_offsets_log_load_partition(struct gr_offsets_log *ol, struct gr_coordinator *c, int32_t p);
/* The steps of a load split across threads (server/groups.c reads on the I/O pool, replays on the loop):
 * gr_offsets_log_read_slice copies the bytes of slice `s` (storage/log.h gr_log_read) into `buf` (s->bytes
 * bytes) with pread; thread-safe, blocks on the disk; 0 or -errno (-EIO: the file is shorter).
 * gr_offsets_log_replay replays the whole batches of `buf` (`len` bytes) at offsets >= `from` into `c`,
 * adding the records applied to *count; returns the offset after the last whole batch (== from: none, a
 * torn tail). */
int gr_offsets_log_read_slice(const struct gr_log_slice *s, uint8_t *buf);
int64_t gr_offsets_log_replay(struct gr_coordinator *c, const uint8_t *buf, size_t len, int64_t from,
                              int64_t *count);
/* gr_offsets_log_replay for the bytes of partition `partition`: records carry their offsets and, in a
 * transactional batch (attributes bit 4), its producer id (gr_coord_replay_record: pending until the
 * marker); a transactional control batch's end-transaction marker (protocol/txn_marker.h: COMMIT / ABORT)
 * completes that producer's pending offsets of the partition's groups (gr_coord_txn_marker_apply), and is
 * counted in *count; other control records are skipped. A load that ends inside an open transaction
 * leaves its offsets pending. gr_offsets_log_replay passes partition -1 (a marker then completes the
 * producer's pending offsets in every partition's groups: callers that load one partition at a time while
 * others hold pending offsets should use this form). */
int64_t gr_offsets_log_replay_partition(struct gr_coordinator *c, int32_t partition, const uint8_t *buf,
                                        size_t len, int64_t from, int64_t *count);

/* Sends the appends through the partition layer from now on (gr_partition_append on the partitions of
 * `parts`, borrowed, which must outlive the offsets log): the partition then sees them (its visible offset,
 * its waiters) as it sees a Produce's. Without it (tools, tests) appends go straight to storage. */
void gr_offsets_log_set_partitions(struct gr_offsets_log *ol, struct gr_partitions *parts);
/* Appends `count` records to `partition` with timestamp `wall_ms` and asks for an fsync. Returns 0 and
 * *end_offset (durable once gr_offsets_log_durable says so), or -errno from gr_log_append / -ENOMEM. */
int gr_offsets_log_append(struct gr_offsets_log *ol, int32_t partition, const struct gr_coord_record *recs,
                          int count, int64_t wall_ms, int64_t *end_offset);
/* The coordinator's transactional append (gr_coord_append_txn_fn) on the log: GR_COORD_TXN_RECORDS writes
 * the `count` records as ONE batch with the transactional attribute, w's producer id and epoch, base
 * sequence -1 (never split: a transaction's records land together); a marker kind writes the control batch
 * of protocol/txn_marker.h (gr_txn_marker_batch_encode, timestamp `wall_ms`). Through the partition layer
 * when set (whose acceptance of transactional batches, producer-epoch checks and last stable offset are the
 * storage slice's), else straight to storage. Returns 0 and *end_offset, or -errno (-EINVAL: no such
 * partition or no records, -EMSGSIZE, -ENOMEM, the append's error). */
int gr_offsets_log_append_txn(struct gr_offsets_log *ol, int32_t partition,
                              const struct gr_coord_txn_write *w, const struct gr_coord_record *recs,
                              int count, int64_t wall_ms, int64_t *end_offset);
/* 1 when every offset below `end_offset` of `partition` is durable, 0 when not yet, -EROFS when the
 * partition went offline (the write will never be durable). */
int gr_offsets_log_durable(struct gr_offsets_log *ol, int32_t partition, int64_t end_offset);

#endif
