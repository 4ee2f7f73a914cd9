/*
 * acl.c: Kafka's ACL matching and the durable image of the ACLs; see acl.h. A flat array scanned per check:
 * at most GR_ACL_MAX entries, a check is one pass.
 */
#include "common/acl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gr_authorizer {
    struct gr_acl *acls;
    int count, cap;
    char **super_users;
    int super_count;
    bool allow_if_no_acl;
};

static void acl_free_strings(struct gr_acl *x)
{
    free(x->name);
    free(x->principal);
    free(x->host);
}

struct gr_authorizer *gr_authz_new(const char *super_users, bool allow_if_no_acl, char *err, size_t cap)
{
    struct gr_authorizer *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->allow_if_no_acl = allow_if_no_acl;
    const char *p = super_users ? super_users : "";
    while (*p) {
        const char *semi = strchr(p, ';');
        size_t n = semi ? (size_t)(semi - p) : strlen(p);
        while (n > 0 && (*p == ' ' || *p == '\t'))
            p++, n--;
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n > 0) {
            if (!memchr(p, ':', n) || n > GR_ACL_FIELD_MAX) {
                snprintf(err, cap, "super.users: '%.*s' is not a principal of the form <type>:<name>",
                         (int)(n > 200 ? 200 : n), p);
                gr_authz_free(a);
                return NULL;
            }
            char **grown = realloc(a->super_users, (size_t)(a->super_count + 1) * sizeof *grown);
            char *s = grown ? strndup(p, n) : NULL;
            if (grown) a->super_users = grown;
            if (!s) {
                snprintf(err, cap, "out of memory");
                gr_authz_free(a);
                return NULL;
            }
            a->super_users[a->super_count++] = s;
        }
        if (!semi) break;
        p = semi + 1;
    }
    return a;
}

void gr_authz_free(struct gr_authorizer *a)
{
    if (!a) return;
    for (int i = 0; i < a->count; i++)
        acl_free_strings(&a->acls[i]);
    free(a->acls);
    for (int i = 0; i < a->super_count; i++)
        free(a->super_users[i]);
    free(a->super_users);
    free(a);
}

static bool too_long(const char *s)
{
    return s && strnlen(s, GR_ACL_FIELD_MAX + 1) > GR_ACL_FIELD_MAX;
}

int16_t gr_acl_validate(const struct gr_acl *acl, const char **msg)
{
    const int16_t invalid = 42; /* INVALID_REQUEST */
    if (acl->resource_type <= GR_ACL_RES_ANY || acl->resource_type > GR_ACL_RES_USER) {
        *msg = "Invalid resourceType";
        return invalid;
    }
    if (acl->pattern_type != GR_ACL_PAT_LITERAL && acl->pattern_type != GR_ACL_PAT_PREFIXED) {
        *msg = "Invalid patternType";
        return invalid;
    }
    if (acl->operation <= GR_ACL_OP_ANY || acl->operation > GR_ACL_OP_TWO_PHASE_COMMIT) {
        *msg = "Invalid operation";
        return invalid;
    }
    if (acl->permission != GR_ACL_PERM_DENY && acl->permission != GR_ACL_PERM_ALLOW) {
        *msg = "Invalid permissionType";
        return invalid;
    }
    if (!acl->name || !acl->name[0]) {
        *msg = "Resource name should not be empty";
        return invalid;
    }
    if (acl->resource_type == GR_ACL_RES_CLUSTER && strcmp(acl->name, GR_ACL_CLUSTER_NAME)) {
        *msg = "The only valid name for the CLUSTER resource is kafka-cluster";
        return invalid;
    }
    if (!acl->principal || !strchr(acl->principal, ':')) {
        *msg = "Could not parse principal (no colon is present separating the principal type from the "
               "principal name)";
        return invalid;
    }
    if (!acl->host || !acl->host[0]) {
        *msg = "Invalid host";
        return invalid;
    }
    if (too_long(acl->name) || too_long(acl->principal) || too_long(acl->host)) {
        *msg = "A resource name, principal or host is longer than Gregor's bound of 1024 bytes";
        return invalid;
    }
    return 0;
}

