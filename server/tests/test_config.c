/* test_config.c: the broker configuration: defaults, files, overrides, validation, Kafka's resolution rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/config.h"
#include "server/dynconf.h"
#include "server/topic_configs.h"

/* Writes `text` as <dir>/GR_DYNCONF_FILE. */
static void write_dynconf(const char *dir, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, GR_DYNCONF_FILE);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The dynamic broker configs file: loaded at start into both levels, Kafka's precedence over the static
 * value, and the content written after a change reads back the same. */
static void test_dynamic_file_reload(void **state)
{
    (void)state;
    char dir[] = "/tmp/gregor-dynconf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct gr_config c;
    gr_config_init(&c);
    assert_int_equal(gr_dynconf_load(&c, dir), 0); /* no file: nothing dynamic */
    assert_int_equal(gr_config_set(&c, "log.segment.bytes", "50000"), 0);
    write_dynconf(dir, "# comment\nbroker.log.retention.ms=60000\ndefault.log.segment.bytes=40000\n"
                       "default.log.retention.ms=120000\n");
    assert_int_equal(gr_dynconf_load(&c, dir), 0);
    assert_int_equal(gr_config_retention_ms(&c), 60000);             /* per-broker over default */
    assert_int_equal(gr_config_int(&c, "log.segment.bytes"), 40000); /* default over static */
    struct gr_store_config sc;
    gr_dynconf_store_config(&c, &sc);
    assert_int_equal(sc.retention_ms, 60000);
    assert_int_equal(sc.segment_bytes, 40000);
    /* what a change writes reads back the same */
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    size_t len;
    char *text = gr_dynconf_format(&c, NULL, NULL, &arena, &len);
    assert_non_null(text);
    write_dynconf(dir, text);
    struct gr_config c2;
    gr_config_init(&c2);
    assert_int_equal(gr_dynconf_load(&c2, dir), 0);
    assert_string_equal(gr_config_dynamic(&c2, GR_CFG_LEVEL_BROKER, "log.retention.ms"), "60000");
    assert_string_equal(gr_config_dynamic(&c2, GR_CFG_LEVEL_DEFAULT, "log.retention.ms"), "120000");
    assert_string_equal(gr_config_dynamic(&c2, GR_CFG_LEVEL_DEFAULT, "log.segment.bytes"), "40000");
    assert_null(gr_config_dynamic(&c2, GR_CFG_LEVEL_BROKER, "log.segment.bytes"));
    /* a key Kafka does not change dynamically, a bad value or a bad line stop the start */
    write_dynconf(dir, "broker.num.partitions=3\n");
    assert_int_equal(gr_dynconf_load(&c2, dir), -1);
    write_dynconf(dir, "default.log.retention.ms=abc\n");
    assert_int_equal(gr_dynconf_load(&c2, dir), -1);
    write_dynconf(dir, "log.retention.ms=5\n");
    assert_int_equal(gr_dynconf_load(&c2, dir), -1);
    gr_arena_reset(&arena);
    gr_config_free(&c);
    gr_config_free(&c2);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, GR_DYNCONF_FILE);
    unlink(path);
    rmdir(dir);
}

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
    fprintf(f, "# comment\n! also a comment\nnum.partitions = 4\nlog.retention.minutes: "
               "10\nlisteners=PLAINTEXT://\\\n127.0.0.1:0\n");
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
    assert_int_equal(gr_config_set(&c, "num.partitions", "0"), -1);             /* below its minimum of 1 */
    assert_int_equal(gr_config_set(&c, "message.max.bytes", "3000000000"), -1); /* not a 32-bit int */
    assert_int_equal(gr_config_set(&c, "auto.create.topics.enable", "yes"), -1);
    assert_int_equal(gr_config_set(&c, "log.message.timestamp.type", "Whenever"), -1);
    assert_string_equal(gr_config_str(&c, "gregor.log.format"), "logfmt"); /* the default */
    assert_int_equal(gr_config_set(&c, "gregor.log.format", "xml"), -1);   /* logfmt or json only */
    assert_int_equal(gr_config_set(&c, "gregor.log.format", ""), -1);
    assert_string_equal(gr_config_str(&c, "gregor.log.format"), "logfmt");
    assert_int_equal(gr_config_set(&c, "gregor.log.format", "json"), 0);
    assert_int_equal(gr_config_set(&c, "gregor.metrics.partition.series.max", "-1"), -1); /* 0 .. 2^31-1 */
    assert_int_equal(gr_config_set(&c, "gregor.metrics.partition.series.max", "2147483648"), -1);
    assert_int_equal(c.settings.gregor_metrics_partition_series_max, 10000); /* the default, kept */
    assert_int_equal(gr_config_set(&c, "gregor.metrics.partition.series.max", "0"), 0);
    assert_int_equal(c.settings.gregor_metrics_partition_series_max, 0);
    assert_int_equal(gr_config_set(&c, "no.such.key", "1"), 1); /* unknown: warned and ignored */
    assert_int_equal(gr_config_set_kv(&c, "novalue"), -1);
    assert_int_equal(gr_config_int(&c, "num.partitions"), 1); /* unchanged by the failures */
    assert_int_equal(gr_config_load_file(&c, "/nonexistent/server.properties"), -1);
    gr_config_free(&c);
}

