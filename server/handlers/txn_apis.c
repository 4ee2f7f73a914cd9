/*
 * txn_apis.c: the transaction APIs a producer sends its transaction coordinator: AddOffsetsToTxn (key 25,
 * v0-v4), EndTxn
 * (key 26, v0-v5: the request version decides the transaction version, as Kafka's handleEndTxnRequest:
 * v5+ is version 2, KIP-890 part 2: the epoch is bumped and the answer carries the next producer id and
 * epoch). AddPartitionsToTxn is in add_partitions_to_txn.c, InitProducerId's transactional path in
 * init_producer_id.c. Each request goes to the coordinator (coordinator/txn.h, bound by server/txns.c) with a
 * struct gr_txns_waiter; its answer comes through the done hook, at once or after the coordinator's write is
 * committed (the request is parked meanwhile). Errors are shaped by version as KafkaApis does
 * (gr_txn_error_for_version: PRODUCER_FENCED, TRANSACTION_ABORTABLE). No coordinator yet (its topic not made:
 * clients ask FindCoordinator first, which creates it): NOT_COORDINATOR. Authorization (KafkaApis), before
 * the coordinator: WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; AddOffsetsToTxn
 * then READ on the group, else GROUP_AUTHORIZATION_FAILED. Read next: server/txns.h, coordinator/txn.h.
 */
#include "coordinator/txn.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/txns.h"

/* ---- AddOffsetsToTxn ---- */

static void offsets_answered(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    struct gr_add_offsets_to_txn_response *resp = w->req->resp;
    resp->error_code =
        gr_txn_error_for_version(GR_TXN_API_ADD_OFFSETS, w->req->hdr.request_api_version, res->error_code);
}

/* KafkaApis.handleAddOffsetsToTxnRequest: the group's __consumer_offsets partition joins the transaction. */
enum gr_handler_rc gr_handle_add_offsets_to_txn(struct gr_req *req)
{
    struct gr_add_offsets_to_txn_request *body = req->body;
    struct gr_add_offsets_to_txn_response *resp = req->resp;
    if ((resp->error_code = gr_txn_group_refused(req, body->transactional_id, body->group_id)))
        return GR_HANDLER_DONE;
    struct gr_txns_waits *waits = gr_arena_calloc(&req->arena, 1, sizeof *waits);
    struct gr_txns_waiter *w = gr_arena_calloc(&req->arena, 1, sizeof *w);
    if (!waits || !w) return GR_HANDLER_CLOSE;
    struct gr_txn_coord *tc = gr_txns_coord(req->broker);
    if (!tc) {
        resp->error_code = GR_ERR_NOT_COORDINATOR;
        return GR_HANDLER_DONE;
    }
    *w = (struct gr_txns_waiter){.answer = offsets_answered, .req = req, .req_waits = waits};
    gr_txn_add_offsets(tc, w, body->transactional_id, body->producer_id, body->producer_epoch,
                       body->group_id);
    return gr_txns_settle(req, waits, &w, 1);
}

/* ---- EndTxn ---- */

static void end_answered(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    struct gr_end_txn_response *resp = w->req->resp;
    resp->error_code =
        gr_txn_error_for_version(GR_TXN_API_END_TXN, w->req->hdr.request_api_version, res->error_code);
    resp->producer_id = res->producer_id;
    resp->producer_epoch = res->producer_epoch;
}

/* KafkaApis.handleEndTxnRequest: answered once PrepareCommit / PrepareAbort is durable; the markers follow.
 * v0-v4: transaction version 1 (producer id and epoch absent from the response); v5+: version 2. */
enum gr_handler_rc gr_handle_end_txn(struct gr_req *req)
{
    struct gr_end_txn_request *body = req->body;
    struct gr_end_txn_response *resp = req->resp;
    if (!gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, body->transactional_id)) {
        resp->error_code = GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED; /* producer id and epoch stay -1 */
        return GR_HANDLER_DONE;
    }
    struct gr_txns_waits *waits = gr_arena_calloc(&req->arena, 1, sizeof *waits);
    struct gr_txns_waiter *w = gr_arena_calloc(&req->arena, 1, sizeof *w);
    if (!waits || !w) return GR_HANDLER_CLOSE;
    struct gr_txn_coord *tc = gr_txns_coord(req->broker);
    if (!tc) {
        resp->error_code = GR_ERR_NOT_COORDINATOR;
        return GR_HANDLER_DONE;
    }
    *w = (struct gr_txns_waiter){.answer = end_answered, .req = req, .req_waits = waits};
    gr_txn_end_tv(tc, w, body->transactional_id, body->producer_id, body->producer_epoch, body->committed,
                  req->hdr.request_api_version >= GR_TXN_END_TXN_V2_MIN ? 2 : 0);
    return gr_txns_settle(req, waits, &w, 1);
}
