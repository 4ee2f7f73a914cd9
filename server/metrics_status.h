/*
 * metrics_status.h: issue #22's Burrow status and records lost to retention, for /metrics.
 *
 * gregor_consumergroup_status{consumergroup}: for each group this broker coordinates with a committed offset,
 * Burrow's status (coordinator/group_status.h) over the commit windows of its partitions held here, the worst
 * partition's with STOP/STALL/REWIND reported as ERR (3); 0 (NOTFOUND) when no partition could be evaluated
 * (no commit applied since this broker loaded the group, or no partition held here to read the high
 * watermark; a partition another broker leads is read from its leader's summary: server/metrics_remote.h).
 *
 * gregor_consumergroup_records_lost_total{consumergroup,topic}: when a partition's log start offset rises
 * from L0 to L1 on this broker (retention, DeleteRecords, a follower following its leader: storage's start
 * hook), every group coordinated here with committed offset c < L1 gains L1 - max(c, L0), with one log line
 * "retention deleted past committed offset group=... topic=... partition=... records_lost=..." (rate
 * limited). The counts live in memory: a restart starts them at 0 (Prometheus's rate() and increase() handle
 * the reset). Read next: server/metrics.c (the page these families are part of).
 */
#ifndef GR_METRICS_STATUS_H
#define GR_METRICS_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/prom_text.h"

struct gr_broker;
struct gr_coordinator;
struct gr_log;

struct gr_lost_entry; /* one (group, topic) counter (metrics_status.c) */

/* The records-lost counters: an array of (group, topic, count); all zero is an empty, valid state. */
struct gr_metrics_status {
    struct gr_lost_entry *lost;
    size_t count, cap;
};

/* Frees the counters; `s` is empty afterwards. */
void gr_metrics_status_free(struct gr_metrics_status *s);

/* Adds `n` records lost to the counter of (`group`, `topic`), made on first use. Returns false out of
   memory (the count is then lost, logged). */
bool gr_metrics_status_add_lost(struct gr_metrics_status *s, const char *group, const char *topic,
                                uint64_t n);
/* The count of (`group`, `topic`), 0 when never counted. */
uint64_t gr_metrics_status_lost(const struct gr_metrics_status *s, const char *group, const char *topic);

/* The counting itself, without a broker: for the log start move of `topic`/`partition` from `l0` to `l1`,
   adds gr_status_records_lost(c, l0, l1) to every group of coordinator `c` with a committed offset c < l1
   there, logging one line per group that lost records. Returns the number of records added in all. */
uint64_t gr_metrics_status_count_lost(struct gr_metrics_status *s, struct gr_coordinator *c,
                                      const char *topic, int32_t partition, int64_t l0, int64_t l1);

/* storage's start hook (storage/store.h gr_store_set_start_hook) with `ctx` = the broker: counts the move
   into b->metrics.status against the broker's group coordinator (nothing before it started). In cluster mode
   only for a partition this broker leads: a follower's move (it fires on replicas too) is counted once, from
   the leader's summary (gr_metrics_status_remote_moved). */
void gr_metrics_status_start_moved(void *ctx, struct gr_log *log, int64_t old_start, int64_t new_start);
/* cluster/remote_summary.h's start callback with `ctx` = the broker: a partition another broker leads had
   its log start rise from `old_start` to `new_start` between two of its leader's summaries; counted as
   gr_metrics_status_count_lost does (issue #22: once per (group, partition) whoever holds the partition). */
void gr_metrics_status_remote_moved(void *ctx, const char *topic, int32_t partition, int64_t old_start,
                                    int64_t new_start);

/* The coordinator's high watermark reader (coordinator/group_status.h gr_coord_set_hw_fn) with `ctx` = the
   broker: the caught-up offset (storage/lag.h gr_lag_caught_up: the visible offset, lowered to the end of
   the latest non-control batch, so a group committed past its last data record but below a trailing
   transaction marker is caught up as Burrow sees it) of the partition's replica held here, -1 when not held
   here; for a partition another broker leads (cluster mode), its leader's summarized one
   (gr_part_summary_caught_up), -1 without one. */
int64_t gr_metrics_status_hw(void *ctx, const char *topic, int32_t partition);

/* Writes gregor_consumergroup_status and gregor_consumergroup_records_lost_total of broker `b` (network
   thread, no disk I/O: coordinator state and in-memory high watermarks). records_lost_total has one series
   per (group, topic) with a committed offset, 0 until a loss (so increase() sees the first one); counts of a
   (group, topic) no longer committed (group deleted or expired, offsets deleted, coordinator moved) are
   dropped. Returns false when `out` failed. */
bool gr_metrics_status_render(struct gr_broker *b, struct gr_prom_buf *out);

/* The status of group `grp_id` in coordinator `c` at wall time `now_ms`, high watermarks read through
   `hw(ctx, topic, partition)` (-1: partition skipped): what gr_metrics_status_render reports. Unknown
   group: GR_STATUS_NOTFOUND (0). Returns the enum gr_status value. */
int gr_metrics_status_group(struct gr_coordinator *c, const char *grp_id, int64_t now_ms,
                            int64_t (*hw)(void *ctx, const char *topic, int32_t partition), void *ctx);

#endif
