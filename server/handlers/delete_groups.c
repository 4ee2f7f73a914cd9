/*
 * delete_groups.c: DeleteGroups (key 42), v0-3. Each distinct group name (KafkaApis de-duplicates) gets
 * 0 when it was Empty (tombstones for its offsets and metadata are written, then it is forgotten),
 * NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when unknown. v3's error_message stays null, as
 * Kafka 4.4 answers for these and for a coordinator error (NOT_COORDINATOR seen with a null message); Kafka
 * fills it for GROUP_DELETION_FAILED, which Gregor never answers. Authorization (KafkaApis): DELETE on each
 * group; the refused ones are answered GROUP_AUTHORIZATION_FAILED after the others, and left untouched.
 * Read next: coordinator/group.c (gr_coord_group_delete).
 */
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_delete_groups(struct gr_req *req)
{
    struct gr_delete_groups_request *body = req->body;
    struct gr_delete_groups_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int32_t n = body->groups_names.count > 0 ? body->groups_names.count : 0;
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
    if (!resp->results.items) return GR_HANDLER_CLOSE;
    resp->results.count = 0;
    for (int pass = 0; pass < 2; pass++) /* the authorized groups, then the refused ones */
        for (int32_t i = 0; i < n; i++) {
            struct gr_str name = body->groups_names.items[i];
            bool seen = false;
            for (int32_t k = 0; k < i && !seen; k++)
                seen = gr_str_eq(body->groups_names.items[k], name);
            if (seen || (pass == 1) == gr_req_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_GROUP, name))
                continue;
            struct gr_delete_groups_response_deletable_group_result *r =
                &resp->results.items[resp->results.count++];
            gr_delete_groups_response_deletable_group_result_init(r);
            r->group_id = name;
            r->error_code = pass == 1  ? GR_ERR_GROUP_AUTHORIZATION_FAILED
                            : b->coord ? gr_coord_group_delete(b->coord, name)
                                       : GR_ERR_COORDINATOR_NOT_AVAILABLE;
        }
    return GR_HANDLER_DONE;
}
