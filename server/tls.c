/*
 * tls.c: the SSL listeners' contexts and the non-blocking TLS reads and writes; see tls.h.
 * PEM text, from a file or inline, is read as Kafka's PEM store reads it (DefaultSslEngineFactory's PEM
 * parser): each -----BEGIN X----- ... -----END X----- block with any whitespace inside the base64 body, so
 * that a value continued over lines in server.properties (no newlines kept) parses. Blocks are rewritten
 * in the canonical form before OpenSSL reads them.
 */
#include "server/tls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "server/keystore.h"

#define GR_TLS_PEM_FILE_BYTES_MAX (1 << 20) /* a keystore or truststore file larger than this is refused */

/* The first OpenSSL error on the queue as text (or `fallback`), the queue cleared. */
static const char *ossl_reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "%s", fallback);
    ERR_clear_error();
    return buf;
}

/* Reads a whole file of at most GR_TLS_PEM_FILE_BYTES_MAX bytes, NUL-terminated; NULL with errno set. */
static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(GR_TLS_PEM_FILE_BYTES_MAX + 1);
    size_t n = buf ? fread(buf, 1, GR_TLS_PEM_FILE_BYTES_MAX + 1, f) : 0;
    int err = buf ? (ferror(f) ? EIO : 0) : ENOMEM;
    fclose(f);
    if (!err && n > GR_TLS_PEM_FILE_BYTES_MAX) err = EFBIG;
    if (err) {
        free(buf);
        errno = err;
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* PEM text in any whitespace layout -> canonical PEM (64-column base64 lines), as a memory BIO; NULL when
 * no complete block is found or out of memory. */
static BIO *pem_normalize(const char *text)
{
    BIO *out = BIO_new(BIO_s_mem());
    if (!out) return NULL;
    int blocks = 0;
    const char *p = text;
    for (;;) {
        const char *begin = strstr(p, "-----BEGIN ");
        if (!begin) break;
        const char *label = begin + 11, *label_end = strstr(label, "-----");
        if (!label_end) break;
        const char *body = label_end + 5, *end = strstr(body, "-----END ");
        if (!end) break;
        const char *end_close = strstr(end + 9, "-----");
        if (!end_close) break;
        int label_len = (int)(label_end - label);
        BIO_printf(out, "-----BEGIN %.*s-----\n", label_len, label);
        int col = 0;
        for (const char *c = body; c < end; c++) {
            if (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\n' || *c == '\\') continue;
            BIO_write(out, c, 1);
            if (++col == 64) {
                BIO_write(out, "\n", 1);
                col = 0;
            }
        }
        BIO_printf(out, "%s-----END %.*s-----\n", col ? "\n" : "", label_len, label);
        blocks++;
        p = end_close + 5;
    }
    if (!blocks) {
        BIO_free(out);
        return NULL;
    }
    return out;
}

/* PEM text from `location` (a file) or `inline_text`; NULL with a message naming `key` in err. */
static char *pem_text(const char *location, const char *inline_text, const char *key, char *err, size_t cap)
{
    if (inline_text) {
        char *t = strdup(inline_text);
        if (!t) snprintf(err, cap, "%s: out of memory", key);
        return t;
    }
    char *t = read_file(location);
    if (!t)
        snprintf(err, cap, "%s: cannot read '%s': %s", key, location,
                 errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
    return t;
}

static int password_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pw = u;
    if (!pw) return -1; /* an encrypted key and no ssl.key.password: fail instead of prompting */
    int n = (int)strlen(pw);
    if (n > size) n = size;
    memcpy(buf, pw, (size_t)n);
    return n;
}

/* Loads every certificate of PEM `text` into `certs` (a new stack); returns the count (0 on none). */
static int load_certs(const char *text, STACK_OF(X509) * *certs)
{
    *certs = sk_X509_new_null();
    BIO *bio = pem_normalize(text);
    if (!*certs || !bio) {
        BIO_free(bio);
        return 0;
    }
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
        if (!sk_X509_push(*certs, x)) X509_free(x);
    ERR_clear_error(); /* the end of the text reads as "no start line" */
    BIO_free(bio);
    return sk_X509_num(*certs);
}

/* Installs the private key `pkey` and its chain `certs` (leaf first) in ctx; `key_name`/`chain_name` name
 * where they came from in messages. 0 or -1 (err). */
static int install_key(SSL_CTX *ctx, EVP_PKEY *pkey, STACK_OF(X509) * certs, const char *key_name,
                       const char *chain_name, char *err, size_t cap)
{
    char why[256];
    int n = sk_X509_num(certs);
    bool ok = SSL_CTX_use_certificate(ctx, sk_X509_value(certs, 0)) == 1;
    for (int i = 1; ok && i < n; i++)
        ok = SSL_CTX_add1_chain_cert(ctx, sk_X509_value(certs, i)) == 1;
    if (!ok) {
        snprintf(err, cap, "%s: certificate refused: %s", chain_name, ossl_reason(why, sizeof why, "?"));
        return -1;
    }
    if (SSL_CTX_use_PrivateKey(ctx, pkey) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, cap, "%s: the private key does not match the certificate of %s (%s)", key_name,
                 chain_name, ossl_reason(why, sizeof why, "mismatch"));
        return -1;
    }
    return 0;
}

/* A JKS or PKCS12 keystore (server/keystore.h; it refuses one without ssl.keystore.password, as Kafka's
 * DefaultSslEngineFactory createKeystore). 0 or -1 (err). */
static int use_java_keystore(SSL_CTX *ctx, const struct gr_ssl_settings *s, char *err, size_t cap)
{
    struct gr_store st;
    if (gr_store_load("ssl.keystore", s->keystore_type, s->keystore_location, s->keystore_password,
                      s->key_password, true, &st, err, cap))
        return -1;
    int rc = install_key(ctx, st.key, st.chain, "ssl.keystore.location", "ssl.keystore.location", err, cap);
    gr_store_free(&st);
    return rc;
}

/* The keystore: key and chain from one PEM (ssl.keystore.location) or inline (KIP-651), or a JKS/PKCS12
 * store. 0 or -1 (err). */
static int use_keystore(SSL_CTX *ctx, const struct gr_ssl_settings *s, char *err, size_t cap)
{
    char why[256];
    bool inl = s->keystore_key || s->keystore_certificate_chain;
    if (!inl && !s->keystore_location) {
        snprintf(err, cap,
                 "an SSL listener needs ssl.keystore.location (a JKS, PKCS12 or PEM keystore), or "
                 "ssl.keystore.key and ssl.keystore.certificate.chain (PEM)");
        return -1;
    }
    if (inl && s->keystore_location) {
        snprintf(
            err, cap,
            "ssl.keystore.location and ssl.keystore.key/ssl.keystore.certificate.chain are both set: set "
            "one form");
        return -1;
    }
    if (inl && (!s->keystore_key || !s->keystore_certificate_chain)) {
        snprintf(err, cap, "%s is set but %s is not: inline PEM needs both",
                 s->keystore_key ? "ssl.keystore.key" : "ssl.keystore.certificate.chain",
                 s->keystore_key ? "ssl.keystore.certificate.chain" : "ssl.keystore.key");
        return -1;
    }
    if (strcmp(s->keystore_type, "PEM")) {
        if (!inl) return use_java_keystore(ctx, s, err, cap);
        snprintf(err, cap,
                 "ssl.keystore.type is %.32s: the inline ssl.keystore.key and ssl.keystore.certificate.chain "
                 "are PEM only (set ssl.keystore.type=PEM)",
                 s->keystore_type);
        return -1;
    }
    if (s->keystore_password) {
        /* as Kafka's DefaultSslEngineFactory: a PEM key is protected by ssl.key.password only (Kafka also
           requires ssl.key.password for a PEM file; Gregor takes an unencrypted key there too) */
        snprintf(err, cap,
                 "ssl.keystore.password cannot be specified with PEM format, only ssl.key.password may be "
                 "specified");
        return -1;
    }
    const char *key_name = inl ? "ssl.keystore.key" : "ssl.keystore.location";
    const char *chain_name = inl ? "ssl.keystore.certificate.chain" : "ssl.keystore.location";
    char *key_text = pem_text(s->keystore_location, s->keystore_key, key_name, err, cap);
    if (!key_text) return -1;
    char *chain_text = inl ? pem_text(NULL, s->keystore_certificate_chain, chain_name, err, cap) : key_text;
    if (!chain_text) {
        free(key_text);
        return -1;
    }
    int rc = -1;
    EVP_PKEY *pkey = NULL;
    STACK_OF(X509) *certs = NULL;
    BIO *kb = pem_normalize(key_text);
    if (kb) pkey = PEM_read_bio_PrivateKey(kb, NULL, password_cb, (void *)s->key_password);
    BIO_free(kb);
    if (!pkey) {
        snprintf(err, cap, "%s: no private key could be read (%s)%s", key_name,
                 ossl_reason(why, sizeof why, "no PEM private key block"),
                 s->key_password ? ": is ssl.key.password right?"
                                 : ": if it is encrypted, set ssl.key.password");
        goto out;
    }
    if (load_certs(chain_text, &certs) == 0) {
        snprintf(err, cap, "%s: no certificate found (expected PEM CERTIFICATE blocks)", chain_name);
        goto out;
    }
    rc = install_key(ctx, pkey, certs, key_name, chain_name, err, cap);
out:
    EVP_PKEY_free(pkey);
    sk_X509_pop_free(certs, X509_free);
    if (chain_text != key_text) free(chain_text);
    free(key_text);
    return rc;
}

/* The truststore and ssl.client.auth. 0 or -1 (err). */
static int use_truststore(SSL_CTX *ctx, const struct gr_ssl_settings *s, char *err, size_t cap)
{
    int mode = SSL_VERIFY_NONE;
    if (!strcmp(s->client_auth, "requested")) mode = SSL_VERIFY_PEER;
    if (!strcmp(s->client_auth, "required")) mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, NULL);
    const char *key = s->truststore_certificates ? "ssl.truststore.certificates" : "ssl.truststore.location";
    if (s->truststore_certificates && s->truststore_location) {
        snprintf(err, cap, "ssl.truststore.location and ssl.truststore.certificates are both set: set one");
        return -1;
    }
    if (s->truststore_password && !s->truststore_location) {
        snprintf(err, cap, "ssl.truststore.password is set but ssl.truststore.location is not");
        return -1;
    }
    if (!s->truststore_certificates && !s->truststore_location) {
        /* as Kafka falls back to the JVM's default trust store: the system's CA certificates */
        if (mode != SSL_VERIFY_NONE) SSL_CTX_set_default_verify_paths(ctx);
        return 0;
    }
    STACK_OF(X509) *certs = NULL;
    int rc = 0;
    if (strcmp(s->truststore_type, "PEM")) { /* JKS or PKCS12 (server/keystore.h) */
        if (s->truststore_certificates) {
            snprintf(err, cap,
                     "ssl.truststore.type is %.32s: the inline ssl.truststore.certificates are PEM only (set "
                     "ssl.truststore.type=PEM)",
                     s->truststore_type);
            return -1;
        }
        struct gr_store st;
        if (gr_store_load("ssl.truststore", s->truststore_type, s->truststore_location,
                          s->truststore_password, NULL, false, &st, err, cap))
            return -1;
        certs = st.trusted;
        st.trusted = NULL;
        gr_store_free(&st);
    } else {
        if (s->truststore_password) { /* Kafka's createTruststore */
            snprintf(err, cap, "ssl.truststore.password cannot be specified for PEM format");
            return -1;
        }
        char *text = pem_text(s->truststore_location, s->truststore_certificates, key, err, cap);
        if (!text) return -1;
        int n = load_certs(text, &certs);
        free(text);
        if (n == 0) {
            snprintf(err, cap, "%s: no certificate found (expected PEM CERTIFICATE blocks)", key);
            rc = -1;
        }
    }
    int n = sk_X509_num(certs);
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    for (int i = 0; rc == 0 && i < n; i++) {
        X509 *x = sk_X509_value(certs, i);
        if (X509_STORE_add_cert(store, x) != 1 || SSL_CTX_add_client_CA(ctx, x) != 1) {
            char why[256];
            snprintf(err, cap, "%s: certificate %d refused: %s", key, i + 1,
                     ossl_reason(why, sizeof why, "?"));
            rc = -1;
        }
    }
    sk_X509_pop_free(certs, X509_free);
    return rc;
}

