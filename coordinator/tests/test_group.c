/*
 * test_group.c: the classic group state machine with a fake clock: join/sync/heartbeat sequences,
 * KIP-394 member ids, the initial rebalance delay, member expiry, joins during a rebalance, the leader
 * leaving during CompletingRebalance, v0 rebalance timeout semantics (KAFKA-8653, pitfall C10), static
 * membership (KIP-345), protocol selection and the group-level errors. Expected values are Kafka's
 * (GroupMetadataManager / ClassicGroup) and those of /work/shared/cases/pitfalls.md C08, C10, C20.
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
    struct fake_join j[4];
    struct fake_sync s[4];
    char ids[4][128];
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
    for (int i = 0; i < 4; i++) {
        fake_join_reset(&w->j[i]);
        fake_sync_reset(&w->s[i]);
    }
    fake_env_free(&w->env);
    free(w);
    return 0;
}

static enum gr_group_state state_of(struct world *w, const char *group)
{
    struct gr_group *grp = gr_coord_group_find(w->c, gr_str_c(group));
    assert_non_null(grp);
    return gr_group_state(grp);
}

/* n dynamic members join with JoinGroup v3 (no member id handshake) and the group completes its first
 * rebalance after the initial delay; member ids land in w->ids. The group is CompletingRebalance. */
static void join_all(struct world *w, const char *group, int n)
{
    for (int i = 0; i < n; i++) {
        fake_join_reset(&w->j[i]);
        assert_int_equal(fake_join(w->c, group, "", NULL, 3, SESSION, SESSION, "range", "meta", &w->j[i]),
                         GR_COORD_PARKED);
    }
    assert_int_equal(state_of(w, group), GR_GROUP_PREPARING_REBALANCE);
    /* the initial delay (3 s) is restarted once when more members arrive during it (6 s in all) */
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[0].answers, n == 1 ? 1 : 0);
    if (n > 1) fake_advance(w->c, &w->env, 3000);
    for (int i = 0; i < n; i++) {
        assert_int_equal(w->j[i].answers, 1);
        assert_int_equal(w->j[i].error, 0);
        strcpy(w->ids[i], w->j[i].member_id);
    }
    assert_int_equal(state_of(w, group), GR_GROUP_COMPLETING_REBALANCE);
}

/* join_all, then every member syncs; member i gets "assign-i". The group is Stable. */
static void stable(struct world *w, const char *group, int n)
{
    join_all(w, group, n);
    const char *mids[4];
    const char *as[4] = {"assign-0", "assign-1", "assign-2", "assign-3"};
    for (int i = 0; i < n; i++) {
        mids[i] = w->ids[i];
        fake_sync_reset(&w->s[i]);
    }
    for (int i = 1; i < n; i++)
        assert_int_equal(fake_sync(w->c, group, w->ids[i], NULL, w->j[i].generation, 0, NULL, NULL, &w->s[i]),
                         GR_COORD_PARKED);
    assert_int_equal(fake_sync(w->c, group, w->ids[0], NULL, w->j[0].generation, n, mids, as, &w->s[0]),
                     GR_COORD_ANSWERED);
    for (int i = 0; i < n; i++) {
        assert_int_equal(w->s[i].answers, 1);
        assert_int_equal(w->s[i].error, 0);
        assert_string_equal(w->s[i].assignment, as[i]);
    }
    assert_int_equal(state_of(w, group), GR_GROUP_STABLE);
}

