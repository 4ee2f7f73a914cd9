/*
 * test_groups_cluster.c: the group coordinator's cluster mode in the server binding (server/groups.c
 * gr_groups_cluster_start and its image observer) against a real store, a real I/O pool and an image whose
 * __consumer_offsets partitions are moved between brokers by hand: a partition led elsewhere is
 * NOT_COORDINATOR; becoming its leader starts a load (COORDINATOR_LOAD_IN_PROGRESS until the pool's reads
 * are replayed, the coordinator epoch = the leader epoch); losing it (another leader, leader -1, this
 * broker fenced) drops its groups; leading it again loads the committed offsets back from the log; other
 * partitions are untouched throughout; led here before the local log is made, COORDINATOR_LOAD_IN_PROGRESS
 * until it is made and loaded; a transaction marker loaded with one partition completes that
 * partition's pending offsets only. FindCoordinator's choice (gr_groups_coordinator) follows the image.
 * With no __consumer_offsets yet: FindCoordinator asks the topic writer (a fake here, refusing as placement
 * does while fewer brokers than offsets.topic.replication.factor are usable) and answers
 * COORDINATOR_NOT_AVAILABLE; the creation is tried again when a broker joins, without another
 * FindCoordinator, and not again while the usable broker count stays the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "cluster/topic_writer.h"
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "coordinator/records.h"
#include "protocol/errors.h"
#include "server/groups.h"
#include "server/tests/fixture.h"

#define PARTS 4

struct fx {
    char dir[256];
    struct gr_broker *b;
    struct gr_image_topic *it; /* __consumer_offsets in the image */
    const char *ga, *gb;       /* two groups on different partitions */
    int32_t pa, pb;
};

/* Sets partition p of __consumer_offsets to leader (-1: none) at epoch, replica = the leader (1 if none). */
static void lead(struct fx *f, int32_t p, int32_t leader, int32_t epoch)
{
    int32_t replica = leader < 0 ? 1 : leader;
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .replicas = &replica,
                                          .replica_count = 1,
                                          .isr = &replica,
                                          .isr_count = 1};
    assert_int_equal(gr_image_set_partition(f->b->image, f->it, p, &st), 0);
}

/* Runs the pool's completions and the loop's zero-delay step timers until partition p is not LOADING. */
static void pump(struct fx *f, int32_t p)
{
    for (int i = 0; i < 1000 && gr_coord_partition_state(f->b->coord, p) == GR_COORD_PART_LOADING; i++) {
        gr_iopool_drain(f->b->iopool);
        ev_run(f->b->loop, EVRUN_NOWAIT);
    }
    assert_int_not_equal(gr_coord_partition_state(f->b->coord, p), GR_COORD_PART_LOADING);
}

/* Starts the cluster coordinator and makes this broker (node 1) the loaded leader of partition p at epoch. */
static void start_leading(struct fx *f, int32_t p, int32_t epoch)
{
    assert_int_equal(gr_groups_cluster_start(f->b), 0);
    lead(f, p, 1, epoch);
    gr_image_changed(f->b->image);
    pump(f, p);
}

static int16_t commit(struct fx *f, const char *group, int32_t partition, int64_t offset)
{
    struct gr_commit_partition cp = {partition, offset, -1, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c("t"), &cp, 1};
    struct gr_commit_params p = {gr_str_c(group), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(f->b->coord, &p, &wp, &we);
    return cp.error_code;
}

static int64_t fetch(struct fx *f, const char *group, int32_t partition)
{
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    return gr_coord_offset_get(f->b->coord, gr_str_c(group), gr_str_c("t"), partition, &off, &epoch, &md)
               ? off
               : -1;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    f->b = srv_broker_open(f->dir, sizeof f->dir, &(struct srv_broker_opts){.node_id = 1, .iopool = true});
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->b->store, GR_OFFSETS_TOPIC, PARTS, NULL, NULL, 0, &t), 0);
    f->it = gr_image_topic_find(f->b->image, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    assert_non_null(f->it);
    assert_ptr_equal(f->it->local, t);
    f->ga = "group-a";
    f->pa = gr_coord_partition_for(gr_str_c(f->ga), PARTS);
    static char gb[32];
    for (int i = 0; i < 100; i++) {
        snprintf(gb, sizeof gb, "group-b%d", i);
        if ((f->pb = gr_coord_partition_for(gr_str_c(gb), PARTS)) != f->pa) break;
    }
    f->gb = gb;
    assert_int_not_equal(f->pa, f->pb);
    for (int32_t p = 0; p < PARTS; p++)
        lead(f, p, 2, 0); /* another broker leads everything */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    srv_broker_close(f->b, f->dir, NULL);
    free(f);
    return 0;
}

