/*
 * config_resources.c: the resources of the config APIs (DescribeConfigs, AlterConfigs,
 * IncrementalAlterConfigs), resolved and checked as Kafka 4.x does, with Kafka's error codes and messages;
 * and the durable writes of a new topic-level or dynamic broker set. The handlers keep only the request
 * walk: per resource they call a check here, then server/topic_configs.h for the values, then a store here.
 * See config_resources.h. Read next: server/topic_configs.h, server/dynconf.h.
 */
#include "server/config_resources.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "common/log.h"
#include "server/dynconf.h"
#include "server/handlers/handlers.h"

/* A message formatted into at most `cap` bytes (the terminating NUL included) and copied into the request's
   arena; `fallback` when the arena is exhausted. The two config APIs keep their own caps (below). */
static const char *vmsg(struct gr_req *req, size_t cap, const char *fallback, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static const char *vmsg(struct gr_req *req, size_t cap, const char *fallback, const char *fmt, va_list ap)
{
    char buf[700];
    vsnprintf(buf, cap < sizeof buf ? cap : sizeof buf, fmt, ap);
    const char *m = gr_arena_strndup(&req->arena, buf, strlen(buf));
    return m ? m : fallback;
}

/* AlterConfigs' and IncrementalAlterConfigs' messages (700 bytes; a fixed text when the arena is exhausted).
 */
static const char *msgf(struct gr_req *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *msgf(struct gr_req *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *m = vmsg(req, 700, "config change refused", fmt, ap);
    va_end(ap);
    return m;
}

/* Kafka's InvalidTopicException text for a name outside Topic.validate's rule. */
#define TOPIC_NAME_INVALID                                                                                   \
    "Topic name is invalid: '%.*s' must be 1 to 249 characters of ASCII alphanumerics, '.', '_' and '-', "   \
    "and not '.' or '..'"

#define STR_ARG(s) (int)((s).len > 0 ? (s).len : 0), ((s).ptr ? (s).ptr : "")

int16_t gr_alter_topic_check(struct gr_req *req, struct gr_str name, const char **msg)
{
    if (name.len <= 0) {
        *msg = "Default topic resources are not allowed.";
        return GR_ERR_INVALID_REQUEST;
    }
    if (!gr_topic_name_valid(name)) {
        *msg = msgf(req, TOPIC_NAME_INVALID, STR_ARG(name));
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    return GR_ERR_NONE;
}

int16_t gr_alter_topic_single_node(struct gr_req *req, const struct gr_tcfg_set *set, const char **msg)
{
    if (req->broker->cfg.settings.gregor_metadata_etcd_endpoint_count > 0) return GR_ERR_NONE;
    for (int i = 0; i < set->count; i++)
        if ((*msg = gr_tcfg_single_node_refusal(set->keys[i], set->values[i]))) return GR_ERR_INVALID_CONFIG;
    return GR_ERR_NONE;
}

int16_t gr_alter_topic_missing(struct gr_req *req, struct gr_str name, const char **msg)
{
    *msg = msgf(req, "The topic '%.*s' does not exist.", STR_ARG(name));
    return GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
}

int16_t gr_alter_unknown_type(struct gr_req *req, int8_t type, const char **msg)
{
    *msg = msgf(req, "Unknown resource type %d", type);
    return GR_ERR_INVALID_REQUEST;
}

/* One topic's config write: its outcome is copied into the response entry by gr_alter_topics_stored,
 * after the handler filled every entry (a completion may come before the handler's own assignment). */
struct alter_slot {
    int16_t *code_out;
    struct gr_str *message_out;
    int16_t code;
    const char *msg;
    struct alter_slot *next;
    int level;                    /* BROKER resources: enum gr_config_level; topics: -1 */
    struct gr_tcfg_set set;       /* BROKER resources: the new dynamic set of `level` */
    struct gr_tls_reload *reload; /* BROKER resources: new listener TLS contexts, or NULL */
};

static void stored(struct gr_req *req, void *item, int err, struct gr_topic *t)
{
    (void)t;
    struct alter_slot *slot = item;
    if (slot->level >= 0 && err) {
        GR_ERROR("writing %s: %s", GR_DYNCONF_FILE, strerror(-err));
        slot->code = GR_ERR_KAFKA_STORAGE_ERROR;
        slot->msg = "The broker could not write its dynamic configuration";
        gr_tls_reload_free(slot->reload);
    } else if (slot->level >= 0) {
        gr_dynconf_commit(req->broker, (enum gr_config_level)slot->level, &slot->set);
        gr_tls_reload_apply(req->broker, slot->reload);
    }
    slot->reload = NULL;
}

/* A topic's new config set was written (through the broker's topic writer). */
static void topic_stored(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    struct alter_slot *slot = item;
    if (res->error_code) {
        slot->code = res->error_code;
        slot->msg = res->message ? gr_arena_strndup(&req->arena, res->message, strlen(res->message)) : NULL;
        if (res->message && !slot->msg) slot->msg = "config change refused";
    } else if (res->local) {
        GR_INFO("topic %s: configuration changed (%d topic-level keys)", gr_topic_name(res->local),
                gr_topic_config_count(res->local));
    }
}

int16_t gr_alter_topic_store(struct gr_req *req, const struct gr_image_topic *t,
                             const struct gr_tcfg_set *set, const char **msg, int16_t *code_out,
                             struct gr_str *message_out)
{
    struct alter_slot *slot = gr_arena_calloc(&req->arena, 1, sizeof *slot);
    if (!slot) return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    *slot =
        (struct alter_slot){code_out, message_out, GR_ERR_NONE, NULL, req->hstate, -1, {NULL, NULL, 0}, NULL};
    if (!gr_req_topic_set_configs(req, t->id, (const char *const *)set->keys,
                                  (const char *const *)set->values, set->count, topic_stored, slot))
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

int16_t gr_alter_broker_tls(struct gr_req *req, struct gr_str name, const struct gr_tcfg_set *set,
                            const char *const *named, int nnamed, bool validate_only,
                            struct gr_tls_reload **reload, const char **msg)
{
    *reload = NULL;
    if (name.len <= 0) { /* DynamicBrokerConfig.validateConfigs: listener configs are per broker */
        char buf[700];
        size_t o = (size_t)snprintf(
            buf, sizeof buf,
            "Cannot update these configs at default cluster level, broker id must be specified: [");
        int found = 0;
        for (int i = 0; i < set->count && o < sizeof buf; i++)
            if (gr_config_ssl_dynamic_key(set->keys[i]))
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", found++ ? ", " : "", set->keys[i]);
        if (!found) return GR_ERR_NONE;
        if (o < sizeof buf) snprintf(buf + o, sizeof buf - o, "]");
        *msg = msgf(req, "%s", buf);
        return GR_ERR_INVALID_REQUEST;
    }
    char buf[1024];
    int16_t err =
        gr_tls_reload_prepare(req->broker, (const char *const *)set->keys, (const char *const *)set->values,
                              set->count, named, nnamed, reload, buf, sizeof buf);
    if (err) return *msg = msgf(req, "%s", buf), err;
    if (validate_only) {
        gr_tls_reload_free(*reload);
        *reload = NULL;
    }
    return GR_ERR_NONE;
}

int16_t gr_alter_broker_store(struct gr_req *req, struct gr_str name, const struct gr_tcfg_set *set,
                              struct gr_tls_reload *reload, const char **msg, int16_t *code_out,
                              struct gr_str *message_out)
{
    int level = name.len > 0 ? GR_CFG_LEVEL_BROKER : GR_CFG_LEVEL_DEFAULT;
    struct alter_slot *slot = gr_arena_calloc(&req->arena, 1, sizeof *slot);
    if (!slot) {
        gr_tls_reload_free(reload);
        return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    *slot = (struct alter_slot){code_out, message_out, GR_ERR_NONE, NULL, req->hstate, level, *set, reload};
    const struct gr_tcfg_set *sets[2] = {NULL, NULL}; /* the file holds both levels: pending ones included */
    for (struct alter_slot *s = slot; s; s = s->next)
        if (s->level >= 0 && !sets[s->level]) sets[s->level] = &s->set;
    size_t len;
    char *file = gr_dynconf_format(&req->broker->cfg, sets[0], sets[1], &req->arena, &len);
    if (!file || !gr_req_topic_op(req, gr_topic_op_meta_write(GR_DYNCONF_FILE, file, len), stored, slot)) {
        gr_tls_reload_free(reload);
        return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    req->hstate = slot;
    return GR_ERR_NONE;
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
int16_t gr_alter_logger(struct gr_req *req, struct gr_str name, const struct gr_tcfg_op *ops, int n,
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

/* DescribeConfigs' messages (a 600-byte buffer; NULL when the arena is exhausted). */
static const char *describe_msgf(struct gr_req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *describe_msgf(struct gr_req *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *m = vmsg(req, 600, NULL, fmt, ap);
    va_end(ap);
    return m;
}

int16_t gr_describe_topic_check(struct gr_req *req, struct gr_str name, const char **msg)
{
    if (name.len <= 0) {
        *msg = "Topic name is invalid: the empty string is not allowed";
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    if (!gr_topic_name_valid(name)) {
        *msg = describe_msgf(req, TOPIC_NAME_INVALID, STR_ARG(name));
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    return GR_ERR_NONE;
}

const char *gr_describe_topic_value(struct gr_req *req, const struct gr_image_topic *t, const char *name)
{
    const char *v = gr_image_topic_config(t, name), *norm, *msg;
    return v && gr_tcfg_check(name, v, &req->arena, &norm, &msg) == GR_ERR_NONE ? norm : v;
}

int16_t gr_describe_broker_check(struct gr_req *req, struct gr_str name, const char **msg)
{
    int32_t id;
    if (name.len <= 0) return GR_ERR_NONE; /* the cluster-wide dynamic defaults */
    if (parse_node(name, &id)) {
        *msg = describe_msgf(req, "Broker id must be an integer, but it is: %.*s", STR_ARG(name));
        return GR_ERR_INVALID_REQUEST;
    }
    if (id != req->broker->node_id) {
        *msg = describe_msgf(req, "Unexpected broker id, expected %d or empty string, but received %.*s",
                             req->broker->node_id, STR_ARG(name));
        return GR_ERR_INVALID_REQUEST;
    }
    return GR_ERR_NONE;
}

int16_t gr_describe_logger_check(struct gr_req *req, struct gr_str name, const char **msg)
{
    int32_t id;
    if (name.len <= 0) {
        *msg = "Broker id must not be empty";
        return GR_ERR_INVALID_REQUEST;
    }
    if (parse_node(name, &id)) {
        *msg = describe_msgf(req, "Broker id must be an integer, but it is: %.*s", STR_ARG(name));
        return GR_ERR_INVALID_REQUEST;
    }
    if (id != req->broker->node_id) {
        *msg = describe_msgf(req, "Unexpected broker id, expected %d but received %.*s", req->broker->node_id,
                             STR_ARG(name));
        return GR_ERR_INVALID_REQUEST;
    }
    return GR_ERR_NONE;
}

void gr_describe_logger_entry(struct gr_cfg_entry *e)
{
    memset(e, 0, sizeof *e);
    e->name = "root";
    static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    e->value = level_names[gr_log_get_level()];
    e->source = GR_CFGS_DYNAMIC_BROKER_LOGGER;
    e->type = GR_CFGT_UNKNOWN;
    e->doc = "Gregor's only logger: gregor.log.level at start, IncrementalAlterConfigs at runtime.";
}

void gr_describe_listener_ssl_entry(const struct gr_config *cfg, int i, struct gr_cfg_entry *e)
{
    bool secret = gr_config_ssl_key_sensitive(cfg->ssl_dyn_keys[i]);
    const char *v = secret ? NULL : cfg->ssl_dyn_values[i];
    *e = (struct gr_cfg_entry){.name = cfg->ssl_dyn_keys[i],
                               .value = v,
                               .source = GR_CFGS_DYNAMIC_BROKER,
                               .type = secret ? GR_CFGT_PASSWORD : GR_CFGT_STRING,
                               .is_sensitive = secret,
                               .doc = "A listener's SSL store, changed at runtime (certificate reload).",
                               .synonyms = {{cfg->ssl_dyn_keys[i], v, GR_CFGS_DYNAMIC_BROKER}},
                               .synonym_count = 1};
}
