/*
 * txn_verifier.c: verification at coordinators on other brokers (rules in server/txn_verifier.h; Kafka's
 * AddPartitionsToTxnManager: nodesToTransactions, inflightNodes, addTxnData, AddPartitionsToTxnHandler).
 *
 * A destination (struct gr_txn_verifier_dest) is made on the first question for its broker and kept: its
 * connection (purpose GR_BROKER_CLIENT_VERIFY, index 0, AddPartitionsToTxn required) reconnects by itself.
 * Invariants: a question is on exactly one of its destination's queue (where == QUEUED), its flight slots
 * (IN_FLIGHT) or the verifier's answered list (ANSWERED: replaced by a newer question of its id, its done
 * due from the zero-delay timer), or idle (dest NULL); queued questions have distinct transactional ids;
 * at most one request per destination is in flight; while its answer is handed out (`answering`) new
 * questions only queue, and the next request goes out after the last done call.
 * Read next: server/txns.c (gr_txns_verify_remote, the guard at append).
 */
#include "server/txn_verifier.h"

#include <errno.h>
#include <ev.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/broker_client.h"
#include "common/limits.h"
#include "common/log.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"

/* AddPartitionsToTxn's first version with VerifyOnly and several transactions (KIP-890). */
#define VERIFY_VERSION_MIN 4

enum { IDLE, QUEUED, IN_FLIGHT, ANSWERED };

struct gr_txn_verifier_dest {
    struct gr_txn_verifier *v;
    int32_t broker_id;
    struct gr_broker_client_conn *conn;
    bool ready, answering;
    struct gr_txn_question *head, *tail; /* queued, in arrival order */
    int32_t queued;
    struct gr_txn_question *flight[GR_TXN_VERIFY_BATCH_TXNS_MAX]; /* NULL: cancelled while in flight */
    int32_t flight_count;
    struct gr_broker_client_req *req;
    struct gr_txn_verifier_dest *next;
};

struct gr_txn_verifier {
    struct ev_loop *loop;
    struct gr_broker_client *bc;
    const struct gr_msg_ops *ops; /* the codec's add_partitions_to_txn_request row */
    struct gr_txn_verifier_dest *dests;
    struct gr_txn_question *answered; /* done due from `later` (singly linked through next) */
    ev_timer later;
    int64_t requests;
};

static const struct gr_msg_ops *request_row(const char *name)
{
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!strcmp(gr_msg_ops_table[i].name, name)) return &gr_msg_ops_table[i];
    return NULL;
}

/* The answered list's done calls, from the loop. */
static void on_later(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_txn_verifier *v = w->data;
    while (v->answered) {
        struct gr_txn_question *q = v->answered;
        v->answered = q->next;
        q->next = NULL;
        q->dest = NULL;
        q->where = IDLE;
        q->done(q);
    }
}

struct gr_txn_verifier *gr_txn_verifier_new(struct ev_loop *loop, struct gr_broker_client *bc)
{
    struct gr_txn_verifier *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->loop = loop;
    v->bc = bc;
    v->ops = request_row("add_partitions_to_txn_request");
    if (!v->ops) {
        free(v);
        return NULL;
    }
    ev_timer_init(&v->later, on_later, 0., 0.);
    v->later.data = v;
    return v;
}

void gr_txn_verifier_free(struct gr_txn_verifier *v)
{
    if (!v) return;
    ev_timer_stop(v->loop, &v->later);
    for (struct gr_txn_question *q = v->answered; q; q = q->next) {
        q->dest = NULL;
        q->where = IDLE;
    }
    while (v->dests) {
        struct gr_txn_verifier_dest *d = v->dests;
        v->dests = d->next;
        for (struct gr_txn_question *q = d->head; q; q = q->next) {
            q->dest = NULL;
            q->where = IDLE;
        }
        for (int32_t i = 0; i < d->flight_count; i++)
            if (d->flight[i]) {
                d->flight[i]->dest = NULL;
                d->flight[i]->where = IDLE;
            }
        if (d->conn) gr_broker_client_close(d->conn); /* its request is dropped without a callback */
        free(d);
    }
    free(v);
}

