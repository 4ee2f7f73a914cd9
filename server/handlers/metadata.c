/*
 * metadata.c: Metadata (key 3), v0-v13. Brokers, controller, cluster id, topics and partition states come
 * from the metadata image (cluster/image.h); each live broker through the listener the client connected
 * on, one without it left out (partition errors: fill_partition). Topic lists: v0 empty = all topics; v1+
 * null = all, empty = none. Topics are auto-created here only (auto.create.topics.enable, and the request's
 * allow_auto_topic_creation from v4; always allowed before): the creating answer is
 * UNKNOWN_TOPIC_OR_PARTITION, as KRaft Kafka answers while it creates, and the next Metadata shows the
 * partitions. Invalid names get INVALID_TOPIC_EXCEPTION. The request waits until the creation (files on the
 * I/O pool) completed, so the next Metadata shows the partitions, and gets its error code when it failed.
 * ACLs (server/acls.h): all topics = those the principal may DESCRIBE; named ones: handlers/authorize.c.
 */
#include <string.h>

#include "common/log.h"
#include "coordinator/offsets_log.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

/* The partition's node lists copied into the request (the image may change while it waits for an
   auto-creation): replicas and ISR (v0: only the reachable ones), offline replicas (the unreachable ones and
   those stored offline). Returns -1 when out of memory, 1 when v0 left a node out, else 0. */
static int fill_nodes(struct gr_req *req, struct gr_metadata_response_metadata_response_partition *rp,
                      const struct gr_image_partition *p)
{
    bool v0 = req->hdr.request_api_version == 0;
    int32_t *n = gr_arena_alloc(&req->arena, sizeof *n * ((size_t)p->replica_count * 2 + p->isr_count + 1));
    if (!n) return -1;
    int32_t nr = 0, ni = 0, k = 0;
    for (int32_t i = 0; i < p->replica_count; i++)
        if (!v0 || gr_route_endpoint(req, gr_image_replicas(p)[i], NULL)) n[nr++] = gr_image_replicas(p)[i];
    for (int32_t i = 0; i < p->isr_count; i++)
        if (!v0 || gr_route_endpoint(req, gr_image_isr(p)[i], NULL)) n[nr + ni++] = gr_image_isr(p)[i];
    int32_t *off = n + nr + ni;
    for (int32_t i = 0; i < p->replica_count; i++) {
        int32_t id = gr_image_replicas(p)[i];
        bool gone = !gr_route_endpoint(req, id, NULL); /* unknown, fenced, no listener */
        for (int32_t j = 0; j < p->offline_count && !gone; j++)
            gone = gr_image_offline(p)[j] == id;
        if (gone) off[k++] = id;
    }
    rp->replica_nodes = (struct gr_int32_array){n, nr};
    rp->isr_nodes = (struct gr_int32_array){n + nr, ni};
    rp->offline_replicas = (struct gr_int32_array){off, k};
    return nr < p->replica_count || ni < p->isr_count;
}

/* One partition from the image, as Kafka's KRaftMetadataCache: a leader unknown to the image (or -1) is
   LEADER_NOT_AVAILABLE; a leader without the request's listener LISTENER_NOT_FOUND from v6, else
   LEADER_NOT_AVAILABLE (both leader -1); v0 with a replica left out REPLICA_NOT_AVAILABLE; led here by a log
   that went offline KAFKA_STORAGE_ERROR (ISR without this node, this node offline: a local fact). */
static bool fill_partition(struct gr_req *req, struct gr_metadata_response_metadata_response_partition *rp,
                           const struct gr_image_topic *it, int32_t p)
{
    const struct gr_image_partition *ip = &it->parts[p];
    const char *listener = gr_req_listener_name(req);
    gr_metadata_response_metadata_response_partition_init(rp);
    rp->partition_index = p;
    rp->leader_id = ip->leader;
    rp->leader_epoch = ip->leader_epoch;
    int left_out = fill_nodes(req, rp, ip);
    if (left_out < 0) return false;
    const struct gr_image_broker *lb = gr_image_broker(req->broker->image, ip->leader); /* -1: none */
    if (!lb) {
        rp->error_code = GR_ERR_LEADER_NOT_AVAILABLE;
        rp->leader_id = -1;
    } else if (!gr_image_broker_listener(lb, listener, strlen(listener))) {
        rp->error_code =
            req->hdr.request_api_version >= 6 ? GR_ERR_LISTENER_NOT_FOUND : GR_ERR_LEADER_NOT_AVAILABLE;
        rp->leader_id = -1;
    } else if (left_out) {
        rp->error_code = GR_ERR_REPLICA_NOT_AVAILABLE;
    } else if (ip->leader == req->broker->image->node_id && it->local && gr_topic_log(it->local, p) &&
               gr_log_offline(gr_topic_log(it->local, p))) {
        rp->error_code = GR_ERR_KAFKA_STORAGE_ERROR; /* a local log fact: this node leaves the ISR */
        int32_t k = 0;
        for (int32_t i = 0; i < rp->isr_nodes.count; i++)
            if (rp->isr_nodes.items[i] != ip->leader) rp->isr_nodes.items[k++] = rp->isr_nodes.items[i];
        rp->isr_nodes.count = k;
        rp->offline_replicas = (struct gr_int32_array){&rp->leader_id, 1};
    }
    return true;
}

