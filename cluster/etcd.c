/*
 * etcd.c: the etcd client's transport (cluster/etcd.h has the contract). libcurl's multi interface runs
 * every transfer: its socket callback keeps one ev_io per socket, its timer callback one ev_timer, and both
 * watchers call curl_multi_socket_action, so curl never blocks and never runs outside the loop.
 *
 * Invariants:
 * - User code never runs inside a curl callback: curl's write callback only buffers (up to the response
 *   cap, then it aborts the transfer); answers are parsed and callbacks run after curl_multi_socket_action
 *   returns, from finish() (one-shot requests) and watch_drain() (watch streams). So a callback may start,
 *   cancel or stop anything except the client itself.
 * - A request holds its own copy of its body (curl reads it in place). Each attempt gets a fresh easy
 *   handle whose total timeout is what is left of the request's; a refused connection moves to the next
 *   endpoint at once, a round of failures waits the client's back-off on the request's retry timer.
 * - A watch delivers only events at or after next_rev and advances next_rev after each whole message, so a
 *   reopened stream (start_revision = next_rev) repeats nothing; etcd sends all events of one revision in
 *   one message (no fragmentation is asked for).
 *
 * Logging: a watch's troubles (stream errors, cancels, resyncs that fail) are rate-limited warnings, since
 * an etcd that keeps failing would repeat them at every back-off; a resync after compaction is one INFO.
 * Requests log nothing: their callers get the status and message.
 *
 * Read next: cluster/etcd_codec.c (bodies and parsing), cluster/tests/test_etcd.c.
 */
#include "cluster/etcd.h"

#include <curl/curl.h>
#include <ev.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd_codec.h"
#include "common/arena.h"
#include "common/log.h"
#include "common/time.h"

struct sock {
    ev_io io;
    struct gr_etcd *etcd;
};

struct gr_etcd {
    struct ev_loop *loop;
    CURLM *multi;
    ev_timer curl_timer;
    char endpoints[GR_ETCD_ENDPOINTS_MAX][GR_ETCD_ENDPOINT_BYTES_MAX + 1];
    int endpoint_count;
    int current; /* the endpoint that answered last: where the next request starts */
    int64_t request_timeout_ms, connect_timeout_ms, backoff_min_ms, backoff_max_ms;
    size_t response_bytes_max;
    int64_t backoff_ms; /* the next round's wait; back to backoff_min_ms on any answer */
    struct gr_etcd_req *reqs;
    struct gr_etcd_watch *watches;
    char last_error[256];
};

enum req_kind { K_RANGE, K_PUT, K_DELETE, K_TXN, K_GRANT, K_KEEPALIVE, K_REVOKE, K_PAGED };

static const char *const req_paths[] = {"/v3/kv/range",     "/v3/kv/put",      "/v3/kv/deleterange",
                                        "/v3/kv/txn",       "/v3/lease/grant", "/v3/lease/keepalive",
                                        "/v3/lease/revoke", "/v3/kv/range"};

/* The bytes of one transfer's answer, capped. */
struct rbuf {
    char *data;
    size_t len, cap, max;
    bool too_large;
};

struct gr_etcd_req {
    struct gr_etcd *etcd;
    struct gr_etcd_req *prev, *next;
    enum req_kind kind;
    char *body;
    size_t body_len;
    CURL *easy; /* while an attempt runs */
    struct curl_slist *headers;
    struct rbuf resp;
    char curl_err[CURL_ERROR_SIZE];
    char last_fail[GR_ETCD_ENDPOINT_BYTES_MAX + CURL_ERROR_SIZE +
                   4]; /* the last connection failure, for a timeout's message */
    int64_t deadline_ms;
    int endpoint, tried;
    ev_timer retry;
    gr_etcd_cb *cb;
    gr_etcd_page_cb *page_cb;
    void *ctx;
    bool in_cb, cancelled;
    /* K_PAGED: the range and where the next page starts */
    char *key, *range_end;
    size_t key_len, range_end_len;
    int64_t page_keys, revision;
};

struct gr_etcd_watch {
    struct gr_etcd *etcd;
    struct gr_etcd_watch *prev, *next;
    char *key, *range_end;
    size_t key_len, range_end_len;
    bool has_range_end, prev_kv;
    int64_t next_rev;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    struct rbuf buf; /* unparsed stream bytes; max = one message's cap */
    char curl_err[CURL_ERROR_SIZE];
    int endpoint, tried;
    int64_t backoff_ms;
    ev_timer retry;
    struct gr_etcd_req *resync;
    bool created, resync_begun, delivering, stopped, must_resync;
    uint64_t resyncs, connects;
    gr_etcd_watch_cb *cb;
    void *ctx;
};

/* Decoded structs per byte of JSON: the smallest KeyValue ({"key":"YQ=="}, 14 bytes) decodes into a
 * 64-byte struct plus two 16-byte arena slots, so 8x bounds any answer under the response cap. */
#define GR_ETCD_ARENA_PER_RESPONSE_BYTE 8

static void after_action(struct gr_etcd *etcd);

static void set_error(struct gr_etcd *etcd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct gr_etcd *etcd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(etcd->last_error, sizeof etcd->last_error, fmt, ap);
    va_end(ap);
}

const char *gr_etcd_last_error(const struct gr_etcd *etcd)
{
    return etcd->last_error;
}

size_t gr_etcd_prefix_end(const char *prefix, size_t len, char *out)
{
    memcpy(out, prefix, len);
    for (size_t i = len; i > 0; i--) {
        if ((unsigned char)out[i - 1] < 0xff) {
            out[i - 1]++;
            return i;
        }
    }
    out[0] = 0;
    return 1;
}

