/*
 * test_producer_id_wait.c: the named wait "until the block is saved" (coordinator/producer_ids.h
 * gr_producer_id_wait). The binding here is a fake pool: submit keeps the job, the test runs it (run, then
 * done, as the I/O pool and the owning thread would), and a fake clock. Checked: the done hook is called
 * exactly once per wait, at once when an id is there, after the save otherwise (in arrival order, more
 * waiters than a block holds), never after cancel (cancel when idle does nothing), a failed save answers
 * COORDINATOR_LOAD_IN_PROGRESS (14) and backs off 50 ms, a refusing binding (stopping) and the inline mode.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/producer_ids.h"
#include "protocol/errors.h"

struct mem_disk {
    uint8_t rec[GR_PRODUCER_ID_RECORD_BYTES];
    bool present;
    int saves;
    int fail_save; /* next save returns this when non-zero */
};

static int mem_load(void *ctx, uint8_t *buf, size_t len)
{
    struct mem_disk *d = ctx;
    if (!d->present) return -ENOENT;
    memcpy(buf, d->rec, len);
    return 0;
}

static int mem_save(void *ctx, const uint8_t *buf, size_t len)
{
    struct mem_disk *d = ctx;
    if (d->fail_save) {
        int e = d->fail_save;
        d->fail_save = 0;
        return e;
    }
    memcpy(d->rec, buf, len);
    d->present = true;
    d->saves++;
    return 0;
}

struct fake_pool {
    struct gr_io_job *job; /* submitted, not yet run */
    int submits;
    bool refuse; /* the broker is stopping */
    int64_t now_ms;
};

static bool fake_submit(void *ctx, struct gr_io_job *job)
{
    struct fake_pool *p = ctx;
    if (p->refuse) return false;
    assert_null(p->job); /* at most one save in flight */
    p->job = job;
    p->submits++;
    return true;
}

static int64_t fake_now(void *ctx)
{
    return ((struct fake_pool *)ctx)->now_ms;
}

/* Runs the submitted save as the pool would, then its completion on the owning thread. */
static void run_save(struct fake_pool *p)
{
    struct gr_io_job *job = p->job;
    assert_non_null(job);
    p->job = NULL;
    job->run(job);
    job->done(job);
}

struct rec_waiter {
    struct gr_producer_id_waiter w;
    int calls;
    int16_t error_code;
    int64_t producer_id;
    int order; /* the value of `seq` when it was called */
};

static int seq;

static void on_done(struct gr_producer_id_waiter *w, int16_t error_code, int64_t producer_id)
{
    struct rec_waiter *r = w->ctx;
    assert_false(gr_producer_id_waiting(w)); /* idle again inside the hook */
    r->calls++;
    r->error_code = error_code;
    r->producer_id = producer_id;
    r->order = seq++;
}

static void rw_init(struct rec_waiter *r)
{
    memset(r, 0, sizeof *r);
    r->w.done = on_done;
    r->w.ctx = r;
    r->producer_id = -7;
}

struct fixture {
    struct mem_disk d;
    struct fake_pool p;
    struct gr_producer_id_manager mgr;
};

static void open_fx(struct fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    struct gr_producer_id_io io = {mem_load, mem_save, &fx->d};
    struct gr_producer_id_binding bind = {fake_submit, fake_now, &fx->p};
    assert_int_equal(gr_producer_id_manager_open(&fx->mgr, &io, &bind), 0);
}

/* A fresh manager starts the first block's save at open; a wait before it completes is answered after the
   save (not before, not twice); later waits are answered at once, inside the wait call. */
static void test_after_save_then_at_once(void **state)
{
    (void)state;
    struct fixture fx;
    open_fx(&fx);
    assert_int_equal(fx.p.submits, 1);
    struct rec_waiter a;
    rw_init(&a);
    gr_producer_id_wait(&fx.mgr, &a.w);
    assert_int_equal(a.calls, 0);
    assert_true(gr_producer_id_waiting(&a.w));
    assert_int_equal(fx.d.saves, 0);
    run_save(&fx.p);
    assert_int_equal(fx.d.saves, 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.error_code, GR_ERR_NONE);
    assert_int_equal(a.producer_id, 0);
    assert_false(gr_producer_id_waiting(&a.w));
    for (int64_t i = 1; i < 5; i++) {
        struct rec_waiter b;
        rw_init(&b);
        gr_producer_id_wait(&fx.mgr, &b.w);
        assert_int_equal(b.calls, 1); /* at once */
        assert_int_equal(b.error_code, GR_ERR_NONE);
        assert_int_equal(b.producer_id, i);
        assert_false(gr_producer_id_waiting(&b.w));
    }
    assert_int_equal(a.calls, 1); /* exactly once */
    assert_null(fx.p.job);        /* no save due before 90% of the block */
}

/* More waiters than one block holds: the first 1000 get the block in arrival order after its save, the
   rest wait for the next block's save (started from the completion), each called exactly once. */
