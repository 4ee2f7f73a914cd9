/*
 * roles.c: the role binding (cluster/roles.h). A table keyed by partition object (open addressing, linear
 * probing, deletion by backward shift; at most GR_IMAGE_PARTITIONS_MAX entries) keeps, per local partition,
 * what was last applied: role, leader, leader epoch, partition epoch, min.insync.replicas, whether it is
 * being fetched and from whom. A pass (each image change) walks the image's topics linked to a store topic,
 * applies what changed to each held partition and marks it seen with the pass's generation; entries not seen
 * are swept (fetch stopped, ISR change cancelled, entry dropped). ISR outcomes find their partition again
 * through the image (topic id -> local topic -> log -> partition) and the table. Read next: cluster/roles.h,
 * partition/replica.c.
 */
#include "cluster/roles.h"

#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/fetcher.h"
#include "cluster/image.h"
#include "common/log.h"
#include "common/time.h"
#include "partition/partition.h"
#include "storage/store.h"

/* Kafka's replica.lag.time.max.ms default. */
#define ROLES_LAG_MS_DEFAULT 30000

enum rec_role { REC_NONE = 0, REC_LEADER, REC_FOLLOWER };

/* What was applied to one partition. */
struct rec {
    struct gr_partition *part; /* the key; NULL: free slot */
    uint8_t topic_id[16];
    int32_t partition;
    enum rec_role role;
    int32_t leader, leader_epoch;
    int64_t partition_epoch;
    int32_t min_isr;
    /* the ISR change handed to the writer, until its outcome or the image shows it (the metrics' marks) */
    bool isr_pending, isr_expand;      /* one is in flight; it adds a member (else removes) */
    int32_t isr_epoch, isr_count;      /* its leader epoch and ISR size */
    int64_t isr_base;                  /* the partition epoch it is based on */
    uint64_t isr_sig;                  /* isr_signature of its ISR */
    bool fetching;                     /* fetcher_add succeeded and no remove since */
    int32_t fetch_leader, fetch_epoch; /* what it was added with */
    uint64_t gen;                      /* the last pass that saw it */
};

struct gr_roles {
    struct gr_roles_config cfg;
    struct gr_image *img;
    struct rec *slots; /* cap entries, power of two (0: none yet) */
    uint32_t cap, count;
    uint64_t gen;
    bool started, timer_on;
    ev_timer shrink;
    struct gr_roles_stats st;
};

static int64_t now_ms(const struct gr_roles *r)
{
    return r->cfg.now_ms ? r->cfg.now_ms(r->cfg.clock_ctx) : gr_time_mono_ms();
}

/* ---- the table ---- */

static uint32_t slot_of(const struct gr_roles *r, const struct gr_partition *part)
{
    uint64_t h = (uint64_t)(uintptr_t)part * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & (r->cap - 1);
}

static struct rec *rec_find(struct gr_roles *r, const struct gr_partition *part)
{
    if (!r->cap || !part) return NULL;
    for (uint32_t i = slot_of(r, part);; i = (i + 1) & (r->cap - 1)) {
        if (r->slots[i].part == part) return &r->slots[i];
        if (!r->slots[i].part) return NULL;
    }
}

static void rec_place(struct gr_roles *r, const struct rec *e)
{
    uint32_t i = slot_of(r, e->part);
    while (r->slots[i].part)
        i = (i + 1) & (r->cap - 1);
    r->slots[i] = *e;
}

/* Doubles the table (keeps load <= 1/2). Returns 0 or -ENOMEM / -ENOSPC. */
static int rec_grow(struct gr_roles *r)
{
    if (r->count >= GR_IMAGE_PARTITIONS_MAX) return -ENOSPC;
    uint32_t ncap = r->cap ? r->cap * 2 : 64;
    struct rec *old = r->slots, *fresh = calloc(ncap, sizeof *fresh);
    if (!fresh) return -ENOMEM;
    uint32_t ocap = r->cap;
    r->slots = fresh;
    r->cap = ncap;
    for (uint32_t i = 0; i < ocap; i++)
        if (old[i].part) rec_place(r, &old[i]);
    free(old);
    return 0;
}

