/* fake.c: the coordinator test environment (see fake.h). */
#include "coordinator/tests/fake.h"

#include <stdlib.h>
#include <string.h>

static char *dup_view(struct gr_str s)
{
    if (s.len < 0) return NULL;
    char *p = malloc((size_t)s.len + 1);
    memcpy(p, s.ptr, (size_t)s.len);
    p[s.len] = 0;
    return p;
}

static int64_t mono(void *ctx)
{
    return ((struct fake_env *)ctx)->mono_ms;
}
static int64_t wall(void *ctx)
{
    return ((struct fake_env *)ctx)->wall_ms;
}

static struct fake_rec *rec_add(struct fake_env *env, int32_t partition, int64_t offset, int64_t pid,
                                int16_t epoch, int marker)
{
    if (env->rec_count == env->rec_cap) {
        env->rec_cap = env->rec_cap ? 2 * env->rec_cap : 64;
        env->recs = realloc(env->recs, (size_t)env->rec_cap * sizeof *env->recs);
    }
    struct fake_rec *r = &env->recs[env->rec_count++];
    memset(r, 0, sizeof *r);
    r->partition = partition;
    r->offset = offset;
    r->producer_id = pid;
    r->producer_epoch = epoch;
    r->marker = marker;
    return r;
}

static int append_as(struct fake_env *env, int32_t partition, int64_t pid, int16_t epoch,
                     const struct gr_coord_record *recs, int count, int64_t *end_offset)
{
    if (env->fail_append) return env->fail_append;
    for (int i = 0; i < count; i++) {
        struct fake_rec *r = rec_add(env, partition, env->end_offsets[partition % 64] + i, pid, epoch, 0);
        r->key = malloc(recs[i].key_len);
        memcpy(r->key, recs[i].key, recs[i].key_len);
        r->key_len = recs[i].key_len;
        r->value = NULL;
        r->value_len = 0;
        if (recs[i].value) {
            r->value = malloc(recs[i].value_len + 1);
            memcpy(r->value, recs[i].value, recs[i].value_len);
            r->value_len = recs[i].value_len;
        }
    }
    env->end_offsets[partition % 64] += count;
    *end_offset = env->end_offsets[partition % 64];
    return 0;
}

static int append(void *ctx, int32_t partition, const struct gr_coord_record *recs, int count,
                  int64_t *end_offset)
{
    return append_as(ctx, partition, -1, -1, recs, count, end_offset);
}

static int append_txn(void *ctx, int32_t partition, const struct gr_coord_txn_write *w,
                      const struct gr_coord_record *recs, int count, int64_t *end_offset)
{
    struct fake_env *env = ctx;
    env->txn_appends++;
    if (w->kind == GR_COORD_TXN_RECORDS)
        return append_as(env, partition, w->producer_id, w->producer_epoch, recs, count, end_offset);
    if (env->fail_append) return env->fail_append;
    rec_add(env, partition, env->end_offsets[partition % 64]++, w->producer_id, w->producer_epoch,
            (int)w->kind);
    *end_offset = env->end_offsets[partition % 64];
    return 0;
}

void fake_join_reset(struct fake_join *j)
{
    free(j->protocol_type);
    free(j->protocol_name);
    free(j->leader);
    free(j->member_id);
    for (int i = 0; i < j->member_count; i++) {
        free(j->members[i]);
        free(j->member_instance[i]);
        free(j->member_meta[i]);
    }
    memset(j, 0, sizeof *j);
}

void fake_sync_reset(struct fake_sync *s)
{
    free(s->protocol_type);
    free(s->protocol_name);
    free(s->assignment);
    memset(s, 0, sizeof *s);
}

static void join_done(void *ctx, void *waiter, const struct gr_join_result *res)
{
    (void)ctx;
    struct fake_join *j = waiter;
    int answers = j->answers;
    fake_join_reset(j);
    j->answers = answers + 1;
    j->error = res->error_code;
    j->generation = res->generation_id;
    j->protocol_type = dup_view(res->protocol_type);
    j->protocol_name = dup_view(res->protocol_name);
    j->leader = dup_view(res->leader);
    j->member_id = dup_view(res->member_id);
    j->skip_assignment = res->skip_assignment;
    j->member_count = res->member_count;
    for (int i = 0; i < res->member_count && i < FAKE_MEMBERS_MAX; i++) {
        j->members[i] = dup_view(res->members[i].member_id);
        j->member_instance[i] = dup_view(res->members[i].group_instance_id);
        struct gr_bytes m = res->members[i].metadata;
        j->member_meta[i] = dup_view((struct gr_str){(const char *)m.ptr, m.len});
        j->member_meta_len[i] = m.len;
    }
}

