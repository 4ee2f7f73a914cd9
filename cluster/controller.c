/*
 * controller.c: the controller's election and its partition-state txns (rules in cluster/controller.h).
 *
 * One function decides what to do next (step): it runs after every image batch (the observer), a lease
 * change, a request's completion and the back-off timer, and does nothing while a request is in flight.
 * Not the controller: campaign (txn: controller key absent -> put it under the lease; else read it) when
 * the image shows none. The controller: send the next batch of the current plan, or, once the image shows
 * what was written, plan again. The state that gates it: epoch (0: not the controller), wait_revision (the
 * image must reach it before the next plan or campaign; the back-off timer clears it), the back-off timer
 * (a campaign waits for it; a plan stops it).
 *
 * Read next: cluster/tests/test_controller.c.
 */
#include "cluster/controller.h"

#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster/etcd.h"
#include "common/log.h"
#include "protocol/errors.h"

struct gr_controller {
    struct ev_loop *loop;
    struct gr_etcd *etcd;
    const struct gr_cluster_layout *lay;
    struct gr_image *img;
    int32_t node_id;
    int64_t lease_id;
    int64_t epoch;                    /* mine; 0: not the controller */
    bool shutting_down;               /* the broker is stopping (gr_controller_shutting_down) */
    struct gr_etcd_req *req;          /* the one request in flight */
    int64_t wait_revision;            /* no plan / campaign until img->revision >= this */
    int64_t plan_revision;            /* img->revision when the plan was made */
    struct gr_controller_write *plan; /* GR_CONTROLLER_PLAN_MAX */
    int32_t plan_count, plan_next, batch_count;
    ev_timer timer;         /* back-off */
    ev_timer kick;          /* a step on the next loop turn (a new reassignment ask) */
    ev_timer unclean_timer; /* every unclean.leader.election.interval.ms: the next plan is an unclean pass */
    bool unclean_default;   /* the broker's unclean.leader.election.enable */
    bool unclean_due;       /* the next plan is an unclean pass */
    int64_t backoff_ms;
    ev_timer rebalance_timer; /* every leader.imbalance.check.interval.seconds: the next plan is a preferred
                                 pass */
    bool rebalance_due;
    struct gr_controller_elect_req *asks; /* ElectLeaders asks waiting (a list, newest first) */
    int32_t ask_count;
    struct gr_controller_reassign_req *rasks; /* AlterPartitionReassignments asks (oldest first) */
    int32_t rask_count;
    /* the topic-record txn in flight (a reassignment ask's parts, or completions when tw_ask is NULL) */
    bool tw_inflight;
    struct gr_controller_reassign_req *tw_ask;
    int32_t tw_idx[GR_CONTROLLER_TXN_PARTITIONS_MAX], tw_n;
    char tw_topic_key[GR_CLUSTER_KEY_BUF];
    struct gr_controller_stats stats;
    char ctl_key[GR_CLUSTER_KEY_BUF];
    /* one txn's keys: partitions, then topic records */
    char part_keys[GR_CONTROLLER_TXN_PARTITIONS_MAX][GR_CLUSTER_KEY_BUF];
    char topic_keys[GR_CONTROLLER_TXN_PARTITIONS_MAX][GR_CLUSTER_KEY_BUF];
};

static void step(struct gr_controller *ctl);
struct gr_controller_reassign_part;
static void part_answer(struct gr_controller_reassign_part *pt, int16_t error, const char *msg);

/* ---- the plan (pure) ---- */

bool gr_controller_broker_live(const struct gr_image *img, int32_t node_id)
{
    const struct gr_image_broker *br = node_id >= 0 ? gr_image_broker(img, node_id) : NULL;
    return br && !br->fenced && !br->shutting_down;
}

