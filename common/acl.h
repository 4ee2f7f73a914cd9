/*
 * acl.h: the authorizer's rules (issue #23): Kafka's ACL model and its matching, with no broker state, so it
 * sits in common/ (pure data and rules, used by server/ for the per-API checks and the ACL APIs, and
 * testable alone). Facts from Kafka 4.x: org.apache.kafka.common.acl (AclOperation, AclPermissionType,
 * AclBindingFilter), org.apache.kafka.common.resource (ResourceType, PatternType, ResourcePatternFilter),
 * org.apache.kafka.metadata.authorizer.StandardAuthorizerData (matching, implications, deny over allow,
 * super.users, allow.everyone.if.no.acl.found) and AclControlManager.validateNewAcl (what CreateAcls
 * refuses). The wire codes of the enums are Kafka's.
 * Bounds: at most GR_ACL_MAX ACLs, each string at most GR_ACL_FIELD_MAX bytes (a longer one is refused with
 * INVALID_REQUEST, never cut). Not thread-safe: the network thread owns it.
 * Read next: server/acls.h (the broker's binding: storage, the per-API helper).
 */
#ifndef GR_ACL_H
#define GR_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_ACL_MAX 10000      /* ACLs one authorizer holds */
#define GR_ACL_FIELD_MAX 1024 /* bytes of a resource name, principal or host */

/* Kafka's ResourceType codes. */
enum gr_acl_resource {
    GR_ACL_RES_UNKNOWN = 0,
    GR_ACL_RES_ANY = 1,
    GR_ACL_RES_TOPIC = 2,
    GR_ACL_RES_GROUP = 3,
    GR_ACL_RES_CLUSTER = 4,
    GR_ACL_RES_TRANSACTIONAL_ID = 5,
    GR_ACL_RES_DELEGATION_TOKEN = 6,
    GR_ACL_RES_USER = 7,
};
/* Kafka's PatternType codes (ANY and MATCH are filters only). */
enum gr_acl_pattern {
    GR_ACL_PAT_UNKNOWN = 0,
    GR_ACL_PAT_ANY = 1,
    GR_ACL_PAT_MATCH = 2,
    GR_ACL_PAT_LITERAL = 3,
    GR_ACL_PAT_PREFIXED = 4,
};
/* Kafka's AclOperation codes. */
enum gr_acl_op {
    GR_ACL_OP_UNKNOWN = 0,
    GR_ACL_OP_ANY = 1,
    GR_ACL_OP_ALL = 2,
    GR_ACL_OP_READ = 3,
    GR_ACL_OP_WRITE = 4,
    GR_ACL_OP_CREATE = 5,
    GR_ACL_OP_DELETE = 6,
    GR_ACL_OP_ALTER = 7,
    GR_ACL_OP_DESCRIBE = 8,
    GR_ACL_OP_CLUSTER_ACTION = 9,
    GR_ACL_OP_DESCRIBE_CONFIGS = 10,
    GR_ACL_OP_ALTER_CONFIGS = 11,
    GR_ACL_OP_IDEMPOTENT_WRITE = 12,
    GR_ACL_OP_CREATE_TOKENS = 13,
    GR_ACL_OP_DESCRIBE_TOKENS = 14,
    GR_ACL_OP_TWO_PHASE_COMMIT = 15,
};
/* Kafka's AclPermissionType codes. */
enum gr_acl_perm {
    GR_ACL_PERM_UNKNOWN = 0,
    GR_ACL_PERM_ANY = 1,
    GR_ACL_PERM_DENY = 2,
    GR_ACL_PERM_ALLOW = 3
};

/* The CLUSTER resource's only name (Kafka's Resource.CLUSTER_NAME) and the wildcards. */
#define GR_ACL_CLUSTER_NAME "kafka-cluster"
#define GR_ACL_WILDCARD "*"
#define GR_ACL_WILDCARD_PRINCIPAL "User:*"

/* One ACL (Kafka's AclBinding), strings owned by the authorizer once added. */
struct gr_acl {
    int8_t resource_type, pattern_type, operation, permission;
    char *name, *principal, *host;
};

/* A filter (Kafka's AclBindingFilter): NULL strings match anything; ANY codes match anything; pattern type
 * MATCH matches every ACL whose pattern applies to `name` (literal equal, literal "*", prefixed prefix). */
struct gr_acl_filter {
    int8_t resource_type, pattern_type, operation, permission;
    const char *name, *principal, *host;
};

struct gr_authorizer;

