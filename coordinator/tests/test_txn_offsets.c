/*
 * test_txn_offsets.c: the group coordinator's side of exactly-once (coordinator/txn_offsets.c):
 * TxnOffsetCommit validation as Kafka 4's OffsetMetadataManager /
 * ClassicGroup.validateOffsetCommit(isTransactional) with KIP-447's generation / member / instance checks,
 * offsets pending per producer id until the marker, COMMIT against a newer plain commit (the record offset
 * decides), ABORT, OffsetFetch require_stable (UNSTABLE_OFFSET_COMMIT), interleaved producers, markers scoped
 * to their partition, tombstones (OffsetDelete, deleted topic, DeleteGroups) and expiration with pending
 * offsets, and the load of __consumer_offsets bytes made of real transactional and control batches.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/offsets_log.h"
#include "coordinator/tests/fake.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"
#include "protocol/txn_marker.h"

#define SESSION 10000

struct world {
    struct fake_env env;
    struct gr_coordinator *c;
    struct fake_join j[2];
    struct fake_sync s[2];
    char id[128];
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
    for (int i = 0; i < 2; i++) {
        fake_join_reset(&w->j[i]);
        fake_sync_reset(&w->s[i]);
    }
    fake_env_free(&w->env);
    free(w);
    return 0;
}

/* A one-partition TxnOffsetCommit; returns the partition's error; *end the wait handle (-1: none). */
static int16_t txn(struct world *w, const char *group, const char *member, const char *instance, int32_t gen,
                   int64_t pid, const char *topic, int32_t partition, int64_t offset, int64_t *end)
{
    struct gr_commit_partition cp = {partition, offset, 3, gr_str_c("md"), -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_txn_commit_params p = {gr_str_c(group),
                                     gr_str_c(member),
                                     instance ? gr_str_c(instance) : GR_STR_NULL,
                                     gen,
                                     pid,
                                     (int16_t)(pid % 7),
                                     &ct,
                                     1};
    int32_t wp;
    int64_t we;
    gr_coord_txn_commit(w->c, &p, &wp, &we);
    if (end) *end = we;
    return cp.error_code;
}

static int16_t plain(struct world *w, const char *group, const char *topic, int32_t partition, int64_t offset)
{
    struct gr_commit_partition cp = {partition, offset, -1, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {gr_str_c(group), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(w->c, &p, &wp, &we);
    return cp.error_code;
}

/* OffsetFetch of one partition: the offset, or -(error) when the fetch answers an error. */
static int64_t fetch(struct world *w, const char *group, const char *topic, int32_t partition, bool stable)
{
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    int16_t err =
        gr_coord_offset_fetch(w->c, gr_str_c(group), gr_str_c(topic), partition, stable, &off, &epoch, &md);
    if (err) {
        assert_int_equal(off, -1);
        assert_int_equal(epoch, -1);
        assert_int_equal(md.len, 0);
        return -err;
    }
    return off;
}

static int16_t complete(struct world *w, const char *group, int64_t pid, bool commit)
{
    int64_t end;
    return gr_coord_txn_complete(w->c, gr_coord_partition(w->c, gr_str_c(group)), pid, 0, 5, commit, &end);
}

/* A dynamic member joins `group` alone (generation 1) and syncs: Stable. */
static void one_member(struct world *w, const char *group, const char *instance)
{
    assert_int_equal(fake_join(w->c, group, "", instance, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     instance ? GR_COORD_PARKED : GR_COORD_ANSWERED);
    if (!instance) { /* MEMBER_ID_REQUIRED first */
        strcpy(w->id, w->j[0].member_id);
        fake_join_reset(&w->j[0]);
        assert_int_equal(fake_join(w->c, group, w->id, NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                         GR_COORD_PARKED);
    }
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[0].error, 0);
    assert_int_equal(w->j[0].generation, 1);
    strcpy(w->id, w->j[0].member_id);
    assert_int_equal(fake_sync(w->c, group, w->id, instance, 1, 0, NULL, NULL, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[0].error, 0);
}

/* The basic life: pending (UNSTABLE for require_stable, the last committed value otherwise), written as a
 * transactional batch with the producer's id and epoch, answered once committed, COMMIT materializes. */
static void test_commit_flow(void **state)
{
    struct world *w = *state;
    assert_int_equal(plain(w, "g", "t", 0, 5), 0);
    int before = w->env.rec_count;
    int64_t end;
    assert_int_equal(txn(w, "g", "", NULL, -1, 100, "t", 0, 9, &end), 0);
    assert_int_equal(w->env.rec_count, before + 1);
    const struct fake_rec *r = &w->env.recs[before];
    assert_int_equal(r->producer_id, 100);
    assert_int_equal(r->producer_epoch, 100 % 7);
    assert_int_equal(r->marker, 0);
    assert_int_equal(end, r->offset + 1); /* answered once the record is committed */
    struct gr_offset_commit_value v;
    assert_int_equal(gr_offset_commit_value_decode(r->value, r->value_len, &v), 0);
    assert_int_equal(v.offset, 9);
    assert_int_equal(v.expire_timestamp_ms, -1);
    assert_true(gr_coord_offset_pending(w->c, gr_str_c("g"), gr_str_c("t"), 0));
    assert_false(gr_coord_offset_pending(w->c, gr_str_c("g"), gr_str_c("t"), 1));
    assert_int_equal(fetch(w, "g", "t", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(fetch(w, "g", "t", 0, false), 5);
    assert_int_equal(fetch(w, "g", "t", 1, true), -1); /* another partition: stable, none committed */
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 1);
    /* a marker of another producer changes nothing */
    assert_int_equal(complete(w, "g", 101, true), 0);
    assert_int_equal(fetch(w, "g", "t", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT);
    /* COMMIT: written as a marker, then the offset is the group's */
    assert_int_equal(complete(w, "g", 100, true), 0);
    const struct fake_rec *m = &w->env.recs[w->env.rec_count - 1];
    assert_int_equal(m->marker, GR_COORD_TXN_COMMIT);
    assert_int_equal(m->producer_id, 100);
    assert_int_equal(fetch(w, "g", "t", 0, true), 9);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 0);
    /* a reload of what was written gives the same */
    struct gr_coordinator *c2 = fake_coord(&w->env, NULL);
    fake_replay_all(&w->env, c2);
    int64_t off;
    int32_t ep;
    struct gr_str md;
    assert_int_equal(gr_coord_offset_fetch(c2, gr_str_c("g"), gr_str_c("t"), 0, true, &off, &ep, &md), 0);
    assert_int_equal(off, 9);
    assert_int_equal(ep, 3);
    assert_int_equal(md.len, 2);
    gr_coord_destroy(c2);
}

static void test_abort(void **state)
{
    struct world *w = *state;
    assert_int_equal(plain(w, "g", "t", 0, 5), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 100, "t", 0, 9, NULL), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 100, "t", 1, 19, NULL), 0);
    assert_int_equal(complete(w, "g", 100, false), 0);
    assert_int_equal(w->env.recs[w->env.rec_count - 1].marker, GR_COORD_TXN_ABORT);
    assert_int_equal(fetch(w, "g", "t", 0, true), 5);
    assert_int_equal(fetch(w, "g", "t", 1, true), -1);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 0);
    /* a simple group created by a TxnOffsetCommit alone stays (Kafka keeps it until expiration) */
    assert_int_equal(txn(w, "h", "", NULL, -1, 200, "t", 0, 1, NULL), 0);
    assert_non_null(gr_coord_group_find(w->c, gr_str_c("h")));
}

/* replayEndTransactionMarker: the committed offset with the larger record offset wins. */
static void test_plain_commit_ordering(void **state)
{
    struct world *w = *state;
    /* plain after the transactional record: the plain one stays after COMMIT */
    assert_int_equal(txn(w, "g", "", NULL, -1, 100, "t", 0, 9, NULL), 0);
    assert_int_equal(plain(w, "g", "t", 0, 50), 0);
    assert_int_equal(fetch(w, "g", "t", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(fetch(w, "g", "t", 0, false), 50);
    assert_int_equal(complete(w, "g", 100, true), 0);
    assert_int_equal(fetch(w, "g", "t", 0, true), 50);
    /* plain before the transactional record: the transactional one wins */
    assert_int_equal(plain(w, "g", "t", 1, 60), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 100, "t", 1, 10, NULL), 0);
    assert_int_equal(complete(w, "g", 100, true), 0);
    assert_int_equal(fetch(w, "g", "t", 1, true), 10);
    /* a reload decides the same by the records' offsets */
    struct gr_coordinator *c2 = fake_coord(&w->env, NULL);
    fake_replay_all(&w->env, c2);
    int64_t off;
    int32_t ep;
    struct gr_str md;
    gr_coord_offset_fetch(c2, gr_str_c("g"), gr_str_c("t"), 0, true, &off, &ep, &md);
    assert_int_equal(off, 50);
    gr_coord_offset_fetch(c2, gr_str_c("g"), gr_str_c("t"), 1, true, &off, &ep, &md);
    assert_int_equal(off, 10);
    gr_coord_destroy(c2);
}

/* KIP-447 validation (ClassicGroup.validateOffsetCommit, isTransactional) and the group-level errors. */
static void test_validation(void **state)
{
    struct world *w = *state;
    one_member(w, "g", NULL);
    assert_int_equal(txn(w, "g", w->id, NULL, 2, 1, "t", 0, 1, NULL), GR_ERR_ILLEGAL_GENERATION);
    assert_int_equal(txn(w, "g", "nobody", NULL, 1, 1, "t", 0, 1, NULL), GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(txn(w, "g", "", NULL, 1, 1, "t", 0, 1, NULL), GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(txn(w, "g", w->id, "inst", 1, 1, "t", 0, 1, NULL), GR_ERR_UNKNOWN_MEMBER_ID);
    /* no generation, member or instance (TxnOffsetCommit v0-2) on a Stable group: accepted, unlike
       OffsetCommit's UNKNOWN_MEMBER_ID */
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 2, NULL), 0);
    assert_int_equal(txn(w, "g", w->id, NULL, 1, 1, "t", 0, 3, NULL), 0);
    /* CompletingRebalance: a valid member commits transactionally (no REBALANCE_IN_PROGRESS) */
    assert_int_equal(fake_join(w->c, "g", "", NULL, 5, SESSION, SESSION, "range", "m", &w->j[1]),
                     GR_COORD_ANSWERED); /* MEMBER_ID_REQUIRED */
    char id2[128];
    strcpy(id2, w->j[1].member_id);
    fake_join_reset(&w->j[1]);
    assert_int_equal(fake_join(w->c, "g", id2, NULL, 5, SESSION, SESSION, "range", "m", &w->j[1]),
                     GR_COORD_PARKED);
    fake_join_reset(&w->j[0]);
    assert_int_equal(fake_join(w->c, "g", w->id, NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(gr_group_state(gr_coord_group_find(w->c, gr_str_c("g"))), GR_GROUP_COMPLETING_REBALANCE);
    assert_int_equal(txn(w, "g", w->id, NULL, 2, 1, "t", 0, 4, NULL), 0);
    assert_int_equal(txn(w, "g", w->id, NULL, 1, 1, "t", 0, 4, NULL), GR_ERR_ILLEGAL_GENERATION);
    /* unknown group: ILLEGAL_GENERATION for a generation (not created), a simple group for -1 */
    assert_int_equal(txn(w, "new", "m", NULL, 3, 1, "t", 0, 1, NULL), GR_ERR_ILLEGAL_GENERATION);
    assert_null(gr_coord_group_find(w->c, gr_str_c("new")));
    assert_int_equal(txn(w, "new", "", NULL, -1, 1, "t", 0, 1, NULL), 0);
    assert_int_equal(gr_group_state(gr_coord_group_find(w->c, gr_str_c("new"))), GR_GROUP_EMPTY);
    /* empty group id */
    assert_int_equal(txn(w, "", "", NULL, -1, 1, "t", 0, 1, NULL), GR_ERR_INVALID_GROUP_ID);
}

static void test_fenced_instance(void **state)
{
    struct world *w = *state;
    one_member(w, "s", "inst");
    assert_int_equal(txn(w, "s", "other", "inst", 1, 1, "t", 0, 1, NULL), GR_ERR_FENCED_INSTANCE_ID);
    assert_int_equal(txn(w, "s", w->id, "nope", 1, 1, "t", 0, 1, NULL), GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(txn(w, "s", w->id, "inst", 1, 1, "t", 0, 1, NULL), 0);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("s")), 1);
}

static void test_partition_errors(void **state)
{
    struct world *w = *state;
    /* metadata over offset.metadata.max.bytes: that partition only */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    struct gr_commit_partition cps[2] = {{0, 1, -1, gr_str_c(big), -99}, {1, 2, -1, GR_STR_NULL, -99}};
    struct gr_commit_topic ct = {gr_str_c("t"), cps, 2};
    struct gr_txn_commit_params p = {gr_str_c("g"), gr_str_c(""), GR_STR_NULL, -1, 7, 0, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_txn_commit(w->c, &p, &wp, &we);
    assert_int_equal(cps[0].error_code, GR_ERR_OFFSET_METADATA_TOO_LARGE);
    assert_int_equal(cps[1].error_code, 0);
    assert_int_equal(wp, gr_coord_partition(w->c, gr_str_c("g")));
    assert_true(we > 0);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 1);
    /* an append failure: mapped, nothing pending */
    w->env.fail_append = -EROFS;
    assert_int_equal(txn(w, "g", "", NULL, -1, 8, "t", 5, 1, &we), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(we, -1);
    assert_false(gr_coord_offset_pending(w->c, gr_str_c("g"), gr_str_c("t"), 5));
    /* a failed marker changes nothing */
    assert_int_equal(complete(w, "g", 7, true), GR_ERR_NOT_COORDINATOR);
    assert_true(gr_coord_offset_pending(w->c, gr_str_c("g"), gr_str_c("t"), 1));
    w->env.fail_append = 0;
    /* no transactional append bound: UNKNOWN_SERVER_ERROR, nothing written */
    gr_coord_set_append_txn(w->c, NULL);
    int n = w->env.rec_count;
    assert_int_equal(txn(w, "g", "", NULL, -1, 8, "t", 5, 1, NULL), GR_ERR_UNKNOWN_SERVER_ERROR);
    assert_int_equal(complete(w, "g", 7, true), GR_ERR_UNKNOWN_SERVER_ERROR);
    assert_int_equal(w->env.rec_count, n);
}

static void test_not_owned(void **state)
{
    struct world *w = *state;
    gr_coord_destroy(w->c);
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.offsets_partitions = 4;
    cfg.partitions_owned = false;
    w->c = fake_coord(&w->env, &cfg);
    int32_t p = gr_coord_partition(w->c, gr_str_c("g"));
    int64_t end;
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 1, NULL), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(gr_coord_txn_complete(w->c, p, 1, 0, 0, true, &end), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(gr_coord_partition_load_begin(w->c, p, 3), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 1, NULL), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(gr_coord_txn_complete(w->c, p, 1, 0, 0, true, &end),
                     GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    gr_coord_partition_load_done(w->c, p);
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 1, NULL), 0);
    /* unloading drops the group with its pending offsets */
    gr_coord_partition_unload(w->c, p);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 0);
}

/* Two producers on one partition and on separate ones: each marker ends only its producer's offsets. */
static void test_interleaved_producers(void **state)
{
    struct world *w = *state;
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 10, NULL), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 2, "t", 0, 20, NULL), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 2, "t", 1, 21, NULL), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 11, NULL), 0); /* replaces producer 1's 10 */
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 3);
    assert_int_equal(complete(w, "g", 1, true), 0);
    assert_int_equal(fetch(w, "g", "t", 0, false), 11);
    assert_int_equal(fetch(w, "g", "t", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT); /* producer 2's */
    assert_int_equal(complete(w, "g", 2, false), 0);
    assert_int_equal(fetch(w, "g", "t", 0, true), 11);
    assert_int_equal(fetch(w, "g", "t", 1, true), -1);
}

