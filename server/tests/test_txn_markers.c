/*
 * test_txn_markers.c: transaction markers to another broker (server/txn_markers.h) against a fake peer in
 * this process: a listening socket on the test's loop, registered in a metadata image as broker 2, that
 * answers ApiVersions from the codec and WriteTxnMarkers as each test tells it, and records what it was
 * sent. Covered: one WriteTxnMarkers v1 request carrying the queued markers field by field (producer id and
 * epoch, result, coordinator epoch, topic, partition), each marker's done with its own partition's error
 * (NONE, NOT_LEADER_OR_FOLLOWER, one the answer leaves out), one request in flight at a time (markers queued
 * meanwhile go in the next), a marker cancelled in flight never called back, a lost connection ending the
 * markers in flight with NOT_LEADER_OR_FOLLOWER, and free with markers still queued calling nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/broker_client.h"
#include "cluster/image.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"
#include "server/txn_markers.h"

enum fake_mode { ANSWER, SILENT, HANG_UP };

/* What the peer received in WriteTxnMarkers requests (flattened: one row per marker partition). */
struct seen {
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit;
    int32_t coordinator_epoch;
    char topic[32];
    int32_t partition;
};

static struct ev_loop *loop;
static struct gr_image *img;
static struct gr_broker_client *bc;

static struct fake {
    enum fake_mode mode;
    int lfd, cfd;
    ev_io lw, cw;
    int requests; /* WriteTxnMarkers requests received */
    int16_t version;
    struct seen seen[16];
    int seen_count;
    /* the error answered for partition p of any topic: errs[p]; partition 99 is left out of the answer */
    int16_t errs[8];
} fake;

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

static const struct gr_msg_ops *ops_named(const char *name)
{
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!strcmp(gr_msg_ops_table[i].name, name)) return &gr_msg_ops_table[i];
    return NULL;
}

/* One answer frame: size, the response header (v0, or v1 with an empty tag section), the body. */
static void answer(const struct gr_msg_ops *ops, const void *body, int32_t corr, int16_t version,
                   bool flex_hdr)
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
    assert_int_equal(send(fake.cfd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    free(buf);
}

static void api_versions(int32_t corr, int16_t version)
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
    answer(gr_msg_ops_find(ops_named("api_versions_request")->api_key, true), &av, corr, version, false);
}

/* Decodes a WriteTxnMarkers request into fake.seen and answers it from fake.errs. */
static void write_txn_markers(const uint8_t *frame, size_t n, int32_t corr, int16_t version)
{
    struct gr_arena arena;
    gr_arena_init(&arena, 1 << 16);
    struct gr_rd rd;
    gr_rd_init(&rd, frame, n, &arena);
    struct gr_request_header h;
    struct gr_write_txn_markers_request req;
    gr_write_txn_markers_request_init(&req);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), 0);
    assert_int_equal(gr_write_txn_markers_request_decode(&rd, version, &req), 0);
    fake.requests++;
    fake.version = version;
    struct gr_write_txn_markers_response_writable_txn_marker_result mr[16];
    struct gr_write_txn_markers_response_writable_txn_marker_topic_result tr[16];
    struct gr_write_txn_markers_response_writable_txn_marker_partition_result pr[16];
    int nm = 0, nt = 0, np = 0;
    for (int32_t i = 0; i < req.markers.count && nm < 16; i++) {
        const struct gr_write_txn_markers_request_writable_txn_marker *m = &req.markers.items[i];
        gr_write_txn_markers_response_writable_txn_marker_result_init(&mr[nm]);
        mr[nm].producer_id = m->producer_id;
        mr[nm].topics.items = &tr[nt];
        mr[nm].topics.count = 0;
        for (int32_t j = 0; j < m->topics.count && nt < 16; j++) {
            const struct gr_write_txn_markers_request_writable_txn_marker_topic *t = &m->topics.items[j];
            gr_write_txn_markers_response_writable_txn_marker_topic_result_init(&tr[nt]);
            tr[nt].name = t->name;
            tr[nt].partitions.items = &pr[np];
            tr[nt].partitions.count = 0;
            for (int32_t k = 0; k < t->partition_indexes.count && np < 16; k++) {
                int32_t p = t->partition_indexes.items[k];
                if (fake.seen_count < 16) {
                    struct seen *s = &fake.seen[fake.seen_count++];
                    *s = (struct seen){m->producer_id,
                                       m->producer_epoch,
                                       m->transaction_result,
                                       m->coordinator_epoch,
                                       "",
                                       p};
                    snprintf(s->topic, sizeof s->topic, "%.*s", (int)t->name.len, t->name.ptr);
                }
                if (p == 99) continue; /* left out of the answer */
                gr_write_txn_markers_response_writable_txn_marker_partition_result_init(&pr[np]);
                pr[np].partition_index = p;
                pr[np].error_code = p >= 0 && p < 8 ? fake.errs[p] : GR_ERR_NONE;
                np++;
                tr[nt].partitions.count++;
            }
            nt++;
            mr[nm].topics.count++;
        }
        nm++;
    }
    struct gr_write_txn_markers_response resp;
    gr_write_txn_markers_response_init(&resp);
    resp.markers.items = mr;
    resp.markers.count = nm;
    answer(gr_msg_ops_find(h.request_api_key, true), &resp, corr, version, true);
    gr_arena_reset(&arena);
}

