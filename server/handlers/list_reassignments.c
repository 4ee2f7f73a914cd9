/*
 * list_reassignments.c: ListPartitionReassignments (key 46, v0; KIP-455, Kafka's ControllerApis and
 * ReplicationControlManager.listPartitionReassignments). DESCRIBE on the cluster, else
 * CLUSTER_AUTHORIZATION_FAILED at the top. Answered from the image on any broker (every broker's image is the
 * same; Kafka forwards it to the controller): topics null lists every partition being reassigned, else the
 * named partitions that are (unknown ones left out), with replicas, adding and removing replicas
 * (cluster/reassign.h).
 */
#include <string.h>

#include "cluster/image.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

/* One partition's entry of a List answer. Returns false when out of memory. */
static bool list_one(struct gr_req *req, const struct gr_image_partition *p, int32_t index,
                     struct gr_list_partition_reassignments_response_ongoing_partition_reassignment *op)
{
    gr_list_partition_reassignments_response_ongoing_partition_reassignment_init(op);
    op->partition_index = index;
    struct gr_int32_array *arrays[3] = {&op->replicas, &op->adding_replicas, &op->removing_replicas};
    const int32_t *lists[3] = {gr_image_replicas(p), gr_image_adding(p), gr_image_removing(p)};
    int32_t counts[3] = {p->replica_count, p->adding_count, p->removing_count};
    for (int i = 0; i < 3; i++) {
        arrays[i]->items = gr_arena_calloc(&req->arena, (size_t)counts[i] + 1, sizeof(int32_t));
        if (!arrays[i]->items) return false;
        memcpy(arrays[i]->items, lists[i], sizeof(int32_t) * (size_t)counts[i]);
        arrays[i]->count = counts[i];
    }
    return true;
}

/* Topic `it`'s reassigning partitions among `idx` (n indexes) or, when `all`, among all of them into a new
 * topic entry of the answer (none when it has none). Returns false when out of memory. */
static bool list_topic(struct gr_req *req, const struct gr_image_topic *it, bool all, const int32_t *idx,
                       int32_t n)
{
    struct gr_list_partition_reassignments_response *resp = req->resp;
    int32_t count = all ? it->partition_count : n, kept = 0;
    struct gr_list_partition_reassignments_response_ongoing_topic_reassignment *rt =
        &resp->topics.items[resp->topics.count];
    gr_list_partition_reassignments_response_ongoing_topic_reassignment_init(rt);
    rt->name = (struct gr_str){.ptr = it->name, .len = it->name_len};
    rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)count + 1, sizeof *rt->partitions.items);
    if (!rt->partitions.items) return false;
    for (int32_t k = 0; k < count; k++) {
        int32_t pi = all ? k : idx[k];
        const struct gr_image_partition *p = gr_image_partition(it, pi);
        if (!p || !gr_image_reassigning(p)) continue;
        bool seen = false; /* an index named twice is listed once */
        for (int32_t m = 0; m < kept && !seen; m++)
            seen = rt->partitions.items[m].partition_index == pi;
        if (!seen && !list_one(req, p, pi, &rt->partitions.items[kept++])) return false;
    }
    rt->partitions.count = kept;
    if (kept) resp->topics.count++;
    return true;
}

enum gr_handler_rc gr_handle_list_partition_reassignments(struct gr_req *req)
{
    struct gr_list_partition_reassignments_request *body = req->body;
    struct gr_list_partition_reassignments_response *resp = req->resp;
    const struct gr_image *img = req->broker->image;
    resp->error_message = GR_STR_NULL;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) {
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        resp->error_message = gr_str_c(gr_error_message(resp->error_code));
        return GR_HANDLER_DONE;
    }
    bool all = body->topics.count < 0;
    int32_t nt = all ? gr_image_topic_count(img) : body->topics.count;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return GR_HANDLER_CLOSE;
    resp->topics.count = 0;
    for (int32_t i = 0; i < nt; i++) {
        const struct gr_image_topic *it = all ? gr_image_topic_at((struct gr_image *)img, i)
                                              : gr_route_topic(req->broker, body->topics.items[i].name);
        if (!it) continue;
        const struct gr_int32_array *pi = all ? NULL : &body->topics.items[i].partition_indexes;
        if (!list_topic(req, it, all, pi ? pi->items : NULL, pi && pi->count > 0 ? pi->count : 0))
            return GR_HANDLER_CLOSE;
    }
    return GR_HANDLER_DONE;
}
