/*
 * metrics_page.h: the /metrics page produced in sections (issue #22: "a large body is produced in chunks of
 * at most 64 KiB per loop iteration").
 *
 * A page is a cursor over steps: each gr_metrics_page_read hands out what the last step wrote and, only when
 * that is all sent, runs the next step, which writes about one block (GR_METRICS_PAGE_BLOCK) at most before
 * returning. libmicrohttpd's content reader (server/admin_http.c) calls it once per block, and the loop runs
 * other watchers between calls. The broker's page (gr_metrics_page_start) has these steps, in the order the
 * page always had: the counters, kafka_log_log_* of every partition held (sliced: family, partition) and the
 * controller count; the six consumer-group families (sliced: family, group, row); request and byte counts;
 * lag bytes/seconds/headroom (sliced: family, row); the replica manager, partition and controller families
 * (sliced: family, partition); Burrow status and records lost; gregor_metrics_series_dropped; request timing;
 * process figures and build info. Each step's text gets its HELP lines (gr_prom_add_help). Sliced sections
 * are written from snapshots with their own copies of the strings: the groups (with the series cap's
 * selection, server/metrics_cap.h) taken when the page starts, the others when their section starts; the
 * small steps read the broker when they run. A snapshot is one pass over what it covers (the first step's
 * collects every group's rows: about 1.5 ms for 10,000 rows, bench/results-metrics.md).
 * Read next: server/metrics_cap.h, server/admin_http.c.
 */
#ifndef GR_METRICS_PAGE_H
#define GR_METRICS_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/prom_text.h"

struct gr_broker;
struct gr_metrics_page;

/* The budget of one step in bytes: a sliced step stops at the line that reaches it. */
#define GR_METRICS_PAGE_BLOCK (64 * 1024)

/* One step of a page: appends the next part of the page to `out` (empty on entry), about `budget` bytes at
   most when it can slice. Returns 1 when more steps follow, 0 after the last one, -1 on failure (out of
   memory: the page must end as a failed response, not a shorter page). */
typedef int (*gr_metrics_step_fn)(void *ctx, size_t budget, struct gr_prom_buf *out);

/* A page whose steps are step(ctx, budget, ...), each with `budget` bytes; ctx_free(ctx) (may be NULL) runs
   at gr_metrics_page_free. Returns NULL out of memory (ctx then freed with ctx_free). */
struct gr_metrics_page *gr_metrics_page_new(gr_metrics_step_fn step, void *ctx, void (*ctx_free)(void *ctx),
                                            size_t budget);
/* Copies at most `max` (> 0) bytes of the page's next text into `out`, running at most one step. Returns the
   bytes copied (> 0), 0 at the end of the page, -1 when a step failed (the page cannot be completed). */
ssize_t gr_metrics_page_read(struct gr_metrics_page *p, char *out, size_t max);
/* Frees the page at any point (a client that went away mid-page); NULL ignored. */
void gr_metrics_page_free(struct gr_metrics_page *p);

/* The /metrics page of broker `b` (Prometheus text format 0.0.4), steps of GR_METRICS_PAGE_BLOCK: takes the
   groups' snapshot and makes the series cap's selection (gregor.metrics.partition.series.max) now, once for
   the page. The one place a render starts. Network thread. NULL out of memory. */
struct gr_metrics_page *gr_metrics_page_start(struct gr_broker *b);

/* Writes the whole page of broker `b` into `out` in one call: gr_metrics_page_start's steps one after the
   other, the text a scrape sends step by step. Network thread. Returns false when `out` failed (memory or its
   max) or a step failed. */
bool gr_metrics_render(struct gr_broker *b, struct gr_prom_buf *out);

#endif
