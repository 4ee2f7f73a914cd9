/*
 * fake_peer.h: a fake Kafka broker in a test's own process, for the tests of requests Gregor sends to other
 * brokers (test_txn_markers.c: WriteTxnMarkers; test_txn_verifier.c: AddPartitionsToTxn VerifyOnly): a
 * listening socket on 127.0.0.1 (a free port) watched by the test's libev loop, registered in a metadata
 * image as broker 2 on listener INTERNAL, and the inter-broker client of broker 1 over that image. The peer
 * answers ApiVersions from the codec's table itself; every other request goes by its mode: ANSWER hands the
 * frame to the test's `on_request`, SILENT counts it and never answers, HANG_UP counts it and closes the
 * connection, HOLD keeps the first one until fake_peer_release_held (later ones counted, not answered).
 * One client connection at a time (a new one replaces the old). Read next: test_txn_markers.c.
 */
#ifndef GR_SERVER_TEST_FAKE_PEER_H
#define GR_SERVER_TEST_FAKE_PEER_H

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/broker_client.h"
#include "cluster/image.h"
#include "protocol/gen/messages.h"

enum fake_peer_mode { FAKE_PEER_ANSWER, FAKE_PEER_SILENT, FAKE_PEER_HANG_UP, FAKE_PEER_HOLD };

/* Answers one request frame (`n` bytes after the size, header included; its correlation id and version). */
typedef void (*fake_peer_request_fn)(const uint8_t *frame, size_t n, int32_t corr, int16_t version);

struct fake_peer {
    struct ev_loop *loop;
    enum fake_peer_mode mode;
    fake_peer_request_fn on_request;
    int lfd, cfd;
    ev_io lw, cw;
    int requests;  /* requests SILENT, HANG_UP or a second HOLD counted; on_request counts its own */
    uint8_t *held; /* HOLD: the request frame not answered yet (malloc'd), its length, correlation, version */
    size_t held_len;
    int32_t held_corr;
    int16_t held_version;
    struct gr_image *img;        /* broker 2 = this peer */
    struct gr_broker_client *bc; /* broker 1's client, request timeout 2000 ms, backoff 50 ms */
};

/* Starts `p` (zeroed first) on `loop`: the listener, the image and the client. Fails the test (cmocka
 * assertions) when a socket call or the client's creation fails. */
void fake_peer_start(struct fake_peer *p, struct ev_loop *loop, fake_peer_request_fn on_request);
/* Frees the client and the image, closes the sockets and frees a held frame. */
void fake_peer_stop(struct fake_peer *p);
/* Sends one answer frame on the client connection: the size, the response header (v0, or v1 with an empty
 * tag section when `flex_hdr`), `body` encoded by `ops` at `version`. Fails the test on a short send. */
void fake_peer_answer(struct fake_peer *p, const struct gr_msg_ops *ops, const void *body, int32_t corr,
                      int16_t version, bool flex_hdr);
/* Closes the client connection (the next one is accepted as it comes). */
void fake_peer_close_client(struct fake_peer *p);
/* HOLD: hands the held frame to on_request now and frees it. */
void fake_peer_release_held(struct fake_peer *p);
/* The codec's message ops named `name` (e.g. "api_versions_request"), or NULL. */
const struct gr_msg_ops *fake_peer_ops_named(const char *name);
/* Runs `loop` one iteration at a time until pred(arg) holds or `ms` milliseconds (monotonic) pass; a 10 ms
 * timer keeps an idle loop from blocking past the deadline. Returns whether pred held. */
bool fake_peer_run_until(struct ev_loop *loop, bool (*pred)(void *), void *arg, int64_t ms);

#endif
