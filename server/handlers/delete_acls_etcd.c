/*
 * delete_acls_etcd.c: DeleteAcls' matching and its cluster-mode update (server/handlers/delete_acls_etcd.h).
 */
#include "server/handlers/delete_acls_etcd.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "server/handlers/handlers.h"
#include "server/security_etcd.h"

/* Fills filter result `fr` with the ACLs `f` matches and marks them in `gone` (n ACLs). False when out of
   request memory. */
bool gr_delete_acls_match(struct gr_req *req, const struct gr_authorizer *a, const struct gr_acl_filter *f,
                          bool *gone, struct gr_delete_acls_response_delete_acls_filter_result *fr)
{
    int n = gr_authz_count(a), nm = 0;
    for (int i = 0; i < n; i++)
        nm += gr_acl_filter_matches(f, gr_authz_at(a, i));
    fr->matching_acls.items = gr_arena_calloc(&req->arena, (size_t)nm + 1, sizeof *fr->matching_acls.items);
    if (!fr->matching_acls.items) return false;
    fr->matching_acls.count = 0;
    for (int i = 0; i < n; i++) {
        const struct gr_acl *x = gr_authz_at(a, i);
        if (!gr_acl_filter_matches(f, x)) continue;
        gone[i] = true;
        struct gr_delete_acls_response_delete_acls_matching_acl *m =
            &fr->matching_acls.items[fr->matching_acls.count++];
        gr_delete_acls_response_delete_acls_matching_acl_init(m);
        m->resource_type = x->resource_type;
        m->pattern_type = x->pattern_type;
        m->operation = x->operation;
        m->permission_type = x->permission;
        m->resource_name = gr_str_c(gr_arena_strndup(&req->arena, x->name, strlen(x->name)));
        m->principal = gr_str_c(gr_arena_strndup(&req->arena, x->principal, strlen(x->principal)));
        m->host = gr_str_c(gr_arena_strndup(&req->arena, x->host, strlen(x->host)));
        if (!m->resource_name.ptr || !m->principal.ptr || !m->host.ptr) return false;
    }
    return true;
}

static int delete_apply(void *ctx, const char *cur, size_t cur_len, char **out, size_t *out_len)
{
    struct gr_delete_acls_etcd *de = ctx;
    struct gr_req *req = de->req;
    struct gr_delete_acls_response *resp = req->resp;
    char err[256];
    struct gr_authorizer *a = gr_security_acls_parse(req->broker, cur, cur_len, err, sizeof err);
    if (!a) {
        GR_ERROR("acls: etcd's ACLs do not parse (%s): DeleteAcls refused", err);
        return -EINVAL;
    }
    int count = gr_authz_count(a), rc = 0;
    bool *gone = gr_arena_calloc(&req->arena, (size_t)count + 1, sizeof *gone);
    for (int32_t i = 0; gone && i < de->n; i++)
        if (de->valid[i] && !gr_delete_acls_match(req, a, &de->fs[i], gone, &resp->filter_results.items[i]))
            gone = NULL;
    if (!gone) rc = -ENOMEM;
    bool any = false;
    for (int i = count - 1; gone && i >= 0; i--) /* from the end: the indexes before stay valid */
        if (gone[i]) {
            gr_authz_remove(a, i);
            any = true;
        }
    if (any) rc = (*out = gr_authz_serialize(a, out_len)) ? 1 : -ENOMEM;
    gr_authz_free(a);
    return rc;
}

/* Every valid filter answers UNKNOWN_SERVER_ERROR with no match (the write failed or never started). */
static void delete_failed(struct gr_delete_acls_etcd *de)
{
    struct gr_delete_acls_response *resp = de->req->resp;
    for (int32_t i = 0; i < de->n; i++)
        if (de->valid[i]) {
            struct gr_delete_acls_response_delete_acls_filter_result *fr = &resp->filter_results.items[i];
            fr->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
            fr->error_message = gr_str_c("The ACLs could not be written to etcd");
            fr->matching_acls.count = 0;
        }
}

static void delete_done(void *ctx, int err)
{
    struct gr_delete_acls_etcd *de = ctx;
    if (err) delete_failed(de);
    gr_req_finish(de->req);
}

/* The arrays of a cluster-mode DeleteAcls of n filters (request arena), or NULL when out of memory. */
struct gr_delete_acls_etcd *gr_delete_acls_etcd_new(struct gr_req *req, int32_t n)
{
    struct gr_delete_acls_etcd *de = gr_arena_calloc(&req->arena, 1, sizeof *de);
    if (!de || !(de->fs = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *de->fs)) ||
        !(de->valid = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *de->valid)))
        return NULL;
    de->req = req;
    de->n = n;
    return de;
}

/* Starts the etcd update: the request waits for delete_done, or is answered now when it cannot start. */
enum gr_handler_rc gr_delete_acls_etcd_start(struct gr_delete_acls_etcd *de)
{
    if (gr_security_etcd_update(de->req->broker, GR_SECURITY_ACLS, delete_apply, delete_done, de) == 0)
        return gr_req_await(de->req, NULL); /* delete_done finishes it */
    delete_failed(de);
    return GR_HANDLER_DONE;
}
