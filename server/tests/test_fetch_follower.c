/*
 * test_fetch_follower.c: the Fetch handler serves a leader's followers (server/handlers/fetch.c,
 * partition/read.c), driven in-process: a broker (node 1) whose partition t/0 leads replicas {1,2,3} (ISR
 * all, min.insync.replicas 2, gr_partition_set_role), raw Fetch v15 requests with ReplicaState from brokers
 * 2 and 3 and consumers' requests beside them, answers checked as they are released (no connection).
 *
 * Covers: a follower's Fetch v15 reads up to the log end offset while a consumer's reads nothing (high
 * watermark 0), both told the leader's high watermark; the follower's FetchOffset, broker epoch and
 * LogStartOffset are recorded (gr_partition_replica); a parked follower fetch is answered by an append that
 * does not move the high watermark, with just the new batch, while a parked consumer fetch stays parked
 * until a follower's fetch moves the high watermark (woken inside it); Fetch v14's ReplicaId
 * field is read as the fetcher too; a broker outside the replica set gets UNKNOWN_LEADER_EPOCH.
 * Read next: server/handlers/fetch.c, partition/tests/test_fetch_follower.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/handlers/handlers.h"
#include "server/tests/fixture.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
    struct gr_topic *t;
    struct gr_log *log;
    struct gr_partition *part;
};

/* What a released Fetch answered for its one partition. */
struct answer {
    int32_t replica_id;
    int16_t error_code;
    int64_t high_watermark, last_stable_offset, log_start_offset;
    int32_t records_bytes;
};

#define ANSWERS_MAX 8
static struct answer answers[ANSWERS_MAX];
static int answer_count;

static void released(struct gr_req *req)
{
    if (req->hdr.request_api_key != 1) return;
    const struct gr_fetch_request *body = req->body;
    const struct gr_fetch_response *resp = req->resp;
    assert_true(answer_count < ANSWERS_MAX);
    assert_int_equal(resp->responses.count, 1);
    assert_int_equal(resp->responses.items[0].partitions.count, 1);
    const struct gr_fetch_response_partition_data *rp = &resp->responses.items[0].partitions.items[0];
    answers[answer_count++] = (struct answer){
        .replica_id = req->hdr.request_api_version >= 15 ? body->replica_state.replica_id : body->replica_id,
        .error_code = rp->error_code,
        .high_watermark = rp->high_watermark,
        .last_stable_offset = rp->last_stable_offset,
        .log_start_offset = rp->log_start_offset,
        .records_bytes = gr_records_len(rp->records)};
}
static const struct gr_req_sink test_sink = {.released = released};

static int64_t hook_broker_epoch(void *ctx, int32_t broker_id, bool *shutting_down)
{
    (void)ctx;
    *shutting_down = false;
    return broker_id >= 1 && broker_id <= 3 ? 100 + broker_id : -1;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.node_id = 1});
    assert_int_equal(gr_store_topic_create(f->b->store, "t", 1, NULL, NULL, 0, &f->t), 0);
    f->log = gr_topic_log(f->t, 0);
    assert_non_null(f->part = gr_broker_partition(f->b, f->log));
    struct gr_partition_repl_config rc = {.broker_epoch = hook_broker_epoch};
    gr_partitions_set_replication(f->b->parts, &rc);
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_partition_role_change c = {GR_PARTITION_LEADER, 1, 1, 1, replicas, 3, replicas, 3, 2, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    f->b->req_sink = &test_sink;
    answer_count = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    f->b->req_sink = NULL;
    srv_broker_close(f->b, f->dir, NULL);
    free(f);
    return 0;
}

/* Appends one batch of `count` records through the partition. Returns its length in bytes. */
static int32_t append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *batch = th_simple(count, 1000, 3, &len);
    struct gr_append_result res;
    assert_int_equal(gr_partition_append(f->part, batch, len, -1, &res), 0);
    free(batch);
    return (int32_t)len;
}

#define NEW(req, type) ((struct type *)gr_arena_calloc(&(req)->arena, 1, sizeof(struct type)))

/* Runs a Fetch at `version` of t/0 from `replica_id` (-1: a consumer; broker epoch 100 + id) at `offset`,
   waiting up to `max_wait_ms`. Returns the handler's code (always WAIT: answered inside or parked). */