/* A marker ends the producer's offsets only in the groups of its own __consumer_offsets partition. */
static void test_marker_scoped_to_partition(void **state)
{
    struct world *w = *state;
    const char *a = "ga", *b = NULL;
    char name[16];
    for (int i = 0; i < 100 && !b; i++) { /* a group on another partition */
        snprintf(name, sizeof name, "gb%d", i);
        if (gr_coord_partition(w->c, gr_str_c(name)) != gr_coord_partition(w->c, gr_str_c(a))) b = name;
    }
    assert_non_null(b);
    assert_int_equal(txn(w, a, "", NULL, -1, 9, "t", 0, 1, NULL), 0);
    assert_int_equal(txn(w, b, "", NULL, -1, 9, "t", 0, 2, NULL), 0);
    assert_int_equal(complete(w, a, 9, true), 0);
    assert_int_equal(fetch(w, a, "t", 0, true), 1);
    assert_int_equal(fetch(w, b, "t", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(complete(w, b, 9, false), 0);
    assert_int_equal(fetch(w, b, "t", 0, true), -1);
}

/* OffsetDelete, a deleted topic and DeleteGroups drop pending offsets, with a tombstone for a partition
 * that only has a pending one (deleteOffsets, onTopicsDeleted, deleteAllOffsets); the tombstone's replay
 * drops them on a reload too. */
static void test_tombstones(void **state)
{
    struct world *w = *state;
    /* OffsetDelete of a pending-only partition */
    assert_int_equal(txn(w, "g", "", NULL, -1, 1, "t", 0, 10, NULL), 0);
    int n = fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true);
    struct gr_offset_delete_partition dp = {0, -99};
    struct gr_offset_delete_topic dt = {gr_str_c("t"), &dp, 1};
    assert_int_equal(gr_coord_offset_delete(w->c, gr_str_c("g"), &dt, 1), 0);
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true), n + 1);
    assert_false(gr_coord_offset_pending(w->c, gr_str_c("g"), gr_str_c("t"), 0));
    assert_int_equal(complete(w, "g", 1, true), 0); /* nothing left to commit */
    assert_int_equal(fetch(w, "g", "t", 0, true), -1);
    /* a deleted topic: committed and pending, one tombstone per partition */
    assert_int_equal(plain(w, "g", "d", 0, 3), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 2, "d", 0, 4, NULL), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 2, "d", 1, 5, NULL), 0);
    assert_int_equal(txn(w, "g", "", NULL, -1, 2, "keep", 0, 6, NULL), 0);
    n = fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true);
    assert_int_equal(gr_coord_topic_deleted(w->c, "d"), 2);
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true), n + 2);
    assert_int_equal(fetch(w, "g", "d", 0, true), -1);
    assert_int_equal(fetch(w, "g", "d", 1, true), -1);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 1);
    /* a reload so far: the tombstones dropped d's pending offsets, keep-0 is still pending */
    struct gr_coordinator *c2 = fake_coord(&w->env, NULL);
    fake_replay_all(&w->env, c2);
    assert_int_equal(gr_coord_txn_pending_count(c2, gr_str_c("g")), 1);
    assert_true(gr_coord_offset_pending(c2, gr_str_c("g"), gr_str_c("keep"), 0));
    gr_coord_destroy(c2);
    /* DeleteGroups: tombstones for committed and pending-only partitions, then the group is gone */
    n = fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true);
    assert_int_equal(gr_coord_group_delete(w->c, gr_str_c("g")), 0);
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_OFFSET_COMMIT, true), n + 1);
    assert_null(gr_coord_group_find(w->c, gr_str_c("g")));
    assert_int_equal(complete(w, "g", 2, true), 0); /* the marker finds nothing */
    assert_null(gr_coord_group_find(w->c, gr_str_c("g")));
    c2 = fake_coord(&w->env, NULL);
    fake_replay_all(&w->env, c2);
    assert_int_equal(gr_coord_txn_pending_count(c2, gr_str_c("g")), 0);
    int64_t off;
    int32_t ep;
    struct gr_str md;
    assert_int_equal(gr_coord_offset_fetch(c2, gr_str_c("g"), gr_str_c("keep"), 0, true, &off, &ep, &md), 0);
    assert_int_equal(off, -1);
    gr_coord_destroy(c2);
}

