/*
 * partition.h: the data plane of one partition, between storage/ (the log) and coordinator/ and server/.
 * One struct gr_partition per partition log: it wraps that log (storage/log.h), decides what is visible
 * (the visible offset: today the durable offset when the set was created with visible_is_durable, Gregor's
 * gregor.acks.all.fsync default, else the log end offset; with replication it becomes the high watermark
 * driven by the followers) and owns the partition's named waits. Around the partitions: the cold-read engine
 * (struct gr_cold, cold.c: until cold pages are resident / files are open), the append gate (gate.c: until
 * the partition is appendable, per-partition order) and read planning (read.c: Fetch, ListOffsets and
 * OffsetForLeaderEpoch from plain parameters to plain results), declared further down.
 *
 * Named waits: a caller embeds a struct gr_partition_waiter in its own memory, sets its done hook
 * (gr_partition_waiter_init) and queues it with one of
 *   gr_partition_wait_committed          until the visible offset reaches an end offset (Produce acks=-1,
 *                                        OffsetCommit, the SyncGroup assignment's record);
 *   gr_partition_wait_data               until data is visible past an offset (a consumer's long-poll Fetch);
 *   gr_partition_wait_fetchable          until data is readable past an offset under a fetch isolation: the
 *                                        visible offset for consumers, the log end offset for followers
 *                                        (a follower's long-poll Fetch wakes on the leader's appends);
 *   gr_partition_wait_log_start_durable  until a log-start-offset checkpoint is durable (DeleteRecords);
 *   gr_partition_wait_low_watermark      until the low watermark reaches an offset (DeleteRecords on a
 *                                        leader with followers, Kafka's DelayedDeleteRecords).
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
 * The section at the end of this file declares, without implementing, the operations replication and
 * transactions will add (append as follower, truncation, role and leader epoch, the high watermark from the
 * replicas' offsets, the last stable offset, aborted transactions), each naming its Kafka counterpart.
 *
 * Replication, leader side (replica.c, at the end of this file): gr_partition_set_role gives a partition its
 * role, epochs, replicas and ISR; followers' fetches, ISR changes proposed to the owner through hooks and
 * their outcomes drive the high watermark, which a leader with followers shows as its visible offset.
 *
 * Read next: partition/partition.c, partition/cold.c, partition/gate.c, partition/read.c,
 * partition/replica.c, storage/log.h, server/broker.c (the server binding: flush completions, request waits).
 */
#ifndef GR_PARTITION_H
#define GR_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "common/arena.h"
#include "storage/iopool.h"
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

/* The owner is stopping (shutdown, before the pool is drained): from now on the cold-read engine's jobs
   complete without calling any done hook (they release what they hold), so a stop while waiting runs
   nothing. */
void gr_partitions_stop(struct gr_partitions *ps);
bool gr_partitions_stopped(const struct gr_partitions *ps);

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
    int16_t acks;        /* the request's acks (0, 1 or -1): -1 is refused NOT_ENOUGH_REPLICAS before the
                            append while the ISR is below the effective min ISR (gr_partition_check_produce_acks) */
    bool txn_verified;   /* the caller verified that the batch's producer has this partition in its ongoing
                            transaction (KIP-890): only then is a transactional batch taken (else
                            INVALID_RECORD); control batches are always INVALID_RECORD from a client */
    bool txn_guarded;    /* the verdict came before this call (a coordinator on another broker): the batch
                            is taken only while gr_partition_txn_guard_holds(txn_guard), checked at the
                            append (UnifiedLog.analyzeAndValidateProducerState); else INVALID_TXN_STATE */
    uint64_t txn_guard;  /* with txn_guarded: what gr_partition_txn_verify_start gave before the question */
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

/* ---- Verification guards (KIP-890 part 1: Kafka's VerificationStateEntry and VerificationGuard) ----
 * A leader that asks a coordinator elsewhere whether a producer's transaction holds this partition takes a
 * guard first; the producer's next transactional append here (its first batch, or an end marker) drops it,
 * so a marker that lands between the coordinator's answer and the append makes the append fail. */

/* Kafka's VerificationGuard.SENTINEL: verifies nothing (only an ongoing transaction lets such a batch in). */
#define GR_TXN_GUARD_SENTINEL 0
/* Before the question (UnifiedLog.maybeStartTransactionVerification): *guard = SENTINEL when the log already
   holds `producer_id`'s ongoing transaction at `producer_epoch` (hasOngoingTransaction: no question needed;
   the append still requires it ongoing), else the guard of the producer's verification entry here (made
   now, or the one already there: one per producer id, as maybeCreateVerificationStateEntry; at most
   GR_TXN_GUARDS_MAX, the oldest dropped past it). Returns 0 or -ENOMEM. Owning thread. */
int gr_partition_txn_verify_start(struct gr_partition *part, int64_t producer_id, int16_t producer_epoch,
                                  uint64_t *guard);
/* At the append (analyzeAndValidateProducerState's batchMissingRequiredVerification): true when the log
   holds the producer's ongoing transaction at `producer_epoch`, or `guard` (not SENTINEL) is still the
   producer's entry (no transactional batch or marker of the producer appended here since it was taken). */
bool gr_partition_txn_guard_holds(const struct gr_partition *part, int64_t producer_id,
                                  int16_t producer_epoch, uint64_t guard);
/* Drops every verification entry (a role change: a guard taken under another leadership never holds). */
void gr_partition_txn_guards_clear(struct gr_partition *part);

/* Validates one partition's records and appends them: Kafka's UnifiedLog.analyzeAndValidateRecords and
   LogValidator in their order (exactly one RecordBatch v2; max.message.bytes on the batch as sent; framing,
   CRC and records; control batches refused, transactional ones unless args->txn_verified; zstd only from v7;
   a compressed record longer than max.decompressed.message.bytes; null keys on compacted topics; each
   record's timestamp within message.timestamp.before/after.max.ms under CreateTime, the max timestamp set,
   LogAppendTime stamped by the append), recompresses to `policy`'s compression.type when it names another
   codec, then appends through gr_partition_append (storage's producer-state checks:
   OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE for a non-transactional batch of a
   producer whose transaction is open; duplicates). A transactional batch opens its producer's transaction at
   its first offset. `policy` is the topic's typed policy (gr_topic_policy); refusal messages are allocated in
   `arena`. Fills `out` and returns its error_code (0: appended). Owning thread. */
int16_t gr_partition_produce(struct gr_partition *part, const struct gr_log_config *policy,
                             const struct gr_produce_args *args, struct gr_arena *arena,
                             struct gr_produce_result *out);