/* Returns the entry of `part`, made (role NONE) when absent; NULL when out of memory or room. */
static struct rec *rec_get(struct gr_roles *r, struct gr_partition *part)
{
    struct rec *e = rec_find(r, part);
    if (e) return e;
    if ((r->count + 1) * 2 > r->cap && rec_grow(r) < 0) return NULL;
    rec_place(r, &(struct rec){.part = part, .leader = -1, .leader_epoch = -1, .partition_epoch = -1});
    r->count++;
    return rec_find(r, part);
}

/* Removes entry `e` (backward shift: the probe chains after it stay reachable). */
static void rec_remove(struct gr_roles *r, struct rec *e)
{
    uint32_t mask = r->cap - 1, i = (uint32_t)(e - r->slots), j = i;
    r->slots[i].part = NULL;
    for (;;) {
        j = (j + 1) & mask;
        if (!r->slots[j].part) break;
        uint32_t home = slot_of(r, r->slots[j].part);
        /* the entry at j may move to the hole at i when its home is not in (i, j] cyclically */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            r->slots[i] = r->slots[j];
            r->slots[j].part = NULL;
            i = j;
        }
    }
    r->count--;
}

/* ---- fetch and ISR-change bookkeeping of one entry ---- */

static void stop_fetch(struct gr_roles *r, struct rec *e)
{
    if (!e->fetching) return;
    if (r->cfg.ops.fetcher_remove) r->cfg.ops.fetcher_remove(r->cfg.ops.fetcher_ctx, e->part);
    e->fetching = false;
}

/* An order-independent signature of the node set nodes[0..n) (each id mixed, then summed). */
static uint64_t isr_signature(const int32_t *nodes, int n)
{
    uint64_t sig = 0;
    for (int i = 0; i < n; i++) {
        uint64_t x = (uint64_t)(uint32_t)nodes[i] * 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
        sig += x * 0xbf58476d1ce4e5b9ull;
    }
    return sig;
}

/* The ISR change in flight of `e` was written by this leader (ReplicaManager's IsrShrinksPerSec /
   IsrExpandsPerSec mark): counted once, whichever of the writer's answer and the image's new state comes
   first. */
static void isr_written(struct gr_roles *r, struct rec *e)
{
    if (!e->isr_pending) return;
    e->isr_pending = false;
    if (e->isr_expand)
        r->st.isr_expands++;
    else
        r->st.isr_shrinks++;
}

static void cancel_isr(struct gr_roles *r, struct rec *e)
{
    if (e->role == REC_LEADER && r->cfg.ops.isr_cancel)
        r->cfg.ops.isr_cancel(r->cfg.ops.isr_ctx, e->topic_id, e->partition);
}

/* The entry stops mattering here: no fetch, no pending ISR change, forgotten. */
static void rec_drop(struct gr_roles *r, struct rec *e)
{
    stop_fetch(r, e);
    cancel_isr(r, e);
    rec_remove(r, e);
}

/* ---- a pass ---- */

/* The topic's min.insync.replicas: its own config when a valid integer >= 1, else the broker's. */
static int32_t topic_min_isr(const struct gr_roles *r, const struct gr_image_topic *t)
{
    return gr_image_topic_min_isr(t, r->cfg.min_insync_replicas);
}

static bool holds(const int32_t *nodes, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (nodes[i] == id) return true;
    return false;
}

/* Whether image state `ip` is older than what `e` applied (ReplicaManager.applyDelta skips a stale epoch;
   the image may still show the partition epoch before this broker's own ISR write). */
static bool state_older(const struct rec *e, const struct gr_image_partition *ip)
{
    if (e->role == REC_NONE) return false;
    if (ip->leader_epoch != e->leader_epoch) return ip->leader_epoch < e->leader_epoch;
    return ip->partition_epoch < e->partition_epoch;
}