/* C08: v4+ dynamic join with an empty member id -> 79 with a broker-made id; rejoin with it -> joined. */
static void test_member_id_required(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_MEMBER_ID_REQUIRED);
    assert_int_equal(w->j[0].generation, -1);
    assert_non_null(w->j[0].member_id);
    assert_true(strlen(w->j[0].member_id) > strlen("client-"));
    assert_memory_equal(w->j[0].member_id, "client-", 7);
    char id[128];
    strcpy(id, w->j[0].member_id);
    assert_int_equal(fake_join(w->c, "g", id, NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 2999);
    assert_int_equal(w->j[0].answers, 1); /* still waiting for the initial rebalance delay */
    fake_advance(w->c, &w->env, 1);
    assert_int_equal(w->j[0].answers, 2);
    assert_int_equal(w->j[0].error, 0);
    assert_int_equal(w->j[0].generation, 1);
    assert_string_equal(w->j[0].member_id, id);
    assert_string_equal(w->j[0].leader, id);
    assert_string_equal(w->j[0].protocol_name, "range");
    assert_string_equal(w->j[0].protocol_type, "consumer");
    assert_int_equal(w->j[0].member_count, 1);
    assert_string_equal(w->j[0].member_meta[0], "m");
    /* v3 gets no 79: it joins at once */
    assert_int_equal(fake_join(w->c, "h", "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[1]),
                     GR_COORD_PARKED);
    /* a static member never gets 79 */
    assert_int_equal(fake_join(w->c, "k", "", "inst", 5, SESSION, SESSION, "range", "m", &w->j[2]),
                     GR_COORD_PARKED);
}

/* C08: a pending id that never comes back is dropped after the session timeout and stops blocking. */
static void test_pending_member_expires(void **state)
{
    struct world *w = *state;
    stable(w, "g", 1);
    /* B asks for an id (pending) and never comes back */
    assert_int_equal(fake_join(w->c, "g", "", NULL, 4, 7000, 7000, "range", "m", &w->j[1]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[1].error, GR_ERR_MEMBER_ID_REQUIRED);
    /* the leader rejoins: a rebalance that waits for the pending member */
    assert_int_equal(fake_join(w->c, "g", w->ids[0], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(state_of(w, "g"), GR_GROUP_PREPARING_REBALANCE);
    fake_advance(w->c, &w->env, 6999);
    assert_int_equal(w->j[0].answers, 1);
    fake_advance(w->c, &w->env, 1);
    assert_int_equal(w->j[0].answers, 2);
    assert_int_equal(w->j[0].error, 0);
    assert_int_equal(w->j[0].generation, 2);
    assert_int_equal(w->j[0].member_count, 1);
    /* the expired id is unknown now */
    char pending[128];
    strcpy(pending, w->j[1].member_id);
    assert_int_equal(fake_join(w->c, "g", pending, NULL, 5, 7000, 7000, "range", "m", &w->j[1]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[1].error, GR_ERR_UNKNOWN_MEMBER_ID);
}

/* Two members: join, leader sees both, sync passes the leader's bytes through, heartbeats are 0. */
static void test_join_sync_heartbeat(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 2);
    assert_int_equal(w->j[0].generation, 1);
    assert_int_equal(w->j[1].generation, 1);
    assert_string_equal(w->j[0].leader, w->ids[0]);
    assert_string_equal(w->j[1].leader, w->ids[0]);
    assert_int_equal(w->j[0].member_count, 2); /* the leader gets every member's metadata */
    assert_int_equal(w->j[1].member_count, 0);
    assert_string_equal(w->j[0].members[1], w->ids[1]);
    /* heartbeats are accepted between JoinGroup and SyncGroup */
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[1]), GR_STR_NULL, 1), 0);
    /* the follower's SyncGroup waits for the leader's */
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_PARKED);
    assert_int_equal(w->s[1].answers, 0);
    const char *mids[2] = {w->ids[0], w->ids[1]};
    const char *as[2] = {"A\x01\x02", "B\x03"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 2, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[1].answers, 1);
    assert_int_equal(w->s[0].error, 0);
    assert_int_equal(w->s[1].error, 0);
    assert_string_equal(w->s[0].assignment, "A\x01\x02");
    assert_string_equal(w->s[1].assignment, "B\x03");
    assert_string_equal(w->s[1].protocol_name, "range");
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);
    for (int i = 0; i < 5; i++) {
        fake_advance(w->c, &w->env, 3000);
        assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1), 0);
        assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[1]), GR_STR_NULL, 1), 0);
    }
    /* a SyncGroup in Stable returns the current assignment again */
    fake_sync_reset(&w->s[1]);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_ANSWERED);
    assert_string_equal(w->s[1].assignment, "B\x03");
    /* fencing */
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 0),
                     GR_ERR_ILLEGAL_GENERATION);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c("nobody"), GR_STR_NULL, 1),
                     GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("nogroup"), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c(""), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_INVALID_GROUP_ID);
    fake_sync_reset(&w->s[2]);
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 7, 0, NULL, NULL, &w->s[2]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[2].error, GR_ERR_ILLEGAL_GENERATION);
    assert_int_equal(w->s[2].assignment_len, 0);
}

/* C20: a member the leader did not list gets an empty assignment with error 0. */
static void test_unlisted_member_gets_empty_assignment(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 3);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_PARKED);
    assert_int_equal(fake_sync(w->c, "g", w->ids[2], NULL, 1, 0, NULL, NULL, &w->s[2]), GR_COORD_PARKED);
    const char *mids[1] = {w->ids[0]};
    const char *as[1] = {"only-leader"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 1, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[1].error, 0);
    assert_int_equal(w->s[1].assignment_len, 0);
    assert_int_equal(w->s[2].error, 0);
    assert_int_equal(w->s[2].assignment_len, 0);
    assert_string_equal(w->s[0].assignment, "only-leader");
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);
}

