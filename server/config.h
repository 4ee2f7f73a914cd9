/*
 * config.h: the broker configuration, Kafka's names and defaults where they make sense for one node.
 * Sources, later ones win: embedded defaults, a Java-style properties file, `--override key=value`.
 * Unknown keys are reported at start (a warning); a bad value stops the broker with a message naming the key.
 * Every key is a row of one table (name, type, default, documentation), which DescribeConfigs also serves.
 * Values are kept as text (what DescribeConfigs shows) and parsed once into typed fields, cfg.settings
 * (struct gr_broker_settings), by every setter: at load and on each dynamic broker config change. Code past
 * start-up reads only cfg.settings; topic-level values are the topic's typed policy (storage/store.h).
 * Read next: server/main.c, server/dynconf.h.
 */
#ifndef GR_CONFIG_H
#define GR_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/limits.h"
#include "storage/store.h" /* enum gr_compression_type */

enum gr_config_type { GR_CFG_BOOLEAN, GR_CFG_INT, GR_CFG_LONG, GR_CFG_STRING, GR_CFG_LIST, GR_CFG_DOUBLE };

struct gr_config_def {
    const char *name;
    enum gr_config_type type;
    const char *default_value; /* NULL = no default (null) */
    int64_t min, max;          /* inclusive bounds for INT/LONG */
    const char *doc;
};

/* The broker config definitions, in a stable order; `count` receives the number of rows. */
const struct gr_config_def *gr_config_defs(int *count);

/* Dynamic broker config levels (kafka-configs.sh --entity-name <id> / --entity-default). */
enum gr_config_level { GR_CFG_LEVEL_BROKER = 0, GR_CFG_LEVEL_DEFAULT = 1 };

/* The effective broker configuration as typed fields, named after the keys (units last). Filled from the
 * string table by gr_config_set / gr_config_set_dynamic (start-up and each dynamic broker config change);
 * every reader after start-up reads these fields, never a key string (scripts/lint.py checks it). */
