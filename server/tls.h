/*
 * tls.h: TLS for the SSL listeners (issue #23, first slice: client listeners), with OpenSSL.
 * A listener whose security protocol is SSL (listener.security.protocol.map) gets one server context built
 * at start from its settings (struct gr_ssl_settings, Kafka's ssl.* names): a PEM key and certificate
 * chain (ssl.keystore.location, or inline ssl.keystore.key + ssl.keystore.certificate.chain, KIP-651), a PEM
 * truststore for client certificates, ssl.client.auth, ssl.enabled.protocols and ssl.cipher.suites. Any
 * problem is reported at start naming the key, never at the first connection.
 * Each connection of that listener gets an SSL object on its non-blocking socket; the reads and writes here
 * never block: they say which readiness (read or write) the socket needs before the call can go on.
 * The peer's subject (gr_tls_peer_dn) feeds the principal mapping (server/ssl_principal.h).
 * Not here yet (later slices of #23): kTLS, certificate reload, SASL, inter-broker TLS.
 * Read next: server/net.c (the connections that call these).
 */
#ifndef GR_TLS_H
#define GR_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "server/config.h"

struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct ssl_st;     /* OpenSSL's SSL */

/* What a TLS call that made no progress waits for. */
enum gr_tls_want { GR_TLS_WANT_NONE, GR_TLS_WANT_READ, GR_TLS_WANT_WRITE };

/* Builds the server context of listener `listener` from `s`. Returns it, or NULL after writing into `err`
 * (`cap` bytes) a message naming the key at fault (a missing or unreadable file, a key that does not
 * decrypt with ssl.key.password or does not match the certificate, a JKS/PKCS12 store, an unknown
 * protocol or cipher suite). Free it with gr_tls_ctx_free. */
struct ssl_ctx_st *gr_tls_ctx_new(const char *listener, const struct gr_ssl_settings *s, char *err,
                                  size_t cap);
/* Frees a context from gr_tls_ctx_new (NULL ignored; connections hold their own reference). */
void gr_tls_ctx_free(struct ssl_ctx_st *ctx);

/* A server-side TLS session on the connected non-blocking socket `fd` (the handshake runs inside the first
 * reads). NULL when out of memory. Free with gr_tls_free. */
struct ssl_st *gr_tls_new(struct ssl_ctx_st *ctx, int fd);
/* Frees a session (NULL ignored). Sends nothing: the socket is shut by the caller. */
void gr_tls_free(struct ssl_st *ssl);

/* Reads up to `len` (> 0) decrypted bytes into `buf`, running the handshake first while it is not done.
 * Returns the byte count (> 0); 0 when the peer closed; -1 with *want READ or WRITE when the socket must be
 * readable or writable before the call is repeated, or with *want NONE on a failure (handshake refused, a
 * bad record, a reset), whose reason is written into `why` (`cap` bytes). */
ssize_t gr_tls_read(struct ssl_st *ssl, void *buf, size_t len, enum gr_tls_want *want, char *why, size_t cap);
/* Encrypts and writes up to `len` (> 0) bytes of `buf`; partial writes are taken. Returns the bytes taken
 * (> 0), or -1 as gr_tls_read. After a -1 with a want, repeat the call with the same bytes. */
ssize_t gr_tls_write(struct ssl_st *ssl, const void *buf, size_t len, enum gr_tls_want *want, char *why,
                     size_t cap);
/* Whether decrypted bytes wait inside the session (the socket may be drained while they do). */
bool gr_tls_pending(const struct ssl_st *ssl);
/* Whether the handshake is finished. */
bool gr_tls_handshake_done(const struct ssl_st *ssl);
/* The subject of the peer's (verified) certificate after the handshake, in RFC 2253 form as Java's
 * X500Principal.getName() writes it (Kafka's DefaultKafkaPrincipalBuilder): RDNs last to first, ',' between
 * them, '+' inside a multi-valued one, keywords CN C L ST O OU STREET DC UID, other attributes as
 * <oid>=#<hex DER>, values escaped per RFC 2253. Written into `out` (`cap` bytes). Returns 1, 0 when the peer
 * sent no certificate, -1 when the name does not fit or cannot be read. Java differs on rare forms
 * (non-UTF-8 string types, the order inside a multi-valued RDN). */
int gr_tls_peer_dn(struct ssl_st *ssl, char *out, size_t cap);

#endif
