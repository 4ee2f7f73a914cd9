/*
 * security_etcd.c: ACLs and SCRAM credentials in etcd (server/security_etcd.h): one key each, a CAS update
 * per request and a watch installing what any broker wrote. Runs on the loop.
 */
#include "server/security_etcd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd.h"
#include "cluster/layout.h"
#include "cluster/member.h"
#include "common/acl.h"
#include "common/log.h"
#include "server/broker.h"
#include "server/scram_store.h"

#define ROOT_BUF sizeof(((struct gr_cluster_layout *)0)->root)

struct update {
    struct gr_security_etcd *se;
    enum gr_security_kind kind;
    gr_security_apply_fn *apply;
    gr_security_done_fn *done;
    void *ctx;
    struct gr_etcd_req *req;
    int attempts;
    struct update *prev, *next;
};

struct gr_security_etcd {
    struct gr_broker *b;
    struct gr_etcd *etcd;
    char prefix[ROOT_BUF + 16], prefix_end[ROOT_BUF + 16]; /* "<root>security/" and its range end */
    char key[2][ROOT_BUF + 32];
    int64_t installed[2]; /* mod_revision of the value installed (events at or below it are old) */
    bool seen[2];         /* in a resync: the key was in the snapshot */
    struct gr_etcd_req *first_read;
    struct gr_etcd_watch *watch;
    struct update *updates;
};

static const char *kind_name(enum gr_security_kind k)
{
    return k == GR_SECURITY_ACLS ? "ACLs" : "SCRAM credentials";
}

struct gr_authorizer *gr_security_acls_parse(const struct gr_broker *b, const char *buf, size_t len,
                                             char *err, size_t cap)
{
    const struct gr_broker_settings *s = &b->cfg.settings;
    struct gr_authorizer *a = gr_authz_new(s->super_users, s->allow_everyone_if_no_acl_found, err, cap);
    if (!a) return NULL;
    if (len > 0 && gr_authz_parse(a, buf, len, err, cap) < 0) {
        gr_authz_free(a);
        return NULL;
    }
    return a;
}

/* Installs `kind`'s value (NULL, 0: the key is absent) at mod_revision `rev`. Refused (logged, the state
 * kept) when over the cap or unparsable. */
static void install(struct gr_security_etcd *se, enum gr_security_kind kind, const char *val, size_t len,
                    int64_t rev)
{
    if (rev && rev <= se->installed[kind]) return;
    struct gr_broker *b = se->b;
    char err[256];
    if (len > GR_SECURITY_ETCD_VALUE_MAX) {
        GR_ERROR("security: %s: %zu bytes, over the cap of %d: refused, the previous %s kept", se->key[kind],
                 len, GR_SECURITY_ETCD_VALUE_MAX, kind_name(kind));
        return;
    }
    if (kind == GR_SECURITY_ACLS) {
        if (!b->authz) return; /* no authorizer on this broker: nothing checks ACLs */
        struct gr_authorizer *a = gr_security_acls_parse(b, val, len, err, sizeof err);
        if (!a) {
            GR_ERROR("security: %s does not parse (%s): refused, the previous ACLs kept", se->key[kind], err);
            return;
        }
        gr_authz_free(b->authz);
        b->authz = a;
        GR_INFO("security: %d ACLs from etcd (revision %lld)", gr_authz_count(a), (long long)rev);
    } else {
        struct gr_scram_store s = {0};
        if (len > 0 && gr_scram_store_parse(&s, val, len, err, sizeof err) < 0) {
            gr_scram_store_clear(&s);
            GR_ERROR("security: %s does not parse (%s): refused, the previous credentials kept",
                     se->key[kind], err);
            return;
        }
        gr_scram_store_clear(&b->scram);
        b->scram = s;
        GR_INFO("security: %zu SCRAM users from etcd (revision %lld)", s.count, (long long)rev);
    }
    if (rev) se->installed[kind] = rev;
}

static int key_kind(const struct gr_security_etcd *se, const char *key, size_t len)
{
    for (int k = 0; k < 2; k++)
        if (strlen(se->key[k]) == len && memcmp(se->key[k], key, len) == 0) return k;
    return -1;
}

