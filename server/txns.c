/*
 * txns.c: the server binding of the transaction coordinator on one node (coordinator/txn.h is plain state
 * with hooks; this file gives it __transaction_state, a clock, timers, producer ids and a coordinator
 * epoch). See server/txns.h; server/groups.c is the same binding for groups, and this file follows it.
 *
 * Start: b->txn is created owning nothing; an I/O-pool job raises the coordinator epoch in
 * GR_TXN_EPOCH_FILE (read, +1, atomic durable replace: gr_store_meta_write), then every partition of
 * __transaction_state is loaded at that epoch (gr_txn_load_begin, then steps of GR_TXN_LOAD_BYTES: the
 * range found without waiting for the disk (gr_log_read_nowait; cold index or file work prefetched on the
 * pool), read on the pool, replayed on the loop (gr_txn_log_replay), the next step from a zero-delay timer;
 * gr_txn_load_done at the log end offset of the load's start). One node leads every partition, so a
 * single epoch per start serves them all; the file makes it grow across restarts, as a leader epoch would.
 *
 * Hooks: append builds the write's batch (gr_txn_log_batch), appends it through the partition layer and
 * waits "until committed" (partition.h gr_partition_wait_committed: below the visible offset, which is the
 * fsynced offset under gregor.acks.all.fsync, as groups' writes); the outcome is reported to the
 * coordinator from a zero-delay timer, never inside the append hook. alloc_producer_id takes an id from the
 * broker's allocator (coordinator/producer_ids.h) without waiting: when its block is not saved yet the
 * wait is cancelled (the save it started goes on) and the coordinator answers COORDINATOR_LOAD_IN_PROGRESS,
 * which clients retry. now_ms is the wall clock. One ev_timer armed at gr_txn_next_deadline_ms runs
 * gr_txn_tick (the timed-out abort pass every 10 s, the expiry pass hourly, CompleteX retries).
 * send_markers (TransactionMarkerChannelManager, in process on one node): each partition's marker is written
 * on its leader here (gr_txns_write_marker, WriteTxnMarkers' own path: data partitions past the append gate
 * through gr_partition_write_marker, __consumer_offsets through the group coordinator's
 * gr_coord_txn_complete) and is done once the high watermark passes it; a deleted partition is done; a
 * refusal for the producer epoch or the coordinator epoch ends the round fenced; other errors are retried
 * every GR_TXN_MARKER_RETRY_MS; then gr_txn_markers_done. done: a request's waiter (struct
 * gr_txns_waiter) is answered, and its request finished when it was parked.
 * Cluster mode (gr_txns_cluster_start, gr_txns_follow; as server/groups.c's): __transaction_state is made by
 * the topic writer, b->txn holds the partitions led here, each loaded at its leader epoch (the coordinator
 * epoch; the epoch file is single-node only) and unloaded when led elsewhere; coordinator writes follow
 * acks=-1's min ISR rule; markers for partitions led elsewhere go through server/txn_markers.h
 * (WriteTxnMarkers to that leader), and a transactional Produce whose id another broker coordinates is
 * verified there (gr_txns_verify_remote: a verification guard taken on each partition first, then the
 * question batched per broker through server/txn_verifier.h as AddPartitionsToTxn v4+ VerifyOnly, the
 * Produce parked meanwhile; the partition checks the guard again at the append).
 * Read next: coordinator/txn.h, coordinator/txn_log.h.
 */
#include "server/txns.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/broker_client.h"
#include "cluster/image.h"
#include "common/failpoint.h"
#include "cluster/topic_writer.h"
#include "common/log.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "coordinator/producer_ids.h"
#include "coordinator/txn.h"
#include "coordinator/txn_log.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"
#include "server/acls.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"
#include "server/internal_topics.h"
#include "server/route.h"
#include "server/txn_markers.h"
#include "server/txn_verifier.h"
#include "storage/iopool.h"
#include "storage/store.h"

/* Bytes read per load step (one pool read, one replay): bounds what a load holds at once. */
#define GR_TXN_LOAD_BYTES (1 << 20)

struct load;
struct twrite;
struct mround;

/* The binding (b->txns): made by gr_txns_start or gr_txns_defer, freed by gr_txns_stop. */
struct gr_txns {
    struct gr_broker *b;
    struct gr_topic *topic; /* __transaction_state, once it exists */
    int32_t partitions;
    int32_t epoch;       /* this run's coordinator epoch (0 until the epoch job saved it) */
    int32_t loaded;      /* partitions whose load completed */
    struct load **loads; /* per partition, the load in progress (NULL: none) */
    struct gr_io_job epoch_job;
    bool epoch_in_job;
    ev_timer tick;             /* the coordinator's next deadline */
    bool tick_active;          /* tick is armed */
    ev_timer report;           /* zero delay: reports the writes in `done_head` */
    struct twrite *waiting;    /* appends waiting to be committed */
    struct twrite *done_head;  /* committed (or failed) appends not reported yet, in completion order */
    struct twrite **done_tail; /* where the next completed one goes */
    struct gr_req **reqs;      /* FindCoordinator requests parked until the topic exists */
    int count, cap;
    struct mround *rounds; /* marker rounds in flight */
    /* cluster mode (gr_txns_cluster_start) */
    bool cluster;           /* partitions follow the image (server/membership.c calls gr_txns_follow) */
    bool creating;          /* a creation of __transaction_state through the topic writer is in flight */
    bool create_retry;      /* a creation failed: tried again when the usable broker count changes */
    int32_t create_brokers; /* usable brokers when it failed (create_retry) */
    int32_t *epochs;        /* per partition, the leader epoch it is loading or loaded at; -1: not owned */
    struct gr_txn_markers *markers;   /* markers to leaders on other brokers (made on first use) */
    struct gr_txn_verifier *verifier; /* verification at coordinators on other brokers (on first use) */
};

/* One append waiting to be committed. */
struct twrite {
    struct gr_partition_waiter pw;
    struct gr_txns *t;
    struct gr_txn_write *w;
    struct gr_partition *part;  /* the partition appended to (a leader's, checked once committed) */
    int16_t err;                /* the wait's outcome as a Kafka error (NONE: committed) */
    struct twrite *prev, *next; /* on t->waiting, then (next only) on t->done_head */
};

/* The load of one partition (as server/groups.c's): `t` NULL once abandoned (the pool's completion frees
 * it). */
struct load {
    struct gr_io_job job;
    struct gr_txns *t;
    int32_t partition, epoch; /* the coordinator epoch it loads at */
    struct gr_log *log;
    int64_t off, end, records, t0;
    bool in_job, cold_phase;
    struct gr_log_slice slice, cold;
    uint8_t *buf;
    ev_timer step;
};

/* The per-request state key of gr_txns_defer: present once the request waited. */
static const char deferred_key;

static struct gr_txns *binding(struct gr_broker *b)
{
    if (!b->txns && (b->txns = calloc(1, sizeof *b->txns))) {
        b->txns->b = b;
        b->txns->done_tail = &b->txns->done_head;
    }
    return b->txns;
}

int32_t gr_txns_epoch(const struct gr_broker *b)
{
    return b->txns ? b->txns->epoch : 0;
}

int32_t gr_txns_loaded(const struct gr_broker *b)
{
    return b->txns && b->txn ? b->txns->loaded : 0;
}

/* ---- the ticks ---- */

/* Arms the tick timer at the coordinator's next deadline (wall clock). */
static void arm(struct gr_txns *t)
{
    struct gr_broker *b = t->b;
    ev_timer_stop(b->loop, &t->tick);
    t->tick_active = false;
    if (!b->txn) return;
    int64_t deadline = gr_txn_next_deadline_ms(b->txn);
    if (deadline == INT64_MAX) return;
    double after = (double)(deadline - gr_time_wall_ms()) / 1000.0;
    ev_timer_set(&t->tick, after > 0 ? after : 0, 0);
    ev_timer_start(b->loop, &t->tick);
    t->tick_active = true;
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_txns *t = w->data;
    t->tick_active = false;
    gr_txn_tick(t->b->txn);
    arm(t);
}

/* ---- coordinator hooks ---- */

static int64_t hook_now(void *ctx)
{
    (void)ctx;
    return gr_time_wall_ms();
}

/* The committed wait finished: queued for the report timer (never reported inside the append hook). */
static void write_waited(struct gr_partition_waiter *pw, int err)
{
    struct twrite *tw = pw->ctx;
    struct gr_txns *t = tw->t;
    if (tw->prev)
        tw->prev->next = tw->next;
    else
        t->waiting = tw->next;
    if (tw->next) tw->next->prev = tw->prev;
    /* committed; in cluster mode Partition.checkEnoughReplicasReachOffset too
       (NOT_ENOUGH_REPLICAS_AFTER_APPEND
       -> COORDINATOR_NOT_AVAILABLE); a leader that became follower -> NOT_COORDINATOR; offline -> the same */
    if (err == 0)
        tw->err = t->cluster ? gr_partition_check_enough_replicas(tw->part) : GR_ERR_NONE;
    else
        tw->err = err == -EXDEV ? GR_ERR_NOT_LEADER_OR_FOLLOWER : GR_ERR_KAFKA_STORAGE_ERROR;
    tw->prev = tw->next = NULL;
    *t->done_tail = tw;
    t->done_tail = &tw->next;
    if (!ev_is_active(&t->report)) {
        ev_timer_set(&t->report, 0, 0);
        ev_timer_start(t->b->loop, &t->report);
    }
}

