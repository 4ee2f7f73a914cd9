/*
 * tls_io.h: non-blocking TLS sessions on a socket, with OpenSSL (issue #23): the reads, writes and handshake
 * both sides use. The server side (server/tls.h: SSL listeners) and the client side (cluster/broker_client.h:
 * connections to other brokers over an SSL inter-broker listener) build their contexts from Kafka's ssl.*
 * settings in server/tls.c; this file only runs sessions on a connected non-blocking socket. No call here
 * blocks: each says which readiness (read or write) the socket needs before the call can go on.
 * Read next: server/tls.c (contexts), server/net.c and cluster/broker_client.c (the sockets).
 */
#ifndef GR_TLS_IO_H
#define GR_TLS_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct ssl_st;     /* OpenSSL's SSL */

/* What a TLS call that made no progress waits for. */
enum gr_tls_want { GR_TLS_WANT_NONE, GR_TLS_WANT_READ, GR_TLS_WANT_WRITE };

/* A client-side TLS session on the connected non-blocking socket `fd` (context `ctx` from
 * gr_tls_client_ctx_new, server/tls.h). When `verify_host` (Kafka's
 * ssl.endpoint.identification.algorithm=https, its default), the peer's certificate must name `host` (an IP
 * address: an IP subjectAltName; a host name: a DNS subjectAltName, then the common name, as OpenSSL's
 * X509_check_host) besides chaining to the truststore; a host name is also sent as SNI (an IP address is not,
 * as RFC 6066 and Java do). NULL when out of memory or `host` is empty. Free with gr_tls_free. */
struct ssl_st *gr_tls_client_new(struct ssl_ctx_st *ctx, int fd, const char *host, bool verify_host);
/* Frees a session (NULL ignored). Sends nothing: the socket is shut by the caller. */
void gr_tls_free(struct ssl_st *ssl);

/* Runs the handshake of a client session as far as the socket allows. Returns 1 when it is done, -1 with
 * *want READ or WRITE when the socket must be readable or writable before the call is repeated, or -1 with
 * *want NONE on a failure (refused, a certificate that does not verify: OpenSSL's verification result is
 * named, e.g. "certificate verify failed: unable to get local issuer certificate"; the peer closed), whose
 * reason is written into `why` (`cap` bytes). */
int gr_tls_handshake(struct ssl_st *ssl, enum gr_tls_want *want, char *why, size_t cap);

/* Reads up to `len` (> 0) decrypted bytes into `buf`, running the handshake first while it is not done.
 * Returns the byte count (> 0); 0 when the peer closed; -1 with *want READ or WRITE when the socket must be
 * readable or writable before the call is repeated, or with *want NONE on a failure (handshake refused, a
 * bad record, a reset), whose reason is written into `why` (`cap` bytes). */
ssize_t gr_tls_read(struct ssl_st *ssl, void *buf, size_t len, enum gr_tls_want *want, char *why, size_t cap);
/* Encrypts and writes up to `len` (> 0) bytes of `buf`; partial writes are taken (the context must set
 * SSL_MODE_ENABLE_PARTIAL_WRITE and SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, as server/tls.c's do). Returns
 * the bytes taken (> 0), or -1 as gr_tls_read. After a -1 with a want, repeat the call with the same bytes.
 */
ssize_t gr_tls_write(struct ssl_st *ssl, const void *buf, size_t len, enum gr_tls_want *want, char *why,
                     size_t cap);
/* Whether the session's sends are encrypted by the kernel (kTLS: OpenSSL's BIO_get_ktls_send on its write
 * BIO), which needs SSL_OP_ENABLE_KTLS on the context, the kernel's tls ULP and a cipher the kernel offloads;
 * true only once the handshake has installed the keys. When true, gr_tls_sendfile may send file bytes. */
bool gr_tls_ktls_send(const struct ssl_st *ssl);
/* Sends up to `len` (> 0) bytes of file `fd` from offset `off` through a session whose sends the kernel
 * encrypts (gr_tls_ktls_send true), with OpenSSL's SSL_sendfile (Linux sendfile on the kTLS socket: zero
 * copy). Call it only when no SSL_write is unfinished (its bytes would follow these). Returns the bytes sent
 * (> 0, may be fewer than len: resume at off + the count); 0 when the file ends before `off` (it shrank); -1
 * with *want WRITE when the socket is full (EAGAIN/EINTR/EBUSY: repeat once writable; READ only in the case
 * below), or with *want NONE on a failure whose reason (errno's text) is written into `why` (`cap` bytes).
 * On a session the kernel does not encrypt (tests: server/net.c's GREGOR_TEST_KTLS_EMULATE) the same contract
 * is kept with pread and SSL_write of at most 16 KiB a call (repeat a call that waited with the same off and
 * len, as SSL_write's retry needs). */
ssize_t gr_tls_sendfile(struct ssl_st *ssl, int fd, off_t off, size_t len, enum gr_tls_want *want, char *why,
                        size_t cap);
/* Whether decrypted bytes wait inside the session (the socket may be drained while they do). */
bool gr_tls_pending(const struct ssl_st *ssl);
/* Whether the session holds received bytes not yet returned by gr_tls_read: decrypted bytes, or, on a
 * context with read-ahead (server/tls.c's listener contexts), records read from the socket and not yet
 * decrypted, possibly only the start of one. The socket may never call back for them, so a caller comes back
 * to them itself, but never right after a gr_tls_read that answered -1 with WANT_READ: then what is held is
 * an incomplete record that waits for the socket, and coming back would spin (OpenSSL's SSL_has_pending). */
bool gr_tls_buffered(const struct ssl_st *ssl);
/* Whether the handshake is finished. */
bool gr_tls_handshake_done(const struct ssl_st *ssl);
/* The protocol version the session runs ("TLSv1.3"), for logs; static text. */
const char *gr_tls_version(const struct ssl_st *ssl);

#endif
