/* test_layout.c: the etcd key layout (cluster/layout.h): the prefix rules, every builder's exact key, the
 * parser on what the builders make (round trip) and on a table of malformed keys. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/layout.h"

#define CID "MkU3OEVBNTcwNTJENDM2Qg"

static struct gr_cluster_layout lay;

static int setup(void **state)
{
    (void)state;
    return gr_cluster_layout_init(&lay, "/gregor", CID);
}

static void test_prefix_check(void **state)
{
    (void)state;
    char err[200];
    assert_int_equal(gr_cluster_prefix_check("/gregor", err, sizeof err), 0);
    assert_int_equal(gr_cluster_prefix_check("/a/b-c/d_e.f", err, sizeof err), 0);
    struct {
        const char *prefix, *err;
    } bad[] = {
        {"", "gregor.metadata.etcd.prefix must start with '/', got ''"},
        {"gregor", "gregor.metadata.etcd.prefix must start with '/', got 'gregor'"},
        {"/", "gregor.metadata.etcd.prefix must not end with '/', got '/'"},
        {"/gregor/", "gregor.metadata.etcd.prefix must not end with '/', got '/gregor/'"},
        {"/a//b", "gregor.metadata.etcd.prefix must not hold an empty, '.' or '..' segment, got '/a//b'"},
        {"/a/../b", "gregor.metadata.etcd.prefix must not hold an empty, '.' or '..' segment, got '/a/../b'"},
        {"/./b", "gregor.metadata.etcd.prefix must not hold an empty, '.' or '..' segment, got '/./b'"},
        {"/a b", "gregor.metadata.etcd.prefix may hold only [a-zA-Z0-9._-] and '/', got '/a b'"},
        {"/caf\xc3\xa9",
         "gregor.metadata.etcd.prefix may hold only [a-zA-Z0-9._-] and '/', got '/caf\xc3\xa9'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gr_cluster_prefix_check(bad[i].prefix, err, sizeof err), -EINVAL);
        assert_string_equal(err, bad[i].err);
    }
    char longp[GR_CLUSTER_PREFIX_BYTES_MAX + 2];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal(gr_cluster_prefix_check(longp, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "is longer than 128 bytes"));
    longp[sizeof longp - 2] = '\0'; /* exactly 128 */
    assert_int_equal(gr_cluster_prefix_check(longp, err, sizeof err), 0);
    struct gr_cluster_layout l2;
    assert_int_equal(gr_cluster_layout_init(&l2, "/gregor/", CID), -EINVAL);
    assert_int_equal(gr_cluster_layout_init(&l2, "/gregor", "not-a-uuid"), -EINVAL);
    assert_int_equal(gr_cluster_layout_init(&l2, "/gregor", "MkU3OEVBNTcwNTJENDM2Qh"),
                     -EINVAL); /* non-canonical */
}