/* ---- libcurl on libev ---- */

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    struct sock *sk = (struct sock *)w;
    struct gr_etcd *etcd = sk->etcd;
    int flags = (revents & EV_READ ? CURL_CSELECT_IN : 0) | (revents & EV_WRITE ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(etcd->multi, w->fd, flags, &running); /* may free sk */
    after_action(etcd);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    struct gr_etcd *etcd = userp;
    struct sock *sk = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (sk) {
            ev_io_stop(etcd->loop, &sk->io);
            free(sk);
        }
        return 0;
    }
    int events = (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    if (!sk) {
        sk = calloc(1, sizeof *sk);
        if (!sk) return -1;
        sk->etcd = etcd;
        ev_io_init(&sk->io, io_cb, s, events);
        curl_multi_assign(etcd->multi, s, sk);
    } else {
        ev_io_stop(etcd->loop, &sk->io);
        ev_io_set(&sk->io, s, events);
    }
    ev_io_start(etcd->loop, &sk->io);
    return 0;
}

static void curl_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_etcd *etcd = w->data;
    int running;
    curl_multi_socket_action(etcd->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    after_action(etcd);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    struct gr_etcd *etcd = userp;
    ev_timer_stop(etcd->loop, &etcd->curl_timer);
    if (timeout_ms >= 0) {
        ev_timer_set(&etcd->curl_timer, (double)timeout_ms / 1000.0, 0.);
        ev_timer_start(etcd->loop, &etcd->curl_timer);
    }
    return 0;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct rbuf *b = userdata;
    size_t n = size * nmemb;
    if (n > b->max - b->len) {
        b->too_large = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        if (cap > b->max) cap = b->max;
        char *p = realloc(b->data, cap + 1);
        if (!p) return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = 0;
    return n;
}

/* libcurl 7.88 sets keepalive idle and interval but not the probe count: 3 probes, so a dead path ends a
 * connection GR_ETCD_TCP_KEEPIDLE_S + 3 * GR_ETCD_TCP_KEEPINTVL_S seconds after it went quiet. */
static int sockopt_cb(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    (void)clientp;
    int probes = GR_ETCD_TCP_KEEPCNT;
    if (purpose == CURLSOCKTYPE_IPCXN) setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
    return CURL_SOCKOPT_OK;
}

/* A new easy handle for `path` at `endpoint` posting `body`; total timeout `timeout_ms` (0: none). */
static CURL *make_easy(struct gr_etcd *etcd, int endpoint, const char *path, const char *body,
                       size_t body_len, int64_t timeout_ms, struct curl_slist **headers, struct rbuf *b,
                       char *err, void *owner)
{
    char url[GR_ETCD_ENDPOINT_BYTES_MAX + 32];
    snprintf(url, sizeof url, "%s%s", etcd->endpoints[endpoint], path);
    CURL *easy = curl_easy_init();
    if (!easy) return NULL;
    if (!*headers) {
        *headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (*headers) *headers = curl_slist_append(*headers, "Expect:"); /* no 100-continue round trip */
    }
    int64_t connect_ms = etcd->connect_timeout_ms;
    if (timeout_ms && timeout_ms < connect_ms) connect_ms = timeout_ms;
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, *headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, (long)GR_ETCD_TCP_KEEPIDLE_S);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, (long)GR_ETCD_TCP_KEEPINTVL_S);
    curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, owner);
    err[0] = 0;
    if (curl_multi_add_handle(etcd->multi, easy) != CURLM_OK) {
        curl_easy_cleanup(easy);
        return NULL;
    }
    return easy;
}

static void drop_easy(struct gr_etcd *etcd, CURL **easy)
{
    if (!*easy) return;
    curl_multi_remove_handle(etcd->multi, *easy);
    curl_easy_cleanup(*easy);
    *easy = NULL;
}

/* Whether a failed transfer never sent its request (safe to retry elsewhere): a refused or timed-out
 * connect. A reused connection has no connect time, so "sent" is judged by the request bytes written. */
static bool connect_failure(CURLcode rc, CURL *easy)
{
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST) return true;
    if (rc != CURLE_OPERATION_TIMEDOUT) return false;
    long sent_bytes = 0;
    curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &sent_bytes);
    return sent_bytes == 0;
}

/* ---- one-shot requests ---- */

static void req_attempt(struct gr_etcd_req *req);
static void req_finish(struct gr_etcd_req *req, struct gr_etcd_result *res);

static void req_free(struct gr_etcd_req *req)
{
    struct gr_etcd *etcd = req->etcd;
    drop_easy(etcd, &req->easy);
    ev_timer_stop(etcd->loop, &req->retry);
    if (req->prev)
        req->prev->next = req->next;
    else
        etcd->reqs = req->next;
    if (req->next) req->next->prev = req->prev;
    curl_slist_free_all(req->headers);
    free(req->resp.data);
    free(req->body);
    free(req->key);
    free(req->range_end);
    free(req);
}

