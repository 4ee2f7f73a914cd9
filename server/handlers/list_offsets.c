/*
 * list_offsets.c: ListOffsets (key 2), v1-v9. Special timestamps: -1 latest (the high watermark; the last
 * stable offset for read_committed, equal without transactions), -2 earliest (log start offset), -3 the
 * record with the largest timestamp (KIP-734), -4 earliest local (log start offset, KIP-405), -5 latest
 * tiered (none without tiered storage: offset -1). A timestamp >= 0 finds the first record with a
 * timestamp at or after it; when there is none the answer is offset -1, timestamp -1 (never a real
 * offset with timestamp -1, which Java's offsetsForTimes rejects). Nothing at or above the high watermark
 * is returned.
 */
#include "server/handlers/handlers.h"

static void answer(struct gr_req *req, struct gr_log *log, int64_t ts,
                   struct gr_list_offsets_response_list_offsets_partition_response *rp)
{
    int64_t hwm = gr_broker_update_hwm(req->broker, log);
    int64_t off = -1, t = -1;
    int32_t epoch = -1;
    switch (ts) {
    case -1:
        off = hwm;
        epoch = gr_log_leader_epoch(log);
        break;
    case -2:
    case -4:
        off = gr_log_start_offset(log);
        epoch = gr_log_epoch_for_offset(log, off);
        if (epoch < 0) epoch = gr_log_leader_epoch(log);
        break;
    case -3:
        if (gr_log_max_timestamp(log, hwm, &off, &t, &epoch)) off = t = -1, epoch = -1;
        break;
    default:
        if (ts < 0) break; /* -5 and other tiered-storage lookups: nothing tiered */
        if (gr_log_offset_for_time(log, ts, hwm, &off, &t, &epoch)) off = t = -1, epoch = -1;
        break;
    }
    rp->offset = off;
    rp->timestamp = t;
    rp->leader_epoch = epoch;
}

enum gr_handler_rc gr_handle_list_offsets(struct gr_req *req)
{
    struct gr_list_offsets_request *body = req->body;
    struct gr_list_offsets_response *resp = req->resp;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    resp->topics.count = nt;
    for (int32_t i = 0; i < nt; i++) {
        struct gr_list_offsets_request_list_offsets_topic *qt = &body->topics.items[i];
        struct gr_list_offsets_response_list_offsets_topic_response *rt = &resp->topics.items[i];
        gr_list_offsets_response_list_offsets_topic_response_init(rt);
        rt->name = qt->name;
        struct gr_topic *t = gr_topic_lookup(req->broker, qt->name);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_list_offsets_request_list_offsets_partition *qp = &qt->partitions.items[p];
            struct gr_list_offsets_response_list_offsets_partition_response *rp = &rt->partitions.items[p];
            gr_list_offsets_response_list_offsets_partition_response_init(rp);
            rp->partition_index = qp->partition_index;
            struct gr_log *log = t ? gr_topic_log(t, qp->partition_index) : NULL;
            if (!log) {
                rp->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            if (qp->current_leader_epoch >= 0 && qp->current_leader_epoch != gr_log_leader_epoch(log)) {
                rp->error_code = qp->current_leader_epoch < gr_log_leader_epoch(log) ? GR_ERR_FENCED_LEADER_EPOCH
                                                                                      : GR_ERR_UNKNOWN_LEADER_EPOCH;
                continue;
            }
            if (gr_log_offline(log)) {
                rp->error_code = GR_ERR_KAFKA_STORAGE_ERROR;
                continue;
            }
            answer(req, log, qp->timestamp, rp);
        }
    }
    return GR_HANDLER_DONE;
}