static void test_many_waiters_in_order(void **state)
{
    (void)state;
    struct fixture fx;
    open_fx(&fx);
    enum { N = 1003 };
    static struct rec_waiter ws[N];
    seq = 0;
    for (int i = 0; i < N; i++) {
        rw_init(&ws[i]);
        gr_producer_id_wait(&fx.mgr, &ws[i].w);
        assert_int_equal(ws[i].calls, 0);
    }
    run_save(&fx.p); /* block [0, 1000) */
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(ws[i].calls, 1);
        assert_int_equal(ws[i].producer_id, i);
        assert_int_equal(ws[i].order, i);
    }
    for (int i = 1000; i < N; i++)
        assert_int_equal(ws[i].calls, 0);
    assert_non_null(fx.p.job); /* the next block's save, started by the completion */
    run_save(&fx.p);           /* block [1000, 2000) */
    for (int i = 0; i < N; i++) {
        assert_int_equal(ws[i].calls, 1);
        assert_int_equal(ws[i].error_code, GR_ERR_NONE);
        assert_int_equal(ws[i].producer_id, i);
    }
    assert_int_equal(fx.d.saves, 2);
}

/* A cancelled waiter is never called; the one behind it gets the first id; cancelling an idle waiter (never
   queued, or done) does nothing. */
static void test_cancel(void **state)
{
    (void)state;
    struct fixture fx;
    open_fx(&fx);
    struct rec_waiter a, b, c, idle;
    rw_init(&a);
    rw_init(&b);
    rw_init(&c);
    rw_init(&idle);
    gr_producer_id_wait_cancel(&idle.w); /* never queued */
    gr_producer_id_wait(&fx.mgr, &a.w);
    gr_producer_id_wait(&fx.mgr, &b.w);
    gr_producer_id_wait(&fx.mgr, &c.w);
    gr_producer_id_wait_cancel(&a.w);
    gr_producer_id_wait_cancel(&c.w); /* the tail */
    assert_false(gr_producer_id_waiting(&a.w));
    assert_true(gr_producer_id_waiting(&b.w));
    run_save(&fx.p);
    assert_int_equal(a.calls, 0);
    assert_int_equal(c.calls, 0);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.producer_id, 0);
    gr_producer_id_wait_cancel(&b.w); /* after done: nothing */
    assert_int_equal(b.calls, 1);
    assert_int_equal(idle.calls, 0);
    struct rec_waiter d;
    rw_init(&d);
    gr_producer_id_wait(&fx.mgr, &d.w);
    assert_int_equal(d.producer_id, 1);
}

/* A failed save answers every waiter COORDINATOR_LOAD_IN_PROGRESS (Kafka's answer while it has no block)
   with id -1, hands nothing out, and no save starts for 50 ms (waits meanwhile get the error at once). */
static void test_save_error(void **state)
{
    (void)state;
    struct fixture fx;
    open_fx(&fx);
    struct rec_waiter a, b;
    rw_init(&a);
    rw_init(&b);
    gr_producer_id_wait(&fx.mgr, &a.w);
    gr_producer_id_wait(&fx.mgr, &b.w);
    fx.d.fail_save = -EIO;
    fx.p.now_ms = 1000;
    run_save(&fx.p);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(a.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(a.error_code, 14);
    assert_int_equal(a.producer_id, -1);
    assert_int_equal(b.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_false(fx.d.present);
    assert_null(fx.p.job);
    fx.p.now_ms = 1000 + GR_PRODUCER_ID_RETRY_BACKOFF_MS - 1;
    struct rec_waiter c;
    rw_init(&c);
    gr_producer_id_wait(&fx.mgr, &c.w); /* within the back-off: at once */
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_null(fx.p.job);
    fx.p.now_ms = 1000 + GR_PRODUCER_ID_RETRY_BACKOFF_MS;
    struct rec_waiter e;
    rw_init(&e);
    gr_producer_id_wait(&fx.mgr, &e.w); /* the retry starts; it waits for it */
    assert_int_equal(e.calls, 0);
    run_save(&fx.p);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.error_code, GR_ERR_NONE);
    assert_int_equal(e.producer_id, 0);
}

/* A binding that refuses saves (the broker is stopping): nothing waits, the answer is at once. */
static void test_refusing_binding(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct fake_pool p = {.refuse = true};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_id_binding bind = {fake_submit, fake_now, &p};
    struct gr_producer_id_manager mgr;
    assert_int_equal(gr_producer_id_manager_open(&mgr, &io, &bind), 0);
    struct rec_waiter a;
    rw_init(&a);
    gr_producer_id_wait(&mgr, &a.w);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_false(gr_producer_id_waiting(&a.w));
    p.refuse = false; /* a later wait starts the save */
    struct rec_waiter b;
    rw_init(&b);
    gr_producer_id_wait(&mgr, &b.w);
    assert_int_equal(b.calls, 0);
    run_save(&p);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.producer_id, 0);
}

/* No submit hook: the save runs inside the wait, which answers at once; a failed inline save is error 14. */
static void test_inline(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_id_binding bind = {NULL, NULL, NULL};
    struct gr_producer_id_manager mgr;
    assert_int_equal(gr_producer_id_manager_open(&mgr, &io, &bind), 0);
    assert_int_equal(d.saves, 0);
    struct rec_waiter a;
    rw_init(&a);
    d.fail_save = -ENOSPC;
    gr_producer_id_wait(&mgr, &a.w);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    struct rec_waiter b;
    rw_init(&b);
    gr_producer_id_wait(&mgr, &b.w);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.error_code, GR_ERR_NONE);
    assert_int_equal(b.producer_id, 0);
    assert_int_equal(d.saves, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_after_save_then_at_once),
        cmocka_unit_test(test_many_waiters_in_order),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_save_error),
        cmocka_unit_test(test_refusing_binding),
        cmocka_unit_test(test_inline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
