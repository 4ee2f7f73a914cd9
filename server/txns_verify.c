/*
 * txns_verify.c: KIP-890 part 1's verification on one node (declared in server/txns.h): before a
 * transactional Produce batch or a TxnOffsetCommit is written, the leader asks the transaction coordinator
 * (in process: gr_txn_verify_partitions, Kafka's TransactionCoordinator.handleVerifyPartitionsInTransaction)
 * whether the partition is in the producer's ongoing transaction, and answers the client with the errors
 * Kafka 4.x maps the coordinator's answer to (AddPartitionsToTxnManager's response handler, then
 * ReplicaManager.handleProduceAppend's postVerificationCallback for Produce: NETWORK_EXCEPTION,
 * COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and, for transaction version 1,
 * CONCURRENT_TRANSACTIONS below Produce v12 as NOT_ENOUGH_REPLICAS; or
 * CoordinatorOperationExceptionHelper.handleOperationException for TxnOffsetCommit).
 * transaction.partition.verification.enable=false skips the question (Kafka's
 * ReplicaManager.maybeSendPartitionsToTransactionCoordinator for transaction version 1): the batch is
 * appended and opens a transaction on the partition whether the coordinator knows it or not.
 * The verification guard (Kafka's VerificationGuard, checked again at append) is not needed here: the
 * coordinator is asked and the batch appended in the same call on the loop (produce.c produce_partition,
 * past the append gate), so no marker can land in between. A coordinator on another broker answers later:
 * server/txns.c gr_txns_verify_remote takes a guard first (partition.h gr_partition_txn_verify_start).
 * Read next: server/txns.h, coordinator/txn.h.
 */
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "coordinator/records.h"
#include "coordinator/txn.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"
#include "server/broker.h"
#include "server/groups.h"
#include "server/txns.h"
#include "storage/log.h"
#include "storage/producer_state.h"

/* The "Underlying error" messages of ReplicaManager.appendRecords' NOT_ENOUGH_REPLICAS (Errors.toString is
   the enum's name). */
#define UNVERIFIED "Unable to verify the partition has been added to the transaction. Underlying error: "

int16_t gr_txns_produce_error(int16_t err, int16_t produce_version, const char **msg)
{
    *msg = NULL;
    switch (err) {
    case GR_ERR_NONE:
        return GR_ERR_NONE;
    case GR_ERR_PRODUCER_FENCED: /* AddPartitionsToTxnManager: producers expect INVALID_PRODUCER_EPOCH */
        return GR_ERR_INVALID_PRODUCER_EPOCH;
    case GR_ERR_TRANSACTION_ABORTABLE: /* kept for generic-error clients (Produce v11+) */
        if (produce_version >= 11) return GR_ERR_TRANSACTION_ABORTABLE;
        *msg = "Partition was not added to the transaction"; /* defaultError below v11 */
        return GR_ERR_INVALID_TXN_STATE;
    case GR_ERR_INVALID_TXN_STATE:
        *msg = "Partition was not added to the transaction";
        return GR_ERR_INVALID_TXN_STATE;
    case GR_ERR_CONCURRENT_TRANSACTIONS:
        /* as it is to a transaction version 2 client (Produce v12+: the implicit add found the previous
           transaction completing, retriable); NOT_ENOUGH_REPLICAS, retriable, for older ones */
        if (produce_version >= GR_TXN_PRODUCE_V2_MIN) return GR_ERR_CONCURRENT_TRANSACTIONS;
        *msg = UNVERIFIED "CONCURRENT_TRANSACTIONS";
        return GR_ERR_NOT_ENOUGH_REPLICAS;
    case GR_ERR_NETWORK_EXCEPTION:
        *msg = UNVERIFIED "NETWORK_EXCEPTION";
        return GR_ERR_NOT_ENOUGH_REPLICAS;
    case GR_ERR_COORDINATOR_LOAD_IN_PROGRESS:
        *msg = UNVERIFIED "COORDINATOR_LOAD_IN_PROGRESS";
        return GR_ERR_NOT_ENOUGH_REPLICAS;
    case GR_ERR_COORDINATOR_NOT_AVAILABLE:
        *msg = UNVERIFIED "COORDINATOR_NOT_AVAILABLE";
        return GR_ERR_NOT_ENOUGH_REPLICAS;
    case GR_ERR_NOT_COORDINATOR:
        *msg = UNVERIFIED "NOT_COORDINATOR";
        return GR_ERR_NOT_ENOUGH_REPLICAS;
    default: /* INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, INVALID_REQUEST...: as they are */
        return err;
    }
}

