/*
 * log.h: one partition log. A log is a list of segments in increasing base offset; the last is the active
 * segment that takes appends. Offsets are contiguous: every offset from the log start offset to the log end
 * offset - 1 belongs to exactly one batch, and each segment starts at the previous segment's end.
 *
 * Offsets kept per log (Kafka's terms), always log start <= durable <= log end:
 *   log start offset   first offset readable (retention and DeleteRecords advance it)
 *   durable offset     end of the prefix covered by a completed fdatasync ("durable" level)
 *   log end offset     next offset to assign (everything below is "written": in the page cache)
 * The high watermark is the server's business: it picks the durable offset (acks=-1, Gregor default) or
 * the log end offset, and passes it to reads as `upper_bound`.
 *
 * Durability levels: accepted (not yet appended), written (gr_log_append returned: page cache), durable
 * (a flusher's fdatasync covered it; reported through the store's on_flushed). An fsync error takes the
 * log offline (appends and reads return -EROFS) until a restart recovers it; fsync is never retried.
 *
 * Recovery at open (see log.c): with a clean-shutdown marker the segments are trusted; otherwise every
 * segment from the one holding the recovery point to the end is re-validated (lengths, magic 2, CRC-32C,
 * contiguous offsets), its indexes rebuilt, and the log is truncated at the first bad byte (later segments
 * deleted). Producer state is rebuilt from the last snapshot plus the batches after it.
 *
 * Threading: all functions run on the network thread and never wait for the disk there (appends, rolls,
 * retention and DeleteRecords hand their file work to the flusher/housekeeping threads; gr_log_read_nowait
 * for reads); a per-log mutex guards only what the flushers share
 * (durable offset, offline flag, the list of segments awaiting fdatasync). Compaction (storage/cleaner.h)
 * reads sealed segments on its own thread through descriptors its segment references pin, and changes the
 * segment list only on the network thread.
 *
 * Read next: storage/segment.c (files and indexes), storage/producer_state.h, storage/format.md.
 */
#ifndef GR_STORAGE_LOG_H
#define GR_STORAGE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_log;
struct gr_topic;
struct gr_producer_state;

struct gr_append_result {
    int64_t base_offset;        /* offset assigned to the first record (a duplicate: the original's) */
    int64_t last_offset;        /* offset of the last record (a duplicate: the original's) */
    int64_t log_append_time_ms; /* the append time used, or -1 for CreateTime (a duplicate: see below) */
    int64_t log_start_offset;   /* log start offset after the append */
    bool duplicate;             /* the batch repeats one already in the log and was not written again */
};

/* gr_log_append's refusals by the idempotence and transaction rules (storage/producer_state.h), outside
   the errno range. */
#define GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE (-4045)          /* Kafka OUT_OF_ORDER_SEQUENCE_NUMBER (45) */
#define GR_LOG_ERR_INVALID_PRODUCER_EPOCH (-4047)         /* Kafka INVALID_PRODUCER_EPOCH (47) */
#define GR_LOG_ERR_INVALID_TXN_STATE (-4048)              /* Kafka INVALID_TXN_STATE (48) */
#define GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED (-4052) /* Kafka TRANSACTION_COORDINATOR_FENCED (52) */

/* One aborted transaction (Kafka's AbortedTxn, an entry of a segment's .txnindex file, storage/format.md);
   Fetch answers producer_id and first_offset (FetchResponse AbortedTransaction). */
struct gr_aborted_txn {
    int64_t producer_id;        /* the transaction's producer */
    int64_t first_offset;       /* offset of its first record */
    int64_t last_offset;        /* offset of its ABORT marker */
    int64_t last_stable_offset; /* the last stable offset when the marker was written */
};

