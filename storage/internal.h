/*
 * internal.h: storage's private structs (segment, log, topic, store, flusher) and the functions the .c
 * files of this folder share. Nothing outside storage/ includes it (tests do, to look inside).
 *
 * Ownership: the store owns topics (live ones sorted by name, deleted ones parked until close); a topic
 * owns its logs; a log owns one reference on each of its segments. A segment is freed (fds closed) when its
 * last reference goes: slices and flush work hold references too. Fields marked [mu] are shared with the
 * flusher threads and touched only under log->mu (or atomically where said); all other fields belong to
 * the network thread. Read next: segment.c for the file formats, log.c, store.c, flusher.c.
 */
#ifndef GR_STORAGE_INTERNAL_H
#define GR_STORAGE_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/lag.h"
#include "storage/log.h"
#include "storage/producer_state.h"
#include "storage/store.h"

#define GR_SEGMENT_NAME_BYTES 48 /* "<20 digits>.timeindex" plus room */
#define GR_SNAPSHOTS_KEPT 3      /* producer snapshots kept per log beyond those needed */

struct gr_index_entry {
    int32_t rel_offset; /* last offset of the indexed batch - segment base offset */
    int32_t position;   /* file position of that batch */
};
struct gr_time_entry {
    int64_t timestamp_ms; /* largest timestamp in the segment up to and including the batch */
    int32_t rel_offset;   /* last offset of the first batch carrying that timestamp - base offset */
};

struct gr_segment {
    struct gr_log *log;
    int64_t base_offset;
    atomic_int refs;
    int fd; /* .log; -1 while closed by the LRU (sealed, or an idle active segment: see gr_segment_fd) */
    int index_fd; /* .index/.timeindex: open from seal (or clean close) until a flusher synced them */
    int timeindex_fd;
    dev_t dev; /* identity of the .log file, checked before unlinking by name */
    ino_t ino;
    int64_t size_bytes;           /* bytes of whole batches in the file */
    int64_t next_offset;          /* last offset + 1 of the last batch; base_offset when empty */
    int64_t max_timestamp_ms;     /* largest batch max timestamp, -1 none */
    int64_t max_timestamp_offset; /* last offset of the first batch carrying it, -1 none */
    int64_t rolling_timestamp_ms; /* max timestamp of the first batch (segment.ms base), -1 none */
    int32_t last_leader_epoch; /* partition leader epoch of the last batch noted (scan or append), -1 none */
    int64_t last_epoch_start;  /* base offset of the first noted batch carrying it (as far as scanned) */
    int64_t created_ms;        /* wall clock at creation/open (segment.ms base without timestamps) */
    int64_t modified_ms;       /* wall clock of the last append (retention without timestamps) */
    int64_t bytes_since_index;
    bool sealed;
    bool index_loaded;    /* idx/tidx hold the whole index (always true for the active segment) */
    bool shadow;          /* a pool thread's private copy loading indexes (gr_seg_load): never in the LRU */
    int load_dir_fd;      /* shadow only: the partition directory to read/write index files in, else -1 */
    bool index_unsynced;  /* [mu] sealed, index files written (or to write) but not yet fdatasynced */
    bool index_unwritten; /* [mu] sealed by a roll: the next flush writes the index files, then syncs them */
    bool in_unsynced;     /* [mu] listed in log->unsynced */
    bool deleted;         /* removed from its log; files unlinked by a flusher job */
    uint8_t
        name_state; /* [mu] GR_NAME_*: a segment made from a spare (O_TMPFILE) gets its names in a flush */
    bool unlink_after_naming; /* [mu] dropped while a flush was naming it: that flush unlinks the names */
    struct gr_index_entry *idx;
    int32_t idx_count, idx_cap;
    struct gr_time_entry *tidx;
    int32_t tidx_count, tidx_cap;
    /* The aborted-transaction index (.txnindex, storage/format.md): entries in marker order, whole in memory
       (loaded at open, rebuilt by recovery's producer replay), written to the file with the other indexes. */
    struct gr_aborted_txn *atx;
    int32_t atx_count, atx_cap;
    struct gr_segment *lru_prev, *lru_next; /* store LRU of open .log fds (sealed and active) */
    bool in_lru;
    /* Set (any thread) when the files lost their final names (a cleaner swap whose renames failed, completed
       at the next open): the descriptor must never be closed by the LRU and reopened by a name. */
    atomic_bool keep_fd;
};

enum { GR_NAME_DONE = 0, GR_NAME_PENDING = 1, GR_NAME_NAMING = 2 };

struct gr_epoch_entry {
    int32_t epoch;
    int64_t start_offset;
};

