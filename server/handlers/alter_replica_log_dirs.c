/*
 * alter_replica_log_dirs.c: AlterReplicaLogDirs (key 34, v1-2; KafkaApis.handleAlterReplicaLogDirsRequest,
 * ReplicaManager.alterReplicaLogDirs). Without ALTER on the cluster every partition named answers
 * CLUSTER_AUTHORIZATION_FAILED, in the request's shape (one topic entry per directory and topic, as
 * AlterReplicaLogDirsRequest.getErrorResponse). Otherwise each (topic, partition) is answered once, for the
 * last directory naming it (Kafka builds a map), one topic entry per topic (sorted here; Kafka's order is its
 * map's): storage's check (storage/replica_dir.h: one log directory per broker, so no replica ever moves)
 * gives NONE (held here and the path names this broker's directory), INVALID_TOPIC_EXCEPTION (the future
 * directory's name would pass 255 units), LOG_DIR_NOT_FOUND (any other path, relative ones included) or
 * KAFKA_STORAGE_ERROR (the replica is offline); a replica not held here is REPLICA_NOT_AVAILABLE when the
 * image knows the partition (Kafka's NotLeaderOrFollower, kept as REPLICA_NOT_AVAILABLE for this API:
 * kafka-reassign-partitions.sh retries it until the moved replica exists), else UNKNOWN_TOPIC_OR_PARTITION.
 */
#include <stdlib.h>
#include <string.h>

#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"
#include "storage/replica_dir.h"

typedef struct gr_alter_replica_log_dirs_request_alter_replica_log_dir dir_t;
typedef struct gr_alter_replica_log_dirs_response_alter_replica_log_dir_topic_result result_t;
typedef struct gr_alter_replica_log_dirs_response_alter_replica_log_dir_partition_result part_t;

/* One (topic, partition, path) the request names; `seq` its place in the request. */
struct ask {
    struct gr_str topic, path;
    int32_t partition;
    int64_t seq;
};

static int str_cmp(struct gr_str a, struct gr_str b)
{
    int32_t n = a.len < b.len ? a.len : b.len;
    int c = n > 0 ? memcmp(a.ptr, b.ptr, (size_t)n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

/* By topic, partition, then request order. */
static int ask_cmp(const void *x, const void *y)
{
    const struct ask *a = x, *b = y;
    int c = str_cmp(a->topic, b->topic);
    if (c) return c;
    if (a->partition != b->partition) return a->partition < b->partition ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Every partition the request names, *n of them; NULL when out of request memory. */
static struct ask *collect(struct gr_req *req, int64_t *n)
{
    struct gr_alter_replica_log_dirs_request *body = req->body;
    int64_t count = 0;
    for (int32_t d = 0; d < body->dirs.count; d++)
        for (int32_t t = 0; t < body->dirs.items[d].topics.count; t++)
            count += body->dirs.items[d].topics.items[t].partitions.count;
    struct ask *asks = gr_arena_calloc(&req->arena, (size_t)count + 1, sizeof *asks);
    if (!asks) return NULL;
    *n = 0;
    for (int32_t d = 0; d < body->dirs.count; d++) {
        const dir_t *dir = &body->dirs.items[d];
        for (int32_t t = 0; t < dir->topics.count; t++)
            for (int32_t j = 0; j < dir->topics.items[t].partitions.count; j++, (*n)++)
                asks[*n] = (struct ask){dir->topics.items[t].name, dir->path,
                                        dir->topics.items[t].partitions.items[j], *n};
    }
    return asks;
}

static int16_t answer(struct gr_req *req, const struct ask *a)
{
    static const int16_t errors[] = {
        [GR_REPLICA_DIR_OK] = GR_ERR_NONE,
        [GR_REPLICA_DIR_NAME_TOO_LONG] = GR_ERR_INVALID_TOPIC_EXCEPTION,
        [GR_REPLICA_DIR_NOT_FOUND] = GR_ERR_LOG_DIR_NOT_FOUND,
        [GR_REPLICA_DIR_OFFLINE] = GR_ERR_KAFKA_STORAGE_ERROR,
        [GR_REPLICA_DIR_NOT_HELD] = GR_ERR_REPLICA_NOT_AVAILABLE,
    };
    enum gr_replica_dir_check c =
        gr_store_replica_dir_check(req->broker->store, a->topic.ptr, (size_t)a->topic.len, a->partition,
                                   a->path.ptr, (size_t)a->path.len);
    const struct gr_image_topic *it = gr_route_topic(req->broker, a->topic);
    if (c == GR_REPLICA_DIR_NOT_HELD && !(it && gr_image_partition(it, a->partition)))
        return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return errors[c];
}

/* The refusal: every partition named, in the request's shape. False when out of request memory. */
static bool refuse(struct gr_req *req)
{
    struct gr_alter_replica_log_dirs_request *body = req->body;
    struct gr_alter_replica_log_dirs_response *resp = req->resp;
    int64_t topics = 0;
    for (int32_t d = 0; d < body->dirs.count; d++)
        topics += body->dirs.items[d].topics.count;
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)topics + 1, sizeof *resp->results.items);
    if (!resp->results.items) return false;
    for (int32_t d = 0; d < body->dirs.count; d++) {
        const dir_t *dir = &body->dirs.items[d];
        for (int32_t t = 0; t < dir->topics.count; t++) {
            const struct gr_int32_array *ps = &dir->topics.items[t].partitions;
            result_t *r = &resp->results.items[resp->results.count++];
            gr_alter_replica_log_dirs_response_alter_replica_log_dir_topic_result_init(r);
            r->topic_name = dir->topics.items[t].name;
            r->partitions.items = gr_arena_calloc(&req->arena, (size_t)ps->count + 1, sizeof(part_t));
            if (!r->partitions.items) return false;
            for (int32_t j = 0; j < ps->count; j++)
                r->partitions.items[r->partitions.count++] = (part_t){
                    .partition_index = ps->items[j], .error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED};
        }
    }
    return true;
}

enum gr_handler_rc gr_handle_alter_replica_log_dirs(struct gr_req *req)
{
    struct gr_alter_replica_log_dirs_response *resp = req->resp;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_ALTER))
        return refuse(req) ? GR_HANDLER_DONE : GR_HANDLER_CLOSE;
    int64_t n;
    struct ask *asks = collect(req, &n);
    if (!asks) return GR_HANDLER_CLOSE;
    qsort(asks, (size_t)n, sizeof *asks, ask_cmp);
    /* at most one result per ask and one partition entry per ask: index them in place */
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
    part_t *parts = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *parts);
    if (!resp->results.items || !parts) return GR_HANDLER_CLOSE;
    result_t *r = NULL;
    for (int64_t i = 0; i < n; i++) {
        const struct ask *a = &asks[i];
        if (i + 1 < n && asks[i + 1].partition == a->partition && gr_str_eq(asks[i + 1].topic, a->topic))
            continue; /* a later directory names it again: that one counts */
        if (!r || !gr_str_eq(r->topic_name, a->topic)) {
            r = &resp->results.items[resp->results.count++];
            gr_alter_replica_log_dirs_response_alter_replica_log_dir_topic_result_init(r);
            r->topic_name = a->topic;
            r->partitions.items = parts;
        }
        *parts++ = (part_t){.partition_index = a->partition, .error_code = answer(req, a)};
        r->partitions.count++;
    }
    return GR_HANDLER_DONE;
}
