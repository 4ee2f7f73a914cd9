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
 * Invariants: next <= block_end <= saved_end; every id < saved_end is covered by a completed save; the
 * saved value only grows; at most one save is in flight. No disk, no clock: the server binds `load`/`save`
 * to a small file in the log directory (server/handlers/init_producer_id.c), tests to memory.
 *
 * File record (the bytes passed to save and returned by load), big-endian:
 *   OFFSET SIZE MEANING
 *    0      2   version (1)
 *    2      4   CRC-32C of bytes 6..13
 *    6      8   next block start: every id below it may have been handed out
 *
 * Read next: server/handlers/init_producer_id.c.
 */
#ifndef GR_PRODUCER_IDS_H
#define GR_PRODUCER_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* The outcome of the save started by gr_producer_ids_prefetch: 0 (the next block may be handed out) or
   -errno (nothing changes; a later prefetch tries again). */
void gr_producer_ids_saved(struct gr_producer_ids *ids, int err);

/* The record codec (format above). decode returns 0 with *next_block_start, or -EINVAL. */
void gr_producer_ids_encode(int64_t next_block_start, uint8_t *buf);
int gr_producer_ids_decode(const uint8_t *buf, size_t len, int64_t *next_block_start);

#endif
