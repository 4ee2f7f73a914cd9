/*
 * fetch.c: Fetch (key 1), v4-v18, topics by name before v13, by id from v13. Each partition's read is
 * gr_partition_fetch (partition/read.c: KIP-74 budget, epochs, zstd rule, whole batches below the visible
 * offset, the LSO for read_committed, as a file range for sendfile); empty (not null) records when none. Long
 * poll: parked until min_bytes are there, data arrives (gr_req_wait_data; the LSO moves for read_committed)
 * or max_wait_ms passes. Sessions: fetch_session.h. Cold reads go through req->cold (partition/cold.c):
 * lookups wait for a pool round, the fill is redone; ranges not in the page cache are read in once before
 * answering. aborted_transactions: null for read_uncommitted, else handlers/fetch_aborted.c. Unknown topic,
 * id or partition: -1 offsets, empty aborted list; a partition error (range, epoch, zstd, storage): -1
 * offsets, null aborted list. Not led here: NOT_LEADER_OR_FOLLOWER, v12+ CurrentLeader, v16+ NodeEndpoints
 * (server/route.h). DivergingEpoch: no records, at once (KIP-320). A log not made yet: empty, offsets 0
 * (server/logwait.h). Followers: partition/read.c. ACLs: handlers/authorize.c.
 */
#include "server/handlers/handlers.h"
#include "server/route.h"

struct fetch_state {
    int64_t bytes; /* bytes gathered by the last fill */
    bool error;    /* some partition has an error or a diverging epoch (KIP-320): answer at once */
    bool final;    /* answer after the next fill whatever it finds (no long poll, or the deadline passed) */
    bool waiting_logs;  /* registered on its partitions' wait lists */
    bool no_memory;     /* a fill ran out of request memory: the connection is closed */
    bool filled;        /* a fill ran: later ones read again without recording a follower's state */
    int32_t replica_id; /* Kafka's FetchRequest.replicaId: v15+ ReplicaState's, else ReplicaId; -1 consumer */
    int64_t replica_epoch;    /* v15+ ReplicaState.ReplicaEpoch, else -1 */
    bool *denied;             /* per requested topic: TOPIC_AUTHORIZATION_FAILED (gr_fetch_topics_denied) */
    struct gr_fsess_req sess; /* its fetch session (KIP-227): may rewrite body->topics, or answer at once */
};

/* Fills one partition of topic `it` (NULL: unknown); out of request memory it sets st->no_memory. */
static void fill_partition(struct gr_req *req, const struct gr_image_topic *it,
                           struct gr_fetch_request_fetch_partition *qp,
                           struct gr_fetch_response_partition_data *rp, struct gr_fetch_budget *bud)
{
    struct fetch_state *st = req->hstate;
    struct gr_route r;
    if ((rp->error_code =
             gr_route_partition(req->broker, it, qp->partition, req->hdr.request_api_version >= 13, &r))) {
        if (gr_route_fetch_pending(rp, &r)) return; /* led here, its log not made yet */
        gr_route_fetch_leader(req, rp, &r);
        st->error = true;
        return;
    }
    struct gr_fetch_read rd = {.fetch_offset = qp->fetch_offset,
                               .current_leader_epoch = qp->current_leader_epoch,
                               .partition_max_bytes = qp->partition_max_bytes,
                               .version = req->hdr.request_api_version,
                               .last_fetched_epoch = qp->last_fetched_epoch,
                               .replica_id = st->replica_id,
                               .replica_epoch = st->replica_epoch,
                               .replica_log_start_offset = qp->log_start_offset,
                               .update_fetch_state = !st->filled,
                               .read_committed =
                                   ((struct gr_fetch_request *)req->body)->isolation_level == 1};
    rp->aborted_transactions.count = rd.read_committed ? 0 : -1;
    int rc = gr_partition_fetch(gr_broker_partition(req->broker, r.log), &req->cold, bud, &rd);
    rp->high_watermark = rd.high_watermark;
    rp->last_stable_offset = rd.last_stable_offset;
    rp->log_start_offset = rd.log_start_offset;
    if (rd.diverging_epoch >= 0) { /* KIP-320: the fetcher truncates first; answered at once */
        rp->diverging_epoch.epoch = rd.diverging_epoch;
        rp->diverging_epoch.end_offset = rd.diverging_end_offset;
        st->error = true;
    } else if (rc && rc != GR_PARTITION_COLD) { /* Kafka's read-error answer (see the file comment) */
        rp->error_code = (int16_t)rc;
        rp->high_watermark = rp->last_stable_offset = rp->log_start_offset = -1;
        rp->aborted_transactions.count = -1;
        gr_route_fetch_leader(req, rp, &r);
        st->error = true;
    } else if (rd.slice.bytes > 0 && gr_req_own_slice(req, &rd.slice) < 0) { /* cold or none: bytes 0 */
        gr_log_slice_release(&rd.slice);
        st->no_memory = true;
    } else if (rd.slice.bytes > 0) {
        rp->records = gr_records_file(rd.slice.fd, rd.slice.file_pos, (int32_t)rd.slice.bytes);
        st->bytes += rd.slice.bytes;
        if (!gr_fetch_fill_aborted(req, r.log, &rd, rp)) st->no_memory = true;
    }
}

