/*
 * read.c: read planning (partition.h, "Read planning"): Fetch's per-partition read, ListOffsets' lookups
 * and OffsetForLeaderEpoch's, from plain parameters to plain results (offsets, epochs, a file range, a
 * Kafka error code). Every read is bounded by the visible offset (gr_partition_visible_offset), except a
 * follower's fetch, bounded by the log end offset (FetchIsolation.LOG_END), and goes through the cold-read
 * engine (cold.c), so nothing here waits for the disk while rounds remain. A follower's fetch is checked
 * against the leader's replica set before its read and recorded after it (replica.c,
 * gr_partition_update_follower_fetch_state), as Kafka's Partition.fetchRecords does.
 * Read next: partition/cold.c, partition/replica.c, server/handlers/fetch.c and list_offsets.c (the
 * translation to fields).
 */
#include <errno.h>

#include "partition/internal.h"
#include "partition/partition.h"
#include "protocol/errors.h"

int gr_partition_check_epoch(const struct gr_partition *part, int32_t current_leader_epoch)
{
    if (current_leader_epoch < 0) return GR_ERR_NONE;
    int32_t epoch = gr_partition_leader_epoch(part);
    if (current_leader_epoch < epoch) return GR_ERR_FENCED_LEADER_EPOCH;
    if (current_leader_epoch > epoch) return GR_ERR_UNKNOWN_LEADER_EPOCH;
    return GR_ERR_NONE;
}

void gr_fetch_budget_init(struct gr_fetch_budget *bud, int64_t max_bytes, int64_t cap_bytes)
{
    bud->left = max_bytes <= 0 || max_bytes > cap_bytes ? cap_bytes : max_bytes;
    bud->have_data = false;
}

/* The last_fetched_epoch check of a Fetch (KIP-320; Kafka's Partition.readRecords): sets the diverging
   epoch and end offset when the fetcher's log went past where this one's epoch ended. Returns a Kafka error
   code. */
static int diverging(struct gr_partition *part, struct gr_fetch_read *rd)
{
    if (rd->last_fetched_epoch < 0) return GR_ERR_NONE;
    int32_t epoch;
    int64_t end;
    int err =
        gr_partition_epoch_end_offset(part, rd->current_leader_epoch, rd->last_fetched_epoch, &epoch, &end);
    if (err) return err;
    if (epoch < 0 || end < 0) return GR_ERR_OFFSET_OUT_OF_RANGE; /* the epoch's end is unknown here */
    if (rd->fetch_offset < gr_log_start_offset(gr_partition_log(part))) return GR_ERR_OFFSET_OUT_OF_RANGE;
    if (epoch < rd->last_fetched_epoch || end < rd->fetch_offset) {
        rd->diverging_epoch = epoch;
        rd->diverging_end_offset = end;
    }
    return GR_ERR_NONE;
}

/* Partition.fetchRecords' checks of a follower's fetch before its read: localLogWithEpochOrThrow with
   fetchOnlyLeader (only a leader serves followers) and followerReplicaOrThrow (only its followers). A Kafka
   error code. */
static int follower_check(const struct gr_partition *part, const struct gr_fetch_read *rd)
{
    if (gr_partition_role(part) != GR_PARTITION_LEADER) return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    if (gr_partition_replica(part, rd->replica_id)) return GR_ERR_NONE;
    /* Kafka: with a leader epoch the (replica, epoch) pair is not known yet (a reassignment): the follower
       retries; without one it cannot tell whose state is stale */
    return rd->current_leader_epoch >= 0 ? GR_ERR_UNKNOWN_LEADER_EPOCH : GR_ERR_NOT_LEADER_OR_FOLLOWER;
}

/* Partition.updateFollowerFetchState after a follower's read (Partition.fetchRecords with updateFetchState),
   at the partition's clock (ReplicaManager.readFromLog's fetchTimeMs). A Kafka error code. */
static int record_follower(struct gr_partition *part, const struct gr_fetch_read *rd)
{
    struct gr_follower_fetch ff = {.broker_id = rd->replica_id,
                                   .broker_epoch = rd->replica_epoch,
                                   .fetch_offset = rd->fetch_offset,
                                   .log_start_offset = rd->replica_log_start_offset,
                                   .now_ms = gr_partition_now_ms(part)};
    switch (gr_partition_update_follower_fetch_state(part, &ff)) {
    case 0:
        return GR_ERR_NONE;
    case -ERANGE:
        return GR_ERR_OFFSET_OUT_OF_RANGE;
    case -ENOENT: /* checked before the read: not reached */
        return follower_check(part, rd);
    default: /* -ESTALE: a fetch sent before the follower's restart; -EPERM: not the leader */
        return GR_ERR_NOT_LEADER_OR_FOLLOWER;
    }
}

