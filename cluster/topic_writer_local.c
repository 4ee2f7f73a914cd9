/*
 * topic_writer_local.c: the single-node topic writer (cluster/topic_writer.h) over storage's topic
 * operations (storage/store.h gr_topic_op_*): each change becomes one operation in the store's FIFO, its
 * file work on the I/O pool, and completes when the operation finished (the store's topic hook has then
 * updated the image, cluster/local.h). Storage's -errno results become Kafka's error codes here, with the
 * messages the handlers gave before this interface existed. Invariant: `pending` counts submitted changes
 * not yet completed. Read next: storage/store.h (the operations), cluster/topic_writer_etcd.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/topic_writer.h"
#include "common/log.h"
#include "protocol/errors.h"
#include "storage/store.h"

enum local_kind { LOCAL_CREATE, LOCAL_DELETE, LOCAL_GROW, LOCAL_CONFIGS, LOCAL_BARRIER };

struct local_writer {
    struct gr_topic_writer base;
    struct gr_store *const *store; /* the broker's fields, read at each call (a test may reopen the store) */
    struct gr_iopool *const *pool;
    int pending;
};

struct local_call {
    struct local_writer *w;
    enum local_kind kind;
    gr_topic_change_cb *cb;
    void *ctx;
    int32_t replication_factor;
};

static void fill_topic(struct gr_topic_change *res, struct gr_topic *t)
{
    res->local = t;
    memcpy(res->topic_id, gr_topic_id(t), 16);
    res->partition_count = gr_topic_partition_count(t);
    res->replication_factor = 1;
}

/* Storage's result as Kafka's error (the messages of the handlers before this interface). */
static void map_error(enum local_kind kind, int err, struct gr_topic_change *res)
{
    if (kind == LOCAL_CREATE && err == -EEXIST) {
        res->error_code = GR_ERR_TOPIC_ALREADY_EXISTS; /* created meanwhile by an earlier request */
        res->message = "Topic already exists.";
    } else if (kind == LOCAL_CREATE && err == -ENOTUNIQ) {
        res->error_code = GR_ERR_INVALID_TOPIC_EXCEPTION;
        res->message = "Topic name collides with an existing topic once '.' and '_' are treated alike";
    } else if (kind == LOCAL_CREATE && err == -EINVAL) {
        res->error_code = GR_ERR_INVALID_CONFIG;
        res->message = "Invalid topic configuration";
    } else if (kind == LOCAL_GROW && err == -EINVAL) { /* another request grew it meanwhile */
        res->error_code = GR_ERR_INVALID_PARTITIONS;
        res->message = "The partition count is out of range";
    } else if (kind == LOCAL_CONFIGS && err == -EINVAL) {
        res->error_code = GR_ERR_INVALID_CONFIG;
        res->message = "The storage layer refused the configuration";
    } else if (kind == LOCAL_CONFIGS && err == -ENOENT) {
        res->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        res->message = "The topic was deleted.";
    } else if (kind == LOCAL_DELETE && err == -ENOENT) { /* deleted meanwhile by an earlier request */
        res->error_code = GR_ERR_UNKNOWN_TOPIC_ID;
    } else {
        static const char *const what[] = {"The broker could not create the topic's files",
                                           "The broker could not delete the topic's files",
                                           "The broker could not create the new partitions' files",
                                           "The broker could not write the topic's configuration", ""};
        static const char *const kinds[] = {"create", "delete", "add partitions", "set configs", "barrier"};
        GR_ERROR("topic change (%s): %s", kinds[kind], strerror(-err));
        res->error_code = err == -ENOMEM ? GR_ERR_UNKNOWN_SERVER_ERROR : GR_ERR_KAFKA_STORAGE_ERROR;
        res->message = err == -ENOMEM ? "Out of memory" : what[kind];
    }
}

static void op_done(void *ctx, int err, struct gr_topic *t)
{
    struct local_call *c = ctx;
    struct gr_topic_change res = {0};
    if (err)
        map_error(c->kind, err, &res);
    else if (t && c->kind != LOCAL_DELETE && c->kind != LOCAL_BARRIER)
        fill_topic(&res, t);
    c->w->pending--;
    c->cb(c->ctx, &res);
    free(c);
}

static void fail_now(gr_topic_change_cb *cb, void *ctx, int16_t code, const char *msg)
{
    struct gr_topic_change res = {.error_code = code, .message = msg};
    cb(ctx, &res);
}

