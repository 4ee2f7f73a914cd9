/*
 * test_io.c: the I/O thread pool (storage/iopool.h) and cold reads (storage/residency.c): jobs run on pool
 * threads and complete on the owner's thread, in full, also at destroy; a slice evicted from the page
 * cache (posix_fadvise DONTNEED after an fdatasync) reads as not resident, a pool prefetch makes it
 * resident again with the right bytes; the preadv2 fallback when cachestat is missing; read errors in a
 * prefetch are reported. Group commit by syncfs (cfg.flush_syncfs_min_logs): many logs made durable by one
 * syncfs; a failing syncfs takes every log of its round offline and reports the error for each; crashes at
 * a sweep of I/O points of a many-log syncfs workload keep every batch reported durable.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "storage/iopool.h"
#include "storage/sys.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

/* ---- the pool ---- */

struct tjob {
    struct gr_io_job job;
    pthread_t owner;
    bool ran_elsewhere;
    int *done_count;
    int index;
    int *order;
    int *order_n;
};

static atomic_int notified;

static void notify_cb(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&notified, 1);
}

static void tjob_run(struct gr_io_job *job)
{
    struct tjob *t = (struct tjob *)job;
    t->ran_elsewhere = !pthread_equal(pthread_self(), t->owner);
    usleep(100);
    job->result = t->index;
}

static void tjob_done(struct gr_io_job *job)
{
    struct tjob *t = (struct tjob *)job;
    assert_true(pthread_equal(pthread_self(), t->owner)); /* done() runs on the owner's thread */
    assert_int_equal(job->result, t->index);
    (*t->done_count)++;
}

static void test_pool_runs_and_completes(void **state)
{
    (void)state;
    struct gr_iopool *pool;
    atomic_store(&notified, 0);
    assert_int_equal(gr_iopool_create(3, notify_cb, NULL, &pool), 0);
    enum { N = 200 };
    struct tjob *jobs = calloc(N, sizeof(*jobs));
    int done = 0;
    for (int i = 0; i < N; i++) {
        jobs[i] = (struct tjob){.job = {.run = tjob_run, .done = tjob_done},
                                .owner = pthread_self(),
                                .done_count = &done,
                                .index = i};
        gr_iopool_submit(pool, &jobs[i].job);
    }
    gr_iopool_drain(pool);
    assert_int_equal(done, N);
    assert_int_equal(gr_iopool_pending(pool), 0);
    assert_true(atomic_load(&notified) >= 1);
    assert_true(atomic_load(&notified) <= N);
    for (int i = 0; i < N; i++)
        assert_true(jobs[i].ran_elsewhere);
    /* complete() with nothing finished runs nothing */
    assert_int_equal(gr_iopool_complete(pool), 0);
    gr_iopool_destroy(pool);
    free(jobs);
}

static void test_pool_destroy_finishes_everything(void **state)
{
    (void)state;
    struct gr_iopool *pool;
    assert_int_equal(gr_iopool_create(1, NULL, NULL, &pool), 0);
    enum { N = 50 };
    struct tjob jobs[N];
    int done = 0;
    for (int i = 0; i < N; i++) {
        jobs[i] = (struct tjob){.job = {.run = tjob_run, .done = tjob_done},
                                .owner = pthread_self(),
                                .done_count = &done,
                                .index = i};
        gr_iopool_submit(pool, &jobs[i].job);
    }
    gr_iopool_destroy(pool); /* no notify, nobody polled: destroy must still run every done() */
    assert_int_equal(done, N);
}

/* ---- cold reads ---- */

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_log *log;
    uint8_t *expect;
    size_t expect_len;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    th_flush_reset();
    fault_install(); /* before the store opens: the table is not changed under running flushers */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    for (int op = 0; op < F_OPS; op++)
        fault_clear((enum fault_op)op);
    if (f->store) gr_store_close(f->store);
    fault_uninstall();
    th_rmtree(f->dir);
    free(f->expect);
    free(f);
    return 0;
}

