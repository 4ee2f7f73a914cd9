/*
 * test_faults.c: injected I/O faults through the syscall shim (fault.h). Short writes, ENOSPC on a
 * write and on a roll, a failed undo (the partition goes offline), EIO on fdatasync (offline, reported via
 * on_flushed, other partitions unaffected, restart recovers), and crash mode: the same workload crashed at
 * every I/O point in turn, the disk rewritten to what a power loss could leave, then reopened and checked
 * (every batch reported durable is there, nothing after a gap is served, producer state matches the log,
 * a log start offset DeleteRecords acknowledged is kept).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "storage/internal.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_log *log;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    fault_install();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"1000"};
    assert_int_equal(gr_store_topic_create(f->store, "f", 1, k, v, 1, &t), 0);
    f->log = gr_topic_log(t, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->store) gr_store_close(f->store);
    fault_uninstall(); /* the syscall table changes only while no store runs (sys.h) */
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static int try_append(struct gr_log *log, uint32_t tag, int64_t *base)
{
    size_t len;
    uint8_t *b = th_simple(3, 1000 + tag, tag, &len);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    if (err == 0 && base) *base = res.base_offset;
    return err;
}

static int64_t active_file_size(struct fx *f)
{
    struct stat st;
    struct gr_segment *seg = f->log->segs[f->log->seg_count - 1];
    assert_int_equal(fstat(seg->fd, &st), 0);
    return st.st_size;
}

static void check_tags(struct gr_log *log, int expect)
{
    struct th_seen *seen;
    int n = th_read_all(log, gr_log_start_offset(log), INT64_MAX, &seen);
    assert_int_equal(n, expect);
    for (int i = 0; i < n; i++)
        assert_int_equal(seen[i].tag, (uint32_t)i);
    free(seen);
}

static void test_short_write_completed(void **state)
{
    struct fx *f = *state;
    int64_t base;
    assert_int_equal(try_append(f->log, 0, &base), 0);
    long writes = fault_count(F_PWRITE);
    fault_short_write(1, 10);
    assert_int_equal(try_append(f->log, 1, &base), 0);
    assert_int_equal(base, 3);
    assert_int_equal(fault_count(F_PWRITE), writes + 2); /* the rest went in a second write */
    check_tags(f->log, 2);
}

static void test_short_write_then_enospc_undone(void **state)
{
    struct fx *f = *state;
    int64_t base;
    assert_int_equal(try_append(f->log, 0, &base), 0);
    int64_t size = active_file_size(f);
    fault_short_write(1, 10);
    fault_fail(F_PWRITE, 2, ENOSPC, false);
    assert_int_equal(try_append(f->log, 1, &base), -ENOSPC);
    assert_int_equal(active_file_size(f), size); /* the 10 bytes were truncated away */
    assert_int_equal(gr_log_end_offset(f->log), 3);
    assert_false(gr_log_offline(f->log));
    fault_fail(F_PWRITE, 1, ENOSPC, false);
    assert_int_equal(try_append(f->log, 1, &base), -ENOSPC);
    assert_int_equal(try_append(f->log, 1, &base), 0); /* space is back */
    assert_int_equal(base, 3);
    check_tags(f->log, 2);
    /* And it survives a restart: nothing torn was left behind. */
    gr_store_close(f->store);
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "f", 1), 0);
    check_tags(f->log, 2);
}

static void test_failed_undo_goes_offline(void **state)
{
    struct fx *f = *state;
    int64_t base;
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(try_append(f->log, i, &base), 0);
    fault_short_write(1, 10);
    fault_fail(F_PWRITE, 2, EIO, false);
    fault_fail(F_FTRUNCATE, 1, EIO, false);
    assert_int_equal(try_append(f->log, 3, &base), -EIO);
    assert_true(gr_log_offline(f->log));
    assert_int_equal(try_append(f->log, 3, &base), -EROFS);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, 0, 100, INT64_MAX, true, &s), -EROFS);
    /* 10 stray bytes remain on disk; a restart's recovery cuts them and the log is back online. */
    gr_store_close(f->store);
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "f", 1), 0);
    assert_false(gr_log_offline(f->log));
    assert_int_equal(gr_log_end_offset(f->log), 9);
    check_tags(f->log, 3);
    assert_int_equal(try_append(f->log, 3, &base), 0);
    assert_int_equal(base, 9);
}

