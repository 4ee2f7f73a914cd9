/*
 * broker_client.h: the inter-broker client, outbound Kafka-protocol connections from this broker to other
 * brokers on the libev loop (network thread). The replica fetcher uses it (issue #20); transaction markers
 * and partition verification will. coordinator/ never includes it (it will be reached through hooks).
 *
 * One client (struct gr_broker_client) serves the whole broker; it holds at most one connection per
 * (destination broker id, purpose, index), opened by its owner with gr_broker_client_open. The destination's
 * address is the listener named by the client's listener name (inter.broker.listener.name, else the
 * listener mapped to security.inter.broker.protocol: PLAINTEXT) in the broker's registration in the metadata
 * image. The client observes the image: a registration that changes address or broker epoch, or goes away,
 * closes the connection (requests end with GR_BROKER_CLIENT_DISCONNECTED) and, while the broker is
 * registered, connects again at once. Only numeric addresses are connected to (the loop never waits on a
 * resolver); a host name is logged and waits for the next registration change.
 *
 * A connection's life: connecting (non-blocking connect, TCP_NODELAY, at most
 * GR_BROKER_CLIENT_CONNECT_TIMEOUT_MS, which covers the TLS handshake too), with a TLS context (an SSL
 * inter-broker listener, issue #23) a non-blocking TLS handshake on the loop (the peer's certificate checked
 * against the truststore and, with tls_verify_host, the advertised host; a failure is logged, rate limited,
 * and backs off as a refused connect does), then an ApiVersions exchange (highest version both sides serve,
 * down to v0 when the peer answers UNSUPPORTED_VERSION, KIP-511), which fixes for each API the highest
 * version both sides support; then ready (the owner's state callback says so) until it is lost. A peer that
 * lacks one of the APIs the owner named at open, in a version range this broker's codec serves, fails the
 * exchange (logged error). A Gregor-internal API (key >= GR_API_KEY_INTERNAL_MIN, protocol/header.h:
 * PartitionSummary) is never in a peer's answer: the client takes the peer to serve the codec's own versions
 * (brokers of one cluster run the same codec); a peer that does not closes the connection on the unknown key
 * and the request ends DISCONNECTED. With a SASL mechanism configured (a SASL_PLAINTEXT or SASL_SSL
 * inter-broker listener), SaslHandshake v1 and SaslAuthenticate follow ApiVersions before the connection
 * is ready (PLAIN: one token; SCRAM: common/scram_client.h, the server's signature verified), so every
 * request after them carries the broker's principal User:<username>. KIP-368: when the final SaslAuthenticate
 * answer (v1+) carries a non-zero session_lifetime_ms (the peer's connections.max.reauth.ms, or an
 * OAUTHBEARER token's remaining life), the connection re-authenticates in band at a random point between 85%
 * and 95% of it (Kafka's SaslClientAuthenticator): from then on requests wait in the queue, and once every
 * request in flight is answered SaslHandshake and SaslAuthenticate go out again (ApiVersions is not
 * repeated); the connection stays ready to its owner throughout, and the waiting requests go out when it
 * succeeds. A failed re-authentication fails the connection like any other failure. Any failure (refused,
 * reset, timeout, a bad frame) closes the socket, ends every request and waits `backoff_ms`
 * (replica.fetch.backoff.ms for the fetcher) before connecting again.
 *
 * Requests (gr_broker_client_send) are accepted only while the connection is ready. Each is encoded at
 * once into one buffer (size() first: int32 frame size, request header v1 or v2 as the API version needs,
 * client id "broker-<node id>-<purpose>-<index>", the body), queued, and written when fewer than
 * `in_flight_max` requests await an answer on the connection. Answers come in request order (Kafka's
 * per-connection guarantee): each frame must carry the correlation id of the oldest request in flight, and
 * is decoded with the response's codec at the request's version. Every request ends exactly once, from the
 * loop (or from the image's observer pass, for a registration change) and never inside a call on this
 * client:
 *   - OK with the decoded response (views into the frame and an arena, borrowed for the callback only, or
 *     kept past it without a copy by gr_broker_client_answer_keep: a follower appends the records as they
 *     came);
 *   - TIMEOUT when no answer came within its timeout; as Kafka's NetworkClient does, a request in flight
 *     that times out closes the connection (the peer is stuck or the stream is lost);
 *   - DISCONNECTED when the connection closed first (lost, closed by the owner's registration change, or
 *     another request's timeout or bad answer);
 *   - BAD_RESPONSE when its answer could not be decoded, had the wrong correlation id, or exceeded the
 *     frame cap (`response_bytes_max`, logged): the stream cannot be trusted, so the connection closes.
 * A request cancelled with gr_broker_client_cancel never calls back; one already written keeps its place in
 * line until its answer arrives (and is dropped) so the ones behind it still match their answers.
 *
 * Bounds: `in_flight_max` requests written and unanswered, GR_BROKER_CLIENT_QUEUED_MAX requests encoded and
 * waiting per connection (more is refused at once), one response frame of at most `response_bytes_max`
 * bytes buffered at a time (a larger size prefix closes the connection before anything is allocated), and
 * the decoded response's arena bounded by its frame's size. Nothing blocks the loop.
 *
 * Callbacks (a request's and the state callback) may send, cancel and close on any connection; only
 * gr_broker_client_free is forbidden inside them. Read next: cluster/broker_client.c,
 * cluster/tests/test_broker_client.c.
 */
