/*
 * values.c: the cluster's JSON values (values.h). Each kind has a validator over its struct, shared by the
 * encoder (validate, then build) and the decoder (read every field with its type and range, then
 * validate), so both refuse the same things with the same texts. Parsing is jansson's json_loadb with
 * duplicate keys refused; the byte cap is checked before it, array sizes before any allocation.
 */
#include "cluster/values.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One encode or decode: the kind's name for the reason, and where the reason goes. */
struct ctx {
    const char *kind;
    char *err;
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
    int n = snprintf(c->err, GR_CLUSTER_ERR_BYTES, "%s: ", c->kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, GR_CLUSTER_ERR_BYTES - (size_t)n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Names of listeners, configs and features: [a-zA-Z0-9._-]. */
static bool name_ok(const char *s, size_t len)
{
    if (len == 0) return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* Host names and addresses: printable ASCII without spaces (names, IPv4, IPv6 with or without brackets). */
static bool host_ok(const char *s, size_t len)
{
    if (len == 0) return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] > '~') return false;
    return true;
}

/* Well-formed UTF-8 without NUL (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). */
static bool utf8_ok(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (c == 0 || n == 0 || i + n > len) return false;
        uint32_t cp = n == 1 ? c : c & (0x7f >> n);
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n;
    }
    return true;
}

/* ---- validators (shared by encode and decode) ---- */

static int check_ids(struct ctx *c, const char *what, const int32_t *ids, int32_t count, int32_t min_count)
{
    if (count < min_count || count > GR_CLUSTER_REPLICAS_MAX)
        return fail(c, "%s must hold %d to %d node ids, got %d", what, (int)min_count,
                    GR_CLUSTER_REPLICAS_MAX, (int)count);
    for (int32_t i = 0; i < count; i++) {
        if (ids[i] < 0) return fail(c, "%s: node id %d is negative", what, (int)ids[i]);
        for (int32_t k = 0; k < i; k++)
            if (ids[k] == ids[i]) return fail(c, "%s: node id %d appears twice", what, (int)ids[i]);
    }
    return 0;
}

static int check_broker(struct ctx *c, const struct gr_cluster_broker *v)
{
    if (v->node_id < 0) return fail(c, "node_id must be in [0, 2147483647], got %d", (int)v->node_id);
    if (v->listener_count < 1 || v->listener_count > GR_CLUSTER_LISTENERS_MAX)
        return fail(c, "listeners must hold 1 to %d listeners, got %d", GR_CLUSTER_LISTENERS_MAX,
                    v->listener_count);
    for (int i = 0; i < v->listener_count; i++) {
        const struct gr_cluster_listener *l = &v->listeners[i];
        size_t nl = strnlen(l->name, sizeof l->name), hl = strnlen(l->host, sizeof l->host);
        if (nl > GR_CLUSTER_LISTENER_NAME_BYTES_MAX || !name_ok(l->name, nl))
            return fail(c, "listeners[%d].name must be 1 to %d bytes of [a-zA-Z0-9._-]", i,
                        GR_CLUSTER_LISTENER_NAME_BYTES_MAX);
        if (hl > GR_CLUSTER_HOST_BYTES_MAX || !host_ok(l->host, hl))
            return fail(c, "listeners[%d].host must be 1 to %d printable bytes without spaces", i,
                        GR_CLUSTER_HOST_BYTES_MAX);
        if (l->port < 1 || l->port > 65535)
            return fail(c, "listeners[%d].port must be in [1, 65535], got %d", i, (int)l->port);
        for (int k = 0; k < i; k++)
            if (!strcmp(v->listeners[k].name, l->name))
                return fail(c, "listener name %s appears twice", l->name);
    }
    size_t rl = strnlen(v->rack, sizeof v->rack);
    if (v->has_rack && (rl == 0 || rl > GR_CLUSTER_RACK_BYTES_MAX || !utf8_ok(v->rack, rl)))
        return fail(c, "rack must be null or 1 to %d bytes of UTF-8", GR_CLUSTER_RACK_BYTES_MAX);
    return 0;
}

