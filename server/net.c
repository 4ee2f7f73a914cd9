/*
 * net.c: the listeners and the connections on the libev loop.
 *
 * Start: gr_net_bind binds every listener early (a busy port stops the broker before it touches the data)
 * but listens only in gr_net_serve, once the store is open: until then a connect is refused rather than
 * left waiting unanswered while partitions load.
 * Reading: a connection reads into a 64 KiB buffer and cuts frames out of it (int32 size prefix, bounded
 * by socket.request.max.bytes); a frame larger than what is buffered gets its own allocation and is read
 * into directly. Each complete frame becomes a request appended to the connection's FIFO and dispatched at
 * once when it is the FIFO head or a Produce (gr_dispatch_runs_ahead: read-ahead for group commit) with no
 * Produce before it held or waiting before its append (produce_waits_turn); any other
 * request is held until every request before it is answered and sent, then dispatched from a zero timer at
 * the loop's top level (conn_held_cb; never inside conn_write, which runs within other requests'
 * completions), so that its answer tells the state of when it is sent (Kafka handles one request per
 * connection at a time).
 * Memory bounds, each stopping the connection from taking requests (its bytes stay in the kernel or
 * in its buffer) until a release re-checks it (the stalled list, from a zero timer at the loop's top level):
 *   - queued.max.request.bytes: a frame's announced size is reserved in the request pool when its prefix is
 *     read, as Kafka's SimpleMemoryPool (non-strict: taken while the pool is not spent, so one frame may
 *     overshoot and a frame larger than the pool passes when it is otherwise free); a connection that
 *     cannot reserve stops, a connection inside a reserved frame keeps reading it (no deadlock between
 *     partly received frames); the bytes are given back once the request is answered;
 *   - GR_CONN_PIPELINE_MAX requests outstanding per connection;
 *   - unsent answers: gregor.connection.unsent.bytes.max per connection and gregor.unsent.bytes.max
 *     across the broker (a connection with nothing unsent may still take one request).
 * Writing: only the FIFO head is written, and only when finished: memory chunks with sendmsg (MSG_MORE when
 * a file range follows), file ranges with sendfile, resuming after partial writes. The write watcher runs
 * only while bytes remain.
 * Out of memory: a connection whose state or read buffer cannot be allocated is closed at once (logged,
 * rate-limited) and the listener keeps accepting.
 * Out of descriptors: accept failing with EMFILE/ENFILE closes a spare descriptor, accepts the waiting
 * connections and closes them at once (their clients see a closed connection and retry), takes the spare
 * again and stops the listeners for GR_ACCEPT_BACKOFF_MS; the episode is logged when it starts and, with
 * its counts, when it ends.
 * TLS (listeners whose security protocol is SSL, server/tls.h): the connection gets an SSL object and its
 * reads and writes go through it, on the same watchers: a TLS read that must write first (the handshake)
 * runs the write watcher, a TLS write that must read first runs the read watcher. Decrypted bytes may wait
 * inside the session while the socket is drained, so the read watcher is fed an event while they do.
 * Responses are copied, up to GR_CONN_TLS_OUT_BYTES at a time, into the connection's TLS buffer (file ranges
 * with pread instead of sendfile) and written with SSL_write, except on a connection whose sends the kernel
 * encrypts (kTLS, decided once after its handshake: gr_tls_send_path), which writes file ranges with
 * SSL_sendfile once the buffer before them is written (memory chunks still go through the buffer and
 * SSL_write, so the bytes keep their order). The handshake is bounded by
 * connections.max.idle.ms counted from the accept (gr_net_close_idle). Plaintext connections take none of
 * these paths (a branch on conn->ssl).
 * Read next: server/netlimits.h, server/dispatch.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/time.h"
#include "server/broker.h"
#include "server/sasl.h"
#include "server/ssl_principal.h"
#include "server/tls.h"

#define GR_CONN_READ_BUF_BYTES (64 * 1024)
/* Requests read ahead on one connection before it stops reading: lets one fsync cover a producer's
 * in-flight batches while bounding memory per connection. */
#define GR_CONN_PIPELINE_MAX 64
/* A TLS connection's write buffer: one TLS record's worth of plaintext (16 KiB) per SSL_write. */
#define GR_CONN_TLS_OUT_BYTES (16 * 1024)

/* Tests only: GREGOR_TEST_KTLS_EMULATE=1 in the environment (read at start by gr_net_serve) sends the file
 * ranges of every TLS connection through the kTLS path's calls (conn_ktls_sendfile, gr_tls_sendfile) with a
 * user-space copy where the kernel does not encrypt, so that the path's bookkeeping (the buffer stopping at a
 * file range, partial sends, a full socket) runs on machines without the tls ULP. The metric and the start
 * line still say what the kernel does. */
static bool ktls_emulate;

struct gr_conn {
    struct gr_broker *broker;
    struct gr_listener *listener; /* the listener it came in on: decides the advertised address */
    int fd;
    ev_io rw, ww;
    char peer[64];
    char host[48];   /* the peer's address without the port (ACL host matching) */
    char *principal; /* the authenticated principal ("User:<name>", heap), NULL = User:ANONYMOUS */
    struct gr_conn *prev, *next; /* broker list */
    struct gr_req *head, *tail;  /* FIFO */
    int outstanding;
    uint8_t *rbuf;
    size_t rlen;  /* bytes buffered in rbuf */
    uint8_t *big; /* frame being read directly (big_len bytes reserved in the request pool) */
    size_t big_len, big_have;
    int64_t unsent_bytes; /* answers built and not yet sent (see req_answered) */
    int64_t frame_bytes;  /* frames read or being read and not yet answered */
    int64_t last_active_ms;
    bool reading;
    bool writing; /* inside conn_write (a request it dispatches may finish at once and kick it again) */
    bool closing;
    bool stalled; /* in the broker's stalled list */
    struct gr_conn *stall_prev, *stall_next;
    ev_timer close_w; /* frees the connection from the loop's top level */
    ev_timer held_w;  /* dispatches a held FIFO head from the loop's top level (conn_write) */
    /* TLS (NULL ssl = PLAINTEXT): the session, when it was accepted (the handshake's bound), the response
       bytes copied for SSL_write (tls_out_off of tls_out_len written), and which watcher a call waits on */
    struct ssl_st *ssl;
    int64_t accepted_ms;
    uint8_t *tls_out;
    size_t tls_out_len, tls_out_off;
    bool tls_read_wants_write; /* a read (the handshake) waits for the socket to be writable */
    bool tls_principal_done;   /* the SSL principal mapping ran (once, after the handshake) */
    bool tls_write_wants_read; /* a write waits for the socket to be readable */
    bool tls_ktls;             /* the kernel encrypts its sends: file ranges go out with SSL_sendfile (decided
                                  once, after the handshake: gr_tls_send_path) */
    /* SASL (NULL sasl = none): the session (server/sasl.h) and the timer that closes the connection
       connection.failed.authentication.delay.ms after a raw token failed */
    struct gr_sasl *sasl;
    ev_timer sasl_fail_w;
};

static void conn_write(struct gr_conn *conn);
static void conn_kick(struct gr_conn *conn);
static void conn_update_read(struct gr_conn *conn);
static void req_answered(struct gr_req *req);

static void stall_add(struct gr_conn *conn)
{
    struct gr_broker *b = conn->broker;
    if (conn->stalled) return;
    conn->stalled = true;
    conn->stall_prev = NULL;
    conn->stall_next = b->stalled_head;
    if (b->stalled_head) b->stalled_head->stall_prev = conn;
    b->stalled_head = conn;
    b->stalled_count++;
}