int32_t gr_txn_verifier_pending(const struct gr_txn_verifier *v)
{
    int32_t n = 0;
    for (const struct gr_txn_question *q = v->answered; q; q = q->next)
        n++;
    for (const struct gr_txn_verifier_dest *d = v->dests; d; d = d->next) {
        n += d->queued;
        for (int32_t i = 0; i < d->flight_count; i++)
            n += d->flight[i] != NULL;
    }
    return n;
}

int64_t gr_txn_verifier_requests(const struct gr_txn_verifier *v)
{
    return v->requests;
}

static void set_all(struct gr_txn_question *q, int16_t err)
{
    for (int32_t i = 0; i < q->count; i++)
        q->parts[i].error = err;
}

/* Fills `q` from the answer's entry for its transactional id (AddPartitionsToTxnHandler.onComplete). */
static void read_answer(const struct gr_add_partitions_to_txn_response *r, struct gr_txn_question *q)
{
    if (r->error_code) { /* the whole request failed: every partition gets it */
        set_all(q, r->error_code == GR_ERR_CLUSTER_AUTHORIZATION_FAILED ? GR_ERR_INVALID_TXN_STATE
                                                                        : r->error_code);
        return;
    }
    set_all(q, GR_ERR_NETWORK_EXCEPTION); /* left out of the answer: unknown, retriable */
    for (int32_t i = 0; i < r->results_by_transaction.count; i++) {
        const struct gr_add_partitions_to_txn_response_add_partitions_to_txn_result *tr =
            &r->results_by_transaction.items[i];
        if (!gr_str_eq(tr->transactional_id, q->txn_id)) continue;
        for (int32_t j = 0; j < tr->topic_results.count; j++) {
            const struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result *top =
                &tr->topic_results.items[j];
            for (int32_t k = 0; k < top->results_by_partition.count; k++) {
                const struct gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result *pr =
                    &top->results_by_partition.items[k];
                int16_t err = pr->partition_error_code == GR_ERR_PRODUCER_FENCED
                                  ? GR_ERR_INVALID_PRODUCER_EPOCH /* producers expect it here */
                                  : pr->partition_error_code;
                for (int32_t x = 0; x < q->count; x++)
                    if (q->parts[x].partition == pr->partition_index &&
                        gr_str_eq(q->parts[x].topic, top->name))
                        q->parts[x].error = err;
            }
        }
        return;
    }
}

static void flush(struct gr_txn_verifier_dest *d);

/* The request's end: every question of the batch gets its errors (see the header), then the next batch. */
static void on_answer(void *ctx, enum gr_broker_client_status status, const void *resp, int16_t version,
                      struct gr_broker_client_answer *ans)
{
    (void)version;
    (void)ans;
    struct gr_txn_verifier_dest *d = ctx;
    d->req = NULL;
    d->answering = true;
    if (status != GR_BROKER_CLIENT_OK)
        GR_WARN_RATELIMITED("transaction verification at broker %d failed (%s): NETWORK_EXCEPTION",
                            (int)d->broker_id,
                            status == GR_BROKER_CLIENT_TIMEOUT ? "timeout" : "disconnected");
    for (int32_t i = 0; i < d->flight_count; i++) {
        struct gr_txn_question *q = d->flight[i];
        if (!q) continue; /* cancelled */
        d->flight[i] = NULL;
        q->dest = NULL;
        q->where = IDLE;
        if (status == GR_BROKER_CLIENT_OK)
            read_answer(resp, q);
        else
            set_all(q, GR_ERR_NETWORK_EXCEPTION); /* wasDisconnected || wasTimedOut */
        q->done(q);
    }
    d->flight_count = 0;
    d->answering = false;
    flush(d);
}