struct gr_log {
    struct gr_store *store;
    struct gr_topic *topic;
    int32_t partition;
    char *dir_name; /* "<topic>-<partition>" relative to the log dir */
    int dir_fd;
    bool active_fd_kept;      /* gr_log_keep_active_open: the fd cap never closes the active segment's file */
    struct gr_segment **segs; /* by base offset; last = active */
    int seg_count, seg_cap;
    int64_t log_start_offset;
    int64_t log_end_offset; /* written under mu, read unlocked by the network thread */
    /* An upper bound on the end offset (last offset + 1) of the latest non-control batch (storage/log.h
       gr_log_data_end_offset): set by leader and follower appends of data batches, lowered by truncations,
       the log end offset at open. Network thread. */
    int64_t data_end_offset;
    int64_t high_watermark; /* last reported by the server, or restored from the checkpoint; -1 none */
    bool hwm_from_server;   /* set since open: only then does it bound retention */
    int64_t size_bytes;
    int32_t leader_epoch;
    struct gr_epoch_entry *epochs;
    int epoch_count, epoch_cap;
    bool epochs_dirty;
    /* An async write of leader-epoch-checkpoint failed (set by the housekeeping thread): the next
       gr_log_write_epochs writes it again (ENOSPC: "retry later", issue 26). */
    atomic_bool epochs_write_failed;
    struct gr_producer_state ps;
    int64_t
        replay_limit;   /* open only: the producer replay starts at or below it (recovery's first segment) */
    int64_t *snapshots; /* offsets of snapshot files on disk, ascending */
    int snapshot_count, snapshot_cap;
    int64_t messages_since_flush;
    bool deleted;
    void *user;          /* the server's per-log pointer (gr_log_set_user); storage never reads it */
    atomic_int spare_fd; /* an unnamed (O_TMPFILE) file for the next segment, or -1 (storage/roll.c) */
    atomic_bool spare_requested; /* a spare job is queued */
    atomic_bool spare_failed;    /* the last spare job could not make a file: the next roll creates its own */
    /* The negative errno of this log's last append that failed writing (the batch's write or its roll), 0
       after an append that succeeded. While set, a batch whose sequence is out of order answers it (the
       storage error, not OUT_OF_ORDER_SEQUENCE_NUMBER): the gap is the batch the broker failed to store,
       and a client told "out of order" bumps its epoch and may then write twice what it had in flight
       (librdkafka's "skipped sequence numbers"), where Kafka, whose log dir goes offline at a failed write,
       answers the storage error to every batch. Network thread only. */
    int write_error;
    /* A failed write left bytes after size_bytes of the active segment: appends are refused (-EAGAIN) until
       the housekeeping thread truncated them away (log.c undo_job); a failed truncation takes the log
       offline. Set on the network thread, cleared by the job. */
    atomic_bool undo_pending;
    /* A truncation's file work (storage/truncate.c) is queued or running on the housekeeping thread: appends,
       retention and further truncations wait (-EAGAIN) until its job clears it. Set on the network thread. */
    atomic_bool trunc_pending;
    /* A truncation's reads (finding the cut, the producer snapshot, the batch headers to replay) are being
       done on the store's I/O pool (storage/truncate.c, warm jobs): appends, retention and truncations wait
       (-EAGAIN) as for trunc_pending until the job's done (network thread) clears it and reports through
       on_flushed. Set and cleared on the network thread; read anywhere. */
    atomic_bool trunc_warming;
    int trunc_rounds;     /* pool rounds of the truncation being prepared; at the cap it reads blocking */
    int64_t trunc_target; /* the offset those rounds were for (another one starts again at 0) */
    /* The producer snapshot a warm job read for a truncation to end offset trunc_snap_end (-1: none held):
       the offset of the newest usable one at or below it (-1: none usable), its bytes, or the read's error
       (a failure other than damage). Network thread; freed by the truncation that used it, or gr_log_free. */
    int64_t trunc_snap_end, trunc_snap_off;
    char *trunc_snap_buf;
    size_t trunc_snap_len;
    int trunc_snap_err;
    /* [mu] Truncations so far: a flush begun before one does not advance the durable offset (its target may
       lie past the cut). */
    uint64_t trunc_gen;
    /* DeleteRecords in flight (gr_log_delete_records_begin..end): the largest offset asked for (log start
       offset when none) and how many. Checkpoint writes carry max(log start, ls_pending) so that the file
       never goes back below an offset a DeleteRecords is about to answer. Network thread. */
    int64_t ls_pending;
    int ls_pending_ops;
    atomic_bool on_timed_list; /* [store flusher mu] written; read unlocked as a hint */
    int64_t flush_deadline_mono_ms;
    struct gr_log *timed_next;
    int64_t cleaner_checkpoint; /* first dirty offset (cleaner-offset-checkpoint), -1 none; cleaner.c */
    bool cleaning;              /* a clean job holds segments of this log; cleaner.c */
    atomic_int clean_finishes;  /* swaps of this log still to be finished by the housekeeping thread */

    pthread_mutex_t mu;
    _Atomic int64_t durable_offset; /* [mu] written; atomic for unlocked reads */
    int64_t recovery_point;         /* [mu] */
    atomic_bool offline;            /* [mu] written; atomic for unlocked reads */
    bool dir_dirty;                 /* [mu] a file was created in dir_fd: fsync it */
    struct gr_segment **unsynced;   /* [mu] segments with unsynced bytes, each holding a reference */
    int unsynced_count, unsynced_cap;
    bool flush_queued;  /* [store flusher mu] */
    bool flush_running; /* [store flusher mu] */
    bool flush_again;   /* [store flusher mu] */

