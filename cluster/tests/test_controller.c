/*
 * test_controller.c: the controller (cluster/controller.h) against a real etcd, started by
 * cluster/tests/etcd-tests.sh (ETCD_ENDPOINT). Two controllers (nodes 1 and 2) run on one loop, each over
 * its own image, which a small feeder in this file keeps from a watch on the cluster's root (the member's
 * feed is another slice): broker registrations, the controller key, topic records and partition states
 * decoded with cluster/values.h, the image's observers called once per watch message. The test writes
 * broker registrations (each under its own lease) and topic records, and reads back every partition key.
 *
 * Covers: two campaigns, one winner, both images agreeing on its epoch; a new 12-partition topic striped
 * over 3 brokers gets 4 leaders each, epoch 0, the controller epoch in every value; a broker whose lease is
 * revoked loses its partitions (leader -1, epoch 1) and gets them back when it registers again (epoch 2);
 * the winner's lease revoked: the other takes over with a higher epoch (the time from the revoke to its
 * first partition write is printed) and applies further changes (a new topic); a deposed controller (lease
 * revoked behind its back, its image not told) attempts a write, its txn fails, it steps down, and no key
 * carries its epoch after the revoke (every revision the watch shows is checked); 1,000 new partitions
 * written in 16 txns; a controller whose lease is lost stops at once, and with a new lease is elected again
 * and brings a returning broker's partitions back; a topic deleted while the controller's image still shows
 * it (a racing deletion) never gets its partition keys re-created; with replication factor 3, a controlled
 * shutdown moves leadership to the next ISR member and shrinks the other ISRs at the same leader epoch, and
 * an ISR expansion by the leader (cluster/isr_writer.h) stands. Ends with "controller: N passed, N failed".
 */
#include <ev.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/controller.h"
#include "cluster/etcd.h"
#include "cluster/isr_writer.h"
#include "cluster/tests/testkit.h"
#include "common/time.h"

static struct ev_loop *loop;
static struct gr_etcd *etcd;
static struct gr_cluster_layout lay;

/* ---- running the loop ---- */

/* Runs the loop until pred(arg) holds or ms pass. Returns whether it held. */
static bool wait_for(bool (*pred)(void *), void *arg, int64_t ms)
{
    return testkit_run_until(loop, pred, arg, ms);
}

struct outcome {
    bool fired;
    enum gr_etcd_status status;
    bool succeeded;
    int64_t revision, lease_id, count;
    int n;
    struct {
        char key[GR_CLUSTER_KEY_BUF];
        struct gr_cluster_partition st;
        int64_t mod;
    } kvs[64];
};

static bool fired(void *arg)
{
    return ((struct outcome *)arg)->fired;
}

static void on_done(void *ctx, const struct gr_etcd_result *res)
{
    struct outcome *o = ctx;
    char err[GR_CLUSTER_ERR_BYTES];
    o->fired = true;
    o->status = res->status;
    o->succeeded = res->succeeded;
    o->revision = res->revision;
    o->lease_id = res->lease_id;
    o->count = res->op.count;
    if (res->status != GR_ETCD_OK) printf("etcd: %s\n", res->message);
    for (size_t i = 0; i < res->op.kv_count && o->n < 64; i++) { /* partition states of a range */
        const struct gr_etcd_kv *kv = &res->op.kvs[i];
        snprintf(o->kvs[o->n].key, sizeof o->kvs[o->n].key, "%s", kv->key);
        o->kvs[o->n].mod = kv->mod_revision;
        if (gr_cluster_partition_decode(kv->value, kv->value_len, &o->kvs[o->n].st, err) == 0) o->n++;
    }
}

static struct outcome *finish(struct gr_etcd_req *req, struct outcome *o)
{
    if (!req)
        printf("refused: %s\n", gr_etcd_last_error(etcd));
    else
        wait_for(fired, o, 10000);
    return o;
}

static int64_t grant(void)
{
    struct outcome o = {0};
    finish(gr_etcd_lease_grant(etcd, 10, 0, on_done, &o), &o);
    return o.status == GR_ETCD_OK ? o.lease_id : 0;
}

static void lease_revoke(int64_t id)
{
    struct outcome o = {0};
    finish(gr_etcd_lease_revoke(etcd, id, on_done, &o), &o);
}