/* The typed settings follow every setter: defaults, static values, and the dynamic levels (per-broker >
 * cluster default > static), and fall back when a dynamic value is removed. */
static void test_settings(void **state)
{
    (void)state;
    struct gr_config c;
    gr_config_init(&c);
    const struct gr_broker_settings *s = &c.settings;
    assert_int_equal(s->message_max_bytes, 1048588);
    assert_int_equal(s->fetch_max_bytes, 57671680);
    assert_int_equal(s->compression_type, GR_COMPRESSION_PRODUCER);
    assert_false(s->log_message_timestamp_type_log_append_time);
    assert_int_equal(s->log_message_timestamp_after_max_ms, 3600000);
    assert_int_equal(s->log_message_timestamp_before_max_ms, INT64_MAX);
    assert_true(s->log_cleanup_policy_delete);
    assert_false(s->log_cleanup_policy_compact);
    assert_int_equal(s->offsets_retention_ms, 10080LL * 60000);
    assert_int_equal(s->connections_max_idle_ms, 600000);
    assert_string_equal(s->log_dir, "data");
    assert_null(s->advertised_listeners);
    assert_int_equal(s->node_id, 1);
    assert_int_equal(gr_config_set(&c, "message.max.bytes", "2000000"), 0);
    assert_int_equal(gr_config_set(&c, "compression.type", "gzip"), 0);
    assert_int_equal(gr_config_set(&c, "log.cleanup.policy", "compact,delete"), 0);
    assert_int_equal(gr_config_set(&c, "log.dirs", "/tmp/x"), 0);
    assert_int_equal(gr_config_set(&c, "broker.id", "7"), 0);
    assert_int_equal(s->message_max_bytes, 2000000);
    assert_int_equal(s->compression_type, GR_COMPRESSION_GZIP);
    assert_true(s->log_cleanup_policy_delete && s->log_cleanup_policy_compact);
    assert_string_equal(s->log_dir, "/tmp/x");
    assert_int_equal(s->node_id, 7);
    const char *dk[] = {"message.max.bytes", "log.message.timestamp.type"}, *dv[] = {"3000", "LogAppendTime"};
    gr_config_set_dynamic(&c, GR_CFG_LEVEL_DEFAULT, dk, dv, 2);
    assert_int_equal(s->message_max_bytes, 3000);
    assert_true(s->log_message_timestamp_type_log_append_time);
    const char *bk[] = {"message.max.bytes"}, *bv[] = {"4000"};
    gr_config_set_dynamic(&c, GR_CFG_LEVEL_BROKER, bk, bv, 1);
    assert_int_equal(s->message_max_bytes, 4000); /* per-broker over the cluster default */
    gr_config_set_dynamic(&c, GR_CFG_LEVEL_BROKER, NULL, NULL, 0);
    assert_int_equal(s->message_max_bytes, 3000);
    gr_config_set_dynamic(&c, GR_CFG_LEVEL_DEFAULT, NULL, NULL, 0);
    assert_int_equal(s->message_max_bytes, 2000000); /* back to the static value */
    assert_false(s->log_message_timestamp_type_log_append_time);
    struct gr_store_config sc;
    gr_dynconf_store_config(&c, &sc);
    assert_int_equal(sc.max_message_bytes, 2000000);
    assert_int_equal(sc.compression_type, GR_COMPRESSION_GZIP);
    assert_true(sc.cleanup_compact && sc.cleanup_delete);
    gr_config_free(&c);
}

