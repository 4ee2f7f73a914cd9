/*
 * partition.c: partition objects, the visible offset and the named waits (see partition.h).
 *
 * Each partition keeps one list per kind of wait (committed, data below the visible offset, data below the
 * log end offset for followers' fetches, log start, low watermark) plus a firing list. An event (append,
 * flush completion, failure) first moves every waiter whose condition holds to the firing list, then takes
 * them off it one by one, oldest first, and calls each done hook. A done hook may cancel any other waiter
 * (finishing a request cancels its other waits, which may sit on the firing list), queue new ones, or cause
 * another event on the same partition: a waiter is always on exactly one list or idle, so cancelling from the
 * firing list keeps its done hook from running, and a nested event drains the same firing list. Lists are
 * doubly linked with head->prev pointing at the tail (appends at the tail keep the order in which waiters
 * queued). Read next: server/broker.c (how requests use these waits).
 */
#include "partition/partition.h"
#include "partition/internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "protocol/record_batch.h"
#include "storage/producer_state.h"

enum wait_kind {
    WAIT_COMMITTED = 0,
    WAIT_DATA = 1,
    WAIT_LOG_START = 2,
    WAIT_LOG_END = 3,
    WAIT_LOW_WATERMARK = 4,
    WAIT_STABLE = 5, /* a read_committed fetch: until the last stable offset passes an offset */
    WAIT_KINDS = 6
};

#define NOT_YET 1 /* a condition's answer: keep waiting */

struct gr_partition {
    struct gr_partitions *ps;
    struct gr_log *log;
    struct gr_partition_waiter *lists[WAIT_KINDS];
    struct gr_partition_waiter *firing;
    int waiter_count;
    struct gr_partition *all_next;
    struct gr_gate_queue gate;      /* gate.c */
    struct gr_partition_repl *repl; /* replica.c, NULL until a role is set (one allocation) */
    struct gr_partition_hw hw;      /* internal.h: written by replica.c */
    struct txn_guard *guards;       /* verification entries (gr_partition_txn_verify_start), by age */
    int guard_count, guard_cap;
};

static void guard_clear(struct gr_partition *part, int64_t producer_id);

/* One producer's verification entry (Kafka's VerificationStateEntry): its guard, the highest epoch asked. */
struct txn_guard {
    int64_t producer_id;
    int16_t producer_epoch;
    uint64_t guard;
};

struct gr_partitions {
    struct gr_partitions_config cfg;
    struct gr_partition *all;
    bool stopped;
    struct gr_gate_fifo gate; /* gate.c */
    struct gr_partition_repl_config repl;
    uint64_t hw_violations; /* gr_partition_hw_check */
};

struct gr_partitions *gr_partitions_create(const struct gr_partitions_config *cfg)
{
    struct gr_partitions *ps = calloc(1, sizeof *ps);
    if (ps) ps->cfg = *cfg;
    return ps;
}

static void list_add(struct gr_partition_waiter **list, struct gr_partition_waiter *w)
{
    w->list = list;
    w->next = NULL;
    if (!*list) {
        w->prev = w; /* head->prev is the tail */
        *list = w;
    } else {
        struct gr_partition_waiter *tail = (*list)->prev;
        tail->next = w;
        w->prev = tail;
        (*list)->prev = w;
    }
}

static void list_del(struct gr_partition_waiter *w)
{
    struct gr_partition_waiter **list = w->list;
    if (w == *list) {
        *list = w->next;
        if (*list) (*list)->prev = w->prev;
    } else {
        w->prev->next = w->next;
        if (w->next)
            w->next->prev = w->prev;
        else
            (*list)->prev = w->prev;
    }
    w->list = NULL;
    w->prev = w->next = NULL;
}

void gr_partitions_destroy(struct gr_partitions *ps)
{
    if (!ps) return;
    while (ps->all) {
        struct gr_partition *part = ps->all;
        ps->all = part->all_next;
        for (int k = 0; k < WAIT_KINDS; k++)
            while (part->lists[k]) {
                struct gr_partition_waiter *w = part->lists[k];
                list_del(w);
                w->part = NULL;
            }
        while (part->firing) {
            struct gr_partition_waiter *w = part->firing;
            list_del(w);
            w->part = NULL;
        }
        free(part->repl);
        free(part->guards);
        free(part);
    }
    free(ps);
}

bool gr_partitions_visible_is_durable(const struct gr_partitions *ps)
{
    return ps->cfg.visible_is_durable;
}