static int64_t put(const char *key, char *value, size_t len, int64_t lease)
{
    struct outcome o = {0};
    struct gr_etcd_op op = {
        .type = GR_ETCD_OP_PUT, .key = key, .value = value, .value_len = len, .lease = lease};
    finish(gr_etcd_put(etcd, &op, on_done, &o), &o);
    free(value);
    return o.status == GR_ETCD_OK ? o.revision : 0;
}

/* Every partition state of topic `id`, decoded. */
static void read_states(struct gr_uuid id, struct outcome *o)
{
    char pre[GR_CLUSTER_KEY_BUF], end[GR_CLUSTER_KEY_BUF];
    int len = gr_cluster_prefix_partitions(&lay, id, pre);
    gr_cluster_range_end(pre, (size_t)len, end);
    memset(o, 0, sizeof *o);
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE, .key = pre, .range_end = end};
    finish(gr_etcd_range(etcd, &op, on_done, o), o);
}

static int64_t put_broker(int32_t node_id, int64_t lease, bool shutting_down)
{
    struct gr_cluster_broker br = {.node_id = node_id, .listener_count = 1, .shutting_down = shutting_down};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9000 + node_id;
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    gr_cluster_key_broker(&lay, node_id, key);
    if (gr_cluster_broker_encode(&br, &val, &len, err)) printf("broker: %s\n", err);
    return put(key, val, len, lease);
}

static int64_t register_broker(int32_t node_id, int64_t lease)
{
    return put_broker(node_id, lease, false);
}

/* Puts topic record `name` with `parts` partitions of `rf` replicas, partition p on nodes 1 + (p + i) % 3. */
static int64_t put_topic_rf(const char *name, struct gr_uuid id, int32_t parts, int32_t rf)
{
    struct gr_cluster_assignment *as = calloc((size_t)parts, sizeof *as);
    struct gr_cluster_topic t = {.topic_id = id, .partition_count = parts, .partitions = as};
    for (int32_t p = 0; p < parts; p++) {
        as[p].replica_count = rf;
        for (int32_t i = 0; i < rf; i++)
            as[p].replicas[i] = 1 + (p + i) % 3;
    }
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    gr_cluster_key_topic(&lay, name, strlen(name), key);
    if (gr_cluster_topic_encode(&t, &val, &len, err)) printf("topic: %s\n", err);
    free(as);
    return put(key, val, len, 0);
}

/* Puts topic record `name` with `parts` single-replica partitions, partition p on node 1 + p % 3. */
static int64_t put_topic(const char *name, struct gr_uuid id, int32_t parts)
{
    return put_topic_rf(name, id, parts, 1);
}

/* Deletes topic `name` and its partition states in one txn (as the topics slice does). */
static bool delete_topic(const char *name, struct gr_uuid id)
{
    char key[GR_CLUSTER_KEY_BUF], pre[GR_CLUSTER_KEY_BUF], end[GR_CLUSTER_KEY_BUF];
    gr_cluster_key_topic(&lay, name, strlen(name), key);
    int len = gr_cluster_prefix_partitions(&lay, id, pre);
    gr_cluster_range_end(pre, (size_t)len, end);
    struct gr_etcd_op ops[2] = {{.type = GR_ETCD_OP_DELETE, .key = key},
                                {.type = GR_ETCD_OP_DELETE, .key = pre, .range_end = end}};
    struct gr_etcd_txn txn = {NULL, 0, ops, 2, NULL, 0};
    struct outcome o = {0};
    finish(gr_etcd_txn(etcd, &txn, on_done, &o), &o);
    return o.status == GR_ETCD_OK && o.succeeded;
}

/* ---- the feeder: a watch keeping one image ---- */

struct feeder {
    struct gr_image *img;
    struct gr_etcd_watch *watch;
    ev_timer batch; /* the observers run once per watch message: after the events, on the next turn */
    int64_t revision;
    bool paused;              /* events dropped (an image that is not told) */
    int64_t newer_than_epoch; /* first partition write with a controller epoch above this: its time */
    int64_t first_write_ms;
    int64_t deposed_epoch, deposed_after; /* partition writes carrying deposed_epoch after that revision */
    int stale_writes;
};

