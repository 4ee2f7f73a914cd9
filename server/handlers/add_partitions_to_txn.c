/*
 * add_partitions_to_txn.c: AddPartitionsToTxn (key 24), v0-v5: the client versions 0-3 (one
 * transaction) and the batched v4+ (several, each maybe VerifyOnly: KIP-890's verification, answered at
 * once), as KafkaApis.handleAddPartitionsToTxnRequest; the coordinator answers through server/txns.h's
 * waiters (txn_apis.c says how). Authorization (KafkaApis): v4+ (broker to coordinator) needs CLUSTER_ACTION,
 * else the top-level CLUSTER_AUTHORIZATION_FAILED and no results; v0-3 WRITE on the transactional id, else
 * every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED, then WRITE on each topic, else its partitions
 * TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED (nothing added). Read next: txn_apis.c,
 * coordinator/txn.h.
 */
#include "cluster/image.h"
#include "coordinator/txn.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/txns.h"

typedef struct gr_add_partitions_to_txn_request_add_partitions_to_txn_topic_array req_topics;
typedef struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_array resp_topics;

/* Fills `out` (one result per requested partition, in request order) with `code` for all. Returns false
 * out of arena memory. */
static bool topic_results(struct gr_req *req, const req_topics *in, resp_topics *out)
{
    int32_t nt = in->count > 0 ? in->count : 0;
    out->items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *out->items);
    if (!out->items) return false;
    out->count = nt;
    for (int32_t i = 0; i < nt; i++) {
        struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *tr = &out->items[i];
        gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_init(tr);
        tr->name = in->items[i].name;
        int32_t np = in->items[i].partitions.count > 0 ? in->items[i].partitions.count : 0;
        tr->results_by_partition.items =
            gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *tr->results_by_partition.items);
        if (!tr->results_by_partition.items) return false;
        tr->results_by_partition.count = np;
        for (int32_t p = 0; p < np; p++) {
            gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result_init(
                &tr->results_by_partition.items[p]);
            tr->results_by_partition.items[p].partition_index = in->items[i].partitions.items[p];
        }
    }
    return true;
}

static void set_all(resp_topics *out, int16_t code)
{
    for (int32_t i = 0; i < out->count; i++)
        for (int32_t p = 0; p < out->items[i].results_by_partition.count; p++)
            out->items[i].results_by_partition.items[p].partition_error_code = code;
}

/* One transaction of the request, its results, and the flat partition list given to the coordinator. */
struct add_txn {
    struct gr_txns_waiter w;
    resp_topics *out;
    int16_t version;
};

static void add_answered(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    struct add_txn *at = w->ctx;
    set_all(at->out, gr_txn_error_for_version(GR_TXN_API_ADD_PARTITIONS, at->version, res->error_code));
}

/* One transaction (KafkaApis.handleAddPartitionsToTxnRequest): unknown topics or partitions answer
 * UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED; verify_only (v4+) answers at once
 * per partition (handleVerifyPartitionsInTransaction); else the coordinator adds them
 * (handleAddPartitionsToTransaction). Returns false out of arena memory. */
