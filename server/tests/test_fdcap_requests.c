/*
 * test_fdcap_requests.c: requests naming more partitions than the open-file cap (gregor.open.files.max),
 * from the handlers' side, with a real store (cap 4, 20 partitions), a real I/O pool and the syscall shim
 * counting the opens made on this (the network) thread. The once-a-second cap pass is modelled by a
 * gr_store_fds_trim before every pool completion.
 *   - A Produce naming all 20 idle partitions (16 closed) is parked, ONE pool job reopens the closed files,
 *     and it appends every partition: no open on this thread, no second round (issue 26 defect 1: the gate
 *     waited for all files open at once while each round's reopens closed the others, took a new job from
 *     the arena every round, and wrote through NULL when the arena ran out). A Produce naming two of the
 *     partitions, sent while the first waits, lands after it on both, with no pool job of its own.
 *   - The same Produce when every reopen fails (EIO): two pool rounds, then the answer; the partitions
 *     whose files stayed closed are not written (KAFKA_STORAGE_ERROR), the network thread opens nothing.
 *   - The same Produce while the broker stops: the job's completion does not run it (nothing appended, no
 *     new job), and freeing it drops its pins (the cap closes the files again).
 *   - WriteTxnMarkers sent while that Produce waits: its markers land after the Produce's batches, with no
 *     pool job and no open of its own (the append gate, as Produce); so does the COMMIT marker the
 *     transaction coordinator writes in process (its round enters the gate), with the binding on.
 *   - ListOffsets by time (-3, max timestamp) naming all 20 partitions: answered in a few pool rounds,
 *     without an open on this thread (each round used to close what the last one opened, until the round
 *     limit sent the lookups to blocking opens).
 *   - ListOffsets naming partitions twice (issue 17 item 7): one entry each (INVALID_REQUEST), one topic.
 * Read next: server/handlers/produce.c, server/handlers/list_offsets.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/time.h"
#include "coordinator/txn.h"
#include "server/handlers/handlers.h"
#include "server/producer_ids.h"
#include "server/txns.h"
#include "server/tests/fixture.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

#define CAP 4
#define PARTS 20

struct fx {
    char dir[64];
    struct gr_broker *b;
    struct gr_topic *topic;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    fault_install();
    /* hwm_durable off: acks=1 and acks=-1 answered once written, no flush to wait for */
    struct gr_broker *b = srv_broker_open(
        f->dir, sizeof f->dir, &(struct srv_broker_opts){.iopool = true, .open_segment_fds_max = CAP});
    assert_int_equal(gr_store_topic_create(b->store, "w", PARTS, NULL, NULL, 0, &f->topic), 0);
    gr_store_fds_trim(b->store);
    assert_true(gr_store_open_segment_fds(b->store) <= CAP);
    f->b = b;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    srv_broker_close(f->b, f->dir, fault_uninstall);
    free(f);
    return 0;
}

static struct gr_req *new_req(struct fx *f, int16_t key, int16_t version)
{
    return srv_req_new(f->b, key, version, 1 << 20);
}

/* A Produce v9 (no connection) with one 1-record batch tagged `tag` for each of `n` partitions. */
static struct gr_req *produce_req(struct fx *f, const int32_t *parts, int n, int16_t acks, uint32_t tag)
{
    struct gr_req *req = new_req(f, 0, 9);
    struct gr_produce_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_produce_request_init(body);
    body->transactional_id = GR_STR_NULL;
    body->acks = acks;
    body->timeout_ms = 30000;
    body->topic_data.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topic_data.items);
    body->topic_data.count = 1;
    struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[0];
    td->name = gr_str_c("w");
    td->partition_data.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *td->partition_data.items);
    td->partition_data.count = n;
    for (int i = 0; i < n; i++) {
        struct th_batch_spec s = {
            .count = 1, .ts0 = gr_time_wall_ms(), .tag = tag, .value_bytes = 8, .producer_id = -1};
        size_t len;
        uint8_t *batch = th_batch(&s, &len);
        uint8_t *copy = gr_arena_alloc(&req->arena, len);
        memcpy(copy, batch, len);
        free(batch);
        td->partition_data.items[i].index = parts[i];
        td->partition_data.items[i].records = gr_records_mem((struct gr_bytes){copy, (int32_t)len});
    }
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_produce_response));
    gr_produce_response_init(req->resp);
    return req;
}

