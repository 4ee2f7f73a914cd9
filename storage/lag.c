/*
 * lag.c: the append history and the lag formulas (storage/lag.h). The formulas are pure (plain arrays in,
 * numbers out); gr_log_lag feeds them from a log's memory.
 */
#include "storage/lag.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "storage/internal.h"

void gr_lag_ring_init(struct gr_lag_ring *r, int64_t now_ms)
{
    memset(r, 0, sizeof *r);
    r->since_ms = now_ms;
    r->last_live_ms = INT64_MIN;
}

void gr_lag_ring_free(struct gr_lag_ring *r)
{
    free(r->s);
    r->s = NULL;
    r->count = r->cap = 0;
}

static bool ring_room(struct gr_lag_ring *r)
{
    if (r->count < r->cap) return true;
    if (r->cap >= GR_LAG_SAMPLES_MAX) return false;
    int32_t cap = r->cap ? r->cap * 2 : 8;
    if (cap > GR_LAG_SAMPLES_MAX) cap = GR_LAG_SAMPLES_MAX;
    struct gr_lag_sample *s = realloc(r->s, sizeof *s * (size_t)cap);
    if (!s) return false;
    r->s = s;
    r->cap = cap;
    return true;
}

/* A full list: every other sample of the older half goes (index 0 stays), the newer half is kept whole. */
static void ring_thin(struct gr_lag_ring *r)
{
    int32_t half = r->count / 2, w = 1;
    for (int32_t i = 2; i < half; i += 2)
        r->s[w++] = r->s[i];
    memmove(&r->s[w], &r->s[half], sizeof *r->s * (size_t)(r->count - half));
    r->count = w + (r->count - half);
}

/* Adds `smp` after the last sample (thinning a full list first). False when not added: its offset is not
   above the last one's, or out of memory (history is best effort). */
static bool ring_push(struct gr_lag_ring *r, const struct gr_lag_sample *smp)
{
    if (r->count && smp->offset <= r->s[r->count - 1].offset) return false; /* offsets only go up */
    if (!ring_room(r)) {
        if (r->count < GR_LAG_SAMPLES_MAX) return false;
        ring_thin(r);
    }
    r->s[r->count++] = *smp;
    return true;
}

void gr_lag_ring_rebuilt(struct gr_lag_ring *r, int64_t offset, int64_t time_ms, int64_t appended)
{
    struct gr_lag_sample smp = {.offset = offset, .time_ms = time_ms, .appended = appended, .rebuilt = true};
    ring_push(r, &smp);
}

void gr_lag_ring_append(struct gr_lag_ring *r, int64_t offset, int32_t pos, int64_t len, int64_t now_ms,
                        int64_t log_start)
{
    int32_t drop = 0;
    while (drop + 1 < r->count && r->s[drop + 1].offset <= log_start)
        drop++;
    if (drop) {
        memmove(r->s, r->s + drop, sizeof *r->s * (size_t)(r->count - drop));
        r->count -= drop;
    }
    if (r->last_live_ms == INT64_MIN || now_ms - r->last_live_ms >= GR_LAG_SAMPLE_MS ||
        now_ms < r->last_live_ms) {
        struct gr_lag_sample smp = {.offset = offset, .time_ms = now_ms, .appended = r->appended, .pos = pos};
        if (ring_push(r, &smp)) r->last_live_ms = now_ms;
    }
    r->appended += len;
}

void gr_lag_ring_truncate(struct gr_lag_ring *r, int64_t end_offset)
{
    while (r->count && r->s[r->count - 1].offset >= end_offset)
        r->count--;
}

const struct gr_lag_sample *gr_lag_ring_find(const struct gr_lag_ring *r, int64_t offset)
{
    if (!r || !r->count || r->s[0].offset > offset) return NULL;
    int32_t lo = 0, hi = r->count - 1; /* s[lo].offset <= offset */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (r->s[mid].offset <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    return &r->s[lo];
}

double gr_lag_rate(const struct gr_lag_ring *r, int64_t now_ms)
{
    int64_t w = now_ms - r->since_ms;
    if (w > GR_LAG_RATE_WINDOW_MS) w = GR_LAG_RATE_WINDOW_MS;
    if (w <= 0) return 0;
    int64_t from = now_ms - w;
    /* The first live sample in the window, by binary search (a scrape asks once per committed offset):
       rebuilt samples are a prefix (made at open, below every append), live ones are in append order, so
       their times ascend (a clock stepped back breaks that for a while: the answer is then approximate). */
    int32_t lo = 0, hi = r->count;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (r->s[mid].rebuilt)
            lo = mid + 1;
        else
            hi = mid;
    }
    hi = r->count;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (r->s[mid].time_ms < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == r->count || r->s[lo].time_ms > now_ms) return 0;
    return (double)(r->appended - r->s[lo].appended) * 1000.0 / (double)w;
}

