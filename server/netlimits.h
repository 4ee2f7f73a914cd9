/*
 * netlimits.h: the pure accounting behind the network's limits, kept apart from sockets so that it can be
 * unit tested (server/tests/test_netlimits.c).
 *
 * - A byte pool (struct gr_mempool) in the manner of Kafka's SimpleMemoryPool in non-strict mode: a take
 *   succeeds while anything is left (used < size), so the pool may overshoot by one take and a single take
 *   larger than the whole pool still succeeds when the pool is otherwise free; a take that fails leaves the
 *   pool unchanged. Gregor uses two: queued.max.request.bytes (request frames, reserved when the size
 *   prefix is read) and gregor.unsent.bytes.max (answers built and not yet sent).
 * - The listener's out-of-descriptors episode (struct gr_accept_episode): EMFILE/ENFILE from accept starts
 *   an episode that is logged once when it starts and once, with counts, when it ends.
 * Invariants: 0 <= used_bytes at all times (asserted); sizes <= 0 mean unbounded.
 * Read next: server/net.c.
 */
#ifndef GR_NETLIMITS_H
#define GR_NETLIMITS_H

#include <stdbool.h>
#include <stdint.h>

struct gr_mempool {
    int64_t size_bytes; /* INT64_MAX when unbounded */
    int64_t used_bytes;
};

/* Starts an empty pool of `size_bytes`; size_bytes <= 0 makes it unbounded. */
void gr_mempool_init(struct gr_mempool *pool, int64_t size_bytes);
/* Takes `bytes` (> 0) when the pool is not spent (used < size: Kafka's non-strict tryAllocate) and returns
 * true; returns false and takes nothing when it is spent. */
bool gr_mempool_try_take(struct gr_mempool *pool, int64_t bytes);
/* Takes `bytes` (>= 0) whether or not the pool is spent (memory already in use, e.g. a built answer). */
void gr_mempool_take(struct gr_mempool *pool, int64_t bytes);
/* Gives back `bytes` taken earlier (asserts that no more than was taken comes back). */
void gr_mempool_give(struct gr_mempool *pool, int64_t bytes);
/* Whether nothing is left: used >= size. */
bool gr_mempool_spent(const struct gr_mempool *pool);

/* Whether a connection may take another request, by the two answer bounds: its own unsent answer bytes
 * are below `conn_unsent_bytes_max`, and either the broker-wide unsent pool is not spent or the
 * connection has nothing unsent (so a connection that reads its answers is never stopped by others'). */
bool gr_netlimits_may_take(int64_t conn_unsent_bytes, int64_t conn_unsent_bytes_max,
                           const struct gr_mempool *unsent_pool);

/* One episode of accept failing for want of descriptors. */
struct gr_accept_episode {
    bool open;
    int err;              /* errno of the first failure (EMFILE or ENFILE) */
    int64_t start_ms;     /* monotonic */
    int64_t last_fail_ms; /* monotonic, last failure seen */
    int64_t last_ok_ms;   /* monotonic, last accept that succeeded during the episode (0: none) */
    int64_t failures;     /* accept calls that failed with EMFILE/ENFILE */
    int64_t refused;      /* connections accepted on the spare descriptor and closed at once */
};

/* Records an accept failure for want of descriptors at `now_ms`; returns true when it starts an episode
 * (the caller logs the start, once). */
bool gr_accept_episode_fail(struct gr_accept_episode *ep, int64_t now_ms, int err);
/* Records an accept that succeeded at `now_ms` during an open episode (descriptors are free again). */
void gr_accept_episode_ok(struct gr_accept_episode *ep, int64_t now_ms);
/* Counts one connection closed unserved during the episode. */
void gr_accept_episode_refused(struct gr_accept_episode *ep);
/* Ends the open episode once an accept succeeded after its last failure and no failure was seen for
 * `quiet_ms` (a listener flapping at the limit stays one episode); returns true then (the caller logs the
 * counts, read before the next episode starts), false while it goes on or when none is open. */
bool gr_accept_episode_try_end(struct gr_accept_episode *ep, int64_t now_ms, int64_t quiet_ms);

#endif