/* ssl.enabled.protocols -> the lowest and highest version (TLSv1, TLSv1.1, TLSv1.2, TLSv1.3). */
static int use_protocols(SSL_CTX *ctx, const char *list, char *err, size_t cap)
{
    static const struct {
        const char *name;
        int version;
    } names[] = {{"TLSv1", TLS1_VERSION},
                 {"TLSv1.1", TLS1_1_VERSION},
                 {"TLSv1.2", TLS1_2_VERSION},
                 {"TLSv1.3", TLS1_3_VERSION}};
    int lo = 0, hi = 0;
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p) break;
        size_t len = strcspn(p, ", ");
        int v = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == len && !strncmp(p, names[i].name, len)) v = names[i].version;
        if (!v) {
            snprintf(err, cap,
                     "ssl.enabled.protocols: unknown protocol '%.*s' (TLSv1, TLSv1.1, TLSv1.2, TLSv1.3)",
                     (int)(len > 32 ? 32 : len), p);
            return -1;
        }
        if (!lo || v < lo) lo = v;
        if (v > hi) hi = v;
        p += len;
    }
    if (!lo) {
        snprintf(err, cap, "ssl.enabled.protocols is empty: name at least one of TLSv1.2, TLSv1.3");
        return -1;
    }
    SSL_CTX_set_min_proto_version(ctx, lo);
    SSL_CTX_set_max_proto_version(ctx, hi);
    return 0;
}

