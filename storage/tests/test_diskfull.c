/*
 * test_diskfull.c: a full disk at start, at run time and at stop (issue 26, defect 3), and the errno of a
 * failed dup in gr_store_write_file (defect 2). Faults come through the syscall shim (fault.h): ENOSPC on
 * every write stands for a full file system. Checked: an open rewrites no file it did not change (counted
 * renames); an open on a full disk serves what is there and appends again once space returns; a leader epoch
 * checkpoint whose write failed is written by the next checkpoint pass, and an open after a crash with the
 * file lagging the log derives a higher epoch from the log; a partition whose files cannot be
 * opened is offline while the others serve; DeleteRecords frees space even when its checkpoint cannot be
 * written; gr_store_write_file returns EMFILE, not ENOMEM, when dup fails.
 * Read next: test_faults.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/internal.h"
#include "storage/sys.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->store) gr_store_close(f->store);
    fault_uninstall();
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static struct gr_log *log_of(struct fx *f, const char *topic, int32_t p)
{
    struct gr_topic *t = gr_store_topic_find(f->store, topic, strlen(topic));
    assert_non_null(t);
    return gr_topic_log(t, p);
}

static int append_tag(struct gr_log *log, uint32_t tag)
{
    size_t len;
    uint8_t *b = th_simple(2, 1000 + tag, tag, &len);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    return err;
}

/* Every batch of the log, tags 0..n-1 in order. */
static void check_tags(struct gr_log *log, int n)
{
    struct th_seen *seen;
    int got = th_read_all(log, gr_log_start_offset(log), INT64_MAX, &seen);
    assert_int_equal(got, n);
    for (int i = 0; i < got; i++)
        assert_int_equal(seen[i].tag, (uint32_t)i);
    free(seen);
}

static void read_text(struct fx *f, const char *name, char *buf, size_t cap)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    buf[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (!fp) return;
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

static void create_with_data(struct fx *f, const char *topic, int32_t partitions, int batches)
{
    const char *k[] = {"segment.bytes"}, *v[] = {"600"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, topic, partitions, k, v, 1, &t), 0);
    for (int32_t p = 0; p < partitions; p++) {
        for (int i = 0; i < batches; i++) {
            assert_int_equal(append_tag(gr_topic_log(t, p), (uint32_t)i), 0);
            gr_store_quiesce(f->store); /* rolls wait for their spare file: keep segment counts fixed */
        }
    }
}

/* An open after a clean close writes nothing (before issue 26 it rewrote every leader-epoch-checkpoint);
   a close that changed nothing replaces only the clean-shutdown marker. */
static void test_open_rewrites_nothing(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 3, 4);
    gr_store_close(f->store);
    f->store = NULL;
    fault_install();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(fault_count(F_RENAME), 0);
    assert_int_equal(fault_count(F_PWRITE), 0);
    assert_int_equal(fault_count(F_FDATASYNC), 0);
    assert_int_equal(gr_log_leader_epoch(log_of(f, "t", 0)), 1);
    gr_store_close(f->store);
    f->store = NULL;
    assert_int_equal(fault_count(F_RENAME), 1); /* .kafka_cleanshutdown */
    char buf[64];
    read_text(f, "t-0/leader-epoch-checkpoint", buf, sizeof(buf));
    assert_string_equal(buf, "0\n1\n0 0\n"); /* no batch carries epoch 1: not written */
}

/* Unclean shutdown, a partition.metadata to rewrite, and every write failing with ENOSPC: the store opens,
   serves reads, refuses appends with ENOSPC without going offline, and appends again once space returns. */
static void test_open_on_full_disk_serves(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 2, 12);
    gr_log_flush_async(log_of(f, "t", 0));
    gr_log_flush_async(log_of(f, "t", 1));
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    f->store = NULL;
    char path[256];
    snprintf(path, sizeof(path), "%s/.kafka_cleanshutdown", f->dir);
    assert_int_equal(unlink(path), 0); /* unclean: recovery rescans the active segment */
    snprintf(path, sizeof(path), "%s/t-1/partition.metadata", f->dir);
    assert_int_equal(unlink(path), 0);
    fault_install();
    fault_fail(F_PWRITE, 1, ENOSPC, true);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_true(fault_count(F_PWRITE) > 0); /* the writes were tried, and failed */
    struct gr_log *l0 = log_of(f, "t", 0), *l1 = log_of(f, "t", 1);
    assert_false(gr_log_offline(l0));
    assert_false(gr_log_offline(l1));
    check_tags(l0, 12);
    check_tags(l1, 12);
    assert_int_equal(append_tag(l0, 12), -ENOSPC);
    assert_false(gr_log_offline(l0));
    assert_int_equal(gr_store_checkpoint(f->store), 0); /* queued; the writes fail on the flusher */
    gr_store_quiesce(f->store);
    fault_clear(F_PWRITE);
    assert_int_equal(append_tag(l0, 12), 0);
    assert_int_equal(append_tag(l1, 12), 0);
    gr_log_flush_async(l0);
    gr_log_flush_async(l1);
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    f->store = NULL;
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    check_tags(log_of(f, "t", 0), 13);
    check_tags(log_of(f, "t", 1), 13);
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* partition.metadata written by the open after space came back */
}

