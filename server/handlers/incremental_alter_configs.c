/*
 * incremental_alter_configs.c: IncrementalAlterConfigs (key 44), v0-v1. Applies SET, DELETE, APPEND and
 * SUBTRACT operations to a topic's dynamic config set (APPEND/SUBTRACT only on LIST configs, starting from
 * the current value or the default; server/topic_configs.h has the rules). The resource checks and their
 * order are AlterConfigs' (alter_configs.c): duplicate resources, duplicate keys, null values for
 * non-DELETE operations, the topic name, then the config values (INVALID_CONFIG with a message, values
 * Gregor does not enforce included), then the topic's existence; validate_only stops before writing.
 * BROKER resources change the dynamic broker configs of this broker (name = node id) or of the cluster
 * default (name ""), server/topic_configs.h gr_bcfg_apply_ops, written then applied (alter_configs.c).
 * BROKER_LOGGER resources (Kafka's RuntimeLoggerManager) set the level of Gregor's one logger, "root"
 * (Kafka's root logger name), at once and not persisted, as in Kafka: SET to one of Kafka's levels (TRACE
 * runs as DEBUG and FATAL as ERROR: Gregor's log has four levels); DELETE of root is refused.
 * The resource checks, the logger and the writes are server/config_resources.h's.
 * Authorization (ControllerApis): ALTER_CONFIGS on the topic, or on the cluster for a broker or broker
 * logger, else TOPIC_/CLUSTER_AUTHORIZATION_FAILED with Kafka's message (gr_config_resource_denied).
 * Read next: server/config_resources.h, server/topic_configs.h (gr_tcfg_apply_ops).
 */
#include <stdio.h>
#include <string.h>

#include "cluster/image.h"
#include "server/config_resources.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

/* The topic's current topic-level set, borrowed from the image. */
static bool current_set(struct gr_req *req, const struct gr_image_topic *t, struct gr_tcfg_set *cur)
{
    cur->count = 0;
    cur->keys = cur->values = NULL;
    if (!t) return true;
    int n = t->config_count;
    cur->keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *cur->keys);
    cur->values = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *cur->values);
    if (!cur->keys || !cur->values) return false;
    for (int i = 0; i < n; i++)
        cur->keys[i] = t->configs[i].name, cur->values[i] = t->configs[i].value;
    cur->count = n;
    return true;
}

typedef struct gr_incremental_alter_configs_response_alter_configs_resource_response result_t;

static int16_t alter_topic(struct gr_req *req,
                           const struct gr_incremental_alter_configs_request_alter_configs_resource *res,
                           const struct gr_tcfg_op *ops, int n, bool validate_only, const char **msg,
                           result_t *r)
{
    const struct gr_image_topic *t =
        res->resource_name.len > 0
            ? gr_image_topic_find(req->broker->image, res->resource_name.ptr, (size_t)res->resource_name.len)
            : NULL;
    struct gr_tcfg_set cur, next;
    if (!current_set(req, t, &cur)) return GR_ERR_UNKNOWN_SERVER_ERROR;
    int16_t cerr = gr_tcfg_apply_ops(&cur, ops, n, &req->arena, &next, msg);
    if (cerr == GR_ERR_INVALID_REQUEST || cerr == GR_ERR_UNKNOWN_SERVER_ERROR) return cerr;
    const char *nmsg = NULL;
    int16_t err = gr_alter_topic_check(req, res->resource_name, &nmsg);
    if (err) return *msg = nmsg, err;
    if (cerr) return cerr;
    if ((err = gr_alter_topic_single_node(req, &next, msg))) return err;
    if (!t) return gr_alter_topic_missing(req, res->resource_name, msg);
    if (validate_only) return GR_ERR_NONE;
    return gr_alter_topic_store(req, t, &next, msg, &r->error_code, &r->error_message);
}