/* The checks before the read (epoch, follower, zstd, offline, KIP-320 divergence). A Kafka error code. */
static int fetch_checks(struct gr_partition *part, struct gr_fetch_read *rd)
{
    struct gr_log *log = gr_partition_log(part);
    int err = gr_partition_check_epoch(part, rd->current_leader_epoch);
    if (!err && rd->replica_id >= 0) err = follower_check(part, rd);
    if (!err && rd->version < 10 &&
        gr_topic_policy(gr_log_topic(log))->compression_type == GR_COMPRESSION_ZSTD)
        err = GR_ERR_UNSUPPORTED_COMPRESSION_TYPE; /* Fetch before v10 cannot carry zstd (KIP-110) */
    if (!err && gr_log_offline(log)) err = GR_ERR_KAFKA_STORAGE_ERROR;
    if (!err) err = diverging(part, rd);
    return err;
}

int gr_partition_fetch(struct gr_partition *part, struct gr_cold *c, struct gr_fetch_budget *bud,
                       struct gr_fetch_read *rd)
{
    struct gr_log *log = gr_partition_log(part);
    rd->slice = (struct gr_log_slice){.fd = -1, .first_batch_offset = -1};
    rd->diverging_epoch = -1;
    rd->diverging_end_offset = -1;
    rd->high_watermark = gr_partition_visible_offset(part);
    rd->last_stable_offset = gr_partition_last_stable_offset(part);
    rd->aborted_upper_bound = -1;
    rd->log_start_offset = gr_log_start_offset(log);
    int err = fetch_checks(part, rd);
    if (err || rd->diverging_epoch >= 0) return err;
    int64_t max = rd->partition_max_bytes;
    if (max > bud->left) max = bud->left;
    if (max < 0) max = 0;
    enum gr_fetch_isolation iso = gr_fetch_isolation_of(rd->replica_id);
    if (iso == GR_FETCH_HIGH_WATERMARK && rd->read_committed) iso = GR_FETCH_TXN_COMMITTED;
    int rc = gr_cold_read(c, log, rd->fetch_offset, max, gr_partition_fetch_bound(part, iso), !bud->have_data,
                          &rd->slice);
    if (rc && rc != -EAGAIN) return rc == -ERANGE ? GR_ERR_OFFSET_OUT_OF_RANGE : GR_ERR_KAFKA_STORAGE_ERROR;
    if (iso == GR_FETCH_LOG_END && rd->update_fetch_state && rd->fetch_offset >= rd->log_start_offset &&
        (err = record_follower(part, rd))) {
        gr_log_slice_release(&rd->slice); /* Kafka's error answer: no records */
        rd->slice = (struct gr_log_slice){.fd = -1, .first_batch_offset = -1};
        return err;
    }
    if (rc == -EAGAIN) return GR_PARTITION_COLD; /* pages to read in first */
    if (rd->slice.bytes > 0) {
        if (iso == GR_FETCH_TXN_COMMITTED)
            rd->aborted_upper_bound = gr_log_slice_upper_bound(log, &rd->slice);
        bud->have_data = true;
        bud->left -= rd->slice.bytes;
        if (bud->left < 0) bud->left = 0;
    }
    return GR_ERR_NONE;
}

/* The first version that knows special timestamp `ts` (< 0), or INT16_MAX for one no version knows: -1, -2
   always, -3 from v7 (KIP-734), -4 v8 (KIP-405), -5 v9 (KIP-1005), -6 v11 (KIP-1023). */
static int16_t special_timestamp_version_min(int64_t ts)
{
    static const int16_t min_version[] = {0, 0, 0, 7, 8, 9, 11}; /* index -ts: -1 .. -6 */
    return ts >= -6 ? min_version[-ts] : INT16_MAX;
}

/* A lookup by time (-3, ts >= 0) on a leader whose high watermark `visible` lags its epoch's start offset:
   searched in the whole log as Kafka's UnifiedLog.fetchOffsetByTimestamp, then ReplicaManager.fetchOffset's
   rule: none found, or found at or past the high watermark, is OFFSET_NOT_AVAILABLE. */
