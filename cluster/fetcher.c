/*
 * fetcher.c: the replica fetcher (cluster/fetcher.h). One struct fp per followed partition (its leader,
 * epoch, fetcher id and fetch state), kept in a hash by partition pointer and on the list of its connection
 * (struct fconn: one per (leader, fetcher id), opened on the inter-broker client). A connection carries at
 * most one request at a time: a ListOffsets for the partitions whose offset was out of range
 * (AbstractFetcherThread.fetchOffsetAndTruncate), else one Fetch for every partition ready
 * (RemoteLeaderEndPoint.buildFetch) through the connection's fetch session (cluster/fetch_session_client.h:
 * the entries are every partition ready, the request body only those the session builder says to carry;
 * an incremental answer names only those with news). The request's entries remember (partition, fetch
 * offset, epoch); a
 * removed or moved partition's entry is cleared, so its answer is dropped. The records of an answer are
 * appended from the answer frame inside the callback (no copy).
 *
 * A partition is ready when it is not fenced or failed, not delayed (backoff), has no truncation waiting to
 * be retried (its reads on the I/O pool: storage/truncate.c), its log has no truncation work pending
 * (appends would answer -EAGAIN) and, with the fsync
 * gate, its log's durable offset reached what the last answer appended. With the fsync gate a connection's
 * next Fetch waits until every partition on it that appended is durable. Those two disk waits end on a
 * flusher or I/O thread; the server hands each completion to the loop and calls gr_fetcher_flushed, which
 * marks the partition's connection (when idle) and arms `wake`, a zero timer that pumps every marked
 * connection once (one look per connection for a batch of completions, never from inside a walk). The timer
 * `timer` ends backoffs, looks again every disk_poll_ms at idle connections whose partitions still wait on
 * disk (a backstop for a completion that was never handed over: the server drops one when it cannot queue
 * it), and, armed at 0 by gr_fetcher_add and gr_fetcher_remove (kick), sends the partitions an owner adds in
 * one pass in one Fetch. Each arming looks again at every partition of an idle ready connection rather than
 * trusting what the pump saw (a flush or the clock may have moved in between).
 *
 * Re-entrancy: appends, truncations and watermarks fire partition waiters whose done hooks may call
 * gr_fetcher_add, gr_fetcher_remove or gr_fetcher_flushed while the fetcher walks its connections and
 * partitions (a pump, an answer). Every walk runs between enter() and leave(); while one runs (depth > 0)
 * nothing is unlinked or freed: a removed partition is unhashed and marked `removed` (skipped by every walk,
 * its request entry cleared at once) and stays on its connection's list; a partition moved to another leader
 * is such a removal plus a new partition; new partitions go at the end of a list and new connections at the
 * head of theirs; a connection left empty stays. The outermost leave() frees what was removed and the
 * connections left empty, and asks for a pump when an entry point ran inside (kick).
 * Read next: cluster/broker_client.h, partition/follower.c.
 */
#include "cluster/fetcher.h"

#include <assert.h>
#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/broker_client.h"
#include "cluster/fetch_session_client.h"
#include "cluster/image.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/time.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"

/* The backstop: how often an idle connection whose partitions wait for fsync or for a truncation's file work
   is looked at again without a notification (ms; gr_fetcher_flushed normally ends the wait at once). */
#define GR_FETCHER_DISK_POLL_MS 100
/* A partition every look finds ready but the pump left out (its delay ran out after the pump looked, or its
   request could not be built for want of memory) is looked at again after this (ms). */
#define GR_FETCHER_RELOOK_MS 1
/* Delay before a partition whose append or truncation answered -EAGAIN is tried again (ms). */
#define GR_FETCHER_RETRY_MS 10

enum oor_phase { OOR_NONE = 0, OOR_LATEST, OOR_EARLIEST };
enum trunc_kind { TRUNC_NONE = 0, TRUNC_TO, TRUNC_FULLY };

struct fconn;

struct fp {
    struct gr_partition *part;
    char *topic;
    uint8_t topic_id[16];
    int32_t partition, leader_id, leader_epoch, fetcher_id;
    struct fconn *conn;
    int req_idx;            /* its entry in conn's request, -1 when in none */
    int64_t delay_until_ms; /* not fetched before (backoff), 0: none */
    int64_t gate_end;       /* fsync gate: next fetch once durable >= this, -1 none */
    enum oor_phase oor;     /* out of range: ListOffsets latest, then earliest */
    int64_t oor_leader_end; /* the leader's log end offset (after OOR_LATEST) */
    enum trunc_kind trunc;  /* a truncation to retry (-EAGAIN) */
    int64_t trunc_offset;
    bool fenced;  /* FENCED_LEADER_EPOCH at its epoch: waits to be re-added */
    bool failed;  /* storage error: waits to be re-added */
    bool removed; /* removed (or moved) inside a walk: unhashed, freed by the outermost leave() */
    struct fp *hnext;
    struct fp *cprev, *cnext;
};

struct fentry {
    struct fp *fp; /* NULL: removed or moved since sent */
    int64_t fetch_offset;
    int32_t leader_epoch;
};

struct fconn {
    struct gr_fetcher *f;
    int32_t leader_id, fetcher_id;
    struct gr_broker_client_conn *bc_conn;
    struct gr_fsc *fsc;               /* its fetch session (KIP-227): one per connection, so per leader */
    struct gr_broker_client_req *req; /* the request in flight, NULL none */
    struct fentry *entries;           /* its partitions */
    int entry_count, entry_cap;
    int cursor; /* answer matching: where the next answered partition probably is */
    struct fp *head, *tail;
    int part_count; /* partitions on its list (removed ones included until reaped) */
    bool woken;     /* gr_fetcher_flushed marked it: `wake` pumps it */
    struct fconn *next;
};

/* One INFO line's worth of partitions added or removed in one pass of the owner (Kafka's "Added fetcher to
   broker X for partitions ..." / "Removed fetcher for partitions ..." of AbstractFetcherManager), written
   at the next pump: one line per batch, never per record. */
#define FETCHER_NOTE_BYTES 768
struct fnote {
    char text[FETCHER_NOTE_BYTES];
    size_t len;
    int count, left_out; /* partitions named, and those the text had no room for */
};

struct gr_fetcher {
    struct ev_loop *loop;
    struct gr_broker_client *bc;
    struct gr_image *img;
    struct gr_fetcher_config cfg;
    struct gr_fetcher_stats stats;
    struct fp **buckets;
    size_t bucket_count;
    struct fconn *conns;
    ev_timer timer;              /* backoffs, the disk backstop, kick */
    ev_timer wake;               /* zero timer: pumps the connections gr_fetcher_flushed marked */
    int depth;                   /* walks on the stack (enter/leave) */
    bool reap;                   /* a partition was removed inside a walk */
    bool pump_soon;              /* an entry point ran inside a walk: kick at the outermost leave */
    struct fnote added, removed; /* INFO lines waiting for the next pump */
    const struct gr_msg_ops *fetch_ops, *list_ops;
};

/* ---- partitions by pointer ---- */

static size_t bucket_of(const struct gr_fetcher *f, const struct gr_partition *part)
{
    uintptr_t h = (uintptr_t)part;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (f->bucket_count - 1);
}

static struct fp *fp_find(const struct gr_fetcher *f, const struct gr_partition *part)
{
    for (struct fp *fp = f->buckets[bucket_of(f, part)]; fp; fp = fp->hnext)
        if (fp->part == part) return fp;
    return NULL;
}

