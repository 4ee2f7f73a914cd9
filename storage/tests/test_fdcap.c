/*
 * test_fdcap.c: the broker-wide cap on open segment files (open_segment_fds_max, gregor.open.files.max)
 * and the no-wait paths that keep opens, index loads and index rebuilds off the caller's thread.
 *
 * With a cap of 4 and 20 partitions: appends to every partition (an idle partition's active .log is
 * closed by the cap and reopened on an I/O pool thread before its append, gr_log_append_prepare), reads of
 * every partition through gr_log_read_nowait (closed files and unloaded indexes handled on the pool), and
 * ListOffsets lookups by time and max timestamp in their no-wait forms: the open .log files, counted in
 * /proc/self/fd, never exceed the cap at any observation point, the caller's thread opens no file
 * (fault_count_this_thread(F_OPEN)), and every batch reads back with the right offsets and tags, also
 * after a crash (crash-mode recovery from the fault shim). A sealed segment whose .index was deleted gets
 * it rebuilt (and rewritten) by the pool thread, not by the caller. Compaction of segments whose files the
 * cap closed opens them on the cleaner's side (job_open_files), never through gr_segment_fd, and is right.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "protocol/record_batch.h"
#include "storage/cleaner.h"
#include "storage/internal.h"
#include "storage/iopool.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

#define CAP 4
#define PARTS 20

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_iopool *pool;
    int64_t appended[PARTS]; /* records appended per partition */
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    f->cfg.open_segment_fds_max = CAP;
    f->cfg.segment_bytes = 4096; /* a few sealed segments per partition */
    th_flush_reset();
    fault_install();
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_iopool_destroy(f->pool);
    for (int op = 0; op < F_OPS; op++)
        fault_clear((enum fault_op)op);
    if (f->store) gr_store_close(f->store);
    fault_uninstall();
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Open .log files of this process under the test directory (/proc/self/fd). */
static int open_log_files(const struct fx *f)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char link[300], target[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", de->d_name);
        ssize_t l = readlink(link, target, sizeof(target) - 1);
        if (l <= 0) continue;
        target[l] = '\0';
        size_t dl = strlen(f->dir);
        if (strncmp(target, f->dir, dl) == 0 && l > 4 && strcmp(target + l - 4, ".log") == 0) n++;
    }
    closedir(d);
    return n;
}

static void assert_under_cap(const struct fx *f)
{
    int n = open_log_files(f);
    if (n > CAP) {
        print_error("%d .log files open, cap %d\n", n, CAP);
        fail();
    }
    assert_true(gr_store_open_segment_fds(f->store) <= CAP);
}

/* Runs the prefetch of `cold` on a pool thread, then installs it here (the owner's thread). */
struct cold_job {
    struct gr_io_job job;
    struct gr_log_slice *cold;
    bool installed;
};

static void cold_run(struct gr_io_job *job)
{
    struct cold_job *c = (struct cold_job *)job;
    job->result = gr_log_slice_prefetch(c->cold);
}

static void cold_done(struct gr_io_job *job)
{
    struct cold_job *c = (struct cold_job *)job;
    gr_log_slice_install(c->cold);
    c->installed = true;
}

static void on_pool(struct fx *f, struct gr_log_slice *cold)
{
    struct cold_job c = {.job = {.run = cold_run, .done = cold_done}, .cold = cold};
    gr_iopool_submit(f->pool, &c.job);
    gr_iopool_drain(f->pool);
    assert_true(c.installed);
    assert_int_equal(c.job.result, 0);
}

static void open_store(struct fx *f)
{
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    gr_store_fds_trim(f->store); /* the load opened every active segment */
    f->topic = gr_store_topic_find(f->store, "capped", 6);
}

/* Appends one batch of `count` records to partition p the way the Produce handler does: an active file
   closed by the cap is reopened on the pool and pinned until the append is done. */
static void produce(struct fx *f, int p, int32_t count, int64_t ts, uint32_t tag)
{
    struct gr_log *log = gr_topic_log(f->topic, p);
    struct gr_log_slice pin = {.fd = -1};
    long opens = fault_count_this_thread(F_OPEN);
    if (!gr_log_append_ready(log)) {
        assert_int_equal(gr_log_append_prepare(log, &pin), 1);
        on_pool(f, &pin);
        assert_true(gr_log_append_ready(log));
    }
    struct th_batch_spec spec = {
        .count = count, .ts0 = ts, .ts_step = 1, .tag = tag, .value_bytes = 100, .producer_id = -1};
    size_t len;
    uint8_t *b = th_batch(&spec, &len);
    struct gr_append_result res;
    int segs = gr_log_segment_count(log);
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    gr_log_slice_release(&pin);
    assert_int_equal(err, 0);
    f->appended[p] += count;
    /* No open on this thread, except a roll creating the next segment without a spare (storage/roll.c). */
    if (gr_log_segment_count(log) == segs) assert_int_equal(fault_count_this_thread(F_OPEN), opens);
}

