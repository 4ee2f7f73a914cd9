/* test_placement.c: replica placement (cluster/placement.h). The exact placements under seed 17 are the
 * ones Kafka's StripedReplicaPlacerTest expects from its MockRandom, so the striping, the per-rack round
 * robin, the fenced-broker rule and the shuffle after a round are Kafka's; the balance tests then check the
 * issue's numbers (12 partitions on 3 brokers: 4 leaders each; 50 partitions spread evenly). */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/placement.h"

#define B(id, rack, fenced)                                                                                  \
    {                                                                                                        \
        (id), (rack), (fenced)                                                                               \
    }

/* Places `parts` partitions of `rf` over `brokers` with a fresh seed-17 generator; asserts success. */
static void place(const struct gr_placement_broker *brokers, int n, int32_t parts, int32_t rf, int32_t *out)
{
    struct gr_placement_rng rng = {17};
    char err[200] = "";
    assert_int_equal(gr_placement_place(&rng, brokers, n, parts, rf, out, err, sizeof err), 0);
}

static void assert_ids(const int32_t *got, const int32_t *want, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
}

/* java.util.Random.nextInt over MockRandom(17): the first draws as Java computes them. */
static void test_rng(void **state)
{
    (void)state;
    struct gr_placement_rng rng = {17};
    /* state1 = 17 * 2862933555777941757 + 3037000493 (mod 2^64); next(31) = state1 >>> 33 */
    uint64_t s1 = 17ULL * 2862933555777941757ULL + 3037000493ULL;
    int32_t r = (int32_t)(s1 >> 33);
    assert_int_equal(gr_placement_rng_next_int(&rng, 7), r % 7);
    struct gr_placement_rng a = {5}, b = {5};
    for (int i = 0; i < 100; i++) { /* deterministic, in range, powers of two too */
        int32_t x = gr_placement_rng_next_int(&a, 1 + i), y = gr_placement_rng_next_int(&b, 1 + i);
        assert_int_equal(x, y);
        assert_true(x >= 0 && x < 1 + i);
    }
}

/* StripedReplicaPlacerTest.testAvoidFencedReplicaIfPossibleOnSingleRack. */
static void test_kafka_single_rack_avoids_fenced(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(3, NULL, false), B(1, NULL, true), B(0, NULL, false),
                                                  B(4, NULL, false), B(2, NULL, false)};
    int32_t out[5 * 4];
    place(brokers, 5, 5, 4, out);
    const int32_t want[] = {3, 4, 0, 2, 4, 0, 2, 3, 0, 2, 3, 4, 2, 3, 4, 0, 0, 4, 3, 2};
    assert_ids(out, want, 20); /* the fenced broker 1 never appears: rf 4 fits the 4 unfenced ones */
}

/* testPlacementOnFencedReplicaOnSingleRack: rf 3 needs the fenced broker, as a follower only. */
static void test_kafka_fenced_follower_when_needed(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(3, NULL, false), B(1, NULL, true), B(2, NULL, false)};
    int32_t out[4 * 3];
    place(brokers, 3, 4, 3, out);
    const int32_t want[] = {3, 2, 1, 2, 3, 1, 3, 2, 1, 2, 3, 1};
    assert_ids(out, want, 12);
}

/* testRackListWithMultipleRacks and testRackListWithInvalidRacks. */
static void test_kafka_multiple_racks(void **state)
{
    (void)state;
    const struct gr_placement_broker b1[] = {B(11, "1", false), B(10, "1", false), B(30, "3", false),
                                             B(31, "3", false), B(21, "2", false), B(20, "2", true)};
    int32_t out[3 * 4];
    place(b1, 6, 3, 4, out);
    const int32_t want1[] = {11, 21, 31, 10, 21, 30, 10, 20, 31, 11, 21, 30};
    assert_ids(out, want1, 12);
    const struct gr_placement_broker b2[] = {B(11, "1", false), B(10, "1", false), B(30, "3", true),
                                             B(31, "3", true),  B(20, "2", true),  B(21, "2", true),
                                             B(41, "4", false), B(40, "4", true)};
    place(b2, 8, 3, 4, out);
    const int32_t want2[] = {41, 11, 21, 30, 10, 20, 31, 41, 41, 21, 30, 11};
    assert_ids(out, want2, 12);
}

