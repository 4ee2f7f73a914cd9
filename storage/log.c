/*
 * log.c: one partition log: open and recovery, append and roll, reads, offsets by time, the leader epoch
 * cache, DeleteRecords, retention, the flush body and producer snapshots. See log.h for the contract and
 * segment.c for the files. Invariants kept here:
 *   - segs[0..n) have increasing base offsets and each segment's next offset is the next one's base;
 *     the last is the active segment (read-write fd, indexes in memory).
 *   - log_start_offset <= durable_offset <= log_end_offset == active->next_offset.
 *   - nothing is appended after a failed write until the partial bytes are truncated away; if that
 *     truncation fails the log is offline.
 *   - every segment holding bytes not yet covered by an fdatasync is in `unsynced` (with a reference), so
 *     the flusher can make everything below the log end offset it captured durable.
 * Read next: flusher.c (who calls gr_log_flush_now), store.c.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/time.h"
#include "protocol/crc32c.h"
#include "protocol/record_batch.h"
#include "storage/cleaner.h"
#include "storage/internal.h"
#include "storage/sys.h"

#define SCAN_READ_BYTES (1024 * 1024)
#define HEADER_READ_BYTES (8 * 1024)

static const struct gr_log_config *log_cfg(const struct gr_log *log)
{
    return &log->topic->cfg;
}
static struct gr_segment *log_active(const struct gr_log *log)
{
    return log->segs[log->seg_count - 1];
}

int64_t gr_log_start_offset(const struct gr_log *log)
{
    return log->log_start_offset;
}
int64_t gr_log_end_offset(const struct gr_log *log)
{
    return log->log_end_offset;
}
int64_t gr_log_data_end_offset(const struct gr_log *log)
{
    return log->data_end_offset;
}
int64_t gr_log_durable_offset(const struct gr_log *log)
{
    return atomic_load(&((struct gr_log *)log)->durable_offset);
}
bool gr_log_offline(const struct gr_log *log)
{
    return atomic_load(&((struct gr_log *)log)->offline);
}
static int epochs_push(struct gr_log *log, int32_t epoch, int64_t start);
static int replay_producers(struct gr_log *log, int64_t from);
static void after_start_moved(struct gr_log *log);

int32_t gr_log_leader_epoch(const struct gr_log *log)
{
    return log->leader_epoch;
}
int gr_log_set_leader_epoch(struct gr_log *log, int32_t epoch)
{
    struct gr_epoch_entry *last = log->epoch_count ? &log->epochs[log->epoch_count - 1] : NULL;
    /* Equal: nothing, unless a follower's appends removed the entry an open had added for this epoch
       (gr_log_epochs_assign) and it now leads in exactly that epoch. */
    if (epoch < log->leader_epoch || (epoch == log->leader_epoch && (!last || last->epoch >= epoch)))
        return 0;
    log->leader_epoch = epoch;
    if (last && last->start_offset >= log->log_end_offset) { /* no batch in that epoch: Kafka's assign */
        last->epoch = epoch;
        log->epochs_dirty = true;
        return 0;
    }
    return epochs_push(log, epoch, log->log_end_offset);
}
struct gr_topic *gr_log_topic(const struct gr_log *log)
{
    return log->topic;
}
int32_t gr_log_partition(const struct gr_log *log)
{
    return log->partition;
}
int64_t gr_log_size_bytes(const struct gr_log *log)
{
    return log->size_bytes;
}
int gr_log_segment_count(const struct gr_log *log)
{
    return log->seg_count;
}
size_t gr_log_expire_producers(struct gr_log *log, int64_t now_ms, int64_t expiration_ms)
{
    return gr_producer_state_expire(&log->ps, now_ms, expiration_ms);
}

const struct gr_producer_state *gr_log_producer_state(const struct gr_log *log)
{
    return &log->ps;
}
void gr_log_set_user(struct gr_log *log, void *user)
{
    log->user = user;
}
void *gr_log_user(const struct gr_log *log)
{
    return log->user;
}
int64_t gr_log_high_watermark(const struct gr_log *log)
{
    return log->high_watermark;
}

int64_t gr_log_recovery_point(struct gr_log *log)
{
    pthread_mutex_lock(&log->mu);
    int64_t rp = log->recovery_point;
    pthread_mutex_unlock(&log->mu);
    return rp;
}

void gr_log_set_high_watermark(struct gr_log *log, int64_t hwm)
{
    if (hwm < log->log_start_offset) hwm = log->log_start_offset;
    if (hwm > log->log_end_offset) hwm = log->log_end_offset;
    log->high_watermark = hwm;
    log->hwm_from_server = true;
    gr_producer_state_on_high_watermark(&log->ps, hwm); /* completed transactions below it are stable */
}

int64_t gr_log_first_unstable_offset(const struct gr_log *log)
{
    int64_t fuo = gr_producer_state_first_unstable(&log->ps);
    if (fuo < 0) return -1;
    return fuo < log->log_start_offset ? log->log_start_offset : fuo; /* maybeIncrementFirstUnstableOffset */
}

int gr_log_aborted_txns(const struct gr_log *log, int64_t start_offset, int64_t upper_bound,
                        struct gr_aborted_txn *out, int cap)
{
    int n = 0;
    for (int i = gr_log_seg_index_for(log, start_offset); i < log->seg_count; i++) {
        const struct gr_segment *seg = log->segs[i];
        /* no stop at a segment past the upper bound: its markers may close transactions begun below it
           (LocalLog.collectAbortedTransactions walks the higher segments until the search is complete) */
        for (int32_t k = 0; k < seg->atx_count; k++) {
            const struct gr_aborted_txn *t = &seg->atx[k];
            if (t->last_offset >= start_offset && t->first_offset < upper_bound) {
                if (n < cap) out[n] = *t;
                n++;
            }
            if (t->last_stable_offset >= upper_bound) return n; /* TransactionIndex: the search is complete */
        }
    }
    return n;
}

static void log_go_offline(struct gr_log *log, const char *what, int err)
{
    pthread_mutex_lock(&log->mu);
    bool was = atomic_exchange(&log->offline, true);
    pthread_mutex_unlock(&log->mu);
    if (!was)
        GR_ERROR("storage: %s: partition offline after %s failed (%s)", log->dir_name, what, strerror(-err));
}

/* Largest segment index whose base offset <= offset (0 when offset is below every base). */
static int seg_index_for(const struct gr_log *log, int64_t offset)
{
    int lo = 0, hi = log->seg_count - 1, ans = 0;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (log->segs[mid]->base_offset <= offset) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans;
}

static int segs_reserve(struct gr_log *log, int extra)
{
    if (log->seg_count + extra <= log->seg_cap) return 0;
    int ncap = log->seg_cap ? log->seg_cap * 2 : 8;
    while (ncap < log->seg_count + extra)
        ncap *= 2;
    struct gr_segment **n = realloc(log->segs, (size_t)ncap * sizeof(*n));
    if (!n) return -ENOMEM;
    log->segs = n;
    log->seg_cap = ncap;
    return 0;
}

/* Under mu. Adds a reference-holding entry; on allocation failure the log goes offline (it could no
   longer promise durability). */
static void unsynced_add_locked(struct gr_log *log, struct gr_segment *seg)
{
    if (seg->in_unsynced) return;
    if (log->unsynced_count == log->unsynced_cap) {
        int ncap = log->unsynced_cap ? log->unsynced_cap * 2 : 4;
        struct gr_segment **n = realloc(log->unsynced, (size_t)ncap * sizeof(*n));
        if (!n) {
            atomic_store(&log->offline, true);
            return;
        }
        log->unsynced = n;
        log->unsynced_cap = ncap;
    }
    gr_segment_ref(seg);
    seg->in_unsynced = true;
    log->unsynced[log->unsynced_count++] = seg;
}

/* ---------------------------------------------------------------- jobs and snapshots */

static struct gr_job *job_new(enum gr_job_type type, int dir_fd, int names)
{
    struct gr_job *job = calloc(1, sizeof(*job));
    if (!job) return NULL;
    job->type = type;
    job->names = calloc((size_t)names, sizeof(char *));
    job->dir_fd = dup(dir_fd);
    if (!job->names || job->dir_fd < 0) {
        gr_job_free(job);
        return NULL;
    }
    return job;
}

/* Unlinks the segment's files (async on the housekeeping thread when the store runs, else now). */
static void unlink_segment_files(struct gr_log *log, struct gr_segment *seg)
{
    static const char *const sfx[] = {".log", ".index", ".timeindex", ".txnindex"};
    struct gr_job *job = job_new(GR_JOB_UNLINK, log->dir_fd, 4);
    if (job) {
        job->name_count = 4;
        job->dev = seg->dev;
        job->ino = seg->ino;
        for (int i = 0; i < 4; i++) {
            job->names[i] = malloc(GR_SEGMENT_NAME_BYTES);
            if (!job->names[i]) {
                gr_job_free(job);
                job = NULL;
                break;
            }
            gr_segment_file_name(job->names[i], seg->base_offset, sfx[i]);
        }
    }
    if (!job) {
        char name[GR_SEGMENT_NAME_BYTES];
        for (int i = 0; i < 3; i++) {
            gr_segment_file_name(name, seg->base_offset, sfx[i]);
            gr_sys_unlinkat(log->dir_fd, name, 0);
        }
        return;
    }
    if (log->store->fl.threads)
        gr_flusher_job(log->store, job);
    else {
        gr_job_run(job);
        gr_job_free(job);
    }
}

/* Removes a segment from the log's ownership (it must already be out of segs[]). */
static void drop_segment(struct gr_log *log, struct gr_segment *seg)
{
    seg->deleted = true;
    gr_segment_lru_remove(seg);
    pthread_mutex_lock(&log->mu);
    uint8_t state = seg->name_state;
    if (state == GR_NAME_PENDING) seg->name_state = GR_NAME_DONE; /* never named: no file to unlink */
    if (state == GR_NAME_NAMING) seg->unlink_after_naming = true; /* the naming flush unlinks */
    pthread_mutex_unlock(&log->mu);
    if (state == GR_NAME_DONE) unlink_segment_files(log, seg);
    gr_segment_unref(seg);
}

static void snapshot_name(char *buf, size_t n, int64_t offset)
{
    snprintf(buf, n, "%020" PRId64 ".snapshot", offset);
}

static void snapshots_prune(struct gr_log *log)
{
    int drop = 0;
    while (log->snapshot_count - drop > GR_SNAPSHOTS_KEPT)
        drop++;
    while (log->snapshot_count - drop > 1 && log->snapshots[drop + 1] <= log->log_start_offset)
        drop++;
    if (!drop) return;
    struct gr_job *job = job_new(GR_JOB_UNLINK, log->dir_fd, drop);
    for (int i = 0; job && i < drop; i++) {
        job->names[i] = malloc(48);
        if (!job->names[i]) {
            gr_job_free(job);
            job = NULL;
            break;
        }
        snapshot_name(job->names[i], 48, log->snapshots[i]);
        job->name_count = i + 1;
    }
    if (job) {
        if (log->store->fl.threads)
            gr_flusher_job(log->store, job);
        else {
            gr_job_run(job);
            gr_job_free(job);
        }
    }
    memmove(log->snapshots, log->snapshots + drop, sizeof(int64_t) * (size_t)(log->snapshot_count - drop));
    log->snapshot_count -= drop;
}

static void snapshots_note(struct gr_log *log, int64_t offset)
{
    if (log->snapshot_count && log->snapshots[log->snapshot_count - 1] == offset) return;
    if (log->snapshot_count == log->snapshot_cap) {
        int ncap = log->snapshot_cap ? log->snapshot_cap * 2 : 8;
        int64_t *n = realloc(log->snapshots, sizeof(int64_t) * (size_t)ncap);
        if (!n) return;
        log->snapshots = n;
        log->snapshot_cap = ncap;
    }
    log->snapshots[log->snapshot_count++] = offset;
    snapshots_prune(log);
}

