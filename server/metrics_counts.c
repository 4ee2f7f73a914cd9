/*
 * metrics_counts.c: error counts per API, the Fetch split of requests_total and replication bytes
 * (server/metrics_counts.h).
 */
#include "server/metrics_counts.h"

#include <stdio.h>

#include "cluster/fetcher.h"
#include "protocol/errors.h"
#include "server/apis.h"
#include "server/broker.h"

/* The API's row in the API table, or -1 (not served, or past GR_COUNTS_APIS). */
static int api_row(int16_t api_key)
{
    int n;
    const struct gr_api *table = gr_api_table(&n);
    const struct gr_api *a = gr_api_find(api_key);
    if (!a) return -1;
    long row = a - table;
    return row >= 0 && row < n && row < GR_COUNTS_APIS ? (int)row : -1;
}

bool gr_metrics_counts_top(int16_t api_key, const void *resp)
{
    switch (api_key) {
    case GR_API_METADATA:
        return false;
    case GR_API_FIND_COORDINATOR:
        return ((const struct gr_find_coordinator_response *)resp)->coordinators.count <= 0;
    case GR_API_OFFSET_FETCH:
        return ((const struct gr_offset_fetch_response *)resp)->groups.count <= 0;
    case GR_API_ADD_PARTITIONS_TO_TXN:
        return ((const struct gr_add_partitions_to_txn_response *)resp)
                   ->results_by_topic_v3_and_below.count <= 0;
    default:
        return true;
    }
}

void gr_metrics_counts_response(struct gr_metrics_counts *c, int16_t api_key, const void *resp)
{
    int row = api_row(api_key);
    const struct gr_msg_ops *ops = gr_msg_ops_find(api_key, true);
    if (row < 0 || !resp || !ops || !ops->count_errors) return;
    ops->count_errors(resp, gr_metrics_counts_top(api_key, resp), c->errors[row], GR_COUNTS_ERROR_SLOTS);
}

/* The replica id of Fetch request `body` at `version` (v15+: in ReplicaState). */
static int32_t fetch_replica_id(const struct gr_fetch_request *body, int16_t version)
{
    return version >= 15 ? body->replica_state.replica_id : body->replica_id;
}

void gr_metrics_counts_request(struct gr_req *req)
{
    int16_t v = req->hdr.request_api_version;
    if (req->hdr.request_api_key != GR_API_FETCH || !req->body || v < 0 || v >= GR_COUNTS_VERSIONS) return;
    struct gr_metrics_counts *c = &req->broker->metrics.counts;
    if (fetch_replica_id(req->body, v) >= 0)
        c->fetch_follower[v]++;
    else
        c->fetch_consumer[v]++;
}

void gr_metrics_counts_answered(struct gr_req *req)
{
    struct gr_metrics_counts *c = &req->broker->metrics.counts;
    /* the response as it is sent: resp_ops names its API (an unsupported ApiVersions answers as v0) */
    int16_t key = req->resp_ops ? req->resp_ops->api_key : req->hdr.request_api_key;
    gr_metrics_counts_response(c, key, req->resp);
    if (key != GR_API_FETCH || !req->body || !req->resp) return;
    if (fetch_replica_id(req->body, req->hdr.request_api_version) < 0) return; /* a consumer's */
    const struct gr_fetch_response *resp = req->resp;
    for (int32_t i = 0; i < resp->responses.count; i++) {
        const struct gr_fetch_response_fetchable_topic_response *rt = &resp->responses.items[i];
        for (int32_t p = 0; p < rt->partitions.count; p++) {
            int32_t len = gr_records_len(rt->partitions.items[p].records);
            if (len > 0) c->replication_bytes_out += (uint64_t)len;
        }
    }
}

void gr_metrics_counts_closed(struct gr_req *req)
{
    if (req->hdr.request_api_key != GR_API_PRODUCE || !req->body || !req->resp) return;
    if (((const struct gr_produce_request *)req->body)->acks != 0) return;
    gr_metrics_counts_response(&req->broker->metrics.counts, GR_API_PRODUCE, req->resp);
}

