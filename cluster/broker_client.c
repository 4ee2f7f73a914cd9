/*
 * broker_client.c: the inter-broker client (cluster/broker_client.h has the contract).
 *
 * Each connection keeps two FIFOs of requests: `queue` (encoded, not yet written) and `flight` (written or
 * being written, awaiting their answers, oldest first). A request moves from queue to flight when fewer
 * than in_flight_max are in flight; `wnext` is the first request of flight not fully written. Frames are
 * read as a 4-byte size prefix, then a body buffer of exactly that size (checked against the cap first),
 * and each complete body answers the head of flight. One ev_timer per connection serves whichever deadline
 * comes first: the connect timeout, the back-off, or the earliest request deadline.
 *
 * Re-entrancy: user code runs only from entry points (the io and timer watchers, the image observer), each
 * bracketed by enter()/leave(). A connection closed while the client is inside an entry point is torn down
 * at once (socket, watchers, requests dropped) but freed by the outermost leave(), so no loop ever touches
 * freed memory; requests are unlinked before their callback runs, so each runs at most once.
 *
 * Read next: cluster/tests/test_broker_client.c.
 */
#include "cluster/broker_client.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cluster/image.h"
#include "common/arena.h"
#include "common/log.h"
#include "common/oauth_login.h"
#include "common/scram_client.h"
#include "common/tls_io.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"

enum conn_state {
    S_UNRESOLVED, /* no registration or no listener of our name: waits for an image change */
    S_BACKOFF,    /* waits backoff_ms after a failure */
    S_CONNECTING, /* non-blocking connect in progress */
    S_TLS,        /* TLS handshake in progress (an SSL inter-broker listener) */
    S_HANDSHAKE,  /* ApiVersions in flight */
    S_SASL,       /* SaslHandshake or SaslAuthenticate in flight (a SASL inter-broker listener) */
    S_READY,
    S_CLOSED, /* closed by the owner, freed by the outermost leave() */
};

enum req_kind { K_USER = 0, K_API_VERSIONS, K_SASL_HANDSHAKE, K_SASL_AUTH };

struct gr_broker_client_req {
    struct gr_broker_client_conn *conn;
    struct gr_broker_client_req *next;
    const struct gr_msg_ops *resp_ops;
    int16_t version;
    int32_t correlation_id;
    int64_t deadline_ms;
    int64_t timeout_ms;
    uint8_t *buf; /* the whole frame: size prefix, header, body */
    size_t len, sent;
    gr_broker_client_cb *cb; /* NULL once cancelled */
    void *ctx;
    enum req_kind kind; /* the client's own requests: ApiVersions, SaslHandshake, SaslAuthenticate */
};

/* A decoded answer: the response frame, the arena of its arrays, the response struct. */
struct gr_broker_client_answer {
    uint8_t *frame;
    struct gr_arena arena;
    void *resp;
    bool kept; /* ownership moved to a kept copy: the reader frees nothing */
};

struct fifo {
    struct gr_broker_client_req *head, *tail;
    int count;
};

struct peer_api {
    int16_t api_key, min_version, max_version;
};

struct gr_broker_client_conn {
    struct gr_broker_client *bc;
    struct gr_broker_client_conn *next;
    int32_t broker_id;
    enum gr_broker_client_purpose purpose;
    int32_t index;
    const struct gr_msg_ops *apis[GR_BROKER_CLIENT_APIS_MAX];
    int api_count;
    gr_broker_client_state_cb *state_cb;
    void *ctx;
    char client_id[64];
    enum conn_state state;
    /* the target the socket was opened to (compared with the image on every change) */
    bool has_target;
    char host[GR_HOST_BYTES_MAX + 1];
    int32_t port;
    int64_t broker_epoch;
    int fd;
    struct ssl_st *ssl;   /* the TLS session on fd (a TLS client), else NULL */
    bool tls_rd_wants_ww; /* a TLS read waits for the socket to be writable */
    bool tls_wr_wants_rw; /* a TLS write waits for the socket to be readable */
    ev_io rw, ww;
    ev_timer tw;
    int64_t timer_at_ms;       /* S_BACKOFF / S_CONNECTING: when the wait ends */
    struct fifo queue, flight; /* see the file comment */
    struct gr_broker_client_req *wnext;
    bool write_failed; /* a send failed: the timer (due now) fails the connection */
    int32_t next_correlation_id;
    uint8_t rhdr[4];
    size_t rhave; /* bytes of the size prefix read */
    uint8_t *rframe;
    size_t rlen, rgot;
    int16_t av_version;            /* the ApiVersions version being tried */
    struct gr_scram_client *scram; /* a SCRAM exchange in progress, else NULL */
    int sasl_step;                 /* SaslAuthenticate round trips done in this exchange */
    int16_t sasl_auth_version;     /* SaslAuthenticate version both serve (v2 where the peer offers it) */
    /* KIP-368: re-authentication of a ready connection. REAUTH_DUE: the session's re-authentication time
     * passed, requests wait in `queue` until those in flight are answered; REAUTH_RUNNING: SaslHandshake and
     * SaslAuthenticate in flight, the connection still ready to its owner. */
    enum { REAUTH_NONE = 0, REAUTH_DUE, REAUTH_RUNNING } reauth;
    int64_t reauth_at_ms;    /* monotonic; 0: the session does not expire (session_lifetime_ms 0) */
    int64_t session_life_ms; /* the last SaslAuthenticate answer's session_lifetime_ms */
    int peer_api_count;
    struct peer_api peer_apis[GR_BROKER_CLIENT_PEER_APIS_MAX];
    struct gr_broker_client_stats stats;
};

