/*
 * describe_acls.c: DescribeAcls (key 29), v1-3, as Kafka's AclApis.handleDescribeAcls: DESCRIBE on CLUSTER
 * (else CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED "No Authorizer is configured." without an
 * authorizer, INVALID_REQUEST for a filter with an UNKNOWN code; the matching ACLs (common/acl.h
 * gr_acl_filter_matches: ANY, MATCH, exact pattern types) grouped by resource pattern (type, name, pattern
 * type) in the order first met. Read next: server/handlers/create_acls.c.
 */
#include <string.h>

#include "server/acls.h"
#include "server/handlers/handlers.h"

/* The index among the first `nres` resources of the response of x's resource pattern, nres when none. */
static int find_resource(const struct gr_describe_acls_response *resp, int nres, const struct gr_acl *x)
{
    for (int r = 0; r < nres; r++) {
        const struct gr_describe_acls_response_describe_acls_resource *dr = &resp->resources.items[r];
        if (dr->resource_type == x->resource_type && dr->pattern_type == x->pattern_type &&
            gr_str_eq_c(dr->resource_name, x->name))
            return r;
    }
    return nres;
}

/* The request's filter into *out; false after filling the response's INVALID_REQUEST. */
static bool read_filter(struct gr_req *req, struct gr_acl_filter *out)
{
    struct gr_describe_acls_request *body = req->body;
    struct gr_describe_acls_response *resp = req->resp;
    bool ok = true;
    struct gr_acl_filter f = {body->resource_type_filter,
                              body->pattern_type_filter,
                              body->operation,
                              body->permission_type,
                              gr_req_acl_str(req, body->resource_name_filter, &ok),
                              gr_req_acl_str(req, body->principal_filter, &ok),
                              gr_req_acl_str(req, body->host_filter, &ok)};
    const char *msg = "A filter string holds a NUL byte";
    if (!ok || gr_acl_filter_validate(&f, &msg)) {
        resp->error_code = GR_ERR_INVALID_REQUEST;
        resp->error_message = gr_str_c(msg);
        return false;
    }
    *out = f;
    return true;
}

enum gr_handler_rc gr_handle_describe_acls(struct gr_req *req)
{
    struct gr_describe_acls_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) {
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    if (!b->authz) {
        resp->error_code = GR_ERR_SECURITY_DISABLED;
        resp->error_message = gr_str_c("No Authorizer is configured.");
        return GR_HANDLER_DONE;
    }
    struct gr_acl_filter f;
    if (!read_filter(req, &f)) return GR_HANDLER_DONE;
    int n = gr_authz_count(b->authz);
    int *match = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *match);
    resp->resources.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->resources.items);
    if (!match || !resp->resources.items) return GR_HANDLER_CLOSE;
    int nm = 0;
    for (int i = 0; i < n; i++)
        if (gr_acl_filter_matches(&f, gr_authz_at(b->authz, i))) match[nm++] = i;
    /* group by resource pattern, in the order first met: counts first, then the ACLs */
    int nres = 0;
    for (int k = 0; k < nm; k++) {
        const struct gr_acl *x = gr_authz_at(b->authz, match[k]);
        int r = find_resource(resp, nres, x);
        if (r == nres) {
            struct gr_describe_acls_response_describe_acls_resource *dr = &resp->resources.items[nres++];
            gr_describe_acls_response_describe_acls_resource_init(dr);
            dr->resource_type = x->resource_type;
            dr->pattern_type = x->pattern_type;
            dr->resource_name = gr_str_c(gr_arena_strndup(&req->arena, x->name, strlen(x->name)));
            if (!dr->resource_name.ptr) return GR_HANDLER_CLOSE;
            dr->acls.count = 0;
        }
        resp->resources.items[r].acls.count++;
    }
    resp->resources.count = nres;
    for (int r = 0; r < nres; r++) {
        struct gr_describe_acls_response_describe_acls_resource *dr = &resp->resources.items[r];
        dr->acls.items = gr_arena_calloc(&req->arena, (size_t)dr->acls.count + 1, sizeof *dr->acls.items);
        if (!dr->acls.items) return GR_HANDLER_CLOSE;
        dr->acls.count = 0;
    }
    for (int k = 0; k < nm; k++) {
        const struct gr_acl *x = gr_authz_at(b->authz, match[k]);
        int r = find_resource(resp, nres, x);
        struct gr_describe_acls_response_acl_description *d =
            &resp->resources.items[r].acls.items[resp->resources.items[r].acls.count++];
        gr_describe_acls_response_acl_description_init(d);
        d->principal = gr_str_c(gr_arena_strndup(&req->arena, x->principal, strlen(x->principal)));
        d->host = gr_str_c(gr_arena_strndup(&req->arena, x->host, strlen(x->host)));
        if (!d->principal.ptr || !d->host.ptr) return GR_HANDLER_CLOSE;
        d->operation = x->operation;
        d->permission_type = x->permission;
    }
    return GR_HANDLER_DONE;
}
