/*
 * txns.h: the transaction coordinator's server binding (server/txns.c) on one node: __transaction_state
 * created on first use, b->txn (coordinator/txn.h) over it with its hooks bound (the append answered once
 * committed, the load of each partition on the I/O pool, the coordinator epoch, producer ids, the clock,
 * the ticks, the markers written in process), FindCoordinator key type 1's answer, the transaction APIs'
 * waiters (server/handlers/txn_apis.c, init_producer_id.c) and Produce's verification (KIP-890 part 1).
 * Always on, on one node and in a cluster (issue #21). Cluster mode (gr_txns_cluster_start):
 * __transaction_state is a topic of the cluster (created through the topic writer by the first
 * FindCoordinator key type 1, replicated), and b->txn holds only the ids of the partitions this broker
 * leads, loaded at their leader epochs (gr_txns_follow). Markers reach only partitions led here, and
 * Produce verification only a coordinator here, so far (issue #21).
 * Read next: server/txns.c, coordinator/txn.h, server/groups.h (the same binding for groups).
 */
#ifndef GR_TXNS_H
#define GR_TXNS_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/txn.h"
#include "partition/partition.h"
#include "server/broker.h"

#define GR_TXN_TOPIC "__transaction_state"
/* The small file of the log directory holding the last coordinator epoch handed out (a big-endian int32):
   raised and saved (on the I/O pool, durably) before every load, so an epoch is never used twice. */
#define GR_TXN_EPOCH_FILE "transaction-coordinator-epoch"

/* A request waiting for the coordinator's answer (coordinator/txn.h's opaque waiter), in the request's
 * arena. `answer` fills the response from the result (it runs once, maybe inside the coordinator call);
 * when the handler parked the request (parked, set after the call returned unanswered) the request is
 * finished once every waiter sharing `req_waits` was answered (AddPartitionsToTxn v4+ waits for several
 * transactions). */
struct gr_txns_waits {
    int32_t pending; /* parked waiters not answered yet */
};
struct gr_txns_waiter {
    void (*answer)(struct gr_txns_waiter *w, const struct gr_txn_result *res);
    struct gr_req *req;
    struct gr_txns_waits *req_waits;
    void *ctx; /* the handler's: where the answer goes */
    bool answered, parked;
};

/* For the transaction APIs' handlers: the coordinator when it runs here (started now when
 * __transaction_state exists: gr_txns_start), else NULL (the handler answers NOT_COORDINATOR). */
struct gr_txn_coord *gr_txns_coord(struct gr_broker *b);
/* Ends a handler that handed the `n` waiters `ws` (sharing `waits`) to the coordinator: GR_HANDLER_DONE when
 * every one was answered inside its call, else marks the others parked and returns gr_req_await's
 * GR_HANDLER_WAIT (the done hook finishes the request once the last is answered). */
enum gr_handler_rc gr_txns_settle(struct gr_req *req, struct gr_txns_waits *waits, struct gr_txns_waiter **ws,
                                  int n);

/* The first record batch of `records` when it is transactional (the attribute bit), else NULL (none,
 * malformed: the produce path judges it, or not transactional). What KIP-890 part 1's verification looks at.
 */
const uint8_t *gr_txns_txn_batch(struct gr_bytes records);
/* KIP-890 part 1's verification of one partition's Produce records on one node (server/txns_verify.c;
 * ReplicaManager.appendRecords / maybeSendPartitionsToTransactionCoordinator, the coordinator in process:
 * its handleVerifyPartitionsInTransaction, checked and appended in the same loop turn so no marker slips in
 * between). Only when the binding is on, `txn_id` is not null and the first batch of `records` is
 * transactional does it apply; with transaction.partition.verification.enable false, or when `log` (the
 * partition's, may be NULL) already holds an open transaction of the batch's producer id at its epoch
 * (UnifiedLog.hasOngoingTransaction: VerificationGuard.SENTINEL), it asks nothing and sets *verified; else
 * *verified is true when `topic`-`partition` is in the ongoing transaction of `txn_id` at the batch's
 * producer id and epoch (append with gr_produce_args.txn_verified). Returns NONE, or the error Produce
 * answers (gr_txns_produce_error) with *msg its static message or NULL. */
int16_t gr_txns_check_produce(struct gr_broker *b, const struct gr_log *log, struct gr_str txn_id,
                              struct gr_str topic, int32_t partition, struct gr_bytes records,
                              int16_t produce_version, bool *verified, const char **msg);
/* Produce's error and message (*msg static or NULL) for the coordinator's verification answer `err`, as
 * Kafka 4.x's AddPartitionsToTxnManager (response handler) then ReplicaManager.appendRecords
 * (postVerificationCallback) map it: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE kept
 * from Produce v11 (produceRequestVersionToTransactionSupportedOperation: genericErrorSupported), else
 * INVALID_TXN_STATE "Partition was not added to the transaction" (as INVALID_TXN_STATE itself);
 * CONCURRENT_TRANSACTIONS kept from Produce v12 (transaction version 2), else as the next ones;
 * NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR ->
 * NOT_ENOUGH_REPLICAS "Unable to verify the partition has been added to the transaction. Underlying error:
 * <name>"; any other (NONE, INVALID_PRODUCER_ID_MAPPING, INVALID_REQUEST...) unchanged without a message. */