/* The first batch of a new epoch queues the epoch checkpoint; when that write fails (no room for the .tmp
   file), the next checkpoint pass writes it. */
static void test_epoch_write_retried(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 1, 2);
    gr_store_close(f->store);
    f->store = NULL;
    fault_install();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_log *log = log_of(f, "t", 0);
    assert_int_equal(gr_log_leader_epoch(log), 1);
    fault_fail(F_OPEN, 1, ENOSPC, true);
    assert_int_equal(append_tag(log, 2), 0);
    gr_store_quiesce(f->store);
    assert_true(atomic_load(&log->epochs_write_failed));
    char buf[64];
    read_text(f, "t-0/leader-epoch-checkpoint", buf, sizeof(buf));
    assert_string_equal(buf, "0\n1\n0 0\n");
    fault_clear(F_OPEN);
    assert_int_equal(gr_store_checkpoint(f->store), 0);
    gr_store_quiesce(f->store);
    read_text(f, "t-0/leader-epoch-checkpoint", buf, sizeof(buf));
    assert_string_equal(buf, "0\n2\n0 0\n1 4\n");
    assert_false(atomic_load(&log->epochs_write_failed));
}

/* The epoch checkpoint lags the log (its write failed for lack of space, and so did the clean close): the
   next open takes the last batch's epoch into account, restores its entry and starts a higher epoch, so no
   epoch number is handed out twice. */
static void test_epoch_derived_from_log(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 1, 2); /* offsets 0..3, epoch 0 */
    gr_store_close(f->store);
    f->store = NULL;
    fault_install();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_log *log = log_of(f, "t", 0);
    assert_int_equal(gr_log_leader_epoch(log), 1);
    fault_fail(F_OPEN, 1, ENOSPC, true);     /* no new file anywhere: .tmp files, snapshots, the marker */
    assert_int_equal(append_tag(log, 2), 0); /* offsets 4..5, epoch 1 */
    gr_store_close(f->store);                /* not clean: nothing could be created */
    f->store = NULL;
    fault_uninstall();
    char buf[64];
    read_text(f, "t-0/leader-epoch-checkpoint", buf, sizeof(buf));
    assert_string_equal(buf, "0\n1\n0 0\n");
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    log = log_of(f, "t", 0);
    check_tags(log, 3);
    assert_int_equal(gr_log_leader_epoch(log), 2);
    int64_t end;
    int32_t e;
    assert_int_equal(gr_log_end_offset_for_epoch(log, 0, &end, &e), 0);
    assert_int_equal(end, 4);
    assert_int_equal(gr_log_end_offset_for_epoch(log, 1, &end, &e), 0);
    assert_int_equal(end, 6);
    assert_int_equal(e, 1);
    assert_int_equal(gr_log_epoch_for_offset(log, 5), 1);
}

/* A partition whose active segment cannot be opened goes offline; the other partitions serve, the
   checkpoints keep its values, and DeleteTopics removes it. */
static void test_unopenable_partition_offline(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 2, 3);
    create_with_data(f, "u", 1, 2);
    gr_store_close(f->store);
    f->store = NULL;
    char path[256];
    snprintf(path, sizeof(path), "%s/t-1/%020d.log", f->dir, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    /* t-1's only segment becomes a directory: opening it read-write fails with EISDIR. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(f->store->offline_at_open, 1);
    struct gr_log *l0 = log_of(f, "t", 0), *l1 = log_of(f, "t", 1), *u = log_of(f, "u", 0);
    assert_true(gr_log_offline(l1));
    assert_false(gr_log_offline(l0));
    assert_false(gr_log_offline(u));
    assert_int_equal(append_tag(l1, 3), -EROFS);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(l1, 0, 1000, INT64_MAX, true, &s), -EROFS);
    check_tags(l0, 3);
    assert_int_equal(append_tag(l0, 3), 0);
    check_tags(l0, 4);
    check_tags(u, 2);
    /* The periodic checkpoint keeps t-1's recovery point (6: three 2-record batches). */
    assert_int_equal(gr_store_checkpoint(f->store), 0);
    gr_store_quiesce(f->store);
    char buf[256];
    read_text(f, "recovery-point-offset-checkpoint", buf, sizeof(buf));
    assert_non_null(strstr(buf, "\nt 1 6\n"));
    assert_int_equal(gr_store_topic_delete(f->store, gr_store_topic_find(f->store, "t", 1)), 0);
    assert_null(gr_store_topic_find(f->store, "t", 1));
    check_tags(u, 2);
}

