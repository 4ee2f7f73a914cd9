/*
 * test_request.c: the request lifecycle of server/request.c on a broker without connections (fixture.h):
 * per-request state slots (absent until added, zeroed, found again by their key only, a zero-byte mark);
 * parking (the parked list and count, unpark twice is a no-op); the deadline runs expire exactly once
 * when the loop reaches it, never after an unpark; finishing a request without a connection frees it and
 * takes it out of the parked list; gr_req_close and gr_req_peer without a connection do nothing; a handler
 * run by gr_req_run is parked while it runs, and one that returns gr_req_await with a timeout stays parked
 * with that deadline and expires exactly once; a request finished inside its handler is never parked or
 * armed afterwards, even when the handler then declares a wait.
 * Read next: server/request.c, server/tests/test_topic_ops.c (parking behind topic operations).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/time.h"
#include "server/tests/fixture.h"

struct fx {
    char dir[64];
    struct gr_broker *b;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){0});
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    srv_broker_close(f->b, f->dir, NULL);
    free(f);
    return 0;
}

static const char key_a, key_b;

static void test_state_slots(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = srv_req_new(f->b, GR_API_METADATA, 12, 1 << 16);
    assert_null(gr_req_state(req, &key_a));
    uint64_t *a = gr_req_state_add(req, &key_a, 4 * sizeof *a);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 16, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(a[i], 0);
    a[3] = 77;
    assert_ptr_equal(gr_req_state(req, &key_a), a);
    assert_null(gr_req_state(req, &key_b));
    void *mark = gr_req_state_add(req, &key_b, 0);
    assert_non_null(mark);
    assert_ptr_equal(gr_req_state(req, &key_b), mark);
    assert_int_equal(((uint64_t *)gr_req_state(req, &key_a))[3], 77);
    gr_req_free(req);
}

static int expired;

static void count_expire(struct gr_req *req)
{
    (void)req;
    expired++;
}

static void finish_expire(struct gr_req *req)
{
    expired++;
    gr_req_finish_silent(req); /* no connection: frees it */
}

static void test_park_unpark(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    struct gr_req *r1 = srv_req_new(b, GR_API_METADATA, 12, 1 << 16);
    struct gr_req *r2 = srv_req_new(b, GR_API_METADATA, 12, 1 << 16);
    gr_req_park(r1, INT64_MAX);
    gr_req_park(r2, INT64_MAX);
    assert_int_equal(b->parked_count, 2);
    assert_ptr_equal(b->parked_head, r2);
    assert_true(r1->parked && r2->parked);
    gr_req_unpark(r2);
    assert_int_equal(b->parked_count, 1);
    assert_ptr_equal(b->parked_head, r1);
    assert_false(r2->parked);
    gr_req_unpark(r2);
    assert_int_equal(b->parked_count, 1);
    gr_req_free(r2);
    gr_req_free(r1); /* freeing unparks */
    assert_int_equal(b->parked_count, 0);
    assert_null(b->parked_head);
}

static void test_deadline(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    expired = 0;
    /* a deadline already passed: the loop's next iteration runs expire, which finishes (frees) it */
    struct gr_req *r1 = srv_req_new(b, GR_API_METADATA, 12, 1 << 16);
    r1->expire = finish_expire;
    gr_req_park(r1, gr_time_mono_ms() - 1);
    /* a deadline 10 s ahead, unparked before it: expire never runs (20 ms was too short for a loaded
       machine: a descheduled test passed it before the first ev_run and counted 2) */
    struct gr_req *r2 = srv_req_new(b, GR_API_METADATA, 12, 1 << 16);
    r2->expire = count_expire;
    gr_req_park(r2, gr_time_mono_ms() + 10000);
    assert_int_equal(b->parked_count, 2);
    ev_run(b->loop, EVRUN_NOWAIT);
    assert_int_equal(expired, 1);
    assert_int_equal(b->parked_count, 1);
    assert_ptr_equal(b->parked_head, r2);
    assert_true(ev_is_active(&r2->deadline_w));
    gr_req_unpark(r2);
    assert_false(ev_is_active(&r2->deadline_w)); /* its deadline is gone with the park */
    int64_t until = gr_time_mono_ms() + 60;
    while (gr_time_mono_ms() < until)
        ev_run(b->loop, EVRUN_NOWAIT);
    assert_int_equal(expired, 1);
    /* parked again with a deadline: expire runs once when it passes */
    gr_req_park(r2, gr_time_mono_ms() + 5);
    until = gr_time_mono_ms() + 60;
    while (gr_time_mono_ms() < until && expired == 1)
        ev_run(b->loop, EVRUN_ONCE);
    assert_int_equal(expired, 2);
    assert_true(r2->parked); /* count_expire left it parked */
    gr_req_free(r2);
    assert_int_equal(b->parked_count, 0);
}