/* testSuccessfulPlacement and testMultiPartitionTopicPlacementOnSingleUnfencedBroker. */
static void test_kafka_successful_placement(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(0, NULL, false), B(3, NULL, false), B(2, NULL, false),
                                                  B(1, NULL, false)};
    int32_t out[5 * 3];
    place(brokers, 4, 5, 3, out);
    const int32_t want[] = {2, 3, 0, 3, 0, 1, 0, 1, 2, 1, 2, 3, 1, 0, 2};
    assert_ids(out, want, 15);
    const struct gr_placement_broker one[] = {B(0, NULL, false), B(1, NULL, true)};
    place(one, 2, 3, 1, out);
    const int32_t want1[] = {0, 0, 0};
    assert_ids(out, want1, 3);
}

/* testEvenDistribution: 200 partitions x rf 2 on 4 brokers, the count of each replica pair. */
static void test_kafka_even_distribution(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(0, NULL, false), B(1, NULL, false), B(2, NULL, false),
                                                  B(3, NULL, false)};
    int32_t out[200 * 2];
    place(brokers, 4, 200, 2, out);
    int counts[4][4] = {{0}};
    for (int p = 0; p < 200; p++)
        counts[out[2 * p]][out[2 * p + 1]]++;
    const int want[4][4] = {{0, 14, 22, 14}, {17, 0, 17, 16}, {13, 17, 0, 20}, {20, 19, 11, 0}};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            assert_int_equal(counts[i][k], want[i][k]);
}

/* The refusals, with Kafka's messages, in Kafka's order. */
static void test_errors(void **state)
{
    (void)state;
    struct gr_placement_rng rng = {17};
    char err[200];
    int32_t out[16];
    const struct gr_placement_broker two[] = {B(11, "1", false), B(10, "1", false)};
    assert_int_equal(gr_placement_place(&rng, two, 2, 1, 3, out, err, sizeof err), -EINVAL);
    assert_string_equal(err,
                        "The target replication factor of 3 cannot be reached because only 2 broker(s) are "
                        "registered.");
    assert_int_equal(gr_placement_place(&rng, two, 2, 1, 0, out, err, sizeof err), -EINVAL);
    assert_string_equal(err, "Invalid replication factor 0: the replication factor must be positive.");
    assert_int_equal(gr_placement_place(&rng, two, 2, 1, -1, out, err, sizeof err), -EINVAL);
    assert_string_equal(err, "Invalid replication factor -1: the replication factor must be positive.");
    const struct gr_placement_broker fenced[] = {B(11, "1", true), B(10, "1", true)};
    assert_int_equal(gr_placement_place(&rng, fenced, 2, 1, 1, out, err, sizeof err), -EINVAL);
    assert_string_equal(err, "All brokers are currently fenced.");
    assert_int_equal(gr_placement_place(&rng, NULL, 0, 1, 1, out, err, sizeof err), -EINVAL);
    assert_string_equal(err, "All brokers are currently fenced.");
    /* bounds of Gregor's own */
    assert_int_equal(gr_placement_place(&rng, two, 2, 0, 1, out, err, sizeof err), -E2BIG);
    assert_int_equal(gr_placement_place(&rng, two, 2, 1, 17, out, err, sizeof err), -E2BIG);
}

/* Leaders (first replicas) per broker id below 8. */
static void leader_counts(const int32_t *out, int32_t parts, int32_t rf, int counts[8])
{
    memset(counts, 0, 8 * sizeof *counts);
    for (int32_t p = 0; p < parts; p++)
        counts[out[p * rf]]++;
}

/* 12 partitions x rf 1 on 3 brokers: 4 leaders each, for every seed. */
static void test_twelve_on_three(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(1, NULL, false), B(2, NULL, false), B(3, NULL, false)};
    for (uint64_t seed = 0; seed < 50; seed++) {
        struct gr_placement_rng rng = {seed};
        char err[200];
        int32_t out[12];
        assert_int_equal(gr_placement_place(&rng, brokers, 3, 12, 1, out, err, sizeof err), 0);
        int counts[8];
        leader_counts(out, 12, 1, counts);
        assert_int_equal(counts[1], 4);
        assert_int_equal(counts[2], 4);
        assert_int_equal(counts[3], 4);
    }
}