/* Appends ONE already-validated record batch (the caller ran the validator; magic 2, lengths and CRC are
   trusted). Patches base offset and partition leader epoch IN PLACE in `batch` (outside the CRC span), then
   writes it with one write at the end of the active segment (rolling first when segment.bytes, segment.ms,
   a full index or a relative offset overflow require it), updates the in-memory indexes, the producer
   state and the log end offset, and asks the flushers for a group commit when flush.messages/flush.ms say
   so. If `log_append_time_ms >= 0` the batch becomes LogAppendTime as Kafka's broker does: max timestamp :=
   log_append_time_ms, attribute bit 3 set, and the CRC-32C is RECOMPUTED (these bytes are in the CRC span).
   A batch with a producer id is first judged by the idempotence rules (gr_producer_state_check) against the
   partition's producer state, and the state is updated by the same call once the write succeeded, so the
   check and the append are one step. A DUPLICATE is not written: 0 is returned with res->duplicate set and
   res filled as Kafka answers a duplicate (the original's base and last offset, log_append_time_ms := the
   original batch's max timestamp, the current log start offset); the caller must not acknowledge it
   before the original's last offset is as durable as the request asks.
   A control batch (an end-transaction marker: gr_log_write_marker builds it) is judged by Kafka's
   appendEndTxnMarker rules instead, and a non-transactional batch of a producer whose transaction is open
   is refused (storage/producer_state.h gr_producer_state_check). A marker that completes an ABORTED
   transaction appends its entry to the .txnindex of the segment it lands in (UnifiedLog.append ->
   LogSegment.updateTxnIndex).
   Returns 0 and fills `res`, or: GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE, GR_LOG_ERR_INVALID_PRODUCER_EPOCH,
   GR_LOG_ERR_INVALID_TXN_STATE, GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED (log unchanged), -ENOMEM (no room
   for the producer's state; log unchanged), -EMSGSIZE (len > the topic's max.message.bytes, else the
   store's), -EINVAL (len < 61 or the batch's length field disagrees with `len`), -ENOSPC/-EIO (the write
   failed; the log is unchanged: readers never see the partial bytes, and the housekeeping thread truncates
   them away), -EAGAIN (that truncation is not done yet: nothing may be appended after a torn batch;
   retriable, Kafka's KAFKA_STORAGE_ERROR), -EROFS (the log is offline: the undo itself failed, or an fsync
   failed). No file is created, truncated or synced on the calling thread: a roll due by segment.bytes,
   segment.ms or a full index uses a spare file made ahead by the housekeeping thread, and when none is ready
   yet the batch goes to the active segment, which then exceeds segment.bytes until the first append after the
   spare is ready, never past twice segment.bytes (storage/roll.c; only a roll at that bound or forced by a
   31-bit position or relative offset overflow still creates its files here, and the spare is asked for at
   half of every limit). */
int gr_log_append(struct gr_log *log, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                  struct gr_append_result *res);

/* Builds and appends an end-transaction marker for producer `producer_id` at `producer_epoch` (Kafka's
   MemoryRecords.withEndTransactionMarker appended by UnifiedLog.appendAsLeader with origin COORDINATOR): a
   RecordBatch v2 with attributes transactional|control, base sequence -1, one record at `now_ms` whose key
   is (version 0, type: GR_CONTROL_COMMIT or GR_CONTROL_ABORT) and value (version 0, coordinator_epoch).
   As gr_log_append (its checks: GR_LOG_ERR_INVALID_PRODUCER_EPOCH for an epoch below the producer's, or
   with `transaction_version` >= 2 (WriteTxnMarkers v2's TransactionVersion, KIP-1228) at or below it
   unless it equals it while no transaction of the producer is open (a retried marker, written again:
   KAFKA-19999); GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED for a coordinator epoch below the producer's;
   storage/producer_state.h gr_producer_state_check); -EINVAL for a producer id < 0 or another type. The
   batch lives on the stack (no allocation). */
