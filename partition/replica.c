/*
 * replica.c: the leader side of a replicated partition (partition.h, from gr_partition_set_role on), after
 * Apache Kafka's core/src/main/scala/kafka/cluster/Partition.scala and Replica.scala: the role and epochs a
 * set_role gives, what the leader knows of each follower from its fetches, the ISR and the one ISR change in
 * flight, the high watermark the followers drive, the acks=-1 checks and the low watermark. No I/O, no
 * sockets, no etcd: ISR changes go to the owner through the set's propose_isr hook, registrations come from
 * its broker_epoch hook, and the outcome of a change comes back through gr_partition_isr_committed /
 * gr_partition_isr_failed or a later set_role.
 *
 * Invariants: a partition without a role set, or a leader without followers, keeps today's visible offset
 * (partition.c: the log end offset, or the durable offset with gregor.acks.all.fsync); a leader with
 * followers shows its high watermark, which only moves up while it leads, stays <= the leader's share (log
 * end or durable offset) and <= its floor, the smallest log end offset of the followers that count, which
 * at every change is <= that of every member of the maximal ISR (asserted). The high watermark invariant of
 * issue #20, hw <= the log end offset of every member of the maximal ISR as the leader knows it, is checked
 * at every fetch-state and membership change here and at every move in partition.c (gr_partition_hw_check:
 * an ERROR line, a count, an assert for the leader's own log end offset) against the smallest of them this
 * file keeps. The high watermark is kept in the partition object (internal.h, struct gr_partition_hw): this
 * file sets its floor and whether it is blocked (under min ISR), partition.c moves it, so appends and flushes
 * move it with no call back into this file (files of partition/ never call each other in a ring:
 * scripts/lint.py). At most one ISR change is in flight; while it is, the maximal ISR is the committed ISR
 * plus the member being added (a member being removed still counts, KIP-497). The rest lives behind one
 * pointer per partition (internal.h), allocated at the first set_role: about 1 KB for GR_IMAGE_REPLICAS_MAX
 * replicas. Read next: partition/partition.c (the visible offset and the waits),
 * partition/tests/test_replica.c.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/time.h"
#include "partition/internal.h"
#include "partition/partition.h"
#include "protocol/errors.h"

#define FOLLOWERS_MAX (GR_IMAGE_REPLICAS_MAX - 1)
#define REPLICA_LAG_TIME_MAX_MS_DEFAULT 30000 /* Kafka's replica.lag.time.max.ms */

struct gr_partition_repl {
    bool set; /* a set_role was applied (else: leader alone at the log's epoch) */
    enum gr_partition_role role;
    int32_t leader_id, leader_epoch, partition_epoch;
    int min_isr;       /* the topic's min.insync.replicas */
    int replica_count; /* the leader included */
    int32_t isr[GR_IMAGE_REPLICAS_MAX];
    int isr_count;               /* the committed ISR (Partition.partitionState.isr) */
    bool inflight;               /* an ISR change was proposed, its outcome is not known yet */
    int32_t pending_add;         /* the member being added (in the maximal ISR), -1 none */
    int32_t inflight_base_epoch; /* the partition epoch the change in flight is based on */
    int64_t epoch_start_offset;  /* the current leader epoch's start offset, -1 (follower) */
    struct gr_replica_state f[FOLLOWERS_MAX];
    int follower_count;
};

static const struct gr_partition_repl *leader_state(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    return r && r->set && r->role == GR_PARTITION_LEADER ? r : NULL;
}

static bool is_follower(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    return r && r->set && r->role == GR_PARTITION_FOLLOWER;
}

int64_t gr_partition_now_ms(const struct gr_partition *part)
{
    const struct gr_partition_repl_config *rc = gr_partition_repl_config(part);
    return rc->now_ms ? rc->now_ms(rc->ctx) : gr_time_mono_ms();
}

static int64_t lag_ms(const struct gr_partition *part)
{
    int64_t lag = gr_partition_repl_config(part)->replica_lag_time_max_ms;
    return lag > 0 ? lag : REPLICA_LAG_TIME_MAX_MS_DEFAULT;
}

