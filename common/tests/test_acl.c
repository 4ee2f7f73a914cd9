/*
 * test_acl.c: the authorizer's rules (common/acl.h) against Kafka's StandardAuthorizer semantics: each
 * implication (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS, ALL implies
 * everything) and the ones that do not hold (DESCRIBE implies nothing, a DENY of READ does not deny
 * DESCRIBE); deny over allow; literal, wildcard and prefixed patterns; principal and host wildcards; super
 * users; allow.everyone.if.no.acl.found; the filters (ANY, MATCH, exact); CreateAcls validation; the durable
 * image round trip and a damaged image refused. Read next: common/acl.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/acl.h"

#define A "User:alice"
#define H "127.0.0.1"

static struct gr_authorizer *mk(const char *supers, bool allow_if_none)
{
    char err[200];
    struct gr_authorizer *a = gr_authz_new(supers, allow_if_none, err, sizeof err);
    assert_non_null(a);
    return a;
}

static void add(struct gr_authorizer *a, int8_t type, int8_t pat, const char *name, const char *principal,
                const char *host, int8_t op, int8_t perm)
{
    struct gr_acl x = {type, pat, op, perm, (char *)name, (char *)principal, (char *)host};
    const char *msg = NULL;
    assert_int_equal(0, gr_acl_validate(&x, &msg));
    assert_int_equal(0, gr_authz_add(a, &x));
}

static bool can(struct gr_authorizer *a, const char *p, const char *host, enum gr_acl_op op,
                enum gr_acl_resource t, const char *name)
{
    return gr_authz_authorize(a, p, host, op, t, name);
}

static void test_implications(void **state)
{
    (void)state;
    static const int8_t implying[] = {GR_ACL_OP_READ, GR_ACL_OP_WRITE, GR_ACL_OP_DELETE, GR_ACL_OP_ALTER};
    for (size_t i = 0; i < 4; i++) {
        struct gr_authorizer *a = mk(NULL, false);
        add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "t", A, "*", implying[i], GR_ACL_PERM_ALLOW);
        assert_true(can(a, A, H, implying[i], GR_ACL_RES_TOPIC, "t"));
        assert_true(can(a, A, H, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, "t"));
        assert_false(can(a, A, H, GR_ACL_OP_DESCRIBE_CONFIGS, GR_ACL_RES_TOPIC, "t"));
        assert_false(can(a, A, H, GR_ACL_OP_CREATE, GR_ACL_RES_TOPIC, "t"));
        gr_authz_free(a);
    }
    struct gr_authorizer *a = mk(NULL, false);
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "t", A, "*", GR_ACL_OP_ALTER_CONFIGS, GR_ACL_PERM_ALLOW);
    assert_true(can(a, A, H, GR_ACL_OP_DESCRIBE_CONFIGS, GR_ACL_RES_TOPIC, "t"));
    assert_false(can(a, A, H, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, "t"));
    gr_authz_free(a);
    a = mk(NULL, false);
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "t", A, "*", GR_ACL_OP_DESCRIBE, GR_ACL_PERM_ALLOW);
    assert_true(can(a, A, H, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, "t"));
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t"));
    gr_authz_free(a);
    a = mk(NULL, false);
    add(a, GR_ACL_RES_GROUP, GR_ACL_PAT_LITERAL, "g", A, "*", GR_ACL_OP_ALL, GR_ACL_PERM_ALLOW);
    for (int op = GR_ACL_OP_READ; op <= GR_ACL_OP_TWO_PHASE_COMMIT; op++)
        assert_true(can(a, A, H, (enum gr_acl_op)op, GR_ACL_RES_GROUP, "g"));
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "g")); /* another resource type */
    gr_authz_free(a);
}

static void test_deny_wins(void **state)
{
    (void)state;
    struct gr_authorizer *a = mk(NULL, false);
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "t", A, "*", GR_ACL_OP_ALL, GR_ACL_PERM_ALLOW);
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_PREFIXED, "t", A, H, GR_ACL_OP_READ, GR_ACL_PERM_DENY);
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t"));
    assert_true(can(a, A, "10.0.0.1", GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t")); /* the deny names one host */
    assert_true(can(a, A, H, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, "t"));
    assert_true(
        can(a, A, H, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, "t")); /* DENY READ does not deny DESCRIBE */
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "*", "User:*", "*", GR_ACL_OP_ALL, GR_ACL_PERM_DENY);
    assert_false(can(a, A, H, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, "t"));
    assert_false(can(a, A, H, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, "t"));
    gr_authz_free(a);
}