static enum gr_handler_rc fetch(struct fx *f, int16_t version, int32_t replica_id, int64_t offset,
                                int32_t max_wait_ms)
{
    struct gr_req *req = srv_req_new(f->b, 1, version, 1 << 20);
    struct gr_fetch_request *body = NEW(req, gr_fetch_request);
    gr_fetch_request_init(body);
    if (version >= 15) {
        body->replica_state.replica_id = replica_id;
        body->replica_state.replica_epoch = replica_id >= 0 ? 100 + replica_id : -1;
    } else {
        body->replica_id = replica_id;
    }
    body->max_wait_ms = max_wait_ms;
    body->min_bytes = 1;
    body->max_bytes = 1 << 20;
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    struct gr_fetch_request_fetch_topic *qt = &body->topics.items[0];
    qt->topic = gr_str_c("t");
    memcpy(qt->topic_id.b, gr_topic_id(f->t), 16);
    qt->partitions.items = gr_arena_calloc(&req->arena, 1, sizeof *qt->partitions.items);
    qt->partitions.count = 1;
    gr_fetch_request_fetch_partition_init(&qt->partitions.items[0]);
    qt->partitions.items[0].partition = 0;
    qt->partitions.items[0].current_leader_epoch = 1;
    qt->partitions.items[0].fetch_offset = offset;
    qt->partitions.items[0].log_start_offset = 0;
    qt->partitions.items[0].partition_max_bytes = 1 << 20;
    req->body = body;
    req->resp = NEW(req, gr_fetch_response);
    gr_fetch_response_init(req->resp);
    return gr_handle_fetch(req);
}

static void expect_answer(int i, int32_t replica_id, int16_t error_code, int64_t hw, int32_t records_bytes)
{
    assert_true(i < answer_count);
    assert_int_equal(answers[i].replica_id, replica_id);
    assert_int_equal(answers[i].error_code, error_code);
    assert_int_equal(answers[i].high_watermark, hw);
    assert_int_equal(answers[i].records_bytes, records_bytes);
    if (error_code == 0) {
        assert_int_equal(answers[i].last_stable_offset, hw);
        assert_int_equal(answers[i].log_start_offset, 0);
    }
}

static void test_follower_fetch_v15(void **state)
{
    struct fx *f = *state;
    int32_t len1 = append(f, 3);
    /* a consumer reads below the high watermark (0: no follower fetched), a follower up to the end */
    assert_int_equal(fetch(f, 15, -1, 0, 0), GR_HANDLER_WAIT);
    assert_int_equal(fetch(f, 15, 2, 0, 0), GR_HANDLER_WAIT);
    assert_int_equal(answer_count, 2);
    expect_answer(0, -1, GR_ERR_NONE, 0, 0);
    expect_answer(1, 2, GR_ERR_NONE, 0, len1);
    const struct gr_replica_state *rs = gr_partition_replica(f->part, 2);
    assert_true(rs->fetched);
    assert_int_equal(rs->log_end_offset, 0);
    assert_int_equal(rs->log_start_offset, 0);
    assert_int_equal(rs->broker_epoch, 102);
    /* Fetch v14 names the fetcher in ReplicaId: broker 3 at 3, recorded without a broker epoch */
    assert_int_equal(fetch(f, 14, 3, 3, 0), GR_HANDLER_WAIT);
    expect_answer(2, 3, GR_ERR_NONE, 0, 0);
    assert_int_equal(gr_partition_replica(f->part, 3)->log_end_offset, 3);
    assert_int_equal(gr_partition_replica(f->part, 3)->broker_epoch, -1);
    /* broker 4 is not a replica (the request carries a leader epoch): UNKNOWN_LEADER_EPOCH */
    assert_int_equal(fetch(f, 15, 4, 0, 0), GR_HANDLER_WAIT);
    expect_answer(3, 4, GR_ERR_UNKNOWN_LEADER_EPOCH, -1, 0);
}

static void test_follower_long_poll(void **state)
{
    struct fx *f = *state;
    int32_t len1 = append(f, 3);
    /* both parked: the consumer at 0 (nothing visible), the follower at the log end offset */
    assert_int_equal(fetch(f, 15, -1, 0, 60000), GR_HANDLER_WAIT);
    assert_int_equal(fetch(f, 15, 3, 3, 60000), GR_HANDLER_WAIT);
    assert_int_equal(answer_count, 0);
    assert_int_equal(f->b->parked_count, 2);
    /* an append moves the log end offset only: the follower is answered with the new batch */
    int32_t len2 = append(f, 2);
    assert_int_equal(answer_count, 1);
    expect_answer(0, 3, GR_ERR_NONE, 0, len2);
    assert_int_equal(f->b->parked_count, 1);
    /* the followers' next fetches: 2 at 5 moves the high watermark to 3 (3 is at 3), which wakes the
       consumer inside 2's fetch: answered first, with the first batch; then 3 at 5 moves it to 5 */
    assert_int_equal(fetch(f, 15, 2, 5, 0), GR_HANDLER_WAIT);
    assert_int_equal(gr_partition_visible_offset(f->part), 3);
    assert_int_equal(answer_count, 3);
    expect_answer(1, -1, GR_ERR_NONE, 3, len1);
    expect_answer(2, 2, GR_ERR_NONE, 0, 0); /* the high watermark as read, before 2's state moved it */
    assert_int_equal(fetch(f, 15, 3, 5, 0), GR_HANDLER_WAIT);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    expect_answer(3, 3, GR_ERR_NONE, 3, 0);
    assert_int_equal(f->b->parked_count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_follower_fetch_v15, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_long_poll, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
