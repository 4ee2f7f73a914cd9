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

bool gr_metrics_lagtime_write_slice(const struct gr_lagtime_row *rows, int n, struct gr_metrics_cap *cap,
                                    struct gr_metrics_lagtime_cursor *cur, size_t budget,
                                    struct gr_prom_buf *out)
{
    const char *fams[5] = {F_BYTES, F_SECONDS, F_HR_RECORDS, F_HR_SECONDS, F_MIN_HR};
    for (; cur->family < 5; cur->family++, cur->row = 0, cur->typed = false) {
        int f = cur->family;
        if (!cur->typed) gr_prom_type(out, fams[f], "gauge");
        cur->typed = true;
        while (cur->row < n) {
            if (out->failed) return false;
            if (out->len >= budget) return false; /* a slice's worth written: the rest next time */
            const struct gr_lagtime_row *r = &rows[cur->row];
            if (f ==
                4) { /* the group's least headroom over all its rows, those the cap leaves out included */
                double min = INFINITY;
                int j = cur->row;
                for (; j < n && !strcmp(rows[j].group, r->group); j++)
                    if (rows[j].partition >= 0 && rows[j].v.headroom_seconds < min)
                        min = rows[j].v.headroom_seconds;
                struct gr_prom_label l = {"consumergroup", r->group};
                gr_prom_sample(out, F_MIN_HR, &l, 1, min);
                cur->row = j;
                continue;
            }
            cur->row++;
            if (r->partition < 0 || (f == 1 && r->v.seconds < 0)) continue;
            if (!gr_metrics_cap_keep(cap, r->group, r->topic, r->partition)) continue;
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
    return !out->failed;
}

bool gr_metrics_lagtime_write(const struct gr_lagtime_row *rows, int n, struct gr_prom_buf *out)
{
    struct gr_metrics_lagtime_cursor cur = {0};
    return gr_metrics_lagtime_write_slice(rows, n, NULL, &cur, SIZE_MAX, out);
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

int gr_metrics_lagtime_collect(struct gr_broker *b, struct gr_lagtime_row **rows, int *count)
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
    if (c.nomem) { /* the strings are still borrowed */
        free(c.rows);
        return -1;
    }
    /* own the strings: the rows outlive this loop iteration when the page is written in slices */
    for (int i = 0; i < c.n && !c.nomem; i++) {
        char *g = strdup(c.rows[i].group), *t = c.rows[i].topic ? strdup(c.rows[i].topic) : NULL;
        c.rows[i].group = g;
        c.rows[i].topic = t;
        if (!g || (c.rows[i].partition >= 0 && !t)) c.nomem = true;
        if (c.nomem) c.n = i + 1; /* free what was copied so far */
    }
    if (c.nomem) {
        gr_metrics_lagtime_rows_free(c.rows, c.n);
        return -1;
    }
    *rows = c.rows;
    *count = c.n;
    return 0;
}

void gr_metrics_lagtime_rows_free(struct gr_lagtime_row *rows, int n)
{
    for (int i = 0; i < n; i++) {
        free((char *)rows[i].group);
        free((char *)rows[i].topic);
    }
    free(rows);
}