/* group.initial.rebalance.delay.ms: extended while new members arrive, bounded by the rebalance timeout. */
static void test_initial_delay_extension(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 2000);
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[1]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 1000); /* t=3000: a member was added, the delay restarts (3000, 4000 left) */
    assert_int_equal(w->j[0].answers, 0);
    fake_advance(w->c, &w->env, 2999);
    assert_int_equal(w->j[0].answers, 0);
    fake_advance(w->c, &w->env, 1); /* t=6000 */
    assert_int_equal(w->j[0].answers, 1);
    assert_int_equal(w->j[1].answers, 1);
    assert_int_equal(w->j[0].generation, 1);
}

/* A member that stops heartbeating is removed after its session timeout; the rest rebalance. */
static void test_member_expiry(void **state)
{
    struct world *w = *state;
    stable(w, "g", 2);
    for (int t = 0; t < SESSION; t += 3000) {
        fake_advance(w->c, &w->env, 3000);
        int16_t err = gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1);
        if (err) {
            assert_int_equal(err, GR_ERR_REBALANCE_IN_PROGRESS);
            break;
        }
    }
    assert_int_equal(state_of(w, "g"), GR_GROUP_PREPARING_REBALANCE);
    assert_int_equal(gr_group_member_count(gr_coord_group_find(w->c, gr_str_c("g"))), 1);
    assert_int_equal(fake_join(w->c, "g", w->ids[0], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, 0);
    assert_int_equal(w->j[0].generation, 2);
    assert_int_equal(w->j[0].member_count, 1);
    /* the expired member is gone */
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[1]), GR_STR_NULL, 1),
                     GR_ERR_UNKNOWN_MEMBER_ID);
}

/* A member joining a Stable group triggers a rebalance; heartbeats answer 27; everyone rejoins. */
static void test_join_mid_rebalance(void **state)
{
    struct world *w = *state;
    stable(w, "g", 2);
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "meta", &w->j[2]),
                     GR_COORD_PARKED);
    assert_int_equal(state_of(w, "g"), GR_GROUP_PREPARING_REBALANCE);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_REBALANCE_IN_PROGRESS);
    assert_int_equal(fake_join(w->c, "g", w->ids[0], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    /* a SyncGroup during PreparingRebalance */
    fake_sync_reset(&w->s[1]);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[1].error, GR_ERR_REBALANCE_IN_PROGRESS);
    assert_int_equal(fake_join(w->c, "g", w->ids[1], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[1]),
                     GR_COORD_ANSWERED);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(w->j[i].error, 0);
        assert_int_equal(w->j[i].generation, 2);
    }
    assert_string_equal(w->j[0].leader, w->ids[0]);
    assert_int_equal(w->j[0].member_count, 3);
    assert_int_equal(state_of(w, "g"), GR_GROUP_COMPLETING_REBALANCE);
}

/* The leader leaves during CompletingRebalance: parked syncs get 27 and the rest rebalance. */
static void test_leader_leaves_during_completing(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 2);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_PARKED);
    struct gr_leave_member lm = {gr_str_c(w->ids[0]), GR_STR_NULL, gr_str_c("bye"), -2};
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("g"), &lm, 1), 0);
    assert_int_equal(lm.error_code, 0);
    assert_int_equal(w->s[1].answers, 1);
    assert_int_equal(w->s[1].error, GR_ERR_REBALANCE_IN_PROGRESS);
    assert_int_equal(state_of(w, "g"), GR_GROUP_PREPARING_REBALANCE);
    assert_int_equal(fake_join(w->c, "g", w->ids[1], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[1]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[1].error, 0);
    assert_int_equal(w->j[1].generation, 2);
    assert_string_equal(w->j[1].leader, w->ids[1]);
    assert_int_equal(w->j[1].member_count, 1);
}

