/*
 * describe_cluster.c: DescribeCluster (key 60), v0-v2. The brokers, cluster id and controller of the metadata
 * image (cluster/image.h), each broker at its address on the listener the client connected on (one
 * without that listener is left out; fenced ones only with v2's include_fenced_brokers).
 * endpoint_type (v1+): 1 (brokers) is answered; 2 (controllers) is MISMATCHED_ENDPOINT_TYPE, anything
 * else UNSUPPORTED_ENDPOINT_TYPE, both with Kafka 4.1's messages, cluster id "" and controller -1.
 * cluster_authorized_operations: INT32_MIN unless requested, then every cluster operation (no authorizer:
 * CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, the bits a
 * Kafka 4.1 broker without an authorizer answers); with an authorizer 0 without DESCRIBE on the cluster, else
 * the allowed ones (gr_cluster_authorized_ops). DescribeCluster itself is never refused (AuthHelper).
 */
#include <stdio.h>
#include <string.h>

#include "cluster/image.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_describe_cluster(struct gr_req *req)
{
    struct gr_describe_cluster_request *body = req->body;
    struct gr_describe_cluster_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    resp->endpoint_type = 1;
    if (v >= 1 && body->endpoint_type != 1) {
        if (body->endpoint_type == 2) {
            resp->error_code = GR_ERR_MISMATCHED_ENDPOINT_TYPE;
            resp->error_message =
                gr_str_c("The request was sent to an endpoint of type BROKER, but we wanted an "
                         "endpoint of type CONTROLLER");
        } else {
            char buf[64];
            snprintf(buf, sizeof buf, "Unsupported endpoint type %d", body->endpoint_type);
            resp->error_code = GR_ERR_UNSUPPORTED_ENDPOINT_TYPE;
            resp->error_message = gr_str_c(gr_arena_strndup(&req->arena, buf, strlen(buf)));
        }
        resp->cluster_id = gr_str_c("");
        resp->controller_id = -1;
        return GR_HANDLER_DONE;
    }
    const struct gr_image *img = b->image;
    resp->cluster_id = gr_str_c(img->cluster_id);
    resp->controller_id = img->controller_id;
    int32_t n = gr_image_broker_count(img);
    resp->brokers.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->brokers.items);
    if (!resp->brokers.items) return GR_HANDLER_CLOSE;
    resp->brokers.count = 0;
    const char *listener = gr_req_listener_name(req);
    for (int32_t i = 0; i < n; i++) { /* through the request's listener; fenced ones only when asked (v2) */
        const struct gr_image_broker *ib = gr_image_broker_at(img, i);
        const struct gr_image_listener *l = gr_image_broker_listener(ib, listener, strlen(listener));
        if (!l || (ib->fenced && !(v >= 2 && body->include_fenced_brokers))) continue;
        struct gr_describe_cluster_response_describe_cluster_broker *br =
            &resp->brokers.items[resp->brokers.count++];
        gr_describe_cluster_response_describe_cluster_broker_init(br);
        br->broker_id = ib->node_id;
        br->host = gr_str_c(gr_arena_strndup(&req->arena, l->host, strlen(l->host)));
        br->port = l->port;
        br->rack =
            ib->has_rack ? gr_str_c(gr_arena_strndup(&req->arena, ib->rack, strlen(ib->rack))) : GR_STR_NULL;
        br->is_fenced = ib->fenced;
    }
    resp->cluster_authorized_operations =
        body->include_cluster_authorized_operations ? gr_cluster_authorized_ops(req) : INT32_MIN;
    return GR_HANDLER_DONE;
}