static void sync_done(void *ctx, void *waiter, const struct gr_sync_result *res)
{
    (void)ctx;
    struct fake_sync *s = waiter;
    int answers = s->answers;
    fake_sync_reset(s);
    s->answers = answers + 1;
    s->error = res->error_code;
    s->protocol_type = dup_view(res->protocol_type);
    s->protocol_name = dup_view(res->protocol_name);
    s->assignment = dup_view((struct gr_str){(const char *)res->assignment.ptr, res->assignment.len});
    s->assignment_len = res->assignment.len;
}

static void hint(void *ctx, int64_t deadline_ms)
{
    ((struct fake_env *)ctx)->hint_ms = deadline_ms;
}

static int wait_committed(void *ctx, int32_t partition, int64_t end_offset, struct gr_partition_waiter *w)
{
    (void)partition;
    (void)end_offset;
    struct fake_env *env = ctx;
    if (env->not_durable > 0)
        env->commit_waiter = w;
    else
        w->done(w, env->not_durable); /* committed at once, or never (negative) */
    return 0;
}

void fake_committed(struct fake_env *env, int err)
{
    struct gr_partition_waiter *w = env->commit_waiter;
    env->commit_waiter = NULL;
    if (w) w->done(w, err);
}

struct gr_coordinator *fake_coord(struct fake_env *env, const struct gr_coord_config *cfg)
{
    struct gr_coord_config def;
    if (!cfg) {
        gr_coord_config_defaults(&def);
        def.offsets_partitions = 4;
        cfg = &def;
    }
    if (!env->wall_ms) env->wall_ms = 1700000000000LL;
    if (!env->mono_ms) env->mono_ms = 1000;
    struct gr_coord_hooks hooks = {env, mono, wall, append, join_done, sync_done, hint, wait_committed};
    struct gr_coordinator *c = gr_coord_create(cfg, &hooks);
    if (c) gr_coord_set_append_txn(c, append_txn);
    return c;
}

void fake_env_free(struct fake_env *env)
{
    for (int i = 0; i < env->rec_count; i++) {
        free(env->recs[i].key);
        free(env->recs[i].value);
    }
    free(env->recs);
    env->recs = NULL;
    env->rec_count = env->rec_cap = 0;
}

void fake_advance(struct gr_coordinator *c, struct fake_env *env, int64_t ms)
{
    /* step through deadlines so that timers fire in order, as the server's ev_timer would */
    int64_t target = env->mono_ms + ms;
    for (;;) {
        int64_t next = gr_coord_next_deadline_ms(c);
        if (next > target) break;
        int64_t step = next > env->mono_ms ? next - env->mono_ms : 0;
        env->mono_ms += step;
        env->wall_ms += step;
        gr_coord_tick(c);
    }
    env->wall_ms += target - env->mono_ms;
    env->mono_ms = target;
    gr_coord_tick(c);
}

static struct gr_str s_or_null(const char *s)
{
    return s ? gr_str_c(s) : GR_STR_NULL;
}

enum gr_coord_wait fake_join_protocols(struct gr_coordinator *c, const char *group, const char *member,
                                       const char *type, int16_t version, int32_t session_ms, int n,
                                       const char *const *names, const char *const *metas,
                                       struct fake_join *out)
{
    struct gr_join_protocol protos[8];
    for (int i = 0; i < n; i++)
        protos[i] = (struct gr_join_protocol){gr_str_c(names[i]),
                                              {(const uint8_t *)metas[i], (int32_t)strlen(metas[i])}};
    struct gr_join_params p = {
        .group_id = gr_str_c(group),
        .member_id = gr_str_c(member ? member : ""),
        .group_instance_id = GR_STR_NULL,
        .protocol_type = gr_str_c(type),
        .client_id = gr_str_c("client"),
        .client_host = gr_str_c("/127.0.0.1"),
        .reason = GR_STR_NULL,
        .session_timeout_ms = session_ms,
        .rebalance_timeout_ms = version ? session_ms : -1,
        .protocols = protos,
        .protocol_count = n,
        .api_version = version,
        .waiter = out,
    };
    return gr_coord_join(c, &p);
}

