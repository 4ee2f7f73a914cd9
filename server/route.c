/*
 * route.c: partition routing from the metadata image and the leader hints of Produce and Fetch
 * (server/route.h). Read next: server/handlers/produce.c, server/handlers/fetch.c.
 */
#include <stdlib.h>
#include <string.h>

#include "protocol/errors.h"
#include "server/route.h"
#include "storage/store.h"

int16_t gr_route_partition(const struct gr_broker *b, const struct gr_image_topic *it, int32_t partition,
                           bool by_id, struct gr_route *r)
{
    *r = (struct gr_route){NULL, NULL, -1, -1, false};
    if (!it) return by_id ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    const struct gr_image_partition *p = gr_image_partition(it, partition);
    if (!p) return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    r->leader_id = p->leader;
    r->leader_epoch = p->leader_epoch;
    if (p->leader != b->image->node_id || b->image->self_fenced) return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    r->log = it->local ? gr_topic_log(it->local, partition) : NULL;
    if (!r->log) {
        r->pending = true; /* led here, the replica manager has not made its log yet */
        return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    }
    r->topic = it->local;
    return GR_ERR_NONE;
}

/* Whether the waiter of (topic id, partition) may stop waiting: its route is no longer pending. */
static bool route_settled(void *ctx, const uint8_t topic_id[16], int32_t partition)
{
    struct gr_broker *b = ctx;
    struct gr_route r;
    gr_route_partition(b, gr_image_topic_find_id(b->image, topic_id), partition, true, &r);
    return !r.pending;
}

int gr_route_logwaits_settle(struct gr_broker *b)
{
    return b->logwaits.count > 0 ? gr_logwait_signal_where(&b->logwaits, route_settled, b) : 0;
}

const struct gr_image_listener *gr_route_endpoint(const struct gr_req *req, int32_t node_id,
                                                  const char **rack)
{
    if (rack) *rack = NULL;
    const struct gr_image_broker *br = node_id >= 0 ? gr_image_broker(req->broker->image, node_id) : NULL;
    if (!br || br->fenced) return NULL;
    const char *name = gr_req_listener_name(req);
    const struct gr_image_listener *l = gr_image_broker_listener(br, name, strlen(name));
    if (l && rack && br->has_rack) *rack = br->rack;
    return l;
}

void gr_route_produce_leader(const struct gr_req *req,
                             struct gr_produce_response_partition_produce_response *pr,
                             const struct gr_route *r)
{
    if (req->hdr.request_api_version < 10 || pr->error_code != GR_ERR_NOT_LEADER_OR_FOLLOWER) return;
    pr->current_leader.leader_id = r->leader_id;
    pr->current_leader.leader_epoch = r->leader_epoch;
}

void gr_route_fetch_leader(const struct gr_req *req, struct gr_fetch_response_partition_data *rp,
                           const struct gr_route *r)
{
    if (req->hdr.request_api_version < 12) return;
    if (rp->error_code != GR_ERR_NOT_LEADER_OR_FOLLOWER && rp->error_code != GR_ERR_FENCED_LEADER_EPOCH)
        return;
    rp->current_leader.leader_id = r->leader_id;
    rp->current_leader.leader_epoch = r->leader_epoch;
}

bool gr_route_fetch_pending(struct gr_fetch_response_partition_data *rp, const struct gr_route *r)
{
    if (!r->pending) return false;
    rp->error_code = GR_ERR_NONE;
    rp->high_watermark = rp->last_stable_offset = rp->log_start_offset = 0;
    return true;
}

/* gr_route_fetch_wait on partition `partition` of `it`. */
static void fetch_wait_partition(struct gr_req *req, const struct gr_image_topic *it, int32_t partition,
                                 enum gr_fetch_isolation iso)
{
    struct gr_route r;
    if (!gr_route_partition(req->broker, it, partition, false, &r))
        gr_req_wait_data(req, r.log, iso);
    else if (r.pending)
        gr_req_wait_log_data(req, it->id, partition, iso);
}

void gr_route_fetch_wait(struct gr_req *req, enum gr_fetch_isolation iso)
{
    const struct gr_fetch_request *body = req->body;
    bool by_id = req->hdr.request_api_version >= 13;
    for (int32_t i = 0; i < body->topics.count; i++) {
        const struct gr_fetch_request_fetch_topic *qt = &body->topics.items[i];
        const struct gr_image_topic *it = gr_route_topic_by(req->broker, by_id, qt->topic, qt->topic_id.b);
        for (int32_t p = 0; it && p < qt->partitions.count; p++)
            fetch_wait_partition(req, it, qt->partitions.items[p].partition, iso);
    }
}

static int cmp_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The distinct leaders of leaders[0..n) that have an endpoint on the request's listener, compacted in
   place in node id order (sorted: O(n log n) however many partitions and brokers); returns their count. */
static int32_t distinct_reachable(const struct gr_req *req, int32_t *leaders, int32_t n)
{
    qsort(leaders, (size_t)n, sizeof *leaders, cmp_id);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if ((i == 0 || leaders[i] != leaders[i - 1]) && gr_route_endpoint(req, leaders[i], NULL))
            leaders[k++] = leaders[i];
    return k;
}

