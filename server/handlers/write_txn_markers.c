/*
 * write_txn_markers.c: WriteTxnMarkers (key 27, v1-v2; Kafka 4 removed v0). A transaction coordinator
 * asks the leader of each partition of a finished transaction to write its COMMIT or ABORT marker
 * (KafkaApis.handleWriteTxnMarkersRequest). Per marker and partition:
 *   - topic or partition unknown here: UNKNOWN_TOPIC_OR_PARTITION; led elsewhere: NOT_LEADER_OR_FOLLOWER
 *     (server/route.h, as ReplicaManager's getPartitionOrError);
 *   - otherwise server/txns.h gr_txns_write_marker, the same path the coordinator's in-process rounds take:
 *     a data partition's control batch (producer epoch or coordinator epoch below the producer's entry:
 *     INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED; a producer id or epoch below 0:
 *     CORRUPT_MESSAGE), __consumer_offsets through the group coordinator (its not-ready errors answered
 *     NOT_LEADER_OR_FOLLOWER);
 *   - acks=-1: answered once the high watermark passes every marker written (gr_req_await_commits), or
 *     REQUEST_TIMED_OUT after GR_TXN_MARKER_TIMEOUT_MS (Kafka: the broker's request.timeout.ms).
 * Before any marker the request passes the append gate on its data partitions (gr_req_await_appendable,
 * partition/gate.c), as Produce does: a marker lands after the appends queued before it on its partition,
 * and an active file the fd cap closed is reopened on the I/O pool. Markers are written in request order.
 * The marker's TransactionVersion (v2, KIP-1228; 0 in v1) picks the partition's epoch rule
 * (partition/partition.h gr_partition_marker): version 2 markers must carry an epoch above the producer's.
 * Read next: server/txns.h, partition/partition.h (gr_partition_write_marker).
 * ACLs: CLUSTER_ACTION on the cluster (Kafka's inter-broker rule), else CLUSTER_AUTHORIZATION_FAILED on every
 * partition.
 */
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "coordinator/offsets_log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"
#include "server/txns.h"

/* How long the markers' acks=-1 wait lasts (ms): Kafka appends markers with request.timeout.ms as the
   timeout, whose broker default is 30 s. */
#define GR_TXN_MARKER_TIMEOUT_MS 30000

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

/* The distinct local logs of the data partitions the request names (the gate's list), in the arena. */
static int gate_logs(struct gr_req *req, int total, struct gr_log ***out)
{
    struct gr_write_txn_markers_request *body = req->body;
    struct gr_log **logs = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *logs);
    if (!logs) return -1;
    int n = 0;
    for (int32_t i = 0; i < body->markers.count; i++) {
        struct gr_write_txn_markers_request_writable_txn_marker *mk = &body->markers.items[i];
        for (int32_t t = 0; t < mk->topics.count; t++) {
            struct gr_write_txn_markers_request_writable_txn_marker_topic *mt = &mk->topics.items[t];
            const struct gr_image_topic *it = gr_route_topic(req->broker, mt->name);
            if (!it || strcmp(it->name, GR_OFFSETS_TOPIC) == 0) continue; /* the group coordinator's */
            for (int32_t p = 0; p < mt->partition_indexes.count && n < total; p++) {
                struct gr_route r;
                if (!gr_route_partition(req->broker, it, mt->partition_indexes.items[p], false, &r))
                    logs[n++] = r.log;
            }
        }
    }
    qsort(logs, (size_t)n, sizeof *logs, cmp_ptr);
    int d = 0;
    for (int i = 0; i < n; i++)
        if (d == 0 || logs[d - 1] != logs[i]) logs[d++] = logs[i];
    *out = logs;
    return d;
}

/* The acks=-1 wait of one partition ended in an error (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ...). */
static void marker_failed(struct gr_req *req, void *ctx, int16_t error_code)
{
    (void)req;
    ((struct gr_write_txn_markers_response_writable_txn_marker_partition_result *)ctx)->error_code =
        error_code;
}

/* Writes one partition's marker and notes its commit wait; returns the partition's error. */
static int16_t write_one(struct gr_req *req, const struct gr_image_topic *it, int32_t partition,
                         const struct gr_write_txn_markers_request_writable_txn_marker *mk,
                         struct gr_write_txn_markers_response_writable_txn_marker_partition_result *pr)
{
    struct gr_route r;
    int16_t err = gr_route_partition(req->broker, it, partition, false, &r);
    if (err) return err;
    struct gr_partition_marker m = {.producer_id = mk->producer_id,
                                    .producer_epoch = mk->producer_epoch,
                                    .coordinator_epoch = mk->coordinator_epoch,
                                    .commit = mk->transaction_result,
                                    .now_ms = gr_time_wall_ms(),
                                    .transaction_version = mk->transaction_version};
    int64_t end = -1;
    err = gr_txns_write_marker(req->broker, r.log, &m, &end);
    if (!err && end >= 0) gr_req_commits_add(req, r.log, end, pr);
    return err;
}