/* C10 / KAFKA-8653: JoinGroup v0 waits up to the session timeout for existing members. */
static void test_v0_rebalance_timeout(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", NULL, 0, SESSION, -1, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[0].error, 0);
    strcpy(w->ids[0], w->j[0].member_id);
    const char *mids[1] = {w->ids[0]};
    const char *as[1] = {"p0p1"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 1, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    /* B joins with v0: A gets 27 on its heartbeat about 1 s later and has up to 10 s to rejoin */
    assert_int_equal(fake_join(w->c, "g", "", NULL, 0, SESSION, -1, "range", "meta", &w->j[1]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 1000);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_REBALANCE_IN_PROGRESS);
    fake_advance(w->c, &w->env, 4000);
    assert_int_equal(w->j[1].answers, 0); /* a -1 rebalance timeout would have completed (and evicted A) */
    assert_int_equal(fake_join(w->c, "g", w->ids[0], NULL, 0, SESSION, -1, "range", "meta", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[1].answers, 1);
    assert_int_equal(w->j[0].generation, 2);
    assert_int_equal(w->j[1].generation, 2); /* one generation bump, both in it */
    assert_int_equal(w->j[0].member_count, 2);
}

/* Without the rejoin, the v0 join phase ends at the session timeout and the silent member is removed. */
static void test_v0_rebalance_timeout_evicts(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", NULL, 0, SESSION, -1, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    strcpy(w->ids[0], w->j[0].member_id);
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 0, NULL, NULL, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(fake_join(w->c, "g", "", NULL, 0, SESSION, -1, "range", "meta", &w->j[1]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, SESSION - 1);
    assert_int_equal(w->j[1].answers, 0);
    fake_advance(w->c, &w->env, 1);
    assert_int_equal(w->j[1].answers, 1);
    assert_int_equal(w->j[1].generation, 2);
    assert_int_equal(w->j[1].member_count, 1);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_UNKNOWN_MEMBER_ID);
}

/* KIP-345: a static member restarting keeps generation and assignment without a rebalance; the old
 * member id is fenced. Before v9 the old leader id is returned so the member does not run the assignor. */
static void test_static_restart(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", "i1", 5, SESSION, SESSION, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[0].error, 0);
    strcpy(w->ids[0], w->j[0].member_id);
    assert_memory_equal(w->ids[0], "i1-", 3);
    const char *mids[1] = {w->ids[0]};
    const char *as[1] = {"X"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], "i1", 1, 1, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    int records = fake_count_records(&w->env, GR_COORD_KEY_GROUP_METADATA, false);

    /* restart: empty member id, same instance id */
    fake_join_reset(&w->j[1]);
    assert_int_equal(fake_join(w->c, "g", "", "i1", 5, SESSION, SESSION, "range", "meta", &w->j[1]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[1].error, 0);
    assert_int_equal(w->j[1].generation, 1);
    assert_string_not_equal(w->j[1].member_id, w->ids[0]);
    assert_string_equal(w->j[1].leader, w->ids[0]); /* v5: the old leader id */
    assert_int_equal(w->j[1].member_count, 0);
    assert_false(w->j[1].skip_assignment);
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_GROUP_METADATA, false),
                     records + 1); /* persisted */
    strcpy(w->ids[1], w->j[1].member_id);
    fake_sync_reset(&w->s[1]);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], "i1", 1, 0, NULL, NULL, &w->s[1]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[1].error, 0);
    assert_string_equal(w->s[1].assignment, "X");
    /* the old member id is fenced everywhere */
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), gr_str_c("i1"), 1),
                     GR_ERR_FENCED_INSTANCE_ID);
    fake_join_reset(&w->j[2]);
    assert_int_equal(fake_join(w->c, "g", w->ids[0], "i1", 5, SESSION, SESSION, "range", "meta", &w->j[2]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[2].error, GR_ERR_FENCED_INSTANCE_ID);

    /* v9: the leader is told it leads, gets the members, and skips the assignment */
    fake_join_reset(&w->j[3]);
    struct gr_join_protocol pr = {gr_str_c("range"), {(const uint8_t *)"meta", 4}};
    struct gr_join_params p = {
        .group_id = gr_str_c("g"),
        .member_id = gr_str_c(""),
        .group_instance_id = gr_str_c("i1"),
        .protocol_type = gr_str_c("consumer"),
        .client_id = gr_str_c("c"),
        .client_host = gr_str_c("/h"),
        .reason = GR_STR_NULL,
        .session_timeout_ms = SESSION,
        .rebalance_timeout_ms = SESSION,
        .protocols = &pr,
        .protocol_count = 1,
        .api_version = 9,
        .waiter = &w->j[3],
    };
    assert_int_equal(gr_coord_join(w->c, &p), GR_COORD_ANSWERED);
    assert_int_equal(w->j[3].error, 0);
    assert_int_equal(w->j[3].generation, 1);
    assert_string_equal(w->j[3].leader, w->j[3].member_id);
    assert_true(w->j[3].skip_assignment);
    assert_int_equal(w->j[3].member_count, 1);
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);
}

/* A static member replaced while its JoinGroup is parked: the parked request gets FENCED_INSTANCE_ID. */
static void test_static_replace_fences_parked(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", "i1", 5, SESSION, SESSION, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join(w->c, "g", "", "i1", 5, SESSION, SESSION, "range", "meta", &w->j[1]),
                     GR_COORD_PARKED);
    assert_int_equal(w->j[0].answers, 1);
    assert_int_equal(w->j[0].error, GR_ERR_FENCED_INSTANCE_ID);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[1].error, 0);
    assert_int_equal(w->j[1].generation, 1);
    assert_int_equal(w->j[1].member_count, 1);
}