int gr_log_write_marker(struct gr_log *log, int64_t producer_id, int16_t producer_epoch,
                        int32_t coordinator_epoch, int type, int16_t transaction_version, int64_t now_ms,
                        struct gr_append_result *res);

/* The first unstable offset (UnifiedLog.firstUnstableOffset): the first offset of the oldest transaction
   that is open or whose marker is not yet below the high watermark (gr_log_set_high_watermark), raised to
   the log start offset; -1 when there is none. O(1). */
int64_t gr_log_first_unstable_offset(const struct gr_log *log);

/* The aborted transactions a read_committed fetch of [start_offset, upper_bound) reports
   (UnifiedLog.collectAbortedTransactions): the .txnindex entries with last_offset >= start_offset and
   first_offset < upper_bound, of the segment holding start_offset and then of each later segment, stopping
   at the first entry whose last_stable_offset >= upper_bound (LogSegment.collectAbortedTxns,
   TransactionIndex.collectAbortedTxns), in index order, into out[0..cap). From memory (no I/O). Returns how
   many there are (more than `cap`: only cap written). */
int gr_log_aborted_txns(const struct gr_log *log, int64_t start_offset, int64_t upper_bound,
                        struct gr_aborted_txn *out, int cap);

/* ---- Replication: the follower's log (storage/replica.c, storage/truncate.c) ---- */

/* Appends record batches fetched from the leader exactly as the leader wrote them (Kafka's
   UnifiedLog.appendAsFollower, AppendOrigin.REPLICATION): `records` (borrowed, never written) is one or more
   whole batches, `len` bytes. Base offsets, partition leader epochs, timestamps, attributes and CRCs are
   kept; nothing is assigned, recompressed or re-stamped. First every batch is checked (whole, magic 2,
   lengths, CRC-32C: -EBADMSG, Kafka's CorruptRecordException; the first base offset equal to the log end
   offset and each next one continuing the last: -ERANGE, Kafka's UnexpectedAppendOffsetException); a refusal
   writes nothing. Then the batches are written with one pwrite per chunk: a chunk ends where a batch needs a
   roll by gr_log_append's rules (segment.bytes, segment.ms, a full index, 31-bit limits; a soft roll may wait
   for its spare file). The leader epoch cache learns each batch's epoch (LeaderEpochFileCache.assign via
   UnifiedLog.maybeAssignEpochStartOffset; entries past the log end offset that no batch carries go first,
   and the log's leader epoch rises to the batches'), and producer state takes every batch without the
   sequence and epoch checks (an epoch regression is logged, not refused) so that this replica dedups
   retries once it leads. max.message.bytes is not applied (the leader did). Fills `res` (base and last
   offset of what was appended, -1/-1 for len 0; log_append_time_ms -1; duplicate false). Returns 0, or
   -EBADMSG / -ERANGE (nothing written), -EAGAIN (a failed write or a truncation is being finished:
   retriable), -EROFS (offline), -ENOSPC/-EIO (the write of a chunk failed: the chunks before it stay
   appended, `res` and the log end offset say how far). Network thread; no disk wait but gr_log_append's. */
int gr_log_append_replica(struct gr_log *log, const uint8_t *records, size_t len,
                          struct gr_append_result *res);

/* Raises the log start offset to the leader's (UnifiedLog.maybeIncrementLogStartOffset with
   LeaderOffsetIncremented): never down, and at most to the log end offset (a larger one is clamped: the
   whole log goes, the fetcher then finds its offset out of the leader's range). Segments wholly below go,
   producer state and leader epochs are pruned, and the log-start-offset checkpoint is queued (as
   DeleteRecords'). Returns 1 when raised, 0 when not above the current one, -EAGAIN (a truncation is being
   finished), -EROFS. */
int gr_log_raise_start_offset(struct gr_log *log, int64_t offset);

