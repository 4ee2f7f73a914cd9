/*
 * admin_http.c: the admin HTTP listener on the libev loop (server/admin_http.h).
 */
#include "server/admin_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "server/broker.h"
#include "server/metrics.h"
#include "server/metrics_groups.h"
#include "server/metrics_remote.h"
#include "cluster/remote_summary.h"
#include "server/metrics_page.h"

struct gr_admin_http {
    struct gr_broker *b;
    struct MHD_Daemon *d;
    int lfd;    /* the listening socket: accepted here, handed to MHD (MHD_add_connection) */
    ev_io io_w; /* MHD's epoll descriptor */
    ev_io accept_w;
    ev_timer backoff_w; /* out of descriptors: accepting stopped for GR_ACCEPT_BACKOFF_MS */
    ev_timer timer_w;
    /* cluster mode: scrapes suspended until the partition summary refresh they started ends
       (server/metrics_remote.h; at most GR_METRICS_REMOTE_TIMEOUT_MS) */
    struct MHD_Connection *suspended[GR_ADMIN_CONNECTIONS_MAX];
    int suspended_n;
    bool waiting; /* a waiter is registered with b->remote_summary */
    char waited;  /* its address in a connection's *ctx: that request waited already, render now */
};

/* MHD's content reader over the page (server/metrics_page.h): one call renders at most one step (about a
   block) and hands out at most a block; the loop runs between calls. A failed step ends the response with an
   error: MHD closes the connection without the chunked body's last chunk, so the client sees a failed scrape
   rather than a shorter page. */
static ssize_t body_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    if (max > GR_ADMIN_BLOCK_BYTES) max = GR_ADMIN_BLOCK_BYTES;
    ssize_t n = gr_metrics_page_read(cls, out, max);
    return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* MHD's free callback: the response is done, or its client went away mid-page. */
static void body_free(void *cls)
{
    gr_metrics_page_free(cls);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Answers `status` with the malloc'd JSON text `json` (taken; NULL: out of memory, answered 500). */
static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, char *json)
{
    if (!json) return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(json);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The content reader of a HEAD's response: no body. */
static ssize_t no_body(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)cls, (void)pos, (void)out, (void)max;
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static enum MHD_Result reply_metrics(struct gr_admin_http *a, struct MHD_Connection *c, bool head)
{
    /* HEAD: the same status and type, nothing rendered. libmicrohttpd 0.9.75 writes a chunked body's last
       chunk ("0\r\n\r\n") after a HEAD's headers, which a keep-alive client would take for the start of the
       next answer: the HEAD answer is close-delimited instead (HTTP/1.0 framing, Connection: close) */
    struct gr_metrics_page *page =
        head ? NULL : gr_metrics_page_start(a->b); /* the render starts here, once */
    if (!head && !page) return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    /* size unknown: chunked, produced block by block from the loop */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GR_ADMIN_BLOCK_BYTES,
                                                               head ? no_body : body_read, page, body_free);
    if (!r) {
        gr_metrics_page_free(page);
        return MHD_NO;
    }
    if (head) MHD_set_response_options(r, MHD_RF_HTTP_1_0_SERVER, MHD_RO_END);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

static void drive(struct gr_admin_http *a);

/* The refresh ended: every suspended scrape renders now (from the loop: MHD runs on the next timer tick). */
static void resume_all(void *ctx)
{
    struct gr_admin_http *a = ctx;
    a->waiting = false;
    for (int i = 0; i < a->suspended_n; i++)
        MHD_resume_connection(a->suspended[i]);
    a->suspended_n = 0;
    ev_timer_stop(a->b->loop, &a->timer_w);
    ev_timer_set(&a->timer_w, 0.0, 0.0);
    ev_timer_start(a->b->loop, &a->timer_w);
}

/* Cluster mode, before rendering /metrics or /v1/groups/<g>/lag: starts a refresh of the other leaders'
   partition summaries and suspends `c` until it ends (issue #22: a scrape shows fresh answers). Returns true
   when `c` is suspended (on_request runs again once resumed, with *ctx = &a->waited: it renders then). */
static bool wait_refresh(struct gr_admin_http *a, struct MHD_Connection *c, void **ctx)
{
    if (*ctx == &a->waited || !a->b->remote_summary || a->suspended_n == GR_ADMIN_CONNECTIONS_MAX)
        return false;
    if (gr_metrics_remote_refresh(a->b) <= 0) return false;
    if (!a->waiting && gr_remote_summary_wait(a->b->remote_summary, resume_all, a) < 0) return false;
    a->waiting = true;
    MHD_suspend_connection(c);
    a->suspended[a->suspended_n++] = c;
    *ctx = &a->waited;
    return true;
}

/* Adds one header field's bytes as they came on the wire: name, ": ", value, CRLF. */
static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    *(size_t *)cls += strlen(key) + 2 + (value ? strlen(value) : 0) + 2;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx)
{
    (void)version;
    (void)upload;
    struct gr_admin_http *a = cls;
    if (!*ctx) { /* headers complete, no body read yet */
        *ctx = a;
        size_t hdr = 0;
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &hdr);
        if (hdr > GR_ADMIN_HEADER_BYTES)
            return reply_text(c, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE,
                              "request header fields too large\n");
        return MHD_YES;
    }
    if (*upload_size) { /* a body is not read: GET and HEAD take none */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    bool lag = !strncmp(url, "/v1/groups/", strlen("/v1/groups/"));
    if ((lag || (!strcmp(url, "/metrics") && a->b->store && a->b->parts)) && wait_refresh(a, c, ctx))
        return MHD_YES;
    /* /metrics: 503 while start-up has no store yet (a cluster-mode broker waiting for etcd) */
    if (!strcmp(url, "/metrics"))
        return a->b->store && a->b->parts ? reply_metrics(a, c, !strcmp(method, MHD_HTTP_METHOD_HEAD))
                                          : reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "starting\n");
    if (!strcmp(url, "/v1/status/live")) return reply_text(c, MHD_HTTP_OK, "ok\n");
    if (!strcmp(url, "/v1/status/ready"))
        return a->b->ready ? reply_text(c, MHD_HTTP_OK, "ready\n")
                           : reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "starting\n");
    char *json = NULL; /* /v1/groups/<group>/lag (server/metrics_groups.h) */
    unsigned status = gr_metrics_groups_http(a->b, url, &json);
    if (status) return reply_json(c, status, json);
    return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* Runs MHD once and re-arms the timer on what it asks for. */