static int16_t alter_broker(struct gr_req *req,
                            const struct gr_incremental_alter_configs_request_alter_configs_resource *res,
                            const struct gr_tcfg_op *ops, int n, bool validate_only, const char **msg,
                            result_t *r)
{
    struct gr_tcfg_set cur, next;
    int level = res->resource_name.len > 0 ? GR_CFG_LEVEL_BROKER : GR_CFG_LEVEL_DEFAULT;
    int16_t err = gr_alter_broker_name(req, res->resource_name, msg);
    if (err) return err;
    if (gr_bcfg_current(&req->broker->cfg, (enum gr_config_level)level, &req->arena, &cur))
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    if ((err = gr_bcfg_apply_ops(&cur, ops, n, &req->arena, &next, msg))) return err;
    const char **named = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *named);
    if (!named) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < n; i++) /* the listeners whose SSL stores the operations name are rebuilt */
        named[i] = ops[i].key;
    struct gr_tls_reload *reload;
    if ((err = gr_alter_broker_tls(req, res->resource_name, &next, named, n, validate_only, &reload, msg)) ||
        validate_only)
        return err;
    return gr_alter_broker_store(req, res->resource_name, &next, reload, msg, &r->error_code,
                                 &r->error_message);
}

static int16_t alter_one(struct gr_req *req,
                         const struct gr_incremental_alter_configs_request_alter_configs_resource *res,
                         bool validate_only, const char **msg, result_t *r)
{
    int n = res->configs.count > 0 ? res->configs.count : 0;
    struct gr_tcfg_op *ops = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *ops);
    const char **keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    const char **values = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *values);
    int8_t *opids = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *opids);
    if (!ops || !keys || !values || !opids) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < n; i++) {
        const struct gr_incremental_alter_configs_request_alterable_config *c = &res->configs.items[i];
        keys[i] = ops[i].key = gr_req_strdup(req, c->name);
        values[i] = ops[i].value = c->value.len < 0 ? NULL : gr_req_strdup(req, c->value);
        opids[i] = ops[i].op = c->config_operation;
        if (!ops[i].key || (c->value.len >= 0 && !ops[i].value)) return GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    if (res->resource_type == GR_CFG_RESOURCE_TOPIC)
        return alter_topic(req, res, ops, n, validate_only, msg, r);
    int16_t err = gr_tcfg_precheck(keys, values, opids, n, &req->arena, msg);
    if (err) return err;
    if (res->resource_type == GR_CFG_RESOURCE_BROKER)
        return alter_broker(req, res, ops, n, validate_only, msg, r);
    if (res->resource_type == GR_CFG_RESOURCE_BROKER_LOGGER)
        return gr_alter_logger(req, res->resource_name, ops, n, validate_only, msg);
    char buf[64];
    snprintf(buf, sizeof buf, "Unknown resource type %d", res->resource_type);
    *msg = gr_arena_strndup(&req->arena, buf, strlen(buf));
    return GR_ERR_INVALID_REQUEST;
}

enum gr_handler_rc gr_handle_incremental_alter_configs(struct gr_req *req)
{
    struct gr_incremental_alter_configs_request *body = req->body;
    struct gr_incremental_alter_configs_response *resp = req->resp;
    if (gr_req_topic_barrier(req)) return GR_HANDLER_WAIT; /* earlier topic operations first */
    int32_t n = body->resources.count > 0 ? body->resources.count : 0;
    resp->responses.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->responses.items);
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    if (!resp->responses.items || !keys) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        keys[i] = (struct gr_req_key){body->resources.items[i].resource_name,
                                      body->resources.items[i].resource_type, i};
    bool *repeated;
    if (!gr_req_keys_first(req, keys, n, &repeated)) return GR_HANDLER_CLOSE;
    resp->responses.count = n;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_incremental_alter_configs_request_alter_configs_resource *res =
            &body->resources.items[i];
        struct gr_incremental_alter_configs_response_alter_configs_resource_response *r =
            &resp->responses.items[i];
        gr_incremental_alter_configs_response_alter_configs_resource_response_init(r);
        r->resource_type = res->resource_type;
        r->resource_name = res->resource_name;
        const char *msg = NULL;
        if (repeated[i]) {
            r->error_code = GR_ERR_INVALID_REQUEST;
            msg = "Each resource must appear at most once.";
        } else if ((r->error_code = gr_config_resource_denied(req, res->resource_type, res->resource_name,
                                                              GR_ACL_OP_ALTER_CONFIGS, &msg))) {
            /* ControllerApis: refused, nothing changed */
        } else {
            r->error_code = alter_one(req, res, body->validate_only, &msg, r);
        }
        r->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
    }
    return gr_req_topic_ops_wait(req, gr_alter_topics_stored);
}
