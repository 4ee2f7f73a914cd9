/*
 * scram_client.c: the SCRAM client (RFC 5802, RFC 7677). See scram_client.h.
 */
#include "common/scram_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#define SALT_MAX 256
#define KEY_MAX 64

enum state { FIRST, FINAL, VERIFY, ENDED };

struct gr_scram_client {
    bool sha512;
    enum state state;
    char *password;
    size_t password_len;
    char *first;      /* "n,," + client-first-bare */
    size_t first_len; /* client-first-bare starts at 3 */
    char nonce[64];
    uint8_t server_sig[KEY_MAX];
};

static const EVP_MD *md(const struct gr_scram_client *c)
{
    return c->sha512 ? EVP_sha512() : EVP_sha256();
}

static size_t dlen(const struct gr_scram_client *c)
{
    return c->sha512 ? 64 : 32;
}

struct gr_scram_client *gr_scram_client_new(bool sha512, const char *user, const char *password,
                                            const char *nonce)
{
    size_t ul = user ? strlen(user) : 0, pl = password ? strlen(password) : 0;
    if (!ul || ul > GR_SCRAM_CLIENT_NAME_MAX || !pl || pl > GR_SCRAM_CLIENT_PASSWORD_MAX) return NULL;
    struct gr_scram_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->sha512 = sha512;
    if (nonce) {
        size_t n = strlen(nonce);
        bool ok = n > 0 && n < sizeof c->nonce;
        for (size_t i = 0; ok && i < n; i++)
            ok = nonce[i] >= 0x21 && nonce[i] <= 0x7e && nonce[i] != ',';
        if (!ok) return free(c), NULL;
        memcpy(c->nonce, nonce, n + 1);
    } else {
        uint8_t r[24];
        if (RAND_bytes(r, sizeof r) != 1) return free(c), NULL;
        EVP_EncodeBlock((unsigned char *)c->nonce, r, sizeof r); /* 32 characters, no ',' */
    }
    /* "n,," "n=" escaped user ",r=" nonce: a user's ',' and '=' become =2C and =3D (RFC 5802 5.1) */
    size_t cap = 3 + 2 + 3 * ul + 3 + strlen(c->nonce) + 1;
    if (!(c->first = malloc(cap)) || !(c->password = malloc(pl + 1))) {
        gr_scram_client_free(c);
        return NULL;
    }
    size_t o = (size_t)snprintf(c->first, cap, "n,,n=");
    for (size_t i = 0; i < ul; i++) {
        if (user[i] == ',')
            o += (size_t)snprintf(c->first + o, cap - o, "=2C");
        else if (user[i] == '=')
            o += (size_t)snprintf(c->first + o, cap - o, "=3D");
        else
            c->first[o++] = user[i];
    }
    o += (size_t)snprintf(c->first + o, cap - o, ",r=%s", c->nonce);
    c->first_len = o;
    memcpy(c->password, password, pl + 1);
    c->password_len = pl;
    return c;
}

void gr_scram_client_free(struct gr_scram_client *c)
{
    if (!c) return;
    if (c->password) OPENSSL_cleanse(c->password, c->password_len);
    free(c->password);
    free(c->first);
    OPENSSL_cleanse(c, sizeof *c);
    free(c);
}

const char *gr_scram_client_first(struct gr_scram_client *c, size_t *len)
{
    if (c->state == FIRST) c->state = FINAL;
    *len = c->first_len;
    return c->first;
}

/* Finds attribute `name` ("r", "s", "i") among the comma-separated "x=value" fields of `p` (`n` bytes);
 * returns its value's start and length, or false. */
static bool attr(const char *p, size_t n, char name, const char **v, size_t *vl)
{
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && p[e] != ',')
            e++;
        if (e - i >= 2 && p[i] == name && p[i + 1] == '=') {
            *v = p + i + 2;
            *vl = e - i - 2;
            return true;
        }
        i = e + 1;
    }
    return false;
}

/* Decodes base64 `in` (`n` bytes, padded) into `out` (`cap` bytes). Returns the length or -1. */
static int unb64(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n == 0 || n % 4 || n / 4 * 3 > cap + 2) return -1;
    uint8_t tmp[(GR_SCRAM_CLIENT_TOKEN_MAX / 4) * 3 + 3];
    if (n / 4 * 3 > sizeof tmp) return -1;
    int r = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)n);
    if (r < 0) return -1;
    int pad = (in[n - 1] == '=') + (in[n - 2] == '=');
    r -= pad;
    if (r < 0 || (size_t)r > cap) return -1;
    memcpy(out, tmp, (size_t)r);
    return r;
}

static int fail(struct gr_scram_client *c, char *err, size_t cap, const char *why)
{
    c->state = ENDED;
    snprintf(err, cap, "%s", why);
    return -1;
}

