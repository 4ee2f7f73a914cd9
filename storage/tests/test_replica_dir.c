/*
 * test_replica_dir.c: the AlterReplicaLogDirs check of a store (storage/replica_dir.h). The store opens
 * through a symlink spelled with repeated and trailing slashes, so its two names differ: Kafka's absolute
 * spelling of the configured path (slashes collapsed, the link kept) and the canonical one (the target).
 * Checks each outcome in Kafka's order: a held partition in either name is OK, other spellings (trailing
 * slash, relative, the link's parent, empty) NOT_FOUND, an unheld partition or topic NOT_HELD, an offline log
 * OFFLINE, and the future directory name's 255-unit limit (checked before the path) at its exact edge. A
 * relative log.dirs is resolved against the working directory with "./" kept, as java.io.File does.
 */
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

#include "storage/internal.h"
#include "storage/replica_dir.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    char target[96], link[96];
    struct gr_store_config cfg;
    struct gr_store *store;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    snprintf(f->target, sizeof f->target, "%s/target", f->dir);
    snprintf(f->link, sizeof f->link, "%s/link", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->store) gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static enum gr_replica_dir_check check(struct fx *f, const char *topic, int32_t p, const char *path)
{
    return gr_store_replica_dir_check(f->store, topic, strlen(topic), p, path, strlen(path));
}

static void test_symlinked_dir(void **state)
{
    struct fx *f = *state;
    char spelled[128], real[PATH_MAX], slash[128];
    assert_int_equal(mkdir(f->target, 0755), 0);
    assert_int_equal(symlink(f->target, f->link), 0);
    snprintf(spelled, sizeof spelled, "%s//link//", f->dir);
    th_config(&f->cfg, spelled);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "t", 3, NULL, NULL, 0, &t), 0);
    assert_non_null(realpath(f->target, real));
    assert_string_equal(f->store->log_dir_abs, f->link);
    assert_string_equal(f->store->log_dir_real, real);

    assert_int_equal(check(f, "t", 0, f->link), GR_REPLICA_DIR_OK);
    assert_int_equal(check(f, "t", 2, real), GR_REPLICA_DIR_OK);
    assert_true(gr_store_log_dir_named(f->store, real, strlen(real)));
    snprintf(slash, sizeof slash, "%s/", f->link);
    assert_int_equal(check(f, "t", 0, slash), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 0, spelled), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 0, "link"), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 0, f->dir), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 0, ""), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 3, real), GR_REPLICA_DIR_NOT_HELD);
    assert_int_equal(check(f, "t", -1, real), GR_REPLICA_DIR_NOT_HELD);
    assert_int_equal(check(f, "u", 0, real), GR_REPLICA_DIR_NOT_HELD);
    /* the directory check comes before the partition's: an unknown topic in another path is NOT_FOUND */
    assert_int_equal(check(f, "u", 0, "/nowhere"), GR_REPLICA_DIR_NOT_FOUND);

    gr_log_go_offline(gr_topic_log(t, 1), "test", -EIO);
    assert_int_equal(check(f, "t", 1, real), GR_REPLICA_DIR_OFFLINE);
    assert_int_equal(check(f, "t", 1, "/nowhere"), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 0, real), GR_REPLICA_DIR_OK);
}

/* "<topic>-<p>.<32 hex>-future" may have 255 units: topic + digits + 41 <= 255. */
static void test_future_name_limit(void **state)
{
    struct fx *f = *state;
    th_config(&f->cfg, f->target);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    char name[256];
    memset(name, 'a', sizeof name);
    name[213] = '\0'; /* 213 + "-0" + 40 = 255 */
    assert_int_equal(check(f, name, 0, "/nowhere"), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, name, 10, "/nowhere"), GR_REPLICA_DIR_NAME_TOO_LONG);
    assert_int_equal(check(f, name, -1, f->target), GR_REPLICA_DIR_NAME_TOO_LONG);
    name[213] = 'a';
    name[214] = '\0';
    assert_int_equal(check(f, name, 0, f->target), GR_REPLICA_DIR_NAME_TOO_LONG);
    /* Java counts UTF-16 units: "é" (2 bytes) is one, U+1F600 (4 bytes) two */
    char u[256];
    memset(u, 'a', 211);
    memcpy(u + 211, "\xc3\xa9\xc3\xa9", 4); /* 213 units in 215 bytes */
    u[215] = '\0';
    assert_int_equal(check(f, u, 0, "/nowhere"), GR_REPLICA_DIR_NOT_FOUND);
    memcpy(u + 211, "\xf0\x9f\x98\x80", 4); /* 211 + 2 = 213 units */
    assert_int_equal(check(f, u, 0, "/nowhere"), GR_REPLICA_DIR_NOT_FOUND);
    memcpy(u + 211, "a\xf0\x9f\x98\x80", 5); /* 214 units */
    u[216] = '\0';
    assert_int_equal(check(f, u, 0, "/nowhere"), GR_REPLICA_DIR_NAME_TOO_LONG);
}

static void test_relative_dir(void **state)
{
    struct fx *f = *state;
    char cwd[PATH_MAX], want[PATH_MAX + 16];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(f->dir), 0);
    char here[PATH_MAX];
    assert_non_null(getcwd(here, sizeof here));
    th_config(&f->cfg, "./rel/");
    int rc = gr_store_open(&f->cfg, &f->store);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, 0);
    snprintf(want, sizeof want, "%s/./rel", here);
    assert_string_equal(f->store->log_dir_abs, want);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "t", 1, NULL, NULL, 0, &t), 0);
    assert_int_equal(check(f, "t", 0, want), GR_REPLICA_DIR_OK);
    snprintf(want, sizeof want, "%s/rel", here);
    assert_int_equal(check(f, "t", 0, want), GR_REPLICA_DIR_OK); /* the canonical name */
    assert_int_equal(check(f, "t", 0, "./rel"), GR_REPLICA_DIR_NOT_FOUND);
    assert_int_equal(check(f, "t", 0, "rel"), GR_REPLICA_DIR_NOT_FOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_symlinked_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_future_name_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