/* A rebuildable file that cannot be read for a reason that says nothing about its content (here EISDIR; at
   start typically EMFILE under a low RLIMIT_NOFILE) is kept and its partition fails to load (offline) until
   the next start; only a damaged file (bad content) is deleted and rebuilt. Before: a snapshot that could not
   be read for any reason was deleted, and an unreadable leader-epoch-checkpoint was replaced afresh. */
static void test_unreadable_file_kept(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 3, 3);
    gr_store_close(f->store);
    f->store = NULL;
    char path[300];
    struct stat st;
    /* t-0: a producer snapshot at the log end (6) that is a directory: kept, the partition offline. */
    snprintf(path, sizeof(path), "%s/t-0/%020d.snapshot", f->dir, 6);
    unlink(path);
    assert_int_equal(mkdir(path, 0755), 0);
    /* t-1: its leader-epoch-checkpoint a directory: kept, the partition offline. */
    char epochs[300];
    snprintf(epochs, sizeof(epochs), "%s/t-1/leader-epoch-checkpoint", f->dir);
    unlink(epochs);
    assert_int_equal(mkdir(epochs, 0755), 0);
    /* t-2: a damaged snapshot (bad content): deleted, the partition serves. */
    char damaged[300];
    snprintf(damaged, sizeof(damaged), "%s/t-2/%020d.snapshot", f->dir, 6);
    FILE *fp = fopen(damaged, "w");
    assert_non_null(fp);
    fputs("not a snapshot", fp);
    fclose(fp);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(f->store->offline_at_open, 2);
    assert_true(gr_log_offline(log_of(f, "t", 0)));
    assert_true(gr_log_offline(log_of(f, "t", 1)));
    assert_false(gr_log_offline(log_of(f, "t", 2)));
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(stat(epochs, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(stat(damaged, &st), -1);
    check_tags(log_of(f, "t", 2), 3);
}

/* DeleteRecords on a full disk: its checkpoint cannot be written, yet the segments go (that is what frees
   space); the checkpoint is written by the next checkpoint pass once there is room. */
static void test_delete_records_on_full_disk(void **state)
{
    struct fx *f = *state;
    fault_install();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    create_with_data(f, "t", 1, 40);
    struct gr_log *log = log_of(f, "t", 0);
    gr_log_flush_async(log);
    gr_store_quiesce(f->store);
    int segs = gr_log_segment_count(log);
    assert_true(segs > 3);
    fault_fail(F_PWRITE, 1, ENOSPC, true);
    assert_int_equal(gr_log_delete_records(log, 60), 0);
    assert_int_equal(gr_log_start_offset(log), 60);
    assert_true(gr_log_segment_count(log) < segs);
    char buf[256];
    read_text(f, "log-start-offset-checkpoint", buf, sizeof(buf));
    assert_null(strstr(buf, "\nt 0 60\n"));
    fault_clear(F_PWRITE);
    assert_int_equal(gr_store_checkpoint(f->store), 0); /* the periodic pass (and retention's) */
    gr_store_quiesce(f->store);
    read_text(f, "log-start-offset-checkpoint", buf, sizeof(buf));
    assert_non_null(strstr(buf, "\nt 0 60\n"));
}

/* A failed dup reports its own errno (EMFILE), not ENOMEM. */
static void test_write_file_dup_errno(void **state)
{
    struct fx *f = *state;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fds[256], n = 0;
    while (n < 256 && (fds[n] = dup(0)) >= 0)
        n++;
    assert_true(n < 256);
    assert_int_equal(errno, EMFILE);
    uint8_t *data = malloc(4);
    memcpy(data, "abcd", 4);
    int err = gr_store_write_file(f->store, f->store->root_fd, "x", data, 4, true);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(err, -EMFILE);
    data = malloc(4);
    memcpy(data, "abcd", 4);
    assert_int_equal(gr_store_write_file(f->store, f->store->root_fd, "x", data, 4, true), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_rewrites_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_on_full_disk_serves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_write_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_derived_from_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unopenable_partition_offline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable_file_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_records_on_full_disk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_file_dup_errno, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