static void watch_cb(void *ctx, const struct gr_etcd_watch_event *ev)
{
    struct gr_security_etcd *se = ctx;
    int k = ev->kv ? key_kind(se, ev->kv->key, ev->kv->key_len) : -1;
    switch (ev->kind) {
    case GR_ETCD_EVENT_PUT:
    case GR_ETCD_EVENT_SNAPSHOT_KV:
        if (k < 0) return;
        se->seen[k] = true;
        install(se, (enum gr_security_kind)k, ev->kv->value, ev->kv->value_len, ev->kv->mod_revision);
        return;
    case GR_ETCD_EVENT_DELETE:
        if (k >= 0) install(se, (enum gr_security_kind)k, NULL, 0, ev->kv->mod_revision);
        return;
    case GR_ETCD_EVENT_SNAPSHOT_BEGIN:
        se->seen[0] = se->seen[1] = false;
        return;
    case GR_ETCD_EVENT_SNAPSHOT_END:
        for (int i = 0; i < 2; i++)
            if (!se->seen[i]) install(se, (enum gr_security_kind)i, NULL, 0, ev->revision);
        return;
    }
}

static void first_read_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_security_etcd *se = ctx;
    se->first_read = NULL;
    int64_t from = 1; /* read failed: the watch replays the keys' history (or resyncs from a snapshot) */
    if (res->status != GR_ETCD_OK) {
        GR_ERROR("security: reading %s: %s (the watch replays them from revision 1 instead)", se->prefix,
                 res->message);
    } else {
        bool have[2] = {false, false};
        for (size_t i = 0; i < res->op.kv_count; i++) {
            const struct gr_etcd_kv *kv = &res->op.kvs[i];
            int k = key_kind(se, kv->key, kv->key_len);
            if (k < 0) continue;
            have[k] = true;
            install(se, (enum gr_security_kind)k, kv->value, kv->value_len, kv->mod_revision);
        }
        for (int k = 0; k < 2; k++)
            if (!have[k]) GR_INFO("security: no %s in etcd yet", kind_name((enum gr_security_kind)k));
        from = res->revision + 1;
    }
    se->watch = gr_etcd_watch_start(se->etcd, se->prefix, strlen(se->prefix), se->prefix_end,
                                    strlen(se->prefix_end), from, false, watch_cb, se);
    if (!se->watch) GR_ERROR("security: cannot watch %s: %s", se->prefix, gr_etcd_last_error(se->etcd));
}

int gr_security_etcd_start(struct gr_broker *b)
{
    struct gr_security_etcd *se = calloc(1, sizeof *se);
    if (!se) return -ENOMEM;
    se->b = b;
    se->etcd = gr_member_etcd(b->member);
    const struct gr_cluster_layout *lay = gr_member_layout(b->member);
    snprintf(se->prefix, sizeof se->prefix, "%ssecurity/", lay->root);
    snprintf(se->key[GR_SECURITY_ACLS], sizeof se->key[0], "%sacls", se->prefix);
    snprintf(se->key[GR_SECURITY_SCRAM], sizeof se->key[1], "%sscram", se->prefix);
    size_t n = gr_etcd_prefix_end(se->prefix, strlen(se->prefix), se->prefix_end);
    se->prefix_end[n] = 0;
    b->security_etcd = se;
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = se->prefix, .range_end = se->prefix_end};
    if (!(se->first_read = gr_etcd_range(se->etcd, &get, first_read_cb, se))) {
        GR_ERROR("security: cannot read %s: %s", se->prefix, gr_etcd_last_error(se->etcd));
        return -EIO;
    }
    return 0;
}

bool gr_security_etcd_on(const struct gr_broker *b)
{
    return b->security_etcd != NULL;
}

static void update_end(struct update *u, int err)
{
    struct gr_security_etcd *se = u->se;
    if (u->prev)
        u->prev->next = u->next;
    else
        se->updates = u->next;
    if (u->next) u->next->prev = u->prev;
    gr_security_done_fn *done = u->done;
    void *ctx = u->ctx;
    free(u);
    done(ctx, err);
}

static void cas_cb(void *ctx, const struct gr_etcd_result *res);