/* Produce acks=-1 while its answer waits until committed (ReplicaManager's DelayedProduce.tryComplete over
   Partition.checkEnoughReplicasReachOffset(requiredOffset)): re-checked by the waiting request at each done
   hook of its committed wait on `part`. Returns 1 while the visible offset (a leader's high watermark) is
   below `end_offset` (the gr_produce_result's end_offset) and the partition can still commit it; else 0 and
   *error_code set: NONE (committed, enough replicas), NOT_ENOUGH_REPLICAS_AFTER_APPEND (committed, but the
   maximal ISR is now below the effective min ISR: gr_partition_check_enough_replicas), NOT_LEADER_OR_FOLLOWER
   (this broker became a follower: only a leader commits) or KAFKA_STORAGE_ERROR (the log went offline). The
   deadline's REQUEST_TIMED_OUT is the caller's. Owning thread. */
int gr_partition_produce_acked(struct gr_partition *part, int64_t end_offset, int16_t *error_code);

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
   visible: Kafka's "the high watermark passed the append"), or with -EROFS once the log is offline, or with
   -EXDEV on a follower (gr_partition_set_role: at once, or when a leader becomes follower). `w` must be
   idle. */
void gr_partition_wait_committed(struct gr_partition *part, struct gr_partition_waiter *w,
                                 int64_t end_offset);
/* Until data arrives: done once gr_partition_visible_offset(part) > offset (a record at or past `offset`
   is visible; appends and visible-offset moves wake it), or with -EROFS once the log is offline. The same as
   gr_partition_wait_fetchable with GR_FETCH_HIGH_WATERMARK. */
void gr_partition_wait_data(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset);

/* What a fetch reads up to (Kafka's FetchIsolation, FetchIsolation.of): a consumer (replica id < 0) below
   the high watermark (the visible offset) under read_uncommitted, below the last stable offset under
   read_committed (TXN_COMMITTED, isolation_level 1), a follower (replica id >= 0,
   FetchRequest.isFromFollower) below the log end offset (LOG_END). */
enum gr_fetch_isolation {
    GR_FETCH_HIGH_WATERMARK = 0,
    GR_FETCH_LOG_END = 1,
    GR_FETCH_TXN_COMMITTED = 2,
};
/* The isolation of a fetch from `replica_id` (Fetch v15+ ReplicaState.ReplicaId, else ReplicaId): LOG_END
   for a broker id (>= 0), else HIGH_WATERMARK. */
static inline enum gr_fetch_isolation gr_fetch_isolation_of(int32_t replica_id)
{
    return replica_id >= 0 ? GR_FETCH_LOG_END : GR_FETCH_HIGH_WATERMARK;
}
/* The isolation of a fetch from `replica_id` at `isolation_level` (Fetch v4+ IsolationLevel: 1
   read_committed): FetchIsolation.of: LOG_END for a broker, TXN_COMMITTED for a read_committed consumer, else
   HIGH_WATERMARK. */
static inline enum gr_fetch_isolation gr_fetch_isolation_for(int32_t replica_id, int8_t isolation_level)
{
    if (replica_id >= 0) return GR_FETCH_LOG_END;
    return isolation_level == 1 ? GR_FETCH_TXN_COMMITTED : GR_FETCH_HIGH_WATERMARK;
}
/* The offset a fetch under `iso` reads below now: the visible offset (gr_partition_visible_offset), the last
   stable offset (gr_partition_last_stable_offset) or the log end offset (DelayedFetch.tryComplete's
   endOffset). */
int64_t gr_partition_fetch_bound(struct gr_partition *part, enum gr_fetch_isolation iso);
/* Until data is readable under `iso`: done once gr_partition_fetch_bound(part, iso) > offset, or with -EROFS
   once the log is offline. GR_FETCH_HIGH_WATERMARK is gr_partition_wait_data. GR_FETCH_TXN_COMMITTED (a
   read_committed long poll) waits "until the last stable offset moves" past `offset`: appends, markers,
   flushes and high watermark moves wake it. GR_FETCH_LOG_END (a
   follower's long poll): appends wake it whatever the visible offset (with visible_is_durable too, before
   the flush); a leader only serves followers, so it is done with -EXDEV on a follower (at once, or when a
   leader becomes follower: DelayedFetch's "no longer the leader" case). `w` must be idle. */
void gr_partition_wait_fetchable(struct gr_partition *part, struct gr_partition_waiter *w,
                                 enum gr_fetch_isolation iso, int64_t offset);
/* A long poll's next round: queues `w` again (idle, its last wait a gr_partition_wait_data or
   gr_partition_wait_fetchable) with that wait's isolation, past what that isolation reads now. */
void gr_partition_wait_data_again(struct gr_partition *part, struct gr_partition_waiter *w);
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

/*
 * Cold reads: the one engine for "look up without waiting -> I/O-pool round -> install -> retry" (cold.c).
 * A caller (one request) owns one struct gr_cold, zeroed or set by gr_cold_init. Its lookups and reads go
 * through gr_cold_read / gr_cold_offset_for_time / gr_cold_max_timestamp (or the read plans below): each
 * runs without waiting for the disk and, when it needs a closed file opened, indexes loaded or a page read
 * in, notes that work and answers -EAGAIN (GR_PARTITION_COLD for a plan). Data ranges about to be sent are
 * checked with gr_cold_check_range (once per caller). Then gr_cold_wait: named wait "until cold pages are
 * resident / files are open": ONE pool job per round does every noted piece, the results are installed on
 * the owning thread, and the done hook runs exactly once: at once (inside gr_cold_wait) when nothing was
 * noted, else after the round; never after gr_cold_cancel or once the set is stopped. The caller then
 * looks up again (its state may have moved meanwhile). What a round opened or loaded stays pinned (the fd
 * cap never closes it) until gr_cold_release, so a caller naming more partitions than
 * gregor.open.files.max needs a few rounds, not one per eviction. After GR_COLD_ROUNDS_MAX rounds with
 * lookups (pages evicted again each time), without a pool, or out of memory, lookups read the blocking way.
 * Owning thread only, as everything in this file.
 */
#define GR_COLD_ROUNDS_MAX 16

struct gr_cold;
struct gr_cold_job;
/* The done hook of gr_cold_wait: called once per wait on the owning thread; may look up and wait again. */
typedef void (*gr_cold_done_fn)(struct gr_cold *c);

/* Lives in its caller's memory. `done` and `ctx` are the caller's; the rest is private. */
struct gr_cold {
    gr_cold_done_fn done;
    void *ctx;
    /* private: */
    struct gr_partitions *ps;
    struct gr_iopool *pool;
    struct gr_log_slice *work; /* lookups noted since the last wait (pinned after their round) */
    int work_count, work_cap;
    struct gr_log_slice *ranges; /* retained copies of data ranges to read in (dropped after) */
    int range_count, range_cap;
    struct gr_log_slice *pins; /* what the rounds opened and loaded, kept until gr_cold_release */
    int pin_count, pin_cap;
    struct gr_cold_job *job; /* the round in flight */
    int rounds;              /* rounds with lookups */
    bool ranges_read;        /* data ranges were handed to a round (once per caller) */
};

