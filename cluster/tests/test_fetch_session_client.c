/* test_fetch_session_client.c: the client side of KIP-227 fetch sessions (cluster/fetch_session_client.h),
 * as Kafka's FetchSessionHandler behaves: a full fetch at INITIAL (0, 0) opening a session; incremental
 * fetches (epoch 1, 2, ...) carrying only the partitions added or changed and forgetting the ones no longer
 * wanted; answers omitting unchanged partitions accepted; a top-level error (70: INITIAL, 71 and others:
 * (id, 0)), a lost request, an answer naming a partition outside the session or a full answer omitting one,
 * each sending the next request back to a full fetch; a leader that makes no session (session id 0: full
 * every time); a leader that closes the session; the epoch wrapping INT32_MAX -> 1; a partition without a
 * topic id switching the session to names (full, v12); and a leader change (the old connection's session
 * forgets the partition, the new leader's starts at INITIAL). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/fetch_session_client.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"

static const uint8_t ID_A[16] = {0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint8_t ID_B[16] = {0xb2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* Partition `p` of topic "orders" (ID_A) at fetch offset `off`. */
static struct gr_fsc_part part(int32_t p, int64_t off)
{
    struct gr_fsc_part x = {.topic = "orders",
                            .partition = p,
                            .fetch_offset = off,
                            .log_start_offset = 0,
                            .current_leader_epoch = 3,
                            .last_fetched_epoch = off > 0 ? 3 : -1,
                            .partition_max_bytes = 1048576};
    memcpy(x.topic_id, ID_A, 16);
    return x;
}

/* One request: begin, add `n` partitions, build (ids served); asserts success. */
static struct gr_fsc_plan build(struct gr_fsc *s, const struct gr_fsc_part *ps, int n)
{
    gr_fsc_begin(s);
    for (int i = 0; i < n; i++)
        assert_int_equal(gr_fsc_add(s, &ps[i]), 0);
    struct gr_fsc_plan plan;
    assert_int_equal(gr_fsc_build(s, true, &plan), 0);
    return plan;
}

/* An answer naming `n` partitions of `topic` / `id` (one topic entry each). */
#define ANS_MAX 8
struct ans {
    struct gr_fetch_response r;
    struct gr_fetch_response_fetchable_topic_response t[ANS_MAX];
    struct gr_fetch_response_partition_data p[ANS_MAX];
};

static struct gr_fetch_response *answer(struct ans *a, int16_t error, int32_t session_id, const char *topic,
                                        const uint8_t *id, const int32_t *parts, int n)
{
    gr_fetch_response_init(&a->r);
    a->r.error_code = error;
    a->r.session_id = session_id;
    for (int i = 0; i < n; i++) {
        gr_fetch_response_fetchable_topic_response_init(&a->t[i]);
        a->t[i].topic = gr_str_c(topic);
        memcpy(a->t[i].topic_id.b, id, 16);
        gr_fetch_response_partition_data_init(&a->p[i]);
        a->p[i].partition_index = parts[i];
        a->t[i].partitions.items = &a->p[i];
        a->t[i].partitions.count = 1;
    }
    a->r.responses.items = a->t;
    a->r.responses.count = n;
    return &a->r;
}