static bool contains(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

/* Whether partition p's ISR holds a live member other than node_id. */
static bool other_live_isr_member(const struct gr_image *img, const struct gr_image_partition *p,
                                  int32_t node_id)
{
    const int32_t *isr = gr_image_isr(p);
    for (int32_t i = 0; i < p->isr_count; i++)
        if (isr[i] != node_id && gr_controller_broker_live(img, isr[i])) return true;
    return false;
}

int32_t gr_controller_movable_leaderships(const struct gr_image *img, int32_t node_id,
                                          const struct gr_image_topic **first_topic, int32_t *first_partition)
{
    int32_t count = 0;
    for (int32_t i = 0; i < gr_image_topic_count(img); i++) {
        const struct gr_image_topic *t = gr_image_topic_at(img, i);
        for (int32_t p = 0; p < t->partition_count; p++) {
            const struct gr_image_partition *ip = &t->parts[p];
            if (ip->leader != node_id || !other_live_isr_member(img, ip, node_id)) continue;
            if (count++ == 0 && first_topic) *first_topic = t;
            if (count == 1 && first_partition) *first_partition = p;
        }
    }
    return count;
}

/* Live, and the same incarnation as when the state was written: a registration newer than the state (a
 * restart or a lost lease, maybe while no controller ran) is one Kafka would have fenced (removed from the
 * ISR, its leadership moved) before unfencing it. */
static bool fresh(const struct gr_image *img, const struct gr_image_partition *p, int32_t node_id)
{
    return gr_controller_broker_live(img, node_id) &&
           gr_image_broker(img, node_id)->epoch <= p->partition_epoch;
}

bool gr_controller_unclean_enabled(const struct gr_image_topic *t, bool broker_default)
{
    const char *v = gr_image_topic_config(t, "unclean.leader.election.enable");
    if (v) return strcasecmp(v, "true") == 0; /* Kafka's boolean parsing: "true"/"false", any case */
    return broker_default;
}

static bool unclean_enabled(const struct gr_image_topic *t, const struct gr_controller_plan_opts *opts)
{
    return gr_controller_unclean_enabled(t, opts && opts->unclean_default);
}

/* A new partition (ReplicationControlManager.createTopic): the first live replica leads, leader epoch 0,
 * ISR = the live replicas (all replicas when none is live: the partition starts offline). */
static bool plan_new(const struct gr_image *img, const struct gr_image_topic *t,
                     const struct gr_image_partition *p, struct gr_cluster_partition *st)
{
    const int32_t *reps = gr_image_replicas(p);
    if (p->replica_count == 0 || t->record_revision <= 0) return false; /* assignment not known yet */
    for (int32_t i = 0; i < p->replica_count; i++)
        if (gr_controller_broker_live(img, reps[i])) st->isr[st->isr_count++] = reps[i];
    st->leader = st->isr_count ? st->isr[0] : -1;
    if (!st->isr_count) {
        st->isr_count = p->replica_count;
        memcpy(st->isr, reps, sizeof(int32_t) * (size_t)p->replica_count);
    }
    return true;
}

/* The leader of an election (PartitionChangeBuilder.electLeader), in assignment order: a fresh ISR member
 * (*isr as computed: the fresh members); else the ISR's only member when it is live under a newer
 * registration (the last ISR member back: Kafka fences and unfences it) whose process did not start on a new
 * or emptied log dir (its registration's log_dir_new), *isr = it alone; else, when
 * `unclean`, any live replica, *isr = it alone (logged: records the ISR had may be lost). -1: none. With
 * several ISR members none fresh, which one Kafka would have kept last depends on the order of events this
 * snapshot cannot see: none is elected (the partition goes offline keeping the old leader, which leads at the
 * next plan if it is back). */
static int32_t elect(const struct gr_image *img, const struct gr_image_topic *t,
                     const struct gr_image_partition *p, bool unclean, struct gr_cluster_partition *st)
{
    const int32_t *reps = gr_image_replicas(p), *isr = gr_image_isr(p);
    for (int32_t i = 0; i < p->replica_count; i++)
        if (contains(st->isr, st->isr_count, reps[i])) return reps[i];
    int32_t pick = -1;
    const struct gr_image_broker *last = p->isr_count == 1 ? gr_image_broker(img, isr[0]) : NULL;
    if (last && contains(reps, p->replica_count, isr[0]) && gr_controller_broker_live(img, isr[0]) &&
        !last->log_dir_new) /* a process started on an emptied log dir lacks what the ISR had */
        pick = isr[0];
    for (int32_t i = 0; i < 2 * p->replica_count && pick < 0 && unclean; i++) {
        /* a replica whose process started on a new or emptied log dir only when no other is live */
        int32_t id = reps[i % p->replica_count];
        const struct gr_image_broker *br = gr_image_broker(img, id);
        if (gr_controller_broker_live(img, id) && (i >= p->replica_count || !br->log_dir_new)) {
            pick = id;
            GR_LOG_RATELIMITED(GR_LOG_WARN,
                               "controller: unclean leader election of %.*s-%d: node %d, outside the ISR, "
                               "leads; records acknowledged by the ISR may be lost",
                               (int)t->name_len, t->name, (int)(p - t->parts), (int)pick);
        }
    }
    if (pick >= 0) {
        st->isr[0] = pick;
        st->isr_count = 1;
    }
    return pick;
}

/* The new state of an existing partition p of t, or false when it needs none (rules in controller.h). */
static bool plan_existing(const struct gr_image *img, const struct gr_image_topic *t,
                          const struct gr_image_partition *p, const struct gr_controller_plan_opts *opts,
                          struct gr_cluster_partition *st)
{
    const int32_t *isr = gr_image_isr(p);
    for (int32_t i = 0; i < p->isr_count; i++) /* the ISR without gone and re-registered members */
        if (fresh(img, p, isr[i])) st->isr[st->isr_count++] = isr[i];
    int asked = opts && opts->asked ? opts->asked(opts->asked_ctx, t->id, (int32_t)(p - t->parts)) : -1;
    if (p->leader >= 0 && fresh(img, p, p->leader) &&
        contains(isr, p->isr_count, p->leader)) { /* the leader stays: an ISR change, same epoch */
        st->leader = p->leader;
        st->leader_epoch = p->leader_epoch;
        int32_t pref = p->replica_count ? gr_image_replicas(p)[0] : -1;
        bool want = (opts && opts->preferred_pass) || asked == GR_ELECTION_PREFERRED;
        if (want && pref >= 0 && pref != p->leader && contains(st->isr, st->isr_count, pref) &&
            p->leader_epoch >= 0 && p->leader_epoch < INT32_MAX) { /* a preferred election */
            st->leader = pref;
            st->leader_epoch = p->leader_epoch + 1;
            return true;
        }
        return st->isr_count != p->isr_count;
    }
    bool unclean = (unclean_enabled(t, opts) && (p->leader >= 0 || (opts && opts->unclean_pass))) ||
                   asked == GR_ELECTION_UNCLEAN;
    st->leader = elect(img, t, p, unclean, st);
    if (st->leader < 0) {
        if (p->leader < 0) return false; /* still offline: nothing to write */
        /* offline: the ISR keeps its last member, the leader that had every committed record */
        st->isr_count = 1;
        st->isr[0] = contains(isr, p->isr_count, p->leader) ? p->leader : isr[0];
    }
    if (p->leader_epoch < 0 || p->leader_epoch == INT32_MAX) {
        GR_LOG_RATELIMITED(GR_LOG_ERROR, "controller: %.*s leader epoch %" PRId32 " cannot advance",
                           (int)t->name_len, t->name, p->leader_epoch);
        return false;
    }
    st->leader_epoch = p->leader_epoch + 1;
    return true;
}

enum gr_elect_check gr_controller_elect_check(const struct gr_image *img, const struct gr_image_partition *p,
                                              int type)
{
    const int32_t *reps = gr_image_replicas(p);
    if (type == GR_ELECTION_UNCLEAN) {
        if (p->leader >= 0) return GR_ELECT_NOT_NEEDED;
        if (p->partition_epoch == 0 || p->isr_count == 0) return GR_ELECT_ELIGIBLE_UNAVAILABLE;
        for (int32_t i = 0; i < p->replica_count; i++)
            if (gr_controller_broker_live(img, reps[i])) return GR_ELECT_NEEDED;
        return GR_ELECT_ELIGIBLE_UNAVAILABLE;
    }
    if (p->replica_count > 0 && p->leader == reps[0]) return GR_ELECT_NOT_NEEDED;
    if (p->replica_count == 0 || p->partition_epoch == 0 || p->isr_count == 0 ||
        p->leader_epoch == INT32_MAX || !fresh(img, p, reps[0]) ||
        !contains(gr_image_isr(p), p->isr_count, reps[0]))
        return GR_ELECT_PREFERRED_UNAVAILABLE;
    return GR_ELECT_NEEDED;
}

/* The new state of partition p of t, or false when it needs none. */
static bool plan_one(const struct gr_image *img, const struct gr_image_topic *t,
                     const struct gr_image_partition *p, const struct gr_controller_plan_opts *opts,
                     struct gr_cluster_partition *st)
{
    memset(st, 0, sizeof *st);
    st->leader = -1;
    if (p->partition_epoch == 0) return plan_new(img, t, p, st);
    if (p->isr_count == 0) { /* not a state Gregor writes: every writer keeps a member */
        GR_LOG_RATELIMITED(GR_LOG_ERROR, "controller: %.*s-%d has an empty ISR: left as it is",
                           (int)t->name_len, t->name, (int)(p - t->parts));
        return false;
    }
    return plan_existing(img, t, p, opts, st);
}

int32_t gr_controller_plan(const struct gr_image *img, struct gr_controller_write *out, int32_t cap,
                           bool *more)
{
    return gr_controller_plan_with(img, NULL, out, cap, more);
}

int32_t gr_controller_plan_with(const struct gr_image *img, const struct gr_controller_plan_opts *opts,
                                struct gr_controller_write *out, int32_t cap, bool *more)
{
    int32_t n = 0;
    bool left = false;
    for (int32_t ti = 0; ti < gr_image_topic_count(img) && !left; ti++) {
        const struct gr_image_topic *t = gr_image_topic_at((struct gr_image *)img, ti);
        for (int32_t pi = 0; pi < t->partition_count; pi++) {
            const struct gr_image_partition *p = &t->parts[pi];
            struct gr_cluster_partition st;
            if (p->replica_count > GR_CLUSTER_REPLICAS_MAX || p->isr_count > GR_CLUSTER_REPLICAS_MAX)
                continue;
            if (!plan_one(img, t, p, opts, &st)) continue;
            if (n == cap) {
                left = true;
                break;
            }
            struct gr_controller_write *w = &out[n++];
            memcpy(w->topic_id, t->id, 16);
            memcpy(w->topic, t->name, (size_t)t->name_len);
            w->topic[t->name_len] = 0;
            w->topic_len = t->name_len;
            w->topic_revision = t->record_revision;
            w->partition = pi;
            w->partition_epoch = p->partition_epoch;
            w->state = st;
        }
    }
    if (more) *more = left;
    return n;
}

int32_t gr_controller_batch(const struct gr_controller_write *w, int32_t count)
{
    int32_t n = 0, compares = 1; /* the controller key */
    while (n < count && n < GR_CONTROLLER_TXN_PARTITIONS_MAX) {
        int need = 1;
        if (w[n].partition_epoch == 0) { /* its topic's record compared once per txn */
            bool seen = false;
            for (int32_t i = 0; i < n && !seen; i++)
                seen = w[i].partition_epoch == 0 && memcmp(w[i].topic_id, w[n].topic_id, 16) == 0;
            need += !seen;
        }
        if (compares + need > GR_ETCD_TXN_OPS_MAX) break;
        compares += need;
        n++;
    }
    return n;
}

/* ---- the running controller ---- */

struct gr_controller_elect_req {
    struct gr_controller_elect_req *next;
    int type;
    int32_t n;
    struct gr_controller_elect_part *parts;
    void (*done)(void *ctx);
    void *ctx;
};

struct gr_controller_reassign_req {
    struct gr_controller_reassign_req *next;
    struct gr_controller_reassign_part *parts; /* borrowed */
    int32_t n;
    bool allow_rf_change;
    int64_t revision; /* the last txn written for it: done waits until the image shows it */
    void (*done)(void *ctx);
    void *ctx;
};

static int part_cmp(const void *a, const void *b)
{
    const struct gr_controller_elect_part *x = a, *y = b;
    int c = memcmp(x->topic_id, y->topic_id, 16);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* The plan's opts->asked: the type of the first waiting ask naming the partition, -1 for none. Each ask's
 * partitions are sorted (gr_controller_elect): O(asks x log partitions). */
static int asked_type(void *arg, const uint8_t topic_id[16], int32_t partition)
{
    struct gr_controller *ctl = arg;
    struct gr_controller_elect_part key = {.partition = partition};
    memcpy(key.topic_id, topic_id, 16);
    for (struct gr_controller_elect_req *r = ctl->asks; r; r = r->next)
        if (bsearch(&key, r->parts, (size_t)r->n, sizeof *r->parts, part_cmp)) return r->type;
    return -1;
}

/* Whether the image shows asked partition `a` resolved (rules at gr_controller_elect). */
static bool ask_resolved(const struct gr_image *img, int type, const struct gr_controller_elect_part *a)
{
    const struct gr_image_topic *t = gr_image_topic_find_id(img, a->topic_id);
    const struct gr_image_partition *p = t ? gr_image_partition(t, a->partition) : NULL;
    return !p || p->leader_epoch > a->leader_epoch ||
           gr_controller_elect_check(img, p, type) != GR_ELECT_NEEDED;
}

static void unlink_ask(struct gr_controller *ctl, struct gr_controller_elect_req *r)
{
    for (struct gr_controller_elect_req **pp = &ctl->asks; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            ctl->ask_count--;
            return;
        }
}

/* Runs the done of every ask the image shows resolved (each unlinked and freed first). */
static void answer_asks(struct gr_controller *ctl, bool all)
{
    struct gr_controller_elect_req *r = ctl->asks;
    while (r) {
        struct gr_controller_elect_req *next = r->next;
        bool resolved = true;
        for (int32_t i = 0; i < r->n && resolved && !all; i++)
            resolved = ask_resolved(ctl->img, r->type, &r->parts[i]);
        if (resolved) {
            void (*done)(void *) = r->done;
            void *ctx = r->ctx;
            unlink_ask(ctl, r);
            free(r->parts);
            free(r);
            done(ctx); /* may cancel other asks: restart from the list's head */
            next = ctl->asks;
        }
        r = next;
    }
}

/* Stops acting as the controller, logged at WARN unless `why` is the broker's own shutdown (INFO). */
static void stop_acting_at(struct gr_controller *ctl, const char *why, int level)
{
    if (ctl->epoch)
        gr_log_write(level, "controller: node %d stops (epoch %" PRId64 "): %s", ctl->node_id, ctl->epoch,
                     why);
    ctl->epoch = 0;
    ctl->plan_count = ctl->plan_next = 0;
    for (struct gr_controller_reassign_req *r = ctl->rasks; r; r = r->next) /* answered at the next image */
        for (int32_t i = 0; i < r->n; i++)
            if (!r->parts[i].done)
                part_answer(&r->parts[i], GR_ERR_NOT_CONTROLLER, "This broker stopped being the controller.");
}

static void stop_acting(struct gr_controller *ctl, const char *why)
{
    stop_acting_at(ctl, why, GR_LOG_WARN);
}

static void backoff(struct gr_controller *ctl)
{
    ev_timer_stop(ctl->loop, &ctl->timer);
    ev_timer_set(&ctl->timer, (double)ctl->backoff_ms / 1000.0, 0.0);
    ev_timer_start(ctl->loop, &ctl->timer);
    ctl->backoff_ms *= 2;
    if (ctl->backoff_ms > GR_CONTROLLER_BACKOFF_MAX_MS) ctl->backoff_ms = GR_CONTROLLER_BACKOFF_MAX_MS;
}

static void on_kick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    step(t->data);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_controller *ctl = t->data;
    ctl->wait_revision = 0; /* the safety net: plan or campaign again from the image as it is */
    step(ctl);
}

/* The controller key from a txn's failure branch (a range of it), or NULL. */
static const struct gr_etcd_kv *failure_kv(const struct gr_etcd_result *res)
{
    if (res->response_count != 1 || res->responses[0].type != GR_ETCD_OP_RANGE) return NULL;
    return res->responses[0].kv_count == 1 ? &res->responses[0].kvs[0] : NULL;
}

static void on_campaign(void *arg, const struct gr_etcd_result *res)
{
    struct gr_controller *ctl = arg;
    ctl->req = NULL;
    if (res->status != GR_ETCD_OK) {
        gr_log_write(GR_LOG_WARN, "controller: node %d campaign failed: %s", ctl->node_id, res->message);
        backoff(ctl);
        return;
    }
    const struct gr_etcd_kv *kv = res->succeeded ? NULL : failure_kv(res);
    if (res->succeeded || (kv && kv->lease == ctl->lease_id)) { /* mine (maybe from a lost earlier answer) */
        ctl->epoch = res->succeeded ? res->revision : kv->create_revision;
        ctl->stats.elected++;
        ctl->backoff_ms = GR_CONTROLLER_BACKOFF_MIN_MS;
        ctl->wait_revision = ctl->epoch; /* plan from an image that shows the election */
        gr_log_write(GR_LOG_INFO, "controller: node %d elected, controller epoch %" PRId64, ctl->node_id,
                     ctl->epoch);
    } else {
        ctl->wait_revision = kv ? kv->mod_revision : res->revision; /* until the image shows the winner */
    }
    step(ctl);
}

static void campaign(struct gr_controller *ctl)
{
    const struct gr_image_broker *me = gr_image_broker(ctl->img, ctl->node_id);
    if (!me || me->epoch < 1 || me->fenced) return; /* my registration is not in the image yet */
    struct gr_cluster_controller rec = {.node_id = ctl->node_id, .broker_epoch = me->epoch};
    char *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    if (gr_cluster_controller_encode(&rec, &val, &len, err) != 0) {
        gr_log_write(GR_LOG_ERROR, "controller: node %d: %s", ctl->node_id, err);
        return;
    }
    struct gr_etcd_compare cmp = {
        .key = ctl->ctl_key, .target = GR_ETCD_CREATE, .cmp = GR_ETCD_EQUAL, .number = 0};
    struct gr_etcd_op put = {
        .type = GR_ETCD_OP_PUT, .key = ctl->ctl_key, .value = val, .value_len = len, .lease = ctl->lease_id};
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = ctl->ctl_key};
    struct gr_etcd_txn txn = {&cmp, 1, &put, 1, &get, 1};
    ctl->req = gr_etcd_txn(ctl->etcd, &txn, on_campaign, ctl);
    free(val);
    ctl->stats.campaigns++;
    if (!ctl->req) {
        gr_log_write(GR_LOG_ERROR, "controller: campaign refused: %s", gr_etcd_last_error(ctl->etcd));
        backoff(ctl);
    }
}