int16_t gr_txns_produce_error(int16_t err, int16_t produce_version, const char **msg);
/* KIP-890 part 1 for TxnOffsetCommit (server/txns_verify.c; Kafka 4.x's CoordinatorPartitionWriter.
 * maybeStartTransactionVerification before the group coordinator's write): when the binding and
 * transaction.partition.verification.enable are on and `txn_id` is not null and `group_id` not empty, asks
 * whether the group's __consumer_offsets partition (groups.h gr_groups_partition_for, as AddOffsetsToTxn adds
 * it) is in the ongoing transaction of `txn_id` at `producer_id` / `producer_epoch`, unless that partition's
 * log already holds an open transaction of the producer at that epoch (asked nothing, as for Produce).
 * When `req` holds a remote coordinator's verdict (gr_txns_verify_offsets_remote) that is the answer, and
 * the partition's guard must still hold (a marker since: INVALID_TXN_STATE); the group coordinator's write
 * follows in the same call. Returns NONE or the error every partition of the request answers
 * (gr_txns_txn_commit_error for TxnOffsetCommit `version`; COORDINATOR_NOT_AVAILABLE while no transaction
 * coordinator runs here). */
int16_t gr_txns_check_txn_offset_commit(struct gr_req *req, struct gr_str txn_id, struct gr_str group_id,
                                        int64_t producer_id, int16_t producer_epoch, int16_t version);
/* TxnOffsetCommit's error for the verification answer `err`: AddPartitionsToTxnManager's (PRODUCER_FENCED
 * -> INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE -> INVALID_TXN_STATE below v4, whose clients are
 * txnOffsetCommitRequestVersionToTransactionSupportedOperation's defaultError), then
 * CoordinatorOperationExceptionHelper.handleOperationException's (NETWORK_EXCEPTION ->
 * COORDINATOR_LOAD_IN_PROGRESS; the log-append errors as coordinator.h gr_coord_write_error maps the group
 * coordinator's writes: UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT ->
 * COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR); others
 * unchanged. */
int16_t gr_txns_txn_commit_error(int16_t err, int16_t version);
/* True when transaction.partition.verification.enable (dynamic; default true, KIP-890) is true. */
bool gr_txns_verification_enabled(const struct gr_broker *b);

/* Writes one partition's end-transaction marker `m` on this node, the one path for WriteTxnMarkers on the
 * leader (server/handlers/write_txn_markers.c) and the coordinator's in-process rounds (KafkaApis
 * .handleWriteTxnMarkersRequest's append, origin COORDINATOR): `log` (borrowed, the local log of the
 * partition) of __consumer_offsets goes to the group coordinator's gr_coord_txn_complete (its
 * COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR answered
 * NOT_LEADER_OR_FOLLOWER, as KafkaApis does: the transaction coordinator retries those); any other to
 * gr_partition_write_marker. A data partition's caller is past the append gate (partition.h gr_gate_enter:
 * its active file pinned open); __consumer_offsets keeps its active file open (the group coordinator's
 * appends never wait). Returns NONE with *end_offset (commit up to it before answering: the high watermark
 * passes the marker; -1: nothing written, done), or CORRUPT_MESSAGE (producer id or epoch below 0: no
 * marker can carry it), INVALID_PRODUCER_EPOCH (epoch below the producer's entry; for m->transaction_version
 * 2 at or below it, but for a retried marker: partition/partition.h gr_partition_write_marker),
 * TRANSACTION_COORDINATOR_FENCED (coordinator epoch below the entry's: ProducerAppendInfo
 * .checkCoordinatorEpoch), NOT_LEADER_OR_FOLLOWER (not the leader), KAFKA_STORAGE_ERROR (offline, no room,
 * I/O error), MESSAGE_TOO_LARGE or UNKNOWN_SERVER_ERROR (no memory). */
int16_t gr_txns_write_marker(struct gr_broker *b, struct gr_log *log, const struct gr_partition_marker *m,
                             int64_t *end_offset);

