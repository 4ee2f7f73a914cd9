/*
 * produce.c: Produce (key 0), served v3-v13 (advertised from v0; v0-v2 close the connection in dispatch).
 *
 * Per partition: gr_partition_produce (partition/produce.c) validates the batch with the topic's typed
 * policy (Kafka's LogValidator: framing, CRC, sizes, timestamps, keys, codecs), recompresses it to the
 * topic's compression.type and appends it; this file turns its plain result into the response (record_errors
 * for refused records, KIP-467; shaping: produce_request.c). Durability, named:
 *   acks=0   accepted: no response at all; any partition error closes the connection (as Kafka does)
 *   acks=1   written: answered once the batch is in the page cache
 *   acks=-1  committed: once the visible offset (a replicated leader's high watermark) passes the batch
 *            (gregor.acks.all.fsync, the default: a group-commit fdatasync covers it), or REQUEST_TIMED_OUT
 *            after timeout_ms (gr_req_await_commits); NOT_ENOUGH_REPLICAS(_AFTER_APPEND): partition/produce.c
 * Idempotence: storage judges each batch with a producer id (storage/producer_state.h) as it appends it;
 * OUT_OF_ORDER_SEQUENCE_NUMBER and INVALID_PRODUCER_EPOCH are per-partition errors, and a duplicate of one
 * of the producer's last 5 batches is answered with the original's offsets once the ORIGINAL batch is as
 * durable as acks asks (a retry is never acknowledged before the batch it repeats).
 * Transactions: produce_request.h gr_produce_txn_refused / _verify (KIP-890); control batches:
 * INVALID_RECORD. Before its appends a Produce waits (named waits, server/request.c): in cluster mode until
 * the local logs of the partitions led here are made (server/logwait.h; at the timeout those answer
 * REQUEST_TIMED_OUT), for a remote transaction coordinator's verdict, then until every partition is
 * appendable (partition/gate.c: closed files reopened on the I/O pool; KAFKA_STORAGE_ERROR if not). Out of
 * request memory, the connection is closed first. Partitions led elsewhere (route.h) get
 * NOT_LEADER_OR_FOLLOWER, from v10 with CurrentLeader and NodeEndpoints (KIP-951). Next: fetch.c.
 * ACLs (WRITE on each topic, before existence; on the transactional id): handlers/authorize.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "partition/partition.h"
#include "server/handlers/handlers.h"
#include "server/handlers/produce_request.h"
#include "server/route.h"

struct produce_state {
    struct gr_log **logs; /* the request's partitions that exist (arena), for the append gate */
    int nlogs, total;
    bool txn_refused; /* every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no appends) */
    bool *denied;     /* per topic_data entry: no WRITE on the topic (TOPIC_AUTHORIZATION_FAILED) */
    bool asked;       /* gr_produce_txn_remote ran (a remote coordinator's verification, at most once) */
};

/* The acks=-1 wait ended in an error: as Kafka's DelayedProduce, only the error changes, not the offsets. */
static void commit_failed(struct gr_req *req, void *pr, int16_t error_code)
{
    (void)req;
    ((struct gr_produce_response_partition_produce_response *)pr)->error_code = error_code;
}

/* Validates and appends one partition's records (gr_partition_produce) and fills `pr`. Returns the appended
 * log (and in *end_offset what must be committed before the answer) or NULL. */
static struct gr_log *produce_partition(struct gr_req *req, const struct gr_image_topic *it,
                                        int32_t partition, struct gr_bytes records,
                                        struct gr_produce_response_partition_produce_response *pr,
                                        int64_t *end_offset)
{
    struct gr_route route;
    int16_t rc = gr_route_partition(req->broker, it, partition, req->hdr.request_api_version >= 13, &route);
    if (rc) { /* led here, log not made by the end of the wait (server/logwait.h): timed out */
        if (route.pending && gr_req_logs_expired(req)) rc = GR_ERR_REQUEST_TIMED_OUT;
        gr_metrics_produce_refused(&req->broker->metrics, it, rc); /* TotalProduceRequests, as Kafka */
        gr_produce_partition_error(pr, rc, NULL);
        gr_route_produce_leader(req, pr, &route);
        return NULL;
    }
    struct gr_log *log = route.log;
    struct gr_topic *t = route.topic;
    struct gr_produce_args args = {.records = (uint8_t *)records.ptr, /* the request buffer: ours to patch */
                                   .records_len = records.len,
                                   .api_version = req->hdr.request_api_version,
                                   .now_ms = gr_time_wall_ms(),
                                   .require_open = req->broker->iopool != NULL,
                                   .acks = ((struct gr_produce_request *)req->body)->acks};
    if (gr_produce_txn_verify(req, log, it->name, partition, records, pr, &args) < 0) return NULL;
    struct gr_produce_result r;
    int16_t err = gr_partition_produce(gr_broker_partition(req->broker, log), gr_topic_policy(t), &args,
                                       &req->arena, &r);
    gr_produce_fill_partition(&r, pr, &req->arena);
    gr_metrics_appended(&req->broker->metrics, it, &r, (size_t)records.len); /* BrokerTopicMetrics */
    *end_offset = r.end_offset;
    return err ? NULL : log;
}