/* ssl.cipher.suites: standard (IANA, Java) names as Kafka takes them, or OpenSSL's; TLS 1.3 suites
 * (TLS_AES_*, TLS_CHACHA20_*) are set apart from the TLS 1.2 ones. Empty: OpenSSL's defaults. */
static int use_ciphers(SSL_CTX *ctx, const char *list, char *err, size_t cap)
{
    if (!list || !*list) return 0;
    size_t sz = strlen(list) * 2 + 2;
    char *v12 = calloc(1, sz), *v13 = calloc(1, sz);
    int rc = -1;
    if (!v12 || !v13) {
        snprintf(err, cap, "ssl.cipher.suites: out of memory");
        goto out;
    }
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p) break;
        size_t len = strcspn(p, ", ");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        p += len;
        bool tls13 = !strncmp(name, "TLS_", 4) && !strstr(name, "_WITH_");
        const char *os = tls13 ? name : OPENSSL_cipher_name(name);
        if (!os || !strcmp(os, "(NONE)")) os = name; /* already OpenSSL's name */
        char *dst = tls13 ? v13 : v12;
        if (*dst) strcat(dst, ":");
        strcat(dst, os);
    }
    char why[256];
    if (*v12 && SSL_CTX_set_cipher_list(ctx, v12) != 1) {
        snprintf(err, cap, "ssl.cipher.suites: no usable TLS 1.2 suite in '%.200s' (%s)", list,
                 ossl_reason(why, sizeof why, "?"));
        goto out;
    }
    if (*v13 && SSL_CTX_set_ciphersuites(ctx, v13) != 1) {
        snprintf(err, cap, "ssl.cipher.suites: no usable TLS 1.3 suite in '%.200s' (%s)", list,
                 ossl_reason(why, sizeof why, "?"));
        goto out;
    }
    rc = 0;
