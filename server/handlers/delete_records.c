/*
 * delete_records.c: DeleteRecords (key 21), v0-v2. Moves a partition's log start offset up to `offset`
 * (-1 means the high watermark) and answers low_watermark = the new log start offset. As in Kafka 4.1:
 * an offset above the high watermark, or negative other than -1, is OFFSET_OUT_OF_RANGE; an offset at or
 * below the current log start offset changes nothing and answers the current log start offset; internal
 * topics are INVALID_TOPIC_EXCEPTION; unknown topics or partitions UNKNOWN_TOPIC_OR_PARTITION. Errors
 * answer low_watermark -1. Storage writes the log-start-offset checkpoint durably before returning and
 * drops whole segments below the new start; one node means no replica to wait for, so timeout_ms is unused.
 * Read next: storage/log.h (gr_log_delete_records).
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "server/handlers/handlers.h"

static int16_t delete_records(struct gr_req *req, struct gr_topic *t, int32_t partition, int64_t offset,
                              int64_t *low)
{
    struct gr_log *log = t ? gr_topic_log(t, partition) : NULL;
    if (!log) return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (gr_topic_is_internal(gr_topic_name(t))) return GR_ERR_INVALID_TOPIC_EXCEPTION;
    if (gr_log_offline(log)) return GR_ERR_KAFKA_STORAGE_ERROR;
    int64_t hwm = gr_broker_update_hwm(req->broker, log);
    int64_t target = offset == -1 ? hwm : offset;
    if (target < 0 || target > hwm) return GR_ERR_OFFSET_OUT_OF_RANGE;
    int rc = gr_log_delete_records(log, target);
    if (rc == -ERANGE) return GR_ERR_OFFSET_OUT_OF_RANGE;
    if (rc) {
        GR_ERROR("DeleteRecords on %s-%d to offset %lld: %s", gr_topic_name(t), partition, (long long)target,
                 strerror(-rc));
        return GR_ERR_KAFKA_STORAGE_ERROR;
    }
    *low = gr_log_start_offset(log);
    return GR_ERR_NONE;
}

enum gr_handler_rc gr_handle_delete_records(struct gr_req *req)
{
    struct gr_delete_records_request *body = req->body;
    struct gr_delete_records_response *resp = req->resp;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return GR_HANDLER_CLOSE;
    resp->topics.count = nt;
    for (int32_t i = 0; i < nt; i++) {
        struct gr_delete_records_request_delete_records_topic *qt = &body->topics.items[i];
        struct gr_delete_records_response_delete_records_topic_result *rt = &resp->topics.items[i];
        gr_delete_records_response_delete_records_topic_result_init(rt);
        rt->name = qt->name;
        struct gr_topic *t = gr_topic_lookup(req->broker, qt->name);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) return GR_HANDLER_CLOSE;
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_delete_records_response_delete_records_partition_result *rp = &rt->partitions.items[p];
            gr_delete_records_response_delete_records_partition_result_init(rp);
            rp->partition_index = qt->partitions.items[p].partition_index;
            rp->low_watermark = -1;
            rp->error_code = delete_records(req, t, rp->partition_index, qt->partitions.items[p].offset,
                                            &rp->low_watermark);
        }
    }
    return GR_HANDLER_DONE;
}
