/*
 * test_replicas.c: the replica manager (cluster/replicas.h) with an image the test mutates and a real store
 * in a temporary directory, operations on a real I/O pool, the manager's timers on a real libev loop.
 * Checks: nothing happens before start; at start the partitions whose replica set holds this node get
 * local logs (sparse topic with the image's id), the others none, and image topics are linked to the store
 * topic (NULL where none); a replica set that drops this node deletes that local log (stray); a topic removed
 * from the image is deleted locally; a topic found at start under an id the image does not know (deleted and
 * re-created while the broker was down) is deleted and made anew under the new id, empty (the old records
 * are never readable); a grown image topic grows the store topic; passes are bounded (3 per pass: 10
 * partitions take at least 4 passes, none submits more than 3); the on_log hook sees each make and delete;
 * a topic leaving the image (deleted, or re-created under a new id) drops the groups' committed offsets of
 * it in the coordinator (a fake environment, coordinator/tests/fake.h), other topics' offsets stay; a
 * partition whose directory cannot be made (ENOSPC on every mkdir, storage/tests/fault.h) is retried after
 * a growing back-off, not in a busy loop, and made once the disk recovers; while the image is loading (a
 * snapshot being fed, its topics dropped) no pass deletes anything, and the pass after it does.
 */
#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "cluster/replicas.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/tests/fake.h"
#include "storage/iopool.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

#define SELF 1

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_iopool *pool;
    struct ev_loop *loop;
    struct gr_image *img;
    struct gr_replicas *rep;
    int made_hook, deleted_hook;
};

static void on_log(void *ctx, struct gr_topic *t, int32_t p, struct gr_log *log, bool made)
{
    struct fx *f = ctx;
    assert_non_null(t);
    assert_non_null(log);
    assert_true(p >= 0);
    if (made) {
        assert_ptr_equal(gr_topic_log(t, p), log);
        f->made_hook++;
    } else {
        assert_null(gr_topic_log(t, p));
        f->deleted_hook++;
    }
}

static void new_replicas(struct fx *f, int32_t per_pass)
{
    struct gr_replicas_config rc = {.store = f->store,
                                    .pool = f->pool,
                                    .loop = f->loop,
                                    .ops_per_pass_max = per_pass,
                                    .on_log = on_log,
                                    .ctx = f};
    f->rep = gr_replicas_new(&rc, f->img);
    assert_non_null(f->rep);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_config(&f->cfg, f->dir);
    f->cfg.node_id = SELF;
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
    f->loop = ev_loop_new(EVFLAG_AUTO);
    f->img = gr_image_new(SELF);
    assert_non_null(f->img);
    new_replicas(f, 0);
    *state = f;
    return 0;
}

