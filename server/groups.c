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
 *
 * Cluster mode (issue #19 "Groups across the cluster"; gr_groups_cluster_start): __consumer_offsets is a
 * topic of the cluster, created through the topic writer by the first FindCoordinator
 * (gr_groups_coordinator), and the coordinator holds only the groups of the partitions this broker leads.
 * One image observer (gr_groups_follow, also run when the replica manager made a local log) is the only
 * place that decides: a partition led here (not fenced) whose local log exists is loaded (one led here
 * whose local log is not made yet waits as loading: COORDINATOR_LOAD_IN_PROGRESS, not NOT_COORDINATOR, to the
 * clients FindCoordinator already sends here), one no longer led here is unloaded (Kafka's
 * GroupCoordinatorService.onElection / onResignation; the coordinator epoch is the partition's leader epoch).
 * A load reads the partition in GR_OFFSETS_LOAD_BYTES steps on the I/O pool (cold index and file work too:
 * gr_log_read_nowait) and replays each step on the loop, so the network thread never waits for the disk and
 * group requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS (coordinator/ownership.c answers it; handlers
 * have no mode branch). Read next: coordinator/coordinator.h, server/handlers/join_group.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/image.h"
#include "cluster/topic_writer.h"
#include "common/log.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/group_status.h"
#include "coordinator/offsets_log.h"
#include "protocol/errors.h"
#include "server/acls.h"
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
    /* cluster mode (gr_groups_cluster_start) */
    bool cluster;              /* partitions follow the image: observer registered */
    bool creating;             /* a creation of __consumer_offsets through the topic writer is in flight */
    bool create_retry;         /* a creation failed: tried again when the usable broker count changes */
    int32_t create_brokers;    /* usable brokers when it failed (create_retry) */
    struct load **loads;       /* per partition of the coordinator, the load in progress (NULL: none) */
    int32_t load_slots;        /* entries of loads (the coordinator's partition count) */
    struct gr_topic *ol_topic; /* the storage topic g->ol wraps */
};

/* The load of one __consumer_offsets partition (cluster mode): a chain of steps, each one read on the I/O
 * pool (`job`) then one replay on the loop, the next step started from a zero-delay timer (never from the
 * pool's completion itself, so a pool being drained at shutdown starts nothing new). `g` NULL: abandoned
 * (unloaded meanwhile, or the binding stopped): the pool's completion frees it. */
struct load {
    struct gr_io_job job;
    struct gr_groups *g;
    int32_t partition, epoch;
    struct gr_log *log;
    int64_t off, end;    /* next offset to read; the log end offset when the load began */
    int64_t records, t0; /* records replayed; when it began (monotonic ms) */
    bool in_job;         /* `job` is submitted and its done() has not run */
    bool cold_phase;     /* the job prefetches `cold` (index / file / pages) rather than reading `slice` */
    struct gr_log_slice slice, cold;
    uint8_t *buf; /* slice.bytes, read by the job */
    ev_timer step;
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
    arm(g, gr_coord_tick(g->b->coord));
}

static void maintenance_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_groups *g = w->data;
    for (int32_t p = 0; g->ol && p < gr_offsets_log_partitions(g->ol); p++) {
        struct gr_log *log = gr_offsets_log_log(g->ol, p); /* NULL: a partition not held here (cluster) */
        if (log) gr_partition_visible_offset(gr_broker_partition(g->b, log));
    }
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
    if (!g->ol) return -ENOENT; /* cluster mode before __consumer_offsets exists here: nothing is owned */
    return gr_offsets_log_append(g->ol, partition, recs, count, gr_time_wall_ms(), end_offset);
}

/* The coordinator's transactional append (gr_coord_set_append_txn): TxnOffsetCommit's transactional batch
 * and the COMMIT / ABORT markers, written by the offsets log with the producer's id and epoch. */
static int hook_append_txn(void *ctx, int32_t partition, const struct gr_coord_txn_write *w,
                           const struct gr_coord_record *recs, int count, int64_t *end_offset)
{
    struct gr_groups *g = ctx;
    if (!g->ol) return -ENOENT;
    return gr_offsets_log_append_txn(g->ol, partition, w, recs, count, gr_time_wall_ms(), end_offset);
}

