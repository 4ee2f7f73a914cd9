/*
 * txn_offsets.c: the group coordinator's side of exactly-once (KIP-98, KIP-447): TxnOffsetCommit, the
 * offsets it holds pending per producer id, and their completion by the transaction's marker on the
 * group's __consumer_offsets partition. Facts from Kafka 4.x's OffsetMetadataManager
 * (commitTransactionalOffset, validateTransactionalOffsetCommit, replay, replayEndTransactionMarker,
 * fetchOffsets, hasPendingTransactionalOffsets), ClassicGroup.validateOffsetCommit (isTransactional) and
 * GroupCoordinatorService.completeTransaction.
 *
 * Storage: each group keeps an unsorted array of pending entries, one per (producer id, topic, partition);
 * a later commit of the same producer replaces its entry. Kafka's openTransactions index (group, topic,
 * partition) -> producer ids is exactly "an entry exists" here, since a tombstone drops both and a marker
 * removes a producer's entries from both. A group's pending entries belong to its __consumer_offsets
 * partition, so a marker of partition P only ends the producer's entries in P's groups (another partition's
 * marker of the same producer belongs to the same or another transaction and arrives on its own).
 * Invariants: entries are applied to memory only after their records were appended (the transactional append
 * (gr_coord_set_append_txn)); a group with pending entries is never expired away; a group's entries are freed
 * with the group. Read next: coordinator/offsets.c (the committed store), coordinator/offsets_log.c (the
 * batches).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "coordinator/internal.h"
#include "protocol/errors.h"

static bool name_eq(const char *a, struct gr_str b)
{
    return b.len >= 0 && (size_t)b.len == strlen(a) && memcmp(a, b.ptr, (size_t)b.len) == 0;
}

static void entry_free(struct gr_txn_offset *x)
{
    free(x->topic);
    free(x->e.metadata);
}

void gr_txn_offsets_free(struct gr_group *grp)
{
    for (int32_t i = 0; i < grp->txn_count; i++)
        entry_free(&grp->txn[i]);
    free(grp->txn);
    grp->txn = NULL;
    grp->txn_count = grp->txn_cap = 0;
}

/* Removes entry i (order is not kept). */
static void entry_remove(struct gr_group *grp, int32_t i)
{
    entry_free(&grp->txn[i]);
    grp->txn[i] = grp->txn[--grp->txn_count];
}

void gr_txn_offsets_put(struct gr_group *grp, int64_t producer_id, struct gr_str topic, int32_t partition,
                        const struct gr_offset_commit_value *v, int64_t record_offset)
{
    struct gr_txn_offset *x = NULL;
    for (int32_t i = 0; i < grp->txn_count && !x; i++)
        if (grp->txn[i].producer_id == producer_id && grp->txn[i].e.partition == partition &&
            name_eq(grp->txn[i].topic, topic))
            x = &grp->txn[i];
    if (x) {
        entry_free(x);
    } else {
        if (grp->txn_count == grp->txn_cap) {
            int32_t cap = grp->txn_cap ? 2 * grp->txn_cap : 4;
            struct gr_txn_offset *n = realloc(grp->txn, (size_t)cap * sizeof *n);
            if (!n) {
                GR_ERROR("coordinator: out of memory holding a transactional offset");
                abort();
            }
            grp->txn = n;
            grp->txn_cap = cap;
        }
        x = &grp->txn[grp->txn_count++];
    }
    x->producer_id = producer_id;
    x->topic = gr_coord_strndup(topic.ptr, topic.len > 0 ? topic.len : 0);
    x->e = (struct gr_offset_entry){
        .partition = partition,
        .offset = v->offset,
        .leader_epoch = v->leader_epoch,
        .metadata = gr_coord_strndup(v->metadata.ptr ? v->metadata.ptr : "",
                                     v->metadata.len > 0 ? v->metadata.len : 0),
        .commit_timestamp_ms = v->commit_timestamp_ms,
        .expire_timestamp_ms = v->expire_timestamp_ms,
        .record_offset = record_offset,
    };
}