/* rf 3 on 3 brokers: every broker in every partition, leaders balanced (12 partitions: 4 each). */
static void test_rf3_on_three(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(0, NULL, false), B(1, NULL, false), B(2, NULL, false)};
    int32_t out[12 * 3];
    place(brokers, 3, 12, 3, out);
    for (int p = 0; p < 12; p++) {
        int seen[3] = {0};
        for (int r = 0; r < 3; r++)
            seen[out[p * 3 + r]]++;
        assert_true(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    }
    int counts[8];
    leader_counts(out, 12, 3, counts);
    assert_int_equal(counts[0], 4);
    assert_int_equal(counts[1], 4);
    assert_int_equal(counts[2], 4);
}

/* 2 racks x 3 brokers, rf 2: every partition spans both racks; leaders spread over all six brokers. */
static void test_two_racks(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(1, "a", false), B(2, "a", false), B(3, "a", false),
                                                  B(4, "b", false), B(5, "b", false), B(6, "b", false)};
    int32_t out[24 * 2];
    place(brokers, 6, 24, 2, out);
    int counts[8];
    leader_counts(out, 24, 2, counts);
    for (int p = 0; p < 24; p++) {
        bool first_a = out[2 * p] <= 3, second_a = out[2 * p + 1] <= 3;
        assert_true(first_a != second_a); /* one replica per rack */
    }
    for (int id = 1; id <= 6; id++)
        assert_int_equal(counts[id], 4);
}

/* Fenced brokers never lead; absent ones (not passed) never appear. */
static void test_fenced_never_leads(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(1, NULL, false), B(2, NULL, true), B(3, NULL, false),
                                                  B(5, NULL, false)};
    for (uint64_t seed = 0; seed < 20; seed++) {
        struct gr_placement_rng rng = {seed};
        char err[200];
        int32_t out[30 * 4];
        assert_int_equal(gr_placement_place(&rng, brokers, 4, 30, 2, out, err, sizeof err), 0);
        for (int i = 0; i < 60; i++) {
            assert_int_not_equal(out[i], 2); /* rf 2 fits the three unfenced brokers of the one rack */
            assert_int_not_equal(out[i], 4); /* never registered */
        }
        assert_int_equal(gr_placement_place(&rng, brokers, 4, 30, 4, out, err, sizeof err), 0);
        for (int p = 0; p < 30; p++)
            assert_int_not_equal(out[4 * p], 2); /* needed as a follower, never the leader */
    }
}

/* The __consumer_offsets case: 50 partitions on 3 brokers, 17/17/16 leaders; on 4 brokers 13/13/12/12. */
static void test_fifty_partitions(void **state)
{
    (void)state;
    const struct gr_placement_broker brokers[] = {B(0, NULL, false), B(1, NULL, false), B(2, NULL, false),
                                                  B(3, NULL, false)};
    for (int n = 3; n <= 4; n++) {
        int32_t out[50];
        place(brokers, n, 50, 1, out);
        int counts[8];
        leader_counts(out, 50, 1, counts);
        int lo = 50, hi = 0;
        for (int id = 0; id < n; id++) {
            lo = counts[id] < lo ? counts[id] : lo;
            hi = counts[id] > hi ? counts[id] : hi;
        }
        assert_true(hi - lo <= 1);
        assert_int_equal(hi, (50 + n - 1) / n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_kafka_single_rack_avoids_fenced),
        cmocka_unit_test(test_kafka_fenced_follower_when_needed),
        cmocka_unit_test(test_kafka_multiple_racks),
        cmocka_unit_test(test_kafka_successful_placement),
        cmocka_unit_test(test_kafka_even_distribution),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_twelve_on_three),
        cmocka_unit_test(test_rf3_on_three),
        cmocka_unit_test(test_two_racks),
        cmocka_unit_test(test_fenced_never_leads),
        cmocka_unit_test(test_fifty_partitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
