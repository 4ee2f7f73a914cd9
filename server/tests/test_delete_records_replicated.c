/*
 * test_delete_records_replicated.c: DeleteRecords on a leader with followers
 * (server/handlers/delete_records.c and delete_records_wait.c), driven in-process: a broker (node 1) whose
 * partition t/0 leads replicas {1,2,3} (ISR all, gr_partition_set_role), flush completions delivered through
 * the broker's loop (run by the test, bounded), the followers' fetches played as
 * gr_partition_update_follower_fetch_state calls, answers checked as they are released (no connection).
 *
 * Covers: an offset beyond the high watermark (held back by a follower) answers OFFSET_OUT_OF_RANGE at once
 * with low_watermark -1; an offset below it moves the leader's log start offset, then waits until both
 * followers reported log start offsets at or past it and answers the low watermark (the smallest of
 * them); a wait whose followers do not catch up within timeout_ms answers REQUEST_TIMED_OUT with the low
 * watermark of the local deletion; a waiting request whose leader becomes follower answers
 * NOT_LEADER_OR_FOLLOWER; a request on a leader alone answers at once with its log start offset.
 * Read next: server/handlers/delete_records_wait.c, partition/tests/test_hw_bounds.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/time.h"
#include "server/handlers/handlers.h"
#include "server/tests/fixture.h"
#include "storage/tests/helpers.h"

#define LOOP_MS_MAX 10000 /* bound on any loop run by a test: a broken wait fails, never hangs */

struct fx {
    char dir[64];
    struct gr_broker *b;
    struct gr_topic *t;
    struct gr_log *log;
    struct gr_partition *part;
};

/* What a released DeleteRecords answered for its one partition. */
struct answer {
    int16_t error_code;
    int64_t low_watermark;
};

#define ANSWERS_MAX 8
static struct answer answers[ANSWERS_MAX];
static int answer_count;

static void released(struct gr_req *req)
{
    if (req->hdr.request_api_key != 21) return;
    const struct gr_delete_records_response *resp = req->resp;
    assert_true(answer_count < ANSWERS_MAX);
    assert_int_equal(resp->topics.count, 1);
    assert_int_equal(resp->topics.items[0].partitions.count, 1);
    const struct gr_delete_records_response_delete_records_partition_result *rp =
        &resp->topics.items[0].partitions.items[0];
    answers[answer_count++] = (struct answer){rp->error_code, rp->low_watermark};
}
static const struct gr_req_sink test_sink = {.released = released};

static int64_t hook_broker_epoch(void *ctx, int32_t broker_id, bool *shutting_down)
{
    (void)ctx;
    *shutting_down = false;
    return broker_id >= 1 && broker_id <= 3 ? 100 + broker_id : -1;
}

static const int32_t replicas[] = {1, 2, 3};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b =
        srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.node_id = 1, .on_flushed = true});
    assert_int_equal(gr_store_topic_create(f->b->store, "t", 1, NULL, NULL, 0, &f->t), 0);
    f->log = gr_topic_log(f->t, 0);
    assert_non_null(f->part = gr_broker_partition(f->b, f->log));
    struct gr_partition_repl_config rc = {.broker_epoch = hook_broker_epoch};
    gr_partitions_set_replication(f->b->parts, &rc);
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

/* Makes node 1 the leader of {1,2,3} (ISR all, min ISR 1) at leader epoch 1. */
static void lead(struct fx *f)
{
    struct gr_partition_role_change c = {GR_PARTITION_LEADER, 1, 1, 1, replicas, 3, replicas, 3, 1, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
}

/* Appends one batch of `count` records through the partition. */
static void append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *batch = th_simple(count, 1000, 3, &len);
    struct gr_append_result res;
    assert_int_equal(gr_partition_append(f->part, batch, len, -1, &res), 0);
    free(batch);
}

/* Follower `id`'s fetch at `offset` reporting log start offset `log_start`. */
static void fetch(struct fx *f, int32_t id, int64_t offset, int64_t log_start)
{
    struct gr_follower_fetch ff = {id, 100 + id, offset, log_start, gr_time_mono_ms()};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &ff), 0);
}

#define NEW(req, type) ((struct type *)gr_arena_calloc(&(req)->arena, 1, sizeof(struct type)))

/* Runs DeleteRecords v2 of t/0 to `offset` with `timeout_ms`. Returns the handler's code. */
static enum gr_handler_rc delete_records(struct fx *f, int64_t offset, int32_t timeout_ms)
{
    struct gr_req *req = srv_req_new(f->b, 21, 2, 1 << 16);
    struct gr_delete_records_request *dr = NEW(req, gr_delete_records_request);
    gr_delete_records_request_init(dr);
    dr->timeout_ms = timeout_ms;
    dr->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *dr->topics.items);
    dr->topics.count = 1;
    dr->topics.items[0].name = gr_str_c("t");
    dr->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, 1, sizeof(*dr->topics.items[0].partitions.items));
    dr->topics.items[0].partitions.count = 1;
    dr->topics.items[0].partitions.items[0].partition_index = 0;
    dr->topics.items[0].partitions.items[0].offset = offset;
    req->body = dr;
    req->resp = NEW(req, gr_delete_records_response);
    gr_delete_records_response_init(req->resp);
    enum gr_handler_rc rc = gr_handle_delete_records(req);
    if (rc == GR_HANDLER_DONE) gr_req_finish(req); /* what the dispatcher does: released, freed */
    return rc;
}

