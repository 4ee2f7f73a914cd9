/*
 * security_etcd.c: ACLs and SCRAM credentials in etcd (server/security_etcd.h): the ACLs one key with a CAS
 * update per request, SCRAM one key per user with one txn per request, a paged first read before clients
 * are served and a watch installing what any broker wrote. Runs on the loop.
 */
#include "server/security_etcd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "cluster/etcd.h"
#include "cluster/layout.h"
#include "cluster/member.h"
#include "common/acl.h"
#include "common/log.h"
#include "common/time.h"
#include "server/broker.h"
#include "server/scram_store.h"

#define ROOT_BUF sizeof(((struct gr_cluster_layout *)0)->root)
#define SCRAM_DIR "security/scram/"
/* A SCRAM user's key: the root, SCRAM_DIR and the escaped name (3 bytes a byte at most). */
#define SCRAM_KEY_BUF (ROOT_BUF + sizeof SCRAM_DIR + 3 * GR_SCRAM_NAME_MAX + 1)

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

/* A SCRAM update (gr_security_scram_update): its users, their keys and what the read found. */
struct scram_update {
    struct gr_security_etcd *se;
    gr_security_scram_fn *apply;
    gr_security_done_fn *done;
    void *ctx;
    size_t count;
    char **keys;   /* [count], NUL-terminated */
    char **names;  /* [count], copies of the names */
    size_t *lens;  /* [count] */
    int64_t *mods; /* [count]: mod_revision read (0 absent) */
    char **before; /* [count]: the user's value as formatted before the apply (NULL: not in the store) */
    size_t *before_len;
    struct gr_etcd_req *req;
    int attempts;
    int64_t wait_rev; /* written at this revision: waiting for the watch to apply it (0: not waiting) */
    ev_timer wait_w;
    struct scram_update *prev, *next;
};

struct gr_security_etcd {
    struct gr_broker *b;
    struct gr_etcd *etcd;
    char prefix[ROOT_BUF + 16], prefix_end[ROOT_BUF + 16]; /* "<root>security/" and its range end */
    char root[ROOT_BUF];
    char acl_key[ROOT_BUF + 32];
    char old_scram_key[ROOT_BUF + 32]; /* "<root>security/scram": the first form's single value, ignored */
    char scram_prefix[ROOT_BUF + 32];  /* "<root>security/scram/" */
    size_t scram_prefix_len;
    int64_t installed; /* mod_revision of the ACL value installed (events at or below it are old) */
    bool seen_acls;    /* in a resync: the ACL key was in the snapshot */
    struct gr_scram_store resync; /* in a resync or the first read: the users read so far */
    size_t skipped;               /* ... and the values skipped (unparsable, over the cap) */
    bool acls_read;               /* the first read: the ACL key was there */
    bool reading, read_ok;        /* the first read: in flight, and how it ended */
    int64_t read_rev;
    int64_t applied_rev; /* the highest revision the watch delivered (SCRAM waiters compare to it) */
    ev_timer settle_w;   /* after a watch message: finish the SCRAM updates its revision covers */
    struct gr_etcd_watch *watch;
    struct update *updates;
    struct scram_update *scram_updates;
};

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

/* Installs the ACL value (NULL, 0: the key is absent) at mod_revision `rev`. Refused (logged, the state
 * kept) when over the cap or unparsable. */
static void install_acls(struct gr_security_etcd *se, const char *val, size_t len, int64_t rev)
{
    if (rev && rev <= se->installed) return;
    struct gr_broker *b = se->b;
    char err[256];
    if (len > GR_SECURITY_ETCD_VALUE_MAX) {
        GR_ERROR("security: %s: %zu bytes, over the cap of %d: refused, the previous ACLs kept", se->acl_key,
                 len, GR_SECURITY_ETCD_VALUE_MAX);
        return;
    }
    if (!b->authz) return; /* no authorizer on this broker: nothing checks ACLs */
    struct gr_authorizer *a = gr_security_acls_parse(b, val, len, err, sizeof err);
    if (!a) {
        GR_ERROR("security: %s does not parse (%s): refused, the previous ACLs kept", se->acl_key, err);
        return;
    }
    gr_authz_free(b->authz);
    b->authz = a;
    GR_INFO("security: %d ACLs from etcd (revision %lld)", gr_authz_count(a), (long long)rev);
    if (rev) se->installed = rev;
}

