/*
 * metrics_page.c: the /metrics page in steps (server/metrics_page.h).
 */
#include "server/metrics_page.h"

#include <stdlib.h>
#include <string.h>

#include "server/broker.h"
#include "server/metrics.h"
#include "server/metrics_cap.h"
#include "server/metrics_cluster.h"
#include "server/metrics_counts.h"
#include "server/metrics_groups.h"
#include "server/metrics_help.h"
#include "server/metrics_lagtime.h"
#include "server/metrics_remote.h"
#include "server/metrics_status.h"
#include "server/request_metrics.h"
#include "cluster/fetcher.h"

struct gr_metrics_page {
    gr_metrics_step_fn step;
    void *ctx;
    void (*ctx_free)(void *ctx);
    size_t budget;
    struct gr_prom_buf buf; /* the last step's text */
    size_t off;             /* of it, handed out so far */
    bool done, failed;
};

struct gr_metrics_page *gr_metrics_page_new(gr_metrics_step_fn step, void *ctx, void (*ctx_free)(void *ctx),
                                            size_t budget)
{
    struct gr_metrics_page *p = calloc(1, sizeof *p);
    if (!p) {
        if (ctx_free) ctx_free(ctx);
        return NULL;
    }
    p->step = step;
    p->ctx = ctx;
    p->ctx_free = ctx_free;
    p->budget = budget;
    gr_prom_buf_init(&p->buf, 0);
    return p;
}

ssize_t gr_metrics_page_read(struct gr_metrics_page *p, char *out, size_t max)
{
    if (p->failed) return -1;
    if (p->off == p->buf.len) {
        if (p->done) return 0;
        p->buf.len = p->off = 0; /* the memory is kept for the next step */
        int rc = p->step(p->ctx, p->budget, &p->buf);
        if (rc < 0 || p->buf.failed) {
            p->failed = true;
            return -1;
        }
        p->done = rc == 0;
        if (!p->buf.len) return p->done ? 0 : gr_metrics_page_read(p, out, max); /* an empty step: the next */
    }
    size_t n = p->buf.len - p->off;
    if (n > max) n = max;
    memcpy(out, p->buf.data + p->off, n);
    p->off += n;
    return (ssize_t)n;
}

void gr_metrics_page_free(struct gr_metrics_page *p)
{
    if (!p) return;
    if (p->ctx_free) p->ctx_free(p->ctx);
    gr_prom_buf_free(&p->buf);
    free(p);
}

/* ---- the broker's page ---- */

enum section {
    S_HEAD,
    S_GROUPS,
    S_COUNTS,
    S_LAGTIME,
    S_CLUSTER,
    S_STATUS,
    S_REMOTE,
    S_DROPPED,
    S_REQTIME,
    S_TAIL,
    S_END
};

struct broker_page {
    struct gr_broker *b;
    enum section s;
    struct gr_group_lag *groups; /* snapshot at the page's start, strings owned (see own_strings) */
    int ngroups;
    char **topics; /* the copies of the rows' topic names, one per (group, topic) */
    size_t ntopics;
    struct gr_metrics_cap cap;
    struct gr_metrics_groups_cursor gcur;
    struct gr_lagtime_row *lag; /* taken when its section starts */
    int nlag;
    bool lag_taken;
    struct gr_metrics_lagtime_cursor lcur;
    struct gr_metrics_cluster_slice *cluster; /* the cluster families' sliced write, when under way */
    struct gr_metrics_log_slice *head;        /* the first section's, when under way */
};

static void broker_page_free(void *ctx)
{
    struct broker_page *bp = ctx;
    gr_metrics_groups_snapshot_free(bp->groups, bp->ngroups);
    for (size_t i = 0; i < bp->ntopics; i++)
        free(bp->topics[i]);
    free(bp->topics);
    gr_metrics_cap_free(&bp->cap);
    if (bp->lag_taken) gr_metrics_lagtime_rows_free(bp->lag, bp->nlag);
    gr_metrics_cluster_slice_free(bp->cluster);
    gr_metrics_log_slice_free(bp->head);
    free(bp);
}

/* Replaces the snapshot's borrowed strings (coordinator's group ids, image's topic names) by copies: the
   page is written over several loop iterations, in which a group or topic may go. 0 or -1 out of memory. */
static int own_strings(struct broker_page *bp)
{
    size_t runs = 0;
    for (int g = 0; g < bp->ngroups; g++)
        for (int32_t i = 0; i < bp->groups[g].count; i++)
            runs += !i || strcmp(bp->groups[g].parts[i].topic, bp->groups[g].parts[i - 1].topic);
    if (runs && !(bp->topics = calloc(runs, sizeof *bp->topics))) return -1;
    for (int g = 0; g < bp->ngroups; g++) {
        struct gr_group_lag *gl = &bp->groups[g];
        if (!gl->group_utf8) {
            if (!(gl->group_utf8 = strdup(gl->group))) return -1;
            gl->group = gl->group_utf8;
        }
        for (int32_t i = 0; i < gl->count; i++) {
            struct gr_group_lag_part *p = &gl->parts[i];
            if (i && !strcmp(p->topic, bp->topics[bp->ntopics - 1]) &&
                p[-1].topic == bp->topics[bp->ntopics - 1]) {
                p->topic = bp->topics[bp->ntopics - 1];
                continue;
            }
            if (!(bp->topics[bp->ntopics] = strdup(p->topic))) return -1;
            p->topic = bp->topics[bp->ntopics++];
        }
    }
    return 0;
}

