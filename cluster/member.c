/*
 * member.c: a cluster-mode broker's start-up, registration, fencing and leave (cluster/member.h). One
 * start-up step has at most one etcd request in flight (m->req); the keepalive has its own (m->ka_req).
 * A step that etcd fails (timeout, unreachable, an error) is retried after GR_MEMBER_RECHECK_MS from its
 * beginning: each write compares, so a retry after an unknown outcome is safe (a registration whose put
 * landed is recognised by its lease). Watch events are applied as they come and committed to the image
 * once per loop iteration (an ev_prepare watcher), so observers see one call per watch response. A snapshot
 * (the reload after fencing, a watch's resync) is held in memory (struct snap) until its last page and then
 * applied in one loop turn: the image is never empty or half loaded while requests read it.
 * Read next: cluster/feed.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "cluster/member.h"
#include "cluster/values.h"
#include "common/log.h"
#include "common/time.h"
#include "storage/store.h" /* gr_uuid_random */

enum phase { P_NEW, P_RESOLVING, P_RESOLVED, P_JOINING, P_READY, P_FAILED, P_LEAVING, P_LEFT };

struct gr_member {
    struct ev_loop *loop;
    struct gr_etcd *etcd;
    struct gr_cluster_layout lay;
    struct gr_feed *feed;
    struct gr_image *img;
    gr_feed_local_fn *local;
    void *local_ctx;
    enum phase phase;
    char prefix[GR_CLUSTER_PREFIX_BYTES_MAX + 1];
    char log_dir[1024];
    char dir_cluster_id[GR_UUID_TEXT_BYTES + 1]; /* "" when the directory is new */
    char cluster_id[GR_UUID_TEXT_BYTES + 1];
    char cluster_id_key[GR_CLUSTER_KEY_BUF];
    char broker_key[GR_CLUSTER_KEY_BUF];
    size_t broker_key_len;
    char root[GR_CLUSTER_KEY_BUF], root_end[GR_CLUSTER_KEY_BUF];
    struct gr_cluster_broker reg; /* the registration's value */
    int16_t transaction_version;  /* the features key's level if this broker creates the cluster */
    int32_t node_id;
    int64_t ttl_s, session_ms, heartbeat_ms;
    struct gr_etcd_req *req;    /* the start-up step's request */
    struct gr_etcd_req *ka_req; /* the keepalive in flight */
    struct gr_etcd_watch *watch;
    void (*step)(struct gr_member *m); /* what the retry timer runs */
    ev_timer retry_w, ka_w, leave_w;
    ev_prepare commit_w;
    int64_t lease_id, epoch;
    bool marking;                 /* leaving: the shutting_down mark in flight (then the revoke) */
    struct gr_etcd_req *mark_req; /* gr_member_mark's write in flight (the controlled shutdown's wait) */
    ev_timer mark_w;              /* its retry after a failure without an answer */
    bool marked;                  /* the mark is written (by gr_member_mark or the leave) */
    void (*mark_done)(void *ctx, int rc);
    void *mark_ctx;
    bool lease_lost;           /* a keepalive said the lease is gone before the member was ready */
    int64_t holder_wait_until; /* monotonic ms: the end of the wait for an earlier registration, 0 none */
    bool dirty, fence_pending; /* watch events applied, not yet committed; evidence seen in them */
    int64_t dirty_rev;
    int64_t last_ok_ms, last_unreachable_log_ms;
    bool failing;
    uint64_t fencings;
    struct snap *snap; /* the snapshot being read, or NULL */
    void (*hook)(void *ctx, struct gr_member *m);
    void *hook_ctx;
};

static void lease_send(struct gr_member *m);
static void register_send(struct gr_member *m);
static void snapshot_send(struct gr_member *m);

/* ---------------------------------------------------------------- reachability */

static void note_ok(struct gr_member *m)
{
    int64_t now = gr_time_mono_ms();
    if (m->failing && now - m->last_ok_ms >= GR_MEMBER_UNREACHABLE_LOG_MS)
        GR_INFO("etcd reachable again after %" PRId64 " s", (now - m->last_ok_ms) / 1000);
    m->failing = false;
    m->last_ok_ms = now;
}

/* A request failed without evidence: logs "etcd unreachable for N s" every GR_MEMBER_UNREACHABLE_LOG_MS. */
static void note_failure(struct gr_member *m, const struct gr_etcd_result *res)
{
    int64_t now = gr_time_mono_ms();
    if (!m->failing) {
        m->failing = true;
        m->last_unreachable_log_ms = m->last_ok_ms;
        GR_DEBUG("etcd: %s", res->message);
    }
    if (now - m->last_unreachable_log_ms >= GR_MEMBER_UNREACHABLE_LOG_MS) {
        m->last_unreachable_log_ms = now;
        GR_WARN("etcd unreachable for %" PRId64 " s (%s)", (now - m->last_ok_ms) / 1000, res->message);
    }
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_member *m = w->data;
    if (m->step) m->step(m);
}

