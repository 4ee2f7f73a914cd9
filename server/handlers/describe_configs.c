/*
 * describe_configs.c: DescribeConfigs (key 32), v1-v4. Resources, as Kafka 4.1's ConfigHelper answers them:
 *   TOPIC (2)          Kafka's full topic config set (server/topic_configs.h): the topic-level value, else
 *                      the broker synonym's, else the default, with config_source and synonyms. An empty or
 *                      invalid name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
 *   BROKER (4)         name = this node id: every row of the broker config table (server/config.c) with
 *                      its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG
 *                      or DEFAULT_CONFIG); name "" = the cluster-wide dynamic defaults that are set (Kafka's
 *                      ConfigHelper); another id or a non-number INVALID_REQUEST.
 *   BROKER_LOGGER (8)  name = this node id: Gregor's one logger, "root", at its current level (not
 *                      read-only: IncrementalAlterConfigs changes it).
 *   anything else      INVALID_REQUEST (Gregor has no client-metrics or group configs).
 * configuration_keys (null or empty = all) filters by name; unknown names are left out silently.
 * Synonyms are sent only when include_synonyms; documentation (v3+) only when include_documentation;
 * config_type (v3+) always. Read next: server/topic_configs.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/handlers/handlers.h"
#include "server/topic_configs.h"

typedef struct gr_describe_configs_response_describe_configs_result result_t;
typedef struct gr_describe_configs_response_describe_configs_resource_result entry_t;

static bool wanted(const struct gr_describe_configs_request_describe_configs_resource *res, const char *name)
{
    if (res->configuration_keys.count <= 0) return true;
    for (int32_t i = 0; i < res->configuration_keys.count; i++)
        if (gr_str_eq_c(res->configuration_keys.items[i], name)) return true;
    return false;
}

static const char *msgf(struct gr_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *msgf(struct gr_req *req, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return gr_arena_strndup(&req->arena, buf, strlen(buf));
}

/* A name view as printf arguments: "%.*s". */
#define STR_ARG(s) (int)((s).len > 0 ? (s).len : 0), ((s).ptr ? (s).ptr : "")

static void fail(result_t *r, int16_t code, const char *msg)
{
    r->error_code = code;
    r->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
    r->configs.count = 0;
}

/* Copies one described entry into the response. */
static bool put(struct gr_req *req, const struct gr_cfg_entry *e, entry_t *out)
{
    struct gr_describe_configs_request *body = req->body;
    gr_describe_configs_response_describe_configs_resource_result_init(out);
    out->name = gr_str_c(e->name);
    out->value = e->value ? gr_str_c(e->value) : GR_STR_NULL;
    out->read_only = e->read_only;
    out->config_source = e->source;
    out->is_sensitive = e->is_sensitive;
    out->config_type = e->type;
    out->documentation = body->include_documentation && e->doc ? gr_str_c(e->doc) : GR_STR_NULL;
    if (!body->include_synonyms || e->synonym_count == 0) return true;
    out->synonyms.items = gr_arena_calloc(&req->arena, (size_t)e->synonym_count, sizeof *out->synonyms.items);
    if (!out->synonyms.items) return false;
    out->synonyms.count = e->synonym_count;
    for (int s = 0; s < e->synonym_count; s++) {
        gr_describe_configs_response_describe_configs_synonym_init(&out->synonyms.items[s]);
        out->synonyms.items[s].name = gr_str_c(e->synonyms[s].name);
        out->synonyms.items[s].value = e->synonyms[s].value ? gr_str_c(e->synonyms[s].value) : GR_STR_NULL;
        out->synonyms.items[s].source = e->synonyms[s].source;
    }
    return true;
}

/* The topic-level value of `name`, normalised as Kafka's LogConfig prints it (CreateTopics stores values as
 * the request gave them, as Kafka's metadata does: " 3600000" is shown "3600000"). */
static const char *topic_value(struct gr_req *req, const struct gr_topic *t, const char *name)
{
    const char *v = gr_topic_config_get(t, name), *norm, *msg;
    return v && gr_tcfg_check(name, v, &req->arena, &norm, &msg) == GR_ERR_NONE ? norm : v;
}

static void describe_topic(struct gr_req *req,
                           const struct gr_describe_configs_request_describe_configs_resource *res,
                           result_t *r)
{
    struct gr_broker *b = req->broker;
    if (res->resource_name.len <= 0) {
        fail(r, GR_ERR_INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not allowed");
        return;
    }
    if (!gr_topic_name_valid(res->resource_name)) {
        fail(
            r, GR_ERR_INVALID_TOPIC_EXCEPTION,
            msgf(req,
                 "Topic name is invalid: '%.*s' must be 1 to 249 characters of ASCII alphanumerics, '.', '_' "
                 "and '-', and not '.' or '..'",
                 STR_ARG(res->resource_name)));
        return;
    }
    struct gr_topic *t = gr_topic_lookup(b, res->resource_name);
    if (!t) {
        r->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        return;
    }
    int n;
    const struct gr_tcfg_def *defs = gr_tcfg_defs(&n);
    r->configs.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *r->configs.items);
    if (!r->configs.items) {
        fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!wanted(res, defs[i].name)) continue;
        struct gr_cfg_entry e;
        if (gr_tcfg_describe(&defs[i], topic_value(req, t, defs[i].name), &b->cfg, &req->arena, &e) ||
            !put(req, &e, &r->configs.items[r->configs.count++])) {
            fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
            return;
        }
    }
}

