/*
 * list_groups.c: ListGroups (key 16), v0-5. Every group this node coordinates (those of the
 * __consumer_offsets partitions it has loaded: all of them on a single node, as Kafka lists only its own),
 * filtered by state from v4 (case-insensitive against Kafka's state names) and by type from v5 (every group
 * here is "classic"; an unknown type name matches nothing, as Kafka's GroupType.parse gives UNKNOWN). ACLs:
 * every group with DESCRIBE on the cluster, else only the groups the principal may DESCRIBE. Read
 * next: server/handlers/describe_groups.c.
 */
#include <strings.h>

#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

static bool in_filter(const struct gr_str_array *filter, const char *value)
{
    if (filter->count <= 0) return true;
    size_t n = strlen(value);
    for (int32_t i = 0; i < filter->count; i++) {
        struct gr_str f = filter->items[i];
        /* Kafka trims and lower-cases the state filter */
        while (f.len > 0 && (f.ptr[0] == ' ' || f.ptr[0] == '\t'))
            f.ptr++, f.len--;
        while (f.len > 0 && (f.ptr[f.len - 1] == ' ' || f.ptr[f.len - 1] == '\t'))
            f.len--;
        if (f.len >= 0 && (size_t)f.len == n && strncasecmp(f.ptr, value, n) == 0) return true;
    }
    return false;
}

enum gr_handler_rc gr_handle_list_groups(struct gr_req *req)
{
    struct gr_list_groups_request *body = req->body;
    struct gr_list_groups_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    if (!b->coord) {
        resp->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
        return GR_HANDLER_DONE;
    }
    struct gr_str_array none = {NULL, 0};
    const struct gr_str_array *states = v >= 4 ? &body->states_filter : &none;
    const struct gr_str_array *types = v >= 5 ? &body->types_filter : &none;
    /* KafkaApis: DESCRIBE on the cluster lists every group, else those the principal may DESCRIBE */
    bool every = gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE);
    int32_t n = gr_coord_group_count(b->coord);
    resp->groups.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->groups.items);
    if (!resp->groups.items) return GR_HANDLER_CLOSE;
    resp->groups.count = 0;
    for (int32_t i = 0; i < n; i++) {
        struct gr_group *grp = gr_coord_group_at(b->coord, i);
        if (gr_coord_check(b->coord, gr_str_c(gr_group_id(grp)))) continue; /* its partition is loading */
        if (!every && !gr_req_authorized_c(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, gr_group_id(grp)))
            continue;
        const char *state = gr_group_state_name(gr_group_state(grp));
        if (!in_filter(states, state) || !in_filter(types, "classic")) continue;
        struct gr_list_groups_response_listed_group *lg = &resp->groups.items[resp->groups.count++];
        gr_list_groups_response_listed_group_init(lg);
        lg->group_id = gr_str_c(gr_group_id(grp));
        lg->protocol_type = gr_str_c(gr_group_protocol_type(grp) ? gr_group_protocol_type(grp) : "");
        lg->group_state = gr_str_c(state);
        lg->group_type = gr_str_c("classic");
    }
    return GR_HANDLER_DONE;
}