/* The registration of `broker_id`: its broker epoch or -1 (not registered), *shutting_down set. */
static int64_t registration(const struct gr_partition *part, int32_t broker_id, bool *shutting_down)
{
    const struct gr_partition_repl_config *rc = gr_partition_repl_config(part);
    *shutting_down = false;
    if (!rc->broker_epoch) return INT64_MAX; /* no hook: registered at any epoch */
    int64_t epoch = rc->broker_epoch(rc->ctx, broker_id, shutting_down);
    return epoch < 0 ? -1 : epoch;
}

static bool isr_has(const struct gr_partition_repl *r, int32_t broker_id)
{
    for (int i = 0; i < r->isr_count; i++)
        if (r->isr[i] == broker_id) return true;
    return false;
}

static struct gr_replica_state *follower(struct gr_partition_repl *r, int32_t broker_id)
{
    for (int i = 0; i < r->follower_count; i++)
        if (r->f[i].broker_id == broker_id) return &r->f[i];
    return NULL;
}

/* Marks each follower's membership of the maximal ISR (the committed ISR plus the member being added). */
static void sync_maximal_isr(struct gr_partition_repl *r)
{
    for (int i = 0; i < r->follower_count; i++)
        r->f[i].in_isr = isr_has(r, r->f[i].broker_id) || r->f[i].broker_id == r->pending_add;
}

static void set_isr(struct gr_partition_repl *r, const int32_t *isr, int n)
{
    r->isr_count = 0;
    for (int i = 0; i < n; i++)
        if (!isr_has(r, isr[i])) r->isr[r->isr_count++] = isr[i];
    r->inflight = false;
    r->pending_add = -1;
    sync_maximal_isr(r);
}

static int effective_min_isr(const struct gr_partition_repl *r)
{
    return r->min_isr < r->replica_count ? r->min_isr : r->replica_count;
}

/* Partition.isReplicaIsrEligible with Partition.isBrokerEpochIsrEligible (KIP-903). */
static bool isr_eligible(const struct gr_partition *part, const struct gr_replica_state *f)
{
    bool shutting_down;
    int64_t registered = registration(part, f->broker_id, &shutting_down);
    if (!f->fetched || registered < 0 || shutting_down) return false;
    return f->broker_epoch == -1 || registered == INT64_MAX || f->broker_epoch == registered;
}

bool gr_partition_replica_isr_eligible(const struct gr_partition *part, int32_t broker_id)
{
    struct gr_partition_repl *r = (struct gr_partition_repl *)leader_state(part);
    struct gr_replica_state *f = r ? follower(r, broker_id) : NULL;
    return f && isr_eligible(part, f);
}

int64_t gr_partition_high_watermark_of(int64_t leader_offset, int64_t leader_log_end_offset,
                                       int64_t current_hw, const struct gr_replica_state *followers,
                                       int follower_count, int isr_count, int min_isr, int64_t now_ms,
                                       int64_t lag_ms)
{
    if (isr_count < min_isr) return current_hw; /* Partition.isUnderMinIsr */
    int64_t hw = leader_offset;
    for (int i = 0; i < follower_count; i++) {
        const struct gr_replica_state *f = &followers[i];
        bool caught_up = f->log_end_offset == leader_log_end_offset ||
                         gr_ms_sub_sat(now_ms, f->last_caught_up_time_ms) <= lag_ms; /* isCaughtUp */
        if (f->log_end_offset < hw && (f->in_isr || (caught_up && f->isr_eligible))) hw = f->log_end_offset;
    }
    return hw > current_hw ? hw : current_hw;
}

/* The debug check at every move of the floor: it is within the log end offset of every member of the maximal
   ISR, so the high watermark partition.c moves to min(leader's share, floor) is too. */
static bool floor_within_maximal_isr(const struct gr_partition_repl *r, int64_t floor)
{
    for (int i = 0; i < r->follower_count; i++)
        if (r->f[i].in_isr && r->f[i].log_end_offset < floor) return false;
    return true;
}

/* The smallest log start offset among the followers whose broker is alive (registered), as
   Partition.lowWatermarkIfLeader takes the remote replicas' (-1: one has not fetched since this broker
   leads), INT64_MAX when none counts. */