int16_t gr_acl_filter_validate(const struct gr_acl_filter *f, const char **msg)
{
    if (f->resource_type == GR_ACL_RES_UNKNOWN || f->resource_type > GR_ACL_RES_USER ||
        f->resource_type < 0 || f->pattern_type == GR_ACL_PAT_UNKNOWN ||
        f->pattern_type > GR_ACL_PAT_PREFIXED || f->pattern_type < 0 || f->operation == GR_ACL_OP_UNKNOWN ||
        f->operation > GR_ACL_OP_TWO_PHASE_COMMIT || f->operation < 0 ||
        f->permission == GR_ACL_PERM_UNKNOWN || f->permission > GR_ACL_PERM_ALLOW || f->permission < 0) {
        *msg = "The filter must not contain UNKNOWN elements";
        return 42;
    }
    if (too_long(f->name) || too_long(f->principal) || too_long(f->host)) {
        *msg = "A resource name, principal or host is longer than Gregor's bound of 1024 bytes";
        return 42;
    }
    return 0;
}

/* Whether an ACL's resource pattern applies to the resource `name` (StandardAuthorizerData: a literal equal
   name or the literal wildcard, or a prefix). */
static bool pattern_applies(int8_t pattern_type, const char *pattern, const char *name)
{
    if (pattern_type == GR_ACL_PAT_LITERAL)
        return !strcmp(pattern, name) || !strcmp(pattern, GR_ACL_WILDCARD);
    if (pattern_type == GR_ACL_PAT_PREFIXED) return !strncmp(pattern, name, strlen(pattern));
    return false;
}

bool gr_acl_filter_matches(const struct gr_acl_filter *f, const struct gr_acl *acl)
{
    if (f->resource_type != GR_ACL_RES_ANY && f->resource_type != acl->resource_type) return false;
    switch (f->pattern_type) {
    case GR_ACL_PAT_ANY:
        if (f->name && strcmp(f->name, acl->name)) return false;
        break;
    case GR_ACL_PAT_MATCH:
        if (f->name && !pattern_applies(acl->pattern_type, acl->name, f->name)) return false;
        break;
    default:
        if (f->pattern_type != acl->pattern_type) return false;
        if (f->name && strcmp(f->name, acl->name)) return false;
    }
    if (f->principal && strcmp(f->principal, acl->principal)) return false;
    if (f->host && strcmp(f->host, acl->host)) return false;
    if (f->operation != GR_ACL_OP_ANY && f->operation != acl->operation) return false;
    if (f->permission != GR_ACL_PERM_ANY && f->permission != acl->permission) return false;
    return true;
}

static bool acl_equal(const struct gr_acl *x, const struct gr_acl *y)
{
    return x->resource_type == y->resource_type && x->pattern_type == y->pattern_type &&
           x->operation == y->operation && x->permission == y->permission && !strcmp(x->name, y->name) &&
           !strcmp(x->principal, y->principal) && !strcmp(x->host, y->host);
}

int gr_authz_add(struct gr_authorizer *a, const struct gr_acl *acl)
{
    for (int i = 0; i < a->count; i++)
        if (acl_equal(&a->acls[i], acl)) return 0;
    if (a->count >= GR_ACL_MAX) return -1;
    if (a->count == a->cap) {
        int ncap = a->cap ? a->cap * 2 : 16;
        struct gr_acl *grown = realloc(a->acls, (size_t)ncap * sizeof *grown);
        if (!grown) return -1;
        a->acls = grown;
        a->cap = ncap;
    }
    struct gr_acl c = *acl;
    c.name = strdup(acl->name);
    c.principal = strdup(acl->principal);
    c.host = strdup(acl->host);
    if (!c.name || !c.principal || !c.host) {
        acl_free_strings(&c);
        return -1;
    }
    a->acls[a->count++] = c;
    return 0;
}

int gr_authz_count(const struct gr_authorizer *a)
{
    return a->count;
}

const struct gr_acl *gr_authz_at(const struct gr_authorizer *a, int i)
{
    return &a->acls[i];
}

void gr_authz_remove(struct gr_authorizer *a, int i)
{
    acl_free_strings(&a->acls[i]);
    memmove(&a->acls[i], &a->acls[i + 1], (size_t)(a->count - i - 1) * sizeof a->acls[0]);
    a->count--;
}

static bool is_super(const struct gr_authorizer *a, const char *principal)
{
    for (int i = 0; i < a->super_count; i++)
        if (!strcmp(a->super_users[i], principal)) return true;
    return false;
}

static bool principal_host_match(const struct gr_acl *acl, const char *principal, const char *host)
{
    return (!strcmp(acl->principal, principal) || !strcmp(acl->principal, GR_ACL_WILDCARD_PRINCIPAL)) &&
           (!strcmp(acl->host, host) || !strcmp(acl->host, GR_ACL_WILDCARD));
}

/* Whether an ALLOW of `acl_op` allows `op` (StandardAuthorizerData: ALL, the same, and the implied
   DESCRIBE / DESCRIBE_CONFIGS). */
