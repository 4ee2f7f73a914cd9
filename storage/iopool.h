/*
 * iopool.h: a small pool of threads for disk work that may block (cold reads, statvfs, opens), so the
 * network thread never waits on the disk. A job is a struct the caller embeds in its own state: `run`
 * executes on a pool thread, `done` later on the owner's thread (the libev loop) when that thread calls
 * gr_iopool_complete. The pool tells the owner that completions are waiting through `notify`, called on
 * a pool thread (the server passes a function doing ev_async_send, as storage/flusher.c's on_flushed
 * does for fsync completion).
 *
 * Invariants: jobs run in submission order on whichever thread is free (no ordering between two running
 * jobs); `done` runs exactly once per job, on the thread calling gr_iopool_complete, in completion order;
 * gr_iopool_destroy runs every queued job and every pending `done` before returning. The pool never
 * frees a job: `done` owns it again.
 * Read next: storage/log.h (gr_log_slice_resident, gr_log_slice_prefetch), server/handlers/fetch.c.
 */
#ifndef GR_STORAGE_IOPOOL_H
#define GR_STORAGE_IOPOOL_H

#include <stdbool.h>
#include <stdint.h>

struct gr_iopool;

struct gr_io_job {
    void (*run)(struct gr_io_job *job);  /* on a pool thread; may block on the disk */
    void (*done)(struct gr_io_job *job); /* on the owner's thread (gr_iopool_complete); may free the job */
    int result;                          /* for run() to report 0 or -errno to done() */
    struct gr_io_job *next;              /* the pool's queues */
};

/* Starts `threads` (>= 1) threads. `notify(ctx)` is called on a pool thread each time a job finished and
   the owner should call gr_iopool_complete (may be NULL: the owner polls). Returns 0 and *out, or -errno. */
int gr_iopool_create(int threads, void (*notify)(void *ctx), void *ctx, struct gr_iopool **out);

/* Queues `job` (borrowed until its done() runs). Never blocks on the disk; thread-safe. */
void gr_iopool_submit(struct gr_iopool *pool, struct gr_io_job *job);

/* Runs done() of every job finished so far, on the calling thread (the owner's). Returns how many ran. */
int gr_iopool_complete(struct gr_iopool *pool);

/* Waits until every submitted job has run and its done() ran (calls gr_iopool_complete itself). For tests
   and shutdown. */
void gr_iopool_drain(struct gr_iopool *pool);

/* Jobs submitted and not yet completed (queued, running, or finished with done() pending). */
int gr_iopool_pending(struct gr_iopool *pool);

/* Drains, stops the threads and frees the pool. NULL is ignored. */
void gr_iopool_destroy(struct gr_iopool *pool);

#endif