int gr_security_scram_key(const char *root, const char *name, size_t len, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s%s", root, SCRAM_DIR);
    if (n < 0 || (size_t)n >= cap) return -EINVAL;
    int e = gr_cluster_scram_escape(name, len, out + n, cap - (size_t)n);
    return e < 0 ? e : n + e;
}

int gr_security_scram_parse(const char *seg, size_t seg_len, const char *val, size_t vlen,
                            struct gr_scram_store *out, char *err, size_t cap)
{
    char name[GR_SCRAM_NAME_MAX];
    gr_scram_store_clear(out);
    int nl = gr_cluster_scram_unescape(seg, seg_len, name, sizeof name);
    if (nl <= 0) return snprintf(err, cap, "not an escaped user name"), -1;
    if (vlen > GR_SECURITY_ETCD_VALUE_MAX) return snprintf(err, cap, "%zu bytes, over the cap", vlen), -1;
    if (gr_scram_store_parse(out, val, vlen, err, cap) < 0) return -1;
    if (out->count != 1 || out->users[0].name_len != (size_t)nl ||
        memcmp(out->users[0].name, name, (size_t)nl)) {
        snprintf(err, cap, "%zu users in the value, not the one the key names", out->count);
        gr_scram_store_clear(out);
        return -1;
    }
    return 0;
}

/* The user segment of `key` when it is a SCRAM user's key (NULL otherwise), its length in *seg_len. */
static const char *scram_seg(const struct gr_security_etcd *se, const char *key, size_t len, size_t *seg_len)
{
    if (len <= se->scram_prefix_len || memcmp(key, se->scram_prefix, se->scram_prefix_len) != 0) return NULL;
    *seg_len = len - se->scram_prefix_len;
    return key + se->scram_prefix_len;
}

/* Puts a SCRAM user's key-value into `s` (the broker's store or a resync's); a bad value is logged and
 * skipped (on the broker's store: the user's previous credentials are removed, as its key no longer holds
 * any usable). Returns whether it was installed. */
static bool scram_put(struct gr_security_etcd *se, struct gr_scram_store *s, const struct gr_etcd_kv *kv)
{
    size_t sl = 0;
    const char *seg = scram_seg(se, kv->key, kv->key_len, &sl);
    struct gr_scram_store one = {0};
    char err[256], name[GR_SCRAM_NAME_MAX];
    int rc = gr_security_scram_parse(seg, sl, kv->value, kv->value_len, &one, err, sizeof err);
    if (rc == 0 && (rc = gr_scram_store_set_user(s, &one.users[0])) < 0)
        snprintf(err, sizeof err, "%s",
                 rc == -ENOSPC ? "over the cap of users (GR_SCRAM_USERS_MAX)" : "no memory");
    gr_scram_store_clear(&one);
    if (rc == 0) return true;
    GR_ERROR("security: %.*s (revision %lld) skipped: %s", (int)kv->key_len, kv->key,
             (long long)kv->mod_revision, err);
    int nl = gr_cluster_scram_unescape(seg, sl, name, sizeof name);
    if (nl > 0) gr_scram_store_remove(s, name, (size_t)nl);
    se->skipped++;
    return false;
}

static void scram_del(struct gr_security_etcd *se, const struct gr_etcd_kv *kv)
{
    size_t sl = 0;
    const char *seg = scram_seg(se, kv->key, kv->key_len, &sl);
    char name[GR_SCRAM_NAME_MAX];
    int nl = gr_cluster_scram_unescape(seg, sl, name, sizeof name);
    if (nl > 0) gr_scram_store_remove(&se->b->scram, name, (size_t)nl);
}

static void scram_finish_waiters(struct gr_security_etcd *se);

static void settle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    scram_finish_waiters(w->data);
}