/* A log with ~2 MiB of batches, made durable (so that DONTNEED can drop the pages). */
static void fill(struct fx *f)
{
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "cold", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    f->expect = malloc(4 << 20);
    for (int i = 0; i < 32; i++) {
        struct th_batch_spec spec = {.count = 16,
                                     .ts0 = 1000 + i,
                                     .ts_step = 0,
                                     .tag = (uint32_t)i,
                                     .value_bytes = 4000,
                                     .producer_id = -1};
        size_t len;
        uint8_t *b = th_batch(&spec, &len);
        struct gr_append_result res;
        assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
        gr_store_quiesce(f->store);                /* spare ready at the roll (storage/roll.c) */
        memcpy(f->expect + f->expect_len, b, len); /* as patched in place by the append */
        f->expect_len += len;
        free(b);
    }
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, gr_log_end_offset(f->log)), 0);
}

static void read_whole(struct fx *f, struct gr_log_slice *s)
{
    int64_t end = gr_log_end_offset(f->log);
    assert_int_equal(gr_log_read(f->log, 0, 64 << 20, end, true, s), 0);
    assert_int_equal(s->bytes, (int64_t)f->expect_len);
}

struct prefetch_job {
    struct gr_io_job job;
    struct gr_log_slice slice;
    bool done;
};

static void prefetch_run(struct gr_io_job *job)
{
    struct prefetch_job *p = (struct prefetch_job *)job;
    job->result = gr_log_slice_prefetch(&p->slice);
}

static void prefetch_done(struct gr_io_job *job)
{
    struct prefetch_job *p = (struct prefetch_job *)job;
    gr_log_slice_release(&p->slice);
    p->done = true;
}

static void test_evicted_slice_is_cold_then_prefetched(void **state)
{
    struct fx *f = *state;
    fill(f);
    struct gr_log_slice s;
    read_whole(f, &s);
    assert_int_equal(gr_log_slice_resident(&s), 1); /* just written: in the page cache */
    assert_int_equal(posix_fadvise(s.fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    assert_int_equal(gr_log_slice_resident(&s), 0);

    struct gr_iopool *pool;
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &pool), 0);
    struct prefetch_job pj = {.job = {.run = prefetch_run, .done = prefetch_done}};
    gr_log_slice_retain(&s, &pj.slice);
    gr_iopool_submit(pool, &pj.job);
    gr_iopool_drain(pool);
    assert_true(pj.done);
    assert_int_equal(pj.job.result, 0);
    assert_int_equal(gr_log_slice_resident(&s), 1);
    uint8_t *got = th_slice_bytes(&s);
    assert_memory_equal(got, f->expect, f->expect_len);
    free(got);
    gr_log_slice_release(&s);
    gr_iopool_destroy(pool);
}

static void test_fallback_without_cachestat(void **state)
{
    struct fx *f = *state;
    fill(f);
    fault_fail(F_CACHESTAT, 1, ENOSYS, true);
    struct gr_log_slice s;
    read_whole(f, &s);
    assert_int_equal(gr_log_slice_resident(&s), 1);
    long probes = fault_count(F_PREADV2);
    assert_true(probes >= 1);                /* answered by the preadv2 probe */
    fault_fail(F_PREADV2, 1, EAGAIN, false); /* the kernel would have to read the page */
    assert_int_equal(gr_log_slice_resident(&s), 0);
    fault_fail(F_CACHESTAT, 1, EBADF, false); /* a real error is reported, not guessed */
    assert_int_equal(gr_log_slice_resident(&s), -EBADF);
    gr_log_slice_release(&s);
}

static void test_prefetch_read_error(void **state)
{
    struct fx *f = *state;
    fill(f);
    struct gr_log_slice s;
    read_whole(f, &s);
    fault_fail(F_PREAD, 1, EIO, false);
    assert_int_equal(gr_log_slice_prefetch(&s), -EIO);
    assert_int_equal(gr_log_slice_prefetch(&s), 0);
    gr_log_slice_release(&s);
}