/* Reports every completed append to the coordinator, in completion order: committed, or the wait's error
 * (gr_txn_append_error maps it: NOT_COORDINATOR for a lost leadership or an offline log,
 * COORDINATOR_NOT_AVAILABLE for too few replicas). */
static void report_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_txns *t = w->data;
    while (t->done_head) {
        struct twrite *tw = t->done_head;
        t->done_head = tw->next;
        if (!t->done_head) t->done_tail = &t->done_head;
        int16_t err = tw->err;
        struct gr_txn_write *tw_w = tw->w;
        free(tw);
        gr_txn_write_done(t->b->txn, tw_w, err);
    }
    arm(t);
}

/* An append error (-errno from the storage append) as the Kafka error Produce would answer. */
static int16_t append_error(int rc)
{
    switch (rc) {
    case -EMSGSIZE:
        return GR_ERR_MESSAGE_TOO_LARGE;
    case -ENOMEM:
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    default:
        return GR_ERR_KAFKA_STORAGE_ERROR; /* -EROFS, -ENOSPC, -EIO: NOT_COORDINATOR for the coordinator */
    }
}

/* TransactionStateManager.appendTransactionToLog: one batch, acks=-1, answered once committed. */
static int16_t hook_append(void *ctx, int32_t partition, const struct gr_coord_record *rec,
                           struct gr_txn_write *w)
{
    struct gr_txns *t = ctx;
    struct gr_broker *b = t->b;
    struct gr_log *log = t->topic ? gr_topic_log(t->topic, partition) : NULL;
    if (!log) return GR_ERR_NOT_COORDINATOR;
    struct gr_partition *part = gr_broker_partition(b, log);
    /* cluster mode: acks=-1's rule before the append (Partition.appendRecordsToLeader): NOT_ENOUGH_REPLICAS
       below transaction.state.log.min.isr, NOT_LEADER_OR_FOLLOWER on a follower (mapped by the coordinator)
     */
    int16_t aerr = t->cluster && part ? gr_partition_check_produce_acks(part, -1) : GR_ERR_NONE;
    if (aerr) return aerr;
    struct twrite *tw = calloc(1, sizeof *tw);
    uint8_t *batch = NULL;
    size_t len = 0;
    int rc = !part || !tw ? -ENOMEM : gr_txn_log_batch(rec, gr_time_wall_ms(), &batch, &len);
    if (rc == 0) {
        struct gr_append_result res;
        rc = gr_partition_append(part, batch, len, -1, &res);
    }
    free(batch);
    if (rc < 0) {
        free(tw);
        GR_WARN_RATELIMITED("%s-%d: a coordinator write failed: %s", GR_TXN_TOPIC, (int)partition,
                            strerror(-rc));
        return append_error(rc);
    }
    gr_log_flush_async(log); /* made durable soon, whatever the visible-offset rule */
    tw->t = t;
    tw->w = w;
    tw->part = part;
    tw->pw = (struct gr_partition_waiter){.done = write_waited, .ctx = tw};
    tw->next = t->waiting;
    if (t->waiting) t->waiting->prev = tw;
    t->waiting = tw;
    gr_partition_wait_committed(part, &tw->pw, gr_log_end_offset(log)); /* may be done at once: queued */
    return GR_ERR_NONE;
}

/* ---- markers (Kafka's TransactionMarkerChannelManager, one node: in process) ---- */

/* Wait before a marker that failed with a retriable error is written again (ms). */
#define GR_TXN_MARKER_RETRY_MS 100

struct mround;

/* One partition's marker of a round. */
struct mpart {
    struct gr_partition_waiter pw;
    struct gr_txn_marker_send send; /* to a leader on another broker (cluster mode) */
    struct mround *r;
    char *topic; /* owned copy */
    int32_t partition;
    bool done;
};

/* One marker round (send_markers until gr_txn_markers_done), on t->rounds. */
struct mround {
    struct gr_txns *t;
    struct gr_txn_marker_job *job;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t coordinator_epoch;
    int32_t txn_partition; /* the __transaction_state partition of the transactional id */
    bool commit;
    int16_t transaction_version; /* the transaction's (coordinator/txn.h gr_txn_markers) */
    struct mpart *parts;
    int32_t count, left;
    int16_t fenced;                /* an error that ends the round (TRANSACTION_COORDINATOR_FENCED), 0 none */
    struct gr_append_gate gate;    /* round_send's turn (partition.h) */
    struct gr_cold cold;           /* the gate's pins */
    struct gr_log **logs;          /* count slots: the data partitions entering the gate */
    struct gr_gate_entry *entries; /* count slots */
    bool gated;                    /* queued in the gate: round_gated writes */
    ev_timer retry;                /* writes the markers not done again */
    ev_timer finish;               /* zero delay: reports the round (never inside send_markers) */
    struct mround *prev, *next;
};

/* The local log of a marker's partition, NULL when its topic or partition is gone. */
static struct gr_log *mpart_log(const struct mpart *mp)
{
    struct gr_store *store = mp->r->t->b->store;
    struct gr_topic *topic = gr_store_topic_find(store, mp->topic, strlen(mp->topic));
    return topic ? gr_topic_log(topic, mp->partition) : NULL;
}

static void round_free(struct mround *r)
{
    for (int32_t i = 0; i < r->count; i++) {
        if (r->parts[i].pw.part) gr_partition_wait_cancel(&r->parts[i].pw);
        gr_txn_markers_cancel(&r->parts[i].send);
        free(r->parts[i].topic);
    }
    gr_cold_release(&r->cold);
    free(r->parts);
    free(r->logs);
    free(r->entries);
    free(r);
}

static void round_unlink(struct mround *r)
{
    struct gr_txns *t = r->t;
    if (r->prev)
        r->prev->next = r->next;
    else
        t->rounds = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
    ev_timer_stop(t->b->loop, &r->retry);
    ev_timer_stop(t->b->loop, &r->finish);
}

/* Every marker is written and committed (or the round was fenced): report it from a zero-delay timer. */
static void round_check(struct mround *r)
{
    if ((r->left == 0 || r->fenced) && !ev_is_active(&r->finish)) {
        ev_timer_stop(r->t->b->loop, &r->retry);
        ev_timer_set(&r->finish, 0, 0);
        ev_timer_start(r->t->b->loop, &r->finish);
    }
}

static void finish_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct mround *r = w->data;
    struct gr_txns *t = r->t;
    round_unlink(r);
    struct gr_txn_marker_job *job = r->job;
    int16_t err = r->fenced;
    round_free(r);
    gr_txn_markers_done(t->b->txn, job, err);
    arm(t);
}

static void retry_later(struct mround *r)
{
    if (!r->gated && !ev_is_active(&r->retry) && !ev_is_active(&r->finish)) {
        ev_timer_set(&r->retry, GR_TXN_MARKER_RETRY_MS / 1000.0, 0);
        ev_timer_start(r->t->b->loop, &r->retry);
    }
}

/* The committed wait of one marker ended: done, or (the log went offline, the leader moved) written again
 * later, as Kafka retries KAFKA_STORAGE_ERROR / NOT_LEADER_OR_FOLLOWER. */
static void marker_committed(struct gr_partition_waiter *pw, int err)
{
    struct mpart *mp = pw->ctx;
    if (err < 0) {
        retry_later(mp->r);
        return;
    }
    mp->done = true;
    mp->r->left--;
    round_check(mp->r);
}

/* True when a partition of mp's round other than mp has no marker written yet (txn.mid_markers). */
static bool marker_others_unsent(const struct mpart *mp)
{
    for (int32_t i = 0; i < mp->r->count; i++)
        if (&mp->r->parts[i] != mp && !mp->r->parts[i].done && !mp->r->parts[i].pw.part) return true;
    return false;
}

/* The answer of a marker sent to another broker (TransactionMarkerRequestCompletionHandler): NONE is done;
 * INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED end the round fenced;
 * UNSUPPORTED_FOR_MESSAGE_FORMAT counts as done (Kafka logs it and moves on); everything else
 * (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION,
 * KAFKA_STORAGE_ERROR, a lost connection, ...) is sent again after GR_TXN_MARKER_RETRY_MS, to the leader the
 * image names then. */
static void marker_remote_done(struct gr_txn_marker_send *s, int16_t err)
{
    struct mpart *mp = (struct mpart *)((char *)s - offsetof(struct mpart, send));
    struct mround *r = mp->r;
    if (err == GR_ERR_NONE || err == GR_ERR_UNSUPPORTED_FOR_MESSAGE_FORMAT) {
        mp->done = true;
        r->left--;
        round_check(r);
    } else if (err == GR_ERR_INVALID_PRODUCER_EPOCH || err == GR_ERR_TRANSACTION_COORDINATOR_FENCED) {
        GR_WARN_RATELIMITED("%s-%d: transaction marker of producer id %lld refused (error %d)", mp->topic,
                            (int)mp->partition, (long long)r->producer_id, (int)err);
        r->fenced = GR_ERR_TRANSACTION_COORDINATOR_FENCED;
        round_check(r);
    } else {
        retry_later(r);
    }
}

/* Cluster mode: where partition `mp` is led, from the image (kept current by etcd's watch: a retry reads
 * it again, Kafka's metadata refresh). Returns false when the leader is this broker (the caller writes it in
 * process); true when handled here: a topic or partition the image does not hold counts as done (deleted),
 * one without a leader is retried later, one led elsewhere is queued for that broker (server/txn_markers.h;
 * retried later when refused). */
