/*
 * txn.c: the transaction coordinator's state machine (txn.h). Each transactional id is an entry in a
 * chained hash table (owned strings, its partition set as an owned array); an entry has at most one write
 * (struct gr_txn_write: the transit metadata Kafka calls TxnTransitMetadata, and the waiter to answer) and
 * one marker round in flight. Writes and marker jobs are separate allocations that point back at their
 * entry; when an entry leaves the cache (unload, reload, expiry) they are orphaned (entry NULL) and their
 * report only answers NOT_COORDINATOR, so the binding may report them at any time until gr_txn_destroy.
 * Read next: coordinator/tests/test_txn.c.
 */
#include "coordinator/txn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/failpoint.h"
#include "common/log.h"
#include "protocol/errors.h"

#define NO_PENDING (-1)
#define CONSUMER_OFFSETS "__consumer_offsets"

struct tp {
    char *topic; /* owned, NUL-terminated */
    int32_t topic_len;
    int32_t partition;
};

struct tp_set {
    struct tp *v;
    int32_t n, cap;
};

struct entry {
    char *id;
    int32_t id_len;
    int32_t partition; /* of __transaction_state */
    int64_t producer_id, previous_producer_id, next_producer_id;
    int16_t epoch, last_epoch;
    int16_t client_version; /* clientTransactionVersion: 2 once an EndTxn v5 / implicit add touched it */
    int32_t timeout_ms;
    enum gr_txn_state state;
    int pending; /* a gr_txn_state or NO_PENDING */
    struct tp_set parts;
    int64_t start_ms, last_update_ms;
    bool failed_epoch_fence; /* hasFailedEpochFence */
    struct gr_txn_write *write;
    struct gr_txn_marker_job *markers;
    struct entry *hnext;
};

enum write_kind { W_INIT, W_ADD, W_PREPARE, W_COMPLETE, W_DEAD };

/* TxnTransitMetadata plus what the completion needs. */
struct gr_txn_write {
    struct gr_txn_coord *tc;
    struct entry *e; /* NULL: orphaned */
    int32_t partition, coordinator_epoch;
    enum write_kind kind;
    enum gr_txn_state to;
    int64_t producer_id, previous_producer_id, next_producer_id;
    int16_t epoch, last_epoch;
    int16_t client_version;
    int32_t timeout_ms;
    int64_t start_ms, update_ms;
    struct tp_set add; /* W_ADD: the partitions added */
    void *waiter;
    bool has_waiter;
    bool epoch_fence; /* a PrepareAbort written for a fence: InitProducerId answers CONCURRENT_TRANSACTIONS */
    bool answer_ids;  /* W_PREPARE of an EndTxn v5: answered with the next producer id and epoch */
    bool retry;       /* W_COMPLETE failed with COORDINATOR_NOT_AVAILABLE: append again at the next tick */
    struct gr_txn_write *prev, *next; /* every write of the coordinator */
};

struct gr_txn_marker_job {
    struct gr_txn_coord *tc;
    struct entry *e;
    int32_t partition, coordinator_epoch;
    struct gr_txn_marker_job *prev, *next;
};

enum owner { NOT_OWNED, LOADING, OWNED };

struct part_state {
    enum owner owner;
    int32_t epoch;
};

struct gr_txn_coord {
    struct gr_txn_config cfg;
    struct gr_txn_hooks hooks;
    struct part_state *parts;
    struct entry **buckets;
    size_t nbuckets, count;
    struct gr_txn_write *writes;
    struct gr_txn_marker_job *jobs;
    int64_t next_abort_ms, next_expire_ms;
    bool retry_pending;
};

void gr_txn_config_defaults(struct gr_txn_config *cfg)
{
    *cfg = (struct gr_txn_config){
        .max_timeout_ms = GR_TXN_MAX_TIMEOUT_MS,
        .id_expiration_ms = GR_TXN_ID_EXPIRATION_MS,
        .abort_timed_out_interval_ms = GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS,
        .remove_expired_interval_ms = GR_TXN_REMOVE_EXPIRED_INTERVAL_MS,
        .partitions = GR_TXN_STATE_LOG_PARTITIONS,
        .offsets_partitions = 50,
        .log_value_version = GR_TXN_LOG_VALUE_VERSION,
    };
}

static int64_t now_ms(const struct gr_txn_coord *tc)
{
    return tc->hooks.now_ms(tc->hooks.ctx);
}

static void answer(struct gr_txn_coord *tc, void *waiter, int16_t err, int64_t pid, int16_t epoch)
{
    struct gr_txn_result r = {err, err ? -1 : pid, err ? -1 : epoch};
    tc->hooks.done(tc->hooks.ctx, waiter, &r);
}

/* ---- partition sets ---- */

static int tp_find(const struct tp_set *s, struct gr_str topic, int32_t partition)
{
    for (int32_t i = 0; i < s->n; i++)
        if (s->v[i].partition == partition && s->v[i].topic_len == topic.len &&
            memcmp(s->v[i].topic, topic.ptr, (size_t)topic.len) == 0)
            return i;
    return -1;
}

static int tp_add(struct tp_set *s, struct gr_str topic, int32_t partition)
{
    if (topic.len < 0) return -EINVAL;
    if (tp_find(s, topic, partition) >= 0) return 0;
    if (s->n == s->cap) {
        int32_t cap = s->cap ? 2 * s->cap : 4;
        struct tp *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return -ENOMEM;
        s->v = v, s->cap = cap;
    }
    char *t = malloc((size_t)topic.len + 1);
    if (!t) return -ENOMEM;
    memcpy(t, topic.ptr, (size_t)topic.len);
    t[topic.len] = 0;
    s->v[s->n++] = (struct tp){t, topic.len, partition};
    return 0;
}

static void tp_clear(struct tp_set *s)
{
    for (int32_t i = 0; i < s->n; i++)
        free(s->v[i].topic);
    s->n = 0;
}

static void tp_free(struct tp_set *s)
{
    tp_clear(s);
    free(s->v);
    *s = (struct tp_set){0};
}

static struct gr_str tp_topic(const struct tp *t)
{
    return (struct gr_str){t->topic, t->topic_len};
}

/* ---- the cache ---- */

static size_t hash_id(struct gr_str id)
{
    uint64_t h = 1469598103934665603ULL;
    for (int32_t i = 0; i < id.len; i++)
        h = (h ^ (uint8_t)id.ptr[i]) * 1099511628211ULL;
    return (size_t)h;
}

static struct entry *find(const struct gr_txn_coord *tc, struct gr_str id)
{
    if (id.len < 0) return NULL;
    for (struct entry *e = tc->buckets[hash_id(id) % tc->nbuckets]; e; e = e->hnext)
        if (e->id_len == id.len && memcmp(e->id, id.ptr, (size_t)id.len) == 0) return e;
    return NULL;
}

static void grow(struct gr_txn_coord *tc)
{
    size_t n = tc->nbuckets * 2;
    struct entry **b = calloc(n, sizeof *b);
    if (!b) return; /* chains get longer; still correct */
    for (size_t i = 0; i < tc->nbuckets; i++)
        for (struct entry *e = tc->buckets[i], *next; e; e = next) {
            next = e->hnext;
            size_t k = hash_id((struct gr_str){e->id, e->id_len}) % n;
            e->hnext = b[k];
            b[k] = e;
        }
    free(tc->buckets);
    tc->buckets = b;
    tc->nbuckets = n;
}

