/*
 * producer_ids.h: producer id allocation for InitProducerId (Kafka's ProducerIdManager in small). Ids are
 * handed out in increasing order from blocks of GR_PRODUCER_ID_BLOCK_SIZE (Kafka's block size, 1000); before
 * the first id of a block is handed out, the block's end is made durable through the injected `save` hook,
 * so after any restart (clean or not) allocation resumes at or above every id ever handed out: an id is
 * never reused. A restart skips the rest of the block in use, as Kafka does with its unused block.
 *
 * Two ways to use it. Synchronous (gr_producer_ids_next): the save runs inside the call when the block is
 * used up. Asynchronous, as Kafka's RPCProducerIdManager does with its controller: gr_producer_ids_take
 * never saves; when the block in use is 90% handed out (PID_PREFETCH_THRESHOLD 0.90 in Kafka),
 * gr_producer_ids_prefetch says a save of the NEXT block's end should start, the caller runs it off its
 * thread and reports it with gr_producer_ids_saved; take moves to that block once the current one is used
 * up. A take that finds the block used up and the next not yet durable returns -EAGAIN (Kafka answers
 * COORDINATOR_LOAD_IN_PROGRESS then; the server parks the request until the save completes).
 *
 * Invariants: next <= block_end <= saved_end; every id < saved_end is covered by a completed save (or, with
 * a shared counter, belongs to a block another broker took); the saved value only grows; at most one save
 * is in flight. A saved next block is [saved_end - GR_PRODUCER_ID_BLOCK_SIZE, saved_end): right after the
 * block in use for the file, anywhere above it for a shared counter (gr_producer_ids_claimed). No disk, no
 * clock: the server binds `load`/`save` to a small file in the log directory (server/producer_ids.c), tests
 * to memory.
 *
 * The named wait "until the block is saved" (struct gr_producer_id_manager, below) is what InitProducerId
 * uses: the caller embeds a struct gr_producer_id_waiter and queues it with gr_producer_id_wait; its done
 * hook is called exactly once with an id or Kafka's error code: at once (inside gr_producer_id_wait) when
 * the block in use has an id left, else after the save of the next block's end completed (in arrival
 * order), never after gr_producer_id_wait_cancel. The saves run as storage/iopool.h jobs handed to the
 * binding's `submit` hook (the server queues them on its I/O pool; tests run them by hand): the file in
 * single-node mode; in cluster mode the hook runs a compare-and-swap on etcd's counter instead and reports
 * the block it got with gr_producer_ids_claimed (cluster/producer_ids_etcd.h), without the callers
 * changing. No event loop is known here.
 *
 * File record (the bytes passed to save and returned by load), big-endian:
 *   OFFSET SIZE MEANING
 *    0      2   version (1)
 *    2      4   CRC-32C of bytes 6..13
 *    6      8   next block start: every id below it may have been handed out
 *
 * Read next: server/producer_ids.c (the binding), server/handlers/init_producer_id.c (the one caller).
 */
#ifndef GR_PRODUCER_IDS_H
#define GR_PRODUCER_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/iopool.h"

#define GR_PRODUCER_ID_BLOCK_SIZE 1000 /* Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE */
#define GR_PRODUCER_ID_RECORD_BYTES 14

struct gr_producer_id_io {
    /* Reads the record into buf (GR_PRODUCER_ID_RECORD_BYTES). Returns 0, -ENOENT (never saved) or -errno. */
    int (*load)(void *ctx, uint8_t *buf, size_t len);
    /* Durably replaces the record (atomic: the old or the new one survives a crash). 0 or -errno. */
    int (*save)(void *ctx, const uint8_t *buf, size_t len);
    void *ctx;
};

#define GR_PRODUCER_ID_PREFETCH_LEFT 100 /* ids left in the block when the next is fetched: Kafka's 90% */

struct gr_producer_ids {
    struct gr_producer_id_io io;
    int64_t next;      /* next id to hand out */
    int64_t block_end; /* end of the block in use */
    int64_t saved_end; /* first id not covered by a completed save (>= block_end: the next block when >) */
    bool saving;       /* a save of saving_end is in flight (prefetch .. saved) */
    int64_t saving_end;
};

/* Loads the saved block end: allocation starts there (0 when nothing was saved). Returns 0, -EINVAL (the
   record is damaged: refusing to start is safer than reusing ids) or the load hook's -errno. Borrows io. */
int gr_producer_ids_open(struct gr_producer_ids *ids, const struct gr_producer_id_io *io);

/* Hands out the next producer id into *producer_id, saving a new block end first when the block is used
   up. Returns 0, -EOVERFLOW (ids exhausted) or the save hook's -errno (nothing handed out, the state is
   unchanged: a later call tries again). */
int gr_producer_ids_next(struct gr_producer_ids *ids, int64_t *producer_id);

/* Asynchronous use (see above). take: the next id into *producer_id without any save: 0, -EAGAIN (the block
   is used up and the next is not durable yet), or -EOVERFLOW. */
