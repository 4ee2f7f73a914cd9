/*
 * truncate.c: the follower's truncations (KIP-101/KIP-279): gr_log_truncate_to (Kafka's
 * UnifiedLog.truncateTo) and gr_log_truncate_fully_and_start_at (UnifiedLog.truncateFullyAndStartAt). See
 * log.h for the contract.
 *
 * Two halves. On the network thread, at once, the in-memory cut: segments wholly past the cut leave the
 * segment list (their files go in the job below), the cut segment's indexes are trimmed, a sealed cut
 * segment is followed by a new empty active segment at the cut, the log end, durable, recovery point and
 * high watermark offsets come down, the leader epoch cache loses the entries at or past the cut
 * (LeaderEpochFileCache.truncateFromEnd; cleared by a full truncation), and producer state is rebuilt from
 * the newest snapshot at or below the cut plus the batches after it (ProducerStateManager.truncateAndReload).
 * Readers see the new log from then on, never a half-cut one. Then the file half runs as ONE housekeeping
 * job, in FIFO order after the checkpoint writes queued by the cut (so the recovery point on disk is at or
 * below the cut before any file changes): the unlink of the dropped segments' files (highest first; a
 * failure other than ENOENT fails the job), ftruncate + fdatasync of the cut segment's .log, its rewritten
 * index files when it is sealed, the new active segment's files, the directory fsync, the unlink of producer
 * snapshots past the cut. Until that job is done, appends, retention and other truncations answer -EAGAIN
 * (trunc_pending); the job then reports through the store's on_flushed so the owner re-checks its waits. A
 * failure of the file half takes the log offline (the next open recovers).
 *
 * Crash states (each syscall may be the last): later segments go first, highest base first, so the files
 * always hold a prefix of the old log; the cut segment is cut before the new active segment exists, so a
 * new segment never follows an uncut one (and recovery drops a segment that does not continue the one
 * before: recover_from's gap rule). Recovery at the next open (from the lowered recovery point) therefore
 * finds a prefix of the log before the truncation, at least up to the cut.
 *
 * Reads before the cut, never on the calling thread when the store has an I/O pool (gr_store_set_iopool):
 * finding the cut (gr_segment_find: the index, the batch headers, a file the fd cap closed), the headers
 * gr_segment_truncate_mem re-reads, the producer snapshot and the headers replayed after it. They run as
 * no-wait reads (storage/segment.c); what is not in memory or the page cache is handed to the pool in a warm
 * job (read in, indexes loaded, a file opened, the snapshot read and checked), the truncation answers -EAGAIN
 * and, like the file half, holds appends, retention and other truncations (trunc_warming) until the job's
 * done, on the network thread, installs its results and reports through on_flushed; the caller then tries
 * again, and the truncation is done in memory once every read it needs is resident. Producer state is
 * rebuilt into a private state before the cut (only batches below the new end are read: the cut does not
 * change them) and swapped in after. After TRUNC_ROUNDS_MAX rounds (pages evicted again each time), or
 * without a pool, the reads are made on the calling thread, as before.
 * Read next: storage/replica.c, partition/follower.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "protocol/record_batch.h"
#include "storage/cleaner.h"
#include "storage/internal.h"
#include "storage/iopool.h"
#include "storage/sys.h"

#define SNAPSHOT_FILE_BYTES_MAX (1u << 30)
/* Pool rounds one truncation waits for before it reads on the calling thread (pages evicted again each
   round); each round reads in one thing (a range, an index, a file, the snapshot). */
#define TRUNC_ROUNDS_MAX 16
/* The header scans' read size (storage/segment.c RECOVERY_READ_BYTES, log.c SCAN_READ_BYTES): a scan
   ending at `pos` reads up to this many bytes past it. */
#define TRUNC_SCAN_BYTES (1024 * 1024)

/* The file half of one truncation, owned by its housekeeping job. */
struct trunc_work {
    struct gr_log *log; /* valid until gr_store_close, which runs every job first */
    int dir_fd;         /* a duplicate of the partition directory */
    int cut_fd;         /* a read-write duplicate of the cut segment's .log, -1: open it by name */
    int64_t cut_base;   /* base offset of the segment cut, -1 when none is */
    int64_t cut_pos;    /* bytes it keeps */
    uint8_t *index;     /* a sealed cut segment's .index bytes then .timeindex bytes, NULL: none to write */
    size_t index_bytes, timeindex_bytes;
    uint8_t *txn; /* the cut segment's .txnindex after the cut (TransactionIndex.truncateTo), NULL: empty */
    size_t txn_bytes;
    bool txn_keep;      /* encoding ran out of memory: the file stays until the next seal or clean close */
    int64_t new_base;   /* base offset of the new active segment whose files are made, -1 none */
    int64_t *snapshots; /* producer snapshot files to unlink */
    int snapshot_count;
    int64_t *drops; /* base offsets of the dropped segments whose files to unlink, highest first */
    int drop_count;
};