/* The cluster-mode keys (issue #19): defaults (single node), the parsed endpoint list, each key's own
 * refusals, and the rules between keys that gr_config_check applies once everything is loaded. */
static void test_cluster_keys(void **state)
{
    (void)state;
    struct gr_config c;
    gr_config_init(&c);
    const struct gr_broker_settings *s = &c.settings;
    assert_int_equal(s->gregor_metadata_etcd_endpoint_count, 0); /* unset: single node */
    assert_string_equal(s->gregor_metadata_etcd_prefix, "/gregor");
    assert_int_equal(s->broker_session_timeout_ms, 9000);
    assert_int_equal(s->broker_heartbeat_interval_ms, 2000);
    assert_int_equal(s->controller_quorum_fetch_timeout_ms, 2000); /* Kafka's default */
    assert_int_equal(gr_config_set(&c, "controller.quorum.fetch.timeout.ms", "0"), -1);
    assert_int_equal(gr_config_set(&c, "controller.quorum.fetch.timeout.ms", "1500"), 0);
    assert_int_equal(s->controller_quorum_fetch_timeout_ms, 1500);
    assert_int_equal(gr_config_set(&c, "controller.quorum.fetch.timeout.ms", "2000"), 0);
    assert_null(s->broker_rack);
    assert_null(s->inter_broker_listener_name);
    assert_int_equal(gr_config_check(&c), 0);

    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints",
                                   "http://10.0.0.1:2379, http://etcd-2:2379,"
                                   "http://[::1]:23790"),
                     0);
    assert_int_equal(s->gregor_metadata_etcd_endpoint_count, 3);
    assert_string_equal(s->gregor_metadata_etcd_endpoints[0], "http://10.0.0.1:2379");
    assert_string_equal(s->gregor_metadata_etcd_endpoints[1], "http://etcd-2:2379"); /* trimmed */
    assert_string_equal(s->gregor_metadata_etcd_endpoints[2], "http://[::1]:23790");
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints", ""), 0); /* empty: single node */
    assert_int_equal(s->gregor_metadata_etcd_endpoint_count, 0);
    const char *bad_endpoints[] = {
        "10.0.0.1:2379",  "http://h",     "http://h:0",      "http://h:65536",
        "https://h:2379", "http://h:1/x", "http://:1",       "http://h:1,,http://g:2",
        "http://[]:1",    "http://h h:1", "http://h:123456", "ftp://h:1"};
    for (size_t i = 0; i < sizeof bad_endpoints / sizeof bad_endpoints[0]; i++)
        if (gr_config_set(&c, "gregor.metadata.etcd.endpoints", bad_endpoints[i]) != -1)
            fail_msg("endpoints '%s' accepted", bad_endpoints[i]);
    char nine[9 * 24] = "";
    for (int i = 0; i < 9; i++)
        snprintf(nine + strlen(nine), sizeof nine - strlen(nine), "%shttp://e%d:2379", i ? "," : "", i);
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints", nine), -1); /* at most 8 */
    nine[strrchr(nine, ',') - nine] = '\0';
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints", nine), 0);
    assert_int_equal(s->gregor_metadata_etcd_endpoint_count, 8);
    assert_string_equal(s->gregor_metadata_etcd_endpoints[7], "http://e7:2379");

    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.prefix", "/kafka/prod-1"), 0);
    assert_string_equal(s->gregor_metadata_etcd_prefix, "/kafka/prod-1");
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.prefix", "gregor"), -1);
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.prefix", "/gregor/"), -1);
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.prefix", "/a//b"), -1);
    assert_string_equal(s->gregor_metadata_etcd_prefix, "/kafka/prod-1"); /* unchanged by the failures */

    assert_int_equal(gr_config_set(&c, "broker.rack", "eu-west-1a"), 0);
    assert_string_equal(s->broker_rack, "eu-west-1a");
    assert_int_equal(gr_config_set(&c, "broker.rack", ""), -1);
    assert_int_equal(gr_config_set(&c, "broker.rack", "tab\there"), -1);
    assert_int_equal(gr_config_set(&c, "broker.session.timeout.ms", "0"), -1);
    assert_int_equal(gr_config_set(&c, "broker.heartbeat.interval.ms", "-5"), -1);
    assert_int_equal(gr_config_set(&c, "broker.session.timeout.ms", "nine"), -1);

    /* the pair rule: the heartbeat must come more often than the session expires */
    assert_int_equal(gr_config_set(&c, "broker.session.timeout.ms", "3000"), 0);
    assert_int_equal(gr_config_set(&c, "broker.heartbeat.interval.ms", "3000"), 0); /* alone it is fine */
    assert_int_equal(gr_config_check(&c), -1);
    assert_int_equal(gr_config_set(&c, "broker.heartbeat.interval.ms", "2999"), 0);
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(s->broker_session_timeout_ms, 3000);
    assert_int_equal(s->broker_heartbeat_interval_ms, 2999);

    /* inter.broker.listener.name names one of the listeners */
    assert_int_equal(gr_config_set(&c, "listeners", "INTERNAL://0.0.0.0:9093, EXTERNAL://0.0.0.0:9092"), 0);
    assert_int_equal(gr_config_set(&c, "inter.broker.listener.name", "EXTERNAL"), 0);
    assert_int_equal(gr_config_check(&c), 0);
    assert_string_equal(s->inter_broker_listener_name, "EXTERNAL");
    assert_int_equal(gr_config_set(&c, "inter.broker.listener.name", "INTERNAL"), 0);
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "inter.broker.listener.name", "PLAINTEXT"), 0);
    assert_int_equal(gr_config_check(&c), -1);
    assert_int_equal(gr_config_set(&c, "inter.broker.listener.name", "INTER"),
                     0); /* a prefix is not a name */
    assert_int_equal(gr_config_check(&c), -1);
    assert_int_equal(gr_config_set(&c, "inter.broker.listener.name", ""), -1);
    gr_config_free(&c);
}