static void req_fail(struct gr_etcd_req *req, enum gr_etcd_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void req_fail(struct gr_etcd_req *req, enum gr_etcd_status status, const char *fmt, ...)
{
    char msg[GR_ETCD_ENDPOINT_BYTES_MAX + CURL_ERROR_SIZE + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct gr_etcd_result res = {.status = status, .message = msg};
    req_finish(req, &res);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_etcd_req *req = w->data;
    if (gr_time_mono_ms() >= req->deadline_ms) {
        req_fail(req, GR_ETCD_TIMEOUT, "etcd request timed out (last: %s)", req->last_fail);
        return;
    }
    req->tried = 0;
    req_attempt(req);
}

static void req_attempt(struct gr_etcd_req *req)
{
    struct gr_etcd *etcd = req->etcd;
    int64_t left = req->deadline_ms - gr_time_mono_ms();
    if (left < 1) left = 1;
    req->resp.len = 0;
    req->resp.too_large = false;
    req->easy = make_easy(etcd, req->endpoint, req_paths[req->kind], req->body, req->body_len, left,
                          &req->headers, &req->resp, req->curl_err, req);
    if (!req->easy) {
        snprintf(req->last_fail, sizeof req->last_fail, "libcurl could not start a transfer");
        ev_timer_set(&req->retry, (double)etcd->backoff_ms / 1000.0, 0.);
        ev_timer_start(etcd->loop, &req->retry);
    }
}

/* A connection to req->endpoint failed before the request was sent: the next endpoint, or a back-off. */
static void req_next_endpoint(struct gr_etcd_req *req)
{
    struct gr_etcd *etcd = req->etcd;
    req->endpoint = (req->endpoint + 1) % etcd->endpoint_count;
    if (++req->tried < etcd->endpoint_count) {
        req_attempt(req);
        return;
    }
    int64_t left = req->deadline_ms - gr_time_mono_ms();
    int64_t wait = etcd->backoff_ms < left ? etcd->backoff_ms : left;
    if (etcd->backoff_ms < etcd->backoff_max_ms)
        etcd->backoff_ms =
            etcd->backoff_ms * 2 < etcd->backoff_max_ms ? etcd->backoff_ms * 2 : etcd->backoff_max_ms;
    ev_timer_set(&req->retry, wait > 0 ? (double)wait / 1000.0 : 0., 0.);
    ev_timer_start(etcd->loop, &req->retry);
}

static struct gr_etcd_req *req_new(struct gr_etcd *etcd, enum req_kind kind, json_t *body, gr_etcd_cb *cb,
                                   void *ctx)
{
    if (!body) {
        set_error(etcd, "out of memory building an etcd request");
        return NULL;
    }
    struct gr_etcd_req *req = calloc(1, sizeof *req);
    if (req) req->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!req || !req->body) {
        free(req);
        set_error(etcd, "out of memory building an etcd request");
        return NULL;
    }
    req->body_len = strlen(req->body);
    req->etcd = etcd;
    req->kind = kind;
    req->cb = cb;
    req->ctx = ctx;
    req->resp.max = etcd->response_bytes_max;
    ev_timer_init(&req->retry, retry_cb, 0., 0.);
    req->retry.data = req;
    req->next = etcd->reqs;
    if (req->next) req->next->prev = req;
    etcd->reqs = req;
    return req;
}

static void req_submit(struct gr_etcd_req *req)
{
    req->deadline_ms = gr_time_mono_ms() + req->etcd->request_timeout_ms;
    req->endpoint = req->etcd->current;
    req->tried = 0;
    req_attempt(req);
}

static void paged_page(struct gr_etcd_req *req, struct gr_etcd_result *res);
static bool paged_next(struct gr_etcd_req *req);

static void req_finish(struct gr_etcd_req *req, struct gr_etcd_result *res)
{
    drop_easy(req->etcd, &req->easy);
    ev_timer_stop(req->etcd->loop, &req->retry);
    if (req->kind == K_PAGED && res->status == GR_ETCD_OK) {
        paged_page(req, res);
        return;
    }
    if (req->kind == K_PAGED && res->status == GR_ETCD_TOO_LARGE && req->page_keys > 1) {
        req->page_keys /= 2; /* the same page again, smaller: only a single key over the cap fails */
        if (paged_next(req)) return;
    }
    if (!res->message) res->message = "";
    req->in_cb = true;
    req->cb(req->ctx, res);
    req_free(req);
}

/* Parses a complete answer of req and finishes it. */
static void req_parse(struct gr_etcd_req *req, long http_code)
{
    struct gr_etcd *etcd = req->etcd;
    json_error_t jerr;
    json_t *j = json_loadb(req->resp.data ? req->resp.data : "", req->resp.len, 0, &jerr);
    if (!j) {
        req_fail(req, GR_ETCD_BAD_RESPONSE, "etcd answered HTTP %ld with bad JSON: %s", http_code, jerr.text);
        return;
    }
    struct gr_arena arena;
    gr_arena_init(&arena, GR_ETCD_ARENA_PER_RESPONSE_BYTE * etcd->response_bytes_max + 65536);
    struct gr_etcd_result res = {.status = GR_ETCD_OK};
    int code;
    const char *msg;
    const json_t *body = j;
    bool ok = true;
    if (gr_etcd_codec_error(j, &code, &msg)) {
        if (req->kind == K_KEEPALIVE && code == GR_ETCD_GRPC_NOT_FOUND) {
            res.status = GR_ETCD_LEASE_GONE;
        } else {
            res.status = GR_ETCD_SERVER_ERROR;
            res.grpc_code = code;
        }
        res.message = msg;
    } else if (http_code != 200) {
        res.status = GR_ETCD_BAD_RESPONSE;
        res.message = "etcd answered an HTTP error without an error body";
    } else if (req->kind == K_TXN) {
        ok = gr_etcd_codec_txn_result(body, &arena, &res);
    } else if (req->kind == K_GRANT || req->kind == K_KEEPALIVE || req->kind == K_REVOKE) {
        if (req->kind == K_KEEPALIVE && json_object_get(j, "result")) body = json_object_get(j, "result");
        const json_t *h = json_object_get(body, "header");
        ok = json_is_object(body) && gr_etcd_codec_get_i64(body, "ID", &res.lease_id) &&
             gr_etcd_codec_get_i64(body, "TTL", &res.ttl_s) &&
             (!h || gr_etcd_codec_get_i64(h, "revision", &res.revision));
        if (ok && req->kind == K_KEEPALIVE && res.ttl_s <= 0) {
            res.status = GR_ETCD_LEASE_GONE;
            res.message = "lease not found or expired (keepalive TTL <= 0)";
        }
        if (ok && req->kind == K_GRANT && json_is_string(json_object_get(body, "error")) &&
            json_string_length(json_object_get(body, "error"))) {
            res.status = GR_ETCD_SERVER_ERROR;
            res.message = json_string_value(json_object_get(body, "error"));
        }
    } else {
        enum gr_etcd_op_type t = req->kind == K_PUT      ? GR_ETCD_OP_PUT
                                 : req->kind == K_DELETE ? GR_ETCD_OP_DELETE
                                                         : GR_ETCD_OP_RANGE;
        ok = gr_etcd_codec_op_result(body, t, &arena, &res.op);
        res.revision = res.op.revision;
    }
    if (!ok) {
        res = (struct gr_etcd_result){.status = GR_ETCD_BAD_RESPONSE,
                                      .message = "etcd answer malformed or over "
                                                 "the client's bounds"};
    }
    if (res.status == GR_ETCD_OK || res.status == GR_ETCD_SERVER_ERROR || res.status == GR_ETCD_LEASE_GONE) {
        etcd->current = req->endpoint;
        etcd->backoff_ms = etcd->backoff_min_ms;
    }
    req_finish(req, &res);
    gr_arena_reset(&arena);
    json_decref(j);
}

static void req_done(struct gr_etcd_req *req, CURLcode rc)
{
    struct gr_etcd *etcd = req->etcd;
    if (rc == CURLE_OK) {
        long http_code = 0;
        curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &http_code);
        req_parse(req, http_code);
        return;
    }
    if (req->resp.too_large) {
        req_fail(req, GR_ETCD_TOO_LARGE, "etcd answer over %zu bytes", etcd->response_bytes_max);
        return;
    }
    bool before_send = connect_failure(rc, req->easy);
    snprintf(req->last_fail, sizeof req->last_fail, "%s: %s", etcd->endpoints[req->endpoint],
             req->curl_err[0] ? req->curl_err : curl_easy_strerror(rc));
    drop_easy(etcd, &req->easy);
    if (!before_send)
        req_fail(req, rc == CURLE_OPERATION_TIMEDOUT ? GR_ETCD_TIMEOUT : GR_ETCD_UNREACHABLE,
                 "etcd request %s after it was sent, outcome unknown (%s)",
                 rc == CURLE_OPERATION_TIMEDOUT ? "timed out" : "failed", req->last_fail);
    else if (gr_time_mono_ms() + 2 >= req->deadline_ms)
        req_fail(req, GR_ETCD_TIMEOUT, "etcd request timed out (%s)", req->last_fail);
    else
        req_next_endpoint(req);
}