static void feed_put(struct feeder *f, const struct gr_etcd_kv *kv)
{
    struct gr_cluster_key k;
    char err[GR_CLUSTER_ERR_BYTES];
    if (gr_cluster_key_parse(&lay, kv->key, kv->key_len, &k)) return;
    if (k.kind == GR_CLUSTER_KEY_BROKER) {
        struct gr_cluster_broker br;
        if (gr_cluster_broker_decode(kv->value, kv->value_len, &br, err)) return;
        struct gr_image_broker ib = {.node_id = br.node_id,
                                     .epoch = kv->create_revision,
                                     .shutting_down = br.shutting_down,
                                     .listener_count = 1};
        snprintf(ib.listeners[0].name, sizeof ib.listeners[0].name, "%s", br.listeners[0].name);
        snprintf(ib.listeners[0].host, sizeof ib.listeners[0].host, "%s", br.listeners[0].host);
        ib.listeners[0].port = br.listeners[0].port;
        gr_image_set_broker(f->img, &ib);
    } else if (k.kind == GR_CLUSTER_KEY_CONTROLLER) {
        struct gr_cluster_controller c;
        if (gr_cluster_controller_decode(kv->value, kv->value_len, &c, err)) return;
        gr_image_set_controller(f->img, c.node_id);
        f->img->controller_epoch = kv->create_revision;
    } else if (k.kind == GR_CLUSTER_KEY_TOPIC) {
        struct gr_cluster_topic t;
        struct gr_image_topic *it = NULL;
        if (gr_cluster_topic_decode(kv->value, kv->value_len, &t, err)) return;
        if (gr_image_put_topic(f->img, k.topic, k.topic_len, t.topic_id.b, false, t.partition_count, NULL,
                               &it) == 0) {
            it->record_revision = kv->mod_revision;
            for (int32_t p = 0; p < t.partition_count; p++) {
                if (it->parts[p].partition_epoch != 0) continue;
                struct gr_image_partition_state st = {.leader = -1,
                                                      .leader_epoch = -1,
                                                      .replicas = t.partitions[p].replicas,
                                                      .replica_count = t.partitions[p].replica_count};
                gr_image_set_partition(f->img, it, p, &st);
            }
        }
        gr_cluster_topic_free(&t);
    } else if (k.kind == GR_CLUSTER_KEY_PARTITION) {
        struct gr_cluster_partition ps;
        struct gr_image_topic *it = gr_image_topic_find_id(f->img, k.topic_id.b);
        if (!it || k.partition >= it->partition_count) return;
        if (gr_cluster_partition_decode(kv->value, kv->value_len, &ps, err)) return;
        const struct gr_image_partition *p = &it->parts[k.partition];
        int32_t reps[GR_IMAGE_REPLICAS_MAX];
        memcpy(reps, gr_image_replicas(p), sizeof(int32_t) * (size_t)p->replica_count);
        struct gr_image_partition_state st = {.leader = ps.leader,
                                              .leader_epoch = ps.leader_epoch,
                                              .partition_epoch = kv->mod_revision,
                                              .replicas = reps,
                                              .replica_count = p->replica_count,
                                              .isr = ps.isr,
                                              .isr_count = ps.isr_count};
        gr_image_set_partition(f->img, it, k.partition, &st);
        if (f->newer_than_epoch && ps.controller_epoch > f->newer_than_epoch && !f->first_write_ms)
            f->first_write_ms = gr_time_mono_ms();
        if (f->deposed_epoch && ps.controller_epoch == f->deposed_epoch &&
            kv->mod_revision > f->deposed_after)
            f->stale_writes++;
    }
}

static void feed_delete(struct feeder *f, const struct gr_etcd_kv *kv)
{
    struct gr_cluster_key k;
    if (gr_cluster_key_parse(&lay, kv->key, kv->key_len, &k)) return;
    if (k.kind == GR_CLUSTER_KEY_BROKER) {
        gr_image_remove_broker(f->img, k.node_id);
    } else if (k.kind == GR_CLUSTER_KEY_CONTROLLER) {
        gr_image_set_controller(f->img, -1);
        f->img->controller_epoch = 0;
    } else if (k.kind == GR_CLUSTER_KEY_TOPIC) {
        struct gr_image_topic *it = gr_image_topic_find(f->img, k.topic, k.topic_len);
        if (it) gr_image_remove_topic(f->img, it->id);
    }
}

static void on_batch(struct ev_loop *l, ev_timer *t, int revents)
{
    (void)l;
    (void)revents;
    struct feeder *f = t->data;
    f->img->revision = f->revision;
    gr_image_changed(f->img);
}