/* cleanupExpiredOffsets: an offset with a pending transactional commit does not expire, and a group with
 * open transactions is not deleted. */
static void test_expiration_keeps_pending(void **state)
{
    struct world *w = *state;
    gr_coord_destroy(w->c);
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.offsets_partitions = 4;
    cfg.offsets_retention_ms = 3600000;
    cfg.offsets_retention_check_interval_ms = 60000;
    w->c = fake_coord(&w->env, &cfg);
    gr_coord_load_done(w->c);
    assert_int_equal(plain(w, "a", "t", 0, 1), 0);
    assert_int_equal(txn(w, "a", "", NULL, -1, 1, "t", 0, 2, NULL), 0);
    assert_int_equal(txn(w, "b", "", NULL, -1, 1, "t", 0, 3, NULL), 0); /* pending only */
    assert_int_equal(plain(w, "c", "t", 0, 4), 0);                      /* control: expires */
    for (int i = 0; i < 70; i++)
        fake_advance(w->c, &w->env, 60000);
    assert_null(gr_coord_group_find(w->c, gr_str_c("c")));
    assert_non_null(gr_coord_group_find(w->c, gr_str_c("a")));
    assert_int_equal(fetch(w, "a", "t", 0, false), 1);
    assert_non_null(gr_coord_group_find(w->c, gr_str_c("b")));
    /* once the transactions end, the next passes expire and delete them */
    assert_int_equal(complete(w, "a", 1, false), 0);
    assert_int_equal(complete(w, "b", 1, false), 0);
    for (int i = 0; i < 2; i++)
        fake_advance(w->c, &w->env, 60000);
    assert_null(gr_coord_group_find(w->c, gr_str_c("a")));
    assert_null(gr_coord_group_find(w->c, gr_str_c("b")));
}