static void close_client(void)
{
    ev_io_stop(loop, &fake.cw);
    close(fake.cfd);
    fake.cfd = -1;
}

static void on_client(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)w;
    (void)revents;
    uint8_t hdr[4];
    if (!read_full(fake.cfd, hdr, 4)) {
        close_client();
        return;
    }
    size_t n = gr_be32(hdr);
    uint8_t *frame = n <= (1 << 20) ? malloc(n) : NULL;
    int16_t key, version;
    int32_t corr;
    if (!frame || !read_full(fake.cfd, frame, n) || gr_request_header_peek(frame, n, &key, &version, &corr)) {
        free(frame);
        close_client();
        return;
    }
    if (key == ops_named("api_versions_request")->api_key) {
        api_versions(corr, version);
    } else if (fake.mode == HANG_UP) {
        fake.requests++;
        close_client();
    } else if (fake.mode == ANSWER) {
        write_txn_markers(frame, n, corr, version);
    } else {
        fake.requests++;
    }
    free(frame);
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)w;
    (void)revents;
    int fd = accept(fake.lfd, NULL, NULL);
    if (fd < 0) return;
    if (fake.cfd >= 0) close_client();
    fake.cfd = fd;
    ev_io_init(&fake.cw, on_client, fd, EV_READ);
    ev_io_start(loop, &fake.cw);
}

/* ---- the markers' side ---- */

struct rec {
    struct gr_txn_marker_send s;
    int calls;
    int16_t err;
};

static void rec_done(struct gr_txn_marker_send *s, int16_t err)
{
    struct rec *r = (struct rec *)s;
    r->calls++;
    r->err = err;
}

static void rec_init(struct rec *r, int64_t pid, const char *topic, int32_t partition, bool commit)
{
    memset(r, 0, sizeof *r);
    r->s = (struct gr_txn_marker_send){.producer_id = pid,
                                       .producer_epoch = 3,
                                       .coordinator_epoch = 5,
                                       .commit = commit,
                                       .topic = topic,
                                       .partition = partition,
                                       .done = rec_done};
}

static void wake(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l;
    (void)t;
    (void)revents;
}

static bool run_until(bool (*pred)(void *), void *arg, int64_t ms)
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

static bool called(void *arg)
{
    return ((struct rec *)arg)->calls > 0;
}

static bool requests_at_least_1(void *arg)
{
    (void)arg;
    return fake.requests >= 1;
}

static int setup(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof fake);
    fake.cfd = -1;
    fake.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_true(fake.lfd >= 0 && !bind(fake.lfd, (struct sockaddr *)&a, sizeof a) && !listen(fake.lfd, 8) &&
                !getsockname(fake.lfd, (struct sockaddr *)&a, &al));
    ev_io_init(&fake.lw, on_accept, fake.lfd, EV_READ);
    ev_io_start(loop, &fake.lw);
    img = gr_image_new(1);
    struct gr_image_broker br = {.node_id = 2, .epoch = 7, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = ntohs(a.sin_port);
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    gr_image_changed(img);
    char err[128];
    struct gr_broker_client_config cfg = {
        .node_id = 1, .listener_name = "INTERNAL", .request_timeout_ms = 2000, .backoff_ms = 50};
    bc = gr_broker_client_new(loop, img, &cfg, err, sizeof err);
    assert_non_null(bc);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gr_broker_client_free(bc);
    gr_image_free(img);
    if (fake.cfd >= 0) close_client();
    ev_io_stop(loop, &fake.lw);
    close(fake.lfd);
    return 0;
}

