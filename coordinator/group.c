/*
 * group.c: classic groups: the group table, members, the rebalance state machine (Kafka's
 * GroupMetadataManager classic paths and ClassicGroup), JoinGroup / SyncGroup / Heartbeat / LeaveGroup,
 * DescribeGroups / ListGroups views, DeleteGroups, timers and the replay of GroupMetadata records.
 *
 * Each function below that mirrors a Kafka method keeps its name in its comment so the two can be read
 * side by side. Departures, on purpose: a waiter that Kafka would silently drop (a member removed while
 * its JoinGroup or SyncGroup is parked, or a second JoinGroup from the same member replacing the first)
 * is answered with UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS, because a Gregor parked request holds its
 * connection's response order until it is answered. The leader's SyncGroup assignment is propagated once
 * its record is committed (hooks.wait_committed: a partition wait, partition/partition.h), as Kafka
 * propagates it once committed;
 * other group-metadata writes (empty group, static member replacement) take effect when the append returns;
 * offset commits wait for fsync in the OffsetCommit handler.
 * Read next: coordinator/offsets.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/limits.h"
#include "common/log.h"
#include "coordinator/internal.h"
#include "protocol/errors.h"

/* ---- small helpers ---- */

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        GR_ERROR("coordinator: out of memory (%zu bytes)", n);
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        GR_ERROR("coordinator: out of memory (%zu bytes)", n);
        abort();
    }
    return q;
}

char *gr_coord_strndup(const char *p, int32_t len)
{
    if (len < 0) return NULL;
    char *s = xmalloc((size_t)len + 1);
    if (len) memcpy(s, p, (size_t)len);
    s[len] = 0;
    return s;
}

static char *xstrdup(const char *s)
{
    return s ? gr_coord_strndup(s, (int32_t)strlen(s)) : NULL;
}

static bool cstr_eq(const char *a, struct gr_str b)
{
    if (!a) return b.len < 0;
    return b.len >= 0 && (size_t)b.len == strlen(a) && memcmp(a, b.ptr, (size_t)b.len) == 0;
}

static struct gr_str view(const char *s)
{
    return s ? gr_str_c(s) : GR_STR_NULL;
}

int64_t gr_coord_now(struct gr_coordinator *c)
{
    return c->hooks.mono_ms(c->hooks.ctx);
}
int64_t gr_coord_wall(struct gr_coordinator *c)
{
    return c->hooks.wall_ms(c->hooks.ctx);
}

void gr_coord_set_deadline(struct gr_coordinator *c, int64_t *slot, int64_t deadline_ms)
{
    *slot = deadline_ms;
    if (deadline_ms < c->deadline_hint) {
        c->deadline_hint = deadline_ms;
        if (c->hooks.timer_hint) c->hooks.timer_hint(c->hooks.ctx, deadline_ms);
    }
}

int16_t gr_coord_write_error(int16_t write_error)
{
    switch (write_error) {
    case GR_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case GR_ERR_NOT_ENOUGH_REPLICAS:
    case GR_ERR_REQUEST_TIMED_OUT:
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    case GR_ERR_NOT_LEADER_OR_FOLLOWER:
    case GR_ERR_KAFKA_STORAGE_ERROR:
        return GR_ERR_NOT_COORDINATOR;
    case GR_ERR_MESSAGE_TOO_LARGE:
    case GR_ERR_RECORD_LIST_TOO_LARGE:
    case GR_ERR_INVALID_FETCH_SIZE:
        return GR_ERR_UNKNOWN_SERVER_ERROR;
    default:
        return write_error;
    }
}

int16_t gr_coord_append_error(int rc)
{
    if (rc == -EMSGSIZE) return gr_coord_write_error(GR_ERR_MESSAGE_TOO_LARGE);
    if (rc == -ETIMEDOUT) return gr_coord_write_error(GR_ERR_REQUEST_TIMED_OUT);
    if (rc == -EROFS || rc == -EIO) return gr_coord_write_error(GR_ERR_KAFKA_STORAGE_ERROR);
    return gr_coord_write_error(GR_ERR_NOT_LEADER_OR_FOLLOWER);
}

const char *gr_group_state_name(enum gr_group_state state)
{
    switch (state) {
    case GR_GROUP_EMPTY:
        return "Empty";
    case GR_GROUP_PREPARING_REBALANCE:
        return "PreparingRebalance";
    case GR_GROUP_COMPLETING_REBALANCE:
        return "CompletingRebalance";
    case GR_GROUP_STABLE:
        return "Stable";
    case GR_GROUP_DEAD:
        return "Dead";
    }
    return "Unknown";
}

void gr_coord_config_defaults(struct gr_coord_config *cfg)
{
    cfg->min_session_timeout_ms = 6000;
    cfg->max_session_timeout_ms = 1800000;
    cfg->initial_rebalance_delay_ms = 3000;
    cfg->max_size = INT32_MAX;
    cfg->new_member_join_timeout_ms = 300000;
    cfg->offsets_retention_ms = 7LL * 24 * 3600 * 1000;
    cfg->offsets_retention_check_interval_ms = 600000;
    cfg->offset_metadata_max_bytes = 4096;
    cfg->offsets_max_message_bytes = GR_MESSAGE_BYTES_DEFAULT;
    cfg->offsets_partitions = 50;
    cfg->partitions_owned = true;
}

/* Java's UUID.randomUUID().toString(): 36 characters, version 4, IETF variant. */
static void random_uuid(struct gr_coordinator *c, char out[37])
{
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        for (int i = 0; i < 16; i++) { /* xorshift fallback */
            c->rng ^= c->rng << 13;
            c->rng ^= c->rng >> 7;
            c->rng ^= c->rng << 17;
            b[i] = (uint8_t)c->rng;
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);
    static const char hex[] = "0123456789abcdef";
    int o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = 0;
}

/* ClassicGroup.generateMemberId: "<group.instance.id or client id>-<uuid>". */
static char *generate_member_id(struct gr_coordinator *c, struct gr_str client_id, struct gr_str instance_id)
{
    struct gr_str prefix = instance_id.len >= 0 ? instance_id : client_id;
    int32_t plen = prefix.len > 0 ? prefix.len : 0;
    char uuid[37];
    random_uuid(c, uuid);
    char *id = xmalloc((size_t)plen + 1 + 36 + 1);
    if (plen) memcpy(id, prefix.ptr, (size_t)plen);
    id[plen] = '-';
    memcpy(id + plen + 1, uuid, 37);
    return id;
}

/* ---- the group table ---- */