out:
    free(v12);
    free(v13);
    return rc;
}

struct ssl_ctx_st *gr_tls_ctx_new(const char *listener, const struct gr_ssl_settings *s, char *err,
                                  size_t cap)
{
    char inner[700];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, cap, "listener %s: cannot create a TLS context: %s", listener,
                 ossl_reason(inner, sizeof inner, "out of memory"));
        return NULL;
    }
    if (use_keystore(ctx, s, inner, sizeof inner) || use_truststore(ctx, s, inner, sizeof inner) ||
        use_protocols(ctx, s->enabled_protocols, inner, sizeof inner) ||
        use_ciphers(ctx, s->cipher_suites, inner, sizeof inner)) {
        snprintf(err, cap, "listener %s: %s", listener, inner);
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    /* partial writes and a retried write from a moved buffer: net.c resumes a write where it stopped;
       idle connections give their read and write buffers back (10,000 idle TLS clients stay small) */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    /* gregor.ssl.ktls.enable: OpenSSL hands the keys to the kernel after the handshake where it can (the tls
       ULP, a cipher the kernel offloads); where it cannot, the session stays in user space by itself */
    if (s->ktls_enable) SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
    /* read-ahead: a read from the socket takes what fits in the record buffer (about one 16 KiB record plus
       the start of the next) instead of a 5-byte header and then the body: half the read calls on produce
       (broker CPU per GB of SSL produce about a third lower, 2026-12-04); net.c then asks gr_tls_buffered. */
    SSL_CTX_set_read_ahead(ctx, 1);
    static const unsigned char sid[] = "gregor";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    return ctx;
}

