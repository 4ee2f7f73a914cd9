/*
 * producer_ids_etcd.c: producer id blocks from etcd's counter key (cluster/producer_ids_etcd.h): the
 * manager's save job becomes a read and a compare-and-swap txn on the loop; the job's done hook runs when
 * the block is taken or the attempt failed. Read next: coordinator/producer_ids.c (save_done).
 */
#include "cluster/producer_ids_etcd.h"

#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/values.h"
#include "common/log.h"
#include "common/time.h"

_Static_assert(GR_PRODUCER_ID_BLOCK_SIZE == GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE, "one block size");

struct gr_producer_ids_etcd {
    struct gr_producer_id_manager mgr;
    struct ev_loop *loop;
    struct gr_etcd *etcd;
    char key[GR_CLUSTER_KEY_BUF];
    int32_t broker_id;
    int64_t (*broker_epoch)(void *ctx);
    bool (*may_save)(void *ctx);
    void *ctx;
    uint64_t rng;
    struct gr_io_job *job;   /* the manager's save in flight, NULL when none */
    struct gr_etcd_req *req; /* its etcd request, NULL during a back-off */
    ev_timer backoff_w;
    int attempts;     /* compares lost in a row */
    int64_t cur_next; /* the counter as last read: the block to take ... */
    int64_t cur_mod;  /* ... and its mod_revision (0: absent) */
    struct gr_producer_ids_etcd_stats stats;
};

static void finish(struct gr_producer_ids_etcd *src, int err)
{
    struct gr_io_job *job = src->job;
    src->job = NULL;
    src->req = NULL;
    job->result = err;
    job->done(job); /* may start the next save (submit) */
}

static int status_errno(const struct gr_etcd_result *res)
{
    switch (res->status) {
    case GR_ETCD_TIMEOUT:
        return -ETIMEDOUT;
    case GR_ETCD_UNREACHABLE:
        return -EHOSTUNREACH;
    default:
        return -EIO;
    }
}

/* Reads the counter from a range result (kvs: 0 or 1 key). Returns 0, or -EINVAL after logging a value
 * that must not be used. */
static int parse(struct gr_producer_ids_etcd *src, const struct gr_etcd_kv *kvs, size_t n)
{
    src->cur_next = src->cur_mod = 0;
    if (n == 0) return 0;
    struct gr_cluster_producer_ids v;
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_producer_ids_decode(kvs[0].value, kvs[0].value_len, &v, err);
    if (rc < 0) {
        src->stats.refused++;
        GR_ERROR("InitProducerId: %s holds a bad value (%s): no producer id is handed out from it", src->key,
                 rc == -EMSGSIZE ? "over the size cap" : err);
        return -EINVAL;
    }
    src->cur_next = v.next_producer_id;
    src->cur_mod = kvs[0].mod_revision;
    return 0;
}

static void cas_send(struct gr_producer_ids_etcd *src);

static void cas_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_producer_ids_etcd *src = ctx;
    src->req = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_DEBUG("InitProducerId: taking a block from %s: %s", src->key, res->message);
        return finish(src, status_errno(res));
    }
    if (res->succeeded) {
        int rc = gr_producer_ids_claimed(&src->mgr.ids, src->cur_next);
        if (rc < 0) {
            src->stats.refused++;
            GR_ERROR("InitProducerId: %s handed out block %" PRId64 ", below this broker's block in use "
                     "(ending at %" PRId64 "): the counter went backwards; the block is not used",
                     src->key, src->cur_next, src->mgr.ids.block_end);
        } else {
            src->stats.blocks++;
            src->attempts = 0;
        }
        return finish(src, rc);
    }
    src->stats.lost++;
    const struct gr_etcd_op_result *r = res->response_count == 1 ? &res->responses[0] : NULL;
    if (!r || parse(src, r->kvs, r->kv_count) < 0) return finish(src, r ? -EINVAL : -EIO);
    if (++src->attempts >= GR_PRODUCER_IDS_ETCD_ATTEMPTS_MAX) {
        GR_WARN("InitProducerId: %d compares on %s lost in a row: trying again on the next request",
                src->attempts, src->key);
        src->attempts = 0;
        return finish(src, -EBUSY);
    }
    /* a random wait in [d/2, d]: brokers that lost together do not collide again */
    int64_t d = GR_PRODUCER_IDS_ETCD_BACKOFF_MIN_MS << (src->attempts - 1);
    if (d > GR_PRODUCER_IDS_ETCD_BACKOFF_MAX_MS) d = GR_PRODUCER_IDS_ETCD_BACKOFF_MAX_MS;
    src->rng = src->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t ms = d / 2 + (int64_t)((src->rng >> 33) % (uint64_t)(d / 2 + 1));
    ev_timer_set(&src->backoff_w, (double)ms / 1000.0, 0.0);
    ev_timer_start(src->loop, &src->backoff_w);
}

