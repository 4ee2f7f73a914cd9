/*
 * produce.c: Produce (key 0), served v3-v13 (advertised from v0; v0-v2 close the connection in dispatch).
 *
 * Per partition: gr_partition_produce (partition/produce.c) validates the batch with the topic's typed
 * policy (Kafka's LogValidator: framing, CRC, sizes, timestamps, keys, codecs), recompresses it to the
 * topic's compression.type and appends it; this file turns its plain result into the response (record_errors
 * for refused records, KIP-467). Durability, named:
 *   acks=0   accepted: no response at all; any partition error closes the connection (as Kafka does)
 *   acks=1   written: answered once the batch is in the page cache
 *   acks=-1  committed: answered once the partition's visible offset passes the batch (with
 *            gregor.acks.all.fsync, the default, a group-commit fdatasync covers it), or REQUEST_TIMED_OUT
 *            after timeout_ms (the partition layer's until-committed wait)
 * Idempotence: storage judges each batch with a producer id (storage/producer_state.h) as it appends it;
 * OUT_OF_ORDER_SEQUENCE_NUMBER and INVALID_PRODUCER_EPOCH are per-partition errors, and a duplicate of one
 * of the producer's last 5 batches is answered with the original's offsets once the ORIGINAL batch is as
 * durable as acks asks (a retry is never acknowledged before the batch it repeats).
 * Transactions are not built: a request with a transactional id, or whose first batch of some partition has
 * the transactional bit, is refused on every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the
 * latter is Kafka's answer without a transactional id); control batches are INVALID_RECORD.
 *
 * Files closed by the fd cap (gregor.open.files.max): an idle partition's active segment file may be
 * closed. Before its appends a Produce pins the active file of EVERY partition it names
 * (gr_log_append_prepare), open or closed, so the cap closes none of them while the request runs, even when
 * it names more partitions than the cap (they exceed it until the next cap pass after the appends). When
 * some were closed, the request is parked BEFORE any append while one I/O pool job (allocated once per
 * request) reopens them, so the network thread never opens a file; then it appends and drops the pins.
 * Only a roll of one of its partitions meanwhile (retention rolling an expired active segment) takes
 * another round; a file the pool could not open answers KAFKA_STORAGE_ERROR for its partition. To keep the
 * order of appends to a partition (idempotent producers pipeline), a later Produce naming a partition of a
 * parked one queues behind it (partition/gate.c, per-partition order); a Produce sharing no partition with
 * the gate goes ahead at once. Out of request memory, the connection is closed before any append. Read next:
 * server/handlers/fetch.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "partition/partition.h"
#include "server/handlers/handlers.h"
#include "server/handlers/produce_request.h"

struct produce_wait {
    struct gr_produce_response_partition_produce_response *pr;
    struct gr_log *log;
    int64_t end_offset; /* durable once the log's durable offset reaches this */
};

struct produce_state {
    struct produce_wait *waits;
    int count;
    /* the append gate (see the top of the file; pins and the reopen round in req->cold) */
    struct gr_log **logs; /* the request's partitions that exist (arena) */
    int nlogs;
    struct gr_gate_entry *entries; /* its places in their gate queues (arena, nlogs) */
    struct gr_append_gate gate;
    bool txn_refused; /* every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no appends) */
};

/* A partition's error with no message (null on the wire) or a static one. */
static void set_error(struct gr_produce_response_partition_produce_response *pr, int16_t code,
                      const char *msg)
{
    pr->error_code = code;
    pr->base_offset = -1;
    pr->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
}

/* Copies one partition's produce result into its response entry (record errors into the request arena).
   Returns false when out of memory. */
static bool fill_partition(struct gr_req *req, const struct gr_produce_result *r,
                           struct gr_produce_response_partition_produce_response *pr)
{
    pr->error_code = r->error_code;
    pr->base_offset = r->base_offset;
    pr->log_append_time_ms = r->log_append_time_ms;
    pr->log_start_offset = r->log_start_offset;
    pr->error_message = r->error_message ? gr_str_c(r->error_message) : GR_STR_NULL;
    if (!r->record_error_count) return true;
    struct gr_produce_response_batch_index_and_error_message *items =
        gr_arena_calloc(&req->arena, (size_t)r->record_error_count, sizeof *items);
    if (!items) return false;
    for (int i = 0; i < r->record_error_count; i++) {
        gr_produce_response_batch_index_and_error_message_init(&items[i]);
        items[i].batch_index = r->record_errors[i].batch_index;
        const char *m = r->record_errors[i].message;
        items[i].batch_index_error_message = m ? gr_str_c(m) : GR_STR_NULL;
    }
    pr->record_errors.items = items;
    pr->record_errors.count = r->record_error_count;
    return true;
}

