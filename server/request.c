/*
 * request.c: the request lifecycle, the only place that parks a request, sets its deadline, finishes,
 * encodes and frees it.
 *
 * A request is made by its connection (server/net.c), decoded and routed by server/dispatch.c, and run by
 * its API's handler (gr_req_run, through the API row's pointer). gr_req_run parks every request before its
 * handler runs (a list insert, no timer), so the handler may register waits at any point; the handler
 * either answers at once (GR_HANDLER_DONE: gr_req_complete unparks, encodes and hands the answer to the
 * connection) or declares what it waits for (gr_req_await: re-check, expire, timeout) and returns
 * GR_HANDLER_WAIT. Handlers never park or arm a deadline themselves (scripts/lint.py checks it). A parked
 * request has its own ev_timer as deadline (libev keeps timers in a heap: parking and expiry cost
 * O(log parked)) and waits on named conditions of its partitions
 * (gr_req_wait_committed, gr_req_wait_data, gr_req_wait_log_start, gr_req_wait_low_watermark:
 * partition/partition.h), whose done hooks
 * run req->recheck, and until a local log is made (gr_req_await_logs, gr_req_wait_log_data: the broker's
 * registry of server/logwait.h); the deadline runs req->expire. Finishing unparks, which cancels its
 * remaining waits and its deadline. The answer is encoded here into the output chain (memory chunks cut
 * around file-kind records fields, protocol/wire.h); the connection sends it in request order and frees the
 * request once sent. This file calls no connection code: what it tells the connection (answer built, request
 * released, close, peer name) goes through the broker's request sink (b->req_sink), set by gr_net_init;
 * without one (unit tests) there is no connection to tell. Modules keep per-request state in generic slots
 * (gr_req_state), keyed by an address of their own, instead of fields of struct gr_req. A request finished
 * inside its handler (a wait already satisfied, a coordinator answering inside the call) may already be sent
 * and freed when the handler returns GR_HANDLER_WAIT: nothing here touches it then, and gr_req_await leaves a
 * finished request alone. Invariants: a request is parked at most once at a time; it belongs to one
 * connection or none (then finishing it frees it); everything it owns (arena, frame, slices, its cold-read
 * engine's pins, output) is freed by gr_req_free. Read next: server/broker.h (struct gr_req),
 * server/dispatch.c, server/net.c.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "common/log.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "storage/store.h"

/* ---- per-request state slots ---- */

struct gr_req_state_slot {
    const void *key;
    struct gr_req_state_slot *next;
    max_align_t data[]; /* the module's state, zeroed */
};

void *gr_req_state(const struct gr_req *req, const void *key)
{
    for (struct gr_req_state_slot *s = req->states; s; s = s->next)
        if (s->key == key) return s->data;
    return NULL;
}

void *gr_req_state_add(struct gr_req *req, const void *key, size_t bytes)
{
    struct gr_req_state_slot *s = gr_arena_calloc(&req->arena, 1, sizeof *s + bytes);
    if (!s) return NULL;
    s->key = key;
    s->next = req->states;
    req->states = s;
    return s->data;
}

/* ---- the connection side, through the broker's sink ---- */

void gr_req_close(struct gr_req *req, const char *why)
{
    const struct gr_req_sink *sink = req->broker->req_sink;
    if (req->conn && sink) sink->close(req, why);
}

const char *gr_req_peer(const struct gr_req *req)
{
    const struct gr_req_sink *sink = req->broker->req_sink;
    return req->conn && sink ? sink->peer(req) : "";
}

/* Through the sink, as gr_req_peer: the handlers and the authorizer (server/acls.c) read the principal
   without calling connection code (scripts/lint.py's call-cycle check). */
const char *gr_req_principal(const struct gr_req *req)
{
    const struct gr_req_sink *sink = req->broker->req_sink;
    return req->conn && sink && sink->principal ? sink->principal(req) : GR_PRINCIPAL_ANONYMOUS;
}

const char *gr_req_host(const struct gr_req *req)
{
    const struct gr_req_sink *sink = req->broker->req_sink;
    return req->conn && sink && sink->host ? sink->host(req) : "";
}