/* Writes the producer snapshot at the log end offset: queued to the housekeeping thread, or now (sync). */
static int snapshot_write(struct gr_log *log, bool sync)
{
    size_t n = gr_producer_state_encoded_bytes(&log->ps);
    uint8_t *buf = malloc(n);
    if (!buf) return -ENOMEM;
    log->ps.end_offset = log->log_end_offset;
    gr_producer_state_encode(&log->ps, buf);
    char name[48];
    snapshot_name(name, sizeof(name), log->log_end_offset);
    int err = gr_store_write_file(log->store, log->dir_fd, name, buf, n, sync);
    if (err == 0) snapshots_note(log, log->log_end_offset);
    return err;
}

/* ---------------------------------------------------------------- flush */

void gr_log_flush_async(struct gr_log *log)
{
    log->messages_since_flush = 0;
    if (log->deleted || atomic_load(&log->offline)) return;
    if (atomic_load(&log->durable_offset) >= log->log_end_offset) {
        pthread_mutex_lock(&log->mu);
        bool dirty = log->dir_dirty || log->unsynced_count > 0;
        pthread_mutex_unlock(&log->mu);
        if (!dirty) return;
    }
    gr_flusher_request(log);
}

int gr_log_flush_begin(struct gr_log *log, struct gr_flush_ticket *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_lock(&log->mu);
    if (atomic_load(&log->offline)) {
        pthread_mutex_unlock(&log->mu);
        return -EROFS;
    }
    t->target = log->log_end_offset;
    t->trunc_gen = log->trunc_gen;
    t->segs = log->unsynced;
    t->n = log->unsynced_count;
    log->unsynced = NULL;
    log->unsynced_count = log->unsynced_cap = 0;
    t->dir = log->dir_dirty;
    log->dir_dirty = false;
    /* Whether a segment's index files need syncing is decided now, under the lock: a roll may set the
       flag while we sync, and then a later flush owns those files. */
    t->index_too = calloc((size_t)t->n + 1, sizeof(uint8_t));
    t->naming = calloc((size_t)t->n + 1, sizeof(bool));
    for (int i = 0; i < t->n; i++) {
        struct gr_segment *seg = t->segs[i];
        seg->in_unsynced = false;
        if (t->naming && seg->name_state == GR_NAME_PENDING) { /* made from a spare: named by this flush */
            seg->name_state = GR_NAME_NAMING;
            t->naming[i] = true;
            t->dir = true;
        }
        if (t->index_too && seg->index_unsynced) {
            t->index_too[i] = seg->index_unwritten ? 2 : 1;
            seg->index_unwritten = false; /* this flush writes them */
        }
    }
    pthread_mutex_unlock(&log->mu);
    return 0;
}

int gr_log_flush_write(struct gr_log *log, struct gr_flush_ticket *t, const char **what)
{
    int err = t->index_too && t->naming ? 0 : -ENOMEM;
    *what = "naming a new segment";
    for (int i = 0; i < t->n && err == 0; i++) {
        struct gr_segment *seg = t->segs[i];
        if (t->naming[i]) err = gr_roll_name_segment(seg);
        if (err == 0 && t->index_too[i] == 2) {
            /* Sealed by a roll: the index files are written here, off the network thread. They are
               rebuildable from the .log, so a failure costs a rebuild at the next load, not durability. */
            int werr = gr_segment_write_indexes_existing(seg);
            if (werr < 0 && werr != -ENOENT) /* ENOENT: retention deleted the segment meanwhile */
                GR_WARN_RATELIMITED("storage: %s: writing indexes of segment %" PRId64
                                    " failed (%s); rebuilt on next load",
                                    log->dir_name, seg->base_offset, strerror(-werr));
        }
    }
    return err;
}

/* The per-file syncs of one ticket: names and index files first, every unsynced segment (and sealed index
   files), then the directory. */
static int flush_sync_files(struct gr_log *log, struct gr_flush_ticket *t, const char **what)
{
    int err = gr_log_flush_write(log, t, what);
    if (err < 0) return err;
    *what = "fdatasync";
    for (int i = 0; i < t->n && err == 0; i++) {
        struct gr_segment *seg = t->segs[i];
        if (seg->fd >= 0) err = gr_sys_fdatasync(seg->fd);
        if (err == 0 && t->index_too[i]) {
            if (seg->index_fd >= 0) err = gr_sys_fdatasync(seg->index_fd);
            if (err == 0 && seg->timeindex_fd >= 0) err = gr_sys_fdatasync(seg->timeindex_fd);
        }
    }
    if (err == 0 && t->dir) {
        *what = "directory fsync";
        err = gr_dir_sync(log->dir_fd);
    }
    return err;
}

int gr_log_flush_end(struct gr_log *log, struct gr_flush_ticket *t, int err, const char *what, bool report)
{
    if (err == 0 && (!t->index_too || !t->naming)) err = -ENOMEM;
    pthread_mutex_lock(&log->mu);
    bool unlink_named = false;
    for (int i = 0; t->naming && i < t->n; i++) {
        if (!t->naming[i]) continue;
        struct gr_segment *seg = t->segs[i];
        seg->name_state = err == 0 ? GR_NAME_DONE : GR_NAME_PENDING;
        unlink_named = unlink_named || (seg->unlink_after_naming && err == 0);
    }
    if (err < 0) {
        atomic_store(&log->offline, true);
    } else {
        /* A truncation since begin (storage/truncate.c) may have cut below the target: what this flush
           synced is then not known to be what the log holds, so it proves nothing. */
        if (t->trunc_gen == log->trunc_gen && t->target > atomic_load(&log->durable_offset))
            atomic_store(&log->durable_offset, t->target);
        log->recovery_point = atomic_load(&log->durable_offset);
        for (int i = 0; i < t->n; i++) {
            struct gr_segment *seg = t->segs[i];
            if (t->index_too[i]) {
                /* Sealed indexes are durable: their descriptors are no longer needed. */
                gr_sys_close(seg->index_fd);
                gr_sys_close(seg->timeindex_fd);
                seg->index_fd = seg->timeindex_fd = -1;
                seg->index_unsynced = false;
            }
        }
    }
    int64_t durable = atomic_load(&log->durable_offset);
    pthread_mutex_unlock(&log->mu);
    if (err < 0)
        GR_ERROR("storage: %s: %s failed (%s): partition offline until restart", log->dir_name, what,
                 strerror(-err));
    for (int i = 0; unlink_named && i < t->n; i++)
        if (t->naming[i] && t->segs[i]->unlink_after_naming) gr_roll_unlink_names(t->segs[i]);
    for (int i = 0; i < t->n; i++)
        gr_segment_unref(t->segs[i]);
    free(t->segs);
    free(t->index_too);
    free(t->naming);
    t->segs = NULL;
    t->index_too = NULL;
    t->naming = NULL;
    if (report && log->store->cfg.on_flushed)
        log->store->cfg.on_flushed(log->store->cfg.on_flushed_ctx, log, durable, err);
    return err;
}

int gr_log_flush_now(struct gr_log *log, bool report)
{
    struct gr_flush_ticket t;
    int err = gr_log_flush_begin(log, &t);
    if (err < 0) return err;
    const char *what;
    err = flush_sync_files(log, &t, &what);
    return gr_log_flush_end(log, &t, err, what, report);
}

/* ---------------------------------------------------------------- leader epochs */

static int epochs_push(struct gr_log *log, int32_t epoch, int64_t start)
{
    if (log->epoch_count == log->epoch_cap) {
        int ncap = log->epoch_cap ? log->epoch_cap * 2 : 8;
        struct gr_epoch_entry *n = realloc(log->epochs, sizeof(*n) * (size_t)ncap);
        if (!n) return -ENOMEM;
        log->epochs = n;
        log->epoch_cap = ncap;
    }
    log->epochs[log->epoch_count++] = (struct gr_epoch_entry){epoch, start};
    log->epochs_dirty = true;
    return 0;
}

/* Kafka's truncateFromStart: entries wholly below the log start offset go, the one spanning it starts there.
 */
static void epochs_truncate_start(struct gr_log *log)
{
    int64_t ls = log->log_start_offset;
    int keep = -1;
    for (int i = 0; i < log->epoch_count; i++)
        if (log->epochs[i].start_offset <= ls) keep = i;
    if (keep < 0 || (keep == 0 && log->epochs[0].start_offset == ls)) return;
    memmove(log->epochs, log->epochs + keep, sizeof(*log->epochs) * (size_t)(log->epoch_count - keep));
    log->epoch_count -= keep;
    log->epochs[0].start_offset = ls;
    log->epochs_dirty = true;
}

void gr_log_epochs_truncate_end(struct gr_log *log, int64_t end_offset)
{
    int n = log->epoch_count;
    while (n && log->epochs[n - 1].start_offset >= end_offset)
        n--;
    if (n == log->epoch_count) return;
    log->epoch_count = n;
    log->epochs_dirty = true;
}

int gr_log_epochs_assign(struct gr_log *log, int32_t epoch, int64_t start_offset)
{
    if (epoch < 0) return 0; /* a batch without a leader epoch (Kafka's NO_PARTITION_LEADER_EPOCH) */
    /* Entries at or after the batch hold no batch (an open's or a role change's entry not used yet): they
       go first, so that a batch continuing the last written epoch keeps that epoch's start offset. */
    gr_log_epochs_truncate_end(log, start_offset);
    int n = log->epoch_count;
    if (n && log->epochs[n - 1].epoch == epoch) return 0; /* LeaderEpochFileCache.isUpdateNeeded: no */
    while (n && log->epochs[n - 1].epoch >= epoch)        /* maybeTruncateNonMonotonicEntries */
        n--;
    if (n != log->epoch_count) {
        GR_WARN("storage: %s: leader epoch %" PRId32 " at offset %" PRId64 " is below epoch %" PRId32
                " of the epoch cache: later entries removed",
                log->dir_name, epoch, start_offset, log->epochs[log->epoch_count - 1].epoch);
        log->epoch_count = n;
    }
    int err = epochs_push(log, epoch, start_offset);
    if (err == 0 && epoch > log->leader_epoch) log->leader_epoch = epoch; /* never handed out again */
    return err;
}

/* Whether the leader epoch file must be written: it differs from memory AND a batch carries the newest
   epoch. Until a batch does, the file may lack the entry an open added (load_epochs): the next open derives
   the same epoch again, and no batch or answer can tell the difference. */
static bool epochs_write_needed(const struct gr_log *log)
{
    return log->epochs_dirty &&
           (log->epoch_count == 0 || log->log_end_offset > log->epochs[log->epoch_count - 1].start_offset);
}

int gr_log_write_epochs(struct gr_log *log, bool sync)
{
    if (atomic_exchange(&log->epochs_write_failed, false))
        log->epochs_dirty = true; /* an async write failed */
    if (!epochs_write_needed(log) || log->deleted || log->dir_fd < 0) return 0;
    uint8_t *buf;
    size_t len;
    int err = gr_epoch_ckpt_format(log->epochs, log->epoch_count, &buf, &len);
    if (err == 0 && sync)
        err = gr_store_write_file(log->store, log->dir_fd, "leader-epoch-checkpoint", buf, len, true);
    else if (err == 0) /* a failure sets epochs_write_failed: written again at the next checkpoint pass */
        err = gr_store_write_file_flagged(log->store, log->dir_fd, "leader-epoch-checkpoint", buf, len,
                                          &log->epochs_write_failed);
    if (err == 0) log->epochs_dirty = false;
    return err;
}

