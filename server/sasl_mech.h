/*
 * sasl_mech.h: the server side of one SASL mechanism (issue #23), as the SASL layer of a connection drives
 * it (SaslHandshake picks the mechanism by name, each SaslAuthenticate token, or each raw token after a
 * SaslHandshake v0, is one step). A mechanism is a table of three functions; an exchange is its state for
 * one authentication of one connection. PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and
 * OAUTHBEARER (RFC 7628, KIP-255) each provide one table; the SASL layer lists the ones it serves
 * (sasl.enabled.mechanisms picks among them per listener).
 * Rules every mechanism keeps: a client token is at most GR_SASL_TOKEN_MAX bytes (the SASL layer refuses a
 * longer one before the step); a failure's message never says which part was wrong (Kafka answers
 * "Authentication failed: Invalid username or password" alike for an unknown user and a wrong password);
 * passwords and tokens are never logged.
 * Read next: the SASL layer that calls these (server/sasl.c).
 */
#ifndef GR_SASL_MECH_H
#define GR_SASL_MECH_H

#include <stddef.h>
#include <stdint.h>

struct gr_broker;
struct gr_config;
struct gr_sasl_exchange; /* one mechanism's per-authentication state */

/* The longest client token a step is given (bytes). Kafka bounds a SASL frame before authentication by
 * sasl.server.max.receive.size (default 524288, BrokerSecurityConfigs; SaslServerAuthenticator). */
#define GR_SASL_TOKEN_MAX 524288

/* A step's outcome. */
enum gr_sasl_step_rc {
    GR_SASL_CONTINUE = 0, /* *out is the challenge to send; the client answers with another token */
    GR_SASL_DONE = 1,     /* authenticated: *out (may be empty) is the final token, principal is set */
    GR_SASL_FAIL = 2,     /* refused: err holds the message for SaslAuthenticate's error_message */
};

struct gr_sasl_mech {
    /* The mechanism's name as clients send it in SaslHandshake ("PLAIN", "SCRAM-SHA-256"). */
    const char *name;
    /* Starts one authentication on broker `b` (the mechanism finds its users, credentials or keys there).
     * Returns the exchange, or NULL when out of memory (the connection is then closed). */
    struct gr_sasl_exchange *(*start)(struct gr_broker *b);
    /* Takes the client's token `in` (`in_len` bytes, at most GR_SASL_TOKEN_MAX) and answers. On CONTINUE
     * and DONE, *out / *out_len are the token to send back (malloc'd, the caller frees; NULL and 0 for
     * none). On DONE, `principal` (`principal_cap` bytes) holds "User:<name>" and *lifetime_ms the
     * credential's own remaining lifetime (ms; 0 = none, as for PLAIN and SCRAM; OAUTHBEARER gives the
     * token's exp), which KIP-368's session lifetime is bounded by. On FAIL, `err` (`err_cap` bytes) holds
     * the message sent to the client. A step after DONE or FAIL is FAIL. */
    enum gr_sasl_step_rc (*step)(struct gr_sasl_exchange *x, const uint8_t *in, size_t in_len, uint8_t **out,
                                 size_t *out_len, char *principal, size_t principal_cap, int64_t *lifetime_ms,
                                 char *err, size_t err_cap);
    /* Frees the exchange (NULL ignored), wiping any secret it held. */
    void (*free)(struct gr_sasl_exchange *x);
    /* Optional (NULL: the mechanism keeps nothing per listener; zero in a table that does not name them).
     * listener_new builds at start what the mechanism needs on listener `listener` from `cfg` (PLAIN: its
     * users from listener.name.<listener>.plain.sasl.jaas.config); it returns the context, or NULL after
     * writing into `err` (`err_cap` bytes) a message naming the key at fault (the broker then exits with
     * status 2). listener_free frees it (NULL ignored). start_listener, when set, is called instead of start
     * with that context. */
    void *(*listener_new)(const struct gr_config *cfg, const char *listener, char *err, size_t err_cap);
    void (*listener_free)(void *ctx);
    struct gr_sasl_exchange *(*start_listener)(struct gr_broker *b, void *ctx);
};
/* A step's FAIL with an empty `err` asks the SASL layer for Kafka's generic message (SaslServerAuthenticator,
 * for a SaslException: "Authentication failed during authentication due to invalid credentials with SASL
 * mechanism <name>", "re-authentication" when re-authenticating), which tells the client nothing more. */

#endif