struct gr_broker_settings {
    int32_t node_id;                                  /* node.id, or broker.id when set and >= 0 */
    const char *log_dir;                              /* log.dirs, else log.dir (borrowed from the table) */
    const char *listeners;                            /* listeners (borrowed, like the strings below) */
    const char *advertised_listeners;                 /* advertised.listeners, NULL when unset */
    const char *listener_security_protocol_map;       /* listener.security.protocol.map */
    const char *gregor_listener_file;                 /* gregor.listener.file, NULL when unset */
    int32_t num_partitions;                           /* num.partitions */
    bool auto_create_topics_enable;                   /* auto.create.topics.enable */
    int16_t default_replication_factor;               /* default.replication.factor */
    int32_t offsets_topic_num_partitions;             /* offsets.topic.num.partitions */
    int16_t offsets_topic_replication_factor;         /* offsets.topic.replication.factor */
    int32_t transaction_state_log_num_partitions;     /* transaction.state.log.num.partitions */
    int16_t transaction_state_log_replication_factor; /* transaction.state.log.replication.factor */
    int32_t transaction_state_log_min_isr;            /* transaction.state.log.min.isr */
    int32_t transaction_state_log_segment_bytes;      /* transaction.state.log.segment.bytes */
    /* transaction.abort.timed.out.transaction.cleanup.interval.ms */
    int32_t transaction_abort_interval_ms;
    int32_t transaction_max_timeout_ms;     /* transaction.max.timeout.ms */
    int32_t transactional_id_expiration_ms; /* transactional.id.expiration.ms */
    /* transaction.remove.expired.transaction.cleanup.interval.ms */
    int32_t transaction_remove_expired_interval_ms;
    int32_t message_max_bytes;                        /* message.max.bytes */
    bool log_message_timestamp_type_log_append_time;  /* log.message.timestamp.type == LogAppendTime */
    int64_t log_message_timestamp_before_max_ms;      /* log.message.timestamp.before.max.ms */
    int64_t log_message_timestamp_after_max_ms;       /* log.message.timestamp.after.max.ms */
    enum gr_compression_type compression_type;        /* compression.type */
    bool log_cleanup_policy_delete;                   /* log.cleanup.policy lists delete */
    bool log_cleanup_policy_compact;                  /* log.cleanup.policy lists compact */
    int64_t log_retention_check_interval_ms;          /* log.retention.check.interval.ms */
    int32_t socket_request_max_bytes;                 /* socket.request.max.bytes */
    int64_t queued_max_request_bytes;                 /* queued.max.request.bytes, -1 unlimited */
    int32_t max_connections;                          /* max.connections */
    int64_t connections_max_idle_ms;                  /* connections.max.idle.ms, -1 never */
    int64_t connections_max_reauth_ms;                /* connections.max.reauth.ms (KIP-368), <= 0 off */
    int32_t sasl_server_max_receive_size;             /* sasl.server.max.receive.size: before auth */
    int32_t failed_auth_delay_ms;                     /* connection.failed.authentication.delay.ms */
    int32_t fetch_max_bytes;                          /* fetch.max.bytes */
    bool delete_topic_enable;                         /* delete.topic.enable */
    int32_t group_min_session_timeout_ms;             /* group.min.session.timeout.ms */
    int32_t group_max_session_timeout_ms;             /* group.max.session.timeout.ms */
    int32_t group_initial_rebalance_delay_ms;         /* group.initial.rebalance.delay.ms */
    int32_t group_max_size;                           /* group.max.size */
    int64_t offsets_retention_ms;                     /* offsets.retention.minutes, in ms */
    int32_t offset_metadata_max_bytes;                /* offset.metadata.max.bytes */
    int64_t producer_id_expiration_ms;                /* producer.id.expiration.ms */
    int64_t producer_id_expiration_check_interval_ms; /* producer.id.expiration.check.interval.ms */
    bool transaction_partition_verification_enable;   /* transaction.partition.verification.enable */
    int16_t gregor_transaction_version;               /* gregor.transaction.version (0..2) */
    bool gregor_acks_all_fsync;                       /* gregor.acks.all.fsync */
    int32_t gregor_open_files_max;                    /* gregor.open.files.max */
    int64_t gregor_connection_unsent_bytes_max;       /* gregor.connection.unsent.bytes.max */
    int64_t gregor_unsent_bytes_max;                  /* gregor.unsent.bytes.max */
    int64_t gregor_log_slow_request_ms;               /* gregor.log.slow.request.ms */
    int32_t gregor_metrics_partition_series_max;      /* gregor.metrics.partition.series.max */
    bool gregor_ssl_ktls_enable;                      /* gregor.ssl.ktls.enable */
    /* Cluster mode (issue #19; read-only, as in Kafka). */
    int32_t gregor_metadata_etcd_endpoint_count; /* gregor.metadata.etcd.endpoints: 0 = single node */
    char gregor_metadata_etcd_endpoints[GR_ETCD_ENDPOINTS_MAX]
                                       [GR_ETCD_ENDPOINT_BYTES_MAX + 1]; /* http://h:p */
    const char *gregor_metadata_etcd_prefix;                             /* gregor.metadata.etcd.prefix */
    int32_t broker_session_timeout_ms;                                   /* broker.session.timeout.ms */
    int32_t broker_heartbeat_interval_ms;                                /* broker.heartbeat.interval.ms */
    int32_t controller_quorum_fetch_timeout_ms; /* controller.quorum.fetch.timeout.ms: the controller lease */
    const char *broker_rack;                    /* broker.rack, NULL when unset */
    const char *inter_broker_listener_name;     /* inter.broker.listener.name, NULL when unset */
    const char *security_inter_broker_protocol; /* security.inter.broker.protocol (PLAINTEXT) */
    const char *sasl_mechanism_inter_broker_protocol; /* sasl.mechanism.inter.broker.protocol (GSSAPI) */
    /* the listener other brokers are reached on: inter.broker.listener.name, else the listener named after
       security.inter.broker.protocol, else the first in listeners (Kafka's interBrokerListenerName) */
    char inter_broker_listener[GR_LISTENER_NAME_BYTES_MAX + 1];
    /* Replication (issue #20), Kafka's ReplicationConfigs. */
    int32_t min_insync_replicas;              /* min.insync.replicas (1 on a single node) */
    int64_t replica_lag_time_max_ms;          /* replica.lag.time.max.ms */
    int32_t replica_fetch_max_bytes;          /* replica.fetch.max.bytes, per partition */
    int32_t replica_fetch_response_max_bytes; /* replica.fetch.response.max.bytes */
    int32_t replica_fetch_wait_max_ms;        /* replica.fetch.wait.max.ms */
    int32_t replica_fetch_min_bytes;          /* replica.fetch.min.bytes */
    int32_t replica_fetch_backoff_ms;         /* replica.fetch.backoff.ms */
    int32_t replica_socket_timeout_ms;        /* replica.socket.timeout.ms */
    int32_t num_replica_fetchers;             /* num.replica.fetchers, 1..GR_REPLICA_FETCHERS_MAX */
    int64_t replica_high_watermark_checkpoint_interval_ms; /* replica.high.watermark.checkpoint.interval.ms */
    bool unclean_leader_election_enable;       /* unclean.leader.election.enable (broker default) */
    bool auto_leader_rebalance_enable;         /* auto.leader.rebalance.enable */
    int64_t leader_imbalance_check_interval_s; /* leader.imbalance.check.interval.seconds */
    bool controlled_shutdown_enable;           /* controlled.shutdown.enable (cluster mode's SIGTERM wait) */
    /* ACLs (issue #23): read once at start by server/acls.c */
    bool authorizer_enabled;             /* authorizer.class.name is GR_CONFIG_STANDARD_AUTHORIZER */
    const char *super_users;             /* super.users, NULL when unset */
    bool allow_everyone_if_no_acl_found; /* allow.everyone.if.no.acl.found */
    /* max.incremental.fetch.session.cache.slots, min.incremental.fetch.session.eviction.ms (KIP-227) */
    int32_t fetch_session_slots;
    int64_t fetch_session_eviction_ms;
};