/* One batch of 5 records to partition p in `round`, made durable, then the server's idle work (housekeeping
   jobs, the once-a-second cap pass). */
static void produce_durable(struct fx *f, int p, int round)
{
    produce(f, p, 5, 1000 * round + p, (uint32_t)(p * 1000 + round));
    struct gr_log *log = gr_topic_log(f->topic, p);
    gr_log_flush_async(log);
    assert_int_equal(th_wait_durable(log, gr_log_end_offset(log)), 0);
    gr_store_quiesce(f->store);
    gr_store_fds_trim(f->store);
}

/* Reads partition p from `from` to its end through no-wait reads with pool rounds; checks every batch
   against a blocking read and returns the batches seen. */
static int read_nowait_all(struct fx *f, int p, int64_t from, int64_t *tags_sum)
{
    struct gr_log *log = gr_topic_log(f->topic, p);
    int64_t end = gr_log_end_offset(log), off = from;
    int batches = 0;
    *tags_sum = 0;
    while (off < end) {
        struct gr_log_slice s, cold, held = {.fd = -1};
        int rc, rounds = 0;
        long opens = fault_count_this_thread(F_OPEN);
        while ((rc = gr_log_read_nowait(log, off, 1 << 20, end, true, &s, &cold)) == -EAGAIN) {
            on_pool(f, &cold);
            gr_log_slice_release(&held); /* the last round's work stays pinned until the retry */
            held = cold;
            assert_true(++rounds < 16);
        }
        gr_log_slice_release(&held);
        assert_int_equal(rc, 0);
        assert_int_equal(fault_count_this_thread(F_OPEN), opens);
        assert_true(s.bytes > 0);
        uint8_t *got = th_slice_bytes(&s);
        for (int64_t pos = 0; pos < s.bytes;) {
            const uint8_t *h = got + pos;
            assert_true(gr_batch_base_offset(h) <= off || batches > 0);
            /* the tag is the first record's value "<tag>:<i>": th_read_all parses it; here offsets only */
            *tags_sum += gr_batch_record_count(h);
            off = gr_batch_last_offset(h) + 1;
            pos += gr_batch_total_bytes(h);
            batches++;
        }
        free(got);
        gr_log_slice_release(&s);
        assert_under_cap(f);
    }
    return batches;
}

static void check_partition(struct fx *f, int p)
{
    struct gr_log *log = gr_topic_log(f->topic, p);
    struct th_seen *seen;
    int n = th_read_all(log, 0, INT64_MAX, &seen);
    assert_true(n > 0);
    int64_t records = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(seen[i].tag, (uint32_t)(p * 1000 + i)); /* every batch, in order */
        records += seen[i].record_count;
    }
    assert_int_equal(records, f->appended[p]);
    assert_int_equal(gr_log_end_offset(log), f->appended[p]);
    free(seen);
}

/* Rounds of appends to all 20 partitions, each made durable, then no-wait reads of every partition. */
static void test_cap_produce_and_fetch_all(void **state)
{
    struct fx *f = *state;
    open_store(f);
    assert_int_equal(gr_store_topic_create(f->store, "capped", PARTS, NULL, NULL, 0, &f->topic), 0);
    gr_store_fds_trim(f->store);
    assert_under_cap(f);
    int reopened = 0;
    for (int round = 0; round < 12; round++) {
        for (int p = 0; p < PARTS; p++) {
            reopened += !gr_log_append_ready(gr_topic_log(f->topic, p));
            produce_durable(f, p, round);
            assert_under_cap(f);
        }
    }
    assert_true(reopened >= PARTS * 10); /* the active files really were closed and reopened */
    for (int p = 0; p < PARTS; p++)
        assert_true(gr_log_segment_count(gr_topic_log(f->topic, p)) > 1);
    for (int p = 0; p < PARTS; p++) {
        int64_t records;
        assert_int_equal(read_nowait_all(f, p, 0, &records), 12);
        assert_int_equal(records, f->appended[p]);
        check_partition(f, p);
        gr_store_fds_trim(f->store);
        assert_under_cap(f);
    }
    /* ListOffsets by time and -3 without opening a file on this thread, same answers as the blocking forms */
    for (int p = 0; p < PARTS; p++) {
        struct gr_log *log = gr_topic_log(f->topic, p);
        int64_t end = gr_log_end_offset(log), off, ts, off2, ts2;
        int32_t ep, ep2;
        struct gr_log_slice cold;
        long opens = fault_count_this_thread(F_OPEN);
        int rc, rounds = 0;
        while ((rc = gr_log_offset_for_time_nowait(log, 5000 + p, end, &off, &ts, &ep, &cold)) == -EAGAIN) {
            on_pool(f, &cold);
            gr_log_slice_release(&cold);
            assert_true(++rounds < 16);
        }
        assert_int_equal(rc, 0);
        assert_int_equal(ts, 5000 + p); /* round 5's first record */
        assert_int_equal(off, 25);
        rounds = 0;
        while ((rc = gr_log_max_timestamp_nowait(log, end, &off2, &ts2, &ep2, &cold)) == -EAGAIN) {
            on_pool(f, &cold);
            gr_log_slice_release(&cold);
            assert_true(++rounds < 16);
        }
        assert_int_equal(rc, 0);
        assert_int_equal(ts2, 11000 + p + 4); /* last round's last record */
        assert_int_equal(off2, f->appended[p] - 1);
        assert_int_equal(fault_count_this_thread(F_OPEN), opens);
        gr_store_fds_trim(f->store);
        assert_under_cap(f);
    }
}

