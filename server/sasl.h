/*
 * sasl.h: the SASL layer of the SASL_PLAINTEXT and SASL_SSL listeners (issue #23), after Kafka's
 * SaslServerAuthenticator. Each such listener gets a gr_sasl_listener at start (its enabled mechanisms,
 * each mechanism's per-listener context); each of its connections a gr_sasl session, which net.c asks about
 * every complete frame before dispatch (gr_sasl_gate) and which the SaslHandshake and SaslAuthenticate
 * handlers drive.
 * States, as Kafka's: before authentication only ApiVersions (once, before the handshake) and SaslHandshake
 * are taken, then only SaslAuthenticate (after SaslHandshake v1) or raw size-prefixed tokens (after v0,
 * pre-KIP-152 framing, answered with raw size-prefixed tokens); anything else closes the connection.
 * Frames before authentication are bounded by sasl.server.max.receive.size (gr_sasl_frame_max). A failure
 * is answered (SaslHandshake: UNSUPPORTED_SASL_MECHANISM with the enabled list; SaslAuthenticate:
 * SASL_AUTHENTICATION_FAILED with Kafka's message) after connection.failed.authentication.delay.ms, logged
 * (peer, mechanism, message; never a user name or password), and the connection is closed once the answer
 * is sent. KIP-368: with connections.max.reauth.ms > 0 a session expires that long after it authenticated;
 * an expired session's next request other than SaslHandshake closes the connection; a client that used
 * SaslAuthenticate v1+ re-authenticates in band (SaslHandshake + SaslAuthenticate) with the same mechanism
 * and must keep its principal.
 * Read next: server/sasl_mech.h (the mechanisms), server/handlers/sasl.c, server/net.c.
 */
#ifndef GR_SASL_H
#define GR_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/gen/messages.h"
#include "server/sasl_mech.h"

struct gr_broker;
struct gr_sasl_listener;
struct gr_sasl;

/* Builds the SASL side of listener `listener` of `b` from its settings (sasl.enabled.mechanisms, each served
 * mechanism's listener_new). Returns it, or NULL after writing into `err` (`cap` bytes) a message naming
 * the key at fault: a mechanism Gregor does not serve (Kafka's default GSSAPI among them), an empty list,
 * a PLAIN listener without users. */
struct gr_sasl_listener *gr_sasl_listener_new(struct gr_broker *b, const char *listener, char *err,
                                              size_t cap);
/* Frees it (NULL ignored); its sessions must be gone. */
void gr_sasl_listener_free(struct gr_sasl_listener *l);
/* Returns borrowed: the listener's enabled mechanisms, comma-separated (for the start-up log line). */
const char *gr_sasl_listener_mechanisms(const struct gr_sasl_listener *l);
/* The inter-broker listener `listener` (SASL_PLAINTEXT or SASL_SSL, its mechanisms `l`) is the one this
 * broker connects to others on: sets b->ib_sasl_mechanism from sasl.mechanism.inter.broker.protocol (which
 * must be one Gregor serves, and enabled on that listener, as Kafka's KafkaConfig requires) and
 * b->ib_sasl_username / ib_sasl_password from the username and password options of
 * listener.name.<listener>.<mechanism lower-case>.sasl.jaas.config (where Kafka's broker takes its own
 * inter-broker login: PlainLoginModule / ScramLoginModule); for OAUTHBEARER instead b->ib_oauth_login from
 * that entry's unsecuredLogin* options (common/oauth_login.h, Kafka's
 * OAuthBearerUnsecuredLoginCallbackHandler) and b->ib_sasl_username from its principal claim. Returns 0, or
 * -1 with a message naming the key at fault in `err` (`cap` bytes; never a password): the broker then exits
 * with status 2. */
int gr_sasl_inter_broker_setup(struct gr_broker *b, const char *listener, const struct gr_sasl_listener *l,
                               char *err, size_t cap);
/* Frees what gr_sasl_inter_broker_setup set (the password wiped); safe when it set nothing. */
void gr_sasl_inter_broker_free(struct gr_broker *b);

/* A new connection's session on listener `l`, `peer` ("host:port") copied for log lines. NULL when out of
 * memory. Free with gr_sasl_free (NULL ignored). */
struct gr_sasl *gr_sasl_new(struct gr_sasl_listener *l, const char *peer);
void gr_sasl_free(struct gr_sasl *s);

/* What net.c does with a complete frame of a SASL connection. */
enum gr_sasl_gate {
    GR_SASL_PASS = 0,  /* a Kafka request this state takes: dispatch it */
    GR_SASL_RAW = 1,   /* a raw token after SaslHandshake v0: gr_sasl_raw_token */
    GR_SASL_CLOSE = 2, /* refused: close the connection now (*why says why, for the log) */
};
/* Judges frame `frame` (`len` bytes after the size prefix) by the session's state, at monotonic time
 * `now_ms` (the KIP-368 expiry). Moves the state on for ApiVersions and a re-authentication's SaslHandshake.
 */
enum gr_sasl_gate gr_sasl_gate(struct gr_sasl *s, const uint8_t *frame, size_t len, int64_t now_ms,
                               const char **why);
/* The largest frame the session takes next (bytes): sasl.server.max.receive.size until authenticated (and
 * while re-authenticating), `socket_max` (socket.request.max.bytes) after. */
int64_t gr_sasl_frame_max(const struct gr_sasl *s, int64_t socket_max);
/* Whether the session failed: the connection closes once the answer in flight is sent. */
bool gr_sasl_failed(const struct gr_sasl *s);
/* Whether frames must wait for the ones before them to be answered (always, until authenticated: a
 * token's meaning depends on the state the previous one left). */
bool gr_sasl_in_handshake(const struct gr_sasl *s);

/* SaslHandshake (key 17) on session `s` (NULL: a listener without SASL; Kafka's KafkaApis answers
 * ILLEGAL_SASL_STATE) at `version`: fills `resp` (error code, the enabled mechanisms from `req`'s arena
 * `arena`). Returns true when it is a failure whose answer must wait
 * connection.failed.authentication.delay.ms (the connection then closes once it is sent). */
bool gr_sasl_handshake(struct gr_sasl *s, int16_t version, const struct gr_sasl_handshake_request *body,
                       struct gr_sasl_handshake_response *resp, struct gr_arena *arena);
/* SaslAuthenticate (key 36) on session `s` (NULL as above) at `version`: runs one step of the mechanism
 * on body->auth_bytes and fills `resp` (auth bytes copied into `arena`, session_lifetime_ms for KIP-368).
 * On success *principal (borrowed from the session, NULL otherwise) is the authenticated principal to set
 * on the connection. Returns true as gr_sasl_handshake. */
bool gr_sasl_authenticate(struct gr_sasl *s, int16_t version, const struct gr_sasl_authenticate_request *body,
                          struct gr_sasl_authenticate_response *resp, struct gr_arena *arena,
                          const char **principal);
/* A raw token (after SaslHandshake v0; `len` bytes): one step. Returns the mechanism's outcome; on
 * CONTINUE and DONE *out / *out_len is the token to send back size-prefixed (malloc'd, the caller frees;
 * NULL and 0 for an empty one, still sent as a zero size) and on DONE *principal as above. On FAIL nothing is
 * sent (Kafka closes the connection after the delay). */
enum gr_sasl_step_rc gr_sasl_raw_token(struct gr_sasl *s, const uint8_t *in, size_t len, uint8_t **out,
                                       size_t *out_len, const char **principal);

#endif
