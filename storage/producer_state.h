/*
 * producer_state.h: per-partition idempotence state, Kafka's ProducerStateManager in small. A map from
 * producer id to its epoch, last sequence and the metadata of its last GR_PRODUCER_BATCHES_MAX (5) batches
 * (what a broker needs to answer a retried batch with DUPLICATE_SEQUENCE_NUMBER and the original offset).
 *
 * Invariants: entries exist only for producer ids >= 0; an entry's batches are ordered oldest first and all
 * carry the entry's current epoch (a higher epoch clears them); last offsets increase along the list.
 * The state always describes exactly the batches of the log below `end_offset`: appends update it, a
 * snapshot fixes it at an offset, recovery rebuilds it from a snapshot plus the batches after it,
 * retention/DeleteRecords drop producers whose last batch fell below the log start offset.
 * The idempotence rules (gr_producer_state_check) are Kafka 4.1.1's ProducerAppendInfo.checkProducerEpoch /
 * checkSequence and ProducerStateEntry.findDuplicateBatch for client appends; the log runs the check and the
 * update inside one gr_log_append, so two batches of one producer can never both pass the same check.
 *
 * Snapshot file "<20-digit end offset>.snapshot" (Gregor's format, big-endian):
 *   OFFSET SIZE MEANING
 *    0      2   version (1)
 *    2      4   CRC-32C of bytes 6..end
 *    6      8   end offset: the state covers batches below it (equals the number in the file name)
 *   14      4   producer count N
 *   18      -   N producer entries:
 *               +0  8 producer id
 *               +8  2 producer epoch
 *              +10  4 coordinator epoch (-1 until transactions)
 *              +14  8 last timestamp (ms, the max timestamp of its last batch)
 *              +22  8 first offset of the open transaction (-1 none)
 *              +30  1 batch count B (0..5)
 *              +31  - B batches, oldest first, 28 bytes each:
 *                     +0 4 first sequence, +4 4 last sequence, +8 8 last offset,
 *                     +16 4 offset delta (last offset - first offset), +20 8 max timestamp (ms)
 *
 * Not thread-safe: owned by the log, used on the network thread. Read next: storage/log.h.
 */
#ifndef GR_PRODUCER_STATE_H
#define GR_PRODUCER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_PRODUCER_BATCHES_MAX 5 /* Kafka keeps the metadata of the last 5 batches per producer */
#define GR_PRODUCER_SNAPSHOT_VERSION 1

struct gr_producer_batch {
    int32_t first_seq;
    int32_t last_seq;
    int64_t last_offset;
    int32_t offset_delta; /* last offset - first offset */
    int64_t timestamp_ms; /* max timestamp of the batch */
};

struct gr_producer_entry {
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t coordinator_epoch;
    int64_t last_timestamp_ms;
    int64_t current_txn_first_offset;                          /* -1: no open transaction */
    int batch_count;                                           /* 0..GR_PRODUCER_BATCHES_MAX */
    struct gr_producer_batch batches[GR_PRODUCER_BATCHES_MAX]; /* oldest first */
};

/* One transaction that holds the first unstable offset back: open (last_offset -1: Kafka's ongoingTxns) or
   completed by a marker not yet below the high watermark (last_offset = the marker's offset: Kafka's
   unreplicatedTxns). */
struct gr_producer_txn {
    int64_t producer_id;
    int64_t first_offset; /* offset of its first batch */
    int64_t last_offset;  /* its marker's offset, -1 while open */
};

/* A transaction a marker just completed (Kafka's CompletedTxn), with the last stable offset its
   aborted-transaction index entry records (ProducerStateManager.lastStableOffset: the first offset of the
   oldest open transaction of another producer, else last_offset + 1). producer_id -1: none completed (not a
   marker, or a marker of a producer with no open transaction: an empty transaction). */
struct gr_completed_txn {
    int64_t producer_id;
    int64_t first_offset;
    int64_t last_offset;
    int64_t last_stable_offset;
    bool aborted;
};

struct gr_producer_state {
    struct gr_producer_entry *slots; /* open addressing, producer_id -1 = empty */
    size_t cap;                      /* power of two, or 0 */
    size_t count;
    int64_t end_offset; /* the state covers batches below this offset */
    /* Transactions holding the first unstable offset back, by first offset ascending (appends only ever
       open a transaction at the log end, so a new one goes last). Grown by doubling (reserve). */
    struct gr_producer_txn *txns;
    size_t txn_count, txn_cap;
    size_t txn_completed; /* how many of txns are completed (last_offset >= 0) */
};