static void stall_remove(struct gr_conn *conn)
{
    struct gr_broker *b = conn->broker;
    if (!conn->stalled) return;
    if (conn->stall_prev)
        conn->stall_prev->stall_next = conn->stall_next;
    else
        b->stalled_head = conn->stall_next;
    if (conn->stall_next) conn->stall_next->stall_prev = conn->stall_prev;
    conn->stall_prev = conn->stall_next = NULL;
    conn->stalled = false;
    b->stalled_count--;
}

/* Something was released: re-check the stalled connections from the loop's top level (never from inside
 * the caller, which may be in the middle of writing or dispatching on one of them). */
static void resume_schedule(struct gr_broker *b)
{
    if (b->stalled_count && !ev_is_active(&b->resume_w)) ev_timer_start(b->loop, &b->resume_w);
}

static void request_pool_give(struct gr_broker *b, int64_t bytes)
{
    if (!bytes) return;
    gr_mempool_give(&b->request_pool, bytes);
    b->released_since_trim_bytes += bytes;
    resume_schedule(b);
}

/* Whether the connection may take one more request by its pipeline, frame and unsent-answer bounds. The frame
 * bound holds with the default unbounded queued.max.request.bytes too: unanswered frames of one connection
 * stop it at socket.request.max.bytes (Kafka reads one request per connection at a time), so it holds at
 * most about two largest frames instead of GR_CONN_PIPELINE_MAX of them. */
static bool conn_may_take(const struct gr_conn *conn)
{
    const struct gr_broker *b = conn->broker;
    return conn->outstanding < GR_CONN_PIPELINE_MAX && conn->frame_bytes < b->conn_frame_bytes_max &&
           gr_netlimits_may_take(conn->unsent_bytes, b->conn_unsent_bytes_max, &b->unsent_pool);
}

/* Frees a closed connection; runs from its own zero timer so that no caller still holds it. */
static void conn_free_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_conn *conn = w->data;
    struct gr_broker *b = conn->broker;
    ev_timer_stop(b->loop, &conn->close_w);
    ev_timer_stop(b->loop, &conn->held_w);
    ev_timer_stop(b->loop, &conn->sasl_fail_w);
    close(conn->fd);
    struct gr_req *r = conn->head;
    while (r) {
        struct gr_req *next = r->next;
        r->conn = NULL;
        r->next = NULL;
        if (r->done || !r->parked) gr_req_free(r);
        /* a parked request is freed when it finishes (its handler holds it in the parked list) */
        r = next;
    }
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        b->conns = conn->next;
    if (conn->next) conn->next->prev = conn->prev;
    b->conn_count--;
    /* its read buffer and state (and a TLS session's buffers) go back too: after a flood of connections
       (10,000 waiting before authentication) RSS returns near where it was (compat-tests/tls/halfopen.py) */
    b->released_since_trim_bytes += GR_CONN_READ_BUF_BYTES + (int64_t)sizeof *conn;
    stall_remove(conn);
    if (conn->big) request_pool_give(b, (int64_t)conn->big_len);
    free(conn->rbuf);
    free(conn->big);
    gr_tls_free(conn->ssl);
    free(conn->tls_out);
    free(conn->principal);
    gr_sasl_free(conn->sasl);
    free(conn);
}

/* Closes a connection: stops its watchers and shuts the socket now, frees it from the loop shortly after. */
void gr_conn_close(struct gr_conn *conn, const char *why)
{
    if (conn->closing) return;
    struct gr_broker *b = conn->broker;
    if (why) GR_DEBUG("closing connection %s: %s", conn->peer, why);
    conn->closing = true;
    conn->reading = false;
    ev_io_stop(b->loop, &conn->rw);
    ev_io_stop(b->loop, &conn->ww);
    shutdown(conn->fd, SHUT_RDWR);
    ev_timer_init(&conn->close_w, conn_free_cb, 0, 0);
    conn->close_w.data = conn;
    ev_timer_start(b->loop, &conn->close_w);
}

/* A raw SASL token failed: the connection closes connection.failed.authentication.delay.ms later, with no
   answer (Kafka's delayed close); nothing more is read meanwhile. */
static void conn_sasl_fail_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    gr_conn_close(w->data, "SASL authentication failed");
}

/* A raw SASL token (after SaslHandshake v0): one step, answered with a raw size-prefixed token. */
static void conn_sasl_raw(struct gr_conn *conn, struct gr_req *req)
{
    struct gr_broker *b = conn->broker;
    uint8_t *out;
    size_t n;
    const char *principal;
    enum gr_sasl_step_rc rc = gr_sasl_raw_token(conn->sasl, req->frame, req->frame_len, &out, &n, &principal);
    if (rc == GR_SASL_FAIL) {
        double delay = b->cfg.settings.failed_auth_delay_ms / 1000.0;
        ev_timer_init(&conn->sasl_fail_w, conn_sasl_fail_cb, delay, 0);
        conn->sasl_fail_w.data = conn;
        ev_timer_start(b->loop, &conn->sasl_fail_w);
        conn_update_read(conn);
        return;
    }
    req->out_mem = malloc(4 + n);
    req->chunks = gr_arena_calloc(&req->arena, 1, sizeof *req->chunks);
    if (!req->out_mem || !req->chunks || (principal && gr_conn_set_principal(conn, principal))) {
        free(out);
        req->done = req->no_response = true;
        gr_conn_close(conn, "out of memory");
        return;
    }
    req->out_mem[0] = (uint8_t)(n >> 24);
    req->out_mem[1] = (uint8_t)(n >> 16);
    req->out_mem[2] = (uint8_t)(n >> 8);
    req->out_mem[3] = (uint8_t)n;
    if (n) memcpy(req->out_mem + 4, out, n);
    free(out);
    req->out_mem_bytes = 4 + n;
    req->chunks[0].mem = req->out_mem;
    req->chunks[0].len = 4 + n;
    req->chunk_count = 1;
    req->done = true;
    req_answered(req);
}

/* Dispatches a request, through the SASL gate on a SASL listener (server/sasl.h). */
static void conn_dispatch(struct gr_conn *conn, struct gr_req *req)
{
    if (conn->sasl) {
        const char *why;
        switch (gr_sasl_gate(conn->sasl, req->frame, req->frame_len, gr_time_mono_ms(), &why)) {
        case GR_SASL_PASS:
            break;
        case GR_SASL_RAW:
            conn_sasl_raw(conn, req);
            return;
        default:
            req->done = req->no_response = true;
            gr_conn_close(conn, why);
            return;
        }
    }
    gr_dispatch(req);
}

/* Whether a Produce read now must wait for its turn instead of running ahead: a Produce before it on the
 * connection is held, or waits before its append: for its transaction's verification or implicit add at the
 * coordinator, or for a log not made yet (req->before_append). Kafka handles one request per connection at a
 * time, so a client's pipelined batches of a partition are appended in the order sent; run ahead, the later
 * batch of a new producer epoch reached the partition while the first one still waited for the coordinator,
 * and was refused OUT_OF_ORDER_SEQUENCE_NUMBER (compat-tests/cluster/txn_raise.py, the Java client at
 * transaction version 2). At most GR_CONN_PIPELINE_MAX requests are walked. */
static bool produce_waits_turn(const struct gr_conn *conn, const struct gr_req *req)
{
    for (const struct gr_req *r = conn->head; r && r != req; r = r->next)
        if (!r->done && (r->before_append || (r->held && gr_dispatch_runs_ahead(r->frame, r->frame_len))))
            return true;
    return false;
}

