/*
 * test_controller_plan.c: the controller's plan and batching (cluster/controller.h), pure, no etcd: a new
 * 12-partition topic striped over 3 brokers gives 4 leaders each at epoch 0 with ISR = replicas; a broker
 * gone takes its partitions offline (leader -1, epoch + 1, ISR kept); back, it leads them again (epoch + 1);
 * a settled image plans nothing; a leader registered again since the state was written gets a new leader
 * epoch; a fenced or shutting-down broker is not live; a partition with no live
 * replica is created offline; a topic whose record revision is unknown waits; 1,000 new partitions give 16
 * txns of at most 64; partitions of many topics stay within etcd's 128 compares; the plan cap. With
 * replication factor 3: a new topic's ISR is its live replicas; a follower's death shrinks the ISR at the
 * same leader epoch; a leader's death elects the next ISR member in assignment order; the last ISR member's
 * death takes the partition offline with the ISR keeping it, and its return makes it leader again; unclean
 * elections (topic config over broker default, at once or in the periodic pass); controlled shutdown (and
 * the broker's wait: the leaderships another live ISR member can take, gr_controller_movable_leaderships); a
 * follower or leader registered again leaves the ISR. Preferred elections (ElectLeaders, the automatic
 * rebalance): chosen (the preferred replica fresh and in the ISR leads, epoch + 1, the old leader stays a
 * follower), not needed, not available (gone, outside the ISR); an UNCLEAN ask elects outside the ISR where
 * the topic does not allow it, and is not needed while a leader exists.
 * Read next: cluster/tests/test_controller.c (against a real etcd).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/controller.h"
#include "cluster/etcd.h"

static void id_of(uint8_t id[16], int n)
{
    memset(id, 0, 16);
    id[0] = (uint8_t)(n >> 8);
    id[1] = (uint8_t)n;
    id[15] = 0x5a;
}

static void add_broker(struct gr_image *img, int32_t node_id)
{
    struct gr_image_broker br = {.node_id = node_id, .epoch = 10 + node_id, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9000 + node_id;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
}

/* A topic record as the member feeds it: partition p's single replica is brokers[(p + start) % n], no state.
 */
static struct gr_image_topic *add_topic(struct gr_image *img, const char *name, int idn, int32_t parts,
                                        int32_t nbrokers, int32_t start)
{
    uint8_t id[16];
    id_of(id, idn);
    struct gr_image_topic *t = NULL;
    assert_int_equal(gr_image_put_topic(img, name, strlen(name), id, false, parts, NULL, &t), 0);
    t->record_revision = 5;
    for (int32_t p = 0; p < parts; p++) {
        int32_t rep = 1 + (p + start) % nbrokers;
        struct gr_image_partition_state st = {
            .leader = -1, .leader_epoch = -1, .replicas = &rep, .replica_count = 1};
        assert_int_equal(gr_image_set_partition(img, t, p, &st), 0);
    }
    return t;
}

/* Applies a plan to the image as the watch would: partition_epoch = rev. */
static void apply(struct gr_image *img, const struct gr_controller_write *w, int32_t n, int64_t rev)
{
    for (int32_t i = 0; i < n; i++) {
        struct gr_image_topic *t = gr_image_topic_find_id(img, w[i].topic_id);
        assert_non_null(t);
        const struct gr_image_partition *p = gr_image_partition(t, w[i].partition);
        struct gr_image_partition_state st = {.leader = w[i].state.leader,
                                              .leader_epoch = w[i].state.leader_epoch,
                                              .partition_epoch = rev,
                                              .replicas = gr_image_replicas(p),
                                              .replica_count = p->replica_count,
                                              .isr = w[i].state.isr,
                                              .isr_count = w[i].state.isr_count};
        assert_int_equal(gr_image_set_partition(img, t, w[i].partition, &st), 0);
    }
}

static struct gr_controller_write plan[GR_CONTROLLER_PLAN_MAX];