static int check_controller(struct ctx *c, const struct gr_cluster_controller *v)
{
    if (v->node_id < 0) return fail(c, "node_id must be in [0, 2147483647], got %d", (int)v->node_id);
    if (v->broker_epoch < 1)
        return fail(c, "broker_epoch must be in [1, 9223372036854775807], got %lld",
                    (long long)v->broker_epoch);
    return 0;
}

static bool uuid_reserved(struct gr_uuid id)
{
    static const uint8_t zero[16], metadata[16] = {[15] = 1}; /* Kafka's Uuid.ZERO_UUID, METADATA_TOPIC_ID */
    return !memcmp(id.b, zero, 16) || !memcmp(id.b, metadata, 16);
}

static int check_topic(struct ctx *c, const struct gr_cluster_topic *v)
{
    if (uuid_reserved(v->topic_id))
        return fail(c, "topic_id is a reserved Uuid (zero or the metadata topic's)");
    if (v->partition_count < 1 || v->partition_count > GR_PARTITIONS_PER_TOPIC_MAX)
        return fail(c, "partitions must hold 1 to %d partitions, got %d", GR_PARTITIONS_PER_TOPIC_MAX,
                    (int)v->partition_count);
    for (int32_t p = 0; p < v->partition_count; p++) {
        char what[48];
        snprintf(what, sizeof what, "partitions[%d]", (int)p);
        const struct gr_cluster_assignment *a = &v->partitions[p];
        int rc = check_ids(c, what, a->replicas, a->replica_count, 1);
        if (!rc) rc = check_ids(c, "adding", a->adding, a->adding_count, 0);
        if (!rc) rc = check_ids(c, "removing", a->removing, a->removing_count, 0);
        if (rc) return rc;
        for (int32_t i = 0; i < a->adding_count + a->removing_count; i++) {
            int32_t id = i < a->adding_count ? a->adding[i] : a->removing[i - a->adding_count];
            bool in = false;
            for (int32_t k = 0; k < a->replica_count && !in; k++)
                in = a->replicas[k] == id;
            if (!in)
                return fail(c, "%s: node %d is being added or removed but is not a replica", what, (int)id);
            for (int32_t k = 0; i < a->adding_count && k < a->removing_count; k++)
                if (a->removing[k] == id)
                    return fail(c, "%s: node %d is both being added and removed", what, (int)id);
        }
    }
    if (v->config_count < 0 || v->config_count > GR_CLUSTER_TOPIC_CONFIGS_MAX)
        return fail(c, "configs must hold at most %d configs, got %d", GR_CLUSTER_TOPIC_CONFIGS_MAX,
                    (int)v->config_count);
    for (int32_t i = 0; i < v->config_count; i++) {
        const struct gr_cluster_config *cf = &v->configs[i];
        size_t nl = strlen(cf->name), vl = strlen(cf->value);
        if (nl > GR_CLUSTER_CONFIG_NAME_BYTES_MAX || !name_ok(cf->name, nl))
            return fail(c, "config name must be 1 to %d bytes of [a-zA-Z0-9._-]",
                        GR_CLUSTER_CONFIG_NAME_BYTES_MAX);
        if (vl > GR_CLUSTER_CONFIG_VALUE_BYTES_MAX || !utf8_ok(cf->value, vl))
            return fail(c, "configs.%s must be at most %d bytes of UTF-8", cf->name,
                        GR_CLUSTER_CONFIG_VALUE_BYTES_MAX);
        for (int32_t k = 0; k < i; k++)
            if (!strcmp(v->configs[k].name, cf->name)) return fail(c, "config %s appears twice", cf->name);
    }
    return 0;
}

static int check_partition(struct ctx *c, const struct gr_cluster_partition *v)
{
    if (v->leader < -1) return fail(c, "leader must be in [-1, 2147483647], got %d", (int)v->leader);
    if (v->leader_epoch < 0)
        return fail(c, "leader_epoch must be in [0, 2147483647], got %d", (int)v->leader_epoch);
    if (v->controller_epoch < 1)
        return fail(c, "controller_epoch must be in [1, 9223372036854775807], got %lld",
                    (long long)v->controller_epoch);
    int rc = check_ids(c, "isr", v->isr, v->isr_count, 0);
    if (rc) return rc;
    bool in_isr = v->leader < 0;
    for (int32_t i = 0; i < v->isr_count; i++)
        in_isr |= v->isr[i] == v->leader;
    return in_isr ? 0 : fail(c, "leader %d is not in isr", (int)v->leader);
}

