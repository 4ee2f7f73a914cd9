/*
 * test_failpoint.c: GREGOR_FAILPOINT's parser and firing (common/failpoint.h): every known name alone and
 * with ":N"; unknown names, empty parts, N of 0, signs, trailing bytes, N above the maximum and a name
 * longer than the buffer refused; an unarmed or other point never fires; the armed point fires at its Nth
 * pass with GR_FAILPOINT_EXIT_CODE (in a forked child), not before. Read next: common/failpoint.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/failpoint.h"
#include "common/log.h"

static void test_parse_good(void **state)
{
    (void)state;
    static const char *const ok[] = {"txn.after_prepare", "txn.mid_markers", "txn.before_complete",
                                     "txn.after_add_partitions"};
    char name[GR_FAILPOINT_NAME_MAX + 1];
    int64_t nth = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(0, gr_failpoint_parse(ok[i], name, sizeof name, &nth));
        assert_string_equal(ok[i], name);
        assert_int_equal(1, nth);
    }
    assert_int_equal(0, gr_failpoint_parse("txn.mid_markers:3", name, sizeof name, &nth));
    assert_string_equal("txn.mid_markers", name);
    assert_int_equal(3, nth);
    assert_int_equal(0, gr_failpoint_parse("txn.after_prepare:1000000000", name, sizeof name, &nth));
    assert_int_equal(GR_FAILPOINT_NTH_MAX, nth);
}

static void test_parse_bad(void **state)
{
    (void)state;
    static const char *const bad[] = {"",
                                      ":2",
                                      "txn",
                                      "txn.after_prepar",
                                      "txn.after_preparex",
                                      "TXN.AFTER_PREPARE",
                                      "txn.after_prepare:",
                                      "txn.after_prepare:0",
                                      "txn.after_prepare:-1",
                                      "txn.after_prepare:+1",
                                      "txn.after_prepare:1x",
                                      "txn.after_prepare:1:2",
                                      "txn.after_prepare: 1",
                                      "txn.after_prepare:1000000001",
                                      "txn.after_prepare:99999999999999999999999",
                                      " txn.after_prepare"};
    char name[GR_FAILPOINT_NAME_MAX + 1];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t nth = 77;
        assert_int_equal(-22, gr_failpoint_parse(bad[i], name, sizeof name, &nth));
        assert_int_equal(77, nth);
    }
    char small[8];
    int64_t nth = 0;
    assert_int_equal(-22, gr_failpoint_parse("txn.mid_markers", small, sizeof small, &nth));
}

static void test_init(void **state)
{
    (void)state;
    assert_int_equal(0, gr_failpoint_init(NULL));
    assert_false(gr_failpoint_armed);
    assert_int_equal(0, gr_failpoint_init(""));
    assert_false(gr_failpoint_armed);
    assert_int_equal(-22, gr_failpoint_init("txn.nowhere"));
    assert_false(gr_failpoint_armed);
    assert_int_equal(0, gr_failpoint_init("txn.before_complete:2"));
    assert_true(gr_failpoint_armed);
    gr_failpoint_reset();
    assert_false(gr_failpoint_armed);
}

/* Runs `passes` passes of `point` with `spec` armed in a child; returns its exit status (0: returned). */
static int child_status(const char *spec, const char *point, int passes)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (gr_failpoint_init(spec) < 0) _exit(3);
        for (int i = 0; i < passes; i++)
            GR_FAILPOINT(point);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(pid, waitpid(pid, &st, 0));
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_fires(void **state)
{
    (void)state;
    assert_int_equal(0, child_status(NULL, "txn.mid_markers", 5));
    assert_int_equal(0, child_status("txn.after_prepare", "txn.mid_markers", 5));
    assert_int_equal(GR_FAILPOINT_EXIT_CODE, child_status("txn.mid_markers", "txn.mid_markers", 1));
    assert_int_equal(0, child_status("txn.mid_markers:3", "txn.mid_markers", 2));
    assert_int_equal(GR_FAILPOINT_EXIT_CODE, child_status("txn.mid_markers:3", "txn.mid_markers", 3));
}

int main(void)
{
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_fires),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
