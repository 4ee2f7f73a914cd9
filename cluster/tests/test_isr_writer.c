/*
 * test_isr_writer.c: a leader's ISR changes (cluster/isr_writer.h) against a real etcd, started by
 * cluster/tests/etcd-tests.sh (ETCD_ENDPOINT, ETCD_CTL). The test registers brokers 1..3 and writes
 * replication-factor-3 partition states straight into etcd (as the controller would), and keeps a hand-built
 * image in step with what it wrote (no watch); node 1 is the leader proposing.
 *
 * Covers: the refusals at propose (a member outside the assignment, the leader missing, a duplicate, an
 * unknown partition, an added member of another broker epoch, a second change of one partition); a shrink
 * is written with leader and leader epoch unchanged and only the partition epoch (mod_revision) moving; a
 * stale partition epoch fails with STALE; an expansion with the member's broker epoch succeeds, one whose
 * member registered again meanwhile (the image not told) fails INELIGIBLE in etcd's compare; a controller's
 * election written meanwhile (new leader, leader epoch + 1) fails the leader's change with FENCED; a deleted
 * state answers UNKNOWN; 40 changes go in 4 txns of at most 32, a stale change in a batch failing alone
 * while the others are written; cancelled changes (queued, or in the txn) never call back; with etcd
 * SIGSTOPped the txn times out, is sent again, and after SIGCONT the change is applied exactly once (the
 * key's version moves by one). Ends with "isr writer: N passed, N failed".
 */
#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "cluster/isr_writer.h"
#include "cluster/tests/testkit.h"
#include "common/time.h"

static struct ev_loop *loop;
static struct gr_etcd *etcd;
static struct gr_cluster_layout lay;
static struct gr_image *img;

/* ---- etcd helpers ---- */

struct outcome {
    bool fired;
    enum gr_etcd_status status;
    int64_t revision;
    bool found;
    int64_t mod, create, version;
    struct gr_cluster_partition st;
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
    o->revision = res->revision;
    if (res->status != GR_ETCD_OK) printf("etcd: %s\n", res->message);
    if (res->op.kv_count == 1) {
        const struct gr_etcd_kv *kv = &res->op.kvs[0];
        o->found = true;
        o->mod = kv->mod_revision;
        o->create = kv->create_revision;
        o->version = kv->version;
        gr_cluster_partition_decode(kv->value, kv->value_len, &o->st, err);
    }
}

static void finish(struct gr_etcd_req *req, struct outcome *o)
{
    if (!req)
        printf("refused: %s\n", gr_etcd_last_error(etcd));
    else
        testkit_run_until(loop, fired, o, 10000);
}

static int64_t put(const char *key, char *value, size_t len)
{
    struct outcome o = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_PUT, .key = key, .value = value, .value_len = len};
    finish(gr_etcd_put(etcd, &op, on_done, &o), &o);
    free(value);
    return o.status == GR_ETCD_OK ? o.revision : 0;
}

static struct outcome get(const char *key)
{
    struct outcome o = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE, .key = key};
    finish(gr_etcd_range(etcd, &op, on_done, &o), &o);
    return o;
}

static void del(const char *key)
{
    struct outcome o = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_DELETE, .key = key};
    finish(gr_etcd_delete(etcd, &op, on_done, &o), &o);
}