void gr_partitions_stop(struct gr_partitions *ps)
{
    ps->stopped = true;
}

bool gr_partitions_stopped(const struct gr_partitions *ps)
{
    return ps->stopped;
}

struct gr_gate_fifo *gr_partitions_gate_fifo(struct gr_partitions *ps)
{
    return &ps->gate;
}

struct gr_gate_queue *gr_partition_gate_queue(struct gr_partition *part)
{
    return &part->gate;
}

void gr_partitions_set_replication(struct gr_partitions *ps, const struct gr_partition_repl_config *rc)
{
    ps->repl = *rc;
}

const struct gr_partition_repl_config *gr_partition_repl_config(const struct gr_partition *part)
{
    return &part->ps->repl;
}

struct gr_partition_repl **gr_partition_repl_slot(struct gr_partition *part)
{
    return &part->repl;
}

struct gr_partition_repl *gr_partition_repl_of(const struct gr_partition *part)
{
    return part->repl;
}

struct gr_partitions *gr_partition_partitions(const struct gr_partition *part)
{
    return part->ps;
}

struct gr_partition_hw *gr_partition_hw(struct gr_partition *part)
{
    return &part->hw;
}

struct gr_partition *gr_partition_get(struct gr_partitions *ps, struct gr_log *log)
{
    struct gr_partition *part = gr_log_user(log);
    if (part) return part;
    part = calloc(1, sizeof *part);
    if (!part) return NULL;
    part->ps = ps;
    part->log = log;
    part->hw.isr_end = INT64_MAX; /* none known */
    part->hw.isr_end_id = -1;
    part->all_next = ps->all;
    ps->all = part;
    gr_log_set_user(log, part);
    return part;
}

struct gr_log *gr_partition_log(const struct gr_partition *part)
{
    return part->log;
}

/* A replicated partition's visible offset (internal.h, struct gr_partition_hw), `share` the leader's. */
static int64_t replicated_visible(struct gr_partition *part, int64_t share)
{
    struct gr_partition_hw *h = &part->hw;
    if (h->follower) {
        int64_t end = gr_log_end_offset(part->log);
        return h->hw < end ? h->hw : end;
    }
    int64_t next = share < h->floor ? share : h->floor;
    if (!h->blocked && next > h->hw) {
        h->hw = next; /* UnifiedLog.maybeIncrementHighWatermark: only up */
        gr_partition_hw_check(part);
    }
    return h->hw;
}

/* Logs and counts one violation: `hw` above `end`, the log end offset of replica `replica` (-1: the leader's
   own). Asserts (builds without NDEBUG, unless hw_violation_no_abort) only for the leader's own log end
   offset, which this broker alone moves; a follower's comes from its Fetch requests, input from another
   process (a replica that lost records, or a Fetch naming a replica id with any offset), which must never
   crash the leader. */
static void hw_violated(struct gr_partition *part, int64_t hw, int32_t replica, int64_t end)
{
    const char *topic = gr_topic_name(gr_log_topic(part->log));
    int32_t p = gr_log_partition(part->log);
    part->ps->hw_violations++;
    if (replica < 0)
        GR_ERROR_RATELIMITED("high watermark invariant violated: %s-%d hw %lld > leader log end offset %lld",
                             topic, (int)p, (long long)hw, (long long)end);
    else
        GR_ERROR_RATELIMITED(
            "high watermark invariant violated: %s-%d hw %lld > replica %d log end offset %lld", topic,
            (int)p, (long long)hw, (int)replica, (long long)end);
    assert(replica >= 0 || part->ps->repl.hw_violation_no_abort || !"high watermark invariant violated");
}

void gr_partition_hw_check(struct gr_partition *part)
{
    const struct gr_partition_hw *h = &part->hw;
    if (!h->on || h->follower) return;
    int64_t end = gr_log_end_offset(part->log);
    if (h->hw > end) hw_violated(part, h->hw, -1, end);
    if (h->hw > h->isr_end) hw_violated(part, h->hw, h->isr_end_id, h->isr_end);
}

uint64_t gr_partitions_hw_violations(const struct gr_partitions *ps)
{
    return ps->hw_violations;
}

int64_t gr_partition_visible_offset(struct gr_partition *part)
{
    struct gr_log *log = part->log;
    int64_t visible = part->ps->cfg.visible_is_durable ? gr_log_durable_offset(log) : gr_log_end_offset(log);
    if (part->hw.on) visible = replicated_visible(part, visible); /* the high watermark (replica.c) */
    if (visible != gr_log_high_watermark(log)) gr_log_set_high_watermark(log, visible);
    return visible;
}

