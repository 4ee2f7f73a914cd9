/*
 * test_roles.c: the role binding (cluster/roles.h) with an image the test mutates, a real store and log in a
 * temporary directory, a real partition set, and fakes for what the binding drives: a fetcher (adds and
 * removes recorded), an ISR writer (proposals recorded, outcomes delivered by the test, cancels counted, a
 * refusal on demand) and a clock the test moves. No loop: the shrink timer's body is called by hand.
 *
 * Checks: an image where this node leads gives LEADER with the image's epochs, ISR and the topic's
 * min.insync.replicas, and no fetch; an unchanged image does not call set_role again; a new leader epoch
 * elsewhere gives FOLLOWER and a fetcher add with that leader and epoch, once; leader -1 removes the fetch,
 * and leading again keeps it removed; a lagging follower is removed by the shrink tick, the proposal reaches
 * the writer with the partition's topic id, epochs and the new ISR, its OK outcome is committed
 * (gr_partition_isr shows it) and the image then showing that state is no change; INELIGIBLE reverts the
 * change, STALE keeps it in flight until the image's newer state (which cancels the writer's change); a
 * refusal at once reverts; an older image state is skipped; a min.insync.replicas change alone does not call
 * set_role; a topic leaving the image and a deleted log stop the fetch; nothing happens while the image is
 * loading or this broker is self-fenced.
 * Read next: cluster/roles.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "cluster/roles.h"
#include "common/tests/capture.h"
#include "partition/partition.h"
#include "storage/tests/helpers.h"

#define SELF 1
#define LAG_MS 30000

/* The fakes' records. */
struct fakes {
    int adds, removes, cancels, proposals;
    int32_t add_leader, add_epoch, add_partition;
    char add_topic[64];
    struct gr_partition *add_part;
    int refuse; /* the next proposal's answer (0: accepted) */
    struct gr_isr_change last;
    gr_isr_done *done;
    void *done_ctx;
    int64_t now;
};

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_log *log;
    struct gr_partitions *ps;
    struct gr_partition *part;
    struct gr_image *img;
    struct gr_image_topic *it;
    struct gr_roles *roles;
    struct fakes fk;
};

static int fake_add(void *ctx, struct gr_partition *part, const char *topic, const uint8_t topic_id[16],
                    int32_t partition, int32_t leader_id, int32_t leader_epoch)
{
    struct fakes *fk = ctx;
    (void)topic_id;
    fk->adds++;
    fk->add_part = part;
    snprintf(fk->add_topic, sizeof fk->add_topic, "%s", topic);
    fk->add_partition = partition;
    fk->add_leader = leader_id;
    fk->add_epoch = leader_epoch;
    return 0;
}

static void fake_remove(void *ctx, struct gr_partition *part)
{
    struct fakes *fk = ctx;
    assert_non_null(part);
    fk->removes++;
}

static int fake_propose(void *ctx, const struct gr_isr_change *chg, gr_isr_done *done, void *done_ctx)
{
    struct fakes *fk = ctx;
    if (fk->refuse) return fk->refuse;
    fk->proposals++;
    fk->last = *chg;
    fk->done = done;
    fk->done_ctx = done_ctx;
    return 0;
}

static bool fake_cancel(void *ctx, const uint8_t topic_id[16], int32_t partition)
{
    struct fakes *fk = ctx;
    (void)topic_id;
    (void)partition;
    fk->cancels++;
    return true;
}

static int64_t fake_now(void *ctx)
{
    return ((struct fakes *)ctx)->now;
}

static void put_broker(struct fx *f, int32_t id, int64_t epoch)
{
    struct gr_image_broker br = {.node_id = id, .epoch = epoch};
    assert_int_equal(gr_image_set_broker(f->img, &br), 0);
}

/* Sets partition 0's state: leader, leader epoch, partition epoch, replicas {1,2,3}, the ISR given. */
static void state(struct fx *f, int32_t leader, int32_t epoch, int64_t pe, const int32_t *isr, int32_t n)
{
    static const int32_t replicas[] = {1, 2, 3};
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .partition_epoch = pe,
                                          .replicas = replicas,
                                          .replica_count = 3,
                                          .isr = isr,
                                          .isr_count = n};
    assert_int_equal(gr_image_set_partition(f->img, f->it, 0, &st), 0);
}

