/*
 * test_route.c: the handlers answer from the metadata image (cluster/image.h, server/route.h). A real store
 * holds topic "t" (3 partitions, node 1 = this broker); the image is then changed as a cluster's would be:
 *   broker 1 (this node)  PLAINTEXT b1.example:9201
 *   broker 2              PLAINTEXT b2.example:9202, rack r2
 *   broker 3              INTERNAL only (lacks the client's listener, PLAINTEXT)
 *   broker 4              PLAINTEXT, fenced
 *   t/0 led here; t/1 led by 2 (epoch 5); t/2 led by 3 (epoch 6)
 *   "remote" (not held here): p0 led by 2 (epoch 1, replicas and ISR {2, 3}), p1 led by fenced 4 (epoch 2)
 *   "off" (not held here): no leader, epoch 4, replicas {2}, ISR {}
 *   controller 2
 * and each API's exact answer is checked: NOT_LEADER_OR_FOLLOWER with Produce v10+ CurrentLeader and
 * NodeEndpoints (none below v10), Fetch v12+ CurrentLeader and v16+ NodeEndpoints, ListOffsets,
 * DeleteRecords, OffsetForLeaderEpoch, DescribeProducers; Metadata's broker list, LISTENER_NOT_FOUND (v6+)
 * versus LEADER_NOT_AVAILABLE (v5), offline partitions; DescribeCluster; FindCoordinator (the leader of the
 * group's __consumer_offsets partition, COORDINATOR_NOT_AVAILABLE without one); unknown ids; Metadata v0-v12
 * for a replication-factor-3 partition with a shrunk ISR and an unregistered replica, and an offline one;
 * AlterReplicaLogDirs' answer for held, known-but-not-held and unknown partitions.
 * Read next: server/route.h, server/handlers/metadata.c.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "common/time.h"
#include "server/handlers/handlers.h"
#include "server/route.h"
#include "server/tests/fixture.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
    struct gr_topic *t;
    uint8_t remote_id[16], off_id[16];
};

static void set_broker(struct gr_image *img, int32_t id, const char *listener, int32_t port, const char *rack,
                       bool fenced)
{
    struct gr_image_broker br = {.node_id = id, .epoch = 10 * id, .fenced = fenced, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "%s", listener);
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "b%d.example", id);
    br.listeners[0].port = port;
    if (rack) {
        br.has_rack = true;
        snprintf(br.rack, sizeof br.rack, "%s", rack);
    }
    assert_int_equal(gr_image_set_broker(img, &br), 0);
}

static void set_part(struct gr_image *img, struct gr_image_topic *it, int32_t p, int32_t leader,
                     int32_t epoch, int32_t replica, bool in_isr)
{
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .replicas = &replica,
                                          .replica_count = 1,
                                          .isr = &replica,
                                          .isr_count = in_isr ? 1 : 0};
    assert_int_equal(gr_image_set_partition(img, it, p, &st), 0);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.node_id = 1});
    assert_int_equal(gr_store_topic_create(f->b->store, "t", 3, NULL, NULL, 0, &f->t), 0);
    struct gr_image *img = f->b->image;
    struct gr_image_topic *it = gr_image_topic_find(img, "t", 1); /* the store's hook put it there */
    assert_non_null(it);
    assert_ptr_equal(it->local, f->t);
    assert_int_equal(gr_image_partition(it, 1)->leader, 1);
    set_broker(img, 1, "PLAINTEXT", 9201, NULL, false);
    set_broker(img, 2, "PLAINTEXT", 9202, "r2", false);
    set_broker(img, 3, "INTERNAL", 9203, NULL, false);
    set_broker(img, 4, "PLAINTEXT", 9204, NULL, true);
    gr_image_set_controller(img, 2);
    set_part(img, it, 1, 2, 5, 2, true);
    set_part(img, it, 2, 3, 6, 3, true);
    memset(f->remote_id, 0x11, 16);
    memset(f->off_id, 0x22, 16);
    assert_int_equal(gr_image_put_topic(img, "remote", 6, f->remote_id, false, 2, NULL, &it), 0);
    int32_t two[] = {2, 3}; /* replicas and ISR: 3 lacks the listener */
    struct gr_image_partition_state st = {
        .leader = 2, .leader_epoch = 1, .replicas = two, .replica_count = 2, .isr = two, .isr_count = 2};
    assert_int_equal(gr_image_set_partition(img, it, 0, &st), 0);
    set_part(img, it, 1, 4, 2, 4, true);
    assert_int_equal(gr_image_put_topic(img, "off", 3, f->off_id, false, 1, NULL, &it), 0);
    set_part(img, it, 0, -1, 4, 2, false);
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

#define NEW(req, type) ((struct type *)gr_arena_calloc(&(req)->arena, 1, sizeof(struct type)))

/* A Produce at `version` (acks=1) for `n` partitions of topic `name` (by id from v13), each with one
   record. */
static struct gr_req *produce_req(struct fx *f, int16_t version, const char *name, const uint8_t *id,
                                  const int32_t *parts, int n)
{
    struct gr_req *req = srv_req_new(f->b, 0, version, 1 << 20);
    struct gr_produce_request *body = NEW(req, gr_produce_request);
    gr_produce_request_init(body);
    body->transactional_id = GR_STR_NULL;
    body->acks = 1;
    body->timeout_ms = 30000;
    body->topic_data.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topic_data.items);
    body->topic_data.count = 1;
    struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[0];
    td->name = gr_str_c(name);
    if (id) memcpy(td->topic_id.b, id, 16);
    td->partition_data.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *td->partition_data.items);
    td->partition_data.count = n;
    for (int i = 0; i < n; i++) {
        size_t len;
        uint8_t *batch = th_simple(1, gr_time_wall_ms(), 7, &len);
        uint8_t *copy = gr_arena_alloc(&req->arena, len);
        memcpy(copy, batch, len);
        free(batch);
        td->partition_data.items[i].index = parts[i];
        td->partition_data.items[i].records = gr_records_mem((struct gr_bytes){copy, (int32_t)len});
    }
    req->body = body;
    req->resp = NEW(req, gr_produce_response);
    gr_produce_response_init(req->resp);
    return req;
}