static uint32_t hash_str(const char *p, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

static void index_rebuild(struct gr_coordinator *c, int32_t buckets)
{
    free(c->buckets);
    c->buckets = xmalloc((size_t)buckets * sizeof *c->buckets);
    c->bucket_count = buckets;
    for (int32_t i = 0; i < c->group_count; i++) {
        struct gr_group *grp = c->groups[i];
        uint32_t h = hash_str(grp->group_id, strlen(grp->group_id)) % (uint32_t)buckets;
        grp->hash_next = c->buckets[h];
        c->buckets[h] = grp;
    }
}

struct gr_group *gr_coord_group_find(struct gr_coordinator *c, struct gr_str group_id)
{
    if (group_id.len < 0 || !c->bucket_count) return NULL;
    uint32_t h = hash_str(group_id.ptr, (size_t)group_id.len) % (uint32_t)c->bucket_count;
    for (struct gr_group *grp = c->buckets[h]; grp; grp = grp->hash_next)
        if (cstr_eq(grp->group_id, group_id)) return grp;
    return NULL;
}

struct gr_group *gr_coord_group_create(struct gr_coordinator *c, struct gr_str group_id)
{
    struct gr_group *grp = xmalloc(sizeof *grp);
    grp->group_id = gr_coord_strndup(group_id.ptr, group_id.len);
    grp->partition = gr_coord_partition_for(group_id, c->cfg.offsets_partitions);
    grp->state = GR_GROUP_EMPTY;
    grp->previous_state = GR_GROUP_DEAD;
    grp->state_timestamp_ms = -1;
    grp->join_deadline_ms = GR_NO_DEADLINE;
    grp->sync_deadline_ms = GR_NO_DEADLINE;
    grp->assignment_deadline_ms = GR_NO_DEADLINE;
    if (c->group_count == c->group_cap) {
        c->group_cap = c->group_cap ? 2 * c->group_cap : 16;
        c->groups = xrealloc(c->groups, (size_t)c->group_cap * sizeof *c->groups);
    }
    grp->index = c->group_count;
    c->groups[c->group_count++] = grp;
    if (c->group_count > c->bucket_count) {
        index_rebuild(c, c->bucket_count ? 2 * c->bucket_count : 64);
    } else {
        uint32_t h = hash_str(grp->group_id, strlen(grp->group_id)) % (uint32_t)c->bucket_count;
        grp->hash_next = c->buckets[h];
        c->buckets[h] = grp;
    }
    return grp;
}

static void member_release_waiters(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                                   int16_t err);

static void member_free(struct gr_member *m)
{
    free(m->member_id);
    free(m->group_instance_id);
    free(m->client_id);
    free(m->client_host);
    free(m->protocol_type);
    for (int32_t i = 0; i < m->protocol_count; i++) {
        free(m->protocols[i].name);
        free(m->protocols[i].metadata);
    }
    free(m->protocols);
    free(m->assignment);
    free(m->next_assignment);
    free(m);
}

static void subscribed_clear(struct gr_group *grp)
{
    for (int32_t i = 0; i < grp->subscribed_count; i++)
        free(grp->subscribed[i]);
    grp->subscribed_count = 0;
    grp->subscribed_known = false;
}

void gr_coord_group_remove(struct gr_coordinator *c, struct gr_group *grp)
{
    uint32_t h = hash_str(grp->group_id, strlen(grp->group_id)) % (uint32_t)c->bucket_count;
    struct gr_group **pp = &c->buckets[h];
    while (*pp != grp)
        pp = &(*pp)->hash_next;
    *pp = grp->hash_next;
    gr_partition_wait_cancel(&grp->assignment_wait);
    int32_t last = c->group_count - 1;
    c->groups[grp->index] = c->groups[last];
    c->groups[grp->index]->index = grp->index;
    c->group_count--;
    for (int32_t i = 0; i < grp->member_count; i++) {
        member_release_waiters(c, grp, grp->members[i], GR_ERR_UNKNOWN_MEMBER_ID);
        member_free(grp->members[i]);
    }
    free(grp->members);
    for (int32_t i = 0; i < grp->pending_count; i++)
        free(grp->pending[i].member_id);
    free(grp->pending);
    subscribed_clear(grp);
    free(grp->subscribed);
    gr_offsets_free(grp);
    free(grp->group_id);
    free(grp->protocol_type);
    free(grp->protocol_name);
    free(grp->leader_id);
    free(grp->md_value);
    free(grp);
}

void gr_coord_group_drop(struct gr_coordinator *c, struct gr_group *grp, int16_t err)
{
    for (int32_t i = 0; i < grp->member_count; i++)
        member_release_waiters(c, grp, grp->members[i], err);
    gr_coord_group_remove(c, grp);
}

int32_t gr_coord_group_count(const struct gr_coordinator *c)
{
    return c->group_count;
}
struct gr_group *gr_coord_group_at(struct gr_coordinator *c, int32_t i)
{
    return i >= 0 && i < c->group_count ? c->groups[i] : NULL;
}
int32_t gr_coord_partition(const struct gr_coordinator *c, struct gr_str group_id)
{
    return gr_coord_partition_for(group_id, c->cfg.offsets_partitions);
}

/* ---- answering waiters ---- */

static void deliver_join(struct gr_coordinator *c, void *waiter, const struct gr_join_result *res)
{
    GR_DEBUG("JoinGroup %p answered: error %d, generation %d, member %.*s, %d members%s", waiter,
             res->error_code, res->generation_id, (int)(res->member_id.len > 0 ? res->member_id.len : 0),
             res->member_id.ptr ? res->member_id.ptr : "", res->member_count,
             waiter == c->current_waiter ? " (in the call)" : "");
    if (waiter == c->current_waiter) c->current_answered = true;
    c->hooks.join_done(c->hooks.ctx, waiter, res);
}

static void deliver_sync(struct gr_coordinator *c, void *waiter, const struct gr_sync_result *res)
{
    GR_DEBUG("SyncGroup %p answered: error %d, %d assignment bytes%s", waiter, res->error_code,
             res->assignment.len, waiter == c->current_waiter ? " (in the call)" : "");
    if (waiter == c->current_waiter) c->current_answered = true;
    c->hooks.sync_done(c->hooks.ctx, waiter, res);
}

static void join_error(struct gr_coordinator *c, void *waiter, int16_t err, struct gr_str member_id)
{
    struct gr_join_result r = {err, -1, GR_STR_NULL, GR_STR_NULL, gr_str_c(""), false, member_id, NULL, 0};
    deliver_join(c, waiter, &r);
}

static void sync_error(struct gr_coordinator *c, void *waiter, int16_t err)
{
    struct gr_sync_result r = {err, GR_STR_NULL, GR_STR_NULL, {(const uint8_t *)"", 0}};
    deliver_sync(c, waiter, &r);
}

/* ClassicGroup.completeJoinFuture */
static bool complete_join(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                          const struct gr_join_result *res)
{
    if (!m->join_waiter) return false;
    void *w = m->join_waiter;
    m->join_waiter = NULL;
    grp->awaiting_join_count--;
    deliver_join(c, w, res);
    return true;
}

/* ClassicGroup.completeSyncFuture */
static bool complete_sync(struct gr_coordinator *c, struct gr_member *m, const struct gr_sync_result *res)
{
    if (!m->sync_waiter) return false;
    void *w = m->sync_waiter;
    m->sync_waiter = NULL;
    deliver_sync(c, w, res);
    return true;
}

/* Answers what a removed member still holds (Kafka drops these futures; see the file comment). */
static void member_release_waiters(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                                   int16_t err)
{
    if (m->join_waiter) {
        void *w = m->join_waiter;
        m->join_waiter = NULL;
        grp->awaiting_join_count--;
        join_error(c, w, err, gr_str_c(""));
    }
    if (m->sync_waiter) {
        void *w = m->sync_waiter;
        m->sync_waiter = NULL;
        sync_error(c, w, err);
    }
}

/* ---- members ---- */

struct gr_member *gr_group_member_find(const struct gr_group *grp, const char *member_id, int32_t len)
{
    for (int32_t i = 0; i < grp->member_count; i++) {
        struct gr_member *m = grp->members[i];
        if ((int32_t)strlen(m->member_id) == len && memcmp(m->member_id, member_id, (size_t)len) == 0)
            return m;
    }
    return NULL;
}

static struct gr_member *find_member(const struct gr_group *grp, struct gr_str id)
{
    return id.len >= 0 ? gr_group_member_find(grp, id.ptr, id.len) : NULL;
}

static struct gr_member *find_static(const struct gr_group *grp, struct gr_str instance_id)
{
    if (instance_id.len < 0) return NULL;
    for (int32_t i = 0; i < grp->member_count; i++)
        if (grp->members[i]->group_instance_id && cstr_eq(grp->members[i]->group_instance_id, instance_id))
            return grp->members[i];
    return NULL;
}

static int32_t pending_index(const struct gr_group *grp, struct gr_str id)
{
    for (int32_t i = 0; i < grp->pending_count; i++)
        if (cstr_eq(grp->pending[i].member_id, id)) return i;
    return -1;
}

static void pending_remove_at(struct gr_group *grp, int32_t i)
{
    free(grp->pending[i].member_id);
    grp->pending[i] = grp->pending[--grp->pending_count];
}

static void set_protocols(struct gr_member *m, const struct gr_join_protocol *protos, int32_t count)
{
    for (int32_t i = 0; i < m->protocol_count; i++) {
        free(m->protocols[i].name);
        free(m->protocols[i].metadata);
    }
    free(m->protocols);
    m->protocols = xmalloc((size_t)(count > 0 ? count : 1) * sizeof *m->protocols);
    m->protocol_count = count;
    for (int32_t i = 0; i < count; i++) {
        m->protocols[i].name =
            gr_coord_strndup(protos[i].name.ptr, protos[i].name.len > 0 ? protos[i].name.len : 0);
        int32_t n = protos[i].metadata.len > 0 ? protos[i].metadata.len : 0;
        m->protocols[i].metadata = xmalloc((size_t)n);
        if (n) memcpy(m->protocols[i].metadata, protos[i].metadata.ptr, (size_t)n);
        m->protocols[i].metadata_len = n;
    }
}

static void set_assignment(struct gr_member *m, const uint8_t *p, int32_t len)
{
    free(m->assignment);
    m->assignment = NULL;
    m->assignment_len = 0;
    if (len > 0) {
        m->assignment = xmalloc((size_t)len);
        memcpy(m->assignment, p, (size_t)len);
        m->assignment_len = len;
    }
}

/* ClassicGroupMember.matches: the same protocols, in the same order, with the same metadata. */
static bool member_matches(const struct gr_member *m, const struct gr_join_protocol *protos, int32_t count)
{
    if (m->protocol_count != count) return false;
    for (int32_t i = 0; i < count; i++) {
        const struct gr_member_protocol *mp = &m->protocols[i];
        int32_t n = protos[i].metadata.len > 0 ? protos[i].metadata.len : 0;
        if (!cstr_eq(mp->name, protos[i].name) || mp->metadata_len != n ||
            (n && memcmp(mp->metadata, protos[i].metadata.ptr, (size_t)n)))
            return false;
    }
    return true;
}

static const struct gr_member_protocol *member_protocol(const struct gr_member *m, const char *name)
{
    if (!name) return NULL;
    for (int32_t i = 0; i < m->protocol_count; i++)
        if (!strcmp(m->protocols[i].name, name)) return &m->protocols[i];
    return NULL;
}

/* Number of members supporting protocol `name` (Kafka's supportedProtocols counter). */
static int32_t protocol_support(const struct gr_group *grp, const char *name, int32_t len)
{
    int32_t n = 0;
    for (int32_t i = 0; i < grp->member_count; i++) {
        const struct gr_member *m = grp->members[i];
        for (int32_t k = 0; k < m->protocol_count; k++) {
            if ((int32_t)strlen(m->protocols[k].name) == len &&
                !memcmp(m->protocols[k].name, name, (size_t)len)) {
                n++;
                break;
            }
        }
    }
    return n;
}

/* ClassicGroup.supportsProtocols */
static bool supports_protocols(const struct gr_group *grp, struct gr_str type,
                               const struct gr_join_protocol *protos, int32_t count)
{
    if (grp->state == GR_GROUP_EMPTY) return type.len > 0 && count > 0;
    if (!grp->protocol_type || !cstr_eq(grp->protocol_type, type)) return false;
    for (int32_t i = 0; i < count; i++)
        if (protos[i].name.len >= 0 &&
            protocol_support(grp, protos[i].name.ptr, protos[i].name.len) == grp->member_count)
            return true;
    return false;
}

/* ClassicGroup.selectProtocol: among the protocols every member supports, each member votes for its first
 * choice; the most votes win (ties: the earliest in the first member's order). */
static const char *select_protocol(const struct gr_group *grp)
{
    if (grp->member_count == 0) return NULL;
    const struct gr_member *first = grp->members[0];
    int32_t *votes = xmalloc((size_t)(first->protocol_count + 1) * sizeof *votes);
    for (int32_t i = 0; i < grp->member_count; i++) {
        const struct gr_member *m = grp->members[i];
        for (int32_t k = 0; k < m->protocol_count; k++) {
            const char *name = m->protocols[k].name;
            if (protocol_support(grp, name, (int32_t)strlen(name)) != grp->member_count) continue;
            for (int32_t f = 0; f < first->protocol_count; f++)
                if (!strcmp(first->protocols[f].name, name)) {
                    votes[f]++;
                    break;
                }
            break;
        }
    }
    int32_t best = -1;
    for (int32_t f = 0; f < first->protocol_count; f++)
        if (votes[f] > 0 && (best < 0 || votes[f] > votes[best])) best = f;
    free(votes);
    return best >= 0 ? first->protocols[best].name : NULL;
}

static int32_t group_rebalance_timeout(const struct gr_group *grp)
{
    int32_t t = 0;
    for (int32_t i = 0; i < grp->member_count; i++)
        if (grp->members[i]->rebalance_timeout_ms > t) t = grp->members[i]->rebalance_timeout_ms;
    return t;
}

static bool has_all_members_joined(const struct gr_group *grp)
{
    return grp->member_count == grp->awaiting_join_count && grp->pending_count == 0;
}

static bool is_leader(const struct gr_group *grp, const char *member_id)
{
    return grp->leader_id && member_id && !strcmp(grp->leader_id, member_id);
}

static void set_leader(struct gr_group *grp, const char *member_id)
{
    free(grp->leader_id);
    grp->leader_id = xstrdup(member_id);
}

/* ClassicGroup.add */
static void group_add(struct gr_group *grp, struct gr_member *m, void *waiter)
{
    if (grp->member_count == 0) {
        free(grp->protocol_type);
        grp->protocol_type = xstrdup(m->protocol_type);
    }
    if (!grp->leader_id) set_leader(grp, m->member_id);
    if (grp->member_count == grp->member_cap) {
        grp->member_cap = grp->member_cap ? 2 * grp->member_cap : 4;
        grp->members = xrealloc(grp->members, (size_t)grp->member_cap * sizeof *grp->members);
    }
    grp->members[grp->member_count++] = m;
    m->join_waiter = waiter;
    if (waiter) grp->awaiting_join_count++;
    int32_t pi = pending_index(grp, gr_str_c(m->member_id));
    if (pi >= 0) pending_remove_at(grp, pi);
}

/* ClassicGroup.remove (the member struct is freed; its parked requests are answered with `err`) */
static void group_remove_member(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                                int16_t err)
{
    int32_t at = -1;
    for (int32_t i = 0; i < grp->member_count; i++)
        if (grp->members[i] == m) at = i;
    if (at < 0) return;
    memmove(&grp->members[at], &grp->members[at + 1],
            (size_t)(grp->member_count - at - 1) * sizeof *grp->members);
    grp->member_count--;
    member_release_waiters(c, grp, m, err);
    if (is_leader(grp, m->member_id)) set_leader(grp, grp->member_count ? grp->members[0]->member_id : NULL);
    int32_t pi = pending_index(grp, gr_str_c(m->member_id));
    if (pi >= 0) pending_remove_at(grp, pi);
    member_free(m);
}

static void transition(struct gr_coordinator *c, struct gr_group *grp, enum gr_group_state to)
{
    grp->previous_state = grp->state;
    grp->state = to;
    grp->state_timestamp_ms = gr_coord_wall(c);
}

static void schedule_heartbeat(struct gr_coordinator *c, struct gr_member *m, int64_t timeout_ms)
{
    gr_coord_set_deadline(c, &m->heartbeat_deadline_ms, gr_coord_now(c) + timeout_ms);
}

/* ---- subscriptions (ClassicGroup.computeSubscribedTopics) ---- */

bool gr_group_uses_consumer_protocol(const struct gr_group *grp)
{
    return grp->protocol_type && !strcmp(grp->protocol_type, "consumer");
}

static void subscribed_add(void *ctx, struct gr_str topic)
{
    struct gr_group *grp = ctx;
    for (int32_t i = 0; i < grp->subscribed_count; i++)
        if (cstr_eq(grp->subscribed[i], topic)) return;
    if (grp->subscribed_count == grp->subscribed_cap) {
        grp->subscribed_cap = grp->subscribed_cap ? 2 * grp->subscribed_cap : 8;
        grp->subscribed = xrealloc(grp->subscribed, (size_t)grp->subscribed_cap * sizeof *grp->subscribed);
    }
    grp->subscribed[grp->subscribed_count++] = gr_coord_strndup(topic.ptr, topic.len);
}

static void compute_subscribed_topics(struct gr_group *grp)
{
    subscribed_clear(grp);
    if (!gr_group_uses_consumer_protocol(grp)) return;
    if (grp->member_count == 0) {
        grp->subscribed_known = true;
        return;
    }
    if (!grp->protocol_name) return;
    for (int32_t i = 0; i < grp->member_count; i++) {
        const struct gr_member_protocol *mp = member_protocol(grp->members[i], grp->protocol_name);
        struct gr_bytes md = mp ? (struct gr_bytes){mp->metadata, mp->metadata_len} : GR_BYTES_NULL;
        if (gr_consumer_subscription_topics(md, subscribed_add, grp) < 0) {
            GR_WARN_RATELIMITED("group %s: a member's consumer protocol subscription does not parse; "
                                "subscribed topics unknown",
                                grp->group_id);
            subscribed_clear(grp);
            return;
        }
    }
    grp->subscribed_known = true;
}

bool gr_group_subscribed_to(const struct gr_group *grp, const char *topic, int32_t len)
{
    if (!grp->subscribed_known) return gr_group_uses_consumer_protocol(grp);
    for (int32_t i = 0; i < grp->subscribed_count; i++)
        if ((int32_t)strlen(grp->subscribed[i]) == len && !memcmp(grp->subscribed[i], topic, (size_t)len))
            return true;
    return false;
}

/* ---- group metadata records ---- */

static int append_group_value(struct gr_coordinator *c, struct gr_group *grp,
                              const struct gr_group_metadata_value *v, int64_t *end)
{
    struct gr_coord_record rec;
    int rc = gr_group_metadata_record(&rec, grp->group_id, v);
    if (rc) return rc;
    rc = c->hooks.append(c->hooks.ctx, grp->partition, &rec, 1, end);
    if (rc == 0) {
        free(grp->md_value);
        grp->md_value = rec.value;
        grp->md_value_len = rec.value_len;
        rec.value = NULL;
    } else {
        GR_WARN_RATELIMITED("group %s: writing group metadata failed: %s", grp->group_id, strerror(-rc));
    }
    gr_coord_records_free(&rec, 1);
    return rc;
}

/* GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord: what a new group writes (no protocol, no
 * members, generation 0), whatever the JoinGroup that created it did to it. */
static int write_empty_group_metadata(struct gr_coordinator *c, struct gr_group *grp)
{
    struct gr_group_metadata_value v = {gr_str_c(""), 0, GR_STR_NULL, GR_STR_NULL, grp->state_timestamp_ms,
                                        NULL,         0};
    int64_t end;
    return append_group_value(c, grp, &v, &end);
}

/* GroupCoordinatorRecordHelpers.newGroupMetadataRecord: the group as it is, with `assign` (NULL: the
 * members' current assignments) for member i. Appends it (*end: the log end offset after it) and keeps
 * the value for snapshots. */
static int write_group_metadata_end(struct gr_coordinator *c, struct gr_group *grp,
                                    const struct gr_bytes *assign, int64_t *end)
{
    struct gr_group_metadata_member *mm = xmalloc((size_t)(grp->member_count + 1) * sizeof *mm);
    for (int32_t i = 0; i < grp->member_count; i++) {
        const struct gr_member *m = grp->members[i];
        const struct gr_member_protocol *mp = member_protocol(m, grp->protocol_name);
        mm[i].member_id = gr_str_c(m->member_id);
        mm[i].group_instance_id = view(m->group_instance_id);
        mm[i].client_id = gr_str_c(m->client_id);
        mm[i].client_host = gr_str_c(m->client_host);
        mm[i].rebalance_timeout_ms = m->rebalance_timeout_ms;
        mm[i].session_timeout_ms = m->session_timeout_ms;
        mm[i].subscription = mp ? (struct gr_bytes){mp->metadata, mp->metadata_len}
                                : (struct gr_bytes){(const uint8_t *)"", 0};
        mm[i].assignment = assign ? assign[i]
                                  : (struct gr_bytes){m->assignment ? m->assignment : (const uint8_t *)"",
                                                      m->assignment_len};
    }
    struct gr_group_metadata_value v = {
        .protocol_type = gr_str_c(grp->protocol_type ? grp->protocol_type : ""),
        .generation = grp->generation_id,
        .protocol = view(grp->protocol_name),
        .leader = view(grp->leader_id),
        .current_state_timestamp_ms = grp->state_timestamp_ms,
        .members = mm,
        .member_count = grp->member_count,
    };
    int rc = append_group_value(c, grp, &v, end);
    free(mm);
    return rc;
}

static int write_group_metadata(struct gr_coordinator *c, struct gr_group *grp, const struct gr_bytes *assign)
{
    int64_t end;
    return write_group_metadata_end(c, grp, assign, &end);
}

/* ---- the rebalance state machine ---- */

static void prepare_rebalance(struct gr_coordinator *c, struct gr_group *grp, const char *reason);
static void maybe_complete_join_phase(struct gr_coordinator *c, struct gr_group *grp);
static void complete_join_phase(struct gr_coordinator *c, struct gr_group *grp);

static bool can_rebalance(const struct gr_group *grp)
{
    return grp->state == GR_GROUP_STABLE || grp->state == GR_GROUP_COMPLETING_REBALANCE ||
           grp->state == GR_GROUP_EMPTY;
}

/* maybePrepareRebalanceOrCompleteJoin */
static void maybe_prepare_rebalance_or_complete_join(struct gr_coordinator *c, struct gr_group *grp,
                                                     const char *reason)
{
    if (can_rebalance(grp))
        prepare_rebalance(c, grp, reason);
    else
        maybe_complete_join_phase(c, grp);
}

/* propagateAssignment */
static void propagate_assignment(struct gr_coordinator *c, struct gr_group *grp, int16_t err)
{
    for (int32_t i = 0; i < grp->member_count; i++) {
        struct gr_member *m = grp->members[i];
        struct gr_sync_result r = {
            err,
            err ? GR_STR_NULL : view(grp->protocol_type),
            err ? GR_STR_NULL : view(grp->protocol_name),
            {m->assignment ? m->assignment : (const uint8_t *)"", m->assignment_len},
        };
        if (complete_sync(c, m, &r)) schedule_heartbeat(c, m, m->session_timeout_ms);
    }
}

/* resetAndPropagateAssignmentWithError */
static void reset_and_propagate_assignment_with_error(struct gr_coordinator *c, struct gr_group *grp,
                                                      int16_t err)
{
    for (int32_t i = 0; i < grp->member_count; i++)
        set_assignment(grp->members[i], NULL, 0);
    propagate_assignment(c, grp, err);
}

/* removeSyncExpiration */
static void remove_sync_expiration(struct gr_group *grp)
{
    for (int32_t i = 0; i < grp->member_count; i++)
        grp->members[i]->pending_sync = false;
    grp->sync_deadline_ms = GR_NO_DEADLINE;
}

static bool has_received_sync_from_all(const struct gr_group *grp)
{
    for (int32_t i = 0; i < grp->member_count; i++)
        if (grp->members[i]->pending_sync) return false;
    return true;
}

static void drop_pending_assignment(struct gr_group *grp)
{
    for (int32_t i = 0; i < grp->member_count; i++) {
        free(grp->members[i]->next_assignment);
        grp->members[i]->next_assignment = NULL;
        grp->members[i]->next_assignment_len = 0;
    }
    grp->assignment_pending = false;
    gr_partition_wait_cancel(&grp->assignment_wait); /* the write no longer applies */
    grp->assignment_deadline_ms = GR_NO_DEADLINE;
}

/* prepareRebalance */
static void prepare_rebalance(struct gr_coordinator *c, struct gr_group *grp, const char *reason)
{
    drop_pending_assignment(grp); /* a write still on its way no longer applies (Kafka checks the state) */
    if (grp->state == GR_GROUP_COMPLETING_REBALANCE)
        reset_and_propagate_assignment_with_error(c, grp, GR_ERR_REBALANCE_IN_PROGRESS);
    remove_sync_expiration(grp);
    bool initial = grp->state == GR_GROUP_EMPTY;
    if (initial) {
        int32_t delay = c->cfg.initial_rebalance_delay_ms;
        int32_t remaining = group_rebalance_timeout(grp) - delay;
        grp->join_timer = GR_JOIN_TIMER_INITIAL;
        grp->initial_delay_ms = delay;
        grp->initial_remaining_ms = remaining > 0 ? remaining : 0;
        gr_coord_set_deadline(c, &grp->join_deadline_ms, gr_coord_now(c) + delay);
    }
    transition(c, grp, GR_GROUP_PREPARING_REBALANCE);
    GR_INFO("preparing to rebalance group %s with old generation %d (reason: %s)", grp->group_id,
            grp->generation_id, reason);
    if (initial) return;
    /* maybeCompleteJoinElseSchedule */
    if (has_all_members_joined(grp)) {
        complete_join_phase(c, grp);
    } else {
        grp->join_timer = GR_JOIN_TIMER_NORMAL;
        gr_coord_set_deadline(c, &grp->join_deadline_ms, gr_coord_now(c) + group_rebalance_timeout(grp));
    }
}

/* maybeCompleteJoinPhase: not during the initial (delayed) rebalance, not before everyone rejoined. */
static void maybe_complete_join_phase(struct gr_coordinator *c, struct gr_group *grp)
{
    if (grp->state != GR_GROUP_PREPARING_REBALANCE) return;
    if (grp->previous_state == GR_GROUP_EMPTY) return;
    if (!has_all_members_joined(grp)) return;
    complete_join_phase(c, grp);
}

/* ClassicGroup.maybeElectNewJoinedLeader */
static bool maybe_elect_new_joined_leader(struct gr_group *grp)
{
    if (!grp->leader_id) return false;
    struct gr_member *leader = gr_group_member_find(grp, grp->leader_id, (int32_t)strlen(grp->leader_id));
    if (leader && leader->join_waiter) return true;
    for (int32_t i = 0; i < grp->member_count; i++) {
        if (grp->members[i]->join_waiter) {
            GR_INFO("group %s: leader %s did not rejoin in time; %s is the new leader", grp->group_id,
                    grp->leader_id, grp->members[i]->member_id);
            set_leader(grp, grp->members[i]->member_id);
            return true;
        }
    }
    return false;
}

/* The leader's view of the members (ClassicGroup.currentClassicGroupMembers); free() the array. */
static struct gr_join_member_out *current_members(const struct gr_group *grp)
{
    struct gr_join_member_out *out = xmalloc((size_t)(grp->member_count + 1) * sizeof *out);
    for (int32_t i = 0; i < grp->member_count; i++) {
        const struct gr_member *m = grp->members[i];
        const struct gr_member_protocol *mp = member_protocol(m, grp->protocol_name);
        out[i].member_id = gr_str_c(m->member_id);
        out[i].group_instance_id = view(m->group_instance_id);
        out[i].metadata = mp ? (struct gr_bytes){mp->metadata, mp->metadata_len} : GR_BYTES_NULL;
    }
    return out;
}

static struct gr_join_result join_ok(const struct gr_group *grp, const char *member_id, const char *leader)
{
    struct gr_join_result r = {0,
                               grp->generation_id,
                               view(grp->protocol_type),
                               view(grp->protocol_name),
                               gr_str_c(leader ? leader : ""),
                               false,
                               gr_str_c(member_id),
                               NULL,
                               0};
    return r;
}

/* ClassicGroup.initNextGeneration */
static void init_next_generation(struct gr_coordinator *c, struct gr_group *grp)
{
    grp->generation_id++;
    free(grp->protocol_name);
    grp->protocol_name = NULL;
    if (grp->member_count) {
        grp->protocol_name = xstrdup(select_protocol(grp));
        compute_subscribed_topics(grp);
        transition(c, grp, GR_GROUP_COMPLETING_REBALANCE);
    } else {
        compute_subscribed_topics(grp);
        transition(c, grp, GR_GROUP_EMPTY);
    }
    for (int32_t i = 0; i < grp->member_count; i++)
        grp->members[i]->pending_sync = false;
}

/* completeClassicGroupJoin */
static void complete_join_phase(struct gr_coordinator *c, struct gr_group *grp)
{
    grp->join_timer = GR_JOIN_TIMER_NONE;
    grp->join_deadline_ms = GR_NO_DEADLINE;
    for (int32_t i = 0; i < grp->member_count;) {
        struct gr_member *m = grp->members[i];
        if (!m->join_waiter && !m->group_instance_id) {
            GR_INFO("group %s: removing member %s, which did not rejoin", grp->group_id, m->member_id);
            group_remove_member(c, grp, m, GR_ERR_UNKNOWN_MEMBER_ID);
        } else {
            i++;
        }
    }
    if (grp->state == GR_GROUP_DEAD) return;
    if (!maybe_elect_new_joined_leader(grp) && grp->member_count) {
        GR_WARN("group %s could not complete its rebalance: no member rejoined", grp->group_id);
        grp->join_timer = GR_JOIN_TIMER_NORMAL;
        gr_coord_set_deadline(c, &grp->join_deadline_ms, gr_coord_now(c) + group_rebalance_timeout(grp));
        return;
    }
    init_next_generation(c, grp);
    if (grp->state == GR_GROUP_EMPTY) {
        GR_INFO("group %s with generation %d is now empty", grp->group_id, grp->generation_id);
        write_group_metadata(c, grp, NULL);
        return;
    }
    GR_INFO("stabilized group %s generation %d (protocol %s) with %d members", grp->group_id,
            grp->generation_id, grp->protocol_name, grp->member_count);
    struct gr_join_member_out *all = current_members(grp);
    /* answering may not change membership: walk a snapshot of the member pointers */
    int32_t n = grp->member_count;
    struct gr_member **ms = xmalloc((size_t)n * sizeof *ms);
    memcpy(ms, grp->members, (size_t)n * sizeof *ms);
    for (int32_t i = 0; i < n; i++) {
        struct gr_member *m = ms[i];
        struct gr_join_result r = join_ok(grp, m->member_id, grp->leader_id);
        if (is_leader(grp, m->member_id)) {
            r.members = all;
            r.member_count = n;
        }
        complete_join(c, grp, m, &r);
        schedule_heartbeat(c, m, m->session_timeout_ms);
        m->is_new = false;
        m->pending_sync = true;
    }
    free(ms);
    free(all);
    /* schedulePendingSync */
    grp->sync_generation = grp->generation_id;
    gr_coord_set_deadline(c, &grp->sync_deadline_ms, gr_coord_now(c) + group_rebalance_timeout(grp));
}

/* removeMemberAndUpdateClassicGroup */
static void remove_member_and_update(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                                     const char *reason)
{
    if (m->join_waiter) {
        struct gr_join_result r = {GR_ERR_UNKNOWN_MEMBER_ID,
                                   -1,
                                   GR_STR_NULL,
                                   GR_STR_NULL,
                                   gr_str_c(""),
                                   false,
                                   gr_str_c(""),
                                   NULL,
                                   0};
        complete_join(c, grp, m, &r);
    }
    group_remove_member(c, grp, m, GR_ERR_UNKNOWN_MEMBER_ID);
    if (grp->state == GR_GROUP_STABLE || grp->state == GR_GROUP_COMPLETING_REBALANCE)
        maybe_prepare_rebalance_or_complete_join(c, grp, reason);
    else if (grp->state == GR_GROUP_PREPARING_REBALANCE && has_all_members_joined(grp))
        complete_join_phase(c, grp);
}

/* ---- JoinGroup ---- */

/* updateMember (ClassicGroup): new protocols and timeouts; the waiter replaces any earlier one. */
static void update_member(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                          const struct gr_join_params *p, int32_t rebalance_timeout_ms, void *waiter)
{
    set_protocols(m, p->protocols, p->protocol_count);
    m->rebalance_timeout_ms = rebalance_timeout_ms;
    m->session_timeout_ms = p->session_timeout_ms;
    if (m->join_waiter && m->join_waiter != waiter) {
        void *old = m->join_waiter;
        m->join_waiter = NULL;
        grp->awaiting_join_count--;
        join_error(c, old, GR_ERR_REBALANCE_IN_PROGRESS, gr_str_c(m->member_id));
    }
    if (waiter && !m->join_waiter) grp->awaiting_join_count++;
    m->join_waiter = waiter;
}

static struct gr_member *member_new(const struct gr_join_params *p, char *member_id,
                                    int32_t rebalance_timeout_ms)
{
    struct gr_member *m = xmalloc(sizeof *m);
    m->member_id = member_id;
    m->group_instance_id = gr_coord_strndup(p->group_instance_id.ptr, p->group_instance_id.len);
    m->client_id = gr_coord_strndup(p->client_id.ptr, p->client_id.len > 0 ? p->client_id.len : 0);
    m->client_host = gr_coord_strndup(p->client_host.ptr, p->client_host.len > 0 ? p->client_host.len : 0);
    m->protocol_type =
        gr_coord_strndup(p->protocol_type.ptr, p->protocol_type.len > 0 ? p->protocol_type.len : 0);
    m->rebalance_timeout_ms = rebalance_timeout_ms;
    m->session_timeout_ms = p->session_timeout_ms;
    m->heartbeat_deadline_ms = GR_NO_DEADLINE;
    set_protocols(m, p->protocols, p->protocol_count);
    return m;
}

/* addMemberThenRebalanceOrCompleteJoin (takes member_id) */
static void add_member_then_rebalance(struct gr_coordinator *c, struct gr_group *grp,
                                      const struct gr_join_params *p, char *member_id,
                                      int32_t rebalance_timeout_ms)
{
    struct gr_member *m = member_new(p, member_id, rebalance_timeout_ms);
    m->is_new = true;
    if (grp->state == GR_GROUP_PREPARING_REBALANCE && grp->previous_state == GR_GROUP_EMPTY)
        grp->new_member_added = true;
    group_add(grp, m, p->waiter);
    /* new members cannot heartbeat yet: their JoinGroup times out after the new-member join timeout */
    schedule_heartbeat(c, m, c->cfg.new_member_join_timeout_ms);
    maybe_prepare_rebalance_or_complete_join(c, grp, "adding new member");
}

/* ClassicGroup.replaceStaticMember: the old member's parked requests get FENCED_INSTANCE_ID. */
static struct gr_member *replace_static_member(struct gr_coordinator *c, struct gr_group *grp,
                                               struct gr_member *old, char *new_member_id)
{
    if (old->join_waiter) {
        struct gr_join_result r = {GR_ERR_FENCED_INSTANCE_ID,
                                   -1,
                                   GR_STR_NULL,
                                   GR_STR_NULL,
                                   gr_str_c(""),
                                   false,
                                   gr_str_c(old->member_id),
                                   NULL,
                                   0};
        complete_join(c, grp, old, &r);
    }
    if (old->sync_waiter) {
        struct gr_sync_result r = {
            GR_ERR_FENCED_INSTANCE_ID, GR_STR_NULL, GR_STR_NULL, {(const uint8_t *)"", 0}};
        complete_sync(c, old, &r);
    }
    struct gr_member *m = xmalloc(sizeof *m);
    m->member_id = new_member_id;
    m->group_instance_id = xstrdup(old->group_instance_id);
    m->client_id = xstrdup(old->client_id);
    m->client_host = xstrdup(old->client_host);
    m->protocol_type = xstrdup(old->protocol_type);
    m->rebalance_timeout_ms = old->rebalance_timeout_ms;
    m->session_timeout_ms = old->session_timeout_ms;
    m->heartbeat_deadline_ms = GR_NO_DEADLINE;
    m->protocols = old->protocols;
    m->protocol_count = old->protocol_count;
    old->protocols = NULL;
    old->protocol_count = 0;
    m->assignment = old->assignment;
    m->assignment_len = old->assignment_len;
    old->assignment = NULL;
    old->assignment_len = 0;
    for (int32_t i = 0; i < grp->member_count; i++)
        if (grp->members[i] == old) grp->members[i] = m;
    if (is_leader(grp, old->member_id)) set_leader(grp, m->member_id);
    member_free(old);
    return m;
}

/* updateStaticMemberThenRebalanceOrCompleteJoin */
static void update_static_member(struct gr_coordinator *c, struct gr_group *grp,
                                 const struct gr_join_params *p, struct gr_member *old, char *new_member_id,
                                 int32_t rebalance_timeout_ms)
{
    char *current_leader = xstrdup(grp->leader_id);
    char *old_member_id = xstrdup(old->member_id);
    struct gr_member *m = replace_static_member(c, grp, old, new_member_id);
    schedule_heartbeat(c, m, m->session_timeout_ms);
    /* keep what a failed write must restore */
    struct gr_member_protocol *old_protocols = m->protocols;
    int32_t old_protocol_count = m->protocol_count;
    int32_t old_rebalance = m->rebalance_timeout_ms, old_session = m->session_timeout_ms;
    m->protocols = NULL;
    m->protocol_count = 0;
    update_member(c, grp, m, p, rebalance_timeout_ms, p->waiter);

    if (grp->state == GR_GROUP_STABLE) {
        const char *selected = select_protocol(grp);
        if (grp->protocol_name && selected && !strcmp(grp->protocol_name, selected)) {
            GR_INFO("group %s: static member %s rejoined as %s during Stable; no rebalance", grp->group_id,
                    m->group_instance_id, m->member_id);
            int rc = write_group_metadata(c, grp, NULL);
            if (rc) {
                /* revert: the old member id keeps the instance */
                void *w = m->join_waiter;
                m->join_waiter = NULL;
                grp->awaiting_join_count--;
                for (int32_t i = 0; i < m->protocol_count; i++) {
                    free(m->protocols[i].name);
                    free(m->protocols[i].metadata);
                }
                free(m->protocols);
                m->protocols = old_protocols;
                m->protocol_count = old_protocol_count;
                m->rebalance_timeout_ms = old_rebalance;
                m->session_timeout_ms = old_session;
                old_protocols = NULL;
                old_protocol_count = 0;
                bool was_leader = is_leader(grp, m->member_id);
                free(m->member_id);
                m->member_id = old_member_id;
                old_member_id = NULL;
                if (was_leader) set_leader(grp, m->member_id);
                schedule_heartbeat(c, m, m->session_timeout_ms);
                struct gr_join_result r = join_ok(grp, "", current_leader);
                r.error_code = gr_coord_append_error(rc);
                deliver_join(c, w, &r);
            } else if (p->api_version >= 9) {
                bool lead = is_leader(grp, m->member_id);
                struct gr_join_member_out *all = lead ? current_members(grp) : NULL;
                struct gr_join_result r = join_ok(grp, m->member_id, grp->leader_id);
                r.skip_assignment = lead;
                r.members = all;
                r.member_count = lead ? grp->member_count : 0;
                complete_join(c, grp, m, &r);
                free(all);
            } else {
                /* before v9 the old leader id is returned so the member does not run the assignor */
                struct gr_join_result r = join_ok(grp, m->member_id, current_leader);
                complete_join(c, grp, m, &r);
            }
        } else {
            maybe_prepare_rebalance_or_complete_join(c, grp, "static member rejoined with a protocol change");
        }
    } else if (grp->state == GR_GROUP_COMPLETING_REBALANCE) {
        prepare_rebalance(c, grp, "static member rejoined during CompletingRebalance");
    } else {
        maybe_complete_join_phase(c, grp);
    }
    if (old_protocols) {
        for (int32_t i = 0; i < old_protocol_count; i++) {
            free(old_protocols[i].name);
            free(old_protocols[i].metadata);
        }
        free(old_protocols);
    }
    free(old_member_id);
    free(current_leader);
}

/* acceptJoiningMember */
static bool accept_joining_member(const struct gr_coordinator *c, const struct gr_group *grp,
                                  struct gr_str member_id)
{
    struct gr_member *m;
    switch (grp->state) {
    case GR_GROUP_EMPTY:
    case GR_GROUP_DEAD:
        return true;
    case GR_GROUP_PREPARING_REBALANCE:
        m = find_member(grp, member_id);
        return (m && m->join_waiter) || grp->awaiting_join_count < c->cfg.max_size;
    case GR_GROUP_COMPLETING_REBALANCE:
    case GR_GROUP_STABLE:
        return find_member(grp, member_id) || grp->member_count < c->cfg.max_size;
    }
    return false;
}

/* classicGroupJoinNewMember and its static/dynamic branches */
static void join_new_member(struct gr_coordinator *c, struct gr_group *grp, const struct gr_join_params *p,
                            int32_t rebalance_timeout_ms)
{
    if (grp->state == GR_GROUP_DEAD) {
        join_error(c, p->waiter, GR_ERR_COORDINATOR_NOT_AVAILABLE, gr_str_c(""));
        return;
    }
    if (!supports_protocols(grp, p->protocol_type, p->protocols, p->protocol_count)) {
        join_error(c, p->waiter, GR_ERR_INCONSISTENT_GROUP_PROTOCOL, gr_str_c(""));
        return;
    }
    char *new_id = generate_member_id(c, p->client_id, p->group_instance_id);
    if (p->group_instance_id.len >= 0) {
        struct gr_member *existing = find_static(grp, p->group_instance_id);
        if (existing)
            update_static_member(c, grp, p, existing, new_id, rebalance_timeout_ms);
        else
            add_member_then_rebalance(c, grp, p, new_id, rebalance_timeout_ms);
        return;
    }
    if (p->api_version >= 4) { /* KIP-394: the member id must be known before joining */
        if (grp->pending_count == grp->pending_cap) {
            grp->pending_cap = grp->pending_cap ? 2 * grp->pending_cap : 4;
            grp->pending = xrealloc(grp->pending, (size_t)grp->pending_cap * sizeof *grp->pending);
        }
        struct gr_pending_member *pm = &grp->pending[grp->pending_count++];
        pm->member_id = new_id;
        pm->deadline_ms = GR_NO_DEADLINE;
        gr_coord_set_deadline(c, &pm->deadline_ms, gr_coord_now(c) + p->session_timeout_ms);
        join_error(c, p->waiter, GR_ERR_MEMBER_ID_REQUIRED, gr_str_c(new_id));
        return;
    }
    add_member_then_rebalance(c, grp, p, new_id, rebalance_timeout_ms);
}

/* classicGroupJoinExistingMember */
static void join_existing_member(struct gr_coordinator *c, struct gr_group *grp,
                                 const struct gr_join_params *p, int32_t rebalance_timeout_ms)
{
    if (grp->state == GR_GROUP_DEAD) {
        join_error(c, p->waiter, GR_ERR_COORDINATOR_NOT_AVAILABLE, p->member_id);
        return;
    }
    if (!supports_protocols(grp, p->protocol_type, p->protocols, p->protocol_count)) {
        join_error(c, p->waiter, GR_ERR_INCONSISTENT_GROUP_PROTOCOL, p->member_id);
        return;
    }
    int32_t pi = pending_index(grp, p->member_id);
    if (pi >= 0) {
        if (p->group_instance_id.len >= 0) { /* Kafka: IllegalStateException -> UNKNOWN_SERVER_ERROR */
            join_error(c, p->waiter, GR_ERR_UNKNOWN_SERVER_ERROR, gr_str_c(""));
            return;
        }
        add_member_then_rebalance(c, grp, p, gr_coord_strndup(p->member_id.ptr, p->member_id.len),
                                  rebalance_timeout_ms);
        return;
    }
    /* ClassicGroup.validateMember */
    if (p->group_instance_id.len >= 0) {
        struct gr_member *s = find_static(grp, p->group_instance_id);
        if (!s) {
            join_error(c, p->waiter, GR_ERR_UNKNOWN_MEMBER_ID, p->member_id);
            return;
        }
        if (!cstr_eq(s->member_id, p->member_id)) {
            join_error(c, p->waiter, GR_ERR_FENCED_INSTANCE_ID, p->member_id);
            return;
        }
    }
    struct gr_member *m = find_member(grp, p->member_id);
    if (!m) {
        join_error(c, p->waiter, GR_ERR_UNKNOWN_MEMBER_ID, p->member_id);
        return;
    }
    switch (grp->state) {
    case GR_GROUP_PREPARING_REBALANCE:
        update_member(c, grp, m, p, rebalance_timeout_ms, p->waiter);
        maybe_prepare_rebalance_or_complete_join(c, grp, "member joining during PreparingRebalance");
        return;
    case GR_GROUP_COMPLETING_REBALANCE:
        if (member_matches(m, p->protocols, p->protocol_count)) {
            /* the same metadata (a lost JoinGroup response): the current generation again */
            bool lead = is_leader(grp, m->member_id);
            struct gr_join_member_out *all = lead ? current_members(grp) : NULL;
            struct gr_join_result r = join_ok(grp, m->member_id, grp->leader_id);
            r.members = all;
            r.member_count = lead ? grp->member_count : 0;
            deliver_join(c, p->waiter, &r);
            free(all);
        } else {
            update_member(c, grp, m, p, rebalance_timeout_ms, p->waiter);
            maybe_prepare_rebalance_or_complete_join(c, grp,
                                                     "member metadata changed during CompletingRebalance");
        }
        return;
    case GR_GROUP_STABLE:
        if (is_leader(grp, m->member_id) || !member_matches(m, p->protocols, p->protocol_count)) {
            /* the leader rejoining forces a rebalance (e.g. topic metadata changed) */
            update_member(c, grp, m, p, rebalance_timeout_ms, p->waiter);
            maybe_prepare_rebalance_or_complete_join(c, grp,
                                                     "leader rejoin or member metadata change during Stable");
        } else {
            struct gr_join_result r = join_ok(grp, m->member_id, grp->leader_id);
            deliver_join(c, p->waiter, &r);
        }
        return;
    default:
        join_error(c, p->waiter, GR_ERR_UNKNOWN_MEMBER_ID, p->member_id);
        return;
    }
}

static void join_impl(struct gr_coordinator *c, const struct gr_join_params *p)
{
    if (p->group_id.len <= 0) {
        join_error(c, p->waiter, GR_ERR_INVALID_GROUP_ID, p->member_id);
        return;
    }
    int16_t own = gr_coord_check(c, p->group_id);
    if (own) {
        join_error(c, p->waiter, own, p->member_id);
        return;
    }
    if (p->session_timeout_ms < c->cfg.min_session_timeout_ms ||
        p->session_timeout_ms > c->cfg.max_session_timeout_ms) {
        join_error(c, p->waiter, GR_ERR_INVALID_SESSION_TIMEOUT, p->member_id);
        return;
    }
    /* JoinGroupRequest: version 0 has no rebalance timeout; the session timeout is used (KAFKA-8653) */
    int32_t rebalance_timeout_ms = p->api_version == 0 ? p->session_timeout_ms : p->rebalance_timeout_ms;
    bool unknown_member = p->member_id.len <= 0;
    struct gr_group *grp = gr_coord_group_find(c, p->group_id);
    bool new_group = false;
    if (!grp) {
        if (!unknown_member) {
            join_error(c, p->waiter, GR_ERR_UNKNOWN_MEMBER_ID, p->member_id);
            return;
        }
        grp = gr_coord_group_create(c, p->group_id);
        new_group = true;
    }
    if (!accept_joining_member(c, grp, p->member_id)) {
        struct gr_member *m = find_member(grp, p->member_id);
        if (m) group_remove_member(c, grp, m, GR_ERR_GROUP_MAX_SIZE_REACHED);
        join_error(c, p->waiter, GR_ERR_GROUP_MAX_SIZE_REACHED, gr_str_c(""));
    } else if (unknown_member) {
        join_new_member(c, grp, p, rebalance_timeout_ms);
    } else {
        join_existing_member(c, grp, p, rebalance_timeout_ms);
    }
    if (new_group) write_empty_group_metadata(c, grp); /* the group exists from now on */
}

enum gr_coord_wait gr_coord_join(struct gr_coordinator *c, const struct gr_join_params *p)
{
    GR_DEBUG("JoinGroup %p from member %.*s of group %.*s (v%d)", p->waiter,
             (int)(p->member_id.len > 0 ? p->member_id.len : 0), p->member_id.ptr ? p->member_id.ptr : "",
             (int)(p->group_id.len > 0 ? p->group_id.len : 0), p->group_id.ptr ? p->group_id.ptr : "",
             p->api_version);
    c->current_waiter = p->waiter;
    c->current_answered = false;
    join_impl(c, p);
    c->current_waiter = NULL;
    return c->current_answered ? GR_COORD_ANSWERED : GR_COORD_PARKED;
}

/* ---- SyncGroup ---- */

/* validateMember */
static int16_t validate_member(const struct gr_group *grp, struct gr_str member_id, struct gr_str instance_id)
{
    if (instance_id.len >= 0) {
        struct gr_member *s = find_static(grp, instance_id);
        if (!s) return GR_ERR_UNKNOWN_MEMBER_ID;
        if (!cstr_eq(s->member_id, member_id)) return GR_ERR_FENCED_INSTANCE_ID;
    }
    return find_member(grp, member_id) ? GR_ERR_NONE : GR_ERR_UNKNOWN_MEMBER_ID;
}

static bool protocol_inconsistent(struct gr_str req, const char *grp_value)
{
    return req.len >= 0 && grp_value && !cstr_eq(grp_value, req);
}

/* removePendingSyncMember */
static void remove_pending_sync(struct gr_group *grp, struct gr_member *m)
{
    m->pending_sync = false;
    if (grp->state == GR_GROUP_COMPLETING_REBALANCE || grp->state == GR_GROUP_STABLE) {
        if (has_received_sync_from_all(grp)) grp->sync_deadline_ms = GR_NO_DEADLINE;
    } else {
        grp->sync_deadline_ms = GR_NO_DEADLINE;
    }
}

/* The completion of the leader's assignment write (classicGroupSyncToClassicGroup's appendFuture): once the
 * record is durable, and only if the group is still CompletingRebalance in the same generation, every
 * member gets its assignment and the group is Stable; if the write failed, everyone gets the error and
 * the group rebalances. `err`: 0 committed, else -errno (never will be; -ETIMEDOUT: not committed within
 * GR_COORD_WRITE_TIMEOUT_MS, answered COORDINATOR_NOT_AVAILABLE as Kafka 4's runtime does). */
static void assignment_committed(struct gr_coordinator *c, struct gr_group *grp, int err)
{
    if (!grp->assignment_pending) return;
    if (grp->state != GR_GROUP_COMPLETING_REBALANCE || grp->generation_id != grp->assignment_generation) {
        drop_pending_assignment(grp);
        return;
    }
    if (err < 0) {
        drop_pending_assignment(grp);
        reset_and_propagate_assignment_with_error(c, grp, gr_coord_append_error(err));
        maybe_prepare_rebalance_or_complete_join(c, grp, "error storing the group assignment");
        return;
    }
    for (int32_t i = 0; i < grp->member_count; i++) {
        struct gr_member *m = grp->members[i];
        free(m->assignment);
        m->assignment = m->next_assignment;
        m->assignment_len = m->next_assignment_len;
        m->next_assignment = NULL;
        m->next_assignment_len = 0;
    }
    grp->assignment_pending = false;
    grp->assignment_deadline_ms = GR_NO_DEADLINE;
    propagate_assignment(c, grp, GR_ERR_NONE);
    transition(c, grp, GR_GROUP_STABLE);
}

/* The partition's done hook of grp->assignment_wait (called once; never after drop_pending_assignment). */
static void assignment_wait_done(struct gr_partition_waiter *w, int err)
{
    struct gr_group *grp = (struct gr_group *)((char *)w - offsetof(struct gr_group, assignment_wait));
    assignment_committed(w->ctx, grp, err);
}

static void sync_from_leader(struct gr_coordinator *c, struct gr_group *grp, const struct gr_sync_params *p)
{
    GR_INFO("assignment received from leader %s for group %s generation %d", grp->leader_id, grp->group_id,
            grp->generation_id);
    /* every member gets the leader's bytes for it, or an empty assignment (the last entry wins) */
    struct gr_bytes *assign = xmalloc((size_t)(grp->member_count + 1) * sizeof *assign);
    for (int32_t i = 0; i < grp->member_count; i++) {
        assign[i] = (struct gr_bytes){(const uint8_t *)"", 0};
        for (int32_t k = 0; k < p->assignment_count; k++)
            if (cstr_eq(grp->members[i]->member_id, p->assignments[k].member_id))
                assign[i] = p->assignments[k].assignment.len > 0 ? p->assignments[k].assignment
                                                                 : (struct gr_bytes){(const uint8_t *)"", 0};
    }
    drop_pending_assignment(grp); /* a leader's retried SyncGroup replaces its earlier write */
    int64_t end = -1;
    int rc = write_group_metadata_end(c, grp, assign, &end);
    if (rc) {
        free(assign);
        reset_and_propagate_assignment_with_error(c, grp, gr_coord_append_error(rc));
        maybe_prepare_rebalance_or_complete_join(c, grp, "error storing the group assignment");
        return;
    }
    for (int32_t i = 0; i < grp->member_count; i++) {
        struct gr_member *m = grp->members[i];
        m->next_assignment = assign[i].len > 0 ? xmalloc((size_t)assign[i].len) : NULL;
        if (assign[i].len > 0) memcpy(m->next_assignment, assign[i].ptr, (size_t)assign[i].len);
        m->next_assignment_len = assign[i].len;
    }
    free(assign);
    grp->assignment_pending = true;
    grp->assignment_generation = grp->generation_id;
    grp->assignment_end_offset = end;
    if (!c->hooks.wait_committed) {
        assignment_committed(c, grp, 0);
        return;
    }
    gr_partition_waiter_init(&grp->assignment_wait, assignment_wait_done, c);
    rc = c->hooks.wait_committed(c->hooks.ctx, grp->partition, end, &grp->assignment_wait);
    if (rc < 0)
        assignment_committed(c, grp, rc); /* done at once (inside) otherwise, or later */
    else if (grp->assignment_pending)     /* still waiting: Kafka's runtime fails the write at its timeout */
        gr_coord_set_deadline(c, &grp->assignment_deadline_ms, gr_coord_now(c) + GR_COORD_WRITE_TIMEOUT_MS);
}

static void sync_impl(struct gr_coordinator *c, const struct gr_sync_params *p)
{
    if (p->group_id.len <= 0) {
        sync_error(c, p->waiter, GR_ERR_INVALID_GROUP_ID);
        return;
    }
    int16_t own = gr_coord_check(c, p->group_id);
    if (own) {
        sync_error(c, p->waiter, own);
        return;
    }
    if (p->api_version >= 5 && (p->protocol_type.len < 0 || p->protocol_name.len < 0)) {
        sync_error(c, p->waiter, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
        return;
    }
    struct gr_group *grp = gr_coord_group_find(c, p->group_id);
    if (!grp || grp->state == GR_GROUP_EMPTY) {
        sync_error(c, p->waiter, GR_ERR_UNKNOWN_MEMBER_ID);
        return;
    }
    /* validateSyncGroup */
    if (grp->state == GR_GROUP_DEAD) {
        sync_error(c, p->waiter, GR_ERR_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    int16_t err = validate_member(grp, p->member_id, p->group_instance_id);
    if (!err && p->generation_id != grp->generation_id) err = GR_ERR_ILLEGAL_GENERATION;
    if (!err && (protocol_inconsistent(p->protocol_type, grp->protocol_type) ||
                 protocol_inconsistent(p->protocol_name, grp->protocol_name)))
        err = GR_ERR_INCONSISTENT_GROUP_PROTOCOL;
    if (err) {
        sync_error(c, p->waiter, err);
        return;
    }
    struct gr_member *m = find_member(grp, p->member_id);
    if (grp->state == GR_GROUP_PREPARING_REBALANCE) {
        sync_error(c, p->waiter, GR_ERR_REBALANCE_IN_PROGRESS);
    } else if (grp->state == GR_GROUP_COMPLETING_REBALANCE) {
        if (m->sync_waiter && m->sync_waiter != p->waiter) {
            void *old = m->sync_waiter;
            m->sync_waiter = NULL;
            sync_error(c, old, GR_ERR_REBALANCE_IN_PROGRESS);
        }
        m->sync_waiter = p->waiter;
        remove_pending_sync(grp, m);
        if (is_leader(grp, m->member_id)) sync_from_leader(c, grp, p);
    } else if (grp->state == GR_GROUP_STABLE) {
        remove_pending_sync(grp, m);
        struct gr_sync_result r = {0,
                                   view(grp->protocol_type),
                                   view(grp->protocol_name),
                                   {m->assignment ? m->assignment : (const uint8_t *)"", m->assignment_len}};
        deliver_sync(c, p->waiter, &r);
    }
}

enum gr_coord_wait gr_coord_sync(struct gr_coordinator *c, const struct gr_sync_params *p)
{
    GR_DEBUG("SyncGroup %p from member %.*s generation %d of group %.*s, %d assignments", p->waiter,
             (int)(p->member_id.len > 0 ? p->member_id.len : 0), p->member_id.ptr ? p->member_id.ptr : "",
             p->generation_id, (int)(p->group_id.len > 0 ? p->group_id.len : 0),
             p->group_id.ptr ? p->group_id.ptr : "", p->assignment_count);
    c->current_waiter = p->waiter;
    c->current_answered = false;
    sync_impl(c, p);
    c->current_waiter = NULL;
    return c->current_answered ? GR_COORD_ANSWERED : GR_COORD_PARKED;
}

/* ---- Heartbeat / LeaveGroup ---- */

static int16_t heartbeat_impl(struct gr_coordinator *c, struct gr_str group_id, struct gr_str member_id,
                              struct gr_str group_instance_id, int32_t generation_id);

int16_t gr_coord_heartbeat(struct gr_coordinator *c, struct gr_str group_id, struct gr_str member_id,
                           struct gr_str group_instance_id, int32_t generation_id)
{
    int16_t err = heartbeat_impl(c, group_id, member_id, group_instance_id, generation_id);
    GR_DEBUG("Heartbeat from member %.*s generation %d: error %d",
             (int)(member_id.len > 0 ? member_id.len : 0), member_id.ptr ? member_id.ptr : "", generation_id,
             err);
    return err;
}

static int16_t heartbeat_impl(struct gr_coordinator *c, struct gr_str group_id, struct gr_str member_id,
                              struct gr_str group_instance_id, int32_t generation_id)
{
    if (group_id.len <= 0) return GR_ERR_INVALID_GROUP_ID;
    int16_t own = gr_coord_check(c, group_id);
    if (own) return own;
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp) return GR_ERR_UNKNOWN_MEMBER_ID;
    if (grp->state == GR_GROUP_DEAD) return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    int16_t err = validate_member(grp, member_id, group_instance_id);
    if (err) return err;
    if (generation_id != grp->generation_id) return GR_ERR_ILLEGAL_GENERATION;
    struct gr_member *m = find_member(grp, member_id);
    switch (grp->state) {
    case GR_GROUP_EMPTY:
        return GR_ERR_UNKNOWN_MEMBER_ID;
    case GR_GROUP_PREPARING_REBALANCE:
        schedule_heartbeat(c, m, m->session_timeout_ms);
        return GR_ERR_REBALANCE_IN_PROGRESS;
    case GR_GROUP_COMPLETING_REBALANCE:
    case GR_GROUP_STABLE:
        /* heartbeats may start after the JoinGroup response, before SyncGroup */
        schedule_heartbeat(c, m, m->session_timeout_ms);
        return GR_ERR_NONE;
    default:
        return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    }
}

/* removeCurrentMemberFromClassicGroup */
static void remove_current_member(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m,
                                  struct gr_str reason)
{
    GR_INFO("group %s: member %s left (reason: %.*s)", grp->group_id, m->member_id,
            reason.len > 0 ? (int)reason.len : 12, reason.len > 0 ? reason.ptr : "not provided");
    if (m->join_waiter) {
        struct gr_join_result r = {GR_ERR_UNKNOWN_MEMBER_ID,
                                   -1,
                                   GR_STR_NULL,
                                   GR_STR_NULL,
                                   gr_str_c(""),
                                   false,
                                   gr_str_c(""),
                                   NULL,
                                   0};
        complete_join(c, grp, m, &r);
    }
    group_remove_member(c, grp, m, GR_ERR_UNKNOWN_MEMBER_ID);
}

int16_t gr_coord_leave(struct gr_coordinator *c, struct gr_str group_id, struct gr_leave_member *members,
                       int32_t count)
{
    if (group_id.len <= 0) return GR_ERR_INVALID_GROUP_ID;
    int16_t own = gr_coord_check(c, group_id);
    if (own) return own;
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp) {
        for (int32_t i = 0; i < count; i++)
            members[i].error_code = GR_ERR_UNKNOWN_MEMBER_ID;
        return GR_ERR_NONE;
    }
    if (grp->state == GR_GROUP_DEAD) return GR_ERR_COORDINATOR_NOT_AVAILABLE;
    int valid = 0;
    for (int32_t i = 0; i < count; i++) {
        struct gr_leave_member *lm = &members[i];
        lm->error_code = GR_ERR_NONE;
        if (lm->member_id.len <= 0) {
            /* administrative removal by group.instance.id */
            struct gr_member *s = find_static(grp, lm->group_instance_id);
            if (s)
                remove_current_member(c, grp, s, lm->reason);
            else
                lm->error_code = GR_ERR_UNKNOWN_MEMBER_ID;
        } else if (pending_index(grp, lm->member_id) >= 0) {
            pending_remove_at(grp, pending_index(grp, lm->member_id));
        } else {
            lm->error_code = validate_member(grp, lm->member_id, lm->group_instance_id);
            if (!lm->error_code) remove_current_member(c, grp, find_member(grp, lm->member_id), lm->reason);
        }
        if (!lm->error_code) valid++;
    }
    if (valid) {
        if (grp->state == GR_GROUP_STABLE || grp->state == GR_GROUP_COMPLETING_REBALANCE)
            maybe_prepare_rebalance_or_complete_join(c, grp, "explicit LeaveGroup");
        else if (grp->state == GR_GROUP_PREPARING_REBALANCE)
            maybe_complete_join_phase(c, grp);
    }
    return GR_ERR_NONE;
}

void gr_coord_touch_member(struct gr_coordinator *c, struct gr_group *grp, struct gr_str member_id)
{
    struct gr_member *m = find_member(grp, member_id);
    if (m) schedule_heartbeat(c, m, m->session_timeout_ms);
}

/* ---- views ---- */

const char *gr_group_id(const struct gr_group *grp)
{
    return grp->group_id;
}
enum gr_group_state gr_group_state(const struct gr_group *grp)
{
    return grp->state;
}
int32_t gr_group_generation(const struct gr_group *grp)
{
    return grp->generation_id;
}
const char *gr_group_protocol_type(const struct gr_group *grp)
{
    return grp->protocol_type;
}
const char *gr_group_protocol_name(const struct gr_group *grp)
{
    return grp->protocol_name;
}
const char *gr_group_leader(const struct gr_group *grp)
{
    return grp->leader_id;
}
int32_t gr_group_member_count(const struct gr_group *grp)
{
    return grp->member_count;
}
const struct gr_member *gr_group_member_at(const struct gr_group *grp, int32_t i)
{
    return i >= 0 && i < grp->member_count ? grp->members[i] : NULL;
}
const char *gr_member_id(const struct gr_member *m)
{
    return m->member_id;
}
const char *gr_member_instance_id(const struct gr_member *m)
{
    return m->group_instance_id;
}
const char *gr_member_client_id(const struct gr_member *m)
{
    return m->client_id;
}
const char *gr_member_client_host(const struct gr_member *m)
{
    return m->client_host;
}
struct gr_bytes gr_member_metadata(const struct gr_member *m, const struct gr_group *grp)
{
    const struct gr_member_protocol *mp = member_protocol(m, grp->protocol_name);
    return mp ? (struct gr_bytes){mp->metadata, mp->metadata_len} : GR_BYTES_NULL;
}
struct gr_bytes gr_member_assignment(const struct gr_member *m)
{
    return (struct gr_bytes){m->assignment ? m->assignment : (const uint8_t *)"", m->assignment_len};
}

/* ---- DeleteGroups ---- */

int16_t gr_coord_group_delete(struct gr_coordinator *c, struct gr_str group_id)
{
    int16_t own = gr_coord_check(c, group_id);
    if (own) return own;
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!grp || grp->state == GR_GROUP_DEAD) return GR_ERR_GROUP_ID_NOT_FOUND;
    if (grp->state != GR_GROUP_EMPTY) return GR_ERR_NON_EMPTY_GROUP;
    int32_t n = gr_offsets_count(grp);
    struct gr_coord_record *recs = xmalloc((size_t)(n + grp->txn_count + 1) * sizeof *recs);
    int32_t k = 0;
    for (int32_t t = 0; t < grp->topic_count; t++)
        for (int32_t i = 0; i < grp->topics[t].count; i++)
            if (gr_offset_commit_record(&recs[k], grp->group_id, grp->topics[t].name,
                                        grp->topics[t].parts[i].partition, NULL) == 0)
                k++;
    /* the partitions only pending in a transaction get a tombstone too, once each
       (OffsetMetadataManager.deleteAllOffsets) */
    for (int32_t i = 0; i < grp->txn_count; i++) {
        const struct gr_txn_offset *x = &grp->txn[i];
        bool seen = gr_offsets_find(grp, gr_str_c(x->topic), x->e.partition) != NULL;
        for (int32_t j = 0; j < i && !seen; j++)
            seen = grp->txn[j].e.partition == x->e.partition && strcmp(grp->txn[j].topic, x->topic) == 0;
        if (!seen && gr_offset_commit_record(&recs[k], grp->group_id, x->topic, x->e.partition, NULL) == 0)
            k++;
    }
    if (gr_group_metadata_record(&recs[k], grp->group_id, NULL) == 0) k++;
    int64_t end;
    int rc = c->hooks.append(c->hooks.ctx, grp->partition, recs, k, &end);
    gr_coord_records_free(recs, k);
    free(recs);
    if (rc) return gr_coord_append_error(rc);
    GR_INFO("deleted group %s and its %d committed offsets", grp->group_id, n);
    gr_coord_group_remove(c, grp);
    return GR_ERR_NONE;
}

/* ---- timers ---- */

int64_t gr_coord_next_deadline_ms(const struct gr_coordinator *c)
{
    int64_t next = c->expiration_deadline_ms;
    for (int32_t g = 0; g < c->group_count; g++) {
        const struct gr_group *grp = c->groups[g];
        if (grp->join_deadline_ms < next) next = grp->join_deadline_ms;
        if (grp->sync_deadline_ms < next) next = grp->sync_deadline_ms;
        if (grp->assignment_deadline_ms < next) next = grp->assignment_deadline_ms;
        for (int32_t i = 0; i < grp->member_count; i++)
            if (grp->members[i]->heartbeat_deadline_ms < next) next = grp->members[i]->heartbeat_deadline_ms;
        for (int32_t i = 0; i < grp->pending_count; i++)
            if (grp->pending[i].deadline_ms < next) next = grp->pending[i].deadline_ms;
    }
    return next;
}

int64_t gr_coord_rearm(struct gr_coordinator *c)
{
    c->deadline_hint = gr_coord_next_deadline_ms(c);
    return c->deadline_hint;
}

/* tryCompleteInitialRebalanceElseSchedule */
static void initial_rebalance_timer(struct gr_coordinator *c, struct gr_group *grp)
{
    int32_t delay = grp->initial_delay_ms, remaining = grp->initial_remaining_ms;
    if (grp->new_member_added && remaining != 0) {
        grp->new_member_added = false;
        int32_t new_delay =
            c->cfg.initial_rebalance_delay_ms < remaining ? c->cfg.initial_rebalance_delay_ms : remaining;
        int32_t new_remaining = remaining - delay > 0 ? remaining - delay : 0;
        grp->initial_delay_ms = new_delay;
        grp->initial_remaining_ms = new_remaining;
        grp->join_timer = GR_JOIN_TIMER_INITIAL;
        gr_coord_set_deadline(c, &grp->join_deadline_ms, gr_coord_now(c) + new_delay);
    } else {
        complete_join_phase(c, grp);
    }
}

/* expirePendingSync */
static void pending_sync_timer(struct gr_coordinator *c, struct gr_group *grp)
{
    if (grp->sync_generation != grp->generation_id) return;
    if (grp->state != GR_GROUP_COMPLETING_REBALANCE && grp->state != GR_GROUP_STABLE) return;
    if (has_received_sync_from_all(grp)) return;
    for (int32_t i = 0; i < grp->member_count;) {
        struct gr_member *m = grp->members[i];
        if (m->pending_sync) {
            GR_INFO("group %s: removing member %s, which did not send SyncGroup in time", grp->group_id,
                    m->member_id);
            group_remove_member(c, grp, m, GR_ERR_UNKNOWN_MEMBER_ID);
        } else {
            i++;
        }
    }
    prepare_rebalance(c, grp, "members did not sync in time");
}

/* expireClassicGroupMemberHeartbeat for member i; returns true if the member was removed */
static bool heartbeat_timer(struct gr_coordinator *c, struct gr_group *grp, struct gr_member *m)
{
    m->heartbeat_deadline_ms = GR_NO_DEADLINE;
    bool satisfied = !m->is_new && (m->join_waiter || m->sync_waiter); /* hasSatisfiedHeartbeat */
    if (satisfied) return false;
    GR_INFO("group %s: member %s failed its session timeout, removing it", grp->group_id, m->member_id);
    remove_member_and_update(c, grp, m, "member session expired");
    return true;
}

/* Runs the due timers of one group (never removes the group). */
static void group_timers(struct gr_coordinator *c, struct gr_group *grp, int64_t now)
{
    for (int32_t i = 0; i < grp->pending_count;) {
        if (grp->pending[i].deadline_ms <= now) {
            GR_INFO("group %s: pending member %s expired", grp->group_id, grp->pending[i].member_id);
            pending_remove_at(grp, i);
            /* removePendingMemberAndUpdateClassicGroup */
            if (grp->state == GR_GROUP_PREPARING_REBALANCE && has_all_members_joined(grp))
                complete_join_phase(c, grp);
        } else {
            i++;
        }
    }
    for (int32_t i = 0; i < grp->member_count;) {
        struct gr_member *m = grp->members[i];
        if (m->heartbeat_deadline_ms <= now && heartbeat_timer(c, grp, m)) {
            i = 0; /* membership changed: rescan (removed members no longer have deadlines) */
            continue;
        }
        i++;
    }
    if (grp->join_deadline_ms <= now) {
        enum gr_join_timer kind = grp->join_timer;
        grp->join_timer = GR_JOIN_TIMER_NONE;
        grp->join_deadline_ms = GR_NO_DEADLINE;
        if (kind == GR_JOIN_TIMER_INITIAL)
            initial_rebalance_timer(c, grp);
        else if (kind == GR_JOIN_TIMER_NORMAL)
            complete_join_phase(c, grp);
    }
    if (grp->sync_deadline_ms <= now) {
        grp->sync_deadline_ms = GR_NO_DEADLINE;
        pending_sync_timer(c, grp);
    }
    if (grp->assignment_deadline_ms <= now) { /* the assignment's write timed out (never committed) */
        grp->assignment_deadline_ms = GR_NO_DEADLINE;
        if (grp->assignment_pending) assignment_committed(c, grp, -ETIMEDOUT);
    }
}

int64_t gr_coord_tick(struct gr_coordinator *c)
{
    int64_t now = gr_coord_now(c);
    for (int32_t g = 0; g < c->group_count; g++)
        if (gr_coord_partition_owned(c, c->groups[g]->partition)) group_timers(c, c->groups[g], now);
    if (c->expiration_deadline_ms <= now) {
        c->expiration_deadline_ms = now + c->cfg.offsets_retention_check_interval_ms;
        gr_offsets_expire(c);
    }
    return gr_coord_rearm(c);
}

/* ---- life cycle ---- */

struct gr_coordinator *gr_coord_create(const struct gr_coord_config *cfg, const struct gr_coord_hooks *hooks)
{
    struct gr_coordinator *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg;
    if (c->cfg.offsets_partitions < 1) c->cfg.offsets_partitions = 1;
    c->hooks = *hooks;
    c->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)c;
    c->deadline_hint = GR_NO_DEADLINE;
    c->expiration_deadline_ms = GR_NO_DEADLINE;
    index_rebuild(c, 64);
    if (gr_coord_ownership_init(c) < 0) {
        free(c->buckets);
        free(c);
        return NULL;
    }
    return c;
}

