/* test_strlist.c: gr_list_next (common/strlist.h) over Kafka-style list settings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "common/strlist.h"

/* Joins the items of `list` with '|' into out. */
static void items(const char *list, char *out, size_t cap)
{
    out[0] = '\0';
    const char *p = list, *it;
    size_t n;
    while (gr_list_next(&p, &it, &n)) {
        size_t o = strlen(out);
        snprintf(out + o, cap - o, "%s%.*s", o ? "|" : "", (int)n, it);
    }
    assert_int_equal(*p, '\0'); /* it ends at the end of the string */
}

static void splits_trims_and_drops_empty(void **state)
{
    (void)state;
    char out[128];
    items("PLAIN, SCRAM-SHA-256", out, sizeof out);
    assert_string_equal(out, "PLAIN|SCRAM-SHA-256");
    items(" ,a ,, b b ,", out, sizeof out);
    assert_string_equal(out, "a|b b");
    items("", out, sizeof out);
    assert_string_equal(out, "");
    items(" , ,", out, sizeof out);
    assert_string_equal(out, "");
    items("one", out, sizeof out);
    assert_string_equal(out, "one");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(splits_trims_and_drops_empty)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
