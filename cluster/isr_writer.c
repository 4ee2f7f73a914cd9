/*
 * isr_writer.c: a leader's ISR changes as etcd txns (rules in cluster/isr_writer.h).
 *
 * Pending changes sit in one array in proposal order; the txn in flight holds its first `batch` entries.
 * One txn: compares (this broker's registration CREATE == its epoch; each partition key MOD == the change's
 * partition epoch; each added member's registration CREATE == its broker epoch), success (one put per
 * partition), failure (a read of every compared key, in the same order), so a failed txn tells each change
 * its own outcome: the ones whose compares all held go back to the queue and are sent again at once.
 * Outcomes are gathered first and the done hooks run after the array is settled (a hook may propose or
 * cancel).
 *
 * Read next: cluster/tests/test_isr_writer.c.
 */
#include "cluster/isr_writer.h"

#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd.h"
#include "common/log.h"

struct slot {
    struct gr_isr_change chg;
    gr_isr_done *done;
    void *ctx;
    int32_t added_count;
    int32_t added[GR_CLUSTER_REPLICAS_MAX]; /* indexes into chg.isr of the members being added */
    bool cancelled;                         /* cancelled while in the txn: dropped, no done */
};

struct finished {
    struct gr_isr_change chg;
    gr_isr_done *done;
    void *ctx;
    enum gr_isr_outcome outcome;
    int64_t partition_epoch;
};

struct gr_isr_writer {
    struct ev_loop *loop;
    struct gr_etcd *etcd;
    const struct gr_cluster_layout *lay;
    const struct gr_image *img;
    int32_t node_id;
    struct slot *slots; /* GR_ISR_WRITER_PENDING_MAX */
    int32_t count, batch;
    int64_t txn_broker_epoch; /* this broker's epoch the txn in flight compared */
    struct gr_etcd_req *req;
    ev_timer timer; /* back-off after a lost txn */
    int64_t backoff_ms;
    struct gr_isr_writer_stats stats;
    char own_key[GR_CLUSTER_KEY_BUF];
    char part_keys[GR_ISR_WRITER_TXN_PARTITIONS_MAX][GR_CLUSTER_KEY_BUF];
    char member_keys[GR_ETCD_TXN_OPS_MAX][GR_CLUSTER_KEY_BUF];
};

static void step(struct gr_isr_writer *w);

