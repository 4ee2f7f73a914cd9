/*
 * segment.c: one segment of a partition log: its three files, its in-memory sparse indexes and the scans
 * over its batches. Formats (Kafka's; all integers big-endian):
 *
 * <base offset, 20 digits>.log: record batches exactly as on the wire (RecordBatch v2, magic 2),
 * back to back, see protocol/record_batch.h. The first batch's base offset equals the file's base offset
 * and every next batch starts at the previous batch's last offset + 1.
 *
 * <base offset>.index: offset index, one entry per log.index.interval.bytes of log:
 *   OFFSET SIZE MEANING
 *    0      4   relative offset: last offset of the indexed batch - base offset
 *    4      4   position of that batch in the .log file
 * <base offset>.timeindex: time index, an entry whenever the segment's largest timestamp grew since the last
 * entry at an index point, plus one when the segment is sealed (so the last entry is the segment maximum):
 *   OFFSET SIZE MEANING
 *    0      8   timestamp (ms): largest batch max timestamp so far
 *    8      4   relative offset: last offset of the first batch carrying that timestamp - base offset
 *
 * Invariants: index entries have strictly increasing relative offsets and positions, time entries strictly
 * increasing timestamps; every position is a batch start below size_bytes. The active segment's indexes
 * live in memory and reach their files when it is sealed or the store closes cleanly (an unclean restart
 * rebuilds them from the .log); a sealed segment's indexes are loaded on first use and rebuilt by a header
 * scan if they fail the sanity checks.
 *
 * Open files: every open .log descriptor (sealed or active) is in the store's LRU, capped by
 * open_segment_fds_max; a segment nobody else references (refs == 1: no unsynced data, no flush, no slice,
 * no pool load) may have its descriptor closed, and it is reopened on demand. During a no-wait read
 * (gr_segment_nowait_set) nothing here opens, reads a cold page or loads an index: it notes the work and
 * returns -EAGAIN; gr_seg_load does that work on an I/O pool thread in a private shadow segment, and
 * gr_seg_load_install moves the result in on the network thread. Read next: log.c, residency.c.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "protocol/record_batch.h"
#include "protocol/crc32c.h"
#include "storage/internal.h"
#include "storage/sys.h"

#define BATCH_LENGTH_MIN (GR_BATCH_HEADER_BYTES - GR_BATCH_LOG_OVERHEAD) /* 49 */
#define INDEX_FILE_BYTES_MAX (256 * 1024 * 1024) /* trust bound when reading an index file */
#define LOOKUP_READ_BYTES (8 * 1024)             /* header scans in reads: a few batches per pread */
#define RECOVERY_READ_BYTES (1024 * 1024)        /* validating scans read big chunks */

static _Thread_local struct gr_read_nowait *nowait; /* set during a no-wait read (gr_segment_nowait_set) */

void gr_segment_file_name(char *buf, int64_t base_offset, const char *suffix)
{
    snprintf(buf, GR_SEGMENT_NAME_BYTES, "%020" PRId64 "%s", base_offset, suffix);
}

struct gr_segment *gr_segment_new(struct gr_log *log, int64_t base_offset)
{
    struct gr_segment *seg = calloc(1, sizeof(*seg));
    if (!seg) return NULL;
    seg->log = log;
    seg->base_offset = base_offset;
    atomic_init(&seg->refs, 1);
    atomic_init(&seg->keep_fd, false);
    seg->fd = seg->index_fd = seg->timeindex_fd = -1;
    seg->load_dir_fd = -1;
    seg->next_offset = base_offset;
    seg->max_timestamp_ms = seg->max_timestamp_offset = seg->rolling_timestamp_ms = -1;
    seg->last_leader_epoch = -1;
    seg->last_epoch_start = -1;
    seg->created_ms = seg->modified_ms = gr_time_wall_ms();
    return seg;
}

static void seg_unlink_files(struct gr_segment *seg)
{
    static const char *const sfx[] = {".log", ".index", ".timeindex", ".txnindex"};
    char name[GR_SEGMENT_NAME_BYTES];
    for (int i = 0; i < 4; i++) {
        gr_segment_file_name(name, seg->base_offset, sfx[i]);
        gr_sys_unlinkat(seg->log->dir_fd, name, 0);
    }
}

int gr_segment_create(struct gr_segment *seg)
{
    char name[GR_SEGMENT_NAME_BYTES];
    int dir = seg->log->dir_fd;
    gr_segment_file_name(name, seg->base_offset, ".log");
    int err = seg->fd = gr_sys_openat(dir, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) {
        gr_segment_file_name(name, seg->base_offset, ".index");
        err = seg->index_fd = gr_sys_openat(dir, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
    }
    if (err >= 0) {
        gr_segment_file_name(name, seg->base_offset, ".timeindex");
        err = seg->timeindex_fd = gr_sys_openat(dir, name, O_RDWR | O_CREAT | O_TRUNC, 0644);
    }
    struct stat st;
    if (err >= 0 && fstat(seg->fd, &st) < 0) err = -errno;
    if (err < 0) {
        gr_sys_close(seg->fd);
        gr_sys_close(seg->index_fd);
        gr_sys_close(seg->timeindex_fd);
        seg->fd = seg->index_fd = seg->timeindex_fd = -1;
        seg_unlink_files(seg);
        return err;
    }
    seg->dev = st.st_dev;
    seg->ino = st.st_ino;
    seg->index_loaded = true;
    /* The index files exist from the start (Kafka's layout) but are only written at seal or clean close:
       an active segment holds just its .log descriptor. */
    gr_sys_close(seg->index_fd);
    gr_sys_close(seg->timeindex_fd);
    seg->index_fd = seg->timeindex_fd = -1;
    return 0;
}

int gr_segment_open(struct gr_segment *seg, bool active)
{
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, ".log");
    struct stat st;
    gr_sys_audit_note("fstatat", seg->log->dir_fd, name);
    if (fstatat(seg->log->dir_fd, name, &st, 0) < 0) return -errno;
    seg->dev = st.st_dev;
    seg->ino = st.st_ino;
    seg->size_bytes = st.st_size;
    seg->modified_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (!active) {
        seg->sealed = true;
        return 0;
    }
    int fd = gr_sys_openat(seg->log->dir_fd, name, O_RDWR, 0);
    if (fd < 0) return fd;
    seg->fd = fd;
    return 0;
}