static int64_t followers_low(const struct gr_partition *part, const struct gr_partition_repl *r)
{
    int64_t low = INT64_MAX;
    for (int i = 0; i < r->follower_count; i++) {
        bool shutting_down;
        if (registration(part, r->f[i].broker_id, &shutting_down) < 0) continue; /* not alive */
        if (r->f[i].log_start_offset < low) low = r->f[i].log_start_offset;
    }
    return low;
}

/* Recomputes the followers' share of the low watermark the waits read (internal.h) and, when it rose, lets
   the low watermark waiters it satisfies go (Partition.updateFollowerFetchState's leaderLWIncremented). */
static void low_may_move(struct gr_partition *part, const struct gr_partition_repl *r)
{
    struct gr_partition_hw *h = gr_partition_hw(part);
    int64_t before = h->followers_low;
    h->followers_low = followers_low(part, r);
    if (h->followers_low > before) gr_partition_low_watermark_moved(part);
}

/* Sets the smallest log end offset the leader knows among the followers of the maximal ISR (internal.h,
   isr_end: unknown ones skipped) and checks the high watermark against it (gr_partition_hw_check). */
static void isr_end_check(struct gr_partition *part, const struct gr_partition_repl *r)
{
    struct gr_partition_hw *h = gr_partition_hw(part);
    h->isr_end = INT64_MAX;
    h->isr_end_id = -1;
    for (int i = 0; i < r->follower_count; i++) {
        const struct gr_replica_state *f = &r->f[i];
        if (f->in_isr && f->log_end_offset >= 0 && f->log_end_offset < h->isr_end) {
            h->isr_end = f->log_end_offset;
            h->isr_end_id = f->broker_id;
        }
    }
    gr_partition_hw_check(part);
}

/* Partition.maybeIncrementLeaderHW, the followers' part: sets whether the high watermark is blocked (the ISR
   below the effective min ISR) and its floor from the followers now, lets partition.c move it
   (gr_partition_visible_offset) and, when it moved, does what gr_partition_flushed does for the waiters. */
static void hw_may_move(struct gr_partition *part, struct gr_partition_repl *r, int64_t now)
{
    struct gr_partition_hw *h = gr_partition_hw(part);
    if (!r->set || r->role != GR_PARTITION_LEADER) return;
    h->on = r->follower_count > 0;
    h->follower = false;
    if (!h->on) return;     /* alone: the visible offset is the leader's share, as without replication */
    isr_end_check(part, r); /* the high watermark as it stands; a move is checked where it happens */
    low_may_move(part, r);
    for (int i = 0; i < r->follower_count; i++)
        r->f[i].isr_eligible = !r->f[i].in_isr && isr_eligible(part, &r->f[i]);
    h->blocked = r->isr_count < effective_min_isr(r);
    h->floor = gr_partition_high_watermark_of(INT64_MAX, gr_log_end_offset(gr_partition_log(part)), -1, r->f,
                                              r->follower_count, 0, 0, now, lag_ms(part));
    assert(floor_within_maximal_isr(r, h->floor));
    int64_t before = h->hw;
    if (gr_partition_visible_offset(part) > before) gr_partition_flushed(part);
}

/* Replica.resetReplicaState: a leader elected or re-elected at a new epoch starting at `start`. */
static void reset_replica_state(struct gr_replica_state *f, int64_t now, int64_t start, bool new_leader,
                                bool in_sync)
{
    f->last_caught_up_time_ms = in_sync ? now : 0; /* a follower outside the ISR must not hold the HW back */
    if (new_leader) {
        *f = (struct gr_replica_state){.broker_id = f->broker_id,
                                       .log_end_offset = -1,
                                       .log_start_offset = -1,
                                       .last_caught_up_time_ms = f->last_caught_up_time_ms,
                                       .last_fetch_leader_log_end_offset = -1,
                                       .broker_epoch = -1,
                                       .fetch_leader_epoch = -1};
        return;
    }
    f->last_fetch_leader_log_end_offset = start;
    f->last_fetch_time_ms = in_sync ? now : 0; /* no re-admission to the ISR before a fetch */
}

/* Partition.updateAssignmentAndIsr's followers: every replica but the leader, keeping the states of those
   already known (ReplicaState.Empty for new ones). */
