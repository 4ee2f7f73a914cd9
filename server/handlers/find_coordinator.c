/*
 * find_coordinator.c: FindCoordinator (key 10), every version from v0; v4+ takes a batch of keys.
 * A group's coordinator (key type 0) is the leader of its __consumer_offsets partition in the metadata image
 * (server/groups.c gr_groups_coordinator: abs(hashCode) % partitions; a single node leads all of them), at
 * that broker's address on the listener the client connected on; COORDINATOR_NOT_AVAILABLE while the topic
 * does not exist yet (its creation is triggered), while the partition has no leader, or when the leader has
 * no live registration with that listener. A transaction's coordinator (key type 1, server/txns.h) is
 * the leader of the id's __transaction_state partition (abs(hashCode) % 50), COORDINATOR_NOT_AVAILABLE while
 * the topic does not exist (dispatch has it created first). ACLs: DESCRIBE on the group (else
 * GROUP_AUTHORIZATION_FAILED) or the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
 */
#include "server/acls.h"
#include "server/groups.h"
#include "server/txns.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

/* One key's answer: error code, message (NULL: none) and the coordinator's endpoint (NULL on errors). */
static int16_t answer(struct gr_req *req, int8_t key_type, struct gr_str key, const char **msg,
                      int32_t *node_id, const struct gr_image_listener **l)
{
    *l = NULL;
    *node_id = -1;
    if (key_type != 0 && key_type != 1) {
        *msg = "Unknown key type";
        return GR_ERR_INVALID_REQUEST;
    }
    /* KafkaApis: DESCRIBE on the group or the transactional id, before looking the coordinator up */
    enum gr_acl_resource rt = key_type == 1 ? GR_ACL_RES_TRANSACTIONAL_ID : GR_ACL_RES_GROUP;
    if (!gr_req_authorized(req, GR_ACL_OP_DESCRIBE, rt, key)) {
        int16_t e =
            key_type == 1 ? GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED : GR_ERR_GROUP_AUTHORIZATION_FAILED;
        *msg = gr_error_message(e);
        return e;
    }
    int16_t err = key_type == 1 ? gr_txns_coordinator(req->broker, key, node_id)
                                : gr_groups_coordinator(req->broker, key, node_id);
    if (!err && !(*l = gr_route_endpoint(req, *node_id, NULL))) err = GR_ERR_COORDINATOR_NOT_AVAILABLE;
    if (err) {
        *node_id = -1;
        *msg = "The coordinator is not available.";
    }
    return err;
}

enum gr_handler_rc gr_handle_find_coordinator(struct gr_req *req)
{
    struct gr_find_coordinator_request *body = req->body;
    struct gr_find_coordinator_response *resp = req->resp;
    const struct gr_image_listener *l;
    int32_t node;
    if (req->hdr.request_api_version < 4) {
        const char *msg = NULL;
        resp->error_code = answer(req, body->key_type, body->key, &msg, &node, &l);
        /* Kafka names the error even on success: "NONE" (Errors.NONE.message()) */
        resp->error_message = gr_str_c(msg ? msg : "NONE");
        resp->node_id = node;
        resp->host = gr_str_c(l ? l->host : "");
        resp->port = l ? l->port : -1;
        return GR_HANDLER_DONE;
    }
    int32_t n = body->coordinator_keys.count > 0 ? body->coordinator_keys.count : 0;
    resp->coordinators.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->coordinators.items);
    if (!resp->coordinators.items) return GR_HANDLER_CLOSE;
    resp->coordinators.count = n;
    for (int32_t i = 0; i < n; i++) {
        struct gr_find_coordinator_response_coordinator *c = &resp->coordinators.items[i];
        gr_find_coordinator_response_coordinator_init(c);
        const char *msg = NULL;
        c->key = body->coordinator_keys.items[i];
        c->error_code = answer(req, body->key_type, c->key, &msg, &node, &l);
        c->error_message = gr_str_c(msg ? msg : ""); /* Kafka 4.4: "" on success from v4 */
        c->node_id = node;
        c->host = gr_str_c(l ? l->host : "");
        c->port = l ? l->port : -1;
    }
    return GR_HANDLER_DONE;
}
