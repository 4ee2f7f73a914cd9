/*
 * producer_ids_etcd.h: the cluster-mode source of producer id blocks (issue #19 "Producer ids allocated in
 * blocks through etcd"): the coordinator's manager (coordinator/producer_ids.h: the named wait "until the
 * block is saved", 90% prefetch, COORDINATOR_LOAD_IN_PROGRESS while no block is there) bound to the
 * cluster's `producer_ids` counter key (cluster/layout.h) instead of a file, so InitProducerId is the same
 * code in both modes. The counter's value (cluster/values.h, Kafka's ProducerIdsRecord) is the first id of
 * the next block nobody has taken; taking a block (Kafka's ProducerIdControlManager.generateNextProducerId,
 * served to brokers by RPCProducerIdManager) is:
 *
 *   1. range the key (absent: the first block starts at 0, as Kafka's);
 *   2. one txn: compare the key's mod_revision with the one read (0: still absent); success: put
 *      {next_producer_id: start + GR_PRODUCER_ID_BLOCK_SIZE, broker_id, broker_epoch}; failure: range the
 *      key (the winner's value, for the next attempt without another read);
 *   3. a lost compare tries again after a random back-off (GR_PRODUCER_IDS_ETCD_BACKOFF_MIN_MS doubling to
 *      GR_PRODUCER_IDS_ETCD_BACKOFF_MAX_MS), at most GR_PRODUCER_IDS_ETCD_ATTEMPTS_MAX times in a row.
 *
 * Invariants: a block is handed out only after the txn that moved the counter past it succeeded, so two
 * brokers (or two processes of one broker) never share an id, and a restart continues above every block
 * taken before (the rest of a block in use is skipped, as Kafka does). A value that does not decode, is
 * negative or lies above INT64_MAX - GR_PRODUCER_ID_BLOCK_SIZE, or lies below this broker's block in use
 * (a counter moved backwards by hand) is refused with an error log naming the key: no id is handed out
 * from it and it is never overwritten. An unanswered etcd (timeout, lost connection: the txn's outcome is
 * unknown, a block may be skipped, never reused) or the retry bound fails the save: the waiting
 * InitProducerId requests get COORDINATOR_LOAD_IN_PROGRESS and a later request starts a new attempt (the
 * manager's GR_PRODUCER_ID_RETRY_BACKOFF_MS apart). At most one request to etcd is in flight.
 *
 * Loop thread only (cluster/etcd.h's contract). Read next: coordinator/producer_ids.h (the wait),
 * server/producer_ids.c (which source a broker uses), cluster/tests/test_producer_ids_etcd.c.
 */
#ifndef GR_CLUSTER_PRODUCER_IDS_ETCD_H
#define GR_CLUSTER_PRODUCER_IDS_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/etcd.h"
#include "cluster/layout.h"
#include "coordinator/producer_ids.h"

/* Compares lost in a row before the save fails (COORDINATOR_LOAD_IN_PROGRESS; a later request retries):
 * each lost compare means another broker took a block, so the cluster progresses meanwhile. */
#define GR_PRODUCER_IDS_ETCD_ATTEMPTS_MAX 16
/* The back-off after a lost compare: a random wait in [d/2, d] where d starts here and doubles ... */
#define GR_PRODUCER_IDS_ETCD_BACKOFF_MIN_MS 5
/* ... up to this (milliseconds). */
#define GR_PRODUCER_IDS_ETCD_BACKOFF_MAX_MS 200

struct ev_loop;
struct gr_producer_ids_etcd;

struct gr_producer_ids_etcd_config {
    struct ev_loop *loop;                /* borrowed */
    struct gr_etcd *etcd;                /* borrowed: outlives the source */
    const struct gr_cluster_layout *lay; /* borrowed */
    int32_t broker_id;                   /* node.id, written as the taker */
    /* This broker's epoch now (its registration's create_revision; < 1 while not registered: no block is
       taken then, the save fails). */
    int64_t (*broker_epoch)(void *ctx);
    /* False once the broker is stopping: no save starts (NULL: always true). */
    bool (*may_save)(void *ctx);
    void *ctx;     /* for both hooks */
    uint64_t seed; /* the back-off's randomness (any value; tests fix it) */
};

/* Returns new: a source whose manager (gr_producer_ids_etcd_manager) is open and already taking its first
 * block (nothing is handed out before that txn succeeded). NULL with a reason logged when out of memory or
 * the key cannot be built. */
struct gr_producer_ids_etcd *gr_producer_ids_etcd_new(const struct gr_producer_ids_etcd_config *cfg);
/* Returns borrowed: the manager InitProducerId waits on (valid until gr_producer_ids_etcd_free). */
struct gr_producer_id_manager *gr_producer_ids_etcd_manager(struct gr_producer_ids_etcd *src);
/* Cancels the etcd request or back-off in flight (no callback runs; requests still queued on the manager
 * are never answered: free them first, as server/main.c frees parked requests) and frees; NULL ignored. */
void gr_producer_ids_etcd_free(struct gr_producer_ids_etcd *src);

/* Counts for tests and logs: blocks taken, compares lost, values refused; in_flight is true while a save
 * (a read, compare or back-off) is under way, whose block may already be taken in etcd and not yet counted.
 */
struct gr_producer_ids_etcd_stats {
    uint64_t blocks;
    uint64_t lost;
    uint64_t refused;
    bool in_flight;
};
struct gr_producer_ids_etcd_stats gr_producer_ids_etcd_stats(const struct gr_producer_ids_etcd *src);

#endif