static bool fill_topic(struct gr_req *req, struct gr_metadata_response_metadata_response_topic *rt,
                       const struct gr_image_topic *it, bool want_ops)
{
    rt->error_code = GR_ERR_NONE;
    rt->name = gr_str_c(gr_arena_strndup(&req->arena, it->name, (size_t)it->name_len));
    memcpy(rt->topic_id.b, it->id, 16);
    rt->is_internal = it->internal;
    if (want_ops) rt->topic_authorized_operations = gr_topic_authorized_ops(req, it);
    int32_t n = it->partition_count;
    rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *rt->partitions.items);
    if (!rt->name.ptr || !rt->partitions.items) return false;
    rt->partitions.count = n;
    for (int32_t p = 0; p < n; p++)
        if (!fill_partition(req, &rt->partitions.items[p], it, p)) return false;
    return true;
}

/* Every live broker that has the request's listener, at that listener's advertised address. */
static bool fill_brokers(struct gr_req *req, struct gr_metadata_response *resp)
{
    const struct gr_image *img = req->broker->image;
    int32_t n = gr_image_broker_count(img);
    resp->brokers.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->brokers.items);
    if (!resp->brokers.items) return false;
    resp->brokers.count = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *rack;
        int32_t id = gr_image_broker_at(img, i)->node_id;
        const struct gr_image_listener *l = gr_route_endpoint(req, id, &rack);
        if (!l) continue; /* fenced, or without this listener: left out */
        struct gr_metadata_response_metadata_response_broker *br =
            &resp->brokers.items[resp->brokers.count++];
        gr_metadata_response_metadata_response_broker_init(br);
        br->node_id = id;
        br->host = gr_str_c(gr_arena_strndup(&req->arena, l->host, strlen(l->host)));
        br->port = l->port;
        br->rack = rack ? gr_str_c(gr_arena_strndup(&req->arena, rack, strlen(rack))) : GR_STR_NULL;
    }
    return true;
}

/* Every topic (v0 empty list, v1+ null), as KafkaApis: those the principal may not DESCRIBE left out. */
static bool fill_all(struct gr_req *req, struct gr_metadata_response *resp, bool want_ops)
{
    int32_t n = gr_image_topic_count(req->broker->image);
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return false;
    resp->topics.count = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_image_topic *it = gr_image_topic_at(req->broker->image, i);
        if (!gr_topic_describable(req, it)) continue;
        struct gr_metadata_response_metadata_response_topic *rt = &resp->topics.items[resp->topics.count++];
        gr_metadata_response_metadata_response_topic_init(rt);
        if (!fill_topic(req, rt, it, want_ops)) return false;
    }
    return true;
}

/* An auto-creation completed: the answer stays UNKNOWN_TOPIC_OR_PARTITION unless it failed otherwise. */
static void auto_created(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    (void)req;
    struct gr_metadata_response_metadata_response_topic *rt = item;
    if (res->error_code && res->error_code != GR_ERR_TOPIC_ALREADY_EXISTS) rt->error_code = res->error_code;
}

enum gr_handler_rc gr_handle_metadata(struct gr_req *req)
{
    struct gr_metadata_request *body = req->body;
    struct gr_metadata_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;

    if (!fill_brokers(req, resp)) return GR_HANDLER_CLOSE;
    resp->cluster_id = gr_str_c(b->image->cluster_id);
    resp->controller_id = b->image->controller_id;
    bool want_ops = v >= 8 && body->include_topic_authorized_operations;

    if (body->topics.count < 0 || (v == 0 && body->topics.count == 0))
        return fill_all(req, resp, want_ops) ? GR_HANDLER_DONE : GR_HANDLER_CLOSE;
    bool may_create = b->cfg.settings.auto_create_topics_enable && (v < 4 || body->allow_auto_topic_creation);
    int32_t n = body->topics.count;
    /* __consumer_offsets is created by the group coordinator's start (before anything else is submitted) */
    for (int32_t i = 0; i < n && may_create && !b->coord; i++)
        if (gr_str_eq(body->topics.items[i].name, gr_str_c(GR_OFFSETS_TOPIC)) && gr_groups_defer(req))
            return GR_HANDLER_WAIT;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->topics.items);
    resp->topics.count = n;
    for (int32_t i = 0; i < n; i++) {
        struct gr_metadata_request_metadata_request_topic *qt = &body->topics.items[i];
        struct gr_metadata_response_metadata_response_topic *rt = &resp->topics.items[i];
        gr_metadata_response_metadata_response_topic_init(rt);
        rt->name = qt->name;
        rt->topic_id = qt->topic_id;
        const struct gr_image_topic *it = gr_route_topic_by(b, qt->name.len < 0, qt->name, qt->topic_id.b);
        if ((rt->error_code = gr_metadata_topic_authorized(req, qt->name, it, may_create))) continue;
        if (it) { /* out of memory: an error, as topic operations may be pending */
            if (!fill_topic(req, rt, it, want_ops))
                *rt = (struct gr_metadata_response_metadata_response_topic){
                    .error_code = GR_ERR_UNKNOWN_SERVER_ERROR, .name = qt->name, .topic_id = qt->topic_id};
            continue;
        }
        if (qt->name.len < 0) {
            rt->error_code = GR_ERR_UNKNOWN_TOPIC_ID;
            continue;
        }
        if (!gr_topic_name_valid(qt->name) || gr_topic_name_collides(b, qt->name)) {
            rt->error_code = GR_ERR_INVALID_TOPIC_EXCEPTION;
            continue;
        }
        rt->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        int16_t err = may_create ? gr_topic_auto_create(req, qt->name, auto_created, rt) : 0;
        if (err && err != GR_ERR_TOPIC_ALREADY_EXISTS) rt->error_code = err;
    }
    return gr_req_topic_ops_wait(req, NULL);
}