/* Doubles the bucket array when the table is fuller than one entry per bucket. 0 or -ENOMEM. */
static int fp_table_grow(struct gr_fetcher *f)
{
    if ((size_t)f->stats.partitions < f->bucket_count) return 0;
    size_t n = f->bucket_count * 2;
    struct fp **b = calloc(n, sizeof *b);
    if (!b) return -ENOMEM;
    struct fp **old = f->buckets;
    size_t old_n = f->bucket_count;
    f->buckets = b;
    f->bucket_count = n;
    for (size_t i = 0; i < old_n; i++)
        while (old[i]) {
            struct fp *fp = old[i];
            old[i] = fp->hnext;
            size_t k = bucket_of(f, fp->part);
            fp->hnext = b[k];
            b[k] = fp;
        }
    free(old);
    return 0;
}

static void fp_unhash(struct gr_fetcher *f, struct fp *fp)
{
    struct fp **pp = &f->buckets[bucket_of(f, fp->part)];
    while (*pp != fp)
        pp = &(*pp)->hnext;
    *pp = fp->hnext;
}

/* ---- fetcher id (AbstractFetcherManager.getFetcherId) ---- */

/* Java's String.hashCode over the topic name's bytes (Kafka topic names are ASCII: one UTF-16 unit each). */
static int32_t java_string_hash(const char *s)
{
    uint32_t h = 0;
    for (; *s; s++)
        h = 31u * h + (uint8_t)*s;
    return (int32_t)h;
}

/* abs(31 * topic.hashCode + partition) % num_fetchers, with Kafka's Utils.abs (MIN_VALUE gives 0). */
static int32_t fetcher_id_of(const char *topic, int32_t partition, int32_t num_fetchers)
{
    int32_t v = (int32_t)(31u * (uint32_t)java_string_hash(topic) + (uint32_t)partition);
    int32_t a = v == INT32_MIN ? 0 : v < 0 ? -v : v;
    return a % num_fetchers;
}

/* ---- connections ---- */

static void on_state(void *ctx, struct gr_broker_client_conn *conn, bool ready);
static void conn_pump(struct fconn *c);
static void timer_arm(struct gr_fetcher *f);

static struct fconn *conn_get(struct gr_fetcher *f, int32_t leader_id, int32_t fetcher_id, int *rc)
{
    for (struct fconn *c = f->conns; c; c = c->next)
        if (c->leader_id == leader_id && c->fetcher_id == fetcher_id) return c;
    struct fconn *c = calloc(1, sizeof *c);
    if (!c) {
        *rc = -ENOMEM;
        return NULL;
    }
    c->f = f;
    c->leader_id = leader_id;
    c->fetcher_id = fetcher_id;
    if (!(c->fsc = gr_fsc_new())) {
        free(c);
        *rc = -ENOMEM;
        return NULL;
    }
    const struct gr_msg_ops *apis[2] = {f->fetch_ops, f->list_ops};
    c->bc_conn = gr_broker_client_open(f->bc, leader_id, GR_BROKER_CLIENT_REPLICA_FETCHER, fetcher_id, apis,
                                       2, on_state, c, rc);
    if (!c->bc_conn) {
        gr_fsc_free(c->fsc);
        free(c);
        return NULL;
    }
    c->next = f->conns;
    f->conns = c;
    return c;
}

/* Closes and frees `c` (its request is dropped without a callback). */
static void conn_free(struct fconn *c)
{
    struct gr_fetcher *f = c->f;
    struct fconn **pp = &f->conns;
    while (*pp != c)
        pp = &(*pp)->next;
    *pp = c->next;
    gr_broker_client_close(c->bc_conn);
    for (int i = 0; i < c->entry_count; i++)
        if (c->entries[i].fp) c->entries[i].fp->req_idx = -1;
    free(c->entries);
    gr_fsc_free(c->fsc);
    free(c);
}

static void conn_link(struct fconn *c, struct fp *fp)
{
    fp->conn = c;
    fp->cnext = NULL;
    fp->cprev = c->tail;
    if (c->tail)
        c->tail->cnext = fp;
    else
        c->head = fp;
    c->tail = fp;
    c->part_count++;
}

/* Clears `fp`'s entry in its connection's request in flight: that answer is dropped for it. */
static void fp_unrequest(struct fp *fp)
{
    struct fconn *c = fp->conn;
    if (c && fp->req_idx >= 0 && fp->req_idx < c->entry_count && c->entries[fp->req_idx].fp == fp)
        c->entries[fp->req_idx].fp = NULL;
    fp->req_idx = -1;
}

/* Takes `fp` off its connection (its entry in a request in flight is cleared). Never inside a walk. */
static void conn_unlink(struct fp *fp)
{
    struct fconn *c = fp->conn;
    if (!c) return;
    assert(c->f->depth == 0);
    fp_unrequest(fp);
    if (fp->cprev)
        fp->cprev->cnext = fp->cnext;
    else
        c->head = fp->cnext;
    if (fp->cnext)
        fp->cnext->cprev = fp->cprev;
    else
        c->tail = fp->cprev;
    fp->conn = NULL;
    c->part_count--;
}

/* ---- walks: enter/leave (see the file comment) ---- */

static void enter(struct gr_fetcher *f)
{
    f->depth++;
}

/* Frees `fp` (unhashed already) and, when it was the last on its connection, the connection (which drops its
   request in flight without a callback). Never inside a walk. */
static void fp_destroy(struct fp *fp)
{
    struct fconn *c = fp->conn;
    conn_unlink(fp);
    if (c && c->part_count == 0) conn_free(c);
    free(fp->topic);
    free(fp);
}

/* Frees the partitions removed inside the walk that just ended, and the connections they left empty. */
static void reap(struct gr_fetcher *f)
{
    f->reap = false;
    struct fconn *next;
    for (struct fconn *c = f->conns; c; c = next) {
        next = c->next;
        struct fp *fn;
        for (struct fp *fp = c->head; fp; fp = fn) {
            fn = fp->cnext;
            if (fp->removed) fp_destroy(fp); /* may free c: fn and next were read before */
        }
    }
}

static void kick(struct gr_fetcher *f);

static void leave(struct gr_fetcher *f)
{
    assert(f->depth > 0);
    if (--f->depth > 0) return;
    if (f->reap) reap(f);
    if (f->pump_soon) {
        f->pump_soon = false;
        kick(f);
    }
}

/* Takes `fp` out of the fetcher: unhashed at once (gr_fetcher_active and a new gr_fetcher_add no longer see
   it, its answer in flight is dropped); freed now, or by the outermost leave() when a walk runs. */
static void fp_drop(struct gr_fetcher *f, struct fp *fp)
{
    fp_unhash(f, fp);
    f->stats.partitions--;
    if (f->depth == 0) {
        fp_destroy(fp);
        return;
    }
    fp_unrequest(fp);
    fp->removed = true;
    f->reap = true;
}

/* ---- the INFO lines of adds and removes ---- */

/* Appends one partition's words to `n` (or counts it as left out when the line is full). */
static void note_add(struct fnote *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_add(struct fnote *n, const char *fmt, ...)
{
    char one[160];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof one || n->len + (size_t)k + 3 > sizeof n->text) {
        n->left_out++;
        return;
    }
    n->len += (size_t)snprintf(n->text + n->len, sizeof n->text - n->len, "%s%s", n->count ? ", " : "", one);
    n->count++;
}

/* Writes the pending lines (at a pump, and when the fetcher is freed). */
static void notes_flush(struct gr_fetcher *f)
{
    if (f->removed.count || f->removed.left_out)
        GR_INFO("fetcher: removed %d partition(s): %s%s", f->removed.count + f->removed.left_out,
                f->removed.text, f->removed.left_out ? ", ..." : "");
    if (f->added.count || f->added.left_out)
        GR_INFO("fetcher: added %d partition(s): %s%s", f->added.count + f->added.left_out, f->added.text,
                f->added.left_out ? ", ..." : "");
    f->added = (struct fnote){.len = 0};
    f->removed = (struct fnote){.len = 0};
}

