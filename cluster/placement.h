/*
 * placement.h: replica placement for new partitions, Kafka 4.x's StripedReplicaPlacer
 * (metadata/.../placement/StripedReplicaPlacer.java). Pure and I/O-free; the controller calls it.
 *
 * The rule: brokers are grouped by rack (no rack is one rack of its own, sorting first), racks sorted by
 * name, brokers sorted by id within a rack. Each partition starts at the next rack (a random first rack,
 * then one rack further per partition: the "stripes") and takes its first replica, the preferred leader,
 * from the first rack on from there that has an unfenced broker; further replicas come one rack after
 * another, round robin within each rack, unfenced brokers before fenced ones. No broker holds two replicas
 * of a partition. Each rack's list starts at a random offset that advances by one per partition; after as
 * many partitions as there are unfenced brokers, racks and lists are shuffled. Kafka passes every
 * registered broker except those in controlled shutdown (BrokerHeartbeatManager.usableBrokers), fenced ones
 * included; Gregor's controller passes its live registrations without shutting_down (a broker whose lease
 * ended has no registration). A fenced broker is never a leader and is a follower only when its rack's
 * unfenced brokers are used up.
 *
 * Deterministic under a seed: the random source is Kafka's test generator (MockRandom: a 64-bit LCG) under
 * java.util.Random's nextInt(bound) and Collections.shuffle, so with seed 17 the placements equal those
 * that Kafka's StripedReplicaPlacerTest expects. Read next: cluster/values.h (where the assignment goes).
 */
#ifndef GR_CLUSTER_PLACEMENT_H
#define GR_CLUSTER_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

/* Brokers one placement considers (Gregor registers at most this many; more are refused). */
#define GR_PLACEMENT_BROKERS_MAX 1024

/* A broker the placer may use (Kafka's UsableBroker). `rack` is borrowed (NULL: no rack). */
struct gr_placement_broker {
    int32_t node_id;
    const char *rack;
    bool fenced;
};

/* The random source: state of MockRandom (seeded with any value; Kafka's tests use 17). Production seeds
 * it once from the clock or getrandom, tests with a constant. */
struct gr_placement_rng {
    uint64_t state;
};

/* Places `partition_count` partitions of `replication_factor` replicas over `brokers` (`broker_count`,
 * unique node ids, in any order): partition p's replicas go to replicas[p * replication_factor ...], the
 * first the preferred leader. Advances `rng`. Returns 0, or -EINVAL with Kafka's INVALID_REPLICATION_FACTOR
 * message in `err` (at least 160 bytes), checked in Kafka's order:
 *   "Invalid replication factor <rf>: the replication factor must be positive."
 *   "All brokers are currently fenced."  (also when no broker is given)
 *   "The target replication factor of <rf> cannot be reached because only <n> broker(s) are registered."
 * and -E2BIG for more than GR_PLACEMENT_BROKERS_MAX brokers, replication_factor over
 * GR_CLUSTER_REPLICAS_MAX or partition_count outside 1..GR_PARTITIONS_PER_TOPIC_MAX, -ENOMEM when out of
 * memory. Asserts that node ids are unique and >= 0. */
int gr_placement_place(struct gr_placement_rng *rng, const struct gr_placement_broker *brokers,
                       int broker_count, int32_t partition_count, int32_t replication_factor,
                       int32_t *replicas, char *err, size_t err_cap);

/* java.util.Random.nextInt(bound) over MockRandom (exposed for tests): a value in [0, bound), bound > 0. */
int32_t gr_placement_rng_next_int(struct gr_placement_rng *rng, int32_t bound);

#endif
