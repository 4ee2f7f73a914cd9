/*
 * offset_commit.c: OffsetCommit (key 8), v2-10. Partitions of unknown topics (or beyond a topic's
 * partition count) get UNKNOWN_TOPIC_OR_PARTITION and never reach the coordinator, as in KafkaApis; v10
 * names topics by id (KIP-848), and an id no topic has (the zero id too) is UNKNOWN_TOPIC_ID for each of
 * its partitions, as Kafka 4.4 answers; the commit itself is stored by topic name, as before. The
 * rest are validated against the group (ClassicGroup.validateOffsetCommit: generation, member, state),
 * written to __consumer_offsets and applied. The answer waits until the commit is committed (the offsets
 * partition's visible offset passes it: with gregor.acks.all.fsync, the default, once its fdatasync covers
 * the commit; partition/partition.h gr_partition_wait_committed); after offsets.commit.timeout.ms (5 s,
 * Kafka's default) the not-yet-durable partitions get COORDINATOR_NOT_AVAILABLE (Kafka maps a write timeout
 * so), and NOT_COORDINATOR if the partition went offline or this broker became its follower meanwhile
 * (gr_partition_produce_acked; gr_coord_write_error maps as Kafka 4's coordinator runtime). Without the fsync
 * setting the visible offset is the log end offset: the answer follows the append (Kafka's page-cache
 * behaviour). The committed values are visible to OffsetFetch as soon as they are appended. v2-4 carry
 * retention_time_ms (kept as the record's expire timestamp when not -1); v7+ group.instance.id. ACLs: READ
 * on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED). Read next:
 * coordinator/offsets.c (gr_coord_commit).
 */
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "server/acls.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

#define OFFSET_COMMIT_TIMEOUT_MS 5000 /* Kafka's offsets.commit.timeout.ms default */

typedef struct gr_offset_commit_response_offset_commit_response_partition resp_partition;

struct commit_state {
    int32_t partition;  /* of __consumer_offsets */
    int64_t end_offset; /* durable from here */
    struct gr_commit_partition *cps;
    resp_partition **dst;
    int32_t count;
};

static void copy_errors(struct commit_state *st, int16_t unresolved)
{
    for (int32_t i = 0; i < st->count; i++) {
        int16_t e = st->cps[i].error_code;
        st->dst[i]->error_code = e == GR_ERR_NONE && unresolved ? unresolved : e;
    }
}

/* The offsets partition's log, or NULL when the coordinator is gone. */
static struct gr_log *commit_log(struct gr_req *req, const struct commit_state *st)
{
    struct gr_offsets_log *ol = gr_groups_offsets_log(req->broker);
    return ol ? gr_offsets_log_log(ol, st->partition) : NULL;
}

static bool commit_recheck(struct gr_req *req)
{
    struct commit_state *st = req->hstate;
    struct gr_log *log = commit_log(req, st);
    int16_t err = GR_ERR_NOT_LEADER_OR_FOLLOWER; /* the coordinator is gone */
    /* Kafka 4's runtime: the write is acked once the high watermark passes it; a coordinator that lost the
       partition meanwhile (a follower now: its log may have been truncated under the commit) or whose log
       went offline fails it */
    if (log && gr_partition_produce_acked(gr_broker_partition(req->broker, log), st->end_offset, &err))
        return false;
    if (err == GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        err = GR_ERR_NONE; /* written with acks=1 (no min ISR) */
    copy_errors(st, gr_coord_write_error(err));
    gr_req_finish(req);
    return true;
}

static void commit_expire(struct gr_req *req)
{
    copy_errors(req->hstate, gr_coord_write_error(GR_ERR_REQUEST_TIMED_OUT));
    gr_req_finish(req);
}

/* Hands the request's valid partitions (`nct` topics) to the group coordinator: st->partition and
 * st->end_offset get where the commit was appended (end_offset < 0: answered at once, nothing to wait for).
 */
static void commit_send(struct gr_req *req, struct commit_state *st, struct gr_commit_topic *cts, int32_t nct)
{
    struct gr_offset_commit_request *body = req->body;
    int16_t v = req->hdr.request_api_version;
    struct gr_commit_params p = {
        .group_id = body->group_id,
        .member_id = body->member_id,
        .group_instance_id = v >= 7 ? body->group_instance_id : GR_STR_NULL,
        .generation_id = body->generation_id_or_member_epoch,
        .retention_time_ms = v <= 4 ? body->retention_time_ms : -1,
        .api_version = v,
        .topics = cts,
        .topic_count = nct,
    };
    gr_coord_commit(req->broker->coord, &p, &st->partition, &st->end_offset);
}

/* The request's partition count (negative counts as 0). */
static int32_t commit_total(const struct gr_offset_commit_request *body)
{
    int32_t total = 0;
    for (int32_t i = 0; i < body->topics.count; i++)
        total += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    return total;
}

/* KafkaApis' checks: READ on the group (else GROUP_AUTHORIZATION_FAILED), then READ on the topic
   (TOPIC_AUTHORIZATION_FAILED, before existence; an unknown v10 id stays UNKNOWN_TOPIC_ID). */
static int16_t commit_denied(struct gr_req *req, const struct gr_image_topic *t, struct gr_str name)
{
    struct gr_offset_commit_request *body = req->body;
    if (!gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, body->group_id))
        return GR_ERR_GROUP_AUTHORIZATION_FAILED;
    if ((t || req->hdr.request_api_version < 10) &&
        !gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, name))
        return GR_ERR_TOPIC_AUTHORIZATION_FAILED;
    return GR_ERR_NONE;
}