static void watch_cb(void *ctx, const struct gr_etcd_watch_event *ev)
{
    struct gr_security_etcd *se = ctx;
    const struct gr_etcd_kv *kv = ev->kv;
    bool acl = kv && kv->key_len == strlen(se->acl_key) && memcmp(kv->key, se->acl_key, kv->key_len) == 0;
    size_t sl = 0;
    bool scram = kv && scram_seg(se, kv->key, kv->key_len, &sl);
    switch (ev->kind) {
    case GR_ETCD_EVENT_PUT:
        if (acl) install_acls(se, kv->value, kv->value_len, kv->mod_revision);
        if (scram) scram_put(se, &se->b->scram, kv);
        break;
    case GR_ETCD_EVENT_SNAPSHOT_KV:
        if (acl) {
            se->seen_acls = true;
            install_acls(se, kv->value, kv->value_len, kv->mod_revision);
        }
        if (scram) scram_put(se, &se->resync, kv);
        return;
    case GR_ETCD_EVENT_DELETE:
        if (acl) install_acls(se, NULL, 0, kv->mod_revision);
        if (scram) scram_del(se, kv);
        break;
    case GR_ETCD_EVENT_SNAPSHOT_BEGIN:
        se->seen_acls = false;
        gr_scram_store_clear(&se->resync);
        return;
    case GR_ETCD_EVENT_SNAPSHOT_END:
        if (!se->seen_acls) install_acls(se, NULL, 0, ev->revision);
        gr_scram_store_clear(&se->b->scram);
        se->b->scram = se->resync;
        memset(&se->resync, 0, sizeof se->resync);
        GR_INFO("security: %zu SCRAM users after a resync at revision %lld", se->b->scram.count,
                (long long)ev->revision);
        break;
    }
    /* a txn's events share one revision and arrive in one watch message: the waiters are checked once the
       message is done (the loop's next pass) */
    if (ev->revision > se->applied_rev) se->applied_rev = ev->revision;
    if (se->scram_updates && !ev_is_active(&se->settle_w)) ev_timer_start(se->b->loop, &se->settle_w);
}

static void first_page_cb(void *ctx, const struct gr_etcd_kv *kvs, size_t n, int64_t revision)
{
    struct gr_security_etcd *se = ctx;
    (void)revision;
    for (size_t i = 0; i < n; i++) {
        const struct gr_etcd_kv *kv = &kvs[i];
        size_t sl = 0;
        if (kv->key_len == strlen(se->acl_key) && memcmp(kv->key, se->acl_key, kv->key_len) == 0) {
            se->acls_read = true;
            install_acls(se, kv->value, kv->value_len, kv->mod_revision);
        } else if (scram_seg(se, kv->key, kv->key_len, &sl)) {
            scram_put(se, &se->resync, kv);
        } else if (kv->key_len == strlen(se->old_scram_key) &&
                   !memcmp(kv->key, se->old_scram_key, kv->key_len)) {
            GR_WARN("security: %s (the single SCRAM value of development builds before per-user keys) is "
                    "ignored: add the users again (AlterUserScramCredentials)",
                    se->old_scram_key);
        }
    }
}

static void first_done_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_security_etcd *se = ctx;
    se->reading = false;
    se->read_ok = res->status == GR_ETCD_OK;
    se->read_rev = res->revision;
    if (!se->read_ok) GR_WARN("security: reading %s: %s", se->prefix, res->message);
}

/* One-shot wait on the loop (the start's retry pause). */
static void pause_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    *(bool *)w->data = true;
}