static void on_write(void *arg, const struct gr_etcd_result *res)
{
    struct gr_controller *ctl = arg;
    ctl->req = NULL;
    if (res->status != GR_ETCD_OK) { /* outcome unknown: plan again after the back-off */
        ctl->stats.txns_lost++;
        gr_log_write(GR_LOG_WARN, "controller: partition-state txn lost: %s", res->message);
        ctl->plan_count = ctl->plan_next = 0;
        ctl->wait_revision = INT64_MAX; /* the back-off timer re-plans */
        backoff(ctl);
        return;
    }
    if (res->succeeded) {
        ctl->stats.txns_ok++;
        ctl->stats.partitions_written += (uint64_t)ctl->batch_count;
        ctl->plan_next += ctl->batch_count;
        ctl->wait_revision = res->revision;
        ctl->backoff_ms = GR_CONTROLLER_BACKOFF_MIN_MS;
    } else {
        const struct gr_etcd_kv *kv = failure_kv(res);
        ctl->stats.txns_failed++;
        ctl->plan_count = ctl->plan_next = 0;
        if (!kv || kv->create_revision != ctl->epoch) {
            stop_acting(ctl, "the controller key has another epoch or is gone (txn failed)");
            ctl->wait_revision = kv ? kv->mod_revision : 0;
        } else {
            ctl->wait_revision = ctl->plan_revision + 1; /* a change the image has not shown yet, */
            backoff(ctl);                                /* or, if it never shows, the back-off */
        }
    }
    step(ctl);
}