static bool state_same(const struct rec *e, enum rec_role role, const struct gr_image_partition *ip)
{
    return e->role == role && e->leader == ip->leader && e->leader_epoch == ip->leader_epoch &&
           e->partition_epoch == ip->partition_epoch;
}

/* Writes "[a,b,...]" of `n` node ids into buf (cut short when it does not fit). */
static const char *nodes_text(char *buf, size_t cap, const int32_t *nodes, int n)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? "," : "", (int)nodes[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

/* The INFO line of an applied role (Partition.makeLeader's "Leader ... starts at leader epoch ..." and
   makeFollower's "Follower ... starts at leader epoch ..."): one per partition per state change. */
static void role_note(const struct rec *e, const struct gr_image_topic *t, int32_t p,
                      const struct gr_image_partition *ip, int32_t was_leader, int32_t was_epoch)
{
    char isr[96], role[48];
    struct gr_log *log = gr_partition_log(e->part);
    if (e->role == REC_LEADER)
        snprintf(role, sizeof role, "leader");
    else
        snprintf(role, sizeof role, "follower of broker %d", (int)ip->leader);
    GR_INFO("%.*s-%d: %s at leader epoch %d, partition epoch %lld, log end offset %lld, high watermark %lld, "
            "ISR %s (previous leader %d at leader epoch %d)",
            (int)t->name_len, t->name, (int)p, role, (int)ip->leader_epoch, (long long)ip->partition_epoch,
            (long long)gr_log_end_offset(log), (long long)gr_partition_visible_offset(e->part),
            nodes_text(isr, sizeof isr, gr_image_isr(ip), ip->isr_count), (int)was_leader, (int)was_epoch);
}

/* Partition.makeLeader / makeFollower through gr_partition_set_role. Returns 0 or -errno (logged). */
static int apply_role(struct gr_roles *r, struct rec *e, enum rec_role role, const struct gr_image_topic *t,
                      int32_t p, const struct gr_image_partition *ip, int32_t min_isr)
{
    if (e->isr_pending && role == REC_LEADER && ip->leader_epoch == e->isr_epoch &&
        ip->partition_epoch > e->isr_base && ip->isr_count == e->isr_count &&
        isr_signature(gr_image_isr(ip), ip->isr_count) == e->isr_sig)
        isr_written(r, e); /* the image shows this leader's write before the writer's answer came */
    e->isr_pending = false;
    cancel_isr(r, e); /* a change in flight is the old state's: the new one drops it */
    struct gr_partition_role_change c = {.role =
                                             role == REC_LEADER ? GR_PARTITION_LEADER : GR_PARTITION_FOLLOWER,
                                         .leader_id = ip->leader,
                                         .leader_epoch = ip->leader_epoch,
                                         .partition_epoch = (int32_t)ip->partition_epoch,
                                         .replicas = gr_image_replicas(ip),
                                         .replica_count = ip->replica_count,
                                         .isr = gr_image_isr(ip),
                                         .isr_count = ip->isr_count,
                                         .min_insync_replicas = min_isr,
                                         .now_ms = now_ms(r)};
    r->st.set_roles++;
    int rc = gr_partition_set_role(e->part, &c);
    if (rc < 0) {
        r->st.role_errors++;
        GR_WARN_RATELIMITED("%.*s-%d: cannot become %s at leader epoch %d, partition epoch %lld: %s",
                            (int)t->name_len, t->name, (int)p, role == REC_LEADER ? "leader" : "follower",
                            (int)ip->leader_epoch, (long long)ip->partition_epoch, strerror(-rc));
        return rc;
    }
    int32_t was_leader = e->role == REC_NONE ? -1 : e->leader, was_epoch = e->leader_epoch;
    bool moved = e->role != role || e->leader != ip->leader || e->leader_epoch != ip->leader_epoch;
    e->role = role;
    e->leader = ip->leader;
    e->leader_epoch = ip->leader_epoch;
    e->partition_epoch = ip->partition_epoch;
    e->min_isr = min_isr;
    if (moved) role_note(e, t, p, ip, was_leader, was_epoch);
    return 0;
}

/* A follower fetches from its leader (ReplicaManager.makeFollowers: only with a live leader). */
static void follow_fetch(struct gr_roles *r, struct rec *e, const struct gr_image_topic *t, int32_t p)
{
    if (e->leader < 0) {
        stop_fetch(r, e);
        return;
    }
    if (e->fetching && e->fetch_leader == e->leader && e->fetch_epoch == e->leader_epoch) return;
    if (!r->cfg.ops.fetcher_add) return;
    int rc = r->cfg.ops.fetcher_add(r->cfg.ops.fetcher_ctx, e->part, t->name, t->id, p, e->leader,
                                    e->leader_epoch);
    if (rc < 0) {
        GR_WARN_RATELIMITED("%.*s-%d: cannot fetch from leader %d: %s", (int)t->name_len, t->name, (int)p,
                            (int)e->leader, strerror(-rc));
        return; /* tried again next pass */
    }
    e->fetching = true;
    e->fetch_leader = e->leader;
    e->fetch_epoch = e->leader_epoch;
    r->st.fetcher_adds++;
}

/* Applies the image's state of partition `p` of `t` to its local log `log` (ReplicaManager.applyDelta for
   one partition). */
static void apply_partition(struct gr_roles *r, const struct gr_image_topic *t, int32_t p, struct gr_log *log)
{
    const struct gr_image_partition *ip = gr_image_partition(t, p);
    struct gr_partition *part = gr_partition_get(r->cfg.parts, log);
    struct rec *e = part ? rec_get(r, part) : NULL;
    if (!e) {
        GR_WARN_RATELIMITED("%.*s-%d: no memory for its role", (int)t->name_len, t->name, (int)p);
        return;
    }
    e->gen = r->gen;
    memcpy(e->topic_id, t->id, 16);
    e->partition = p;
    if (!ip || ip->replica_count == 0 || ip->partition_epoch == 0) return; /* no state written yet */
    if (ip->partition_epoch > INT32_MAX || ip->leader_epoch < 0) {
        GR_WARN_RATELIMITED("%.*s-%d: state out of range (leader epoch %d, partition epoch %lld): ignored",
                            (int)t->name_len, t->name, (int)p, (int)ip->leader_epoch,
                            (long long)ip->partition_epoch);
        return;
    }
    int32_t self = r->img->node_id;
    enum rec_role role = ip->leader == self                                      ? REC_LEADER
                         : holds(gr_image_replicas(ip), ip->replica_count, self) ? REC_FOLLOWER
                                                                                 : REC_NONE;
    if (role == REC_NONE) { /* a stray: the replica manager deletes it */
        stop_fetch(r, e);
        cancel_isr(r, e);
        e->isr_pending = false;
        e->role = REC_NONE;
        return;
    }
    int32_t min_isr = topic_min_isr(r, t);
    if (!state_older(e, ip) && !state_same(e, role, ip)) {
        if (apply_role(r, e, role, t, p, ip, min_isr) < 0) return;
    } else if (e->role == role && e->min_isr != min_isr) {
        if (gr_partition_set_min_insync_replicas(e->part, min_isr) == 0) e->min_isr = min_isr;
    }
    if (e->role == REC_LEADER)
        stop_fetch(r, e);
    else if (e->role == REC_FOLLOWER)
        follow_fetch(r, e, t, p);
}

/* Entries no pass saw this time (topic gone from the image, unlinked, partition not held) are dropped. */
static void sweep(struct gr_roles *r)
{
    for (uint32_t i = 0; i < r->cap;) {
        struct rec *e = &r->slots[i];
        if (e->part && e->gen != r->gen)
            rec_drop(r, e); /* a later entry may shift into slot i: look at it again */
        else
            i++;
    }
}

static void count_roles(struct gr_roles *r)
{
    r->st.leaders = r->st.followers = 0;
    for (uint32_t i = 0; i < r->cap; i++) {
        if (!r->slots[i].part) continue;
        r->st.leaders += r->slots[i].role == REC_LEADER;
        r->st.followers += r->slots[i].role == REC_FOLLOWER;
    }
    r->st.tracked = (int32_t)r->count;
}

static void pass(struct gr_roles *r)
{
    struct gr_image *img = r->img;
    if (!r->started || img->loading || img->self_fenced) return;
    r->gen++;
    r->st.passes++;
    for (int32_t i = 0; i < gr_image_topic_count(img); i++) {
        const struct gr_image_topic *t = gr_image_topic_at(img, i);
        if (!t->local) continue;
        int32_t n = gr_topic_partition_count(t->local);
        for (int32_t p = 0; p < t->partition_count && p < n; p++) {
            struct gr_log *log = gr_topic_log(t->local, p);
            if (log) apply_partition(r, t, p, log);
        }
    }
    sweep(r);
    count_roles(r);
}

static void on_image(void *ctx, struct gr_image *img)
{
    (void)img;
    pass(ctx);
}

void gr_roles_on_log(struct gr_roles *r, struct gr_topic *t, int32_t partition, struct gr_log *log, bool made)
{
    if (!r || !log) return;
    if (!made) {
        struct rec *e = rec_find(r, gr_log_user(log)); /* the partition, if one was made (partition.h) */
        if (e) rec_drop(r, e);
        count_roles(r);
        return;
    }
    struct gr_image_topic *it = gr_image_topic_find_id(r->img, gr_topic_id(t));
    if (!r->started || r->img->loading || r->img->self_fenced || !it || it->local != t) return;
    apply_partition(r, it, partition, log);
    count_roles(r);
}

/* ---- the partitions' hooks ---- */

/* The registration of `broker_id` in the image: its broker epoch, or -1 when unknown or fenced. */
static int64_t hook_broker_epoch(void *ctx, int32_t broker_id, bool *shutting_down)
{
    struct gr_roles *r = ctx;
    const struct gr_image_broker *br = gr_image_broker(r->img, broker_id);
    if (!br || br->fenced) return -1;
    *shutting_down = br->shutting_down;
    return br->epoch;
}

static int64_t hook_now(void *ctx)
{
    return now_ms(ctx);
}

/* The partition of (topic id, partition) that the table holds, NULL when none. */
static struct rec *rec_of(struct gr_roles *r, const uint8_t topic_id[16], int32_t p)
{
    struct gr_image_topic *it = gr_image_topic_find_id(r->img, topic_id);
    if (!it || !it->local || p < 0 || p >= gr_topic_partition_count(it->local)) return NULL;
    struct gr_log *log = gr_topic_log(it->local, p);
    struct rec *e = log ? rec_find(r, gr_log_user(log)) : NULL; /* no partition made for a lookup */
    return e && e->partition == p && memcmp(e->topic_id, topic_id, 16) == 0 ? e : NULL;
}

/* The writer's outcome (Partition.handleAlterPartitionUpdate / handleAlterPartitionError). */
static void isr_done(void *ctx, const struct gr_isr_change *chg, enum gr_isr_outcome outcome, int64_t new_pe)
{
    struct gr_roles *r = ctx;
    struct rec *e = rec_of(r, chg->topic_id, chg->partition);
    if (!e || e->role != REC_LEADER) return; /* no longer led here: nothing to tell */
    if (outcome == GR_ISR_OK) {
        if (new_pe < 1 || new_pe > INT32_MAX) return; /* out of the partition's range: the image will tell */
        isr_written(r, e);
        int rc =
            gr_partition_isr_committed(e->part, chg->leader_epoch, (int32_t)new_pe, chg->isr, chg->isr_count);
        if (rc == 0 && chg->leader_epoch == e->leader_epoch && new_pe > e->partition_epoch)
            e->partition_epoch = new_pe; /* the image showing this state later is no change */
        return;
    }
    e->isr_pending = false; /* not written by this leader */
    if (outcome == GR_ISR_INELIGIBLE) {
        gr_partition_isr_failed(e->part, (int32_t)chg->partition_epoch);
        return;
    }
    /* STALE (INVALID_UPDATE_VERSION), FENCED (FENCED_LEADER_EPOCH), STALE_BROKER, UNKNOWN: the change stays
       in flight until the image's new state reaches set_role, as Kafka waits for the metadata update */
    GR_LOG_RATELIMITED(GR_LOG_INFO,
                       "partition %d: ISR change at partition epoch %lld not made (%d): waiting "
                       "for the new state",
                       (int)chg->partition, (long long)chg->partition_epoch, (int)outcome);
}

/* Partition.submitAlterPartition: the change goes to the ISR writer; a refusal at once reverts it. */
static void hook_propose(void *ctx, struct gr_partition *part, const struct gr_partition_isr_change *c)
{
    struct gr_roles *r = ctx;
    struct rec *e = rec_find(r, part);
    int rc = -ENOENT;
    char from[96] = "?";
    if (e && e->role == REC_LEADER && r->cfg.ops.isr_propose && c->isr_count >= 1 &&
        c->isr_count <= GR_CLUSTER_REPLICAS_MAX) {
        struct gr_isr_change chg = {.partition = e->partition,
                                    .leader_epoch = c->leader_epoch,
                                    .partition_epoch = c->partition_epoch,
                                    .isr_count = c->isr_count};
        memcpy(chg.topic_id, e->topic_id, 16);
        memcpy(chg.isr, c->isr, sizeof(int32_t) * (size_t)c->isr_count);
        memcpy(chg.broker_epochs, c->broker_epochs, sizeof(int64_t) * (size_t)c->isr_count);
        int32_t cur[GR_CLUSTER_REPLICAS_MAX];
        int n = gr_partition_isr(part, cur, GR_CLUSTER_REPLICAS_MAX);
        nodes_text(from, sizeof from, cur, n < GR_CLUSTER_REPLICAS_MAX ? n : GR_CLUSTER_REPLICAS_MAX);
        /* noted before the call: the outcome may come from inside it */
        e->isr_pending = true;
        e->isr_expand = c->expand;
        e->isr_epoch = c->leader_epoch;
        e->isr_base = c->partition_epoch;
        e->isr_count = c->isr_count;
        e->isr_sig = isr_signature(c->isr, c->isr_count);
        rc = r->cfg.ops.isr_propose(r->cfg.ops.isr_ctx, &chg, isr_done, r); /* may answer from inside */
        if (rc != 0) e->isr_pending = false;
    }
    if (rc == 0) {
        r->st.proposals++;
        char to[96];
        const struct gr_image_topic *t = gr_image_topic_find_id(r->img, e->topic_id);
        GR_INFO(
            "%.*s-%d: %s ISR from %s to %s at leader epoch %d, partition epoch %d (high watermark %lld, log "
            "end offset %lld)",
            t ? (int)t->name_len : 1, t ? t->name : "?", (int)e->partition,
            c->expand ? "expanding" : "shrinking", from, nodes_text(to, sizeof to, c->isr, c->isr_count),
            (int)c->leader_epoch, (int)c->partition_epoch, (long long)gr_partition_visible_offset(part),
            (long long)gr_log_end_offset(gr_partition_log(part)));
        return;
    }
    r->st.refused++;
    GR_WARN_RATELIMITED("partition %d: ISR change refused before sending: %s", e ? (int)e->partition : -1,
                        strerror(-rc));
    gr_partition_isr_failed(part, c->partition_epoch);
}

/* ---- the shrink timer ---- */

int gr_roles_shrink_tick(struct gr_roles *r)
{
    r->st.shrink_ticks++;
    if (r->img->self_fenced) return 0;
    int64_t now = now_ms(r);
    int proposed = 0;
    /* a tick may propose, and a refusal reverts inside the call: the table itself does not change */
    for (uint32_t i = 0; i < r->cap; i++)
        if (r->slots[i].part && r->slots[i].role == REC_LEADER)
            proposed += gr_partition_maybe_shrink_isr(r->slots[i].part, now) == 1;
    return proposed;
}

static void shrink_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    gr_roles_shrink_tick(w->data);
}