/* Validates and appends one partition's records (gr_partition_produce) and fills `pr`. Returns the appended
 * log (and in *end_offset what must be committed before the answer) or NULL. */
static struct gr_log *produce_partition(struct gr_req *req, struct gr_topic *t, int32_t partition,
                                        struct gr_bytes records,
                                        struct gr_produce_response_partition_produce_response *pr,
                                        int64_t *end_offset)
{
    struct gr_log *log = t ? gr_topic_log(t, partition) : NULL;
    if (!log) {
        set_error(pr, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION, NULL);
        return NULL;
    }
    struct gr_produce_args args = {.records = (uint8_t *)records.ptr, /* the request buffer: ours to patch */
                                   .records_len = records.len,
                                   .api_version = req->hdr.request_api_version,
                                   .now_ms = gr_time_wall_ms(),
                                   .require_open = req->broker->iopool != NULL};
    struct gr_produce_result r;
    int16_t err = gr_partition_produce(gr_broker_partition(req->broker, log), gr_topic_policy(t), &args,
                                       &req->arena, &r);
    if (!fill_partition(req, &r, pr)) /* out of memory: the refusal without its record list */
        pr->record_errors.count = 0;
    *end_offset = r.end_offset;
    return err ? NULL : log;
}

static bool produce_recheck(struct gr_req *req)
{
    struct produce_state *st = req->hstate;
    for (int i = 0; i < st->count; i++) {
        struct produce_wait *w = &st->waits[i];
        if (!w->log) continue;
        if (gr_log_offline(w->log)) {
            set_error(w->pr, GR_ERR_KAFKA_STORAGE_ERROR, NULL);
            w->log = NULL;
        } else if (gr_partition_visible_offset(gr_broker_partition(req->broker, w->log)) >= w->end_offset) {
            w->log = NULL;
        } else {
            return false;
        }
    }
    gr_req_finish(req);
    return true;
}

static void produce_expire(struct gr_req *req)
{
    struct produce_state *st = req->hstate;
    for (int i = 0; i < st->count; i++)
        if (st->waits[i].log) set_error(st->waits[i].pr, GR_ERR_REQUEST_TIMED_OUT, NULL);
    gr_req_finish(req);
}

/* Validates and appends every partition, then answers or parks for durability. */
static enum gr_handler_rc produce_run(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    struct gr_produce_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    bool bad_acks = body->acks != 0 && body->acks != 1 && body->acks != -1;
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    struct produce_state *st = req->hstate;
    st->count = 0;
    if (!gr_produce_response_alloc(req->body, req->resp, &req->arena))
        return GR_HANDLER_CLOSE; /* before any append: nothing half done */
    bool any_error = false;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        struct gr_produce_response_topic_produce_response *tr = &resp->responses.items[i];
        tr->name = td->name;
        tr->topic_id = td->topic_id;
        struct gr_topic *t =
            v >= 13 ? gr_store_topic_find_id(b->store, td->topic_id.b) : gr_topic_lookup(b, td->name);
        int16_t topic_err = GR_ERR_NONE;
        const char *topic_msg = NULL;
        if (!t)
            topic_err = v >= 13 ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        else if (strcmp(gr_topic_name(t), "__consumer_offsets") == 0) {
            topic_err = GR_ERR_INVALID_TOPIC_EXCEPTION; /* no message, as Kafka 4.4 */
        }
        if (bad_acks) topic_err = GR_ERR_INVALID_REQUIRED_ACKS;
        if (st->txn_refused) {
            topic_err = GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            /* Kafka sends no message for a transactional batch without a transactional id */
            topic_msg =
                body->transactional_id.len >= 0 ? "Transactions are not supported by this broker yet" : NULL;
        }
        int32_t np = tr->partition_responses.count;
        for (int32_t p = 0; p < np; p++) {
            struct gr_produce_request_partition_produce_data *pd = &td->partition_data.items[p];
            struct gr_produce_response_partition_produce_response *pr = &tr->partition_responses.items[p];
            gr_produce_response_partition_produce_response_init(pr);
            pr->index = pd->index;
            if (topic_err) {
                set_error(pr, topic_err, topic_msg);
                any_error = true;
                continue;
            }
            int64_t end_offset = -1;
            struct gr_log *log = produce_partition(req, t, pd->index, pd->records.mem, pr, &end_offset);
            if (!log) {
                any_error = true;
                continue;
            }
            st->waits[st->count++] = (struct produce_wait){pr, log, end_offset};
        }
    }
    if (body->acks == 0) return any_error ? GR_HANDLER_CLOSE : GR_HANDLER_NO_RESPONSE;
    if (body->acks == -1 && st->count) {
        gr_req_await(req, &(struct gr_await){.recheck = produce_recheck,
                                             .expire = produce_expire,
                                             .timeout_ms = body->timeout_ms});
        if (produce_recheck(req)) return GR_HANDLER_WAIT; /* already committed: finished inside recheck */
        bool held = false; /* cannot be: the recheck above saw every waited partition short of its offset */
        for (int i = 0; i < st->count; i++)
            if (st->waits[i].log &&
                gr_req_wait_committed(req, st->waits[i].log, st->waits[i].end_offset) == 0)
                held = true;
        if (held) produce_recheck(req);
        return GR_HANDLER_WAIT;
    }
    return GR_HANDLER_DONE;
}

