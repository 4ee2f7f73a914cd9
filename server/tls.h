/*
 * tls.h: TLS for the SSL listeners (issue #23, first slice: client listeners), with OpenSSL.
 * A listener whose security protocol is SSL (listener.security.protocol.map) gets one server context built
 * at start from its settings (struct gr_ssl_settings, Kafka's ssl.* names): a key and certificate chain
 * (ssl.keystore.location: JKS/PKCS12, server/keystore.h, or PEM; or inline ssl.keystore.key + ssl.keystore.
 * certificate.chain, KIP-651), a truststore (JKS, PKCS12 or PEM) for client certificates, ssl.client.auth,
 * ssl.enabled.protocols and ssl.cipher.suites. Any problem is reported at start naming the key, never at the
 * first connection.
 * Each connection of that listener gets an SSL object on its non-blocking socket; the reads and writes here
 * never block: they say which readiness (read or write) the socket needs before the call can go on.
 * The peer's subject (gr_tls_peer_dn) feeds the principal mapping (server/ssl_principal.h).
 * The inter-broker listener, when SSL, also gets a client context (gr_tls_client_ctx_new) for this broker's
 * connections to the others (cluster/broker_client.h).
 * kTLS (gregor.ssl.ktls.enable): the contexts ask OpenSSL for it; gr_tls_send_path says per connection
 * whether the kernel encrypts its sends (then Fetch's file ranges go out with SSL_sendfile, server/net.c).
 * Not here yet (later slices of #23): SASL between brokers. Certificate reload: server/tls_reload.h.
 * Read next: server/net.c (the connections that call these).
 */
#ifndef GR_TLS_H
#define GR_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/tls_io.h" /* the sessions' reads and writes, shared with cluster/broker_client.c */
#include "server/config.h"

/* Builds the server context of listener `listener` from `s`. Returns it, or NULL after writing into `err`
 * (`cap` bytes) a message naming the key at fault (a missing or unreadable file, a key that does not
 * decrypt with ssl.key.password or does not match the certificate, a wrong store password or a damaged
 * JKS/PKCS12 store, an unknown protocol or cipher suite). Free it with gr_tls_ctx_free. */
struct ssl_ctx_st *gr_tls_ctx_new(const char *listener, const struct gr_ssl_settings *s, char *err,
                                  size_t cap);
/* Frees a context from gr_tls_ctx_new (NULL ignored; connections hold their own reference). */
void gr_tls_ctx_free(struct ssl_ctx_st *ctx);

/* A server-side TLS session on the connected non-blocking socket `fd` (the handshake runs inside the first
 * reads). NULL when out of memory. Free with gr_tls_free. */
struct ssl_st *gr_tls_new(struct ssl_ctx_st *ctx, int fd);
/* The subject of the peer's (verified) certificate after the handshake, in RFC 2253 form as Java's
 * X500Principal.getName() writes it (Kafka's DefaultKafkaPrincipalBuilder): RDNs last to first, ',' between
 * them, '+' inside a multi-valued one, keywords CN C L ST O OU STREET DC UID, other attributes as
 * <oid>=#<hex DER>, values escaped per RFC 2253. Written into `out` (`cap` bytes). Returns 1, 0 when the peer
 * sent no certificate, -1 when the name does not fit or cannot be read. Java differs on rare forms
 * (non-UTF-8 string types, the order inside a multi-valued RDN). */
int gr_tls_peer_dn(struct ssl_st *ssl, char *out, size_t cap);

/* Builds the client context this broker's connections to other brokers use when the inter-broker listener
 * `listener` is SSL, from that listener's settings `s`, as Kafka's inter-broker client does
 * (DefaultSslEngineFactory in client mode): the peer's certificate must chain to the truststore
 * (ssl.truststore.*, else the system's CA certificates); the keystore (ssl.keystore.*), when set, is
 * presented when the peer asks for a client certificate; ssl.enabled.protocols and ssl.cipher.suites as for
 * the listener. *verify_host is set from ssl.endpoint.identification.algorithm: true for https (Kafka's
 * default, any case), false for empty; any other value is refused. Returns the context, or NULL after
 * writing into `err` (`cap` bytes) a message naming the key at fault. Free it with gr_tls_ctx_free. */
struct ssl_ctx_st *gr_tls_client_ctx_new(const char *listener, const struct gr_ssl_settings *s,
                                         bool *verify_host, char *err, size_t cap);

/* Which way a TLS connection sends Fetch's file ranges, decided once after its handshake. */
enum gr_tls_send_path { GR_TLS_SEND_USERSPACE = 0, GR_TLS_SEND_KTLS = 1 };
/* The send path of session `ssl`: KTLS when its handshake is done and `ktls_send` (NULL: gr_tls_ktls_send,
 * common/tls_io.h; unit tests inject another) says the kernel encrypts its sends, else USERSPACE (pread +
 * SSL_write). Never KTLS for a session the kernel does not encrypt for. */
enum gr_tls_send_path gr_tls_send_path(const struct ssl_st *ssl, bool (*ktls_send)(const struct ssl_st *ssl));
/* Whether `name` is a whole word of `list` (the text of /proc/sys/net/ipv4/tcp_available_ulp: names separated
 * by spaces, a newline at the end). NULL or empty list: false. */
bool gr_tls_ulp_listed(const char *list, const char *name);
/* Says at start whether kTLS send can switch on (the SSL listeners' log line): false with "off
 * (gregor.ssl.ktls.enable=false)" when `enabled` is false, "unavailable: ..." with the reason when this
 * OpenSSL has no kTLS or the kernel has no tls ULP (it is not in tcp_available_ulp and setsockopt(TCP_ULP,
 * "tls") on a loopback connection fails: the kernel loads the module on demand for root, as for OpenSSL's
 * first connection); true with "available". Written into `why` (`cap` bytes). Available does not promise
 * every connection: the cipher must be one the kernel offloads (gr_tls_send_path decides per connection). */
bool gr_tls_ktls_probe(bool enabled, char *why, size_t cap);
#endif
