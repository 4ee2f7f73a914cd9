/*
 * leave_group.c: LeaveGroup (key 13), v0-5. v0-2 name one member and answer one error (the top-level
 * error, else the member's, as Kafka's LeaveGroupResponse folds them); v3+ take a batch of members (by
 * member id, or by group.instance.id with an empty member id for administrative removal) and answer per
 * member; v5 adds a reason. Read next: coordinator/group.c (gr_coord_leave).
 */
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_leave_group(struct gr_req *req)
{
    struct gr_leave_group_request *body = req->body;
    struct gr_leave_group_response *resp = req->resp;
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
    if (v < 3) {
        struct gr_leave_member m = {body->member_id, GR_STR_NULL, GR_STR_NULL, 0};
        int16_t top = gr_coord_leave(b->coord, body->group_id, &m, 1);
        resp->error_code = top ? top : m.error_code;
        return GR_HANDLER_DONE;
    }
    int32_t n = body->members.count > 0 ? body->members.count : 0;
    struct gr_leave_member *ms = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *ms);
    resp->members.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->members.items);
    if (!ms || !resp->members.items) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        struct gr_leave_group_request_member_identity *mi = &body->members.items[i];
        ms[i] = (struct gr_leave_member){mi->member_id, mi->group_instance_id,
                                         v >= 5 ? mi->reason : GR_STR_NULL, 0};
    }
    resp->error_code = gr_coord_leave(b->coord, body->group_id, ms, n);
    if (resp->error_code) return GR_HANDLER_DONE; /* a top-level error carries no member list */
    for (int32_t i = 0; i < n; i++) {
        struct gr_leave_group_response_member_response *mr = &resp->members.items[i];
        gr_leave_group_response_member_response_init(mr);
        mr->member_id = body->members.items[i].member_id;
        mr->group_instance_id = body->members.items[i].group_instance_id;
        mr->error_code = ms[i].error_code;
    }
    resp->members.count = n;
    return GR_HANDLER_DONE;
}