/* Registers broker `node_id` (deleting an earlier registration first): returns its broker epoch. */
static int64_t register_broker(int32_t node_id)
{
    struct gr_cluster_broker br = {.node_id = node_id, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9000 + node_id;
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    gr_cluster_key_broker(&lay, node_id, key);
    del(key);
    if (gr_cluster_broker_encode(&br, &val, &len, err)) printf("broker: %s\n", err);
    return put(key, val, len);
}

static void image_broker(int32_t node_id, int64_t epoch)
{
    struct gr_image_broker ib = {.node_id = node_id, .epoch = epoch, .listener_count = 1};
    snprintf(ib.listeners[0].name, sizeof ib.listeners[0].name, "INTERNAL");
    snprintf(ib.listeners[0].host, sizeof ib.listeners[0].host, "127.0.0.1");
    ib.listeners[0].port = 9000 + node_id;
    gr_image_set_broker(img, &ib);
}

static void id_of(uint8_t id[16], int n)
{
    memset(id, 0, 16);
    id[0] = (uint8_t)n;
    id[15] = 0x77;
}

static void part_key(const uint8_t id[16], int32_t p, char *key)
{
    struct gr_uuid u;
    memcpy(u.b, id, 16);
    gr_cluster_key_partition(&lay, u, p, key);
}

/* Writes the state of partition p of topic `idn` into etcd, as a controller would, and into the image
 * (replicas 1, 2, 3; partition epoch = the put's revision). Returns the partition epoch. */
static int64_t write_state(int idn, int32_t p, int32_t leader, int32_t epoch, const int32_t *isr, int32_t n)
{
    uint8_t id[16];
    id_of(id, idn);
    struct gr_cluster_partition st = {
        .leader = leader, .leader_epoch = epoch, .isr_count = n, .controller_epoch = 1};
    memcpy(st.isr, isr, sizeof(int32_t) * (size_t)n);
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    part_key(id, p, key);
    if (gr_cluster_partition_encode(&st, &val, &len, err)) printf("state: %s\n", err);
    int64_t rev = put(key, val, len);
    struct gr_image_topic *t = gr_image_topic_find_id(img, id);
    if (!t) {
        char name[16];
        snprintf(name, sizeof name, "t%d", idn);
        gr_image_put_topic(img, name, strlen(name), id, false, 64, NULL, &t);
    }
    static const int32_t reps[3] = {1, 2, 3};
    struct gr_image_partition_state is = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .partition_epoch = rev,
                                          .replicas = reps,
                                          .replica_count = 3,
                                          .isr = isr,
                                          .isr_count = n};
    gr_image_set_partition(img, t, p, &is);
    return rev;
}

/* ---- proposals ---- */

struct result {
    int fired;
    enum gr_isr_outcome outcome;
    int64_t partition_epoch;
};

static void on_isr(void *ctx, const struct gr_isr_change *chg, enum gr_isr_outcome outcome, int64_t pe)
{
    (void)chg;
    struct result *r = ctx;
    r->fired++;
    r->outcome = outcome;
    r->partition_epoch = pe;
}

static bool res_fired(void *arg)
{
    return ((struct result *)arg)->fired > 0;
}

static struct gr_isr_change change(int idn, int32_t p, int32_t epoch, int64_t pe, const int32_t *isr,
                                   int32_t n)
{
    struct gr_isr_change c = {.partition = p, .leader_epoch = epoch, .partition_epoch = pe, .isr_count = n};
    id_of(c.topic_id, idn);
    memcpy(c.isr, isr, sizeof(int32_t) * (size_t)n);
    return c;
}

static int64_t epochs[4];
static struct gr_isr_writer *w;

static void test_refusals(void)
{
    int64_t pe = write_state(1, 0, 1, 3, (int32_t[]){1, 2}, 2);
    struct result r = {0};
    struct gr_isr_change c = change(1, 0, 3, pe, (int32_t[]){1, 4}, 2);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == -EINVAL); /* 4 is no replica */
    c = change(1, 0, 3, pe, (int32_t[]){2}, 1);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == -EINVAL); /* without the leader */
    c = change(1, 0, 3, pe, (int32_t[]){1, 2, 1}, 3);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == -EINVAL); /* a duplicate */
    c = change(1, 99, 3, pe, (int32_t[]){1}, 1);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == -ENOENT);
    c = change(1, 0, 3, pe, (int32_t[]){1, 2, 3}, 3);
    c.broker_epochs[2] = epochs[3] + 1000; /* a fetch from another incarnation (KIP-903) */
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == -EPERM);
    c = change(1, 0, 3, pe, (int32_t[]){1}, 1);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == -EEXIST);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_OK);
    CHECK(gr_isr_writer_pending(w) == 0);
}

