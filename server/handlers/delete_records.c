/*
 * delete_records.c: DeleteRecords (key 21), v0-v2. Moves a partition's log start offset up to `offset`
 * (-1 means the high watermark) and answers low_watermark (Kafka's ReplicaManager.deleteRecords with
 * Partition.deleteRecordsOnLeader and DelayedDeleteRecords). As in Kafka 4.1: an offset above the high
 * watermark, or negative other than -1, is OFFSET_OUT_OF_RANGE; an offset at or below the current log start
 * offset changes nothing here; internal topics are INVALID_TOPIC_EXCEPTION; unknown topics or partitions
 * UNKNOWN_TOPIC_OR_PARTITION; a topic whose cleanup.policy has compact without delete is POLICY_VIOLATION
 * and keeps its records (Kafka 4.4). Errors answer low_watermark -1. Authorization (KafkaApis): DELETE on the
 * topic, else its partitions TOPIC_AUTHORIZATION_FAILED, before existence, and nothing is deleted.
 *
 * The new log start offsets are made durable before the answer, without waiting on the network thread:
 * every partition that moves is begun (gr_log_delete_records_begin), ONE log-start-offset-checkpoint write
 * covering them all is queued to the storage housekeeping thread, and the request is parked until the log
 * start offset is durable on those partitions (gr_partition_wait_log_start_durable); the write's completion
 * (on_flushed) wakes them, the recheck sees the ticket durable and ends each partition (segments wholly below
 * the start are dropped, unlinked off the thread). A failed write answers KAFKA_STORAGE_ERROR with the log
 * start offset unchanged (storage/log.h says what the file may then hold); that wait's deadline is
 * timeout_ms, at least DELETE_RECORDS_WAIT_MS_MIN, then REQUEST_TIMED_OUT.
 *
 * Then, on a leader with followers, the answer waits until the low watermark (gr_partition_low_watermark:
 * the smallest log start offset among the leader and its live followers, which they report in their
 * fetches once they took the leader's) reaches the offset (gr_partition_wait_low_watermark), and carries
 * that low watermark. That wait is bounded by timeout_ms from the local deletion (Kafka's
 * DelayedDeleteRecords delay): then REQUEST_TIMED_OUT with the low watermark of the local deletion, as
 * Kafka answers it; a leader that became follower meanwhile answers NOT_LEADER_OR_FOLLOWER. One node, or a
 * leader alone: the low watermark is the log start offset, so nothing waits there.
 * Read next: server/handlers/delete_records_wait.c (the waits), storage/log.h (gr_log_delete_records_begin),
 * partition/partition.h (the low watermark).
 */
#include <errno.h>

#include "server/acls.h"
#include "server/handlers/delete_records.h"
#include "server/route.h"

/* Validates and begins one partition (Partition.deleteRecordsOnLeader). Returns an error code, or NONE
   with *phase: DR_CHECKPOINT when the checkpoint must be written first, DR_LOW when deleted here already
   but the low watermark is below the offset (a follower lags), else DR_DONE with *low filled. */
static int16_t delete_records(struct gr_req *req, const struct gr_image_topic *it, int32_t partition,
                              int64_t offset, int64_t *low, struct gr_log **log_out, int64_t *target_out,
                              enum dr_phase *phase)
{
    struct gr_route r; /* another broker's: NOT_LEADER_OR_FOLLOWER (server/route.h) */
    int16_t err = gr_route_partition(req->broker, it, partition, false, &r);
    if (err == GR_ERR_UNKNOWN_TOPIC_OR_PARTITION) return err;
    if (gr_topic_is_internal(it->name))
        return GR_ERR_INVALID_TOPIC_EXCEPTION; /* before leadership, as Kafka */
    if (err) return err;
    struct gr_log *log = r.log;
    struct gr_topic *t = r.topic;
    if (gr_log_offline(log)) return GR_ERR_KAFKA_STORAGE_ERROR;
    /* Kafka's Partition.deleteRecordsOnLeader: compact without delete keeps every record. */
    const struct gr_log_config *policy = gr_topic_policy(t);
    if (policy->compact_policy && !policy->delete_policy) return GR_ERR_POLICY_VIOLATION;
    struct gr_partition *part = gr_broker_partition(req->broker, log);
    if (gr_partition_role(part) != GR_PARTITION_LEADER) return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    int64_t hwm = gr_partition_visible_offset(part);
    int64_t target = offset == -1 ? hwm : offset;
    /* UnifiedLog.maybeIncrementLogStartOffset: never past the high watermark */
    if (target < 0 || target > hwm) return GR_ERR_OFFSET_OUT_OF_RANGE;
    int rc = gr_log_delete_records_begin(log, target);
    if (rc == -ERANGE) return GR_ERR_OFFSET_OUT_OF_RANGE;
    if (rc < 0) return GR_ERR_KAFKA_STORAGE_ERROR;
    *log_out = log;
    *target_out = target;
    *low = gr_partition_low_watermark(part);
    *phase = rc == 1 ? DR_CHECKPOINT : *low < target ? DR_LOW : DR_DONE;
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
    int32_t total = 0;
    for (int32_t i = 0; i < nt; i++)
        total += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    struct dr_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
    if (!st) return GR_HANDLER_CLOSE;
    st->waits = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->waits);
    if (!st->waits) return GR_HANDLER_CLOSE;
    st->timeout_ms = body->timeout_ms > 0 ? body->timeout_ms : 0;
    for (int32_t i = 0; i < nt; i++) {
        struct gr_delete_records_request_delete_records_topic *qt = &body->topics.items[i];
        struct gr_delete_records_response_delete_records_topic_result *rt = &resp->topics.items[i];
        gr_delete_records_response_delete_records_topic_result_init(rt);
        rt->name = qt->name;
        const struct gr_image_topic *t = gr_route_topic(req->broker, qt->name);
        bool denied = !gr_req_authorized(req, GR_ACL_OP_DELETE, GR_ACL_RES_TOPIC, qt->name);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) {
            gr_delete_records_abandon(req, st, -ENOMEM);
            return GR_HANDLER_CLOSE;
        }
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_delete_records_response_delete_records_partition_result *rp = &rt->partitions.items[p];
            gr_delete_records_response_delete_records_partition_result_init(rp);
            rp->partition_index = qt->partitions.items[p].partition_index;
            rp->low_watermark = -1;
            struct gr_log *log = NULL;
            int64_t target = -1;
            enum dr_phase phase = DR_DONE;
            rp->error_code = denied
                                 ? GR_ERR_TOPIC_AUTHORIZATION_FAILED
                                 : delete_records(req, t, rp->partition_index, qt->partitions.items[p].offset,
                                                  &rp->low_watermark, &log, &target, &phase);
            if (phase != DR_DONE) st->waits[st->count++] = (struct dr_wait){log, target, rp, phase, NULL};
            st->checkpointing = st->checkpointing || phase == DR_CHECKPOINT;
        }
    }
    return gr_delete_records_start(req, st);
}