void *gr_coord_hooks_ctx(const struct gr_coordinator *c)
{
    return c->hooks.ctx;
}

void gr_coord_destroy(struct gr_coordinator *c)
{
    if (!c) return;
    /* drop waiters silently: the server frees parked requests itself at shutdown */
    for (int32_t g = 0; g < c->group_count; g++)
        for (int32_t i = 0; i < c->groups[g]->member_count; i++) {
            c->groups[g]->members[i]->join_waiter = NULL;
            c->groups[g]->members[i]->sync_waiter = NULL;
        }
    while (c->group_count)
        gr_coord_group_remove(c, c->groups[c->group_count - 1]);
    free(c->groups);
    free(c->buckets);
    free(c->part_state);
    free(c->part_epoch);
    free(c);
}

/* ---- replay (GroupMetadataManager.replay(GroupMetadataKey, GroupMetadataValue)) ---- */

static void group_reset_members(struct gr_coordinator *c, struct gr_group *grp)
{
    while (grp->member_count)
        group_remove_member(c, grp, grp->members[grp->member_count - 1], GR_ERR_UNKNOWN_MEMBER_ID);
    for (int32_t i = 0; i < grp->pending_count; i++)
        free(grp->pending[i].member_id);
    grp->pending_count = 0;
}

static int replay_group(struct gr_coordinator *c, struct gr_str group_id, const uint8_t *value,
                        size_t value_len)
{
    struct gr_group *grp = gr_coord_group_find(c, group_id);
    if (!value) {
        if (!grp) return 0;
        if (gr_offsets_count(grp)) { /* offsets outlive a metadata tombstone: keep a simple group */
            group_reset_members(c, grp);
            free(grp->protocol_type);
            free(grp->protocol_name);
            free(grp->leader_id);
            free(grp->md_value);
            grp->protocol_type = grp->protocol_name = grp->leader_id = NULL;
            grp->md_value = NULL;
            grp->state = GR_GROUP_EMPTY;
            return 0;
        }
        gr_coord_group_remove(c, grp);
        return 0;
    }
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    struct gr_group_metadata_value v;
    if (gr_group_metadata_value_decode(value, value_len, &arena, &v) < 0) {
        gr_arena_reset(&arena);
        return -1;
    }
    if (!grp) grp = gr_coord_group_create(c, group_id);
    group_reset_members(c, grp);
    grp->state = v.member_count ? GR_GROUP_STABLE : GR_GROUP_EMPTY;
    grp->previous_state = GR_GROUP_DEAD;
    grp->generation_id = v.generation;
    free(grp->protocol_type);
    free(grp->protocol_name);
    free(grp->leader_id);
    grp->protocol_type =
        v.protocol_type.len > 0 ? gr_coord_strndup(v.protocol_type.ptr, v.protocol_type.len) : NULL;
    grp->protocol_name = gr_coord_strndup(v.protocol.ptr, v.protocol.len);
    grp->leader_id = gr_coord_strndup(v.leader.ptr, v.leader.len);
    grp->state_timestamp_ms = v.current_state_timestamp_ms;
    grp->join_timer = GR_JOIN_TIMER_NONE;
    grp->join_deadline_ms = grp->sync_deadline_ms = grp->assignment_deadline_ms = GR_NO_DEADLINE;
    for (int32_t i = 0; i < v.member_count; i++) {
        const struct gr_group_metadata_member *mm = &v.members[i];
        struct gr_member *m = xmalloc(sizeof *m);
        m->member_id = gr_coord_strndup(mm->member_id.ptr, mm->member_id.len);
        m->group_instance_id = gr_coord_strndup(mm->group_instance_id.ptr, mm->group_instance_id.len);
        m->client_id = gr_coord_strndup(mm->client_id.ptr, mm->client_id.len);
        m->client_host = gr_coord_strndup(mm->client_host.ptr, mm->client_host.len);
        m->protocol_type = xstrdup(grp->protocol_type ? grp->protocol_type : "");
        m->rebalance_timeout_ms =
            mm->rebalance_timeout_ms == -1 ? mm->session_timeout_ms : mm->rebalance_timeout_ms;
        m->session_timeout_ms = mm->session_timeout_ms;
        m->heartbeat_deadline_ms = GR_NO_DEADLINE;
        struct gr_join_protocol jp = {v.protocol.len >= 0 ? v.protocol : gr_str_c(""), mm->subscription};
        set_protocols(m, &jp, 1);
        set_assignment(m, mm->assignment.ptr, mm->assignment.len);
        group_add(grp, m, NULL);
    }
    /* group_add made the first member leader when none was recorded; keep the recorded one */
    free(grp->leader_id);
    grp->leader_id = gr_coord_strndup(v.leader.ptr, v.leader.len);
    compute_subscribed_topics(grp);
    free(grp->md_value);
    grp->md_value = xmalloc(value_len);
    memcpy(grp->md_value, value, value_len);
    grp->md_value_len = value_len;
    gr_arena_reset(&arena);
    return 0;
}

