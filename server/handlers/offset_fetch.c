/*
 * offset_fetch.c: OffsetFetch (key 9), v1-10. v1-7 name one group (topics null from v2 = every committed
 * partition); v8+ a batch of groups; v10 names topics by id (KIP-848): an id no topic has answers its
 * partitions UNKNOWN_TOPIC_ID with offset -1, as Kafka 4.4, and "every committed partition" lists the
 * topics that exist, with their ids (offsets are stored by name; a topic gone has no id to name it by). A
 * partition with no committed offset (or an unknown group) answers offset -1, leader epoch -1, metadata ""
 * and error 0, as Kafka does; the committed leader epoch is carried from v5. require_stable (v7+, KIP-447):
 * a partition with a transactional commit waiting for its marker answers UNSTABLE_OFFSET_COMMIT with offset
 * -1, named or listed among every committed partition (Kafka's OffsetMetadataManager.fetchOffsets /
 * fetchAllOffsets); without it the last committed value. Views of the coordinator's strings are referenced,
 * not copied: the response is encoded as soon as this returns. ACLs (KafkaApis): DESCRIBE on the group, else
 * GROUP_AUTHORIZATION_FAILED; named topics without DESCRIBE come last, TOPIC_AUTHORIZATION_FAILED, offset -1;
 * "every committed partition" hides them. Read next: coordinator/offsets.c.
 */
#include "coordinator/coordinator.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

typedef struct gr_offset_fetch_response_offset_fetch_response_topics topics_t;
typedef struct gr_offset_fetch_response_offset_fetch_response_partitions parts_t;

/* The v8+ shapes are built first; versions below 8 are copied into the older structs at the end. */
struct all_ctx {
    struct gr_req *req;
    struct gr_str group_id;
    bool require_stable, fail;
    topics_t *topics;
    int32_t topic_count, topic_cap;
};

static void add_committed(void *ctx, const char *topic, int32_t partition, int64_t offset,
                          int32_t leader_epoch, struct gr_str metadata)
{
    struct all_ctx *a = ctx;
    if (a->fail) return;
    topics_t *t = a->topic_count ? &a->topics[a->topic_count - 1] : NULL;
    if (!gr_req_authorized_c(a->req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, topic)) return; /* hidden */
    if (!t || !gr_str_eq_c(t->name, topic)) {
        const struct gr_image_topic *live = NULL;
        if (a->req->hdr.request_api_version >= 10 &&
            !(live = gr_image_topic_find(a->req->broker->image, topic, strlen(topic))))
            return; /* v10 names topics by id: a topic that no longer exists has none */
        if (a->topic_count == a->topic_cap) {
            int32_t cap = a->topic_cap ? 2 * a->topic_cap : 8;
            topics_t *n = gr_arena_calloc(&a->req->arena, (size_t)cap, sizeof *n);
            if (!n) {
                a->fail = true;
                return;
            }
            if (a->topic_count) memcpy(n, a->topics, (size_t)a->topic_count * sizeof *n);
            a->topics = n;
            a->topic_cap = cap;
        }
        t = &a->topics[a->topic_count++];
        gr_offset_fetch_response_offset_fetch_response_topics_init(t);
        t->name = gr_str_c(topic);
        if (live) memcpy(t->topic_id.b, live->id, 16);
        t->partitions.count = 0;
        t->partitions.items = NULL;
    }
    /* partitions grow by doubling inside the arena (old arrays are left behind: bounded by 2x) */
    int32_t n = t->partitions.count;
    if ((n & (n - 1)) == 0) {
        int32_t cap = n ? 2 * n : 4;
        parts_t *p = gr_arena_calloc(&a->req->arena, (size_t)cap, sizeof *p);
        if (!p) {
            a->fail = true;
            return;
        }
        if (n) memcpy(p, t->partitions.items, (size_t)n * sizeof *p);
        t->partitions.items = p;
    }
    parts_t *p = &t->partitions.items[t->partitions.count++];
    gr_offset_fetch_response_offset_fetch_response_partitions_init(p);
    p->partition_index = partition;
    bool unstable =
        a->require_stable && gr_coord_offset_pending(a->req->broker->coord, a->group_id, t->name, partition);
    p->error_code = unstable ? GR_ERR_UNSTABLE_OFFSET_COMMIT : GR_ERR_NONE;
    p->committed_offset = unstable ? -1 : offset;
    p->committed_leader_epoch = unstable ? -1 : leader_epoch;
    p->metadata = unstable ? gr_str_c("") : metadata;
}

