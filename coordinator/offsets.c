/*
 * offsets.c: committed offsets (Kafka's OffsetMetadataManager): OffsetCommit validation and writes,
 * OffsetFetch lookups, OffsetDelete, the periodic expiration of offsets (offsets.retention.minutes) with
 * the deletion of empty groups that have none left, their replay at start, and per-partition snapshots for
 * the rewrite of __consumer_offsets (coordinator/offsets_log.c).
 *
 * Storage: per group, an array of topics, each with its partitions sorted ascending (binary search).
 * A commit is applied to memory only after its records were appended; the OffsetCommit handler then waits
 * for the append to be durable before answering.
 * Read next: coordinator/offsets_log.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "coordinator/internal.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        GR_ERROR("coordinator: out of memory (%zu bytes)", n);
        abort();
    }
    return q;
}

static bool name_eq(const char *a, struct gr_str b)
{
    return b.len >= 0 && (size_t)b.len == strlen(a) && memcmp(a, b.ptr, (size_t)b.len) == 0;
}

void gr_offsets_free(struct gr_group *grp)
{
    for (int32_t t = 0; t < grp->topic_count; t++) {
        for (int32_t i = 0; i < grp->topics[t].count; i++) {
            free(grp->topics[t].parts[i].metadata);
            free(grp->topics[t].parts[i].window);
        }
        free(grp->topics[t].parts);
        free(grp->topics[t].name);
    }
    free(grp->topics);
    grp->topics = NULL;
    grp->topic_count = grp->topic_cap = 0;
    gr_txn_offsets_free(grp);
}

int32_t gr_offsets_count(const struct gr_group *grp)
{
    int32_t n = 0;
    for (int32_t t = 0; t < grp->topic_count; t++)
        n += grp->topics[t].count;
    return n;
}

static struct gr_offset_topic *topic_find(const struct gr_group *grp, struct gr_str name)
{
    for (int32_t t = 0; t < grp->topic_count; t++)
        if (name_eq(grp->topics[t].name, name)) return &grp->topics[t];
    return NULL;
}

/* Index of `partition` in the sorted array, or -(insertion point) - 1. */
static int32_t part_search(const struct gr_offset_topic *ot, int32_t partition)
{
    int32_t lo = 0, hi = ot->count - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (ot->parts[mid].partition == partition) return mid;
        if (ot->parts[mid].partition < partition)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

const struct gr_offset_entry *gr_offsets_find(const struct gr_group *grp, struct gr_str topic,
                                              int32_t partition)
{
    const struct gr_offset_topic *ot = topic_find(grp, topic);
    if (!ot) return NULL;
    int32_t i = part_search(ot, partition);
    return i >= 0 ? &ot->parts[i] : NULL;
}

/* Offsets.put */
void gr_offsets_put(struct gr_group *grp, struct gr_str topic, int32_t partition,
                    const struct gr_offset_commit_value *v, int64_t record_offset)
{
    struct gr_offset_topic *ot = topic_find(grp, topic);
    if (!ot) {
        if (grp->topic_count == grp->topic_cap) {
            grp->topic_cap = grp->topic_cap ? 2 * grp->topic_cap : 4;
            grp->topics = xrealloc(grp->topics, (size_t)grp->topic_cap * sizeof *grp->topics);
        }
        ot = &grp->topics[grp->topic_count++];
        memset(ot, 0, sizeof *ot);
        ot->name = gr_coord_strndup(topic.ptr, topic.len);
    }
    int32_t i = part_search(ot, partition);
    if (i < 0) {
        i = -i - 1;
        if (ot->count == ot->cap) {
            ot->cap = ot->cap ? 2 * ot->cap : 8;
            ot->parts = xrealloc(ot->parts, (size_t)ot->cap * sizeof *ot->parts);
        }
        memmove(&ot->parts[i + 1], &ot->parts[i], (size_t)(ot->count - i) * sizeof *ot->parts);
        ot->count++;
        ot->parts[i].metadata = NULL;
        ot->parts[i].window = NULL;
    }
    struct gr_offset_entry *e = &ot->parts[i];
    free(e->metadata);
    e->partition = partition;
    e->offset = v->offset;
    e->leader_epoch = v->leader_epoch;
    e->metadata =
        gr_coord_strndup(v->metadata.ptr ? v->metadata.ptr : "", v->metadata.len > 0 ? v->metadata.len : 0);
    e->commit_timestamp_ms = v->commit_timestamp_ms;
    e->expire_timestamp_ms = v->expire_timestamp_ms;
    e->record_offset = record_offset;
}

/* Offsets.remove */
bool gr_offsets_remove(struct gr_group *grp, struct gr_str topic, int32_t partition)
{
    struct gr_offset_topic *ot = topic_find(grp, topic);
    if (!ot) return false;
    int32_t i = part_search(ot, partition);
    if (i < 0) return false;
    free(ot->parts[i].metadata);
    free(ot->parts[i].window);
    memmove(&ot->parts[i], &ot->parts[i + 1], (size_t)(ot->count - i - 1) * sizeof *ot->parts);
    ot->count--;
    if (ot->count == 0) {
        free(ot->parts);
        free(ot->name);
        *ot = grp->topics[--grp->topic_count];
    }
    return true;
}

/* ---- OffsetCommit ---- */

/* ClassicGroup.validateOffsetCommit (non-transactional) */
static int16_t validate_commit(struct gr_group *grp, const struct gr_commit_params *p)
{
    if (grp->state == GR_GROUP_DEAD) return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    if (p->generation_id < 0 && grp->state == GR_GROUP_EMPTY)
        return GR_ERR_NONE; /* admin or simple consumer */
    if (p->generation_id >= 0 || p->member_id.len > 0 || p->group_instance_id.len >= 0) {
        if (p->group_instance_id.len >= 0) {
            const struct gr_member *s = NULL;
            for (int32_t i = 0; i < grp->member_count; i++)
                if (grp->members[i]->group_instance_id &&
                    name_eq(grp->members[i]->group_instance_id, p->group_instance_id))
                    s = grp->members[i];
            if (!s) return GR_ERR_UNKNOWN_MEMBER_ID;
            if (!name_eq(s->member_id, p->member_id)) return GR_ERR_FENCED_INSTANCE_ID;
        }
        if (p->member_id.len < 0 || !gr_group_member_find(grp, p->member_id.ptr, p->member_id.len))
            return GR_ERR_UNKNOWN_MEMBER_ID;
        if (p->generation_id != grp->generation_id) return GR_ERR_ILLEGAL_GENERATION;
    } else if (grp->state != GR_GROUP_EMPTY) {
        return GR_ERR_UNKNOWN_MEMBER_ID; /* no member id and no generation: only for an empty group */
    }
    if (grp->state == GR_GROUP_COMPLETING_REBALANCE) return GR_ERR_REBALANCE_IN_PROGRESS;
    return GR_ERR_NONE;
}

static void commit_set_all(const struct gr_commit_params *p, int16_t err)
{
    for (int32_t t = 0; t < p->topic_count; t++)
        for (int32_t i = 0; i < p->topics[t].count; i++)
            p->topics[t].partitions[i].error_code = err;
}

/* True when the `k` commit records, as the one batch the offsets log writes them in (records at `now_ms`,
   uncompressed), exceed max.message.bytes of __consumer_offsets. No memory: false (the append decides). */
bool gr_offsets_too_large(const struct gr_coordinator *c, const struct gr_coord_record *recs, int32_t k,
                          int64_t now_ms)
{
    struct gr_record_in *in = calloc((size_t)k, sizeof *in);
    if (!in) return false;
    for (int32_t i = 0; i < k; i++)
        in[i] = (struct gr_record_in){
            .timestamp = now_ms,
            .key = {recs[i].key, (int32_t)recs[i].key_len},
            .value =
                recs[i].value ? (struct gr_bytes){recs[i].value, (int32_t)recs[i].value_len} : GR_BYTES_NULL};
    uint64_t bytes = gr_batch_build_bytes(in, k);
    free(in);
    return bytes > (uint64_t)c->cfg.offsets_max_message_bytes;
}

void gr_coord_commit(struct gr_coordinator *c, const struct gr_commit_params *p, int32_t *wait_partition,
                     int64_t *wait_end_offset)
{
    *wait_end_offset = -1;
    *wait_partition = -1;
    int16_t own = gr_coord_check(c, p->group_id);
    if (own) {
        commit_set_all(p, own);
        return;
    }
    struct gr_group *grp = gr_coord_group_find(c, p->group_id);
    bool created = false;
    if (!grp) {
        if (p->generation_id >= 0) {
            /* v9+ GROUP_ID_NOT_FOUND; older versions ILLEGAL_GENERATION (backward compatibility) */
            commit_set_all(p, p->api_version >= 9 ? GR_ERR_GROUP_ID_NOT_FOUND : GR_ERR_ILLEGAL_GENERATION);
            return;
        }
        GR_INFO("creating simple consumer group %.*s via a manual offset commit", (int)p->group_id.len,
                p->group_id.ptr);
        grp = gr_coord_group_create(c, p->group_id);
        created = true;
    }
    int16_t err = validate_commit(grp, p);
    if (err) {
        commit_set_all(p, err);
        return;
    }
    if (grp->state == GR_GROUP_STABLE || grp->state == GR_GROUP_PREPARING_REBALANCE)
        gr_coord_touch_member(c, grp, p->member_id);

    int64_t now = gr_coord_wall(c);
    int64_t expire = p->retention_time_ms == -1 ? -1 : now + p->retention_time_ms;
    int32_t n = 0;
    for (int32_t t = 0; t < p->topic_count; t++)
        n += p->topics[t].count;
    struct gr_coord_record *recs = calloc((size_t)n + 1, sizeof *recs);
    struct gr_offset_commit_value *vals = calloc((size_t)n + 1, sizeof *vals);
    if (!recs || !vals) {
        free(recs);
        free(vals);
        commit_set_all(p, GR_ERR_UNKNOWN_SERVER_ERROR);
        return;
    }
    int32_t k = 0;
    for (int32_t t = 0; t < p->topic_count; t++) {
        const struct gr_commit_topic *ct = &p->topics[t];
        char *topic = gr_coord_strndup(ct->name.ptr, ct->name.len > 0 ? ct->name.len : 0);
        for (int32_t i = 0; i < ct->count; i++) {
            struct gr_commit_partition *cp = &ct->partitions[i];
            if (cp->metadata.len >= 0 &&
                gr_java_string_length(cp->metadata) > c->cfg.offset_metadata_max_bytes) {
                cp->error_code = GR_ERR_OFFSET_METADATA_TOO_LARGE;
                continue;
            }
            vals[k] = (struct gr_offset_commit_value){cp->offset, cp->leader_epoch,
                                                      cp->metadata.len >= 0 ? cp->metadata : gr_str_c(""),
                                                      now, expire};
            if (gr_offset_commit_record(&recs[k], grp->group_id, topic, cp->partition, &vals[k])) {
                cp->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
                continue;
            }
            cp->error_code = GR_ERR_NONE;
            k++;
        }
        free(topic);
    }
    int rc = 0;
    int64_t end = -1;
    if (k && gr_offsets_too_large(c, recs, k, now)) {
        /* Kafka's rule (GroupMetadataManager.storeOffsets): the commit's records are one batch; over the
           offsets topic's max.message.bytes every partition written gets INVALID_COMMIT_OFFSET_SIZE,
           those refused for their metadata keep OFFSET_METADATA_TOO_LARGE. */
        for (int32_t t = 0; t < p->topic_count; t++)
            for (int32_t i = 0; i < p->topics[t].count; i++)
                if (p->topics[t].partitions[i].error_code == GR_ERR_NONE)
                    p->topics[t].partitions[i].error_code = GR_ERR_INVALID_COMMIT_OFFSET_SIZE;
        gr_coord_records_free(recs, k);
        k = 0;
    }
    if (k) rc = c->hooks.append(c->hooks.ctx, grp->partition, recs, k, &end);
    if (rc) {
        GR_WARN_RATELIMITED("group %s: offset commit append failed: %s", grp->group_id, strerror(-rc));
        for (int32_t t = 0; t < p->topic_count; t++)
            for (int32_t i = 0; i < p->topics[t].count; i++)
                if (p->topics[t].partitions[i].error_code == GR_ERR_NONE)
                    p->topics[t].partitions[i].error_code = gr_coord_append_error(rc);
    } else if (k) {
        /* apply in request order (a later duplicate partition wins, as in Kafka's replay) */
        int32_t j = 0; /* record j sits at offset end - k + j (one append, consecutive offsets) */
        for (int32_t t = 0; t < p->topic_count; t++)
            for (int32_t i = 0; i < p->topics[t].count; i++)
                if (p->topics[t].partitions[i].error_code == GR_ERR_NONE) {
                    gr_offsets_put(grp, p->topics[t].name, p->topics[t].partitions[i].partition, &vals[j],
                                   end - k + j);
                    gr_coord_status_note(c, grp, p->topics[t].name, p->topics[t].partitions[i].partition);
                    j++;
                }
        *wait_partition = grp->partition;
        *wait_end_offset = end;
    }
    gr_coord_records_free(recs, k);
    free(recs);
    free(vals);
    if (created && gr_offsets_count(grp) == 0) gr_coord_group_remove(c, grp); /* nothing was written */
}

/* ---- OffsetFetch ---- */

bool gr_coord_offset_get(struct gr_coordinator *c, struct gr_str group_id, struct gr_str topic,
                         int32_t partition, int64_t *offset, int32_t *leader_epoch, struct gr_str *metadata)
{
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp || grp->state == GR_GROUP_DEAD || !gr_coord_partition_owned(c, grp->partition)) return false;
    const struct gr_offset_entry *e = gr_offsets_find(grp, topic, partition);
    if (!e) return false;
    *offset = e->offset;
    *leader_epoch = e->leader_epoch;
    *metadata = gr_str_c(e->metadata);
    return true;
}