/* Sets up `c` (zeroed, or released) for the partitions of `ps`, handing its rounds to `pool` (borrowed,
   storage/iopool.h; NULL: every lookup reads the blocking way), with done hook `done` and `ctx`. */
void gr_cold_init(struct gr_cold *c, struct gr_partitions *ps, struct gr_iopool *pool, gr_cold_done_fn done,
                  void *ctx);
/* gr_log_read (storage/log.h) the no-wait way: -EAGAIN with the work noted, else gr_log_read's results. */
int gr_cold_read(struct gr_cold *c, struct gr_log *log, int64_t offset, int64_t max_bytes,
                 int64_t upper_bound, bool min_one, struct gr_log_slice *slice);
/* gr_log_offset_for_time and gr_log_max_timestamp the no-wait way: -EAGAIN with the work noted, else theirs.
 */
int gr_cold_offset_for_time(struct gr_cold *c, struct gr_log *log, int64_t ts, int64_t upper_bound,
                            int64_t *offset, int64_t *timestamp, int32_t *leader_epoch);
int gr_cold_max_timestamp(struct gr_cold *c, struct gr_log *log, int64_t upper_bound, int64_t *offset,
                          int64_t *timestamp, int32_t *leader_epoch);
/* Notes the range of `slice` (borrowed; a copy is retained) to be read into the page cache when some page
   is not resident (gr_log_slice_resident: no disk wait). Does nothing once a round read ranges in: a
   range evicted again before it is sent is sent as is (one read-in per caller, no loop). */
void gr_cold_check_range(struct gr_cold *c, const struct gr_log_slice *slice);
/* Pins the active segment file of `log` for appends (gr_log_append_prepare): the fd cap never closes it
   until gr_cold_unpin or gr_cold_release. When the cap had closed it, its reopen is noted as work for the
   next round (then pinned). Returns 0 (pinned, or 1: noted), -EROFS (offline or deleted: nothing pinned, the
   append answers it) or -ENOMEM. */
int gr_cold_pin_append(struct gr_cold *c, struct gr_log *log);
/* Drops the pins (the next cap pass may close those files) and the noted work. Keeps the rounds count. */
void gr_cold_unpin(struct gr_cold *c);
/* True when work was noted since the last wait or reset. */
bool gr_cold_pending(const struct gr_cold *c);
/* Drops the work noted since the last wait (a caller starting its lookups over). Pins stay. */
void gr_cold_reset(struct gr_cold *c);
/* Until cold pages are resident / files are open: see above. Must not be called while waiting. */
void gr_cold_wait(struct gr_cold *c);
/* True while a round is in flight (its done hook not yet called). */
bool gr_cold_waiting(const struct gr_cold *c);
/* Rounds with lookups so far; pins held now (tests). */
int gr_cold_rounds(const struct gr_cold *c);
int gr_cold_pin_count(const struct gr_cold *c);
/* The done hook of the round in flight will not be called (the job releases its work itself). Nothing
   when not waiting. */
void gr_cold_cancel(struct gr_cold *c);
/* Cancels, drops noted work and pins, frees the engine's memory; `c` is then as zeroed. Idempotent. */
void gr_cold_release(struct gr_cold *c);

/*
 * The append gate (gate.c): named wait "until the partition is appendable", with per-partition order. An
 * append needs the active segment file of each partition open; the fd cap closes idle ones. A caller about
 * to append to a set of partitions (one Produce) enters the gate with them: every active file is pinned
 * (its struct gr_cold: the cap closes none of them while it runs, even past the cap); when some were
 * closed, the caller is queued while ONE pool round (the cold-read engine) reopens them. A later caller
 * naming a partition of a queued one queues behind it on that partition (per-partition FIFO order:
 * idempotent producers pipeline); a caller sharing no partition with a queued one goes ahead at once. Queued
 * callers run in arrival order once no earlier one shares a partition with them and their files are open;
 * only a roll of one of their partitions meanwhile (retention rolling an expired active segment) takes
 * another round (GR_GATE_OPEN_ROUNDS_MAX), and a file still closed after that is left to the append
 * (which answers KAFKA_STORAGE_ERROR for it). The done hook is called exactly once per queued caller, never
 * once the set is stopped. Owning thread only.
 */
#define GR_GATE_OPEN_ROUNDS_MAX 2

struct gr_append_gate;
/* err 0: every partition is appendable and pinned: append now, then drop the pins (gr_cold_unpin);
   -ENOMEM: nothing could be pinned (append nothing). The caller is already out of the gate. */
typedef void (*gr_gate_done_fn)(struct gr_append_gate *g, int err);

/* One caller's place in one partition's queue (caller memory, see gr_gate_enter). */
struct gr_gate_entry {
    struct gr_append_gate *g;
    struct gr_partition *part;
    struct gr_gate_entry *next;
};

/* A caller's gate state (in its memory). `done` and `ctx` are the caller's; the rest is private. */
struct gr_append_gate {
    gr_gate_done_fn done;
    void *ctx;
    /* private: */
    struct gr_partitions *ps;
    struct gr_cold *cold;          /* borrowed: pins and the reopen round */
    struct gr_log **logs;          /* borrowed: distinct */
    struct gr_gate_entry *entries; /* borrowed: one per log */
    int count;
    struct gr_append_gate *next; /* the set's FIFO */
    bool pinned, queued;
};

/* Enters the gate to append to `logs` (n distinct logs; borrowed with `entries`, caller
   memory for n entries, until done). `c` (borrowed, gr_cold_init'ed with the set's pool; the gate sets its
   done hook) pins the files. Returns 1 when appendable now (no done call: append, then gr_cold_unpin),
   0 when queued (done is called later, exactly once), or -ENOMEM (nothing pinned, nothing queued). */
int gr_gate_enter(struct gr_append_gate *g, struct gr_partitions *ps, struct gr_cold *c, struct gr_log **logs,
                  struct gr_gate_entry *entries, int n, gr_gate_done_fn done, void *ctx);
/* Callers queued in the set's gate now (tests). */
int gr_gate_queued(struct gr_partitions *ps);

/*
 * Read planning (read.c): the partition's answers to Fetch, ListOffsets and OffsetForLeaderEpoch, from plain
 * parameters to plain results, so handlers only translate request fields into these calls and results into
 * response fields. Results are Kafka error codes (protocol/errors.h), or GR_PARTITION_COLD: the answer
 * needs a cold-read round (noted in the engine): wait (gr_cold_wait) and plan again.
 */
#define GR_PARTITION_COLD (-1)

/* The current_leader_epoch check of a request (KIP-320): NONE when `current_leader_epoch` < 0 (not given)
   or equals the partition's leader epoch, FENCED_LEADER_EPOCH when older, UNKNOWN_LEADER_EPOCH when newer. */
int gr_partition_check_epoch(const struct gr_partition *part, int32_t current_leader_epoch);

