/*
 * describe_user_scram_credentials.c: DescribeUserScramCredentials (key 50, KIP-554), v0. A null or empty
 * user list describes every user holding a credential (in the store's order); named users are answered
 * once each in the order first named: a name given twice DUPLICATE_RESOURCE, a user without credentials
 * RESOURCE_NOT_FOUND, both with Kafka's messages (ScramImage.describe). Each user's credential infos list its
 * mechanisms (type byte, iterations), SCRAM-SHA-256 first; salts and keys never leave the broker.
 * Authorization: DESCRIBE on the cluster (KafkaApis), else CLUSTER_AUTHORIZATION_FAILED at the top and one
 * result per named user, user "" (DescribeUserScramCredentialsRequest.getErrorResponse).
 * Read next: server/scram_store.h.
 */
#include <stdio.h>

#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/scram_store.h"

typedef struct gr_describe_user_scram_credentials_response_describe_user_scram_credentials_result result_t;
typedef struct gr_describe_user_scram_credentials_response_credential_info info_t;

static struct gr_str fmt(struct gr_req *req, const char *prefix, struct gr_str name)
{
    size_t n = strlen(prefix) + (size_t)name.len + 1;
    char *p = gr_arena_alloc(&req->arena, n);
    if (!p) return gr_str_c(prefix);
    snprintf(p, n, "%s%.*s", prefix, (int)name.len, name.ptr);
    return gr_str_c(p);
}

/* Fills `r` for the user `name`: its credential infos, or RESOURCE_NOT_FOUND. False when out of memory. */
static bool describe_user(struct gr_req *req, struct gr_str name, result_t *r)
{
    const struct gr_scram_store *s = &req->broker->scram;
    gr_describe_user_scram_credentials_response_describe_user_scram_credentials_result_init(r);
    r->user = name;
    r->credential_infos.items = gr_arena_calloc(&req->arena, 2, sizeof *r->credential_infos.items);
    if (!r->credential_infos.items) return false;
    r->credential_infos.count = 0;
    for (int m = GR_SCRAM_SHA_256; m <= GR_SCRAM_SHA_512; m++) {
        const struct gr_scram_cred *c = gr_scram_store_cred(s, name.ptr, (size_t)name.len, m);
        if (!c) continue;
        info_t *ci = &r->credential_infos.items[r->credential_infos.count++];
        gr_describe_user_scram_credentials_response_credential_info_init(ci);
        ci->mechanism = (int8_t)m;
        ci->iterations = c->iterations;
    }
    if (r->credential_infos.count == 0) {
        r->error_code = GR_ERR_RESOURCE_NOT_FOUND;
        r->error_message = fmt(req, "Attempt to describe a user credential that does not exist: ", name);
    }
    return true;
}

enum gr_handler_rc gr_handle_describe_user_scram_credentials(struct gr_req *req)
{
    struct gr_describe_user_scram_credentials_request *body = req->body;
    struct gr_describe_user_scram_credentials_response *resp = req->resp;
    const struct gr_scram_store *s = &req->broker->scram;
    int32_t n = body->users.count > 0 ? body->users.count : 0;
    size_t rows = n > 0 ? (size_t)n : s->count;
    resp->results.items = gr_arena_calloc(&req->arena, rows + 1, sizeof *resp->results.items);
    if (!resp->results.items) return GR_HANDLER_CLOSE;
    resp->results.count = 0;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) {
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        for (int32_t i = 0; i < n; i++) {
            result_t *r = &resp->results.items[resp->results.count++];
            gr_describe_user_scram_credentials_response_describe_user_scram_credentials_result_init(r);
            r->user = gr_str_c("");
            r->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        }
        return GR_HANDLER_DONE;
    }
    if (n == 0) {
        for (size_t i = 0; i < s->count; i++) {
            struct gr_str name = {s->users[i].name, (int32_t)s->users[i].name_len};
            if (!describe_user(req, name, &resp->results.items[resp->results.count++]))
                return GR_HANDLER_CLOSE;
        }
        return GR_HANDLER_DONE;
    }
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n, sizeof *keys);
    if (!keys) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        keys[i] = (struct gr_req_key){body->users.items[i].name, 0, i};
    bool *repeated;
    int32_t *first = gr_req_keys_first(req, keys, n, &repeated);
    if (!first) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        if (first[i] != i) continue;
        struct gr_str name = body->users.items[i].name;
        bool twice = repeated[i];
        result_t *r = &resp->results.items[resp->results.count++];
        if (!twice) {
            if (!describe_user(req, name, r)) return GR_HANDLER_CLOSE;
            continue;
        }
        gr_describe_user_scram_credentials_response_describe_user_scram_credentials_result_init(r);
        r->user = name;
        r->error_code = GR_ERR_DUPLICATE_RESOURCE;
        r->error_message =
            fmt(req, "Cannot describe SCRAM credentials for the same user twice in a single request: ", name);
    }
    return GR_HANDLER_DONE;
}
