/*
 * topic_configs.c: the topic config table and the value/source/synonym rules of DescribeConfigs,
 * AlterConfigs and IncrementalAlterConfigs; see topic_configs.h for the rules and where they come from.
 * The table of topic keys itself is storage/topic_config.c.
 */
#include "server/topic_configs.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocol/errors.h"

const char *gr_tcfg_unsupported(const char *key, const char *value)
{
    if (!key || !value) return NULL;
    if (strcmp(key, "remote.storage.enable") == 0 && strcmp(value, "false") != 0)
        return "remote.storage.enable=true is not supported: Gregor has no tiered storage";
    if (strcmp(key, "preallocate") == 0 && strcmp(value, "false") != 0)
        return "preallocate=true is not supported: Gregor does not preallocate segment files";
    if (strcmp(key, "segment.jitter.ms") == 0 && strcmp(value, "0") != 0)
        return "segment.jitter.ms must be 0: Gregor rolls segments without jitter";
    /* file.delete.delay.ms is accepted and has no effect: Kafka's delay protects readers of a deleted
       segment, which Gregor's readers get by holding the segment's descriptor (librdkafka 0077 sets it). */
    return NULL;
}

const char *gr_tcfg_single_node_refusal(const char *key, const char *value)
{
    if (key && value && strcmp(key, "min.insync.replicas") == 0 && strcmp(value, "1") != 0)
        return "min.insync.replicas must be 1 on a single-node broker";
    return NULL;
}

/* ---- parsing and normalising values ---- */

static char *arena_printf(struct gr_arena *arena, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *arena_printf(struct gr_arena *arena, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    return gr_arena_strndup(arena, buf, strlen(buf));
}

/* The view of `s` without leading/trailing ASCII whitespace (Java's String.trim for printable text). */
static void trim_view(const char *s, const char **start, size_t *len)
{
    const char *b = s, *e = s + strlen(s);
    while (b < e && (unsigned char)*b <= ' ')
        b++;
    while (e > b && (unsigned char)e[-1] <= ' ')
        e--;
    *start = b;
    *len = (size_t)(e - b);
}

/* Parses a whole decimal integer (optional sign) like Java's Long.parseLong. */
static bool parse_i64(const char *s, size_t len, int64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    size_t i = (buf[0] == '+' || buf[0] == '-') ? 1 : 0;
    if (!buf[i]) return false;
    for (size_t k = i; buf[k]; k++)
        if (buf[k] < '0' || buf[k] > '9') return false;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno) return false;
    *out = v;
    return true;
}

/* Parses a double like Java's Double.parseDouble for the plain forms (digits, '.', exponent). */
static bool parse_double(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    for (size_t k = 0; k < len; k++)
        if (!strchr("0123456789+-.eE", buf[k])) return false;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || end == buf) return false;
    *out = v;
    return true;
}

/* Java's Double.toString for finite values: shortest round-trip digits, plain notation for
 * 1e-3 <= |v| < 1e7 ("0.5", "1.0", "12.25"), else computerized scientific ("1.0E-4", "1.5E7"). */