static void min_isr_config(struct fx *f, const char *value)
{
    const char *names[] = {"min.insync.replicas"}, *values[] = {value};
    assert_int_equal(gr_image_set_topic_configs(f->img, f->it, names, values, 1), 0);
}

static const int32_t ISR_ALL[] = {1, 2, 3}, ISR_12[] = {1, 2};

static int setup(void **state_)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    assert_int_equal(gr_store_topic_create(f->store, "r", 1, NULL, NULL, 0, &f->topic), 0);
    f->log = gr_topic_log(f->topic, 0);
    struct gr_partitions_config pc = {f->store, false};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    assert_non_null(f->part = gr_partition_get(f->ps, f->log));
    assert_non_null(f->img = gr_image_new(SELF));
    for (int32_t id = 1; id <= 3; id++)
        put_broker(f, id, 100 + id);
    assert_int_equal(gr_image_put_topic(f->img, "r", 1, gr_topic_id(f->topic), false, 1, f->topic, &f->it),
                     0);
    min_isr_config(f, "2");
    state(f, SELF, 3, 10, ISR_ALL, 3);
    f->fk.now = 1000;
    struct gr_roles_config rc = {.parts = f->ps,
                                 .replica_lag_time_max_ms = LAG_MS,
                                 .min_insync_replicas = 1,
                                 .now_ms = fake_now,
                                 .clock_ctx = &f->fk,
                                 .ops = {fake_add, fake_remove, &f->fk, fake_propose, fake_cancel, &f->fk}};
    assert_non_null(f->roles = gr_roles_new(&rc, f->img));
    *state_ = f;
    return 0;
}

