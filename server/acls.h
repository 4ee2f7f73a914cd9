/*
 * acls.h: the broker's authorizer (issue #23): Kafka's StandardAuthorizer switched on by
 * authorizer.class.name, its ACLs (common/acl.h) kept durable in the log directory, and the checks the
 * handlers call (each handler names the operation and resource KafkaApis checks for its API).
 * Storage: one node keeps the ACLs in <log dir>/__gregor_acls (the image of gr_authz_serialize), replaced
 * atomically after every CreateAcls/DeleteAcls that changed something (temp file, fsync, rename, directory
 * fsync) before the response is sent, read at start; a damaged file stops the broker naming it. Cluster
 * mode: one etcd key shared by every broker (server/security_etcd.h); no file is read or written.
 * Read next: common/acl.h, server/handlers/create_acls.c.
 */
#ifndef GR_ACLS_H
#define GR_ACLS_H

#include <stdbool.h>

#include "common/acl.h"
#include "protocol/wire.h"

struct gr_broker;
struct gr_req;

#define GR_ACLS_FILE "__gregor_acls"      /* in the log directory */
#define GR_ACLS_FILE_BYTES_MAX (64 << 20) /* a larger file is refused at start */

/* Sets b->authz from the settings: NULL when authorizer.class.name is empty (no authorization, as Kafka);
 * else an authorizer with super.users and allow.everyone.if.no.acl.found, its ACLs read from `log_dir`'s
 * file (`log_dir` NULL in cluster mode: no ACLs until server/security_etcd.c installs etcd's). Returns 0, or
 * -1 after logging why (a bad super.users entry, an unreadable or damaged file). */
int gr_acls_setup(struct gr_broker *b, const char *log_dir);
/* Frees b->authz (at shutdown). */
void gr_acls_free(struct gr_broker *b);
/* Writes b->authz's ACLs to the file atomically. Returns 0, or -1 after logging why (the file is then the
 * previous image). */
int gr_acls_save(struct gr_broker *b);

/* Whether the request's principal (gr_req_principal) from its host (gr_req_host) may do `op` on the resource
 * `type` named `name` (Kafka's AuthHelper.authorize). Always true without an authorizer. */
bool gr_req_authorized(struct gr_req *req, enum gr_acl_op op, enum gr_acl_resource type, struct gr_str name);
/* As gr_req_authorized with a NUL-terminated name. */
bool gr_req_authorized_c(struct gr_req *req, enum gr_acl_op op, enum gr_acl_resource type, const char *name);
/* As gr_req_authorized on the CLUSTER resource (kafka-cluster). */
bool gr_req_authorized_cluster(struct gr_req *req, enum gr_acl_op op);
/* Copies a wire string for the authorizer into the request arena: NULL for a null string (a filter's "any"),
 * *ok false when out of memory or the string holds a NUL byte (no ACL can match it). */
const char *gr_req_acl_str(struct gr_req *req, struct gr_str s, bool *ok);

/* Kafka's authorizeByResourceType (gr_authz_authorize_any). Always true without an authorizer. */
bool gr_req_authorized_any(struct gr_req *req, enum gr_acl_op op, enum gr_acl_resource type);

#endif
