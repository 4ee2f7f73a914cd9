/*
 * test_faults.c: injected I/O faults through the syscall shim (fault.h). Short writes, ENOSPC on a
 * write and on a roll, a failed undo (the partition goes offline), EIO on fdatasync (offline, reported via
 * on_flushed, other partitions unaffected, restart recovers), and crash mode: the same workload crashed at
 * every I/O point in turn, the disk rewritten to what a power loss could leave, then reopened and checked
 * (every batch reported durable is there, nothing after a gap is served, producer state matches the log,
 * a log start offset DeleteRecords acknowledged is kept).
 */
#include <errno.h>
#include <stdatomic.h>
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
#include "common/time.h"
#include "storage/internal.h"
#include "storage/sys.h"
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

/* Holds every flusher thread (two: th_config) with a job each, until released: no spare file, no undo, no
   flush, no housekeeping job runs meanwhile. */
static atomic_int gate_closed, gate_held;
static int gate_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&gate_held, 1);
    while (atomic_load(&gate_closed))
        usleep(1000);
    atomic_fetch_sub(&gate_held, 1);
    return 0;
}
static void gate_close(struct gr_store *store)
{
    atomic_store(&gate_closed, 1);
    int n = store->fl.thread_count; /* every flusher thread, the any_thread-jobs-only one included */
    for (int i = 0; i < n; i++) {
        struct gr_job *job = calloc(1, sizeof(*job));
        job->type = GR_JOB_CALL;
        job->any_thread = true;
        job->dir_fd = -1;
        job->fn = gate_job;
        gr_flusher_job(store, job);
    }
    while (atomic_load(&gate_held) != n)
        usleep(1000);
}
static void gate_open(void)
{
    atomic_store(&gate_closed, 0);
    while (atomic_load(&gate_held) != 0)
        usleep(1000);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gate_open(); /* a failed assertion may have left the housekeeping thread held */
    gr_sys_audit_this_thread(NULL);
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

/* Calls the network thread (here: the test thread) made that may wait for the disk (storage/sys.h). */
static int audit_calls;
static char audit_last[64];
static void audit_count(const char *op, int fd, const char *path)
{
    (void)fd;
    (void)path;
    audit_calls++;
    snprintf(audit_last, sizeof(audit_last), "%s", op);
}

static void test_short_write_then_enospc_undone(void **state)
{
    struct fx *f = *state;
    int64_t base;
    assert_int_equal(try_append(f->log, 0, &base), 0);
    int64_t size = active_file_size(f);
    gr_store_quiesce(f->store);
    gate_close(f->store); /* the undo waits in the housekeeping queue */
    audit_calls = 0;
    gr_sys_audit_this_thread(audit_count);
    fault_short_write(1, 10);
    fault_fail(F_PWRITE, 2, ENOSPC, false);
    long truncs = fault_count(F_FTRUNCATE);
    assert_int_equal(try_append(f->log, 1, &base), -ENOSPC);
    /* Not undone yet: appends are refused, readers never see the 10 stray bytes. */
    assert_int_equal(active_file_size(f), size + 10);
    assert_int_equal(try_append(f->log, 1, &base), -EAGAIN);
    assert_int_equal(gr_log_end_offset(f->log), 3);
    assert_false(gr_log_offline(f->log));
    gr_sys_audit_this_thread(NULL);
    if (audit_calls) /* no ftruncate (nor anything else) on the network thread */
        fail_msg("%d blocking calls on the network thread, last %s", audit_calls, audit_last);
    check_tags(f->log, 1);
    assert_int_equal(fault_count(F_FTRUNCATE), truncs);
    gate_open();
    gr_store_quiesce(f->store);
    assert_int_equal(fault_count(F_FTRUNCATE), truncs + 1);
    assert_int_equal(active_file_size(f), size); /* the 10 bytes were truncated away */
    assert_false(gr_log_offline(f->log));
    fault_fail(F_PWRITE, 1, ENOSPC, false);
    assert_int_equal(try_append(f->log, 1, &base), -ENOSPC); /* nothing written: nothing to undo */
    assert_int_equal(fault_count(F_FTRUNCATE), truncs + 1);
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

static int try_idempotent(struct gr_log *log, int32_t seq, int64_t *base)
{
    struct th_batch_spec s = {.count = 1,
                              .ts0 = 1000,
                              .ts_step = 1,
                              .tag = (uint32_t)seq,
                              .value_bytes = 10,
                              .producer_id = 7,
                              .producer_epoch = 0,
                              .base_sequence = seq};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    if (err == 0 && base) *base = res.base_offset;
    return err;
}

/* After a failed write, a batch whose sequence is ahead (the next one a client had in flight) gets the
   storage error, not OUT_OF_ORDER_SEQUENCE_NUMBER: a client told "out of order" there bumps its epoch and may
   write twice what it had in flight (found by make test-faults' disk-full nemesis: librdkafka's "skipped
   sequence numbers", then duplicates). Once a write succeeds, out of order is out of order again. */
static void test_sequence_gap_after_failed_write(void **state)
{
    struct fx *f = *state;
    int64_t base;
    assert_int_equal(try_idempotent(f->log, 0, &base), 0);
    fault_fail(F_PWRITE, 1, ENOSPC, false);
    assert_int_equal(try_idempotent(f->log, 1, &base), -ENOSPC); /* not stored */
    assert_int_equal(try_idempotent(f->log, 2, &base), -ENOSPC); /* in flight behind it: the same error */
    assert_int_equal(try_idempotent(f->log, 1, &base), 0);       /* the client's retry, in order */
    assert_int_equal(base, 1);
    assert_int_equal(try_idempotent(f->log, 2, &base), 0);
    assert_int_equal(try_idempotent(f->log, 2, &base), 0); /* a duplicate: its original offset */
    assert_int_equal(base, 2);
    assert_int_equal(try_idempotent(f->log, 4, &base), GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE); /* a real gap */
    assert_int_equal(gr_log_end_offset(f->log), 3);
}

static void test_failed_undo_goes_offline(void **state)
{
    struct fx *f = *state;
    int64_t base;
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(try_append(f->log, i, &base), 0);
    gr_store_quiesce(f->store);
    th_flush_reset();
    fault_short_write(1, 10);
    fault_fail(F_PWRITE, 2, EIO, false);
    fault_fail(F_FTRUNCATE, 1, EIO, false);
    assert_int_equal(try_append(f->log, 3, &base), -EIO);
    gr_store_quiesce(f->store); /* the undo ran on the housekeeping thread and failed */
    assert_true(gr_log_offline(f->log));
    int last;
    assert_int_equal(th_flush_errors(&last), 1); /* waiters were told (on_flushed with the error) */
    assert_int_equal(last, -EIO);
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
    /* No file can be created any more: the spare job fails, so the roll after it creates its own files
       (the last resort) and cannot: the append that needs it fails, nothing else changes. (A roll may
       first use a spare made before the disk filled, or wait for the spare job: storage/roll.c.) */
    fault_fail(F_OPEN, 1, ENOSPC, true);
    int err, segs;
    for (;;) {
        segs = gr_log_segment_count(f->log);
        if ((err = try_append(f->log, i, &base)) != 0) break;
        i++;
        gr_store_quiesce(f->store);
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
    /* The next roll asks for a spare first and appends to the active segment meanwhile. */
    assert_int_equal(try_append(f->log, i, &base), 0);
    assert_int_equal(base, leo);
    assert_int_equal(gr_log_segment_count(f->log), segs);
    gr_store_quiesce(f->store);
    assert_int_equal(try_append(f->log, i + 1, &base), 0);
    assert_int_equal(gr_log_segment_count(f->log), segs + 1);
    assert_int_equal(f->log->segs[segs]->base_offset, leo + 3);
    check_tags(f->log, (int)i + 2);
}

/* A roll due while no spare file is ready waits for one: the active segment takes the batches meanwhile
   (past segment.bytes), the network thread creates no file, and the first append after the spare is
   ready rolls. A crash while the roll is pending loses nothing that was durable. */
static void test_deferred_roll(void **state)
{
    struct fx *f = *state;
    int64_t base;
    uint32_t i = 0;
    gate_close(f->store); /* no spare can be made */
    audit_calls = 0;
    gr_sys_audit_this_thread(audit_count);
    int64_t seg_bytes = 1000;
    while (f->log->segs[0]->size_bytes <= seg_bytes + 200)
        assert_int_equal(try_append(f->log, i++, &base), 0);
    gr_sys_audit_this_thread(NULL);
    if (audit_calls) fail_msg("%d blocking calls on the network thread, last %s", audit_calls, audit_last);
    assert_int_equal(gr_log_segment_count(f->log), 1);
    assert_true(f->log->segs[0]->size_bytes > seg_bytes);
    assert_int_equal(gr_log_end_offset(f->log), 3 * (int64_t)i);
    check_tags(f->log, (int)i);
    /* The oversized segment becomes durable with the roll still pending (no append since), then a crash. */
    fault_crash_track(f->dir);
    gate_open();
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 3 * (int64_t)i), 0);
    int64_t durable_tags = i;
    assert_int_equal(gr_log_segment_count(f->log), 1);
    fault_crash_now();
    gr_store_close(f->store);
    f->store = NULL;
    fault_crash_apply(7, true);
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "f", 1), 0);
    assert_false(gr_log_offline(f->log));
    int64_t leo = gr_log_end_offset(f->log);
    assert_true(leo >= 3 * durable_tags);
    assert_int_equal(gr_log_segment_count(f->log), 1);
    check_tags(f->log, (int)(leo / 3));
    /* Rolls again once a spare is there. */
    uint32_t t = (uint32_t)(leo / 3);
    assert_int_equal(try_append(f->log, t++, &base), 0); /* asks for the spare */
    gr_store_quiesce(f->store);
    assert_int_equal(try_append(f->log, t++, &base), 0);
    assert_int_equal(gr_log_segment_count(f->log), 2);
    assert_int_equal(f->log->segs[1]->base_offset, base);
    check_tags(f->log, (int)t);
}