static int teardown(void **state_)
{
    struct fx *f = *state_;
    gr_roles_free(f->roles);
    gr_partitions_destroy(f->ps);
    gr_image_free(f->img);
    gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static struct gr_roles_stats stats(struct fx *f)
{
    struct gr_roles_stats st;
    gr_roles_stats(f->roles, &st);
    return st;
}

static void assert_isr(struct fx *f, const int32_t *want, int n)
{
    int32_t isr[8];
    assert_int_equal(gr_partition_isr(f->part, isr, 8), n);
    assert_memory_equal(isr, want, sizeof(int32_t) * (size_t)n);
}

/* Appends `count` records and tells the partition (the produce path). */
static void append(struct fx *f, int32_t count)
{
    size_t len;
    uint8_t *b = th_simple(count, 1000, 7, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    gr_partition_appended(f->part);
}

static int fetch(struct fx *f, int32_t id, int64_t offset)
{
    struct gr_follower_fetch ff = {id, 100 + id, offset, 0, f->fk.now};
    return gr_partition_update_follower_fetch_state(f->part, &ff);
}

static void test_leader_here(void **state_)
{
    struct fx *f = *state_;
    gr_image_changed(f->img); /* not started: nothing */
    assert_int_equal(stats(f).set_roles, 0);
    assert_int_equal(gr_roles_start(f->roles), 0);
    assert_int_equal(gr_roles_start(f->roles), -EALREADY);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_LEADER);
    assert_int_equal(gr_partition_leader_epoch(f->part), 3);
    assert_int_equal(gr_partition_partition_epoch(f->part), 10);
    assert_isr(f, ISR_ALL, 3);
    assert_int_equal(gr_partition_effective_min_isr(f->part), 2); /* the topic's config */
    assert_int_equal(stats(f).set_roles, 1);
    assert_int_equal(stats(f).leaders, 1);
    assert_int_equal(f->fk.adds, 0);
    assert_int_equal(f->fk.removes, 0);
    /* unchanged: no second set_role */
    gr_image_changed(f->img);
    gr_image_changed(f->img);
    assert_int_equal(stats(f).set_roles, 1);
    assert_int_equal(stats(f).passes, 3);
}

/* A partition assigned in the topic record whose state the controller has not written yet (leader -1,
   leader epoch -1, partition epoch 0, as a fresh __consumer_offsets partition shows): no role, no warning,
   until its state comes. */
static void test_assigned_without_state(void **state_)
{
    struct fx *f = *state_;
    state(f, -1, -1, 0, ISR_ALL, 0);
    capture();
    assert_int_equal(gr_roles_start(f->roles), 0);
    char *logged = captured();
    assert_null(strstr(logged, "state out of range")); /* a state not written yet is no warning */
    free(logged);
    assert_int_equal(stats(f).set_roles, 0);
    assert_int_equal(stats(f).role_errors, 0);
    assert_int_equal(f->fk.adds, 0);
    state(f, SELF, 3, 10, ISR_ALL, 3);
    gr_image_changed(f->img);
    assert_int_equal(stats(f).set_roles, 1);
    assert_int_equal(gr_partition_partition_epoch(f->part), 10);
}

static void test_follower_then_offline(void **state_)
{
    struct fx *f = *state_;
    assert_int_equal(gr_roles_start(f->roles), 0);
    state(f, 2, 4, 11, ISR_ALL, 3); /* a new leader epoch elsewhere */
    gr_image_changed(f->img);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_FOLLOWER);
    assert_int_equal(gr_partition_leader_epoch(f->part), 4);
    assert_int_equal(stats(f).set_roles, 2);
    assert_int_equal(f->fk.adds, 1);
    assert_ptr_equal(f->fk.add_part, f->part);
    assert_string_equal(f->fk.add_topic, "r");
    assert_int_equal(f->fk.add_partition, 0);
    assert_int_equal(f->fk.add_leader, 2);
    assert_int_equal(f->fk.add_epoch, 4);
    assert_int_equal(stats(f).followers, 1);
    gr_image_changed(f->img); /* unchanged: neither set_role nor a second add */
    assert_int_equal(stats(f).set_roles, 2);
    assert_int_equal(f->fk.adds, 1);
    /* offline (leader -1, epoch +1): still a follower, its fetch removed */
    state(f, -1, 5, 12, ISR_ALL, 1);
    gr_image_changed(f->img);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_FOLLOWER);
    assert_int_equal(gr_partition_leader_epoch(f->part), 5);
    assert_int_equal(f->fk.removes, 1);
    assert_int_equal(f->fk.adds, 1);
    /* leading again: LEADER, nothing to remove (not fetching) */
    state(f, SELF, 6, 13, ISR_ALL, 1);
    gr_image_changed(f->img);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_LEADER);
    assert_int_equal(gr_partition_leader_epoch(f->part), 6);
    assert_int_equal(f->fk.removes, 1);
    assert_int_equal(stats(f).set_roles, 4);
    /* following 3 at epoch 7, then leading at 8: the fetch is removed */
    state(f, 3, 7, 14, ISR_ALL, 3);
    gr_image_changed(f->img);
    assert_int_equal(f->fk.adds, 2);
    assert_int_equal(f->fk.add_leader, 3);
    assert_int_equal(f->fk.add_epoch, 7);
    state(f, SELF, 8, 15, ISR_ALL, 3);
    gr_image_changed(f->img);
    assert_int_equal(f->fk.removes, 2);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_LEADER);
}

/* Leads {1,2,3}; follower 2 caught up at offset 10, follower 3 silent; the clock past the lag. */
static void lagging_follower(struct fx *f)
{
    assert_int_equal(gr_roles_start(f->roles), 0);
    append(f, 10);
    f->fk.now = 2000;
    assert_int_equal(fetch(f, 2, 10), 0);
    f->fk.now = 1000 + LAG_MS + 1;
}

