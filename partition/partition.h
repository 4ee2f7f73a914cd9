/*
 * partition.h: the data plane of one partition, between storage/ (the log) and coordinator/ and server/.
 * One struct gr_partition per partition log: it wraps that log (storage/log.h), decides what is visible
 * (the visible offset: today the durable offset when the set was created with visible_is_durable, Gregor's
 * gregor.acks.all.fsync default, else the log end offset; with replication it becomes the high watermark
 * driven by the followers) and owns the partition's named waits.
 *
 * Named waits: a caller embeds a struct gr_partition_waiter in its own memory, sets its done hook
 * (gr_partition_waiter_init) and queues it with one of
 *   gr_partition_wait_committed          until the visible offset reaches an end offset (Produce acks=-1,
 *                                        OffsetCommit, the SyncGroup assignment's record);
 *   gr_partition_wait_data               until data is visible past an offset (long-poll Fetch);
 *   gr_partition_wait_log_start_durable  until a log-start-offset checkpoint is durable (DeleteRecords).
 * The done hook is called exactly once per wait: at once (inside the wait call) when the condition already
 * holds or cannot hold any more (err < 0), else from the event that makes it hold (gr_partition_appended,
 * gr_partition_flushed) or fails it (gr_partition_fail, an offline log); never after
 * gr_partition_wait_cancel. Cancelling a waiter that is done or was never queued does nothing. After its
 * done hook the waiter may be queued again (from inside the hook too). The partition never allocates for a
 * wait and never frees a waiter.
 *
 * Produce: gr_partition_produce validates one partition's batch with the topic's typed policy (Kafka's
 * LogValidator), recompresses it to the topic's codec and appends it (partition/produce.c); the server
 * turns its plain result into the response.
 *
 * Ownership rule: a partition's state (its waiters, its visible offset) is touched only by the thread that
 * owns the partition: today the one network thread owns every partition of the broker; a later step may run
 * one event loop per core, each owning a set (struct gr_partitions) of partitions. Other threads (the
 * storage flushers) never call in here: their completions are handed to the owning thread first, which then
 * calls gr_partition_flushed. No event loop, socket or request type is known here: the server turns done
 * hooks into request re-checks.
 *
 * Read next: partition/partition.c, storage/log.h, server/broker.c (the server binding: flush completions,
 * request waits).
 */
#ifndef GR_PARTITION_H
#define GR_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/arena.h"
#include "storage/log.h"
#include "storage/store.h"

struct gr_partitions;
struct gr_partition;
struct gr_partition_waiter;

/* A waiter's done hook: err 0 when the condition holds, else -errno (-EROFS: the log went offline; the
   error given to gr_partition_fail; for a log start wait the checkpoint's error). Called exactly once per
   queued wait, on the owning thread. */
typedef void (*gr_partition_done_fn)(struct gr_partition_waiter *w, int err);

/* A waiter lives in its caller's memory. `done` and `ctx` are the caller's; the rest is private. */
struct gr_partition_waiter {
    gr_partition_done_fn done;
    void *ctx;
    /* private: */
    struct gr_partition *part;         /* the partition while queued, NULL when idle */
    struct gr_partition_waiter **list; /* the list it is queued on */
    struct gr_partition_waiter *prev, *next;
    int kind;
    int64_t arg; /* the end offset, the offset, or the checkpoint ticket */
};

/* The set of partitions one thread owns, and the settings they share. */
struct gr_partitions_config {
    struct gr_store *store;  /* borrowed (checkpoint tickets for gr_partition_wait_log_start_durable) */
    bool visible_is_durable; /* the visible offset is the durable offset (gregor.acks.all.fsync), else the log
                                end offset; set once at start */
};

/* Creates an empty set. Takes a copy of `cfg`. Returns new (gr_partitions_destroy), or NULL when out of
   memory. */
struct gr_partitions *gr_partitions_create(const struct gr_partitions_config *cfg);
/* Frees every partition object of the set without touching their logs (so before or after gr_store_close;
   the logs keep a dangling user pointer, so close the store too). Waiters still queued are dropped without
   a done call (shutdown: their owners are freed by the caller). */
void gr_partitions_destroy(struct gr_partitions *ps);
/* Whether the visible offset is the durable offset (the setting given at create). */
bool gr_partitions_visible_is_durable(const struct gr_partitions *ps);

/* Returns borrowed: the partition object of `log`, created on first use (kept in the log's user pointer,
   storage/log.h gr_log_set_user) and living until gr_partitions_destroy. NULL only when out of memory. */
struct gr_partition *gr_partition_get(struct gr_partitions *ps, struct gr_log *log);
/* Returns borrowed: the log the partition wraps. */
struct gr_log *gr_partition_log(const struct gr_partition *part);

/* THE visible offset of the partition (what Fetch reads below, ListOffsets' latest, DeleteRecords' bound,
   what committed means): the durable offset when the set's visible_is_durable, else the log end offset.
   Also tells storage (gr_log_set_high_watermark: checkpointed, and the retention bound) when it moved.
   Returns the offset (log start <= it <= log end). */
int64_t gr_partition_visible_offset(struct gr_partition *part);

/* Appends one validated record batch to the partition's log: gr_log_append, whose contract (arguments,
   in-place patching, results, errors) it keeps, then, when a batch was written (0 and not a duplicate),
   gr_partition_appended. The partition layer's append for callers that append batch by batch (the group
   coordinator's __consumer_offsets writes). */
int gr_partition_append(struct gr_partition *part, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                        struct gr_append_result *res);

/* ---- Produce (partition/produce.c) ---- */