void gr_segment_ref(struct gr_segment *seg)
{
    atomic_fetch_add(&seg->refs, 1);
}

void gr_segment_unref(struct gr_segment *seg)
{
    if (atomic_fetch_sub(&seg->refs, 1) != 1) return;
    /* A log leaves the LRU before dropping its reference, so the last reference never finds it there. */
    assert(!seg->in_lru);
    gr_sys_close(seg->fd);
    gr_sys_close(seg->index_fd);
    gr_sys_close(seg->timeindex_fd);
    free(seg->idx);
    free(seg->tidx);
    free(seg->atx);
    free(seg);
}

void gr_segment_lru_remove(struct gr_segment *seg)
{
    if (!seg->in_lru) return;
    struct gr_store *store = seg->log->store;
    if (seg->lru_prev)
        seg->lru_prev->lru_next = seg->lru_next;
    else
        store->lru_head = seg->lru_next;
    if (seg->lru_next)
        seg->lru_next->lru_prev = seg->lru_prev;
    else
        store->lru_tail = seg->lru_prev;
    seg->lru_prev = seg->lru_next = NULL;
    seg->in_lru = false;
    store->lru_count--;
}

static void lru_push_front(struct gr_segment *seg)
{
    struct gr_store *store = seg->log->store;
    seg->lru_prev = NULL;
    seg->lru_next = store->lru_head;
    if (store->lru_head) store->lru_head->lru_prev = seg;
    store->lru_head = seg;
    if (!store->lru_tail) store->lru_tail = seg;
    seg->in_lru = true;
    store->lru_count++;
}

/* Closes least recently used .log files nobody else references until under the limit, looking at most
   `steps` entries (the tail holds the idle ones; pinned ones are recent, so the walk is short). An active
   segment qualifies like a sealed one: with refs == 1 it has no unsynced data (log->unsynced holds a
   reference), no flush naming it, no slice or pool load holding it; its next append reopens it
   (gr_log_append_prepare on the pool, or gr_log_append itself). */
static void lru_evict(struct gr_store *store, struct gr_segment *keep, int steps)
{
    struct gr_segment *s = store->lru_tail;
    while (store->lru_count > store->cfg.open_segment_fds_max && s && steps-- > 0) {
        struct gr_segment *prev = s->lru_prev;
        if (s != keep && atomic_load(&s->refs) == 1 && !atomic_load(&s->keep_fd)) {
            gr_segment_lru_remove(s);
            gr_sys_close(s->fd);
            s->fd = -1;
        }
        s = prev;
    }
}

#define LRU_EVICT_STEPS 64 /* entries looked at per open: bounds the work on the append and read paths */

void gr_store_fds_trim(struct gr_store *store)
{
    lru_evict(store, NULL, INT32_MAX);
}

int32_t gr_store_open_segment_fds(const struct gr_store *store)
{
    return store->lru_count;
}

/* The active segment of a log whose active file is kept open (gr_log_keep_active_open): outside the LRU,
   so it neither counts against the cap nor sits in the eviction walk. Sealed by a roll, it joins. */
static bool lru_exempt(const struct gr_segment *seg)
{
    return seg->log->active_fd_kept && !seg->sealed;
}

/* A descriptor just opened or installed: joins the LRU (unless deleted or exempt) and may push others out. */
static void lru_admit(struct gr_segment *seg)
{
    if (seg->deleted || seg->in_lru || lru_exempt(seg)) return;
    lru_push_front(seg);
    lru_evict(seg->log->store, seg, LRU_EVICT_STEPS);
}

int gr_segment_fd(struct gr_segment *seg)
{
    if (seg->shadow) return seg->fd; /* a pool thread's private copy: its own descriptor */
    if (seg->fd >= 0) {
        if (seg->in_lru && seg->log->store->lru_head != seg) {
            gr_segment_lru_remove(seg);
            lru_push_front(seg);
        } else if (!seg->in_lru && !seg->deleted && !lru_exempt(seg)) {
            lru_push_front(seg); /* opened before it could count (creation, load): it counts now */
        }
        if (seg->log->store->lru_count > seg->log->store->cfg.open_segment_fds_max)
            lru_evict(seg->log->store, seg, LRU_EVICT_STEPS); /* files pinned earlier may be free now */
        return seg->fd;
    }
    if (nowait) { /* opening may wait for the disk: the pool opens it (gr_seg_load) */
        nowait->kind = 3;
        nowait->seg = seg;
        return -EAGAIN;
    }
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, ".log");
    int fd = gr_sys_openat(seg->log->dir_fd, name, seg->sealed ? O_RDONLY : O_RDWR, 0);
    if (fd < 0) return fd;
    seg->fd = fd;
    lru_admit(seg);
    return fd;
}

static int grow(void **arr, int32_t *cap, int32_t count, size_t elem)
{
    if (count < *cap) return 0;
    int32_t ncap = *cap ? *cap * 2 : 64;
    void *n = realloc(*arr, (size_t)ncap * elem);
    if (!n) return -ENOMEM;
    *arr = n;
    *cap = ncap;
    return 0;
}

