/*
 * list_offsets.c: ListOffsets (key 2), v1-v11. Special timestamps: -1 latest (the high watermark; the last
 * stable offset for read_committed), -2 earliest (log start offset), -3 the largest timestamp (KIP-734, v7+),
 * -4 earliest local (KIP-405, v8+), -5 latest tiered (KIP-1005, v9+), -6 earliest pending upload (KIP-1023,
 * v11+): none without tiered storage, so offset -1, timestamp -1, as Kafka 4.4. A special timestamp the
 * version does not know, or any other negative one, is UNSUPPORTED_VERSION (Kafka 4.4). v10's timeout_ms
 * bounds remote-storage lookups (none here). A timestamp >= 0 finds the first record at or after it, else
 * offset -1, timestamp -1 (never a real offset with timestamp -1, which Java's offsetsForTimes rejects).
 * Nothing at or above the high watermark is returned. A partition named twice answers one entry,
 * INVALID_REQUEST (Kafka's duplicatePartitions), a topic named twice one topic entry.
 *
 * The per-partition answer is the partition layer's (gr_partition_list_offset); its lookups by time run
 * through the request's cold-read engine (req->cold): a file to open, indexes to load or a page to read parks
 * the request until the pool round ends (gr_cold_wait), then the answer is recomputed. A partition led here
 * whose log is not made yet waits for it (server/logwait.h) at most LO_LOG_WAIT_MS, then answers
 * NOT_LEADER_OR_FOLLOWER (retriable). Read next: partition/read.c (the lookups), partition/cold.c.
 * ACLs: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED per partition (handlers/authorize.c).
 */
#include "server/handlers/handlers.h"
#include "server/route.h"

#define LO_LOG_WAIT_MS 5000

/* A request partition's place in the answer when the request names a partition twice (see lo_plan). */
enum lo_mark { LO_ANSWER = 0, LO_DUPLICATE, LO_REPEAT };

struct lo_state {
    bool allocated; /* the response arrays exist (allocated by the first fill) */
    /* One entry per distinct topic and partition (Kafka's ReplicaManager.fetchOffset), a partition named
       twice INVALID_REQUEST. Set by lo_plan only when the request repeats one; NULL: the answer mirrors the
       request */
    int32_t *out_topic; /* per request topic: its response topic */
    uint8_t *mark;      /* per request partition, in request order: enum lo_mark */
    int32_t nt_out;     /* response topics */
    /* Only topics with partitions to answer get an entry (Kafka): fill lays out every response topic in
       `all`, then copies those with partitions to `shown`, which the response points at (arena, once). */
    struct gr_list_offsets_response_list_offsets_topic_response *all, *shown;
};

/* Finds repeated topic names and partitions (ListOffsetsRequest.duplicatePartitions; gr_req_keys_first, in
   O(n log n): a request may name thousands of partitions) and, when there are any, sets st->out_topic,
   st->mark and st->nt_out: the first occurrence of a repeated partition answers INVALID_REQUEST, later ones
   get no entry, and a repeated topic name shares the first one's entry. Returns false when out of memory. */
static bool lo_plan(struct gr_req *req, struct lo_state *st)
{
    struct gr_list_offsets_request *body = req->body;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0, total = 0;
    for (int32_t i = 0; i < nt; i++)
        total += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    struct gr_req_key *keys =
        gr_arena_calloc(&req->arena, (size_t)(nt > total ? nt : total) + 1, sizeof *keys);
    uint8_t *mark = gr_arena_calloc(&req->arena, (size_t)total + 1, 1);
    if (!keys || !mark) return false;
    for (int32_t i = 0; i < nt; i++)
        keys[i] = (struct gr_req_key){body->topics.items[i].name, -1, i};
    bool *rep;
    int32_t *out_topic = gr_req_keys_first(req, keys, nt, &rep);
    if (!out_topic) return false;
    bool repeats = false;
    for (int32_t i = 0; i < nt; i++)
        repeats |= out_topic[i] != i;
    int32_t n = 0;
    for (int32_t i = 0; i < nt; i++)
        for (int32_t p = 0; p < body->topics.items[i].partitions.count; p++, n++)
            keys[n] = (struct gr_req_key){body->topics.items[i].name,
                                          body->topics.items[i].partitions.items[p].partition_index, n};
    int32_t *first = gr_req_keys_first(req, keys, n, &rep);
    if (!first) return false;
    for (int32_t k = 0; k < n; k++)
        if (rep[k]) {
            mark[k] = first[k] == k ? LO_DUPLICATE : LO_REPEAT;
            repeats = true;
        }
    if (!repeats) return true;
    int32_t nt_out = 0;
    for (int32_t i = 0; i < nt; i++) /* response topics in request order */
        out_topic[i] = out_topic[i] == i ? nt_out++ : out_topic[out_topic[i]];
    st->out_topic = out_topic;
    st->mark = mark;
    st->nt_out = nt_out;
    return true;
}

/* Allocates the response's topic and partition arrays once per request. Returns false when out of memory
   (the connection is then closed: never a write through NULL). */
