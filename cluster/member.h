/*
 * member.h: the life of a cluster-mode broker in etcd (issue #19: "One cluster id", "Registration,
 * liveness, fencing", "Start, restart, stop"), on the broker's libev loop through one etcd client
 * (cluster/etcd.h), feeding the metadata image through cluster/feed.h.
 *
 *   1. cluster id (gr_member_resolve): `<prefix>/cluster_id` read; absent, only a broker whose log
 *      directory is new creates it (txn: create_revision == 0; a concurrent winner's id is taken instead);
 *      present, it must equal meta.properties' cluster.id when the directory has one. Refusals (the process
 *      exits): "Invalid cluster.id in <dir>/meta.properties: etcd has X", "etcd has no cluster metadata
 *      under <prefix>; refusing to re-create it over existing data" (also a single-node directory).
 *   2. registration (gr_member_join): a lease of ceil(broker.session.timeout.ms / 1000) s; `brokers/<id>`
 *      (listeners, rack, shutting_down false; log_dir_new true on the process's first registration when
 *      its log dir had no meta.properties: cluster/values.h) put under it by a txn comparing the key's
 *      absence. A key left
 *      by an earlier process is waited for (re-checked every GR_MEMBER_RECHECK_MS, at most the session
 *      timeout + GR_MEMBER_EXPIRY_SLACK_MS, never deleted); still there: "node.id N is already registered by
 * a live broker (lease <id>)" and the process exits. The broker epoch is the key's create_revision.
 *   3. the whole root read page by page at one revision (after the registration) into the image as a
 *      snapshot, the watch started at that revision + 1 (its resyncs go through the feed too); then ready:
 *      the Kafka listeners open only now (server/main.c).
 *   4. a keepalive every broker.heartbeat.interval.ms. Evidence the lease is gone (a keepalive answered
 *      "lease gone", or the watch showing this broker's key deleted or created again by someone else) ->
 *      `fenced: lease <id> lost`, img->self_fenced set (route.c: this broker leads nothing), steps 2 and 3
 *      again (a new broker epoch, a fresh snapshot), self_fenced cleared. A merely unreachable etcd changes
 *      nothing served; `etcd unreachable for N s` is logged every GR_MEMBER_UNREACHABLE_LOG_MS.
 *   5. (SIGTERM, controlled shutdown) gr_member_mark writes the mark while the broker still serves
 *      (server/membership.c waits for the controller to move its leaderships), then gr_member_leave: the
 *      watch and timers stop; a registered broker rewrites its registration with
 *      shutting_down true (same lease, compare: create_revision == its epoch; Kafka's controlled shutdown:
 *      the controller stops choosing it as leader, gr_controller_broker_live), then the lease is revoked
 *      (bounded wait, the mark's share at most GR_MEMBER_MARK_WAIT_MS): the registration is gone at once.
 *
 * Steps 1-3 at start and step 5 run the loop themselves until done (the broker serves nothing then);
 * everything else is callbacks, never blocking the loop. Read next: cluster/feed.h, server/main.c.
 */
#ifndef GR_CLUSTER_MEMBER_H
#define GR_CLUSTER_MEMBER_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/etcd.h"
#include "cluster/feed.h"
#include "cluster/image.h"
#include "cluster/layout.h"

/* Re-check interval of a registration left by an earlier process, and of a start-up step etcd failed. */
#define GR_MEMBER_RECHECK_MS 500
/* Beyond the session timeout, how long a registration left by an earlier process is still waited for: etcd
 * removes an expired lease only at its lessor's next check (every 500 ms) and through a raft round, so a
 * dead process's key can outlive its TTL by a second or so (seen in compat-tests/cluster/membership.py). A
 * live broker renews its lease and never goes, so the wait ends with the refusal after this. */
#define GR_MEMBER_EXPIRY_SLACK_MS 2000
/* How often "etcd unreachable for N s" is logged while keepalives fail without evidence. */
#define GR_MEMBER_UNREACHABLE_LOG_MS 10000
/* The longest gr_member_leave waits for the shutting_down mark and the revoke together ... */
#define GR_MEMBER_REVOKE_WAIT_MS 2000
/* ... of which the mark at most this: an unanswered mark still leaves the revoke its time. */
#define GR_MEMBER_MARK_WAIT_MS 1000
/* Bytes of keys and values a snapshot (the reload after fencing, a watch's resync) is held in before it
 * is applied in one loop turn (member.c, struct snap); a larger one is applied page by page as it comes,
 * with a warning (requests between pages then see a partial image). 64 MiB is far above a cluster of
 * thousands of partitions (about 150 bytes each). */