int64_t gr_partition_first_unstable_offset(const struct gr_partition *part)
{
    return gr_log_first_unstable_offset(part->log);
}

/* UnifiedLog.lastStableOffset given the high watermark `visible`. */
static int64_t stable_of(const struct gr_partition *part, int64_t visible)
{
    int64_t fuo = gr_log_first_unstable_offset(part->log);
    return fuo >= 0 && fuo < visible ? fuo : visible;
}

int64_t gr_partition_last_stable_offset(struct gr_partition *part)
{
    return stable_of(part, gr_partition_visible_offset(part));
}

int gr_partition_aborted_txns(struct gr_partition *part, int64_t start_offset, int64_t upper_bound_offset,
                              struct gr_aborted_txn *out, int cap)
{
    if (gr_log_offline(part->log)) return -EROFS;
    return gr_log_aborted_txns(part->log, start_offset, upper_bound_offset, out, cap);
}

int gr_partition_write_marker(struct gr_partition *part, const struct gr_partition_marker *m,
                              struct gr_append_result *res)
{
    if (part->hw.follower) return -EXDEV; /* only a leader takes markers (NOT_LEADER_OR_FOLLOWER) */
    int rc = gr_log_write_marker(part->log, m->producer_id, m->producer_epoch, m->coordinator_epoch,
                                 m->commit ? GR_CONTROL_COMMIT : GR_CONTROL_ABORT, m->transaction_version,
                                 m->now_ms, res);
    if (rc == 0) guard_clear(part, m->producer_id); /* the transaction ended: a verdict before it is stale */
    if (rc == 0 && !res->duplicate) gr_partition_appended(part);
    return rc;
}

/* ---- verification guards (KIP-890 part 1) ---- */

/* Kafka's VerificationGuard values: 0 is the SENTINEL, each real guard the next value of one counter (the
   partition layer runs on the owning thread only). */
static uint64_t next_guard = 1;

static struct txn_guard *guard_find(const struct gr_partition *part, int64_t producer_id)
{
    for (int i = 0; i < part->guard_count; i++)
        if (part->guards[i].producer_id == producer_id) return &part->guards[i];
    return NULL;
}

/* Kafka's ProducerStateManager.clearVerificationStateEntry: after any transactional append of the producer
   (its first batch opened the transaction, or a marker ended one; transaction version 1 clears on both). */
static void guard_clear(struct gr_partition *part, int64_t producer_id)
{
    struct txn_guard *g = guard_find(part, producer_id);
    if (!g) return;
    int i = (int)(g - part->guards);
    memmove(&part->guards[i], &part->guards[i + 1], (size_t)(part->guard_count - i - 1) * sizeof *g);
    part->guard_count--;
}

void gr_partition_txn_guards_clear(struct gr_partition *part)
{
    part->guard_count = 0;
}

/* UnifiedLog.hasOngoingTransaction(producerId, epoch): the log holds the producer's open transaction at that
   epoch. */
static bool ongoing(const struct gr_partition *part, int64_t producer_id, int16_t producer_epoch)
{
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(part->log), producer_id);
    return e && e->producer_epoch == producer_epoch && e->current_txn_first_offset >= 0;
}

int gr_partition_txn_verify_start(struct gr_partition *part, int64_t producer_id, int16_t producer_epoch,
                                  uint64_t *guard)
{
    *guard = GR_TXN_GUARD_SENTINEL;
    if (ongoing(part, producer_id, producer_epoch)) return 0; /* nothing to ask */
    struct txn_guard *g = guard_find(part, producer_id);
    if (g) { /* reused, as maybeCreateVerificationStateEntry does; the higher epoch kept */
        if (producer_epoch > g->producer_epoch) g->producer_epoch = producer_epoch;
        *guard = g->guard;
        return 0;
    }
    if (part->guard_count == part->guard_cap) {
        if (part->guard_cap >= GR_TXN_GUARDS_MAX) {
            guard_clear(part, part->guards[0].producer_id); /* full: the oldest goes (limits.h) */
        } else {
            int cap = part->guard_cap ? part->guard_cap * 2 : 4;
            if (cap > GR_TXN_GUARDS_MAX) cap = GR_TXN_GUARDS_MAX;
            struct txn_guard *n = realloc(part->guards, (size_t)cap * sizeof *n);
            if (!n) return -ENOMEM;
            part->guards = n;
            part->guard_cap = cap;
        }
    }
    part->guards[part->guard_count++] = (struct txn_guard){producer_id, producer_epoch, next_guard++};
    *guard = part->guards[part->guard_count - 1].guard;
    return 0;
}