/* Sends the queued questions (within the batch bounds) when the connection is ready and nothing is in
 * flight. Out of memory or refused by the client: they stay queued for the next ready or answer. */
static void flush(struct gr_txn_verifier_dest *d)
{
    if (!d->ready || d->req || d->answering || !d->head) return;
    int16_t ver = gr_broker_client_version(d->conn, d->v->ops);
    if (ver < VERIFY_VERSION_MIN) { /* a peer without VerifyOnly: every queued question fails, retriable */
        while (d->head) {
            struct gr_txn_question *q = d->head;
            d->head = q->next;
            if (!d->head) d->tail = NULL;
            q->prev = NULL;
            set_all(q, GR_ERR_NETWORK_EXCEPTION);
            q->where = ANSWERED;
            q->next = d->v->answered;
            d->v->answered = q;
        }
        d->queued = 0;
        ev_timer_start(d->v->loop, &d->v->later);
        return;
    }
    int32_t n = 0, parts = 0;
    for (struct gr_txn_question *q = d->head; q && n < GR_TXN_VERIFY_BATCH_TXNS_MAX; q = q->next) {
        if (n > 0 && parts + q->count > GR_TXN_VERIFY_BATCH_PARTS_MAX) break;
        parts += q->count;
        n++;
    }
    struct gr_add_partitions_to_txn_request_add_partitions_to_txn_transaction *tx =
        calloc((size_t)n, sizeof *tx);
    struct gr_add_partitions_to_txn_request_add_partitions_to_txn_topic *tp =
        calloc((size_t)parts, sizeof *tp);
    int32_t *idx = calloc((size_t)parts, sizeof *idx);
    if (!tx || !tp || !idx) {
        free(tx);
        free(tp);
        free(idx);
        return;
    }
    struct gr_txn_question *q = d->head;
    int32_t t = 0, ip = 0; /* topic entries and partition slots used */
    for (int32_t i = 0; i < n; i++, q = q->next) {
        gr_add_partitions_to_txn_request_add_partitions_to_txn_transaction_init(&tx[i]);
        tx[i].transactional_id = q->txn_id;
        tx[i].producer_id = q->producer_id;
        tx[i].producer_epoch = q->producer_epoch;
        tx[i].verify_only = !q->add;
        int32_t first = t;
        for (int32_t p = 0; p < q->count; p++, ip++) { /* a topic's consecutive partitions share its entry */
            idx[ip] = q->parts[p].partition;
            if (t > first && gr_str_eq(tp[t - 1].name, q->parts[p].topic)) {
                tp[t - 1].partitions.count++; /* its slots are consecutive in idx */
                continue;
            }
            gr_add_partitions_to_txn_request_add_partitions_to_txn_topic_init(&tp[t]);
            tp[t].name = q->parts[p].topic;
            tp[t].partitions = (struct gr_int32_array){&idx[ip], 1};
            t++;
        }
        tx[i].topics = (struct gr_add_partitions_to_txn_request_add_partitions_to_txn_topic_array){&tp[first],
                                                                                                   t - first};
    }
    struct gr_add_partitions_to_txn_request req;
    gr_add_partitions_to_txn_request_init(&req);
    req.transactions =
        (struct gr_add_partitions_to_txn_request_add_partitions_to_txn_transaction_array){tx, n};
    int rc = 0;
    d->req = gr_broker_client_send(d->conn, d->v->ops, ver, &req, 0, on_answer, d, &rc);
    free(tx);
    free(tp);
    free(idx);
    if (!d->req) {
        GR_WARN_RATELIMITED("transaction verification at broker %d not sent: %s", (int)d->broker_id,
                            strerror(-rc));
        return;
    }
    d->v->requests++;
    for (int32_t i = 0; i < n; i++) { /* the batch moves from the queue to the flight slots */
        q = d->head;
        d->head = q->next;
        if (!d->head) d->tail = NULL;
        q->prev = q->next = NULL;
        q->where = IN_FLIGHT;
        d->flight[i] = q;
    }
    d->queued -= n;
    d->flight_count = n;
}