/* Runs `step` again after `ms`. */
static void retry(struct gr_member *m, void (*step)(struct gr_member *m), int64_t ms)
{
    m->step = step;
    ev_timer_stop(m->loop, &m->retry_w);
    ev_timer_set(&m->retry_w, (double)ms / 1000.0, 0.0);
    ev_timer_start(m->loop, &m->retry_w);
}

static void fail(struct gr_member *m)
{
    m->phase = P_FAILED;
}

/* ---------------------------------------------------------------- 1. the cluster id */

static void resolve_send(struct gr_member *m);

static int resolved(struct gr_member *m, const char *id)
{
    snprintf(m->cluster_id, sizeof m->cluster_id, "%s", id);
    if (gr_cluster_layout_init(&m->lay, m->prefix, m->cluster_id) < 0 ||
        gr_cluster_key_broker(&m->lay, m->node_id, m->broker_key) < 0 ||
        gr_cluster_prefix_root(&m->lay, m->root) < 0 ||
        gr_cluster_range_end(m->root, strlen(m->root), m->root_end) < 0) {
        GR_ERROR("cluster: bad cluster id %s in etcd", id);
        return -1;
    }
    m->broker_key_len = strlen(m->broker_key);
    if (!(m->feed = gr_feed_new(m->img, &m->lay, m->local, m->local_ctx))) return -1;
    if (gr_image_set_cluster_id(m->img, m->cluster_id) < 0) return -1;
    m->phase = P_RESOLVED;
    return 0;
}

/* The cluster id in a value read from etcd, into out; -1 after logging when it is malformed. */
static int decode_id(const struct gr_etcd_kv *kv, char out[GR_UUID_TEXT_BYTES + 1])
{
    struct gr_cluster_id_value v;
    char err[GR_CLUSTER_ERR_BYTES];
    if (gr_cluster_id_decode(kv->value, kv->value_len, &v, err) < 0) {
        GR_ERROR("cluster: %s holds no valid cluster id: %s", kv->key, err);
        return -1;
    }
    memcpy(out, v.cluster_id, GR_UUID_TEXT_BYTES + 1);
    return 0;
}

static void create_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status != GR_ETCD_OK) {
        note_failure(m, res);
        retry(m, resolve_send, GR_MEMBER_RECHECK_MS); /* read again: it may have been created meanwhile */
        return;
    }
    note_ok(m);
    char id[GR_UUID_TEXT_BYTES + 1];
    if (res->succeeded) {
        snprintf(id, sizeof id, "%s", m->cluster_id);
        GR_INFO("cluster: created cluster id %s at %s", id, m->cluster_id_key);
    } else if (res->response_count < 1 || res->responses[0].kv_count < 1) {
        retry(m, resolve_send, 0); /* created and deleted meanwhile: read again */
        return;
    } else if (decode_id(&res->responses[0].kvs[0], id) < 0) {
        return fail(m);
    }
    if (resolved(m, id) < 0) fail(m);
}

static void create_send(struct gr_member *m)
{
    uint8_t raw[16];
    gr_uuid_random(raw);
    struct gr_cluster_id_value v;
    gr_cluster_uuid_format(*(struct gr_uuid *)raw, v.cluster_id);
    snprintf(m->cluster_id, sizeof m->cluster_id, "%s", v.cluster_id);
    char *val, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    if (gr_cluster_id_encode(&v, &val, &len, err) < 0) {
        GR_ERROR("cluster: %s", err);
        return fail(m);
    }
    /* the finalized features, in the same txn: every broker of the cluster answers the same level and epoch
       (the key's mod_revision) from its first look at the cluster */
    struct gr_cluster_layout lay;
    struct gr_cluster_features fv = {0};
    if (m->transaction_version > 0) {
        fv.count = 1;
        snprintf(fv.features[0].name, sizeof fv.features[0].name, "transaction.version");
        fv.features[0].level = m->transaction_version;
    }
    char fkey[GR_CLUSTER_KEY_BUF], *fval = NULL;
    size_t flen = 0;
    if (gr_cluster_layout_init(&lay, m->prefix, v.cluster_id) < 0 ||
        gr_cluster_key_features(&lay, fkey) < 0 || gr_cluster_features_encode(&fv, &fval, &flen, err) < 0) {
        GR_ERROR("cluster: the features key: %s", err);
        free(val);
        return fail(m);
    }
    struct gr_etcd_compare cmp = {.key = m->cluster_id_key, .target = GR_ETCD_CREATE, .cmp = GR_ETCD_EQUAL};
    struct gr_etcd_op puts[2] = {
        {.type = GR_ETCD_OP_PUT, .key = m->cluster_id_key, .value = val, .value_len = len},
        {.type = GR_ETCD_OP_PUT, .key = fkey, .value = fval, .value_len = flen}};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = m->cluster_id_key};
    struct gr_etcd_txn txn = {&cmp, 1, puts, 2, &get, 1};
    m->req = gr_etcd_txn(m->etcd, &txn, create_cb, m);
    free(val);
    free(fval);
    if (!m->req) {
        GR_ERROR("cluster: %s", gr_etcd_last_error(m->etcd));
        fail(m);
    }
}

