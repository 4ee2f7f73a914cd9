/*
 * ownership.c: which __consumer_offsets partitions this coordinator serves (coordinator.h, "partition
 * ownership"). One state byte and one epoch per partition; a group belongs to the partition its id hashes
 * to (records.h gr_coord_partition_for), so the check is one hash and one array read.
 *
 * Invariants: with cfg.partitions_owned every partition is OWNED for the coordinator's life (single node);
 * otherwise a partition is OWNED only between gr_coord_partition_load_done and the next unload, and no group
 * of a NOT_OWNED partition exists (unload drops them, load_begin starts from none). Kafka's model:
 * CoordinatorRuntime's per-partition CoordinatorContext (states INITIAL, LOADING, ACTIVE, CLOSED) and
 * GroupMetadataManager.removeGroupsForPartition.
 * Read next: server/groups.c (who calls these on leadership changes).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/limits.h"
#include "common/log.h"
#include "coordinator/internal.h"
#include "protocol/errors.h"

int gr_coord_ownership_init(struct gr_coordinator *c)
{
    int32_t n = c->cfg.offsets_partitions;
    uint8_t *st = malloc((size_t)n);
    int32_t *ep = malloc((size_t)n * sizeof *ep);
    if (!st || !ep) {
        free(st);
        free(ep);
        return -ENOMEM;
    }
    for (int32_t p = 0; p < n; p++) {
        st[p] = c->cfg.partitions_owned ? GR_COORD_PART_OWNED : GR_COORD_PART_NOT_OWNED;
        ep[p] = -1;
    }
    free(c->part_state);
    free(c->part_epoch);
    c->part_state = st;
    c->part_epoch = ep;
    return 0;
}

enum gr_coord_part_state gr_coord_partition_state(const struct gr_coordinator *c, int32_t partition)
{
    if (partition < 0 || partition >= c->cfg.offsets_partitions) return GR_COORD_PART_NOT_OWNED;
    return (enum gr_coord_part_state)c->part_state[partition];
}

int32_t gr_coord_partition_epoch(const struct gr_coordinator *c, int32_t partition)
{
    if (partition < 0 || partition >= c->cfg.offsets_partitions) return -1;
    return c->part_epoch[partition];
}

bool gr_coord_partition_owned(const struct gr_coordinator *c, int32_t partition)
{
    return gr_coord_partition_state(c, partition) == GR_COORD_PART_OWNED;
}

int16_t gr_coord_check(const struct gr_coordinator *c, struct gr_str group_id)
{
    if (group_id.len <= 0) return GR_ERR_NONE; /* the call itself answers INVALID_GROUP_ID */
    switch (gr_coord_partition_state(c, gr_coord_partition(c, group_id))) {
    case GR_COORD_PART_OWNED:
        return GR_ERR_NONE;
    case GR_COORD_PART_LOADING:
        return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    default:
        return GR_ERR_NOT_COORDINATOR;
    }
}

int32_t gr_coord_partition_unload(struct gr_coordinator *c, int32_t partition)
{
    if (partition < 0 || partition >= c->cfg.offsets_partitions) return 0;
    int32_t dropped = 0;
    for (int32_t g = 0; g < c->group_count;) {
        struct gr_group *grp = c->groups[g];
        if (grp->partition != partition) {
            g++;
            continue;
        }
        gr_coord_group_drop(c, grp, GR_ERR_NOT_COORDINATOR); /* slot g now holds another group */
        dropped++;
    }
    c->part_state[partition] = GR_COORD_PART_NOT_OWNED;
    c->part_epoch[partition] = -1;
    c->deadline_hint = gr_coord_next_deadline_ms(c);
    return dropped;
}

int gr_coord_partition_load_begin(struct gr_coordinator *c, int32_t partition, int32_t epoch)
{
    if (partition < 0 || partition >= c->cfg.offsets_partitions) return -EINVAL;
    gr_coord_partition_unload(c, partition);
    c->part_state[partition] = GR_COORD_PART_LOADING;
    c->part_epoch[partition] = epoch;
    return 0;
}

int32_t gr_coord_partition_load_done(struct gr_coordinator *c, int32_t partition)
{
    if (gr_coord_partition_state(c, partition) != GR_COORD_PART_LOADING) return -EINVAL;
    c->part_state[partition] = GR_COORD_PART_OWNED;
    int32_t n = 0;
    for (int32_t g = 0; g < c->group_count; g++)
        if (c->groups[g]->partition == partition) {
            gr_coord_group_loaded(c, c->groups[g]);
            n++;
        }
    if (c->expiration_deadline_ms == GR_NO_DEADLINE)
        gr_coord_set_deadline(c, &c->expiration_deadline_ms,
                              gr_coord_now(c) + c->cfg.offsets_retention_check_interval_ms);
    return n;
}

int gr_coord_set_partition_count(struct gr_coordinator *c, int32_t partitions)
{
    if (partitions < 1 || partitions > GR_PARTITIONS_PER_TOPIC_MAX) return -EINVAL;
    if (partitions == c->cfg.offsets_partitions) return 0;
    if (c->group_count || c->cfg.partitions_owned) return -EBUSY;
    for (int32_t p = 0; p < c->cfg.offsets_partitions; p++)
        if (c->part_state[p] != GR_COORD_PART_NOT_OWNED) return -EBUSY;
    int32_t old = c->cfg.offsets_partitions;
    c->cfg.offsets_partitions = partitions;
    int rc = gr_coord_ownership_init(c);
    if (rc < 0) c->cfg.offsets_partitions = old;
    return rc;
}