static bool marker_route(struct mpart *mp)
{
    struct mround *r = mp->r;
    struct gr_txns *t = r->t;
    struct gr_broker *b = t->b;
    const struct gr_image_topic *it = gr_image_topic_find(b->image, mp->topic, strlen(mp->topic));
    const struct gr_image_partition *ip = it ? gr_image_partition(it, mp->partition) : NULL;
    if (!ip) {
        mp->done = true;
        r->left--;
        return true;
    }
    if (ip->leader == b->image->node_id) return false;
    if (ip->leader >= 0 && !t->markers && b->broker_client)
        t->markers = gr_txn_markers_new(b->loop, b->broker_client);
    int rc = ip->leader < 0 ? -EAGAIN : !t->markers ? -ENOMEM : 0;
    if (rc == 0) {
        mp->send = (struct gr_txn_marker_send){.producer_id = r->producer_id,
                                               .producer_epoch = r->producer_epoch,
                                               .coordinator_epoch = r->coordinator_epoch,
                                               .commit = r->commit,
                                               .transaction_version = r->transaction_version,
                                               .topic = mp->topic,
                                               .partition = mp->partition,
                                               .done = marker_remote_done};
        rc = gr_txn_markers_send(t->markers, ip->leader, &mp->send);
    }
    if (rc < 0) retry_later(r);
    return true;
}

int16_t gr_txns_write_marker(struct gr_broker *b, struct gr_log *log, const struct gr_partition_marker *m,
                             int64_t *end_offset)
{
    *end_offset = -1;
    if (m->producer_id < 0 || m->producer_epoch < 0) return GR_ERR_CORRUPT_MESSAGE;
    int32_t partition = gr_log_partition(log);
    if (strcmp(gr_topic_name(gr_log_topic(log)), GR_OFFSETS_TOPIC) == 0) {
        int16_t kerr = b->coord
                           ? gr_coord_txn_complete(b->coord, partition, m->producer_id, m->producer_epoch,
                                                   m->coordinator_epoch, m->commit, end_offset)
                           : GR_ERR_COORDINATOR_NOT_AVAILABLE;
        if (kerr == GR_ERR_COORDINATOR_NOT_AVAILABLE || kerr == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS ||
            kerr == GR_ERR_NOT_COORDINATOR)
            kerr = GR_ERR_NOT_LEADER_OR_FOLLOWER;
        return kerr;
    }
    struct gr_partition *part = gr_broker_partition(b, log);
    if (!part) return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    struct gr_append_result res;
    int rc = gr_partition_write_marker(part, m, &res);
    switch (rc) {
    case 0: /* durable as the partition's records are (gr_partition_appended): no fdatasync asked here */
        *end_offset = res.last_offset + 1;
        return GR_ERR_NONE;
    case GR_LOG_ERR_INVALID_PRODUCER_EPOCH:
        return GR_ERR_INVALID_PRODUCER_EPOCH;
    case GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED:
        return GR_ERR_TRANSACTION_COORDINATOR_FENCED;
    case -EINVAL:
        return GR_ERR_CORRUPT_MESSAGE;
    case -EXDEV:
        return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    case -EMSGSIZE:
        return GR_ERR_MESSAGE_TOO_LARGE;
    case -ENOMEM:
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    default:
        return GR_ERR_KAFKA_STORAGE_ERROR; /* -EROFS, -ENOSPC, -EIO */
    }
}

/* Writes one partition's marker of a round (gr_txns_write_marker; TransactionMarkerRequestCompletionHandler's
 * outcomes): a deleted topic or partition counts as done; done once the high watermark passes the marker.
 * INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED end the round fenced (Kafka: the coordinator
 * stops sending for the transaction); every other error is retried after GR_TXN_MARKER_RETRY_MS. A data
 * partition's marker is written past the append gate (round_send). */
static void marker_send(struct mpart *mp)
{
    struct mround *r = mp->r;
    struct gr_broker *b = r->t->b;
    if (r->t->cluster && marker_route(mp)) return; /* a leader elsewhere, none, or a deleted partition */
    struct gr_log *log = mpart_log(mp);
    if (!log && r->t->cluster) { /* led here by the image, the local log not made yet */
        retry_later(r);
        return;
    }
    if (!log) { /* deleted (or never existed): nothing to mark */
        mp->done = true;
        r->left--;
        return;
    }
    struct gr_partition_marker m = {.producer_id = r->producer_id,
                                    .producer_epoch = r->producer_epoch,
                                    .coordinator_epoch = r->coordinator_epoch,
                                    .commit = r->commit,
                                    .now_ms = gr_time_wall_ms(),
                                    .transaction_version = r->transaction_version};
    int64_t end = -1;
    int16_t kerr = gr_txns_write_marker(b, log, &m, &end);
    if (kerr == GR_ERR_INVALID_PRODUCER_EPOCH || kerr == GR_ERR_TRANSACTION_COORDINATOR_FENCED) {
        GR_WARN_RATELIMITED("%s-%d: transaction marker of producer id %lld refused (error %d)", mp->topic,
                            (int)mp->partition, (long long)r->producer_id, (int)kerr);
        r->fenced = GR_ERR_TRANSACTION_COORDINATOR_FENCED;
        return;
    }
    if (kerr) {
        GR_WARN_RATELIMITED("%s-%d: transaction marker not written (error %d), retrying", mp->topic,
                            (int)mp->partition, (int)kerr);
        retry_later(r);
        return;
    }
    struct gr_partition *part = gr_broker_partition(b, log);
    if (end < 0) { /* nothing written (no pending offsets of the producer): done */
        mp->done = true;
        r->left--;
        return;
    }
    if (!part) {
        retry_later(r);
        return;
    }
    if (GR_FAILPOINT_ARMED() && marker_others_unsent(mp)) GR_FAILPOINT("txn.mid_markers");
    mp->pw = (struct gr_partition_waiter){.done = marker_committed, .ctx = mp};
    gr_partition_wait_committed(part, &mp->pw, end); /* may be done at once */
}

/* Writes the markers not done and not waiting (their files pinned open when gated), drops the pins. */
static void round_write(struct mround *r)
{
    for (int32_t i = 0; i < r->count && !r->fenced; i++) {
        struct mpart *mp = &r->parts[i];
        if (!mp->done && !mp->pw.part && !mp->send.dest) marker_send(mp);
    }
    gr_cold_unpin(&r->cold);
    round_check(r);
}

/* The round's turn in the append gate: its data partitions are appendable (or nothing could be pinned). */
static void round_gated(struct gr_append_gate *g, int err)
{
    struct mround *r = g->ctx;
    r->gated = false;
    if (err) {
        retry_later(r);
        return;
    }
    round_write(r);
}

/* Sends every marker not done (the first round, and each retry): through the append gate as every append
 * (partition.h gr_gate_enter: a data partition's marker lands after the appends queued before it, and an
 * active file the fd cap closed is reopened on the I/O pool, never on this thread), then round_write. */
static void round_send(struct mround *r)
{
    struct gr_broker *b = r->t->b;
    if (r->gated || r->fenced) return;
    int n = 0;
    for (int32_t i = 0; i < r->count; i++) {
        struct mpart *mp = &r->parts[i];
        struct gr_log *log = mp->done || mp->pw.part || mp->send.dest ? NULL : mpart_log(mp);
        if (log && strcmp(mp->topic, GR_OFFSETS_TOPIC) != 0) r->logs[n++] = log;
    }
    if (n == 0 || !b->iopool) { /* no pool (tests): as Produce, straight to the append */
        round_write(r);
        return;
    }
    gr_cold_release(&r->cold);
    gr_cold_init(&r->cold, b->parts, b->iopool, NULL, NULL); /* the gate sets its hook */
    int rc = gr_gate_enter(&r->gate, b->parts, &r->cold, r->logs, r->entries, n, round_gated, r);
    if (rc < 0)
        retry_later(r);
    else if (rc == 0)
        r->gated = true; /* round_gated writes */
    else
        round_write(r);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    round_send(w->data);
}

/* TransactionMarkerChannelManager.addTxnMarkersToSend, in process: every partition's marker written, then
 * the coordinator told (gr_txn_markers_done). Out of memory for the round: logged, never reported, so the
 * transaction stays PrepareX until the next load completes it. */
static void hook_send_markers(void *ctx, const struct gr_txn_markers *m)
{
    struct gr_txns *t = ctx;
    struct mround *r = calloc(1, sizeof *r);
    size_t slots = m->partition_count > 0 ? (size_t)m->partition_count : 0;
    if (r && slots > 0) {
        r->parts = calloc(slots, sizeof *r->parts);
        r->logs = calloc(slots, sizeof *r->logs);
        r->entries = calloc(slots, sizeof *r->entries);
    }
    if (!r || (slots > 0 && (!r->parts || !r->logs || !r->entries))) {
        if (r) {
            free(r->parts);
            free(r->logs);
            free(r->entries);
        }
        GR_ERROR("transaction coordinator: out of memory for the markers of producer id %lld",
                 (long long)m->producer_id);
        free(r);
        return; /* the round is never reported: PrepareX stays for the next load */
    }
    r->t = t;
    r->job = m->job;
    r->producer_id = m->producer_id;
    r->producer_epoch = m->producer_epoch;
    r->transaction_version = m->transaction_version;
    r->coordinator_epoch = m->coordinator_epoch;
    r->txn_partition = gr_txn_partition_for(m->transactional_id, t->partitions);
    r->commit = m->commit;
    r->count = r->left = m->partition_count;
    ev_timer_init(&r->retry, retry_cb, 0, 0);
    r->retry.data = r;
    ev_timer_init(&r->finish, finish_cb, 0, 0);
    r->finish.data = r;
    r->next = t->rounds;
    if (t->rounds) t->rounds->prev = r;
    t->rounds = r;
    for (int32_t i = 0; i < m->partition_count; i++) {
        struct mpart *mp = &r->parts[i];
        mp->r = r;
        mp->partition = m->partitions[i].partition;
        size_t n = m->partitions[i].topic.len > 0 ? (size_t)m->partitions[i].topic.len : 0;
        mp->topic = malloc(n + 1);
        if (!mp->topic) {
            mp->done = true; /* cannot name it: counted done (logged) */
            r->left--;
            GR_ERROR("transaction coordinator: out of memory for a marker of producer id %lld",
                     (long long)m->producer_id);
            continue;
        }
        if (n) memcpy(mp->topic, m->partitions[i].topic.ptr, n);
        mp->topic[n] = '\0';
    }
    round_send(r);
}