static void drive(struct gr_admin_http *a)
{
    MHD_run(a->d);
    ev_timer_stop(a->b->loop, &a->timer_w);
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(a->d, &ms) == MHD_YES) {
        ev_timer_set(&a->timer_w, (double)ms / 1000.0, 0.0);
        ev_timer_start(a->b->loop, &a->timer_w);
    }
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    drive(w->data);
}

/* Accepts what is pending (at most 64 per wakeup) and hands each to MHD; past GR_ADMIN_CONNECTIONS_MAX MHD
   closes the new socket at once (MHD_add_connection fails), so a 17th client sees its connection closed
   rather than waiting in the listen backlog. */
static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_admin_http *a = w->data;
    for (int i = 0; i < 64; i++) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        int fd = accept4(a->lfd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the listener stays readable: pause instead of spinning (the Kafka listener's rule) */
                GR_WARN_RATELIMITED("gregor.admin.listeners: accept: %s: paused %d ms", strerror(errno),
                                    GR_ACCEPT_BACKOFF_MS);
                ev_io_stop(a->b->loop, &a->accept_w);
                ev_timer_set(&a->backoff_w, GR_ACCEPT_BACKOFF_MS / 1000.0, 0.0);
                ev_timer_start(a->b->loop, &a->backoff_w);
            }
            break; /* EAGAIN: nothing more waits */
        }
        MHD_add_connection(a->d, fd, (struct sockaddr *)&peer, len); /* closes fd itself when it fails */
    }
    drive(a);
}

static void backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)revents;
    struct gr_admin_http *a = w->data;
    ev_io_start(loop, &a->accept_w);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    drive(w->data);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    if (n && msg[n - 1] == '\n') msg[n - 1] = 0;
    GR_WARN_RATELIMITED("gregor.admin.listeners: %s", msg);
}

