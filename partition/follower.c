/*
 * follower.c: the follower side of a replicated partition (partition.h, "The follower side"): appends as
 * follower, truncations, the leader's log start offset and high watermark, on top of storage's follower
 * operations (storage/replica.c, storage/truncate.c). gr_partition_set_role (replica.c) makes a partition a
 * follower (role, leader epoch, struct gr_partition_hw `follower`, partition/internal.h); this file moves its
 * high watermark `hw`: up to min(the leader's, the log end offset) from fetch answers, down only by
 * truncation. partition.c shows it as the visible offset (clamped to the log end offset). It calls into
 * partition.c and storage, never into replica.c. Owning thread only.
 * Read next: storage/replica.c, storage/truncate.c, partition/replica.c (the role change).
 */
#include "partition/internal.h"
#include "partition/partition.h"

#include <errno.h>

static bool following(const struct gr_partition *part)
{
    return gr_partition_role(part) == GR_PARTITION_FOLLOWER;
}

/* The log or the high watermark moved: the visible offset is recomputed (storage told of it) and the data
   waiters it satisfies are done. After an append with visible_is_durable, a group commit is asked for. */
static void follower_moved(struct gr_partition *part, bool appended)
{
    if (appended && gr_partitions_visible_is_durable(gr_partition_partitions(part)))
        gr_log_flush_async(gr_partition_log(part));
    gr_partition_flushed(part);
}

int gr_partition_append_as_follower(struct gr_partition *part, const uint8_t *records, size_t len,
                                    int32_t leader_epoch, struct gr_append_result *res)
{
    if (!following(part)) return -EPERM;
    if (leader_epoch != gr_partition_leader_epoch(part)) return -ESTALE;
    int rc = gr_log_append_replica(gr_partition_log(part), records, len, res);
    if (res->last_offset >= 0) follower_moved(part, true);
    return rc;
}

int64_t gr_partition_set_follower_high_watermark(struct gr_partition *part, int64_t leader_high_watermark)
{
    if (!following(part)) return -EPERM;
    struct gr_partition_hw *h = gr_partition_hw(part);
    int64_t end = gr_log_end_offset(gr_partition_log(part));
    int64_t hw = leader_high_watermark < end ? leader_high_watermark : end;
    if (hw > h->hw) h->hw = hw;
    follower_moved(part, false);
    return gr_partition_visible_offset(part);
}

/* After a truncation: the high watermark does not stay above the new log end offset, nor below the start. */
static void after_truncation(struct gr_partition *part)
{
    struct gr_partition_hw *h = gr_partition_hw(part);
    struct gr_log *log = gr_partition_log(part);
    if (h->hw > gr_log_end_offset(log)) h->hw = gr_log_end_offset(log);
    if (h->hw < gr_log_start_offset(log)) h->hw = gr_log_start_offset(log);
    follower_moved(part, false);
}

int gr_partition_truncate_to(struct gr_partition *part, int64_t offset)
{
    if (!following(part)) return -EPERM;
    int rc = gr_log_truncate_to(gr_partition_log(part), offset);
    if (rc == 0) after_truncation(part);
    return rc;
}

int gr_partition_truncate_fully_and_start_at(struct gr_partition *part, int64_t offset)
{
    if (!following(part)) return -EPERM;
    int rc = gr_log_truncate_fully_and_start_at(gr_partition_log(part), offset);
    if (rc == 0) {
        gr_partition_hw(part)->hw = offset; /* the log restarts there */
        follower_moved(part, false);
    }
    return rc;
}

int gr_partition_raise_log_start_offset(struct gr_partition *part, int64_t leader_log_start_offset)
{
    if (!following(part)) return -EPERM;
    int rc = gr_log_raise_start_offset(gr_partition_log(part), leader_log_start_offset);
    if (rc == 1) after_truncation(part); /* the high watermark is at least the new log start offset */
    return rc;
}
