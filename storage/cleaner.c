/*
 * cleaner.c: log compaction, see cleaner.h for what a cleaning keeps and how files are replaced.
 *
 * A cleaning is a job in three steps:
 *   prepare (network thread)  picks the bounds, takes a reference on every sealed segment below the first
 *                             uncleanable offset (so their descriptors stay open: the LRU never closes a
 *                             descriptor another reference holds), copies the config and the last data
 *                             offset of every active producer;
 *   run (cleaner thread)      builds the key map over the dirty section, rewrites each group of segments
 *                             into "<base>.log.cleaned" (+ indexes), fdatasyncs, renames to ".swap",
 *                             fsyncs the directory;
 *   apply (network thread)    for each group still present unchanged in the log, swaps the new segment in
 *                             and queues the housekeeping call that unlinks the old files and renames the
 *                             .swap files (the new segment stays pinned by a reference until then, so
 *                             nobody opens it by name before the rename); groups whose segments went away
 *                             meanwhile (retention, DeleteRecords, topic deletion) are discarded.
 * Invariants: at most one job per store; a log is in at most one job (log->cleaning); the segment list is
 * changed only by apply, on the network thread; every output segment ends with the last batch of its
 * input group (kept empty if needed), so segments still follow each other without offset gaps.
 *
 * Transactions (Kafka's Cleaner with CleanedTransactionMetadata): nothing at or above the last stable
 * offset is cleaned; data batches of aborted transactions (the .txnindex entries of the range) are removed
 * and never enter the key map; a COMMIT/ABORT marker stays while a batch of its transaction was seen in the
 * round, then gets a delete horizon (now + delete.retention.ms) and goes once it passed; an ABORT marker
 * kept for its data keeps its entry in the new segment's .txnindex.
 *
 * Deviations from Kafka 4.1 (documented in cleaner.h / README): the last batch of every output segment is
 * kept (Kafka keeps only the last of the cleaning round), which keeps a .swap file's offset range exact
 * for recovery; the transaction state is carried across the groups of a round (Kafka: per group), so a
 * marker never goes while a batch of its transaction is left in an earlier output segment (Gregor rebuilds
 * producer state from every segment when no snapshot is usable: a lone data batch would reopen the
 * transaction for good); the key hash is 128 bits of a non-cryptographic hash (Kafka: MD5).
 *
 * Read next: cleaner.h, log.c (the segment list), flusher.c (GR_JOB_CALL).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "protocol/record_batch.h"
#include "storage/cleaner.h"
#include "storage/internal.h"
#include "storage/sys.h"

#define CLEANER_CKPT "cleaner-offset-checkpoint"
#define READ_CHUNK_BYTES (1024 * 1024)
#define WRITE_FLUSH_BYTES (1024 * 1024)
#define MAP_SLOT_BYTES 24 /* 16-byte key hash + 8-byte offset, as Kafka's SkimpyOffsetMap with MD5 */
#define MAP_LOAD_FACTOR 0.9

/* ---------------------------------------------------------------- key map */

struct map_slot {
    uint64_t h1, h2;
    int64_t offset; /* -1 empty */
};

struct offset_map {
    struct map_slot *slots;
    size_t cap;     /* allocated slots */
    size_t cap_max; /* dedupe buffer / 24 */
    size_t count;
    size_t count_max; /* cap_max * 0.9 */
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Two independent 64-bit hashes of the key bytes (FNV-1a and a multiply-xor over 8-byte words). */
static void key_hash(const uint8_t *p, size_t n, uint64_t *h1, uint64_t *h2)
{
    uint64_t a = 0xcbf29ce484222325ULL, b = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        b = mix64(b ^ w) * 0x2545f4914f6cdd1dULL;
    }
    uint64_t tail = 0;
    for (size_t k = i; k < n; k++)
        tail = (tail << 8) | p[k];
    b = mix64(b ^ tail ^ ((uint64_t)(n - i) << 56));
    for (size_t k = 0; k < n; k++) {
        a ^= p[k];
        a *= 0x100000001b3ULL;
    }
    *h1 = mix64(a);
    *h2 = b;
}

static void map_init(struct offset_map *m, int64_t buffer_bytes)
{
    memset(m, 0, sizeof(*m));
    int64_t slots = buffer_bytes / MAP_SLOT_BYTES;
    if (slots < 2) slots = 2;
    m->cap_max = (size_t)slots;
    m->count_max = (size_t)((double)slots * MAP_LOAD_FACTOR);
    if (m->count_max < 1) m->count_max = 1;
}

static void map_free(struct offset_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static struct map_slot *map_find(struct offset_map *m, uint64_t h1, uint64_t h2)
{
    size_t i = (size_t)(h1 % m->cap);
    for (;;) {
        struct map_slot *s = &m->slots[i];
        if (s->offset < 0 || (s->h1 == h1 && s->h2 == h2)) return s;
        i = i + 1 == m->cap ? 0 : i + 1;
    }
}

static int map_grow(struct offset_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 4096;
    if (ncap > m->cap_max) ncap = m->cap_max;
    struct map_slot *old = m->slots;
    size_t ocap = m->cap;
    m->slots = malloc(ncap * sizeof(*m->slots));
    if (!m->slots) {
        m->slots = old;
        return -ENOMEM;
    }
    for (size_t i = 0; i < ncap; i++)
        m->slots[i].offset = -1;
    m->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].offset >= 0) *map_find(m, old[i].h1, old[i].h2) = old[i];
    free(old);
    return 0;
}

/* Room for `n` more keys? Grows the table (up to the bound) while it is over half full. */
static int map_reserve(struct offset_map *m, size_t n)
{
    if (m->count + n > m->count_max) return -ENOSPC;
    while (m->cap < m->cap_max && (m->count + n) * 2 > m->cap) {
        int err = map_grow(m);
        if (err < 0) return err;
    }
    if (m->count + n >= m->cap) return -ENOSPC;
    return 0;
}

static void map_put(struct offset_map *m, uint64_t h1, uint64_t h2, int64_t offset)
{
    struct map_slot *s = map_find(m, h1, h2);
    if (s->offset < 0) {
        m->count++;
        s->h1 = h1;
        s->h2 = h2;
    }
    if (offset > s->offset) s->offset = offset;
}

static int64_t map_get(struct offset_map *m, uint64_t h1, uint64_t h2)
{
    if (!m->cap) return -1;
    return map_find(m, h1, h2)->offset;
}

/* ---------------------------------------------------------------- jobs */

struct clean_seg {
    struct gr_segment *seg; /* reference held by the job */
    int fd;                 /* its .log descriptor, pinned by the reference (or the job's own, own_fd) */
    bool own_fd;       /* the fd cap had closed it: the cleaner thread opened it by name (job_open_files) */
    int64_t base, end; /* end: the next segment's base offset */
    int64_t size_bytes;
    int64_t modified_ms;
};

struct clean_group {
    int first, count;       /* into job->segs */
    struct gr_segment *out; /* the replacement (2 references: the log's and the pin), NULL if none */
    bool committed;         /* its .swap files are durable */
};

struct producer_last {
    int64_t producer_id;
    int64_t last_offset;
};

struct clean_job {
    struct gr_store *store;
    struct gr_log *log;
    int dir_fd; /* owned duplicate */
    struct gr_log_config cfg;
    int64_t now_ms;
    int64_t first_dirty, uncleanable, end_offset;
    struct clean_seg *segs;
    int nsegs;
    struct clean_group *groups;
    int ngroups;
    struct producer_last *producers; /* sorted by producer id */
    int nproducers;
    struct gr_aborted_txn *atx; /* aborted transactions of the cleaned range, by first offset */
    int natx;
    struct txn_meta *map_tm;   /* the map pass's transaction walk */
    struct txn_meta *clean_tm; /* the rewrite's, carried across the groups of the round */
    atomic_bool abort;
    struct offset_map *map; /* the key map job_run built */
    int err;
    struct gr_clean_stats st;
    double io_bytes_per_second;
    int64_t throttle_start_mono_ms;
    int64_t throttle_bytes;
};

struct gr_cleaner {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop;
    struct clean_job *todo;    /* [mu] handed to the thread */
    struct clean_job *running; /* [mu] */
    struct clean_job *done;    /* [mu] finished, waiting for apply */
    struct offset_map map;     /* cleaner thread only */
    int64_t next_pick_mono_ms; /* network thread */
};

