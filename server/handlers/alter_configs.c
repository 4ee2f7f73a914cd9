/*
 * alter_configs.c: AlterConfigs (key 33), v0-v2.
 * Every version REPLACES the resource's whole dynamic config set: keys not sent return to their defaults
 * (Kafka's ConfigurationControlManager.legacyAlterConfigResource). Per resource, in Kafka 4.1's order:
 *   - a resource (type, name) given twice: INVALID_REQUEST "Each resource must appear at most once.";
 *   - duplicate keys or null values: INVALID_REQUEST (gr_tcfg_precheck);
 *   - TOPIC: name "" INVALID_REQUEST "Default topic resources are not allowed.", an invalid name
 *     INVALID_TOPIC_EXCEPTION, then unknown keys / bad values / values Gregor does not enforce
 *     INVALID_CONFIG with a message (server/topic_configs.h), then an unknown topic
 *     UNKNOWN_TOPIC_OR_PARTITION "The topic 'x' does not exist."; validate_only stops there;
 *   - BROKER: a name other than "" (the cluster-wide default) or this node id INVALID_REQUEST (Kafka's
 *     messages), then the dynamic broker config rules (server/topic_configs.h gr_bcfg_replace); the new
 *     set is written to the log directory (server/dynconf.h, on the I/O pool) and then applied;
 *   - any other type: INVALID_REQUEST "Unknown resource type N".
 * The new set is written durably by storage (gr_topic_op_set_configs: the topic file is replaced on the
 * I/O pool while the request waits) and applies from the next append, roll or retention run.
 * The resource checks and the writes are server/config_resources.h's (IncrementalAlterConfigs shares them).
 * Authorization (ControllerApis): ALTER_CONFIGS on the topic, or on the cluster for a broker, else
 * TOPIC_/CLUSTER_AUTHORIZATION_FAILED with Kafka's message (gr_config_resource_denied).
 * Read next: incremental_alter_configs.c, server/config_resources.h, server/topic_configs.h.
 */
#include "server/config_resources.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

/* One TOPIC resource: new set = exactly the given pairs. */
static int16_t alter_topic(struct gr_req *req,
                           const struct gr_alter_configs_request_alter_configs_resource *res,
                           const char *const *keys, const char *const *values, int n, bool validate_only,
                           const char **msg,
                           struct gr_alter_configs_response_alter_configs_resource_response *r)
{
    struct gr_tcfg_set set;
    int16_t cerr = gr_tcfg_replace(keys, values, n, &req->arena, &set, msg);
    if (cerr == GR_ERR_INVALID_REQUEST) return cerr; /* duplicates or nulls: checked before anything else */
    const char *nmsg = NULL;
    int16_t err = gr_alter_topic_check(req, res->resource_name, &nmsg);
    if (err) return *msg = nmsg, err;
    if (cerr) return cerr;
    if ((err = gr_alter_topic_single_node(req, &set, msg))) return err;
    const struct gr_image_topic *t =
        gr_image_topic_find(req->broker->image, res->resource_name.ptr, (size_t)res->resource_name.len);
    if (!t) return gr_alter_topic_missing(req, res->resource_name, msg);
    if (validate_only) return GR_ERR_NONE;
    return gr_alter_topic_store(req, t, &set, msg, &r->error_code, &r->error_message);
}

/* One BROKER resource: new dynamic set = exactly the given pairs; listener SSL stores named by the new or
   the current set are rebuilt (server/tls_reload.h). */
static int16_t alter_broker(struct gr_req *req, struct gr_str name, const char *const *keys,
                            const char *const *values, int n, bool validate_only, const char **msg,
                            struct gr_alter_configs_response_alter_configs_resource_response *r)
{
    struct gr_tcfg_set set, cur;
    struct gr_tls_reload *reload;
    int16_t err = gr_alter_broker_name(req, name, msg);
    if (err || (err = gr_bcfg_replace(keys, values, n, &req->arena, &set, msg))) return err;
    int level = name.len > 0 ? GR_CFG_LEVEL_BROKER : GR_CFG_LEVEL_DEFAULT;
    if (gr_bcfg_current(&req->broker->cfg, (enum gr_config_level)level, &req->arena, &cur))
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    const char **named = gr_arena_calloc(&req->arena, (size_t)(n + cur.count) + 1, sizeof *named);
    if (!named) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < n; i++)
        named[i] = keys[i];
    for (int i = 0; i < cur.count; i++)
        named[n + i] = cur.keys[i];
    if ((err = gr_alter_broker_tls(req, name, &set, named, n + cur.count, validate_only, &reload, msg)) ||
        validate_only)
        return err;
    return gr_alter_broker_store(req, name, &set, reload, msg, &r->error_code, &r->error_message);
}

static int16_t alter_one(struct gr_req *req,
                         const struct gr_alter_configs_request_alter_configs_resource *res,
                         bool validate_only, const char **msg,
                         struct gr_alter_configs_response_alter_configs_resource_response *r)
{
    int n = res->configs.count > 0 ? res->configs.count : 0;
    const char **keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    const char **values = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *values);
    if (!keys || !values) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < n; i++) {
        keys[i] = gr_req_strdup(req, res->configs.items[i].name);
        values[i] =
            res->configs.items[i].value.len < 0 ? NULL : gr_req_strdup(req, res->configs.items[i].value);
        if (!keys[i] || (res->configs.items[i].value.len >= 0 && !values[i]))
            return GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    if (res->resource_type == GR_CFG_RESOURCE_TOPIC)
        return alter_topic(req, res, keys, values, n, validate_only, msg, r);
    int16_t err = gr_tcfg_precheck(keys, values, NULL, n, &req->arena, msg);
    if (err) return err;
    if (res->resource_type == GR_CFG_RESOURCE_BROKER)
        return alter_broker(req, res->resource_name, keys, values, n, validate_only, msg, r);
    return gr_alter_unknown_type(req, res->resource_type, msg);
}

enum gr_handler_rc gr_handle_alter_configs(struct gr_req *req)
{
    struct gr_alter_configs_request *body = req->body;
    struct gr_alter_configs_response *resp = req->resp;
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
        const struct gr_alter_configs_request_alter_configs_resource *res = &body->resources.items[i];
        struct gr_alter_configs_response_alter_configs_resource_response *r = &resp->responses.items[i];
        gr_alter_configs_response_alter_configs_resource_response_init(r);
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