static void test_shrink_stale_expand(void)
{
    int64_t pe = write_state(2, 0, 1, 7, (int32_t[]){1, 2, 3}, 3);
    char key[GR_CLUSTER_KEY_BUF];
    uint8_t id[16];
    id_of(id, 2);
    part_key(id, 0, key);
    struct outcome before = get(key);
    struct result r = {0};
    struct gr_isr_change c = change(2, 0, 7, pe, (int32_t[]){1, 2}, 2);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_OK && r.partition_epoch > pe);
    struct outcome after = get(key);
    CHECK(after.found && after.mod == r.partition_epoch && after.create == before.create);
    CHECK(after.st.leader == 1 && after.st.leader_epoch == 7); /* leader and leader epoch unchanged */
    CHECK(after.st.isr_count == 2 && after.st.isr[0] == 1 && after.st.isr[1] == 2);
    /* the same partition epoch again: stale */
    r = (struct result){0};
    c = change(2, 0, 7, pe, (int32_t[]){1}, 1);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_STALE);
    /* the image catches up; 3 comes back with its broker epoch */
    struct gr_image_partition_state is = {.leader = 1,
                                          .leader_epoch = 7,
                                          .partition_epoch = after.mod,
                                          .replicas = (int32_t[]){1, 2, 3},
                                          .replica_count = 3,
                                          .isr = (int32_t[]){1, 2},
                                          .isr_count = 2};
    gr_image_set_partition(img, gr_image_topic_find_id(img, id), 0, &is);
    r = (struct result){0};
    c = change(2, 0, 7, after.mod, (int32_t[]){1, 2, 3}, 3);
    c.broker_epochs[2] = epochs[3];
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_OK);
    after = get(key);
    CHECK(after.st.isr_count == 3 && after.st.isr[2] == 3 && after.st.leader_epoch == 7);
}

static void test_member_registered_again(void)
{
    int64_t pe = write_state(3, 0, 1, 2, (int32_t[]){1, 2}, 2);
    int64_t old = epochs[3];
    epochs[3] = register_broker(3); /* a restart the image has not shown yet */
    struct result r = {0};
    struct gr_isr_change c = change(3, 0, 2, pe, (int32_t[]){1, 2, 3}, 3);
    c.broker_epochs[2] = old; /* its fetch was sent by the old incarnation, which the image still shows */
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_INELIGIBLE);
    image_broker(3, epochs[3]);
    c.broker_epochs[2] = epochs[3];
    r = (struct result){0};
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_OK);
}

static void test_fenced_and_unknown(void)
{
    int64_t pe = write_state(4, 0, 1, 5, (int32_t[]){1, 2, 3}, 3);
    /* a controller's election lands first (node 1 considered gone): leader 2, leader epoch 6 */
    uint8_t id[16];
    id_of(id, 4);
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    struct gr_cluster_partition st = {
        .leader = 2, .leader_epoch = 6, .isr_count = 2, .isr = {2, 3}, .controller_epoch = 9};
    part_key(id, 0, key);
    gr_cluster_partition_encode(&st, &val, &len, err);
    CHECK(put(key, val, len) > pe);
    struct result r = {0};
    struct gr_isr_change c = change(4, 0, 5, pe, (int32_t[]){1, 2}, 2);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_FENCED); /* the leader epoch moved: stop leading */
    /* the state deleted (the topic deleted) */
    pe = write_state(4, 1, 1, 0, (int32_t[]){1, 2}, 2);
    part_key(id, 1, key);
    del(key);
    r = (struct result){0};
    c = change(4, 1, 0, pe, (int32_t[]){1}, 1);
    CHECK(gr_isr_writer_propose(w, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 10000);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_UNKNOWN);
}

struct many {
    struct result r[40];
};

static bool all_fired(void *arg)
{
    struct many *m = arg;
    for (int i = 0; i < 40; i++)
        if (!m->r[i].fired) return false;
    return true;
}

