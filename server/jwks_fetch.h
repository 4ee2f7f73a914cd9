/*
 * jwks_fetch.h: the JWKS of sasl.oauthbearer.jwks.endpoint.url (http:// or https://) fetched at start and
 * refreshed in the background, after Kafka 4.x's RefreshingHttpsJwks (issue #23). The first fetch happens in
 * gr_jwks_fetcher_start and a failure there stops the broker (Kafka: KafkaException "Could not refresh JWKS"
 * from configure). Then one thread per fetcher, never the libev loop, refreshes every refresh_ms
 * (sasl.oauthbearer.jwks.endpoint.refresh.ms) and on demand (gr_jwks_fetcher_expedite, when a token names a
 * kid the set lacks); a refresh that fails is retried as Kafka's Retry (backoff from
 * ...retry.backoff.ms doubling, all attempts within ...retry.backoff.max.ms) and then given up, keeping the
 * previous keys. Each body is handed whole to the caller's apply function on that thread, which parses it
 * and swaps its key set in under its own lock. A body is bounded (GR_JWKS_BODY_MAX; Kafka has no bound), a
 * transfer by GR_JWKS_TIMEOUT_MS; TLS is verified (peer and host name) against the system CA store or the
 * PEM truststore given (Kafka: JaasOptionsUtils' ssl.truststore.* in the JAAS options).
 * Read next: server/sasl_oauth.c (the validator that owns a fetcher).
 */
#ifndef GR_JWKS_FETCH_H
#define GR_JWKS_FETCH_H

#include <stddef.h>
#include <stdint.h>

/* Most bytes of one JWKS response (a longer one fails that attempt); most ms one transfer may take. */
#define GR_JWKS_BODY_MAX (1024 * 1024)
#define GR_JWKS_TIMEOUT_MS 10000

/* Kafka's RefreshingHttpsJwks: a kid missing from the set asks for a refresh at most once per
 * GR_JWKS_MISSING_MS (MISSING_KEY_ID_CACHE_IN_FLIGHT_MS), for at most GR_JWKS_MISSING_MAX kids remembered
 * (the least recently asked one forgotten first), and never for a kid longer than GR_JWKS_MISSING_KID_MAX. */
#define GR_JWKS_MISSING_MS 60000
#define GR_JWKS_MISSING_MAX 16
#define GR_JWKS_MISSING_KID_MAX 1000

/* The wait before the next attempt after `attempt` (1-based) failed attempts of one refresh that began
 * `elapsed_ms` ago, as Kafka's Retry.execute: backoff_ms * 2^(attempt-1), at most what is left of
 * backoff_max_ms. Returns the wait (ms, > 0), or -1 when the refresh gives up. */
int64_t gr_jwks_retry_wait_ms(int attempt, int64_t backoff_ms, int64_t backoff_max_ms, int64_t elapsed_ms);

/* The kids that asked for a refresh lately (not thread-safe: the caller locks). Zero-initialise. */
struct gr_jwks_missing {
    int n;
    struct {
        char kid[GR_JWKS_MISSING_KID_MAX + 1];
        int64_t next_ms; /* monotonic ms before which this kid asks no more */
        int64_t used;    /* recency stamp */
    } e[GR_JWKS_MISSING_MAX];
    int64_t clock;
};
/* Whether unknown kid `kid` at monotonic `now_ms` should start a refresh (Kafka's maybeExpediteRefresh):
 * 1 (remembered until now_ms + GR_JWKS_MISSING_MS), or 0 (asked within that time, or too long). */
int gr_jwks_missing_ask(struct gr_jwks_missing *m, const char *kid, int64_t now_ms);
/* Forgets `kid` (a refresh found it). */
void gr_jwks_missing_forget(struct gr_jwks_missing *m, const char *kid);

/* Parses a body and swaps it in. Called on the fetcher's thread (and in gr_jwks_fetcher_start). Returns 0,
 * or -1 after writing into `err` (`cap` bytes) why the body is unusable (the keys in use are then kept). */
typedef int (*gr_jwks_apply_fn)(void *arg, const char *body, size_t len, char *err, size_t cap);

struct gr_jwks_fetch_opts {
    const char *url;        /* http:// or https:// */
    const char *ca_file;    /* PEM certificates to trust instead of the system store, or NULL */
    const char *ca_pem;     /* the same inline (ssl.truststore.certificates), or NULL */
    int64_t refresh_ms;     /* > 0 */
    int64_t backoff_ms;     /* >= 0 */
    int64_t backoff_max_ms; /* >= backoff_ms */
};
struct gr_jwks_fetcher;
/* Fetches `o->url` once (blocking: the broker is starting) and hands the body to `apply(arg, ...)`; then
 * starts the refresh thread. Returns the fetcher, or NULL after writing into `err` (`cap` bytes) why (the
 * HTTP status, curl's message or apply's). */
struct gr_jwks_fetcher *gr_jwks_fetcher_start(const struct gr_jwks_fetch_opts *o, gr_jwks_apply_fn apply,
                                              void *arg, char *err, size_t cap);
/* Asks for a refresh now (returns at once; one already running is followed by another). */
void gr_jwks_fetcher_expedite(struct gr_jwks_fetcher *f);
/* Stops the thread (a transfer in flight is aborted), joins it and frees `f` (NULL ignored). */
void gr_jwks_fetcher_stop(struct gr_jwks_fetcher *f);

#endif
