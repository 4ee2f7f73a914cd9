/*
 * list_offsets.c: ListOffsets (key 2), v1-v11. Special timestamps: -1 latest (the high watermark; the last
 * stable offset for read_committed, equal without transactions), -2 earliest (log start offset), -3 the
 * record with the largest timestamp (KIP-734, v7+), -4 earliest local (log start offset, KIP-405, v8+), -5
 * latest tiered (KIP-1005, v9+) and -6 earliest pending upload (KIP-1023, v11+): none without tiered
 * storage, so offset -1, timestamp -1, as Kafka 4.4 answers. A special timestamp the request's version does
 * not know, or any other negative one, is UNSUPPORTED_VERSION for that partition (Kafka 4.4). v10's
 * timeout_ms bounds remote-storage lookups, which Gregor has none of. A timestamp >= 0 finds the first record
 * with a timestamp at or after it; when there is none the answer is offset -1, timestamp -1 (never a real
 * offset with timestamp -1, which Java's offsetsForTimes rejects). Nothing at or above the high watermark
 * is returned. A partition named twice answers one entry, INVALID_REQUEST (Kafka's duplicatePartitions), and
 * a topic named twice one topic entry.
 *
 * Nothing here waits for the disk on the network thread: the lookups by time (-3 and ts >= 0) run in their
 * no-wait forms (gr_log_offset_for_time_nowait, gr_log_max_timestamp_nowait); when one needs a segment
 * file opened (the fd cap closed it), its indexes loaded or rebuilt, or a page read in, the request is
 * parked while the I/O pool does that (gr_log_slice_prefetch), then the whole answer is recomputed; what a
 * round opened or loaded stays pinned for the request (req->pins), so a request naming more partitions than
 * gregor.open.files.max needs a few rounds, not one per eviction. After LIST_OFFSETS_COLD_ROUNDS_MAX rounds
 * (data evicted from the page cache again each time) the lookups read the blocking way.
 * Read next: storage/log.h (no-wait reads), server/handlers/fetch.c (the same pattern).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "server/handlers/handlers.h"

#define LIST_OFFSETS_COLD_ROUNDS_MAX 16 /* pool rounds before the lookups may wait for the disk */

/* A request partition's place in the answer when the request names a partition twice (see lo_plan). */
enum lo_mark { LO_ANSWER = 0, LO_DUPLICATE, LO_REPEAT };

struct lo_state {
    bool allocated; /* the response arrays exist (allocated by the first fill) */
    /* Kafka answers one entry per distinct topic and partition (ReplicaManager.fetchOffset keys its answers
       by TopicPartition), a partition named twice with INVALID_REQUEST. Set by lo_plan only when the request
       repeats a topic name or a partition; NULL otherwise (the answer then mirrors the request). */
    int32_t *out_topic; /* per request topic: its response topic */
    uint8_t *mark;      /* per request partition, in request order: enum lo_mark */
    int32_t nt_out;     /* response topics */
    /* Kafka answers only the topics that have partitions to answer (a topic named with an empty partition
       list gets no entry): fill lays out every response topic in `all`, then copies those with partitions
       to `shown`, which the response points at (both arena, allocated once). */
    struct gr_list_offsets_response_list_offsets_topic_response *all, *shown;
    int rounds;                /* pool rounds done */
    struct gr_log_slice *cold; /* work the last fill could not do without the disk (arena) */
    int cold_count, cold_cap;
};

/* The pool job of one round: runs each cold slice's prefetch (open, index load, read-in). */
struct lo_job {
    struct gr_io_job job;
    struct gr_req *req;
    int count;
    struct gr_log_slice slices[]; /* moved from the state: the job releases them */
};

/* Runs a lookup without waiting for the disk while rounds remain; -EAGAIN notes its cold work. */
static int lookup(struct gr_req *req, struct gr_log *log, int64_t ts, int64_t hwm, int64_t *off, int64_t *t,
                  int32_t *epoch)
{
    struct lo_state *st = req->hstate;
    if (!st || !req->broker->iopool || st->rounds >= LIST_OFFSETS_COLD_ROUNDS_MAX)
        return ts == -3 ? gr_log_max_timestamp(log, hwm, off, t, epoch)
                        : gr_log_offset_for_time(log, ts, hwm, off, t, epoch);
    struct gr_log_slice cold;
    int rc = ts == -3 ? gr_log_max_timestamp_nowait(log, hwm, off, t, epoch, &cold)
                      : gr_log_offset_for_time_nowait(log, ts, hwm, off, t, epoch, &cold);
    if (rc != -EAGAIN) return rc;
    if (st->cold_count == st->cold_cap) {
        int ncap = st->cold_cap ? st->cold_cap * 2 : 8;
        struct gr_log_slice *n = gr_arena_calloc(&req->arena, (size_t)ncap, sizeof *n);
        if (!n) { /* no memory to note it: the blocking way */
            gr_log_slice_release(&cold);
            return ts == -3 ? gr_log_max_timestamp(log, hwm, off, t, epoch)
                            : gr_log_offset_for_time(log, ts, hwm, off, t, epoch);
        }
        for (int i = 0; i < st->cold_count; i++)
            n[i] = st->cold[i];
        st->cold = n;
        st->cold_cap = ncap;
    }
    st->cold[st->cold_count++] = cold;
    return -EAGAIN;
}