/* Retention's roll of an expired active segment waits for a spare as well. */
/* A roll waiting for its spare stops waiting at twice segment.bytes (here 1000): the segment never grows
   past 2000 bytes, even when no spare ever comes. */
static void test_deferred_roll_bounded(void **state)
{
    struct fx *f = *state;
    int64_t base;
    f->store->cfg.roll_wait_bytes_min = 0; /* the bound is then 2 x segment.bytes (1000 here) */
    gate_close(f->store);                  /* no spare can be made */
    uint32_t i = 0;
    while (gr_log_segment_count(f->log) == 1 && i < 200)
        assert_int_equal(try_append(f->log, i++, &base), 0);
    assert_int_equal(gr_log_segment_count(f->log), 2);
    assert_true(f->log->segs[0]->size_bytes > 1000); /* the roll did wait */
    assert_true(f->log->segs[0]->size_bytes <=
                2000 + 91); /* but not past the bound (plus the batch in hand) */
    assert_int_equal(f->log->segs[1]->base_offset, base);
    gate_open();
    check_tags(f->log, (int)i);
}

static void test_retention_roll_waits_for_spare(void **state)
{
    struct fx *f = *state;
    int64_t base;
    const char *k[] = {"segment.bytes", "retention.ms"}, *v[] = {"1000", "1000"};
    assert_int_equal(gr_topic_config_set_all(f->store, f->log->topic, k, v, 2), 0);
    for (uint32_t i = 0; i < 2; i++)
        assert_int_equal(try_append(f->log, i, &base), 0); /* timestamps ~1000 ms: long expired */
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 6), 0);
    gr_store_quiesce(f->store);
    gate_close(f->store);
    audit_calls = 0;
    gr_sys_audit_this_thread(audit_count);
    gr_store_retention_run(f->store, gr_time_wall_ms());
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(audit_calls, 0);
    assert_int_equal(gr_log_segment_count(f->log), 1); /* not rolled: no spare yet */
    assert_int_equal(gr_log_start_offset(f->log), 0);
    gate_open();
    gr_store_quiesce(f->store);
    gr_store_retention_run(f->store, gr_time_wall_ms());
    assert_int_equal(gr_log_segment_count(f->log), 1);
    assert_int_equal(gr_log_start_offset(f->log), 6); /* rolled and the expired segment deleted */
    assert_int_equal(f->log->segs[0]->base_offset, 6);
}

