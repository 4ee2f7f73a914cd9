/*
 * produce_txn.c: Produce's transaction rules (declared in produce_request.h): the whole-request refusal
 * of a transactional batch without a transactional id, and KIP-890 part 1's verification of each
 * transactional batch through the coordinator in process (server/txns.h gr_txns_check_produce); in
 * cluster mode, through the coordinator on another broker
 * (gr_produce_txn_remote before the appends, its verdict per partition here). Read next: server/txns.h.
 */
#include "protocol/errors.h"
#include "server/handlers/produce_request.h"
#include "server/txns.h"

bool gr_produce_txn_refused(struct gr_req *req)
{
    const struct gr_produce_request *body = req->body;
    return body->transactional_id.len < 0 && gr_produce_request_transactional(body);
}

int gr_produce_txn_verify(struct gr_req *req, const struct gr_log *log, const char *topic, int32_t partition,
                          struct gr_bytes records, struct gr_produce_response_partition_produce_response *pr,
                          struct gr_produce_args *args)
{
    const struct gr_produce_request *body = req->body;
    bool verified = false;
    const char *msg = NULL;
    int16_t err = GR_ERR_NONE;
    uint64_t guard = 0;
    if (gr_txns_remote_verdict(req, gr_str_c(topic), partition, &err, &guard)) {
        err = gr_txns_produce_error(err, req->hdr.request_api_version, &msg);
        verified = err == GR_ERR_NONE;
        args->txn_guarded = true; /* the verdict came before: the append checks the guard again */
        args->txn_guard = guard;
    } else {
        err = gr_txns_check_produce(req->broker, log, body->transactional_id, gr_str_c(topic), partition,
                                    records, req->hdr.request_api_version, &verified, &msg);
    }
    if (err) {
        gr_produce_partition_error(pr, err, msg);
        return -1;
    }
    args->txn_verified = verified;
    return verified ? 1 : 0;
}

bool gr_produce_txn_remote(struct gr_req *req, gr_handler_fn run, enum gr_handler_rc *rc)
{
    return gr_txns_verify_remote(req, run, rc);
}