static void test_batches(void)
{
    int64_t pe[40];
    for (int32_t p = 0; p < 40; p++)
        pe[p] = write_state(5, p, 1, 1, (int32_t[]){1, 2, 3}, 3);
    /* partition 7 moves on behind the leader's back (another change, same leader epoch) */
    write_state(5, 7, 1, 1, (int32_t[]){1, 2, 3}, 3);
    uint64_t sent = gr_isr_writer_stats(w)->txns_sent, failed0 = gr_isr_writer_stats(w)->txns_failed;
    struct many m = {0};
    for (int32_t p = 0; p < 40; p++) {
        struct gr_isr_change c = change(5, p, 1, pe[p], (int32_t[]){1, 2}, 2);
        CHECK(gr_isr_writer_propose(w, &c, on_isr, &m.r[p]) == 0);
    }
    CHECK(gr_isr_writer_pending(w) == 40);
    testkit_run_until(loop, all_fired, &m, 10000);
    int ok = 0;
    for (int32_t p = 0; p < 40; p++)
        ok += m.r[p].fired == 1 && m.r[p].outcome == (p == 7 ? GR_ISR_STALE : GR_ISR_OK);
    CHECK(ok == 40);
    /* partition 0 alone (sent at its proposal), then 1..32 (failed by partition 7), the 31 others with 33,
       then 34..39 */
    const struct gr_isr_writer_stats *s = gr_isr_writer_stats(w);
    printf("  40 changes: %" PRIu64 " txns, %" PRIu64 " failed\n", s->txns_sent - sent,
           s->txns_failed - failed0);
    CHECK(s->txns_sent - sent == 4 && s->txns_failed - failed0 == 1);
}

static bool none_pending(void *arg)
{
    return gr_isr_writer_pending(arg) == 0;
}

/* A cancelled change never calls back: one queued behind the txn in flight is dropped at once, one in the
 * txn when it completes (the txn may still have written it). */
static void test_cancel(void)
{
    int64_t pe0 = write_state(7, 0, 1, 2, (int32_t[]){1, 2, 3}, 3);
    int64_t pe1 = write_state(7, 1, 1, 2, (int32_t[]){1, 2, 3}, 3);
    struct result r0 = {0}, r1 = {0};
    struct gr_isr_change c0 = change(7, 0, 2, pe0, (int32_t[]){1, 2}, 2);
    struct gr_isr_change c1 = change(7, 1, 2, pe1, (int32_t[]){1, 2}, 2);
    CHECK(gr_isr_writer_propose(w, &c0, on_isr, &r0) == 0); /* sent at once */
    CHECK(gr_isr_writer_propose(w, &c1, on_isr, &r1) == 0); /* queued behind it */
    CHECK(gr_isr_writer_pending(w) == 2);
    CHECK(gr_isr_writer_cancel(w, c1.topic_id, 1));
    CHECK(gr_isr_writer_pending(w) == 1);
    CHECK(gr_isr_writer_cancel(w, c0.topic_id, 0));
    CHECK(!gr_isr_writer_cancel(w, c0.topic_id, 0)); /* once */
    CHECK(gr_isr_writer_pending(w) == 0);
    testkit_run_until(loop, none_pending, w, 10000);
    struct result never = {0};
    testkit_run_until(loop, res_fired, &never, 300); /* the txn's answer has come and gone */
    CHECK(r0.fired == 0 && r1.fired == 0);
    /* the partitions are free again: new changes are accepted, also while a cancelled one is in the txn */
    struct gr_isr_change c2 =
        change(7, 2, 2, write_state(7, 2, 1, 2, (int32_t[]){1, 2, 3}, 3), (int32_t[]){1}, 1);
    struct result r2 = {0};
    CHECK(gr_isr_writer_propose(w, &c2, on_isr, &r2) == 0); /* sent at once */
    CHECK(gr_isr_writer_cancel(w, c2.topic_id, 2));
    CHECK(gr_isr_writer_propose(w, &c2, on_isr, &r2) == 0); /* queued behind its cancelled self */
    testkit_run_until(loop, res_fired, &r2, 10000);
    CHECK(r2.fired == 1 && (r2.outcome == GR_ISR_OK)); /* written by the first, found as proposed */
    struct gr_isr_change again = change(7, 1, 2, pe1, (int32_t[]){1, 3}, 2);
    CHECK(gr_isr_writer_propose(w, &again, on_isr, &r1) == 0);
    testkit_run_until(loop, res_fired, &r1, 10000);
    CHECK(r1.fired == 1 && r1.outcome == GR_ISR_OK);
}

