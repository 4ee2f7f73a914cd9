/*
 * test_topic_ops.c: topic metadata operations split into begin (network thread), run (I/O pool thread) and
 * finish (network thread), and storage's FIFO of them (store.h gr_topic_op_*, gr_store_topic_op_submit).
 * Checks: a create through the pool makes no blocking call on the submitting thread (the sys.h audit) and
 * the topic is invisible until finish; operations run one at a time in submission order (a second create of
 * the same name gets -EEXIST, a colliding name -ENOTUNIQ, a delete followed at once by a create of the same
 * name gives a new empty topic, a delete of a topic deleted meanwhile -ENOENT, a barrier completes last);
 * ENOSPC/EIO injected at every point of a create's run leaves no topic, no partition directory, no topic
 * file, and the name usable; failed delete/grow/config leave the topic as it was (also after a reopen);
 * crashes at every I/O point of an async create + delete reopen to all-or-nothing topics.
 */
#include <dirent.h>
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
#include "storage/iopool.h"
#include "storage/sys.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_iopool *pool;
};

/* Completions recorded by cb, in order. */
struct done_rec {
    int order[16];
    int err[16];
    struct gr_topic *topic[16];
    int count;
};
struct cb_ctx {
    struct done_rec *rec;
    int id;
};

static void cb(void *ctx, int err, struct gr_topic *t)
{
    struct cb_ctx *c = ctx;
    struct done_rec *r = c->rec;
    r->order[r->count] = c->id;
    r->err[c->id] = err;
    r->topic[c->id] = t;
    r->count++;
}

static int audit_calls;
static void audit(const char *op, int fd, const char *path)
{
    (void)fd;
    (void)path;
    (void)op;
    audit_calls++;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_iopool_destroy(f->pool);
    if (f->store) gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Entries of the log directory whose name starts with `prefix` and that are not "-delete" directories. */
static int live_dirs(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
            !(l > 7 && strcmp(de->d_name + l - 7, "-delete") == 0))
            n++;
    }
    closedir(d);
    return n;
}

static int topic_files(const char *dir)
{
    char p[128];
    snprintf(p, sizeof p, "%s/__gregor_topics", dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_create_on_pool_no_blocking_call_on_caller(void **state)
{
    struct fx *f = *state;
    struct done_rec rec = {0};
    struct cb_ctx c0 = {&rec, 0};
    const char *k[] = {"retention.ms"}, *v[] = {"1000"};
    audit_calls = 0;
    gr_sys_audit_this_thread(audit);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("p", 20, k, v, 1, true), cb, &c0);
    /* begin ran; the topic is not visible before finish */
    assert_null(gr_store_topic_find(f->store, "p", 1));
    assert_int_equal(gr_store_topic_ops_pending(f->store), 1);
    gr_iopool_drain(f->pool); /* finish + cb on this thread */
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(audit_calls, 0);
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.err[0], 0);
    struct gr_topic *t = gr_store_topic_find(f->store, "p", 1);
    assert_ptr_equal(t, rec.topic[0]);
    assert_int_equal(gr_topic_partition_count(t), 20);
    assert_string_equal(gr_topic_config_get(t, "retention.ms"), "1000");
    assert_int_equal(gr_store_topic_ops_pending(f->store), 0);
    /* the logs work: append and flush on partition 19 */
    size_t len;
    uint8_t *b = th_simple(3, 1000, 1, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(gr_topic_log(t, 19), b, len, -1, &res), 0);
    free(b);
    assert_int_equal(res.base_offset, 0);
    gr_log_flush_async(gr_topic_log(t, 19));
    assert_int_equal(th_wait_durable(gr_topic_log(t, 19), 3), 0);

    /* grow, config and delete through the pool: no blocking call on this thread either */
    struct cb_ctx c1 = {&rec, 1}, c2 = {&rec, 2}, c3 = {&rec, 3};
    const char *k2[] = {"segment.bytes"}, *v2[] = {"5000"};
    audit_calls = 0;
    gr_sys_audit_this_thread(audit);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_add_partitions(t, 25), cb, &c1);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_set_configs(t, k2, v2, 1), cb, &c2);
    assert_int_equal(gr_topic_partition_count(t), 20); /* not before finish */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_delete(t), cb, &c3);
    assert_int_equal(gr_store_topic_ops_pending(f->store), 3);
    gr_iopool_drain(f->pool);
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(audit_calls, 0);
    assert_int_equal(rec.count, 4);
    assert_int_equal(rec.order[1], 1);
    assert_int_equal(rec.order[2], 2);
    assert_int_equal(rec.order[3], 3);
    assert_int_equal(rec.err[1], 0);
    assert_int_equal(rec.err[2], 0);
    assert_int_equal(rec.err[3], 0);
    assert_int_equal(gr_topic_partition_count(t), 25);
    assert_string_equal(gr_topic_config_get(t, "segment.bytes"), "5000");
    assert_null(gr_topic_config_get(t, "retention.ms"));
    assert_null(gr_store_topic_find(f->store, "p", 1));
    gr_store_quiesce(f->store);
    assert_int_equal(live_dirs(f->dir, "p-"), 0);
    assert_int_equal(topic_files(f->dir), 0);
}