static void format_double_java(double v, char *buf, size_t cap)
{
    if (v == 0) {
        snprintf(buf, cap, "%s", signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char e[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    /* e = "[-]d[.ddd]e[+-]xx" */
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof digits - 1) digits[nd++] = *p;
    digits[nd] = 0;
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = 0;
    int exp10 = atoi(p + 1);
    double a = fabs(v);
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (a >= 1e-3 && a < 1e7) {
        if (exp10 >= 0) {
            for (int k = 0; k <= exp10; k++)
                out[o++] = k < nd ? digits[k] : '0';
            out[o++] = '.';
            if (nd > exp10 + 1)
                for (int k = exp10 + 1; k < nd; k++)
                    out[o++] = digits[k];
            else
                out[o++] = '0';
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int k = 0; k < -exp10 - 1; k++)
                out[o++] = '0';
            for (int k = 0; k < nd; k++)
                out[o++] = digits[k];
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        out[o++] = '.';
        if (nd > 1)
            for (int k = 1; k < nd; k++)
                out[o++] = digits[k];
        else
            out[o++] = '0';
        out[o] = 0;
        snprintf(out + o, sizeof out - o, "E%d", exp10);
    }
    snprintf(buf, cap, "%s", out);
}

/* Whether `item` (len bytes) is one of the ", "-separated `choices`. */
static bool in_choices(const char *choices, const char *item, size_t len)
{
    const char *c = choices;
    while (*c) {
        const char *end = strchr(c, ',');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == len && memcmp(c, item, len) == 0) return true;
        if (!end) break;
        c = end + 1;
        while (*c == ' ')
            c++;
    }
    return false;
}

static bool is_throttle_list(const struct gr_tcfg_def *def)
{
    return strcmp(def->name, "leader.replication.throttled.replicas") == 0 ||
           strcmp(def->name, "follower.replication.throttled.replicas") == 0;
}

/* One "partition:broker" item of a throttled replicas list (Kafka also accepts an empty item). */
static bool throttle_item_ok(const char *s, size_t len)
{
    if (len == 0) return true;
    const char *colon = memchr(s, ':', len);
    if (!colon || colon == s || colon == s + len - 1) return false;
    for (const char *p = s; p < s + len; p++)
        if (p != colon && (*p < '0' || *p > '9')) return false;
    return true;
}

static int16_t invalid(struct gr_arena *arena, const char **msg, const char *key, const char *value,
                       const char *why)
{
    *msg = arena_printf(arena, "Invalid value %s for configuration %s: %s", value, key, why);
    if (!*msg) *msg = "Invalid configuration value";
    return GR_ERR_INVALID_CONFIG;
}

static int16_t check_number(const struct gr_tcfg_def *def, const char *value, const char *s, size_t len,
                            struct gr_arena *arena, const char **normalized, const char **msg)
{
    char why[96];
    int64_t v;
    if (!parse_i64(s, len, &v) || (def->type == GR_CFGT_INT && (v < INT32_MIN || v > INT32_MAX)))
        return invalid(arena, msg, def->name, value,
                       def->type == GR_CFGT_INT ? "Not a number of type INT" : "Not a number of type LONG");
    if (strcmp(def->name, "compression.gzip.level") == 0) {
        if (v != -1 && (v < 1 || v > 9))
            return invalid(arena, msg, def->name, value, "Value must be -1 or in [1,...,9]");
    } else if (v < def->min) {
        snprintf(why, sizeof why, "Value must be at least %lld", (long long)def->min);
        return invalid(arena, msg, def->name, value, why);
    } else if (v > def->max) {
        snprintf(why, sizeof why, "Value must be no more than %lld", (long long)def->max);
        return invalid(arena, msg, def->name, value, why);
    }
    *normalized = arena_printf(arena, "%lld", (long long)v);
    return *normalized ? GR_ERR_NONE : GR_ERR_UNKNOWN_SERVER_ERROR;
}

static int16_t check_list(const struct gr_tcfg_def *def, const char *value, const char *s, size_t len,
                          struct gr_arena *arena, const char **normalized, const char **msg)
{
    char *out = gr_arena_alloc(arena, len + 1);
    if (!out) return GR_ERR_UNKNOWN_SERVER_ERROR;
    size_t o = 0;
    bool star = len == 1 && s[0] == '*';
    const char *p = s, *end = s + len;
    while (len && p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *ie = comma ? comma : end;
        const char *ib = p;
        while (ib < ie && (unsigned char)*ib <= ' ')
            ib++;
        while (ie > ib && (unsigned char)ie[-1] <= ' ')
            ie--;
        size_t n = (size_t)(ie - ib);
        char item[256];
        snprintf(item, sizeof item, "%.*s", (int)(n < 255 ? n : 255), ib);
        if (def->choices && !in_choices(def->choices, ib, n)) {
            char why[160];
            snprintf(why, sizeof why, "String must be one of: %s", def->choices);
            return invalid(arena, msg, def->name, item, why);
        }
        if (is_throttle_list(def) && !star && !throttle_item_ok(ib, n))
            return invalid(arena, msg, def->name, value,
                           "must be * or a list of partitionId:brokerId items separated by commas");
        if (o) out[o++] = ',';
        memcpy(out + o, ib, n);
        o += n;
        if (!comma) break;
        p = comma + 1;
    }
    out[o] = 0;
    *normalized = out;
    return GR_ERR_NONE;
}

/* Validates and normalises without Gregor's refusals. */
static int16_t check_value(const struct gr_tcfg_def *def, const char *value, struct gr_arena *arena,
                           const char **normalized, const char **msg)
{
    const char *s;
    size_t len;
    trim_view(value, &s, &len);
    switch (def->type) {
    case GR_CFGT_BOOLEAN:
        if (len == 4 && strncasecmp(s, "true", 4) == 0)
            *normalized = "true";
        else if (len == 5 && strncasecmp(s, "false", 5) == 0)
            *normalized = "false";
        else
            return invalid(arena, msg, def->name, value, "Expected value to be either true or false");
        return GR_ERR_NONE;
    case GR_CFGT_INT:
    case GR_CFGT_LONG:
        return check_number(def, value, s, len, arena, normalized, msg);
    case GR_CFGT_DOUBLE: {
        double d;
        char why[96], buf[64];
        if (!parse_double(s, len, &d) || !isfinite(d))
            return invalid(arena, msg, def->name, value, "Not a number of type DOUBLE");
        if (d < (double)def->min) {
            snprintf(why, sizeof why, "Value must be at least %lld", (long long)def->min);
            return invalid(arena, msg, def->name, value, why);
        }
        if (d > (double)def->max) {
            snprintf(why, sizeof why, "Value must be no more than %lld", (long long)def->max);
            return invalid(arena, msg, def->name, value, why);
        }
        format_double_java(d, buf, sizeof buf);
        *normalized = gr_arena_strndup(arena, buf, strlen(buf));
        return *normalized ? GR_ERR_NONE : GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    case GR_CFGT_LIST:
        return check_list(def, value, s, len, arena, normalized, msg);
    default: /* STRING */
        if (def->choices && !in_choices(def->choices, s, len)) {
            char why[160];
            snprintf(why, sizeof why, "String must be one of: %s", def->choices);
            return invalid(arena, msg, def->name, value, why);
        }
        *normalized = len == strlen(value) ? value : gr_arena_strndup(arena, s, len);
        return *normalized ? GR_ERR_NONE : GR_ERR_UNKNOWN_SERVER_ERROR;
    }
}

int16_t gr_tcfg_check(const char *key, const char *value, struct gr_arena *arena, const char **normalized,
                      const char **msg)
{
    assert(key && value && normalized && msg);
    *msg = NULL;
    *normalized = NULL;
    const struct gr_tcfg_def *def = gr_tcfg_find(key);
    if (!def) {
        *msg = arena_printf(arena, "Unknown topic config name: %s", key);
        if (!*msg) *msg = "Unknown topic config name";
        return GR_ERR_INVALID_CONFIG;
    }
    int16_t err = check_value(def, value, arena, normalized, msg);
    if (err) return err;
    const char *why = gr_tcfg_unsupported(key, *normalized);
    if (why) {
        *msg = why;
        return GR_ERR_INVALID_CONFIG;
    }
    return GR_ERR_NONE;
}

/* ---- sets ---- */

static int set_find(const struct gr_tcfg_set *set, const char *key)
{
    for (int i = 0; i < set->count; i++)
        if (strcmp(set->keys[i], key) == 0) return i;
    return -1;
}

static void set_put(struct gr_tcfg_set *set, const char *key, const char *value)
{
    int i = set_find(set, key);
    if (i < 0) {
        i = set->count++;
        set->keys[i] = key;
    }
    set->values[i] = value;
}

static void set_remove(struct gr_tcfg_set *set, const char *key)
{
    int i = set_find(set, key);
    if (i < 0) return;
    set->count--;
    set->keys[i] = set->keys[set->count];
    set->values[i] = set->values[set->count];
}

static bool set_alloc(struct gr_tcfg_set *set, int capacity, struct gr_arena *arena)
{
    set->count = 0;
    set->keys = gr_arena_calloc(arena, (size_t)capacity + 1, sizeof *set->keys);
    set->values = gr_arena_calloc(arena, (size_t)capacity + 1, sizeof *set->values);
    return set->keys && set->values;
}

/* Kafka's LogConfig.validateValues: min.compaction.lag.ms must not exceed max.compaction.lag.ms (values
 * not set at topic level are the defaults: Gregor's broker table has no log.cleaner.* keys). */
static int16_t cross_check(const struct gr_tcfg_set *set, struct gr_arena *arena, const char **msg)
{
    int i = set_find(set, "min.compaction.lag.ms"), k = set_find(set, "max.compaction.lag.ms");
    long long lo = strtoll(i >= 0 ? set->values[i] : "0", NULL, 10);
    long long hi = strtoll(k >= 0 ? set->values[k] : "9223372036854775807", NULL, 10);
    if (lo > hi) {
        *msg = arena_printf(
            arena,
            "conflict topic config setting min.compaction.lag.ms (%lld) > max.compaction.lag.ms (%lld)", lo,
            hi);
        if (!*msg) *msg = "min.compaction.lag.ms > max.compaction.lag.ms";
        return GR_ERR_INVALID_CONFIG;
    }
    return GR_ERR_NONE;
}

static bool has_duplicates(const char *const *keys, int count)
{
    for (int i = 0; i < count; i++)
        for (int k = i + 1; k < count; k++)
            if (keys[i] && keys[k] && strcmp(keys[i], keys[k]) == 0) return true;
    return false;
}

/* "Null value not supported for : a, b" (Kafka's wording joins with ", "). */
static int16_t null_values(const char *const *keys, const char *const *values, const int8_t *ops, int count,
                           struct gr_arena *arena, const char **msg)
{
    size_t need = 40, used = 0;
    bool any = false;
    for (int i = 0; i < count; i++)
        if (!values[i] && !(ops && ops[i] == GR_CFG_OP_DELETE)) {
            need += strlen(keys[i]) + 2;
            any = true;
        }
    if (!any) return GR_ERR_NONE;
    char *m = gr_arena_alloc(arena, need);
    if (!m) return GR_ERR_UNKNOWN_SERVER_ERROR;
    used = (size_t)snprintf(m, need, "Null value not supported for : ");
    bool first = true;
    for (int i = 0; i < count; i++)
        if (!values[i] && !(ops && ops[i] == GR_CFG_OP_DELETE)) {
            used += (size_t)snprintf(m + used, need - used, "%s%s", first ? "" : ", ", keys[i]);
            first = false;
        }
    *msg = m;
    return GR_ERR_INVALID_REQUEST;
}

int16_t gr_tcfg_precheck(const char *const *keys, const char *const *values, const int8_t *ops, int count,
                         struct gr_arena *arena, const char **msg)
{
    *msg = NULL;
    if (has_duplicates(keys, count)) {
        *msg = "Error due to duplicate config keys";
        return GR_ERR_INVALID_REQUEST;
    }
    return null_values(keys, values, ops, count, arena, msg);
}

int16_t gr_tcfg_replace(const char *const *keys, const char *const *values, int count, struct gr_arena *arena,
                        struct gr_tcfg_set *out, const char **msg)
{
    assert(count >= 0 && out && msg);
    int16_t err = gr_tcfg_precheck(keys, values, NULL, count, arena, msg);
    if (err) return err;
    struct gr_tcfg_set set;
    if (!set_alloc(&set, count, arena)) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < count; i++) {
        const char *norm;
        err = gr_tcfg_check(keys[i], values[i], arena, &norm, msg);
        if (err) return err;
        set_put(&set, keys[i], norm);
    }
    err = cross_check(&set, arena, msg);
    if (err) return err;
    *out = set;
    return GR_ERR_NONE;
}

static const char *op_name(int8_t op)
{
    return op == GR_CFG_OP_APPEND ? "APPEND" : "SUBTRACT";
}

/* APPEND/SUBTRACT on a LIST value: items of `base` (empty items dropped) plus/minus the items of `arg`. */
static const char *list_op(const char *base, const char *arg, int8_t op, struct gr_arena *arena)
{
    size_t cap = strlen(base) + strlen(arg) + 2;
    char *out = gr_arena_alloc(arena, cap);
    char *args = gr_arena_strndup(arena, arg, strlen(arg));
    char *items = gr_arena_strndup(arena, base, strlen(base));
    if (!out || !args || !items) return NULL;
    size_t nitems = 1;
    for (const char *c = base; *c; c++)
        nitems += *c == ',';
    size_t nargs = 1;
    for (const char *c = arg; *c; c++)
        nargs += *c == ',';
    char **list = gr_arena_calloc(arena, nitems + nargs, sizeof *list);
    if (!list) return NULL;
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(items, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t) list[n++] = t;
    for (char *p = args;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        const char *it;
        size_t len;
        trim_view(p, &it, &len);
        ((char *)it)[len] = 0; /* `args` is our own copy: end the trimmed item in place */
        size_t k = 0;
        while (k < n && strcmp(list[k], it) != 0)
            k++;
        if (op == GR_CFG_OP_APPEND && k == n && *it) list[n++] = (char *)it;
        if (op == GR_CFG_OP_SUBTRACT && k < n) {
            memmove(&list[k], &list[k + 1], (n - k - 1) * sizeof *list);
            n--;
        }
        if (!comma) break;
        p = comma + 1;
    }
    size_t o = 0;
    out[0] = 0;
    for (size_t k = 0; k < n; k++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", k ? "," : "", list[k]);
    return out;
}

int16_t gr_tcfg_apply_ops(const struct gr_tcfg_set *cur, const struct gr_tcfg_op *ops, int count,
                          struct gr_arena *arena, struct gr_tcfg_set *out, const char **msg)
{
    assert(cur && count >= 0 && out && msg);
    *msg = NULL;
    const char **keys = gr_arena_calloc(arena, (size_t)count + 1, sizeof *keys);
    const char **values = gr_arena_calloc(arena, (size_t)count + 1, sizeof *values);
    int8_t *opids = gr_arena_calloc(arena, (size_t)count + 1, sizeof *opids);
    bool *changed = gr_arena_calloc(arena, (size_t)count + 1, sizeof *changed);
    struct gr_tcfg_set set;
    if (!keys || !values || !opids || !changed || !set_alloc(&set, cur->count + count, arena))
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < count; i++)
        keys[i] = ops[i].key, values[i] = ops[i].value, opids[i] = ops[i].op;
    int16_t err = gr_tcfg_precheck(keys, values, opids, count, arena, msg);
    if (err) return err;
    for (int i = 0; i < cur->count; i++)
        set_put(&set, cur->keys[i], cur->values[i]);
    for (int i = 0; i < count; i++) {
        const struct gr_tcfg_op *op = &ops[i];
        const struct gr_tcfg_def *def = gr_tcfg_find(op->key);
        int at = set_find(&set, op->key);
        switch (op->op) {
        case GR_CFG_OP_SET:
            set_put(&set, op->key, op->value);
            changed[i] = true;
            break;
        case GR_CFG_OP_DELETE:
            set_remove(&set, op->key);
            break;
        case GR_CFG_OP_APPEND:
        case GR_CFG_OP_SUBTRACT: {
            if (!def || def->type != GR_CFGT_LIST) {
                *msg = arena_printf(arena, "Can't %s to key %s because its type is not LIST.",
                                    op_name(op->op), op->key);
                if (!*msg) *msg = "APPEND and SUBTRACT apply only to LIST configs";
                return GR_ERR_INVALID_CONFIG;
            }
            const char *v = list_op(at >= 0 ? set.values[at] : def->default_value, op->value, op->op, arena);
            if (!v) return GR_ERR_UNKNOWN_SERVER_ERROR;
            set_put(&set, op->key, v);
            changed[i] = true;
            break;
        }
        default:
            *msg = arena_printf(arena, "Unknown config operation %d for key %s", op->op, op->key);
            if (!*msg) *msg = "Unknown config operation";
            return GR_ERR_INVALID_REQUEST;
        }
    }
    for (int i = 0; i < count; i++) {
        if (!changed[i]) continue;
        int at = set_find(&set, ops[i].key);
        const char *norm;
        err = gr_tcfg_check(ops[i].key, set.values[at], arena, &norm, msg);
        if (err) return err;
        set.values[at] = norm;
    }
    err = cross_check(&set, arena, msg);
    if (err) return err;
    *out = set;
    return GR_ERR_NONE;
}

/* ---- DescribeConfigs ---- */

/* A broker key's static value (NULL = null) and whether it was set in the properties/overrides.
 * Keys Gregor's broker table lacks have Kafka's default `fallback` and are never set. */
static const char *broker_value(const struct gr_config *cfg, const char *name, const char *fallback,
                                bool *is_set)
{
    int n;
    const struct gr_config_def *bdefs = gr_config_defs(&n);
    for (int i = 0; i < n; i++) {
        if (strcmp(bdefs[i].name, name) != 0) continue;
        *is_set = cfg->from_file[i];
        return cfg->values[i] ? cfg->values[i] : bdefs[i].default_value;
    }
    *is_set = false;
    return fallback;
}

/* Kafka's default of a broker key (Gregor's table default when it has the key, else the topic table's). */
static const char *broker_default(const char *name)
{
    int n;
    const struct gr_config_def *bdefs = gr_config_defs(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(bdefs[i].name, name) == 0) return bdefs[i].default_value;
    int ndefs;
    const struct gr_tcfg_def *defs = gr_tcfg_defs(&ndefs);
    for (int i = 0; i < ndefs; i++)
        for (int s = 0; s < GR_TCFG_SYNONYMS_MAX && defs[i].synonyms[s].name; s++)
            if (strcmp(defs[i].synonyms[s].name, name) == 0) return defs[i].synonyms[s].default_value;
    return NULL;
}

/* Kafka's ConfigHelper.configSynonyms over the synonym group `names`, in its order: the ones set at the
 * dynamic per-broker level, then the dynamic default level, then in the properties (STATIC_BROKER_CONFIG),
 * then the ones with a default (DEFAULT_CONFIG). Fills `all` (4 x count entries at most), returns the count.
 */
static int broker_synonyms_all(const struct gr_config *cfg, const char *const *names, int count,
                               struct gr_cfg_synonym *all)
{
    int n = 0;
    assert(count <= GR_TCFG_SYNONYMS_MAX);
    for (int pass = 0; pass < 4; pass++) {
        for (int i = 0; i < count; i++) {
            bool set;
            const char *d = broker_default(names[i]);
            const char *v = broker_value(cfg, names[i], d, &set);
            const char *dyn = pass < 2 ? gr_config_dynamic(cfg, (enum gr_config_level)pass, names[i]) : NULL;
            if (dyn)
                all[n++] = (struct gr_cfg_synonym){
                    names[i], dyn, pass == 0 ? GR_CFGS_DYNAMIC_BROKER : GR_CFGS_DYNAMIC_DEFAULT_BROKER};
            if (pass == 2 && set) all[n++] = (struct gr_cfg_synonym){names[i], v, GR_CFGS_STATIC_BROKER};
            if (pass == 3 && d) all[n++] = (struct gr_cfg_synonym){names[i], d, GR_CFGS_DEFAULT};
        }
    }
    return n;
}

/* Appends to out->synonyms the entries of `all` from the first one named `primary` on (Kafka drops the
 * ones before it), keeping only `source` entries when it is not GR_CFGS_UNKNOWN. */
static void put_synonyms(const struct gr_cfg_synonym *all, int n, const char *primary, int8_t source,
                         struct gr_cfg_entry *out)
{
    int first = 0;
    while (first < n && strcmp(all[first].name, primary) != 0)
        first++;
    for (int i = first; i < n && out->synonym_count < GR_CFG_ENTRY_SYNONYMS_MAX; i++)
        if (source == GR_CFGS_UNKNOWN || all[i].source == source)
            out->synonyms[out->synonym_count++] = all[i];
}

int gr_tcfg_describe(const struct gr_tcfg_def *def, const char *topic_value, const struct gr_config *cfg,
                     struct gr_arena *arena, struct gr_cfg_entry *out)
{
    memset(out, 0, sizeof *out);
    out->name = def->name;
    out->type = def->type;
    out->doc = def->doc;
    if (topic_value)
        out->synonyms[out->synonym_count++] =
            (struct gr_cfg_synonym){def->name, topic_value, GR_CFGS_DYNAMIC_TOPIC};
    const char *names[GR_TCFG_SYNONYMS_MAX];
    struct gr_cfg_synonym all[4 * GR_TCFG_SYNONYMS_MAX];
    int nsyn = 0, nall = 0;
    while (nsyn < GR_TCFG_SYNONYMS_MAX && def->synonyms[nsyn].name) {
        names[nsyn] = def->synonyms[nsyn].name;
        nsyn++;
    }
    if (nsyn) {
        nall = broker_synonyms_all(cfg, names, nsyn, all);
        put_synonyms(all, nall, names[0], GR_CFGS_UNKNOWN, out);
    }
    out->source = out->synonym_count ? out->synonyms[0].source : GR_CFGS_DEFAULT;
    if (topic_value) {
        out->value = topic_value;
        return 0;
    }
    out->value = def->default_value;
    for (int k = 0; k < nall; k++) { /* the effective broker value: Kafka's resolveEffectiveTopicConfig */
        const char *v = all[k].value;
        int s = 0;
        while (s < nsyn && strcmp(names[s], all[k].name) != 0)
            s++;
        if (!v || s == nsyn) continue;
        const char *norm, *msg;
        if (def->synonyms[s].unit_ms != 1) {
            long long x = strtoll(v, NULL, 10);
            if (x < 0 && strcmp(def->name, "retention.ms") == 0)
                x = -1;
            else
                x *= def->synonyms[s].unit_ms;
            norm = arena_printf(arena, "%lld", x);
            if (!norm) return -1;
        } else if (check_value(def, v, arena, &norm, &msg) != GR_ERR_NONE) {
            norm = v; /* a broker value outside the topic validator (e.g. a small log.segment.bytes): as
                         configured */
        }
        out->value = norm;
        break;
    }
    return 0;
}

/* Kafka's DynamicBrokerConfig.brokerConfigSynonyms groups (primary first is the looked-up name's group). */
static const char *const roll_group[] = {"log.roll.ms", "log.roll.hours"};
static const char *const jitter_group[] = {"log.roll.jitter.ms", "log.roll.jitter.hours"};
static const char *const flush_group[] = {"log.flush.interval.ms", "log.flush.scheduler.interval.ms"};
static const char *const retention_group[] = {"log.retention.ms", "log.retention.minutes",
                                              "log.retention.hours"};

/* Kafka 4.x's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs) that Gregor has and applies at
 * runtime: the first broker synonym of each topic config (DynamicLogConfig), max.connections (SocketServer,
 * cluster-wide), producer.id.expiration.ms and transaction.partition.verification.enable
 * (DynamicProducerStateManagerConfig). None is per-broker only.
 */
static const char *const dynamic_keys[] = {
    "compression.type",
    "follower.replication.throttled.rate", /* accepted, not applied (kafka-reassign-partitions.sh --throttle)
                                            */
    "leader.replication.throttled.rate",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleanup.policy",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type",
    "log.retention.bytes",
    "log.retention.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "max.connections",
    "message.max.bytes",
    "min.insync.replicas",
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
    "unclean.leader.election.enable",
};
/* Kafka dynamic configs in Gregor's table that Gregor does not change at runtime (the cleaner thread reads
 * them; the replica fetchers are started with num.replica.fetchers, Kafka's DynamicThreadPool resizes them).
 */
static const char *const dynamic_not_applied[] = {"log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                                                  "log.cleaner.io.max.bytes.per.second",
                                                  "num.replica.fetchers"};

bool gr_bcfg_dynamic(const char *name)
{
    for (size_t i = 0; i < sizeof dynamic_keys / sizeof dynamic_keys[0]; i++)
        if (strcmp(dynamic_keys[i], name) == 0) return true;
    return false;
}

void gr_bcfg_describe(const struct gr_config_def *def, const struct gr_config *cfg, bool per_broker,
                      struct gr_cfg_entry *out)
{
    memset(out, 0, sizeof *out);
    bool set;
    out->name = def->name;
    out->value = broker_value(cfg, def->name, def->default_value, &set);
    out->type = gr_bcfg_kafka_type(def->type);
    out->read_only = !gr_bcfg_dynamic(def->name);
    out->doc = def->doc;
    static const char *const *const groups[] = {roll_group, jitter_group, flush_group, retention_group};
    static const int sizes[] = {2, 2, 2, 3};
    const char *const *group = NULL;
    int n = 0;
    for (int g = 0; g < 4 && !group; g++)
        for (int i = 0; i < sizes[g]; i++)
            if (strcmp(groups[g][i], def->name) == 0) group = groups[g], n = sizes[g];
    const char *const self[1] = {def->name};
    if (!group) group = self, n = 1;
    struct gr_cfg_synonym all[4 * GR_TCFG_SYNONYMS_MAX];
    int nall = broker_synonyms_all(cfg, group, n, all);
    put_synonyms(all, nall, def->name, per_broker ? GR_CFGS_UNKNOWN : GR_CFGS_DYNAMIC_DEFAULT_BROKER, out);
    out->source = out->synonym_count ? out->synonyms[0].source : GR_CFGS_DEFAULT;
    const char *dyn = gr_config_dynamic(cfg, GR_CFG_LEVEL_BROKER, def->name);
    if (!dyn) dyn = gr_config_dynamic(cfg, GR_CFG_LEVEL_DEFAULT, def->name);
    if (!per_broker) dyn = gr_config_dynamic(cfg, GR_CFG_LEVEL_DEFAULT, def->name);
    if (dyn) out->value = dyn;
}

int8_t gr_bcfg_kafka_type(enum gr_config_type type)
{
    switch (type) {
    case GR_CFG_BOOLEAN:
        return GR_CFGT_BOOLEAN;
    case GR_CFG_INT:
        return GR_CFGT_INT;
    case GR_CFG_LONG:
        return GR_CFGT_LONG;
    case GR_CFG_STRING:
        return GR_CFGT_STRING;
    case GR_CFG_LIST:
        return GR_CFGT_LIST;
    case GR_CFG_DOUBLE:
        return GR_CFGT_DOUBLE;
    }
    return GR_CFGT_UNKNOWN;
}

/* ---- dynamic broker configs ---- */

int gr_bcfg_current(const struct gr_config *cfg, enum gr_config_level level, struct gr_arena *arena,
                    struct gr_tcfg_set *out)
{
    int n;
    const struct gr_config_def *bdefs = gr_config_defs(&n);
    int nssl = level == GR_CFG_LEVEL_BROKER ? cfg->ssl_dyn_count : 0;
    if (!set_alloc(out, n + nssl, arena)) return -1;
    for (int i = 0; i < n; i++)
        if (cfg->dynamic[level][i]) set_put(out, bdefs[i].name, cfg->dynamic[level][i]);
    for (int i = 0; i < nssl; i++) /* listener SSL stores (certificate reload, server/tls_reload.h) */
        set_put(out, cfg->ssl_dyn_keys[i], cfg->ssl_dyn_values[i]);
    return 0;
}

static const struct gr_config_def *broker_row(const char *name)
{
    int n;
    const struct gr_config_def *bdefs = gr_config_defs(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(bdefs[i].name, name) == 0) return &bdefs[i];
    return NULL;
}

static bool in_list(const char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0) return true;
    return false;
}