/* The one authorizer.class.name Gregor accepts besides "" (Kafka 4.x's StandardAuthorizer; Kafka 4 removed
 * kafka.security.authorizer.AclAuthorizer with ZooKeeper, so it is refused as Kafka 4 cannot load it). */
#define GR_CONFIG_STANDARD_AUTHORIZER "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

/* The TLS settings of one listener (issue #23), Kafka's names (SslConfigs, BrokerSecurityConfigs, KIP-651):
 * each field is listener.name.<listener, lower case>.<key> when set, else the broker-wide <key>, else Kafka's
 * default. Strings are borrowed from the config; NULL = unset (null). */
struct gr_ssl_settings {
    const char *keystore_type;              /* ssl.keystore.type: JKS (default), PKCS12 or PEM */
    const char *keystore_location;          /* ssl.keystore.location: the store (PEM: key and chain) */
    const char *keystore_key;               /* ssl.keystore.key: inline PEM private key (KIP-651) */
    const char *keystore_certificate_chain; /* ssl.keystore.certificate.chain: inline PEM certificates */
    const char *keystore_password;          /* ssl.keystore.password (JKS/PKCS12; refused with PEM) */
    const char *key_password;               /* ssl.key.password: the private key's (JKS/PKCS12: unset =
                                               ssl.keystore.password, as Kafka) */
    const char *truststore_type;            /* ssl.truststore.type: JKS (default), PKCS12 or PEM */
    const char *truststore_location;        /* ssl.truststore.location: the store (PEM: CA certificates) */
    const char *truststore_certificates;    /* ssl.truststore.certificates: inline PEM CA certificates */
    const char *truststore_password;        /* ssl.truststore.password: JKS/PKCS12, optional (JKS: unset
                                               skips the integrity check, as Java); refused with PEM */
    const char *client_auth;                /* ssl.client.auth: none (default), requested, required */
    const char *enabled_protocols;          /* ssl.enabled.protocols, default TLSv1.2,TLSv1.3 */
    const char *cipher_suites;              /* ssl.cipher.suites, NULL or empty = OpenSSL's defaults */
    const char *principal_mapping_rules;    /* ssl.principal.mapping.rules, default DEFAULT */
    const char *endpoint_identification_algorithm; /* ssl.endpoint.identification.algorithm, default https:
                                                      the inter-broker client checks the peer's host */
    const char *allow_dn_changes;  /* ssl.allow.dn.changes, default false: a reloaded keystore keeps its DN */
    const char *allow_san_changes; /* ssl.allow.san.changes, default false: and keeps its SubjectAltNames */
    bool ktls_enable; /* gregor.ssl.ktls.enable (broker-wide, default true): SSL_OP_ENABLE_KTLS on the
                         listeners */
};