/* A Fetch response's byte budget across its partitions (KIP-74). */
struct gr_fetch_budget {
    int64_t left;   /* bytes still allowed */
    bool have_data; /* some partition returned data: later ones no longer get a whole first batch */
};
/* The budget of one Fetch: max_bytes (v3+), capped by the broker's fetch.max.bytes (`cap_bytes`); 0 or
   less means the cap. */
void gr_fetch_budget_init(struct gr_fetch_budget *bud, int64_t max_bytes, int64_t cap_bytes);

/* One partition of a Fetch. */
struct gr_fetch_read {
    /* in */
    int64_t fetch_offset;
    int32_t current_leader_epoch;
    int64_t partition_max_bytes;
    int16_t version;            /* the Fetch version (the zstd rule) */
    int32_t last_fetched_epoch; /* Fetch v12+ LastFetchedEpoch: the epoch of the batch before fetch_offset
                                   in the fetcher's log; -1 not given (the wire's default) */
    int32_t replica_id;         /* the fetcher (Fetch v15+ ReplicaState.ReplicaId, v4-v14 ReplicaId): >= 0 a
                                   follower (gr_fetch_isolation_of), < 0 a consumer (-1, or -2 debugging);
                                   0 is broker 0: a consumer's read sets -1 */
    int64_t replica_epoch;      /* a follower's broker epoch (v15+ ReplicaState.ReplicaEpoch), -1 none */
    int64_t replica_log_start_offset; /* a follower's log start offset (the partition's LogStartOffset, v5+),
                                         -1 unknown */
    bool update_fetch_state; /* a follower's first read of this fetch (Kafka's updateFetchState: false
                                when a parked fetch reads again, ReplicaManager.readFromLog's
                                readFromPurgatory): its fetch state is recorded */
    bool read_committed;     /* a consumer's isolation_level 1: reads below the last stable offset
                                (FetchIsolation.TXN_COMMITTED); ignored for a follower */
    /* out */
    int64_t high_watermark;       /* the visible offset */
    int64_t last_stable_offset;   /* gr_partition_last_stable_offset (the response's LastStableOffset) */
    int64_t aborted_upper_bound;  /* read_committed with records: the upper bound for
                                     gr_partition_aborted_txns(fetch_offset, it) (gr_log_slice_upper_bound);
                                     -1 otherwise (no aborted transactions to report) */
    int64_t log_start_offset;     /* both set before any error: the caller shows -1 on errors */
    int32_t diverging_epoch;      /* >= 0: the fetcher's log diverges from this one (KIP-320 DivergingEpoch):
                                     the largest epoch <= last_fetched_epoch here ... */
    int64_t diverging_end_offset; /* ... and where it ends; no records then. Both -1 otherwise */
    struct gr_log_slice slice;    /* whole batches from fetch_offset below the high watermark, or below the
                                     log end offset for a follower (bytes 0: none; else the caller takes it:
                                     gr_log_slice_release) */
};
/* Reads one partition of a Fetch: the epoch check (FENCED/UNKNOWN_LEADER_EPOCH), the zstd rule (Fetch v4-v9
   on a topic with compression.type=zstd: UNSUPPORTED_COMPRESSION_TYPE, KIP-110, as Kafka 2.1-3.x), an
   offline log (KAFKA_STORAGE_ERROR), then at most min(partition_max_bytes, what the budget has left) bytes
   of whole batches below the visible offset, except that the first partition of the response that returns
   data gets at least one whole batch even when larger (KIP-74); the budget is charged. With a
   last_fetched_epoch (KIP-320, Partition.readRecords): its end offset here (gr_partition_epoch_end_offset)
   is looked up first: none known, or fetch_offset below the log start offset, is OFFSET_OUT_OF_RANGE; an
   epoch found below last_fetched_epoch or an end offset below fetch_offset answers the DivergingEpoch with
   no records.
   A follower's fetch (replica_id >= 0; Partition.fetchRecords with isFromFollower) is served by a leader
   only (NOT_LEADER_OR_FOLLOWER on a follower, after the epoch check) and from a follower of its replica set
   only (Partition.followerReplicaOrThrow: UNKNOWN_LEADER_EPOCH when current_leader_epoch was given, else
   NOT_LEADER_OR_FOLLOWER), reads below the log end offset (FetchIsolation.LOG_END; high_watermark still
   says the leader's high watermark), and with update_fetch_state, after a read that found no divergence and
   no error (or is cold with fetch_offset at or past the log start offset: the state is recorded before the
   round, once), records the follower's state: gr_partition_update_follower_fetch_state with ReplicaId,
   ReplicaEpoch, FetchOffset, LogStartOffset and the partition's clock (gr_partitions_set_replication's
   now_ms) as the fetch's time; the high watermark may move and waiters be done inside. Its errors: a stale
   broker epoch is NOT_LEADER_OR_FOLLOWER (Replica.updateFetchStateOrThrow), fetch_offset past the log end
   offset OFFSET_OUT_OF_RANGE; then no records and no budget charged.
   A read_committed consumer reads below the last stable offset instead, and gets aborted_upper_bound when
   records are returned (Kafka's LocalLog.read with includeAbortedTxns).
   Returns NONE, OFFSET_OUT_OF_RANGE, another Kafka error, or GR_PARTITION_COLD (slice empty). */
int gr_partition_fetch(struct gr_partition *part, struct gr_cold *c, struct gr_fetch_budget *bud,
                       struct gr_fetch_read *rd);

/* One ListOffsets answer. */
struct gr_offset_answer {
    int64_t offset;
    int64_t timestamp;
    int32_t leader_epoch;
};
/* ListOffsets for one partition, request version `version`: the epoch check, an offline log
   (KAFKA_STORAGE_ERROR), a special timestamp the version does not know or any other negative one
   (UNSUPPORTED_VERSION), then: -1 latest (the visible offset, the current leader epoch), -2 earliest and
   -4 earliest local (the log start offset and its epoch), -3 max timestamp (v7+) and ts >= 0 by time (the
   first record at or after it below the visible offset; none: -1/-1/-1), -5 and -6 (tiered storage: none,
   -1/-1/-1). A leader whose high watermark is below its leader epoch's start offset
   (gr_partition_leader_epoch_start_offset; a new leader whose followers have not caught up yet) answers
   OFFSET_NOT_AVAILABLE for -1, and for -3 and ts >= 0 when the record found in the whole log is at or past
   the high watermark or none is found; -2, -4, -5 and -6 are answered as always (Kafka's
   Partition.fetchOffsetForTimestamp with ReplicaManager.fetchOffset). *out is -1/-1/-1 unless answered.
   Returns NONE, a Kafka error, or GR_PARTITION_COLD. */
int gr_partition_list_offset(struct gr_partition *part, struct gr_cold *c, int16_t version,
                             int32_t current_leader_epoch, int64_t ts, struct gr_offset_answer *out);
