/*
 * oauth_login.h: the token a broker logs in with over SASL/OAUTHBEARER to other brokers (issue #23), as
 * Kafka's default client login makes it: OAuthBearerUnsecuredLoginCallbackHandler's unsecured JWS (RFC 7515
 * header {"alg":"none"}, base64url claims, an empty signature: "header.claims.") built from the JAAS options
 * of the inter-broker listener's OAuthBearerLoginModule entry:
 *   unsecuredLoginStringClaim_<name>="value"   a string claim (the principal claim, `sub`, is required)
 *   unsecuredLoginNumberClaim_<name>="number"  a number claim
 *   unsecuredLoginListClaim_<name>="<d>a<d>b"  a list of strings, split at the value's first character <d>
 *   unsecuredLoginPrincipalClaimName           the principal claim's name (default `sub`)
 *   unsecuredLoginLifetimeSeconds              the token's lifetime (default 3600)
 * `iat` (now, seconds with milliseconds) and `exp` (iat + lifetime) are set by the maker, as Kafka's handler
 * does, and may not be given. A fresh token is made for every authentication and re-authentication, so the
 * token a connection re-authenticates with (KIP-368, before the server's session ends, which it bounds by
 * the token's exp) is always a new one: Kafka refreshes the login's token on a timer instead, with the same
 * effect on the wire. Options outside the unsecuredLogin* family are left to their readers. Bounds: at most
 * GR_OAUTH_LOGIN_CLAIMS_MAX claims and GR_OAUTH_LOGIN_TOKEN_MAX bytes of token.
 * Read next: cluster/broker_client.c (the OAUTHBEARER client-first message), server/sasl.c (the options).
 */
#ifndef GR_COMMON_OAUTH_LOGIN_H
#define GR_COMMON_OAUTH_LOGIN_H

#include <stddef.h>
#include <stdint.h>

#define GR_OAUTH_LOGIN_CLAIMS_MAX 64
#define GR_OAUTH_LOGIN_TOKEN_MAX 16384
/* Kafka's OAuthBearerUnsecuredLoginCallbackHandler default lifetime (seconds). */
#define GR_OAUTH_LOGIN_LIFETIME_DEFAULT_S 3600

struct gr_oauth_login;

/* A new login with no claims yet (principal claim `sub`, lifetime 3600 s). NULL when out of memory. */
struct gr_oauth_login *gr_oauth_login_new(void);
/* Frees it (NULL ignored). */
void gr_oauth_login_free(struct gr_oauth_login *l);
/* Takes one JAAS option `key`=`value` (both borrowed, copied). Returns 1 when it is not an unsecuredLogin*
 * option (ignored), 0 when taken, -1 with a message in `err` (`cap` bytes, naming the option, never its value
 * beyond a claim name) for a bad one: an unknown unsecuredLogin* option, an empty claim name, a claim given
 * twice, iat or exp, a number claim that is not a JSON number, a list claim without a delimiter, a lifetime
 * that is not a positive integer of seconds, more than GR_OAUTH_LOGIN_CLAIMS_MAX claims (Kafka's
 * OAuthBearerUnsecuredLoginCallbackHandler refuses the same at login). */
int gr_oauth_login_option(struct gr_oauth_login *l, const char *key, const char *value, char *err,
                          size_t cap);
/* Checks the login once every option is in: the principal claim must be a non-empty string claim (Kafka:
 * "Must supply a non-empty ... principal claim"). Returns 0, or -1 with a message in `err`. */
int gr_oauth_login_check(const struct gr_oauth_login *l, char *err, size_t cap);
/* Returns borrowed: the principal claim's value (the subject the server will see), "" before check. */
const char *gr_oauth_login_principal(const struct gr_oauth_login *l);
/* Makes an unsecured JWS issued at `now_ms` (wall clock, Unix milliseconds) into `out` (`cap` bytes, NUL
 * terminated). Returns its length, or -1 when it would not fit (cap or GR_OAUTH_LOGIN_TOKEN_MAX). */
int gr_oauth_login_token(const struct gr_oauth_login *l, int64_t now_ms, char *out, size_t cap);

#endif