/* "<prefix>: [a, b]" over the keys of `set` that `pick` selects (Java's Set.toString, Kafka 4.4; 4.1 printed
   Scala's "Set(a, b)"), in request order, or NULL. */
static const char *key_list(const struct gr_tcfg_set *set, bool (*pick)(const char *), const char *prefix,
                            struct gr_arena *arena)
{
    char buf[900];
    size_t o = (size_t)snprintf(buf, sizeof buf, "%s: [", prefix);
    int found = 0;
    for (int i = 0; i < set->count && o < sizeof buf; i++)
        if (pick(set->keys[i]))
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", found++ ? ", " : "", set->keys[i]);
    if (!found) return NULL;
    if (o < sizeof buf) snprintf(buf + o, sizeof buf - o, "]");
    const char *m = gr_arena_strndup(arena, buf, strlen(buf));
    return m ? m : prefix;
}

static bool kafka_static_only(const char *name)
{
    return broker_row(name) && !gr_bcfg_dynamic(name) &&
           !in_list(dynamic_not_applied, sizeof dynamic_not_applied / sizeof dynamic_not_applied[0], name);
}

static bool gregor_not_dynamic(const char *name)
{
    return !gr_bcfg_dynamic(name) && !kafka_static_only(name) && !gr_config_ssl_dynamic_key(name);
}