/* No-wait lookups: with the segment evicted, gr_log_read_nowait answers -EAGAIN naming the header page it
   needs; once that is read in it answers the slice. After a clean reopen a sealed segment's index files are
   not loaded: the no-wait read names them first (bytes -1), then proceeds once they were read in. */
static void evict_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
}

static void test_nowait_lookup_names_cold_pages(void **state)
{
    struct fx *f = *state;
    fill(f);
    char path[256];
    snprintf(path, sizeof(path), "%s/cold-0/00000000000000000000.log", f->dir);
    evict_file(path);
    int64_t end = gr_log_end_offset(f->log);
    struct gr_log_slice s, cold;
    int rounds = 0, rc;
    while ((rc = gr_log_read_nowait(f->log, 200, 64 << 20, end, true, &s, &cold)) == -EAGAIN) {
        assert_true(cold.fd >= 0);
        assert_true(cold.bytes > 0 && cold.bytes <= 8192); /* a header page, not the data */
        assert_int_equal(gr_log_slice_resident(&cold), 0);
        assert_int_equal(gr_log_slice_prefetch(&cold), 0);
        assert_int_equal(gr_log_slice_resident(&cold), 1);
        gr_log_slice_release(&cold);
        assert_true(++rounds < 64);
    }
    assert_int_equal(rc, 0);
    assert_true(rounds >= 1);
    assert_null(cold.ref);
    struct gr_log_slice hot;
    assert_int_equal(gr_log_read(f->log, 200, 64 << 20, end, true, &hot), 0);
    assert_int_equal(s.file_pos, hot.file_pos); /* the same answer as the blocking read */
    assert_int_equal(s.bytes, hot.bytes);
    gr_log_slice_release(&s);
    gr_log_slice_release(&hot);
}

static void test_nowait_lookup_reads_index_files_first(void **state)
{
    struct fx *f = *state;
    f->cfg.segment_bytes = 256 * 1024;
    fill(f);
    assert_true(gr_log_segment_count(f->log) > 2);
    gr_store_close(f->store); /* clean: sealed segments' indexes are loaded lazily at the next open */
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "cold", 4), 0);
    int64_t end = gr_log_end_offset(f->log);
    struct gr_log_slice s, cold;
    int index_rounds = 0, rc, rounds = 0;
    while ((rc = gr_log_read_nowait(f->log, 1, 1 << 20, end, true, &s, &cold)) == -EAGAIN) {
        if (cold.bytes < 0) index_rounds++;
        assert_int_equal(gr_log_slice_prefetch(&cold), 0);
        gr_log_slice_release(&cold);
        assert_true(++rounds < 64);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(index_rounds, 1);
    assert_true(s.bytes > 0);
    assert_int_equal(s.first_batch_offset, 0);
    gr_log_slice_release(&s);
}

/* ---- roll: sealing writes no index file on the appending thread ---- */