static bool add_one(struct gr_req *req, struct gr_txns_waits *waits, struct add_txn *at, struct gr_str txn_id,
                    int64_t producer_id, int16_t producer_epoch, bool verify_only, const req_topics *in)
{
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    at->version = v;
    at->w = (struct gr_txns_waiter){.answer = add_answered, .req = req, .req_waits = waits, .ctx = at};
    if (!topic_results(req, in, at->out)) return false;
    if (v < 4 && !gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, txn_id)) {
        set_all(at->out, GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        at->w.answered = true;
        return true;
    }
    int32_t total = 0;
    bool unknown = false;
    for (int32_t i = 0; i < at->out->count; i++) {
        const struct gr_image_topic *it =
            gr_image_topic_find(b->image, in->items[i].name.ptr, (size_t)in->items[i].name.len);
        bool denied = v < 4 && !gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, in->items[i].name);
        for (int32_t p = 0; p < at->out->items[i].results_by_partition.count; p++, total++) {
            int32_t idx = in->items[i].partitions.items[p];
            if (denied) {
                at->out->items[i].results_by_partition.items[p].partition_error_code =
                    GR_ERR_TOPIC_AUTHORIZATION_FAILED;
                unknown = true;
            } else if (!it || idx < 0 || idx >= it->partition_count) {
                at->out->items[i].results_by_partition.items[p].partition_error_code =
                    GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
            }
        }
    }
    if (unknown) {
        for (int32_t i = 0; i < at->out->count; i++)
            for (int32_t p = 0; p < at->out->items[i].results_by_partition.count; p++) {
                int16_t *e = &at->out->items[i].results_by_partition.items[p].partition_error_code;
                if (*e == GR_ERR_NONE) *e = GR_ERR_OPERATION_NOT_ATTEMPTED;
            }
        at->w.answered = true;
        return true;
    }
    struct gr_txn_tp *tps = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *tps);
    int16_t *errs = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *errs);
    if (!tps || !errs) return false;
    int32_t k = 0;
    for (int32_t i = 0; i < at->out->count; i++)
        for (int32_t p = 0; p < at->out->items[i].results_by_partition.count; p++)
            tps[k++] = (struct gr_txn_tp){in->items[i].name, in->items[i].partitions.items[p]};
    struct gr_txn_coord *tc = gr_txns_coord(b);
    if (!tc) {
        set_all(at->out, GR_ERR_NOT_COORDINATOR);
        at->w.answered = true;
    } else if (verify_only) {
        gr_txn_verify_partitions(tc, txn_id, producer_id, producer_epoch, tps, total, errs);
        k = 0;
        for (int32_t i = 0; i < at->out->count; i++)
            for (int32_t p = 0; p < at->out->items[i].results_by_partition.count; p++, k++)
                at->out->items[i].results_by_partition.items[p].partition_error_code =
                    gr_txn_error_for_version(GR_TXN_API_ADD_PARTITIONS, v, errs[k]);
        at->w.answered = true;
    } else {
        /* v4+ without VerifyOnly comes from a partition leader's implicit add (transaction version 2) */
        gr_txn_add_partitions_tv(tc, &at->w, txn_id, producer_id, producer_epoch, tps, total, v >= 4 ? 2 : 0);
    }
    return true;
}

enum gr_handler_rc gr_handle_add_partitions_to_txn(struct gr_req *req)
{
    struct gr_add_partitions_to_txn_request *body = req->body;
    struct gr_add_partitions_to_txn_response *resp = req->resp;
    struct gr_txns_waits *waits = gr_arena_calloc(&req->arena, 1, sizeof *waits);
    if (!waits) return GR_HANDLER_CLOSE;
    if (req->hdr.request_api_version < 4) {
        struct add_txn *at = gr_arena_calloc(&req->arena, 1, sizeof *at);
        if (!at) return GR_HANDLER_CLOSE;
        at->out = &resp->results_by_topic_v3_and_below;
        if (!add_one(req, waits, at, body->v3_and_below_transactional_id, body->v3_and_below_producer_id,
                     body->v3_and_below_producer_epoch, false, &body->v3_and_below_topics))
            return GR_HANDLER_CLOSE;
        struct gr_txns_waiter *one = &at->w;
        return gr_txns_settle(req, waits, &one, 1);
    }
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) { /* an inter-broker version */
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        resp->results_by_transaction.count = 0;
        return GR_HANDLER_DONE;
    }
    int32_t n = body->transactions.count > 0 ? body->transactions.count : 0;
    struct add_txn *ats = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *ats);
    struct gr_txns_waiter **ws = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *ws);
    resp->results_by_transaction.items =
        gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results_by_transaction.items);
    if (!ats || !ws || !resp->results_by_transaction.items) return GR_HANDLER_CLOSE;
    resp->results_by_transaction.count = n;
    for (int32_t i = 0; i < n; i++) {
        struct gr_add_partitions_to_txn_request_add_partitions_to_txn_transaction *tx =
            &body->transactions.items[i];
        struct gr_add_partitions_to_txn_response_add_partitions_to_txn_result *rt =
            &resp->results_by_transaction.items[i];
        gr_add_partitions_to_txn_response_add_partitions_to_txn_result_init(rt);
        rt->transactional_id = tx->transactional_id;
        ats[i].out = &rt->topic_results;
        if (!add_one(req, waits, &ats[i], tx->transactional_id, tx->producer_id, tx->producer_epoch,
                     tx->verify_only, &tx->topics))
            return GR_HANDLER_CLOSE;
        ws[i] = &ats[i].w;
    }
    return gr_txns_settle(req, waits, ws, n);
}
