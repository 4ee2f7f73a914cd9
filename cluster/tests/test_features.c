/* test_features.c: the finalized features' rules (cluster/features.h): UpdateFeatures' checks with Kafka
 * 4.4's exact messages, the gregor-features file's parser and writer, and the start-up rule (setting versus
 * stored level) with its epoch. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/features.h"
#include "cluster/image.h"
#include "cluster/local.h"
#include "protocol/errors.h"

#define TV "transaction.version"

static int16_t check(const char *name, int level, int upgrade, int16_t current, char *msg)
{
    return gr_features_check(name, strlen(name), level, upgrade, current, 3, msg, GR_FEATURES_MSG_BYTES);
}

static void test_check_accepts(void **state)
{
    (void)state;
    char msg[GR_FEATURES_MSG_BYTES];
    assert_int_equal(check(TV, 1, GR_FEATURE_UPGRADE, 0, msg), GR_ERR_NONE);
    assert_string_equal(msg, "");
    assert_int_equal(check(TV, 0, GR_FEATURE_SAFE_DOWNGRADE, 1, msg), GR_ERR_NONE);   /* level 0: disable */
    assert_int_equal(check(TV, 0, GR_FEATURE_UNSAFE_DOWNGRADE, 1, msg), GR_ERR_NONE); /* --unsafe */
    assert_int_equal(check(TV, 1, GR_FEATURE_UPGRADE, 1, msg), GR_ERR_NONE);          /* same level */
    assert_int_equal(check(TV, 1, GR_FEATURE_SAFE_DOWNGRADE, 1, msg), GR_ERR_NONE);
    assert_int_equal(check(TV, GR_TRANSACTION_VERSION_MAX, GR_FEATURE_UPGRADE, 0, msg), GR_ERR_NONE);
}

