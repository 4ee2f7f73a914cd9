/*
 * create_partitions.c: CreatePartitions (key 37), v0-v3. Grows a topic to `count` partitions; the new
 * logs start empty. Checks and messages follow Kafka 4.1's ControllerApis/ReplicationControlManager:
 * a name given twice is INVALID_REQUEST "Duplicate topic name." (answered once); an unknown topic
 * UNKNOWN_TOPIC_OR_PARTITION (topics as the image knows them); a count equal to or below the current one
 * INVALID_PARTITIONS; manual assignments must number exactly the added partitions and name live brokers,
 * once, as many replicas as partition 0 has (INVALID_REPLICA_ASSIGNMENT). Above GR_PARTITIONS_PER_TOPIC_MAX
 * is INVALID_PARTITIONS (Kafka fails such sizes with UNKNOWN_SERVER_ERROR). validate_only checks without
 * changing anything. Gregor difference: the partition count of an internal topic is refused
 * (INVALID_REQUEST): the group coordinator maps each group to a __consumer_offsets partition by that count.
 * Kafka 4.1 allows it. The change goes through the broker's topic writer (single node: the files on the I/O
 * pool; cluster: the record in etcd, then the new leaders); the response waits for every topic of the
 * request. Authorization (ControllerApis.createPartitions): ALTER on the topic, after the duplicate check,
 * else TOPIC_AUTHORIZATION_FAILED with a null message, before existence. Read next: cluster/topic_writer.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "common/limits.h"
#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

static const char *msgf(struct gr_req *req, const char *f, ...) __attribute__((format(printf, 2, 3)));
static const char *msgf(struct gr_req *req, const char *f, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    const char *m = gr_arena_strndup(&req->arena, buf, strlen(buf));
    return m ? m : "CreatePartitions failed";
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One manual assignment, checked as Kafka's validateManualPartitionAssignment does (broker ids in
 * ascending order: unregistered (not a live broker of the image), then repeated), then its replica count
 * against the existing partitions' (`rf`: partition 0's replica count, as Kafka's createPartitions takes it).
 */