static void test_patterns_and_wildcards(void **state)
{
    (void)state;
    struct gr_authorizer *a = mk(NULL, false);
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_PREFIXED, "pay", A, "*", GR_ACL_OP_READ, GR_ACL_PERM_ALLOW);
    assert_true(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "pay"));
    assert_true(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "payments"));
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "pa"));
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "xpay"));
    assert_false(can(a, "User:bob", H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "pay"));
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "lit", A, "*", GR_ACL_OP_READ, GR_ACL_PERM_ALLOW);
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "lit2")); /* literal is not a prefix */
    /* a literal "*" on a prefixed ACL is a prefix "*", not a wildcard */
    add(a, GR_ACL_RES_GROUP, GR_ACL_PAT_PREFIXED, "*", A, "*", GR_ACL_OP_READ, GR_ACL_PERM_ALLOW);
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_GROUP, "g"));
    add(a, GR_ACL_RES_GROUP, GR_ACL_PAT_LITERAL, "*", "User:*", H, GR_ACL_OP_READ, GR_ACL_PERM_ALLOW);
    assert_true(can(a, "User:bob", H, GR_ACL_OP_READ, GR_ACL_RES_GROUP, "g"));
    assert_false(can(a, "User:bob", "10.0.0.2", GR_ACL_OP_READ, GR_ACL_RES_GROUP, "g")); /* host */
    /* a "*" principal of another type is not a wildcard */
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "svc", "Group:*", "*", GR_ACL_OP_READ, GR_ACL_PERM_ALLOW);
    assert_false(can(a, "User:bob", H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "svc"));
    gr_authz_free(a);
}

static void test_super_users_and_no_acl(void **state)
{
    (void)state;
    struct gr_authorizer *a = mk(" User:admin ; User:CN=ops,O=x ", false);
    assert_true(can(a, "User:admin", H, GR_ACL_OP_ALTER, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME));
    assert_true(can(a, "User:CN=ops,O=x", H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t"));
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t")); /* no ACL, default false */
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "t", "User:x", "*", GR_ACL_OP_ALL, GR_ACL_PERM_DENY);
    assert_true(can(a, "User:admin", H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t")); /* super users skip DENY */
    gr_authz_free(a);
    a = mk(NULL, true);
    assert_true(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t"));
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, "t", "User:bob", "*", GR_ACL_OP_READ, GR_ACL_PERM_ALLOW);
    assert_false(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "t")); /* an ACL exists: no longer open */
    assert_true(can(a, A, H, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, "u"));
    gr_authz_free(a);
    char err[200];
    assert_null(gr_authz_new("User:a;bob", false, err, sizeof err));
    assert_non_null(strstr(err, "bob"));
}

static void test_authorize_any(void **state)
{
    (void)state;
    struct gr_authorizer *a = mk(NULL, false);
    assert_false(gr_authz_authorize_any(a, A, H, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC));
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_PREFIXED, "out-", A, "*", GR_ACL_OP_WRITE, GR_ACL_PERM_ALLOW);
    assert_true(gr_authz_authorize_any(a, A, H, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC));
    assert_false(gr_authz_authorize_any(a, "User:bob", H, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC));
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_PREFIXED, "out", A, "*", GR_ACL_OP_WRITE, GR_ACL_PERM_DENY);
    assert_false(gr_authz_authorize_any(a, A, H, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC));
    gr_authz_free(a);
}