bool gr_txn_offsets_has(const struct gr_group *grp, struct gr_str topic, int32_t partition)
{
    for (int32_t i = 0; i < grp->txn_count; i++)
        if (grp->txn[i].e.partition == partition && name_eq(grp->txn[i].topic, topic)) return true;
    return false;
}

void gr_txn_offsets_drop(struct gr_group *grp, struct gr_str topic, int32_t partition)
{
    for (int32_t i = grp->txn_count - 1; i >= 0; i--)
        if (grp->txn[i].e.partition == partition && name_eq(grp->txn[i].topic, topic)) entry_remove(grp, i);
}

/* ---- TxnOffsetCommit ---- */

void gr_coord_set_append_txn(struct gr_coordinator *c, gr_coord_append_txn_fn fn)
{
    c->append_txn = fn;
}

static void set_all(const struct gr_txn_commit_params *p, int16_t err)
{
    for (int32_t t = 0; t < p->topic_count; t++)
        for (int32_t i = 0; i < p->topics[t].count; i++)
            p->topics[t].partitions[i].error_code = err;
}

/* ClassicGroup.validateOffsetCommit with isTransactional = true (validateMember's checks inlined). */
static int16_t validate_txn_commit(const struct gr_group *grp, const struct gr_txn_commit_params *p)
{
    if (grp->state == GR_GROUP_DEAD) return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    if (p->generation_id < 0 && grp->state == GR_GROUP_EMPTY) return GR_ERR_NONE;
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
    }
    /* no member id, no generation (TxnOffsetCommit v0-2): accepted in any state; no REBALANCE_IN_PROGRESS */
    return GR_ERR_NONE;
}