static void test_new_topic_striped(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        add_broker(img, b);
    add_topic(img, "orders", 1, 12, 3, 2);
    bool more = true;
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, &more);
    assert_int_equal(n, 12);
    assert_false(more);
    int leaders[4] = {0};
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(plan[i].partition, i); /* index order */
        assert_string_equal(plan[i].topic, "orders");
        assert_int_equal(plan[i].partition_epoch, 0);
        assert_int_equal(plan[i].topic_revision, 5);
        assert_int_equal(plan[i].state.leader, 1 + (i + 2) % 3);
        assert_int_equal(plan[i].state.leader_epoch, 0);
        assert_int_equal(plan[i].state.isr_count, 1);
        assert_int_equal(plan[i].state.isr[0], plan[i].state.leader);
        leaders[plan[i].state.leader]++;
    }
    assert_int_equal(leaders[1], 4);
    assert_int_equal(leaders[2], 4);
    assert_int_equal(leaders[3], 4);
    assert_int_equal(gr_controller_batch(plan, n), 12);
    apply(img, plan, n, 20);
    /* settled: nothing to write */
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, &more), 0);
    gr_image_free(img);
}

static void test_broker_gone_and_back(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        add_broker(img, b);
    add_topic(img, "t", 1, 12, 3, 0);
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    apply(img, plan, n, 20);
    assert_true(gr_image_remove_broker(img, 2));
    n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    assert_int_equal(n, 4);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(plan[i].partition % 3, 1); /* broker 2's partitions: 1, 4, 7, 10 */
        assert_int_equal(plan[i].partition_epoch, 20);
        assert_int_equal(plan[i].state.leader, -1);
        assert_int_equal(plan[i].state.leader_epoch, 1);
        assert_int_equal(plan[i].state.isr_count, 1); /* the last ISR member stays */
        assert_int_equal(plan[i].state.isr[0], 2);
    }
    apply(img, plan, n, 30);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* offline, stays so */
    add_broker(img, 2);
    n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    assert_int_equal(n, 4);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(plan[i].partition_epoch, 30);
        assert_int_equal(plan[i].state.leader, 2);
        assert_int_equal(plan[i].state.leader_epoch, 2);
        assert_int_equal(plan[i].state.isr[0], 2);
    }
    apply(img, plan, n, 40);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

static void test_leader_registered_again(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        add_broker(img, b);
    add_topic(img, "t", 1, 6, 3, 0);
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    apply(img, plan, n, 20);
    /* broker 3 registered again (a new broker epoch above the states' revision) while no controller ran */
    struct gr_image_broker br = *gr_image_broker(img, 3);
    br.epoch = 25;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    assert_int_equal(n, 2);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(plan[i].partition % 3, 2);
        assert_int_equal(plan[i].state.leader, 3); /* the same leader, a new leader epoch */
        assert_int_equal(plan[i].state.leader_epoch, 1);
        assert_int_equal(plan[i].partition_epoch, 20);
    }
    apply(img, plan, n, 30);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

static void test_liveness(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        add_broker(img, b);
    struct gr_image_broker br = *gr_image_broker(img, 2);
    br.fenced = true;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    br = *gr_image_broker(img, 3);
    br.shutting_down = true;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_true(gr_controller_broker_live(img, 1));
    assert_false(gr_controller_broker_live(img, 2));
    assert_false(gr_controller_broker_live(img, 3));
    assert_false(gr_controller_broker_live(img, 4));
    assert_false(gr_controller_broker_live(img, -1));
    /* new partitions on a fenced or shutting-down broker are created offline, epoch 0, ISR = replicas */
    add_topic(img, "t", 1, 3, 3, 0);
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    assert_int_equal(n, 3);
    assert_int_equal(plan[0].state.leader, 1);
    assert_int_equal(plan[1].state.leader, -1);
    assert_int_equal(plan[1].state.leader_epoch, 0);
    assert_int_equal(plan[1].state.isr[0], 2);
    assert_int_equal(plan[2].state.leader, -1);
    /* a topic whose record revision the image does not know yet waits */
    struct gr_image_topic *u = add_topic(img, "u", 2, 2, 3, 0);
    u->record_revision = 0;
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 3);
    gr_image_free(img);
}

