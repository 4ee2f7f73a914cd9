/*
 * topic_configs.h: Kafka's topic configurations as data (name, type, default, validator, broker synonyms,
 * documentation), and the pure logic the config APIs are built on: validating and normalising a value,
 * refusing values Gregor does not enforce, resolving what DescribeConfigs shows (value, config_source,
 * synonyms) for a topic or for the broker, and computing the new topic-level set for AlterConfigs
 * (replace) and IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT).
 *
 * Facts are those of Apache Kafka 4.4.0: the 37 non-internal LogConfig keys with their ConfigDef types,
 * defaults and validators (the one table of topic keys, storage/topic_config.h, which storage also uses),
 * ServerTopicConfigSynonyms (topic key -> broker keys, with hours/minutes converted to ms),
 * DynamicBrokerConfig.brokerConfigSynonyms, and ConfigHelper's synonym rules:
 *   - a topic entry lists [its topic-level value (DYNAMIC_TOPIC_CONFIG)] then, for its broker synonyms,
 *     every one set in the properties (STATIC_BROKER_CONFIG), then every one with a non-null default
 *     (DEFAULT_CONFIG), and drops the broker entries that come before the first one named like the primary
 *     synonym (so retention.ms lists no broker synonym while log.retention.ms is unset);
 *   - config_source is the source of the first synonym, DEFAULT_CONFIG when there is none;
 *   - the value is the topic-level value, else the first broker synonym with a value (set or default)
 *     converted to the topic's unit, else the topic default.
 * Values are stored and shown normalised as Kafka's ConfigDef.convertToString prints a parsed value
 * (trimmed, "TRUE" -> "true", list items trimmed and joined by ",", doubles as Java prints them: "1.0").
 *
 * Nothing here touches storage or the network: handlers fetch the topic's current set from storage, call
 * these functions, and write the result back with gr_topic_config_set_all. Strings returned are borrowed
 * from the table, the broker config, the inputs, or allocated in the caller's arena.
 * Read next: server/handlers/describe_configs.c, alter_configs.c, incremental_alter_configs.c.
 */
#ifndef GR_TOPIC_CONFIGS_H
#define GR_TOPIC_CONFIGS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/arena.h"
#include "server/config.h"
#include "storage/topic_config.h" /* the table of topic keys */

/* DescribeConfigs ConfigSource ids (config_source and synonym source, v1+). */
enum gr_cfg_source {
    GR_CFGS_UNKNOWN = 0,
    GR_CFGS_DYNAMIC_TOPIC = 1,
    GR_CFGS_DYNAMIC_BROKER = 2,
    GR_CFGS_DYNAMIC_DEFAULT_BROKER = 3,
    GR_CFGS_STATIC_BROKER = 4,
    GR_CFGS_DEFAULT = 5,
    GR_CFGS_DYNAMIC_BROKER_LOGGER = 6,
};

/* IncrementalAlterConfigs config_operation ids (Kafka AlterConfigOp.OpType). */
enum gr_cfg_op { GR_CFG_OP_SET = 0, GR_CFG_OP_DELETE = 1, GR_CFG_OP_APPEND = 2, GR_CFG_OP_SUBTRACT = 3 };

/* ConfigResource.Type ids used by the config APIs. */
enum gr_cfg_resource {
    GR_CFG_RESOURCE_TOPIC = 2,
    GR_CFG_RESOURCE_BROKER = 4,
    GR_CFG_RESOURCE_BROKER_LOGGER = 8
};

/* Gregor's refusals: a static message when `value` (normalised, see gr_tcfg_check) asks for behaviour
 * Gregor does not implement (compaction, broker-side recompression, tiered storage, preallocation, segment
 * jitter, delayed file deletion), else NULL. NULL value: NULL. */
