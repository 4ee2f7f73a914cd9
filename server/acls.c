/*
 * acls.c: the broker's authorizer and the ACL file; see acls.h. The file is written on the network thread
 * (CreateAcls/DeleteAcls are rare admin calls; the write is one small file and two fsyncs).
 */
#include "server/acls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "server/broker.h"

static char *file_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Reads the whole file (at most GR_ACLS_FILE_BYTES_MAX). 1 with *buf and *len set, 0 when it does not exist,
 * -1. */
static int read_all(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) || st.st_size > GR_ACLS_FILE_BYTES_MAX) {
        close(fd);
        errno = EFBIG;
        return -1;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t have = 0;
    while (b && have < (size_t)st.st_size) {
        ssize_t n = read(fd, b + have, (size_t)st.st_size - have);
        if (n <= 0) break;
        have += (size_t)n;
    }
    close(fd);
    if (!b || have != (size_t)st.st_size) {
        free(b);
        errno = EIO;
        return -1;
    }
    b[have] = 0;
    *buf = b;
    *len = have;
    return 1;
}

int gr_acls_setup(struct gr_broker *b, const char *log_dir)
{
    const struct gr_broker_settings *s = &b->cfg.settings;
    b->authz = NULL;
    b->acls_dir = NULL;
    if (!s->authorizer_enabled) return 0;
    char err[512];
    b->authz = gr_authz_new(s->super_users, s->allow_everyone_if_no_acl_found, err, sizeof err);
    if (!b->authz) {
        GR_ERROR("config: %s", err);
        return -1;
    }
    if (!log_dir) { /* cluster mode: the ACLs come from etcd (server/security_etcd.h) */
        GR_INFO("acls: authorizer on (StandardAuthorizer rules), the ACLs from etcd");
        return 0;
    }
    b->acls_dir = strdup(log_dir);
    char *path = file_path(log_dir, GR_ACLS_FILE);
    if (!b->acls_dir || !path) {
        free(path);
        GR_ERROR("out of memory");
        return -1;
    }
    char *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    if (rc < 0) {
        GR_ERROR("acls: cannot read %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    if (rc > 0 && gr_authz_parse(b->authz, buf, len, err, sizeof err) < 0) {
        GR_ERROR(
            "acls: %s is damaged (%s); refusing to start (restore it or remove it to start with no ACLs)",
            path, err);
        free(buf);
        free(path);
        return -1;
    }
    GR_INFO("acls: authorizer on (StandardAuthorizer rules), %d ACLs from %s", gr_authz_count(b->authz),
            rc > 0 ? path : "no file yet");
    free(buf);
    free(path);
    return 0;
}

void gr_acls_free(struct gr_broker *b)
{
    gr_authz_free(b->authz);
    b->authz = NULL;
    free(b->acls_dir);
    b->acls_dir = NULL;
}

int gr_acls_save(struct gr_broker *b)
{
    size_t len = 0;
    char *img = gr_authz_serialize(b->authz, &len);
    char *tmp = file_path(b->acls_dir, GR_ACLS_FILE ".tmp");
    char *path = file_path(b->acls_dir, GR_ACLS_FILE);
    int rc = -1, fd = -1, dfd = -1;
    if (!img || !tmp || !path) {
        errno = ENOMEM;
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) goto out;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, img + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) goto out;
        off += (size_t)n;
    }
    if (fsync(fd) || close(fd)) {
        fd = -1;
        goto out;
    }
    fd = -1;
    if (rename(tmp, path)) goto out;
    dfd = open(b->acls_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd)) goto out;
    rc = 0;
out:
    if (rc) GR_ERROR("acls: cannot write %s: %s", path ? path : GR_ACLS_FILE, strerror(errno));
    if (fd >= 0) close(fd);
    if (dfd >= 0) close(dfd);
    free(img);
    free(tmp);
    free(path);
    return rc;
}

bool gr_req_authorized_c(struct gr_req *req, enum gr_acl_op op, enum gr_acl_resource type, const char *name)
{
    const struct gr_authorizer *a = req->broker->authz;
    if (!a) return true;
    bool ok = gr_authz_authorize(a, gr_req_principal(req), gr_req_host(req), op, type, name);
    if (!ok)
        GR_DEBUG("acls: %s from %s denied %s on %s:%s", gr_req_principal(req), gr_req_host(req),
                 gr_acl_op_name((int8_t)op), gr_acl_resource_name((int8_t)type), name);
    return ok;
}

bool gr_req_authorized(struct gr_req *req, enum gr_acl_op op, enum gr_acl_resource type, struct gr_str name)
{
    if (!req->broker->authz) return true;
    if (name.len < 0 || !name.ptr) name.len = 0;
    char *c = gr_arena_alloc(&req->arena, (size_t)name.len + 1);
    if (!c) return false; /* out of request memory: refused, never allowed */
    if (name.len) memcpy(c, name.ptr, (size_t)name.len);
    c[name.len] = 0;
    if (strlen(c) != (size_t)name.len) return false; /* a name with a NUL matches no ACL's name */
    return gr_req_authorized_c(req, op, type, c);
}

bool gr_req_authorized_cluster(struct gr_req *req, enum gr_acl_op op)
{
    return gr_req_authorized_c(req, op, GR_ACL_RES_CLUSTER, GR_ACL_CLUSTER_NAME);
}

bool gr_req_authorized_any(struct gr_req *req, enum gr_acl_op op, enum gr_acl_resource type)
{
    const struct gr_authorizer *a = req->broker->authz;
    return !a || gr_authz_authorize_any(a, gr_req_principal(req), gr_req_host(req), op, type);
}

const char *gr_req_acl_str(struct gr_req *req, struct gr_str s, bool *ok)
{
    if (s.len < 0 || !s.ptr) return NULL;
    char *c = gr_arena_strndup(&req->arena, s.ptr, (size_t)s.len);
    if (!c || strlen(c) != (size_t)s.len) *ok = false;
    return c;
}