/* The server loop's part: a cap pass, then the pool's completions, until nothing is parked or `jobs_max`
   completions ran or 10 s passed. Returns the completions run. */
static int run_pool(struct fx *f, int jobs_max)
{
    int jobs = 0;
    int64_t deadline = gr_time_mono_ms() + 10000;
    while (f->b->parked_count > 0 && jobs < jobs_max && gr_time_mono_ms() < deadline) {
        gr_store_fds_trim(f->b->store);
        int n = gr_iopool_complete(f->b->iopool);
        jobs += n;
        if (!n) usleep(1000);
    }
    return jobs;
}

static int32_t all_parts[PARTS];

static void test_wide_produce_one_round(void **state)
{
    struct fx *f = *state;
    long opens = fault_count_this_thread(F_OPEN);
    struct gr_req *wide = produce_req(f, all_parts, PARTS, 1, 1);
    assert_int_equal(gr_handle_produce(wide), GR_HANDLER_WAIT); /* files closed: parked before any append */
    int32_t two[] = {0, 7};
    struct gr_req *later = produce_req(f, two, 2, -1, 2);
    assert_int_equal(gr_handle_produce(later), GR_HANDLER_WAIT); /* queued behind `wide` */
    assert_int_equal(f->b->parked_count, 2);
    for (int p = 0; p < PARTS; p++)
        assert_int_equal(gr_log_end_offset(gr_topic_log(f->topic, p)), 0);
    assert_int_equal(run_pool(f, 8), 1); /* one job; `later` found its files pinned open: none of its own */
    assert_int_equal(f->b->parked_count, 0); /* both ran (and were freed: no connection) */
    assert_int_equal(fault_count_this_thread(F_OPEN), opens);
    for (int p = 0; p < PARTS; p++) {
        struct gr_log *log = gr_topic_log(f->topic, p);
        struct th_seen *seen;
        int n = th_read_all(log, 0, INT64_MAX, &seen);
        assert_int_equal(n, p == 0 || p == 7 ? 2 : 1);
        assert_int_equal(seen[0].tag, 1);
        if (n == 2) assert_int_equal(seen[1].tag, 2); /* in arrival order */
        free(seen);
    }
    for (int p = 0; p < PARTS; p++) { /* unsynced data pins a file too: make it durable */
        struct gr_log *log = gr_topic_log(f->topic, p);
        gr_log_flush_async(log);
        assert_int_equal(th_wait_durable(log, gr_log_end_offset(log)), 0);
    }
    gr_store_quiesce(f->b->store);
    gr_store_fds_trim(f->b->store);
    assert_true(gr_store_open_segment_fds(f->b->store) <= CAP); /* the pins went with the requests */
}

/* A WriteTxnMarkers (v1, no connection) with one ABORT marker of producer `pid` for `n` partitions of "w". */
static struct gr_req *markers_req(struct fx *f, int64_t pid, const int32_t *parts, int n)
{
    struct gr_req *req = new_req(f, 27, 1);
    struct gr_write_txn_markers_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_write_txn_markers_request_init(body);
    body->markers.items = gr_arena_calloc(&req->arena, 1, sizeof *body->markers.items);
    body->markers.count = 1;
    struct gr_write_txn_markers_request_writable_txn_marker *mk = &body->markers.items[0];
    gr_write_txn_markers_request_writable_txn_marker_init(mk);
    mk->producer_id = pid;
    mk->producer_epoch = 0;
    mk->transaction_result = false;
    mk->coordinator_epoch = 0;
    mk->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *mk->topics.items);
    mk->topics.count = 1;
    mk->topics.items[0].name = gr_str_c("w");
    mk->topics.items[0].partition_indexes.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof(int32_t));
    mk->topics.items[0].partition_indexes.count = n;
    for (int i = 0; i < n; i++)
        mk->topics.items[0].partition_indexes.items[i] = parts[i];
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_write_txn_markers_response));
    gr_write_txn_markers_response_init(req->resp);
    return req;
}