static void resolve_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status != GR_ETCD_OK) {
        note_failure(m, res);
        return retry(m, resolve_send, GR_MEMBER_RECHECK_MS);
    }
    note_ok(m);
    if (res->op.kv_count == 0) {
        if (m->dir_cluster_id[0]) { /* data written before (a single node, or etcd was wiped) */
            GR_ERROR("etcd has no cluster metadata under %s; refusing to re-create it over existing data",
                     m->prefix);
            return fail(m);
        }
        return create_send(m);
    }
    char id[GR_UUID_TEXT_BYTES + 1];
    if (decode_id(&res->op.kvs[0], id) < 0) return fail(m);
    if (m->dir_cluster_id[0] && strcmp(id, m->dir_cluster_id) != 0) {
        GR_ERROR("Invalid cluster.id in %s/meta.properties: etcd has %s", m->log_dir, id);
        return fail(m);
    }
    if (resolved(m, id) < 0) fail(m);
}

static void resolve_send(struct gr_member *m)
{
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = m->cluster_id_key};
    if (!(m->req = gr_etcd_range(m->etcd, &get, resolve_cb, m))) {
        GR_ERROR("cluster: %s", gr_etcd_last_error(m->etcd));
        fail(m);
    }
}

/* Runs the loop while the member is in `phase`. */
static void run_while(struct gr_member *m, enum phase phase)
{
    while (m->phase == phase)
        ev_run(m->loop, EVRUN_ONCE);
}

int gr_member_resolve(struct gr_member *m)
{
    if (m->phase != P_NEW) return -1;
    m->phase = P_RESOLVING;
    resolve_send(m);
    run_while(m, P_RESOLVING);
    return m->phase == P_RESOLVED ? 0 : -1;
}

/* ---------------------------------------------------------------- 2. lease and registration */

static void set_lease(struct gr_member *m, int64_t lease, int64_t epoch)
{
    m->lease_id = lease;
    m->epoch = epoch;
    if (m->hook) m->hook(m->hook_ctx, m);
}

static void lease_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status != GR_ETCD_OK) {
        note_failure(m, res);
        return retry(m, lease_send, GR_MEMBER_RECHECK_MS);
    }
    note_ok(m);
    m->lease_id = res->lease_id;
    m->lease_lost = false;
    ev_timer_again(m->loop, &m->ka_w);
    register_send(m);
}

static void lease_send(struct gr_member *m)
{
    m->lease_id = 0;
    if (!(m->req = gr_etcd_lease_grant(m->etcd, m->ttl_s, 0, lease_cb, m))) {
        GR_ERROR("cluster: %s", gr_etcd_last_error(m->etcd));
        fail(m);
    }
}

static void register_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status != GR_ETCD_OK) {
        note_failure(m, res);
        return retry(m, register_send, GR_MEMBER_RECHECK_MS);
    }
    note_ok(m);
    if (res->succeeded) {
        m->epoch = res->revision;
        m->holder_wait_until = 0;
        m->reg.log_dir_new = false; /* registered once: later registrations of this process hold its log */
        return snapshot_send(m);
    }
    if (res->response_count < 1 || res->responses[0].kv_count < 1) return retry(m, register_send, 0);
    const struct gr_etcd_kv *kv = &res->responses[0].kvs[0];
    if (kv->lease == m->lease_id) { /* an earlier try's put landed (its answer was lost) */
        m->epoch = kv->create_revision;
        m->holder_wait_until = 0;
        m->reg.log_dir_new = false;
        return snapshot_send(m);
    }
    int64_t now = gr_time_mono_ms();
    if (!m->holder_wait_until) {
        m->holder_wait_until = now + m->session_ms + GR_MEMBER_EXPIRY_SLACK_MS;
        GR_INFO("cluster: %s is held by lease %" PRId64 " (an earlier process?): waiting up to %" PRId64
                " ms for it to expire",
                m->broker_key, kv->lease, m->session_ms + GR_MEMBER_EXPIRY_SLACK_MS);
    }
    if (now >= m->holder_wait_until) {
        GR_ERROR("node.id %d is already registered by a live broker (lease %" PRId64 ")", m->node_id,
                 kv->lease);
        return fail(m);
    }
    retry(m, register_send, GR_MEMBER_RECHECK_MS);
}

