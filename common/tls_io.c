/*
 * tls_io.c: non-blocking TLS sessions (common/tls_io.h). Errors are taken off OpenSSL's per-thread queue
 * before and after each call, so one session's failure never shows in another's reason.
 */
#include "common/tls_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* The last OpenSSL error on the queue as text (or `fallback`), the queue cleared. */
static void ossl_reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "%s", fallback);
    ERR_clear_error();
}

struct ssl_st *gr_tls_client_new(struct ssl_ctx_st *ctx, int fd, const char *host, bool verify_host)
{
    if (!host || !*host) return NULL;
    SSL *ssl = SSL_new(ctx);
    if (!ssl) {
        ERR_clear_error();
        return NULL;
    }
    unsigned char addr[16];
    bool is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    bool ok = SSL_set_fd(ssl, fd) == 1;
    if (ok && verify_host) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        /* as Java's HTTPS endpoint identification: an address matches IP subjectAltNames only */
        ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host) == 1 : SSL_set1_host(ssl, host) == 1;
        if (ok && !is_ip) X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    if (ok && !is_ip) ok = SSL_set_tlsext_host_name(ssl, host) == 1;
    if (!ok) {
        SSL_free(ssl);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return ssl;
}

void gr_tls_free(struct ssl_st *ssl)
{
    SSL_free(ssl);
}

/* After a call that returned rc <= 0: what it waits for, or NONE with the reason in why. */
static ssize_t io_fail(SSL *ssl, int rc, enum gr_tls_want *want, char *why, size_t cap)
{
    int e = SSL_get_error(ssl, rc);
    *want = GR_TLS_WANT_NONE;
    switch (e) {
    case SSL_ERROR_WANT_READ:
        *want = GR_TLS_WANT_READ;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        *want = GR_TLS_WANT_WRITE;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify */
        return 0;
    case SSL_ERROR_SYSCALL:
        if (!ERR_peek_error() && (errno == 0 || errno == ECONNRESET || errno == EPIPE)) {
            snprintf(why, cap, "%s", errno ? strerror(errno) : "peer closed without close_notify");
            if (!errno) return 0;
            return -1;
        }
        snprintf(why, cap, "%s", errno ? strerror(errno) : "TLS I/O error");
        ERR_clear_error();
        return -1;
    default: {
        snprintf(why, cap, "TLS %s failed: ", SSL_is_init_finished(ssl) ? "record" : "handshake");
        size_t n = strlen(why);
        ossl_reason(why + n, cap - n, "?");
        long vr = SSL_get_verify_result(ssl);
        n = strlen(why);
        if (vr != X509_V_OK && n < cap)
            snprintf(why + n, cap - n, " (%s)", X509_verify_cert_error_string(vr));
        return -1;
    }
    }
}

int gr_tls_handshake(struct ssl_st *ssl, enum gr_tls_want *want, char *why, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(ssl);
    if (rc == 1) {
        *want = GR_TLS_WANT_NONE;
        return 1;
    }
    if (io_fail(ssl, rc, want, why, cap) == 0) snprintf(why, cap, "the peer closed during the TLS handshake");
    return -1;
}

ssize_t gr_tls_read(struct ssl_st *ssl, void *buf, size_t len, enum gr_tls_want *want, char *why, size_t cap)
{
    ERR_clear_error();
    errno = 0;
    size_t got = 0;
    int rc = SSL_read_ex(ssl, buf, len, &got);
    if (rc == 1) return (ssize_t)got;
    return io_fail(ssl, rc, want, why, cap);
}

ssize_t gr_tls_write(struct ssl_st *ssl, const void *buf, size_t len, enum gr_tls_want *want, char *why,
                     size_t cap)
{
    ERR_clear_error();
    errno = 0;
    size_t put = 0;
    int rc = SSL_write_ex(ssl, buf, len, &put);
    if (rc == 1) return (ssize_t)put;
    ssize_t r = io_fail(ssl, rc, want, why, cap);
    if (r == 0) snprintf(why, cap, "peer closed"); /* a write never reports "closed" as progress */
    return -1;
}

bool gr_tls_ktls_send(const struct ssl_st *ssl)
{
    BIO *wbio = SSL_get_wbio(ssl);
    return wbio && BIO_get_ktls_send(wbio) == 1;
}

ssize_t gr_tls_sendfile(struct ssl_st *ssl, int fd, off_t off, size_t len, enum gr_tls_want *want, char *why,
                        size_t cap)
{
    *want = GR_TLS_WANT_NONE;
    if (!gr_tls_ktls_send(ssl)) {
        /* the kernel does not encrypt this session (tests: GREGOR_TEST_KTLS_EMULATE): the same contract with
           a user-space copy; a retry after WANT_WRITE reads the same bytes again at the same offset and
           length, as SSL_write's retry needs */
        unsigned char buf[16 * 1024];
        ssize_t k;
        do
            k = pread(fd, buf, len < sizeof buf ? len : sizeof buf, off);
        while (k < 0 && errno == EINTR);
        if (k <= 0) {
            if (k < 0) snprintf(why, cap, "pread: %s", strerror(errno));
            return k;
        }
        return gr_tls_write(ssl, buf, (size_t)k, want, why, cap);
    }
    ERR_clear_error();
    errno = 0;
    /* OpenSSL 3.0's SSL_sendfile: flushes the write BIO, then sendfile(2) on the socket with `off` by value;
       EAGAIN, EINTR and EBUSY set the BIO's retry flag (SSL_get_error: WANT_WRITE), any other errno is raised
       on the error queue; 0 when sendfile sent nothing (the file ends before off) */
    ossl_ssize_t n = SSL_sendfile(ssl, fd, off, len, 0);
    if (n >= 0) return (ssize_t)n;
    int e = errno;
    if (SSL_get_error(ssl, (int)n) == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        *want = GR_TLS_WANT_WRITE;
        return -1;
    }
    if (e)
        snprintf(why, cap, "kTLS sendfile: %s", strerror(e));
    else
        ossl_reason(why, cap, "kTLS sendfile failed");
    ERR_clear_error();
    return -1;
}

bool gr_tls_pending(const struct ssl_st *ssl)
{
    /* SSL_pending: decrypted bytes only (SSL_has_pending also counts a partial record, which waits for the
       socket: feeding a read for it would spin) */
    return SSL_pending(ssl) > 0;
}

bool gr_tls_buffered(const struct ssl_st *ssl)
{
    return SSL_has_pending(ssl) == 1;
}

bool gr_tls_handshake_done(const struct ssl_st *ssl)
{
    return SSL_is_init_finished(ssl) == 1;
}

const char *gr_tls_version(const struct ssl_st *ssl)
{
    return SSL_get_version(ssl);
}