static void time_index_maybe_append(struct gr_segment *seg, int64_t ts, int64_t offset)
{
    int64_t last_ts = seg->tidx_count ? seg->tidx[seg->tidx_count - 1].timestamp_ms : -1;
    if (ts <= last_ts) return;
    if (grow((void **)&seg->tidx, &seg->tidx_cap, seg->tidx_count, sizeof(*seg->tidx)) < 0)
        return; /* a sparse index stays correct: the entry is an optimisation */
    seg->tidx[seg->tidx_count].timestamp_ms = ts;
    seg->tidx[seg->tidx_count].rel_offset = (int32_t)(offset - seg->base_offset);
    seg->tidx_count++;
}

/* Notes a batch; `may_index` false for a batch whose index entry already exists (clean-open tail scan). */
static void note_batch(struct gr_segment *seg, const uint8_t *hdr, int64_t pos,
                       const struct gr_log_config *cfg, bool may_index)
{
    int64_t last = gr_batch_last_offset(hdr);
    int64_t max_ts = gr_batch_max_timestamp(hdr);
    int64_t total = gr_batch_total_bytes(hdr);
    if (pos == 0) seg->rolling_timestamp_ms = max_ts;
    int32_t epoch = gr_batch_leader_epoch(hdr);
    if (epoch != seg->last_leader_epoch) {
        seg->last_leader_epoch = epoch;
        seg->last_epoch_start = gr_batch_base_offset(hdr);
    }
    if (max_ts > seg->max_timestamp_ms) {
        seg->max_timestamp_ms = max_ts;
        seg->max_timestamp_offset = last;
    }
    if (may_index && seg->bytes_since_index > cfg->index_interval_bytes) {
        if (grow((void **)&seg->idx, &seg->idx_cap, seg->idx_count, sizeof(*seg->idx)) == 0) {
            seg->idx[seg->idx_count].rel_offset = (int32_t)(last - seg->base_offset);
            seg->idx[seg->idx_count].position = (int32_t)pos;
            seg->idx_count++;
        }
        time_index_maybe_append(seg, seg->max_timestamp_ms, seg->max_timestamp_offset);
        seg->bytes_since_index = 0;
    }
    seg->bytes_since_index += total;
    seg->next_offset = last + 1;
    seg->size_bytes = pos + total;
}

int gr_segment_note_batch(struct gr_segment *seg, const uint8_t *hdr, int64_t pos,
                          const struct gr_log_config *cfg)
{
    note_batch(seg, hdr, pos, cfg, true);
    return 0;
}

bool gr_segment_index_full(const struct gr_segment *seg, const struct gr_log_config *cfg)
{
    int64_t max_idx = cfg->segment_index_bytes / 8, max_tidx = cfg->segment_index_bytes / 12;
    /* One time entry is kept in reserve for the final entry written at seal. */
    return seg->idx_count >= max_idx || seg->tidx_count >= max_tidx - 1;
}

static void reset_indexes(struct gr_segment *seg)
{
    seg->idx_count = seg->tidx_count = 0;
    seg->bytes_since_index = 0;
    seg->size_bytes = 0;
    seg->next_offset = seg->base_offset;
    seg->max_timestamp_ms = seg->max_timestamp_offset = seg->rolling_timestamp_ms = -1;
}

/* The directory holding the segment's files: a shadow's own duplicate (the log's may close meanwhile). */
static int seg_dir_fd(const struct gr_segment *seg)
{
    return seg->shadow ? seg->load_dir_fd : seg->log->dir_fd;
}

static int write_file(struct gr_segment *seg, int *fdp, const char *sfx, const uint8_t *buf, size_t len,
                      bool create)
{
    if (*fdp < 0) {
        char name[GR_SEGMENT_NAME_BYTES];
        gr_segment_file_name(name, seg->base_offset, sfx);
        int fd = gr_sys_openat(seg_dir_fd(seg), name, O_RDWR | (create ? O_CREAT : 0), 0644);
        if (fd < 0) return fd;
        *fdp = fd;
    }
    int err = gr_sys_pwrite_full(*fdp, buf, len, 0);
    if (err == 0) err = gr_sys_ftruncate(*fdp, (int64_t)len);
    return err;
}

uint8_t *gr_segment_index_encode(const struct gr_segment *seg, size_t *index_bytes, size_t *timeindex_bytes)
{
    size_t n1 = (size_t)seg->idx_count * 8, n2 = (size_t)seg->tidx_count * 12;
    uint8_t *buf = malloc(n1 + n2 + 1);
    if (!buf) return NULL;
    for (int32_t i = 0; i < seg->idx_count; i++) {
        gr_put_be32(buf + 8 * i, (uint32_t)seg->idx[i].rel_offset);
        gr_put_be32(buf + 8 * i + 4, (uint32_t)seg->idx[i].position);
    }
    for (int32_t i = 0; i < seg->tidx_count; i++) {
        gr_put_be64(buf + n1 + 12 * i, (uint64_t)seg->tidx[i].timestamp_ms);
        gr_put_be32(buf + n1 + 12 * i + 8, (uint32_t)seg->tidx[i].rel_offset);
    }
    *index_bytes = n1;
    *timeindex_bytes = n2;
    return buf;
}

bool gr_segment_name_parse(const char *name, const char *suffix, int64_t *base_offset)
{
    size_t n = strlen(name), sl = strlen(suffix);
    if (n != 20 + sl || strcmp(name + 20, suffix) != 0) return false;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return false;
        v = v * 10 + (name[i] - '0');
    }
    *base_offset = v;
    return true;
}

int gr_segment_txn_append(struct gr_segment *seg, const struct gr_aborted_txn *t)
{
    if (seg->atx_count == seg->atx_cap) {
        int32_t ncap = seg->atx_cap ? seg->atx_cap * 2 : 4;
        struct gr_aborted_txn *n = realloc(seg->atx, (size_t)ncap * sizeof(*n));
        if (!n) return -ENOMEM;
        seg->atx = n;
        seg->atx_cap = ncap;
    }
    seg->atx[seg->atx_count++] = *t;
    return 0;
}

