/*
 * groups.c: the server binding of the group coordinator (coordinator/ is plain state with hooks; this file
 * gives it a log, a clock, timers and a way to answer requests).
 *
 * gr_groups_start opens __consumer_offsets (creating it with offsets.topic.num.partitions partitions when
 * missing) and replays it synchronously (so COORDINATOR_LOAD_IN_PROGRESS is never needed): at broker start
 * when the topic exists, else on the first group request (as Kafka creates the topic on first use: a new
 * broker starts without 50 partitions' worth of file creation and fsyncs; gr_groups_defer parks the request
 * while the files are made on the I/O pool, so the network thread keeps serving). Dispatch calls
 * gr_groups_defer for every API marked needs_groups in server/apis.def. It creates b->coord, and drives its
 * timers from two ev_timers: one armed at the coordinator's earliest deadline (session expiry, pending
 * member ids, join/sync phases, offset expiration), one every GROUPS_MAINTENANCE_S seconds for the
 * offsets-log rewrite and the high watermark of its partitions. Coordinator waiters are parked requests: a
 * JoinGroup or SyncGroup that must wait is parked with no deadline by its handler and finished from the
 * coordinator's join_done / sync_done hooks (which may run inside the same handler call, or later from
 * another request or a timer); the response is filled by the API's own file (gr_join_group_fill in
 * handlers/join_group.c, gr_sync_group_fill in handlers/sync_group.c). A waiter whose connection closed is
 * still answered; gr_req_finish then frees it.
 * Read next: coordinator/coordinator.h, server/handlers/join_group.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"

#define GROUPS_MAINTENANCE_S 5.0
/* Kafka's offsets.retention.check.interval.ms default (not a Gregor config key yet). */
#define GROUPS_RETENTION_CHECK_MS 600000

/* The binding (b->groups): made by the first gr_groups_start or gr_groups_defer, freed by gr_groups_stop.
 * ol and the timers are in use while b->coord exists; reqs while __consumer_offsets is being created. */
struct gr_groups {
    struct gr_broker *b;
    struct gr_offsets_log *ol;
    ev_timer timer;       /* the coordinator's earliest deadline */
    int64_t armed_ms;     /* deadline the timer is armed for, INT64_MAX when idle */
    ev_timer maintenance; /* offsets-log rewrite and high watermarks */
    struct gr_req **reqs; /* requests parked until __consumer_offsets exists (gr_groups_defer) */
    int count, cap;
};

/* The per-request state key of gr_groups_defer (gr_req_state): present once the request waited. */
static const char deferred_key;

static struct gr_groups *groups_of(struct gr_broker *b)
{
    return b->coord ? b->groups : NULL;
}

/* Returns b->groups, made on first use; NULL when out of memory. */
static struct gr_groups *binding(struct gr_broker *b)
{
    if (!b->groups && (b->groups = calloc(1, sizeof *b->groups))) b->groups->b = b;
    return b->groups;
}

struct gr_offsets_log *gr_groups_offsets_log(struct gr_broker *b)
{
    struct gr_groups *g = groups_of(b);
    return g ? g->ol : NULL;
}

static void arm(struct gr_groups *g, int64_t deadline_ms)
{
    ev_timer_stop(g->b->loop, &g->timer);
    g->armed_ms = deadline_ms;
    if (deadline_ms == INT64_MAX) return;
    double after = (double)(deadline_ms - gr_time_mono_ms()) / 1000.0;
    ev_timer_set(&g->timer, after > 0 ? after : 0, 0);
    ev_timer_start(g->b->loop, &g->timer);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_groups *g = w->data;
    g->armed_ms = INT64_MAX;
    gr_coord_tick(g->b->coord);
    arm(g, gr_coord_next_deadline_ms(g->b->coord));
}

static void maintenance_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_groups *g = w->data;
    for (int32_t p = 0; p < gr_offsets_log_partitions(g->ol); p++)
        gr_partition_visible_offset(gr_broker_partition(g->b, gr_offsets_log_log(g->ol, p)));
}

/* ---- coordinator hooks ---- */

static int64_t hook_mono(void *ctx)
{
    (void)ctx;
    return gr_time_mono_ms();
}

static int64_t hook_wall(void *ctx)
{
    (void)ctx;
    return gr_time_wall_ms();
}