int gr_producer_ids_take(struct gr_producer_ids *ids, int64_t *producer_id);
/* True when the save of the next block's end should start now (the block in use has at most
   GR_PRODUCER_ID_PREFETCH_LEFT ids left or is used up, no next block is saved, no save in flight, no
   overflow): marks the save in flight and fills `buf` (GR_PRODUCER_ID_RECORD_BYTES) with the record to
   save durably (the io.save contract), typically on another thread. */
bool gr_producer_ids_prefetch(struct gr_producer_ids *ids, uint8_t *buf);
/* A shared counter's answer to the save in flight (cluster mode: cluster/producer_ids_etcd.h, Kafka's
   ProducerIdsBlock handed out by the controller): the block taken is [block_start, block_start +
   GR_PRODUCER_ID_BLOCK_SIZE) instead of the one right after the block in use. Call before
   gr_producer_ids_saved(ids, 0). Returns 0, or -ERANGE (nothing changes) when no save is in flight or
   block_start is below the end of the block in use (a counter that went backwards: its ids may have been
   handed out already) or too close to INT64_MAX. */
int gr_producer_ids_claimed(struct gr_producer_ids *ids, int64_t block_start);
/* The outcome of the save started by gr_producer_ids_prefetch: 0 (the next block may be handed out) or
   -errno (nothing changes; a later prefetch tries again). */
void gr_producer_ids_saved(struct gr_producer_ids *ids, int err);

/* The named wait "until the block is saved" (Kafka's RPCProducerIdManager.generateProducerId with its
 * controller round trip). */

#define GR_PRODUCER_ID_RETRY_BACKOFF_MS 50 /* Kafka's RPCProducerIdManager.RETRY_BACKOFF_MS */

struct gr_producer_id_manager;
struct gr_producer_id_waiter;

/* A waiter's done hook, called exactly once per wait on the owning thread: error_code 0 (GR_ERR_NONE) with
   the id handed out, or Kafka's COORDINATOR_LOAD_IN_PROGRESS (14: no durable block; retriable) with
   producer_id -1. The waiter is idle again when it runs (it may be queued again or freed). */
typedef void (*gr_producer_id_done_fn)(struct gr_producer_id_waiter *w, int16_t error_code,
                                       int64_t producer_id);

/* A waiter lives in its caller's memory. `done` and `ctx` are the caller's; the rest is private. */
struct gr_producer_id_waiter {
    gr_producer_id_done_fn done;
    void *ctx;
    /* private: */
    struct gr_producer_id_manager *mgr; /* while queued, NULL when idle */
    struct gr_producer_id_waiter *prev, *next;
};

/* What the server binds: where save jobs run and the clock. */
struct gr_producer_id_binding {
    /* Queues `job` (job->run may block on the disk: it calls io.save; job->done must later run on the owning
       thread, as storage/iopool.h gr_iopool_submit does). Returns false when it cannot (the broker is
       stopping): no save starts then. NULL: no pool, the save runs inside gr_producer_id_wait (tests, tools).
     */
    bool (*submit)(void *ctx, struct gr_io_job *job);
    int64_t (*now_ms)(void *ctx); /* a monotonic clock, milliseconds (the retry back-off) */
    void *ctx;
};

/* The producer id state of one coordinator and the requests waiting for its next block. */
struct gr_producer_id_manager {
    struct gr_producer_ids ids;
    /* private: */
    struct gr_producer_id_binding bind;
    struct gr_io_job job; /* the block save; in flight while ids.saving (with a submit hook) */
    uint8_t rec[GR_PRODUCER_ID_RECORD_BYTES];
    struct gr_producer_id_waiter *head, *tail; /* arrival order */
    int64_t retry_after_ms;                    /* no save before this (after a failed one) */
};

/* gr_producer_ids_open on mgr->ids (its returns), then starts the save of the first block (a restart skips
   the rest of the saved one). Borrows io and copies bind. */
int gr_producer_id_manager_open(struct gr_producer_id_manager *mgr, const struct gr_producer_id_io *io,
                                const struct gr_producer_id_binding *bind);
/* Until the block is saved: hands the next producer id to `w` (idle) through its done hook: at once when
   the block in use has one and nobody waits before it; else, while a save of the next block is in flight
   (started now when due: 90% of the block handed out, as Kafka prefetches), after that save (in arrival
   order; a failed save answers every waiter COORDINATOR_LOAD_IN_PROGRESS and no save starts for
   GR_PRODUCER_ID_RETRY_BACKOFF_MS); at once with COORDINATOR_LOAD_IN_PROGRESS when no save can run (the
   back-off, a stopping binding, a failed inline save, ids exhausted). No id is handed out before the end
   of its block is durable. */
void gr_producer_id_wait(struct gr_producer_id_manager *mgr, struct gr_producer_id_waiter *w);
/* Takes `w` out of the queue: its done hook will not be called. Nothing when idle (done or never queued).
 */
void gr_producer_id_wait_cancel(struct gr_producer_id_waiter *w);
/* True while `w` is queued (its done hook not yet called). */
bool gr_producer_id_waiting(const struct gr_producer_id_waiter *w);

/* The record codec (format above). decode returns 0 with *next_block_start, or -EINVAL. */
void gr_producer_ids_encode(int64_t next_block_start, uint8_t *buf);
int gr_producer_ids_decode(const uint8_t *buf, size_t len, int64_t *next_block_start);

#endif