void gr_segment_txn_truncate(struct gr_segment *seg, int64_t offset)
{
    while (seg->atx_count > 0 && seg->atx[seg->atx_count - 1].last_offset >= offset)
        seg->atx_count--;
}

uint8_t *gr_segment_txn_encode(const struct gr_segment *seg, size_t *len)
{
    *len = (size_t)seg->atx_count * GR_TXN_INDEX_ENTRY_BYTES;
    if (*len == 0) return NULL;
    uint8_t *buf = malloc(*len);
    if (!buf) return NULL;
    for (int32_t i = 0; i < seg->atx_count; i++) {
        uint8_t *p = buf + (size_t)i * GR_TXN_INDEX_ENTRY_BYTES;
        const struct gr_aborted_txn *t = &seg->atx[i];
        gr_put_be16(p, 0);
        gr_put_be64(p + 2, (uint64_t)t->producer_id);
        gr_put_be64(p + 10, (uint64_t)t->first_offset);
        gr_put_be64(p + 18, (uint64_t)t->last_offset);
        gr_put_be64(p + 26, (uint64_t)t->last_stable_offset);
    }
    return buf;
}

int gr_segment_txn_load(struct gr_segment *seg)
{
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, ".txnindex");
    char *buf;
    size_t len;
    int err = gr_file_read_all(seg_dir_fd(seg), name, (size_t)1 << 30, &buf, &len);
    if (err == -ENOENT) return 0;
    if (err < 0 && !gr_err_damaged(err)) return err;
    seg->atx_count = 0;
    if (err == 0 && len % GR_TXN_INDEX_ENTRY_BYTES == 0) {
        for (size_t off = 0; off < len; off += GR_TXN_INDEX_ENTRY_BYTES) {
            const uint8_t *p = (const uint8_t *)buf + off;
            struct gr_aborted_txn t = {.producer_id = (int64_t)gr_be64(p + 2),
                                       .first_offset = (int64_t)gr_be64(p + 10),
                                       .last_offset = (int64_t)gr_be64(p + 18),
                                       .last_stable_offset = (int64_t)gr_be64(p + 26)};
            if (gr_be16(p) != 0 || t.last_offset < seg->base_offset || t.first_offset > t.last_offset) {
                err = -EINVAL;
                break;
            }
            if ((err = gr_segment_txn_append(seg, &t)) < 0) break;
        }
    } else if (err == 0) {
        err = -EINVAL;
    }
    free(buf);
    if (err < 0) {
        seg->atx_count = 0;
        if (err == -ENOMEM) return err;
        GR_WARN("storage: %s: %s is damaged, ignored (rebuilt from the log where recovery replays it)",
                seg->log->dir_name, name);
    }
    return 0;
}

/* The .txnindex with the other index files (not by a shadow: it holds no entries). An empty index has no
   file (Kafka creates it on the first entry). Written and synced whole; an existing-only write creates it
   only next to an existing .index (a deleted segment never gets a file back). */
static int write_txn_index(struct gr_segment *seg, bool create)
{
    if (seg->shadow) return 0;
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, ".txnindex");
    size_t len;
    uint8_t *buf = gr_segment_txn_encode(seg, &len);
    if (len == 0) {
        int err = gr_sys_unlinkat(seg_dir_fd(seg), name, 0);
        return err == -ENOENT ? 0 : err;
    }
    if (!buf) return -ENOMEM;
    int fd =
        gr_sys_openat(seg_dir_fd(seg), name, O_RDWR | (create || seg->index_fd >= 0 ? O_CREAT : 0), 0644);
    int err = fd < 0 ? fd : gr_sys_pwrite_full(fd, buf, len, 0);
    if (err == 0) err = gr_sys_ftruncate(fd, (int64_t)len);
    if (err == 0) err = gr_sys_fdatasync(fd);
    if (fd >= 0) gr_sys_close(fd);
    free(buf);
    return err;
}

static int write_indexes(struct gr_segment *seg, bool create)
{
    size_t n1, n2;
    uint8_t *buf = gr_segment_index_encode(seg, &n1, &n2);
    if (!buf) return -ENOMEM;
    int err = write_file(seg, &seg->index_fd, ".index", buf, n1, create);
    int err2 = write_file(seg, &seg->timeindex_fd, ".timeindex", buf + n1, n2, create);
    free(buf);
    int err3 = err ? 0 : write_txn_index(seg, create);
    return err ? err : err2 ? err2 : err3;
}

int gr_segment_write_indexes(struct gr_segment *seg)
{
    return write_indexes(seg, true);
}

int gr_segment_write_indexes_existing(struct gr_segment *seg)
{
    return write_indexes(seg, false);
}

void gr_segment_seal_deferred(struct gr_segment *seg)
{
    time_index_maybe_append(seg, seg->max_timestamp_ms, seg->max_timestamp_offset);
    seg->sealed = true;
}

int gr_segment_seal(struct gr_segment *seg)
{
    time_index_maybe_append(seg, seg->max_timestamp_ms, seg->max_timestamp_offset);
    int err = gr_segment_write_indexes(seg);
    if (err < 0)
        GR_WARN_RATELIMITED("storage: %s: writing indexes of segment %" PRId64
                            " failed (%s); rebuilt on next load",
                            seg->log->dir_name, seg->base_offset, strerror(-err));
    seg->sealed = true;
    return err;
}

/* ---- buffered reader ---- */

void gr_segment_nowait_set(struct gr_read_nowait *nw)
{
    nowait = nw;
}

int gr_segment_nowait_cold_range(struct gr_segment *seg, int fd, int64_t pos, int64_t len)
{
    nowait->kind = 1;
    nowait->seg = seg;
    nowait->fd = fd;
    nowait->pos = pos;
    nowait->len = len;
    return -EAGAIN;
}

bool gr_segment_nowait_active(void)
{
    return nowait != NULL;
}