enum gr_handler_rc gr_handle_offset_commit(struct gr_req *req)
{
    struct gr_offset_commit_request *body = req->body;
    struct gr_offset_commit_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    int32_t total = commit_total(body);
    struct commit_state *st = gr_arena_alloc(&req->arena, sizeof *st);
    struct gr_commit_topic *cts = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *cts);
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *resp->topics.items);
    if (!st || !cts || !resp->topics.items) return GR_HANDLER_CLOSE;
    st->cps = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->cps);
    st->dst = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->dst);
    if (!st->cps || !st->dst) return GR_HANDLER_CLOSE;
    resp->topics.count = ntopics;
    int32_t k = 0, nct = 0;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_offset_commit_request_offset_commit_request_topic *rt = &body->topics.items[i];
        struct gr_offset_commit_response_offset_commit_response_topic *tr = &resp->topics.items[i];
        gr_offset_commit_response_offset_commit_response_topic_init(tr);
        tr->name = rt->name;
        tr->topic_id = rt->topic_id;
        int32_t np = rt->partitions.count > 0 ? rt->partitions.count : 0;
        tr->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *tr->partitions.items);
        if (!tr->partitions.items) return GR_HANDLER_CLOSE;
        tr->partitions.count = np;
        /* the image's topics: a coordinator may hold none of the topic's partitions */
        const struct gr_image_topic *t =
            v >= 10 ? gr_route_topic_id(b, rt->topic_id.b) : gr_route_topic(b, rt->name);
        struct gr_str name = t ? (struct gr_str){t->name, t->name_len} : rt->name;
        int32_t first = k, deny = commit_denied(req, t, name);
        for (int32_t j = 0; j < np; j++) {
            struct gr_offset_commit_request_offset_commit_request_partition *rp = &rt->partitions.items[j];
            resp_partition *pr = &tr->partitions.items[j];
            gr_offset_commit_response_offset_commit_response_partition_init(pr);
            pr->partition_index = rp->partition_index;
            if ((pr->error_code = (int16_t)deny)) continue;
            if (!t || rp->partition_index < 0 || rp->partition_index >= t->partition_count) {
                pr->error_code = !t && v >= 10 ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            if (!b->coord) {
                pr->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
                continue;
            }
            st->cps[k] = (struct gr_commit_partition){rp->partition_index, rp->committed_offset,
                                                      v >= 6 ? rp->committed_leader_epoch : -1,
                                                      rp->committed_metadata, 0};
            st->dst[k++] = pr;
        }
        if (k > first) cts[nct++] = (struct gr_commit_topic){name, &st->cps[first], k - first};
    }
    st->count = k;
    if (k == 0) return GR_HANDLER_DONE;
    commit_send(req, st, cts, nct);
    if (st->end_offset < 0) {
        copy_errors(st, GR_ERR_NONE);
        return GR_HANDLER_DONE;
    }
    req->hstate = st;
    gr_req_await(req, &(struct gr_await){.recheck = commit_recheck,
                                         .expire = commit_expire,
                                         .timeout_ms = OFFSET_COMMIT_TIMEOUT_MS});
    if (commit_recheck(req)) return GR_HANDLER_WAIT; /* already committed: finished inside */
    /* until committed: re-checked once the offsets partition's visible offset passes the commit */
    if (gr_req_wait_committed(req, commit_log(req, st), st->end_offset) == 0) commit_recheck(req);
    return GR_HANDLER_WAIT;
}