static void pid_done(struct gr_producer_id_waiter *w, int16_t error_code, int64_t producer_id)
{
    int64_t *out = w->ctx;
    *out = error_code ? -1 : producer_id;
}

/* An id now, or COORDINATOR_LOAD_IN_PROGRESS while the allocator's next block is being saved (the save the
 * wait started goes on; the client retries, as with RPCProducerIdManager.generateProducerId). */
static int16_t hook_alloc_producer_id(void *ctx, int64_t *producer_id)
{
    struct gr_txns *t = ctx;
    if (!t->b->producer_ids) return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    int64_t got = -1;
    struct gr_producer_id_waiter w = {.done = pid_done, .ctx = &got};
    gr_producer_id_wait(t->b->producer_ids, &w);
    if (gr_producer_id_waiting(&w)) {
        gr_producer_id_wait_cancel(&w);
        return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    }
    if (got < 0) return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    *producer_id = got;
    return GR_ERR_NONE;
}

/* A request's answer from the coordinator: filled through its waiter's hook; a parked request is finished. */
static void hook_done(void *ctx, void *waiter, const struct gr_txn_result *res)
{
    (void)ctx;
    struct gr_txns_waiter *w = waiter;
    /* read before the answer: an implicit add's waiter (add_answered) is freed by it */
    bool parked = w->parked;
    struct gr_txns_waits *waits = w->req_waits;
    struct gr_req *req = w->req;
    w->answered = true;
    w->answer(w, res);
    if (parked && --waits->pending == 0) gr_req_finish(req);
}

/* ---- the handlers' side ---- */

struct gr_txn_coord *gr_txns_coord(struct gr_broker *b)
{
    if (!b->txn) gr_txns_start(b);
    return b->txn;
}

enum gr_handler_rc gr_txns_settle(struct gr_req *req, struct gr_txns_waits *waits, struct gr_txns_waiter **ws,
                                  int n)
{
    for (int i = 0; i < n; i++)
        if (!ws[i]->answered) {
            ws[i]->parked = true;
            waits->pending++;
        }
    if (waits->pending == 0) return GR_HANDLER_DONE;
    return gr_req_await(req, NULL);
}

/* ---- loads (as server/groups.c's cluster-mode loads) ---- */

static void load_free(struct load *ld)
{
    gr_log_slice_release(&ld->slice);
    gr_log_slice_release(&ld->cold);
    free(ld->buf);
    free(ld);
}

static void abandon(struct gr_txns *t, int32_t p)
{
    struct load *ld = t->loads ? t->loads[p] : NULL;
    if (!ld) return;
    t->loads[p] = NULL;
    ev_timer_stop(t->b->loop, &ld->step);
    ld->t = NULL;
    if (!ld->in_job) load_free(ld); /* else the pool's completion frees it */
}