static void test_produce(void **state)
{
    struct fx *f = *state;
    int32_t parts[] = {0, 1, 2};
    /* v9: NOT_LEADER_OR_FOLLOWER, no leader hints */
    struct gr_req *req = produce_req(f, 9, "t", NULL, parts, 3);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    struct gr_produce_response *resp = req->resp;
    struct gr_produce_response_partition_produce_response *pr =
        resp->responses.items[0].partition_responses.items;
    assert_int_equal(pr[0].error_code, GR_ERR_NONE); /* led here: appended */
    assert_int_equal(pr[0].base_offset, 0);
    assert_int_equal(pr[1].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(pr[1].current_leader.leader_id, -1);
    assert_int_equal(pr[2].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(resp->node_endpoints.count, 0);
    gr_req_free(req);
    /* v10: CurrentLeader on each, NodeEndpoints only for broker 2 (3 lacks PLAINTEXT) */
    req = produce_req(f, 10, "t", NULL, parts, 3);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    resp = req->resp;
    pr = resp->responses.items[0].partition_responses.items;
    assert_int_equal(pr[0].error_code, GR_ERR_NONE);
    assert_int_equal(pr[0].base_offset, 1);
    assert_int_equal(pr[0].current_leader.leader_id, -1); /* no hint on success */
    assert_int_equal(pr[1].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(pr[1].current_leader.leader_id, 2);
    assert_int_equal(pr[1].current_leader.leader_epoch, 5);
    assert_int_equal(pr[2].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(pr[2].current_leader.leader_id, 3);
    assert_int_equal(pr[2].current_leader.leader_epoch, 6);
    assert_int_equal(resp->node_endpoints.count, 1);
    assert_int_equal(resp->node_endpoints.items[0].node_id, 2);
    assert_true(gr_str_eq_c(resp->node_endpoints.items[0].host, "b2.example"));
    assert_int_equal(resp->node_endpoints.items[0].port, 9202);
    assert_true(gr_str_eq_c(resp->node_endpoints.items[0].rack, "r2"));
    gr_req_free(req);
    assert_int_equal(gr_log_end_offset(gr_topic_log(f->t, 0)), 2);
    assert_int_equal(gr_log_end_offset(gr_topic_log(f->t, 1)), 0); /* nothing written for another's */
    /* v13, by id: a topic held elsewhere, an unknown id */
    int32_t p0 = 0;
    req = produce_req(f, 13, NULL, f->remote_id, &p0, 1);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    resp = req->resp;
    pr = resp->responses.items[0].partition_responses.items;
    assert_int_equal(pr[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(pr[0].current_leader.leader_id, 2);
    assert_int_equal(pr[0].current_leader.leader_epoch, 1);
    assert_int_equal(resp->node_endpoints.count, 1);
    gr_req_free(req);
    uint8_t unknown[16];
    memset(unknown, 0x33, 16);
    req = produce_req(f, 13, NULL, unknown, &p0, 1);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_DONE);
    resp = req->resp;
    assert_int_equal(resp->responses.items[0].partition_responses.items[0].error_code,
                     GR_ERR_UNKNOWN_TOPIC_ID);
    assert_int_equal(resp->node_endpoints.count, 0);
    gr_req_free(req);
}

/* Fetch answers at once (an error partition) and frees the request inside the handler (no connection):
   the released hook checks the response before it goes. */
static void (*fetch_check)(struct gr_req *req);
static int fetch_checked;
static void released(struct gr_req *req)
{
    if (fetch_check && req->hdr.request_api_key == 1) {
        fetch_check(req);
        fetch_checked++;
    }
}
static const struct gr_req_sink test_sink = {.released = released};

static void fetch_run(struct fx *f, int16_t version, const uint8_t *id, void (*check)(struct gr_req *req))
{
    struct gr_req *req = srv_req_new(f->b, 1, version, 1 << 20);
    struct gr_fetch_request *body = NEW(req, gr_fetch_request);
    gr_fetch_request_init(body);
    body->max_wait_ms = 0;
    body->max_bytes = 1 << 20;
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    struct gr_fetch_request_fetch_topic *qt = &body->topics.items[0];
    qt->topic = gr_str_c("t");
    memcpy(qt->topic_id.b, id ? id : gr_topic_id(f->t), 16);
    qt->partitions.items = gr_arena_calloc(&req->arena, 2, sizeof *qt->partitions.items);
    qt->partitions.count = 2;
    for (int i = 0; i < 2; i++) {
        qt->partitions.items[i].partition = i + 1;
        qt->partitions.items[i].current_leader_epoch = -1;
        qt->partitions.items[i].partition_max_bytes = 1 << 20;
    }
    req->body = body;
    req->resp = NEW(req, gr_fetch_response);
    gr_fetch_response_init(req->resp);
    f->b->req_sink = &test_sink;
    fetch_check = check;
    fetch_checked = 0;
    assert_int_equal(gr_handle_fetch(req), GR_HANDLER_WAIT); /* answered and freed inside */
    assert_int_equal(fetch_checked, 1);
    fetch_check = NULL;
    f->b->req_sink = NULL;
}

static struct gr_fetch_response_partition_data *fetch_parts(struct gr_req *req)
{
    struct gr_fetch_response *resp = req->resp;
    assert_int_equal(resp->responses.count, 1);
    assert_int_equal(resp->responses.items[0].partitions.count, 2);
    return resp->responses.items[0].partitions.items;
}

static void check_v11(struct gr_req *req)
{
    struct gr_fetch_response_partition_data *rp = fetch_parts(req);
    assert_int_equal(rp[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(rp[0].current_leader.leader_id, -1); /* not below v12 */
    assert_int_equal(rp[0].high_watermark, -1);
    assert_int_equal(rp[1].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(((struct gr_fetch_response *)req->resp)->node_endpoints.count, 0);
}

static void check_leaders(struct gr_req *req)
{
    struct gr_fetch_response_partition_data *rp = fetch_parts(req);
    assert_int_equal(rp[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(rp[0].current_leader.leader_id, 2);
    assert_int_equal(rp[0].current_leader.leader_epoch, 5);
    assert_int_equal(rp[1].current_leader.leader_id, 3);
    assert_int_equal(rp[1].current_leader.leader_epoch, 6);
}

static void check_v12(struct gr_req *req)
{
    check_leaders(req);
    assert_int_equal(((struct gr_fetch_response *)req->resp)->node_endpoints.count, 0); /* not below v16 */
}

static void check_v16(struct gr_req *req)
{
    check_leaders(req);
    struct gr_fetch_response *resp = req->resp;
    assert_int_equal(resp->node_endpoints.count, 1); /* broker 3 lacks the listener */
    assert_int_equal(resp->node_endpoints.items[0].node_id, 2);
    assert_true(gr_str_eq_c(resp->node_endpoints.items[0].host, "b2.example"));
    assert_int_equal(resp->node_endpoints.items[0].port, 9202);
    assert_true(gr_str_eq_c(resp->node_endpoints.items[0].rack, "r2"));
}

static void check_unknown_id(struct gr_req *req)
{
    struct gr_fetch_response_partition_data *rp = fetch_parts(req);
    assert_int_equal(rp[0].error_code, GR_ERR_UNKNOWN_TOPIC_ID);
    assert_int_equal(rp[1].error_code, GR_ERR_UNKNOWN_TOPIC_ID);
    assert_int_equal(((struct gr_fetch_response *)req->resp)->node_endpoints.count, 0);
}

static void test_fetch(void **state)
{
    struct fx *f = *state;
    fetch_run(f, 11, NULL, check_v11);
    fetch_run(f, 12, NULL, check_v12);
    fetch_run(f, 16, NULL, check_v16);
    uint8_t unknown[16];
    memset(unknown, 0x44, 16);
    fetch_run(f, 16, unknown, check_unknown_id);
}

/* Cluster mode: while the member has evidence its lease is gone (img->self_fenced), a partition led here is
   routed as led elsewhere: NOT_LEADER_OR_FOLLOWER, the image's leader and epoch kept for the hints. */
static void test_self_fenced(void **state)
{
    struct fx *f = *state;
    struct gr_image_topic *it = gr_image_topic_find(f->b->image, "t", 1);
    struct gr_route r;
    assert_int_equal(gr_route_partition(f->b, it, 0, false, &r), GR_ERR_NONE);
    assert_ptr_equal(r.topic, f->t);
    f->b->image->self_fenced = true;
    assert_int_equal(gr_route_partition(f->b, it, 0, false, &r), GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_null(r.log);
    assert_int_equal(r.leader_id, 1);
    assert_int_equal(gr_route_partition(f->b, it, 1, false, &r), GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(r.leader_id, 2);
    f->b->image->self_fenced = false;
    assert_int_equal(gr_route_partition(f->b, it, 0, false, &r), GR_ERR_NONE);
    assert_non_null(r.log);
}

/* A ListOffsets v7 of `n` partitions of `topic` at timestamp -1 (latest), no leader epoch. */
static struct gr_req *list_offsets_req(struct fx *f, const char *topic, const int32_t *parts, int32_t n)
{
    struct gr_req *req = srv_req_new(f->b, 2, 7, 1 << 16);
    struct gr_list_offsets_request *lo = NEW(req, gr_list_offsets_request);
    gr_list_offsets_request_init(lo);
    lo->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *lo->topics.items);
    lo->topics.count = 1;
    lo->topics.items[0].name = gr_str_c(topic);
    lo->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, (size_t)n, sizeof(*lo->topics.items[0].partitions.items));
    lo->topics.items[0].partitions.count = n;
    for (int32_t p = 0; p < n; p++)
        lo->topics.items[0].partitions.items[p] = (struct gr_list_offsets_request_list_offsets_partition){
            .partition_index = parts[p], .current_leader_epoch = -1, .timestamp = -1};
    req->body = lo;
    req->resp = NEW(req, gr_list_offsets_response);
    gr_list_offsets_response_init(req->resp);
    return req;
}

static void test_list_offsets_delete_records_epochs_producers(void **state)
{
    struct fx *f = *state;
    /* ListOffsets v7: t/1 another's, t/9 unknown */
    int32_t lo_parts[] = {1, 9};
    struct gr_req *req = list_offsets_req(f, "t", lo_parts, 2);
    assert_int_equal(gr_handle_list_offsets(req), GR_HANDLER_DONE);
    struct gr_list_offsets_response *lor = req->resp;
    assert_int_equal(lor->topics.items[0].partitions.items[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(lor->topics.items[0].partitions.items[0].offset, -1);
    assert_int_equal(lor->topics.items[0].partitions.items[1].error_code, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    gr_req_free(req);

    /* DeleteRecords v2: t/2 another's */
    req = srv_req_new(f->b, 21, 2, 1 << 16);
    struct gr_delete_records_request *dr = NEW(req, gr_delete_records_request);
    gr_delete_records_request_init(dr);
    dr->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *dr->topics.items);
    dr->topics.count = 1;
    dr->topics.items[0].name = gr_str_c("t");
    dr->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, 1, sizeof(*dr->topics.items[0].partitions.items));
    dr->topics.items[0].partitions.count = 1;
    dr->topics.items[0].partitions.items[0].partition_index = 2;
    dr->topics.items[0].partitions.items[0].offset = 0;
    req->body = dr;
    req->resp = NEW(req, gr_delete_records_response);
    gr_delete_records_response_init(req->resp);
    assert_int_equal(gr_handle_delete_records(req), GR_HANDLER_DONE);
    struct gr_delete_records_response *drr = req->resp;
    assert_int_equal(drr->topics.items[0].partitions.items[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(drr->topics.items[0].partitions.items[0].low_watermark, -1);
    gr_req_free(req);

    /* OffsetForLeaderEpoch v4: remote/0 another's */
    req = srv_req_new(f->b, 23, 4, 1 << 16);
    struct gr_offset_for_leader_epoch_request *oe = NEW(req, gr_offset_for_leader_epoch_request);
    gr_offset_for_leader_epoch_request_init(oe);
    oe->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *oe->topics.items);
    oe->topics.count = 1;
    oe->topics.items[0].topic = gr_str_c("remote");
    oe->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, 1, sizeof(*oe->topics.items[0].partitions.items));
    oe->topics.items[0].partitions.count = 1;
    oe->topics.items[0].partitions.items[0] =
        (struct gr_offset_for_leader_epoch_request_offset_for_leader_partition){
            .partition = 0, .current_leader_epoch = -1, .leader_epoch = 0};
    req->body = oe;
    req->resp = NEW(req, gr_offset_for_leader_epoch_response);
    gr_offset_for_leader_epoch_response_init(req->resp);
    assert_int_equal(gr_handle_offset_for_leader_epoch(req), GR_HANDLER_DONE);
    struct gr_offset_for_leader_epoch_response *oer = req->resp;
    assert_int_equal(oer->topics.items[0].partitions.items[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(oer->topics.items[0].partitions.items[0].end_offset, -1);
    gr_req_free(req);

    /* DescribeProducers v0: t/1 another's, t/0 here (no producers), "nope" unknown */
    req = srv_req_new(f->b, 61, 0, 1 << 16);
    struct gr_describe_producers_request *dp = NEW(req, gr_describe_producers_request);
    gr_describe_producers_request_init(dp);
    dp->topics.items = gr_arena_calloc(&req->arena, 2, sizeof *dp->topics.items);
    dp->topics.count = 2;
    static int32_t idx[] = {1, 0};
    dp->topics.items[0].name = gr_str_c("t");
    dp->topics.items[0].partition_indexes = (struct gr_int32_array){idx, 2};
    dp->topics.items[1].name = gr_str_c("nope");
    dp->topics.items[1].partition_indexes = (struct gr_int32_array){idx, 1};
    req->body = dp;
    req->resp = NEW(req, gr_describe_producers_response);
    gr_describe_producers_response_init(req->resp);
    assert_int_equal(gr_handle_describe_producers(req), GR_HANDLER_DONE);
    struct gr_describe_producers_response *dpr = req->resp;
    assert_int_equal(dpr->topics.items[0].partitions.items[0].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(dpr->topics.items[0].partitions.items[0].error_message.len, -1);
    assert_int_equal(dpr->topics.items[0].partitions.items[1].error_code, GR_ERR_NONE);
    assert_int_equal(dpr->topics.items[1].partitions.items[0].error_code, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    gr_req_free(req);
}

/* Metadata for every topic at `version`. */
static struct gr_req *metadata_all(struct fx *f, int16_t version)
{
    struct gr_req *req = srv_req_new(f->b, 3, version, 1 << 16);
    struct gr_metadata_request *body = NEW(req, gr_metadata_request);
    gr_metadata_request_init(body);
    body->topics.count = -1;
    req->body = body;
    req->resp = NEW(req, gr_metadata_response);
    gr_metadata_response_init(req->resp);
    assert_int_equal(gr_handle_metadata(req), GR_HANDLER_DONE);
    return req;
}

static struct gr_metadata_response_metadata_response_topic *topic_named(struct gr_metadata_response *resp,
                                                                        const char *name)
{
    for (int32_t i = 0; i < resp->topics.count; i++)
        if (gr_str_eq_c(resp->topics.items[i].name, name)) return &resp->topics.items[i];
    fail_msg("topic %s not listed", name);
    return NULL;
}

static void check_nodes(struct gr_int32_array a, int32_t count, int32_t first)
{
    assert_int_equal(a.count, count);
    if (count) assert_int_equal(a.items[0], first);
}

static void test_metadata(void **state)
{
    struct fx *f = *state;
    for (int16_t v = 5; v <= 12; v += 7) {
        struct gr_req *req = metadata_all(f, v);
        struct gr_metadata_response *resp = req->resp;
        assert_true(gr_str_eq_c(resp->cluster_id, gr_store_cluster_id(f->b->store)));
        assert_int_equal(resp->controller_id, 2);
        /* brokers 1 and 2: 3 lacks PLAINTEXT, 4 is fenced */
        assert_int_equal(resp->brokers.count, 2);
        assert_int_equal(resp->brokers.items[0].node_id, 1);
        assert_true(gr_str_eq_c(resp->brokers.items[0].host, "b1.example"));
        assert_int_equal(resp->brokers.items[0].port, 9201);
        assert_int_equal(resp->brokers.items[0].rack.len, -1);
        assert_int_equal(resp->brokers.items[1].node_id, 2);
        assert_true(gr_str_eq_c(resp->brokers.items[1].rack, "r2"));
        /* every topic of the image, in name order, not only the local one */
        assert_int_equal(resp->topics.count, 3);
        assert_true(gr_str_eq_c(resp->topics.items[0].name, "off"));
        struct gr_metadata_response_metadata_response_topic *t = topic_named(resp, "t");
        assert_int_equal(t->error_code, GR_ERR_NONE);
        assert_int_equal(t->partitions.count, 3);
        struct gr_metadata_response_metadata_response_partition *p = t->partitions.items;
        assert_int_equal(p[0].error_code, GR_ERR_NONE);
        assert_int_equal(p[0].leader_id, 1);
        assert_int_equal(p[0].leader_epoch, gr_log_leader_epoch(gr_topic_log(f->t, 0)));
        assert_int_equal(p[1].error_code, GR_ERR_NONE);
        assert_int_equal(p[1].leader_id, 2);
        assert_int_equal(p[1].leader_epoch, 5);
        check_nodes(p[1].replica_nodes, 1, 2);
        check_nodes(p[1].isr_nodes, 1, 2);
        check_nodes(p[1].offline_replicas, 0, 0);
        /* led by broker 3, which lacks the listener: v6+ LISTENER_NOT_FOUND, v5 LEADER_NOT_AVAILABLE */
        assert_int_equal(p[2].error_code, v >= 6 ? GR_ERR_LISTENER_NOT_FOUND : GR_ERR_LEADER_NOT_AVAILABLE);
        assert_int_equal(p[2].leader_id, -1);
        assert_int_equal(p[2].leader_epoch, 6);
        check_nodes(p[2].replica_nodes, 1, 3);
        check_nodes(p[2].isr_nodes, 1, 3);
        check_nodes(p[2].offline_replicas, 1, 3);
        /* no leader: LEADER_NOT_AVAILABLE, leader -1, the stored epoch, replicas and ISR */
        struct gr_metadata_response_metadata_response_topic *off = topic_named(resp, "off");
        assert_memory_equal(off->topic_id.b, f->off_id, 16);
        p = off->partitions.items;
        assert_int_equal(p[0].error_code, GR_ERR_LEADER_NOT_AVAILABLE);
        assert_int_equal(p[0].leader_id, -1);
        assert_int_equal(p[0].leader_epoch, 4);
        check_nodes(p[0].replica_nodes, 1, 2);
        check_nodes(p[0].isr_nodes, 0, 0);
        check_nodes(p[0].offline_replicas, 0, 0);
        /* a replica without the listener is offline; a fenced leader is still named (Kafka's
           KRaftMetadataCache: BrokerRegistration.node ignores fencing), its replica offline */
        p = topic_named(resp, "remote")->partitions.items;
        assert_int_equal(p[0].error_code, GR_ERR_NONE);
        assert_int_equal(p[0].leader_id, 2);
        check_nodes(p[0].replica_nodes, 2, 2);
        check_nodes(p[0].isr_nodes, 2, 2);
        check_nodes(p[0].offline_replicas, 1, 3);
        assert_int_equal(p[1].error_code, GR_ERR_NONE);
        assert_int_equal(p[1].leader_id, 4);
        assert_int_equal(p[1].leader_epoch, 2);
        check_nodes(p[1].offline_replicas, 1, 4);
        gr_req_free(req);
    }
    /* v0 (Kafka's errorUnavailableEndpoints): replicas and ISR only the reachable ones, REPLICA_NOT_AVAILABLE
       when one was left out */
    struct gr_req *req0 = srv_req_new(f->b, 3, 0, 1 << 16);
    struct gr_metadata_request *body0 = NEW(req0, gr_metadata_request);
    gr_metadata_request_init(body0);
    body0->topics.count = 0; /* v0: empty = all */
    req0->body = body0;
    req0->resp = NEW(req0, gr_metadata_response);
    gr_metadata_response_init(req0->resp);
    assert_int_equal(gr_handle_metadata(req0), GR_HANDLER_DONE);
    struct gr_metadata_response *resp0 = req0->resp;
    assert_int_equal(resp0->topics.count, 3);
    struct gr_metadata_response_metadata_response_partition *p =
        topic_named(resp0, "remote")->partitions.items;
    assert_int_equal(p[0].error_code, GR_ERR_REPLICA_NOT_AVAILABLE);
    assert_int_equal(p[0].leader_id, 2);
    check_nodes(p[0].replica_nodes, 1, 2);
    check_nodes(p[0].isr_nodes, 1, 2);
    assert_int_equal(p[1].error_code, GR_ERR_REPLICA_NOT_AVAILABLE); /* fenced 4 left out */
    check_nodes(p[1].replica_nodes, 0, 0);
    p = topic_named(resp0, "t")->partitions.items;
    assert_int_equal(p[0].error_code, GR_ERR_NONE);
    assert_int_equal(p[2].error_code, GR_ERR_LEADER_NOT_AVAILABLE);
    check_nodes(p[2].replica_nodes, 0, 0);
    gr_req_free(req0);
    /* by id (v12): a topic held elsewhere, an unknown id */
    struct gr_req *req = srv_req_new(f->b, 3, 12, 1 << 16);
    struct gr_metadata_request *body = NEW(req, gr_metadata_request);
    gr_metadata_request_init(body);
    body->topics.items = gr_arena_calloc(&req->arena, 2, sizeof *body->topics.items);
    body->topics.count = 2;
    for (int i = 0; i < 2; i++) {
        gr_metadata_request_metadata_request_topic_init(&body->topics.items[i]);
        body->topics.items[i].name = GR_STR_NULL;
    }
    memcpy(body->topics.items[0].topic_id.b, f->remote_id, 16);
    memset(body->topics.items[1].topic_id.b, 0x55, 16);
    req->body = body;
    req->resp = NEW(req, gr_metadata_response);
    gr_metadata_response_init(req->resp);
    assert_int_equal(gr_handle_metadata(req), GR_HANDLER_DONE);
    struct gr_metadata_response *resp = req->resp;
    assert_int_equal(resp->topics.items[0].error_code, GR_ERR_NONE);
    assert_true(gr_str_eq_c(resp->topics.items[0].name, "remote"));
    assert_int_equal(resp->topics.items[0].partitions.count, 2);
    assert_int_equal(resp->topics.items[1].error_code, GR_ERR_UNKNOWN_TOPIC_ID);
    gr_req_free(req);
}

/* FindCoordinator v3 for `key` on the fixture's broker: the answer's error, node, host and port. */
static void find_coordinator(struct fx *f, const char *key, int16_t *err, int32_t *node, char host[64],
                             int32_t *port)
{
    struct gr_req *req = srv_req_new(f->b, 10, 3, 1 << 16);
    struct gr_find_coordinator_request *fc = NEW(req, gr_find_coordinator_request);
    gr_find_coordinator_request_init(fc);
    fc->key = gr_str_c(key);
    req->body = fc;
    req->resp = NEW(req, gr_find_coordinator_response);
    gr_find_coordinator_response_init(req->resp);
    assert_int_equal(gr_handle_find_coordinator(req), GR_HANDLER_DONE);
    struct gr_find_coordinator_response *fr = req->resp;
    *err = fr->error_code;
    *node = fr->node_id;
    *port = fr->port;
    snprintf(host, 64, "%.*s", (int)fr->host.len, fr->host.ptr);
    gr_req_free(req);
}

static void test_describe_cluster_and_coordinator(void **state)
{
    struct fx *f = *state;
    for (int fenced = 0; fenced <= 1; fenced++) {
        struct gr_req *req = srv_req_new(f->b, 60, 2, 1 << 16);
        struct gr_describe_cluster_request *body = NEW(req, gr_describe_cluster_request);
        gr_describe_cluster_request_init(body);
        body->endpoint_type = 1;
        body->include_fenced_brokers = fenced;
        req->body = body;
        req->resp = NEW(req, gr_describe_cluster_response);
        gr_describe_cluster_response_init(req->resp);
        assert_int_equal(gr_handle_describe_cluster(req), GR_HANDLER_DONE);
        struct gr_describe_cluster_response *resp = req->resp;
        assert_int_equal(resp->error_code, GR_ERR_NONE);
        assert_int_equal(resp->controller_id, 2);
        assert_true(gr_str_eq_c(resp->cluster_id, gr_store_cluster_id(f->b->store)));
        assert_int_equal(resp->brokers.count, fenced ? 3 : 2); /* never 3 (no PLAINTEXT) */
        assert_int_equal(resp->brokers.items[1].broker_id, 2);
        assert_int_equal(resp->brokers.items[1].port, 9202);
        assert_true(gr_str_eq_c(resp->brokers.items[1].rack, "r2"));
        if (fenced) {
            assert_int_equal(resp->brokers.items[2].broker_id, 4);
            assert_true(resp->brokers.items[2].is_fenced);
        }
        gr_req_free(req);
    }
    /* FindCoordinator names the leader of the group's __consumer_offsets partition (one partition here) */
    int16_t err;
    int32_t node, port;
    char host[64];
    find_coordinator(f, "g", &err, &node, host, &port);
    assert_int_equal(err, GR_ERR_COORDINATOR_NOT_AVAILABLE); /* no __consumer_offsets yet */
    assert_int_equal(node, -1);
    assert_int_equal(port, -1);
    const uint8_t id[16] = {0x0c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    struct gr_image_topic *it;
    assert_int_equal(gr_image_put_topic(f->b->image, "__consumer_offsets", 18, id, true, 1, NULL, &it), 0);
    const int32_t leaders[] = {1, 2, 3, 4, -1};
    for (int i = 0; i < 5; i++) {
        int32_t replica = leaders[i] < 0 ? 1 : leaders[i];
        struct gr_image_partition_state ps = {.leader = leaders[i],
                                              .leader_epoch = 3,
                                              .replicas = &replica,
                                              .isr = &replica,
                                              .replica_count = 1,
                                              .isr_count = 1};
        assert_int_equal(gr_image_set_partition(f->b->image, it, 0, &ps), 0);
        find_coordinator(f, "g", &err, &node, host, &port);
        if (leaders[i] == 1 || leaders[i] == 2) {
            assert_int_equal(err, GR_ERR_NONE);
            assert_int_equal(node, leaders[i]);
            assert_string_equal(host, leaders[i] == 1 ? "b1.example" : "b2.example");
            assert_int_equal(port, leaders[i] == 1 ? 9201 : 9202);
        } else { /* a leader without the client's listener (3), a fenced one (4), none */
            assert_int_equal(err, GR_ERR_COORDINATOR_NOT_AVAILABLE);
            assert_int_equal(node, -1);
        }
    }
    assert_true(gr_image_remove_topic(f->b->image, id));
}

/* The single-node source follows the store: a topic deleted and created again under its name gets the new
   id in the image; Metadata lists what the store holds. */
static void test_local_source_follows_store(void **state)
{
    struct fx *f = *state;
    struct gr_image *img = f->b->image;
    uint8_t old_id[16];
    memcpy(old_id, gr_topic_id(f->t), 16);
    assert_int_equal(gr_store_topic_delete(f->b->store, f->t), 0);
    assert_null(gr_image_topic_find(img, "t", 1));
    assert_null(gr_image_topic_find_id(img, old_id));
    struct gr_topic *t2;
    assert_int_equal(gr_store_topic_create(f->b->store, "t", 2, NULL, NULL, 0, &t2), 0);
    struct gr_image_topic *it = gr_image_topic_find(img, "t", 1);
    assert_non_null(it);
    assert_memory_equal(it->id, gr_topic_id(t2), 16);
    assert_ptr_equal(it->local, t2);
    assert_int_equal(it->partition_count, 2);
    assert_int_equal(gr_image_partition(it, 1)->leader, 1);
    assert_int_equal(gr_image_isr(gr_image_partition(it, 1))[0], 1);
    assert_int_equal(gr_store_topic_add_partitions(f->b->store, t2, 4), 0);
    assert_int_equal(it->partition_count, 4);
    assert_int_equal(gr_image_partition(it, 3)->leader, 1);
    f->t = t2;
}

static void op_cb(void *ctx, int err, struct gr_topic *t)
{
    *(int *)ctx = err;
    (void)t;
}

/* What a request looked like when it was freed (answered without a connection): the released hook copies
   its partitions' error codes (Produce: the first topic's; Fetch: the first topic's, with records bytes). */
static int16_t freed_codes[4], produce_codes[4], fetch_codes[4]; /* the last freed request's; by API */
static int32_t freed_bytes[4];
static int freed_count, fetches_freed;
static void released_copy(struct gr_req *req)
{
    freed_count++;
    fetches_freed += req->hdr.request_api_key == 1;
    if (req->hdr.request_api_key == 0) {
        struct gr_produce_response *resp = req->resp;
        if (!resp->responses.items) return; /* freed before it ran (still waiting) */
        for (int32_t i = 0; i < resp->responses.items[0].partition_responses.count && i < 4; i++)
            freed_codes[i] = produce_codes[i] =
                resp->responses.items[0].partition_responses.items[i].error_code;
    } else if (req->hdr.request_api_key == 2) {
        struct gr_list_offsets_response *resp = req->resp;
        for (int32_t i = 0; resp->topics.count > 0 && i < resp->topics.items[0].partitions.count && i < 4;
             i++) {
            freed_codes[i] = resp->topics.items[0].partitions.items[i].error_code;
            freed_bytes[i] = (int32_t)resp->topics.items[0].partitions.items[i].offset; /* the offset */
        }
    } else if (req->hdr.request_api_key == 1) {
        struct gr_fetch_response *resp = req->resp;
        for (int32_t i = 0; i < resp->responses.items[0].partitions.count && i < 4; i++) {
            freed_codes[i] = fetch_codes[i] = resp->responses.items[0].partitions.items[i].error_code;
            freed_bytes[i] = gr_records_len(resp->responses.items[0].partitions.items[i].records);
        }
    }
}
static const struct gr_req_sink copy_sink = {.released = released_copy};

/* Cluster mode before the replica manager made a partition's log: the image says this node leads p0 and p1
   of the sparse topic "sp", but only p1 is held. Returns the topic; *id gets its id. */
static struct gr_topic *sparse_led_here(struct fx *f, uint8_t id[16])
{
    memset(id, 0x44, 16);
    int err = 1;
    gr_store_topic_op_submit(f->b->store, NULL, gr_topic_op_create_sparse("sp", id, 2, NULL, NULL, 0), op_cb,
                             &err);
    assert_int_equal(err, 0);
    struct gr_topic *t = gr_store_topic_find(f->b->store, "sp", 2);
    err = 1;
    gr_store_topic_op_submit(f->b->store, NULL, gr_topic_op_replica_make(t, 1), op_cb, &err);
    assert_int_equal(err, 0);
    struct gr_image_topic *it = gr_image_topic_find(f->b->image, "sp", 2);
    assert_ptr_equal(it->local, t);
    set_part(f->b->image, it, 0, 1, 3, 1, true);
    set_part(f->b->image, it, 1, 1, 0, 1, true);
    f->b->req_sink = &copy_sink;
    freed_count = 0;
    memset(freed_codes, 0x7f, sizeof freed_codes);
    return t;
}

/* The log of p0 is made, as the replica manager's on_log reports it (server/membership.c). */
static void make_log(struct fx *f, struct gr_topic *t, const uint8_t id[16], int32_t p, int woken)
{
    int err = 1;
    gr_store_topic_op_submit(f->b->store, NULL, gr_topic_op_replica_make(t, p), op_cb, &err);
    assert_int_equal(err, 0);
    assert_int_equal(gr_logwait_signal(&f->b->logwaits, id, p), woken);
}

/* AlterReplicaLogDirs v2 naming `n` (topic, partition) pairs, all under directory `path`; returns the error
   of each pair in order (the handler answers each pair once, sorted by topic then partition: the pairs given
   are distinct and in that order). */
static void alter_dirs(struct fx *f, const char *path, const char *const *topics, const int32_t *parts, int n,
                       int16_t *errs)
{
    struct gr_req *req = srv_req_new(f->b, GR_API_ALTER_REPLICA_LOG_DIRS, 2, 1 << 16);
    struct gr_alter_replica_log_dirs_request *body = NEW(req, gr_alter_replica_log_dirs_request);
    gr_alter_replica_log_dirs_request_init(body);
    body->dirs.items = gr_arena_calloc(&req->arena, 1, sizeof *body->dirs.items);
    body->dirs.count = 1;
    body->dirs.items[0].path = gr_str_c(path);
    body->dirs.items[0].topics.items =
        gr_arena_calloc(&req->arena, (size_t)n, sizeof(*body->dirs.items[0].topics.items));
    body->dirs.items[0].topics.count = n;
    for (int i = 0; i < n; i++) {
        body->dirs.items[0].topics.items[i].name = gr_str_c(topics[i]);
        body->dirs.items[0].topics.items[i].partitions.items = (int32_t *)&parts[i];
        body->dirs.items[0].topics.items[i].partitions.count = 1;
    }
    req->body = body;
    req->resp = NEW(req, gr_alter_replica_log_dirs_response);
    gr_alter_replica_log_dirs_response_init(req->resp);
    assert_int_equal(gr_handle_alter_replica_log_dirs(req), GR_HANDLER_DONE);
    struct gr_alter_replica_log_dirs_response *resp = req->resp;
    int k = 0;
    for (int32_t t = 0; t < resp->results.count; t++)
        for (int32_t j = 0; j < resp->results.items[t].partitions.count; j++, k++) {
            assert_true(k < n);
            assert_true(gr_str_eq_c(resp->results.items[t].topic_name, topics[k]));
            assert_int_equal(resp->results.items[t].partitions.items[j].partition_index, parts[k]);
            errs[k] = resp->results.items[t].partitions.items[j].error_code;
        }
    assert_int_equal(k, n);
    gr_req_free(req);
}

/* AlterReplicaLogDirs against the image: a partition held here answers NONE for this broker's directory
   (leader or follower), one the image knows but this broker does not hold (another's, or led here with its
   log not made yet) REPLICA_NOT_AVAILABLE, which turns NONE once the log is made (what
   kafka-reassign-partitions.sh waits for), one the image does not know UNKNOWN_TOPIC_OR_PARTITION; another
   directory LOG_DIR_NOT_FOUND whatever the partition. */
static void test_alter_replica_log_dirs(void **state)
{
    struct fx *f = *state;
    char dir[PATH_MAX];
    assert_non_null(realpath(f->dir, dir));
    uint8_t id[16];
    struct gr_topic *t = sparse_led_here(f, id);
    const char *topics[] = {"nope", "remote", "remote", "sp", "sp", "t", "t", "t"};
    const int32_t parts[] = {0, 0, 2, 0, 1, 0, 1, 2};
    int16_t errs[8];
    alter_dirs(f, dir, topics, parts, 8, errs);
    const int16_t want[] = {GR_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                            GR_ERR_REPLICA_NOT_AVAILABLE,
                            GR_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                            GR_ERR_REPLICA_NOT_AVAILABLE,
                            GR_ERR_NONE,
                            GR_ERR_NONE,
                            GR_ERR_NONE,
                            GR_ERR_NONE};
    for (int i = 0; i < 8; i++)
        if (errs[i] != want[i]) fail_msg("%s-%d: %d, expected %d", topics[i], parts[i], errs[i], want[i]);
    make_log(f, t, id, 0, 0);
    alter_dirs(f, dir, (const char *const[]){"sp"}, (const int32_t[]){0}, 1, errs);
    assert_int_equal(errs[0], GR_ERR_NONE);
    alter_dirs(f, "/elsewhere", topics, parts, 8, errs);
    for (int i = 0; i < 8; i++)
        assert_int_equal(errs[i], GR_ERR_LOG_DIR_NOT_FOUND);
}

/* A Produce naming p0 (led here, log not made) waits (the named wait, server/logwait.h) instead of answering
   NOT_LEADER_OR_FOLLOWER, and appends to both partitions once the log is made. Metadata answers p0 led here
   all along. */
static void test_led_here_log_not_made_yet(void **state)
{
    struct fx *f = *state;
    uint8_t id[16];
    struct gr_topic *t = sparse_led_here(f, id);
    int32_t parts[] = {0, 1};
    struct gr_req *req = produce_req(f, 10, "sp", NULL, parts, 2);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_WAIT);
    assert_true(req->parked);
    assert_int_equal(f->b->logwaits.count, 1);
    assert_int_equal(freed_count, 0);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 0); /* nothing appended while it waits */
    make_log(f, t, id, 0, 1);
    assert_int_equal(freed_count, 1); /* answered (freed: no connection) */
    assert_int_equal(freed_codes[0], GR_ERR_NONE);
    assert_int_equal(freed_codes[1], GR_ERR_NONE);
    assert_int_equal(f->b->logwaits.count, 0);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 0)), 1);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 1);
    f->b->req_sink = NULL;
    req = metadata_all(f, 12);
    struct gr_metadata_response *mr = req->resp;
    bool seen = false;
    for (int32_t i = 0; i < mr->topics.count; i++) {
        if (!gr_str_eq_c(mr->topics.items[i].name, "sp")) continue;
        seen = true;
        assert_int_equal(mr->topics.items[i].partitions.count, 2);
        assert_int_equal(mr->topics.items[i].partitions.items[0].error_code, GR_ERR_NONE);
        assert_int_equal(mr->topics.items[i].partitions.items[0].leader_id, 1);
    }
    assert_true(seen);
    gr_req_free(req);
}

/* ListOffsets (latest) of p0 (led here, log not made) and p1: waits for p0's log as Produce does, then
   answers both with NONE and offset 0 (franz-go's kadm ListOffsets right after CreateTopics on a cluster got
   NOT_LEADER_OR_FOLLOWER for such a partition and failed). */
static void test_list_offsets_log_not_made_yet(void **state)
{
    struct fx *f = *state;
    uint8_t id[16];
    struct gr_topic *t = sparse_led_here(f, id);
    int32_t parts[] = {0, 1};
    struct gr_req *req = list_offsets_req(f, "sp", parts, 2);
    assert_int_equal(gr_handle_list_offsets(req), GR_HANDLER_WAIT);
    assert_true(req->parked);
    assert_int_equal(f->b->logwaits.count, 1);
    assert_int_equal(freed_count, 0);
    make_log(f, t, id, 0, 1);
    assert_int_equal(freed_count, 1); /* answered (freed: no connection) */
    assert_int_equal(freed_codes[0], GR_ERR_NONE);
    assert_int_equal(freed_codes[1], GR_ERR_NONE);
    assert_int_equal(freed_bytes[0], 0);
    assert_int_equal(freed_bytes[1], 0);
    assert_int_equal(f->b->logwaits.count, 0);
    f->b->req_sink = NULL;
}

/* The log is not made within the Produce's timeout: p0 answers REQUEST_TIMED_OUT and p1 appends; a log made
   afterwards wakes nobody. A request freed while it waits (its connection gone) leaves no waiter behind. */
static void test_log_wait_times_out(void **state)
{
    struct fx *f = *state;
    uint8_t id[16];
    struct gr_topic *t = sparse_led_here(f, id);
    int32_t parts[] = {0, 1};
    struct gr_req *req = produce_req(f, 10, "sp", NULL, parts, 2);
    ((struct gr_produce_request *)req->body)->timeout_ms = 20;
    ev_now_update(f->b->loop); /* the loop's clock, which the deadline timer counts from, is now */
    int64_t t0 = gr_time_mono_ms();
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_WAIT);
    while (freed_count == 0 && gr_time_mono_ms() - t0 < 5000)
        ev_run(f->b->loop, EVRUN_ONCE);
    assert_int_equal(freed_count, 1);
    assert_true(gr_time_mono_ms() - t0 >= 20);
    assert_int_equal(freed_codes[0], GR_ERR_REQUEST_TIMED_OUT);
    assert_int_equal(freed_codes[1], GR_ERR_NONE);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 1);
    assert_int_equal(f->b->logwaits.count, 0);
    req = produce_req(f, 10, "sp", NULL, parts, 2);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_WAIT);
    assert_int_equal(f->b->logwaits.count, 1);
    gr_req_free(req);
    assert_int_equal(f->b->logwaits.count, 0);
    make_log(f, t, id, 0, 0);
    f->b->req_sink = NULL;
}

/* A Fetch of "sp" p0 (led here, log not made yet), long poll `max_wait_ms`. */
static struct gr_req *fetch_sp0(struct fx *f, int32_t max_wait_ms)
{
    struct gr_req *req = srv_req_new(f->b, 1, 12, 1 << 20);
    struct gr_fetch_request *body = NEW(req, gr_fetch_request);
    gr_fetch_request_init(body);
    body->max_wait_ms = max_wait_ms;
    body->min_bytes = 1;
    body->max_bytes = 1 << 20;
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    struct gr_fetch_request_fetch_topic *qt = &body->topics.items[0];
    qt->topic = gr_str_c("sp");
    qt->partitions.items = gr_arena_calloc(&req->arena, 1, sizeof *qt->partitions.items);
    qt->partitions.count = 1;
    qt->partitions.items[0].current_leader_epoch = -1;
    qt->partitions.items[0].partition_max_bytes = 1 << 20;
    req->body = body;
    req->resp = NEW(req, gr_fetch_response);
    gr_fetch_response_init(req->resp);
    return req;
}

/* Fetch of p0 (led here, log not made): without a long poll, empty with NONE and a new log's offsets; with
   one, it waits until the log is made and then for data on it, answered with the record produced there. */
static void test_fetch_log_not_made_yet(void **state)
{
    struct fx *f = *state;
    uint8_t id[16];
    struct gr_topic *t = sparse_led_here(f, id);
    for (int wait = 0; wait < 2; wait++) {
        struct gr_req *req = fetch_sp0(f, wait ? 10000 : 0);
        freed_count = 0;
        assert_int_equal(gr_handle_fetch(req), GR_HANDLER_WAIT);
        if (!wait) {
            assert_int_equal(freed_count, 1);
            assert_int_equal(freed_codes[0], GR_ERR_NONE);
            assert_int_equal(freed_bytes[0], 0);
            continue;
        }
        assert_int_equal(freed_count, 0);
        assert_int_equal(f->b->logwaits.count, 1);
        make_log(f, t, id, 0, 1);
        assert_int_equal(freed_count, 0); /* made, still empty: now waiting for data */
        int32_t p0[] = {0};
        struct gr_req *pr = produce_req(f, 10, "sp", NULL, p0, 1);
        fetches_freed = 0;
        assert_int_equal(gr_handle_produce(pr), GR_HANDLER_DONE); /* the append wakes the fetch */
        for (int i = 0; i < 100 && fetches_freed == 0; i++)
            ev_run(f->b->loop, EVRUN_NOWAIT);
        assert_int_equal(fetches_freed, 1);
        assert_int_equal(freed_codes[0], GR_ERR_NONE);
        assert_true(freed_bytes[0] > 0);
        gr_req_free(pr);
    }
    f->b->req_sink = NULL;
}

/* The partition stops routing pending while requests wait for its log: leadership moved to broker 2 wakes
   the Produce (p0 NOT_LEADER_OR_FOLLOWER, p1 appended), this broker fenced wakes the long-poll Fetch
   (NOT_LEADER_OR_FOLLOWER), each at the image change (gr_route_logwaits_settle), not at their deadlines; an
   image change that leaves the partition pending wakes nobody. */
static void test_log_wait_settled_by_image(void **state)
{
    struct fx *f = *state;
    uint8_t id[16];
    struct gr_topic *t = sparse_led_here(f, id);
    struct gr_image_topic *it = gr_image_topic_find(f->b->image, "sp", 2);
    int32_t parts[] = {0, 1};
    struct gr_req *req = produce_req(f, 10, "sp", NULL, parts, 2);
    assert_int_equal(gr_handle_produce(req), GR_HANDLER_WAIT);
    freed_count = fetches_freed = 0;
    struct gr_req *fr = fetch_sp0(f, 30000);
    assert_int_equal(gr_handle_fetch(fr), GR_HANDLER_WAIT);
    assert_int_equal(f->b->logwaits.count, 2);
    assert_int_equal(gr_route_logwaits_settle(f->b), 0); /* still led here, still not made */
    assert_int_equal(freed_count, 0);
    set_part(f->b->image, it, 0, 2, 4, 2, true); /* moved to broker 2: the produce's wait settles */
    int woken = gr_route_logwaits_settle(f->b);
    assert_int_equal(woken, 2); /* both: for the fetch too p0 is no longer led here */
    assert_int_equal(freed_count, 2);
    assert_int_equal(fetches_freed, 1);
    assert_int_equal(f->b->logwaits.count, 0);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 1);
    assert_int_equal(produce_codes[0], GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(produce_codes[1], GR_ERR_NONE);
    assert_int_equal(fetch_codes[0], GR_ERR_NOT_LEADER_OR_FOLLOWER);
    set_part(f->b->image, it, 0, 1, 5, 1, true); /* led here again, log still not made */
    fr = fetch_sp0(f, 30000);
    freed_count = fetches_freed = 0;
    assert_int_equal(gr_handle_fetch(fr), GR_HANDLER_WAIT);
    assert_int_equal(freed_count, 0);
    f->b->image->self_fenced = true; /* fenced: it leads nothing */
    assert_int_equal(gr_route_logwaits_settle(f->b), 1);
    assert_int_equal(fetches_freed, 1);
    assert_int_equal(fetch_codes[0], GR_ERR_NOT_LEADER_OR_FOLLOWER);
    f->b->image->self_fenced = false;
    f->b->req_sink = NULL;
}

/* Replication factor 3 as the controller leaves it after losses (issue #20: "Replication shows in ...
 * Metadata (ISR, offline replicas)"): replicas {1, 2, 9}, 9 not registered, ISR {2, 1} after a shrink.
 * v1+ list every replica, the ISR as stored and 9 offline (KRaftMetadataCache.getOfflineReplicas: a replica
 * whose broker is unknown, fenced or without the listener); v0 leaves 9 out with REPLICA_NOT_AVAILABLE. An
 * offline partition keeps its last ISR member, listed with the replicas, and answers LEADER_NOT_AVAILABLE. */
static void test_metadata_replicated(void **state)
{
    struct fx *f = *state;
    struct gr_image *img = f->b->image;
    struct gr_image_topic *it = NULL;
    uint8_t id[16];
    memset(id, 0x33, 16);
    assert_int_equal(gr_image_put_topic(img, "rep", 3, id, false, 2, NULL, &it), 0);
    int32_t reps[3] = {1, 2, 9}, isr[2] = {2, 1}, last[1] = {9};
    struct gr_image_partition_state st = {.leader = 2,
                                          .leader_epoch = 3,
                                          .partition_epoch = 40,
                                          .replicas = reps,
                                          .replica_count = 3,
                                          .isr = isr,
                                          .isr_count = 2};
    assert_int_equal(gr_image_set_partition(img, it, 0, &st), 0);
    st = (struct gr_image_partition_state){.leader = -1,
                                           .leader_epoch = 7,
                                           .partition_epoch = 41,
                                           .replicas = reps,
                                           .replica_count = 3,
                                           .isr = last,
                                           .isr_count = 1};
    assert_int_equal(gr_image_set_partition(img, it, 1, &st), 0);
    for (int16_t v = 1; v <= 12; v++) {
        struct gr_req *req = metadata_all(f, v);
        struct gr_metadata_response_metadata_response_partition *p =
            topic_named(req->resp, "rep")->partitions.items;
        assert_int_equal(p[0].error_code, GR_ERR_NONE);
        assert_int_equal(p[0].leader_id, 2);
        assert_int_equal(p[0].replica_nodes.count, 3);
        assert_int_equal(p[0].replica_nodes.items[2], 9);
        assert_int_equal(p[0].isr_nodes.count, 2);
        assert_int_equal(p[0].isr_nodes.items[0], 2);
        assert_int_equal(p[0].isr_nodes.items[1], 1);
        if (v >= 5) check_nodes(p[0].offline_replicas, 1, 9); /* offline_replicas: v5+ */
        assert_int_equal(p[1].error_code, GR_ERR_LEADER_NOT_AVAILABLE);
        assert_int_equal(p[1].leader_id, -1);
        if (v >= 7) assert_int_equal(p[1].leader_epoch, 7); /* leader_epoch: v7+ */
        check_nodes(p[1].isr_nodes, 1, 9);
        if (v >= 5) check_nodes(p[1].offline_replicas, 1, 9);
        gr_req_free(req);
    }
    struct gr_req *req0 = srv_req_new(f->b, 3, 0, 1 << 16);
    struct gr_metadata_request *body0 = NEW(req0, gr_metadata_request);
    gr_metadata_request_init(body0);
    body0->topics.count = 0; /* v0: empty = all */
    req0->body = body0;
    req0->resp = NEW(req0, gr_metadata_response);
    gr_metadata_response_init(req0->resp);
    assert_int_equal(gr_handle_metadata(req0), GR_HANDLER_DONE);
    struct gr_metadata_response_metadata_response_partition *p =
        topic_named(req0->resp, "rep")->partitions.items;
    assert_int_equal(p[0].error_code, GR_ERR_REPLICA_NOT_AVAILABLE);
    assert_int_equal(p[0].replica_nodes.count, 2);
    assert_int_equal(p[0].isr_nodes.count, 2);
    gr_req_free(req0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_produce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_self_fenced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_delete_records_epochs_producers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metadata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metadata_replicated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_cluster_and_coordinator, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_source_follows_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_led_here_log_not_made_yet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_wait_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_log_not_made_yet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_log_not_made_yet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_wait_settled_by_image, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alter_replica_log_dirs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
