/*
 * topic_ops.c: requests that wait for storage topic operations (CreateTopics, Metadata auto-creation,
 * CreatePartitions, DeleteTopics, AlterConfigs, IncrementalAlterConfigs). A handler submits one operation
 * per topic (gr_req_topic_op); storage runs them one at a time in submission order, their file work on the
 * I/O pool, and calls back on the network thread; the handler ends with gr_req_topic_ops_wait, which parks
 * the request until the last operation completed, so the response still waits for every topic it names.
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

bool gr_req_topic_op(struct gr_req *req, struct gr_topic_op *op, gr_req_topic_cb cb, void *item)
{
    struct gr_req_topic_ops *s = state(req);
    struct op_slot *slot = s ? gr_arena_alloc(&req->arena, sizeof *slot) : NULL;
    if (!slot) {
        gr_topic_op_free(op);
        return false;
    }
    *slot = (struct op_slot){req, cb, item};
    s->pending++;
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

static void barrier_done(void *ctx, int err, struct gr_topic *t)
{
    (void)err;
    (void)t;
    struct gr_req *req = ctx; /* still parked: gr_req_run keeps it so */
    /* again from the start, now seeing every earlier operation's result; also when the connection closed
       meanwhile: the request was received, so its changes are made (as Kafka's controller does) */
    gr_req_run(req);
}

bool gr_req_topic_barrier(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    if (gr_req_state(req, &barrier_key) || gr_store_topic_ops_pending(b->store) == 0) return false;
    struct gr_topic_op *op = gr_topic_op_barrier();
    if (!op) return false;
    if (!gr_req_state_add(req, &barrier_key, 0)) {
        gr_topic_op_free(op);
        return false;
    }
    gr_req_await(req, NULL); /* barrier_done runs the handler */
    gr_store_topic_op_submit(b->store, b->iopool, op, barrier_done, req);
    return true;
}
