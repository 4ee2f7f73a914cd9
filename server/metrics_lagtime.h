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

/* Collects the rows of broker `b` (groups of b->coord, committed offsets whose partition has a log here,
   figures at the wall clock now) and writes them with gr_metrics_lagtime_write. Network thread; no disk
   I/O. Returns false when `out` failed or out of memory. */
bool gr_metrics_lagtime_render(struct gr_broker *b, struct gr_prom_buf *out);

#endif