static void test_leader_outside_isr_not_elected(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    add_broker(img, 1);
    add_broker(img, 2);
    uint8_t id[16];
    id_of(id, 9);
    struct gr_image_topic *t = NULL;
    assert_int_equal(gr_image_put_topic(img, "x", 1, id, false, 1, NULL, &t), 0);
    t->record_revision = 3;
    int32_t reps[2] = {1, 2}, isr[1] = {2};
    struct gr_image_partition_state st = {.leader = -1,
                                          .leader_epoch = 4,
                                          .partition_epoch = 8,
                                          .replicas = reps,
                                          .replica_count = 2,
                                          .isr = isr,
                                          .isr_count = 1};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), 0);
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(plan[0].state.leader, 2); /* 1 is first but not in the ISR */
    assert_int_equal(plan[0].state.leader_epoch, 5);
    assert_int_equal(plan[0].partition_epoch, 8);
    gr_image_remove_broker(img, 2);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL),
                     0); /* no unclean election */
    gr_image_free(img);
}

static void test_thousand_partitions_sixteen_txns(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        add_broker(img, b);
    add_topic(img, "big", 1, 1000, 3, 0);
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), txns = 0;
    assert_int_equal(n, 1000);
    for (int32_t at = 0; at < n; txns++) {
        int32_t b = gr_controller_batch(plan + at, n - at);
        assert_true(b >= 1 && b <= GR_CONTROLLER_TXN_PARTITIONS_MAX);
        at += b;
    }
    assert_int_equal(txns, 16);
    assert_int_equal(gr_controller_batch(plan, 0), 0);
    /* the plan cap: the rest is left for the next pass */
    bool more = false;
    assert_int_equal(gr_controller_plan(img, plan, 100, &more), 100);
    assert_true(more);
    gr_image_free(img);
}

static void test_many_topics_within_compares(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    add_broker(img, 1);
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "t%03d", i);
        add_topic(img, name, i + 1, 1, 1, 0);
    }
    int32_t n = gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL);
    assert_int_equal(n, 100);
    /* each new partition brings its topic record's compare: 1 + 2 * 63 = 127 <= 128 */
    assert_int_equal(gr_controller_batch(plan, n), 63);
    /* existing partitions need no topic compare: 64 of them fit */
    for (int32_t i = 0; i < n; i++)
        plan[i].partition_epoch = 7;
    assert_int_equal(gr_controller_batch(plan, n), GR_CONTROLLER_TXN_PARTITIONS_MAX);
    assert_true(1 + 2 * 63 <= GR_ETCD_TXN_OPS_MAX);
    gr_image_free(img);
}

/* ---- replication factor 3 (hand-built states) ---- */

/* Topic `name` with one partition whose replicas are reps[0..2] and whose state is (leader, epoch, isr),
 * written at partition epoch 20 (every broker of add_broker registered before: epochs 11..13). */
static struct gr_image_topic *rf3_topic(struct gr_image *img, const char *name, int idn,
                                        const int32_t reps[3], int32_t leader, int32_t epoch,
                                        const int32_t *isr, int32_t isr_count)
{
    uint8_t id[16];
    id_of(id, idn);
    struct gr_image_topic *t = NULL;
    assert_int_equal(gr_image_put_topic(img, name, strlen(name), id, false, 1, NULL, &t), 0);
    t->record_revision = 5;
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .partition_epoch = 20,
                                          .replicas = reps,
                                          .replica_count = 3,
                                          .isr = isr,
                                          .isr_count = isr_count};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), 0);
    return t;
}

static void check_write(const struct gr_controller_write *w, int32_t leader, int32_t epoch, int64_t pe,
                        const int32_t *isr, int32_t isr_count)
{
    assert_int_equal(w->state.leader, leader);
    assert_int_equal(w->state.leader_epoch, epoch);
    assert_int_equal(w->partition_epoch, pe);
    assert_int_equal(w->state.isr_count, isr_count);
    for (int32_t i = 0; i < isr_count; i++)
        assert_int_equal(w->state.isr[i], isr[i]);
}

