/*
 * sasl_oauth.h: SASL/OAUTHBEARER on the server (RFC 7628, KIP-255, KIP-768), implementing server/sasl_mech.h,
 * after Kafka's OAuthBearerSaslServer. The client's initial response is parsed as Kafka's
 * OAuthBearerClientInitialResponse; its bearer token is checked by one of two validators, chosen per listener
 * as Kafka chooses the broker's callback handler:
 *  - unset listener.name.<l>.oauthbearer.sasl.server.callback.handler.class (or Kafka's
 *    OAuthBearerUnsecuredValidatorCallbackHandler): unsecured JWS (alg "none"), with the options
 *    unsecuredValidatorPrincipalClaimName (sub), unsecuredValidatorScopeClaimName (scope),
 *    unsecuredValidatorRequiredScope (space separated) and unsecuredValidatorAllowableClockSkewMs (0) of
 *    listener.name.<l>.oauthbearer.sasl.jaas.config (OAuthBearerLoginModule);
 *  - Kafka's OAuthBearerValidatorCallbackHandler: signed JWTs (RS256/384/512, ES256/384) checked against the
 *    keys of sasl.oauthbearer.jwks.endpoint.url (a file: URL, read once at start, or an http:// or https://
 *    URL fetched at start and refreshed in the background as Kafka's RefreshingHttpsJwks,
 * server/jwks_fetch.h; either must be listed in org.apache.kafka.sasl.oauthbearer.allowed.urls as Kafka 4.x
 * requires), with sasl.oauthbearer.expected.audience, .expected.issuer, .sub.claim.name (sub),
 * .scope.claim.name (scope) and .clock.skew.seconds (30), as Kafka's BrokerJwtValidator. A refused token is
 * answered as Kafka does: the challenge {"status":"invalid_token"} (or "insufficient_scope" with the required
 * scope), and after the client's \x01 SASL_AUTHENTICATION_FAILED with that JSON as the message; why is logged
 * on the broker only, never the token. Read next: server/sasl.c (the layer that drives it), server/jaas.h.
 */
#ifndef GR_SASL_OAUTH_H
#define GR_SASL_OAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "server/sasl_mech.h"

/* The OAUTHBEARER mechanism's table. */
extern const struct gr_sasl_mech gr_sasl_mech_oauthbearer;

/* Most bytes of a JWKS file (sasl.oauthbearer.jwks.endpoint.url) read at start, and most keys kept. */
#define GR_OAUTH_JWKS_MAX (1024 * 1024)
#define GR_OAUTH_KEYS_MAX 256

/* The client's initial response n,[a=<authzid>],\x01auth=<scheme> <token>\x01[<key>=<value>\x01]*\x01, as
 * Kafka's OAuthBearerClientInitialResponse matches it (authzid: SASLNAME of \x01-\x7F without '=' and ','
 * or =2C/=3D, kept escaped as Kafka compares it; keys [A-Za-z]+, values [\x21-\x7E \t\r\n]+; "auth" required,
 * scheme "bearer" in any case, token [-_.a-zA-Z0-9]+). Views into the input. */
struct gr_oauth_initial {
    const char *authzid, *token;
    size_t authzid_len, token_len;
    int extensions; /* key/value pairs other than auth */
};
/* Parses `in` (`len` bytes). Returns 0, or -1 and *why (a static message, Kafka's SaslException text). */
int gr_oauth_parse_initial(const uint8_t *in, size_t len, struct gr_oauth_initial *out, const char **why);

/* Decodes base64url `in` (`len` chars, padding optional, no other characters) into `out` (`cap` bytes).
 * Returns the decoded length, or -1 on a bad character, a bad length or when `cap` is too small. */
long gr_oauth_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap);

/* A validator's settings, strings as configured (NULL = Kafka's default). */
struct gr_oauth_options {
    int secured; /* OAuthBearerValidatorCallbackHandler: signed JWTs */
    const char
        *principal_claim;       /* unsecured: unsecuredValidatorPrincipalClaimName; secured: sub.claim.name */
    const char *scope_claim;    /* unsecuredValidatorScopeClaimName / sasl.oauthbearer.scope.claim.name */
    const char *required_scope; /* unsecured only: unsecuredValidatorRequiredScope */
    const char *clock_skew; /* unsecured: ...AllowableClockSkewMs (ms, 0); secured: clock.skew.seconds (30) */
    const char *jwks_url;   /* secured: file:<path> */
    const char *allowed_urls;      /* org.apache.kafka.sasl.oauthbearer.allowed.urls (comma separated) */
    const char *expected_audience; /* comma separated; any one must be in aud */
    const char *expected_issuer;
    /* http(s) JWKS URLs only (server/jwks_fetch.h): sasl.oauthbearer.jwks.endpoint.refresh.ms (3600000),
     * .retry.backoff.ms (100), .retry.backoff.max.ms (10000); the JAAS options ssl.truststore.type (PEM
     * only), ssl.truststore.location and ssl.truststore.certificates (JaasOptionsUtils) for the endpoint's
     * TLS */
    const char *refresh_ms, *backoff_ms, *backoff_max_ms;
    const char *truststore_type, *truststore_location, *truststore_certificates;
};
struct gr_oauth_validator;
/* Builds a validator (reading the JWKS file, or fetching the JWKS and starting its refresh thread, when
 * secured). Returns it, or NULL after writing into `err`
 * (`cap` bytes) what is wrong (the option's name, never a key). */
struct gr_oauth_validator *gr_oauth_validator_new(const struct gr_oauth_options *o, char *err, size_t cap);
/* Frees `v` (NULL ignored). */
void gr_oauth_validator_free(struct gr_oauth_validator *v);

/* A validation's outcome. */
struct gr_oauth_result {
    char principal[1024]; /* the principal claim's value (no "User:") */
    int64_t exp_ms;       /* exp, wall clock ms */
    const char *status;   /* on failure: "invalid_token" or "insufficient_scope" */
    char scope[256];      /* on insufficient_scope: the required scope as Kafka prints it ("[a, b]") */
    char why[256];        /* on failure: the reason, for the broker's log only (never token bytes) */
};
/* Validates `token` (`len` bytes) at wall-clock `now_ms`. Returns 0 (r->principal, r->exp_ms set) or -1
 * (r->status, r->why set). Never reads past `len`; any malformed input is -1. With an http(s) JWKS, a kid
 * not in the current key set is refused and asks the refresh thread for a refresh (never waits for it). */
int gr_oauth_validate(const struct gr_oauth_validator *v, const char *token, size_t len, int64_t now_ms,
                      struct gr_oauth_result *r);

#endif