/* The SASL settings of one listener and one mechanism (issue #23), Kafka's names (BrokerSecurityConfigs,
 * SaslConfigs, JaasContext.loadServerContext). Strings are borrowed from the config. */
struct gr_sasl_settings {
    /* listener.name.<listener>.sasl.enabled.mechanisms, else sasl.enabled.mechanisms, else Kafka's default
       GSSAPI (comma-separated), and the key it came from (for messages) */
    const char *enabled_mechanisms;
    const char *enabled_mechanisms_key;
    char enabled_key_buf[GR_LISTENER_NAME_BYTES_MAX + 128];
    /* listener.name.<listener>.<mechanism>.sasl.jaas.config (NULL when unset) and its key: the only place a
       Kafka broker reads a JAAS config from its properties */
    const char *jaas_config;
    char jaas_config_key[GR_LISTENER_NAME_BYTES_MAX + 128];
    const char *broker_jaas_config; /* sasl.jaas.config: a client setting, never read by a broker */
    /* listener.name.<listener>.<mechanism>.connections.max.reauth.ms, else
       listener.name.<listener>.connections.max.reauth.ms (checked to be a long when set), NULL: neither, the
       broker-wide connections.max.reauth.ms applies */
    const char *reauth_ms;
};

/* Most ssl.* keys a config holds (broker-wide and per listener together). */
#define GR_CONFIG_SSL_KEYS_MAX 128

struct gr_config {
    struct gr_broker_settings settings; /* typed view of the values below, kept current by the setters */
    /* ssl.* and listener.name.<l>.ssl.* keys (not table rows: never shown by DescribeConfigs, as Kafka
       hides passwords and keys), full key and value, owned */
    char *ssl_keys[GR_CONFIG_SSL_KEYS_MAX], *ssl_values[GR_CONFIG_SSL_KEYS_MAX];
    int ssl_count;
    /* the dynamic per-broker listener.name.<l>.ssl.* keystore/truststore keys (certificate reload,
       server/tls_reload.h; gr_config_ssl_dynamic_key), full key and value, owned; above the static ones */
    char *ssl_dyn_keys[GR_CONFIG_SSL_KEYS_MAX], *ssl_dyn_values[GR_CONFIG_SSL_KEYS_MAX];
    int ssl_dyn_count;
    char *values[128];     /* current value per definition row (NULL = default) */
    bool from_file[128];   /* set by file or override (config_source STATIC_BROKER_CONFIG) */
    char *dynamic[2][128]; /* per enum gr_config_level: set at runtime (server/dynconf.h), NULL = unset */
};

/* Starts with every key at its default. */
void gr_config_init(struct gr_config *cfg);
/* Frees the owned strings. */
void gr_config_free(struct gr_config *cfg);
/* Loads a properties file (key=value or key: value, # and ! comments, backslash continuations).
 * Returns 0, or -1 after printing an error (unreadable file, bad value) to stderr. */
int gr_config_load_file(struct gr_config *cfg, const char *path);
/* Sets one key from "key=value". Returns 0, 1 for an unknown key (warned, ignored), -1 for a bad value. */
int gr_config_set_kv(struct gr_config *cfg, const char *kv);
/* Sets `key` to `value` after validating it; same returns as gr_config_set_kv. */
int gr_config_set(struct gr_config *cfg, const char *key, const char *value);
/* Current value of `key` as a string (NULL when null). Asserts that the key exists. String-keyed reads are
 * for start-up, the config module and the config APIs (DescribeConfigs, dynconf); everything else reads
 * cfg->settings. */
const char *gr_config_str(const struct gr_config *cfg, const char *key);
int64_t gr_config_int(const struct gr_config *cfg, const char *key);
bool gr_config_bool(const struct gr_config *cfg, const char *key);
/* Whether `key` was set explicitly (file, override or a dynamic level). */
bool gr_config_is_set(const struct gr_config *cfg, const char *key);
/* Replaces the whole dynamic set of `level` (Kafka's precedence: dynamic per-broker > dynamic default >
 * static > default, as gr_config_str reads it). Keys must be table rows or, at the per-broker level only,
 * listener SSL store keys (gr_config_ssl_dynamic_key; kept in ssl_dyn_*); values already validated; copies.
 */