enum sasl_mech { SASL_NONE = 0, SASL_PLAIN, SASL_SCRAM_SHA_256, SASL_SCRAM_SHA_512, SASL_OAUTHBEARER };
static const char *const sasl_names[] = {"", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"};

struct gr_broker_client {
    struct ev_loop *loop;
    struct gr_image *img;
    int32_t node_id;
    char listener_name[GR_LISTENER_NAME_BYTES_MAX + 1];
    int64_t request_timeout_ms, backoff_ms, response_bytes_max;
    int32_t in_flight_max;
    struct ssl_ctx_st *tls_ctx; /* borrowed; NULL: PLAINTEXT */
    bool tls_verify_host;
    enum sasl_mech sasl_mech;                      /* SASL_NONE: no SASL step */
    char *sasl_username, *sasl_password;           /* OAUTHBEARER: the token's subject, no password */
    const struct gr_oauth_login *sasl_oauth_login; /* OAUTHBEARER: makes each token (borrowed) */
    const struct gr_msg_ops *av_req_ops, *av_resp_ops, *sh_req_ops, *sa_req_ops;
    struct gr_broker_client_conn *conns;
    int depth;         /* entry points on the stack */
    bool need_sweep;   /* a connection was closed inside an entry point */
    uint64_t rng;      /* xorshift state of the KIP-368 re-authentication jitter */
    ev_timer start_tw; /* kicks new connections from the loop (open never connects inline) */
};

static void conn_connect(struct gr_broker_client_conn *conn);
static void conn_fail(struct gr_broker_client_conn *conn, enum gr_broker_client_status head_status,
                      bool reconnect_now);
static void conn_arm(struct gr_broker_client_conn *conn);
static void conn_flush(struct gr_broker_client_conn *conn);
static void conn_read(struct gr_broker_client_conn *conn);
static void conn_ready(struct gr_broker_client_conn *conn);
static void sasl_start(struct gr_broker_client_conn *conn);
static void reauth_maybe(struct gr_broker_client_conn *conn);
static void session_start(struct gr_broker_client_conn *conn, int64_t life_ms);
static void reauth_done(struct gr_broker_client_conn *conn);

static const char *const purpose_names[] = {"fetcher", "txn-markers", "verify", "summary"};

/* ---- entry points and deferred frees ---- */

static void enter(struct gr_broker_client *bc)
{
    bc->depth++;
}

static void conn_free(struct gr_broker_client_conn *conn)
{
    free(conn);
}

static void leave(struct gr_broker_client *bc)
{
    if (--bc->depth > 0 || !bc->need_sweep) return;
    bc->need_sweep = false;
    for (struct gr_broker_client_conn **pp = &bc->conns; *pp;) {
        struct gr_broker_client_conn *conn = *pp;
        if (conn->state == S_CLOSED) {
            *pp = conn->next;
            conn_free(conn);
        } else {
            pp = &conn->next;
        }
    }
}

static bool alive(const struct gr_broker_client_conn *conn)
{
    return conn->state != S_CLOSED;
}

/* ---- requests ---- */

static void fifo_push(struct fifo *f, struct gr_broker_client_req *req)
{
    req->next = NULL;
    if (f->tail)
        f->tail->next = req;
    else
        f->head = req;
    f->tail = req;
    f->count++;
}

static struct gr_broker_client_req *fifo_pop(struct fifo *f)
{
    struct gr_broker_client_req *req = f->head;
    if (!req) return NULL;
    f->head = req->next;
    if (!f->head) f->tail = NULL;
    f->count--;
    req->next = NULL;
    return req;
}

static void req_free(struct gr_broker_client_req *req)
{
    free(req->buf);
    free(req);
}

/* Runs a request's callback (if not cancelled) and frees it; the request is already unlinked. Returns
 * whether the connection is still alive afterwards. */
static bool req_finish(struct gr_broker_client_req *req, enum gr_broker_client_status status,
                       struct gr_broker_client_answer *ans)
{
    struct gr_broker_client_conn *conn = req->conn;
    if (req->cb) req->cb(req->ctx, status, ans ? ans->resp : NULL, req->version, ans);
    req_free(req);
    return alive(conn);
}

/* Encodes one request frame: int32 size, request header (v1/v2 by the API version), body. Returns a new
 * request or NULL without memory. */
static struct gr_broker_client_req *req_encode(struct gr_broker_client_conn *conn,
                                               const struct gr_msg_ops *ops, int16_t version,
                                               const void *body)
{
    struct gr_request_header h = {.request_api_key = ops->api_key,
                                  .request_api_version = version,
                                  .correlation_id = conn->next_correlation_id,
                                  .client_id = gr_str_c(conn->client_id)};
    int16_t hv = gr_request_header_version(version, ops->flexible_min);
    size_t len = 4 + gr_request_header_size(&h, hv) + ops->size(body, version);
    if (len - 4 > INT32_MAX) return NULL;
    struct gr_broker_client_req *req = calloc(1, sizeof *req);
    if (!req || !(req->buf = malloc(len))) {
        free(req);
        return NULL;
    }
    struct gr_wr wr;
    gr_wr_init(&wr, req->buf, len);
    gr_wr_int32(&wr, (int32_t)(len - 4));
    gr_request_header_encode(&wr, &h, hv);
    ops->encode(&wr, body, version);
    req->conn = conn;
    req->len = len;
    req->version = version;
    req->correlation_id = h.correlation_id;
    req->resp_ops = gr_msg_ops_find(ops->api_key, true);
    conn->next_correlation_id = conn->next_correlation_id == INT32_MAX ? 0 : conn->next_correlation_id + 1;
    return req;
}

/* ---- addresses from the image ---- */

/* Fills the connection's target from the image. Returns false (target cleared) when the broker is not
 * registered or has no listener of the client's name. */
static bool target_lookup(const struct gr_broker_client_conn *conn, char *host, int32_t *port, int64_t *epoch)
{
    const struct gr_broker_client *bc = conn->bc;
    const struct gr_image_broker *br = gr_image_broker(bc->img, conn->broker_id);
    if (!br) return false;
    const struct gr_image_listener *l =
        gr_image_broker_listener(br, bc->listener_name, strlen(bc->listener_name));
    if (!l) return false;
    snprintf(host, GR_HOST_BYTES_MAX + 1, "%s", l->host);
    *port = l->port;
    *epoch = br->epoch;
    return true;
}

/* Opens a non-blocking TCP socket to the numeric host:port and starts connecting. Returns the descriptor
 * or -errno (-EINVAL for a host that is not a numeric address). */
static int socket_connect(const char *host, int32_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        sl = sizeof *in4;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        sl = sizeof *in6;
    } else {
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* ---- the socket ---- */

static void conn_close_socket(struct gr_broker_client_conn *conn)
{
    struct ev_loop *loop = conn->bc->loop;
    ev_io_stop(loop, &conn->rw);
    ev_io_stop(loop, &conn->ww);
    gr_tls_free(conn->ssl); /* before the descriptor it runs on */
    conn->ssl = NULL;
    conn->tls_rd_wants_ww = conn->tls_wr_wants_rw = false;
    if (conn->fd >= 0) close(conn->fd);
    conn->fd = -1;
    free(conn->rframe);
    conn->rframe = NULL;
    conn->rhave = conn->rlen = conn->rgot = 0;
    conn->wnext = NULL;
    conn->write_failed = false;
    gr_scram_client_free(conn->scram);
    conn->scram = NULL;
    conn->sasl_step = 0;
    conn->reauth = REAUTH_NONE;
    conn->reauth_at_ms = 0;
}

/* Takes every request off the connection (queue and flight) into one list, oldest first. */
static struct gr_broker_client_req *conn_take_all(struct gr_broker_client_conn *conn)
{
    struct fifo all = conn->flight;
    for (struct gr_broker_client_req *req; (req = fifo_pop(&conn->queue));)
        fifo_push(&all, req);
    conn->flight = (struct fifo){0};
    conn->queue = (struct fifo){0};
    return all.head;
}

/* Ends the connection's socket and every request: the head of flight with `head_status`, the rest
 * DISCONNECTED; tells the owner it is no longer ready; then connects again at once or after the back-off.
 * Stops early if a callback closes the connection. */
static void conn_fail(struct gr_broker_client_conn *conn, enum gr_broker_client_status head_status,
                      bool reconnect_now)
{
    bool was_ready = conn->state == S_READY;
    if (conn->state == S_CONNECTING || conn->state == S_TLS || conn->state == S_HANDSHAKE ||
        conn->state == S_SASL)
        conn->stats.connect_failures++;
    conn_close_socket(conn);
    conn->state = S_BACKOFF;
    conn->timer_at_ms = gr_time_mono_ms() + (reconnect_now ? 0 : conn->bc->backoff_ms);
    ev_timer_stop(conn->bc->loop, &conn->tw);
    struct gr_broker_client_req *list = conn_take_all(conn);
    enum gr_broker_client_status st = head_status;
    while (list) {
        struct gr_broker_client_req *req = list;
        list = req->next;
        if (!req_finish(req, st, NULL)) {
            while (list) { /* closed by a callback: the rest are dropped silently */
                struct gr_broker_client_req *r = list;
                list = r->next;
                req_free(r);
            }
            return;
        }
        st = GR_BROKER_CLIENT_DISCONNECTED;
    }
    if (was_ready && conn->state_cb) {
        conn->state_cb(conn->ctx, conn, false);
        if (!alive(conn)) return;
    }
    if (conn->state == S_BACKOFF) conn_arm(conn);
}

/* Starts the ApiVersions exchange at conn->av_version. */
static void conn_handshake(struct gr_broker_client_conn *conn)
{
    struct gr_api_versions_request av;
    gr_api_versions_request_init(&av);
    av.client_software_name = gr_str_c("gregor");
    av.client_software_version = gr_str_c("1.0");
    struct gr_broker_client_req *req = req_encode(conn, conn->bc->av_req_ops, conn->av_version, &av);
    if (!req) {
        GR_ERROR_RATELIMITED("broker client: %s: out of memory for ApiVersions", conn->client_id);
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return;
    }
    req->kind = K_API_VERSIONS;
    req->timeout_ms = conn->bc->request_timeout_ms;
    req->deadline_ms = gr_time_mono_ms() + req->timeout_ms;
    fifo_push(&conn->flight, req);
    if (!conn->wnext) conn->wnext = req;
    conn->state = S_HANDSHAKE;
    conn_flush(conn);
}

/* Starts connecting to the target in the image (or waits for one). */
static void conn_connect(struct gr_broker_client_conn *conn)
{
    conn->has_target = target_lookup(conn, conn->host, &conn->port, &conn->broker_epoch);
    if (!conn->has_target) {
        conn->state = S_UNRESOLVED;
        ev_timer_stop(conn->bc->loop, &conn->tw);
        return;
    }
    conn->stats.connects++;
    int fd = socket_connect(conn->host, conn->port);
    if (fd == -EINVAL) {
        GR_ERROR_RATELIMITED(
            "broker client: %s: broker %d's listener %s has host '%s', not a numeric address: "
            "not connecting until its registration changes",
            conn->client_id, (int)conn->broker_id, conn->bc->listener_name, conn->host);
        conn->state = S_UNRESOLVED;
        ev_timer_stop(conn->bc->loop, &conn->tw);
        return;
    }
    if (fd < 0) {
        conn->state = S_CONNECTING; /* counted as a failed attempt */
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return;
    }
    conn->fd = fd;
    conn->state = S_CONNECTING;
    conn->timer_at_ms = gr_time_mono_ms() + GR_BROKER_CLIENT_CONNECT_TIMEOUT_MS;
    ev_io_set(&conn->rw, fd, EV_READ);
    ev_io_set(&conn->ww, fd, EV_WRITE);
    ev_io_start(conn->bc->loop, &conn->ww);
    conn_arm(conn);
}

/* ---- the timer ---- */

static int64_t conn_deadline(const struct gr_broker_client_conn *conn)
{
    switch (conn->state) {
    case S_BACKOFF:
    case S_CONNECTING:
    case S_TLS: /* the connect timeout covers the TLS handshake too */
        return conn->timer_at_ms;
    case S_HANDSHAKE:
    case S_SASL:
    case S_READY: {
        int64_t d = INT64_MAX;
        for (const struct gr_broker_client_req *r = conn->flight.head; r; r = r->next)
            d = r->deadline_ms < d ? r->deadline_ms : d;
        for (const struct gr_broker_client_req *r = conn->queue.head; r; r = r->next)
            d = r->deadline_ms < d ? r->deadline_ms : d;
        if (conn->state == S_READY && conn->reauth == REAUTH_NONE && conn->reauth_at_ms > 0 &&
            conn->reauth_at_ms < d)
            d = conn->reauth_at_ms;
        return d;
    }
    default:
        return INT64_MAX;
    }
}

/* Arms the connection's timer at its earliest deadline (or stops it when there is none). */
static void conn_arm(struct gr_broker_client_conn *conn)
{
    struct ev_loop *loop = conn->bc->loop;
    if (conn->write_failed) return; /* the timer is due now */
    ev_timer_stop(loop, &conn->tw);
    int64_t d = conn_deadline(conn);
    if (d == INT64_MAX) return;
    int64_t wait = d - gr_time_mono_ms();
    ev_timer_set(&conn->tw, wait > 0 ? (double)wait / 1000.0 : 0.0, 0.0);
    ev_timer_start(loop, &conn->tw);
}

/* Fails every queued (never written) request whose deadline passed; they leave the connection as it is. */
static void conn_expire_queued(struct gr_broker_client_conn *conn, int64_t now)
{
    struct fifo keep = {0};
    struct fifo expired = {0};
    for (struct gr_broker_client_req *req; (req = fifo_pop(&conn->queue));)
        fifo_push(req->deadline_ms <= now ? &expired : &keep, req);
    conn->queue = keep;
    for (struct gr_broker_client_req *req; (req = fifo_pop(&expired));) {
        if (!req_finish(req, GR_BROKER_CLIENT_TIMEOUT, NULL)) {
            while ((req = fifo_pop(&expired)))
                req_free(req);
            return;
        }
    }
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker_client_conn *conn = w->data;
    struct gr_broker_client *bc = conn->bc;
    enter(bc);
    int64_t now = gr_time_mono_ms();
    if (conn->write_failed) {
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
    } else if (conn->state == S_BACKOFF) {
        conn_connect(conn);
    } else if (conn->state == S_CONNECTING || conn->state == S_TLS) {
        GR_WARN_RATELIMITED("broker client: %s: connect to %s:%d timed out%s", conn->client_id, conn->host,
                            (int)conn->port, conn->state == S_TLS ? " in the TLS handshake" : "");
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
    } else if (conn->flight.head && conn->flight.head->deadline_ms <= now) {
        GR_WARN_RATELIMITED("broker client: %s: request timed out after %lld ms, closing the connection to "
                            "broker %d",
                            conn->client_id, (long long)conn->flight.head->timeout_ms, (int)conn->broker_id);
        conn_fail(conn, GR_BROKER_CLIENT_TIMEOUT, false);
    } else {
        bool flight_expired = false;
        for (struct gr_broker_client_req *r = conn->flight.head; r; r = r->next)
            flight_expired |= r->deadline_ms <= now;
        if (flight_expired) {
            /* a later request timed out behind a head still within its time: the head keeps DISCONNECTED,
             * the stream is abandoned all the same (answers are in order) */
            conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        } else {
            conn_expire_queued(conn, now);
            if (alive(conn) && conn->state == S_READY && conn->reauth == REAUTH_NONE &&
                conn->reauth_at_ms > 0 && conn->reauth_at_ms <= now) {
                conn->reauth = REAUTH_DUE; /* KIP-368: begins once the requests in flight are answered */
                reauth_maybe(conn);
            }
            if (alive(conn)) conn_arm(conn);
        }
    }
    leave(bc);
}

/* ---- the socket's bytes: plain or through the TLS session ---- */

/* Reads up to `len` bytes. Returns the count (> 0), 0 when the peer closed, -2 when the socket has nothing
 * now (a TLS read that needs the socket writable starts the write watcher), -1 on a failure (why). */
static ssize_t conn_recv(struct gr_broker_client_conn *conn, void *buf, size_t len, char *why, size_t cap)
{
    if (!conn->ssl) {
        ssize_t n = recv(conn->fd, buf, len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -2;
        if (n < 0) snprintf(why, cap, "%s", strerror(errno));
        return n;
    }
    enum gr_tls_want want;
    ssize_t n = gr_tls_read(conn->ssl, buf, len, &want, why, cap);
    if (n == -1 && want == GR_TLS_WANT_WRITE) {
        conn->tls_rd_wants_ww = true;
        ev_io_start(conn->bc->loop, &conn->ww);
    }
    return n == -1 && want != GR_TLS_WANT_NONE ? -2 : n;
}

/* Writes up to `len` bytes. Returns the count taken (> 0), -2 when the socket takes nothing now (a TLS write
 * that needs the socket readable marks it: the read watcher, always on once connected, resumes it), -1 on a
 * failure (why). */
static ssize_t conn_send(struct gr_broker_client_conn *conn, const void *buf, size_t len, char *why,
                         size_t cap)
{
    if (!conn->ssl) {
        ssize_t n = send(conn->fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -2;
        if (n < 0) snprintf(why, cap, "%s", strerror(errno));
        return n < 0 ? -1 : n;
    }
    enum gr_tls_want want;
    ssize_t n = gr_tls_write(conn->ssl, buf, len, &want, why, cap);
    conn->tls_wr_wants_rw = n == -1 && want == GR_TLS_WANT_READ;
    return n == -1 && want != GR_TLS_WANT_NONE ? -2 : n;
}

/* Drives the TLS handshake of a connected socket; once done, starts the ApiVersions exchange. A failure
 * (the peer's certificate does not verify, the peer refuses ours) is logged and backs off like a refused
 * connect. */
static void conn_tls_step(struct gr_broker_client_conn *conn)
{
    struct ev_loop *loop = conn->bc->loop;
    enum gr_tls_want want;
    char why[400];
    if (gr_tls_handshake(conn->ssl, &want, why, sizeof why) == 1) {
        conn->stats.tls_handshakes++;
        ev_io_stop(loop, &conn->ww);
        ev_io_start(loop, &conn->rw);
        conn->av_version = conn->bc->av_req_ops->version_max;
        conn_handshake(conn);
        return;
    }
    if (want == GR_TLS_WANT_NONE) {
        GR_ERROR_RATELIMITED("broker client: %s: TLS handshake with broker %d at %s:%d failed: %s",
                             conn->client_id, (int)conn->broker_id, conn->host, (int)conn->port, why);
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return;
    }
    if (want == GR_TLS_WANT_READ) {
        ev_io_stop(loop, &conn->ww);
        ev_io_start(loop, &conn->rw);
    } else {
        ev_io_stop(loop, &conn->rw);
        ev_io_start(loop, &conn->ww);
    }
}

/* ---- writing ---- */

/* Moves queued requests into flight while slots are free. */
static void conn_promote(struct gr_broker_client_conn *conn)
{
    while (conn->reauth == REAUTH_NONE && conn->queue.head && conn->flight.count < conn->bc->in_flight_max) {
        struct gr_broker_client_req *req = fifo_pop(&conn->queue);
        fifo_push(&conn->flight, req);
        if (!conn->wnext) conn->wnext = req;
        conn->stats.requests_sent++;
        if (conn->flight.count > conn->stats.in_flight_peak) conn->stats.in_flight_peak = conn->flight.count;
    }
}

/* Writes what is unwritten in flight; starts the write watcher only while bytes remain (try first). */
static void conn_flush(struct gr_broker_client_conn *conn)
{
    if (conn->write_failed) return;
    if (conn->state == S_READY) conn_promote(conn);
    while (conn->wnext) {
        struct gr_broker_client_req *req = conn->wnext;
        char why[300];
        ssize_t n = conn_send(conn, req->buf + req->sent, req->len - req->sent, why, sizeof why);
        if (n == -2) {
            if (!conn->tls_wr_wants_rw) ev_io_start(conn->bc->loop, &conn->ww);
            return;
        }
        if (n < 0) {
            /* failed from the timer at once: this may be inside gr_broker_client_send, which never calls
             * back */
            GR_WARN_RATELIMITED("broker client: %s: send to broker %d: %s", conn->client_id,
                                (int)conn->broker_id, why);
            conn->write_failed = true;
            ev_io_stop(conn->bc->loop, &conn->ww);
            ev_timer_stop(conn->bc->loop, &conn->tw);
            ev_timer_set(&conn->tw, 0.0, 0.0);
            ev_timer_start(conn->bc->loop, &conn->tw);
            return;
        }
        req->sent += (size_t)n;
        if (req->sent == req->len) {
            free(req->buf); /* written: only its answer is awaited now */
            req->buf = NULL;
            conn->wnext = req->next;
        }
    }
    if (!conn->tls_rd_wants_ww) ev_io_stop(conn->bc->loop, &conn->ww);
    conn_arm(conn);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker_client_conn *conn = w->data;
    enter(conn->bc);
    if (conn->state == S_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
        if (err) {
            GR_WARN_RATELIMITED("broker client: %s: connect to broker %d at %s:%d: %s", conn->client_id,
                                (int)conn->broker_id, conn->host, (int)conn->port, strerror(err));
            conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        } else if (conn->bc->tls_ctx) {
            conn->ssl = gr_tls_client_new(conn->bc->tls_ctx, conn->fd, conn->host, conn->bc->tls_verify_host);
            if (!conn->ssl) {
                GR_ERROR_RATELIMITED("broker client: %s: no memory for a TLS session", conn->client_id);
                conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
            } else {
                conn->state = S_TLS;
                conn_tls_step(conn);
            }
        } else {
            ev_io_stop(conn->bc->loop, &conn->ww);
            ev_io_start(conn->bc->loop, &conn->rw);
            conn->av_version = conn->bc->av_req_ops->version_max;
            conn_handshake(conn);
        }
    } else if (conn->state == S_TLS) {
        conn_tls_step(conn);
    } else {
        if (conn->tls_rd_wants_ww) { /* a TLS read waited for this: read first */
            conn->tls_rd_wants_ww = false;
            conn_read(conn);
        }
        if (alive(conn) && conn->fd >= 0) conn_flush(conn);
    }
    leave(conn->bc);
}

/* ---- the ApiVersions answer ---- */

static const struct peer_api *peer_api(const struct gr_broker_client_conn *conn, int16_t api_key)
{
    for (int i = 0; i < conn->peer_api_count; i++)
        if (conn->peer_apis[i].api_key == api_key) return &conn->peer_apis[i];
    return NULL;
}

/* The highest version both serve of request row `ops`, -1 when none (the peer's list must be loaded). */
static int16_t shared_version(const struct gr_broker_client_conn *conn, const struct gr_msg_ops *ops)
{
    if (ops->api_key >= GR_API_KEY_INTERNAL_MIN) return ops->version_max; /* never advertised: see header */
    const struct peer_api *p = peer_api(conn, ops->api_key);
    if (!p) return -1;
    int16_t lo = p->min_version > ops->version_min ? p->min_version : ops->version_min;
    int16_t hi = p->max_version < ops->version_max ? p->max_version : ops->version_max;
    return lo <= hi ? hi : -1;
}

/* Decodes an ApiVersions body at `version` into `av`; returns 0 or a gr_wire_err. */
static int av_decode(const uint8_t *p, size_t len, int16_t version, struct gr_arena *arena,
                     struct gr_api_versions_response *av)
{
    struct gr_rd rd;
    gr_rd_init(&rd, p, len, arena);
    gr_api_versions_response_init(av);
    return gr_api_versions_response_decode(&rd, version, av);
}

/* Keeps the peer's API list; false when it holds more than GR_BROKER_CLIENT_PEER_APIS_MAX entries. */
static bool av_keep(struct gr_broker_client_conn *conn, const struct gr_api_versions_response *av)
{
    if (av->api_keys.count < 0 || av->api_keys.count > GR_BROKER_CLIENT_PEER_APIS_MAX) return false;
    conn->peer_api_count = av->api_keys.count;
    for (int32_t i = 0; i < av->api_keys.count; i++)
        conn->peer_apis[i] =
            (struct peer_api){av->api_keys.items[i].api_key, av->api_keys.items[i].min_version,
                              av->api_keys.items[i].max_version};
    return true;
}

/* Handles the ApiVersions answer body (after the header): retries at a lower version on
 * UNSUPPORTED_VERSION (KIP-511: the answer is then v0 and lists the ApiVersions range), checks the
 * owner's APIs, and makes the connection ready. */
static void av_answer(struct gr_broker_client_conn *conn, const uint8_t *p, size_t len)
{
    struct gr_arena arena;
    gr_arena_init(&arena, 32 * len + 4096);
    struct gr_api_versions_response av;
    int rc = av_decode(p, len, conn->av_version, &arena, &av);
    if (rc || av.error_code == GR_ERR_UNSUPPORTED_VERSION) rc = av_decode(p, len, 0, &arena, &av);
    const char *why = rc ? "malformed ApiVersions answer" : NULL;
    if (!why && !av_keep(conn, &av)) why = "ApiVersions answer lists too many APIs";
    if (!why && av.error_code == GR_ERR_UNSUPPORTED_VERSION) {
        int16_t v = shared_version(conn, conn->bc->av_req_ops);
        gr_arena_reset(&arena);
        if (v >= 0 && v < conn->av_version) {
            conn->av_version = v;
            conn_handshake(conn);
            return;
        }
        why = "the peer serves no ApiVersions version Gregor speaks";
    }
    if (!why && av.error_code != GR_ERR_NONE) why = gr_error_name(av.error_code);
    gr_arena_reset(&arena);
    for (int i = 0; !why && i < conn->api_count; i++) {
        if (shared_version(conn, conn->apis[i]) >= 0) continue;
        GR_ERROR_RATELIMITED("broker client: %s: broker %d serves no version of %s in Gregor's %d..%d",
                             conn->client_id, (int)conn->broker_id, conn->apis[i]->name,
                             (int)conn->apis[i]->version_min, (int)conn->apis[i]->version_max);
        why = "a required API is missing";
    }
    if (why) {
        GR_ERROR_RATELIMITED("broker client: %s: ApiVersions with broker %d failed: %s", conn->client_id,
                             (int)conn->broker_id, why);
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return;
    }
    if (conn->bc->sasl_mech != SASL_NONE) {
        sasl_start(conn);
        return;
    }
    conn_ready(conn);
}

/* ---- SASL (a SASL_PLAINTEXT or SASL_SSL inter-broker listener) ---- */

/* Sends one of the client's own SASL requests (`kind`) at the head of the stream: nothing else is queued
 * before the connection is ready. */
static void sasl_send(struct gr_broker_client_conn *conn, enum req_kind kind, const struct gr_msg_ops *ops,
                      int16_t version, const void *body)
{
    struct gr_broker_client_req *req = req_encode(conn, ops, version, body);
    if (!req) {
        GR_ERROR_RATELIMITED("broker client: %s: out of memory for %s", conn->client_id, ops->name);
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return;
    }
    req->kind = kind;
    req->timeout_ms = conn->bc->request_timeout_ms;
    req->deadline_ms = gr_time_mono_ms() + req->timeout_ms;
    fifo_push(&conn->flight, req);
    if (!conn->wnext) conn->wnext = req;
    if (conn->reauth == REAUTH_NONE) conn->state = S_SASL; /* a re-authenticating connection stays ready */
    conn_flush(conn);
}

/* A failed SASL step: logged (rate limited, never the password), then the connection backs off
 * (replica.fetch.backoff.ms for the fetcher) like a refused connect. */
static void sasl_fail(struct gr_broker_client_conn *conn, const char *why)
{
    conn->stats.sasl_failures++;
    GR_ERROR_RATELIMITED("broker client: %s: SASL %s %s to broker %d at %s:%d as User:%s failed: %s "
                         "(closing; retrying after %lld ms)",
                         conn->client_id, sasl_names[conn->bc->sasl_mech],
                         conn->reauth == REAUTH_NONE ? "authentication" : "re-authentication",
                         (int)conn->broker_id, conn->host, (int)conn->port, conn->bc->sasl_username, why,
                         (long long)conn->bc->backoff_ms);
    conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
}

/* After ApiVersions: SaslHandshake v1 naming the mechanism (Kafka's SaslClientAuthenticator order). */
static void sasl_start(struct gr_broker_client_conn *conn)
{
    struct gr_broker_client *bc = conn->bc;
    const struct peer_api *sh = peer_api(conn, bc->sh_req_ops->api_key);
    const struct peer_api *sa = peer_api(conn, bc->sa_req_ops->api_key);
    int16_t sav = sa ? shared_version(conn, bc->sa_req_ops) : -1;
    if (!sh || sh->min_version > 1 || sh->max_version < 1 || sav < 0) {
        sasl_fail(conn, "the peer serves no SaslHandshake v1 or no SaslAuthenticate");
        return;
    }
    conn->sasl_auth_version = sav;
    conn->sasl_step = 0;
    struct gr_sasl_handshake_request h;
    gr_sasl_handshake_request_init(&h);
    h.mechanism = gr_str_c(sasl_names[bc->sasl_mech]);
    sasl_send(conn, K_SASL_HANDSHAKE, bc->sh_req_ops, 1, &h);
}

/* Sends one SaslAuthenticate token (`len` bytes, borrowed during the call). */
static void sasl_token(struct gr_broker_client_conn *conn, const void *token, size_t len)
{
    struct gr_sasl_authenticate_request a;
    gr_sasl_authenticate_request_init(&a);
    a.auth_bytes = (struct gr_bytes){token, (int32_t)len};
    sasl_send(conn, K_SASL_AUTH, conn->bc->sa_req_ops, conn->sasl_auth_version, &a);
}

/* OAUTHBEARER's client-first message (RFC 7628 3.1, as Kafka's OAuthBearerClientInitialResponse without an
 * authzid or extensions): "n,," %x01 "auth=Bearer " token %x01 %x01, with a token made now. */
static void oauth_first(struct gr_broker_client_conn *conn)
{
    enum { PRE = 3 + 1 + 12, POST = 2 };
    char *msg = malloc(PRE + GR_OAUTH_LOGIN_TOKEN_MAX + POST + 1);
    int n = msg ? gr_oauth_login_token(conn->bc->sasl_oauth_login, gr_time_wall_ms(), msg + PRE,
                                       GR_OAUTH_LOGIN_TOKEN_MAX + 1)
                : -1;
    if (n < 0) {
        const char *why = msg ? "the OAUTHBEARER token is over its size cap" : "out of memory";
        free(msg);
        sasl_fail(conn, why);
        return;
    }
    static const char head[PRE + 1] = "n,,\x01" /* split: \x01a would be one hex escape */
                                      "auth=Bearer ";
    memcpy(msg, head, PRE);
    memcpy(msg + PRE + n, "\x01\x01", POST);
    sasl_token(conn, msg, PRE + (size_t)n + POST);
    free(msg);
}

/* Copies a peer's message for a log line: at most 200 bytes, non-printable bytes replaced. */
static void peer_text(struct gr_str s, char *out, size_t cap)
{
    size_t n = s.len > 0 ? (size_t)s.len : 0;
    if (n > 200) n = 200;
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = s.ptr[i] >= 0x20 && s.ptr[i] <= 0x7e ? s.ptr[i] : '?';
    out[n] = 0;
}

/* The answer to one of the client's SASL requests (`kind`, sent at `version`): the body after the header. */
static void sasl_answer(struct gr_broker_client_conn *conn, enum req_kind kind, int16_t version,
                        const uint8_t *p, size_t len)
{
    struct gr_broker_client *bc = conn->bc;
    struct gr_arena arena;
    gr_arena_init(&arena, 32 * len + 4096);
    struct gr_rd rd;
    gr_rd_init(&rd, p, len, &arena);
    char why[400], text[256];
    if (kind == K_SASL_HANDSHAKE) {
        struct gr_sasl_handshake_response h;
        gr_sasl_handshake_response_init(&h);
        int rc = gr_sasl_handshake_response_decode(&rd, version, &h);
        if (rc || h.error_code != GR_ERR_NONE) {
            size_t o = (size_t)snprintf(why, sizeof why, "%s",
                                        rc ? "malformed SaslHandshake answer" : gr_error_name(h.error_code));
            if (!rc && h.error_code == GR_ERR_UNSUPPORTED_SASL_MECHANISM) {
                o += (size_t)snprintf(why + o, sizeof why - o, ": the peer's listener %s enables",
                                      bc->listener_name);
                for (int32_t i = 0; i < h.mechanisms.count && i < 8 && o < sizeof why - 80; i++) {
                    peer_text(h.mechanisms.items[i], text, 64);
                    o += (size_t)snprintf(why + o, sizeof why - o, "%s%s", i ? "," : " ", text);
                }
            }
            gr_arena_reset(&arena);
            sasl_fail(conn, why);
            return;
        }
        gr_arena_reset(&arena);
        if (bc->sasl_mech == SASL_PLAIN) { /* RFC 4616: authzid NUL authcid NUL passwd (no authzid) */
            size_t ul = strlen(bc->sasl_username), pl = strlen(bc->sasl_password);
            uint8_t *t = malloc(ul + pl + 2);
            if (!t) {
                sasl_fail(conn, "out of memory");
                return;
            }
            t[0] = 0;
            memcpy(t + 1, bc->sasl_username, ul);
            t[1 + ul] = 0;
            memcpy(t + 2 + ul, bc->sasl_password, pl);
            sasl_token(conn, t, ul + pl + 2);
            OPENSSL_cleanse(t, ul + pl + 2);
            free(t);
            return;
        }
        if (bc->sasl_mech == SASL_OAUTHBEARER) {
            oauth_first(conn);
            return;
        }
        conn->scram = gr_scram_client_new(bc->sasl_mech == SASL_SCRAM_SHA_512, bc->sasl_username,
                                          bc->sasl_password, NULL);
        if (!conn->scram) {
            sasl_fail(conn, "out of memory for a SCRAM exchange");
            return;
        }
        size_t fl;
        const char *first = gr_scram_client_first(conn->scram, &fl);
        sasl_token(conn, first, fl);
        return;
    }
    struct gr_sasl_authenticate_response a;
    gr_sasl_authenticate_response_init(&a);
    int rc = gr_sasl_authenticate_response_decode(&rd, version, &a);
    if (rc || a.error_code != GR_ERR_NONE) {
        if (rc)
            snprintf(why, sizeof why, "malformed SaslAuthenticate answer");
        else {
            peer_text(a.error_message, text, sizeof text);
            snprintf(why, sizeof why, "%s: %s", gr_error_name(a.error_code), text);
        }
        gr_arena_reset(&arena);
        sasl_fail(conn, why);
        return;
    }
    conn->sasl_step++;
    const uint8_t *tok = a.auth_bytes.len > 0 ? a.auth_bytes.ptr : (const uint8_t *)"";
    size_t tl = a.auth_bytes.len > 0 ? (size_t)a.auth_bytes.len : 0;
    if (tl > GR_SCRAM_CLIENT_TOKEN_MAX) {
        gr_arena_reset(&arena);
        sasl_fail(conn, "the peer's SASL token is over the size the client takes");
        return;
    }
    if (bc->sasl_mech == SASL_OAUTHBEARER && (tl || conn->sasl_step > 1)) {
        /* RFC 7628 3.2.2: a refused token comes back as a JSON error challenge, to which the client answers
         * %x01 and the server then fails the exchange (its message is logged from that answer) */
        if (conn->sasl_step > 1) {
            gr_arena_reset(&arena);
            sasl_fail(conn, "the peer went on after refusing the token");
            return;
        }
        peer_text((struct gr_str){(const char *)tok, (int32_t)tl}, text, sizeof text);
        GR_WARN_RATELIMITED("broker client: %s: broker %d refused this broker's OAUTHBEARER token: %s",
                            conn->client_id, (int)conn->broker_id, text);
        gr_arena_reset(&arena);
        sasl_token(conn, "\x01", 1);
        return;
    }
    if (bc->sasl_mech == SASL_PLAIN || bc->sasl_mech == SASL_OAUTHBEARER || conn->sasl_step == 2) {
        int vr = bc->sasl_mech == SASL_PLAIN || bc->sasl_mech == SASL_OAUTHBEARER
                     ? 0
                     : gr_scram_client_verify(conn->scram, tok, tl, why, sizeof why);
        if (bc->sasl_mech == SASL_PLAIN && tl)
            snprintf(why, sizeof why, "a PLAIN exchange answered with a token"), vr = -1;
        gr_arena_reset(&arena);
        gr_scram_client_free(conn->scram);
        conn->scram = NULL;
        if (vr) {
            sasl_fail(conn, why);
            return;
        }
        conn->stats.sasl_auths++;
        session_start(conn, version >= 1 ? a.session_lifetime_ms : 0);
        if (conn->reauth == REAUTH_RUNNING) {
            reauth_done(conn);
            return;
        }
        conn_ready(conn);
        return;
    }
    char final[GR_SCRAM_CLIENT_FINAL_MAX];
    size_t fl = 0;
    rc = gr_scram_client_final(conn->scram, tok, tl, final, sizeof final, &fl, why, sizeof why);
    gr_arena_reset(&arena);
    if (rc) {
        sasl_fail(conn, why);
        return;
    }
    sasl_token(conn, final, fl);
}

/* KIP-368: a (re-)authentication ended now with the server's session_lifetime_ms `life_ms` (0: the session
 * does not expire). As Kafka's SaslClientAuthenticator (ReauthInfo), the next re-authentication is due at a
 * random point between 85% and 95% of the lifetime, leaving room for the round trips and clock drift and
 * spreading many connections' re-authentications apart. */
static void session_start(struct gr_broker_client_conn *conn, int64_t life_ms)
{
    struct gr_broker_client *bc = conn->bc;
    conn->session_life_ms = life_ms > 0 ? life_ms : 0;
    if (life_ms <= 0) {
        conn->reauth_at_ms = 0;
        return;
    }
    bc->rng ^= bc->rng << 13; /* xorshift64: jitter only, nothing secret */
    bc->rng ^= bc->rng >> 7;
    bc->rng ^= bc->rng << 17;
    double pct = 0.85 + (double)(bc->rng >> 11) / (double)(1ULL << 53) * 0.10;
    int64_t after = (int64_t)((double)life_ms * pct);
    conn->reauth_at_ms = gr_time_mono_ms() + (after > 0 ? after : 1);
}

/* KIP-368: when the session's re-authentication time passed and nothing is in flight: SaslHandshake (v1, the
 * same mechanism) and SaslAuthenticate again on the same connection, without ApiVersions (the first answer is
 * kept, as Kafka's client keeps it). Requests the owner sends meanwhile wait in the queue. */
static void reauth_maybe(struct gr_broker_client_conn *conn)
{
    if (conn->state != S_READY || conn->reauth != REAUTH_DUE || conn->flight.head) return;
    conn->reauth = REAUTH_RUNNING;
    sasl_start(conn);
}

/* A re-authentication succeeded: counted, logged, and the requests that waited go out. */
static void reauth_done(struct gr_broker_client_conn *conn)
{
    conn->reauth = REAUTH_NONE;
    conn->stats.sasl_reauths++;
    GR_INFO(
        "broker client: %s: re-authenticated to broker %d with SASL %s as User:%s (session lifetime %lld ms)",
        conn->client_id, (int)conn->broker_id, sasl_names[conn->bc->sasl_mech], conn->bc->sasl_username,
        (long long)conn->session_life_ms);
    conn_flush(conn);
}

/* The connection is ready: the owner hears so, and queued requests go out. */
static void conn_ready(struct gr_broker_client_conn *conn)
{
    struct gr_broker_client *bc = conn->bc;
    conn->state = S_READY;
    conn->stats.readies++;
    char sasl[GR_SCRAM_CLIENT_NAME_MAX + 64] = "";
    if (bc->sasl_mech != SASL_NONE)
        snprintf(sasl, sizeof sasl, " with SASL %s as User:%s", sasl_names[bc->sasl_mech], bc->sasl_username);
    GR_INFO("broker client: %s: connected to broker %d at %s:%d%s%s%s", conn->client_id, (int)conn->broker_id,
            conn->host, (int)conn->port, conn->ssl ? " over " : "",
            conn->ssl ? gr_tls_version(conn->ssl) : "", sasl);
    if (conn->state_cb) conn->state_cb(conn->ctx, conn, true);
    if (alive(conn) && conn->state == S_READY) conn_flush(conn);
}

/* ---- reading ---- */

/* Skips a tagged-field section. */
static void skip_tags(struct gr_rd *rd)
{
    uint32_t n = gr_rd_tag_count(rd);
    for (uint32_t i = 0; i < n && !rd->err; i++) {
        (void)gr_rd_uvarint(rd);
        gr_rd_skip(rd, gr_rd_uvarint(rd));
    }
}

/* One complete response frame (owned here) for the head of flight. Returns whether to keep reading. */
static bool on_frame(struct gr_broker_client_conn *conn, uint8_t *frame, size_t len)
{
    struct gr_broker_client_req *req = conn->flight.head;
    struct gr_rd rd;
    gr_rd_init(&rd, frame, len, NULL);
    int32_t corr = gr_rd_int32(&rd);
    if (gr_response_header_version(req->resp_ops, req->version) >= 1) skip_tags(&rd);
    if (rd.err || corr != req->correlation_id) {
        GR_ERROR_RATELIMITED("broker client: %s: answer from broker %d has correlation id %d, expected %d: "
                             "closing the connection",
                             conn->client_id, (int)conn->broker_id, (int)corr, (int)req->correlation_id);
        free(frame);
        conn_fail(conn, GR_BROKER_CLIENT_BAD_RESPONSE, false);
        return false;
    }
    fifo_pop(&conn->flight);
    conn->stats.responses++;
    if (req->kind != K_USER) {
        if (req->kind == K_API_VERSIONS)
            av_answer(conn, rd.p, gr_rd_left(&rd));
        else
            sasl_answer(conn, req->kind, req->version, rd.p, gr_rd_left(&rd));
        free(frame);
        req_free(req);
        return alive(conn) && conn->fd >= 0;
    }
    struct gr_broker_client_answer ans = {.frame = frame};
    gr_arena_init(&ans.arena, 32 * len + (1 << 20));
    rd.arena = &ans.arena;
    void *resp = ans.resp = req->cb ? calloc(1, req->resp_ops->struct_bytes) : NULL;
    int rc = 0;
    if (resp) {
        req->resp_ops->init(resp);
        rc = req->resp_ops->decode(&rd, req->version, resp);
    }
    if (req->cb && (!resp || rc)) {
        GR_ERROR_RATELIMITED("broker client: %s: undecodable %s v%d from broker %d (error %d): closing the "
                             "connection",
                             conn->client_id, req->resp_ops->name, (int)req->version, (int)conn->broker_id,
                             rc);
        bool ok = req_finish(req, GR_BROKER_CLIENT_BAD_RESPONSE, NULL);
        free(resp);
        gr_arena_reset(&ans.arena);
        free(frame);
        if (ok) conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return false;
    }
    bool keep = req_finish(req, GR_BROKER_CLIENT_OK, &ans) && conn->fd >= 0;
    if (!ans.kept) {
        free(resp);
        gr_arena_reset(&ans.arena);
        free(frame);
    }
    if (keep && conn->state == S_READY) reauth_maybe(conn); /* from the loop: a failure may call back */
    if (keep && alive(conn) && conn->fd >= 0 && conn->state == S_READY) conn_flush(conn);
    return keep && alive(conn) && conn->fd >= 0;
}

/* Reads the size prefix; returns 1 when a body buffer is ready, 0 to wait, -1 after failing the
 * connection. */
static int read_prefix(struct gr_broker_client_conn *conn)
{
    char lost[300];
    ssize_t n = conn_recv(conn, conn->rhdr + conn->rhave, 4 - conn->rhave, lost, sizeof lost);
    if (n == -2) return 0;
    if (n <= 0) {
        GR_WARN_RATELIMITED("broker client: %s: connection to broker %d lost: %s", conn->client_id,
                            (int)conn->broker_id, n == 0 ? "closed by the peer" : lost);
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return -1;
    }
    conn->rhave += (size_t)n;
    if (conn->rhave < 4) return 0;
    int64_t size = (int32_t)((uint32_t)conn->rhdr[0] << 24 | (uint32_t)conn->rhdr[1] << 16 |
                             (uint32_t)conn->rhdr[2] << 8 | conn->rhdr[3]);
    const char *why = NULL;
    if (!conn->flight.head)
        why = "an answer nobody asked for";
    else if (size < 4)
        why = "a frame too short for a response header";
    else if (size > conn->bc->response_bytes_max)
        why = "a frame over the response cap";
    if (why) {
        GR_ERROR_RATELIMITED(
            "broker client: %s: broker %d sent %s (%lld bytes, cap %lld): closing the connection",
            conn->client_id, (int)conn->broker_id, why, (long long)size,
            (long long)conn->bc->response_bytes_max);
        conn_fail(conn, GR_BROKER_CLIENT_BAD_RESPONSE, false);
        return -1;
    }
    conn->rframe = malloc((size_t)size);
    if (!conn->rframe) {
        GR_ERROR_RATELIMITED("broker client: %s: no memory for a %lld-byte answer", conn->client_id,
                             (long long)size);
        conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
        return -1;
    }
    conn->rlen = (size_t)size;
    conn->rgot = 0;
    return 1;
}

/* Reads and handles up to 64 answer frames. */
static void conn_read(struct gr_broker_client_conn *conn)
{
    for (int frames = 0; frames < 64 && alive(conn) && conn->fd >= 0;) {
        if (!conn->rframe) {
            if (read_prefix(conn) <= 0) break;
            continue;
        }
        char why[300];
        ssize_t n = conn_recv(conn, conn->rframe + conn->rgot, conn->rlen - conn->rgot, why, sizeof why);
        if (n == -2) break;
        if (n <= 0) {
            GR_WARN_RATELIMITED("broker client: %s: connection to broker %d lost mid-answer: %s",
                                conn->client_id, (int)conn->broker_id, n == 0 ? "closed by the peer" : why);
            conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, false);
            break;
        }
        conn->rgot += (size_t)n;
        if (conn->rgot < conn->rlen) continue;
        uint8_t *frame = conn->rframe;
        size_t len = conn->rlen;
        conn->rframe = NULL;
        conn->rhave = conn->rlen = conn->rgot = 0;
        frames++;
        if (!on_frame(conn, frame, len)) break;
    }
    /* decrypted bytes left in the session wake no watcher: come back to them on the next loop iteration */
    if (alive(conn) && conn->fd >= 0 && conn->ssl && gr_tls_pending(conn->ssl))
        ev_feed_event(conn->bc->loop, &conn->rw, EV_READ);
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker_client_conn *conn = w->data;
    struct gr_broker_client *bc = conn->bc;
    enter(bc);
    if (conn->state == S_TLS) {
        conn_tls_step(conn);
    } else {
        if (conn->tls_wr_wants_rw) { /* a TLS write waited for this */
            conn->tls_wr_wants_rw = false;
            conn_flush(conn);
        }
        if (alive(conn) && conn->fd >= 0) conn_read(conn);
    }
    if (alive(conn) && conn->fd >= 0) conn_arm(conn);
    leave(bc);
}

/* ---- the image ---- */

/* Image observer: a connection whose target changed (address, broker epoch, gone) is closed and, when the
 * broker is registered, connects again at once; one waiting for a target tries again. */
static void on_image(void *ctx, struct gr_image *img)
{
    (void)img;
    struct gr_broker_client *bc = ctx;
    enter(bc);
    for (struct gr_broker_client_conn *conn = bc->conns; conn; conn = conn->next) {
        if (!alive(conn)) continue;
        char host[GR_HOST_BYTES_MAX + 1];
        int32_t port = 0;
        int64_t epoch = 0;
        bool has = target_lookup(conn, host, &port, &epoch);
        if (conn->state == S_UNRESOLVED) {
            if (has) conn_connect(conn);
            continue;
        }
        if (!conn->has_target || !has || strcmp(host, conn->host) || port != conn->port ||
            epoch != conn->broker_epoch) {
            GR_INFO("broker client: %s: broker %d's registration changed: reconnecting", conn->client_id,
                    (int)conn->broker_id);
            conn_fail(conn, GR_BROKER_CLIENT_DISCONNECTED, true);
        }
    }
    leave(bc);
}

/* Starts the connections opened since the last loop iteration (open never connects inline). */
static void on_start(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker_client *bc = w->data;
    enter(bc);
    for (struct gr_broker_client_conn *conn = bc->conns; conn; conn = conn->next)
        if (conn->state == S_UNRESOLVED && !conn->has_target && conn->stats.connects == 0) conn_connect(conn);
    leave(bc);
}

/* ---- the public face ---- */

/* Frees the client's SASL credentials, wiping the password. */
static void client_free_sasl(struct gr_broker_client *bc)
{
    if (bc->sasl_password) OPENSSL_cleanse(bc->sasl_password, strlen(bc->sasl_password));
    free(bc->sasl_password);
    free(bc->sasl_username);
    bc->sasl_password = bc->sasl_username = NULL;
}

int gr_broker_client_set_tls_ctx(struct gr_broker_client *bc, struct ssl_ctx_st *ctx)
{
    if (!ctx || !bc->tls_ctx) return -EINVAL;
    bc->tls_ctx = ctx; /* read at each connect (on_writable); SSL_new took its own reference before */
    return 0;
}

struct gr_broker_client *gr_broker_client_new(struct ev_loop *loop, struct gr_image *img,
                                              const struct gr_broker_client_config *cfg, char *err,
                                              size_t err_len)
{
    const char *why = NULL;
    size_t nl = cfg->listener_name ? strlen(cfg->listener_name) : 0;
    if (nl == 0 || nl > GR_LISTENER_NAME_BYTES_MAX)
        why = "listener name must be 1 to 63 bytes";
    else if (cfg->request_timeout_ms < 1)
        why = "request timeout must be at least 1 ms";
    else if (cfg->backoff_ms < 0)
        why = "back-off must not be negative";
    else if (cfg->in_flight_max < 0 || cfg->in_flight_max > GR_BROKER_CLIENT_IN_FLIGHT_MAX)
        why = "in-flight maximum out of range";
    else if (cfg->response_bytes_max < 0 || cfg->response_bytes_max > INT32_MAX)
        why = "response cap out of range";
    if (why) {
        snprintf(err, err_len, "broker client: %s", why);
        return NULL;
    }
    struct gr_broker_client *bc = calloc(1, sizeof *bc);
    if (!bc) {
        snprintf(err, err_len, "broker client: out of memory");
        return NULL;
    }
    bc->loop = loop;
    bc->img = img;
    bc->node_id = cfg->node_id;
    memcpy(bc->listener_name, cfg->listener_name, nl + 1);
    bc->request_timeout_ms = cfg->request_timeout_ms;
    bc->backoff_ms = cfg->backoff_ms;
    bc->in_flight_max = cfg->in_flight_max ? cfg->in_flight_max : GR_BROKER_CLIENT_IN_FLIGHT_DEFAULT;
    bc->response_bytes_max =
        cfg->response_bytes_max ? cfg->response_bytes_max : GR_BROKER_CLIENT_RESPONSE_BYTES_DEFAULT;
    bc->tls_ctx = cfg->tls_ctx;
    bc->rng =
        (((uint64_t)gr_time_mono_ms() * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)(uint32_t)cfg->node_id << 32)) |
        1;
    bc->tls_verify_host = cfg->tls_verify_host;
    if (cfg->sasl_mechanism) {
        for (int m = SASL_PLAIN; m <= SASL_OAUTHBEARER; m++)
            if (!strcmp(cfg->sasl_mechanism, sasl_names[m])) bc->sasl_mech = (enum sasl_mech)m;
        bool oauth = bc->sasl_mech == SASL_OAUTHBEARER;
        bc->sasl_oauth_login = cfg->sasl_oauth_login;
        const char *user = oauth && cfg->sasl_oauth_login ? gr_oauth_login_principal(cfg->sasl_oauth_login)
                                                          : cfg->sasl_username;
        bool bad = !bc->sasl_mech || !user || (oauth ? !cfg->sasl_oauth_login : !cfg->sasl_password);
        if (bad || !(bc->sasl_username = strdup(user)) ||
            (!oauth && !(bc->sasl_password = strdup(cfg->sasl_password)))) {
            snprintf(err, err_len, "broker client: %s",
                     !bc->sasl_mech ? "unknown SASL mechanism"
                     : bad          ? "SASL credentials (or the OAUTHBEARER login) missing"
                                    : "out of memory");
            client_free_sasl(bc);
            free(bc);
            return NULL;
        }
    }
    for (int i = 0; i < gr_msg_ops_count; i++) {
        if (!strcmp(gr_msg_ops_table[i].name, "api_versions_request")) bc->av_req_ops = &gr_msg_ops_table[i];
        if (!strcmp(gr_msg_ops_table[i].name, "sasl_handshake_request"))
            bc->sh_req_ops = &gr_msg_ops_table[i];
        if (!strcmp(gr_msg_ops_table[i].name, "sasl_authenticate_request"))
            bc->sa_req_ops = &gr_msg_ops_table[i];
    }
    if (!bc->av_req_ops || !bc->sh_req_ops || !bc->sa_req_ops || gr_image_observe(img, on_image, bc) != 0) {
        snprintf(err, err_len, "broker client: %s",
                 bc->av_req_ops && bc->sh_req_ops && bc->sa_req_ops ? "too many image observers"
                                                                    : "no ApiVersions or SASL codec");
        client_free_sasl(bc);
        free(bc);
        return NULL;
    }
    bc->av_resp_ops = gr_msg_ops_find(bc->av_req_ops->api_key, true);
    ev_timer_init(&bc->start_tw, on_start, 0.0, 0.0);
    bc->start_tw.data = bc;
    return bc;
}

/* Tears a connection down without any callback: socket, watchers, requests. */
static void conn_teardown(struct gr_broker_client_conn *conn)
{
    conn_close_socket(conn);
    ev_timer_stop(conn->bc->loop, &conn->tw);
    for (struct gr_broker_client_req *req = conn_take_all(conn), *next; req; req = next) {
        next = req->next;
        req_free(req);
    }
    conn->state = S_CLOSED;
}

void gr_broker_client_free(struct gr_broker_client *bc)
{
    if (!bc) return;
    assert(bc->depth == 0 && "gr_broker_client_free inside a callback");
    while (bc->conns) {
        struct gr_broker_client_conn *conn = bc->conns;
        bc->conns = conn->next;
        if (alive(conn)) conn_teardown(conn);
        conn_free(conn);
    }
    ev_timer_stop(bc->loop, &bc->start_tw);
    gr_image_unobserve(bc->img, on_image, bc);
    client_free_sasl(bc);
    free(bc);
}

struct gr_broker_client_conn *gr_broker_client_open(struct gr_broker_client *bc, int32_t broker_id,
                                                    enum gr_broker_client_purpose purpose, int32_t index,
                                                    const struct gr_msg_ops *const *apis, int api_count,
                                                    gr_broker_client_state_cb *state_cb, void *ctx, int *rc)
{
    *rc = -EINVAL;
    if (broker_id < 0 || index < 0 || (unsigned)purpose > GR_BROKER_CLIENT_SUMMARY || api_count < 0 ||
        api_count > GR_BROKER_CLIENT_APIS_MAX)
        return NULL;
    for (int i = 0; i < api_count; i++)
        if (!apis[i] || apis[i]->response) return NULL;
    for (struct gr_broker_client_conn *c = bc->conns; c; c = c->next)
        if (alive(c) && c->broker_id == broker_id && c->purpose == purpose && c->index == index) {
            *rc = -EEXIST;
            return NULL;
        }
    struct gr_broker_client_conn *conn = calloc(1, sizeof *conn);
    if (!conn) {
        *rc = -ENOMEM;
        return NULL;
    }
    conn->bc = bc;
    conn->broker_id = broker_id;
    conn->purpose = purpose;
    conn->index = index;
    memcpy(conn->apis, apis, (size_t)api_count * sizeof *apis);
    conn->api_count = api_count;
    conn->state_cb = state_cb;
    conn->ctx = ctx;
    conn->fd = -1;
    conn->state = S_UNRESOLVED;
    snprintf(conn->client_id, sizeof conn->client_id, "broker-%d-%s-%d", (int)bc->node_id,
             purpose_names[purpose], (int)index);
    ev_init(&conn->rw, on_readable);
    ev_init(&conn->ww, on_writable);
    ev_init(&conn->tw, on_timer);
    conn->rw.data = conn->ww.data = conn->tw.data = conn;
    conn->next = bc->conns;
    bc->conns = conn;
    ev_timer_start(bc->loop, &bc->start_tw);
    *rc = 0;
    return conn;
}

void gr_broker_client_close(struct gr_broker_client_conn *conn)
{
    struct gr_broker_client *bc = conn->bc;
    assert(alive(conn));
    conn_teardown(conn);
    if (bc->depth > 0) {
        bc->need_sweep = true;
        return;
    }
    for (struct gr_broker_client_conn **pp = &bc->conns; *pp; pp = &(*pp)->next)
        if (*pp == conn) {
            *pp = conn->next;
            break;
        }
    conn_free(conn);
}

bool gr_broker_client_ready(const struct gr_broker_client_conn *conn)
{
    return conn->state == S_READY;
}

int16_t gr_broker_client_version(const struct gr_broker_client_conn *conn, const struct gr_msg_ops *ops)
{
    return conn->state == S_READY && !ops->response ? shared_version(conn, ops) : -1;
}

struct gr_broker_client_req *gr_broker_client_send(struct gr_broker_client_conn *conn,
                                                   const struct gr_msg_ops *ops, int16_t version,
                                                   const void *body, int64_t timeout_ms,
                                                   gr_broker_client_cb *cb, void *ctx, int *rc)
{
    int16_t max = gr_broker_client_version(conn, ops);
    const struct peer_api *p = max >= 0 ? peer_api(conn, ops->api_key) : NULL;
    struct peer_api internal = {ops->api_key, ops->version_min, ops->version_max};
    if (max >= 0 && ops->api_key >= GR_API_KEY_INTERNAL_MIN) p = &internal;
    int files = 0;
    if (conn->state != S_READY)
        *rc = -ENOTCONN;
    else if (!p || version > max || version < p->min_version || version < ops->version_min)
        *rc = -EPROTONOSUPPORT;
    else if (conn->queue.count >= GR_BROKER_CLIENT_QUEUED_MAX)
        *rc = -ENOBUFS;
    else if (ops->file_bytes && (ops->file_bytes(body, version, &files), files > 0))
        *rc = -EINVAL; /* records must be in memory: one buffer per request */
    else
        *rc = 0;
    if (*rc) return NULL;
    struct gr_broker_client_req *req = req_encode(conn, ops, version, body);
    if (!req) {
        *rc = -ENOMEM;
        return NULL;
    }
    req->cb = cb;
    req->ctx = ctx;
    req->timeout_ms = timeout_ms > 0 ? timeout_ms : conn->bc->request_timeout_ms;
    req->deadline_ms = gr_time_mono_ms() + req->timeout_ms;
    fifo_push(&conn->queue, req);
    conn_flush(conn); /* writes never call back: a failed send is noticed by the read side */
    return req;
}

struct gr_broker_client_answer *gr_broker_client_answer_keep(struct gr_broker_client_answer *ans)
{
    assert(!ans->kept && "an answer is kept once");
    struct gr_broker_client_answer *kept = malloc(sizeof *kept);
    if (!kept) return NULL;
    *kept = *ans; /* the arena's chunks, the frame and the struct move; nothing points back at `ans` */
    ans->kept = true;
    return kept;
}

void gr_broker_client_answer_free(struct gr_broker_client_answer *ans)
{
    if (!ans) return;
    free(ans->resp);
    gr_arena_reset(&ans->arena);
    free(ans->frame);
    free(ans);
}

void gr_broker_client_cancel(struct gr_broker_client_req *req)
{
    struct gr_broker_client_conn *conn = req->conn;
    struct fifo keep = {0};
    bool queued = false;
    for (struct gr_broker_client_req *r; (r = fifo_pop(&conn->queue));) {
        if (r == req)
            queued = true;
        else
            fifo_push(&keep, r);
    }
    conn->queue = keep;
    if (queued) {
        req_free(req);
        return;
    }
    req->cb = NULL; /* in flight: keeps its place until its answer comes, then is dropped */
    req->ctx = NULL;
}

int gr_broker_client_pending(const struct gr_broker_client_conn *conn)
{
    int n = conn->queue.count;
    for (const struct gr_broker_client_req *r = conn->flight.head; r; r = r->next)
        n += r->kind == K_USER;
    return n;
}

const struct gr_broker_client_stats *gr_broker_client_stats(const struct gr_broker_client_conn *conn)
{
    return &conn->stats;
}

const char *gr_broker_client_status_name(enum gr_broker_client_status status)
{
    switch (status) {
    case GR_BROKER_CLIENT_OK:
        return "ok";
    case GR_BROKER_CLIENT_TIMEOUT:
        return "timeout";
    case GR_BROKER_CLIENT_DISCONNECTED:
        return "disconnected";
    case GR_BROKER_CLIENT_BAD_RESPONSE:
        return "bad response";
    }
    return "unknown";
}