static struct gr_image *three_brokers(void)
{
    struct gr_image *img = gr_image_new(1);
    for (int32_t b = 1; b <= 3; b++)
        add_broker(img, b);
    return img;
}

static void test_rf3_new_topic(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    assert_true(gr_image_remove_broker(img, 2));
    uint8_t id[16];
    id_of(id, 1);
    struct gr_image_topic *t = NULL;
    assert_int_equal(gr_image_put_topic(img, "r", 1, id, false, 1, NULL, &t), 0);
    t->record_revision = 5;
    int32_t reps[3] = {2, 3, 1};
    struct gr_image_partition_state st = {
        .leader = -1, .leader_epoch = -1, .replicas = reps, .replica_count = 3};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 3, 0, 0, (int32_t[]){3, 1}, 2); /* ISR = the live replicas, in assignment order */
    gr_image_free(img);
}

static void test_rf3_follower_death_shrinks_isr(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 1, 5, (int32_t[]){1, 2, 3}, 3);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* settled */
    assert_true(gr_image_remove_broker(img, 3));
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 1, 5, 20, (int32_t[]){1, 2}, 2); /* leader epoch unchanged */
    apply(img, plan, 1, 30);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

static void test_rf3_leader_death_elects_in_assignment_order(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    /* the ISR lists 3 before 2: assignment order (1, 2, 3) makes 2 the leader */
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 1, 5, (int32_t[]){1, 3, 2}, 3);
    assert_true(gr_image_remove_broker(img, 1));
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 2, 6, 20, (int32_t[]){3, 2}, 2);
    apply(img, plan, 1, 30);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    /* broker 1 back: not in the ISR, so nothing changes (the leader's ISR writer adds it once caught up) */
    add_broker(img, 1);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

static void test_rf3_last_isr_member_offline_and_back(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 1, 5, (int32_t[]){1}, 1);
    assert_true(gr_image_remove_broker(img, 1));
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], -1, 6, 20, (int32_t[]){1}, 1); /* offline; the ISR keeps its last member */
    apply(img, plan, 1, 30);
    /* 2 and 3 live but outside the ISR: no clean leader, so offline it stays */
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    struct gr_controller_plan_opts pass = {.unclean_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    /* 1 registers again (a new broker epoch, above the partition epoch): it leads again */
    struct gr_image_broker br = {.node_id = 1, .epoch = 40, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9001;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 1, 7, 30, (int32_t[]){1}, 1);
    apply(img, plan, 1, 50);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

/* The last ISR member back on a new or emptied log dir (log_dir_new in its registration: a replaced disk,
   issue #24's wipe nemesis) is not elected: it would lead with an empty log and truncate the other replicas,
   which hold what the ISR acknowledged. The partition stays offline; the same node back on its old log dir
   (a later process, log_dir_new false) leads. */
static void test_rf3_last_isr_member_back_empty(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 1, 5, (int32_t[]){1}, 1);
    assert_true(gr_image_remove_broker(img, 1));
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], -1, 6, 20, (int32_t[]){1}, 1);
    apply(img, plan, 1, 30);
    struct gr_image_broker br = {.node_id = 1, .epoch = 40, .listener_count = 1, .log_dir_new = true};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9001;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* offline it stays */
    /* an unclean election prefers a live replica with its log: 2, not 1 (first in the assignment) */
    struct gr_controller_plan_opts dflt = {.unclean_default = true, .unclean_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &dflt, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 2, 7, 30, (int32_t[]){2}, 1);
    br.epoch = 45; /* a later process of node 1 on a log dir it had written */
    br.log_dir_new = false;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 1, 7, 30, (int32_t[]){1}, 1);
    gr_image_free(img);
}

