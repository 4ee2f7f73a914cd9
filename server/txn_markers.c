/*
 * txn_markers.c: transaction markers to other brokers (rules in server/txn_markers.h; Kafka's
 * TransactionMarkerChannelManager, one queue per destination broker).
 *
 * A destination (struct gr_txn_markers_dest) is made on the first marker for its broker and kept: its
 * connection (purpose GR_BROKER_CLIENT_TXN_MARKERS, index 0, WriteTxnMarkers required) reconnects by itself
 * (cluster/broker_client.h). Invariants: a marker is on exactly one of its destination's queue (queued) or
 * flight slots (in_flight), or idle (dest NULL); at most one request per destination is in flight, its
 * markers in `flight` in request order; while its answer is handed out (`answering`) new markers only
 * queue, and the next request goes out after the last done call.
 * Read next: server/txns.c (marker_send, the retry rules).
 */
#include "server/txn_markers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/broker_client.h"
#include "common/limits.h"
#include "common/log.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"

/* WriteTxnMarkers' versions: v1 at least; v2 (KIP-1228) adds each marker's TransactionVersion, sent when
   the leader serves it (Kafka's builder always fills it; the ignorable field is dropped at v1). */
#define TXN_MARKERS_VERSION 1
#define TXN_MARKERS_VERSION_MAX 2

struct gr_txn_markers_dest {
    struct gr_txn_markers *m;
    int32_t broker_id;
    struct gr_broker_client_conn *conn;
    bool ready, answering;
    struct gr_txn_marker_send *head, *tail; /* queued, in arrival order */
    int32_t queued;
    struct gr_txn_marker_send *flight[GR_TXN_MARKERS_BATCH_MAX]; /* NULL: cancelled while in flight */
    int32_t flight_count;
    struct gr_broker_client_req *req;
    struct gr_txn_markers_dest *next;
};

struct gr_txn_markers {
    struct ev_loop *loop;
    struct gr_broker_client *bc;
    const struct gr_msg_ops *ops; /* the codec's write_txn_markers_request row */
    struct gr_txn_markers_dest *dests;
};

static const struct gr_msg_ops *request_row(const char *name)
{
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!strcmp(gr_msg_ops_table[i].name, name)) return &gr_msg_ops_table[i];
    return NULL;
}

struct gr_txn_markers *gr_txn_markers_new(struct ev_loop *loop, struct gr_broker_client *bc)
{
    struct gr_txn_markers *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->loop = loop;
    m->bc = bc;
    m->ops = request_row("write_txn_markers_request");
    if (!m->ops) {
        free(m);
        return NULL;
    }
    return m;
}

void gr_txn_markers_free(struct gr_txn_markers *m)
{
    if (!m) return;
    while (m->dests) {
        struct gr_txn_markers_dest *d = m->dests;
        m->dests = d->next;
        for (struct gr_txn_marker_send *s = d->head; s; s = s->next)
            s->dest = NULL;
        for (int32_t i = 0; i < d->flight_count; i++)
            if (d->flight[i]) d->flight[i]->dest = NULL;
        if (d->conn) gr_broker_client_close(d->conn); /* its request is dropped without a callback */
        free(d);
    }
    free(m);
}

int32_t gr_txn_markers_pending(const struct gr_txn_markers *m)
{
    int32_t n = 0;
    for (const struct gr_txn_markers_dest *d = m->dests; d; d = d->next) {
        n += d->queued;
        for (int32_t i = 0; i < d->flight_count; i++)
            n += d->flight[i] != NULL;
    }
    return n;
}

/* The error the answer gives `s`'s partition; NOT_LEADER_OR_FOLLOWER (retried) when it names it nowhere. */
static int16_t answer_for(const struct gr_write_txn_markers_response *resp,
                          const struct gr_txn_marker_send *s)
{
    for (int32_t i = 0; i < resp->markers.count; i++) {
        const struct gr_write_txn_markers_response_writable_txn_marker_result *mr = &resp->markers.items[i];
        if (mr->producer_id != s->producer_id) continue;
        for (int32_t j = 0; j < mr->topics.count; j++) {
            const struct gr_write_txn_markers_response_writable_txn_marker_topic_result *tr =
                &mr->topics.items[j];
            if (!gr_str_eq_c(tr->name, s->topic)) continue;
            for (int32_t k = 0; k < tr->partitions.count; k++)
                if (tr->partitions.items[k].partition_index == s->partition)
                    return tr->partitions.items[k].error_code;
        }
    }
    return GR_ERR_NOT_LEADER_OR_FOLLOWER;
}

static void flush(struct gr_txn_markers_dest *d);

/* The request's end: every marker of the batch gets its error (see the header), then the next batch goes. */
static void on_answer(void *ctx, enum gr_broker_client_status status, const void *resp, int16_t version,
                      struct gr_broker_client_answer *ans)
{
    (void)version;
    (void)ans;
    struct gr_txn_markers_dest *d = ctx;
    d->req = NULL;
    d->answering = true;
    for (int32_t i = 0; i < d->flight_count; i++) {
        struct gr_txn_marker_send *s = d->flight[i];
        if (!s) continue; /* cancelled */
        d->flight[i] = NULL;
        s->dest = NULL;
        s->in_flight = false;
        int16_t err = status == GR_BROKER_CLIENT_OK        ? answer_for(resp, s)
                      : status == GR_BROKER_CLIENT_TIMEOUT ? GR_ERR_REQUEST_TIMED_OUT
                                                           : GR_ERR_NOT_LEADER_OR_FOLLOWER;
        if (err && err != GR_ERR_NOT_LEADER_OR_FOLLOWER && err != GR_ERR_NOT_ENOUGH_REPLICAS &&
            err != GR_ERR_REQUEST_TIMED_OUT)
            GR_WARN_RATELIMITED("%s-%d: transaction marker of producer id %lld at broker %d: error %d",
                                s->topic, (int)s->partition, (long long)s->producer_id, (int)d->broker_id,
                                (int)err);
        s->done(s, err);
    }
    d->flight_count = 0;
    d->answering = false;
    flush(d);
}