/* Until committed on the offsets partition (partition/partition.h): with gregor.acks.all.fsync (default) a
 * group-metadata write counts once fsynced (its flush completion wakes `w`); without it, at once (Kafka's
 * page-cache behaviour). */
static int hook_wait_committed(void *ctx, int32_t partition, int64_t end_offset,
                               struct gr_partition_waiter *w)
{
    struct gr_groups *g = ctx;
    struct gr_log *log = g->ol ? gr_offsets_log_log(g->ol, partition) : NULL;
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

/* The watchers exist before the coordinator: replay already sets deadlines (hook_timer arms). */
static void timers_init(struct gr_groups *g)
{
    g->armed_ms = INT64_MAX;
    ev_timer_init(&g->timer, timer_cb, 0, 0);
    g->timer.data = g;
    ev_timer_init(&g->maintenance, maintenance_cb, GROUPS_MAINTENANCE_S, GROUPS_MAINTENANCE_S);
    g->maintenance.data = g;
}

/* The coordinator's configuration from the typed settings, mapping groups over `partitions`. */
static void coord_config(const struct gr_broker *b, int32_t partitions, struct gr_coord_config *cfg)
{
    gr_coord_config_defaults(cfg);
    cfg->min_session_timeout_ms = b->cfg.settings.group_min_session_timeout_ms;
    cfg->max_session_timeout_ms = b->cfg.settings.group_max_session_timeout_ms;
    cfg->initial_rebalance_delay_ms = b->cfg.settings.group_initial_rebalance_delay_ms;
    cfg->max_size = b->cfg.settings.group_max_size;
    cfg->offsets_retention_ms = b->cfg.settings.offsets_retention_ms;
    cfg->offsets_retention_check_interval_ms = GROUPS_RETENTION_CHECK_MS;
    cfg->offset_metadata_max_bytes = b->cfg.settings.offset_metadata_max_bytes;
    cfg->offsets_max_message_bytes = b->cfg.settings.message_max_bytes;
    cfg->offsets_partitions = partitions;
}

static struct gr_coordinator *coord_new(struct gr_groups *g, const struct gr_coord_config *cfg)
{
    struct gr_coord_hooks hooks = {g,           hook_mono,          hook_wall,
                                   hook_append, hook_join_done,     hook_sync_done,
                                   hook_timer,  hook_wait_committed};
    struct gr_coordinator *c = gr_coord_create(cfg, &hooks);
    if (c) gr_coord_set_append_txn(c, hook_append_txn);
    if (c) gr_coord_set_hw_fn(c, gr_metrics_status_hw, g->b); /* lag at commit (coordinator/group_status.h) */
    return c;
}

int32_t gr_groups_partition_for(struct gr_broker *b, struct gr_str group_id)
{
    if (b->coord) return gr_coord_partition(b->coord, group_id);
    const struct gr_image_topic *it =
        b->image ? gr_image_topic_find(b->image, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC)) : NULL;
    return gr_coord_partition_for(group_id,
                                  it ? it->partition_count : b->cfg.settings.offsets_topic_num_partitions);
}

int gr_groups_start(struct gr_broker *b)
{
    struct gr_groups *g = binding(b);
    if (!g) return -ENOMEM;
    timers_init(g);
    int64_t t0 = gr_time_mono_ms();
    int rc = gr_offsets_log_open(b->store, b->cfg.settings.offsets_topic_num_partitions, &g->ol);
    if (rc) {
        GR_ERROR("cannot open %s: %s", GR_OFFSETS_TOPIC, strerror(-rc));
        g->ol = NULL;
        return rc;
    }
    gr_offsets_log_set_partitions(g->ol, b->parts); /* appends through the partition layer */
    struct gr_coord_config cfg;
    coord_config(b, gr_offsets_log_partitions(g->ol), &cfg);
    b->coord = coord_new(g, &cfg);
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
    arm(g, gr_coord_rearm(b->coord));
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
       replica manager would delete it as a stray under the coordinator): FindCoordinator has the topic
       writer create it (gr_groups_coordinator) and the coordinator follows the image */
    if (b->member) return false;
    if (b->coord || gr_req_state(req, &deferred_key)) return false;
    /* a principal no group ACL (nor DESCRIBE on the cluster, ListGroups') lets through is refused by the
       handler's check anyway: the topic is not made for it (with an authorizer, issue #23) */
    if (!gr_req_authorized_any(req, GR_ACL_OP_READ, GR_ACL_RES_GROUP) &&
        !gr_req_authorized_any(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_GROUP) &&
        !gr_req_authorized_any(req, GR_ACL_OP_DELETE, GR_ACL_RES_GROUP) &&
        !gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE))
        return false;
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

