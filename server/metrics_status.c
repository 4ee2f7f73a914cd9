/*
 * metrics_status.c: gregor_consumergroup_status and gregor_consumergroup_records_lost_total
 * (server/metrics_status.h).
 */
#include "server/metrics_status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/group_status.h"
#include "partition/partition.h"
#include "server/broker.h"
#include "server/metrics_remote.h"
#include "storage/lag.h"
#include "storage/log.h"
#include "storage/store.h"

struct gr_lost_entry {
    char *group, *topic;
    uint64_t count;
    bool seen; /* shown by the scrape in progress */
};

void gr_metrics_status_free(struct gr_metrics_status *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->lost[i].group);
        free(s->lost[i].topic);
    }
    free(s->lost);
    memset(s, 0, sizeof *s);
}

static struct gr_lost_entry *find(const struct gr_metrics_status *s, const char *group, const char *topic)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->lost[i].group, group) && !strcmp(s->lost[i].topic, topic)) return &s->lost[i];
    return NULL;
}

bool gr_metrics_status_add_lost(struct gr_metrics_status *s, const char *group, const char *topic, uint64_t n)
{
    struct gr_lost_entry *e = find(s, group, topic);
    if (!e) {
        if (s->count == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 8;
            struct gr_lost_entry *t = realloc(s->lost, cap * sizeof *t);
            if (!t) goto oom;
            s->lost = t;
            s->cap = cap;
        }
        e = &s->lost[s->count];
        e->group = strdup(group);
        e->topic = strdup(topic);
        e->count = 0;
        if (!e->group || !e->topic) {
            free(e->group);
            free(e->topic);
            goto oom;
        }
        s->count++;
    }
    e->count += n;
    return true;
oom:
    GR_WARN_RATELIMITED("metrics: no memory to count %" PRIu64 " records lost by group %s on topic %s", n,
                        group, topic);
    return false;
}

uint64_t gr_metrics_status_lost(const struct gr_metrics_status *s, const char *group, const char *topic)
{
    const struct gr_lost_entry *e = find(s, group, topic);
    return e ? e->count : 0;
}

struct lost_walk {
    struct gr_metrics_status *s;
    const char *topic;
    int32_t partition;
    int64_t l0, l1;
    uint64_t total;
};

static void lost_one(void *ctx, const char *group_id, int64_t committed)
{
    struct lost_walk *w = ctx;
    int64_t n = gr_status_records_lost(committed, w->l0, w->l1);
    if (n <= 0) return;
    GR_WARN_KV_RATELIMITED("retention deleted past committed offset",
                           "group=%s topic=%s partition=%d records_lost=%" PRId64, group_id, w->topic,
                           w->partition, n);
    if (gr_metrics_status_add_lost(w->s, group_id, w->topic, (uint64_t)n)) w->total += (uint64_t)n;
}

uint64_t gr_metrics_status_count_lost(struct gr_metrics_status *s, struct gr_coordinator *c,
                                      const char *topic, int32_t partition, int64_t l0, int64_t l1)
{
    struct lost_walk w = {s, topic, partition, l0, l1, 0};
    if (c && l1 > l0) gr_coord_committed_foreach(c, topic, partition, lost_one, &w);
    return w.total;
}

void gr_metrics_status_start_moved(void *ctx, struct gr_log *log, int64_t old_start, int64_t new_start)
{
    struct gr_broker *b = ctx;
    if (!b->coord) return;             /* no group coordinator yet: no committed offsets known here */
    const struct gr_part_summary *sum; /* a follower's move: counted from its leader's summary instead */
    if (gr_metrics_remote_elsewhere(b, gr_topic_name(gr_log_topic(log)), gr_log_partition(log), &sum)) return;
    gr_metrics_status_count_lost(&b->metrics.status, b->coord, gr_topic_name(gr_log_topic(log)),
                                 gr_log_partition(log), old_start, new_start);
}

int64_t gr_metrics_status_hw(void *ctx, const char *topic, int32_t partition)
{
    struct gr_broker *b = ctx;
    const struct gr_part_summary *sum; /* led by another broker: its leader's high watermark */
    if (gr_metrics_remote_elsewhere(b, topic, partition, &sum))
        return sum ? gr_part_summary_caught_up(sum) : -1;
    struct gr_topic *t = b->store ? gr_store_topic_find(b->store, topic, strlen(topic)) : NULL;
    if (!t || partition < 0 || partition >= gr_topic_partition_count(t)) return -1;
    struct gr_log *log = gr_topic_log(t, partition);
    if (!log) return -1;
    int64_t hw = gr_partition_visible_offset(gr_broker_partition(b, log));
    return gr_lag_caught_up(gr_log_data_end_offset(log), hw);
}

struct status_walk {
    int64_t now_ms;
    int64_t (*hw)(void *ctx, const char *topic, int32_t partition);
    void *hw_ctx;
    enum gr_status status;
};