static bool allow_covers(int8_t acl_op, int8_t op)
{
    if (acl_op == GR_ACL_OP_ALL || acl_op == op) return true;
    if (op == GR_ACL_OP_DESCRIBE)
        return acl_op == GR_ACL_OP_READ || acl_op == GR_ACL_OP_WRITE || acl_op == GR_ACL_OP_DELETE ||
               acl_op == GR_ACL_OP_ALTER;
    if (op == GR_ACL_OP_DESCRIBE_CONFIGS) return acl_op == GR_ACL_OP_ALTER_CONFIGS;
    return false;
}

bool gr_authz_authorize(const struct gr_authorizer *a, const char *principal, const char *host,
                        enum gr_acl_op op, enum gr_acl_resource type, const char *name)
{
    if (is_super(a, principal)) return true;
    const int8_t op8 = (int8_t)op, type8 = (int8_t)type;
    bool any_on_resource = false, allowed = false;
    for (int i = 0; i < a->count; i++) {
        const struct gr_acl *acl = &a->acls[i];
        if (acl->resource_type != type8 || !pattern_applies(acl->pattern_type, acl->name, name)) continue;
        any_on_resource = true;
        if (!principal_host_match(acl, principal, host)) continue;
        if (acl->permission == GR_ACL_PERM_DENY) {
            if (acl->operation == GR_ACL_OP_ALL || acl->operation == op8) return false; /* deny wins */
        } else if (allow_covers(acl->operation, op8)) {
            allowed = true;
        }
    }
    if (!any_on_resource) return a->allow_if_no_acl;
    return allowed;
}

/* Whether DENY `d` covers the pattern of ALLOW `x` (authorizeByResourceType's rule). */
static bool deny_covers(const struct gr_acl *d, const struct gr_acl *x)
{
    if (d->pattern_type == GR_ACL_PAT_LITERAL && !strcmp(d->name, GR_ACL_WILDCARD)) return true;
    if (d->pattern_type == GR_ACL_PAT_PREFIXED) return !strncmp(d->name, x->name, strlen(d->name));
    return x->pattern_type == GR_ACL_PAT_LITERAL && !strcmp(d->name, x->name);
}

bool gr_authz_authorize_any(const struct gr_authorizer *a, const char *principal, const char *host,
                            enum gr_acl_op op, enum gr_acl_resource type)
{
    if (is_super(a, principal)) return true;
    const int8_t op8 = (int8_t)op, type8 = (int8_t)type;
    bool any_of_type = false;
    for (int i = 0; i < a->count; i++) {
        const struct gr_acl *x = &a->acls[i];
        if (x->resource_type != type8) continue;
        any_of_type = true;
        if (x->permission != GR_ACL_PERM_ALLOW || !principal_host_match(x, principal, host)) continue;
        if (x->operation != op8 && x->operation != GR_ACL_OP_ALL) continue;
        bool denied = false;
        for (int k = 0; k < a->count && !denied; k++) {
            const struct gr_acl *d = &a->acls[k];
            denied = d->resource_type == type8 && d->permission == GR_ACL_PERM_DENY &&
                     (d->operation == op8 || d->operation == GR_ACL_OP_ALL) &&
                     principal_host_match(d, principal, host) && deny_covers(d, x);
        }
        if (!denied) return true;
    }
    return !any_of_type && a->allow_if_no_acl;
}

/* A growing text buffer for the image. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 4096;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *g = realloc(b->p, ncap);
        if (!g) {
            b->oom = true;
            return;
        }
        b->p = g;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_str(struct sbuf *b, const char *s)
{
    char num[32];
    size_t n = strlen(s);
    int k = snprintf(num, sizeof num, " %zu:", n);
    sb_add(b, num, (size_t)k);
    sb_add(b, s, n);
}

char *gr_authz_serialize(const struct gr_authorizer *a, size_t *len)
{
    struct sbuf b = {0};
    sb_add(&b, "gregor-acls 1\n", 14);
    for (int i = 0; i < a->count; i++) {
        const struct gr_acl *x = &a->acls[i];
        char head[64];
        int k = snprintf(head, sizeof head, "acl %d %d %d %d", x->resource_type, x->pattern_type,
                         x->operation, x->permission);
        sb_add(&b, head, (size_t)k);
        sb_str(&b, x->name);
        sb_str(&b, x->principal);
        sb_str(&b, x->host);
        sb_add(&b, "\n", 1);
    }
    char tail[32];
    int k = snprintf(tail, sizeof tail, "end %d\n", a->count);
    sb_add(&b, tail, (size_t)k);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* Reads an int at *p (decimal, optional '-'), then expects `sep`. */
