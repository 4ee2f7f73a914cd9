/*
 * replica.c: the follower's appends (gr_log_append_replica: Kafka's UnifiedLog.appendAsFollower, origin
 * REPLICATION) and the follower's log start offset (gr_log_raise_start_offset). See log.h for the contract.
 *
 * An append as follower writes the leader's bytes as they came: base offsets, partition leader epochs,
 * timestamps and CRCs stay (nothing in the batches is patched, so the input is only read). Every batch is
 * checked first (framing, magic, CRC, offsets continuing the log end offset); one bad batch refuses the
 * call before anything is written. Then the batches go to the active segment in chunks, one pwrite per
 * chunk: a chunk ends where a batch needs a roll (segment.bytes, segment.ms, a full index, 31-bit limits),
 * with gr_log_append's rules (a soft roll may wait for the spare file, storage/roll.c). After each chunk the
 * indexes, the leader epoch cache (LeaderEpochFileCache.assign per batch) and the producer state (no
 * sequence or epoch checks; an epoch regression is logged) learn its batches, and the log end offset moves.
 *
 * Read next: storage/truncate.c (the follower's other half), partition/follower.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "protocol/record_batch.h"
#include "storage/internal.h"

/* Checks every batch of [p, p + len): whole, magic 2, lengths, CRC-32C, last offset delta >= 0, and base
   offsets continuing from the log end offset. 0, -EBADMSG (framing or CRC: Kafka's CorruptRecordException)
   or -ERANGE (an offset gap or overlap). */
static int check_batches(const struct gr_log *log, const uint8_t *p, size_t len)
{
    int64_t next = log->log_end_offset;
    size_t pos = 0;
    while (pos < len) {
        const uint8_t *b;
        size_t blen;
        const char *why = "a partial batch";
        int r = gr_batch_next(p, len, &pos, &b, &blen);
        if (r == 1 && gr_batch_validate_ex(b, blen, GR_BATCH_CHECK_HEADER_ONLY, NULL, &why) < 0) r = -1;
        if (r == 1 && gr_batch_last_offset_delta(b) < 0) {
            why = "a negative last offset delta";
            r = -1;
        }
        if (r != 1) {
            GR_WARN_RATELIMITED("storage: %s: replicated batch at byte %zu refused: %s", log->dir_name, pos,
                                why ? why : "bad framing");
            return -EBADMSG;
        }
        if (gr_batch_base_offset(b) != next) {
            GR_WARN_RATELIMITED("storage: %s: replicated batch at offset %" PRId64 " where %" PRId64
                                " was expected",
                                log->dir_name, gr_batch_base_offset(b), next);
            return -ERANGE;
        }
        next = gr_batch_last_offset(b) + 1;
    }
    return 0;
}

/* Producer state from one replicated batch, without the idempotence checks (ProducerAppendInfo with origin
   REPLICATION: an epoch below the producer's is warned about and taken). */
static void note_producer(struct gr_log *log, struct gr_segment *seg, const uint8_t *b)
{
    int64_t pid = gr_batch_producer_id(b);
    if (pid >= 0) {
        const struct gr_producer_entry *e = gr_producer_state_find(&log->ps, pid);
        if (e && gr_batch_producer_epoch(b) < e->producer_epoch)
            GR_WARN_RATELIMITED("storage: %s: replicated batch at %" PRId64 " has producer %" PRId64
                                " epoch %d below its epoch %d",
                                log->dir_name, gr_batch_base_offset(b), pid, gr_batch_producer_epoch(b),
                                e->producer_epoch);
    }
    gr_log_note_producer(log, seg, b, (size_t)gr_batch_total_bytes(b)); /* markers: .txnindex too */
}

/* After the chunk [p, p + len) was written at `at` of `seg`: indexes, epochs, producers, offsets. */
static void note_chunk(struct gr_log *log, struct gr_segment *seg, const uint8_t *p, size_t len, int64_t at,
                       int64_t now_ms)
{
    const struct gr_log_config *cfg = &log->topic->cfg;
    int64_t records = 0, end = log->log_end_offset, data_end = -1;
    for (size_t off = 0; off < len; off += (size_t)gr_batch_total_bytes(p + off)) {
        const uint8_t *b = p + off;
        gr_segment_note_batch(seg, b, at + (int64_t)off, cfg);
        if (gr_log_epochs_assign(log, gr_batch_leader_epoch(b), gr_batch_base_offset(b)) < 0)
            GR_ERROR("storage: %s: out of memory noting leader epoch %" PRId32, log->dir_name,
                     gr_batch_leader_epoch(b));
        note_producer(log, seg, b);
        records += gr_batch_record_count(b);
        end = gr_batch_last_offset(b) + 1;
        if (!(gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL)) data_end = end;
    }
    gr_log_written(log, seg, end, len, records, now_ms);
    if (data_end >= 0) log->data_end_offset = data_end;
}