    /* The append history for the lag formulas (storage/lag.h). Network thread. */
    struct gr_lag_ring lag;
};

struct gr_topic {
    struct gr_store *store;
    char *name;
    uint8_t id[16];
    int32_t partition_count;
    struct gr_log **logs;
    int config_count;
    char **config_keys;
    char **config_values;
    struct gr_log_config cfg;
    bool deleted;
    /* A cluster-mode topic holding only some partitions (logs[p] NULL for one not held here); its topic file
       says "sparse=1", and at open a partition is held when its directory exists. A single-node topic is
       never sparse: it holds every partition. */
    bool sparse;
};

enum gr_job_type { GR_JOB_WRITE_FILE, GR_JOB_UNLINK, GR_JOB_RMTREE, GR_JOB_CALL, GR_JOB_SPARE };

/* Housekeeping work run in FIFO order on flusher thread 0 (flushes run on any flusher thread). */
struct gr_job {
    struct gr_job *next;
    enum gr_job_type type;
    int dir_fd;   /* owned duplicate */
    char **names; /* owned: file names (WRITE_FILE: names[0]; UNLINK: all; RMTREE: names[0], a dir) */
    int name_count;
    uint8_t *data; /* WRITE_FILE contents, owned */
    size_t len;
    dev_t dev; /* UNLINK: if ino != 0, names[0] is unlinked only if it is still this file */
    ino_t ino;
    struct gr_log *log;  /* SPARE: the log that gets the file (valid until gr_store_close) */
    atomic_bool *failed; /* WRITE_FILE: set when the write fails (gr_store_write_file_flagged), or NULL */
    bool wait;           /* a caller waits for it: the thread marks it finished instead of freeing it */
    bool any_thread;     /* independent of every other job: run by the first free flusher thread */
    bool finished;       /* [fl.mu] */
    int result;          /* [fl.mu] 0 or -errno */
    /* GR_JOB_CALL: fn(arg) runs on the housekeeping thread and owns arg (frees it). */
    int (*fn)(void *arg);
    void *arg;
};

struct gr_flusher {
    pthread_mutex_t mu;
    pthread_cond_t cv;                      /* work arrived or stop */
    pthread_cond_t idle_cv;                 /* a job or flush finished */
    struct gr_log **queue;                  /* logs waiting for a flush */
    int queue_head, queue_count, queue_cap; /* ring buffer */
    struct gr_job *jobs_head, *jobs_tail;
    /* Jobs any thread may run, before flushes (making a spare segment file, undoing a failed write): they
       must not wait behind a slow fdatasync on thread 0, and no other job's order matters to them. */
    struct gr_job *any_head, *any_tail;
    struct gr_log *timed; /* logs with a flush.ms deadline */
    int busy;             /* flushes + jobs running */
    bool stop;
    pthread_t *threads;
    int thread_count;          /* started: flushing threads + the any_thread-jobs-only one */
    int thread_count_flushing; /* cfg.flusher_threads (>= 1) */
};

struct gr_store {
    struct gr_store_config cfg;
    struct gr_iopool *iopool; /* gr_store_set_iopool: a follower's truncation reads there; NULL none */
    char *log_dir;
    char *log_dir_abs;  /* log_dir as Kafka spells it absolute (storage/replica_dir.h), set at open */
    char *log_dir_real; /* realpath(log_dir) at open, NULL when it failed */
    int root_fd;
    int topics_dir_fd;
    char cluster_id[23];
    struct gr_log_config defaults;
    struct gr_topic **topics; /* live, sorted by name */
    int topic_count, topic_cap;
    struct gr_topic **dead; /* deleted, freed at close */
    int dead_count, dead_cap;
    struct gr_log **dead_logs; /* single partitions deleted (gr_topic_op_replica_delete), freed at close */
    int dead_log_count, dead_log_cap;
    struct gr_flusher fl;
    struct gr_segment *lru_head, *lru_tail; /* most recently used first */
    int32_t lru_count;
    bool ls_checkpoint_dirty;
    int offline_at_open; /* partitions whose load failed at open: offline (gr_log_new_offline) */
    /* Asynchronous log-start-offset-checkpoint writes (DeleteRecords): tickets given (network thread), the
       last one finished and the last one that succeeded (set by the housekeeping thread; jobs finish in
       ticket order), the error of the last failed one. */
    int64_t ls_ckpt_ticket;
    _Atomic int64_t ls_ckpt_done;
    _Atomic int64_t ls_ckpt_ok;
    atomic_int ls_ckpt_err;
    struct gr_cleaner *cleaner; /* log compaction (storage/cleaner.c), NULL until first used */
    /* Topic metadata operations (store.c, gr_store_topic_op_submit): FIFO of ops not begun yet, and the one
       begun and not finished (at most one). Network thread only. */
    struct gr_topic_op *ops_head, *ops_tail, *op_running;
    bool ops_pumping;
    gr_store_start_hook start_hook; /* gr_store_set_start_hook, NULL none */
    void *start_hook_ctx;
};