static void work_free(struct trunc_work *w)
{
    if (!w) return;
    if (w->dir_fd >= 0) gr_sys_close(w->dir_fd);
    if (w->cut_fd >= 0) gr_sys_close(w->cut_fd);
    free(w->index);
    free(w->txn);
    free(w->snapshots);
    free(w->drops);
    free(w);
}

/* ---------------------------------------------------------------- the file half (housekeeping thread) */

static int cut_log_file(struct trunc_work *w)
{
    int fd = w->cut_fd;
    if (fd < 0) {
        char name[GR_SEGMENT_NAME_BYTES];
        gr_segment_file_name(name, w->cut_base, ".log");
        fd = gr_sys_openat(w->dir_fd, name, O_WRONLY, 0);
        if (fd < 0) return fd;
    }
    int err = gr_sys_ftruncate(fd, w->cut_pos);
    if (err == 0) err = gr_sys_fdatasync(fd);
    if (fd != w->cut_fd) gr_sys_close(fd);
    return err;
}

/* Rewrites one existing index file of the cut segment (never creates one: it is rebuildable). */
static int write_index_file(struct trunc_work *w, const char *sfx, const uint8_t *buf, size_t len)
{
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, w->cut_base, sfx);
    int fd = gr_sys_openat(w->dir_fd, name, O_WRONLY, 0);
    if (fd == -ENOENT) return 0; /* rebuilt from the .log at the next load */
    if (fd < 0) return fd;
    int err = gr_sys_pwrite_full(fd, buf, len, 0);
    if (err == 0) err = gr_sys_ftruncate(fd, (int64_t)len);
    if (err == 0) err = gr_sys_fdatasync(fd);
    gr_sys_close(fd);
    return err;
}

static int make_segment_files(struct trunc_work *w)
{
    static const char *const sfx[] = {".log", ".index", ".timeindex"};
    char name[GR_SEGMENT_NAME_BYTES];
    for (int i = 0; i < 3; i++) {
        gr_segment_file_name(name, w->new_base, sfx[i]);
        int fd = gr_sys_openat(w->dir_fd, name, O_CREAT | O_RDWR | O_TRUNC, 0644);
        if (fd < 0) return fd;
        gr_sys_close(fd);
    }
    return 0;
}

/* Unlinks the dropped segments' files, highest first: a file left behind would follow the cut (a clean
   open trusts every segment), so a failure other than ENOENT fails the truncation (the log goes offline and
   the next open recovers: its gap rule drops the leftover). */
static int unlink_dropped(struct trunc_work *w)
{
    static const char *const sfx[] = {".log", ".index", ".timeindex", ".txnindex"};
    char name[GR_SEGMENT_NAME_BYTES];
    for (int i = 0; i < w->drop_count; i++)
        for (int k = 0; k < 4; k++) {
            gr_segment_file_name(name, w->drops[i], sfx[k]);
            int err = gr_sys_unlinkat(w->dir_fd, name, 0);
            if (err < 0 && err != -ENOENT) return err;
        }
    return 0;
}