/* WriteTxnMarkers passes the append gate as Produce does: sent while a Produce naming all 20 partitions waits
 * for its reopen round, its markers on partitions 0 and 7 queue behind it and land after its batches (before
 * the gate they were appended at once, ahead of the earlier Produce, and their closed files reopened on this
 * thread); no pool job of its own, no open on this thread. */
static void test_markers_gated(void **state)
{
    struct fx *f = *state;
    long opens = fault_count_this_thread(F_OPEN);
    struct gr_req *wide = produce_req(f, all_parts, PARTS, 1, 1);
    assert_int_equal(gr_handle_produce(wide), GR_HANDLER_WAIT);
    int32_t two[] = {0, 7};
    struct gr_req *mk = markers_req(f, 4242, two, 2);
    assert_int_equal(gr_handle_write_txn_markers(mk), GR_HANDLER_WAIT); /* queued behind `wide` */
    assert_int_equal(gr_log_end_offset(gr_topic_log(f->topic, 0)), 0);
    assert_int_equal(run_pool(f, 8), 1);
    assert_int_equal(f->b->parked_count, 0);
    assert_int_equal(fault_count_this_thread(F_OPEN), opens);
    for (int i = 0; i < 2; i++) {
        struct th_seen *seen;
        int n = th_read_all(gr_topic_log(f->topic, two[i]), 0, INT64_MAX, &seen);
        assert_int_equal(n, 2);
        assert_int_equal(seen[0].tag, 1); /* the Produce's batch first */
        assert_int_equal(seen[0].producer_id, -1);
        assert_int_equal(seen[1].producer_id, 4242); /* then the marker */
        assert_int_equal(seen[1].base_offset, 1);
        free(seen);
    }
}

/* The loop and the pool (a cap pass before each completion, as run_pool) until `*flag` is set or 10 s. */
static void spin_until(struct fx *f, const bool *flag)
{
    int64_t deadline = gr_time_mono_ms() + 10000;
    while (!*flag && gr_time_mono_ms() < deadline) {
        gr_store_fds_trim(f->b->store);
        int n = gr_iopool_complete(f->b->iopool);
        ev_run(f->b->loop, EVRUN_NOWAIT);
        if (!n) usleep(1000);
    }
    assert_true(*flag);
}

struct answered {
    bool done;
    int16_t error_code;
};
static void txn_answered(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    struct answered *a = w->ctx;
    a->done = true;
    a->error_code = res->error_code;
}

/* The coordinator's in-process marker round passes the append gate too (server/txns.c round_send): the
 * binding with one __transaction_state partition, transaction "tx" over w-0 is committed while a Produce
 * naming all 20 partitions waits for its reopen round; the COMMIT marker lands on w-0 after the Produce's
 * batch (before the gate it was appended at once, ahead of it, its file reopened on this thread), with no
 * open on this thread. */