void gr_etcd_cancel(struct gr_etcd_req *req)
{
    if (!req) return;
    if (req->in_cb) {
        req->cancelled = true; /* freed by its caller once the callback returns */
        return;
    }
    req_free(req);
}

/* ---- public request calls ---- */

static bool check_op(struct gr_etcd *etcd, const struct gr_etcd_op *op, enum gr_etcd_op_type want)
{
    if (!op || op->type != want || !op->key) {
        set_error(etcd, "etcd: bad operation (type or key)");
        return false;
    }
    if (gr_etcd_codec_op_bytes(op) > GR_ETCD_REQUEST_BYTES_MAX) {
        set_error(etcd, "etcd request of %zu bytes over etcd's --max-request-bytes (%d)",
                  gr_etcd_codec_op_bytes(op), GR_ETCD_REQUEST_BYTES_MAX);
        return false;
    }
    return true;
}

static struct gr_etcd_req *submit_op(struct gr_etcd *etcd, enum req_kind kind, const struct gr_etcd_op *op,
                                     enum gr_etcd_op_type want, gr_etcd_cb *cb, void *ctx)
{
    if (!check_op(etcd, op, want)) return NULL;
    struct gr_etcd_req *req = req_new(etcd, kind, gr_etcd_codec_op(op), cb, ctx);
    if (req) req_submit(req);
    return req;
}

struct gr_etcd_req *gr_etcd_range(struct gr_etcd *etcd, const struct gr_etcd_op *op, gr_etcd_cb *cb,
                                  void *ctx)
{
    return submit_op(etcd, K_RANGE, op, GR_ETCD_OP_RANGE, cb, ctx);
}

struct gr_etcd_req *gr_etcd_put(struct gr_etcd *etcd, const struct gr_etcd_op *op, gr_etcd_cb *cb, void *ctx)
{
    return submit_op(etcd, K_PUT, op, GR_ETCD_OP_PUT, cb, ctx);
}

struct gr_etcd_req *gr_etcd_delete(struct gr_etcd *etcd, const struct gr_etcd_op *op, gr_etcd_cb *cb,
                                   void *ctx)
{
    return submit_op(etcd, K_DELETE, op, GR_ETCD_OP_DELETE, cb, ctx);
}

struct gr_etcd_req *gr_etcd_txn(struct gr_etcd *etcd, const struct gr_etcd_txn *txn, gr_etcd_cb *cb,
                                void *ctx)
{
    size_t ops = txn->success_count + txn->failure_count;
    if (ops > GR_ETCD_TXN_OPS_MAX || txn->compare_count > GR_ETCD_TXN_OPS_MAX) {
        set_error(etcd, "etcd txn of %zu operations and %zu compares over etcd's --max-txn-ops (%d)", ops,
                  txn->compare_count, GR_ETCD_TXN_OPS_MAX);
        return NULL;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < txn->compare_count; i++) {
        if (!txn->compares[i].key) return set_error(etcd, "etcd: compare without a key"), NULL;
        bytes += gr_etcd_codec_compare_bytes(&txn->compares[i]);
    }
    for (size_t i = 0; i < ops; i++) {
        const struct gr_etcd_op *op =
            i < txn->success_count ? &txn->success[i] : &txn->failure[i - txn->success_count];
        if (!op->key) return set_error(etcd, "etcd: operation without a key"), NULL;
        bytes += gr_etcd_codec_op_bytes(op);
    }
    if (bytes > GR_ETCD_REQUEST_BYTES_MAX) {
        set_error(etcd, "etcd txn of %zu bytes over etcd's --max-request-bytes (%d)", bytes,
                  GR_ETCD_REQUEST_BYTES_MAX);
        return NULL;
    }
    struct gr_etcd_req *req = req_new(etcd, K_TXN, gr_etcd_codec_txn(txn), cb, ctx);
    if (req) req_submit(req);
    return req;
}

