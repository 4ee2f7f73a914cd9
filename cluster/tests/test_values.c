/* test_values.c: the cluster's JSON values (cluster/values.h): each kind's exact encoding, round trips,
 * unknown fields ignored, and a table of malformed values (truncated JSON, wrong types, out-of-range and
 * negative numbers, huge arrays, duplicate replicas and keys, non-UTF-8, over the byte cap), each with the
 * exact return and reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/values.h"

#define CID "MkU3OEVBNTcwNTJENDM2Qg"
#define TID "AAECAwQFBgcICQoLDA0ODw"

static void test_cluster_id(void **state)
{
    (void)state;
    struct gr_cluster_id_value v = {CID}, back;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    assert_int_equal(gr_cluster_id_encode(&v, &out, &len, err), 0);
    assert_string_equal(out, "{\"version\":1,\"cluster_id\":\"" CID "\"}");
    assert_int_equal(gr_cluster_id_decode(out, len, &back, err), 0);
    assert_string_equal(back.cluster_id, CID);
    free(out);
    struct gr_cluster_id_value bad = {"x"};
    assert_int_equal(gr_cluster_id_encode(&bad, &out, &len, err), -EINVAL);
    assert_string_equal(err, "cluster id: cluster_id must be a 22-character Kafka Uuid text");
}

static struct gr_cluster_broker sample_broker(void)
{
    struct gr_cluster_broker b = {
        .node_id = 3, .listener_count = 2, .has_rack = true, .shutting_down = false};
    snprintf(b.listeners[0].name, sizeof b.listeners[0].name, "INTERNAL");
    snprintf(b.listeners[0].host, sizeof b.listeners[0].host, "broker-3.internal");
    b.listeners[0].port = 9093;
    snprintf(b.listeners[1].name, sizeof b.listeners[1].name, "EXTERNAL");
    snprintf(b.listeners[1].host, sizeof b.listeners[1].host, "::1");
    b.listeners[1].port = 9092;
    snprintf(b.rack, sizeof b.rack, "eu-west-1a");
    return b;
}

static void test_broker(void **state)
{
    (void)state;
    struct gr_cluster_broker b = sample_broker(), back;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    assert_int_equal(gr_cluster_broker_encode(&b, &out, &len, err), 0);
    assert_string_equal(
        out, "{\"version\":1,\"node_id\":3,\"listeners\":[{\"name\":\"INTERNAL\",\"host\":\"broker-3."
             "internal\",\"port\":9093},{\"name\":\"EXTERNAL\",\"host\":\"::1\",\"port\":9092}],"
             "\"rack\":\"eu-west-1a\",\"shutting_down\":false}");
    assert_int_equal(len, strlen(out));
    assert_int_equal(gr_cluster_broker_decode(out, len, &back, err), 0);
    assert_memory_equal(&back, &b, sizeof b);
    free(out);
    /* no rack: null, and an absent rack reads as null; unknown fields are ignored */
    b.has_rack = false;
    memset(b.rack, 0, sizeof b.rack);
    b.shutting_down = true;
    assert_int_equal(gr_cluster_broker_encode(&b, &out, &len, err), 0);
    assert_non_null(strstr(out, "\"rack\":null,\"shutting_down\":true"));
    assert_int_equal(gr_cluster_broker_decode(out, len, &back, err), 0);
    assert_memory_equal(&back, &b, sizeof b);
    free(out);
    const char *later =
        "{\"version\":1,\"node_id\":0,\"listeners\":[{\"name\":\"PLAINTEXT\",\"host\":\"h\",\"port\":1,"
        "\"security_protocol\":\"SSL\"}],\"shutting_down\":false,\"incarnation_id\":\"x\","
        "\"features\":{\"a\":[1,2]}}";
    assert_int_equal(gr_cluster_broker_decode(later, strlen(later), &back, err), 0);
    assert_int_equal(back.node_id, 0);
    assert_false(back.has_rack);
    assert_false(back.log_dir_new); /* absent: false (registrations before issue #24) */
    assert_string_equal(back.listeners[0].name, "PLAINTEXT");
    /* log_dir_new: written only when true, read back; not a boolean is refused */
    b.log_dir_new = true;
    assert_int_equal(gr_cluster_broker_encode(&b, &out, &len, err), 0);
    assert_non_null(strstr(out, "\"shutting_down\":true,\"log_dir_new\":true"));
    assert_int_equal(gr_cluster_broker_decode(out, len, &back, err), 0);
    assert_memory_equal(&back, &b, sizeof b);
    free(out);
    const char *bad =
        "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\",\"port\":1}],"
        "\"shutting_down\":false,\"log_dir_new\":1}";
    assert_int_equal(gr_cluster_broker_decode(bad, strlen(bad), &back, err), -EINVAL);
    assert_non_null(strstr(err, "log_dir_new"));
}

