/*
 * metrics_groups.c: consumer-group lag in records, kafka_exporter's names and /v1/groups/<group>/lag
 * (server/metrics_groups.h).
 */
#include "server/metrics_groups.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "server/metrics_remote.h"
#include "server/metrics_cap.h"
#include "storage/lag.h"
#include "storage/log.h"
#include "storage/store.h"

int64_t gr_group_lag_kafka(int64_t committed, int64_t hw)
{
    return committed < 0 ? -1 : hw - committed;
}

int64_t gr_group_lag_records(int64_t committed, int64_t hw, int64_t log_start, int64_t caught_up)
{
    if (committed >= caught_up) return 0;
    int64_t from = committed > log_start ? committed : log_start;
    return hw > from ? hw - from : 0;
}

/* A committed offset as gr_coord_offsets_foreach gives it. */
struct commit {
    const struct gr_image_topic *it;
    int32_t partition;
    int64_t offset;
};

struct commits {
    struct gr_broker *b;
    struct commit *v;
    int32_t n, cap;
    bool failed;
};

static void add_commit(void *ctx, const char *topic, int32_t partition, int64_t offset, int32_t leader_epoch,
                       struct gr_str metadata)
{
    (void)leader_epoch;
    (void)metadata;
    struct commits *cs = ctx;
    const struct gr_image_topic *it = gr_image_topic_find(cs->b->image, topic, strlen(topic));
    if (cs->failed || !it || partition < 0 || partition >= it->partition_count)
        return; /* not a partition now */
    if (cs->n == cs->cap) {
        int32_t cap = cs->cap ? cs->cap * 2 : 16;
        struct commit *v = realloc(cs->v, (size_t)cap * sizeof *v);
        if (!v) {
            cs->failed = true;
            return;
        }
        cs->v = v;
        cs->cap = cap;
    }
    cs->v[cs->n++] = (struct commit){it, partition, offset};
}

