/*
 * create_acls.c: CreateAcls (key 30), v1-3, as Kafka's AclApis.handleCreateAcls: ALTER on CLUSTER (else
 * every result CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer, each creation checked
 * (common/acl.h gr_acl_validate: INVALID_REQUEST with Kafka's message) and added (an equal ACL already there
 * is a success, as Kafka keeps one); one result per creation, in order. The ACL file (server/acls.h) is
 * written before the response: when that fails the ACLs go back to what they were and every creation that
 * was to be added answers UNKNOWN_SERVER_ERROR. Cluster mode: the creations are applied to etcd's ACL key
 * (server/security_etcd.h, again after a lost compare) and the answer waits for etcd's acknowledgement
 * (UNKNOWN_SERVER_ERROR for each creation when the write fails). Read next: server/handlers/delete_acls.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/security_etcd.h"

/* A cluster-mode CreateAcls: the validated creations (valid[i]) applied to etcd's image. */
struct create_etcd {
    struct gr_req *req;
    struct gr_acl *xs;
    bool *valid;
    int32_t n;
};

static int create_apply(void *ctx, const char *cur, size_t cur_len, char **out, size_t *out_len)
{
    struct create_etcd *ce = ctx;
    struct gr_create_acls_response *resp = ce->req->resp;
    char err[256];
    struct gr_authorizer *a = gr_security_acls_parse(ce->req->broker, cur, cur_len, err, sizeof err);
    if (!a) {
        GR_ERROR("acls: etcd's ACLs do not parse (%s): CreateAcls refused", err);
        return -EINVAL;
    }
    int before = gr_authz_count(a);
    for (int32_t i = 0; i < ce->n; i++) {
        if (!ce->valid[i]) continue;
        struct gr_create_acls_response_acl_creation_result *r = &resp->results.items[i];
        r->error_code = GR_ERR_NONE;
        r->error_message = gr_str_c(NULL);
        if (gr_authz_add(a, &ce->xs[i])) {
            r->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
            r->error_message = gr_str_c("Gregor holds at most 10000 ACLs");
        }
    }
    int rc = 0;
    if (gr_authz_count(a) != before) rc = (*out = gr_authz_serialize(a, out_len)) ? 1 : -ENOMEM;
    gr_authz_free(a);
    return rc;
}

/* Every creation that was to be added answers UNKNOWN_SERVER_ERROR (the write failed or never started). */
static void create_failed(struct create_etcd *ce)
{
    struct gr_create_acls_response *resp = ce->req->resp;
    for (int32_t i = 0; i < ce->n; i++)
        if (ce->valid[i] && !resp->results.items[i].error_code) {
            resp->results.items[i].error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
            resp->results.items[i].error_message = gr_str_c("The ACLs could not be written to etcd");
        }
}

static void create_done(void *ctx, int err)
{
    struct create_etcd *ce = ctx;
    if (err) create_failed(ce);
    gr_req_finish(ce->req);
}

/* The arrays of a cluster-mode CreateAcls of n creations (request arena), or NULL when out of memory. */
static struct create_etcd *create_etcd_new(struct gr_req *req, int32_t n)
{
    struct create_etcd *ce = gr_arena_calloc(&req->arena, 1, sizeof *ce);
    if (!ce || !(ce->xs = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *ce->xs)) ||
        !(ce->valid = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *ce->valid)))
        return NULL;
    ce->req = req;
    ce->n = n;
    return ce;
}

/* Starts the etcd update: the request waits for create_done, or is answered now when it cannot start. */
static enum gr_handler_rc create_etcd_start(struct create_etcd *ce)
{
    if (gr_security_etcd_update(ce->req->broker, GR_SECURITY_ACLS, create_apply, create_done, ce) == 0)
        return gr_req_await(ce->req, NULL); /* create_done finishes it */
    create_failed(ce);
    return GR_HANDLER_DONE;
}

/* One node: the file could not be written: the ACLs go back to `old` and every creation that was to be
   added answers UNKNOWN_SERVER_ERROR. */
static void undo(struct gr_req *req, const char *old, size_t old_len, int32_t n)
{
    struct gr_create_acls_response *resp = req->resp;
    char err[256];
    if (gr_authz_parse(req->broker->authz, old, old_len, err, sizeof err) < 0)
        GR_ERROR("acls: cannot go back: %s", err);
    for (int32_t i = 0; i < n; i++)
        if (!resp->results.items[i].error_code) {
            resp->results.items[i].error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
            resp->results.items[i].error_message = gr_str_c("The ACL file could not be written");
        }
}

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
    struct create_etcd *ce = NULL;
    if (gr_security_etcd_on(b) && !all_err && !(ce = create_etcd_new(req, n))) return GR_HANDLER_CLOSE;
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
        if (ce) {
            ce->xs[i] = x;
            ce->valid[i] = added = true;
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
    if (ce) return added ? create_etcd_start(ce) : GR_HANDLER_DONE;
    if (added && gr_acls_save(b) < 0) undo(req, old, old_len, n);
    free(old);
    return GR_HANDLER_DONE;
}