static struct entry *insert(struct gr_txn_coord *tc, struct gr_str id, int32_t partition)
{
    struct entry *e = calloc(1, sizeof *e);
    char *s = e ? malloc((size_t)id.len + 1) : NULL;
    if (!s) {
        free(e);
        return NULL;
    }
    memcpy(s, id.ptr, (size_t)id.len);
    s[id.len] = 0;
    e->id = s, e->id_len = id.len, e->partition = partition;
    e->producer_id = e->previous_producer_id = e->next_producer_id = -1;
    e->epoch = e->last_epoch = -1;
    e->pending = NO_PENDING;
    e->start_ms = -1;
    if (tc->count >= tc->nbuckets) grow(tc);
    size_t k = hash_id(id) % tc->nbuckets;
    e->hnext = tc->buckets[k];
    tc->buckets[k] = e;
    tc->count++;
    return e;
}

/* Takes `e` out of the cache and frees it; its write and marker round in flight are orphaned. */
static void remove_entry(struct gr_txn_coord *tc, struct entry *e)
{
    struct entry **pp = &tc->buckets[hash_id((struct gr_str){e->id, e->id_len}) % tc->nbuckets];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    tc->count--;
    if (e->write) e->write->e = NULL;
    if (e->markers) e->markers->e = NULL;
    tp_free(&e->parts);
    free(e->id);
    free(e);
}

struct gr_txn_coord *gr_txn_create(const struct gr_txn_config *cfg, const struct gr_txn_hooks *hooks)
{
    if (cfg->partitions < 1 || cfg->partitions > GR_TXN_STATE_LOG_PARTITIONS_MAX ||
        cfg->offsets_partitions < 1)
        return NULL;
    struct gr_txn_coord *tc = calloc(1, sizeof *tc);
    if (!tc) return NULL;
    tc->cfg = *cfg;
    tc->hooks = *hooks;
    tc->nbuckets = 64;
    tc->buckets = calloc(tc->nbuckets, sizeof *tc->buckets);
    tc->parts = calloc((size_t)cfg->partitions, sizeof *tc->parts);
    if (!tc->buckets || !tc->parts) {
        free(tc->buckets);
        free(tc->parts);
        free(tc);
        return NULL;
    }
    int64_t now = now_ms(tc);
    tc->next_abort_ms = now + cfg->abort_timed_out_interval_ms;
    tc->next_expire_ms = now + cfg->remove_expired_interval_ms;
    return tc;
}

static void free_write(struct gr_txn_coord *tc, struct gr_txn_write *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        tc->writes = w->next;
    if (w->next) w->next->prev = w->prev;
    if (w->e && w->e->write == w) w->e->write = NULL;
    tp_free(&w->add);
    free(w);
}

static void free_job(struct gr_txn_coord *tc, struct gr_txn_marker_job *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        tc->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    if (j->e && j->e->markers == j) j->e->markers = NULL;
    free(j);
}

void gr_txn_destroy(struct gr_txn_coord *tc)
{
    if (!tc) return;
    while (tc->writes)
        free_write(tc, tc->writes);
    while (tc->jobs)
        free_job(tc, tc->jobs);
    for (size_t i = 0; i < tc->nbuckets; i++)
        while (tc->buckets[i])
            remove_entry(tc, tc->buckets[i]);
    free(tc->buckets);
    free(tc->parts);
    free(tc);
}

/* TransactionStateManager.getTransactionState's errors for the partition of `id`; 0 when owned. */
static int16_t owner_error(const struct gr_txn_coord *tc, struct gr_str id, int32_t *partition)
{
    int32_t p = gr_txn_partition_for(id, tc->cfg.partitions);
    if (partition) *partition = p;
    if (tc->parts[p].owner == LOADING) return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    if (tc->parts[p].owner != OWNED) return GR_ERR_NOT_COORDINATOR;
    return GR_ERR_NONE;
}

/* ---- writes ---- */

int16_t gr_txn_append_error(int16_t error)
{
    switch (error) {
    case GR_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_ERR_NOT_ENOUGH_REPLICAS:
    case GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case GR_ERR_REQUEST_TIMED_OUT:
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    case GR_ERR_NOT_LEADER_OR_FOLLOWER:
    case GR_ERR_KAFKA_STORAGE_ERROR:
        return GR_ERR_NOT_COORDINATOR;
    case GR_ERR_MESSAGE_TOO_LARGE:
    case GR_ERR_RECORD_LIST_TOO_LARGE:
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    default:
        return error;
    }
}

/* prepareTransitionTo: a new write for `e` to state `to` with the entry's fields as the default transit. */
static struct gr_txn_write *new_write(struct gr_txn_coord *tc, struct entry *e, enum write_kind kind,
                                      enum gr_txn_state to)
{
    struct gr_txn_write *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->tc = tc, w->e = e, w->kind = kind, w->to = to;
    w->partition = e->partition;
    w->coordinator_epoch = tc->parts[e->partition].epoch;
    w->producer_id = e->producer_id;
    w->previous_producer_id = e->producer_id; /* Kafka's transit prevProducerId is the current id */
    w->next_producer_id = e->next_producer_id;
    w->client_version = e->client_version;
    w->epoch = e->epoch, w->last_epoch = e->last_epoch;
    w->timeout_ms = e->timeout_ms;
    w->start_ms = e->start_ms;
    w->update_ms = now_ms(tc);
    w->next = tc->writes;
    if (tc->writes) tc->writes->prev = w;
    tc->writes = w;
    return w;
}

/* Groups the partitions of `a` and `b` (either may be NULL) by topic into TransactionPartitions entries.
   Returns the topic count (-1 when out of memory); *topics and *ids are malloc'ed (free both). */
static int32_t group_topics(const struct tp_set *a, const struct tp_set *b,
                            struct gr_txn_topic_parts **topics, int32_t **ids)
{
    int32_t n = (a ? a->n : 0) + (b ? b->n : 0);
    *topics = calloc((size_t)(n ? n : 1), sizeof **topics);
    *ids = calloc((size_t)(n ? n : 1), sizeof **ids);
    if (!*topics || !*ids) return -1;
    const struct tp **all = calloc((size_t)(n ? n : 1), sizeof *all);
    if (!all) return -1;
    int32_t k = 0;
    for (int32_t i = 0; a && i < a->n; i++)
        all[k++] = &a->v[i];
    for (int32_t i = 0; b && i < b->n; i++)
        if (!a || tp_find(a, tp_topic(&b->v[i]), b->v[i].partition) < 0) all[k++] = &b->v[i];
    bool *used = calloc((size_t)(k ? k : 1), sizeof *used);
    if (!used) {
        free(all);
        return -1;
    }
    int32_t nt = 0, ni = 0;
    for (int32_t i = 0; i < k; i++) {
        if (used[i]) continue;
        struct gr_txn_topic_parts *t = &(*topics)[nt++];
        t->topic = tp_topic(all[i]);
        t->partitions = *ids + ni;
        for (int32_t j = i; j < k; j++)
            if (!used[j] && gr_str_eq(tp_topic(all[j]), t->topic)) {
                used[j] = true;
                (*ids)[ni++] = all[j]->partition;
                t->count++;
            }
    }
    free(used);
    free(all);
    return nt;
}