/* Sends the next batch of the plan; false when it could not be built or sent (backing off). */
static bool send_batch(struct gr_controller *ctl)
{
    struct gr_controller_write *w = &ctl->plan[ctl->plan_next];
    int32_t n = gr_controller_batch(w, ctl->plan_count - ctl->plan_next), nt = 0;
    struct gr_etcd_compare cmps[GR_ETCD_TXN_OPS_MAX];
    struct gr_etcd_op puts[GR_CONTROLLER_TXN_PARTITIONS_MAX];
    char *vals[GR_CONTROLLER_TXN_PARTITIONS_MAX] = {0}, err[GR_CLUSTER_ERR_BYTES];
    size_t nc = 0;
    bool ok = true;
    cmps[nc++] =
        (struct gr_etcd_compare){.key = ctl->ctl_key, .target = GR_ETCD_CREATE, .number = ctl->epoch};
    for (int32_t i = 0; i < n && ok; i++) {
        struct gr_uuid id;
        memcpy(&id, w[i].topic_id, 16);
        ok = gr_cluster_key_partition(ctl->lay, id, w[i].partition, ctl->part_keys[i]) > 0;
        w[i].state.controller_epoch = ctl->epoch;
        size_t len = 0;
        ok = ok && gr_cluster_partition_encode(&w[i].state, &vals[i], &len, err) == 0;
        if (!ok) break;
        cmps[nc++] = (struct gr_etcd_compare){
            .key = ctl->part_keys[i], .target = GR_ETCD_MOD, .number = w[i].partition_epoch};
        puts[i] = (struct gr_etcd_op){
            .type = GR_ETCD_OP_PUT, .key = ctl->part_keys[i], .value = vals[i], .value_len = len};
        bool seen = w[i].partition_epoch != 0;
        for (int32_t j = 0; j < i && !seen; j++)
            seen = w[j].partition_epoch == 0 && memcmp(w[j].topic_id, w[i].topic_id, 16) == 0;
        if (seen) continue;
        ok = gr_cluster_key_topic(ctl->lay, w[i].topic, (size_t)w[i].topic_len, ctl->topic_keys[nt]) > 0;
        cmps[nc++] = (struct gr_etcd_compare){
            .key = ctl->topic_keys[nt++], .target = GR_ETCD_MOD, .number = w[i].topic_revision};
    }
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = ctl->ctl_key};
    struct gr_etcd_txn txn = {cmps, nc, puts, (size_t)n, &get, 1};
    if (ok) ctl->req = gr_etcd_txn(ctl->etcd, &txn, on_write, ctl);
    for (int32_t i = 0; i < n; i++)
        free(vals[i]);
    if (!ok || !ctl->req) {
        gr_log_write(GR_LOG_ERROR, "controller: partition-state txn not built: %s",
                     ok ? gr_etcd_last_error(ctl->etcd) : err);
        ctl->plan_count = ctl->plan_next = 0;
        ctl->wait_revision = INT64_MAX; /* the back-off timer re-plans */
        backoff(ctl);
        return false;
    }
    ctl->batch_count = n;
    return true;
}