static void set_followers(struct gr_partition_repl *r, const struct gr_partition_role_change *c)
{
    struct gr_replica_state next[FOLLOWERS_MAX];
    int n = 0;
    for (int i = 0; i < c->replica_count && n < FOLLOWERS_MAX; i++) {
        int32_t id = c->replicas[i];
        bool dup = id == c->leader_id;
        for (int j = 0; j < n && !dup; j++)
            dup = next[j].broker_id == id;
        if (dup) continue;
        struct gr_replica_state *old = follower(r, id);
        next[n++] = old ? *old
                        : (struct gr_replica_state){.broker_id = id,
                                                    .log_end_offset = -1,
                                                    .log_start_offset = -1,
                                                    .broker_epoch = -1,
                                                    .fetch_leader_epoch = -1};
    }
    for (int i = 0; i < n; i++)
        r->f[i] = next[i];
    r->follower_count = n;
    r->replica_count = n + 1;
}

/* The high watermark a new leader starts from: what the log had, within the log. */
static int64_t initial_hw(struct gr_log *log)
{
    int64_t hw = gr_log_high_watermark(log), start = gr_log_start_offset(log), end = gr_log_end_offset(log);
    return hw < start ? start : hw > end ? end : hw;
}

/* Partition.makeLeader. */
static int make_leader(struct gr_partition *part, struct gr_partition_repl *r,
                       const struct gr_partition_role_change *c)
{
    struct gr_log *log = gr_partition_log(part);
    bool new_epoch = !r->set || c->leader_epoch > r->leader_epoch;
    struct gr_partition_hw *h = gr_partition_hw(part);
    bool was_leading = h->on && !h->follower; /* with followers: its high watermark is kept */
    bool new_leader = !r->set || r->role != GR_PARTITION_LEADER;
    if (new_epoch && gr_log_set_leader_epoch(log, c->leader_epoch) < 0) return -ENOMEM;
    if (!was_leading) h->hw = initial_hw(log);
    set_followers(r, c);
    set_isr(r, c->isr, c->isr_count); /* a pending change is dropped: the change's ISR is the committed one */
    if (new_epoch) {
        r->epoch_start_offset = gr_log_end_offset(log); /* UnifiedLog.maybeAssignEpochStartOffset */
        for (int i = 0; i < r->follower_count; i++)
            reset_replica_state(&r->f[i], c->now_ms, r->epoch_start_offset, new_leader,
                                isr_has(r, r->f[i].broker_id));
        sync_maximal_isr(r);
    }
    r->role = GR_PARTITION_LEADER;
    r->leader_id = c->leader_id;
    r->leader_epoch = c->leader_epoch;
    r->partition_epoch = c->partition_epoch;
    r->set = true;
    hw_may_move(part, r, c->now_ms); /* the ISR may be down to the leader */
    return 0;
}

/* Partition.makeFollower: the ISR and the followers' states are the leader's business now. */
static int make_follower(struct gr_partition *part, struct gr_partition_repl *r,
                         const struct gr_partition_role_change *c)
{
    struct gr_partition_hw *h = gr_partition_hw(part);
    if (!h->on) h->hw = initial_hw(gr_partition_log(part)); /* a leader alone had shown its log's */
    h->on = h->follower = true;
    r->role = GR_PARTITION_FOLLOWER;
    r->leader_id = c->leader_id;
    r->leader_epoch = c->leader_epoch;
    r->partition_epoch = c->partition_epoch;
    r->set = true;
    r->replica_count = c->replica_count;
    r->follower_count = 0;
    r->isr_count = 0;
    r->inflight = false;
    r->pending_add = -1;
    r->epoch_start_offset = -1;
    gr_partition_end_leader_waits(part,
                                  -EXDEV); /* delayed produces and follower fetches: NOT_LEADER_OR_FOLLOWER */
    return 0;
}

static bool change_valid(const struct gr_partition_role_change *c)
{
    return c->replica_count >= 1 && c->replica_count <= GR_IMAGE_REPLICAS_MAX && c->isr_count >= 0 &&
           c->isr_count <= c->replica_count && c->leader_epoch >= 0 && c->partition_epoch >= 0 &&
           (c->role == GR_PARTITION_LEADER || c->role == GR_PARTITION_FOLLOWER);
}