/* --- segment.c --- */
void gr_segment_file_name(char *buf, int64_t base_offset, const char *suffix);
/* Parses "<20 digits><suffix>" (a segment-named file). Returns true and *base_offset, false for any other
 * name. */
bool gr_segment_name_parse(const char *name, const char *suffix, int64_t *base_offset);
/* Encodes the in-memory indexes as the .index (8-byte entries: relative offset, position) and .timeindex
   (12-byte entries: timestamp ms, relative offset) files, big-endian, in one buffer: .index bytes first,
   then .timeindex bytes. Returns new (free) with the two lengths, or NULL when out of memory. */
uint8_t *gr_segment_index_encode(const struct gr_segment *seg, size_t *index_bytes, size_t *timeindex_bytes);
struct gr_segment *gr_segment_new(struct gr_log *log, int64_t base_offset);
/* Creates empty .log/.index/.timeindex files for an active segment. Returns 0 or -errno (files removed). */
int gr_segment_create(struct gr_segment *seg);
/* Opens an existing segment: sealed read-only (fd opened lazily), active read-write. 0 or -errno. */
int gr_segment_open(struct gr_segment *seg, bool active);
void gr_segment_ref(struct gr_segment *seg);
void gr_segment_unref(struct gr_segment *seg);
/* Returns the .log fd, reopening a file the fd cap closed (read-only when sealed, read-write when active)
   and moving the segment to the front of the store's LRU (open_segment_fds_max; may close idle others).
   During a no-wait read it never opens: a closed file gives -EAGAIN (kind 3 noted). -errno on failure.
   Network thread (a shadow segment: any thread, its own descriptor). */
int gr_segment_fd(struct gr_segment *seg);
void gr_segment_lru_remove(struct gr_segment *seg);
/* Notes one batch (header at file position `pos`) in the indexes and counters. */
int gr_segment_note_batch(struct gr_segment *seg, const uint8_t *hdr, int64_t pos,
                          const struct gr_log_config *cfg);
bool gr_segment_index_full(const struct gr_segment *seg, const struct gr_log_config *cfg);
/* Seals: final time index entry, writes both index files (best effort: they are rebuildable, a failure is
   warned about). Returns 0 or the write's -errno (the segment is sealed either way). */
int gr_segment_seal(struct gr_segment *seg);
/* Seals without writing: final time index entry only; the caller marks index_unwritten so that the flush
   (a flusher thread) writes the files with gr_segment_write_indexes_existing. Network thread: no I/O. */
void gr_segment_seal_deferred(struct gr_segment *seg);
/* Writes the in-memory indexes into the EXISTING index files (never creates one: a segment deleted
   meanwhile must not get its files back). 0, -ENOENT, or -errno. Safe on a flusher thread once sealed. */
int gr_segment_write_indexes_existing(struct gr_segment *seg);
/* Writes the in-memory indexes to their files (ftruncate + pwrite). 0 or -errno. */
int gr_segment_write_indexes(struct gr_segment *seg);
/* The aborted-transaction index (.txnindex): appends one entry (LogSegment.updateTxnIndex), 0 or -ENOMEM;
   drops the entries whose last offset >= `offset` (TransactionIndex.truncateTo); encodes the file (34 bytes
   an entry: version int16 0, producer id, first offset, last offset, last stable offset, int64s big-endian;
   returns new, NULL when empty or out of memory); reads the file into memory at open (0, also when absent;
   a damaged file is warned about and ignored: -errno only for I/O errors). */
#define GR_TXN_INDEX_ENTRY_BYTES 34
int gr_segment_txn_append(struct gr_segment *seg, const struct gr_aborted_txn *t);
void gr_segment_txn_truncate(struct gr_segment *seg, int64_t offset);
uint8_t *gr_segment_txn_encode(const struct gr_segment *seg, size_t *len);
int gr_segment_txn_load(struct gr_segment *seg);
/* Loads the indexes of a sealed segment (sanity-checked; rebuilt by a header scan if bad). 0 or -errno. */
int gr_segment_load_index(struct gr_segment *seg, const struct gr_log_config *cfg);
/* Reads the last time index entry of a sealed segment into max_timestamp_*; rebuilds if invalid. */
int gr_segment_load_max_timestamp(struct gr_segment *seg, const struct gr_log_config *cfg);
/* Validating scan from position 0 (recovery): CRC, lengths, magic, contiguous offsets from the base
   offset; rebuilds the indexes; sets size_bytes to the valid prefix. *file_bytes gets the file size.
   Returns 0 or -errno for I/O errors (invalid data is not an error: size_bytes stops before it). */
int gr_segment_recover(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t *file_bytes,
                       const char **why);
/* Non-validating header scan from the last index entry to the end of the file (clean open). Returns 0, or
   -EINVAL when the file does not end on a batch boundary, or -errno. */