static void test_enospc_on_roll(void **state)
{
    struct fx *f = *state;
    int64_t base;
    uint32_t i = 0;
    while (gr_log_segment_count(f->log) < 2)
        assert_int_equal(try_append(f->log, i++, &base), 0);
    /* The next roll that must create its files cannot: the append that needs it fails, nothing else
       changes. (A roll may first use a spare file made before the disk filled, storage/roll.c: then the
       roll after it is the one that fails.) */
    fault_fail(F_OPEN, 1, ENOSPC, true);
    int err, segs;
    for (;;) {
        segs = gr_log_segment_count(f->log);
        if ((err = try_append(f->log, i, &base)) != 0) break;
        i++;
    }
    assert_int_equal(err, -ENOSPC);
    int64_t leo = gr_log_end_offset(f->log);
    assert_int_equal(leo, 3 * (int64_t)i);
    assert_int_equal(gr_log_segment_count(f->log), segs);
    assert_false(gr_log_offline(f->log));
    char path[512];
    snprintf(path, sizeof(path), "%s/f-0/%020lld.log", f->dir, (long long)leo);
    assert_int_equal(access(path, F_OK), -1); /* no half-created segment left behind */
    fault_clear(F_OPEN);
    assert_int_equal(try_append(f->log, i, &base), 0);
    assert_int_equal(base, leo);
    assert_int_equal(gr_log_segment_count(f->log), segs + 1);
    check_tags(f->log, (int)i + 1);
}

static void test_eio_on_fsync_offline(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t2;
    assert_int_equal(gr_store_topic_create(f->store, "g", 1, NULL, NULL, 0, &t2), 0);
    struct gr_log *other = gr_topic_log(t2, 0);
    int64_t base;
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(try_append(f->log, i, &base), 0);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 12), 0);
    assert_int_equal(try_append(f->log, 4, &base), 0);
    fault_fail(F_FDATASYNC, 1, EIO, false);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 15), -EIO); /* reported through on_flushed */
    int last;
    assert_int_equal(th_flush_errors(&last), 1);
    assert_int_equal(last, -EIO);
    assert_true(gr_log_offline(f->log));
    assert_int_equal(gr_log_durable_offset(f->log), 12); /* never advanced past the failure */
    assert_int_equal(try_append(f->log, 5, &base), -EROFS);
    /* No retry proves anything: another flush request does nothing. */
    long syncs = fault_count(F_FDATASYNC);
    gr_log_flush_async(f->log);
    gr_store_quiesce(f->store);
    assert_int_equal(fault_count(F_FDATASYNC), syncs);
    /* Other partitions carry on. */
    assert_int_equal(try_append(other, 0, &base), 0);
    gr_log_flush_async(other);
    assert_int_equal(th_wait_durable(other, 3), 0);
    /* A restart recovers the partition (here the page cache still had the bytes). */
    gr_store_close(f->store);
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "f", 1), 0);
    assert_false(gr_log_offline(f->log));
    assert_int_equal(gr_log_end_offset(f->log), 15);
    assert_int_equal(gr_log_durable_offset(f->log), 15);
    check_tags(f->log, 5);
}

/* ---------------------------------------------------------------- crash mode */

#define CRASH_BATCHES 24

struct crash_run {
    int64_t base[CRASH_BATCHES];
    int appended;
    int64_t reported_durable;
    int64_t acked_log_start;
    bool topic_created;
};

static struct th_batch_spec crash_spec(uint32_t i)
{
    struct th_batch_spec s = {.count = 3,
                              .ts0 = 1000 + i,
                              .ts_step = 1,
                              .tag = i,
                              .producer_id = 100 + i % 3,
                              .producer_epoch = 0,
                              .base_sequence = 3 * (int32_t)(i / 3),
                              .value_bytes = 30};
    return s;
}

/* The workload: create, appends with producers, a group-commit flush every 4 batches, rolls, DeleteRecords.
 */
static void crash_workload(const struct gr_store_config *cfg, struct crash_run *run)
{
    memset(run, 0, sizeof(*run));
    run->reported_durable = 0;
    run->acked_log_start = 0;
    struct gr_store *store;
    if (gr_store_open(cfg, &store) < 0) return;
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"700"};
    if (gr_store_topic_create(store, "c", 1, k, v, 1, &t) == 0) {
        run->topic_created = true;
        struct gr_log *log = gr_topic_log(t, 0);
        for (uint32_t i = 0; i < CRASH_BATCHES; i++) {
            struct th_batch_spec s = crash_spec(i);
            size_t len;
            uint8_t *b = th_batch(&s, &len);
            struct gr_append_result res;
            int err = gr_log_append(log, b, len, -1, &res);
            free(b);
            if (err) break;
            run->base[i] = res.base_offset;
            run->appended = (int)i + 1;
            if (i % 4 == 3) {
                gr_log_flush_async(log);
                if (th_wait_durable(log, res.base_offset + 3) == 0 &&
                    res.base_offset + 3 > run->reported_durable)
                    run->reported_durable = res.base_offset + 3;
            }
            if (i == 14 && gr_log_delete_records(log, 10) == 0) run->acked_log_start = 10;
        }
        int64_t d = th_reported_durable();
        if (d > run->reported_durable) run->reported_durable = d;
    }
    gr_store_close(store);
}