/* Protocol selection: only protocols every member supports; each member votes its first choice. */
static void test_protocol_selection(void **state)
{
    struct world *w = *state;
    const char *a[2] = {"roundrobin", "range"}, *am[2] = {"a-rr", "a-range"};
    const char *b[2] = {"range", "roundrobin"}, *bm[2] = {"b-range", "b-rr"};
    const char *c3[1] = {"roundrobin"}, *cm[1] = {"c-rr"};
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 2, a, am, &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 2, b, bm, &w->j[1]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 1, c3, cm, &w->j[2]),
                     GR_COORD_PARKED);
    /* a member with no common protocol, and one with another protocol type */
    const char *d[1] = {"sticky"}, *dm[1] = {"d"};
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 1, d, dm, &w->j[3]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[3].error, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
    fake_join_reset(&w->j[3]);
    assert_int_equal(fake_join_protocols(w->c, "g", "", "connect", 3, SESSION, 1, c3, cm, &w->j[3]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[3].error, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
    fake_advance(w->c, &w->env, 6000);
    assert_string_equal(w->j[0].protocol_name, "roundrobin");
    assert_int_equal(w->j[0].member_count, 3);
    assert_string_equal(w->j[0].member_meta[0], "a-rr"); /* each member's metadata for the chosen protocol */
    assert_string_equal(w->j[0].member_meta[1], "b-rr");
    assert_string_equal(w->j[0].member_meta[2], "c-rr");
    /* an empty group refuses an empty protocol type or an empty protocol list */
    fake_join_reset(&w->j[3]);
    assert_int_equal(fake_join_protocols(w->c, "h", "", "", 3, SESSION, 1, c3, cm, &w->j[3]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[3].error, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
    fake_join_reset(&w->j[3]);
    assert_int_equal(fake_join_protocols(w->c, "h", "", "consumer", 3, SESSION, 0, c3, cm, &w->j[3]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[3].error, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
}

/* Votes decide between common protocols: two votes for range beat one for roundrobin. */
static void test_protocol_votes(void **state)
{
    struct world *w = *state;
    const char *a[2] = {"roundrobin", "range"}, *m2[2] = {"x", "y"};
    const char *b[2] = {"range", "roundrobin"};
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 2, a, m2, &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 2, b, m2, &w->j[1]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join_protocols(w->c, "g", "", "consumer", 3, SESSION, 2, b, m2, &w->j[2]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 6000);
    assert_string_equal(w->j[1].protocol_name, "range");
}

static void test_session_timeout_bounds_and_max_size(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", NULL, 5, 5999, 5999, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_INVALID_SESSION_TIMEOUT);
    fake_join_reset(&w->j[0]);
    assert_int_equal(fake_join(w->c, "g", "", NULL, 5, 1800001, 1800001, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_INVALID_SESSION_TIMEOUT);
    fake_join_reset(&w->j[0]);
    assert_int_equal(fake_join(w->c, "", "", NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_INVALID_GROUP_ID);
    /* an unknown group with a member id */
    fake_join_reset(&w->j[0]);
    assert_int_equal(fake_join(w->c, "nope", "someone", NULL, 5, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_UNKNOWN_MEMBER_ID);

    /* group.max.size = 2 */
    gr_coord_destroy(w->c);
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.offsets_partitions = 4;
    cfg.max_size = 2;
    w->c = fake_coord(&w->env, &cfg);
    stable(w, "g", 2);
    fake_join_reset(&w->j[2]);
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "meta", &w->j[2]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[2].error, GR_ERR_GROUP_MAX_SIZE_REACHED);
    assert_string_equal(w->j[2].member_id, "");
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);
}

static void test_sync_protocol_checks_v5(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 1);
    struct gr_sync_params p = {
        .group_id = gr_str_c("g"),
        .member_id = gr_str_c(w->ids[0]),
        .group_instance_id = GR_STR_NULL,
        .protocol_type = GR_STR_NULL,
        .protocol_name = gr_str_c("range"),
        .generation_id = 1,
        .assignments = NULL,
        .assignment_count = 0,
        .api_version = 5,
        .waiter = &w->s[0],
    };
    assert_int_equal(gr_coord_sync(w->c, &p), GR_COORD_ANSWERED);
    assert_int_equal(w->s[0].error, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
    p.protocol_type = gr_str_c("consumer");
    p.protocol_name = gr_str_c("roundrobin");
    fake_sync_reset(&w->s[0]);
    assert_int_equal(gr_coord_sync(w->c, &p), GR_COORD_ANSWERED);
    assert_int_equal(w->s[0].error, GR_ERR_INCONSISTENT_GROUP_PROTOCOL);
    p.protocol_name = gr_str_c("range");
    fake_sync_reset(&w->s[0]);
    assert_int_equal(gr_coord_sync(w->c, &p), GR_COORD_ANSWERED);
    assert_int_equal(w->s[0].error, 0);
    assert_string_equal(w->s[0].protocol_type, "consumer");
    assert_string_equal(w->s[0].protocol_name, "range");
    /* SyncGroup to an unknown group */
    fake_sync_reset(&w->s[1]);
    assert_int_equal(fake_sync(w->c, "other", "x", NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[1].error, GR_ERR_UNKNOWN_MEMBER_ID);
}

/* LeaveGroup v3+: a batch, with per-member errors; by instance id without a member id. */
static void test_leave_batch(void **state)
{
    struct world *w = *state;
    stable(w, "g", 3);
    struct gr_leave_member lm[3] = {
        {gr_str_c(w->ids[0]), GR_STR_NULL, GR_STR_NULL, -2},
        {gr_str_c("ghost"), GR_STR_NULL, GR_STR_NULL, -2},
        {gr_str_c(w->ids[2]), GR_STR_NULL, gr_str_c("done"), -2},
    };
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("g"), lm, 3), 0);
    assert_int_equal(lm[0].error_code, 0);
    assert_int_equal(lm[1].error_code, GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(lm[2].error_code, 0);
    struct gr_group *grp = gr_coord_group_find(w->c, gr_str_c("g"));
    assert_int_equal(gr_group_member_count(grp), 1);
    assert_int_equal(gr_group_state(grp), GR_GROUP_PREPARING_REBALANCE);
    assert_string_equal(gr_group_leader(grp), w->ids[1]);
    /* unknown group: every member UNKNOWN_MEMBER_ID, top level 0 */
    struct gr_leave_member x = {gr_str_c("a"), GR_STR_NULL, GR_STR_NULL, -2};
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("nogroup"), &x, 1), 0);
    assert_int_equal(x.error_code, GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(gr_coord_leave(w->c, gr_str_c(""), &x, 1), GR_ERR_INVALID_GROUP_ID);

    /* removal by group.instance.id with an empty member id */
    assert_int_equal(fake_join(w->c, "s", "", "inst-7", 5, SESSION, SESSION, "range", "m", &w->j[3]),
                     GR_COORD_PARKED);
    struct gr_leave_member y = {gr_str_c(""), gr_str_c("inst-7"), GR_STR_NULL, -2};
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("s"), &y, 1), 0);
    assert_int_equal(y.error_code, 0);
    assert_int_equal(w->j[3].answers, 1); /* its parked join was answered */
    assert_int_equal(w->j[3].error, GR_ERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(gr_group_member_count(gr_coord_group_find(w->c, gr_str_c("s"))), 0);
}

/* DeleteGroups: NON_EMPTY_GROUP while members exist, then deleted with tombstones, then not found. */
static void test_delete_groups(void **state)
{
    struct world *w = *state;
    stable(w, "g", 1);
    assert_int_equal(gr_coord_group_delete(w->c, gr_str_c("g")), GR_ERR_NON_EMPTY_GROUP);
    struct gr_leave_member lm = {gr_str_c(w->ids[0]), GR_STR_NULL, GR_STR_NULL, -2};
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("g"), &lm, 1), 0);
    /* the only member left: the join phase completes at once with no members -> Empty, generation 2 */
    struct gr_group *grp = gr_coord_group_find(w->c, gr_str_c("g"));
    assert_int_equal(gr_group_state(grp), GR_GROUP_EMPTY);
    assert_int_equal(gr_group_generation(grp), 2);
    int tombs = fake_count_records(&w->env, GR_COORD_KEY_GROUP_METADATA, true);
    assert_int_equal(gr_coord_group_delete(w->c, gr_str_c("g")), 0);
    assert_int_equal(fake_count_records(&w->env, GR_COORD_KEY_GROUP_METADATA, true), tombs + 1);
    assert_null(gr_coord_group_find(w->c, gr_str_c("g")));
    assert_int_equal(gr_coord_group_delete(w->c, gr_str_c("g")), GR_ERR_GROUP_ID_NOT_FOUND);
}

/* A follower that never sends SyncGroup is removed at the rebalance timeout, and the group rebalances. */
static void test_pending_sync_expiry(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 2);
    const char *mids[2] = {w->ids[0], w->ids[1]};
    const char *as[2] = {"a", "b"};
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 2, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1), 0);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1), 0);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1), 0);
    fake_advance(w->c, &w->env, 1000); /* 10 s after the join completed */
    assert_int_equal(gr_coord_heartbeat(w->c, gr_str_c("g"), gr_str_c(w->ids[0]), GR_STR_NULL, 1),
                     GR_ERR_REBALANCE_IN_PROGRESS);
    assert_int_equal(gr_group_member_count(gr_coord_group_find(w->c, gr_str_c("g"))), 1);
}