static void test_coordinator_markers_gated(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    b->cfg.settings.transaction_state_log_num_partitions = 1;
    assert_int_equal(gr_producer_ids_start(b), 0);
    struct gr_req *fc = new_req(f, GR_API_FIND_COORDINATOR, 3);
    fc->api = gr_api_find(GR_API_FIND_COORDINATOR);
    fc->body = gr_arena_calloc(&fc->arena, 1, sizeof(struct gr_find_coordinator_request));
    fc->resp = gr_arena_calloc(&fc->arena, 1, sizeof(struct gr_find_coordinator_response));
    gr_find_coordinator_request_init(fc->body);
    gr_find_coordinator_response_init(fc->resp);
    ((struct gr_find_coordinator_request *)fc->body)->key = gr_str_c("tx");
    ((struct gr_find_coordinator_request *)fc->body)->key_type = 1;
    assert_true(gr_txns_defer(fc)); /* __transaction_state made on the pool, then loaded */
    bool loaded = false;
    int64_t deadline = gr_time_mono_ms() + 10000;
    while (!(loaded = gr_txns_loaded(b) == 1) && gr_time_mono_ms() < deadline) {
        gr_iopool_complete(b->iopool);
        ev_run(b->loop, EVRUN_NOWAIT);
        usleep(1000);
    }
    assert_true(loaded);
    struct gr_str id = gr_str_c("tx");
    struct answered init = {0}, add = {0}, end = {0};
    struct gr_txns_waiter wi = {.answer = txn_answered, .ctx = &init};
    gr_txn_init_producer_id(b->txn, &wi, id, 60000, -1, -1);
    spin_until(f, &init.done);
    assert_int_equal(init.error_code, 0);
    struct gr_txn_info info;
    assert_int_equal(gr_txn_describe(b->txn, id, &info), 0);
    struct gr_txn_tp tp = {gr_str_c("w"), 0};
    struct gr_txns_waiter wa = {.answer = txn_answered, .ctx = &add};
    gr_txn_add_partitions(b->txn, &wa, id, info.producer_id, info.producer_epoch, &tp, 1);
    spin_until(f, &add.done);
    assert_int_equal(add.error_code, 0);

    long opens = fault_count_this_thread(F_OPEN);
    gr_store_fds_trim(b->store);
    struct gr_req *wide = produce_req(f, all_parts, PARTS, 1, 1);
    assert_int_equal(gr_handle_produce(wide), GR_HANDLER_WAIT); /* files closed: parked */
    struct gr_txns_waiter we = {.answer = txn_answered, .ctx = &end};
    gr_txn_end(b->txn, &we, id, info.producer_id, info.producer_epoch, true);
    spin_until(f, &end.done); /* PrepareCommit durable; the markers follow */
    assert_int_equal(end.error_code, 0);
    struct gr_log *log = gr_topic_log(f->topic, 0);
    bool marked = false;
    deadline = gr_time_mono_ms() + 10000;
    while (!(marked = gr_log_end_offset(log) == 2 && b->parked_count == 0) && gr_time_mono_ms() < deadline) {
        gr_store_fds_trim(b->store);
        gr_iopool_complete(b->iopool);
        ev_run(b->loop, EVRUN_NOWAIT);
        usleep(1000);
    }
    assert_true(marked);
    assert_int_equal(fault_count_this_thread(F_OPEN), opens);
    struct th_seen *seen;
    assert_int_equal(th_read_all(log, 0, INT64_MAX, &seen), 2);
    assert_int_equal(seen[0].tag, 1); /* the Produce's batch first */
    assert_int_equal(seen[0].producer_id, -1);
    assert_int_equal(seen[1].producer_id, info.producer_id); /* then the COMMIT marker */
    free(seen);
}

static void test_stop_while_gated(void **state)
{
    struct fx *f = *state;
    struct gr_req *wide = produce_req(f, all_parts, PARTS, 1, 1);
    assert_int_equal(gr_handle_produce(wide), GR_HANDLER_WAIT);
    f->b->stopping = true; /* SIGTERM: main.c stops the partitions, drains the pool, frees what is parked */
    gr_partitions_stop(f->b->parts);
    gr_iopool_drain(f->b->iopool);
    assert_int_equal(gr_iopool_pending(f->b->iopool), 0); /* no new job from the completion */
    assert_int_equal(f->b->parked_count, 1);              /* not run */
    for (int p = 0; p < PARTS; p++)
        assert_int_equal(gr_log_end_offset(gr_topic_log(f->topic, p)), 0);
    assert_true(gr_store_open_segment_fds(f->b->store) > CAP); /* pinned past the cap while it waits */
    gr_req_free(wide);
    gr_store_fds_trim(f->b->store);
    assert_true(gr_store_open_segment_fds(f->b->store) <= CAP); /* freeing it dropped its pins */
}