/* Three markers queued before the connection is ready go in one v1 request; each gets its own partition's
 * error (NONE, NOT_LEADER_OR_FOLLOWER, and NOT_LEADER_OR_FOLLOWER for one the answer leaves out). */
static void test_batch_and_errors(void **state)
{
    (void)state;
    struct gr_txn_markers *m = gr_txn_markers_new(loop, bc);
    assert_non_null(m);
    fake.errs[1] = GR_ERR_NOT_LEADER_OR_FOLLOWER;
    struct rec a, b, c;
    rec_init(&a, 7, "t", 0, true);
    rec_init(&b, 7, "t", 1, true);
    rec_init(&c, 9, "u", 99, false);
    assert_int_equal(gr_txn_markers_send(m, 2, &a.s), 0);
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0);
    assert_int_equal(gr_txn_markers_send(m, 2, &c.s), 0);
    assert_int_equal(gr_txn_markers_send(m, 2, &c.s), -EINVAL); /* already queued */
    assert_int_equal(gr_txn_markers_pending(m), 3);
    assert_true(run_until(called, &c, 5000));
    assert_int_equal(fake.requests, 1);
    assert_int_equal(fake.version, 1);
    assert_int_equal(fake.seen_count, 3);
    assert_int_equal(fake.seen[0].producer_id, 7);
    assert_int_equal(fake.seen[0].producer_epoch, 3);
    assert_int_equal(fake.seen[0].coordinator_epoch, 5);
    assert_true(fake.seen[0].commit);
    assert_string_equal(fake.seen[0].topic, "t");
    assert_int_equal(fake.seen[0].partition, 0);
    assert_int_equal(fake.seen[1].partition, 1);
    assert_int_equal(fake.seen[2].producer_id, 9);
    assert_false(fake.seen[2].commit);
    assert_string_equal(fake.seen[2].topic, "u");
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, GR_ERR_NONE);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.err, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(gr_txn_markers_pending(m), 0);
    /* sent again once idle (a retry), to the ready connection: a second request */
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0);
    fake.errs[1] = GR_ERR_NONE;
    b.calls = 0;
    assert_true(run_until(called, &b, 5000));
    assert_int_equal(b.err, GR_ERR_NONE);
    assert_int_equal(fake.requests, 2);
    gr_txn_markers_free(m);
}

/* A marker cancelled while its request is in flight is never called back; one queued behind the request
 * goes in the next request once the first is answered. */
static void test_cancel_in_flight(void **state)
{
    (void)state;
    struct gr_txn_markers *m = gr_txn_markers_new(loop, bc);
    struct rec a, b, warm;
    rec_init(&warm, 1, "t", 0, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &warm.s), 0);
    assert_true(run_until(called, &warm, 5000)); /* the connection is ready from now on */
    rec_init(&a, 7, "t", 0, true);
    rec_init(&b, 8, "t", 2, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &a.s), 0); /* written at once: in flight */
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0); /* queued behind it */
    gr_txn_markers_cancel(&a.s);
    gr_txn_markers_cancel(&a.s); /* idle: nothing */
    assert_true(run_until(called, &b, 5000));
    assert_int_equal(a.calls, 0);
    assert_int_equal(b.calls, 1);
    assert_int_equal(fake.requests, 3); /* warm, a (answered, ignored), b */
    gr_txn_markers_free(m);
}

/* The peer closes the connection on the request: the marker ends NOT_LEADER_OR_FOLLOWER (retried by the
 * caller); a marker for a silent peer that is freed before any answer is never called back. */
static void test_hang_up_and_free(void **state)
{
    (void)state;
    struct gr_txn_markers *m = gr_txn_markers_new(loop, bc);
    fake.mode = HANG_UP;
    struct rec a;
    rec_init(&a, 7, "t", 0, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &a.s), 0);
    assert_true(run_until(called, &a, 5000));
    assert_int_equal(a.err, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    fake.mode = SILENT;
    fake.requests = 0;
    struct rec b;
    rec_init(&b, 8, "t", 0, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0);
    assert_true(run_until(requests_at_least_1, NULL, 5000));
    gr_txn_markers_free(m);
    assert_int_equal(b.calls, 0);
    assert_null(b.s.dest);
    run_until(called, &b, 200);
    assert_int_equal(b.calls, 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(60);
    loop = ev_default_loop(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hang_up_and_free, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
