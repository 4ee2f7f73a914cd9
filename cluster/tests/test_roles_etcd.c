/*
 * test_roles_etcd.c: the role binding (cluster/roles.h) with the real ISR writer (cluster/isr_writer.h,
 * bound by gr_roles_ops_isr_writer as server/membership.c does) against a real etcd started by
 * cluster/tests/etcd-tests.sh (ETCD_ENDPOINT), a real log and partition set in a temporary directory, and a
 * hand-built image kept in step with what the test writes (no watch); node 1 leads; a clock the test moves.
 *
 * Covers: the leader of replicas {1,2,3} with ISR {1,2,3} (written into etcd as the controller would) whose
 * follower 3 stays silent past replica.lag.time.max.ms: the shrink tick's proposal is written by the writer
 * (etcd then holds ISR {1,2}, leader and leader epoch unchanged), its OK outcome reaches the partition
 * (gr_partition_isr {1,2}, partition epoch = the key's new mod_revision), and the image then showing that
 * state calls no set_role; a state rewritten behind the leader's back (the controller's write, ISR {1,3})
 * makes the next proposal STALE, which leaves the change in flight until the image shows the new state.
 * Ends with "roles etcd: N passed, N failed".
 */
#include <errno.h>
#include <ev.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/etcd.h"
#include "cluster/isr_writer.h"
#include "cluster/roles.h"
#include "cluster/tests/testkit.h"
#include "partition/partition.h"
#include "storage/tests/helpers.h"

#define LAG_MS 30000

static struct ev_loop *loop;
static struct gr_etcd *etcd;
static struct gr_cluster_layout lay;
static struct gr_image *img;
static int64_t now = 1000;

/* ---- etcd (as test_isr_writer.c) ---- */

struct outcome {
    bool fired;
    enum gr_etcd_status status;
    int64_t revision, mod;
    bool found;
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
        o->found = true;
        o->mod = res->op.kvs[0].mod_revision;
        gr_cluster_partition_decode(res->op.kvs[0].value, res->op.kvs[0].value_len, &o->st, err);
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

/* Registers broker `node_id` in etcd and the image. */
static void register_broker(int32_t node_id)
{
    struct gr_cluster_broker br = {.node_id = node_id, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9000 + node_id;
    char key[GR_CLUSTER_KEY_BUF], *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    gr_cluster_key_broker(&lay, node_id, key);
    if (gr_cluster_broker_encode(&br, &val, &len, err)) printf("broker: %s\n", err);
    struct gr_image_broker ib = {.node_id = node_id, .epoch = put(key, val, len), .listener_count = 1};
    ib.listeners[0] = (struct gr_image_listener){.port = br.listeners[0].port};
    snprintf(ib.listeners[0].name, sizeof ib.listeners[0].name, "INTERNAL");
    snprintf(ib.listeners[0].host, sizeof ib.listeners[0].host, "127.0.0.1");
    CHECK(ib.epoch > 0 && gr_image_set_broker(img, &ib) == 0);
}

/* ---- the local partition ---- */

struct local {
    char dir[256];
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    struct gr_image_topic *it;
    char key[GR_CLUSTER_KEY_BUF];
};
static struct local L;

static int64_t clock_now(void *ctx)
{
    (void)ctx;
    return now;
}

/* Writes partition 0's state into etcd (as a controller) and, when `to_image`, into the image (replicas
 * {1,2,3}; partition epoch = the put's revision). Returns the partition epoch. */
static int64_t write_state(int32_t epoch, const int32_t *isr, int32_t n, bool to_image)
{
    struct gr_cluster_partition st = {
        .leader = 1, .leader_epoch = epoch, .isr_count = n, .controller_epoch = 1};
    memcpy(st.isr, isr, sizeof(int32_t) * (size_t)n);
    char *val = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    if (gr_cluster_partition_encode(&st, &val, &len, err)) printf("state: %s\n", err);
    int64_t rev = put(L.key, val, len);
    static const int32_t reps[3] = {1, 2, 3};
    struct gr_image_partition_state is = {.leader = 1,
                                          .leader_epoch = epoch,
                                          .partition_epoch = rev,
                                          .replicas = reps,
                                          .replica_count = 3,
                                          .isr = isr,
                                          .isr_count = n};
    if (to_image) CHECK(gr_image_set_partition(img, L.it, 0, &is) == 0);
    return rev;
}

static int local_open(void)
{
    th_tmpdir(L.dir, sizeof L.dir);
    struct gr_store_config sc;
    th_config(&sc, L.dir);
    if (gr_store_open(&sc, &L.store) || gr_store_topic_create(L.store, "r", 1, NULL, NULL, 0, &L.topic))
        return -1;
    L.log = gr_topic_log(L.topic, 0);
    struct gr_partitions_config pc = {L.store, false};
    if (!(L.ps = gr_partitions_create(&pc)) || !(L.part = gr_partition_get(L.ps, L.log))) return -1;
    if (gr_image_put_topic(img, "r", 1, gr_topic_id(L.topic), false, 1, L.topic, &L.it)) return -1;
    struct gr_uuid u;
    memcpy(u.b, gr_topic_id(L.topic), 16);
    gr_cluster_key_partition(&lay, u, 0, L.key);
    return 0;
}

static void local_close(void)
{
    gr_partitions_destroy(L.ps);
    gr_store_close(L.store);
    th_rmtree(L.dir);
}

/* ---- the case ---- */

static struct gr_isr_writer *w;
static struct gr_roles *roles;

static bool isr_settled(void *arg)
{
    (void)arg;
    return !gr_partition_isr_inflight(L.part) && gr_isr_writer_pending(w) == 0;
}

static bool writer_idle(void *arg)
{
    (void)arg;
    return gr_isr_writer_pending(w) == 0;
}

static int isr_of(int32_t *out)
{
    return gr_partition_isr(L.part, out, 4);
}

/* Appends `count` records and tells the partition (the produce path). */
static void append(int32_t count)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000, 7, &len);
    struct gr_append_result res;
    CHECK(gr_log_append(L.log, b, len, -1, &res) == 0);
    free(b);
    gr_partition_appended(L.part);
}