int gr_partition_set_role(struct gr_partition *part, const struct gr_partition_role_change *change)
{
    if (!change_valid(change)) return -EINVAL;
    struct gr_partition_repl **slot = gr_partition_repl_slot(part);
    struct gr_partition_repl *r = *slot;
    if (r && r->set) {
        if (change->leader_epoch < r->leader_epoch || change->partition_epoch < r->partition_epoch)
            return -ESTALE; /* Kafka: "Skipped the become-leader state change" */
        if (change->leader_epoch == r->leader_epoch && change->partition_epoch == r->partition_epoch &&
            change->role == r->role) /* already applied (an image batch that did not change it) */
            return change->min_insync_replicas > 0 && change->min_insync_replicas != r->min_isr
                       ? gr_partition_set_min_insync_replicas(part, change->min_insync_replicas)
                       : 0;
    }
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return -ENOMEM;
        r->min_isr = 1;
        r->pending_add = -1;
        r->epoch_start_offset = -1;
        r->leader_epoch = r->partition_epoch = -1;
        *slot = r;
    }
    if (change->min_insync_replicas > 0) r->min_isr = change->min_insync_replicas;
    if (!r->set || change->leader_epoch != r->leader_epoch || change->role != r->role)
        gr_partition_txn_guards_clear(part); /* a new leadership (or none): guards taken before never hold */
    return change->role == GR_PARTITION_LEADER ? make_leader(part, r, change)
                                               : make_follower(part, r, change);
}

enum gr_partition_role gr_partition_role(const struct gr_partition *part)
{
    return is_follower(part) ? GR_PARTITION_FOLLOWER : GR_PARTITION_LEADER;
}

int32_t gr_partition_leader_epoch(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    return r && r->set ? r->leader_epoch : gr_log_leader_epoch(gr_partition_log(part));
}

int32_t gr_partition_partition_epoch(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    return r && r->set ? r->partition_epoch : -1;
}

int gr_partition_set_min_insync_replicas(struct gr_partition *part, int min_insync_replicas)
{
    if (min_insync_replicas < 1) return -EINVAL;
    struct gr_partition_repl *r = *gr_partition_repl_slot(part);
    if (!r) return 0; /* alone: the effective min ISR is 1 whatever the setting */
    r->min_isr = min_insync_replicas;
    hw_may_move(part, r, gr_partition_now_ms(part));
    return 0;
}

int gr_partition_effective_min_isr(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    return r && r->set ? effective_min_isr(r) : 1;
}

int gr_partition_isr(const struct gr_partition *part, int32_t *out, int cap)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    if (!r || !r->set) return 0;
    for (int i = 0; i < r->isr_count && i < cap; i++)
        out[i] = r->isr[i];
    return r->isr_count;
}

bool gr_partition_isr_inflight(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    return r && r->inflight;
}

int gr_partition_maximal_isr_count(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = gr_partition_repl_of(part);
    if (!r || !r->set) return 0;
    return r->isr_count + (r->pending_add >= 0 && !isr_has(r, r->pending_add));
}

const struct gr_replica_state *gr_partition_replica(const struct gr_partition *part, int32_t broker_id)
{
    struct gr_partition_repl *r = (struct gr_partition_repl *)leader_state(part);
    return r ? follower(r, broker_id) : NULL;
}

/* Partition.prepareIsrExpand / prepareIsrShrink + submitAlterPartition: proposes the committed ISR plus `add`
   (>= 0) or minus the members flagged in `remove`, marks the change in flight first (the hook may answer from
   inside). False when the set has no propose hook. */
static bool propose(struct gr_partition *part, struct gr_partition_repl *r, int32_t add, const bool *remove)
{
    const struct gr_partition_repl_config *rc = gr_partition_repl_config(part);
    if (!rc->propose_isr) return false;
    int32_t isr[GR_IMAGE_REPLICAS_MAX];
    int64_t epochs[GR_IMAGE_REPLICAS_MAX];
    int n = 0;
    for (int i = 0; i < r->isr_count + (add >= 0); i++) {
        int32_t id = i < r->isr_count ? r->isr[i] : add;
        if (i < r->isr_count && remove && remove[i]) continue;
        const struct gr_replica_state *f = follower(r, id);
        isr[n] = id;
        epochs[n++] = f && f->fetched ? f->broker_epoch : -1; /* Partition.addBrokerEpochToIsr */
    }
    r->inflight = true;
    r->pending_add = add;
    r->inflight_base_epoch = r->partition_epoch;
    sync_maximal_isr(r);
    if (gr_partition_hw(part)->on) isr_end_check(part, r); /* a member being added counts from now */
    struct gr_partition_isr_change change = {r->leader_epoch, r->partition_epoch, isr, epochs, n, add >= 0};
    rc->propose_isr(rc->ctx, part, &change);
    return true;
}