static int check_producer_ids(struct ctx *c, const struct gr_cluster_producer_ids *v)
{
    if (v->next_producer_id < 0 || v->next_producer_id > INT64_MAX - GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE)
        return fail(c, "next_producer_id must be in [0, %lld], got %lld",
                    (long long)(INT64_MAX - GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE),
                    (long long)v->next_producer_id);
    if (v->broker_id < 0) return fail(c, "broker_id must be in [0, 2147483647], got %d", (int)v->broker_id);
    if (v->broker_epoch < 1)
        return fail(c, "broker_epoch must be in [1, 9223372036854775807], got %lld",
                    (long long)v->broker_epoch);
    return 0;
}

static int check_features(struct ctx *c, const struct gr_cluster_features *v)
{
    if (v->count < 0 || v->count > GR_CLUSTER_FEATURES_MAX)
        return fail(c, "features must hold at most %d features, got %d", GR_CLUSTER_FEATURES_MAX, v->count);
    for (int i = 0; i < v->count; i++) {
        const struct gr_cluster_feature *f = &v->features[i];
        size_t nl = strnlen(f->name, sizeof f->name);
        if (nl > GR_CLUSTER_FEATURE_NAME_BYTES_MAX || !name_ok(f->name, nl))
            return fail(c, "feature name must be 1 to %d bytes of [a-zA-Z0-9._-]",
                        GR_CLUSTER_FEATURE_NAME_BYTES_MAX);
        if (f->level < 1) return fail(c, "features.%s must be in [1, 32767], got %d", f->name, f->level);
        for (int k = 0; k < i; k++)
            if (!strcmp(v->features[k].name, f->name)) return fail(c, "feature %s appears twice", f->name);
    }
    return 0;
}

/* ---- encoding ---- */

/* Serializes `obj` (takes it) into *out / *len, compact, under `cap` bytes. */
static int dump(struct ctx *c, json_t *obj, size_t cap, char **out, size_t *len)
{
    if (!obj) return -ENOMEM;
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!text) return -ENOMEM;
    size_t n = strlen(text);
    if (n > cap) {
        free(text);
        snprintf(c->err, GR_CLUSTER_ERR_BYTES, "%s: %zu bytes, over the %zu-byte cap", c->kind, n, cap);
        return -EMSGSIZE;
    }
    *out = text;
    *len = n;
    return 0;
}