static int hook_append(void *ctx, int32_t partition, const struct gr_coord_record *recs, int count,
                       int64_t *end_offset)
{
    struct gr_groups *g = ctx;
    return gr_offsets_log_append(g->ol, partition, recs, count, gr_time_wall_ms(), end_offset);
}

/* Until committed on the offsets partition (partition/partition.h): with gregor.acks.all.fsync (default) a
 * group-metadata write counts once fsynced (its flush completion wakes `w`); without it, at once (Kafka's
 * page-cache behaviour). */
static int hook_wait_committed(void *ctx, int32_t partition, int64_t end_offset,
                               struct gr_partition_waiter *w)
{
    struct gr_groups *g = ctx;
    struct gr_log *log = gr_offsets_log_log(g->ol, partition);
    if (!log) return -ENOENT;
    gr_partition_wait_committed(gr_broker_partition(g->b, log), w, end_offset);
    return 0;
}

static void hook_timer(void *ctx, int64_t deadline_ms)
{
    struct gr_groups *g = ctx;
    if (deadline_ms < g->armed_ms) arm(g, deadline_ms);
}

/* Answers a JoinGroup waiter: the response is filled by join_group.c, then sent at once (the result's
 * views are only valid during this call). */
static void hook_join_done(void *ctx, void *waiter, const struct gr_join_result *res)
{
    (void)ctx;
    gr_join_group_fill(waiter, res);
    gr_req_finish(waiter);
}

/* Answers a SyncGroup waiter: the response is filled by sync_group.c, then sent at once. */
static void hook_sync_done(void *ctx, void *waiter, const struct gr_sync_result *res)
{
    (void)ctx;
    gr_sync_group_fill(waiter, res);
    gr_req_finish(waiter);
}

/* ---- life cycle ---- */

int gr_groups_start(struct gr_broker *b)
{
    struct gr_groups *g = binding(b);
    if (!g) return -ENOMEM;
    g->armed_ms = INT64_MAX;
    /* the watchers exist before the coordinator: replay already sets deadlines (hook_timer arms) */
    ev_timer_init(&g->timer, timer_cb, 0, 0);
    g->timer.data = g;
    ev_timer_init(&g->maintenance, maintenance_cb, GROUPS_MAINTENANCE_S, GROUPS_MAINTENANCE_S);
    g->maintenance.data = g;
    int64_t t0 = gr_time_mono_ms();
    int rc = gr_offsets_log_open(b->store, b->cfg.settings.offsets_topic_num_partitions, &g->ol);
    if (rc) {
        GR_ERROR("cannot open %s: %s", GR_OFFSETS_TOPIC, strerror(-rc));
        g->ol = NULL;
        return rc;
    }
    gr_offsets_log_set_partitions(g->ol, b->parts); /* appends through the partition layer */
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.min_session_timeout_ms = b->cfg.settings.group_min_session_timeout_ms;
    cfg.max_session_timeout_ms = b->cfg.settings.group_max_session_timeout_ms;
    cfg.initial_rebalance_delay_ms = b->cfg.settings.group_initial_rebalance_delay_ms;
    cfg.max_size = b->cfg.settings.group_max_size;
    cfg.offsets_retention_ms = b->cfg.settings.offsets_retention_ms;
    cfg.offsets_retention_check_interval_ms = GROUPS_RETENTION_CHECK_MS;
    cfg.offset_metadata_max_bytes = b->cfg.settings.offset_metadata_max_bytes;
    cfg.offsets_max_message_bytes = b->cfg.settings.message_max_bytes;
    cfg.offsets_partitions = gr_offsets_log_partitions(g->ol);
    struct gr_coord_hooks hooks = {g,           hook_mono,          hook_wall,
                                   hook_append, hook_join_done,     hook_sync_done,
                                   hook_timer,  hook_wait_committed};
    b->coord = gr_coord_create(&cfg, &hooks);
    if (!b->coord) {
        gr_offsets_log_close(g->ol);
        g->ol = NULL;
        return -ENOMEM;
    }
    int64_t n = gr_offsets_log_load(g->ol, b->coord);
    if (n < 0) {
        GR_ERROR("cannot replay %s: %s", GR_OFFSETS_TOPIC, strerror((int)-n));
        ev_timer_stop(b->loop, &g->timer);
        gr_coord_destroy(b->coord);
        b->coord = NULL;
        gr_offsets_log_close(g->ol);
        g->ol = NULL;
        return (int)n;
    }
    for (int32_t p = 0; p < gr_offsets_log_partitions(g->ol); p++) {
        struct gr_log *log = gr_offsets_log_log(g->ol, p);
        gr_partition_visible_offset(gr_broker_partition(b, log));
        /* the coordinator appends without parking: its partitions' active files stay open under the cap */
        int kerr = gr_log_keep_active_open(log);
        if (kerr < 0)
            GR_WARN("%s-%d: cannot open the active segment (%s)", GR_OFFSETS_TOPIC, (int)p, strerror(-kerr));
    }
    ev_timer_start(b->loop, &g->maintenance);
    arm(g, gr_coord_next_deadline_ms(b->coord));
    GR_INFO("group coordinator loaded %lld records of %s (%d partitions, %d groups) in %lld ms", (long long)n,
            GR_OFFSETS_TOPIC, gr_offsets_log_partitions(g->ol), gr_coord_group_count(b->coord),
            (long long)(gr_time_mono_ms() - t0));
    return 0;
}