static void test_follow_leadership(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    assert_int_equal(gr_groups_cluster_start(b), 0);
    assert_non_null(b->coord);
    int32_t node;
    assert_int_equal(gr_groups_coordinator(b, gr_str_c(f->ga), &node), 0);
    assert_int_equal(node, 2);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(commit(f, f->ga, 0, 10), GR_ERR_NOT_COORDINATOR);

    /* this broker becomes the leader of pa and pb at epoch 5: loads start, requests wait */
    lead(f, f->pa, 1, 5);
    lead(f, f->pb, 1, 5);
    gr_image_changed(b->image);
    assert_int_equal(gr_groups_coordinator(b, gr_str_c(f->ga), &node), 0);
    assert_int_equal(node, 1);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_LOADING);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 5);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(commit(f, f->ga, 0, 10), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    pump(f, f->pa);
    pump(f, f->pb);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_OWNED);
    assert_int_equal(commit(f, f->ga, 0, 10), 0);
    assert_int_equal(commit(f, f->ga, 1, 11), 0);
    assert_int_equal(commit(f, f->gb, 0, 20), 0);
    assert_true(gr_log_end_offset(gr_topic_log(f->it->local, f->pa)) >= 2); /* on pa's log */

    /* pa moves to broker 3: its groups go, pb's stay */
    lead(f, f->pa, 3, 6);
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_NOT_OWNED);
    assert_null(gr_coord_group_find(b->coord, gr_str_c(f->ga)));
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(fetch(f, f->gb, 0), 20);
    assert_int_equal(gr_groups_coordinator(b, gr_str_c(f->ga), &node), 0);
    assert_int_equal(node, 3);

    /* back here at epoch 7: the committed offsets are loaded from pa's log again */
    lead(f, f->pa, 1, 7);
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    pump(f, f->pa);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 7);
    assert_int_equal(fetch(f, f->ga, 0), 10);
    assert_int_equal(fetch(f, f->ga, 1), 11);

    /* no leader: dropped, and FindCoordinator has none to name */
    lead(f, f->pb, -1, 6);
    gr_image_changed(b->image);
    assert_null(gr_coord_group_find(b->coord, gr_str_c(f->gb)));
    assert_int_equal(gr_groups_coordinator(b, gr_str_c(f->gb), &node), GR_ERR_COORDINATOR_NOT_AVAILABLE);
    assert_int_equal(node, -1);

    /* fenced: everything led here goes, and FindCoordinator does not name this broker */
    b->image->self_fenced = true;
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_NOT_OWNED);
    assert_int_equal(gr_coord_group_count(b->coord), 0);
    assert_int_equal(gr_groups_coordinator(b, gr_str_c(f->ga), &node), GR_ERR_COORDINATOR_NOT_AVAILABLE);
    b->image->self_fenced = false;
    gr_image_changed(b->image);
    pump(f, f->pa);
    assert_int_equal(fetch(f, f->ga, 0), 10);
}

/* Led here again at a newer epoch with no state in between seen (an image that jumped over it): the groups
 * are loaded again at the new epoch, so a record another leader wrote meanwhile is replayed. */
static void test_epoch_rise_reloads(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    start_leading(f, f->pa, 5);
    assert_int_equal(commit(f, f->ga, 0, 42), 0);
    /* the same epoch again changes nothing: still owned, no reload */
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_OWNED);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 5);
    /* a commit of offset 77 lands in pa's log without this coordinator (as another leader's record would,
     * copied by replication while this broker did not lead) */
    struct gr_offsets_log *other;
    assert_int_equal(gr_offsets_log_attach(b->store, f->it->local, &other), 0);
    struct gr_offset_commit_value v = {77, -1, gr_str_c(""), 1000, -1};
    struct gr_coord_record rec;
    assert_int_equal(gr_offset_commit_record(&rec, f->ga, "t", 0, &v), 0);
    int64_t end;
    assert_int_equal(gr_offsets_log_append(other, f->pa, &rec, 1, 1000, &end), 0);
    gr_coord_records_free(&rec, 1);
    gr_offsets_log_close(other);
    assert_int_equal(fetch(f, f->ga, 0), 42); /* not seen yet */
    /* epoch 5 -> 9 while led here all along, as this observer sees it: loaded again */
    lead(f, f->pa, 1, 9);
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_LOADING);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 9);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    pump(f, f->pa);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_OWNED);
    assert_int_equal(fetch(f, f->ga, 0), 77);
    /* the other partition was never touched */
    assert_int_equal(gr_coord_partition_state(b->coord, f->pb), GR_COORD_PART_NOT_OWNED);
}