/* Encodes the transit of `w` and hands it to the append hook (appendTransactionToLog). Returns 0 (in flight)
   or a Kafka error (the write is freed, the pending state is not touched). */
static int16_t submit(struct gr_txn_coord *tc, struct gr_txn_write *w)
{
    struct entry *e = w->e;
    struct gr_coord_record rec;
    int rc;
    if (w->kind == W_DEAD) {
        rc = gr_txn_log_record(&rec, (struct gr_str){e->id, e->id_len}, NULL, tc->cfg.log_value_version);
    } else {
        struct gr_txn_topic_parts *topics = NULL;
        int32_t *ids = NULL;
        int32_t nt = -1;
        if (w->to != GR_TXN_EMPTY) {
            bool keep =
                w->to == GR_TXN_ONGOING || w->to == GR_TXN_PREPARE_COMMIT || w->to == GR_TXN_PREPARE_ABORT;
            nt = group_topics(keep ? &e->parts : NULL, w->kind == W_ADD ? &w->add : NULL, &topics, &ids);
            if (nt < 0) {
                free(topics);
                free(ids);
                return GR_ERR_UNKNOWN_SERVER_ERROR;
            }
        }
        /* the tagged fields only for a transaction version 2 transaction: version 1's records stay as
           they were (every tag at its default) */
        bool v2 = w->client_version >= 2;
        struct gr_txn_log_value v = {w->producer_id,
                                     v2 ? w->previous_producer_id : -1,
                                     v2 ? w->next_producer_id : -1,
                                     w->epoch,
                                     w->timeout_ms,
                                     (int8_t)w->to,
                                     topics,
                                     nt,
                                     w->update_ms,
                                     w->start_ms,
                                     v2 ? w->client_version : 0};
        rc = gr_txn_log_record(&rec, (struct gr_str){e->id, e->id_len}, &v, tc->cfg.log_value_version);
        free(topics);
        free(ids);
    }
    if (rc) return GR_ERR_UNKNOWN_SERVER_ERROR;
    e->write = w;
    int16_t err = tc->hooks.append(tc->hooks.ctx, w->partition, &rec, w);
    gr_coord_records_free(&rec, 1);
    if (err) e->write = NULL;
    return err;
}

static void send_markers(struct gr_txn_coord *tc, struct entry *e);

/* completeTransitionTo: the committed transit of `w` becomes the entry's state. */
static void complete_transition(struct entry *e, struct gr_txn_write *w)
{
    switch (w->to) {
    case GR_TXN_EMPTY:
        e->timeout_ms = w->timeout_ms;
        e->epoch = w->epoch;
        e->last_epoch = w->last_epoch;
        e->producer_id = w->producer_id;
        e->previous_producer_id = w->previous_producer_id;
        break;
    case GR_TXN_ONGOING:
        e->start_ms = w->start_ms;
        for (int32_t i = 0; i < w->add.n; i++)
            if (tp_add(&e->parts, tp_topic(&w->add.v[i]), w->add.v[i].partition))
                GR_WARN("txn %s: out of memory adding a partition", e->id);
        break;
    case GR_TXN_PREPARE_COMMIT:
    case GR_TXN_PREPARE_ABORT:
        /* transaction version 2 bumped the epoch (prepareAbortOrCommit); a fence set it before */
        e->epoch = w->epoch;
        e->last_epoch = w->last_epoch;
        e->start_ms = w->start_ms;
        break;
    case GR_TXN_COMPLETE_COMMIT:
    case GR_TXN_COMPLETE_ABORT:
        e->start_ms = w->start_ms;
        tp_clear(&e->parts);
        if (w->client_version >= 2) {
            /* prepareComplete: at epoch exhaustion the next producer id takes over at epoch 0 */
            if (w->producer_id != e->producer_id) e->previous_producer_id = w->previous_producer_id;
            e->producer_id = w->producer_id;
            e->epoch = w->epoch;
            e->last_epoch = w->last_epoch;
        }
        break;
    default:
        break;
    }
    e->next_producer_id = w->next_producer_id;
    e->client_version = w->client_version;
    e->last_update_ms = w->update_ms;
    e->pending = NO_PENDING;
    e->state = w->to;
}

/* prepareComplete: pending CompleteX, then the markers. */
static void prepare_complete(struct gr_txn_coord *tc, struct entry *e)
{
    e->pending = e->state == GR_TXN_PREPARE_COMMIT ? GR_TXN_COMPLETE_COMMIT : GR_TXN_COMPLETE_ABORT;
    e->failed_epoch_fence = false;
    send_markers(tc, e);
}

/* prepareComplete's transit fields: transaction version 1 records the epoch as the last one; version 2
   keeps the last epoch (the one the client saw before the bump) and, when a next producer id was drawn at
   epoch exhaustion, moves to it at epoch 0. */
static void fill_complete(const struct entry *e, struct gr_txn_write *w)
{
    if (e->client_version >= 2) {
        if (e->next_producer_id >= 0) w->producer_id = e->next_producer_id, w->epoch = 0;
        w->last_epoch = e->last_epoch;
    } else {
        w->last_epoch = e->epoch;
    }
    w->next_producer_id = -1;
}

static void write_complete(struct gr_txn_coord *tc, struct entry *e)
{
    struct gr_txn_write *w = new_write(tc, e, W_COMPLETE, (enum gr_txn_state)e->pending);
    if (!w) {
        e->pending = NO_PENDING;
        return;
    }
    fill_complete(e, w);
    int16_t err = submit(tc, w);
    if (err) {
        GR_WARN("txn %s: writing %s failed: %s", e->id, gr_txn_state_name(w->to), gr_error_name(err));
        free_write(tc, w);
        e->pending = NO_PENDING;
    }
}

