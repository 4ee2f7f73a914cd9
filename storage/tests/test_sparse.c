/*
 * test_sparse.c: sparse topics (cluster mode, issue 19): a topic of the cluster image holding only the
 * partitions this broker is a replica of (store.h gr_topic_op_create_sparse, gr_topic_op_replica_make,
 * gr_topic_op_replica_delete). Checks: a sparse topic is made with the image's id and no partition held;
 * partitions 1 and 3 of 4 are made (Kafka's "<topic>-<p>" directories with partition.metadata naming the
 * topic id), the others stay NULL; appends, retention, checkpoints (only held partitions listed) and a clean
 * close and reopen cope with the holes and keep the data; one partition is deleted (NULL at once, directory
 * gone once the flushers ran, still gone after a reopen); a grow adds partitions not held; the errors of
 * each operation; a whole sparse topic is deleted with no directory left. Ops run through an I/O pool from
 * this (the network) thread, as the server runs them. Read next: cluster/tests/test_replicas.c.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/iopool.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_iopool *pool;
};

static const uint8_t ID[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x47, 0x88,
                               0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0, 0x01};

struct done {
    int err;
    int count;
    struct gr_topic *topic;
};
static void done_cb(void *ctx, int err, struct gr_topic *t)
{
    struct done *d = ctx;
    d->err = err;
    d->topic = t;
    d->count++;
}

/* Submits `op` through the pool and waits for its completion: the operation's result. */
static int run_op(struct fx *f, struct gr_topic_op *op, struct gr_topic **out)
{
    struct done d = {0};
    gr_store_topic_op_submit(f->store, f->pool, op, done_cb, &d);
    gr_iopool_drain(f->pool);
    assert_int_equal(d.count, 1);
    if (out) *out = d.topic;
    return d.err;
}

static bool dir_exists(struct fx *f, const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Number of entries of the log directory whose name starts with `prefix`. */
static int count_entries(struct fx *f, const char *prefix)
{
    DIR *d = opendir(f->dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static char *read_file(struct fx *f, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    FILE *fp = fopen(path, "r");
    if (!fp) return NULL;
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, fp);
    buf[n] = 0;
    fclose(fp);
    return buf;
}

static void reopen(struct fx *f)
{
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
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
    gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static struct gr_topic *make_sparse(struct fx *f, const char *name, int32_t partitions)
{
    struct gr_topic *t = NULL;
    const char *k[] = {"retention.ms"}, *v[] = {"1000"};
    assert_int_equal(run_op(f, gr_topic_op_create_sparse(name, ID, partitions, k, v, 1), &t), 0);
    assert_non_null(t);
    return t;
}

static void append(struct gr_log *log, int32_t count, int64_t ts, uint32_t tag)
{
    size_t len;
    uint8_t *b = th_simple(count, ts, tag, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
}

static void test_make_some_partitions(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t = make_sparse(f, "s", 4);
    assert_true(gr_topic_sparse(t));
    assert_memory_equal(gr_topic_id(t), ID, 16);
    assert_int_equal(gr_topic_partition_count(t), 4);
    for (int32_t p = 0; p < 4; p++)
        assert_null(gr_topic_log(t, p));
    assert_int_equal(count_entries(f, "s-"), 0);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 1), NULL), 0);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 3), NULL), 0);
    assert_null(gr_topic_log(t, 0));
    assert_non_null(gr_topic_log(t, 1));
    assert_null(gr_topic_log(t, 2));
    assert_non_null(gr_topic_log(t, 3));
    assert_true(dir_exists(f, "s-1") && dir_exists(f, "s-3"));
    assert_false(dir_exists(f, "s-0") || dir_exists(f, "s-2"));
    char id[23], want[64];
    gr_uuid_to_base64url(ID, id);
    snprintf(want, sizeof want, "version: 0\ntopic_id: %s\n", id);
    char *pm = read_file(f, "s-3/partition.metadata");
    assert_non_null(pm);
    assert_string_equal(pm, want);
    free(pm);
    /* A single-node topic stays whole and refuses replica operations. */
    struct gr_topic *full;
    assert_int_equal(gr_store_topic_create(f->store, "full", 2, NULL, NULL, 0, &full), 0);
    assert_false(gr_topic_sparse(full));
    assert_non_null(gr_topic_log(full, 0));
    assert_int_equal(run_op(f, gr_topic_op_replica_make(full, 0), NULL), -EINVAL);
    assert_int_equal(run_op(f, gr_topic_op_replica_delete(full, 1), NULL), -EINVAL);
    /* Errors: held already, out of range, not held, the same id again, the same name again. */
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 1), NULL), -EEXIST);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 4), NULL), -EINVAL);
    assert_int_equal(run_op(f, gr_topic_op_replica_delete(t, 0), NULL), -ENOENT);
    assert_int_equal(run_op(f, gr_topic_op_create_sparse("other", ID, 1, NULL, NULL, 0), NULL), -EEXIST);
    uint8_t id2[16];
    gr_uuid_random(id2);
    assert_int_equal(run_op(f, gr_topic_op_create_sparse("s", id2, 1, NULL, NULL, 0), NULL), -EEXIST);
    static const uint8_t zero[16];
    assert_int_equal(run_op(f, gr_topic_op_create_sparse("z", zero, 1, NULL, NULL, 0), NULL), -EEXIST);
}