int gr_seg_reader_init(struct gr_seg_reader *r, int fd, size_t cap)
{
    r->end = 0;
    r->fd = fd;
    r->cap = cap;
    r->buf_pos = 0;
    r->buf_len = 0;
    r->buf = malloc(cap);
    return r->buf ? 0 : -ENOMEM;
}

void gr_seg_reader_free(struct gr_seg_reader *r)
{
    free(r->buf);
    r->buf = NULL;
}

const uint8_t *gr_seg_reader_batch_for_producers(struct gr_seg_reader *r, int64_t pos, const uint8_t *h,
                                                 size_t *have, int *err)
{
    int64_t total = gr_batch_total_bytes(h);
    *have = GR_BATCH_HEADER_BYTES;
    if (!(gr_batch_attributes(h) & GR_BATCH_ATTR_CONTROL) || gr_batch_producer_id(h) < 0 || total > 4096)
        return h;
    *have = (size_t)total;
    return gr_seg_reader_get(r, pos, (size_t)total, err);
}

const uint8_t *gr_seg_reader_get(struct gr_seg_reader *r, int64_t pos, size_t n, int *err)
{
    *err = 0;
    if (n > r->cap) {
        *err = -EINVAL;
        return NULL;
    }
    if (pos >= r->buf_pos && pos + (int64_t)n <= r->buf_pos + (int64_t)r->buf_len)
        return r->buf + (pos - r->buf_pos);
    if (nowait && r->end > pos) {
        int64_t len = r->end - pos < (int64_t)r->cap ? r->end - pos : (int64_t)r->cap;
        if (gr_sys_range_resident(r->fd, pos, len) == 0) {
            nowait->kind = 1;
            nowait->fd = r->fd;
            nowait->pos = pos;
            nowait->len = len;
            *err = -EAGAIN;
            return NULL;
        }
    }
    ssize_t got = gr_sys_pread_full(r->fd, r->buf, r->cap, pos);
    if (got < 0) {
        r->buf_len = 0;
        *err = (int)got;
        return NULL;
    }
    r->buf_pos = pos;
    r->buf_len = (size_t)got;
    if ((size_t)got < n) return NULL;
    return r->buf;
}

/* Non-validating header scan of [from, size_bytes) noting every batch. -EIO if the chain breaks. */
static int scan_headers(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t from, int64_t end,
                        bool first_indexed)
{
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    struct gr_seg_reader r;
    if (gr_seg_reader_init(&r, fd, RECOVERY_READ_BYTES) < 0) return -ENOMEM;
    int64_t pos = from;
    int err = 0;
    while (pos < end) {
        const uint8_t *h = gr_seg_reader_get(&r, pos, GR_BATCH_HEADER_BYTES, &err);
        if (!h) {
            err = err ? err : -EIO;
            break;
        }
        int64_t total = gr_batch_total_bytes(h);
        if (gr_batch_length(h) < BATCH_LENGTH_MIN || total > end - pos || gr_batch_magic(h) != 2) {
            err = -EIO;
            break;
        }
        note_batch(seg, h, pos, cfg, !(first_indexed && pos == from));
        pos += total;
    }
    gr_seg_reader_free(&r);
    if (err == 0 && pos != end) err = -EIO;
    return err;
}

static int read_index_file(struct gr_segment *seg, const char *sfx, char **buf, size_t *len)
{
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, sfx);
    return gr_file_read_all(seg_dir_fd(seg), name, INDEX_FILE_BYTES_MAX, buf, len);
}

/* Parses and sanity-checks both index files against size_bytes/next_offset. 0 or -EINVAL/-errno. */
static int parse_indexes(struct gr_segment *seg)
{
    char *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    int err = read_index_file(seg, ".index", &b1, &l1);
    if (err == 0) err = read_index_file(seg, ".timeindex", &b2, &l2);
    if (err == 0 && (l1 % 8 || l2 % 12)) err = -EINVAL;
    int64_t max_rel = seg->next_offset - 1 - seg->base_offset;
    seg->idx_count = seg->tidx_count = 0;
    for (size_t i = 0; err == 0 && i < l1 / 8; i++) {
        const uint8_t *p = (const uint8_t *)b1 + 8 * i;
        int32_t rel = (int32_t)gr_be32(p), pos = (int32_t)gr_be32(p + 4);
        const struct gr_index_entry *prev = seg->idx_count ? &seg->idx[seg->idx_count - 1] : NULL;
        if (rel < 0 || rel > max_rel || pos < 0 || pos >= seg->size_bytes ||
            (prev && (rel <= prev->rel_offset || pos <= prev->position)))
            err = -EINVAL;
        else if (grow((void **)&seg->idx, &seg->idx_cap, seg->idx_count, sizeof(*seg->idx)) < 0)
            err = -ENOMEM;
        else
            seg->idx[seg->idx_count++] = (struct gr_index_entry){rel, pos};
    }
    for (size_t i = 0; err == 0 && i < l2 / 12; i++) {
        const uint8_t *p = (const uint8_t *)b2 + 12 * i;
        int64_t ts = (int64_t)gr_be64(p);
        int32_t rel = (int32_t)gr_be32(p + 8);
        const struct gr_time_entry *prev = seg->tidx_count ? &seg->tidx[seg->tidx_count - 1] : NULL;
        if (rel < 0 || rel > max_rel || ts < 0 ||
            (prev && (ts <= prev->timestamp_ms || rel < prev->rel_offset)))
            err = -EINVAL;
        else if (grow((void **)&seg->tidx, &seg->tidx_cap, seg->tidx_count, sizeof(*seg->tidx)) < 0)
            err = -ENOMEM;
        else
            seg->tidx[seg->tidx_count++] = (struct gr_time_entry){ts, rel};
    }
    free(b1);
    free(b2);
    if (err < 0) seg->idx_count = seg->tidx_count = 0;
    return err;
}

