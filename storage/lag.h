/*
 * lag.h: a partition's append history and the lag formulas of issue #22 ("Lag, four ways"): lag in bytes and
 * seconds and the retention headroom of a committed offset, computed from memory only (no disk I/O: the
 * scrape that asks runs on the network thread).
 *
 * The history (struct gr_lag_ring) is a bounded list of samples (offset, broker append time, position in its
 * segment, bytes appended so far), sorted by offset. A sample is taken at an append (leader or follower:
 * gr_log_append, gr_log_append_replica) when the last one taken by an append is at least GR_LAG_SAMPLE_MS
 * old, so while appends happen there is one at least every second. At most GR_LAG_SAMPLES_MAX are kept: when
 * full, every other sample of the older half goes (the first one stays), so the newest half keeps 1 s
 * resolution (at least 512 s of continuous appends) and older history gets coarser the older it is; samples
 * wholly below the log start offset go (the last one at or below it stays). The list grows by doubling, so an
 * idle partition holds only what its open rebuilt. At open (gr_log_load) one sample per non-empty segment is
 * rebuilt: its base offset at position 0, at the first batch's timestamp when known (the active segment's),
 * else the previous segment's max timestamp, else its own max timestamp (record timestamps: the broker's
 * append time only for LogAppendTime topics). A truncation drops the samples at or past the new end.
 *
 * Precision (no disk read): lag bytes counts from the latest batch start known at or before the committed
 * offset c (a sample, an offset-index entry in memory of c's segment, whose batch's last offset is below c,
 * or the segment's start), so it is never below the true value and is above it by the bytes between that
 * boundary and c's batch: at most index.interval.bytes plus one batch where c's segment's index is in memory
 * (the active segment's always is), else at most one second of appends (or the segment, where only rebuilt
 * samples cover it). Lag seconds is now minus the time of the latest sample at or below c: never below the
 * true age, above it by less than one second of sampling where samples are fine. On a compacted topic the
 * cleaner rewrites positions: samples in rewritten segments may be off (clamped to the segment).
 * Read next: storage/lag.c, server/metrics_lagtime.c (the families that report it).
 */
#ifndef GR_STORAGE_LAG_H
#define GR_STORAGE_LAG_H

#include <stdbool.h>
#include <stdint.h>

struct gr_log;

#define GR_LAG_SAMPLES_MAX 1024        /* samples kept per partition (32 bytes each) */
#define GR_LAG_SAMPLE_MS 1000          /* an append samples when the last append sample is this old */
#define GR_LAG_RATE_WINDOW_MS 900000LL /* the append rate's window: 15 minutes */

/* One sample: the batch starting at `offset` was appended at `time_ms` (wall clock) at byte `pos` of its
   segment, after `appended` bytes (a running count since open; rebuilt samples count back from 0). */
struct gr_lag_sample {
    int64_t offset;
    int64_t time_ms;
    int64_t appended;
    int32_t pos;
    bool rebuilt; /* made at open from segment metadata, not by an append */
};

struct gr_lag_ring {
    struct gr_lag_sample *s; /* sorted by offset, ascending */
    int32_t count, cap;
    int64_t appended;     /* bytes appended since open (leader and follower appends) */
    int64_t since_ms;     /* wall clock when counting began (open): the rate's window starts no earlier */
    int64_t last_live_ms; /* time of the last sample an append took, INT64_MIN none */
};

/* Empties `r` and starts counting at `now_ms` (wall clock). No allocation. */
void gr_lag_ring_init(struct gr_lag_ring *r, int64_t now_ms);
/* Frees the samples; `r` is empty afterwards. */
void gr_lag_ring_free(struct gr_lag_ring *r);
/* At open: a rebuilt sample for a segment starting at `offset` (ascending calls; `appended` is minus the
   bytes from that segment's start to the log end). Out of memory: nothing added (history is best effort). */
void gr_lag_ring_rebuilt(struct gr_lag_ring *r, int64_t offset, int64_t time_ms, int64_t appended);
/* An append of `len` bytes starting at `offset` (the log end offset before it) at byte `pos` of its segment
   at `now_ms`: adds a sample when none was taken by an append in the last GR_LAG_SAMPLE_MS (or the clock
   went back), thins a full list, drops samples wholly below `log_start`, and counts the bytes. Allocates
   only when the list doubles (at most log2(GR_LAG_SAMPLES_MAX) times per partition). */
void gr_lag_ring_append(struct gr_lag_ring *r, int64_t offset, int32_t pos, int64_t len, int64_t now_ms,
                        int64_t log_start);
/* A truncation to `end_offset`: the samples at or past it go. */
void gr_lag_ring_truncate(struct gr_lag_ring *r, int64_t end_offset);
/* Returns borrowed: the sample with the largest offset <= `offset`, or NULL when none. */
const struct gr_lag_sample *gr_lag_ring_find(const struct gr_lag_ring *r, int64_t offset);
/* The partition's append rate in bytes/s over the last 15 minutes (issue #22's r): the bytes appended since
   the first non-rebuilt sample taken at or after now - W, divided by W, where W = min(15 min, now - since_ms)
   (a broker up for less than 15 minutes averages over its uptime). 0 when W <= 0 or no sample is in the
   window (nothing appended in it). Never below the true rate by more than the appends between that sample
   and the one before it. */
