/*
 * offset_for_leader_epoch.c: OffsetForLeaderEpoch (key 23), v2-v4 (KIP-101/KIP-320). For each partition:
 * the largest leader epoch <= the requested one and its end offset (the start offset of the next higher
 * epoch, or the log end offset for the current epoch), following Kafka 4.1's LeaderEpochFileCache:
 * epoch -1 or above the current epoch answers leader_epoch -1 and end_offset -1 (UNDEFINED_EPOCH and
 * UNDEFINED_EPOCH_OFFSET) with no error; an epoch below the first known one answers that epoch with the
 * start offset of the first known epoch (the log start offset in Gregor, which stamps every batch).
 * current_leader_epoch (when >= 0) older than the partition's is FENCED_LEADER_EPOCH, newer is
 * UNKNOWN_LEADER_EPOCH. replica_id (v3+: -1 consumers, -2 debug, >= 0 followers) changes nothing on one
 * node: this broker leads every partition. The answer is the partition layer's
 * (gr_partition_epoch_end_offset). Authorization (KafkaApis): CLUSTER_ACTION on the cluster allows every
 * topic; else DESCRIBE on each topic, its partitions TOPIC_AUTHORIZATION_FAILED (epoch and offset -1)
 * without it, whatever replica_id says. Read next: partition/read.c.
 */
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

enum gr_handler_rc gr_handle_offset_for_leader_epoch(struct gr_req *req)
{
    struct gr_offset_for_leader_epoch_request *body = req->body;
    struct gr_offset_for_leader_epoch_response *resp = req->resp;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return GR_HANDLER_CLOSE;
    resp->topics.count = nt;
    bool cluster_action = gr_req_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION);
    for (int32_t i = 0; i < nt; i++) {
        struct gr_offset_for_leader_epoch_request_offset_for_leader_topic *qt = &body->topics.items[i];
        struct gr_offset_for_leader_epoch_response_offset_for_leader_topic_result *rt =
            &resp->topics.items[i];
        gr_offset_for_leader_epoch_response_offset_for_leader_topic_result_init(rt);
        rt->topic = qt->topic;
        const struct gr_image_topic *it = gr_route_topic(req->broker, qt->topic);
        bool denied =
            !cluster_action && !gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, qt->topic);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) return GR_HANDLER_CLOSE;
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_offset_for_leader_epoch_request_offset_for_leader_partition *qp =
                &qt->partitions.items[p];
            struct gr_offset_for_leader_epoch_response_epoch_end_offset *rp = &rt->partitions.items[p];
            gr_offset_for_leader_epoch_response_epoch_end_offset_init(rp);
            rp->partition = qp->partition;
            rp->leader_epoch = -1;
            rp->end_offset = -1;
            struct gr_route r; /* another broker's: NOT_LEADER_OR_FOLLOWER (server/route.h) */
            if (denied) {
                rp->error_code = GR_ERR_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
            if ((rp->error_code = gr_route_partition(req->broker, it, qp->partition, false, &r))) continue;
            rp->error_code = (int16_t)gr_partition_epoch_end_offset(
                gr_broker_partition(req->broker, r.log), qp->current_leader_epoch, qp->leader_epoch,
                &rp->leader_epoch, &rp->end_offset);
        }
    }
    return GR_HANDLER_DONE;
}
