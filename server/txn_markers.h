/*
 * txn_markers.h: transaction markers sent to other brokers (Kafka's TransactionMarkerChannelManager, the
 * sending side of WriteTxnMarkers between brokers; issue #21). The transaction coordinator's binding
 * (server/txns.c) writes a marker in process when the partition's leader is this broker; for a leader
 * elsewhere it hands the marker here: one queue per destination broker, drained over one inter-broker
 * connection (cluster/broker_client.h, purpose GR_BROKER_CLIENT_TXN_MARKERS) as WriteTxnMarkers requests
 * (v2 with each marker's TransactionVersion when the leader serves it, else v1)
 * of at most GR_TXN_MARKERS_BATCH_MAX markers, one request in flight per broker. Each marker ends exactly
 * once through its done hook with the leader's per-partition error code (NONE: written with acks=-1, as
 * KafkaApis.handleWriteTxnMarkersRequest appends), or REQUEST_TIMED_OUT when the request timed out, or
 * NOT_LEADER_OR_FOLLOWER when the connection was lost or the answer did not name the partition; what to
 * retry is the caller's (TransactionMarkerRequestCompletionHandler's rules live in server/txns.c).
 * Bounds: GR_TXN_MARKERS_QUEUED_MAX markers waiting per destination (more is refused: the caller retries
 * later). done runs from the loop (a broker-client callback), never inside a call on this module; it may
 * send again, and must not cancel or free another marker synchronously (server/txns.c reports rounds from
 * a zero-delay timer). Read next: server/txn_markers.c, server/txns.c (marker_send).
 */
#ifndef GR_SERVER_TXN_MARKERS_H
#define GR_SERVER_TXN_MARKERS_H

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct gr_broker_client;
struct gr_txn_markers;
struct gr_txn_markers_dest;

/* One partition's marker to a leader on another broker, embedded in the caller's state. The caller fills the
 * public fields; `topic` is borrowed until done (or cancel). */
struct gr_txn_marker_send {
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t coordinator_epoch;
    bool commit;
    int16_t transaction_version; /* WriteTxnMarkers v2's TransactionVersion (dropped when v1 is sent) */
    const char *topic;           /* NUL-terminated */
    int32_t partition;
    void (*done)(struct gr_txn_marker_send *s, int16_t error_code);
    /* private */
    struct gr_txn_markers_dest *dest; /* NULL: idle */
    struct gr_txn_marker_send *prev, *next;
    bool in_flight;
};

/* Makes the channel manager over `bc` (borrowed; outlives it). Returns new or NULL (out of memory). */
struct gr_txn_markers *gr_txn_markers_new(struct ev_loop *loop, struct gr_broker_client *bc);
/* Closes every connection and frees; markers still queued or in flight end without a done call. */
void gr_txn_markers_free(struct gr_txn_markers *m);
/* Queues `s` (idle) for broker `broker_id` (not this broker): sent once the connection is ready. Returns 0,
 * -ENOSPC (GR_TXN_MARKERS_QUEUED_MAX already waiting for that broker: nothing queued), -EINVAL (a bad
 * broker id) or -ENOMEM. */
int gr_txn_markers_send(struct gr_txn_markers *m, int32_t broker_id, struct gr_txn_marker_send *s);
/* Withdraws `s`: no done call follows (an answer for it is ignored). Nothing when idle. */
void gr_txn_markers_cancel(struct gr_txn_marker_send *s);
/* Markers queued or in flight to any broker (tests). */
int32_t gr_txn_markers_pending(const struct gr_txn_markers *m);

#endif
