/*
 * part_summary.h: what a partition's leader tells the group coordinator on another broker, so the coordinator
 * can report a group's lag for partitions it does not lead (issue #22, "In a cluster": each group's series
 * come only from its coordinator; for a partition led elsewhere it uses that leader's summary, fetched at
 * most once per second per leader in one batched Gregor-internal request with a 500 ms timeout).
 *
 * A summary holds the leader's view of one partition: its high watermark (the visible offset: what
 * ListOffsets' latest answers), last stable offset, log start and log end offsets, the caught-up offset (no
 * readable record at or past it below the high watermark: storage/lag.h), the 15-minute append rate,
 * and for each committed offset the coordinator asked about, the four lag figures of storage/lag.h
 * (gr_log_lag: lag bytes and seconds, retention headroom records and seconds) computed by the leader from its
 * own segments and append history. The leader computes them rather than shipping its segment list and sample
 * history: the figures are exactly the single-node ones, and the answer stays small (a few numbers per
 * committed offset, whatever the number of segments).
 *
 * struct gr_part_summaries is the coordinator's cache of the latest answers, keyed by (topic, partition) and
 * tagged with the leader that answered: a refresh replaces everything one leader answered
 * (gr_part_summaries_replace_leader), a leader that did not answer has its entries dropped
 * (gr_part_summaries_drop_leader), so a scrape never reports figures from a leader that failed the latest
 * refresh. Network thread only; no locking.
 * Read next: storage/lag.h (the figures), server/metrics_groups.h (who reads them).
 */
#ifndef GR_CLUSTER_PART_SUMMARY_H
#define GR_CLUSTER_PART_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/lag.h"

/* Bounds on what comes off the wire from another broker (a request or an answer past them is refused). */
#define GR_PART_SUMMARY_PARTITIONS_MAX 100000 /* partitions in one request or answer */
#define GR_PART_SUMMARY_OFFSETS_MAX 1000      /* committed offsets asked per partition (distinct values) */
#define GR_PART_SUMMARY_TOPIC_BYTES_MAX 249   /* a topic name's bytes: Kafka's Topic.MAX_NAME_LENGTH */

/* The figures of one committed offset. */
struct gr_part_summary_offset {
    int64_t committed; /* the committed offset asked about (>= 0) */
    struct gr_log_lag lag;
};

/* One partition as its leader sees it. */
struct gr_part_summary {
    int64_t high_watermark;     /* visible offset */
    int64_t last_stable_offset; /* == high_watermark without open transactions */
    int64_t log_start_offset;
    int64_t log_end_offset;
    int64_t caught_up_offset; /* storage/lag.h gr_lag_caught_up; -1 not sent (the high watermark stands in) */
    double rate;              /* append rate, bytes/s over 15 minutes (gr_lag_rate) */
    int32_t offset_count;     /* entries in offsets[] */
    struct gr_part_summary_offset *offsets; /* sorted by committed, distinct; owned by whoever owns the
                                               summary (the cache after gr_part_summaries_replace_leader) */
};

struct gr_part_summaries; /* the cache (part_summary.c) */

/* A new empty cache, NULL out of memory. */
struct gr_part_summaries *gr_part_summaries_new(void);
/* Frees the cache and every summary in it; NULL is ignored. */
void gr_part_summaries_free(struct gr_part_summaries *s);

/* One partition of a leader's answer, as gr_part_summaries_replace_leader takes it. */
struct gr_part_summary_entry {
    const char *topic; /* copied by the cache */
    int32_t partition;
    struct gr_part_summary summary; /* its offsets[] array (malloc'd) passes to the cache */
};

/* Replaces every entry leader `leader` answered before with entries[0..n) (sorted in place; each offsets[]
   array taken over by the cache, whatever the result; one entry per (topic, partition)), answered at `now_ms`
   (monotonic). An entry for a (topic, partition) another leader answered before replaces that one too
   (leadership moved). Returns 0 or -ENOMEM (the cache then holds none of `leader`'s entries: a scrape leaves
   those partitions out). */
int gr_part_summaries_replace_leader(struct gr_part_summaries *s, int32_t leader,
                                     struct gr_part_summary_entry *entries, int32_t n, int64_t now_ms);
/* Drops every entry leader `leader` answered (it did not answer the latest refresh, or it is gone). Returns
   the number of entries dropped. */
int32_t gr_part_summaries_drop_leader(struct gr_part_summaries *s, int32_t leader);
/* Drops everything (a coordinator that stops being one, a broker leaving cluster mode). */
void gr_part_summaries_clear(struct gr_part_summaries *s);

/* Returns borrowed (valid until the next change of the cache): the latest summary of (`topic`, `partition`)
   and in *leader (may be NULL) the leader that gave it, *answered_ms (may be NULL) when; NULL when none. */
const struct gr_part_summary *gr_part_summaries_find(const struct gr_part_summaries *s, const char *topic,
                                                     int32_t partition, int32_t *leader,
                                                     int64_t *answered_ms);
/* The number of entries cached. */
int32_t gr_part_summaries_count(const struct gr_part_summaries *s);

/* The caught-up offset of `sum`: its caught_up_offset when the leader sent one within [0, high watermark],
   else the high watermark (a leader that does not send it: nothing hidden, lag as before). */
int64_t gr_part_summary_caught_up(const struct gr_part_summary *sum);
/* Returns borrowed: the figures `sum` holds for committed offset `committed`, NULL when it was not asked
   about (the commit is newer than the latest refresh). */
const struct gr_log_lag *gr_part_summary_lag(const struct gr_part_summary *sum, int64_t committed);

struct gr_partition;
struct gr_log;
struct gr_partition_summary_request;

/* Whether a decoded PartitionSummary request stays within the bounds above: at most
   GR_PART_SUMMARY_PARTITIONS_MAX partitions in all, GR_PART_SUMMARY_OFFSETS_MAX committed offsets per
   partition, topic names of at most GR_PART_SUMMARY_TOPIC_BYTES_MAX bytes. The handler closes the connection
   otherwise (only a broker sends this API, and Gregor's never passes them). */
bool gr_part_summary_request_within_bounds(const struct gr_partition_summary_request *body);

/* The leader's side (the PartitionSummary handler, server/handlers/partition_summary.c): fills `out` for
   partition `part` with local log `log` (both borrowed; the caller checked this broker leads it) at `now_ms`
   (wall clock), from memory only (network thread, no disk I/O): high watermark
   (gr_partition_visible_offset), last stable offset, log start and end, the caught-up offset
   (gr_lag_caught_up of gr_log_data_end_offset and that high watermark), the append rate (gr_lag_rate), and
   for each distinct non-negative value of committed[0..n) the figures of storage/lag.h gr_log_lag, sorted by
   committed offset into out->offsets, which the caller provides with room for n entries (negative values are
   skipped: a commit is >= 0). Returns 0, or -EROFS for an offline or deleted log (KAFKA_STORAGE_ERROR),
   -ENOMEM. */
int gr_part_summary_local(struct gr_partition *part, const struct gr_log *log, const int64_t *committed,
                          int32_t n, int64_t now_ms, struct gr_part_summary *out);

#endif
