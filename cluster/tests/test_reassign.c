/*
 * test_reassign.c: the reassignment stages on one partition (cluster/reassign.h), pure, no etcd: a move
 * [1,2,3] -> [4,2,3] grows the replicas to [4,2,3,1] (adding [4], removing [1]) keeping leader, epoch and ISR
 * and writing the state again (a new partition epoch); it does not complete while 4 is outside the ISR, and
 * completes once it is in: replicas [4,2,3], ISR without 1, leader 1 replaced by the first live target
 * replica at epoch + 1. Raising 1 -> 3 replicas completes without a leader epoch change. A reorder of the
 * same set is no reassignment. A pure removal completes at the first check. Errors: empty list, a broker
 * not registered, a broker twice (the lowest offending id named, as Kafka), more than 16 replicas, an unknown
 * partition, a replication factor change when not allowed (INVALID_REPLICATION_FACTOR), a cancel with
 * none in progress. Cancel: back to the replicas without those being added, the ISR likewise; an ISR of only
 * added replicas needs an unclean election (refused unless allowed). The topic record rebuilt from the image
 * and the values codec keep the adding and removing lists (and refuse ones that are not replicas).
 * Read next: compat-tests/cluster/reassign.py (the same against a running cluster).
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

#include "cluster/reassign.h"
#include "protocol/errors.h"

static void add_broker(struct gr_image *img, int32_t node_id)
{
    struct gr_image_broker br = {.node_id = node_id, .epoch = 10 + node_id, .listener_count = 1};
    snprintf(br.listeners[0].name, sizeof br.listeners[0].name, "INTERNAL");
    snprintf(br.listeners[0].host, sizeof br.listeners[0].host, "127.0.0.1");
    br.listeners[0].port = 9000 + node_id;
    assert_int_equal(gr_image_set_broker(img, &br), 0);
}

static struct gr_image *image4(void)
{
    struct gr_image *img = gr_image_new(1);
    assert_non_null(img);
    for (int32_t b = 1; b <= 4; b++)
        add_broker(img, b);
    return img;
}

/* Topic "t" of one partition with the given lists and state (partition epoch 100). */
static struct gr_image_topic *topic(struct gr_image *img, const int32_t *reps, int32_t nr, const int32_t *isr,
                                    int32_t ni, int32_t leader, const int32_t *adding, int32_t na,
                                    const int32_t *removing, int32_t nm)
{
    uint8_t id[16] = {1, 2, 3, [15] = 9};
    struct gr_image_topic *t = gr_image_topic_find_id(img, id);
    if (!t) assert_int_equal(gr_image_put_topic(img, "t", 1, id, false, 1, NULL, &t), 0);
    t->record_revision = 50;
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = 7,
                                          .partition_epoch = 100,
                                          .replicas = reps,
                                          .replica_count = nr,
                                          .isr = isr,
                                          .isr_count = ni,
                                          .adding = adding,
                                          .adding_count = na,
                                          .removing = removing,
                                          .removing_count = nm};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), 0);
    return t;
}

static void assert_ids(const int32_t *got, int32_t n, const int32_t *want, int32_t wn)
{
    assert_int_equal(n, wn);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
}

/* Applies a change to the image as the watch would (the record, then the state at partition epoch rev). */
static void apply(struct gr_image *img, struct gr_image_topic *t, const struct gr_reassign_change *ch)
{
    const struct gr_image_partition *p = gr_image_partition(t, 0);
    int32_t isr[16], ni = p->isr_count, leader = p->leader;
    memcpy(isr, gr_image_isr(p), sizeof(int32_t) * (size_t)ni);
    int32_t epoch = p->leader_epoch;
    if (ch->write_state) {
        ni = ch->state.isr_count;
        memcpy(isr, ch->state.isr, sizeof(int32_t) * (size_t)ni);
        leader = ch->state.leader;
        epoch = ch->state.leader_epoch;
    }
    const struct gr_cluster_assignment *a = &ch->assign;
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = epoch,
                                          .partition_epoch = p->partition_epoch + 1,
                                          .replicas = a->replicas,
                                          .replica_count = a->replica_count,
                                          .isr = isr,
                                          .isr_count = ni,
                                          .adding = a->adding,
                                          .adding_count = a->adding_count,
                                          .removing = a->removing,
                                          .removing_count = a->removing_count};
    assert_int_equal(gr_image_set_partition(img, t, 0, &st), 0);
}