static void req_answered(struct gr_req *req)
{
    const struct gr_req_sink *sink = req->broker->req_sink;
    if (sink) sink->answered(req);
}

/* ---- output chain: memory chunks and the file ranges of file-kind records fields ---- */

int gr_req_own_slice(struct gr_req *req, const struct gr_log_slice *slice)
{
    struct gr_req_slice *s = gr_arena_alloc(&req->arena, sizeof *s);
    if (!s) return -ENOMEM;
    s->slice = *slice;
    s->next = req->slices;
    req->slices = s;
    return 0;
}

void gr_req_release_slices(struct gr_req *req)
{
    for (struct gr_req_slice *s = req->slices; s; s = s->next)
        gr_log_slice_release(&s->slice);
    req->slices = NULL;
}

/* Encodes the response into out_mem and the chunk list: the writer cuts the memory around each file-kind
 * records field (protocol/wire.h), so the chain is memory, file range, memory, ... in wire order. */
static void encode_response(struct gr_req *req)
{
    int16_t v = req->hdr.request_api_version;
    int16_t hv = gr_response_header_version(req->resp_ops, v);
    size_t body = req->resp_ops->size(req->resp, v);
    size_t total = gr_response_header_size(hv) + body;
    int ranges = 0;
    size_t file_bytes = req->resp_ops->file_bytes ? req->resp_ops->file_bytes(req->resp, v, &ranges) : 0;
    size_t mem = 4 + total - file_bytes;
    req->out_mem = malloc(mem);
    req->out_mem_bytes = mem;
    req->chunks = gr_arena_calloc(&req->arena, (size_t)(2 * ranges + 1), sizeof *req->chunks);
    if (!req->out_mem || !req->chunks) {
        GR_ERROR("out of memory encoding a %zu-byte response", total);
        req->no_response = true;
        gr_req_close(req, "out of memory");
        return;
    }
    struct gr_wr wr;
    struct gr_chunks chunks;
    gr_wr_init(&wr, req->out_mem, mem);
    gr_wr_chunks_begin(&wr, &chunks, req->chunks, 2 * ranges + 1);
    gr_wr_int32(&wr, (int32_t)total);
    gr_response_header_encode(&wr, hv, req->hdr.correlation_id);
    req->resp_ops->encode(&wr, req->resp, v);
    req->chunk_count = gr_wr_chunks_end(&wr);
    if ((size_t)(wr.p - req->out_mem) != mem) {
        GR_ERROR("%s v%d: encoded %zu bytes, size() said %zu", req->api->name, v,
                 (size_t)(wr.p - req->out_mem), mem);
        abort();
    }
}

/* ---- parking: the parked list, the deadline, the partition waits ---- */

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_req *req = w->data;
    if (req->expire) req->expire(req);
}

/* Arms (or moves) the deadline of the parked `req`; INT64_MAX: none. */
static void arm_deadline(struct gr_req *req, int64_t deadline_ms)
{
    struct gr_broker *b = req->broker;
    ev_timer_stop(b->loop, &req->deadline_w);
    req->deadline_ms = deadline_ms;
    if (deadline_ms == INT64_MAX) return;
    int64_t after_ms = deadline_ms - gr_time_mono_ms();
    ev_timer_init(&req->deadline_w, deadline_cb, after_ms > 0 ? (double)after_ms / 1000.0 : 0, 0);
    req->deadline_w.data = req;
    ev_timer_start(b->loop, &req->deadline_w);
}

void gr_req_park(struct gr_req *req, int64_t deadline_ms)
{
    struct gr_broker *b = req->broker;
    req->parked = true;
    req->wait_prev = NULL;
    req->wait_next = b->parked_head;
    if (b->parked_head) b->parked_head->wait_prev = req;
    b->parked_head = req;
    b->parked_count++;
    arm_deadline(req, deadline_ms);
}