/* ---- life cycle ---- */

static int64_t lag_ms(const struct gr_roles_config *cfg)
{
    return cfg->replica_lag_time_max_ms > 0 ? cfg->replica_lag_time_max_ms : ROLES_LAG_MS_DEFAULT;
}

static int writer_propose(void *ctx, const struct gr_isr_change *chg, gr_isr_done *done, void *done_ctx)
{
    return gr_isr_writer_propose(ctx, chg, done, done_ctx);
}

static bool writer_cancel(void *ctx, const uint8_t topic_id[16], int32_t partition)
{
    return gr_isr_writer_cancel(ctx, topic_id, partition);
}

static int fetcher_add(void *ctx, struct gr_partition *part, const char *topic, const uint8_t topic_id[16],
                       int32_t partition, int32_t leader_id, int32_t leader_epoch)
{
    return gr_fetcher_add(ctx, part, topic, topic_id, partition, leader_id, leader_epoch);
}

static void fetcher_remove(void *ctx, struct gr_partition *part)
{
    gr_fetcher_remove(ctx, part);
}

void gr_roles_ops_fetcher(struct gr_roles_ops *ops, struct gr_fetcher *f)
{
    ops->fetcher_add = fetcher_add;
    ops->fetcher_remove = fetcher_remove;
    ops->fetcher_ctx = f;
}

