/*
 * producer_ids.c: block allocation of producer ids with a durable block end, and the named wait "until the
 * block is saved" on top of it (the save as a job the binding runs). See producer_ids.h.
 */
#include "coordinator/producer_ids.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"
#include "protocol/crc32c.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"

#define PID_RECORD_VERSION 1

void gr_producer_ids_encode(int64_t next_block_start, uint8_t *buf)
{
    gr_put_be16(buf, PID_RECORD_VERSION);
    gr_put_be64(buf + 6, (uint64_t)next_block_start);
    gr_put_be32(buf + 2, gr_crc32c(0, buf + 6, 8));
}

int gr_producer_ids_decode(const uint8_t *buf, size_t len, int64_t *next_block_start)
{
    if (len != GR_PRODUCER_ID_RECORD_BYTES || gr_be16(buf) != PID_RECORD_VERSION) return -EINVAL;
    if (gr_be32(buf + 2) != gr_crc32c(0, buf + 6, 8)) return -EINVAL;
    int64_t v = (int64_t)gr_be64(buf + 6);
    if (v < 0) return -EINVAL;
    *next_block_start = v;
    return 0;
}

int gr_producer_ids_open(struct gr_producer_ids *ids, const struct gr_producer_id_io *io)
{
    ids->io = *io;
    ids->next = ids->block_end = ids->saved_end = 0;
    ids->saving = false;
    uint8_t buf[GR_PRODUCER_ID_RECORD_BYTES];
    int err = io->load(io->ctx, buf, sizeof buf);
    if (err == -ENOENT) return 0;
    if (err < 0) return err;
    int64_t start;
    if (gr_producer_ids_decode(buf, sizeof buf, &start) < 0) return -EINVAL;
    ids->next = ids->block_end = ids->saved_end = start;
    return 0;
}

int gr_producer_ids_take(struct gr_producer_ids *ids, int64_t *producer_id)
{
    if (ids->next == ids->block_end) {
        if (ids->saved_end == ids->block_end)
            return ids->block_end > INT64_MAX - GR_PRODUCER_ID_BLOCK_SIZE ? -EOVERFLOW : -EAGAIN;
        /* the saved block: right after the current one (a file), or wherever a shared counter put it */
        ids->next = ids->saved_end - GR_PRODUCER_ID_BLOCK_SIZE;
        ids->block_end = ids->saved_end;
    }
    *producer_id = ids->next++;
    return 0;
}

bool gr_producer_ids_prefetch(struct gr_producer_ids *ids, uint8_t *buf)
{
    if (ids->saving || ids->saved_end != ids->block_end) return false;
    if (ids->block_end - ids->next > GR_PRODUCER_ID_PREFETCH_LEFT) return false;
    if (ids->block_end > INT64_MAX - GR_PRODUCER_ID_BLOCK_SIZE) return false;
    ids->saving = true;
    ids->saving_end = ids->block_end + GR_PRODUCER_ID_BLOCK_SIZE;
    gr_producer_ids_encode(ids->saving_end, buf);
    return true;
}

int gr_producer_ids_claimed(struct gr_producer_ids *ids, int64_t block_start)
{
    if (!ids->saving || block_start < ids->block_end || block_start > INT64_MAX - GR_PRODUCER_ID_BLOCK_SIZE)
        return -ERANGE;
    ids->saving_end = block_start + GR_PRODUCER_ID_BLOCK_SIZE;
    return 0;
}

void gr_producer_ids_saved(struct gr_producer_ids *ids, int err)
{
    if (!ids->saving) return;
    ids->saving = false;
    if (err == 0 && ids->saving_end > ids->saved_end) ids->saved_end = ids->saving_end;
}

int gr_producer_ids_next(struct gr_producer_ids *ids, int64_t *producer_id)
{
    int r = gr_producer_ids_take(ids, producer_id);
    if (r != -EAGAIN) return r;
    if (ids->saving) return -EAGAIN; /* an asynchronous save is in flight */
    /* Used up: save the next block's end now (no prefetch in this mode: one save per block). */
    int64_t end = ids->block_end + GR_PRODUCER_ID_BLOCK_SIZE;
    uint8_t buf[GR_PRODUCER_ID_RECORD_BYTES];
    gr_producer_ids_encode(end, buf);
    int err = ids->io.save(ids->io.ctx, buf, sizeof buf);
    if (err < 0) return err;
    ids->saved_end = end;
    return gr_producer_ids_take(ids, producer_id);
}

/* The named wait. */

