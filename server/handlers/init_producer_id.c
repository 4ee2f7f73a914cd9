/*
 * init_producer_id.c: InitProducerId (key 22), v0-v5 (v6, KIP-939's two-phase commit, is unstable in Kafka
 * 4.x and not advertised), for idempotent producers only, as Kafka 4.4's
 * TransactionCoordinator.handleInitProducerId answers a null transactional id: always a fresh producer id
 * with epoch 0, whatever producer id and epoch the request carries (the KIP-360 epoch bump of an idempotent
 * producer happens in the client). An empty transactional id is INVALID_REQUEST; any other transactional
 * id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (non-retriable), as Produce answers one: transactions are not
 * built. Errors answer producer id -1 and epoch -1.
 *
 * Ids come from coordinator/producer_ids.h, whose block end lives in the file "producer-id-block" of the log
 * directory (gr_store_meta_write: atomic replace + fsync). As Kafka's RPCProducerIdManager: when the block
 * in use is 90% handed out, the next block's end is saved on the I/O pool (never on the network thread);
 * an InitProducerId that finds the block used up and the next not durable yet is parked (in arrival
 * order) until the save completes, then answered; no id is handed out before its block end is durable.
 * A failed save answers the parked requests COORDINATOR_LOAD_IN_PROGRESS (what Kafka answers while it has
 * no block: retriable, and older clients treat REQUEST_TIMED_OUT as fatal) and, as Kafka does after a
 * failed allocation, tries again no sooner than PID_RETRY_BACKOFF_MS later (requests meanwhile get the same
 * error at once). Read next: coordinator/producer_ids.h.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "coordinator/producer_ids.h"
#include "server/handlers/handlers.h"

#define PRODUCER_ID_FILE "producer-id-block"

#define PID_RETRY_BACKOFF_MS 50 /* Kafka's RPCProducerIdManager.RETRY_BACKOFF_MS */

/* A request waiting for the next block (arena of its request). */
struct pid_wait {
    struct gr_req *req;
    struct pid_wait *next;
};

/* The broker's producer id state: b->producer_ids points at `ids`, the first member. */
struct pid_server {
    struct gr_producer_ids ids;
    struct gr_broker *b;
    struct gr_io_job job; /* the block save on the I/O pool; in flight while ids.saving */
    uint8_t rec[GR_PRODUCER_ID_RECORD_BYTES];
    struct pid_wait *head, *tail;
    int64_t retry_after_mono_ms; /* no save before (after a failed one) */
};

static struct pid_server *pid_server(struct gr_broker *b)
{
    return (struct pid_server *)b->producer_ids;
}

static void answer(struct gr_req *req, int16_t error_code, int64_t producer_id)
{
    struct gr_init_producer_id_response *resp = req->resp;
    resp->error_code = error_code;
    resp->producer_id = error_code ? -1 : producer_id;
    resp->producer_epoch = error_code ? -1 : 0;
}

static void save_run(struct gr_io_job *job)
{
    struct pid_server *ps = (struct pid_server *)((char *)job - offsetof(struct pid_server, job));
    job->result = gr_store_meta_write(ps->b->store, PRODUCER_ID_FILE, ps->rec, sizeof ps->rec);
}

static void save_done(struct gr_io_job *job);

/* Starts the save of the next block on the I/O pool when one is due (gr_producer_ids_prefetch). */
static void maybe_prefetch(struct pid_server *ps)
{
    struct gr_broker *b = ps->b;
    if (!b->iopool || b->stopping || gr_time_mono_ms() < ps->retry_after_mono_ms) return;
    if (!gr_producer_ids_prefetch(&ps->ids, ps->rec)) return;
    ps->job = (struct gr_io_job){.run = save_run, .done = save_done};
    gr_iopool_submit(b->iopool, &ps->job);
}

