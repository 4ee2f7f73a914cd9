/*
 * dynconf.c: persistence and effect of the dynamic broker configs; see dynconf.h. The file is Gregor's
 * (Kafka keeps these in its metadata log): one line per value, "broker." or "default." then the key.
 */
#include "server/dynconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/controller.h"
#include "common/log.h"
#include "server/broker.h"
#include "server/topic_configs.h"

void gr_dynconf_store_config(const struct gr_config *cfg, struct gr_store_config *sc)
{
    sc->segment_bytes = gr_config_int(cfg, "log.segment.bytes");
    sc->segment_ms = gr_config_roll_ms(cfg);
    sc->retention_ms = gr_config_retention_ms(cfg);
    sc->retention_bytes = gr_config_int(cfg, "log.retention.bytes");
    sc->index_interval_bytes = (int32_t)gr_config_int(cfg, "log.index.interval.bytes");
    sc->segment_index_bytes = (int32_t)gr_config_int(cfg, "log.index.size.max.bytes");
    sc->flush_interval_messages = gr_config_int(cfg, "log.flush.interval.messages");
    sc->flush_interval_ms = gr_config_is_set(cfg, "log.flush.interval.ms")
                                ? gr_config_int(cfg, "log.flush.interval.ms")
                                : INT64_MAX;
    sc->max_message_bytes = (int32_t)gr_config_int(cfg, "message.max.bytes");
    sc->delete_retention_ms = gr_config_int(cfg, "log.cleaner.delete.retention.ms");
    sc->min_cleanable_ratio = strtod(gr_config_str(cfg, "log.cleaner.min.cleanable.ratio"), NULL);
    sc->min_compaction_lag_ms = gr_config_int(cfg, "log.cleaner.min.compaction.lag.ms");
    sc->max_compaction_lag_ms = gr_config_int(cfg, "log.cleaner.max.compaction.lag.ms");
    const struct gr_broker_settings *s = &cfg->settings;
    sc->cleanup_delete = s->log_cleanup_policy_delete;
    sc->cleanup_compact = s->log_cleanup_policy_compact;
    sc->log_append_time = s->log_message_timestamp_type_log_append_time;
    sc->timestamp_before_max_ms = s->log_message_timestamp_before_max_ms;
    sc->timestamp_after_max_ms = s->log_message_timestamp_after_max_ms;
    sc->compression_type = s->compression_type;
}

/* One "broker.k=v" / "default.k=v" line into `sets`; 0 or -1 (printed). */
static int load_line(char *line, struct gr_tcfg_set *sets)
{
    char *eq = strchr(line, '=');
    int level = strncmp(line, "broker.", 7) == 0    ? GR_CFG_LEVEL_BROKER
                : strncmp(line, "default.", 8) == 0 ? GR_CFG_LEVEL_DEFAULT
                                                    : -1;
    if (!eq || level < 0) {
        fprintf(stderr, "config: %s: bad line '%s'\n", GR_DYNCONF_FILE, line);
        return -1;
    }
    *eq = 0;
    struct gr_tcfg_set *set = &sets[level];
    set->keys[set->count] = line + (level == GR_CFG_LEVEL_BROKER ? 7 : 8);
    set->values[set->count++] = eq + 1;
    return 0;
}

int gr_dynconf_load(struct gr_config *cfg, const char *log_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", log_dir, GR_DYNCONF_FILE);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        fprintf(stderr, "config: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    int n;
    gr_config_defs(&n);
    struct gr_tcfg_set sets[2];
    int rc = 0;
    for (int l = 0; l < 2; l++) {
        sets[l].count = 0;
        sets[l].keys = gr_arena_calloc(&arena, (size_t)n + 1, sizeof *sets[l].keys);
        sets[l].values = gr_arena_calloc(&arena, (size_t)n + 1, sizeof *sets[l].values);
        if (!sets[l].keys || !sets[l].values) rc = -1;
    }
    char line[4096];
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        if (sets[0].count >= n || sets[1].count >= n) rc = -1;
        char *copy = gr_arena_strndup(&arena, line, strlen(line));
        if (rc || !copy || load_line(copy, sets) < 0) rc = -1;
    }
    fclose(f);
    for (int l = 0; l < 2 && rc == 0; l++) {
        struct gr_tcfg_set checked;
        const char *msg;
        if (gr_bcfg_replace(sets[l].keys, sets[l].values, sets[l].count, &arena, &checked, &msg)) {
            fprintf(stderr, "config: %s: %s\n", path, msg ? msg : "invalid");
            rc = -1;
            break;
        }
        for (int i = 0; l == GR_CFG_LEVEL_DEFAULT && i < checked.count; i++)
            if (gr_config_ssl_dynamic_key(checked.keys[i])) { /* per broker only, as Kafka */
                fprintf(stderr, "config: %s: default.%s: listener SSL configs are per broker (broker.)\n",
                        path, checked.keys[i]);
                rc = -1;
            }
        if (rc) break;
        gr_config_set_dynamic(cfg, (enum gr_config_level)l, checked.keys, checked.values, checked.count);
    }
    gr_arena_reset(&arena);
    return rc;
}

char *gr_dynconf_format(const struct gr_config *cfg, const struct gr_tcfg_set *broker,
                        const struct gr_tcfg_set *dflt, struct gr_arena *arena, size_t *len)
{
    struct gr_tcfg_set cur[2];
    const struct gr_tcfg_set *sets[2] = {broker, dflt};
    size_t cap = 128;
    for (int l = 0; l < 2; l++) {
        if (!sets[l]) {
            if (gr_bcfg_current(cfg, (enum gr_config_level)l, arena, &cur[l])) return NULL;
            sets[l] = &cur[l];
        }
        for (int i = 0; i < sets[l]->count; i++)
            cap += strlen(sets[l]->keys[i]) + strlen(sets[l]->values[i]) + 16;
    }
    char *out = gr_arena_alloc(arena, cap);
    if (!out) return NULL;
    size_t o = (size_t)snprintf(
        out, cap, "# Gregor's dynamic broker configs (kafka-configs.sh --entity-type brokers)\n");
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < sets[l]->count; i++)
            o += (size_t)snprintf(out + o, cap - o, "%s.%s=%s\n",
                                  l == GR_CFG_LEVEL_BROKER ? "broker" : "default", sets[l]->keys[i],
                                  sets[l]->values[i]);
    *len = o;
    return out;
}

void gr_dynconf_commit(struct gr_broker *b, enum gr_config_level level, const struct gr_tcfg_set *set)
{
    gr_config_set_dynamic(&b->cfg, level, set->keys, set->values, set->count);
    struct gr_store_config sc;
    gr_store_config_defaults(&sc);
    gr_dynconf_store_config(&b->cfg, &sc);
    if (b->store) gr_store_set_defaults(b->store, &sc);
    if (b->controller) /* the broker default for topics without their own (dynamic in Kafka too) */
        gr_controller_set_unclean(b->controller, gr_config_bool(&b->cfg, "unclean.leader.election.enable"),
                                  0);
    GR_INFO("dynamic broker configs (%s) changed: %d keys",
            level == GR_CFG_LEVEL_BROKER ? "this broker" : "cluster default", set->count);
}
