/*
 * txn_admin.c: the transaction coordinator's admin APIs, answered at once from the
 * coordinator's state (coordinator/txn.h, bound by server/txns.c):
 *   DescribeTransactions (key 65, v0): per transactional id (TransactionCoordinator
 *     .handleDescribeTransactions) its state's name, timeout, start time, producer id and epoch and its
 *     partitions grouped by topic; an empty id: INVALID_REQUEST; unknown or Dead: TRANSACTIONAL_ID_NOT_FOUND;
 *     its partition of __transaction_state loading: COORDINATOR_LOAD_IN_PROGRESS; not owned here (or no
 *     coordinator yet: the topic not made): NOT_COORDINATOR.
 *   ListTransactions (key 66, v0-v1; v2's TransactionalIdPattern is not served): every transactional id the
 *     coordinator owns, filtered by state names (unknown names echoed in UnknownStateFilters), producer ids
 *     and v1's DurationFilter (TransactionStateManager.listTransactionStates); COORDINATOR_LOAD_IN_PROGRESS
 *     while any partition loads; no coordinator yet: an empty list (a broker that owns no partition).
 * Authorization (KafkaApis): DescribeTransactions needs DESCRIBE on each transactional id, else that id
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and lists only the topics the principal may DESCRIBE;
 * ListTransactions leaves out the ids the principal may not DESCRIBE. DescribeProducers (61,
 * describe_producers.c) is the partition side: each producer's open transaction. Read next: coordinator/txn.h
 * (gr_txn_describe, gr_txn_partitions, gr_txn_list).
 */
#include <string.h>

#include "coordinator/txn.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/txns.h"

/* A copy of `s` in the request's arena (ptr NULL when out of memory). */
static struct gr_str arena_str(struct gr_req *req, struct gr_str s)
{
    char *p = gr_arena_strndup(&req->arena, s.ptr, (size_t)s.len);
    return (struct gr_str){p, p ? s.len : 0};
}

/* ---- DescribeTransactions ---- */

/* The transaction's partitions grouped by topic, in the order they were added. Returns false when out of
   arena memory. */
static bool describe_topics(struct gr_req *req, const struct gr_txn_coord *tc, struct gr_str id,
                            struct gr_describe_transactions_response_transaction_state *st)
{
    int32_t n = gr_txn_partitions(tc, id, NULL, 0);
    struct gr_txn_tp *tps = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *tps);
    st->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *st->topics.items);
    if (!tps || !st->topics.items) return false;
    n = gr_txn_partitions(tc, id, tps, n);
    int32_t nt = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, tps[i].topic))
            continue; /* hidden */
        int32_t t = 0;
        while (t < nt && !gr_str_eq(st->topics.items[t].topic, tps[i].topic))
            t++;
        struct gr_describe_transactions_response_topic_data *td = &st->topics.items[t];
        if (t == nt) {
            gr_describe_transactions_response_topic_data_init(td);
            td->topic = arena_str(req, tps[i].topic);
            td->partitions.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *td->partitions.items);
            if (!td->topic.ptr || !td->partitions.items) return false;
            nt++;
        }
        td->partitions.items[td->partitions.count++] = tps[i].partition;
    }
    st->topics.count = nt;
    return true;
}

/* One transactional id (handleDescribeTransactions). Returns false when out of arena memory. */
static bool describe_one(struct gr_req *req, const struct gr_txn_coord *tc, struct gr_str id,
                         struct gr_describe_transactions_response_transaction_state *st)
{
    gr_describe_transactions_response_transaction_state_init(st);
    st->transactional_id = id;
    st->topics.count = 0;
    struct gr_txn_info info;
    if (!gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TRANSACTIONAL_ID, id))
        st->error_code = GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    else if (id.len <= 0)
        st->error_code = GR_ERR_INVALID_REQUEST;
    else if (!tc)
        st->error_code = GR_ERR_NOT_COORDINATOR;
    else if ((st->error_code = gr_txn_describe(tc, id, &info)) == GR_ERR_NONE && info.state == GR_TXN_DEAD)
        st->error_code = GR_ERR_TRANSACTIONAL_ID_NOT_FOUND; /* being expired */
    if (st->error_code) return true;
    st->transaction_state = gr_str_c(gr_txn_state_name(info.state));
    st->transaction_timeout_ms = info.timeout_ms;
    st->transaction_start_time_ms = info.start_ms;
    st->producer_id = info.producer_id;
    st->producer_epoch = info.producer_epoch;
    return describe_topics(req, tc, id, st);
}