void gr_coord_offsets_foreach(struct gr_coordinator *c, struct gr_str group_id,
                              void (*fn)(void *ctx, const char *topic, int32_t partition, int64_t offset,
                                         int32_t leader_epoch, struct gr_str metadata),
                              void *ctx)
{
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp || grp->state == GR_GROUP_DEAD || !gr_coord_partition_owned(c, grp->partition)) return;
    for (int32_t t = 0; t < grp->topic_count; t++) {
        const struct gr_offset_topic *ot = &grp->topics[t];
        for (int32_t i = 0; i < ot->count; i++)
            fn(ctx, ot->name, ot->parts[i].partition, ot->parts[i].offset, ot->parts[i].leader_epoch,
               gr_str_c(ot->parts[i].metadata));
    }
}

/* ---- OffsetDelete ---- */

int16_t gr_coord_offset_delete(struct gr_coordinator *c, struct gr_str group_id,
                               struct gr_offset_delete_topic *topics, int32_t count)
{
    if (group_id.len <= 0) return GR_ERR_INVALID_GROUP_ID;
    int16_t own = gr_coord_check(c, group_id);
    if (own) return own;
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp || grp->state == GR_GROUP_DEAD) return GR_ERR_GROUP_ID_NOT_FOUND;
    /* ClassicGroup.validateOffsetDelete */
    if (grp->state != GR_GROUP_EMPTY && !gr_group_uses_consumer_protocol(grp)) return GR_ERR_NON_EMPTY_GROUP;
    int32_t n = 0;
    for (int32_t t = 0; t < count; t++)
        n += topics[t].count;
    struct gr_coord_record *recs = calloc((size_t)n + 1, sizeof *recs);
    if (!recs) return GR_ERR_UNKNOWN_SERVER_ERROR;
    int32_t k = 0;
    for (int32_t t = 0; t < count; t++) {
        struct gr_offset_delete_topic *dt = &topics[t];
        bool subscribed = gr_group_subscribed_to(grp, dt->name.ptr, dt->name.len);
        char *topic = gr_coord_strndup(dt->name.ptr, dt->name.len > 0 ? dt->name.len : 0);
        for (int32_t i = 0; i < dt->count; i++) {
            dt->partitions[i].error_code = subscribed ? GR_ERR_GROUP_SUBSCRIBED_TO_TOPIC : GR_ERR_NONE;
            /* a tombstone when committed or pending in a transaction (OffsetMetadataManager.deleteOffsets) */
            if (!subscribed &&
                (gr_offsets_find(grp, dt->name, dt->partitions[i].partition) ||
                 gr_txn_offsets_has(grp, dt->name, dt->partitions[i].partition)) &&
                gr_offset_commit_record(&recs[k], grp->group_id, topic, dt->partitions[i].partition, NULL) ==
                    0)
                k++;
        }
        free(topic);
    }
    int rc = 0;
    int64_t end;
    if (k) rc = c->hooks.append(c->hooks.ctx, grp->partition, recs, k, &end);
    gr_coord_records_free(recs, k);
    free(recs);
    if (rc) return gr_coord_append_error(rc);
    for (int32_t t = 0; t < count; t++)
        for (int32_t i = 0; i < topics[t].count; i++)
            if (topics[t].partitions[i].error_code == GR_ERR_NONE) {
                gr_offsets_remove(grp, topics[t].name, topics[t].partitions[i].partition);
                gr_txn_offsets_drop(grp, topics[t].name, topics[t].partitions[i].partition);
            }
    return GR_ERR_NONE;
}