static void register_send(struct gr_member *m)
{
    if (m->lease_lost || !m->lease_id) { /* it expired while we waited: a new one */
        m->lease_lost = false;
        return lease_send(m);
    }
    char *val, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    if (gr_cluster_broker_encode(&m->reg, &val, &len, err) < 0) {
        GR_ERROR("cluster: registration: %s", err);
        return fail(m);
    }
    struct gr_etcd_compare cmp = {.key = m->broker_key, .target = GR_ETCD_CREATE, .cmp = GR_ETCD_EQUAL};
    struct gr_etcd_op put = {
        .type = GR_ETCD_OP_PUT, .key = m->broker_key, .value = val, .value_len = len, .lease = m->lease_id};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = m->broker_key};
    struct gr_etcd_txn txn = {&cmp, 1, &put, 1, &get, 1};
    m->req = gr_etcd_txn(m->etcd, &txn, register_cb, m);
    free(val);
    if (!m->req) {
        GR_ERROR("cluster: %s", gr_etcd_last_error(m->etcd));
        fail(m);
    }
}

/* ---------------------------------------------------------------- 3. snapshot and watch */

static void fence(struct gr_member *m, const char *why);

/* Whether the image shows this broker's registration with its epoch. */
static bool registered_in_image(const struct gr_member *m)
{
    const struct gr_image_broker *br = gr_image_broker(m->img, m->node_id);
    return br && br->epoch == m->epoch;
}

static void feed_kv(struct gr_member *m, const struct gr_etcd_kv *kv, bool deleted)
{
    struct gr_feed_kv fkv = {kv->key,          kv->key_len, kv->value, kv->value_len, kv->create_revision,
                             kv->mod_revision, deleted};
    gr_feed_apply(m->feed, &fkv);
}

/* A snapshot held until its last page: gr_feed_snapshot_begin empties the image, so feeding pages as they
 * arrive let requests served between the range request and its last page see no topics and no brokers
 * (a fenced broker reloading answered Produce with UNKNOWN_TOPIC_OR_PARTITION and Metadata with an empty
 * cluster). Bounded by GR_MEMBER_SNAPSHOT_BYTES_MAX; past it (or out of memory) it spills: the image is
 * emptied and fed page by page as before. */
struct snap_kv {
    char *key, *value; /* one allocation: key then value */
    size_t key_len, value_len;
    int64_t create_revision, mod_revision;
};
struct snap {
    struct snap_kv *kvs;
    size_t count, cap;
    unsigned long long bytes;
    bool spilled;
};

static void snap_free(struct gr_member *m)
{
    struct snap *s = m->snap;
    if (!s) return;
    for (size_t i = 0; i < s->count; i++)
        free(s->kvs[i].key);
    free(s->kvs);
    free(s);
    m->snap = NULL;
}

/* Starts holding a snapshot (dropping one not finished). */
static void snap_begin(struct gr_member *m)
{
    snap_free(m);
    m->snap = calloc(1, sizeof *m->snap);
    if (!m->snap) { /* out of memory: the old way */
        GR_WARN("cluster: snapshot not held (out of memory): applied page by page");
        gr_feed_snapshot_begin(m->feed);
    }
}

static void feed_held(struct gr_member *m, const struct snap_kv *h)
{
    struct gr_feed_kv fkv = {h->key,          h->key_len, h->value, h->value_len, h->create_revision,
                             h->mod_revision, false};
    gr_feed_apply(m->feed, &fkv);
}

/* Empties the image and feeds it what is held (the end of a snapshot, or a spill). */
static void snap_feed(struct gr_member *m)
{
    struct snap *s = m->snap;
    gr_feed_snapshot_begin(m->feed);
    for (size_t i = 0; i < s->count; i++) {
        feed_held(m, &s->kvs[i]);
        free(s->kvs[i].key);
    }
    s->count = 0;
    s->bytes = 0;
}

/* One key-value of the snapshot: held, or fed at once when the snapshot spilled. */
static void snap_add(struct gr_member *m, const struct gr_etcd_kv *kv)
{
    struct snap *s = m->snap;
    if (!s || s->spilled) return feed_kv(m, kv, false);
    unsigned long long size = (unsigned long long)kv->key_len + kv->value_len + sizeof(struct snap_kv);
    char *buf =
        s->bytes + size <= GR_MEMBER_SNAPSHOT_BYTES_MAX ? malloc(kv->key_len + kv->value_len + 1) : NULL;
    if (buf && s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct snap_kv *kvs = realloc(s->kvs, cap * sizeof *kvs);
        if (kvs) {
            s->kvs = kvs;
            s->cap = cap;
        }
    }
    if (!buf || s->count == s->cap) {
        free(buf);
        GR_WARN("cluster: snapshot over %llu bytes held (or out of memory): applied page by page",
                (unsigned long long)GR_MEMBER_SNAPSHOT_BYTES_MAX);
        snap_feed(m);
        s->spilled = true;
        return feed_kv(m, kv, false);
    }
    memcpy(buf, kv->key, kv->key_len);
    if (kv->value_len) memcpy(buf + kv->key_len, kv->value, kv->value_len);
    s->kvs[s->count++] = (struct snap_kv){buf,           buf + kv->key_len,   kv->key_len,
                                          kv->value_len, kv->create_revision, kv->mod_revision};
    s->bytes += size;
}