static void load_finish(struct load *ld, int rc)
{
    struct gr_txns *t = ld->t;
    struct gr_broker *b = t->b;
    int32_t p = ld->partition;
    t->loads[p] = NULL;
    ev_timer_stop(b->loop, &ld->step);
    if (rc < 0) {
        gr_txn_unload(b->txn, p);
        if (t->epochs) t->epochs[p] = -1; /* cluster mode: the next image change or made log tries again */
        GR_ERROR("%s-%d: loading its transactions failed: %s", GR_TXN_TOPIC, (int)p, strerror(-rc));
    } else {
        int n = gr_txn_load_done(b->txn, p, ld->epoch);
        int kerr = gr_log_keep_active_open(ld->log); /* the coordinator appends without parking */
        if (kerr < 0)
            GR_WARN("%s-%d: cannot open the active segment (%s)", GR_TXN_TOPIC, (int)p, strerror(-kerr));
        t->loaded++;
        if (t->cluster)
            GR_INFO("transaction coordinator: loaded %d ids of %s-%d (epoch %d, %lld records) in %lld ms", n,
                    GR_TXN_TOPIC, (int)p, (int)ld->epoch, (long long)ld->records,
                    (long long)(gr_time_mono_ms() - ld->t0));
        else
            GR_DEBUG("transaction coordinator: loaded %d ids of %s-%d (epoch %d, %lld records) in %lld ms", n,
                     GR_TXN_TOPIC, (int)p, (int)ld->epoch, (long long)ld->records,
                     (long long)(gr_time_mono_ms() - ld->t0));
        if (!t->cluster && t->loaded == t->partitions)
            GR_INFO("transaction coordinator: %d partitions of %s loaded at coordinator epoch %d",
                    (int)t->partitions, GR_TXN_TOPIC, (int)t->epoch);
        arm(t);
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

/* On the loop: the step's bytes replayed, the next step scheduled. */
static void load_done(struct gr_io_job *job)
{
    struct load *ld = (struct load *)job;
    ld->in_job = false;
    if (!ld->t) {
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
            int64_t next = gr_txn_log_replay(ld->t->b->txn, ld->partition, ld->buf, (size_t)bytes, ld->off,
                                             &ld->records);
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
    ev_timer_start(ld->t->b->loop, &ld->step);
}

static void load_submit(struct load *ld)
{
    ld->in_job = true;
    ld->job.run = load_run;
    ld->job.done = load_done;
    ld->job.result = 0;
    struct gr_broker *b = ld->t->b;
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
    int rc = gr_log_read_nowait(ld->log, ld->off, GR_TXN_LOAD_BYTES, ld->end, true, &ld->slice, &ld->cold);
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

/* Partition `p` starts loading at coordinator epoch `epoch` (single node: this run's; cluster: the
 * partition's leader epoch). Returns 0, or -1 (logged) when it cannot start. */
static int load_start(struct gr_txns *t, int32_t p, int32_t epoch)
{
    struct gr_broker *b = t->b;
    struct gr_log *log = gr_topic_log(t->topic, p);
    struct load *ld = log ? calloc(1, sizeof *ld) : NULL;
    if (!ld || gr_txn_load_begin(b->txn, p, epoch) < 0) {
        free(ld);
        GR_WARN_RATELIMITED("%s-%d: cannot start loading its transactions", GR_TXN_TOPIC, (int)p);
        return -1;
    }
    ld->t = t;
    ld->partition = p;
    ld->epoch = epoch;
    ld->log = log;
    ld->off = gr_log_start_offset(log);
    ld->end = gr_log_end_offset(log);
    ld->t0 = gr_time_mono_ms();
    ev_timer_init(&ld->step, load_step, 0, 0);
    ld->step.data = ld;
    t->loads[p] = ld;
    ev_timer_start(b->loop, &ld->step);
    return 0;
}

/* ---- the coordinator epoch ---- */

/* On a pool thread: reads the last epoch handed out (none: 0), raises it and saves it durably. */
static void epoch_run(struct gr_io_job *job)
{
    struct gr_txns *t = (struct gr_txns *)((char *)job - offsetof(struct gr_txns, epoch_job));
    uint8_t buf[4];
    int rc = gr_store_meta_read(t->b->store, GR_TXN_EPOCH_FILE, buf, sizeof buf);
    int64_t last = 0;
    if (rc == 0)
        last = (int64_t)((uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3]);
    else if (rc != -ENOENT) {
        job->result = rc;
        return;
    }
    if (last < 0 || last >= INT32_MAX) {
        job->result = -EOVERFLOW;
        return;
    }
    uint32_t next = (uint32_t)last + 1;
    uint8_t out[4] = {(uint8_t)(next >> 24), (uint8_t)(next >> 16), (uint8_t)(next >> 8), (uint8_t)next};
    rc = gr_store_meta_write(t->b->store, GR_TXN_EPOCH_FILE, out, sizeof out);
    job->result = rc < 0 ? rc : (int)next;
}

/* On the loop: the epoch is durable; every partition starts loading at it. */
static void epoch_done(struct gr_io_job *job)
{
    struct gr_txns *t = (struct gr_txns *)((char *)job - offsetof(struct gr_txns, epoch_job));
    t->epoch_in_job = false;
    if (!t->b->txn) return;
    if (job->result < 0) {
        GR_ERROR("transaction coordinator: cannot save the coordinator epoch (%s in the log directory): %s; "
                 "__transaction_state is not loaded",
                 GR_TXN_EPOCH_FILE, job->result == -EINVAL ? "damaged" : strerror(-job->result));
        return;
    }
    t->epoch = job->result;
    for (int32_t p = 0; p < t->partitions; p++)
        load_start(t, p, t->epoch);
}

/* ---- life cycle ---- */

/* AddOffsetsToTxn's partition: the group coordinator's (groupCoordinator.partitionFor). */
static int32_t hook_offsets_partition(void *ctx, struct gr_str group_id)
{
    struct gr_txns *t = ctx;
    return gr_groups_partition_for(t->b, group_id);
}

/* Creates b->txn owning nothing, mapping ids over `n` partitions, with the per-partition arrays and the
 * timers. Returns 0 or -ENOMEM. */
static int coord_create(struct gr_txns *t, int32_t n)
{
    struct gr_broker *b = t->b;
    struct gr_txn_config cfg;
    gr_txn_config_defaults(&cfg);
    cfg.partitions = n;
    /* cfg.offsets_partitions unused: hook_offsets_partition maps groups as the group coordinator does */
    cfg.abort_timed_out_interval_ms = b->cfg.settings.transaction_abort_interval_ms;
    cfg.max_timeout_ms = b->cfg.settings.transaction_max_timeout_ms;
    cfg.id_expiration_ms = b->cfg.settings.transactional_id_expiration_ms;
    cfg.remove_expired_interval_ms = b->cfg.settings.transaction_remove_expired_interval_ms;
    struct gr_txn_hooks hooks = {.ctx = t,
                                 .now_ms = hook_now,
                                 .append = hook_append,
                                 .send_markers = hook_send_markers,
                                 .alloc_producer_id = hook_alloc_producer_id,
                                 .done = hook_done,
                                 .offsets_partition = hook_offsets_partition};
    t->loads = calloc((size_t)n, sizeof *t->loads);
    t->epochs = malloc((size_t)n * sizeof *t->epochs);
    if (!t->loads || !t->epochs || !(b->txn = gr_txn_create(&cfg, &hooks))) {
        free(t->loads);
        free(t->epochs);
        t->loads = NULL;
        t->epochs = NULL;
        return -ENOMEM;
    }
    for (int32_t p = 0; p < n; p++)
        t->epochs[p] = -1;
    t->partitions = n;
    ev_timer_init(&t->tick, tick_cb, 0, 0);
    t->tick.data = t;
    ev_timer_init(&t->report, report_cb, 0, 0);
    t->report.data = t;
    return 0;
}

int gr_txns_start(struct gr_broker *b)
{
    if (b->txn || b->member) return 0; /* cluster mode: gr_txns_follow starts it */
    struct gr_topic *topic = gr_store_topic_find(b->store, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC));
    if (!topic) return -ENOENT;
    struct gr_txns *t = binding(b);
    if (!t) return -ENOMEM;
    int32_t n = gr_topic_partition_count(topic);
    if (coord_create(t, n) < 0) return -ENOMEM;
    t->topic = topic;
    /* Loading from now on (COORDINATOR_LOAD_IN_PROGRESS, as Kafka's loadingPartitions), not NOT_COORDINATOR
       while the epoch is saved: each load begins again at the saved epoch (epoch_done). */
    for (int32_t p = 0; p < n; p++)
        gr_txn_load_begin(b->txn, p, 0);
    t->epoch_job.run = epoch_run;
    t->epoch_job.done = epoch_done;
    t->epoch_in_job = true;
    if (b->iopool) {
        gr_iopool_submit(b->iopool, &t->epoch_job);
    } else { /* no pool (tests): inline */
        epoch_run(&t->epoch_job);
        epoch_done(&t->epoch_job);
    }
    return 0;
}

/* The creation of __transaction_state completed: start the coordinator, run the waiting handlers. */
static void txn_topic_created(void *ctx, int err, struct gr_topic *topic)
{
    (void)topic;
    struct gr_broker *b = ctx;
    if (err && err != -EEXIST)
        GR_ERROR("cannot create %s: %s", GR_TXN_TOPIC, strerror(-err));
    else {
        if (!err)
            GR_INFO("created %s with %d partitions", GR_TXN_TOPIC,
                    (int)b->cfg.settings.transaction_state_log_num_partitions);
        int rc = gr_txns_start(b);
        if (rc < 0) GR_ERROR("cannot start the transaction coordinator: %s", strerror(-rc));
    }
    struct gr_txns *t = b->txns;
    struct gr_req **reqs = t->reqs;
    int n = t->count;
    t->reqs = NULL;
    t->count = t->cap = 0;
    for (int i = 0; i < n; i++) {
        struct gr_req *req = reqs[i];
        gr_req_unpark(req);
        if (!req->conn)
            gr_req_free(req); /* the connection closed while it waited */
        else
            gr_req_run(req);
    }
    free(reqs);
}

/* __transaction_state's creation on one node: internal_topics.h's configs. */
static struct gr_topic_op *create_op(const struct gr_broker *b)
{
    struct gr_txn_topic_configs c;
    gr_txn_topic_configs(&b->cfg.settings, &c);
    struct gr_topic_op *op =
        gr_topic_op_create(GR_TXN_TOPIC, b->cfg.settings.transaction_state_log_num_partitions, c.keys,
                           c.values, GR_TXN_TOPIC_CONFIGS, false);
    if (op) gr_topic_op_keep_active_open(op); /* the coordinator appends without waiting for a reopen */
    return op;
}

bool gr_txns_defer(struct gr_req *req)
{
    struct gr_broker *b = req->broker;
    /* cluster mode: __transaction_state is a topic of the cluster, created through the topic writer by
       gr_txns_coordinator, never here on the side */
    if (b->txn || b->member || req->hdr.request_api_key != GR_API_FIND_COORDINATOR) return false;
    const struct gr_find_coordinator_request *body = req->body;
    if (body->key_type != 1 || gr_req_state(req, &deferred_key)) return false;
    /* a principal no transactional id ACL lets through is refused by FindCoordinator's check: no topic */
    if (!gr_req_authorized_any(req, GR_ACL_OP_DESCRIBE, GR_ACL_RES_TRANSACTIONAL_ID) &&
        !gr_req_authorized_any(req, GR_ACL_OP_WRITE, GR_ACL_RES_TRANSACTIONAL_ID))
        return false;
    if (!gr_req_state_add(req, &deferred_key, 0)) return false;
    if (gr_store_topic_find(b->store, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC))) {
        gr_txns_start(b); /* the topic exists: its loads start now (the answer does not wait for them) */
        return false;
    }
    struct gr_txns *t = binding(b);
    if (!t) return false;
    if (t->count == t->cap) {
        int ncap = t->cap ? t->cap * 2 : 8;
        struct gr_req **n = realloc(t->reqs, sizeof *n * (size_t)ncap);
        if (!n) return false;
        t->reqs = n;
        t->cap = ncap;
    }
    struct gr_topic_op *op = t->count == 0 ? create_op(b) : NULL;
    if (t->count == 0 && !op) return false;
    t->reqs[t->count++] = req;
    gr_req_park(req, INT64_MAX); /* txn_topic_created runs its handler */
    if (op) gr_store_topic_op_submit(b->store, b->iopool, op, txn_topic_created, b);
    return true;
}

/* ---- cluster mode: partitions follow the image (as server/groups.c's) ---- */

/* The topic writer answered the creation of __transaction_state (TOPIC_ALREADY_EXISTS: another broker's
 * first FindCoordinator won; fine). */
static void txn_topic_made(void *ctx, const struct gr_topic_change *res)
{
    struct gr_broker *b = ctx;
    struct gr_txns *t = b->txns;
    bool failed = res->error_code && res->error_code != GR_ERR_TOPIC_ALREADY_EXISTS;
    if (t) {
        t->creating = false;
        t->create_retry = failed;
        t->create_brokers = failed ? gr_image_usable_broker_count(b->image) : 0;
    }
    if (failed)
        GR_WARN_RATELIMITED("cannot create %s: %s (error %d; transaction.state.log.replication.factor %d: "
                            "tried again when a broker joins or leaves)",
                            GR_TXN_TOPIC, res->message ? res->message : "", (int)res->error_code,
                            (int)b->cfg.settings.transaction_state_log_replication_factor);
    else if (!res->error_code)
        GR_INFO("created %s with %d partitions", GR_TXN_TOPIC, (int)res->partition_count);
}

/* Has the topic writer create __transaction_state (once at a time), as Kafka's first FindCoordinator for a
 * transaction does (AutoTopicCreationManager): transaction.state.log.num.partitions partitions of
 * transaction.state.log.replication.factor replicas (placement refuses it while fewer brokers are usable:
 * FindCoordinator answers COORDINATOR_NOT_AVAILABLE, and gr_txns_follow tries again when the usable broker
 * count changes), with TransactionLog's topic configs (create_op's). */
static void create_txn_topic(struct gr_broker *b)
{
    struct gr_txns *t = b->txns;
    if (!t || t->creating || !b->topic_writer) return;
    const struct gr_broker_settings *s = &b->cfg.settings;
    struct gr_txn_topic_configs c;
    gr_txn_topic_configs(&b->cfg.settings, &c);
    struct gr_topic_create_args a = {.name = GR_TXN_TOPIC,
                                     .partitions = s->transaction_state_log_num_partitions,
                                     .replication_factor = s->transaction_state_log_replication_factor,
                                     .config_keys = c.keys,
                                     .config_values = c.values,
                                     .config_count = GR_TXN_TOPIC_CONFIGS,
                                     .timeout_ms = 0};
    t->creating = true;
    gr_topic_writer_create(b->topic_writer, &a, txn_topic_made, b);
}

/* Partition `p` is no longer led here (TransactionStateManager.removeTransactionsForTxnTopicPartition): its
 * ids leave the cache (writes in flight answer NOT_COORDINATOR when they end) and its marker rounds stop
 * (TransactionMarkerChannelManager.removeMarkersForTxnTopicPartition: the new coordinator completes them). */
static void unload(struct gr_txns *t, int32_t p)
{
    bool loading = t->loads[p] != NULL;
    abandon(t, p);
    if (t->epochs[p] >= 0 && !loading) t->loaded--;
    gr_txn_unload(t->b->txn, p);
    for (struct mround *r = t->rounds; r; r = r->next)
        if (r->txn_partition == p && !r->fenced) {
            r->fenced = GR_ERR_NOT_COORDINATOR;
            round_check(r);
        }
    GR_INFO("transaction coordinator: unloaded %s-%d (epoch %d; no longer its leader)", GR_TXN_TOPIC, (int)p,
            (int)t->epochs[p]);
    t->epochs[p] = -1;
}

void gr_txns_follow(struct gr_broker *b)
{
    struct gr_txns *t = b->txns;
    if (!t || !t->cluster) return;
    const struct gr_image *img = b->image;
    const struct gr_image_topic *it = gr_image_topic_find(img, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC));
    if (!it && t->create_retry && gr_image_usable_broker_count(img) != t->create_brokers) {
        t->create_retry = false; /* a broker joined (or left) since the creation failed: try again now */
        create_txn_topic(b);
    }
    if (!b->txn &&
        (!it || it->partition_count <= 0 || it->partition_count > GR_TXN_STATE_LOG_PARTITIONS_MAX ||
         coord_create(t, it->partition_count) < 0))
        return;
    if (it && it->partition_count != t->partitions)
        GR_WARN_RATELIMITED("%s has %d partitions, the coordinator maps ids over %d: not served here",
                            GR_TXN_TOPIC, (int)it->partition_count, (int)t->partitions);
    struct gr_topic *local = it && it->partition_count == t->partitions ? it->local : NULL;
    if (local != t->topic) { /* the topic was (re)made or deleted: what was loaded is gone */
        for (int32_t p = 0; p < t->partitions; p++)
            if (t->epochs[p] >= 0) unload(t, p);
        t->topic = local;
    }
    for (int32_t p = 0; p < t->partitions; p++) {
        const struct gr_image_partition *ip = local ? gr_image_partition(it, p) : NULL;
        struct gr_log *log = local ? gr_topic_log(local, p) : NULL;
        bool lead = ip && log && !img->self_fenced && ip->leader == img->node_id;
        if (lead && t->epochs[p] < 0) {
            if (load_start(t, p, ip->leader_epoch) == 0) t->epochs[p] = ip->leader_epoch;
        } else if (!lead && t->epochs[p] >= 0) {
            unload(t, p);
        } else if (lead && ip->leader_epoch > t->epochs[p]) {
            /* led here again at a newer epoch (the image skipped the state in between): loaded again, as
               server/groups.c does */
            unload(t, p);
            if (load_start(t, p, ip->leader_epoch) == 0) t->epochs[p] = ip->leader_epoch;
        }
    }
    arm(t);
}

int gr_txns_cluster_start(struct gr_broker *b)
{
    struct gr_txns *t = binding(b);
    if (!t) return -ENOMEM;
    t->cluster = true;
    gr_txns_follow(b);
    return 0;
}

/* ---- verification at a coordinator on another broker (AddPartitionsToTxnManager, KIP-890 part 1) ---- */

/* One partition of a Produce being verified remotely. */
struct vpart {
    struct gr_str topic; /* a copy in the request's arena */
    int32_t partition;
    uint64_t guard; /* partition.h gr_partition_txn_verify_start's, checked again at the append */
    int32_t asked;  /* its index in the question's parts; -1: not asked (the producer's transaction is open
                       there: hasOngoingTransaction) */
};

struct ladd;

/* A Produce's remote verification, or its implicit add at the coordinator in process (the request's state
   under verify_key, in its arena). */
struct vstate {
    struct gr_req *req;
    struct gr_txn_question q; /* to the coordinator's broker (server/txn_verifier.h); q.parts also hold the
                                 in-process add's answers */
    struct vpart *parts;
    int32_t count;
    bool answered;          /* the question's errors are in (or nothing was asked) */
    bool remote;            /* q went to the verifier */
    int32_t node;           /* the coordinator's broker (remote) */
    struct ladd *local;     /* the in-process add in flight (NULL: none or answered) */
    struct gr_txn_tp *tps;  /* the in-process add's partitions (the asked ones, in the arena) */
    int64_t add_started_ms; /* monotonic: the first ask (the retry time counts from it) */
    bool retry_add;         /* answered CONCURRENT_TRANSACTIONS: asked again when `soon` fires */
    bool waiting;           /* the request waits for it (gr_req_await_verified) */
    ev_timer soon; /* gr_req_verified from the loop, never inside the coordinator's call; or the retry */
};

/* The in-process implicit add's waiter (transaction version 2: Kafka's AddPartitionsToTxnManager with
   verifyOnly false, the coordinator here): malloc'ed, as the coordinator may answer after the request's
   wait expired (then `v` is NULL and the answer only frees it). */
struct ladd {
    struct gr_txns_waiter w; /* first: hook_done's waiter */
    struct vstate *v;
};

static const char verify_key;

static bool add_retry_due(struct vstate *v, int16_t error);

/* The coordinator's answer: each asked partition's error is in q.parts; the Produce runs again (an implicit
   add answered CONCURRENT_TRANSACTIONS is asked again first while the retry time lasts, add_retry_due). */
static void on_verified(struct gr_txn_question *q)
{
    struct vstate *v = (struct vstate *)((char *)q - offsetof(struct vstate, q));
    int16_t concurrent = GR_ERR_NONE;
    for (int32_t i = 0; i < q->count; i++)
        if (q->parts[i].error == GR_ERR_CONCURRENT_TRANSACTIONS) concurrent = GR_ERR_CONCURRENT_TRANSACTIONS;
    if (q->add && add_retry_due(v, concurrent)) return;
    v->answered = true;
    gr_req_verified(v->req);
}

/* The request's question is withdrawn (its deadline passed): no answer comes after this. */
static void verify_cancel(struct gr_req *req)
{
    struct vstate *v = gr_req_state(req, &verify_key);
    if (!v) return;
    if (v->remote) gr_txn_verifier_cancel(&v->q);
    if (v->local) v->local->v = NULL; /* its answer, when it comes, only frees it */
    v->local = NULL;
    v->retry_add = false;
    if (v->waiting) ev_timer_stop(v->req->broker->loop, &v->soon);
}

/* Kafka's add.partitions.to.txn.retry.backoff.ms and add.partitions.to.txn.retry.backoff.max.ms defaults
   (AddPartitionsToTxnConfig, KAFKA-18654): an implicit add answered CONCURRENT_TRANSACTIONS (the previous
   transaction's markers still going out) is asked again every 20 ms for up to 100 ms before the client gets
   it, rather than leaving the retry to the client's own (longer) backoff. */
#define GR_TXN_ADD_RETRY_BACKOFF_MS 20
#define GR_TXN_ADD_RETRY_MAX_MS 100

static void add_ask(struct vstate *v);

/* True when an implicit add answered `error` CONCURRENT_TRANSACTIONS within the retry time: it is asked again
   after the backoff (the timer, armed here once the request waits; add_local arms it otherwise). */
static bool add_retry_due(struct vstate *v, int16_t error)
{
    if (error != GR_ERR_CONCURRENT_TRANSACTIONS ||
        gr_time_mono_ms() - v->add_started_ms >= GR_TXN_ADD_RETRY_MAX_MS)
        return false;
    v->retry_add = true;
    if (v->waiting) {
        ev_timer_set(&v->soon, GR_TXN_ADD_RETRY_BACKOFF_MS / 1000.0, 0);
        ev_timer_start(v->req->broker->loop, &v->soon);
    }
    return true;
}

static struct gr_log *verified_log(const struct gr_broker *b, const struct gr_image_topic *it,
                                   int32_t partition);
static struct gr_log *offsets_log(struct gr_broker *b, int32_t partition);

/* The log of an asked partition of `v`, found as the first ask found it (offsets_log / verified_log). NULL:
   gone. */
static struct gr_log *vpart_log(struct gr_broker *b, const struct vpart *vp)
{
    if (gr_str_eq_c(vp->topic, GR_OFFSETS_TOPIC)) return offsets_log(b, vp->partition);
    const struct gr_image_topic *it = gr_image_topic_find(b->image, vp->topic.ptr, (size_t)vp->topic.len);
    return it ? verified_log(b, it, vp->partition) : NULL;
}

/* Before an implicit add is asked again (CONCURRENT_TRANSACTIONS: the previous transaction was completing),
   each asked partition takes its verification guard again: the previous transaction's marker may have
   reached it meanwhile, which ends the guard of the first ask, and the answer to this ask is about the
   transaction from now on (as Kafka's retry runs the append's verification again). Without it the append
   refused a Produce the coordinator had just added (INVALID_TXN_STATE), seen as cluster/txn.py's "the next
   transaction at the new epoch, sent at once" failing under load. */
static void refresh_guards(struct vstate *v)
{
    struct gr_broker *b = v->req->broker;
    for (int32_t i = 0; i < v->count; i++) {
        struct vpart *vp = &v->parts[i];
        if (vp->asked < 0) continue;
        struct gr_log *log = vpart_log(b, vp);
        uint64_t guard = GR_TXN_GUARD_SENTINEL;
        if (log)
            (void)gr_partition_txn_verify_start(gr_broker_partition(b, log), v->q.producer_id,
                                                v->q.producer_epoch, &guard);
        vp->guard = guard; /* SENTINEL (gone, no memory, or open there now): the append's own check decides */
    }
}

static void added_soon(struct ev_loop *loop, ev_timer *tw, int revents)
{
    (void)loop, (void)revents;
    struct vstate *v = (struct vstate *)((char *)tw - offsetof(struct vstate, soon));
    if (v->retry_add && v->remote) { /* the coordinator's broker again */
        v->retry_add = false;
        refresh_guards(v);
        struct gr_txns *t = v->req->broker->txns;
        int asked = t->verifier ? gr_txn_verifier_ask(t->verifier, v->node, &v->q) : -ENOMEM;
        if (asked == 0) return; /* on_verified follows */
        if (asked < 0)
            for (int32_t i = 0; i < v->q.count; i++)
                v->q.parts[i].error = GR_ERR_NETWORK_EXCEPTION;
        v->answered = true;
    } else if (v->retry_add) {
        v->retry_add = false;
        refresh_guards(v);
        add_ask(v); /* answered inside (then the timer runs again) or later through add_answered */
        return;
    }
    gr_req_verified(v->req);
}

/* The in-process coordinator's answer to the implicit add: one error for every asked partition (NONE: in
   the transaction now); CONCURRENT_TRANSACTIONS asked again after a backoff while the retry time lasts. */
static void add_answered(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    struct ladd *la = (struct ladd *)w;
    struct vstate *v = la->v;
    free(la);
    if (!v) return; /* the request's wait expired first */
    v->local = NULL;
    struct ev_loop *loop = v->req->broker->loop;
    if (add_retry_due(v, res->error_code)) return;
    for (int32_t i = 0; i < v->q.count; i++)
        v->q.parts[i].error = res->error_code;
    v->answered = true;
    if (v->waiting) { /* answered later: run the request again, from the loop */
        ev_timer_set(&v->soon, 0, 0);
        ev_timer_start(loop, &v->soon);
    }
}

/* One ask of the implicit add (v->tps filled); a failure to ask answers every partition at once. */
static void add_ask(struct vstate *v)
{
    struct gr_broker *b = v->req->broker;
    struct ladd *la = b->txn ? calloc(1, sizeof *la) : NULL;
    if (!la) { /* no memory, or the coordinator gone: retriable (NOT_ENOUGH_REPLICAS) */
        v->local = NULL;
        for (int32_t i = 0; i < v->q.count; i++)
            v->q.parts[i].error = b->txn ? GR_ERR_NETWORK_EXCEPTION : GR_ERR_NOT_COORDINATOR;
        v->answered = true;
        if (v->waiting) {
            ev_timer_set(&v->soon, 0, 0);
            ev_timer_start(b->loop, &v->soon);
        }
        return;
    }
    la->w = (struct gr_txns_waiter){.answer = add_answered, .req = v->req};
    la->v = v;
    v->local = la;
    gr_txn_add_partitions_tv(b->txn, &la->w, v->q.txn_id, v->q.producer_id, v->q.producer_epoch, v->tps,
                             v->q.count, 2);
}

/* Adds the asked partitions of `v` (filled) to the producer's transaction at the coordinator in process
   (gr_txn_add_partitions_tv, client version 2) and declares the request's wait until the add is durable;
   false (go on now, the verdicts set) when nothing is asked or it was answered at once. */
static bool add_local(struct gr_req *req, struct vstate *v, gr_handler_fn run, enum gr_handler_rc *rc)
{
    struct gr_broker *b = req->broker;
    if (v->q.count == 0) {
        v->answered = true;
        return false;
    }
    if (!(v->tps = gr_arena_calloc(&req->arena, (size_t)v->q.count, sizeof *v->tps))) {
        for (int32_t i = 0; i < v->q.count; i++) /* as a question that could not be sent: retriable */
            v->q.parts[i].error = GR_ERR_NETWORK_EXCEPTION;
        v->answered = true;
        return false;
    }
    for (int32_t i = 0; i < v->q.count; i++)
        v->tps[i] = (struct gr_txn_tp){v->q.parts[i].topic, v->q.parts[i].partition};
    ev_timer_init(&v->soon, added_soon, 0, 0);
    v->add_started_ms = gr_time_mono_ms();
    add_ask(v);
    if (v->answered) return false; /* answered inside the call */
    v->waiting = true;
    /* bounded as a remote question is; the coordinator answers once its Ongoing record is committed */
    int64_t wait_ms = GR_BROKER_CLIENT_CONNECT_TIMEOUT_MS + b->cfg.settings.replica_socket_timeout_ms;
    *rc = gr_req_await_verified(req, wait_ms, run, verify_cancel);
    if (*rc == GR_HANDLER_CLOSE) {
        verify_cancel(req);
    } else if (v->retry_add) { /* CONCURRENT_TRANSACTIONS inside the call: asked again after the backoff */
        ev_timer_set(&v->soon, GR_TXN_ADD_RETRY_BACKOFF_MS / 1000.0, 0);
        ev_timer_start(b->loop, &v->soon);
    }
    return true;
}

/* The transactional id's coordinator from the image: its broker id, or -1 (no topic, no leader). */
static int32_t coordinator_node(struct gr_broker *b, struct gr_str txn_id)
{
    const struct gr_image_topic *it = gr_image_topic_find(b->image, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC));
    if (!it || it->partition_count <= 0) return -1;
    const struct gr_image_partition *ip =
        gr_image_partition(it, gr_txn_partition_for(txn_id, it->partition_count));
    return ip ? ip->leader : -1;
}