/* The replication keys (issue #20): Kafka's defaults, each key's range, the typed settings, and the rules
 * between keys (KafkaConfig.validateValues; min.insync.replicas above 1 only in cluster mode). */
static void test_replication_keys(void **state)
{
    (void)state;
    struct gr_config c;
    gr_config_init(&c);
    const struct gr_broker_settings *s = &c.settings;
    assert_int_equal(s->min_insync_replicas, 1);
    assert_int_equal(s->replica_lag_time_max_ms, 30000);
    assert_int_equal(s->replica_fetch_max_bytes, 1048576);
    assert_int_equal(s->replica_fetch_response_max_bytes, 10485760);
    assert_int_equal(s->replica_fetch_wait_max_ms, 500);
    assert_int_equal(s->replica_fetch_min_bytes, 1);
    assert_int_equal(s->replica_fetch_backoff_ms, 1000);
    assert_int_equal(s->replica_socket_timeout_ms, 30000);
    assert_int_equal(s->num_replica_fetchers, 1);
    assert_int_equal(s->replica_high_watermark_checkpoint_interval_ms, 5000);
    assert_false(s->unclean_leader_election_enable);
    assert_string_equal(s->security_inter_broker_protocol, "PLAINTEXT");
    assert_string_equal(s->inter_broker_listener, "PLAINTEXT"); /* the default listener's name */
    assert_int_equal(gr_config_check(&c), 0);

    /* each key: its lowest value taken, one below refused (and the value kept), garbage refused */
    static const struct {
        const char *key, *low, *below;
    } ranges[] = {
        {"min.insync.replicas", "1", "0"},        {"replica.lag.time.max.ms", "1", "0"},
        {"replica.fetch.max.bytes", "0", "-1"},   {"replica.fetch.response.max.bytes", "0", "-1"},
        {"replica.fetch.wait.max.ms", "0", "-1"}, {"replica.fetch.min.bytes", "0", "-1"},
        {"replica.fetch.backoff.ms", "0", "-1"},  {"replica.socket.timeout.ms", "1", "0"},
        {"num.replica.fetchers", "1", "0"},       {"replica.high.watermark.checkpoint.interval.ms", "1", "0"},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        if (gr_config_set(&c, ranges[i].key, ranges[i].low) != 0)
            fail_msg("%s=%s refused", ranges[i].key, ranges[i].low);
        if (gr_config_set(&c, ranges[i].key, ranges[i].below) != -1)
            fail_msg("%s=%s accepted", ranges[i].key, ranges[i].below);
        if (gr_config_set(&c, ranges[i].key, "ten") != -1) fail_msg("%s=ten accepted", ranges[i].key);
        assert_string_equal(gr_config_str(&c, ranges[i].key), ranges[i].low);
    }
    assert_int_equal(s->replica_fetch_max_bytes, 0);
    assert_int_equal(s->replica_socket_timeout_ms, 1);
    assert_int_equal(gr_config_set(&c, "num.replica.fetchers", "64"), 0);
    assert_int_equal(gr_config_set(&c, "num.replica.fetchers", "65"), -1); /* GR_REPLICA_FETCHERS_MAX */
    assert_int_equal(s->num_replica_fetchers, 64);
    assert_int_equal(gr_config_set(&c, "replica.fetch.max.bytes", "2147483648"), -1); /* an INT */
    assert_int_equal(gr_config_set(&c, "replica.lag.time.max.ms", "2147483648"), 0);  /* a LONG */
    assert_int_equal(s->replica_lag_time_max_ms, 2147483648LL);
    assert_int_equal(gr_config_set(&c, "unclean.leader.election.enable", "TRUE"), 0);
    assert_true(s->unclean_leader_election_enable);
    assert_int_equal(gr_config_set(&c, "unclean.leader.election.enable", "yes"), -1);
    assert_true(s->unclean_leader_election_enable);

    /* replica.fetch.wait.max.ms <= replica.socket.timeout.ms and <= replica.lag.time.max.ms */
    assert_int_equal(gr_config_set(&c, "replica.socket.timeout.ms", "500"), 0);
    assert_int_equal(gr_config_set(&c, "replica.lag.time.max.ms", "500"), 0);
    assert_int_equal(gr_config_set(&c, "replica.fetch.wait.max.ms", "500"), 0);
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "replica.fetch.wait.max.ms", "501"), 0); /* alone it is fine */
    assert_int_equal(gr_config_check(&c), -1);
    assert_int_equal(gr_config_set(&c, "replica.socket.timeout.ms", "501"), 0);
    assert_int_equal(gr_config_check(&c), -1); /* still above replica.lag.time.max.ms */
    assert_int_equal(gr_config_set(&c, "replica.lag.time.max.ms", "501"), 0);
    assert_int_equal(gr_config_check(&c), 0);

    /* min.insync.replicas: Kafka's range in cluster mode, 1 on a single node */
    assert_int_equal(gr_config_set(&c, "min.insync.replicas", "2"), 0);
    assert_int_equal(s->min_insync_replicas, 2);
    assert_int_equal(gr_config_check(&c), -1);
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints", "http://127.0.0.1:2379"), 0);
    assert_int_equal(gr_config_check(&c), 0);

    /* the inter-broker listener: inter.broker.listener.name, else the listener named after
       security.inter.broker.protocol, else the first listener; setting both keys is an error */
    assert_int_equal(gr_config_set(&c, "listeners", "INTERNAL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092"),
                     0);
    assert_string_equal(s->inter_broker_listener, "PLAINTEXT");
    assert_int_equal(gr_config_set(&c, "listeners", "INTERNAL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9092"),
                     0);
    assert_string_equal(s->inter_broker_listener, "INTERNAL");
    assert_int_equal(gr_config_set(&c, "inter.broker.listener.name", "EXTERNAL"), 0);
    assert_string_equal(s->inter_broker_listener, "EXTERNAL");
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "security.inter.broker.protocol", "SASL_SSL"), 0);
    assert_int_equal(gr_config_set(&c, "security.inter.broker.protocol", "SASL_PLAINTEXT"), 0);
    assert_int_equal(gr_config_set(&c, "security.inter.broker.protocol", "TLS"), -1);
    assert_int_equal(gr_config_set(&c, "security.inter.broker.protocol", "PLAINTEXT"), 0);
    assert_int_equal(gr_config_check(&c), -1); /* both set */
    gr_config_free(&c);
    /* security.inter.broker.protocol=SSL: the listener named SSL, which must exist (no fallback) */
    gr_config_init(&c);
    s = &c.settings;
    assert_int_equal(gr_config_set(&c, "listeners", "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"), 0);
    assert_int_equal(gr_config_set(&c, "security.inter.broker.protocol", "SSL"), 0);
    assert_string_equal(s->inter_broker_listener, "SSL");
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "listeners", "PLAINTEXT://127.0.0.1:9092,TLS://127.0.0.1:9093"), 0);
    assert_int_equal(gr_config_check(&c), -1);
    gr_config_free(&c);
}

