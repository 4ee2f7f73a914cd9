/*
 * test_offsets.c: committed offsets: the fencing codes of pitfall C28 (exact values), simple-consumer
 * commits, offset.metadata.max.bytes, fetch, durability handles, append failures, OffsetDelete with
 * subscriptions parsed from the consumer protocol, offsets.retention expiration, and the replay and
 * snapshot of everything written to __consumer_offsets.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/tests/fake.h"
#include "protocol/errors.h"

#define SESSION 10000

struct world {
    struct fake_env env;
    struct gr_coordinator *c;
    struct fake_join j[3];
    struct fake_sync s[3];
    char ids[3][128];
};

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof *w);
    w->c = fake_coord(&w->env, NULL);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    gr_coord_destroy(w->c);
    for (int i = 0; i < 3; i++) {
        fake_join_reset(&w->j[i]);
        fake_sync_reset(&w->s[i]);
    }
    fake_env_free(&w->env);
    free(w);
    return 0;
}

/* One-partition commit; returns the partition's error code. */
static int16_t commit(struct world *w, const char *group, const char *member, int32_t generation,
                      int16_t version, const char *topic, int32_t partition, int64_t offset,
                      const char *metadata)
{
    struct gr_commit_partition cp = {partition, offset, 7, metadata ? gr_str_c(metadata) : GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {
        gr_str_c(group), gr_str_c(member), GR_STR_NULL, generation, -1, version, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(w->c, &p, &wp, &we);
    return cp.error_code;
}

static int64_t fetch(struct world *w, const char *group, const char *topic, int32_t partition)
{
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    if (!gr_coord_offset_get(w->c, gr_str_c(group), gr_str_c(topic), partition, &off, &epoch, &md)) return -1;
    return off;
}

/* A joins `group` alone (generation 1) and syncs. */
static void one_member(struct world *w, const char *group)
{
    assert_int_equal(fake_join(w->c, group, "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[0].error, 0);
    strcpy(w->ids[0], w->j[0].member_id);
    assert_int_equal(fake_sync(w->c, group, w->ids[0], NULL, 1, 0, NULL, NULL, &w->s[0]), GR_COORD_ANSWERED);
}

/* Pitfall C28, each step with its exact code. */
static void test_c28_fencing(void **state)
{
    struct world *w = *state;
    one_member(w, "g");
    /* (1) B joins; before A rejoins, A commits with generation 1 */
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[1]),
                     GR_COORD_PARKED);
    assert_int_equal(commit(w, "g", w->ids[0], 1, 8, "t", 0, 10, NULL), 0);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_REBALANCE_IN_PROGRESS);
    /* (2) A rejoins: generation 2, CompletingRebalance; gen 1 -> 22, gen 2 -> 27 */
    assert_int_equal(fake_join(w->c, "g", w->ids[0], NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].generation, 2);
    assert_int_equal(commit(w, "g", w->ids[0], 1, 8, "t", 0, 11, NULL), GR_ERR_ILLEGAL_GENERATION);
    assert_int_equal(commit(w, "g", w->ids[0], 2, 8, "t", 0, 12, NULL), GR_ERR_REBALANCE_IN_PROGRESS);
    /* (3) an unknown member */
    assert_int_equal(commit(w, "g", "zzz", 2, 8, "t", 0, 13, NULL), GR_ERR_UNKNOWN_MEMBER_ID);
    /* (4) generation -1 and no member while the group has members */
    assert_int_equal(commit(w, "g", "", -1, 8, "t", 0, 14, NULL), GR_ERR_UNKNOWN_MEMBER_ID);
    /* (5) generation -1 to a brand-new group: a simple group is created and the offset is there */
    assert_null(gr_coord_group_find(w->c, gr_str_c("h")));
    assert_int_equal(commit(w, "h", "", -1, 8, "t", 0, 15, NULL), 0);
    assert_int_equal(fetch(w, "h", "t", 0), 15);
    struct gr_group *h = gr_coord_group_find(w->c, gr_str_c("h"));
    assert_non_null(h);
    assert_int_equal(gr_group_state(h), GR_GROUP_EMPTY);
    assert_null(gr_group_protocol_type(h));
    /* (6) generation 5 to a never-seen group: 22 before v9, 69 from v9 */
    assert_int_equal(commit(w, "k", "m", 5, 8, "t", 0, 16, NULL), GR_ERR_ILLEGAL_GENERATION);
    assert_int_equal(commit(w, "k", "m", 5, 9, "t", 0, 16, NULL), GR_ERR_GROUP_ID_NOT_FOUND);
    assert_null(gr_coord_group_find(w->c, gr_str_c("k")));
    /* only step (1) reached the log for g */
    assert_int_equal(fetch(w, "g", "t", 0), 10);
    /* after the sync, generation 2 commits work */
    const char *mids[2] = {w->ids[0], w->j[1].member_id};
    const char *as[2] = {"a", "b"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 2, 2, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(commit(w, "g", w->ids[0], 2, 8, "t", 0, 17, NULL), 0);
    assert_int_equal(fetch(w, "g", "t", 0), 17);
}

static void test_commit_fetch_and_wait_handle(void **state)
{
    struct world *w = *state;
    struct gr_commit_partition cps[3] = {
        {0, 42, 7, gr_str_c("md"), -99},
        {5, 100, -1, GR_STR_NULL, -99},
        {2, 7, 3, gr_str_c(""), -99},
    };
    struct gr_commit_topic ct = {gr_str_c("t"), cps, 3};
    struct gr_commit_params p = {gr_str_c("simple"), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(w->c, &p, &wp, &we);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cps[i].error_code, 0);
    assert_int_equal(wp, gr_coord_partition(w->c, gr_str_c("simple")));
    assert_int_equal(we, 3); /* three records appended to that partition */
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    assert_true(gr_coord_offset_get(w->c, gr_str_c("simple"), gr_str_c("t"), 0, &off, &epoch, &md));
    assert_int_equal(off, 42);
    assert_int_equal(epoch, 7);
    assert_int_equal(md.len, 2);
    assert_memory_equal(md.ptr, "md", 2);
    assert_true(gr_coord_offset_get(w->c, gr_str_c("simple"), gr_str_c("t"), 5, &off, &epoch, &md));
    assert_int_equal(epoch, -1);
    assert_int_equal(md.len, 0); /* null metadata is stored as "" */
    assert_false(gr_coord_offset_get(w->c, gr_str_c("simple"), gr_str_c("t"), 1, &off, &epoch, &md));
    assert_false(gr_coord_offset_get(w->c, gr_str_c("simple"), gr_str_c("u"), 0, &off, &epoch, &md));
    assert_false(gr_coord_offset_get(w->c, gr_str_c("nogroup"), gr_str_c("t"), 0, &off, &epoch, &md));
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, false), 3);
}