static void test_no_connection(void **state)
{
    struct fx *f = *state;
    struct gr_req *req = srv_req_new(f->b, GR_API_METADATA, 12, 1 << 16);
    assert_null(req->conn);
    assert_string_equal(gr_req_peer(req), "");
    gr_req_close(req, "test"); /* nothing to close */
    gr_req_park(req, INT64_MAX);
    assert_int_equal(f->b->parked_count, 1);
    gr_req_complete(req, GR_HANDLER_CLOSE); /* no connection: freed */
    assert_int_equal(f->b->parked_count, 0);
}

/* ---- gr_req_run and gr_req_await: handlers declare, request.c parks ---- */

static int parked_inside;

static enum gr_handler_rc done_handler(struct gr_req *req)
{
    parked_inside = req->parked && req->broker->parked_count == 1;
    return GR_HANDLER_DONE;
}

static enum gr_handler_rc await_handler(struct gr_req *req)
{
    parked_inside = req->parked;
    return gr_req_await(req, &(struct gr_await){.expire = finish_expire, .timeout_ms = 30});
}

static enum gr_handler_rc finish_inside_handler(struct gr_req *req)
{
    gr_req_finish_silent(req); /* as a wait already satisfied would: the request is answered */
    /* a wait declared after that is ignored: never parked or armed again */
    return gr_req_await(req, &(struct gr_await){.expire = count_expire, .timeout_ms = 1});
}

static void test_run_parks_while_handler_runs(void **state)
{
    struct fx *f = *state;
    struct gr_api api = {.name = "test", .handler = done_handler};
    struct gr_req *req = srv_req_new(f->b, GR_API_METADATA, 12, 1 << 16);
    req->api = &api;
    parked_inside = 0;
    gr_req_run(req); /* DONE without a connection: finished, unparked and freed */
    assert_int_equal(parked_inside, 1);
    assert_int_equal(f->b->parked_count, 0);
    assert_null(f->b->parked_head);
}

static void test_await_deadline_expires_once(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    struct gr_api api = {.name = "test", .handler = await_handler};
    struct gr_req *req = srv_req_new(b, GR_API_METADATA, 12, 1 << 16);
    req->api = &api;
    expired = 0;
    ev_now_update(b->loop); /* libev times from its cached loop time */
    int64_t before = gr_time_mono_ms();
    gr_req_run(req);
    int64_t after = gr_time_mono_ms();
    assert_int_equal(parked_inside, 1);
    assert_true(req->parked);
    assert_int_equal(b->parked_count, 1);
    assert_true(req->deadline_ms >= before + 30 && req->deadline_ms <= after + 30);
    assert_true(ev_is_active(&req->deadline_w));
    assert_ptr_equal(req->expire, finish_expire);
    int64_t until = gr_time_mono_ms() + 500;
    while (gr_time_mono_ms() < until && expired == 0)
        ev_run(b->loop, EVRUN_ONCE);
    assert_true(gr_time_mono_ms() >= before + 29); /* not before its deadline (1 ms: clock rounding) */
    assert_int_equal(expired, 1);                  /* finish_expire finished (freed) it */
    assert_int_equal(b->parked_count, 0);
    until = gr_time_mono_ms() + 50;
    while (gr_time_mono_ms() < until)
        ev_run(b->loop, EVRUN_NOWAIT);
    assert_int_equal(expired, 1);
}

static void test_finished_inside_never_parked_after(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    struct gr_api api = {.name = "test", .handler = finish_inside_handler};
    struct gr_req *req = srv_req_new(b, GR_API_METADATA, 12, 1 << 16);
    char conn_stand_in;
    req->conn = (struct gr_conn *)&conn_stand_in; /* kept after finishing (no sink in this broker) */
    req->api = &api;
    expired = 0;
    gr_req_run(req);
    assert_true(req->done);
    assert_false(req->parked);
    assert_int_equal(b->parked_count, 0);
    assert_null(b->parked_head);
    assert_false(ev_is_active(&req->deadline_w));
    assert_null(req->expire);
    int64_t until = gr_time_mono_ms() + 30;
    while (gr_time_mono_ms() < until)
        ev_run(b->loop, EVRUN_NOWAIT);
    assert_int_equal(expired, 0);
    req->conn = NULL;
    gr_req_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_state_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_park_unpark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_parks_while_handler_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_await_deadline_expires_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finished_inside_never_parked_after, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