static void test_reopen_fails(void **state)
{
    struct fx *f = *state;
    int open_now = 0;
    for (int p = 0; p < PARTS; p++)
        open_now += gr_log_append_ready(gr_topic_log(f->topic, p));
    assert_true(open_now > 0 && open_now < PARTS);
    fault_fail(F_OPEN, 1, EIO, true); /* every open fails from now on: the pool's reopens too */
    long opens = fault_count_this_thread(F_OPEN);
    struct gr_req *wide = produce_req(f, all_parts, PARTS, 1, 1);
    assert_int_equal(gr_handle_produce(wide), GR_HANDLER_WAIT);
    assert_int_equal(run_pool(f, 8), 2); /* bounded: a second round, then the answer */
    assert_int_equal(f->b->parked_count, 0);
    assert_int_equal(fault_count_this_thread(F_OPEN), opens);
    int appended = 0;
    for (int p = 0; p < PARTS; p++)
        appended += (int)gr_log_end_offset(gr_topic_log(f->topic, p));
    assert_int_equal(appended, open_now); /* the others answered KAFKA_STORAGE_ERROR, nothing written */
    fault_clear(F_OPEN);
}

static void test_list_offsets_over_cap(void **state)
{
    struct fx *f = *state;
    for (int p = 0; p < PARTS; p++) { /* one record each, one partition at a time */
        struct gr_req *w = produce_req(f, &all_parts[p], 1, 1, 1);
        if (gr_handle_produce(w) == GR_HANDLER_WAIT)
            assert_int_equal(run_pool(f, 8), 1);
        else
            gr_req_free(w);
    }
    assert_int_equal(f->b->parked_count, 0);
    for (int p = 0; p < PARTS; p++) {
        struct gr_log *log = gr_topic_log(f->topic, p);
        gr_log_flush_async(log);
        assert_int_equal(th_wait_durable(log, gr_log_end_offset(log)), 0);
    }
    gr_store_quiesce(f->b->store);
    gr_store_fds_trim(f->b->store);
    assert_true(gr_store_open_segment_fds(f->b->store) <= CAP);
    long opens = fault_count_this_thread(F_OPEN);
    struct gr_req *req = new_req(f, 2, 7);
    struct gr_list_offsets_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_list_offsets_request_init(body);
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    body->topics.items[0].name = gr_str_c("w");
    body->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, PARTS, sizeof *body->topics.items[0].partitions.items);
    body->topics.items[0].partitions.count = PARTS;
    for (int p = 0; p < PARTS; p++) {
        gr_list_offsets_request_list_offsets_partition_init(&body->topics.items[0].partitions.items[p]);
        body->topics.items[0].partitions.items[p].partition_index = p;
        body->topics.items[0].partitions.items[p].timestamp = -3; /* max timestamp: reads the file */
    }
    req->body = body;
    req->resp = gr_arena_alloc(&req->arena, sizeof(struct gr_list_offsets_response));
    gr_list_offsets_response_init(req->resp);
    assert_int_equal(gr_handle_list_offsets(req), GR_HANDLER_WAIT);
    int rounds = run_pool(f, 16);
    assert_int_equal(f->b->parked_count, 0); /* answered (and freed) */
    assert_true(rounds >= 1 && rounds <= 3);
    assert_int_equal(fault_count_this_thread(F_OPEN), opens);
}

/* A partition named twice (Kafka's ListOffsetsRequest.duplicatePartitions): one entry, INVALID_REQUEST; the
   topic named twice: one topic entry; the other partitions answered. Issue 17 item 7. */