/* A new empty authorizer. `super_users`: super.users, semicolon-separated principals ("User:a;User:b"),
 * NULL or "" for none; `allow_if_no_acl`: allow.everyone.if.no.acl.found. NULL when out of memory or when a
 * super user has no ':' (then `err`, `cap` bytes, says which). */
struct gr_authorizer *gr_authz_new(const char *super_users, bool allow_if_no_acl, char *err, size_t cap);
/* Frees it and its ACLs (NULL ignored). */
void gr_authz_free(struct gr_authorizer *a);

/* The check of one ACL to create (AclControlManager.validateNewAcl, AclApis.handleCreateAcls): returns 0 or
 * Kafka's error code INVALID_REQUEST (42) with a static message in *msg: an UNKNOWN/ANY resource type,
 * pattern type other than LITERAL/PREFIXED, ANY/UNKNOWN operation or permission, an empty name, a CLUSTER
 * name other than kafka-cluster, a principal without ':', a field longer than GR_ACL_FIELD_MAX. */
int16_t gr_acl_validate(const struct gr_acl *acl, const char **msg);
/* The check of a Describe/DeleteAcls filter: 0, or INVALID_REQUEST (42) with *msg for an UNKNOWN code
 * (AclBindingFilter.isUnknown) or a field longer than GR_ACL_FIELD_MAX. */
int16_t gr_acl_filter_validate(const struct gr_acl_filter *f, const char **msg);
/* Whether `f` matches `acl` (AclBindingFilter.matches). */
bool gr_acl_filter_matches(const struct gr_acl_filter *f, const struct gr_acl *acl);

/* Adds a copy of `acl` (validated by the caller). Returns 0 (also when an equal ACL is there already: Kafka
 * keeps one), -1 when GR_ACL_MAX ACLs are held or memory ran out. */
int gr_authz_add(struct gr_authorizer *a, const struct gr_acl *acl);
/* The number of ACLs held and the i-th (0 <= i < count; valid until the next add or delete). */
int gr_authz_count(const struct gr_authorizer *a);
const struct gr_acl *gr_authz_at(const struct gr_authorizer *a, int i);
/* Removes ACL `i` (the order of the others is kept). */
void gr_authz_remove(struct gr_authorizer *a, int i);

/* Kafka's authorize(): whether `principal` ("User:alice") from `host` ("127.0.0.1") may do `op` on the
 * resource `type`/`name`. Super users may do anything; a DENY matching the principal (or "User:*"), the host
 * (or "*"), the operation (or ALL) and the resource (literal name, literal "*", a prefix) wins; else an ALLOW
 * matching the same way, where ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE and ALLOW of
 * ALTER_CONFIGS also allows DESCRIBE_CONFIGS; with no ACL at all on the resource,
 * allow.everyone.if.no.acl.found decides. */
bool gr_authz_authorize(const struct gr_authorizer *a, const char *principal, const char *host,
                        enum gr_acl_op op, enum gr_acl_resource type, const char *name);
/* Kafka's authorizeByResourceType (KIP-679, used by InitProducerId without a transactional id): whether
 * some resource of `type` allows `op` for the principal and host: a super user; or an ALLOW (of `op` or ALL)
 * whose pattern no DENY covers (a literal "*" DENY covers every pattern, a prefixed DENY the names starting
 * with it, a literal DENY its own literal name); or, with allow.everyone.if.no.acl.found, no ACL of that
 * type at all. */
bool gr_authz_authorize_any(const struct gr_authorizer *a, const char *principal, const char *host,
                            enum gr_acl_op op, enum gr_acl_resource type);

/* The durable form: a text image of every ACL, "gregor-acls 1\n", one line per ACL "acl <type> <pattern>
 * <op> <perm> <len>:<name> <len>:<principal> <len>:<host>\n", then "end <count>\n". Returns a malloc'd
 * NUL-terminated buffer and its length in *len, NULL when out of memory. */
char *gr_authz_serialize(const struct gr_authorizer *a, size_t *len);
/* Replaces a's ACLs with those of an image from gr_authz_serialize (`len` bytes). Returns 0, or -1 with a
 * reason in `err` (`cap` bytes) when the image is damaged (bad header, a line that does not parse or
 * validate, a missing or wrong end line, more than GR_ACL_MAX): the ACLs are then left unchanged. */
int gr_authz_parse(struct gr_authorizer *a, const char *buf, size_t len, char *err, size_t cap);

/* Kafka's names of the codes ("TOPIC", "PREFIXED", "READ", "ALLOW"), "UNKNOWN" for others. */
const char *gr_acl_resource_name(int8_t code);
const char *gr_acl_op_name(int8_t code);

#endif
