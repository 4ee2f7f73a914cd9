/*
 * test_produce_idempotence.c: the Produce handler's side of the idempotent producer, with a real store and
 * fdatasync held back by a gate (storage's syscall shim): a retry of a batch whose original still waits for
 * its fsync (acks=-1) gets the original's offset but stays parked until the ORIGINAL is durable, an acks=1
 * retry is answered at once with the original's offset, and the per-partition errors 45 and 47 are mapped
 * (with a null error_message, as Kafka 4.4).
 * Read next: server/handlers/produce.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/handlers/handlers.h"
#include "storage/sys.h"
#include "storage/tests/helpers.h"

void gr_broker_init_watchers(struct gr_broker *b);
void gr_broker_on_flushed(void *ctx, struct gr_log *log, int64_t durable_end_offset, int err);

static atomic_bool gate_closed;

static int gated_fdatasync(int fd)
{
    while (atomic_load(&gate_closed))
        usleep(1000);
    return fdatasync(fd);
}

struct fx {
    char dir[64];
    struct gr_broker *b;
    struct gr_log *log;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    gr_sys.fdatasync = gated_fdatasync;
    atomic_store(&gate_closed, false);
    struct gr_broker *b = calloc(1, sizeof *b);
    gr_config_init(&b->cfg);
    b->loop = ev_loop_new(EVFLAG_AUTO);
    gr_broker_init_watchers(b);
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    sc.on_flushed = gr_broker_on_flushed;
    sc.on_flushed_ctx = b;
    assert_int_equal(gr_store_open(&sc, &b->store), 0);
    b->parts = gr_partitions_create(&(struct gr_partitions_config){b->store, true});
    assert_non_null(b->parts);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(b->store, "p", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    f->b = b;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    atomic_store(&gate_closed, false);
    while (f->b->parked_head) {
        struct gr_req *r = f->b->parked_head;
        gr_req_free(r);
    }
    gr_store_close(f->b->store);
    gr_sys_reset();
    ev_loop_destroy(f->b->loop);
    gr_config_free(&f->b->cfg);
    gr_partitions_destroy(f->b->parts); /* as main.c does at shutdown */
    free(f->b->flushed);                /* completions queued for the loop this test does not run */
    free(f->b);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* A Produce v9 request (no connection) carrying a fresh copy of one batch of producer pid/epoch/seq. */
static struct gr_req *produce_req(struct fx *f, int16_t acks, int64_t pid, int16_t epoch, int32_t seq,
                                  int32_t n)
{
    struct gr_req *req = calloc(1, sizeof *req);
    req->broker = f->b;
    gr_arena_init(&req->arena, 1 << 20);
    req->hdr.request_api_key = 0;
    req->hdr.request_api_version = 9;
    struct th_batch_spec s = {.count = n,
                              .ts0 = 1700000000000,
                              .ts_step = 1,
                              .tag = (uint32_t)seq,
                              .value_bytes = 8,
                              .producer_id = pid,
                              .producer_epoch = epoch,
                              .base_sequence = seq};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    uint8_t *copy = gr_arena_alloc(&req->arena, len);
    memcpy(copy, b, len);
    free(b);
    struct gr_produce_request *body = gr_arena_alloc(&req->arena, sizeof *body);
    gr_produce_request_init(body);
    body->transactional_id = GR_STR_NULL;
    body->acks = acks;
    body->timeout_ms = 30000;
    body->topic_data.items = gr_arena_calloc(&req->arena, 1, sizeof *body->topic_data.items);
    body->topic_data.count = 1;
    body->topic_data.items[0].name = gr_str_c("p");
    body->topic_data.items[0].partition_data.items =
        gr_arena_calloc(&req->arena, 1, sizeof *body->topic_data.items[0].partition_data.items);
    body->topic_data.items[0].partition_data.count = 1;
    body->topic_data.items[0].partition_data.items[0].index = 0;
    body->topic_data.items[0].partition_data.items[0].records = (struct gr_bytes){copy, (int32_t)len};
    req->body = body;
    struct gr_produce_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
    gr_produce_response_init(resp);
    req->resp = resp;
    return req;
}

