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
 * Read next: server/topic_configs.h (gr_tcfg_apply_ops).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "server/handlers/handlers.h"
#include "server/topic_configs.h"

/* The topic's current topic-level set, borrowed from storage. */
static bool current_set(struct gr_req *req, struct gr_topic *t, struct gr_tcfg_set *cur)
{
    cur->count = 0;
    cur->keys = cur->values = NULL;
    if (!t) return true;
    int n = gr_topic_config_count(t);
    cur->keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *cur->keys);
    cur->values = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *cur->values);
    if (!cur->keys || !cur->values) return false;
    for (int i = 0; i < n; i++)
        gr_topic_config_at(t, i, &cur->keys[i], &cur->values[i]);
    cur->count = n;
    return true;
}

typedef struct gr_incremental_alter_configs_response_alter_configs_resource_response result_t;

static int16_t alter_topic(struct gr_req *req,
                           const struct gr_incremental_alter_configs_request_alter_configs_resource *res,
                           const struct gr_tcfg_op *ops, int n, bool validate_only, const char **msg,
                           result_t *r)
{
    struct gr_topic *t = res->resource_name.len > 0 ? gr_topic_lookup(req->broker, res->resource_name) : NULL;
    struct gr_tcfg_set cur, next;
    if (!current_set(req, t, &cur)) return GR_ERR_UNKNOWN_SERVER_ERROR;
    int16_t cerr = gr_tcfg_apply_ops(&cur, ops, n, &req->arena, &next, msg);
    if (cerr == GR_ERR_INVALID_REQUEST || cerr == GR_ERR_UNKNOWN_SERVER_ERROR) return cerr;
    const char *nmsg = NULL;
    int16_t err = gr_alter_topic_check(req, res->resource_name, &nmsg);
    if (err) return *msg = nmsg, err;
    if (cerr) return cerr;
    if (!t) return gr_alter_topic_missing(req, res->resource_name, msg);
    if (validate_only) return GR_ERR_NONE;
    return gr_alter_topic_store(req, t, &next, msg, &r->error_code, &r->error_message);
}

/* Kafka's RuntimeLoggerManager.validateResourceNameIsNodeId (its message repeats the node id). */
static int16_t logger_node(struct gr_req *req, struct gr_str name, const char **msg)
{
    char buf[16], out[160];
    char *end = buf;
    long v = 0;
    if (name.len > 0 && name.len < (int32_t)sizeof buf) {
        memcpy(buf, name.ptr, (size_t)name.len);
        buf[name.len] = 0;
        v = strtol(buf, &end, 10);
    }
    if (end == buf || *end)
        snprintf(out, sizeof out, "Node id must be an integer, but it is: %.*s",
                 (int)(name.len > 0 ? name.len : 0), name.ptr ? name.ptr : "");
    else if (v != req->broker->node_id)
        snprintf(out, sizeof out, "Unexpected node id. Expected %d, but received %d", req->broker->node_id,
                 req->broker->node_id);
    else
        return GR_ERR_NONE;
    *msg = gr_arena_strndup(&req->arena, out, strlen(out));
    return GR_ERR_INVALID_REQUEST;
}

/* Gregor's level for one of Kafka's log levels, -1 when it is not one. */
static int logger_level(const char *v)
{
    static const char *const names[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"};
    static const int levels[] = {GR_LOG_DEBUG, GR_LOG_DEBUG, GR_LOG_INFO,
                                 GR_LOG_WARN,  GR_LOG_ERROR, GR_LOG_ERROR};
    for (int i = 0; v && i < 6; i++)
        if (strcmp(v, names[i]) == 0) return levels[i];
    return -1;
}

/* Kafka's RuntimeLoggerManager.validateLogLevelConfigs for one operation: a code, and the message in buf. */
static int16_t logger_op_check(const struct gr_tcfg_op *op, char *buf, size_t cap)
{
    if (op->op == GR_CFG_OP_APPEND || op->op == GR_CFG_OP_SUBTRACT) {
        snprintf(buf, cap, "%s operation is not allowed for the BROKER_LOGGER resource",
                 op->op == GR_CFG_OP_APPEND ? "APPEND" : "SUBTRACT");
        return GR_ERR_INVALID_REQUEST;
    }
    if (op->op != GR_CFG_OP_SET && op->op != GR_CFG_OP_DELETE) {
        snprintf(buf, cap, "Unknown operation type %d is not allowed for the BROKER_LOGGER resource", op->op);
        return GR_ERR_INVALID_REQUEST;
    }
    if (strcmp(op->key, "root") != 0) {
        snprintf(buf, cap, "Logger %s does not exist!", op->key);
        return GR_ERR_INVALID_CONFIG;
    }
    if (op->op == GR_CFG_OP_DELETE) {
        snprintf(buf, cap, "Removing the log level of the root logger is not allowed");
        return GR_ERR_INVALID_REQUEST;
    }
    if (logger_level(op->value) < 0) {
        snprintf(buf, cap,
                 "Cannot set the log level of %s to %s as it is not a supported log level. Valid log levels "
                 "are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
                 op->key, op->value);
        return GR_ERR_INVALID_CONFIG;
    }
    return GR_ERR_NONE;
}

/* A BROKER_LOGGER resource: validates every operation first, then applies (Kafka's order). */
static int16_t alter_logger(struct gr_req *req, struct gr_str name, const struct gr_tcfg_op *ops, int n,
                            bool validate_only, const char **msg)
{
    char buf[300];
    int16_t err = logger_node(req, name, msg);
    for (int i = 0; i < n && !err; i++)
        if ((err = logger_op_check(&ops[i], buf, sizeof buf)))
            *msg = gr_arena_strndup(&req->arena, buf, strlen(buf));
    for (int i = 0; i < n && !err && !validate_only; i++) {
        gr_log_set_level((enum gr_log_level)logger_level(ops[i].value));
        GR_WARN("Updated the log level of root to %s", ops[i].value);
    }
    return err;
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
    if ((err = gr_bcfg_apply_ops(&cur, ops, n, &req->arena, &next, msg)) || validate_only) return err;
    return gr_alter_broker_store(req, res->resource_name, &next, msg, &r->error_code, &r->error_message);
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
        return alter_logger(req, res->resource_name, ops, n, validate_only, msg);
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
        } else {
            r->error_code = alter_one(req, res, body->validate_only, &msg, r);
        }
        r->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
    }
    return gr_req_topic_ops_wait(req, gr_alter_topics_stored);
}
