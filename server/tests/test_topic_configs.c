/*
 * test_topic_configs.c: the topic config table and the rules of DescribeConfigs (value, config_source,
 * synonyms), AlterConfigs (replace the whole set) and IncrementalAlterConfigs (SET, DELETE, APPEND,
 * SUBTRACT). Expected values are those a live Apache Kafka 4.1.1 broker answered for the same inputs
 * (see compat-tests/admin/). Read next: server/topic_configs.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/errors.h"
#include "server/topic_configs.h"

struct fixture {
    struct gr_arena arena;
    struct gr_config cfg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    gr_arena_init(&f->arena, 0);
    gr_config_init(&f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    gr_arena_reset(&f->arena);
    gr_config_free(&f->cfg);
    free(f);
    return 0;
}

static const char *value_of(const struct gr_tcfg_set *set, const char *key)
{
    for (int i = 0; i < set->count; i++)
        if (strcmp(set->keys[i], key) == 0) return set->values[i];
    return NULL;
}

/* ---- the table ---- */

static void test_table_is_kafka_44(void **state)
{
    (void)state;
    int n;
    const struct gr_tcfg_def *d = gr_tcfg_defs(&n);
    assert_int_equal(n, 37); /* Kafka 4.4.0: 4.1.1's 33 and the four below */
    for (int i = 1; i < n; i++)
        assert_true(strcmp(d[i - 1].name, d[i].name) < 0);
    const struct gr_tcfg_def *seg = gr_tcfg_find("segment.bytes");
    assert_non_null(seg);
    assert_int_equal(seg->type, GR_CFGT_INT);
    assert_string_equal(seg->default_value, "1073741824");
    assert_int_equal(seg->min, 14); /* Kafka 4.0's minimum (4.1 raised it to 1 MiB): see README */
    assert_int_equal(gr_tcfg_find("cleanup.policy")->type, GR_CFGT_LIST);
    assert_int_equal(gr_tcfg_find("min.cleanable.dirty.ratio")->type, GR_CFGT_DOUBLE);
    assert_int_equal(gr_tcfg_find("preallocate")->type, GR_CFGT_BOOLEAN);
    assert_int_equal(gr_tcfg_find("retention.ms")->type, GR_CFGT_LONG);
    assert_int_equal(gr_tcfg_find("compression.type")->type, GR_CFGT_STRING);
    assert_null(gr_tcfg_find("message.format.version")); /* removed in Kafka 4.0 */
    assert_null(gr_tcfg_find("internal.segment.bytes")); /* internal: never described */
    assert_null(gr_tcfg_find("log.retention.ms"));       /* a broker key */
    for (int i = 0; i < n; i++)
        assert_non_null(d[i].doc);
}

/* ---- value checks ---- */

static void expect_invalid(struct fixture *f, const char *key, const char *value, const char *msg)
{
    const char *norm, *m;
    assert_int_equal(gr_tcfg_check(key, value, &f->arena, &norm, &m), GR_ERR_INVALID_CONFIG);
    assert_non_null(m);
    assert_string_equal(m, msg);
}

static void expect_normal(struct fixture *f, const char *key, const char *value, const char *normal)
{
    const char *norm, *m;
    assert_int_equal(gr_tcfg_check(key, value, &f->arena, &norm, &m), GR_ERR_NONE);
    assert_string_equal(norm, normal);
}

static void test_check_messages_match_kafka(void **state)
{
    struct fixture *f = *state;
    expect_invalid(f, "foo.bar", "1", "Unknown topic config name: foo.bar");
    expect_invalid(f, "retention.ms", "abc",
                   "Invalid value abc for configuration retention.ms: Not a number of type LONG");
    expect_invalid(f, "segment.ms", "0",
                   "Invalid value 0 for configuration segment.ms: Value must be at least 1");
    expect_invalid(
        f, "compression.type", "brotli",
        "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, "
        "lz4, snappy, gzip, producer");
    expect_invalid(
        f, "cleanup.policy", "delete,foo",
        "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete");
    expect_invalid(
        f, "preallocate", "yes",
        "Invalid value yes for configuration preallocate: Expected value to be either true or false");
    expect_invalid(
        f, "min.cleanable.dirty.ratio", "1.5",
        "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1");
    expect_invalid(f, "max.message.bytes", "2147483648",
                   "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT");
    expect_invalid(f, "segment.bytes", "13",
                   "Invalid value 13 for configuration segment.bytes: Value must be at least 14");
    expect_normal(f, "segment.bytes", "10000", "10000"); /* librdkafka 0077's value */
}