/* Control record types of an end-transaction marker (Kafka's ControlRecordType). */
#define GR_CONTROL_ABORT 0
#define GR_CONTROL_COMMIT 1

void gr_producer_state_init(struct gr_producer_state *ps);
void gr_producer_state_free(struct gr_producer_state *ps);
/* Empties the state and sets its end offset. */
void gr_producer_state_reset(struct gr_producer_state *ps, int64_t end_offset);

/* Returns borrowed: the entry of `producer_id`, or NULL. */
const struct gr_producer_entry *gr_producer_state_find(const struct gr_producer_state *ps,
                                                       int64_t producer_id);
/* Number of producers tracked. */
size_t gr_producer_state_count(const struct gr_producer_state *ps);
/* Iteration: *cursor starts at 0; returns the next entry or NULL at the end. Order is unspecified. */
const struct gr_producer_entry *gr_producer_state_next(const struct gr_producer_state *ps, size_t *cursor);

/* Last sequence of the producer's last batch, -1 if it has none. */
int32_t gr_producer_entry_last_seq(const struct gr_producer_entry *e);
/* Returns borrowed: the remembered batch with exactly these sequences (a retry), or NULL. */
const struct gr_producer_batch *gr_producer_entry_find_batch(const struct gr_producer_entry *e,
                                                             int32_t first_seq, int32_t last_seq);

/* The verdict on a client batch (Kafka 4.1.1, UnifiedLog.analyzeAndValidateProducerState +
   ProducerAppendInfo), checked in this order: DUPLICATE     same producer id and epoch, and first/last
   sequence equal to one of the producer's last 5 batches: not written again; answered with success and the
   original batch's offsets INVALID_EPOCH the batch's epoch is below the producer's current epoch:
   INVALID_PRODUCER_EPOCH (47) OUT_OF_ORDER  OUT_OF_ORDER_SEQUENCE_NUMBER (45): a higher epoch whose first
   sequence is not 0, or the same epoch with a first sequence that is not last sequence + 1 (INT32_MAX is
   followed by 0) ACCEPT        otherwise; also any sequence of a producer the partition holds no state for
   (new, expired, or dropped with its batches by retention/DeleteRecords), as Kafka 4.x accepts it. A data
   batch with base sequence -1 (NO_SEQUENCE: a coordinator's write, origin COORDINATOR) is judged by its epoch
   only (INVALID_EPOCH or ACCEPT: no duplicate or sequence check, as Kafka for a non-CLIENT origin). */
enum gr_producer_verdict {
    GR_PRODUCER_ACCEPT = 0,
    GR_PRODUCER_DUPLICATE = 1,
    GR_PRODUCER_INVALID_EPOCH = 2,
    GR_PRODUCER_OUT_OF_ORDER = 3,
    GR_PRODUCER_INVALID_TXN_STATE = 4,  /* INVALID_TXN_STATE (48): a non-transactional batch of a producer
                                           with an open transaction (ProducerAppendInfo.appendDataBatch) */
    GR_PRODUCER_COORDINATOR_FENCED = 5, /* TRANSACTION_COORDINATOR_FENCED (52): a marker whose coordinator
                                           epoch is below the producer's (appendEndTxnMarker) */
};
/* Judges one leader append (origin CLIENT or COORDINATOR) of `len` bytes (the whole batch). A data batch
   (producer id >= 0, base sequence >= 0: the validator and the produce handler ensure these) by the
   idempotence rules above, then, once accepted, INVALID_TXN_STATE for a non-transactional batch while the
   producer's transaction is open. A control batch (an end-transaction marker) as Kafka's
   ProducerAppendInfo.appendEndTxnMarker with the marker's transaction version `marker_version`
   (WriteTxnMarkers v2's TransactionVersion; 0 for v1 and for data batches): checkProducerEpoch (below 2:
   an epoch below the producer's is INVALID_EPOCH; at 2, Kafka 4.x's strict rule: an epoch at or below it,
   except the same epoch while no transaction of the producer is open, a retried marker accepted and
   written again as KAFKA-19999), then checkCoordinatorEpoch (COORDINATOR_FENCED); a marker of an unknown
   producer is accepted. Batches without a producer id are ACCEPT. On DUPLICATE, *dup (borrowed, valid
   until the next change of `ps`) is the original batch; otherwise *dup is NULL. */