/* Truncates the log to `offset` (UnifiedLog.truncateTo, KIP-101/KIP-279): every batch holding an offset at
   or past it goes (a batch holding `offset` goes whole: the new log end offset is its base offset); an offset
   below the first segment is truncate_fully_and_start_at. The log start offset becomes min(it, the new end).
   Done in two halves (storage/truncate.c): the in-memory cut at once (segments, indexes, the log end,
   durable, recovery point and high watermark offsets, the leader epoch cache by
   LeaderEpochFileCache.truncateFromEnd, producer state reloaded from the newest snapshot at or below the new
   end and replayed up to it), so no read sees a half-cut log; the file work (ftruncate, fdatasync, unlinks,
   index files, the new active segment's files, checkpoints) on the housekeeping thread, during which
   appends, retention and truncations answer -EAGAIN (gr_log_truncation_pending); its end is reported
   through the store's on_flushed (err < 0: the log went offline). Its reads (the cut's index and batch
   headers, a file the fd cap closed, one producer snapshot and the headers after it) are made before the
   cut: with an I/O pool (gr_store_set_iopool) as no-wait reads, what is cold going to the pool in rounds
   (-EAGAIN meanwhile, with appends, retention and truncations held as during the file work, and
   gr_log_truncation_pending true; each round's end is reported through on_flushed, then call again; after
   16 rounds, pages evicted again each time, it reads on the calling thread); without a pool on the calling
   thread. Returns 0 (also when `offset` >= the log end offset: nothing to do), -EINVAL (offset < 0),
   -EAGAIN (reads on the pool, file work of a failed write or an earlier truncation, compaction, or a flush
   naming a segment still in flight: retry), -ENOMEM (nothing changed), -EROFS (offline), or -errno of a
   read (-EIO: nothing changed, or the log is offline when the read failed during the cut or the producer
   state's rebuild). */
int gr_log_truncate_to(struct gr_log *log, int64_t offset);
/* Drops every segment and restarts the log empty at `offset` (UnifiedLog.truncateFullyAndStartAt): log
   start, log end, durable, recovery point and high watermark offsets all become `offset`, the leader epoch
   cache is cleared (clearAndFlush), producer state emptied and its snapshots deleted. In two halves as
   gr_log_truncate_to. Returns 0, -EINVAL, -EAGAIN, -ENOMEM, -EROFS. */
int gr_log_truncate_fully_and_start_at(struct gr_log *log, int64_t offset);
/* True while a truncation's file half is queued or running, or its reads are on the I/O pool (appends
   answer -EAGAIN). Thread-safe. */
bool gr_log_truncation_pending(const struct gr_log *log);

/* Asks the flushers to fdatasync this log now (group commit: one fdatasync covers every append so far).
   Completion arrives through the store's on_flushed. Does nothing if the log is already durable up to its
   end or offline. */
void gr_log_flush_async(struct gr_log *log);

int64_t gr_log_start_offset(const struct gr_log *log);
int64_t gr_log_end_offset(const struct gr_log *log);
/* An upper bound on the end offset (last offset + 1) of the latest non-control batch (data, as against a
   transaction marker: the batch attributes' control bit, Kafka's RecordBatch.isControlBatch): exact after a
   leader or follower append, lowered to the new end by a truncation, the log end offset right after open
   (the batch attributes are not read then). Feeds the caught-up offset (storage/lag.h gr_lag_caught_up).
   Network thread. */
int64_t gr_log_data_end_offset(const struct gr_log *log);
/* End offset of the fdatasynced prefix (thread-safe). */
int64_t gr_log_durable_offset(const struct gr_log *log);
/* True after a failed fsync or a failed undo of a failed write (thread-safe). */
bool gr_log_offline(const struct gr_log *log);
/* Leader epoch stamped on new batches: each open of the log starts a new epoch (persisted with its start
   offset in leader-epoch-checkpoint). */
