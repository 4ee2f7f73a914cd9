/*
 * txn_verifier.h: KIP-890 part 1's verification at a transaction coordinator on another broker (Kafka's
 * AddPartitionsToTxnManager, the sending side of AddPartitionsToTxn v4+ with VerifyOnly; issue #21). A
 * partition leader whose transactional Produce names a transactional id coordinated elsewhere hands its
 * question here (server/txns.c gr_txns_verify_remote): one queue per destination broker, drained over one
 * inter-broker connection (cluster/broker_client.h, purpose GR_BROKER_CLIENT_VERIFY) as AddPartitionsToTxn
 * requests carrying several transactions (one entry per transactional id), at most one request in flight per
 * broker, the next batch sent when the answer arrives. A request holds at most GR_TXN_VERIFY_BATCH_TXNS_MAX
 * transactions and GR_TXN_VERIFY_BATCH_PARTS_MAX partitions (one larger question goes alone); at most
 * GR_TXN_VERIFY_PENDING_MAX questions wait per broker.
 * A second question for a transactional id already queued (not yet sent) follows addTxnData: the queued one
 * is answered INVALID_PRODUCER_EPOCH when its epoch is lower, NETWORK_EXCEPTION when equal (the client is
 * retrying), and the new one takes its place; a new one with a lower epoch is answered INVALID_PRODUCER_EPOCH
 * at once and not queued.
 * Each question ends exactly once (unless cancelled) through its done hook with every partition's error as
 * AddPartitionsToTxnHandler.onComplete gives it: the coordinator's per-partition code (NONE: in the
 * transaction), PRODUCER_FENCED as INVALID_PRODUCER_EPOCH; a top-level error for every partition
 * (CLUSTER_AUTHORIZATION_FAILED as INVALID_TXN_STATE); NETWORK_EXCEPTION for a lost connection, a timeout,
 * a request that could not be sent (a peer below v4 included; Kafka skips verification there, Gregor's peers
 * all serve v4) or a partition the answer leaves out. TRANSACTION_ABORTABLE stays as it is: the Produce
 * version decides (server/txns.h gr_txns_produce_error). done runs from the loop (a broker-client callback
 * or a zero-delay timer), never inside a call on this module; it may ask again, and must not cancel or free
 * another question synchronously. Read next: server/txn_verifier.c, server/txns.c (gr_txns_verify_remote).
 */
#ifndef GR_SERVER_TXN_VERIFIER_H
#define GR_SERVER_TXN_VERIFIER_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/wire.h"

struct ev_loop;
struct gr_broker_client;
struct gr_txn_verifier;
struct gr_txn_verifier_dest;

/* One partition of a question: `topic` (borrowed until done or cancel) and, at done, its error. */
struct gr_txn_verify_part {
    struct gr_str topic;
    int32_t partition;
    int16_t error;
};

/* One transactional id's question, embedded in the caller's state. The caller fills the public fields;
 * `txn_id` and `parts` are borrowed until done (or cancel). */
struct gr_txn_question {
    struct gr_str txn_id;
    int64_t producer_id;
    int16_t producer_epoch;
    struct gr_txn_verify_part *parts;
    int32_t count;
    void (*done)(struct gr_txn_question *q); /* every parts[i].error set */
    bool add; /* transaction version 2's implicit add (VerifyOnly false: the coordinator adds the partitions,
                 Produce v12+ / TxnOffsetCommit v5+), else KIP-890 part 1's verification */
    /* private */
    struct gr_txn_verifier_dest *dest; /* NULL: idle */
    struct gr_txn_question *prev, *next;
    int8_t where; /* queued, in flight, answered (done due from the timer) */
};

/* Makes the manager over `bc` on `loop` (both borrowed; they outlive it). Returns new or NULL (no memory). */
struct gr_txn_verifier *gr_txn_verifier_new(struct ev_loop *loop, struct gr_broker_client *bc);
/* Closes every connection and frees; questions still queued, in flight or answered end without a done call.
 */
void gr_txn_verifier_free(struct gr_txn_verifier *v);
/* Asks broker `broker_id` (not this broker) question `q` (idle, count >= 1). Returns 0 (queued: done
 * follows), 1 (answered at once, no done call: a question for the same id with a higher epoch is queued;
 * every part INVALID_PRODUCER_EPOCH), -ENOSPC (GR_TXN_VERIFY_PENDING_MAX waiting for that broker: nothing
 * queued), -EINVAL (a bad broker id, an empty or busy question) or -ENOMEM. */
int gr_txn_verifier_ask(struct gr_txn_verifier *v, int32_t broker_id, struct gr_txn_question *q);
/* Withdraws `q`: no done call follows (an answer for it is ignored). Nothing when idle. */
void gr_txn_verifier_cancel(struct gr_txn_question *q);
/* Questions queued, in flight or answered and not yet done, toward any broker (tests). */
int32_t gr_txn_verifier_pending(const struct gr_txn_verifier *v);
/* AddPartitionsToTxn requests sent so far, toward any broker (tests). */
int64_t gr_txn_verifier_requests(const struct gr_txn_verifier *v);

#endif