int gr_security_etcd_start(struct gr_broker *b)
{
    struct gr_security_etcd *se = calloc(1, sizeof *se);
    if (!se) return -ENOMEM;
    se->b = b;
    se->etcd = gr_member_etcd(b->member);
    const struct gr_cluster_layout *lay = gr_member_layout(b->member);
    snprintf(se->root, sizeof se->root, "%s", lay->root);
    snprintf(se->prefix, sizeof se->prefix, "%ssecurity/", lay->root);
    snprintf(se->acl_key, sizeof se->acl_key, "%sacls", se->prefix);
    snprintf(se->old_scram_key, sizeof se->old_scram_key, "%sscram", se->prefix);
    snprintf(se->scram_prefix, sizeof se->scram_prefix, "%s%s", lay->root, SCRAM_DIR);
    se->scram_prefix_len = strlen(se->scram_prefix);
    size_t n = gr_etcd_prefix_end(se->prefix, strlen(se->prefix), se->prefix_end);
    se->prefix_end[n] = 0;
    ev_timer_init(&se->settle_w, settle_cb, 0.0, 0.0);
    se->settle_w.data = se;
    b->security_etcd = se;
    /* the whole prefix, before any client is served: retried until the wait is over */
    int64_t t0 = gr_time_mono_ms();
    for (int attempt = 1;; attempt++) {
        gr_scram_store_clear(&se->resync);
        se->skipped = 0;
        se->acls_read = false;
        se->reading = true;
        struct gr_etcd_req *r =
            gr_etcd_range_paged(se->etcd, se->prefix, strlen(se->prefix), se->prefix_end,
                                strlen(se->prefix_end), 0, first_page_cb, first_done_cb, se);
        if (!r) {
            GR_ERROR("security: cannot read %s: %s", se->prefix, gr_etcd_last_error(se->etcd));
            return -EIO;
        }
        while (se->reading)
            ev_run(b->loop, EVRUN_ONCE);
        if (se->read_ok) break;
        int64_t waited = gr_time_mono_ms() - t0;
        if (waited >= GR_SECURITY_ETCD_START_WAIT_MS) {
            GR_ERROR("security: no complete read of %s in %lld ms (%d attempts): stopping, as the broker "
                     "cannot authenticate or authorize without it",
                     se->prefix, (long long)waited, attempt);
            return -ETIMEDOUT;
        }
        bool over = false;
        ev_timer pause;
        ev_timer_init(&pause, pause_cb, 0.5, 0.0);
        pause.data = &over;
        ev_timer_start(b->loop, &pause);
        while (!over)
            ev_run(b->loop, EVRUN_ONCE);
    }
    if (!se->acls_read) GR_INFO("security: no ACLs in etcd yet");
    gr_scram_store_clear(&b->scram);
    b->scram = se->resync;
    memset(&se->resync, 0, sizeof se->resync);
    se->applied_rev = se->read_rev;
    GR_INFO("security: %zu SCRAM users from etcd (revision %lld, %zu values skipped) read in %lld ms, before "
            "clients are served",
            b->scram.count, (long long)se->read_rev, se->skipped, (long long)(gr_time_mono_ms() - t0));
    se->watch = gr_etcd_watch_start(se->etcd, se->prefix, strlen(se->prefix), se->prefix_end,
                                    strlen(se->prefix_end), se->read_rev + 1, false, watch_cb, se);
    if (!se->watch) {
        GR_ERROR("security: cannot watch %s: %s", se->prefix, gr_etcd_last_error(se->etcd));
        return -EIO;
    }
    return 0;
}

bool gr_security_etcd_on(const struct gr_broker *b)
{
    return b->security_etcd != NULL;
}

/* ---- the ACL key: read, apply, CAS, retry ---- */

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
        GR_ERROR("security: %s holds %zu bytes, over the cap: not changed", se->acl_key, cur_len);
        return update_end(u, -EMSGSIZE);
    }
    char *val = NULL;
    size_t len = 0;
    int rc = u->apply(u->ctx, cur, cur_len, &val, &len);
    if (rc <= 0) {
        if (rc == 0) install_acls(se, cur, cur_len, mod); /* what the answer was computed from */
        return update_end(u, rc);
    }
    if (len > GR_SECURITY_ETCD_VALUE_MAX) {
        free(val);
        GR_WARN("security: new ACLs would take %zu bytes, over the cap of %d: refused", len,
                GR_SECURITY_ETCD_VALUE_MAX);
        return update_end(u, -EMSGSIZE);
    }
    const char *key = se->acl_key;
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
        install_acls(u->se, res->op.kvs[0].value, res->op.kvs[0].value_len, res->op.kvs[0].mod_revision);
    update_end(u, 0); /* written and acknowledged: the watch installs it when this read failed */
}

static void cas_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct update *u = ctx;
    struct gr_security_etcd *se = u->se;
    u->req = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_WARN("security: writing %s: %s", se->acl_key, res->message);
        return update_end(u, -EIO);
    }
    if (res->succeeded) {
        struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = se->acl_key, .revision = res->revision};
        if (!(u->req = gr_etcd_range(se->etcd, &get, installed_cb, u))) update_end(u, 0);
        return;
    }
    if (++u->attempts >= GR_SECURITY_ETCD_ATTEMPTS) {
        GR_WARN("security: %d compares on %s lost in a row: giving up", u->attempts, se->acl_key);
        return update_end(u, -EBUSY);
    }
    GR_INFO("security: compare on %s lost (attempt %d): applying the request again to the newer value",
            se->acl_key, u->attempts);
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
        GR_WARN("security: reading %s: %s", u->se->acl_key, res->message);
        return update_end(u, -EIO);
    }
    if (res->op.kv_count == 0) return attempt(u, NULL, 0, 0);
    attempt(u, res->op.kvs[0].value, res->op.kvs[0].value_len, res->op.kvs[0].mod_revision);
}