/* The request's partitions are appendable: every marker written in order, then the acks=-1 wait. */
static enum gr_handler_rc markers_run(struct gr_req *req)
{
    struct gr_write_txn_markers_request *body = req->body;
    struct gr_write_txn_markers_response *resp = req->resp;
    for (int32_t i = 0; i < body->markers.count; i++) {
        struct gr_write_txn_markers_request_writable_txn_marker *mk = &body->markers.items[i];
        struct gr_write_txn_markers_response_writable_txn_marker_result *mr = &resp->markers.items[i];
        for (int32_t t = 0; t < mk->topics.count; t++) {
            struct gr_write_txn_markers_request_writable_txn_marker_topic *mt = &mk->topics.items[t];
            struct gr_write_txn_markers_response_writable_txn_marker_topic_result *tr = &mr->topics.items[t];
            const struct gr_image_topic *it = gr_route_topic(req->broker, mt->name);
            for (int32_t p = 0; p < mt->partition_indexes.count; p++) {
                struct gr_write_txn_markers_response_writable_txn_marker_partition_result *pr =
                    &tr->partitions.items[p];
                pr->error_code = write_one(req, it, pr->partition_index, mk, pr);
            }
        }
    }
    return gr_req_await_commits(req, GR_TXN_MARKER_TIMEOUT_MS, marker_failed);
}

/* The response's shape (one result per marker, topic and partition, as asked); returns the partitions. */
static int alloc_response(struct gr_req *req)
{
    struct gr_write_txn_markers_request *body = req->body;
    struct gr_write_txn_markers_response *resp = req->resp;
    int32_t nm = body->markers.count > 0 ? body->markers.count : 0;
    resp->markers.items = gr_arena_calloc(&req->arena, (size_t)nm + 1, sizeof *resp->markers.items);
    if (!resp->markers.items) return -1;
    resp->markers.count = nm;
    int total = 0;
    for (int32_t i = 0; i < nm; i++) {
        struct gr_write_txn_markers_request_writable_txn_marker *mk = &body->markers.items[i];
        struct gr_write_txn_markers_response_writable_txn_marker_result *mr = &resp->markers.items[i];
        gr_write_txn_markers_response_writable_txn_marker_result_init(mr);
        mr->producer_id = mk->producer_id;
        int32_t nt = mk->topics.count > 0 ? mk->topics.count : 0;
        mr->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *mr->topics.items);
        if (!mr->topics.items) return -1;
        mr->topics.count = nt;
        for (int32_t t = 0; t < nt; t++) {
            struct gr_write_txn_markers_request_writable_txn_marker_topic *mt = &mk->topics.items[t];
            struct gr_write_txn_markers_response_writable_txn_marker_topic_result *tr = &mr->topics.items[t];
            gr_write_txn_markers_response_writable_txn_marker_topic_result_init(tr);
            tr->name = mt->name;
            int32_t np = mt->partition_indexes.count > 0 ? mt->partition_indexes.count : 0;
            tr->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *tr->partitions.items);
            if (!tr->partitions.items) return -1;
            tr->partitions.count = np;
            for (int32_t p = 0; p < np; p++) {
                gr_write_txn_markers_response_writable_txn_marker_partition_result_init(
                    &tr->partitions.items[p]);
                tr->partitions.items[p].partition_index = mt->partition_indexes.items[p];
            }
            total += np;
        }
    }
    return total;
}

/* KafkaApis.handleWriteTxnMarkersRequest on one node. */
enum gr_handler_rc gr_handle_write_txn_markers(struct gr_req *req)
{
    int total = alloc_response(req);
    if (total < 0 || !gr_req_commits_new(req, total)) return GR_HANDLER_CLOSE;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION)) { /* KafkaApis: an inter-broker API */
        struct gr_write_txn_markers_response *resp = req->resp;
        for (int32_t i = 0; i < resp->markers.count; i++)
            for (int32_t t = 0; t < resp->markers.items[i].topics.count; t++)
                for (int32_t p = 0; p < resp->markers.items[i].topics.items[t].partitions.count; p++)
                    resp->markers.items[i].topics.items[t].partitions.items[p].error_code =
                        GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    if (!req->broker->iopool) return markers_run(req);
    struct gr_log **logs = NULL;
    int n = gate_logs(req, total, &logs);
    if (n < 0) return GR_HANDLER_CLOSE;
    if (n == 0) return markers_run(req); /* no data partition here: nothing to gate */
    return gr_req_await_appendable(req, logs, n, markers_run);
}