int gr_log_end_offset_for_epoch(struct gr_log *log, int32_t epoch, int64_t *end_offset, int32_t *epoch_out)
{
    int n = log->epoch_count;
    if (n == 0 || epoch < log->epochs[0].epoch || epoch > log->epochs[n - 1].epoch) return -ENOENT;
    if (epoch == log->epochs[n - 1].epoch) {
        *end_offset = log->log_end_offset;
        *epoch_out = epoch;
        return 0;
    }
    int floor = 0;
    for (int i = 0; i < n && log->epochs[i].epoch <= epoch; i++)
        floor = i;
    *epoch_out = log->epochs[floor].epoch;
    *end_offset = log->epochs[floor + 1].start_offset;
    return 0;
}

int32_t gr_log_epoch_for_offset(struct gr_log *log, int64_t offset)
{
    if (offset < log->log_start_offset || offset >= log->log_end_offset) return -1;
    int32_t e = -1;
    for (int i = 0; i < log->epoch_count && log->epochs[i].start_offset <= offset; i++)
        e = log->epochs[i].epoch;
    return e;
}

/* ---------------------------------------------------------------- append and roll */

static int log_roll(struct gr_log *log)
{
    struct gr_segment *old = log_active(log);
    int64_t base = log->log_end_offset;
    if (old->size_bytes == 0 && old->base_offset == base) return 0;
    int err = segs_reserve(log, 1);
    if (err < 0) return err;
    struct gr_segment *seg = gr_roll_take_spare(log, base); /* made ahead: no file-system call here */
    if (!seg) {
        seg = gr_segment_new(log, base);
        if (!seg) return -ENOMEM;
        err = gr_segment_create(seg);
        if (err < 0) {
            GR_WARN_RATELIMITED("storage: %s: creating segment %" PRId64 " failed (%s)", log->dir_name, base,
                                strerror(-err));
            gr_segment_unref(seg);
            return err;
        }
    }
    gr_segment_seal_deferred(old); /* the flush requested below writes the index files */
    pthread_mutex_lock(&log->mu);
    unsynced_add_locked(log, old);
    old->index_unsynced = true;
    old->index_unwritten = true;
    unsynced_add_locked(log, seg);
    log->dir_dirty = true;
    pthread_mutex_unlock(&log->mu);
    log->segs[log->seg_count++] = seg;
    /* The sealed segment stays in the LRU of open files when its descriptor is open (the fd cap may have
       closed it while idle: then it stays closed, nothing to sync in it). */
    if (old->fd >= 0) gr_segment_fd(old);
    GR_DEBUG("storage: %s: rolled to segment %" PRId64, log->dir_name, base);
    int serr = snapshot_write(log, false);
    if (serr < 0)
        GR_WARN_RATELIMITED("storage: %s: producer snapshot at %" PRId64 " failed (%s)", log->dir_name, base,
                            strerror(-serr));
    gr_log_flush_async(log);              /* as Kafka does at roll: the sealed segment becomes durable soon */
    gr_roll_prepare(log, seg, INT64_MIN); /* a log that rolls keeps the next spare ready (storage/roll.c) */
    return 0;
}

enum roll_need { ROLL_NO, ROLL_SOFT, ROLL_HARD };

/* need_roll for the active segment `seg` as it will be with `size_bytes` bytes, the log end offset at
   `end_offset` and rolling timestamp `rolling_ts_ms` (a follower's chunk, storage/replica.c). */
static enum roll_need need_roll_at(const struct gr_log *log, const struct gr_segment *seg, int64_t size_bytes,
                                   int64_t end_offset, int64_t rolling_ts_ms, const uint8_t *batch,
                                   size_t len, int64_t now_ms)
{
    const struct gr_log_config *cfg = log_cfg(log);
    if (size_bytes == 0) return ROLL_NO;
    if (size_bytes + (int64_t)len > INT32_MAX ||
        end_offset + gr_batch_last_offset_delta(batch) - seg->base_offset > INT32_MAX)
        return ROLL_HARD;
    /* A roll waiting for its spare stops waiting at max(2 x segment.bytes, roll_wait_bytes_min) already in
       the segment: a stalled spare thread cannot grow a segment without bound, while a burst of large
       batches on a small segment.bytes waits for its file instead of creating it here. */
    int64_t wait_max = 2 * cfg->segment_bytes;
    if (wait_max < log->store->cfg.roll_wait_bytes_min) wait_max = log->store->cfg.roll_wait_bytes_min;
    if (size_bytes > wait_max) return ROLL_HARD;
    if (size_bytes + (int64_t)len > cfg->segment_bytes) return ROLL_SOFT;
    /* Header timestamps come off the wire: saturating, never an overflow (Kafka's Java long wraps). */
    int64_t waited = rolling_ts_ms >= 0 ? gr_ms_sub_sat(gr_batch_max_timestamp(batch), rolling_ts_ms)
                                        : gr_ms_sub_sat(now_ms, seg->created_ms);
    if (waited > cfg->segment_ms) return ROLL_SOFT;
    return gr_segment_index_full(seg, cfg) ? ROLL_SOFT : ROLL_NO;
}

/* Whether `batch` needs a new segment first. SOFT: segment.bytes, segment.ms or a full index (may wait for
   a spare file, storage/roll.c); HARD: the file position or a relative offset would not fit 31 bits, or
   the segment already holds max(2 x segment.bytes, roll_wait_bytes_min). */
static enum roll_need need_roll(const struct gr_log *log, const struct gr_segment *seg, const uint8_t *batch,
                                size_t len, int64_t now_ms)
{
    return need_roll_at(log, seg, seg->size_bytes, log->log_end_offset, seg->rolling_timestamp_ms, batch, len,
                        now_ms);
}

/* Housekeeping job: truncates the bytes a failed write left after `pos` (write_batch). */
struct undo {
    struct gr_log *log; /* valid until gr_store_close, which drains the jobs first */
    int fd;             /* a duplicate of the segment's descriptor: the segment may be sealed meanwhile */
    int64_t pos;
};

static int undo_job(void *arg)
{
    struct undo *u = arg;
    struct gr_log *log = u->log;
    int err = gr_sys_ftruncate(u->fd, u->pos);
    gr_sys_close(u->fd);
    free(u);
    if (err < 0) {
        log_go_offline(log, "truncating a failed write", err);
        if (log->store->cfg.on_flushed) /* parked acks=-1 produces see the partition offline */
            log->store->cfg.on_flushed(log->store->cfg.on_flushed_ctx, log, atomic_load(&log->durable_offset),
                                       err);
    }
    atomic_store(&log->undo_pending, false);
    return err;
}

/* One pwrite of the whole batch; continues after a short write. On failure the bytes written are undone
   before anything else is appended: the truncation is queued to the housekeeping thread (runs inline
   without flusher threads) and the log refuses appends until it is done (undo_pending). size_bytes never
   covered the failed bytes, so no reader sees them meanwhile. */
static int write_batch(struct gr_log *log, struct gr_segment *seg, const uint8_t *batch, size_t len,
                       int64_t pos)
{
    size_t done = 0;
    int err = 0;
    while (done < len) {
        ssize_t r = gr_sys_pwrite(seg->fd, batch + done, len - done, pos + (int64_t)done);
        if (r < 0) {
            err = (int)r;
            break;
        }
        if (r == 0) {
            err = -ENOSPC;
            break;
        }
        done += (size_t)r;
    }
    if (err == 0) return 0;
    GR_WARN_RATELIMITED("storage: %s: append of %zu bytes at %" PRId64 " failed (%s), %zu bytes to undo",
                        log->dir_name, len, pos, strerror(-err), done);
    if (done == 0) return err; /* a failed pwrite writes nothing: the file is as it was */
    struct undo *u = malloc(sizeof(*u));
    struct gr_job *job = u ? calloc(1, sizeof(*job)) : NULL;
    int fd = job ? dup(seg->fd) : -1;
    if (fd < 0) {
        free(u);
        free(job);
        log_go_offline(log, "queueing the undo of a failed write", -ENOMEM);
        return err;
    }
    *u = (struct undo){.log = log, .fd = fd, .pos = pos};
    job->type = GR_JOB_CALL;
    job->any_thread = true; /* not behind a slow fdatasync: the partition refuses appends meanwhile */
    job->dir_fd = -1;
    job->fn = undo_job;
    job->arg = u;
    atomic_store(&log->undo_pending, true);
    gr_flusher_job(log->store, job);
    return err;
}

/* gr_log_append with the transaction version a control batch is judged by (gr_producer_state_check). */
static int log_append(struct gr_log *log, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                      int16_t marker_version, struct gr_append_result *res);

int gr_log_append(struct gr_log *log, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                  struct gr_append_result *res)
{
    return log_append(log, batch, len, log_append_time_ms, 0, res);
}

static int log_append(struct gr_log *log, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                      int16_t marker_version, struct gr_append_result *res)
{
    assert(log && batch && res);
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    if (gr_log_file_work_pending(log)) return -EAGAIN; /* a failed write or a truncation being done */
    const struct gr_log_config *cfg = log_cfg(log);
    if (len < GR_BATCH_HEADER_BYTES || (int64_t)len != gr_batch_total_bytes(batch) ||
        gr_batch_last_offset_delta(batch) < 0)
        return -EINVAL;
    if (len > (size_t)cfg->max_message_bytes) return -EMSGSIZE;
    int64_t pid = gr_batch_producer_id(batch);
    if (pid >= 0) {
        /* Idempotence: judged here and applied by gr_producer_state_update below, in the same synchronous
           call, so no other batch can be judged against the state in between (log.h). If the write ever
           leaves this call (queued to another thread), the state must be applied when the batch is
           accepted, after any roll's snapshot, and undone if the write fails; otherwise a retry arriving
           meanwhile would pass as new and be written twice. */
        const struct gr_producer_batch *dup;
        switch (gr_producer_state_check(&log->ps, batch, len, marker_version, &dup)) {
        case GR_PRODUCER_DUPLICATE:
            res->base_offset = dup->last_offset - dup->offset_delta;
            res->last_offset = dup->last_offset;
            res->log_append_time_ms = dup->timestamp_ms;
            res->log_start_offset = log->log_start_offset;
            res->duplicate = true;
            return 0;
        case GR_PRODUCER_INVALID_EPOCH:
            return GR_LOG_ERR_INVALID_PRODUCER_EPOCH;
        case GR_PRODUCER_OUT_OF_ORDER: /* after a failed write: its error (internal.h, write_error) */
            return log->write_error < 0 ? log->write_error : GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE;
        case GR_PRODUCER_INVALID_TXN_STATE:
            return GR_LOG_ERR_INVALID_TXN_STATE;
        case GR_PRODUCER_COORDINATOR_FENCED:
            return GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED;
        case GR_PRODUCER_ACCEPT:
            break;
        }
        if (gr_producer_state_reserve(&log->ps, pid) < 0) return -ENOMEM;
    }
    int64_t now = gr_time_wall_ms();
    if (log_append_time_ms >= 0) {
        /* LogAppendTime (Kafka's LogValidator): the broker's clock becomes the max timestamp and the
           timestamp type bit is set; both are inside the CRC span, so the CRC is recomputed. */
        gr_put_be16(batch + GR_BATCH_OFF_ATTRIBUTES,
                    (uint16_t)(gr_batch_attributes(batch) | GR_BATCH_ATTR_LOG_APPEND_TIME));
        gr_put_be64(batch + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)log_append_time_ms);
        gr_batch_crc_store(batch, len);
    }
    int64_t base = log->log_end_offset;
    gr_batch_set_base_offset(batch, base);
    gr_batch_set_leader_epoch(batch, log->leader_epoch);
    struct gr_segment *seg = log_active(log);
    enum roll_need need = need_roll(log, seg, batch, len, now);
    if (need == ROLL_HARD || (need == ROLL_SOFT && !gr_roll_defer(log))) {
        int err = log_roll(log);
        if (err < 0) {
            if (err != -EAGAIN) log->write_error = err; /* -EAGAIN: a roll waiting, not a failed write */
            return err;
        }
        seg = log_active(log);
    }
    {
        /* The fd cap may have closed an idle active segment: the Produce handler reopens it on the pool
           first (gr_log_append_prepare); other writers (the coordinator) reopen it here. Also keeps it at
           the front of the LRU. */
        int fd = gr_segment_fd(seg);
        if (fd < 0) return fd;
    }
    int64_t pos = seg->size_bytes;
    int err = write_batch(log, seg, batch, len, pos);
    if (err < 0) return log->write_error = err;
    log->write_error = 0;
    gr_segment_note_batch(seg, batch, pos, cfg);
    gr_log_note_producer(log, seg, batch, len);
    gr_log_written(log, seg, gr_batch_last_offset(batch) + 1, len, gr_batch_record_count(batch), now);
    if (!(gr_batch_attributes(batch) & GR_BATCH_ATTR_CONTROL)) log->data_end_offset = log->log_end_offset;
    res->base_offset = base;
    res->last_offset = gr_batch_last_offset(batch);
    res->duplicate = false;
    res->log_append_time_ms = log_append_time_ms >= 0 ? log_append_time_ms : -1;
    res->log_start_offset = log->log_start_offset;
    gr_log_after_append(log);
    return 0;
}

