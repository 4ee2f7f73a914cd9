/*
 * test_metrics_counts.c: server/metrics_counts.c and the generated *_count_errors walkers: exact error counts
 * of built responses (Kafka's errorCounts() rules per API), the errors_total lines, the Fetch split of
 * requests_total, and the failed/rejected marks of an append result (server/metrics.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "server/apis.h"
#include "server/metrics.h"

static uint64_t slots[GR_COUNTS_ERROR_SLOTS];
#define AT(code) slots[(code) + 1]

/* Fetch: the top-level error (present from v7, counted at every version as Kafka's data object) and every
   partition's; a code outside the table counts as UNKNOWN_SERVER_ERROR. */
static void fetch_counts_top_and_partitions(void **state)
{
    (void)state;
    memset(slots, 0, sizeof slots);
    struct gr_fetch_response r;
    gr_fetch_response_init(&r);
    struct gr_fetch_response_partition_data parts[4];
    int16_t codes[4] = {GR_ERR_NONE, GR_ERR_NONE, GR_ERR_OFFSET_OUT_OF_RANGE, 999};
    for (int i = 0; i < 4; i++) {
        gr_fetch_response_partition_data_init(&parts[i]);
        parts[i].error_code = codes[i];
    }
    struct gr_fetch_response_fetchable_topic_response topics[2];
    gr_fetch_response_fetchable_topic_response_init(&topics[0]);
    gr_fetch_response_fetchable_topic_response_init(&topics[1]);
    topics[0].partitions = (struct gr_fetch_response_partition_data_array){parts, 3};
    topics[1].partitions = (struct gr_fetch_response_partition_data_array){parts + 3, 1};
    r.responses = (struct gr_fetch_response_fetchable_topic_response_array){topics, 2};
    assert_true(gr_metrics_counts_top(GR_API_FETCH, &r));
    gr_fetch_response_count_errors(&r, true, slots, GR_COUNTS_ERROR_SLOTS);
    assert_int_equal(AT(GR_ERR_NONE), 3); /* the top level's and two partitions' */
    assert_int_equal(AT(GR_ERR_OFFSET_OUT_OF_RANGE), 1);
    assert_int_equal(AT(GR_ERR_UNKNOWN_SERVER_ERROR), 1); /* 999 */
    uint64_t sum = 0;
    for (int i = 0; i < GR_COUNTS_ERROR_SLOTS; i++)
        sum += slots[i];
    assert_int_equal(sum, 5);
}

/* Metadata: topics and partitions only (MetadataResponse.errorCounts), never the v13 top-level error. */
static void metadata_leaves_out_top_level(void **state)
{
    (void)state;
    struct gr_metrics_counts *c = calloc(1, sizeof *c);
    assert_non_null(c);
    struct gr_metadata_response r;
    gr_metadata_response_init(&r);
    r.error_code = GR_ERR_NOT_CONTROLLER;
    struct gr_metadata_response_metadata_response_partition p[2];
    gr_metadata_response_metadata_response_partition_init(&p[0]);
    gr_metadata_response_metadata_response_partition_init(&p[1]);
    p[1].error_code = GR_ERR_LEADER_NOT_AVAILABLE;
    struct gr_metadata_response_metadata_response_topic t[2];
    gr_metadata_response_metadata_response_topic_init(&t[0]);
    gr_metadata_response_metadata_response_topic_init(&t[1]);
    t[0].partitions = (struct gr_metadata_response_metadata_response_partition_array){p, 2};
    t[1].error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    r.topics = (struct gr_metadata_response_metadata_response_topic_array){t, 2};
    assert_false(gr_metrics_counts_top(GR_API_METADATA, &r));
    gr_metrics_counts_response(c, GR_API_METADATA, &r);
    gr_metrics_counts_response(c, GR_API_METADATA, &r);
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_counts_render(c, NULL, &b));
    assert_string_equal(b.data,
                        "# TYPE kafka_network_requestmetrics_errors_total counter\n"
                        "kafka_network_requestmetrics_errors_total{request=\"Metadata\",error=\"NONE\"} 4\n"
                        "kafka_network_requestmetrics_errors_total{request=\"Metadata\",error="
                        "\"UNKNOWN_TOPIC_OR_PARTITION\"} 2\n"
                        "kafka_network_requestmetrics_errors_total{request=\"Metadata\",error="
                        "\"LEADER_NOT_AVAILABLE\"} 2\n"
                        "# TYPE kafka_server_brokertopicmetrics_replicationbytesin_total counter\n"
                        "kafka_server_brokertopicmetrics_replicationbytesin_total 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_replicationbytesout_total counter\n"
                        "kafka_server_brokertopicmetrics_replicationbytesout_total 0\n");
    gr_prom_buf_free(&b);
    free(c);
}

/* FindCoordinator v4+ (coordinators listed): only theirs; v0-3 (none listed): the top-level error.
   OffsetFetch v8+ (groups): the groups' and their partitions', not the top level's. AddPartitionsToTxn v0-3
   results: not the top level's; partition_error_code fields count. */
