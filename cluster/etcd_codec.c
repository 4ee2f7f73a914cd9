/*
 * etcd_codec.c: request bodies and answer parsing for the etcd JSON gateway (see etcd_codec.h for the
 * rules). Base64 through OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock (standard alphabet with padding, as
 * grpc-gateway writes protobuf bytes); the decoded length is checked against the padding, since
 * EVP_DecodeBlock counts padding as zero bytes. Field names are rpc.proto's (etcd-io/etcd
 * api/etcdserverpb/rpc.proto, mvccpb/kv.proto). Read next: cluster/etcd.c.
 */
#include "cluster/etcd_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t key_len_of(const char *key, size_t len)
{
    return len || !key ? len : strlen(key);
}

size_t gr_etcd_codec_op_bytes(const struct gr_etcd_op *op)
{
    size_t n = GR_ETCD_FIELD_OVERHEAD_BYTES + key_len_of(op->key, op->key_len);
    if (op->range_end) n += key_len_of(op->range_end, op->range_end_len);
    if (op->type == GR_ETCD_OP_PUT) n += op->value_len;
    return n;
}

size_t gr_etcd_codec_compare_bytes(const struct gr_etcd_compare *cmp)
{
    size_t n = GR_ETCD_FIELD_OVERHEAD_BYTES + key_len_of(cmp->key, cmp->key_len);
    if (cmp->target == GR_ETCD_VALUE) n += cmp->value_len;
    return n;
}

json_t *gr_etcd_codec_b64(const char *p, size_t len)
{
    if (len > (SIZE_MAX / 4) * 3 - 3) return NULL;
    size_t out_len = 4 * ((len + 2) / 3);
    unsigned char *out = malloc(out_len + 1);
    if (!out) return NULL;
    int n = len ? EVP_EncodeBlock(out, (const unsigned char *)p, (int)len) : 0;
    out[n] = 0;
    json_t *s = json_stringn((const char *)out, (size_t)n);
    free(out);
    return s;
}

json_t *gr_etcd_codec_i64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return json_string(buf);
}

/* Sets obj[name] = v (taking v); false when v is NULL or the set fails. */
static bool set(json_t *obj, const char *name, json_t *v)
{
    return v && json_object_set_new(obj, name, v) == 0;
}

static bool set_key(json_t *obj, const char *name, const char *key, size_t len)
{
    return set(obj, name, gr_etcd_codec_b64(key, key_len_of(key, len)));
}