/* Every builder's exact key. */
static void test_builders(void **state)
{
    (void)state;
    char k[GR_CLUSTER_KEY_BUF];
    assert_int_equal(gr_cluster_key_cluster_id("/gregor", k), 18);
    assert_string_equal(k, "/gregor/cluster_id");
    assert_int_equal(gr_cluster_key_cluster_id("gregor", k), -EINVAL);
    assert_true(gr_cluster_key_features(&lay, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/features");
    assert_true(gr_cluster_key_controller(&lay, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/controller");
    assert_true(gr_cluster_key_producer_ids(&lay, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/producer_ids");
    assert_int_equal(gr_cluster_key_broker(&lay, 7, k), (int)strlen("/gregor/" CID "/brokers/7"));
    assert_string_equal(k, "/gregor/" CID "/brokers/7");
    assert_true(gr_cluster_key_broker(&lay, INT32_MAX, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/brokers/2147483647");
    assert_int_equal(gr_cluster_key_broker(&lay, -1, k), -EINVAL);
    assert_true(gr_cluster_key_topic(&lay, "orders.v2_x-y", 13, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/topics/orders.v2_x-y");
    assert_int_equal(gr_cluster_key_topic(&lay, "a/b", 3, k), -EINVAL);
    assert_int_equal(gr_cluster_key_topic(&lay, "..", 2, k), -EINVAL);
    assert_int_equal(gr_cluster_key_topic(&lay, "", 0, k), -EINVAL);
    char name[GR_TOPIC_NAME_BYTES_MAX + 1];
    memset(name, 'n', sizeof name);
    assert_int_equal(gr_cluster_key_topic(&lay, name, GR_TOPIC_NAME_BYTES_MAX + 1, k), -EINVAL);
    assert_true(gr_cluster_key_topic(&lay, name, GR_TOPIC_NAME_BYTES_MAX, k) > 0); /* 249 bytes */
    struct gr_uuid id;
    assert_int_equal(gr_cluster_uuid_parse("AAECAwQFBgcICQoLDA0ODw", 22, &id), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(id.b[i], i);
    assert_true(gr_cluster_key_partition(&lay, id, 0, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/partitions/AAECAwQFBgcICQoLDA0ODw/0");
    assert_true(gr_cluster_key_partition(&lay, id, GR_PARTITIONS_PER_TOPIC_MAX - 1, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/partitions/AAECAwQFBgcICQoLDA0ODw/9999");
    assert_int_equal(gr_cluster_key_partition(&lay, id, GR_PARTITIONS_PER_TOPIC_MAX, k), -EINVAL);
    assert_int_equal(gr_cluster_key_partition(&lay, id, -1, k), -EINVAL);
    assert_true(gr_cluster_prefix_root(&lay, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/");
    assert_true(gr_cluster_prefix_brokers(&lay, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/brokers/");
    assert_true(gr_cluster_prefix_topics(&lay, k) > 0);
    assert_string_equal(k, "/gregor/" CID "/topics/");
    int n = gr_cluster_prefix_partitions(&lay, id, k);
    assert_string_equal(k, "/gregor/" CID "/partitions/AAECAwQFBgcICQoLDA0ODw/");
    char end[GR_CLUSTER_KEY_BUF];
    assert_int_equal(gr_cluster_range_end(k, (size_t)n, end), n);
    assert_string_equal(end, "/gregor/" CID "/partitions/AAECAwQFBgcICQoLDA0ODw0");
    assert_int_equal(gr_cluster_range_end("", 0, end), -EINVAL);
    assert_int_equal(gr_cluster_range_end("a\xff", 2, end), -EINVAL);
}

/* The longest prefix with the longest topic name still fits GR_CLUSTER_KEY_BYTES_MAX. */
static void test_longest_key(void **state)
{
    (void)state;
    char prefix[GR_CLUSTER_PREFIX_BYTES_MAX + 1];
    memset(prefix, 'p', GR_CLUSTER_PREFIX_BYTES_MAX);
    prefix[0] = '/';
    prefix[GR_CLUSTER_PREFIX_BYTES_MAX] = '\0';
    struct gr_cluster_layout big;
    assert_int_equal(gr_cluster_layout_init(&big, prefix, CID), 0);
    char name[GR_TOPIC_NAME_BYTES_MAX];
    memset(name, 't', sizeof name);
    char k[GR_CLUSTER_KEY_BUF];
    int n = gr_cluster_key_topic(&big, name, sizeof name, k);
    assert_int_equal(n, GR_CLUSTER_PREFIX_BYTES_MAX + 1 + 22 + 1 + 7 + GR_TOPIC_NAME_BYTES_MAX);
    assert_true(n <= GR_CLUSTER_KEY_BYTES_MAX);
    struct gr_cluster_key key;
    assert_int_equal(gr_cluster_key_parse(&big, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_TOPIC);
    assert_int_equal(key.topic_len, GR_TOPIC_NAME_BYTES_MAX);
}

/* What the builders make parses back to the same parts. */
static void test_parse_round_trip(void **state)
{
    (void)state;
    char k[GR_CLUSTER_KEY_BUF];
    struct gr_cluster_key key;
    int n = gr_cluster_key_broker(&lay, 0, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_BROKER);
    assert_int_equal(key.node_id, 0);
    n = gr_cluster_key_broker(&lay, 2147483647, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.node_id, 2147483647);
    n = gr_cluster_key_topic(&lay, "__consumer_offsets", 18, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_TOPIC);
    assert_string_equal(key.topic, "__consumer_offsets");
    assert_int_equal(key.topic_len, 18);
    struct gr_uuid id = {{0xfb, 0xff, 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0xf0}};
    n = gr_cluster_key_partition(&lay, id, 49, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_PARTITION);
    assert_memory_equal(key.topic_id.b, id.b, 16);
    assert_int_equal(key.partition, 49);
    n = gr_cluster_key_controller(&lay, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_CONTROLLER);
    n = gr_cluster_key_features(&lay, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_FEATURES);
    n = gr_cluster_key_producer_ids(&lay, k);
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.kind, GR_CLUSTER_KEY_PRODUCER_IDS);
    /* a key given with its length, not NUL-terminated: trailing bytes past len are not read */
    n = gr_cluster_key_broker(&lay, 12, k);
    k[n] = '9';
    assert_int_equal(gr_cluster_key_parse(&lay, k, (size_t)n, &key), 0);
    assert_int_equal(key.node_id, 12);
}

/* Malformed keys are refused; a well-formed key of an unknown kind is -ENOENT. */
static void test_parse_malformed(void **state)
{
    (void)state;
    struct {
        const char *rest; /* after the root, or a whole key when it starts with '/' */
        int rc;
    } cases[] = {
        {"brokers/", -EINVAL},
        {"brokers/-1", -EINVAL},
        {"brokers/+1", -EINVAL},
        {"brokers/01", -EINVAL},
        {"brokers/2147483648", -EINVAL},
        {"brokers/99999999999", -EINVAL},
        {"brokers/1a", -EINVAL},
        {"brokers/1/x", -EINVAL},
        {"brokers", -EINVAL},
        {"topics/", -EINVAL},
        {"topics/a/b", -EINVAL},
        {"topics/..", -EINVAL},
        {"topics/caf\xc3\xa9", -EINVAL},
        {"topics", -EINVAL},
        {"partitions/AAECAwQFBgcICQoLDA0ODw", -EINVAL},
        {"partitions/AAECAwQFBgcICQoLDA0ODw/", -EINVAL},
        {"partitions/AAECAwQFBgcICQoLDA0ODw/10000", -EINVAL},
        {"partitions/AAECAwQFBgcICQoLDA0ODw/00", -EINVAL},
        {"partitions/AAECAwQFBgcICQoLDA0ODw/1/2", -EINVAL},
        {"partitions/AAECAwQFBgcICQoLDA0ODx/1", -EINVAL}, /* non-canonical last character */
        {"partitions/AAECAwQFBgcICQoLDA0OD!/1", -EINVAL},
        {"partitions/short/1", -EINVAL},
        {"features/x", -ENOENT}, /* a later version's key under a name this one does not know */
        {"controllerx", -ENOENT},
        {"reassignments/t/0", -ENOENT},
        {"bad key", -EINVAL},
        {"", -EINVAL},
        {"/gregor/other-cluster-id/brokers/1", -EINVAL},
        {"/gregorx/" CID "/brokers/1", -EINVAL},
        {"/gregor/cluster_id", -EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char k[2 * GR_CLUSTER_KEY_BUF];
        if (cases[i].rest[0] == '/')
            snprintf(k, sizeof k, "%s", cases[i].rest);
        else
            snprintf(k, sizeof k, "%s%s", lay.root, cases[i].rest);
        struct gr_cluster_key key;
        int rc = gr_cluster_key_parse(&lay, k, strlen(k), &key);
        if (rc != cases[i].rc) fail_msg("key '%s': got %d, want %d", k, rc, cases[i].rc);
    }
}

/* Rebuilds the key `k` names with the builders. */
static int rebuild(const struct gr_cluster_key *k, char *out)
{
    switch (k->kind) {
    case GR_CLUSTER_KEY_FEATURES:
        return gr_cluster_key_features(&lay, out);
    case GR_CLUSTER_KEY_CONTROLLER:
        return gr_cluster_key_controller(&lay, out);
    case GR_CLUSTER_KEY_PRODUCER_IDS:
        return gr_cluster_key_producer_ids(&lay, out);
    case GR_CLUSTER_KEY_BROKER:
        return gr_cluster_key_broker(&lay, k->node_id, out);
    case GR_CLUSTER_KEY_TOPIC:
        return gr_cluster_key_topic(&lay, k->topic, k->topic_len, out);
    default:
        return gr_cluster_key_partition(&lay, k->topic_id, k->partition, out);
    }
}

/* The parser accepts only canonical keys: 50,000 random tails after the root, drawn from the characters
 * and words keys are made of; every one it accepts is rebuilt byte for byte by the builders. */
static void test_parse_canonical(void **state)
{
    (void)state;
    static const char *const parts[] = {"brokers/",   "topics/",    "partitions/", "AAECAwQFBgcICQoLDA0ODw",
                                        "/",          "0",          "1",           "01",
                                        "9999",       "10000",      "-",           ".",
                                        "a",          "features",   "controller",  "producer_ids",
                                        "2147483647", "2147483648", "\xff",        ""};
    uint64_t x = 88172645463325252ULL;
    int accepted = 0;
    for (int i = 0; i < 50000; i++) {
        char k[2 * GR_CLUSTER_KEY_BUF];
        size_t n = (size_t)snprintf(k, sizeof k, "%s", lay.root);
        for (int p = 0, count = 1 + (int)(x % 4); p < count; p++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            n += (size_t)snprintf(k + n, sizeof k - n, "%s", parts[x % (sizeof parts / sizeof parts[0])]);
        }
        struct gr_cluster_key key;
        int rc = gr_cluster_key_parse(&lay, k, n, &key);
        assert_true(rc == 0 || rc == -EINVAL || rc == -ENOENT);
        if (rc) continue;
        accepted++;
        char again[GR_CLUSTER_KEY_BUF];
        int m = rebuild(&key, again);
        if (m != (int)n || memcmp(again, k, n)) fail_msg("'%s' parsed but rebuilds as '%s'", k, again);
    }
    print_message("keys: %d of 50000 accepted\n", accepted);
    assert_true(accepted > 1000);
}

/* SCRAM user names as key segments: kept bytes, escaped ones, the round trip, and refusals of every
 * segment that is not what the escape makes (one-to-one). */
static void test_scram_escape(void **state)
{
    (void)state;
    char seg[64], back[64];
    assert_int_equal(gr_cluster_scram_escape("alice.B_1-x", 11, seg, sizeof seg), 11);
    assert_string_equal(seg, "alice.B_1-x");
    assert_int_equal(gr_cluster_scram_escape("a/b%c d", 7, seg, sizeof seg), 13);
    assert_string_equal(seg, "a%2Fb%25c%20d");
    const char nul_ctl[] = {'x', 0, '\n', (char)0x7f};
    assert_int_equal(gr_cluster_scram_escape(nul_ctl, 4, seg, sizeof seg), 10);
    assert_string_equal(seg, "x%00%0A%7F");
    /* "Jürgen/日本" in UTF-8: every byte of the two non-ASCII characters escaped */
    const char *utf8 = "J\xc3\xbcrgen/\xe6\x97\xa5\xe6\x9c\xac";
    int n = gr_cluster_scram_escape(utf8, strlen(utf8), seg, sizeof seg);
    assert_string_equal(seg, "J%C3%BCrgen%2F%E6%97%A5%E6%9C%AC");
    assert_int_equal(n, (int)strlen(seg));
    assert_int_equal(gr_cluster_scram_unescape(seg, (size_t)n, back, sizeof back), (int)strlen(utf8));
    assert_memory_equal(back, utf8, strlen(utf8));
    /* every byte value round-trips, and the segment never holds '/' */
    char all[256], big[3 * 256 + 1], all_back[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    n = gr_cluster_scram_escape(all, 256, big, sizeof big);
    assert_true(n > 256);
    assert_null(memchr(big, '/', (size_t)n));
    assert_int_equal(gr_cluster_scram_unescape(big, (size_t)n, all_back, sizeof all_back), 256);
    assert_memory_equal(all, all_back, 256);
    /* refused: empty, too small an output, and segments the escape never makes */
    assert_int_equal(gr_cluster_scram_escape("", 0, seg, sizeof seg), -EINVAL);
    assert_int_equal(gr_cluster_scram_escape("a/b", 3, seg, 5), -EINVAL);
    assert_int_equal(gr_cluster_scram_escape("a/b", 3, seg, 6), 5);
    const char *bad[] = {"", "a/b", "a%2fb", "%41", "%2", "%", "a%G0", "a b", "%2F%"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(gr_cluster_scram_unescape(bad[i], strlen(bad[i]), back, sizeof back), -EINVAL);
    assert_int_equal(gr_cluster_scram_unescape("abc", 3, back, 2), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_check),    cmocka_unit_test(test_builders),
        cmocka_unit_test(test_longest_key),     cmocka_unit_test(test_parse_round_trip),
        cmocka_unit_test(test_parse_malformed), cmocka_unit_test(test_parse_canonical),
        cmocka_unit_test(test_scram_escape),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