static void on_state(void *ctx, struct gr_broker_client_conn *conn, bool ready)
{
    (void)conn;
    struct gr_txn_verifier_dest *d = ctx;
    d->ready = ready;
    if (ready) flush(d);
}

/* The destination for `broker_id`, made (and its connection opened) on first use; NULL with *rc else. */
static struct gr_txn_verifier_dest *dest_of(struct gr_txn_verifier *v, int32_t broker_id, int *rc)
{
    for (struct gr_txn_verifier_dest *d = v->dests; d; d = d->next)
        if (d->broker_id == broker_id) return d;
    struct gr_txn_verifier_dest *d = calloc(1, sizeof *d);
    if (!d) {
        *rc = -ENOMEM;
        return NULL;
    }
    d->v = v;
    d->broker_id = broker_id;
    const struct gr_msg_ops *apis[] = {v->ops};
    d->conn = gr_broker_client_open(v->bc, broker_id, GR_BROKER_CLIENT_VERIFY, 0, apis, 1, on_state, d, rc);
    if (!d->conn) {
        free(d);
        return NULL;
    }
    d->next = v->dests;
    v->dests = d;
    return d;
}

static void unqueue(struct gr_txn_verifier_dest *d, struct gr_txn_question *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        d->head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        d->tail = q->prev;
    q->prev = q->next = NULL;
    d->queued--;
}

int gr_txn_verifier_ask(struct gr_txn_verifier *v, int32_t broker_id, struct gr_txn_question *q)
{
    if (broker_id < 0 || q->dest || q->count < 1 || !q->parts) return -EINVAL;
    int rc = 0;
    struct gr_txn_verifier_dest *d = dest_of(v, broker_id, &rc);
    if (!d) return rc ? rc : -ENOMEM;
    struct gr_txn_question *old = d->head;
    while (old && !gr_str_eq(old->txn_id, q->txn_id))
        old = old->next;
    if (old && old->producer_epoch > q->producer_epoch) { /* addTxnData case 3: the new one is fenced */
        set_all(q, GR_ERR_INVALID_PRODUCER_EPOCH);
        return 1;
    }
    if (!old && d->queued >= GR_TXN_VERIFY_PENDING_MAX) return -ENOSPC;
    if (old) { /* cases 1 and 2: the queued one answers now (from the loop), the new one takes its place */
        unqueue(d, old);
        set_all(old, old->producer_epoch < q->producer_epoch ? GR_ERR_INVALID_PRODUCER_EPOCH
                                                             : GR_ERR_NETWORK_EXCEPTION);
        old->where = ANSWERED;
        old->next = v->answered;
        v->answered = old;
        ev_timer_start(v->loop, &v->later);
    }
    q->dest = d;
    q->where = QUEUED;
    q->next = NULL;
    q->prev = d->tail;
    if (d->tail)
        d->tail->next = q;
    else
        d->head = q;
    d->tail = q;
    d->queued++;
    flush(d);
    return 0;
}

void gr_txn_verifier_cancel(struct gr_txn_question *q)
{
    struct gr_txn_verifier_dest *d = q->dest;
    if (!d) return;
    q->dest = NULL;
    if (q->where == IN_FLIGHT) {
        for (int32_t i = 0; i < d->flight_count; i++)
            if (d->flight[i] == q) d->flight[i] = NULL; /* its answer is ignored */
    } else if (q->where == ANSWERED) {
        struct gr_txn_question **pp = &d->v->answered;
        while (*pp && *pp != q)
            pp = &(*pp)->next;
        if (*pp) *pp = q->next;
        q->next = NULL;
    } else {
        unqueue(d, q);
    }
    q->where = IDLE;
}
