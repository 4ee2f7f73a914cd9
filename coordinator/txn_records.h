/*
 * txn_records.h: the key/value formats of the internal topic __transaction_state, written as Kafka's
 * transaction coordinator writes them (TransactionLog.keyToBytes / valueToBytes, Kafka 4.x) so that Kafka's
 * own tools (kafka-dump-log --transaction-log-decoder) read Gregor's files. Facts from Kafka's
 * TransactionLogKey.json and TransactionLogValue.json (transaction-coordinator module).
 *
 * Key: an int16 prefix (0: the coordinator record type TRANSACTION_LOG, which is also key version 0) then
 * TransactionLogKey v0, not flexible:
 *   OFFSET SIZE MEANING
 *   0      2    0
 *   2      2+n  transactional id (int16-length string)
 *
 * Value: an int16 version, then TransactionLogValue. Kafka writes version 1 (flexible) once
 * transaction.version >= 1 is finalized (TransactionVersion.transactionLogValueVersion), version 0 below;
 * Gregor writes version 1 at every level (its default level is 2; at level 0 Kafka would write version 0).
 *   FIELD                             v0 (classic)             v1 (flexible)
 *   ProducerId int64                  x                        x
 *   ProducerEpoch int16               x                        x
 *   TransactionTimeoutMs int32        x                        x
 *   TransactionStatus int8            x                        x   (enum gr_txn_state)
 *   TransactionPartitions             int32-count nullable     compact nullable array (N+1, 0 null)
 *     Topic string                    int16-length             compact (N+1)
 *     PartitionIds []int32            int32-count              compact count; then an empty tag section
 *   TransactionLastUpdateTimestampMs  int64                    int64
 *   TransactionStartTimestampMs       int64                    int64
 *   tagged fields                     -                        tag 0 PreviousProducerId int64 (default -1)
 *                                                              tag 1 NextProducerId int64 (default -1)
 *                                                              tag 2 ClientTransactionVersion int16 (0)
 * A tagged field is written only when it differs from its default (Kafka's generated writer); with
 * transaction version 1 clients (EndTxn <= v4) none differs, so the tag section is the single byte 0.
 * TransactionPartitions is null in state Empty (Kafka writes null there and ignores it on read), else one
 * entry per topic. A null value (tombstone) removes the transactional id (transactional.id.expiration.ms).
 *
 * Also here: the partition of a transactional id (Kafka's TransactionStateManager.partitionFor:
 * abs(transactionalId.hashCode) % transaction.state.log.num.partitions, records.h's Java hash).
 * Read next: coordinator/txn.h (the state machine that writes these).
 */
#ifndef GR_COORD_TXN_RECORDS_H
#define GR_COORD_TXN_RECORDS_H

#include <stdint.h>

#include "common/arena.h"
#include "coordinator/records.h"
#include "protocol/wire.h"

#define GR_TXN_STATE_TOPIC "__transaction_state"
#define GR_TXN_LOG_KEY_VERSION 0   /* CoordinatorRecordType TRANSACTION_LOG / TransactionLogKey v0 */
#define GR_TXN_LOG_VALUE_VERSION 1 /* TransactionVersion 1's transactionLogValueVersion */

/* Kafka's TransactionState ids (the TransactionStatus byte). */
enum gr_txn_state {
    GR_TXN_EMPTY = 0,
    GR_TXN_ONGOING = 1,
    GR_TXN_PREPARE_COMMIT = 2,
    GR_TXN_PREPARE_ABORT = 3,
    GR_TXN_COMPLETE_COMMIT = 4,
    GR_TXN_COMPLETE_ABORT = 5,
    GR_TXN_DEAD = 6,
    GR_TXN_PREPARE_EPOCH_FENCE = 7,
};
#define GR_TXN_STATE_COUNT 8

/* Kafka's name of a state ("Empty", "Ongoing", "PrepareCommit", ... as DescribeTransactions reports). */
const char *gr_txn_state_name(enum gr_txn_state state);

/* One TransactionPartitions entry: a topic and its partition ids. */
struct gr_txn_topic_parts {
    struct gr_str topic;
    const int32_t *partitions;
    int32_t count;
};

struct gr_txn_log_value {
    int64_t producer_id;
    int64_t previous_producer_id; /* tag 0, -1 default */
    int64_t next_producer_id;     /* tag 1, -1 default */
    int16_t producer_epoch;
    int32_t timeout_ms;
    int8_t state; /* enum gr_txn_state */
    const struct gr_txn_topic_parts *topics;
    int32_t topic_count; /* -1: null (written for Empty); decode gives -1 for null */
    int64_t last_update_ms;
    int64_t start_ms;                   /* -1: no transaction started */
    int16_t client_transaction_version; /* tag 2, 0 default */
};

/* Encodes the record of `txn_id` into `rec` (newly allocated key and value; gr_coord_records_free).
 * `value` NULL: a tombstone (value NULL, length 0). `value_version` 0 or 1 (GR_TXN_LOG_VALUE_VERSION).
 * Returns 0, -EINVAL (a bad version or a negative count other than -1), or -ENOMEM (rec untouched). */
int gr_txn_log_record(struct gr_coord_record *rec, struct gr_str txn_id, const struct gr_txn_log_value *value,
                      int16_t value_version);

/* Decodes a key (TransactionLog.read's key half). Returns 0 with *txn_id (a view into `key`), 1 for a key
 * whose version is not the transaction log's (Kafka skips it: UnknownKeyVersion), -1 for bytes that do not
 * parse (too short; trailing bytes are ignored, as Kafka's generated reader ignores them). */
int gr_txn_log_key_decode(const uint8_t *key, size_t len, struct gr_str *txn_id);

/* Decodes a non-null value of version 0 or 1 (unknown tags skipped); topics and their partition arrays
 * come from `arena`, strings are views into `value`. Returns 0, 1 for an unknown value version
 * (UnknownValueVersion), or -1 for bytes that do not parse, a state id outside 0..7, a negative count other
 * than a null array, or an exhausted arena (trailing bytes are ignored, as by Kafka's reader). */
int gr_txn_log_value_decode(const uint8_t *value, size_t len, struct gr_arena *arena,
                            struct gr_txn_log_value *out);

/* The __transaction_state partition of `txn_id` (TransactionStateManager.partitionFor). partitions >= 1. */
int32_t gr_txn_partition_for(struct gr_str txn_id, int32_t partitions);

#endif