enum gr_handler_rc gr_req_await(struct gr_req *req, const struct gr_await *a)
{
    if (req->done) return GR_HANDLER_WAIT; /* finished inside its handler: never parked or armed again */
    struct gr_await none = {0};
    if (!a) a = &none;
    req->recheck = a->recheck;
    req->expire = a->expire;
    gr_reqtime_parked(req); /* its local time ends at its first wait */
    if (!req->parked) gr_req_park(req, INT64_MAX);
    arm_deadline(req, a->expire ? gr_time_mono_ms() + (a->timeout_ms > 0 ? a->timeout_ms : 0) : INT64_MAX);
    return GR_HANDLER_WAIT;
}

void gr_req_unpark(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    if (!req->parked) return;
    if (req->wait_prev)
        req->wait_prev->wait_next = req->wait_next;
    else
        b->parked_head = req->wait_next;
    if (req->wait_next) req->wait_next->wait_prev = req->wait_prev;
    req->wait_prev = req->wait_next = NULL;
    req->parked = false;
    b->parked_count--;
    for (struct gr_req_wait *rw = req->waits; rw; rw = rw->next)
        gr_partition_wait_cancel(&rw->w);
    req->waits = NULL;
    gr_req_logs_cancel(req);
    ev_timer_stop(b->loop, &req->deadline_w);
}

/* A wait's done hook: re-checks its request (see broker.h struct gr_req_wait). */
static void req_wait_done(struct gr_partition_waiter *w, int err)
{
    (void)err; /* the re-check reads the partition's state itself */
    struct gr_req_wait *rw = (struct gr_req_wait *)w;
    if (rw->arming) {
        rw->held_at_once = true;
        return;
    }
    struct gr_req *req = rw->req;
    struct gr_broker *b = req->broker;
    b->rechecks++;
    if (!req->recheck || req->recheck(req)) return; /* finished (maybe freed) */
    if (!rw->data || !req->parked || gr_partition_waiting(w)) return;
    /* long poll: wait for the next data past what its isolation reads now */
    rw->arming = true;
    gr_partition_wait_data_again(rw->part, w);
    rw->arming = false;
}

/* Queues one wait of `req` on `log` with `start` (a gr_partition_wait_* call). */
static int req_wait(struct gr_req *req, struct gr_log *log, bool data,
                    void (*start)(struct gr_partition *, struct gr_partition_waiter *, int64_t), int64_t arg)
{
    struct gr_req_wait *rw = gr_arena_calloc(&req->arena, 1, sizeof *rw);
    if (!rw) return -ENOMEM;
    gr_partition_waiter_init(&rw->w, req_wait_done, NULL);
    rw->req = req;
    rw->part = gr_broker_partition(req->broker, log);
    rw->data = data;
    rw->next = req->waits;
    req->waits = rw;
    rw->arming = true;
    start(rw->part, &rw->w, arg);
    rw->arming = false;
    return rw->held_at_once ? 0 : 1;
}

int gr_req_wait_committed(struct gr_req *req, struct gr_log *log, int64_t end_offset)
{
    return req_wait(req, log, false, gr_partition_wait_committed, end_offset);
}

/* gr_partition_wait_fetchable for a follower's fetch, in req_wait's shape. */
static void wait_log_end(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset)
{
    gr_partition_wait_fetchable(part, w, GR_FETCH_LOG_END, offset);
}

/* gr_partition_wait_fetchable for a read_committed consumer's fetch (until the last stable offset moves). */
static void wait_stable(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset)
{
    gr_partition_wait_fetchable(part, w, GR_FETCH_TXN_COMMITTED, offset);
}

int gr_req_wait_data(struct gr_req *req, struct gr_log *log, enum gr_fetch_isolation iso)
{
    int64_t offset = gr_partition_fetch_bound(gr_broker_partition(req->broker, log), iso);
    return req_wait(req, log, true,
                    iso == GR_FETCH_LOG_END         ? wait_log_end
                    : iso == GR_FETCH_TXN_COMMITTED ? wait_stable
                                                    : gr_partition_wait_data,
                    offset);
}

int gr_req_wait_log_start(struct gr_req *req, struct gr_log *log, int64_t ticket)
{
    return req_wait(req, log, false, gr_partition_wait_log_start_durable, ticket);
}