static int trunc_job(void *arg)
{
    struct trunc_work *w = arg;
    struct gr_log *log = w->log;
    const char *what = "unlinking the segments past the cut";
    int err = unlink_dropped(w);
    if (err == 0 && w->cut_base >= 0) {
        what = "cutting the segment file";
        err = cut_log_file(w);
    }
    if (err == 0 && w->index) {
        what = "rewriting the index files";
        err = write_index_file(w, ".index", w->index, w->index_bytes);
        if (err == 0) err = write_index_file(w, ".timeindex", w->index + w->index_bytes, w->timeindex_bytes);
    }
    if (err == 0 && w->cut_base >= 0 && !w->txn_keep) {
        what = "rewriting the transaction index";
        char name[GR_SEGMENT_NAME_BYTES];
        gr_segment_file_name(name, w->cut_base, ".txnindex");
        if (w->txn_bytes == 0) {
            err = gr_sys_unlinkat(w->dir_fd, name, 0);
            if (err == -ENOENT) err = 0;
        } else {
            err = write_index_file(w, ".txnindex", w->txn, w->txn_bytes);
        }
    }
    if (err == 0 && w->new_base >= 0) {
        what = "creating the new active segment";
        err = make_segment_files(w);
    }
    if (err == 0) {
        what = "syncing the partition directory";
        err = gr_dir_sync(w->dir_fd);
    }
    for (int i = 0; i < w->snapshot_count; i++) { /* best effort: an open deletes them too */
        char name[48];
        gr_log_snapshot_name(name, sizeof(name), w->snapshots[i]);
        gr_sys_unlinkat(w->dir_fd, name, 0);
    }
    work_free(w);
    if (err < 0) gr_log_go_offline(log, what, err);
    atomic_store(&log->trunc_pending, false);
    if (log->store->cfg.on_flushed) /* the owner re-checks: appends may go on, or the log went offline */
        log->store->cfg.on_flushed(log->store->cfg.on_flushed_ctx, log, atomic_load(&log->durable_offset),
                                   err);
    return err;
}

/* ---------------------------------------------------------------- the in-memory half (network thread) */

/* -EROFS, -EAGAIN (file work or compaction in flight), or 0. */
static int trunc_allowed(const struct gr_log *log)
{
    if (log->deleted || atomic_load(&((struct gr_log *)log)->offline)) return -EROFS;
    if (gr_log_file_work_pending(log) || log->cleaning ||
        atomic_load(&((struct gr_log *)log)->clean_finishes) > 0)
        return -EAGAIN;
    return 0;
}

/* Segments [from, n) may be dropped: none is being named by a flush (its names would appear after the new
   files). The cut segment `cut` (-1 none) must not have index files a flush is about to write. */
static bool segments_settled(struct gr_log *log, int from, int cut)
{
    bool ok = true;
    pthread_mutex_lock(&log->mu);
    for (int i = from; i < log->seg_count; i++)
        ok = ok && log->segs[i]->name_state != GR_NAME_NAMING;
    if (cut >= 0) ok = ok && !log->segs[cut]->index_unsynced;
    pthread_mutex_unlock(&log->mu);
    return ok;
}

static struct trunc_work *work_new(struct gr_log *log)
{
    struct trunc_work *w = calloc(1, sizeof(*w));
    if (!w) return NULL;
    w->log = log;
    w->cut_fd = -1;
    w->cut_base = w->new_base = -1;
    w->dir_fd = dup(log->dir_fd);
    w->drops = malloc(sizeof(int64_t) * (size_t)log->seg_count);
    if (w->dir_fd < 0 || !w->drops) {
        work_free(w);
        return NULL;
    }
    return w;
}

/* Takes a segment out of the log (it is already out of segs[]); its files go with the job. Readers holding
   a reference keep its descriptor until they release it. */
static void drop_segment(struct gr_log *log, struct gr_segment *seg, struct trunc_work *w)
{
    seg->deleted = true;
    gr_segment_lru_remove(seg);
    pthread_mutex_lock(&log->mu);
    uint8_t state = seg->name_state;
    if (state == GR_NAME_PENDING) seg->name_state = GR_NAME_DONE; /* never named: no file to unlink */
    pthread_mutex_unlock(&log->mu);
    if (state == GR_NAME_DONE) w->drops[w->drop_count++] = seg->base_offset; /* (NAMING was refused) */
    gr_segment_unref(seg);
}

/* Drops segments [from, n), highest base first, then appends `nseg` (a new empty active segment, taken;
   NULL none). The caller made sure of the room (at least one segment goes when nseg is given). */
static void drop_tail(struct gr_log *log, int from, struct gr_segment *nseg, struct trunc_work *w)
{
    for (int i = log->seg_count - 1; i >= from; i--) {
        struct gr_segment *seg = log->segs[i];
        log->size_bytes -= seg->size_bytes;
        GR_INFO("storage: %s: truncation deletes segment %" PRId64 " (%" PRId64 " bytes)", log->dir_name,
                seg->base_offset, seg->size_bytes);
        log->seg_count--;
        drop_segment(log, seg, w);
    }
    if (nseg) {
        nseg->index_loaded = true;
        log->segs[log->seg_count++] = nseg;
    }
}

