/*
 * join_group.c: JoinGroup (key 11), v0-9. The handler hands the request to the group coordinator and parks
 * it (no deadline); the coordinator's answer comes through server/groups.c's join_done hook, which has
 * gr_join_group_fill fill the response here and sends it.
 *
 * Versions: v0 has no rebalance timeout (the session timeout is used, KAFKA-8653); v4+ dynamic
 * members with an empty member id get MEMBER_ID_REQUIRED (KIP-394); v5+ carry group.instance.id; the
 * protocol name is "" below v7 when there is none and null from v7 when it is empty (Kafka's
 * JoinGroupResponse); v9 adds skip_assignment. The member's client host is "/<ip>" as Kafka prints it.
 * Read next: coordinator/coordinator.h, server/groups.c (the binding), server/handlers/sync_group.c.
 */
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

/* ---- the late answer (server/groups.c's join_done hook) ---- */

void gr_join_group_fill(struct gr_req *req, const struct gr_join_result *res)
{
    struct gr_join_group_response *resp = req->resp;
    int16_t v = req->hdr.request_api_version;
    resp->error_code = res->error_code;
    resp->generation_id = res->generation_id;
    resp->protocol_type = res->protocol_type;
    resp->protocol_name = res->protocol_name;
    if (v < 7 && resp->protocol_name.len < 0) resp->protocol_name = gr_str_c("");
    if (v >= 7 && resp->protocol_name.len == 0) resp->protocol_name = GR_STR_NULL;
    resp->leader = res->leader.len >= 0 ? res->leader : gr_str_c("");
    resp->skip_assignment = res->skip_assignment;
    resp->member_id = res->member_id.len >= 0 ? res->member_id : gr_str_c("");
    resp->members.count = 0;
    if (res->member_count > 0) {
        resp->members.items =
            gr_arena_calloc(&req->arena, (size_t)res->member_count, sizeof *resp->members.items);
        if (!resp->members.items) {
            GR_ERROR("JoinGroup: out of request memory for %d members", res->member_count);
            resp->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
        } else {
            for (int32_t i = 0; i < res->member_count; i++) {
                struct gr_join_group_response_join_group_response_member *m = &resp->members.items[i];
                gr_join_group_response_join_group_response_member_init(m);
                m->member_id = res->members[i].member_id;
                m->group_instance_id = res->members[i].group_instance_id;
                m->metadata = res->members[i].metadata.len >= 0 ? res->members[i].metadata
                                                                : (struct gr_bytes){(const uint8_t *)"", 0};
            }
            resp->members.count = res->member_count;
        }
    }
}

/* ---- JoinGroup ---- */

enum gr_handler_rc gr_handle_join_group(struct gr_req *req)
{
    struct gr_join_group_request *body = req->body;
    struct gr_join_group_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    if (!gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, body->group_id)) { /* KafkaApis, first */
        resp->error_code = GR_ERR_GROUP_AUTHORIZATION_FAILED;
        resp->member_id = body->member_id;
        return GR_HANDLER_DONE;
    }
    if (!b->coord) {
        resp->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
        resp->member_id = body->member_id;
        return GR_HANDLER_DONE;
    }
    int32_t n = body->protocols.count > 0 ? body->protocols.count : 0;
    struct gr_join_protocol *protos = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *protos);
    if (!protos) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        protos[i] =
            (struct gr_join_protocol){body->protocols.items[i].name, body->protocols.items[i].metadata};
    struct gr_join_params p = {
        .group_id = body->group_id,
        .member_id = body->member_id,
        .group_instance_id = req->hdr.request_api_version >= 5 ? body->group_instance_id : GR_STR_NULL,
        .protocol_type = body->protocol_type,
        .client_id = req->hdr.client_id.len >= 0 ? req->hdr.client_id : gr_str_c(""),
        .client_host = gr_req_client_host(req),
        .reason = body->reason,
        .session_timeout_ms = body->session_timeout_ms,
        .rebalance_timeout_ms = body->rebalance_timeout_ms,
        .protocols = protos,
        .protocol_count = n,
        .api_version = req->hdr.request_api_version,
        .waiter = req,
    };
    /* declared first: the answer may come inside the call (then finishing unparks it) */
    gr_req_await(req, NULL);
    gr_coord_join(b->coord, &p);
    return GR_HANDLER_WAIT;
}