static void status_one(void *ctx, const char *topic, int32_t partition, int64_t committed,
                       const struct gr_commit_window *win)
{
    struct status_walk *w = ctx;
    if (!win) return; /* no commit applied since the group was loaded: nothing to evaluate */
    int64_t hw = w->hw(w->hw_ctx, topic, partition);
    if (hw < 0) return; /* the partition is not held here */
    struct gr_commit_sample s[GR_STATUS_WINDOW];
    int n = gr_commit_window_samples(win, s);
    if (n == 0) return;
    int64_t recent[GR_STATUS_WINDOW + 1];
    int nr = gr_status_recent_hw(s, n, hw, w->now_ms, GR_STATUS_RECENT_MS, recent);
    int64_t lag = hw > committed ? hw - committed : 0;
    enum gr_status ps = gr_status_partition(s, n, lag, recent, nr, w->now_ms);
    w->status = gr_status_rollup(w->status == GR_STATUS_NOTFOUND ? GR_STATUS_OK : w->status, ps);
}

int gr_metrics_status_group(struct gr_coordinator *c, const char *grp_id, int64_t now_ms,
                            int64_t (*hw)(void *ctx, const char *topic, int32_t partition), void *ctx)
{
    struct gr_group *grp = c ? gr_coord_group_find(c, gr_str_c(grp_id)) : NULL;
    struct status_walk w = {now_ms, hw, ctx, GR_STATUS_NOTFOUND};
    if (grp) gr_coord_status_foreach(grp, status_one, &w);
    return (int)w.status;
}

struct render_walk {
    struct gr_metrics_status *s;
    struct gr_prom_buf *out;
    const char *group;
    const char *last_topic; /* offsets come topic by topic: one series per topic */
    int committed;
};

static void count_one(void *ctx, const char *topic, int32_t partition, int64_t committed,
                      const struct gr_commit_window *win)
{
    (void)topic, (void)partition, (void)committed, (void)win;
    (*(int *)ctx)++;
}

static void lost_series(void *ctx, const char *topic, int32_t partition, int64_t committed,
                        const struct gr_commit_window *win)
{
    (void)partition, (void)committed, (void)win;
    struct render_walk *w = ctx;
    if (w->last_topic && !strcmp(w->last_topic, topic)) return;
    w->last_topic = topic;
    struct gr_lost_entry *e = find(w->s, w->group, topic);
    if (e) e->seen = true;
    struct gr_prom_label l[2] = {{"consumergroup", w->group}, {"topic", topic}};
    gr_prom_sample_u64(w->out, "gregor_consumergroup_records_lost_total", l, 2, e ? e->count : 0);
}

bool gr_metrics_status_render(struct gr_broker *b, struct gr_prom_buf *out)
{
    struct gr_metrics_status *s = &b->metrics.status;
    const char *st = "gregor_consumergroup_status";
    gr_prom_type(out, st, "gauge");
    int64_t now = gr_time_wall_ms();
    int32_t ng = b->coord ? gr_coord_group_count(b->coord) : 0;
    for (int32_t g = 0; g < ng; g++) {
        struct gr_group *grp = gr_coord_group_at(b->coord, g);
        int committed = 0;
        gr_coord_status_foreach(grp, count_one, &committed);
        if (!committed) continue; /* Burrow reports groups that commit offsets */
        struct gr_prom_label l = {"consumergroup", gr_group_id(grp)};
        gr_prom_sample(out, st, &l, 1,
                       gr_metrics_status_group(b->coord, gr_group_id(grp), now, gr_metrics_status_hw, b));
    }
    /* one series per (group, topic) with a committed offset, 0 until records are lost, so that increase()
       sees the first loss */
    gr_prom_type(out, "gregor_consumergroup_records_lost_total", "counter");
    for (size_t i = 0; i < s->count; i++)
        s->lost[i].seen = false;
    for (int32_t g = 0; g < ng; g++) {
        struct gr_group *grp = gr_coord_group_at(b->coord, g);
        struct render_walk w = {s, out, gr_group_id(grp), NULL, 0};
        gr_coord_status_foreach(grp, lost_series, &w);
    }
    /* counts no longer shown (group or its offsets of the topic gone) go: their series ended */
    for (size_t i = 0; b->coord && i < s->count;) {
        if (!s->lost[i].seen) {
            free(s->lost[i].group);
            free(s->lost[i].topic);
            s->lost[i] = s->lost[--s->count];
        } else {
            i++;
        }
    }
    return !out->failed;
}

void gr_metrics_status_remote_moved(void *ctx, const char *topic, int32_t partition, int64_t old_start,
                                    int64_t new_start)
{
    struct gr_broker *b = ctx;
    if (b->coord)
        gr_metrics_status_count_lost(&b->metrics.status, b->coord, topic, partition, old_start, new_start);
}
