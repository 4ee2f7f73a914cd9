/*
 * dispatch.c: a request frame's decoding and routing: its header, its API row, its body, then its handler.
 *
 * The API table (server/apis.def, server/apis.c) drives both dispatch and the ApiVersions response: an API
 * is advertised only when it has a handler. The advertised minimum differs from the served minimum only for
 * Produce, advertised from v0 as Kafka 4.x does (librdkafka 2.0.2 only compresses when v0 is in range) and
 * served from v3; any request outside the served range closes the connection, except ApiVersions, which is
 * answered as v0 with UNSUPPORTED_VERSION and its own entry (KIP-511). A request that does not decode closes
 * the connection. An API marked needs_groups first has the group coordinator's binding (server/groups.c)
 * start the coordinator (and FindCoordinator for transactions has server/txns.c's create
 * __transaction_state); dispatch calls a handler only through its table row (gr_req_run). Everything after
 * (parking, the deadline, finishing, encoding, freeing) is server/request.c; dispatch calls no connection
 * code (it closes and names the peer through request.c's sink). Which requests may run before the ones ahead
 * of them on their connection are answered (Produce only) is decided here too (gr_dispatch_runs_ahead).
 * Read next: server/apis.def, server/request.c, server/handlers/handlers.h.
 */
#include <string.h>

#include "common/log.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "server/groups.h"
#include "server/txns.h"

/* KIP-511: ApiVersions at a version we don't know gets a v0 response with UNSUPPORTED_VERSION listing the
 * ApiVersions entry, so the client can retry with a version we serve. */
static void answer_api_versions_unsupported(struct gr_req *req, const struct gr_api *api)
{
    req->resp_ops = gr_msg_ops_find(GR_API_API_VERSIONS, true);
    req->hdr.request_api_version = 0;
    struct gr_api_versions_response *resp = gr_arena_alloc(&req->arena, sizeof *resp);
    gr_api_versions_response_init(resp);
    resp->error_code = GR_ERR_UNSUPPORTED_VERSION;
    resp->api_keys.items = gr_arena_alloc(&req->arena, sizeof *resp->api_keys.items);
    gr_api_versions_response_api_version_init(&resp->api_keys.items[0]);
    resp->api_keys.items[0].api_key = GR_API_API_VERSIONS;
    resp->api_keys.items[0].min_version = api->advertised_min;
    resp->api_keys.items[0].max_version = api->served_max;
    resp->api_keys.count = 1;
    req->resp = resp;
    gr_req_finish(req);
}

bool gr_dispatch_runs_ahead(const uint8_t *frame, size_t frame_len)
{
    int16_t key, version;
    int32_t corr;
    if (gr_request_header_peek(frame, frame_len, &key, &version, &corr)) return true; /* closes it at once */
    return key == GR_API_PRODUCE;
}

void gr_dispatch(struct gr_req *req)
{
    int16_t key, version;
    int32_t corr;
    gr_reqtime_started(req);
    gr_request_header_peek(req->frame, req->frame_len, &key, &version, &corr);
    req->hdr.request_api_key = key;
    req->hdr.request_api_version = version;
    req->hdr.correlation_id = corr;
    const struct gr_api *api = gr_api_find(key);
    const char *peer = gr_req_peer(req);
    if (!api) {
        GR_WARN_RATELIMITED("connection %s: unsupported api key %d, closing", peer, key);
        req->done = req->no_response = true;
        gr_req_close(req, "unknown api key");
        return;
    }
    req->api = api;
    if (version < api->served_min || version > api->served_max) {
        if (key == GR_API_API_VERSIONS && version > api->served_max) {
            answer_api_versions_unsupported(req, api);
            return;
        }
        GR_WARN_RATELIMITED("connection %s: %s v%d is not served (v%d-%d), closing", peer, api->name, version,
                            api->served_min, api->served_max);
        req->done = req->no_response = true;
        gr_req_close(req, "unsupported version");
        return;
    }
    gr_metrics_request(&req->broker->metrics, key, version); /* RequestMetrics RequestsPerSec */
    req->req_ops = gr_msg_ops_find(key, false);
    req->resp_ops = gr_msg_ops_find(key, true);
    struct gr_rd rd;
    gr_rd_init(&rd, req->frame, req->frame_len, &req->arena);
    int err = gr_request_header_decode(&rd, gr_request_header_version(version, req->req_ops->flexible_min),
                                       &req->hdr);
    req->body = gr_arena_alloc(&req->arena, req->req_ops->struct_bytes);
    req->resp = gr_arena_alloc(&req->arena, req->resp_ops->struct_bytes);
    if (!err && req->body && req->resp) err = req->req_ops->decode(&rd, version, req->body);
    if (err || !req->body || !req->resp) {
        GR_WARN_RATELIMITED("connection %s: malformed %s v%d request (error %d), closing", peer, api->name,
                            version, err);
        req->done = req->no_response = true;
        gr_req_close(req, "malformed request");
        return;
    }
    req->resp_ops->init(req->resp);
    gr_metrics_counts_request(req); /* FetchConsumer / FetchFollower (server/metrics_counts.h) */
    /* first transaction coordinator lookup (FindCoordinator key type 1): the request waits while
       __transaction_state is created on the I/O pool (server/txns.c) */
    if (gr_txns_defer(req)) return;
    /* first group use: the request waits while __consumer_offsets is created on the I/O pool */
    if (!req->broker->coord && api->needs_groups && gr_groups_defer(req)) return;
    gr_req_run(req);
}