int16_t gr_txns_txn_commit_error(int16_t err, int16_t version)
{
    switch (err) {
    case GR_ERR_PRODUCER_FENCED:
        return GR_ERR_INVALID_PRODUCER_EPOCH;
    case GR_ERR_TRANSACTION_ABORTABLE: /* generic-error clients from TxnOffsetCommit v4 */
        return version >= 4 ? GR_ERR_TRANSACTION_ABORTABLE : GR_ERR_INVALID_TXN_STATE;
    case GR_ERR_NETWORK_EXCEPTION:
        return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    default: /* the log-append errors as the group coordinator maps its own writes; NONE, the coordinator's
                COORDINATOR_*, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS... unchanged */
        return gr_coord_write_error(err);
    }
}

bool gr_txns_verification_enabled(const struct gr_broker *b)
{
    return b->cfg.settings.transaction_partition_verification_enable;
}

/* UnifiedLog.hasOngoingTransaction: `log` holds an open transaction of `producer_id` at `producer_epoch`;
   then Kafka's leader asks the coordinator nothing (maybeStartTransactionVerification's SENTINEL). */
static bool ongoing(const struct gr_log *log, int64_t producer_id, int16_t producer_epoch)
{
    const struct gr_producer_entry *e =
        log ? gr_producer_state_find(gr_log_producer_state(log), producer_id) : NULL;
    return e && e->producer_epoch == producer_epoch && e->current_txn_first_offset >= 0;
}

/* The coordinator's answer for one partition: COORDINATOR_NOT_AVAILABLE while none runs here
   (AddPartitionsToTxnManager.getTransactionCoordinator: __transaction_state not there yet). */
static int16_t ask(struct gr_broker *b, struct gr_str txn_id, struct gr_str topic, int32_t partition,
                   int64_t producer_id, int16_t producer_epoch)
{
    if (!b->txn) return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    struct gr_txn_tp tp = {topic, partition};
    int16_t err = GR_ERR_NONE;
    gr_txn_verify_partitions(b->txn, txn_id, producer_id, producer_epoch, &tp, 1, &err);
    return err;
}

int16_t gr_txns_check_produce(struct gr_broker *b, const struct gr_log *log, struct gr_str txn_id,
                              struct gr_str topic, int32_t partition, struct gr_bytes records,
                              int16_t produce_version, bool *verified, const char **msg)
{
    *verified = false;
    *msg = NULL;
    const uint8_t *batch = txn_id.len >= 0 ? gr_txns_txn_batch(records) : NULL;
    if (!batch) return GR_ERR_NONE; /* not transactional (or malformed: the produce path judges it) */
    int64_t pid = gr_batch_producer_id(batch);
    int16_t epoch = gr_batch_producer_epoch(batch);
    if (!b->cfg.settings.transaction_partition_verification_enable || ongoing(log, pid, epoch)) {
        *verified = true; /* appended unasked, as Kafka */
        return GR_ERR_NONE;
    }
    int16_t err = ask(b, txn_id, topic, partition, pid, epoch);
    err = gr_txns_produce_error(err, produce_version, msg);
    *verified = err == GR_ERR_NONE;
    return err;
}

int16_t gr_txns_check_txn_offset_commit(struct gr_req *req, struct gr_str txn_id, struct gr_str group_id,
                                        int64_t producer_id, int16_t producer_epoch, int16_t version)
{
    struct gr_broker *b = req->broker;
    if (txn_id.len < 0 || group_id.len <= 0) return GR_ERR_NONE;
    int32_t p = gr_groups_partition_for(b, group_id); /* as AddOffsetsToTxn added it */
    struct gr_offsets_log *ol = gr_groups_offsets_log(b);
    struct gr_log *log = ol && p < gr_offsets_log_partitions(ol) ? gr_offsets_log_log(ol, p) : NULL;
    int16_t err = GR_ERR_NONE;
    uint64_t guard = 0;
    if (gr_txns_remote_verdict(req, gr_str_c(GR_OFFSETS_TOPIC), p, &err, &guard)) {
        /* the verdict came before: the guard must still hold (no marker since), the write follows now */
        if (!err && (!log || !gr_partition_txn_guard_holds(gr_broker_partition(b, log), producer_id,
                                                           producer_epoch, guard)))
            return GR_ERR_INVALID_TXN_STATE;
        return gr_txns_txn_commit_error(err, version);
    }
    /* no verdict (the implicit add's, or a remote coordinator's): KIP-890 part 1 when enabled */
    if (!gr_txns_verification_enabled(b)) return GR_ERR_NONE;
    if (log && ongoing(log, producer_id, producer_epoch)) return GR_ERR_NONE;
    err = ask(b, txn_id, gr_str_c(GR_OFFSETS_TOPIC), p, producer_id, producer_epoch);
    return gr_txns_txn_commit_error(err, version);
}