static void per_api_top_level_rules(void **state)
{
    (void)state;
    memset(slots, 0, sizeof slots);
    struct gr_find_coordinator_response fc;
    gr_find_coordinator_response_init(&fc);
    fc.error_code = GR_ERR_NONE;
    struct gr_find_coordinator_response_coordinator co[2];
    gr_find_coordinator_response_coordinator_init(&co[0]);
    gr_find_coordinator_response_coordinator_init(&co[1]);
    co[0].error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
    co[1].error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
    fc.coordinators = (struct gr_find_coordinator_response_coordinator_array){co, 2};
    gr_find_coordinator_response_count_errors(&fc, gr_metrics_counts_top(GR_API_FIND_COORDINATOR, &fc), slots,
                                              GR_COUNTS_ERROR_SLOTS);
    assert_int_equal(AT(GR_ERR_COORDINATOR_NOT_AVAILABLE), 2);
    assert_int_equal(AT(GR_ERR_NONE), 0);
    fc.coordinators.count = 0;
    fc.error_code = GR_ERR_NOT_COORDINATOR;
    gr_find_coordinator_response_count_errors(&fc, gr_metrics_counts_top(GR_API_FIND_COORDINATOR, &fc), slots,
                                              GR_COUNTS_ERROR_SLOTS);
    assert_int_equal(AT(GR_ERR_NOT_COORDINATOR), 1);

    memset(slots, 0, sizeof slots);
    struct gr_offset_fetch_response of;
    gr_offset_fetch_response_init(&of);
    struct gr_offset_fetch_response_offset_fetch_response_partitions op[3];
    for (int i = 0; i < 3; i++)
        gr_offset_fetch_response_offset_fetch_response_partitions_init(&op[i]);
    op[2].error_code = GR_ERR_UNSTABLE_OFFSET_COMMIT;
    struct gr_offset_fetch_response_offset_fetch_response_topics ot;
    gr_offset_fetch_response_offset_fetch_response_topics_init(&ot);
    ot.partitions = (struct gr_offset_fetch_response_offset_fetch_response_partitions_array){op, 3};
    struct gr_offset_fetch_response_offset_fetch_response_group og;
    gr_offset_fetch_response_offset_fetch_response_group_init(&og);
    og.topics = (struct gr_offset_fetch_response_offset_fetch_response_topics_array){&ot, 1};
    of.groups = (struct gr_offset_fetch_response_offset_fetch_response_group_array){&og, 1};
    gr_offset_fetch_response_count_errors(&of, gr_metrics_counts_top(GR_API_OFFSET_FETCH, &of), slots,
                                          GR_COUNTS_ERROR_SLOTS);
    assert_int_equal(AT(GR_ERR_NONE), 3); /* the group's and two partitions' (not the absent top level's) */
    assert_int_equal(AT(GR_ERR_UNSTABLE_OFFSET_COMMIT), 1);

    memset(slots, 0, sizeof slots);
    struct gr_add_partitions_to_txn_response ap;
    gr_add_partitions_to_txn_response_init(&ap);
    struct gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result pr;
    gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result_init(&pr);
    pr.partition_error_code = GR_ERR_CONCURRENT_TRANSACTIONS;
    struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result tr;
    gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_init(&tr);
    tr.results_by_partition =
        (struct gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result_array){&pr, 1};
    ap.results_by_topic_v3_and_below =
        (struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_array){&tr, 1};
    gr_add_partitions_to_txn_response_count_errors(
        &ap, gr_metrics_counts_top(GR_API_ADD_PARTITIONS_TO_TXN, &ap), slots, GR_COUNTS_ERROR_SLOTS);
    assert_int_equal(AT(GR_ERR_CONCURRENT_TRANSACTIONS), 1);
    assert_int_equal(AT(GR_ERR_NONE), 0);
}

/* The errors Kafka's ReplicaManager does and does not count as failed requests. */
static void failed_request_rules(void **state)
{
    (void)state;
    int16_t not_failed_produce[] = {GR_ERR_NONE,
                                    GR_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                                    GR_ERR_NOT_LEADER_OR_FOLLOWER,
                                    GR_ERR_MESSAGE_TOO_LARGE,
                                    GR_ERR_RECORD_LIST_TOO_LARGE,
                                    GR_ERR_CORRUPT_MESSAGE,
                                    GR_ERR_KAFKA_STORAGE_ERROR};
    for (size_t i = 0; i < sizeof not_failed_produce / sizeof not_failed_produce[0]; i++)
        assert_false(gr_metrics_counts_produce_failed(not_failed_produce[i]));
    assert_true(gr_metrics_counts_produce_failed(GR_ERR_INVALID_RECORD));
    assert_true(gr_metrics_counts_produce_failed(GR_ERR_NOT_ENOUGH_REPLICAS));
    assert_true(gr_metrics_counts_produce_failed(GR_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER));
    int16_t not_failed_fetch[] = {GR_ERR_NONE,
                                  GR_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                                  GR_ERR_NOT_LEADER_OR_FOLLOWER,
                                  GR_ERR_UNKNOWN_LEADER_EPOCH,
                                  GR_ERR_FENCED_LEADER_EPOCH,
                                  GR_ERR_REPLICA_NOT_AVAILABLE,
                                  GR_ERR_KAFKA_STORAGE_ERROR,
                                  GR_ERR_INCONSISTENT_TOPIC_ID,
                                  GR_ERR_OFFSET_OUT_OF_RANGE,
                                  GR_ERR_UNKNOWN_TOPIC_ID};
    for (size_t i = 0; i < sizeof not_failed_fetch / sizeof not_failed_fetch[0]; i++)
        assert_false(gr_metrics_counts_fetch_failed(not_failed_fetch[i]));
    assert_true(gr_metrics_counts_fetch_failed(GR_ERR_CORRUPT_MESSAGE));
    assert_true(gr_metrics_counts_fetch_failed(GR_ERR_UNKNOWN_SERVER_ERROR));
}