int gr_segment_scan_tail(struct gr_segment *seg, const struct gr_log_config *cfg);

/* Buffered header reader over one segment file. */
struct gr_seg_reader {
    int fd;
    uint8_t *buf;
    size_t cap;
    int64_t buf_pos;
    size_t buf_len;
    int64_t end; /* bytes of whole batches in the file when known (nowait checks stop there), else 0 */
};

/* No-wait reads (gr_log_read_nowait): while one is set on this thread, a segment read that would wait for
   the disk (a header page not in the page cache, index files not loaded) fails with -EAGAIN and notes here
   what to read in. */
struct gr_read_nowait {
    int kind; /* 0 none, 1 a range of the .log (fd, pos, len), 2 load the indexes of seg (opening its .log
                 too if closed), 3 open the .log of seg (closed by the fd cap) */
    struct gr_segment *seg;
    int fd;
    int64_t pos, len;
};
void gr_segment_nowait_set(struct gr_read_nowait *nw); /* NULL ends it */
/* True while a no-wait read is set on this thread (segment code must not wait for the disk). */
bool gr_segment_nowait_active(void);
/* Notes a .log range to read in (kind 1) on the set no-wait read; returns -EAGAIN. */
int gr_segment_nowait_cold_range(struct gr_segment *seg, int fd, int64_t pos, int64_t len);

/* Work a pool thread does for a no-wait read (kinds 2 and 3): open the segment's .log and/or load (or
   rebuild) its indexes into a private shadow segment, without touching the segment or the store.
   gr_seg_load_new (network thread; no I/O but dup) snapshots what the load needs; gr_seg_load_run (pool
   thread; blocks on the disk); gr_seg_load_install (network thread) moves the results into `seg` when it
   still wants them (else drops them) and frees the load. The caller holds a reference on seg throughout. */
struct gr_seg_load;
struct gr_seg_load *gr_seg_load_new(struct gr_segment *seg, bool want_fd, bool want_index);
void gr_seg_load_run(struct gr_seg_load *ld);
void gr_seg_load_install(struct gr_segment *seg, struct gr_seg_load *ld);
void gr_seg_load_free(struct gr_seg_load *ld);
/* The outcome of gr_seg_load_run: 0 or -errno. */
int gr_seg_load_err(const struct gr_seg_load *ld);
/* After a read with `nw` set returned -EAGAIN: fills `cold` (retaining nw->seg) and returns -EAGAIN, or
   -errno when the work cannot be noted. */
int gr_log_nowait_cold(struct gr_read_nowait *nw, struct gr_log_slice *cold);

int gr_seg_reader_init(struct gr_seg_reader *r, int fd, size_t cap);
void gr_seg_reader_free(struct gr_seg_reader *r);
/* Returns a pointer to `n` bytes at `pos` (n <= cap), or NULL with *err = -errno or 0 at end of file. */
const uint8_t *gr_seg_reader_get(struct gr_seg_reader *r, int64_t pos, size_t n, int *err);
/* For a producer-state replay: the batch at `pos` whose header `h` was just read, read whole when it is a
   transaction marker (a control batch with a producer id, at most 4096 bytes; Kafka's are 78: its type and
   coordinator epoch are in its record), else `h` itself; *have is what the returned pointer holds
   (gr_producer_state_update's `len`). NULL with *err as gr_seg_reader_get. */
const uint8_t *gr_seg_reader_batch_for_producers(struct gr_seg_reader *r, int64_t pos, const uint8_t *h,
                                                 size_t *have, int *err);

/* Finds the first batch of `seg` whose last offset >= target: *pos and its header (61 bytes) in hdr.
   Returns 1 found, 0 not in this segment (*pos = size_bytes), or -errno. */
int gr_segment_find(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t target, int64_t *pos,
                    uint8_t *hdr);
/* Cuts the in-memory state of a segment whose indexes are loaded at `pos`, a batch boundary <= size_bytes
   (a truncation, storage/truncate.c): index and time index entries at or past the cut go, the tail from the
   last kept index entry is re-read (headers only, at most about index.interval.bytes plus one batch) to
   restore the next offset, the largest timestamp and the entries after it. No file is changed. 0 or -errno
   (the read failed: the segment's state is then that of the kept entries). */
int gr_segment_truncate_mem(struct gr_segment *seg, const struct gr_log_config *cfg, int64_t pos);
/* Largest batch boundary <= limit, scanning from boundary `from` (<= limit). Returns it or -errno. */
int64_t gr_segment_boundary_before(struct gr_segment *seg, int64_t from, int64_t limit);

/* --- roll.c: the next segment's file made ahead of a roll, off the network thread --- */
/* After an append: when the active segment is past half of any roll limit (segment.bytes, segment.ms,
   index size) and no spare exists or is queued, queues a housekeeping job that opens an unnamed file
   (O_TMPFILE) in the partition directory and leaves it in log->spare_fd. Network thread; no I/O. */
