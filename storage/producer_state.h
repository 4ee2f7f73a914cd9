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

struct gr_producer_state {
    struct gr_producer_entry *slots; /* open addressing, producer_id -1 = empty */
    size_t cap;                      /* power of two, or 0 */
    size_t count;
    int64_t end_offset; /* the state covers batches below this offset */
};

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
   (new, expired, or dropped with its batches by retention/DeleteRecords), as Kafka 4.x accepts it. */
enum gr_producer_verdict {
    GR_PRODUCER_ACCEPT = 0,
    GR_PRODUCER_DUPLICATE = 1,
    GR_PRODUCER_INVALID_EPOCH = 2,
    GR_PRODUCER_OUT_OF_ORDER = 3,
};
/* Judges one client data batch by its header (producer id >= 0, base sequence >= 0, not a control batch:
   the validator and the produce handler ensure these; other batches are ACCEPT). On DUPLICATE, *dup
   (borrowed, valid until the next change of `ps`) is the original batch; otherwise *dup is NULL. */
enum gr_producer_verdict gr_producer_state_check(const struct gr_producer_state *ps,
                                                 const uint8_t *batch_header,
                                                 const struct gr_producer_batch **dup);
/* Makes room so that a following gr_producer_state_update for `producer_id` cannot fail. Returns 0 or
   -ENOMEM (nothing changed). */
int gr_producer_state_reserve(struct gr_producer_state *ps, int64_t producer_id);

/* Applies one appended batch given its header (the first 61 bytes, base offset already assigned).
   Batches with producer id < 0 only advance end_offset. Returns 0, or -ENOMEM (state unchanged). */
int gr_producer_state_update(struct gr_producer_state *ps, const uint8_t *batch_header);

/* Drops producers silent for `expiration_ms` or more: last timestamp (the max timestamp of their last batch,
   as Kafka keeps it) <= now_ms - expiration_ms and no open transaction (Kafka's
   ProducerStateManager.isProducerExpired, producer.id.expiration.ms). Returns the number dropped. */
size_t gr_producer_state_expire(struct gr_producer_state *ps, int64_t now_ms, int64_t expiration_ms);

/* Drops producers whose last batch offset is below `log_start_offset` (retention, DeleteRecords). */
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