/* ---- a deleted topic (GroupCoordinatorService.onPartitionsDeleted) ---- */

int32_t gr_coord_topic_deleted(struct gr_coordinator *c, const char *topic)
{
    struct gr_str name = gr_str_c(topic);
    int32_t removed = 0;
    for (int32_t g = 0; g < gr_coord_group_count(c); g++) {
        struct gr_group *grp = gr_coord_group_at(c, g);
        const struct gr_offset_topic *ot = topic_find(grp, name);
        if (grp->state == GR_GROUP_DEAD) continue;
        /* the committed partitions of the topic and those only pending in a transaction
           (OffsetMetadataManager.onTopicsDeleted cleans both stores) */
        int32_t n = ot ? ot->count : 0, k = 0;
        for (int32_t i = 0; i < grp->txn_count; i++)
            if (name_eq(grp->txn[i].topic, name)) n++;
        if (n == 0) continue;
        struct gr_coord_record *recs = calloc((size_t)n + 1, sizeof *recs);
        int32_t *parts = calloc((size_t)n + 1, sizeof *parts);
        if (!recs || !parts) {
            free(recs);
            free(parts);
            GR_ERROR("coordinator: out of memory removing the offsets of deleted topic %s", topic);
            return removed;
        }
        int32_t np = 0;
        for (int32_t i = 0; ot && i < ot->count; i++)
            parts[np++] = ot->parts[i].partition;
        for (int32_t i = 0; i < grp->txn_count; i++) {
            if (!name_eq(grp->txn[i].topic, name)) continue;
            bool seen = false;
            for (int32_t j = 0; j < np && !seen; j++)
                seen = parts[j] == grp->txn[i].e.partition;
            if (!seen) parts[np++] = grp->txn[i].e.partition;
        }
        for (int32_t i = 0; i < np; i++)
            if (gr_offset_commit_record(&recs[k], grp->group_id, topic, parts[i], NULL) == 0) k++;
        int64_t end;
        int rc = k == np ? c->hooks.append(c->hooks.ctx, grp->partition, recs, k, &end) : -ENOMEM;
        gr_coord_records_free(recs, k);
        free(recs);
        if (rc) { /* memory stays as the log says: a later deletion of the topic's name retries nothing */
            GR_ERROR("coordinator: group %s: removing the offsets of deleted topic %s failed (%d)",
                     grp->group_id, topic, rc);
        } else {
            for (int32_t i = 0; i < np; i++) {
                gr_offsets_remove(grp, name, parts[i]);
                gr_txn_offsets_drop(grp, name, parts[i]);
            }
            removed += np;
        }
        free(parts);
    }
    return removed;
}

