/*
 * keystore.c: JKS and PKCS12 stores; see keystore.h. The JKS layout (all integers big-endian):
 *   u32 magic 0xFEEDFEED, u32 version (1 or 2), u32 entry count, then per entry a u32 tag:
 *     1 private key: alias (u16 length + modified UTF-8), u64 timestamp, u32 length + the key as a DER
 *       EncryptedPrivateKeyInfo, u32 certificate count, per certificate (version 2: a certificate type
 *       string, u16 + UTF-8, "X.509") u32 length + DER;
 *     2 trusted certificate: alias, u64 timestamp, (version 2: type string) u32 length + DER;
 *   then SHA-1(password as UTF-16BE || "Mighty Aphrodite" || every byte before the digest).
 * Sun's KeyProtector: the encrypted data is a 20-byte salt, the key XORed with a SHA-1 keystream
 * (block i = SHA-1(password UTF-16BE || block i-1), block -1 = the salt), and SHA-1(password || plain key).
 */
#include "server/keystore.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/sha.h>

#define JKS_MAGIC 0xFEEDFEEDu
#define JCEKS_MAGIC 0xCECECECEu
#define PASSWORD_CHARS_MAX 1024 /* UTF-16 units of a password */
#define SUN_KEY_PROTECTOR_OID "1.3.6.1.4.1.42.2.17.1.1"

void gr_store_free(struct gr_store *s)
{
    EVP_PKEY_free(s->key);
    sk_X509_pop_free(s->chain, X509_free);
    sk_X509_pop_free(s->trusted, X509_free);
    s->key = NULL;
    s->chain = s->trusted = NULL;
}

/* `pw` (UTF-8) as Java's chars in big-endian bytes, into out (2 * PASSWORD_CHARS_MAX bytes); the byte count,
 * or -1 when it is not UTF-8 or too long. */
static int utf16be(const char *pw, unsigned char *out)
{
    const unsigned char *p = (const unsigned char *)pw;
    int n = 0;
    while (*p) {
        uint32_t c;
        int more;
        if (*p < 0x80) {
            c = *p;
            more = 0;
        } else if ((*p & 0xE0) == 0xC0) {
            c = *p & 0x1F;
            more = 1;
        } else if ((*p & 0xF0) == 0xE0) {
            c = *p & 0x0F;
            more = 2;
        } else if ((*p & 0xF8) == 0xF0) {
            c = *p & 0x07;
            more = 3;
        } else {
            return -1;
        }
        p++;
        for (int i = 0; i < more; i++, p++) {
            if ((*p & 0xC0) != 0x80) return -1;
            c = (c << 6) | (*p & 0x3F);
        }
        if (c > 0x10FFFF) return -1;
        uint16_t units[2];
        int k = 0;
        if (c >= 0x10000) {
            c -= 0x10000;
            units[k++] = (uint16_t)(0xD800 | (c >> 10));
            units[k++] = (uint16_t)(0xDC00 | (c & 0x3FF));
        } else {
            units[k++] = (uint16_t)c;
        }
        for (int i = 0; i < k; i++) {
            if (n / 2 >= PASSWORD_CHARS_MAX) return -1;
            out[n++] = (unsigned char)(units[i] >> 8);
            out[n++] = (unsigned char)(units[i] & 0xFF);
        }
    }
    return n;
}

/* SHA-1 over up to three parts (`b` and `c` may be NULL with length 0), into d (20 bytes). */
static void sha1(const void *a, size_t an, const void *b, size_t bn, const void *c, size_t cn,
                 unsigned char *d)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    bool ok = m && EVP_DigestInit_ex(m, EVP_sha1(), NULL) && EVP_DigestUpdate(m, a, an) &&
              (!bn || EVP_DigestUpdate(m, b, bn)) && (!cn || EVP_DigestUpdate(m, c, cn)) &&
              EVP_DigestFinal_ex(m, d, NULL);
    if (!ok) memset(d, 0, SHA_DIGEST_LENGTH); /* out of memory: matches no stored digest */
    EVP_MD_CTX_free(m);
}

/* A bounded reader over the store's bytes: every read checks what is left; `bad` latches. */
struct rd {
    const unsigned char *p, *end;
    bool bad;
};

static uint32_t rd_u32(struct rd *r)
{
    if (r->bad || r->end - r->p < 4) {
        r->bad = true;
        return 0;
    }
    uint32_t v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
    r->p += 4;
    return v;
}