static void test_check_refuses(void **state)
{
    (void)state;
    char msg[GR_FEATURES_MSG_BYTES], want[GR_FEATURES_MSG_BYTES];
    assert_int_equal(check(TV, 0, GR_FEATURE_UPGRADE, 1, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_string_equal(msg, "Invalid update version 0 for feature transaction.version. Can't downgrade the "
                             "version of this feature without setting the upgrade type to either safe or "
                             "unsafe downgrade.");
    assert_int_equal(check(TV, 1, GR_FEATURE_SAFE_DOWNGRADE, 0, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_string_equal(
        msg, "Invalid update version 1 for feature transaction.version. Can't downgrade to a newer version.");
    assert_int_equal(check(TV, GR_TRANSACTION_VERSION_MAX + 1, GR_FEATURE_UPGRADE, 0, msg),
                     GR_ERR_INVALID_UPDATE_VERSION);
    snprintf(want, sizeof want,
             "Invalid update version %d for feature transaction.version. Local controller 3 only supports "
             "versions 0-%d",
             GR_TRANSACTION_VERSION_MAX + 1, GR_TRANSACTION_VERSION_MAX);
    assert_string_equal(msg, want);
    assert_int_equal(check("group.version", 1, GR_FEATURE_UPGRADE, 0, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_string_equal(
        msg, "Invalid update version 1 for feature group.version. Local controller 3 does not support "
             "this feature.");
    assert_int_equal(check("no.such", 0, GR_FEATURE_SAFE_DOWNGRADE, 0, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_string_equal(msg, "Invalid update version 0 for feature no.such. Feature no.such not found.");
    assert_int_equal(check(TV, -1, GR_FEATURE_SAFE_DOWNGRADE, 1, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_string_equal(
        msg, "Invalid update version -1 for feature transaction.version. A feature version cannot be "
             "less than 0.");
    assert_int_equal(check(TV, 1, 0, 0, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_string_equal(msg,
                        "Invalid update version 1 for feature transaction.version. The controller does not "
                        "support the given upgrade type.");
    assert_int_equal(check(TV, 1, 4, 0, msg), GR_ERR_INVALID_UPDATE_VERSION);
    /* a long name is cut in the text; a small buffer is cut, NUL-terminated */
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_int_equal(check(longname, 1, GR_FEATURE_UPGRADE, 0, msg), GR_ERR_INVALID_UPDATE_VERSION);
    assert_true(strlen(msg) < GR_FEATURES_MSG_BYTES);
    char small[16];
    assert_int_equal(gr_features_check(TV, strlen(TV), 9, 1, 0, 1, small, sizeof small),
                     GR_ERR_INVALID_UPDATE_VERSION);
    assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_file_round_trip(void **state)
{
    (void)state;
    struct gr_features_file f = {1, 7, 0}, g;
    char text[GR_FEATURES_FILE_BYTES_MAX];
    int n = gr_features_file_format(&f, text, sizeof text);
    assert_string_equal(text, "transaction.version=1\nepoch=7\nsetting=0\n");
    assert_int_equal(n, (int)strlen(text));
    assert_int_equal(gr_features_file_parse(text, (size_t)n, &g), 0);
    assert_int_equal(g.level, 1);
    assert_int_equal(g.epoch, 7);
    assert_int_equal(g.setting, 0);
    assert_int_equal(gr_features_file_format(&f, text, 10), -ENOSPC);
    /* a file of the form before UpdateFeatures: its level was the setting */
    const char *old = "transaction.version=1\nepoch=4\n";
    assert_int_equal(gr_features_file_parse(old, strlen(old), &g), 0);
    assert_int_equal(g.level, 1);
    assert_int_equal(g.epoch, 4);
    assert_int_equal(g.setting, 1);
}

static void test_file_malformed(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "transaction.version=1\n",
        "transaction.version=1\nepoch=4",
        "transaction.version=1\nepoch=x\n",
        "transaction.version=-1\nepoch=4\n",
        "transaction.version=40000\nepoch=4\n",
        "transaction.version=1\nepoch=9223372036854775807\n",
        "transaction.version=1\nepoch=99999999999999999999\n",
        "epoch=4\ntransaction.version=1\n",
        "transaction.version=1\nepoch=4\nsetting=1\nextra=1\n",
        "transaction.version=1\nepoch=4\nsetting=\n",
        "transaction.version=1\nepoch=4\nsetting=1",
        "transaction.version 1\nepoch=4\n",
    };
    struct gr_features_file g;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (gr_features_file_parse(bad[i], strlen(bad[i]), &g) != -EINVAL) fail_msg("accepted: %s", bad[i]);
    }
}

static void test_startup_rule(void **state)
{
    (void)state;
    struct gr_features_file out, old;
    /* no file: the setting gives the level, epoch 0, written */
    assert_true(gr_features_startup(NULL, 1, true, &out));
    assert_int_equal(out.level, 1);
    assert_int_equal(out.epoch, 0);
    assert_int_equal(out.setting, 1);
    /* the same setting as recorded: the stored level stands (UpdateFeatures lowered it to 0), nothing written
     */
    old = (struct gr_features_file){0, 3, 1};
    assert_false(gr_features_startup(&old, 1, true, &out));
    assert_int_equal(out.level, 0);
    assert_int_equal(out.epoch, 3);
    assert_int_equal(out.setting, 1);
    /* the setting changed: it wins, the epoch rises by one */
    old = (struct gr_features_file){0, 3, 0};
    assert_true(gr_features_startup(&old, 1, true, &out));
    assert_int_equal(out.level, 1);
    assert_int_equal(out.epoch, 4);
    assert_int_equal(out.setting, 1);
    /* the setting changed to the level UpdateFeatures set already: recorded, the epoch stays */
    old = (struct gr_features_file){1, 5, 0};
    assert_true(gr_features_startup(&old, 1, true, &out));
    assert_int_equal(out.level, 1);
    assert_int_equal(out.epoch, 5);
    assert_int_equal(out.setting, 1);
    /* a file from before the setting was recorded (setting = its level): same setting, nothing changes */
    old = (struct gr_features_file){1, 2, 1};
    assert_false(gr_features_startup(&old, 1, true, &out));
    assert_int_equal(out.epoch, 2);
    /* no file, the default (2): the level, epoch 0 */
    assert_true(gr_features_startup(NULL, 2, false, &out));
    assert_int_equal(out.level, 2);
    assert_int_equal(out.epoch, 0);
    assert_int_equal(out.setting, 2);
    /* the upgrade: a file written by a build whose default was 1, the setting not given: the default 2 does
       not raise it, nothing written (Kafka changes a finalized level only by UpdateFeatures) */
    old = (struct gr_features_file){1, 0, 1};
    assert_false(gr_features_startup(&old, 2, false, &out));
    assert_int_equal(out.level, 1);
    assert_int_equal(out.epoch, 0);
    assert_int_equal(out.setting, 1);
    /* nor lowers one UpdateFeatures raised */
    old = (struct gr_features_file){2, 4, 1};
    assert_false(gr_features_startup(&old, 0, false, &out));
    assert_int_equal(out.level, 2);
    assert_int_equal(out.epoch, 4);
    /* given explicitly as 2 after that upgrade: it differs from the recorded 1, so it wins */
    old = (struct gr_features_file){1, 0, 1};
    assert_true(gr_features_startup(&old, 2, true, &out));
    assert_int_equal(out.level, 2);
    assert_int_equal(out.epoch, 1);
    assert_int_equal(out.setting, 2);
}

static void put_file(const char *dir, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/" GR_FEATURES_FILE, dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void get_file(const char *dir, char *out, size_t cap)
{
    char path[512];
    snprintf(path, sizeof path, "%s/" GR_FEATURES_FILE, dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    fclose(f);
}

/* gr_image_local_features on a real directory: the start-up rule as the broker runs it at each start. */
static void test_local_start(void **state)
{
    (void)state;
    char dir[] = "/tmp/gr-features-XXXXXX", text[GR_FEATURES_FILE_BYTES_MAX];
    assert_non_null(mkdtemp(dir));
    struct gr_image *img = gr_image_new(1);
    assert_non_null(img);
    struct gr_features_file st;
    /* first start: the setting, epoch 0, written with the setting */
    assert_int_equal(gr_image_local_features(img, dir, 1, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 0);
    get_file(dir, text, sizeof text);
    assert_string_equal(text, "transaction.version=1\nepoch=0\nsetting=1\n");
    /* UpdateFeatures lowered it to 0 (the file as the handler writes it); the same setting: 0 stands */
    put_file(dir, "transaction.version=0\nepoch=1\nsetting=1\n");
    assert_int_equal(gr_image_local_features(img, dir, 1, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 0);
    assert_int_equal(img->features_epoch, 1);
    assert_int_equal(st.level, 0);
    assert_int_equal(st.epoch, 1);
    assert_int_equal(st.setting, 1);
    /* the operator changed the setting to 0: recorded, the level already 0, the epoch stays */
    assert_int_equal(gr_image_local_features(img, dir, 0, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 0);
    assert_int_equal(img->features_epoch, 1);
    get_file(dir, text, sizeof text);
    assert_string_equal(text, "transaction.version=0\nepoch=1\nsetting=0\n");
    /* and back to 1: the setting wins, epoch + 1 */
    assert_int_equal(gr_image_local_features(img, dir, 1, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 2);
    /* a file of the form before the setting was recorded: its level is the setting it ran with */
    put_file(dir, "transaction.version=0\nepoch=6\n");
    assert_int_equal(gr_image_local_features(img, dir, 0, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 0);
    assert_int_equal(img->features_epoch, 6);
    assert_int_equal(gr_image_local_features(img, dir, 1, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 7);
    /* a stored level this broker does not support, and a damaged file: the start stops */
    char above[128];
    snprintf(above, sizeof above, "transaction.version=%d\nepoch=3\nsetting=1\n",
             GR_TRANSACTION_VERSION_MAX + 1);
    put_file(dir, above);
    assert_int_equal(gr_image_local_features(img, dir, 1, true, true, &st), -ERANGE);
    put_file(dir, "transaction.version=1\nepoch=oops\n");
    assert_int_equal(gr_image_local_features(img, dir, 1, true, true, &st), -EINVAL);
    char path[512];
    snprintf(path, sizeof path, "%s/" GR_FEATURES_FILE, dir);
    unlink(path);
    rmdir(dir);
    gr_image_free(img);
}

/* The upgrade to the default 2 (issue #25) on a real directory: what an older build left keeps its level
 * unless the setting is given. */
static void test_local_upgrade(void **state)
{
    (void)state;
    char dir[] = "/tmp/gr-features-XXXXXX", text[GR_FEATURES_FILE_BYTES_MAX], path[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/" GR_FEATURES_FILE, dir);
    struct gr_image *img = gr_image_new(1);
    assert_non_null(img);
    struct gr_features_file st;
    /* a new directory at the default: level 2, epoch 0 */
    assert_int_equal(gr_image_local_features(img, dir, 2, false, false, &st), 0);
    assert_int_equal(img->transaction_version, 2);
    assert_int_equal(img->features_epoch, 0);
    get_file(dir, text, sizeof text);
    assert_string_equal(text, "transaction.version=2\nepoch=0\nsetting=2\n");
    /* the file of a build whose default was 1, started at the new default: level 1 stands, file untouched */
    put_file(dir, "transaction.version=1\nepoch=0\nsetting=1\n");
    assert_int_equal(gr_image_local_features(img, dir, 2, false, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 0);
    assert_int_equal(st.level, 1);
    assert_int_equal(st.setting, 1);
    get_file(dir, text, sizeof text);
    assert_string_equal(text, "transaction.version=1\nepoch=0\nsetting=1\n");
    /* and again (a second start at the default): still 1 */
    assert_int_equal(gr_image_local_features(img, dir, 2, false, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    /* the older form without the setting line: the same */
    put_file(dir, "transaction.version=1\nepoch=3\n");
    assert_int_equal(gr_image_local_features(img, dir, 2, false, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 3);
    /* the operator gives 2: it differs from the recorded 1 and wins, epoch + 1 */
    assert_int_equal(gr_image_local_features(img, dir, 2, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 2);
    assert_int_equal(img->features_epoch, 4);
    get_file(dir, text, sizeof text);
    assert_string_equal(text, "transaction.version=2\nepoch=4\nsetting=2\n");
    /* an older log directory with no file (made before the file existed), the default: level 1 */
    unlink(path);
    assert_int_equal(gr_image_local_features(img, dir, 2, false, true, &st), 0);
    assert_int_equal(img->transaction_version, 1);
    assert_int_equal(img->features_epoch, 0);
    get_file(dir, text, sizeof text);
    assert_string_equal(text, "transaction.version=1\nepoch=0\nsetting=1\n");
    /* the same with the setting given: the setting */
    unlink(path);
    assert_int_equal(gr_image_local_features(img, dir, 2, true, true, &st), 0);
    assert_int_equal(img->transaction_version, 2);
    unlink(path);
    rmdir(dir);
    gr_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_accepts),   cmocka_unit_test(test_check_refuses),
        cmocka_unit_test(test_file_round_trip), cmocka_unit_test(test_file_malformed),
        cmocka_unit_test(test_startup_rule),    cmocka_unit_test(test_local_start),
        cmocka_unit_test(test_local_upgrade),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