/* The image names this broker the leader before its local log is made (the replica manager makes a new
 * topic's logs one by one after the image changed): FindCoordinator at any broker already names this one, so
 * its group requests answer COORDINATOR_LOAD_IN_PROGRESS (retriable) until the log exists and is loaded, not
 * NOT_COORDINATOR (librdkafka 2.0.2 gives that to a consumer as an OffsetFetch error: 0061 in the cluster).
 */
static void test_elected_before_local_log(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    assert_int_equal(gr_groups_cluster_start(b), 0);
    struct gr_topic *local = f->it->local;
    f->it->local = NULL; /* no local logs yet */
    lead(f, f->pa, 1, 5);
    gr_image_changed(b->image);
    int32_t node;
    assert_int_equal(gr_groups_coordinator(b, gr_str_c(f->ga), &node), 0);
    assert_int_equal(node, 1);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_LOADING);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 5);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(commit(f, f->ga, 0, 10), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->gb)), GR_ERR_NOT_COORDINATOR); /* led elsewhere */
    /* another image change with the log still missing: still waiting, at the same epoch */
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_LOADING);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 5);
    /* moved to broker 3 meanwhile: NOT_COORDINATOR; back here at epoch 7: waiting at epoch 7 */
    lead(f, f->pa, 3, 6);
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_NOT_COORDINATOR);
    lead(f, f->pa, 1, 7);
    gr_image_changed(b->image);
    assert_int_equal(gr_coord_check(b->coord, gr_str_c(f->ga)), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 7);
    /* the log is made (the replica manager runs the observer again): loaded, then served at epoch 7 */
    f->it->local = local;
    gr_groups_follow(b);
    pump(f, f->pa);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_OWNED);
    assert_int_equal(gr_coord_partition_epoch(b->coord, f->pa), 7);
    assert_int_equal(commit(f, f->ga, 0, 10), 0);
    assert_int_equal(fetch(f, f->ga, 0), 10);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pb), GR_COORD_PART_NOT_OWNED);
}

static int16_t txn_commit(struct fx *f, const char *group, int64_t pid, int64_t offset)
{
    struct gr_commit_partition cp = {0, offset, -1, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c("t"), &cp, 1};
    struct gr_txn_commit_params p = {gr_str_c(group), gr_str_c(""), GR_STR_NULL, -1, pid, 0, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_txn_commit(f->b->coord, &p, &wp, &we);
    return cp.error_code;
}

/* A producer's transactional commits on two offsets partitions (the binding's transactional append writes
 * them), its COMMIT marker written on pa only: reloading pa replays that marker for pa's groups alone, so the
 * producer's still-open transaction on pb stays pending (before, the load's replay applied the marker to
 * every partition's groups and committed gb's offset). */
static void test_load_marker_stays_in_its_partition(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    start_leading(f, f->pa, 5);
    lead(f, f->pb, 1, 5);
    gr_image_changed(b->image);
    pump(f, f->pb);
    assert_int_equal(txn_commit(f, f->ga, 500, 10), 0);
    assert_int_equal(txn_commit(f, f->gb, 500, 20), 0);
    assert_true(gr_coord_offset_pending(b->coord, gr_str_c(f->ga), gr_str_c("t"), 0));
    assert_true(gr_coord_offset_pending(b->coord, gr_str_c(f->gb), gr_str_c("t"), 0));
    int64_t we;
    assert_int_equal(gr_coord_txn_complete(b->coord, f->pa, 500, 0, 1, true, &we), 0);
    assert_true(we > 0);
    assert_false(gr_coord_offset_pending(b->coord, gr_str_c(f->ga), gr_str_c("t"), 0));
    assert_int_equal(fetch(f, f->ga, 0), 10);
    assert_true(gr_coord_offset_pending(b->coord, gr_str_c(f->gb), gr_str_c("t"), 0));
    /* pa loaded again at epoch 9: its batch and marker replayed */
    lead(f, f->pa, 1, 9);
    gr_image_changed(b->image);
    pump(f, f->pa);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_OWNED);
    assert_int_equal(fetch(f, f->ga, 0), 10);
    assert_false(gr_coord_offset_pending(b->coord, gr_str_c(f->ga), gr_str_c("t"), 0));
    assert_true(gr_coord_offset_pending(b->coord, gr_str_c(f->gb), gr_str_c("t"), 0));
    assert_int_equal(fetch(f, f->gb, 0), -1);
}