static void collect(void *ctx, const char *topic, int32_t partition, int64_t offset, int32_t leader_epoch,
                    struct gr_str metadata)
{
    (void)topic;
    (void)leader_epoch;
    (void)metadata;
    int64_t *acc = ctx;
    acc[0]++;
    acc[1] += partition * 1000 + offset;
}

static void test_fetch_all(void **state)
{
    struct world *w = *state;
    assert_int_equal(commit(w, "s", "", -1, 8, "a", 1, 5, NULL), 0);
    assert_int_equal(commit(w, "s", "", -1, 8, "a", 0, 6, NULL), 0);
    assert_int_equal(commit(w, "s", "", -1, 8, "b", 3, 7, NULL), 0);
    assert_int_equal(commit(w, "s", "", -1, 8, "a", 1, 8, NULL), 0); /* overwrite */
    int64_t acc[2] = {0, 0};
    gr_coord_offsets_foreach(w->c, gr_str_c("s"), collect, acc);
    assert_int_equal(acc[0], 3);
    assert_int_equal(acc[1], (1000 + 8) + (0 + 6) + (3000 + 7));
}

/* offset.metadata.max.bytes is compared with Java's String.length() (UTF-16 units), per partition. */
static void test_metadata_too_large(void **state)
{
    struct world *w = *state;
    char *md = malloc(4098 * 2);
    memset(md, 'x', 4097);
    md[4097] = 0;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 0, 1, md), GR_ERR_OFFSET_METADATA_TOO_LARGE);
    assert_int_equal(fetch(w, "s", "t", 0), -1);
    md[4096] = 0;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 0, 1, md), 0);
    /* 3000 x "é" is 6000 bytes but 3000 characters */
    for (int i = 0; i < 3000; i++) {
        md[2 * i] = (char)0xC3;
        md[2 * i + 1] = (char)0xA9;
    }
    md[6000] = 0;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 1, 1, md), 0);
    free(md);
    /* in one request, one bad partition does not sink the others */
    struct gr_commit_partition cps[2] = {{0, 9, -1, gr_str_c("ok"), -99}, {1, 9, -1, GR_STR_NULL, -99}};
    char *big = calloc(1, 5000);
    memset(big, 'y', 4999);
    cps[1].metadata = gr_str_c(big);
    struct gr_commit_topic ct = {gr_str_c("t"), cps, 2};
    struct gr_commit_params p = {gr_str_c("s"), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(w->c, &p, &wp, &we);
    assert_int_equal(cps[0].error_code, 0);
    assert_int_equal(cps[1].error_code, GR_ERR_OFFSET_METADATA_TOO_LARGE);
    assert_int_equal(fetch(w, "s", "t", 0), 9);
    assert_int_equal(fetch(w, "s", "t", 1), 1);
    free(big);
}