static void test_controller_producer_ids_features(void **state)
{
    (void)state;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    struct gr_cluster_controller c = {2, 41}, cb;
    assert_int_equal(gr_cluster_controller_encode(&c, &out, &len, err), 0);
    assert_string_equal(out, "{\"version\":1,\"node_id\":2,\"broker_epoch\":41}");
    assert_int_equal(gr_cluster_controller_decode(out, len, &cb, err), 0);
    assert_int_equal(cb.node_id, 2);
    assert_int_equal(cb.broker_epoch, 41);
    free(out);

    struct gr_cluster_producer_ids zero = {0, 0, 0}, next, pb;
    assert_int_equal(gr_cluster_producer_ids_take(&zero, 1, 7, &next), 0); /* absent key: first block is 0 */
    assert_int_equal(next.next_producer_id, 1000);
    assert_int_equal(gr_cluster_producer_ids_encode(&next, &out, &len, err), 0);
    assert_string_equal(out, "{\"version\":1,\"next_producer_id\":1000,\"broker_id\":1,\"broker_epoch\":7}");
    assert_int_equal(gr_cluster_producer_ids_decode(out, len, &pb, err), 0);
    assert_int_equal(pb.next_producer_id, 1000);
    assert_int_equal(pb.broker_id, 1);
    assert_int_equal(pb.broker_epoch, 7);
    free(out);
    struct gr_cluster_producer_ids full = {INT64_MAX - 1500, 1, 1};
    assert_int_equal(gr_cluster_producer_ids_take(&full, 1, 1, &next), -ERANGE);
    full.next_producer_id = INT64_MAX - 2000;
    assert_int_equal(gr_cluster_producer_ids_take(&full, 1, 1, &next), 0);
    assert_int_equal(next.next_producer_id, INT64_MAX - 1000);
    assert_int_equal(gr_cluster_producer_ids_encode(&next, &out, &len, err), 0); /* the last block */
    assert_int_equal(gr_cluster_producer_ids_decode(out, len, &pb, err), 0);
    assert_int_equal(pb.next_producer_id, INT64_MAX - 1000);
    free(out);

    struct gr_cluster_features f = {0}, fb;
    assert_int_equal(gr_cluster_features_encode(&f, &out, &len, err), 0);
    assert_string_equal(out, "{\"version\":1,\"features\":{}}"); /* stage 1: empty */
    assert_int_equal(gr_cluster_features_decode(out, len, &fb, err), 0);
    assert_int_equal(fb.count, 0);
    free(out);
    f.count = 2;
    snprintf(f.features[0].name, sizeof f.features[0].name, "metadata.version");
    f.features[0].level = 27;
    snprintf(f.features[1].name, sizeof f.features[1].name, "group.version");
    f.features[1].level = 1;
    assert_int_equal(gr_cluster_features_encode(&f, &out, &len, err), 0);
    assert_string_equal(out, "{\"version\":1,\"features\":{\"metadata.version\":27,\"group.version\":1}}");
    assert_int_equal(gr_cluster_features_decode(out, len, &fb, err), 0);
    assert_memory_equal(&fb, &f, sizeof f);
    free(out);
}