void gr_log_note_producer(struct gr_log *log, struct gr_segment *seg, const uint8_t *batch, size_t len)
{
    struct gr_completed_txn done;
    if (gr_producer_state_update(&log->ps, batch, len, &done) < 0) {
        GR_ERROR("storage: %s: out of memory updating producer state at %" PRId64, log->dir_name,
                 gr_batch_base_offset(batch));
        return;
    }
    if (done.producer_id >= 0 && done.aborted) { /* UnifiedLog.append -> LogSegment.updateTxnIndex */
        struct gr_aborted_txn t = {.producer_id = done.producer_id,
                                   .first_offset = done.first_offset,
                                   .last_offset = done.last_offset,
                                   .last_stable_offset = done.last_stable_offset};
        if (gr_segment_txn_append(seg, &t) < 0)
            GR_ERROR("storage: %s: out of memory noting aborted transaction at %" PRId64, log->dir_name,
                     done.last_offset);
    }
}

int gr_log_write_marker(struct gr_log *log, int64_t producer_id, int16_t producer_epoch,
                        int32_t coordinator_epoch, int type, int16_t transaction_version, int64_t now_ms,
                        struct gr_append_result *res)
{
    if (producer_id < 0 || (type != GR_CONTROL_ABORT && type != GR_CONTROL_COMMIT)) return -EINVAL;
    /* Header (61) + one record: length 1, attributes 1, timestamp delta 1, offset delta 1, key length 1,
       key 4, value length 1, value 6, header count 1 = 17 bytes. */
    uint8_t b[GR_BATCH_HEADER_BYTES + 17];
    memset(b, 0, sizeof(b));
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, (uint32_t)(sizeof(b) - GR_BATCH_LOG_OVERHEAD));
    gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)-1);
    b[GR_BATCH_OFF_MAGIC] = 2;
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL);
    gr_put_be64(b + GR_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)now_ms);
    gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)now_ms);
    gr_put_be64(b + GR_BATCH_OFF_PRODUCER_ID, (uint64_t)producer_id);
    gr_put_be16(b + GR_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)producer_epoch);
    gr_put_be32(b + GR_BATCH_OFF_BASE_SEQUENCE, (uint32_t)-1);
    gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, 1);
    uint8_t *r = b + GR_BATCH_HEADER_BYTES;
    r[0] = 16 << 1; /* record length 16 (zig-zag) */
    r[1] = 0;       /* attributes */
    r[2] = 0;       /* timestamp delta */
    r[3] = 0;       /* offset delta */
    r[4] = 4 << 1;  /* key length 4: version 0, type */
    gr_put_be16(r + 5, 0);
    gr_put_be16(r + 7, (uint16_t)type);
    r[9] = 6 << 1; /* value length 6: version 0, coordinator epoch */
    gr_put_be16(r + 10, 0);
    gr_put_be32(r + 12, (uint32_t)coordinator_epoch);
    r[16] = 0; /* no headers */
    gr_batch_crc_store(b, sizeof(b));
    return log_append(log, b, sizeof(b), -1, transaction_version, res);
}

void gr_log_written(struct gr_log *log, struct gr_segment *seg, int64_t end_offset, size_t len,
                    int64_t records, int64_t now_ms)
{
    seg->modified_ms = now_ms;
    gr_lag_ring_append(&log->lag, log->log_end_offset, (int32_t)(seg->size_bytes - (int64_t)len),
                       (int64_t)len, now_ms, log->log_start_offset);
    pthread_mutex_lock(&log->mu);
    log->log_end_offset = end_offset;
    unsynced_add_locked(log, seg);
    pthread_mutex_unlock(&log->mu);
    log->size_bytes += (int64_t)len;
    log->messages_since_flush += records;
    gr_roll_prepare(log, seg, now_ms);
}

void gr_log_after_append(struct gr_log *log)
{
    const struct gr_log_config *cfg = log_cfg(log);
    if (log->epochs_dirty) {
        /* The first batch of a new epoch: its entry must reach the file (queued; no disk call here). */
        int eerr = gr_log_write_epochs(log, false);
        if (eerr < 0)
            GR_WARN_RATELIMITED("storage: %s: queueing the leader-epoch-checkpoint write failed (%s): "
                                "retried later",
                                log->dir_name, strerror(-eerr));
    }
    if (log->messages_since_flush >= cfg->flush_messages)
        gr_log_flush_async(log);
    else if (cfg->flush_ms != INT64_MAX && !atomic_load(&log->on_timed_list))
        gr_flusher_timed_add(log, gr_time_mono_ms() + cfg->flush_ms);
}

/* ---------------------------------------------------------------- shared with replica.c, truncate.c */

bool gr_log_file_work_pending(const struct gr_log *log)
{
    return atomic_load(&((struct gr_log *)log)->undo_pending) ||
           atomic_load(&((struct gr_log *)log)->trunc_pending) ||
           atomic_load(&((struct gr_log *)log)->trunc_warming);
}
int gr_log_need_roll_at(const struct gr_log *log, const struct gr_segment *seg, int64_t size_bytes,
                        int64_t end_offset, int64_t rolling_ts_ms, const uint8_t *batch, size_t len,
                        int64_t now_ms)
{
    return (int)need_roll_at(log, seg, size_bytes, end_offset, rolling_ts_ms, batch, len, now_ms);
}
int gr_log_roll(struct gr_log *log)
{
    return log_roll(log);
}
int gr_log_write_bytes(struct gr_log *log, struct gr_segment *seg, const uint8_t *bytes, size_t len,
                       int64_t pos)
{
    return write_batch(log, seg, bytes, len, pos);
}
void gr_log_go_offline(struct gr_log *log, const char *what, int err)
{
    log_go_offline(log, what, err);
}
int gr_log_seg_index_for(const struct gr_log *log, int64_t offset)
{
    return seg_index_for(log, offset);
}
void gr_log_snapshot_name(char *buf, size_t n, int64_t offset)
{
    snapshot_name(buf, n, offset);
}
void gr_log_after_start_moved(struct gr_log *log)
{
    after_start_moved(log);
}

/* ---------------------------------------------------------------- reads */

int gr_log_read(struct gr_log *log, int64_t offset, int64_t max_bytes, int64_t upper_bound, bool min_one,
                struct gr_log_slice *slice)
{
    *slice =
        (struct gr_log_slice){.fd = -1, .file_pos = 0, .bytes = 0, .first_batch_offset = -1, .ref = NULL};
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    if (offset < log->log_start_offset || offset > log->log_end_offset) return -ERANGE;
    if (upper_bound > log->log_end_offset) upper_bound = log->log_end_offset;
    if (offset >= upper_bound) return 0;
    const struct gr_log_config *cfg = log_cfg(log);
    for (int i = seg_index_for(log, offset); i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        int64_t pos;
        uint8_t hdr[GR_BATCH_HEADER_BYTES];
        int r = gr_segment_find(seg, cfg, offset, &pos, hdr);
        if (r < 0) return r;
        if (r == 0) continue;
        int64_t total = gr_batch_total_bytes(hdr);
        if (gr_batch_last_offset(hdr) >= upper_bound) return 0;
        if (total > max_bytes && !min_one) return 0;
        int64_t end = pos + total;
        int64_t bound_pos = seg->size_bytes;
        if (seg->next_offset > upper_bound) {
            uint8_t h2[GR_BATCH_HEADER_BYTES];
            r = gr_segment_find(seg, cfg, upper_bound, &bound_pos, h2);
            if (r < 0) return r;
        }
        int64_t want = max_bytes > seg->size_bytes - pos ? seg->size_bytes : pos + max_bytes;
        int64_t limit = want < bound_pos ? want : bound_pos;
        if (limit > end) {
            if (limit == bound_pos) {
                end = bound_pos;
            } else {
                int64_t b = gr_segment_boundary_before(seg, end, limit);
                if (b < 0) return (int)b;
                end = b;
            }
        }
        int fd = gr_segment_fd(seg);
        if (fd < 0) return fd;
        gr_segment_ref(seg);
        slice->fd = fd;
        slice->file_pos = pos;
        slice->bytes = end - pos;
        slice->first_batch_offset = gr_batch_base_offset(hdr);
        slice->ref = seg;
        return 0;
    }
    return 0;
}

int64_t gr_log_slice_upper_bound(const struct gr_log *log, const struct gr_log_slice *slice)
{
    const struct gr_segment *seg = slice->ref;
    if (!seg || slice->bytes <= 0) return log->log_end_offset;
    int64_t end = slice->file_pos + slice->bytes;
    if (seg->index_loaded && end < seg->size_bytes) {
        int32_t lo = 0, hi = seg->idx_count; /* the first index entry at or past the slice's end */
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (seg->idx[mid].position < end)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < seg->idx_count) return seg->base_offset + seg->idx[lo].rel_offset;
    }
    int i = seg_index_for(log, seg->base_offset);
    if (log->segs[i] == seg && i + 1 < log->seg_count) return log->segs[i + 1]->base_offset;
    return log->log_end_offset;
}

void gr_log_slice_release(struct gr_log_slice *slice)
{
    gr_log_slice_install(slice); /* a cold slice's pool work: its results go to the segment first */
    if (slice->ref) gr_segment_unref(slice->ref);
    slice->ref = NULL;
    slice->fd = -1;
    slice->bytes = 0;
}

/* Reads the whole batch at pos (total bytes) into a new buffer. */
static int read_batch(struct gr_segment *seg, int64_t pos, int64_t total, uint8_t **out)
{
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    if (gr_segment_nowait_active() && gr_sys_range_resident(fd, pos, total) == 0)
        return gr_segment_nowait_cold_range(seg, fd, pos, total);
    uint8_t *buf = malloc((size_t)total);
    if (!buf) return -ENOMEM;
    ssize_t r = gr_sys_pread_full(fd, buf, (size_t)total, pos);
    if (r != total) {
        free(buf);
        return r < 0 ? (int)r : -EIO;
    }
    *out = buf;
    return 0;
}