/* Replication factors: above 1 refused at check time on a single node, taken in a cluster; above
   GR_CLUSTER_REPLICAS_MAX refused when set. offsets.topic.replication.factor: Kafka's default 3 in a cluster,
   1 on a single node while unset, refused there when set above 1. The removed
   gregor.cluster.replication.enable and gregor.transaction.coordinator.test.enable are ignored (return 1,
   as an unknown key). */
static void test_replication_factors(void **state)
{
    (void)state;
    struct gr_config c;
    gr_config_init(&c);
    const struct gr_broker_settings *s = &c.settings;
    assert_int_equal(s->default_replication_factor, 1);
    assert_int_equal(s->offsets_topic_replication_factor, 1); /* single node, unset */
    assert_string_equal(gr_config_str(&c, "offsets.topic.replication.factor"), "3");
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "gregor.cluster.replication.enable", "true"), 1);
    assert_int_equal(gr_config_set(&c, "gregor.transaction.coordinator.test.enable", "true"), 1);
    assert_int_equal(gr_config_set(&c, "default.replication.factor", "17"),
                     -1); /* > GR_CLUSTER_REPLICAS_MAX */
    assert_int_equal(gr_config_set(&c, "default.replication.factor", "0"), -1);
    assert_int_equal(gr_config_set(&c, "default.replication.factor", "3"), 0);
    assert_int_equal(s->default_replication_factor, 3);
    assert_int_equal(gr_config_check(&c), -1); /* single node */
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints", "http://127.0.0.1:2379"), 0);
    assert_int_equal(s->offsets_topic_replication_factor, 3); /* a cluster: Kafka's default */
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "offsets.topic.replication.factor", "2"), 0);
    assert_int_equal(s->offsets_topic_replication_factor, 2);
    assert_int_equal(gr_config_check(&c), 0);
    assert_int_equal(gr_config_set(&c, "gregor.metadata.etcd.endpoints", ""), 0); /* single node again */
    assert_int_equal(gr_config_set(&c, "default.replication.factor", "1"), 0);
    assert_int_equal(s->offsets_topic_replication_factor, 2); /* set: kept, and refused */
    assert_int_equal(gr_config_check(&c), -1);
    assert_int_equal(gr_config_set(&c, "offsets.topic.replication.factor", "1"), 0);
    assert_int_equal(gr_config_check(&c), 0);
    gr_config_free(&c);
}