/* ---- partition states ---- */

static const char *err_text(int err)
{
    return strerror(err < 0 ? -err : err);
}

/* A storage error (Kafka's markPartitionFailed): not fetched again until re-added; logged once. */
static void fp_fail(struct gr_fetcher *f, struct fp *fp, const char *what, int err)
{
    if (fp->failed) return;
    fp->failed = true;
    f->stats.failed_partitions++;
    GR_ERROR("fetcher: %s-%" PRId32 " marked failed: %s: %s", fp->topic, fp->partition, what, err_text(err));
}

/* The fetcher's clock (monotonic ms): the config's hook (tests), else gr_time_mono_ms. */
static int64_t now_ms(const struct gr_fetcher *f)
{
    return f->cfg.now_ms ? f->cfg.now_ms(f->cfg.clock_ctx) : gr_time_mono_ms();
}

static void fp_delay(const struct gr_fetcher *f, struct fp *fp, int64_t ms)
{
    int64_t until = now_ms(f) + ms;
    if (fp->delay_until_ms < until) fp->delay_until_ms = until;
}

/* Runs a truncation (Partition.truncateTo / truncateFullyAndStartAt); -EAGAIN keeps it to retry later.
   Returns 0 when done, 1 when waiting, -1 when the partition failed. The truncation fires waiters (a done
   hook may remove `fp`: it stays allocated until the walk ends, marked removed). */
static int fp_truncate(struct gr_fetcher *f, struct fp *fp, enum trunc_kind kind, int64_t offset)
{
    struct gr_log *log = gr_partition_log(fp->part);
    int64_t end = gr_log_end_offset(log);
    int rc = kind == TRUNC_FULLY ? gr_partition_truncate_fully_and_start_at(fp->part, offset)
                                 : gr_partition_truncate_to(fp->part, offset);
    fp->trunc = TRUNC_NONE;
    if (rc == -EAGAIN) {
        fp->trunc = kind;
        fp->trunc_offset = offset;
        fp_delay(f, fp, GR_FETCHER_RETRY_MS);
        return 1;
    }
    if (rc < 0) {
        fp_fail(f, fp, "truncation", rc);
        return -1;
    }
    if (kind == TRUNC_FULLY || offset < end) {
        f->stats.truncations++;
        GR_INFO("fetcher: %s-%" PRId32 " truncated %s %" PRId64 " (log end offset was %" PRId64 ")",
                fp->topic, fp->partition, kind == TRUNC_FULLY ? "fully, restarting at" : "to", offset, end);
    }
    fp->gate_end = -1;
    return 0;
}

/* Whether the fsync gate or a truncation's file work still holds `fp` (gr_fetcher_flushed ends the wait). */
static bool fp_waiting_disk(struct gr_fetcher *f, struct fp *fp)
{
    struct gr_log *log = gr_partition_log(fp->part);
    if (gr_log_truncation_pending(log)) return true;
    if (fp->gate_end >= 0) {
        if (!f->cfg.fsync_gate || gr_log_offline(log) || gr_log_durable_offset(log) >= fp->gate_end ||
            gr_log_end_offset(log) < fp->gate_end)
            fp->gate_end = -1;
    }
    return fp->gate_end >= 0;
}

/* Whether `fp` is out of every request until re-added (or freed at the walk's end). */
static bool fp_parked(const struct fp *fp)
{
    return fp->removed || fp->fenced || fp->failed;
}

/* Whether `fp` may go in the next request now (a truncation waiting for a retry is tried first; its waiters
   may remove `fp`). */
static bool fp_ready(struct gr_fetcher *f, struct fp *fp, int64_t now)
{
    if (fp_parked(fp) || fp->req_idx >= 0 || fp->oor != OOR_NONE || fp->delay_until_ms > now) return false;
    if (fp->trunc != TRUNC_NONE && fp_truncate(f, fp, fp->trunc, fp->trunc_offset) != 0) return false;
    return !fp->removed && !fp_waiting_disk(f, fp);
}

/* ---- requests ---- */

static int entries_reserve(struct fconn *c, int n)
{
    if (n <= c->entry_cap) return 0;
    struct fentry *e = realloc(c->entries, sizeof *e * (size_t)n);
    if (!e) return -ENOMEM;
    c->entries = e;
    c->entry_cap = n;
    return 0;
}

static int64_t own_broker_epoch(const struct gr_fetcher *f)
{
    const struct gr_image_broker *br = gr_image_broker(f->img, f->cfg.node_id);
    return br ? br->epoch : -1;
}

/* The epoch of the local log's last batch (LastFetchedEpoch, KIP-320), -1 when the log is empty. */
static int32_t last_fetched_epoch(struct gr_log *log)
{
    int64_t end = gr_log_end_offset(log);
    return end > gr_log_start_offset(log) ? gr_log_epoch_for_offset(log, end - 1) : -1;
}

static void on_fetch(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                     struct gr_broker_client_answer *ans);
static void on_list(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                    struct gr_broker_client_answer *ans);

/* Fills one Fetch partition for `fp` and its entry. */
static void fetch_partition(struct fconn *c, struct fp *fp, struct gr_fetch_request_fetch_partition *p)
{
    struct gr_fetcher *f = c->f;
    struct gr_log *log = gr_partition_log(fp->part);
    gr_fetch_request_fetch_partition_init(p);
    p->partition = fp->partition;
    p->current_leader_epoch = fp->leader_epoch;
    p->fetch_offset = gr_log_end_offset(log);
    p->last_fetched_epoch = last_fetched_epoch(log);
    p->log_start_offset = gr_log_start_offset(log);
    p->partition_max_bytes = f->cfg.partition_max_bytes;
    fp->req_idx = c->entry_count;
    c->entries[c->entry_count++] = (struct fentry){fp, p->fetch_offset, fp->leader_epoch};
}

/* Collects the ready partitions of `c` (at most `cap`: partitions a done hook fired by fp_ready adds to the
   list are left for the next request): their Fetch fields in parts[], their fp in fps[] (still allocated
   until the walk ends even when a done hook removes one) and their entries, each named to the session
   builder (gr_fsc_add). Returns 0 or the builder's -ENOMEM. */
