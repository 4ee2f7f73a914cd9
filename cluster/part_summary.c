/*
 * part_summary.c: the coordinator's cache of leaders' partition summaries (cluster/part_summary.h).
 *
 * A sorted array of entries by (topic, partition): lookups are a binary search (a scrape looks up every
 * committed partition of every group), a leader's refresh is a rebuild (merge of the kept entries with the
 * new ones, sorted): at most once per second per leader.
 */
#include "cluster/part_summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition.h"
#include "protocol/gen/messages.h"
#include "storage/log.h"

struct entry {
    char *topic;
    int32_t partition;
    int32_t leader;
    int64_t answered_ms;
    struct gr_part_summary summary;
};

struct gr_part_summaries {
    struct entry *v;
    int32_t n, cap;
};

struct gr_part_summaries *gr_part_summaries_new(void)
{
    return calloc(1, sizeof(struct gr_part_summaries));
}

static void entry_free(struct entry *e)
{
    free(e->topic);
    free(e->summary.offsets);
}

void gr_part_summaries_clear(struct gr_part_summaries *s)
{
    for (int32_t i = 0; i < s->n; i++)
        entry_free(&s->v[i]);
    s->n = 0;
}

void gr_part_summaries_free(struct gr_part_summaries *s)
{
    if (!s) return;
    gr_part_summaries_clear(s);
    free(s->v);
    free(s);
}

static int cmp_key(const char *ta, int32_t pa, const char *tb, int32_t pb)
{
    int c = strcmp(ta, tb);
    return c ? c : (pa > pb) - (pa < pb);
}

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    return cmp_key(x->topic, x->partition, y->topic, y->partition);
}