enum gr_producer_verdict gr_producer_state_check(const struct gr_producer_state *ps, const uint8_t *batch,
                                                 size_t len, int16_t marker_version,
                                                 const struct gr_producer_batch **dup);
/* Makes room so that a following gr_producer_state_update for `producer_id` cannot fail (its entry and one
   more transaction). Returns 0 or -ENOMEM (nothing changed). */
int gr_producer_state_reserve(struct gr_producer_state *ps, int64_t producer_id);

/* Reads the end-transaction marker of control batch `batch` (`len` bytes, whole, uncompressed: Kafka writes
   markers so): its control type (key: version int16, type int16; GR_CONTROL_ABORT or GR_CONTROL_COMMIT) and
   coordinator epoch (value: version int16, coordinator epoch int32; EndTransactionMarker). Returns 0, or
   -EINVAL when it is not a readable end-transaction marker (another control type, no record, short). */
int gr_control_marker_parse(const uint8_t *batch, size_t len, int *type, int32_t *coordinator_epoch);

/* Applies one appended batch (base offset already assigned): `batch` holds `len` bytes of it, at least the
   61-byte header; a control batch needs to be whole (its marker is read; a header alone, or a control batch
   that is no end-transaction marker, changes nothing but end_offset). Kafka's ProducerAppendInfo for any
   origin (no checks here): a data batch records its sequence history; a transactional one opens the
   producer's transaction at its base offset when none is open (appendDataBatch); a marker
   (appendEndTxnMarker) closes it: the producer's epoch becomes the marker's, its coordinator epoch the
   marker's, current_txn_first_offset -1, and when a transaction was open *done (if not NULL) describes it
   (ProducerStateManager.lastStableOffset for its index entry) and it stays in txns, completed, until
   gr_producer_state_on_high_watermark passes its marker. Batches with producer id < 0 only advance
   end_offset. Returns 0, or -ENOMEM (state unchanged). */
int gr_producer_state_update(struct gr_producer_state *ps, const uint8_t *batch, size_t len,
                             struct gr_completed_txn *done);

/* The high watermark moved to `high_watermark` (ProducerStateManager.onHighWatermarkUpdated): completed
   transactions whose marker is below it stop holding the first unstable offset back. */
void gr_producer_state_on_high_watermark(struct gr_producer_state *ps, int64_t high_watermark);
/* The first offset of the oldest transaction that is open or whose marker is not yet below the high
   watermark (ProducerStateManager.firstUnstableOffset), -1 when none. O(1). */
int64_t gr_producer_state_first_unstable(const struct gr_producer_state *ps);

/* Drops producers silent for `expiration_ms` or more: last timestamp (the max timestamp of their last batch,
   as Kafka keeps it) <= now_ms - expiration_ms and no open transaction (Kafka's
   ProducerStateManager.isProducerExpired, producer.id.expiration.ms). Returns the number dropped. */
size_t gr_producer_state_expire(struct gr_producer_state *ps, int64_t now_ms, int64_t expiration_ms);

/* Drops producers whose last batch offset is below `log_start_offset` (retention, DeleteRecords), never one
   with an open transaction, and completed transactions whose marker is below it. */
void gr_producer_state_truncate_head(struct gr_producer_state *ps, int64_t log_start_offset);

/* True when both describe the same producers with the same fields (tests, recovery checks). */
bool gr_producer_state_equal(const struct gr_producer_state *a, const struct gr_producer_state *b);

/* Snapshot encoding (format above). Returns the encoded size in bytes; gr_producer_state_encode writes
   exactly that many into `buf`. */
size_t gr_producer_state_encoded_bytes(const struct gr_producer_state *ps);
void gr_producer_state_encode(const struct gr_producer_state *ps, uint8_t *buf);
/* Replaces `ps` with a decoded snapshot. Returns 0, -EINVAL (bad version, CRC, lengths; nothing in the
   snapshot is trusted for a size) leaving `ps` empty, or -ENOMEM. */
int gr_producer_state_decode(struct gr_producer_state *ps, const uint8_t *buf, size_t len);

#endif