/* The snapshot is complete: the image gets all of it in this loop turn (the caller commits). */
static void snap_end(struct gr_member *m)
{
    if (m->snap && !m->snap->spilled) snap_feed(m);
    snap_free(m);
}

static void watch_cb(void *ctx, const struct gr_etcd_watch_event *ev)
{
    struct gr_member *m = ctx;
    switch (ev->kind) {
    case GR_ETCD_EVENT_PUT:
    case GR_ETCD_EVENT_DELETE: {
        bool deleted = ev->kind == GR_ETCD_EVENT_DELETE;
        feed_kv(m, ev->kv, deleted);
        m->dirty = true;
        m->dirty_rev = ev->revision;
        if (ev->kv->key_len == m->broker_key_len && !memcmp(ev->kv->key, m->broker_key, m->broker_key_len) &&
            (deleted || ev->kv->create_revision != m->epoch))
            m->fence_pending = true;
        break;
    }
    case GR_ETCD_EVENT_SNAPSHOT_BEGIN:
        snap_begin(m);
        break;
    case GR_ETCD_EVENT_SNAPSHOT_KV:
        snap_add(m, ev->kv);
        break;
    case GR_ETCD_EVENT_SNAPSHOT_END:
        snap_end(m);
        gr_feed_commit(m->feed, ev->revision);
        m->dirty = false;
        if (!registered_in_image(m)) m->fence_pending = true;
        break;
    }
}

/* Once per loop iteration: commits the watch events applied (one image change per watch response) and acts
 * on evidence seen in them. */
static void commit_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_member *m = w->data;
    if (m->dirty) {
        m->dirty = false;
        gr_feed_commit(m->feed, m->dirty_rev);
    }
    if (m->fence_pending) {
        m->fence_pending = false;
        fence(m, "its registration was deleted or replaced");
    }
}

static void ready(struct gr_member *m, int64_t revision)
{
    m->watch = gr_etcd_watch_start(m->etcd, m->root, strlen(m->root), m->root_end, strlen(m->root_end),
                                   revision + 1, false, watch_cb, m);
    if (!m->watch) {
        GR_ERROR("cluster: watch: %s", gr_etcd_last_error(m->etcd));
        return fail(m);
    }
    m->phase = P_READY;
    m->img->self_fenced = false;
    GR_INFO("cluster: registered as broker %d (epoch %" PRId64 ", lease %" PRId64
            ") in cluster %s; metadata at "
            "revision %" PRId64 ": %d brokers, %d topics",
            m->node_id, m->epoch, m->lease_id, m->cluster_id, revision, gr_image_broker_count(m->img),
            gr_image_topic_count(m->img));
    set_lease(m, m->lease_id, m->epoch);
    gr_image_changed(m->img);
    if (m->lease_lost) fence(m, "a keepalive said the lease is gone");
}

static void page_cb(void *ctx, const struct gr_etcd_kv *kvs, size_t kv_count, int64_t revision)
{
    (void)revision;
    struct gr_member *m = ctx;
    for (size_t i = 0; i < kv_count; i++)
        snap_add(m, &kvs[i]);
}

static void snapshot_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status != GR_ETCD_OK) {
        note_failure(m, res);
        snap_free(m); /* the image keeps what it had (unless the snapshot spilled) */
        return retry(m, snapshot_send, GR_MEMBER_RECHECK_MS);
    }
    note_ok(m);
    snap_end(m);
    gr_feed_commit(m->feed, res->revision);
    if (!registered_in_image(m)) { /* gone already: the lease expired meanwhile */
        GR_WARN("cluster: registration %s (epoch %" PRId64 ") missing from the snapshot at revision %" PRId64
                ": registering again",
                m->broker_key, m->epoch, res->revision);
        return lease_send(m);
    }
    ready(m, res->revision);
}

static void snapshot_send(struct gr_member *m)
{
    snap_begin(m);
    m->req = gr_etcd_range_paged(m->etcd, m->root, strlen(m->root), m->root_end, strlen(m->root_end), 0,
                                 page_cb, snapshot_cb, m);
    if (!m->req) {
        GR_ERROR("cluster: %s", gr_etcd_last_error(m->etcd));
        fail(m);
    }
}

int gr_member_join(struct gr_member *m)
{
    if (m->phase != P_RESOLVED) return -1;
    m->phase = P_JOINING;
    m->img->self_fenced = true; /* nothing led before the image is loaded */
    lease_send(m);
    run_while(m, P_JOINING);
    return m->phase == P_READY ? 0 : -1;
}

/* ---------------------------------------------------------------- 4. keepalive and fencing */

static void stop_step(struct gr_member *m)
{
    if (m->req) gr_etcd_cancel(m->req);
    m->req = NULL;
    ev_timer_stop(m->loop, &m->retry_w);
    if (m->watch) gr_etcd_watch_stop(m->watch);
    m->watch = NULL;
    snap_free(m);
    m->dirty = m->fence_pending = false;
}