void gr_roles_ops_isr_writer(struct gr_roles_ops *ops, struct gr_isr_writer *w)
{
    ops->isr_propose = writer_propose;
    ops->isr_cancel = writer_cancel;
    ops->isr_ctx = w;
}

struct gr_roles *gr_roles_new(const struct gr_roles_config *cfg, struct gr_image *img)
{
    if (!cfg->parts || !img) return NULL;
    struct gr_roles *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->cfg = *cfg;
    if (r->cfg.min_insync_replicas < 1) r->cfg.min_insync_replicas = 1;
    r->cfg.replica_lag_time_max_ms = lag_ms(cfg);
    r->img = img;
    struct gr_partition_repl_config rc = {.replica_lag_time_max_ms = r->cfg.replica_lag_time_max_ms,
                                          .broker_epoch = hook_broker_epoch,
                                          .propose_isr = hook_propose,
                                          .now_ms = hook_now,
                                          .ctx = r};
    gr_partitions_set_replication(cfg->parts, &rc);
    return r;
}

int gr_roles_start(struct gr_roles *r)
{
    if (r->started) return -EALREADY;
    int rc = gr_image_observe(r->img, on_image, r);
    if (rc < 0) return rc;
    r->started = true;
    if (r->cfg.loop) {
        double period = (double)r->cfg.replica_lag_time_max_ms / 2000.0;
        ev_timer_init(&r->shrink, shrink_cb, period, period);
        r->shrink.data = r;
        ev_timer_start(r->cfg.loop, &r->shrink);
        r->timer_on = true;
    }
    pass(r);
    return 0;
}

void gr_roles_free(struct gr_roles *r)
{
    if (!r) return;
    if (r->started) gr_image_unobserve(r->img, on_image, r);
    if (r->timer_on) ev_timer_stop(r->cfg.loop, &r->shrink);
    for (uint32_t i = 0; i < r->cap; i++) {
        if (!r->slots[i].part) continue;
        stop_fetch(r, &r->slots[i]);
        cancel_isr(r, &r->slots[i]);
    }
    gr_partitions_set_replication(r->cfg.parts, &(struct gr_partition_repl_config){0});
    free(r->slots);
    free(r);
}

void gr_roles_stats(const struct gr_roles *r, struct gr_roles_stats *st)
{
    *st = r->st;
}