static void conn_add_request(struct gr_conn *conn, uint8_t *frame, size_t len)
{
    struct gr_broker *b = conn->broker;
    struct gr_req *req = calloc(1, sizeof *req);
    if (!req) {
        free(frame);
        request_pool_give(b, (int64_t)len);
        gr_conn_close(conn, "out of memory");
        return;
    }
    req->broker = b;
    req->conn = conn;
    req->frame = frame;
    req->frame_len = len;
    req->pool_bytes = (int64_t)len; /* reserved when its size prefix was read */
    gr_reqtime_received(req);
    /* arrays decoded from a frame can take at most ~32 bytes of memory per wire byte (see gen_codec.py) */
    gr_arena_init(&req->arena, 32 * len + (1 << 20));
    if (conn->tail)
        conn->tail->next = req;
    else
        conn->head = req;
    conn->tail = req;
    conn->outstanding++;
    /* until authenticated, a SASL connection's frames each wait for the one before (their meaning depends
       on the state it leaves) */
    if (conn->head != req && (!gr_dispatch_runs_ahead(frame, len) || produce_waits_turn(conn, req) ||
                              (conn->sasl && gr_sasl_in_handshake(conn->sasl)))) {
        req->held = true; /* dispatched by conn_held_cb once it is the FIFO head */
        return;
    }
    conn_dispatch(conn, req);
}

/* Cuts complete frames out of rbuf while the connection may take requests and the request pool lets their
 * sizes be reserved; what is left waits in rbuf. Returns false if the connection was closed. */
static bool conn_parse(struct gr_conn *conn)
{
    struct gr_broker *b = conn->broker;
    int64_t frame_max = b->cfg.settings.socket_request_max_bytes;
    size_t off = 0;
    /* before SASL authentication: sasl.server.max.receive.size (checked before anything is allocated) */
    if (conn->sasl) frame_max = gr_sasl_frame_max(conn->sasl, frame_max);
    while (conn->rlen - off >= 4 && !conn->big && conn_may_take(conn)) {
        const uint8_t *p = conn->rbuf + off;
        int32_t size = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        if (size < GR_FRAME_BYTES_MIN || size > frame_max) {
            GR_WARN_RATELIMITED("connection %s: frame size %d outside [%d, %lld], closing", conn->peer, size,
                                GR_FRAME_BYTES_MIN, (long long)frame_max);
            gr_conn_close(conn, "bad frame size");
            return false;
        }
        if (!gr_mempool_try_take(&b->request_pool, size)) break; /* stalled until bytes are given back */
        conn->frame_bytes += size;
        size_t have = conn->rlen - off - 4;
        uint8_t *frame = malloc((size_t)size);
        if (!frame) {
            request_pool_give(b, size);
            gr_conn_close(conn, "out of memory");
            return false;
        }
        if (have >= (size_t)size) {
            memcpy(frame, p + 4, (size_t)size);
            off += 4 + (size_t)size;
            conn_add_request(conn, frame, (size_t)size);
            if (conn->closing) return false;
        } else {
            memcpy(frame, p + 4, have);
            conn->big = frame;
            conn->big_len = (size_t)size;
            conn->big_have = have;
            off = conn->rlen;
        }
    }
    if (off) {
        memmove(conn->rbuf, conn->rbuf + off, conn->rlen - off);
        conn->rlen -= off;
    }
    return true;
}

/* The principal of a finished handshake (server/ssl_principal.h): User:<the subject mapped by the listener's
 * ssl.principal.mapping.rules>, User:ANONYMOUS without a client certificate. 0, or -1 after closing the
 * connection when no rule matches the subject (Kafka fails the authentication) or it cannot be read. */
static int conn_tls_principal(struct gr_conn *conn)
{
    conn->tls_principal_done = true;
    if (conn->listener->sasl)
        return 0; /* SASL_SSL: the principal is SASL's (Kafka maps SSL subjects only on SSL) */
    char dn[GR_PRINCIPAL_MAX + 1], name[GR_PRINCIPAL_MAX + 1], principal[GR_PRINCIPAL_MAX + 8];
    int rc = gr_tls_peer_dn(conn->ssl, dn, sizeof dn);
    if (rc == 0) return 0; /* no certificate: User:ANONYMOUS */
    if (rc < 0 || gr_ssl_rules_apply(conn->listener->principal_rules, dn, name, sizeof name) < 0 ||
        snprintf(principal, sizeof principal, "User:%s", name) > GR_PRINCIPAL_MAX ||
        gr_conn_set_principal(conn, principal) < 0) {
        GR_WARN_RATELIMITED("connection %s on %s: no principal for the client certificate '%.200s' "
                            "(ssl.principal.mapping.rules), closing",
                            conn->peer, conn->listener->name, rc < 0 ? "(unreadable)" : dn);
        gr_conn_close(conn, "SSL authentication failed");
        return -1;
    }
    return 0;
}

/* One TLS read into dst: the byte count, 0 when the peer closed, -1 when it waits for the socket (the
 * handshake's write sets the write watcher), -2 after closing the connection on a failure. */
static ssize_t conn_tls_read(struct gr_conn *conn, uint8_t *dst, size_t len)
{
    enum gr_tls_want tw;
    char why[300];
    ssize_t n = gr_tls_read(conn->ssl, dst, len, &tw, why, sizeof why);
    if (n >= 0 && !conn->tls_principal_done && gr_tls_handshake_done(conn->ssl)) {
        /* the send path, once per connection before its first request: the kernel encrypts or it does not */
        enum gr_tls_send_path sp = gr_tls_send_path(conn->ssl, NULL);
        conn->listener->tls_connections[sp]++; /* what the kernel does, also under the emulation below */
        conn->tls_ktls = sp == GR_TLS_SEND_KTLS || ktls_emulate;
        if (conn_tls_principal(conn) < 0) return -2;
    }
    if (n >= 0) return n;
    if (tw == GR_TLS_WANT_READ) return -1;
    if (tw == GR_TLS_WANT_WRITE) {
        conn->tls_read_wants_write = true;
        if (!ev_is_active(&conn->ww)) ev_io_start(conn->broker->loop, &conn->ww);
        return -1;
    }
    GR_WARN_RATELIMITED("connection %s on %s: %s, closing", conn->peer, conn->listener->name, why);
    gr_conn_close(conn, why);
    return -2;
}

static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_conn *conn = w->data;
    conn->last_active_ms = gr_time_mono_ms();
    if (conn->tls_write_wants_read) { /* a TLS write waited for this */
        conn->tls_write_wants_read = false;
        conn_write(conn);
        if (conn->closing) return;
    }
    bool tls_blocked = false; /* the last TLS read waits for the socket */
    for (int rounds = 0; rounds < 16 && conn->reading && !conn->closing; rounds++) {
        ssize_t n;
        size_t want = conn->big ? conn->big_len - conn->big_have : GR_CONN_READ_BUF_BYTES - conn->rlen;
        uint8_t *dst = conn->big ? conn->big + conn->big_have : conn->rbuf + conn->rlen;
        if (conn->ssl) {
            n = conn_tls_read(conn, dst, want);
            if (n == -2) return; /* closed */
            tls_blocked = n < 0;
            if (n < 0) break; /* waits for the socket (the watchers are set) */
        } else {
            n = read(conn->fd, dst, want);
        }
        if (n == 0) {
            gr_conn_close(conn, "peer closed");
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) break;
            gr_conn_close(conn, strerror(errno));
            return;
        }
        if (conn->big) {
            conn->big_have += (size_t)n;
            if (conn->big_have == conn->big_len) {
                uint8_t *frame = conn->big;
                size_t len = conn->big_len;
                conn->big = NULL;
                conn_add_request(conn, frame, len);
                if (conn->closing) return;
            }
        } else {
            conn->rlen += (size_t)n;
            if (!conn_parse(conn)) return;
        }
        conn_update_read(conn);
        /* A short read drained the socket: stop without the read that would only return EAGAIN (one
           syscall of five per small request); the watcher is level-triggered, so bytes that arrive later
           call back. Not for TLS: a read returns one record at most. */
        if ((size_t)n < want && !conn->ssl) break;
    }
    if (conn->closing) return;
    /* records already inside the session (read-ahead) wake no watcher: come back for them, unless the last
       read found only part of one, which waits for the socket */
    if (conn->ssl && conn->reading && !tls_blocked && gr_tls_buffered(conn->ssl))
        ev_feed_event(conn->broker->loop, &conn->rw, EV_READ);
    conn_write(conn);
}