int gr_req_wait_low_watermark(struct gr_req *req, struct gr_log *log, int64_t offset)
{
    return req_wait(req, log, false, gr_partition_wait_low_watermark, offset);
}

/* ---- until committed on a set of partitions; until the partitions are appendable ---- */

struct req_commit {
    struct gr_log *log; /* NULL once committed or failed */
    int64_t end_offset;
    void *ctx;
};

struct req_commits {
    struct req_commit *items;
    int count, max;
    void (*failed)(struct gr_req *req, void *ctx, int16_t error_code);
};

static const char commits_key;

bool gr_req_commits_new(struct gr_req *req, int max)
{
    struct req_commits *cs = gr_req_state_add(req, &commits_key, sizeof *cs);
    if (!cs || !(cs->items = gr_arena_calloc(&req->arena, (size_t)max + 1, sizeof *cs->items))) return false;
    cs->max = max;
    return true;
}

void gr_req_commits_add(struct gr_req *req, struct gr_log *log, int64_t end_offset, void *ctx)
{
    struct req_commits *cs = gr_req_state(req, &commits_key);
    if (cs && cs->count < cs->max) cs->items[cs->count++] = (struct req_commit){log, end_offset, ctx};
}

static bool commits_recheck(struct gr_req *req)
{
    struct req_commits *cs = gr_req_state(req, &commits_key);
    for (int i = 0; i < cs->count; i++) {
        struct req_commit *c = &cs->items[i];
        if (!c->log) continue;
        int16_t err; /* the partition layer's DelayedProduce.tryComplete */
        if (gr_partition_produce_acked(gr_broker_partition(req->broker, c->log), c->end_offset, &err))
            return false;
        if (err) cs->failed(req, c->ctx, err);
        c->log = NULL;
    }
    gr_req_finish(req);
    return true;
}

/* An acks=-1 wait that timed out names where the partition stands (rate-limited INFO): whether the records
   are in the log, fdatasynced, and what holds the high watermark back (issue #20, the failover stall). */
static void commit_expired_note(struct gr_req *req, const struct req_commit *c)
{
    struct gr_partition *part = gr_broker_partition(req->broker, c->log);
    int32_t isr[GR_IMAGE_REPLICAS_MAX];
    int n = part ? gr_partition_isr(part, isr, GR_IMAGE_REPLICAS_MAX) : 0;
    GR_LOG_RATELIMITED(GR_LOG_INFO,
                       "%s-%d: acks=-1 produce to offset %lld timed out: high watermark %lld, durable offset "
                       "%lld, log end offset %lld, ISR of %d (effective min %d)",
                       gr_topic_name(gr_log_topic(c->log)), (int)gr_log_partition(c->log),
                       (long long)c->end_offset, part ? (long long)gr_partition_visible_offset(part) : -1LL,
                       (long long)gr_log_durable_offset(c->log), (long long)gr_log_end_offset(c->log), n,
                       part ? gr_partition_effective_min_isr(part) : -1);
}

static void commits_expire(struct gr_req *req)
{
    struct req_commits *cs = gr_req_state(req, &commits_key);
    for (int i = 0; i < cs->count; i++) {
        if (!cs->items[i].log) continue;
        commit_expired_note(req, &cs->items[i]);
        cs->failed(req, cs->items[i].ctx, GR_ERR_REQUEST_TIMED_OUT);
    }
    gr_req_finish(req);
}

enum gr_handler_rc gr_req_await_commits(struct gr_req *req, int64_t timeout_ms,
                                        void (*failed)(struct gr_req *req, void *ctx, int16_t error_code))
{
    struct req_commits *cs = gr_req_state(req, &commits_key);
    gr_cold_unpin(&req->cold); /* the appends are done: the wait needs no pinned file */
    if (!cs || cs->count == 0) return GR_HANDLER_DONE;
    cs->failed = failed;
    gr_req_await(req, &(struct gr_await){
                          .recheck = commits_recheck, .expire = commits_expire, .timeout_ms = timeout_ms});
    if (commits_recheck(req)) return GR_HANDLER_WAIT; /* already committed: finished inside */
    bool held = false; /* cannot be: the recheck above saw every waited partition short of its offset */
    for (int i = 0; i < cs->count; i++)
        if (cs->items[i].log && gr_req_wait_committed(req, cs->items[i].log, cs->items[i].end_offset) == 0)
            held = true;
    if (held) commits_recheck(req);
    return GR_HANDLER_WAIT;
}