static void fence(struct gr_member *m, const char *why)
{
    if (m->phase != P_READY) return;
    GR_WARN("fenced: lease %" PRId64 " lost (%s): leading nothing until registered again", m->lease_id, why);
    m->fencings++;
    stop_step(m);
    if (m->ka_req) gr_etcd_cancel(m->ka_req);
    m->ka_req = NULL;
    m->img->self_fenced = true;
    gr_image_changed(m->img);
    set_lease(m, 0, 0);
    m->phase = P_JOINING;
    m->holder_wait_until = 0;
    m->lease_lost = false;
    lease_send(m);
}

static void ka_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->ka_req = NULL;
    if (res->status == GR_ETCD_LEASE_GONE) {
        note_ok(m);
        if (m->phase == P_READY) return fence(m, "a keepalive said the lease is gone");
        m->lease_lost = true; /* the start-up step in flight takes a new lease */
        return;
    }
    if (res->status != GR_ETCD_OK) return note_failure(m, res);
    note_ok(m);
}

static void ka_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_member *m = w->data;
    if (m->failing) {
        struct gr_etcd_result r = {.message = "keepalive unanswered"};
        note_failure(m, &r);
    }
    if (!m->lease_id || m->ka_req || m->lease_lost) return;
    m->ka_req = gr_etcd_lease_keepalive(m->etcd, m->lease_id, ka_cb, m);
}

/* ---------------------------------------------------------------- 5. leave */

static void revoke_send(struct gr_member *m);

static void revoke_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status == GR_ETCD_OK)
        GR_INFO("cluster: lease %" PRId64 " revoked: registration %s gone", m->lease_id, m->broker_key);
    else
        GR_WARN("cluster: revoking lease %" PRId64 " failed (%s): it expires in %" PRId64 " s", m->lease_id,
                res->message, m->ttl_s);
    m->phase = P_LEFT;
}

static void leave_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_member *m = w->data;
    if (m->marking) { /* the mark went unanswered: revoke anyway */
        GR_WARN("cluster: marking %s shutting_down unanswered within %d ms", m->broker_key,
                GR_MEMBER_MARK_WAIT_MS);
        if (m->req) gr_etcd_cancel(m->req);
        m->req = NULL;
        revoke_send(m);
        return;
    }
    GR_WARN("cluster: lease %" PRId64 " not revoked within %d ms: it expires in %" PRId64 " s", m->lease_id,
            GR_MEMBER_REVOKE_WAIT_MS, m->ttl_s);
    if (m->req) gr_etcd_cancel(m->req);
    m->req = NULL;
    m->phase = P_LEFT;
}

/* Stops the commit watcher (unref'd at start: ref'd again first, as libev asks). */
static void stop_commit(struct gr_member *m)
{
    if (!ev_is_active(&m->commit_w)) return;
    ev_ref(m->loop);
    ev_prepare_stop(m->loop, &m->commit_w);
}

/* The shutting_down mark is done (written, refused or unanswered): the revoke, within what is left of
 * GR_MEMBER_REVOKE_WAIT_MS. */
static void revoke_send(struct gr_member *m)
{
    m->marking = false;
    if (!(m->req = gr_etcd_lease_revoke(m->etcd, m->lease_id, revoke_cb, m))) m->phase = P_LEFT;
}

static void mark_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->req = NULL;
    if (res->status == GR_ETCD_OK && res->succeeded) {
        m->marked = true;
        GR_INFO("cluster: %s marked shutting_down", m->broker_key);
    } else
        GR_WARN("cluster: marking %s shutting_down failed (%s)", m->broker_key,
                res->status == GR_ETCD_OK ? "it is no longer this process's registration" : res->message);
    revoke_send(m);
}

/* Rewrites the registration with shutting_down true (Kafka's controlled shutdown: the controller stops
 * choosing this broker as a leader), under the same lease, only while the key is still this process's
 * (compare: create_revision == its broker epoch); `cb` gets the answer. Returns the request, or NULL when
 * nothing was sent. */
static struct gr_etcd_req *mark_txn(struct gr_member *m, gr_etcd_cb *cb)
{
    if (!m->epoch) return NULL;
    struct gr_cluster_broker reg = m->reg;
    reg.shutting_down = true;
    char *val, err[GR_CLUSTER_ERR_BYTES];
    size_t len;
    if (gr_cluster_broker_encode(&reg, &val, &len, err) < 0) {
        GR_WARN("cluster: registration: %s", err);
        return NULL;
    }
    struct gr_etcd_compare cmp = {
        .key = m->broker_key, .target = GR_ETCD_CREATE, .cmp = GR_ETCD_EQUAL, .number = m->epoch};
    struct gr_etcd_op put = {
        .type = GR_ETCD_OP_PUT, .key = m->broker_key, .value = val, .value_len = len, .lease = m->lease_id};
    struct gr_etcd_txn txn = {&cmp, 1, &put, 1, NULL, 0};
    struct gr_etcd_req *req = gr_etcd_txn(m->etcd, &txn, cb, m);
    free(val);
    return req;
}