/* ---- reassignment: topic-record txns (cluster/reassign.h) ---- */

static void unlink_rask(struct gr_controller *ctl, struct gr_controller_reassign_req *r)
{
    for (struct gr_controller_reassign_req **pp = &ctl->rasks; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            ctl->rask_count--;
            break;
        }
    if (ctl->tw_ask == r) ctl->tw_ask = NULL; /* its txn's answer finds no ask to mark */
}

/* Runs the done of every ask whose parts are all answered and whose writes the image shows (all: every
 * ask, at free). */
static void answer_rasks(struct gr_controller *ctl, bool all)
{
    struct gr_controller_reassign_req *r = ctl->rasks;
    while (r) {
        struct gr_controller_reassign_req *next = r->next;
        bool ready = all || (!(ctl->tw_inflight && ctl->tw_ask == r) && ctl->img->revision >= r->revision);
        for (int32_t i = 0; i < r->n && ready && !all; i++)
            ready = r->parts[i].done;
        if (ready) {
            void (*done)(void *) = r->done;
            void *ctx = r->ctx;
            unlink_rask(ctl, r);
            free(r);
            done(ctx);
            next = ctl->rasks;
        }
        r = next;
    }
}

static void part_answer(struct gr_controller_reassign_part *pt, int16_t error, const char *msg)
{
    pt->done = true;
    pt->error = error;
    if (msg != pt->message) snprintf(pt->message, sizeof pt->message, "%s", msg ? msg : "");
}

static void on_topic_write(void *arg, const struct gr_etcd_result *res);

/* Sends one topic-record txn: `rec` (the topic record with the changes applied) and the partition states of
 * the `n` changes at `ch` (partition indexes at `pidx`) that write one, compared with the controller epoch,
 * the record's revision and each written state's partition epoch. False when it could not be built. */