/* The offsets after a cut at `end`; `start` the new log start offset. */
static void lower_offsets(struct gr_log *log, int64_t end, int64_t start)
{
    pthread_mutex_lock(&log->mu);
    log->log_end_offset = end;
    if (atomic_load(&log->durable_offset) > end) atomic_store(&log->durable_offset, end);
    if (atomic_load(&log->durable_offset) < start) atomic_store(&log->durable_offset, start);
    if (log->recovery_point > end) log->recovery_point = end;
    log->trunc_gen++;
    pthread_mutex_unlock(&log->mu);
    if (log->log_start_offset != start) log->store->ls_checkpoint_dirty = true;
    int64_t old_start = log->log_start_offset;
    log->log_start_offset = start;
    if (log->high_watermark > end) log->high_watermark = end;
    if (log->high_watermark >= 0 && log->high_watermark < start) log->high_watermark = start;
    if (log->cleaner_checkpoint > end) log->cleaner_checkpoint = end;
    if (log->data_end_offset > end) log->data_end_offset = end;
    log->size_bytes = 0;
    for (int i = 0; i < log->seg_count; i++)
        log->size_bytes += log->segs[i]->size_bytes;
    gr_lag_ring_truncate(&log->lag, end);
    gr_log_start_moved(log, old_start); /* only when it rose: a restart further on */
}

/* Snapshots past `end` (all when end < 0) leave the list; their files go with the job. */
static void take_snapshots_past(struct gr_log *log, int64_t end, struct trunc_work *w)
{
    int keep = log->snapshot_count;
    while (keep > 0 && (end < 0 || log->snapshots[keep - 1] > end))
        keep--;
    int n = log->snapshot_count - keep;
    if (n == 0) return;
    w->snapshots = malloc(sizeof(int64_t) * (size_t)n);
    if (w->snapshots) { /* else left on disk: an open deletes snapshots past the log end */
        memcpy(w->snapshots, log->snapshots + keep, sizeof(int64_t) * (size_t)n);
        w->snapshot_count = n;
    }
    log->snapshot_count = keep;
}

/* ---------------------------------------------------------------- reads before the cut (warm jobs) */

/* Reads the newest usable producer snapshot among snaps[0, n) (ascending offsets) from `dir_fd`: *off (-1:
   none usable), its bytes in *buf (malloc'd) and *len. Damaged or missing files are skipped (WARN), as
   ProducerStateManager does. 0, or -errno of another read failure. Any thread. */
static int snapshot_pick(int dir_fd, const char *dir_name, const int64_t *snaps, int n, int64_t *off,
                         char **buf, size_t *len)
{
    *off = -1;
    *buf = NULL;
    *len = 0;
    for (int i = n - 1; i >= 0; i--) {
        char name[48], *b;
        size_t l;
        gr_log_snapshot_name(name, sizeof(name), snaps[i]);
        int err = gr_file_read_all(dir_fd, name, SNAPSHOT_FILE_BYTES_MAX, &b, &l);
        if (err == 0) {
            struct gr_producer_state ps;
            gr_producer_state_init(&ps);
            err = gr_producer_state_decode(&ps, (const uint8_t *)b, l);
            if (err == 0 && ps.end_offset != snaps[i]) err = -EINVAL;
            gr_producer_state_free(&ps);
            if (err == 0) {
                *off = snaps[i];
                *buf = b;
                *len = l;
                return 0;
            }
            free(b);
        }
        if (!gr_err_damaged(err) && err != -ENOENT) return err;
        GR_WARN("storage: %s: producer snapshot %s unusable (%s), skipped", dir_name, name, strerror(-err));
    }
    return 0;
}

/* One round of a truncation's reads on the I/O pool. */
struct trunc_warm {
    struct gr_io_job job; /* first: the pool hands it back */
    struct gr_log *log;   /* valid until gr_store_close, which comes after the pool is drained */
    bool has_cold;
    struct gr_log_slice cold; /* a no-wait read's work: a range to read in, indexes to load, a file to open */
    int dir_fd;               /* the snapshot read: a duplicate of the partition directory, -1 none */
    char *dir_name;
    int64_t snap_end; /* the end offset the snapshot is for */
    int64_t *snaps;   /* candidates (ascending), all at or below snap_end */
    int snap_count;
    int64_t snap_off; /* results */
    char *snap_buf;
    size_t snap_len;
};

