/*
 * init_producer_id.c: InitProducerId (key 22), v0-v5 (v6, KIP-939's two-phase commit, is unstable in Kafka
 * 4.x and not advertised). A null transactional id (an idempotent producer) is answered as Kafka 4.4's
 * TransactionCoordinator.handleInitProducerId answers it: always a fresh producer id
 * with epoch 0, whatever producer id and epoch the request carries (the KIP-360 epoch bump of an idempotent
 * producer happens in the client). An empty transactional id is INVALID_REQUEST. Errors answer producer id
 * -1 and epoch -1. Any other transactional id goes to the transaction coordinator
 * (coordinator/txn.h gr_txn_init_producer_id through server/txns.c; NOT_COORDINATOR while it is not
 * started), its errors shaped by version (gr_txn_error_for_version: PRODUCER_FENCED from v4,
 * TRANSACTION_ABORTABLE from v5).
 *
 * The id comes from the coordinator's named wait "until the block is saved" (coordinator/producer_ids.h
 * gr_producer_id_wait, bound by server/producer_ids.c to the log directory and the I/O pool, or in cluster
 * mode to etcd's producer_ids counter through cluster/producer_ids_etcd.h): answered at
 * once, or parked (no deadline, in arrival order) until the next block's end is durable; a failed save
 * answers COORDINATOR_LOAD_IN_PROGRESS (what Kafka answers while it has no block: retriable, and older
 * clients treat REQUEST_TIMED_OUT as fatal). This file only translates. Read next:
 * coordinator/producer_ids.h. ACLs (KafkaApis, before anything else): init_denied.
 */
#include <stdbool.h>

#include "coordinator/producer_ids.h"
#include "coordinator/txn.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/txns.h"

/* The wait of one request (its arena). */
struct pid_req {
    struct gr_producer_id_waiter w;
    struct gr_req *req;
    bool parked; /* the handler parked the request: the done hook finishes it */
};

static void answer(struct gr_req *req, int16_t error_code, int64_t producer_id)
{
    struct gr_init_producer_id_response *resp = req->resp;
    resp->error_code = error_code;
    resp->producer_id = error_code ? -1 : producer_id;
    resp->producer_epoch = error_code ? -1 : 0;
}

static void id_done(struct gr_producer_id_waiter *w, int16_t error_code, int64_t producer_id)
{
    struct pid_req *pr = w->ctx;
    answer(pr->req, error_code, producer_id);
    if (pr->parked) gr_req_finish(pr->req);
}

static void txn_answered(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    struct gr_init_producer_id_response *resp = w->req->resp;
    resp->error_code = gr_txn_error_for_version(GR_TXN_API_INIT_PRODUCER_ID, w->req->hdr.request_api_version,
                                                res->error_code);
    resp->producer_id = resp->error_code ? -1 : res->producer_id;
    resp->producer_epoch = resp->error_code ? -1 : res->producer_epoch;
}

/* TransactionCoordinator.handleInitProducerId with a transactional id (v3+ carry KIP-360's expected
 * producer id and epoch; older versions none: -1). */
static enum gr_handler_rc init_transactional(struct gr_req *req)
{
    struct gr_init_producer_id_request *body = req->body;
    struct gr_broker *b = req->broker;
    if (!gr_txns_coord(b)) {
        answer(req, GR_ERR_NOT_COORDINATOR, -1);
        return GR_HANDLER_DONE;
    }
    struct gr_txns_waits *waits = gr_arena_calloc(&req->arena, 1, sizeof *waits);
    struct gr_txns_waiter *w = gr_arena_calloc(&req->arena, 1, sizeof *w);
    if (!waits || !w) return GR_HANDLER_CLOSE;
    *w = (struct gr_txns_waiter){.answer = txn_answered, .req = req, .req_waits = waits};
    bool kip360 = req->hdr.request_api_version >= 3;
    gr_txn_init_producer_id(b->txn, w, body->transactional_id, body->transaction_timeout_ms,
                            kip360 ? body->producer_id : -1, kip360 ? body->producer_epoch : -1);
    return gr_txns_settle(req, waits, &w, 1); /* parked: server/txns.c's done hook finishes it */
}

/* KafkaApis' checks, first: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without
   one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic (authorizeByResourceType, KIP-679), else
   CLUSTER_AUTHORIZATION_FAILED. NONE when allowed. */
static int16_t init_denied(struct gr_req *req)
{
    struct gr_init_producer_id_request *body = req->body;
    if (body->transactional_id.len >= 0)
        return gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, body->transactional_id)
                   ? GR_ERR_NONE
                   : GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (gr_req_authorized_cluster(req, GR_ACL_OP_IDEMPOTENT_WRITE) ||
        gr_req_authorized_any(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC))
        return GR_ERR_NONE;
    return GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
}

enum gr_handler_rc gr_handle_init_producer_id(struct gr_req *req)
{
    struct gr_init_producer_id_request *body = req->body;
    struct gr_broker *b = req->broker;
    int16_t denied = init_denied(req);
    if (denied) {
        answer(req, denied, -1);
        return GR_HANDLER_DONE;
    }
    if (body->transactional_id.len == 0) {
        answer(req, GR_ERR_INVALID_REQUEST, -1);
        return GR_HANDLER_DONE;
    }
    if (body->transactional_id.len > 0) return init_transactional(req);
    if (!b->producer_ids) {
        answer(req, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS, -1);
        return GR_HANDLER_DONE;
    }
    struct pid_req *pr = gr_arena_calloc(&req->arena, 1, sizeof *pr);
    if (!pr) return GR_HANDLER_CLOSE;
    pr->req = req;
    pr->w = (struct gr_producer_id_waiter){.done = id_done, .ctx = pr};
    gr_producer_id_wait(b->producer_ids, &pr->w); /* may answer at once */
    if (!gr_producer_id_waiting(&pr->w)) return GR_HANDLER_DONE;
    pr->parked = true;
    return gr_req_await(req, NULL); /* id_done finishes it */
}
