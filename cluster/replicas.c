/*
 * replicas.c: the replica manager (cluster/replicas.h). A pass walks the store's topics (stray topics),
 * then the image's topics (links, sparse topics to create or grow, partitions to make or delete), collects
 * at most ops_per_pass_max operations, and only then submits them (an operation may complete inside the
 * submission when there is no pool, and completions change the store's topic list). When the last
 * operation of a pass completes, another pass is scheduled on the loop if the image changed meanwhile or
 * the pass was cut short; a failure schedules it after the back-off instead. Read next: storage/store.c
 * (the sparse-topic operations).
 */
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "cluster/replicas.h"
#include "common/limits.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "storage/store.h"

enum op_kind { RK_TOPIC_DELETE, RK_TOPIC_CREATE, RK_TOPIC_GROW, RK_MAKE, RK_DELETE };

struct gr_replicas {
    struct gr_replicas_config cfg;
    struct gr_image *img;
    bool started;
    bool dirty;  /* the image changed (or a pass was cut short) since the last pass began */
    bool found;  /* the last pass found work */
    bool failed; /* an operation of the current batch failed: retry after the back-off */
    int64_t backoff_ms;
    ev_timer timer; /* continuation (0 s) or back-off */
    struct gr_replicas_stats st;
    /* The image's topics at the last batch, in name order (as gr_image_topic_at lists them): the topics
       that left the image are found by one merge of this list with the current one. */
    struct known *known;
    int32_t known_count;
};

struct known {
    char *name;
    uint8_t id[16];
};

/* One operation in flight: what the completion needs to account for it. */
struct rop {
    struct gr_replicas *r;
    enum op_kind kind;
    struct gr_topic *topic; /* RK_MAKE / RK_DELETE / RK_TOPIC_*: the store topic (NULL for a create) */
    int32_t partition;
    struct gr_log *log; /* RK_DELETE: the log being deleted (still allocated after) */
    struct gr_topic_op *op;
    char name[GR_TOPIC_NAME_BYTES_MAX + 1];
};

static void pass(struct gr_replicas *r);

static void schedule(struct gr_replicas *r, double after_s)
{
    if (ev_is_active(&r->timer)) return;
    ev_timer_set(&r->timer, after_s, 0.);
    ev_timer_start(r->cfg.loop, &r->timer);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    pass(w->data);
}

static void known_free(struct known *k, int32_t n)
{
    for (int32_t i = 0; k && i < n; i++)
        free(k[i].name);
    free(k);
}

/* Compares the image's topics with the previous batch's: each topic gone (its name absent, or present
   under another id) is reported to the coordinator; then the list is replaced. Out of memory the old list
   is kept (compared again at the next batch). */
static void track_deletions(struct gr_replicas *r, bool report)
{
    int32_t n = gr_image_topic_count(r->img);
    struct known *now = calloc((size_t)n + 1, sizeof *now);
    for (int32_t i = 0; now && i < n; i++) {
        struct gr_image_topic *it = gr_image_topic_at(r->img, i);
        memcpy(now[i].id, it->id, 16);
        if (!(now[i].name = strdup(it->name))) {
            known_free(now, i);
            now = NULL;
        }
    }
    if (!now) {
        GR_WARN_RATELIMITED("replicas: out of memory tracking deleted topics");
        return;
    }
    for (int32_t i = 0, j = 0; report && i < r->known_count; i++) {
        while (j < n && strcmp(now[j].name, r->known[i].name) < 0)
            j++;
        if (j < n && strcmp(now[j].name, r->known[i].name) == 0 && memcmp(now[j].id, r->known[i].id, 16) == 0)
            continue;
        r->st.topics_gone++;
        if (r->cfg.coord) {
            int32_t dropped = gr_coord_topic_deleted(r->cfg.coord, r->known[i].name);
            if (dropped)
                GR_INFO("replicas: topic %s deleted: %d committed offsets dropped", r->known[i].name,
                        dropped);
        }
    }
    known_free(r->known, r->known_count);
    r->known = now;
    r->known_count = n;
}

static void on_image(void *ctx, struct gr_image *img)
{
    (void)img;
    struct gr_replicas *r = ctx;
    track_deletions(r, true);
    r->dirty = true;
    if (r->st.in_flight == 0 && !ev_is_active(&r->timer)) pass(r);
}

static const char *kind_name(enum op_kind k)
{
    static const char *names[] = {"deleting topic", "creating topic", "growing topic", "making the log of",
                                  "deleting the log of"};
    return names[k];
}

