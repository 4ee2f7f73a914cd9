/*
 * test_kafka44_versions.c: what the versions Kafka 4.4 added to Gregor's APIs mean, from the handlers' side
 * (a real store with one empty topic, no connection). Expected values are those Apache Kafka 4.4.0 (KRaft,
 * one node, compat-tests/kafka-dist/start-kafka.sh) answered to the same raw requests on 2026-12-01.
 *   - ApiVersions: the ranges Kafka 4.4 advertises for the APIs whose maximum moved (ListOffsets 1-11,
 *     OffsetCommit 2-10, OffsetFetch 1-10, ApiVersions 0-5, DescribeLogDirs 1-5, DeleteGroups 0-3),
 * InitProducerId 0-5 and AlterReplicaLogDirs 1-2 (Kafka 4.0 removed v0; its message files list 1-2); v5
 * (KIP-1242) with the broker's cluster id and node id is answered, with another cluster id or node id is
 * REBOOTSTRAP_REQUIRED (129), with only one of the two is INVALID_REQUEST (42), both without an API list.
 *   - ListOffsets: each special timestamp from its first version (-3 v7, -4 v8, -5 v9, -6 v11:
 *     earliest pending upload, offset -1 without tiered storage); below it, and any timestamp under -6,
 *     UNSUPPORTED_VERSION (35) for the partition.
 *   - OffsetCommit v10: topics by id; an unknown or zero id is UNKNOWN_TOPIC_ID (100) for its partitions.
 *   - DeleteGroups v3: a group result with a coordinator error carries a null error message (Kafka 4.4
 *     answered NOT_COORDINATOR with a null message), and a name given twice is answered once.
 *   - The transaction APIs (24-28, 65, 66; issue #21) are listed with the ranges Gregor serves.
 * Read next: server/handlers/api_versions.c, server/handlers/list_offsets.c, server/handlers/delete_groups.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/apis.h"
#include "server/handlers/handlers.h"
#include "server/tests/fixture.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct gr_broker *b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.node_id = 1});
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(b->store, "t", 1, NULL, NULL, 0, &t), 0);
    f->b = b;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    srv_broker_close(f->b, f->dir, NULL);
    free(f);
    return 0;
}

static struct gr_req *new_req(struct fx *f, int16_t key, int16_t version)
{
    return srv_req_new(f->b, key, version, 1 << 16);
}

/* Runs an ApiVersions request at `version` naming `cluster_id` and `node_id` (v5 fields). */
static struct gr_req *api_versions(struct fx *f, int16_t version, struct gr_str cluster_id, int32_t node_id)
{
    struct gr_req *req = new_req(f, 18, version);
    struct gr_api_versions_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_api_versions_request_init(body);
    body->client_software_name = gr_str_c("probe");
    body->client_software_version = gr_str_c("1.0");
    body->cluster_id = cluster_id;
    body->node_id = node_id;
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_api_versions_response));
    gr_api_versions_response_init(req->resp);
    assert_int_equal(gr_handle_api_versions(req), GR_HANDLER_DONE);
    return req;
}

static void test_api_versions_ranges(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = api_versions(f, 4, GR_STR_NULL, -1);
    struct gr_api_versions_response *resp = req->resp;
    assert_int_equal(resp->error_code, 0);
    static const struct {
        int16_t key, min, max;
    } kafka44[] = {{2, 1, 11}, {8, 2, 10}, {9, 1, 10}, {18, 0, 5},
                   {22, 0, 5}, {34, 1, 2}, {35, 1, 5}, {42, 0, 3}};
    for (size_t i = 0; i < sizeof kafka44 / sizeof kafka44[0]; i++) {
        bool found = false;
        for (int32_t k = 0; k < resp->api_keys.count; k++) {
            struct gr_api_versions_response_api_version *av = &resp->api_keys.items[k];
            if (av->api_key != kafka44[i].key) continue;
            found = true;
            if (av->min_version != kafka44[i].min || av->max_version != kafka44[i].max)
                fail_msg("api %d: %d-%d, expected %d-%d", av->api_key, av->min_version, av->max_version,
                         kafka44[i].min, kafka44[i].max);
        }
        assert_true(found);
    }
    gr_req_free(req);
}

