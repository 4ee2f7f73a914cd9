/*
 * config.h: the broker configuration, Kafka's names and defaults where they make sense for one node.
 * Sources, later ones win: embedded defaults, a Java-style properties file, `--override key=value`.
 * Unknown keys are reported at start (a warning); a bad value stops the broker with a message naming the key.
 * Every key is a row of one table (name, type, default, documentation), which DescribeConfigs also serves.
 * Read next: server/main.c.
 */
#ifndef GR_CONFIG_H
#define GR_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

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

struct gr_config {
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
/* Current value of `key` as a string (NULL when null). Asserts that the key exists. */
const char *gr_config_str(const struct gr_config *cfg, const char *key);
int64_t gr_config_int(const struct gr_config *cfg, const char *key);
bool gr_config_bool(const struct gr_config *cfg, const char *key);
/* Whether `key` was set explicitly (file, override or a dynamic level). */
bool gr_config_is_set(const struct gr_config *cfg, const char *key);
/* Replaces the whole dynamic set of `level` (Kafka's precedence: dynamic per-broker > dynamic default >
 * static > default, as gr_config_str reads it). Keys must be table rows, values already validated; copies. */
void gr_config_set_dynamic(struct gr_config *cfg, enum gr_config_level level, const char *const *keys,
                           const char *const *values, int count);
/* Returns borrowed: the dynamic value of `key` at `level`, NULL when unset (or not a table row). */
const char *gr_config_dynamic(const struct gr_config *cfg, enum gr_config_level level, const char *key);
/* log.retention.ms resolved from log.retention.ms / .minutes / .hours as Kafka does, in milliseconds. */
int64_t gr_config_retention_ms(const struct gr_config *cfg);
/* log.roll.ms resolved from log.roll.ms / log.roll.hours, in milliseconds. */
int64_t gr_config_roll_ms(const struct gr_config *cfg);

#endif