static void test_move_leader_away(void **state)
{
    (void)state;
    struct gr_image *img = image4();
    const int32_t reps[] = {1, 2, 3};
    struct gr_image_topic *t = topic(img, reps, 3, reps, 3, 1, NULL, 0, NULL, 0);
    struct gr_reassign_change ch;
    bool changed = false;
    char msg[GR_REASSIGN_MSG_BYTES];
    const int32_t target[] = {4, 2, 3};
    assert_int_equal(gr_reassign_ask(img, t, 0, target, 3, true, false, &ch, &changed, msg), GR_ERR_NONE);
    assert_true(changed);
    assert_ids(ch.assign.replicas, ch.assign.replica_count, (int32_t[]){4, 2, 3, 1}, 4);
    assert_ids(ch.assign.adding, ch.assign.adding_count, (int32_t[]){4}, 1);
    assert_ids(ch.assign.removing, ch.assign.removing_count, (int32_t[]){1}, 1);
    assert_true(ch.write_state); /* the same state again: a new partition epoch */
    assert_int_equal(ch.state.leader, 1);
    assert_int_equal(ch.state.leader_epoch, 7);
    assert_ids(ch.state.isr, ch.state.isr_count, reps, 3);
    apply(img, t, &ch);
    const struct gr_image_partition *p = gr_image_partition(t, 0);
    assert_true(gr_image_reassigning(p));
    assert_false(gr_reassign_complete(img, t, 0, &ch)); /* 4 is not in the ISR yet */
    /* the leader adds 4 to the ISR (isr_writer) */
    const int32_t isr4[] = {1, 2, 3, 4};
    topic(img, (int32_t[]){4, 2, 3, 1}, 4, isr4, 4, 1, (int32_t[]){4}, 1, (int32_t[]){1}, 1);
    assert_true(gr_reassign_complete(img, t, 0, &ch));
    assert_ids(ch.assign.replicas, ch.assign.replica_count, target, 3);
    assert_int_equal(ch.assign.adding_count, 0);
    assert_int_equal(ch.assign.removing_count, 0);
    assert_true(ch.write_state);
    assert_int_equal(ch.state.leader, 4); /* the first live target replica */
    assert_int_equal(ch.state.leader_epoch, 8);
    assert_ids(ch.state.isr, ch.state.isr_count, (int32_t[]){2, 3, 4}, 3);
    apply(img, t, &ch);
    assert_false(gr_image_reassigning(gr_image_partition(t, 0)));
    assert_false(gr_reassign_complete(img, t, 0, &ch));
    /* the record rebuilt from the image */
    struct gr_cluster_topic rec;
    assert_int_equal(gr_reassign_record(t, &rec), 0);
    assert_int_equal(rec.partition_count, 1);
    assert_ids(rec.partitions[0].replicas, rec.partitions[0].replica_count, target, 3);
    gr_cluster_topic_free(&rec);
    gr_image_free(img);
}

