/*
 * topic_writer_etcd.c: the cluster-mode topic writer (cluster/topic_writer.h). The broker that receives a
 * topic change writes the topic record `topics/<name>` (cluster/layout.h, cluster/values.h) itself, in one
 * etcd txn fenced by a compare (issue #19 "Topic changes"; Kafka's ReplicationControlManager decides the
 * same things inside its controller):
 *   create          compare create_revision(topics/<name>) == 0, put the record (a fresh topic id, the
 *                   assignment from StripedReplicaPlacer over the image's live brokers, the configs);
 *                   compare failed -> TOPIC_ALREADY_EXISTS
 *   delete          compare mod_revision(topics/<name>) == the image's record_revision, delete the record
 *                   and the range partitions/<topic id>/
 *   add partitions, read the record, change it, compare mod_revision == the read one, put; a stale compare
 *   set configs     re-reads and re-applies once, then fails
 * One txn per topic, of at most 2 operations and 1 compare: a request naming many topics issues that many
 * bounded txns; a record is at most GR_CLUSTER_TOPIC_VALUE_BYTES_MAX (1,000 partitions of one replica are
 * about 6 KiB). Then the change waits for this broker's image (fed by the etcd watch): a create or new
 * partitions until every new partition has a leader (written by the controller), a delete until the topic
 * is gone; one image observer checks every waiting change, and each has a timer at its request's timeout
 * (REQUEST_TIMED_OUT; the change stays made, as Kafka's). Set configs completes once written. A request
 * lost to a silent or unreachable etcd (outcome unknown) waits the same way until the request's timeout:
 * the image completes it if the txn landed after all, else REQUEST_TIMED_OUT (await_lost).
 *
 * Invariants: a change is in exactly one of: an etcd request in flight (ereq), the wait list (waiting), or
 * completed and freed; `pending` counts changes not completed. New partitions take the topic's factor.
 * Read next: cluster/topic_writer.h, cluster/etcd.h, cluster/values.h, cluster/placement.h.
 */
#include <errno.h>
#include <ev.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd.h"
#include "cluster/image.h"
#include "cluster/layout.h"
#include "cluster/placement.h"
#include "cluster/topic_writer.h"
#include "cluster/values.h"
#include "common/log.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "storage/store.h" /* gr_uuid_random */

enum change_kind { CH_CREATE, CH_DELETE, CH_GROW, CH_CONFIGS, CH_BARRIER };

struct change;

struct etcd_writer {
    struct gr_topic_writer base;
    struct gr_topic_writer_etcd_config cfg;
    struct gr_placement_rng rng;
    int pending;
    uint64_t retries;
    uint64_t next_seq;
    int inflight, inflight_peak; /* changes holding an etcd slot (at most GR_TOPIC_WRITER_INFLIGHT_MAX) */
    bool starting;               /* start_queued runs (a start that fails at once does not nest it) */
    struct change *head;         /* every change not completed (in flight or waiting) */
    bool observing;
    bool freeing;
    bool in_pass; /* on_image runs: barriers are released after it, so its next pointer stays valid */
};

struct change {
    struct etcd_writer *w;
    enum change_kind kind;
    gr_topic_change_cb *cb;
    void *ctx;
    struct change *prev, *next;
    uint64_t seq;             /* submission order (barriers wait for every smaller one) */
    struct gr_etcd_req *ereq; /* in flight, or NULL */
    bool waiting;             /* written (or its write lost): waits for the image */
    bool lost;                /* an etcd request timed out or found etcd unreachable: outcome unknown */
    bool maybe_written;       /* the lost request was the txn (a read's loss wrote nothing) */
    bool retried;             /* a stale compare was re-read once */
    bool queued;              /* waits for an etcd slot; start runs when it gets one */
    bool slot;                /* holds an etcd slot (from its first request until it waits or completes) */
    void (*start)(struct change *c);
    int64_t cmp_revision; /* delete: the image's record revision (0: read the record first) */
    ev_timer timer;       /* the request's timeout while waiting */
    int64_t timeout_ms;
    int64_t deadline_ms; /* monotonic; 0 none */
    char name[GR_TOPIC_NAME_BYTES_MAX + 1];
    uint8_t id[16];
    int32_t first_new, total; /* partitions whose leaders a create or grow waits for */
    int32_t rf;
    int32_t *assignment; /* grow: assignment_count x rf given by the client, or NULL */
    int32_t assignment_count;
    int config_count; /* configs: the new set (owned copies) */
    char **keys, **values;
    char key[GR_CLUSTER_KEY_BUF];
    char *value; /* the encoded record being written */
    size_t value_len;
    char msg[GR_TOPIC_WRITER_MSG_BYTES];
};

static void complete(struct change *c, int16_t code, const char *msg);
static void start_queued(struct etcd_writer *w);