int gr_coord_replay(struct gr_coordinator *c, const uint8_t *key, size_t key_len, const uint8_t *value,
                    size_t value_len)
{
    return gr_coord_replay_record(c, -1, -1, key, key_len, value, value_len);
}

int gr_coord_replay_record(struct gr_coordinator *c, int64_t record_offset, int64_t producer_id,
                           const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len)
{
    struct gr_offset_commit_key ok;
    struct gr_str group;
    switch (gr_coord_key_decode(key, key_len, &ok, &group)) {
    case GR_COORD_KEY_OFFSET_COMMIT:
        return gr_offsets_replay(c, &ok, value, value_len, record_offset, producer_id);
    case GR_COORD_KEY_GROUP_METADATA:
        return replay_group(c, group, value, value_len);
    default:
        return key_len >= 2 ? 0 : -1; /* another record type (e.g. KIP-848 consumer groups): not ours */
    }
}

/* GroupMetadataManager.onLoaded, one group */
void gr_coord_group_loaded(struct gr_coordinator *c, struct gr_group *grp)
{
    for (int32_t i = 0; i < grp->member_count; i++)
        schedule_heartbeat(c, grp->members[i], grp->members[i]->session_timeout_ms);
    if (grp->member_count > c->cfg.max_size) prepare_rebalance(c, grp, "loaded group is over group.max.size");
}

/* onLoaded */
void gr_coord_load_done(struct gr_coordinator *c)
{
    for (int32_t g = 0; g < c->group_count; g++)
        gr_coord_group_loaded(c, c->groups[g]);
    gr_coord_set_deadline(c, &c->expiration_deadline_ms,
                          gr_coord_now(c) + c->cfg.offsets_retention_check_interval_ms);
}