static struct gr_etcd_req *lease_call(struct gr_etcd *etcd, enum req_kind kind, int64_t ttl_s, int64_t id,
                                      gr_etcd_cb *cb, void *ctx)
{
    json_t *o = json_object();
    bool ok = o && (kind != K_GRANT || json_object_set_new(o, "TTL", gr_etcd_codec_i64(ttl_s)) == 0) &&
              (!id || json_object_set_new(o, "ID", gr_etcd_codec_i64(id)) == 0);
    if (!ok) {
        json_decref(o);
        o = NULL;
    }
    struct gr_etcd_req *req = req_new(etcd, kind, o, cb, ctx);
    if (req) req_submit(req);
    return req;
}

struct gr_etcd_req *gr_etcd_lease_grant(struct gr_etcd *etcd, int64_t ttl_s, int64_t id, gr_etcd_cb *cb,
                                        void *ctx)
{
    if (ttl_s < 1) {
        set_error(etcd, "etcd lease TTL %lld s: must be at least 1", (long long)ttl_s);
        return NULL;
    }
    return lease_call(etcd, K_GRANT, ttl_s, id, cb, ctx);
}

struct gr_etcd_req *gr_etcd_lease_keepalive(struct gr_etcd *etcd, int64_t id, gr_etcd_cb *cb, void *ctx)
{
    return lease_call(etcd, K_KEEPALIVE, 0, id, cb, ctx);
}

struct gr_etcd_req *gr_etcd_lease_revoke(struct gr_etcd *etcd, int64_t id, gr_etcd_cb *cb, void *ctx)
{
    return lease_call(etcd, K_REVOKE, 0, id, cb, ctx);
}

/* ---- paged range ---- */

static json_t *paged_body(struct gr_etcd_req *req)
{
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE,
                            .key = req->key,
                            .key_len = req->key_len,
                            .range_end = req->range_end,
                            .range_end_len = req->range_end_len,
                            .limit = req->page_keys,
                            .revision = req->revision};
    return gr_etcd_codec_op(&op);
}

/* Asks for the page at req->key (page_keys keys at req->revision). Returns false when out of memory. */
static bool paged_next(struct gr_etcd_req *req)
{
    json_t *body = paged_body(req);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) return false;
    free(req->body);
    req->body = text;
    req->body_len = strlen(text);
    req_submit(req);
    return true;
}

/* One page of a paged range arrived: hand it over, then ask for the next or finish. */
static void paged_page(struct gr_etcd_req *req, struct gr_etcd_result *res)
{
    if (req->revision == 0) req->revision = res->revision;
    req->in_cb = true;
    if (res->op.kv_count) req->page_cb(req->ctx, res->op.kvs, res->op.kv_count, req->revision);
    req->in_cb = false;
    if (req->cancelled) {
        req_free(req);
        return;
    }
    if (res->op.more && res->op.kv_count) {
        const struct gr_etcd_kv *last = &res->op.kvs[res->op.kv_count - 1];
        char *key = malloc(last->key_len + 1); /* the next page starts just after the last key */
        if (key) {
            memcpy(key, last->key, last->key_len);
            key[last->key_len] = 0;
            free(req->key);
            req->key = key;
            req->key_len = last->key_len + 1;
            if (paged_next(req)) return;
        }
        req_fail(req, GR_ETCD_BAD_RESPONSE, "out of memory paging an etcd range");
        return;
    }
    struct gr_etcd_result done = {.status = GR_ETCD_OK, .message = "", .revision = req->revision};
    req->kind = K_RANGE; /* so req_finish calls done */
    req_finish(req, &done);
}

struct gr_etcd_req *gr_etcd_range_paged(struct gr_etcd *etcd, const char *key, size_t key_len,
                                        const char *range_end, size_t range_end_len, int64_t page_keys,
                                        gr_etcd_page_cb *page_cb, gr_etcd_cb *done, void *ctx)
{
    if (!key || !page_cb || !done || page_keys < 0) {
        set_error(etcd, "etcd: bad paged range arguments");
        return NULL;
    }
    if (!key_len) key_len = strlen(key);
    if (range_end && !range_end_len) range_end_len = strlen(range_end);
    if (key_len + range_end_len > GR_ETCD_REQUEST_BYTES_MAX) {
        set_error(etcd, "etcd range key too long");
        return NULL;
    }
    char *k = malloc(key_len + 2); /* room for the "\0" a next page appends */
    char *e = range_end ? malloc(range_end_len + 1) : NULL;
    if (!k || (range_end && !e)) {
        free(k);
        free(e);
        set_error(etcd, "out of memory");
        return NULL;
    }
    memcpy(k, key, key_len);
    if (e) memcpy(e, range_end, range_end_len);
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE,
                            .key = k,
                            .key_len = key_len,
                            .range_end = e,
                            .range_end_len = range_end_len,
                            .limit = page_keys ? page_keys : GR_ETCD_PAGE_KEYS_DEFAULT};
    struct gr_etcd_req *req = req_new(etcd, K_PAGED, gr_etcd_codec_op(&op), done, ctx);
    if (!req) {
        free(k);
        free(e);
        return NULL;
    }
    req->key = k;
    req->key_len = key_len;
    req->range_end = e;
    req->range_end_len = range_end_len;
    req->page_keys = op.limit;
    req->page_cb = page_cb;
    req_submit(req);
    return req;
}