/* The leader's assignment reaches the members only once its record is durable (Kafka: once committed);
 * a follower's SyncGroup that arrives meanwhile waits for it instead of seeing REBALANCE_IN_PROGRESS; a
 * write that can never become durable fails the sync with NOT_COORDINATOR and the group rebalances. */
static void test_sync_waits_for_durable_assignment(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 2);
    const char *mids[2] = {w->ids[0], w->ids[1]};
    const char *as[2] = {"A", "B"};
    w->env.not_durable = 1;
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 2, mids, as, &w->s[0]), GR_COORD_PARKED);
    assert_int_equal(state_of(w, "g"), GR_GROUP_COMPLETING_REBALANCE);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 10);
    assert_int_equal(w->s[0].answers, 0); /* no timer answers it: only the commit does */
    assert_non_null(w->env.commit_waiter);
    w->env.not_durable = 0;
    fake_committed(&w->env, 0);
    assert_int_equal(w->s[0].answers, 1);
    assert_int_equal(w->s[1].answers, 1);
    assert_string_equal(w->s[0].assignment, "A");
    assert_string_equal(w->s[1].assignment, "B");
    assert_int_equal(state_of(w, "g"), GR_GROUP_STABLE);

    /* the next generation's write fails for good */
    fake_join_reset(&w->j[0]);
    fake_join_reset(&w->j[1]);
    assert_int_equal(fake_join(w->c, "g", w->ids[0], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(fake_join(w->c, "g", w->ids[1], NULL, 5, SESSION, SESSION, "range", "meta", &w->j[1]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].generation, 2);
    fake_sync_reset(&w->s[0]);
    fake_sync_reset(&w->s[1]);
    w->env.not_durable = -EROFS;
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 2, 2, mids, as, &w->s[0]), GR_COORD_ANSWERED);
    assert_int_equal(w->s[0].error, GR_ERR_NOT_COORDINATOR);
    assert_int_equal(state_of(w, "g"), GR_GROUP_PREPARING_REBALANCE);
    w->env.not_durable = 0;
}