static void test_rf3_unclean(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    struct gr_image_topic *t = rf3_topic(img, "r", 1, (int32_t[]){1, 3, 2}, -1, 6, (int32_t[]){1}, 1);
    assert_true(gr_image_remove_broker(img, 1));
    struct gr_controller_plan_opts pass = {.unclean_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* off */
    const char *names[1] = {"unclean.leader.election.enable"}, *on[1] = {"TRUE"}, *off[1] = {"false"};
    assert_int_equal(gr_image_set_topic_configs(img, t, names, on, 1), 0);
    /* already offline: only the periodic pass elects */
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 3, 7, 20, (int32_t[]){3}, 1); /* the first live replica in assignment order */
    /* the topic's false beats the broker default's true */
    assert_int_equal(gr_image_set_topic_configs(img, t, names, off, 1), 0);
    struct gr_controller_plan_opts dflt = {.unclean_default = true, .unclean_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &dflt, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    /* the broker default applies to a topic without its own; a leader taken away elects at once */
    assert_int_equal(gr_image_set_topic_configs(img, t, NULL, NULL, 0), 0);
    rf3_topic(img, "s", 2, (int32_t[]){2, 3, 1}, 2, 3, (int32_t[]){2}, 1);
    assert_true(gr_image_remove_broker(img, 2));
    struct gr_controller_plan_opts now = {.unclean_default = true};
    assert_int_equal(gr_controller_plan_with(img, &now, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    assert_string_equal(plan[0].topic, "s");
    check_write(&plan[0], 3, 4, 20, (int32_t[]){3}, 1);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], -1, 4, 20, (int32_t[]){2}, 1); /* clean only: offline */
    gr_image_free(img);
}

static void test_rf3_controlled_shutdown(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "a", 1, (int32_t[]){2, 3, 1}, 2, 5, (int32_t[]){2, 3, 1}, 3); /* 2 leads */
    rf3_topic(img, "b", 2, (int32_t[]){1, 2, 3}, 1, 8, (int32_t[]){1, 2, 3}, 3); /* 2 follows */
    rf3_topic(img, "c", 3, (int32_t[]){2, 1, 3}, 2, 2, (int32_t[]){2}, 1);       /* 2 alone in the ISR */
    rf3_topic(img, "d", 4, (int32_t[]){1, 3, 2}, 1, 4, (int32_t[]){1, 3}, 2);    /* 2 not in the ISR */
    /* the broker's wait: "a" can move (3 and 1 are live ISR members), "c" cannot (2 alone) */
    const struct gr_image_topic *first = NULL;
    int32_t first_p = -1;
    assert_int_equal(gr_controller_movable_leaderships(img, 2, &first, &first_p), 1);
    assert_non_null(first);
    assert_memory_equal(first->name, "a", 1);
    assert_int_equal(first_p, 0);
    assert_int_equal(gr_controller_movable_leaderships(img, 1, NULL, NULL), 2); /* "b" and "d" */
    struct gr_image_broker br = *gr_image_broker(img, 2);
    br.shutting_down = true;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    /* 2 shutting down: 1's "b" still movable to 3; its "d" to 3 as well */
    assert_int_equal(gr_controller_movable_leaderships(img, 1, NULL, NULL), 2);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 3);
    assert_string_equal(plan[0].topic, "a");
    check_write(&plan[0], 3, 6, 20, (int32_t[]){3, 1}, 2);
    assert_string_equal(plan[1].topic, "b");
    check_write(&plan[1], 1, 8, 20, (int32_t[]){1, 3}, 2);
    assert_string_equal(plan[2].topic, "c");
    check_write(&plan[2], -1, 3, 20, (int32_t[]){2}, 1);
    apply(img, plan, 3, 30);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* leads nothing */
    first = NULL;
    assert_int_equal(gr_controller_movable_leaderships(img, 2, &first, NULL), 0); /* its wait ends */
    assert_null(first);
    /* 3 shutting down too: 3 now leads "a" with ISR {3, 1}: 1 is live, so it still waits; 1 gone as well
       (shutting down): no one can take it, the wait does not hold */
    br = *gr_image_broker(img, 3);
    br.shutting_down = true;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_movable_leaderships(img, 3, NULL, NULL), 1);
    br = *gr_image_broker(img, 1);
    br.shutting_down = true;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_movable_leaderships(img, 3, NULL, NULL), 0);
    gr_image_free(img);
}