/* ---- cluster mode: partitions follow the image ---- */

static void load_free(struct load *ld)
{
    gr_log_slice_release(&ld->slice);
    gr_log_slice_release(&ld->cold);
    free(ld->buf);
    free(ld);
}

/* Forgets the load of partition `p` (nothing when none): its replayed groups are the caller's to drop. */
static void abandon(struct gr_groups *g, int32_t p)
{
    struct load *ld = p < g->load_slots ? g->loads[p] : NULL;
    if (!ld) return;
    g->loads[p] = NULL;
    ev_timer_stop(g->b->loop, &ld->step);
    ld->g = NULL;
    if (!ld->in_job) load_free(ld); /* else the pool's completion frees it */
}

/* The load of `ld` ended (rc 0) or failed (-errno: what was replayed is dropped; the next image change or
 * made log tries again). */
static void load_finish(struct load *ld, int rc)
{
    struct gr_groups *g = ld->g;
    struct gr_broker *b = g->b;
    int32_t p = ld->partition;
    g->loads[p] = NULL;
    ev_timer_stop(b->loop, &ld->step);
    if (rc < 0) {
        gr_coord_partition_unload(b->coord, p);
        GR_ERROR("%s-%d: loading its groups failed: %s", GR_OFFSETS_TOPIC, (int)p, strerror(-rc));
    } else {
        int32_t n = gr_coord_partition_load_done(b->coord, p);
        /* the coordinator appends without parking: the active file stays open under the cap (most often
           already open: the load just read it) */
        int kerr = gr_log_keep_active_open(ld->log);
        if (kerr < 0)
            GR_WARN("%s-%d: cannot open the active segment (%s)", GR_OFFSETS_TOPIC, (int)p, strerror(-kerr));
        GR_INFO("group coordinator: loaded %d groups of %s-%d (epoch %d, %lld records) in %lld ms", (int)n,
                GR_OFFSETS_TOPIC, (int)p, (int)ld->epoch, (long long)ld->records,
                (long long)(gr_time_mono_ms() - ld->t0));
        arm(g, gr_coord_rearm(b->coord));
    }
    load_free(ld);
}

/* On a pool thread: the step's disk work. */
static void load_run(struct gr_io_job *job)
{
    struct load *ld = (struct load *)job;
    if (ld->cold_phase) {
        job->result = gr_log_slice_prefetch(&ld->cold);
        return;
    }
    ld->buf = malloc((size_t)ld->slice.bytes);
    job->result = ld->buf ? gr_offsets_log_read_slice(&ld->slice, ld->buf) : -ENOMEM;
}

/* On the loop: the step's result replayed, the next step scheduled. */
static void load_done(struct gr_io_job *job)
{
    struct load *ld = (struct load *)job;
    ld->in_job = false;
    if (!ld->g) {
        load_free(ld);
        return;
    }
    if (ld->cold_phase) {
        gr_log_slice_release(&ld->cold); /* installs what the pool opened or loaded */
        memset(&ld->cold, 0, sizeof ld->cold);
    } else {
        int64_t bytes = ld->slice.bytes;
        gr_log_slice_release(&ld->slice);
        memset(&ld->slice, 0, sizeof ld->slice);
        if (job->result == 0) {
            int64_t next =
                /* this partition's markers complete this partition's pending offsets only: another
                   partition may hold the same producer's open transaction */
                gr_offsets_log_replay_partition(ld->g->b->coord, ld->partition, ld->buf, (size_t)bytes,
                                                ld->off, &ld->records);
            ld->off = next > ld->off ? next : ld->end; /* no whole batch: a torn tail ends the load */
        }
        free(ld->buf);
        ld->buf = NULL;
    }
    if (job->result < 0) {
        load_finish(ld, job->result);
        return;
    }
    ev_timer_set(&ld->step, 0, 0);
    ev_timer_start(ld->g->b->loop, &ld->step);
}