struct req_gate {
    struct gr_append_gate gate;
    gr_handler_fn run;
};

static const char gate_key;

/* Runs the appends of a request whose files are pinned and open, then drops the pins. A run that returns
   GR_HANDLER_WAIT parked in gr_req_await_commits, which dropped them, and may have finished the request
   inside (already committed); with its connection gone that freed it, so `req` is not touched again. */
static enum gr_handler_rc run_pinned(struct gr_req *req, gr_handler_fn run)
{
    enum gr_handler_rc rc = run(req);
    if (rc != GR_HANDLER_WAIT) gr_cold_unpin(&req->cold);
    return rc;
}

/* A gated request's turn: its partitions are appendable (or nothing could be pinned: -ENOMEM). It is
   parked with no deadline; what `run` declares replaces that. */
static void req_gate_done(struct gr_append_gate *g, int err)
{
    struct gr_req *req = g->ctx;
    struct req_gate *rg = gr_req_state(req, &gate_key);
    gr_req_complete(req, err ? GR_HANDLER_CLOSE : run_pinned(req, rg->run));
}

enum gr_handler_rc gr_req_await_appendable(struct gr_req *req, struct gr_log **logs, int n, gr_handler_fn run)
{
    struct gr_broker *b = req->broker;
    struct req_gate *rg = gr_req_state_add(req, &gate_key, sizeof *rg);
    struct gr_gate_entry *entries = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *entries);
    if (!rg || !entries) return GR_HANDLER_CLOSE;
    rg->run = run;
    gr_cold_init(&req->cold, b->parts, b->iopool, NULL, NULL); /* the gate sets its hook */
    int r = gr_gate_enter(&rg->gate, b->parts, &req->cold, logs, entries, n, req_gate_done, req);
    if (r < 0) return GR_HANDLER_CLOSE;
    if (r == 1) return run_pinned(req, run);
    /* waits before any append (no recheck, no deadline: the gate runs it); finishing it unparks it */
    return gr_req_await(req, NULL);
}

/* ---- until a local log is made (server/logwait.h): Produce and Fetch in cluster mode ----
   A request's log waits live in one state slot: the entries noted this round, the deadline of its first
   round, and for Produce the function to run again. */

struct req_logw {
    struct gr_logwait_waiter w;
    struct gr_req *req;
    struct req_logw *next;
    enum gr_fetch_isolation iso; /* Fetch's: what its data wait on the new log reads */
};

struct req_logs {
    struct req_logw *noted;   /* noted this round (Produce), queued once the wait is declared */
    struct req_logw *recheck; /* Fetch's waits, each re-checking the request */
    int32_t pending;          /* noted waits queued and not yet done */
    int64_t deadline_ms;      /* monotonic; 0 before the first round */
    bool expired;
    gr_handler_fn run;
};

static const char logs_key;

static struct req_logs *logs_of(struct gr_req *req, bool make)
{
    struct req_logs *s = gr_req_state(req, &logs_key);
    if (!s && make) s = gr_req_state_add(req, &logs_key, sizeof *s);
    return s;
}

bool gr_req_logs_note(struct gr_req *req, const uint8_t topic_id[16], int32_t partition)
{
    struct req_logs *s = logs_of(req, true);
    if (!s || s->expired) return false;
    struct req_logw *e = gr_arena_calloc(&req->arena, 1, sizeof *e);
    if (!e) return false;
    memcpy(e->w.topic_id, topic_id, 16);
    e->w.partition = partition;
    e->req = req;
    e->next = s->noted;
    s->noted = e;
    return true;
}