static void test_partition(void **state)
{
    (void)state;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    struct gr_cluster_partition p = {.leader = 2,
                                     .leader_epoch = 5,
                                     .isr_count = 2,
                                     .isr = {2, 0},
                                     .controller_epoch = 1234567890123LL},
                                back;
    assert_int_equal(gr_cluster_partition_encode(&p, &out, &len, err), 0);
    assert_string_equal(out,
                        "{\"version\":1,\"leader\":2,\"leader_epoch\":5,\"isr\":[2,0],\"controller_epoch\":"
                        "1234567890123}");
    assert_int_equal(gr_cluster_partition_decode(out, len, &back, err), 0);
    assert_memory_equal(&back, &p, sizeof p);
    free(out);
    /* offline: leader -1, the ISR kept as stored */
    struct gr_cluster_partition off = {
        .leader = -1, .leader_epoch = 6, .isr_count = 1, .isr = {2}, .controller_epoch = 9};
    assert_int_equal(gr_cluster_partition_encode(&off, &out, &len, err), 0);
    assert_int_equal(gr_cluster_partition_decode(out, len, &back, err), 0);
    assert_int_equal(back.leader, -1);
    assert_int_equal(back.isr[0], 2);
    free(out);
    p.isr[1] = 2;
    assert_int_equal(gr_cluster_partition_encode(&p, &out, &len, err), -EINVAL);
    assert_string_equal(err, "partition state: isr: node id 2 appears twice");
    p.isr[0] = 1;
    p.isr[1] = 0;
    assert_int_equal(gr_cluster_partition_encode(&p, &out, &len, err), -EINVAL);
    assert_string_equal(err, "partition state: leader 2 is not in isr");
}

static void test_topic(void **state)
{
    (void)state;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    struct gr_cluster_assignment parts[3] = {{.replica_count = 1, .replicas = {1}},
                                             {.replica_count = 2, .replicas = {2, 3}},
                                             {.replica_count = 1, .replicas = {3}}};
    struct gr_cluster_config cfgs[2] = {{"retention.ms", "1000"}, {"cleanup.policy", "compact,delete"}};
    struct gr_cluster_topic t = {.partition_count = 3,
                                 .partitions = parts,
                                 .config_count = 2,
                                 .configs = cfgs},
                            back;
    assert_int_equal(gr_cluster_uuid_parse(TID, 22, &t.topic_id), 0);
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), 0);
    assert_string_equal(out,
                        "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[1],[2,3],[3]],\"configs\":"
                        "{\"retention.ms\":\"1000\",\"cleanup.policy\":\"compact,delete\"}}");
    assert_int_equal(gr_cluster_topic_decode(out, len, &back, err), 0);
    assert_memory_equal(back.topic_id.b, t.topic_id.b, 16);
    assert_int_equal(back.partition_count, 3);
    assert_memory_equal(back.partitions, parts, sizeof parts);
    assert_int_equal(back.config_count, 2);
    assert_string_equal(back.configs[1].name, "cleanup.policy");
    assert_string_equal(back.configs[1].value, "compact,delete");
    gr_cluster_topic_free(&back);
    assert_null(back.partitions);
    free(out);
    /* configs are optional; a value may be any UTF-8 */
    const char *min =
        "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[0]],\"configs\":{\"x\":\"caf\\u00e9\"}}";
    assert_int_equal(gr_cluster_topic_decode(min, strlen(min), &back, err), 0);
    assert_string_equal(back.configs[0].value, "caf\xc3\xa9");
    gr_cluster_topic_free(&back);
    const char *noconf = "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[0]]}";
    assert_int_equal(gr_cluster_topic_decode(noconf, strlen(noconf), &back, err), 0);
    assert_int_equal(back.config_count, 0);
    gr_cluster_topic_free(&back);
    /* the encoder refuses what the decoder would */
    parts[1].replicas[1] = 2;
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), -EINVAL);
    assert_string_equal(err, "topic record: partitions[1]: node id 2 appears twice");
    parts[1].replicas[1] = 3;
    cfgs[1].name = "retention.ms";
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), -EINVAL);
    assert_string_equal(err, "topic record: config retention.ms appears twice");
    gr_cluster_topic_free(NULL);
}

/* A 10,000-partition topic with 16 replicas of short node ids fits the cap; the same with 7-digit node ids
 * does not: -EMSGSIZE from the encoder, and the decoder refuses a value over the cap before parsing. */