static void on_event(void *ctx, const struct gr_etcd_watch_event *ev)
{
    struct feeder *f = ctx;
    if (f->paused) return;
    if (ev->kind == GR_ETCD_EVENT_PUT || ev->kind == GR_ETCD_EVENT_SNAPSHOT_KV) feed_put(f, ev->kv);
    if (ev->kind == GR_ETCD_EVENT_DELETE) feed_delete(f, ev->kv);
    if (ev->revision > f->revision) f->revision = ev->revision;
    if (!ev_is_active(&f->batch)) ev_timer_start(loop, &f->batch);
}

static bool feeder_start(struct feeder *f, int32_t node_id)
{
    char root[GR_CLUSTER_KEY_BUF], end[GR_CLUSTER_KEY_BUF];
    int len = gr_cluster_prefix_root(&lay, root);
    gr_cluster_range_end(root, (size_t)len, end);
    memset(f, 0, sizeof *f);
    f->img = gr_image_new(node_id);
    ev_timer_init(&f->batch, on_batch, 0.0, 0.0);
    f->batch.data = f;
    f->watch = gr_etcd_watch_start(etcd, root, (size_t)len, end, (size_t)len, 0, false, on_event, f);
    return f->img && f->watch;
}

static void feeder_stop(struct feeder *f)
{
    gr_etcd_watch_stop(f->watch);
    ev_timer_stop(loop, &f->batch);
    gr_image_free(f->img);
}

/* ---- predicates ---- */

static struct feeder fd[2];
static struct gr_controller *ctl[2];

static bool watches_open(void *arg)
{
    (void)arg;
    return gr_etcd_watch_next_revision(fd[0].watch) && gr_etcd_watch_next_revision(fd[1].watch);
}

static bool three_brokers(void *arg)
{
    (void)arg;
    return gr_image_broker_count(fd[0].img) == 3 && gr_image_broker_count(fd[1].img) == 3;
}

static bool one_elected_and_seen(void *arg)
{
    (void)arg;
    int64_t e = gr_controller_epoch(ctl[0]) ? gr_controller_epoch(ctl[0]) : gr_controller_epoch(ctl[1]);
    return e && fd[0].img->controller_epoch == e && fd[1].img->controller_epoch == e;
}

/* Partition `p` of topic `id` in image `img` has leader `leader` at leader epoch `epoch` (p -1: every). */
struct want {
    struct gr_image *img;
    struct gr_uuid id;
    int32_t p, leader, epoch;
};

static bool partition_is(void *arg)
{
    struct want *w = arg;
    struct gr_image_topic *t = gr_image_topic_find_id(w->img, w->id.b);
    if (!t) return false;
    for (int32_t i = 0; i < t->partition_count; i++) {
        if (w->p >= 0 && i != w->p) continue;
        const struct gr_image_partition *p = &t->parts[i];
        if (p->partition_epoch == 0) return false;
        if (w->leader != -2 && (p->leader != w->leader || p->leader_epoch != w->epoch)) return false;
    }
    return true;
}

struct took_over {
    int l;
    int64_t old_epoch;
};

static bool new_controller_wrote(void *arg)
{
    struct took_over *t = arg;
    return gr_controller_epoch(ctl[t->l]) > t->old_epoch && fd[t->l].first_write_ms;
}

static bool txn_failed(void *arg)
{
    uint64_t *before = arg;
    return gr_controller_stats(ctl[before[0]])->txns_failed > before[1];
}

static bool txns_reached(void *arg)
{
    uint64_t *want = arg;
    return gr_controller_stats(ctl[want[0]])->txns_ok >= want[1];
}

/* ---- the test ---- */

static struct gr_uuid uuid_of(int n)
{
    struct gr_uuid id;
    for (int i = 0; i < 16; i++)
        id.b[i] = (uint8_t)(rand() & 0xff);
    id.b[0] = (uint8_t)n;
    return id;
}

static void check_states(struct gr_uuid id, int count, int64_t ctl_epoch, int32_t offline_node, int32_t epoch)
{
    struct outcome o;
    read_states(id, &o);
    CHECK(o.n == count);
    for (int i = 0; i < o.n; i++) {
        int32_t p = atoi(strrchr(o.kvs[i].key, '/') + 1), node = 1 + p % 3;
        bool off = node == offline_node;
        CHECK(o.kvs[i].st.leader == (off ? -1 : node));
        CHECK(o.kvs[i].st.isr_count == 1 && o.kvs[i].st.isr[0] == node);
        if (off) CHECK(o.kvs[i].st.controller_epoch == ctl_epoch && o.kvs[i].st.leader_epoch == epoch);
    }
}

