/*
 * roll.c: the next segment's file is made ahead of the roll, so that rolling does no file-system call on
 * the network thread. When the active segment passes half of a roll limit (and right after each roll, so a
 * log that rolls keeps one spare: one more open descriptor per such partition), flusher thread 0 opens an
 * unnamed file in the partition directory (open(dir, O_TMPFILE)) and leaves its descriptor in
 * log->spare_fd. The roll takes it (the base offset is only known then) and appends to it at once; the
 * file gets its names (<base>.log linked, .index and .timeindex created) in the flush that the roll
 * requests, BEFORE that flush's fdatasync and directory fsync, so nothing is reported durable before it has
 * a durable name. A crash before the naming leaves an unnamed file the file system reclaims: its data was
 * never reported durable, and the log ends where the previous segment ends (storage/format.md holds).
 *
 * Naming states (segment name_state, under log->mu): PENDING (made from a spare, no names yet) ->
 * NAMING (a flush took it) -> DONE. A segment dropped while PENDING never gets names; one dropped while
 * NAMING is unlinked by that flush after naming (unlink_after_naming), so retention can never resurrect a
 * file.
 *
 * When a roll is due and no spare is ready (gr_roll_defer): a roll due to a SOFT limit (segment.bytes,
 * segment.ms, a full index) waits: the spare is requested, appends go on to the active segment, and the
 * first append after the spare is ready rolls. A segment may so exceed segment.bytes (and its index
 * segment.index.bytes) by the batches appended while the flusher's spare thread (flusher.c: one thread
 * runs only these jobs and undos) makes the spare (Kafka never lets a segment pass segment.bytes: it
 * creates the files inside the append): typically the requests read in one burst. A HARD limit (file
 * position or relative offset past 2^31-1, or a segment already holding max(2 x segment.bytes,
 * cfg.roll_wait_bytes_min = 64 MiB): the bound on that excess) rolls at once, creating the files on the
 * network thread as the last resort; the spare is asked for at half of every limit and right after each
 * roll, so that is practically unreachable. Without flusher threads (unit tests), or when the last spare job
 * failed (no O_TMPFILE support), the roll creates its files itself. Read next: log.c (log_roll,
 * gr_log_flush_begin), flusher.c (GR_JOB_SPARE).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "storage/internal.h"
#include "storage/sys.h"

/* Queues the spare job unless a spare exists or is queued. */
static void roll_request(struct gr_log *log)
{
    if (atomic_load(&log->spare_fd) >= 0 || atomic_load(&log->spare_requested) || !log->store->fl.threads)
        return;
    struct gr_job *job = calloc(1, sizeof(*job));
    if (!job) return;
    job->type = GR_JOB_SPARE;
    job->any_thread = true;
    job->log = log;
    job->dir_fd = dup(log->dir_fd);
    if (job->dir_fd < 0) {
        free(job);
        return;
    }
    atomic_store(&log->spare_requested, true);
    gr_flusher_job(log->store, job);
}

void gr_roll_prepare(struct gr_log *log, const struct gr_segment *active, int64_t now_ms)
{
    if (atomic_load(&log->spare_fd) >= 0 || atomic_load(&log->spare_requested) || !log->store->fl.threads)
        return;
    if (now_ms == INT64_MIN) { /* just rolled: the next spare at once */
        roll_request(log);
        return;
    }
    const struct gr_log_config *cfg = &log->topic->cfg;
    int64_t age =
        gr_ms_sub_sat(now_ms, active->created_ms); /* a hint: the roll itself uses record timestamps */
    /* Half of every limit, the hard ones too (file position and relative offset must fit 31 bits; only
       those rolls may still create files on the network thread, when even a spare asked for at half-way
       is not there). */
    int64_t ts_age = active->rolling_timestamp_ms >= 0
                         ? gr_ms_sub_sat(active->max_timestamp_ms, active->rolling_timestamp_ms)
                         : 0;
    bool near = active->size_bytes > cfg->segment_bytes / 2 || age > cfg->segment_ms / 2 ||
                ts_age > cfg->segment_ms / 2 || active->idx_count > cfg->segment_index_bytes / 16 ||
                active->tidx_count > cfg->segment_index_bytes / 24 || active->size_bytes > INT32_MAX / 2 ||
                active->next_offset - active->base_offset > INT32_MAX / 2;
    if (near) roll_request(log);
}

bool gr_roll_defer(struct gr_log *log)
{
    if (!log->store->fl.threads) return false;
    if (atomic_load(&log->spare_fd) >= 0) return false;           /* ready: roll now */
    if (atomic_exchange(&log->spare_failed, false)) return false; /* none can be made: roll the old way */
    roll_request(log);
    return true;
}

void gr_roll_spare_job_run(struct gr_job *job)
{
    struct gr_log *log = job->log;
    int fd = gr_sys_openat(job->dir_fd, ".", O_TMPFILE | O_RDWR, 0644);
    if (fd < 0) {
        GR_DEBUG("storage: %s: no spare segment file (%s): the roll creates it", log->dir_name,
                 strerror(-fd));
        atomic_store(&log->spare_failed, true);
    } else {
        int old = atomic_exchange(&log->spare_fd, fd);
        if (old >= 0) gr_sys_close(old);
    }
    atomic_store(&log->spare_requested, false);
}

struct gr_segment *gr_roll_take_spare(struct gr_log *log, int64_t base)
{
    int fd = atomic_exchange(&log->spare_fd, -1);
    if (fd < 0) return NULL;
    struct stat st;
    struct gr_segment *seg = gr_segment_new(log, base);
    if (!seg || fstat(fd, &st) < 0) {
        free(seg);
        gr_sys_close(fd);
        return NULL;
    }
    seg->fd = fd;
    seg->dev = st.st_dev;
    seg->ino = st.st_ino;
    seg->index_loaded = true;
    seg->name_state = GR_NAME_PENDING;
    return seg;
}

int gr_roll_name_segment(struct gr_segment *seg)
{
    char name[GR_SEGMENT_NAME_BYTES];
    int dir = seg->log->dir_fd;
    gr_segment_file_name(name, seg->base_offset, ".log");
    int err = gr_sys_link_fd(seg->fd, dir, name);
    /* The index files are rebuildable from the .log: failing to create them (ENOSPC) costs a rebuild at
       the next load, not durability, so only the link decides the flush's outcome. */
    static const char *const sfx[] = {".index", ".timeindex"};
    for (int i = 0; i < 2 && err == 0; i++) {
        gr_segment_file_name(name, seg->base_offset, sfx[i]);
        int fd = gr_sys_openat(dir, name, O_RDWR | O_CREAT, 0644); /* a clean close may have written it */
        if (fd < 0)
            GR_WARN_RATELIMITED("storage: %s: creating %s failed (%s); rebuilt on next load",
                                seg->log->dir_name, name, strerror(-fd));
        gr_sys_close(fd);
    }
    if (err < 0)
        GR_ERROR("storage: %s: naming segment %" PRId64 " failed (%s)", seg->log->dir_name, seg->base_offset,
                 strerror(-err));
    return err;
}

void gr_roll_unlink_names(struct gr_segment *seg)
{
    static const char *const sfx[] = {".log", ".index", ".timeindex"};
    char name[GR_SEGMENT_NAME_BYTES];
    for (int i = 0; i < 3; i++) {
        gr_segment_file_name(name, seg->base_offset, sfx[i]);
        gr_sys_unlinkat(seg->log->dir_fd, name, 0);
    }
    gr_dir_sync(seg->log->dir_fd);
}
