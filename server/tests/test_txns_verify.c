/*
 * test_txns_verify.c: the KIP-890 part 1 error mappings of server/txns_verify.c, pure (no broker): every
 * answer of the coordinator's verification as Produce carries it (Kafka 4.x's AddPartitionsToTxnManager
 * then ReplicaManager.appendRecords: code and message, by Produce version) and as TxnOffsetCommit carries
 * it (AddPartitionsToTxnManager then CoordinatorOperationExceptionHelper.handleOperationException).
 * Read next: compat-tests/txn/verify.py (the same through the wire where one node can reach it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/errors.h"
#include "server/txns.h"

#define UNVERIFIED "Unable to verify the partition has been added to the transaction. Underlying error: "

static void expect_produce(int16_t coord, int16_t version, int16_t want, const char *want_msg)
{
    const char *msg = "unset";
    assert_int_equal(gr_txns_produce_error(coord, version, &msg), want);
    if (want_msg)
        assert_string_equal(msg, want_msg);
    else
        assert_null(msg);
}

static void test_produce_mappings(void **state)
{
    (void)state;
    for (int16_t v = 3; v <= 13; v++) {
        expect_produce(GR_ERR_NONE, v, GR_ERR_NONE, NULL);
        expect_produce(GR_ERR_PRODUCER_FENCED, v, GR_ERR_INVALID_PRODUCER_EPOCH, NULL);
        expect_produce(GR_ERR_INVALID_PRODUCER_EPOCH, v, GR_ERR_INVALID_PRODUCER_EPOCH, NULL);
        expect_produce(GR_ERR_INVALID_PRODUCER_ID_MAPPING, v, GR_ERR_INVALID_PRODUCER_ID_MAPPING, NULL);
        expect_produce(GR_ERR_INVALID_REQUEST, v, GR_ERR_INVALID_REQUEST, NULL);
        expect_produce(GR_ERR_INVALID_TXN_STATE, v, GR_ERR_INVALID_TXN_STATE,
                       "Partition was not added to the transaction");
        if (v < 11)
            expect_produce(GR_ERR_TRANSACTION_ABORTABLE, v, GR_ERR_INVALID_TXN_STATE,
                           "Partition was not added to the transaction");
        else
            expect_produce(GR_ERR_TRANSACTION_ABORTABLE, v, GR_ERR_TRANSACTION_ABORTABLE, NULL);
        if (v < 12) /* transaction version 1 clients: retriable NOT_ENOUGH_REPLICAS */
            expect_produce(GR_ERR_CONCURRENT_TRANSACTIONS, v, GR_ERR_NOT_ENOUGH_REPLICAS,
                           UNVERIFIED "CONCURRENT_TRANSACTIONS");
        else /* version 2 (the implicit add met the previous transaction completing): as it is */
            expect_produce(GR_ERR_CONCURRENT_TRANSACTIONS, v, GR_ERR_CONCURRENT_TRANSACTIONS, NULL);
        expect_produce(GR_ERR_NETWORK_EXCEPTION, v, GR_ERR_NOT_ENOUGH_REPLICAS,
                       UNVERIFIED "NETWORK_EXCEPTION");
        expect_produce(GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, v, GR_ERR_NOT_ENOUGH_REPLICAS,
                       UNVERIFIED "COORDINATOR_LOAD_IN_PROGRESS");
        expect_produce(GR_ERR_COORDINATOR_NOT_AVAILABLE, v, GR_ERR_NOT_ENOUGH_REPLICAS,
                       UNVERIFIED "COORDINATOR_NOT_AVAILABLE");
        expect_produce(GR_ERR_NOT_COORDINATOR, v, GR_ERR_NOT_ENOUGH_REPLICAS, UNVERIFIED "NOT_COORDINATOR");
    }
}

static void test_txn_offset_commit_mappings(void **state)
{
    (void)state;
    for (int16_t v = 0; v <= 5; v++) {
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_NONE, v), GR_ERR_NONE);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_PRODUCER_FENCED, v), GR_ERR_INVALID_PRODUCER_EPOCH);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_TRANSACTION_ABORTABLE, v),
                         v >= 4 ? GR_ERR_TRANSACTION_ABORTABLE : GR_ERR_INVALID_TXN_STATE);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_NETWORK_EXCEPTION, v),
                         GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_NOT_ENOUGH_REPLICAS, v),
                         GR_ERR_COORDINATOR_NOT_AVAILABLE);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_UNKNOWN_TOPIC_OR_PARTITION, v),
                         GR_ERR_COORDINATOR_NOT_AVAILABLE);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_REQUEST_TIMED_OUT, v),
                         GR_ERR_COORDINATOR_NOT_AVAILABLE);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_NOT_LEADER_OR_FOLLOWER, v), GR_ERR_NOT_COORDINATOR);
        assert_int_equal(gr_txns_txn_commit_error(GR_ERR_KAFKA_STORAGE_ERROR, v), GR_ERR_NOT_COORDINATOR);
        /* the coordinator's own answers pass through */
        const int16_t same[] = {GR_ERR_COORDINATOR_NOT_AVAILABLE,    GR_ERR_NOT_COORDINATOR,
                                GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, GR_ERR_CONCURRENT_TRANSACTIONS,
                                GR_ERR_INVALID_PRODUCER_ID_MAPPING,  GR_ERR_INVALID_PRODUCER_EPOCH};
        for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
            assert_int_equal(gr_txns_txn_commit_error(same[i], v), same[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_produce_mappings),
        cmocka_unit_test(test_txn_offset_commit_mappings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
