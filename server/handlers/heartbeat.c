/*
 * heartbeat.c: Heartbeat (key 12), v0-4. Keeps a member's session; REBALANCE_IN_PROGRESS tells it to
 * rejoin; ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID fence stale members (v3+ carry
 * group.instance.id). Read next: coordinator/group.c (gr_coord_heartbeat).
 */
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_heartbeat(struct gr_req *req)
{
    struct gr_heartbeat_request *body = req->body;
    struct gr_heartbeat_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    if (!gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, body->group_id)) { /* KafkaApis, first */
        resp->error_code = GR_ERR_GROUP_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    if (!b->coord) {
        resp->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
        return GR_HANDLER_DONE;
    }
    struct gr_str instance = req->hdr.request_api_version >= 3 ? body->group_instance_id : GR_STR_NULL;
    resp->error_code =
        gr_coord_heartbeat(b->coord, body->group_id, body->member_id, instance, body->generation_id);
    return GR_HANDLER_DONE;
}
