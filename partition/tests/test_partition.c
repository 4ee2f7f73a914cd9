/*
 * test_partition.c: the partition layer (partition/partition.h) on a real log in a temporary directory, no
 * server and no event loop: the test plays the owning thread and hands flush completions over itself
 * (th_wait_durable, then gr_partition_flushed), as the server's loop does.
 *
 * Covers: the visible offset in both modes (log end offset; durable offset) and that storage is told of it
 * (the high watermark); each named wait (committed, data, log start durable) is done exactly once: at once
 * when already satisfied, on the waking event, never after cancel, never by an event that does not
 * satisfy it; cancel after done is a no-op; failing a partition (deleted) and an offline log (EIO on
 * fdatasync) give done with an error; a done hook may cancel a waiter on the firing list or queue itself
 * again; gr_partition_append appends and tells the partition.
 * Read next: partition/partition.h.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "partition/partition.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
};

/* A waiter that counts its done calls. */
struct counted {
    struct gr_partition_waiter w;
    int calls;
    int err;
    struct gr_partition_waiter *cancel_on_done; /* cancelled from inside the done hook */
};

static void counted_done(struct gr_partition_waiter *w, int err)
{
    struct counted *c = (struct counted *)w;
    c->calls++;
    c->err = err;
    if (c->cancel_on_done) gr_partition_wait_cancel(c->cancel_on_done);
}

static void counted_init(struct counted *c)
{
    *c = (struct counted){0};
    gr_partition_waiter_init(&c->w, counted_done, c);
}

static void fx_open(struct fx *f, bool durable)
{
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    struct gr_topic *t = gr_store_topic_find(f->store, "p", 1);
    if (!t) assert_int_equal(gr_store_topic_create(f->store, "p", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    struct gr_partitions_config pc = {f->store, durable};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    assert_ptr_equal(gr_partition_get(f->ps, f->log), f->part); /* one object per log */
    assert_ptr_equal(gr_partition_log(f->part), f->log);
}

static int setup_mode(void **state, bool durable)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    fx_open(f, durable);
    *state = f;
    return 0;
}

static int setup_end(void **state)
{
    return setup_mode(state, false);
}

static int setup_durable(void **state)
{
    return setup_mode(state, true);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    fault_uninstall();
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Appends `count` records and tells the partition. Returns the log end offset after them. */
static int64_t append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000, 7, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    gr_partition_appended(f->part);
    return res.last_offset + 1;
}

/* Waits for the flushers to make the log durable to `end`, then hands the completion to the partition. */
static void flushed(struct fx *f, int64_t end)
{
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, end), 0);
    gr_partition_flushed(f->part);
}

static void test_visible_offset_is_log_end(void **state)
{
    struct fx *f = *state;
    assert_false(gr_partitions_visible_is_durable(f->ps));
    assert_int_equal(gr_partition_visible_offset(f->part), 0);
    int64_t end = append(f, 5);
    assert_int_equal(end, 5);
    assert_int_equal(gr_partition_visible_offset(f->part), 5); /* before any fdatasync */
    assert_int_equal(gr_log_high_watermark(f->log), 5);        /* storage was told */
}

static void test_visible_offset_is_durable(void **state)
{
    struct fx *f = *state;
    assert_true(gr_partitions_visible_is_durable(f->ps));
    int64_t end = append(f, 5); /* appended asks for the flush itself */
    assert_int_equal(th_wait_durable(f->log, end), 0);
    assert_int_equal(gr_partition_visible_offset(f->part), 5);
    assert_int_equal(gr_log_high_watermark(f->log), 5);
    /* a write is visible only once an fdatasync covers it (the flushers run meanwhile: whatever they did,
       the visible offset is the durable offset) */
    size_t len;
    uint8_t *b = th_simple(3, 1000, 8, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    int64_t durable = gr_log_durable_offset(f->log);
    int64_t v = gr_partition_visible_offset(f->part);
    assert_true(v >= durable && v <= gr_log_durable_offset(f->log));
    assert_true(v == 5 || v == 8);
    flushed(f, 8);
    assert_int_equal(gr_partition_visible_offset(f->part), 8);
}

static void test_committed_at_once_and_on_append(void **state)
{
    struct fx *f = *state;
    int64_t end = append(f, 4);
    struct counted a, b;
    counted_init(&a);
    gr_partition_wait_committed(f->part, &a.w, end); /* already committed: done inside the call */
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_false(gr_partition_waiting(&a.w));
    assert_int_equal(gr_partition_waiter_count(f->part), 0);
    counted_init(&b);
    gr_partition_wait_committed(f->part, &b.w, end + 2);
    assert_int_equal(b.calls, 0);
    assert_true(gr_partition_waiting(&b.w));
    assert_int_equal(gr_partition_waiter_count(f->part), 1);
    append(f, 1); /* end + 1: not enough */
    assert_int_equal(b.calls, 0);
    gr_partition_flushed(f->part); /* nothing changed for it: harmless */
    assert_int_equal(b.calls, 0);
    append(f, 1); /* end + 2 */
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, 0);
    append(f, 1);
    gr_partition_flushed(f->part);
    assert_int_equal(b.calls, 1); /* exactly once */
    assert_int_equal(a.calls, 1);
    gr_partition_wait_cancel(&b.w); /* cancel after done: nothing */
    assert_int_equal(b.calls, 1);
    assert_int_equal(gr_partition_waiter_count(f->part), 0);
}

