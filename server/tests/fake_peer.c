/*
 * fake_peer.c: the fake peer broker of fake_peer.h.
 */
#include "server/tests/fake_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/time.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"
#include "protocol/wire.h"

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

const struct gr_msg_ops *fake_peer_ops_named(const char *name)
{
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!strcmp(gr_msg_ops_table[i].name, name)) return &gr_msg_ops_table[i];
    return NULL;
}

void fake_peer_answer(struct fake_peer *p, const struct gr_msg_ops *ops, const void *body, int32_t corr,
                      int16_t version, bool flex_hdr)
{
    size_t len = 4 + 4 + (flex_hdr ? 1 : 0) + ops->size(body, version);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    struct gr_wr wr;
    gr_wr_init(&wr, buf, len);
    gr_wr_int32(&wr, (int32_t)(len - 4));
    gr_wr_int32(&wr, corr);
    if (flex_hdr) gr_wr_int8(&wr, 0);
    ops->encode(&wr, body, version);
    assert_int_equal(send(p->cfd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    free(buf);
}

/* ApiVersions: every request key of the codec at its whole version range. */
static void api_versions(struct fake_peer *p, int32_t corr, int16_t version)
{
    struct gr_api_versions_response_api_version keys[128];
    int n = 0;
    for (int i = 0; i < gr_msg_ops_count && n < 128; i++) {
        const struct gr_msg_ops *o = &gr_msg_ops_table[i];
        if (o->response) continue;
        gr_api_versions_response_api_version_init(&keys[n]);
        keys[n].api_key = o->api_key;
        keys[n].min_version = o->version_min;
        keys[n].max_version = o->version_max;
        n++;
    }
    struct gr_api_versions_response av;
    gr_api_versions_response_init(&av);
    av.api_keys.items = keys;
    av.api_keys.count = n;
    fake_peer_answer(p, gr_msg_ops_find(fake_peer_ops_named("api_versions_request")->api_key, true), &av,
                     corr, version, false);
}

void fake_peer_close_client(struct fake_peer *p)
{
    ev_io_stop(p->loop, &p->cw);
    close(p->cfd);
    p->cfd = -1;
}

void fake_peer_release_held(struct fake_peer *p)
{
    assert_non_null(p->held);
    uint8_t *f = p->held;
    p->held = NULL;
    p->on_request(f, p->held_len, p->held_corr, p->held_version);
    free(f);
}

static void on_client(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    struct fake_peer *p = w->data;
    uint8_t hdr[4];
    if (!read_full(p->cfd, hdr, 4)) {
        fake_peer_close_client(p);
        return;
    }
    size_t n = gr_be32(hdr);
    uint8_t *frame = n <= (1 << 20) ? malloc(n) : NULL;
    int16_t key, version;
    int32_t corr;
    if (!frame || !read_full(p->cfd, frame, n) || gr_request_header_peek(frame, n, &key, &version, &corr)) {
        free(frame);
        fake_peer_close_client(p);
        return;
    }
    if (key == fake_peer_ops_named("api_versions_request")->api_key) {
        api_versions(p, corr, version);
    } else if (p->mode == FAKE_PEER_HANG_UP) {
        p->requests++;
        fake_peer_close_client(p);
    } else if (p->mode == FAKE_PEER_ANSWER) {
        p->on_request(frame, n, corr, version);
    } else if (p->mode == FAKE_PEER_HOLD && !p->held) {
        p->held = frame;
        p->held_len = n;
        p->held_corr = corr;
        p->held_version = version;
        return;
    } else {
        p->requests++;
    }
    free(frame);
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    struct fake_peer *p = w->data;
    int fd = accept(p->lfd, NULL, NULL);
    if (fd < 0) return;
    if (p->cfd >= 0) fake_peer_close_client(p);
    p->cfd = fd;
    ev_io_init(&p->cw, on_client, fd, EV_READ);
    p->cw.data = p;
    ev_io_start(p->loop, &p->cw);
}

void fake_peer_start(struct fake_peer *p, struct ev_loop *loop, fake_peer_request_fn on_request)
{
    memset(p, 0, sizeof *p);
    p->loop = loop;
    p->on_request = on_request;
    p->cfd = -1;
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_true(p->lfd >= 0 && !bind(p->lfd, (struct sockaddr *)&a, sizeof a) && !listen(p->lfd, 8) &&
                !getsockname(p->lfd, (struct sockaddr *)&a, &al));
    ev_io_init(&p->lw, on_accept, p->lfd, EV_READ);
    p->lw.data = p;
    ev_io_start(loop, &p->lw);
    p->img = gr_image_new(1);
    struct gr_image_broker br = {.node_id = 2, .epoch = 7, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = ntohs(a.sin_port);
    assert_int_equal(gr_image_set_broker(p->img, &br), 0);
    gr_image_changed(p->img);
    char err[128];
    struct gr_broker_client_config cfg = {
        .node_id = 1, .listener_name = "INTERNAL", .request_timeout_ms = 2000, .backoff_ms = 50};
    p->bc = gr_broker_client_new(loop, p->img, &cfg, err, sizeof err);
    assert_non_null(p->bc);
}

void fake_peer_stop(struct fake_peer *p)
{
    gr_broker_client_free(p->bc);
    gr_image_free(p->img);
    if (p->cfd >= 0) fake_peer_close_client(p);
    ev_io_stop(p->loop, &p->lw);
    close(p->lfd);
    free(p->held);
    p->held = NULL;
}

static void wake(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l;
    (void)t;
    (void)revents;
}

bool fake_peer_run_until(struct ev_loop *loop, bool (*pred)(void *), void *arg, int64_t ms)
{
    int64_t end = gr_time_mono_ms() + ms;
    ev_timer guard;
    ev_timer_init(&guard, wake, 0.01, 0.01);
    ev_timer_start(loop, &guard);
    bool ok;
    while (!(ok = pred(arg)) && gr_time_mono_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &guard);
    return ok;
}