static void change_free(struct change *c)
{
    for (int i = 0; i < c->config_count; i++) {
        free(c->keys[i]);
        free(c->values[i]);
    }
    free(c->keys);
    free(c->values);
    free(c->assignment);
    free(c->value);
    free(c);
}

/* Gives free etcd slots to the oldest queued changes. */
static void start_queued(struct etcd_writer *w)
{
    if (w->starting) return;
    w->starting = true;
    while (w->inflight < GR_TOPIC_WRITER_INFLIGHT_MAX) {
        struct change *next = NULL;
        for (struct change *c = w->head; c; c = c->next)
            if (c->queued && (!next || c->seq < next->seq)) next = c;
        if (!next) break;
        next->queued = false;
        next->slot = true;
        if (++w->inflight > w->inflight_peak) w->inflight_peak = w->inflight;
        next->start(next); /* may complete it at once (then the loop goes on) */
    }
    w->starting = false;
}

/* Runs `start` for `c` once an etcd slot is free (now, when one is): a request naming many topics keeps at
 * most GR_TOPIC_WRITER_INFLIGHT_MAX txns and connections to etcd at once. */
static void begin(struct change *c, void (*start)(struct change *c))
{
    c->start = start;
    c->queued = true;
    start_queued(c->w);
}

/* Completes the barriers that no earlier change holds back any more (one at a time: a barrier's callback
 * may submit new changes, which come after it). */
static void release_barriers(struct etcd_writer *w)
{
    for (;;) {
        uint64_t oldest = UINT64_MAX;
        struct change *bar = NULL;
        for (struct change *c = w->head; c; c = c->next)
            if (c->kind != CH_BARRIER && c->seq < oldest) oldest = c->seq;
        for (struct change *c = w->head; c && !bar; c = c->next)
            if (c->kind == CH_BARRIER && c->seq < oldest) bar = c;
        if (!bar) return;
        complete(bar, GR_ERR_NONE, NULL);
    }
}

/* Completes `c` with `code` (message `msg`, copied into c->msg when formatted) and frees it. */
static void complete(struct change *c, int16_t code, const char *msg)
{
    struct etcd_writer *w = c->w;
    bool barrier = c->kind == CH_BARRIER;
    if (c->slot) w->inflight--;
    if (c->ereq) gr_etcd_cancel(c->ereq);
    if (c->waiting) ev_timer_stop(w->cfg.loop, &c->timer);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->head = c->next;
    if (c->next) c->next->prev = c->prev;
    w->pending--;
    char text[GR_TOPIC_WRITER_MSG_BYTES]; /* msg may be c->msg, freed below */
    snprintf(text, sizeof text, "%s", msg ? msg : "");
    struct gr_topic_change res = {.error_code = code, .message = code && msg ? text : NULL};
    memcpy(res.topic_id, c->id, 16);
    res.partition_count = c->total;
    res.replication_factor = c->rf;
    gr_topic_change_cb *cb = c->cb;
    void *ctx = c->ctx;
    change_free(c);
    cb(ctx, &res);
    if (w->freeing) return;
    start_queued(w);
    if (!barrier && !w->in_pass) release_barriers(w);
}

static void completef(struct change *c, int16_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void completef(struct change *c, int16_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    complete(c, code, c->msg);
}

static void await_lost(struct change *c, const struct gr_etcd_result *res);

/* An etcd failure as Kafka's error: a timeout or a lost answer waits for the request's timeout
 * (await_lost), anything else is UNKNOWN_SERVER_ERROR at once. */
static void complete_etcd_error(struct change *c, const struct gr_etcd_result *res)
{
    if (res->status == GR_ETCD_TIMEOUT || res->status == GR_ETCD_UNREACHABLE) return await_lost(c, res);
    GR_WARN("topic %s: etcd: %s", c->name, res->message);
    completef(c, GR_ERR_UNKNOWN_SERVER_ERROR, "etcd: %s", res->message);
}

static struct change *change_new(struct etcd_writer *w, enum change_kind kind, int64_t timeout_ms,
                                 gr_topic_change_cb *cb, void *ctx)
{
    struct change *c = calloc(1, sizeof *c);
    if (!c) {
        struct gr_topic_change res = {.error_code = GR_ERR_UNKNOWN_SERVER_ERROR, .message = "Out of memory"};
        cb(ctx, &res);
        return NULL;
    }
    c->w = w;
    c->kind = kind;
    c->cb = cb;
    c->ctx = ctx;
    c->timeout_ms = timeout_ms;
    c->deadline_ms = timeout_ms > 0 ? gr_time_mono_ms() + timeout_ms : 0;
    c->rf = 1;
    c->seq = w->next_seq++;
    c->next = w->head;
    if (w->head) w->head->prev = c;
    w->head = c;
    w->pending++;
    return c;
}

/* ---- waiting for the image ---- */

/* Whether the image shows what `c` waits for. */
static bool satisfied(const struct change *c, const struct gr_image *img)
{
    if (c->lost && !c->maybe_written) return false; /* nothing was written: only the timeout ends it */
    const struct gr_image_topic *t = gr_image_topic_find_id(img, c->id);
    if (c->kind == CH_DELETE) return t == NULL;
    if (!t || t->partition_count < c->total) return false;
    for (int32_t p = c->first_new; p < c->total; p++)
        if (t->parts[p].leader < 0) return false;
    return true;
}

static void on_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    struct change *c = (struct change *)((char *)t - offsetof(struct change, timer));
    if (c->lost)
        complete(c, GR_ERR_REQUEST_TIMED_OUT, c->msg); /* "etcd: ...", kept by await_lost */
    else if (c->kind == CH_DELETE)
        completef(c, GR_ERR_REQUEST_TIMED_OUT, "Timed out waiting for the deletion of topic %s", c->name);
    else
        completef(c, GR_ERR_REQUEST_TIMED_OUT, "Timed out waiting for leaders of topic %s's partitions",
                  c->name);
}

