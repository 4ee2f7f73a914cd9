/*
 * fetch.c: Fetch (key 1), v4-v18, topics by name before v13 and by topic id from v13.
 *
 * Each partition answers whole batches below the high watermark as a file range sent with sendfile
 * (no copy through user space). Budgets: the response max_bytes (capped by fetch.max.bytes) and each
 * partition's partition_max_bytes, except KIP-74: the first partition, in request order, that returns
 * data returns at least one whole batch even when it is larger. Partitions without data carry empty
 * (not null) records. Long poll: while fewer than min_bytes are available the request is parked until
 * data arrives or max_wait_ms passes. Fetch sessions (KIP-227) are not kept: session id 0 every time,
 * which Kafka allows. Cold reads: before answering, every file range is checked for page-cache residency
 * (gr_log_slice_resident: cachestat, no disk wait); if some range is not resident the request stays parked
 * while an I/O pool thread reads those ranges in (gr_log_slice_prefetch), and is then answered from the
 * page cache, so the network thread's sendfile never waits for the disk. The lookups that find the range
 * (batch headers from the index position, index files not loaded yet or missing, a segment file closed by
 * the fd cap) run without waiting too (gr_log_read_nowait): the pool reads the page in, opens the file,
 * loads or rebuilds the indexes, then the fill is redone with that work pinned (gr_log_slice_install). A
 * range evicted again between the read-in and the send is sent as is (one read-in per request, no loop). A
 * parked fetch waits until data arrives on its partitions only (gr_req_wait_data, past each one's visible
 * offset): an append elsewhere does not re-check it. Without transactions the last stable offset is the high
 * watermark and aborted_transactions is null for read_uncommitted, empty for read_committed. Errors carry
 * Kafka's shapes: an unknown topic, topic id or partition (found before reading) answers HWM/LSO/log start -1
 * and an empty aborted list; an error from reading the log (offset out of range, leader epoch, storage)
 * answers -1 for the offsets and a null aborted list, in both isolation levels. Fetch v4-v9 on a topic with
 * compression.type=zstd answers UNSUPPORTED_COMPRESSION_TYPE (those versions cannot carry zstd). Read next:
 * storage/log.h (gr_log_read).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "server/handlers/handlers.h"

/* Rounds of reading in pages a lookup needed (headers, index files) before a fill reads them itself: a
 * lookup touches a few pages at most, so this bounds a pathological case, not a normal one. */
#define FETCH_COLD_LOOKUP_ROUNDS_MAX 16

struct cold_node {
    struct gr_log_slice cold; /* from gr_log_read_nowait: owned */
    struct cold_node *next;
};

struct fetch_state {
    bool allocated;
    int64_t bytes;   /* bytes gathered by the last fill */
    bool error;      /* some partition has an error: answer at once */
    bool final;      /* answer after the next fill whatever it finds (no long poll, or the deadline passed) */
    bool prefetched; /* the data ranges were checked and read in once: later fills send as they find */
    bool prefetching;       /* an I/O pool job is reading pages in: rechecks and the deadline wait for it */
    int lookup_rounds;      /* pool rounds spent on lookups (FETCH_COLD_LOOKUP_ROUNDS_MAX) */
    struct cold_node *cold; /* lookups of the last fill that need pages read in */
    struct cold_node *cold_free; /* spare nodes (arena) */
    bool waiting_logs;           /* registered on its partitions' wait lists */
    bool no_memory;              /* a fill ran out of request memory: the connection is closed */
};

/* The I/O pool job reading a request's cold pages and ranges into the page cache. */
struct fetch_prefetch {
    struct gr_io_job job;
    struct gr_req *req;
    int count;
    int ranges;                   /* slices[0, ranges): data ranges; the rest: lookups (pinned after) */
    struct gr_log_slice slices[]; /* retained copies or moved cold lookups: valid even if the log goes */
};

static int16_t check_epoch(struct gr_log *log, int32_t current_leader_epoch)
{
    if (current_leader_epoch < 0) return GR_ERR_NONE;
    int32_t epoch = gr_log_leader_epoch(log);
    if (current_leader_epoch < epoch) return GR_ERR_FENCED_LEADER_EPOCH;
    if (current_leader_epoch > epoch) return GR_ERR_UNKNOWN_LEADER_EPOCH;
    return GR_ERR_NONE;
}

/* A partition that failed while reading its log: Kafka's read-error answer (see the file comment). */
static void read_error(struct gr_fetch_response_partition_data *rp, int16_t code)
{
    rp->error_code = code;
    rp->high_watermark = -1;
    rp->last_stable_offset = -1;
    rp->log_start_offset = -1;
    rp->aborted_transactions.count = -1;
}

