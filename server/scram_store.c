/*
 * scram_store.c: the SCRAM credential store and its file. See scram_store.h.
 *
 * File format (text, one record a line):
 *   gregor-scram-credentials v1
 *   <mechanism> <base64 user name> <iterations> <base64 salt> <base64 StoredKey> <base64 ServerKey>
 *   ...
 *   crc32c <8 hex digits: CRC-32C of every byte before this line>
 */
#include "server/scram_store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "protocol/crc32c.h"
#include "protocol/errors.h"

#define HEADER "gregor-scram-credentials v1\n"

size_t gr_scram_digest_len(int mech)
{
    return mech == GR_SCRAM_SHA_256 ? 32 : mech == GR_SCRAM_SHA_512 ? 64 : 0;
}

const char *gr_scram_mech_name(int mech)
{
    return mech == GR_SCRAM_SHA_256 ? "SCRAM-SHA-256" : mech == GR_SCRAM_SHA_512 ? "SCRAM-SHA-512" : NULL;
}

int gr_scram_mech_by_name(const char *name, size_t len)
{
    for (int m = GR_SCRAM_SHA_256; m <= GR_SCRAM_SHA_512; m++)
        if (strlen(gr_scram_mech_name(m)) == len && memcmp(gr_scram_mech_name(m), name, len) == 0) return m;
    return 0;
}

static void user_free(struct gr_scram_user *u)
{
    free(u->name);
    OPENSSL_cleanse(u->cred, sizeof u->cred);
}

void gr_scram_store_clear(struct gr_scram_store *s)
{
    for (size_t i = 0; i < s->count; i++)
        user_free(&s->users[i]);
    free(s->users);
    s->users = NULL;
    s->count = s->cap = 0;
}

static struct gr_scram_user *find(const struct gr_scram_store *s, const char *name, size_t len)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->users[i].name_len == len && memcmp(s->users[i].name, name, len) == 0) return &s->users[i];
    return NULL;
}

const struct gr_scram_user *gr_scram_store_find(const struct gr_scram_store *s, const char *name, size_t len)
{
    return find(s, name, len);
}

const struct gr_scram_cred *gr_scram_store_cred(const struct gr_scram_store *s, const char *name, size_t len,
                                                int mech)
{
    const struct gr_scram_user *u = find(s, name, len);
    if (!u || !gr_scram_digest_len(mech) || u->cred[mech - 1].iterations == 0) return NULL;
    return &u->cred[mech - 1];
}

static const EVP_MD *md_of(int mech)
{
    return mech == GR_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512();
}

/* Sets a credential's keys from the salted password (RFC 5802: ClientKey = HMAC(SaltedPassword, "Client
 * Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")). */
static int derive(struct gr_scram_cred *c, int mech, const uint8_t *salted, size_t salted_len)
{
    uint8_t client_key[EVP_MAX_MD_SIZE];
    unsigned int n = 0, m = 0, k = 0;
    const EVP_MD *md = md_of(mech);
    int ok = HMAC(md, salted, (int)salted_len, (const uint8_t *)"Client Key", 10, client_key, &n) != NULL &&
             EVP_Digest(client_key, n, c->stored_key, &m, md, NULL) == 1 &&
             HMAC(md, salted, (int)salted_len, (const uint8_t *)"Server Key", 10, c->server_key, &k) != NULL;
    OPENSSL_cleanse(client_key, sizeof client_key);
    return ok && m == gr_scram_digest_len(mech) && k == m ? 0 : -ENOMEM;
}

static int set_cred(struct gr_scram_user *u, int mech, int32_t iterations, const uint8_t *salt,
                    size_t salt_len)
{
    struct gr_scram_cred *c = &u->cred[mech - 1];
    c->iterations = iterations;
    memcpy(c->salt, salt, salt_len);
    c->salt_len = salt_len;
    return 0;
}