/* Reads while inside a reserved frame (it must be able to complete), else only when nothing waits in
 * rbuf (rlen < 4), the connection may take a request and the request pool is not spent. A connection that
 * stops for a limit joins the stalled list. */
static void conn_update_read(struct gr_conn *conn)
{
    struct gr_broker *b = conn->broker;
    if (conn->closing) return;
    bool want = conn->big || (conn->rlen < 4 && conn_may_take(conn) && !gr_mempool_spent(&b->request_pool));
    if (conn->sasl && gr_sasl_failed(conn->sasl)) want = false; /* only the failure's answer is left */
    if (conn->ssl) {
        if (conn->tls_write_wants_read) want = true;  /* a TLS write waits for the socket's bytes */
        if (conn->tls_read_wants_write) want = false; /* a TLS read waits for room: no spinning on reads */
    }
    if (want && !conn->reading) {
        ev_io_start(b->loop, &conn->rw);
        /* records already inside the session: the socket may never call back for them (at most one read
           that finds only part of a record, once per restart: no spinning) */
        if (conn->ssl && gr_tls_buffered(conn->ssl)) ev_feed_event(b->loop, &conn->rw, EV_READ);
    }
    if (!want && conn->reading) ev_io_stop(b->loop, &conn->rw);
    conn->reading = want;
    if (want)
        stall_remove(conn);
    else
        stall_add(conn);
}

/* The re-check pass over the stalled connections (copied first: a pass may change the list). */
static void resume_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    if (b->stalled_count > b->resume_cap) {
        int cap = b->stalled_count * 2;
        struct gr_conn **buf = realloc(b->resume_buf, (size_t)cap * sizeof *buf);
        if (!buf) {
            ev_timer_set(&b->resume_w, 0.01, 0); /* retry shortly */
            ev_timer_start(b->loop, &b->resume_w);
            return;
        }
        b->resume_buf = buf;
        b->resume_cap = cap;
    }
    int n = 0;
    for (struct gr_conn *c = b->stalled_head; c; c = c->stall_next)
        b->resume_buf[n++] = c;
    ev_timer_set(&b->resume_w, 0, 0);
    /* connections are freed only by their own close timers, never inside this pass */
    for (int i = 0; i < n; i++) {
        struct gr_conn *c = b->resume_buf[i];
        if (c->closing || !c->stalled) continue;
        if (c->rlen >= 4 && !c->big && !conn_parse(c)) continue;
        conn_update_read(c);
    }
}

static void release_head(struct gr_conn *conn)
{
    struct gr_req *r = conn->head;
    conn->head = r->next;
    if (!conn->head) conn->tail = NULL;
    conn->outstanding--;
    gr_reqtime_sent(r, conn->peer); /* its last byte is written (or no answer was due) */
    gr_req_free(r);
    if (conn->stalled) resume_schedule(conn->broker);
    /* a failed SASL authentication's answer is sent: the connection closes (SaslServerAuthenticator) */
    if (conn->sasl && gr_sasl_failed(conn->sasl)) gr_conn_close(conn, "SASL authentication failed");
}

/* A request's answer is built (req->out_mem_bytes set; none for acks=0): frees its frame (giving back its
 * request-pool bytes), counts the answer's memory as unsent on its connection and the broker until it is
 * sent, and lets the connection write. */
static void req_answered(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    free(req->frame);
    req->frame = NULL;
    if (req->conn) req->conn->frame_bytes -= req->pool_bytes;
    request_pool_give(b, req->pool_bytes);
    req->pool_bytes = 0;
    if (!req->conn || !req->out_mem) return;
    req->answer_bytes = (int64_t)(req->out_mem_bytes + gr_arena_footprint_bytes(&req->arena));
    req->conn->unsent_bytes += req->answer_bytes;
    gr_mempool_take(&b->unsent_pool, req->answer_bytes);
}

static void req_answered_kick(struct gr_req *req)
{
    req_answered(req);
    if (req->conn) conn_kick(req->conn);
}

/* Gives back what a request holds in the connection bounds (its frame's pool bytes, its unsent answer);
 * called by gr_req_free. */
static void req_released(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    if (req->conn) req->conn->frame_bytes -= req->pool_bytes;
    request_pool_give(b, req->pool_bytes);
    req->pool_bytes = 0;
    if (!req->answer_bytes) return;
    if (req->conn) req->conn->unsent_bytes -= req->answer_bytes;
    gr_mempool_give(&b->unsent_pool, req->answer_bytes);
    b->released_since_trim_bytes += req->answer_bytes;
    req->answer_bytes = 0;
    resume_schedule(b);
}

void gr_net_housekeeping(struct gr_broker *b, int64_t now_mono_ms)
{
    struct gr_accept_episode *ep = &b->accept_ep;
    if (gr_accept_episode_try_end(ep, now_mono_ms, GR_ACCEPT_EPISODE_QUIET_MS))
        GR_WARN(
            "accept: out of file descriptors (%s) for %lld ms, ended: %lld failed accepts, %lld connections "
            "closed unserved",
            strerror(ep->err), (long long)(ep->last_fail_ms - ep->start_ms), (long long)ep->failures,
            (long long)ep->refused);
    if (b->released_since_trim_bytes >= GR_TRIM_RELEASED_BYTES_MIN) {
        b->released_since_trim_bytes = 0;
        malloc_trim(0); /* glibc keeps freed heap pages otherwise: RSS would stay at a flood's mark */
    }
}

/* The held FIFO head's turn (conn_write scheduled it): dispatched from the loop's top level, then whatever
   it finished is written. */
static void conn_held_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_conn *conn = w->data;
    ev_timer_stop(conn->broker->loop, &conn->held_w);
    if (conn->closing || !conn->head || !conn->head->held) return;
    struct gr_req *r = conn->head;
    r->held = false;
    conn_dispatch(conn, r);
    if (!conn->closing) conn_write(conn);
}

/* Fills the TLS buffer with the next bytes of r's response: memory chunks copied, file ranges read with
 * pread (sendfile cannot encrypt in user space), except on a kTLS connection, where the buffer stops at a
 * file range (conn_ktls_sendfile sends it once the buffer is written). r's chunk_at/chunk_off count bytes
 * taken into the buffer. Returns 0, or -1 after closing. */
static int conn_tls_fill(struct gr_conn *conn, struct gr_req *r)
{
    size_t len = 0;
    while (len < GR_CONN_TLS_OUT_BYTES && r->chunk_at < r->chunk_count) {
        struct gr_chunk *c = &r->chunks[r->chunk_at];
        if (!c->mem && conn->tls_ktls) break; /* a file range: SSL_sendfile, after these bytes */
        size_t take = c->len - r->chunk_off;
        if (take > GR_CONN_TLS_OUT_BYTES - len) take = GR_CONN_TLS_OUT_BYTES - len;
        if (c->mem) {
            memcpy(conn->tls_out + len, c->mem + r->chunk_off, take);
        } else {
            ssize_t k = pread(c->fd, conn->tls_out + len, take, c->file_pos + (off_t)r->chunk_off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) { /* the file shrank under us (truncation) or cannot be read */
                gr_conn_close(conn, k == 0 ? "segment shrank during read" : strerror(errno));
                return -1;
            }
            take = (size_t)k;
        }
        len += take;
        r->chunk_off += take;
        if (r->chunk_off == c->len) {
            r->chunk_at++;
            r->chunk_off = 0;
        }
    }
    conn->tls_out_len = len;
    conn->tls_out_off = 0;
    return 0;
}