/* Fetch before v10 cannot carry zstd (KIP-110): a topic whose compression.type is zstd answers
 * UNSUPPORTED_COMPRESSION_TYPE to such fetches, as Kafka 2.1-3.x did (Kafka 4 sends the batches anyway). */
static bool topic_is_zstd(const struct gr_topic *t)
{
    return gr_topic_policy(t)->compression_type == GR_COMPRESSION_ZSTD;
}

static void release_slices(struct gr_req *req)
{
    for (struct gr_req_slice *s = req->slices; s; s = s->next)
        gr_log_slice_release(&s->slice);
    req->slices = NULL;
}

static void release_cold(struct fetch_state *st)
{
    while (st->cold) {
        struct cold_node *n = st->cold;
        st->cold = n->next;
        gr_log_slice_release(&n->cold);
        n->next = st->cold_free;
        st->cold_free = n;
    }
}

/* Reads one partition: without waiting for the disk while lookup rounds remain (a lookup that needs pages
 * read in is noted in st->cold and answered -EAGAIN), else as gr_log_read. */
static int read_partition(struct gr_req *req, struct gr_log *log, int64_t offset, int64_t max, int64_t hwm,
                          bool min_one, struct gr_log_slice *slice)
{
    struct fetch_state *st = req->hstate;
    if (!req->broker->iopool || st->lookup_rounds >= FETCH_COLD_LOOKUP_ROUNDS_MAX)
        return gr_log_read(log, offset, max, hwm, min_one, slice);
    struct gr_log_slice cold;
    int rc = gr_log_read_nowait(log, offset, max, hwm, min_one, slice, &cold);
    if (rc != -EAGAIN) return rc;
    struct cold_node *n = st->cold_free;
    if (n)
        st->cold_free = n->next;
    else
        n = gr_arena_alloc(&req->arena, sizeof *n);
    if (!n) { /* no memory to note it: read it the blocking way */
        gr_log_slice_release(&cold);
        return gr_log_read(log, offset, max, hwm, min_one, slice);
    }
    n->cold = cold;
    n->next = st->cold;
    st->cold = n;
    return -EAGAIN;
}

/* Allocates the response's topic and partition arrays once per request. Returns false when out of memory. */
static bool alloc_response(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct gr_fetch_response *resp = req->resp;
    struct fetch_state *st = req->hstate;
    if (st->allocated) return true;
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    resp->responses.items = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *resp->responses.items);
    if (!resp->responses.items) return false;
    resp->responses.count = ntopics;
    for (int32_t i = 0; i < ntopics; i++) {
        int32_t np = body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
        resp->responses.items[i].partitions.items =
            gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *resp->responses.items[i].partitions.items);
        if (!resp->responses.items[i].partitions.items) return false;
    }
    st->allocated = true;
    return true;
}