/* Issue #21's transaction APIs are always served: ApiVersions lists each with the range apis.def serves
 * (Kafka 4.4's message ranges; TxnOffsetCommit up to v5 (v6's topic ids not built) and ListTransactions up
 * to v1; EndTxn v5 and TxnOffsetCommit v5 are transaction version 2's), and dispatch finds its row. */
static void test_transaction_apis_listed(void **state)
{
    struct fx *f = *state;
    static const struct {
        int16_t key, min, max;
    } txn[] = {{24, 0, 5}, {25, 0, 4}, {26, 0, 5}, {27, 1, 2}, {28, 0, 5}, {65, 0, 0}, {66, 0, 1}};
    struct gr_req *req = api_versions(f, 4, GR_STR_NULL, -1);
    struct gr_api_versions_response *resp = req->resp;
    for (size_t i = 0; i < sizeof txn / sizeof txn[0]; i++) {
        assert_non_null(gr_msg_ops_find(txn[i].key, false));
        assert_non_null(gr_msg_ops_find(txn[i].key, true));
        const struct gr_api *api = gr_api_find(txn[i].key);
        assert_non_null(api);
        assert_non_null(api->handler);
        bool listed = false;
        for (int32_t k = 0; k < resp->api_keys.count; k++) {
            const struct gr_api_versions_response_api_version *av = &resp->api_keys.items[k];
            if (av->api_key != txn[i].key) continue;
            listed = true;
            if (av->min_version != txn[i].min || av->max_version != txn[i].max)
                fail_msg("api %d: %d-%d, expected %d-%d", txn[i].key, av->min_version, av->max_version,
                         txn[i].min, txn[i].max);
        }
        if (!listed) fail_msg("api %d not listed", txn[i].key);
    }
    gr_req_free(req);
}

/* The Gregor-internal PartitionSummary (issue #22) is served (dispatch finds its row and codec) but never
 * listed: ApiVersions lists exactly the table's rows below GR_API_KEY_INTERNAL_MIN. */
static void test_internal_api_not_listed(void **state)
{
    struct fx *f = *state;
    assert_true(GR_API_PARTITION_SUMMARY >= GR_API_KEY_INTERNAL_MIN);
    const struct gr_api *api = gr_api_find(GR_API_PARTITION_SUMMARY);
    assert_non_null(api);
    assert_non_null(api->handler);
    assert_non_null(gr_msg_ops_find(GR_API_PARTITION_SUMMARY, false));
    int n, kafka = 0;
    const struct gr_api *apis = gr_api_table(&n);
    for (int i = 0; i < n; i++)
        kafka += apis[i].api_key < GR_API_KEY_INTERNAL_MIN;
    struct gr_req *req = api_versions(f, 4, GR_STR_NULL, -1);
    struct gr_api_versions_response *resp = req->resp;
    assert_int_equal(resp->api_keys.count, kafka);
    assert_true(kafka < n);
    for (int32_t k = 0; k < resp->api_keys.count; k++)
        if (resp->api_keys.items[k].api_key >= GR_API_KEY_INTERNAL_MIN)
            fail_msg("internal api %d listed", resp->api_keys.items[k].api_key);
    gr_req_free(req);
}