static void warm_run(struct gr_io_job *job)
{
    struct trunc_warm *w = (struct trunc_warm *)job;
    job->result = 0;
    if (w->has_cold) job->result = gr_log_slice_prefetch(&w->cold); /* the retry meets an error again */
    if (w->dir_fd >= 0) {
        int err = snapshot_pick(w->dir_fd, w->dir_name, w->snaps, w->snap_count, &w->snap_off, &w->snap_buf,
                                &w->snap_len);
        if (err < 0) job->result = err;
        gr_sys_close(w->dir_fd);
        w->dir_fd = -1;
    }
}

/* On the network thread: the results go in (the slice's loads into its segment, the snapshot into the log),
   the log's truncation may go on, and the owner is told (it tries the truncation again). */
static void warm_done(struct gr_io_job *job)
{
    struct trunc_warm *w = (struct trunc_warm *)job;
    struct gr_log *log = w->log;
    if (w->has_cold) gr_log_slice_release(&w->cold); /* installs a load first */
    if (w->snaps) {
        free(log->trunc_snap_buf);
        log->trunc_snap_end = w->snap_end;
        log->trunc_snap_off = w->snap_off;
        log->trunc_snap_buf = w->snap_buf;
        log->trunc_snap_len = w->snap_len;
        log->trunc_snap_err = w->snap_buf || job->result >= 0 ? 0 : job->result;
    }
    if (w->dir_fd >= 0) gr_sys_close(w->dir_fd);
    free(w->snaps);
    free(w->dir_name);
    free(w);
    atomic_store(&log->trunc_warming, false);
    if (log->store->cfg.on_flushed)
        log->store->cfg.on_flushed(log->store->cfg.on_flushed_ctx, log, atomic_load(&log->durable_offset), 0);
}

/* Hands one round to the pool: `nw` a no-wait read that answered -EAGAIN (NULL none), or the snapshot
   candidates snaps[0, n) for end offset `snap_end` (n 0: none). Returns -EAGAIN (the caller retries; out of
   memory too: the next try reads on the calling thread), or -errno when the read cannot be noted. */
static int warm(struct gr_log *log, struct gr_read_nowait *nw, int64_t snap_end, int n)
{
    struct trunc_warm *w = calloc(1, sizeof(*w));
    if (!w) {
        log->trunc_rounds = TRUNC_ROUNDS_MAX;
        return -EAGAIN;
    }
    *w = (struct trunc_warm){.job = {.run = warm_run, .done = warm_done}, .log = log, .dir_fd = -1};
    if (nw) {
        int r = gr_log_nowait_cold(nw, &w->cold);
        if (r != -EAGAIN) {
            free(w);
            return r;
        }
        w->has_cold = true;
    }
    if (n > 0) {
        w->snap_end = snap_end;
        w->snaps = malloc(sizeof(int64_t) * (size_t)n);
        w->dir_name = strdup(log->dir_name);
        w->dir_fd = dup(log->dir_fd);
        if (!w->snaps || !w->dir_name || w->dir_fd < 0) {
            if (w->has_cold) gr_log_slice_release(&w->cold);
            if (w->dir_fd >= 0) gr_sys_close(w->dir_fd);
            free(w->snaps);
            free(w->dir_name);
            free(w);
            log->trunc_rounds = TRUNC_ROUNDS_MAX;
            return -EAGAIN;
        }
        memcpy(w->snaps, log->snapshots, sizeof(int64_t) * (size_t)n);
        w->snap_count = n;
    }
    log->trunc_rounds++;
    atomic_store(&log->trunc_warming, true);
    gr_iopool_submit(log->store->iopool, &w->job);
    return -EAGAIN;
}

/* Whether the headers gr_segment_truncate_mem re-reads to cut `seg` at `pos` (from its last index entry
   below pos; a scan reads up to TRUNC_SCAN_BYTES past it) are in the page cache: 0, or -EAGAIN noting them
   on the no-wait read set on this thread (none set: 0). The segment's indexes are loaded (find_cut). */
static int rescan_ready(struct gr_segment *seg, int64_t pos)
{
    if (!gr_segment_nowait_active() || pos == 0) return 0;
    int32_t keep = 0;
    while (keep < seg->idx_count && seg->idx[keep].position < pos)
        keep++;
    int64_t from = keep ? seg->idx[keep - 1].position : 0;
    if (pos <= from) return 0;
    int fd = gr_segment_fd(seg); /* a closed file: -EAGAIN, the pool opens it */
    if (fd < 0) return fd;
    int64_t to = pos + TRUNC_SCAN_BYTES < seg->size_bytes ? pos + TRUNC_SCAN_BYTES : seg->size_bytes;
    if (gr_sys_range_resident(fd, from, to - from) != 0) return 0;
    return gr_segment_nowait_cold_range(seg, fd, from, to - from);
}

