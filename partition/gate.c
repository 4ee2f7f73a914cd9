/*
 * gate.c: the append gate (partition.h, "The append gate"): until the partition is appendable, with
 * per-partition order. Each partition keeps a FIFO of the callers queued on it (internal.h gr_gate_queue);
 * the set keeps every queued caller in arrival order (gr_gate_fifo), which the pump walks: a caller runs
 * when it heads the queue of each of its partitions (no earlier caller shares one with it), no reopen round
 * of its own is in flight, and its files are pinned and open. A caller leaves every queue before its done
 * hook runs, so the hook may append, answer, and even make the owner enter the gate again (the nested
 * pump only asks the running one for another pass). Nothing runs once the set is stopped.
 * Read next: partition/cold.c (the pins and the reopen round), server/handlers/produce.c.
 */
#include <errno.h>

#include "partition/internal.h"
#include "partition/partition.h"

/* Pins the caller's files (again, when a roll made another segment active since) and starts the reopen
   round when some were closed. Returns true when the caller can run now, false while the round runs; *err
   is -ENOMEM when nothing could be pinned. */
static bool pin_or_open(struct gr_append_gate *g, int *err)
{
    *err = 0;
    if (g->pinned) {
        bool ready = true;
        for (int i = 0; i < g->count && ready; i++)
            ready = gr_log_append_ready(g->logs[i]);
        if (ready || gr_cold_rounds(g->cold) >= GR_GATE_OPEN_ROUNDS_MAX) return true;
        gr_cold_unpin(g->cold); /* pin the new active segment */
    }
    for (int i = 0; i < g->count; i++) {
        if (gr_cold_pin_append(g->cold, g->logs[i]) == -ENOMEM) {
            gr_cold_unpin(g->cold);
            g->pinned = false;
            *err = -ENOMEM;
            return true;
        }
    }
    g->pinned = true;
    if (!gr_cold_pending(g->cold)) return true;
    gr_cold_wait(g->cold);
    return !gr_cold_waiting(g->cold); /* no round started (no memory for it): the append meets the file */
}

/* True when an earlier queued caller shares a partition with `g`. */
static bool blocked(const struct gr_append_gate *g)
{
    for (int i = 0; i < g->count; i++)
        if (gr_partition_gate_queue(g->entries[i].part)->head != &g->entries[i]) return true;
    return false;
}

static void enqueue(struct gr_append_gate *g)
{
    for (int i = 0; i < g->count; i++) {
        struct gr_gate_queue *q = gr_partition_gate_queue(g->entries[i].part);
        g->entries[i].next = NULL;
        if (q->tail)
            q->tail->next = &g->entries[i];
        else
            q->head = &g->entries[i];
        q->tail = &g->entries[i];
    }
    struct gr_gate_fifo *f = gr_partitions_gate_fifo(g->ps);
    g->next = NULL;
    if (f->tail)
        f->tail->next = g;
    else
        f->head = g;
    f->tail = g;
    g->queued = true;
}

/* Takes `g` (after `prev` in the FIFO) out of the FIFO and of its partitions' queues, which it heads. */
static void dequeue(struct gr_append_gate *g, struct gr_append_gate *prev)
{
    for (int i = 0; i < g->count; i++) {
        struct gr_gate_queue *q = gr_partition_gate_queue(g->entries[i].part);
        q->head = g->entries[i].next;
        if (!q->head) q->tail = NULL;
    }
    struct gr_gate_fifo *f = gr_partitions_gate_fifo(g->ps);
    if (prev)
        prev->next = g->next;
    else
        f->head = g->next;
    if (f->tail == g) f->tail = prev;
    g->next = NULL;
    g->queued = false;
}

/* One pass over the FIFO: runs every caller that may run, in arrival order; starts the rounds of others. */
static void pump_once(struct gr_partitions *ps)
{
    struct gr_append_gate *prev = NULL;
    for (struct gr_append_gate *g = gr_partitions_gate_fifo(ps)->head; g;) {
        struct gr_append_gate *next = g->next;
        int err = 0;
        if (gr_cold_waiting(g->cold) || blocked(g) || !pin_or_open(g, &err)) {
            prev = g;
            g = next;
            continue;
        }
        dequeue(g, prev);
        g->done(g, err);
        g = next;
    }
}

static void pump(struct gr_partitions *ps)
{
    struct gr_gate_fifo *f = gr_partitions_gate_fifo(ps);
    if (gr_partitions_stopped(ps)) return;
    if (f->pumping) {
        f->repump = true;
        return;
    }
    f->pumping = true;
    do {
        f->repump = false;
        pump_once(ps);
    } while (f->repump);
    f->pumping = false;
}

/* The reopen round of a queued caller ended: its files are installed (still pinned). */
static void opened(struct gr_cold *c)
{
    struct gr_append_gate *g = c->ctx;
    pump(g->ps);
}

int gr_gate_enter(struct gr_append_gate *g, struct gr_partitions *ps, struct gr_cold *c, struct gr_log **logs,
                  struct gr_gate_entry *entries, int n, gr_gate_done_fn done, void *ctx)
{
    *g = (struct gr_append_gate){
        .done = done, .ctx = ctx, .ps = ps, .cold = c, .logs = logs, .entries = entries, .count = n};
    c->done = opened;
    c->ctx = g;
    bool queued_before = false;
    for (int i = 0; i < n; i++) {
        entries[i] = (struct gr_gate_entry){.g = g, .part = gr_partition_get(ps, logs[i])};
        if (!entries[i].part) return -ENOMEM;
        queued_before |= gr_partition_gate_queue(entries[i].part)->head != NULL;
    }
    int err = 0;
    if (!queued_before && pin_or_open(g, &err)) return err ? err : 1;
    enqueue(g); /* behind the earlier callers of its partitions, or until its round ends */
    return 0;
}

int gr_gate_queued(struct gr_partitions *ps)
{
    int n = 0;
    for (struct gr_append_gate *g = gr_partitions_gate_fifo(ps)->head; g; g = g->next)
        n++;
    return n;
}