/* The same workload, then a crash (no clean close) and recovery: every durable batch is there. */
static void test_cap_crash_recovery(void **state)
{
    struct fx *f = *state;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    fault_crash_track(f->dir);
    open_store(f);
    assert_int_equal(gr_store_topic_create(f->store, "capped", PARTS, NULL, NULL, 0, &f->topic), 0);
    for (int round = 0; round < 6; round++) {
        for (int p = 0; p < PARTS; p++) {
            produce_durable(f, p, round);
            assert_under_cap(f);
        }
    }
    fault_crash_now();
    gr_store_close(f->store);
    f->store = NULL;
    fault_crash_apply(7, true);
    for (int op = 0; op < F_OPS; op++)
        fault_clear((enum fault_op)op);
    open_store(f);
    assert_non_null(f->topic);
    assert_under_cap(f);
    for (int p = 0; p < PARTS; p++) {
        int64_t records;
        assert_int_equal(read_nowait_all(f, p, 0, &records), 6);
        check_partition(f, p);
    }
    /* and the partitions take appends again after recovery, through reopened files */
    for (int p = 0; p < PARTS; p++) {
        produce(f, p, 5, 9000 + p, (uint32_t)(p * 1000 + 6));
        gr_store_fds_trim(f->store);
    }
    for (int p = 0; p < PARTS; p++)
        check_partition(f, p);
    gr_log_set_level(GR_LOG_INFO);
}

/* A sealed segment whose .index is gone: the no-wait read hands the rebuild to the pool; the caller's
   thread neither opens nor writes a file, the rebuilt index is written back, the read is right. */
static void test_missing_index_rebuilt_on_pool(void **state)
{
    struct fx *f = *state;
    open_store(f);
    assert_int_equal(gr_store_topic_create(f->store, "capped", 1, NULL, NULL, 0, &f->topic), 0);
    for (int i = 0; i < 40; i++)
        produce(f, 0, 5, 1000 + i * 10, (uint32_t)i);
    struct gr_log *log = gr_topic_log(f->topic, 0);
    assert_true(gr_log_segment_count(log) > 2);
    gr_store_close(f->store); /* clean: sealed indexes are loaded lazily at the next open */
    char path[256];
    snprintf(path, sizeof(path), "%s/capped-0/00000000000000000000.index", f->dir);
    assert_int_equal(unlink(path), 0);
    open_store(f);
    log = gr_topic_log(f->topic, 0);
    long opens = fault_count_this_thread(F_OPEN), writes = fault_count_this_thread(F_PWRITE);
    long pool_opens = fault_count(F_OPEN) - opens;
    struct gr_log_slice s, cold;
    int rc, loads = 0, rounds = 0;
    while ((rc = gr_log_read_nowait(log, 3, 1 << 20, gr_log_end_offset(log), true, &s, &cold)) == -EAGAIN) {
        loads += cold.bytes < 0;
        on_pool(f, &cold);
        gr_log_slice_release(&cold);
        assert_true(++rounds < 16);
    }
    assert_int_equal(rc, 0);
    assert_true(loads >= 1);
    assert_int_equal(fault_count_this_thread(F_OPEN), opens);
    assert_int_equal(fault_count_this_thread(F_PWRITE), writes);
    assert_true(fault_count(F_OPEN) - fault_count_this_thread(F_OPEN) > pool_opens); /* the pool did */
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* rebuilt and written back by the pool */
    assert_true(log->segs[0]->index_loaded);
    assert_int_equal(s.first_batch_offset, 0);
    gr_log_slice_release(&s);
    struct th_seen *seen;
    assert_int_equal(th_read_all(log, 0, INT64_MAX, &seen), 40);
    for (int i = 0; i < 40; i++)
        assert_int_equal(seen[i].tag, (uint32_t)i);
    free(seen);
}