static int16_t check_assignment(struct gr_req *req, struct gr_int32_array ids, int32_t rf, const char **msg)
{
    if (ids.count <= 0) {
        *msg = "The manual partition assignment includes an empty replica list.";
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    int32_t *sorted = gr_arena_calloc(&req->arena, (size_t)ids.count, sizeof *sorted);
    if (!sorted) return GR_ERR_UNKNOWN_SERVER_ERROR;
    memcpy(sorted, ids.items, (size_t)ids.count * sizeof *sorted);
    qsort(sorted, (size_t)ids.count, sizeof *sorted, cmp_i32);
    for (int32_t k = 0; k < ids.count; k++) {
        const struct gr_image_broker *br = gr_image_broker(req->broker->image, sorted[k]);
        if (!br || br->fenced) {
            *msg = msgf(
                req, "The manual partition assignment includes broker %d, but no such broker is registered.",
                sorted[k]);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
        if (k > 0 && sorted[k] == sorted[k - 1]) {
            *msg = msgf(req, "The manual partition assignment includes the broker %d more than once.",
                        sorted[k]);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    if (ids.count != rf) {
        *msg = msgf(req,
                    "The manual partition assignment includes a partition with %d replica(s), but this is "
                    "not consistent with previous partitions, which have %d replica(s).",
                    ids.count, rf);
        return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    return GR_ERR_NONE;
}

typedef struct gr_create_partitions_response_create_partitions_topic_result result_t;

/* The growth of one topic completed. */
static void grown(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    result_t *r = item;
    if (res->error_code) {
        r->error_code = res->error_code;
        r->error_message = res->message ? gr_str_c(gr_req_strdup(req, gr_str_c(res->message))) : GR_STR_NULL;
        return;
    }
    struct gr_topic *t = res->local;
    for (int32_t p = 0; t && p < gr_topic_partition_count(t); p++)
        gr_partition_visible_offset(gr_broker_partition(req->broker, gr_topic_log(t, p)));
    GR_INFO("topic %.*s now has %d partitions", (int)r->name.len, r->name.ptr, res->partition_count);
}

static int16_t create(struct gr_req *req,
                      const struct gr_create_partitions_request_create_partitions_topic *qt,
                      bool validate_only, const char **msg, result_t *r)
{
    struct gr_broker *b = req->broker;
    struct gr_image_topic *t =
        qt->name.len > 0 ? gr_image_topic_find(b->image, qt->name.ptr, (size_t)qt->name.len) : NULL;
    if (!t) return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    const char *name = t->name;
    if (gr_topic_is_internal(name)) {
        *msg = "The partition count of an internal topic cannot change: the group coordinator maps groups to "
               "its "
               "partitions by that count";
        return GR_ERR_INVALID_REQUEST;
    }
    int32_t cur = t->partition_count;
    if (qt->count == cur) {
        *msg = msgf(req, "Topic already has %d partition(s).", cur);
        return GR_ERR_INVALID_PARTITIONS;
    }
    if (qt->count < cur) {
        *msg = msgf(req, "The topic %s currently has %d partition(s); %d would not be an increase.", name,
                    cur, qt->count);
        return GR_ERR_INVALID_PARTITIONS;
    }
    if (qt->count > GR_PARTITIONS_PER_TOPIC_MAX) {
        *msg = msgf(req, "A topic may have at most %d partitions.", GR_PARTITIONS_PER_TOPIC_MAX);
        return GR_ERR_INVALID_PARTITIONS;
    }
    int32_t added = qt->count - cur, *ids = NULL;
    int32_t rf = cur > 0 && t->parts[0].replica_count > 0 ? t->parts[0].replica_count : 1;
    if (qt->assignments.count >= 0) {
        if (qt->assignments.count != added) {
            *msg = msgf(
                req, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
                added, qt->assignments.count);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
        if (!(ids = gr_arena_calloc(&req->arena, (size_t)added * (size_t)rf, sizeof *ids)))
            return GR_ERR_UNKNOWN_SERVER_ERROR;
        for (int32_t a = 0; a < qt->assignments.count; a++) {
            int16_t err = check_assignment(req, qt->assignments.items[a].broker_ids, rf, msg);
            if (err) return err;
            memcpy(ids + (size_t)a * (size_t)rf, qt->assignments.items[a].broker_ids.items,
                   (size_t)rf * sizeof *ids); /* rf replicas each (checked) */
        }
    }
    if (validate_only) return GR_ERR_NONE;
    int32_t timeout_ms = ((struct gr_create_partitions_request *)req->body)->timeout_ms;
    if (!gr_req_topic_grow(req, t->id, qt->count, ids, ids ? added : 0, rf, timeout_ms, grown, r)) {
        *msg = "Out of memory";
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    return GR_ERR_NONE;
}

enum gr_handler_rc gr_handle_create_partitions(struct gr_req *req)
{
    struct gr_create_partitions_request *body = req->body;
    struct gr_create_partitions_response *resp = req->resp;
    if (gr_req_topic_barrier(req)) return GR_HANDLER_WAIT; /* earlier topic operations first */
    int32_t n = body->topics.count > 0 ? body->topics.count : 0;
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    if (!resp->results.items || !keys) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        keys[i] = (struct gr_req_key){body->topics.items[i].name, 0, i};
    bool *repeated;
    int32_t *first = gr_req_keys_first(req, keys, n, &repeated);
    if (!first) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_create_partitions_request_create_partitions_topic *qt = &body->topics.items[i];
        bool dup = repeated[i];
        if (first[i] != i) continue; /* a duplicated name is answered once, as Kafka does */
        result_t *r = &resp->results.items[resp->results.count++];
        gr_create_partitions_response_create_partitions_topic_result_init(r);
        r->name = qt->name;
        r->error_message = GR_STR_NULL;
        const char *msg = NULL;
        if (dup) {
            r->error_code = GR_ERR_INVALID_REQUEST;
            msg = "Duplicate topic name.";
        } else if (!gr_req_authorized(req, GR_ACL_OP_ALTER, GR_ACL_RES_TOPIC, qt->name)) {
            r->error_code = GR_ERR_TOPIC_AUTHORIZATION_FAILED;
        } else {
            int16_t code = create(req, qt, body->validate_only, &msg, r); /* NONE: grown() may set one */
            if (code) r->error_code = code;
        }
        if (msg) r->error_message = gr_str_c(msg);
    }
    return gr_req_topic_ops_wait(req, NULL);
}