static void test_topic_caps(void **state)
{
    (void)state;
    char *out, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    struct gr_cluster_topic t = {.partition_count = GR_PARTITIONS_PER_TOPIC_MAX};
    assert_int_equal(gr_cluster_uuid_parse(TID, 22, &t.topic_id), 0);
    t.partitions = calloc(GR_PARTITIONS_PER_TOPIC_MAX, sizeof *t.partitions);
    for (int p = 0; p < GR_PARTITIONS_PER_TOPIC_MAX; p++) {
        t.partitions[p].replica_count = GR_CLUSTER_REPLICAS_MAX;
        for (int r = 0; r < GR_CLUSTER_REPLICAS_MAX; r++)
            t.partitions[p].replicas[r] = (p + r) % 100;
    }
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), 0);
    struct gr_cluster_topic back;
    assert_int_equal(gr_cluster_topic_decode(out, len, &back, err), 0);
    assert_int_equal(back.partition_count, GR_PARTITIONS_PER_TOPIC_MAX);
    assert_int_equal(back.partitions[9999].replicas[15], (9999 + 15) % 100);
    gr_cluster_topic_free(&back);
    free(out);
    for (int p = 0; p < GR_PARTITIONS_PER_TOPIC_MAX; p++)
        for (int r = 0; r < GR_CLUSTER_REPLICAS_MAX; r++)
            t.partitions[p].replicas[r] = 1000000 + r;
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), -EMSGSIZE);
    assert_non_null(strstr(err, "topic record: "));
    assert_non_null(strstr(err, "bytes, over the 1048576-byte cap"));
    free(t.partitions);
    size_t big = GR_CLUSTER_TOPIC_VALUE_BYTES_MAX + 1;
    char *text = malloc(big);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    assert_int_equal(gr_cluster_topic_decode(text, big, &back, err), -EMSGSIZE);
    assert_string_equal(err, "topic record: 1048577 bytes, over the 1048576-byte cap");
    free(text);
}