static void op_done(void *ctx, int err, struct gr_topic *t)
{
    struct rop *o = ctx;
    struct gr_replicas *r = o->r;
    r->st.in_flight--;
    if (err < 0) {
        r->st.failures++;
        r->failed = true;
        GR_WARN_RATELIMITED("replicas: %s %s (partition %d) failed (%s): retried in %lld ms",
                            kind_name(o->kind), o->name, o->partition, strerror(-err),
                            (long long)r->backoff_ms);
    } else {
        switch (o->kind) {
        case RK_TOPIC_DELETE:
            r->st.topics_deleted++;
            break;
        case RK_TOPIC_CREATE:
            r->st.topics_created++;
            break;
        case RK_TOPIC_GROW:
            break;
        case RK_MAKE:
            r->st.made++;
            if (r->cfg.on_log)
                r->cfg.on_log(r->cfg.ctx, t, o->partition, gr_topic_log(t, o->partition), true);
            break;
        case RK_DELETE:
            r->st.deleted++;
            if (r->cfg.on_log) r->cfg.on_log(r->cfg.ctx, o->topic, o->partition, o->log, false);
            break;
        }
    }
    free(o);
    if (r->st.in_flight > 0) return;
    if (r->failed) {
        r->failed = false;
        r->dirty = true;
        schedule(r, (double)r->backoff_ms / 1000.);
        r->backoff_ms =
            r->backoff_ms * 2 > GR_REPLICA_RETRY_MS_MAX ? GR_REPLICA_RETRY_MS_MAX : r->backoff_ms * 2;
        return;
    }
    r->backoff_ms = GR_REPLICA_RETRY_MS_MIN;
    schedule(r, 0.); /* the next loop iteration: look again (the completions changed the store) */
}

/* The batch one pass collects. */
struct batch {
    struct rop **ops;
    int32_t count, max;
};

/* Adds an operation to the batch; false when the batch is full (the pass stops and continues later) or out
   of memory (retried after the back-off). */
static bool add(struct gr_replicas *r, struct batch *b, enum op_kind kind, struct gr_topic *t,
                const char *name, int32_t p, struct gr_topic_op *op)
{
    r->found = true;
    if (b->count >= b->max) {
        gr_topic_op_free(op);
        r->dirty = true;
        return false;
    }
    struct rop *o = calloc(1, sizeof *o);
    if (!o || !op) {
        free(o);
        gr_topic_op_free(op);
        r->failed = true;
        return false;
    }
    *o = (struct rop){.r = r, .kind = kind, .topic = t, .partition = p, .op = op};
    if (kind == RK_DELETE) o->log = gr_topic_log(t, p);
    snprintf(o->name, sizeof o->name, "%s", name);
    b->ops[b->count++] = o;
    return true;
}

static bool has_replica(const struct gr_image_partition *ip, int32_t node)
{
    const int32_t *rep = gr_image_replicas(ip);
    for (int16_t i = 0; i < ip->replica_count; i++)
        if (rep[i] == node) return true;
    return false;
}

/* Store topics the image does not know under their id: deleted whole. */
static bool collect_stray_topics(struct gr_replicas *r, struct batch *b)
{
    struct gr_store *store = r->cfg.store;
    for (int i = 0; i < gr_store_topic_count(store); i++) {
        struct gr_topic *t = gr_store_topic_at(store, i);
        const char *name = gr_topic_name(t);
        struct gr_image_topic *it = gr_image_topic_find(r->img, name, strlen(name));
        if (it && memcmp(it->id, gr_topic_id(t), 16) == 0) continue;
        GR_INFO("replicas: topic %s (local id unknown to the cluster): deleting its local partitions", name);
        if (!add(r, b, RK_TOPIC_DELETE, t, name, -1, gr_topic_op_delete(t))) return false;
    }
    return true;
}