/* `n` bytes, NULL (and bad) when fewer are left. */
static const unsigned char *rd_bytes(struct rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const unsigned char *b = r->p;
    r->p += n;
    return b;
}

/* A u16-length string (Java's writeUTF); its bytes and length. */
static const unsigned char *rd_utf(struct rd *r, size_t *len)
{
    const unsigned char *b = rd_bytes(r, 2);
    *len = b ? (size_t)(b[0] << 8 | b[1]) : 0;
    return b ? rd_bytes(r, *len) : NULL;
}

/* One certificate of a version-1/2 store (type string in version 2, u32 length, DER); NULL after err. */
static X509 *rd_cert(struct rd *r, uint32_t version, const char *what, const char *path, char *err,
                     size_t cap)
{
    if (version == 2) {
        size_t tl;
        const unsigned char *t = rd_utf(r, &tl);
        if (t && (tl != 5 || memcmp(t, "X.509", 5))) {
            snprintf(err, cap, "%s.location: '%s' holds a certificate of type '%.*s' (only X.509 is read)",
                     what, path, (int)(tl > 32 ? 32 : tl), (const char *)t);
            return NULL;
        }
    }
    uint32_t len = rd_u32(r);
    const unsigned char *der = rd_bytes(r, len);
    if (!der) return NULL; /* the caller reports the truncation */
    const unsigned char *q = der;
    X509 *x = d2i_X509(NULL, &q, (long)len);
    if (!x || q != der + len) {
        X509_free(x);
        ERR_clear_error();
        snprintf(err, cap, "%s.location: '%s' is a damaged JKS store (a certificate does not parse)", what,
                 path);
        return NULL;
    }
    return x;
}

/* Opens a Sun KeyProtector EncryptedPrivateKeyInfo (`der`, `len` bytes) with `pw` (UTF-16BE, `pwn`
 * bytes). Returns the key, or NULL: *wrong set when the password's check fails, else the key is damaged. */
static EVP_PKEY *jks_key(const unsigned char *der, size_t len, const unsigned char *pw, int pwn, bool *wrong)
{
    *wrong = false;
    const unsigned char *q = der;
    X509_SIG *sig = d2i_X509_SIG(NULL, &q, (long)len);
    EVP_PKEY *key = NULL;
    unsigned char *plain = NULL;
    size_t n = 0;
    if (!sig) goto out;
    const X509_ALGOR *alg;
    const ASN1_OCTET_STRING *data;
    X509_SIG_get0(sig, &alg, &data);
    const ASN1_OBJECT *oid;
    X509_ALGOR_get0(&oid, NULL, NULL, alg);
    char oidtxt[64];
    if (OBJ_obj2txt(oidtxt, sizeof oidtxt, oid, 1) <= 0 || strcmp(oidtxt, SUN_KEY_PROTECTOR_OID)) goto out;
    const unsigned char *e = ASN1_STRING_get0_data(data);
    int elen = ASN1_STRING_length(data);
    if (elen <= 2 * SHA_DIGEST_LENGTH) goto out;
    n = (size_t)elen - 2 * SHA_DIGEST_LENGTH;
    plain = malloc(n);
    if (!plain) goto out;
    unsigned char block[SHA_DIGEST_LENGTH];
    memcpy(block, e, SHA_DIGEST_LENGTH); /* the salt */
    for (size_t off = 0; off < n; off += SHA_DIGEST_LENGTH) {
        sha1(pw, (size_t)pwn, block, sizeof block, NULL, 0, block);
        for (size_t i = 0; i < SHA_DIGEST_LENGTH && off + i < n; i++)
            plain[off + i] = e[SHA_DIGEST_LENGTH + off + i] ^ block[i];
    }
    sha1(pw, (size_t)pwn, plain, n, NULL, 0, block);
    if (memcmp(block, e + SHA_DIGEST_LENGTH + n, SHA_DIGEST_LENGTH)) {
        *wrong = true;
        goto out;
    }
    q = plain;
    PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO(NULL, &q, (long)n);
    if (p8) key = EVP_PKCS82PKEY(p8);
    PKCS8_PRIV_KEY_INFO_free(p8);
out:
    if (plain) OPENSSL_cleanse(plain, n);
    free(plain);
    X509_SIG_free(sig);
    ERR_clear_error();
    return key;
}