/* An assignment write the high watermark never passes fails at Kafka 4's write timeout
 * (GR_COORD_WRITE_TIMEOUT_MS): the leader's and the waiting follower's SyncGroup get
 * COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT through appendGroupMetadataErrorToResponseError) and the group
 * rebalances; before the timeout nothing answers. */
static void test_sync_assignment_write_timeout(void **state)
{
    struct world *w = *state;
    join_all(w, "g", 2);
    const char *mids[2] = {w->ids[0], w->ids[1]};
    const char *as[2] = {"A", "B"};
    w->env.not_durable = 1;
    assert_int_equal(fake_sync(w->c, "g", w->ids[0], NULL, 1, 2, mids, as, &w->s[0]), GR_COORD_PARKED);
    assert_int_equal(fake_sync(w->c, "g", w->ids[1], NULL, 1, 0, NULL, NULL, &w->s[1]), GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 4900);
    assert_int_equal(w->s[0].answers + w->s[1].answers, 0);
    fake_advance(w->c, &w->env, 200);
    assert_int_equal(w->s[0].answers, 1);
    assert_int_equal(w->s[1].answers, 1);
    assert_int_equal(w->s[0].error, GR_ERR_COORDINATOR_NOT_AVAILABLE);
    assert_int_equal(w->s[1].error, GR_ERR_COORDINATOR_NOT_AVAILABLE);
    assert_int_equal(state_of(w, "g"), GR_GROUP_PREPARING_REBALANCE);
    w->env.commit_waiter = NULL; /* cancelled by the coordinator: never completed */
    w->env.not_durable = 0;
}

/* A group created by a JoinGroup is persisted as Kafka's empty group record (generation 0, no members),
 * whatever state the join left it in; a replay gives an Empty group. */
