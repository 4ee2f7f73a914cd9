/*
 * ctl_lease.h: the controller's own etcd lease (issue #19, "A controller": failover under 5 s with the
 * default settings). The controller key (cluster/layout.h) is bound to this lease, not to the broker's
 * registration lease: a dead controller's key goes after ceil(controller.quorum.fetch.timeout.ms / 1000) s
 * (Kafka's name for how long a KRaft voter waits for the quorum leader before it starts an election, 2000 by
 * default) while its registration, and so its partitions, stay until broker.session.timeout.ms (9000). A
 * Kafka cluster behaves the same: a new active controller within a couple of seconds, a dead broker fenced
 * after its session.
 *
 * Invariants: at most one lease held and one request in flight (a grant, a keepalive or a revoke); the lease
 * is wanted only while the broker is registered (server/membership.c follows the member's lease); every
 * change of the held lease (a new one, or 0 when it is lost, released or unwanted) is reported once through
 * the callback, which hands it to gr_controller_set_lease. Losing the lease needs evidence (a keepalive
 * answered "lease gone"); an unanswered keepalive changes nothing: the controller's writes are fenced by
 * their compares on the controller key's create_revision anyway, never by the lease.
 *
 * Read next: cluster/controller.h (what the lease is for), server/membership.c (the wiring).
 */
#ifndef GR_CLUSTER_CTL_LEASE_H
#define GR_CLUSTER_CTL_LEASE_H

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct gr_etcd;
struct gr_ctl_lease;

/* Back-off between failed grants (milliseconds). */
#define GR_CTL_LEASE_RETRY_MS 500

/* Called with the lease now held: a new id, or 0 (lost, released, or no longer wanted). */
typedef void gr_ctl_lease_fn(void *ctx, int64_t lease_id);

/* Returns new: the controller lease keeper, or NULL (out of memory). ttl_ms: the lease's TTL in
 * milliseconds (controller.quorum.fetch.timeout.ms), rounded up to whole seconds, at least 1 s (etcd may
 * raise it to its own minimum, 1.5 x its election timeout). Keepalives every third of the TTL (at least
 * 100 ms). loop and etcd are borrowed and must outlive it. Holds nothing until gr_ctl_lease_want(true). */
struct gr_ctl_lease *gr_ctl_lease_new(struct ev_loop *loop, struct gr_etcd *etcd, int64_t ttl_ms,
                                      gr_ctl_lease_fn *fn, void *ctx);
/* want true: grant a lease (retried every GR_CTL_LEASE_RETRY_MS until granted) and keep it alive; a lease
 * found gone is reported (0) and a new one granted. want false: the request in flight is cancelled, a held
 * lease is revoked (the controller key bound to it goes at once; not waited for) and 0 is reported. */
void gr_ctl_lease_want(struct gr_ctl_lease *cl, bool want);
/* The lease held now, 0 when none. */
int64_t gr_ctl_lease_id(const struct gr_ctl_lease *cl);
/* Leases granted since start (tests and logs). */
uint64_t gr_ctl_lease_grants(const struct gr_ctl_lease *cl);
/* Cancels any request (no callback runs afterwards; a revoke in flight may or may not reach etcd) and frees;
 * NULL ignored. */
void gr_ctl_lease_free(struct gr_ctl_lease *cl);

#endif