/* gr_partition_list_offset under an isolation level (ListOffsets IsolationLevel, v2+): with read_committed
   (1) the last stable offset takes the visible offset's place: -1 answers it, and -3 and lookups by time
   find only records below it (Partition.fetchOffsetForTimestamp's lastFetchableOffset). */
int gr_partition_list_offset_isolated(struct gr_partition *part, struct gr_cold *c, int16_t version,
                                      int32_t current_leader_epoch, int64_t ts, bool read_committed,
                                      struct gr_offset_answer *out);

/* OffsetForLeaderEpoch for one partition (KIP-101/KIP-320, Kafka's LeaderEpochFileCache): the epoch check,
   an offline log (KAFKA_STORAGE_ERROR), then for `epoch` -1 or above the current one -1/-1; for the current
   epoch the log end offset; else the largest known epoch <= it and its end offset; below the first known
   epoch that epoch with the log start offset. *leader_epoch and *end_offset are -1 unless answered. Returns
   a Kafka error code. */
int gr_partition_epoch_end_offset(struct gr_partition *part, int32_t current_leader_epoch, int32_t epoch,
                                  int32_t *leader_epoch, int64_t *end_offset);

/* ==================================================================================================== *
 * REPLICATION AND TRANSACTIONS: the leader side (partition/replica.c), the follower side
 * (partition/follower.c, declared at the end of this section) and the transactions data plane (partition.c:
 * the last stable offset, aborted transactions, markers) are implemented. Each names its counterpart in
 * Apache Kafka 4.x: core/src/main/scala/kafka/cluster/Partition.scala (Partition.*),
 * storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java (UnifiedLog.*),
 * core/src/main/scala/kafka/server/ReplicaManager.scala (ReplicaManager.*). The visible offset
 * (gr_partition_visible_offset) is the high watermark, and the named waits above keep their contracts:
 * committed waiters wake when the followers move it, read_committed data waiters when the last stable
 * offset moves (a marker, or the high watermark passing one).
 * ==================================================================================================== */

/* A partition's role on this broker. Until gr_partition_set_role is called a partition is
   GR_PARTITION_LEADER at its log's leader epoch, alone (no followers: today's visible offset). */
enum gr_partition_role {
    GR_PARTITION_LEADER =
        0, /* takes produces, serves fetches, drives the high watermark (Partition.isLeader) */
    GR_PARTITION_FOLLOWER = 1, /* fetches from the leader, appends as follower, takes the leader's HW */
};

/* A role change from the cluster's metadata (KRaft's PartitionRegistration as ReplicaManager.applyDelta
   hands it to Partition.makeLeader / makeFollower). The arrays are borrowed for the call. */
struct gr_partition_role_change {
    enum gr_partition_role role;
    int32_t leader_id;       /* the leader's broker id (node.id) */
    int32_t leader_epoch;    /* the new leader epoch; a change with an older epoch is refused */
    int32_t partition_epoch; /* the registration's version (Kafka's partitionEpoch), for AlterPartition */
    const int32_t *replicas; /* every assigned replica's broker id, leader included */
    int replica_count;
    const int32_t *isr; /* the in-sync replicas' broker ids (a subset of replicas) */
    int isr_count;
    int min_insync_replicas; /* the topic's min.insync.replicas; 0 or less: keep the current one (first: 1) */
    int64_t now_ms; /* the owner's monotonic clock, ms (followers' lastCaughtUpTime on a new leader epoch) */
};

/* What the leader knows of one follower (Kafka's Replica / ReplicaState), as its fetches report it. Times
   are the owner's monotonic clock in ms (never the wall clock: lag must not jump with clock changes). */
struct gr_replica_state {
    int32_t broker_id;        /* the follower's broker id (node.id) */
    int64_t log_end_offset;   /* its fetch offset: every offset below it is in its log; -1 unknown */
    int64_t log_start_offset; /* its log start offset (the low watermark is their minimum); -1 unknown */
    int64_t last_caught_up_time_ms; /* the largest time at which the follower's latest fetch offset was >=
                                       the leader's log end offset (ReplicaState.lastCaughtUpTimeMs) */
    int64_t last_fetch_leader_log_end_offset; /* the leader's log end offset at its previous fetch, -1 */
    int64_t last_fetch_time_ms;               /* the time of its previous fetch, 0: none */
    int64_t broker_epoch;       /* the broker epoch its last fetch carried (KIP-903); -1: none given */
    int32_t fetch_leader_epoch; /* the leader epoch under which its last fetch was stored; -1: none */
    bool fetched;      /* a fetch arrived since this broker became leader (Kafka's brokerEpoch defined) */
    bool in_isr;       /* member of the maximal ISR (the ISR plus a member being added, KIP-497) */
    bool isr_eligible; /* gr_partition_high_watermark_of's input: Partition.isReplicaIsrEligible now */
};

/* An ISR change the leader asks its owner to make (Kafka's AlterPartition: Partition.prepareIsrExpand /
   prepareIsrShrink, then submitAlterPartition). Borrowed for the hook's call. */
struct gr_partition_isr_change {
    int32_t leader_epoch;         /* the current leader epoch (an ISR change never bumps it) */
    int32_t partition_epoch;      /* the partition epoch the change is based on: the write compares it */
    const int32_t *isr;           /* the proposed ISR (the leader included), in the committed ISR's order */
    const int64_t *broker_epochs; /* per member of isr: the broker epoch of its last fetch, -1 unknown
                                     (Partition.addBrokerEpochToIsr; the leader's own is -1 here) */
    int isr_count;
    bool expand; /* one member added (isr_count = committed + 1), else members removed */
};

/* The replication settings and hooks of a set of partitions (the cluster layer's, from the metadata image).
   Every hook may be NULL; `ctx` is passed to each. */
struct gr_partition_repl_config {
    int64_t replica_lag_time_max_ms; /* replica.lag.time.max.ms; 0 or less: Kafka's default 30000 */
    /* The registration of `broker_id` now: its broker epoch (>= 0) with *shutting_down set, or -1 when it is
       not registered (fenced). NULL: every broker is registered at any epoch and not shutting down. */
    int64_t (*broker_epoch)(void *ctx, int32_t broker_id, bool *shutting_down);
    /* Asks the owner to make `change` (one etcd txn comparing the partition epoch). The outcome comes back
       later (or from inside the hook) through gr_partition_isr_committed / gr_partition_isr_failed, or a
       gr_partition_set_role carrying a newer partition epoch. NULL: no change is ever proposed. */
    void (*propose_isr)(void *ctx, struct gr_partition *part, const struct gr_partition_isr_change *change);
    /* The owner's monotonic clock, ms (the high watermark's caught-up test on appends and flushes). NULL:
       gr_time_mono_ms. */
    int64_t (*now_ms)(void *ctx);
    void *ctx;
    /* Tests: a violation of the high watermark invariant against the leader's own log end offset
       (gr_partitions_hw_violations) only logs and counts, even in builds without NDEBUG (which otherwise
       assert); one against a follower's never asserts. */
    bool hw_violation_no_abort;
};

