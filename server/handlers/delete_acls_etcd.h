/*
 * delete_acls_etcd.h: DeleteAcls in cluster mode (server/security_etcd.h): the filters matched against etcd's
 * ACL image and the matches removed from it, again after a lost compare; and the matching both modes share.
 * Read next: server/handlers/delete_acls.c.
 */
#ifndef GR_HANDLERS_DELETE_ACLS_ETCD_H
#define GR_HANDLERS_DELETE_ACLS_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/acl.h"
#include "server/broker.h"

/* A cluster-mode DeleteAcls: the validated filters (valid[i]) applied to etcd's image. */
struct gr_delete_acls_etcd {
    struct gr_req *req;
    struct gr_acl_filter *fs;
    bool *valid;
    int32_t n;
};

/* Fills filter result `fr` with the ACLs of `a` that `f` matches (strings copied to the request arena) and
 * marks them in `gone` (gr_authz_count(a) entries). False when out of request memory. */
bool gr_delete_acls_match(struct gr_req *req, const struct gr_authorizer *a, const struct gr_acl_filter *f,
                          bool *gone, struct gr_delete_acls_response_delete_acls_filter_result *fr);
/* The arrays of a cluster-mode DeleteAcls of n filters (request arena), or NULL when out of memory. */
struct gr_delete_acls_etcd *gr_delete_acls_etcd_new(struct gr_req *req, int32_t n);
/* Starts the etcd update of the valid filters: returns GR_HANDLER_WAIT (the answer follows etcd's
 * acknowledgement; UNKNOWN_SERVER_ERROR per valid filter when the write fails), or GR_HANDLER_DONE with
 * every valid filter answered UNKNOWN_SERVER_ERROR when it cannot start. */
enum gr_handler_rc gr_delete_acls_etcd_start(struct gr_delete_acls_etcd *de);

#endif