static struct gr_scram_user *add_user(struct gr_scram_store *s, const char *name, size_t len, int *err)
{
    struct gr_scram_user *u = find(s, name, len);
    if (u) return u;
    if (s->count >= GR_SCRAM_USERS_MAX) return *err = -ENOSPC, NULL;
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct gr_scram_user *users = realloc(s->users, cap * sizeof *users);
        if (!users) return *err = -ENOMEM, NULL;
        s->users = users;
        s->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return *err = -ENOMEM, NULL;
    memcpy(copy, name, len);
    copy[len] = 0;
    u = &s->users[s->count++];
    memset(u, 0, sizeof *u);
    u->name = copy;
    u->name_len = len;
    return u;
}

static bool name_ok(const char *name, size_t len)
{
    return len > 0 && len <= GR_SCRAM_NAME_MAX && !memchr(name, 0, len);
}

int gr_scram_store_upsert(struct gr_scram_store *s, const char *name, size_t len, int mech,
                          int32_t iterations, const uint8_t *salt, size_t salt_len, const uint8_t *salted,
                          size_t salted_len)
{
    if (!gr_scram_digest_len(mech) || !name_ok(name, len) || salt_len > GR_SCRAM_SALT_MAX || iterations <= 0)
        return -EINVAL;
    struct gr_scram_cred c;
    memset(&c, 0, sizeof c);
    int err = derive(&c, mech, salted, salted_len);
    if (err) return err;
    struct gr_scram_user *u = add_user(s, name, len, &err);
    if (!u) return OPENSSL_cleanse(&c, sizeof c), err;
    u->cred[mech - 1] = c;
    OPENSSL_cleanse(&c, sizeof c);
    return set_cred(u, mech, iterations, salt, salt_len);
}

int gr_scram_store_delete(struct gr_scram_store *s, const char *name, size_t len, int mech)
{
    struct gr_scram_user *u = find(s, name, len);
    if (!u || !gr_scram_digest_len(mech) || u->cred[mech - 1].iterations == 0) return -ENOENT;
    OPENSSL_cleanse(&u->cred[mech - 1], sizeof u->cred[mech - 1]);
    if (u->cred[0].iterations == 0 && u->cred[1].iterations == 0) {
        size_t i = (size_t)(u - s->users);
        user_free(u);
        memmove(&s->users[i], &s->users[i + 1], (s->count - i - 1) * sizeof *s->users);
        s->count--;
    }
    return 0;
}

int gr_scram_store_set_user(struct gr_scram_store *s, const struct gr_scram_user *from)
{
    if (!name_ok(from->name, from->name_len)) return -EINVAL;
    int err = 0;
    struct gr_scram_user *u = add_user(s, from->name, from->name_len, &err);
    if (!u) return err;
    memcpy(u->cred, from->cred, sizeof u->cred);
    return 0;
}

int gr_scram_store_remove(struct gr_scram_store *s, const char *name, size_t len)
{
    struct gr_scram_user *u = find(s, name, len);
    if (!u) return -ENOENT;
    size_t i = (size_t)(u - s->users);
    user_free(u);
    memmove(&s->users[i], &s->users[i + 1], (s->count - i - 1) * sizeof *s->users);
    s->count--;
    return 0;
}

int16_t gr_scram_check_upsert(size_t name_len, int mech, int32_t iterations, size_t salt_len,
                              const char **msg)
{
    if (name_len == 0) return *msg = "Username must not be empty", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (!gr_scram_digest_len(mech))
        return *msg = "Unknown SCRAM mechanism", GR_ERR_UNSUPPORTED_SASL_MECHANISM;
    if (iterations < GR_SCRAM_ITERATIONS_MIN)
        return *msg = "Too few iterations", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (iterations > GR_SCRAM_ITERATIONS_MAX)
        return *msg = "Too many iterations", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (name_len > GR_SCRAM_NAME_MAX)
        return *msg = "Username longer than 1019 bytes", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (salt_len > GR_SCRAM_SALT_MAX)
        return *msg = "Salt longer than 256 bytes", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    return 0;
}