/* A load abandoned halfway (leadership lost while the pool reads) leaves nothing behind. */
static void test_unload_while_loading(void **state)
{
    struct fx *f = *state;
    struct gr_broker *b = f->b;
    start_leading(f, f->pa, 1);
    for (int i = 0; i < 50; i++)
        assert_int_equal(commit(f, f->ga, i, 100 + i), 0);
    lead(f, f->pa, 2, 2);
    gr_image_changed(b->image);
    lead(f, f->pa, 1, 3);
    gr_image_changed(b->image);    /* a load starts ... */
    ev_run(b->loop, EVRUN_NOWAIT); /* ... its first read is on the pool ... */
    lead(f, f->pa, 2, 4);
    gr_image_changed(b->image); /* ... and is abandoned */
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_NOT_OWNED);
    gr_iopool_drain(b->iopool);
    ev_run(b->loop, EVRUN_NOWAIT);
    assert_int_equal(gr_coord_partition_state(b->coord, f->pa), GR_COORD_PART_NOT_OWNED);
    assert_int_equal(gr_coord_group_count(b->coord), 0);
    lead(f, f->pa, 1, 5);
    gr_image_changed(b->image);
    pump(f, f->pa);
    assert_int_equal(fetch(f, f->ga, 49), 149);
}

/* A topic writer that only counts creates and refuses them while the image has fewer usable brokers than
 * asked (placement's rule and words; topic_writer_etcd.c place). */
struct fake_writer {
    struct gr_topic_writer base;
    struct gr_image *img;
    int creates;
    int16_t last_rf;
};

static void fake_create(struct gr_topic_writer *w, const struct gr_topic_create_args *a,
                        gr_topic_change_cb *cb, void *ctx)
{
    struct fake_writer *fw = (struct fake_writer *)w;
    fw->creates++;
    fw->last_rf = (int16_t)a->replication_factor;
    int32_t usable = 0;
    for (int32_t i = 0; i < gr_image_broker_count(fw->img); i++)
        usable += !gr_image_broker_at(fw->img, i)->fenced;
    struct gr_topic_change res = {.error_code = usable < a->replication_factor
                                                    ? GR_ERR_INVALID_REPLICATION_FACTOR
                                                    : GR_ERR_REQUEST_TIMED_OUT,
                                  .message = "refused by the fake"};
    cb(ctx, &res);
}

static void fake_free(struct gr_topic_writer *w)
{
    (void)w;
}

static const struct gr_topic_writer_ops fake_ops = {.create = fake_create, .free = fake_free};

static void add_broker(struct gr_image *img, int32_t id)
{
    struct gr_image_broker br = {.node_id = id, .epoch = 1};
    assert_int_equal(gr_image_set_broker(img, &br), 0);
}

static void test_offsets_topic_retry_on_join(void **state)
{
    (void)state;
    char dir[256];
    struct gr_broker *b =
        srv_broker_open(dir, sizeof dir, &(struct srv_broker_opts){.node_id = 1, .iopool = true});
    b->cfg.settings.offsets_topic_replication_factor = 3;
    struct gr_topic_writer *real = b->topic_writer;
    struct fake_writer fw = {.base = {&fake_ops}, .img = b->image};
    b->topic_writer = &fw.base;
    add_broker(b->image, 1);
    add_broker(b->image, 2);
    gr_image_changed(b->image);
    assert_int_equal(gr_groups_cluster_start(b), 0);
    assert_int_equal(fw.creates, 0); /* nothing asked yet */
    int32_t node = 7;
    assert_int_equal(gr_groups_coordinator(b, gr_str_c("g"), &node), GR_ERR_COORDINATOR_NOT_AVAILABLE);
    assert_int_equal(node, -1);
    assert_int_equal(fw.creates, 1);
    assert_int_equal(fw.last_rf, 3);
    gr_image_changed(b->image); /* an image change with the same two brokers: not tried again */
    assert_int_equal(fw.creates, 1);
    add_broker(b->image, 3); /* the third broker joins: tried again, no FindCoordinator needed */
    gr_image_changed(b->image);
    assert_int_equal(fw.creates, 2);
    gr_image_changed(b->image); /* that one failed too (the fake's timeout): same count, no retry */
    assert_int_equal(fw.creates, 2);
    assert_int_equal(gr_groups_coordinator(b, gr_str_c("g"), &node), GR_ERR_COORDINATOR_NOT_AVAILABLE);
    assert_int_equal(fw.creates, 3); /* a FindCoordinator always asks */
    b->topic_writer = real;
    srv_broker_close(b, dir, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_follow_leadership, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_rise_reloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_elected_before_local_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unload_while_loading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_marker_stays_in_its_partition, setup, teardown),
        cmocka_unit_test(test_offsets_topic_retry_on_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