/* Partition.maybeExpandIsr with isFollowerInSync: proposes adding `f` when it may join. */
static void maybe_expand_isr(struct gr_partition *part, struct gr_partition_repl *r,
                             const struct gr_replica_state *f)
{
    if (r->inflight || isr_has(r, f->broker_id) || !isr_eligible(part, f)) return;
    if (f->log_end_offset < gr_partition_hw(part)->hw || r->epoch_start_offset < 0 ||
        f->log_end_offset < r->epoch_start_offset)
        return; /* not caught up to the high watermark and into the current leader epoch */
    propose(part, r, f->broker_id, NULL);
}

/* Replica.updateFetchStateOrThrow, the broker epoch fence done by the caller. */
static void update_fetch_state(struct gr_replica_state *f, const struct gr_follower_fetch *fetch, int64_t leo,
                               int32_t leader_epoch)
{
    int64_t caught_up = f->last_caught_up_time_ms;
    if (fetch->fetch_offset >= leo) {
        if (fetch->now_ms > caught_up) caught_up = fetch->now_ms;
    } else if (fetch->fetch_offset >= f->last_fetch_leader_log_end_offset) {
        if (f->last_fetch_time_ms > caught_up) caught_up = f->last_fetch_time_ms;
    }
    bool start_known = fetch->log_start_offset >= 0 && fetch->log_start_offset <= fetch->fetch_offset;
    f->log_start_offset = start_known ? fetch->log_start_offset : -1;
    f->log_end_offset = fetch->fetch_offset;
    if (leo > f->last_fetch_leader_log_end_offset) f->last_fetch_leader_log_end_offset = leo;
    f->last_fetch_time_ms = fetch->now_ms;
    f->last_caught_up_time_ms = caught_up;
    f->broker_epoch = fetch->broker_epoch < 0 ? -1 : fetch->broker_epoch;
    f->fetch_leader_epoch = leader_epoch;
    f->fetched = true;
}

int gr_partition_update_follower_fetch_state(struct gr_partition *part, const struct gr_follower_fetch *fetch)
{
    if (is_follower(part)) return -EPERM;
    struct gr_partition_repl *r = (struct gr_partition_repl *)leader_state(part);
    struct gr_replica_state *f = r ? follower(r, fetch->broker_id) : NULL;
    if (!f) return -ENOENT;
    int64_t leo = gr_log_end_offset(gr_partition_log(part));
    if (fetch->fetch_offset < 0 || fetch->fetch_offset > leo) return -ERANGE;
    bool shutting_down;
    int64_t registered = registration(part, fetch->broker_id, &shutting_down);
    if (fetch->broker_epoch >= 0 && registered != INT64_MAX && registered > fetch->broker_epoch)
        return -ESTALE; /* a fetch sent before the follower's restart */
    if (f->fetched && fetch->broker_epoch >= 0 && fetch->broker_epoch == f->broker_epoch &&
        f->fetch_leader_epoch == r->leader_epoch && fetch->fetch_offset < f->log_end_offset) {
        GR_LOG_RATELIMITED(GR_LOG_INFO,
                           "%s-%d: a Fetch of broker %d at offset %lld delivered late (its last stored fetch "
                           "was at %lld in leader epoch %d): not stored",
                           gr_topic_name(gr_log_topic(gr_partition_log(part))),
                           (int)gr_log_partition(gr_partition_log(part)), (int)fetch->broker_id,
                           (long long)fetch->fetch_offset, (long long)f->log_end_offset,
                           (int)r->leader_epoch);
        return 0; /* a request delivered late (partition.h): the state stored is newer */
    }
    int64_t prev_end = f->log_end_offset;
    update_fetch_state(f, fetch, leo, r->leader_epoch);
    maybe_expand_isr(part, r, f);
    if (f->log_end_offset != prev_end) hw_may_move(part, r, fetch->now_ms);
    low_may_move(part, r); /* its log start offset may have moved */
    return 0;
}