/* A commit whose records, as one batch, exceed the offsets topic's max.message.bytes (message.max.bytes,
   1048588 by default): every written partition INVALID_COMMIT_OFFSET_SIZE, a partition refused for its
   metadata keeps OFFSET_METADATA_TOO_LARGE, nothing appended or applied, no group created (Kafka's
   GroupMetadataManager.storeOffsets). Under the limit by one record: accepted. */
static void test_commit_over_max_message_bytes(void **state)
{
    struct world *w = *state;
    enum { N = 300 };
    struct gr_commit_partition cps[N + 1];
    char *md = malloc(4001);
    memset(md, 'm', 4000);
    md[4000] = 0;
    char *big = malloc(5001);
    memset(big, 'b', 5000);
    big[5000] = 0;
    for (int i = 0; i < N; i++)
        cps[i] = (struct gr_commit_partition){i, 100 + i, -1, gr_str_c(md), -99};
    cps[N] = (struct gr_commit_partition){N, 7, -1, gr_str_c(big), -99};
    struct gr_commit_topic ct = {gr_str_c("t"), cps, N + 1};
    struct gr_commit_params p = {gr_str_c("s"), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(w->c, &p, &wp, &we); /* 300 x ~4 KB of records: about 1.2 MB */
    for (int i = 0; i < N; i++)
        assert_int_equal(cps[i].error_code, GR_ERR_INVALID_COMMIT_OFFSET_SIZE);
    assert_int_equal(cps[N].error_code, GR_ERR_OFFSET_METADATA_TOO_LARGE);
    assert_int_equal(we, -1);
    assert_int_equal(w->env.rec_count, 0);
    assert_null(gr_coord_group_find(w->c, gr_str_c("s")));
    assert_int_equal(fetch(w, "s", "t", 0), -1);
    /* 250 of them fit in 1048588 bytes (about 1.0 MB): accepted, all applied. */
    ct.count = 250;
    gr_coord_commit(w->c, &p, &wp, &we);
    for (int i = 0; i < 250; i++)
        assert_int_equal(cps[i].error_code, GR_ERR_NONE);
    assert_int_equal(w->env.rec_count, 250);
    assert_int_equal(fetch(w, "s", "t", 249), 349);
    free(md);
    free(big);
}

/* A failed append: NOT_COORDINATOR, nothing applied, no group created. */
static void test_append_failure(void **state)
{
    struct world *w = *state;
    w->env.fail_append = -EIO;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 0, 1, NULL), GR_ERR_NOT_COORDINATOR);
    assert_null(gr_coord_group_find(w->c, gr_str_c("s")));
    w->env.fail_append = -EMSGSIZE;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 0, 1, NULL), GR_ERR_UNKNOWN_SERVER_ERROR);
    w->env.fail_append = 0;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 0, 1, NULL), 0);
    w->env.fail_append = -EIO;
    assert_int_equal(commit(w, "s", "", -1, 8, "t", 0, 2, NULL), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(fetch(w, "s", "t", 0), 1);
    w->env.fail_append = 0;
}