static bool contains(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static int32_t find(const struct gr_isr_writer *w, const uint8_t id[16], int32_t partition)
{
    for (int32_t i = 0; i < w->count; i++) /* a cancelled one no longer counts: a new change may follow it */
        if (!w->slots[i].cancelled && w->slots[i].chg.partition == partition &&
            memcmp(w->slots[i].chg.topic_id, id, 16) == 0)
            return i;
    return -1;
}

/* ---- proposals ---- */

/* Kafka's ReplicationControlManager.validatePartitionData / isEligibleReplica: the ISR's shape against the
 * image, and the members being added (written to s->added). Returns 0 or the propose error. */
static int validate(const struct gr_isr_writer *w, const struct gr_isr_change *chg, struct slot *s)
{
    const struct gr_image_topic *t = gr_image_topic_find_id(w->img, chg->topic_id);
    const struct gr_image_partition *p = t ? gr_image_partition(t, chg->partition) : NULL;
    if (!p) return -ENOENT;
    const struct gr_image_broker *me = gr_image_broker(w->img, w->node_id);
    if (!me || me->epoch < 1 || me->fenced) return -ESTALE;
    if (chg->isr_count < 1 || chg->isr_count > GR_CLUSTER_REPLICAS_MAX || chg->partition_epoch < 1 ||
        chg->leader_epoch < 0 || !contains(chg->isr, chg->isr_count, w->node_id))
        return -EINVAL;
    s->added_count = 0;
    for (int32_t i = 0; i < chg->isr_count; i++) {
        int32_t id = chg->isr[i];
        if (contains(chg->isr, i, id) || !contains(gr_image_replicas(p), p->replica_count, id))
            return -EINVAL;
        if (contains(gr_image_isr(p), p->isr_count, id)) continue;
        const struct gr_image_broker *br = gr_image_broker(w->img, id);
        if (!br || br->fenced || br->shutting_down || br->epoch != chg->broker_epochs[i]) return -EPERM;
        s->added[s->added_count++] = i;
    }
    return 0;
}

int gr_isr_writer_propose(struct gr_isr_writer *w, const struct gr_isr_change *chg, gr_isr_done *done,
                          void *ctx)
{
    struct slot s = {.chg = *chg, .done = done, .ctx = ctx};
    int rc = validate(w, chg, &s);
    if (rc) return rc;
    if (find(w, chg->topic_id, chg->partition) >= 0) return -EEXIST;
    if (w->count == GR_ISR_WRITER_PENDING_MAX) return -EBUSY;
    w->slots[w->count++] = s;
    step(w);
    return 0;
}

bool gr_isr_writer_cancel(struct gr_isr_writer *w, const uint8_t topic_id[16], int32_t partition)
{
    int32_t i = find(w, topic_id, partition);
    if (i < 0) return false;
    if (i < w->batch) { /* in the txn: dropped when it completes */
        w->slots[i].cancelled = true;
        return true;
    }
    memmove(&w->slots[i], &w->slots[i + 1], sizeof *w->slots * (size_t)(w->count - i - 1));
    w->count--;
    return true;
}

/* ---- the txn ---- */

/* How many of the queued changes go into one txn (every count within GR_ETCD_TXN_OPS_MAX). */
static int32_t batch_size(const struct gr_isr_writer *w)
{
    int32_t n = 0, compares = 1, ops = 1; /* this broker's registration: compared and read */
    while (n < w->count && n < GR_ISR_WRITER_TXN_PARTITIONS_MAX) {
        int32_t a = w->slots[n].added_count;
        if (compares + 1 + a > GR_ETCD_TXN_OPS_MAX || ops + 2 + a > GR_ETCD_TXN_OPS_MAX) break;
        compares += 1 + a;
        ops += 2 + a;
        n++;
    }
    return n;
}

static void on_txn(void *arg, const struct gr_etcd_result *res);

/* The value written: the stored leader and leader epoch, the new ISR. */
static int encode(const struct gr_isr_writer *w, const struct gr_isr_change *chg, char **val, size_t *len)
{
    struct gr_cluster_partition st = {.leader = w->node_id,
                                      .leader_epoch = chg->leader_epoch,
                                      .isr_count = chg->isr_count,
                                      .controller_epoch =
                                          w->img->controller_epoch > 0 ? w->img->controller_epoch : 1};
    memcpy(st.isr, chg->isr, sizeof(int32_t) * (size_t)chg->isr_count);
    char err[GR_CLUSTER_ERR_BYTES];
    int rc = gr_cluster_partition_encode(&st, val, len, err);
    if (rc) GR_LOG_RATELIMITED(GR_LOG_ERROR, "isr writer: %s", err);
    return rc;
}

/* Builds and sends the txn of slots[0..n); false when it could not (out of memory, a refused request). */
static bool send_txn(struct gr_isr_writer *w, int32_t n, int64_t my_epoch)
{
    struct gr_etcd_compare cmps[GR_ETCD_TXN_OPS_MAX];
    struct gr_etcd_op puts[GR_ISR_WRITER_TXN_PARTITIONS_MAX], reads[GR_ETCD_TXN_OPS_MAX];
    char *vals[GR_ISR_WRITER_TXN_PARTITIONS_MAX] = {0};
    size_t nc = 0, nr = 0, nm = 0;
    bool ok = true;
    cmps[nc++] = (struct gr_etcd_compare){.key = w->own_key, .target = GR_ETCD_CREATE, .number = my_epoch};
    reads[nr++] = (struct gr_etcd_op){.type = GR_ETCD_OP_RANGE, .key = w->own_key};
    for (int32_t i = 0; i < n && ok; i++) { /* partition compares and reads first */
        const struct gr_isr_change *chg = &w->slots[i].chg;
        struct gr_uuid id;
        size_t len = 0;
        memcpy(id.b, chg->topic_id, 16);
        ok = gr_cluster_key_partition(w->lay, id, chg->partition, w->part_keys[i]) > 0 &&
             encode(w, chg, &vals[i], &len) == 0;
        cmps[nc++] = (struct gr_etcd_compare){
            .key = w->part_keys[i], .target = GR_ETCD_MOD, .number = chg->partition_epoch};
        puts[i] = (struct gr_etcd_op){
            .type = GR_ETCD_OP_PUT, .key = w->part_keys[i], .value = vals[i], .value_len = len};
        reads[nr++] = (struct gr_etcd_op){.type = GR_ETCD_OP_RANGE, .key = w->part_keys[i]};
    }
    for (int32_t i = 0; i < n && ok; i++) /* then the added members' registrations */
        for (int32_t j = 0; j < w->slots[i].added_count && ok; j++, nm++) {
            const struct gr_isr_change *chg = &w->slots[i].chg;
            int32_t k = w->slots[i].added[j];
            ok = gr_cluster_key_broker(w->lay, chg->isr[k], w->member_keys[nm]) > 0;
            cmps[nc++] = (struct gr_etcd_compare){
                .key = w->member_keys[nm], .target = GR_ETCD_CREATE, .number = chg->broker_epochs[k]};
            reads[nr++] = (struct gr_etcd_op){.type = GR_ETCD_OP_RANGE, .key = w->member_keys[nm]};
        }
    struct gr_etcd_txn txn = {cmps, nc, puts, (size_t)n, reads, nr};
    if (ok) w->req = gr_etcd_txn(w->etcd, &txn, on_txn, w);
    for (int32_t i = 0; i < n; i++)
        free(vals[i]);
    if (!w->req) {
        GR_LOG_RATELIMITED(GR_LOG_ERROR, "isr writer: txn not sent: %s",
                           ok ? gr_etcd_last_error(w->etcd) : "a key or value could not be made");
        return false;
    }
    w->batch = n;
    w->txn_broker_epoch = my_epoch;
    w->stats.txns_sent++;
    return true;
}

static void backoff(struct gr_isr_writer *w)
{
    ev_timer_stop(w->loop, &w->timer);
    ev_timer_set(&w->timer, (double)w->backoff_ms / 1000.0, 0.0);
    ev_timer_start(w->loop, &w->timer);
    w->backoff_ms *= 2;
    if (w->backoff_ms > GR_ISR_WRITER_BACKOFF_MAX_MS) w->backoff_ms = GR_ISR_WRITER_BACKOFF_MAX_MS;
}

/* Removes slots whose outcome is known (done[i] set) from slots[0..n), keeping the order, then runs their
 * hooks (after the array is settled). */
static void settle(struct gr_isr_writer *w, int32_t n, const enum gr_isr_outcome *out, const bool *fin,
                   const int64_t *epochs)
{
    struct finished f[GR_ISR_WRITER_TXN_PARTITIONS_MAX];
    int32_t nf = 0, k = 0;
    for (int32_t i = 0; i < n; i++) {
        struct slot *s = &w->slots[i];
        if (fin[i] || s->cancelled) {
            if (!s->cancelled) f[nf++] = (struct finished){s->chg, s->done, s->ctx, out[i], epochs[i]};
            continue;
        }
        w->slots[k++] = *s;
    }
    memmove(&w->slots[k], &w->slots[n], sizeof *w->slots * (size_t)(w->count - n));
    w->count -= n - k;
    w->batch = 0;
    for (int32_t i = 0; i < nf; i++) {
        if (f[i].outcome == GR_ISR_OK) w->stats.changes_ok++;
        f[i].done(f[i].ctx, &f[i].chg, f[i].outcome, f[i].partition_epoch);
    }
}

/* The outcome of slot s from the failure branch's reads: its partition state (kv, NULL when absent),
 * whether this broker's registration held, and its added members' registrations (members[0..added)).
 * Returns false when its compares all held (another change failed the txn: send it again). */
static bool sort_out(const struct gr_isr_writer *w, const struct slot *s, const struct gr_etcd_kv *kv,
                     bool own_ok, const struct gr_etcd_op_result *members, enum gr_isr_outcome *out,
                     int64_t *epoch)
{
    const struct gr_isr_change *chg = &s->chg;
    *epoch = 0;
    if (!kv) {
        *out = GR_ISR_UNKNOWN;
        return true;
    }
    if (kv->mod_revision != chg->partition_epoch) {
        struct gr_cluster_partition st;
        char err[GR_CLUSTER_ERR_BYTES];
        *out = GR_ISR_STALE;
        if (gr_cluster_partition_decode(kv->value, kv->value_len, &st, err) != 0) return true;
        if (st.leader != w->node_id || st.leader_epoch != chg->leader_epoch) {
            *out = GR_ISR_FENCED;
        } else if (st.isr_count == chg->isr_count &&
                   memcmp(st.isr, chg->isr, sizeof(int32_t) * (size_t)chg->isr_count) == 0) {
            *out = GR_ISR_OK; /* already as proposed: this writer's lost txn applied (no second change) */
            *epoch = kv->mod_revision;
        }
        return true;
    }
    if (!own_ok) {
        *out = GR_ISR_STALE_BROKER;
        return true;
    }
    for (int32_t j = 0; j < s->added_count; j++) {
        const struct gr_etcd_op_result *m = &members[j];
        if (m->kv_count != 1 || m->kvs[0].create_revision != chg->broker_epochs[s->added[j]]) {
            *out = GR_ISR_INELIGIBLE;
            return true;
        }
    }
    return false;
}

static void on_failed(struct gr_isr_writer *w, const struct gr_etcd_result *res)
{
    int32_t n = w->batch;
    enum gr_isr_outcome out[GR_ISR_WRITER_TXN_PARTITIONS_MAX];
    bool fin[GR_ISR_WRITER_TXN_PARTITIONS_MAX] = {0};
    int64_t epochs[GR_ISR_WRITER_TXN_PARTITIONS_MAX] = {0};
    size_t want = 1 + (size_t)n, m = 1 + (size_t)n;
    for (int32_t i = 0; i < n; i++)
        want += (size_t)w->slots[i].added_count;
    if (res->response_count != want) { /* not the txn sent: treat as lost */
        GR_LOG_RATELIMITED(GR_LOG_ERROR, "isr writer: a failed txn answered %zu reads, %zu expected",
                           res->response_count, want);
        w->batch = 0;
        backoff(w);
        return;
    }
    const struct gr_etcd_op_result *own = &res->responses[0];
    bool own_ok = own->kv_count == 1 && own->kvs[0].create_revision == w->txn_broker_epoch;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_etcd_op_result *r = &res->responses[1 + i];
        fin[i] = sort_out(w, &w->slots[i], r->kv_count == 1 ? &r->kvs[0] : NULL, own_ok, &res->responses[m],
                          &out[i], &epochs[i]);
        m += (size_t)w->slots[i].added_count;
    }
    settle(w, n, out, fin, epochs);
}

