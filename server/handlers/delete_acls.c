/*
 * delete_acls.c: DeleteAcls (key 31), v1-3, as Kafka's AclApis.handleDeleteAcls: ALTER on CLUSTER (else
 * every filter result CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED without an authorizer, INVALID_REQUEST
 * for a filter with an UNKNOWN code; each filter's result lists the ACLs it matched, all matched against the
 * ACLs as they were before the request (an ACL two filters match is listed by both), then removed. The ACL
 * file (server/acls.h) is written before the response; when that fails nothing is removed and each filter
 * answers UNKNOWN_SERVER_ERROR. Cluster mode: the filters are matched against etcd's ACL key and the
 * matches removed from it (server/security_etcd.h, again after a lost compare); the answer waits for etcd's
 * acknowledgement (UNKNOWN_SERVER_ERROR for each filter when the write fails). Read next: server/acls.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/delete_acls_etcd.h"
#include "server/handlers/handlers.h"
#include "server/security_etcd.h"

/* One node: removes the ACLs marked in `gone` (count) and writes the file; when that fails nothing is removed
   and each of the n filters answers UNKNOWN_SERVER_ERROR. */
static enum gr_handler_rc remove_and_save(struct gr_req *req, const bool *gone, int count, int32_t n)
{
    struct gr_delete_acls_response *resp = req->resp;
    struct gr_broker *b = req->broker;
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
    struct gr_delete_acls_etcd *de = NULL;
    if (gr_security_etcd_on(b) && !all_err && n > 0 && !(de = gr_delete_acls_etcd_new(req, n)))
        return GR_HANDLER_CLOSE;
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
        if (de) {
            de->fs[i] = f;
            de->valid[i] = true;
            continue;
        }
        if (!gr_delete_acls_match(req, b->authz, &f, gone, fr)) return GR_HANDLER_CLOSE;
    }
    if (de) return gr_delete_acls_etcd_start(de);
    bool any = false;
    for (int i = 0; i < count; i++)
        any = any || gone[i];
    if (!any) return GR_HANDLER_DONE;
    return remove_and_save(req, gone, count, n);
}