static void test_new_group_record_is_empty(void **state)
{
    struct world *w = *state;
    assert_int_equal(fake_join(w->c, "g", "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_PARKED);
    assert_int_equal(w->env.rec_count, 1);
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    struct gr_group_metadata_value v;
    assert_int_equal(
        gr_group_metadata_value_decode(w->env.recs[0].value, w->env.recs[0].value_len, &arena, &v), 0);
    assert_int_equal(v.member_count, 0);
    assert_int_equal(v.generation, 0);
    assert_int_equal(v.protocol_type.len, 0);
    assert_int_equal(v.protocol.len, -1);
    assert_int_equal(v.leader.len, -1);
    assert_true(v.current_state_timestamp_ms > 0); /* the move to PreparingRebalance */
    gr_arena_reset(&arena);
    struct fake_env env2 = {0};
    struct gr_coordinator *c2 = fake_coord(&env2, NULL);
    fake_replay_all(&w->env, c2);
    struct gr_group *g = gr_coord_group_find(c2, gr_str_c("g"));
    assert_non_null(g);
    assert_int_equal(gr_group_state(g), GR_GROUP_EMPTY);
    assert_int_equal(gr_group_member_count(g), 0);
    gr_coord_destroy(c2);
    fake_env_free(&env2);
}

/* Describe/List views. */
static void test_views(void **state)
{
    struct world *w = *state;
    stable(w, "g", 2);
    assert_int_equal(fake_join(w->c, "h", "", NULL, 3, SESSION, SESSION, "range", "meta", &w->j[2]),
                     GR_COORD_PARKED);
    assert_int_equal(gr_coord_group_count(w->c), 2);
    struct gr_group *g = gr_coord_group_find(w->c, gr_str_c("g"));
    assert_string_equal(gr_group_state_name(gr_group_state(g)), "Stable");
    assert_string_equal(gr_group_protocol_type(g), "consumer");
    assert_string_equal(gr_group_protocol_name(g), "range");
    assert_int_equal(gr_group_member_count(g), 2);
    const struct gr_member *m = gr_group_member_at(g, 1);
    assert_string_equal(gr_member_id(m), w->ids[1]);
    assert_string_equal(gr_member_client_id(m), "client");
    assert_string_equal(gr_member_client_host(m), "/127.0.0.1");
    assert_null(gr_member_instance_id(m));
    assert_int_equal(gr_member_metadata(m, g).len, 4);
    assert_memory_equal(gr_member_assignment(m).ptr, "assign-1", 8);
    struct gr_group *h = gr_coord_group_find(w->c, gr_str_c("h"));
    assert_string_equal(gr_group_state_name(gr_group_state(h)), "PreparingRebalance");
    assert_null(gr_group_protocol_name(h));
}

/* The server arms its one timer from gr_coord_rearm whenever it re-arms on its own (in a cluster: at every
 * image change). A deadline that went away (a member left) must not stay behind as the hint: a later new
 * deadline (the next group's initial rebalance) is still reported, or the join waits for an unrelated event
 * (librdkafka's 0020 on a 3-broker cluster: 11.5 s instead of 3). */
static void test_hint_after_rearm(void **state)
{
    struct world *w = *state;
    stable(w, "a", 1); /* member 0's heartbeat deadline is now the earliest */
    struct gr_leave_member lm = {
        .member_id = gr_str_c(w->ids[0]), .group_instance_id = GR_STR_NULL, .reason = GR_STR_NULL};
    assert_int_equal(gr_coord_leave(w->c, gr_str_c("a"), &lm, 1), 0);
    assert_int_equal(lm.error_code, 0);
    /* the server re-arms (an image change): nothing is due any more, so its timer is idle */
    int64_t next = gr_coord_rearm(w->c);
    assert_true(next > w->env.mono_ms + SESSION);
    /* time passes with the timer idle (no tick), past where the heartbeat deadline was */
    w->env.mono_ms += 2 * SESSION;
    w->env.wall_ms += 2 * SESSION;
    w->env.hint_ms = 0;
    fake_join_reset(&w->j[1]);
    assert_int_equal(fake_join(w->c, "b", "", NULL, 3, SESSION, SESSION, "range", "meta", &w->j[1]),
                     GR_COORD_PARKED);
    /* the initial rebalance's deadline is reported, so the server arms for it */
    assert_int_equal(w->env.hint_ms, w->env.mono_ms + 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_member_id_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_member_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_sync_heartbeat, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unlisted_member_gets_empty_assignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_initial_delay_extension, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_mid_rebalance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_leaves_during_completing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v0_rebalance_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v0_rebalance_timeout_evicts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_replace_fences_parked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_selection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_votes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_timeout_bounds_and_max_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_protocol_checks_v5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leave_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_sync_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_waits_for_durable_assignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sync_assignment_write_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_group_record_is_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_views, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hint_after_rearm, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