const uint8_t *gr_txns_txn_batch(struct gr_bytes records)
{
    size_t pos = 0, len;
    const uint8_t *batch;
    if (records.len <= 0 || gr_batch_next(records.ptr, (size_t)records.len, &pos, &batch, &len) != 1 ||
        !(gr_batch_attributes(batch) & GR_BATCH_ATTR_TRANSACTIONAL))
        return NULL;
    return batch;
}

static bool ask_remote(struct gr_req *req, struct vstate *v, int32_t node, gr_handler_fn run,
                       enum gr_handler_rc *rc);

/* The local log of `it`'s `partition` when this broker leads it (not fenced) and has made it, else NULL (as
   route.h gr_route_partition decides; its answer comes at the append). */
static struct gr_log *led_log(const struct gr_broker *b, const struct gr_image_topic *it, int32_t partition)
{
    const struct gr_image_partition *ip = gr_image_partition(it, partition);
    if (!ip || ip->leader != b->image->node_id || b->image->self_fenced || !it->local) return NULL;
    return gr_topic_log(it->local, partition);
}

/* The log a Produce's partition is verified on: led here in a cluster (led_log), any local one on one node.
   NULL: not here. */
static struct gr_log *verified_log(const struct gr_broker *b, const struct gr_image_topic *it,
                                   int32_t partition)
{
    if (b->member) return led_log(b, it, partition);
    return it->local ? gr_topic_log(it->local, partition) : NULL;
}