/* What one partition's produce needs of its request. */
struct gr_produce_args {
    uint8_t *records;    /* the partition's records field, borrowed and writable (patched in place: the max
                            timestamp, CRC, base offset, leader epoch); NULL when null on the wire */
    int64_t records_len; /* its length in bytes (<= 0: null or empty) */
    int16_t api_version; /* the Produce version (zstd only from v7) */
    int64_t now_ms;      /* wall clock, ms: the timestamp bounds' "now" and LogAppendTime's time */
    bool require_open;   /* the caller reopened the partition's closed files beforehand (the server's produce
                            gate): an active file still closed answers KAFKA_STORAGE_ERROR, never opened here */
};

/* One refused record (Kafka's ProduceResponse.RecordError, KIP-467). */
struct gr_produce_record_error {
    int32_t batch_index; /* the record's index in the batch, from 0 */
    const char *message; /* LogValidator's words (the arena given to gr_partition_produce); NULL: none */
};

/* One partition's produce answer: the fields of Kafka's PartitionProduceResponse. */
struct gr_produce_result {
    int16_t error_code;         /* a Kafka error code, 0 when appended */
    const char *error_message;  /* NULL: null on the wire (Kafka sends one only for record refusals);
                                   static or in the arena */
    int64_t base_offset;        /* the batch's first offset (a duplicate's: the original's), else -1 */
    int64_t log_append_time_ms; /* the append time under LogAppendTime (a duplicate: the original's max
                                   timestamp), else -1 */
    int64_t log_start_offset;   /* the partition's log start offset when appended or when the error was met
                                   in the log (Kafka's answer), else -1 */
    int64_t end_offset;         /* appended: the offset after the batch (after the original for a
                                   duplicate): what must be committed before acks=-1 is answered; else -1 */
    bool duplicate;             /* appended: a retry of one of the producer's last 5 batches (not written) */
    struct gr_produce_record_error *record_errors; /* refused records (arena), in batch order */
    int record_error_count; /* at most GR_PRODUCE_RECORD_ERRORS_MAX (common/limits.h) */
};

/* Validates one partition's records and appends them: Kafka's UnifiedLog.analyzeAndValidateRecords and
   LogValidator in their order (exactly one RecordBatch v2; max.message.bytes on the batch as sent; framing,
   CRC and records; transactional and control batches refused; zstd only from v7; a compressed record
   longer than max.decompressed.message.bytes; null keys on compacted topics; each record's timestamp within
   message.timestamp.before/after.max.ms under CreateTime, the max timestamp set, LogAppendTime stamped by
   the append), recompresses to `policy`'s compression.type when it names another codec, then appends
   through gr_partition_append (storage's producer-state checks: OUT_OF_ORDER_SEQUENCE_NUMBER,
   INVALID_PRODUCER_EPOCH; duplicates). `policy` is the topic's typed policy (gr_topic_policy); refusal
   messages are allocated in `arena`. Fills `out` and returns its error_code (0: appended). Owning thread. */
int16_t gr_partition_produce(struct gr_partition *part, const struct gr_log_config *policy,
                             const struct gr_produce_args *args, struct gr_arena *arena,
                             struct gr_produce_result *out);

/* Told after records were appended to the log. With visible_is_durable it asks the flushers for a group
   commit (gr_log_flush_async: the visible offset follows fsync); otherwise the visible offset moved, and the
   committed and data waiters whose condition now holds are done. */
void gr_partition_appended(struct gr_partition *part);
/* Told on the owning thread after a flush or a log-start checkpoint covering this log completed (storage's
   on_flushed, handed over by the server), or the log went offline: the visible offset is recomputed and
   every waiter whose condition now holds is done (with -EROFS for committed and data waiters when the log
   is offline). Calling it when nothing changed is harmless. */
void gr_partition_flushed(struct gr_partition *part);
/* The partition is gone (its topic deleted) or taken offline: every queued waiter is done with `err`
   (< 0). Later waits still follow their conditions (a deleted log reads -EROFS, storage/log.h). */
void gr_partition_fail(struct gr_partition *part, int err);

/* Prepares an idle waiter (zeroes its private part). */
void gr_partition_waiter_init(struct gr_partition_waiter *w, gr_partition_done_fn done, void *ctx);
/* Until committed: done once gr_partition_visible_offset(part) >= end_offset (every offset below it is
   visible: Kafka's "the high watermark passed the append"), or with -EROFS once the log is offline. `w` must
   be idle. */
void gr_partition_wait_committed(struct gr_partition *part, struct gr_partition_waiter *w,
                                 int64_t end_offset);
/* Until data arrives: done once gr_partition_visible_offset(part) > offset (a record at or past `offset`
   is visible; appends and visible-offset moves wake it), or with -EROFS once the log is offline. */
void gr_partition_wait_data(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset);
/* Until the log start offset is durable: done once the log-start-offset checkpoint `ticket`
   (gr_store_log_start_checkpoint_async) finished: err 0 when durable, its -errno when the write failed. */
void gr_partition_wait_log_start_durable(struct gr_partition *part, struct gr_partition_waiter *w,
                                         int64_t ticket);
/* Takes `w` off its partition: its done hook will not be called for this wait. Nothing when idle. */
void gr_partition_wait_cancel(struct gr_partition_waiter *w);
/* True while `w` is queued (its done hook not yet called). */
bool gr_partition_waiting(const struct gr_partition_waiter *w);

/* Waiters queued on the partition now (all kinds): for tests and debug logs. */
int gr_partition_waiter_count(const struct gr_partition *part);

#endif
