/*
 * elect_leaders.c: ElectLeaders (key 43, v0-2; ControllerApis handleElectLeaders, ReplicationControlManager
 * electLeaders). Types PREFERRED (0, v0's only) and UNCLEAN (1), else INVALID_REQUEST at the top. In a
 * cluster only the controller's broker answers, others NOT_CONTROLLER (cluster/controller.h
 * gr_controller_elect). Per partition (gr_controller_elect_check): UNKNOWN_TOPIC_OR_PARTITION,
 * ELECTION_NOT_NEEDED (80, 83 as below), INVALID_REQUEST when named again; the rest are asked of the
 * controller and answered once the image shows them elected (NONE), no longer electable
 * (PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE), or at timeout_ms (REQUEST_TIMED_OUT).
 * topic_partitions null: every topic, with only partition results other than ELECTION_NOT_NEEDED (Kafka). One
 * node: its only replica leads, so ELECTION_NOT_NEEDED. ACLs: ALTER on the cluster, else
 * CLUSTER_AUTHORIZATION_FAILED at the top and on every named partition.
 */
#include <string.h>

#include "cluster/controller.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"

struct elect_state {
    int type;
    int32_t n;                                                   /* partitions asked of the controller */
    struct gr_elect_leaders_response_partition_result **results; /* n: each one's entry in the answer */
    struct gr_controller_elect_part *parts;                      /* n */
    struct gr_controller_elect_req *ask;                         /* NULL once answered or withdrawn */
    bool expired;
};
static const char state_key;

/* Kafka's error code for each enum gr_elect_check. */
static const int16_t check_errors[] = {GR_ERR_NONE, GR_ERR_ELECTION_NOT_NEEDED,
                                       GR_ERR_PREFERRED_LEADER_NOT_AVAILABLE,
                                       GR_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE};
#define check_error(c) check_errors[(c)]

/* The outcome of an asked partition from the image, after the controller's answer or the deadline. */
static int16_t outcome(struct gr_req *req, const struct elect_state *s,
                       const struct gr_controller_elect_part *a)
{
    const struct gr_image_topic *t = gr_image_topic_find_id(req->broker->image, a->topic_id);
    const struct gr_image_partition *p = t ? gr_image_partition(t, a->partition) : NULL;
    if (!p) return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    bool unclean = s->type == GR_ELECTION_UNCLEAN;
    if (unclean ? p->leader >= 0 : p->replica_count > 0 && p->leader == gr_image_replicas(p)[0])
        return GR_ERR_NONE;
    if (s->expired) return GR_ERR_REQUEST_TIMED_OUT;
    return unclean ? GR_ERR_ELIGIBLE_LEADERS_NOT_AVAILABLE : GR_ERR_PREFERRED_LEADER_NOT_AVAILABLE;
}

static enum gr_handler_rc finish(struct gr_req *req)
{
    struct elect_state *s = gr_req_state(req, &state_key);
    for (int32_t i = 0; i < s->n; i++) {
        int16_t err = outcome(req, s, &s->parts[i]);
        s->results[i]->error_code = err;
        s->results[i]->error_message = err ? gr_str_c(gr_error_message(err)) : GR_STR_NULL;
    }
    return GR_HANDLER_DONE;
}

static void on_elected(void *ctx)
{
    struct gr_req *req = ctx;
    struct elect_state *s = gr_req_state(req, &state_key);
    s->ask = NULL; /* the controller freed it */
    gr_req_verified(req);
}

static void withdraw(struct gr_req *req)
{
    struct elect_state *s = gr_req_state(req, &state_key);
    if (s->ask) gr_controller_elect_cancel(req->broker->controller, s->ask);
    s->ask = NULL;
    s->expired = true;
}

/* One partition's result (rp); notes an election to ask (NONE, not yet final) in s. */
static void one(struct gr_req *req, struct elect_state *s, const struct gr_image_topic *it, int32_t index,
                bool repeated, bool denied, struct gr_elect_leaders_response_partition_result *rp)
{
    gr_elect_leaders_response_partition_result_init(rp);
    rp->partition_id = index;
    const struct gr_image_partition *p = it && index >= 0 ? gr_image_partition(it, index) : NULL;
    int16_t err = denied     ? GR_ERR_CLUSTER_AUTHORIZATION_FAILED
                  : !p       ? GR_ERR_UNKNOWN_TOPIC_OR_PARTITION
                  : repeated ? GR_ERR_INVALID_REQUEST
                             : check_error(gr_controller_elect_check(req->broker->image, p, s->type));
    if (err == GR_ERR_NONE) {
        struct gr_controller_elect_part *a = &s->parts[s->n];
        memcpy(a->topic_id, it->id, 16);
        a->partition = index;
        a->leader_epoch = p->leader_epoch;
        s->results[s->n++] = rp;
    }
    rp->error_code = err;
    rp->error_message = err ? gr_str_c(gr_error_message(err)) : GR_STR_NULL;
}

/* The named partitions: one result entry per topic entry; a partition named again (first[k] != k: the same
 * topic name and index earlier in the request) gets INVALID_REQUEST. */