void gr_roll_prepare(struct gr_log *log, const struct gr_segment *active, int64_t now_ms);
/* At a roll: a new segment at `base` made from the spare file (no file-system call but fstat), with
   name_state PENDING, or NULL when there is no spare (the caller creates the files itself). */
struct gr_segment *gr_roll_take_spare(struct gr_log *log, int64_t base);
/* The housekeeping job body (flusher thread 0). */
void gr_roll_spare_job_run(struct gr_job *job);
/* A roll is due only by a soft limit (segment.bytes, segment.ms, a full index) and no spare file is ready:
   returns true when the roll should wait (the spare is requested now if it was not; the caller keeps
   appending to the active segment and rolls at the first append after the spare is ready), false when
   the caller must roll now creating its own files: no flusher threads (tests), or the last spare job
   failed (no O_TMPFILE support, EMFILE...: then the roll is synchronous as the last resort). Network
   thread; no I/O. */
bool gr_roll_defer(struct gr_log *log);
/* In a flush (flusher thread): links the segment's file as <base>.log and creates its .index/.timeindex.
   0 or -errno (the flush then fails: the data could not be made durable under its name). */
int gr_roll_name_segment(struct gr_segment *seg);
/* Unlinks the three names of a segment now (a flush that named a segment dropped meanwhile). */
void gr_roll_unlink_names(struct gr_segment *seg);

/* --- log.c --- */
/* Opens or creates the log of topic/partition and recovers it. `clean`: a clean-shutdown marker was found;
   `ckpt_*`: checkpointed values, -1 if absent. */
int gr_log_load(struct gr_store *store, struct gr_topic *topic, int32_t partition, bool clean,
                int64_t ckpt_recovery_point, int64_t ckpt_log_start, int64_t ckpt_hwm, struct gr_log **out);
/* The file half of gr_log_load for a partition whose directory does not exist (moved aside by the caller):
   creates the directory, partition.metadata, the first segment and the leader-epoch checkpoint, all durable,
   into a new log that nothing else references yet. Touches no store-wide state (LRU, flusher queue, topic
   list), so it may run on an I/O pool thread; the caller publishes the log on the network thread. Returns 0
   and *out, -EEXIST when the directory already holds segments or snapshots, or -errno (nothing left open;
   the directory may remain: the caller moves it aside). */
int gr_log_create_new(struct gr_store *store, struct gr_topic *topic, int32_t partition, struct gr_log **out);
/* Puts the log's open .log descriptors in the store's LRU (the fd cap), for a log made or loaded on another
   thread; may close other idle files. Network thread; no I/O beyond close(). */
void gr_log_files_admit(struct gr_log *log);
/* A log that could not be opened (its load failed with `err`): offline from the start, no segments, the
   checkpointed values kept so that checkpoint files written meanwhile do not lose them (Kafka's offline
   partition: every request naming it gets KAFKA_STORAGE_ERROR; DeleteTopics removes it). Returns 0 and
   *out, or -ENOMEM. */
int gr_log_new_offline(struct gr_store *store, struct gr_topic *topic, int32_t partition,
                       int64_t ckpt_recovery_point, int64_t ckpt_log_start, int64_t ckpt_hwm,
                       struct gr_log **out);
/* Clean close of one log: the data made durable first, then indexes, snapshot and leader epochs. Returns 0
   if everything is durable; after a failure (e.g. ENOSPC on a snapshot) the data flushed stays durable and
   the caller skips the clean-shutdown marker (recovery at the next open). */
int gr_log_close_clean(struct gr_log *log);
/* Frees a log (segments unreferenced, fds closed); no I/O beyond close(). */
void gr_log_free(struct gr_log *log);
/* Marks a log deleted and offline, drops its segments (fds stay valid for slice holders). */
void gr_log_mark_deleted(struct gr_log *log);
/* The flush body run by a flusher thread (or inline at close): fdatasync every unsynced segment, sync
   the directory, advance the durable offset. Reports through on_flushed when `report`. Returns 0/-errno. */
int gr_log_flush_now(struct gr_log *log, bool report);
/* The flush in two halves, for a group commit of many logs by one syncfs (flusher.c): begin takes the
   log's unsynced segments and the end offset they cover (-EROFS when offline: nothing taken); end applies
   the outcome `err` of whatever made them durable (0: durable offset advanced; < 0: the log goes offline),
   drops the references and reports through on_flushed when `report`. Returns err. */
struct gr_flush_ticket {
    int64_t target;
    uint64_t trunc_gen; /* log->trunc_gen at begin */
    struct gr_segment **segs;
    int n;
    bool dir;
    uint8_t *index_too; /* per segment: 0 nothing, 1 fdatasync the index files, 2 write them first */
    bool *naming;       /* per segment: this flush gives it its names (GR_NAME_NAMING) */
};
int gr_log_flush_begin(struct gr_log *log, struct gr_flush_ticket *t);
/* The writes a ticket needs before any sync covers it: names of segments made from spares (storage/roll.c)
   and index files of segments sealed by a roll. 0 or -errno (*what names the step). */