/* Validates and normalises one dynamic value as Kafka's DynamicConfig.Broker.validate (ConfigDef types and
 * validators; for a topic config's broker synonym those of the topic config) plus Gregor's refusals. */
static int16_t bcfg_check(const char *key, const char *value, struct gr_arena *arena, const char **norm,
                          const char **msg)
{
    const struct gr_tcfg_def *topic = NULL;
    int ndefs;
    const struct gr_tcfg_def *defs = gr_tcfg_defs(&ndefs);
    for (int i = 0; i < ndefs && !topic; i++)
        if (defs[i].synonyms[0].name && strcmp(defs[i].synonyms[0].name, key) == 0) topic = &defs[i];
    struct gr_tcfg_def d = {key, GR_CFGT_INT, NULL, 0, INT64_MAX, NULL, NULL, {{NULL, 0, NULL}}};
    if (topic) {
        d = *topic;
        d.name = key;
    } else {
        const struct gr_config_def *row = broker_row(key);
        assert(row);
        d.type = gr_bcfg_kafka_type(row->type);
        d.min = row->min, d.max = row->max;
    }
    int16_t err = check_value(&d, value, arena, norm, msg);
    if (err) return err;
    const char *why = topic ? gr_tcfg_unsupported(topic->name, *norm) : NULL;
    if (why) *msg = why;
    return why ? GR_ERR_INVALID_CONFIG : GR_ERR_NONE;
}