static const struct gr_log_config *lcfg(const struct gr_log *log)
{
    return &log->topic->cfg;
}

/* The bounds of the dirty section. Returns false when the log cannot be cleaned now. */
static bool dirty_bounds(struct gr_log *log, int64_t now_ms, int64_t *first_dirty, int64_t *uncleanable)
{
    const struct gr_log_config *cfg = lcfg(log);
    if (log->deleted || atomic_load(&log->offline) || !cfg->compact_policy || log->seg_count < 2)
        return false;
    int64_t fd = log->cleaner_checkpoint;
    if (fd < log->log_start_offset || fd > log->log_end_offset) fd = log->log_start_offset;
    /* LogCleanerManager.cleanableOffsets: never at or past the high watermark or the active segment */
    int64_t bound = gr_log_hw_bound(log);
    int64_t unc = log->segs[log->seg_count - 1]->base_offset;
    if (bound < unc) unc = bound;
    /* ... nor at or past the last stable offset (an open transaction's first offset) */
    int64_t fuo = gr_log_first_unstable_offset(log);
    if (fuo >= 0 && fuo < unc) unc = fuo;
    if (cfg->min_compaction_lag_ms > 0) {
        for (int i = 0; i < log->seg_count - 1; i++) {
            struct gr_segment *s = log->segs[i];
            if (log->segs[i + 1]->base_offset <= fd) continue;
            int64_t t = s->max_timestamp_ms >= 0 ? s->max_timestamp_ms : s->modified_ms;
            if (gr_ms_sub_sat(now_ms, t) < cfg->min_compaction_lag_ms) {
                if (s->base_offset < unc) unc = s->base_offset;
                break;
            }
        }
    }
    *first_dirty = fd;
    *uncleanable = unc;
    return true;
}

static double ratio_for(struct gr_log *log, int64_t first_dirty, int64_t uncleanable, bool *due,
                        int64_t now_ms)
{
    int64_t clean = 0, dirty = 0;
    if (due) *due = false;
    const struct gr_log_config *cfg = lcfg(log);
    for (int i = 0; i < log->seg_count - 1; i++) {
        struct gr_segment *s = log->segs[i];
        int64_t end = log->segs[i + 1]->base_offset;
        if (end <= first_dirty) {
            clean += s->size_bytes;
        } else if (end <= uncleanable) {
            if (dirty == 0 && due && cfg->max_compaction_lag_ms != INT64_MAX) {
                int64_t t = s->rolling_timestamp_ms >= 0 ? s->rolling_timestamp_ms : s->created_ms;
                if (gr_ms_sub_sat(now_ms, t) > cfg->max_compaction_lag_ms) *due = true;
            }
            dirty += s->size_bytes;
        }
    }
    if (due && dirty == 0) *due = false;
    return clean + dirty > 0 ? (double)dirty / (double)(clean + dirty) : 0.0;
}

double gr_log_dirty_ratio(struct gr_log *log, int64_t now_ms)
{
    int64_t fd, unc;
    if (!dirty_bounds(log, now_ms, &fd, &unc)) return 0.0;
    return ratio_for(log, fd, unc, NULL, now_ms);
}

static void job_free(struct clean_job *job)
{
    if (!job) return;
    for (int i = 0; i < job->nsegs; i++) {
        if (job->segs[i].own_fd) gr_sys_close(job->segs[i].fd);
        gr_segment_unref(job->segs[i].seg);
    }
    free(job->segs);
    free(job->groups);
    free(job->producers);
    free(job->atx);
    if (job->dir_fd >= 0) close(job->dir_fd);
    free(job);
}

static int cmp_producer(const void *a, const void *b)
{
    int64_t x = ((const struct producer_last *)a)->producer_id,
            y = ((const struct producer_last *)b)->producer_id;
    return x < y ? -1 : x > y;
}

static int cmp_atx(const void *a, const void *b)
{
    int64_t x = ((const struct gr_aborted_txn *)a)->first_offset,
            y = ((const struct gr_aborted_txn *)b)->first_offset;
    return x < y ? -1 : x > y;
}

/* Copies the aborted transactions with data below `end` (first offset < end) from every segment's .txnindex
   (their markers may lie past the cleaned range: UnifiedLog.collectAbortedTransactions reads on through
   the higher segments), sorted by first offset. 0 or -ENOMEM. */
static int job_collect_aborted(struct clean_job *job, const struct gr_log *log, int64_t end)
{
    int n = 0;
    for (int i = 0; i < log->seg_count; i++)
        for (int32_t k = 0; k < log->segs[i]->atx_count; k++)
            n += log->segs[i]->atx[k].first_offset < end;
    if (n == 0) return 0;
    if (!(job->atx = malloc(sizeof(*job->atx) * (size_t)n))) return -ENOMEM;
    for (int i = 0; i < log->seg_count; i++)
        for (int32_t k = 0; k < log->segs[i]->atx_count; k++)
            if (log->segs[i]->atx[k].first_offset < end) job->atx[job->natx++] = log->segs[i]->atx[k];
    qsort(job->atx, (size_t)job->natx, sizeof(*job->atx), cmp_atx);
    return 0;
}

/* Network thread: a job for `log`, or NULL (nothing to clean, or out of memory). */
static struct clean_job *job_prepare(struct gr_log *log, int64_t now_ms, bool force, double *ratio_out)
{
    int64_t first_dirty, unc;
    /* One swap at a time per log: the next cleaning reuses the .swap names of the previous one. */
    if (log->cleaning || atomic_load(&log->clean_finishes) > 0 ||
        !dirty_bounds(log, now_ms, &first_dirty, &unc))
        return NULL;
    bool due = false;
    double ratio = ratio_for(log, first_dirty, unc, &due, now_ms);
    if (ratio_out) *ratio_out = ratio;
    if (first_dirty >= unc && !force) return NULL;
    if (!force && !due && (ratio <= 0.0 || ratio < lcfg(log)->min_cleanable_ratio)) return NULL;
    int n = 0;
    while (n < log->seg_count - 1 && log->segs[n + 1]->base_offset <= unc)
        n++;
    if (n == 0) return NULL; /* no sealed segment below the uncleanable offset */
    if (!force && log->segs[n]->base_offset <= first_dirty) return NULL; /* no sealed dirty segment */
    /* Forced with nothing dirty: a pass over the clean section (expires tombstones past their horizon). */
    if (first_dirty > log->segs[n]->base_offset) first_dirty = log->segs[n]->base_offset;
    struct clean_job *job = calloc(1, sizeof(*job));
    if (!job) return NULL;
    job->dir_fd = dup(log->dir_fd);
    job->segs = calloc((size_t)n, sizeof(*job->segs));
    size_t np = gr_producer_state_count(&log->ps);
    job->producers = calloc(np + 1, sizeof(*job->producers));
    if (job->dir_fd < 0 || !job->segs || !job->producers) {
        job_free(job);
        return NULL;
    }
    job->store = log->store;
    job->log = log;
    job->cfg = *lcfg(log);
    job->now_ms = now_ms;
    job->first_dirty = first_dirty;
    job->uncleanable = log->segs[n]->base_offset < unc ? log->segs[n]->base_offset : unc;
    if (job_collect_aborted(job, log, log->segs[n]->base_offset) < 0) {
        job_free(job);
        return NULL;
    }
    job->io_bytes_per_second = log->store->cfg.cleaner_io_bytes_per_second;
    atomic_init(&job->abort, false);
    for (int i = 0; i < n; i++) {
        struct gr_segment *s = log->segs[i];
        /* A file the fd cap closed is opened by the cleaner thread (job_open_files), not here. */
        int fd = s->fd >= 0 ? gr_segment_fd(s) : -1;
        gr_segment_ref(s);
        job->segs[i] = (struct clean_seg){
            s, fd, false, s->base_offset, log->segs[i + 1]->base_offset, s->size_bytes, s->modified_ms};
        job->nsegs = i + 1;
    }
    size_t cursor = 0;
    const struct gr_producer_entry *e;
    while ((e = gr_producer_state_next(&log->ps, &cursor)) != NULL) {
        if (e->batch_count == 0) continue;
        job->producers[job->nproducers++] =
            (struct producer_last){e->producer_id, e->batches[e->batch_count - 1].last_offset};
    }
    qsort(job->producers, (size_t)job->nproducers, sizeof(*job->producers), cmp_producer);
    job->st.dirty_ratio_before = ratio;
    job->st.first_dirty_offset = first_dirty;
    log->cleaning = true;
    return job;
}