static void test_committed_waits_for_flush(void **state)
{
    struct fx *f = *state;
    struct counted a;
    counted_init(&a);
    gr_partition_wait_committed(f->part, &a.w, 3);
    int64_t end = append(f, 3); /* written, not durable: an append does not wake a committed wait here */
    assert_int_equal(end, 3);
    assert_int_equal(a.calls, 0);
    assert_int_equal(th_wait_durable(f->log, end), 0);
    assert_int_equal(a.calls, 0); /* durable, but nobody told the owning thread yet */
    gr_partition_flushed(f->part);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    gr_partition_flushed(f->part);
    assert_int_equal(a.calls, 1);
}

static void test_data_wait(void **state)
{
    struct fx *f = *state;
    int64_t end = append(f, 2);
    struct counted a, b;
    counted_init(&a);
    gr_partition_wait_data(f->part, &a.w, end - 1); /* a record past end - 1 is visible already */
    assert_int_equal(a.calls, 1);
    counted_init(&b);
    gr_partition_wait_data(f->part, &b.w, gr_partition_visible_offset(f->part)); /* past what is visible */
    assert_int_equal(b.calls, 0);
    gr_partition_flushed(f->part);
    assert_int_equal(b.calls, 0);
    append(f, 1); /* data arrives */
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, 0);
    append(f, 1);
    assert_int_equal(b.calls, 1);
}

static void test_data_wait_durable_mode_wakes_on_flush(void **state)
{
    struct fx *f = *state;
    struct counted a;
    counted_init(&a);
    gr_partition_wait_data(f->part, &a.w, 0);
    int64_t end = append(f, 2);
    assert_int_equal(a.calls, 0); /* written is not visible in this mode */
    flushed(f, end);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
}

/* gr_partition_append: gr_log_append, then the partition is told (its data waiters see the records). */
static void test_append_through_partition(void **state)
{
    struct fx *f = *state;
    struct counted a;
    counted_init(&a);
    gr_partition_wait_data(f->part, &a.w, 0);
    size_t len;
    uint8_t *b = th_simple(3, 1000, 9, &len);
    struct gr_append_result res;
    assert_int_equal(gr_partition_append(f->part, b, len, -1, &res), 0);
    free(b);
    assert_int_equal(res.base_offset, 0);
    assert_int_equal(res.last_offset, 2);
    assert_int_equal(a.calls, 1);
    assert_int_equal(gr_partition_visible_offset(f->part), 3);
    uint8_t junk[8] = {0};
    assert_int_equal(gr_partition_append(f->part, junk, sizeof junk, -1, &res),
                     -EINVAL); /* as gr_log_append */
    assert_int_equal(gr_log_end_offset(f->log), 3);
}