static void test_roll_writes_indexes_on_flusher(void **state)
{
    struct fx *f = *state;
    f->cfg.segment_bytes = 64 * 1024;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "r", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    struct th_batch_spec spec = {
        .count = 4, .ts0 = 5000, .ts_step = 1, .value_bytes = 1000, .producer_id = -1};
    size_t len;
    uint8_t *b = th_batch(&spec, &len);
    struct gr_append_result res;
    char next_log[256];
    while (gr_log_segment_count(f->log) == 1) {
        gr_store_quiesce(f->store); /* a spare requested at half the segment is ready before the roll */
        long w0 = fault_count_this_thread(F_PWRITE), tr0 = fault_count_this_thread(F_FTRUNCATE);
        long o0 = fault_count_this_thread(F_OPEN);
        int segs = gr_log_segment_count(f->log);
        int64_t leo = gr_log_end_offset(f->log);
        assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
        if (gr_log_segment_count(f->log) > segs) {
            /* this append rolled: one pwrite (the batch); no file opened, no index file written here */
            assert_int_equal(fault_count_this_thread(F_PWRITE) - w0, 1);
            assert_int_equal(fault_count_this_thread(F_FTRUNCATE) - tr0, 0);
            assert_int_equal(fault_count_this_thread(F_OPEN) - o0, 0);
            snprintf(next_log, sizeof(next_log), "%s/r-0/%020lld.log", f->dir, (long long)leo);
        }
    }
    free(b);
    gr_store_quiesce(f->store); /* the roll asked for a flush: it names the new segment, writes the sealed
                                   indexes and syncs them */
    assert_true(fault_count(F_LINK) >= 1);
    assert_int_equal(access(next_log, F_OK), 0);
    struct stat st;
    /* a segment made ahead (O_TMPFILE) has the same permissions as one created by name: 0644 less the
       umask (it was 0000 once, and a broker not running as root could not reopen it after a restart) */
    mode_t um = umask(0);
    umask(um);
    assert_int_equal(stat(next_log, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644 & ~um);
    char path[256];
    snprintf(path, sizeof(path), "%s/r-0/00000000000000000000.index", f->dir);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 0);
    assert_int_equal(st.st_size % 8, 0);
    snprintf(path, sizeof(path), "%s/r-0/00000000000000000000.timeindex", f->dir);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size >= 12);
    /* reopen without the clean marker's help is not needed: a clean reopen trusts and reads these files */
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "r", 1), 0);
    struct th_seen *seen;
    int n = th_read_all(f->log, 0, INT64_MAX, &seen);
    assert_true(n > 0);
    assert_int_equal(seen[n - 1].last_offset + 1, gr_log_end_offset(f->log));
    int64_t off, ts;
    int32_t ep;
    assert_int_equal(gr_log_offset_for_time(f->log, 5002, INT64_MAX, &off, &ts, &ep), 0);
    assert_int_equal(ts, 5002);
    free(seen);
}

/* Segments made from spares and dropped by DeleteRecords right after the roll (before or while the
   flush names them, whichever the threads make of it) leave no file behind: the directory holds exactly
   the log's segments. */
static void test_dropped_spare_segment_leaves_no_file(void **state)
{
    struct fx *f = *state;
    f->cfg.segment_bytes = 16 * 1024;
    f->cfg.flusher_threads = 1;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "d", 1, NULL, NULL, 0, &t), 0);
    f->log = gr_topic_log(t, 0);
    struct th_batch_spec spec = {.count = 1, .ts0 = 1, .value_bytes = 5000, .producer_id = -1};
    size_t blen;
    uint8_t *bb = th_batch(&spec, &blen);
    uint8_t *copy = malloc(blen);
    struct gr_append_result res;
    for (int round = 0; round < 6; round++) {
        int segs = gr_log_segment_count(f->log);
        while (gr_log_segment_count(f->log) == segs) {
            gr_store_quiesce(f->store); /* lets the spare job run once the segment is half full */
            memcpy(copy, bb, blen);
            assert_int_equal(gr_log_append(f->log, copy, blen, -1, &res), 0);
        }
        /* at once, while the roll's flush may not have named the new segment yet */
        memcpy(copy, bb, blen);
        assert_int_equal(gr_log_append(f->log, copy, blen, -1, &res), 0);
        assert_int_equal(gr_log_delete_records(f->log, res.base_offset), 0);
    }
    gr_store_quiesce(f->store);
    assert_true(fault_count(F_LINK) >= 1); /* spares were used */
    char cmd[256], path[128];
    snprintf(path, sizeof(path), "%s/count", f->dir);
    snprintf(cmd, sizeof(cmd), "ls %s/d-0/ | grep -c '\\.log$' > %s", f->dir, path);
    assert_int_equal(system(cmd), 0);
    FILE *fp = fopen(path, "r");
    int files = -1;
    assert_non_null(fp);
    assert_int_equal(fscanf(fp, "%d", &files), 1);
    fclose(fp);
    assert_int_equal(files, gr_log_segment_count(f->log));
    free(bb);
    free(copy);
}