/* Computes the whole response from the logs' current state; out of request memory it sets st->no_memory
   (try_answer then closes the connection: never a write through NULL). */
static void fetch_fill(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct gr_fetch_response *resp = req->resp;
    struct fetch_state *st = req->hstate;
    gr_req_release_slices(req);
    gr_cold_reset(&req->cold);
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    if (!resp->responses.items && /* the arrays are made once per request, by the first fill */
        !(resp->responses.items =
              gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *resp->responses.items))) {
        st->no_memory = true;
        return;
    }
    resp->responses.count = ntopics;
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, body->max_bytes, req->broker->cfg.settings.fetch_max_bytes);
    st->bytes = 0;
    st->error = false;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_fetch_request_fetch_topic *qt = &body->topics.items[i];
        struct gr_fetch_response_fetchable_topic_response *rt = &resp->responses.items[i];
        struct gr_fetch_response_partition_data *parts = rt->partitions.items;
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        if (!parts && !(parts = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *parts))) {
            st->no_memory = true;
            return;
        }
        gr_fetch_response_fetchable_topic_response_init(rt);
        rt->partitions.items = parts;
        rt->topic = qt->topic;
        rt->topic_id = qt->topic_id;
        const struct gr_image_topic *t =
            gr_route_topic_by(req->broker, req->hdr.request_api_version >= 13, qt->topic, qt->topic_id.b);
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            gr_fetch_partition_init(&parts[p], qt->partitions.items[p].partition, st->denied[i]);
            if (!st->denied[i]) fill_partition(req, t, &qt->partitions.items[p], &parts[p], &bud);
            if (st->no_memory) return;
        }
    }
    st->filled = true;
    if (st->error) gr_route_fetch_endpoints(req); /* the leaders' addresses (v16+) */
}

/* After a fill: answers, waits for a cold-read round (lookups first; then, once, the data ranges not in
   the page cache), or returns false (keep waiting for data). */
static bool try_answer(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct fetch_state *st = req->hstate;
    if (st->no_memory) { /* its slices and pins are released when it is freed */
        gr_req_complete(req, GR_HANDLER_CLOSE);
        return true;
    }
    bool cold = gr_cold_pending(&req->cold); /* lookups first */
    if (!cold && !(st->error || st->bytes >= body->min_bytes || st->final)) return false;
    for (struct gr_req_slice *s = req->slices; !cold && s; s = s->next)
        gr_cold_check_range(&req->cold, &s->slice); /* then, once, the ranges not in the page cache */
    if (gr_cold_pending(&req->cold))
        gr_cold_wait(&req->cold);
    else
        gr_fsess_finish(req, &st->sess); /* the session's part of the answer, then gr_req_finish */
    return true;
}

/* Fills, then answers, waits for a cold-read round, or keeps waiting (parked) for data. Returns true when
   the request was answered or a round started. */
static bool fetch_step(struct gr_req *req)
{
    fetch_fill(req);
    if (try_answer(req)) return true;
    gr_req_release_slices(req);
    struct fetch_state *st = req->hstate;
    if (!st->waiting_logs) { /* until data past what it may read now, on every partition it names */
        st->waiting_logs = true;
        const struct gr_fetch_request *q = req->body; /* read_committed waits until the LSO moves */
        gr_route_fetch_wait(req, gr_fetch_isolation_for(st->replica_id, q->isolation_level));
    }
    return false;
}

/* The engine's round ended (what it opened or loaded stays pinned for the request; the data ranges are in
   the page cache): fill again, as the state may have moved meanwhile. */
static void fetch_cold_done(struct gr_cold *c)
{
    fetch_step(c->ctx);
}

static bool fetch_recheck(struct gr_req *req)
{
    return gr_cold_waiting(&req->cold) ? false : fetch_step(req); /* else the round's done hook goes on */
}

static void fetch_expire(struct gr_req *req)
{
    ((struct fetch_state *)req->hstate)->final = true;
    if (!gr_cold_waiting(&req->cold)) fetch_step(req); /* final: answers or hands off */
}

enum gr_handler_rc gr_handle_fetch(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct fetch_state *st = req->hstate = gr_arena_calloc(&req->arena, 1, sizeof(struct fetch_state));
    if (!st) return GR_HANDLER_CLOSE;
    gr_cold_init(&req->cold, req->broker->parts, req->broker->iopool, fetch_cold_done, req);
    bool v15 = req->hdr.request_api_version >= 15;
    st->replica_id = v15 ? body->replica_state.replica_id : body->replica_id;
    st->replica_epoch = v15 ? body->replica_state.replica_epoch : -1;
    st->final = gr_fsess_start(req, &st->sess, st->replica_id >= 0) || body->max_wait_ms <= 0; /* KIP-227 */
    /* every topic denied: nothing to wait for, answered at once (as Kafka) */
    if (!(st->denied = gr_fetch_topics_denied(req, st->replica_id, &st->final))) return GR_HANDLER_CLOSE;
    /* Declared from the start (a parked request is freed only once finished; finishing it unparks it). */
    gr_req_await(req, &(struct gr_await){.recheck = fetch_recheck,
                                         .expire = st->final ? NULL : fetch_expire,
                                         .timeout_ms = body->max_wait_ms});
    fetch_step(req); /* answered inside, a cold-read round goes on, or it waits for data */
    return GR_HANDLER_WAIT;
}
