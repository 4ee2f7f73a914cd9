/*
 * topic_ops.c: requests that wait for topic changes (CreateTopics, Metadata auto-creation, CreatePartitions,
 * DeleteTopics, AlterConfigs, IncrementalAlterConfigs). A handler submits one change per topic through the
 * broker's topic writer (cluster/topic_writer.h: storage's operations on a single node, etcd in a cluster;
 * gr_req_topic_create and its siblings) or one storage operation (gr_req_topic_op: the dynamic broker
 * config file); each completes on the network thread; the handler ends with gr_req_topic_ops_wait, which
 * parks the request until the last one completed, so the response still waits for every topic it names.
 * Invariant: `pending` counts submitted operations not completed, plus one while the handler submits (a
 * completion that arrives during submission never answers early).
 * Read next: storage/store.h (gr_topic_op_*, gr_store_topic_op_submit).
 */
#include <errno.h>

#include "server/handlers/handlers.h"

struct gr_req_topic_ops {
    int pending;
    bool parked;
    void (*all_done)(struct gr_req *req);
};

struct op_slot {
    struct gr_req *req;
    gr_req_topic_cb cb;
    gr_req_change_cb change_cb;
    void *item;
};

/* The per-request state keys (gr_req_state): the request's operations, and "waited behind the barrier". */
static const char ops_key, barrier_key;

static struct gr_req_topic_ops *ops_of(const struct gr_req *req)
{
    return gr_req_state(req, &ops_key);
}

static struct gr_req_topic_ops *state(struct gr_req *req)
{
    struct gr_req_topic_ops *s = ops_of(req);
    if (!s && (s = gr_req_state_add(req, &ops_key, sizeof *s))) s->pending = 1; /* the handler's own hold */
    return s;
}

static void release(struct gr_req *req)
{
    struct gr_req_topic_ops *s = ops_of(req);
    if (--s->pending > 0 || !s->parked) return;
    if (s->all_done) s->all_done(req);
    gr_req_finish(req); /* frees the request when its connection is gone */
}

static void slot_done(void *ctx, int err, struct gr_topic *t)
{
    struct op_slot *slot = ctx;
    slot->cb(slot->req, slot->item, err, t);
    release(slot->req);
}

static void change_done(void *ctx, const struct gr_topic_change *res)
{
    struct op_slot *slot = ctx;
    slot->change_cb(slot->req, slot->item, res);
    release(slot->req);
}

/* A slot for one change of `req`, counted as pending; NULL when out of arena memory. */
static struct op_slot *slot_new(struct gr_req *req, gr_req_topic_cb cb, gr_req_change_cb change_cb,
                                void *item)
{
    struct gr_req_topic_ops *s = state(req);
    struct op_slot *slot = s ? gr_arena_alloc(&req->arena, sizeof *slot) : NULL;
    if (!slot) return NULL;
    *slot = (struct op_slot){req, cb, change_cb, item};
    s->pending++;
    return slot;
}

bool gr_req_topic_create(struct gr_req *req, const struct gr_topic_create_args *a, gr_req_change_cb cb,
                         void *item)
{
    struct op_slot *slot = slot_new(req, NULL, cb, item);
    if (slot) gr_topic_writer_create(req->broker->topic_writer, a, change_done, slot);
    return slot != NULL;
}

bool gr_req_topic_delete(struct gr_req *req, const uint8_t id[16], int64_t timeout_ms, gr_req_change_cb cb,
                         void *item)
{
    struct op_slot *slot = slot_new(req, NULL, cb, item);
    if (slot) gr_topic_writer_delete(req->broker->topic_writer, id, timeout_ms, change_done, slot);
    return slot != NULL;
}

bool gr_req_topic_grow(struct gr_req *req, const uint8_t id[16], int32_t new_total, const int32_t *assignment,
                       int32_t assignment_count, int32_t assignment_rf, int64_t timeout_ms,
                       gr_req_change_cb cb, void *item)
{
    struct op_slot *slot = slot_new(req, NULL, cb, item);
    if (slot)
        gr_topic_writer_add_partitions(req->broker->topic_writer, id, new_total, assignment, assignment_count,
                                       assignment_rf, timeout_ms, change_done, slot);
    return slot != NULL;
}

bool gr_req_topic_set_configs(struct gr_req *req, const uint8_t id[16], const char *const *keys,
                              const char *const *values, int count, gr_req_change_cb cb, void *item)
{
    struct op_slot *slot = slot_new(req, NULL, cb, item);
    if (slot)
        gr_topic_writer_set_configs(req->broker->topic_writer, id, keys, values, count, 0, change_done, slot);
    return slot != NULL;
}

bool gr_req_topic_op(struct gr_req *req, struct gr_topic_op *op, gr_req_topic_cb cb, void *item)
{
    struct op_slot *slot = slot_new(req, cb, NULL, item);
    if (!slot) {
        gr_topic_op_free(op);
        return false;
    }
    gr_store_topic_op_submit(req->broker->store, req->broker->iopool, op, slot_done, slot);
    return true;
}

enum gr_handler_rc gr_req_topic_ops_wait(struct gr_req *req, void (*all_done)(struct gr_req *req))
{
    struct gr_req_topic_ops *s = ops_of(req);
    if (!s || s->pending == 1) {
        if (s) s->pending = 0;
        if (all_done) all_done(req);
        return GR_HANDLER_DONE;
    }
    s->all_done = all_done;
    s->parked = true;
    gr_req_await(req, NULL); /* the last completion answers (release) */
    s->pending--;            /* the handler's hold */
    return GR_HANDLER_WAIT;
}

static void barrier_done(void *ctx, const struct gr_topic_change *res)
{
    (void)res;
    struct gr_req *req = ctx; /* still parked: gr_req_run keeps it so */
    /* again from the start, now seeing every earlier operation's result; also when the connection closed
       meanwhile: the request was received, so its changes are made (as Kafka's controller does) */
    gr_req_run(req);
}

bool gr_req_topic_barrier(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    if (gr_req_state(req, &barrier_key) || gr_topic_writer_pending(b->topic_writer) == 0) return false;
    if (!gr_req_state_add(req, &barrier_key, 0)) return false;
    gr_req_await(req, NULL); /* barrier_done runs the handler */
    gr_topic_writer_barrier(b->topic_writer, barrier_done, req);
    return true;
}
