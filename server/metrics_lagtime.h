/*
 * metrics_lagtime.h: consumer lag in bytes and seconds and the retention headroom of committed offsets
 * (issue #22, "Lag, four ways"), as families of the /metrics page:
 *   gregor_consumergroup_lag_bytes{consumergroup,topic,partition}
 *   gregor_consumergroup_lag_seconds{consumergroup,topic,partition}
 *   gregor_consumergroup_retention_headroom_records{consumergroup,topic,partition}
 *   gregor_consumergroup_retention_headroom_seconds{consumergroup,topic,partition}  (+Inf printed as "+Inf")
 *   gregor_consumergroup_min_retention_headroom_seconds{consumergroup}
 * Values from storage/lag.h (gr_log_lag: memory only). Every group the broker's group coordinator holds with
 * committed offsets is reported (the coordinator holds the groups of the __consumer_offsets partitions this
 * broker leads, so in a cluster only a group's coordinator reports it); of its partitions only those with a
 * log on this broker that it leads; a partition led by another broker gets the figures its leader computed
 * (server/metrics_remote.h; left out without an answer for that committed offset), never a follower's. Read
 * next: storage/lag.h (the formulas and their precision), server/metrics.c (the page).
 */
#ifndef GR_METRICS_LAGTIME_H
#define GR_METRICS_LAGTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prom_text.h"
#include "server/metrics_cap.h"
#include "storage/lag.h"

struct gr_broker;

/* One committed offset's figures. `partition` < 0 marks a group with commits but no partition reported
   here (it still gets its min headroom line). */
struct gr_lagtime_row {
    const char *group;
    const char *topic;
    int32_t partition;
    struct gr_log_lag v;
};

/* Writes the five families for rows[0..n) (rows of one group contiguous, in the order given) into `out`:
   one # TYPE line per family even when n = 0; lag_seconds is left out where unknown (v.seconds < 0); the
   group's min headroom is the least headroom seconds of its rows, +Inf when it has none. Returns false when
   `out` failed. */
bool gr_metrics_lagtime_write(const struct gr_lagtime_row *rows, int n, struct gr_prom_buf *out);

/* Where a sliced write of the five families stands (gr_metrics_lagtime_write_slice). All zero: the start. */
struct gr_metrics_lagtime_cursor {
    int family; /* 0-3 the per-partition families in the order above, 4 the min headroom */
    int row;    /* the family's next row */
    bool typed; /* its # TYPE line is written */
};

/* gr_metrics_lagtime_write in slices: from `cur` on, stops once out->len reaches `budget` bytes (at least one
   row per call), `cur` naming where the next call goes on; the slices concatenated are byte for byte what
   one call with budget SIZE_MAX writes. Before each per-partition sample asks gr_metrics_cap_keep(cap, ...)
   (NULL: all kept), which counts what it refuses; the min headroom is over every row. Returns true when all
   five families are written, false when more remain or `out` failed (out->failed). */
bool gr_metrics_lagtime_write_slice(const struct gr_lagtime_row *rows, int n, struct gr_metrics_cap *cap,
                                    struct gr_metrics_lagtime_cursor *cur, size_t budget,
                                    struct gr_prom_buf *out);

/* Collects the rows of broker `b` (groups of b->coord, committed offsets whose partition has a log here,
   figures at the wall clock now), their group and topic strings copied (owned: the rows may be written over
   several loop iterations). Network thread; no disk I/O. Returns 0 (*rows, *count set; free with
   gr_metrics_lagtime_rows_free) or -1 out of memory. */
int gr_metrics_lagtime_collect(struct gr_broker *b, struct gr_lagtime_row **rows, int *count);
/* Frees rows from gr_metrics_lagtime_collect. */
void gr_metrics_lagtime_rows_free(struct gr_lagtime_row *rows, int n);

#endif