/* Index of the segment holding `offset`: the last with base <= offset (0 when below all). */
static int seg_for(const struct gr_lag_seg *segs, int n, int64_t offset)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (segs[mid].base_offset <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

int64_t gr_lag_bytes(const struct gr_lag_seg *segs, int n, int64_t log_start, int64_t log_end, int64_t c,
                     const struct gr_lag_ring *r, int32_t index_pos)
{
    if (n < 1 || c >= log_end) return 0;
    if (c < log_start) c = log_start;
    int k = seg_for(segs, n, c);
    int64_t pos = index_pos > 0 && index_pos < segs[k].size_bytes ? index_pos : 0;
    const struct gr_lag_sample *s = gr_lag_ring_find(r, c);
    /* A sample counts when its batch lies in c's segment (offset at or past the segment's base) and its
       position is inside the segment (a compaction may have rewritten it). */
    if (s && !s->rebuilt && s->offset >= segs[k].base_offset && s->pos > pos && s->pos < segs[k].size_bytes)
        pos = s->pos;
    int64_t bytes = segs[k].size_bytes - pos;
    for (int i = k + 1; i < n; i++)
        bytes += segs[i].size_bytes;
    return bytes;
}

int64_t gr_lag_caught_up(int64_t data_end, int64_t hw)
{
    return data_end <= hw ? data_end : hw;
}

double gr_lag_seconds(const struct gr_lag_ring *r, int64_t log_start, int64_t caught_up, int64_t c,
                      int64_t now_ms)
{
    if (c >= caught_up) return 0;
    if (c < log_start) c = log_start;
    const struct gr_lag_sample *s = gr_lag_ring_find(r, c);
    if (!s) return -1;
    return s->time_ms < now_ms ? (double)(now_ms - s->time_ms) / 1000.0 : 0;
}

static double dmin(double a, double b)
{
    return a < b ? a : b;
}
static double dmax0(double a)
{
    return a > 0 ? a : 0;
}

double gr_lag_headroom_seconds(const struct gr_lag_seg *segs, int n, int64_t log_start, int64_t c,
                               double rate, int64_t now_ms, const struct gr_lag_cfg *cfg)
{
    if (!cfg->delete_policy) return INFINITY;
    if (c < log_start) return 0;
    if (n < 1) return INFINITY;
    int k = seg_for(segs, n, c);
    const struct gr_lag_seg *sn = &segs[n - 1];
    double by_bytes = rate > 0 ? (double)(cfg->segment_bytes - sn->size_bytes) / rate : INFINITY;
    double by_time = (double)(sn->first_timestamp_ms + cfg->segment_ms - now_ms) / 1000.0;
    double t_roll = dmax0(dmin(by_bytes, by_time));
    double t_time, t_size;
    if (cfg->retention_ms < 0)
        t_time = INFINITY;
    else if (k < n - 1)
        t_time = dmax0((double)(segs[k].max_timestamp_ms + cfg->retention_ms - now_ms) / 1000.0);
    else
        t_time = dmin(t_roll + (double)cfg->retention_ms / 1000.0,
                      dmax0((double)(sn->max_timestamp_ms + cfg->retention_ms - now_ms) / 1000.0));
    if (cfg->retention_bytes < 0 || rate <= 0)
        t_size = INFINITY;
    else if (k < n - 1) {
        int64_t after = 0;
        for (int i = k + 1; i < n; i++)
            after += segs[i].size_bytes;
        t_size = dmax0((double)(cfg->retention_bytes - after) / rate);
    } else
        t_size = t_roll + (double)cfg->retention_bytes / rate;
    return dmin(t_time, t_size);
}

/* The largest in-memory offset-index position of segment `seg` whose batch's last offset is below `c`: that
   batch starts at or before c's batch. 0 when none or the index is not loaded (sealed, evicted). */
static int32_t index_pos_below(const struct gr_segment *seg, int64_t c)
{
    if (!seg->index_loaded || !seg->idx_count) return 0;
    int32_t lo = 0, hi = seg->idx_count - 1, best = -1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (seg->base_offset + seg->idx[mid].rel_offset < c) {
            best = mid;
            lo = mid + 1;
        } else
            hi = mid - 1;
    }
    return best < 0 ? 0 : seg->idx[best].position;
}

int gr_log_lag(const struct gr_log *log, int64_t c, int64_t now_ms, struct gr_log_lag *out)
{
    if (log->deleted || atomic_load(&((struct gr_log *)log)->offline) || log->seg_count < 1) return -EROFS;
    struct gr_lag_seg stack[32], *segs = stack;
    int n = log->seg_count;
    if (n > (int)(sizeof stack / sizeof stack[0]) && !(segs = malloc(sizeof *segs * (size_t)n)))
        return -ENOMEM;
    for (int i = 0; i < n; i++) {
        const struct gr_segment *s = log->segs[i];
        segs[i].base_offset = s->base_offset;
        segs[i].size_bytes = s->size_bytes;
        segs[i].max_timestamp_ms = s->max_timestamp_ms >= 0 ? s->max_timestamp_ms : s->modified_ms;
        segs[i].first_timestamp_ms = s->rolling_timestamp_ms >= 0 ? s->rolling_timestamp_ms : s->created_ms;
    }
    const struct gr_log_config *lc = &log->topic->cfg;
    struct gr_lag_cfg cfg = {lc->segment_bytes, lc->segment_ms, lc->retention_ms, lc->retention_bytes,
                             lc->delete_policy};
    int64_t ls = log->log_start_offset, le = log->log_end_offset;
    int64_t hw = log->high_watermark >= 0 && log->high_watermark <= le ? log->high_watermark : le;
    int64_t at = c < ls ? ls : c;
    int32_t ipos = index_pos_below(log->segs[seg_for(segs, n, at)], at);
    out->rate = gr_lag_rate(&log->lag, now_ms);
    int64_t caught = gr_lag_caught_up(log->data_end_offset, hw);
    out->bytes = c >= caught ? 0 : gr_lag_bytes(segs, n, ls, le, c, &log->lag, ipos);
    out->seconds = gr_lag_seconds(&log->lag, ls, caught, c, now_ms);
    out->headroom_records = c - ls;
    out->headroom_seconds = gr_lag_headroom_seconds(segs, n, ls, c, out->rate, now_ms, &cfg);
    if (segs != stack) free(segs);
    return 0;
}
