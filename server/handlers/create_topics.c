/*
 * create_topics.c: CreateTopics (key 19), v2-v7. num_partitions/replication_factor -1 take the broker
 * defaults (num.partitions, default.replication.factor); the replication factor is the topic writer's to
 * accept (cluster/topic_writer.h: 1 on one node; in a cluster placement refuses more than the live brokers)
 * and manual assignments are checked with Kafka's words (ReplicationControlManager: registered brokers, each
 * once, one factor for all partitions, 0..n-1). validate_only checks without creating. Names repeated within
 * one request get INVALID_REQUEST, as Kafka answers duplicates. The files are created on the I/O pool
 * (gr_topic_create); the response waits until every topic of the request is live or failed.
 * Every created (or validated) topic lists its full config set (v5+), as Kafka's ReplicationControlManager
 * does: every topic config sorted by name, with the value, source and read-only/sensitive flags that
 * DescribeConfigs would show (server/topic_configs.h gr_tcfg_describe, one rule for both). ACLs: CREATE on
 * the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED (the configs are shown without a
 * DESCRIBE_CONFIGS check: not yet Kafka's TopicConfigErrorCode).
 */
#include <string.h>

#include "cluster/image.h"
#include "coordinator/offsets_log.h"
#include "server/acls.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"
#include "server/topic_configs.h"

typedef struct gr_create_topics_response_creatable_topic_result result_t;

/* The topic-level value of `key`: the live topic's, else (validate_only) the request's. Kafka's
 * KafkaConfigSchema.resolveEffectiveTopicConfig shows it as given (not normalised), as both do here. */
static const char *topic_value(const struct gr_topic *t, const char *const *keys, const char *const *values,
                               int count, const char *key)
{
    if (t) return gr_topic_config_get(t, key);
    for (int i = 0; i < count; i++)
        if (strcmp(keys[i], key) == 0) return values[i];
    return NULL;
}

/* Fills rt->configs with every topic config of the new topic (Kafka's CreateTopicsResult.config()). */
static void fill_configs(struct gr_req *req, result_t *rt, const struct gr_topic *t, const char *const *keys,
                         const char *const *values, int count)
{
    int n;
    const struct gr_tcfg_def *defs = gr_tcfg_defs(&n);
    rt->configs.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *rt->configs.items);
    rt->configs.count = 0;
    if (!rt->configs.items) return;
    for (int i = 0; i < n; i++) {
        struct gr_cfg_entry e;
        const char *v = topic_value(t, keys, values, count, defs[i].name);
        if (gr_tcfg_describe(&defs[i], v, &req->broker->cfg, &req->arena, &e)) return;
        struct gr_create_topics_response_creatable_topic_configs *c = &rt->configs.items[rt->configs.count++];
        gr_create_topics_response_creatable_topic_configs_init(c);
        c->name = gr_str_c(e.name);
        c->value = e.is_sensitive || !e.value ? GR_STR_NULL : gr_str_c(e.value);
        c->read_only = e.read_only;
        c->config_source = e.source;
        c->is_sensitive = e.is_sensitive;
    }
}

/* A topic's creation completed: its result entry gets the outcome. */
static void created(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    struct gr_create_topics_response_creatable_topic_result *rt = item;
    rt->error_code = res->error_code;
    rt->error_message =
        res->message ? gr_str_c(gr_req_strdup(req, gr_str_c(res->message))) : GR_STR_NULL; /* borrowed */
    if (res->error_code) return;
    memcpy(rt->topic_id.b, res->topic_id, 16);
    rt->num_partitions = res->partition_count;
    rt->replication_factor = (int16_t)res->replication_factor;
    fill_configs(req, rt, res->local, NULL, NULL, 0);
}

/* The topic's configs from the request (arena), or INVALID_CONFIG for a null value. */
static int16_t request_configs(struct gr_req *req, const struct gr_create_topics_request_creatable_topic *qt,
                               const char ***keys, const char ***values, const char **msg)
{
    int32_t nc = qt->configs.count > 0 ? qt->configs.count : 0;
    *keys = gr_arena_calloc(&req->arena, (size_t)nc + 1, sizeof **keys);
    *values = gr_arena_calloc(&req->arena, (size_t)nc + 1, sizeof **values);
    if (!*keys || !*values) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int32_t c = 0; c < nc; c++) {
        (*keys)[c] = gr_req_strdup(req, qt->configs.items[c].name);
        (*values)[c] =
            qt->configs.items[c].value.len < 0 ? NULL : gr_req_strdup(req, qt->configs.items[c].value);
        if (!(*values)[c]) return *msg = "Null value not supported for topic configs", GR_ERR_INVALID_CONFIG;
    }
    return GR_ERR_NONE;
}