/* `c` holds its etcd slot and waits for the image until its deadline (on_timeout), giving the slot up. */
static void wait_image(struct change *c)
{
    struct etcd_writer *w = c->w;
    int64_t left = c->deadline_ms - gr_time_mono_ms();
    c->waiting = true;
    c->slot = false; /* waiting for the image needs no etcd slot */
    w->inflight--;
    ev_timer_init(&c->timer, on_timeout, left > 0 ? (double)left / 1000.0 : 0.0, 0.0);
    ev_timer_start(w->cfg.loop, &c->timer);
    start_queued(w);
}

/* `c` was written: completes now when the image already shows it or no wait was asked, else waits. */
static void await_image(struct change *c)
{
    struct etcd_writer *w = c->w;
    if (c->kind == CH_CONFIGS || c->timeout_ms <= 0 || satisfied(c, w->cfg.image)) {
        complete(c, GR_ERR_NONE, NULL);
        return;
    }
    wait_image(c);
}

/* An etcd request of `c` timed out or found etcd unreachable, so its outcome is unknown. Issue #19: a broker
 * that cannot reach etcd answers metadata changes with REQUEST_TIMED_OUT at the request's timeout (Kafka's
 * broker waits for its controller until then), so `c` waits for the image until its deadline: a txn that did
 * land shows there (a create by its own fresh topic id) and completes it with NONE; otherwise the timeout
 * answers REQUEST_TIMED_OUT with the etcd error. A change without a timeout (set configs, timeout_ms <= 0) or
 * past it answers now. The compares make a client's retry safe either way. */
static void await_lost(struct change *c, const struct gr_etcd_result *res)
{
    GR_WARN("topic %s: etcd: %s", c->name, res->message);
    snprintf(c->msg, sizeof c->msg, "etcd: %s", res->message);
    c->lost = true;
    if (c->kind == CH_CONFIGS || c->timeout_ms <= 0 || c->deadline_ms <= gr_time_mono_ms()) {
        complete(c, GR_ERR_REQUEST_TIMED_OUT, c->msg);
        return;
    }
    if (satisfied(c, c->w->cfg.image)) {
        complete(c, GR_ERR_NONE, NULL);
        return;
    }
    wait_image(c);
}

/* The image observer: completes every waiting change it now satisfies. */
static void on_image(void *ctx, struct gr_image *img)
{
    struct etcd_writer *w = ctx;
    struct change *next;
    w->in_pass = true; /* a callback may submit changes (put at the head, not visited) but completes none */
    for (struct change *c = w->head; c; c = next) {
        next = c->next;
        if (c->waiting && satisfied(c, img)) complete(c, GR_ERR_NONE, NULL);
    }
    w->in_pass = false;
    release_barriers(w);
}

/* ---- the record ---- */

/* Places `count` partitions of c->rf replicas over the image's live brokers into `out`. Returns 0, or a
 * Kafka error code with c->msg set. */
static int16_t place(struct change *c, int32_t count, int32_t *out)
{
    struct gr_image *img = c->w->cfg.image;
    int32_t n = gr_image_broker_count(img);
    if (n > GR_PLACEMENT_BROKERS_MAX) n = GR_PLACEMENT_BROKERS_MAX;
    struct gr_placement_broker *bs = calloc((size_t)n + 1, sizeof *bs);
    if (!bs) return snprintf(c->msg, sizeof c->msg, "Out of memory"), GR_ERR_UNKNOWN_SERVER_ERROR;
    int live = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_image_broker *br = gr_image_broker_at(img, i);
        if (br->fenced || br->shutting_down) continue; /* Kafka's usableBrokers: not in controlled shutdown */
        bs[live++] = (struct gr_placement_broker){br->node_id, br->has_rack ? br->rack : NULL, false};
    }
    int rc = gr_placement_place(&c->w->rng, bs, live, count, c->rf, out, c->msg, sizeof c->msg);
    free(bs);
    if (rc == -EINVAL) return GR_ERR_INVALID_REPLICATION_FACTOR;
    if (rc)
        return snprintf(c->msg, sizeof c->msg, "Placement failed: %s", strerror(-rc)),
               GR_ERR_UNKNOWN_SERVER_ERROR;
    return GR_ERR_NONE;
}