/* On a kTLS connection whose TLS buffer is written (no SSL_write unfinished, so these bytes follow all before
 * them): sends the rest of r's current file range with SSL_sendfile, from the page cache without a copy.
 * Returns 0 after progress (the range done: r's next chunk is current), 1 when it waits for the socket to be
 * writable, -1 after closing the connection (a failure, or the file shrank: the response can't be completed).
 */
static int conn_ktls_sendfile(struct gr_conn *conn, struct gr_req *r)
{
    struct gr_chunk *c = &r->chunks[r->chunk_at];
    if (r->chunk_off < c->len) {
        enum gr_tls_want tw;
        char why[300];
        ssize_t n = gr_tls_sendfile(conn->ssl, c->fd, c->file_pos + (off_t)r->chunk_off,
                                    c->len - r->chunk_off, &tw, why, sizeof why);
        if (n == 0) {
            gr_conn_close(conn, "segment shrank during sendfile");
            return -1;
        }
        if (n < 0 && tw == GR_TLS_WANT_WRITE) return 1; /* conn_write keeps the write watcher */
        if (n < 0 && tw == GR_TLS_WANT_READ) {          /* the emulation's SSL_write only */
            conn->tls_write_wants_read = true;
            conn_update_read(conn);
            return 1;
        }
        if (n < 0) { /* as a failed SSL_write: closed (a peer's reset is common, not worth a warning) */
            gr_conn_close(conn, why);
            return -1;
        }
        r->chunk_off += (size_t)n;
        if (r->chunk_off < c->len) return 0; /* partial: the next call sends on or says the socket is full */
    }
    r->chunk_at++;
    r->chunk_off = 0;
    return 0;
}

/* Writes r's response through TLS from the connection's buffer (file ranges of a kTLS connection with
 * conn_ktls_sendfile). Returns 0 when all of it is written, 1 when
 * it waits for the socket (the watcher it needs is set), -1 after closing the connection. */
static int conn_tls_write(struct gr_conn *conn, struct gr_req *r)
{
    if (!conn->tls_out && !(conn->tls_out = malloc(GR_CONN_TLS_OUT_BYTES))) {
        gr_conn_close(conn, "out of memory");
        return -1;
    }
    for (;;) {
        if (conn->tls_out_off == conn->tls_out_len) {
            if (r->chunk_at >= r->chunk_count) return 0;
            if (conn->tls_ktls && !r->chunks[r->chunk_at].mem) {
                int rc = conn_ktls_sendfile(conn, r);
                if (rc) return rc;
                continue;
            }
            if (conn_tls_fill(conn, r)) return -1;
            if (!conn->tls_out_len) continue; /* only empty chunks, up to a file range or the end */
        }
        enum gr_tls_want tw;
        char why[300];
        ssize_t n = gr_tls_write(conn->ssl, conn->tls_out + conn->tls_out_off,
                                 conn->tls_out_len - conn->tls_out_off, &tw, why, sizeof why);
        if (n > 0) {
            conn->tls_out_off += (size_t)n;
            continue;
        }
        if (tw == GR_TLS_WANT_WRITE) return 1; /* the head stays done: conn_write keeps the write watcher */
        if (tw == GR_TLS_WANT_READ) {
            conn->tls_write_wants_read = true;
            conn_update_read(conn);
            return 1;
        }
        gr_conn_close(conn, why);
        return -1;
    }
}

/* Writes finished responses from the FIFO head; returns when the socket is full or the head is not done. */
static void conn_write(struct gr_conn *conn)
{
    struct gr_broker *b = conn->broker;
    if (conn->closing || conn->writing) return; /* re-entered from a request freed below: the loop goes on */
    conn->writing = true;
    while (conn->head && conn->head->done && !conn->closing) {
        struct gr_req *r = conn->head;
        if (r->no_response ||
            (r->chunk_at >= r->chunk_count && !(conn->ssl && conn->tls_out_off < conn->tls_out_len))) {
            release_head(conn);
            continue;
        }
        struct gr_chunk *c = &r->chunks[r->chunk_at];
        ssize_t n;
        gr_reqtime_sending(r);
        if (conn->ssl) {
            int rc = conn_tls_write(conn, r);
            if (rc < 0) return; /* closed */
            if (rc > 0) break;  /* waits for the socket */
            release_head(conn);
            continue;
        }
        if (c->mem) {
            struct iovec iov[16];
            int cnt = 0, i = r->chunk_at;
            for (; i < r->chunk_count && cnt < 16 && r->chunks[i].mem; i++, cnt++) {
                size_t skip = i == r->chunk_at ? r->chunk_off : 0;
                iov[cnt].iov_base = (void *)(r->chunks[i].mem + skip);
                iov[cnt].iov_len = r->chunks[i].len - skip;
            }
            /* MSG_MORE when a file range of the same response follows: header and data share packets */
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
            n = sendmsg(conn->fd, &msg, i < r->chunk_count ? MSG_MORE : 0);
        } else {
            off_t pos = c->file_pos + (off_t)r->chunk_off;
            n = sendfile(conn->fd, c->fd, &pos, c->len - r->chunk_off);
            if (n == 0) { /* the file shrank under us (truncation): the response can't be completed */
                gr_conn_close(conn, "segment shrank during sendfile");
                return;
            }
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) break;
            gr_conn_close(conn, strerror(errno));
            return;
        }
        size_t left = (size_t)n;
        while (left && r->chunk_at < r->chunk_count) {
            size_t rem = r->chunks[r->chunk_at].len - r->chunk_off;
            if (left >= rem) {
                left -= rem;
                r->chunk_at++;
                r->chunk_off = 0;
            } else {
                r->chunk_off += left;
                left = 0;
            }
        }
        if (r->chunk_at >= r->chunk_count) release_head(conn);
    }
    if (conn->head && conn->head->held && !conn->closing && !ev_is_active(&conn->held_w)) {
        /* every request before it is answered and sent: it runs next, seeing the state of then. Not here:
           conn_write runs inside other requests' completions (a partition's waiters being woken, a flush
           binding), and a handler started there could change what they are walking; the loop's top level
           is safe */
        gr_reqtime_received(conn->head); /* as Kafka reads it: once the one before is sent */
        ev_timer_init(&conn->held_w, conn_held_cb, 0, 0);
        conn->held_w.data = conn;
        ev_timer_start(b->loop, &conn->held_w);
    }
    conn->writing = false;
    if (conn->closing) return;
    /* a TLS write waiting for the socket's bytes must not spin on its writability */
    bool pending =
        (conn->head && conn->head->done && !conn->tls_write_wants_read) || conn->tls_read_wants_write;
    if (pending && !ev_is_active(&conn->ww)) ev_io_start(b->loop, &conn->ww);
    if (!pending && ev_is_active(&conn->ww)) ev_io_stop(b->loop, &conn->ww);
    conn_update_read(conn);
}

static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_conn *conn = w->data;
    conn->last_active_ms = gr_time_mono_ms();
    if (conn->tls_read_wants_write) { /* the handshake's write: the read goes on */
        conn->tls_read_wants_write = false;
        conn_update_read(conn);
        if (conn->reading) ev_feed_event(conn->broker->loop, &conn->rw, EV_READ);
    }
    conn_write(conn);
}

static void conn_kick(struct gr_conn *conn)
{
    if (!conn->closing) conn_write(conn);
}