int gr_jks_parse(const unsigned char *buf, size_t len, const char *what, const char *path,
                 const char *store_password, const char *key_password, bool want_key, struct gr_store *out,
                 char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    unsigned char spw[2 * PASSWORD_CHARS_MAX], kpw[2 * PASSWORD_CHARS_MAX];
    int spwn = 0, kpwn = 0;
    if (store_password && (spwn = utf16be(store_password, spw)) < 0) {
        snprintf(err, cap, "%s.password: not UTF-8 or longer than %d characters", what, PASSWORD_CHARS_MAX);
        return -1;
    }
    const char *kp = key_password ? key_password : store_password; /* Kafka's FileBasedStore.keyPassword */
    const char *kp_name = key_password ? "ssl.key.password" : "ssl.keystore.password";
    if (want_key && kp && (kpwn = utf16be(kp, kpw)) < 0) {
        snprintf(err, cap, "%s: not UTF-8 or longer than %d characters", kp_name, PASSWORD_CHARS_MAX);
        return -1;
    }
    if (len < 12 + SHA_DIGEST_LENGTH) {
        snprintf(err, cap, "%s.location: '%s' is a damaged JKS store (%zu bytes)", what, path, len);
        return -1;
    }
    if (store_password) { /* the integrity check first: any damaged or missing byte fails it */
        unsigned char d[SHA_DIGEST_LENGTH];
        sha1(spw, (size_t)spwn, "Mighty Aphrodite", 16, buf, len - SHA_DIGEST_LENGTH, d);
        if (memcmp(d, buf + len - SHA_DIGEST_LENGTH, SHA_DIGEST_LENGTH)) {
            snprintf(err, cap, "%s.password: wrong password or damaged store ('%s')", what, path);
            return -1;
        }
    }
    struct rd r = {buf, buf + len - SHA_DIGEST_LENGTH, false};
    uint32_t magic = rd_u32(&r), version = rd_u32(&r), count = rd_u32(&r);
    if (magic != JKS_MAGIC || (version != 1 && version != 2)) {
        snprintf(err, cap, "%s.location: '%s' is not a JKS store (magic %08x, version %u)", what, path, magic,
                 version);
        return -1;
    }
    if (count > GR_STORE_ENTRIES_MAX) {
        snprintf(err, cap, "%s.location: '%s' claims %u entries (at most %d are read)", what, path, count,
                 GR_STORE_ENTRIES_MAX);
        return -1;
    }
    out->trusted = sk_X509_new_null();
    if (!out->trusted) {
        snprintf(err, cap, "%s.location: out of memory", what);
        return -1;
    }
    int keys = 0;
    err[0] = 0;
    for (uint32_t i = 0; i < count && !r.bad && !err[0]; i++) {
        uint32_t tag = rd_u32(&r);
        size_t alen;
        const unsigned char *alias = rd_utf(&r, &alen);
        rd_bytes(&r, 8); /* the timestamp */
        if (r.bad) break;
        if (tag == 1) {
            uint32_t klen = rd_u32(&r);
            const unsigned char *kder = rd_bytes(&r, klen);
            uint32_t n = rd_u32(&r);
            if (r.bad) break;
            if (n == 0 || n > GR_STORE_CHAIN_MAX) {
                snprintf(err, cap,
                         "%s.location: '%s': the key entry '%.*s' has %u certificates (1 to %d read)", what,
                         path, (int)(alen > 64 ? 64 : alen), (const char *)alias, n, GR_STORE_CHAIN_MAX);
                break;
            }
            STACK_OF(X509) *chain = sk_X509_new_null();
            for (uint32_t j = 0; chain && j < n && !r.bad && !err[0]; j++) {
                X509 *x = rd_cert(&r, version, what, path, err, cap);
                if (x && !sk_X509_push(chain, x)) X509_free(x);
            }
            if (!chain || r.bad || err[0] || sk_X509_num(chain) != (int)n) {
                if (!chain) snprintf(err, cap, "%s.location: out of memory", what);
                sk_X509_pop_free(chain, X509_free);
                break;
            }
            if (!want_key) { /* a truststore: the leaf is trusted, as Java's trust manager takes it */
                X509 *leaf = sk_X509_shift(chain);
                if (!sk_X509_push(out->trusted, leaf)) X509_free(leaf);
                sk_X509_pop_free(chain, X509_free);
                continue;
            }
            if (++keys > 1) {
                sk_X509_pop_free(chain, X509_free);
                snprintf(
                    err, cap,
                    "%s.location: '%s' holds more than one private key: Gregor takes a keystore with one",
                    what, path);
                break;
            }
            bool wrong;
            out->key = jks_key(kder, klen, kpw, kpwn, &wrong);
            if (!out->key) {
                sk_X509_pop_free(chain, X509_free);
                if (wrong)
                    snprintf(err, cap, "%s: wrong password for the private key '%.*s' in '%s'%s", kp_name,
                             (int)(alen > 64 ? 64 : alen), (const char *)alias, path,
                             key_password ? ""
                                          : " (ssl.key.password is unset: the store's password was tried)");
                else
                    snprintf(err, cap,
                             "%s.location: '%s': the private key '%.*s' is damaged or not under Sun's key "
                             "protection (JKS)",
                             what, path, (int)(alen > 64 ? 64 : alen), (const char *)alias);
                break;
            }
            out->chain = chain;
        } else if (tag == 2) {
            X509 *x = rd_cert(&r, version, what, path, err, cap);
            if (x && !sk_X509_push(out->trusted, x)) X509_free(x);
        } else {
            snprintf(err, cap,
                     "%s.location: '%s': entry %u has tag %u (a JKS store holds 1 and 2; a JCEKS secret "
                     "key is not read)",
                     what, path, i + 1, tag);
        }
    }
    if (!err[0] && (r.bad || r.p != r.end))
        snprintf(err, cap, "%s.location: '%s' is a damaged JKS store (%s)", what, path,
                 r.bad ? "truncated" : "bytes after the last entry");
    if (!err[0] && want_key && !out->key)
        snprintf(err, cap, "%s.location: '%s' holds no private key entry", what, path);
    if (!err[0] && !want_key && sk_X509_num(out->trusted) == 0)
        snprintf(err, cap, "%s.location: '%s' holds no certificate", what, path);
    if (err[0]) {
        gr_store_free(out);
        return -1;
    }
    if (want_key) { /* a keystore's trusted entries are not used (Java's key manager ignores them) */
        sk_X509_pop_free(out->trusted, X509_free);
        out->trusted = NULL;
    }
    return 0;
}