static void test_cancel(void **state)
{
    struct fx *f = *state;
    struct counted a, b, idle;
    counted_init(&a);
    counted_init(&b);
    counted_init(&idle);
    gr_partition_wait_cancel(&idle.w); /* never queued: nothing */
    gr_partition_wait_committed(f->part, &a.w, 1);
    gr_partition_wait_data(f->part, &b.w, 0);
    assert_int_equal(gr_partition_waiter_count(f->part), 2);
    gr_partition_wait_cancel(&a.w);
    gr_partition_wait_cancel(&a.w); /* twice: nothing */
    assert_false(gr_partition_waiting(&a.w));
    assert_int_equal(gr_partition_waiter_count(f->part), 1);
    append(f, 1);
    assert_int_equal(a.calls, 0); /* never after cancel */
    assert_int_equal(b.calls, 1);
    /* a cancelled waiter may be queued again */
    gr_partition_wait_committed(f->part, &a.w, 2);
    append(f, 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(idle.calls, 0);
}

/* Two waiters of one request woken by the same event: the first one's done finishes the request and
 * cancels the second, which is already on the firing list: its done must not run. */
static void test_cancel_from_done_while_firing(void **state)
{
    struct fx *f = *state;
    struct counted a, b, c;
    counted_init(&a);
    counted_init(&b);
    counted_init(&c);
    gr_partition_wait_committed(f->part, &a.w, 1);
    gr_partition_wait_data(f->part, &b.w, 0);
    gr_partition_wait_committed(f->part, &c.w, 1);
    a.cancel_on_done = &b.w;
    append(f, 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(gr_partition_waiter_count(f->part), 0);
}

/* A done hook queuing its waiter again (the long poll that saw too few bytes). */
struct requeue {
    struct gr_partition_waiter w;
    struct gr_partition *part;
    int calls;
};

static void requeue_done(struct gr_partition_waiter *w, int err)
{
    struct requeue *r = (struct requeue *)w;
    assert_int_equal(err, 0);
    if (++r->calls < 3) gr_partition_wait_data(r->part, w, gr_partition_visible_offset(r->part));
}

static void test_requeue_from_done(void **state)
{
    struct fx *f = *state;
    struct requeue r = {.part = f->part};
    gr_partition_waiter_init(&r.w, requeue_done, &r);
    gr_partition_wait_data(f->part, &r.w, 0);
    for (int i = 1; i <= 4; i++) {
        append(f, 1);
        assert_int_equal(r.calls, i < 3 ? i : 3); /* once per append while queued, then never */
    }
    assert_false(gr_partition_waiting(&r.w));
}

static void test_fail_gives_error(void **state)
{
    struct fx *f = *state;
    struct counted a, b, c;
    counted_init(&a);
    counted_init(&b);
    counted_init(&c);
    gr_partition_wait_committed(f->part, &a.w, 10);
    gr_partition_wait_data(f->part, &b.w, 10);
    gr_partition_wait_log_start_durable(f->part, &c.w, INT64_MAX); /* a ticket never written */
    assert_int_equal(gr_partition_waiter_count(f->part), 3);
    gr_partition_fail(f->part, -ENOENT); /* the topic was deleted */
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, -ENOENT);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, -ENOENT);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.err, -ENOENT);
    gr_partition_fail(f->part, -ENOENT);
    append(f, 11);
    assert_int_equal(a.calls + b.calls + c.calls, 3);
}

static void test_offline_gives_error(void **state)
{
    struct fx *f = *state;
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    fault_install(); /* only while no store is open */
    th_flush_reset();
    fx_open(f, true);
    struct counted a, b;
    counted_init(&a);
    counted_init(&b);
    gr_partition_wait_committed(f->part, &a.w, 1);
    gr_partition_wait_data(f->part, &b.w, 5);
    fault_fail(F_FDATASYNC, 1, EIO, true);
    fault_fail(F_SYNCFS, 1, EIO, true);
    append(f, 1);
    assert_int_equal(th_wait_durable(f->log, 1), -EIO); /* the fsync failed: the log is offline */
    assert_true(gr_log_offline(f->log));
    assert_int_equal(a.calls, 0);
    gr_partition_flushed(f->part); /* the completion reaches the owning thread */
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, -EROFS);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, -EROFS);
    struct counted c;
    counted_init(&c);
    gr_partition_wait_committed(f->part, &c.w, 1); /* offline already: done at once with the error */
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.err, -EROFS);
}

static void test_log_start_durable(void **state)
{
    struct fx *f = *state;
    append(f, 10);
    assert_int_equal(gr_log_delete_records_begin(f->log, 4), 1);
    int64_t ticket;
    assert_int_equal(gr_store_log_start_checkpoint_async(f->store, &ticket), 0);
    struct counted a;
    counted_init(&a);
    gr_partition_wait_log_start_durable(f->part, &a.w, ticket);
    if (a.calls == 0) { /* not written yet (the usual case) */
        append(f, 1);   /* an append is not the checkpoint */
        assert_int_equal(a.calls, 0);
        assert_int_equal(gr_store_checkpoint_wait(f->store, ticket), 0);
        gr_partition_flushed(f->part);
    }
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_int_equal(gr_log_delete_records_end(f->log, 4, 0), 0);
    assert_int_equal(gr_log_start_offset(f->log), 4);
    struct counted b;
    counted_init(&b);
    gr_partition_wait_log_start_durable(f->part, &b.w, ticket); /* durable already: at once */
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, 0);
    gr_partition_flushed(f->part);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_visible_offset_is_log_end, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_visible_offset_is_durable, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_committed_at_once_and_on_append, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_committed_waits_for_flush, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_data_wait, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_data_wait_durable_mode_wakes_on_flush, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_append_through_partition, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_from_done_while_firing, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_requeue_from_done, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_fail_gives_error, setup_end, teardown),
        cmocka_unit_test_setup_teardown(test_offline_gives_error, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_log_start_durable, setup_end, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