void gr_txn_write_done(struct gr_txn_coord *tc, struct gr_txn_write *w, int16_t error)
{
    struct entry *e = w->e;
    int16_t err = gr_txn_append_error(error);
    bool owned =
        e && tc->parts[w->partition].owner == OWNED && tc->parts[w->partition].epoch == w->coordinator_epoch;
    if (!owned) {
        /* the epoch changed or the id left the cache after the append: NOT_COORDINATOR */
        if (w->has_waiter) answer(tc, w->waiter, GR_ERR_NOT_COORDINATOR, -1, -1);
        free_write(tc, w);
        return;
    }
    e->write = NULL;
    if (err) {
        if (w->kind == W_COMPLETE && err == GR_ERR_COORDINATOR_NOT_AVAILABLE) {
            /* retryOnError: keep the pending state, append again at the next tick */
            struct gr_txn_write *again = new_write(tc, e, W_COMPLETE, w->to);
            if (again) {
                fill_complete(e, again);
                again->retry = true;
                tc->retry_pending = true;
                e->write = again;
            } else {
                e->pending = NO_PENDING;
            }
            free_write(tc, w);
            return;
        }
        GR_INFO("txn %s: append of %s failed: %s", e->id, gr_txn_state_name(w->to), gr_error_name(err));
        e->pending = NO_PENDING;
        if (w->epoch_fence) e->failed_epoch_fence = true;
        if (w->has_waiter) answer(tc, w->waiter, err, -1, -1);
        free_write(tc, w);
        return;
    }
    if (w->kind == W_DEAD) {
        free_write(tc, w);
        remove_entry(tc, e);
        return;
    }
    complete_transition(e, w);
    void *waiter = w->waiter;
    bool has_waiter = w->has_waiter, fence = w->epoch_fence, ids = w->answer_ids;
    enum write_kind kind = w->kind;
    free_write(tc, w);
    if (kind == W_PREPARE) {
        /* as Kafka: pending CompleteX, the answer (endTransactionWithTV1 gives no producer id or epoch:
           EndTxn below v5 has no such fields), then the markers */
        e->pending = e->state == GR_TXN_PREPARE_COMMIT ? GR_TXN_COMPLETE_COMMIT : GR_TXN_COMPLETE_ABORT;
        e->failed_epoch_fence = false;
        GR_FAILPOINT("txn.after_prepare"); /* PrepareX durable; no answer, no marker yet */
        if (has_waiter && ids)             /* EndTxn v5: the producer id and epoch of the next transaction */
            answer(tc, waiter, GR_ERR_NONE, e->next_producer_id >= 0 ? e->next_producer_id : e->producer_id,
                   e->next_producer_id >= 0 ? 0 : e->epoch);
        else if (has_waiter)
            answer(tc, waiter, fence ? GR_ERR_CONCURRENT_TRANSACTIONS : GR_ERR_NONE, -1, -1);
        if (e->pending == GR_TXN_COMPLETE_COMMIT || e->pending == GR_TXN_COMPLETE_ABORT) send_markers(tc, e);
        return;
    }
    if (kind == W_ADD) GR_FAILPOINT("txn.after_add_partitions"); /* Ongoing durable, not answered */
    if (has_waiter) answer(tc, waiter, GR_ERR_NONE, e->producer_id, e->epoch);
}

/* ---- markers ---- */

static void send_markers(struct gr_txn_coord *tc, struct entry *e)
{
    struct gr_txn_marker_job *j = calloc(1, sizeof *j);
    struct gr_txn_tp *tps = calloc((size_t)(e->parts.n ? e->parts.n : 1), sizeof *tps);
    if (!j || !tps) {
        free(j);
        free(tps);
        e->pending = NO_PENDING; /* stays PrepareX: the next load completes it */
        GR_WARN("txn %s: out of memory sending markers", e->id);
        return;
    }
    j->tc = tc, j->e = e, j->partition = e->partition, j->coordinator_epoch = tc->parts[e->partition].epoch;
    j->next = tc->jobs;
    if (tc->jobs) tc->jobs->prev = j;
    tc->jobs = j;
    e->markers = j;
    for (int32_t i = 0; i < e->parts.n; i++)
        tps[i] = (struct gr_txn_tp){tp_topic(&e->parts.v[i]), e->parts.v[i].partition};
    struct gr_txn_markers m = {{e->id, e->id_len},
                               e->producer_id,
                               e->epoch,
                               j->coordinator_epoch,
                               e->state == GR_TXN_PREPARE_COMMIT,
                               e->client_version,
                               tps,
                               e->parts.n,
                               j};
    tc->hooks.send_markers(tc->hooks.ctx, &m);
    free(tps);
}

void gr_txn_markers_done(struct gr_txn_coord *tc, struct gr_txn_marker_job *job, int16_t error)
{
    struct entry *e = job->e;
    bool owned = e && tc->parts[job->partition].owner == OWNED &&
                 tc->parts[job->partition].epoch == job->coordinator_epoch;
    free_job(tc, job);
    if (!owned) return;
    if (error) {
        GR_INFO("txn %s: markers failed (%s): left to the next coordinator", e->id, gr_error_name(error));
        e->pending = NO_PENDING;
        return;
    }
    if (e->pending != GR_TXN_COMPLETE_COMMIT && e->pending != GR_TXN_COMPLETE_ABORT) return;
    GR_FAILPOINT("txn.before_complete"); /* every marker committed, CompleteX not written */
    write_complete(tc, e);
}

/* ---- InitProducerId ---- */

static bool epoch_exhausted(int16_t epoch)
{
    return epoch >= GR_TXN_EPOCH_EXHAUSTED;
}

/* endTransaction(ABORT, isFromClient = false) right after prepareFenceProducerEpoch: the entry is Ongoing;
   the bumped epoch becomes the entry's (even if the write fails: hasFailedEpochFence keeps it from being
   bumped twice; an epoch already at INT16_MAX is not bumped, KAFKA-20090) and PrepareAbort is written at it.
   A version 2 transaction whose epoch is exhausted (GR_TXN_EPOCH_EXHAUSTED or above, before the fence) also
   draws its next producer id here, as EndTxn v5 does (KAFKA-20090: the fence path rotates too): PrepareAbort
   keeps it, the markers go out at the fenced epoch under the old id, and CompleteAbort moves to the next id
   at epoch 0, so no producer ever gets an epoch it cannot bump. A failed allocation answers the waiter with
   its error (the timeout pass tries again at its next run) and changes nothing. */
static void fence_and_abort(struct gr_txn_coord *tc, struct entry *e, void *waiter, bool has_waiter)
{
    int64_t next_pid = -1;
    int16_t err = 0;
    if (e->client_version >= 2 && epoch_exhausted(e->epoch) &&
        (err = tc->hooks.alloc_producer_id(tc->hooks.ctx, &next_pid))) {
        if (has_waiter) answer(tc, waiter, err, -1, -1);
        return;
    }
    if (e->epoch == INT16_MAX)
        GR_ERROR("txn %s: fencing producer %lld at epoch %d, the highest: not bumped (this must not happen)",
                 e->id, (long long)e->producer_id, e->epoch);
    int16_t bumped = e->failed_epoch_fence || e->epoch == INT16_MAX ? e->epoch : (int16_t)(e->epoch + 1);
    e->epoch = bumped;
    e->last_epoch = -1;
    struct gr_txn_write *w = new_write(tc, e, W_PREPARE, GR_TXN_PREPARE_ABORT);
    err = w ? 0 : GR_ERR_UNKNOWN_SERVER_ERROR;
    if (w) {
        w->next_producer_id = next_pid;
        w->epoch_fence = true;
        w->waiter = waiter, w->has_waiter = has_waiter;
        e->pending = GR_TXN_PREPARE_ABORT;
        err = submit(tc, w);
        if (err) {
            free_write(tc, w);
            e->pending = NO_PENDING;
            e->failed_epoch_fence = true;
        }
    }
    if (err && has_waiter) answer(tc, waiter, gr_txn_append_error(err), -1, -1);
}