static bool is_producer_last(const struct clean_job *job, int64_t pid, int64_t last_offset)
{
    if (pid < 0) return false;
    struct producer_last key = {pid, 0};
    const struct producer_last *p =
        bsearch(&key, job->producers, (size_t)job->nproducers, sizeof(key), cmp_producer);
    return p && p->last_offset == last_offset;
}

/* Sleeps as needed to keep the job's I/O under the configured rate (Kafka's Throttler). */
static void throttle(struct clean_job *job, int64_t bytes)
{
    if (job->io_bytes_per_second <= 0) return;
    job->throttle_bytes += bytes;
    int64_t now = gr_time_mono_ms();
    if (!job->throttle_start_mono_ms) job->throttle_start_mono_ms = now;
    double want_ms = (double)job->throttle_bytes * 1000.0 / job->io_bytes_per_second;
    int64_t ahead = (int64_t)want_ms - (now - job->throttle_start_mono_ms);
    while (ahead > 0 && !atomic_load(&job->abort)) {
        int64_t step = ahead > 100 ? 100 : ahead;
        struct timespec ts = {step / 1000, (step % 1000) * 1000000};
        nanosleep(&ts, NULL);
        ahead -= step;
    }
}

/* ---------------------------------------------------------------- batch scanning */

/* Walks every batch of one segment: fn(job, batch, len, ctx) for each; the batch bytes are borrowed for the
   call. Stops when fn returns non-zero (its value is returned; 1 means "stop, no error"). */
typedef int (*batch_fn)(struct clean_job *job, const uint8_t *b, size_t len, void *ctx);

