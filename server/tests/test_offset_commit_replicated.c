/*
 * test_offset_commit_replicated.c: OffsetCommit on a replicated __consumer_offsets partition
 * (server/handlers/offset_commit.c), driven in-process: a single-node group coordinator (gr_groups_start)
 * whose offsets partition of group "g" is made the leader of replicas {1,2,3} (ISR all,
 * gr_partition_set_role), the followers' fetches played as gr_partition_update_follower_fetch_state calls,
 * answers checked as they are released (no connection).
 *
 * Covers: a commit waits until the high watermark passes it (Kafka 4's coordinator runtime) and then answers
 * NONE; a waiting commit whose coordinator becomes the partition's follower answers NOT_COORDINATOR at once
 * (its record may be truncated away; before, it waited for the visible offset and answered NONE or timed
 * out), as Kafka's runtime fails pending writes when it unloads the partition.
 * Read next: server/handlers/offset_commit.c, coordinator/group.c (gr_coord_write_error).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"
#include "server/tests/fixture.h"

#define LOOP_MS_MAX 4000 /* bound on any loop run by a test: a broken wait fails, never hangs */

struct fx {
    char dir[64];
    struct gr_broker *b;
    struct gr_partition *part; /* the offsets partition of group "g" */
};

static int16_t answers[8];
static int answer_count;

static void released(struct gr_req *req)
{
    if (req->hdr.request_api_key != 8) return;
    const struct gr_offset_commit_response *resp = req->resp;
    assert_true(answer_count < 8);
    assert_int_equal(resp->topics.count, 1);
    assert_int_equal(resp->topics.items[0].partitions.count, 1);
    answers[answer_count++] = resp->topics.items[0].partitions.items[0].error_code;
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
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.node_id = 1});
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->b->store, "t", 1, NULL, NULL, 0, &t), 0);
    assert_int_equal(gr_groups_start(f->b), 0);
    int32_t p = gr_coord_partition(f->b->coord, gr_str_c("g"));
    struct gr_log *log = gr_offsets_log_log(gr_groups_offsets_log(f->b), p);
    assert_non_null(log);
    assert_non_null(f->part = gr_broker_partition(f->b, log));
    struct gr_partition_repl_config rc = {.broker_epoch = hook_broker_epoch};
    gr_partitions_set_replication(f->b->parts, &rc);
    struct gr_partition_role_change c = {GR_PARTITION_LEADER, 1, 1, 1, replicas, 3, replicas, 3, 1, 0};
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

#define NEW(req, type) ((struct type *)gr_arena_calloc(&(req)->arena, 1, sizeof(struct type)))

/* OffsetCommit v8 of t/0 at `offset` for the simple consumer group "g". Returns the handler's code. */
static enum gr_handler_rc commit(struct fx *f, int64_t offset)
{
    struct gr_req *req = srv_req_new(f->b, 8, 8, 1 << 16);
    struct gr_offset_commit_request *body = NEW(req, gr_offset_commit_request);
    gr_offset_commit_request_init(body);
    body->group_id = gr_str_c("g");
    body->generation_id_or_member_epoch = -1;
    body->member_id = gr_str_c("");
    body->group_instance_id = GR_STR_NULL;
    body->topics.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items);
    body->topics.count = 1;
    gr_offset_commit_request_offset_commit_request_topic_init(&body->topics.items[0]);
    body->topics.items[0].name = gr_str_c("t");
    body->topics.items[0].partitions.items =
        gr_arena_calloc(&req->arena, 1, sizeof *body->topics.items[0].partitions.items);
    body->topics.items[0].partitions.count = 1;
    gr_offset_commit_request_offset_commit_request_partition_init(&body->topics.items[0].partitions.items[0]);
    body->topics.items[0].partitions.items[0].partition_index = 0;
    body->topics.items[0].partitions.items[0].committed_offset = offset;
    req->body = body;
    req->resp = NEW(req, gr_offset_commit_response);
    gr_offset_commit_response_init(req->resp);
    enum gr_handler_rc rc = gr_handle_offset_commit(req);
    if (rc == GR_HANDLER_DONE) gr_req_finish(req); /* what the dispatcher does: released, freed */
    return rc;
}