void gr_scram_b64(const uint8_t *in, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

int gr_scram_unb64(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (in[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
                continue;
            }
            if (pad || (v[k] = b64_val(in[i + k])) < 0) return -1; /* '=' only at the end */
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        int bytes = 3 - pad;
        if (pad && (w & ((1u << (8 * pad)) - 1))) return -1; /* canonical only: the padding bits are zero */
        if (o + (size_t)bytes > cap) return -1;
        for (int k = 0; k < bytes; k++)
            out[o++] = (uint8_t)(w >> (16 - 8 * k));
    }
    return (int)o;
}

/* Appends printf output to a growing buffer. */
struct buf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void put(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->oom || n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *gr_scram_store_format(const struct gr_scram_store *s, size_t *len)
{
    struct buf b = {NULL, 0, 0, false};
    char *tmp = malloc(4 * ((GR_SCRAM_NAME_MAX + 2) / 3) + 1);
    if (!tmp) return NULL;
    put(&b, "%s", HEADER);
    for (size_t i = 0; i < s->count; i++) {
        const struct gr_scram_user *u = &s->users[i];
        for (int m = GR_SCRAM_SHA_256; m <= GR_SCRAM_SHA_512; m++) {
            const struct gr_scram_cred *c = &u->cred[m - 1];
            if (c->iterations == 0) continue;
            size_t dl = gr_scram_digest_len(m);
            char salt[4 * ((GR_SCRAM_SALT_MAX + 2) / 3) + 1], sk[4 * ((GR_SCRAM_KEY_MAX + 2) / 3) + 1];
            char vk[sizeof sk];
            gr_scram_b64((const uint8_t *)u->name, u->name_len, tmp);
            gr_scram_b64(c->salt, c->salt_len, salt);
            gr_scram_b64(c->stored_key, dl, sk);
            gr_scram_b64(c->server_key, dl, vk);
            put(&b, "%s %s %d %s %s %s\n", gr_scram_mech_name(m), tmp, c->iterations, salt, sk, vk);
            OPENSSL_cleanse(sk, sizeof sk);
            OPENSSL_cleanse(vk, sizeof vk);
        }
    }
    free(tmp);
    if (!b.oom) put(&b, "crc32c %08x\n", b.p ? gr_crc32c(0, b.p, b.len) : 0);
    if (b.oom) {
        if (b.p) OPENSSL_cleanse(b.p, b.cap);
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

static int fail(char *err, size_t cap, int line, const char *what)
{
    snprintf(err, cap, "line %d: %s", line, what);
    return -1;
}

/* One credential line (NUL-terminated, no newline) into `s`. */
static int parse_line(struct gr_scram_store *s, char *l, char *err, size_t cap, int line)
{
    char *f[7];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(l, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (n < 7)
            f[n++] = t;
        else
            return fail(err, cap, line, "too many fields");
    if (n != 6) return fail(err, cap, line, "expected 6 fields");
    int mech = gr_scram_mech_by_name(f[0], strlen(f[0]));
    if (!mech) return fail(err, cap, line, "unknown mechanism");
    uint8_t name[GR_SCRAM_NAME_MAX], salt[GR_SCRAM_SALT_MAX], sk[GR_SCRAM_KEY_MAX], vk[GR_SCRAM_KEY_MAX];
    int nl = gr_scram_unb64(f[1], strlen(f[1]), name, sizeof name);
    if (nl <= 0 || memchr(name, 0, (size_t)nl)) return fail(err, cap, line, "bad user name");
    char *end;
    errno = 0;
    long it = strtol(f[2], &end, 10);
    if (errno || *end || it < 1 || it > GR_SCRAM_ITERATIONS_MAX)
        return fail(err, cap, line, "bad iterations");
    int sl = gr_scram_unb64(f[3], strlen(f[3]), salt, sizeof salt);
    if (sl < 0) return fail(err, cap, line, "bad salt");
    size_t dl = gr_scram_digest_len(mech);
    if (gr_scram_unb64(f[4], strlen(f[4]), sk, sizeof sk) != (int)dl ||
        gr_scram_unb64(f[5], strlen(f[5]), vk, sizeof vk) != (int)dl)
        return fail(err, cap, line, "bad key");
    if (gr_scram_store_cred(s, (const char *)name, (size_t)nl, mech))
        return fail(err, cap, line, "credential listed twice");
    int e = 0;
    struct gr_scram_user *u = add_user(s, (const char *)name, (size_t)nl, &e);
    if (!u) return fail(err, cap, line, e == -ENOSPC ? "too many users" : "out of memory");
    struct gr_scram_cred *c = &u->cred[mech - 1];
    memcpy(c->stored_key, sk, dl);
    memcpy(c->server_key, vk, dl);
    OPENSSL_cleanse(sk, sizeof sk);
    OPENSSL_cleanse(vk, sizeof vk);
    return set_cred(u, mech, (int32_t)it, salt, (size_t)sl);
}

int gr_scram_store_parse(struct gr_scram_store *s, const char *text, size_t len, char *err, size_t err_cap)
{
    gr_scram_store_clear(s);
    size_t hl = strlen(HEADER);
    if (len < hl || memcmp(text, HEADER, hl) != 0)
        return fail(err, err_cap, 1, "not a gregor-scram-credentials v1 file");
    /* the CRC line: the last line, "crc32c xxxxxxxx\n" */
    const size_t crc_line = 16;
    if (len < hl + crc_line || text[len - 1] != '\n' || memcmp(text + len - crc_line, "crc32c ", 7) != 0)
        return fail(err, err_cap, 0, "no crc32c line at the end (truncated?)");
    char hex[9];
    memcpy(hex, text + len - 9, 8);
    hex[8] = 0;
    char *end;
    unsigned long want = strtoul(hex, &end, 16);
    if (*end || (uint32_t)want != gr_crc32c(0, text, len - crc_line))
        return fail(err, err_cap, 0, "crc32c does not match the content (damaged)");
    size_t body = len - crc_line;
    char *copy = malloc(body + 1);
    if (!copy) return fail(err, err_cap, 0, "out of memory");
    memcpy(copy, text, body);
    copy[body] = 0;
    int rc = 0, line = 1;
    char *p = copy + hl;
    while (rc == 0 && *p) {
        line++;
        char *nl = strchr(p, '\n');
        if (!nl) {
            rc = fail(err, err_cap, line, "no newline");
            break;
        }
        *nl = 0;
        rc = parse_line(s, p, err, err_cap, line);
        p = nl + 1;
    }
    OPENSSL_cleanse(copy, body);
    free(copy);
    if (rc) gr_scram_store_clear(s);
    return rc;
}

int gr_scram_store_load(struct gr_scram_store *s, const char *log_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", log_dir, GR_SCRAM_FILE);
    gr_scram_store_clear(s);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        fprintf(stderr, "scram: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* a line is at most ~1700 bytes (name, salt and keys in base64): bound the file by the user count */
    const size_t max = (size_t)GR_SCRAM_USERS_MAX * 2 * 2048 + 64;
    char *text = malloc(max);
    size_t n = text ? fread(text, 1, max, f) : 0;
    int bad = text ? ferror(f) || n == max : 1;
    fclose(f);
    char err[160];
    int rc = bad ? -1 : gr_scram_store_parse(s, text, n, err, sizeof err);
    if (bad)
        fprintf(stderr, "scram: cannot read %s: %s\n", path,
                text ? "read error or too large" : "out of memory");
    else if (rc)
        fprintf(stderr,
                "scram: %s is damaged (%s): refusing to start; restore it or remove it (every "
                "SCRAM credential is then lost)\n",
                path, err);
    if (text) OPENSSL_cleanse(text, n);
    free(text);
    return rc;
}