static int fetch_collect(struct fconn *c, struct gr_fetch_request_fetch_partition *parts, struct fp **fps,
                         int cap, int64_t now)
{
    for (struct fp *fp = c->head; fp && c->entry_count < cap; fp = fp->cnext) {
        if (!fp_ready(c->f, fp, now)) continue;
        int i = c->entry_count;
        fetch_partition(c, fp, &parts[i]);
        fps[i] = fp;
        struct gr_fsc_part sp = {.topic = fp->topic,
                                 .partition = fp->partition,
                                 .fetch_offset = parts[i].fetch_offset,
                                 .log_start_offset = parts[i].log_start_offset,
                                 .current_leader_epoch = parts[i].current_leader_epoch,
                                 .last_fetched_epoch = parts[i].last_fetched_epoch,
                                 .partition_max_bytes = parts[i].partition_max_bytes};
        memcpy(sp.topic_id, fp->topic_id, 16);
        int rc = gr_fsc_add(c->fsc, &sp);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Fills the request's topics with the partitions the plan carries (all of a full fetch; the added and changed
   of an incremental one), copied in order into out[]; consecutive ones of one topic share a topic entry.
   Returns the topic count. */
static int fetch_topics(const struct gr_fsc_plan *plan, struct fp *const *fps,
                        const struct gr_fetch_request_fetch_partition *parts,
                        struct gr_fetch_request_fetch_topic *topics,
                        struct gr_fetch_request_fetch_partition *out)
{
    int nt = 0;
    const struct fp *prev = NULL;
    for (int32_t k = 0; k < plan->send_count; k++) {
        const struct fp *fp = fps[plan->send[k]];
        if (!prev || strcmp(prev->topic, fp->topic) != 0 || memcmp(prev->topic_id, fp->topic_id, 16) != 0) {
            struct gr_fetch_request_fetch_topic *t = &topics[nt++];
            gr_fetch_request_fetch_topic_init(t);
            t->topic = gr_str_c(fp->topic);
            memcpy(t->topic_id.b, fp->topic_id, 16);
            t->partitions.items = &out[k];
            t->partitions.count = 0;
        }
        out[k] = parts[plan->send[k]];
        topics[nt - 1].partitions.count++;
        prev = fp;
    }
    return nt;
}

/* Fills forgotten_topics_data from the plan (consecutive partitions of one topic share an entry; by name
   before v13, by id from v13: both are set, the codec writes the version's). Returns the entry count. */
static int forgotten_topics(const struct gr_fsc_plan *plan, struct gr_fetch_request_forgotten_topic *ft,
                            int32_t *ids)
{
    int nt = 0;
    const struct gr_fsc_forgotten *prev = NULL;
    for (int32_t k = 0; k < plan->forgotten_count; k++) {
        const struct gr_fsc_forgotten *g = &plan->forgotten[k];
        if (!prev || strcmp(prev->topic, g->topic) != 0 || memcmp(prev->topic_id, g->topic_id, 16) != 0) {
            gr_fetch_request_forgotten_topic_init(&ft[nt]);
            ft[nt].topic = gr_str_c(g->topic);
            memcpy(ft[nt].topic_id.b, g->topic_id, 16);
            ft[nt].partitions.items = &ids[k];
            ft[nt++].partitions.count = 0;
        }
        ids[k] = g->partition;
        ft[nt - 1].partitions.count++;
        prev = g;
    }
    return nt;
}

/* Every partition of the request just built is released (it was not sent). */
static void entries_drop(struct fconn *c)
{
    for (int i = 0; i < c->entry_count; i++)
        if (c->entries[i].fp) c->entries[i].fp->req_idx = -1;
    c->entry_count = 0;
}

/* The buffers of one Fetch being built (freed once it is encoded). */
struct fetch_bufs {
    struct gr_fetch_request_fetch_partition *parts, *sent;
    struct gr_fetch_request_fetch_topic *topics;
    struct fp **fps;
    struct gr_fetch_request_forgotten_topic *forgotten;
    int32_t *forgotten_ids;
};

static void fetch_bufs_free(struct fetch_bufs *b)
{
    free(b->parts);
    free(b->sent);
    free(b->topics);
    free(b->fps);
    free(b->forgotten);
    free(b->forgotten_ids);
}

/* Fills `req` from the plan (topics, forgotten_topics_data, session id and epoch) into `b`. 0 or -ENOMEM. */
static int fetch_fill(struct fconn *c, const struct gr_fsc_plan *plan, struct fetch_bufs *b,
                      struct gr_fetch_request *req)
{
    struct gr_fetcher *f = c->f;
    size_t nf = plan->forgotten_count > 0 ? (size_t)plan->forgotten_count : 1;
    b->forgotten = malloc(sizeof *b->forgotten * nf);
    b->forgotten_ids = malloc(sizeof *b->forgotten_ids * nf);
    if (!b->forgotten || !b->forgotten_ids) return -ENOMEM;
    gr_fetch_request_init(req);
    req->replica_id = f->cfg.node_id;
    req->replica_state.replica_id = f->cfg.node_id;
    req->replica_state.replica_epoch = own_broker_epoch(f);
    req->max_wait_ms = f->cfg.max_wait_ms;
    req->min_bytes = f->cfg.min_bytes;
    req->max_bytes = f->cfg.response_max_bytes;
    req->isolation_level = 0;
    req->session_id = plan->session_id; /* KIP-227: FetchSessionHandler's metadata */
    req->session_epoch = plan->session_epoch;
    req->topics.items = b->topics;
    req->topics.count = fetch_topics(plan, b->fps, b->parts, b->topics, b->sent);
    req->forgotten_topics_data.items = b->forgotten;
    req->forgotten_topics_data.count = forgotten_topics(plan, b->forgotten, b->forgotten_ids);
    return 0;
}

/* Sends one Fetch with every ready partition of `c` (AbstractFetcherThread.maybeFetch, buildFetch), through
   the connection's fetch session: a full fetch names them all, an incremental one only the partitions added
   or changed since the last request and forgets the ones not ready now (Kafka's replica fetcher does the
   same: a partition delayed or waiting leaves the session and comes back with its next fetch). */
static void send_fetch(struct fconn *c, int64_t now)
{
    struct gr_fetcher *f = c->f;
    int n = c->part_count;
    struct fetch_bufs b = {
        .parts = malloc(sizeof *b.parts * (size_t)n),
        .sent = malloc(sizeof *b.sent * (size_t)n),
        .topics = malloc(sizeof *b.topics * (size_t)n),
        .fps = malloc(sizeof *b.fps * (size_t)n),
    };
    if (!b.parts || !b.sent || !b.topics || !b.fps || entries_reserve(c, n) < 0) goto out;
    c->entry_count = 0;
    gr_fsc_begin(c->fsc);
    int rc = fetch_collect(c, b.parts, b.fps, n, now);
    if (c->entry_count == 0) goto out;
    int16_t version = gr_broker_client_version(c->bc_conn, f->fetch_ops);
    struct gr_fsc_plan plan = {.full = true};
    if (rc == 0) rc = gr_fsc_build(c->fsc, version >= 13, &plan);
    /* topic names when a topic has no id (Kafka's buildFetch without topic ids): the plan says so */
    if (rc == 0 && !plan.topic_ids && version > 12) version = 12;
    struct gr_fetch_request req;
    if (rc == 0) rc = fetch_fill(c, &plan, &b, &req);
    if (rc == 0 && version >= 12)
        c->req = gr_broker_client_send(c->bc_conn, f->fetch_ops, version, &req, 0, on_fetch, c, &rc);
    if (!c->req) {
        GR_WARN_RATELIMITED("fetcher: Fetch to broker %" PRId32 " not sent (version %d): %s", c->leader_id,
                            version, version >= 12 ? err_text(rc) : "the leader serves no Fetch v12+");
        gr_fsc_failed(c->fsc);                   /* the next one is full (FetchSessionHandler.handleError) */
        for (int i = 0; i < c->entry_count; i++) /* an entry is NULL when a done hook removed it */
            if (c->entries[i].fp) fp_delay(f, c->entries[i].fp, f->cfg.backoff_ms);
        entries_drop(c);
        goto out;
    }
    c->cursor = 0;
    f->stats.fetches_sent++;
    if (!plan.full) f->stats.fetches_incremental++;
out:
    fetch_bufs_free(&b);
}

/* Whether `fp` waits for a ListOffsets answer (out of range) and may ask now. */
static bool listable(const struct fp *fp, int64_t now)
{
    return fp->oor != OOR_NONE && !fp_parked(fp) && fp->delay_until_ms <= now;
}

/* Fills the ListOffsets topics and partitions (latest or earliest by each one's phase) and the entries of
   `c`'s request; returns the topic count. */
static int list_topics(struct fconn *c, struct gr_list_offsets_request_list_offsets_topic *topics,
                       struct gr_list_offsets_request_list_offsets_partition *parts, int cap, int64_t now)
{
    int nt = 0;
    struct fp *prev = NULL;
    c->entry_count = 0;
    for (struct fp *fp = c->head; fp && c->entry_count < cap; fp = fp->cnext) {
        if (!listable(fp, now)) continue;
        if (!prev || strcmp(prev->topic, fp->topic) != 0) {
            gr_list_offsets_request_list_offsets_topic_init(&topics[nt]);
            topics[nt].name = gr_str_c(fp->topic);
            topics[nt].partitions.items = &parts[c->entry_count];
            topics[nt++].partitions.count = 0;
        }
        struct gr_list_offsets_request_list_offsets_partition *p = &parts[c->entry_count];
        gr_list_offsets_request_list_offsets_partition_init(p);
        p->partition_index = fp->partition;
        p->current_leader_epoch = fp->leader_epoch;
        p->timestamp = fp->oor == OOR_LATEST ? -1 : -2; /* ListOffsets LATEST / EARLIEST */
        topics[nt - 1].partitions.count++;
        fp->req_idx = c->entry_count;
        c->entries[c->entry_count++] = (struct fentry){fp, p->timestamp, fp->leader_epoch};
        prev = fp;
    }
    return nt;
}

/* Sends one ListOffsets for the out-of-range partitions of `c` (RemoteLeaderEndPoint.fetchLatestOffset /
   fetchEarliestOffset, ReplicaId = this broker: the leader answers its log end offset, not its high
   watermark). Returns whether one was sent. */
static bool send_list(struct fconn *c, int64_t now)
{
    struct gr_fetcher *f = c->f;
    int n = 0;
    for (struct fp *fp = c->head; fp; fp = fp->cnext)
        n += listable(fp, now);
    if (n == 0) return false;
    struct gr_list_offsets_request_list_offsets_topic *topics = malloc(sizeof *topics * (size_t)n);
    struct gr_list_offsets_request_list_offsets_partition *parts = malloc(sizeof *parts * (size_t)n);
    bool sent = false;
    if (!topics || !parts || entries_reserve(c, n) < 0) goto out;
    struct gr_list_offsets_request req;
    gr_list_offsets_request_init(&req);
    req.replica_id = f->cfg.node_id;
    req.isolation_level = 0;
    req.topics.count = list_topics(c, topics, parts, n, now);
    req.topics.items = topics;
    int rc = 0;
    int16_t version = gr_broker_client_version(c->bc_conn, f->list_ops);
    c->req = gr_broker_client_send(c->bc_conn, f->list_ops, version, &req, 0, on_list, c, &rc);
    if (!c->req) {
        for (int i = 0; i < c->entry_count; i++)
            if (c->entries[i].fp) fp_delay(f, c->entries[i].fp, f->cfg.backoff_ms);
        entries_drop(c);
        goto out;
    }
    c->cursor = 0;
    sent = true;
out:
    free(topics);
    free(parts);
    return sent;
}

/* Whether a partition of `c` waits for the fsync of what it appended: the connection's next Fetch waits for
   it too (fsyncs are short; a Fetch sent without it would hold it back for up to replica.fetch.wait.max.ms).
 */
static bool conn_gated(struct fconn *c)
{
    for (struct fp *fp = c->head; fp; fp = fp->cnext)
        if (fp->gate_end >= 0 && !fp_parked(fp) && fp_waiting_disk(c->f, fp)) return true;
    return false;
}

/* Sends the next request of `c` when it is ready and idle: ListOffsets first, else Fetch. */
static void conn_pump(struct fconn *c)
{
    if (c->req || c->part_count == 0 || !gr_broker_client_ready(c->bc_conn)) return;
    int64_t now = now_ms(c->f);
    if (!send_list(c, now) && !conn_gated(c)) send_fetch(c, now);
}

static void pump_all(struct gr_fetcher *f)
{
    notes_flush(f);
    enter(f); /* a done hook fired by a pump frees nothing: the lists stay walkable */
    for (struct fconn *c = f->conns; c; c = c->next)
        conn_pump(c);
    timer_arm(f);
    leave(f);
}

/* Ends the request of `c` (its entries released) at the end of its callback, inside its walk (the outermost
   leave() frees `c` when the callback took its last partition away). */
static void request_done(struct fconn *c)
{
    entries_drop(c);
    c->req = NULL;
    pump_all(c->f);
}

/* The entry answering (topic by id or name, partition), or NULL; each entry answers once. */
static struct fentry *entry_match(struct fconn *c, const uint8_t *topic_id, struct gr_str topic,
                                  int32_t partition)
{
    for (int k = 0; k < c->entry_count; k++) {
        int i = (c->cursor + k) % c->entry_count;
        struct fentry *e = &c->entries[i];
        if (!e->fp || e->fp->partition != partition) continue;
        if (topic_id ? memcmp(e->fp->topic_id, topic_id, 16) != 0 : !gr_str_eq_c(topic, e->fp->topic))
            continue;
        c->cursor = i + 1;
        return e;
    }
    return NULL;
}

static void conn_failed_all(struct fconn *c)
{
    for (int i = 0; i < c->entry_count; i++)
        if (c->entries[i].fp) fp_delay(c->f, c->entries[i].fp, c->f->cfg.backoff_ms);
}

/* ---- Fetch answers (AbstractFetcherThread.processFetchRequest) ---- */

/* The offset to truncate to on a DivergingEpoch (AbstractFetcherThread.getOffsetTruncationState). */
static int64_t diverging_target(struct fp *fp, int64_t fetch_offset, int32_t leader_epoch, int64_t leader_end)
{
    struct gr_log *log = gr_partition_log(fp->part);
    int64_t leo = gr_log_end_offset(log);
    if (leader_end < 0) return fetch_offset;
    if (leader_epoch < 0) return leader_end < leo ? leader_end : leo;
    int64_t end;
    int32_t epoch;
    if (gr_log_end_offset_for_epoch(log, leader_epoch, &end, &epoch) == 0) {
        if (epoch == leader_epoch && leader_end < end) end = leader_end;
        return end < leo ? end : leo;
    }
    /* below the first epoch known here: LeaderEpochFileCache.endOffsetFor answers the first entry's start
       (the log start offset, the cache being cut there); above the latest: the leader's end offset */
    int32_t first = gr_log_epoch_for_offset(log, gr_log_start_offset(log));
    if (first >= 0 && leader_epoch < first)
        end = gr_log_start_offset(log);
    else
        end = leader_end;
    if (end > leader_end) end = leader_end;
    return end < leo ? end : leo;
}

/* Appends an answer's records and takes the leader's log start offset and high watermark
   (ReplicaFetcherThread.processPartitionData). */
static void take_records(struct gr_fetcher *f, struct fp *fp,
                         const struct gr_fetch_response_partition_data *p)
{
    struct gr_log *log = gr_partition_log(fp->part);
    int32_t len = gr_records_len(p->records);
    if (len > 0) {
        if (p->records.kind != GR_RECORDS_MEM) return;
        struct gr_append_result res = {.base_offset = -1, .last_offset = -1};
        int rc = gr_partition_append_as_follower(fp->part, p->records.mem.ptr, (size_t)len, fp->leader_epoch,
                                                 &res);
        if (rc == 0) f->stats.batches_bytes += len;
        if (fp->removed) return; /* a done hook the append fired removed it: nothing more is taken */
        if (rc == -EAGAIN) {
            fp_delay(f, fp, GR_FETCHER_RETRY_MS);
            return;
        }
        if (rc == -ENOSPC || rc == -EDQUOT) {
            /* A full log dir: storage undid the partial write and the log is whole (storage/log.c
               write_batch), so the fetch is retried after the back-off and resumes once space is freed; the
               partition falls out of the ISR meanwhile (replica.lag.time.max.ms). Kafka takes the log dir
               offline instead (LogDirFailureChannel), which halts a broker with one log dir; marking only
               this partition failed would leave it out of every ISR until a restart. */
            GR_WARN_RATELIMITED("fetcher: %s-%" PRId32 ": records from broker %" PRId32
                                " not appended: %s; retried",
                                fp->topic, fp->partition, fp->leader_id, err_text(rc));
            f->stats.append_nospace++;
            fp_delay(f, fp, f->cfg.backoff_ms);
            if (f->cfg.fsync_gate && gr_log_durable_offset(log) < gr_log_end_offset(log)) {
                fp->gate_end = gr_log_end_offset(log); /* the chunks written before the failure */
                gr_log_flush_async(log);
            }
            return;
        }
        if (rc == -EBADMSG || rc == -ESTALE || rc == -EPERM) { /* Kafka: CorruptRecordException: retried */
            GR_WARN_RATELIMITED("fetcher: %s-%" PRId32 ": records from broker %" PRId32 " not appended: %s",
                                fp->topic, fp->partition, fp->leader_id, err_text(rc));
            fp_delay(f, fp, f->cfg.backoff_ms);
            return;
        }
        if (rc < 0) {
            fp_fail(f, fp, "append", rc);
            return;
        }
        if (f->cfg.fsync_gate && gr_log_durable_offset(log) < gr_log_end_offset(log)) {
            fp->gate_end = gr_log_end_offset(log);
            gr_log_flush_async(log);
        }
    }
    /* the high watermark first, then the log start offset, as ReplicaFetcherThread.processPartitionData:
       the log start offset never passes a high watermark that the same answer raises */
    if (p->high_watermark >= 0) gr_partition_set_follower_high_watermark(fp->part, p->high_watermark);
    if (fp->removed) return;
    if (p->log_start_offset >= 0) {
        int rc = gr_partition_raise_log_start_offset(fp->part, p->log_start_offset);
        if (rc < 0 && rc != -EAGAIN && rc != -EPERM) fp_fail(f, fp, "log start offset", rc);
    }
}

static void take_partition(struct gr_fetcher *f, struct fentry *e,
                           const struct gr_fetch_response_partition_data *p)
{
    struct fp *fp = e->fp;
    if (e->leader_epoch != fp->leader_epoch ||
        e->fetch_offset != gr_log_end_offset(gr_partition_log(fp->part)))
        return; /* the log moved meanwhile: refetched from where it is */
    switch (p->error_code) {
    case GR_ERR_NONE:
        if (p->diverging_epoch.epoch >= 0 || p->diverging_epoch.end_offset >= 0) {
            int64_t to = diverging_target(fp, e->fetch_offset, p->diverging_epoch.epoch,
                                          p->diverging_epoch.end_offset);
            fp_truncate(f, fp, TRUNC_TO, to); /* records and watermarks wait for the next fetch, as Kafka */
            return;
        }
        take_records(f, fp, p);
        return;
    case GR_ERR_OFFSET_OUT_OF_RANGE: /* AbstractFetcherThread.handleOutOfRangeError logs it at INFO */
        GR_LOG_RATELIMITED(GR_LOG_INFO,
                           "fetcher: %s-%" PRId32 ": offset %" PRId64 " out of range at broker %" PRId32
                           " (leader epoch %" PRId32 "): asking its log end and start offsets",
                           fp->topic, fp->partition, e->fetch_offset, fp->leader_id, fp->leader_epoch);
        fp->oor = OOR_LATEST;
        return;
    case GR_ERR_FENCED_LEADER_EPOCH: /* AbstractFetcherThread.onPartitionFenced */
        fp->fenced = true;
        GR_INFO("fetcher: %s-%" PRId32 ": leader epoch %" PRId32 " fenced by broker %" PRId32
                "; waiting for a newer one",
                fp->topic, fp->partition, fp->leader_epoch, fp->leader_id);
        return;
    case GR_ERR_NOT_LEADER_OR_FOLLOWER: /* a leadership move in progress: Kafka's AbstractFetcherThread */
    case GR_ERR_UNKNOWN_LEADER_EPOCH:   /* logs both at DEBUG; retried after the backoff */
        GR_LOG_RATELIMITED(GR_LOG_INFO,
                           "fetcher: %s-%" PRId32 ": broker %" PRId32 " answered %s at leader epoch %" PRId32
                           " (a leadership move in progress); retrying",
                           fp->topic, fp->partition, fp->leader_id,
                           p->error_code == GR_ERR_UNKNOWN_LEADER_EPOCH ? "UNKNOWN_LEADER_EPOCH"
                                                                        : "NOT_LEADER_OR_FOLLOWER",
                           fp->leader_epoch);
        fp_delay(f, fp, f->cfg.backoff_ms);
        return;
    default: /* UNKNOWN_TOPIC_*, storage errors, ...: retried after the backoff */
        GR_WARN_RATELIMITED("fetcher: %s-%" PRId32 ": error %d from broker %" PRId32, fp->topic,
                            fp->partition, (int)p->error_code, fp->leader_id);
        fp_delay(f, fp, f->cfg.backoff_ms);
        return;
    }
}

static void on_fetch(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                     struct gr_broker_client_answer *ans)
{
    (void)ans;
    struct fconn *c = ctx;
    struct gr_fetcher *f = c->f;
    const struct gr_fetch_response *r = resp;
    enter(f);
    if (st != GR_BROKER_CLIENT_OK) {
        GR_WARN_RATELIMITED("fetcher: Fetch to broker %" PRId32 " failed: %s", c->leader_id,
                            gr_broker_client_status_name(st));
        gr_fsc_failed(c->fsc); /* FetchSessionHandler.handleError: the next fetch is full */
        f->stats.session_resets++;
        conn_failed_all(c);
    } else if (!gr_fsc_response(c->fsc, r, version)) { /* FetchSessionHandler.handleResponse said no */
        f->stats.session_resets++;
        if (r->error_code == GR_ERR_FETCH_SESSION_ID_NOT_FOUND ||
            r->error_code == GR_ERR_INVALID_FETCH_SESSION_EPOCH || r->error_code == GR_ERR_NONE) {
            /* Kafka's RemoteLeaderEndPoint.fetch: nothing taken, no backoff; the next fetch is full */
            GR_LOG_RATELIMITED(GR_LOG_INFO,
                               "fetcher: broker %" PRId32 " answered the fetch session's request with %s"
                               "; the next fetch is full",
                               c->leader_id,
                               r->error_code == GR_ERR_NONE ? "partitions outside the session"
                                                            : gr_error_name(r->error_code));
        } else { /* FETCH_SESSION_TOPIC_ID_ERROR (Kafka throws it: a backoff) and any other error */
            GR_WARN_RATELIMITED("fetcher: Fetch to broker %" PRId32 " failed: error %d", c->leader_id,
                                (int)r->error_code);
            conn_failed_all(c);
        }
    } else { /* an incremental answer omits the partitions without news: absent is neither error nor data */
        for (int32_t t = 0; t < r->responses.count; t++) {
            const struct gr_fetch_response_fetchable_topic_response *tr = &r->responses.items[t];
            for (int32_t i = 0; i < tr->partitions.count; i++) {
                const struct gr_fetch_response_partition_data *p = &tr->partitions.items[i];
                struct fentry *e =
                    entry_match(c, version >= 13 ? tr->topic_id.b : NULL, tr->topic, p->partition_index);
                if (!e) continue; /* not asked, answered twice, or removed since */
                struct fp *fp = e->fp;
                e->fp = NULL;
                fp->req_idx = -1;
                take_partition(f, &(struct fentry){fp, e->fetch_offset, e->leader_epoch}, p);
            }
        }
    }
    request_done(c);
    leave(f);
}

/* ---- ListOffsets answers (AbstractFetcherThread.fetchOffsetAndTruncate) ---- */

static void take_offset(struct gr_fetcher *f, struct fp *fp,
                        const struct gr_list_offsets_response_list_offsets_partition_response *p)
{
    struct gr_log *log = gr_partition_log(fp->part);
    int64_t leo = gr_log_end_offset(log);
    if (p->error_code == GR_ERR_FENCED_LEADER_EPOCH) {
        fp->fenced = true;
        return;
    }
    if (p->error_code != GR_ERR_NONE || p->offset < 0) {
        fp_delay(f, fp, f->cfg.backoff_ms);
        return;
    }
    if (fp->oor == OOR_LATEST) {
        fp->oor_leader_end = p->offset;
        if (p->offset < leo) { /* an unclean election: the leader has less */
            fp->oor = OOR_NONE;
            fp_truncate(f, fp, TRUNC_TO, p->offset);
        } else {
            fp->oor = OOR_EARLIEST;
        }
        return;
    }
    fp->oor = OOR_NONE;
    if (p->offset > leo) fp_truncate(f, fp, TRUNC_FULLY, p->offset); /* behind the leader's log start */
}

static void on_list(void *ctx, enum gr_broker_client_status st, const void *resp, int16_t version,
                    struct gr_broker_client_answer *ans)
{
    (void)ans;
    (void)version;
    struct fconn *c = ctx;
    struct gr_fetcher *f = c->f;
    const struct gr_list_offsets_response *r = resp;
    enter(f);
    if (st != GR_BROKER_CLIENT_OK) {
        conn_failed_all(c);
    } else {
        for (int32_t t = 0; t < r->topics.count; t++) {
            const struct gr_list_offsets_response_list_offsets_topic_response *tr = &r->topics.items[t];
            for (int32_t i = 0; i < tr->partitions.count; i++) {
                const struct gr_list_offsets_response_list_offsets_partition_response *p =
                    &tr->partitions.items[i];
                struct fentry *e = entry_match(c, NULL, tr->name, p->partition_index);
                if (!e) continue;
                struct fp *fp = e->fp;
                e->fp = NULL;
                fp->req_idx = -1;
                if (e->leader_epoch == fp->leader_epoch && fp->oor != OOR_NONE) take_offset(f, fp, p);
            }
        }
    }
    request_done(c);
    leave(f);
}

static void on_state(void *ctx, struct gr_broker_client_conn *conn, bool ready)
{
    (void)conn;
    struct fconn *c = ctx;
    if (ready) pump_all(c->f);
}

/* ---- the timers ---- */

/* When `timer` must look at idle, ready connection `c` again at the latest, given the clock's `now`:
   INT64_MAX when never (nothing on it to fetch until re-added). A delayed partition: at the end of its delay.
   One waiting on disk, or held by the connection's fsync gate: the backstop disk_poll_ms (gr_fetcher_flushed
   normally comes first). One ready by every look: GR_FETCHER_RELOOK_MS (the pump looked at an earlier clock,
   or could not build its request). Nothing is assumed about a partition the pump just left out: its disk wait
   may have ended since (a flusher or I/O thread moves the durable offset and clears a pending truncation) or
   its delay may have run out on the next millisecond, so each is looked at again; a timer armed only for the
   partitions still waiting when it looked left a connection idle for good (issue #20, the RF 3 fault runs).
 */
static int64_t conn_wake_at(struct fconn *c, int64_t now)
{
    struct gr_fetcher *f = c->f;
    bool gated = conn_gated(c);
    int64_t wake = INT64_MAX;
    for (struct fp *fp = c->head; fp; fp = fp->cnext) {
        if (fp_parked(fp)) continue; /* until re-added */
        int64_t at = fp->delay_until_ms > now          ? fp->delay_until_ms
                     : gated || fp_waiting_disk(f, fp) ? now + f->cfg.disk_poll_ms
                                                       : now + GR_FETCHER_RELOOK_MS;
        if (at < wake) wake = at;
    }
    return wake;
}

/* Arms `timer` for the earliest moment a partition of an idle, ready connection may become ready
   (conn_wake_at); stopped when no connection is idle with a partition to fetch (an answer or a connection
   becoming ready pumps the others). */
static void timer_arm(struct gr_fetcher *f)
{
    int64_t now = now_ms(f), wake = INT64_MAX;
    for (struct fconn *c = f->conns; c; c = c->next) {
        if (c->req || !gr_broker_client_ready(c->bc_conn)) continue; /* its answer or readiness pumps it */
        int64_t at = conn_wake_at(c, now);
        if (at < wake) wake = at;
    }
    ev_timer_stop(f->loop, &f->timer);
    if (wake == INT64_MAX) return;
    ev_timer_set(&f->timer, (double)(wake - now) / 1000.0, 0.0);
    ev_timer_start(f->loop, &f->timer);
}

/* Pumps from the loop's next iteration: an owner adding many partitions in one pass gets them into one Fetch
   per connection. */
static void kick(struct gr_fetcher *f)
{
    ev_timer_stop(f->loop, &f->timer);
    ev_timer_set(&f->timer, 0.0, 0.0);
    ev_timer_start(f->loop, &f->timer);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    pump_all(w->data);
}

/* `wake`: pumps each connection gr_fetcher_flushed marked, once. `timer` is left as it is: it was armed for
   every idle connection at the last arming and a pump only ends waits (a connection that sends is no longer
   idle: its answer pumps it; one still waiting keeps its backstop), so it fires at worst for nothing. */
static void on_wake(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    struct gr_fetcher *f = w->data;
    enter(f);
    for (struct fconn *c = f->conns; c; c = c->next)
        if (c->woken) {
            c->woken = false;
            conn_pump(c);
        }
    leave(f);
}

/* ---- the interface ---- */

/* The codec's request row named `name` (protocol/gen/messages.h). */
static const struct gr_msg_ops *request_row(const char *name)
{
    for (int i = 0; i < gr_msg_ops_count; i++)
        if (!strcmp(gr_msg_ops_table[i].name, name)) return &gr_msg_ops_table[i];
    return NULL;
}

struct gr_fetcher *gr_fetcher_new(struct ev_loop *loop, struct gr_broker_client *bc, struct gr_image *img,
                                  const struct gr_fetcher_config *cfg, char *err, size_t err_len)
{
    const char *bad = !loop || !bc || !img || !cfg ? "missing argument"
                      : cfg->node_id < 0           ? "node.id < 0"
                      : cfg->num_fetchers < 1 || cfg->num_fetchers > GR_REPLICA_FETCHERS_MAX
                          ? "num.replica.fetchers"
                      : cfg->max_wait_ms < 0         ? "replica.fetch.wait.max.ms"
                      : cfg->min_bytes < 0           ? "replica.fetch.min.bytes"
                      : cfg->partition_max_bytes < 1 ? "replica.fetch.max.bytes"
                      : cfg->response_max_bytes < 1  ? "replica.fetch.response.max.bytes"
                      : cfg->backoff_ms < 0          ? "replica.fetch.backoff.ms"
                      : cfg->disk_poll_ms < 0        ? "disk_poll_ms"
                                                     : NULL;
    if (bad) {
        snprintf(err, err_len, "fetcher: bad config: %s", bad);
        return NULL;
    }
    struct gr_fetcher *f = calloc(1, sizeof *f);
    if (f) f->buckets = calloc(64, sizeof *f->buckets);
    if (!f || !f->buckets) {
        free(f);
        snprintf(err, err_len, "fetcher: out of memory");
        return NULL;
    }
    f->bucket_count = 64;
    f->loop = loop;
    f->bc = bc;
    f->img = img;
    f->cfg = *cfg;
    if (f->cfg.disk_poll_ms == 0) f->cfg.disk_poll_ms = GR_FETCHER_DISK_POLL_MS;
    f->fetch_ops = request_row("fetch_request");
    f->list_ops = request_row("list_offsets_request");
    ev_timer_init(&f->timer, on_timer, 0.0, 0.0);
    f->timer.data = f;
    ev_timer_init(&f->wake, on_wake, 0.0, 0.0);
    f->wake.data = f;
    return f;
}

void gr_fetcher_free(struct gr_fetcher *f)
{
    if (!f) return;
    assert(f->depth == 0 && "gr_fetcher_free inside a fetcher callback");
    notes_flush(f);
    ev_timer_stop(f->loop, &f->timer);
    ev_timer_stop(f->loop, &f->wake);
    for (size_t i = 0; i < f->bucket_count; i++)
        while (f->buckets[i])
            fp_drop(f, f->buckets[i]);
    while (f->conns)
        conn_free(f->conns);
    free(f->buckets);
    free(f);
}

/* A new fetch state for `fp` at `leader_epoch` on the same leader
   (AbstractFetcherThread.partitionFetchState): its answer in flight is ignored; nothing moves on the
   connection's list (safe inside a walk). */
static void fp_restart(struct fp *fp, int32_t leader_epoch)
{
    fp_unrequest(fp);
    fp->leader_epoch = leader_epoch;
    fp->delay_until_ms = 0;
    fp->gate_end = -1;
    fp->oor = OOR_NONE;
    fp->trunc = TRUNC_NONE;
}

/* Makes a partition fetched from (leader, epoch), on the connection of (leader, fetcher id), at the end of
   its list; not hashed yet. Returns 0 with *out, or -ENOMEM or the client's open error. */
static int fp_new(struct gr_fetcher *f, struct gr_partition *part, const char *topic,
                  const uint8_t topic_id[16], int32_t partition, int32_t leader_id, int32_t leader_epoch,
                  struct fp **out)
{
    struct fp *fp = calloc(1, sizeof *fp);
    if (!fp || !(fp->topic = strdup(topic)) || fp_table_grow(f) < 0) {
        if (fp) free(fp->topic);
        free(fp);
        return -ENOMEM;
    }
    fp->part = part;
    memcpy(fp->topic_id, topic_id, 16);
    fp->partition = partition;
    fp->fetcher_id = fetcher_id_of(topic, partition, f->cfg.num_fetchers);
    fp->leader_id = leader_id;
    fp->leader_epoch = leader_epoch;
    fp->req_idx = -1;
    fp->gate_end = -1;
    int rc = 0;
    struct fconn *c = conn_get(f, leader_id, fp->fetcher_id, &rc);
    if (!c) {
        free(fp->topic);
        free(fp);
        return rc;
    }
    conn_link(c, fp);
    *out = fp;
    return 0;
}

/* An entry point called from inside a walk (a done hook the fetcher fired) pumps when the walk ends. */
static void kick_or_defer(struct gr_fetcher *f)
{
    if (f->depth > 0)
        f->pump_soon = true;
    else
        kick(f);
}

int gr_fetcher_add(struct gr_fetcher *f, struct gr_partition *part, const char *topic,
                   const uint8_t topic_id[16], int32_t partition, int32_t leader_id, int32_t leader_epoch)
{
    if (!f || !part || !topic || !*topic || strlen(topic) > GR_TOPIC_NAME_BYTES_MAX || !topic_id ||
        partition < 0 || leader_id < 0 || leader_id == f->cfg.node_id || leader_epoch < 0)
        return -EINVAL;
    struct fp *old = fp_find(f, part);
    int64_t from = gr_log_end_offset(gr_partition_log(part));
    if (old && old->leader_id == leader_id) { /* same connection */
        if (old->leader_epoch != leader_epoch || old->fenced || old->failed)
            note_add(&f->added,
                     "%s-%" PRId32 " (broker %" PRId32 ", leader epoch %" PRId32 ", offset %" PRId64 ")",
                     topic, partition, leader_id, leader_epoch, from);
        if (old->leader_epoch != leader_epoch) fp_restart(old, leader_epoch);
        old->fenced = old->failed = false;
        kick_or_defer(f);
        return 0;
    }
    if (!old && f->stats.partitions >= GR_FETCHER_PARTITIONS_MAX) return -ENOSPC;
    struct fp *fp = NULL;
    int rc = fp_new(f, part, topic, topic_id, partition, leader_id, leader_epoch, &fp);
    if (rc < 0) return rc;
    char was[32] = "";
    if (old) snprintf(was, sizeof was, ", was broker %" PRId32, old->leader_id);
    if (old) fp_drop(f, old); /* a new leader: a new fetch state on its connection (the old one may close) */
    note_add(&f->added, "%s-%" PRId32 " (broker %" PRId32 ", leader epoch %" PRId32 ", offset %" PRId64 "%s)",
             topic, partition, leader_id, leader_epoch, from, was);
    size_t k = bucket_of(f, part);
    fp->hnext = f->buckets[k];
    f->buckets[k] = fp;
    f->stats.partitions++;
    kick_or_defer(f);
    return 0;
}

void gr_fetcher_remove(struct gr_fetcher *f, struct gr_partition *part)
{
    struct fp *fp = f ? fp_find(f, part) : NULL;
    if (!fp) return;
    note_add(&f->removed, "%s-%" PRId32 " (broker %" PRId32 ")", fp->topic, fp->partition, fp->leader_id);
    fp_drop(f, fp);
    kick_or_defer(f); /* not timer_arm: that would cancel the pump an add of the same pass scheduled (kick) */
}

void gr_fetcher_flushed(struct gr_fetcher *f, struct gr_partition *part)
{
    struct fp *fp = f ? fp_find(f, part) : NULL;
    if (!fp || fp_parked(fp)) return;
    struct fconn *c = fp->conn;
    if (f->depth == 0 && fp->trunc != TRUNC_NONE && !gr_log_truncation_pending(gr_partition_log(part))) {
        /* a truncation whose reads were on the I/O pool goes on now, not after the connection's request in
           flight (a long poll, up to replica.fetch.wait.max.ms per round of reads) */
        enter(f);
        bool done = fp_truncate(f, fp, fp->trunc, fp->trunc_offset) == 0 && !fp->removed;
        leave(f); /* frees fp (and an emptied c) when a done hook removed it */
        if (!done) return;
    }
    if (c->woken || c->req || !gr_broker_client_ready(c->bc_conn)) return; /* its answer or readiness pumps */
    c->woken = true;
    if (!ev_is_active(&f->wake) && !ev_is_pending(&f->wake)) {
        ev_timer_set(&f->wake, 0.0, 0.0);
        ev_timer_start(f->loop, &f->wake);
    }
}

bool gr_fetcher_active(const struct gr_fetcher *f, const struct gr_partition *part)
{
    const struct fp *fp = fp_find(f, part);
    return fp && !fp->failed && !fp->fenced;
}

const struct gr_fetcher_stats *gr_fetcher_stats(const struct gr_fetcher *f)
{
    return &f->stats;
}
