/*
 * txns.h: the transaction coordinator's server binding (server/txns.c) on one node: __transaction_state
 * created on first use, b->txn (coordinator/txn.h) over it with its hooks bound (the append answered once
 * committed, the load of each partition on the I/O pool, the coordinator epoch, producer ids, the clock,
 * the ticks), and FindCoordinator key type 1's answer. The transaction APIs are not served yet (issue #21:
 * the markers need the partition side), so the whole binding is behind the test-only setting
 * gregor.transaction.coordinator.test.enable (off: FindCoordinator key type 1 keeps answering
 * COORDINATOR_NOT_AVAILABLE and nothing here runs). Cluster mode is not bound yet.
 * Read next: server/txns.c, coordinator/txn.h, server/groups.h (the same binding for groups).
 */
#ifndef GR_TXNS_H
#define GR_TXNS_H

#include <stdbool.h>
#include <stdint.h>

#include "server/broker.h"

#define GR_TXN_TOPIC "__transaction_state"
/* The small file of the log directory holding the last coordinator epoch handed out (a big-endian int32):
   raised and saved (on the I/O pool, durably) before every load, so an epoch is never used twice. */
#define GR_TXN_EPOCH_FILE "transaction-coordinator-epoch"

/* True when the binding is on (gregor.transaction.coordinator.test.enable, single-node mode). */
bool gr_txns_enabled(const struct gr_broker *b);
/* Starts b->txn over the existing __transaction_state (at broker start when the topic exists, or when its
   creation completed): the coordinator owns no partition until each partition's load (raise and save the
   coordinator epoch on the I/O pool, then read the partition in steps on the pool and replay each on the
   loop: TransactionStateManager.loadTransactionsForTxnTopicPartition) completes; meanwhile its ids answer
   COORDINATOR_LOAD_IN_PROGRESS. Nothing when already started or not enabled. Returns 0 or -errno (-ENOENT:
   the topic does not exist, -ENOMEM). */
int gr_txns_start(struct gr_broker *b);
/* For FindCoordinator (dispatch): when `req` asks for transaction coordinators (key type 1), the binding is
   enabled and __transaction_state does not exist, parks `req`, submits the topic's creation to the I/O pool
   (once for all waiting requests: transaction.state.log.num.partitions partitions, compacted, Kafka's
   topic configs) and returns true: once created the coordinator starts and the waiting handlers run (or a
   request whose connection closed is freed). When the topic exists, starts the coordinator if needed and
   returns false. Returns false (go on now) too for any other request, when the request already waited
   once, or out of memory. */
bool gr_txns_defer(struct gr_req *req);
/* FindCoordinator for `txn_id` (key type 1): the leader of partition abs(hashCode(txn_id)) % partitions of
   __transaction_state (Kafka's TransactionStateManager.partitionFor, coordinator/txn_records.h
   gr_txn_partition_for). Returns NONE and *node_id, or COORDINATOR_NOT_AVAILABLE (*node_id -1) while the
   topic does not exist or the partition has no leader. */
int16_t gr_txns_coordinator(struct gr_broker *b, struct gr_str txn_id, int32_t *node_id);
/* Stops the ticks, cancels the appends waiting to be committed and frees b->txn and the binding (after the
   I/O pool is drained: no load or epoch save in flight; before parked requests are freed). */
void gr_txns_stop(struct gr_broker *b);
/* The coordinator epoch the loads of this run use (0 before the first save completed); tests. */
int32_t gr_txns_epoch(const struct gr_broker *b);
/* Partitions of __transaction_state loaded (owned by b->txn); tests. */
int32_t gr_txns_loaded(const struct gr_broker *b);

#endif