/* ---- watches ---- */

static void watch_open(struct gr_etcd_watch *w);
static void watch_start_resync(struct gr_etcd_watch *w);

static void watch_free(struct gr_etcd_watch *w)
{
    struct gr_etcd *etcd = w->etcd;
    if (w->prev)
        w->prev->next = w->next;
    else
        etcd->watches = w->next;
    if (w->next) w->next->prev = w->prev;
    curl_slist_free_all(w->headers);
    free(w->buf.data);
    free(w->body);
    free(w->key);
    free(w->range_end);
    free(w);
}

/* Hands ev to the owner. Returns false when the owner stopped the watch (w is freed then). */
static bool deliver(struct gr_etcd_watch *w, const struct gr_etcd_watch_event *ev)
{
    w->delivering = true;
    w->cb(w->ctx, ev);
    w->delivering = false;
    if (!w->stopped) return true;
    watch_free(w);
    return false;
}

static void watch_retry_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_etcd_watch *w = t->data;
    if (w->must_resync)
        watch_start_resync(w);
    else
        watch_open(w);
}

/* The stream (or a resync) failed: the next endpoint at once, or after a round, the watch's back-off. */
static void watch_again(struct gr_etcd_watch *w, bool resync)
{
    struct gr_etcd *etcd = w->etcd;
    drop_easy(etcd, &w->easy);
    w->must_resync = resync;
    w->endpoint = (w->endpoint + 1) % etcd->endpoint_count;
    double wait = 0.;
    if (++w->tried >= etcd->endpoint_count) {
        w->tried = 0;
        wait = (double)w->backoff_ms / 1000.0;
        w->backoff_ms = w->backoff_ms * 2 < etcd->backoff_max_ms ? w->backoff_ms * 2 : etcd->backoff_max_ms;
    }
    ev_timer_set(&w->retry, wait, 0.);
    ev_timer_start(etcd->loop, &w->retry);
}

static void watch_open(struct gr_etcd_watch *w)
{
    struct gr_etcd *etcd = w->etcd;
    json_t *body = gr_etcd_codec_watch_create(w->key, w->key_len, w->has_range_end ? w->range_end : NULL,
                                              w->range_end_len, w->next_rev, w->prev_kv);
    free(w->body);
    w->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    w->buf.len = 0;
    w->buf.too_large = false;
    w->created = false;
    w->easy = w->body ? make_easy(etcd, w->endpoint, "/v3/watch", w->body, strlen(w->body), 0, &w->headers,
                                  &w->buf, w->curl_err, w)
                      : NULL;
    if (!w->easy) watch_again(w, false);
}

/* Handles one message of the stream. Returns false when w is gone (stopped by its owner) or the stream was
 * closed here (resync or error): the caller stops reading it. */
static bool watch_message(struct gr_etcd_watch *w, const json_t *j, bool *alive)
{
    struct gr_etcd *etcd = w->etcd;
    int code;
    const char *msg;
    if (gr_etcd_codec_error(j, &code, &msg)) {
        GR_WARN_RATELIMITED("etcd watch: stream error %d: %s; reopening", code, msg);
        watch_again(w, false);
        return false;
    }
    const json_t *r = json_object_get(j, "result");
    const json_t *h = json_object_get(r, "header");
    int64_t header_rev = 0, compact_rev = 0;
    if (!json_is_object(r) || (h && !gr_etcd_codec_get_i64(h, "revision", &header_rev)) ||
        !gr_etcd_codec_get_i64(r, "compact_revision", &compact_rev)) {
        GR_WARN_RATELIMITED("etcd watch: malformed message; reopening");
        watch_again(w, false);
        return false;
    }
    if (json_is_true(json_object_get(r, "created"))) {
        w->created = true;
        w->connects++;
        w->tried = 0;
        w->backoff_ms = etcd->backoff_min_ms;
        etcd->current = w->endpoint;
        if (w->next_rev == 0) w->next_rev = header_rev + 1;
    }
    if (json_is_true(json_object_get(r, "canceled"))) {
        if (compact_rev > 0) {
            GR_INFO("etcd watch: revision %lld compacted (at %lld); resyncing", (long long)w->next_rev,
                    (long long)compact_rev);
            drop_easy(etcd, &w->easy);
            watch_start_resync(w);
        } else {
            GR_WARN_RATELIMITED("etcd watch cancelled by etcd (%s); reopening",
                                json_is_string(json_object_get(r, "cancel_reason"))
                                    ? json_string_value(json_object_get(r, "cancel_reason"))
                                    : "no reason");
            watch_again(w, false);
        }
        return false;
    }
    const json_t *events = json_object_get(r, "events");
    size_t n = json_is_array(events) ? json_array_size(events) : 0;
    int64_t from = w->next_rev, last = 0;
    struct gr_arena arena;
    gr_arena_init(&arena, GR_ETCD_ARENA_PER_RESPONSE_BYTE * etcd->response_bytes_max + 65536);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(events, i);
        struct gr_etcd_kv kv = {0}, prev = {0};
        const json_t *type = json_object_get(e, "type");
        const json_t *pj = json_object_get(e, "prev_kv");
        if (!gr_etcd_codec_kv(json_object_get(e, "kv"), &arena, &kv) ||
            (pj && !gr_etcd_codec_kv(pj, &arena, &prev)) || (type && !json_is_string(type))) {
            gr_arena_reset(&arena);
            GR_WARN_RATELIMITED("etcd watch: malformed event; reopening at %lld", (long long)w->next_rev);
            watch_again(w, false);
            return false;
        }
        if (from && kv.mod_revision < from) continue; /* seen before a reconnect */
        struct gr_etcd_watch_event ev = {.kind = type && strcmp(json_string_value(type), "DELETE") == 0
                                                     ? GR_ETCD_EVENT_DELETE
                                                     : GR_ETCD_EVENT_PUT,
                                         .kv = &kv,
                                         .prev_kv = pj ? &prev : NULL,
                                         .revision = kv.mod_revision};
        last = kv.mod_revision;
        if (!deliver(w, &ev)) {
            gr_arena_reset(&arena);
            *alive = false;
            return false;
        }
    }
    gr_arena_reset(&arena);
    if (last >= w->next_rev) w->next_rev = last + 1;
    if (n == 0 && w->created && !json_is_true(json_object_get(r, "created")) && header_rev >= w->next_rev)
        w->next_rev = header_rev + 1; /* a progress notification: nothing before it is pending */
    return true;
}