static void test_filters_and_validation(void **state)
{
    (void)state;
    struct gr_acl lit = {
        GR_ACL_RES_TOPIC, GR_ACL_PAT_LITERAL, GR_ACL_OP_READ, GR_ACL_PERM_ALLOW, "payments", A, "*"};
    struct gr_acl pre = {
        GR_ACL_RES_TOPIC, GR_ACL_PAT_PREFIXED, GR_ACL_OP_READ, GR_ACL_PERM_ALLOW, "pay", A, "*"};
    struct gr_acl_filter any = {GR_ACL_RES_ANY, GR_ACL_PAT_ANY, GR_ACL_OP_ANY, GR_ACL_PERM_ANY,
                                NULL,           NULL,           NULL};
    assert_true(gr_acl_filter_matches(&any, &lit));
    struct gr_acl_filter m = any;
    m.pattern_type = GR_ACL_PAT_MATCH;
    m.name = "payments";
    assert_true(gr_acl_filter_matches(&m, &lit));
    assert_true(gr_acl_filter_matches(&m, &pre));
    m.name = "pa";
    assert_false(gr_acl_filter_matches(&m, &pre));
    struct gr_acl_filter ex = any;
    ex.pattern_type = GR_ACL_PAT_LITERAL;
    assert_true(gr_acl_filter_matches(&ex, &lit));
    assert_false(gr_acl_filter_matches(&ex, &pre));
    ex.principal = "User:bob";
    assert_false(gr_acl_filter_matches(&ex, &lit));
    struct gr_acl_filter anyname = any;
    anyname.name = "pay";
    assert_false(gr_acl_filter_matches(&anyname, &lit));
    assert_true(gr_acl_filter_matches(&anyname, &pre));
    const char *msg = NULL;
    assert_int_equal(0, gr_acl_filter_validate(&any, &msg));
    struct gr_acl_filter unk = any;
    unk.operation = GR_ACL_OP_UNKNOWN;
    assert_int_equal(42, gr_acl_filter_validate(&unk, &msg));
    struct gr_acl bad = lit;
    bad.pattern_type = GR_ACL_PAT_MATCH;
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    bad = lit;
    bad.principal = "alice";
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    bad = lit;
    bad.resource_type = GR_ACL_RES_CLUSTER;
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    bad.name = GR_ACL_CLUSTER_NAME;
    assert_int_equal(0, gr_acl_validate(&bad, &msg));
    bad = lit;
    bad.operation = GR_ACL_OP_ANY;
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    bad = lit;
    bad.permission = GR_ACL_PERM_ANY;
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    bad = lit;
    bad.name = "";
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    char *big = malloc(GR_ACL_FIELD_MAX + 2);
    memset(big, 'x', GR_ACL_FIELD_MAX + 1);
    big[GR_ACL_FIELD_MAX + 1] = 0;
    bad = lit;
    bad.name = big;
    assert_int_equal(42, gr_acl_validate(&bad, &msg));
    free(big);
}

static void test_image(void **state)
{
    (void)state;
    struct gr_authorizer *a = mk(NULL, false);
    add(a, GR_ACL_RES_TOPIC, GR_ACL_PAT_PREFIXED, "a b\nc", "User:CN=x, O=y", "*", GR_ACL_OP_READ,
        GR_ACL_PERM_ALLOW);
    add(a, GR_ACL_RES_GROUP, GR_ACL_PAT_LITERAL, "g", A, H, GR_ACL_OP_ALL, GR_ACL_PERM_DENY);
    add(a, GR_ACL_RES_GROUP, GR_ACL_PAT_LITERAL, "g", A, H, GR_ACL_OP_ALL, GR_ACL_PERM_DENY); /* duplicate */
    assert_int_equal(2, gr_authz_count(a));
    size_t n = 0;
    char *img = gr_authz_serialize(a, &n);
    assert_non_null(img);
    struct gr_authorizer *b = mk(NULL, false);
    char err[200];
    assert_int_equal(0, gr_authz_parse(b, img, n, err, sizeof err));
    assert_int_equal(2, gr_authz_count(b));
    assert_string_equal("a b\nc", gr_authz_at(b, 0)->name);
    assert_string_equal("User:CN=x, O=y", gr_authz_at(b, 0)->principal);
    assert_int_equal(GR_ACL_OP_ALL, gr_authz_at(b, 1)->operation);
    /* every truncation is refused, and leaves the ACLs as they were */
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(-1, gr_authz_parse(b, img, cut, err, sizeof err));
    assert_int_equal(2, gr_authz_count(b));
    img[20] ^= 0x7f; /* a damaged byte in the first line's codes */
    assert_int_equal(-1, gr_authz_parse(b, img, n, err, sizeof err));
    free(img);
    gr_authz_remove(b, 0);
    assert_int_equal(1, gr_authz_count(b));
    assert_string_equal("g", gr_authz_at(b, 0)->name);
    gr_authz_free(a);
    gr_authz_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_implications),
        cmocka_unit_test(test_deny_wins),
        cmocka_unit_test(test_patterns_and_wildcards),
        cmocka_unit_test(test_super_users_and_no_acl),
        cmocka_unit_test(test_authorize_any),
        cmocka_unit_test(test_filters_and_validation),
        cmocka_unit_test(test_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