bool gr_metrics_counts_produce_failed(int16_t err)
{
    switch (err) {
    case GR_ERR_NONE:
    case GR_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_ERR_NOT_LEADER_OR_FOLLOWER:
    case GR_ERR_MESSAGE_TOO_LARGE:
    case GR_ERR_RECORD_LIST_TOO_LARGE:
    case GR_ERR_CORRUPT_MESSAGE:
    case GR_ERR_KAFKA_STORAGE_ERROR:
        return false;
    default:
        return true;
    }
}

bool gr_metrics_counts_fetch_failed(int16_t err)
{
    switch (err) {
    case GR_ERR_NONE:
    case GR_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_ERR_NOT_LEADER_OR_FOLLOWER:
    case GR_ERR_UNKNOWN_LEADER_EPOCH:
    case GR_ERR_FENCED_LEADER_EPOCH:
    case GR_ERR_REPLICA_NOT_AVAILABLE:
    case GR_ERR_KAFKA_STORAGE_ERROR:
    case GR_ERR_INCONSISTENT_TOPIC_ID:
    case GR_ERR_OFFSET_OUT_OF_RANGE:
    case GR_ERR_UNKNOWN_TOPIC_ID:
        return false;
    default:
        return true;
    }
}

bool gr_metrics_counts_render(const struct gr_metrics_counts *c, const struct gr_fetcher_stats *fs,
                              struct gr_prom_buf *out)
{
    const char *en = "kafka_network_requestmetrics_errors_total";
    gr_prom_type(out, en, "counter");
    int n;
    const struct gr_api *apis = gr_api_table(&n);
    for (int row = 0; row < n && row < GR_COUNTS_APIS; row++)
        for (int s = 0; s < GR_COUNTS_ERROR_SLOTS; s++) {
            if (!c->errors[row][s]) continue; /* a series appears with its first count */
            struct gr_prom_label l[2] = {{"request", apis[row].name},
                                         {"error", gr_error_name((int16_t)(s - 1))}};
            gr_prom_sample_u64(out, en, l, 2, c->errors[row][s]);
        }
    const char *in = "kafka_server_brokertopicmetrics_replicationbytesin_total";
    gr_prom_type(out, in, "counter");
    gr_prom_sample_u64(out, in, NULL, 0, fs && fs->batches_bytes > 0 ? (uint64_t)fs->batches_bytes : 0);
    if (fs) { /* this broker's replica fetcher (cluster mode): its Fetch requests by KIP-227 session kind */
        const char *fr = "gregor_replica_fetcher_requests_total";
        gr_prom_type(out, fr, "counter");
        int64_t incr = fs->fetches_incremental, full = fs->fetches_sent - fs->fetches_incremental;
        struct gr_prom_label lf = {"kind", "full"}, li = {"kind", "incremental"};
        gr_prom_sample_u64(out, fr, &lf, 1, full > 0 ? (uint64_t)full : 0);
        gr_prom_sample_u64(out, fr, &li, 1, incr > 0 ? (uint64_t)incr : 0);
        const char *rs = "gregor_replica_fetcher_session_resets_total";
        gr_prom_type(out, rs, "counter");
        gr_prom_sample_u64(out, rs, NULL, 0, fs->session_resets > 0 ? (uint64_t)fs->session_resets : 0);
    }
    const char *ob = "kafka_server_brokertopicmetrics_replicationbytesout_total";
    gr_prom_type(out, ob, "counter");
    gr_prom_sample_u64(out, ob, NULL, 0, c->replication_bytes_out);
    return !out->failed;
}

void gr_metrics_counts_render_fetch_split(const struct gr_metrics_counts *c, struct gr_prom_buf *out)
{
    const char *rq = "kafka_network_requestmetrics_requests_total";
    for (int w = 0; w < 2; w++)
        for (int v = 0; v < GR_COUNTS_VERSIONS; v++) {
            uint64_t n = w ? c->fetch_follower[v] : c->fetch_consumer[v];
            if (!n) continue;
            char ver[8];
            snprintf(ver, sizeof ver, "%d", v);
            struct gr_prom_label l[2] = {{"request", w ? "FetchFollower" : "FetchConsumer"},
                                         {"version", ver}};
            gr_prom_sample_u64(out, rq, l, 2, n);
        }
}
