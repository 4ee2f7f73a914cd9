/*
 * sync_group.c: SyncGroup (key 14), v0-5. The leader's assignments pass through byte for byte; a follower
 * waits (parked, no deadline) until the leader's SyncGroup arrives or the group rebalances. v3+ carry
 * group.instance.id; from v5 protocol type and name are required (INCONSISTENT_GROUP_PROTOCOL when null,
 * as KafkaApis checks) and compared with the group's; the answer carries them on success.
 * The coordinator's answer comes through server/groups.c's sync_done hook, which has gr_sync_group_fill
 * fill the response here and sends it. Read next: coordinator/group.c (sync_impl), server/groups.c.
 */
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_sync_group(struct gr_req *req)
{
    struct gr_sync_group_request *body = req->body;
    struct gr_sync_group_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    if (!gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, body->group_id)) { /* KafkaApis, first */
        resp->error_code = GR_ERR_GROUP_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    if (!b->coord) {
        resp->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
        return GR_HANDLER_DONE;
    }
    int32_t n = body->assignments.count > 0 ? body->assignments.count : 0;
    struct gr_sync_assignment *as = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *as);
    if (!as) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        as[i] = (struct gr_sync_assignment){body->assignments.items[i].member_id,
                                            body->assignments.items[i].assignment};
    struct gr_sync_params p = {
        .group_id = body->group_id,
        .member_id = body->member_id,
        .group_instance_id = v >= 3 ? body->group_instance_id : GR_STR_NULL,
        .protocol_type = v >= 5 ? body->protocol_type : GR_STR_NULL,
        .protocol_name = v >= 5 ? body->protocol_name : GR_STR_NULL,
        .generation_id = body->generation_id,
        .assignments = as,
        .assignment_count = n,
        .api_version = v,
        .waiter = req,
    };
    gr_req_await(req, NULL); /* first: the answer may come inside the call (finishing unparks it) */
    gr_coord_sync(b->coord, &p);
    return GR_HANDLER_WAIT;
}

/* ---- the late answer (server/groups.c's sync_done hook) ---- */

void gr_sync_group_fill(struct gr_req *req, const struct gr_sync_result *res)
{
    struct gr_sync_group_response *resp = req->resp;
    resp->error_code = res->error_code;
    resp->protocol_type = res->protocol_type;
    resp->protocol_name = res->protocol_name;
    resp->assignment = res->assignment.len >= 0 ? res->assignment : (struct gr_bytes){(const uint8_t *)"", 0};
}