static void test_raise_and_reorder_and_remove(void **state)
{
    (void)state;
    struct gr_image *img = image4();
    const int32_t one[] = {2};
    struct gr_image_topic *t = topic(img, one, 1, one, 1, 2, NULL, 0, NULL, 0);
    struct gr_reassign_change ch;
    bool changed;
    char msg[GR_REASSIGN_MSG_BYTES];
    const int32_t three[] = {2, 3, 1};
    assert_int_equal(gr_reassign_ask(img, t, 0, three, 3, true, false, &ch, &changed, msg), GR_ERR_NONE);
    assert_ids(ch.assign.replicas, ch.assign.replica_count, three, 3);
    assert_ids(ch.assign.adding, ch.assign.adding_count, (int32_t[]){1, 3}, 2); /* in id order, as Kafka */
    assert_int_equal(ch.assign.removing_count, 0);
    apply(img, t, &ch);
    topic(img, three, 3, (int32_t[]){2, 3}, 2, 2, (int32_t[]){1, 3}, 2, NULL, 0);
    assert_false(gr_reassign_complete(img, t, 0, &ch)); /* 1 still catching up */
    topic(img, three, 3, (int32_t[]){2, 3, 1}, 3, 2, (int32_t[]){1, 3}, 2, NULL, 0);
    assert_true(gr_reassign_complete(img, t, 0, &ch));
    assert_int_equal(ch.state.leader, 2);
    assert_int_equal(ch.state.leader_epoch, 7); /* nothing removed, the leader stays: no epoch bump */
    apply(img, t, &ch);
    /* the same set reordered: the assignment changes, nothing is in progress */
    const int32_t reorder[] = {3, 1, 2};
    assert_int_equal(gr_reassign_ask(img, t, 0, reorder, 3, false, false, &ch, &changed, msg), GR_ERR_NONE);
    assert_true(changed);
    assert_ids(ch.assign.replicas, ch.assign.replica_count, reorder, 3);
    assert_int_equal(ch.assign.adding_count + ch.assign.removing_count, 0);
    apply(img, t, &ch);
    assert_int_equal(gr_reassign_ask(img, t, 0, reorder, 3, true, false, &ch, &changed, msg), GR_ERR_NONE);
    assert_false(changed);
    /* a removal: [3,1,2] -> [3,1]; it completes at the first check, the leader (2) moves to 3 */
    const int32_t two[] = {3, 1};
    assert_int_equal(gr_reassign_ask(img, t, 0, two, 2, true, false, &ch, &changed, msg), GR_ERR_NONE);
    assert_ids(ch.assign.replicas, ch.assign.replica_count, (int32_t[]){3, 1, 2}, 3);
    assert_ids(ch.assign.removing, ch.assign.removing_count, (int32_t[]){2}, 1);
    apply(img, t, &ch);
    assert_true(gr_reassign_complete(img, t, 0, &ch));
    assert_ids(ch.assign.replicas, ch.assign.replica_count, two, 2);
    assert_int_equal(ch.state.leader, 3);
    assert_int_equal(ch.state.leader_epoch, 8);
    assert_ids(ch.state.isr, ch.state.isr_count, (int32_t[]){3, 1}, 2);
    gr_image_free(img);
}