/* Index of (topic, partition), -1 when absent. */
static int32_t find(const struct gr_part_summaries *s, const char *topic, int32_t partition)
{
    int32_t lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = cmp_key(s->v[mid].topic, s->v[mid].partition, topic, partition);
        if (!c) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Removes the entries for which drop() is true, keeping the order. Returns how many went. */
static int32_t remove_if(struct gr_part_summaries *s, bool (*drop)(const struct entry *, const void *),
                         const void *arg)
{
    int32_t w = 0, gone = 0;
    for (int32_t r = 0; r < s->n; r++) {
        if (drop(&s->v[r], arg)) {
            entry_free(&s->v[r]);
            gone++;
        } else
            s->v[w++] = s->v[r];
    }
    s->n = w;
    return gone;
}

static bool by_leader(const struct entry *e, const void *arg)
{
    return e->leader == *(const int32_t *)arg;
}

int32_t gr_part_summaries_drop_leader(struct gr_part_summaries *s, int32_t leader)
{
    return remove_if(s, by_leader, &leader);
}

/* The new answer's keys, sorted, to drop entries another leader gave for the same partitions. */
struct keys {
    const struct gr_part_summary_entry *e;
    int32_t n;
};

static int cmp_answer(const void *a, const void *b)
{
    const struct gr_part_summary_entry *x = a, *y = b;
    return cmp_key(x->topic, x->partition, y->topic, y->partition);
}

static bool in_answer(const struct entry *e, const void *arg)
{
    const struct keys *k = arg;
    struct gr_part_summary_entry key = {.topic = e->topic, .partition = e->partition};
    return bsearch(&key, k->e, (size_t)k->n, sizeof *k->e, cmp_answer) != NULL;
}

int gr_part_summaries_replace_leader(struct gr_part_summaries *s, int32_t leader,
                                     struct gr_part_summary_entry *entries, int32_t n, int64_t now_ms)
{
    gr_part_summaries_drop_leader(s, leader);
    if (n > 1) qsort(entries, (size_t)n, sizeof *entries, cmp_answer);
    struct keys k = {entries, n};
    if (n > 0 && s->n > 0) remove_if(s, in_answer, &k);
    int rc = 0;
    if (s->n + n > s->cap) {
        int32_t cap = s->cap ? s->cap : 64;
        while (cap < s->n + n)
            cap *= 2;
        struct entry *v = realloc(s->v, sizeof *v * (size_t)cap);
        if (!v)
            rc = -ENOMEM;
        else {
            s->v = v;
            s->cap = cap;
        }
    }
    int32_t first = s->n;
    for (int32_t i = 0; i < n; i++) {
        char *topic = rc ? NULL : strdup(entries[i].topic);
        if (!topic) {
            rc = -ENOMEM;
            free(entries[i].summary.offsets);
            entries[i].summary.offsets = NULL;
            continue;
        }
        s->v[s->n++] = (struct entry){topic, entries[i].partition, leader, now_ms, entries[i].summary};
        entries[i].summary.offsets = NULL; /* the cache's now */
    }
    if (rc) { /* all or nothing for this leader */
        for (int32_t i = first; i < s->n; i++)
            entry_free(&s->v[i]);
        s->n = first;
        return rc;
    }
    if (s->n > 1) qsort(s->v, (size_t)s->n, sizeof *s->v, cmp_entry);
    return 0;
}

const struct gr_part_summary *gr_part_summaries_find(const struct gr_part_summaries *s, const char *topic,
                                                     int32_t partition, int32_t *leader, int64_t *answered_ms)
{
    int32_t i = s ? find(s, topic, partition) : -1;
    if (i < 0) return NULL;
    if (leader) *leader = s->v[i].leader;
    if (answered_ms) *answered_ms = s->v[i].answered_ms;
    return &s->v[i].summary;
}

int32_t gr_part_summaries_count(const struct gr_part_summaries *s)
{
    return s ? s->n : 0;
}

int64_t gr_part_summary_caught_up(const struct gr_part_summary *sum)
{
    int64_t c = sum->caught_up_offset;
    return c >= 0 && c <= sum->high_watermark ? c : sum->high_watermark;
}

const struct gr_log_lag *gr_part_summary_lag(const struct gr_part_summary *sum, int64_t committed)
{
    int32_t lo = 0, hi = sum->offset_count - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int64_t c = sum->offsets[mid].committed;
        if (c == committed) return &sum->offsets[mid].lag;
        if (c < committed)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int gr_part_summary_local(struct gr_partition *part, const struct gr_log *log, const int64_t *committed,
                          int32_t n, int64_t now_ms, struct gr_part_summary *out)
{
    if (gr_log_offline(log)) return -EROFS;
    struct gr_part_summary_offset *o = out->offsets;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if (committed[i] >= 0) o[k++].committed = committed[i];
    /* sort the committed values in place (the first member of each entry), then keep distinct ones */
    int64_t *keys = malloc(sizeof *keys * (size_t)(k ? k : 1));
    if (!keys) return -ENOMEM;
    for (int32_t i = 0; i < k; i++)
        keys[i] = o[i].committed;
    if (k > 1) qsort(keys, (size_t)k, sizeof *keys, cmp_i64);
    int32_t d = 0;
    for (int32_t i = 0; i < k; i++)
        if (!d || keys[i] != o[d - 1].committed) o[d++].committed = keys[i];
    free(keys);
    out->high_watermark = gr_partition_visible_offset(part);
    out->last_stable_offset = gr_partition_last_stable_offset(part);
    out->log_start_offset = gr_log_start_offset(log);
    out->log_end_offset = gr_log_end_offset(log);
    out->caught_up_offset = gr_lag_caught_up(gr_log_data_end_offset(log), out->high_watermark);
    out->offset_count = d;
    struct gr_log_lag v;
    for (int32_t i = 0; i < d; i++) {
        int rc = gr_log_lag(log, o[i].committed, now_ms, &o[i].lag);
        if (rc < 0) return rc;
    }
    if (d)
        out->rate = o[0].lag.rate;
    else {
        int rc = gr_log_lag(log, out->log_end_offset, now_ms, &v); /* the rate alone */
        if (rc < 0) return rc;
        out->rate = v.rate;
    }
    return 0;
}

bool gr_part_summary_request_within_bounds(const struct gr_partition_summary_request *body)
{
    int64_t parts = 0;
    for (int32_t i = 0; i < body->topics.count; i++) {
        const struct gr_partition_summary_request_partition_summary_topic *t = &body->topics.items[i];
        if (t->name.len > GR_PART_SUMMARY_TOPIC_BYTES_MAX) return false;
        parts += t->partitions.count > 0 ? t->partitions.count : 0;
        if (parts > GR_PART_SUMMARY_PARTITIONS_MAX) return false;
        for (int32_t p = 0; p < t->partitions.count; p++)
            if (t->partitions.items[p].committed_offsets.count > GR_PART_SUMMARY_OFFSETS_MAX) return false;
    }
    return true;
}