/* The node id named by a broker resource: 0 and *id, or -1 when it is not a base-10 int. */
static int parse_node(struct gr_str name, int32_t *id)
{
    char buf[16];
    if (name.len <= 0 || name.len >= (int32_t)sizeof buf) return -1;
    memcpy(buf, name.ptr, (size_t)name.len);
    buf[name.len] = 0;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || *end || end == buf || v < INT32_MIN || v > INT32_MAX) return -1;
    *id = (int32_t)v;
    return 0;
}

static void describe_broker(struct gr_req *req,
                            const struct gr_describe_configs_request_describe_configs_resource *res,
                            result_t *r)
{
    struct gr_broker *b = req->broker;
    bool per_broker = res->resource_name.len > 0; /* else the cluster-wide dynamic defaults */
    int32_t id;
    if (per_broker && parse_node(res->resource_name, &id)) {
        fail(r, GR_ERR_INVALID_REQUEST,
             msgf(req, "Broker id must be an integer, but it is: %.*s", STR_ARG(res->resource_name)));
        return;
    }
    if (per_broker && id != b->node_id) {
        fail(r, GR_ERR_INVALID_REQUEST,
             msgf(req, "Unexpected broker id, expected %d or empty string, but received %.*s", b->node_id,
                  STR_ARG(res->resource_name)));
        return;
    }
    int n;
    const struct gr_config_def *defs = gr_config_defs(&n);
    r->configs.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *r->configs.items);
    if (!r->configs.items) {
        fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!wanted(res, defs[i].name)) continue;
        if (!per_broker && !gr_config_dynamic(&b->cfg, GR_CFG_LEVEL_DEFAULT, defs[i].name)) continue;
        struct gr_cfg_entry e;
        gr_bcfg_describe(&defs[i], &b->cfg, per_broker, &e);
        if (!put(req, &e, &r->configs.items[r->configs.count++])) {
            fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
            return;
        }
    }
}

static void describe_logger(struct gr_req *req,
                            const struct gr_describe_configs_request_describe_configs_resource *res,
                            result_t *r)
{
    struct gr_broker *b = req->broker;
    int32_t id;
    if (res->resource_name.len <= 0) {
        fail(r, GR_ERR_INVALID_REQUEST, "Broker id must not be empty");
        return;
    }
    if (parse_node(res->resource_name, &id)) {
        fail(r, GR_ERR_INVALID_REQUEST,
             msgf(req, "Broker id must be an integer, but it is: %.*s", STR_ARG(res->resource_name)));
        return;
    }
    if (id != b->node_id) {
        fail(r, GR_ERR_INVALID_REQUEST,
             msgf(req, "Unexpected broker id, expected %d but received %.*s", b->node_id,
                  STR_ARG(res->resource_name)));
        return;
    }
    if (!wanted(res, "root")) return;
    struct gr_cfg_entry e;
    memset(&e, 0, sizeof e);
    e.name = "root";
    static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    e.value = level_names[gr_log_get_level()];
    e.source = GR_CFGS_DYNAMIC_BROKER_LOGGER;
    e.type = GR_CFGT_UNKNOWN;
    e.doc = "Gregor's only logger: gregor.log.level at start, IncrementalAlterConfigs at runtime.";
    r->configs.items = gr_arena_calloc(&req->arena, 1, sizeof *r->configs.items);
    if (!r->configs.items || !put(req, &e, &r->configs.items[0])) {
        fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
        return;
    }
    r->configs.count = 1;
}

enum gr_handler_rc gr_handle_describe_configs(struct gr_req *req)
{
    struct gr_describe_configs_request *body = req->body;
    struct gr_describe_configs_response *resp = req->resp;
    int32_t n = body->resources.count > 0 ? body->resources.count : 0;
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
    if (!resp->results.items) return GR_HANDLER_CLOSE;
    resp->results.count = n;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_describe_configs_request_describe_configs_resource *res = &body->resources.items[i];
        result_t *r = &resp->results.items[i];
        gr_describe_configs_response_describe_configs_result_init(r);
        r->resource_type = res->resource_type;
        r->resource_name = res->resource_name;
        switch (res->resource_type) {
        case GR_CFG_RESOURCE_TOPIC:
            describe_topic(req, res, r);
            break;
        case GR_CFG_RESOURCE_BROKER:
            describe_broker(req, res, r);
            break;
        case GR_CFG_RESOURCE_BROKER_LOGGER:
            describe_logger(req, res, r);
            break;
        default: {
            fail(r, GR_ERR_INVALID_REQUEST, msgf(req, "Unsupported resource type %d", res->resource_type));
        }
        }
    }
    return GR_HANDLER_DONE;
}
