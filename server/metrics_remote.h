/*
 * metrics_remote.h: the broker's binding of the batched inter-broker partition summary (issue #22, "In a
 * cluster"; cluster/remote_summary.h): which committed offsets the group coordinator asks other leaders
 * about, the lookups the lag families make for partitions led elsewhere, and the
 * gregor_metrics_remote_partition_errors_total counter.
 *
 * Cluster mode only (b->remote_summary exists): a refresh asks, for every group this broker coordinates, the
 * committed offsets of the partitions whose leader in the metadata image is another broker. In single-node
 * mode every function here is a no-op (nothing refreshed, nothing waited for, no family written).
 * The counter's name deviates from the gregor_metrics_remote_summary_errors_total: promtool's linter
 * refuses a metric name containing "summary" (a metric type's name) and the metrics suite runs
 * `promtool check metrics` (README, Metrics). Network thread only.
 * Read next: cluster/remote_summary.h, server/admin_http.c (the scrape that waits for a refresh).
 */
#ifndef GR_METRICS_REMOTE_H
#define GR_METRICS_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/part_summary.h"
#include "cluster/remote_summary.h"
#include "common/prom_text.h"

struct gr_broker;

/* issue #22: a leader is asked at most once per second, its answer awaited at most 500 ms. */
#define GR_METRICS_REMOTE_INTERVAL_MS 1000
#define GR_METRICS_REMOTE_TIMEOUT_MS 500

/* Cluster mode: makes b->remote_summary (connections on the inter-broker listener); `start_moved` (ctx = b)
   hears a leader's log start rise (server/metrics_status.h gr_metrics_status_remote_moved: records_lost).
   Returns 0 or -1 (logged). */
int gr_metrics_remote_start(struct gr_broker *b, gr_remote_summary_start_cb *start_moved);
/* Frees b->remote_summary (NULL afterwards); nothing in single-node mode. */
void gr_metrics_remote_stop(struct gr_broker *b);

/* Starts a refresh of the summaries the coordinator's groups need (cluster/remote_summary.h: a leader asked
   less than a second ago is not asked again). Returns the number of leaders pending (0: nothing to wait
   for; always 0 in single-node mode). */
int gr_metrics_remote_refresh(struct gr_broker *b);

/* For partition (`topic`, `partition`): returns false when this broker leads it (or in single-node mode: the
   local log is the truth); true when another broker leads it or none does, with *sum the latest summary its
   current leader gave (borrowed until the next refresh's answer) or NULL when there is none (the partition
   is then left out). */
bool gr_metrics_remote_elsewhere(struct gr_broker *b, const char *topic, int32_t partition,
                                 const struct gr_part_summary **sum);

/* Writes gregor_metrics_remote_partition_errors_total (counter: partitions left out of a scrape because
   their leader did not answer the summary request in time or answered an error) in cluster mode; nothing in
   single-node mode. Returns false when `out` failed. */
bool gr_metrics_remote_render(struct gr_broker *b, struct gr_prom_buf *out);

#endif