/* Runs the broker's loop until `n` answers were released or (with `start` >= 0) the log start offset
   reached `start`, at most LOOP_MS_MAX. */
static void run_until(struct fx *f, int n, int64_t start)
{
    int64_t until = gr_time_mono_ms() + LOOP_MS_MAX;
    while (gr_time_mono_ms() < until && answer_count < n &&
           (start < 0 || gr_log_start_offset(f->log) < start))
        ev_run(f->b->loop, EVRUN_NOWAIT);
}

static void test_waits_for_followers_log_start(void **state)
{
    struct fx *f = *state;
    lead(f);
    append(f, 10);
    fetch(f, 2, 10, 0);
    fetch(f, 3, 7, 0); /* 3 holds the high watermark at 7 */
    assert_int_equal(gr_partition_visible_offset(f->part), 7);
    /* beyond the high watermark: OFFSET_OUT_OF_RANGE at once */
    assert_int_equal(delete_records(f, 8, 30000), GR_HANDLER_DONE);
    assert_int_equal(answer_count, 1);
    assert_int_equal(answers[0].error_code, GR_ERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(answers[0].low_watermark, -1);
    assert_int_equal(gr_log_start_offset(f->log), 0);
    /* below it: the leader deletes, then waits for both followers' log start offsets */
    assert_int_equal(delete_records(f, 5, 30000), GR_HANDLER_WAIT);
    run_until(f, 2, 5); /* the checkpoint is written, the leader's log start offset moves */
    assert_int_equal(gr_log_start_offset(f->log), 5);
    assert_int_equal(answer_count, 1);
    fetch(f, 2, 10, 5);
    assert_int_equal(answer_count, 1); /* 3 still at 0 */
    assert_int_equal(f->b->parked_count, 1);
    fetch(f, 3, 10, 6);                /* 3 went further by its own retention: the low watermark is 5 */
    assert_int_equal(answer_count, 2); /* answered inside 3's fetch */
    assert_int_equal(f->b->parked_count, 0);
    assert_int_equal(answers[1].error_code, GR_ERR_NONE);
    assert_int_equal(answers[1].low_watermark, 5);
}

static void test_checkpoint_then_low_watermark(void **state)
{
    struct fx *f = *state;
    lead(f);
    append(f, 10);
    fetch(f, 2, 10, 0);
    fetch(f, 3, 10, 0);
    assert_int_equal(delete_records(f, 4, 30000), GR_HANDLER_WAIT);
    run_until(f, 1, 4);
    assert_int_equal(answer_count, 0);
    fetch(f, 2, 10, 4);
    fetch(f, 3, 10, 4); /* both caught up before the request's re-check saw the checkpoint */
    run_until(f, 1, -1);
    assert_int_equal(answer_count, 1);
    assert_int_equal(answers[0].error_code, GR_ERR_NONE);
    assert_int_equal(answers[0].low_watermark, 4);
}

static void test_timeout_and_leader_change(void **state)
{
    struct fx *f = *state;
    lead(f);
    append(f, 10);
    fetch(f, 2, 10, 0);
    fetch(f, 3, 10, 2);
    /* timeout_ms 0: the followers do not catch up in time; the low watermark of the deletion (0) */
    assert_int_equal(delete_records(f, 3, 0), GR_HANDLER_WAIT);
    run_until(f, 1, -1);
    assert_int_equal(answer_count, 1);
    assert_int_equal(answers[0].error_code, GR_ERR_REQUEST_TIMED_OUT);
    assert_int_equal(answers[0].low_watermark, 0);
    assert_int_equal(gr_log_start_offset(f->log), 3); /* deleted here all the same, as Kafka */
    /* a waiting request whose leader becomes follower */
    assert_int_equal(delete_records(f, 6, 30000), GR_HANDLER_WAIT);
    run_until(f, 2, 6);
    assert_int_equal(answer_count, 1);
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 2, 2, replicas, 3, replicas, 3, 1, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    run_until(f, 2, -1);
    assert_int_equal(answer_count, 2);
    assert_int_equal(answers[1].error_code, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(answers[1].low_watermark, -1);
}

static void test_leader_alone(void **state)
{
    struct fx *f = *state;
    append(f, 10); /* no role set: one node */
    assert_int_equal(delete_records(f, 4, 30000), GR_HANDLER_WAIT);
    run_until(f, 1, -1);
    assert_int_equal(answer_count, 1);
    assert_int_equal(answers[0].error_code, GR_ERR_NONE);
    assert_int_equal(answers[0].low_watermark, 4);
    assert_int_equal(delete_records(f, 2, 30000), GR_HANDLER_DONE); /* below the log start: at once */
    assert_int_equal(answer_count, 2);
    assert_int_equal(answers[1].error_code, GR_ERR_NONE);
    assert_int_equal(answers[1].low_watermark, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_waits_for_followers_log_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_then_low_watermark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_and_leader_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_alone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