/* The leave's mark (mark_cb, then the revoke). Returns false when nothing was sent. */
static bool mark_send(struct gr_member *m)
{
    m->req = mark_txn(m, mark_cb);
    return m->req != NULL;
}

/* gr_member_mark's write answered: written, refused (the key is no longer this process's: -ESTALE), or lost
 * (sent again after GR_MEMBER_RECHECK_MS while registered; each try compares, so a repeat is safe). */
static void early_mark_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_member *m = ctx;
    m->mark_req = NULL;
    if (res->status != GR_ETCD_OK) {
        note_failure(m, res);
        GR_WARN_RATELIMITED("cluster: marking %s shutting_down: %s (sent again)", m->broker_key,
                            res->message);
        ev_timer_set(&m->mark_w, GR_MEMBER_RECHECK_MS / 1000.0, 0.0);
        ev_timer_start(m->loop, &m->mark_w);
        return;
    }
    note_ok(m);
    m->marked = res->succeeded;
    if (res->succeeded)
        GR_INFO("cluster: %s marked shutting_down", m->broker_key);
    else
        GR_WARN("cluster: marking %s shutting_down failed: it is no longer this process's registration",
                m->broker_key);
    if (m->mark_done) m->mark_done(m->mark_ctx, res->succeeded ? 0 : -ESTALE);
}

/* Sends gr_member_mark's write unless it is written, in flight, or the broker is not registered (fenced: it
 * registers again with the mark, m->reg.shutting_down). */
static void early_mark_send(struct gr_member *m)
{
    if (m->phase != P_READY || m->marked || m->mark_req) return;
    m->mark_req = mark_txn(m, early_mark_cb);
}

static void mark_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    early_mark_send(w->data);
}

static void stop_mark(struct gr_member *m)
{
    if (m->mark_req) gr_etcd_cancel(m->mark_req);
    m->mark_req = NULL;
    ev_timer_stop(m->loop, &m->mark_w);
}

void gr_member_mark(struct gr_member *m, void (*done)(void *ctx, int rc), void *ctx)
{
    m->mark_done = done;
    m->mark_ctx = ctx;
    m->reg.shutting_down = true; /* a registration made again after a fencing carries the mark too */
    early_mark_send(m);
}

void gr_member_leave(struct gr_member *m)
{
    if (!m || m->phase == P_LEFT) return;
    bool registered = m->phase == P_READY;
    stop_step(m);
    stop_mark(m);
    ev_timer_stop(m->loop, &m->ka_w);
    stop_commit(m);
    if (m->ka_req) gr_etcd_cancel(m->ka_req);
    m->ka_req = NULL;
    m->phase = P_LEFT;
    if (!m->lease_id) return;
    m->phase = P_LEAVING;
    m->marking = registered && !m->marked && mark_send(m);
    if (!m->marking) revoke_send(m);
    if (m->phase != P_LEAVING) return;
    int64_t t0 = gr_time_mono_ms();
    if (m->marking) { /* the mark gets at most GR_MEMBER_MARK_WAIT_MS of the budget */
        ev_timer_set(&m->leave_w, GR_MEMBER_MARK_WAIT_MS / 1000.0, 0.0);
        ev_timer_start(m->loop, &m->leave_w);
        while (m->phase == P_LEAVING && m->marking)
            ev_run(m->loop, EVRUN_ONCE);
        ev_timer_stop(m->loop, &m->leave_w);
    }
    int64_t left_ms = GR_MEMBER_REVOKE_WAIT_MS - (gr_time_mono_ms() - t0);
    ev_timer_set(&m->leave_w, (left_ms > 100 ? left_ms : 100) / 1000.0, 0.0);
    ev_timer_start(m->loop, &m->leave_w);
    run_while(m, P_LEAVING);
    ev_timer_stop(m->loop, &m->leave_w);
}

/* ---------------------------------------------------------------- life */