/* ---- group commit by syncfs ---- */

enum { SYNC_LOGS = 24, SYNC_ROUNDS = 3 };

struct sync_run {
    int64_t durable[SYNC_LOGS]; /* reported durable end offset per partition */
};

/* Appends a 2-record batch to every partition, asks for a flush of each, waits for every report. */
static void sync_round(struct gr_log **logs, int round, struct sync_run *run, int *errors)
{
    int64_t want[SYNC_LOGS];
    for (int p = 0; p < SYNC_LOGS; p++) {
        size_t len;
        uint8_t *b = th_simple(2, 1000 + round, (uint32_t)(round * 100 + p), &len);
        struct gr_append_result res;
        want[p] = gr_log_append(logs[p], b, len, -1, &res) == 0 ? res.base_offset + 2 : -1;
        free(b);
    }
    for (int p = 0; p < SYNC_LOGS; p++)
        gr_log_flush_async(logs[p]);
    for (int p = 0; p < SYNC_LOGS; p++) {
        if (want[p] < 0) continue;
        if (gr_log_offline(logs[p]) && gr_log_durable_offset(logs[p]) < want[p]) {
            (*errors)++; /* an offline log is not flushed again: nothing will be reported */
            continue;
        }
        int err = th_wait_durable(logs[p], want[p]);
        if (err == 0 && gr_log_durable_offset(logs[p]) >= want[p]) {
            if (want[p] > run->durable[p]) run->durable[p] = want[p];
        } else {
            (*errors)++;
        }
    }
}

static void sync_config(struct gr_store_config *cfg, const char *dir)
{
    th_config(cfg, dir);
    cfg->flusher_threads = 1;
    cfg->flush_syncfs_min_logs = 4;
    cfg->segment_bytes = 200; /* a roll every other round: segments made from spares, named in the flush */
}

static struct gr_topic *sync_open(const struct gr_store_config *cfg, struct gr_store **store,
                                  struct gr_log **logs)
{
    *store = NULL;
    if (gr_store_open(cfg, store) != 0) return NULL; /* only under a crash point */
    struct gr_topic *t = gr_store_topic_find(*store, "s", 1);
    if (!t && gr_store_topic_create(*store, "s", SYNC_LOGS, NULL, NULL, 0, &t) != 0) return NULL;
    for (int p = 0; t && p < SYNC_LOGS; p++)
        logs[p] = gr_topic_log(t, p);
    return t;
}

static void test_syncfs_group_commit(void **state)
{
    struct fx *f = *state;
    sync_config(&f->cfg, f->dir);
    struct gr_log *logs[SYNC_LOGS];
    assert_non_null(sync_open(&f->cfg, &f->store, logs));
    struct sync_run run = {{0}};
    int errors = 0;
    for (int r = 0; r < SYNC_ROUNDS; r++)
        sync_round(logs, r, &run, &errors);
    assert_int_equal(errors, 0);
    assert_true(fault_count(F_SYNCFS) >= 1); /* 24 queued flushes >= 4: some rounds used syncfs */
    for (int p = 0; p < SYNC_LOGS; p++)
        assert_int_equal(run.durable[p], gr_log_end_offset(logs[p]));

    /* A failing syncfs: every log of that round goes offline and gets the error; none is reported durable
       past what an earlier sync covered. */
    fault_fail(F_SYNCFS, 1, EIO, true);
    fault_fail(F_FDATASYNC, 1, EIO, true); /* and the single-log path as well: nothing can sync now */
    int64_t before[SYNC_LOGS];
    for (int p = 0; p < SYNC_LOGS; p++)
        before[p] = gr_log_durable_offset(logs[p]);
    errors = 0;
    sync_round(logs, SYNC_ROUNDS, &run, &errors);
    assert_int_equal(errors, SYNC_LOGS);
    int last = 0;
    /* A log goes offline (what sync_round waits for) just before its error is reported through on_flushed
       on the flusher thread: wait for the reports themselves. */
    for (int i = 0; i < 5000 && th_flush_errors(NULL) < SYNC_LOGS; i++)
        usleep(1000);
    assert_true(th_flush_errors(&last) >= SYNC_LOGS);
    assert_int_equal(last, -EIO);
    for (int p = 0; p < SYNC_LOGS; p++) {
        assert_true(gr_log_offline(logs[p]));
        assert_int_equal(gr_log_durable_offset(logs[p]), before[p]);
    }
}