static void test_fifo_serializes(void **state)
{
    struct fx *f = *state;
    struct done_rec rec = {0};
    struct cb_ctx c[8];
    for (int i = 0; i < 8; i++)
        c[i] = (struct cb_ctx){&rec, i};
    /* two creates of one name in flight: the second sees the first's result */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("s", 3, NULL, NULL, 0, true), cb, &c[0]);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("s", 5, NULL, NULL, 0, true), cb, &c[1]);
    /* a colliding name ('.' and '_' alike) behind a create */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("a.b", 1, NULL, NULL, 0, true), cb, &c[2]);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("a_b", 1, NULL, NULL, 0, true), cb, &c[3]);
    /* bad arguments: reported by begin, in turn */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("bad/name", 1, NULL, NULL, 0, true), cb,
                             &c[4]);
    /* a barrier completes after everything before it */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_barrier(), cb, &c[5]);
    assert_int_equal(rec.count, 0); /* everything waits behind the first create */
    assert_int_equal(gr_store_topic_ops_pending(f->store), 6);
    gr_iopool_drain(f->pool);
    assert_int_equal(rec.count, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(rec.order[i], i);
    assert_int_equal(rec.err[5], 0);
    assert_null(rec.topic[5]);
    assert_int_equal(rec.err[0], 0);
    assert_int_equal(rec.err[1], -EEXIST);
    assert_int_equal(rec.err[2], 0);
    assert_int_equal(rec.err[3], -ENOTUNIQ);
    assert_int_equal(rec.err[4], -EINVAL);
    struct gr_topic *s = gr_store_topic_find(f->store, "s", 1);
    assert_int_equal(gr_topic_partition_count(s), 3);
    uint8_t old_id[16];
    memcpy(old_id, gr_topic_id(s), 16);
    size_t len;
    uint8_t *b = th_simple(2, 1000, 1, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(gr_topic_log(s, 0), b, len, -1, &res), 0);
    free(b);

    /* delete + create of the same name back to back, and a second delete of the deleted topic */
    rec.count = 0;
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_delete(s), cb, &c[5]);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("s", 2, NULL, NULL, 0, true), cb, &c[6]);
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_delete(s), cb, &c[7]);
    assert_ptr_equal(gr_store_topic_find(f->store, "s", 1), s); /* live until the delete's finish */
    gr_iopool_drain(f->pool);
    assert_int_equal(rec.count, 3);
    assert_int_equal(rec.err[5], 0);
    assert_int_equal(rec.err[6], 0);
    assert_int_equal(rec.err[7], -ENOENT);
    struct gr_topic *s2 = gr_store_topic_find(f->store, "s", 1);
    assert_non_null(s2);
    assert_ptr_not_equal(s2, s);
    assert_memory_not_equal(gr_topic_id(s2), old_id, 16);
    assert_int_equal(gr_topic_partition_count(s2), 2);
    assert_int_equal(gr_log_end_offset(gr_topic_log(s2, 0)), 0); /* the old data is gone */
    assert_null(gr_topic_log(s, 0));                             /* the old topic: deleted */

    /* no pool: the same FIFO runs inline */
    rec.count = 0;
    gr_store_topic_op_submit(f->store, NULL, gr_topic_op_create("inline", 1, NULL, NULL, 0, true), cb, &c[0]);
    assert_int_equal(rec.count, 1);
    assert_int_equal(rec.err[0], 0);
    assert_non_null(gr_store_topic_find(f->store, "inline", 6));

    /* the state survives a reopen */
    gr_iopool_destroy(f->pool);
    f->pool = NULL;
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    s2 = gr_store_topic_find(f->store, "s", 1);
    assert_non_null(s2);
    assert_int_equal(gr_topic_partition_count(s2), 2);
    assert_int_equal(gr_log_end_offset(gr_topic_log(s2, 0)), 0);
    assert_non_null(gr_store_topic_find(f->store, "a.b", 3));
    assert_null(gr_store_topic_find(f->store, "a_b", 3));
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
}

