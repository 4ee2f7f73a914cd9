/*
 * metadata.c: Metadata (key 3), v0-v13. One broker (this node) leads every partition with itself as the
 * only replica. Topic lists: v0 empty = all topics; v1+ null = all, empty = none. Topics are auto-created
 * here only (auto.create.topics.enable, and the request's allow_auto_topic_creation from v4; always
 * allowed before): the creating answer is UNKNOWN_TOPIC_OR_PARTITION, as KRaft Kafka answers while it
 * creates, and the next Metadata shows the partitions. Invalid names get INVALID_TOPIC_EXCEPTION. The
 * creation's files are made on the I/O pool: the request waits until it completed (so the next Metadata
 * does show the partitions), and gets the creation's error code instead when it failed.
 */
#include <string.h>

#include "common/log.h"
#include "coordinator/offsets_log.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"

/* Kafka AclOperation bits for a topic when no authorizer is set: READ, WRITE, CREATE, DELETE, ALTER,
 * DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS. */
#define TOPIC_ALL_OPERATIONS                                                                                 \
    ((1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11))

static void fill_topic(struct gr_req *req, struct gr_metadata_response_metadata_response_topic *rt,
                       struct gr_topic *t, bool want_ops)
{
    struct gr_broker *b = req->broker;
    rt->error_code = GR_ERR_NONE;
    rt->name = gr_str_c(gr_topic_name(t));
    rt->topic_id = gr_topic_uuid(t);
    rt->is_internal = gr_topic_name(t)[0] == '_' && strcmp(gr_topic_name(t), "__consumer_offsets") == 0;
    if (want_ops) rt->topic_authorized_operations = TOPIC_ALL_OPERATIONS;
    int32_t n = gr_topic_partition_count(t);
    rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *rt->partitions.items);
    rt->partitions.count = n;
    int32_t *self = gr_arena_alloc(&req->arena, sizeof *self);
    *self = b->node_id;
    for (int32_t p = 0; p < n; p++) {
        struct gr_metadata_response_metadata_response_partition *rp = &rt->partitions.items[p];
        gr_metadata_response_metadata_response_partition_init(rp);
        struct gr_log *log = gr_topic_log(t, p);
        rp->partition_index = p;
        rp->leader_id = b->node_id;
        rp->leader_epoch = gr_log_leader_epoch(log);
        rp->replica_nodes = (struct gr_int32_array){self, 1};
        if (gr_log_offline(log)) {
            rp->error_code = GR_ERR_KAFKA_STORAGE_ERROR;
            rp->isr_nodes = (struct gr_int32_array){NULL, 0};
            rp->offline_replicas = (struct gr_int32_array){self, 1};
        } else {
            rp->isr_nodes = (struct gr_int32_array){self, 1};
        }
    }
}

/* An auto-creation completed: the answer stays UNKNOWN_TOPIC_OR_PARTITION unless it failed otherwise. */
static void auto_created(struct gr_req *req, void *item, int16_t code, const char *msg, struct gr_topic *t)
{
    (void)req;
    (void)msg;
    (void)t;
    struct gr_metadata_response_metadata_response_topic *rt = item;
    if (code && code != GR_ERR_TOPIC_ALREADY_EXISTS) rt->error_code = code;
}

enum gr_handler_rc gr_handle_metadata(struct gr_req *req)
{
    struct gr_metadata_request *body = req->body;
    struct gr_metadata_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;

    resp->brokers.items = gr_arena_calloc(&req->arena, 1, sizeof *resp->brokers.items);
    resp->brokers.count = 1;
    gr_metadata_response_metadata_response_broker_init(&resp->brokers.items[0]);
    resp->brokers.items[0].node_id = b->node_id;
    const char *adv_host;
    gr_req_advertised(req, &adv_host, &resp->brokers.items[0].port);
    resp->brokers.items[0].host = gr_str_c(adv_host);
    resp->cluster_id = gr_str_c(gr_store_cluster_id(b->store));
    resp->controller_id = b->node_id;
    bool want_ops = v >= 8 && body->include_topic_authorized_operations;

    bool all = body->topics.count < 0 || (v == 0 && body->topics.count == 0);
    if (all) {
        int n = gr_store_topic_count(b->store);
        resp->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->topics.items);
        resp->topics.count = n;
        for (int i = 0; i < n; i++) {
            gr_metadata_response_metadata_response_topic_init(&resp->topics.items[i]);
            fill_topic(req, &resp->topics.items[i], gr_store_topic_at(b->store, i), want_ops);
        }
        return GR_HANDLER_DONE;
    }
    bool may_create = b->cfg.settings.auto_create_topics_enable && (v < 4 || body->allow_auto_topic_creation);
    int32_t n = body->topics.count;
    /* __consumer_offsets is created by the group coordinator's start (before anything else is submitted) */
    for (int32_t i = 0; i < n && may_create && !b->coord; i++)
        if (gr_str_eq(body->topics.items[i].name, gr_str_c(GR_OFFSETS_TOPIC)) && gr_groups_defer(req))
            return GR_HANDLER_WAIT;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->topics.items);
    resp->topics.count = n;
    for (int32_t i = 0; i < n; i++) {
        struct gr_metadata_request_metadata_request_topic *qt = &body->topics.items[i];
        struct gr_metadata_response_metadata_response_topic *rt = &resp->topics.items[i];
        gr_metadata_response_metadata_response_topic_init(rt);
        rt->name = qt->name;
        rt->topic_id = qt->topic_id;
        struct gr_topic *t = NULL;
        if (qt->name.len >= 0)
            t = gr_topic_lookup(b, qt->name);
        else
            t = gr_store_topic_find_id(b->store, qt->topic_id.b);
        if (t) {
            fill_topic(req, rt, t, want_ops);
            continue;
        }
        if (qt->name.len < 0) {
            rt->error_code = GR_ERR_UNKNOWN_TOPIC_ID;
            continue;
        }
        if (!gr_topic_name_valid(qt->name) || gr_topic_name_collides(b, qt->name)) {
            rt->error_code = GR_ERR_INVALID_TOPIC_EXCEPTION;
            continue;
        }
        rt->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        if (may_create) {
            int32_t parts = b->cfg.settings.num_partitions;
            int16_t err = gr_topic_create(req, qt->name, parts, NULL, NULL, 0, false, NULL, auto_created, rt);
            if (err && err != GR_ERR_TOPIC_ALREADY_EXISTS) rt->error_code = err;
        }
    }
    return gr_req_topic_ops_wait(req, NULL);
}