static int scan_segment(struct clean_job *job, const struct clean_seg *cs, batch_fn fn, void *ctx)
{
    size_t cap = READ_CHUNK_BYTES;
    uint8_t *buf = malloc(cap);
    if (!buf) return -ENOMEM;
    int64_t pos = 0;
    int rc = 0;
    while (pos < cs->size_bytes && rc == 0) {
        if (atomic_load(&job->abort)) {
            rc = -ECANCELED;
            break;
        }
        size_t want = cs->size_bytes - pos < (int64_t)cap ? (size_t)(cs->size_bytes - pos) : cap;
        ssize_t got = gr_sys_pread_full(cs->fd, buf, want, pos);
        if (got < 0) {
            rc = (int)got;
            break;
        }
        throttle(job, got);
        size_t off = 0;
        while (rc == 0 && off + GR_BATCH_HEADER_BYTES <= (size_t)got) {
            const uint8_t *b = buf + off;
            int64_t total = gr_batch_total_bytes(b);
            if (gr_batch_magic(b) != 2 || total < GR_BATCH_HEADER_BYTES ||
                pos + (int64_t)off + total > cs->size_bytes) {
                rc = -EIO;
                break;
            }
            if (off + (size_t)total > (size_t)got) break; /* continue with a new read from this batch */
            rc = fn(job, b, (size_t)total, ctx);
            off += (size_t)total;
        }
        if (rc) break;
        if (off == 0) { /* one batch larger than the buffer */
            int64_t total = gr_batch_total_bytes(buf);
            if (total <= (int64_t)cap || total > INT32_MAX) {
                rc = -EIO;
                break;
            }
            uint8_t *nb = realloc(buf, (size_t)total);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = (size_t)total;
            continue;
        }
        pos += (int64_t)off;
    }
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- transactions */

/* Kafka's CleanedTransactionMetadata: walks the batches in offset order beside the aborted transactions of
   the range, telling which data batches belong to an aborted transaction and which markers may go. */
struct txn_aborted_open {
    struct gr_aborted_txn t;
    bool observed; /* a batch of it was read (AbortedTransactionMetadata.lastObservedBatchOffset) */
};

struct txn_meta {
    const struct gr_aborted_txn *atx; /* by first offset */
    int natx, next;
    int64_t from;                /* entries whose marker is below this offset are not of the walk */
    struct txn_aborted_open *ab; /* ongoing aborted transactions, one per producer id */
    int nab, capab;
    int64_t *committed; /* producer ids with a batch of an ongoing committed transaction */
    int ncom, capcom;
};

static void txn_meta_init(struct txn_meta *tm, const struct clean_job *job, int64_t from)
{
    memset(tm, 0, sizeof(*tm));
    tm->atx = job->atx;
    tm->natx = job->natx;
    tm->from = from;
}

static void txn_meta_free(struct txn_meta *tm)
{
    free(tm->ab);
    free(tm->committed);
    memset(tm, 0, sizeof(*tm));
}

static int txn_find_aborted(const struct txn_meta *tm, int64_t pid)
{
    for (int i = 0; i < tm->nab; i++)
        if (tm->ab[i].t.producer_id == pid) return i;
    return -1;
}

/* CleanedTransactionMetadata.consumeAbortedTxnsUpTo: the aborted transactions starting at or below
   `offset` become ongoing. 0 or -ENOMEM. */
static int txn_consume_up_to(struct txn_meta *tm, int64_t offset)
{
    while (tm->next < tm->natx && tm->atx[tm->next].first_offset <= offset) {
        const struct gr_aborted_txn *t = &tm->atx[tm->next++];
        if (t->last_offset < tm->from || txn_find_aborted(tm, t->producer_id) >= 0) continue;
        if (tm->nab == tm->capab) {
            int ncap = tm->capab ? tm->capab * 2 : 8;
            struct txn_aborted_open *n = realloc(tm->ab, sizeof(*n) * (size_t)ncap);
            if (!n) return -ENOMEM;
            tm->ab = n;
            tm->capab = ncap;
        }
        tm->ab[tm->nab++] = (struct txn_aborted_open){*t, false};
    }
    return 0;
}

/* CleanedTransactionMetadata.onBatchRead for a data batch: 1 when it belongs to an aborted transaction (its
   records go), 0 otherwise, -ENOMEM. */
static int txn_on_batch(struct txn_meta *tm, const uint8_t *b)
{
    if (txn_consume_up_to(tm, gr_batch_last_offset(b)) < 0) return -ENOMEM;
    if (!(gr_batch_attributes(b) & GR_BATCH_ATTR_TRANSACTIONAL)) return 0;
    int64_t pid = gr_batch_producer_id(b);
    int i = txn_find_aborted(tm, pid);
    if (i >= 0) {
        tm->ab[i].observed = true;
        return 1;
    }
    for (int k = 0; k < tm->ncom; k++)
        if (tm->committed[k] == pid) return 0;
    if (tm->ncom == tm->capcom) {
        int ncap = tm->capcom ? tm->capcom * 2 : 8;
        int64_t *n = realloc(tm->committed, sizeof(*n) * (size_t)ncap);
        if (!n) return -ENOMEM;
        tm->committed = n;
        tm->capcom = ncap;
    }
    tm->committed[tm->ncom++] = pid;
    return 0;
}

/* CleanedTransactionMetadata.onControlBatchRead: 1 when the marker may go (no batch of its transaction was
   read: it waits for its delete horizon), 0 when it stays, -ENOMEM. An ABORT marker that stays for its data
   appends its entry to `out`'s .txnindex (cleanedIndex); an empty control batch (cleaned before) may go; an
   unknown control type stays. */
static int txn_on_control(struct txn_meta *tm, const uint8_t *b, size_t len, struct gr_segment *out)
{
    if (txn_consume_up_to(tm, gr_batch_last_offset(b)) < 0) return -ENOMEM;
    if (gr_batch_record_count(b) == 0) return 1;
    int type;
    int32_t coordinator_epoch;
    if (gr_control_marker_parse(b, len, &type, &coordinator_epoch) < 0) return 0;
    int64_t pid = gr_batch_producer_id(b);
    if (type == GR_CONTROL_ABORT) {
        int i = txn_find_aborted(tm, pid);
        if (i < 0) return 1;
        struct txn_aborted_open a = tm->ab[i];
        tm->ab[i] = tm->ab[--tm->nab];
        if (!a.observed) return 1;
        if (out && gr_segment_txn_append(out, &a.t) < 0) return -ENOMEM;
        return 0;
    }
    for (int k = 0; k < tm->ncom; k++)
        if (tm->committed[k] == pid) {
            tm->committed[k] = tm->committed[--tm->ncom];
            return 0;
        }
    return 1;
}

/* Map building: every keyed record at or above the first dirty offset of a data batch that is not of an
   aborted transaction (Cleaner.buildOffsetMapForSegment). */
static int map_batch(struct clean_job *job, const uint8_t *b, size_t len, void *ctx)
{
    struct offset_map *m = ctx;
    int64_t base = gr_batch_base_offset(b);
    if (base >= job->uncleanable) return 1;
    int tr = gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL ? txn_on_control(job->map_tm, b, len, NULL)
                                                            : txn_on_batch(job->map_tm, b);
    if (tr < 0) return tr;
    if (gr_batch_last_offset(b) < job->first_dirty) return 0;
    if (gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL) return 0;
    if (tr == 1) return 0; /* aborted: its keys never count */
    int32_t count = gr_batch_record_count(b);
    int err = map_reserve(m, count > 0 ? (size_t)count : 0);
    if (err == -ENOSPC) {
        job->end_offset = base; /* the map is full: this round ends before this batch */
        return 1;
    }
    if (err < 0) return err;
    struct gr_record_iter it;
    int r = gr_record_iter_init(&it, b, len);
    struct gr_record rec;
    while (r == 0 && (r = gr_record_iter_next(&it, &rec)) == 1) {
        r = 0;
        if (rec.offset < job->first_dirty || rec.key.len < 0) continue;
        uint64_t h1, h2;
        key_hash(rec.key.len ? rec.key.ptr : (const uint8_t *)"", (size_t)rec.key.len, &h1, &h2);
        map_put(m, h1, h2, rec.offset);
    }
    gr_record_iter_close(&it);
    if (r < 0) return -EIO;
    job->st.keys_mapped = (int64_t)m->count;
    return 0;
}

/* ---------------------------------------------------------------- rewriting */

struct growbuf {
    uint8_t *p;
    size_t len, cap;
};

static int gb_reserve(struct growbuf *g, size_t n)
{
    if (g->len + n <= g->cap) return 0;
    size_t ncap = g->cap ? g->cap : 4096;
    while (ncap < g->len + n)
        ncap *= 2;
    uint8_t *np = realloc(g->p, ncap);
    if (!np) return -ENOMEM;
    g->p = np;
    g->cap = ncap;
    return 0;
}

static void gb_uvarint(struct growbuf *g, uint64_t v)
{
    while (v >= 0x80) {
        g->p[g->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    g->p[g->len++] = (uint8_t)v;
}

static void gb_varlong(struct growbuf *g, int64_t v)
{
    gb_uvarint(g, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static size_t uvarint_bytes(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t varlong_bytes(int64_t v)
{
    return uvarint_bytes(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* Encodes one record (Kafka's DefaultRecord) with the given deltas. */
static int encode_record(struct growbuf *g, const struct gr_record *rec, int64_t ts_delta, int32_t off_delta)
{
    size_t body = 1 + varlong_bytes(ts_delta) + varlong_bytes(off_delta) + varlong_bytes(rec->key.len) +
                  (rec->key.len > 0 ? (size_t)rec->key.len : 0) + varlong_bytes(rec->value.len) +
                  (rec->value.len > 0 ? (size_t)rec->value.len : 0) + varlong_bytes(rec->header_count) +
                  (size_t)rec->headers.len;
    if (gb_reserve(g, body + 10) < 0) return -ENOMEM;
    gb_varlong(g, (int64_t)body);
    g->p[g->len++] = (uint8_t)rec->attributes;
    gb_varlong(g, ts_delta);
    gb_varlong(g, off_delta);
    gb_varlong(g, rec->key.len);
    if (rec->key.len > 0) {
        memcpy(g->p + g->len, rec->key.ptr, (size_t)rec->key.len);
        g->len += (size_t)rec->key.len;
    }
    gb_varlong(g, rec->value.len);
    if (rec->value.len > 0) {
        memcpy(g->p + g->len, rec->value.ptr, (size_t)rec->value.len);
        g->len += (size_t)rec->value.len;
    }
    gb_varlong(g, rec->header_count);
    if (rec->headers.len > 0) {
        memcpy(g->p + g->len, rec->headers.ptr, (size_t)rec->headers.len);
        g->len += (size_t)rec->headers.len;
    }
    return 0;
}

/* The output segment being written. */
struct writer {
    struct gr_segment *seg; /* in-memory indexes and counters of the new segment */
    int fd;
    int64_t file_pos;    /* bytes written to the file */
    struct growbuf out;  /* batches not yet written */
    struct growbuf recs; /* scratch: retained records of one batch */
    int64_t group_end;   /* the group's end offset: its last batch is kept */
};

static int writer_flush(struct clean_job *job, struct writer *w)
{
    if (!w->out.len) return 0;
    int err = gr_sys_pwrite_full(w->fd, w->out.p, w->out.len, w->file_pos);
    if (err < 0) return err;
    throttle(job, (int64_t)w->out.len);
    w->file_pos += (int64_t)w->out.len;
    job->st.bytes_written += (int64_t)w->out.len;
    w->out.len = 0;
    return 0;
}

static int writer_put(struct clean_job *job, struct writer *w, const uint8_t *b, size_t len)
{
    int64_t pos = w->seg->size_bytes;
    if (gb_reserve(&w->out, len) < 0) return -ENOMEM;
    memcpy(w->out.p + w->out.len, b, len);
    w->out.len += len;
    gr_segment_note_batch(w->seg, w->out.p + w->out.len - len, pos, &job->cfg);
    if (w->out.len >= WRITE_FLUSH_BYTES) return writer_flush(job, w);
    return 0;
}

/* The filter: Kafka's Cleaner.cleanInto / MemoryRecords.filterTo for one batch. */
static int clean_batch(struct clean_job *job, const uint8_t *b, size_t len, void *ctx)
{
    struct writer *w = ctx;
    struct offset_map *m = job->map;
    int16_t attrs = gr_batch_attributes(b);
    int64_t base = gr_batch_base_offset(b), last = gr_batch_last_offset(b);
    int32_t count = gr_batch_record_count(b);
    job->st.records_read += count > 0 ? count : 0;
    bool keep_empty = is_producer_last(job, gr_batch_producer_id(b), last) || last + 1 == w->group_end;
    bool horizon_set = (attrs & GR_BATCH_ATTR_DELETE_HORIZON) != 0;
    int64_t horizon = horizon_set ? gr_batch_base_timestamp(b) : -1;
    bool retain_deletes = !horizon_set || job->now_ms < horizon;
    bool control = (attrs & GR_BATCH_ATTR_CONTROL) != 0;
    /* Cleaner.cleanInto's checkBatchRetention: a data batch of an aborted transaction loses its records; a
       marker that may go keeps them until its delete horizon (set now if absent) has passed. */
    int tr = control ? txn_on_control(job->clean_tm, b, len, w->seg) : txn_on_batch(job->clean_tm, b);
    if (tr < 0) return tr;
    bool drop_all = control ? tr == 1 && horizon_set && job->now_ms >= horizon : tr == 1;
    bool need_horizon = control && tr == 1 && !horizon_set && count > 0;
    if (drop_all) count = 0; /* no record is read: only the empty header may stay */
    w->recs.len = 0;
    int32_t kept = 0;
    bool tombstones = false;
    int64_t max_ts = -1, first_ts = 0;
    struct gr_record_iter it;
    int r = gr_record_iter_init(&it, b, len);
    struct gr_record rec;
    /* First pass: decide; remember what stays in recs (encoded later once the base timestamp is known). */
    struct kept {
        int64_t ts;
        int32_t delta;
    } *ks = NULL;
    if (count > 0 && !(ks = malloc(sizeof(*ks) * (size_t)count))) {
        gr_record_iter_close(&it);
        return -ENOMEM;
    }
    while (!drop_all && r == 0 && (r = gr_record_iter_next(&it, &rec)) == 1) {
        r = 0;
        bool keep;
        if (control || rec.offset >= job->end_offset) {
            keep = true;
        } else if (rec.key.len < 0) {
            keep = false; /* Kafka drops keyless records in a compacted log */
        } else {
            uint64_t h1, h2;
            key_hash(rec.key.len ? rec.key.ptr : (const uint8_t *)"", (size_t)rec.key.len, &h1, &h2);
            int64_t latest = map_get(m, h1, h2);
            keep = rec.offset >= latest && (rec.value.len >= 0 || retain_deletes);
        }
        if (!keep) continue;
        if (kept < count) ks[kept] = (struct kept){rec.timestamp, rec.offset_delta};
        if (kept == 0) first_ts = rec.timestamp;
        if (rec.timestamp > max_ts) max_ts = rec.timestamp;
        if (rec.value.len < 0) tombstones = true;
        kept++;
    }
    gr_record_iter_close(&it);
    if (r < 0 || kept > count) {
        free(ks);
        return -EIO;
    }
    job->st.records_kept += kept;
    int err = 0;
    if (kept == count && count > 0 && !((tombstones || need_horizon) && !horizon_set)) {
        err = writer_put(job, w, b, len); /* unchanged: copied byte for byte */
    } else if (kept > 0) {
        /* Rebuild with the retained records: same base offset, last offset delta, epoch, producer fields
           and codec; a new delete horizon when tombstones (or a marker that may go) stay and none was set. */
        bool new_horizon = (tombstones || need_horizon) && !horizon_set;
        int64_t h = new_horizon ? gr_ms_add_sat(job->now_ms, job->cfg.delete_retention_ms) : horizon;
        bool with_horizon = new_horizon || horizon_set;
        int64_t base_ts = with_horizon ? h : first_ts;
        bool lat = (attrs & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
        if (lat) max_ts = gr_batch_max_timestamp(b);
        r = gr_record_iter_init(&it, b, len);
        int32_t i = 0;
        while (r == 0 && err == 0 && (r = gr_record_iter_next(&it, &rec)) == 1) {
            r = 0;
            if (i < kept && rec.offset_delta == ks[i].delta) {
                /* a delta on the wire wraps as Kafka's long does (record timestamps are client data) */
                err = encode_record(&w->recs, &rec, (int64_t)((uint64_t)rec.timestamp - (uint64_t)base_ts),
                                    rec.offset_delta);
                i++;
            }
        }
        gr_record_iter_close(&it);
        if (err == 0 && (r < 0 || i != kept)) err = -EIO;
        if (err == 0) {
            struct gr_batch_params bp = {
                .base_offset = base,
                .partition_leader_epoch = gr_batch_leader_epoch(b),
                .codec = (enum gr_codec)(attrs & GR_BATCH_ATTR_CODEC_MASK),
                .attributes = (int16_t)((attrs & ~GR_BATCH_ATTR_CODEC_MASK & ~GR_BATCH_ATTR_DELETE_HORIZON) |
                                        (with_horizon ? GR_BATCH_ATTR_DELETE_HORIZON : 0)),
                .log_append_time = lat ? max_ts : -1,
                .producer_id = gr_batch_producer_id(b),
                .producer_epoch = gr_batch_producer_epoch(b),
                .base_sequence = gr_batch_base_sequence(b),
            };
            uint8_t *nb;
            size_t nlen;
            int br = gr_batch_assemble(&bp, kept, gr_batch_last_offset_delta(b), base_ts, max_ts, w->recs.p,
                                       w->recs.len, &nb, &nlen);
            if (br) {
                err = br == GR_BATCH_ERR_NO_MEMORY ? -ENOMEM : -EIO;
            } else {
                err = writer_put(job, w, nb, nlen);
                free(nb);
            }
        }
    } else if (keep_empty) {
        /* Kafka's RETAIN_EMPTY: the header alone, record count 0, both timestamps the batch's max. */
        struct gr_batch_params bp = {
            .base_offset = base,
            .partition_leader_epoch = gr_batch_leader_epoch(b),
            .codec = GR_CODEC_NONE,
            .attributes = (int16_t)(attrs & (GR_BATCH_ATTR_LOG_APPEND_TIME | GR_BATCH_ATTR_TRANSACTIONAL |
                                             GR_BATCH_ATTR_CONTROL)),
            .log_append_time = -1,
            .producer_id = gr_batch_producer_id(b),
            .producer_epoch = gr_batch_producer_epoch(b),
            .base_sequence = gr_batch_base_sequence(b),
        };
        uint8_t *nb;
        size_t nlen;
        int64_t ts = gr_batch_max_timestamp(b);
        int br = gr_batch_assemble(&bp, 0, gr_batch_last_offset_delta(b), ts, ts, NULL, 0, &nb, &nlen);
        if (br) {
            err = -ENOMEM;
        } else {
            err = writer_put(job, w, nb, nlen);
            free(nb);
        }
    }
    free(ks);
    return err;
}

static void name_of(char *buf, int64_t base, const char *sfx)
{
    gr_segment_file_name(buf, base, sfx);
}

static void unlink_cleaned(int dir_fd, int64_t base, const char *ext)
{
    static const char *const kinds[] = {".log", ".index", ".timeindex", ".txnindex"};
    char name[GR_SEGMENT_NAME_BYTES + 16];
    for (int k = 0; k < 4; k++) {
        char sfx[32];
        snprintf(sfx, sizeof(sfx), "%s%s", kinds[k], ext);
        name_of(name, base, sfx);
        gr_sys_unlinkat(dir_fd, name, 0);
    }
}

/* Writes the indexes of the new segment to <base>.index.cleaned / .timeindex.cleaned and syncs them. */
static int write_index_files(struct clean_job *job, struct gr_segment *seg)
{
    /* The final time entry a seal writes: the segment's largest timestamp. */
    int64_t last_ts = seg->tidx_count ? seg->tidx[seg->tidx_count - 1].timestamp_ms : -1;
    if (seg->max_timestamp_ms > last_ts) {
        struct gr_time_entry *n = realloc(seg->tidx, sizeof(*n) * (size_t)(seg->tidx_count + 1));
        if (!n) return -ENOMEM;
        seg->tidx = n;
        seg->tidx_cap = seg->tidx_count + 1;
        seg->tidx[seg->tidx_count++] = (struct gr_time_entry){
            seg->max_timestamp_ms, (int32_t)(seg->max_timestamp_offset - seg->base_offset)};
    }
    size_t n1, n2;
    uint8_t *buf = gr_segment_index_encode(seg, &n1, &n2);
    if (!buf) return -ENOMEM;
    int err = 0;
    const char *sfx[2] = {".index.cleaned", ".timeindex.cleaned"};
    const uint8_t *data[2] = {buf, buf + n1};
    size_t lens[2] = {n1, n2};
    for (int k = 0; k < 2 && err == 0; k++) {
        char name[GR_SEGMENT_NAME_BYTES + 16];
        name_of(name, seg->base_offset, sfx[k]);
        int fd = gr_sys_openat(job->dir_fd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            err = fd;
            break;
        }
        if (lens[k]) err = gr_sys_pwrite_full(fd, data[k], lens[k], 0);
        if (err == 0) err = gr_sys_fdatasync(fd);
        gr_sys_close(fd);
    }
    free(buf);
    return err;
}

/* Writes the new segment's aborted transactions (Cleaner.cleanSegments: the cleaned segment's txnIndex) to
   <base>.txnindex.cleaned and syncs it; no file when it has none (storage/format.md). 0 or -errno. */
static int write_txn_file(struct clean_job *job, struct gr_segment *seg)
{
    size_t len;
    uint8_t *buf = gr_segment_txn_encode(seg, &len);
    if (len == 0) return 0;
    if (!buf) return -ENOMEM;
    char name[GR_SEGMENT_NAME_BYTES + 16];
    name_of(name, seg->base_offset, ".txnindex.cleaned");
    int fd = gr_sys_openat(job->dir_fd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
    int err = fd < 0 ? fd : gr_sys_pwrite_full(fd, buf, len, 0);
    if (err == 0) err = gr_sys_fdatasync(fd);
    if (fd >= 0) gr_sys_close(fd);
    free(buf);
    return err;
}

/* Cleans one group into a new segment and commits it as .swap files. */
static int clean_group(struct clean_job *job, struct clean_group *g)
{
    const struct clean_seg *first = &job->segs[g->first];
    const struct clean_seg *lastseg = &job->segs[g->first + g->count - 1];
    struct writer w = {0};
    w.group_end = lastseg->end;
    w.seg = gr_segment_new(job->log, first->base);
    if (!w.seg) return -ENOMEM;
    char name[GR_SEGMENT_NAME_BYTES + 16];
    name_of(name, first->base, ".log.cleaned");
    w.fd = gr_sys_openat(job->dir_fd, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
    int err = w.fd < 0 ? w.fd : 0;
    for (int i = 0; err == 0 && i < g->count; i++) {
        const struct clean_seg *cs = &job->segs[g->first + i];
        job->st.bytes_read += cs->size_bytes;
        err = scan_segment(job, cs, clean_batch, &w);
        if (err == 1) err = 0;
    }
    if (err == 0) err = writer_flush(job, &w);
    if (err == 0) err = gr_sys_fdatasync(w.fd);
    if (err == 0) err = write_index_files(job, w.seg);
    if (err == 0) err = write_txn_file(job, w.seg);
    /* Commit: indexes first, the .log last (recovery keys on <base>.log.swap), then the directory. */
    static const char *const kinds[] = {".index", ".timeindex", ".txnindex", ".log"};
    for (int k = 0; k < 4 && err == 0; k++) {
        if (k == 2 && w.seg->atx_count == 0) continue; /* no .txnindex */
        char from[GR_SEGMENT_NAME_BYTES + 16], to[GR_SEGMENT_NAME_BYTES + 16], s1[32], s2[32];
        snprintf(s1, sizeof(s1), "%s.cleaned", kinds[k]);
        snprintf(s2, sizeof(s2), "%s.swap", kinds[k]);
        name_of(from, first->base, s1);
        name_of(to, first->base, s2);
        err = gr_sys_renameat(job->dir_fd, from, job->dir_fd, to);
    }
    if (err == 0) err = gr_dir_sync(job->dir_fd);
    free(w.out.p);
    free(w.recs.p);
    if (err < 0) {
        gr_sys_close(w.fd);
        w.seg->fd = -1;
        gr_segment_unref(w.seg);
        unlink_cleaned(job->dir_fd, first->base, ".cleaned");
        unlink_cleaned(job->dir_fd, first->base, ".swap");
        return err;
    }
    struct stat st;
    if (fstat(w.fd, &st) == 0) {
        w.seg->dev = st.st_dev;
        w.seg->ino = st.st_ino;
    }
    w.seg->fd = w.fd;
    w.seg->sealed = true;
    w.seg->index_loaded = true;
    w.seg->next_offset = lastseg->end;
    w.seg->modified_ms = lastseg->modified_ms;
    atomic_store(&w.seg->refs, 2); /* the log's, and the pin until the housekeeping rename */
    g->out = w.seg;
    g->committed = true;
    job->st.segments_out++;
    return 0;
}

/* Cleaner thread (or inline): the whole run of a prepared job. */
/* Opens (on the cleaner thread) the .log files of the job's segments that the fd cap had closed; the
   segments are pinned by the job's references, so their files keep their names. 0 or -errno. */
static int job_open_files(struct clean_job *job)
{
    for (int i = 0; i < job->nsegs; i++) {
        struct clean_seg *cs = &job->segs[i];
        if (cs->fd >= 0) continue;
        char name[GR_SEGMENT_NAME_BYTES];
        gr_segment_file_name(name, cs->base, ".log");
        int fd = gr_sys_openat(job->dir_fd, name, O_RDONLY, 0);
        if (fd < 0) return fd;
        cs->fd = fd;
        cs->own_fd = true;
    }
    return 0;
}

static void job_run(struct clean_job *job, struct offset_map *m)
{
    int64_t t0 = gr_time_mono_ms();
    job->map = m;
    job->end_offset = job->uncleanable;
    int err = job_open_files(job);
    if (m->cap) {
        for (size_t i = 0; i < m->cap; i++)
            m->slots[i].offset = -1;
    }
    m->count = 0;
    struct txn_meta map_tm, clean_tm;
    int first_scanned = 0;
    while (first_scanned < job->nsegs && job->segs[first_scanned].end <= job->first_dirty)
        first_scanned++;
    txn_meta_init(&map_tm, job, first_scanned < job->nsegs ? job->segs[first_scanned].base : INT64_MAX);
    txn_meta_init(&clean_tm, job, job->nsegs ? job->segs[0].base : INT64_MAX);
    job->map_tm = &map_tm;
    job->clean_tm = &clean_tm;
    for (int i = 0; i < job->nsegs && err == 0; i++) {
        if (job->segs[i].end <= job->first_dirty) continue;
        err = scan_segment(job, &job->segs[i], map_batch, m);
        if (err == 1) {
            err = 0;
            break;
        }
    }
    if (err == 0 && job->first_dirty < job->uncleanable && job->end_offset <= job->first_dirty) {
        GR_WARN("storage: %s: log.cleaner.dedupe.buffer.size too small for one batch; not cleaned",
                job->log->dir_name);
        err = -ENOSPC;
    }
    /* Groups of consecutive segments below the map's end, up to segment.bytes of input and an int32 offset
       range each (Kafka's groupSegmentsBySize). */
    int n = 0;
    while (n < job->nsegs && job->segs[n].base < job->end_offset)
        n++;
    if (err == 0 && !(job->groups = calloc((size_t)n + 1, sizeof(*job->groups)))) err = -ENOMEM;
    for (int i = 0; err == 0 && i < n;) {
        struct clean_group *g = &job->groups[job->ngroups++];
        g->first = i;
        g->count = 1;
        int64_t size = job->segs[i].size_bytes;
        while (i + g->count < n && size + job->segs[i + g->count].size_bytes <= job->cfg.segment_bytes &&
               job->segs[i + g->count].end - 1 - job->segs[i].base <= INT32_MAX) {
            size += job->segs[i + g->count].size_bytes;
            g->count++;
        }
        i += g->count;
    }
    for (int i = 0; err == 0 && i < job->ngroups; i++) {
        if (atomic_load(&job->abort)) {
            err = -ECANCELED;
            break;
        }
        err = clean_group(job, &job->groups[i]);
        if (err == 0) job->st.segments_in += job->groups[i].count;
    }
    txn_meta_free(&map_tm);
    txn_meta_free(&clean_tm);
    job->map_tm = job->clean_tm = NULL;
    job->err = err;
    job->st.duration_ms = gr_time_mono_ms() - t0;
}

/* ---------------------------------------------------------------- apply (network thread) */

struct finish_arg {
    struct gr_log *log; /* stays allocated until the store closes, after the housekeeping thread stopped */
    int dir_fd;
    int64_t *old_bases;
    int nold;
    int64_t new_base;
    struct gr_segment *pin; /* the new segment, unreferenced once its files have their final names */
    bool discard;           /* the group was not installed: remove its .swap files instead */
};

/* Unlinks the files of the replaced segments, their .log files last after a directory sync: a segment
   whose .log is gone has no other file left, so a later recovery never takes an old .txnindex (which no
   load rebuilds) for the new segment's. 0 or -errno (a missing file is fine). */
static int unlink_old(int dir_fd, const int64_t *bases, int n)
{
    static const char *const kinds[] = {".index", ".timeindex", ".txnindex", ".log"};
    int err = 0;
    for (int k = 0; k < 4 && err == 0; k++) {
        if (k == 3) err = gr_dir_sync(dir_fd);
        for (int i = 0; i < n && err == 0; i++) {
            char name[GR_SEGMENT_NAME_BYTES];
            name_of(name, bases[i], kinds[k]);
            int e = gr_sys_unlinkat(dir_fd, name, 0);
            if (e < 0 && e != -ENOENT) err = e;
        }
    }
    if (err == 0) err = gr_dir_sync(dir_fd);
    return err;
}

/* Housekeeping thread: the tail of a swap (see the file comment). */
static int finish_swap(void *p)
{
    struct finish_arg *a = p;
    int err = 0;
    if (a->discard) {
        unlink_cleaned(a->dir_fd, a->new_base, ".swap");
        gr_dir_sync(a->dir_fd);
    } else {
        err = unlink_old(a->dir_fd, a->old_bases, a->nold);
        static const char *const order[] = {".index", ".timeindex", ".txnindex", ".log"};
        for (int k = 0; k < 4 && err == 0; k++) {
            char from[GR_SEGMENT_NAME_BYTES + 16], to[GR_SEGMENT_NAME_BYTES], s1[32];
            snprintf(s1, sizeof(s1), "%s.swap", order[k]);
            name_of(from, a->new_base, s1);
            name_of(to, a->new_base, order[k]);
            err = gr_sys_renameat(a->dir_fd, from, a->dir_fd, to);
            if (err == -ENOENT && k == 2) err = 0; /* the new segment has no .txnindex */
        }
        if (err == 0) err = gr_dir_sync(a->dir_fd);
        if (err < 0) {
            /* The files keep their interim names until the next open completes the swap; the new segment's
               descriptor is kept open (never closed by the LRU and reopened by a name that is not its). Set
               before the pin is dropped below, so the LRU never sees the segment unpinned without it. */
            GR_WARN("storage: finishing the swap of cleaned segment %" PRId64
                    " failed (%s); completed at next open",
                    a->new_base, strerror(-err));
            if (a->pin) atomic_store(&a->pin->keep_fd, true);
        }
    }
    if (a->pin) gr_segment_unref(a->pin);
    atomic_fetch_sub(&a->log->clean_finishes, 1);
    close(a->dir_fd);
    free(a->old_bases);
    free(a);
    return err;
}

static void queue_finish(struct clean_job *job, struct clean_group *g, bool discard)
{
    struct finish_arg *a = calloc(1, sizeof(*a));
    struct gr_job *hj = calloc(1, sizeof(*hj));
    if (a) a->old_bases = calloc((size_t)g->count, sizeof(int64_t));
    if (a) a->dir_fd = dup(job->dir_fd);
    if (!a || !hj || !a->old_bases || a->dir_fd < 0) {
        /* No memory: leave the files; the next open completes or removes them. The pin stays (leak of one
           reference: the segment's descriptor lives until exit). */
        GR_WARN("storage: %s: out of memory finishing a cleaning", job->log->dir_name);
        if (a && a->dir_fd >= 0) close(a->dir_fd);
        if (a) free(a->old_bases);
        free(a);
        free(hj);
        return;
    }
    for (int i = 0; i < g->count; i++)
        a->old_bases[i] = job->segs[g->first + i].base;
    a->nold = g->count;
    a->new_base = job->segs[g->first].base;
    a->pin = g->out;
    a->discard = discard;
    a->log = job->log;
    atomic_fetch_add(&job->log->clean_finishes, 1);
    hj->type = GR_JOB_CALL;
    hj->dir_fd = -1;
    hj->fn = finish_swap;
    hj->arg = a;
    gr_flusher_job(job->store, hj);
}

static void write_checkpoint(struct gr_store *store)
{
    size_t cap = 64;
    int count = 0;
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        if (!t->cfg.compact_policy) continue;
        cap += (size_t)t->partition_count * (strlen(t->name) + 40);
        for (int32_t p = 0; p < t->partition_count; p++)
            count += t->logs[p] != NULL; /* a sparse topic lists the partitions it holds */
    }
    char *buf = malloc(cap);
    if (!buf) return;
    size_t n = (size_t)snprintf(buf, cap, "0\n%d\n", count);
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        if (!t->cfg.compact_policy) continue;
        for (int32_t p = 0; p < t->partition_count; p++) {
            struct gr_log *l = t->logs[p];
            if (!l) continue;
            int64_t v =
                l->cleaner_checkpoint > l->log_start_offset ? l->cleaner_checkpoint : l->log_start_offset;
            n += (size_t)snprintf(buf + n, cap - n, "%s %d %" PRId64 "\n", t->name, p, v);
        }
    }
    gr_store_write_file(store, store->root_fd, CLEANER_CKPT, (uint8_t *)buf, n, false);
}

/* Installs what the job committed. Returns the number of groups installed. */
static int job_apply(struct clean_job *job, int64_t now_ms)
{
    struct gr_log *log = job->log;
    int installed = 0;
    bool log_ok = !log->deleted && !atomic_load(&log->offline);
    for (int gi = 0; gi < job->ngroups; gi++) {
        struct clean_group *g = &job->groups[gi];
        if (!g->committed) continue;
        int at = -1;
        if (log_ok) {
            for (int i = 0; i < log->seg_count - 1; i++)
                if (log->segs[i] == job->segs[g->first].seg) {
                    at = i;
                    break;
                }
            for (int k = 0; at >= 0 && k < g->count; k++)
                if (at + k >= log->seg_count - 1 || log->segs[at + k] != job->segs[g->first + k].seg ||
                    job->segs[g->first + k].seg->deleted)
                    at = -1;
        }
        if (at < 0) {
            /* The group changed meanwhile: drop the replacement (its files go in FIFO order after any unlink
               retention queued for the old segments). */
            GR_INFO("storage: %s: cleaned segment %" PRId64 " discarded: the log changed meanwhile",
                    log->dir_name, job->segs[g->first].base);
            struct gr_segment *out = g->out;
            out->deleted = true;
            g->out = out;
            queue_finish(job, g, true);
            gr_segment_unref(out); /* the log's reference it never got */
            continue;
        }
        for (int k = 0; k < g->count; k++) {
            struct gr_segment *old = log->segs[at + k];
            log->size_bytes -= old->size_bytes;
            old->deleted = true;
            gr_segment_lru_remove(old);
            gr_segment_unref(old); /* the log's reference; files unlinked by finish_swap */
        }
        log->segs[at] = g->out;
        memmove(log->segs + at + 1, log->segs + at + g->count,
                sizeof(*log->segs) * (size_t)(log->seg_count - at - g->count));
        log->seg_count -= g->count - 1;
        log->size_bytes += g->out->size_bytes;
        queue_finish(job, g, false);
        installed++;
    }
    log->cleaning = false;
    if (installed && job->err == 0) {
        log->cleaner_checkpoint = job->end_offset;
        write_checkpoint(job->store);
    }
    if (log_ok) job->st.dirty_ratio_after = gr_log_dirty_ratio(log, now_ms);
    job->st.end_offset = job->end_offset;
    double secs = job->st.duration_ms > 0 ? (double)job->st.duration_ms / 1000.0 : 0.001;
    if (job->err && job->err != -ECANCELED)
        GR_WARN("storage: %s: cleaning failed (%s)", log->dir_name, strerror(-job->err));
    if (installed)
        GR_INFO("storage: %s: cleaned offsets [%" PRId64 ", %" PRId64 "): %d segments (%" PRId64
                " bytes) -> %d (%" PRId64 " bytes), %" PRId64 "/%" PRId64 " records kept, %" PRId64
                " keys, %" PRId64 " ms, %.1f MB/s, dirty ratio %.3f -> %.3f",
                log->dir_name, job->first_dirty, job->end_offset, job->st.segments_in, job->st.bytes_read,
                job->st.segments_out, job->st.bytes_written, job->st.records_kept, job->st.records_read,
                job->st.keys_mapped, job->st.duration_ms, (double)job->st.bytes_read / secs / 1e6,
                job->st.dirty_ratio_before, job->st.dirty_ratio_after);
    return installed;
}

/* ---------------------------------------------------------------- thread and tick */

static void *cleaner_main(void *p)
{
    struct gr_store *store = p;
    struct gr_cleaner *c = store->cleaner;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->todo && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop) break;
        struct clean_job *job = c->todo;
        c->todo = NULL;
        c->running = job;
        pthread_mutex_unlock(&c->mu);
        job_run(job, &c->map);
        map_free(&c->map); /* the map's memory is held only while cleaning */
        map_init(&c->map, store->cfg.cleaner_dedupe_buffer_bytes);
        pthread_mutex_lock(&c->mu);
        c->running = NULL;
        c->done = job;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    gr_batch_thread_cleanup();
    return NULL;
}

static struct gr_cleaner *cleaner_get(struct gr_store *store)
{
    if (store->cleaner) return store->cleaner;
    struct gr_cleaner *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    map_init(&c->map, store->cfg.cleaner_dedupe_buffer_bytes);
    store->cleaner = c;
    return c;
}

static int start_thread(struct gr_store *store)
{
    struct gr_cleaner *c = store->cleaner;
    if (c->started) return 0;
    int err = pthread_create(&c->thread, NULL, cleaner_main, store);
    if (err) return -err;
    c->started = true;
    return 0;
}

int gr_log_clean_now(struct gr_log *log, int64_t now_ms, struct gr_clean_stats *st)
{
    if (log->deleted || atomic_load(&log->offline)) return -EROFS;
    struct gr_cleaner *c = cleaner_get(log->store);
    if (!c) return -ENOMEM;
    gr_flusher_quiesce(log->store); /* a previous swap of this log finishes first */
    struct clean_job *job = job_prepare(log, now_ms, true, NULL);
    if (!job) return -EAGAIN;
    /* Inline, with a key map of its own (the thread's may be in use). */
    struct offset_map m;
    map_init(&m, log->store->cfg.cleaner_dedupe_buffer_bytes);
    job_run(job, &m);
    map_free(&m);
    job_apply(job, now_ms);
    int err = job->err;
    if (st) *st = job->st;
    job_free(job);
    return err == -ECANCELED ? -EAGAIN : err;
}

/* The log with the highest dirty ratio worth cleaning (one past max.compaction.lag.ms first). */
static struct clean_job *pick(struct gr_store *store, int64_t now_ms, bool *busy)
{
    struct gr_log *best = NULL;
    *busy = false;
    double best_ratio = -1;
    bool best_due = false;
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        if (!t->cfg.compact_policy) continue;
        for (int32_t p = 0; p < t->partition_count; p++) {
            struct gr_log *log = t->logs[p];
            int64_t fd, unc;
            if (!log) continue; /* not held here (a sparse topic) */
            if (log->cleaning || atomic_load(&log->clean_finishes) > 0) {
                *busy = true; /* its last swap is still finishing: look again at the next tick */
                continue;
            }
            if (!dirty_bounds(log, now_ms, &fd, &unc) || fd >= unc) continue;
            bool due;
            double r = ratio_for(log, fd, unc, &due, now_ms);
            if (!due && (r <= 0.0 || r < t->cfg.min_cleanable_ratio)) continue;
            if ((due && !best_due) || (due == best_due && r > best_ratio)) {
                best = log;
                best_ratio = r;
                best_due = due;
            }
        }
    }
    return best ? job_prepare(best, now_ms, true, NULL) : NULL;
}

int gr_store_cleaner_tick(struct gr_store *store, int64_t now_ms, struct gr_clean_stats *st)
{
    if (!store->cfg.cleaner_enable) return 0;
    struct gr_cleaner *c = cleaner_get(store);
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    struct clean_job *done = c->done;
    c->done = NULL;
    bool idle = !c->todo && !c->running;
    pthread_mutex_unlock(&c->mu);
    int installed = 0;
    if (done) {
        installed = job_apply(done, now_ms) > 0;
        if (installed && st) *st = done->st;
        job_free(done);
    }
    int64_t mono = gr_time_mono_ms();
    if (!idle || (!done && mono < c->next_pick_mono_ms)) return installed;
    bool busy;
    struct clean_job *job = pick(store, now_ms, &busy);
    if (!job) {
        if (!busy) c->next_pick_mono_ms = mono + store->cfg.cleaner_backoff_ms; /* log.cleaner.backoff.ms */
        return installed;
    }
    if (start_thread(store) < 0) {
        job->log->cleaning = false;
        job_free(job);
        return installed;
    }
    pthread_mutex_lock(&c->mu);
    c->todo = job;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return installed;
}

void gr_store_cleaner_drain(struct gr_store *store, int64_t now_ms)
{
    struct gr_cleaner *c = store->cleaner;
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    while (c->todo || c->running)
        pthread_cond_wait(&c->cv, &c->mu);
    struct clean_job *done = c->done;
    c->done = NULL;
    pthread_mutex_unlock(&c->mu);
    if (done) {
        job_apply(done, now_ms);
        job_free(done);
    }
}

void gr_cleaner_stop(struct gr_store *store)
{
    struct gr_cleaner *c = store->cleaner;
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    if (c->running) atomic_store(&c->running->abort, true);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->started) pthread_join(c->thread, NULL);
    /* A finished job is installed; an abandoned one is discarded (committed .swap files are completed at the
       next open, which is as correct as installing them). */
    struct clean_job *jobs[2] = {c->done, c->todo};
    for (int i = 0; i < 2; i++) {
        if (!jobs[i]) continue;
        if (i == 0)
            job_apply(jobs[i], gr_time_wall_ms());
        else
            jobs[i]->log->cleaning = false;
        job_free(jobs[i]);
    }
    map_free(&c->map);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
    store->cleaner = NULL;
}

/* ---------------------------------------------------------------- open */

void gr_cleaner_load_checkpoint(struct gr_store *store)
{
    struct gr_ckpt_entry *e = NULL;
    int n = 0;
    int err = gr_ckpt_read(store->root_fd, CLEANER_CKPT, &e, &n);
    if (err < 0) return;
    for (int i = 0; i < store->topic_count; i++) {
        struct gr_topic *t = store->topics[i];
        for (int32_t p = 0; p < t->partition_count; p++) {
            int64_t v = gr_ckpt_lookup(e, n, t->name, p);
            if (v >= 0 && t->logs[p]) t->logs[p]->cleaner_checkpoint = v;
        }
    }
    gr_ckpt_free(e, n);
}

/* End offset of the batches in a .swap file (last batch's last offset + 1), or -errno if it does not
   parse (then the swap is not trusted). */
static int64_t swap_end_offset(int dir_fd, const char *name, int64_t base)
{
    int fd = gr_sys_openat(dir_fd, name, O_RDONLY, 0);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        gr_sys_close(fd);
        return -errno;
    }
    int64_t pos = 0, end = base;
    uint8_t h[GR_BATCH_HEADER_BYTES];
    while (pos < st.st_size) {
        ssize_t r = gr_sys_pread_full(fd, h, sizeof(h), pos);
        if (r != (ssize_t)sizeof(h) || gr_batch_magic(h) != 2 || gr_batch_length(h) < 49 ||
            pos + gr_batch_total_bytes(h) > st.st_size || gr_batch_base_offset(h) < end) {
            end = -EINVAL;
            break;
        }
        end = gr_batch_last_offset(h) + 1;
        pos += gr_batch_total_bytes(h);
    }
    gr_sys_close(fd);
    return end;
}

int gr_cleaner_recover_dir(int dir_fd, const char *dir_name)
{
    int fd = dup(dir_fd);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    int64_t *swaps = NULL, *logs = NULL;
    int ns = 0, nl = 0, err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && err == 0) {
        int64_t off;
        int64_t **arr = NULL;
        int *cnt = NULL;
        if (gr_segment_name_parse(de->d_name, ".log.swap", &off)) {
            arr = &swaps;
            cnt = &ns;
        } else if (gr_segment_name_parse(de->d_name, ".log", &off)) {
            arr = &logs;
            cnt = &nl;
        }
        if (!arr) continue;
        int64_t *na = realloc(*arr, sizeof(int64_t) * (size_t)(*cnt + 1));
        if (!na) {
            err = -ENOMEM;
            break;
        }
        *arr = na;
        na[(*cnt)++] = off;
    }
    closedir(d);
    for (int i = 0; i < ns && err == 0; i++) {
        char name[GR_SEGMENT_NAME_BYTES + 16];
        name_of(name, swaps[i], ".log.swap");
        int64_t end = swap_end_offset(dir_fd, name, swaps[i]);
        if (end < 0) {
            GR_WARN("storage: %s: %s does not parse; removed", dir_name, name);
            unlink_cleaned(dir_fd, swaps[i], ".swap");
            continue;
        }
        GR_INFO("storage: %s: completing the swap of cleaned segment %" PRId64 " (offsets below %" PRId64 ")",
                dir_name, swaps[i], end);
        int64_t *old = malloc(sizeof(int64_t) * (size_t)(nl ? nl : 1));
        int nold = 0;
        if (!old) {
            err = -ENOMEM;
            break;
        }
        for (int k = 0; k < nl; k++)
            if (logs[k] >= swaps[i] && logs[k] < end) old[nold++] = logs[k];
        err = unlink_old(dir_fd, old, nold);
        free(old);
        static const char *const order[] = {".index", ".timeindex", ".txnindex", ".log"};
        for (int k = 0; k < 4 && err == 0; k++) {
            char from[GR_SEGMENT_NAME_BYTES + 16], to[GR_SEGMENT_NAME_BYTES], s1[32];
            snprintf(s1, sizeof(s1), "%s.swap", order[k]);
            name_of(from, swaps[i], s1);
            name_of(to, swaps[i], order[k]);
            int e = gr_sys_renameat(dir_fd, from, dir_fd, to);
            if (e == -ENOENT && k == 2)
                continue; /* none, or renamed before the crash: a .txnindex there is
                             the new one (unlink_old removed the old first) */
            if (e == -ENOENT && k < 2) {
                gr_sys_unlinkat(dir_fd, to, 0); /* a stale index of the old segment: rebuilt at load */
                continue;
            }
            err = e;
        }
        if (err == 0) err = gr_dir_sync(dir_fd);
    }
    free(swaps);
    free(logs);
    return err;
}