static void on_txn(void *arg, const struct gr_etcd_result *res)
{
    struct gr_isr_writer *w = arg;
    w->req = NULL;
    if (res->status != GR_ETCD_OK) { /* outcome unknown: the same txn again after the back-off */
        w->stats.txns_lost++;
        GR_LOG_RATELIMITED(GR_LOG_WARN, "isr writer: txn lost (%s): sent again in %" PRId64 " ms",
                           res->message, w->backoff_ms);
        for (int32_t i = 0; i < w->batch; i++) /* cancelled ones leave now */
            if (w->slots[i].cancelled) {
                memmove(&w->slots[i], &w->slots[i + 1], sizeof *w->slots * (size_t)(w->count - i - 1));
                w->count--, w->batch--, i--;
            }
        w->batch = 0;
        backoff(w);
        return;
    }
    w->backoff_ms = GR_ISR_WRITER_BACKOFF_MIN_MS;
    if (res->succeeded) {
        enum gr_isr_outcome out[GR_ISR_WRITER_TXN_PARTITIONS_MAX] = {GR_ISR_OK};
        bool fin[GR_ISR_WRITER_TXN_PARTITIONS_MAX];
        int64_t epochs[GR_ISR_WRITER_TXN_PARTITIONS_MAX];
        for (int32_t i = 0; i < w->batch; i++)
            out[i] = GR_ISR_OK, fin[i] = true, epochs[i] = res->revision;
        w->stats.txns_ok++;
        settle(w, w->batch, out, fin, epochs);
    } else {
        w->stats.txns_failed++;
        on_failed(w, res);
    }
    step(w);
}