/* Scans the records of a batch for the first one (offset >= min_offset) with timestamp >= ts (exact:
   == ts). Returns 1 found, 0 none, -EIO when the records do not parse. */
static int batch_find_record(const uint8_t *b, size_t len, int64_t ts, bool exact, int64_t min_offset,
                             int64_t *offset, int64_t *timestamp)
{
    struct gr_record_iter it;
    int r = gr_record_iter_init(&it, b, len);
    struct gr_record rec;
    int found = 0;
    while (r == 0 && (r = gr_record_iter_next(&it, &rec)) == 1) {
        r = 0;
        if (rec.offset < min_offset) continue;
        if (exact ? rec.timestamp == ts : rec.timestamp >= ts) {
            *offset = rec.offset;
            *timestamp = rec.timestamp;
            found = 1;
            break;
        }
    }
    gr_record_iter_close(&it);
    if (found) return 1;
    return r < 0 ? -EIO : 0;
}

int gr_log_offset_for_time(struct gr_log *log, int64_t ts, int64_t upper_bound, int64_t *offset,
                           int64_t *timestamp, int32_t *leader_epoch)
{
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    const struct gr_log_config *cfg = log_cfg(log);
    int64_t ls = log->log_start_offset;
    if (upper_bound > log->log_end_offset) upper_bound = log->log_end_offset;
    for (int i = 0; i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        if (seg->base_offset >= upper_bound) break;
        if (seg->size_bytes == 0 || seg->next_offset <= ls || seg->max_timestamp_ms < ts) continue;
        int err = gr_segment_load_index(seg, cfg);
        if (err < 0) return err;
        int64_t from = seg->base_offset;
        int32_t lo = 0, hi = seg->tidx_count - 1;
        while (lo <= hi) { /* largest time entry with timestamp <= ts */
            int32_t mid = lo + (hi - lo) / 2;
            if (seg->tidx[mid].timestamp_ms <= ts) {
                from = seg->base_offset + seg->tidx[mid].rel_offset;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        if (from < ls) from = ls;
        int64_t pos;
        uint8_t hdr[GR_BATCH_HEADER_BYTES];
        int r = gr_segment_find(seg, cfg, from, &pos, hdr);
        if (r < 0) return r;
        if (r == 0) continue;
        int fd = gr_segment_fd(seg);
        if (fd < 0) return fd;
        struct gr_seg_reader rd;
        if (gr_seg_reader_init(&rd, fd, HEADER_READ_BYTES) < 0) return -ENOMEM;
        rd.end = seg->size_bytes; /* no-wait reads check residency up to here */
        int result = 0;
        while (pos < seg->size_bytes && result == 0) {
            const uint8_t *h = gr_seg_reader_get(&rd, pos, GR_BATCH_HEADER_BYTES, &err);
            if (!h) {
                result = err ? err : -EIO;
                break;
            }
            int64_t total = gr_batch_total_bytes(h);
            if (gr_batch_last_offset(h) >= upper_bound) {
                result = -ENOENT;
                break;
            }
            if (gr_batch_max_timestamp(h) >= ts && gr_batch_last_offset(h) >= ls) {
                int32_t epoch = gr_batch_leader_epoch(h);
                uint8_t *b;
                result = read_batch(seg, pos, total, &b);
                if (result < 0) break;
                result = batch_find_record(b, (size_t)total, ts, false, ls, offset, timestamp);
                free(b);
                if (result == 1) *leader_epoch = epoch;
            }
            pos += total;
        }
        gr_seg_reader_free(&rd);
        if (result == 1) return 0;
        if (result < 0) return result;
    }
    return -ENOENT;
}

/* Largest (timestamp, batch last offset) among batches of seg with last offset < bound, scanning from the
   last time index point below the bound. Returns 0 (ts -1 when none) or -errno. */
static int seg_max_below(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t bound, int64_t *ts,
                         int64_t *shallow)
{
    *ts = -1;
    *shallow = -1;
    if (seg->next_offset <= bound) {
        *ts = seg->max_timestamp_ms;
        *shallow = seg->max_timestamp_offset;
        return 0;
    }
    int err = gr_segment_load_index(seg, cfg);
    if (err < 0) return err;
    int64_t from = seg->base_offset;
    for (int32_t i = seg->tidx_count - 1; i >= 0; i--) {
        if (seg->base_offset + seg->tidx[i].rel_offset < bound) {
            *ts = seg->tidx[i].timestamp_ms;
            *shallow = from = seg->base_offset + seg->tidx[i].rel_offset;
            break;
        }
    }
    int64_t pos;
    uint8_t hdr[GR_BATCH_HEADER_BYTES];
    int r = gr_segment_find(seg, cfg, from, &pos, hdr);
    if (r <= 0) return r;
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    struct gr_seg_reader rd;
    if (gr_seg_reader_init(&rd, fd, HEADER_READ_BYTES) < 0) return -ENOMEM;
    rd.end = seg->size_bytes;
    while (pos < seg->size_bytes) {
        const uint8_t *h = gr_seg_reader_get(&rd, pos, GR_BATCH_HEADER_BYTES, &err);
        if (!h) {
            err = err ? err : -EIO;
            break;
        }
        if (gr_batch_last_offset(h) >= bound) break;
        if (gr_batch_max_timestamp(h) > *ts) {
            *ts = gr_batch_max_timestamp(h);
            *shallow = gr_batch_last_offset(h);
        }
        pos += gr_batch_total_bytes(h);
    }
    gr_seg_reader_free(&rd);
    return err;
}

int gr_log_max_timestamp(struct gr_log *log, int64_t upper_bound, int64_t *offset, int64_t *timestamp,
                         int32_t *leader_epoch)
{
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    const struct gr_log_config *cfg = log_cfg(log);
    if (upper_bound > log->log_end_offset) upper_bound = log->log_end_offset;
    int64_t best_ts = -1, best_shallow = -1;
    struct gr_segment *best = NULL;
    for (int i = 0; i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        if (seg->base_offset >= upper_bound) break;
        if (seg->size_bytes == 0) continue;
        int64_t ts, shallow;
        int err = seg_max_below(seg, cfg, upper_bound, &ts, &shallow);
        if (err < 0) return err;
        if (ts > best_ts) {
            best_ts = ts;
            best_shallow = shallow;
            best = seg;
        }
    }
    if (!best) return -ENOENT; /* batches without timestamps (-1) are not candidates */
    int64_t pos;
    uint8_t hdr[GR_BATCH_HEADER_BYTES];
    int r = gr_segment_find(best, cfg, best_shallow, &pos, hdr);
    if (r <= 0) return r < 0 ? r : -EIO;
    uint8_t *b;
    int64_t total = gr_batch_total_bytes(hdr);
    r = read_batch(best, pos, total, &b);
    if (r < 0) return r;
    r = batch_find_record(b, (size_t)total, best_ts, true, INT64_MIN, offset, timestamp);
    free(b);
    if (r == 0) /* the header's max timestamp is not any record's (a producer may set it): the batch */
    {
        *offset = gr_batch_base_offset(hdr);
        *timestamp = best_ts;
        r = 1;
    }
    if (r < 0) return r;
    *leader_epoch = gr_batch_leader_epoch(hdr);
    return 0;
}

int gr_log_offset_for_time_nowait(struct gr_log *log, int64_t ts, int64_t upper_bound, int64_t *offset,
                                  int64_t *timestamp, int32_t *leader_epoch, struct gr_log_slice *cold)
{
    struct gr_read_nowait nw = {0};
    *cold = (struct gr_log_slice){.fd = -1, .first_batch_offset = -1};
    gr_segment_nowait_set(&nw);
    int r = gr_log_offset_for_time(log, ts, upper_bound, offset, timestamp, leader_epoch);
    gr_segment_nowait_set(NULL);
    return r == -EAGAIN ? gr_log_nowait_cold(&nw, cold) : r;
}

int gr_log_max_timestamp_nowait(struct gr_log *log, int64_t upper_bound, int64_t *offset, int64_t *timestamp,
                                int32_t *leader_epoch, struct gr_log_slice *cold)
{
    struct gr_read_nowait nw = {0};
    *cold = (struct gr_log_slice){.fd = -1, .first_batch_offset = -1};
    gr_segment_nowait_set(&nw);
    int r = gr_log_max_timestamp(log, upper_bound, offset, timestamp, leader_epoch);
    gr_segment_nowait_set(NULL);
    return r == -EAGAIN ? gr_log_nowait_cold(&nw, cold) : r;
}

void gr_log_files_admit(struct gr_log *log)
{
    for (int i = 0; i < log->seg_count; i++)
        if (log->segs[i]->fd >= 0) gr_segment_fd(log->segs[i]);
}

int gr_log_keep_active_open(struct gr_log *log)
{
    log->active_fd_kept = true;
    if (log->deleted || atomic_load(&log->offline)) return 0;
    gr_segment_lru_remove(log_active(log)); /* exempt from now on: no longer counted (segment.c) */
    int fd = gr_segment_fd(log_active(log));
    return fd < 0 ? fd : 0;
}

bool gr_log_append_ready(struct gr_log *log)
{
    return log->deleted || atomic_load(&log->offline) || log_active(log)->fd >= 0;
}

int gr_log_append_prepare(struct gr_log *log, struct gr_log_slice *pin)
{
    *pin = (struct gr_log_slice){.fd = -1, .first_batch_offset = -1};
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    struct gr_segment *seg = log_active(log);
    if (seg->fd >= 0) { /* open: a reference keeps the cap from closing it (segment.c lru_evict) */
        gr_segment_ref(seg);
        pin->first_batch_offset = seg->base_offset;
        pin->ref = seg;
        return 0;
    }
    struct gr_read_nowait nw = {.kind = 3, .seg = seg};
    int r = gr_log_nowait_cold(&nw, pin);
    return r == -EAGAIN ? 1 : r;
}

/* ---------------------------------------------------------------- start offset, retention */

/* Removes the first `count` segments (never the active one). */
static void remove_head_segments(struct gr_log *log, int count)
{
    assert(count < log->seg_count);
    for (int i = 0; i < count; i++) {
        log->size_bytes -= log->segs[i]->size_bytes;
        GR_INFO("storage: %s: deleting segment %" PRId64 " (%" PRId64 " bytes)", log->dir_name,
                log->segs[i]->base_offset, log->segs[i]->size_bytes);
        drop_segment(log, log->segs[i]);
    }
    memmove(log->segs, log->segs + count, sizeof(*log->segs) * (size_t)(log->seg_count - count));
    log->seg_count -= count;
}

static void after_start_moved(struct gr_log *log)
{
    if (log->segs[0]->base_offset > log->log_start_offset) log->log_start_offset = log->segs[0]->base_offset;
    if (log->high_watermark >= 0 && log->high_watermark < log->log_start_offset)
        log->high_watermark = log->log_start_offset;
    gr_producer_state_truncate_head(&log->ps, log->log_start_offset);
    epochs_truncate_start(log);
    snapshots_prune(log);
    log->store->ls_checkpoint_dirty = true;
}

void gr_log_start_moved(struct gr_log *log, int64_t old_start)
{
    struct gr_store *st = log->store;
    if (st->start_hook && log->log_start_offset > old_start)
        st->start_hook(st->start_hook_ctx, log, old_start, log->log_start_offset);
}

void gr_store_set_start_hook(struct gr_store *store, gr_store_start_hook fn, void *ctx)
{
    store->start_hook = fn;
    store->start_hook_ctx = ctx;
}

int64_t gr_log_start_offset_for_checkpoint(const struct gr_log *log)
{
    return log->ls_pending_ops > 0 && log->ls_pending > log->log_start_offset ? log->ls_pending
                                                                              : log->log_start_offset;
}

int gr_log_delete_records_begin(struct gr_log *log, int64_t offset)
{
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    if (offset > log->log_end_offset) return -ERANGE;
    if (offset <= log->log_start_offset) return 0;
    if (log->ls_pending_ops == 0 || offset > log->ls_pending) log->ls_pending = offset;
    log->ls_pending_ops++;
    return 1;
}

int gr_log_delete_records_end(struct gr_log *log, int64_t offset, int err)
{
    assert(log->ls_pending_ops > 0);
    if (--log->ls_pending_ops == 0) log->ls_pending = log->log_start_offset;
    if (gr_err_no_space(err)) {
        /* The checkpoint cannot be written for lack of space, and deleting the segments is what frees it:
           go ahead (Kafka writes this checkpoint only periodically too); the next checkpoint pass retries.
           Until then a crash can bring back the records below `offset` (never lose any above). */
        GR_WARN_RATELIMITED("storage: %s: DeleteRecords to %" PRId64 " applied although the log start "
                            "checkpoint could not be written (%s): written again later",
                            log->dir_name, offset, strerror(-err));
        err = 0;
    }
    if (err < 0) return err;
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    if (offset <= log->log_start_offset) return 0; /* retention or another DeleteRecords went further */
    int64_t old_start = log->log_start_offset;
    log->log_start_offset = offset;
    int del = 0;
    while (del + 1 < log->seg_count && log->segs[del + 1]->base_offset <= offset)
        del++;
    if (del) remove_head_segments(log, del);
    after_start_moved(log);
    gr_log_start_moved(log, old_start);
    return 0;
}

int gr_log_delete_records(struct gr_log *log, int64_t offset)
{
    int r = gr_log_delete_records_begin(log, offset);
    if (r <= 0) return r;
    int64_t ticket;
    int err = gr_store_log_start_checkpoint_async(log->store, &ticket);
    if (err == 0) err = gr_store_checkpoint_wait(log->store, ticket);
    return gr_log_delete_records_end(log, offset, err);
}

int64_t gr_log_hw_bound(struct gr_log *log)
{
    if (log->hwm_from_server) return log->high_watermark;
    int64_t durable = atomic_load(&log->durable_offset);
    return log->high_watermark >= 0 && log->high_watermark < durable ? log->high_watermark : durable;
}

/* UnifiedLog.deleteOldSegments: time, size and log start offset retention, each bounded by the high
   watermark (deletableSegments' upperBoundOffset <= highWatermark). */
void gr_log_retention(struct gr_log *log, int64_t now_ms)
{
    if (log->deleted || atomic_load(&log->offline) || atomic_load(&log->trunc_pending)) return;
    const struct gr_log_config *cfg = log_cfg(log);
    int64_t bound = gr_log_hw_bound(log);
    if (bound > log->log_end_offset) bound = log->log_end_offset;
    int64_t excess = cfg->retention_bytes >= 0 ? log->size_bytes - cfg->retention_bytes : -1;
    int n = log->seg_count, del = 0;
    for (; del < n; del++) {
        struct gr_segment *seg = log->segs[del];
        int64_t end = del + 1 < n ? log->segs[del + 1]->base_offset : log->log_end_offset;
        if (end > bound || seg->size_bytes == 0) break;
        bool go = del + 1 < n && log->segs[del + 1]->base_offset <= log->log_start_offset;
        if (cfg->delete_policy && cfg->retention_ms >= 0) {
            int64_t t = seg->max_timestamp_ms >= 0 ? seg->max_timestamp_ms : seg->modified_ms;
            go = go || gr_ms_sub_sat(now_ms, t) > cfg->retention_ms;
        }
        if (cfg->delete_policy && cfg->retention_bytes >= 0) go = go || excess - seg->size_bytes >= 0;
        if (!go) break;
        excess -= seg->size_bytes;
    }
    if (del == 0) return;
    if (del == n) {
        /* Everything expired, the active segment too: roll so that it can go (Kafka does the same). With
           no spare file ready the roll waits for one (storage/roll.c): the active segment goes at a later
           run. */
        if (gr_roll_defer(log) || log_roll(log) < 0) del = n - 1;
    }
    if (del == 0) return;
    int64_t old_start = log->log_start_offset;
    remove_head_segments(log, del);
    after_start_moved(log);
    gr_log_start_moved(log, old_start);
}

/* ---------------------------------------------------------------- open and recovery */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool has_suffix(const char *s, const char *sfx)
{
    size_t n = strlen(s), m = strlen(sfx);
    return n >= m && strcmp(s + n - m, sfx) == 0;
}

/* Lists the partition directory: segment base offsets (sorted) and snapshot offsets (into the log);
   removes leftovers of interrupted atomic writes and Kafka's .deleted/.cleaned/.swap files. */
static int list_dir(struct gr_log *log, int64_t **bases_out, int *count_out)
{
    gr_sys_audit_note("readdir", log->dir_fd, NULL);
    int fd = dup(log->dir_fd);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    rewinddir(d);
    int64_t *bases = NULL;
    int n = 0, cap = 0, err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        int64_t off;
        if (has_suffix(name, ".tmp") || has_suffix(name, ".deleted") || has_suffix(name, ".cleaned") ||
            has_suffix(name, ".swap")) {
            gr_sys_unlinkat(log->dir_fd, name, 0);
        } else if (gr_segment_name_parse(name, ".log", &off)) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                int64_t *nb = realloc(bases, sizeof(int64_t) * (size_t)cap);
                if (!nb) {
                    err = -ENOMEM;
                    break;
                }
                bases = nb;
            }
            bases[n++] = off;
        } else if (gr_segment_name_parse(name, ".snapshot", &off)) {
            if (log->snapshot_count == log->snapshot_cap) {
                int ncap = log->snapshot_cap ? log->snapshot_cap * 2 : 8;
                int64_t *ns = realloc(log->snapshots, sizeof(int64_t) * (size_t)ncap);
                if (!ns) {
                    err = -ENOMEM;
                    break;
                }
                log->snapshots = ns;
                log->snapshot_cap = ncap;
            }
            log->snapshots[log->snapshot_count++] = off;
        }
    }
    closedir(d);
    if (err < 0) {
        free(bases);
        return err;
    }
    if (n) qsort(bases, (size_t)n, sizeof(int64_t), cmp_i64);
    if (log->snapshot_count) qsort(log->snapshots, (size_t)log->snapshot_count, sizeof(int64_t), cmp_i64);
    *bases_out = bases;
    *count_out = n;
    return 0;
}