enum gr_coord_wait fake_join(struct gr_coordinator *c, const char *group, const char *member,
                             const char *instance, int16_t version, int32_t session_ms, int32_t rebalance_ms,
                             const char *proto, const char *meta, struct fake_join *out)
{
    struct gr_join_protocol pr = {gr_str_c(proto), {(const uint8_t *)meta, (int32_t)strlen(meta)}};
    struct gr_join_params p = {
        .group_id = gr_str_c(group),
        .member_id = gr_str_c(member ? member : ""),
        .group_instance_id = s_or_null(instance),
        .protocol_type = gr_str_c("consumer"),
        .client_id = gr_str_c("client"),
        .client_host = gr_str_c("/127.0.0.1"),
        .reason = GR_STR_NULL,
        .session_timeout_ms = session_ms,
        .rebalance_timeout_ms = rebalance_ms,
        .protocols = &pr,
        .protocol_count = 1,
        .api_version = version,
        .waiter = out,
    };
    return gr_coord_join(c, &p);
}

enum gr_coord_wait fake_join_bytes(struct gr_coordinator *c, const char *group, const char *member,
                                   const char *proto, const uint8_t *meta, int32_t meta_len,
                                   struct fake_join *out)
{
    struct gr_join_protocol pr = {gr_str_c(proto), {meta, meta_len}};
    struct gr_join_params p = {
        .group_id = gr_str_c(group),
        .member_id = gr_str_c(member ? member : ""),
        .group_instance_id = GR_STR_NULL,
        .protocol_type = gr_str_c("consumer"),
        .client_id = gr_str_c("client"),
        .client_host = gr_str_c("/127.0.0.1"),
        .reason = GR_STR_NULL,
        .session_timeout_ms = 10000,
        .rebalance_timeout_ms = 10000,
        .protocols = &pr,
        .protocol_count = 1,
        .api_version = 5,
        .waiter = out,
    };
    return gr_coord_join(c, &p);
}

enum gr_coord_wait fake_sync(struct gr_coordinator *c, const char *group, const char *member,
                             const char *instance, int32_t generation, int n, const char *const *member_ids,
                             const char *const *assigns, struct fake_sync *out)
{
    struct gr_sync_assignment as[FAKE_MEMBERS_MAX];
    for (int i = 0; i < n; i++)
        as[i] = (struct gr_sync_assignment){gr_str_c(member_ids[i]),
                                            {(const uint8_t *)assigns[i], (int32_t)strlen(assigns[i])}};
    struct gr_sync_params p = {
        .group_id = gr_str_c(group),
        .member_id = gr_str_c(member),
        .group_instance_id = s_or_null(instance),
        .protocol_type = GR_STR_NULL,
        .protocol_name = GR_STR_NULL,
        .generation_id = generation,
        .assignments = as,
        .assignment_count = n,
        .api_version = 3,
        .waiter = out,
    };
    return gr_coord_sync(c, &p);
}

int fake_subscription(uint8_t *out, int n, const char *const *topics)
{
    int o = 0;
    out[o++] = 0;
    out[o++] = 0; /* version 0 */
    out[o++] = 0;
    out[o++] = 0;
    out[o++] = 0;
    out[o++] = (uint8_t)n;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(topics[i]);
        out[o++] = (uint8_t)(l >> 8);
        out[o++] = (uint8_t)l;
        memcpy(out + o, topics[i], l);
        o += (int)l;
    }
    out[o++] = 0xFF; /* user data: null bytes */
    out[o++] = 0xFF;
    out[o++] = 0xFF;
    out[o++] = 0xFF;
    return o;
}

int fake_count_records(const struct fake_env *env, enum gr_coord_key_type type, bool tombstones)
{
    int n = 0;
    for (int i = 0; i < env->rec_count; i++) {
        struct gr_offset_commit_key ok;
        struct gr_str g;
        if (!env->recs[i].marker &&
            gr_coord_key_decode(env->recs[i].key, env->recs[i].key_len, &ok, &g) == type &&
            (env->recs[i].value == NULL) == tombstones)
            n++;
    }
    return n;
}

void fake_replay_all(const struct fake_env *env, struct gr_coordinator *c)
{
    for (int i = 0; i < env->rec_count; i++) {
        const struct fake_rec *r = &env->recs[i];
        if (r->marker)
            gr_coord_txn_marker_apply(c, r->partition, r->producer_id, r->marker == GR_COORD_TXN_COMMIT);
        else
            gr_coord_replay_record(c, r->offset, r->producer_id, r->key, r->key_len, r->value, r->value_len);
    }
    gr_coord_load_done(c);
}
