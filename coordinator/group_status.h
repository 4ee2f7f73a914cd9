/*
 * group_status.h: Burrow's consumer status rules (issue #22) over a window of each committed partition's last
 * commits, and the records a group lost when the log start offset passed its committed offset.
 *
 * The window: per (group, topic, partition) with a committed offset, the last GR_STATUS_WINDOW commits
 * applied by this coordinator (OffsetCommit when written, TxnOffsetCommit when its COMMIT marker is written),
 * each (offset, commit time in wall ms, lag at commit = high watermark then - offset, -1 when the high
 * watermark was not known here). It lives with the committed offset (struct gr_offset_entry) and goes with
 * it. A replay of __consumer_offsets (restart, coordinator move) records nothing: the high watermark at the
 * time of an old commit is not known, so a window starts again with the next commit.
 *
 * The evaluator is linkedin/Burrow's (core/internal/evaluator/caching.go, calculatePartitionStatus and its
 * rules), codes as Burrow's StatusConstant. Burrow's "broker offsets" (the partition's recent log end
 * offsets, which the "lag was zero recently" check reads) are here the high watermarks seen at the window's
 * commits of the last GR_STATUS_RECENT_MS (offset + lag at commit) and the current one. Read next:
 * server/metrics_status.c (gregor_consumergroup_status and records_lost_total).
 */
#ifndef GR_COORD_GROUP_STATUS_H
#define GR_COORD_GROUP_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/coordinator.h"

#define GR_STATUS_WINDOW 10 /* commits kept per committed partition (Burrow's storage "intervals", 10) */
/* How far back a high watermark counts as "recent" for the STOP check: Burrow keeps `intervals` (10) broker
   offsets refreshed every `offset-refresh` (10 s): 100 s. */
#define GR_STATUS_RECENT_MS 100000

/* Burrow's protocol.StatusConstant values, the gauge's value. */
enum gr_status {
    GR_STATUS_NOTFOUND = 0,
    GR_STATUS_OK = 1,
    GR_STATUS_WARN = 2,
    GR_STATUS_ERR = 3,
    GR_STATUS_STOP = 4,
    GR_STATUS_STALL = 5,
    GR_STATUS_REWIND = 6,
};

/* One commit: its offset, wall-clock time (ms) and lag then (high watermark - offset; -1: unknown, Burrow's
   nil lag). */
struct gr_commit_sample {
    int64_t offset, time_ms, lag;
};

/* The last GR_STATUS_WINDOW commits of one partition, a ring: `next` is where the next one goes. */
struct gr_commit_window {
    struct gr_commit_sample s[GR_STATUS_WINDOW];
    int32_t count, next;
};

/* Adds one commit to `w`, replacing the oldest when full. `lag` < 0: unknown. */
void gr_commit_window_add(struct gr_commit_window *w, int64_t offset, int64_t time_ms, int64_t lag);
/* Copies the window's commits oldest first into `out`; returns how many (0..GR_STATUS_WINDOW). */
int gr_commit_window_samples(const struct gr_commit_window *w, struct gr_commit_sample *out);

/* Burrow's calculatePartitionStatus over commits `s[0..n)` (oldest first, n >= 1), the partition's
   `current_lag` (records, high watermark now - last committed offset, >= 0), the recent high watermarks
   `hw[0..nhw)` and `now_ms` (wall ms): OK when current_lag is 0; STOP when now - last commit > last - first
   commit (strictly) and no recent high watermark is <= the last committed offset; then, only when no lag in
   the window is 0 (unknown lags skipped): REWIND when an offset is below the one before, STALL when all
   offsets are equal, WARN when no known lag is below the known one before it; else OK. n == 0: OK (Burrow:
   nothing to evaluate). */
enum gr_status gr_status_partition(const struct gr_commit_sample *s, int n, int64_t current_lag,
                                   const int64_t *hw, int nhw, int64_t now_ms);

/* The recent high watermarks of commits `s[0..n)` for the STOP check: offset + lag of each commit with a
   known lag and time_ms >= now_ms - recent_ms, then `current_hw` (when >= 0), into `out` (room for n + 1).
   Returns how many. */
int gr_status_recent_hw(const struct gr_commit_sample *s, int n, int64_t current_hw, int64_t now_ms,
                        int64_t recent_ms, int64_t *out);

/* Burrow's group rollup: the worse of the group's status so far `group` and one partition's `part`, where a
   partition's STOP, STALL or REWIND counts as ERR. Start from GR_STATUS_OK for a group with an evaluated
   partition (GR_STATUS_NOTFOUND when nothing was evaluated). */
enum gr_status gr_status_rollup(enum gr_status group, enum gr_status part);

/* Records a group with committed offset `committed` loses when the log start offset moves from `l0` to `l1`
   (issue #22): l1 - max(committed, l0) when committed < l1, else 0; 0 when l1 <= l0. */
int64_t gr_status_records_lost(int64_t committed, int64_t l0, int64_t l1);

/* The high watermark of `topic`/`partition` as the server sees it, -1 when not known on this broker. */
typedef int64_t (*gr_coord_hw_fn)(void *ctx, const char *topic, int32_t partition);
/* Sets how the coordinator reads high watermarks for the lag at commit (unset: lags recorded as -1). */
void gr_coord_set_hw_fn(struct gr_coordinator *c, gr_coord_hw_fn fn, void *ctx);

/* Calls `fn` for each committed partition of `grp`: topic, partition, committed offset and its commit
   window (NULL when no commit was applied since this coordinator loaded it). */
void gr_coord_status_foreach(const struct gr_group *grp,
                             void (*fn)(void *ctx, const char *topic, int32_t partition, int64_t committed,
                                        const struct gr_commit_window *w),
                             void *ctx);
/* Calls `fn` for each group with a committed offset of `topic`/`partition` (any state), with that offset. */
void gr_coord_committed_foreach(struct gr_coordinator *c, const char *topic, int32_t partition,
                                void (*fn)(void *ctx, const char *group_id, int64_t committed), void *ctx);

#endif