/* OffsetDelete: topics the members subscribe to (consumer protocol) are refused per partition. */
static void test_offset_delete(void **state)
{
    struct world *w = *state;
    uint8_t sub[256];
    const char *topics[1] = {"t1"};
    int n = fake_subscription(sub, 1, topics);
    assert_int_equal(fake_join_bytes(w->c, "g", "", "range", sub, n, &w->j[0]), GR_COORD_ANSWERED);
    strcpy(w->ids[0], w->j[0].member_id);
    fake_join_reset(&w->j[0]);
    assert_int_equal(fake_join_bytes(w->c, "g", w->ids[0], "range", sub, n, &w->j[0]), GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 0, NULL, NULL, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(commit(w, "g", w->ids[0], 1, 8, "t1", 0, 5, NULL), 0);
    assert_int_equal(commit(w, "g", w->ids[0], 1, 8, "t2", 0, 6, NULL), 0);
    struct gr_offset_delete_partition p1[1] = {{0, -99}}, p2[2] = {{0, -99}, {9, -99}};
    struct gr_offset_delete_topic dt[2] = {{gr_str_c("t1"), p1, 1}, {gr_str_c("t2"), p2, 2}};
    int tombs = fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true);
    assert_int_equal(gr_coord_offset_delete(w->c, gr_str_c("g"), dt, 2), 0);
    assert_int_equal(p1[0].error_code, GR_ERR_GROUP_SUBSCRIBED_TO_TOPIC);
    assert_int_equal(p2[0].error_code, 0);
    assert_int_equal(p2[1].error_code, 0); /* nothing committed there: 0, no tombstone */
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true), tombs + 1);
    assert_int_equal(fetch(w, "g", "t1", 0), 5);
    assert_int_equal(fetch(w, "g", "t2", 0), -1);
    assert_int_equal(gr_coord_offset_delete(w->c, gr_str_c("nogroup"), dt, 2), GR_ERR_GROUP_ID_NOT_FOUND);
    assert_int_equal(gr_coord_offset_delete(w->c, gr_str_c(""), dt, 2), GR_ERR_INVALID_GROUP_ID);

    /* a non-empty group of another protocol type: NON_EMPTY_GROUP */
    const char *names[1] = {"p"}, *metas[1] = {"x"};
    assert_int_equal(fake_join_protocols(w->c, "conn", "", "connect", 3, SESSION, 1, names, metas, &w->j[1]),
                     GR_COORD_PARKED);
    assert_int_equal(gr_coord_offset_delete(w->c, gr_str_c("conn"), dt, 2), GR_ERR_NON_EMPTY_GROUP);
}

/* A deleted topic takes every group's committed offsets of it along (tombstones first), also from a
 * group whose members are subscribed to it; other topics' offsets stay; a failed append keeps them. */
static void test_topic_deleted(void **state)
{
    struct world *w = *state;
    assert_int_equal(commit(w, "a", "", -1, 8, "gone", 0, 5, NULL), 0);
    assert_int_equal(commit(w, "a", "", -1, 8, "gone", 3, 7, NULL), 0);
    assert_int_equal(commit(w, "a", "", -1, 8, "kept", 0, 9, NULL), 0);
    assert_int_equal(commit(w, "b", "", -1, 8, "gone", 1, 2, NULL), 0);
    assert_int_equal(commit(w, "c", "", -1, 8, "kept", 1, 4, NULL), 0);
    int tombs = fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true);
    w->env.fail_append = -EIO; /* group "a" or "b" cannot write its tombstones: nothing removed */
    assert_int_equal(gr_coord_topic_deleted(w->c, "gone"), 0);
    assert_int_equal(fetch(w, "a", "gone", 0), 5);
    w->env.fail_append = 0;
    assert_int_equal(gr_coord_topic_deleted(w->c, "gone"), 3);
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true), tombs + 3);
    assert_int_equal(fetch(w, "a", "gone", 0), -1);
    assert_int_equal(fetch(w, "a", "gone", 3), -1);
    assert_int_equal(fetch(w, "b", "gone", 1), -1);
    assert_int_equal(fetch(w, "a", "kept", 0), 9);
    assert_int_equal(fetch(w, "c", "kept", 1), 4);
    assert_int_equal(gr_coord_topic_deleted(w->c, "gone"), 0); /* nothing left: no more tombstones */
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true), tombs + 3);
}

/* offsets.retention: a simple group's offsets expire from their commit time; an empty consumer group's
 * from the time it became empty; a Stable consumer group keeps subscribed topics. Empty groups with no
 * offsets left are deleted. */