/* struct gr_aborted_txn (one aborted transaction, Kafka's AbortedTxn) is storage's: storage/log.h. */

/* How many times the high watermark invariant of issue #20 was found violated in `ps` since create: on a
   leader with followers, at every move of its high watermark and every fetch-state or ISR membership change,
   the high watermark must be <= the leader's log end offset and <= the log end offset (as the leader knows it
   from fetches) of every follower of the maximal ISR (Partition.maybeIncrementLeaderHW; KIP-497's maximal
   ISR). Each violation also logs one ERROR line "high watermark invariant violated: <topic>-<p> hw X >
   replica N log end offset Y" (or "> leader log end offset Y"), rate-limited; the leader's own asserts in
   builds without NDEBUG (unless the replication config's hw_violation_no_abort), a follower's never does:
   its log end offset is what its Fetch requests said, input from another process. Owning thread. */
uint64_t gr_partitions_hw_violations(const struct gr_partitions *ps);

/* Sets the replication settings and hooks of every partition of `ps` (takes a copy). Before any call: none
   (no hooks, replica.lag.time.max.ms 30000). Owning thread. */
void gr_partitions_set_replication(struct gr_partitions *ps, const struct gr_partition_repl_config *rc);

/* Sets role, leader, leader epoch, partition epoch, replicas and ISR (Partition.makeLeader /
   Partition.makeFollower, as ReplicaManager.applyDelta calls them). A change older than the current state
   (a lower leader epoch or partition epoch) is refused with -ESTALE and changes nothing (Kafka skips it); one
   with the current leader and partition epochs and the same role is already applied (0, nothing changes).
   Becoming leader at a new leader epoch: the leader-epoch cache gets the epoch at the log end offset
   (gr_log_set_leader_epoch, UnifiedLog.maybeAssignEpochStartOffset) and that offset is the epoch's start
   offset; each follower's state is reset (Replica.resetReplicaState: offsets unknown until it fetches when
   this broker was not leader before; lastCaughtUpTime `now_ms` for ISR members, else 0). The high watermark
   is what the log had (gr_log_high_watermark, clamped to the log; never lowered while leading). A pending ISR
   change is dropped (the committed ISR is the change's). Then the high watermark may move (waiters done).
   Becoming follower: ISR and followers' states are cleared, committed waiters and followers' fetch waiters
   (GR_FETCH_LOG_END) are done with -EXDEV (Kafka answers delayed produces NOT_LEADER_OR_FOLLOWER and
   completes delayed follower fetches), consumers' data waiters keep waiting, and the visible offset is the
   high watermark it had as leader (else its log's), never its log end offset, until the follower side
   (partition/follower.c) moves it. `change` is borrowed; its
   counts must be 1..GR_IMAGE_REPLICAS_MAX replicas and 0..replica_count ISR members, else -EINVAL. Returns 0,
   -ESTALE, -EINVAL or -ENOMEM (nothing changed). Owning thread. */
int gr_partition_set_role(struct gr_partition *part, const struct gr_partition_role_change *change);
/* The current role (Partition.isLeader) and leader epoch (Partition.getLeaderEpoch: the last set_role's,
   else the log's, gr_log_leader_epoch). */
enum gr_partition_role gr_partition_role(const struct gr_partition *part);
int32_t gr_partition_leader_epoch(const struct gr_partition *part);
/* The partition epoch of the last set_role or committed ISR change (Partition.getPartitionEpoch), -1 none. */
int32_t gr_partition_partition_epoch(const struct gr_partition *part);
/* Changes the topic's min.insync.replicas (>= 1; a dynamic config change); the high watermark may move.
   Returns 0 or -EINVAL. */
int gr_partition_set_min_insync_replicas(struct gr_partition *part, int min_insync_replicas);

/* The committed ISR into out[0..cap) (returns its size, may exceed cap: only cap written), and whether an
   ISR change is in flight with the maximal ISR's size (Partition.partitionState: isr, isInflight,
   maximalIsr). For tests, logs and Metadata. A partition never given a role: {} with 0. */
int gr_partition_isr(const struct gr_partition *part, int32_t *out, int cap);
bool gr_partition_isr_inflight(const struct gr_partition *part);
int gr_partition_maximal_isr_count(const struct gr_partition *part);
/* Returns borrowed: what the leader knows of follower `broker_id` (Partition.getReplica), NULL when not a
   follower of this leader. Valid until the next call on the partition. */
const struct gr_replica_state *gr_partition_replica(const struct gr_partition *part, int32_t broker_id);

/* The high watermark as a function of the replicas' offsets: Kafka's rule (Partition.maybeIncrementLeaderHW).
   `isr_count` (the committed ISR, the leader included) below `min_isr` (the effective min ISR:
   gr_partition_effective_min_isr): `current_hw`. Otherwise the minimum of `leader_offset` (the leader's
   share: its log end offset, or its durable offset with gregor.acks.all.fsync) and the log end offset of
   each follower that is in the maximal ISR (in_isr) or caught up (ReplicaState.isCaughtUp: its log end
   offset equals `leader_log_end_offset`, or now_ms - last_caught_up_time_ms <= lag_ms) and isr_eligible;
   never below `current_hw` (UnifiedLog.maybeIncrementHighWatermark only moves it up). A follower with an
   unknown log end offset (-1) in the maximal ISR holds it where it is. Pure: reads only its arguments.
   Returns the new high watermark. */
int64_t gr_partition_high_watermark_of(int64_t leader_offset, int64_t leader_log_end_offset,
                                       int64_t current_hw, const struct gr_replica_state *followers,
                                       int follower_count, int isr_count, int min_isr, int64_t now_ms,
                                       int64_t lag_ms);
/* min(min.insync.replicas, replication factor) (Partition.effectiveMinIsr). 1 before any set_role. */
int gr_partition_effective_min_isr(const struct gr_partition *part);

/* One follower fetch as the leader sees it (FetchRequest v15+: ReplicaState.ReplicaId / ReplicaEpoch, the
   partition's FetchOffset and LogStartOffset). */