const char *gr_tcfg_unsupported(const char *key, const char *value);
/* What only a cluster can honour: a static message when a single-node broker must refuse `value` of `key`
 * (min.insync.replicas other than 1: no other replica can be in sync), else NULL. Cluster mode takes Kafka's
 * range (gr_tcfg_check). NULL value: NULL. */
const char *gr_tcfg_single_node_refusal(const char *key, const char *value);

/* Validates `value` for topic config `key` as Kafka's LogConfig does, then Gregor's refusals.
 * Returns GR_ERR_NONE with *normalized (arena, or borrowed `value` when already normal), or
 * GR_ERR_INVALID_CONFIG with *msg (arena or static): "Unknown topic config name: k",
 * "Invalid value v for configuration k: ...", or a refusal. Returns GR_ERR_UNKNOWN_SERVER_ERROR when the
 * arena is exhausted. */
int16_t gr_tcfg_check(const char *key, const char *value, struct gr_arena *arena, const char **normalized,
                      const char **msg);

/* A topic-level config set: `count` distinct keys with non-NULL values. */
struct gr_tcfg_set {
    const char **keys;
    const char **values;
    int count;
};

/* One IncrementalAlterConfigs operation (op is enum gr_cfg_op; value NULL allowed only for DELETE). */
struct gr_tcfg_op {
    const char *key;
    int8_t op;
    const char *value;
};

/* The checks Kafka's brokers make on every AlterConfigs/IncrementalAlterConfigs resource before anything
 * else, whatever its type: a key given twice -> GR_ERR_INVALID_REQUEST "Error due to duplicate config
 * keys"; NULL values (allowed only where ops[i] is GR_CFG_OP_DELETE; `ops` NULL for AlterConfigs) ->
 * GR_ERR_INVALID_REQUEST "Null value not supported for : k1, k2". Returns GR_ERR_NONE otherwise. */
int16_t gr_tcfg_precheck(const char *const *keys, const char *const *values, const int8_t *ops, int count,
                         struct gr_arena *arena, const char **msg);

/* AlterConfigs (every version): the new set is exactly the given pairs; keys not given return to their
 * defaults. Errors, in Kafka's order: duplicate keys -> GR_ERR_INVALID_REQUEST "Error due to duplicate
 * config keys"; NULL values -> GR_ERR_INVALID_REQUEST "Null value not supported for : k,..."; then
 * gr_tcfg_check of every pair and the cross-key rule (min.compaction.lag.ms <= max.compaction.lag.ms)
 * -> GR_ERR_INVALID_CONFIG. `out` is filled only on GR_ERR_NONE (arrays and strings in `arena`). */
int16_t gr_tcfg_replace(const char *const *keys, const char *const *values, int count, struct gr_arena *arena,
                        struct gr_tcfg_set *out, const char **msg);

/* IncrementalAlterConfigs: applies `ops` in order to a copy of `cur`. SET replaces, DELETE removes (a key
 * not set, even an unknown one, is no error, as in Kafka), APPEND adds the comma-separated items not
 * already present and SUBTRACT removes them, both starting from the current value or else the default,
 * and only on LIST configs (else GR_ERR_INVALID_CONFIG "Can't APPEND to key k because its type is not
 * LIST."). Then every key that got a value is checked (gr_tcfg_check) and the cross-key rule applied.
 * Duplicate keys and NULL values for non-DELETE ops -> GR_ERR_INVALID_REQUEST as for replace; an unknown
 * op id -> GR_ERR_INVALID_REQUEST (Kafka 4.1 answers UNKNOWN_SERVER_ERROR). `out` filled on success. */
int16_t gr_tcfg_apply_ops(const struct gr_tcfg_set *cur, const struct gr_tcfg_op *ops, int count,
                          struct gr_arena *arena, struct gr_tcfg_set *out, const char **msg);

