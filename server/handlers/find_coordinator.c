/*
 * find_coordinator.c: FindCoordinator (key 10), every version from v0; v4+ takes a batch of keys.
 * This node coordinates every group (key type 0), at its address in the metadata image on the listener the
 * client connected on (COORDINATOR_NOT_AVAILABLE when it has none there). Transactions (key type 1) are not
 * built yet, so their coordinator is COORDINATOR_NOT_AVAILABLE.
 */
#include "server/handlers/handlers.h"
#include "server/route.h"

static int16_t answer(int8_t key_type, bool reachable, const char **msg)
{
    if (key_type == 0) return reachable ? GR_ERR_NONE : GR_ERR_COORDINATOR_NOT_AVAILABLE;
    if (key_type == 1) {
        *msg = "Transactions are not supported by this broker yet";
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    }
    *msg = "Unknown key type";
    return GR_ERR_INVALID_REQUEST;
}

enum gr_handler_rc gr_handle_find_coordinator(struct gr_req *req)
{
    struct gr_find_coordinator_request *body = req->body;
    struct gr_find_coordinator_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    const struct gr_image_listener *l = gr_route_endpoint(req, b->image->node_id, NULL);
    struct gr_str host = gr_str_c(l ? l->host : "");
    int32_t adv_port = l ? l->port : -1;
    if (req->hdr.request_api_version < 4) {
        const char *msg = NULL;
        resp->error_code = answer(body->key_type, l != NULL, &msg);
        /* Kafka names the error even on success: "NONE" (Errors.NONE.message()) */
        resp->error_message = gr_str_c(msg ? msg : "NONE");
        resp->node_id = resp->error_code ? -1 : b->image->node_id;
        resp->host = resp->error_code ? gr_str_c("") : host;
        resp->port = resp->error_code ? -1 : adv_port;
        return GR_HANDLER_DONE;
    }
    int32_t n = body->coordinator_keys.count > 0 ? body->coordinator_keys.count : 0;
    resp->coordinators.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->coordinators.items);
    resp->coordinators.count = n;
    for (int32_t i = 0; i < n; i++) {
        struct gr_find_coordinator_response_coordinator *c = &resp->coordinators.items[i];
        gr_find_coordinator_response_coordinator_init(c);
        const char *msg = NULL;
        c->key = body->coordinator_keys.items[i];
        c->error_code = answer(body->key_type, l != NULL, &msg);
        c->error_message = gr_str_c(msg ? msg : ""); /* Kafka 4.4: "" on success from v4 */
        c->node_id = c->error_code ? -1 : b->image->node_id;
        c->host = c->error_code ? gr_str_c("") : host;
        c->port = c->error_code ? -1 : adv_port;
    }
    return GR_HANDLER_DONE;
}
