/*
 * metrics_cap.h: issue #22's cardinality cap on the per-partition consumer-group series of /metrics
 * (gregor.metrics.partition.series.max, default 10000).
 *
 * The unit is a row: one (group, topic, partition) of the consumer-group families, i.e. every partition of
 * each topic in which a group coordinated here has a committed offset (server/metrics_groups.h). A row's
 * series are its samples in the per-partition families kafka_consumergroup_current_offset,
 * kafka_consumergroup_lag, gregor_consumergroup_lag_records (server/metrics_groups.c) and
 * gregor_consumergroup_lag_bytes, _lag_seconds, _retention_headroom_records, _retention_headroom_seconds
 * (server/metrics_lagtime.c). When there are more rows than the cap, the rows first in this order are kept:
 *   1. rows with a known lag (a commit and a high watermark known on this broker) before rows without one
 *      (no commit, or the partition's high watermark not known here);
 *   2. larger lag first (lag = high watermark - committed, kafka_exporter's kafka_consumergroup_lag, not
 *      clamped: a negative lag sorts below 0);
 *   3. ties by group id, then topic name (bytewise), then partition, ascending.
 * The selection is made once per scrape, when the page starts (server/metrics_page.c), from one pass over the
 * groups; the renderers then ask gr_metrics_cap_keep before each per-partition sample, which counts what it
 * refuses: gregor_metrics_series_dropped = the number of SAMPLES (series, not rows) left out of this scrape.
 * Per-topic and per-group aggregates (_sum families, members, min headroom, status, records lost) are never
 * capped and are computed over every row. kafka_log_log_* and the other per-partition families without a
 * group label are not capped: there is one per partition held (bounded by the partitions, not by groups x
 * partitions), as Kafka's JMX exporter shows them.
 * Read next: server/metrics_page.c (where the selection is made), server/metrics_groups.c.
 */
#ifndef GR_METRICS_CAP_H
#define GR_METRICS_CAP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prom_text.h"

/* One row as the selection sees it. Strings are borrowed for the call of gr_metrics_cap_select. */
struct gr_metrics_cap_row {
    const char *group, *topic;
    int32_t partition;
    bool lag_known; /* a commit and a high watermark known here */
    int64_t lag;    /* high watermark - committed when lag_known */
};

struct gr_metrics_cap_key; /* a kept row (metrics_cap.c) */

/* The selection of one scrape. All zero: nothing selected yet (everything kept). */
struct gr_metrics_cap {
    bool capped;                     /* more rows than the cap: only `keep` are kept */
    struct gr_metrics_cap_key *keep; /* owned, sorted by (group, topic, partition) */
    int64_t nkeep, rows;             /* rows kept, rows considered */
    uint64_t dropped;                /* samples refused by gr_metrics_cap_keep so far this scrape */
};

/* The cap's order of two rows (see above): < 0 when `a` is kept before `b`. */
int gr_metrics_cap_order(const struct gr_metrics_cap_row *a, const struct gr_metrics_cap_row *b);

/* Selects, among rows[0..n), the `max` (>= 0) first in the cap's order (rows is sorted in place) and keeps a
   copy of their keys in `c` (which must be empty). n <= max: everything kept (no copy). Returns 0 or -ENOMEM
   (`c` then keeps everything: a scrape is never refused for the cap's sake). */
int gr_metrics_cap_select(struct gr_metrics_cap *c, struct gr_metrics_cap_row *rows, int64_t n, int64_t max);

/* Whether the sample of row (group, topic, partition) about to be written is kept; false counts one dropped
   series in c->dropped. A row the selection did not see is dropped when capped. NULL `c`: kept. */
bool gr_metrics_cap_keep(struct gr_metrics_cap *c, const char *group, const char *topic, int32_t partition);

/* Writes `# TYPE gregor_metrics_series_dropped gauge` and its sample, c->dropped (0 for NULL). Returns false
   when `out` failed. */
bool gr_metrics_cap_render(const struct gr_metrics_cap *c, struct gr_prom_buf *out);

/* Frees the kept keys; `c` is empty (everything kept) afterwards. */
void gr_metrics_cap_free(struct gr_metrics_cap *c);

#endif