/* Sends the queued markers (at most GR_TXN_MARKERS_BATCH_MAX) when the connection is ready and nothing is in
 * flight. Out of memory or refused by the client: they stay queued for the next ready or answer. */
static void flush(struct gr_txn_markers_dest *d)
{
    if (!d->ready || d->req || d->answering || !d->head) return;
    int16_t v = gr_broker_client_version(d->conn, d->m->ops);
    if (v < TXN_MARKERS_VERSION) return; /* the exchange required it: not ready yet */
    int32_t n = d->queued < GR_TXN_MARKERS_BATCH_MAX ? d->queued : GR_TXN_MARKERS_BATCH_MAX;
    struct gr_write_txn_markers_request_writable_txn_marker *mk = calloc((size_t)n, sizeof *mk);
    struct gr_write_txn_markers_request_writable_txn_marker_topic *tp = calloc((size_t)n, sizeof *tp);
    int32_t *parts = calloc((size_t)n, sizeof *parts);
    if (!mk || !tp || !parts) {
        free(mk);
        free(tp);
        free(parts);
        return;
    }
    struct gr_txn_marker_send *s = d->head;
    for (int32_t i = 0; i < n; i++, s = s->next) {
        parts[i] = s->partition;
        gr_write_txn_markers_request_writable_txn_marker_topic_init(&tp[i]);
        tp[i].name = gr_str_c(s->topic);
        tp[i].partition_indexes = (struct gr_int32_array){&parts[i], 1};
        gr_write_txn_markers_request_writable_txn_marker_init(&mk[i]);
        mk[i].producer_id = s->producer_id;
        mk[i].producer_epoch = s->producer_epoch;
        mk[i].transaction_result = s->commit;
        mk[i].coordinator_epoch = s->coordinator_epoch;
        mk[i].transaction_version = (int8_t)s->transaction_version;
        mk[i].topics = (struct gr_write_txn_markers_request_writable_txn_marker_topic_array){&tp[i], 1};
    }
    struct gr_write_txn_markers_request req;
    gr_write_txn_markers_request_init(&req);
    req.markers = (struct gr_write_txn_markers_request_writable_txn_marker_array){mk, n};
    int rc = 0;
    d->req =
        gr_broker_client_send(d->conn, d->m->ops, v < TXN_MARKERS_VERSION_MAX ? v : TXN_MARKERS_VERSION_MAX,
                              &req, 0, on_answer, d, &rc);
    free(mk);
    free(tp);
    free(parts);
    if (!d->req) {
        GR_WARN_RATELIMITED("transaction markers to broker %d not sent: %s", (int)d->broker_id,
                            strerror(-rc));
        return;
    }
    for (int32_t i = 0; i < n; i++) { /* the batch moves from the queue to the flight slots */
        s = d->head;
        d->head = s->next;
        if (!d->head) d->tail = NULL;
        s->prev = s->next = NULL;
        s->in_flight = true;
        d->flight[i] = s;
    }
    d->queued -= n;
    d->flight_count = n;
}

static void on_state(void *ctx, struct gr_broker_client_conn *conn, bool ready)
{
    (void)conn;
    struct gr_txn_markers_dest *d = ctx;
    d->ready = ready;
    if (ready) flush(d);
}

/* The destination for `broker_id`, made (and its connection opened) on first use; NULL out of memory. */
static struct gr_txn_markers_dest *dest_of(struct gr_txn_markers *m, int32_t broker_id, int *rc)
{
    for (struct gr_txn_markers_dest *d = m->dests; d; d = d->next)
        if (d->broker_id == broker_id) return d;
    struct gr_txn_markers_dest *d = calloc(1, sizeof *d);
    if (!d) {
        *rc = -ENOMEM;
        return NULL;
    }
    d->m = m;
    d->broker_id = broker_id;
    const struct gr_msg_ops *apis[] = {m->ops};
    d->conn =
        gr_broker_client_open(m->bc, broker_id, GR_BROKER_CLIENT_TXN_MARKERS, 0, apis, 1, on_state, d, rc);
    if (!d->conn) {
        free(d);
        return NULL;
    }
    d->next = m->dests;
    m->dests = d;
    return d;
}

int gr_txn_markers_send(struct gr_txn_markers *m, int32_t broker_id, struct gr_txn_marker_send *s)
{
    if (broker_id < 0 || s->dest) return -EINVAL;
    int rc = 0;
    struct gr_txn_markers_dest *d = dest_of(m, broker_id, &rc);
    if (!d) return rc ? rc : -ENOMEM;
    if (d->queued >= GR_TXN_MARKERS_QUEUED_MAX) return -ENOSPC;
    s->dest = d;
    s->in_flight = false;
    s->next = NULL;
    s->prev = d->tail;
    if (d->tail)
        d->tail->next = s;
    else
        d->head = s;
    d->tail = s;
    d->queued++;
    flush(d);
    return 0;
}

void gr_txn_markers_cancel(struct gr_txn_marker_send *s)
{
    struct gr_txn_markers_dest *d = s->dest;
    if (!d) return;
    s->dest = NULL;
    if (s->in_flight) {
        s->in_flight = false;
        for (int32_t i = 0; i < d->flight_count; i++)
            if (d->flight[i] == s) d->flight[i] = NULL; /* its answer is ignored */
        return;
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        d->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        d->tail = s->prev;
    s->prev = s->next = NULL;
    d->queued--;
}