void gr_tls_ctx_free(struct ssl_ctx_st *ctx)
{
    SSL_CTX_free(ctx);
}

struct ssl_st *gr_tls_new(struct ssl_ctx_st *ctx, int fd)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl) {
        ERR_clear_error();
        return NULL;
    }
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

struct ssl_ctx_st *gr_tls_client_ctx_new(const char *listener, const struct gr_ssl_settings *s,
                                         bool *verify_host, char *err, size_t cap)
{
    const char *alg = s->endpoint_identification_algorithm ? s->endpoint_identification_algorithm : "";
    if (*alg && strcasecmp(alg, "https")) {
        snprintf(err, cap,
                 "listener %s: ssl.endpoint.identification.algorithm is '%.64s': Gregor knows https (the "
                 "default: the peer's certificate must name its advertised host) and empty (no host check)",
                 listener, alg);
        return NULL;
    }
    *verify_host = *alg != 0;
    char inner[700];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        snprintf(err, cap, "listener %s: cannot create a TLS client context: %s", listener,
                 ossl_reason(inner, sizeof inner, "out of memory"));
        return NULL;
    }
    /* the keystore is optional for a client (presented only when the peer asks); the truststore always
       verifies the peer, whatever ssl.client.auth says of the other direction */
    bool keystore = s->keystore_location || s->keystore_key || s->keystore_certificate_chain;
    int rc = keystore ? use_keystore(ctx, s, inner, sizeof inner) : 0;
    if (!keystore && s->keystore_password) { /* Kafka's createKeystore */
        snprintf(inner, sizeof inner, "ssl.keystore.password is set but ssl.keystore.location is not");
        rc = -1;
    }
    if (!rc) rc = use_truststore(ctx, s, inner, sizeof inner);
    if (!rc && !s->truststore_location && !s->truststore_certificates) SSL_CTX_set_default_verify_paths(ctx);
    if (!rc) rc = use_protocols(ctx, s->enabled_protocols, inner, sizeof inner);
    if (!rc) rc = use_ciphers(ctx, s->cipher_suites, inner, sizeof inner);
    if (rc) {
        snprintf(err, cap, "listener %s (inter-broker client): %s", listener, inner);
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    return ctx;
}

/* Appends `n` bytes of `s` at out[*k] (cap bytes in all); false when they do not fit. */
static bool dn_put(char *out, size_t cap, size_t *k, const char *s, size_t n)
{
    if (*k + n >= cap) return false;
    memcpy(out + *k, s, n);
    *k += n;
    out[*k] = 0;
    return true;
}

/* Java's X500Principal RFC 2253 keyword for `nid`, NULL when Java writes the OID instead. */
static const char *dn_keyword(int nid)
{
    switch (nid) {
    case NID_commonName:
        return "CN";
    case NID_countryName:
        return "C";
    case NID_localityName:
        return "L";
    case NID_stateOrProvinceName:
        return "ST";
    case NID_organizationName:
        return "O";
    case NID_organizationalUnitName:
        return "OU";
    case NID_streetAddress:
        return "STREET";
    case NID_domainComponent:
        return "DC";
    case NID_userId:
        return "UID";
    default:
        return NULL;
    }
}

/* One attribute "<keyword>=<value>" (the value escaped as RFC 2253 section 2.4 asks), or, for an attribute
   Java has no keyword for, "<oid>=#<hex of the DER value>" as X500Principal.getName() writes it. */