int gr_scram_client_final(struct gr_scram_client *c, const uint8_t *in, size_t len, char *out, size_t cap,
                          size_t *out_len, char *err, size_t cap_err)
{
    if (c->state != FINAL) return fail(c, err, cap_err, "SCRAM client: out of order");
    if (len > GR_SCRAM_CLIENT_TOKEN_MAX) return fail(c, err, cap_err, "SCRAM server-first message too long");
    const char *p = (const char *)in, *r, *s, *it;
    size_t rl, sl, il;
    for (size_t i = 0; i < len; i++)
        if (p[i] < 0x20 || p[i] > 0x7e)
            return fail(c, err, cap_err, "SCRAM server-first message not printable");
    if (len >= 2 && p[0] == 'e' && p[1] == '=')
        return fail(c, err, cap_err, "SCRAM server-first message is an error");
    if (!attr(p, len, 'r', &r, &rl) || !attr(p, len, 's', &s, &sl) || !attr(p, len, 'i', &it, &il) ||
        len < 2 || p[0] != 'r')
        return fail(c, err, cap_err, "malformed SCRAM server-first message");
    size_t cn = strlen(c->nonce);
    if (rl <= cn || rl > GR_SCRAM_CLIENT_NONCE_MAX || memcmp(r, c->nonce, cn))
        return fail(c, err, cap_err, "SCRAM server nonce does not extend the client's");
    uint8_t salt[SALT_MAX];
    int saltn = unb64(s, sl, salt, sizeof salt);
    if (saltn <= 0) return fail(c, err, cap_err, "SCRAM salt malformed or over 256 bytes");
    long iters = 0;
    for (size_t i = 0; i < il; i++) {
        if (it[i] < '0' || it[i] > '9' || iters > GR_SCRAM_CLIENT_ITERATIONS_MAX)
            return fail(c, err, cap_err, "SCRAM iteration count malformed or out of bounds");
        iters = iters * 10 + (it[i] - '0');
    }
    if (il == 0 || iters < GR_SCRAM_CLIENT_ITERATIONS_MIN || iters > GR_SCRAM_CLIENT_ITERATIONS_MAX)
        return fail(c, err, cap_err, "SCRAM iteration count malformed or out of bounds");
    if (cap < GR_SCRAM_CLIENT_FINAL_MAX)
        return fail(c, err, cap_err, "SCRAM client: output buffer too small");

    size_t dl = dlen(c);
    uint8_t salted[KEY_MAX], ckey[KEY_MAX], stored[KEY_MAX], csig[KEY_MAX], skey[KEY_MAX], proof[KEY_MAX];
    unsigned int l = 0;
    int ok = PKCS5_PBKDF2_HMAC(c->password, (int)c->password_len, salt, saltn, (int)iters, md(c), (int)dl,
                               salted) == 1;
    ok = ok && HMAC(md(c), salted, (int)dl, (const unsigned char *)"Client Key", 10, ckey, &l);
    ok = ok && EVP_Digest(ckey, dl, stored, NULL, md(c), NULL) == 1;
    ok = ok && HMAC(md(c), salted, (int)dl, (const unsigned char *)"Server Key", 10, skey, &l);
    /* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
    int wn = snprintf(out, cap, "c=biws,r=%.*s", (int)rl, r);
    size_t am_len = (c->first_len - 3) + 1 + len + 1 + (size_t)wn;
    char *am = ok ? malloc(am_len) : NULL;
    if (am) {
        memcpy(am, c->first + 3, c->first_len - 3);
        am[c->first_len - 3] = ',';
        memcpy(am + c->first_len - 2, p, len);
        am[c->first_len - 2 + len] = ',';
        memcpy(am + c->first_len - 1 + len, out, (size_t)wn);
        ok = HMAC(md(c), stored, (int)dl, (unsigned char *)am, am_len, csig, &l) &&
             HMAC(md(c), skey, (int)dl, (unsigned char *)am, am_len, c->server_sig, &l);
        free(am);
    }
    OPENSSL_cleanse(salted, sizeof salted);
    OPENSSL_cleanse(skey, sizeof skey);
    if (!am || !ok) {
        OPENSSL_cleanse(ckey, sizeof ckey);
        return fail(c, err, cap_err, "SCRAM client: out of memory or a digest failed");
    }
    for (size_t i = 0; i < dl; i++)
        proof[i] = ckey[i] ^ csig[i];
    OPENSSL_cleanse(ckey, sizeof ckey);
    memcpy(out + wn, ",p=", 4);
    EVP_EncodeBlock((unsigned char *)out + wn + 3, proof, (int)dl);
    *out_len = strlen(out);
    c->state = VERIFY;
    return 0;
}

int gr_scram_client_verify(struct gr_scram_client *c, const uint8_t *in, size_t len, char *err,
                           size_t cap_err)
{
    if (c->state != VERIFY) return fail(c, err, cap_err, "SCRAM client: out of order");
    if (len > GR_SCRAM_CLIENT_TOKEN_MAX) return fail(c, err, cap_err, "SCRAM server-final message too long");
    const char *p = (const char *)in;
    if (len >= 2 && p[0] == 'e' && p[1] == '=') {
        size_t n = len - 2 > 128 ? 128 : len - 2;
        char why[200];
        snprintf(why, sizeof why, "SCRAM server error: %.*s", (int)n, p + 2);
        for (char *q = why; *q; q++)
            if (*q < 0x20 || *q > 0x7e) *q = '?';
        return fail(c, err, cap_err, why);
    }
    const char *v;
    size_t vl;
    uint8_t sig[KEY_MAX + 3];
    if (len < 2 || p[0] != 'v' || !attr(p, len, 'v', &v, &vl))
        return fail(c, err, cap_err, "malformed SCRAM server-final message");
    int n = unb64(v, vl, sig, sizeof sig);
    if (n != (int)dlen(c) || CRYPTO_memcmp(sig, c->server_sig, dlen(c)))
        return fail(c, err, cap_err,
                    "SCRAM server signature does not verify: the peer does not know the credential");
    c->state = ENDED;
    return 0;
}