/* The txn taking the block at cur_next (compare: mod_revision == cur_mod). */
static void cas_send(struct gr_producer_ids_etcd *src)
{
    struct gr_cluster_producer_ids cur = {.next_producer_id = src->cur_next}, next;
    int64_t epoch = src->broker_epoch ? src->broker_epoch(src->ctx) : 0;
    if (epoch < 1) return finish(src, -EAGAIN); /* not registered (or fenced): no block */
    if (gr_cluster_producer_ids_take(&cur, src->broker_id, epoch, &next) < 0) {
        GR_ERROR("InitProducerId: %s: producer ids exhausted (next block %" PRId64 ")", src->key,
                 src->cur_next);
        return finish(src, -EOVERFLOW);
    }
    char *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    if (gr_cluster_producer_ids_encode(&next, &val, &len, err) < 0) {
        GR_ERROR("InitProducerId: %s: %s", src->key, err);
        return finish(src, -EINVAL);
    }
    struct gr_etcd_compare cmp = {.key = src->key, .target = GR_ETCD_MOD, .number = src->cur_mod};
    struct gr_etcd_op put = {.type = GR_ETCD_OP_PUT, .key = src->key, .value = val, .value_len = len};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = src->key};
    struct gr_etcd_txn txn = {&cmp, 1, &put, 1, &get, 1};
    src->req = gr_etcd_txn(src->etcd, &txn, cas_cb, src);
    free(val);
    if (!src->req) {
        GR_ERROR("InitProducerId: %s: %s", src->key, gr_etcd_last_error(src->etcd));
        finish(src, -EIO);
    }
}

static void backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    cas_send(w->data);
}

static void read_cb(void *ctx, const struct gr_etcd_result *res)
{
    struct gr_producer_ids_etcd *src = ctx;
    src->req = NULL;
    if (res->status != GR_ETCD_OK) {
        GR_DEBUG("InitProducerId: reading %s: %s", src->key, res->message);
        return finish(src, status_errno(res));
    }
    if (parse(src, res->op.kvs, res->op.kv_count) < 0) return finish(src, -EINVAL);
    cas_send(src);
}

/* The manager's submit hook: the save of the next block becomes a read and a txn on the loop. */
static bool submit(void *ctx, struct gr_io_job *job)
{
    struct gr_producer_ids_etcd *src = ctx;
    if (src->may_save && !src->may_save(src->ctx)) return false;
    src->job = job;
    src->attempts = 0;
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = src->key};
    if (!(src->req = gr_etcd_range(src->etcd, &get, read_cb, src))) {
        src->job = NULL;
        return false;
    }
    return true;
}

static int no_load(void *ctx, uint8_t *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return -ENOENT; /* nothing local: the counter in etcd is the only state */
}

static int no_save(void *ctx, const uint8_t *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return -ENOTSUP; /* never called: submit never runs the job's run */
}

static int64_t now_ms(void *ctx)
{
    (void)ctx;
    return gr_time_mono_ms();
}

struct gr_producer_ids_etcd *gr_producer_ids_etcd_new(const struct gr_producer_ids_etcd_config *cfg)
{
    struct gr_producer_ids_etcd *src = calloc(1, sizeof *src);
    if (!src) {
        GR_ERROR("InitProducerId: out of memory");
        return NULL;
    }
    if (gr_cluster_key_producer_ids(cfg->lay, src->key) < 0) {
        GR_ERROR("InitProducerId: cannot build the producer_ids key");
        free(src);
        return NULL;
    }
    src->loop = cfg->loop;
    src->etcd = cfg->etcd;
    src->broker_id = cfg->broker_id;
    src->broker_epoch = cfg->broker_epoch;
    src->may_save = cfg->may_save;
    src->ctx = cfg->ctx;
    src->rng = cfg->seed ^ 0x9e3779b97f4a7c15ULL;
    ev_init(&src->backoff_w, backoff_cb);
    src->backoff_w.data = src;
    struct gr_producer_id_io io = {no_load, no_save, src};
    struct gr_producer_id_binding bind = {submit, now_ms, src};
    if (gr_producer_id_manager_open(&src->mgr, &io, &bind) < 0) { /* no_load cannot fail: never here */
        free(src);
        return NULL;
    }
    return src;
}

struct gr_producer_id_manager *gr_producer_ids_etcd_manager(struct gr_producer_ids_etcd *src)
{
    return &src->mgr;
}

void gr_producer_ids_etcd_free(struct gr_producer_ids_etcd *src)
{
    if (!src) return;
    ev_timer_stop(src->loop, &src->backoff_w);
    if (src->req) gr_etcd_cancel(src->req);
    free(src);
}

struct gr_producer_ids_etcd_stats gr_producer_ids_etcd_stats(const struct gr_producer_ids_etcd *src)
{
    struct gr_producer_ids_etcd_stats s = src->stats;
    s.in_flight = src->job != NULL;
    return s;
}