/* ---- load from real batches ---- */

struct logbuf {
    uint8_t buf[16384];
    size_t len;
    int64_t next; /* next offset */
};

static void add_batch(struct logbuf *lb, const char *group, int64_t pid, const char *topic,
                      const int32_t *parts, const int64_t *offsets, int n)
{
    struct gr_coord_record recs[4];
    struct gr_record_in in[4];
    assert_true(n <= 4);
    for (int i = 0; i < n; i++) {
        struct gr_offset_commit_value v = {offsets[i], -1, gr_str_c(""), 1700000000000LL, -1};
        assert_int_equal(gr_offset_commit_record(&recs[i], group, topic, parts[i], &v), 0);
        in[i] = (struct gr_record_in){.timestamp = 1700000000000LL,
                                      .key = {recs[i].key, (int32_t)recs[i].key_len},
                                      .value = {recs[i].value, (int32_t)recs[i].value_len}};
    }
    struct gr_batch_params bp = {lb->next, 0,   GR_CODEC_NONE,     pid >= 0 ? GR_BATCH_ATTR_TRANSACTIONAL : 0,
                                 -1,       pid, pid >= 0 ? 1 : -1, -1};
    uint8_t *b;
    size_t blen;
    assert_int_equal(gr_batch_build(&bp, in, n, &b, &blen), 0);
    assert_true(lb->len + blen <= sizeof lb->buf);
    memcpy(lb->buf + lb->len, b, blen);
    lb->len += blen;
    lb->next += n;
    free(b);
    gr_coord_records_free(recs, n);
}