/* Deletes segments [from, seg_count) right now (recovery). */
static void truncate_segments(struct gr_log *log, int from)
{
    for (int i = log->seg_count - 1; i >= from; i--) {
        struct gr_segment *seg = log->segs[i];
        GR_WARN("storage: %s: recovery deletes segment %" PRId64 " (%" PRId64
                " bytes) after the truncation point",
                log->dir_name, seg->base_offset, seg->size_bytes);
        seg->deleted = true;
        gr_segment_lru_remove(seg);
        char name[GR_SEGMENT_NAME_BYTES];
        static const char *const sfx[] = {".log", ".index", ".timeindex", ".txnindex"};
        for (int k = 0; k < 4; k++) {
            gr_segment_file_name(name, seg->base_offset, sfx[k]);
            gr_sys_unlinkat(log->dir_fd, name, 0);
        }
        gr_segment_unref(seg);
    }
    log->seg_count = from;
}

/* Makes the last segment the active one: read-write fd, out of the LRU. */
static int make_active(struct gr_log *log)
{
    struct gr_segment *seg = log_active(log);
    gr_segment_lru_remove(seg);
    gr_sys_close(seg->fd);
    seg->fd = -1;
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, ".log");
    int fd = gr_sys_openat(log->dir_fd, name, O_RDWR, 0);
    if (fd < 0) return fd;
    seg->fd = fd;
    seg->sealed = false;
    return 0;
}

/* Full validation of segments [k, n): truncates at the first bad byte and deletes what follows. */
static int recover_from(struct gr_log *log, int k)
{
    const struct gr_log_config *cfg = log_cfg(log);
    for (int i = k; i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        int64_t file_bytes;
        const char *why;
        int err = gr_segment_recover(seg, cfg, &file_bytes, &why);
        if (err < 0) return err;
        bool gap = i + 1 < log->seg_count && seg->next_offset != log->segs[i + 1]->base_offset;
        if (seg->size_bytes < file_bytes) {
            GR_WARN("storage: %s: recovery truncates segment %" PRId64 " at %" PRId64 ": %" PRId64
                    " bytes dropped (%s); log end offset %" PRId64,
                    log->dir_name, seg->base_offset, seg->size_bytes, file_bytes - seg->size_bytes, why,
                    seg->next_offset);
            char name[GR_SEGMENT_NAME_BYTES];
            gr_segment_file_name(name, seg->base_offset, ".log");
            int fd = gr_sys_openat(log->dir_fd, name, O_RDWR, 0);
            if (fd < 0) return fd;
            err = gr_sys_ftruncate(fd, seg->size_bytes);
            gr_sys_close(fd);
            if (err < 0) return err;
        } else if (gap) {
            GR_WARN("storage: %s: segment %" PRId64 " ends at offset %" PRId64
                    " but the next starts at %" PRId64,
                    log->dir_name, seg->base_offset, seg->next_offset, log->segs[i + 1]->base_offset);
        }
        if (seg->size_bytes < file_bytes || gap) {
            truncate_segments(log, i + 1);
            break;
        }
        if (i + 1 < log->seg_count) gr_segment_seal(seg);
    }
    return make_active(log);
}

/* fdatasync every segment from k (their data and rebuilt indexes) and the directory after recovery. */
static int sync_recovered(struct gr_log *log, int k)
{
    for (int i = k; i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        int fd = gr_segment_fd(seg);
        int err = fd < 0 ? fd : gr_sys_fdatasync(fd);
        if (err == 0 && seg->index_fd >= 0) err = gr_sys_fdatasync(seg->index_fd);
        if (err == 0 && seg->timeindex_fd >= 0) err = gr_sys_fdatasync(seg->timeindex_fd);
        if (err < 0) return err;
        if (seg->sealed) {
            gr_sys_close(seg->index_fd);
            gr_sys_close(seg->timeindex_fd);
            seg->index_fd = seg->timeindex_fd = -1;
        }
    }
    return gr_dir_sync(log->dir_fd);
}

/* Applies the headers of every batch with base offset >= from to the producer state. */
static int replay_producers(struct gr_log *log, int64_t from)
{
    const struct gr_log_config *cfg = log_cfg(log);
    for (int i = seg_index_for(log, from); i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        int64_t pos = 0;
        uint8_t hdr[GR_BATCH_HEADER_BYTES];
        if (seg->size_bytes == 0) continue; /* e.g. a truncation's new segment, its files not made yet */
        if (seg->base_offset < from) {
            int r = gr_segment_find(seg, cfg, from, &pos, hdr);
            if (r < 0) return r;
            if (r == 0) continue;
        }
        int fd = gr_segment_fd(seg);
        if (fd < 0) return fd;
        struct gr_seg_reader rd;
        if (gr_seg_reader_init(&rd, fd, SCAN_READ_BYTES) < 0) return -ENOMEM;
        int err = 0;
        /* The replay rebuilds this segment's aborted-transaction entries from `from` on (recovery: the
           .txnindex of a segment recovery replays; truncation: the entries past the cut are gone). */
        gr_segment_txn_truncate(seg, from);
        while (pos < seg->size_bytes) {
            const uint8_t *h = gr_seg_reader_get(&rd, pos, GR_BATCH_HEADER_BYTES, &err);
            if (!h) {
                err = err ? err : -EIO;
                break;
            }
            int64_t total = gr_batch_total_bytes(h);
            size_t have;
            if (!(h = gr_seg_reader_batch_for_producers(&rd, pos, h, &have, &err))) {
                err = err ? err : -EIO;
                break;
            }
            if (gr_batch_base_offset(h) >= from) {
                struct gr_completed_txn done;
                if ((err = gr_producer_state_update(&log->ps, h, have, &done)) < 0) break;
                if (done.producer_id >= 0 && done.aborted) {
                    struct gr_aborted_txn t = {.producer_id = done.producer_id,
                                               .first_offset = done.first_offset,
                                               .last_offset = done.last_offset,
                                               .last_stable_offset = done.last_stable_offset};
                    if ((err = gr_segment_txn_append(seg, &t)) < 0) break;
                }
            }
            pos += total;
        }
        gr_seg_reader_free(&rd);
        if (err < 0) return err;
    }
    return 0;
}

