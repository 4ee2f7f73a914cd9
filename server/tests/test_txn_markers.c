/*
 * test_txn_markers.c: transaction markers to another broker (server/txn_markers.h) against a fake peer in
 * this process (fake_peer.h: broker 2 on the test's loop) that answers WriteTxnMarkers as each test tells it
 * and records what it was sent. Covered: one WriteTxnMarkers v1 request carrying the queued markers field by
 * field (producer id and epoch, result, coordinator epoch, topic, partition), each marker's done with its own
 * partition's error (NONE, NOT_LEADER_OR_FOLLOWER, one the answer leaves out), one request in flight at a
 * time (markers queued meanwhile go in the next), a marker cancelled in flight never called back, a lost
 * connection ending the markers in flight with NOT_LEADER_OR_FOLLOWER, and free with markers still queued
 * calling nothing.
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
#include "server/tests/fake_peer.h"
#include "server/txn_markers.h"

/* What the peer received in WriteTxnMarkers requests (flattened: one row per marker partition). */
struct seen {
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit;
    int32_t coordinator_epoch;
    char topic[32];
    int32_t partition;
    int8_t transaction_version; /* v2's TransactionVersion (0 in v1) */
};

static struct ev_loop *loop;
static struct fake_peer peer;

static struct fake {
    int16_t version; /* of the last WriteTxnMarkers request (peer.requests counts them) */
    struct seen seen[16];
    int seen_count;
    /* the error answered for partition p of any topic: errs[p]; partition 99 is left out of the answer */
    int16_t errs[8];
} fake;

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
    peer.requests++;
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
                                       p,
                                       m->transaction_version};
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
    fake_peer_answer(&peer, gr_msg_ops_find(h.request_api_key, true), &resp, corr, version, true);
    gr_arena_reset(&arena);
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

static bool called(void *arg)
{
    return ((struct rec *)arg)->calls > 0;
}

static bool requests_at_least_1(void *arg)
{
    (void)arg;
    return peer.requests >= 1;
}

static int setup(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof fake);
    fake_peer_start(&peer, loop, write_txn_markers);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fake_peer_stop(&peer);
    return 0;
}

/* Three markers queued before the connection is ready go in one v2 request (the peer serves it) with each
 * marker's transaction version; each gets its own partition's
 * error (NONE, NOT_LEADER_OR_FOLLOWER, and NOT_LEADER_OR_FOLLOWER for one the answer leaves out). */
static void test_batch_and_errors(void **state)
{
    (void)state;
    struct gr_txn_markers *m = gr_txn_markers_new(loop, peer.bc);
    assert_non_null(m);
    fake.errs[1] = GR_ERR_NOT_LEADER_OR_FOLLOWER;
    struct rec a, b, c;
    rec_init(&a, 7, "t", 0, true);
    rec_init(&b, 7, "t", 1, true);
    rec_init(&c, 9, "u", 99, false);
    c.s.transaction_version = 2; /* a transaction of version 2 */
    assert_int_equal(gr_txn_markers_send(m, 2, &a.s), 0);
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0);
    assert_int_equal(gr_txn_markers_send(m, 2, &c.s), 0);
    assert_int_equal(gr_txn_markers_send(m, 2, &c.s), -EINVAL); /* already queued */
    assert_int_equal(gr_txn_markers_pending(m), 3);
    assert_true(fake_peer_run_until(loop, called, &c, 5000));
    assert_int_equal(peer.requests, 1);
    assert_int_equal(fake.version, 2); /* the peer serves v2 (KIP-1228): each marker's version goes along */
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
    assert_int_equal(fake.seen[0].transaction_version, 0);
    assert_int_equal(fake.seen[2].transaction_version, 2);
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
    assert_true(fake_peer_run_until(loop, called, &b, 5000));
    assert_int_equal(b.err, GR_ERR_NONE);
    assert_int_equal(peer.requests, 2);
    gr_txn_markers_free(m);
}

/* A marker cancelled while its request is in flight is never called back; one queued behind the request
 * goes in the next request once the first is answered. */
static void test_cancel_in_flight(void **state)
{
    (void)state;
    struct gr_txn_markers *m = gr_txn_markers_new(loop, peer.bc);
    struct rec a, b, warm;
    rec_init(&warm, 1, "t", 0, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &warm.s), 0);
    assert_true(fake_peer_run_until(loop, called, &warm, 5000)); /* the connection is ready from now on */
    rec_init(&a, 7, "t", 0, true);
    rec_init(&b, 8, "t", 2, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &a.s), 0); /* written at once: in flight */
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0); /* queued behind it */
    gr_txn_markers_cancel(&a.s);
    gr_txn_markers_cancel(&a.s); /* idle: nothing */
    assert_true(fake_peer_run_until(loop, called, &b, 5000));
    assert_int_equal(a.calls, 0);
    assert_int_equal(b.calls, 1);
    assert_int_equal(peer.requests, 3); /* warm, a (answered, ignored), b */
    gr_txn_markers_free(m);
}

/* The peer closes the connection on the request: the marker ends NOT_LEADER_OR_FOLLOWER (retried by the
 * caller); a marker for a silent peer that is freed before any answer is never called back. */
static void test_hang_up_and_free(void **state)
{
    (void)state;
    struct gr_txn_markers *m = gr_txn_markers_new(loop, peer.bc);
    peer.mode = FAKE_PEER_HANG_UP;
    struct rec a;
    rec_init(&a, 7, "t", 0, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &a.s), 0);
    assert_true(fake_peer_run_until(loop, called, &a, 5000));
    assert_int_equal(a.err, GR_ERR_NOT_LEADER_OR_FOLLOWER);
    peer.mode = FAKE_PEER_SILENT;
    peer.requests = 0;
    struct rec b;
    rec_init(&b, 8, "t", 0, true);
    assert_int_equal(gr_txn_markers_send(m, 2, &b.s), 0);
    assert_true(fake_peer_run_until(loop, requests_at_least_1, NULL, 5000));
    gr_txn_markers_free(m);
    assert_int_equal(b.calls, 0);
    assert_null(b.s.dest);
    fake_peer_run_until(loop, called, &b, 200);
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