double gr_lag_rate(const struct gr_lag_ring *r, int64_t now_ms);

/* One segment as the formulas see it. */
struct gr_lag_seg {
    int64_t base_offset;
    int64_t size_bytes;
    int64_t max_timestamp_ms;   /* retention's time: the largest batch timestamp, else the last append's */
    int64_t first_timestamp_ms; /* segment.ms's base: the first batch's max timestamp, else its creation */
};

/* A topic's effective config, as the headroom formula needs it (storage/store.h gr_log_config). */
struct gr_lag_cfg {
    int64_t segment_bytes, segment_ms, retention_ms, retention_bytes; /* -1: no retention by that limit */
    bool delete_policy; /* cleanup.policy holds "delete"; false (compact only): headroom +Inf */
};

/* Lag in bytes of committed offset `c` in a log of segments segs[0..n) (n >= 1, the last active) ending at
   `log_end`: the bytes from the start of the batch holding max(c, log start) to the log end, where that
   start is taken as the largest of: the segment's start, `index_pos` (a byte position of that segment known
   to start a batch at or before c, 0 none) and the sample of `r` (may be NULL) at or below c when it falls in
   that segment. 0 when c >= log_end. Bytes, >= 0. */
int64_t gr_lag_bytes(const struct gr_lag_seg *segs, int n, int64_t log_start, int64_t log_end, int64_t c,
                     const struct gr_lag_ring *r, int32_t index_pos);
/* A partition's caught-up offset: the smallest offset from which nothing readable lies below the high
   watermark `hw`: `data_end` (storage/log.h gr_log_data_end_offset, the end of the latest non-control batch)
   when it is <= hw, else hw. Control records (transaction markers) are never returned to a consumer
   (Kafka's consumer Fetcher skips control batches), so a group committed at or past it has nothing left to
   read: Gregor's own lag families report 0 for it (kafka_exporter's kafka_consumergroup_lag keeps hw -
   committed). An upper bound when data_end is one. */
int64_t gr_lag_caught_up(int64_t data_end, int64_t hw);
/* Lag in seconds of committed offset `c` (issue #22): 0 when c >= `caught_up` (gr_lag_caught_up), else
   now - the time of the sample of `r` at or below max(c, log start) (never negative). -1 when no sample is at
   or below it (unknown: no timestamps in the log). Seconds. */
double gr_lag_seconds(const struct gr_lag_ring *r, int64_t log_start, int64_t caught_up, int64_t c,
                      int64_t now_ms);
/* Retention headroom in seconds of committed offset `c` (issue #22), k = the segment holding c, n = the
   active segment, r = `rate` (bytes/s): +Inf when !cfg->delete_policy; 0 when c < log_start; else
   min(T_time, T_size) with T_roll = max(0, min((segment.bytes - size(S_n)) / r, first(S_n) + segment.ms -
   now)) (+Inf for the first term when r = 0); T_time = +Inf if retention.ms < 0, max(0, max(S_k) +
   retention.ms - now) if k < n, T_roll + retention.ms if k = n; T_size = +Inf if retention.bytes < 0 or r =
   0, max(0, (retention.bytes - bytes of the segments after k) / r) if k < n, T_roll + retention.bytes / r if
   k = n. With k = n Gregor's retention also deletes an expired active segment (storage/log.c
   gr_log_retention rolls it away), so T_time is then also at most max(0, max(S_n) + retention.ms - now).
   The earliest deletion: the real one comes up to log.retention.check.interval.ms later. Seconds. */
double gr_lag_headroom_seconds(const struct gr_lag_seg *segs, int n, int64_t log_start, int64_t c,
                               double rate, int64_t now_ms, const struct gr_lag_cfg *cfg);

/* All four of one committed offset on one local log. */
struct gr_log_lag {
    int64_t bytes;            /* gr_lag_bytes to the log end; 0 when c >= the caught-up offset */
    double seconds;           /* gr_lag_seconds against the caught-up offset; -1 unknown */
    int64_t headroom_records; /* c - log start offset (negative: already deleted) */
    double headroom_seconds;  /* gr_lag_headroom_seconds */
    double rate;              /* gr_lag_rate, bytes/s */
};
/* Fills `out` for committed offset `c` of `log` at `now_ms` (wall clock) from memory only: segments, their
   in-memory offset index, the sample history and the topic's effective config; bytes and seconds are 0 when
   c >= gr_lag_caught_up(gr_log_data_end_offset(log), the high watermark storage knows). Network thread.
   Returns 0, -EROFS (offline or deleted: `out` untouched) or -ENOMEM. */
int gr_log_lag(const struct gr_log *log, int64_t c, int64_t now_ms, struct gr_log_lag *out);

#endif