/* Append results into the per-topic counters, and the FetchConsumer/FetchFollower lines in requests_total. */
static void append_marks_and_fetch_split(void **state)
{
    (void)state;
    struct gr_metrics *m = calloc(1, sizeof *m);
    assert_non_null(m);
    gr_metrics_init(m);
    struct gr_image_topic it;
    memset(&it, 0, sizeof it);
    strcpy(it.name, "t");
    it.name_len = 1;
    struct gr_produce_result r = {
        .error_code = GR_ERR_MESSAGE_TOO_LARGE, .base_offset = -1, .end_offset = -1};
    gr_metrics_appended(m, &it, &r, 2000);
    r.error_code = GR_ERR_INVALID_RECORD;
    gr_metrics_appended(m, &it, &r, 70);
    gr_metrics_appended(m, &it, &r, 70);
    r.error_code = GR_ERR_NOT_LEADER_OR_FOLLOWER; /* neither */
    gr_metrics_appended(m, &it, &r, 70);
    r = (struct gr_produce_result){.base_offset = 0, .end_offset = 3};
    gr_metrics_appended(m, &it, &r, 300);
    const struct gr_topic_counters *tc = gr_metrics_topic(m, "t");
    assert_non_null(tc);
    assert_int_equal(tc->bytes_rejected, 2000);
    assert_int_equal(tc->failed_produce, 2);
    assert_int_equal(tc->messages_in, 3);
    /* TotalProduceRequestsPerSec: every partition that reached the append, refused or not (appendToLocalLog)
     */
    assert_int_equal(tc->produce_requests, 5);
    assert_int_equal(m->all.produce_requests, 5);
    /* refused before the append: only what Kafka's appendToLocalLog would have seen is marked */
    gr_metrics_produce_refused(m, &it, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    gr_metrics_produce_refused(m, &it, GR_ERR_INVALID_TOPIC_EXCEPTION);
    gr_metrics_produce_refused(m, &it, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    gr_metrics_produce_refused(m, &it, GR_ERR_INVALID_REQUIRED_ACKS);
    gr_metrics_produce_refused(m, &it, GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    gr_metrics_produce_refused(m, NULL, GR_ERR_UNKNOWN_TOPIC_ID);
    assert_int_equal(tc->produce_requests, 7);
    assert_int_equal(m->all.produce_requests, 7);
    assert_int_equal(m->all.bytes_rejected, 2000);
    assert_int_equal(m->all.failed_produce, 2);
    gr_metrics_request(m, GR_API_FETCH, 12);
    gr_metrics_request(m, GR_API_FETCH, 12);
    gr_metrics_request(m, GR_API_FETCH, 12);
    m->counts.fetch_consumer[12] = 2;
    m->counts.fetch_follower[12] = 1;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_render_counters(m, NULL, 0, &b));
    assert_non_null(strstr(b.data, "kafka_server_brokertopicmetrics_failedproducerequests_total 2\n"));
    assert_non_null(strstr(b.data, "kafka_server_brokertopicmetrics_bytesrejected_total 2000\n"));
    assert_non_null(strstr(b.data, "kafka_server_brokertopicmetrics_failedfetchrequests_total 0\n"));
    const char *rq = strstr(b.data, "# TYPE kafka_network_requestmetrics_requests_total counter\n");
    assert_non_null(rq);
    assert_string_equal(
        rq, "# TYPE kafka_network_requestmetrics_requests_total counter\n"
            "kafka_network_requestmetrics_requests_total{request=\"Fetch\",version=\"12\"} 3\n"
            "kafka_network_requestmetrics_requests_total{request=\"FetchConsumer\",version=\"12\"} 2\n"
            "kafka_network_requestmetrics_requests_total{request=\"FetchFollower\",version=\"12\"} 1\n");
    gr_prom_buf_free(&b);
    gr_metrics_free(m);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fetch_counts_top_and_partitions), cmocka_unit_test(metadata_leaves_out_top_level),
        cmocka_unit_test(per_api_top_level_rules),         cmocka_unit_test(failed_request_rules),
        cmocka_unit_test(append_marks_and_fetch_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