static int rebuild_indexes(struct gr_segment *seg, const struct gr_log_config *cfg)
{
    int64_t size = seg->size_bytes, next = seg->next_offset;
    reset_indexes(seg);
    int err = scan_headers(seg, cfg, 0, size, false);
    if (err < 0) {
        GR_ERROR("storage: %s: segment %" PRId64 " is unreadable below the recovery point (%s)",
                 seg->log->dir_name, seg->base_offset, strerror(-err));
        seg->size_bytes = size;
        seg->next_offset = next;
        return err;
    }
    if (seg->sealed) time_index_maybe_append(seg, seg->max_timestamp_ms, seg->max_timestamp_offset);
    GR_INFO("storage: %s: rebuilt indexes of segment %" PRId64 " (%d entries)", seg->log->dir_name,
            seg->base_offset, seg->idx_count);
    if (seg->sealed) {
        err = gr_segment_write_indexes(seg);
        gr_sys_close(seg->index_fd);
        gr_sys_close(seg->timeindex_fd);
        seg->index_fd = seg->timeindex_fd = -1;
        if (err < 0)
            GR_WARN("storage: %s: rewriting indexes of %" PRId64 " failed (%s)", seg->log->dir_name,
                    seg->base_offset, strerror(-err));
    }
    return 0;
}

int gr_segment_load_index(struct gr_segment *seg, const struct gr_log_config *cfg)
{
    if (seg->index_loaded) return 0;
    if (nowait) { /* reading (or rebuilding) the index files may wait for the disk: the pool loads them */
        nowait->kind = 2;
        nowait->seg = seg;
        return -EAGAIN;
    }
    int err = parse_indexes(seg);
    if (err == -ENOMEM) return err;
    if (err < 0) {
        GR_WARN("storage: %s: index of segment %" PRId64 " missing or invalid (%s), rebuilding",
                seg->log->dir_name, seg->base_offset, strerror(-err));
        err = rebuild_indexes(seg, cfg);
        if (err < 0) return err;
    }
    seg->index_loaded = true;
    return 0;
}

int gr_segment_load_max_timestamp(struct gr_segment *seg, const struct gr_log_config *cfg)
{
    if (seg->size_bytes == 0) return 0;
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, seg->base_offset, ".timeindex");
    struct stat st;
    gr_sys_audit_note("fstatat", seg->log->dir_fd, name);
    if (fstatat(seg->log->dir_fd, name, &st, 0) == 0 && st.st_size >= 12 && st.st_size % 12 == 0) {
        int fd = gr_sys_openat(seg->log->dir_fd, name, O_RDONLY, 0);
        if (fd >= 0) {
            uint8_t e[12];
            ssize_t r = gr_sys_pread_full(fd, e, 12, st.st_size - 12);
            gr_sys_close(fd);
            int64_t ts = (int64_t)gr_be64(e);
            int64_t rel = (int32_t)gr_be32(e + 8);
            if (r == 12 && ts >= 0 && rel >= 0 && seg->base_offset + rel < seg->next_offset) {
                seg->max_timestamp_ms = ts;
                seg->max_timestamp_offset = seg->base_offset + rel;
                return 0;
            }
        }
    }
    /* No usable time index: load (and if needed rebuild) the indexes, which recomputes the maximum. */
    seg->index_loaded = false;
    int err = gr_segment_load_index(seg, cfg);
    if (err == 0 && seg->tidx_count) {
        seg->max_timestamp_ms = seg->tidx[seg->tidx_count - 1].timestamp_ms;
        seg->max_timestamp_offset = seg->base_offset + seg->tidx[seg->tidx_count - 1].rel_offset;
    }
    return err;
}

int gr_segment_recover(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t *file_bytes,
                       const char **why)
{
    *why = NULL;
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    int64_t fsize = st.st_size;
    *file_bytes = fsize;
    reset_indexes(seg);
    struct gr_seg_reader r;
    if (gr_seg_reader_init(&r, fd, RECOVERY_READ_BYTES) < 0) return -ENOMEM;
    int64_t pos = 0, expected = seg->base_offset;
    int err = 0;
    uint8_t hdr[GR_BATCH_HEADER_BYTES];
    while (pos < fsize) {
        if (fsize - pos < GR_BATCH_HEADER_BYTES) {
            *why = "torn batch header at end of file";
            break;
        }
        const uint8_t *h = gr_seg_reader_get(&r, pos, GR_BATCH_HEADER_BYTES, &err);
        if (!h) {
            err = err ? err : -EIO;
            break;
        }
        memcpy(hdr, h, sizeof(hdr));
        int64_t total = gr_batch_total_bytes(hdr);
        if (gr_batch_length(hdr) < BATCH_LENGTH_MIN) {
            *why = "batch length below the minimum";
            break;
        }
        if (total > fsize - pos) {
            *why = "torn batch at end of file";
            break;
        }
        if (gr_batch_magic(hdr) != 2) {
            *why = "magic is not 2";
            break;
        }
        if (gr_batch_base_offset(hdr) < expected) { /* compaction leaves gaps: only order is required */
            *why = "base offset below the previous batch's end";
            break;
        }
        if (gr_batch_last_offset_delta(hdr) < 0 || gr_batch_last_offset(hdr) - seg->base_offset > INT32_MAX) {
            *why = "bad last offset delta";
            break;
        }
        uint32_t crc =
            gr_crc32c(0, hdr + GR_BATCH_OFF_ATTRIBUTES, GR_BATCH_HEADER_BYTES - GR_BATCH_OFF_ATTRIBUTES);
        int64_t p = pos + GR_BATCH_HEADER_BYTES, left = total - GR_BATCH_HEADER_BYTES;
        while (left > 0 && err == 0) {
            size_t n = left > (int64_t)r.cap ? r.cap : (size_t)left;
            const uint8_t *chunk = gr_seg_reader_get(&r, p, n, &err);
            if (!chunk) {
                err = err ? err : -EIO;
                break;
            }
            crc = gr_crc32c(crc, chunk, n);
            p += (int64_t)n;
            left -= (int64_t)n;
        }
        if (err) break;
        if (crc != gr_batch_crc(hdr)) {
            *why = "CRC-32C mismatch";
            break;
        }
        note_batch(seg, hdr, pos, cfg, true);
        expected = gr_batch_last_offset(hdr) + 1;
        pos += total;
    }
    gr_seg_reader_free(&r);
    seg->index_loaded = true;
    return err;
}