int gr_groups_ensure(struct gr_broker *b)
{
    if (b->coord) return 0;
    int64_t t0 = gr_time_mono_ms();
    int rc = gr_groups_start(b);
    if (rc == 0)
        GR_INFO("group coordinator started on first use in %lld ms", (long long)(gr_time_mono_ms() - t0));
    return rc;
}

/* The creation of __consumer_offsets completed: start the coordinator, run the waiting handlers. */
static void offsets_created(void *ctx, int err, struct gr_topic *t)
{
    (void)t;
    struct gr_broker *b = ctx;
    if (err && err != -EEXIST)
        GR_ERROR("cannot create %s: %s", GR_OFFSETS_TOPIC, strerror(-err));
    else
        gr_groups_ensure(b);
    struct gr_groups *w = b->groups;
    struct gr_req **reqs = w->reqs;
    int n = w->count;
    w->reqs = NULL;
    w->count = w->cap = 0;
    for (int i = 0; i < n; i++) {
        struct gr_req *req = reqs[i];
        gr_req_unpark(req);
        if (!req->conn)
            gr_req_free(req); /* the connection closed while it waited */
        else
            gr_req_run(req); /* without b->coord: COORDINATOR_NOT_AVAILABLE, as before */
    }
    free(reqs);
}

bool gr_groups_defer(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    /* cluster mode: __consumer_offsets is a topic of the cluster (etcd), never made here on the side (the
       replica manager would delete it as a stray under the coordinator); until groups across the cluster
       land, group requests get COORDINATOR_NOT_AVAILABLE (the handlers' answer without b->coord) */
    if (b->member) return false;
    if (b->coord || gr_req_state(req, &deferred_key)) return false;
    if (!gr_req_state_add(req, &deferred_key, 0)) return false;
    if (gr_store_topic_find(b->store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC))) {
        gr_groups_ensure(b); /* the topic exists: only its replay is left */
        return false;
    }
    struct gr_groups *w = binding(b);
    if (!w) return false;
    if (w->count == w->cap) {
        int ncap = w->cap ? w->cap * 2 : 8;
        struct gr_req **n = realloc(w->reqs, sizeof *n * (size_t)ncap);
        if (!n) return false;
        w->reqs = n;
        w->cap = ncap;
    }
    w->reqs[w->count++] = req;
    gr_req_park(req, INT64_MAX); /* offsets_created runs its handler */
    if (w->count == 1) {         /* the first waiter starts the creation; later ones join it */
        int32_t parts = b->cfg.settings.offsets_topic_num_partitions;
        gr_store_topic_op_submit(b->store, b->iopool, gr_offsets_log_create_op(parts), offsets_created, b);
    }
    return true;
}

void gr_groups_stop(struct gr_broker *b)
{
    struct gr_groups *g = b->groups;
    if (!g) return;
    if (b->coord) {
        ev_timer_stop(b->loop, &g->timer);
        ev_timer_stop(b->loop, &g->maintenance);
        gr_coord_destroy(b->coord); /* parked JoinGroup/SyncGroup requests are dropped, not answered */
        b->coord = NULL;
        gr_offsets_log_close(g->ol);
    }
    free(g->reqs); /* waiters are parked requests: main frees them */
    free(g);
    b->groups = NULL;
}