static void test_check_normalises_like_kafka(void **state)
{
    struct fixture *f = *state;
    expect_normal(f, "retention.ms", " 12345 ", "12345");
    expect_normal(f, "retention.ms", "+7", "7");
    expect_normal(f, "cleanup.policy", " delete ", "delete");
    expect_normal(f, "unclean.leader.election.enable", "TRUE", "true");
    expect_normal(f, "min.cleanable.dirty.ratio", "1", "1.0");
    expect_normal(f, "min.cleanable.dirty.ratio", "0.25", "0.25");
    expect_normal(f, "min.cleanable.dirty.ratio", "0.0001", "1.0E-4");
    expect_normal(f, "follower.replication.throttled.replicas", " 0:1 , 1:1", "0:1,1:1");
    expect_normal(f, "leader.replication.throttled.replicas", "*", "*");
    expect_normal(f, "leader.replication.throttled.replicas", "", "");
    expect_normal(f, "compression.gzip.level", "-1", "-1");
    expect_normal(f, "compression.gzip.level", "9", "9");
    expect_invalid(
        f, "compression.gzip.level", "0",
        "Invalid value 0 for configuration compression.gzip.level: Value must be -1 or in [1,...,9]");
    const char *norm, *m;
    assert_int_equal(gr_tcfg_check("leader.replication.throttled.replicas", "0-1", &f->arena, &norm, &m),
                     GR_ERR_INVALID_CONFIG);
}

static void test_gregor_refusals(void **state)
{
    struct fixture *f = *state;
    /* valid for Kafka, but Gregor would not enforce them: refused with a message, never accepted */
    /* compaction is built (storage/cleaner.c): every cleanup.policy Kafka takes is accepted */
    expect_normal(f, "cleanup.policy", "compact", "compact");
    expect_normal(f, "cleanup.policy", "compact,delete", "compact,delete");
    /* min.insync.replicas takes Kafka's range (>= 1); a single-node broker refuses more than 1 apart
       (gr_tcfg_single_node_refusal, applied by the handlers when there is no etcd) */
    expect_normal(f, "min.insync.replicas", " 2 ", "2");
    expect_invalid(f, "min.insync.replicas", "0",
                   "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1");
    assert_string_equal(gr_tcfg_single_node_refusal("min.insync.replicas", "2"),
                        "min.insync.replicas must be 1 on a single-node broker");
    assert_null(gr_tcfg_single_node_refusal("min.insync.replicas", "1"));
    assert_null(gr_tcfg_single_node_refusal("retention.ms", "2"));
    assert_null(gr_tcfg_unsupported("min.insync.replicas", "2"));
    const char *norm, *m;
    /* compression.type: the broker recompresses (produce.c), so every Kafka value is accepted */
    expect_normal(f, "compression.type", "gzip", "gzip");
    expect_normal(f, "compression.type", "uncompressed", "uncompressed");
    assert_int_equal(gr_tcfg_check("remote.storage.enable", "True", &f->arena, &norm, &m),
                     GR_ERR_INVALID_CONFIG);
    assert_int_equal(gr_tcfg_check("preallocate", "true", &f->arena, &norm, &m), GR_ERR_INVALID_CONFIG);
    assert_int_equal(gr_tcfg_check("segment.jitter.ms", "10", &f->arena, &norm, &m), GR_ERR_INVALID_CONFIG);
    /* their defaults are fine */
    expect_normal(f, "compression.type", "producer", "producer");
    expect_normal(f, "min.insync.replicas", "1", "1");
    expect_normal(f, "preallocate", "false", "false");
    expect_normal(f, "segment.jitter.ms", "0", "0");
    /* the same rule CreateTopics uses */
    assert_null(gr_tcfg_unsupported("cleanup.policy", "compact,delete"));
    assert_non_null(gr_tcfg_unsupported("preallocate", "true"));
    assert_null(gr_tcfg_unsupported("cleanup.policy", "delete"));
    assert_null(gr_tcfg_unsupported("retention.ms", "1"));
}

/* ---- AlterConfigs: replace ---- */

