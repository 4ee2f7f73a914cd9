/*
 * cleaner.h: log compaction (Kafka's log cleaner) for logs whose cleanup.policy contains "compact".
 *
 * What a cleaning does (Kafka 4.1's Cleaner semantics, see cleaner.c for the deviations):
 *   - the "dirty" section is [first dirty offset, first uncleanable offset): the first dirty offset comes
 *     from cleaner-offset-checkpoint (else the log start offset); the first uncleanable offset is the
 *     lowest of the active segment's base offset, the high watermark (the durable offset until the server
 *     reported one), the last stable offset (the first offset of the oldest open transaction) and the
 *     base of the first segment holding a batch younger than min.compaction.lag.ms;
 *   - a key -> latest offset map is built over the dirty section, bounded by log.cleaner.dedupe.buffer.size
 *     (24 bytes per key, at most 90% full, as Kafka's SkimpyOffsetMap); when it fills up the cleaning stops
 *     at that batch and the rest waits for the next round;
 *   - every sealed segment from the log start up to where the map ends is rewritten (grouped up to
 *     segment.bytes per output segment) keeping a record when it is the latest of its key, or lies past
 *     the map; tombstones (null value) are kept until the delete horizon (now + delete.retention.ms stamped
 *     on the batch by the first cleaning that keeps it: RecordBatch attribute bit 6, the base timestamp
 *     holds the horizon) has passed; records without a key are dropped. Offsets, batch base offsets, last
 *     offset deltas, leader epochs, producer ids/epochs/base sequences and codecs are kept; a batch whose
 *     records all go is dropped unless it is the last batch of an active producer or the last of its
 *     output segment (then an empty batch header with record count 0 stays);
 *   - transactions (Kafka's CleanedTransactionMetadata, with the aborted transactions of the .txnindex
 *     files): a data batch of an aborted transaction loses its records and never feeds the map; a
 *     COMMIT/ABORT marker stays while a batch of its transaction was read in the round, else it gets a
 *     delete horizon (as tombstones) and goes once that passed; an empty control batch may go; an ABORT
 *     marker kept for its data keeps its entry, in the new segment's .txnindex;
 *   - the active segment is never touched.
 *
 * Crash safety (Kafka's file dance): the cleaner thread writes "<base>.log.cleaned" (+ .index.cleaned,
 * .timeindex.cleaned, .txnindex.cleaned), fdatasyncs them, renames them to ".swap" and fsyncs the directory:
 * from then on the replacement is committed. The network thread swaps the segment list in memory; the
 * housekeeping thread then unlinks the replaced segments' files and renames the .swap files to their final
 * names. At open, gr_cleaner_recover_dir completes a swap found half done (deletes the segments the .swap
 * covers, renames it) and removes .cleaned files.
 *
 * Threading: one cleaner thread does the reading, the map, the writing and the fsyncs at a bounded rate
 * (log.cleaner.io.max.bytes.per.second); it reads sealed segments through descriptors pinned by the
 * references the job holds. Picking a log and installing the result happen on the network thread in
 * gr_store_cleaner_tick, so the segment list only ever changes on the thread that reads and appends.
 *
 * Read next: cleaner.c, storage/format.md (file names), storage/log.h.
 */
#ifndef GR_STORAGE_CLEANER_H
#define GR_STORAGE_CLEANER_H

#include <stdbool.h>
#include <stdint.h>

struct gr_store;
struct gr_log;

/* Figures of one cleaning (also logged at info level). */
struct gr_clean_stats {
    int64_t first_dirty_offset; /* where the dirty section started */
    int64_t end_offset;         /* where the cleaning stopped: the next first dirty offset */
    int64_t bytes_read;         /* bytes of the segments rewritten */
    int64_t bytes_written;      /* bytes of their replacements */
    int64_t records_read;
    int64_t records_kept;
    int64_t keys_mapped;  /* entries in the key map */
    int32_t segments_in;  /* segments replaced */
    int32_t segments_out; /* segments written */
    int64_t duration_ms;  /* map + rewrite + fsyncs (cleaner thread) */
    double dirty_ratio_before;
    double dirty_ratio_after;
};

/* The dirty ratio Kafka's cleaner ranks logs by: cleanable bytes / (clean + cleanable bytes), counting
   whole sealed segments (see above for the bounds). 0 for logs without the compact policy. Network
   thread. */
double gr_log_dirty_ratio(struct gr_log *log, int64_t now_ms);

/* Cleans `log` once, synchronously on the calling (network) thread, whatever its dirty ratio (tests,
   benches; the server uses the cleaner thread through gr_store_cleaner_tick). `now_ms`: the wall clock the
   delete horizons and compaction lags are computed with. Returns 0 and fills `st` (may be NULL), -EAGAIN
   when there is nothing to clean (not compacted, no sealed dirty segment, a job of the cleaner thread
   holds the log), -EROFS offline/deleted, or -errno from the disk (the log is then unchanged). */
int gr_log_clean_now(struct gr_log *log, int64_t now_ms, struct gr_clean_stats *st);

/* Network thread, call periodically (the server does every housekeeping tick): installs a cleaning the
   cleaner thread finished, and when it is idle hands it the log with the highest dirty ratio above its
   min.cleanable.dirty.ratio (or one past max.compaction.lag.ms). Starts the thread on first use. Does
   nothing when cfg.cleaner_enable is false. `st` (may be NULL) gets the figures of a cleaning installed by
   this call; returns 1 if one was installed, else 0. */
int gr_store_cleaner_tick(struct gr_store *store, int64_t now_ms, struct gr_clean_stats *st);

/* Waits until the cleaner thread has no job, installing a finished one (tests). */
void gr_store_cleaner_drain(struct gr_store *store, int64_t now_ms);

/* --- hooks for store.c / log.c (storage internal) --- */
/* Stops the cleaner thread (a running job is abandoned; files it committed are completed at next open). */
void gr_cleaner_stop(struct gr_store *store);
/* Reads cleaner-offset-checkpoint into every log (missing file: nothing). */
void gr_cleaner_load_checkpoint(struct gr_store *store);
/* At log open, before the directory listing: completes half-done swaps, removes .cleaned files.
   Returns 0 or -errno. */
int gr_cleaner_recover_dir(int dir_fd, const char *dir_name);

#endif