/* ---- the produce gate: until the partition is appendable (partition/gate.c) ---- */

/* Appends every partition of a request whose files are pinned and open, then drops the pins. */
static enum gr_handler_rc produce_run_pinned(struct gr_req *req)
{
    enum gr_handler_rc rc = produce_run(req);
    gr_cold_unpin(&req->cold);
    return rc;
}

/* A gated request's turn: its partitions are appendable (or nothing could be pinned: -ENOMEM). */
static void gate_done(struct gr_append_gate *g, int err)
{
    struct gr_req *req = g->ctx; /* parked, no deadline: the await below replaces that */
    gr_req_complete(req, err ? GR_HANDLER_CLOSE : produce_run_pinned(req));
}

/* The request's partitions that exist, found as produce_run finds them (distinct: merge_duplicates ran),
   with room for their gate entries. Returns false when out of memory. */
static bool collect_logs(struct gr_req *req, struct produce_state *st, int total)
{
    struct gr_produce_request *body = req->body;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    st->logs = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->logs);
    st->entries = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->entries);
    if (!st->logs || !st->entries) return false;
    for (int32_t i = 0; i < body->topic_data.count; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        struct gr_topic *t =
            v >= 13 ? gr_store_topic_find_id(b->store, td->topic_id.b) : gr_topic_lookup(b, td->name);
        for (int32_t p = 0; t && p < td->partition_data.count; p++) {
            struct gr_log *log = gr_topic_log(t, td->partition_data.items[p].index);
            if (log && st->nlogs < total) st->logs[st->nlogs++] = log;
        }
    }
    return true;
}

enum gr_handler_rc gr_handle_produce(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    struct gr_broker *b = req->broker;
    if (!gr_produce_merge_duplicates(body, req->hdr.request_api_version >= 13, &req->arena))
        return GR_HANDLER_CLOSE; /* before any append: nothing half done */
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    int total = 0;
    for (int32_t i = 0; i < ntopics; i++)
        total += body->topic_data.items[i].partition_data.count > 0
                     ? body->topic_data.items[i].partition_data.count
                     : 0;
    struct produce_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
    if (!st) return GR_HANDLER_CLOSE;
    st->waits = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->waits);
    if (!st->waits) return GR_HANDLER_CLOSE;
    req->hstate = st;
    st->txn_refused = gr_produce_request_transactional(body);
    bool bad_acks = body->acks != 0 && body->acks != 1 && body->acks != -1;
    if (!b->iopool || bad_acks || st->txn_refused) return produce_run(req); /* no appends */
    if (!collect_logs(req, st, total)) return GR_HANDLER_CLOSE;
    gr_cold_init(&req->cold, b->parts, b->iopool, NULL, NULL); /* the gate sets its hook */
    int r = gr_gate_enter(&st->gate, b->parts, &req->cold, st->logs, st->entries, st->nlogs, gate_done, req);
    if (r < 0) return GR_HANDLER_CLOSE;
    if (r == 1) return produce_run_pinned(req);
    /* Waits before any append (no recheck, no deadline: the gate runs it); finishing it unparks it. */
    return gr_req_await(req, NULL);
}