/* The spare descriptor given up when accept runs out of descriptors (see accept_out_of_fds). */
static int spare_open(void)
{
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void listeners_watch(struct gr_broker *b, bool on)
{
    for (int i = 0; i < b->listener_count; i++) {
        struct gr_listener *l = &b->listeners[i];
        if (l->fd < 0) continue;
        if (on)
            ev_io_start(b->loop, &l->w);
        else
            ev_io_stop(b->loop, &l->w);
    }
}

/* accept failed with EMFILE/ENFILE: refuse the waiting connections through the spare descriptor (a client
 * sees its connection closed and retries, instead of waiting in the backlog), then stop the listeners for
 * GR_ACCEPT_BACKOFF_MS instead of spinning on a listener that stays readable. */
static void accept_out_of_fds(struct gr_broker *b, struct gr_listener *l, int err)
{
    if (gr_accept_episode_fail(&b->accept_ep, gr_time_mono_ms(), err))
        GR_WARN("accept on %s: %s: refusing new connections (closed at once), retrying every %d ms until "
                "descriptors free up; logged again when this ends",
                l->name, strerror(err), GR_ACCEPT_BACKOFF_MS);
    if (b->spare_fd >= 0) {
        close(b->spare_fd);
        b->spare_fd = -1;
        for (int i = 0; i < GR_ACCEPT_REFUSE_PER_ROUND_MAX; i++) {
            int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) break;
            close(fd);
            gr_accept_episode_refused(&b->accept_ep);
        }
        b->spare_fd = spare_open(); /* retried at the next round when this fails */
    }
    listeners_watch(b, false);
    if (!ev_is_active(&b->accept_w))
        ev_timer_start(b->loop, &b->accept_w); /* one shot of GR_ACCEPT_BACKOFF_MS */
}

static void accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_broker *b = w->data;
    if (b->spare_fd < 0) b->spare_fd = spare_open();
    listeners_watch(b, true);
}

void *(*gr_net_conn_alloc)(size_t bytes) = malloc;

/* A zeroed connection with its read buffer, from gr_net_conn_alloc; NULL when either allocation fails. */
static struct gr_conn *conn_alloc(void)
{
    struct gr_conn *conn = gr_net_conn_alloc(sizeof *conn);
    if (!conn) return NULL;
    memset(conn, 0, sizeof *conn);
    conn->rbuf = gr_net_conn_alloc(GR_CONN_READ_BUF_BYTES);
    if (!conn->rbuf) {
        free(conn);
        return NULL;
    }
    return conn;
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    struct gr_listener *listener = w->data;
    struct gr_broker *b = listener->broker;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(listener->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EMFILE || err == ENFILE) {
                accept_out_of_fds(b, listener, err);
                return;
            }
            if (err == EINTR || err == ECONNABORTED) continue; /* a client gone before it was accepted */
            if (err != EAGAIN && err != EWOULDBLOCK) GR_WARN_RATELIMITED("accept: %s", strerror(err));
            return;
        }
        gr_accept_episode_ok(&b->accept_ep, gr_time_mono_ms());
        if (b->conn_count >= b->cfg.settings.max_connections) {
            close(fd);
            GR_WARN_RATELIMITED("max.connections reached, connection refused");
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct gr_conn *conn = conn_alloc();
        if (!conn) {
            close(fd); /* the client sees the connection closed and may retry */
            GR_WARN_RATELIMITED("accept on %s: out of memory for a new connection, closed", listener->name);
            continue;
        }
        conn->broker = b;
        conn->listener = listener;
        conn->fd = fd;
        if (listener->tls_ctx && !(conn->ssl = gr_tls_new(listener->tls_ctx, fd))) {
            close(fd);
            free(conn->rbuf);
            free(conn);
            GR_WARN_RATELIMITED("accept on %s: out of memory for a TLS session, closed", listener->name);
            continue;
        }
        char host[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
            port = ntohs(sin->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
            port = ntohs(sin6->sin6_port);
        }
        snprintf(conn->peer, sizeof conn->peer, "%s:%d", host, port);
        snprintf(conn->host, sizeof conn->host, "%s", host);
        if (listener->sasl && !(conn->sasl = gr_sasl_new(listener->sasl, conn->peer))) {
            close(fd);
            gr_tls_free(conn->ssl);
            free(conn->rbuf);
            free(conn);
            GR_WARN_RATELIMITED("accept on %s: out of memory for a SASL session, closed", listener->name);
            continue;
        }
        conn->last_active_ms = conn->accepted_ms = gr_time_mono_ms();
        ev_io_init(&conn->rw, conn_read_cb, fd, EV_READ);
        ev_io_init(&conn->ww, conn_write_cb, fd, EV_WRITE);
        conn->rw.data = conn->ww.data = conn;
        conn->next = b->conns;
        if (b->conns) b->conns->prev = conn;
        b->conns = conn;
        b->conn_count++;
        conn->reading = true;
        ev_io_start(loop, &conn->rw);
    }
}

/* One entry of a listener list: NAME://host:port, host may be empty or [v6]. Returns 0 or -1. */
static int parse_endpoint(const char *p, size_t len, char *name, size_t name_len, char *host, size_t host_len,
                          int *port)
{
    char buf[300];
    if (len >= sizeof buf) return -1;
    memcpy(buf, p, len);
    buf[len] = 0;
    char *sep = strstr(buf, "://");
    if (!sep) return -1;
    *sep = 0;
    if (!buf[0] || strlen(buf) >= name_len) return -1;
    snprintf(name, name_len, "%s", buf);
    char *hp = sep + 3;
    char *colon = strrchr(hp, ':');
    if (!colon) return -1;
    *colon = 0;
    if (*hp == '[') { /* [::1] */
        hp++;
        char *rb = strchr(hp, ']');
        if (rb) *rb = 0;
    }
    if (strlen(hp) >= host_len) return -1;
    snprintf(host, host_len, "%s", hp);
    char *e;
    long pv = strtol(colon + 1, &e, 10);
    if (*e || colon[1] == 0 || pv < 0 || pv > 65535) return -1;
    *port = (int)pv;
    return 0;
}

/* Splits a comma-separated listener list into `out` (at most GR_LISTENERS_MAX); returns the count or -1. */
static int parse_listener_list(const char *spec, struct gr_listener *out, bool advertised)
{
    int n = 0;
    const char *p = spec;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[len - 1] == ' ')
            len--;
        if (len) {
            if (n == GR_LISTENERS_MAX) return -1;
            struct gr_listener *l = &out[n++];
            char host[256];
            int port;
            if (parse_endpoint(p, len, l->name, sizeof l->name, host, sizeof host, &port)) return -1;
            if (advertised) {
                snprintf(l->adv_host, sizeof l->adv_host, "%s", host);
                l->adv_port = port;
            } else {
                snprintf(l->host, sizeof l->host, "%s", host);
                l->port = port;
            }
        }
        if (!end) break;
        p = end + 1;
    }
    return n;
}

enum listener_protocol {
    PROTO_UNMAPPED,
    PROTO_PLAINTEXT,
    PROTO_SSL,
    PROTO_SASL_PLAINTEXT,
    PROTO_SASL_SSL,
    PROTO_OTHER
};

/* listener.security.protocol.map lookup: the security protocol of a listener name. */
static enum listener_protocol listener_protocol(struct gr_broker *b, const char *name)
{
    const char *map = b->cfg.settings.listener_security_protocol_map;
    size_t nl = strlen(name);
    for (const char *p = map; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            size_t vl = len - nl - 1;
            if (vl == strlen("PLAINTEXT") && !strncmp(v, "PLAINTEXT", vl)) return PROTO_PLAINTEXT;
            if (vl == strlen("SSL") && !strncmp(v, "SSL", vl)) return PROTO_SSL;
            if (vl == strlen("SASL_PLAINTEXT") && !strncmp(v, "SASL_PLAINTEXT", vl))
                return PROTO_SASL_PLAINTEXT;
            if (vl == strlen("SASL_SSL") && !strncmp(v, "SASL_SSL", vl)) return PROTO_SASL_SSL;
            return PROTO_OTHER;
        }
        if (!end) break;
        p = end + 1;
    }
    return PROTO_UNMAPPED;
}