#ifndef GR_CLUSTER_BROKER_CLIENT_H
#define GR_CLUSTER_BROKER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

struct ev_loop;
struct gr_image;
struct gr_msg_ops;
struct ssl_ctx_st; /* OpenSSL's SSL_CTX */
struct gr_oauth_login;

/* Kafka's socket.connection.setup.timeout.ms default: the longest one connect may take before it counts as
 * failed and the back-off starts. */
#define GR_BROKER_CLIENT_CONNECT_TIMEOUT_MS 10000
/* Requests written and not yet answered per connection, when the config leaves it 0. Kafka's replica
 * fetcher keeps one Fetch in flight per leader; 5 is the Java client's max.in.flight.requests default. */
#define GR_BROKER_CLIENT_IN_FLIGHT_DEFAULT 5
/* The most in_flight_max may be: each request in flight holds its encoded buffer until answered. */
#define GR_BROKER_CLIENT_IN_FLIGHT_MAX 64
/* Requests encoded and waiting for a free in-flight slot per connection: a bound on the memory an owner
 * that sends faster than the peer answers can pin. */
#define GR_BROKER_CLIENT_QUEUED_MAX 256
/* Response frame cap when the config leaves it 0: socket.request.max.bytes's default (100 MiB), the most a
 * broker reads in one frame the other way. The fetcher passes a cap from replica.fetch.response.max.bytes. */
#define GR_BROKER_CLIENT_RESPONSE_BYTES_DEFAULT (100 * 1024 * 1024)
/* APIs one connection may require at open (the fetcher needs Fetch and OffsetForLeaderEpoch). */
#define GR_BROKER_CLIENT_APIS_MAX 8
/* Entries kept from a peer's ApiVersions answer (Kafka 4.x lists fewer than 100 APIs); more is refused. */
#define GR_BROKER_CLIENT_PEER_APIS_MAX 256

/* What a connection is for: one connection per (broker, purpose, index). */
enum gr_broker_client_purpose {
    GR_BROKER_CLIENT_REPLICA_FETCHER = 0, /* index: fetcher id, 0 .. num.replica.fetchers - 1 */
    GR_BROKER_CLIENT_TXN_MARKERS = 1,     /* later: WriteTxnMarkers (index 0) */
    GR_BROKER_CLIENT_VERIFY = 2, /* later: partition verification (AddPartitionsToTxn v4+, index 0) */
    GR_BROKER_CLIENT_SUMMARY =
        3, /* PartitionSummary to partition leaders (cluster/remote_summary.h, index 0) */
};

/* How a request ended (see the file comment). */
enum gr_broker_client_status {
    GR_BROKER_CLIENT_OK = 0,
    GR_BROKER_CLIENT_TIMEOUT,
    GR_BROKER_CLIENT_DISCONNECTED,
    GR_BROKER_CLIENT_BAD_RESPONSE,
};

/* Returns a static lower-case name of `status` for logs ("ok", "timeout", "disconnected", "bad response";
   "unknown" for any other value). */
const char *gr_broker_client_status_name(enum gr_broker_client_status status);

