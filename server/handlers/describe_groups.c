/*
 * describe_groups.c: DescribeGroups (key 15), v0-6. Per group: its state, protocol type, and members
 * (client id, host "/ip", group.instance.id from v4, assignment); the selected protocol and each member's
 * metadata only in Stable (Kafka's describe vs describeNoMetadata). An unknown group is "Dead" with no
 * members; from v6 it also carries GROUP_ID_NOT_FOUND and a message (KIP-1043). With
 * include_authorized_operations (v3+) the group's operations are all allowed (no authorizer). A group this
 * broker does not coordinate gets NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its partition loads).
 * Read next: server/handlers/delete_groups.c.
 * ACLs: DESCRIBE on each group, else that group GROUP_AUTHORIZATION_FAILED (KafkaApis).
 */
#include <stdio.h>

#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

/* Kafka AclOperation bits for a group without an authorizer: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
 * ALTER_CONFIGS. */
#define GROUP_ALL_OPERATIONS ((1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11))

enum gr_handler_rc gr_handle_describe_groups(struct gr_req *req)
{
    struct gr_describe_groups_request *body = req->body;
    struct gr_describe_groups_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    int32_t n = body->groups.count > 0 ? body->groups.count : 0;
    resp->groups.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->groups.items);
    if (!resp->groups.items) return GR_HANDLER_CLOSE;
    resp->groups.count = n;
    for (int32_t i = 0; i < n; i++) {
        struct gr_describe_groups_response_described_group *dg = &resp->groups.items[i];
        gr_describe_groups_response_described_group_init(dg);
        dg->group_id = body->groups.items[i];
        if (!gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, dg->group_id)) { /* KafkaApis */
            dg->error_code = GR_ERR_GROUP_AUTHORIZATION_FAILED;
            continue;
        }
        if (!b->coord) {
            dg->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
            continue;
        }
        if ((dg->error_code = gr_coord_check(b->coord, dg->group_id))) continue; /* not coordinated here */
        struct gr_group *grp = gr_coord_group_find(b->coord, dg->group_id);
        if (!grp) {
            dg->group_state = gr_str_c("Dead");
            if (v >= 6) {
                dg->error_code = GR_ERR_GROUP_ID_NOT_FOUND;
                int32_t len = dg->group_id.len > 0 ? dg->group_id.len : 0;
                char *msg = gr_arena_alloc(&req->arena, (size_t)len + 32);
                if (msg) {
                    snprintf(msg, (size_t)len + 32, "Group %.*s not found.", (int)len, dg->group_id.ptr);
                    dg->error_message = gr_str_c(msg);
                }
            }
            continue;
        }
        enum gr_group_state state = gr_group_state(grp);
        bool stable = state == GR_GROUP_STABLE;
        dg->group_state = gr_str_c(gr_group_state_name(state));
        dg->protocol_type = gr_str_c(gr_group_protocol_type(grp) ? gr_group_protocol_type(grp) : "");
        if (stable && gr_group_protocol_name(grp)) dg->protocol_data = gr_str_c(gr_group_protocol_name(grp));
        if (v >= 3 && body->include_authorized_operations) dg->authorized_operations = GROUP_ALL_OPERATIONS;
        int32_t nm = gr_group_member_count(grp);
        dg->members.items = gr_arena_calloc(&req->arena, (size_t)nm + 1, sizeof *dg->members.items);
        if (!dg->members.items) return GR_HANDLER_CLOSE;
        dg->members.count = nm;
        for (int32_t k = 0; k < nm; k++) {
            const struct gr_member *m = gr_group_member_at(grp, k);
            struct gr_describe_groups_response_described_group_member *dm = &dg->members.items[k];
            gr_describe_groups_response_described_group_member_init(dm);
            dm->member_id = gr_str_c(gr_member_id(m));
            dm->group_instance_id =
                gr_member_instance_id(m) ? gr_str_c(gr_member_instance_id(m)) : GR_STR_NULL;
            dm->client_id = gr_str_c(gr_member_client_id(m));
            dm->client_host = gr_str_c(gr_member_client_host(m));
            if (stable) {
                struct gr_bytes md = gr_member_metadata(m, grp);
                if (md.len >= 0) dm->member_metadata = md;
            }
            dm->member_assignment = gr_member_assignment(m);
        }
    }
    return GR_HANDLER_DONE;
}