/* Producer state = newest readable snapshot at or below the log end offset + the batches after it. */
static int load_producer_state(struct gr_log *log)
{
    /* Snapshots above the log end offset describe data that recovery dropped. */
    while (log->snapshot_count && log->snapshots[log->snapshot_count - 1] > log->log_end_offset) {
        char name[48];
        snapshot_name(name, sizeof(name), log->snapshots[--log->snapshot_count]);
        gr_sys_unlinkat(log->dir_fd, name, 0);
    }
    int64_t from = log->segs[0]->base_offset;
    gr_producer_state_reset(&log->ps, from);
    /* The replay must cover every segment recovery re-validated (their .txnindex may predate a crash: the
       replay rebuilds it), so snapshots above the first of them are skipped (kept on disk). */
    int usable = log->snapshot_count;
    while (usable && log->snapshots[usable - 1] > log->replay_limit)
        usable--;
    int skipped = log->snapshot_count - usable;
    log->snapshot_count = usable;
    while (log->snapshot_count) {
        int64_t off = log->snapshots[log->snapshot_count - 1];
        char name[48], *buf;
        size_t len;
        snapshot_name(name, sizeof(name), off);
        int err = gr_file_read_all(log->dir_fd, name, 1u << 30, &buf, &len);
        if (err == 0) {
            err = gr_producer_state_decode(&log->ps, (const uint8_t *)buf, len);
            free(buf);
            if (err == 0 && log->ps.end_offset != off) err = -EINVAL;
        }
        if (err == 0 && off >= from) {
            from = off;
            break;
        }
        if (err == 0) {
            /* A snapshot below the first segment still holds producers; batches are replayed from the
               first segment on. */
            from = log->segs[0]->base_offset;
            break;
        }
        if (!gr_err_damaged(err) && err != -ENOENT) { /* e.g. out of descriptors: keep it, fail the load */
            GR_ERROR("storage: %s: producer snapshot %s cannot be read (%s)", log->dir_name, name,
                     strerror(-err));
            return err;
        }
        GR_WARN("storage: %s: producer snapshot %s unusable (%s), deleted", log->dir_name, name,
                strerror(-err));
        gr_sys_unlinkat(log->dir_fd, name, 0);
        log->snapshot_count--;
        gr_producer_state_reset(&log->ps, log->segs[0]->base_offset);
    }
    /* The skipped snapshots stay listed (kept on disk; pruned as usual). Those dropped as damaged above
       were all at or below the limit, so the skipped ones still follow the kept ones in order. */
    if (skipped) {
        int kept = log->snapshot_count;
        memmove(log->snapshots + kept, log->snapshots + usable, sizeof(int64_t) * (size_t)skipped);
        log->snapshot_count = kept + skipped;
    }
    int err = replay_producers(log, from);
    if (err < 0) return err;
    log->ps.end_offset = log->log_end_offset;
    gr_producer_state_truncate_head(&log->ps, log->log_start_offset);
    if (log->high_watermark >= 0) gr_producer_state_on_high_watermark(&log->ps, log->high_watermark);
    return 0;
}

/* Each open of the log starts a new leader epoch at the log end offset (kept in memory: written once a batch
   carries it, see epochs_write_needed). */
static int load_epochs(struct gr_log *log)
{
    struct gr_epoch_entry *e;
    int n;
    int err = gr_epoch_ckpt_read(log->dir_fd, &e, &n);
    if (err < 0 && err != -ENOENT && !gr_err_damaged(err)) return err; /* e.g. EMFILE: the load fails */
    if (err < 0 && err != -ENOENT)
        GR_WARN("storage: %s: leader-epoch-checkpoint unreadable (%s), starting afresh", log->dir_name,
                strerror(-err));
    if (err < 0) {
        e = NULL;
        n = 0;
    }
    int32_t last_epoch = n ? e[n - 1].epoch : -1;
    /* The file may lag the log (its write failed for lack of space, then a crash): the epoch of the last
       batch counts too, so an epoch is never handed out twice; its entry is restored (start offset as far
       as the scan saw it: the active segment's first batch with that epoch, or later). */
    const struct gr_segment *act = log_active(log);
    if (act->last_leader_epoch > last_epoch && act->last_epoch_start < log->log_end_offset) {
        struct gr_epoch_entry *ne = realloc(e, sizeof(*e) * (size_t)(n + 1));
        if (ne) {
            e = ne;
            int64_t start = act->last_epoch_start;
            if (n && start < e[n - 1].start_offset) start = e[n - 1].start_offset;
            e[n++] = (struct gr_epoch_entry){act->last_leader_epoch, start};
            last_epoch = act->last_leader_epoch;
            GR_WARN("storage: %s: leader-epoch-checkpoint lacks epoch %" PRId32 " of the log's last batch: "
                    "restored from offset %" PRId64,
                    log->dir_name, last_epoch, start);
        }
    }
    /* Kafka's truncateFromEnd: epochs starting at or after the log end offset have no batches left. */
    while (n && e[n - 1].start_offset >= log->log_end_offset)
        n--;
    log->epochs = e;
    log->epoch_count = n;
    log->epoch_cap = n;
    if (!e) {
        log->epoch_cap = 0;
    }
    epochs_truncate_start(log);
    log->leader_epoch = last_epoch + 1;
    /* Not written here: an open rewrites no file whose content it did not change in a way a batch or an
       answer depends on (issue 26: a full disk must not stop the start). The first append in this epoch
       queues the write (gr_log_append), the periodic checkpoint and a clean close retry it. */
    return epochs_push(log, log->leader_epoch, log->log_end_offset);
}

/* Checks or writes partition.metadata. `loading` (an existing partition at open): a write failing for
   lack of space is warned about and left to the next open (the file is rebuilt from the topic file). */
static int partition_metadata(struct gr_log *log, bool loading)
{
    char want[64], id[23];
    gr_uuid_to_base64url(log->topic->id, id);
    int n = snprintf(want, sizeof(want), "version: 0\ntopic_id: %s\n", id);
    char *buf;
    size_t len;
    int err = gr_file_read_all(log->dir_fd, "partition.metadata", 4096, &buf, &len);
    if (err == 0) {
        bool same = len == (size_t)n && memcmp(buf, want, len) == 0;
        free(buf);
        if (same) return 0;
        return -EEXIST; /* another incarnation of the topic */
    }
    err = gr_file_write_atomic(log->dir_fd, "partition.metadata", want, (size_t)n);
    if (gr_err_no_space(err) && loading) {
        /* Rebuildable from the topic file: an open on a full disk goes on; the next open writes it. */
        GR_WARN_RATELIMITED("storage: %s: writing partition.metadata failed (%s): written at the next open",
                            log->dir_name, strerror(-err));
        err = 0;
    }
    return err;
}

static int open_dir(struct gr_log *log, bool loading)
{
    struct gr_store *store = log->store;
    for (int attempt = 0; attempt < 2; attempt++) {
        int err = gr_sys_mkdirat(store->root_fd, log->dir_name, 0755);
        bool created = err == 0;
        if (err < 0 && err != -EEXIST) return err;
        if (created && (err = gr_dir_sync(store->root_fd)) < 0) return err;
        log->dir_fd = gr_sys_openat(store->root_fd, log->dir_name, O_RDONLY | O_DIRECTORY, 0);
        if (log->dir_fd < 0) return log->dir_fd;
        err = partition_metadata(log, loading);
        if (err != -EEXIST) return err;
        /* The directory belongs to an older topic of the same name: move it out of the way. */
        uint8_t u[16];
        gr_uuid_random(u);
        char aside[GR_TOPIC_NAME_BYTES_MAX + 64];
        snprintf(aside, sizeof(aside), "%s.", log->dir_name);
        for (int i = 0; i < 16; i++)
            snprintf(aside + strlen(aside), 3, "%02x", u[i]);
        strcat(aside, "-delete");
        GR_WARN("storage: %s: partition.metadata names another topic id, moved to %s", log->dir_name, aside);
        gr_sys_close(log->dir_fd);
        log->dir_fd = -1;
        if ((err = gr_sys_renameat(store->root_fd, log->dir_name, store->root_fd, aside)) < 0) return err;
    }
    return -EEXIST;
}

static struct gr_log *log_alloc(struct gr_store *store, struct gr_topic *topic, int32_t partition)
{
    struct gr_log *log = calloc(1, sizeof(*log));
    if (!log) return NULL;
    log->store = store;
    log->topic = topic;
    log->partition = partition;
    log->dir_fd = -1;
    log->high_watermark = -1;
    if (asprintf(&log->dir_name, "%s-%d", topic->name, partition) < 0) {
        free(log);
        return NULL;
    }
    pthread_mutex_init(&log->mu, NULL);
    atomic_init(&log->durable_offset, 0);
    atomic_init(&log->offline, false);
    atomic_init(&log->spare_fd, -1);
    atomic_init(&log->spare_requested, false);
    atomic_init(&log->spare_failed, false);
    atomic_init(&log->undo_pending, false);
    atomic_init(&log->trunc_pending, false);
    atomic_init(&log->trunc_warming, false);
    log->trunc_snap_end = -1;
    gr_producer_state_init(&log->ps);
    log->replay_limit = INT64_MAX;
    gr_lag_ring_init(&log->lag, gr_time_wall_ms());
    return log;
}

static int open_segments(struct gr_log *log, const int64_t *bases, int nb, int64_t ckpt_log_start)
{
    int err = segs_reserve(log, nb > 0 ? nb : 1);
    if (err < 0) return err;
    for (int i = 0; i < nb; i++) {
        struct gr_segment *seg = gr_segment_new(log, bases[i]);
        if (!seg) return -ENOMEM;
        log->segs[log->seg_count++] = seg;
        if ((err = gr_segment_open(seg, i == nb - 1)) < 0) return err;
        if ((err = gr_segment_txn_load(seg)) < 0) return err; /* the aborted transactions (.txnindex) */
    }
    if (nb == 0) {
        struct gr_segment *seg = gr_segment_new(log, ckpt_log_start > 0 ? ckpt_log_start : 0);
        if (!seg) return -ENOMEM;
        if ((err = gr_segment_create(seg)) < 0) {
            gr_segment_unref(seg);
            return err;
        }
        log->segs[log->seg_count++] = seg;
        log->dir_dirty = true;
    }
    return 0;
}

/* Sealed segments below index k are trusted: their ends come from the next base offset, their largest
   timestamps from the time index. */
static int load_trusted(struct gr_log *log, int k)
{
    for (int i = 0; i < k; i++) {
        struct gr_segment *seg = log->segs[i];
        seg->next_offset = log->segs[i + 1]->base_offset;
        int err = gr_segment_load_max_timestamp(seg, log_cfg(log));
        if (err < 0) return err;
    }
    return 0;
}

