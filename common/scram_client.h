/*
 * scram_client.h: the client side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka's
 * ScramSaslClient), for a broker authenticating to another broker over a SASL inter-broker listener
 * (issue #23). It lives in common/ because its user, cluster/broker_client.c, may not include server/ (where
 * the server mechanism and the credential store live); it needs only OpenSSL's libcrypto (PBKDF2, HMAC).
 *
 * An exchange: client-first "n,,n=<user>,r=<client nonce>" (no authzid, no channel binding, as Kafka's
 * client sends it); the server-first "r=<nonce>,s=<salt>,i=<iterations>[,ext]" is checked (its nonce must
 * start with the client's, salt and iterations bounded) and answered with the client-final
 * "c=biws,r=<nonce>,p=<proof>"; the server-final "v=<signature>" must carry the ServerSignature RFC 5802
 * section 3 defines (compared in constant time), or is "e=<error>". Every token from the peer is bounded
 * (GR_SCRAM_CLIENT_TOKEN_MAX) and parsed without allocation beyond that bound. Passwords are never logged
 * and are wiped with the exchange.
 * Read next: cluster/broker_client.c (its user), server/sasl_scram.c (the server side it talks to).
 */
#ifndef GR_SCRAM_CLIENT_H
#define GR_SCRAM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest server message the client takes (bytes); a longer one fails the exchange. */
#define GR_SCRAM_CLIENT_TOKEN_MAX 4096
/* Iteration bounds the client accepts in a server-first message: RFC 7677's minimum (Kafka's ScramMechanism
 * minIterations 4096) and Kafka's ScramControlManager.MAX_ITERATIONS (16384), the most a Kafka broker stores.
 */
#define GR_SCRAM_CLIENT_ITERATIONS_MIN 4096
#define GR_SCRAM_CLIENT_ITERATIONS_MAX 16384
/* The longest user name and password taken (bytes). */
#define GR_SCRAM_CLIENT_NAME_MAX 1019
#define GR_SCRAM_CLIENT_PASSWORD_MAX 4096
/* The longest combined nonce taken from the server, and the client-final message that then always fits. */
#define GR_SCRAM_CLIENT_NONCE_MAX 1024
#define GR_SCRAM_CLIENT_FINAL_MAX (9 + GR_SCRAM_CLIENT_NONCE_MAX + 3 + 88 + 1)

struct gr_scram_client;

/* Starts an exchange for `user` / `password` (borrowed during the call, copied) with SHA-512 when `sha512`,
 * else SHA-256. `nonce`: NULL for a random one (32 base64 characters from RAND_bytes), or a fixed printable
 * one without ',' for tests. Returns NULL for an empty or too long user or password, a bad nonce, or without
 * memory. */
struct gr_scram_client *gr_scram_client_new(bool sha512, const char *user, const char *password,
                                            const char *nonce);
/* Frees the exchange (NULL ignored), wiping the password and keys. */
void gr_scram_client_free(struct gr_scram_client *c);
/* The client-first message (borrowed, NUL-terminated, valid until free); *len its length. */
const char *gr_scram_client_first(struct gr_scram_client *c, size_t *len);
/* Takes the server-first message `in` (`len` bytes) and writes the client-final message into `out` (`cap`
 * bytes, NUL-terminated; GR_SCRAM_CLIENT_FINAL_MAX always fits), its length in *out_len. Returns 0, or -1
 * with the reason in `err` (`cap_err` bytes): too long, malformed, nonce not extending the client's, salt or
 * iterations out of bounds, called twice. */
int gr_scram_client_final(struct gr_scram_client *c, const uint8_t *in, size_t len, char *out, size_t cap,
                          size_t *out_len, char *err, size_t cap_err);
/* Checks the server-final message `in` (`len` bytes). Returns 0 when it carries the expected server
 * signature, else -1 with the reason in `err` ("e=" errors are quoted, bounded). */
int gr_scram_client_verify(struct gr_scram_client *c, const uint8_t *in, size_t len, char *err,
                           size_t cap_err);

#endif
