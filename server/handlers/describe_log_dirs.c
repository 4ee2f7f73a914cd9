/*
 * describe_log_dirs.c: DescribeLogDirs (key 35), v1-v5. Gregor has one log directory: one result naming its
 * absolute path, with every requested partition that exists (topics null = all topics and partitions;
 * unknown topics and partitions are left out, as Kafka does) and its size in bytes (the .log files),
 * offset_lag 0 (this broker is the leader) and is_future_key false (no replica moves between directories).
 * From v4, total_bytes and usable_bytes of the file system holding it (statvfs: f_blocks and f_bavail in
 * f_frsize units; -1 when statvfs fails). Both come from storage's "log dir usage" query
 * (storage/log_dir_usage.h: realpath and statvfs may wait for the disk, so it runs on the I/O pool); the
 * request is parked meanwhile and the partition sizes are read when the answer is built. A topic listed
 * twice in the request is answered once with the union of its partitions. From v5, is_cordoned false: Gregor
 * cannot cordon its directory (KIP-1066's cordoned.log.dirs, empty by default in Kafka 4.4, which then
 * answers false too). Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED and no
 * results (KafkaApis).
 */
#include <stdbool.h>
#include <string.h>

#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "storage/log_dir_usage.h"

typedef struct gr_describe_log_dirs_response_describe_log_dirs_topic topic_t;
typedef struct gr_describe_log_dirs_response_describe_log_dirs_partition part_t;

static void put_partition(struct gr_log *log, int32_t p, part_t *rp)
{
    gr_describe_log_dirs_response_describe_log_dirs_partition_init(rp);
    rp->partition_index = p;
    rp->partition_size = gr_log_size_bytes(log);
    rp->offset_lag = 0;
    rp->is_future_key = false;
}

/* Every partition of `t`. */
static bool put_all(struct gr_req *req, struct gr_topic *t, topic_t *rt)
{
    int32_t np = gr_topic_partition_count(t);
    gr_describe_log_dirs_response_describe_log_dirs_topic_init(rt);
    rt->name = gr_str_c(gr_topic_name(t));
    rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
    if (!rt->partitions.items) return false;
    rt->partitions.count = 0;
    for (int32_t p = 0; p < np; p++) /* a sparse topic lists the partitions held here */
        if (gr_topic_log(t, p))
            put_partition(gr_topic_log(t, p), p, &rt->partitions.items[rt->partitions.count++]);
    return true;
}

/* The requested partitions of request topic i that exist, merged with later entries naming the same topic;
 * returns false on arena exhaustion. rt->partitions.count is 0 when none exists. */
static bool put_some(struct gr_req *req, int32_t i, struct gr_topic *t, topic_t *rt)
{
    struct gr_describe_log_dirs_request *body = req->body;
    int32_t np = gr_topic_partition_count(t);
    gr_describe_log_dirs_response_describe_log_dirs_topic_init(rt);
    rt->name = gr_str_c(gr_topic_name(t));
    bool *seen = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *seen);
    rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
    if (!seen || !rt->partitions.items) return false;
    for (int32_t k = i; k < body->topics.count; k++) {
        const struct gr_describe_log_dirs_request_describable_log_dir_topic *qt = &body->topics.items[k];
        if (k != i && !gr_str_eq(qt->topic, body->topics.items[i].topic)) continue;
        for (int32_t j = 0; j < qt->partitions.count; j++) {
            int32_t p = qt->partitions.items[j];
            if (p < 0 || p >= np || seen[p] || !gr_topic_log(t, p)) continue;
            seen[p] = true;
            put_partition(gr_topic_log(t, p), p, &rt->partitions.items[rt->partitions.count++]);
        }
    }
    return true;
}

static bool fill_topics(struct gr_req *req,
                        struct gr_describe_log_dirs_response_describe_log_dirs_result *res)
{
    struct gr_describe_log_dirs_request *body = req->body;
    struct gr_store *store = req->broker->store;
    if (body->topics.count < 0) {
        int n = gr_store_topic_count(store);
        res->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *res->topics.items);
        if (!res->topics.items) return false;
        for (int i = 0; i < n; i++)
            if (!put_all(req, gr_store_topic_at(store, i), &res->topics.items[res->topics.count++]))
                return false;
        return true;
    }
    int32_t n = body->topics.count;
    res->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *res->topics.items);
    if (!res->topics.items) return false;
    for (int32_t i = 0; i < n; i++) {
        bool earlier = false;
        for (int32_t k = 0; k < i && !earlier; k++)
            earlier = gr_str_eq(body->topics.items[k].topic, body->topics.items[i].topic);
        struct gr_topic *t = earlier ? NULL : gr_topic_lookup(req->broker, body->topics.items[i].topic);
        if (!t) continue;
        topic_t *rt = &res->topics.items[res->topics.count];
        if (!put_some(req, i, t, rt)) return false;
        if (rt->partitions.count > 0) res->topics.count++;
    }
    return true;
}

/* The request's usage query (arena). */
struct dir_query {
    struct gr_log_dir_usage u;
    struct gr_req *req;
    bool parked; /* the handler parked the request: the done hook finishes it */
};

/* Fills the result from the usage query and the logs' current sizes; finishes a parked request. */
static void usage_done(struct gr_log_dir_usage *u)
{
    struct dir_query *q = u->ctx;
    struct gr_req *req = q->req;
    struct gr_describe_log_dirs_response *resp = req->resp;
    struct gr_describe_log_dirs_response_describe_log_dirs_result *res = &resp->results.items[0];
    res->log_dir = gr_str_c(u->path);
    res->total_bytes = u->total_bytes;
    res->usable_bytes = u->usable_bytes;
    if (!fill_topics(req, res)) {
        res->topics.count = 0;
        res->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
        resp->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    if (q->parked) gr_req_finish(req);
}

enum gr_handler_rc gr_handle_describe_log_dirs(struct gr_req *req)
{
    struct gr_describe_log_dirs_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    resp->results.items = gr_arena_calloc(&req->arena, 1, sizeof *resp->results.items);
    struct dir_query *q = gr_arena_calloc(&req->arena, 1, sizeof *q);
    if (!resp->results.items || !q) return GR_HANDLER_CLOSE;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) { /* KafkaApis: no log dirs */
        resp->results.count = 0;
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        return GR_HANDLER_DONE;
    }
    resp->results.count = 1;
    gr_describe_log_dirs_response_describe_log_dirs_result_init(&resp->results.items[0]);
    q->req = req;
    q->u.done = usage_done;
    q->u.ctx = q;
    if (!b->iopool) { /* no pool (never in the broker): answered inline */
        gr_store_log_dir_usage(b->store, NULL, &q->u);
        return GR_HANDLER_DONE;
    }
    q->parked = true;
    gr_req_await(req, NULL); /* usage_done answers */
    gr_store_log_dir_usage(b->store, b->iopool, &q->u);
    return GR_HANDLER_WAIT;
}
