/*
 * delete_records.c: DeleteRecords (key 21), v0-v2. Moves a partition's log start offset up to `offset`
 * (-1 means the high watermark) and answers low_watermark = the new log start offset. As in Kafka 4.1:
 * an offset above the high watermark, or negative other than -1, is OFFSET_OUT_OF_RANGE; an offset at or
 * below the current log start offset changes nothing and answers the current log start offset; internal
 * topics are INVALID_TOPIC_EXCEPTION; unknown topics or partitions UNKNOWN_TOPIC_OR_PARTITION; a topic whose
 * cleanup.policy has compact without delete is POLICY_VIOLATION and keeps its records (Kafka 4.4). Errors
 * answer low_watermark -1.
 *
 * The new log start offsets are made durable before the answer, without waiting on the network thread:
 * every partition that moves is begun (gr_log_delete_records_begin), ONE log-start-offset-checkpoint write
 * covering them all is queued to the storage housekeeping thread, and the request is parked until the log
 * start offset is durable on those partitions (gr_partition_wait_log_start_durable); the write's completion
 * (on_flushed) wakes them, the recheck sees the ticket durable and ends each partition (segments wholly below
 * the start are dropped, unlinked off the thread). A failed write answers KAFKA_STORAGE_ERROR with the log
 * start offset unchanged (storage/log.h says what the file may then hold). One node means no replica to wait
 * for: timeout_ms (at least DELETE_RECORDS_WAIT_MS_MIN) only bounds the wait for the disk, then
 * REQUEST_TIMED_OUT. Read next: storage/log.h (gr_log_delete_records_begin).
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

#define DELETE_RECORDS_WAIT_MS_MIN 1000 /* a client's timeout_ms 0 must not time out a write of a few ms */

/* One partition whose log start offset waits for the checkpoint. */
struct dr_wait {
    struct gr_log *log;
    int64_t offset;
    struct gr_delete_records_response_delete_records_partition_result *rp;
};

struct dr_state {
    int64_t ticket;
    int count;
    struct dr_wait *waits;
};

/* Validates and begins one partition. Returns an error code, or NONE with *pending set when the checkpoint
   must be written first (otherwise low_watermark is already filled). */
static int16_t delete_records(struct gr_req *req, const struct gr_image_topic *it, int32_t partition,
                              int64_t offset, int64_t *low, struct gr_log **pending, int64_t *target_out)
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
    int64_t hwm = gr_partition_visible_offset(gr_broker_partition(req->broker, log));
    int64_t target = offset == -1 ? hwm : offset;
    if (target < 0 || target > hwm) return GR_ERR_OFFSET_OUT_OF_RANGE;
    int rc = gr_log_delete_records_begin(log, target);
    if (rc == -ERANGE) return GR_ERR_OFFSET_OUT_OF_RANGE;
    if (rc < 0) return GR_ERR_KAFKA_STORAGE_ERROR;
    if (rc == 1) {
        *pending = log;
        *target_out = target;
    }
    *low = gr_log_start_offset(log);
    return GR_ERR_NONE;
}

/* Ends every waiting partition with the checkpoint's outcome `err` (0 durable) or `timed_out`. */
static void end_all(struct gr_req *req, struct dr_state *st, int err, bool timed_out)
{
    for (int i = 0; i < st->count; i++) {
        struct dr_wait *w = &st->waits[i];
        int rc = gr_log_delete_records_end(w->log, w->offset, err);
        if (rc == 0) {
            w->rp->low_watermark = gr_log_start_offset(w->log);
            continue;
        }
        w->rp->low_watermark = -1;
        if (timed_out) {
            w->rp->error_code = GR_ERR_REQUEST_TIMED_OUT;
            continue;
        }
        GR_ERROR("DeleteRecords on %s-%d to offset %lld: %s", gr_topic_name(gr_log_topic(w->log)),
                 gr_log_partition(w->log), (long long)w->offset, strerror(-rc));
        w->rp->error_code = GR_ERR_KAFKA_STORAGE_ERROR;
    }
    st->count = 0;
    (void)req;
}

static bool dr_recheck(struct gr_req *req)
{
    struct dr_state *st = req->hstate;
    int r = gr_store_checkpoint_poll(req->broker->store, st->ticket);
    if (r == 0) return false;
    end_all(req, st, r > 0 ? 0 : r, false);
    gr_req_finish(req);
    return true;
}

static void dr_expire(struct gr_req *req)
{
    struct dr_state *st = req->hstate;
    int r = gr_store_checkpoint_poll(req->broker->store, st->ticket);
    end_all(req, st, r > 0 ? 0 : r < 0 ? r : -ETIMEDOUT, r == 0);
    gr_req_finish(req);
}

enum gr_handler_rc gr_handle_delete_records(struct gr_req *req)
{
    struct gr_delete_records_request *body = req->body;
    struct gr_delete_records_response *resp = req->resp;
    struct gr_broker *b = req->broker;
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
    for (int32_t i = 0; i < nt; i++) {
        struct gr_delete_records_request_delete_records_topic *qt = &body->topics.items[i];
        struct gr_delete_records_response_delete_records_topic_result *rt = &resp->topics.items[i];
        gr_delete_records_response_delete_records_topic_result_init(rt);
        rt->name = qt->name;
        const struct gr_image_topic *t = gr_route_topic(req->broker, qt->name);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) {
            end_all(req, st, -ENOMEM, false);
            return GR_HANDLER_CLOSE;
        }
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_delete_records_response_delete_records_partition_result *rp = &rt->partitions.items[p];
            gr_delete_records_response_delete_records_partition_result_init(rp);
            rp->partition_index = qt->partitions.items[p].partition_index;
            rp->low_watermark = -1;
            struct gr_log *pending = NULL;
            int64_t target = -1;
            rp->error_code = delete_records(req, t, rp->partition_index, qt->partitions.items[p].offset,
                                            &rp->low_watermark, &pending, &target);
            if (pending) st->waits[st->count++] = (struct dr_wait){pending, target, rp};
        }
    }
    if (st->count == 0) return GR_HANDLER_DONE;
    int err = gr_store_log_start_checkpoint_async(b->store, &st->ticket);
    if (err < 0) {
        end_all(req, st, err, false);
        return GR_HANDLER_DONE;
    }
    int r = gr_store_checkpoint_poll(b->store, st->ticket);
    if (r != 0) { /* written inline (no flusher threads) */
        end_all(req, st, r > 0 ? 0 : r, false);
        return GR_HANDLER_DONE;
    }
    req->hstate = st;
    int64_t wait_ms =
        body->timeout_ms > DELETE_RECORDS_WAIT_MS_MIN ? body->timeout_ms : DELETE_RECORDS_WAIT_MS_MIN;
    gr_req_await(req, &(struct gr_await){.recheck = dr_recheck, .expire = dr_expire, .timeout_ms = wait_ms});
    /* until the log start offset is durable, on every moved partition (out of memory: the deadline ends it)
     */
    for (int i = 0; i < st->count; i++)
        if (gr_req_wait_log_start(req, st->waits[i].log, st->ticket) == 0) {
            dr_recheck(req); /* written meanwhile: finishes it */
            break;
        }
    return GR_HANDLER_WAIT;
}