int gr_security_etcd_update(struct gr_broker *b, enum gr_security_kind kind, gr_security_apply_fn *apply,
                            gr_security_done_fn *done, void *ctx)
{
    struct gr_security_etcd *se = b->security_etcd;
    if (kind != GR_SECURITY_ACLS) return -EINVAL;
    struct update *u = calloc(1, sizeof *u);
    if (!u) return -ENOMEM;
    *u = (struct update){.se = se, .kind = kind, .apply = apply, .done = done, .ctx = ctx};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = se->acl_key};
    if (!(u->req = gr_etcd_range(se->etcd, &get, read_cb, u))) {
        free(u);
        return -EIO;
    }
    u->next = se->updates;
    if (u->next) u->next->prev = u;
    se->updates = u;
    return 0;
}

/* ---- SCRAM: one txn over the request's users' keys ---- */

static void su_clear_before(struct scram_update *u)
{
    for (size_t i = 0; i < u->count; i++) {
        if (u->before[i]) OPENSSL_cleanse(u->before[i], u->before_len[i]);
        free(u->before[i]);
        u->before[i] = NULL;
    }
}

static void su_free(struct scram_update *u)
{
    if (u->req) gr_etcd_cancel(u->req);
    if (u->wait_rev) ev_timer_stop(u->se->b->loop, &u->wait_w);
    for (size_t i = 0; i < u->count; i++) {
        free(u->keys[i]);
        free(u->names[i]);
    }
    su_clear_before(u);
    free(u->keys);
    free(u->names);
    free(u->lens);
    free(u->mods);
    free(u->before);
    free(u->before_len);
    free(u);
}

static void su_end(struct scram_update *u, int err)
{
    struct gr_security_etcd *se = u->se;
    if (u->prev)
        u->prev->next = u->next;
    else
        se->scram_updates = u->next;
    if (u->next) u->next->prev = u->prev;
    gr_security_done_fn *done = u->done;
    void *ctx = u->ctx;
    u->req = NULL;
    su_free(u);
    done(ctx, err);
}

static void scram_finish_waiters(struct gr_security_etcd *se)
{
    for (struct scram_update *u = se->scram_updates, *next; u; u = next) {
        next = u->next;
        if (u->wait_rev && u->wait_rev <= se->applied_rev) su_end(u, 0);
    }
}

static void wait_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct scram_update *u = w->data;
    GR_WARN("security: SCRAM credentials written at revision %lld not yet applied by this broker's watch "
            "after %d ms (at %lld): answering, etcd acknowledged them",
            (long long)u->wait_rev, GR_SECURITY_SCRAM_APPLY_WAIT_MS, (long long)u->se->applied_rev);
    su_end(u, 0);
}

static int su_read(struct scram_update *u);

/* One user of `s` formatted alone (malloc'd), or NULL (not in `s`, or out of memory: *oom set). */
static char *format_one(const struct gr_scram_store *s, const char *name, size_t len, size_t *out_len,
                        bool *oom)
{
    const struct gr_scram_user *found = gr_scram_store_find(s, name, len);
    if (!found) return NULL;
    struct gr_scram_store one = {0};
    char *text = NULL;
    if (gr_scram_store_set_user(&one, found) == 0) text = gr_scram_store_format(&one, out_len);
    gr_scram_store_clear(&one);
    if (!text) *oom = true;
    return text;
}

static void su_txn_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct scram_update *u = ctx;
    struct gr_security_etcd *se = u->se;
    u->req = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_WARN("security: writing %zu SCRAM users: %s", u->count, res->message);
        return su_end(u, -EIO);
    }
    if (!res->succeeded) {
        if (++u->attempts >= GR_SECURITY_ETCD_ATTEMPTS) {
            GR_WARN("security: %d compares on SCRAM users lost in a row: giving up", u->attempts);
            return su_end(u, -EBUSY);
        }
        GR_INFO("security: compare on %zu SCRAM users lost (attempt %d): reading them again", u->count,
                u->attempts);
        int rc = su_read(u);
        if (rc < 0) su_end(u, rc);
        return;
    }
    if (res->revision <= se->applied_rev) return su_end(u, 0);
    u->wait_rev = res->revision; /* the watch applies it; settle_cb or the timeout answers */
    ev_timer_init(&u->wait_w, wait_timeout_cb, GR_SECURITY_SCRAM_APPLY_WAIT_MS / 1000.0, 0.0);
    u->wait_w.data = u;
    ev_timer_start(se->b->loop, &u->wait_w);
}