static void test_rf3_empty_isr_left_alone(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, -1, 5, NULL, 0); /* no writer makes it: logged, skipped */
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    struct gr_controller_plan_opts pass = {.unclean_default = true, .unclean_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

static void test_rf3_follower_registered_again_leaves_isr(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 1, 5, (int32_t[]){1, 2, 3}, 3);
    struct gr_image_broker br = *gr_image_broker(img, 3);
    br.epoch = 25; /* a restart since the state (20) was written: its log may be short */
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 1, 5, 20, (int32_t[]){1, 2}, 2);
    /* the leader registered again: leadership moves to a fresh ISR member */
    br = *gr_image_broker(img, 1);
    br.epoch = 26;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 2, 6, 20, (int32_t[]){2}, 1);
    gr_image_free(img);
}

/* Several ISR members, none fresh: which one Kafka kept last depends on an order the image cannot show, so
 * none is elected at once; the partition goes offline keeping the old leader, which leads at the next plan
 * if it is back, and a re-registered follower alone never does. */
static void test_rf3_no_fresh_isr_member(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 1, 5, (int32_t[]){1, 2}, 2);
    assert_true(gr_image_remove_broker(img, 1));
    struct gr_image_broker br = *gr_image_broker(img, 2);
    br.epoch = 25; /* 2 restarted: its log may miss what the ISR acknowledged */
    assert_int_equal(gr_image_set_broker(img, &br), 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], -1, 6, 20, (int32_t[]){1}, 1);
    apply(img, plan, 1, 30);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* 2 never leads */
    /* both restarted, the leader among them: offline first, then the old leader leads */
    rf3_topic(img, "s", 2, (int32_t[]){2, 3, 1}, 2, 1, (int32_t[]){2, 3}, 2);
    for (int32_t b = 2; b <= 3; b++) {
        br = *gr_image_broker(img, b);
        br.epoch = 26 + b;
        assert_int_equal(gr_image_set_broker(img, &br), 0);
    }
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    assert_string_equal(plan[0].topic, "s");
    check_write(&plan[0], -1, 2, 20, (int32_t[]){2}, 1);
    apply(img, plan, 1, 40);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 2, 3, 40, (int32_t[]){2}, 1);
    gr_image_free(img);
}

static int ask_type = -1;
static int asked_fn(void *ctx, const uint8_t topic_id[16], int32_t partition)
{
    (void)ctx;
    (void)topic_id;
    return partition == 0 ? ask_type : -1;
}

