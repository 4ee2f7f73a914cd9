/*
 * authorize.c: the ACL checks of Produce, Fetch and Metadata (issue #23), as KafkaApis makes them, kept
 * out of the handlers' own files (server/acls.h holds the authorizer; each check is true without one).
 * Read next: server/handlers/produce.c, fetch.c, metadata.c.
 */
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/handlers/produce_request.h"
#include "server/route.h"

/* Kafka AclOperation bits a topic supports: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
 * ALTER_CONFIGS (all of them reported when no authorizer is set). */
#define TOPIC_ALL_OPERATIONS                                                                                 \
    ((1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11))

int32_t gr_topic_authorized_ops(struct gr_req *req, const struct gr_image_topic *it)
{
    const char *name = it->name;
    if (!req->broker->authz) return TOPIC_ALL_OPERATIONS;
    int32_t ops = 0;
    for (int op = GR_ACL_OP_READ; op <= GR_ACL_OP_ALTER_CONFIGS; op++)
        if ((TOPIC_ALL_OPERATIONS & (1 << op)) &&
            gr_req_authorized_c(req, (enum gr_acl_op)op, GR_ACL_RES_TOPIC, name))
            ops |= 1 << op;
    return ops;
}

/* AclOperation codes 5, 7, 8, 9, 10, 11, 12 as bits. */
#define CLUSTER_ALL_OPERATIONS ((1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12))

int32_t gr_cluster_authorized_ops(struct gr_req *req)
{
    if (!req->broker->authz) return CLUSTER_ALL_OPERATIONS;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE)) return 0;
    int32_t ops = 0;
    for (int op = GR_ACL_OP_CREATE; op <= GR_ACL_OP_IDEMPOTENT_WRITE; op++)
        if ((CLUSTER_ALL_OPERATIONS & (1 << op)) && gr_req_authorized_cluster(req, (enum gr_acl_op)op))
            ops |= 1 << op;
    return ops;
}

int16_t gr_config_resource_denied(struct gr_req *req, int8_t type, struct gr_str name, enum gr_acl_op op,
                                  const char **msg)
{
    switch (type) {
    case 2:
        if (gr_req_authorized(req, op, GR_ACL_RES_TOPIC, name)) return GR_ERR_NONE;
        return *msg = "Topic authorization failed.", GR_ERR_TOPIC_AUTHORIZATION_FAILED;
    case 4:
    case 8:
    case 16:
        if (gr_req_authorized_cluster(req, op)) return GR_ERR_NONE;
        return *msg = "Cluster authorization failed.", GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
    case 32:
        if (gr_req_authorized(req, op, GR_ACL_RES_GROUP, name)) return GR_ERR_NONE;
        return *msg = "Group authorization failed.", GR_ERR_GROUP_AUTHORIZATION_FAILED;
    default:
        return GR_ERR_NONE;
    }
}

int16_t gr_txn_group_refused(struct gr_req *req, struct gr_str transactional_id, struct gr_str group_id)
{
    if (!gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, transactional_id))
        return GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (!gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP, group_id))
        return GR_ERR_GROUP_AUTHORIZATION_FAILED;
    return GR_ERR_NONE;
}

bool gr_topic_describable(struct gr_req *req, const struct gr_image_topic *it)
{
    return gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC,
                             (struct gr_str){it->name, it->name_len});
}

void gr_fetch_partition_init(struct gr_fetch_response_partition_data *rp, int32_t index, bool denied)
{
    gr_fetch_response_partition_data_init(rp);
    rp->partition_index = index;
    rp->high_watermark = -1;
    rp->records = gr_records_mem((struct gr_bytes){(const uint8_t *)"", 0});
    rp->aborted_transactions.count = 0;
    if (!denied) return;
    rp->error_code = GR_ERR_TOPIC_AUTHORIZATION_FAILED; /* Kafka's errorResponse: -1 offsets, no records */
    rp->last_stable_offset = rp->log_start_offset = -1;
    rp->aborted_transactions.count = -1;
}

int16_t gr_metadata_topic_authorized(struct gr_req *req, struct gr_str name, const struct gr_image_topic *it,
                                     bool may_create)
{
    if (!req->broker->authz) return GR_ERR_NONE;
    struct gr_str described = name.len >= 0 ? name
                              : it          ? (struct gr_str){it->name, it->name_len}
                                            : GR_STR_NULL;
    if (described.len < 0) return GR_ERR_NONE; /* an unknown id: UNKNOWN_TOPIC_ID */
    if (!gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, described))
        return GR_ERR_TOPIC_AUTHORIZATION_FAILED;
    if (!it && may_create && !gr_req_authorized_cluster(req, GR_ACL_OP_CREATE) &&
        !gr_req_authorized(req, GR_ACL_OP_CREATE, GR_ACL_RES_TOPIC, described))
        return GR_ERR_TOPIC_AUTHORIZATION_FAILED;
    return GR_ERR_NONE;
}

int16_t gr_route_described(struct gr_req *req, const struct gr_image_topic *it, struct gr_str name,
                           int32_t partition, struct gr_route *r)
{
    if (gr_req_authorized(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TOPIC, name))
        return gr_route_partition(req->broker, it, partition, false, r);
    *r = (struct gr_route){0};
    return GR_ERR_TOPIC_AUTHORIZATION_FAILED;
}

bool *gr_produce_topics_denied(struct gr_req *req, bool *txn_refused)
{
    struct gr_produce_request *body = req->body;
    struct gr_broker *b = req->broker;
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    bool *denied = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *denied);
    *txn_refused = gr_produce_txn_refused(req); /* transactional records without a transactional id */
    if (!denied || !b->authz) return denied;
    if (body->transactional_id.len >= 0 && gr_produce_request_transactional(body) &&
        !gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID, body->transactional_id))
        *txn_refused = true;
    bool by_id = req->hdr.request_api_version >= 13;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        const struct gr_image_topic *it = by_id ? gr_route_topic_by(b, true, td->name, td->topic_id.b) : NULL;
        if (by_id && !it) continue; /* UNKNOWN_TOPIC_ID */
        struct gr_str name = it ? (struct gr_str){it->name, it->name_len} : td->name;
        denied[i] = !gr_req_authorized(req, GR_ACL_OP_WRITE, GR_ACL_RES_TOPIC, name);
    }
    return denied;
}

bool *gr_fetch_topics_denied(struct gr_req *req, int32_t replica_id, bool *all_denied)
{
    struct gr_fetch_request *body = req->body;
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    bool *denied = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *denied);
    if (!denied || !req->broker->authz || ntopics == 0) return denied;
    bool follower_ok = replica_id < 0 || gr_req_authorized_cluster(req, GR_ACL_OP_CLUSTER_ACTION);
    bool by_id = req->hdr.request_api_version >= 13, all = true;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_fetch_request_fetch_topic *qt = &body->topics.items[i];
        const struct gr_image_topic *t =
            by_id ? gr_route_topic_by(req->broker, true, qt->topic, qt->topic_id.b) : NULL;
        if (by_id && !t) { /* UNKNOWN_TOPIC_ID */
            all = false;
            continue;
        }
        struct gr_str name = t ? (struct gr_str){t->name, t->name_len} : qt->topic;
        denied[i] = !follower_ok ||
                    (replica_id < 0 && !gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, name));
        all = all && denied[i];
    }
    if (all) *all_denied = true;
    return denied;
}