static void load_submit(struct load *ld)
{
    ld->in_job = true;
    ld->job.run = load_run;
    ld->job.done = load_done;
    ld->job.result = 0;
    struct gr_broker *b = ld->g->b;
    if (b->iopool) {
        gr_iopool_submit(b->iopool, &ld->job);
    } else { /* no pool (tests): inline */
        load_run(&ld->job);
        load_done(&ld->job);
    }
}

/* One step: find the next range without waiting for the disk, then have the pool read it. */
static void load_step(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct load *ld = w->data;
    if (ld->off >= ld->end) {
        load_finish(ld, 0);
        return;
    }
    int rc =
        gr_log_read_nowait(ld->log, ld->off, GR_OFFSETS_LOAD_BYTES, ld->end, true, &ld->slice, &ld->cold);
    if (rc == -EAGAIN) {
        ld->cold_phase = true;
        load_submit(ld);
        return;
    }
    if (rc == 0 && ld->slice.bytes == 0) {
        gr_log_slice_release(&ld->slice);
        memset(&ld->slice, 0, sizeof ld->slice);
        ld->off = ld->end;
    }
    if (rc < 0 || ld->off >= ld->end) {
        load_finish(ld, rc);
        return;
    }
    ld->cold_phase = false;
    load_submit(ld);
}

/* Partition `p` is led here at `epoch` and its log exists: its groups start loading. */
static void load_start(struct gr_groups *g, int32_t p, int32_t epoch, struct gr_log *log)
{
    struct gr_broker *b = g->b;
    struct load *ld = calloc(1, sizeof *ld);
    if (!ld || gr_coord_partition_load_begin(b->coord, p, epoch) < 0) {
        free(ld);
        GR_WARN_RATELIMITED("%s-%d: cannot start loading its groups", GR_OFFSETS_TOPIC, (int)p);
        return;
    }
    ld->g = g;
    ld->partition = p;
    ld->epoch = epoch;
    ld->log = log;
    ld->off = gr_log_start_offset(log);
    ld->end = gr_log_end_offset(log);
    ld->t0 = gr_time_mono_ms();
    ev_timer_init(&ld->step, load_step, 0, 0);
    ld->step.data = ld;
    g->loads[p] = ld;
    ev_timer_start(b->loop, &ld->step);
}

/* Partition `p` is no longer led here: its groups (loaded or loading) go. */
static void unload(struct gr_groups *g, int32_t p)
{
    abandon(g, p);
    int32_t n = gr_coord_partition_unload(g->b->coord, p);
    GR_INFO("group coordinator: unloaded %d groups of %s-%d (no longer its leader)", (int)n, GR_OFFSETS_TOPIC,
            (int)p);
}

/* The image's __consumer_offsets has `count` partitions: the coordinator maps groups over the same count
 * (only possible while it owns nothing: everything is unloaded first). Returns false when out of memory. */
static bool follow_count(struct gr_groups *g, int32_t count)
{
    struct gr_coordinator *c = g->b->coord;
    if (count == g->load_slots) return true;
    for (int32_t p = 0; p < g->load_slots; p++)
        if (gr_coord_partition_state(c, p) != GR_COORD_PART_NOT_OWNED) unload(g, p);
    struct load **loads = calloc((size_t)count, sizeof *loads);
    if (!loads || gr_coord_set_partition_count(c, count) < 0) {
        free(loads);
        GR_WARN_RATELIMITED("group coordinator: cannot map groups over %d partitions", (int)count);
        return false;
    }
    free(g->loads);
    g->loads = loads;
    g->load_slots = count;
    return true;
}

/* The one place that decides which partitions this coordinator serves (see the file comment). */
static void create_offsets_topic(struct gr_broker *b);