/* The ISR of partition p of topic `id` in etcd (count, members in *isr), its leader and leader epoch. */
static int32_t read_isr(struct gr_uuid id, int32_t p, int32_t *isr, int32_t *leader, int32_t *epoch,
                        int64_t *mod)
{
    struct outcome o;
    read_states(id, &o);
    for (int i = 0; i < o.n; i++)
        if (atoi(strrchr(o.kvs[i].key, '/') + 1) == p) {
            memcpy(isr, o.kvs[i].st.isr, sizeof(int32_t) * (size_t)o.kvs[i].st.isr_count);
            *leader = o.kvs[i].st.leader;
            *epoch = o.kvs[i].st.leader_epoch;
            *mod = o.kvs[i].mod;
            return o.kvs[i].st.isr_count;
        }
    return -1;
}

static bool same_isr(const int32_t *a, int32_t n, const int32_t *b, int32_t m)
{
    return n == m && memcmp(a, b, sizeof(int32_t) * (size_t)n) == 0;
}

struct isr_done {
    int fired;
    enum gr_isr_outcome outcome;
};

static void on_isr(void *ctx, const struct gr_isr_change *chg, enum gr_isr_outcome outcome, int64_t pe)
{
    (void)chg;
    (void)pe;
    struct isr_done *d = ctx;
    d->fired++;
    d->outcome = outcome;
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static bool isr_fired(void *arg)
{
    return ((struct isr_done *)arg)->fired > 0;
}

/* Replication factor 3 (controller l running, brokers 1..3 live): a new topic's ISR is every replica;
 * broker 3's controlled shutdown (shutting_down in its registration) moves the leadership it had to the
 * next ISR member (leader epoch + 1) and takes it out of every ISR at the same leader epoch elsewhere;
 * registered again it stays out of the ISRs until the leader's ISR writer adds it (broker epoch checked),
 * which the controller then leaves alone. */
static void replicated(int l, int64_t *lease)
{
    struct gr_uuid t5 = uuid_of(5);
    int32_t isr[GR_CLUSTER_REPLICAS_MAX], leader, epoch;
    int64_t mod;
    CHECK(put_topic_rf("replicated", t5, 3, 3) > 0);
    struct want want = {fd[l].img, t5, -1, -2, 0};
    CHECK(wait_for(partition_is, &want, 10000));
    for (int32_t p = 0; p < 3; p++) {
        int32_t all[3] = {1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3};
        CHECK(same_isr(isr, read_isr(t5, p, isr, &leader, &epoch, &mod), all, 3));
        CHECK(leader == all[0] && epoch == 0);
    }
    CHECK(put_broker(3, lease[3], true) > 0); /* controlled shutdown */
    want = (struct want){fd[l].img, t5, 2, 1, 1};
    CHECK(wait_for(partition_is, &want, 10000));
    CHECK(same_isr(isr, read_isr(t5, 2, isr, &leader, &epoch, &mod), (int32_t[]){1, 2}, 2));
    CHECK(leader == 1 && epoch == 1);
    for (int tries = 0; tries < 100 && read_isr(t5, 0, isr, &leader, &epoch, &mod) != 2; tries++)
        wait_for(never, NULL, 50);
    CHECK(same_isr(isr, read_isr(t5, 0, isr, &leader, &epoch, &mod), (int32_t[]){1, 2}, 2));
    CHECK(leader == 1 && epoch == 0); /* a follower leaving: the leader epoch stays */
    for (int tries = 0; tries < 100 && read_isr(t5, 1, isr, &leader, &epoch, &mod) != 2; tries++)
        wait_for(never, NULL, 50);
    CHECK(same_isr(isr, read_isr(t5, 1, isr, &leader, &epoch, &mod), (int32_t[]){2, 1}, 2));
    CHECK(leader == 2 && epoch == 0);
    /* back (a new registration): still out of the ISR, until the leader (node 1) adds it */
    lease_revoke(lease[3]);
    lease[3] = grant();
    int64_t e3 = register_broker(3, lease[3]);
    CHECK(e3 > 0);
    struct gr_isr_writer *iw = gr_isr_writer_new(loop, etcd, &lay, fd[l].img, 1);
    CHECK(iw != NULL);
    const struct gr_image_broker *b3 = NULL;
    for (int tries = 0; tries < 100 && !(b3 && b3->epoch == e3); tries++) {
        wait_for(never, NULL, 50);
        b3 = gr_image_broker(fd[l].img, 3);
    }
    CHECK(read_isr(t5, 0, isr, &leader, &epoch, &mod) == 2);
    struct gr_isr_change chg = {.partition = 0, .leader_epoch = 0, .partition_epoch = mod, .isr_count = 3};
    memcpy(chg.topic_id, t5.b, 16);
    memcpy(chg.isr, (int32_t[]){1, 2, 3}, sizeof(int32_t) * 3);
    chg.broker_epochs[2] = e3;
    struct isr_done d = {0};
    CHECK(iw && gr_isr_writer_propose(iw, &chg, on_isr, &d) == 0);
    CHECK(wait_for(isr_fired, &d, 10000) && d.outcome == GR_ISR_OK);
    wait_for(never, NULL, 1000); /* time for the controller to (wrongly) react */
    CHECK(same_isr(isr, read_isr(t5, 0, isr, &leader, &epoch, &mod), (int32_t[]){1, 2, 3}, 3));
    CHECK(leader == 1 && epoch == 0);
    gr_isr_writer_free(iw);
}

static void scenario(void)
{
    int64_t lease[4];
    for (int n = 1; n <= 3; n++) {
        lease[n] = grant();
        CHECK(lease[n] != 0);
        CHECK(register_broker(n, lease[n]) > 0);
    }
    CHECK(wait_for(three_brokers, NULL, 10000));
    for (int i = 0; i < 2; i++) {
        ctl[i] = gr_controller_new(loop, etcd, &lay, fd[i].img, i + 1);
        CHECK(ctl[i] != NULL);
    }
    gr_controller_set_lease(ctl[0], lease[1]);
    gr_controller_set_lease(ctl[1], lease[2]);
    CHECK(wait_for(one_elected_and_seen, NULL, 10000));
    int w = gr_controller_epoch(ctl[0]) ? 0 : 1, l = 1 - w;
    int64_t e1 = gr_controller_epoch(ctl[w]);
    CHECK(gr_controller_epoch(ctl[l]) == 0);
    CHECK(fd[l].img->controller_id == w + 1);
    CHECK(gr_controller_stats(ctl[w])->elected == 1 && gr_controller_stats(ctl[l])->elected == 0);
    CHECK(gr_controller_stats(ctl[l])->campaigns >= 1);
    printf("controller: node %d elected, epoch %" PRId64 "\n", w + 1, e1);

    /* a new topic: 12 partitions, 4 leaders each, epoch 0, the controller epoch in every value */
    struct gr_uuid t1 = uuid_of(1);
    CHECK(put_topic("orders", t1, 12) > 0);
    struct want want = {fd[l].img, t1, -1, -2, 0};
    CHECK(wait_for(partition_is, &want, 10000));
    check_states(t1, 12, e1, 0, 0);
    struct outcome o;
    read_states(t1, &o);
    int per[4] = {0};
    for (int i = 0; i < o.n; i++) {
        CHECK(o.kvs[i].st.leader_epoch == 0 && o.kvs[i].st.controller_epoch == e1);
        if (o.kvs[i].st.leader >= 1 && o.kvs[i].st.leader <= 3) per[o.kvs[i].st.leader]++;
    }
    CHECK(per[1] == 4 && per[2] == 4 && per[3] == 4);

    /* broker 3 gone: its partitions offline at epoch 1; back: leader again at epoch 2 */
    lease_revoke(lease[3]);
    want = (struct want){fd[l].img, t1, 2, -1, 1};
    CHECK(wait_for(partition_is, &want, 10000));
    check_states(t1, 12, e1, 3, 1);
    lease[3] = grant();
    CHECK(register_broker(3, lease[3]) > 0);
    want = (struct want){fd[l].img, t1, 2, 3, 2};
    CHECK(wait_for(partition_is, &want, 10000));
    check_states(t1, 12, e1, 0, 0);
    read_states(t1, &o);
    for (int i = 0; i < o.n; i++)
        if (o.kvs[i].st.leader == 3) CHECK(o.kvs[i].st.leader_epoch == 2);

    /* the winner's lease revoked behind its back (its image no longer told): the other takes over */
    fd[w].paused = true;
    fd[l].newer_than_epoch = e1;
    struct outcome now = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE, .key = "/", .count_only = true};
    finish(gr_etcd_range(etcd, &op, on_done, &now), &now);
    fd[l].deposed_epoch = e1; /* from here on, every revision the watch shows is checked */
    fd[l].deposed_after = now.revision;
    int64_t t0 = gr_time_mono_ms();
    lease_revoke(lease[w + 1]);
    int64_t after_revoke = register_broker(3, lease[3]); /* a revision at or after the revoke */
    struct took_over to = {l, e1};
    CHECK(wait_for(new_controller_wrote, &to, 15000));
    int64_t e2 = gr_controller_epoch(ctl[l]);
    CHECK(e2 > e1);
    printf("controller: node %d took over, epoch %" PRId64 "; revoke to first partition write %" PRId64
           " ms\n",
           l + 1, e2, fd[l].first_write_ms - t0);
    want = (struct want){fd[l].img, t1, w, -1, 1};
    CHECK(wait_for(partition_is, &want, 10000));
    check_states(t1, 12, e2, w + 1, 1);

    /* the deposed controller still believes; its image shows a change; its txn fails; it steps down */
    CHECK(gr_controller_epoch(ctl[w]) == e1);
    struct gr_image_broker b3 = *gr_image_broker(fd[w].img, 3);
    b3.fenced = true;
    gr_image_set_broker(fd[w].img, &b3);
    uint64_t before[2] = {(uint64_t)w, gr_controller_stats(ctl[w])->txns_failed};
    uint64_t ok_before = gr_controller_stats(ctl[w])->txns_ok;
    gr_image_changed(fd[w].img);
    CHECK(wait_for(txn_failed, before, 10000));
    CHECK(gr_controller_epoch(ctl[w]) == 0);
    CHECK(gr_controller_stats(ctl[w])->txns_ok == ok_before);
    read_states(t1, &o);
    CHECK(o.n == 12);
    for (int i = 0; i < o.n; i++) {
        CHECK(!(o.kvs[i].st.controller_epoch == e1 && o.kvs[i].mod >= after_revoke));
        int32_t p = atoi(strrchr(o.kvs[i].key, '/') + 1);
        if (1 + p % 3 == 3) CHECK(o.kvs[i].st.leader == 3); /* the deposed one's write never landed */
    }

    /* the new controller applies further changes: a new topic, the revoked node's partition offline */
    struct gr_uuid t2 = uuid_of(2);
    CHECK(put_topic("payments", t2, 3) > 0);
    want = (struct want){fd[l].img, t2, -1, -2, 0};
    CHECK(wait_for(partition_is, &want, 10000));
    check_states(t2, 3, e2, w + 1, 0);
    read_states(t2, &o);
    for (int i = 0; i < o.n; i++)
        CHECK(o.kvs[i].st.controller_epoch == e2 && o.kvs[i].st.leader_epoch == 0);

    /* 1,000 new partitions: 16 txns of at most 64, every key written */
    struct gr_uuid t4 = uuid_of(4);
    uint64_t txns0 = gr_controller_stats(ctl[l])->txns_ok,
             parts0 = gr_controller_stats(ctl[l])->partitions_written;
    CHECK(put_topic("big", t4, 1000) > 0);
    want = (struct want){fd[l].img, t4, -1, -2, 0};
    CHECK(wait_for(partition_is, &want, 20000));
    /* the watch may show the last txn before its answer arrives: wait for the answer too */
    uint64_t want_txns[2] = {(uint64_t)l, txns0 + 16};
    wait_for(txns_reached, want_txns, 5000);
    CHECK(gr_controller_stats(ctl[l])->txns_ok - txns0 == 16);
    printf("controller: 1,000 partitions: %" PRIu64 " txns, %" PRIu64 " failed\n",
           gr_controller_stats(ctl[l])->txns_ok - txns0, gr_controller_stats(ctl[l])->txns_failed);
    CHECK(gr_controller_stats(ctl[l])->partitions_written - parts0 == 1000);
    char pre[GR_CLUSTER_KEY_BUF], end[GR_CLUSTER_KEY_BUF];
    int plen = gr_cluster_prefix_partitions(&lay, t4, pre);
    gr_cluster_range_end(pre, (size_t)plen, end);
    struct outcome cnt = {0};
    struct gr_etcd_op cop = {.type = GR_ETCD_OP_RANGE, .key = pre, .range_end = end, .count_only = true};
    finish(gr_etcd_range(etcd, &cop, on_done, &cnt), &cnt);
    CHECK(cnt.status == GR_ETCD_OK && cnt.count == 1000);

    /* a racing deletion: the image shows a topic etcd no longer has; its keys are never re-created */
    fd[l].paused = true;
    struct gr_uuid t3 = uuid_of(3);
    int64_t r3 = put_topic("gone", t3, 3);
    CHECK(r3 > 0);
    CHECK(delete_topic("gone", t3));
    struct gr_image_topic *it = NULL;
    CHECK(gr_image_put_topic(fd[l].img, "gone", 4, t3.b, false, 3, NULL, &it) == 0);
    if (it) {
        it->record_revision = r3;
        for (int32_t p = 0; p < 3; p++) {
            int32_t rep = 1 + p % 3;
            struct gr_image_partition_state st = {
                .leader = -1, .leader_epoch = -1, .replicas = &rep, .replica_count = 1};
            gr_image_set_partition(fd[l].img, it, p, &st);
        }
    }
    before[0] = (uint64_t)l;
    before[1] = gr_controller_stats(ctl[l])->txns_failed;
    gr_image_changed(fd[l].img);
    CHECK(wait_for(txn_failed, before, 10000));
    read_states(t3, &o);
    CHECK(o.n == 0 && o.status == GR_ETCD_OK);
    CHECK(gr_controller_epoch(ctl[l]) == e2); /* not deposed: only the topic's compare failed */
    gr_image_remove_topic(fd[l].img, t3.b);

    CHECK(fd[l].deposed_after > 0 && fd[l].stale_writes == 0); /* every revision since the revoke */

    /* a lost lease stops the controller at once; with its new lease (registered again) it is elected anew */
    fd[l].paused = false;
    gr_controller_set_lease(ctl[l], 0);
    CHECK(gr_controller_epoch(ctl[l]) == 0);
    lease_revoke(lease[l + 1]);
    lease[l + 1] = grant();
    CHECK(register_broker(l + 1, lease[l + 1]) > 0);
    gr_controller_set_lease(ctl[l], lease[l + 1]);
    struct took_over again = {l, e2};
    fd[l].first_write_ms = 0;
    fd[l].newer_than_epoch = e2;
    int64_t wl = grant(); /* the revoked node registers again: its partitions come back under the new epoch */
    CHECK(register_broker(w + 1, wl) > 0);
    CHECK(wait_for(new_controller_wrote, &again, 8000));
    int64_t e3 = gr_controller_epoch(ctl[l]);
    CHECK(e3 > e2);
    want = (struct want){fd[l].img, t1, w, w + 1, 2};
    CHECK(wait_for(partition_is, &want, 8000));
    check_states(t1, 12, e3, 0, 0);
    want =
        (struct want){fd[l].img, t1, l, l + 1, 1}; /* its own broker registered again: a new leader epoch */
    CHECK(wait_for(partition_is, &want, 8000));
    replicated(l, lease);
    lease_revoke(wl);
    for (int i = 0; i < 2; i++)
        gr_controller_free(ctl[i]);
    lease_revoke(lease[l + 1]);
    lease_revoke(lease[3]);
}

int main(void)
{
    const char *endpoint = getenv("ETCD_ENDPOINT");
    if (!endpoint) {
        printf("ETCD_ENDPOINT not set (run cluster/tests/etcd-tests.sh)\ncontroller: 0 passed, 1 failed\n");
        return 1;
    }
    srand((unsigned)gr_time_mono_ms());
    loop = ev_default_loop(0);
    char err[256], cid[GR_UUID_TEXT_BYTES + 1];
    struct gr_etcd_config cfg = {.endpoints = endpoint, .request_timeout_ms = 5000};
    etcd = gr_etcd_new(loop, &cfg, err, sizeof err);
    gr_cluster_uuid_format(uuid_of(0), cid);
    if (!etcd || gr_cluster_layout_init(&lay, "/gregor-controller-test", cid)) {
        printf("setup: %s\ncontroller: 0 passed, 1 failed\n", etcd ? "layout" : err);
        return 1;
    }
    CHECK(feeder_start(&fd[0], 1) && feeder_start(&fd[1], 2));
    CHECK(wait_for(watches_open, NULL, 10000));
    scenario();
    feeder_stop(&fd[0]);
    feeder_stop(&fd[1]);
    gr_etcd_free(etcd);
    printf("controller: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