/* The read's values: the request applied, then the txn of puts and deletes under every key's compare. */
static void su_read_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct scram_update *u = ctx;
    struct gr_security_etcd *se = u->se;
    u->req = NULL;
    if (res->status != GR_ETCD_OK || res->response_count != u->count) {
        GR_WARN("security: reading %zu SCRAM users: %s", u->count,
                res->status ? res->message : "bad response");
        return su_end(u, -EIO);
    }
    struct gr_scram_store s = {0};
    int rc = 0;
    bool oom = false;
    size_t new_users = 0;
    su_clear_before(u);
    for (size_t i = 0; i < u->count && rc == 0; i++) {
        const struct gr_etcd_op_result *r = &res->responses[i];
        u->mods[i] = r->kv_count ? r->kvs[0].mod_revision : 0;
        if (!r->kv_count) continue;
        struct gr_scram_store one = {0};
        char err[256];
        size_t sl = 0;
        const char *seg = scram_seg(se, r->kvs[0].key, r->kvs[0].key_len, &sl);
        if (!seg ||
            gr_security_scram_parse(seg, sl, r->kvs[0].value, r->kvs[0].value_len, &one, err, sizeof err)) {
            GR_ERROR("security: %s does not parse (%s): taken as no credentials", u->keys[i],
                     seg ? err : "bad key");
        } else {
            rc = gr_scram_store_set_user(&s, &one.users[0]);
        }
        gr_scram_store_clear(&one);
        if (rc == 0) u->before[i] = format_one(&s, u->names[i], u->lens[i], &u->before_len[i], &oom);
    }
    if (rc == 0 && !oom) rc = u->apply(u->ctx, &s);
    if (oom) rc = -ENOMEM;
    if (rc <= 0) {
        gr_scram_store_clear(&s);
        return su_end(u, rc);
    }
    for (size_t i = 0; i < u->count; i++)
        if (gr_scram_store_find(&s, u->names[i], u->lens[i]) &&
            !gr_scram_store_find(&se->b->scram, u->names[i], u->lens[i]))
            new_users++;
    if (se->b->scram.count + new_users > GR_SCRAM_USERS_MAX) {
        GR_WARN("security: %zu new SCRAM users over the %zu known would pass the cap of %d: refused",
                new_users, se->b->scram.count, GR_SCRAM_USERS_MAX);
        gr_scram_store_clear(&s);
        return su_end(u, -ENOSPC);
    }
    struct gr_etcd_compare *cmp = calloc(u->count, sizeof *cmp);
    struct gr_etcd_op *ops = calloc(u->count, sizeof *ops);
    char **vals = calloc(u->count, sizeof *vals);
    size_t *vlens = calloc(u->count, sizeof *vlens);
    size_t nops = 0;
    oom = !cmp || !ops || !vals || !vlens;
    for (size_t i = 0; i < u->count && !oom; i++) {
        cmp[i] = (struct gr_etcd_compare){
            .key = u->keys[i], .target = GR_ETCD_MOD, .cmp = GR_ETCD_EQUAL, .number = u->mods[i]};
        vals[i] = format_one(&s, u->names[i], u->lens[i], &vlens[i], &oom);
        if (vals[i]) {
            if (u->before[i] && u->before_len[i] == vlens[i] && !memcmp(u->before[i], vals[i], vlens[i]))
                continue; /* unchanged (a refused entry) */
            ops[nops++] = (struct gr_etcd_op){
                .type = GR_ETCD_OP_PUT, .key = u->keys[i], .value = vals[i], .value_len = vlens[i]};
        } else if (u->before[i] && !oom) {
            ops[nops++] = (struct gr_etcd_op){.type = GR_ETCD_OP_DELETE, .key = u->keys[i]};
        }
    }
    gr_scram_store_clear(&s);
    if (!oom && nops > 0) {
        struct gr_etcd_txn txn = {cmp, u->count, ops, nops, NULL, 0};
        if (!(u->req = gr_etcd_txn(se->etcd, &txn, su_txn_cb, u))) {
            const char *why = gr_etcd_last_error(se->etcd);
            GR_WARN("security: writing %zu SCRAM users: %s", u->count, why);
            rc = strstr(why, "max-request-bytes") ? -EMSGSIZE : -EIO;
        }
    }
    for (size_t i = 0; vals && i < u->count; i++) {
        if (vals[i]) OPENSSL_cleanse(vals[i], vlens[i]);
        free(vals[i]);
    }
    free(vals);
    free(vlens);
    free(cmp);
    free(ops);
    if (oom) return su_end(u, -ENOMEM);
    if (nops == 0) return su_end(u, 0);
    if (!u->req) su_end(u, rc);
}