bool gr_req_logs_waiting(const struct gr_req *req)
{
    const struct req_logs *s = gr_req_state(req, &logs_key);
    return s && s->noted && !s->expired;
}

bool gr_req_logs_expired(const struct gr_req *req)
{
    const struct req_logs *s = gr_req_state(req, &logs_key);
    return s && s->expired;
}

int64_t gr_req_logs_left_ms(const struct gr_req *req, int64_t timeout_ms)
{
    const struct req_logs *s = gr_req_state(req, &logs_key);
    if (!s || s->deadline_ms == 0) return timeout_ms;
    int64_t left = s->deadline_ms - gr_time_mono_ms();
    return left > 0 ? left : 0;
}

static void cancel_list(struct gr_req *req, struct req_logw *e)
{
    for (; e; e = e->next)
        gr_logwait_cancel(&req->broker->logwaits, &e->w);
}

void gr_req_logs_cancel(struct gr_req *req)
{
    struct req_logs *s = gr_req_state(req, &logs_key);
    if (!s) return;
    cancel_list(req, s->noted);
    cancel_list(req, s->recheck);
    s->pending = 0;
}

/* Runs the request's `run` again (a new round: what is still pending is noted again). */
static void logs_rerun(struct gr_req *req, struct req_logs *s)
{
    cancel_list(req, s->noted);
    s->noted = NULL;
    s->pending = 0;
    gr_req_complete(req, s->run(req));
}

static void noted_done(struct gr_logwait_waiter *w)
{
    struct req_logw *e = (struct req_logw *)w;
    struct req_logs *s = logs_of(e->req, false);
    if (--s->pending == 0) logs_rerun(e->req, s);
}

static void logs_expire(struct gr_req *req)
{
    struct req_logs *s = logs_of(req, false);
    s->expired = true;
    logs_rerun(req, s);
}

enum gr_handler_rc gr_req_await_logs(struct gr_req *req, int64_t timeout_ms, gr_handler_fn run)
{
    struct req_logs *s = logs_of(req, false);
    assert(s && s->noted && !s->expired);
    int64_t now = gr_time_mono_ms();
    if (s->deadline_ms == 0) s->deadline_ms = now + (timeout_ms > 0 ? timeout_ms : 0);
    s->run = run;
    gr_req_await(req, &(struct gr_await){.expire = logs_expire, .timeout_ms = s->deadline_ms - now});
    for (struct req_logw *e = s->noted; e; e = e->next) {
        gr_logwait_add(&req->broker->logwaits, &e->w, e->w.topic_id, e->w.partition, noted_done);
        s->pending++;
    }
    return GR_HANDLER_WAIT;
}

/* The wait until verified (gr_req_await_verified): what runs when the answer is in or the deadline passed. */
struct req_verify {
    gr_handler_fn run;
    void (*cancel)(struct gr_req *req);
};
static const char verify_key;

static void verify_expire(struct gr_req *req)
{
    struct req_verify *s = gr_req_state(req, &verify_key);
    s->cancel(req); /* no answer after this: the re-run sees the question unanswered */
    req->before_append = false;
    gr_req_complete(req, s->run(req));
}

enum gr_handler_rc gr_req_await_verified(struct gr_req *req, int64_t timeout_ms, gr_handler_fn run,
                                         void (*cancel)(struct gr_req *req))
{
    struct req_verify *s = gr_req_state(req, &verify_key);
    if (!s) s = gr_req_state_add(req, &verify_key, sizeof *s);
    if (!s) return GR_HANDLER_CLOSE; /* out of arena memory, before any append */
    s->run = run;
    s->cancel = cancel;
    req->before_append = true;
    return gr_req_await(req, &(struct gr_await){.expire = verify_expire, .timeout_ms = timeout_ms});
}

void gr_req_verified(struct gr_req *req)
{
    struct req_verify *s = gr_req_state(req, &verify_key);
    assert(s);
    req->before_append = false;
    req->expire = NULL; /* answered: the wait's deadline goes (the re-run declares its own waits) */
    arm_deadline(req, INT64_MAX);
    gr_req_complete(req, s->run(req));
}