void gr_coord_txn_commit(struct gr_coordinator *c, const struct gr_txn_commit_params *p,
                         int32_t *wait_partition, int64_t *wait_end_offset)
{
    *wait_end_offset = -1;
    *wait_partition = -1;
    if (p->group_id.len <= 0) { /* GroupCoordinatorService.commitTransactionalOffsets */
        set_all(p, GR_ERR_INVALID_GROUP_ID);
        return;
    }
    int16_t own = gr_coord_check(c, p->group_id);
    if (own) {
        set_all(p, own);
        return;
    }
    struct gr_group *grp = gr_coord_group_find(c, p->group_id);
    bool created = false;
    if (!grp) {
        if (p->generation_id >=
            0) { /* validateTransactionalOffsetCommit: no version split, unlike OffsetCommit */
            set_all(p, GR_ERR_ILLEGAL_GENERATION);
            return;
        }
        grp = gr_coord_group_create(c, p->group_id);
        created = true;
    }
    int16_t err = validate_txn_commit(grp, p);
    if (err) {
        set_all(p, err);
        return;
    }
    int64_t now = gr_coord_wall(c);
    int32_t n = 0;
    for (int32_t t = 0; t < p->topic_count; t++)
        n += p->topics[t].count;
    struct gr_coord_record *recs = calloc((size_t)n + 1, sizeof *recs);
    struct gr_offset_commit_value *vals = calloc((size_t)n + 1, sizeof *vals);
    if (!recs || !vals) {
        free(recs);
        free(vals);
        set_all(p, GR_ERR_UNKNOWN_SERVER_ERROR);
        if (created) gr_coord_group_remove(c, grp);
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
            /* OffsetAndMetadata.fromRequest(partition, currentTimeMs): no expire timestamp */
            vals[k] = (struct gr_offset_commit_value){
                cp->offset, cp->leader_epoch, cp->metadata.len >= 0 ? cp->metadata : gr_str_c(""), now, -1};
            if (gr_offset_commit_record(&recs[k], grp->group_id, topic, cp->partition, &vals[k])) {
                cp->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
                continue;
            }
            cp->error_code = GR_ERR_NONE;
            k++;
        }
        free(topic);
    }
    if (k && gr_offsets_too_large(c, recs, k, now)) { /* as gr_coord_commit */
        for (int32_t t = 0; t < p->topic_count; t++)
            for (int32_t i = 0; i < p->topics[t].count; i++)
                if (p->topics[t].partitions[i].error_code == GR_ERR_NONE)
                    p->topics[t].partitions[i].error_code = GR_ERR_INVALID_COMMIT_OFFSET_SIZE;
        gr_coord_records_free(recs, k);
        k = 0;
    }
    int rc = 0;
    int64_t end = -1;
    if (k) {
        struct gr_coord_txn_write w = {GR_COORD_TXN_RECORDS, p->producer_id, p->producer_epoch, -1};
        rc = c->append_txn ? c->append_txn(c->hooks.ctx, grp->partition, &w, recs, k, &end) : -ENOTSUP;
    }
    if (rc) {
        GR_WARN_RATELIMITED("group %s: transactional offset commit of producer %lld failed: %s",
                            grp->group_id, (long long)p->producer_id, strerror(-rc));
        int16_t e = rc == -ENOTSUP ? GR_ERR_UNKNOWN_SERVER_ERROR : gr_coord_append_error(rc);
        for (int32_t t = 0; t < p->topic_count; t++)
            for (int32_t i = 0; i < p->topics[t].count; i++)
                if (p->topics[t].partitions[i].error_code == GR_ERR_NONE)
                    p->topics[t].partitions[i].error_code = e;
    } else if (k) {
        int32_t j = 0; /* record j sits at offset end - k + j; a later duplicate partition wins, as replay */
        for (int32_t t = 0; t < p->topic_count; t++)
            for (int32_t i = 0; i < p->topics[t].count; i++)
                if (p->topics[t].partitions[i].error_code == GR_ERR_NONE) {
                    gr_txn_offsets_put(grp, p->producer_id, p->topics[t].name,
                                       p->topics[t].partitions[i].partition, &vals[j], end - k + j);
                    j++;
                }
        *wait_partition = grp->partition;
        *wait_end_offset = end;
    }
    gr_coord_records_free(recs, k);
    free(recs);
    free(vals);
    if (created && gr_offsets_count(grp) == 0 && grp->txn_count == 0)
        gr_coord_group_remove(c, grp); /* nothing was written */
}

/* ---- markers ---- */

/* replayEndTransactionMarker for one group; `live` (the marker written now, not replayed): an offset made
   committed goes into its commit window (group_status.h). */
static int32_t marker_apply_group(struct gr_coordinator *c, struct gr_group *grp, int64_t producer_id,
                                  bool commit, bool live)
{
    int32_t ended = 0;
    for (int32_t i = grp->txn_count - 1; i >= 0; i--) { /* entry_remove moves a visited entry into i */
        struct gr_txn_offset *x = &grp->txn[i];
        if (x->producer_id != producer_id) continue;
        if (commit) {
            struct gr_str topic = gr_str_c(x->topic);
            const struct gr_offset_entry *cur = gr_offsets_find(grp, topic, x->e.partition);
            /* the most recent record wins when transactional and plain commits mix */
            if (!cur || x->e.record_offset > cur->record_offset) {
                struct gr_offset_commit_value v = {x->e.offset, x->e.leader_epoch, gr_str_c(x->e.metadata),
                                                   x->e.commit_timestamp_ms, x->e.expire_timestamp_ms};
                gr_offsets_put(grp, topic, x->e.partition, &v, x->e.record_offset);
                if (live) gr_coord_status_note(c, grp, topic, x->e.partition);
            } else {
                GR_INFO("group %s: transactional offset of %s-%d from producer %lld (record %lld) not "
                        "materialized: the committed one is newer (record %lld)",
                        grp->group_id, x->topic, x->e.partition, (long long)producer_id,
                        (long long)x->e.record_offset, (long long)cur->record_offset);
            }
        }
        entry_remove(grp, i);
        ended++;
    }
    return ended;
}