struct gr_broker_client_config {
    int32_t node_id;            /* this broker's node.id: client ids and logs */
    const char *listener_name;  /* the listener to connect to (copied; 1..GR_LISTENER_NAME_BYTES_MAX bytes) */
    int64_t request_timeout_ms; /* default timeout of a request (replica.socket.timeout.ms), >= 1 */
    int64_t backoff_ms;         /* wait after a failed or lost connection (replica.fetch.backoff.ms), >= 0 */
    int32_t in_flight_max;      /* 1..GR_BROKER_CLIENT_IN_FLIGHT_MAX, 0: GR_BROKER_CLIENT_IN_FLIGHT_DEFAULT */
    int64_t response_bytes_max; /* cap on one response frame, 0: GR_BROKER_CLIENT_RESPONSE_BYTES_DEFAULT */
    /* The inter-broker listener's security protocol is SSL: every connection runs a TLS handshake with this
     * client context (borrowed, outlives the client or until gr_broker_client_set_tls_ctx replaces it;
     * server/tls.h gr_tls_client_ctx_new) after the connect, before ApiVersions. NULL: PLAINTEXT. */
    struct ssl_ctx_st *tls_ctx;
    bool
        tls_verify_host; /* ssl.endpoint.identification.algorithm=https: the certificate must name the host */
    /* The inter-broker listener's security protocol is SASL_PLAINTEXT or SASL_SSL: after ApiVersions (and
     * after TLS with tls_ctx, SASL_SSL), every connection runs SaslHandshake v1 and SaslAuthenticate (the
     * highest version both serve, v2 with Kafka 4) with this mechanism (sasl.mechanism.inter.broker.protocol:
     * "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" or "OAUTHBEARER"; copied) and this broker's credentials
     * (copied; the password is wiped at free and never logged); a failure is logged, rate limited, and backs
     * off as a refused connect does. NULL mechanism: no SASL step (the credentials are then ignored). */
    const char *sasl_mechanism;
    const char *sasl_username, *sasl_password; /* PLAIN and SCRAM */
    /* OAUTHBEARER: makes the token of every authentication and re-authentication (common/oauth_login.h;
     * borrowed, outlives the client); its principal claim names the broker in logs. */
    const struct gr_oauth_login *sasl_oauth_login;
};

/* Counters of one connection (tests and logs). */
struct gr_broker_client_stats {
    uint64_t connects;         /* connection attempts started */
    uint64_t connect_failures; /* attempts that failed before the ApiVersions exchange finished */
    uint64_t readies;          /* times the connection became ready */
    uint64_t tls_handshakes;   /* TLS handshakes completed (0 over PLAINTEXT) */
    uint64_t sasl_auths;       /* SASL authentications completed (0 without SASL) */
    uint64_t sasl_failures;    /* SASL steps refused by the peer or failed here */
    uint64_t sasl_reauths;     /* KIP-368 re-authentications completed on a ready connection */
    uint64_t requests_sent;    /* requests written (ApiVersions not counted) */
    uint64_t responses;        /* answers matched to a request (cancelled ones included) */
    int in_flight_peak;        /* the most requests in flight at once */
};

struct gr_broker_client;
struct gr_broker_client_conn;
struct gr_broker_client_req;

struct gr_broker_client_answer;

/* A request's end: status, and for GR_BROKER_CLIENT_OK the decoded response body (the response struct of
 * the request's API, e.g. struct gr_fetch_response, whose strings, bytes and records are views into the
 * response frame), its version, and `ans`, the frame and arena holding it (NULL unless OK). All are borrowed
 * for the callback only, unless the callback keeps them with gr_broker_client_answer_keep. */
typedef void gr_broker_client_cb(void *ctx, enum gr_broker_client_status status, const void *resp,
                                 int16_t version, struct gr_broker_client_answer *ans);
/* A connection became ready (true) or stopped being ready (false). */
typedef void gr_broker_client_state_cb(void *ctx, struct gr_broker_client_conn *conn, bool ready);

/* Makes a client on `loop` reading addresses from `img` (both borrowed; they outlive the client) and
 * observing it. Returns new, or NULL with a reason in err (err_len bytes) for a bad config (listener name
 * empty or too long, a SASL mechanism not PLAIN/SCRAM-SHA-256/SCRAM-SHA-512/OAUTHBEARER or without its
 * credentials (username and password; OAUTHBEARER: sasl_oauth_login), timeout < 1, backoff < 0,
 * in_flight_max out of range, response_bytes_max < 0) or when out of memory or of image observers. */
struct gr_broker_client *gr_broker_client_new(struct ev_loop *loop, struct gr_image *img,
                                              const struct gr_broker_client_config *cfg, char *err,
                                              size_t err_len);