/* The group coordinator's log of __consumer_offsets partition `partition`, NULL: none. */
static struct gr_log *offsets_log(struct gr_broker *b, int32_t partition)
{
    struct gr_offsets_log *ol = gr_groups_offsets_log(b);
    return ol && partition < gr_offsets_log_partitions(ol) ? gr_offsets_log_log(ol, partition) : NULL;
}

/* The coordinator of `txn_id` runs in this process and owns its id (single node: always when started). */
static bool coordinator_here(struct gr_broker *b, struct gr_str txn_id)
{
    if (!b->member) return gr_txns_coord(b) != NULL;
    int32_t node = coordinator_node(b, txn_id);
    return node >= 0 && node == b->image->node_id && b->txn;
}

bool gr_txns_verify_remote(struct gr_req *req, gr_handler_fn run, enum gr_handler_rc *rc)
{
    struct gr_broker *b = req->broker;
    const struct gr_produce_request *body = req->body;
    /* transaction version 2 (Produce v12+) adds the partitions, whatever the verification setting */
    bool add = req->hdr.request_api_version >= GR_TXN_PRODUCE_V2_MIN;
    if (!b->txns || body->transactional_id.len < 0 || gr_req_state(req, &verify_key)) return false;
    int32_t node = -1;
    if (add && coordinator_here(b, body->transactional_id)) {
        node = -2; /* in process */
    } else {
        if (!b->cfg.settings.transaction_partition_verification_enable || !b->member) return false;
        node = coordinator_node(b, body->transactional_id);
        if (node < 0 || node == b->image->node_id) return false; /* here (in process) or none */
    }
    int32_t total = 0;
    for (int32_t i = 0; i < body->topic_data.count; i++)
        total += body->topic_data.items[i].partition_data.count > 0
                     ? body->topic_data.items[i].partition_data.count
                     : 0;
    struct vstate *v = gr_req_state_add(req, &verify_key, sizeof *v);
    if (!v || !(v->parts = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *v->parts)) ||
        !(v->q.parts = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *v->q.parts)))
        return false; /* out of request memory: the in-process check answers (NOT_ENOUGH_REPLICAS) */
    v->req = req;
    v->q.txn_id = body->transactional_id;
    v->q.done = on_verified;
    bool v13 = req->hdr.request_api_version >= 13;
    for (int32_t i = 0; i < body->topic_data.count; i++) {
        const struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        const struct gr_image_topic *it = gr_route_topic_by(b, v13, td->name, td->topic_id.b);
        for (int32_t p = 0; it && p < td->partition_data.count && v->count < total; p++) {
            const struct gr_produce_request_partition_produce_data *pd = &td->partition_data.items[p];
            const uint8_t *batch =
                pd->records.kind == GR_RECORDS_MEM ? gr_txns_txn_batch(pd->records.mem) : NULL;
            struct gr_log *log = batch ? verified_log(b, it, pd->index) : NULL; /* one node: all here */
            if (!log) continue; /* not transactional, or not led here: its own answer at the append */
            size_t n = strlen(it->name);
            char *name = gr_arena_alloc(&req->arena, n + 1);
            uint64_t guard = GR_TXN_GUARD_SENTINEL;
            int64_t pid = gr_batch_producer_id(batch);
            int16_t epoch = gr_batch_producer_epoch(batch);
            /* the guard before the question (UnifiedLog.maybeStartTransactionVerification) */
            if (!name || gr_partition_txn_verify_start(gr_broker_partition(b, log), pid, epoch, &guard))
                continue; /* out of memory: no verdict, the in-process check answers NOT_ENOUGH_REPLICAS */
            memcpy(name, it->name, n + 1);
            if (v->q.count == 0) {
                v->q.producer_id = pid;
                v->q.producer_epoch = epoch;
            }
            struct vpart *vp = &v->parts[v->count++];
            *vp = (struct vpart){gr_str_c(name), pd->index, guard, -1};
            if (guard == GR_TXN_GUARD_SENTINEL) continue; /* its transaction is open there: not asked */
            vp->asked = v->q.count;
            v->q.parts[v->q.count++] = (struct gr_txn_verify_part){vp->topic, pd->index, GR_ERR_NONE};
        }
    }
    if (node == -2) return add_local(req, v, run, rc);
    v->q.add = add;
    return ask_remote(req, v, node, run, rc);
}