static bool rd_int(const char **p, const char *end, long *out, char sep)
{
    char *e;
    errno = 0;
    if (*p >= end || !((**p >= '0' && **p <= '9') || **p == '-')) return false;
    long v = strtol(*p, &e, 10);
    if (errno || e >= end || *e != sep || v < -1000000 || v > 1000000000L) return false;
    *out = v;
    *p = e + 1;
    return true;
}

/* Reads "<len>:<bytes>" at *p into a malloc'd string (no NUL inside), then expects `sep`. */
static char *rd_str(const char **p, const char *end, char sep)
{
    long n;
    if (!rd_int(p, end, &n, ':') || n < 0 || n > GR_ACL_FIELD_MAX || end - *p < n + 1) return NULL;
    if (memchr(*p, 0, (size_t)n) || (*p)[n] != sep) return NULL;
    char *s = strndup(*p, (size_t)n);
    *p += n + 1;
    return s;
}

int gr_authz_parse(struct gr_authorizer *a, const char *buf, size_t len, char *err, size_t cap)
{
    const char *p = buf, *end = buf + len;
    const char *hdr = "gregor-acls 1\n";
    if (len < strlen(hdr) || memcmp(p, hdr, strlen(hdr))) {
        snprintf(err, cap, "no 'gregor-acls 1' header");
        return -1;
    }
    p += strlen(hdr);
    struct gr_authorizer tmp = {0};
    int line = 1;
    for (;;) {
        line++;
        if (end - p >= 4 && !memcmp(p, "end ", 4)) {
            p += 4;
            long n;
            if (!rd_int(&p, end, &n, '\n') || n != tmp.count || p != end) {
                snprintf(err, cap, "line %d: the end line does not match the %d ACLs read", line, tmp.count);
                goto bad;
            }
            break;
        }
        if (end - p < 4 || memcmp(p, "acl ", 4)) {
            snprintf(err, cap, "line %d: neither an acl line nor the end line (truncated?)", line);
            goto bad;
        }
        p += 4;
        long t, pt, op, pm;
        if (!rd_int(&p, end, &t, ' ') || !rd_int(&p, end, &pt, ' ') || !rd_int(&p, end, &op, ' ') ||
            !rd_int(&p, end, &pm, ' ')) {
            snprintf(err, cap, "line %d: bad codes", line);
            goto bad;
        }
        struct gr_acl x = {(int8_t)t, (int8_t)pt, (int8_t)op, (int8_t)pm, NULL, NULL, NULL};
        x.name = rd_str(&p, end, ' ');
        x.principal = x.name ? rd_str(&p, end, ' ') : NULL;
        x.host = x.principal ? rd_str(&p, end, '\n') : NULL;
        const char *msg = "a field does not parse";
        if (!x.host || t > 127 || pt > 127 || op > 127 || pm > 127 || gr_acl_validate(&x, &msg) ||
            gr_authz_add(&tmp, &x)) {
            snprintf(err, cap, "line %d: %s", line, msg);
            acl_free_strings(&x);
            goto bad;
        }
        acl_free_strings(&x);
    }
    for (int i = 0; i < a->count; i++)
        acl_free_strings(&a->acls[i]);
    free(a->acls);
    a->acls = tmp.acls;
    a->count = tmp.count;
    a->cap = tmp.cap;
    return 0;
bad:
    for (int i = 0; i < tmp.count; i++)
        acl_free_strings(&tmp.acls[i]);
    free(tmp.acls);
    return -1;
}

const char *gr_acl_resource_name(int8_t code)
{
    static const char *const n[] = {
        "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"};
    return code >= 0 && code < 8 ? n[code] : "UNKNOWN";
}

const char *gr_acl_op_name(int8_t code)
{
    static const char *const n[] = {"UNKNOWN",
                                    "ANY",
                                    "ALL",
                                    "READ",
                                    "WRITE",
                                    "CREATE",
                                    "DELETE",
                                    "ALTER",
                                    "DESCRIBE",
                                    "CLUSTER_ACTION",
                                    "DESCRIBE_CONFIGS",
                                    "ALTER_CONFIGS",
                                    "IDEMPOTENT_WRITE",
                                    "CREATE_TOKENS",
                                    "DESCRIBE_TOKENS",
                                    "TWO_PHASE_COMMIT"};
    return code >= 0 && code < 16 ? n[code] : "UNKNOWN";
}