enum gr_handler_rc gr_handle_describe_transactions(struct gr_req *req)
{
    struct gr_describe_transactions_request *body = req->body;
    struct gr_describe_transactions_response *resp = req->resp;
    int32_t n = body->transactional_ids.count > 0 ? body->transactional_ids.count : 0;
    resp->transaction_states.items =
        gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof(*resp->transaction_states.items));
    if (!resp->transaction_states.items) return GR_HANDLER_CLOSE;
    resp->transaction_states.count = n;
    const struct gr_txn_coord *tc = gr_txns_coord(req->broker);
    for (int32_t i = 0; i < n; i++)
        if (!describe_one(req, tc, body->transactional_ids.items[i], &resp->transaction_states.items[i]))
            return GR_HANDLER_CLOSE;
    return GR_HANDLER_DONE;
}

/* ---- ListTransactions ---- */

struct listing {
    struct gr_req *req;
    struct gr_list_transactions_response *resp;
    int32_t cap; /* 0: counting pass */
    bool oom;
};

static void listed(void *ctx, const struct gr_txn_listing *l)
{
    struct listing *ls = ctx;
    struct gr_list_transactions_response *resp = ls->resp;
    if (!gr_req_authorized(ls->req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TRANSACTIONAL_ID, l->transactional_id))
        return; /* hidden */
    if (ls->cap == 0 || resp->transaction_states.count >= ls->cap) {
        if (ls->cap == 0) resp->transaction_states.count++;
        return;
    }
    struct gr_list_transactions_response_transaction_state *st =
        &resp->transaction_states.items[resp->transaction_states.count++];
    gr_list_transactions_response_transaction_state_init(st);
    st->transactional_id = arena_str(ls->req, l->transactional_id);
    st->producer_id = l->producer_id;
    st->transaction_state = gr_str_c(gr_txn_state_name(l->state));
    ls->oom |= !st->transactional_id.ptr;
}

/* The request's state names as states (those Kafka knows: TransactionState.fromName), the others in the
   response's UnknownStateFilters. Returns false when out of arena memory. */
static bool state_filter(struct gr_req *req, struct gr_txn_list_filter *f)
{
    struct gr_list_transactions_request *body = req->body;
    struct gr_list_transactions_response *resp = req->resp;
    int32_t n = body->state_filters.count > 0 ? body->state_filters.count : 0;
    enum gr_txn_state *states = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *states);
    resp->unknown_state_filters.items =
        gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->unknown_state_filters.items);
    if (!states || !resp->unknown_state_filters.items) return false;
    resp->unknown_state_filters.count = 0;
    for (int32_t i = 0; i < n; i++) {
        struct gr_str name = body->state_filters.items[i];
        int s = 0;
        while (s < GR_TXN_STATE_COUNT && !gr_str_eq_c(name, gr_txn_state_name((enum gr_txn_state)s)))
            s++;
        if (s < GR_TXN_STATE_COUNT)
            states[f->state_count++] = (enum gr_txn_state)s;
        else
            resp->unknown_state_filters.items[resp->unknown_state_filters.count++] = name;
    }
    f->states = states;
    f->filter_states = n > 0;
    return true;
}

enum gr_handler_rc gr_handle_list_transactions(struct gr_req *req)
{
    struct gr_list_transactions_request *body = req->body;
    struct gr_list_transactions_response *resp = req->resp;
    struct gr_txn_list_filter f = {
        .producer_ids = body->producer_id_filters.items,
        .producer_id_count = body->producer_id_filters.count > 0 ? body->producer_id_filters.count : 0,
        .duration_ms = req->hdr.request_api_version >= 1 ? body->duration_filter : -1};
    if (!state_filter(req, &f)) return GR_HANDLER_CLOSE;
    resp->transaction_states.count = 0;
    const struct gr_txn_coord *tc = gr_txns_coord(req->broker);
    if (!tc) return GR_HANDLER_DONE; /* no coordinator here yet: it owns nothing */
    struct listing ls = {.req = req, .resp = resp};
    resp->error_code = gr_txn_list(tc, &f, listed, &ls); /* counts */
    if (resp->error_code) {
        resp->transaction_states.count = 0;
        return GR_HANDLER_DONE;
    }
    ls.cap = resp->transaction_states.count;
    resp->transaction_states.count = 0;
    resp->transaction_states.items =
        gr_arena_calloc(&req->arena, (size_t)ls.cap + 1, sizeof *resp->transaction_states.items);
    if (!resp->transaction_states.items) return GR_HANDLER_CLOSE;
    if (ls.cap > 0) gr_txn_list(tc, &f, listed, &ls);
    return ls.oom ? GR_HANDLER_CLOSE : GR_HANDLER_DONE;
}