/* A session opened on (0, 0) with partitions 0..2 of "orders", answered with session id 1234. */
static struct gr_fsc *opened(struct gr_fsc_part ps[3])
{
    struct gr_fsc *s = gr_fsc_new();
    assert_non_null(s);
    for (int i = 0; i < 3; i++)
        ps[i] = part(i, 100 + i);
    struct gr_fsc_plan plan = build(s, ps, 3);
    assert_true(plan.full);
    assert_int_equal(plan.session_id, 0);
    assert_int_equal(plan.session_epoch, 0);
    assert_true(plan.topic_ids);
    assert_int_equal(plan.send_count, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(plan.send[i], i);
    assert_int_equal(plan.forgotten_count, 0);
    struct ans a;
    assert_true(gr_fsc_response(s, answer(&a, 0, 1234, "", ID_A, (int32_t[]){0, 1, 2}, 3), 18));
    assert_int_equal(gr_fsc_session_id(s), 1234);
    assert_int_equal(gr_fsc_epoch(s), 1);
    assert_int_equal(gr_fsc_partitions(s), 3);
    return s;
}

/* full -> incremental with nothing changed -> changed partitions only -> added -> forgotten. */
static void test_full_incremental_changed_forgotten(void **state)
{
    (void)state;
    struct gr_fsc_part ps[4];
    struct gr_fsc *s = opened(ps);
    struct ans a;

    struct gr_fsc_plan plan = build(s, ps, 3); /* nothing changed: an empty incremental fetch */
    assert_false(plan.full);
    assert_int_equal(plan.session_id, 1234);
    assert_int_equal(plan.session_epoch, 1);
    assert_int_equal(plan.send_count, 0);
    assert_int_equal(plan.forgotten_count, 0);
    assert_true(
        gr_fsc_response(s, answer(&a, 0, 1234, "", ID_A, NULL, 0), 18)); /* nothing new: no partition */
    assert_int_equal(gr_fsc_epoch(s), 2);

    ps[1].fetch_offset = 150; /* the follower appended to partition 1 */
    plan = build(s, ps, 3);
    assert_int_equal(plan.session_epoch, 2);
    assert_int_equal(plan.send_count, 1);
    assert_int_equal(plan.send[0], 1);
    assert_true(gr_fsc_response(s, answer(&a, 0, 1234, "", ID_A, (int32_t[]){1}, 1), 18));
    assert_int_equal(gr_fsc_epoch(s), 3);

    ps[0].log_start_offset = 7; /* another field: the log start offset; and a leader epoch */
    ps[2].current_leader_epoch = 4;
    ps[3] = part(3, 0); /* a new partition */
    plan = build(s, ps, 4);
    assert_int_equal(plan.session_epoch, 3);
    assert_int_equal(plan.send_count, 3);
    assert_int_equal(plan.send[0], 0);
    assert_int_equal(plan.send[1], 2);
    assert_int_equal(plan.send[2], 3);
    assert_int_equal(plan.forgotten_count, 0);
    assert_true(gr_fsc_response(s, answer(&a, 0, 1234, "", ID_A, (int32_t[]){3, 0}, 2), 18));
    assert_int_equal(gr_fsc_partitions(s), 4);

    struct gr_fsc_part keep[2] = {ps[0], ps[3]}; /* partitions 1 and 2 no longer wanted */
    plan = build(s, keep, 2);
    assert_false(plan.full);
    assert_int_equal(plan.session_epoch, 4);
    assert_int_equal(plan.send_count, 0);
    assert_int_equal(plan.forgotten_count, 2);
    assert_string_equal(plan.forgotten[0].topic, "orders");
    assert_memory_equal(plan.forgotten[0].topic_id, ID_A, 16);
    assert_int_equal(plan.forgotten[0].partition, 1);
    assert_int_equal(plan.forgotten[1].partition, 2);
    assert_true(gr_fsc_response(s, answer(&a, 0, 1234, "", ID_A, NULL, 0), 18));
    assert_int_equal(gr_fsc_partitions(s), 2);
    assert_int_equal(gr_fsc_epoch(s), 5);

    plan = build(s, keep, 2); /* forgotten once, not again */
    assert_int_equal(plan.forgotten_count, 0);
    assert_int_equal(plan.send_count, 0);
    /* an answer naming a partition outside the session: not used, (id, 0) next */
    assert_false(gr_fsc_response(s, answer(&a, 0, 1234, "", ID_A, (int32_t[]){1}, 1), 18));
    assert_int_equal(gr_fsc_session_id(s), 1234);
    assert_int_equal(gr_fsc_epoch(s), 0);
    plan = build(s, keep, 2);
    assert_true(plan.full);
    assert_int_equal(plan.session_id, 1234);
    assert_int_equal(plan.session_epoch, 0);
    assert_int_equal(plan.send_count, 2);
    assert_int_equal(gr_fsc_stats(s)->full, 2);
    assert_int_equal(gr_fsc_stats(s)->incremental, 5);
    assert_int_equal(gr_fsc_stats(s)->resets, 1);
    gr_fsc_free(s);
}

/* Session errors and failures: 71 -> (id, 0), a full fetch making a new session; 70 -> INITIAL; a request
   lost -> (id, 0); other top-level errors -> (id, 0). */
static void test_error_fallback(void **state)
{
    (void)state;
    struct gr_fsc_part ps[3];
    struct gr_fsc *s = opened(ps);
    struct ans a;

    struct gr_fsc_plan plan = build(s, ps, 3);
    assert_false(
        gr_fsc_response(s, answer(&a, GR_ERR_INVALID_FETCH_SESSION_EPOCH, 0, "", ID_A, NULL, 0), 18));
    assert_int_equal(gr_fsc_session_id(s), 1234);
    assert_int_equal(gr_fsc_epoch(s), 0);
    ps[0].fetch_offset = 500;
    plan = build(s, ps, 3);
    assert_true(plan.full);
    assert_int_equal(plan.session_id, 1234); /* closes 1234, asks for a new one */
    assert_int_equal(plan.session_epoch, 0);
    assert_int_equal(plan.send_count, 3);
    assert_true(gr_fsc_response(s, answer(&a, 0, 5678, "", ID_A, (int32_t[]){2, 1, 0}, 3), 18));
    assert_int_equal(gr_fsc_session_id(s), 5678);
    assert_int_equal(gr_fsc_epoch(s), 1);

    plan = build(s, ps, 3);
    assert_false(plan.full);
    assert_int_equal(plan.send_count, 0);
    assert_false(gr_fsc_response(s, answer(&a, GR_ERR_FETCH_SESSION_ID_NOT_FOUND, 0, "", ID_A, NULL, 0), 18));
    assert_int_equal(gr_fsc_session_id(s), 0); /* INITIAL */
    assert_int_equal(gr_fsc_epoch(s), 0);
    plan = build(s, ps, 3);
    assert_true(plan.full);
    assert_int_equal(plan.session_id, 0);
    assert_int_equal(plan.send_count, 3);
    assert_true(gr_fsc_response(s, answer(&a, 0, 99, "", ID_A, (int32_t[]){0, 1, 2}, 3), 18));

    plan = build(s, ps, 3);
    gr_fsc_failed(s); /* not answered (lost connection, timeout) */
    assert_int_equal(gr_fsc_session_id(s), 99);
    assert_int_equal(gr_fsc_epoch(s), 0);
    plan = build(s, ps, 3);
    assert_true(plan.full);
    assert_true(gr_fsc_response(s, answer(&a, 0, 99, "", ID_A, (int32_t[]){0, 1, 2}, 3), 18));
    plan = build(s, ps, 3);
    assert_false(
        gr_fsc_response(s, answer(&a, GR_ERR_FETCH_SESSION_TOPIC_ID_ERROR, 0, "", ID_A, NULL, 0), 18));
    assert_int_equal(gr_fsc_session_id(s), 99);
    assert_int_equal(gr_fsc_epoch(s), 0);
    assert_int_equal(gr_fsc_stats(s)->resets, 4);
    gr_fsc_failed(s); /* nothing out: no change */
    assert_int_equal(gr_fsc_stats(s)->resets, 4);
    gr_fsc_free(s);
}

/* A leader that makes no session (no slot): session id 0 in every full answer, full fetches at (0, 0) each
   time; a full answer omitting a partition is not used; an incremental answer with session id 0 (closed). */
static void test_no_session_and_closed(void **state)
{
    (void)state;
    struct gr_fsc *s = gr_fsc_new();
    struct gr_fsc_part ps[2] = {part(0, 5), part(1, 6)};
    struct ans a;
    for (int round = 0; round < 3; round++) {
        struct gr_fsc_plan plan = build(s, ps, 2);
        assert_true(plan.full);
        assert_int_equal(plan.session_id, 0);
        assert_int_equal(plan.session_epoch, 0);
        assert_int_equal(plan.send_count, 2);
        assert_true(gr_fsc_response(s, answer(&a, 0, 0, "", ID_A, (int32_t[]){0, 1}, 2), 18));
        assert_int_equal(gr_fsc_epoch(s), 0);
    }
    build(s, ps, 2);
    assert_false(gr_fsc_response(s, answer(&a, 0, 7, "", ID_A, (int32_t[]){1}, 1), 18)); /* omits 0 */
    assert_int_equal(gr_fsc_session_id(s), 0);
    build(s, ps, 2);
    assert_true(gr_fsc_response(s, answer(&a, 0, 7, "", ID_A, (int32_t[]){1, 0}, 2), 18));
    struct gr_fsc_plan plan = build(s, ps, 2);
    assert_false(plan.full);
    assert_int_equal(plan.session_id, 7);
    assert_int_equal(plan.session_epoch, 1);
    assert_true(gr_fsc_response(s, answer(&a, 0, 0, "", ID_A, (int32_t[]){0}, 1), 18)); /* closed by leader */
    assert_int_equal(gr_fsc_session_id(s), 0);
    assert_int_equal(gr_fsc_epoch(s), 0);
    assert_true(build(s, ps, 2).full);
    gr_fsc_free(s);
}

/* Epochs: 1, 2, ..., INT32_MAX, then 1 (FetchMetadata.nextEpoch); -1 stays. */
static void test_epoch_wrap(void **state)
{
    (void)state;
    assert_int_equal(gr_fsc_next_epoch(1), 2);
    assert_int_equal(gr_fsc_next_epoch(INT32_MAX - 1), INT32_MAX);
    assert_int_equal(gr_fsc_next_epoch(INT32_MAX), 1);
    assert_int_equal(gr_fsc_next_epoch(-1), -1);
}

/* A partition without a topic id: the request goes by names (v12) and, the session being by ids, is full
   ((id, 0)); an answer by names (v12) is then matched by name; a connection serving no v13 goes by names. */
static void test_names_mode(void **state)
{
    (void)state;
    struct gr_fsc_part ps[3];
    struct gr_fsc *s = opened(ps);
    struct ans a;
    memset(ps[2].topic_id, 0, 16);
    struct gr_fsc_plan plan = build(s, ps, 3);
    assert_true(plan.full);
    assert_false(plan.topic_ids);
    assert_int_equal(plan.session_id, 1234);
    assert_int_equal(plan.session_epoch, 0);
    assert_int_equal(plan.send_count, 3);
    assert_true(gr_fsc_response(s, answer(&a, 0, 1235, "orders", ID_B, (int32_t[]){0, 1, 2}, 3), 12));
    assert_int_equal(gr_fsc_epoch(s), 1);
    ps[1].fetch_offset = 999;
    plan = build(s, ps, 3);
    assert_false(plan.full);
    assert_false(plan.topic_ids);
    assert_int_equal(plan.send_count, 1);
    assert_int_equal(plan.send[0], 1);
    assert_false(
        gr_fsc_response(s, answer(&a, 0, 1235, "other", ID_B, (int32_t[]){1}, 1), 12)); /* not ours */
    gr_fsc_free(s);

    s = gr_fsc_new(); /* ids known but the connection serves v12 at most */
    struct gr_fsc_part p0 = part(0, 1);
    gr_fsc_begin(s);
    assert_int_equal(gr_fsc_add(s, &p0), 0);
    assert_int_equal(gr_fsc_build(s, false, &plan), 0);
    assert_false(plan.topic_ids);
    struct gr_fsc_part bad = part(-1, 0);
    gr_fsc_begin(s);
    assert_int_equal(gr_fsc_add(s, &bad), -EINVAL);
    gr_fsc_free(s);
}

/* A leader change: partition 1 moves from leader A's connection to leader B's. A's next request forgets it
   (its session goes on with 0 and 2); B's session handler is new: a full fetch at (0, 0) with partition 1. */
static void test_leader_change(void **state)
{
    (void)state;
    struct gr_fsc_part ps[3];
    struct gr_fsc *a_s = opened(ps);
    struct ans a;
    struct gr_fsc_part stay[2] = {ps[0], ps[2]};
    struct gr_fsc_plan plan = build(a_s, stay, 2);
    assert_false(plan.full);
    assert_int_equal(plan.session_id, 1234);
    assert_int_equal(plan.send_count, 0);
    assert_int_equal(plan.forgotten_count, 1);
    assert_int_equal(plan.forgotten[0].partition, 1);
    assert_true(gr_fsc_response(a_s, answer(&a, 0, 1234, "", ID_A, (int32_t[]){2}, 1), 18));

    struct gr_fsc *b_s = gr_fsc_new();
    ps[1].current_leader_epoch = 4;
    plan = build(b_s, &ps[1], 1);
    assert_true(plan.full);
    assert_int_equal(plan.session_id, 0);
    assert_int_equal(plan.session_epoch, 0);
    assert_int_equal(plan.send_count, 1);
    assert_true(gr_fsc_response(b_s, answer(&a, 0, 42, "", ID_A, (int32_t[]){1}, 1), 18));
    assert_int_equal(gr_fsc_session_id(b_s), 42);
    assert_int_equal(gr_fsc_epoch(b_s), 1);
    gr_fsc_free(a_s);
    gr_fsc_free(b_s);
}

/* 1,000 partitions: one changed among them is the only one carried. */
static void test_many(void **state)
{
    (void)state;
    struct gr_fsc *s = gr_fsc_new();
    static struct gr_fsc_part ps[1000];
    for (int i = 0; i < 1000; i++)
        ps[i] = part(i, i);
    struct gr_fsc_plan plan = build(s, ps, 1000);
    assert_int_equal(plan.send_count, 1000);
    struct gr_fetch_response r;
    gr_fetch_response_init(&r);
    static struct gr_fetch_response_partition_data pd[1000];
    struct gr_fetch_response_fetchable_topic_response t;
    gr_fetch_response_fetchable_topic_response_init(&t);
    memcpy(t.topic_id.b, ID_A, 16);
    for (int i = 0; i < 1000; i++) {
        gr_fetch_response_partition_data_init(&pd[i]);
        pd[i].partition_index = i;
    }
    t.partitions.items = pd;
    t.partitions.count = 1000;
    r.responses.items = &t;
    r.responses.count = 1;
    r.session_id = 3;
    assert_true(gr_fsc_response(s, &r, 18));
    ps[617].fetch_offset++;
    plan = build(s, ps, 1000);
    assert_int_equal(plan.send_count, 1);
    assert_int_equal(plan.send[0], 617);
    gr_fsc_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_incremental_changed_forgotten),
        cmocka_unit_test(test_error_fallback),
        cmocka_unit_test(test_no_session_and_closed),
        cmocka_unit_test(test_epoch_wrap),
        cmocka_unit_test(test_names_mode),
        cmocka_unit_test(test_leader_change),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