/* Whether the OpenSSL error queue says an algorithm is not available (a legacy PKCS12 cipher). */
static bool unsupported_algorithm(void)
{
    unsigned long e;
    bool u = false;
    while ((e = ERR_get_error()))
        if (ERR_GET_REASON(e) == ERR_R_UNSUPPORTED || ERR_GET_REASON(e) == EVP_R_UNSUPPORTED_ALGORITHM)
            u = true;
    return u;
}

/* PKCS12 through OpenSSL; same contract as gr_store_load. */
static int p12_parse(const unsigned char *buf, size_t len, const char *what, const char *path,
                     const char *store_password, const char *key_password, bool want_key,
                     struct gr_store *out, char *err, size_t cap)
{
    if (want_key && key_password && strcmp(key_password, store_password)) {
        snprintf(err, cap,
                 "ssl.key.password: differs from ssl.keystore.password, but a PKCS12 store has one password "
                 "(keytool ignores another -keypass for PKCS12): unset it or make them equal");
        return -1;
    }
    const unsigned char *q = buf;
    PKCS12 *p12 = d2i_PKCS12(NULL, &q, (long)len);
    if (!p12) {
        ERR_clear_error();
        snprintf(err, cap, "%s.location: '%s' is neither a JKS nor a PKCS12 store (or is damaged)", what,
                 path);
        return -1;
    }
    int rc = -1;
    X509 *cert = NULL;
    STACK_OF(X509) *ca = NULL;
    if (store_password && PKCS12_mac_present(p12) && !PKCS12_verify_mac(p12, store_password, -1)) {
        snprintf(err, cap, "%s.password: wrong password or damaged store ('%s')", what, path);
        goto out;
    }
    static bool legacy_tried;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (PKCS12_parse(p12, store_password, want_key ? &out->key : NULL, &cert, &ca) == 1) break;
        bool unsupported = unsupported_algorithm();
        if (unsupported && attempt == 0 && !legacy_tried) {
            legacy_tried = true; /* RC2/3DES/RC4 live in OpenSSL 3's legacy provider; default stays */
            if (OSSL_PROVIDER_load(NULL, "default") && OSSL_PROVIDER_load(NULL, "legacy")) continue;
            ERR_clear_error();
        }
        if (unsupported)
            snprintf(
                err, cap,
                "%s.location: '%s' is protected by a legacy algorithm (RC2 or 3DES, as Java 8 and "
                "OpenSSL 1.1 wrote PKCS12) and OpenSSL's legacy provider is not available: re-create the "
                "store with Java 17's keytool, or load the legacy provider (OPENSSL_MODULES)",
                what, path);
        else if (!store_password)
            snprintf(
                err, cap,
                "%s.password: unset, but this PKCS12 store's certificates are encrypted: set the store's "
                "password ('%s')",
                what, path);
        else
            snprintf(err, cap, "%s.password: wrong password or damaged store ('%s')", what, path);
        goto out;
    }
    if (want_key) {
        if (!out->key || !cert) {
            snprintf(err, cap, "%s.location: '%s' holds no private key with its certificate", what, path);
            goto out;
        }
        out->chain = sk_X509_new_null();
        if (!out->chain || !sk_X509_push(out->chain, cert)) {
            snprintf(err, cap, "%s.location: out of memory", what);
            goto out;
        }
        cert = NULL;
        while (ca && sk_X509_num(ca) > 0) { /* PKCS12_parse gives the others in the store's order */
            X509 *x = sk_X509_shift(ca);
            if (sk_X509_num(out->chain) >= GR_STORE_CHAIN_MAX || !sk_X509_push(out->chain, x)) X509_free(x);
        }
    } else {
        out->trusted = ca ? ca : sk_X509_new_null();
        ca = NULL;
        if (!out->trusted || (cert && !sk_X509_push(out->trusted, cert))) {
            snprintf(err, cap, "%s.location: out of memory", what);
            goto out;
        }
        cert = NULL;
        if (sk_X509_num(out->trusted) == 0) {
            snprintf(err, cap, "%s.location: '%s' holds no certificate", what, path);
            goto out;
        }
    }
    rc = 0;