int gr_segment_scan_tail(struct gr_segment *seg, const struct gr_log_config *cfg)
{
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    int64_t fsize = st.st_size;
    seg->size_bytes = fsize;
    seg->next_offset = INT64_MAX; /* unknown yet: let parse_indexes accept any relative offset */
    int err = parse_indexes(seg);
    if (err < 0) return err == -ENOMEM ? err : -EINVAL;
    int64_t from = seg->idx_count ? seg->idx[seg->idx_count - 1].position : 0;
    seg->next_offset = seg->base_offset;
    seg->max_timestamp_ms = seg->tidx_count ? seg->tidx[seg->tidx_count - 1].timestamp_ms : -1;
    seg->max_timestamp_offset =
        seg->tidx_count ? seg->base_offset + seg->tidx[seg->tidx_count - 1].rel_offset : -1;
    seg->bytes_since_index = 0;
    if (fsize > 0) {
        uint8_t first[GR_BATCH_HEADER_BYTES];
        ssize_t r = gr_sys_pread_full(fd, first, sizeof(first), 0);
        if (r != (ssize_t)sizeof(first)) return r < 0 ? (int)r : -EINVAL;
        seg->rolling_timestamp_ms = gr_batch_max_timestamp(first);
    }
    err = scan_headers(seg, cfg, from, fsize, seg->idx_count > 0);
    if (err < 0) return -EINVAL;
    /* The last time entry must not point past the data found (a stale file). */
    if (seg->tidx_count && seg->base_offset + seg->tidx[seg->tidx_count - 1].rel_offset >= seg->next_offset)
        return -EINVAL;
    seg->index_loaded = true;
    return 0;
}

int gr_segment_truncate_mem(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t pos)
{
    assert(seg->index_loaded && pos >= 0 && pos <= seg->size_bytes);
    int32_t keep = 0; /* index entries of batches wholly below pos (an entry points at its batch's start) */
    while (keep < seg->idx_count && seg->idx[keep].position < pos)
        keep++;
    int64_t from = keep ? seg->idx[keep - 1].position : 0;
    /* The last kept entry's batch is rescanned; entries of the rescanned tail are added again. */
    int64_t from_next = keep ? seg->base_offset + seg->idx[keep - 1].rel_offset + 1 : seg->base_offset;
    seg->idx_count = keep;
    int32_t tkeep = 0;
    while (tkeep < seg->tidx_count && seg->base_offset + seg->tidx[tkeep].rel_offset < from_next)
        tkeep++;
    seg->tidx_count = tkeep;
    int64_t rolling = pos > 0 ? seg->rolling_timestamp_ms : -1;
    seg->max_timestamp_ms = tkeep ? seg->tidx[tkeep - 1].timestamp_ms : -1;
    seg->max_timestamp_offset = tkeep ? seg->base_offset + seg->tidx[tkeep - 1].rel_offset : -1;
    seg->last_leader_epoch = -1;
    seg->last_epoch_start = -1;
    seg->bytes_since_index = 0;
    seg->size_bytes = from;
    seg->next_offset = from == 0 ? seg->base_offset : from_next;
    int err = pos > from ? scan_headers(seg, cfg, from, pos, keep > 0) : 0;
    seg->rolling_timestamp_ms = rolling;
    return err;
}