/* A fault at each point of a create's run: the error comes back, nothing is visible or left behind. */
static void test_create_faults(void **state)
{
    struct fx *f = *state;
    static const struct {
        enum fault_op op;
        int err;
    } kinds[] = {{F_MKDIR, ENOSPC},  {F_OPEN, ENOSPC}, {F_PWRITE, ENOSPC},
                 {F_FDATASYNC, EIO}, {F_FSYNC, EIO},   {F_RENAME, EIO}};
    gr_iopool_destroy(f->pool);
    f->pool = NULL;
    gr_store_close(f->store);
    int checked = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int nth = 1; nth <= 40; nth++) {
            fault_install();
            assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
            assert_int_equal(gr_iopool_create(1, NULL, NULL, &f->pool), 0);
            gr_store_quiesce(f->store);
            int topics = gr_store_topic_count(f->store);
            long before = fault_count(kinds[k].op);
            fault_fail(kinds[k].op, nth, kinds[k].err, false);
            struct done_rec rec = {0};
            struct cb_ctx c = {&rec, 0};
            gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
            gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("e", 3, NULL, NULL, 0, true), cb,
                                     &c);
            gr_iopool_drain(f->pool);
            gr_log_set_level(GR_LOG_INFO);
            bool hit = fault_count(kinds[k].op) - before >= nth;
            fault_clear(kinds[k].op);
            assert_int_equal(rec.count, 1);
            if (rec.err[0] == 0) { /* the fault hit no call of the create (or a best-effort one) */
                assert_non_null(gr_store_topic_find(f->store, "e", 1));
                struct done_rec r2 = {0};
                struct cb_ctx c2 = {&r2, 0};
                gr_store_topic_op_submit(f->store, f->pool,
                                         gr_topic_op_delete(gr_store_topic_find(f->store, "e", 1)), cb, &c2);
                gr_iopool_drain(f->pool);
                assert_int_equal(r2.err[0], 0);
            } else {
                assert_true(hit);
                assert_int_equal(rec.err[0], -kinds[k].err);
                assert_null(rec.topic[0]);
                assert_null(gr_store_topic_find(f->store, "e", 1));
                assert_int_equal(gr_store_topic_count(f->store), topics);
                checked++;
            }
            gr_store_quiesce(f->store); /* the "-delete" directories are removed */
            assert_int_equal(live_dirs(f->dir, "e-"), 0);
            assert_int_equal(topic_files(f->dir), topics);
            /* the name is usable again at once */
            struct done_rec r3 = {0};
            struct cb_ctx c3 = {&r3, 0};
            gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_create("e", 2, NULL, NULL, 0, true), cb,
                                     &c3);
            gr_iopool_drain(f->pool);
            assert_int_equal(r3.err[0], 0);
            gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_delete(r3.topic[0]), cb, &c3);
            gr_iopool_drain(f->pool);
            gr_iopool_destroy(f->pool);
            f->pool = NULL;
            gr_store_close(f->store);
            f->store = NULL;
            fault_uninstall();
            if (!hit) break; /* past the create's last call of this kind */
        }
    }
    print_message("create faults: %d injected failures checked\n", checked);
    assert_true(checked >= 20);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_null(gr_store_topic_find(f->store, "e", 1));
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
}

/* Failed delete, grow and config change: the topic stays as it was, also after a reopen. */
static void test_other_faults(void **state)
{
    struct fx *f = *state;
    gr_iopool_destroy(f->pool);
    gr_store_close(f->store);
    fault_install();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(gr_iopool_create(1, NULL, NULL, &f->pool), 0);
    const char *k[] = {"retention.ms"}, *v[] = {"5000"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "o", 2, k, v, 1, &t), 0);
    struct done_rec rec = {0};
    struct cb_ctx c[3] = {{&rec, 0}, {&rec, 1}, {&rec, 2}};
    gr_store_quiesce(f->store);
    fault_fail(F_UNLINK, 1, EIO, true); /* delete: the topic file's unlink */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_delete(t), cb, &c[0]);
    gr_iopool_drain(f->pool);
    fault_clear(F_UNLINK);
    fault_fail(F_MKDIR, 1, ENOSPC, true); /* grow: the new partition's directory */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_add_partitions(t, 4), cb, &c[1]);
    gr_iopool_drain(f->pool);
    fault_clear(F_MKDIR);
    const char *k2[] = {"retention.ms"}, *v2[] = {"9000"};
    fault_fail(F_FDATASYNC, 1, EIO, true); /* config: the new topic file's fdatasync */
    gr_store_topic_op_submit(f->store, f->pool, gr_topic_op_set_configs(t, k2, v2, 1), cb, &c[2]);
    gr_iopool_drain(f->pool);
    fault_clear(F_FDATASYNC);
    assert_int_equal(rec.count, 3);
    assert_int_equal(rec.err[0], -EIO);
    assert_int_equal(rec.err[1], -ENOSPC);
    assert_int_equal(rec.err[2], -EIO);
    assert_ptr_equal(gr_store_topic_find(f->store, "o", 1), t);
    assert_false(gr_log_offline(gr_topic_log(t, 0)));
    assert_int_equal(gr_topic_partition_count(t), 2);
    assert_string_equal(gr_topic_config_get(t, "retention.ms"), "5000");
    size_t len;
    uint8_t *b = th_simple(2, 1000, 1, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(gr_topic_log(t, 1), b, len, -1, &res), 0);
    free(b);
    gr_iopool_destroy(f->pool);
    f->pool = NULL;
    gr_store_close(f->store);
    fault_uninstall();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    t = gr_store_topic_find(f->store, "o", 1);
    assert_non_null(t);
    assert_int_equal(gr_topic_partition_count(t), 2);
    assert_string_equal(gr_topic_config_get(t, "retention.ms"), "5000");
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 2);
    assert_int_equal(live_dirs(f->dir, "o-2"), 0);
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
}