int32_t gr_log_leader_epoch(const struct gr_log *log);
/* Cluster mode: the controller's leader epoch of this partition (cluster/image.h), taken when it is above the
   log's: new batches carry it and the leader epoch cache gets an entry at the log end offset (replacing the
   last one when no batch has it yet, Kafka's LeaderEpochFileCache.assign). A lower epoch changes
   nothing, nor an equal one the cache already ends with (a follower's appends may have removed the entry
   an open added for it: gr_log_append_replica). Returns 0 or -ENOMEM. Network thread only. */
int gr_log_set_leader_epoch(struct gr_log *log, int32_t epoch);

/* A pointer the server keeps per log (its wait list of parked requests); NULL until set. Storage never
   reads it; the log (and so the pointer) lives until gr_store_close. Network thread only. */
void gr_log_set_user(struct gr_log *log, void *user);
void *gr_log_user(const struct gr_log *log);

/* Returns borrowed: the topic and partition index this log belongs to. */
struct gr_topic *gr_log_topic(const struct gr_log *log);
int32_t gr_log_partition(const struct gr_log *log);

/* Tells storage the high watermark the server serves (checkpointed to replication-offset-checkpoint and,
   once set after an open, used as the retention bound instead of the durable offset). Clamped to
   [log start, log end]. */
void gr_log_set_high_watermark(struct gr_log *log, int64_t high_watermark);
/* The last high watermark set, else the one restored from replication-offset-checkpoint at open, else -1. */
int64_t gr_log_high_watermark(const struct gr_log *log);

/* Exempts the active segment's file of `log` from the open-file cap (gregor.open.files.max) from now on,
   the next active segments after rolls too; reopens it now if the cap had closed it (that open may wait
   for the disk: call it where waiting is allowed, e.g. at the group coordinator's start). For logs whose
   appenders cannot park for a reopen on the I/O pool: the group coordinator's __consumer_offsets
   partitions (at most offsets.topic.num.partitions files). Returns 0, or -errno from the open. */
int gr_log_keep_active_open(struct gr_log *log);

/* A read: whole batches as a file range for sendfile.
   `fd`/`file_pos`/`bytes`: the range; `first_batch_offset`: base offset of its first batch (may be below
   the requested offset: a batch is never split); `ref`: the segment reference the slice holds. */
struct gr_log_slice {
    int fd;
    int64_t file_pos;
    int64_t bytes;
    int64_t first_batch_offset;
    void *ref;
    void *work; /* a cold slice's pool work (open / index load, storage-private), else NULL */
};
/* Fills `slice` with whole batches from the first batch containing `offset`. Only batches whose last
   offset < upper_bound (the high watermark) are included; at most max_bytes bytes of whole batches, except
   that with min_one the first batch is returned whole even when larger (KIP-74). A slice NEVER spans two
   segments: when it ends at a segment's end and more is wanted, call again at the next offset.
   Returns 0 (slice->bytes may be 0: offset >= upper_bound, or max_bytes too small without min_one; then
   fd is -1 and ref NULL), -ERANGE when offset < log start offset or offset > log end offset
   (OFFSET_OUT_OF_RANGE), -EROFS when offline, or -errno when the segment file cannot be read. A slice
   with bytes > 0 retains the segment: its fd stays valid across retention, deletion and topic deletion
   until gr_log_slice_release. */
int gr_log_read(struct gr_log *log, int64_t offset, int64_t max_bytes, int64_t upper_bound, bool min_one,
                struct gr_log_slice *slice);
/* The upper bound offset of a read_committed fetch's aborted transactions for `slice` (Kafka's
   LocalLog.addAbortedTransactions: LogSegment.fetchUpperBoundOffset, else the next segment's base offset,
   else the log end offset): the offset of the first offset-index entry at or past the slice's end in its
   segment (an offset outside the slice, not always the smallest), else the next segment's base offset, else
   the log end offset. No I/O. */