/* What DescribeConfigs shows for one config. */
#define GR_CFG_ENTRY_SYNONYMS_MAX 8
struct gr_cfg_synonym {
    const char *name;
    const char *value; /* NULL = null */
    int8_t source;     /* enum gr_cfg_source */
};
struct gr_cfg_entry {
    const char *name;
    const char *value; /* NULL = null */
    int8_t source;     /* enum gr_cfg_source */
    int8_t type;       /* enum gr_cfg_kafka_type */
    bool read_only;
    bool is_sensitive;
    const char *doc;
    struct gr_cfg_synonym synonyms[GR_CFG_ENTRY_SYNONYMS_MAX];
    int synonym_count; /* always filled; the handler drops them unless include_synonyms */
};

/* Fills `out` for topic config `def` of a topic whose topic-level value is `topic_value` (NULL when not
 * set at topic level; already normalised), with broker values from `cfg` (keys Gregor's broker table lacks
 * take Kafka's broker default). Returns 0, or -1 when the arena is exhausted. */
int gr_tcfg_describe(const struct gr_tcfg_def *def, const char *topic_value, const struct gr_config *cfg,
                     struct gr_arena *arena, struct gr_cfg_entry *out);

/* Fills `out` for broker config row `def` (from gr_config_defs) as Kafka's ConfigHelper does: value as
 * configured (dynamic per-broker, else dynamic default, else static, NULL when null), source of the first
 * synonym (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG),
 * read_only unless gr_bcfg_dynamic, synonyms per Kafka's broker synonym groups (log.roll.ms/hours,
 * log.retention.ms/minutes/hours, log.roll.jitter.*, log.flush.interval.ms) in Kafka's level order.
 * `per_broker` false describes the cluster-wide default resource (only DYNAMIC_DEFAULT synonyms). */
void gr_bcfg_describe(const struct gr_config_def *def, const struct gr_config *cfg, bool per_broker,
                      struct gr_cfg_entry *out);

/* Whether broker config `name` can change at runtime: Kafka 4.x's dynamic broker configs that Gregor has
 * and applies (the first broker synonym of each topic config, max.connections, producer.id.expiration.ms). */
bool gr_bcfg_dynamic(const char *name);
/* The dynamic set of `level` in `cfg` (strings borrowed, arrays in `arena`). Returns 0, -1 out of memory. */
int gr_bcfg_current(const struct gr_config *cfg, enum gr_config_level level, struct gr_arena *arena,
                    struct gr_tcfg_set *out);
/* AlterConfigs on a BROKER resource: the new dynamic set of that level is exactly the given pairs. Errors
 * as Kafka's ConfigAdminManager: duplicates / nulls (gr_tcfg_precheck), then INVALID_REQUEST "Cannot update
 * these configs dynamically: [k, ...]" (Kafka 4.4's wording) for a broker config Kafka does not change at
 * runtime, "Gregor cannot update these configs dynamically: [k]" for one Gregor lacks or does not apply at
 * runtime, then INVALID_CONFIG "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
 * (Kafka 4.1+), then INVALID_REQUEST "Invalid value v for configuration k: ..." (Gregor's refusals). Values
 * normalised. */
int16_t gr_bcfg_replace(const char *const *keys, const char *const *values, int count, struct gr_arena *arena,
                        struct gr_tcfg_set *out, const char **msg);
/* IncrementalAlterConfigs on a BROKER resource: `ops` applied to `cur` (SET, DELETE, APPEND/SUBTRACT on
 * log.cleanup.policy and other LIST configs, else INVALID_CONFIG "Config value append is not allowed for
 * config key: k"), then the checks of gr_bcfg_replace. The caller runs gr_tcfg_precheck first. */
int16_t gr_bcfg_apply_ops(const struct gr_tcfg_set *cur, const struct gr_tcfg_op *ops, int count,
                          struct gr_arena *arena, struct gr_tcfg_set *out, const char **msg);

/* Kafka's type id for a broker config row type. */
int8_t gr_bcfg_kafka_type(enum gr_config_type type);

#endif