int gr_log_flush_write(struct gr_log *log, struct gr_flush_ticket *t, const char **what);
int gr_log_flush_end(struct gr_log *log, struct gr_flush_ticket *t, int err, const char *what, bool report);
/* The log start offset of `log` rose from `old_start` (to log->log_start_offset): tells the store's start
   hook (gr_store_set_start_hook). Network thread. */
void gr_log_start_moved(struct gr_log *log, int64_t old_start);
/* Retention for one log (see gr_store_retention_run). */
void gr_log_retention(struct gr_log *log, int64_t now_ms);
/* The high watermark as storage knows it: the server's last gr_log_set_high_watermark since open; before
   that the durable offset, lowered to the high watermark restored from replication-offset-checkpoint (a
   follower or a leader whose followers lag has records above it that are not committed). What bounds
   retention (UnifiedLog.deletableSegments: a segment goes only when its next offset is <= it), the cleaner
   (LogCleanerManager's firstUncleanableDirtyOffset) and the checkpoint. Network thread. */
int64_t gr_log_hw_bound(struct gr_log *log);
/* Writes leader-epoch-checkpoint if it changed and a batch carries the newest epoch (queued unless `sync`;
   a failed queued write is redone by the next call). 0 or -errno. */
int gr_log_write_epochs(struct gr_log *log, bool sync);
int64_t gr_log_recovery_point(struct gr_log *log);
void gr_log_config_effective(struct gr_store *store, struct gr_topic *topic);

/* Shared with replica.c (appends as follower) and truncate.c (truncation), network thread: */
/* True while a failed write is being undone or a truncation's file work is pending: no append now. */
bool gr_log_file_work_pending(const struct gr_log *log);
/* The roll decision of gr_log_append for `batch` given the active segment as it will be once `size_bytes`
   bytes, the log end offset `end_offset` and the rolling timestamp `rolling_ts_ms` are reached (a chunk of
   batches written with one pwrite). 0 no roll, 1 soft (segment.bytes, segment.ms, a full index), 2 hard. */
int gr_log_need_roll_at(const struct gr_log *log, const struct gr_segment *seg, int64_t size_bytes,
                        int64_t end_offset, int64_t rolling_ts_ms, const uint8_t *batch, size_t len,
                        int64_t now_ms);
/* Rolls to a new active segment at the log end offset (as gr_log_append does). 0 or -errno. */
int gr_log_roll(struct gr_log *log);
/* One write of `len` bytes at `pos` of the active segment `seg`, the failed-write undo included (see
   gr_log_append's -ENOSPC/-EIO). 0 or -errno. */
int gr_log_write_bytes(struct gr_log *log, struct gr_segment *seg, const uint8_t *bytes, size_t len,
                       int64_t pos);
/* Bookkeeping after `len` bytes holding `records` records were written at the end of the active segment
   `seg` (gr_log_append, the follower's gr_log_append_replica): the log end offset becomes `end_offset`, the
   segment awaits fdatasync, sizes and flush.messages' count grow, the next roll is prepared. */
void gr_log_written(struct gr_log *log, struct gr_segment *seg, int64_t end_offset, size_t len,
                    int64_t records, int64_t now_ms);
/* Producer state from one batch just written to `seg` (`len` bytes of it at hand: a marker needs them all):
   gr_producer_state_update, and an aborted transaction's entry in seg's .txnindex. Out of memory is logged.
 */
void gr_log_note_producer(struct gr_log *log, struct gr_segment *seg, const uint8_t *batch, size_t len);
/* After an append: a new epoch's entry queued for leader-epoch-checkpoint, flush.messages / flush.ms kept. */
void gr_log_after_append(struct gr_log *log);
/* Sets store->log_dir_abs and log_dir_real (storage/replica_dir.c) once the directory exists: 0, -ENOMEM,
   or -errno of getcwd for a relative log_dir. */
int gr_store_log_dir_names(struct gr_store *store);
/* Takes the log offline (logged once, with `what` and err). */
void gr_log_go_offline(struct gr_log *log, const char *what, int err);
/* Largest segment index whose base offset <= offset (0 when below every base). */
int gr_log_seg_index_for(const struct gr_log *log, int64_t offset);
/* "<20-digit offset>.snapshot" into buf. */
void gr_log_snapshot_name(char *buf, size_t n, int64_t offset);
/* After the log start offset rose: segments, high watermark, producers, epochs, snapshots follow. */
void gr_log_after_start_moved(struct gr_log *log);
/* LeaderEpochFileCache.truncateFromEnd(end_offset): entries starting at or after it go. */
void gr_log_epochs_truncate_end(struct gr_log *log, int64_t end_offset);
/* LeaderEpochFileCache.assign(epoch, start_offset) for a batch appended at start_offset (the log end
   offset): entries at or after start_offset go (they hold no batch), then nothing when the last entry has
   this epoch, else entries with an epoch >= it go (a regression, logged) and (epoch, start_offset) is
   added; the log's leader epoch rises to it. A negative epoch adds nothing. 0 or -ENOMEM. */
int gr_log_epochs_assign(struct gr_log *log, int32_t epoch, int64_t start_offset);