int gr_partition_maybe_shrink_isr(struct gr_partition *part, int64_t now)
{
    struct gr_partition_repl *r = (struct gr_partition_repl *)leader_state(part);
    if (!r) return -EPERM;
    hw_may_move(part, r, now); /* a follower outside the ISR whose lag passed no longer holds it back */
    if (r->inflight) return 0; /* Partition.getOutOfSyncReplicas: nothing while a change is in flight */
    int64_t leo = gr_log_end_offset(gr_partition_log(part)), lag = lag_ms(part);
    bool remove[GR_IMAGE_REPLICAS_MAX] = {false};
    int out = 0;
    for (int i = 0; i < r->isr_count; i++) {
        if (r->isr[i] == r->leader_id) continue;
        const struct gr_replica_state *f = follower(r, r->isr[i]);
        remove[i] = !f || (f->log_end_offset != leo && gr_ms_sub_sat(now, f->last_caught_up_time_ms) > lag);
        out += remove[i];
    }
    return out > 0 && propose(part, r, -1, remove) ? 1 : 0;
}

int gr_partition_isr_committed(struct gr_partition *part, int32_t leader_epoch, int32_t partition_epoch,
                               const int32_t *isr, int isr_count)
{
    if (isr_count < 1 || isr_count > GR_IMAGE_REPLICAS_MAX) return -EINVAL;
    struct gr_partition_repl *r = (struct gr_partition_repl *)leader_state(part);
    if (!r || !r->inflight || leader_epoch != r->leader_epoch || partition_epoch < r->partition_epoch)
        return -ESTALE; /* Partition.handleAlterPartitionUpdate ignores it */
    set_isr(r, isr, isr_count);
    r->partition_epoch = partition_epoch;
    hw_may_move(part, r, gr_partition_now_ms(part)); /* members removed no longer hold it back */
    return 0;
}

int gr_partition_isr_failed(struct gr_partition *part, int32_t partition_epoch)
{
    struct gr_partition_repl *r = (struct gr_partition_repl *)leader_state(part);
    if (!r || !r->inflight || partition_epoch != r->inflight_base_epoch) return -ESTALE;
    r->inflight = false; /* back to the last committed state */
    r->pending_add = -1;
    sync_maximal_isr(r);
    hw_may_move(part, r, gr_partition_now_ms(part));
    return 0;
}

int16_t gr_partition_check_produce_acks(const struct gr_partition *part, int16_t acks)
{
    if (is_follower(part)) return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    const struct gr_partition_repl *r = leader_state(part);
    if (acks != -1 || !r) return GR_ERR_NONE;
    return r->isr_count < effective_min_isr(r) ? GR_ERR_NOT_ENOUGH_REPLICAS : GR_ERR_NONE;
}

int16_t gr_partition_check_enough_replicas(const struct gr_partition *part)
{
    if (is_follower(part)) return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    const struct gr_partition_repl *r = leader_state(part);
    if (!r) return GR_ERR_NONE;
    return gr_partition_maximal_isr_count(part) < effective_min_isr(r)
               ? GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND
               : GR_ERR_NONE;
}

int64_t gr_partition_low_watermark(const struct gr_partition *part)
{
    if (is_follower(part)) return -1;
    int64_t low = gr_log_start_offset(gr_partition_log(part));
    const struct gr_partition_repl *r = leader_state(part);
    int64_t followers = r ? followers_low(part, r) : INT64_MAX;
    return followers < low ? followers : low;
}

void gr_partition_wait_low_watermark(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset)
{
    const struct gr_partition_repl *r = leader_state(part);
    if (r) gr_partition_hw(part)->followers_low = followers_low(part, r); /* alive now: the wait's start */
    gr_partition_wait_low(part, w, offset);
}

int64_t gr_partition_leader_epoch_start_offset(const struct gr_partition *part)
{
    const struct gr_partition_repl *r = leader_state(part);
    return r ? r->epoch_start_offset : -1;
}
