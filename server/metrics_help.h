/*
 * metrics_help.h: the `# HELP` text of every metric family /metrics exports (issue #22), one table for all
 * the renderers, added to the whole page by gr_prom_add_help (common/prom_text.h) at the end of
 * gr_metrics_render. `promtool check metrics` (compat-tests/metrics/promtool.py) reports a family whose name
 * is missing here ("no help text").
 * Read next: server/metrics.c.
 */
#ifndef GR_METRICS_HELP_H
#define GR_METRICS_HELP_H

/* The HELP text of metric family `name` (a TYPE line's name: for a summary or histogram, the name without
   _count/_sum/_bucket), or NULL when the family is not in the table. Static storage; no allocation. */
const char *gr_metrics_help(const char *name);

#endif