static bool send_topic_write(struct gr_controller *ctl, const struct gr_image_topic *t,
                             const struct gr_cluster_topic *rec, struct gr_reassign_change *ch,
                             const int32_t *pidx, int32_t n)
{
    struct gr_etcd_compare cmps[2 + GR_CONTROLLER_TXN_PARTITIONS_MAX];
    struct gr_etcd_op puts[1 + GR_CONTROLLER_TXN_PARTITIONS_MAX];
    char *vals[1 + GR_CONTROLLER_TXN_PARTITIONS_MAX] = {0}, err[GR_CLUSTER_ERR_BYTES] = "";
    size_t nc = 0, np = 0, len = 0;
    bool ok = gr_cluster_key_topic(ctl->lay, t->name, (size_t)t->name_len, ctl->tw_topic_key) > 0 &&
              gr_cluster_topic_encode(rec, &vals[0], &len, err) == 0;
    cmps[nc++] =
        (struct gr_etcd_compare){.key = ctl->ctl_key, .target = GR_ETCD_CREATE, .number = ctl->epoch};
    cmps[nc++] = (struct gr_etcd_compare){
        .key = ctl->tw_topic_key, .target = GR_ETCD_MOD, .number = t->record_revision};
    if (ok)
        puts[np++] = (struct gr_etcd_op){
            .type = GR_ETCD_OP_PUT, .key = ctl->tw_topic_key, .value = vals[0], .value_len = len};
    for (int32_t i = 0; i < n && ok; i++) {
        if (!ch[i].write_state) continue;
        struct gr_uuid id;
        memcpy(&id, t->id, 16);
        ok = gr_cluster_key_partition(ctl->lay, id, pidx[i], ctl->part_keys[i]) > 0;
        ch[i].state.controller_epoch = ctl->epoch;
        ok = ok && gr_cluster_partition_encode(&ch[i].state, &vals[np], &len, err) == 0;
        if (!ok) break;
        cmps[nc++] = (struct gr_etcd_compare){
            .key = ctl->part_keys[i], .target = GR_ETCD_MOD, .number = t->parts[pidx[i]].partition_epoch};
        puts[np] = (struct gr_etcd_op){
            .type = GR_ETCD_OP_PUT, .key = ctl->part_keys[i], .value = vals[np], .value_len = len};
        np++;
    }
    struct gr_etcd_op get = {.type = GR_ETCD_OP_RANGE, .key = ctl->ctl_key};
    struct gr_etcd_txn txn = {cmps, nc, puts, np, &get, 1};
    if (ok) ctl->req = gr_etcd_txn(ctl->etcd, &txn, on_topic_write, ctl);
    for (int32_t i = 0; i <= n; i++)
        free(vals[i]);
    if (!ok || !ctl->req) {
        gr_log_write(GR_LOG_ERROR, "controller: topic-record txn for %.*s not built: %s", (int)t->name_len,
                     t->name, ok ? gr_etcd_last_error(ctl->etcd) : err);
        ctl->wait_revision = INT64_MAX; /* the back-off timer tries again */
        backoff(ctl);
        return false;
    }
    ctl->tw_inflight = true;
    return true;
}

/* The oldest ask's next topic: judges its unanswered parts of that topic on the image (errors and no-ops
 * answered at once) and sends the txn of those that change something. True when a txn was sent (or could
 * not be built: backing off); false when no ask has anything left to write. */
static bool reassign_ask_step(struct gr_controller *ctl)
{
    for (struct gr_controller_reassign_req *r = ctl->rasks; r; r = r->next) {
        for (int32_t i = 0; i < r->n; i++) {
            struct gr_controller_reassign_part *first = &r->parts[i];
            if (first->done) continue;
            const struct gr_image_topic *t = gr_image_topic_find_id(ctl->img, first->topic_id);
            struct gr_cluster_topic rec;
            if (!t || gr_reassign_record(t, &rec) != 0) {
                part_answer(first, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                            t ? "The topic's record is not fully known yet." : "Unable to find the topic.");
                continue;
            }
            struct gr_reassign_change ch[GR_CONTROLLER_TXN_PARTITIONS_MAX];
            int32_t pidx[GR_CONTROLLER_TXN_PARTITIONS_MAX], n = 0;
            bool unclean = gr_controller_unclean_enabled(t, ctl->unclean_default);
            for (int32_t j = i; j < r->n && n < GR_CONTROLLER_TXN_PARTITIONS_MAX; j++) {
                struct gr_controller_reassign_part *pt = &r->parts[j];
                if (pt->done || memcmp(pt->topic_id, t->id, 16)) continue;
                bool changed = false;
                int16_t e = gr_reassign_ask(ctl->img, t, pt->partition, pt->target, pt->target_count,
                                            r->allow_rf_change, unclean, &ch[n], &changed, pt->message);
                if (e || !changed) {
                    part_answer(pt, e, pt->message);
                    continue;
                }
                bool dup = false; /* the same partition twice in one txn: the later waits for the next */
                for (int32_t k = 0; k < n && !dup; k++)
                    dup = r->parts[ctl->tw_idx[k]].partition == pt->partition;
                if (dup) continue;
                rec.partitions[pt->partition] = ch[n].assign;
                pidx[n] = pt->partition;
                ctl->tw_idx[n++] = j;
            }
            if (n == 0) {
                gr_cluster_topic_free(&rec);
                continue;
            }
            ctl->tw_ask = r;
            ctl->tw_n = n;
            send_topic_write(ctl, t, &rec, ch, pidx, n);
            gr_cluster_topic_free(&rec);
            return true;
        }
    }
    return false;
}

/* The first topic with reassignments ready to complete: their txn. True when one was sent (or backing off).
 */
static bool reassign_complete_step(struct gr_controller *ctl)
{
    for (int32_t ti = 0; ti < gr_image_topic_count(ctl->img); ti++) {
        const struct gr_image_topic *t = gr_image_topic_at(ctl->img, ti);
        struct gr_reassign_change ch[GR_CONTROLLER_TXN_PARTITIONS_MAX];
        int32_t pidx[GR_CONTROLLER_TXN_PARTITIONS_MAX], n = 0;
        for (int32_t p = 0; p < t->partition_count && n < GR_CONTROLLER_TXN_PARTITIONS_MAX; p++)
            if (gr_image_reassigning(&t->parts[p]) && gr_reassign_complete(ctl->img, t, p, &ch[n]))
                pidx[n++] = p;
        if (n == 0) continue;
        struct gr_cluster_topic rec;
        if (gr_reassign_record(t, &rec) != 0) continue;
        for (int32_t i = 0; i < n; i++)
            rec.partitions[pidx[i]] = ch[i].assign;
        ctl->tw_ask = NULL;
        ctl->tw_n = n;
        send_topic_write(ctl, t, &rec, ch, pidx, n);
        gr_cluster_topic_free(&rec);
        return true;
    }
    return false;
}