/* One endpoint, as both APIs' NodeEndpoint entries hold it. */
struct endpoint {
    int32_t node_id;
    struct gr_str host;
    int32_t port;
    struct gr_str rack;
};

static struct endpoint endpoint_of(const struct gr_req *req, int32_t node_id)
{
    const char *rack;
    const struct gr_image_listener *l = gr_route_endpoint(req, node_id, &rack);
    return (struct endpoint){node_id, gr_str_c(l->host), l->port, rack ? gr_str_c(rack) : GR_STR_NULL};
}

/* Leaders named by a response's CurrentLeader fields: their ids (arena), made distinct and reachable. */
struct leaders {
    int32_t *ids;
    int32_t n;
};

/* Gathers `n` ids >= 0 (counted by the caller: nothing is allocated when there are none); `next` yields the
   leader id of partition k of the response in turn. */
static struct leaders leaders_collect(const struct gr_req *req, struct gr_arena *arena, int32_t n,
                                      int32_t (*next)(const void *resp, int32_t *t, int32_t *p),
                                      const void *resp)
{
    struct leaders ls = {n ? gr_arena_alloc(arena, sizeof *ls.ids * (size_t)n) : NULL, 0};
    int32_t t = 0, p = 0, id;
    while (ls.ids && ls.n < n && (id = next(resp, &t, &p)) != INT32_MIN)
        if (id >= 0) ls.ids[ls.n++] = id;
    if (ls.ids) ls.n = distinct_reachable(req, ls.ids, ls.n);
    return ls;
}

/* The next partition's CurrentLeader id of a Produce response (t, p: the cursor), INT32_MIN at the end. */
static int32_t produce_next(const void *r, int32_t *t, int32_t *p)
{
    const struct gr_produce_response *resp = r;
    for (; *t < resp->responses.count; (*t)++, *p = 0)
        if (*p < resp->responses.items[*t].partition_responses.count)
            return resp->responses.items[*t].partition_responses.items[(*p)++].current_leader.leader_id;
    return INT32_MIN;
}

static int32_t fetch_next(const void *r, int32_t *t, int32_t *p)
{
    const struct gr_fetch_response *resp = r;
    for (; *t < resp->responses.count; (*t)++, *p = 0)
        if (*p < resp->responses.items[*t].partitions.count)
            return resp->responses.items[*t].partitions.items[(*p)++].current_leader.leader_id;
    return INT32_MIN;
}

/* How many partitions name a leader (a first pass, so that a response without any allocates nothing). */
static int32_t count_named(int32_t (*next)(const void *resp, int32_t *t, int32_t *p), const void *resp)
{
    int32_t t = 0, p = 0, id, n = 0;
    while ((id = next(resp, &t, &p)) != INT32_MIN)
        n += id >= 0;
    return n;
}

void gr_route_produce_endpoints(struct gr_req *req)
{
    struct gr_produce_response *resp = req->resp;
    if (req->hdr.request_api_version < 10) return;
    struct leaders ls =
        leaders_collect(req, &req->arena, count_named(produce_next, resp), produce_next, resp);
    resp->node_endpoints.count = 0;
    if (ls.n == 0) return;
    resp->node_endpoints.items =
        gr_arena_calloc(&req->arena, (size_t)ls.n, sizeof *resp->node_endpoints.items);
    if (!resp->node_endpoints.items) return;
    resp->node_endpoints.count = ls.n;
    for (int32_t i = 0; i < ls.n; i++) {
        struct gr_produce_response_node_endpoint *e = &resp->node_endpoints.items[i];
        gr_produce_response_node_endpoint_init(e);
        struct endpoint ep = endpoint_of(req, ls.ids[i]);
        e->node_id = ep.node_id;
        e->host = ep.host;
        e->port = ep.port;
        e->rack = ep.rack;
    }
}

void gr_route_fetch_endpoints(struct gr_req *req)
{
    struct gr_fetch_response *resp = req->resp;
    if (req->hdr.request_api_version < 16) return;
    struct leaders ls = leaders_collect(req, &req->arena, count_named(fetch_next, resp), fetch_next, resp);
    resp->node_endpoints.count = 0;
    if (ls.n == 0) return;
    resp->node_endpoints.items =
        gr_arena_calloc(&req->arena, (size_t)ls.n, sizeof *resp->node_endpoints.items);
    if (!resp->node_endpoints.items) return;
    resp->node_endpoints.count = ls.n;
    for (int32_t i = 0; i < ls.n; i++) {
        struct gr_fetch_response_node_endpoint *e = &resp->node_endpoints.items[i];
        gr_fetch_response_node_endpoint_init(e);
        struct endpoint ep = endpoint_of(req, ls.ids[i]);
        e->node_id = ep.node_id;
        e->host = ep.host;
        e->port = ep.port;
        e->rack = ep.rack;
    }
}