static void groups_follow(void *ctx, struct gr_image *img)
{
    struct gr_broker *b = ctx;
    struct gr_groups *g = b->groups;
    if (!g || !g->cluster || !b->coord) return;
    struct gr_image_topic *it = gr_image_topic_find(img, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    if (!it && g->create_retry && gr_image_usable_broker_count(img) != g->create_brokers) {
        /* A broker joined (or left) since the creation failed: try again now, so the coordinator appears
         * without waiting for the clients' next FindCoordinator */
        g->create_retry = false;
        create_offsets_topic(b);
    }
    if (!it || !follow_count(g, it->partition_count)) return;
    if (it->local && it->local != g->ol_topic && !g->ol) {
        if (gr_offsets_log_attach(b->store, it->local, &g->ol) < 0) return;
        gr_offsets_log_set_partitions(g->ol, b->parts);
        g->ol_topic = it->local;
    }
    for (int32_t p = 0; p < it->partition_count; p++) {
        const struct gr_image_partition *ip = gr_image_partition(it, p);
        struct gr_log *log = g->ol && it->local == g->ol_topic ? gr_offsets_log_log(g->ol, p) : NULL;
        bool elected = !img->self_fenced && ip->leader == img->node_id;
        bool lead = log && elected;
        enum gr_coord_part_state st = gr_coord_partition_state(b->coord, p);
        bool waiting = st == GR_COORD_PART_LOADING && !g->loads[p]; /* elected, its local log not made yet */
        if (elected && !log) {
            /* The image names this broker the leader (FindCoordinator at any broker sends clients here) but
             * the replica manager has not made the local log yet (it makes a new topic's logs one by one,
             * __consumer_offsets' 50 in about a second): loading from now on, so group requests get the
             * retriable COORDINATOR_LOAD_IN_PROGRESS rather than NOT_COORDINATOR (which librdkafka 2.0.2
             * gives a consumer as an error: 0061 in the cluster). The load starts once the log exists. */
            if (!waiting || gr_coord_partition_epoch(b->coord, p) != ip->leader_epoch) {
                if (st != GR_COORD_PART_NOT_OWNED) unload(g, p);
                gr_coord_partition_load_begin(b->coord, p, ip->leader_epoch);
            }
        } else if (lead && (st == GR_COORD_PART_NOT_OWNED || waiting)) {
            load_start(g, p, ip->leader_epoch, log);
        } else if (!lead && st != GR_COORD_PART_NOT_OWNED) {
            unload(g, p);
        } else if (lead && ip->leader_epoch > gr_coord_partition_epoch(b->coord, p)) {
            /* Led here again at a newer epoch without this observer seeing the partition led elsewhere (an
             * image rebuilt after a compacted watch can jump over that state; Kafka's metadata log never
             * skips one, so its runtime only raises the epoch): another leader may have written in between,
             * so the groups are loaded again from the log at the new epoch. */
            GR_INFO("group coordinator: %s-%d led here again at epoch %d (loaded at %d): loading it again",
                    GR_OFFSETS_TOPIC, (int)p, (int)ip->leader_epoch,
                    (int)gr_coord_partition_epoch(b->coord, p));
            unload(g, p);
            load_start(g, p, ip->leader_epoch, log);
        }
    }
    arm(g, gr_coord_rearm(b->coord));
}

void gr_groups_follow(struct gr_broker *b)
{
    groups_follow(b, b->image);
}

int gr_groups_cluster_start(struct gr_broker *b)
{
    struct gr_groups *g = binding(b);
    if (!g) return -ENOMEM;
    timers_init(g);
    const struct gr_image_topic *it =
        gr_image_topic_find(b->image, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    struct gr_coord_config cfg;
    coord_config(b, it ? it->partition_count : b->cfg.settings.offsets_topic_num_partitions, &cfg);
    cfg.partitions_owned = false;
    g->load_slots = cfg.offsets_partitions;
    g->loads = calloc((size_t)g->load_slots, sizeof *g->loads);
    if (!g->loads || !(b->coord = coord_new(g, &cfg))) {
        free(g->loads);
        g->loads = NULL;
        g->load_slots = 0;
        return -ENOMEM;
    }
    if (gr_image_observe(b->image, groups_follow, b) < 0) {
        GR_ERROR("group coordinator: no image observer slot left");
        return -ENOSPC;
    }
    g->cluster = true;
    ev_timer_start(b->loop, &g->maintenance);
    groups_follow(b, b->image);
    return 0;
}

/* The topic writer answered the creation of __consumer_offsets (TOPIC_ALREADY_EXISTS: another broker's
 * first FindCoordinator won; fine). */
static void offsets_topic_created(void *ctx, const struct gr_topic_change *res)
{
    struct gr_broker *b = ctx;
    struct gr_groups *g = b->groups;
    bool failed = res->error_code && res->error_code != GR_ERR_TOPIC_ALREADY_EXISTS;
    if (g) {
        g->creating = false;
        g->create_retry = failed;
        g->create_brokers = failed ? gr_image_usable_broker_count(b->image) : 0;
    }
    if (failed && res->error_code == GR_ERR_INVALID_REPLICATION_FACTOR)
        GR_WARN_RATELIMITED("cannot create %s: %s (offsets.topic.replication.factor %d: internal topic "
                            "creation will fail until the cluster size meets this replication factor "
                            "requirement; tried again when a broker joins)",
                            GR_OFFSETS_TOPIC, res->message ? res->message : "",
                            (int)b->cfg.settings.offsets_topic_replication_factor);
    else if (failed)
        GR_WARN_RATELIMITED("cannot create %s: %s (error %d)", GR_OFFSETS_TOPIC,
                            res->message ? res->message : "", (int)res->error_code);
    else if (!res->error_code)
        GR_INFO("created %s with %d partitions", GR_OFFSETS_TOPIC, (int)res->partition_count);
}

/* Has the topic writer create __consumer_offsets (once at a time): offsets.topic.num.partitions partitions
 * of offsets.topic.replication.factor replicas (Kafka's default 3; placement refuses it while fewer brokers
 * are usable, as Kafka's: FindCoordinator answers COORDINATOR_NOT_AVAILABLE, and groups_follow tries again
 * when the usable broker count changes), placed by the writer, with the coordinator's topic configs. */
static void create_offsets_topic(struct gr_broker *b)
{
    struct gr_groups *g = b->groups;
    if (!g || g->creating || !b->topic_writer) return;
    char seg[32];
    snprintf(seg, sizeof seg, "%d", GR_OFFSETS_SEGMENT_BYTES);
    const char *keys[] = {"cleanup.policy", "segment.bytes"};
    const char *values[] = {"compact", seg};
    struct gr_topic_create_args a = {.name = GR_OFFSETS_TOPIC,
                                     .partitions = b->cfg.settings.offsets_topic_num_partitions,
                                     .replication_factor = b->cfg.settings.offsets_topic_replication_factor,
                                     .config_keys = keys,
                                     .config_values = values,
                                     .config_count = 2,
                                     .timeout_ms = 0};
    g->creating = true;
    gr_topic_writer_create(b->topic_writer, &a, offsets_topic_created, b);
}

int16_t gr_groups_coordinator(struct gr_broker *b, struct gr_str group_id, int32_t *node_id)
{
    *node_id = -1;
    const struct gr_image *img = b->image;
    const struct gr_image_topic *it = gr_image_topic_find(img, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    if (!it) {
        if (b->groups && b->groups->cluster) create_offsets_topic(b);
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    }
    struct gr_str key = group_id.len >= 0 ? group_id : gr_str_c("");
    const struct gr_image_partition *ip =
        gr_image_partition(it, gr_coord_partition_for(key, it->partition_count));
    if (!ip || ip->leader < 0 || (img->self_fenced && ip->leader == img->node_id))
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    *node_id = ip->leader;
    return GR_ERR_NONE;
}

void gr_groups_stop(struct gr_broker *b)
{
    struct gr_groups *g = b->groups;
    if (!g) return;
    if (g->cluster) {
        gr_image_unobserve(b->image, groups_follow, b);
        for (int32_t p = 0; p < g->load_slots; p++)
            abandon(g, p);
        free(g->loads);
    }
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