static int32_t marker_apply(struct gr_coordinator *c, int32_t partition, int64_t producer_id, bool commit,
                            bool live)
{
    int32_t ended = 0;
    for (int32_t g = 0; g < c->group_count; g++) {
        struct gr_group *grp = c->groups[g];
        if ((partition < 0 || grp->partition == partition) && grp->txn_count)
            ended += marker_apply_group(c, grp, producer_id, commit, live);
    }
    return ended;
}

int32_t gr_coord_txn_marker_apply(struct gr_coordinator *c, int32_t partition, int64_t producer_id,
                                  bool commit)
{
    return marker_apply(c, partition, producer_id, commit, false);
}

int16_t gr_coord_txn_complete(struct gr_coordinator *c, int32_t partition, int64_t producer_id,
                              int16_t producer_epoch, int32_t coordinator_epoch, bool commit,
                              int64_t *wait_end_offset)
{
    *wait_end_offset = -1;
    switch (gr_coord_partition_state(c, partition)) {
    case GR_COORD_PART_OWNED:
        break;
    case GR_COORD_PART_LOADING:
        return GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    default:
        return GR_ERR_NOT_COORDINATOR;
    }
    if (!c->append_txn) return GR_ERR_UNKNOWN_SERVER_ERROR;
    struct gr_coord_txn_write w = {commit ? GR_COORD_TXN_COMMIT : GR_COORD_TXN_ABORT, producer_id,
                                   producer_epoch, coordinator_epoch};
    int64_t end;
    int rc = c->append_txn(c->hooks.ctx, partition, &w, NULL, 0, &end);
    if (rc) {
        GR_WARN_RATELIMITED("%s marker of producer %lld on partition %d failed: %s",
                            commit ? "COMMIT" : "ABORT", (long long)producer_id, partition, strerror(-rc));
        return gr_coord_append_error(rc);
    }
    marker_apply(c, partition, producer_id, commit, true);
    *wait_end_offset = end;
    return GR_ERR_NONE;
}

/* ---- OffsetFetch ---- */

static struct gr_group *fetch_group(struct gr_coordinator *c, struct gr_str group_id)
{
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp || grp->state == GR_GROUP_DEAD ||
        gr_coord_partition_state(c, grp->partition) != GR_COORD_PART_OWNED)
        return NULL;
    return grp;
}

bool gr_coord_offset_pending(struct gr_coordinator *c, struct gr_str group_id, struct gr_str topic,
                             int32_t partition)
{
    struct gr_group *grp = fetch_group(c, group_id);
    return grp && gr_txn_offsets_has(grp, topic, partition);
}

int16_t gr_coord_offset_fetch(struct gr_coordinator *c, struct gr_str group_id, struct gr_str topic,
                              int32_t partition, bool require_stable, int64_t *offset, int32_t *leader_epoch,
                              struct gr_str *metadata)
{
    *offset = -1;
    *leader_epoch = -1;
    *metadata = gr_str_c("");
    struct gr_group *grp = fetch_group(c, group_id);
    if (!grp) return GR_ERR_NONE;
    if (require_stable && gr_txn_offsets_has(grp, topic, partition)) return GR_ERR_UNSTABLE_OFFSET_COMMIT;
    const struct gr_offset_entry *e = gr_offsets_find(grp, topic, partition);
    if (e) {
        *offset = e->offset;
        *leader_epoch = e->leader_epoch;
        *metadata = gr_str_c(e->metadata);
    }
    return GR_ERR_NONE;
}

int32_t gr_coord_txn_pending_count(struct gr_coordinator *c, struct gr_str group_id)
{
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    return grp ? grp->txn_count : 0;
}