static void add_one(struct logbuf *lb, const char *group, int64_t pid, const char *topic, int32_t part,
                    int64_t offset)
{
    add_batch(lb, group, pid, topic, &part, &offset, 1);
}

static void add_marker(struct logbuf *lb, int64_t pid, bool commit)
{
    struct gr_txn_marker m = {commit, 4};
    gr_txn_marker_batch_encode(lb->buf + lb->len, lb->next, 0, 1700000000000LL, pid, 1, &m);
    lb->len += GR_TXN_MARKER_BATCH_BYTES;
    lb->next++;
}

static int64_t load(struct gr_coordinator *c, int32_t p, const struct logbuf *lb, int64_t *count)
{
    *count = 0;
    return gr_offsets_log_replay_partition(c, p, lb->buf, lb->len, 0, count);
}

static int64_t get(struct gr_coordinator *c, const char *group, const char *topic, int32_t part, bool stable)
{
    int64_t off;
    int32_t ep;
    struct gr_str md;
    int16_t err = gr_coord_offset_fetch(c, gr_str_c(group), gr_str_c(topic), part, stable, &off, &ep, &md);
    return err ? -err : off;
}

/* Commit, abort, interleaved producers, a plain commit between, a transaction left open at the end. */
static void test_load_batches(void **state)
{
    struct world *w = *state;
    int32_t p = gr_coord_partition(w->c, gr_str_c("g"));
    struct logbuf *lb = calloc(1, sizeof *lb);
    add_one(lb, "g", -1, "a", 0, 1); /* plain a-0 = 1 */
    const int32_t parts[2] = {0, 1};
    const int64_t offs[2] = {2, 12};
    add_batch(lb, "g", 7, "a", parts, offs, 2); /* producer 7: a-0 = 2, a-1 = 12 */
    add_one(lb, "g", 8, "b", 0, 3);             /* producer 8: b-0 = 3 */
    add_one(lb, "g", -1, "b", 0, 4);            /* plain b-0 = 4 after producer 8's */
    add_marker(lb, 7, true);                    /* commit 7 */
    add_marker(lb, 8, false);                   /* abort 8 */
    add_one(lb, "g", 10, "c", 0, 6);            /* producer 10: c-0 = 6 */
    add_one(lb, "g", -1, "c", 0, 7);            /* plain c-0 = 7 after it */
    add_one(lb, "g", 11, "c", 1, 8);            /* producer 11: c-1 = 8 */
    add_marker(lb, 10, true);                   /* commit 10: c-0 stays 7 (plain is newer) */
    add_marker(lb, 11, true);                   /* commit 11: c-1 = 8 */
    add_one(lb, "g", 9, "a", 0, 5);             /* producer 9 left open */
    int64_t count;
    assert_int_equal(load(w->c, p, lb, &count), lb->next);
    assert_int_equal(count, 13); /* 9 records + 4 markers */
    gr_coord_load_done(w->c);
    assert_int_equal(get(w->c, "g", "a", 0, false), 2);
    assert_int_equal(get(w->c, "g", "a", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(get(w->c, "g", "a", 1, true), 12);
    assert_int_equal(get(w->c, "g", "b", 0, true), 4);
    assert_int_equal(get(w->c, "g", "c", 0, true), 7);
    assert_int_equal(get(w->c, "g", "c", 1, true), 8);
    assert_int_equal(gr_coord_txn_pending_count(w->c, gr_str_c("g")), 1);
    /* the open transaction completes after the load */
    assert_int_equal(complete(w, "g", 9, true), 0);
    assert_int_equal(get(w->c, "g", "a", 0, true), 5);

    /* every whole-batch prefix loads into a consistent state: replay stops at the last whole batch */
    for (size_t cut = 0; cut < lb->len; cut += 7) {
        struct gr_coordinator *c2 = fake_coord(&w->env, NULL);
        int64_t n = 0;
        int64_t next = gr_offsets_log_replay_partition(c2, p, lb->buf, cut, 0, &n);
        assert_true(next >= 0 && next <= lb->next);
        gr_coord_destroy(c2);
    }
    free(lb);
}

/* The marker of a partition loaded later does not end an open transaction of the same producer in another
 * partition's group (the load is per partition). */
static void test_load_marker_partition(void **state)
{
    struct world *w = *state;
    const char *a = "ga", *b = NULL;
    char name[16];
    for (int i = 0; i < 100 && !b; i++) {
        snprintf(name, sizeof name, "gb%d", i);
        if (gr_coord_partition(w->c, gr_str_c(name)) != gr_coord_partition(w->c, gr_str_c(a))) b = name;
    }
    assert_non_null(b);
    struct logbuf *la = calloc(1, sizeof *la), *lbb = calloc(1, sizeof *lbb);
    add_one(la, a, 3, "t", 0, 1);  /* producer 3's first transaction ... */
    add_marker(la, 3, true);       /* ... committed on a's partition */
    add_one(la, a, 3, "t", 0, 2);  /* its second transaction, open */
    add_one(lbb, b, 3, "t", 0, 9); /* the first transaction on b's partition */
    add_marker(lbb, 3, true);
    int64_t count;
    load(w->c, gr_coord_partition(w->c, gr_str_c(a)), la, &count);
    load(w->c, gr_coord_partition(w->c, gr_str_c(b)), lbb, &count);
    assert_int_equal(get(w->c, b, "t", 0, true), 9);
    assert_int_equal(get(w->c, a, "t", 0, false), 1);
    assert_int_equal(get(w->c, a, "t", 0, true), -GR_ERR_UNSTABLE_OFFSET_COMMIT);
    free(la);
    free(lbb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_flow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_commit_ordering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fenced_instance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partition_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_owned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interleaved_producers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marker_scoped_to_partition, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstones, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiration_keeps_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_marker_partition, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
