/*
 * txn_log.h: the transaction coordinator's records as batches of __transaction_state, the internal topic's
 * side of coordinator/txn.h. A write is one uncompressed RecordBatch v2 holding one record with no producer
 * id, stamped with the coordinator's wall clock, as Kafka's TransactionStateManager.appendTransactionToLog
 * builds it (MemoryRecords.withRecords(Compression.NONE, SimpleRecord(timestamp, key, value))); the server
 * appends it with acks=-1 (TransactionLog.EnforcedRequiredAcks) and reports the outcome with
 * gr_txn_write_done. A load reads one partition from its log start offset to its log end offset and hands
 * each whole batch's records to gr_txn_replay, skipping control batches (Kafka's loadTransactionMetadata).
 * The topic's configs (cleanup.policy=compact, compression none, segment.bytes 104857600, min.insync.replicas
 * 2, replication factor 3) are the later server slice's; the names are here.
 * Read next: coordinator/txn.h.
 */
#ifndef GR_COORD_TXN_LOG_H
#define GR_COORD_TXN_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/records.h"
#include "coordinator/txn.h"

#define GR_TXN_LOG_SEGMENT_BYTES 104857600 /* transaction.state.log.segment.bytes */
#define GR_TXN_LOG_REPLICATION_FACTOR 3    /* transaction.state.log.replication.factor */
#define GR_TXN_LOG_MIN_ISR 2               /* transaction.state.log.min.isr */

/* Builds the batch of one write: `rec` (borrowed) at timestamp `wall_ms`, base offset 0 (the log assigns
   it). Returns 0 with *batch (new; free()) and *len, -EMSGSIZE (over INT32_MAX bytes) or -ENOMEM. */
int gr_txn_log_batch(const struct gr_coord_record *rec, int64_t wall_ms, uint8_t **batch, size_t *len);

/* Replays the whole batches of `buf` (`len` bytes read from partition `p` of __transaction_state) at
   offsets >= `from` into `tc` (gr_txn_replay; `p` must be loading), skipping control batches and records
   without a key; a record that does not parse is skipped and logged, a corrupt batch ends its own records
   only. Adds the records applied to *count. Returns the offset after the last whole batch (== from: none,
   a torn tail). */
int64_t gr_txn_log_replay(struct gr_txn_coord *tc, int32_t p, const uint8_t *buf, size_t len, int64_t from,
                          int64_t *count);

#endif