/* log-start-offset-checkpoint's line for partition f-0 ("f 0 <offset>"), -1 when absent. */
static int64_t ckpt_log_start(struct fx *f)
{
    char path[512], buf[4096];
    snprintf(path, sizeof(path), "%s/log-start-offset-checkpoint", f->dir);
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = 0;
    char *at = strstr(buf, "\nf 0 ");
    return at ? strtoll(at + 5, NULL, 10) : -1;
}

/* DeleteRecords in two halves: the checkpoint is written by the housekeeping thread (nothing on the
   network thread), the log start offset moves only once it is durable, a failed write leaves it (and the
   file) unchanged, and a periodic checkpoint queued while a DeleteRecords is in flight never writes the
   file back below it. */
static void test_delete_records_async(void **state)
{
    struct fx *f = *state;
    int64_t base;
    for (uint32_t i = 0; i < 40; i++) {
        assert_int_equal(try_append(f->log, i, &base), 0);
        gr_store_quiesce(f->store);
    }
    assert_true(gr_log_segment_count(f->log) > 2);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 120), 0);
    gr_store_quiesce(f->store);
    gate_close(f->store);
    audit_calls = 0;
    gr_sys_audit_this_thread(audit_count);
    assert_int_equal(gr_log_delete_records_begin(f->log, 121), -ERANGE);
    assert_int_equal(gr_log_delete_records_begin(f->log, 0), 0); /* nothing to do */
    assert_int_equal(gr_log_delete_records_begin(f->log, 31), 1);
    int64_t ticket;
    assert_int_equal(gr_store_log_start_checkpoint_async(f->store, &ticket), 0);
    assert_int_equal(gr_store_checkpoint_poll(f->store, ticket), 0);
    assert_int_equal(gr_log_start_offset(f->log), 0); /* not before the file is durable */
    gr_sys_audit_this_thread(NULL);
    if (audit_calls) fail_msg("%d blocking calls on the network thread, last %s", audit_calls, audit_last);
    int segs = gr_log_segment_count(f->log);
    gate_open();
    assert_int_equal(gr_store_checkpoint_wait(f->store, ticket), 0);
    assert_int_equal(gr_store_checkpoint_poll(f->store, ticket), 1);
    assert_int_equal(ckpt_log_start(f), 31);
    assert_int_equal(gr_log_delete_records_end(f->log, 31, 0), 0);
    assert_int_equal(gr_log_start_offset(f->log), 31);
    assert_true(gr_log_segment_count(f->log) < segs);
    assert_true(f->log->segs[0]->base_offset <= 31);
    /* A failed write: the request fails, nothing moves, the file keeps 31. */
    assert_int_equal(gr_log_delete_records_begin(f->log, 40), 1);
    fault_fail(F_RENAME, 1, EIO, false);
    assert_int_equal(gr_store_log_start_checkpoint_async(f->store, &ticket), 0);
    assert_int_equal(gr_store_checkpoint_wait(f->store, ticket), -EIO);
    assert_int_equal(gr_log_delete_records_end(f->log, 40, -EIO), -EIO);
    assert_int_equal(gr_log_start_offset(f->log), 31);
    assert_int_equal(ckpt_log_start(f), 31);
    gr_store_checkpoint(f->store); /* nothing in flight: 31 */
    gr_store_quiesce(f->store);
    assert_int_equal(ckpt_log_start(f), 31);
    /* A periodic checkpoint built while a DeleteRecords is in flight carries its offset. */
    gate_close(f->store);
    assert_int_equal(gr_log_delete_records_begin(f->log, 45), 1);
    assert_int_equal(gr_store_log_start_checkpoint_async(f->store, &ticket), 0);
    gr_store_checkpoint(f->store); /* queued after the DeleteRecords write */
    gate_open();
    gr_store_quiesce(f->store);
    assert_int_equal(ckpt_log_start(f), 45);
    assert_int_equal(gr_store_checkpoint_poll(f->store, ticket), 1);
    assert_int_equal(gr_log_delete_records_end(f->log, 45, 0), 0);
    assert_int_equal(gr_log_start_offset(f->log), 45);
    /* And a restart starts there. */
    gr_store_close(f->store);
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "f", 1), 0);
    assert_int_equal(gr_log_start_offset(f->log), 45);
    assert_int_equal(gr_log_end_offset(f->log), 120);
}

