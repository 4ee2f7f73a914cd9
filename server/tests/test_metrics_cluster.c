/*
 * test_metrics_cluster.c: the controller's counts of a metadata image and a led partition's ISR conditions
 * (server/metrics_cluster.c), each expected value written from the image the test builds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/image.h"
#include "server/metrics_cluster.h"

static void put_broker(struct gr_image *img, int32_t id, bool fenced)
{
    struct gr_image_broker br = {.node_id = id, .fenced = fenced};
    assert_int_equal(gr_image_set_broker(img, &br), 0);
}

static struct gr_image_topic *put_topic(struct gr_image *img, const char *name, uint8_t id, bool internal,
                                        int32_t partitions)
{
    uint8_t tid[16] = {0};
    tid[15] = id;
    struct gr_image_topic *t;
    assert_int_equal(gr_image_put_topic(img, name, strlen(name), tid, internal, partitions, NULL, &t), 0);
    return t;
}

static void set_part(struct gr_image *img, struct gr_image_topic *t, int32_t p, int32_t leader,
                     const int32_t *replicas, int32_t n)
{
    struct gr_image_partition_state st = {.leader = leader,
                                          .leader_epoch = 1,
                                          .replicas = replicas,
                                          .replica_count = n,
                                          .isr = replicas,
                                          .isr_count = n};
    assert_int_equal(gr_image_set_partition(img, t, p, &st), 0);
}

static void controller_counts(void **state)
{
    (void)state;
    struct gr_image *img = gr_image_new(1);
    assert_non_null(img);
    struct gr_metrics_ctl_counts c;
    gr_metrics_ctl_counts(img, &c);
    assert_int_equal(c.topics + c.partitions + c.offline + c.imbalance + c.brokers, 0);

    put_broker(img, 1, false);
    put_broker(img, 2, false);
    put_broker(img, 3, true); /* fenced: not live */
    static const int32_t r123[] = {1, 2, 3}, r231[] = {2, 3, 1}, r312[] = {3, 1, 2};
    struct gr_image_topic *a = put_topic(img, "a", 1, false, 3);
    set_part(img, a, 0, 1, r123, 3);  /* preferred leader */
    set_part(img, a, 1, 3, r231, 3);  /* led by its second replica: imbalance */
    set_part(img, a, 2, -1, r312, 3); /* no leader: offline, and not its preferred leader */
    struct gr_image_topic *off = put_topic(img, "__consumer_offsets", 2, true, 2);
    set_part(img, off, 0, 2, r231, 3);
    set_part(img, off, 1, 3, r312, 3);
    put_topic(img, "fresh", 3, false, 1); /* a new partition: no leader, no replicas yet */

    gr_metrics_ctl_counts(img, &c);
    assert_int_equal(c.topics, 3);     /* the internal topic counts (KRaft's topicsById) */
    assert_int_equal(c.partitions, 6); /* 3 + 2 + 1 */
    assert_int_equal(c.offline, 2);    /* a-2 and fresh-0 */
    assert_int_equal(c.imbalance, 3);  /* a-1, a-2, fresh-0 */
    assert_int_equal(c.brokers, 2);
    gr_image_free(img);
}

static void isr_conditions(void **state)
{
    (void)state;
    struct gr_metrics_isr_state s = gr_metrics_isr_state(3, 3, 2); /* all in sync */
    assert_false(s.under_replicated);
    assert_false(s.under_min_isr);
    assert_false(s.at_min_isr);
    s = gr_metrics_isr_state(3, 2, 2); /* one out: under-replicated, at min ISR */
    assert_true(s.under_replicated);
    assert_false(s.under_min_isr);
    assert_true(s.at_min_isr);
    s = gr_metrics_isr_state(3, 1, 2); /* two out: under min ISR */
    assert_true(s.under_replicated);
    assert_true(s.under_min_isr);
    assert_false(s.at_min_isr);
    s = gr_metrics_isr_state(1, 1, 2); /* min.insync.replicas above the factor: effective min ISR 1 */
    assert_false(s.under_replicated);
    assert_false(s.under_min_isr);
    assert_true(s.at_min_isr);
    s = gr_metrics_isr_state(3, 3, 0); /* a bad setting reads as 1 */
    assert_false(s.at_min_isr);
    s = gr_metrics_isr_state(3, 1, 0);
    assert_true(s.at_min_isr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(controller_counts),
        cmocka_unit_test(isr_conditions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