bool gr_partition_txn_guard_holds(const struct gr_partition *part, int64_t producer_id,
                                  int16_t producer_epoch, uint64_t guard)
{
    if (ongoing(part, producer_id, producer_epoch)) return true;
    const struct txn_guard *g = guard_find(part, producer_id);
    return guard != GR_TXN_GUARD_SENTINEL && g && g->guard == guard;
}

/* The low watermark as the waits see it: the log start offset, lowered by the live followers' (replica.c's
   followers_low) on a leader with followers. */
static int64_t low_watermark(const struct gr_partition *part)
{
    int64_t low = gr_log_start_offset(part->log);
    if (part->hw.on && !part->hw.follower && part->hw.followers_low < low) low = part->hw.followers_low;
    return low;
}

/* NOT_YET, 0 (holds) or -errno (never will) for `w` given the partition's visible offset. */
static int condition(struct gr_partition *part, const struct gr_partition_waiter *w, int64_t visible)
{
    if (w->kind == WAIT_LOG_START) {
        int r = gr_store_checkpoint_poll(part->ps->cfg.store, w->arg);
        return r == 0 ? NOT_YET : r > 0 ? 0 : r;
    }
    if (gr_log_offline(part->log)) return -EROFS;
    bool leaders = w->kind == WAIT_COMMITTED || w->kind == WAIT_LOG_END || w->kind == WAIT_LOW_WATERMARK;
    if (leaders && part->hw.follower) return -EXDEV; /* only a leader commits, serves followers, deletes */
    if (w->kind == WAIT_COMMITTED) return visible >= w->arg ? 0 : NOT_YET;
    if (w->kind == WAIT_LOW_WATERMARK) return low_watermark(part) >= w->arg ? 0 : NOT_YET;
    if (w->kind == WAIT_LOG_END) return gr_log_end_offset(part->log) > w->arg ? 0 : NOT_YET;
    if (w->kind == WAIT_STABLE) return stable_of(part, visible) > w->arg ? 0 : NOT_YET;
    return visible > w->arg ? 0 : NOT_YET;
}

/* Calls the done hooks of the firing list, oldest first (see the file comment). */
static void fire(struct gr_partition *part)
{
    while (part->firing) {
        struct gr_partition_waiter *w = part->firing;
        list_del(w);
        w->part = NULL;
        part->waiter_count--;
        w->done(w, (int)w->arg); /* arg holds the outcome once on the firing list */
    }
}

/* Moves the waiters of list `k` whose condition holds to the firing list. */
static void collect(struct gr_partition *part, int k, int64_t visible)
{
    struct gr_partition_waiter *w = part->lists[k];
    while (w) {
        struct gr_partition_waiter *next = w->next;
        int r = condition(part, w, visible);
        if (r != NOT_YET) {
            list_del(w);
            w->arg = r;
            list_add(&part->firing, w);
        }
        w = next;
    }
}

int gr_partition_append(struct gr_partition *part, uint8_t *batch, size_t len, int64_t log_append_time_ms,
                        struct gr_append_result *res)
{
    int rc = gr_log_append(part->log, batch, len, log_append_time_ms, res);
    if (rc == 0 && !res->duplicate && (gr_batch_attributes(batch) & GR_BATCH_ATTR_TRANSACTIONAL))
        guard_clear(part, gr_batch_producer_id(batch)); /* the transaction is open now (or was already) */
    if (rc == 0 && !res->duplicate) gr_partition_appended(part);
    return rc;
}

void gr_partition_appended(struct gr_partition *part)
{
    collect(part, WAIT_LOG_END, 0); /* followers read up to the log end offset, flushed or not */
    if (part->ps->cfg.visible_is_durable) {
        gr_log_flush_async(part->log); /* the visible offset follows fsync: flush soon */
        fire(part);
        return;
    }
    int64_t visible = gr_partition_visible_offset(part);
    collect(part, WAIT_COMMITTED, visible);
    collect(part, WAIT_DATA, visible);
    collect(part, WAIT_STABLE, visible); /* a marker moves the last stable offset without the visible one */
    fire(part);
}