/* --- store.c --- */
/* The log start offset a checkpoint records for `log`: max(log start offset, a DeleteRecords in flight). */
int64_t gr_log_start_offset_for_checkpoint(const struct gr_log *log);
/* The three offset checkpoints and dirty epoch files; queued unless `sync`. 0 or -errno. */
int gr_store_checkpoint_all(struct gr_store *store, bool sync);

/* --- flusher.c --- */
int gr_flusher_start(struct gr_store *store);
void gr_flusher_stop(struct gr_store *store);
void gr_flusher_request(struct gr_log *log);
void gr_flusher_timed_add(struct gr_log *log, int64_t deadline_mono_ms);
/* Removes the log from the flush queue and timed list and waits until no flush of it runs. */
void gr_flusher_forget_log(struct gr_log *log);
void gr_flusher_job(struct gr_store *store, struct gr_job *job);
/* Waits until no job or flush is queued or running. */
void gr_flusher_quiesce(struct gr_store *store);
/* Runs one housekeeping job synchronously (used by the flusher and at close). Returns 0 or -errno. */
int gr_job_run(struct gr_job *job);
/* Atomically replaces dir_fd/name with data (takes ownership of `data`, malloc'd) on the housekeeping
   thread, in FIFO order with every other job, so an older queued write never lands after a newer one.
   `sync`: waits and returns the write's result; otherwise returns 0 at once (-ENOMEM, or dup's own errno
   such as -EMFILE, if it could not be queued). Runs inline when no flusher threads run (open, close). */
int gr_store_write_file(struct gr_store *store, int dir_fd, const char *name, uint8_t *data, size_t len,
                        bool sync);
/* As gr_store_write_file without waiting, and the write's failure is remembered: *failed (owned by the
   caller, alive until gr_store_close drains the jobs) is set true when it fails (ENOSPC on a rebuildable
   file: the owner marks the file for another write later). Returns 0 once queued, or -errno (-ENOMEM, or
   dup's errno such as -EMFILE) when it could not be queued (data freed). */
int gr_store_write_file_flagged(struct gr_store *store, int dir_fd, const char *name, uint8_t *data,
                                size_t len, atomic_bool *failed);
/* True for the errors that mean "no room" (ENOSPC, EDQUOT): on a rebuildable file (index, checkpoint,
   producer snapshot, leader-epoch checkpoint) they are warned about and retried later, never fatal. */
static inline bool gr_err_no_space(int err)
{
    return err == -ENOSPC || err == -EDQUOT;
}
/* True for the errors that mean a rebuildable file's content is damaged (-EINVAL: bad format or checksum,
   -EFBIG: larger than such a file can be): it may be deleted or ignored and rebuilt. Every other error of an
   open or read (EMFILE, ENFILE, ENOMEM, EIO, EACCES...) says nothing about the file, which is kept: the
   partition fails to load (offline, KAFKA_STORAGE_ERROR) and the next start tries again. */
static inline bool gr_err_damaged(int err)
{
    return err == -EINVAL || err == -EFBIG;
}
void gr_job_free(struct gr_job *job);

/* --- checkpoint.c --- */
/* Atomic replace: "<name>.tmp" written, fdatasynced, renamed over `name`, directory fsynced. 0 or -errno. */
int gr_file_write_atomic(int dir_fd, const char *name, const void *data, size_t len);
/* As gr_file_write_atomic, unless `name` already holds exactly `data`: then only the directory is fsynced
   (the name may come from a write whose directory fsync failed) and nothing is written, so a file that did
   not change costs no space (issue 26: a full disk). Used for every rebuildable file the flusher writes.
   0 or -errno. */
int gr_file_write_if_changed(int dir_fd, const char *name, const void *data, size_t len);
/* Reads a whole small file (at most max_bytes). 0 with *out (malloc'd, NUL-terminated), -ENOENT, -EFBIG... */
int gr_file_read_all(int dir_fd, const char *name, size_t max_bytes, char **out, size_t *len);
/* Kafka's offset checkpoint text file: "0\n<count>\n<topic> <partition> <offset>\n"... */
struct gr_ckpt_entry {
    char *topic;
    int32_t partition;
    int64_t offset;
};
int gr_ckpt_read(int dir_fd, const char *name, struct gr_ckpt_entry **out, int *count);
void gr_ckpt_free(struct gr_ckpt_entry *e, int count);
int64_t gr_ckpt_lookup(const struct gr_ckpt_entry *e, int count, const char *topic, int32_t partition);
/* Leader epoch checkpoint: "0\n<count>\n<epoch> <start offset>\n"... */
int gr_epoch_ckpt_read(int dir_fd, struct gr_epoch_entry **out, int *count);
/* Formats the file text (malloc'd) into *out / *len. 0 or -ENOMEM. */
int gr_epoch_ckpt_format(const struct gr_epoch_entry *e, int count, uint8_t **out, size_t *len);
/* fsyncs a directory fd: 0 or -errno. */
int gr_dir_sync(int dir_fd);

#endif
