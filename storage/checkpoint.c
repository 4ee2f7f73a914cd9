/*
 * checkpoint.c: small durable files. Atomic replace (write "<name>.tmp", fdatasync, rename, fsync the
 * directory), Kafka's text checkpoint formats, and UUID text. Nothing read here is trusted for a size:
 * files are capped, numbers are range-checked, malformed files read as absent (-EINVAL).
 *
 * Offset checkpoint (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
 * replication-offset-checkpoint), Kafka's text format, one item per line:
 *   LINE  MEANING
 *   1     version: 0
 *   2     entry count N
 *   3..   "<topic> <partition> <offset>" (N lines)
 * Leader epoch checkpoint (<partition dir>/leader-epoch-checkpoint):
 *   1     version: 0
 *   2     entry count N
 *   3..   "<epoch> <start offset>" (N lines, epochs and offsets ascending)
 * Read next: storage/store.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "storage/internal.h"
#include "storage/sys.h"

#define CKPT_FILE_BYTES_MAX (64 * 1024 * 1024) /* 64 MiB: millions of partitions' lines */

int gr_dir_sync(int dir_fd)
{
    return gr_sys_fsync(dir_fd);
}

int gr_file_write_atomic(int dir_fd, const char *name, const void *data, size_t len)
{
    char tmp[512];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= (int)sizeof(tmp)) return -ENAMETOOLONG;
    int fd = gr_sys_openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return fd;
    int err = gr_sys_pwrite_full(fd, data, len, 0);
    if (err == 0) err = gr_sys_fdatasync(fd);
    int cerr = gr_sys_close(fd);
    if (err == 0) err = cerr;
    if (err == 0) err = gr_sys_renameat(dir_fd, tmp, dir_fd, name);
    if (err == 0) return gr_dir_sync(dir_fd);
    gr_sys_unlinkat(dir_fd, tmp, 0);
    return err;
}

int gr_file_write_if_changed(int dir_fd, const char *name, const void *data, size_t len)
{
    int fd = gr_sys_openat(dir_fd, name, O_RDONLY, 0);
    if (fd >= 0) {
        struct stat st;
        bool same = false;
        if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == len) {
            char *buf = malloc(len + 1);
            same = buf && gr_sys_pread_full(fd, buf, len, 0) == (ssize_t)len && memcmp(buf, data, len) == 0;
            free(buf);
        }
        gr_sys_close(fd);
        if (same) return gr_dir_sync(dir_fd);
    }
    return gr_file_write_atomic(dir_fd, name, data, len);
}

int gr_file_read_all(int dir_fd, const char *name, size_t max_bytes, char **out, size_t *len)
{
    int fd = gr_sys_openat(dir_fd, name, O_RDONLY, 0);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        gr_sys_close(fd);
        return e;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes) {
        gr_sys_close(fd);
        return -EFBIG;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        gr_sys_close(fd);
        return -ENOMEM;
    }
    ssize_t r = gr_sys_pread_full(fd, buf, (size_t)st.st_size, 0);
    gr_sys_close(fd);
    if (r < 0) {
        free(buf);
        return (int)r;
    }
    buf[r] = '\0';
    *out = buf;
    *len = (size_t)r;
    return 0;
}

/* Parses a decimal int64 from [*p, end) followed by `term`; advances *p past term. -1 on error. */
static int parse_i64(const char **p, const char *end, char term, int64_t *v)
{
    const char *s = *p;
    bool neg = false;
    if (s < end && *s == '-') {
        neg = true;
        s++;
    }
    if (s >= end || *s < '0' || *s > '9') return -1;
    uint64_t x = 0;
    while (s < end && *s >= '0' && *s <= '9') {
        if (x > (UINT64_C(1) << 62)) return -1;
        x = x * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s >= end || *s != term || x > (uint64_t)INT64_MAX) return -1;
    *v = neg ? -(int64_t)x : (int64_t)x;
    *p = s + 1;
    return 0;
}

static int parse_header(const char **p, const char *end, int64_t *count)
{
    int64_t version;
    if (parse_i64(p, end, '\n', &version) < 0 || version != 0) return -1;
    if (parse_i64(p, end, '\n', count) < 0 || *count < 0) return -1;
    return 0;
}

void gr_ckpt_free(struct gr_ckpt_entry *e, int count)
{
    for (int i = 0; i < count; i++)
        free(e[i].topic);
    free(e);
}