/* Validates and appends every partition, then answers or parks for durability. */
static enum gr_handler_rc produce_run(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    struct gr_produce_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    bool bad_acks = body->acks != 0 && body->acks != 1 && body->acks != -1;
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    struct produce_state *st = req->hstate;
    if (!gr_produce_response_alloc(req->body, req->resp, &req->arena))
        return GR_HANDLER_CLOSE; /* before any append: nothing half done */
    bool any_error = false;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        struct gr_produce_response_topic_produce_response *tr = &resp->responses.items[i];
        tr->name = td->name;
        tr->topic_id = td->topic_id;
        const struct gr_image_topic *it = gr_route_topic_by(b, v >= 13, td->name, td->topic_id.b);
        int16_t topic_err = GR_ERR_NONE;
        if (!it)
            topic_err = v >= 13 ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        else if (gr_topic_is_internal(it->name)) {
            /* ReplicaManager.appendToLocalLog: no client appends to an internal topic (no message) */
            topic_err = GR_ERR_INVALID_TOPIC_EXCEPTION;
        }
        if (bad_acks) topic_err = GR_ERR_INVALID_REQUIRED_ACKS;
        if (st->txn_refused || st->denied[i]) /* KafkaApis checks WRITE before existence */
            topic_err = st->txn_refused ? GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                                        : GR_ERR_TOPIC_AUTHORIZATION_FAILED;
        int32_t np = tr->partition_responses.count;
        for (int32_t p = 0; p < np; p++) {
            struct gr_produce_request_partition_produce_data *pd = &td->partition_data.items[p];
            struct gr_produce_response_partition_produce_response *pr = &tr->partition_responses.items[p];
            gr_produce_response_partition_produce_response_init(pr);
            pr->index = pd->index;
            if (topic_err) {
                gr_metrics_produce_refused(&b->metrics, it, topic_err); /* TotalProduceRequests, as Kafka */
                gr_produce_partition_error(pr, topic_err, NULL);
                any_error = true;
                continue;
            }
            int64_t end_offset = -1;
            struct gr_log *log = produce_partition(req, it, pd->index, pd->records.mem, pr, &end_offset);
            if (!log) {
                any_error = true;
                continue;
            }
            gr_req_commits_add(req, log, end_offset, pr);
        }
    }
    if (body->acks == 0) return any_error ? GR_HANDLER_CLOSE : GR_HANDLER_NO_RESPONSE;
    if (any_error) gr_route_produce_endpoints(req);
    if (body->acks == -1)
        return gr_req_await_commits(req, gr_req_logs_left_ms(req, body->timeout_ms), commit_failed);
    return GR_HANDLER_DONE;
}

/* The request's partitions that exist, found as produce_run finds them (distinct: merge_duplicates ran), for
   the append gate; those led here whose log is not made yet are noted for the log wait. Returns false when
   out of memory. */
static bool collect_logs(struct gr_req *req, struct produce_state *st, int total)
{
    struct gr_produce_request *body = req->body;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    st->nlogs = 0;
    if (!st->logs && !(st->logs = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->logs)))
        return false;
    for (int32_t i = 0; i < body->topic_data.count; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        const struct gr_image_topic *it = gr_route_topic_by(b, v >= 13, td->name, td->topic_id.b);
        for (int32_t p = 0; it && p < td->partition_data.count; p++) {
            struct gr_route r;
            int32_t idx = td->partition_data.items[p].index;
            if (!gr_route_partition(b, it, idx, false, &r) && st->nlogs < total)
                st->logs[st->nlogs++] = r.log;
            else if (r.pending)
                gr_req_logs_note(req, it->id, idx);
        }
    }
    return true;
}

/* Waits until the logs led here are made (server/logwait.h: at most timeout_ms), for a remote coordinator's
   verdict (once), until appendable (with an I/O pool), then appends. Run again after each wait. */
static enum gr_handler_rc produce_gated(struct gr_req *req)
{
    struct produce_state *st = req->hstate;
    if (!collect_logs(req, st, st->total)) return GR_HANDLER_CLOSE;
    req->before_append = gr_req_logs_waiting(req); /* then its connection's later Produces wait (net.c) */
    if (req->before_append)
        return gr_req_await_logs(req, ((struct gr_produce_request *)req->body)->timeout_ms, produce_gated);
    enum gr_handler_rc rc;
    if (!st->asked && (st->asked = true) && gr_produce_txn_remote(req, produce_gated, &rc)) return rc;
    if (!req->broker->iopool) return produce_run(req);
    return gr_req_await_appendable(req, st->logs, st->nlogs, produce_run);
}

enum gr_handler_rc gr_handle_produce(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    if (!gr_produce_merge_duplicates(body, req->hdr.request_api_version >= 13, &req->arena))
        return GR_HANDLER_CLOSE; /* before any append: nothing half done */
    int total = gr_produce_request_partitions(body);
    struct produce_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
    if (!st || !gr_req_commits_new(req, total)) return GR_HANDLER_CLOSE;
    req->hstate = st;
    if (!(st->denied = gr_produce_topics_denied(req, &st->txn_refused))) return GR_HANDLER_CLOSE;
    bool bad_acks = body->acks != 0 && body->acks != 1 && body->acks != -1;
    if (bad_acks || st->txn_refused) return produce_run(req); /* no appends */
    st->total = total;
    return produce_gated(req);
}
