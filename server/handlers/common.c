/* common.c: helpers shared by handlers (topic names, topic creation, lookups); see handlers.h. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "coordinator/offsets_log.h"
#include "server/handlers/handlers.h"
#include "server/topic_configs.h"

bool gr_topic_name_valid(struct gr_str name)
{
    if (name.len <= 0 || name.len > GR_TOPIC_NAME_BYTES_MAX) return false;
    if ((name.len == 1 && name.ptr[0] == '.') || (name.len == 2 && name.ptr[0] == '.' && name.ptr[1] == '.')) return false;
    for (int32_t i = 0; i < name.len; i++) {
        char c = name.ptr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
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

const char *gr_topic_compression_type(struct gr_broker *b, const struct gr_topic *t)
{
    const char *v = gr_topic_config_get(t, "compression.type");
    return v ? v : gr_config_str(&b->cfg, "compression.type");
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

bool gr_topic_is_internal(const char *name)
{
    return strcmp(name, "__consumer_offsets") == 0 || strcmp(name, "__transaction_state") == 0;
}

int16_t gr_topic_create(struct gr_broker *b, struct gr_str name, int32_t partitions, const char *const *keys,
                        const char *const *values, int count, bool validate_only, const char **error_message,
                        struct gr_topic **out)
{
    const char *dummy;
    if (!error_message) error_message = &dummy;
    *error_message = NULL;
    if (out) *out = NULL;
    if (!gr_topic_name_valid(name)) {
        *error_message = "Topic name is illegal: it must be 1 to 249 characters of [a-zA-Z0-9._-], not '.' or '..'";
        return GR_ERR_INVALID_TOPIC_EXCEPTION;
    }
    /* __consumer_offsets is the coordinator's: created by it, with its partition count and configs */
    if (!b->coord && name.len == (int32_t)strlen(GR_OFFSETS_TOPIC) && memcmp(name.ptr, GR_OFFSETS_TOPIC, (size_t)name.len) == 0)
        gr_groups_ensure(b);
    if (gr_topic_lookup(b, name)) {
        *error_message = "Topic already exists.";
        return GR_ERR_TOPIC_ALREADY_EXISTS;
    }
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
        if (!why && !gr_topic_config_key_known(keys[i])) why = "Unknown topic config name";
        if (why) {
            *error_message = why;
            return GR_ERR_INVALID_CONFIG;
        }
    }
    if (validate_only) return GR_ERR_NONE;
    char namebuf[GR_TOPIC_NAME_BYTES_MAX + 1];
    memcpy(namebuf, name.ptr, (size_t)name.len);
    namebuf[name.len] = 0;
    struct gr_topic *t;
    int rc = gr_store_topic_create(b->store, namebuf, partitions, keys, values, count, &t);
    if (rc == -EEXIST) {
        *error_message = "Topic already exists.";
        return GR_ERR_TOPIC_ALREADY_EXISTS;
    }
    if (rc == -EINVAL) {
        *error_message = "Invalid topic configuration";
        return GR_ERR_INVALID_CONFIG;
    }
    if (rc) {
        GR_ERROR("creating topic %s: %s", namebuf, strerror(-rc));
        *error_message = "The broker could not create the topic's files";
        return GR_ERR_KAFKA_STORAGE_ERROR;
    }
    GR_INFO("created topic %s with %d partitions", namebuf, partitions);
    for (int32_t p = 0; p < partitions; p++) gr_broker_update_hwm(b, gr_topic_log(t, p));
    if (out) *out = t;
    return GR_ERR_NONE;
}