/* ---- expiration (GroupCoordinatorShard.cleanupGroupMetadata) ---- */

/* ClassicGroup.offsetExpirationCondition: returns false when no offset of the group may expire now; else
 * sets *use_state_ts (base timestamp = when the group became empty, else the commit time). */
static bool expiration_condition(const struct gr_group *grp, bool *use_state_ts)
{
    *use_state_ts = false;
    if (!grp->protocol_type) return true; /* simple group: retention counts from the last commit */
    if (grp->state == GR_GROUP_EMPTY) {
        *use_state_ts = grp->state_timestamp_ms >= 0;
        return true;
    }
    return gr_group_uses_consumer_protocol(grp) && grp->subscribed_known && grp->state == GR_GROUP_STABLE;
}

/* cleanupExpiredOffsets + maybeDeleteGroup for one group; returns true if the group was removed. */
static bool expire_group(struct gr_coordinator *c, struct gr_group *grp, int64_t now)
{
    bool use_state_ts;
    bool all_expired;
    int32_t n = gr_offsets_count(grp);
    struct gr_coord_record *recs = calloc((size_t)n + 2, sizeof *recs);
    struct {
        const char *topic;
        int32_t partition;
    } *gone = calloc((size_t)n + 1, sizeof *gone);
    if (!recs || !gone) {
        free(recs);
        free(gone);
        return false;
    }
    int32_t k = 0;
    if (n == 0) {
        all_expired = grp->txn_count == 0; /* cleanupExpiredOffsets: no offsets, no open transaction */
    } else if (!expiration_condition(grp, &use_state_ts)) {
        all_expired = false;
    } else {
        all_expired = true;
        for (int32_t t = 0; t < grp->topic_count; t++) {
            const struct gr_offset_topic *ot = &grp->topics[t];
            if (gr_group_subscribed_to(grp, ot->name, (int32_t)strlen(ot->name))) {
                all_expired = false;
                continue;
            }
            for (int32_t i = 0; i < ot->count; i++) {
                const struct gr_offset_entry *e = &ot->parts[i];
                bool expired;
                if (e->expire_timestamp_ms >= 0) {
                    expired = now >= e->expire_timestamp_ms;
                } else {
                    int64_t base = use_state_ts ? grp->state_timestamp_ms : e->commit_timestamp_ms;
                    expired = gr_ms_sub_sat(now, base) >= c->cfg.offsets_retention_ms; /* base: stored data */
                }
                /* not while a transactional commit of the partition is pending (cleanupExpiredOffsets) */
                if (expired && !gr_txn_offsets_has(grp, gr_str_c(ot->name), e->partition) &&
                    gr_offset_commit_record(&recs[k], grp->group_id, ot->name, e->partition, NULL) == 0) {
                    gone[k].topic = ot->name;
                    gone[k].partition = e->partition;
                    k++;
                } else {
                    all_expired = false;
                }
            }
        }
    }
    int32_t offsets_expired = k;
    /* a group with open transactions is kept (cleanupExpiredOffsets: !openTransactions.contains(groupId)) */
    bool delete_group = all_expired && grp->txn_count == 0 && grp->state == GR_GROUP_EMPTY;
    if (delete_group && gr_group_metadata_record(&recs[k], grp->group_id, NULL) == 0)
        k++;
    else
        delete_group = false;
    bool removed = false;
    if (k) {
        int64_t end;
        int rc = c->hooks.append(c->hooks.ctx, grp->partition, recs, k, &end);
        if (rc) {
            GR_WARN_RATELIMITED("group %s: writing expiration tombstones failed: %s", grp->group_id,
                                strerror(-rc));
        } else {
            if (offsets_expired)
                GR_INFO("group %s: %d committed offsets expired", grp->group_id, offsets_expired);
            for (int32_t i = offsets_expired - 1; i >= 0; i--)
                gr_offsets_remove(grp, gr_str_c(gone[i].topic), gone[i].partition);
            if (delete_group) {
                GR_INFO("group %s: empty with no offsets left, deleted", grp->group_id);
                gr_coord_group_remove(c, grp);
                removed = true;
            }
        }
    }
    gr_coord_records_free(recs, k);
    free(recs);
    free(gone);
    return removed;
}