/* Parses every complete line in w's buffer. Returns false when w was freed. */
static bool watch_drain(struct gr_etcd_watch *w)
{
    size_t off = 0;
    bool alive = true;
    while (w->easy && off < w->buf.len) {
        char *nl = memchr(w->buf.data + off, '\n', w->buf.len - off);
        if (!nl) break;
        size_t len = (size_t)(nl - (w->buf.data + off));
        json_error_t jerr;
        json_t *j = len ? json_loadb(w->buf.data + off, len, 0, &jerr) : NULL;
        off += len + 1;
        if (!len) continue;
        if (!j) {
            GR_WARN_RATELIMITED("etcd watch: bad JSON (%s); reopening", jerr.text);
            watch_again(w, false);
            break;
        }
        bool go_on = watch_message(w, j, &alive);
        json_decref(j);
        if (!alive) return false;
        if (!go_on) break;
    }
    if (off && w->buf.data) {
        memmove(w->buf.data, w->buf.data + off, w->buf.len - off);
        w->buf.len -= off;
    }
    if (!w->easy) w->buf.len = 0;
    return true;
}

static void watch_done(struct gr_etcd_watch *w, CURLcode rc)
{
    if (!watch_drain(w) || !w->easy) return;
    if (w->buf.too_large) {
        GR_WARN_RATELIMITED("etcd watch: a message over %zu bytes; resyncing", w->etcd->response_bytes_max);
        drop_easy(w->etcd, &w->easy);
        watch_start_resync(w);
        return;
    }
    GR_DEBUG("etcd watch stream ended (%s); reopening at %lld",
             w->curl_err[0] ? w->curl_err : curl_easy_strerror(rc), (long long)w->next_rev);
    watch_again(w, false);
}

static void resync_page(void *ctx, const struct gr_etcd_kv *kvs, size_t kv_count, int64_t revision)
{
    struct gr_etcd_watch *w = ctx;
    if (!w->resync_begun) {
        w->resync_begun = true;
        struct gr_etcd_watch_event ev = {.kind = GR_ETCD_EVENT_SNAPSHOT_BEGIN, .revision = revision};
        if (!deliver(w, &ev)) return;
    }
    for (size_t i = 0; i < kv_count; i++) {
        struct gr_etcd_watch_event ev = {
            .kind = GR_ETCD_EVENT_SNAPSHOT_KV, .kv = &kvs[i], .revision = revision};
        if (!deliver(w, &ev)) return;
    }
}

static void resync_done(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_etcd_watch *w = ctx;
    w->resync = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_WARN_RATELIMITED("etcd watch resync failed: %s; retrying", res->message);
        watch_again(w, true);
        return;
    }
    if (!w->resync_begun) {
        struct gr_etcd_watch_event ev = {.kind = GR_ETCD_EVENT_SNAPSHOT_BEGIN, .revision = res->revision};
        if (!deliver(w, &ev)) return;
    }
    w->resyncs++;
    w->next_rev = res->revision + 1;
    struct gr_etcd_watch_event end = {.kind = GR_ETCD_EVENT_SNAPSHOT_END, .revision = res->revision};
    if (!deliver(w, &end)) return;
    watch_open(w);
}

static void watch_start_resync(struct gr_etcd_watch *w)
{
    w->must_resync = false;
    w->resync_begun = false;
    w->resync = gr_etcd_range_paged(w->etcd, w->key, w->key_len, w->has_range_end ? w->range_end : NULL,
                                    w->range_end_len, 0, resync_page, resync_done, w);
    if (!w->resync) watch_again(w, true);
}

struct gr_etcd_watch *gr_etcd_watch_start(struct gr_etcd *etcd, const char *key, size_t key_len,
                                          const char *range_end, size_t range_end_len, int64_t start_revision,
                                          bool prev_kv, gr_etcd_watch_cb *cb, void *ctx)
{
    if (!key || !cb || start_revision < 0) {
        set_error(etcd, "etcd: bad watch arguments");
        return NULL;
    }
    if (!key_len) key_len = strlen(key);
    if (range_end && !range_end_len) range_end_len = strlen(range_end);
    struct gr_etcd_watch *w = calloc(1, sizeof *w);
    if (w) {
        w->key = malloc(key_len + 2);
        w->range_end = malloc(range_end_len + 1);
    }
    if (!w || !w->key || !w->range_end) {
        if (w) free(w->key), free(w->range_end);
        free(w);
        set_error(etcd, "out of memory");
        return NULL;
    }
    memcpy(w->key, key, key_len);
    if (range_end) memcpy(w->range_end, range_end, range_end_len);
    w->etcd = etcd;
    w->key_len = key_len;
    w->range_end_len = range_end_len;
    w->has_range_end = range_end != NULL;
    w->prev_kv = prev_kv;
    w->next_rev = start_revision;
    w->cb = cb;
    w->ctx = ctx;
    w->buf.max = etcd->response_bytes_max;
    w->endpoint = etcd->current;
    w->backoff_ms = etcd->backoff_min_ms;
    ev_timer_init(&w->retry, watch_retry_cb, 0., 0.);
    w->retry.data = w;
    w->next = etcd->watches;
    if (w->next) w->next->prev = w;
    etcd->watches = w;
    /* Opened from the loop, not inside this call: the contract says no callback runs inside it. */
    ev_timer_start(etcd->loop, &w->retry);
    return w;
}