static int recover(struct gr_log *log, bool clean, int64_t rp)
{
    int n = log->seg_count;
    if (clean) {
        log->replay_limit = INT64_MAX;
        int err = load_trusted(log, n - 1);
        if (err < 0) return err;
        err = gr_segment_scan_tail(log_active(log), log_cfg(log));
        if (err == 0) return 0;
        GR_WARN("storage: %s: active segment inconsistent after a clean shutdown (%s), recovering it",
                log->dir_name, strerror(-err));
        log->replay_limit = log->segs[n - 1]->base_offset;
        int serr = recover_from(log, n - 1);
        return serr < 0 ? serr : sync_recovered(log, n - 1);
    }
    int k = seg_index_for(log, rp < 0 ? 0 : rp);
    log->replay_limit = log->segs[k]->base_offset; /* load_producer_state replays from at most here */
    int err = load_trusted(log, k);
    if (err < 0) return err;
    GR_INFO("storage: %s: recovering from segment %" PRId64 " (recovery point %" PRId64 ")", log->dir_name,
            log->segs[k]->base_offset, rp);
    err = recover_from(log, k);
    if (err < 0) return err;
    return sync_recovered(log, k);
}

/* The lag history after an open (storage/lag.h): one sample per non-empty segment at its base offset, timed
   by its first batch's timestamp when known, else the previous segment's max timestamp, else its own. */
static void lag_rebuild(struct gr_log *log)
{
    int64_t suffix = log->size_bytes;
    for (int i = 0; i < log->seg_count; i++) {
        const struct gr_segment *seg = log->segs[i];
        int64_t t = seg->rolling_timestamp_ms;
        if (t < 0 && i > 0) t = log->segs[i - 1]->max_timestamp_ms;
        if (t < 0) t = seg->max_timestamp_ms;
        if (seg->size_bytes > 0 && t >= 0) gr_lag_ring_rebuilt(&log->lag, seg->base_offset, t, -suffix);
        suffix -= seg->size_bytes;
    }
}

int gr_log_load(struct gr_store *store, struct gr_topic *topic, int32_t partition, bool clean,
                int64_t ckpt_recovery_point, int64_t ckpt_log_start, int64_t ckpt_hwm, struct gr_log **out)
{
    struct gr_log *log = log_alloc(store, topic, partition);
    if (!log) return -ENOMEM;
    int64_t *bases = NULL;
    int nb = 0;
    int err = open_dir(log, true);
    if (err == 0) err = gr_cleaner_recover_dir(log->dir_fd, log->dir_name); /* half-done compaction swaps */
    if (err == 0) err = list_dir(log, &bases, &nb);
    if (err == 0) err = open_segments(log, bases, nb, ckpt_log_start);
    free(bases);
    if (err == 0 && nb > 0) err = recover(log, clean, ckpt_recovery_point);
    if (err < 0) {
        GR_ERROR("storage: %s: open failed (%s)", log->dir_name, strerror(-err));
        gr_log_free(log);
        return err;
    }
    log->log_end_offset = log_active(log)->next_offset;
    log->data_end_offset = log->log_end_offset; /* batch attributes not read at open: the upper bound */
    int64_t ls = ckpt_log_start > log->segs[0]->base_offset ? ckpt_log_start : log->segs[0]->base_offset;
    if (ls > log->log_end_offset) {
        /* Data at or above the checkpointed log start offset was lost: start an empty log there. */
        GR_WARN("storage: %s: log end offset %" PRId64 " below log start offset %" PRId64
                ", emptying the log",
                log->dir_name, log->log_end_offset, ls);
        truncate_segments(log, 0);
        struct gr_segment *seg = gr_segment_new(log, ls);
        if (!seg || (err = gr_segment_create(seg)) < 0) {
            if (seg) gr_segment_unref(seg);
            gr_log_free(log);
            return err < 0 ? err : -ENOMEM;
        }
        log->segs[0] = seg;
        log->seg_count = 1;
        log->log_end_offset = log->data_end_offset = ls;
        log->dir_dirty = true;
    }
    log->log_start_offset = ls;
    int del = 0;
    while (del + 1 < log->seg_count && log->segs[del + 1]->base_offset <= ls)
        del++;
    if (del) remove_head_segments(log, del);
    for (int i = 0; i < log->seg_count; i++)
        log->size_bytes += log->segs[i]->size_bytes;
    lag_rebuild(log);
    if (log->dir_dirty && (err = gr_dir_sync(log->dir_fd)) < 0) {
        gr_log_free(log);
        return err;
    }
    log->dir_dirty = false;
    atomic_store(&log->durable_offset, log->log_end_offset);
    log->recovery_point = log->log_end_offset;
    if (ckpt_hwm >= 0) { /* restored for gr_log_high_watermark; retention waits for the server's own */
        gr_log_set_high_watermark(log, ckpt_hwm);
        log->hwm_from_server = false;
    }
    if ((err = load_epochs(log)) < 0 || (err = load_producer_state(log)) < 0) {
        GR_ERROR("storage: %s: open failed (%s)", log->dir_name, strerror(-err));
        gr_log_free(log);
        return err;
    }
    snapshots_prune(log);
    *out = log;
    return 0;
}

int gr_log_new_offline(struct gr_store *store, struct gr_topic *topic, int32_t partition,
                       int64_t ckpt_recovery_point, int64_t ckpt_log_start, int64_t ckpt_hwm,
                       struct gr_log **out)
{
    struct gr_log *log = log_alloc(store, topic, partition);
    if (!log) return -ENOMEM;
    atomic_store(&log->offline, true);
    /* What the checkpoint files said, so that the files written while it is offline keep saying it. */
    log->log_start_offset = ckpt_log_start > 0 ? ckpt_log_start : 0;
    log->recovery_point =
        ckpt_recovery_point > log->log_start_offset ? ckpt_recovery_point : log->log_start_offset;
    log->log_end_offset = log->log_start_offset; /* nothing to read: a reader of every log skips it */
    log->data_end_offset = log->log_end_offset;
    atomic_store(&log->durable_offset, log->log_start_offset);
    log->high_watermark = ckpt_hwm >= 0 ? ckpt_hwm : log->recovery_point;
    log->hwm_from_server = true; /* the checkpoint writes this value back */
    log->leader_epoch = -1;
    gr_producer_state_reset(&log->ps, log->log_start_offset);
    *out = log;
    return 0;
}

/* The file half of gr_log_load for a partition that does not exist yet (topic create, CreatePartitions):
   runs on an I/O pool thread. It touches only the new, private log and the file system: no LRU, no flusher
   queue, no store list (the checks below refuse a directory holding data instead of recovering it). */
int gr_log_create_new(struct gr_store *store, struct gr_topic *topic, int32_t partition, struct gr_log **out)
{
    struct gr_log *log = log_alloc(store, topic, partition);
    if (!log) return -ENOMEM;
    int64_t *bases = NULL;
    int nb = 0;
    int err = open_dir(log, false); /* mkdir, fsync of the log directory, partition.metadata */
    if (err == 0) err = list_dir(log, &bases, &nb);
    free(bases);
    if (err == 0 && (nb > 0 || log->snapshot_count > 0))
        err = -EEXIST; /* not new: the caller moved it aside */
    if (err == 0) err = segs_reserve(log, 1);
    struct gr_segment *seg = NULL;
    if (err == 0 && !(seg = gr_segment_new(log, 0))) err = -ENOMEM;
    if (err == 0 && (err = gr_segment_create(seg)) < 0) {
        gr_segment_unref(seg);
        seg = NULL;
    }
    if (err == 0) {
        log->segs[log->seg_count++] = seg;
        err = gr_dir_sync(log->dir_fd);
    }
    /* load_epochs on an empty directory: epoch 0 from offset 0, written now (directly: not through the
       flusher queue, which belongs to the network thread). */
    if (err == 0) err = epochs_push(log, 0, 0);
    if (err == 0) {
        uint8_t *buf;
        size_t len;
        err = gr_epoch_ckpt_format(log->epochs, log->epoch_count, &buf, &len);
        if (err == 0) {
            err = gr_file_write_atomic(log->dir_fd, "leader-epoch-checkpoint", buf, len);
            free(buf);
        }
    }
    if (err < 0) {
        GR_ERROR("storage: %s: create failed (%s)", log->dir_name, strerror(-err));
        gr_log_free(log);
        return err;
    }
    log->epochs_dirty = false;
    log->leader_epoch = 0;
    log->log_start_offset = log->log_end_offset = log->data_end_offset = 0;
    atomic_store(&log->durable_offset, 0);
    log->recovery_point = 0;
    gr_producer_state_reset(&log->ps, 0);
    log->ps.end_offset = 0;
    *out = log;
    return 0;
}

/* ---------------------------------------------------------------- close and free */

int gr_log_close_clean(struct gr_log *log)
{
    if (log->deleted) return 0;
    if (atomic_load(&log->offline)) return -EROFS;
    struct gr_segment *seg = log_active(log);
    /* The data first: a full disk may fail the index, snapshot or epoch files below, never this. */
    pthread_mutex_lock(&log->mu);
    unsynced_add_locked(log, seg);
    pthread_mutex_unlock(&log->mu);
    int err = gr_log_flush_now(log, false);
    if (err < 0) {
        GR_ERROR("storage: %s: clean close failed (%s)", log->dir_name, strerror(-err));
        return err;
    }
    err = gr_segment_seal(seg); /* final time entry + index files; the segment is active again at next open */
    seg->sealed = false;
    if (err == 0 && seg->index_fd >= 0) err = gr_sys_fdatasync(seg->index_fd);
    if (err == 0 && seg->timeindex_fd >= 0) err = gr_sys_fdatasync(seg->timeindex_fd);
    if (err == 0) err = snapshot_write(log, true);
    if (err == 0) err = gr_log_write_epochs(log, true);
    if (err < 0) GR_ERROR("storage: %s: clean close failed (%s)", log->dir_name, strerror(-err));
    return err;
}

static void log_release_segments(struct gr_log *log)
{
    pthread_mutex_lock(&log->mu);
    struct gr_segment **u = log->unsynced;
    int un = log->unsynced_count;
    log->unsynced = NULL;
    log->unsynced_count = log->unsynced_cap = 0;
    pthread_mutex_unlock(&log->mu);
    for (int i = 0; i < un; i++) {
        u[i]->in_unsynced = false;
        gr_segment_unref(u[i]);
    }
    free(u);
    for (int i = 0; i < log->seg_count; i++) {
        gr_segment_lru_remove(log->segs[i]);
        gr_segment_unref(log->segs[i]);
    }
    log->seg_count = 0;
}

void gr_log_mark_deleted(struct gr_log *log)
{
    gr_flusher_forget_log(log);
    pthread_mutex_lock(&log->mu);
    atomic_store(&log->offline, true);
    pthread_mutex_unlock(&log->mu);
    log->deleted = true;
    for (int i = 0; i < log->seg_count; i++)
        log->segs[i]->deleted = true;
    log_release_segments(log);
    gr_sys_close(atomic_exchange(&log->spare_fd, -1));
    gr_sys_close(log->dir_fd);
    log->dir_fd = -1;
}

void gr_log_free(struct gr_log *log)
{
    if (!log) return;
    log_release_segments(log);
    free(log->segs);
    free(log->epochs);
    free(log->snapshots);
    gr_producer_state_free(&log->ps);
    gr_lag_ring_free(&log->lag);
    free(log->trunc_snap_buf);
    gr_sys_close(atomic_exchange(&log->spare_fd, -1));
    gr_sys_close(log->dir_fd);
    pthread_mutex_destroy(&log->mu);
    free(log->dir_name);
    free(log);
}