/* Submits `op` (taken; NULL = out of memory) for `kind`. */
static void submit(struct local_writer *w, enum local_kind kind, struct gr_topic_op *op,
                   gr_topic_change_cb *cb, void *ctx)
{
    struct local_call *c = op ? malloc(sizeof *c) : NULL;
    if (!c) {
        gr_topic_op_free(op);
        fail_now(cb, ctx, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of memory");
        return;
    }
    *c = (struct local_call){w, kind, cb, ctx, 1};
    w->pending++;
    gr_store_topic_op_submit(*w->store, *w->pool, op, op_done, c);
}

static void local_create(struct gr_topic_writer *base, const struct gr_topic_create_args *a,
                         gr_topic_change_cb *cb, void *ctx)
{
    struct local_writer *w = (struct local_writer *)base;
    if (a->validate_only) {
        struct gr_topic_change res = {.partition_count = a->partitions, .replication_factor = 1};
        cb(ctx, &res);
        return;
    }
    struct gr_topic_op *op = gr_topic_op_create(a->name, a->partitions, a->config_keys, a->config_values,
                                                a->config_count, a->refuse_collision);
    submit(w, LOCAL_CREATE, op, cb, ctx);
}

/* The live storage topic with this id, or NULL (the change then completes as storage would). */
static struct gr_topic *by_id(struct local_writer *w, const uint8_t id[16])
{
    return gr_store_topic_find_id(*w->store, id);
}

static void local_remove(struct gr_topic_writer *base, const uint8_t id[16], int64_t timeout_ms,
                         gr_topic_change_cb *cb, void *ctx)
{
    (void)timeout_ms;
    struct local_writer *w = (struct local_writer *)base;
    struct gr_topic *t = by_id(w, id);
    if (!t) return fail_now(cb, ctx, GR_ERR_UNKNOWN_TOPIC_ID, NULL);
    submit(w, LOCAL_DELETE, gr_topic_op_delete(t), cb, ctx);
}

static void local_grow(struct gr_topic_writer *base, const uint8_t id[16], int32_t new_total,
                       const int32_t *assignment, int32_t assignment_count, int32_t assignment_rf,
                       int64_t timeout_ms, gr_topic_change_cb *cb, void *ctx)
{
    (void)assignment, (void)assignment_count, (void)assignment_rf, (void)timeout_ms; /* one broker: checked */
    struct local_writer *w = (struct local_writer *)base;
    struct gr_topic *t = by_id(w, id);
    if (!t) return fail_now(cb, ctx, GR_ERR_UNKNOWN_TOPIC_ID, NULL);
    submit(w, LOCAL_GROW, gr_topic_op_add_partitions(t, new_total), cb, ctx);
}

static void local_configs(struct gr_topic_writer *base, const uint8_t id[16], const char *const *keys,
                          const char *const *values, int count, int64_t timeout_ms, gr_topic_change_cb *cb,
                          void *ctx)
{
    (void)timeout_ms;
    struct local_writer *w = (struct local_writer *)base;
    struct gr_topic *t = by_id(w, id);
    if (!t) return fail_now(cb, ctx, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION, "The topic was deleted.");
    submit(w, LOCAL_CONFIGS, gr_topic_op_set_configs(t, keys, values, count), cb, ctx);
}

static int16_t local_check_rf(const struct gr_topic_writer *base, int32_t rf, char *msg, size_t cap)
{
    (void)base;
    if (rf == 1) return GR_ERR_NONE;
    snprintf(msg, cap, /* Kafka 4's words (ReplicationControlManager around StripedReplicaPlacer's) */
             "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be "
             "reached because only 1 broker(s) are registered.",
             (int)rf, (int)rf);
    return GR_ERR_INVALID_REPLICATION_FACTOR;
}

static int local_pending(const struct gr_topic_writer *base)
{
    const struct local_writer *w = (const struct local_writer *)base;
    return gr_store_topic_ops_pending(*w->store); /* the FIFO also holds the store's other operations */
}

static void local_barrier(struct gr_topic_writer *base, gr_topic_change_cb *cb, void *ctx)
{
    struct local_writer *w = (struct local_writer *)base;
    submit(w, LOCAL_BARRIER, gr_topic_op_barrier(), cb, ctx);
}

static void local_free(struct gr_topic_writer *base)
{
    free(base); /* storage's operations always complete before the store closes */
}

static const struct gr_topic_writer_ops local_ops = {
    local_create,   local_remove,  local_grow,    local_configs,
    local_check_rf, local_pending, local_barrier, local_free,
};

struct gr_topic_writer *gr_topic_writer_local_new(struct gr_store *const *store,
                                                  struct gr_iopool *const *pool)
{
    struct local_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->base.ops = &local_ops;
    w->store = store;
    w->pool = pool;
    return &w->base;
}