static void test_errors(void **state)
{
    (void)state;
    struct gr_image *img = image4();
    const int32_t reps[] = {1, 2, 3};
    struct gr_image_topic *t = topic(img, reps, 3, reps, 3, 1, NULL, 0, NULL, 0);
    struct gr_reassign_change ch;
    bool changed;
    char msg[GR_REASSIGN_MSG_BYTES];
    assert_int_equal(gr_reassign_ask(img, t, 0, NULL, 0, true, false, &ch, &changed, msg),
                     GR_ERR_INVALID_REPLICA_ASSIGNMENT);
    assert_string_equal(msg, "The manual partition assignment includes an empty replica list.");
    assert_int_equal(gr_reassign_ask(img, t, 0, (int32_t[]){9, 2, 2}, 3, true, false, &ch, &changed, msg),
                     GR_ERR_INVALID_REPLICA_ASSIGNMENT);
    assert_string_equal(msg, "The manual partition assignment includes the broker 2 more than once.");
    assert_int_equal(gr_reassign_ask(img, t, 0, (int32_t[]){9, 1}, 2, true, false, &ch, &changed, msg),
                     GR_ERR_INVALID_REPLICA_ASSIGNMENT);
    assert_string_equal(
        msg, "The manual partition assignment includes broker 9, but no such broker is registered.");
    int32_t many[17];
    for (int i = 0; i < 17; i++)
        many[i] = i;
    assert_int_equal(gr_reassign_ask(img, t, 0, many, 17, true, false, &ch, &changed, msg),
                     GR_ERR_INVALID_REPLICA_ASSIGNMENT);
    assert_int_equal(gr_reassign_ask(img, t, 3, reps, 3, true, false, &ch, &changed, msg),
                     GR_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_string_equal(msg, "Unable to find partition t:3.");
    assert_int_equal(gr_reassign_ask(img, t, 0, (int32_t[]){1, 2}, 2, false, false, &ch, &changed, msg),
                     GR_ERR_INVALID_REPLICATION_FACTOR);
    assert_int_equal(gr_reassign_ask(img, t, 0, (int32_t[]){1, 2}, 2, true, false, &ch, &changed, msg),
                     GR_ERR_NONE);
    assert_int_equal(gr_reassign_ask(img, t, 0, NULL, -1, true, false, &ch, &changed, msg),
                     GR_ERR_NO_REASSIGNMENT_IN_PROGRESS);
    assert_string_equal(msg, "");
    gr_image_free(img);
}

static void test_cancel(void **state)
{
    (void)state;
    struct gr_image *img = image4();
    /* [2,3,1] growing to [2,3,1,4]: adding 4, which is not in the ISR yet */
    struct gr_image_topic *t =
        topic(img, (int32_t[]){2, 3, 1, 4}, 4, (int32_t[]){2, 3, 1}, 3, 2, (int32_t[]){4}, 1, NULL, 0);
    struct gr_reassign_change ch;
    bool changed;
    char msg[GR_REASSIGN_MSG_BYTES];
    assert_int_equal(gr_reassign_ask(img, t, 0, NULL, -1, false, false, &ch, &changed, msg), GR_ERR_NONE);
    assert_true(changed);
    assert_ids(ch.assign.replicas, ch.assign.replica_count, (int32_t[]){2, 3, 1}, 3);
    assert_int_equal(ch.assign.adding_count + ch.assign.removing_count, 0);
    assert_true(ch.write_state);
    assert_int_equal(ch.state.leader, 2);
    assert_int_equal(ch.state.leader_epoch, 8); /* replica 4 leaves the list: a new leader epoch */
    assert_ids(ch.state.isr, ch.state.isr_count, (int32_t[]){2, 3, 1}, 3);
    /* [1] moving to [4]: 4 caught up and is the only ISR member left after 1 went away */
    topic(img, (int32_t[]){4, 1}, 2, (int32_t[]){4}, 1, 4, (int32_t[]){4}, 1, (int32_t[]){1}, 1);
    assert_int_equal(gr_reassign_ask(img, t, 0, NULL, -1, true, false, &ch, &changed, msg),
                     GR_ERR_INVALID_REPLICA_ASSIGNMENT);
    assert_string_equal(
        msg, "Unable to revert partition assignment for t:0 because it would require an unclean leader "
             "election.");
    assert_int_equal(gr_reassign_ask(img, t, 0, NULL, -1, true, true, &ch, &changed, msg), GR_ERR_NONE);
    assert_ids(ch.assign.replicas, ch.assign.replica_count, (int32_t[]){1}, 1);
    assert_int_equal(ch.state.leader, 1);
    assert_ids(ch.state.isr, ch.state.isr_count, (int32_t[]){1}, 1);
    gr_image_free(img);
}

static void test_values(void **state)
{
    (void)state;
    char *out = NULL, err[GR_CLUSTER_ERR_BYTES];
    size_t len = 0;
    struct gr_cluster_assignment parts[2] = {{.replica_count = 2, .replicas = {1, 2}},
                                             {.replica_count = 4,
                                              .replicas = {4, 2, 3, 1},
                                              .adding_count = 1,
                                              .adding = {4},
                                              .removing_count = 1,
                                              .removing = {1}}};
    struct gr_cluster_topic t = {.topic_id = {{7, [15] = 1}}, .partition_count = 2, .partitions = parts};
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), 0);
    assert_non_null(strstr(out, "\"reassigning\":{\"1\":{\"adding\":[4],\"removing\":[1]}}"));
    struct gr_cluster_topic back;
    assert_int_equal(gr_cluster_topic_decode(out, len, &back, err), 0);
    assert_int_equal(back.partitions[0].adding_count + back.partitions[0].removing_count, 0);
    assert_ids(back.partitions[1].adding, back.partitions[1].adding_count, (int32_t[]){4}, 1);
    assert_ids(back.partitions[1].removing, back.partitions[1].removing_count, (int32_t[]){1}, 1);
    gr_cluster_topic_free(&back);
    free(out);
    parts[1].adding[0] = 9; /* not a replica */
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), -EINVAL);
    assert_non_null(strstr(err, "not a replica"));
    parts[1].adding[0] = 1; /* both added and removed */
    assert_int_equal(gr_cluster_topic_encode(&t, &out, &len, err), -EINVAL);
    assert_non_null(strstr(err, "both being added and removed"));
    const char *bad = "{\"version\":1,\"topic_id\":\"BwAAAAAAAAAAAAAAAAAAAQ\",\"partitions\":[[1]],"
                      "\"configs\":{},\"reassigning\":{\"3\":{\"adding\":[],\"removing\":[]}}}";
    assert_int_equal(gr_cluster_topic_decode(bad, strlen(bad), &back, err), -EINVAL);
    assert_non_null(strstr(err, "is not a partition"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move_leader_away), cmocka_unit_test(test_raise_and_reorder_and_remove),
        cmocka_unit_test(test_errors),           cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