out:
    X509_free(cert);
    sk_X509_pop_free(ca, X509_free);
    PKCS12_free(p12);
    ERR_clear_error();
    if (rc) gr_store_free(out);
    return rc;
}

/* Whether "-----BEGIN " occurs in the first 4 KiB of `buf` (PEM text, perhaps after OpenSSL's bag lines). */
static bool looks_pem(const unsigned char *buf, size_t n)
{
    return memmem(buf, n < 4096 ? n : 4096, "-----BEGIN ", 11) != NULL;
}

int gr_store_load(const char *what, const char *type, const char *path, const char *store_password,
                  const char *key_password, bool want_key, struct gr_store *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (strcasecmp(type, "JKS") && strcasecmp(type, "PKCS12")) {
        snprintf(err, cap, "%s.type is '%.32s': Gregor reads JKS, PKCS12 and PEM%s", what, type,
                 !strcasecmp(type, "PEM") ? " (PEM in upper case, as Kafka)" : "");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s.location: cannot read '%s': %s", what, path, strerror(errno));
        return -1;
    }
    unsigned char *buf = malloc(GR_STORE_FILE_BYTES_MAX + 1);
    size_t n = buf ? fread(buf, 1, GR_STORE_FILE_BYTES_MAX + 1, f) : 0;
    bool ioerr = ferror(f);
    fclose(f);
    int rc = -1;
    if (!buf || ioerr || n > GR_STORE_FILE_BYTES_MAX) {
        snprintf(err, cap, "%s.location: cannot read '%s': %s", what, path,
                 !buf    ? "out of memory"
                 : ioerr ? "I/O error"
                         : "larger than 1 MiB");
        goto out;
    }
    uint32_t magic =
        n >= 4 ? (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3] : 0;
    bool pem = n > 0 && buf[0] != 0x30 && looks_pem(buf, n);
    if (want_key && !store_password && magic != JCEKS_MAGIC && !pem) { /* Kafka's createKeystore */
        snprintf(err, cap, "%s.password: unset, but '%s' is a %s keystore, which needs its password", what,
                 path, magic == JKS_MAGIC ? "JKS" : "PKCS12");
    } else if (magic == JKS_MAGIC) {
        rc = gr_jks_parse(buf, n, what, path, store_password, key_password, want_key, out, err, cap);
    } else if (magic == JCEKS_MAGIC) {
        snprintf(err, cap,
                 "%s.type: '%s' is a JCEKS store, which Gregor does not read: convert it with keytool "
                 "-importkeystore -deststoretype PKCS12",
                 what, path);
    } else if (pem) {
        snprintf(err, cap, "%s.type is %.32s but '%s' is PEM text: set %s.type=PEM", what, type, path, what);
    } else {
        rc = p12_parse(buf, n, what, path, store_password, key_password, want_key, out, err, cap);
    }
out:
    if (buf) OPENSSL_cleanse(buf, n > GR_STORE_FILE_BYTES_MAX ? GR_STORE_FILE_BYTES_MAX : n);
    free(buf);
    return rc;
}
