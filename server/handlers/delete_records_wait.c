/*
 * delete_records_wait.c: the waits of a DeleteRecords request (delete_records.c says what it answers): until
 * the log-start-offset checkpoint is durable (gr_req_wait_log_start; its deadline timeout_ms, at least
 * DELETE_RECORDS_WAIT_MS_MIN), then, on a leader with followers, until the low watermark reaches each
 * partition's offset (gr_req_wait_low_watermark; its deadline timeout_ms from the local deletion, Kafka's
 * DelayedDeleteRecords). Each re-check moves every partition as far as it can go (dr_advance); the request
 * is finished once every partition is answered, or by the deadline.
 * Read next: partition/partition.h (gr_partition_wait_low_watermark), server/broker.h (the request waits).
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "server/handlers/delete_records.h"

#define DELETE_RECORDS_WAIT_MS_MIN 1000 /* a client's timeout_ms 0 must not time out a write of a few ms */

/* Ends every partition waiting for the checkpoint with its outcome `err` (0 durable) or `timed_out`: a
   partition deleted here goes on to the low watermark wait (its answer's low_watermark is the one now, kept
   when the wait times out, as Kafka's DeleteRecordsPartitionStatus), or is answered. */
static void end_checkpoint(struct gr_req *req, struct dr_state *st, int err, bool timed_out)
{
    st->checkpointing = false;
    for (int i = 0; i < st->count; i++) {
        struct dr_wait *w = &st->waits[i];
        if (w->phase != DR_CHECKPOINT) continue;
        int rc = gr_log_delete_records_end(w->log, w->offset, err);
        if (rc == 0) {
            w->rp->low_watermark = gr_partition_low_watermark(gr_broker_partition(req->broker, w->log));
            w->phase = w->rp->low_watermark < w->offset ? DR_LOW : DR_DONE;
            w->rw = NULL; /* its checkpoint wait is over (or about to fire: a harmless re-check) */
            continue;
        }
        w->phase = DR_DONE;
        w->rp->low_watermark = -1;
        if (timed_out) {
            w->rp->error_code = GR_ERR_REQUEST_TIMED_OUT;
            continue;
        }
        GR_ERROR("DeleteRecords on %s-%d to offset %lld: %s", gr_topic_name(gr_log_topic(w->log)),
                 gr_log_partition(w->log), (long long)w->offset, strerror(-rc));
        w->rp->error_code = GR_ERR_KAFKA_STORAGE_ERROR;
    }
}

/* DelayedDeleteRecords.tryComplete for one partition in the low watermark wait: answered when the low
   watermark reached the offset (with it), or the partition is offline (KAFKA_STORAGE_ERROR) or no longer
   led here (NOT_LEADER_OR_FOLLOWER), both with low_watermark -1. Returns true when answered. */
static bool low_check(struct gr_req *req, struct dr_wait *w)
{
    struct gr_partition *part = gr_broker_partition(req->broker, w->log);
    int16_t err = gr_log_offline(w->log)                           ? GR_ERR_KAFKA_STORAGE_ERROR
                  : gr_partition_role(part) != GR_PARTITION_LEADER ? GR_ERR_NOT_LEADER_OR_FOLLOWER
                                                                   : GR_ERR_NONE;
    int64_t low = err ? -1 : gr_partition_low_watermark(part);
    if (!err && low < w->offset) return false;
    w->phase = DR_DONE;
    w->rp->error_code = err;
    w->rp->low_watermark = low;
    return true;
}

/* Moves every partition as far as it can go now. Returns true when every one is answered. */
static bool dr_advance(struct gr_req *req, struct dr_state *st)
{
    if (st->checkpointing) {
        int r = gr_store_checkpoint_poll(req->broker->store, st->ticket);
        if (r == 0) return false;
        end_checkpoint(req, st, r > 0 ? 0 : r, false);
    }
    bool all = true;
    for (int i = 0; i < st->count; i++)
        if (st->waits[i].phase == DR_LOW && !low_check(req, &st->waits[i])) all = false;
    return all;
}

/* Queues the wait of every partition still waiting whose wait is not queued (never queued, or done while
   the re-check saw its condition not hold): until the checkpoint is durable, then until the low watermark
   reaches its offset. Returns true when one held at once (the caller re-checks). */
static bool queue_waits(struct gr_req *req, struct dr_state *st)
{
    bool held = false;
    for (int i = 0; i < st->count; i++) {
        struct dr_wait *w = &st->waits[i];
        if (w->phase == DR_DONE || (w->rw && gr_partition_waiting(&w->rw->w))) continue;
        int rc = w->phase == DR_CHECKPOINT ? gr_req_wait_log_start(req, w->log, st->ticket)
                                           : gr_req_wait_low_watermark(req, w->log, w->offset);
        w->rw =
            rc == 1 ? req->waits : NULL; /* req_wait puts its new wait first; out of memory: the deadline */
        held = held || rc == 0;
    }
    return held;
}

static bool dr_recheck(struct gr_req *req);
static void dr_expire(struct gr_req *req);

/* Arms the deadline of the phase the request enters: the checkpoint's (timeout_ms, at least
   DELETE_RECORDS_WAIT_MS_MIN), or the low watermark's (timeout_ms from the local deletion, as Kafka's
   DelayedDeleteRecords). */
static void dr_arm(struct gr_req *req, const struct dr_state *st)
{
    int64_t ms = st->timeout_ms;
    if (st->checkpointing && ms < DELETE_RECORDS_WAIT_MS_MIN) ms = DELETE_RECORDS_WAIT_MS_MIN;
    gr_req_await(req, &(struct gr_await){.recheck = dr_recheck, .expire = dr_expire, .timeout_ms = ms});
}

static bool dr_recheck(struct gr_req *req)
{
    struct dr_state *st = req->hstate;
    for (int rounds = 0; rounds < 4; rounds++) { /* a wait that held at once: look again (bounded) */
        bool was_checkpointing = st->checkpointing;
        if (dr_advance(req, st)) {
            gr_req_finish(req);
            return true;
        }
        if (was_checkpointing && !st->checkpointing) dr_arm(req, st); /* the low watermark phase begins */
        if (!queue_waits(req, st)) return false;
    }
    return false; /* the deadline ends it */
}

static void dr_expire(struct gr_req *req)
{
    struct dr_state *st = req->hstate;
    if (st->checkpointing) {
        int r = gr_store_checkpoint_poll(req->broker->store, st->ticket);
        end_checkpoint(req, st, r > 0 ? 0 : r < 0 ? r : -ETIMEDOUT, r == 0);
    }
    for (int i = 0; i < st->count; i++) {
        struct dr_wait *w = &st->waits[i];
        if (w->phase == DR_LOW && !low_check(req, w)) /* low_watermark: the one at the local deletion */
            w->rp->error_code = GR_ERR_REQUEST_TIMED_OUT;
    }
    gr_req_finish(req);
}

enum gr_handler_rc gr_delete_records_start(struct gr_req *req, struct dr_state *st)
{
    if (st->checkpointing) {
        int err = gr_store_log_start_checkpoint_async(req->broker->store, &st->ticket);
        if (err < 0) end_checkpoint(req, st, err, false);
    }
    if (dr_advance(req, st)) return GR_HANDLER_DONE; /* also a checkpoint written inline (no flushers) */
    req->hstate = st;
    dr_arm(req, st);
    if (queue_waits(req, st)) dr_recheck(req); /* held meanwhile */
    return GR_HANDLER_WAIT;
}

void gr_delete_records_abandon(struct gr_req *req, struct dr_state *st, int err)
{
    end_checkpoint(req, st, err, false);
}