int64_t gr_etcd_watch_next_revision(const struct gr_etcd_watch *w)
{
    return w->next_rev;
}
uint64_t gr_etcd_watch_resyncs(const struct gr_etcd_watch *w)
{
    return w->resyncs;
}
uint64_t gr_etcd_watch_connects(const struct gr_etcd_watch *w)
{
    return w->connects;
}

void gr_etcd_watch_stop(struct gr_etcd_watch *w)
{
    if (!w || w->stopped) return;
    struct gr_etcd *etcd = w->etcd;
    if (w->resync) gr_etcd_cancel(w->resync);
    w->resync = NULL;
    drop_easy(etcd, &w->easy);
    ev_timer_stop(etcd->loop, &w->retry);
    if (w->delivering)
        w->stopped = true; /* freed by deliver() once the callback returns */
    else
        watch_free(w);
}

/* ---- after curl ran ---- */

static void after_action(struct gr_etcd *etcd)
{
    for (;;) { /* watch lines first: a stream that ended still delivers its last messages */
        struct gr_etcd_watch *w = etcd->watches;
        while (w && !(w->easy && w->buf.len && memchr(w->buf.data, '\n', w->buf.len)))
            w = w->next;
        if (!w) break;
        watch_drain(w); /* leaves no complete line behind (or frees w); the owner may change the list */
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(etcd->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        void *owner = NULL;
        CURLcode rc = msg->data.result;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&owner);
        bool is_watch = false;
        for (struct gr_etcd_watch *w = etcd->watches; w; w = w->next) {
            if (w == owner && w->easy == msg->easy_handle) {
                is_watch = true;
                watch_done(w, rc);
                break;
            }
        }
        if (!is_watch) req_done(owner, rc);
    }
}

/* ---- the client ---- */

static bool parse_endpoints(struct gr_etcd *etcd, const char *list, char *err, size_t err_len)
{
    const char *p = list;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && p[0] == ' ')
            p++, len--;
        while (len && p[len - 1] == ' ')
            len--;
        if (len) {
            if (etcd->endpoint_count == GR_ETCD_ENDPOINTS_MAX || len > GR_ETCD_ENDPOINT_BYTES_MAX ||
                strncmp(p, "http://", 7) != 0 || len == 7 || memchr(p + 7, '/', len - 7)) {
                snprintf(err, err_len, "bad etcd endpoint '%.*s': want http://host:port, at most %d",
                         (int)len, p, GR_ETCD_ENDPOINTS_MAX);
                return false;
            }
            memcpy(etcd->endpoints[etcd->endpoint_count], p, len);
            etcd->endpoints[etcd->endpoint_count++][len] = 0;
        }
        p = comma ? comma + 1 : NULL;
    }
    if (etcd->endpoint_count == 0) snprintf(err, err_len, "no etcd endpoint given");
    return etcd->endpoint_count > 0;
}

struct gr_etcd *gr_etcd_new(struct ev_loop *loop, const struct gr_etcd_config *cfg, char *err, size_t err_len)
{
    static bool curl_ready;
    if (!curl_ready && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, err_len, "libcurl failed to initialise");
        return NULL;
    }
    curl_ready = true;
    struct gr_etcd *etcd = calloc(1, sizeof *etcd);
    if (!etcd) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    if (!parse_endpoints(etcd, cfg->endpoints, err, err_len)) {
        free(etcd);
        return NULL;
    }
    etcd->loop = loop;
    etcd->request_timeout_ms =
        cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : GR_ETCD_REQUEST_TIMEOUT_MS_DEFAULT;
    etcd->connect_timeout_ms =
        cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : GR_ETCD_CONNECT_TIMEOUT_MS_DEFAULT;
    etcd->backoff_min_ms = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : GR_ETCD_BACKOFF_MIN_MS_DEFAULT;
    etcd->backoff_max_ms = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : GR_ETCD_BACKOFF_MAX_MS_DEFAULT;
    if (etcd->backoff_max_ms < etcd->backoff_min_ms) etcd->backoff_max_ms = etcd->backoff_min_ms;
    etcd->backoff_ms = etcd->backoff_min_ms;
    etcd->response_bytes_max =
        cfg->response_bytes_max ? cfg->response_bytes_max : GR_ETCD_RESPONSE_BYTES_DEFAULT;
    etcd->multi = curl_multi_init();
    if (!etcd->multi) {
        snprintf(err, err_len, "libcurl multi handle failed");
        free(etcd);
        return NULL;
    }
    curl_multi_setopt(etcd->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(etcd->multi, CURLMOPT_SOCKETDATA, etcd);
    curl_multi_setopt(etcd->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(etcd->multi, CURLMOPT_TIMERDATA, etcd);
    ev_timer_init(&etcd->curl_timer, curl_timer_cb, 0., 0.);
    etcd->curl_timer.data = etcd;
    return etcd;
}

void gr_etcd_free(struct gr_etcd *etcd)
{
    if (!etcd) return;
    while (etcd->watches)
        gr_etcd_watch_stop(etcd->watches);
    while (etcd->reqs)
        req_free(etcd->reqs);
    curl_multi_cleanup(etcd->multi); /* closes cached connections; their sockets' watchers go via socket_cb */
    ev_timer_stop(etcd->loop, &etcd->curl_timer);
    free(etcd);
}