static void test_shrink_and_commit(void **state_)
{
    struct fx *f = *state_;
    lagging_follower(f);
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1);
    assert_int_equal(f->fk.proposals, 1);
    assert_memory_equal(f->fk.last.topic_id, gr_topic_id(f->topic), 16);
    assert_int_equal(f->fk.last.partition, 0);
    assert_int_equal(f->fk.last.leader_epoch, 3);
    assert_int_equal(f->fk.last.partition_epoch, 10);
    assert_int_equal(f->fk.last.isr_count, 2);
    assert_memory_equal(f->fk.last.isr, ISR_12, sizeof ISR_12);
    assert_true(gr_partition_isr_inflight(f->part));
    assert_isr(f, ISR_ALL, 3);                           /* committed ISR unchanged until the outcome */
    assert_int_equal(gr_roles_shrink_tick(f->roles), 0); /* one change in flight */
    assert_int_equal(stats(f).isr_shrinks, 0);           /* proposed, not yet written */
    f->fk.done(f->fk.done_ctx, &f->fk.last, GR_ISR_OK, 11);
    assert_int_equal(stats(f).isr_shrinks, 1); /* ReplicaManager's IsrShrinksPerSec mark */
    assert_int_equal(stats(f).isr_expands, 0);
    assert_false(gr_partition_isr_inflight(f->part));
    assert_isr(f, ISR_12, 2);
    assert_int_equal(gr_partition_partition_epoch(f->part), 11);
    /* the image showing the written state is no change; an older one is skipped */
    int64_t roles_before = stats(f).set_roles;
    state(f, SELF, 3, 11, ISR_12, 2);
    gr_image_changed(f->img);
    state(f, SELF, 3, 10, ISR_ALL, 3);
    gr_image_changed(f->img);
    assert_int_equal(stats(f).set_roles, roles_before);
    assert_isr(f, ISR_12, 2);
    assert_int_equal(f->fk.cancels, 0);
    /* follower 3 catches up: the expand, once written, is an IsrExpandsPerSec mark */
    assert_int_equal(fetch(f, 3, 10), 0);
    assert_int_equal(f->fk.proposals, 2);
    assert_int_equal(f->fk.last.isr_count, 3);
    f->fk.done(f->fk.done_ctx, &f->fk.last, GR_ISR_OK, 12);
    assert_int_equal(stats(f).isr_expands, 1);
    assert_int_equal(stats(f).isr_shrinks, 1);
    assert_isr(f, ISR_ALL, 3);
}

/* The image shows this leader's write before the writer's answer: the mark is made then, once. */
static void test_shrink_seen_in_image_first(void **state_)
{
    struct fx *f = *state_;
    lagging_follower(f);
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1);
    state(f, SELF, 3, 11, ISR_ALL, 3); /* a newer state that is not the proposal (another writer's) */
    gr_image_changed(f->img);
    assert_int_equal(stats(f).isr_shrinks, 0);
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1); /* proposed again from partition epoch 11 */
    state(f, SELF, 3, 12, ISR_12, 2);                    /* the write, seen through the image first */
    gr_image_changed(f->img);
    assert_int_equal(stats(f).isr_shrinks, 1);
    assert_isr(f, ISR_12, 2);
    f->fk.done(f->fk.done_ctx, &f->fk.last, GR_ISR_OK, 12); /* the answer, late */
    assert_int_equal(stats(f).isr_shrinks, 1);
    assert_int_equal(stats(f).isr_expands, 0);
}

static void test_ineligible_reverts_stale_waits(void **state_)
{
    struct fx *f = *state_;
    lagging_follower(f);
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1);
    f->fk.done(f->fk.done_ctx, &f->fk.last, GR_ISR_INELIGIBLE, 0);
    assert_false(gr_partition_isr_inflight(f->part));
    assert_isr(f, ISR_ALL, 3);
    /* proposed again; STALE: still in flight, no second proposal, until the image's new state */
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1);
    f->fk.done(f->fk.done_ctx, &f->fk.last, GR_ISR_STALE, 0);
    assert_true(gr_partition_isr_inflight(f->part));
    assert_int_equal(gr_roles_shrink_tick(f->roles), 0);
    assert_int_equal(f->fk.proposals, 2);
    state(f, SELF, 3, 12, ISR_12, 2); /* e.g. the controller removed 3 meanwhile */
    gr_image_changed(f->img);
    assert_false(gr_partition_isr_inflight(f->part));
    assert_isr(f, ISR_12, 2);
    assert_int_equal(gr_partition_partition_epoch(f->part), 12);
    assert_int_equal(f->fk.cancels, 1); /* the writer's change of the old state cancelled */
    /* neither INELIGIBLE nor STALE wrote anything: no mark (the controller's change is not this leader's) */
    assert_int_equal(stats(f).isr_shrinks + stats(f).isr_expands, 0);
}

static void test_refused_at_once_reverts(void **state_)
{
    struct fx *f = *state_;
    lagging_follower(f);
    f->fk.refuse = -EBUSY;
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1);
    assert_false(gr_partition_isr_inflight(f->part));
    assert_isr(f, ISR_ALL, 3);
    assert_int_equal(stats(f).refused, 1);
    assert_int_equal(stats(f).proposals, 0);
    f->fk.refuse = 0;
    assert_int_equal(gr_roles_shrink_tick(f->roles), 1); /* room again: proposed */
    assert_int_equal(f->fk.proposals, 1);
}