/* Applies the request to `cur` (mod_revision `mod`, 0 absent) and sends the CAS txn. */
static void attempt(struct update *u, const char *cur, size_t cur_len, int64_t mod)
{
    struct gr_security_etcd *se = u->se;
    if (cur_len > GR_SECURITY_ETCD_VALUE_MAX) {
        GR_ERROR("security: %s holds %zu bytes, over the cap: not changed", se->key[u->kind], cur_len);
        return update_end(u, -EMSGSIZE);
    }
    char *val = NULL;
    size_t len = 0;
    int rc = u->apply(u->ctx, cur, cur_len, &val, &len);
    if (rc <= 0) {
        if (rc == 0) install(se, u->kind, cur, cur_len, mod); /* what the answer was computed from */
        return update_end(u, rc);
    }
    if (len > GR_SECURITY_ETCD_VALUE_MAX) {
        free(val);
        GR_WARN("security: new %s would take %zu bytes, over the cap of %d: refused", kind_name(u->kind), len,
                GR_SECURITY_ETCD_VALUE_MAX);
        return update_end(u, -EMSGSIZE);
    }
    const char *key = se->key[u->kind];
    struct gr_etcd_compare cmp = {.key = key, .target = GR_ETCD_MOD, .cmp = GR_ETCD_EQUAL, .number = mod};
    struct gr_etcd_op put = {.type = GR_ETCD_OP_PUT, .key = key, .value = val, .value_len = len};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = key};
    struct gr_etcd_txn txn = {&cmp, 1, &put, 1, &get, 1};
    u->req = gr_etcd_txn(se->etcd, &txn, cas_cb, u);
    free(val);
    if (!u->req) {
        GR_ERROR("security: writing %s: %s", key, gr_etcd_last_error(se->etcd));
        update_end(u, -EIO);
    }
}

/* After a successful CAS the written value is read back from etcd by the watch; the answer installs it at
 * once from a fresh range (so the broker that answered already holds what it acknowledged). */
static void installed_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct update *u = ctx;
    u->req = NULL;
    if (res->status == GR_ETCD_OK && res->op.kv_count == 1)
        install(u->se, u->kind, res->op.kvs[0].value, res->op.kvs[0].value_len, res->op.kvs[0].mod_revision);
    update_end(u, 0); /* written and acknowledged: the watch installs it when this read failed */
}

static void cas_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct update *u = ctx;
    struct gr_security_etcd *se = u->se;
    u->req = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_WARN("security: writing %s: %s", se->key[u->kind], res->message);
        return update_end(u, -EIO);
    }
    if (res->succeeded) {
        struct gr_etcd_op get = {
            .type = GR_ETCD_OP_RANGE, .key = se->key[u->kind], .revision = res->revision};
        if (!(u->req = gr_etcd_range(se->etcd, &get, installed_cb, u))) update_end(u, 0);
        return;
    }
    if (++u->attempts >= GR_SECURITY_ETCD_ATTEMPTS) {
        GR_WARN("security: %d compares on %s lost in a row: giving up", u->attempts, se->key[u->kind]);
        return update_end(u, -EBUSY);
    }
    GR_INFO("security: compare on %s lost (attempt %d): applying the request again to the newer value",
            se->key[u->kind], u->attempts);
    const struct gr_etcd_op_result *r = res->response_count == 1 ? &res->responses[0] : NULL;
    if (!r) return update_end(u, -EIO);
    if (r->kv_count == 0) return attempt(u, NULL, 0, 0);
    attempt(u, r->kvs[0].value, r->kvs[0].value_len, r->kvs[0].mod_revision);
}

static void read_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct update *u = ctx;
    u->req = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_WARN("security: reading %s: %s", u->se->key[u->kind], res->message);
        return update_end(u, -EIO);
    }
    if (res->op.kv_count == 0) return attempt(u, NULL, 0, 0);
    attempt(u, res->op.kvs[0].value, res->op.kvs[0].value_len, res->op.kvs[0].mod_revision);
}

int gr_security_etcd_update(struct gr_broker *b, enum gr_security_kind kind, gr_security_apply_fn *apply,
                            gr_security_done_fn *done, void *ctx)
{
    struct gr_security_etcd *se = b->security_etcd;
    struct update *u = calloc(1, sizeof *u);
    if (!u) return -ENOMEM;
    *u = (struct update){.se = se, .kind = kind, .apply = apply, .done = done, .ctx = ctx};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = se->key[kind]};
    if (!(u->req = gr_etcd_range(se->etcd, &get, read_cb, u))) {
        free(u);
        return -EIO;
    }
    u->next = se->updates;
    if (u->next) u->next->prev = u;
    se->updates = u;
    return 0;
}

void gr_security_etcd_stop(struct gr_broker *b)
{
    struct gr_security_etcd *se = b->security_etcd;
    if (!se) return;
    if (se->first_read) gr_etcd_cancel(se->first_read);
    if (se->watch) gr_etcd_watch_stop(se->watch);
    for (struct update *u = se->updates, *next; u; u = next) {
        next = u->next;
        if (u->req) gr_etcd_cancel(u->req);
        free(u);
    }
    free(se);
    b->security_etcd = NULL;
}