static int16_t start_write(struct gr_txn_coord *tc, struct entry *e, struct gr_txn_write *w, void *waiter)
{
    w->waiter = waiter, w->has_waiter = true;
    e->pending = (int)w->to;
    int16_t err = submit(tc, w);
    if (err) {
        free_write(tc, w);
        e->pending = NO_PENDING;
        return gr_txn_append_error(err);
    }
    return 0;
}

void gr_txn_init_producer_id(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int32_t timeout_ms,
                             int64_t expected_producer_id, int16_t expected_epoch)
{
    int32_t p;
    int16_t err;
    bool expected = expected_producer_id >= 0;
    if (txn_id.len <= 0) return answer(tc, waiter, GR_ERR_INVALID_REQUEST, -1, -1);
    if (timeout_ms <= 0 || timeout_ms > tc->cfg.max_timeout_ms)
        return answer(tc, waiter, GR_ERR_INVALID_TRANSACTION_TIMEOUT, -1, -1);
    if ((err = owner_error(tc, txn_id, &p))) return answer(tc, waiter, err, -1, -1);
    struct entry *e = find(tc, txn_id);
    if (!e) {
        int64_t pid;
        if ((err = tc->hooks.alloc_producer_id(tc->hooks.ctx, &pid))) return answer(tc, waiter, err, -1, -1);
        if (!(e = insert(tc, txn_id, p))) return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
        e->producer_id = pid;
        e->timeout_ms = timeout_ms;
        e->state = GR_TXN_EMPTY;
        e->last_update_ms = now_ms(tc);
    }
    if (e->pending != NO_PENDING) return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
    /* isValidProducerId (KIP-360) */
    if (expected && !(e->epoch == -1 || expected_producer_id == e->producer_id ||
                      (expected_producer_id == e->previous_producer_id && epoch_exhausted(expected_epoch))))
        return answer(tc, waiter, GR_ERR_PRODUCER_FENCED, -1, -1);
    struct gr_txn_write *w;
    switch (e->state) {
    case GR_TXN_PREPARE_ABORT:
    case GR_TXN_PREPARE_COMMIT:
        return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
    case GR_TXN_ONGOING:
        /* prepareFenceProducerEpoch, then abort the open transaction; the producer retries */
        return fence_and_abort(tc, e, waiter, true);
    case GR_TXN_EMPTY:
    case GR_TXN_COMPLETE_COMMIT:
    case GR_TXN_COMPLETE_ABORT:
        break;
    default:
        return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
    }
    if (!(w = new_write(tc, e, W_INIT, GR_TXN_EMPTY)))
        return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
    w->timeout_ms = timeout_ms;
    w->start_ms = -1;
    if (epoch_exhausted(e->epoch) && (!expected || expected_epoch == e->epoch)) {
        /* prepareProducerIdRotation */
        int64_t pid;
        if ((err = tc->hooks.alloc_producer_id(tc->hooks.ctx, &pid))) {
            free_write(tc, w);
            return answer(tc, waiter, err, -1, -1);
        }
        w->producer_id = pid;
        w->epoch = 0;
        w->last_epoch = expected ? e->epoch : -1;
    } else if (!expected || e->epoch == -1 || expected_epoch == e->epoch) {
        /* prepareIncrementProducerEpoch */
        w->epoch = (int16_t)(e->epoch + 1);
        w->last_epoch = expected ? e->epoch : -1;
    } else if (expected_epoch == e->last_epoch) {
        w->epoch = e->epoch; /* a retry of a bump that already happened */
        w->last_epoch = e->last_epoch;
    } else {
        free_write(tc, w);
        return answer(tc, waiter, GR_ERR_PRODUCER_FENCED, -1, -1);
    }
    if ((err = start_write(tc, e, w, waiter))) answer(tc, waiter, err, -1, -1);
}

/* ---- AddPartitionsToTxn / AddOffsetsToTxn / verification ---- */

/* The checks every producer-scoped request starts with (getTransactionState, producer id and epoch). */
static int16_t lookup(struct gr_txn_coord *tc, struct gr_str txn_id, int64_t pid, int16_t epoch,
                      struct entry **out)
{
    int16_t err;
    if (txn_id.len <= 0) return GR_ERR_INVALID_REQUEST;
    if ((err = owner_error(tc, txn_id, NULL))) return err;
    struct entry *e = find(tc, txn_id);
    if (!e || e->producer_id != pid) return GR_ERR_INVALID_PRODUCER_ID_MAPPING;
    if (e->epoch != epoch) return GR_ERR_PRODUCER_FENCED;
    *out = e;
    return 0;
}

void gr_txn_add_partitions(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                           int16_t producer_epoch, const struct gr_txn_tp *parts, int32_t count)
{
    gr_txn_add_partitions_tv(tc, waiter, txn_id, producer_id, producer_epoch, parts, count, 0);
}

void gr_txn_add_partitions_tv(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id,
                              int64_t producer_id, int16_t producer_epoch, const struct gr_txn_tp *parts,
                              int32_t count, int16_t client_version)
{
    int16_t err;
    if (txn_id.len <= 0) return answer(tc, waiter, GR_ERR_INVALID_REQUEST, -1, -1);
    if ((err = owner_error(tc, txn_id, NULL))) return answer(tc, waiter, err, -1, -1);
    struct entry *e = find(tc, txn_id);
    if (!e) return answer(tc, waiter, GR_ERR_INVALID_PRODUCER_ID_MAPPING, -1, -1);
    /* a transition in progress first (KAFKA-18660): a version 2 producer that already has the next
       producer id and epoch from EndTxn must not be fenced while the previous transaction completes */
    if (e->pending != NO_PENDING) return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
    if (e->producer_id != producer_id) return answer(tc, waiter, GR_ERR_INVALID_PRODUCER_ID_MAPPING, -1, -1);
    if (e->epoch != producer_epoch) return answer(tc, waiter, GR_ERR_PRODUCER_FENCED, -1, -1);
    if (e->state == GR_TXN_PREPARE_COMMIT || e->state == GR_TXN_PREPARE_ABORT)
        return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
    bool subset = true;
    for (int32_t i = 0; i < count && subset; i++)
        subset = tp_find(&e->parts, parts[i].topic, parts[i].partition) >= 0;
    if (e->state == GR_TXN_ONGOING && subset) return answer(tc, waiter, GR_ERR_NONE, -1, -1);
    struct gr_txn_write *w = new_write(tc, e, W_ADD, GR_TXN_ONGOING);
    if (!w) return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
    w->client_version = client_version; /* prepareAddPartitions records the client's version */
    for (int32_t i = 0; i < count; i++)
        if (tp_add(&w->add, parts[i].topic, parts[i].partition)) {
            free_write(tc, w);
            return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
        }
    /* prepareAddPartitions: a new transaction starts now */
    if (e->state == GR_TXN_EMPTY || e->state == GR_TXN_COMPLETE_COMMIT || e->state == GR_TXN_COMPLETE_ABORT)
        w->start_ms = w->update_ms;
    if ((err = start_write(tc, e, w, waiter))) answer(tc, waiter, err, -1, -1);
}

void gr_txn_add_offsets(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                        int16_t producer_epoch, struct gr_str group_id)
{
    gr_txn_add_offsets_tv(tc, waiter, txn_id, producer_id, producer_epoch, group_id, 0);
}