void gr_offsets_expire(struct gr_coordinator *c)
{
    int64_t now = gr_coord_wall(c);
    for (int32_t g = 0; g < c->group_count;) {
        struct gr_group *grp = c->groups[g];
        if (!gr_coord_partition_owned(c, grp->partition) || !expire_group(c, grp, now))
            g++; /* a removed group's slot now holds another group */
    }
}

/* ---- replay (OffsetMetadataManager.replay) ---- */

int gr_offsets_replay(struct gr_coordinator *c, const struct gr_offset_commit_key *key, const uint8_t *value,
                      size_t value_len, int64_t record_offset, int64_t producer_id)
{
    struct gr_group *grp = gr_coord_group_find(c, key->group);
    if (!value) { /* the committed offset and every producer's pending one go */
        if (grp) {
            gr_offsets_remove(grp, key->topic, key->partition);
            gr_txn_offsets_drop(grp, key->topic, key->partition);
        }
        return 0;
    }
    struct gr_offset_commit_value v;
    if (gr_offset_commit_value_decode(value, value_len, &v) < 0) return -1;
    if (!grp) grp = gr_coord_group_create(c, key->group); /* a simple group */
    if (producer_id < 0)
        gr_offsets_put(grp, key->topic, key->partition, &v, record_offset);
    else /* part of a transaction: pending until its marker */
        gr_txn_offsets_put(grp, producer_id, key->topic, key->partition, &v, record_offset);
    return 0;
}

