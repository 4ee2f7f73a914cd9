/* test_config.c: the broker configuration: defaults, files, overrides, validation, Kafka's resolution rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/config.h"

static void test_defaults(void **state)
{
    (void)state;
    struct gr_config c;
    gr_config_init(&c);
    assert_string_equal(gr_config_str(&c, "listeners"), "PLAINTEXT://127.0.0.1:9092");
    assert_int_equal(gr_config_int(&c, "num.partitions"), 1);
    assert_int_equal(gr_config_int(&c, "message.max.bytes"), 1048588);
    assert_true(gr_config_bool(&c, "auto.create.topics.enable"));
    assert_int_equal(gr_config_retention_ms(&c), 168LL * 3600 * 1000);
    assert_int_equal(gr_config_roll_ms(&c), 168LL * 3600 * 1000);
    assert_null(gr_config_str(&c, "advertised.listeners"));
    assert_false(gr_config_is_set(&c, "num.partitions"));
    gr_config_free(&c);
}

static void test_file_and_overrides(void **state)
{
    (void)state;
    char path[] = "/tmp/gregor-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# comment\n! also a comment\nnum.partitions = 4\nlog.retention.minutes: 10\nlisteners=PLAINTEXT://\\\n127.0.0.1:0\n");
    fclose(f);
    struct gr_config c;
    gr_config_init(&c);
    assert_int_equal(gr_config_load_file(&c, path), 0);
    assert_int_equal(gr_config_int(&c, "num.partitions"), 4);
    assert_string_equal(gr_config_str(&c, "listeners"), "PLAINTEXT://127.0.0.1:0");
    assert_int_equal(gr_config_retention_ms(&c), 600000); /* minutes beat hours */
    assert_int_equal(gr_config_set_kv(&c, "log.retention.ms=1234"), 0);
    assert_int_equal(gr_config_retention_ms(&c), 1234); /* ms beats minutes */
    assert_int_equal(gr_config_set_kv(&c, "num.partitions=8"), 0);
    assert_int_equal(gr_config_int(&c, "num.partitions"), 8);
    unlink(path);
    gr_config_free(&c);
}

static void test_bad_values(void **state)
{
    (void)state;
    struct gr_config c;
    gr_config_init(&c);
    assert_int_equal(gr_config_set(&c, "num.partitions", "zero"), -1);
    assert_int_equal(gr_config_set(&c, "num.partitions", "0"), -1);          /* below its minimum of 1 */
    assert_int_equal(gr_config_set(&c, "message.max.bytes", "3000000000"), -1); /* not a 32-bit int */
    assert_int_equal(gr_config_set(&c, "auto.create.topics.enable", "yes"), -1);
    assert_int_equal(gr_config_set(&c, "log.message.timestamp.type", "Whenever"), -1);
    assert_int_equal(gr_config_set(&c, "no.such.key", "1"), 1); /* unknown: warned and ignored */
    assert_int_equal(gr_config_set_kv(&c, "novalue"), -1);
    assert_int_equal(gr_config_int(&c, "num.partitions"), 1); /* unchanged by the failures */
    assert_int_equal(gr_config_load_file(&c, "/nonexistent/server.properties"), -1);
    gr_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_file_and_overrides),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