static void test_holes_survive_restart_retention_checkpoint(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t = make_sparse(f, "s", 4);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 1), NULL), 0);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 3), NULL), 0);
    append(gr_topic_log(t, 1), 5, 1000, 7);
    append(gr_topic_log(t, 1), 3, 2000, 8);
    append(gr_topic_log(t, 3), 2, 3000, 9);
    /* Retention with holes (retention.ms 1000: nothing below the high watermark the server never set). */
    gr_store_retention_run(f->store, 1000000);
    assert_int_equal(gr_store_checkpoint(f->store), 0);
    gr_store_quiesce(f->store);
    char *ck = read_file(f, "recovery-point-offset-checkpoint");
    assert_non_null(ck);
    assert_non_null(strstr(ck, "0\n2\n")); /* two partitions held: 1 and 3 */
    assert_non_null(strstr(ck, "s 1 "));
    assert_non_null(strstr(ck, "s 3 "));
    assert_null(strstr(ck, "s 0 "));
    assert_null(strstr(ck, "s 2 "));
    free(ck);
    reopen(f);
    t = gr_store_topic_find(f->store, "s", 1);
    assert_non_null(t);
    assert_true(gr_topic_sparse(t));
    assert_int_equal(gr_topic_partition_count(t), 4);
    assert_memory_equal(gr_topic_id(t), ID, 16);
    assert_null(gr_topic_log(t, 0));
    assert_null(gr_topic_log(t, 2));
    assert_non_null(gr_topic_log(t, 1));
    assert_non_null(gr_topic_log(t, 3));
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 8);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 3)), 2);
    struct th_seen *seen;
    assert_int_equal(th_read_all(gr_topic_log(t, 1), 0, INT64_MAX, &seen), 2);
    assert_int_equal(seen[0].tag, 7);
    assert_int_equal(seen[1].tag, 8);
    free(seen);
    assert_string_equal(gr_topic_config_get(t, "retention.ms"), "1000");
    /* No directory appeared for the partitions not held. */
    assert_false(dir_exists(f, "s-0") || dir_exists(f, "s-2"));
}

static void test_delete_one_partition(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t = make_sparse(f, "s", 4);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 1), NULL), 0);
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 3), NULL), 0);
    struct gr_log *old = gr_topic_log(t, 1);
    append(old, 4, 1000, 5);
    assert_int_equal(run_op(f, gr_topic_op_replica_delete(t, 1), NULL), 0);
    assert_null(gr_topic_log(t, 1));
    assert_true(gr_log_offline(old)); /* still allocated, offline */
    assert_false(dir_exists(f, "s-1"));
    gr_store_quiesce(f->store); /* the flusher removes the "-delete" directory */
    assert_int_equal(count_entries(f, "s-1"), 0);
    assert_true(dir_exists(f, "s-3"));
    assert_int_equal(gr_store_checkpoint(f->store), 0);
    gr_store_quiesce(f->store);
    char *ck = read_file(f, "log-start-offset-checkpoint");
    assert_non_null(strstr(ck, "0\n1\ns 3 0\n"));
    free(ck);
    reopen(f);
    t = gr_store_topic_find(f->store, "s", 1);
    assert_null(gr_topic_log(t, 1));
    assert_non_null(gr_topic_log(t, 3));
    /* Made again: a new empty log, none of the old records. */
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 1), NULL), 0);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 1)), 0);
    /* Grow: the new partitions are not held. */
    assert_int_equal(run_op(f, gr_topic_op_add_partitions(t, 6), NULL), 0);
    assert_int_equal(gr_topic_partition_count(t), 6);
    assert_null(gr_topic_log(t, 4));
    assert_null(gr_topic_log(t, 5));
    assert_false(dir_exists(f, "s-4"));
    assert_int_equal(run_op(f, gr_topic_op_replica_make(t, 5), NULL), 0);
    reopen(f);
    t = gr_store_topic_find(f->store, "s", 1);
    assert_int_equal(gr_topic_partition_count(t), 6);
    assert_non_null(gr_topic_log(t, 5));
    assert_null(gr_topic_log(t, 4));
    /* The whole topic deleted: every held directory goes, the name and id are free. */
    assert_int_equal(run_op(f, gr_topic_op_delete(t), NULL), 0);
    gr_store_quiesce(f->store);
    assert_int_equal(count_entries(f, "s-"), 0);
    assert_null(gr_store_topic_find(f->store, "s", 1));
    reopen(f);
    assert_int_equal(gr_store_topic_count(f->store), 0);
    assert_int_equal(count_entries(f, "s-"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_make_some_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holes_survive_restart_retention_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_one_partition, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