static void stop_all(struct fx *f)
{
    gr_iopool_drain(f->pool);
    gr_replicas_free(f->rep);
    f->rep = NULL;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    stop_all(f);
    gr_iopool_destroy(f->pool);
    gr_store_close(f->store);
    gr_image_free(f->img);
    ev_loop_destroy(f->loop);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* Runs completions and loop iterations until the manager is idle (fails after 10 s). */
static void settle(struct fx *f)
{
    int64_t until = gr_time_mono_ms() + 10000;
    struct gr_replicas_stats st;
    for (;;) {
        gr_iopool_complete(f->pool);
        ev_run(f->loop, EVRUN_NOWAIT);
        gr_replicas_stats(f->rep, &st);
        if (st.idle) return;
        assert_true(gr_time_mono_ms() < until);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Puts topic `name` with id byte `idb` and `n` partitions; partition p's replica is repl[p]. */
static struct gr_image_topic *put(struct fx *f, const char *name, uint8_t idb, int32_t n, const int32_t *repl)
{
    uint8_t id[16] = {0};
    id[0] = idb;
    id[15] = 0x42;
    struct gr_image_topic *it;
    assert_int_equal(gr_image_put_topic(f->img, name, strlen(name), id, false, n, NULL, &it), 0);
    for (int32_t p = 0; p < n; p++) {
        struct gr_image_partition_state ps = {.leader = repl[p],
                                              .leader_epoch = 0,
                                              .replicas = &repl[p],
                                              .replica_count = 1,
                                              .isr = &repl[p],
                                              .isr_count = 1};
        assert_int_equal(gr_image_set_partition(f->img, it, p, &ps), 0);
    }
    return it;
}

/* Runs completions and loop iterations for 200 ms (a manager that may not be idle). */
static void spin(struct fx *f)
{
    int64_t until = gr_time_mono_ms() + 200;
    while (gr_time_mono_ms() < until) {
        gr_iopool_complete(f->pool);
        ev_run(f->loop, EVRUN_NOWAIT);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static bool dir_exists(struct fx *f, const char *name)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static struct gr_topic *stopic(struct fx *f, const char *name)
{
    return gr_store_topic_find(f->store, name, strlen(name));
}

static void test_make_link_and_stray_delete(void **state)
{
    struct fx *f = *state;
    const int32_t ra[4] = {SELF, 2, SELF, 3}, rb[2] = {2, 3};
    put(f, "a", 1, 4, ra);
    put(f, "b", 2, 2, rb);
    gr_image_changed(f->img); /* not started: nothing happens */
    gr_iopool_drain(f->pool);
    ev_run(f->loop, EVRUN_NOWAIT);
    assert_null(stopic(f, "a"));
    assert_int_equal(gr_replicas_start(f->rep), 0);
    assert_int_equal(gr_replicas_start(f->rep), -EALREADY);
    settle(f);
    struct gr_topic *t = stopic(f, "a");
    assert_non_null(t);
    assert_true(gr_topic_sparse(t));
    assert_memory_equal(gr_topic_id(t), gr_image_topic_find(f->img, "a", 1)->id, 16);
    assert_non_null(gr_topic_log(t, 0));
    assert_null(gr_topic_log(t, 1));
    assert_non_null(gr_topic_log(t, 2));
    assert_null(gr_topic_log(t, 3));
    assert_true(dir_exists(f, "a-0") && dir_exists(f, "a-2"));
    assert_false(dir_exists(f, "a-1") || dir_exists(f, "a-3"));
    assert_null(stopic(f, "b")); /* no replica here: no local topic */
    assert_ptr_equal(gr_image_topic_find(f->img, "a", 1)->local, t);
    assert_null(gr_image_topic_find(f->img, "b", 1)->local);
    assert_int_equal(f->made_hook, 2);
    /* p2 moves to broker 2: its local log is a stray now. */
    const int32_t ra2[4] = {SELF, 2, 2, 3};
    put(f, "a", 1, 4, ra2);
    gr_image_changed(f->img);
    settle(f);
    assert_non_null(gr_topic_log(t, 0));
    assert_null(gr_topic_log(t, 2));
    assert_false(dir_exists(f, "a-2"));
    assert_int_equal(f->deleted_hook, 1);
    /* p0's state disappears (no replicas known, e.g. not written yet): its log is kept. */
    struct gr_image_partition_state none = {.leader = -1, .leader_epoch = -1};
    assert_int_equal(gr_image_set_partition(f->img, gr_image_topic_find(f->img, "a", 1), 0, &none), 0);
    gr_image_changed(f->img);
    settle(f);
    assert_non_null(gr_topic_log(t, 0));
    assert_int_equal(f->deleted_hook, 1);
    /* The image grows "a" to 6 with p5 here; the image's put relinks nothing itself (local NULL). */
    const int32_t ra3[6] = {SELF, 2, 2, 3, 2, SELF};
    put(f, "a", 1, 6, ra3);
    gr_image_changed(f->img);
    settle(f);
    assert_int_equal(gr_topic_partition_count(t), 6);
    assert_non_null(gr_topic_log(t, 5));
    assert_null(gr_topic_log(t, 4));
    assert_ptr_equal(gr_image_topic_find(f->img, "a", 1)->local, t);
    /* "a" deleted from the cluster: every local directory goes. */
    gr_image_remove_topic(f->img, gr_topic_id(t));
    gr_image_changed(f->img);
    settle(f);
    assert_null(stopic(f, "a"));
    gr_store_quiesce(f->store);
    assert_false(dir_exists(f, "a-0") || dir_exists(f, "a-5"));
    struct gr_replicas_stats st;
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.made, 3);
    assert_int_equal(st.deleted, 1);
    assert_int_equal(st.topics_created, 1);
    assert_int_equal(st.topics_deleted, 1);
    assert_int_equal(st.failures, 0);
}

/* A snapshot empties the image before feeding it again (gr_feed_snapshot_begin): a pass that ran meanwhile
 * (a timer: a continuation or a back-off) took every local topic for deleted and removed acknowledged data
 * (compat-tests/cluster/faults.py, etcd stopped 30 s: a fenced broker reloading deleted faults-12). While
 * img->loading nothing happens; after it, the image decides. */
static void test_no_pass_while_loading(void **state)
{
    struct fx *f = *state;
    const int32_t ra[2] = {SELF, SELF};
    put(f, "a", 1, 2, ra);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    settle(f);
    struct gr_topic *t = stopic(f, "a");
    assert_non_null(t);
    uint8_t id[16];
    memcpy(id, gr_topic_id(t), 16);
    f->img->loading = true; /* the snapshot began: the image is empty so far */
    gr_image_remove_topic(f->img, id);
    gr_image_changed(f->img);
    spin(f);
    struct gr_replicas_stats st;
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.topics_deleted, 0);
    assert_non_null(stopic(f, "a"));
    assert_true(dir_exists(f, "a-0") && dir_exists(f, "a-1"));
    put(f, "a", 1, 2, ra); /* the snapshot holds it: committed, nothing changes */
    f->img->loading = false;
    gr_image_changed(f->img);
    settle(f);
    assert_ptr_equal(stopic(f, "a"), t);
    assert_non_null(gr_topic_log(t, 0));
    f->img->loading = true; /* a snapshot without it: deleted once it is committed */
    gr_image_remove_topic(f->img, id);
    gr_image_changed(f->img);
    spin(f);
    assert_non_null(stopic(f, "a"));
    f->img->loading = false;
    gr_image_changed(f->img);
    settle(f);
    assert_null(stopic(f, "a"));
}

static void test_recreated_while_down(void **state)
{
    struct fx *f = *state;
    const int32_t r1[2] = {SELF, SELF};
    put(f, "c", 7, 2, r1);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    settle(f);
    struct gr_log *log = gr_topic_log(stopic(f, "c"), 0);
    size_t len;
    uint8_t *b = th_simple(5, 1000, 77, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
    /* The broker stops; meanwhile "c" is deleted and re-created with id 8, one partition, here; and "d",
       which this broker held, is deleted for good. */
    stop_all(f);
    gr_store_close(f->store);
    gr_image_free(f->img);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    assert_int_equal(gr_log_end_offset(gr_topic_log(stopic(f, "c"), 0)), 5);
    uint8_t did[16] = {9};
    struct gr_topic *d;
    assert_int_equal(gr_store_topic_create(f->store, "d-old", 1, NULL, NULL, 0, &d), 0); /* whole topic */
    (void)did;
    f->img = gr_image_new(SELF);
    const int32_t r2[1] = {SELF};
    put(f, "c", 8, 1, r2);
    new_replicas(f, 0);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    settle(f);
    struct gr_topic *t = stopic(f, "c");
    assert_non_null(t);
    assert_int_equal(gr_topic_id(t)[0], 8);
    assert_int_equal(gr_topic_partition_count(t), 1);
    assert_int_equal(gr_log_end_offset(gr_topic_log(t, 0)), 0); /* the old records are gone */
    assert_ptr_equal(gr_image_topic_find(f->img, "c", 1)->local, t);
    assert_null(stopic(f, "d-old")); /* unknown to the cluster: deleted */
    gr_store_quiesce(f->store);
    assert_false(dir_exists(f, "c-1") || dir_exists(f, "d-old-0"));
    assert_true(dir_exists(f, "c-0"));
    /* After another restart the new incarnation stays, with nothing to do. */
    stop_all(f);
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    new_replicas(f, 0);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    settle(f);
    struct gr_replicas_stats st;
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.made + st.deleted + st.topics_created + st.topics_deleted, 0);
    assert_int_equal(gr_topic_id(stopic(f, "c"))[0], 8);
}

static void test_bounded_passes(void **state)
{
    struct fx *f = *state;
    stop_all(f);
    new_replicas(f, 3);
    int32_t r[10];
    for (int i = 0; i < 10; i++)
        r[i] = SELF;
    put(f, "e", 3, 10, r);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    struct gr_replicas_stats st;
    gr_replicas_stats(f->rep, &st);
    assert_true(st.in_flight <= 3);
    settle(f);
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.made, 10);
    assert_int_equal(st.topics_created, 1);
    assert_true(st.max_ops_in_pass <= 3);
    assert_true(st.passes >= 5); /* 1 create + 10 makes at 3 per pass, then one finding nothing */
    for (int32_t p = 0; p < 10; p++)
        assert_non_null(gr_topic_log(stopic(f, "e"), p));
    assert_int_equal(f->made_hook, 10);
}

static int16_t commit(struct gr_coordinator *c, const char *topic, int64_t offset)
{
    struct gr_commit_partition cp = {0, offset, 7, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {gr_str_c("g"), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(c, &p, &wp, &we);
    return cp.error_code;
}

static int64_t fetch(struct gr_coordinator *c, const char *topic)
{
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    if (!gr_coord_offset_get(c, gr_str_c("g"), gr_str_c(topic), 0, &off, &epoch, &md)) return -1;
    return off;
}

static void test_offsets_follow_image(void **state)
{
    struct fx *f = *state;
    struct fake_env env = {0};
    struct gr_coordinator *c = fake_coord(&env, NULL);
    stop_all(f);
    struct gr_replicas_config rc = {.store = f->store, .pool = f->pool, .loop = f->loop, .coord = c};
    f->rep = gr_replicas_new(&rc, f->img);
    const int32_t elsewhere[1] = {2};
    put(f, "gone", 1, 1, elsewhere);
    put(f, "kept", 2, 1, elsewhere);
    put(f, "renamed", 3, 1, elsewhere);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    settle(f);
    assert_int_equal(commit(c, "gone", 5), 0);
    assert_int_equal(commit(c, "kept", 6), 0);
    assert_int_equal(commit(c, "renamed", 7), 0);
    assert_int_equal(fetch(c, "gone"), 5);
    /* "gone" deleted; "renamed" deleted and re-created under a new id in the same batch. */
    uint8_t id[16] = {1};
    id[15] = 0x42;
    gr_image_remove_topic(f->img, id);
    put(f, "renamed", 4, 1, elsewhere);
    gr_image_changed(f->img);
    settle(f);
    assert_int_equal(fetch(c, "gone"), -1);
    assert_int_equal(fetch(c, "renamed"), -1);
    assert_int_equal(fetch(c, "kept"), 6);
    struct gr_replicas_stats st;
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.topics_gone, 2);
    /* A batch that changes no topic set drops nothing. */
    gr_image_changed(f->img);
    settle(f);
    assert_int_equal(fetch(c, "kept"), 6);
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.topics_gone, 2);
    stop_all(f);
    gr_coord_destroy(c);
    fake_env_free(&env);
}

static void test_failure_backs_off(void **state)
{
    struct fx *f = *state;
    const int32_t here[1] = {SELF};
    put(f, "full", 5, 1, here);
    fault_install();
    fault_fail(F_MKDIR, 1, ENOSPC, true);
    assert_int_equal(gr_replicas_start(f->rep), 0);
    int64_t until = gr_time_mono_ms() + 1000;
    while (gr_time_mono_ms() < until) {
        gr_iopool_complete(f->pool);
        ev_run(f->loop, EVRUN_NOWAIT);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct gr_replicas_stats st;
    gr_replicas_stats(f->rep, &st);
    /* Retried after 100, 200 and 400 ms (the 800 ms one comes after the second above): no busy loop. */
    assert_true(st.failures >= 3 && st.failures <= 5);
    assert_int_equal(st.made, 0);
    assert_false(st.idle);
    struct gr_topic *t = stopic(f, "full");
    assert_non_null(t); /* the sparse topic itself needs no directory */
    assert_null(gr_topic_log(t, 0));
    assert_false(dir_exists(f, "full-0"));
    fault_clear(F_MKDIR);
    settle(f);
    fault_uninstall();
    gr_replicas_stats(f->rep, &st);
    assert_int_equal(st.made, 1);
    assert_non_null(gr_topic_log(t, 0));
    assert_true(dir_exists(f, "full-0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_make_link_and_stray_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_pass_while_loading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recreated_while_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offsets_follow_image, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_backs_off, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