static void test_rf3_preferred_election(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    /* broker 1 is preferred, in the ISR, but 2 leads (1 was away and came back) */
    struct gr_image_topic *t = rf3_topic(img, "r", 1, (int32_t[]){1, 2, 3}, 2, 6, (int32_t[]){2, 3, 1}, 3);
    const struct gr_image_partition *p = gr_image_partition(t, 0);
    assert_int_equal(gr_controller_plan(img, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0); /* no pass: settled */
    assert_int_equal(gr_controller_elect_check(img, p, GR_ELECTION_PREFERRED), GR_ELECT_NEEDED);
    assert_int_equal(gr_controller_elect_check(img, p, GR_ELECTION_UNCLEAN), GR_ELECT_NOT_NEEDED);
    /* the rebalance pass: 1 leads, epoch 7, ISR unchanged (2 stays a follower) */
    struct gr_controller_plan_opts pass = {.preferred_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 1, 7, 20, (int32_t[]){2, 3, 1}, 3);
    /* the same through an ElectLeaders ask */
    ask_type = GR_ELECTION_PREFERRED;
    struct gr_controller_plan_opts ask = {.asked = asked_fn};
    assert_int_equal(gr_controller_plan_with(img, &ask, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 1, 7, 20, (int32_t[]){2, 3, 1}, 3);
    apply(img, plan, 1, 30);
    p = gr_image_partition(t, 0);
    /* not needed any more: nothing planned, the check says so */
    assert_int_equal(gr_controller_elect_check(img, p, GR_ELECTION_PREFERRED), GR_ELECT_NOT_NEEDED);
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

static void test_rf3_preferred_not_available(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    struct controller_pref_case {
        int32_t isr[3];
        int32_t isr_count;
        bool remove1;
    } cases[] = {
        {{2, 3}, 2, false},   /* 1 live but outside the ISR */
        {{2, 3, 1}, 3, true}, /* 1 in the ISR but gone */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct gr_image *im = three_brokers();
        struct gr_image_topic *t =
            rf3_topic(im, "r", 1, (int32_t[]){1, 2, 3}, 2, 6, cases[c].isr, cases[c].isr_count);
        if (cases[c].remove1) assert_true(gr_image_remove_broker(im, 1));
        assert_int_equal(gr_controller_elect_check(im, gr_image_partition(t, 0), GR_ELECTION_PREFERRED),
                         GR_ELECT_PREFERRED_UNAVAILABLE);
        struct gr_controller_plan_opts pass = {.preferred_pass = true};
        int32_t n = gr_controller_plan_with(im, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL);
        /* only the ISR shrink of a gone member may be written; the leader stays 2 */
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(plan[i].state.leader, 2);
        gr_image_free(im);
    }
    gr_image_free(img);
}

static void test_rf3_unclean_ask(void **state)
{
    (void)state;
    struct gr_image *img = three_brokers();
    /* offline, the ISR's only member (1) gone, unclean not allowed by the topic or the broker */
    struct gr_image_topic *t = rf3_topic(img, "r", 1, (int32_t[]){1, 3, 2}, -1, 6, (int32_t[]){1}, 1);
    assert_true(gr_image_remove_broker(img, 1));
    assert_int_equal(gr_controller_elect_check(img, gr_image_partition(t, 0), GR_ELECTION_UNCLEAN),
                     GR_ELECT_NEEDED);
    assert_int_equal(gr_controller_elect_check(img, gr_image_partition(t, 0), GR_ELECTION_PREFERRED),
                     GR_ELECT_PREFERRED_UNAVAILABLE);
    struct gr_controller_plan_opts pass = {.unclean_pass = true};
    assert_int_equal(gr_controller_plan_with(img, &pass, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    ask_type = GR_ELECTION_UNCLEAN;
    struct gr_controller_plan_opts ask = {.asked = asked_fn};
    assert_int_equal(gr_controller_plan_with(img, &ask, plan, GR_CONTROLLER_PLAN_MAX, NULL), 1);
    check_write(&plan[0], 3, 7, 20, (int32_t[]){3}, 1); /* the first live replica */
    /* no live replica at all: not available */
    assert_true(gr_image_remove_broker(img, 2));
    assert_true(gr_image_remove_broker(img, 3));
    assert_int_equal(gr_controller_elect_check(img, gr_image_partition(t, 0), GR_ELECTION_UNCLEAN),
                     GR_ELECT_ELIGIBLE_UNAVAILABLE);
    assert_int_equal(gr_controller_plan_with(img, &ask, plan, GR_CONTROLLER_PLAN_MAX, NULL), 0);
    gr_image_free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_topic_striped),
        cmocka_unit_test(test_broker_gone_and_back),
        cmocka_unit_test(test_leader_registered_again),
        cmocka_unit_test(test_liveness),
        cmocka_unit_test(test_leader_outside_isr_not_elected),
        cmocka_unit_test(test_thousand_partitions_sixteen_txns),
        cmocka_unit_test(test_many_topics_within_compares),
        cmocka_unit_test(test_rf3_new_topic),
        cmocka_unit_test(test_rf3_follower_death_shrinks_isr),
        cmocka_unit_test(test_rf3_leader_death_elects_in_assignment_order),
        cmocka_unit_test(test_rf3_last_isr_member_offline_and_back),
        cmocka_unit_test(test_rf3_last_isr_member_back_empty),
        cmocka_unit_test(test_rf3_unclean),
        cmocka_unit_test(test_rf3_controlled_shutdown),
        cmocka_unit_test(test_rf3_follower_registered_again_leaves_isr),
        cmocka_unit_test(test_rf3_empty_isr_left_alone),
        cmocka_unit_test(test_rf3_no_fresh_isr_member),
        cmocka_unit_test(test_rf3_preferred_election),
        cmocka_unit_test(test_rf3_preferred_not_available),
        cmocka_unit_test(test_rf3_unclean_ask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