/* A huge array in a small-value kind is refused by the byte cap; one under the cap by its count. */
static void test_huge_arrays(void **state)
{
    (void)state;
    char err[GR_CLUSTER_ERR_BYTES];
    char *text = malloc(64 * 1024);
    int n = snprintf(text, 64 * 1024,
                     "{\"version\":1,\"leader\":-1,\"leader_epoch\":0,\"controller_epoch\":1,\"isr\":[");
    for (int i = 0; i < 17; i++)
        n += snprintf(text + n, 64 * 1024 - (size_t)n, "%s%d", i ? "," : "", i);
    n += snprintf(text + n, 64 * 1024 - (size_t)n, "]}");
    struct gr_cluster_partition p;
    assert_int_equal(gr_cluster_partition_decode(text, (size_t)n, &p, err), -EINVAL);
    assert_string_equal(err, "partition state: isr must hold 0 to 16 node ids, got 17");
    n = snprintf(text, 64 * 1024, "{\"version\":1,\"node_id\":1,\"shutting_down\":false,\"listeners\":[");
    for (int i = 0; n < 20000; i++)
        n += snprintf(text + n, 64 * 1024 - (size_t)n, "%s{}", i ? "," : "");
    n += snprintf(text + n, 64 * 1024 - (size_t)n, "]}");
    struct gr_cluster_broker b;
    assert_int_equal(gr_cluster_broker_decode(text, (size_t)n, &b, err), -EMSGSIZE);
    assert_int_equal(strncmp(err, "broker registration: ", 21), 0);
    n = snprintf(text, 64 * 1024, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[");
    for (int i = 0; i <= GR_PARTITIONS_PER_TOPIC_MAX; i++)
        n += snprintf(text + n, 64 * 1024 - (size_t)n, "%s[1]", i ? "," : "");
    n += snprintf(text + n, 64 * 1024 - (size_t)n, "]}");
    struct gr_cluster_topic t;
    assert_int_equal(gr_cluster_topic_decode(text, (size_t)n, &t, err), -EINVAL);
    assert_string_equal(err, "topic record: partitions must hold 1 to 10000 partitions, got 10001");
    assert_null(t.partitions);
    free(text);
}

/* Malformed values, each with its exact return and reason. */
static void test_malformed(void **state)
{
    (void)state;
    enum { ID, BROKER, CONTROLLER, TOPIC, PARTITION, PIDS, FEATURES };
    struct {
        int kind;
        const char *text;
        int rc;
        const char *err;
    } cases[] = {
        {BROKER, "{\"version\":1,\"node_id\":1,\"listen", -EINVAL,
         "broker registration: invalid JSON at byte 32: premature end of input near '\"listen'"},
        {BROKER, "", -EINVAL,
         "broker registration: invalid JSON at byte 0: '[' or '{' expected near end of file"},
        {BROKER, "[1]", -EINVAL, "broker registration: expected a JSON object"},
        {CONTROLLER, "{\"node_id\":1,\"broker_epoch\":1}", -EINVAL,
         "controller record: missing field 'version'"},
        {CONTROLLER, "{\"version\":\"1\",\"node_id\":1,\"broker_epoch\":1}", -EINVAL,
         "controller record: field 'version' must be an integer"},
        {CONTROLLER, "{\"version\":2,\"node_id\":1,\"broker_epoch\":1}", -EINVAL,
         "controller record: version 2 is newer than this Gregor reads (1)"},
        {CONTROLLER, "{\"version\":0,\"node_id\":1,\"broker_epoch\":1}", -EINVAL,
         "controller record: field 'version' must be in [1, 1], got 0"},
        {CONTROLLER, "{\"version\":1,\"node_id\":-1,\"broker_epoch\":1}", -EINVAL,
         "controller record: field 'node_id' must be in [0, 2147483647], got -1"},
        {CONTROLLER, "{\"version\":1,\"node_id\":2147483648,\"broker_epoch\":1}", -EINVAL,
         "controller record: field 'node_id' must be in [0, 2147483647], got 2147483648"},
        {CONTROLLER, "{\"version\":1,\"node_id\":1.0,\"broker_epoch\":1}", -EINVAL,
         "controller record: field 'node_id' must be an integer"},
        {CONTROLLER, "{\"version\":1,\"node_id\":\"1\",\"broker_epoch\":1}", -EINVAL,
         "controller record: field 'node_id' must be an integer"},
        {CONTROLLER, "{\"version\":1,\"node_id\":1,\"broker_epoch\":0}", -EINVAL,
         "controller record: field 'broker_epoch' must be in [1, 9223372036854775807], got 0"},
        {CONTROLLER, "{\"version\":1,\"node_id\":1,\"broker_epoch\":99999999999999999999}", -EINVAL,
         "controller record: invalid JSON at byte 60: too big integer near '99999999999999999999'"},
        {CONTROLLER, "{\"version\":1,\"node_id\":1,\"node_id\":2,\"broker_epoch\":1}", -EINVAL,
         "controller record: invalid JSON at byte 34: duplicate object key near '\"node_id\"'"},
        {CONTROLLER, "{\"version\":1,\"node_id\":1}", -EINVAL,
         "controller record: missing field 'broker_epoch'"},
        {BROKER, "{\"version\":1,\"node_id\":1,\"listeners\":[],\"shutting_down\":false}", -EINVAL,
         "broker registration: listeners must hold 1 to 8 listeners, got 0"},
        {BROKER, "{\"version\":1,\"node_id\":1,\"listeners\":{},\"shutting_down\":false}", -EINVAL,
         "broker registration: field 'listeners' must be an array"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\",\"port\":0}],"
         "\"shutting_down\":false}",
         -EINVAL, "broker registration: field 'listeners[0].port' must be in [1, 65535], got 0"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"port\":1}],\"shutting_down\":false}",
         -EINVAL, "broker registration: missing field 'listeners[0].host'"},
        {BROKER, "{\"version\":1,\"node_id\":1,\"listeners\":[1],\"shutting_down\":false}", -EINVAL,
         "broker registration: listeners[0] must be an object"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\",\"port\":1},{\"name\":"
         "\"A\",\"host\":\"g\",\"port\":2}],\"shutting_down\":false}",
         -EINVAL, "broker registration: listener name A appears twice"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A B\",\"host\":\"h\",\"port\":1}],"
         "\"shutting_down\":false}",
         -EINVAL, "broker registration: listeners[0].name must be 1 to 63 bytes of [a-zA-Z0-9._-]"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\",\"port\":1}],"
         "\"shutting_down\":\"no\"}",
         -EINVAL, "broker registration: field 'shutting_down' must be a boolean"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\",\"port\":1}],"
         "\"rack\":\"\",\"shutting_down\":false}",
         -EINVAL, "broker registration: rack must be null or 1 to 255 bytes of UTF-8"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\",\"port\":1}],"
         "\"rack\":7,\"shutting_down\":false}",
         -EINVAL, "broker registration: field 'rack' must be a string"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\xff\",\"port\":1}],"
         "\"shutting_down\":false}",
         -EINVAL, "broker registration: invalid JSON at byte 59: unable to decode byte 0xff near '\"h'"},
        {BROKER,
         "{\"version\":1,\"node_id\":1,\"listeners\":[{\"name\":\"A\",\"host\":\"h\\u0000\",\"port\":1}],"
         "\"shutting_down\":false}",
         -EINVAL,
         "broker registration: invalid JSON at byte 66: \\u0000 is not allowed without JSON_ALLOW_NUL "
         "near '\"h\\u0000\"'"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[1,2,1]]}", -EINVAL,
         "topic record: partitions[0]: node id 1 appears twice"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[-3]]}", -EINVAL,
         "topic record: partitions[0]: node id -3 is out of [0, 2147483647]"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[]]}", -EINVAL,
         "topic record: partitions[0] must hold 1 to 16 node ids, got 0"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[]}", -EINVAL,
         "topic record: partitions must hold 1 to 10000 partitions, got 0"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[1,\"2\"]]}", -EINVAL,
         "topic record: partitions[0][1] must be an integer"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[1]}", -EINVAL,
         "topic record: field 'partitions[0]' must be an array"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"AAAAAAAAAAAAAAAAAAAAAA\",\"partitions\":[[1]]}", -EINVAL,
         "topic record: topic_id is a reserved Uuid (zero or the metadata topic's)"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"AAAAAAAAAAAAAAAAAAAAAQ\",\"partitions\":[[1]]}", -EINVAL,
         "topic record: topic_id is a reserved Uuid (zero or the metadata topic's)"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"short\",\"partitions\":[[1]]}", -EINVAL,
         "topic record: topic_id must be a 22-character Kafka Uuid text"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"AAECAwQFBgcICQoLDA0ODw==\",\"partitions\":[[1]]}", -EINVAL,
         "topic record: field 'topic_id' is longer than 23 bytes"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[1]],\"configs\":{\"a\":1}}",
         -EINVAL, "topic record: configs.a must be a string"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[1]],\"configs\":{\"a b\":\"1\"}}",
         -EINVAL, "topic record: config name must be 1 to 255 bytes of [a-zA-Z0-9._-]"},
        {TOPIC, "{\"version\":1,\"topic_id\":\"" TID "\",\"partitions\":[[1]],\"configs\":[]}", -EINVAL,
         "topic record: field 'configs' must be an object"},
        {PARTITION, "{\"version\":1,\"leader\":-2,\"leader_epoch\":0,\"isr\":[],\"controller_epoch\":1}",
         -EINVAL, "partition state: field 'leader' must be in [-1, 2147483647], got -2"},
        {PARTITION, "{\"version\":1,\"leader\":1,\"leader_epoch\":-1,\"isr\":[1],\"controller_epoch\":1}",
         -EINVAL, "partition state: field 'leader_epoch' must be in [0, 2147483647], got -1"},
        {PARTITION, "{\"version\":1,\"leader\":1,\"leader_epoch\":0,\"isr\":[1]}", -EINVAL,
         "partition state: missing field 'controller_epoch'"},
        {PARTITION, "{\"version\":1,\"leader\":1,\"leader_epoch\":0,\"controller_epoch\":1}", -EINVAL,
         "partition state: missing field 'isr'"},
        {PARTITION, "{\"version\":1,\"leader\":1,\"leader_epoch\":0,\"isr\":[],\"controller_epoch\":1}",
         -EINVAL, "partition state: leader 1 is not in isr"},
        {PIDS, "{\"version\":1,\"next_producer_id\":-1000,\"broker_id\":1,\"broker_epoch\":1}", -EINVAL,
         "producer id counter: field 'next_producer_id' must be in [0, 9223372036854774807], got -1000"},
        {PIDS, "{\"version\":1,\"next_producer_id\":9223372036854775807,\"broker_id\":1,\"broker_epoch\":1}",
         -EINVAL,
         "producer id counter: field 'next_producer_id' must be in [0, 9223372036854774807], got "
         "9223372036854775807"},
        {FEATURES, "{\"version\":1,\"features\":{\"metadata.version\":0}}", -EINVAL,
         "features: field 'features.metadata.version' must be in [1, 32767], got 0"},
        {FEATURES, "{\"version\":1,\"features\":{\"x\":40000}}", -EINVAL,
         "features: field 'features.x' must be in [1, 32767], got 40000"},
        {FEATURES, "{\"version\":1}", -EINVAL, "features: missing field 'features'"},
        {ID, "{\"version\":1,\"cluster_id\":\"x\"}", -EINVAL,
         "cluster id: cluster_id must be a 22-character Kafka Uuid text"},
        {ID, "{\"version\":1,\"cluster_id\":null}", -EINVAL,
         "cluster id: field 'cluster_id' must be a string"},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[GR_CLUSTER_ERR_BYTES] = "";
        const char *t = cases[i].text;
        size_t n = strlen(t);
        int rc = 0;
        union {
            struct gr_cluster_id_value id;
            struct gr_cluster_broker b;
            struct gr_cluster_controller c;
            struct gr_cluster_topic t;
            struct gr_cluster_partition p;
            struct gr_cluster_producer_ids pid;
            struct gr_cluster_features f;
        } v;
        switch (cases[i].kind) {
        case ID:
            rc = gr_cluster_id_decode(t, n, &v.id, err);
            break;
        case BROKER:
            rc = gr_cluster_broker_decode(t, n, &v.b, err);
            break;
        case CONTROLLER:
            rc = gr_cluster_controller_decode(t, n, &v.c, err);
            break;
        case TOPIC:
            rc = gr_cluster_topic_decode(t, n, &v.t, err);
            break;
        case PARTITION:
            rc = gr_cluster_partition_decode(t, n, &v.p, err);
            break;
        case PIDS:
            rc = gr_cluster_producer_ids_decode(t, n, &v.pid, err);
            break;
        default:
            rc = gr_cluster_features_decode(t, n, &v.f, err);
            break;
        }
        if (rc != cases[i].rc || strcmp(err, cases[i].err))
            print_error("case %zu (%s):\n got  %d '%s'\n want %d '%s'\n", i, t, rc, err, cases[i].rc,
                        cases[i].err);
        if (rc != cases[i].rc || strcmp(err, cases[i].err)) failures++;
        if (cases[i].kind == TOPIC) assert_null(v.t.partitions); /* nothing left to free on failure */
    }
    assert_int_equal(failures, 0);
}

