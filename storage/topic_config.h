/*
 * topic_config.h: the one table of topic config keys (Kafka 4.4.0's 37 non-internal LogConfig keys): name,
 * Kafka type, default, validator range or choices, documentation and the broker keys each falls back to
 * (ServerTopicConfigSynonyms). Storage uses it to know which keys a topic may hold
 * (gr_topic_config_key_known) before parsing them into the topic's typed policy (store.h gr_topic_policy);
 * the config APIs use it for validation, sources and synonyms (server/topic_configs.h). Data only: no state,
 * any thread. Read next: storage/topic_config.c (the rows), server/topic_configs.h (the rules built on them).
 */
#ifndef GR_STORAGE_TOPIC_CONFIG_H
#define GR_STORAGE_TOPIC_CONFIG_H

#include <stdint.h>

/* DescribeConfigs ConfigType (config_type, v3+), Kafka's DescribeConfigsResponse.ConfigType ids. */
enum gr_cfg_kafka_type {
    GR_CFGT_UNKNOWN = 0,
    GR_CFGT_BOOLEAN = 1,
    GR_CFGT_STRING = 2,
    GR_CFGT_INT = 3,
    GR_CFGT_SHORT = 4,
    GR_CFGT_LONG = 5,
    GR_CFGT_DOUBLE = 6,
    GR_CFGT_LIST = 7,
    GR_CFGT_CLASS = 8,
    GR_CFGT_PASSWORD = 9,
};

/* Broker keys a topic key falls back to, most important first (at most 3, Kafka's ServerTopicConfigSynonyms).
 */
#define GR_TCFG_SYNONYMS_MAX 3

struct gr_tcfg_synonym_def {
    const char *name;          /* broker config name */
    int64_t unit_ms;           /* 1 = used as is; 60000 (minutes) or 3600000 (hours) converted to ms */
    const char *default_value; /* Kafka 4.1 broker default, NULL when the broker key has none */
};

struct gr_tcfg_def {
    const char *name;          /* topic config name (Kafka TopicConfig) */
    int8_t type;               /* enum gr_cfg_kafka_type */
    const char *default_value; /* Kafka 4.1 LogConfig default, normalised */
    int64_t min, max;          /* INT/LONG/DOUBLE inclusive range (INT64_MIN/MAX when unbounded) */
    const char *choices; /* STRING/LIST: allowed values as Kafka lists them (", "-separated), NULL: any */
    const char *doc;     /* one line, Gregor's own words */
    struct gr_tcfg_synonym_def synonyms[GR_TCFG_SYNONYMS_MAX]; /* name NULL ends the list */
};

/* Returns borrowed: the table (alphabetical), `count` receives its length. */
const struct gr_tcfg_def *gr_tcfg_defs(int *count);
/* Returns borrowed: the row for `name`, or NULL when Kafka 4.4 has no such (non-internal) topic config. */
const struct gr_tcfg_def *gr_tcfg_find(const char *name);

#endif
