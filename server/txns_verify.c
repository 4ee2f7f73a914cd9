/*
 * txns_verify.c: KIP-890 part 1's verification on one node (declared in server/txns.h): before a
 * transactional Produce batch or a TxnOffsetCommit is written, the leader asks the transaction coordinator
 * (in process: gr_txn_verify_partitions, Kafka's TransactionCoordinator.handleVerifyPartitionsInTransaction)
 * whether the partition is in the producer's ongoing transaction, and answers the client with the errors
 * Kafka 4.x maps the coordinator's answer to (AddPartitionsToTxnManager's response handler, then
 * ReplicaManager.appendRecords for Produce or CoordinatorOperationExceptionHelper.handleOperationException
 * for TxnOffsetCommit). transaction.partition.verification.enable=false skips the question (Kafka's
 * ReplicaManager.maybeSendPartitionsToTransactionCoordinator for transaction version 1): the batch is
 * appended and opens a transaction on the partition whether the coordinator knows it or not.
 * Read next: server/txns.h, coordinator/txn.h.
 */
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "coordinator/records.h"
#include "coordinator/txn.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"
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
    case GR_ERR_CONCURRENT_TRANSACTIONS: /* transaction version 1 (no epoch bump): retriable for old clients
                                          */
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
    return gr_txns_enabled(b) && b->cfg.settings.transaction_partition_verification_enable;
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
    const uint8_t *batch = gr_txns_enabled(b) && txn_id.len >= 0 ? gr_txns_txn_batch(records) : NULL;
    if (!batch) return GR_ERR_NONE; /* not transactional (or malformed: the produce path judges it) */
    int64_t pid = gr_batch_producer_id(batch);
    int16_t epoch = gr_batch_producer_epoch(batch);
    if (!b->cfg.settings.transaction_partition_verification_enable ||
        gr_txns_log_txn_ongoing(log, pid, epoch)) {
        *verified = true; /* appended unasked, as Kafka */
        return GR_ERR_NONE;
    }
    int16_t err = ask(b, txn_id, topic, partition, pid, epoch);
    err = gr_txns_produce_error(err, produce_version, msg);
    *verified = err == GR_ERR_NONE;
    return err;
}

int16_t gr_txns_check_txn_offset_commit(struct gr_broker *b, struct gr_str txn_id, struct gr_str group_id,
                                        int64_t producer_id, int16_t producer_epoch, int16_t version)
{
    if (!gr_txns_verification_enabled(b) || txn_id.len < 0 || group_id.len <= 0) return GR_ERR_NONE;
    int32_t p = gr_coord_partition_for(group_id, b->cfg.settings.offsets_topic_num_partitions);
    struct gr_offsets_log *ol = gr_groups_offsets_log(b);
    if (ol && p < gr_offsets_log_partitions(ol) &&
        gr_txns_log_txn_ongoing(gr_offsets_log_log(ol, p), producer_id, producer_epoch))
        return GR_ERR_NONE;
    int16_t err = ask(b, txn_id, gr_str_c(GR_OFFSETS_TOPIC), p, producer_id, producer_epoch);
    return gr_txns_txn_commit_error(err, version);
}