/* One topic of the request, answered at its first occurrence (`dup`: its name is repeated): checks the
 * layout (Kafka's messages), then creates it (or validates it: validate_only) with its configs. */
static void create_one(struct gr_req *req, const struct gr_create_topics_request_creatable_topic *qt,
                       bool dup, result_t *rt)
{
    struct gr_create_topics_request *body = req->body;
    const char *msg = NULL, **keys = NULL, **values = NULL;
    int32_t parts = 0, rf = 0, *assignment = NULL;
    int32_t nc = qt->configs.count > 0 ? qt->configs.count : 0;
    if (dup) {
        rt->error_code = GR_ERR_INVALID_REQUEST;
        msg = "Create topics request from client contains duplicate topic name";
    } else if (!gr_req_authorized_cluster(req, GR_ACL_OP_CREATE) &&
               !gr_req_authorized(req, GR_ACL_OP_CREATE, GR_ACL_RES_TOPIC, qt->name)) {
        rt->error_code =
            GR_ERR_TOPIC_AUTHORIZATION_FAILED; /* KafkaApis: CREATE on the cluster or the topic */
    } else {
        rt->error_code = gr_topic_layout(req, qt, &parts, &rf, &assignment, &msg);
    }
    if (!rt->error_code) rt->error_code = request_configs(req, qt, &keys, &values, &msg);
    /* a coordinator's internal topic is made in its coordinator's shape, whatever the request asks */
    if (!rt->error_code)
        gr_internal_topic_layout(&req->arena, &req->broker->cfg.settings, qt->name, &parts, &rf, &assignment,
                                 &keys, &values, &nc);
    if (!rt->error_code) {
        int16_t code = gr_topic_create(req, qt->name, parts, rf, assignment, keys, values, nc,
                                       body->validate_only, &msg, body->timeout_ms, created, rt);
        if (!code && !body->validate_only) return; /* created() fills the entry (maybe already) */
        rt->error_code = code;
        if (!code) { /* validate_only: the id the topic would get, as Kafka's controller answers */
            gr_uuid_random(rt->topic_id.b);
            fill_configs(req, rt, NULL, keys, values, nc);
        }
    }
    rt->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
    if (!rt->error_code) {
        rt->num_partitions = parts;
        rt->replication_factor = (int16_t)rf;
    }
}

enum gr_handler_rc gr_handle_create_topics(struct gr_req *req)
{
    struct gr_create_topics_request *body = req->body;
    struct gr_create_topics_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    if (gr_req_topic_barrier(req)) return GR_HANDLER_WAIT; /* earlier topic operations first */
    int32_t n = body->topics.count > 0 ? body->topics.count : 0;
    /* __consumer_offsets belongs to the group coordinator: it is created by the coordinator's start */
    for (int32_t i = 0; i < n && !b->coord; i++)
        if (gr_str_eq(body->topics.items[i].name, gr_str_c(GR_OFFSETS_TOPIC)) && gr_groups_defer(req))
            return GR_HANDLER_WAIT;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->topics.items);
    struct gr_req_key *names = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *names);
    if (!resp->topics.items || !names) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        names[i] = (struct gr_req_key){body->topics.items[i].name, 0, i};
    bool *repeated;
    int32_t *first = gr_req_keys_first(req, names, n, &repeated);
    if (!first) return GR_HANDLER_CLOSE;
    int32_t out = 0; /* result entries: a name repeated in the request gets one, as Kafka's ControllerApis */
    for (int32_t i = 0; i < n; i++) {
        struct gr_create_topics_request_creatable_topic *qt = &body->topics.items[i];
        if (first[i] != i) continue; /* answered at its first occurrence */
        struct gr_create_topics_response_creatable_topic_result *rt = &resp->topics.items[out++];
        resp->topics.count = out;
        gr_create_topics_response_creatable_topic_result_init(rt);
        rt->name = qt->name;
        create_one(req, qt, repeated[i], rt);
    }
    return gr_req_topic_ops_wait(req, NULL);
}