void gr_partition_flushed(struct gr_partition *part)
{
    int64_t visible = gr_partition_visible_offset(part);
    for (int k = 0; k < WAIT_KINDS; k++)
        collect(part, k, visible);
    fire(part);
}

void gr_partition_fail(struct gr_partition *part, int err)
{
    for (int k = 0; k < WAIT_KINDS; k++)
        while (part->lists[k]) {
            struct gr_partition_waiter *w = part->lists[k];
            list_del(w);
            w->arg = err;
            list_add(&part->firing, w);
        }
    fire(part);
}

void gr_partition_end_leader_waits(struct gr_partition *part, int err)
{
    static const int kinds[] = {WAIT_COMMITTED, WAIT_LOG_END, WAIT_LOW_WATERMARK};
    for (int i = 0; i < 3; i++)
        while (part->lists[kinds[i]]) {
            struct gr_partition_waiter *w = part->lists[kinds[i]];
            list_del(w);
            w->arg = err;
            list_add(&part->firing, w);
        }
    fire(part);
}

void gr_partition_waiter_init(struct gr_partition_waiter *w, gr_partition_done_fn done, void *ctx)
{
    *w = (struct gr_partition_waiter){.done = done, .ctx = ctx};
}

/* Queues `w` for `kind`, or calls its done hook at once when the condition already holds or failed. */
static void wait_on(struct gr_partition *part, struct gr_partition_waiter *w, int kind, int64_t arg)
{
    assert(!w->part); /* a waiter is queued once at a time: a programmer error */
    w->kind = kind;
    w->arg = arg;
    int r = condition(part, w, kind == WAIT_LOG_START ? 0 : gr_partition_visible_offset(part));
    if (r != NOT_YET) {
        w->done(w, r);
        return;
    }
    w->part = part;
    part->waiter_count++;
    list_add(&part->lists[kind], w);
}

void gr_partition_wait_committed(struct gr_partition *part, struct gr_partition_waiter *w, int64_t end_offset)
{
    wait_on(part, w, WAIT_COMMITTED, end_offset);
}

void gr_partition_wait_data(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset)
{
    wait_on(part, w, WAIT_DATA, offset);
}

int64_t gr_partition_fetch_bound(struct gr_partition *part, enum gr_fetch_isolation iso)
{
    if (iso == GR_FETCH_LOG_END) return gr_log_end_offset(part->log);
    if (iso == GR_FETCH_TXN_COMMITTED) return gr_partition_last_stable_offset(part);
    return gr_partition_visible_offset(part);
}

void gr_partition_wait_fetchable(struct gr_partition *part, struct gr_partition_waiter *w,
                                 enum gr_fetch_isolation iso, int64_t offset)
{
    int kind = iso == GR_FETCH_LOG_END         ? WAIT_LOG_END
               : iso == GR_FETCH_TXN_COMMITTED ? WAIT_STABLE
                                               : WAIT_DATA;
    wait_on(part, w, kind, offset);
}

void gr_partition_wait_data_again(struct gr_partition *part, struct gr_partition_waiter *w)
{
    assert(w->kind == WAIT_DATA || w->kind == WAIT_LOG_END || w->kind == WAIT_STABLE); /* programmer error */
    enum gr_fetch_isolation iso = w->kind == WAIT_LOG_END  ? GR_FETCH_LOG_END
                                  : w->kind == WAIT_STABLE ? GR_FETCH_TXN_COMMITTED
                                                           : GR_FETCH_HIGH_WATERMARK;
    gr_partition_wait_fetchable(part, w, iso, gr_partition_fetch_bound(part, iso));
}

void gr_partition_wait_log_start_durable(struct gr_partition *part, struct gr_partition_waiter *w,
                                         int64_t ticket)
{
    wait_on(part, w, WAIT_LOG_START, ticket);
}

void gr_partition_wait_low(struct gr_partition *part, struct gr_partition_waiter *w, int64_t offset)
{
    wait_on(part, w, WAIT_LOW_WATERMARK, offset);
}

void gr_partition_low_watermark_moved(struct gr_partition *part)
{
    collect(part, WAIT_LOW_WATERMARK, 0);
    fire(part);
}

void gr_partition_wait_cancel(struct gr_partition_waiter *w)
{
    if (!w->part) return;
    w->part->waiter_count--;
    list_del(w);
    w->part = NULL;
}

bool gr_partition_waiting(const struct gr_partition_waiter *w)
{
    return w->part != NULL;
}

int gr_partition_waiter_count(const struct gr_partition *part)
{
    return part->waiter_count;
}
