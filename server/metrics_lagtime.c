/*
 * metrics_lagtime.c: lag in bytes and seconds and retention headroom per committed offset
 * (server/metrics_lagtime.h).
 */
#include "server/metrics_lagtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "coordinator/coordinator.h"
#include "server/broker.h"
#include "server/metrics_remote.h"
#include "cluster/image.h"
#include "storage/store.h"

static const char *const F_BYTES = "gregor_consumergroup_lag_bytes";
static const char *const F_SECONDS = "gregor_consumergroup_lag_seconds";
static const char *const F_HR_RECORDS = "gregor_consumergroup_retention_headroom_records";
static const char *const F_HR_SECONDS = "gregor_consumergroup_retention_headroom_seconds";
static const char *const F_MIN_HR = "gregor_consumergroup_min_retention_headroom_seconds";

bool gr_metrics_lagtime_write(const struct gr_lagtime_row *rows, int n, struct gr_prom_buf *out)
{
    const char *fams[4] = {F_BYTES, F_SECONDS, F_HR_RECORDS, F_HR_SECONDS};
    for (int f = 0; f < 4; f++) {
        gr_prom_type(out, fams[f], "gauge");
        for (int i = 0; i < n; i++) {
            const struct gr_lagtime_row *r = &rows[i];
            if (r->partition < 0 || (f == 1 && r->v.seconds < 0)) continue;
            char ps[16];
            snprintf(ps, sizeof ps, "%d", r->partition);
            struct gr_prom_label l[3] = {{"consumergroup", r->group}, {"topic", r->topic}, {"partition", ps}};
            double v = f == 0   ? (double)r->v.bytes
                       : f == 1 ? r->v.seconds
                       : f == 2 ? (double)r->v.headroom_records
                                : r->v.headroom_seconds;
            gr_prom_sample(out, fams[f], l, 3, v);
        }
    }
    gr_prom_type(out, F_MIN_HR, "gauge");
    for (int i = 0; i < n;) {
        double min = INFINITY;
        int j = i;
        for (; j < n && !strcmp(rows[j].group, rows[i].group); j++)
            if (rows[j].partition >= 0 && rows[j].v.headroom_seconds < min) min = rows[j].v.headroom_seconds;
        struct gr_prom_label l = {"consumergroup", rows[i].group};
        gr_prom_sample(out, F_MIN_HR, &l, 1, min);
        i = j;
    }
    return !out->failed;
}

struct collect {
    struct gr_broker *b;
    const char *group;
    int64_t now_ms;
    struct gr_lagtime_row *rows;
    int n, cap;
    bool any;   /* the group has a committed offset */
    bool nomem; /* a row could not be added */
};

static struct gr_lagtime_row *row_add(struct collect *c)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 64;
        struct gr_lagtime_row *r = realloc(c->rows, sizeof *r * (size_t)cap);
        if (!r) {
            c->nomem = true;
            return NULL;
        }
        c->rows = r;
        c->cap = cap;
    }
    struct gr_lagtime_row *r = &c->rows[c->n++];
    memset(r, 0, sizeof *r);
    r->group = c->group;
    return r;
}

static void on_offset(void *ctx, const char *topic, int32_t partition, int64_t offset, int32_t leader_epoch,
                      struct gr_str metadata)
{
    (void)leader_epoch;
    (void)metadata;
    struct collect *c = ctx;
    c->any = true;
    const struct gr_part_summary *sum; /* led by another broker: its leader's figures, never a follower's */
    if (gr_metrics_remote_elsewhere(c->b, topic, partition, &sum)) {
        const struct gr_log_lag *lv = sum ? gr_part_summary_lag(sum, offset) : NULL;
        struct gr_lagtime_row *r = lv ? row_add(c) : NULL;
        if (!r) return; /* no answer for this commit: left out */
        const struct gr_image_topic *it = gr_image_topic_find(c->b->image, topic, strlen(topic));
        r->topic = it->name; /* the image's copy: lives through the scrape */
        r->partition = partition;
        r->v = *lv;
        return;
    }
    struct gr_topic *t = gr_store_topic_find(c->b->store, topic, strlen(topic));
    struct gr_log *log =
        t && partition >= 0 && partition < gr_topic_partition_count(t) ? gr_topic_log(t, partition) : NULL;
    if (!log) return; /* not held here (a partition led elsewhere, or a deleted topic) */
    struct gr_log_lag v;
    if (gr_log_lag(log, offset, c->now_ms, &v) < 0) return; /* offline: nothing to say */
    struct gr_lagtime_row *r = row_add(c);
    if (!r) return;
    r->topic = gr_topic_name(t); /* the store's copy: lives through the scrape */
    r->partition = partition;
    r->v = v;
}

bool gr_metrics_lagtime_render(struct gr_broker *b, struct gr_prom_buf *out)
{
    struct collect c = {.b = b, .now_ms = gr_time_wall_ms()};
    int32_t ng = b->coord ? gr_coord_group_count(b->coord) : 0;
    for (int32_t g = 0; g < ng; g++) {
        struct gr_group *grp = gr_coord_group_at(b->coord, g);
        c.group = gr_group_id(grp);
        c.any = false;
        int before = c.n;
        gr_coord_offsets_foreach(b->coord, (struct gr_str){c.group, (int32_t)strlen(c.group)}, on_offset, &c);
        if (c.any && c.n == before) {
            struct gr_lagtime_row *r = row_add(&c); /* commits, none here: the min line still */
            if (r) r->partition = -1;
        }
    }
    bool ok = gr_metrics_lagtime_write(c.rows, c.n, out) && !c.nomem;
    free(c.rows);
    return ok;
}