/* xorshift64*: the mutation source of the property test below (deterministic). */
static uint64_t rnd(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ULL;
}

/* Decodes `text` as `kind` (0..6, the order of test_malformed's enum); on success encodes the result and
 * decodes that again: a value a decoder accepts is one the encoder writes, and the round trip is stable. */
static int decode_any(int kind, const char *text, size_t len)
{
    char err[GR_CLUSTER_ERR_BYTES], *out = NULL;
    size_t olen = 0;
    int rc, rc2 = 0;
    switch (kind) {
    case 0: {
        struct gr_cluster_id_value v;
        if (!(rc = gr_cluster_id_decode(text, len, &v, err)))
            rc2 = gr_cluster_id_encode(&v, &out, &olen, err);
        break;
    }
    case 1: {
        struct gr_cluster_broker v, w;
        if (!(rc = gr_cluster_broker_decode(text, len, &v, err)) &&
            !(rc2 = gr_cluster_broker_encode(&v, &out, &olen, err))) {
            assert_int_equal(gr_cluster_broker_decode(out, olen, &w, err), 0);
            assert_memory_equal(&v, &w, sizeof v);
        }
        break;
    }
    case 2: {
        struct gr_cluster_controller v;
        if (!(rc = gr_cluster_controller_decode(text, len, &v, err)))
            rc2 = gr_cluster_controller_encode(&v, &out, &olen, err);
        break;
    }
    case 3: {
        struct gr_cluster_topic v;
        if (!(rc = gr_cluster_topic_decode(text, len, &v, err))) {
            rc2 = gr_cluster_topic_encode(&v, &out, &olen, err);
            gr_cluster_topic_free(&v);
        }
        break;
    }
    case 4: {
        struct gr_cluster_partition v, w;
        if (!(rc = gr_cluster_partition_decode(text, len, &v, err)) &&
            !(rc2 = gr_cluster_partition_encode(&v, &out, &olen, err))) {
            assert_int_equal(gr_cluster_partition_decode(out, olen, &w, err), 0);
            assert_memory_equal(&v, &w, sizeof v);
        }
        break;
    }
    case 5: {
        struct gr_cluster_producer_ids v;
        if (!(rc = gr_cluster_producer_ids_decode(text, len, &v, err)))
            rc2 = gr_cluster_producer_ids_encode(&v, &out, &olen, err);
        break;
    }
    default: {
        struct gr_cluster_features v;
        if (!(rc = gr_cluster_features_decode(text, len, &v, err)))
            rc2 = gr_cluster_features_encode(&v, &out, &olen, err);
        break;
    }
    }
    free(out);
    if (rc2) fail_msg("kind %d: decoded '%.*s' but the encoder refused it: %s", kind, (int)len, text, err);
    assert_true(rc == 0 || rc == -EINVAL || rc == -EMSGSIZE);
    return rc;
}