static void test_shrink_written(void)
{
    write_state(3, (int32_t[]){1, 2, 3}, 3, true);
    CHECK(gr_roles_start(roles) == 0);
    CHECK(gr_partition_role(L.part) == GR_PARTITION_LEADER && gr_partition_leader_epoch(L.part) == 3);
    append(10);
    now = 2000;
    struct gr_follower_fetch ff = {2, gr_image_broker(img, 2)->epoch, 10, 0, now};
    CHECK(gr_partition_update_follower_fetch_state(L.part, &ff) == 0);
    now = 1000 + LAG_MS + 1; /* 3 silent since it became leader at 1000 */
    CHECK(gr_roles_shrink_tick(roles) == 1);
    CHECK(gr_partition_isr_inflight(L.part));
    CHECK(testkit_run_until(loop, isr_settled, NULL, 10000));
    int32_t isr[4];
    CHECK(isr_of(isr) == 2 && isr[0] == 1 && isr[1] == 2);
    struct outcome after = get(L.key);
    CHECK(after.found && after.st.leader == 1 && after.st.leader_epoch == 3);
    CHECK(after.st.isr_count == 2 && after.st.isr[0] == 1 && after.st.isr[1] == 2);
    CHECK(gr_partition_partition_epoch(L.part) == after.mod);
    /* the image (the watch) showing the written state: no set_role */
    struct gr_roles_stats st;
    gr_roles_stats(roles, &st);
    int64_t before = st.set_roles;
    static const int32_t reps[3] = {1, 2, 3};
    struct gr_image_partition_state is = {.leader = 1,
                                          .leader_epoch = 3,
                                          .partition_epoch = after.mod,
                                          .replicas = reps,
                                          .replica_count = 3,
                                          .isr = (int32_t[]){1, 2},
                                          .isr_count = 2};
    CHECK(gr_image_set_partition(img, L.it, 0, &is) == 0);
    gr_image_changed(img);
    gr_roles_stats(roles, &st);
    CHECK(st.set_roles == before && st.proposals == 1 && st.refused == 0);
}

static void test_stale_waits_for_image(void)
{
    /* the controller rewrites the state behind the leader (the image not told): ISR {1,3} */
    int64_t pe = write_state(3, (int32_t[]){1, 3}, 2, false);
    /* 2 is silent too now, behind a new append: the shrink to {1} is based on the old partition epoch */
    append(1);
    now += LAG_MS + 1;
    CHECK(gr_roles_shrink_tick(roles) == 1);
    CHECK(testkit_run_until(loop, writer_idle, NULL, 10000));
    CHECK(gr_partition_isr_inflight(L.part)); /* STALE: in flight until the image shows the state */
    CHECK(gr_roles_shrink_tick(roles) == 0);
    static const int32_t reps[3] = {1, 2, 3};
    struct gr_image_partition_state is = {.leader = 1,
                                          .leader_epoch = 3,
                                          .partition_epoch = pe,
                                          .replicas = reps,
                                          .replica_count = 3,
                                          .isr = (int32_t[]){1, 3},
                                          .isr_count = 2};
    CHECK(gr_image_set_partition(img, L.it, 0, &is) == 0);
    gr_image_changed(img);
    int32_t isr[4];
    CHECK(!gr_partition_isr_inflight(L.part));
    CHECK(isr_of(isr) == 2 && isr[0] == 1 && isr[1] == 3 && gr_partition_partition_epoch(L.part) == pe);
}

int main(void)
{
    loop = ev_default_loop(0);
    if (!(etcd = testkit_etcd(loop, 5000))) return 2;
    if (testkit_layout(&lay, "roles", 11) != 0) return 2;
    img = gr_image_new(1);
    img->controller_epoch = 1;
    for (int32_t b = 1; b <= 3; b++)
        register_broker(b);
    if (local_open() < 0 || !(w = gr_isr_writer_new(loop, etcd, &lay, img, 1))) {
        printf("setup failed\n");
        return 2;
    }
    struct gr_roles_config rc = {
        .parts = L.ps, .replica_lag_time_max_ms = LAG_MS, .min_insync_replicas = 1, .now_ms = clock_now};
    gr_roles_ops_isr_writer(&rc.ops, w);
    if (!(roles = gr_roles_new(&rc, img))) return 2;
    const struct testkit_case tests[] = {
        {"a lagging follower's removal written, committed, no set_role after", test_shrink_written},
        {"a state rewritten meanwhile: STALE waits for the image", test_stale_waits_for_image},
    };
    testkit_run_cases(tests, sizeof tests / sizeof tests[0]);
    gr_roles_free(roles);
    gr_isr_writer_free(w);
    local_close();
    gr_image_free(img);
    gr_etcd_free(etcd);
    printf("roles etcd: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