static void test_list_offsets_duplicates(void **state)
{
    struct fx *f = *state;
    static const int32_t first[] = {0, 1, 0, 2, 2, 2}, second[] = {3, 1};
    const int32_t *lists[] = {first, second};
    int counts[] = {6, 2};
    struct gr_req *req = new_req(f, 2, 7);
    struct gr_list_offsets_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_list_offsets_request_init(body);
    body->topics.items = gr_arena_calloc(&req->arena, 2, sizeof *body->topics.items);
    body->topics.count = 2;
    for (int i = 0; i < 2; i++) {
        struct gr_list_offsets_request_list_offsets_topic *qt = &body->topics.items[i];
        qt->name = gr_str_c("w");
        qt->partitions.items = gr_arena_calloc(&req->arena, (size_t)counts[i], sizeof *qt->partitions.items);
        qt->partitions.count = counts[i];
        for (int p = 0; p < counts[i]; p++) {
            gr_list_offsets_request_list_offsets_partition_init(&qt->partitions.items[p]);
            qt->partitions.items[p].partition_index = lists[i][p];
            qt->partitions.items[p].timestamp = -1;
        }
    }
    req->body = body;
    struct gr_list_offsets_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
    gr_list_offsets_response_init(resp);
    req->resp = resp;
    assert_int_equal(gr_handle_list_offsets(req), GR_HANDLER_DONE);
    assert_int_equal(resp->topics.count, 1);
    assert_int_equal(resp->topics.items[0].partitions.count, 4);
    static const int32_t want_index[] = {0, 1, 2, 3};
    static const int16_t want_error[] = {GR_ERR_INVALID_REQUEST, GR_ERR_INVALID_REQUEST,
                                         GR_ERR_INVALID_REQUEST, 0};
    for (int p = 0; p < 4; p++) {
        struct gr_list_offsets_response_list_offsets_partition_response *rp =
            &resp->topics.items[0].partitions.items[p];
        assert_int_equal(rp->partition_index, want_index[p]);
        assert_int_equal(rp->error_code, want_error[p]);
        assert_int_equal(rp->offset, p < 3 ? -1 : 0); /* partition 3: the high watermark of an empty log */
        assert_int_equal(rp->timestamp, -1);
    }
    gr_req_free(req);
}

/* A topic named with an empty partition list gets no entry, known or not (Kafka 4.4 answers only the
   partitions asked for); the topic beside it is answered. */
static void test_list_offsets_empty_partition_list(void **state)
{
    struct fx *f = *state;
    static const char *const names[] = {"w", "nosuch", "w", "w"};
    static const int counts[] = {0, 0, 1, 0};
    for (int n = 1; n <= 4; n += 3) { /* the first topic alone (nothing to answer), then all four */
        struct gr_req *req = new_req(f, 2, 7);
        struct gr_list_offsets_request *body = gr_arena_alloc(&req->arena, sizeof *body);
        gr_list_offsets_request_init(body);
        body->topics.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *body->topics.items);
        body->topics.count = n;
        for (int i = 0; i < n; i++) {
            struct gr_list_offsets_request_list_offsets_topic *qt = &body->topics.items[i];
            qt->name = gr_str_c(names[i]);
            qt->partitions.items = gr_arena_calloc(&req->arena, 1, sizeof *qt->partitions.items);
            qt->partitions.count = counts[i];
            gr_list_offsets_request_list_offsets_partition_init(&qt->partitions.items[0]);
            qt->partitions.items[0].partition_index = 1;
            qt->partitions.items[0].timestamp = -1;
        }
        req->body = body;
        struct gr_list_offsets_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
        gr_list_offsets_response_init(resp);
        req->resp = resp;
        assert_int_equal(gr_handle_list_offsets(req), GR_HANDLER_DONE);
        if (n == 1) {
            assert_int_equal(resp->topics.count, 0);
        } else {
            assert_int_equal(resp->topics.count, 1);
            assert_true(gr_str_eq_c(resp->topics.items[0].name, "w"));
            assert_int_equal(resp->topics.items[0].partitions.count, 1);
            assert_int_equal(resp->topics.items[0].partitions.items[0].partition_index, 1);
            assert_int_equal(resp->topics.items[0].partitions.items[0].error_code, 0);
        }
        gr_req_free(req);
    }
}

int main(void)
{
    for (int p = 0; p < PARTS; p++)
        all_parts[p] = p;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wide_produce_one_round, setup, teardown),
        cmocka_unit_test_setup_teardown(test_markers_gated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coordinator_markers_gated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_while_gated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_over_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_duplicates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_empty_partition_list, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
