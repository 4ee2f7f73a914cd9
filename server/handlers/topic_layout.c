/*
 * topic_layout.c: the layout of a topic CreateTopics asks for (gr_topic_layout, gr_topic_rf_check; see
 * handlers.h): the partition count and replication factor, or a manual replica assignment checked in Kafka's
 * order and words (ReplicationControlManager.createTopic and validateManualPartitionAssignment); whether a
 * replication factor can be served is the broker's topic writer's (cluster/topic_writer.h). Plain checks over
 * the decoded request and the broker's image: no waits. Read next: server/handlers/create_topics.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cluster/image.h"
#include "cluster/topic_writer.h"
#include "common/limits.h"
#include "server/handlers/handlers.h"

int16_t gr_topic_rf_check(struct gr_req *req, int32_t rf, const char **msg)
{
    char buf[GR_TOPIC_WRITER_MSG_BYTES];
    int16_t code = gr_topic_writer_check_rf(req->broker->topic_writer, rf, buf, sizeof buf);
    if (code) *msg = gr_arena_strndup(&req->arena, buf, strlen(buf));
    if (code && !*msg) *msg = "Invalid replication factor";
    return code;
}

/* A message for the answer, formatted into the request's arena (NULL when out of memory). */
static const char *req_msgf(struct gr_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *req_msgf(struct gr_req *req, const char *fmt, ...)
{
    char buf[200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    n = n < 0 ? 0 : n >= (int)sizeof buf ? (int)sizeof buf - 1 : n;
    return gr_arena_strndup(&req->arena, buf, (size_t)n);
}

/* One partition's replica list (Kafka's ReplicationControlManager.validateManualPartitionAssignment, its
 * order and words): not empty, every broker registered and named once (checked in id order), as many
 * replicas as the partitions before (`rf`, 0 for the first). Returns NONE or INVALID_REPLICA_ASSIGNMENT. */
static int16_t check_replicas(struct gr_req *req, struct gr_int32_array ids, int32_t rf, const char **msg)
{
    if (ids.count <= 0)
        return *msg = "The manual partition assignment includes an empty replica list.",
               GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    int32_t sorted[GR_CLUSTER_REPLICAS_MAX];
    if (ids.count > GR_CLUSTER_REPLICAS_MAX)
        return *msg = req_msgf(req, "A partition may have at most %d replicas", GR_CLUSTER_REPLICAS_MAX),
               GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    for (int32_t i = 0; i < ids.count; i++) { /* insertion sort of at most GR_CLUSTER_REPLICAS_MAX */
        int32_t j = i, v = ids.items[i];
        for (; j > 0 && sorted[j - 1] > v; j--)
            sorted[j] = sorted[j - 1];
        sorted[j] = v;
    }
    for (int32_t i = 0; i < ids.count; i++) {
        if (!gr_image_broker(req->broker->image, sorted[i]))
            return *msg =
                       req_msgf(req,
                                "The manual partition assignment includes broker %d, but no such broker is "
                                "registered.",
                                sorted[i]),
                   GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        if (i > 0 && sorted[i] == sorted[i - 1])
            return *msg =
                       req_msgf(req, "The manual partition assignment includes the broker %d more than once.",
                                sorted[i]),
                   GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    }
    if (rf && ids.count != rf)
        return *msg = req_msgf(
                   req,
                   "The manual partition assignment includes a partition with %d replica(s), but this "
                   "is not consistent with previous partitions, which have %d replica(s).",
                   ids.count, rf),
               GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    return GR_ERR_NONE;
}

/* A manual assignment (Kafka's ReplicationControlManager.createTopic): each partition once, each replica
 * list valid, partitions 0..n-1; then the replication factor is the topic writer's to accept. Sets *parts,
 * *rf and *assignment (arena: parts x rf node ids). Returns NONE or the refusal with *msg. */
static int16_t manual_assignment(struct gr_req *req,
                                 const struct gr_create_topics_request_creatable_topic *qt, int32_t *parts,
                                 int32_t *rf, int32_t **assignment, const char **msg)
{
    int32_t n = qt->assignments.count, *seen = gr_arena_calloc(&req->arena, (size_t)n, sizeof *seen);
    *parts = n;
    *rf = 0;
    if (!seen) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int32_t a = 0; a < n; a++) {
        int32_t idx = qt->assignments.items[a].partition_index;
        if (idx >= 0 && idx < n && seen[idx]++)
            return *msg = req_msgf(req, "Found multiple manual partition assignments for partition %d", idx),
                   GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        int16_t code = check_replicas(req, qt->assignments.items[a].broker_ids, *rf, msg);
        if (code) return code;
        *rf = qt->assignments.items[a].broker_ids.count;
    }
    for (int32_t p = 0; p < n; p++)
        if (!seen[p])
            return *msg = "partitions should be a consecutive 0-based integer sequence",
                   GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    int16_t code = gr_topic_rf_check(req, *rf, msg);
    if (code) return code;
    if (!(*assignment = gr_arena_calloc(&req->arena, (size_t)n * (size_t)*rf, sizeof **assignment)))
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int32_t a = 0; a < n; a++) {
        const struct gr_create_topics_request_creatable_replica_assignment *ra = &qt->assignments.items[a];
        memcpy(*assignment + (size_t)ra->partition_index * (size_t)*rf, ra->broker_ids.items,
               (size_t)*rf * sizeof **assignment);
    }
    return GR_ERR_NONE;
}

int16_t gr_topic_layout(struct gr_req *req, const struct gr_create_topics_request_creatable_topic *qt,
                        int32_t *parts, int32_t *rf, int32_t **assignment, const char **msg)
{
    const struct gr_broker_settings *s = &req->broker->cfg.settings;
    *assignment = NULL;
    if (qt->assignments.count <= 0) {
        *parts = qt->num_partitions == -1 ? s->num_partitions : qt->num_partitions;
        *rf = qt->replication_factor == -1 ? s->default_replication_factor : qt->replication_factor;
        return gr_topic_rf_check(req, *rf, msg); /* the topic writer's rule */
    }
    if (qt->num_partitions != -1 || qt->replication_factor != -1)
        return *msg = "Both numPartitions or replicationFactor and replicasAssignments were set",
               GR_ERR_INVALID_REQUEST;
    return manual_assignment(req, qt, parts, rf, assignment, msg);
}