/* ---- snapshots ---- */

int64_t gr_coord_live_records(const struct gr_coordinator *c, int32_t partition)
{
    int64_t n = 0;
    for (int32_t g = 0; g < c->group_count; g++) {
        const struct gr_group *grp = c->groups[g];
        if (grp->partition != partition) continue;
        n += gr_offsets_count(grp) + (grp->md_value ? 1 : 0);
    }
    return n;
}

int gr_coord_snapshot_partition(struct gr_coordinator *c, int32_t partition,
                                int (*emit)(void *ctx, const struct gr_coord_record *rec), void *ctx)
{
    for (int32_t g = 0; g < c->group_count; g++) {
        struct gr_group *grp = c->groups[g];
        if (grp->partition != partition) continue;
        int rc;
        if (grp->md_value) {
            struct gr_coord_record rec;
            if (gr_group_metadata_record(&rec, grp->group_id, NULL)) return -ENOMEM;
            rec.value = grp->md_value; /* borrowed */
            rec.value_len = grp->md_value_len;
            rc = emit(ctx, &rec);
            free(rec.key);
            if (rc) return rc;
        }
        for (int32_t t = 0; t < grp->topic_count; t++) {
            const struct gr_offset_topic *ot = &grp->topics[t];
            for (int32_t i = 0; i < ot->count; i++) {
                const struct gr_offset_entry *e = &ot->parts[i];
                struct gr_offset_commit_value v = {e->offset, e->leader_epoch, gr_str_c(e->metadata),
                                                   e->commit_timestamp_ms, e->expire_timestamp_ms};
                struct gr_coord_record rec;
                if (gr_offset_commit_record(&rec, grp->group_id, ot->name, e->partition, &v)) return -ENOMEM;
                rc = emit(ctx, &rec);
                gr_coord_records_free(&rec, 1);
                if (rc) return rc;
            }
        }
    }
    return 0;
}
