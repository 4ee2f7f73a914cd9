/*
 * test_waitq.c: per-log wait lists (server/waitq.h): a wake calls only the waiters of that queue, oldest
 * first; an owner waiting on several queues is removed from all of them; a waiter may remove itself (and
 * its other nodes) while being woken; 10,000 waiters on 1,000 queues cost one call per waiter of the woken
 * queue.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "server/waitq.h"

struct owner {
    struct gr_wait_node nodes[4];
    int n;
    int woken;
    int order;
    bool finish_on_wake; /* remove every node when woken, as finishing a request does */
};

static int wake_seq;

static void owner_remove_all(struct owner *o)
{
    for (int i = 0; i < o->n; i++)
        gr_waitq_remove(&o->nodes[i]);
}

static void on_wake(void *owner, void *ctx)
{
    (void)ctx;
    struct owner *o = owner;
    o->woken++;
    o->order = ++wake_seq;
    if (o->finish_on_wake) owner_remove_all(o);
}

static void wait_on(struct owner *o, struct gr_waitq *q)
{
    gr_waitq_add(q, &o->nodes[o->n++], o);
}

static void test_wake_only_that_queue(void **state)
{
    (void)state;
    struct gr_waitq a = {0}, b = {0};
    struct owner x = {0}, y = {0}, z = {0};
    wait_on(&x, &a);
    wait_on(&y, &b);
    wait_on(&z, &a);
    wake_seq = 0;
    assert_int_equal(gr_waitq_wake(&a, on_wake, NULL), 2);
    assert_int_equal(x.woken, 1);
    assert_int_equal(y.woken, 0);
    assert_int_equal(z.woken, 1);
    assert_true(x.order < z.order); /* oldest first */
    assert_int_equal(a.count, 2);   /* not finished: still waiting */
}

static void test_finish_removes_from_every_queue(void **state)
{
    (void)state;
    struct gr_waitq a = {0}, b = {0}, c = {0};
    struct owner x = {.finish_on_wake = true}, y = {.finish_on_wake = true};
    wait_on(&x, &a);
    wait_on(&x, &b);
    wait_on(&x, &c);
    wait_on(&y, &b);
    assert_int_equal(gr_waitq_wake(&b, on_wake, NULL), 2);
    assert_int_equal(a.count, 0);
    assert_int_equal(b.count, 0);
    assert_int_equal(c.count, 0);
    assert_null(a.head);
    assert_null(b.head);
    assert_null(c.head);
    assert_int_equal(gr_waitq_wake(&c, on_wake, NULL), 0);
    assert_int_equal(x.woken, 1);
}

static void test_remove_middle_and_tail(void **state)
{
    (void)state;
    struct gr_waitq q = {0};
    struct owner o[5] = {0};
    for (int i = 0; i < 5; i++)
        wait_on(&o[i], &q);
    gr_waitq_remove(&o[2].nodes[0]);
    gr_waitq_remove(&o[4].nodes[0]);
    gr_waitq_remove(&o[4].nodes[0]); /* twice: nothing */
    struct owner late = {0};
    wait_on(&late, &q); /* appended after the old tail was removed */
    wake_seq = 0;
    assert_int_equal(gr_waitq_wake(&q, on_wake, NULL), 4);
    assert_int_equal(o[0].order, 1);
    assert_int_equal(o[1].order, 2);
    assert_int_equal(o[3].order, 3);
    assert_int_equal(late.order, 4);
    assert_int_equal(o[2].woken + o[4].woken, 0);
}

static void test_many_waiters_cost_per_queue(void **state)
{
    (void)state;
    enum { QUEUES = 1000, OWNERS = 10000 };
    struct gr_waitq *qs = calloc(QUEUES, sizeof *qs);
    struct owner *os = calloc(OWNERS, sizeof *os);
    for (int i = 0; i < OWNERS; i++)
        wait_on(&os[i], &qs[i % QUEUES]);
    int calls = 0;
    for (int k = 0; k < 100; k++)
        calls += gr_waitq_wake(&qs[7], on_wake, NULL);
    assert_int_equal(calls, 100 * (OWNERS / QUEUES)); /* 100 wakes x 10 waiters, not x 10,000 */
    for (int i = 0; i < OWNERS; i++)
        assert_int_equal(os[i].woken, i % QUEUES == 7 ? 100 : 0);
    free(qs);
    free(os);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wake_only_that_queue),
        cmocka_unit_test(test_finish_removes_from_every_queue),
        cmocka_unit_test(test_remove_middle_and_tail),
        cmocka_unit_test(test_many_waiters_cost_per_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