static void test_replace_sets_exactly_the_given_keys(void **state)
{
    struct fixture *f = *state;
    const char *keys[] = {"retention.ms", "cleanup.policy", "unclean.leader.election.enable",
                          "min.cleanable.dirty.ratio"};
    const char *values[] = {" 12345 ", " delete ", "TRUE", "1"};
    struct gr_tcfg_set out;
    const char *msg;
    assert_int_equal(gr_tcfg_replace(keys, values, 4, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_int_equal(out.count, 4);
    assert_string_equal(value_of(&out, "retention.ms"), "12345");
    assert_string_equal(value_of(&out, "cleanup.policy"), "delete");
    assert_string_equal(value_of(&out, "unclean.leader.election.enable"), "true");
    assert_string_equal(value_of(&out, "min.cleanable.dirty.ratio"), "1.0");
    /* a second replace with one key: everything else returns to its default (absent from the set) */
    const char *k2[] = {"segment.ms"};
    const char *v2[] = {"1000"};
    assert_int_equal(gr_tcfg_replace(k2, v2, 1, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_int_equal(out.count, 1);
    assert_string_equal(value_of(&out, "segment.ms"), "1000");
    assert_null(value_of(&out, "retention.ms"));
    /* an empty replace clears the set */
    assert_int_equal(gr_tcfg_replace(NULL, NULL, 0, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_int_equal(out.count, 0);
}

static void test_replace_errors(void **state)
{
    struct fixture *f = *state;
    struct gr_tcfg_set out = {NULL, NULL, -7};
    const char *msg;
    const char *dk[] = {"retention.ms", "retention.ms"};
    const char *dv[] = {"1", "2"};
    assert_int_equal(gr_tcfg_replace(dk, dv, 2, &f->arena, &out, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Error due to duplicate config keys");
    const char *nk[] = {"retention.ms", "segment.ms"};
    const char *nv[] = {NULL, NULL};
    assert_int_equal(gr_tcfg_replace(nk, nv, 2, &f->arena, &out, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Null value not supported for : retention.ms, segment.ms");
    const char *lk[] = {"min.compaction.lag.ms", "max.compaction.lag.ms"};
    const char *lv[] = {"10", "5"};
    assert_int_equal(gr_tcfg_replace(lk, lv, 2, &f->arena, &out, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(
        msg, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)");
    const char *uk[] = {"retention.ms", "foo.bar"};
    const char *uv[] = {"1", "2"};
    assert_int_equal(gr_tcfg_replace(uk, uv, 2, &f->arena, &out, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(msg, "Unknown topic config name: foo.bar");
    assert_int_equal(out.count, -7); /* untouched on error */
}

/* ---- IncrementalAlterConfigs ---- */

static void test_incremental_set_delete(void **state)
{
    struct fixture *f = *state;
    const char *ck[] = {"retention.ms", "segment.ms"};
    const char *cv[] = {"1000", "2000"};
    struct gr_tcfg_set cur = {ck, cv, 2}, out;
    const char *msg;
    struct gr_tcfg_op ops[] = {
        {"retention.ms", GR_CFG_OP_SET, " 5000"},
        {"segment.ms", GR_CFG_OP_DELETE, NULL},
        {"foo.bar", GR_CFG_OP_DELETE, NULL}, /* deleting an unknown key is no error in Kafka */
        {"max.message.bytes", GR_CFG_OP_SET, "2000000"},
    };
    assert_int_equal(gr_tcfg_apply_ops(&cur, ops, 4, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_int_equal(out.count, 2);
    assert_string_equal(value_of(&out, "retention.ms"), "5000");
    assert_string_equal(value_of(&out, "max.message.bytes"), "2000000");
    assert_null(value_of(&out, "segment.ms"));
    /* the input set is not modified */
    assert_int_equal(cur.count, 2);
    assert_string_equal(cv[0], "1000");
}

static void test_incremental_append_subtract(void **state)
{
    struct fixture *f = *state;
    struct gr_tcfg_set cur = {NULL, NULL, 0}, out, out2, out3;
    const char *msg;
    const char *key = "follower.replication.throttled.replicas";
    struct gr_tcfg_op a1[] = {{key, GR_CFG_OP_APPEND, "0:1,1:1"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, a1, 1, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&out, key), "0:1,1:1");
    struct gr_tcfg_op a2[] = {{key, GR_CFG_OP_APPEND, "1:1,2:1"}}; /* 1:1 already there: not repeated */
    assert_int_equal(gr_tcfg_apply_ops(&out, a2, 1, &f->arena, &out2, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&out2, key), "0:1,1:1,2:1");
    struct gr_tcfg_op s1[] = {{key, GR_CFG_OP_SUBTRACT, "0:1,9:9"}}; /* absent items are ignored */
    assert_int_equal(gr_tcfg_apply_ops(&out2, s1, 1, &f->arena, &out3, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&out3, key), "1:1,2:1");
    /* SUBTRACT starts from the default when the key is not set: cleanup.policy delete - delete = "" */
    struct gr_tcfg_op s2[] = {{"cleanup.policy", GR_CFG_OP_SUBTRACT, "delete"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, s2, 1, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&out, "cleanup.policy"), "");
    /* APPEND delete to the default delete: unchanged value, now set at topic level */
    struct gr_tcfg_op a3[] = {{"cleanup.policy", GR_CFG_OP_APPEND, "delete"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, a3, 1, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&out, "cleanup.policy"), "delete");
    /* APPEND compact to the default delete: compact,delete applies both (storage/cleaner.c) */
    struct gr_tcfg_op a4[] = {{"cleanup.policy", GR_CFG_OP_APPEND, "compact"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, a4, 1, &f->arena, &out, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&out, "cleanup.policy"), "delete,compact");
}

static void test_incremental_errors(void **state)
{
    struct fixture *f = *state;
    struct gr_tcfg_set cur = {NULL, NULL, 0}, out = {NULL, NULL, -7};
    const char *msg;
    struct gr_tcfg_op a[] = {{"retention.ms", GR_CFG_OP_APPEND, "5"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, a, 1, &f->arena, &out, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(msg, "Can't APPEND to key retention.ms because its type is not LIST.");
    struct gr_tcfg_op s[] = {{"retention.ms", GR_CFG_OP_SUBTRACT, "5"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, s, 1, &f->arena, &out, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(msg, "Can't SUBTRACT to key retention.ms because its type is not LIST.");
    struct gr_tcfg_op n[] = {{"retention.ms", GR_CFG_OP_SET, NULL}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, n, 1, &f->arena, &out, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Null value not supported for : retention.ms");
    struct gr_tcfg_op d[] = {{"retention.ms", GR_CFG_OP_SET, "1"}, {"retention.ms", GR_CFG_OP_DELETE, NULL}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, d, 2, &f->arena, &out, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Error due to duplicate config keys");
    struct gr_tcfg_op u[] = {{"foo.bar", GR_CFG_OP_SET, "x"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, u, 1, &f->arena, &out, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(msg, "Unknown topic config name: foo.bar");
    struct gr_tcfg_op bad[] = {{"retention.ms", 7, "5"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, bad, 1, &f->arena, &out, &msg), GR_ERR_INVALID_REQUEST);
    struct gr_tcfg_op lag[] = {{"min.compaction.lag.ms", GR_CFG_OP_SET, "10"},
                               {"max.compaction.lag.ms", GR_CFG_OP_SET, "5"}};
    assert_int_equal(gr_tcfg_apply_ops(&cur, lag, 2, &f->arena, &out, &msg), GR_ERR_INVALID_CONFIG);
    assert_int_equal(out.count, -7);
}

/* ---- DescribeConfigs ---- */

/* The four topic configs Kafka 4.4.0 adds to 4.1.1's (LogConfig.configDef, ServerTopicConfigSynonyms). */
static void test_table_kafka_44_additions(void **state)
{
    struct fixture *f = *state;
    const struct gr_tcfg_def *d = gr_tcfg_find("max.decompressed.message.bytes");
    assert_non_null(d);
    assert_int_equal(d->type, GR_CFGT_INT);
    assert_string_equal(d->default_value, "2147483639");
    assert_int_equal(d->min, 1);
    assert_int_equal(d->max, 2147483639);
    d = gr_tcfg_find("errors.deadletterqueue.group.enable");
    assert_non_null(d);
    assert_int_equal(d->type, GR_CFGT_BOOLEAN);
    assert_string_equal(d->default_value, "false");
    assert_null(d->synonyms[0].name);
    d = gr_tcfg_find("remote.copy.lag.ms");
    assert_non_null(d);
    assert_int_equal(d->type, GR_CFGT_LONG);
    assert_string_equal(d->default_value, "0");
    assert_int_equal(d->min, -1);
    d = gr_tcfg_find("remote.copy.lag.bytes");
    assert_non_null(d);
    assert_int_equal(d->type, GR_CFGT_LONG);
    assert_string_equal(d->default_value, "-1");
    assert_int_equal(d->min, -1);

    expect_invalid(
        f, "max.decompressed.message.bytes", "0",
        "Invalid value 0 for configuration max.decompressed.message.bytes: Value must be at least 1");
    expect_invalid(
        f, "max.decompressed.message.bytes", "2147483640",
        "Invalid value 2147483640 for configuration max.decompressed.message.bytes: Value must be no more "
        "than 2147483639");
    expect_normal(f, "max.decompressed.message.bytes", " 1000 ", "1000");
    expect_invalid(f, "remote.copy.lag.ms", "-2",
                   "Invalid value -2 for configuration remote.copy.lag.ms: Value must be at least -1");
    expect_invalid(f, "remote.copy.lag.bytes", "-2",
                   "Invalid value -2 for configuration remote.copy.lag.bytes: Value must be at least -1");
    expect_normal(f, "remote.copy.lag.bytes", "-1", "-1");
    expect_normal(f, "errors.deadletterqueue.group.enable", "TRUE", "true"); /* accepted, no effect */
    expect_invalid(
        f, "errors.deadletterqueue.group.enable", "1",
        "Invalid value 1 for configuration errors.deadletterqueue.group.enable: Expected value to be "
        "either true or false");

    /* DescribeConfigs: each with Kafka 4.4's broker synonym (DEFAULT_CONFIG), the DLQ flag with none */
    struct gr_cfg_entry e;
    assert_int_equal(
        gr_tcfg_describe(gr_tcfg_find("max.decompressed.message.bytes"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "2147483639");
    assert_int_equal(e.type, GR_CFGT_INT);
    assert_int_equal(e.synonym_count, 1);
    assert_string_equal(e.synonyms[0].name, "max.decompressed.message.bytes");
    assert_string_equal(e.synonyms[0].value, "2147483639");
    assert_int_equal(e.synonyms[0].source, GR_CFGS_DEFAULT);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("remote.copy.lag.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "0");
    assert_int_equal(e.synonym_count, 1);
    assert_string_equal(e.synonyms[0].name, "log.remote.copy.lag.ms");
    assert_string_equal(e.synonyms[0].value, "0");
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("remote.copy.lag.bytes"), NULL, &f->cfg, &f->arena, &e),
                     0);
    assert_string_equal(e.value, "-1");
    assert_int_equal(e.synonym_count, 1);
    assert_string_equal(e.synonyms[0].name, "log.remote.copy.lag.bytes");
    assert_string_equal(e.synonyms[0].value, "-1");
    assert_int_equal(
        gr_tcfg_describe(gr_tcfg_find("errors.deadletterqueue.group.enable"), "true", &f->cfg, &f->arena, &e),
        0);
    assert_string_equal(e.value, "true");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_TOPIC);
    assert_int_equal(e.type, GR_CFGT_BOOLEAN);
    assert_int_equal(e.synonym_count, 1); /* only the topic-level entry */
}

static void test_describe_defaults(void **state)
{
    struct fixture *f = *state;
    struct gr_cfg_entry e;
    /* cleanup.policy: default, one DEFAULT_CONFIG synonym log.cleanup.policy=delete */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("cleanup.policy"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "delete");
    assert_int_equal(e.source, GR_CFGS_DEFAULT);
    assert_int_equal(e.type, GR_CFGT_LIST);
    assert_false(e.read_only);
    assert_false(e.is_sensitive);
    assert_int_equal(e.synonym_count, 1);
    assert_string_equal(e.synonyms[0].name, "log.cleanup.policy");
    assert_string_equal(e.synonyms[0].value, "delete");
    assert_int_equal(e.synonyms[0].source, GR_CFGS_DEFAULT);
    /* retention.ms: value from log.retention.hours=168, but no synonyms (log.retention.ms has no default) */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("retention.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "604800000");
    assert_int_equal(e.source, GR_CFGS_DEFAULT);
    assert_int_equal(e.synonym_count, 0);
    /* segment.ms from log.roll.hours; flush.ms from log.flush.scheduler.interval.ms */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("segment.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "604800000");
    assert_int_equal(e.synonym_count, 0);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("flush.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "9223372036854775807");
    /* a key Gregor's broker table lacks: Kafka's broker default as the synonym */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("file.delete.delay.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "60000");
    assert_int_equal(e.synonym_count, 1);
    assert_string_equal(e.synonyms[0].name, "log.segment.delete.delay.ms");
    /* no broker synonym at all */
    assert_int_equal(
        gr_tcfg_describe(gr_tcfg_find("leader.replication.throttled.replicas"), NULL, &f->cfg, &f->arena, &e),
        0);
    assert_string_equal(e.value, "");
    assert_int_equal(e.synonym_count, 0);
    assert_int_equal(e.source, GR_CFGS_DEFAULT);
}

static void test_describe_topic_override_and_static_broker(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(gr_config_set(&f->cfg, "message.max.bytes", "10000000"), 0);
    struct gr_cfg_entry e;
    /* static broker value: source STATIC_BROKER_CONFIG, synonyms static then default */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("max.message.bytes"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "10000000");
    assert_int_equal(e.source, GR_CFGS_STATIC_BROKER);
    assert_int_equal(e.synonym_count, 2);
    assert_string_equal(e.synonyms[0].name, "message.max.bytes");
    assert_string_equal(e.synonyms[0].value, "10000000");
    assert_int_equal(e.synonyms[0].source, GR_CFGS_STATIC_BROKER);
    assert_string_equal(e.synonyms[1].value, "1048588");
    assert_int_equal(e.synonyms[1].source, GR_CFGS_DEFAULT);
    /* topic-level override comes first: DYNAMIC_TOPIC_CONFIG */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("max.message.bytes"), "5000", &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "5000");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_TOPIC);
    assert_int_equal(e.synonym_count, 3);
    assert_string_equal(e.synonyms[0].name, "max.message.bytes");
    assert_string_equal(e.synonyms[0].value, "5000");
    assert_int_equal(e.synonyms[0].source, GR_CFGS_DYNAMIC_TOPIC);
    /* retention.ms override: only the topic synonym (as Kafka 4.1.1 answered) */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("retention.ms"), "1000000", &f->cfg, &f->arena, &e), 0);
    assert_int_equal(e.synonym_count, 1);
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_TOPIC);
}

static void test_describe_hours_conversion_and_drop_rule(void **state)
{
    struct fixture *f = *state;
    struct gr_cfg_entry e;
    /* only log.retention.hours set: the value follows it, the synonyms are dropped (no log.retention.ms) */
    assert_int_equal(gr_config_set(&f->cfg, "log.retention.hours", "2"), 0);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("retention.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "7200000");
    assert_int_equal(e.synonym_count, 0);
    assert_int_equal(e.source, GR_CFGS_DEFAULT);
    /* log.retention.ms set too: it wins, and all three synonyms are listed, static before default */
    assert_int_equal(gr_config_set(&f->cfg, "log.retention.ms", "60000"), 0);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("retention.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "60000");
    assert_int_equal(e.source, GR_CFGS_STATIC_BROKER);
    assert_int_equal(e.synonym_count, 3);
    assert_string_equal(e.synonyms[0].name, "log.retention.ms");
    assert_string_equal(e.synonyms[1].name, "log.retention.hours");
    assert_int_equal(e.synonyms[1].source, GR_CFGS_STATIC_BROKER);
    assert_string_equal(e.synonyms[2].name, "log.retention.hours");
    assert_string_equal(e.synonyms[2].value, "168");
    assert_int_equal(e.synonyms[2].source, GR_CFGS_DEFAULT);
    /* unlimited retention in hours stays -1 */
    struct gr_config c2;
    gr_config_init(&c2);
    assert_int_equal(gr_config_set(&c2, "log.retention.hours", "-1"), 0);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("retention.ms"), NULL, &c2, &f->arena, &e), 0);
    assert_string_equal(e.value, "-1");
    assert_int_equal(gr_config_set(&c2, "log.roll.hours", "1"), 0);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("segment.ms"), NULL, &c2, &f->arena, &e), 0);
    assert_string_equal(e.value, "3600000");
    gr_config_free(&c2);
}

static const struct gr_config_def *broker_def(const char *name)
{
    int n;
    const struct gr_config_def *d = gr_config_defs(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(d[i].name, name) == 0) return &d[i];
    fail_msg("no broker config %s", name);
    return NULL;
}

static void test_describe_broker(void **state)
{
    struct fixture *f = *state;
    struct gr_cfg_entry e;
    assert_int_equal(gr_config_set(&f->cfg, "message.max.bytes", "10000000"), 0);
    gr_bcfg_describe(broker_def("message.max.bytes"), &f->cfg, true, &e);
    assert_string_equal(e.value, "10000000");
    assert_int_equal(e.source, GR_CFGS_STATIC_BROKER);
    assert_int_equal(e.type, GR_CFGT_INT);
    assert_false(e.read_only); /* a dynamic broker config in Kafka 4.x (DynamicLogConfig) */
    assert_int_equal(e.synonym_count, 2);
    assert_int_equal(e.synonyms[1].source, GR_CFGS_DEFAULT);
    /* log.retention.ms: null value, no synonyms, DEFAULT_CONFIG (as Kafka 4.1.1 answered) */
    gr_bcfg_describe(broker_def("log.retention.ms"), &f->cfg, true, &e);
    assert_null(e.value);
    assert_int_equal(e.source, GR_CFGS_DEFAULT);
    assert_int_equal(e.synonym_count, 0);
    assert_int_equal(e.type, GR_CFGT_LONG);
    /* log.retention.hours: its own default only */
    gr_bcfg_describe(broker_def("log.retention.hours"), &f->cfg, true, &e);
    assert_string_equal(e.value, "168");
    assert_int_equal(e.synonym_count, 1);
    assert_string_equal(e.synonyms[0].name, "log.retention.hours");
    assert_int_equal(e.synonyms[0].source, GR_CFGS_DEFAULT);
    /* log.roll.ms set: roll.ms static, then roll.hours default */
    assert_int_equal(gr_config_set(&f->cfg, "log.roll.ms", "5000"), 0);
    gr_bcfg_describe(broker_def("log.roll.ms"), &f->cfg, true, &e);
    assert_string_equal(e.value, "5000");
    assert_int_equal(e.source, GR_CFGS_STATIC_BROKER);
    assert_int_equal(e.synonym_count, 2);
    assert_string_equal(e.synonyms[1].name, "log.roll.hours");
    gr_bcfg_describe(broker_def("auto.create.topics.enable"), &f->cfg, true, &e);
    assert_int_equal(e.type, GR_CFGT_BOOLEAN);
    assert_string_equal(e.value, "true");
}

/* ---- dynamic broker configs ---- */

/* Sets the dynamic level `level` to one pair. */
static void set_dynamic(struct gr_config *cfg, enum gr_config_level level, const char *key, const char *value)
{
    const char *keys[1] = {key}, *values[1] = {value};
    gr_config_set_dynamic(cfg, level, keys, values, 1);
}

static void test_dynamic_precedence(void **state)
{
    struct fixture *f = *state;
    struct gr_cfg_entry e;
    assert_int_equal(gr_config_set(&f->cfg, "log.segment.bytes", "50000"), 0);
    assert_string_equal(gr_config_str(&f->cfg, "log.segment.bytes"), "50000");
    set_dynamic(&f->cfg, GR_CFG_LEVEL_DEFAULT, "log.segment.bytes", "40000");
    assert_string_equal(gr_config_str(&f->cfg, "log.segment.bytes"), "40000"); /* default over static */
    set_dynamic(&f->cfg, GR_CFG_LEVEL_BROKER, "log.segment.bytes", "30000");
    assert_string_equal(gr_config_str(&f->cfg, "log.segment.bytes"), "30000"); /* per-broker over default */
    /* a topic without its own value: the per-broker value, synonyms in ConfigHelper's level order */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("segment.bytes"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "30000");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_BROKER);
    assert_int_equal(e.synonym_count, 4);
    const int8_t order[4] = {GR_CFGS_DYNAMIC_BROKER, GR_CFGS_DYNAMIC_DEFAULT_BROKER, GR_CFGS_STATIC_BROKER,
                             GR_CFGS_DEFAULT};
    const char *values[4] = {"30000", "40000", "50000", "1073741824"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(e.synonyms[i].source, order[i]);
        assert_string_equal(e.synonyms[i].value, values[i]);
    }
    /* the topic's own value wins over all of them */
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("segment.bytes"), "20000", &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "20000");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_TOPIC);
    /* the broker resource: its value and source; the cluster-default resource: only the default level */
    gr_bcfg_describe(broker_def("log.segment.bytes"), &f->cfg, true, &e);
    assert_string_equal(e.value, "30000");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_BROKER);
    assert_false(e.read_only);
    gr_bcfg_describe(broker_def("log.segment.bytes"), &f->cfg, false, &e);
    assert_string_equal(e.value, "40000");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_DEFAULT_BROKER);
    assert_int_equal(e.synonym_count, 1);
    /* removing the per-broker level: the default applies again */
    gr_config_set_dynamic(&f->cfg, GR_CFG_LEVEL_BROKER, NULL, NULL, 0);
    assert_string_equal(gr_config_str(&f->cfg, "log.segment.bytes"), "40000");
    /* log.retention.ms set dynamically takes over log.retention.hours, as Kafka's KafkaConfig resolves it */
    set_dynamic(&f->cfg, GR_CFG_LEVEL_BROKER, "log.retention.ms", "60000");
    assert_int_equal(gr_config_retention_ms(&f->cfg), 60000);
    assert_int_equal(gr_tcfg_describe(gr_tcfg_find("retention.ms"), NULL, &f->cfg, &f->arena, &e), 0);
    assert_string_equal(e.value, "60000");
    assert_int_equal(e.source, GR_CFGS_DYNAMIC_BROKER);
}

static void test_dynamic_allowed_and_refused(void **state)
{
    struct fixture *f = *state;
    struct gr_tcfg_set set;
    const char *msg;
    /* Kafka 4.x's DynamicLogConfig keys Gregor has, plus max.connections and producer.id.expiration.ms */
    const char *allowed[] = {"log.retention.ms",
                             "log.retention.bytes",
                             "log.segment.bytes",
                             "log.roll.ms",
                             "log.cleanup.policy",
                             "log.flush.interval.messages",
                             "log.flush.interval.ms",
                             "log.message.timestamp.type",
                             "message.max.bytes",
                             "compression.type",
                             "log.cleaner.delete.retention.ms",
                             "max.connections",
                             "producer.id.expiration.ms",
                             "transaction.partition.verification.enable",
                             "unclean.leader.election.enable"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        assert_true(gr_bcfg_dynamic(allowed[i]));
    /* read-only in Kafka (num.partitions, the hours/minutes synonyms, listeners...) */
    const char *refused[] = {"num.partitions",
                             "log.retention.hours",
                             "log.retention.minutes",
                             "log.roll.hours",
                             "log.dirs",
                             "node.id",
                             "gregor.log.level",
                             "auto.create.topics.enable",
                             "replica.lag.time.max.ms",
                             "replica.fetch.max.bytes",
                             "replica.socket.timeout.ms",
                             "replica.fetch.backoff.ms"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *k[1] = {refused[i]}, *v[1] = {"3"};
        char want[200];
        snprintf(want, sizeof want, "Cannot update these configs dynamically: [%s]", refused[i]);
        assert_false(gr_bcfg_dynamic(refused[i]));
        assert_int_equal(gr_bcfg_replace(k, v, 1, &f->arena, &set, &msg), GR_ERR_INVALID_REQUEST);
        assert_string_equal(msg, want);
    }
    const char *k2[2] = {"num.partitions", "log.roll.hours"}, *v2[2] = {"3", "4"};
    assert_int_equal(gr_bcfg_replace(k2, v2, 2, &f->arena, &set, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Cannot update these configs dynamically: [num.partitions, log.roll.hours]");
    /* Kafka-dynamic but not applied by Gregor at runtime, or unknown to Gregor */
    const char *k3[1] = {"log.cleaner.backoff.ms"}, *v3[1] = {"100"};
    assert_int_equal(gr_bcfg_replace(k3, v3, 1, &f->arena, &set, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Gregor cannot update these configs dynamically: [log.cleaner.backoff.ms]");
    const char *k3b[1] = {"num.replica.fetchers"}, *v3b[1] = {"2"}; /* Kafka's DynamicThreadPool */
    assert_int_equal(gr_bcfg_replace(k3b, v3b, 1, &f->arena, &set, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg, "Gregor cannot update these configs dynamically: [num.replica.fetchers]");
    const char *k3c[1] = {"unclean.leader.election.enable"}, *v3c[1] = {"true"};
    assert_int_equal(gr_bcfg_replace(k3c, v3c, 1, &f->arena, &set, &msg), GR_ERR_NONE);
    const char *v3d[1] = {"maybe"};
    assert_int_equal(gr_bcfg_replace(k3c, v3d, 1, &f->arena, &set, &msg), GR_ERR_INVALID_REQUEST);
    /* values: ConfigDef's messages (INVALID_REQUEST, as ConfigAdminManager wraps them), normalised */
    const char *k4[1] = {"log.retention.ms"}, *v4[1] = {"abc"};
    assert_int_equal(gr_bcfg_replace(k4, v4, 1, &f->arena, &set, &msg), GR_ERR_INVALID_REQUEST);
    assert_string_equal(msg,
                        "Invalid value abc for configuration log.retention.ms: Not a number of type LONG");
    const char *k5[2] = {"log.cleanup.policy", "log.segment.bytes"}, *v5[2] = {" compact , delete", " 1000 "};
    assert_int_equal(gr_bcfg_replace(k5, v5, 2, &f->arena, &set, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&set, "log.cleanup.policy"), "compact,delete");
    assert_string_equal(value_of(&set, "log.segment.bytes"), "1000");
    const char *k6[1] = {"min.insync.replicas"}, *v6[1] = {"2"}; /* Kafka 4.1.1's answer */
    assert_int_equal(gr_bcfg_replace(k6, v6, 1, &f->arena, &set, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(msg, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.");
}

static void test_dynamic_incremental_ops(void **state)
{
    struct fixture *f = *state;
    struct gr_tcfg_set cur, next;
    const char *msg;
    set_dynamic(&f->cfg, GR_CFG_LEVEL_BROKER, "log.retention.ms", "60000");
    assert_int_equal(gr_bcfg_current(&f->cfg, GR_CFG_LEVEL_BROKER, &f->arena, &cur), 0);
    assert_int_equal(cur.count, 1);
    struct gr_tcfg_op ops[3] = {{"log.cleanup.policy", GR_CFG_OP_APPEND, "compact"},
                                {"log.retention.ms", GR_CFG_OP_DELETE, NULL},
                                {"log.segment.bytes", GR_CFG_OP_SET, "4096"}};
    assert_int_equal(gr_bcfg_apply_ops(&cur, ops, 3, &f->arena, &next, &msg), GR_ERR_NONE);
    assert_int_equal(next.count, 2);
    assert_string_equal(value_of(&next, "log.cleanup.policy"), "delete,compact"); /* from the default */
    assert_null(value_of(&next, "log.retention.ms"));
    assert_string_equal(value_of(&next, "log.segment.bytes"), "4096");
    struct gr_tcfg_op sub = {"log.cleanup.policy", GR_CFG_OP_SUBTRACT, "delete"};
    assert_int_equal(gr_bcfg_apply_ops(&next, &sub, 1, &f->arena, &cur, &msg), GR_ERR_NONE);
    assert_string_equal(value_of(&cur, "log.cleanup.policy"), "compact");
    struct gr_tcfg_op bad = {"log.retention.ms", GR_CFG_OP_APPEND, "5"};
    assert_int_equal(gr_bcfg_apply_ops(&cur, &bad, 1, &f->arena, &next, &msg), GR_ERR_INVALID_CONFIG);
    assert_string_equal(msg, "Config value append is not allowed for config key: log.retention.ms");
    struct gr_tcfg_op unknown = {"log.retention.ms", 9, "5"};
    assert_int_equal(gr_bcfg_apply_ops(&cur, &unknown, 1, &f->arena, &next, &msg), GR_ERR_INVALID_REQUEST);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_table_is_kafka_44, setup, teardown),
        cmocka_unit_test_setup_teardown(test_table_kafka_44_additions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_messages_match_kafka, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_normalises_like_kafka, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gregor_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_sets_exactly_the_given_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incremental_set_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incremental_append_subtract, setup, teardown),
        cmocka_unit_test_setup_teardown(test_incremental_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_topic_override_and_static_broker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_hours_conversion_and_drop_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_broker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_allowed_and_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_incremental_ops, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