static bool etcd_ctl(const char *action)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s", getenv("ETCD_CTL"), action);
    int rc = system(cmd);
    if (rc != 0) printf("ctl %s failed (%d)\n", action, rc);
    return rc == 0;
}

static void test_paused_etcd(void)
{
    char err[256];
    struct gr_etcd_config ecfg = {.endpoints = getenv("ETCD_ENDPOINT"), .request_timeout_ms = 300};
    struct gr_etcd *short_etcd = gr_etcd_new(loop, &ecfg, err, sizeof err);
    struct gr_isr_writer *sw = short_etcd ? gr_isr_writer_new(loop, short_etcd, &lay, img, 1) : NULL;
    CHECK(sw != NULL);
    int64_t pe = write_state(6, 0, 1, 4, (int32_t[]){1, 2, 3}, 3);
    char key[GR_CLUSTER_KEY_BUF];
    uint8_t id[16];
    id_of(id, 6);
    part_key(id, 0, key);
    struct outcome before = get(key);
    if (!sw || !etcd_ctl("stop")) {
        gr_isr_writer_free(sw);
        gr_etcd_free(short_etcd);
        return;
    }
    struct result r = {0};
    struct gr_isr_change c = change(6, 0, 4, pe, (int32_t[]){1, 3}, 2);
    CHECK(gr_isr_writer_propose(sw, &c, on_isr, &r) == 0);
    testkit_run_until(loop, res_fired, &r, 1200); /* lost, backing off, lost again */
    CHECK(r.fired == 0);
    etcd_ctl("cont");
    testkit_run_until(loop, res_fired, &r, 15000);
    const struct gr_isr_writer_stats *s = gr_isr_writer_stats(sw);
    printf("  paused etcd: %" PRIu64 " txns lost, %" PRIu64 " sent, outcome %d\n", s->txns_lost, s->txns_sent,
           (int)r.outcome);
    CHECK(s->txns_lost >= 1 && s->txns_sent >= 2);
    CHECK(r.fired == 1 && r.outcome == GR_ISR_OK);
    struct outcome after = get(key);
    CHECK(after.version == before.version + 1); /* written once */
    CHECK(after.mod == r.partition_epoch && after.st.isr_count == 2 && after.st.isr[1] == 3);
    gr_isr_writer_free(sw);
    gr_etcd_free(short_etcd);
}

int main(void)
{
    loop = ev_default_loop(0);
    if (!(etcd = testkit_etcd(loop, 5000))) return 2;
    if (testkit_layout(&lay, "isr-writer", 9) != 0) return 2;
    img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        image_broker(b, epochs[b] = register_broker(b));
    img->controller_epoch = 1;
    w = gr_isr_writer_new(loop, etcd, &lay, img, 1);
    if (!w) return 2;
    const struct testkit_case tests[] = {
        {"refusals at propose", test_refusals},
        {"shrink, stale partition epoch, expand", test_shrink_stale_expand},
        {"an added member registered again: ineligible", test_member_registered_again},
        {"a controller's election first: fenced; a deleted state: unknown", test_fenced_and_unknown},
        {"40 changes in batches, one stale", test_batches},
        {"cancelled changes never call back", test_cancel},
        {"etcd SIGSTOPped: lost, sent again, applied once", test_paused_etcd},
    };
    testkit_run_cases(tests, sizeof tests / sizeof tests[0]);
    gr_isr_writer_free(w);
    gr_image_free(img);
    gr_etcd_free(etcd);
    printf("isr writer: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