static int bind_listener(struct gr_broker *b, struct gr_listener *l)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", l->port);
    int rc = getaddrinfo(l->host[0] ? l->host : NULL, portstr, &hints, &ai);
    if (rc) {
        GR_ERROR("listeners: cannot resolve '%s': %s", l->host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen)) {
        GR_ERROR("listeners: cannot listen on %s:%d: %s", l->host, l->port, strerror(errno));
        freeaddrinfo(ai);
        if (fd >= 0) close(fd);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    l->port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                      : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    l->fd = fd;
    l->broker = b;
    ev_io_init(&l->w, accept_cb, fd, EV_READ);
    l->w.data = l;
    return 0;
}

static void req_close(struct gr_req *req, const char *why)
{
    gr_conn_close(req->conn, why);
}

static const char *req_peer(const struct gr_req *req)
{
    return gr_conn_peer(req->conn);
}

static const char *req_principal(const struct gr_req *req)
{
    return gr_conn_principal(req->conn);
}

static const char *req_host(const struct gr_req *req)
{
    return req->conn->host;
}

/* What request.c tells a request's connection (struct gr_req_sink). */
static const struct gr_req_sink req_sink = {req_answered_kick, req_released,  req_close,
                                            req_peer,          req_principal, req_host};

void gr_net_init(struct gr_broker *b)
{
    b->req_sink = &req_sink;
    gr_mempool_init(&b->request_pool, b->cfg.settings.queued_max_request_bytes);
    gr_mempool_init(&b->unsent_pool, b->cfg.settings.gregor_unsent_bytes_max);
    b->conn_unsent_bytes_max = b->cfg.settings.gregor_connection_unsent_bytes_max;
    b->conn_frame_bytes_max = b->cfg.settings.socket_request_max_bytes;
    ev_timer_init(&b->resume_w, resume_cb, 0, 0);
    b->resume_w.data = b;
    ev_timer_init(&b->accept_w, accept_retry_cb, GR_ACCEPT_BACKOFF_MS / 1000.0, 0);
    b->accept_w.data = b;
    b->spare_fd = spare_open();
}

int gr_net_bind(struct gr_broker *b)
{
    const char *spec = b->cfg.settings.listeners;
    int n = parse_listener_list(spec, b->listeners, false);
    if (n <= 0) {
        GR_ERROR("config: listeners: cannot parse '%s' (expected NAME://host:port[,NAME://host:port])", spec);
        return -1;
    }
    b->listener_count = n;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < i; k++)
            if (strcmp(b->listeners[k].name, b->listeners[i].name) == 0) {
                GR_ERROR("config: listeners: listener name %s appears twice", b->listeners[i].name);
                return -1;
            }
        enum listener_protocol proto = listener_protocol(b, b->listeners[i].name);
        if (proto == PROTO_UNMAPPED || proto == PROTO_OTHER) {
            GR_ERROR(
                "config: listeners: %s is %s in listener.security.protocol.map (Gregor serves PLAINTEXT, "
                "SSL, SASL_PLAINTEXT and SASL_SSL listeners)",
                b->listeners[i].name,
                proto == PROTO_UNMAPPED ? "not mapped" : "mapped to a protocol Gregor does not serve");
            return -1;
        }
        b->listeners[i].fd = -1;
        b->listeners[i].tls_ctx = NULL;
        b->listeners[i].sasl = NULL;
    }
    /* advertised.listeners: by listener name; a listener not named there advertises its own address */
    const char *adv = b->cfg.settings.advertised_listeners;
    struct gr_listener advl[GR_LISTENERS_MAX];
    int nadv = adv ? parse_listener_list(adv, advl, true) : 0;
    if (nadv < 0) {
        GR_ERROR("config: advertised.listeners: cannot parse '%s'", adv);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct gr_listener *l = &b->listeners[i];
        if (bind_listener(b, l)) return -1;
        _Static_assert(sizeof l->adv_host == sizeof l->host, "same size");
        memcpy(l->adv_host, l->host, sizeof l->host); /* both NUL-terminated within */
        l->adv_port = l->port;
        for (int k = 0; k < nadv; k++)
            if (strcmp(advl[k].name, l->name) == 0) {
                snprintf(l->adv_host, sizeof l->adv_host, "%s", advl[k].adv_host);
                l->adv_port = advl[k].adv_port ? advl[k].adv_port : l->port;
            }
        if (!l->adv_host[0] || strcmp(l->adv_host, "0.0.0.0") == 0 || strcmp(l->adv_host, "::") == 0) {
            char hn[200];
            if (gethostname(hn, sizeof hn)) snprintf(hn, sizeof hn, "localhost");
            snprintf(l->adv_host, sizeof l->adv_host, "%s", hn);
        }
    }
    for (int k = 0; k < nadv; k++) {
        bool found = false;
        for (int i = 0; i < n; i++)
            found |= strcmp(advl[k].name, b->listeners[i].name) == 0;
        if (!found) {
            GR_ERROR("config: advertised.listeners names %s, which is not in listeners", advl[k].name);
            return -1;
        }
    }
    return 0;
}

int gr_net_tls_setup(struct gr_broker *b)
{
    for (int i = 0; i < b->listener_count; i++) {
        struct gr_listener *l = &b->listeners[i];
        enum listener_protocol proto = listener_protocol(b, l->name);
        char err[1024];
        if (proto == PROTO_SSL || proto == PROTO_SASL_SSL) {
            struct gr_ssl_settings ss;
            gr_config_ssl(&b->cfg, l->name, &ss);
            l->tls_ctx = gr_tls_ctx_new(l->name, &ss, err, sizeof err);
            if (l->tls_ctx &&
                !(l->principal_rules = gr_ssl_rules_parse(ss.principal_mapping_rules, err, sizeof err))) {
                gr_tls_ctx_free(l->tls_ctx);
                l->tls_ctx = NULL;
            }
        }
        if ((proto == PROTO_SSL || proto == PROTO_SASL_SSL) && !l->tls_ctx) goto refused;
        if ((proto == PROTO_SASL_PLAINTEXT || proto == PROTO_SASL_SSL) &&
            !(l->sasl = gr_sasl_listener_new(b, l->name, err, sizeof err)))
            goto refused;
        continue;
    refused:
        GR_ERROR("config: %s", err);
        for (int k = 0; k <= i; k++) {
            gr_tls_ctx_free(b->listeners[k].tls_ctx);
            b->listeners[k].tls_ctx = NULL;
            gr_sasl_listener_free(b->listeners[k].sasl);
            b->listeners[k].sasl = NULL;
            gr_ssl_rules_free(b->listeners[k].principal_rules);
            b->listeners[k].principal_rules = NULL;
        }
        return -1;
    }
    /* the inter-broker listener's client side (Kafka's inter-broker channel builder): built here so that
       a bad setting stops the broker at start, whether or not a peer is ever connected to */
    const char *ib = b->cfg.settings.inter_broker_listener;
    enum listener_protocol ibp = ib[0] ? listener_protocol(b, ib) : PROTO_UNMAPPED;
    /* a single node opens no inter-broker connection: its SASL listeners need no inter-broker login */
    if ((ibp == PROTO_SASL_PLAINTEXT || ibp == PROTO_SASL_SSL) &&
        b->cfg.settings.gregor_metadata_etcd_endpoint_count == 0)
        ibp = PROTO_UNMAPPED;
    if (ibp == PROTO_SASL_PLAINTEXT || ibp == PROTO_SASL_SSL) {
        const struct gr_sasl_listener *isl = NULL;
        for (int k = 0; k < b->listener_count; k++)
            if (!strcmp(b->listeners[k].name, ib)) isl = b->listeners[k].sasl;
        char err[1024] = "no SASL settings for the inter-broker listener";
        if (!isl || gr_sasl_inter_broker_setup(b, ib, isl, err, sizeof err)) {
            GR_ERROR("config: %s", err);
            for (int k = 0; k < b->listener_count; k++) {
                gr_tls_ctx_free(b->listeners[k].tls_ctx);
                b->listeners[k].tls_ctx = NULL;
            }
            return -1;
        }
    }
    if (ibp == PROTO_SSL || ibp == PROTO_SASL_SSL) {
        struct gr_ssl_settings ss;
        gr_config_ssl(&b->cfg, ib, &ss);
        char err[1024];
        b->ib_tls_ctx = gr_tls_client_ctx_new(ib, &ss, &b->ib_tls_verify_host, err, sizeof err);
        if (!b->ib_tls_ctx) {
            GR_ERROR("config: %s", err);
            gr_sasl_inter_broker_free(b);
            for (int k = 0; k < b->listener_count; k++) {
                gr_tls_ctx_free(b->listeners[k].tls_ctx);
                b->listeners[k].tls_ctx = NULL;
            }
            return -1;
        }
    }
    return 0;
}