static void test_expiration(void **state)
{
    struct world *w = *state;
    gr_coord_destroy(w->c);
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.offsets_partitions = 4;
    cfg.offsets_retention_ms = 3600000;
    cfg.offsets_retention_check_interval_ms = 60000;
    w->c = fake_coord(&w->env, &cfg);
    gr_coord_load_done(w->c); /* starts the expiration timer */

    assert_int_equal(commit(w, "simple", "", -1, 8, "t", 0, 1, NULL), 0);
    /* a consumer group subscribed to t1, with offsets on t1 and t2 */
    uint8_t sub[256];
    const char *topics[1] = {"t1"};
    int n = fake_subscription(sub, 1, topics);
    assert_int_equal(fake_join_bytes(w->c, "cg", "", "range", sub, n, &w->j[0]), GR_COORD_ANSWERED);
    strcpy(w->ids[0], w->j[0].member_id);
    fake_join_reset(&w->j[0]);
    assert_int_equal(fake_join_bytes(w->c, "cg", w->ids[0], "range", sub, n, &w->j[0]), GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(fake_sync(w->c, "cg", w->ids[0], NULL, 1, 0, NULL, NULL, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(commit(w, "cg", w->ids[0], 1, 8, "t1", 0, 1, NULL), 0);
    assert_int_equal(commit(w, "cg", w->ids[0], 1, 8, "t2", 0, 1, NULL), 0);
    /* keep the member alive for 70 minutes */
    for (int i = 0; i < 70 * 6; i++) {
        fake_advance(w->c, &w->env, 10000 - 1);
        gr_coord_heartbeat(w->c, gr_str_c("cg"), gr_str_c(w->ids[0]), GR_STR_NULL, 1);
    }
    assert_null(gr_coord_group_find(w->c, gr_str_c("simple"))); /* expired and deleted */
    assert_int_equal(fetch(w, "cg", "t2", 0), -1);              /* not subscribed: expired */
    assert_int_equal(fetch(w, "cg", "t1", 0), 1);               /* subscribed: kept */
    /* the member leaves: the group is Empty and its offsets expire an hour later */
    struct gr_leave_member lm = {gr_str_c(w->ids[0]), GR_STR_NULL, GR_STR_NULL, -2};
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("cg"), &lm, 1), 0);
    assert_int_equal(gr_group_state(gr_coord_group_find(w->c, gr_str_c("cg"))), GR_GROUP_EMPTY);
    fake_advance(w->c, &w->env, 3600000 - 120000);
    assert_int_equal(fetch(w, "cg", "t1", 0), 1);
    fake_advance(w->c, &w->env, 180000); /* the hour has passed and the next check (every minute) ran */
    assert_null(gr_coord_group_find(w->c, gr_str_c("cg")));
    assert_true(fake_count_records(&w->env, GR_COORD_KEY_GROUP_METADATA, true) >= 2);
}

static int64_t group_offsets_sum(struct gr_coordinator *c, const char *group)
{
    int64_t acc[2] = {0, 0};
    gr_coord_offsets_foreach(c, gr_str_c(group), collect, acc);
    return acc[0] * 1000000 + acc[1];
}

/* snapshot sink: copies each record into the env's record list (through a plain append) */
struct snap_ctx {
    struct fake_env *env;
    int n;
};

static int emit(void *ctx, const struct gr_coord_record *rec)
{
    struct snap_ctx *cx = ctx;
    struct fake_env *env = cx->env;
    if (env->rec_count == env->rec_cap) {
        env->rec_cap = env->rec_cap ? 2 * env->rec_cap : 64;
        env->recs = realloc(env->recs, (size_t)env->rec_cap * sizeof *env->recs);
    }
    struct fake_rec *r = &env->recs[env->rec_count++];
    memset(r, 0, sizeof *r);
    r->offset = env->rec_count - 1;
    r->producer_id = -1; /* a snapshot holds plain records only */
    r->partition = 0;
    r->key = malloc(rec->key_len);
    memcpy(r->key, rec->key, rec->key_len);
    r->key_len = rec->key_len;
    r->value = NULL;
    r->value_len = 0;
    if (rec->value) {
        r->value = malloc(rec->value_len);
        memcpy(r->value, rec->value, rec->value_len);
        r->value_len = rec->value_len;
    }
    cx->n++;
    return 0;
}

/* Everything written replays to the same state; a partition snapshot replays to it as well. */
static void test_replay_and_snapshot(void **state)
{
    struct world *w = *state;
    /* a Stable group with two members and assignments, offsets, a simple group, a deleted group */
    assert_int_equal(fake_join(w->c, "g", "", "inst-a", 5, SESSION, SESSION, "range", "ma", &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "mb", &w->j[1]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 6000); /* the initial delay, restarted once for the second member */
    assert_int_equal(w->j[0].error, 0);
    assert_int_equal(w->j[1].error, 0);
    strcpy(w->ids[0], w->j[0].member_id);
    strcpy(w->ids[1], w->j[1].member_id);
    const char *mids[2] = {w->ids[0], w->ids[1]};
    const char *as[2] = {"AA", "BB"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_PARKED);
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], "inst-a", 1, 2, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(commit(w, "g", w->ids[0], 1, 8, "t", 0, 100, "x"), 0);
    assert_int_equal(commit(w, "g", w->ids[1], 1, 8, "t", 1, 200, NULL), 0);
    assert_int_equal(commit(w, "g", w->ids[1], 1, 8, "t", 1, 201, NULL), 0);
    assert_int_equal(commit(w, "simple", "", -1, 8, "u", 3, 33, NULL), 0);
    assert_int_equal(commit(w, "gone", "", -1, 8, "u", 3, 44, NULL), 0);
    assert_int_equal(gr_coord_group_delete(w->c, gr_str_c("gone")), 0);

    struct fake_env env2 = {0};
    struct gr_coordinator *c2 = fake_coord(&env2, NULL);
    fake_replay_all(&w->env, c2);
    struct gr_group *g = gr_coord_group_find(c2, gr_str_c("g"));
    assert_non_null(g);
    assert_int_equal(gr_group_state(g), GR_GROUP_STABLE);
    assert_int_equal(gr_group_generation(g), 1);
    assert_string_equal(gr_group_protocol_name(g), "range");
    assert_string_equal(gr_group_leader(g), w->ids[0]);
    assert_int_equal(gr_group_member_count(g), 2);
    const struct gr_member *m0 = gr_group_member_at(g, 0);
    assert_string_equal(gr_member_id(m0), w->ids[0]);
    assert_string_equal(gr_member_instance_id(m0), "inst-a");
    assert_memory_equal(gr_member_assignment(m0).ptr, "AA", 2);
    assert_memory_equal(gr_member_metadata(gr_group_member_at(g, 1), g).ptr, "mb", 2);
    assert_int_equal(group_offsets_sum(c2, "g"), group_offsets_sum(w->c, "g"));
    assert_int_equal(group_offsets_sum(c2, "simple"), 1 * 1000000 + 3033);
    assert_null(gr_coord_group_find(c2, gr_str_c("gone")));
    /* loaded members keep their session: a heartbeat with the old generation works */
    assert_int_equal(gr_coord_heartbeat(c2, gr_str_c("g"), gr_str_c(w->ids[1]), GR_STR_NULL, 1), 0);

    /* snapshot of g's partition replays to the same thing */
    int32_t part = gr_coord_partition(w->c, gr_str_c("g"));
    struct fake_env env3 = {0};
    struct gr_coordinator *c3 = fake_coord(&env3, NULL);
    int64_t live = gr_coord_live_records(w->c, part);
    assert_true(live >= 3); /* group metadata + t/0 + t/1 (+ others that hash there) */
    struct snap_ctx cx = {&env3, 0};
    assert_int_equal(gr_coord_snapshot_partition(w->c, part, emit, &cx), 0);
    assert_int_equal(cx.n, live);
    fake_replay_all(&env3, c3);
    assert_int_equal(group_offsets_sum(c3, "g"), group_offsets_sum(w->c, "g"));
    assert_int_equal(gr_group_member_count(gr_coord_group_find(c3, gr_str_c("g"))), 2);
    gr_coord_destroy(c3);
    gr_coord_destroy(c2);
    fake_env_free(&env2);
    fake_env_free(&env3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_c28_fencing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_fetch_and_wait_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metadata_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_over_max_message_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offset_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topic_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_and_snapshot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