int64_t gr_log_slice_upper_bound(const struct gr_log *log, const struct gr_log_slice *slice);
/* Drops the slice's reference (closing the fd if the segment was deleted meanwhile). Idempotent. */
void gr_log_slice_release(struct gr_log_slice *slice);
/* gr_log_read that never waits for the disk (storage/residency.c): when the lookup would read a page of
   batch headers that is not in the page cache, or index files not loaded yet, returns -EAGAIN and fills
   `cold` with what to read in (give it to gr_log_slice_prefetch on an I/O pool thread, release it after),
   then call again. Otherwise as gr_log_read (cold is then empty). Network thread. */
int gr_log_read_nowait(struct gr_log *log, int64_t offset, int64_t max_bytes, int64_t upper_bound,
                       bool min_one, struct gr_log_slice *slice, struct gr_log_slice *cold);
/* Network thread, after gr_log_slice_prefetch of a `cold` slice returned: moves what the pool opened or
   loaded (a .log descriptor, indexes) into the segment, keeping the slice's reference (the descriptor stays
   pinned until gr_log_slice_release). Idempotent; gr_log_slice_release does it too. */
void gr_log_slice_install(struct gr_log_slice *slice);
/* No-wait forms of gr_log_offset_for_time and gr_log_max_timestamp (ListOffsets): -EAGAIN with `cold` to
   prefetch on the pool as for gr_log_read_nowait (an index to load, a closed file to open, a header or
   batch page not in the page cache), else as the blocking forms. Network thread. */
int gr_log_offset_for_time_nowait(struct gr_log *log, int64_t ts, int64_t upper_bound, int64_t *offset,
                                  int64_t *timestamp, int32_t *leader_epoch, struct gr_log_slice *cold);
int gr_log_max_timestamp_nowait(struct gr_log *log, int64_t upper_bound, int64_t *offset, int64_t *timestamp,
                                int32_t *leader_epoch, struct gr_log_slice *cold);
/* Appends need the active segment's .log open; the fd cap (open_segment_fds_max) closes it while the
   partition is idle. Returns true when it is open (gr_log_append will not open a file). Network thread. */
bool gr_log_append_ready(struct gr_log *log);
/* Pins the active segment's .log for appends: fills `pin` with a reference that keeps the fd cap from
   closing that file (it may exceed the cap meanwhile; the next gr_store_fds_trim after the release closes
   it). Returns 0 when the file is open (gr_log_append will not open it while pinned), 1 when the cap had
   closed it: `pin` then carries pool work, so run gr_log_slice_prefetch on an I/O pool thread, then
   gr_log_slice_install on this one, before appending. Release the pin after the appends (either case).
   Returns -EROFS when the log is offline or deleted (the append answers that; `pin` empty), -ENOMEM.
   A roll (retention of an expired active segment) makes another segment active: recheck
   gr_log_append_ready. Network thread. */
int gr_log_append_prepare(struct gr_log *log, struct gr_log_slice *pin);
/* Cold reads (storage/residency.c). Returns 1 when every page of the slice's range is in the page cache,
   0 when some page is not (sending it would wait for the disk), -errno when it cannot be told. Never
   waits for the disk; network thread. */
int gr_log_slice_resident(const struct gr_log_slice *slice);
/* Copies `slice` into `copy` with a reference of its own (release both). Thread-safe. */
void gr_log_slice_retain(const struct gr_log_slice *slice, struct gr_log_slice *copy);
/* Reads the slice's whole range (pread, 1 MiB at a time) so that it is in the page cache afterwards. BLOCKS
   on the disk: call it on an I/O pool thread (storage/iopool.h) with a slice of its own (retained), or
   with a `cold` slice from gr_log_read_nowait. Returns 0, or -errno (-EIO if the file ended early). */
int gr_log_slice_prefetch(const struct gr_log_slice *slice);