/* A roll forced by a hard limit (a relative offset past 2^31-1) never waits: with no spare ready it
   creates its files at once (the last resort), so no offset is ever stored relative to the wrong base. */
static void test_hard_limit_rolls_at_once(void **state)
{
    struct fx *f = *state;
    int64_t base;
    gate_close(f->store); /* no spare can be made */
    assert_int_equal(try_append(f->log, 0, &base), 0);
    size_t len;
    uint8_t *b = th_simple(3, 2000, 1, &len);
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(INT32_MAX - 4)); /* offsets 3 .. 2^31 - 2 */
    gr_batch_crc_store(b, len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    assert_int_equal(gr_log_segment_count(f->log), 1);
    int64_t leo = gr_log_end_offset(f->log);
    assert_int_equal(leo, (int64_t)INT32_MAX);
    assert_true(atomic_load(&f->log->spare_requested)); /* asked for at half the relative offset range */
    assert_int_equal(try_append(f->log, 2, &base), 0);  /* its last offset 2^31 + 1 is too far from base 0 */
    assert_int_equal(base, leo);
    assert_int_equal(gr_log_segment_count(f->log), 2);
    assert_int_equal(f->log->segs[1]->base_offset, leo);
    gate_open();
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
        cmocka_unit_test_setup_teardown(test_sequence_gap_after_failed_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_undo_goes_offline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enospc_on_roll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_roll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_roll_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retention_roll_waits_for_spare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_records_async, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hard_limit_rolls_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eio_on_fsync_offline, setup, teardown),
        cmocka_unit_test(test_crash_at_every_io_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