/* One group: topics NULL (count -1) = everything committed. Returns false when out of request memory. */
static bool fetch_group(struct gr_req *req, struct gr_str group_id, bool require_stable,
                        const struct gr_offset_fetch_request_offset_fetch_request_topics *rts, int32_t nrt,
                        struct gr_offset_fetch_response_offset_fetch_response_group *out)
{
    struct gr_coordinator *c = req->broker->coord;
    gr_offset_fetch_response_offset_fetch_response_group_init(out);
    out->group_id = group_id;
    out->error_code = !gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP, group_id)
                          ? GR_ERR_GROUP_AUTHORIZATION_FAILED
                      : !c ? GR_ERR_COORDINATOR_NOT_AVAILABLE
                           : gr_coord_check(c, group_id); /* not coordinated here, or loading */
    if (out->error_code) return true;
    if (nrt < 0) {
        struct all_ctx a = {req, group_id, require_stable, false, NULL, 0, 0};
        gr_coord_offsets_foreach(c, group_id, add_committed, &a);
        if (a.fail) return false;
        out->topics.items = a.topics;
        out->topics.count = a.topic_count;
        return true;
    }
    out->topics.items = gr_arena_calloc(&req->arena, (size_t)nrt + 1, sizeof *out->topics.items);
    if (!out->topics.items) return false;
    out->topics.count = 0;
    for (int32_t k = 0; k < 2 * nrt; k++) { /* the describable topics, then the others (KafkaApis) */
        int32_t i = k % nrt;
        bool by_id = req->hdr.request_api_version >= 10;
        const struct gr_image_topic *live = by_id ? gr_route_topic_id(req->broker, rts[i].topic_id.b) : NULL;
        struct gr_str name = live ? (struct gr_str){live->name, live->name_len} : rts[i].name;
        int16_t topic_error = by_id && !live ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_NONE;
        bool denied = !topic_error && !gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, name);
        if (denied != (k >= nrt)) continue;
        if (denied) topic_error = GR_ERR_TOPIC_AUTHORIZATION_FAILED;
        topics_t *t = &out->topics.items[out->topics.count++];
        gr_offset_fetch_response_offset_fetch_response_topics_init(t);
        t->name = name;
        t->topic_id = rts[i].topic_id;
        int32_t np = rts[i].partition_indexes.count > 0 ? rts[i].partition_indexes.count : 0;
        t->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *t->partitions.items);
        if (!t->partitions.items) return false;
        t->partitions.count = np;
        for (int32_t j = 0; j < np; j++) {
            parts_t *p = &t->partitions.items[j];
            gr_offset_fetch_response_offset_fetch_response_partitions_init(p);
            p->partition_index = rts[i].partition_indexes.items[j];
            int64_t off = -1;
            int32_t epoch = -1;
            struct gr_str md = gr_str_c("");
            p->error_code = topic_error ? topic_error
                                        : gr_coord_offset_fetch(c, group_id, t->name, p->partition_index,
                                                                require_stable, &off, &epoch, &md);
            p->committed_offset = off;
            p->committed_leader_epoch = epoch;
            p->metadata = md;
        }
    }
    return true;
}

enum gr_handler_rc gr_handle_offset_fetch(struct gr_req *req)
{
    struct gr_offset_fetch_request *body = req->body;
    struct gr_offset_fetch_response *resp = req->resp;
    int16_t v = req->hdr.request_api_version;
    if (v >= 8) {
        int32_t ng = body->groups.count > 0 ? body->groups.count : 0;
        resp->groups.items = gr_arena_calloc(&req->arena, (size_t)ng + 1, sizeof *resp->groups.items);
        if (!resp->groups.items) return GR_HANDLER_CLOSE;
        resp->groups.count = ng;
        for (int32_t i = 0; i < ng; i++) {
            struct gr_offset_fetch_request_offset_fetch_request_group *g = &body->groups.items[i];
            if (!fetch_group(req, g->group_id, body->require_stable, g->topics.items, g->topics.count,
                             &resp->groups.items[i]))
                return GR_HANDLER_CLOSE;
        }
        return GR_HANDLER_DONE;
    }
    /* v1-7: one group, in the older topic/partition structs */
    int32_t nrt = body->topics.count;
    struct gr_offset_fetch_request_offset_fetch_request_topics *rts =
        gr_arena_calloc(&req->arena, (size_t)(nrt > 0 ? nrt : 0) + 1, sizeof *rts);
    if (!rts) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < nrt; i++) {
        gr_offset_fetch_request_offset_fetch_request_topics_init(&rts[i]);
        rts[i].name = body->topics.items[i].name;
        rts[i].partition_indexes = body->topics.items[i].partition_indexes;
    }
    struct gr_offset_fetch_response_offset_fetch_response_group g;
    if (!fetch_group(req, body->group_id, v >= 7 && body->require_stable, rts, nrt < 0 ? -1 : nrt, &g))
        return GR_HANDLER_CLOSE;
    resp->error_code = g.error_code;
    int32_t nt = g.topics.count > 0 ? g.topics.count : 0;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return GR_HANDLER_CLOSE;
    resp->topics.count = nt;
    for (int32_t i = 0; i < nt; i++) {
        struct gr_offset_fetch_response_offset_fetch_response_topic *t = &resp->topics.items[i];
        gr_offset_fetch_response_offset_fetch_response_topic_init(t);
        t->name = g.topics.items[i].name;
        int32_t np = g.topics.items[i].partitions.count;
        t->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *t->partitions.items);
        if (!t->partitions.items) return GR_HANDLER_CLOSE;
        t->partitions.count = np;
        for (int32_t j = 0; j < np; j++) {
            parts_t *src = &g.topics.items[i].partitions.items[j];
            struct gr_offset_fetch_response_offset_fetch_response_partition *p = &t->partitions.items[j];
            gr_offset_fetch_response_offset_fetch_response_partition_init(p);
            p->partition_index = src->partition_index;
            p->committed_offset = src->committed_offset;
            p->committed_leader_epoch = src->committed_leader_epoch;
            p->metadata = src->metadata;
            p->error_code = src->error_code;
        }
    }
    return GR_HANDLER_DONE; /* v1 has no top-level error: Kafka puts it on every partition (none here) */
}