static void on_topic_write(void *arg, const struct gr_etcd_result *res)
{
    struct gr_controller *ctl = arg;
    ctl->req = NULL;
    ctl->tw_inflight = false;
    struct gr_controller_reassign_req *r = ctl->tw_ask;
    ctl->tw_ask = NULL;
    if (res->status != GR_ETCD_OK) { /* outcome unknown: judged again after the back-off */
        ctl->stats.txns_lost++;
        gr_log_write(GR_LOG_WARN, "controller: topic-record txn lost: %s", res->message);
        ctl->wait_revision = INT64_MAX;
        backoff(ctl);
        return;
    }
    if (res->succeeded) {
        ctl->stats.reassign_txns_ok++;
        if (r) {
            for (int32_t i = 0; i < ctl->tw_n; i++)
                part_answer(&r->parts[ctl->tw_idx[i]], GR_ERR_NONE, "");
            r->revision = res->revision;
        } else {
            ctl->stats.reassignments_completed += (uint64_t)ctl->tw_n;
            gr_log_write(GR_LOG_INFO, "controller: %d partition reassignment(s) completed", (int)ctl->tw_n);
        }
        ctl->wait_revision = res->revision;
        ctl->backoff_ms = GR_CONTROLLER_BACKOFF_MIN_MS;
    } else {
        const struct gr_etcd_kv *kv = failure_kv(res);
        ctl->stats.txns_failed++;
        if (!kv || kv->create_revision != ctl->epoch) {
            stop_acting(ctl, "the controller key has another epoch or is gone (txn failed)");
            ctl->wait_revision = kv ? kv->mod_revision : 0;
        } else {
            ctl->wait_revision = ctl->img->revision + 1; /* judged again on a newer image, */
            backoff(ctl);                                /* or after the back-off */
        }
    }
    step(ctl);
}

struct gr_controller_reassign_req *gr_controller_reassign(struct gr_controller *ctl,
                                                          struct gr_controller_reassign_part *parts,
                                                          int32_t n, bool allow_rf_change,
                                                          void (*done)(void *ctx), void *ctx)
{
    if (!ctl->epoch || n < 1 || n > GR_IMAGE_PARTITIONS_MAX ||
        ctl->rask_count >= GR_CONTROLLER_REASSIGN_ASKS_MAX)
        return NULL;
    struct gr_controller_reassign_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->parts = parts;
    r->n = n;
    r->allow_rf_change = allow_rf_change;
    r->done = done;
    r->ctx = ctx;
    struct gr_controller_reassign_req **pp = &ctl->rasks;
    while (*pp)
        pp = &(*pp)->next;
    *pp = r;
    ctl->rask_count++;
    if (!ev_is_active(&ctl->kick)) { /* judged on the next loop turn, never inside this call */
        ev_timer_set(&ctl->kick, 0.0, 0.0);
        ev_timer_start(ctl->loop, &ctl->kick);
    }
    return r;
}

void gr_controller_reassign_cancel(struct gr_controller *ctl, struct gr_controller_reassign_req *r)
{
    unlink_rask(ctl, r);
    free(r);
}

static void step(struct gr_controller *ctl)
{
    struct gr_image *img = ctl->img;
    if (ctl->req || ctl->lease_id == 0) return;
    if (ctl->epoch && img->revision >= ctl->epoch && img->controller_epoch != ctl->epoch)
        stop_acting(ctl, "the image shows another controller or none");
    if (!ctl->epoch) {
        if (!ev_is_active(&ctl->timer) && img->revision >= ctl->wait_revision && img->controller_id < 0)
            campaign(ctl);
        return;
    }
    if (ctl->plan_next < ctl->plan_count) {
        send_batch(ctl);
        return;
    }
    if (img->revision < ctl->wait_revision) return;
    ev_timer_stop(ctl->loop, &ctl->timer); /* the image moved: the back-off's safety net is not needed */
    if (ctl->rasks) answer_rasks(ctl, false);
    if (ctl->req) return; /* an answered ask's done may have sent something */
    /* elections and ISR changes first: a reassignment's txn that keeps failing (or cannot be built) never
       holds back a leader's election; reassignments go when the plan has nothing to write */
    bool more = false;
    struct gr_controller_plan_opts opts = {.unclean_default = ctl->unclean_default,
                                           .unclean_pass = ctl->unclean_due,
                                           .preferred_pass = ctl->rebalance_due,
                                           .asked = ctl->asks ? asked_type : NULL,
                                           .asked_ctx = ctl};
    ctl->unclean_due = false;
    ctl->rebalance_due = false;
    ctl->plan_count = gr_controller_plan_with(img, &opts, ctl->plan, GR_CONTROLLER_PLAN_MAX, &more);
    ctl->plan_next = 0;
    ctl->plan_revision = img->revision;
    if (ctl->plan_count) {
        send_batch(ctl);
        return;
    }
    if (reassign_ask_step(ctl) || reassign_complete_step(ctl)) {
        if (ctl->rasks) answer_rasks(ctl, false); /* parts answered without a txn */
        return;
    }
    if (ctl->rasks) answer_rasks(ctl, false);
}

/* Kafka's periodic unclean election check (QuorumController's maybeTriggerUncleanLeaderElection...): the next
 * plan also elects outside the ISR where the topic allows it. */
static void on_unclean_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_controller *ctl = t->data;
    if (!ctl->epoch) return; /* not the controller: nothing to check */
    ctl->unclean_due = true;
    step(ctl);
}

/* Kafka's periodic leader balance (QuorumController.maybeBalancePartitionLeaders): the next plan also
 * moves leaderships back to preferred replicas. */
static void on_rebalance_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_controller *ctl = t->data;
    if (!ctl->epoch) return;
    ctl->rebalance_due = true;
    step(ctl);
}

static void on_image(void *arg, struct gr_image *img)
{
    (void)img;
    struct gr_controller *ctl = arg;
    if (ctl->asks) answer_asks(ctl, false);
    if (ctl->rasks) answer_rasks(ctl, false);
    step(ctl);
}

