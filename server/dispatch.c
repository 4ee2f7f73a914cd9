/*
 * dispatch.c: request decoding, response encoding and the request lifecycle.
 *
 * The API table (server/apis.def, server/apis.c) drives both dispatch and the ApiVersions response: an API
 * is advertised only when it has a handler. The advertised minimum differs from the served minimum only for
 * Produce, advertised from v0 as Kafka 4.x does (librdkafka 2.0.2 only compresses when v0 is in range) and
 * served from v3; any request outside the served range closes the connection, except ApiVersions, which is
 * answered as v0 with UNSUPPORTED_VERSION and its own entry (KIP-511). A request that does not decode closes
 * the connection. An API marked needs_groups first has the group coordinator's binding (server/groups.c)
 * start the coordinator; dispatch calls a handler only through its table row.
 * Read next: server/apis.def, server/handlers/handlers.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "server/groups.h"

/* ---- output chain: memory chunks and the file ranges of file-kind records fields ---- */

int gr_req_own_slice(struct gr_req *req, const struct gr_log_slice *slice)
{
    struct gr_req_slice *s = gr_arena_alloc(&req->arena, sizeof *s);
    if (!s) return -ENOMEM;
    s->slice = *slice;
    s->next = req->slices;
    req->slices = s;
    return 0;
}

/* Encodes the response into out_mem and the chunk list: the writer cuts the memory around each file-kind
 * records field (protocol/wire.h), so the chain is memory, file range, memory, ... in wire order. */
static void encode_response(struct gr_req *req)
{
    int16_t v = req->hdr.request_api_version;
    int16_t hv = gr_response_header_version(req->hdr.request_api_key, v, req->resp_ops->flexible_min);
    size_t body = req->resp_ops->size(req->resp, v);
    size_t total = gr_response_header_size(hv) + body;
    int ranges = 0;
    size_t file_bytes = req->resp_ops->file_bytes ? req->resp_ops->file_bytes(req->resp, v, &ranges) : 0;
    size_t mem = 4 + total - file_bytes;
    req->out_mem = malloc(mem);
    req->out_mem_bytes = mem;
    req->chunks = gr_arena_calloc(&req->arena, (size_t)(2 * ranges + 1), sizeof *req->chunks);
    if (!req->out_mem || !req->chunks) {
        GR_ERROR("out of memory encoding a %zu-byte response", total);
        req->no_response = true;
        if (req->conn) gr_conn_close(req->conn, "out of memory");
        return;
    }
    struct gr_wr wr;
    struct gr_chunks chunks;
    gr_wr_init(&wr, req->out_mem, mem);
    gr_wr_chunks_begin(&wr, &chunks, req->chunks, 2 * ranges + 1);
    gr_wr_int32(&wr, (int32_t)total);
    gr_response_header_encode(&wr, hv, req->hdr.correlation_id);
    req->resp_ops->encode(&wr, req->resp, v);
    req->chunk_count = gr_wr_chunks_end(&wr);
    if ((size_t)(wr.p - req->out_mem) != mem) {
        GR_ERROR("%s v%d: encoded %zu bytes, size() said %zu", req->api->name, v,
                 (size_t)(wr.p - req->out_mem), mem);
        abort();
    }
}

void gr_req_unpark(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    if (!req->parked) return;
    if (req->wait_prev)
        req->wait_prev->wait_next = req->wait_next;
    else
        b->parked_head = req->wait_next;
    if (req->wait_next) req->wait_next->wait_prev = req->wait_prev;
    req->wait_prev = req->wait_next = NULL;
    req->parked = false;
    b->parked_count--;
    for (struct gr_req_wait *rw = req->waits; rw; rw = rw->next)
        gr_partition_wait_cancel(&rw->w);
    req->waits = NULL;
    ev_timer_stop(b->loop, &req->deadline_w);
}

void gr_req_complete(struct gr_req *req, enum gr_handler_rc rc)
{
    switch (rc) {
    case GR_HANDLER_DONE:
        gr_req_finish(req);
        break;
    case GR_HANDLER_WAIT:
        break;
    case GR_HANDLER_NO_RESPONSE:
        gr_req_finish_silent(req);
        break;
    case GR_HANDLER_CLOSE:
        gr_req_unpark(req);
        req->done = req->no_response = true;
        if (req->conn)
            gr_conn_close(req->conn, "handler asked to close");
        else
            gr_req_free(req);
        break;
    }
}

void gr_req_finish(struct gr_req *req)
{
    gr_req_unpark(req);
    if (!req->conn) { /* the connection went away while the request was parked */
        gr_req_free(req);
        return;
    }
    encode_response(req);
    req->done = true;
    gr_net_answer_built(req);
    if (req->conn) gr_net_conn_kick(req->conn);
}

void gr_req_finish_silent(struct gr_req *req)
{
    gr_req_unpark(req);
    req->no_response = true;
    req->done = true;
    if (!req->conn) {
        gr_req_free(req);
        return;
    }
    gr_net_answer_built(req);
    gr_net_conn_kick(req->conn);
}

void gr_req_free(struct gr_req *req)
{
    gr_req_unpark(req);
    gr_net_req_released(req);
    for (struct gr_req_slice *s = req->slices; s; s = s->next)
        gr_log_slice_release(&s->slice);
    gr_cold_release(&req->cold);
    free(req->frame);
    free(req->out_mem);
    gr_arena_reset(&req->arena);
    free(req);
}

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

void gr_dispatch(struct gr_req *req)
{
    int16_t key, version;
    int32_t corr;
    gr_request_header_peek(req->frame, req->frame_len, &key, &version, &corr);
    req->hdr.request_api_key = key;
    req->hdr.request_api_version = version;
    req->hdr.correlation_id = corr;
    const struct gr_api *api = gr_api_find(key);
    const char *peer = gr_conn_peer(req->conn);
    if (!api) {
        GR_WARN_RATELIMITED("connection %s: unsupported api key %d, closing", peer, key);
        req->done = req->no_response = true;
        gr_conn_close(req->conn, "unknown api key");
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
        gr_conn_close(req->conn, "unsupported version");
        return;
    }
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
        gr_conn_close(req->conn, "malformed request");
        return;
    }
    req->resp_ops->init(req->resp);
    /* first group use: the request waits while __consumer_offsets is created on the I/O pool */
    if (!req->broker->coord && api->needs_groups && gr_groups_defer(req)) return;
    gr_dispatch_handler(req);
}

void gr_dispatch_handler(struct gr_req *req)
{
    gr_req_complete(req, req->api->handler(req));
}