/* Asks `node` the question of `v` (filled) and declares the request's wait until the answer; false (go on
   now, the verdicts set) when nothing is asked or it was answered or refused at once. */
static bool ask_remote(struct gr_req *req, struct vstate *v, int32_t node, gr_handler_fn run,
                       enum gr_handler_rc *rc)
{
    struct gr_broker *b = req->broker;
    if (v->q.count == 0) {
        v->answered = true; /* nothing to ask */
        return false;
    }
    struct gr_txns *t = b->txns;
    if (!t->verifier && b->broker_client) t->verifier = gr_txn_verifier_new(b->loop, b->broker_client);
    v->node = node;
    v->add_started_ms = gr_time_mono_ms();
    ev_timer_init(&v->soon, added_soon, 0, 0);
    int asked = t->verifier ? gr_txn_verifier_ask(t->verifier, node, &v->q) : -ENOMEM;
    v->remote = asked == 0;
    if (asked != 0) { /* answered at once (a fenced epoch), or not asked: NETWORK_EXCEPTION, retriable */
        if (asked < 0)
            for (int32_t i = 0; i < v->q.count; i++)
                v->q.parts[i].error = GR_ERR_NETWORK_EXCEPTION;
        v->answered = true;
        return false;
    }
    /* bounded as the inter-broker request is (a connect, then its timeout), not by the Produce's timeout_ms,
       which Kafka applies only to the acks=-1 wait after the append */
    int64_t wait_ms = GR_BROKER_CLIENT_CONNECT_TIMEOUT_MS + b->cfg.settings.replica_socket_timeout_ms;
    *rc = gr_req_await_verified(req, wait_ms, run, verify_cancel); /* the answer comes later */
    v->waiting = true;
    if (*rc == GR_HANDLER_CLOSE) verify_cancel(req);
    return true;
}

bool gr_txns_verify_offsets_remote(struct gr_req *req, struct gr_str txn_id, struct gr_str group_id,
                                   int64_t producer_id, int16_t producer_epoch, gr_handler_fn run,
                                   enum gr_handler_rc *rc)
{
    struct gr_broker *b = req->broker;
    /* transaction version 2 (TxnOffsetCommit v5+) adds the offsets partition, whatever the setting */
    bool add = req->hdr.request_api_version >= GR_TXN_TXN_OFFSET_COMMIT_V2_MIN;
    if (!b->txns || txn_id.len <= 0 || group_id.len <= 0 || gr_req_state(req, &verify_key)) return false;
    int32_t p = gr_groups_partition_for(b, group_id);
    struct gr_log *log = offsets_log(b, p);
    int32_t node = -1;
    if (add && coordinator_here(b, txn_id)) {
        node = -2; /* in process */
    } else {
        if (!b->cfg.settings.transaction_partition_verification_enable || !b->member) return false;
        node = coordinator_node(b, txn_id);
        if (node < 0 || node == b->image->node_id) return false; /* asked in process (or refused there) */
    }
    if (!log) return false;
    struct vstate *v = gr_req_state_add(req, &verify_key, sizeof *v);
    if (!v || !(v->parts = gr_arena_calloc(&req->arena, 1, sizeof *v->parts)) ||
        !(v->q.parts = gr_arena_calloc(&req->arena, 1, sizeof *v->q.parts)))
        return false;
    uint64_t guard = GR_TXN_GUARD_SENTINEL;
    if (gr_partition_txn_verify_start(gr_broker_partition(b, log), producer_id, producer_epoch, &guard))
        return false; /* no verdict: the in-process check answers */
    v->req = req;
    v->q = (struct gr_txn_question){.txn_id = txn_id,
                                    .producer_id = producer_id,
                                    .producer_epoch = producer_epoch,
                                    .parts = v->q.parts,
                                    .done = on_verified};
    v->parts[0] = (struct vpart){gr_str_c(GR_OFFSETS_TOPIC), p, guard, -1};
    v->count = 1;
    if (guard != GR_TXN_GUARD_SENTINEL) { /* the offsets partition does not hold its transaction yet: asked */
        v->parts[0].asked = 0;
        v->q.parts[0] = (struct gr_txn_verify_part){gr_str_c(GR_OFFSETS_TOPIC), p, GR_ERR_NONE};
        v->q.count = 1;
    }
    if (node == -2) return add_local(req, v, run, rc);
    v->q.add = add;
    return ask_remote(req, v, node, run, rc);
}

bool gr_txns_remote_verdict(struct gr_req *req, struct gr_str topic, int32_t partition, int16_t *error_code,
                            uint64_t *guard)
{
    struct vstate *v = gr_req_state(req, &verify_key);
    *error_code = GR_ERR_NONE;
    *guard = GR_TXN_GUARD_SENTINEL;
    if (!v) return false;
    for (int32_t i = 0; i < v->count; i++)
        if (v->parts[i].partition == partition && gr_str_eq(v->parts[i].topic, topic)) {
            const struct vpart *vp = &v->parts[i];
            *guard = vp->guard;
            if (vp->asked >= 0) /* the deadline passed first: as a request that timed out */
                *error_code = v->answered ? v->q.parts[vp->asked].error : GR_ERR_NETWORK_EXCEPTION;
            return true;
        }
    return false;
}

/* Closes the verification connections (before the inter-broker client is freed); questions in flight or
 * queued are withdrawn (their requests' deadlines run them again: NOT_ENOUGH_REPLICAS). */
static void vconns_close(struct gr_txns *t)
{
    gr_txn_verifier_free(t->verifier);
    t->verifier = NULL;
}

void gr_txns_stop_markers(struct gr_broker *b)
{
    struct gr_txns *t = b->txns;
    if (!t) return;
    gr_txn_markers_free(t->markers); /* sends queued or in flight become idle: their rounds retry or go */
    t->markers = NULL;
    vconns_close(t);
}

int16_t gr_txns_coordinator(struct gr_broker *b, struct gr_str txn_id, int32_t *node_id)
{
    *node_id = -1;
    const struct gr_image *img = b->image;
    const struct gr_image_topic *it = gr_image_topic_find(img, GR_TXN_TOPIC, strlen(GR_TXN_TOPIC));
    if (!it || it->partition_count <= 0) {
        if (b->txns && b->txns->cluster) create_txn_topic(b);
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    }
    struct gr_str key = txn_id.len >= 0 ? txn_id : gr_str_c("");
    const struct gr_image_partition *ip =
        gr_image_partition(it, gr_txn_partition_for(key, it->partition_count));
    if (!ip || ip->leader < 0 || (img->self_fenced && ip->leader == img->node_id))
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    *node_id = ip->leader;
    return GR_ERR_NONE;
}

void gr_txns_stop(struct gr_broker *b)
{
    struct gr_txns *t = b->txns;
    if (!t) return;
    if (b->txn) {
        ev_timer_stop(b->loop, &t->tick);
        ev_timer_stop(b->loop, &t->report);
        for (int32_t p = 0; p < t->partitions; p++)
            abandon(t, p);
        while (t->waiting) {
            struct twrite *tw = t->waiting;
            t->waiting = tw->next;
            gr_partition_wait_cancel(&tw->pw);
            free(tw);
        }
        while (t->done_head) {
            struct twrite *tw = t->done_head;
            t->done_head = tw->next;
            free(tw);
        }
        while (t->rounds) {
            struct mround *r = t->rounds;
            round_unlink(r);
            round_free(r);
        }
        gr_txn_markers_free(t->markers);
        t->markers = NULL;
        vconns_close(t);
        gr_txn_destroy(b->txn); /* the writes and marker jobs it still holds go with it */
        b->txn = NULL;
    }
    free(t->loads);
    free(t->epochs);
    free(t->reqs); /* waiters are parked requests: main frees them */
    free(t);
    b->txns = NULL;
}
