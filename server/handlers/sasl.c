/*
 * sasl.c: SaslHandshake (key 17) v0-1 and SaslAuthenticate (key 36) v0-2, KIP-43 / KIP-152 / KIP-368. The
 * connection's SASL session (server/sasl.h, gr_req_sasl) decides the answer; a listener without SASL answers
 * ILLEGAL_SASL_STATE as Kafka's KafkaApis does. A failure's answer is held for
 * connection.failed.authentication.delay.ms (the request waits on its deadline, the loop goes on), then sent,
 * and the connection closes once it is (server/net.c). A success sets the connection's principal.
 * Read next: server/sasl.c.
 */
#include "server/handlers/handlers.h"
#include "server/sasl.h"

/* The delay is over: the failure's answer goes out. */
static void failure_delay_over(struct gr_req *req)
{
    gr_req_finish(req);
}

static enum gr_handler_rc answer_failure(struct gr_req *req)
{
    int64_t delay = req->broker->cfg.settings.failed_auth_delay_ms;
    if (delay <= 0) return GR_HANDLER_DONE;
    struct gr_await a = {.expire = failure_delay_over, .timeout_ms = delay};
    return gr_req_await(req, &a);
}

enum gr_handler_rc gr_handle_sasl_handshake(struct gr_req *req)
{
    if (gr_sasl_handshake(gr_req_sasl(req), req->hdr.request_api_version, req->body, req->resp, &req->arena))
        return answer_failure(req);
    return GR_HANDLER_DONE;
}

enum gr_handler_rc gr_handle_sasl_authenticate(struct gr_req *req)
{
    const char *principal;
    if (gr_sasl_authenticate(gr_req_sasl(req), req->hdr.request_api_version, req->body, req->resp,
                             &req->arena, &principal))
        return answer_failure(req);
    if (principal && req->conn && gr_conn_set_principal(req->conn, principal)) return GR_HANDLER_CLOSE;
    return GR_HANDLER_DONE;
}