/* ListOffsets by time: the first record (at or above the log start offset, in a batch whose last offset is
   below upper_bound) with timestamp >= ts; the time index finds the batch, then its records are scanned
   (decompressed when needed). Returns 0 with the record's own offset and timestamp and the batch's
   partition leader epoch; -ENOENT if there is none; -errno on read errors. For a LogAppendTime batch every
   record carries the batch's max timestamp. */
int gr_log_offset_for_time(struct gr_log *log, int64_t ts, int64_t upper_bound, int64_t *offset,
                           int64_t *timestamp, int32_t *leader_epoch);
/* ListOffsets -3 (MAX_TIMESTAMP): the first record carrying the largest timestamp among batches whose last
   offset < upper_bound. Returns 0, -ENOENT if there is no such batch, or -errno. */
int gr_log_max_timestamp(struct gr_log *log, int64_t upper_bound, int64_t *offset, int64_t *timestamp,
                         int32_t *leader_epoch);

/* DeleteRecords, in two halves so that the network thread never waits for the checkpoint file:
   begin: validates `offset` (the caller checked offset <= high watermark) and notes it as in flight:
   returns 1 (then write the checkpoint with gr_store_log_start_checkpoint_async and, once
   gr_store_checkpoint_poll says it is done, call end), 0 when offset <= log start offset (nothing to do;
   do not call end), -ERANGE if offset > log end offset, -EROFS when offline. No I/O.
   end: `err` is the checkpoint's outcome (0 durable, or -errno, or any -errno to give up, e.g. a request
   timeout). With err 0 it advances the log start offset to `offset` (unless already further), deletes
   whole segments wholly below it (unlinked by the housekeeping thread), prunes producer state and leader
   epochs; returns 0, or -EROFS when the log went offline or was deleted meanwhile. With err < 0 the log
   start offset is unchanged and err is returned.
   The checkpoint file never goes below an offset in flight: every checkpoint written between begin and end
   carries max(log start offset, offsets in flight). So after a failed or abandoned DeleteRecords the
   file may still hold its offset (a restart then starts the log there), as the outcome of a Kafka
   DeleteRecords that failed is unknown to its client; an answered one is always in the file. */
int gr_log_delete_records_begin(struct gr_log *log, int64_t offset);
int gr_log_delete_records_end(struct gr_log *log, int64_t offset, int err);
/* begin, checkpoint, WAIT for it, end: BLOCKS on the housekeeping thread's write. Tests and tools only.
   Returns 0 (also when offset <= log start: nothing to do), -ERANGE, -EROFS, or the checkpoint's -errno
   (log start offset unchanged). */
int gr_log_delete_records(struct gr_log *log, int64_t offset);

/* OffsetForLeaderEpoch (KIP-320): for the largest known epoch <= `epoch`, its end offset: the start offset
   of the next higher epoch, or the log end offset when `epoch` is the current epoch. Returns 0 with
   *end_offset and *epoch_out, or -ENOENT when `epoch` is below the first known epoch or above the current
   one. */
int gr_log_end_offset_for_epoch(struct gr_log *log, int32_t epoch, int64_t *end_offset, int32_t *epoch_out);
/* Leader epoch of the batch holding `offset` (from the leader epoch cache), -1 if unknown or out of range. */
int32_t gr_log_epoch_for_offset(struct gr_log *log, int64_t offset);

/* Bytes of all segment files of the log (.log only). */
int64_t gr_log_size_bytes(const struct gr_log *log);
/* Number of segments (>= 1). */
int gr_log_segment_count(const struct gr_log *log);

/* Drops the state of producers silent for producer.id.expiration.ms (gr_producer_state_expire); later
   batches of such a producer are accepted at any sequence. Returns the number dropped. */
size_t gr_log_expire_producers(struct gr_log *log, int64_t now_ms, int64_t expiration_ms);

/* Returns borrowed: the idempotence state of this partition (storage/producer_state.h). */
const struct gr_producer_state *gr_log_producer_state(const struct gr_log *log);

#endif