static void save_done(struct gr_io_job *job)
{
    struct pid_server *ps = (struct pid_server *)((char *)job - offsetof(struct pid_server, job));
    int err = job->result;
    gr_producer_ids_saved(&ps->ids, err);
    if (err < 0) {
        GR_ERROR("InitProducerId: cannot save the next producer id block: %s", strerror(-err));
        ps->retry_after_mono_ms = gr_time_mono_ms() + PID_RETRY_BACKOFF_MS;
    }
    while (ps->head) {
        int64_t pid = -1;
        int r = err < 0 ? err : gr_producer_ids_take(&ps->ids, &pid);
        if (r == -EAGAIN) {
            maybe_prefetch(ps); /* more waiters than a block holds */
            if (ps->ids.saving) break;
        }
        struct pid_wait *w = ps->head;
        ps->head = w->next;
        if (!ps->head) ps->tail = NULL;
        answer(w->req, r == 0 ? GR_ERR_NONE : GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, pid);
        gr_req_finish(w->req);
    }
    if (err == 0) maybe_prefetch(ps);
}

static int pid_load(void *ctx, uint8_t *buf, size_t len)
{
    return gr_store_meta_read(ctx, PRODUCER_ID_FILE, buf, len);
}

static int pid_save(void *ctx, const uint8_t *buf, size_t len)
{
    return gr_store_meta_write(ctx, PRODUCER_ID_FILE, buf, len);
}

int gr_producer_ids_start(struct gr_broker *b)
{
    struct pid_server *ps = calloc(1, sizeof *ps);
    if (!ps) return -ENOMEM;
    struct gr_producer_id_io io = {pid_load, pid_save, b->store};
    int err = gr_producer_ids_open(&ps->ids, &io);
    if (err < 0) {
        GR_ERROR("cannot read %s in the log directory: %s (refusing to start: producer ids could be reused)",
                 PRODUCER_ID_FILE, err == -EINVAL ? "damaged" : strerror(-err));
        free(ps);
        return err;
    }
    ps->b = b;
    b->producer_ids = &ps->ids;
    maybe_prefetch(ps); /* the first block (a restart skips the rest of the saved one) */
    return 0;
}

void gr_producer_ids_stop(struct gr_broker *b)
{
    free(pid_server(b)); /* after gr_iopool_destroy: no save in flight, nobody parked */
    b->producer_ids = NULL;
}

enum gr_handler_rc gr_handle_init_producer_id(struct gr_req *req)
{
    struct gr_init_producer_id_request *body = req->body;
    struct gr_broker *b = req->broker;
    if (body->transactional_id.len == 0) {
        answer(req, GR_ERR_INVALID_REQUEST, -1);
        return GR_HANDLER_DONE;
    }
    if (body->transactional_id.len > 0) {
        answer(req, GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1);
        return GR_HANDLER_DONE;
    }
    struct pid_server *ps = pid_server(b);
    if (!ps) {
        answer(req, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, -1);
        return GR_HANDLER_DONE;
    }
    int64_t producer_id = -1;
    int err;
    if (!b->iopool) { /* no pool (never in the broker): the save runs here */
        err = gr_producer_ids_next(&ps->ids, &producer_id);
    } else {
        err = ps->head ? -EAGAIN : gr_producer_ids_take(&ps->ids, &producer_id); /* in arrival order */
        maybe_prefetch(ps);
        if (err == -EAGAIN && ps->ids.saving) {
            struct pid_wait *w = gr_arena_calloc(&req->arena, 1, sizeof *w);
            if (!w) return GR_HANDLER_CLOSE;
            w->req = req;
            if (ps->tail)
                ps->tail->next = w;
            else
                ps->head = w;
            ps->tail = w;
            gr_broker_park(b, req, INT64_MAX); /* save_done answers */
            return GR_HANDLER_WAIT;
        }
    }
    if (err < 0) {
        if (err != -EAGAIN) GR_ERROR("InitProducerId: no producer id block: %s", strerror(-err));
        answer(req, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, -1);
        return GR_HANDLER_DONE;
    }
    answer(req, GR_ERR_NONE, producer_id);
    return GR_HANDLER_DONE;
}