/* The bytes from `pos` that go to `seg` with one write: batches while none needs a roll (or, when the
   first one's soft roll was deferred, none needs a hard one). Returns the end position. */
static size_t chunk_end(const struct gr_log *log, const struct gr_segment *seg, const uint8_t *p, size_t len,
                        size_t pos, bool deferred, int64_t now_ms)
{
    size_t end = pos + (size_t)gr_batch_total_bytes(p + pos);
    int64_t size = seg->size_bytes + (int64_t)(end - pos);
    int64_t next = gr_batch_last_offset(p + pos) + 1;
    int64_t rolling = seg->size_bytes == 0 ? gr_batch_max_timestamp(p + pos) : seg->rolling_timestamp_ms;
    while (end < len) {
        const uint8_t *b = p + end;
        size_t blen = (size_t)gr_batch_total_bytes(b);
        int need = gr_log_need_roll_at(log, seg, size, next, rolling, b, blen, now_ms);
        if (need == 2 || (need == 1 && !deferred)) break;
        size += (int64_t)blen;
        next = gr_batch_last_offset(b) + 1;
        end += blen;
    }
    return end;
}

/* Writes the checked batches chunk by chunk. 0 or -errno (earlier chunks stay appended). */
static int write_chunks(struct gr_log *log, const uint8_t *p, size_t len, int64_t now_ms)
{
    size_t pos = 0;
    while (pos < len) {
        struct gr_segment *seg = log->segs[log->seg_count - 1];
        size_t blen = (size_t)gr_batch_total_bytes(p + pos);
        int need = gr_log_need_roll_at(log, seg, seg->size_bytes, log->log_end_offset,
                                       seg->rolling_timestamp_ms, p + pos, blen, now_ms);
        bool deferred = need == 1 && gr_roll_defer(log);
        if (need == 2 || (need == 1 && !deferred)) {
            int err = gr_log_roll(log);
            if (err < 0) return err;
            seg = log->segs[log->seg_count - 1];
        }
        int fd = gr_segment_fd(seg); /* reopens a file the fd cap closed (as gr_log_append does) */
        if (fd < 0) return fd;
        size_t end = chunk_end(log, seg, p, len, pos, deferred, now_ms);
        int64_t at = seg->size_bytes;
        int err = gr_log_write_bytes(log, seg, p + pos, end - pos, at);
        if (err < 0) return err;
        note_chunk(log, seg, p + pos, end - pos, at, now_ms);
        pos = end;
    }
    return 0;
}

int gr_log_append_replica(struct gr_log *log, const uint8_t *records, size_t len,
                          struct gr_append_result *res)
{
    *res = (struct gr_append_result){.base_offset = -1,
                                     .last_offset = -1,
                                     .log_append_time_ms = -1,
                                     .log_start_offset = log->log_start_offset};
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    if (gr_log_file_work_pending(log)) return -EAGAIN;
    if (len == 0) return 0;
    if (!records) return -EBADMSG;
    int err = check_batches(log, records, len);
    if (err < 0) return err;
    int64_t first = log->log_end_offset;
    err = write_chunks(log, records, len, gr_time_wall_ms());
    if (log->log_end_offset > first) {
        res->base_offset = first;
        res->last_offset = log->log_end_offset - 1;
        gr_log_after_append(log);
    }
    res->log_start_offset = log->log_start_offset;
    return err;
}

int gr_log_raise_start_offset(struct gr_log *log, int64_t offset)
{
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    if (atomic_load(&log->trunc_pending)) return -EAGAIN;
    if (offset > log->log_end_offset) offset = log->log_end_offset;
    int r = gr_log_delete_records_begin(log, offset);
    if (r <= 0) return r;
    int err = gr_log_delete_records_end(log, offset, 0);
    if (err < 0) return err;
    int64_t ticket;
    err = gr_store_log_start_checkpoint_async(log->store, &ticket);
    if (err < 0) /* the periodic checkpoint writes it (ls_checkpoint_dirty) */
        GR_WARN_RATELIMITED("storage: %s: queueing the log-start-offset checkpoint failed (%s)",
                            log->dir_name, strerror(-err));
    return 1;
}