/* The async workload for crash mode: "k" (3 partitions) created through the pool, then "d" deleted. */
static void crash_workload(const struct gr_store_config *cfg, bool *created, bool *deleted)
{
    *created = *deleted = false;
    struct gr_store *store;
    struct gr_iopool *pool;
    if (gr_store_open(cfg, &store) < 0) return;
    if (gr_iopool_create(1, NULL, NULL, &pool) < 0) abort();
    struct done_rec rec = {0};
    struct cb_ctx c[2] = {{&rec, 0}, {&rec, 1}};
    gr_store_topic_op_submit(store, pool, gr_topic_op_create("k", 3, NULL, NULL, 0, true), cb, &c[0]);
    struct gr_topic *d = gr_store_topic_find(store, "d", 1);
    if (d) gr_store_topic_op_submit(store, pool, gr_topic_op_delete(d), cb, &c[1]);
    gr_iopool_drain(pool);
    *created = rec.count >= 1 && rec.err[0] == 0;
    *deleted = d && rec.count == 2 && rec.err[1] == 0;
    gr_iopool_destroy(pool);
    gr_store_close(store);
}

static void test_crash_async_create_delete(void **state)
{
    struct fx *f = *state;
    gr_iopool_destroy(f->pool);
    f->pool = NULL;
    gr_store_close(f->store);
    f->store = NULL;
    char dir[64];
    struct gr_store_config cfg;
    bool created, deleted;
    long total = 0;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    for (long point = 0; point == 0 || point <= total; point++) {
        th_tmpdir(dir, sizeof dir);
        th_config(&cfg, dir);
        struct gr_store *store;
        struct gr_topic *t;
        assert_int_equal(gr_store_open(&cfg, &store), 0); /* "d" exists, durable, before the crash runs */
        assert_int_equal(gr_store_topic_create(store, "d", 2, NULL, NULL, 0, &t), 0);
        gr_store_close(store);
        fault_install();
        fault_crash_track(dir);
        if (point) fault_crash_at(point);
        crash_workload(&cfg, &created, &deleted);
        if (!point) {
            total = fault_io_count();
            assert_true(created && deleted);
        } else {
            fault_crash_apply((unsigned)point, (point & 1) != 0);
        }
        fault_uninstall();
        th_flush_reset();
        assert_int_equal(gr_store_open(&cfg, &store), 0);
        struct gr_topic *k = gr_store_topic_find(store, "k", 1);
        struct gr_topic *d = gr_store_topic_find(store, "d", 1);
        if (created) assert_non_null(k); /* acknowledged: durable */
        if (deleted) assert_null(d);
        if (k) { /* all or nothing: every partition opens, empty */
            assert_int_equal(gr_topic_partition_count(k), 3);
            for (int32_t p = 0; p < 3; p++)
                assert_int_equal(gr_log_end_offset(gr_topic_log(k, p)), 0);
        }
        if (d) assert_int_equal(gr_topic_partition_count(d), 2);
        gr_store_quiesce(store);
        if (!k) assert_int_equal(live_dirs(dir, "k-"), 0); /* strays were removed */
        if (!d) assert_int_equal(live_dirs(dir, "d-"), 0);
        gr_store_close(store);
        th_rmtree(dir);
    }
    gr_log_set_level(GR_LOG_INFO);
    print_message("crash mode (async create + delete): %ld I/O points checked\n", total);
    assert_true(total > 20);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_on_pool_no_blocking_call_on_caller, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_serializes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_async_create_delete, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