/* Follower `id`'s fetch at `offset`. */
static void fetch(struct fx *f, int32_t id, int64_t offset)
{
    struct gr_follower_fetch ff = {id, 100 + id, offset, 0, gr_time_mono_ms()};
    assert_int_equal(gr_partition_update_follower_fetch_state(f->part, &ff), 0);
}

/* Runs the broker's loop until `n` answers were released or `ms` passed (at most LOOP_MS_MAX; the commit's
   own timeout is 5 s). */
static void run_until(struct fx *f, int n, int64_t ms)
{
    int64_t until = gr_time_mono_ms() + (ms < LOOP_MS_MAX ? ms : LOOP_MS_MAX);
    while (gr_time_mono_ms() < until && answer_count < n)
        ev_run(f->b->loop, EVRUN_NOWAIT);
}

static void test_waits_for_high_watermark(void **state)
{
    struct fx *f = *state;
    int64_t hw = gr_partition_visible_offset(f->part);
    assert_int_equal(commit(f, 5), GR_HANDLER_WAIT);
    int64_t end = gr_log_end_offset(gr_partition_log(f->part));
    assert_true(end > hw);
    run_until(f, 1, 300);
    assert_int_equal(answer_count, 0); /* the followers have not fetched it */
    fetch(f, 2, end);
    assert_int_equal(answer_count, 0); /* the high watermark still waits for 3 */
    fetch(f, 3, end);
    run_until(f, 1, 1000);
    assert_int_equal(answer_count, 1);
    assert_int_equal(answers[0], GR_ERR_NONE);
}

static void test_follower_is_not_coordinator(void **state)
{
    struct fx *f = *state;
    assert_int_equal(commit(f, 7), GR_HANDLER_WAIT);
    struct gr_partition_role_change c = {GR_PARTITION_FOLLOWER, 2, 2, 2, replicas, 3, replicas, 3, 1, 0};
    assert_int_equal(gr_partition_set_role(f->part, &c), 0);
    assert_int_equal(answer_count, 1); /* at once, not at the 5 s timeout */
    assert_int_equal(answers[0], GR_ERR_NOT_COORDINATOR);
}

/* Kafka 4's CoordinatorOperationExceptionHelper table. */
static void test_write_error_table(void **state)
{
    (void)state;
    const int16_t table[][2] = {
        {GR_ERR_NONE, GR_ERR_NONE},
        {GR_ERR_UNKNOWN_TOPIC_OR_PARTITION, GR_ERR_COORDINATOR_NOT_AVAILABLE},
        {GR_ERR_NOT_ENOUGH_REPLICAS, GR_ERR_COORDINATOR_NOT_AVAILABLE},
        {GR_ERR_REQUEST_TIMED_OUT, GR_ERR_COORDINATOR_NOT_AVAILABLE},
        {GR_ERR_NOT_LEADER_OR_FOLLOWER, GR_ERR_NOT_COORDINATOR},
        {GR_ERR_KAFKA_STORAGE_ERROR, GR_ERR_NOT_COORDINATOR},
        {GR_ERR_MESSAGE_TOO_LARGE, GR_ERR_UNKNOWN_SERVER_ERROR},
        {GR_ERR_RECORD_LIST_TOO_LARGE, GR_ERR_UNKNOWN_SERVER_ERROR},
        {GR_ERR_INVALID_FETCH_SIZE, GR_ERR_UNKNOWN_SERVER_ERROR},
        {GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND, GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND},
        {GR_ERR_INVALID_COMMIT_OFFSET_SIZE, GR_ERR_INVALID_COMMIT_OFFSET_SIZE},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (gr_coord_write_error(table[i][0]) != table[i][1])
            fail_msg("error %d: %d, expected %d", table[i][0], gr_coord_write_error(table[i][0]),
                     table[i][1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_waits_for_high_watermark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_is_not_coordinator, setup, teardown),
        cmocka_unit_test(test_write_error_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