/* The ssl.* keys (issue #23): Kafka's defaults, listener.name.<lower-case name>.ssl.* over ssl.*, a bad
 * ssl.client.auth refused, an unknown listener-prefixed key not taken, and DescribeConfigs' table untouched.
 */
static void test_ssl_keys(void **state)
{
    (void)state;
    struct gr_config cfg;
    gr_config_init(&cfg);
    struct gr_ssl_settings s;
    gr_config_ssl(&cfg, "SSL", &s);
    assert_string_equal(s.keystore_type, "JKS");
    assert_string_equal(s.truststore_type, "JKS");
    assert_string_equal(s.client_auth, "none");
    assert_string_equal(s.enabled_protocols, "TLSv1.2,TLSv1.3");
    assert_null(s.keystore_location);
    assert_null(s.cipher_suites);
    assert_int_equal(gr_config_set_kv(&cfg, "ssl.keystore.location=/k/broker.pem"), 0);
    assert_int_equal(gr_config_set_kv(&cfg, "ssl.client.auth=requested"), 0);
    assert_int_equal(gr_config_set_kv(&cfg, "listener.name.mtls.ssl.client.auth=required"), 0);
    assert_int_equal(gr_config_set_kv(&cfg, "listener.name.mtls.ssl.keystore.type=PEM"), 0);
    assert_int_equal(gr_config_set_kv(&cfg, "ssl.client.auth=required"), 0); /* a second set replaces */
    assert_int_equal(gr_config_set_kv(&cfg, "ssl.client.auth=requested"), 0);
    assert_int_equal(gr_config_set_kv(&cfg, "ssl.client.auth=maybe"), -1);
    assert_int_equal(gr_config_set_kv(&cfg, "listener.name.mtls.ssl.client.auth=yes"), -1);
    assert_int_equal(gr_config_set_kv(&cfg, "listener.name.mtls.ssl.not.a.key=1"), 1); /* unknown: ignored */
    assert_int_equal(gr_config_set_kv(&cfg, "listener.name..ssl.client.auth=none"), 1);
    assert_int_equal(cfg.ssl_count, 4);
    gr_config_ssl(&cfg, "MTLS", &s); /* listener names are looked up in lower case, as Kafka's prefix */
    assert_string_equal(s.client_auth, "required");
    assert_string_equal(s.keystore_type, "PEM");
    assert_string_equal(s.keystore_location, "/k/broker.pem"); /* broker-wide fallback */
    gr_config_ssl(&cfg, "SSL", &s);
    assert_string_equal(s.client_auth, "requested");
    assert_string_equal(s.keystore_type, "JKS");
    int n;
    const struct gr_config_def *defs = gr_config_defs(&n);
    for (int i = 0; i < n; i++)
        assert_true(strncmp(defs[i].name, "ssl.", 4) != 0);
    gr_config_free(&cfg);
}