void gr_txn_add_offsets_tv(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                           int16_t producer_epoch, struct gr_str group_id, int16_t client_version)
{
    if (group_id.len < 0) return answer(tc, waiter, GR_ERR_INVALID_REQUEST, -1, -1);
    struct gr_txn_tp tp = {gr_str_c(CONSUMER_OFFSETS),
                           tc->hooks.offsets_partition
                               ? tc->hooks.offsets_partition(tc->hooks.ctx, group_id)
                               : gr_coord_partition_for(group_id, tc->cfg.offsets_partitions)};
    gr_txn_add_partitions_tv(tc, waiter, txn_id, producer_id, producer_epoch, &tp, 1, client_version);
}

void gr_txn_verify_partitions(struct gr_txn_coord *tc, struct gr_str txn_id, int64_t producer_id,
                              int16_t producer_epoch, const struct gr_txn_tp *parts, int32_t count,
                              int16_t *errors)
{
    struct entry *e = NULL;
    int16_t err = lookup(tc, txn_id, producer_id, producer_epoch, &e);
    if (!err && (e->state == GR_TXN_PREPARE_COMMIT || e->state == GR_TXN_PREPARE_ABORT))
        err = GR_ERR_CONCURRENT_TRANSACTIONS;
    for (int32_t i = 0; i < count; i++)
        errors[i] = err ? err
                        : (tp_find(&e->parts, parts[i].topic, parts[i].partition) >= 0
                               ? GR_ERR_NONE
                               : GR_ERR_TRANSACTION_ABORTABLE);
}

/* ---- EndTxn ---- */

/* A refused state change answers INVALID_TXN_STATE and logs one WARN line (rate-limited: a client can repeat
 * it at will), naming the transition, as Kafka's TransactionMetadata.prepareTransitionTo ("... is not a valid
 * previous state of ...") and TransactionCoordinator.logInvalidStateTransitionAndReturnError. */
static void refuse_transition(struct gr_txn_coord *tc, void *waiter, const struct entry *e,
                              enum gr_txn_state to)
{
    GR_WARN_RATELIMITED("txn %s: transition from %s to %s refused: %s is not a valid previous state of %s",
                        e->id, gr_txn_state_name(e->state), gr_txn_state_name(to),
                        gr_txn_state_name(e->state), gr_txn_state_name(to));
    answer(tc, waiter, GR_ERR_INVALID_TXN_STATE, -1, -1);
}

void gr_txn_end(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                int16_t producer_epoch, bool commit)
{
    struct entry *e = NULL;
    int16_t err = lookup(tc, txn_id, producer_id, producer_epoch, &e);
    if (err) return answer(tc, waiter, err, -1, -1);
    if (e->pending != NO_PENDING) return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
    switch (e->state) {
    case GR_TXN_ONGOING:
        break;
    case GR_TXN_COMPLETE_COMMIT:
    case GR_TXN_COMPLETE_ABORT:
        /* a retry after completion: NONE for the same result */
        if (commit == (e->state == GR_TXN_COMPLETE_COMMIT)) return answer(tc, waiter, GR_ERR_NONE, -1, -1);
        return refuse_transition(tc, waiter, e, commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT);
    case GR_TXN_PREPARE_COMMIT:
    case GR_TXN_PREPARE_ABORT:
        if (commit == (e->state == GR_TXN_PREPARE_COMMIT))
            return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
        return refuse_transition(tc, waiter, e, commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT);
    default: /* Empty */
        return refuse_transition(tc, waiter, e, commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT);
    }
    struct gr_txn_write *w =
        new_write(tc, e, W_PREPARE, commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT);
    if (!w) return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
    if ((err = start_write(tc, e, w, waiter))) answer(tc, waiter, err, -1, -1);
}

/* handleEndTransaction for transaction version 2 (EndTxn v5+, TransactionCoordinator.endTransaction with
 * isFromClient): every EndTxn bumps the epoch (prepareAbortOrCommit), a retry is recognized by its epoch
 * (the one before the bump: retryOnEpochBump; or the last epoch of the previous producer id after an
 * exhaustion: retryOnOverflow), and an abort is allowed from Empty, CompleteCommit and CompleteAbort
 * (no partition: no marker). Kafka's table (PF PRODUCER_FENCED, ITS INVALID_TXN_STATE, EB epoch bump):
 *                   Abort retry / current     Commit retry / current
 *   Empty           PF / EB                   PF / ITS
 *   CompleteAbort   NONE / EB                 ITS / ITS
 *   CompleteCommit  ITS / EB                  NONE / ITS
 * While a transition is pending (PrepareX written, CompleteX not yet) any EndTxn of the producer id answers
 * CONCURRENT_TRANSACTIONS before its epoch is checked (KAFKA-18464). */
static void end_v2(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                   int16_t producer_epoch, bool commit, int16_t client_version)
{
    int16_t err;
    if (txn_id.len <= 0) return answer(tc, waiter, GR_ERR_INVALID_REQUEST, -1, -1);
    if ((err = owner_error(tc, txn_id, NULL))) return answer(tc, waiter, err, -1, -1);
    struct entry *e = find(tc, txn_id);
    if (!e) return answer(tc, waiter, GR_ERR_INVALID_PRODUCER_ID_MAPPING, -1, -1);
    bool retry_bump = e->epoch == producer_epoch + 1;
    bool retry_overflow = producer_id >= 0 && e->previous_producer_id == producer_id &&
                          producer_epoch == GR_TXN_EPOCH_EXHAUSTED && e->epoch == 0;
    bool valid_epoch;
    switch (e->state) {
    case GR_TXN_PREPARE_COMMIT:
    case GR_TXN_PREPARE_ABORT:
        valid_epoch = retry_bump;
        break;
    case GR_TXN_COMPLETE_COMMIT:
    case GR_TXN_COMPLETE_ABORT:
        valid_epoch = retry_bump || retry_overflow || producer_epoch == e->epoch;
        break;
    default: /* Ongoing, Empty */
        valid_epoch = producer_epoch == e->epoch;
        break;
    }
    bool retry = retry_bump || retry_overflow;
    enum gr_txn_state to = commit ? GR_TXN_PREPARE_COMMIT : GR_TXN_PREPARE_ABORT;
    if (e->producer_id != producer_id && !retry_overflow)
        return answer(tc, waiter, GR_ERR_INVALID_PRODUCER_ID_MAPPING, -1, -1);
    /* a transition in progress before the epoch (KAFKA-18464): the EndTxn answer of the previous transaction
       already gave the client the bumped epoch while CompleteX is pending, so an EndTxn at it (an empty
       abort, or the Java 4.4 client's commit sent ahead of its records: bench/results-txn.md) is retried
       once the previous transaction completes, not fenced */
    if (e->pending != NO_PENDING) return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
    if (!valid_epoch) return answer(tc, waiter, GR_ERR_PRODUCER_FENCED, -1, -1);
    bool no_partition = false;
    switch (e->state) {
    case GR_TXN_ONGOING:
        break;
    case GR_TXN_COMPLETE_COMMIT:
    case GR_TXN_COMPLETE_ABORT:
        if (commit == (e->state == GR_TXN_COMPLETE_COMMIT) && retry) /* the same result again */
            return answer(tc, waiter, GR_ERR_NONE, e->producer_id, e->epoch);
        if (commit || retry) return refuse_transition(tc, waiter, e, to);
        no_partition = true; /* an abort with nothing open: bump the epoch */
        break;
    case GR_TXN_PREPARE_COMMIT:
    case GR_TXN_PREPARE_ABORT:
        if (commit == (e->state == GR_TXN_PREPARE_COMMIT))
            return answer(tc, waiter, GR_ERR_CONCURRENT_TRANSACTIONS, -1, -1);
        return refuse_transition(tc, waiter, e, to);
    default: /* Empty */
        if (commit) return refuse_transition(tc, waiter, e, to);
        no_partition = true;
        break;
    }
    int64_t next_pid = -1;
    if (epoch_exhausted(e->epoch) && (err = tc->hooks.alloc_producer_id(tc->hooks.ctx, &next_pid)))
        return answer(tc, waiter, err, -1, -1);
    struct gr_txn_write *w = new_write(tc, e, W_PREPARE, to);
    if (!w) return answer(tc, waiter, GR_ERR_UNKNOWN_SERVER_ERROR, -1, -1);
    /* prepareAbortOrCommit with a version that supports the epoch bump */
    w->epoch = (int16_t)(e->epoch + 1);
    w->last_epoch = e->epoch;
    w->next_producer_id = next_pid;
    w->client_version = client_version;
    w->answer_ids = true;
    if (no_partition) w->start_ms = w->update_ms;
    if ((err = start_write(tc, e, w, waiter))) answer(tc, waiter, err, -1, -1);
}

