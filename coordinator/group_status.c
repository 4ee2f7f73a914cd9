/*
 * group_status.c: commit windows and Burrow's status rules (coordinator/group_status.h).
 */
#include "coordinator/group_status.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"

void gr_commit_window_add(struct gr_commit_window *w, int64_t offset, int64_t time_ms, int64_t lag)
{
    w->s[w->next] = (struct gr_commit_sample){offset, time_ms, lag < 0 ? -1 : lag};
    w->next = (w->next + 1) % GR_STATUS_WINDOW;
    if (w->count < GR_STATUS_WINDOW) w->count++;
}

int gr_commit_window_samples(const struct gr_commit_window *w, struct gr_commit_sample *out)
{
    int first = (w->next - w->count + GR_STATUS_WINDOW) % GR_STATUS_WINDOW;
    for (int i = 0; i < w->count; i++)
        out[i] = w->s[(first + i) % GR_STATUS_WINDOW];
    return w->count;
}

/* Rule 1: a lag of 0 anywhere in the window makes it fine (unknown lags are not 0). */
static bool lag_always_not_zero(const struct gr_commit_sample *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i].lag == 0) return false;
    return true;
}

/* Rule 2: an offset went down from one commit to the next. */
static bool offsets_rewind(const struct gr_commit_sample *s, int n)
{
    for (int i = 1; i < n; i++)
        if (s[i].offset < s[i - 1].offset) return true;
    return false;
}

/* Rule 3: the time since the last commit exceeds (strictly) the window's span. */
static bool offsets_stopped(const struct gr_commit_sample *s, int n, int64_t now_ms)
{
    return now_ms - s[n - 1].time_ms > s[n - 1].time_ms - s[0].time_ms;
}

/* Rule 4: every commit has the same offset. */
static bool offsets_stalled(const struct gr_commit_sample *s, int n)
{
    for (int i = 1; i < n; i++)
        if (s[i].offset != s[i - 1].offset) return false;
    return true;
}

/* Rule 5: no known lag is below the known lag before it. */
static bool lag_not_decreasing(const struct gr_commit_sample *s, int n)
{
    int64_t last = -1;
    for (int i = 0; i < n; i++) {
        if (s[i].lag < 0) continue;
        if (last >= 0 && s[i].lag < last) return false;
        last = s[i].lag;
    }
    return true;
}

/* A recent high watermark at or below the last committed offset: the lag was 0 recently. */
static bool recent_lag_zero(const struct gr_commit_sample *s, int n, const int64_t *hw, int nhw)
{
    for (int i = 0; i < nhw; i++)
        if (hw[i] <= s[n - 1].offset) return true;
    return false;
}

enum gr_status gr_status_partition(const struct gr_commit_sample *s, int n, int64_t current_lag,
                                   const int64_t *hw, int nhw, int64_t now_ms)
{
    if (n <= 0 || current_lag <= 0) return GR_STATUS_OK;
    if (offsets_stopped(s, n, now_ms) && !recent_lag_zero(s, n, hw, nhw)) return GR_STATUS_STOP;
    if (lag_always_not_zero(s, n)) {
        if (offsets_rewind(s, n)) return GR_STATUS_REWIND;
        if (offsets_stalled(s, n)) return GR_STATUS_STALL;
        if (lag_not_decreasing(s, n)) return GR_STATUS_WARN;
    }
    return GR_STATUS_OK;
}

int gr_status_recent_hw(const struct gr_commit_sample *s, int n, int64_t current_hw, int64_t now_ms,
                        int64_t recent_ms, int64_t *out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (s[i].lag >= 0 && s[i].time_ms >= now_ms - recent_ms) out[k++] = s[i].offset + s[i].lag;
    if (current_hw >= 0) out[k++] = current_hw;
    return k;
}

enum gr_status gr_status_rollup(enum gr_status group, enum gr_status part)
{
    if (part > GR_STATUS_ERR) part = GR_STATUS_ERR;
    return part > group ? part : group;
}

int64_t gr_status_records_lost(int64_t committed, int64_t l0, int64_t l1)
{
    if (l1 <= l0 || committed >= l1) return 0;
    return l1 - (committed > l0 ? committed : l0);
}

void gr_coord_set_hw_fn(struct gr_coordinator *c, gr_coord_hw_fn fn, void *ctx)
{
    c->hw_fn = fn;
    c->hw_ctx = ctx;
}

void gr_coord_status_note(struct gr_coordinator *c, struct gr_group *grp, struct gr_str topic,
                          int32_t partition)
{
    struct gr_offset_entry *e = (struct gr_offset_entry *)gr_offsets_find(grp, topic, partition);
    if (!e) return;
    if (!e->window && !(e->window = calloc(1, sizeof *e->window))) {
        GR_WARN_RATELIMITED("group %s: no memory for a commit window: its status skips this commit",
                            grp->group_id);
        return;
    }
    int64_t lag = -1;
    if (c->hw_fn) {
        char *name = gr_coord_strndup(topic.ptr, topic.len > 0 ? topic.len : 0);
        int64_t hw = c->hw_fn(c->hw_ctx, name, partition);
        free(name);
        if (hw >= 0) lag = hw > e->offset ? hw - e->offset : 0;
    }
    gr_commit_window_add(e->window, e->offset, e->commit_timestamp_ms, lag);
}

void gr_coord_status_foreach(const struct gr_group *grp,
                             void (*fn)(void *ctx, const char *topic, int32_t partition, int64_t committed,
                                        const struct gr_commit_window *w),
                             void *ctx)
{
    for (int32_t t = 0; t < grp->topic_count; t++)
        for (int32_t i = 0; i < grp->topics[t].count; i++) {
            const struct gr_offset_entry *e = &grp->topics[t].parts[i];
            fn(ctx, grp->topics[t].name, e->partition, e->offset, e->window);
        }
}

void gr_coord_committed_foreach(struct gr_coordinator *c, const char *topic, int32_t partition,
                                void (*fn)(void *ctx, const char *group_id, int64_t committed), void *ctx)
{
    struct gr_str t = gr_str_c(topic);
    for (int32_t g = 0; g < c->group_count; g++) {
        const struct gr_offset_entry *e = gr_offsets_find(c->groups[g], t, partition);
        if (e) fn(ctx, c->groups[g]->group_id, e->offset);
    }
}
