/*
 * internal_topics.c: the coordinators' internal topics' shape (internal_topics.h).
 * Read next: server/handlers/create_topics.c, server/handlers/common.c (gr_topic_auto_create).
 */
#include "server/internal_topics.h"

#include <stdio.h>
#include <string.h>

#include "coordinator/offsets_log.h"

#define TXN_TOPIC "__transaction_state" /* server/txns.h GR_TXN_TOPIC */

bool gr_topic_is_internal(const char *name)
{
    return strcmp(name, GR_OFFSETS_TOPIC) == 0 || strcmp(name, TXN_TOPIC) == 0;
}

void gr_txn_topic_configs(const struct gr_broker_settings *s, struct gr_txn_topic_configs *c)
{
    snprintf(c->isr, sizeof c->isr, "%d", (int)s->transaction_state_log_min_isr);
    snprintf(c->seg, sizeof c->seg, "%d", (int)s->transaction_state_log_segment_bytes);
    static const char *const keys[GR_TXN_TOPIC_CONFIGS] = {"cleanup.policy", "compression.type",
                                                           "min.insync.replicas", "segment.bytes",
                                                           "unclean.leader.election.enable"};
    const char *const values[GR_TXN_TOPIC_CONFIGS] = {"compact", "uncompressed", c->isr, c->seg, "false"};
    memcpy(c->keys, keys, sizeof c->keys);
    memcpy(c->values, values, sizeof c->values);
}

static const char *arena_str(struct gr_arena *arena, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = gr_arena_alloc(arena, n);
    if (p) memcpy(p, s, n);
    return p;
}

bool gr_internal_topic_layout(struct gr_arena *arena, const struct gr_broker_settings *s, struct gr_str name,
                              int32_t *partitions, int32_t *replication_factor, int32_t **assignment,
                              const char ***keys, const char ***values, int32_t *count)
{
    bool offsets = gr_str_eq(name, gr_str_c(GR_OFFSETS_TOPIC)), txn = gr_str_eq(name, gr_str_c(TXN_TOPIC));
    if (!offsets && !txn) return false;
    const char **k = gr_arena_alloc(arena, GR_TXN_TOPIC_CONFIGS * sizeof *k);
    const char **v = gr_arena_alloc(arena, GR_TXN_TOPIC_CONFIGS * sizeof *v);
    if (!k || !v) return false;
    int32_t n;
    if (offsets) {
        char seg[16];
        snprintf(seg, sizeof seg, "%d", GR_OFFSETS_SEGMENT_BYTES);
        k[0] = "cleanup.policy", v[0] = "compact";
        k[1] = "segment.bytes", v[1] = arena_str(arena, seg);
        n = 2;
    } else {
        struct gr_txn_topic_configs c;
        gr_txn_topic_configs(s, &c);
        for (n = 0; n < GR_TXN_TOPIC_CONFIGS; n++) {
            k[n] = c.keys[n];
            v[n] = arena_str(arena, c.values[n]);
        }
    }
    for (int32_t i = 0; i < n; i++)
        if (!v[i]) return false;
    *partitions = offsets ? s->offsets_topic_num_partitions : s->transaction_state_log_num_partitions;
    *replication_factor =
        offsets ? s->offsets_topic_replication_factor : s->transaction_state_log_replication_factor;
    *assignment = NULL;
    *keys = k;
    *values = v;
    *count = n;
    return true;
}