/* Checks a client's assignment (rows of c->rf node ids): every node a live broker, none twice in a row
 * (Kafka's ReplicationControlManager.validateManualPartitionAssignment). Returns 0 or
 * INVALID_REPLICA_ASSIGNMENT. */
static int16_t check_assignment(struct change *c, const int32_t *ids, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        for (int32_t j = i - i % c->rf; j < i; j++)
            if (ids[j] == ids[i])
                return snprintf(c->msg, sizeof c->msg,
                                "The manual partition assignment includes the broker %d more than once.",
                                ids[i]),
                       GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        const struct gr_image_broker *br = gr_image_broker(c->w->cfg.image, ids[i]);
        if (!br || br->fenced) {
            snprintf(c->msg, sizeof c->msg,
                     "The manual partition assignment includes broker %d, which is not "
                     "a live broker",
                     ids[i]);
            return GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    return GR_ERR_NONE;
}

/* Encodes `rec` into c->value. Returns 0 or a Kafka error code with c->msg. */
static int16_t encode(struct change *c, const struct gr_cluster_topic *rec)
{
    char err[GR_CLUSTER_ERR_BYTES] = "";
    free(c->value);
    c->value = NULL;
    int rc = gr_cluster_topic_encode(rec, &c->value, &c->value_len, err);
    if (rc == -EINVAL) return snprintf(c->msg, sizeof c->msg, "%s", err), GR_ERR_INVALID_CONFIG;
    if (rc == -EMSGSIZE)
        return snprintf(c->msg, sizeof c->msg, "The topic record exceeds %d bytes",
                        GR_CLUSTER_TOPIC_VALUE_BYTES_MAX),
               GR_ERR_INVALID_REQUEST;
    if (rc) return snprintf(c->msg, sizeof c->msg, "Out of memory"), GR_ERR_UNKNOWN_SERVER_ERROR;
    return GR_ERR_NONE;
}

static void written(void *ctx, const struct gr_etcd_result *res);

/* Sends the txn: compare `target` of c->key == number; put c->value (or delete the record and its
 * partition states). */
static void send_txn(struct change *c, enum gr_etcd_target target, int64_t number)
{
    struct gr_cluster_layout const *lay = c->w->cfg.layout;
    char parts[GR_CLUSTER_KEY_BUF], parts_end[GR_CLUSTER_KEY_BUF + 1];
    struct gr_etcd_compare cmp = {.key = c->key, .target = target, .cmp = GR_ETCD_EQUAL, .number = number};
    struct gr_etcd_op ops[2] = {
        {.type = GR_ETCD_OP_PUT, .key = c->key, .value = c->value, .value_len = c->value_len}};
    size_t nops = 1;
    if (c->kind == CH_DELETE) {
        struct gr_uuid id;
        memcpy(id.b, c->id, 16);
        int len = gr_cluster_prefix_partitions(lay, id, parts);
        if (len < 0 || gr_cluster_range_end(parts, (size_t)len, parts_end) < 0)
            return complete(c, GR_ERR_UNKNOWN_SERVER_ERROR, "Bad partition key");
        ops[0] = (struct gr_etcd_op){.type = GR_ETCD_OP_DELETE, .key = c->key};
        ops[1] = (struct gr_etcd_op){.type = GR_ETCD_OP_DELETE, .key = parts, .range_end = parts_end};
        nops = 2;
    }
    struct gr_etcd_txn txn = {.compares = &cmp, .compare_count = 1, .success = ops, .success_count = nops};
    c->ereq = gr_etcd_txn(c->w->cfg.etcd, &txn, written, c);
    if (!c->ereq) completef(c, GR_ERR_UNKNOWN_SERVER_ERROR, "etcd: %s", gr_etcd_last_error(c->w->cfg.etcd));
}

static void record_read(void *ctx, const struct gr_etcd_result *res);

/* Reads the current record of c->key (add partitions, set configs, a stale delete). */
static void read_record(struct change *c)
{
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE, .key = c->key};
    c->ereq = gr_etcd_range(c->w->cfg.etcd, &op, record_read, c);
    if (!c->ereq) completef(c, GR_ERR_UNKNOWN_SERVER_ERROR, "etcd: %s", gr_etcd_last_error(c->w->cfg.etcd));
}