/* Closes every connection (no callback runs), stops observing the image, frees. Never inside a callback. */
void gr_broker_client_free(struct gr_broker_client *bc);
/* Certificate reload (server/tls_reload.h; Kafka's reconfigurable inter-broker SslFactory): connections
 * that start their TLS handshake from now on use client context `ctx` (borrowed, outlives the client or the
 * next call); established ones, and one whose handshake has begun, keep the context their SSL object holds a
 * reference to. Returns 0, or -EINVAL (nothing changes) when `ctx` is NULL or the client had none (the
 * security protocol does not change). Loop thread only. */
int gr_broker_client_set_tls_ctx(struct gr_broker_client *bc, struct ssl_ctx_st *ctx);

/* Opens the connection to `broker_id` for (purpose, index) and starts connecting (from the loop, not inside
 * this call). `apis` (borrowed, count 0..GR_BROKER_CLIENT_APIS_MAX) are the request rows of the codec
 * (protocol/gen/messages.h gr_msg_ops, response false) the owner will send: the ApiVersions exchange fails
 * when the peer lacks one. `state_cb` (may be NULL) hears ready / not ready with `ctx`. Returns new; NULL
 * when one is already open for that key (errno-style reason in *rc: -EEXIST), for a bad argument (-EINVAL)
 * or without memory (-ENOMEM). */
struct gr_broker_client_conn *gr_broker_client_open(struct gr_broker_client *bc, int32_t broker_id,
                                                    enum gr_broker_client_purpose purpose, int32_t index,
                                                    const struct gr_msg_ops *const *apis, int api_count,
                                                    gr_broker_client_state_cb *state_cb, void *ctx, int *rc);
/* Closes `conn`: every request it holds is dropped without a callback, the socket is closed, the handle is
 * freed (later, if called from inside one of its callbacks). */
void gr_broker_client_close(struct gr_broker_client_conn *conn);
/* Whether `conn` is ready for requests. */
bool gr_broker_client_ready(const struct gr_broker_client_conn *conn);
/* The highest version of request row `ops` that both this broker's codec and the peer serve, or -1 when the
 * connection is not ready or they share none (from the peer's ApiVersions answer). */
int16_t gr_broker_client_version(const struct gr_broker_client_conn *conn, const struct gr_msg_ops *ops);
/* Sends request body `body` (borrowed during the call: encoded at once; records fields in memory only) of row
 * `ops` at `version` (which must be in the range both serve) with a timeout of `timeout_ms` (<= 0: the
 * client's request_timeout_ms). The callback then runs exactly once with `ctx`, unless cancelled. Returns the
 * request's handle, or NULL with *rc = -ENOTCONN (not ready), -EPROTONOSUPPORT (version outside the shared
 * range), -ENOBUFS (GR_BROKER_CLIENT_QUEUED_MAX waiting), -EINVAL (a file-range records field) or -ENOMEM;
 * nothing is sent then and no callback runs. */
struct gr_broker_client_req *gr_broker_client_send(struct gr_broker_client_conn *conn,
                                                   const struct gr_msg_ops *ops, int16_t version,
                                                   const void *body, int64_t timeout_ms,
                                                   gr_broker_client_cb *cb, void *ctx, int *rc);
/* Inside a request's callback only, once: keeps its answer (the decoded `resp` and every view in it: the
 * frame, the arena) valid past the callback, so records can be appended without a copy. Returns new (free it
 * with gr_broker_client_answer_free), or NULL without memory (the answer is then freed after the callback as
 * usual). */
struct gr_broker_client_answer *gr_broker_client_answer_keep(struct gr_broker_client_answer *ans);
/* Frees a kept answer: its response struct, arena and frame. NULL is ignored. */
void gr_broker_client_answer_free(struct gr_broker_client_answer *ans);
/* Cancels a request whose callback has not run: it never will. Not for a handle whose callback started, nor
 * after its connection was closed (gr_broker_client_close frees every request it holds). */
void gr_broker_client_cancel(struct gr_broker_client_req *req);
/* Requests of `conn` waiting to be written and in flight (cancelled ones still in line included). */
int gr_broker_client_pending(const struct gr_broker_client_conn *conn);
/* Returns borrowed: the connection's counters. */
const struct gr_broker_client_stats *gr_broker_client_stats(const struct gr_broker_client_conn *conn);

#endif
