/*
 * partition_reassignments.c: AlterPartitionReassignments (key 45, v0-1), KIP-455 (v1's
 * AllowReplicationFactorChange: KIP-860); Kafka's ControllerApis and
 * ReplicationControlManager.alterPartitionReassignments. ListPartitionReassignments: list_reassignments.c.
 *
 * Alter: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top and on every partition (Kafka's
 * getErrorResponse). In a cluster only the controller's broker answers, others NOT_CONTROLLER, as
 * ElectLeaders (the AdminClient sends it to the controller Metadata names). Per partition: an unknown topic
 * or partition UNKNOWN_TOPIC_OR_PARTITION; a list over GR_CLUSTER_REPLICAS_MAX INVALID_REPLICA_ASSIGNMENT;
 * the rest is judged and written by the controller (cluster/reassign.h, cluster/controller.h
 * gr_controller_reassign) and answered once the image shows the writes, or REQUEST_TIMED_OUT at timeout_ms.
 * One node: judged on the image, where the only valid target is the node itself (nothing to write).
 *
 */
#include <stdio.h>
#include <string.h>

#include "cluster/controller.h"
#include "cluster/reassign.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

struct alter_state {
    int32_t n;
    struct gr_controller_reassign_part *parts;                                                  /* n */
    struct gr_alter_partition_reassignments_response_reassignable_partition_response **results; /* n */
    struct gr_controller_reassign_req *ask;
    bool expired;
};
static const char alter_key;

static void set_result(struct gr_alter_partition_reassignments_response_reassignable_partition_response *rp,
                       int16_t err, const char *msg)
{
    rp->error_code = err;
    rp->error_message = err && msg && *msg ? gr_str_c(msg) : GR_STR_NULL; /* null: Kafka's default message */
}

static enum gr_handler_rc alter_finish(struct gr_req *req)
{
    struct alter_state *s = gr_req_state(req, &alter_key);
    for (int32_t i = 0; i < s->n; i++) {
        struct gr_controller_reassign_part *pt = &s->parts[i];
        if (!pt->done)
            set_result(s->results[i], GR_ERR_REQUEST_TIMED_OUT, NULL);
        else
            set_result(s->results[i], pt->error, pt->message);
    }
    return GR_HANDLER_DONE;
}

static void on_reassigned(void *ctx)
{
    struct gr_req *req = ctx;
    struct alter_state *s = gr_req_state(req, &alter_key);
    s->ask = NULL; /* the controller freed it */
    gr_req_verified(req);
}

static void alter_withdraw(struct gr_req *req)
{
    struct alter_state *s = gr_req_state(req, &alter_key);
    if (s->ask) gr_controller_reassign_cancel(req->broker->controller, s->ask);
    s->ask = NULL;
    s->expired = true;
}

/* Fills asked part `pt` of partition `qp` of topic `name` (`it`: NULL when unknown): answered at once (the
 * top-level error, an unknown topic, a list over GR_CLUSTER_REPLICAS_MAX, or, on one node, judged on the
 * image), else left for the controller. Returns 1 when left for the controller. */
static int prepare(struct gr_req *req, struct gr_str name, const struct gr_image_topic *it,
                   const struct gr_alter_partition_reassignments_request_reassignable_partition *qp,
                   int16_t top, bool allow_rf, struct gr_controller_reassign_part *pt)
{
    struct gr_broker *b = req->broker;
    pt->partition = qp->partition_index;
    pt->target_count = qp->replicas.count;
    pt->done = true;
    pt->error = top;
    if (top) return 0;
    if (!it) {
        pt->error = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        snprintf(pt->message, sizeof pt->message, "Unable to find a topic named %.*s.",
                 (int)(name.len > 249 ? 249 : name.len), name.ptr);
        return 0;
    }
    memcpy(pt->topic_id, it->id, 16);
    if (qp->replicas.count > GR_CLUSTER_REPLICAS_MAX) {
        pt->error = GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        snprintf(pt->message, sizeof pt->message,
                 "The manual partition assignment includes %d replicas, more than the %d Gregor allows.",
                 (int)qp->replicas.count, GR_CLUSTER_REPLICAS_MAX);
        return 0;
    }
    if (qp->replicas.count > 0)
        memcpy(pt->target, qp->replicas.items, sizeof(int32_t) * (size_t)qp->replicas.count);
    if (!b->member) { /* one node: judged here, nothing can be written */
        struct gr_reassign_change ch;
        bool changed = false;
        pt->error = gr_reassign_ask(b->image, it, pt->partition, pt->target, pt->target_count, allow_rf,
                                    false, &ch, &changed, pt->message);
        if (!pt->error && changed)
            pt->error = GR_ERR_INVALID_REPLICA_ASSIGNMENT; /* unreachable: one replica */
        return 0;
    }
    pt->done = false;
    return 1;
}