struct gr_controller_elect_req *gr_controller_elect(struct gr_controller *ctl, int type,
                                                    const struct gr_controller_elect_part *parts, int32_t n,
                                                    void (*done)(void *ctx), void *ctx)
{
    if (!ctl->epoch || n < 1 || n > GR_IMAGE_PARTITIONS_MAX || ctl->ask_count >= GR_CONTROLLER_ELECT_ASKS_MAX)
        return NULL;
    struct gr_controller_elect_req *r = calloc(1, sizeof *r);
    if (r) r->parts = malloc(sizeof *r->parts * (size_t)n);
    if (!r || !r->parts) {
        free(r);
        return NULL;
    }
    memcpy(r->parts, parts, sizeof *r->parts * (size_t)n);
    qsort(r->parts, (size_t)n, sizeof *r->parts, part_cmp);
    r->type = type;
    r->n = n;
    r->done = done;
    r->ctx = ctx;
    r->next = ctl->asks;
    ctl->asks = r;
    ctl->ask_count++;
    step(ctl);
    return r;
}

void gr_controller_elect_cancel(struct gr_controller *ctl, struct gr_controller_elect_req *r)
{
    unlink_ask(ctl, r);
    free(r->parts);
    free(r);
}

void gr_controller_set_rebalance(struct gr_controller *ctl, bool enable, int64_t interval_s)
{
    if (interval_s < 1) interval_s = 300;
    if (ev_is_active(&ctl->rebalance_timer)) {
        ev_ref(ctl->loop);
        ev_timer_stop(ctl->loop, &ctl->rebalance_timer);
    }
    if (!enable) return;
    ev_timer_set(&ctl->rebalance_timer, (double)interval_s, (double)interval_s);
    ev_timer_start(ctl->loop, &ctl->rebalance_timer);
    ev_unref(ctl->loop); /* a periodic check keeps no loop alive */
}

struct gr_controller *gr_controller_new(struct ev_loop *loop, struct gr_etcd *etcd,
                                        const struct gr_cluster_layout *lay, struct gr_image *img,
                                        int32_t node_id)
{
    struct gr_controller *ctl = calloc(1, sizeof *ctl);
    if (!ctl) return NULL;
    ctl->plan = calloc(GR_CONTROLLER_PLAN_MAX, sizeof *ctl->plan);
    if (!ctl->plan || gr_cluster_key_controller(lay, ctl->ctl_key) < 0 ||
        gr_image_observe(img, on_image, ctl)) {
        free(ctl->plan);
        free(ctl);
        return NULL;
    }
    ctl->loop = loop;
    ctl->etcd = etcd;
    ctl->lay = lay;
    ctl->img = img;
    ctl->node_id = node_id;
    ctl->backoff_ms = GR_CONTROLLER_BACKOFF_MIN_MS;
    ev_timer_init(&ctl->timer, on_timer, 0.0, 0.0);
    ctl->timer.data = ctl;
    ev_timer_init(&ctl->kick, on_kick, 0.0, 0.0);
    ctl->kick.data = ctl;
    ev_timer_init(&ctl->unclean_timer, on_unclean_timer, 0.0, 0.0);
    ctl->unclean_timer.data = ctl;
    gr_controller_set_unclean(ctl, false, GR_CONTROLLER_UNCLEAN_INTERVAL_MS_DEFAULT);
    ev_timer_init(&ctl->rebalance_timer, on_rebalance_timer, 0.0, 0.0);
    ctl->rebalance_timer.data = ctl;
    gr_controller_set_rebalance(ctl, true, 0);
    return ctl;
}

void gr_controller_set_lease(struct gr_controller *ctl, int64_t lease_id)
{
    if (lease_id == ctl->lease_id) return;
    if (ctl->shutting_down && lease_id == 0)
        stop_acting_at(ctl, "the broker is shutting down (its lease revoked)", GR_LOG_INFO);
    else
        stop_acting(ctl, "its lease changed or was lost");
    if (ctl->req) gr_etcd_cancel(ctl->req);
    ctl->req = NULL;
    ev_timer_stop(ctl->loop, &ctl->timer);
    ctl->backoff_ms = GR_CONTROLLER_BACKOFF_MIN_MS;
    ctl->wait_revision = 0;
    ctl->lease_id = lease_id;
    step(ctl);
}

void gr_controller_shutting_down(struct gr_controller *ctl)
{
    ctl->shutting_down = true;
}

void gr_controller_set_unclean(struct gr_controller *ctl, bool enable_default, int64_t interval_ms)
{
    ctl->unclean_default = enable_default;
    if (interval_ms < 1) interval_ms = GR_CONTROLLER_UNCLEAN_INTERVAL_MS_DEFAULT;
    if (ev_is_active(&ctl->unclean_timer)) {
        ev_ref(ctl->loop);
        ev_timer_stop(ctl->loop, &ctl->unclean_timer);
    }
    ev_timer_set(&ctl->unclean_timer, (double)interval_ms / 1000.0, (double)interval_ms / 1000.0);
    ev_timer_start(ctl->loop, &ctl->unclean_timer);
    ev_unref(ctl->loop); /* a periodic check keeps no loop alive */
}

int64_t gr_controller_epoch(const struct gr_controller *ctl)
{
    return ctl->epoch;
}

const struct gr_controller_stats *gr_controller_stats(const struct gr_controller *ctl)
{
    return &ctl->stats;
}

void gr_controller_free(struct gr_controller *ctl)
{
    if (!ctl) return;
    gr_image_unobserve(ctl->img, on_image, ctl);
    answer_asks(ctl, true);
    answer_rasks(ctl, true);
    gr_controller_set_rebalance(ctl, false, 0);
    if (ctl->req) gr_etcd_cancel(ctl->req);
    ev_timer_stop(ctl->loop, &ctl->timer);
    ev_timer_stop(ctl->loop, &ctl->kick);
    if (ev_is_active(&ctl->unclean_timer)) {
        ev_ref(ctl->loop);
        ev_timer_stop(ctl->loop, &ctl->unclean_timer);
    }
    free(ctl->plan);
    free(ctl);
}