/* A request partition or topic, sorted by name (and partition) to find repeats: O(n log n), as a request
   may name thousands of partitions. */
struct lo_key {
    struct gr_str name;
    int32_t partition; /* -1 for a topic key */
    int32_t pos;       /* request topic index (topic key) or request partition index in request order */
};

static bool lo_key_same(const struct lo_key *a, const struct lo_key *b)
{
    return a->name.len == b->name.len && a->partition == b->partition &&
           (a->name.len <= 0 || memcmp(a->name.ptr, b->name.ptr, (size_t)a->name.len) == 0);
}

static int lo_key_cmp(const void *x, const void *y)
{
    const struct lo_key *a = x, *b = y;
    int32_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = n > 0 ? memcmp(a->name.ptr, b->name.ptr, (size_t)n) : 0;
    if (c) return c;
    if (a->name.len != b->name.len) return a->name.len < b->name.len ? -1 : 1;
    if (a->partition != b->partition) return a->partition < b->partition ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* Finds repeated topic names and partitions (ListOffsetsRequest.duplicatePartitions) and, when there are
   any, sets st->out_topic, st->mark and st->nt_out: the first occurrence of a repeated partition answers
   INVALID_REQUEST, later ones get no entry, and a repeated topic name shares the first one's entry. Returns
   false when out of memory. */
static bool lo_plan(struct gr_req *req, struct lo_state *st)
{
    struct gr_list_offsets_request *body = req->body;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0, total = 0;
    for (int32_t i = 0; i < nt; i++)
        total += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    struct lo_key *keys = gr_arena_calloc(&req->arena, (size_t)(nt > total ? nt : total) + 1, sizeof *keys);
    int32_t *out_topic = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *out_topic);
    uint8_t *mark = gr_arena_calloc(&req->arena, (size_t)total + 1, 1);
    if (!keys || !out_topic || !mark) return false;
    for (int32_t i = 0; i < nt; i++)
        keys[i] = (struct lo_key){body->topics.items[i].name, -1, i};
    qsort(keys, (size_t)nt, sizeof *keys, lo_key_cmp);
    bool repeats = false;
    for (int32_t i = 0; i < nt; i++) { /* a topic's first request topic of its name: sorted first */
        bool same = i > 0 && lo_key_same(&keys[i - 1], &keys[i]);
        out_topic[keys[i].pos] = same ? out_topic[keys[i - 1].pos] : keys[i].pos;
        repeats |= same;
    }
    int32_t n = 0;
    for (int32_t i = 0, k = 0; i < nt; i++)
        for (int32_t p = 0; p < body->topics.items[i].partitions.count; p++, n++)
            keys[n] = (struct lo_key){body->topics.items[out_topic[i]].name,
                                      body->topics.items[i].partitions.items[p].partition_index, k++};
    qsort(keys, (size_t)n, sizeof *keys, lo_key_cmp);
    for (int32_t i = 1; i < n; i++) {
        if (!lo_key_same(&keys[i - 1], &keys[i])) continue;
        mark[keys[i - 1].pos] = mark[keys[i - 1].pos] == LO_ANSWER ? LO_DUPLICATE : mark[keys[i - 1].pos];
        mark[keys[i].pos] = LO_REPEAT;
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

/* The first version that knows special timestamp `ts` (< 0), or INT16_MAX for one no version knows. */
static int16_t special_timestamp_version_min(int64_t ts)
{
    static const int16_t min_version[] = {0, 0, 0, 7, 8, 9, 11}; /* index -ts: -1 .. -6 */
    return ts >= -6 ? min_version[-ts] : INT16_MAX;
}

static void answer(struct gr_req *req, struct gr_log *log, int64_t ts,
                   struct gr_list_offsets_response_list_offsets_partition_response *rp)
{
    if (ts < 0 && req->hdr.request_api_version < special_timestamp_version_min(ts)) {
        rp->error_code = GR_ERR_UNSUPPORTED_VERSION;
        rp->offset = rp->timestamp = -1;
        rp->leader_epoch = -1;
        return;
    }
    int64_t hwm = gr_partition_visible_offset(gr_broker_partition(req->broker, log));
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
    default:
        if (ts < 0 && ts != -3) break; /* -5 and -6, tiered-storage lookups: nothing tiered */
        if (lookup(req, log, ts, hwm, &off, &t, &epoch)) off = t = -1, epoch = -1; /* -EAGAIN: redone */
        break;
    }
    rp->offset = off;
    rp->timestamp = t;
    rp->leader_epoch = epoch;
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
        struct gr_topic *t = gr_topic_lookup(req->broker, qt->name);
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
            struct gr_log *log = t ? gr_topic_log(t, qp->partition_index) : NULL;
            if (!log) {
                rp->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            if (qp->current_leader_epoch >= 0 && qp->current_leader_epoch != gr_log_leader_epoch(log)) {
                rp->error_code = qp->current_leader_epoch < gr_log_leader_epoch(log)
                                     ? GR_ERR_FENCED_LEADER_EPOCH
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
    int32_t n = 0;
    for (int32_t i = 0; i < resp->topics.count; i++)
        if (st->all[i].partitions.count > 0) st->shown[n++] = st->all[i];
    resp->topics.items = st->shown;
    resp->topics.count = n;
    return true;
}

static void lo_job_run(struct gr_io_job *job)
{
    struct lo_job *j = (struct lo_job *)job;
    for (int i = 0; i < j->count; i++)
        gr_log_slice_prefetch(&j->slices[i]); /* errors: met again by the lookup */
}

static bool start_round(struct gr_req *req);

static void lo_job_done(struct gr_io_job *job)
{
    struct lo_job *j = (struct lo_job *)job;
    struct gr_req *req = j->req;
    struct lo_state *st = req->hstate;
    for (int i = 0; i < j->count; i++)
        gr_log_slice_install(&j->slices[i]);
    st->rounds++;
    bool ok = fill(req); /* with what the pool opened and loaded pinned by the job's references */
    /* The references stay with the request until it is freed (req->pins), as Fetch's do: the fd cap cannot
       close a file reopened for it before a later round, so a request naming more partitions than
       gregor.open.files.max ends in a few rounds (without that, each round's opens closed the files of the
       partitions already answered, until the round limit sent the lookups to blocking opens). */
    struct gr_req_slice *pins = gr_arena_calloc(&req->arena, (size_t)j->count, sizeof *pins);
    for (int i = 0; i < j->count; i++) {
        if (!pins) {
            gr_log_slice_release(&j->slices[i]);
            continue;
        }
        pins[i].slice = j->slices[i];
        pins[i].next = req->pins;
        req->pins = &pins[i];
    }
    free(j);
    if (!ok)
        gr_req_complete(req, GR_HANDLER_CLOSE);
    else if (!start_round(req))
        gr_req_finish(req);
}

/* Hands the cold work of the last fill to the pool; false when there is none (the answer is complete). */
static bool start_round(struct gr_req *req)
{
    struct lo_state *st = req->hstate;
    if (st->cold_count == 0) return false;
    struct lo_job *j = malloc(sizeof *j + (size_t)st->cold_count * sizeof j->slices[0]);
    if (!j) { /* the blocking way */
        for (int i = 0; i < st->cold_count; i++)
            gr_log_slice_release(&st->cold[i]);
        st->cold_count = 0;
        st->rounds = LIST_OFFSETS_COLD_ROUNDS_MAX;
        fill(req); /* the arrays exist: cannot fail */
        return false;
    }
    *j =
        (struct lo_job){.job = {.run = lo_job_run, .done = lo_job_done}, .req = req, .count = st->cold_count};
    for (int i = 0; i < st->cold_count; i++)
        j->slices[i] = st->cold[i];
    st->cold_count = 0;
    gr_iopool_submit(req->broker->iopool, &j->job);
    return true;
}

enum gr_handler_rc gr_handle_list_offsets(struct gr_req *req)
{
    req->hstate = gr_arena_calloc(&req->arena, 1, sizeof(struct lo_state));
    if (!req->hstate) return GR_HANDLER_CLOSE;
    if (!fill(req)) return GR_HANDLER_CLOSE;
    if (((struct lo_state *)req->hstate)->cold_count == 0) return GR_HANDLER_DONE;
    /* Parked until the pool rounds end (no recheck, no deadline): a request handed to the pool must outlive
       its connection, and finishing it unparks it. */
    gr_broker_park(req->broker, req, INT64_MAX);
    if (!start_round(req)) gr_req_finish(req);
    return GR_HANDLER_WAIT;
}
