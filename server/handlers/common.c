/* common.c: helpers shared by handlers (topic names, topic creation, lookups); see handlers.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "cluster/image.h"
#include "server/handlers/handlers.h"
#include "server/topic_configs.h"

bool gr_topic_name_valid(struct gr_str name)
{
    if (name.len <= 0 || name.len > GR_TOPIC_NAME_BYTES_MAX) return false;
    if ((name.len == 1 && name.ptr[0] == '.') || (name.len == 2 && name.ptr[0] == '.' && name.ptr[1] == '.'))
        return false;
    for (int32_t i = 0; i < name.len; i++) {
        char c = name.ptr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

bool gr_topic_name_collides(struct gr_broker *b, struct gr_str name)
{
    int n = gr_store_topic_count(b->store);
    for (int i = 0; i < n; i++) {
        const char *other = gr_topic_name(gr_store_topic_at(b->store, i));
        if ((int32_t)strlen(other) != name.len) continue;
        bool same = true, identical = true;
        for (int32_t k = 0; k < name.len && same; k++) {
            char x = other[k], y = name.ptr[k];
            if (x != y) identical = false;
            if (x == '_') x = '.';
            if (y == '_') y = '.';
            same = x == y;
        }
        if (same && !identical) return true;
    }
    return false;
}

struct gr_topic *gr_topic_lookup(struct gr_broker *b, struct gr_str name)
{
    if (name.len <= 0) return NULL;
    return gr_store_topic_find(b->store, name.ptr, (size_t)name.len);
}

char *gr_req_strdup(struct gr_req *req, struct gr_str s)
{
    return gr_arena_strndup(&req->arena, s.ptr ? s.ptr : "", s.len > 0 ? (size_t)s.len : 0);
}

struct gr_uuid gr_topic_uuid(const struct gr_topic *t)
{
    struct gr_uuid u;
    memcpy(u.b, gr_topic_id(t), 16);
    return u;
}

static int req_key_cmp(const void *x, const void *y)
{
    const struct gr_req_key *a = x, *b = y;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    int32_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = n > 0 ? memcmp(a->name.ptr, b->name.ptr, (size_t)n) : 0;
    if (c) return c;
    if (a->name.len != b->name.len) return a->name.len < b->name.len ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

int32_t *gr_req_keys_first(struct gr_req *req, struct gr_req_key *keys, int32_t n, bool **repeated)
{
    int32_t *first = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *first);
    bool *rep = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *rep);
    if (!first || !rep) return NULL;
    qsort(keys, (size_t)n, sizeof *keys, req_key_cmp);
    for (int32_t i = 0, run = 0; i < n; i++) { /* equal keys sort by position: a run starts at the first */
        if (i > 0 && keys[i].kind == keys[i - 1].kind && gr_str_eq(keys[i].name, keys[i - 1].name)) {
            rep[keys[i].pos] = rep[keys[run].pos] = true;
        } else {
            run = i;
        }
        first[keys[i].pos] = keys[run].pos;
    }
    for (int32_t i = 0; i < n; i++) /* every member of a repeated run */
        rep[i] = rep[first[i]];
    *repeated = rep;
    return first;
}

struct create_ctx {
    gr_topic_created_fn done;
    void *item;
    const char *name; /* request arena */
};

static void created(struct gr_req *req, void *item, const struct gr_topic_change *res)
{
    struct create_ctx *c = item;
    if (!res->error_code) {
        GR_INFO("created topic %s with %d partitions", c->name, res->partition_count);
        for (int32_t p = 0; res->local && p < gr_topic_partition_count(res->local); p++)
            gr_partition_visible_offset(gr_broker_partition(req->broker, gr_topic_log(res->local, p)));
    }
    if (c->done) c->done(req, c->item, res);
}

int16_t gr_topic_create(struct gr_req *req, struct gr_str name, int32_t partitions,
                        int32_t replication_factor, const int32_t *assignment, const char *const *keys,
                        const char *const *values, int count, bool validate_only, const char **error_message,
                        int64_t timeout_ms, gr_topic_created_fn done, void *item)
{
    struct gr_broker *b = req->broker;
    const char *dummy;
    if (!error_message) error_message = &dummy;
    *error_message = NULL;
    if (!gr_topic_name_valid(name)) {
        *error_message =
            "Topic name is illegal: it must be 1 to 249 characters of [a-zA-Z0-9._-], not '.' or '..'";
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    if (gr_image_topic_find(b->image, name.ptr, (size_t)name.len))
        return *error_message = "Topic already exists.", GR_ERR_TOPIC_ALREADY_EXISTS;
    if (gr_topic_name_collides(b, name)) {
        *error_message = "Topic name collides with an existing topic once '.' and '_' are treated alike";
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    if (partitions < 1 || partitions > GR_PARTITIONS_PER_TOPIC_MAX) {
        *error_message = "Number of partitions must be between 1 and 10000";
        return GR_ERR_INVALID_PARTITIONS;
    }
    for (int i = 0; i < count; i++) {
        const char *why = gr_tcfg_unsupported(keys[i], values[i]);
        if (!why && b->cfg.settings.gregor_metadata_etcd_endpoint_count == 0)
            why = gr_tcfg_single_node_refusal(keys[i], values[i]);
        const char *norm; /* known key, value within Kafka's ConfigDef rules, Kafka's message */
        if (!why && gr_tcfg_check(keys[i], values[i], &req->arena, &norm, &why) && !why)
            why = "Invalid value";
        if (why) {
            *error_message = why;
            return GR_ERR_INVALID_CONFIG;
        }
    }
    if (validate_only) return GR_ERR_NONE;
    struct create_ctx *c = gr_arena_alloc(&req->arena, sizeof *c);
    const char *namez = gr_req_strdup(req, name);
    if (!c || !namez) {
        *error_message = "Out of memory";
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    *c = (struct create_ctx){done, item, namez};
    struct gr_topic_create_args a = {.name = namez,
                                     .partitions = partitions,
                                     .replication_factor = replication_factor,
                                     .assignment = assignment,
                                     .assignment_rf = assignment ? replication_factor : 0,
                                     .config_keys = keys,
                                     .config_values = values,
                                     .config_count = count,
                                     .refuse_collision = true,
                                     .timeout_ms = timeout_ms};
    if (!gr_req_topic_create(req, &a, created, c)) {
        *error_message = "Out of memory";
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    return GR_ERR_NONE;
}

int16_t gr_topic_auto_create(struct gr_req *req, struct gr_str name, gr_topic_created_fn done, void *item)
{
    const struct gr_broker_settings *s = &req->broker->cfg.settings;
    int32_t parts = s->num_partitions, rf = s->default_replication_factor, count = 0, *assignment = NULL;
    const char **keys = NULL, **values = NULL;
    gr_internal_topic_layout(&req->arena, s, name, &parts, &rf, &assignment, &keys, &values, &count);
    return gr_topic_create(req, name, parts, rf, assignment, keys, values, count, false, NULL,
                           GR_TOPIC_WRITER_AUTO_CREATE_WAIT_MS, done, item);
}

struct gr_str gr_req_client_host(struct gr_req *req)
{
    const char *peer = gr_req_peer(req);
    const char *colon = strrchr(peer, ':');
    size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
    if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') { /* [v6]:port */
        peer++;
        n -= 2;
    }
    char *s = gr_arena_alloc(&req->arena, n + 2);
    if (!s) return gr_str_c("");
    s[0] = '/';
    memcpy(s + 1, peer, n);
    s[n + 1] = 0;
    return gr_str_c(s);
}