#define GR_MEMBER_SNAPSHOT_BYTES_MAX (64ull << 20)

struct ev_loop;
struct gr_member;

struct gr_member_config {
    struct ev_loop *loop;
    const char *endpoints;         /* "http://h:p[,...]" (gregor.metadata.etcd.endpoints), borrowed */
    const char *prefix;            /* gregor.metadata.etcd.prefix, checked by cluster/layout.h */
    int32_t node_id;               /* node.id */
    int64_t session_timeout_ms;    /* broker.session.timeout.ms: the lease's TTL, rounded up to seconds */
    int64_t heartbeat_interval_ms; /* broker.heartbeat.interval.ms: the keepalive period */
    const char *rack;              /* broker.rack, NULL when unset */
    const struct gr_image_listener *listeners; /* the advertised listeners (copied) */
    int listener_count;                        /* 1..GR_CLUSTER_LISTENERS_MAX */
    const char *log_dir;                       /* for the refusal messages */
    const char *dir_cluster_id;  /* meta.properties' cluster.id, NULL when the directory is new (no file) */
    int16_t transaction_version; /* gregor.transaction.version: the features key's level when this broker
                                    creates the cluster (written with the cluster id, in one txn) */
    struct gr_image *img;        /* fed from etcd (borrowed, outlives the member) */
    gr_feed_local_fn *local;     /* links image topics to local storage (may be NULL) */
    void *local_ctx;
};

/* Returns new: a member (its etcd client made, nothing sent yet; every request's timeout half the session
 * timeout, within 1000..GR_ETCD_REQUEST_TIMEOUT_MS_DEFAULT ms, so one lost keepalive leaves time for the
 * next), or NULL with a reason logged (bad endpoints, prefix, listeners, out of memory). */
struct gr_member *gr_member_new(const struct gr_member_config *cfg);
/* Stops everything (no callback runs afterwards) and frees the member; NULL ignored. */
void gr_member_free(struct gr_member *m);

/* Step 1, running the loop until decided: returns 0 with the cluster id in gr_member_cluster_id, or -1
 * after logging the refusal (the caller exits). An unreachable etcd is retried (and logged) until it
 * answers. Before the broker serves anything. */
int gr_member_resolve(struct gr_member *m);
/* Returns borrowed: the cluster id (22 characters), "" before gr_member_resolve succeeded. */
const char *gr_member_cluster_id(const struct gr_member *m);
/* Steps 2 and 3, running the loop until this broker is registered and its image loaded and watched:
 * returns 0 (ready: open the listeners), or -1 after logging why (node id held by a live broker). */
int gr_member_join(struct gr_member *m);
/* The controlled shutdown's first step (Kafka: BrokerLifecycleManager.beginControlledShutdown, its
 * heartbeat's WantShutDown): rewrites the registration with shutting_down true without running the loop;
 * done(ctx, rc) is called once it is written (rc 0) or refused because the key is no longer this
 * process's (-ESTALE); a lost write is sent again every GR_MEMBER_RECHECK_MS while registered, and a
 * registration made again after a fencing carries the mark itself (done is not called then). Keeps `done`
 * and `ctx` until the member is freed. */
void gr_member_mark(struct gr_member *m, void (*done)(void *ctx, int rc), void *ctx);
/* Step 5, running the loop for at most GR_MEMBER_REVOKE_WAIT_MS: stops watching, marks the registration
 * shutting_down (when registered and not marked already by gr_member_mark) and revokes the lease. */
void gr_member_leave(struct gr_member *m);

/* For later slices: the client (borrowed), the key layout (borrowed), the current lease id (0 while none:
 * before registration and while fenced), this broker's epoch (its registration's create_revision, 0 while
 * none) and whether it is registered with its image loaded (false while fenced). */
struct gr_etcd *gr_member_etcd(const struct gr_member *m);
const struct gr_cluster_layout *gr_member_layout(const struct gr_member *m);
int64_t gr_member_lease(const struct gr_member *m);
int64_t gr_member_broker_epoch(const struct gr_member *m);
bool gr_member_ready(const struct gr_member *m);
/* Calls fn(ctx, m) whenever the lease changes: fenced (lease 0) and registered again (a new lease and
 * epoch). One hook; NULL removes it. */
void gr_member_on_lease_changed(struct gr_member *m, void (*fn)(void *ctx, struct gr_member *m), void *ctx);
/* Fencings since start (tests and logs). */
uint64_t gr_member_fencings(const struct gr_member *m);

#endif