static void crash_check(const struct gr_store_config *cfg, const struct crash_run *run, long point)
{
    struct gr_store *store;
    gr_log_set_level(getenv("GR_CRASH_VERBOSE") ? GR_LOG_DEBUG : (enum gr_log_level)(GR_LOG_ERROR + 1));
    int err = gr_store_open(cfg, &store);
    if (err) {
        print_error("crash point %ld: reopen failed %d\n", point, err);
        fail();
    }
    struct gr_topic *t = gr_store_topic_find(store, "c", 1);
    if (!t) {
        /* Only possible when the crash came before the topic file was durable. */
        assert_int_equal(run->reported_durable, 0);
        gr_store_close(store);
        return;
    }
    struct gr_log *log = gr_topic_log(t, 0);
    int64_t ls = gr_log_start_offset(log), leo = gr_log_end_offset(log);
    if (leo < run->reported_durable || ls < run->acked_log_start) {
        print_error("crash point %ld: log [%ld, %ld) but durable %ld reported, log start %ld acked\n", point,
                    (long)ls, (long)leo, (long)run->reported_durable, (long)run->acked_log_start);
        fail();
    }
    struct th_seen *seen;
    struct gr_producer_state replay;
    gr_producer_state_init(&replay);
    int n = th_read_all_ps(log, ls, INT64_MAX, &seen, &replay); /* contiguous, CRCs good */
    if (n < 0) {
        print_error("crash point %ld: log unreadable\n", point);
        fail();
    }
    int64_t covered = n ? seen[n - 1].last_offset + 1 : ls;
    assert_int_equal(covered, leo);
    for (int i = 0; i < n; i++) {
        uint32_t tag = seen[i].tag;
        if (tag >= CRASH_BATCHES || (int)tag >= run->appended || seen[i].base_offset != (int64_t)tag * 3) {
            print_error("crash point %ld: batch at %ld has tag %u\n", point, (long)seen[i].base_offset, tag);
            fail();
        }
    }
    free(seen);
    gr_producer_state_truncate_head(&replay, ls);
    if (!gr_producer_state_equal(&replay, gr_log_producer_state(log))) {
        print_error("crash point %ld: producer state differs from the log (%zu vs %zu producers)\n", point,
                    gr_producer_state_count(&replay), gr_producer_state_count(gr_log_producer_state(log)));
        fail();
    }
    gr_producer_state_free(&replay);
    /* The log takes appends again, at its end. */
    size_t len;
    uint8_t *b = th_simple(1, 0, 999, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    assert_int_equal(res.base_offset, leo);
    free(b);
    gr_store_close(store);
}

static void test_crash_at_every_io_point(void **state)
{
    (void)state;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR +
                                         1)); /* thousands of expected I/O errors: keep the output readable */
    char dir[64];
    th_tmpdir(dir, sizeof(dir));
    struct gr_store_config cfg;
    th_config(&cfg, dir);
    struct crash_run run;
    /* A dry run counts the I/O points. */
    fault_install();
    fault_crash_track(dir);
    crash_workload(&cfg, &run);
    long total = fault_io_count();
    fault_uninstall();
    assert_int_equal(run.appended, CRASH_BATCHES);
    assert_true(total > 100);
    th_rmtree(dir);
    long step = total / 400 + 1, checked = 0, with_data = 0;
    for (long iter = 0; iter < 2 * total; iter += step) {
        long point = iter % total + 1;
        bool tear = iter >= total; /* first pass: synced bytes only; second: plus torn unsynced tails */
        th_tmpdir(dir, sizeof(dir));
        th_config(&cfg, dir);
        fault_install();
        fault_crash_track(dir);
        fault_crash_at(point);
        crash_workload(&cfg, &run);
        fault_crash_apply((unsigned)iter, tear);
        fault_uninstall();
        th_flush_reset();
        crash_check(&cfg, &run, point);
        checked++;
        with_data += run.reported_durable > 0;
        th_rmtree(dir);
    }
    gr_log_set_level(GR_LOG_INFO);
    print_message("crash mode: %ld I/O points, %ld crashes checked, %ld with acknowledged durable data\n",
                  total, checked, with_data);
    assert_true(with_data > checked / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_short_write_completed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_write_then_enospc_undone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_undo_goes_offline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enospc_on_roll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eio_on_fsync_offline, setup, teardown),
        cmocka_unit_test(test_crash_at_every_io_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