int gr_net_serve(struct gr_broker *b)
{
    int n = b->listener_count;
    char ktls_said[300] = "";
    const char *emu = getenv("GREGOR_TEST_KTLS_EMULATE");
    ktls_emulate = emu && !strcmp(emu, "1");
    for (int i = 0; i < n; i++) {
        struct gr_listener *l = &b->listeners[i];
        if (listen(l->fd, 1024)) {
            GR_ERROR("listeners: cannot listen on %s:%d: %s", l->host, l->port, strerror(errno));
            return -1;
        }
        ev_io_start(b->loop, &l->w);
        const char *proto = l->sasl      ? (l->tls_ctx ? "SASL_SSL" : "SASL_PLAINTEXT")
                            : l->tls_ctx ? "SSL"
                                         : "PLAINTEXT";
        GR_INFO("listening on %s://%s:%d (%s%s%s), advertised as %s:%d", l->name, l->host, l->port, proto,
                l->sasl ? ", SASL mechanisms " : "", l->sasl ? gr_sasl_listener_mechanisms(l->sasl) : "",
                l->adv_host, l->adv_port);
        if (l->tls_ctx) {
            /* which way Fetch's file ranges go out over TLS; per connection: gregor_tls_connections_total */
            if (!ktls_said[0])
                gr_tls_ktls_probe(b->cfg.settings.gregor_ssl_ktls_enable, ktls_said, sizeof ktls_said);
            GR_INFO("listener %s: kTLS send: %s%s", l->name, ktls_said,
                    ktls_emulate
                        ? "; GREGOR_TEST_KTLS_EMULATE=1: file ranges take the kTLS path's calls with a "
                          "user-space copy (tests only)"
                        : "");
        }
    }
    const char *lf = b->cfg.settings.gregor_listener_file;
    if (lf) {
        /* first line host:port of the first listener (what tests connect to), then NAME host:port lines */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", lf);
        FILE *f = fopen(tmp, "w");
        bool ok = f != NULL;
        const char *h0 = b->listeners[0].host[0] ? b->listeners[0].host : "127.0.0.1";
        if (ok) ok = fprintf(f, "%s:%d\n", h0, b->listeners[0].port) > 0;
        for (int i = 1; ok && i < n; i++)
            ok = fprintf(f, "%s %s:%d\n", b->listeners[i].name, b->listeners[i].host, b->listeners[i].port) >
                 0;
        if (f && fclose(f)) ok = false;
        if (!ok || rename(tmp, lf)) {
            GR_ERROR("gregor.listener.file: cannot write %s", lf);
            return -1;
        }
    }
    return 0;
}

void gr_req_advertised(const struct gr_req *req, const char **host, int32_t *port)
{
    const struct gr_broker *b = req->broker;
    const struct gr_listener *l = req->conn ? req->conn->listener : &b->listeners[0];
    *host = l->adv_host;
    *port = l->adv_port;
}

const char *gr_req_listener_name(const struct gr_req *req)
{
    return req->conn ? req->conn->listener->name : req->broker->listeners[0].name;
}

void gr_net_close_all(struct gr_broker *b)
{
    for (struct gr_conn *c = b->conns; c; c = c->next)
        gr_conn_close(c, NULL);
    for (int i = 0; i < b->listener_count; i++) {
        if (b->listeners[i].fd < 0) continue;
        ev_io_stop(b->loop, &b->listeners[i].w);
        close(b->listeners[i].fd);
        b->listeners[i].fd = -1;
        gr_tls_ctx_free(b->listeners[i].tls_ctx); /* its connections hold references until they are freed */
        b->listeners[i].tls_ctx = NULL;
        gr_sasl_listener_free(b->listeners[i].sasl); /* sessions never reach back into it once closed */
        b->listeners[i].sasl = NULL;
        gr_ssl_rules_free(b->listeners[i].principal_rules);
        b->listeners[i].principal_rules = NULL;
    }
    gr_tls_ctx_free(b->ib_tls_ctx); /* the inter-broker clients were freed before (membership.c) */
    b->ib_tls_ctx = NULL;
    gr_sasl_inter_broker_free(b);
    ev_timer_stop(b->loop, &b->resume_w);
    ev_timer_stop(b->loop, &b->accept_w);
    if (b->spare_fd >= 0) close(b->spare_fd);
    b->spare_fd = -1;
    free(b->resume_buf);
    b->resume_buf = NULL;
    b->resume_cap = 0;
}

void gr_net_close_idle(struct gr_broker *b, int64_t now_mono_ms)
{
    int64_t idle = b->cfg.settings.connections_max_idle_ms;
    if (idle < 0) return;
    struct gr_conn *c = b->conns;
    while (c) {
        struct gr_conn *next = c->next;
        if (!c->head && !c->closing && now_mono_ms - c->last_active_ms > idle) gr_conn_close(c, "idle");
        /* a TLS handshake gets connections.max.idle.ms from the accept, however slowly its bytes trickle */
        if (c->ssl && !c->closing && now_mono_ms - c->accepted_ms > idle && !gr_tls_handshake_done(c->ssl)) {
            GR_WARN_RATELIMITED(
                "connection %s on %s: TLS handshake not finished within connections.max.idle.ms "
                "(%lld ms), closing",
                c->peer, c->listener->name, (long long)idle);
            gr_conn_close(c, "TLS handshake timed out");
        }
        c = next;
    }
}

bool gr_conn_is_closing(const struct gr_conn *conn)
{
    return conn->closing;
}
const char *gr_conn_peer(const struct gr_conn *conn)
{
    return conn->peer;
}

const char *gr_conn_host(const struct gr_conn *conn)
{
    return conn->host;
}

const char *gr_conn_principal(const struct gr_conn *conn)
{
    return conn->principal ? conn->principal : GR_PRINCIPAL_ANONYMOUS;
}

int gr_conn_set_principal(struct gr_conn *conn, const char *principal)
{
    size_t n = strnlen(principal, GR_PRINCIPAL_MAX + 1);
    if (n == 0 || n > GR_PRINCIPAL_MAX) return -1;
    char *copy = strndup(principal, n);
    if (!copy) return -1;
    free(conn->principal);
    conn->principal = copy;
    return 0;
}

struct gr_sasl *gr_req_sasl(const struct gr_req *req)
{
    return req->conn ? req->conn->sasl : NULL;
}