static int by_topic_partition(const void *a, const void *b)
{
    const struct commit *x = a, *y = b;
    int c = strcmp(x->it->name, y->it->name);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* The high watermark and log start of partition `p` of `it` when this broker leads it and can read it: the
   local case of server/route.h gr_route_partition, read from the image here (route.c's callees reach the
   request path, which calls metrics.c: calling it from the scrape would make a file call cycle). */
static void fill_local(struct gr_broker *b, const struct gr_image_topic *it, struct gr_group_lag_part *p)
{
    p->known = false;
    p->high_watermark = p->log_start = p->caught_up = -1;
    const struct gr_part_summary *sum; /* led by another broker: its leader's summary (metrics_remote.h) */
    if (gr_metrics_remote_elsewhere(b, it->name, p->partition, &sum)) {
        if (sum) {
            p->known = true;
            p->high_watermark = sum->high_watermark;
            p->log_start = sum->log_start_offset;
            p->caught_up = gr_part_summary_caught_up(sum);
        }
        return;
    }
    const struct gr_image_partition *ip = gr_image_partition(it, p->partition);
    if (!ip || ip->leader != b->image->node_id || b->image->self_fenced || !it->local) return;
    struct gr_log *log = gr_topic_log(it->local, p->partition);
    struct gr_partition *part = log && !gr_log_offline(log) ? gr_partition_get(b->parts, log) : NULL;
    if (!part) return; /* not made here yet, offline, or out of memory for its state: not known */
    p->known = true;
    p->high_watermark = gr_partition_visible_offset(part);
    p->log_start = gr_log_start_offset(log);
    p->caught_up = gr_lag_caught_up(gr_log_data_end_offset(log), p->high_watermark);
}

/* A malloc'd copy of `s` with every byte not in a valid UTF-8 sequence replaced by U+FFFD; NULL when `s` is
   valid (nothing to copy) or out of memory (*oom set). */
static char *utf8_fixed(const char *s, bool *oom)
{
    size_t bad = 0, len = strlen(s);
    for (size_t i = 0; i < len;) {
        int n = gr_prom_utf8_len(s + i);
        bad += !n;
        i += n ? (size_t)n : 1;
    }
    if (!bad) return NULL;
    char *out = malloc(len + bad * 2 + 1), *o = out;
    if (!(*oom = !out))
        for (size_t i = 0; i < len;) {
            int n = gr_prom_utf8_len(s + i);
            memcpy(o, n ? s + i : "\xef\xbf\xbd", n ? (size_t)n : 3);
            o += n ? n : 3;
            i += n ? (size_t)n : 1;
        }
    if (out) *o = 0;
    return out;
}

int gr_group_lag_collect(struct gr_broker *b, struct gr_group *grp, struct gr_group_lag *out)
{
    memset(out, 0, sizeof *out);
    bool oom = false;
    out->group_utf8 = utf8_fixed(gr_group_id(grp), &oom);
    if (oom) return -ENOMEM;
    out->group = out->group_utf8 ? out->group_utf8 : gr_group_id(grp);
    out->state = gr_group_state_name(gr_group_state(grp));
    out->members = gr_group_member_count(grp);
    struct commits cs = {.b = b};
    gr_coord_offsets_foreach(b->coord, gr_str_c(gr_group_id(grp)), add_commit, &cs);
    if (cs.failed) {
        free(cs.v);
        gr_group_lag_free(out);
        return -ENOMEM;
    }
    if (cs.n > 1) qsort(cs.v, (size_t)cs.n, sizeof *cs.v, by_topic_partition);
    int64_t rows = 0; /* every partition of each topic with a commit */
    for (int32_t i = 0; i < cs.n; i++)
        if (!i || cs.v[i].it != cs.v[i - 1].it) rows += cs.v[i].it->partition_count;
    if (rows && !(out->parts = calloc((size_t)rows, sizeof *out->parts))) {
        free(cs.v);
        gr_group_lag_free(out);
        return -ENOMEM;
    }
    for (int32_t i = 0; i < cs.n;) {
        const struct gr_image_topic *it = cs.v[i].it;
        for (int32_t p = 0; p < it->partition_count; p++) {
            struct gr_group_lag_part *row = &out->parts[out->count++];
            row->topic = it->name;
            row->partition = p;
            row->committed = -1;
            if (i < cs.n && cs.v[i].it == it && cs.v[i].partition == p) row->committed = cs.v[i++].offset;
            fill_local(b, it, row);
        }
        while (i < cs.n && cs.v[i].it == it) /* none left: each (topic, partition) is committed once */
            i++;
    }
    free(cs.v);
    return 0;
}

void gr_group_lag_free(struct gr_group_lag *gl)
{
    free(gl->parts);
    free(gl->group_utf8);
    memset(gl, 0, sizeof *gl);
}

/* Label value of a partition index. */
static const char *pstr(char *buf, size_t cap, int32_t partition)
{
    snprintf(buf, cap, "%" PRId32, partition);
    return buf;
}

enum family { CURRENT_OFFSET, CURRENT_OFFSET_SUM, LAG, LAG_SUM, MEMBERS, LAG_RECORDS, FAMILIES };

static const char *const family_names[FAMILIES] = {
    [CURRENT_OFFSET] = "kafka_consumergroup_current_offset",
    [CURRENT_OFFSET_SUM] = "kafka_consumergroup_current_offset_sum",
    [LAG] = "kafka_consumergroup_lag",
    [LAG_SUM] = "kafka_consumergroup_lag_sum",
    [MEMBERS] = "kafka_consumergroup_members",
    [LAG_RECORDS] = "gregor_consumergroup_lag_records",
};

/* The per-topic sums of one topic's rows [from, to) (kafka_exporter's currentOffsetSum and lagSum);
 *lag_known false when a committed row's high watermark is not known here (the sum would be partial). */
static void topic_sums(const struct gr_group_lag_part *rows, int32_t from, int32_t to, int64_t *offset_sum,
                       int64_t *lag_sum, bool *lag_known)
{
    *offset_sum = *lag_sum = 0;
    *lag_known = true;
    for (int32_t i = from; i < to; i++) {
        *offset_sum += rows[i].committed; /* the -1 of a partition without a commit too, as kafka_exporter */
        if (rows[i].committed < 0) continue;
        if (!rows[i].known)
            *lag_known = false;
        else
            *lag_sum += gr_group_lag_kafka(rows[i].committed, rows[i].high_watermark);
    }
}

/* Writes family `f`'s samples of group `g` from row *row on (0: its first), each per-partition sample asked
   of `cap` first; stops after the sample or topic run that brings out->len to `budget`, with *row the next
   row. Returns true when the group's family is done. */
static bool render_group(enum family f, const struct gr_group_lag *g, struct gr_metrics_cap *cap,
                         int32_t *row, size_t budget, struct gr_prom_buf *out)
{
    const char *name = family_names[f];
    if (f == MEMBERS) {
        struct gr_prom_label l = {"consumergroup", g->group};
        gr_prom_sample(out, name, &l, 1, (double)g->members);
        return true;
    }
    for (int32_t i = *row; i < g->count;) {
        if (out->len >= budget && i > *row) { /* a slice's worth written: go on from here next time */
            *row = i;
            return false;
        }
        int32_t end = i; /* the rows of one topic: [i, end) */
        while (end < g->count && !strcmp(g->parts[end].topic, g->parts[i].topic))
            end++;
        if (f == CURRENT_OFFSET_SUM || f == LAG_SUM) {
            int64_t osum, lsum;
            bool lag_known;
            /* aggregates: over every row of the topic, rows the cap leaves out included */
            topic_sums(g->parts, i, end, &osum, &lsum, &lag_known);
            struct gr_prom_label l[2] = {{"consumergroup", g->group}, {"topic", g->parts[i].topic}};
            if (f == CURRENT_OFFSET_SUM) gr_prom_sample(out, name, l, 2, (double)osum);
            if (f == LAG_SUM && lag_known) gr_prom_sample(out, name, l, 2, (double)lsum);
            i = end;
            continue;
        }
        const struct gr_group_lag_part *p = &g->parts[i++];
        bool emit = f == CURRENT_OFFSET || (f == LAG && (p->committed < 0 || p->known)) || /* no commit: -1 */
                    (f == LAG_RECORDS && p->committed >= 0 && p->known);
        if (!emit || !gr_metrics_cap_keep(cap, g->group, p->topic, p->partition)) continue;
        char ps[16];
        struct gr_prom_label l[3] = {{"consumergroup", g->group},
                                     {"topic", p->topic},
                                     {"partition", pstr(ps, sizeof ps, p->partition)}};
        double v = f == CURRENT_OFFSET ? (double)p->committed
                   : f == LAG          ? (double)gr_group_lag_kafka(p->committed, p->high_watermark)
                              : (double)gr_group_lag_records(p->committed, p->high_watermark, p->log_start,
                                                             p->caught_up);
        gr_prom_sample(out, name, l, 3, v);
    }
    *row = 0;
    return true;
}

bool gr_metrics_groups_write_slice(const struct gr_group_lag *groups, int n, struct gr_metrics_cap *cap,
                                   struct gr_metrics_groups_cursor *cur, size_t budget,
                                   struct gr_prom_buf *out)
{
    for (; cur->family < FAMILIES; cur->family++, cur->group = 0, cur->typed = false) {
        int f = cur->family;
        /* kafka_exporter types its two _sum families gauge; promtool's linter refuses a gauge named *_sum (a
           summary's reserved suffix) and leaves untyped families alone: the names stay, the type is untyped
         */
        if (!cur->typed)
            gr_prom_type(out, family_names[f], f == CURRENT_OFFSET_SUM || f == LAG_SUM ? "untyped" : "gauge");
        cur->typed = true;
        for (; cur->group < n; cur->group++) {
            if (out->failed) return false;
            if (out->len >= budget) return false; /* the rest next time, from this group */
            if (!render_group((enum family)f, &groups[cur->group], cap, &cur->row, budget, out)) return false;
        }
    }
    return !out->failed;
}

bool gr_metrics_groups_render_lags(const struct gr_group_lag *groups, int n, struct gr_prom_buf *out)
{
    struct gr_metrics_groups_cursor cur = {0};
    return gr_metrics_groups_write_slice(groups, n, NULL, &cur, SIZE_MAX, out);
}

static int by_group_id(const void *a, const void *b)
{
    return strcmp(((const struct gr_group_lag *)a)->group, ((const struct gr_group_lag *)b)->group);
}

/* Whether this broker's coordinator serves `grp` now: its partition loaded here, the group not Dead. */
static bool served_here(struct gr_coordinator *c, struct gr_group *grp)
{
    return gr_group_state(grp) != GR_GROUP_DEAD &&
           gr_coord_check(c, gr_str_c(gr_group_id(grp))) == GR_ERR_NONE;
}

int gr_metrics_groups_snapshot(struct gr_broker *b, struct gr_group_lag **groups, int *count)
{
    *groups = NULL;
    *count = 0;
    int32_t total = b->coord && b->parts && b->image ? gr_coord_group_count(b->coord) : 0;
    struct gr_group_lag *gs = total > 0 ? calloc((size_t)total, sizeof *gs) : NULL;
    if (total > 0 && !gs) return -ENOMEM;
    int n = 0;
    bool ok = true;
    for (int32_t i = 0; i < total && ok; i++) {
        struct gr_group *grp = gr_coord_group_at(b->coord, i);
        if (grp && served_here(b->coord, grp)) ok = gr_group_lag_collect(b, grp, &gs[n++]) == 0;
    }
    if (!ok) {
        gr_metrics_groups_snapshot_free(gs, n);
        return -ENOMEM;
    }
    if (n > 1) qsort(gs, (size_t)n, sizeof *gs, by_group_id);
    *groups = gs;
    *count = n;
    return 0;
}

void gr_metrics_groups_snapshot_free(struct gr_group_lag *groups, int n)
{
    for (int i = 0; i < n; i++)
        gr_group_lag_free(&groups[i]);
    free(groups);
}

/* ---- /v1/groups/<group>/lag ---- */

json_t *gr_group_lag_part_json(const struct gr_group_lag_part *p)
{
    json_t *o = json_object();
    if (!o) return NULL;
    bool ok = !json_object_set_new(o, "topic", json_string(p->topic)) &&
              !json_object_set_new(o, "partition", json_integer(p->partition)) &&
              !json_object_set_new(o, "committed_offset", json_integer(p->committed));
    if (p->known && p->committed >= 0)
        ok = ok && !json_object_set_new(o, "high_watermark", json_integer(p->high_watermark)) &&
             !json_object_set_new(o, "log_start_offset", json_integer(p->log_start)) &&
             !json_object_set_new(o, "lag_records",
                                  json_integer(gr_group_lag_records(p->committed, p->high_watermark,
                                                                    p->log_start, p->caught_up)));
    else /* led by another broker that did not answer in time: not known here */
        ok = ok && !json_object_set_new(o, "high_watermark", json_null()) &&
             !json_object_set_new(o, "log_start_offset", json_null()) &&
             !json_object_set_new(o, "lag_records", json_null());
    bool t = p->time_known;
    ok = ok && !json_object_set_new(o, "lag_bytes", t ? json_integer(p->lag_bytes) : json_null()) &&
         !json_object_set_new(o, "lag_seconds",
                              t && p->lag_seconds >= 0 ? json_real(p->lag_seconds) : json_null()) &&
         !json_object_set_new(o, "retention_headroom_records",
                              t ? json_integer(p->headroom_records) : json_null()) &&
         !json_object_set_new(o, "retention_headroom_seconds",
                              !t                           ? json_null()
                              : isinf(p->headroom_seconds) ? json_string("+Inf") /* JSON has no infinity */
                                                           : json_real(p->headroom_seconds));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *gr_group_lag_json(const struct gr_group_lag *gl)
{
    json_t *o = json_object(), *parts = json_array();
    bool ok = o && parts && !json_object_set_new(o, "group", json_string(gl->group)) &&
              !json_object_set_new(o, "state", json_string(gl->state)) &&
              !json_object_set_new(o, "members", json_integer(gl->members));
    for (int32_t i = 0; ok && i < gl->count; i++)
        if (gl->parts[i].committed >= 0)
            ok = !json_array_append_new(parts, gr_group_lag_part_json(&gl->parts[i]));
    if (ok && !json_object_set_new(o, "partitions", parts)) return o;
    if (!ok) json_decref(parts);
    json_decref(o);
    return NULL;
}

/* A malloc'd {"error": msg, "group": group} text (group NULL: left out); NULL out of memory. */
static char *error_json(const char *msg, const char *group)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    if (o && group) json_object_set_new(o, "group", json_string(group)); /* not UTF-8: left out */
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

void gr_group_lag_fill_time(struct gr_broker *b, struct gr_group_lag *gl, int64_t now_ms)
{
    for (int32_t i = 0; i < gl->count; i++) {
        struct gr_group_lag_part *p = &gl->parts[i];
        p->time_known = false;
        if (!p->known || p->committed < 0 || !b->store) continue;
        const struct gr_part_summary *sum;
        if (gr_metrics_remote_elsewhere(b, p->topic, p->partition, &sum)) {
            const struct gr_log_lag *v = sum ? gr_part_summary_lag(sum, p->committed) : NULL;
            if (!v) continue; /* asked before this commit, or no answer: left out */
            p->time_known = true;
            p->lag_bytes = v->bytes;
            p->lag_seconds = v->seconds;
            p->headroom_records = v->headroom_records;
            p->headroom_seconds = v->headroom_seconds;
            continue;
        }
        struct gr_topic *t = gr_store_topic_find(b->store, p->topic, strlen(p->topic));
        struct gr_log *log =
            t && p->partition < gr_topic_partition_count(t) ? gr_topic_log(t, p->partition) : NULL;
        struct gr_log_lag v;
        if (!log || gr_log_lag(log, p->committed, now_ms, &v) < 0) continue;
        p->time_known = true;
        p->lag_bytes = v.bytes;
        p->lag_seconds = v.seconds;
        p->headroom_records = v.headroom_records;
        p->headroom_seconds = v.headroom_seconds;
    }
}

unsigned gr_metrics_groups_http(struct gr_broker *b, const char *url, char **body)
{
    static const char prefix[] = "/v1/groups/", suffix[] = "/lag";
    size_t pl = sizeof prefix - 1, sl = sizeof suffix - 1, len = strlen(url);
    if (len < pl + sl || strncmp(url, prefix, pl) || strcmp(url + len - sl, suffix)) return 0;
    size_t glen = len - pl - sl;
    *body = NULL;
    if (glen > GR_GROUP_LAG_ID_MAX) {
        char msg[96];
        snprintf(msg, sizeof msg, "group id longer than %d bytes", GR_GROUP_LAG_ID_MAX);
        return (*body = error_json(msg, NULL)) ? 400 : 500;
    }
    char id[GR_GROUP_LAG_ID_MAX + 1];
    memcpy(id, url + pl, glen);
    id[glen] = 0;
    struct gr_str gid = {id, (int32_t)glen};
    bool up = b->coord && b->parts && b->image; /* the coordinator runs only once these exist */
    int16_t own = up && glen ? gr_coord_check(b->coord, gid) : GR_ERR_NONE;
    struct gr_group *grp = up && glen && !own ? gr_coord_group_find(b->coord, gid) : NULL;
    unsigned status = 200;
    if (own == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS) {
        status = 503;
        *body = error_json("the group's coordinator partition is loading", id);
    } else if (own) {
        status = 404;
        *body = error_json("group not coordinated by this broker", id);
    } else if (!grp || gr_group_state(grp) == GR_GROUP_DEAD) {
        status = 404;
        *body = error_json("unknown group", id);
    } else {
        struct gr_group_lag gl;
        if (gr_group_lag_collect(b, grp, &gl)) return 500;
        gr_group_lag_fill_time(b, &gl, gr_time_wall_ms());
        json_t *o = gr_group_lag_json(&gl);
        /* 12 significant digits: seconds to the microsecond below 10^6 s, no binary tails
         * (17.425000000000001) */
        *body = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
        json_decref(o);
        gr_group_lag_free(&gl);
    }
    return *body ? status : 500;
}