/* Sends the next txn when none is in flight and no back-off runs. */
static void step(struct gr_isr_writer *w)
{
    if (w->req || w->count == 0 || ev_is_active(&w->timer)) return;
    const struct gr_image_broker *me = gr_image_broker(w->img, w->node_id);
    if (!me || me->epoch < 1) { /* not registered as far as the image knows: nothing can be written */
        enum gr_isr_outcome out[GR_ISR_WRITER_TXN_PARTITIONS_MAX];
        bool fin[GR_ISR_WRITER_TXN_PARTITIONS_MAX];
        int64_t epochs[GR_ISR_WRITER_TXN_PARTITIONS_MAX] = {0};
        int32_t n = w->count < GR_ISR_WRITER_TXN_PARTITIONS_MAX ? w->count : GR_ISR_WRITER_TXN_PARTITIONS_MAX;
        for (int32_t i = 0; i < n; i++)
            out[i] = GR_ISR_STALE_BROKER, fin[i] = true;
        settle(w, n, out, fin, epochs);
        step(w);
        return;
    }
    if (!send_txn(w, batch_size(w), me->epoch)) backoff(w);
}

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    step(t->data);
}

struct gr_isr_writer *gr_isr_writer_new(struct ev_loop *loop, struct gr_etcd *etcd,
                                        const struct gr_cluster_layout *lay, const struct gr_image *img,
                                        int32_t node_id)
{
    struct gr_isr_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->slots = calloc(GR_ISR_WRITER_PENDING_MAX, sizeof *w->slots);
    if (!w->slots || gr_cluster_key_broker(lay, node_id, w->own_key) <= 0) {
        free(w->slots);
        free(w);
        return NULL;
    }
    w->loop = loop;
    w->etcd = etcd;
    w->lay = lay;
    w->img = img;
    w->node_id = node_id;
    w->backoff_ms = GR_ISR_WRITER_BACKOFF_MIN_MS;
    ev_timer_init(&w->timer, on_timer, 0.0, 0.0);
    w->timer.data = w;
    return w;
}

int32_t gr_isr_writer_pending(const struct gr_isr_writer *w)
{
    int32_t n = 0;
    for (int32_t i = 0; i < w->count; i++)
        n += !w->slots[i].cancelled;
    return n;
}

const struct gr_isr_writer_stats *gr_isr_writer_stats(const struct gr_isr_writer *w)
{
    return &w->stats;
}

void gr_isr_writer_free(struct gr_isr_writer *w)
{
    if (!w) return;
    if (w->req) gr_etcd_cancel(w->req);
    ev_timer_stop(w->loop, &w->timer);
    free(w->slots);
    free(w);
}