/* 20,000 mutants of valid values (bytes flipped, replaced by JSON punctuation or digits, cut, doubled):
 * each decodes or is refused cleanly, and what decodes survives encode and decode (run under ASan by
 * `make sanitize`). */
static void test_mutants(void **state)
{
    (void)state;
    const char *seeds[] = {
        "{\"version\":1,\"cluster_id\":\"" CID "\"}",
        "{\"version\":1,\"node_id\":3,\"listeners\":[{\"name\":\"INTERNAL\",\"host\":\"b3\",\"port\":9093},{"
        "\"name\":"
        "\"EXTERNAL\",\"host\":\"::1\",\"port\":9092}],\"rack\":\"r1\",\"shutting_down\":false}",
        "{\"version\":1,\"node_id\":2,\"broker_epoch\":41}",
        "{\"version\":1,\"topic_id\":\"" TID
        "\",\"partitions\":[[1],[2,3],[3]],\"configs\":{\"retention.ms\":\"10\"}}",
        "{\"version\":1,\"leader\":2,\"leader_epoch\":5,\"isr\":[2,0],\"controller_epoch\":12}",
        "{\"version\":1,\"next_producer_id\":1000,\"broker_id\":1,\"broker_epoch\":7}",
        "{\"version\":1,\"features\":{\"metadata.version\":27}}",
    };
    static const char alphabet[] = "{}[]\":,-0123456789 tfn\\u\xff";
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int accepted = 0, refused = 0;
    for (int kind = 0; kind < 7; kind++)
        assert_int_equal(decode_any(kind, seeds[kind], strlen(seeds[kind])), 0);
    for (int i = 0; i < 20000; i++) {
        int kind = i % 7;
        char buf[512];
        size_t len = strlen(seeds[kind]);
        memcpy(buf, seeds[kind], len);
        for (int m = 0, edits = 1 + (int)(rnd(&x) % 3); m < edits; m++) {
            size_t at = rnd(&x) % len;
            switch (rnd(&x) % 4) {
            case 0:
                buf[at] = (char)(rnd(&x) & 0xff);
                break;
            case 1:
                buf[at] = alphabet[rnd(&x) % (sizeof alphabet - 1)];
                break;
            case 2:
                len = at ? at : 1;
                break; /* cut */
            default:   /* double a span */
                if (len * 2 < sizeof buf) {
                    memmove(buf + len, buf + at, len - at);
                    len += len - at;
                }
            }
        }
        if (decode_any(kind, buf, len) == 0)
            accepted++;
        else
            refused++;
    }
    print_message("mutants: %d decoded, %d refused\n", accepted, refused);
    assert_true(accepted > 0 && refused > 0); /* the mutants reach both outcomes */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_id),
        cmocka_unit_test(test_broker),
        cmocka_unit_test(test_controller_producer_ids_features),
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_topic),
        cmocka_unit_test(test_topic_caps),
        cmocka_unit_test(test_huge_arrays),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_mutants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