/* Kafka's DynamicBrokerConfig.validateConfigs over the whole new set; every failure is INVALID_REQUEST
 * (ConfigAdminManager wraps it, KAFKA-13609), except the controller's refusal of a broker-level
 * min.insync.replicas (INVALID_CONFIG, seen on Kafka 4.1.1). Normalises the values in place. */
static int16_t bcfg_validate(struct gr_tcfg_set *set, struct gr_arena *arena, const char **msg)
{
    if ((*msg = key_list(set, kafka_static_only, "Cannot update these configs dynamically", arena)))
        return GR_ERR_INVALID_REQUEST;
    if ((*msg = key_list(set, gregor_not_dynamic, "Gregor cannot update these configs dynamically", arena)))
        return GR_ERR_INVALID_REQUEST;
    if (set_find(set, "min.insync.replicas") >= 0) { /* Kafka 4.1+'s controller, ELR on by default */
        *msg = "Broker-level min.insync.replicas cannot be altered while ELR is enabled.";
        return GR_ERR_INVALID_CONFIG;
    }
    for (int i = 0; i < set->count; i++)
        if (!gr_config_ssl_dynamic_key(set->keys[i]) && /* strings: server/tls_reload.h checks them */
            bcfg_check(set->keys[i], set->values[i], arena, &set->values[i], msg))
            return GR_ERR_INVALID_REQUEST;
    return GR_ERR_NONE;
}