/* Replays into `ps` the headers of the batches in [from, end) (end: the new log end offset, a batch
   boundary at `cut_pos` of `cut_seg`). With `nw` set on this thread, -EAGAIN noting the rest of what this
   replay reads in the segment (up to the cut's scan window in the cut segment) when a header page is cold.
   0 or -errno. */
static int replay_below(struct gr_log *log, struct gr_producer_state *ps, int64_t from, int64_t end,
                        const struct gr_segment *cut_seg, int64_t cut_pos, struct gr_read_nowait *nw)
{
    const struct gr_log_config *cfg = &log->topic->cfg;
    for (int i = gr_log_seg_index_for(log, from); i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        if (seg->base_offset >= end) break;
        if (seg->size_bytes == 0) continue;
        int64_t pos = 0;
        uint8_t hdr[GR_BATCH_HEADER_BYTES];
        if (seg->base_offset < from) {
            int r = gr_segment_find(seg, cfg, from, &pos, hdr);
            if (r < 0) return r;
            if (r == 0) continue;
        }
        int fd = gr_segment_fd(seg);
        if (fd < 0) return fd;
        struct gr_seg_reader rd;
        if (gr_seg_reader_init(&rd, fd, TRUNC_SCAN_BYTES) < 0) return -ENOMEM;
        rd.end = seg->size_bytes; /* no-wait checks cover each read as made (it may pass the cut) */
        if (nw) nw->seg = seg;
        int err = 0;
        while (pos < seg->size_bytes) {
            const uint8_t *h = gr_seg_reader_get(&rd, pos, GR_BATCH_HEADER_BYTES, &err);
            if (!h) {
                err = err ? err : -EIO;
                break;
            }
            if (gr_batch_base_offset(h) >= end) break;
            int64_t total = gr_batch_total_bytes(h);
            size_t have;
            if (!(h = gr_seg_reader_batch_for_producers(&rd, pos, h, &have, &err))) {
                err = err ? err : -EIO;
                break;
            }
            if (gr_batch_base_offset(h) >= from && (err = gr_producer_state_update(ps, h, have, NULL)) < 0)
                break;
            pos += total;
        }
        gr_seg_reader_free(&rd);
        if (err == -EAGAIN && nw && nw->kind == 1) { /* one round for the rest this replay reads here */
            int64_t stop = seg == cut_seg ? cut_pos + TRUNC_SCAN_BYTES : seg->size_bytes;
            if (stop > seg->size_bytes) stop = seg->size_bytes;
            if (stop > nw->pos + nw->len) nw->len = stop - nw->pos;
        }
        if (err < 0) return err;
    }
    return 0;
}

/* ProducerStateManager.truncateAndReload, read before the cut into `ps` (initialized): the newest usable
   snapshot at or below `end` (read by a warm job, or here without no-wait), then the headers of the batches
   from it up to `end` (at `cut_pos` in `cut_seg`). 0, -EAGAIN (a warm job was handed the reads; retry), or
   -errno of a read. */
static int producers_at(struct gr_log *log, int64_t end, const struct gr_segment *cut_seg, int64_t cut_pos,
                        bool nowait, struct gr_producer_state *ps)
{
    int64_t first = log->segs[0]->base_offset, from = first;
    gr_producer_state_reset(ps, first);
    int n = 0;
    while (n < log->snapshot_count && log->snapshots[n] <= end)
        n++;
    if (n > 0 && log->trunc_snap_end != end) {
        if (nowait) return warm(log, NULL, end, n);
        free(log->trunc_snap_buf);
        log->trunc_snap_buf = NULL;
        int err = snapshot_pick(log->dir_fd, log->dir_name, log->snapshots, n, &log->trunc_snap_off,
                                &log->trunc_snap_buf, &log->trunc_snap_len);
        log->trunc_snap_end = end;
        log->trunc_snap_err = err;
    }
    if (n > 0 && log->trunc_snap_err < 0) return log->trunc_snap_err;
    if (n > 0 && log->trunc_snap_off >= 0) {
        int err = gr_producer_state_decode(ps, (const uint8_t *)log->trunc_snap_buf, log->trunc_snap_len);
        if (err == 0 && ps->end_offset != log->trunc_snap_off) err = -EINVAL;
        if (err == 0)
            from = log->trunc_snap_off > first ? log->trunc_snap_off : first;
        else
            gr_producer_state_reset(ps, first); /* checked on the pool: cannot happen */
    }
    struct gr_read_nowait nw = {0};
    if (nowait) gr_segment_nowait_set(&nw);
    int err = replay_below(log, ps, from, end, cut_seg, cut_pos, nowait ? &nw : NULL);
    if (nowait) gr_segment_nowait_set(NULL);
    if (err == -EAGAIN && nowait) return warm(log, &nw, end, 0);
    return err;
}