json_t *gr_etcd_codec_op(const struct gr_etcd_op *op)
{
    json_t *o = json_object();
    bool ok = o && set_key(o, "key", op->key, op->key_len);
    if (ok && op->range_end && op->type != GR_ETCD_OP_PUT)
        ok = set_key(o, "range_end", op->range_end, op->range_end_len);
    if (ok && op->prev_kv && op->type != GR_ETCD_OP_RANGE) ok = set(o, "prev_kv", json_true());
    if (ok && op->type == GR_ETCD_OP_PUT) {
        ok = set(o, "value", gr_etcd_codec_b64(op->value ? op->value : "", op->value ? op->value_len : 0));
        if (ok && op->lease) ok = set(o, "lease", gr_etcd_codec_i64(op->lease));
    }
    if (ok && op->type == GR_ETCD_OP_RANGE) {
        if (op->limit) ok = set(o, "limit", gr_etcd_codec_i64(op->limit));
        if (ok && op->revision) ok = set(o, "revision", gr_etcd_codec_i64(op->revision));
        if (ok && op->keys_only) ok = set(o, "keys_only", json_true());
        if (ok && op->count_only) ok = set(o, "count_only", json_true());
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *request_op(const struct gr_etcd_op *op)
{
    static const char *const names[] = {"request_range", "request_put", "request_delete_range"};
    json_t *inner = gr_etcd_codec_op(op);
    json_t *o = json_object();
    if (!o || !set(o, names[op->type], inner)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *compare(const struct gr_etcd_compare *cmp)
{
    static const char *const targets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
    static const char *const fields[] = {"version", "create_revision", "mod_revision", "value", "lease"};
    static const char *const results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
    json_t *o = json_object();
    bool ok = o && set_key(o, "key", cmp->key, cmp->key_len) &&
              set(o, "target", json_string(targets[cmp->target])) &&
              set(o, "result", json_string(results[cmp->cmp]));
    if (ok && cmp->target == GR_ETCD_VALUE)
        ok =
            set(o, "value", gr_etcd_codec_b64(cmp->value ? cmp->value : "", cmp->value ? cmp->value_len : 0));
    else if (ok)
        ok = set(o, fields[cmp->target], gr_etcd_codec_i64(cmp->number));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *op_array(const struct gr_etcd_op *ops, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *o = request_op(&ops[i]);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *gr_etcd_codec_txn(const struct gr_etcd_txn *txn)
{
    json_t *o = json_object();
    json_t *cmps = json_array();
    bool ok = o && cmps;
    for (size_t i = 0; ok && i < txn->compare_count; i++) {
        json_t *c = compare(&txn->compares[i]);
        ok = c && json_array_append_new(cmps, c) == 0;
    }
    ok = ok && set(o, "compare", cmps);
    if (!ok) json_decref(cmps);
    ok = ok && set(o, "success", op_array(txn->success, txn->success_count)) &&
         set(o, "failure", op_array(txn->failure, txn->failure_count));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *gr_etcd_codec_watch_create(const char *key, size_t key_len, const char *range_end,
                                   size_t range_end_len, int64_t start_revision, bool prev_kv)
{
    json_t *c = json_object();
    bool ok = c && set_key(c, "key", key, key_len) && set(c, "progress_notify", json_true());
    if (ok && range_end) ok = set_key(c, "range_end", range_end, range_end_len);
    if (ok && start_revision) ok = set(c, "start_revision", gr_etcd_codec_i64(start_revision));
    if (ok && prev_kv) ok = set(c, "prev_kv", json_true());
    json_t *o = ok ? json_object() : NULL;
    if (!o || !set(o, "create_request", c)) {
        json_decref(o);
        if (!o) json_decref(c);
        return NULL;
    }
    return o;
}

bool gr_etcd_codec_get_i64(const json_t *obj, const char *name, int64_t *out)
{
    const json_t *v = json_object_get(obj, name);
    *out = 0;
    if (!v || json_is_null(v)) return true;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (!json_is_string(v)) return false;
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    size_t digits = len - (len && s[0] == '-');
    if (digits < 1 || digits > 19 || strlen(s) != len) return false;
    for (size_t i = len - digits; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || *end) return false;
    *out = (int64_t)x;
    return true;
}

bool gr_etcd_codec_get_bytes(const json_t *obj, const char *name, struct gr_arena *a, const char **out,
                             size_t *len)
{
    const json_t *v = json_object_get(obj, name);
    *out = "";
    *len = 0;
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v)) return false;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0) return true;
    if (n % 4 || n > INT32_MAX) return false;
    size_t pad = (s[n - 1] == '=') + (s[n - 2] == '=');
    unsigned char *buf = gr_arena_alloc(a, n / 4 * 3 + 1);
    if (!buf) return false;
    int got = EVP_DecodeBlock(buf, (const unsigned char *)s, (int)n);
    if (got < 0 || (size_t)got != n / 4 * 3) return false;
    *len = (size_t)got - pad;
    buf[*len] = 0;
    *out = (const char *)buf;
    return true;
}

bool gr_etcd_codec_kv(const json_t *j, struct gr_arena *a, struct gr_etcd_kv *kv)
{
    return json_is_object(j) && gr_etcd_codec_get_bytes(j, "key", a, &kv->key, &kv->key_len) &&
           gr_etcd_codec_get_bytes(j, "value", a, &kv->value, &kv->value_len) &&
           gr_etcd_codec_get_i64(j, "create_revision", &kv->create_revision) &&
           gr_etcd_codec_get_i64(j, "mod_revision", &kv->mod_revision) &&
           gr_etcd_codec_get_i64(j, "version", &kv->version) && gr_etcd_codec_get_i64(j, "lease", &kv->lease);
}

bool gr_etcd_codec_kvs(const json_t *arr, struct gr_arena *a, struct gr_etcd_kv **kvs, size_t *count)
{
    *kvs = NULL;
    *count = 0;
    if (!arr || json_is_null(arr)) return true;
    if (!json_is_array(arr)) return false;
    size_t n = json_array_size(arr);
    if (n == 0) return true;
    *kvs = gr_arena_calloc(a, n, sizeof **kvs);
    if (!*kvs) return false;
    for (size_t i = 0; i < n; i++)
        if (!gr_etcd_codec_kv(json_array_get(arr, i), a, &(*kvs)[i])) return false;
    *count = n;
    return true;
}

static bool header_revision(const json_t *j, int64_t *rev)
{
    const json_t *h = json_object_get(j, "header");
    *rev = 0;
    return !h || (json_is_object(h) && gr_etcd_codec_get_i64(h, "revision", rev));
}

bool gr_etcd_codec_op_result(const json_t *j, enum gr_etcd_op_type type, struct gr_arena *a,
                             struct gr_etcd_op_result *out)
{
    memset(out, 0, sizeof *out);
    out->type = type;
    if (!json_is_object(j) || !header_revision(j, &out->revision)) return false;
    if (type == GR_ETCD_OP_RANGE) {
        const json_t *more = json_object_get(j, "more");
        if (more && !json_is_boolean(more)) return false;
        out->more = more && json_is_true(more);
        return gr_etcd_codec_get_i64(j, "count", &out->count) &&
               gr_etcd_codec_kvs(json_object_get(j, "kvs"), a, &out->kvs, &out->kv_count);
    }
    if (type == GR_ETCD_OP_DELETE && !gr_etcd_codec_get_i64(j, "deleted", &out->count)) return false;
    if (type == GR_ETCD_OP_PUT) {
        const json_t *prev = json_object_get(j, "prev_kv");
        if (!prev) return true;
        out->kvs = gr_arena_calloc(a, 1, sizeof *out->kvs);
        out->kv_count = 1;
        return out->kvs && gr_etcd_codec_kv(prev, a, out->kvs);
    }
    return gr_etcd_codec_kvs(json_object_get(j, "prev_kvs"), a, &out->kvs, &out->kv_count);
}

bool gr_etcd_codec_txn_result(const json_t *j, struct gr_arena *a, struct gr_etcd_result *res)
{
    static const char *const names[] = {"response_range", "response_put", "response_delete_range"};
    if (!json_is_object(j) || !header_revision(j, &res->revision)) return false;
    const json_t *ok = json_object_get(j, "succeeded");
    if (ok && !json_is_boolean(ok)) return false;
    res->succeeded = ok && json_is_true(ok);
    const json_t *arr = json_object_get(j, "responses");
    if (!arr || json_is_null(arr)) return true;
    if (!json_is_array(arr)) return false;
    size_t n = json_array_size(arr);
    if (n > GR_ETCD_TXN_OPS_MAX) return false;
    res->responses = n ? gr_arena_calloc(a, n, sizeof *res->responses) : NULL;
    if (n && !res->responses) return false;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(arr, i);
        bool found = false;
        for (int t = GR_ETCD_OP_RANGE; t <= GR_ETCD_OP_DELETE && !found; t++) {
            const json_t *body = json_object_get(r, names[t]);
            if (!body) continue;
            if (!gr_etcd_codec_op_result(body, (enum gr_etcd_op_type)t, a, &res->responses[i])) return false;
            found = true;
        }
        if (!found) return false;
    }
    res->response_count = n;
    return true;
}

bool gr_etcd_codec_error(const json_t *j, int *code, const char **message)
{
    const json_t *err = json_object_get(j, "error");
    if (!err) return false;
    const json_t *msg;
    int64_t c;
    if (json_is_object(err)) { /* streaming form */
        if (!gr_etcd_codec_get_i64(err, "grpc_code", &c)) c = 2;
        msg = json_object_get(err, "message");
    } else if (json_is_string(err) && json_object_get(j, "code")) { /* unary form */
        if (!gr_etcd_codec_get_i64(j, "code", &c)) c = 2;
        msg = json_object_get(j, "message");
        if (!json_is_string(msg)) msg = err;
    } else {
        return false; /* e.g. LeaseGrantResponse's own "error" string field */
    }
    *code = (int)c;
    *message = json_is_string(msg) ? json_string_value(msg) : "(no message)";
    return true;
}