static int lagging_lookup(struct gr_cold *c, struct gr_log *log, int64_t ts, int64_t visible,
                          struct gr_offset_answer *out)
{
    int64_t end = gr_log_end_offset(log);
    int rc = ts == -3 ? gr_cold_max_timestamp(c, log, end, &out->offset, &out->timestamp, &out->leader_epoch)
                      : gr_cold_offset_for_time(c, log, ts, end, &out->offset, &out->timestamp,
                                                &out->leader_epoch);
    if (rc == 0 && out->offset < visible) return GR_ERR_NONE;
    *out = (struct gr_offset_answer){-1, -1, -1};
    if (rc == -EAGAIN) return GR_PARTITION_COLD;
    return rc == 0 || rc == -ENOENT ? GR_ERR_OFFSET_NOT_AVAILABLE : GR_ERR_NONE; /* a read error: none */
}

int gr_partition_list_offset(struct gr_partition *part, struct gr_cold *c, int16_t version,
                             int32_t current_leader_epoch, int64_t ts, struct gr_offset_answer *out)
{
    return gr_partition_list_offset_isolated(part, c, version, current_leader_epoch, ts, false, out);
}

int gr_partition_list_offset_isolated(struct gr_partition *part, struct gr_cold *c, int16_t version,
                                      int32_t current_leader_epoch, int64_t ts, bool read_committed,
                                      struct gr_offset_answer *out)
{
    struct gr_log *log = gr_partition_log(part);
    *out = (struct gr_offset_answer){-1, -1, -1};
    int err = gr_partition_check_epoch(part, current_leader_epoch);
    if (err) return err;
    if (gr_log_offline(log)) return GR_ERR_KAFKA_STORAGE_ERROR;
    if (ts < 0 && version < special_timestamp_version_min(ts)) return GR_ERR_UNSUPPORTED_VERSION;
    int64_t visible = gr_partition_visible_offset(part);
    /* Partition.fetchOffsetForTimestamp: a new leader's high watermark behind its epoch's start offset */
    bool lagging = gr_partition_leader_epoch_start_offset(part) > visible;
    int rc = 0;
    if (lagging && (ts == -3 || ts >= 0)) return lagging_lookup(c, log, ts, visible, out);
    if (read_committed) visible = gr_partition_last_stable_offset(part); /* lastFetchableOffset */
    switch (ts) {
    case -1:
        if (lagging) return GR_ERR_OFFSET_NOT_AVAILABLE;
        out->offset = visible;
        out->leader_epoch = gr_log_leader_epoch(log);
        return GR_ERR_NONE;
    case -2:
    case -4:
        out->offset = gr_log_start_offset(log);
        out->leader_epoch = gr_log_epoch_for_offset(log, out->offset);
        if (out->leader_epoch < 0) out->leader_epoch = gr_log_leader_epoch(log);
        return GR_ERR_NONE;
    case -3:
        rc = gr_cold_max_timestamp(c, log, visible, &out->offset, &out->timestamp, &out->leader_epoch);
        break;
    default:
        if (ts < 0) return GR_ERR_NONE; /* -5 and -6, tiered-storage lookups: nothing tiered */
        rc = gr_cold_offset_for_time(c, log, ts, visible, &out->offset, &out->timestamp, &out->leader_epoch);
        break;
    }
    if (rc) *out = (struct gr_offset_answer){-1, -1, -1}; /* none (-ENOENT), a read error, or cold */
    return rc == -EAGAIN ? GR_PARTITION_COLD : GR_ERR_NONE;
}

int gr_partition_epoch_end_offset(struct gr_partition *part, int32_t current_leader_epoch, int32_t epoch,
                                  int32_t *leader_epoch, int64_t *end_offset)
{
    struct gr_log *log = gr_partition_log(part);
    *leader_epoch = -1;
    *end_offset = -1;
    int err = gr_partition_check_epoch(part, current_leader_epoch);
    if (err) return err;
    if (gr_log_offline(log)) return GR_ERR_KAFKA_STORAGE_ERROR;
    int32_t current = gr_log_leader_epoch(log);
    if (epoch < 0 || epoch > current) return GR_ERR_NONE;
    if (epoch ==
        current) { /* the leader's current epoch ends at the log end offset, even with no batch yet */
        *leader_epoch = epoch;
        *end_offset = gr_log_end_offset(log);
        return GR_ERR_NONE;
    }
    int64_t end;
    int32_t found;
    int rc = gr_log_end_offset_for_epoch(log, epoch, &end, &found);
    if (rc == 0) {
        *leader_epoch = found;
        *end_offset = end;
    } else if (rc == -ENOENT) { /* below the first known epoch */
        *leader_epoch = epoch;
        *end_offset = gr_log_start_offset(log);
    }
    return GR_ERR_NONE;
}