/* The truncation is done: its prepared reads are dropped. */
static void prep_done(struct gr_log *log)
{
    log->trunc_rounds = 0;
    free(log->trunc_snap_buf);
    log->trunc_snap_buf = NULL;
    log->trunc_snap_end = -1;
}

/* Common end of both truncations: checkpoints queued (recovery point first on disk), then the job. */
static void queue_file_work(struct gr_log *log, struct trunc_work *w)
{
    gr_store_checkpoint_all(log->store, false);
    struct gr_job *job = calloc(1, sizeof(*job));
    atomic_store(&log->trunc_pending, true);
    if (!job) {
        work_free(w);
        gr_log_go_offline(log, "queueing a truncation", -ENOMEM);
        atomic_store(&log->trunc_pending, false);
        return;
    }
    job->type = GR_JOB_CALL;
    job->dir_fd = -1;
    job->fn = trunc_job;
    job->arg = w;
    gr_flusher_job(log->store, job);
}

/* Where `offset` falls in segment k: *pos, the batch boundary before the batch holding it (that batch goes
   whole), and *end, the new log end offset (that batch's base offset). 0 or -errno. */
static int find_cut(struct gr_log *log, int k, int64_t offset, int64_t *pos, int64_t *end)
{
    struct gr_segment *seg = log->segs[k];
    *pos = 0;
    *end = seg->base_offset;
    if (offset == seg->base_offset) return 0;
    uint8_t hdr[GR_BATCH_HEADER_BYTES];
    int r = gr_segment_find(seg, &log->topic->cfg, offset, pos, hdr);
    if (r < 0) return r;
    *end = r == 1 ? gr_batch_base_offset(hdr) : seg->next_offset;
    return 0;
}

/* Cuts segment `seg` at `pos` in memory and notes its file work in `w`. 0 or -errno. */
static int cut_segment(struct gr_log *log, struct gr_segment *seg, int64_t pos, struct trunc_work *w)
{
    int err = gr_segment_truncate_mem(seg, &log->topic->cfg, pos);
    if (err < 0) return err;
    w->cut_base = seg->base_offset;
    w->cut_pos = pos;
    /* Aborted transactions whose marker is past the cut go (TransactionIndex.truncateTo). Encoding
       failing for lack of memory leaves the file as it was: a load takes no entry past its segment's end. */
    gr_segment_txn_truncate(seg, seg->next_offset);
    w->txn = gr_segment_txn_encode(seg, &w->txn_bytes);
    w->txn_keep = w->txn_bytes && !w->txn;
    if (seg->sealed) {
        gr_segment_seal_deferred(seg); /* the final time index entry of the kept batches */
        /* NULL (no memory): the old index files stay; their entries past the cut fail the sanity check of
           the next load, which rebuilds them. */
        w->index = gr_segment_index_encode(seg, &w->index_bytes, &w->timeindex_bytes);
    }
    if (seg->fd >= 0 && (fcntl(seg->fd, F_GETFL) & O_ACCMODE) == O_RDWR) w->cut_fd = dup(seg->fd);
    return 0;
}