/* One image topic: link, create or grow its sparse store topic, make and delete partition logs. */
static bool collect_topic(struct gr_replicas *r, struct batch *b, struct gr_image_topic *it)
{
    int32_t self = r->img->node_id;
    struct gr_topic *t = gr_store_topic_find(r->cfg.store, it->name, (size_t)it->name_len);
    if (t && memcmp(gr_topic_id(t), it->id, 16) != 0) t = NULL; /* an older incarnation: being deleted */
    it->local = t;
    bool wanted = false;
    for (int32_t p = 0; p < it->partition_count && !wanted; p++)
        wanted = has_replica(&it->parts[p], self);
    if (!t) {
        if (!wanted || gr_store_topic_find(r->cfg.store, it->name, (size_t)it->name_len)) return true;
        return add(r, b, RK_TOPIC_CREATE, NULL, it->name, -1,
                   gr_topic_op_create_sparse(it->name, it->id, it->partition_count, NULL, NULL, 0));
    }
    if (!gr_topic_sparse(t)) return true; /* a whole (single-node) topic: never touched */
    if (gr_topic_partition_count(t) < it->partition_count)
        return add(r, b, RK_TOPIC_GROW, t, it->name, -1, gr_topic_op_add_partitions(t, it->partition_count));
    for (int32_t p = 0; p < gr_topic_partition_count(t); p++) {
        if (it->parts[p].replica_count == 0) continue; /* no state known yet: neither made nor deleted */
        bool want = has_replica(&it->parts[p], self);
        bool have = gr_topic_log(t, p) != NULL;
        if (want && !have && !add(r, b, RK_MAKE, t, it->name, p, gr_topic_op_replica_make(t, p)))
            return false;
        if (!want && have) {
            GR_INFO("replicas: %s-%d is no longer assigned to this broker: deleting its local log", it->name,
                    p);
            if (!add(r, b, RK_DELETE, t, it->name, p, gr_topic_op_replica_delete(t, p))) return false;
        }
    }
    return true;
}

static void pass(struct gr_replicas *r)
{
    if (!r->started || r->st.in_flight > 0) return;
    if (r->img->loading) return; /* a partial image (a snapshot being fed): the commit's on_image passes */
    r->st.passes++;
    r->dirty = false;
    r->found = false;
    struct rop *ops[GR_REPLICA_OPS_PER_PASS_MAX];
    struct batch b = {ops, 0, r->cfg.ops_per_pass_max};
    bool go = collect_stray_topics(r, &b);
    for (int32_t i = 0; go && i < gr_image_topic_count(r->img); i++)
        go = collect_topic(r, &b, gr_image_topic_at(r->img, i));
    if (b.count > r->st.max_ops_in_pass) r->st.max_ops_in_pass = b.count;
    r->st.in_flight += b.count + 1; /* + 1: completions inside the loop below do not reschedule */
    for (int32_t i = 0; i < b.count; i++)
        gr_store_topic_op_submit(r->cfg.store, r->cfg.pool, b.ops[i]->op, op_done, b.ops[i]);
    r->st.in_flight--;
    if (r->st.in_flight > 0) return; /* op_done of the last one schedules what comes next */
    if (r->failed) {
        r->failed = false;
        schedule(r, (double)r->backoff_ms / 1000.);
    } else if (b.count > 0 || r->dirty) {
        schedule(r, 0.);
    }
}

struct gr_replicas *gr_replicas_new(const struct gr_replicas_config *cfg, struct gr_image *img)
{
    if (!cfg || !cfg->store || !cfg->loop || !img) return NULL;
    struct gr_replicas *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->cfg = *cfg;
    if (r->cfg.ops_per_pass_max <= 0 || r->cfg.ops_per_pass_max > GR_REPLICA_OPS_PER_PASS_MAX)
        r->cfg.ops_per_pass_max = GR_REPLICA_OPS_PER_PASS_MAX;
    r->img = img;
    r->backoff_ms = GR_REPLICA_RETRY_MS_MIN;
    ev_timer_init(&r->timer, timer_cb, 0., 0.);
    r->timer.data = r;
    return r;
}

int gr_replicas_start(struct gr_replicas *r)
{
    if (r->started) return -EALREADY;
    int rc = gr_image_observe(r->img, on_image, r);
    if (rc < 0) return rc;
    r->started = true;
    track_deletions(r, false);
    pass(r);
    return 0;
}

void gr_replicas_free(struct gr_replicas *r)
{
    if (!r) return;
    if (r->st.in_flight > 0)
        GR_ERROR("replicas: freed with %d operations in flight (the I/O pool was not drained)",
                 r->st.in_flight);
    if (r->started) gr_image_unobserve(r->img, on_image, r);
    ev_timer_stop(r->cfg.loop, &r->timer);
    known_free(r->known, r->known_count);
    free(r);
}

void gr_replicas_stats(const struct gr_replicas *r, struct gr_replicas_stats *st)
{
    *st = r->st;
    st->idle = r->started && r->st.in_flight == 0 && !ev_is_active(&r->timer) && !r->dirty && !r->found;
}