int gr_ckpt_read(int dir_fd, const char *name, struct gr_ckpt_entry **out, int *count)
{
    *out = NULL;
    *count = 0;
    char *buf;
    size_t len;
    int err = gr_file_read_all(dir_fd, name, CKPT_FILE_BYTES_MAX, &buf, &len);
    if (err < 0) return err;
    const char *p = buf, *end = buf + len;
    int64_t n;
    struct gr_ckpt_entry *e = NULL;
    int got = 0;
    if (parse_header(&p, end, &n) < 0 || n > (int64_t)(len / 6)) goto bad;
    e = calloc((size_t)n + 1, sizeof(*e));
    if (!e) {
        free(buf);
        return -ENOMEM;
    }
    for (; got < n; got++) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        if (!sp || sp == p || sp - p > GR_TOPIC_NAME_BYTES_MAX) goto bad;
        int64_t part, off;
        const char *q = sp + 1;
        if (parse_i64(&q, end, ' ', &part) < 0 || part < 0 || part > INT32_MAX ||
            parse_i64(&q, end, '\n', &off) < 0)
            goto bad;
        e[got].topic = strndup(p, (size_t)(sp - p));
        if (!e[got].topic) goto bad;
        e[got].partition = (int32_t)part;
        e[got].offset = off;
        p = q;
    }
    free(buf);
    *out = e;
    *count = got;
    return 0;
bad:
    if (e) gr_ckpt_free(e, got);
    free(buf);
    return -EINVAL;
}

int64_t gr_ckpt_lookup(const struct gr_ckpt_entry *e, int count, const char *topic, int32_t partition)
{
    for (int i = 0; i < count; i++)
        if (e[i].partition == partition && strcmp(e[i].topic, topic) == 0) return e[i].offset;
    return -1;
}

int gr_epoch_ckpt_read(int dir_fd, struct gr_epoch_entry **out, int *count)
{
    *out = NULL;
    *count = 0;
    char *buf;
    size_t len;
    int err = gr_file_read_all(dir_fd, "leader-epoch-checkpoint", CKPT_FILE_BYTES_MAX, &buf, &len);
    if (err < 0) return err;
    const char *p = buf, *end = buf + len;
    int64_t n;
    struct gr_epoch_entry *e = NULL;
    if (parse_header(&p, end, &n) < 0 || n > (int64_t)(len / 4)) goto bad;
    e = calloc((size_t)n + 1, sizeof(*e));
    if (!e) {
        free(buf);
        return -ENOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t ep, off;
        if (parse_i64(&p, end, ' ', &ep) < 0 || ep < 0 || ep > INT32_MAX ||
            parse_i64(&p, end, '\n', &off) < 0 || off < 0)
            goto bad;
        if (i > 0 && (ep <= e[i - 1].epoch || off < e[i - 1].start_offset)) goto bad;
        e[i].epoch = (int32_t)ep;
        e[i].start_offset = off;
    }
    free(buf);
    *out = e;
    *count = (int)n;
    return 0;
bad:
    free(e);
    free(buf);
    return -EINVAL;
}

int gr_epoch_ckpt_format(const struct gr_epoch_entry *e, int count, uint8_t **out, size_t *len)
{
    size_t cap = 32 + (size_t)count * 32;
    char *buf = malloc(cap);
    if (!buf) return -ENOMEM;
    size_t n = (size_t)snprintf(buf, cap, "0\n%d\n", count);
    for (int i = 0; i < count; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%" PRId32 " %" PRId64 "\n", e[i].epoch, e[i].start_offset);
    *out = (uint8_t *)buf;
    *len = n;
    return 0;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void gr_uuid_to_base64url(const uint8_t id[16], char out[23])
{
    int o = 0;
    for (int i = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)id[i] << 16;
        if (i + 1 < 16) v |= (uint32_t)id[i + 1] << 8;
        if (i + 2 < 16) v |= id[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        if (i + 1 < 16) out[o++] = b64url[(v >> 6) & 63];
        if (i + 2 < 16) out[o++] = b64url[v & 63];
    }
    out[o] = '\0';
}

static int b64_val(char c)
{
    const char *p = strchr(b64url, c);
    return (c && p) ? (int)(p - b64url) : -1;
}

int gr_uuid_from_base64url(const char *s, size_t len, uint8_t id[16])
{
    if (len != 22) return -EINVAL;
    uint8_t out[18];
    int o = 0;
    for (size_t i = 0; i < 24; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = 0;
            if (i + k < 22) {
                d = b64_val(s[i + k]);
                if (d < 0) return -EINVAL;
            }
            v = (v << 6) | (uint32_t)d;
        }
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
        out[o++] = (uint8_t)v;
    }
    /* 22 chars carry 132 bits: the last 4 must be zero in a canonical encoding. */
    if (out[16] || out[17]) return -EINVAL;
    memcpy(id, out, 16);
    return 0;
}

void gr_uuid_random(uint8_t id[16])
{
    for (;;) {
        size_t got = 0;
        while (got < 16) {
            ssize_t r = getrandom(id + got, 16 - got, 0);
            if (r > 0) got += (size_t)r;
        }
        id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* version 4 */
        id[8] = (uint8_t)((id[8] & 0x3f) | 0x80); /* IETF variant */
        char text[23];
        gr_uuid_to_base64url(id, text);
        /* Kafka rejects the zero id, the metadata topic id (…0001) and ids whose text starts with '-'. */
        bool zero = true, meta = true;
        for (int i = 0; i < 16; i++) {
            zero &= id[i] == 0;
            meta &= id[i] == (i == 15 ? 1 : 0);
        }
        if (!zero && !meta && text[0] != '-') return;
    }
}
