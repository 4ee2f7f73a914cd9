/*
 * describe_configs.c: DescribeConfigs (key 32), v1-v4. Resources, as Kafka 4.1's ConfigHelper answers them:
 *   TOPIC (2)          Kafka's full topic config set (server/topic_configs.h): the topic-level value, else
 *                      the broker synonym's, else the default, with config_source and synonyms. An empty or
 *                      invalid name is INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
 *   BROKER (4)         name = this node id: every row of the broker config table (server/config.c) with
 *                      its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG
 *                      or DEFAULT_CONFIG), then the dynamic listener SSL stores (server/tls_reload.h);
 *                      name "" = the cluster-wide dynamic defaults that are set; else INVALID_REQUEST.
 *   BROKER_LOGGER (8)  name = this node id: Gregor's one logger, "root", at its current level (not
 *                      read-only: IncrementalAlterConfigs changes it). Anything else: INVALID_REQUEST.
 * configuration_keys (null or empty = all) filters by name; unknown names are left out silently.
 * Synonyms are sent only when include_synonyms; documentation (v3+) only when include_documentation;
 * config_type (v3+) always. Authorization (ConfigHelper): DESCRIBE_CONFIGS on the topic, or on the cluster
 * for a broker or broker logger; the refused resources come after the others, TOPIC_/CLUSTER_AUTHORIZATION_
 * FAILED with Kafka's message and no configs. Read next: server/config_resources.h.
 */
#include <stdio.h>
#include <string.h>

#include "server/config_resources.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

typedef struct gr_describe_configs_response_describe_configs_result result_t;
typedef struct gr_describe_configs_response_describe_configs_resource_result entry_t;

static bool wanted(const struct gr_describe_configs_request_describe_configs_resource *res, const char *name)
{
    if (res->configuration_keys.count <= 0) return true;
    for (int32_t i = 0; i < res->configuration_keys.count; i++)
        if (gr_str_eq_c(res->configuration_keys.items[i], name)) return true;
    return false;
}

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

static void describe_topic(struct gr_req *req,
                           const struct gr_describe_configs_request_describe_configs_resource *res,
                           result_t *r)
{
    struct gr_broker *b = req->broker;
    const char *msg = NULL;
    int16_t err = gr_describe_topic_check(req, res->resource_name, &msg);
    if (err) {
        fail(r, err, msg);
        return;
    }
    const struct gr_image_topic *t =
        gr_image_topic_find(b->image, res->resource_name.ptr, (size_t)res->resource_name.len);
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
        if (gr_tcfg_describe(&defs[i], gr_describe_topic_value(req, t, defs[i].name), &b->cfg, &req->arena,
                             &e) ||
            !put(req, &e, &r->configs.items[r->configs.count++])) {
            fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
            return;
        }
    }
}

static void describe_broker(struct gr_req *req,
                            const struct gr_describe_configs_request_describe_configs_resource *res,
                            result_t *r)
{
    struct gr_broker *b = req->broker;
    bool per_broker = res->resource_name.len > 0; /* else the cluster-wide dynamic defaults */
    const char *msg = NULL;
    int16_t err = gr_describe_broker_check(req, res->resource_name, &msg);
    if (err) {
        fail(r, err, msg);
        return;
    }
    int n;
    const struct gr_config_def *defs = gr_config_defs(&n);
    r->configs.items = gr_arena_calloc(&req->arena, (size_t)(n + b->cfg.ssl_dyn_count) + 1, sizeof(entry_t));
    if (!r->configs.items) {
        fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
        return;
    }
    for (int i = 0; i < n + (per_broker ? b->cfg.ssl_dyn_count : 0); i++) {
        struct gr_cfg_entry e;
        if (i >= n) /* certificate reload's listener SSL keys */
            gr_describe_listener_ssl_entry(&b->cfg, i - n, &e);
        else if (per_broker || gr_config_dynamic(&b->cfg, GR_CFG_LEVEL_DEFAULT, defs[i].name))
            gr_bcfg_describe(&defs[i], &b->cfg, per_broker, &e);
        else
            continue;
        if (wanted(res, e.name) && !put(req, &e, &r->configs.items[r->configs.count++])) {
            fail(r, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of request memory");
            return;
        }
    }
}

static void describe_logger(struct gr_req *req,
                            const struct gr_describe_configs_request_describe_configs_resource *res,
                            result_t *r)
{
    const char *msg = NULL;
    int16_t err = gr_describe_logger_check(req, res->resource_name, &msg);
    if (err) {
        fail(r, err, msg);
        return;
    }
    if (!wanted(res, "root")) return;
    struct gr_cfg_entry e;
    gr_describe_logger_entry(&e);
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
    resp->results.count = 0;
    for (int32_t k = 0; k < 2 * n; k++) { /* the authorized resources, then the refused ones */
        const struct gr_describe_configs_request_describe_configs_resource *res =
            &body->resources.items[k % n];
        const char *msg = NULL;
        int16_t denied = gr_config_resource_denied(req, res->resource_type, res->resource_name,
                                                   GR_ACL_OP_DESCRIBE_CONFIGS, &msg);
        if ((denied != 0) != (k >= n)) continue;
        result_t *r = &resp->results.items[resp->results.count++];
        gr_describe_configs_response_describe_configs_result_init(r);
        r->resource_type = res->resource_type;
        r->resource_name = res->resource_name;
        if (denied) {
            fail(r, denied, msg);
            continue;
        }
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
            char buf[64];
            snprintf(buf, sizeof buf, "Unsupported resource type %d", res->resource_type);
            fail(r, GR_ERR_INVALID_REQUEST, gr_arena_strndup(&req->arena, buf, strlen(buf)));
        }
        }
    }
    return GR_HANDLER_DONE;
}