/* Computes the whole response from the logs' current state. Returns false when out of request memory. */
static bool fetch_fill_all(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct gr_fetch_response *resp = req->resp;
    struct fetch_state *st = req->hstate;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    release_slices(req);
    release_cold(st);
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    if (!alloc_response(req)) return false;
    int64_t budget = body->max_bytes;
    int64_t cap = b->cfg.settings.fetch_max_bytes;
    if (budget <= 0 || budget > cap) budget = cap;
    bool have_data = false;
    st->bytes = 0;
    st->error = false;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_fetch_request_fetch_topic *qt = &body->topics.items[i];
        struct gr_fetch_response_fetchable_topic_response *rt = &resp->responses.items[i];
        struct gr_fetch_response_partition_data *parts = rt->partitions.items;
        gr_fetch_response_fetchable_topic_response_init(rt);
        rt->partitions.items = parts;
        rt->topic = qt->topic;
        rt->topic_id = qt->topic_id;
        struct gr_topic *t =
            v >= 13 ? gr_store_topic_find_id(b->store, qt->topic_id.b) : gr_topic_lookup(b, qt->topic);
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_fetch_request_fetch_partition *qp = &qt->partitions.items[p];
            struct gr_fetch_response_partition_data *rp = &parts[p];
            gr_fetch_response_partition_data_init(rp);
            rp->partition_index = qp->partition;
            rp->high_watermark = -1;
            rp->records = gr_records_mem((struct gr_bytes){(const uint8_t *)"", 0});
            rp->aborted_transactions.count = 0;
            struct gr_log *log = t ? gr_topic_log(t, qp->partition) : NULL;
            if (!log) {
                rp->error_code = !t && v >= 13 ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                st->error = true;
                continue;
            }
            rp->aborted_transactions.count = body->isolation_level == 1 ? 0 : -1;
            int64_t hwm = gr_partition_visible_offset(gr_broker_partition(b, log));
            rp->high_watermark = hwm;
            rp->last_stable_offset = hwm;
            rp->log_start_offset = gr_log_start_offset(log);
            int16_t err = check_epoch(log, qp->current_leader_epoch);
            if (!err && v < 10 && topic_is_zstd(t)) err = GR_ERR_UNSUPPORTED_COMPRESSION_TYPE;
            if (!err && gr_log_offline(log)) err = GR_ERR_KAFKA_STORAGE_ERROR;
            if (err) {
                read_error(rp, err);
                st->error = true;
                continue;
            }
            int64_t max = qp->partition_max_bytes;
            if (max > budget) max = budget;
            if (max < 0) max = 0;
            struct gr_log_slice slice;
            int rc = read_partition(req, log, qp->fetch_offset, max, hwm, !have_data, &slice);
            if (rc == -EAGAIN) continue; /* pages to read in first: the fill is redone after that */
            if (rc) {
                read_error(rp, rc == -ERANGE ? GR_ERR_OFFSET_OUT_OF_RANGE : GR_ERR_KAFKA_STORAGE_ERROR);
                st->error = true;
                continue;
            }
            if (slice.bytes > 0) {
                if (gr_req_own_slice(req, &slice) < 0) {
                    gr_log_slice_release(&slice);
                    return false;
                }
                rp->records = gr_records_file(slice.fd, slice.file_pos, (int32_t)slice.bytes);
                have_data = true;
                budget -= slice.bytes;
                if (budget < 0) budget = 0;
                st->bytes += slice.bytes;
            }
        }
    }
    return true;
}

/* fetch_fill_all; out of request memory it sets st->no_memory (try_answer then closes the connection:
   never a write through NULL). */
static void fetch_fill(struct gr_req *req)
{
    struct fetch_state *st = req->hstate;
    if (!fetch_fill_all(req)) st->no_memory = true;
}

static void prefetch_run(struct gr_io_job *job)
{
    struct fetch_prefetch *p = (struct fetch_prefetch *)job;
    job->result = 0;
    for (int i = 0; i < p->count; i++) {
        int r = gr_log_slice_prefetch(&p->slices[i]);
        if (r < 0) job->result = r; /* the send (or the blocking lookup) meets the same error */
    }
}

static bool try_answer(struct gr_req *req);
static void wait_on_logs(struct gr_req *req);

static void prefetch_done(struct gr_io_job *job)
{
    struct fetch_prefetch *p = (struct fetch_prefetch *)job;
    struct gr_req *req = p->req;
    struct fetch_state *st = req->hstate;
    /* What the pool opened or loaded goes to its segments; the lookups' references stay with the request
       until it is freed (req->pins), so the fd cap cannot close a file reopened for this request before it
       is read, nor between the rounds of a partition that needs several (open, then index, then a page):
       without that, with a cap below the request's partition count, rounds undid each other until the
       round limit sent the fill to blocking opens. */
    for (int i = 0; i < p->count; i++)
        gr_log_slice_install(&p->slices[i]);
    st->prefetching = false;
    fetch_fill(req); /* the state may have moved meanwhile; what was read in is in the page cache */
    for (int i = 0; i < p->count; i++) {
        struct gr_req_slice *pin = i >= p->ranges ? gr_arena_alloc(&req->arena, sizeof *pin) : NULL;
        if (!pin) {
            gr_log_slice_release(&p->slices[i]);
            continue;
        }
        pin->slice = p->slices[i];
        pin->next = req->pins;
        req->pins = pin;
    }
    free(p);
    if (try_answer(req)) return;
    release_slices(req); /* not enough data yet: keep waiting (parked) for appends */
    if (!st->waiting_logs) wait_on_logs(req);
}

/* Hands what the last fill could not do without the disk to the I/O pool: the lookups noted in st->cold,
 * and (once per request) the data ranges not in the page cache. Returns true when a job started (the
 * request stays parked until prefetch_done). */