int16_t gr_bcfg_replace(const char *const *keys, const char *const *values, int count, struct gr_arena *arena,
                        struct gr_tcfg_set *out, const char **msg)
{
    int16_t err = gr_tcfg_precheck(keys, values, NULL, count, arena, msg);
    if (err) return err;
    if (!set_alloc(out, count, arena)) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < count; i++)
        set_put(out, keys[i], values[i]);
    return bcfg_validate(out, arena, msg);
}

int16_t gr_bcfg_apply_ops(const struct gr_tcfg_set *cur, const struct gr_tcfg_op *ops, int count,
                          struct gr_arena *arena, struct gr_tcfg_set *out, const char **msg)
{
    *msg = NULL;
    if (!set_alloc(out, cur->count + count, arena)) return GR_ERR_UNKNOWN_SERVER_ERROR;
    for (int i = 0; i < cur->count; i++)
        set_put(out, cur->keys[i], cur->values[i]);
    for (int i = 0; i < count; i++) {
        const struct gr_tcfg_op *op = &ops[i];
        const struct gr_config_def *row = broker_row(op->key);
        int at = set_find(out, op->key);
        if (op->op == GR_CFG_OP_SET) {
            set_put(out, op->key, op->value);
        } else if (op->op == GR_CFG_OP_DELETE) {
            set_remove(out, op->key);
        } else if (op->op == GR_CFG_OP_APPEND || op->op == GR_CFG_OP_SUBTRACT) {
            if (!row || (row->type != GR_CFG_LIST && strcmp(op->key, "log.cleanup.policy") != 0)) {
                *msg = arena_printf(arena, "Config value append is not allowed for config key: %s", op->key);
                if (!*msg) *msg = "Config value append is not allowed";
                return GR_ERR_INVALID_CONFIG;
            }
            const char *base = at >= 0 ? out->values[at] : row->default_value ? row->default_value : "";
            const char *v = list_op(base, op->value, op->op, arena);
            if (!v) return GR_ERR_UNKNOWN_SERVER_ERROR;
            set_put(out, op->key, v);
        } else {
            *msg = arena_printf(arena, "Unknown operations type %d", op->op);
            if (!*msg) *msg = "Unknown operations type";
            return GR_ERR_INVALID_REQUEST;
        }
    }
    return bcfg_validate(out, arena, msg);
}
