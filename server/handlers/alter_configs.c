/*
 * alter_configs.c: AlterConfigs (key 33), v0-v2, and the resource checks IncrementalAlterConfigs shares.
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
 * Read next: incremental_alter_configs.c, server/topic_configs.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/dynconf.h"
#include "server/handlers/handlers.h"
#include "server/topic_configs.h"

static const char *msgf(struct gr_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *msgf(struct gr_req *req, const char *fmt, ...)
{
    char buf[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *m = gr_arena_strndup(&req->arena, buf, strlen(buf));
    return m ? m : "config change refused";
}

#define STR_ARG(s) (int)((s).len > 0 ? (s).len : 0), ((s).ptr ? (s).ptr : "")

int16_t gr_alter_topic_check(struct gr_req *req, struct gr_str name, const char **msg)
{
    if (name.len <= 0) {
        *msg = "Default topic resources are not allowed.";
        return GR_ERR_INVALID_REQUEST;
    }
    if (!gr_topic_name_valid(name)) {
        *msg = msgf(
            req,
            "Topic name is invalid: '%.*s' must be 1 to 249 characters of ASCII alphanumerics, '.', '_' and "
            "'-', and not '.' or '..'",
            STR_ARG(name));
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    return GR_ERR_NONE;
}

int16_t gr_alter_topic_missing(struct gr_req *req, struct gr_str name, const char **msg)
{
    *msg = msgf(req, "The topic '%.*s' does not exist.", STR_ARG(name));
    return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
}

/* One topic's config write: its outcome is copied into the response entry by gr_alter_topics_stored,
 * after the handler filled every entry (a completion may come before the handler's own assignment). */
struct alter_slot {
    int16_t *code_out;
    struct gr_str *message_out;
    int16_t code;
    const char *msg;
    struct alter_slot *next;
    int level;              /* BROKER resources: enum gr_config_level; topics: -1 */
    struct gr_tcfg_set set; /* BROKER resources: the new dynamic set of `level` */
};

static void stored(struct gr_req *req, void *item, int err, struct gr_topic *t)
{
    struct alter_slot *slot = item;
    if (slot->level >= 0 && err) {
        GR_ERROR("writing %s: %s", GR_DYNCONF_FILE, strerror(-err));
        slot->code = GR_ERR_KAFKA_STORAGE_ERROR;
        slot->msg = "The broker could not write its dynamic configuration";
    } else if (slot->level >= 0) {
        gr_dynconf_commit(req->broker, (enum gr_config_level)slot->level, &slot->set);
    } else if (err == -EINVAL) {
        slot->code = GR_ERR_INVALID_CONFIG;
        slot->msg = "The storage layer refused the configuration";
    } else if (err == -ENOENT) {
        slot->code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        slot->msg = "The topic was deleted.";
    } else if (err) {
        GR_ERROR("writing topic configs: %s", strerror(-err));
        slot->code = GR_ERR_KAFKA_STORAGE_ERROR;
        slot->msg = "The broker could not write the topic's configuration";
    } else {
        GR_INFO("topic %s: configuration changed (%d topic-level keys)", gr_topic_name(t),
                gr_topic_config_count(t));
    }
}

int16_t gr_alter_topic_store(struct gr_req *req, struct gr_topic *t, const struct gr_tcfg_set *set,
                             const char **msg, int16_t *code_out, struct gr_str *message_out)
{
    struct alter_slot *slot = gr_arena_calloc(&req->arena, 1, sizeof *slot);
    if (!slot) return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    *slot = (struct alter_slot){code_out, message_out, GR_ERR_NONE, NULL, req->hstate, -1, {NULL, NULL, 0}};
    if (!gr_req_topic_op(req, gr_topic_op_set_configs(t, set->keys, set->values, set->count), stored, slot))
        return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    req->hstate = slot;
    return GR_ERR_NONE;
}

void gr_alter_topics_stored(struct gr_req *req)
{
    for (struct alter_slot *slot = req->hstate; slot; slot = slot->next)
        if (slot->code) {
            *slot->code_out = slot->code;
            *slot->message_out = gr_str_c(slot->msg);
        }
}

/* Kafka's ConfigAdminManager.validateResourceNameIsCurrentNodeId for a non-empty broker name. */
static int16_t node_name_check(struct gr_req *req, struct gr_str name, const char **msg)
{
    char buf[16];
    char *end = buf;
    long v = 0;
    if (name.len > 0 && name.len < (int32_t)sizeof buf) {
        memcpy(buf, name.ptr, (size_t)name.len);
        buf[name.len] = 0;
        errno = 0;
        v = strtol(buf, &end, 10);
        if (errno) end = buf;
    }
    if (end == buf || *end) {
        *msg = msgf(req, "Node id must be an integer, but it is: %.*s", STR_ARG(name));
        return GR_ERR_INVALID_REQUEST;
    }
    if (v != req->broker->node_id) {
        *msg = msgf(req, "Unexpected broker id, expected %d, but received %.*s", req->broker->node_id,
                    STR_ARG(name));
        return GR_ERR_INVALID_REQUEST;
    }
    return GR_ERR_NONE;
}

int16_t gr_alter_broker_name(struct gr_req *req, struct gr_str name, const char **msg)
{
    return name.len > 0 ? node_name_check(req, name, msg) : GR_ERR_NONE;
}

int16_t gr_alter_broker_store(struct gr_req *req, struct gr_str name, const struct gr_tcfg_set *set,
                              const char **msg, int16_t *code_out, struct gr_str *message_out)
{
    int level = name.len > 0 ? GR_CFG_LEVEL_BROKER : GR_CFG_LEVEL_DEFAULT;
    struct alter_slot *slot = gr_arena_calloc(&req->arena, 1, sizeof *slot);
    if (!slot) return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    *slot = (struct alter_slot){code_out, message_out, GR_ERR_NONE, NULL, req->hstate, level, *set};
    const struct gr_tcfg_set *sets[2] = {NULL, NULL}; /* the file holds both levels: pending ones included */
    for (struct alter_slot *s = slot; s; s = s->next)
        if (s->level >= 0 && !sets[s->level]) sets[s->level] = &s->set;
    size_t len;
    char *file = gr_dynconf_format(&req->broker->cfg, sets[0], sets[1], &req->arena, &len);
    if (!file || !gr_req_topic_op(req, gr_topic_op_meta_write(GR_DYNCONF_FILE, file, len), stored, slot))
        return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    req->hstate = slot;
    return GR_ERR_NONE;
}

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
    struct gr_topic *t = gr_topic_lookup(req->broker, res->resource_name);
    if (!t) return gr_alter_topic_missing(req, res->resource_name, msg);
    if (validate_only) return GR_ERR_NONE;
    return gr_alter_topic_store(req, t, &set, msg, &r->error_code, &r->error_message);
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
    if (res->resource_type == GR_CFG_RESOURCE_BROKER) {
        struct gr_tcfg_set set;
        if ((err = gr_alter_broker_name(req, res->resource_name, msg))) return err;
        if ((err = gr_bcfg_replace(keys, values, n, &req->arena, &set, msg)) || validate_only) return err;
        return gr_alter_broker_store(req, res->resource_name, &set, msg, &r->error_code, &r->error_message);
    }
    *msg = msgf(req, "Unknown resource type %d", res->resource_type);
    return GR_ERR_INVALID_REQUEST;
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
        } else {
            r->error_code = alter_one(req, res, body->validate_only, &msg, r);
        }
        r->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
    }
    return gr_req_topic_ops_wait(req, gr_alter_topics_stored);
}