static struct gr_producer_id_manager *mgr_of(struct gr_io_job *job)
{
    return (struct gr_producer_id_manager *)((char *)job - offsetof(struct gr_producer_id_manager, job));
}

/* On the binding's thread (a pool thread): the durable write. Reads only what is fixed while in flight. */
static void save_run(struct gr_io_job *job)
{
    struct gr_producer_id_manager *mgr = mgr_of(job);
    job->result = mgr->ids.io.save(mgr->ids.io.ctx, mgr->rec, sizeof mgr->rec);
}

static void save_done(struct gr_io_job *job);

static int64_t now_ms(const struct gr_producer_id_manager *mgr)
{
    return mgr->bind.now_ms ? mgr->bind.now_ms(mgr->bind.ctx) : 0;
}

/* Starts the save of the next block when one is due (gr_producer_ids_prefetch) and may run. */
static void maybe_prefetch(struct gr_producer_id_manager *mgr)
{
    if (!mgr->bind.submit || now_ms(mgr) < mgr->retry_after_ms) return;
    if (!gr_producer_ids_prefetch(&mgr->ids, mgr->rec)) return;
    mgr->job = (struct gr_io_job){.run = save_run, .done = save_done};
    if (!mgr->bind.submit(mgr->bind.ctx, &mgr->job)) gr_producer_ids_saved(&mgr->ids, -ECANCELED);
}

static void finish(struct gr_producer_id_waiter *w, int err, int64_t producer_id)
{
    w->mgr = NULL;
    w->prev = w->next = NULL;
    if (err == 0)
        w->done(w, GR_ERR_NONE, producer_id);
    else
        w->done(w, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, -1);
}

static void unlink_waiter(struct gr_producer_id_waiter *w)
{
    struct gr_producer_id_manager *mgr = w->mgr;
    if (w->prev)
        w->prev->next = w->next;
    else
        mgr->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        mgr->tail = w->prev;
    w->mgr = NULL;
    w->prev = w->next = NULL;
}

static void save_done(struct gr_io_job *job)
{
    struct gr_producer_id_manager *mgr = mgr_of(job);
    int err = job->result;
    gr_producer_ids_saved(&mgr->ids, err);
    if (err < 0) {
        GR_ERROR("InitProducerId: cannot save the next producer id block: %s", strerror(-err));
        mgr->retry_after_ms = now_ms(mgr) + GR_PRODUCER_ID_RETRY_BACKOFF_MS;
    }
    while (mgr->head) {
        int64_t pid = -1;
        int r = err < 0 ? err : gr_producer_ids_take(&mgr->ids, &pid);
        if (r == -EAGAIN) {
            maybe_prefetch(mgr); /* more waiters than a block holds */
            if (mgr->ids.saving) break;
        }
        struct gr_producer_id_waiter *w = mgr->head;
        unlink_waiter(w);
        finish(w, r, pid);
    }
    if (err == 0) maybe_prefetch(mgr);
}

int gr_producer_id_manager_open(struct gr_producer_id_manager *mgr, const struct gr_producer_id_io *io,
                                const struct gr_producer_id_binding *bind)
{
    memset(mgr, 0, sizeof *mgr);
    int err = gr_producer_ids_open(&mgr->ids, io);
    if (err < 0) return err;
    mgr->bind = *bind;
    maybe_prefetch(mgr); /* the first block (a restart skips the rest of the saved one) */
    return 0;
}

void gr_producer_id_wait(struct gr_producer_id_manager *mgr, struct gr_producer_id_waiter *w)
{
    w->mgr = NULL;
    w->prev = w->next = NULL;
    int64_t pid = -1;
    int err;
    if (!mgr->bind.submit) { /* no pool: the save runs here */
        err = gr_producer_ids_next(&mgr->ids, &pid);
    } else {
        err = mgr->head ? -EAGAIN : gr_producer_ids_take(&mgr->ids, &pid); /* in arrival order */
        maybe_prefetch(mgr);
        if (err == -EAGAIN && mgr->ids.saving) { /* save_done answers */
            w->mgr = mgr;
            w->prev = mgr->tail;
            if (mgr->tail)
                mgr->tail->next = w;
            else
                mgr->head = w;
            mgr->tail = w;
            return;
        }
    }
    if (err < 0 && err != -EAGAIN) GR_ERROR("InitProducerId: no producer id block: %s", strerror(-err));
    finish(w, err, pid);
}

void gr_producer_id_wait_cancel(struct gr_producer_id_waiter *w)
{
    if (w->mgr) unlink_waiter(w);
}

bool gr_producer_id_waiting(const struct gr_producer_id_waiter *w)
{
    return w->mgr != NULL;
}