static void written(void *ctx, const struct gr_etcd_result *res)
{
    struct change *c = ctx;
    c->ereq = NULL;
    c->maybe_written = res->status != GR_ETCD_OK; /* a lost txn may have landed */
    if (res->status != GR_ETCD_OK) return complete_etcd_error(c, res);
    if (res->succeeded) {
        GR_INFO("topic %s: record %s at revision %lld", c->name, c->kind == CH_DELETE ? "deleted" : "written",
                (long long)res->revision);
        return await_image(c);
    }
    if (c->kind == CH_CREATE)
        return completef(c, GR_ERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", c->name);
    if (c->retried)
        return completef(c, GR_ERR_UNKNOWN_SERVER_ERROR,
                         "Topic '%s' was changed concurrently twice; retry the request", c->name);
    c->w->retries++;
    GR_INFO("topic %s: the record changed meanwhile (stale compare): reading it again", c->name);
    c->retried = true; /* stale: read the record again and apply the change to it once more */
    read_record(c);
}

/* Applies a grow or a config change to `rec` (the current record). Returns 0 or a Kafka error code. */
static int16_t apply(struct change *c, struct gr_cluster_topic *rec)
{
    if (c->kind == CH_CONFIGS) {
        struct gr_cluster_config *cfgs = calloc((size_t)c->config_count + 1, sizeof *cfgs);
        if (!cfgs) return snprintf(c->msg, sizeof c->msg, "Out of memory"), GR_ERR_UNKNOWN_SERVER_ERROR;
        for (int i = 0; i < rec->config_count; i++) {
            free(rec->configs[i].name);
            free(rec->configs[i].value);
        }
        free(rec->configs);
        rec->configs = cfgs;
        rec->config_count = 0;
        for (int i = 0; i < c->config_count; i++) { /* copies: a retry applies c's set again */
            cfgs[i] = (struct gr_cluster_config){strdup(c->keys[i]), strdup(c->values[i])};
            rec->config_count = i + 1;
            if (!cfgs[i].name || !cfgs[i].value)
                return snprintf(c->msg, sizeof c->msg, "Out of memory"), GR_ERR_UNKNOWN_SERVER_ERROR;
        }
        return encode(c, rec);
    }
    int32_t cur = rec->partition_count;
    if (c->total <= cur)
        return snprintf(c->msg, sizeof c->msg,
                        "Topic currently has %d partitions, which is higher than the "
                        "requested %d.",
                        cur, c->total),
               GR_ERR_INVALID_PARTITIONS;
    int32_t added = c->total - cur;
    if (c->assignment && c->assignment_count != added)
        return snprintf(
                   c->msg, sizeof c->msg,
                   "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.",
                   added, c->assignment_count),
               GR_ERR_INVALID_REPLICA_ASSIGNMENT;
    int32_t topic_rf = cur > 0 ? rec->partitions[0].replica_count : 1; /* Kafka: partition 0's */
    if (!c->assignment) c->rf = topic_rf;                              /* placed with the topic's factor */
    int32_t *ids = c->assignment ? c->assignment : calloc((size_t)added * (size_t)c->rf, sizeof *ids);
    struct gr_cluster_assignment *grown = realloc(rec->partitions, (size_t)c->total * sizeof *grown);
    if (!ids || !grown) {
        if (ids != c->assignment) free(ids);
        if (grown) rec->partitions = grown;
        return snprintf(c->msg, sizeof c->msg, "Out of memory"), GR_ERR_UNKNOWN_SERVER_ERROR;
    }
    rec->partitions = grown;
    int16_t code = c->assignment ? check_assignment(c, ids, added * c->rf) : place(c, added, ids);
    if (!code && c->rf != topic_rf) /* validateManualPartitionAssignment's last check */
        code =
            (int16_t)(snprintf(c->msg, sizeof c->msg,
                               "The manual partition assignment includes a partition with %d replica(s), but "
                               "this is not consistent with previous partitions, which have %d replica(s).",
                               c->rf, topic_rf),
                      GR_ERR_INVALID_REPLICA_ASSIGNMENT);
    for (int32_t p = 0; p < added && !code; p++) {
        memset(&grown[cur + p], 0, sizeof grown[cur + p]); /* realloc's new entries: no reassignment lists */
        grown[cur + p].replica_count = c->rf;
        memcpy(grown[cur + p].replicas, ids + (size_t)p * (size_t)c->rf, (size_t)c->rf * sizeof *ids);
    }
    if (ids != c->assignment) free(ids);
    if (code) return code;
    rec->partition_count = c->total;
    c->first_new = cur;
    return encode(c, rec);
}

static void record_read(void *ctx, const struct gr_etcd_result *res)
{
    struct change *c = ctx;
    c->ereq = NULL;
    if (res->status != GR_ETCD_OK) return complete_etcd_error(c, res);
    int16_t missing = c->kind == CH_CONFIGS ? GR_ERR_UNKNOWN_TOPIC_OR_PARTITION : GR_ERR_UNKNOWN_TOPIC_ID;
    if (res->op.kv_count == 0)
        return complete(c, missing, c->kind == CH_CONFIGS ? "The topic was deleted." : NULL);
    const struct gr_etcd_kv *kv = &res->op.kvs[0];
    struct gr_cluster_topic rec = {0};
    char err[GR_CLUSTER_ERR_BYTES] = "";
    if (gr_cluster_topic_decode(kv->value, kv->value_len, &rec, err) < 0)
        return completef(c, GR_ERR_UNKNOWN_SERVER_ERROR, "The topic record in etcd is unreadable: %s", err);
    if (memcmp(rec.topic_id.b, c->id, 16) != 0) { /* deleted and created again under the same name */
        gr_cluster_topic_free(&rec);
        return complete(c, missing, c->kind == CH_CONFIGS ? "The topic was deleted." : NULL);
    }
    int16_t code = c->kind == CH_DELETE ? GR_ERR_NONE : apply(c, &rec);
    gr_cluster_topic_free(&rec);
    if (code) return complete(c, code, c->msg);
    send_txn(c, GR_ETCD_MOD, kv->mod_revision);
}

/* ---- the operations ---- */

static bool name_collides(const struct gr_image *img, const char *name)
{
    size_t len = strlen(name);
    for (int32_t i = 0; i < gr_image_topic_count(img); i++) {
        const struct gr_image_topic *t = gr_image_topic_at(img, i);
        if ((size_t)t->name_len != len || memcmp(t->name, name, len) == 0) continue;
        bool same = true;
        for (size_t k = 0; k < len && same; k++)
            same = (t->name[k] == '_' ? '.' : t->name[k]) == (name[k] == '_' ? '.' : name[k]);
        if (same) return true;
    }
    return false;
}

/* The checks of a create that need no etcd. Returns 0 or a Kafka error code with c->msg. */
static int16_t create_checks(struct change *c, const struct gr_topic_create_args *a)
{
    struct gr_image *img = c->w->cfg.image;
    if (gr_image_topic_find(img, a->name, strlen(a->name)))
        return snprintf(c->msg, sizeof c->msg, "Topic '%s' already exists.", a->name),
               GR_ERR_TOPIC_ALREADY_EXISTS;
    if (a->refuse_collision && name_collides(img, a->name))
        return snprintf(c->msg, sizeof c->msg,
                        "Topic '%s' collides with an existing topic once '.' and '_' "
                        "are treated alike",
                        a->name),
               GR_ERR_INVALID_TOPIC_EXCEPTION;
    if (a->partitions < 1 || a->partitions > GR_PARTITIONS_PER_TOPIC_MAX)
        return snprintf(c->msg, sizeof c->msg, "Number of partitions must be between 1 and %d",
                        GR_PARTITIONS_PER_TOPIC_MAX),
               GR_ERR_INVALID_PARTITIONS;
    if (a->config_count < 0 || a->config_count > GR_CLUSTER_TOPIC_CONFIGS_MAX)
        return snprintf(c->msg, sizeof c->msg, "At most %d topic configs", GR_CLUSTER_TOPIC_CONFIGS_MAX),
               GR_ERR_INVALID_CONFIG;
    return GR_ERR_NONE;
}

/* Builds the record of a create into c->value. Returns 0 or a Kafka error code with c->msg. */
static int16_t create_record(struct change *c, const struct gr_topic_create_args *a)
{
    struct gr_cluster_topic rec = {.partition_count = a->partitions, .config_count = a->config_count};
    int32_t *ids = calloc((size_t)a->partitions * (size_t)c->rf, sizeof *ids);
    rec.partitions = calloc((size_t)a->partitions, sizeof *rec.partitions);
    rec.configs = calloc((size_t)a->config_count + 1, sizeof *rec.configs);
    int16_t code = GR_ERR_NONE;
    if (!ids || !rec.partitions || !rec.configs) {
        code = GR_ERR_UNKNOWN_SERVER_ERROR;
        snprintf(c->msg, sizeof c->msg, "Out of memory");
    } else if (a->assignment) {
        memcpy(ids, a->assignment, (size_t)a->partitions * (size_t)c->rf * sizeof *ids);
        code = check_assignment(c, ids, a->partitions * c->rf);
    } else if ((code = place(c, a->partitions, ids)) == GR_ERR_INVALID_REPLICATION_FACTOR) {
        char why[sizeof c->msg]; /* Kafka's createTopic wraps the placer's words */
        snprintf(why, sizeof why, "%s", c->msg);
        snprintf(c->msg, sizeof c->msg, "Unable to replicate the partition %d time(s): %.*s", (int)c->rf,
                 (int)(sizeof c->msg - 64), why);
    }
    for (int32_t p = 0; p < a->partitions && !code; p++) {
        rec.partitions[p].replica_count = c->rf;
        memcpy(rec.partitions[p].replicas, ids + (size_t)p * (size_t)c->rf, (size_t)c->rf * sizeof *ids);
    }
    for (int i = 0; i < a->config_count && !code; i++) /* borrowed: not freed below */
        rec.configs[i] = (struct gr_cluster_config){(char *)a->config_keys[i], (char *)a->config_values[i]};
    gr_uuid_random(c->id);
    memcpy(rec.topic_id.b, c->id, 16);
    if (!code) code = encode(c, &rec);
    free(ids);
    free(rec.partitions);
    free(rec.configs);
    return code;
}

static void start_create(struct change *c)
{
    send_txn(c, GR_ETCD_CREATE, 0);
}

static void start_delete(struct change *c)
{
    if (c->cmp_revision > 0)
        send_txn(c, GR_ETCD_MOD, c->cmp_revision);
    else /* the image does not know the record's revision: read it */
        read_record(c);
}

static void etcd_create(struct gr_topic_writer *base, const struct gr_topic_create_args *a,
                        gr_topic_change_cb *cb, void *ctx)
{
    struct etcd_writer *w = (struct etcd_writer *)base;
    struct change *c = change_new(w, CH_CREATE, a->timeout_ms, cb, ctx);
    if (!c) return;
    snprintf(c->name, sizeof c->name, "%s", a->name);
    c->rf = a->assignment ? a->assignment_rf : a->replication_factor;
    c->total = a->partitions;
    int16_t code = create_checks(c, a);
    if (!code && a->assignment && (c->rf < 1 || c->rf > GR_CLUSTER_REPLICAS_MAX)) {
        code = GR_ERR_INVALID_REPLICA_ASSIGNMENT;
        snprintf(c->msg, sizeof c->msg, "Each partition needs 1 to %d replicas", GR_CLUSTER_REPLICAS_MAX);
    }
    if (!code) code = create_record(c, a);
    if (!code && gr_cluster_key_topic(w->cfg.layout, a->name, strlen(a->name), c->key) < 0) {
        code = GR_ERR_INVALID_TOPIC_EXCEPTION;
        snprintf(c->msg, sizeof c->msg, "Topic name is illegal");
    }
    if (code) return complete(c, code, c->msg);
    if (a->validate_only) return complete(c, GR_ERR_NONE, NULL);
    begin(c, start_create);
}

/* A change of an existing topic: finds it in the image by id and builds its record key. */
static struct change *existing(struct etcd_writer *w, enum change_kind kind, const uint8_t id[16],
                               int64_t timeout_ms, gr_topic_change_cb *cb, void *ctx, int16_t missing)
{
    struct change *c = change_new(w, kind, timeout_ms, cb, ctx);
    if (!c) return NULL;
    memcpy(c->id, id, 16);
    const struct gr_image_topic *t = gr_image_topic_find_id(w->cfg.image, id);
    if (!t || gr_cluster_key_topic(w->cfg.layout, t->name, (size_t)t->name_len, c->key) < 0) {
        complete(c, missing, missing == GR_ERR_UNKNOWN_TOPIC_ID ? NULL : "The topic was deleted.");
        return NULL;
    }
    snprintf(c->name, sizeof c->name, "%s", t->name);
    c->total = t->partition_count;
    c->first_new = t->partition_count;
    return c;
}

static void etcd_remove(struct gr_topic_writer *base, const uint8_t id[16], int64_t timeout_ms,
                        gr_topic_change_cb *cb, void *ctx)
{
    struct etcd_writer *w = (struct etcd_writer *)base;
    struct change *c = existing(w, CH_DELETE, id, timeout_ms, cb, ctx, GR_ERR_UNKNOWN_TOPIC_ID);
    if (!c) return;
    c->cmp_revision = gr_image_topic_find_id(w->cfg.image, id)->record_revision;
    begin(c, start_delete);
}

static void etcd_grow(struct gr_topic_writer *base, const uint8_t id[16], int32_t new_total,
                      const int32_t *assignment, int32_t assignment_count, int32_t assignment_rf,
                      int64_t timeout_ms, gr_topic_change_cb *cb, void *ctx)
{
    struct etcd_writer *w = (struct etcd_writer *)base;
    struct change *c = existing(w, CH_GROW, id, timeout_ms, cb, ctx, GR_ERR_UNKNOWN_TOPIC_ID);
    if (!c) return;
    int32_t added = new_total - c->total;
    if (new_total > GR_PARTITIONS_PER_TOPIC_MAX || added <= 0)
        return completef(c, GR_ERR_INVALID_PARTITIONS, "The partition count must rise, to at most %d",
                         GR_PARTITIONS_PER_TOPIC_MAX);
    if (assignment) {
        if (assignment_rf < 1 || assignment_rf > GR_CLUSTER_REPLICAS_MAX || assignment_count < 1 ||
            assignment_count > GR_PARTITIONS_PER_TOPIC_MAX)
            return complete(c, GR_ERR_INVALID_REPLICA_ASSIGNMENT,
                            "Bad replica or partition count in the assignment");
        c->rf = assignment_rf;
        c->assignment_count = assignment_count;
        size_t n = (size_t)assignment_count * (size_t)assignment_rf;
        if (!(c->assignment = malloc(n * sizeof *c->assignment)))
            return complete(c, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of memory");
        memcpy(c->assignment, assignment, n * sizeof *c->assignment);
    }
    c->total = new_total;
    begin(c, read_record);
}

static void etcd_configs(struct gr_topic_writer *base, const uint8_t id[16], const char *const *keys,
                         const char *const *values, int count, int64_t timeout_ms, gr_topic_change_cb *cb,
                         void *ctx)
{
    struct etcd_writer *w = (struct etcd_writer *)base;
    struct change *c = existing(w, CH_CONFIGS, id, timeout_ms, cb, ctx, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    if (!c) return;
    if (count < 0 || count > GR_CLUSTER_TOPIC_CONFIGS_MAX)
        return completef(c, GR_ERR_INVALID_CONFIG, "At most %d topic configs", GR_CLUSTER_TOPIC_CONFIGS_MAX);
    c->keys = calloc((size_t)count + 1, sizeof *c->keys);
    c->values = calloc((size_t)count + 1, sizeof *c->values);
    if (!c->keys || !c->values) return complete(c, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of memory");
    for (int i = 0; i < count; i++) {
        c->keys[i] = strdup(keys[i]);
        c->values[i] = strdup(values[i]);
        c->config_count = i + 1;
        if (!c->keys[i] || !c->values[i]) return complete(c, GR_ERR_UNKNOWN_SERVER_ERROR, "Out of memory");
    }
    begin(c, read_record);
}

static int16_t etcd_check_rf(const struct gr_topic_writer *base, int32_t rf, char *msg, size_t cap)
{
    (void)base;
    if (rf >= 1 && rf <= GR_CLUSTER_REPLICAS_MAX) return GR_ERR_NONE;
    if (rf > GR_CLUSTER_REPLICAS_MAX)
        snprintf(msg, cap, "Replication factor %d is above the most Gregor keeps, %d", rf,
                 GR_CLUSTER_REPLICAS_MAX);
    else /* StripedReplicaPlacer's words */
        snprintf(msg, cap, "Invalid replication factor %d: the replication factor must be positive.", rf);
    return GR_ERR_INVALID_REPLICATION_FACTOR;
}

static int etcd_pending(const struct gr_topic_writer *base)
{
    const struct etcd_writer *w = (const struct etcd_writer *)base;
    int n = 0;
    for (const struct change *c = w->head; c; c = c->next)
        n += c->kind != CH_BARRIER;
    return n;
}

static void barrier_fire(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop, (void)revents;
    complete((struct change *)((char *)t - offsetof(struct change, timer)), GR_ERR_NONE, NULL);
}

/* A barrier completes once every change submitted before it completed (release_barriers), never inside
 * this call: with none pending, from the loop's next turn. */
static void etcd_barrier(struct gr_topic_writer *base, gr_topic_change_cb *cb, void *ctx)
{
    struct etcd_writer *w = (struct etcd_writer *)base;
    struct change *c = change_new(w, CH_BARRIER, 0, cb, ctx);
    if (!c) return;
    c->rf = 0;
    if (etcd_pending(base) > 0) return;
    c->waiting = true;
    ev_timer_init(&c->timer, barrier_fire, 0.0, 0.0);
    ev_timer_start(w->cfg.loop, &c->timer);
}

static void etcd_free(struct gr_topic_writer *base)
{
    struct etcd_writer *w = (struct etcd_writer *)base;
    w->freeing = true;
    while (w->head)
        complete(w->head, GR_ERR_UNKNOWN_SERVER_ERROR, "The broker is shutting down");
    if (w->observing) gr_image_unobserve(w->cfg.image, on_image, w);
    free(w);
}

static const struct gr_topic_writer_ops etcd_ops = {
    etcd_create, etcd_remove, etcd_grow, etcd_configs, etcd_check_rf, etcd_pending, etcd_barrier, etcd_free,
};

struct gr_topic_writer *gr_topic_writer_etcd_new(const struct gr_topic_writer_etcd_config *cfg)
{
    struct etcd_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->base.ops = &etcd_ops;
    w->cfg = *cfg;
    w->rng.state = cfg->seed ? cfg->seed : (uint64_t)gr_time_mono_ms() * 2654435761u;
    if (gr_image_observe(cfg->image, on_image, w) < 0) {
        free(w);
        return NULL;
    }
    w->observing = true;
    return &w->base;
}

uint64_t gr_topic_writer_etcd_retries(const struct gr_topic_writer *w)
{
    return ((const struct etcd_writer *)w)->retries;
}

int gr_topic_writer_etcd_inflight_peak(const struct gr_topic_writer *w)
{
    return ((const struct etcd_writer *)w)->inflight_peak;
}
