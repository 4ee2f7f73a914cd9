/* netlimits.c: byte pools and the accept episode; see netlimits.h. */
#include "server/netlimits.h"

#include <assert.h>

void gr_mempool_init(struct gr_mempool *pool, int64_t size_bytes)
{
    pool->size_bytes = size_bytes <= 0 ? INT64_MAX : size_bytes;
    pool->used_bytes = 0;
}

bool gr_mempool_try_take(struct gr_mempool *pool, int64_t bytes)
{
    assert(bytes > 0);
    if (gr_mempool_spent(pool)) return false;
    gr_mempool_take(pool, bytes);
    return true;
}

void gr_mempool_take(struct gr_mempool *pool, int64_t bytes)
{
    assert(bytes >= 0);
    assert(pool->used_bytes <= INT64_MAX - bytes);
    pool->used_bytes += bytes;
}

void gr_mempool_give(struct gr_mempool *pool, int64_t bytes)
{
    assert(bytes >= 0);
    assert(bytes <= pool->used_bytes);
    pool->used_bytes -= bytes;
}

bool gr_mempool_spent(const struct gr_mempool *pool)
{
    return pool->used_bytes >= pool->size_bytes;
}

bool gr_netlimits_may_take(int64_t conn_unsent_bytes, int64_t conn_unsent_bytes_max,
                           const struct gr_mempool *unsent_pool)
{
    if (conn_unsent_bytes >= conn_unsent_bytes_max) return false;
    return conn_unsent_bytes == 0 || !gr_mempool_spent(unsent_pool);
}

bool gr_accept_episode_fail(struct gr_accept_episode *ep, int64_t now_ms, int err)
{
    bool starts = !ep->open;
    if (starts) *ep = (struct gr_accept_episode){.open = true, .err = err, .start_ms = now_ms};
    ep->last_fail_ms = now_ms;
    ep->failures++;
    return starts;
}

void gr_accept_episode_ok(struct gr_accept_episode *ep, int64_t now_ms)
{
    if (ep->open) ep->last_ok_ms = now_ms;
}

void gr_accept_episode_refused(struct gr_accept_episode *ep)
{
    if (ep->open) ep->refused++;
}

bool gr_accept_episode_try_end(struct gr_accept_episode *ep, int64_t now_ms, int64_t quiet_ms)
{
    if (!ep->open || ep->last_ok_ms < ep->last_fail_ms || now_ms - ep->last_fail_ms < quiet_ms) return false;
    ep->open = false;
    return true;
}