static void test_api_versions_v5_cluster_and_node(void **state)
{
    struct fx *f = *state;
    struct gr_str cid = gr_str_c(gr_store_cluster_id(f->b->store));
    static const struct {
        int which; /* 0 null, 1 this broker's cluster id, 2 another */
        int32_t node_id;
        int16_t error;
    } cases[] = {
        {0, -1, 0},
        {1, 1, 0},
        {2, 1, GR_ERR_REBOOTSTRAP_REQUIRED},
        {1, 2, GR_ERR_REBOOTSTRAP_REQUIRED},
        {1, -5, GR_ERR_REBOOTSTRAP_REQUIRED},
        {1, -1, GR_ERR_INVALID_REQUEST},
        {0, 1, GR_ERR_INVALID_REQUEST},
        {2, -1, GR_ERR_INVALID_REQUEST},
    };
    assert_int_equal(GR_ERR_REBOOTSTRAP_REQUIRED, 129);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gr_str c = cases[i].which == 0 ? GR_STR_NULL : cases[i].which == 1 ? cid : gr_str_c("wrong");
        struct gr_req *req = api_versions(f, 5, c, cases[i].node_id);
        struct gr_api_versions_response *resp = req->resp;
        if (resp->error_code != cases[i].error)
            fail_msg("case %zu: error %d, Kafka 4.4 answers %d", i, resp->error_code, cases[i].error);
        if (cases[i].error)
            assert_int_equal(resp->api_keys.count, 0);
        else
            assert_true(resp->api_keys.count >= 28);
        gr_req_free(req);
    }
}

/* ListOffsets at `version` for partition 0 of "t" at `ts`; returns the partition's answer (in req). */
static struct gr_list_offsets_response_list_offsets_partition_response *
list_offsets(struct fx *f, int16_t version, int64_t ts, struct gr_req **out)
{
    struct gr_req *req = new_req(f, 2, version);
    struct gr_list_offsets_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_list_offsets_request_init(body);
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    body->topics.items[0].name = gr_str_c("t");
    body->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, 1, sizeof(struct gr_list_offsets_request_list_offsets_partition));
    body->topics.items[0].partitions.count = 1;
    gr_list_offsets_request_list_offsets_partition_init(&body->topics.items[0].partitions.items[0]);
    body->topics.items[0].partitions.items[0].timestamp = ts;
    body->timeout_ms = 1000;
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_list_offsets_response));
    gr_list_offsets_response_init(req->resp);
    assert_int_equal(gr_handle_list_offsets(req), GR_HANDLER_DONE);
    struct gr_list_offsets_response *resp = req->resp;
    assert_int_equal(resp->topics.count, 1);
    assert_int_equal(resp->topics.items[0].partitions.count, 1);
    *out = req;
    return &resp->topics.items[0].partitions.items[0];
}

static void test_list_offsets_special_timestamps(void **state)
{
    struct fx *f = *state;
    static const struct {
        int16_t version;
        int64_t ts;
        int16_t error;
        int64_t offset;
    } cases[] = {
        /* Kafka 4.4.0 on an empty partition */
        {11, -6, 0, -1},  {10, -6, 35, -1}, {9, -6, 35, -1},    {6, -6, 35, -1}, {9, -5, 0, -1},
        {8, -5, 35, -1},  {8, -4, 0, 0},    {7, -4, 35, -1},    {7, -3, 0, -1},  {6, -3, 35, -1},
        {11, -7, 35, -1}, {9, -7, 35, -1},  {11, -100, 35, -1}, {11, -1, 0, 0},  {11, -2, 0, 0},
        {1, -1, 0, 0},    {11, 0, 0, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gr_req *req;
        struct gr_list_offsets_response_list_offsets_partition_response *rp =
            list_offsets(f, cases[i].version, cases[i].ts, &req);
        if (rp->error_code != cases[i].error || rp->offset != cases[i].offset)
            fail_msg("v%d ts %lld: error %d offset %lld, Kafka 4.4 answers error %d offset %lld",
                     cases[i].version, (long long)cases[i].ts, rp->error_code, (long long)rp->offset,
                     cases[i].error, (long long)cases[i].offset);
        if (cases[i].error) {
            assert_int_equal(rp->timestamp, -1);
            assert_int_equal(rp->leader_epoch, -1);
        }
        gr_req_free(req);
    }
}

static void test_delete_groups_v3_message(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = new_req(f, 42, 3);
    struct gr_delete_groups_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_delete_groups_request_init(body);
    body->groups_names.items = gr_arena_calloc(&req->arena, 2, sizeof(struct gr_str));
    body->groups_names.items[0] = gr_str_c("g");
    body->groups_names.items[1] = gr_str_c("g");
    body->groups_names.count = 2;
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_delete_groups_response));
    gr_delete_groups_response_init(req->resp);
    assert_int_equal(gr_handle_delete_groups(req), GR_HANDLER_DONE);
    struct gr_delete_groups_response *resp = req->resp;
    assert_int_equal(resp->results.count, 1); /* de-duplicated, as KafkaApis */
    assert_int_equal(resp->results.items[0].error_code, GR_ERR_COORDINATOR_NOT_AVAILABLE);
    assert_int_equal(resp->results.items[0].error_message.len, -1); /* null */
    gr_req_free(req);
}