int gr_log_truncate_to(struct gr_log *log, int64_t offset)
{
    int err = trunc_allowed(log);
    if (err < 0) return err;
    if (offset < 0) return -EINVAL;
    if (offset >= log->log_end_offset) return 0;
    if (offset < log->segs[0]->base_offset) return gr_log_truncate_fully_and_start_at(log, offset);
    if (log->trunc_target != offset) log->trunc_rounds = 0; /* an abandoned one's rounds do not count */
    log->trunc_target = offset;
    bool nowait = log->store->iopool && log->trunc_rounds < TRUNC_ROUNDS_MAX;
    if (log->store->iopool && !nowait)
        GR_WARN_RATELIMITED("storage: %s: truncation to %" PRId64 " still cold after %d I/O pool rounds: "
                            "reading on the calling thread",
                            log->dir_name, offset, log->trunc_rounds);
    int k = gr_log_seg_index_for(log, offset);
    int64_t pos, end;
    struct gr_read_nowait nw = {0};
    if (nowait) gr_segment_nowait_set(&nw);
    err = find_cut(log, k, offset, &pos, &end);
    bool active = k == log->seg_count - 1, drop_cut = pos == 0 && !active;
    if (err == 0 && !drop_cut) err = rescan_ready(log->segs[k], pos);
    if (nowait) gr_segment_nowait_set(NULL);
    if (err == -EAGAIN && nowait) return warm(log, &nw, end, 0);
    if (err < 0) return err;
    if (!segments_settled(log, drop_cut ? k : k + 1, drop_cut ? -1 : k)) return -EAGAIN;
    struct gr_producer_state ps;
    gr_producer_state_init(&ps);
    if ((err = producers_at(log, end, log->segs[k], pos, nowait, &ps)) < 0) {
        gr_producer_state_free(&ps);
        if (err == -EAGAIN) return err;
        prep_done(log);
        gr_log_go_offline(log, "rebuilding producer state", err);
        return err;
    }
    struct trunc_work *w = work_new(log);
    struct gr_segment *nseg = active || !w ? NULL : gr_segment_new(log, end);
    if (!w || (!active && !nseg)) {
        gr_producer_state_free(&ps);
        work_free(w);
        return -ENOMEM;
    }
    int rounds = log->trunc_rounds;
    prep_done(log);
    int64_t old_end = log->log_end_offset;
    if (!drop_cut && (err = cut_segment(log, log->segs[k], pos, w)) < 0) {
        gr_log_go_offline(log, "reading the segment to truncate", err); /* its state is half cut */
        gr_producer_state_free(&ps);
        if (nseg) gr_segment_unref(nseg);
        work_free(w);
        return err;
    }
    drop_tail(log, drop_cut ? k : k + 1, nseg, w);
    lower_offsets(log, end, log->log_start_offset < end ? log->log_start_offset : end);
    gr_log_epochs_truncate_end(log, end);
    take_snapshots_past(log, end, w);
    if (!active) w->new_base = end;
    gr_producer_state_free(&log->ps); /* the state rebuilt before the cut (only batches below it were read) */
    log->ps = ps;
    log->ps.end_offset = end;
    gr_producer_state_truncate_head(&log->ps, log->log_start_offset);
    /* Transactions the replay completed below the high watermark are stable already: without this the first
       unstable offset would wait for the next move of the high watermark, which an idle partition lacks. */
    if (log->high_watermark >= 0) gr_producer_state_on_high_watermark(&log->ps, log->high_watermark);
    GR_INFO("storage: %s: truncated to %" PRId64 " (log end offset %" PRId64 " -> %" PRId64
            "; reads: %d I/O pool round(s))",
            log->dir_name, offset, old_end, end, rounds);
    queue_file_work(log, w);
    return 0;
}

int gr_log_truncate_fully_and_start_at(struct gr_log *log, int64_t offset)
{
    int err = trunc_allowed(log);
    if (err < 0) return err;
    if (offset < 0) return -EINVAL;
    if (!segments_settled(log, 0, -1)) return -EAGAIN;
    struct trunc_work *w = work_new(log);
    struct gr_segment *nseg = w ? gr_segment_new(log, offset) : NULL;
    if (!nseg) {
        work_free(w);
        return -ENOMEM;
    }
    int64_t old_end = log->log_end_offset;
    drop_tail(log, 0, nseg, w);
    lower_offsets(log, offset, offset);
    pthread_mutex_lock(&log->mu);
    log->recovery_point = offset;
    pthread_mutex_unlock(&log->mu);
    if (log->high_watermark >= 0) log->high_watermark = offset;
    if (log->cleaner_checkpoint >= 0) log->cleaner_checkpoint = offset;
    log->epoch_count = 0; /* LeaderEpochFileCache.clearAndFlush */
    log->epochs_dirty = true;
    take_snapshots_past(log, -1, w);
    gr_producer_state_reset(&log->ps, offset);
    prep_done(log);
    w->new_base = offset;
    GR_INFO("storage: %s: truncated fully, log restarts at %" PRId64 " (log end offset was %" PRId64 ")",
            log->dir_name, offset, old_end);
    queue_file_work(log, w);
    return 0;
}

bool gr_log_truncation_pending(const struct gr_log *log)
{
    return atomic_load(&((struct gr_log *)log)->trunc_pending) ||
           atomic_load(&((struct gr_log *)log)->trunc_warming);
}