void gr_config_set_dynamic(struct gr_config *cfg, enum gr_config_level level, const char *const *keys,
                           const char *const *values, int count);
/* Returns borrowed: the dynamic value of `key` at `level`, NULL when unset (or not a table row). */
const char *gr_config_dynamic(const struct gr_config *cfg, enum gr_config_level level, const char *key);
/* The rules between keys, checked once every source is loaded (a single key's value is checked when it
 * is set): broker.heartbeat.interval.ms below broker.session.timeout.ms (a lease kept alive less often than
 * it expires is lost between keepalives), and inter.broker.listener.name, when set, one of the names in
 * listeners (Kafka's KafkaConfig.validateValues requires it in advertised.listeners; Gregor advertises every
 * listener) and not set together with security.inter.broker.protocol; replica.fetch.wait.max.ms at most
 * replica.socket.timeout.ms and replica.lag.time.max.ms (KafkaConfig.validateValues, same messages); and
 * min.insync.replicas 1 unless in cluster mode (gregor.metadata.etcd.endpoints set). Returns 0, or -1 after
 * printing the first broken rule, naming both keys, to stderr. */
int gr_config_check(const struct gr_config *cfg);
/* Fills `out` with the TLS settings of listener `listener` (its name as in listeners, any case: Kafka
 * looks listener.name.<name in lower case>.ssl.* up first, then ssl.*, then the default). Values are the
 * strings as set (each checked for its own form when set); the TLS module (server/tls.h) checks the rest. */
void gr_config_ssl(const struct gr_config *cfg, const char *listener, struct gr_ssl_settings *out);
/* gr_config_ssl with the dynamic per-broker listener SSL keys taken from `keys`/`values` (`count` pairs,
 * any other key ignored) instead of cfg's current ones: the settings a pending change would give. */
void gr_config_ssl_with(const struct gr_config *cfg, const char *listener, const char *const *keys,
                        const char *const *values, int count, struct gr_ssl_settings *out);
/* Whether `key` is listener.name.<listener>.<one of Kafka's SslConfigs.RECONFIGURABLE_CONFIGS>: the
 * keystore and truststore keys (type, location, password, ssl.key.password, inline PEM forms) that Kafka
 * changes at runtime per broker (DynamicBrokerConfig's listener configs, SslFactory.reconfigure). */
bool gr_config_ssl_dynamic_key(const char *key);
/* Whether a (listener-prefixed or not) SSL key has Kafka's PASSWORD type (the passwords and KIP-651's inline
 * ssl.keystore.key, ssl.keystore.certificate.chain, ssl.truststore.certificates): DescribeConfigs shows it
 * as null and sensitive. */
bool gr_config_ssl_key_sensitive(const char *key);
/* Fills `out` with the SASL settings of listener `listener` (any case: looked up in lower case, as Kafka's
 * ListenerName.configPrefix) for `mechanism` (any case, NULL for none; its JAAS key uses it in lower case).
 */
void gr_config_sasl(const struct gr_config *cfg, const char *listener, const char *mechanism,
                    struct gr_sasl_settings *out);
/* A mechanism's SASL setting `name` (sasl.server.callback.handler.class, sasl.oauthbearer.jwks.endpoint.url,
 * ...) for `listener`: listener.name.<listener>.<mechanism>.<name> (lower-cased, as Kafka's listener prefix),
 * else the broker-wide <name>; NULL when neither is set. Returns a borrowed value. */
const char *gr_config_sasl_option(const struct gr_config *cfg, const char *listener, const char *mechanism,
                                  const char *name);
/* Recomputes cfg->settings from the string values (called by the setters; exposed for tests). */
void gr_config_resolve(struct gr_config *cfg);
/* log.retention.ms resolved from log.retention.ms / .minutes / .hours as Kafka does, in milliseconds. */
int64_t gr_config_retention_ms(const struct gr_config *cfg);
/* log.roll.ms resolved from log.roll.ms / log.roll.hours, in milliseconds. */
int64_t gr_config_roll_ms(const struct gr_config *cfg);

#endif
