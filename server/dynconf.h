/*
 * dynconf.h: dynamic broker configuration (kafka-configs.sh --alter --entity-type brokers, --entity-name <id>
 * or --entity-default). The values live in struct gr_config's dynamic levels (server/config.h: per-broker >
 * cluster default > static > default); which keys may change and how a change is validated is
 * server/topic_configs.h (gr_bcfg_*). This file persists them and makes them take effect:
 *
 *   <log_dir>/gregor-dynamic-broker.properties   one "broker.<key>=<value>" or "default.<key>=<value>" line
 *                                                per dynamic value, replaced atomically on the I/O pool
 *                                                (storage's topic operation FIFO), read once at start
 *
 * A change is written first, then applied (gr_dynconf_commit): gr_config_set_dynamic re-resolves the typed
 * broker settings (cfg.settings: message.max.bytes, compression.type, log.message.timestamp.*,
 * max.connections...), and the store's broker defaults are recomputed so every topic's typed policy
 * (storage/store.h gr_topic_policy) follows at once for topics without their own value.
 * Read next: server/config_resources.h (gr_alter_broker_*).
 */
#ifndef GR_DYNCONF_H
#define GR_DYNCONF_H

#include <stddef.h>

#include "common/arena.h"
#include "server/config.h"
#include "storage/store.h"

#define GR_DYNCONF_FILE "gregor-dynamic-broker.properties"

struct gr_broker;
struct gr_tcfg_set;

/* Fills the broker-default fields of `sc` (log.segment.bytes, log.roll.*, log.retention.*, flush, index,
 * message.max.bytes, log.cleaner.*, log.cleanup.policy, log.message.timestamp.*, compression.type) from the
 * effective values of `cfg`. */
void gr_dynconf_store_config(const struct gr_config *cfg, struct gr_store_config *sc);
/* Loads <log_dir>/GR_DYNCONF_FILE into cfg's dynamic levels (start-up, main thread, may wait for the
 * disk). A missing file is no error. Returns 0, or -1 after printing why (unreadable, a bad line or value).
 */
int gr_dynconf_load(struct gr_config *cfg, const char *log_dir);
/* The file content for the dynamic sets `broker` and `dflt` (either NULL = cfg's current one of that
 * level), in `arena`; *len receives its length. Returns NULL when out of memory. */
char *gr_dynconf_format(const struct gr_config *cfg, const struct gr_tcfg_set *broker,
                        const struct gr_tcfg_set *dflt, struct gr_arena *arena, size_t *len);
/* Makes `set` the dynamic set of `level` and applies it now (store defaults). Network thread, no disk. */
void gr_dynconf_commit(struct gr_broker *b, enum gr_config_level level, const struct gr_tcfg_set *set);

#endif