/* OffsetCommit v10 names topics by id: an id no topic has is UNKNOWN_TOPIC_ID (100) for its partitions, a
   known id resolves to the topic (here the next check answers: no coordinator runs in this fixture). */
static void test_offset_commit_v10_topic_ids(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = new_req(f, 8, 10);
    struct gr_offset_commit_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_offset_commit_request_init(body);
    body->group_id = gr_str_c("g");
    body->member_id = gr_str_c("");
    body->group_instance_id = GR_STR_NULL;
    struct gr_uuid known = gr_topic_uuid(gr_store_topic_find(f->b->store, "t", 1)), unknown = {{0}};
    for (int i = 0; i < 16; i++)
        unknown.b[i] = (uint8_t)i;
    const struct {
        struct gr_uuid id;
        int32_t partition;
        int16_t error;
    } cases[] = {{known, 0, GR_ERR_COORDINATOR_NOT_AVAILABLE},
                 {known, 9, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION},
                 {unknown, 0, GR_ERR_UNKNOWN_TOPIC_ID},
                 {{{0}}, 0, GR_ERR_UNKNOWN_TOPIC_ID}};
    int n = (int)(sizeof cases / sizeof cases[0]);
    body->topics.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *body->topics.items);
    body->topics.count = n;
    for (int i = 0; i < n; i++) {
        struct gr_offset_commit_request_offset_commit_request_topic *t = &body->topics.items[i];
        gr_offset_commit_request_offset_commit_request_topic_init(t);
        t->topic_id = cases[i].id;
        t->partitions.items = gr_arena_calloc(&req->arena, 1, sizeof *t->partitions.items);
        t->partitions.count = 1;
        gr_offset_commit_request_offset_commit_request_partition_init(&t->partitions.items[0]);
        t->partitions.items[0].partition_index = cases[i].partition;
        t->partitions.items[0].committed_offset = 5;
    }
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_offset_commit_response));
    gr_offset_commit_response_init(req->resp);
    assert_int_equal(gr_handle_offset_commit(req), GR_HANDLER_DONE);
    struct gr_offset_commit_response *resp = req->resp;
    assert_int_equal(resp->topics.count, n);
    for (int i = 0; i < n; i++) {
        assert_memory_equal(resp->topics.items[i].topic_id.b, cases[i].id.b, 16);
        assert_int_equal(resp->topics.items[i].partitions.count, 1);
        if (resp->topics.items[i].partitions.items[0].error_code != cases[i].error)
            fail_msg("case %d: error %d, expected %d", i,
                     resp->topics.items[i].partitions.items[0].error_code, cases[i].error);
    }
    gr_req_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_api_versions_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_versions_v5_cluster_and_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transaction_apis_listed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_internal_api_not_listed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_special_timestamps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_groups_v3_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offset_commit_v10_topic_ids, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