static bool start_prefetch(struct gr_req *req, bool check_ranges)
{
    struct fetch_state *st = req->hstate;
    struct gr_broker *b = req->broker;
    if (!b->iopool) return false;
    check_ranges = check_ranges && !st->prefetched;
    int ranges = 0, lookups = 0;
    for (struct gr_req_slice *s = req->slices; check_ranges && s; s = s->next)
        if (gr_log_slice_resident(&s->slice) == 0) ranges++;
    for (struct cold_node *n = st->cold; n; n = n->next)
        lookups++;
    if (ranges + lookups == 0) return false;
    struct fetch_prefetch *p = malloc(sizeof *p + (size_t)(ranges + lookups) * sizeof p->slices[0]);
    if (!p) return false; /* the caller reads the blocking way */
    *p = (struct fetch_prefetch){.job = {.run = prefetch_run, .done = prefetch_done}, .req = req};
    for (struct gr_req_slice *s = req->slices; ranges && s; s = s->next)
        if (p->count < ranges && gr_log_slice_resident(&s->slice) == 0)
            gr_log_slice_retain(&s->slice, &p->slices[p->count++]);
    p->ranges = p->count;
    for (struct cold_node *n = st->cold; n; n = n->next) {
        p->slices[p->count++] = n->cold; /* moved: the job releases it */
        n->cold = (struct gr_log_slice){.fd = -1};
    }
    release_cold(st);
    if (ranges) st->prefetched = true;
    if (lookups) st->lookup_rounds++;
    st->prefetching = true;
    gr_iopool_submit(b->iopool, &p->job);
    return true;
}

/* After a fill: answers, hands pages to the I/O pool, or returns false (keep waiting for data). */
static bool try_answer(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct fetch_state *st = req->hstate;
    if (!st->no_memory && st->cold) {
        if (start_prefetch(req, false)) return true;
        st->lookup_rounds = FETCH_COLD_LOOKUP_ROUNDS_MAX; /* could not hand it off: read the blocking way */
        fetch_fill(req);
    }
    if (st->no_memory) {
        release_slices(req);
        release_cold(st);
        gr_req_complete(req, GR_HANDLER_CLOSE);
        return true;
    }
    if (!(st->error || st->bytes >= body->min_bytes || st->final)) return false;
    if (start_prefetch(req, true)) return true;
    gr_req_finish(req);
    return true;
}

static bool fetch_recheck(struct gr_req *req)
{
    struct fetch_state *st = req->hstate;
    if (st->prefetching) return false; /* prefetch_done goes on */
    fetch_fill(req);
    if (try_answer(req)) return true;
    release_slices(req);
    return false;
}

static void fetch_expire(struct gr_req *req)
{
    struct fetch_state *st = req->hstate;
    st->final = true;
    if (st->prefetching) return; /* prefetch_done answers */
    fetch_fill(req);
    try_answer(req); /* final: answers or hands off */
}

/* Makes the parked request wait until data arrives past what is visible now, on every partition it names. */
static void wait_on_logs(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct gr_broker *b = req->broker;
    struct fetch_state *st = req->hstate;
    int16_t v = req->hdr.request_api_version;
    st->waiting_logs = true;
    for (int32_t i = 0; i < body->topics.count; i++) {
        struct gr_fetch_request_fetch_topic *qt = &body->topics.items[i];
        struct gr_topic *t =
            v >= 13 ? gr_store_topic_find_id(b->store, qt->topic_id.b) : gr_topic_lookup(b, qt->topic);
        for (int32_t p = 0; t && p < qt->partitions.count; p++) {
            struct gr_log *log = gr_topic_log(t, qt->partitions.items[p].partition);
            if (log) /* 0 (offline now) needs no wait: the deadline answers, as the next fill would */
                gr_req_wait_data(req, log, gr_partition_visible_offset(gr_broker_partition(b, log)));
        }
    }
}

enum gr_handler_rc gr_handle_fetch(struct gr_req *req)
{
    struct gr_fetch_request *body = req->body;
    struct gr_fetch_response *resp = req->resp;
    resp->error_code = GR_ERR_NONE;
    resp->session_id = 0;
    req->hstate = gr_arena_calloc(&req->arena, 1, sizeof(struct fetch_state));
    if (!req->hstate) return GR_HANDLER_CLOSE;
    struct fetch_state *st = req->hstate;
    req->recheck = fetch_recheck;
    req->expire = fetch_expire;
    st->final = body->max_wait_ms <= 0;
    /* Parked from the start: a request handed to the I/O pool must outlive its connection (a parked
     * request is freed only once finished); finishing it unparks it. */
    gr_broker_park(req->broker, req, st->final ? INT64_MAX : gr_time_mono_ms() + body->max_wait_ms);
    fetch_fill(req);
    if (try_answer(req)) return GR_HANDLER_WAIT; /* answered inside, or the I/O pool goes on */
    release_slices(req);
    wait_on_logs(req);
    return GR_HANDLER_WAIT;
}
