/*
 * offset_delete.c: OffsetDelete (key 47), v0. Partitions of unknown topics get
 * UNKNOWN_TOPIC_OR_PARTITION; the rest go to the coordinator, which refuses the whole request with
 * GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP (a non-empty group not using the consumer protocol) or answers per
 * partition: GROUP_SUBSCRIBED_TO_TOPIC for a topic a member's consumer-protocol subscription names, else 0
 * (a tombstone is written when an offset was committed). A top-level error carries no topics (Kafka's
 * OffsetDeleteResponse.Builder.merge). Authorization (KafkaApis): DELETE on the group first, else
 * GROUP_AUTHORIZATION_FAILED and no topics; then READ on each topic, else its partitions
 * TOPIC_AUTHORIZATION_FAILED (before existence) and not sent to the coordinator. Read next:
 * coordinator/offsets.c (gr_coord_offset_delete).
 */
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

typedef struct gr_offset_delete_response_offset_delete_response_partition resp_partition;

enum gr_handler_rc gr_handle_offset_delete(struct gr_req *req)
{
    struct gr_offset_delete_request *body = req->body;
    struct gr_offset_delete_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    if (!b->coord) {
        resp->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
        return GR_HANDLER_DONE;
    }
    if (!gr_req_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_GROUP, body->group_id)) {
        resp->error_code = GR_ERR_GROUP_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    int32_t total = 0;
    for (int32_t i = 0; i < ntopics; i++)
        total += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    struct gr_offset_delete_topic *dts = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *dts);
    struct gr_offset_delete_partition *dps = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *dps);
    resp_partition **dst = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *dst);
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *resp->topics.items);
    if (!dts || !dps || !dst || !resp->topics.items) return GR_HANDLER_CLOSE;
    int32_t k = 0, ndt = 0;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_offset_delete_request_offset_delete_request_topic *rt = &body->topics.items[i];
        struct gr_offset_delete_response_offset_delete_response_topic *tr = &resp->topics.items[i];
        gr_offset_delete_response_offset_delete_response_topic_init(tr);
        tr->name = rt->name;
        int32_t np = rt->partitions.count > 0 ? rt->partitions.count : 0;
        tr->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *tr->partitions.items);
        if (!tr->partitions.items) return GR_HANDLER_CLOSE;
        tr->partitions.count = np;
        const struct gr_image_topic *t = gr_route_topic(b, rt->name); /* the cluster's topics */
        bool denied = !gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, rt->name);
        int32_t first = k;
        for (int32_t j = 0; j < np; j++) {
            resp_partition *pr = &tr->partitions.items[j];
            gr_offset_delete_response_offset_delete_response_partition_init(pr);
            pr->partition_index = rt->partitions.items[j].partition_index;
            if (denied) {
                pr->error_code = GR_ERR_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
            if (!t || pr->partition_index < 0 || pr->partition_index >= t->partition_count) {
                pr->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            dps[k] = (struct gr_offset_delete_partition){pr->partition_index, 0};
            dst[k++] = pr;
        }
        if (k > first) dts[ndt++] = (struct gr_offset_delete_topic){rt->name, &dps[first], k - first};
    }
    resp->topics.count = ntopics;
    resp->error_code = gr_coord_offset_delete(b->coord, body->group_id, dts, ndt);
    if (resp->error_code) {
        resp->topics.count = 0;
        return GR_HANDLER_DONE;
    }
    for (int32_t i = 0; i < k; i++)
        dst[i]->error_code = dps[i].error_code;
    return GR_HANDLER_DONE;
}