/* A new object holding "version": 1. */
static json_t *obj_new(void)
{
    json_t *o = json_object();
    if (o && json_object_set_new(o, "version", json_integer(GR_CLUSTER_VALUE_VERSION))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Sets o[key] = v (takes v); on any failure (out of memory) drops o and returns NULL. */
static json_t *put(json_t *o, const char *key, json_t *v)
{
    if (!o || !v || json_object_set_new(o, key, v)) {
        json_decref(o);
        json_decref(v);
        return NULL;
    }
    return o;
}

static json_t *ids_json(const int32_t *ids, int32_t count)
{
    json_t *a = json_array();
    for (int32_t i = 0; a && i < count; i++)
        if (json_array_append_new(a, json_integer(ids[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

int gr_cluster_id_encode(const struct gr_cluster_id_value *v, char **out, size_t *len, char *err)
{
    struct ctx c = {"cluster id", err};
    size_t n = strnlen(v->cluster_id, sizeof v->cluster_id);
    if (gr_cluster_id_check(v->cluster_id, n))
        return fail(&c, "cluster_id must be a 22-character Kafka Uuid text");
    json_t *o = put(obj_new(), "cluster_id", json_stringn(v->cluster_id, n));
    return dump(&c, o, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_broker_encode(const struct gr_cluster_broker *v, char **out, size_t *len, char *err)
{
    struct ctx c = {"broker registration", err};
    int rc = check_broker(&c, v);
    if (rc) return rc;
    json_t *ls = json_array();
    for (int i = 0; ls && i < v->listener_count; i++) {
        const struct gr_cluster_listener *l = &v->listeners[i];
        json_t *lo = put(put(put(json_object(), "name", json_string(l->name)), "host", json_string(l->host)),
                         "port", json_integer(l->port));
        if (!lo || json_array_append_new(ls, lo)) {
            json_decref(ls);
            ls = NULL;
        }
    }
    json_t *o = put(obj_new(), "node_id", json_integer(v->node_id));
    o = put(o, "listeners", ls);
    o = put(o, "rack", v->has_rack ? json_string(v->rack) : json_null());
    o = put(o, "shutting_down", json_boolean(v->shutting_down));
    if (v->log_dir_new) o = put(o, "log_dir_new", json_true());
    return dump(&c, o, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_controller_encode(const struct gr_cluster_controller *v, char **out, size_t *len, char *err)
{
    struct ctx c = {"controller record", err};
    int rc = check_controller(&c, v);
    if (rc) return rc;
    json_t *o = put(obj_new(), "node_id", json_integer(v->node_id));
    o = put(o, "broker_epoch", json_integer(v->broker_epoch));
    return dump(&c, o, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_topic_encode(const struct gr_cluster_topic *v, char **out, size_t *len, char *err)
{
    struct ctx c = {"topic record", err};
    int rc = check_topic(&c, v);
    if (rc) return rc;
    char id[GR_UUID_TEXT_BYTES + 1];
    gr_cluster_uuid_format(v->topic_id, id);
    json_t *parts = json_array();
    for (int32_t p = 0; parts && p < v->partition_count; p++)
        if (json_array_append_new(parts,
                                  ids_json(v->partitions[p].replicas, v->partitions[p].replica_count))) {
            json_decref(parts);
            parts = NULL;
        }
    json_t *configs = json_object();
    for (int32_t i = 0; configs && i < v->config_count; i++)
        configs = put(configs, v->configs[i].name, json_string(v->configs[i].value));
    json_t *re = NULL; /* {"<partition>": {"adding": [...], "removing": [...]}}, only while one runs */
    bool want_re = false;
    for (int32_t p = 0; p < v->partition_count; p++) {
        const struct gr_cluster_assignment *a = &v->partitions[p];
        if (!a->adding_count && !a->removing_count) continue;
        want_re = true;
        char key[16];
        snprintf(key, sizeof key, "%d", (int)p);
        json_t *e = put(json_object(), "adding", ids_json(a->adding, a->adding_count));
        e = put(e, "removing", ids_json(a->removing, a->removing_count));
        re = put(re ? re : json_object(), key, e);
        if (!re) break;
    }
    if (want_re && !re) {
        json_decref(parts);
        json_decref(configs);
        return -ENOMEM;
    }
    json_t *o = put(obj_new(), "topic_id", json_string(id));
    o = put(o, "partitions", parts);
    o = put(o, "configs", configs);
    if (re) o = put(o, "reassigning", re);
    return dump(&c, o, GR_CLUSTER_TOPIC_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_partition_encode(const struct gr_cluster_partition *v, char **out, size_t *len, char *err)
{
    struct ctx c = {"partition state", err};
    int rc = check_partition(&c, v);
    if (rc) return rc;
    json_t *o = put(obj_new(), "leader", json_integer(v->leader));
    o = put(o, "leader_epoch", json_integer(v->leader_epoch));
    o = put(o, "isr", ids_json(v->isr, v->isr_count));
    o = put(o, "controller_epoch", json_integer(v->controller_epoch));
    return dump(&c, o, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_producer_ids_encode(const struct gr_cluster_producer_ids *v, char **out, size_t *len,
                                   char *err)
{
    struct ctx c = {"producer id counter", err};
    int rc = check_producer_ids(&c, v);
    if (rc) return rc;
    json_t *o = put(obj_new(), "next_producer_id", json_integer(v->next_producer_id));
    o = put(o, "broker_id", json_integer(v->broker_id));
    o = put(o, "broker_epoch", json_integer(v->broker_epoch));
    return dump(&c, o, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_features_encode(const struct gr_cluster_features *v, char **out, size_t *len, char *err)
{
    struct ctx c = {"features", err};
    int rc = check_features(&c, v);
    if (rc) return rc;
    json_t *fs = json_object();
    for (int i = 0; fs && i < v->count; i++)
        fs = put(fs, v->features[i].name, json_integer(v->features[i].level));
    return dump(&c, put(obj_new(), "features", fs), GR_CLUSTER_SMALL_VALUE_BYTES_MAX, out, len);
}

int gr_cluster_producer_ids_take(const struct gr_cluster_producer_ids *cur, int32_t broker_id,
                                 int64_t broker_epoch, struct gr_cluster_producer_ids *next)
{
    if (cur->next_producer_id < 0 ||
        cur->next_producer_id > INT64_MAX - 2 * GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE)
        return -ERANGE;
    next->next_producer_id = cur->next_producer_id + GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE;
    next->broker_id = broker_id;
    next->broker_epoch = broker_epoch;
    return 0;
}

/* ---- decoding ---- */

/* Parses `text` into an object whose version this Gregor reads; *root is the caller's to json_decref. */
static int load(struct ctx *c, const char *text, size_t len, size_t cap, json_t **root)
{
    *root = NULL;
    if (len > cap) {
        snprintf(c->err, GR_CLUSTER_ERR_BYTES, "%s: %zu bytes, over the %zu-byte cap", c->kind, len, cap);
        return -EMSGSIZE;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        if (json_error_code(&je) == json_error_out_of_memory) return -ENOMEM;
        return fail(c, "invalid JSON at byte %d: %s", je.position, je.text);
    }
    *root = j;
    if (!json_is_object(j)) return fail(c, "expected a JSON object");
    json_t *ver = json_object_get(j, "version");
    if (!ver) return fail(c, "missing field 'version'");
    if (!json_is_integer(ver)) return fail(c, "field 'version' must be an integer");
    json_int_t vn = json_integer_value(ver);
    if (vn > GR_CLUSTER_VALUE_VERSION)
        return fail(c, "version %lld is newer than this Gregor reads (%d)", (long long)vn,
                    GR_CLUSTER_VALUE_VERSION);
    if (vn < 1)
        return fail(c, "field 'version' must be in [1, %d], got %lld", GR_CLUSTER_VALUE_VERSION,
                    (long long)vn);
    return 0;
}

/* o[field] as an integer within [min, max]; `label` names it in the reason. */
static int get_int(struct ctx *c, json_t *o, const char *field, const char *label, int64_t min, int64_t max,
                   int64_t *out)
{
    json_t *v = json_object_get(o, field);
    if (!v) return fail(c, "missing field '%s'", label);
    if (!json_is_integer(v)) return fail(c, "field '%s' must be an integer", label);
    json_int_t n = json_integer_value(v);
    if (n < min || n > max)
        return fail(c, "field '%s' must be in [%lld, %lld], got %lld", label, (long long)min, (long long)max,
                    (long long)n);
    *out = n;
    return 0;
}

static int get_i32(struct ctx *c, json_t *o, const char *field, int64_t min, int32_t *out)
{
    int64_t v;
    int rc = get_int(c, o, field, field, min, INT32_MAX, &v);
    if (!rc) *out = (int32_t)v;
    return rc;
}

/* o[field] as a string of at most `cap` - 1 bytes copied into `out`; `label` names it in the reason. */
static int get_str(struct ctx *c, json_t *o, const char *field, const char *label, char *out, size_t cap)
{
    json_t *v = json_object_get(o, field);
    if (!v) return fail(c, "missing field '%s'", label);
    if (!json_is_string(v)) return fail(c, "field '%s' must be a string", label);
    size_t n = json_string_length(v);
    if (n >= cap) return fail(c, "field '%s' is longer than %zu bytes", label, cap - 1);
    memcpy(out, json_string_value(v), n);
    out[n] = '\0';
    return 0;
}

/* An array of node ids into ids[GR_CLUSTER_REPLICAS_MAX]; the count is checked before reading. Node ids
 * are only typed and ranged here: the validator checks the count's minimum and duplicates. */
static int get_ids(struct ctx *c, json_t *a, const char *label, int32_t *ids, int32_t *count)
{
    if (!a) return fail(c, "missing field '%s'", label);
    if (!json_is_array(a)) return fail(c, "field '%s' must be an array", label);
    size_t n = json_array_size(a);
    if (n > GR_CLUSTER_REPLICAS_MAX)
        return fail(c, "%s must hold %s to %d node ids, got %zu", label, strcmp(label, "isr") ? "1" : "0",
                    GR_CLUSTER_REPLICAS_MAX, n);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_integer(e)) return fail(c, "%s[%zu] must be an integer", label, i);
        json_int_t id = json_integer_value(e);
        if (id < 0 || id > INT32_MAX)
            return fail(c, "%s: node id %lld is out of [0, 2147483647]", label, (long long)id);
        ids[i] = (int32_t)id;
    }
    *count = (int32_t)n;
    return 0;
}

int gr_cluster_id_decode(const char *text, size_t len, struct gr_cluster_id_value *v, char *err)
{
    struct ctx c = {"cluster id", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, &j);
    if (!rc) rc = get_str(&c, j, "cluster_id", "cluster_id", v->cluster_id, sizeof v->cluster_id);
    if (!rc && gr_cluster_id_check(v->cluster_id, strlen(v->cluster_id)))
        rc = fail(&c, "cluster_id must be a 22-character Kafka Uuid text");
    json_decref(j);
    return rc;
}

static int get_listener(struct ctx *c, json_t *lo, int i, struct gr_cluster_listener *l)
{
    char label[48];
    if (!json_is_object(lo)) return fail(c, "listeners[%d] must be an object", i);
    snprintf(label, sizeof label, "listeners[%d].name", i);
    int rc = get_str(c, lo, "name", label, l->name, sizeof l->name);
    snprintf(label, sizeof label, "listeners[%d].host", i);
    if (!rc) rc = get_str(c, lo, "host", label, l->host, sizeof l->host);
    snprintf(label, sizeof label, "listeners[%d].port", i);
    int64_t port = 0;
    if (!rc) rc = get_int(c, lo, "port", label, 1, 65535, &port);
    l->port = (int32_t)port;
    return rc;
}

static int broker_fields(struct ctx *c, json_t *j, struct gr_cluster_broker *v)
{
    int rc = get_i32(c, j, "node_id", 0, &v->node_id);
    if (rc) return rc;
    json_t *ls = json_object_get(j, "listeners");
    if (!ls) return fail(c, "missing field 'listeners'");
    if (!json_is_array(ls)) return fail(c, "field 'listeners' must be an array");
    size_t n = json_array_size(ls);
    if (n < 1 || n > GR_CLUSTER_LISTENERS_MAX)
        return fail(c, "listeners must hold 1 to %d listeners, got %zu", GR_CLUSTER_LISTENERS_MAX, n);
    v->listener_count = (int)n;
    for (size_t i = 0; i < n; i++)
        if ((rc = get_listener(c, json_array_get(ls, i), (int)i, &v->listeners[i]))) return rc;
    json_t *rack = json_object_get(j, "rack");
    if (rack && !json_is_null(rack)) {
        if ((rc = get_str(c, j, "rack", "rack", v->rack, sizeof v->rack))) return rc;
        v->has_rack = true;
    }
    json_t *sd = json_object_get(j, "shutting_down");
    if (!sd) return fail(c, "missing field 'shutting_down'");
    if (!json_is_boolean(sd)) return fail(c, "field 'shutting_down' must be a boolean");
    v->shutting_down = json_is_true(sd);
    json_t *nd = json_object_get(j, "log_dir_new");
    if (nd && !json_is_boolean(nd)) return fail(c, "field 'log_dir_new' must be a boolean");
    v->log_dir_new = nd && json_is_true(nd);
    return check_broker(c, v);
}

int gr_cluster_broker_decode(const char *text, size_t len, struct gr_cluster_broker *v, char *err)
{
    struct ctx c = {"broker registration", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, &j);
    if (!rc) rc = broker_fields(&c, j, v);
    json_decref(j);
    return rc;
}

int gr_cluster_controller_decode(const char *text, size_t len, struct gr_cluster_controller *v, char *err)
{
    struct ctx c = {"controller record", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, &j);
    if (!rc) rc = get_i32(&c, j, "node_id", 0, &v->node_id);
    if (!rc) rc = get_int(&c, j, "broker_epoch", "broker_epoch", 1, INT64_MAX, &v->broker_epoch);
    json_decref(j);
    return rc;
}

static int topic_configs(struct ctx *c, json_t *cf, struct gr_cluster_topic *v)
{
    if (!cf) return 0; /* optional: no configs */
    if (!json_is_object(cf)) return fail(c, "field 'configs' must be an object");
    size_t n = json_object_size(cf);
    if (n > GR_CLUSTER_TOPIC_CONFIGS_MAX)
        return fail(c, "configs must hold at most %d configs, got %zu", GR_CLUSTER_TOPIC_CONFIGS_MAX, n);
    if (n && !(v->configs = calloc(n, sizeof *v->configs))) return -ENOMEM;
    const char *name;
    json_t *val;
    json_object_foreach(cf, name, val)
    {
        if (!json_is_string(val)) return fail(c, "configs.%.64s must be a string", name);
        struct gr_cluster_config *e = &v->configs[v->config_count++];
        if (!(e->name = strdup(name)) ||
            !(e->value = strndup(json_string_value(val), json_string_length(val))))
            return -ENOMEM;
    }
    return 0;
}

/* The optional "reassigning" object: partition index (decimal text) -> {"adding": ids, "removing": ids}. */
static int topic_reassigning(struct ctx *c, json_t *re, struct gr_cluster_topic *v)
{
    if (!re) return 0;
    if (!json_is_object(re)) return fail(c, "field 'reassigning' must be an object");
    if (json_object_size(re) > (size_t)v->partition_count)
        return fail(c, "reassigning names more partitions than the topic has");
    const char *key;
    json_t *e;
    json_object_foreach(re, key, e)
    {
        char *end = NULL;
        long p = strtol(key, &end, 10);
        if (!*key || *end || p < 0 || p >= v->partition_count)
            return fail(c, "reassigning: '%.16s' is not a partition of the topic", key);
        if (!json_is_object(e)) return fail(c, "reassigning.%ld must be an object", p);
        struct gr_cluster_assignment *a = &v->partitions[p];
        int rc = get_ids(c, json_object_get(e, "adding"), "adding", a->adding, &a->adding_count);
        if (!rc) rc = get_ids(c, json_object_get(e, "removing"), "removing", a->removing, &a->removing_count);
        if (rc) return rc;
    }
    return 0;
}

static int topic_fields(struct ctx *c, json_t *j, struct gr_cluster_topic *v)
{
    char id[GR_UUID_TEXT_BYTES + 2];
    int rc = get_str(c, j, "topic_id", "topic_id", id, sizeof id);
    if (rc) return rc;
    if (gr_cluster_uuid_parse(id, strlen(id), &v->topic_id))
        return fail(c, "topic_id must be a 22-character Kafka Uuid text");
    json_t *ps = json_object_get(j, "partitions");
    if (!ps) return fail(c, "missing field 'partitions'");
    if (!json_is_array(ps)) return fail(c, "field 'partitions' must be an array");
    size_t n = json_array_size(ps);
    if (n < 1 || n > GR_PARTITIONS_PER_TOPIC_MAX)
        return fail(c, "partitions must hold 1 to %d partitions, got %zu", GR_PARTITIONS_PER_TOPIC_MAX, n);
    if (!(v->partitions = calloc(n, sizeof *v->partitions))) return -ENOMEM;
    v->partition_count = (int32_t)n;
    for (size_t p = 0; p < n; p++) {
        char label[48];
        snprintf(label, sizeof label, "partitions[%zu]", p);
        struct gr_cluster_assignment *a = &v->partitions[p];
        if ((rc = get_ids(c, json_array_get(ps, p), label, a->replicas, &a->replica_count))) return rc;
    }
    if ((rc = topic_configs(c, json_object_get(j, "configs"), v))) return rc;
    if ((rc = topic_reassigning(c, json_object_get(j, "reassigning"), v))) return rc;
    return check_topic(c, v);
}

int gr_cluster_topic_decode(const char *text, size_t len, struct gr_cluster_topic *v, char *err)
{
    struct ctx c = {"topic record", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_TOPIC_VALUE_BYTES_MAX, &j);
    if (!rc) rc = topic_fields(&c, j, v);
    json_decref(j);
    if (rc) gr_cluster_topic_free(v);
    return rc;
}

void gr_cluster_topic_free(struct gr_cluster_topic *v)
{
    if (!v) return;
    for (int32_t i = 0; v->configs && i < v->config_count; i++) {
        free(v->configs[i].name);
        free(v->configs[i].value);
    }
    free(v->configs);
    free(v->partitions);
    memset(v, 0, sizeof *v);
}

int gr_cluster_partition_decode(const char *text, size_t len, struct gr_cluster_partition *v, char *err)
{
    struct ctx c = {"partition state", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, &j);
    if (!rc) rc = get_i32(&c, j, "leader", -1, &v->leader);
    if (!rc) rc = get_i32(&c, j, "leader_epoch", 0, &v->leader_epoch);
    if (!rc) rc = get_ids(&c, json_object_get(j, "isr"), "isr", v->isr, &v->isr_count);
    if (!rc) rc = get_int(&c, j, "controller_epoch", "controller_epoch", 1, INT64_MAX, &v->controller_epoch);
    if (!rc) rc = check_partition(&c, v);
    json_decref(j);
    return rc;
}

int gr_cluster_producer_ids_decode(const char *text, size_t len, struct gr_cluster_producer_ids *v, char *err)
{
    struct ctx c = {"producer id counter", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, &j);
    if (!rc)
        rc = get_int(&c, j, "next_producer_id", "next_producer_id", 0,
                     INT64_MAX - GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE, &v->next_producer_id);
    if (!rc) rc = get_i32(&c, j, "broker_id", 0, &v->broker_id);
    if (!rc) rc = get_int(&c, j, "broker_epoch", "broker_epoch", 1, INT64_MAX, &v->broker_epoch);
    json_decref(j);
    return rc;
}

static int feature_fields(struct ctx *c, json_t *j, struct gr_cluster_features *v)
{
    json_t *fs = json_object_get(j, "features");
    if (!fs) return fail(c, "missing field 'features'");
    if (!json_is_object(fs)) return fail(c, "field 'features' must be an object");
    size_t n = json_object_size(fs);
    if (n > GR_CLUSTER_FEATURES_MAX)
        return fail(c, "features must hold at most %d features, got %zu", GR_CLUSTER_FEATURES_MAX, n);
    const char *name;
    json_t *lvl;
    json_object_foreach(fs, name, lvl)
    {
        struct gr_cluster_feature *f = &v->features[v->count];
        if (strlen(name) > GR_CLUSTER_FEATURE_NAME_BYTES_MAX || !name_ok(name, strlen(name)))
            return fail(c, "feature name must be 1 to %d bytes of [a-zA-Z0-9._-]",
                        GR_CLUSTER_FEATURE_NAME_BYTES_MAX);
        snprintf(f->name, sizeof f->name, "%s", name);
        char label[GR_CLUSTER_FEATURE_NAME_BYTES_MAX + 16];
        snprintf(label, sizeof label, "features.%s", name);
        int64_t level;
        int rc = get_int(c, fs, name, label, 1, INT16_MAX, &level);
        if (rc) return rc;
        f->level = (int16_t)level;
        v->count++;
    }
    return check_features(c, v);
}

int gr_cluster_features_decode(const char *text, size_t len, struct gr_cluster_features *v, char *err)
{
    struct ctx c = {"features", err};
    memset(v, 0, sizeof *v);
    json_t *j;
    int rc = load(&c, text, len, GR_CLUSTER_SMALL_VALUE_BYTES_MAX, &j);
    if (!rc) rc = feature_fields(&c, j, v);
    json_decref(j);
    return rc;
}