static void append_keyed(struct gr_log *log, int i)
{
    char key[8], value[256];
    snprintf(key, sizeof(key), "k%d", i % 5);
    memset(value, 'x', sizeof(value));
    int vl = snprintf(value, sizeof(value), "v%d", i);
    value[vl] = 'x';
    struct gr_record_in r = {.timestamp = gr_time_wall_ms(),
                             .key = {(const uint8_t *)key, (int32_t)strlen(key)},
                             .value = {(const uint8_t *)value, (int32_t)sizeof(value)}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .codec = GR_CODEC_NONE,
                                 .log_append_time = -1,
                                 .producer_id = -1,
                                 .producer_epoch = -1,
                                 .base_sequence = -1};
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_build(&bp, &r, 1, &b, &len), 0);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
}

static void test_compaction_of_closed_files(void **state)
{
    struct fx *f = *state;
    open_store(f);
    const char *k[] = {"cleanup.policy", "segment.bytes"}, *v[] = {"compact", "4096"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "cmp", 1, k, v, 2, &t), 0);
    for (int i = 0; i < 80; i++)
        append_keyed(gr_topic_log(t, 0), i);
    gr_store_close(f->store);
    open_store(f); /* clean: sealed files stay closed until used */
    t = gr_store_topic_find(f->store, "cmp", 3);
    struct gr_log *log = gr_topic_log(t, 0);
    int n = gr_log_segment_count(log);
    assert_true(n >= 4);
    for (int i = 0; i + 1 < n; i++)
        assert_true(log->segs[i]->fd < 0);
    assert_int_equal(gr_log_clean_now(log, gr_time_wall_ms(), NULL), 0);
    /* the old segments were read through the job's own descriptors: the cap's LRU did not grow past it */
    assert_true(gr_store_open_segment_fds(f->store) <= CAP);
    /* each key's latest value below the active segment is there, and fewer records than written */
    int64_t records = 0;
    bool latest[5] = {false};
    int64_t off = gr_log_start_offset(log), end = gr_log_end_offset(log);
    for (int guard = 0; off < end; guard++) {
        assert_true(guard < 1000);
        struct gr_log_slice s;
        assert_int_equal(gr_log_read(log, off, 1 << 20, end, true, &s), 0);
        if (s.bytes == 0) break;
        uint8_t *buf = th_slice_bytes(&s);
        size_t pos = 0, blen;
        const uint8_t *b;
        while (gr_batch_next(buf, (size_t)s.bytes, &pos, &b, &blen) == 1) {
            struct gr_record_iter it;
            assert_int_equal(gr_record_iter_init(&it, b, blen), 0);
            struct gr_record rec;
            while (gr_record_iter_next(&it, &rec) == 1) {
                records++;
                int key = rec.key.ptr[1] - '0', val = atoi((const char *)rec.value.ptr + 1);
                if (val >= 75)
                    latest[key] = latest[key] || val % 5 == key; /* the last 5 writes, one per key */
            }
            gr_record_iter_close(&it);
            off = gr_batch_last_offset(b) + 1;
        }
        free(buf);
        gr_log_slice_release(&s);
    }
    assert_true(records < 80);
    for (int i = 0; i < 5; i++)
        assert_true(latest[i]);
}

/* A log whose appender cannot park (the group coordinator's __consumer_offsets partitions) keeps its active
   file open under the cap, across rolls, outside the count: every other partition's idle file is closed
   down to the cap as before. */
static void test_kept_active_file_stays_open(void **state)
{
    struct fx *f = *state;
    open_store(f);
    assert_int_equal(gr_store_topic_create(f->store, "capped", PARTS, NULL, NULL, 0, &f->topic), 0);
    struct gr_log *kept = gr_topic_log(f->topic, 0);
    assert_int_equal(gr_log_keep_active_open(kept), 0);
    for (int round = 0; round < 12; round++) {
        for (int p = 0; p < PARTS; p++) {
            produce_durable(f, p, round);
            assert_true(gr_log_append_ready(kept)); /* never closed, not even right after its own roll */
            assert_true(gr_store_open_segment_fds(f->store) <=
                        CAP); /* and not counted: the others keep the cap */
            assert_true(open_log_files(f) <= CAP + 1);
        }
    }
    assert_true(gr_log_segment_count(kept) >
                1); /* it rolled: the exemption followed the new active segment */
    int closed = 0;
    for (int p = 1; p < PARTS; p++)
        closed += !gr_log_append_ready(gr_topic_log(f->topic, p));
    assert_true(closed >= PARTS - 1 - CAP); /* the others were still capped */
    check_partition(f, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cap_produce_and_fetch_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_crash_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_index_rebuilt_on_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_of_closed_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_active_file_stays_open, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