/* Reads every user's key in one txn (no compare: the success branch's ranges). */
static int su_read(struct scram_update *u)
{
    struct gr_etcd_op *ops = calloc(u->count, sizeof *ops);
    if (!ops) return -ENOMEM;
    for (size_t i = 0; i < u->count; i++)
        ops[i] = (struct gr_etcd_op){.type = GR_ETCD_OP_RANGE, .key = u->keys[i]};
    struct gr_etcd_txn txn = {NULL, 0, ops, u->count, NULL, 0};
    u->req = gr_etcd_txn(u->se->etcd, &txn, su_read_cb, u);
    free(ops);
    if (!u->req) {
        GR_WARN("security: reading %zu SCRAM users: %s", u->count, gr_etcd_last_error(u->se->etcd));
        return -EIO;
    }
    return 0;
}

int gr_security_scram_update(struct gr_broker *b, const struct gr_security_user *users, size_t count,
                             gr_security_scram_fn *apply, gr_security_done_fn *done, void *ctx)
{
    struct gr_security_etcd *se = b->security_etcd;
    if (count < 1 || count > GR_SECURITY_SCRAM_TXN_USERS) return -EINVAL;
    struct scram_update *u = calloc(1, sizeof *u);
    if (!u) return -ENOMEM;
    *u = (struct scram_update){.se = se, .apply = apply, .done = done, .ctx = ctx, .count = count};
    u->keys = calloc(count, sizeof *u->keys);
    u->names = calloc(count, sizeof *u->names);
    u->lens = calloc(count, sizeof *u->lens);
    u->mods = calloc(count, sizeof *u->mods);
    u->before = calloc(count, sizeof *u->before);
    u->before_len = calloc(count, sizeof *u->before_len);
    int rc = u->keys && u->names && u->lens && u->mods && u->before && u->before_len ? 0 : -ENOMEM;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char *key = malloc(SCRAM_KEY_BUF);
        u->keys[i] = key;
        u->names[i] = malloc(users[i].len + 1);
        if (!key || !u->names[i]) {
            rc = -ENOMEM;
            break;
        }
        memcpy(u->names[i], users[i].name, users[i].len);
        u->names[i][users[i].len] = 0;
        u->lens[i] = users[i].len;
        if (gr_security_scram_key(se->root, users[i].name, users[i].len, key, SCRAM_KEY_BUF) < 0)
            rc = -EINVAL;
    }
    if (rc == 0) rc = su_read(u);
    if (rc < 0) {
        if (!u->keys || !u->names || !u->lens || !u->mods || !u->before || !u->before_len) u->count = 0;
        su_free(u);
        return rc;
    }
    u->next = se->scram_updates;
    if (u->next) u->next->prev = u;
    se->scram_updates = u;
    return 0;
}

void gr_security_etcd_stop(struct gr_broker *b)
{
    struct gr_security_etcd *se = b->security_etcd;
    if (!se) return;
    if (se->watch) gr_etcd_watch_stop(se->watch);
    ev_timer_stop(b->loop, &se->settle_w);
    for (struct update *u = se->updates, *next; u; u = next) {
        next = u->next;
        if (u->req) gr_etcd_cancel(u->req);
        free(u);
    }
    for (struct scram_update *u = se->scram_updates, *next; u; u = next) {
        next = u->next;
        su_free(u);
    }
    gr_scram_store_clear(&se->resync);
    free(se);
    b->security_etcd = NULL;
}