/* Certificate reload's keys (server/tls_reload.h): only listener.name.<l>.<Kafka's reconfigurable SSL key>
 * is dynamic; the per-broker dynamic value wins over the static listener and broker-wide ones; a pending set
 * (gr_config_ssl_with) is read without touching cfg; a new set whose keys and values borrow the current store
 * (as gr_bcfg_current hands them out) replaces it intact; deleting the key falls back to the static value. */
static void test_ssl_dynamic_keys(void **state)
{
    (void)state;
    assert_true(gr_config_ssl_dynamic_key("listener.name.ssl.ssl.keystore.location"));
    assert_true(gr_config_ssl_dynamic_key("listener.name.ssl.ssl.truststore.certificates"));
    assert_false(gr_config_ssl_dynamic_key("ssl.keystore.location")); /* Kafka: listener prefix only */
    assert_false(gr_config_ssl_dynamic_key("listener.name.ssl.ssl.client.auth"));
    assert_false(gr_config_ssl_dynamic_key("listener.name..ssl.keystore.location"));
    assert_true(gr_config_ssl_key_sensitive("listener.name.ssl.ssl.key.password"));
    assert_true(gr_config_ssl_key_sensitive("listener.name.ssl.ssl.keystore.key"));
    assert_false(gr_config_ssl_key_sensitive("listener.name.ssl.ssl.keystore.location"));
    struct gr_config cfg;
    gr_config_init(&cfg);
    assert_int_equal(gr_config_set_kv(&cfg, "ssl.keystore.location=/k/a.pem"), 0);
    assert_int_equal(gr_config_set_kv(&cfg, "listener.name.ssl.ssl.keystore.location=/k/static.pem"), 0);
    const char *k[] = {"listener.name.ssl.ssl.keystore.location", "log.retention.ms"};
    const char *v[] = {"/k/b.pem", "1000"};
    struct gr_ssl_settings s;
    gr_config_ssl_with(&cfg, "SSL", k, v, 2, &s);
    assert_string_equal(s.keystore_location, "/k/b.pem");
    gr_config_ssl(&cfg, "SSL", &s);
    assert_string_equal(s.keystore_location, "/k/static.pem"); /* nothing applied yet */
    gr_config_set_dynamic(&cfg, GR_CFG_LEVEL_BROKER, k, v, 2);
    gr_config_ssl(&cfg, "SSL", &s);
    assert_string_equal(s.keystore_location, "/k/b.pem");
    assert_string_equal(gr_config_dynamic(&cfg, GR_CFG_LEVEL_BROKER, k[0]), "/k/b.pem");
    assert_null(gr_config_dynamic(&cfg, GR_CFG_LEVEL_DEFAULT, k[0]));
    gr_config_ssl(&cfg, "OTHER", &s);
    assert_string_equal(s.keystore_location, "/k/a.pem"); /* another listener: the broker-wide value */
    const char *bk[] = {cfg.ssl_dyn_keys[0], "log.retention.ms"}, *bv[] = {cfg.ssl_dyn_values[0], "1000"};
    gr_config_set_dynamic(&cfg, GR_CFG_LEVEL_BROKER, bk, bv, 2); /* borrowed from the store it replaces */
    assert_int_equal(cfg.ssl_dyn_count, 1);
    assert_string_equal(cfg.ssl_dyn_keys[0], "listener.name.ssl.ssl.keystore.location");
    assert_string_equal(cfg.ssl_dyn_values[0], "/k/b.pem");
    gr_config_set_dynamic(&cfg, GR_CFG_LEVEL_BROKER, k + 1, v + 1, 1);
    gr_config_ssl(&cfg, "SSL", &s);
    assert_string_equal(s.keystore_location, "/k/static.pem");
    assert_int_equal(cfg.ssl_dyn_count, 0);
    gr_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ssl_keys),         cmocka_unit_test(test_ssl_dynamic_keys),
        cmocka_unit_test(test_defaults),         cmocka_unit_test(test_file_and_overrides),
        cmocka_unit_test(test_bad_values),       cmocka_unit_test(test_dynamic_file_reload),
        cmocka_unit_test(test_settings),         cmocka_unit_test(test_cluster_keys),
        cmocka_unit_test(test_replication_keys), cmocka_unit_test(test_replication_factors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