static void test_syncfs_crash_keeps_durable(void **state)
{
    (void)state;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    char dir[64];
    struct gr_store_config cfg;
    struct gr_log *logs[SYNC_LOGS];
    /* dry run: count the I/O points */
    th_tmpdir(dir, sizeof(dir));
    sync_config(&cfg, dir);
    th_flush_reset();
    fault_install();
    fault_crash_track(dir);
    struct gr_store *store;
    struct sync_run run = {{0}};
    int errors = 0;
    assert_non_null(sync_open(&cfg, &store, logs));
    for (int r = 0; r < SYNC_ROUNDS; r++)
        sync_round(logs, r, &run, &errors);
    gr_store_close(store);
    long total = fault_io_count(), syncfs_calls = fault_count(F_SYNCFS);
    th_rmtree(dir);
    assert_true(syncfs_calls >= 1);
    assert_true(fault_count(F_LINK) >= 1); /* the sweep covers segments named by a syncfs round */
    fault_uninstall();
    long step = total / 40 + 1, checked = 0, with_data = 0;
    for (long point = 1; point <= total; point += step) {
        th_tmpdir(dir, sizeof(dir));
        sync_config(&cfg, dir);
        th_flush_reset();
        fault_install();
        fault_crash_track(dir);
        fault_crash_at(point);
        memset(&run, 0, sizeof(run));
        struct gr_topic *t = sync_open(&cfg, &store, logs);
        for (int r = 0; t && r < SYNC_ROUNDS; r++)
            sync_round(logs, r, &run, &errors);
        if (store) gr_store_close(store);
        fault_crash_apply((unsigned)point, point % 2 == 0);
        fault_uninstall();
        th_flush_reset();
        t = sync_open(&cfg, &store, logs);
        assert_non_null(store); /* after the crash the store must open */
        for (int p = 0; p < SYNC_LOGS; p++) {
            if (!t) {
                assert_int_equal(run.durable[p], 0);
                continue;
            }
            int64_t leo = gr_log_end_offset(logs[p]);
            if (leo < run.durable[p]) {
                print_error("crash point %ld: partition %d ends at %ld, %ld reported durable\n", point, p,
                            (long)leo, (long)run.durable[p]);
                fail();
            }
            struct th_seen *seen;
            int n = th_read_all(logs[p], gr_log_start_offset(logs[p]), INT64_MAX, &seen);
            assert_true(n >= 0);
            assert_int_equal(n ? seen[n - 1].last_offset + 1 : gr_log_start_offset(logs[p]), leo);
            free(seen);
            with_data += run.durable[p] > 0;
        }
        checked++;
        gr_store_close(store);
        th_rmtree(dir);
    }
    gr_log_set_level(GR_LOG_INFO);
    print_message(
        "syncfs crash sweep: %ld I/O points, %ld crashes checked, %ld partition-states with durable data\n",
        total, checked, with_data);
    assert_true(with_data > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_runs_and_completes),
        cmocka_unit_test(test_pool_destroy_finishes_everything),
        cmocka_unit_test_setup_teardown(test_evicted_slice_is_cold_then_prefetched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_without_cachestat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_read_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nowait_lookup_names_cold_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nowait_lookup_reads_index_files_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roll_writes_indexes_on_flusher, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_spare_segment_leaves_no_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syncfs_group_commit, setup, teardown),
        cmocka_unit_test(test_syncfs_crash_keeps_durable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
