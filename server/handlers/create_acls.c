/*
 * create_acls.c: CreateAcls (key 30), v1-3, as Kafka's AclApis.handleCreateAcls: ALTER on CLUSTER (else
 * every result CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer, each creation checked
 * (common/acl.h gr_acl_validate: INVALID_REQUEST with Kafka's message) and added (an equal ACL already there
 * is a success, as Kafka keeps one); one result per creation, in order. The ACL file (server/acls.h) is
 * written before the response: when that fails the ACLs go back to what they were and every creation that
 * was to be added answers UNKNOWN_SERVER_ERROR. Read next: server/handlers/delete_acls.c.
 */
#include <stdlib.h>

#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_create_acls(struct gr_req *req)
{
    struct gr_create_acls_request *body = req->body;
    struct gr_create_acls_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int32_t n = body->creations.count > 0 ? body->creations.count : 0;
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
    if (!resp->results.items) return GR_HANDLER_CLOSE;
    resp->results.count = n;
    int16_t all_err = GR_ERR_NONE;
    const char *all_msg = NULL;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_ALTER)) {
        all_err = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
    } else if (!b->authz) {
        all_err = GR_ERR_SECURITY_DISABLED;
        all_msg = "No Authorizer is configured.";
    }
    size_t old_len = 0;
    char *old = NULL; /* the image before, to go back to when the file cannot be written */
    bool added = false;
    for (int32_t i = 0; i < n; i++) {
        struct gr_create_acls_response_acl_creation_result *r = &resp->results.items[i];
        gr_create_acls_response_acl_creation_result_init(r);
        if (all_err) {
            r->error_code = all_err;
            r->error_message = gr_str_c(all_msg);
            continue;
        }
        struct gr_create_acls_request_acl_creation *c = &body->creations.items[i];
        bool ok = true;
        struct gr_acl x = {c->resource_type,
                           c->resource_pattern_type,
                           c->operation,
                           c->permission_type,
                           (char *)gr_req_acl_str(req, c->resource_name, &ok),
                           (char *)gr_req_acl_str(req, c->principal, &ok),
                           (char *)gr_req_acl_str(req, c->host, &ok)};
        const char *msg = "A string holds a NUL byte";
        int16_t err = ok ? gr_acl_validate(&x, &msg) : GR_ERR_INVALID_REQUEST;
        if (err) {
            r->error_code = err;
            r->error_message = gr_str_c(msg);
            continue;
        }
        if (!old && !(old = gr_authz_serialize(b->authz, &old_len))) return GR_HANDLER_CLOSE;
        if (gr_authz_add(b->authz, &x)) {
            r->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
            r->error_message = gr_str_c("Gregor holds at most 10000 ACLs");
            continue;
        }
        added = true;
    }
    if (added && gr_acls_save(b) < 0) {
        char err[256];
        if (gr_authz_parse(b->authz, old, old_len, err, sizeof err) < 0)
            GR_ERROR("acls: cannot go back: %s", err);
        for (int32_t i = 0; i < n; i++)
            if (!resp->results.items[i].error_code) {
                resp->results.items[i].error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
                resp->results.items[i].error_message = gr_str_c("The ACL file could not be written");
            }
    }
    free(old);
    return GR_HANDLER_DONE;
}