int gr_segment_find(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t target, int64_t *pos_out,
                    uint8_t *hdr)
{
    int err = gr_segment_load_index(seg, cfg);
    if (err < 0) return err;
    int64_t rel = target - seg->base_offset;
    int64_t start = 0;
    int32_t lo = 0, hi = seg->idx_count - 1;
    while (lo <= hi) { /* largest entry with rel_offset <= rel */
        int32_t mid = lo + (hi - lo) / 2;
        if (seg->idx[mid].rel_offset <= rel) {
            start = seg->idx[mid].position;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    struct gr_seg_reader r;
    if (gr_seg_reader_init(&r, fd, LOOKUP_READ_BYTES) < 0) return -ENOMEM;
    r.end = seg->size_bytes;
    if (nowait) nowait->seg = seg;
    int64_t pos = start;
    int found = 0;
    while (pos < seg->size_bytes) {
        const uint8_t *h = gr_seg_reader_get(&r, pos, GR_BATCH_HEADER_BYTES, &err);
        if (!h) {
            found = err ? err : -EIO;
            break;
        }
        int64_t total = gr_batch_total_bytes(h);
        if (gr_batch_length(h) < BATCH_LENGTH_MIN || total > seg->size_bytes - pos) {
            found = -EIO;
            break;
        }
        if (gr_batch_last_offset(h) >= target) {
            memcpy(hdr, h, GR_BATCH_HEADER_BYTES);
            found = 1;
            break;
        }
        pos += total;
    }
    gr_seg_reader_free(&r);
    *pos_out = pos;
    return found;
}

int64_t gr_segment_boundary_before(struct gr_segment *seg, int64_t from, int64_t limit)
{
    int64_t start = from;
    int32_t lo = 0, hi = seg->idx_count - 1;
    while (lo <= hi) { /* largest entry with position <= limit */
        int32_t mid = lo + (hi - lo) / 2;
        if (seg->idx[mid].position <= limit) {
            if (seg->idx[mid].position > start) start = seg->idx[mid].position;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    int fd = gr_segment_fd(seg);
    if (fd < 0) return fd;
    struct gr_seg_reader r;
    if (gr_seg_reader_init(&r, fd, LOOKUP_READ_BYTES) < 0) return -ENOMEM;
    r.end = seg->size_bytes;
    if (nowait) nowait->seg = seg;
    int64_t pos = start;
    int err = 0;
    while (pos < limit) {
        const uint8_t *h = gr_seg_reader_get(&r, pos, GR_BATCH_HEADER_BYTES, &err);
        if (!h) {
            if (err == 0 && pos + GR_BATCH_HEADER_BYTES > seg->size_bytes) break;
            pos = err ? err : -EIO;
            break;
        }
        int64_t total = gr_batch_total_bytes(h);
        if (gr_batch_length(h) < BATCH_LENGTH_MIN) {
            pos = -EIO;
            break;
        }
        if (pos + total > limit) break;
        pos += total;
    }
    gr_seg_reader_free(&r);
    return pos;
}

/* ---- index loads and opens on a pool thread (no-wait reads) ---- */

struct gr_seg_load {
    int dir_fd;               /* owned duplicate of the partition directory */
    bool want_fd, want_index; /* open the .log / load the indexes */
    bool active;              /* the active segment: opened read-write */
    int64_t base_offset, size_bytes, next_offset;
    struct gr_log_config cfg;  /* copied: the topic's settings may change meanwhile */
    struct gr_log *log;        /* for names in messages only (lives until the store closes) */
    int fd;                    /* result: the opened .log, or -1 */
    struct gr_segment *shadow; /* result: loaded indexes */
    int err;
};

struct gr_seg_load *gr_seg_load_new(struct gr_segment *seg, bool want_fd, bool want_index)
{
    struct gr_seg_load *ld = calloc(1, sizeof(*ld));
    if (!ld) return NULL;
    ld->dir_fd = dup(seg->log->dir_fd);
    if (ld->dir_fd < 0) {
        free(ld);
        return NULL;
    }
    ld->want_fd = want_fd && seg->fd < 0;
    ld->want_index = want_index && !seg->index_loaded;
    ld->active = !seg->sealed;
    ld->base_offset = seg->base_offset;
    ld->size_bytes = seg->size_bytes;
    ld->next_offset = seg->next_offset;
    ld->cfg = seg->log->topic->cfg;
    ld->log = seg->log;
    ld->fd = -1;
    return ld;
}

void gr_seg_load_run(struct gr_seg_load *ld)
{
    char name[GR_SEGMENT_NAME_BYTES];
    gr_segment_file_name(name, ld->base_offset, ".log");
    int own = -1;
    if (ld->want_fd) {
        ld->fd = gr_sys_openat(ld->dir_fd, name, ld->active ? O_RDWR : O_RDONLY, 0);
        if (ld->fd < 0) {
            ld->err = ld->fd;
            ld->fd = -1;
            return;
        }
    }
    if (!ld->want_index) return;
    if (ld->fd < 0) { /* a descriptor of its own: the segment's may be closed by the LRU meanwhile */
        own = gr_sys_openat(ld->dir_fd, name, O_RDONLY, 0);
        if (own < 0) {
            ld->err = own;
            return;
        }
    }
    struct gr_segment *sh = gr_segment_new(ld->log, ld->base_offset);
    if (!sh) {
        gr_sys_close(own);
        ld->err = -ENOMEM;
        return;
    }
    sh->shadow = true;
    sh->load_dir_fd = ld->dir_fd;
    sh->sealed = !ld->active;
    sh->size_bytes = ld->size_bytes;
    sh->next_offset = ld->next_offset;
    sh->fd = ld->fd >= 0 ? ld->fd : own;
    int err = parse_indexes(sh);
    if (err < 0 && err != -ENOMEM) {
        GR_WARN("storage: %s: index of segment %" PRId64 " missing or invalid (%s), rebuilding",
                ld->log->dir_name, ld->base_offset, strerror(-err));
        err = rebuild_indexes(sh, &ld->cfg);
    }
    sh->fd = own; /* the shadow closes only its own descriptor */
    if (err < 0) {
        gr_segment_unref(sh);
        ld->err = err;
        return;
    }
    gr_sys_close(sh->fd);
    sh->fd = -1;
    ld->shadow = sh;
}

void gr_seg_load_install(struct gr_segment *seg, struct gr_seg_load *ld)
{
    if (ld->fd >= 0) {
        if (seg->fd < 0 && !seg->deleted) {
            seg->fd = ld->fd;
            lru_admit(seg);
        } else {
            gr_sys_close(ld->fd); /* opened meanwhile by someone else, or gone */
        }
        ld->fd = -1;
    }
    struct gr_segment *sh = ld->shadow;
    if (sh && !seg->index_loaded && seg->size_bytes == sh->size_bytes) {
        struct gr_index_entry *idx = seg->idx;
        struct gr_time_entry *tidx = seg->tidx;
        int32_t ic = seg->idx_cap, tc = seg->tidx_cap;
        seg->idx = sh->idx;
        seg->idx_count = sh->idx_count;
        seg->idx_cap = sh->idx_cap;
        seg->tidx = sh->tidx;
        seg->tidx_count = sh->tidx_count;
        seg->tidx_cap = sh->tidx_cap;
        sh->idx = idx;
        sh->idx_cap = ic;
        sh->tidx = tidx;
        sh->tidx_cap = tc;
        seg->index_loaded = true;
    }
}

int gr_seg_load_err(const struct gr_seg_load *ld)
{
    return ld->err;
}

void gr_seg_load_free(struct gr_seg_load *ld)
{
    if (!ld) return;
    gr_sys_close(ld->fd);
    gr_sys_close(ld->dir_fd);
    if (ld->shadow) gr_segment_unref(ld->shadow);
    free(ld);
}
