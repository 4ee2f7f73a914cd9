/*
 * test_ssl_principal.c: ssl.principal.mapping.rules (server/ssl_principal.h) as Kafka's SslPrincipalMapper
 * documents them: DEFAULT keeps the name; RULE:pattern/replacement/ with $1 groups, L and U; the first
 * matching rule wins; a pattern must match the whole name; commas inside a pattern; "\/" in a pattern; no
 * matching rule is an error; bad rules refused naming the key. Read next: server/ssl_principal.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/ssl_principal.h"

static const char *map(const char *rules, const char *dn, char *out, size_t cap)
{
    char err[256];
    struct gr_ssl_rules *r = gr_ssl_rules_parse(rules, err, sizeof err);
    assert_non_null(r);
    int rc = gr_ssl_rules_apply(r, dn, out, cap);
    gr_ssl_rules_free(r);
    return rc == 0 ? out : NULL;
}

static void test_default_and_rules(void **state)
{
    (void)state;
    char out[256];
    assert_string_equal("CN=alice,OU=eng,O=ex", map(NULL, "CN=alice,OU=eng,O=ex", out, sizeof out));
    assert_string_equal("CN=alice,OU=eng,O=ex", map("DEFAULT", "CN=alice,OU=eng,O=ex", out, sizeof out));
    /* Kafka's documented example: the comma inside the pattern is not a separator */
    const char *rules =
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L, DEFAULT";
    assert_string_equal("svc", map(rules, "CN=svc,OU=ServiceUsers,O=ex", out, sizeof out));
    assert_string_equal("bob@eng", map(rules, "CN=Bob,OU=ENG,O=ex", out, sizeof out));
    assert_string_equal("CN=x", map(rules, "CN=x", out, sizeof out));
    assert_string_equal("ALICE", map("RULE:^CN=([a-z]+)$/$1/U", "CN=alice", out, sizeof out));
    /* the whole name must match; no rule matching is an error */
    assert_null(map("RULE:CN=a/x/", "CN=ab", out, sizeof out));
    assert_string_equal("a/b", map("RULE:^CN=(.*)\\/(.*)$/$1\\/$2/", "CN=a/b", out, sizeof out));
    assert_string_equal("one", map("RULE:^CN=one$/one/\nRULE:^CN=.*$/two/", "CN=one", out, sizeof out));
    assert_null(map("RULE:^CN=(.*)$/$1/", "CN=toolong", out, 4)); /* does not fit */
}

static void test_bad_rules(void **state)
{
    (void)state;
    char err[256];
    static const char *const bad[] = {"RULE:^CN=(.*$/$1/", "RULE:abc", "RULE:a/b", "NOPE", "DEFAULT x", ","};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_null(gr_ssl_rules_parse(bad[i], err, sizeof err));
        assert_non_null(strstr(err, "ssl.principal.mapping.rules"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_and_rules),
        cmocka_unit_test(test_bad_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