void gr_txn_end_tv(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                   int16_t producer_epoch, bool commit, int16_t client_version)
{
    if (client_version >= 2)
        end_v2(tc, waiter, txn_id, producer_id, producer_epoch, commit, client_version);
    else
        gr_txn_end(tc, waiter, txn_id, producer_id, producer_epoch, commit);
}

/* ---- load ---- */

int gr_txn_load_begin(struct gr_txn_coord *tc, int32_t p, int32_t coordinator_epoch)
{
    if (p < 0 || p >= tc->cfg.partitions) return -EINVAL;
    gr_txn_unload(tc, p);
    tc->parts[p] = (struct part_state){LOADING, coordinator_epoch};
    return 0;
}

int gr_txn_replay(struct gr_txn_coord *tc, int32_t p, const uint8_t *key, size_t key_len,
                  const uint8_t *value, size_t value_len)
{
    if (p < 0 || p >= tc->cfg.partitions || tc->parts[p].owner != LOADING) return -EINVAL;
    struct gr_str id;
    int rc = key ? gr_txn_log_key_decode(key, key_len, &id) : -1;
    if (rc) {
        if (rc < 0) GR_WARN_RATELIMITED("__transaction_state-%d: a malformed key skipped", p);
        return rc;
    }
    struct entry *e = find(tc, id);
    if (!value) {
        if (e) remove_entry(tc, e);
        return 0;
    }
    struct gr_arena arena;
    gr_arena_init(&arena, value_len * 4 + 4096);
    struct gr_txn_log_value v;
    rc = gr_txn_log_value_decode(value, value_len, &arena, &v);
    if (rc) {
        gr_arena_reset(&arena);
        if (rc < 0) GR_WARN_RATELIMITED("__transaction_state-%d: a malformed value skipped", p);
        return rc;
    }
    if (!e && !(e = insert(tc, id, p))) {
        gr_arena_reset(&arena);
        return -ENOMEM;
    }
    e->producer_id = v.producer_id;
    e->previous_producer_id = v.previous_producer_id;
    e->next_producer_id = v.next_producer_id;
    e->client_version = v.client_transaction_version;
    e->epoch = v.producer_epoch;
    e->last_epoch = -1; /* Kafka loads lastProducerEpoch as NO_PRODUCER_EPOCH */
    e->timeout_ms = v.timeout_ms;
    e->state = (enum gr_txn_state)v.state;
    e->start_ms = v.start_ms;
    e->last_update_ms = v.last_update_ms;
    tp_clear(&e->parts);
    rc = 0;
    if (e->state != GR_TXN_EMPTY)
        for (int32_t i = 0; i < v.topic_count && !rc; i++)
            for (int32_t k = 0; k < v.topics[i].count && !rc; k++)
                rc = tp_add(&e->parts, v.topics[i].topic, v.topics[i].partitions[k]);
    gr_arena_reset(&arena);
    return rc;
}

int gr_txn_load_done(struct gr_txn_coord *tc, int32_t p, int32_t coordinator_epoch)
{
    if (p < 0 || p >= tc->cfg.partitions || tc->parts[p].owner != LOADING ||
        tc->parts[p].epoch != coordinator_epoch)
        return -ESTALE;
    tc->parts[p].owner = OWNED;
    int n = 0;
    /* collect first: completing may call hooks that report at once and change the table */
    size_t cap = tc->count ? tc->count : 1, k = 0;
    struct entry **todo = calloc(cap, sizeof *todo);
    for (size_t i = 0; i < tc->nbuckets; i++)
        for (struct entry *e = tc->buckets[i]; e; e = e->hnext) {
            if (e->partition != p) continue;
            n++;
            if ((e->state == GR_TXN_PREPARE_COMMIT || e->state == GR_TXN_PREPARE_ABORT) && todo && k < cap)
                todo[k++] = e;
        }
    if (!todo) GR_WARN("__transaction_state-%d: out of memory completing prepared transactions", p);
    for (size_t i = 0; i < k; i++) {
        GR_INFO("txn %s: completing %s after loading partition %d", todo[i]->id,
                gr_txn_state_name(todo[i]->state), p);
        prepare_complete(tc, todo[i]);
    }
    free(todo);
    return n;
}

void gr_txn_unload(struct gr_txn_coord *tc, int32_t p)
{
    if (p < 0 || p >= tc->cfg.partitions) return;
    tc->parts[p] = (struct part_state){NOT_OWNED, tc->parts[p].epoch};
    for (size_t i = 0; i < tc->nbuckets; i++)
        for (struct entry *e = tc->buckets[i], *next; e; e = next) {
            next = e->hnext;
            if (e->partition == p) remove_entry(tc, e);
        }
}

/* ---- timers ---- */

/* abortTimedOutTransactions */
static void abort_timed_out(struct gr_txn_coord *tc, int64_t now)
{
    size_t cap = tc->count ? tc->count : 1, k = 0;
    struct entry **todo = calloc(cap, sizeof *todo);
    if (!todo) return;
    for (size_t i = 0; i < tc->nbuckets; i++)
        for (struct entry *e = tc->buckets[i]; e; e = e->hnext)
            if (tc->parts[e->partition].owner == OWNED && e->pending == NO_PENDING &&
                e->state == GR_TXN_ONGOING && e->start_ms + e->timeout_ms < now)
                todo[k++] = e;
    for (size_t i = 0; i < k; i++) {
        GR_INFO("txn %s: aborting the transaction of producer %lld epoch %d after its timeout of %d ms",
                todo[i]->id, (long long)todo[i]->producer_id, todo[i]->epoch, todo[i]->timeout_ms);
        fence_and_abort(tc, todo[i], NULL, false);
    }
    free(todo);
}