enum gr_handler_rc gr_handle_alter_partition_reassignments(struct gr_req *req)
{
    struct gr_alter_partition_reassignments_request *body = req->body;
    struct gr_alter_partition_reassignments_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    bool allow_rf = req->hdr.request_api_version >= 1 ? body->allow_replication_factor_change : true;
    resp->allow_replication_factor_change = allow_rf;
    int16_t top = GR_ERR_NONE;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_ALTER))
        top = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
    else if (b->member && !(b->controller && gr_controller_epoch(b->controller)))
        top = GR_ERR_NOT_CONTROLLER;
    resp->error_code = top;
    resp->error_message = top ? gr_str_c(gr_error_message(top)) : GR_STR_NULL;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    if (nt == 0 && !top) resp->error_message = gr_str_c(""); /* Kafka 4.4 answers an empty ask with "" */
    int64_t n = 0;
    for (int32_t i = 0; i < nt; i++)
        n += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    struct alter_state *s = gr_req_state_add(req, &alter_key, sizeof *s);
    if (!s) return GR_HANDLER_CLOSE;
    s->parts = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *s->parts);
    s->results = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *s->results);
    resp->responses.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->responses.items);
    if (!s->parts || !s->results || !resp->responses.items) return GR_HANDLER_CLOSE;
    resp->responses.count = nt;
    int32_t asked = 0;
    for (int32_t i = 0; i < nt; i++) {
        const struct gr_alter_partition_reassignments_request_reassignable_topic *qt = &body->topics.items[i];
        struct gr_alter_partition_reassignments_response_reassignable_topic_response *rt =
            &resp->responses.items[i];
        gr_alter_partition_reassignments_response_reassignable_topic_response_init(rt);
        rt->name = qt->name;
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) return GR_HANDLER_CLOSE;
        rt->partitions.count = np;
        const struct gr_image_topic *it = top ? NULL : gr_route_topic(b, qt->name);
        for (int32_t j = 0; j < np; j++) {
            struct gr_alter_partition_reassignments_response_reassignable_partition_response *rp =
                &rt->partitions.items[j];
            gr_alter_partition_reassignments_response_reassignable_partition_response_init(rp);
            rp->partition_index = qt->partitions.items[j].partition_index;
            struct gr_controller_reassign_part *pt = &s->parts[s->n];
            s->results[s->n++] = rp;
            asked += prepare(req, qt->name, it, &qt->partitions.items[j], top, allow_rf, pt);
        }
    }
    if (asked == 0) return alter_finish(req);
    s->ask = b->controller
                 ? gr_controller_reassign(b->controller, s->parts, s->n, allow_rf, on_reassigned, req)
                 : NULL;
    if (!s->ask) { /* no longer the controller, or too many asks waiting */
        for (int32_t i = 0; i < s->n; i++)
            if (!s->parts[i].done) {
                s->parts[i].done = true;
                s->parts[i].error = GR_ERR_NOT_CONTROLLER;
            }
        return alter_finish(req);
    }
    return gr_req_await_verified(req, body->timeout_ms, alter_finish, alter_withdraw);
}
