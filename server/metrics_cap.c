/*
 * metrics_cap.c: the per-partition series cap of /metrics (server/metrics_cap.h).
 */
#include "server/metrics_cap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct gr_metrics_cap_key {
    char *group, *topic; /* owned */
    int32_t partition;
};

static int cmp_i64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

static int cmp_key(const char *ga, const char *ta, int32_t pa, const char *gb, const char *tb, int32_t pb)
{
    int c = strcmp(ga, gb);
    if (!c) c = strcmp(ta, tb);
    return c ? c : cmp_i64(pa, pb);
}

int gr_metrics_cap_order(const struct gr_metrics_cap_row *a, const struct gr_metrics_cap_row *b)
{
    if (a->lag_known != b->lag_known) return a->lag_known ? -1 : 1;
    if (a->lag_known && a->lag != b->lag) return a->lag > b->lag ? -1 : 1;
    return cmp_key(a->group, a->topic, a->partition, b->group, b->topic, b->partition);
}

static int order_qsort(const void *a, const void *b)
{
    return gr_metrics_cap_order(a, b);
}

static int key_qsort(const void *a, const void *b)
{
    const struct gr_metrics_cap_key *x = a, *y = b;
    return cmp_key(x->group, x->topic, x->partition, y->group, y->topic, y->partition);
}

int gr_metrics_cap_select(struct gr_metrics_cap *c, struct gr_metrics_cap_row *rows, int64_t n, int64_t max)
{
    memset(c, 0, sizeof *c);
    c->rows = n;
    if (max < 0) max = 0;
    if (n <= max) return 0;
    qsort(rows, (size_t)n, sizeof *rows, order_qsort);
    if (max && !(c->keep = calloc((size_t)max, sizeof *c->keep))) return -ENOMEM;
    for (int64_t i = 0; i < max; i++) {
        struct gr_metrics_cap_key *k = &c->keep[i];
        k->group = strdup(rows[i].group);
        k->topic = strdup(rows[i].topic);
        k->partition = rows[i].partition;
        c->nkeep = i + 1;
        if (!k->group || !k->topic) {
            gr_metrics_cap_free(c);
            return -ENOMEM;
        }
    }
    if (max) qsort(c->keep, (size_t)max, sizeof *c->keep, key_qsort); /* max 0: keep is NULL */
    c->capped = true;
    return 0;
}

bool gr_metrics_cap_keep(struct gr_metrics_cap *c, const char *group, const char *topic, int32_t partition)
{
    if (!c || !c->capped) return true;
    int64_t lo = 0, hi = c->nkeep;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const struct gr_metrics_cap_key *k = &c->keep[mid];
        int r = cmp_key(group, topic, partition, k->group, k->topic, k->partition);
        if (!r) return true;
        if (r < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    c->dropped++;
    return false;
}

bool gr_metrics_cap_render(const struct gr_metrics_cap *c, struct gr_prom_buf *out)
{
    gr_prom_type(out, "gregor_metrics_series_dropped", "gauge");
    return gr_prom_sample_u64(out, "gregor_metrics_series_dropped", NULL, 0, c ? c->dropped : 0);
}

void gr_metrics_cap_free(struct gr_metrics_cap *c)
{
    for (int64_t i = 0; i < c->nkeep; i++) {
        free(c->keep[i].group);
        free(c->keep[i].topic);
    }
    free(c->keep);
    memset(c, 0, sizeof *c);
}