struct gr_member *gr_member_new(const struct gr_member_config *cfg)
{
    char err[GR_CLUSTER_ERR_BYTES];
    if (gr_cluster_prefix_check(cfg->prefix, err, sizeof err) < 0) {
        GR_ERROR("gregor.metadata.etcd.prefix: %s", err);
        return NULL;
    }
    if (cfg->listener_count < 1 || cfg->listener_count > GR_CLUSTER_LISTENERS_MAX) {
        GR_ERROR("cluster: %d listeners: a registration holds 1..%d", cfg->listener_count,
                 GR_CLUSTER_LISTENERS_MAX);
        return NULL;
    }
    struct gr_member *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->loop = cfg->loop;
    m->img = cfg->img;
    m->local = cfg->local;
    m->local_ctx = cfg->local_ctx;
    m->node_id = cfg->node_id;
    m->transaction_version = cfg->transaction_version;
    m->session_ms = cfg->session_timeout_ms;
    m->ttl_s = (cfg->session_timeout_ms + 999) / 1000;
    if (m->ttl_s < 1) m->ttl_s = 1;
    m->heartbeat_ms = cfg->heartbeat_interval_ms > 0 ? cfg->heartbeat_interval_ms : 1000;
    snprintf(m->prefix, sizeof m->prefix, "%s", cfg->prefix);
    snprintf(m->log_dir, sizeof m->log_dir, "%s", cfg->log_dir ? cfg->log_dir : "");
    snprintf(m->dir_cluster_id, sizeof m->dir_cluster_id, "%s",
             cfg->dir_cluster_id ? cfg->dir_cluster_id : "");
    gr_cluster_key_cluster_id(m->prefix, m->cluster_id_key);
    m->reg.node_id = cfg->node_id;
    m->reg.listener_count = cfg->listener_count;
    for (int i = 0; i < cfg->listener_count; i++) {
        const struct gr_image_listener *l = &cfg->listeners[i];
        if (strlen(l->name) > GR_CLUSTER_LISTENER_NAME_BYTES_MAX ||
            strlen(l->host) > GR_CLUSTER_HOST_BYTES_MAX) {
            GR_ERROR("cluster: listener %s: name or host too long for a registration", l->name);
            free(m);
            return NULL;
        }
        snprintf(m->reg.listeners[i].name, sizeof m->reg.listeners[i].name, "%s", l->name);
        snprintf(m->reg.listeners[i].host, sizeof m->reg.listeners[i].host, "%s", l->host);
        m->reg.listeners[i].port = l->port;
    }
    /* the first registration of a process on a new or emptied log dir says so (its log may lack what this
       node held); its later registrations (after a fencing) do not (cluster/values.h) */
    m->reg.log_dir_new = !m->dir_cluster_id[0];
    if (cfg->rack) {
        m->reg.has_rack = true;
        snprintf(m->reg.rack, sizeof m->reg.rack, "%s", cfg->rack);
    }
    /* a keepalive stuck for longer than half the session would let the lease lapse behind it */
    int64_t timeout_ms = m->session_ms / 2;
    timeout_ms = timeout_ms < 1000                                 ? 1000
                 : timeout_ms > GR_ETCD_REQUEST_TIMEOUT_MS_DEFAULT ? GR_ETCD_REQUEST_TIMEOUT_MS_DEFAULT
                                                                   : timeout_ms;
    struct gr_etcd_config ec = {.endpoints = cfg->endpoints, .request_timeout_ms = timeout_ms};
    char eerr[256];
    if (!(m->etcd = gr_etcd_new(m->loop, &ec, eerr, sizeof eerr))) {
        GR_ERROR("gregor.metadata.etcd.endpoints: %s", eerr);
        free(m);
        return NULL;
    }
    ev_init(&m->retry_w, retry_cb);
    m->retry_w.data = m;
    ev_init(&m->leave_w, leave_timer_cb);
    m->leave_w.data = m;
    ev_init(&m->mark_w, mark_timer_cb);
    m->mark_w.data = m;
    ev_init(&m->ka_w, ka_timer_cb);
    m->ka_w.repeat = (double)m->heartbeat_ms / 1000.0;
    m->ka_w.data = m;
    ev_prepare_init(&m->commit_w, commit_cb);
    m->commit_w.data = m;
    ev_prepare_start(m->loop, &m->commit_w);
    ev_unref(m->loop); /* the prepare watcher alone keeps no loop running */
    m->last_ok_ms = gr_time_mono_ms();
    return m;
}

void gr_member_free(struct gr_member *m)
{
    if (!m) return;
    stop_step(m);
    stop_mark(m);
    if (m->ka_req) gr_etcd_cancel(m->ka_req);
    ev_timer_stop(m->loop, &m->ka_w);
    ev_timer_stop(m->loop, &m->leave_w);
    stop_commit(m);
    gr_etcd_free(m->etcd);
    gr_feed_free(m->feed);
    free(m);
}

const char *gr_member_cluster_id(const struct gr_member *m)
{
    return m->cluster_id;
}
struct gr_etcd *gr_member_etcd(const struct gr_member *m)
{
    return m->etcd;
}
const struct gr_cluster_layout *gr_member_layout(const struct gr_member *m)
{
    return &m->lay;
}
int64_t gr_member_lease(const struct gr_member *m)
{
    return m->lease_id;
}
int64_t gr_member_broker_epoch(const struct gr_member *m)
{
    return m->epoch;
}
bool gr_member_ready(const struct gr_member *m)
{
    return m->phase == P_READY;
}
uint64_t gr_member_fencings(const struct gr_member *m)
{
    return m->fencings;
}
void gr_member_on_lease_changed(struct gr_member *m, void (*fn)(void *ctx, struct gr_member *m), void *ctx)
{
    m->hook = fn;
    m->hook_ctx = ctx;
}