/* Transaction version 2 (Produce v12+, KIP-890 part 2), on one node or in a cluster with the coordinator
 * in process: before the appends, once the request's local logs are made, takes a verification guard on
 * every local partition whose first batch is transactional and has the coordinator add those whose log does
 * not hold the producer's open transaction (gr_txn_add_partitions_tv, client version 2: Kafka's
 * AddPartitionsToTxnManager with verifyOnly false), whatever transaction.partition.verification.enable
 * says; the request waits (gr_req_await_verified, as below) until the Ongoing record is committed, then
 * `run` runs again and each partition's verdict is the add's answer (CONCURRENT_TRANSACTIONS while the
 * previous transaction completes, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING...). With the coordinator on
 * another broker the question below asks it to add (VerifyOnly false) instead of verifying.
 * Cluster mode, before a transactional Produce's appends (ReplicaManager.appendRecords with
 * AddPartitionsToTxnManager.verifyTransaction), once the request's local logs are made: when the request's
 * transactional id is coordinated by another broker and it was not asked yet, takes a verification guard on
 * every partition led here whose first batch is transactional (partition.h gr_partition_txn_verify_start;
 * one whose log already holds the producer's ongoing transaction is not asked: hasOngoingTransaction) and
 * asks that broker about the others (server/txn_verifier.h: batched with other Produces' questions into one
 * AddPartitionsToTxn v4+ VerifyOnly per broker), declaring the request's wait until the answer
 * (gr_req_await_verified, at most a connect plus replica.socket.timeout.ms; `run` runs again then): returns
 * true with *rc for the handler to return. Returns false (go on now) otherwise:
 * transaction.partition.verification.enable off, single-node mode, no transactional id, the coordinator
 * here (gr_txns_check_produce asks it in process) or unknown, nothing to ask, already asked, or answered or
 * refused at once (a fenced epoch: INVALID_PRODUCER_EPOCH; the broker's queue full or no memory:
 * NETWORK_EXCEPTION, so NOT_ENOUGH_REPLICAS). */
bool gr_txns_verify_remote(struct gr_req *req, gr_handler_fn run, enum gr_handler_rc *rc);
/* TxnOffsetCommit v5+ (transaction version 2): the group's offsets partition is added implicitly, as for
 * Produce v12+ above (in process, or asked of the coordinator's broker without VerifyOnly).
 * Cluster mode, TxnOffsetCommit before the group coordinator writes (CoordinatorRuntime
 * .scheduleTransactionalWriteOperation's verification through AddPartitionsToTxnManager): when `txn_id` is
 * coordinated by another broker and the group's __consumer_offsets partition is here, takes the guard on that
 * partition and asks the coordinator's broker whether the partition is in the producer's transaction
 * (not when its log already holds the transaction), as gr_txns_verify_remote does; true with *rc while the
 * request waits (`run` runs again with the answer). False (go on now) otherwise; the verdict is then read by
 * gr_txns_check_txn_offset_commit. */
bool gr_txns_verify_offsets_remote(struct gr_req *req, struct gr_str txn_id, struct gr_str group_id,
                                   int64_t producer_id, int16_t producer_epoch, gr_handler_fn run,
                                   enum gr_handler_rc *rc);
/* The remote verification's verdict for `topic`-`partition` of `req` (gr_txns_verify_remote): false when the
 * request has none for it (ask gr_txns_check_produce); else true with *error_code the coordinator's answer
 * as server/txn_verifier.h gives it (NONE: verified or not asked; NETWORK_EXCEPTION for a lost connection,
 * a timeout or a withdrawn question), for the caller to map as Produce answers it (gr_txns_produce_error),
 * and *guard the partition's verification guard, which the append must still hold (gr_produce_args
 * txn_guarded: a marker that ended the transaction since makes it INVALID_TXN_STATE). */
bool gr_txns_remote_verdict(struct gr_req *req, struct gr_str topic, int32_t partition, int16_t *error_code,
                            uint64_t *guard);
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
   topic does not exist (cluster mode: the call has the topic writer create it, once at a time), while the
   partition has no leader, or when the leader is this broker and it is fenced. */
int16_t gr_txns_coordinator(struct gr_broker *b, struct gr_str txn_id, int32_t *node_id);
/* Cluster mode (server/membership.c, after gr_groups_cluster_start; nothing when the binding is off): the
   coordinator follows the image (gr_txns_follow). b->txn is created (owning nothing) once the image holds
   __transaction_state, mapping ids over its partition count. Returns 0 or -ENOMEM. */
int gr_txns_cluster_start(struct gr_broker *b);
/* Cluster mode: the one place that decides which __transaction_state partitions this coordinator serves
   (called on every image change and when the replica manager made a local log): a partition led here (not
   fenced) whose local log exists is loaded at its leader epoch, the coordinator epoch
   (TransactionCoordinator.onElection: loadTransactionsForTxnTopicPartition; its PrepareX transactions are
   completed once loaded), one no longer led here is unloaded (onResignation: its ids answer NOT_COORDINATOR,
   its writes in flight answer NOT_COORDINATOR when they end, its marker rounds stop), one led again at a
   newer leader epoch is loaded again. Also retries a failed creation of the topic when the usable broker
   count changed. Nothing in single-node mode. */
void gr_txns_follow(struct gr_broker *b);
/* Cluster mode, before the inter-broker client is freed (server/membership.c): closes the marker connections
   to other brokers (server/txn_markers.h); markers not answered are dropped (their rounds end at
   gr_txns_stop). Nothing when none was made. */
void gr_txns_stop_markers(struct gr_broker *b);
/* Stops the ticks, cancels the appends waiting to be committed and frees b->txn and the binding (after the
   I/O pool is drained: no load or epoch save in flight; before parked requests are freed). */
void gr_txns_stop(struct gr_broker *b);
/* The coordinator epoch the loads of this run use (0 before the first save completed); tests. */
int32_t gr_txns_epoch(const struct gr_broker *b);
/* Partitions of __transaction_state loaded (owned by b->txn); tests. */
int32_t gr_txns_loaded(const struct gr_broker *b);

#endif