struct gr_follower_fetch {
    int32_t broker_id;        /* ReplicaState.ReplicaId */
    int64_t broker_epoch;     /* ReplicaState.ReplicaEpoch; -1: not given */
    int64_t fetch_offset;     /* FetchOffset: the follower's log end offset */
    int64_t log_start_offset; /* LogStartOffset: the follower's log start offset, -1 unknown */
    int64_t now_ms;           /* when the fetch arrived (the owner's monotonic clock, ms) */
};
/* A follower's fetch reached the leader (Partition.updateFollowerFetchState): fences a fetch whose broker
   epoch is below the broker's registered one (-ESTALE: NOT_LEADER_OR_FOLLOWER), then stores its state
   (Replica.updateFetchStateOrThrow: lastCaughtUpTime moves to now_ms when fetch_offset >= the leader's log
   end offset now, else to the previous fetch's time when fetch_offset >= the leader's log end offset at that
   fetch; it never goes back), may propose adding it to the ISR (Partition.maybeExpandIsr: no change in
   flight, not in the ISR, ISR-eligible, log end offset >= the high watermark and >= the leader epoch's start
   offset), and may move the high watermark (waiters done as by gr_partition_flushed). Returns 0, -EPERM (not
   the leader), -ENOENT (not a replica: NOT_LEADER_OR_FOLLOWER), -ERANGE (fetch_offset outside [0, log end
   offset]: OFFSET_OUT_OF_RANGE; nothing stored) or -ESTALE. A fetch under the broker epoch (>= 0) and the
   leader epoch of the follower's last stored fetch whose fetch_offset is below that fetch's is a request
   delivered late (a Fetch sent before a network cut and retransmitted by TCP after it healed, on a connection
   the follower has given up): 0, answered as any other, nothing stored. Within one leader epoch and one
   registration a follower's log never goes back below an offset the leader accepted without divergence (its
   records below it are the leader's), so the stored state is the newer one. Kafka stores it
   (Replica.updateFetchStateOrThrow; its high watermark only moves up, so the follower merely looks behind
   until its next fetch); here it would break the high watermark invariant the leader asserts (issue #24's
   35-45 s cuts aborted two brokers so). */
int gr_partition_update_follower_fetch_state(struct gr_partition *part,
                                             const struct gr_follower_fetch *fetch);
/* Partition.isReplicaIsrEligible (KIP-903): `broker_id` is a follower of this leader that fetched since it
   became leader, is registered and not shutting down, and its fetch's broker epoch is -1 or its
   registration's. */
bool gr_partition_replica_isr_eligible(const struct gr_partition *part, int32_t broker_id);
/* Partition.maybeShrinkIsr, which the owner calls every replica.lag.time.max.ms / 2: with no change in
   flight, proposes removing every ISR follower that is out of sync (Partition.getOutOfSyncReplicas: not a
   replica any more, or its log end offset differs from the leader's and now_ms - lastCaughtUpTime >
   replica.lag.time.max.ms). Members being removed still count for the high watermark until the change is
   committed. The tick also re-evaluates the high watermark first (a caught-up follower outside the ISR stops
   holding it back once its lag passed, with no fetch or append to say so; waiters done when it moves).
   Returns 1 when a change was proposed, 0 when none, -EPERM when not the leader. */
int gr_partition_maybe_shrink_isr(struct gr_partition *part, int64_t now_ms);
/* The owner made the change in flight (Partition.handleAlterPartitionUpdate): the ISR becomes `isr`
   (borrowed, 1..GR_IMAGE_REPLICAS_MAX members, else -EINVAL) at `partition_epoch`; then the high watermark
   may move. Ignored with -ESTALE when no change is in flight, `leader_epoch` is not the current one (the
   change stays in flight until set_role brings the new state, as Kafka) or `partition_epoch` is older than
   the current. Returns 0 or -ESTALE / -EINVAL. */
int gr_partition_isr_committed(struct gr_partition *part, int32_t leader_epoch, int32_t partition_epoch,
                               const int32_t *isr, int isr_count);
/* The change in flight based on `partition_epoch` was not made (its compare failed, or the controller
   refused it: Partition.handleAlterPartitionError for INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED): the
   pending state is reverted to the committed ISR. Call it only when the change is known not to be applied;
   when unsure, re-read and call gr_partition_set_role. Returns 0, or -ESTALE (no such change in flight). */
int gr_partition_isr_failed(struct gr_partition *part, int32_t partition_epoch);

/* Produce with acks=-1, before the append (Partition.appendRecordsToLeader): NOT_ENOUGH_REPLICAS when `acks`
   is -1 and the committed ISR is smaller than the effective min ISR, NOT_LEADER_OR_FOLLOWER on a follower,
   else NONE (acks 0 and 1 append regardless). A Kafka error code. */
int16_t gr_partition_check_produce_acks(const struct gr_partition *part, int16_t acks);
/* Produce with acks=-1, once its committed wait is done with 0 (Partition.checkEnoughReplicasReachOffset):
   NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR is now smaller than the effective min ISR, else NONE.
   A Kafka error code. */
int16_t gr_partition_check_enough_replicas(const struct gr_partition *part);

/* The low watermark (Partition.lowWatermarkIfLeader): the minimum of the leader's log start offset and the
   log start offsets of its registered followers (a registered follower that has not fetched yet counts as
   unknown, -1, as in Kafka: DeleteRecords keeps waiting); what DeleteRecords completes on. -1 when not the
   leader. */
int64_t gr_partition_low_watermark(const struct gr_partition *part);
/* Until the low watermark reaches `offset` (Kafka's DelayedDeleteRecords.tryComplete: lowWatermarkIfLeader
   >= the requested offset): done with 0 once gr_partition_low_watermark(part) >= offset (at once when it
   already is: a leader alone, a one-node partition), with -EXDEV on a follower (at once, or when a leader
   becomes follower: NOT_LEADER_OR_FOLLOWER) and with -EROFS once the log is offline. A follower's fetch that
   raises its log start offset wakes it (gr_partition_update_follower_fetch_state, as
   Partition.updateFollowerFetchState completes delayed DeleteRecords when the low watermark moved), and so
   do a role change and the ISR shrink tick (gr_partition_maybe_shrink_isr: a follower whose registration
   went away stops counting). `w` must be idle. */
void gr_partition_wait_low_watermark(struct gr_partition *part, struct gr_partition_waiter *w,
                                     int64_t offset);
/* The start offset of the current leader epoch (Partition.leaderEpochStartOffsetOpt: the log end offset when
   this broker became leader at that epoch, UnifiedLog.maybeAssignEpochStartOffset), -1 when not a leader
   set by gr_partition_set_role (a follower, or a partition never given a role). */
int64_t gr_partition_leader_epoch_start_offset(const struct gr_partition *part);

/* The last stable offset (UnifiedLog.lastStableOffset): the first unstable offset when it is below the high
   watermark, else the high watermark; what read_committed fetches read below and ListOffsets' latest answers
   for them. Equal to gr_partition_visible_offset when no transaction is open. */
int64_t gr_partition_last_stable_offset(struct gr_partition *part);
/* The first unstable offset (UnifiedLog.firstUnstableOffset): the first offset of the oldest transaction that
   is open or whose marker is not yet below the high watermark, raised to the log start offset; -1 when there
   is none (storage/log.h gr_log_first_unstable_offset). O(1). */