/* removeExpiredTransactionalIds (one tombstone per id) */
static void remove_expired(struct gr_txn_coord *tc, int64_t now)
{
    size_t cap = tc->count ? tc->count : 1, k = 0;
    struct entry **todo = calloc(cap, sizeof *todo);
    if (!todo) return;
    for (size_t i = 0; i < tc->nbuckets; i++)
        for (struct entry *e = tc->buckets[i]; e; e = e->hnext) {
            bool allowed = e->state == GR_TXN_EMPTY || e->state == GR_TXN_COMPLETE_COMMIT ||
                           e->state == GR_TXN_COMPLETE_ABORT; /* isExpirationAllowed */
            if (tc->parts[e->partition].owner == OWNED && e->pending == NO_PENDING && allowed &&
                e->last_update_ms <= now - tc->cfg.id_expiration_ms)
                todo[k++] = e;
        }
    for (size_t i = 0; i < k; i++) {
        struct entry *e = todo[i];
        struct gr_txn_write *w = new_write(tc, e, W_DEAD, GR_TXN_DEAD);
        if (!w) break;
        e->pending = GR_TXN_DEAD;
        int16_t err = submit(tc, w);
        if (err) {
            free_write(tc, w);
            e->pending = NO_PENDING;
        }
    }
    free(todo);
}

void gr_txn_tick(struct gr_txn_coord *tc)
{
    int64_t now = now_ms(tc);
    if (tc->retry_pending) {
        tc->retry_pending = false;
        for (struct gr_txn_write *w = tc->writes, *next; w; w = next) {
            next = w->next;
            if (!w->retry) continue;
            if (!w->e) { /* orphaned while waiting for its retry */
                free_write(tc, w);
                continue;
            }
            w->retry = false;
            int16_t err = submit(tc, w);
            if (err) {
                w->e->pending = NO_PENDING;
                free_write(tc, w);
            }
        }
    }
    if (now >= tc->next_abort_ms) {
        tc->next_abort_ms = now + tc->cfg.abort_timed_out_interval_ms;
        abort_timed_out(tc, now);
    }
    if (now >= tc->next_expire_ms) {
        tc->next_expire_ms = now + tc->cfg.remove_expired_interval_ms;
        remove_expired(tc, now);
    }
}

int64_t gr_txn_next_deadline_ms(const struct gr_txn_coord *tc)
{
    int64_t d = tc->next_abort_ms < tc->next_expire_ms ? tc->next_abort_ms : tc->next_expire_ms;
    return tc->retry_pending ? 0 : d; /* 0: due now */
}

/* ---- inspection ---- */

int16_t gr_txn_describe(const struct gr_txn_coord *tc, struct gr_str txn_id, struct gr_txn_info *out)
{
    int16_t err = owner_error(tc, txn_id, NULL);
    if (err) return err;
    const struct entry *e = find(tc, txn_id);
    if (!e) return GR_ERR_TRANSACTIONAL_ID_NOT_FOUND;
    *out =
        (struct gr_txn_info){e->state,          e->pending,    e->producer_id,      e->previous_producer_id,
                             e->epoch,          e->last_epoch, e->timeout_ms,       e->start_ms,
                             e->last_update_ms, e->parts.n,    e->next_producer_id, e->client_version};
    return 0;
}

bool gr_txn_has_partition(const struct gr_txn_coord *tc, struct gr_str txn_id, struct gr_txn_tp tp)
{
    const struct entry *e = find(tc, txn_id);
    return e && tp_find(&e->parts, tp.topic, tp.partition) >= 0;
}

int32_t gr_txn_partitions(const struct gr_txn_coord *tc, struct gr_str txn_id, struct gr_txn_tp *out,
                          int32_t cap)
{
    const struct entry *e = find(tc, txn_id);
    if (!e) return 0;
    for (int32_t i = 0; i < e->parts.n && i < cap; i++)
        out[i] = (struct gr_txn_tp){{e->parts.v[i].topic, e->parts.v[i].topic_len}, e->parts.v[i].partition};
    return e->parts.n;
}

/* listTransactionStates' shouldInclude. */
static bool list_keeps(const struct entry *e, const struct gr_txn_list_filter *f, int64_t now)
{
    if (e->state == GR_TXN_DEAD) return false; /* being expired */
    bool found = f->producer_id_count == 0;
    for (int32_t i = 0; i < f->producer_id_count && !found; i++)
        found = f->producer_ids[i] == e->producer_id;
    if (!found) return false;
    found = !f->filter_states;
    for (int32_t i = 0; i < f->state_count && !found; i++)
        found = f->states[i] == e->state;
    if (!found) return false;
    return f->duration_ms < 0 || now - e->start_ms > f->duration_ms;
}

int16_t gr_txn_list(const struct gr_txn_coord *tc, const struct gr_txn_list_filter *f,
                    void (*fn)(void *ctx, const struct gr_txn_listing *l), void *ctx)
{
    for (int32_t p = 0; p < tc->cfg.partitions; p++)
        if (tc->parts[p].owner == LOADING) return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    int64_t now = now_ms(tc);
    for (size_t b = 0; b < tc->nbuckets; b++)
        for (const struct entry *e = tc->buckets[b]; e; e = e->hnext) {
            if (tc->parts[e->partition].owner != OWNED || !list_keeps(e, f, now)) continue;
            struct gr_txn_listing l = {{e->id, e->id_len}, e->producer_id, e->state};
            fn(ctx, &l);
        }
    return GR_ERR_NONE;
}

/* ---- error shaping ---- */

int16_t gr_txn_error_for_version(enum gr_txn_api api, int16_t version, int16_t error)
{
    static const int16_t fenced_min[] = {
        [GR_TXN_API_PRODUCE] = INT16_MAX, [GR_TXN_API_INIT_PRODUCER_ID] = 4,
        [GR_TXN_API_ADD_PARTITIONS] = 2,  [GR_TXN_API_ADD_OFFSETS] = 2,
        [GR_TXN_API_END_TXN] = 2,         [GR_TXN_API_TXN_OFFSET_COMMIT] = 0,
    };
    static const int16_t abortable_min[] = {
        [GR_TXN_API_PRODUCE] = 11,    [GR_TXN_API_INIT_PRODUCER_ID] = 5, [GR_TXN_API_ADD_PARTITIONS] = 5,
        [GR_TXN_API_ADD_OFFSETS] = 4, [GR_TXN_API_END_TXN] = 4,          [GR_TXN_API_TXN_OFFSET_COMMIT] = 4,
    };
    if (error == GR_ERR_PRODUCER_FENCED && version < fenced_min[api]) return GR_ERR_INVALID_PRODUCER_EPOCH;
    if (error == GR_ERR_TRANSACTION_ABORTABLE && version < abortable_min[api])
        return GR_ERR_INVALID_TXN_STATE;
    return error;
}