static bool dn_entry(X509_NAME_ENTRY *e, char *out, size_t cap, size_t *k)
{
    ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
    ASN1_STRING *val = X509_NAME_ENTRY_get_data(e);
    const char *kw = dn_keyword(OBJ_obj2nid(obj));
    char oid[128];
    if (!kw) {
        if (OBJ_obj2txt(oid, sizeof oid, obj, 1) <= 0) return false;
        kw = oid;
    }
    if (!dn_put(out, cap, k, kw, strlen(kw)) || !dn_put(out, cap, k, "=", 1)) return false;
    if (kw == oid) {
        unsigned char *der = NULL;
        int n = i2d_ASN1_TYPE(&(ASN1_TYPE){.type = ASN1_STRING_type(val), .value.asn1_string = val}, &der);
        if (n <= 0) return false;
        bool ok = dn_put(out, cap, k, "#", 1);
        for (int i = 0; ok && i < n; i++) {
            char hx[3];
            snprintf(hx, sizeof hx, "%02x", der[i]);
            ok = dn_put(out, cap, k, hx, 2);
        }
        OPENSSL_free(der);
        return ok;
    }
    unsigned char *u = NULL;
    int n = ASN1_STRING_to_UTF8(&u, val);
    if (n < 0) return false;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        char c = (char)u[i];
        bool esc =
            strchr(",+\"\\<>;", c) != NULL || (i == 0 && (c == '#' || c == ' ')) || (i == n - 1 && c == ' ');
        if (esc) ok = dn_put(out, cap, k, "\\", 1);
        if (ok) ok = dn_put(out, cap, k, &c, 1);
    }
    OPENSSL_free(u);
    return ok;
}

int gr_tls_peer_dn(struct ssl_st *ssl, char *out, size_t cap)
{
    X509 *peer = SSL_get1_peer_certificate(ssl);
    if (!peer) return 0;
    const X509_NAME *name = X509_get_subject_name(peer);
    size_t k = 0;
    out[0] = 0;
    bool ok = cap > 0;
    int count = X509_NAME_entry_count(name);
    /* RFC 2253 writes the RDNs last to first; the attributes of one multi-valued RDN are joined by '+' */
    for (int i = count - 1; ok && i >= 0; i--) {
        X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
        if (i < count - 1) {
            bool same = X509_NAME_ENTRY_set(e) == X509_NAME_ENTRY_set(X509_NAME_get_entry(name, i + 1));
            ok = dn_put(out, cap, &k, same ? "+" : ",", 1);
        }
        if (ok) ok = dn_entry(e, out, cap, &k);
    }
    X509_free(peer);
    return ok ? 1 : -1;
}

enum gr_tls_send_path gr_tls_send_path(const struct ssl_st *ssl, bool (*ktls_send)(const struct ssl_st *ssl))
{
    if (!gr_tls_handshake_done(ssl)) return GR_TLS_SEND_USERSPACE; /* the keys are not installed yet */
    return (ktls_send ? ktls_send : gr_tls_ktls_send)(ssl) ? GR_TLS_SEND_KTLS : GR_TLS_SEND_USERSPACE;
}

bool gr_tls_ulp_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        size_t len = strcspn(p, " \t\n");
        if (len == n && n && !strncmp(p, name, n)) return true;
        p += len;
    }
    return false;
}

/* Whether setsockopt(TCP_ULP, "tls") takes on a connected loopback socket: the kernel loads its tls module on
 * demand for a process with CAP_NET_ADMIN, as it would for OpenSSL's first kTLS connection. 0, or an errno.
 */
static int ulp_try(void)
{
#ifdef TCP_ULP
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1, a = -1, err = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&sa, &sl) ||
        (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        connect(c, (struct sockaddr *)&sa, sizeof sa) || (a = accept(l, NULL, NULL)) < 0)
        err = errno ? errno : EIO;
    else if (setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls"))
        err = errno;
    if (a >= 0) close(a);
    if (c >= 0) close(c);
    if (l >= 0) close(l);
    return err;
#else
    return ENOPROTOOPT;
#endif
}

bool gr_tls_ktls_probe(bool enabled, char *why, size_t cap)
{
    if (!enabled) {
        snprintf(why, cap, "off (gregor.ssl.ktls.enable=false)");
        return false;
    }
#ifdef OPENSSL_NO_KTLS
    snprintf(why, cap, "unavailable: this OpenSSL is built without kTLS");
    return false;
#else
    char list[256] = "";
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");
    if (f) {
        size_t n = fread(list, 1, sizeof list - 1, f);
        list[n] = 0;
        fclose(f);
        list[strcspn(list, "\n")] = 0;
    }
    if (gr_tls_ulp_listed(list, "tls")) {
        snprintf(why, cap, "available");
        return true;
    }
    int err = ulp_try();
    if (!err) {
        snprintf(why, cap, "available (the kernel loaded its tls module)");
        return true;
    }
    snprintf(why, cap,
             "unavailable: the kernel has no tls ULP (tcp_available_ulp lists '%s'; TCP_ULP tls: %s)",
             f ? list : "(unreadable)", strerror(err));
    return false;
#endif
}
