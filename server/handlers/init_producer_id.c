/*
 * init_producer_id.c: InitProducerId (key 22), v0-v6, for idempotent producers only, as Kafka 4.1.1's
 * TransactionCoordinator.handleInitProducerId answers a null transactional id: always a fresh producer id
 * with epoch 0, whatever producer id and epoch the request carries (the KIP-360 epoch bump of an idempotent
 * producer happens in the client). An empty transactional id is INVALID_REQUEST; any other transactional
 * id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (non-retriable), as Produce answers one: transactions are not
 * built. Errors answer producer id -1 and epoch -1. A failure to save a new id block answers
 * COORDINATOR_NOT_AVAILABLE (retriable) and hands out nothing.
 *
 * Ids come from coordinator/producer_ids.h, whose block end lives in the file "producer-id-block" of the log
 * directory (gr_store_meta_write: atomic replace + fsync). The save runs on the network thread, once per
 * 1000 ids. Read next: coordinator/producer_ids.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/producer_ids.h"
#include "server/handlers/handlers.h"

#define PRODUCER_ID_FILE "producer-id-block"

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
    struct gr_producer_ids *ids = calloc(1, sizeof *ids);
    if (!ids) return -ENOMEM;
    struct gr_producer_id_io io = {pid_load, pid_save, b->store};
    int err = gr_producer_ids_open(ids, &io);
    if (err < 0) {
        GR_ERROR("cannot read %s in the log directory: %s (refusing to start: producer ids could be reused)",
                 PRODUCER_ID_FILE, err == -EINVAL ? "damaged" : strerror(-err));
        free(ids);
        return err;
    }
    b->producer_ids = ids;
    return 0;
}

void gr_producer_ids_stop(struct gr_broker *b)
{
    free(b->producer_ids);
    b->producer_ids = NULL;
}

enum gr_handler_rc gr_handle_init_producer_id(struct gr_req *req)
{
    struct gr_init_producer_id_request *body = req->body;
    struct gr_init_producer_id_response *resp = req->resp;
    resp->producer_id = -1;
    resp->producer_epoch = -1;
    if (body->transactional_id.len == 0) {
        resp->error_code = GR_ERR_INVALID_REQUEST;
        return GR_HANDLER_DONE;
    }
    if (body->transactional_id.len > 0) {
        resp->error_code = GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    int64_t producer_id;
    int err = req->broker->producer_ids ? gr_producer_ids_next(req->broker->producer_ids, &producer_id) : -ENODEV;
    if (err < 0) {
        GR_ERROR("InitProducerId: cannot reserve a producer id block: %s", strerror(-err));
        resp->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
        return GR_HANDLER_DONE;
    }
    resp->error_code = GR_ERR_NONE;
    resp->producer_id = producer_id;
    resp->producer_epoch = 0;
    return GR_HANDLER_DONE;
}