static void test_min_isr_alone(void **state_)
{
    struct fx *f = *state_;
    assert_int_equal(gr_roles_start(f->roles), 0);
    assert_int_equal(gr_partition_effective_min_isr(f->part), 2);
    min_isr_config(f, "3");
    gr_image_changed(f->img);
    assert_int_equal(gr_partition_effective_min_isr(f->part), 3);
    assert_int_equal(stats(f).set_roles, 1);
    min_isr_config(f, "bogus"); /* not a number: the broker's (1) */
    gr_image_changed(f->img);
    assert_int_equal(gr_partition_effective_min_isr(f->part), 1);
    assert_int_equal(stats(f).set_roles, 1);
}

static void test_topic_gone_and_log_deleted_stop_fetch(void **state_)
{
    struct fx *f = *state_;
    state(f, 2, 4, 11, ISR_ALL, 3);
    assert_int_equal(gr_roles_start(f->roles), 0);
    assert_int_equal(f->fk.adds, 1);
    assert_int_equal(stats(f).tracked, 1);
    f->it->local = NULL; /* unlinked (the topic leaving the image unlinks it too) */
    gr_image_changed(f->img);
    assert_int_equal(f->fk.removes, 1);
    assert_int_equal(stats(f).tracked, 0);
    f->it->local = f->topic;
    gr_roles_on_log(f->roles, f->topic, 0, f->log, true); /* made again: applied at once */
    assert_int_equal(f->fk.adds, 2);
    assert_int_equal(stats(f).tracked, 1);
    gr_roles_on_log(f->roles, f->topic, 0, f->log, false);
    assert_int_equal(f->fk.removes, 2);
    assert_int_equal(stats(f).tracked, 0);
}

static void test_loading_and_fenced_do_nothing(void **state_)
{
    struct fx *f = *state_;
    f->img->loading = true;
    assert_int_equal(gr_roles_start(f->roles), 0);
    assert_int_equal(stats(f).set_roles, 0);
    f->img->loading = false;
    f->img->self_fenced = true;
    gr_image_changed(f->img);
    assert_int_equal(stats(f).set_roles, 0);
    assert_int_equal(gr_roles_shrink_tick(f->roles), 0);
    f->img->self_fenced = false;
    gr_image_changed(f->img);
    assert_int_equal(stats(f).set_roles, 1);
    assert_int_equal(gr_partition_role(f->part), GR_PARTITION_LEADER);
}

/* Many partitions through the table: every one tracked, then all dropped (the table's removal keeps the
 * probe chains whole). */
static void test_many_partitions(void **state_)
{
    struct fx *f = *state_;
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "m", 200, NULL, NULL, 0, &t), 0);
    struct gr_image_topic *it;
    assert_int_equal(gr_image_put_topic(f->img, "m", 1, gr_topic_id(t), false, 200, t, &it), 0);
    static const int32_t replicas[] = {1, 2};
    for (int32_t p = 0; p < 200; p++) {
        struct gr_image_partition_state st = {.leader = p % 2 ? 2 : SELF,
                                              .leader_epoch = 1,
                                              .partition_epoch = 5,
                                              .replicas = replicas,
                                              .replica_count = 2,
                                              .isr = replicas,
                                              .isr_count = 2};
        assert_int_equal(gr_image_set_partition(f->img, it, p, &st), 0);
    }
    assert_int_equal(gr_roles_start(f->roles), 0);
    assert_int_equal(stats(f).tracked, 201);
    assert_int_equal(stats(f).leaders, 101);
    assert_int_equal(stats(f).followers, 100);
    assert_int_equal(f->fk.adds, 100);
    for (int32_t p = 0; p < 200; p += 3)
        gr_roles_on_log(f->roles, t, p, gr_topic_log(t, p), false);
    assert_int_equal(stats(f).tracked, 201 - 67);
    it->local = NULL;
    gr_image_changed(f->img);
    assert_int_equal(stats(f).tracked, 1);
    assert_int_equal(f->fk.removes, 100); /* every follower's fetch stopped once */
    assert_int_equal(stats(f).set_roles, 201);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_leader_here, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assigned_without_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_then_offline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shrink_and_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shrink_seen_in_image_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ineligible_reverts_stale_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_at_once_reverts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_min_isr_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_gone_and_log_deleted_stop_fetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loading_and_fenced_do_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_partitions, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