/* Parses "http://host:port" (an IPv4 address) into `sa`; -1 when malformed. */
static int parse_listener(const char *v, struct sockaddr_in *sa)
{
    const char *pfx = "http://";
    if (strncmp(v, pfx, strlen(pfx))) return -1;
    const char *hp = v + strlen(pfx);
    const char *colon = strrchr(hp, ':');
    if (!colon || colon == hp || (size_t)(colon - hp) >= 64) return -1;
    char host[64];
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = 0;
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || port < 0 || port > 65535) return -1;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int gr_admin_http_start(struct gr_broker *b, struct gr_admin_http **out)
{
    *out = NULL;
    const char *v = gr_config_str(&b->cfg, "gregor.admin.listeners");
    if (!v || !*v) return 0;
    struct sockaddr_in sa;
    if (parse_listener(v, &sa) < 0) {
        fprintf(stderr, "config: gregor.admin.listeners: expected http://<IPv4 address>:<port>, got '%s'\n",
                v);
        return -1;
    }
    struct gr_admin_http *a = calloc(1, sizeof *a);
    if (!a) return -1;
    a->b = b;
    a->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    socklen_t salen = sizeof sa;
    if (a->lfd < 0 || setsockopt(a->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(a->lfd, (struct sockaddr *)&sa, sizeof sa) || listen(a->lfd, 64) ||
        getsockname(a->lfd, (struct sockaddr *)&sa, &salen)) {
        fprintf(stderr,
                "config: gregor.admin.listeners: cannot serve %s: %s (address in use or not local?)\n", v,
                strerror(errno));
        if (a->lfd >= 0) close(a->lfd);
        free(a);
        return -1;
    }
    unsigned idle_s =
        (unsigned)((gr_config_int(&b->cfg, "gregor.admin.connections.max.idle.ms") + 999) / 1000);
    a->d = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME, 0, NULL,
        NULL, on_request, a, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)GR_ADMIN_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GR_ADMIN_POOL_BYTES, MHD_OPTION_END);
    if (!a->d) {
        fprintf(stderr, "config: gregor.admin.listeners: libmicrohttpd did not start for %s\n", v);
        close(a->lfd);
        free(a);
        return -1;
    }
    const union MHD_DaemonInfo *efd = MHD_get_daemon_info(a->d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!efd) {
        fprintf(stderr, "config: gregor.admin.listeners: libmicrohttpd gave no epoll descriptor\n");
        gr_admin_http_stop(a);
        return -1;
    }
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
    const char *lf = gr_config_str(&b->cfg, "gregor.admin.listener.file");
    if (lf && *lf) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", lf);
        FILE *f = fopen(tmp, "w");
        bool ok = f && fprintf(f, "%s:%u\n", host, (unsigned)ntohs(sa.sin_port)) > 0;
        if (f && fclose(f)) ok = false;
        if (!ok || rename(tmp, lf)) {
            fprintf(stderr, "config: gregor.admin.listener.file: cannot write %s\n", lf);
            gr_admin_http_stop(a);
            return -1;
        }
    }
    ev_io_init(&a->io_w, io_cb, efd->epoll_fd, EV_READ);
    a->io_w.data = a;
    ev_io_start(b->loop, &a->io_w);
    ev_io_init(&a->accept_w, accept_cb, a->lfd, EV_READ);
    a->accept_w.data = a;
    ev_io_start(b->loop, &a->accept_w);
    ev_timer_init(&a->backoff_w, backoff_cb, 0.0, 0.0);
    a->backoff_w.data = a;
    ev_timer_init(&a->timer_w, timer_cb, 0.0, 0.0);
    a->timer_w.data = a;
    GR_INFO("admin listener on http://%s:%u (/metrics, /v1/status/live, /v1/status/ready)", host,
            (unsigned)ntohs(sa.sin_port));
    *out = a;
    return 0;
}

void gr_admin_http_stop(struct gr_admin_http *a)
{
    if (!a) return;
    if (ev_is_active(&a->io_w)) ev_io_stop(a->b->loop, &a->io_w);
    if (ev_is_active(&a->accept_w)) ev_io_stop(a->b->loop, &a->accept_w);
    if (ev_is_active(&a->timer_w)) ev_timer_stop(a->b->loop, &a->timer_w);
    if (ev_is_active(&a->backoff_w)) ev_timer_stop(a->b->loop, &a->backoff_w);
    if (a->waiting && a->b->remote_summary) gr_remote_summary_unwait(a->b->remote_summary, a);
    for (int i = 0; i < a->suspended_n; i++) /* MHD closes them with the daemon */
        MHD_resume_connection(a->suspended[i]);
    MHD_stop_daemon(a->d);
    close(a->lfd);
    free(a);
}
