/*
 * delete_acls.c: DeleteAcls (key 31), v1-3, as Kafka's AclApis.handleDeleteAcls: ALTER on CLUSTER (else
 * every filter result CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer, INVALID_REQUEST
 * for a filter with an UNKNOWN code; each filter's result lists the ACLs it matched, all matched against the
 * ACLs as they were before the request (an ACL two filters match is listed by both), then removed. The ACL
 * file (server/acls.h) is written before the response; when that fails nothing is removed and each filter
 * answers UNKNOWN_SERVER_ERROR. Read next: server/acls.h.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

/* Fills filter result `fr` with the ACLs `f` matches and marks them in `gone` (n ACLs). False when out of
   request memory. */
static bool match_filter(struct gr_req *req, const struct gr_acl_filter *f, bool *gone,
                         struct gr_delete_acls_response_delete_acls_filter_result *fr)
{
    const struct gr_authorizer *a = req->broker->authz;
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

enum gr_handler_rc gr_handle_delete_acls(struct gr_req *req)
{
    struct gr_delete_acls_request *body = req->body;
    struct gr_delete_acls_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int32_t n = body->filters.count > 0 ? body->filters.count : 0;
    resp->filter_results.items =
        gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->filter_results.items);
    if (!resp->filter_results.items) return GR_HANDLER_CLOSE;
    resp->filter_results.count = n;
    int16_t all_err = GR_ERR_NONE;
    const char *all_msg = NULL;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_ALTER)) {
        all_err = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
    } else if (!b->authz) {
        all_err = GR_ERR_SECURITY_DISABLED;
        all_msg = "No Authorizer is configured.";
    }
    int count = b->authz ? gr_authz_count(b->authz) : 0;
    bool *gone = gr_arena_calloc(&req->arena, (size_t)count + 1, sizeof *gone);
    if (!gone) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        struct gr_delete_acls_response_delete_acls_filter_result *fr = &resp->filter_results.items[i];
        gr_delete_acls_response_delete_acls_filter_result_init(fr);
        if (all_err) {
            fr->error_code = all_err;
            fr->error_message = gr_str_c(all_msg);
            continue;
        }
        struct gr_delete_acls_request_delete_acls_filter *df = &body->filters.items[i];
        bool ok = true;
        struct gr_acl_filter f = {df->resource_type_filter,
                                  df->pattern_type_filter,
                                  df->operation,
                                  df->permission_type,
                                  gr_req_acl_str(req, df->resource_name_filter, &ok),
                                  gr_req_acl_str(req, df->principal_filter, &ok),
                                  gr_req_acl_str(req, df->host_filter, &ok)};
        const char *msg = "A filter string holds a NUL byte";
        if (!ok || gr_acl_filter_validate(&f, &msg)) {
            fr->error_code = GR_ERR_INVALID_REQUEST;
            fr->error_message = gr_str_c(msg);
            continue;
        }
        if (!match_filter(req, &f, gone, fr)) return GR_HANDLER_CLOSE;
    }
    bool any = false;
    for (int i = 0; i < count; i++)
        any = any || gone[i];
    if (!any) return GR_HANDLER_DONE;
    size_t len = 0;
    char *old = gr_authz_serialize(b->authz, &len); /* to go back to when the file cannot be written */
    if (!old) return GR_HANDLER_CLOSE;
    for (int i = count - 1; i >= 0; i--) /* from the end: the indexes before stay valid */
        if (gone[i]) gr_authz_remove(b->authz, i);
    if (gr_acls_save(b) < 0) {
        char err[256];
        if (gr_authz_parse(b->authz, old, len, err, sizeof err) < 0)
            GR_ERROR("acls: cannot go back: %s", err);
        for (int32_t i = 0; i < n; i++) {
            struct gr_delete_acls_response_delete_acls_filter_result *fr = &resp->filter_results.items[i];
            if (fr->error_code) continue;
            fr->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
            fr->error_message = gr_str_c("The ACL file could not be written");
            fr->matching_acls.count = 0;
        }
    }
    free(old);
    return GR_HANDLER_DONE;
}
