/*
 * test_ownership.c: per-partition coordination (coordinator/ownership.c): a coordinator that owns no
 * __consumer_offsets partition answers NOT_COORDINATOR, a loading partition COORDINATOR_LOAD_IN_PROGRESS;
 * a partition loaded from its records serves its groups with the state they had; unloading one partition
 * drops its groups (parked JoinGroup answered NOT_COORDINATOR, timers gone) and keeps the others; a reload
 * gives the same state again. The records come from a single-node coordinator (every partition owned).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/tests/fake.h"
#include "protocol/errors.h"

#define SESSION 10000
#define PARTS 4

struct world {
    struct fake_env env;       /* the single-node coordinator's records */
    struct gr_coordinator *c;  /* single node: writes the records */
    struct fake_env env2;      /* the cluster coordinator's (appends while it owns a partition) */
    struct gr_coordinator *c2; /* cluster: owns nothing until loaded */
    char ga[32], gb[32];       /* two group names on different partitions */
    int32_t pa, pb;
    struct fake_join j[2];
    struct fake_sync s[2];
};

static int16_t commit_as(struct gr_coordinator *c, const char *group, const char *member, int32_t generation,
                         const char *topic, int32_t partition, int64_t offset)
{
    struct gr_commit_partition cp = {partition, offset, 3, GR_STR_NULL, -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {gr_str_c(group), gr_str_c(member), GR_STR_NULL, generation, -1, 8, &ct, 1};
    int32_t wp;
    int64_t we;
    gr_coord_commit(c, &p, &wp, &we);
    return cp.error_code;
}

/* A commit as a simple consumer (no member, generation -1). */
static int16_t commit(struct gr_coordinator *c, const char *group, const char *topic, int32_t partition,
                      int64_t offset)
{
    return commit_as(c, group, "", -1, topic, partition, offset);
}

/* The first member of group `group` in `c`. */
static const char *member0(struct gr_coordinator *c, const char *group)
{
    return gr_member_id(gr_group_member_at(gr_coord_group_find(c, gr_str_c(group)), 0));
}

static int64_t fetch(struct gr_coordinator *c, const char *group, const char *topic, int32_t partition)
{
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    if (!gr_coord_offset_get(c, gr_str_c(group), gr_str_c(topic), partition, &off, &epoch, &md)) return -1;
    return off;
}

/* Replays the records of partition `p` only, as a load of that partition does. */
static int replay_partition(const struct fake_env *env, struct gr_coordinator *c, int32_t p)
{
    int n = 0;
    for (int i = 0; i < env->rec_count; i++)
        if (env->recs[i].partition == p) {
            assert_int_equal(gr_coord_replay(c, env->recs[i].key, env->recs[i].key_len, env->recs[i].value,
                                             env->recs[i].value_len),
                             0);
            n++;
        }
    return n;
}

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof *w);
    w->c = fake_coord(&w->env, NULL);
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.offsets_partitions = PARTS;
    cfg.partitions_owned = false;
    w->c2 = fake_coord(&w->env2, &cfg);
    assert_non_null(w->c2);
    /* two group ids hashing to different partitions */
    strcpy(w->ga, "group-a");
    w->pa = gr_coord_partition(w->c, gr_str_c(w->ga));
    for (int i = 0; i < 100; i++) {
        snprintf(w->gb, sizeof w->gb, "group-b%d", i);
        w->pb = gr_coord_partition(w->c, gr_str_c(w->gb));
        if (w->pb != w->pa) break;
    }
    assert_int_not_equal(w->pa, w->pb);
    assert_int_equal(gr_coord_partition(w->c2, gr_str_c(w->ga)), w->pa);
    /* a Stable one-member group with offsets on pa, a simple group with offsets on pb */
    assert_int_equal(fake_join(w->c, w->ga, "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_PARKED);
    fake_advance(w->c, &w->env, 3000);
    assert_int_equal(w->j[0].error, 0);
    assert_int_equal(fake_sync(w->c, w->ga, w->j[0].member_id, NULL, 1, 0, NULL, NULL, &w->s[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(commit_as(w->c, w->ga, w->j[0].member_id, 1, "t", 0, 100), 0);
    assert_int_equal(commit_as(w->c, w->ga, w->j[0].member_id, 1, "t", 1, 101), 0);
    assert_int_equal(commit(w->c, w->gb, "t", 0, 200), 0);
    fake_join_reset(&w->j[0]);
    fake_sync_reset(&w->s[0]);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    gr_coord_destroy(w->c);
    gr_coord_destroy(w->c2);
    for (int i = 0; i < 2; i++) {
        fake_join_reset(&w->j[i]);
        fake_sync_reset(&w->s[i]);
    }
    fake_env_free(&w->env);
    fake_env_free(&w->env2);
    free(w);
    return 0;
}

/* A single-node coordinator owns everything; a cluster one nothing until loaded. */
static void test_initial_states(void **state)
{
    struct world *w = *state;
    for (int32_t p = 0; p < PARTS; p++) {
        assert_int_equal(gr_coord_partition_state(w->c, p), GR_COORD_PART_OWNED);
        assert_int_equal(gr_coord_partition_state(w->c2, p), GR_COORD_PART_NOT_OWNED);
        assert_int_equal(gr_coord_partition_epoch(w->c2, p), -1);
    }
    assert_int_equal(gr_coord_partition_state(w->c2, PARTS), GR_COORD_PART_NOT_OWNED);
    assert_int_equal(gr_coord_check(w->c, gr_str_c(w->ga)), 0);
    assert_int_equal(gr_coord_check(w->c2, gr_str_c(w->ga)), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(gr_coord_check(w->c2, gr_str_c("")), 0); /* the call answers INVALID_GROUP_ID */
    /* every entry point refuses a group of a partition not owned, and writes nothing */
    assert_int_equal(commit(w->c2, w->ga, "t", 0, 5), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(gr_coord_heartbeat(w->c2, gr_str_c(w->ga), gr_str_c("m"), GR_STR_NULL, 1),
                     GR_ERR_NOT_COORDINATOR);
    assert_int_equal(fake_join(w->c2, w->ga, "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_NOT_COORDINATOR);
    assert_int_equal(gr_coord_group_delete(w->c2, gr_str_c(w->ga)), GR_ERR_NOT_COORDINATOR);
    struct gr_leave_member lm = {gr_str_c("m"), GR_STR_NULL, GR_STR_NULL, -99};
    assert_int_equal(gr_coord_leave(w->c2, gr_str_c(w->ga), &lm, 1), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(w->env2.rec_count, 0);
    assert_int_equal(gr_coord_group_count(w->c2), 0);
}

/* Requests during a load get COORDINATOR_LOAD_IN_PROGRESS; after it the group is served as it was. */
static void test_load(void **state)
{
    struct world *w = *state;
    assert_int_equal(gr_coord_partition_load_begin(w->c2, w->pa, 7), 0);
    assert_int_equal(gr_coord_partition_load_begin(w->c2, PARTS, 7), -EINVAL);
    assert_int_equal(gr_coord_partition_state(w->c2, w->pa), GR_COORD_PART_LOADING);
    assert_int_equal(gr_coord_partition_epoch(w->c2, w->pa), 7);
    assert_true(replay_partition(&w->env, w->c2, w->pa) >= 3);
    /* replayed but not loaded yet */
    assert_int_equal(gr_coord_check(w->c2, gr_str_c(w->ga)), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(commit(w->c2, w->ga, "t", 0, 5), GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(fake_join(w->c2, w->ga, "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[0]),
                     GR_COORD_ANSWERED);
    assert_int_equal(w->j[0].error, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(fetch(w->c2, w->ga, "t", 0), -1); /* lookups show nothing of a loading partition */
    assert_int_equal(gr_coord_check(w->c2, gr_str_c(w->gb)), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(gr_coord_partition_load_done(w->c2, w->pa), 1);
    assert_int_equal(gr_coord_partition_load_done(w->c2, w->pa), -EINVAL); /* not loading any more */
    assert_int_equal(gr_coord_partition_state(w->c2, w->pa), GR_COORD_PART_OWNED);
    assert_int_equal(gr_coord_check(w->c2, gr_str_c(w->ga)), 0);
    assert_int_equal(fetch(w->c2, w->ga, "t", 0), 100);
    assert_int_equal(fetch(w->c2, w->ga, "t", 1), 101);
    struct gr_group *g = gr_coord_group_find(w->c2, gr_str_c(w->ga));
    assert_non_null(g);
    assert_int_equal(gr_group_state(g), GR_GROUP_STABLE);
    assert_int_equal(gr_group_generation(g), 1);
    assert_int_equal(gr_group_member_count(g), 1);
    /* the loaded member's session timer runs: a deadline exists, and it expires */
    assert_true(gr_coord_next_deadline_ms(w->c2) <= w->env2.mono_ms + SESSION);
    assert_null(gr_coord_group_find(w->c2, gr_str_c(w->gb))); /* pb was not loaded */
    assert_int_equal(commit_as(w->c2, w->ga, member0(w->c2, w->ga), 1, "t", 2, 102), 0);
    assert_int_equal(w->env2.rec_count, 1);
    assert_int_equal(w->env2.recs[0].partition, w->pa);
}

/* Unloading one partition drops its groups only; parked requests get NOT_COORDINATOR; a reload restores. */
static void test_unload_and_reload(void **state)
{
    struct world *w = *state;
    for (int k = 0; k < 2; k++) {
        int32_t p = k ? w->pb : w->pa;
        assert_int_equal(gr_coord_partition_load_begin(w->c2, p, 1), 0);
        replay_partition(&w->env, w->c2, p);
        assert_int_equal(gr_coord_partition_load_done(w->c2, p), 1);
    }
    assert_int_equal(fetch(w->c2, w->gb, "t", 0), 200);
    /* a new member joins group b (parked for the initial rebalance delay) */
    assert_int_equal(fake_join(w->c2, w->gb, "", NULL, 3, SESSION, SESSION, "range", "m", &w->j[1]),
                     GR_COORD_PARKED);
    assert_int_equal(w->j[1].answers, 0);
    assert_int_equal(gr_coord_group_count(w->c2), 2);

    assert_int_equal(gr_coord_partition_unload(w->c2, w->pb), 1);
    assert_int_equal(w->j[1].answers, 1);
    assert_int_equal(w->j[1].error, GR_ERR_NOT_COORDINATOR);
    assert_null(gr_coord_group_find(w->c2, gr_str_c(w->gb)));
    assert_int_equal(gr_coord_partition_state(w->c2, w->pb), GR_COORD_PART_NOT_OWNED);
    assert_int_equal(commit(w->c2, w->gb, "t", 0, 5), GR_ERR_NOT_COORDINATOR);
    assert_int_equal(fetch(w->c2, w->gb, "t", 0), -1);
    /* group a untouched */
    assert_int_equal(gr_coord_group_count(w->c2), 1);
    assert_int_equal(fetch(w->c2, w->ga, "t", 1), 101);
    assert_int_equal(gr_coord_heartbeat(w->c2, gr_str_c(w->ga),
                                        gr_str_c(gr_member_id(gr_group_member_at(
                                            gr_coord_group_find(w->c2, gr_str_c(w->ga)), 0))),
                                        GR_STR_NULL, 1),
                     0);
    /* time passes: no timer of the dropped group fires (nothing appended for it) */
    int before = w->env2.rec_count;
    fake_advance(w->c2, &w->env2, 5000);
    assert_int_equal(w->env2.rec_count, before);

    /* unload a, then reload: the same state */
    assert_int_equal(gr_coord_partition_unload(w->c2, w->pa), 1);
    assert_int_equal(gr_coord_group_count(w->c2), 0);
    assert_int_equal(gr_coord_next_deadline_ms(w->c2) >= w->env2.mono_ms + 1000, true);
    assert_int_equal(gr_coord_partition_load_begin(w->c2, w->pa, 2), 0);
    replay_partition(&w->env, w->c2, w->pa);
    assert_int_equal(gr_coord_partition_load_done(w->c2, w->pa), 1);
    struct gr_group *g = gr_coord_group_find(w->c2, gr_str_c(w->ga));
    struct gr_group *g0 = gr_coord_group_find(w->c, gr_str_c(w->ga));
    assert_non_null(g);
    assert_int_equal(gr_group_state(g), gr_group_state(g0));
    assert_int_equal(gr_group_generation(g), gr_group_generation(g0));
    assert_string_equal(gr_group_leader(g), gr_group_leader(g0));
    assert_string_equal(gr_member_id(gr_group_member_at(g, 0)), gr_member_id(gr_group_member_at(g0, 0)));
    assert_int_equal(fetch(w->c2, w->ga, "t", 0), 100);
    assert_int_equal(fetch(w->c2, w->ga, "t", 1), 101);
    assert_int_equal(gr_coord_partition_epoch(w->c2, w->pa), 2);
    /* a load_begin of a partition already owned starts over from nothing */
    assert_int_equal(gr_coord_partition_load_begin(w->c2, w->pa, 3), 0);
    assert_int_equal(gr_coord_group_count(w->c2), 0);
}

/* The partition count may change only while nothing is owned or held. */
static void test_set_partition_count(void **state)
{
    struct world *w = *state;
    assert_int_equal(gr_coord_set_partition_count(w->c, 8), -EBUSY); /* single node: owns everything */
    assert_int_equal(gr_coord_set_partition_count(w->c2, 0), -EINVAL);
    assert_int_equal(gr_coord_set_partition_count(w->c2, 8), 0);
    assert_int_equal(gr_coord_partition_state(w->c2, 7), GR_COORD_PART_NOT_OWNED);
    assert_int_equal(gr_coord_partition(w->c2, gr_str_c(w->ga)), gr_coord_partition_for(gr_str_c(w->ga), 8));
    assert_int_equal(gr_coord_partition_load_begin(w->c2, 7, 0), 0);
    assert_int_equal(gr_coord_set_partition_count(w->c2, 4), -EBUSY);
    gr_coord_partition_unload(w->c2, 7);
    assert_int_equal(gr_coord_set_partition_count(w->c2, 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_initial_states, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unload_and_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_partition_count, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