/* The series cap's selection over the snapshot's rows (server/metrics_cap.h). 0 or -1 out of memory. */
static int select_rows(struct broker_page *bp)
{
    int64_t n = 0;
    for (int g = 0; g < bp->ngroups; g++)
        n += bp->groups[g].count;
    int64_t max = bp->b->cfg.settings.gregor_metrics_partition_series_max;
    if (n <= max) return gr_metrics_cap_select(&bp->cap, NULL, n, max); /* all kept: no rows to sort */
    struct gr_metrics_cap_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return -1;
    int64_t k = 0;
    for (int g = 0; g < bp->ngroups; g++)
        for (int32_t i = 0; i < bp->groups[g].count; i++) {
            const struct gr_group_lag_part *p = &bp->groups[g].parts[i];
            bool known = p->committed >= 0 && p->known;
            rows[k++] =
                (struct gr_metrics_cap_row){bp->groups[g].group, p->topic, p->partition, known,
                                            known ? gr_group_lag_kafka(p->committed, p->high_watermark) : 0};
        }
    int rc = gr_metrics_cap_select(&bp->cap, rows, n, max);
    free(rows);
    return rc;
}

static int broker_step(void *ctx, size_t budget, struct gr_prom_buf *out)
{
    struct broker_page *bp = ctx;
    struct gr_broker *b = bp->b;
    bool ok = true;
    switch (bp->s) {
    case S_HEAD: {
        int rc = gr_metrics_render_head_step(b, &bp->head, budget, out);
        if (rc == 0) bp->s = S_GROUPS;
        ok = rc >= 0;
        break;
    }
    case S_GROUPS:
        if (gr_metrics_groups_write_slice(bp->groups, bp->ngroups, &bp->cap, &bp->gcur, budget, out))
            bp->s = S_COUNTS;
        ok = !out->failed;
        break;
    case S_COUNTS:
        ok = gr_metrics_counts_render(&b->metrics.counts, b->fetcher ? gr_fetcher_stats(b->fetcher) : NULL,
                                      out);
        bp->s = S_LAGTIME;
        break;
    case S_LAGTIME:
        if (!bp->lag_taken) {
            if (gr_metrics_lagtime_collect(b, &bp->lag, &bp->nlag) < 0) return -1;
            bp->lag_taken = true;
        }
        if (gr_metrics_lagtime_write_slice(bp->lag, bp->nlag, &bp->cap, &bp->lcur, budget, out))
            bp->s = S_CLUSTER;
        ok = !out->failed;
        break;
    case S_CLUSTER: {
        int rc = gr_metrics_cluster_render_step(b, &bp->cluster, budget, out);
        if (rc == 0) bp->s = S_STATUS;
        ok = rc >= 0;
        break;
    }
    case S_STATUS:
        ok = gr_metrics_status_render(b, out);
        bp->s = S_REMOTE;
        break;
    case S_REMOTE: /* cluster mode: server/metrics_remote.h */
        ok = gr_metrics_remote_render(b, out);
        bp->s = S_DROPPED;
        break;
    case S_DROPPED: /* after every capped family: the count is complete */
        ok = gr_metrics_cap_render(&bp->cap, out);
        bp->s = S_REQTIME;
        break;
    case S_REQTIME:
        gr_reqtime_render(b, out);
        ok = !out->failed;
        bp->s = S_TAIL;
        break;
    case S_TAIL:
    case S_END:
        ok = gr_metrics_render_tail(b, out);
        bp->s = S_END;
        break;
    }
    if (!ok || out->failed || !gr_prom_add_help(out, gr_metrics_help)) return -1;
    return bp->s == S_END ? 0 : 1;
}

struct gr_metrics_page *gr_metrics_page_start(struct gr_broker *b)
{
    struct broker_page *bp = calloc(1, sizeof *bp);
    if (!bp) return NULL;
    bp->b = b;
    if (gr_metrics_groups_snapshot(b, &bp->groups, &bp->ngroups) < 0 || own_strings(bp) < 0 ||
        select_rows(bp) < 0) {
        broker_page_free(bp);
        return NULL;
    }
    return gr_metrics_page_new(broker_step, bp, broker_page_free, GR_METRICS_PAGE_BLOCK);
}

bool gr_metrics_render(struct gr_broker *b, struct gr_prom_buf *out)
{
    struct gr_metrics_page *p = gr_metrics_page_start(b);
    char block[4096];
    ssize_t n = p ? 1 : -1;
    while (n > 0 && (n = gr_metrics_page_read(p, block, sizeof block)) > 0)
        gr_prom_put(out, block, (size_t)n);
    gr_metrics_page_free(p);
    if (n < 0) out->failed = true;
    return !out->failed;
}