static bool alloc_response(struct gr_req *req)
{
    struct gr_list_offsets_request *body = req->body;
    struct gr_list_offsets_response *resp = req->resp;
    struct lo_state *st = req->hstate;
    if (st->allocated) return true;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    if (!lo_plan(req, st)) return false;
    int32_t nt_out = st->out_topic ? st->nt_out : nt;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt_out + 1, sizeof *resp->topics.items);
    st->shown = gr_arena_calloc(&req->arena, (size_t)nt_out + 1, sizeof *st->shown);
    if (!resp->topics.items || !st->shown) return false;
    st->all = resp->topics.items;
    for (int32_t i = 0; i < nt; i++) { /* capacities first (count reset by fill) */
        int32_t np = body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
        resp->topics.items[st->out_topic ? st->out_topic[i] : i].partitions.count += np;
    }
    for (int32_t i = 0; i < nt_out; i++) {
        struct gr_list_offsets_response_list_offsets_topic_response *rt = &resp->topics.items[i];
        rt->partitions.items =
            gr_arena_calloc(&req->arena, (size_t)rt->partitions.count + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) return false;
    }
    st->allocated = true;
    return true;
}

/* Computes the whole response from the logs' current state (again after each pool round). Returns false
   when out of memory. */
static bool fill(struct gr_req *req)
{
    struct gr_list_offsets_request *body = req->body;
    struct gr_list_offsets_response *resp = req->resp;
    struct lo_state *st = req->hstate;
    if (!alloc_response(req)) return false;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    resp->topics.items = st->all;
    resp->topics.count = st->out_topic ? st->nt_out : nt;
    for (int32_t i = 0; i < resp->topics.count; i++) {
        struct gr_list_offsets_response_list_offsets_topic_response *rt = &resp->topics.items[i];
        struct gr_list_offsets_response_list_offsets_partition_response *parts = rt->partitions.items;
        gr_list_offsets_response_list_offsets_topic_response_init(rt);
        rt->partitions.items = parts;
        rt->partitions.count = 0; /* filled below */
    }
    for (int32_t i = 0, k = 0; i < nt; i++) {
        struct gr_list_offsets_request_list_offsets_topic *qt = &body->topics.items[i];
        struct gr_list_offsets_response_list_offsets_topic_response *rt =
            &resp->topics.items[st->out_topic ? st->out_topic[i] : i];
        rt->name = qt->name;
        const struct gr_image_topic *it = gr_route_topic(req->broker, qt->name);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        for (int32_t p = 0; p < np; p++, k++) {
            struct gr_list_offsets_request_list_offsets_partition *qp = &qt->partitions.items[p];
            if (st->mark && st->mark[k] == LO_REPEAT) continue; /* one entry per partition */
            struct gr_list_offsets_response_list_offsets_partition_response *rp =
                &rt->partitions.items[rt->partitions.count++];
            gr_list_offsets_response_list_offsets_partition_response_init(rp);
            rp->partition_index = qp->partition_index;
            if (st->mark && st->mark[k] == LO_DUPLICATE) {
                rp->error_code = GR_ERR_INVALID_REQUEST;
                continue;
            }
            struct gr_route r; /* another broker's: NOT_LEADER_OR_FOLLOWER (server/route.h) */
            if ((rp->error_code = gr_route_described(req, it, qt->name, qp->partition_index, &r))) {
                if (r.pending) gr_req_logs_note(req, it->id, qp->partition_index); /* false once expired */
                continue;
            }
            struct gr_log *log = r.log;
            struct gr_offset_answer a;
            int rc = gr_partition_list_offset_isolated(gr_broker_partition(req->broker, log), &req->cold,
                                                       req->hdr.request_api_version, qp->current_leader_epoch,
                                                       qp->timestamp, body->isolation_level == 1, &a);
            rp->error_code = rc > 0 ? (int16_t)rc : GR_ERR_NONE; /* cold: redone after the round */
            rp->offset = a.offset;
            rp->timestamp = a.timestamp;
            rp->leader_epoch = a.leader_epoch;
        }
    }
    int32_t n = 0;
    for (int32_t i = 0; i < resp->topics.count; i++)
        if (st->all[i].partitions.count > 0) st->shown[n++] = st->all[i];
    resp->topics.items = st->shown;
    resp->topics.count = n;
    return true;
}

/* The engine's round ended: the answer is computed again with what it opened and loaded pinned (kept by
   the request until it is freed, so a request naming more partitions than gregor.open.files.max ends in a
   few rounds); more cold work waits for another round. */
static void lo_cold_done(struct gr_cold *c)
{
    struct gr_req *req = c->ctx;
    if (!fill(req))
        gr_req_complete(req, GR_HANDLER_CLOSE);
    else if (gr_cold_pending(c))
        gr_cold_wait(c);
    else
        gr_req_finish(req);
}

enum gr_handler_rc gr_handle_list_offsets(struct gr_req *req)
{
    if (!req->hstate) {
        if (!(req->hstate = gr_arena_calloc(&req->arena, 1, sizeof(struct lo_state))))
            return GR_HANDLER_CLOSE;
        gr_cold_init(&req->cold, req->broker->parts, req->broker->iopool, lo_cold_done, req);
    }
    if (!fill(req)) return GR_HANDLER_CLOSE;
    if (gr_req_logs_waiting(req)) return gr_req_await_logs(req, LO_LOG_WAIT_MS, gr_handle_list_offsets);
    if (!gr_cold_pending(&req->cold)) return GR_HANDLER_DONE;
    gr_req_await(req, NULL); /* until the rounds end (no recheck, no deadline); finishing it unparks it */
    gr_cold_wait(&req->cold);
    return GR_HANDLER_WAIT;
}