static bool named(struct gr_req *req, struct elect_state *s, bool denied, int64_t n)
{
    struct gr_elect_leaders_request *body = req->body;
    struct gr_elect_leaders_response *resp = req->resp;
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    bool *repeated = NULL;
    int32_t *first = NULL;
    int32_t k = 0;
    for (int32_t i = 0; keys && i < body->topic_partitions.count; i++)
        for (int32_t j = 0; j < body->topic_partitions.items[i].partitions.count; j++, k++)
            keys[k] = (struct gr_req_key){body->topic_partitions.items[i].topic,
                                          body->topic_partitions.items[i].partitions.items[j], k};
    if (!keys || !(first = gr_req_keys_first(req, keys, (int32_t)n, &repeated))) return false;
    k = 0;
    for (int32_t i = 0; i < body->topic_partitions.count; i++) {
        const struct gr_elect_leaders_request_topic_partitions *qt = &body->topic_partitions.items[i];
        struct gr_elect_leaders_response_replica_election_result *rt =
            &resp->replica_election_results.items[i];
        gr_elect_leaders_response_replica_election_result_init(rt);
        rt->topic = qt->topic;
        int32_t np = qt->partitions.count > 0 ? qt->partitions.count : 0;
        rt->partition_result.items =
            gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partition_result.items);
        if (!rt->partition_result.items) return false;
        rt->partition_result.count = np;
        const struct gr_image_topic *it = gr_route_topic(req->broker, qt->topic);
        for (int32_t j = 0; j < np; j++, k++)
            one(req, s, it, qt->partitions.items[j], first[k] != k, denied, &rt->partition_result.items[j]);
    }
    resp->replica_election_results.count = body->topic_partitions.count;
    return true;
}

/* Every partition (topic_partitions null): every topic, listing only the partitions whose result is not
 * ELECTION_NOT_NEEDED (ReplicationControlManager.electLeaders). */
static bool every(struct gr_req *req, struct elect_state *s)
{
    struct gr_elect_leaders_response *resp = req->resp;
    const struct gr_image *img = req->broker->image;
    for (int32_t i = 0; i < gr_image_topic_count(img); i++) {
        const struct gr_image_topic *it = gr_image_topic_at(img, i);
        struct gr_elect_leaders_response_replica_election_result *rt =
            &resp->replica_election_results.items[i];
        gr_elect_leaders_response_replica_election_result_init(rt);
        rt->topic = (struct gr_str){.ptr = it->name, .len = it->name_len};
        rt->partition_result.items =
            gr_arena_calloc(&req->arena, (size_t)it->partition_count + 1, sizeof *rt->partition_result.items);
        if (!rt->partition_result.items) return false;
        int32_t kept = 0;
        for (int32_t j = 0; j < it->partition_count; j++) {
            one(req, s, it, j, false, false, &rt->partition_result.items[kept]);
            kept += rt->partition_result.items[kept].error_code != GR_ERR_ELECTION_NOT_NEEDED;
        }
        rt->partition_result.count = kept;
    }
    resp->replica_election_results.count = gr_image_topic_count(img);
    return true;
}

enum gr_handler_rc gr_handle_elect_leaders(struct gr_req *req)
{
    struct gr_elect_leaders_request *body = req->body;
    struct gr_elect_leaders_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    bool all = body->topic_partitions.count < 0;
    int type = req->hdr.request_api_version >= 1 ? body->election_type : GR_ELECTION_PREFERRED;
    bool denied = !gr_req_authorized_cluster(req, GR_ACL_OP_ALTER);
    if (type != GR_ELECTION_PREFERRED && type != GR_ELECTION_UNCLEAN)
        resp->error_code = GR_ERR_INVALID_REQUEST;
    else if (denied)
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
    else if (b->member && !(b->controller && gr_controller_epoch(b->controller)))
        resp->error_code = GR_ERR_NOT_CONTROLLER;
    if (resp->error_code && (!denied || all)) return GR_HANDLER_DONE;
    /* the partitions the answer may name: the requested ones, or every partition of the image */
    int64_t n = all ? gr_image_partition_total(b->image) : 0;
    for (int32_t i = 0; !all && i < body->topic_partitions.count; i++)
        n += body->topic_partitions.items[i].partitions.count > 0
                 ? body->topic_partitions.items[i].partitions.count
                 : 0;
    int32_t nt = all ? gr_image_topic_count(b->image) : body->topic_partitions.count;
    struct elect_state *s = gr_req_state_add(req, &state_key, sizeof *s);
    if (!s) return GR_HANDLER_CLOSE;
    s->type = type;
    s->results = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *s->results);
    s->parts = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *s->parts);
    resp->replica_election_results.items =
        gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->replica_election_results.items);
    if (!s->results || !s->parts || !resp->replica_election_results.items) return GR_HANDLER_CLOSE;
    if (!(all ? every(req, s) : named(req, s, denied, n))) return GR_HANDLER_CLOSE;
    if (s->n == 0) return GR_HANDLER_DONE;
    /* (one node: never reached, its only replica leads every partition) */
    s->ask = b->controller ? gr_controller_elect(b->controller, type, s->parts, s->n, on_elected, req) : NULL;
    if (!s->ask) { /* no longer the controller, or too many asks waiting */
        s->expired = true;
        return finish(req);
    }
    return gr_req_await_verified(req, body->timeout_ms, finish, withdraw);
}