/* Fetch's log wait is done: the log made, the request also waits for data on it (an until-data wait, as for
   the partitions it had at first), then is re-checked. */
static void recheck_done(struct gr_logwait_waiter *w)
{
    struct gr_req *req = ((struct req_logw *)w)->req;
    struct gr_broker *b = req->broker;
    const struct gr_image_topic *it = gr_image_topic_find_id(b->image, w->topic_id);
    struct gr_log *log = it && it->local ? gr_topic_log(it->local, w->partition) : NULL;
    if (log && !gr_log_offline(log)) gr_req_wait_data(req, log, ((struct req_logw *)w)->iso);
    b->rechecks++;
    if (req->recheck) req->recheck(req);
}

int gr_req_wait_log_data(struct gr_req *req, const uint8_t topic_id[16], int32_t partition,
                         enum gr_fetch_isolation iso)
{
    struct req_logs *s = logs_of(req, true);
    struct req_logw *e = s ? gr_arena_calloc(&req->arena, 1, sizeof *e) : NULL;
    if (!e) return -ENOMEM;
    e->req = req;
    e->iso = iso;
    e->next = s->recheck;
    s->recheck = e;
    gr_logwait_add(&req->broker->logwaits, &e->w, topic_id, partition, recheck_done);
    return 1;
}

void gr_broker_wake_parked(struct gr_broker *b)
{
    struct gr_req *r = b->parked_head;
    while (r) {
        struct gr_req *next = r->wait_next;
        /* recheck may finish (and unlink/free) r; `next` stays valid because only r is touched */
        b->rechecks++;
        if (r->recheck) r->recheck(r);
        r = next;
    }
}

/* ---- running, finishing, freeing ---- */

void gr_req_run(struct gr_req *req)
{
    /* parked while its handler runs: waits may be registered at any point, and a connection closed
       meanwhile leaves the request to be freed when it finishes (server/net.c) */
    if (!req->parked) gr_req_park(req, INT64_MAX);
    struct gr_broker *b = req->broker; /* the handler may free req */
    int64_t t = gr_reqtime_handler_enter(b);
    gr_req_complete(req, req->api->handler(req));
    gr_reqtime_handler_exit(b, t);
}

void gr_req_complete(struct gr_req *req, enum gr_handler_rc rc)
{
    switch (rc) {
    case GR_HANDLER_DONE:
        gr_req_finish(req);
        break;
    case GR_HANDLER_WAIT:
        break;
    case GR_HANDLER_NO_RESPONSE:
        gr_req_finish_silent(req);
        break;
    case GR_HANDLER_CLOSE:
        gr_metrics_counts_closed(req); /* a Produce acks=0's errors, as Kafka's closeConnection */
        gr_req_unpark(req);
        req->done = req->no_response = true;
        if (req->conn)
            gr_req_close(req, "handler asked to close");
        else
            gr_req_free(req);
        break;
    }
}

void gr_req_finish(struct gr_req *req)
{
    gr_req_unpark(req);
    if (!req->conn) { /* the connection went away while the request was parked */
        gr_req_free(req);
        return;
    }
    gr_reqtime_finishing(req);
    gr_metrics_answered(req); /* per-API counters of the answer (server/metrics.h) */
    encode_response(req);
    gr_reqtime_queued(req);
    req->done = true;
    req_answered(req);
}

void gr_req_finish_silent(struct gr_req *req)
{
    gr_req_unpark(req);
    req->no_response = true;
    req->done = true;
    gr_reqtime_queued(req);
    if (!req->conn) {
        gr_req_free(req);
        return;
    }
    req_answered(req);
}

void gr_req_free(struct gr_req *req)
{
    gr_req_unpark(req);
    const struct gr_req_sink *sink = req->broker->req_sink;
    if (sink) sink->released(req);
    gr_req_release_slices(req);
    gr_cold_release(&req->cold);
    free(req->frame);
    free(req->out_mem);
    gr_arena_reset(&req->arena);
    free(req);
}