static struct gr_produce_response_partition_produce_response *pr_of(struct gr_req *req)
{
    struct gr_produce_response *resp = req->resp;
    return &resp->responses.items[0].partition_responses.items[0];
}

static void wait_durable(struct fx *f, int64_t offset)
{
    for (int i = 0; i < 10000 && gr_log_durable_offset(f->log) < offset; i++)
        usleep(1000);
    assert_true(gr_log_durable_offset(f->log) >= offset);
}

static void test_retry_waits_for_the_original(void **state)
{
    struct fx *f = *state;
    struct gr_req *warm = produce_req(f, -1, 5, 0, 0, 2); /* offsets 0-1, made durable first */
    assert_int_equal(gr_handle_produce(warm), GR_HANDLER_WAIT);
    wait_durable(f, 2);
    gr_broker_wake_parked(f->b); /* finishes (and frees: no connection) the first request */
    assert_int_equal(f->b->parked_count, 0);

    atomic_store(&gate_closed, true);                     /* from here no fdatasync completes */
    struct gr_req *orig = produce_req(f, -1, 5, 0, 2, 3); /* offsets 2-4 */
    assert_int_equal(gr_handle_produce(orig), GR_HANDLER_WAIT);
    assert_int_equal(pr_of(orig)->base_offset, 2);
    struct gr_req *other = produce_req(f, 1, 6, 0, 0, 1); /* another producer, offset 5, acks=1 */
    assert_int_equal(gr_handle_produce(other), GR_HANDLER_DONE);
    gr_req_free(other);

    struct gr_req *retry = produce_req(f, -1, 5, 0, 2, 3);
    assert_int_equal(gr_handle_produce(retry), GR_HANDLER_WAIT);
    assert_int_equal(pr_of(retry)->error_code, GR_ERR_NONE);
    assert_int_equal(pr_of(retry)->base_offset, 2);
    assert_int_equal(gr_log_end_offset(f->log), 6); /* nothing written */
    /* The retry is parked beside the original: not answered while the original is not durable. */
    assert_int_equal(f->b->parked_count, 2);
    gr_broker_wake_parked(f->b);
    assert_int_equal(f->b->parked_count, 2);

    /* acks=1: answered at once with the original's offset (the original is written). */
    struct gr_req *retry1 = produce_req(f, 1, 5, 0, 2, 3);
    assert_int_equal(gr_handle_produce(retry1), GR_HANDLER_DONE);
    assert_int_equal(pr_of(retry1)->base_offset, 2);
    assert_int_equal(pr_of(retry1)->log_append_time_ms, 1700000000002); /* Kafka: the original's max ts */
    gr_req_free(retry1);

    atomic_store(&gate_closed, false);
    wait_durable(f, 6);
    gr_broker_wake_parked(f->b);
    assert_int_equal(f->b->parked_count, 0);
}

static void test_errors_per_partition(void **state)
{
    struct fx *f = *state;
    struct gr_req *r = produce_req(f, 1, 9, 2, 0, 2);
    assert_int_equal(gr_handle_produce(r), GR_HANDLER_DONE);
    assert_int_equal(pr_of(r)->base_offset, 0);
    gr_req_free(r);
    r = produce_req(f, 1, 9, 2, 5, 1); /* gap */
    assert_int_equal(gr_handle_produce(r), GR_HANDLER_DONE);
    assert_int_equal(pr_of(r)->error_code, GR_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(pr_of(r)->base_offset, -1);
    assert_int_equal(pr_of(r)->error_message.len, -1); /* null, as Kafka 4.4: an error met in the log */
    gr_req_free(r);
    r = produce_req(f, 1, 9, 1, 2, 1); /* older epoch */
    assert_int_equal(gr_handle_produce(r), GR_HANDLER_DONE);
    assert_int_equal(pr_of(r)->error_code, GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(pr_of(r)->error_message.len, -1);
    gr_req_free(r);
    r = produce_req(f, 0, 9, 2, 7, 1); /* acks=0 with an error: the connection is closed, as Kafka does */
    assert_int_equal(gr_handle_produce(r), GR_HANDLER_CLOSE);
    gr_req_free(r);
    assert_int_equal(gr_log_end_offset(f->log), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_retry_waits_for_the_original, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_per_partition, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
