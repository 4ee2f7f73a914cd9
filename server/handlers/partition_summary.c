/*
 * partition_summary.c: PartitionSummary (Gregor-internal key GR_API_PARTITION_SUMMARY, v0; issue #22 "In a
 * cluster"), the leader's side. A group coordinator on another broker asks, per partition, for the
 * partition's summary and the lag figures of the committed offsets it holds (cluster/part_summary.h); this
 * broker answers for the partitions it leads: NOT_LEADER_OR_FOLLOWER for one it does not (server/route.h),
 * UNKNOWN_TOPIC_OR_PARTITION for one unknown, KAFKA_STORAGE_ERROR for an offline log. The figures come from
 * memory (cluster/part_summary.h gr_part_summary_local: no disk I/O on the network thread).
 * Bounds: at most GR_PART_SUMMARY_PARTITIONS_MAX partitions in all, GR_PART_SUMMARY_OFFSETS_MAX committed
 * offsets per partition, topic names of at most GR_PART_SUMMARY_TOPIC_BYTES_MAX bytes (Kafka's 249): past one
 * the connection is closed (only a broker sends this API, and Gregor's never past them). Never listed in
 * ApiVersions (api_versions.c). Served on every listener until issue #23 brings listener security (README,
 * Metrics).
 * ACLs: CLUSTER_ACTION on the cluster (Kafka's inter-broker rule), else CLUSTER_AUTHORIZATION_FAILED on every
 * partition.
 */
#include <errno.h>

#include "cluster/part_summary.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "common/time.h"
#include "server/route.h"

static int16_t summarize(struct gr_req *req, const struct gr_image_topic *it,
                         const struct gr_partition_summary_request_partition_summary_partition *qp,
                         struct gr_partition_summary_response_partition_summary_partition_result *rp)
{
    struct gr_route r;
    int16_t err = gr_route_partition(req->broker, it, qp->partition_index, false, &r);
    if (err) return err;
    if (gr_log_offline(r.log)) return GR_ERR_KAFKA_STORAGE_ERROR;
    struct gr_partition *part = gr_broker_partition(req->broker, r.log);
    int32_t n = qp->committed_offsets.count > 0 ? qp->committed_offsets.count : 0;
    struct gr_part_summary s = {.offsets = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *s.offsets)};
    if (!part || !s.offsets) return GR_ERR_UNKNOWN_SERVER_ERROR;
    int rc = gr_part_summary_local(part, r.log, qp->committed_offsets.items, n, gr_time_wall_ms(), &s);
    if (rc == -EROFS) return GR_ERR_KAFKA_STORAGE_ERROR;
    if (rc) return GR_ERR_UNKNOWN_SERVER_ERROR;
    rp->high_watermark = s.high_watermark;
    rp->last_stable_offset = s.last_stable_offset;
    rp->log_start_offset = s.log_start_offset;
    rp->log_end_offset = s.log_end_offset;
    rp->caught_up_offset = s.caught_up_offset;
    rp->rate = s.rate;
    rp->offsets.items = gr_arena_calloc(&req->arena, (size_t)s.offset_count + 1, sizeof *rp->offsets.items);
    if (!rp->offsets.items) return GR_ERR_UNKNOWN_SERVER_ERROR;
    rp->offsets.count = s.offset_count;
    for (int32_t i = 0; i < s.offset_count; i++) {
        struct gr_partition_summary_response_partition_summary_offset *o = &rp->offsets.items[i];
        gr_partition_summary_response_partition_summary_offset_init(o);
        o->committed_offset = s.offsets[i].committed;
        o->lag_bytes = s.offsets[i].lag.bytes;
        o->lag_seconds = s.offsets[i].lag.seconds;
        o->headroom_records = s.offsets[i].lag.headroom_records;
        o->headroom_seconds = s.offsets[i].lag.headroom_seconds;
    }
    return GR_ERR_NONE;
}

enum gr_handler_rc gr_handle_partition_summary(struct gr_req *req)
{
    struct gr_partition_summary_request *body = req->body;
    struct gr_partition_summary_response *resp = req->resp;
    if (!gr_part_summary_request_within_bounds(body)) return GR_HANDLER_CLOSE;
    /* broker to broker: CLUSTER_ACTION on the cluster, as Kafka asks of its inter-broker APIs */
    bool cluster_action = gr_req_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION);
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return GR_HANDLER_CLOSE;
    resp->topics.count = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct gr_partition_summary_request_partition_summary_topic *qt = &body->topics.items[i];
        struct gr_partition_summary_response_partition_summary_topic_result *rt = &resp->topics.items[i];
        gr_partition_summary_response_partition_summary_topic_result_init(rt);
        rt->name = qt->name;
        const struct gr_image_topic *it = gr_route_topic(req->broker, qt->name);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) return GR_HANDLER_CLOSE;
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_partition_summary_response_partition_summary_partition_result *rp =
                &rt->partitions.items[p];
            gr_partition_summary_response_partition_summary_partition_result_init(rp);
            rp->partition_index = qt->partitions.items[p].partition_index;
            rp->error_code = cluster_action ? summarize(req, it, &qt->partitions.items[p], rp)
                                            : GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        }
    }
    return GR_HANDLER_DONE;
}