int64_t gr_partition_first_unstable_offset(const struct gr_partition *part);
/* The aborted transactions a read_committed fetch of [start_offset, upper_bound_offset) must report
   (UnifiedLog.collectAbortedTransactions(startOffset, upperBoundOffset), from the transaction indexes of the
   segments the range touches): each one whose range overlaps it, in index order, into out[0..cap).
   Kafka's rule (the issue's): every entry with last_offset >= start_offset and first_offset <
   upper_bound_offset (upper_bound_offset: the offset after the last batch returned: the next batch's
   offset, else the next segment's base offset, else the log end offset), from the index of the segment
   holding start_offset and then of each later segment, stopping at the first entry whose
   last_stable_offset >= upper_bound_offset. No filtering by the fetched batches (the client does it).
   Returns how many there are (more than `cap`: only cap written; call again with room for all), or -EROFS
   (offline). The indexes are in memory (storage keeps every segment's .txnindex loaded): no I/O. */
int gr_partition_aborted_txns(struct gr_partition *part, int64_t start_offset, int64_t upper_bound_offset,
                              struct gr_aborted_txn *out, int cap);

/* An end-transaction marker to write (WriteTxnMarkers' one marker for one partition). */
struct gr_partition_marker {
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t coordinator_epoch;
    bool commit;    /* COMMIT, else ABORT (TransactionResult) */
    int64_t now_ms; /* the marker record's timestamp (wall clock, ms) */
    /* WriteTxnMarkers v2's TransactionVersion (KIP-1228): 2 for a transaction of version 2, whose marker
       carries the bumped epoch and must be above the producer's epoch here; 0 or 1: the legacy rule */
    int16_t transaction_version;
};
/* Appends the control batch of `m` as the leader (UnifiedLog.appendAsLeader with origin COORDINATOR of
   MemoryRecords.withEndTransactionMarker; storage's gr_log_write_marker), then wakes waiters as
   gr_partition_append does. It closes the producer's open transaction; an ABORT of a non-empty one adds an
   entry to the segment's .txnindex; the last stable offset may move once the high watermark passes the
   marker (answer WriteTxnMarkers then: wait committed on res->last_offset + 1). Returns 0 with *res,
   -EXDEV on a follower (NOT_LEADER_OR_FOLLOWER), GR_LOG_ERR_INVALID_PRODUCER_EPOCH (INVALID_PRODUCER_EPOCH:
   the producer epoch is below the partition's entry, or for transaction version 2 not above it unless a
   retried marker of a closed transaction: storage/log.h gr_log_write_marker),
   GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED (the coordinator epoch is below the entry's,
   ProducerAppendInfo.checkCoordinatorEpoch), or gr_log_append's other errors. Owning thread. */
int gr_partition_write_marker(struct gr_partition *part, const struct gr_partition_marker *m,
                              struct gr_append_result *res);

/*
 * The follower side (follower.c): a partition gr_partition_set_role made GR_PARTITION_FOLLOWER appends the
 * leader's batches as they are, truncates on divergence, takes the leader's log start offset and high
 * watermark. These functions answer -EPERM on a leader. Its visible offset (gr_partition_visible_offset) is
 * min(the high watermark as last taken, its own log end offset).
 */

/* Appends record batches fetched from the leader (UnifiedLog.appendAsFollower(records, leaderEpoch), reached
   through Partition.appendRecordsToFollowerOrFutureReplica; Kafka's AppendOrigin.REPLICATION): storage's
   gr_log_append_replica (its contract: batches kept as given, every CRC checked, offsets continuing the log
   end offset, the leader-epoch cache and producer state learned from the batches; `records` borrowed and
   never written), then the data waiters the visible offset now satisfies are done; with visible_is_durable
   the flushers are asked for a group commit (the next fetch waits for it). `leader_epoch` is the leader
   epoch the fetch was made under: -ESTALE when it is not the partition's (gr_partition_leader_epoch).
   Fills *res (base and last offset of what was appended). Returns 0 or -errno (-EPERM on a leader, -ESTALE,
   -EBADMSG corrupt, -ERANGE offsets, -EAGAIN retriable, -EROFS offline, -ENOSPC, -EIO). */
int gr_partition_append_as_follower(struct gr_partition *part, const uint8_t *records, size_t len,
                                    int32_t leader_epoch, struct gr_append_result *res);

/* Takes the leader's high watermark from a fetch answer (Partition.appendRecordsToFollowerOrFutureReplica,
   then UnifiedLog.updateHighWatermark): the follower's high watermark becomes min(`leader_high_watermark`,
   its log end offset) when that is above the one it has (it goes down only by truncation), is handed to
   storage (gr_log_set_high_watermark: replication-offset-checkpoint) and wakes the data waiters it
   satisfies. Returns the visible offset after it, or -EPERM on a leader. */
int64_t gr_partition_set_follower_high_watermark(struct gr_partition *part, int64_t leader_high_watermark);

/* Truncates the log to `offset` (every record at or past it goes; a batch holding it goes whole):
   Partition.truncateTo -> UnifiedLog.truncateTo(targetOffset), the follower's step after
   OffsetsForLeaderEpoch or a DivergingEpoch finds a divergence. Storage's gr_log_truncate_to (its contract:
   its reads first, cold ones on the store's I/O pool (-EAGAIN until they are in, each round's end reported
   through on_flushed); then the in-memory cut at once: segments, indexes, the leader-epoch cache by
   LeaderEpochFileCache.truncateFromEnd, producer state reloaded from the newest snapshot at or below the cut
   and replayed; the file work on the housekeeping thread, appends answering -EAGAIN meanwhile, its end
   reported through the store's on_flushed, which the server turns into gr_partition_flushed); the high
   watermark does not stay above the new log end offset. Nothing when `offset` >= the log end offset. Data
   waiters past the new end keep waiting. Returns 0 or -errno (-EPERM on a leader, -EINVAL, -EAGAIN retry,
   -ENOMEM, -EROFS offline, -EIO). */
int gr_partition_truncate_to(struct gr_partition *part, int64_t offset);
/* Drops the whole log and restarts it empty at `offset` (Partition.truncateFullyAndStartAt ->
   UnifiedLog.truncateFullyAndStartAt: a follower whose fetch offset is out of the leader's range), as
   gr_log_truncate_fully_and_start_at. The log start, log end and visible offsets all become `offset`.
   Returns 0 or -errno as gr_partition_truncate_to. */
int gr_partition_truncate_fully_and_start_at(struct gr_partition *part, int64_t offset);

/* Raises the log start offset to the leader's (UnifiedLog.maybeIncrementLogStartOffset(newLogStartOffset,
   LogStartOffsetIncrementReason.LeaderOffsetIncremented), called by the follower's fetcher,
   ReplicaFetcherThread.processPartitionData): storage's gr_log_raise_start_offset (only ever up, at most to
   the log end offset, segments wholly below deleted, the checkpoint queued as DeleteRecords' is). Returns 1
   when raised, 0 when `leader_log_start_offset` is not above the current one, or -errno (-EPERM on a
   leader, -EAGAIN, -EROFS). */
int gr_partition_raise_log_start_offset(struct gr_partition *part, int64_t leader_log_start_offset);

#endif
