/*
 * test_txn_verifier.c: verification at a transaction coordinator on another broker (server/txn_verifier.h,
 * Kafka's AddPartitionsToTxnManager) against a fake peer in this process (fake_peer.h: broker 2 on the
 * test's loop) that answers AddPartitionsToTxn as each test tells it (per-partition errors from a table,
 * partition 99 left out, a top-level error, a held answer, a hang-up), and records what it was sent. Covered:
 * several Produces' questions with several transactional ids in ONE request (one VerifyOnly entry per id, a
 * topic's partitions in one entry), each answer routed back to its own question (NONE, TRANSACTION_ABORTABLE,
 * PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, NETWORK_EXCEPTION for a partition left out); one request in
 * flight, the queued ones in the next; a second question for a queued id (addTxnData's three cases); a lost
 * connection (NETWORK_EXCEPTION) and CLUSTER_AUTHORIZATION_FAILED (INVALID_TXN_STATE); the queue bound;
 * and the verification guard over a real partition: the coordinator says yes, an abort marker lands before
 * the append, and the append is refused INVALID_TXN_STATE.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/broker_client.h"
#include "cluster/image.h"
#include "common/limits.h"
#include "common/time.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"
#include "server/tests/fake_peer.h"
#include "server/txn_verifier.h"
#include "storage/producer_state.h"
#include "storage/tests/helpers.h"

/* One transaction entry the peer received. */
struct seen {
    int request; /* which AddPartitionsToTxn request (1-based) */
    char txn_id[32];
    int64_t producer_id;
    int16_t producer_epoch;
    bool verify_only;
    int topics;     /* topic entries */
    int partitions; /* partitions across them */
};

static struct ev_loop *loop;
static struct fake_peer peer;

static struct fake {
    int16_t version; /* of the last AddPartitionsToTxn request (peer.requests counts them) */
    struct seen seen[64];
    int seen_count;
    int16_t errs[8];   /* the error answered for partition p of any topic; partition 99 left out */
    int16_t top_error; /* the answer's top-level error */
} fake;

/* Decodes an AddPartitionsToTxn request into fake.seen and answers it from fake.errs / fake.top_error. */
static void add_partitions(const uint8_t *frame, size_t n, int32_t corr, int16_t version)
{
    struct gr_arena arena;
    gr_arena_init(&arena, 1 << 16);
    struct gr_rd rd;
    gr_rd_init(&rd, frame, n, &arena);
    struct gr_request_header h;
    struct gr_add_partitions_to_txn_request req;
    gr_add_partitions_to_txn_request_init(&req);
    assert_int_equal(gr_request_header_decode(&rd, 2, &h), 0);
    assert_int_equal(gr_add_partitions_to_txn_request_decode(&rd, version, &req), 0);
    peer.requests++;
    fake.version = version;
    enum { M = 64 };
    static struct gr_add_partitions_to_txn_response_add_partitions_to_txn_result rr[M];
    static struct gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result tr[M];
    static struct gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result pr[M];
    int nr = 0, nt = 0, np = 0;
    for (int32_t i = 0; i < req.transactions.count && nr < M; i++) {
        const struct gr_add_partitions_to_txn_request_add_partitions_to_txn_transaction *tx =
            &req.transactions.items[i];
        struct seen *s = fake.seen_count < 64 ? &fake.seen[fake.seen_count++] : NULL;
        if (s) {
            *s = (struct seen){.request = peer.requests,
                               .producer_id = tx->producer_id,
                               .producer_epoch = tx->producer_epoch,
                               .verify_only = tx->verify_only,
                               .topics = tx->topics.count};
            snprintf(s->txn_id, sizeof s->txn_id, "%.*s", (int)tx->transactional_id.len,
                     tx->transactional_id.ptr);
        }
        gr_add_partitions_to_txn_response_add_partitions_to_txn_result_init(&rr[nr]);
        rr[nr].transactional_id = tx->transactional_id;
        rr[nr].topic_results.items = &tr[nt];
        rr[nr].topic_results.count = 0;
        for (int32_t j = 0; j < tx->topics.count && nt < M; j++) {
            const struct gr_add_partitions_to_txn_request_add_partitions_to_txn_topic *t =
                &tx->topics.items[j];
            gr_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_init(&tr[nt]);
            tr[nt].name = t->name;
            tr[nt].results_by_partition.items = &pr[np];
            tr[nt].results_by_partition.count = 0;
            for (int32_t k = 0; k < t->partitions.count && np < M; k++) {
                int32_t p = t->partitions.items[k];
                if (s) s->partitions++;
                if (p == 99) continue; /* left out of the answer */
                gr_add_partitions_to_txn_response_add_partitions_to_txn_partition_result_init(&pr[np]);
                pr[np].partition_index = p;
                pr[np].partition_error_code = p >= 0 && p < 8 ? fake.errs[p] : GR_ERR_NONE;
                np++;
                tr[nt].results_by_partition.count++;
            }
            nt++;
            rr[nr].topic_results.count++;
        }
        nr++;
    }
    struct gr_add_partitions_to_txn_response resp;
    gr_add_partitions_to_txn_response_init(&resp);
    resp.error_code = fake.top_error;
    resp.results_by_transaction.items = rr;
    resp.results_by_transaction.count = fake.top_error ? 0 : nr;
    fake_peer_answer(&peer, gr_msg_ops_find(h.request_api_key, true), &resp, corr, version, true);
    gr_arena_reset(&arena);
}

/* ---- the questions' side ---- */

struct rec {
    struct gr_txn_question q;
    struct gr_txn_verify_part parts[4];
    int calls;
};

static void rec_done(struct gr_txn_question *q)
{
    ((struct rec *)q)->calls++;
}

/* A question for `txn` (pid, epoch) about topic/partition pairs (n of them). */
static void rec_init(struct rec *r, const char *txn, int64_t pid, int16_t epoch, int n,
                     const char *const *topics, const int32_t *partitions)
{
    memset(r, 0, sizeof *r);
    r->q = (struct gr_txn_question){.txn_id = gr_str_c(txn),
                                    .producer_id = pid,
                                    .producer_epoch = epoch,
                                    .parts = r->parts,
                                    .count = n,
                                    .done = rec_done};
    for (int i = 0; i < n; i++)
        r->parts[i] = (struct gr_txn_verify_part){gr_str_c(topics[i]), partitions[i], -1};
}

static bool called(void *arg)
{
    return ((struct rec *)arg)->calls > 0;
}

static bool held(void *arg)
{
    (void)arg;
    return peer.held != NULL;
}

static int setup(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof fake);
    fake_peer_start(&peer, loop, add_partitions);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fake_peer_stop(&peer);
    return 0;
}

static const char *const T2[] = {"t", "t"}, *const TU[] = {"t", "u"}, *const T1[] = {"t"};

/* Three Produces' questions (three transactional ids) asked before the connection is ready go out as ONE
 * AddPartitionsToTxn request with three VerifyOnly transactions; each answer goes back to its own question.
 */
static void test_batch_routes_answers(void **state)
{
    (void)state;
    struct gr_txn_verifier *v = gr_txn_verifier_new(loop, peer.bc);
    assert_non_null(v);
    fake.errs[1] = GR_ERR_TRANSACTION_ABORTABLE;
    fake.errs[2] = GR_ERR_PRODUCER_FENCED;
    struct rec a, b, c;
    rec_init(&a, "txn-a", 11, 3, 2, T2, (const int32_t[]){0, 1});
    rec_init(&b, "txn-b", 12, 4, 2, TU, (const int32_t[]){2, 0});
    rec_init(&c, "txn-c", 13, 5, 1, T1, (const int32_t[]){99});
    assert_int_equal(gr_txn_verifier_ask(v, 2, &a.q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b.q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &c.q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &c.q), -EINVAL); /* already queued */
    assert_int_equal(gr_txn_verifier_pending(v), 3);
    assert_true(fake_peer_run_until(loop, called, &c, 5000));
    assert_int_equal(peer.requests, 1);
    assert_int_equal(gr_txn_verifier_requests(v), 1);
    assert_true(fake.version >= 4);
    assert_int_equal(fake.seen_count, 3);
    assert_string_equal(fake.seen[0].txn_id, "txn-a");
    assert_int_equal(fake.seen[0].producer_id, 11);
    assert_int_equal(fake.seen[0].producer_epoch, 3);
    assert_true(fake.seen[0].verify_only);
    assert_int_equal(fake.seen[0].topics, 1); /* t-0 and t-1 share one topic entry */
    assert_int_equal(fake.seen[0].partitions, 2);
    assert_string_equal(fake.seen[1].txn_id, "txn-b");
    assert_int_equal(fake.seen[1].producer_id, 12);
    assert_true(fake.seen[1].verify_only);
    assert_int_equal(fake.seen[1].topics, 2);
    assert_string_equal(fake.seen[2].txn_id, "txn-c");
    assert_int_equal(fake.seen[2].request, 1);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.parts[0].error, GR_ERR_NONE);
    assert_int_equal(a.parts[1].error, GR_ERR_TRANSACTION_ABORTABLE); /* the Produce version maps it later */
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.parts[0].error, GR_ERR_INVALID_PRODUCER_EPOCH); /* PRODUCER_FENCED */
    assert_int_equal(b.parts[1].error, GR_ERR_NONE);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.parts[0].error, GR_ERR_NETWORK_EXCEPTION); /* left out of the answer */
    assert_int_equal(gr_txn_verifier_pending(v), 0);
    gr_txn_verifier_free(v);
}

/* One request in flight per broker; questions asked meanwhile queue and go together in the next one. A
 * second question for an id already queued: the queued one is answered NETWORK_EXCEPTION (same epoch) or
 * INVALID_PRODUCER_EPOCH (lower epoch) from the loop, never inside the call; a lower epoch than the queued
 * one is answered INVALID_PRODUCER_EPOCH at once. A question cancelled in flight is never called back. */
static void test_one_in_flight_and_same_id(void **state)
{
    (void)state;
    struct gr_txn_verifier *v = gr_txn_verifier_new(loop, peer.bc);
    peer.mode = FAKE_PEER_HOLD;
    struct rec a, x, b1, b2, b3, b4, c;
    rec_init(&a, "txn-a", 11, 0, 1, T1, (const int32_t[]){0});
    rec_init(&x, "txn-x", 19, 0, 1, T1, (const int32_t[]){5});
    assert_int_equal(gr_txn_verifier_ask(v, 2, &a.q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &x.q), 0);
    assert_true(fake_peer_run_until(loop, held, NULL, 5000)); /* a and x in flight, unanswered */
    gr_txn_verifier_cancel(&x.q);
    rec_init(&b1, "txn-a", 11, 0, 1, T1, (const int32_t[]){1}); /* same id as the one in flight: queued */
    rec_init(&b2, "txn-a", 11, 0, 1, T1, (const int32_t[]){1});
    rec_init(&b3, "txn-a", 11, 1, 1, T1, (const int32_t[]){1});
    rec_init(&b4, "txn-a", 11, 0, 1, T1, (const int32_t[]){1});
    rec_init(&c, "txn-c", 13, 2, 2, TU, (const int32_t[]){3, 4});
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b1.q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b2.q), 0); /* b1 replaced: NETWORK_EXCEPTION (a retry) */
    assert_int_equal(b1.calls, 0);                         /* not inside the call */
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b3.q), 0); /* b2 replaced: INVALID_PRODUCER_EPOCH (fenced) */
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b4.q), 1); /* lower than b3's: answered at once */
    assert_int_equal(b4.parts[0].error, GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &c.q), 0);
    assert_true(fake_peer_run_until(loop, called, &b2, 5000));
    assert_int_equal(b1.calls, 1);
    assert_int_equal(b1.parts[0].error, GR_ERR_NETWORK_EXCEPTION);
    assert_int_equal(b2.parts[0].error, GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(b4.calls, 0);
    assert_int_equal(peer.requests, 0);              /* still only the held one */
    assert_int_equal(gr_txn_verifier_pending(v), 3); /* a in flight, b3 and c queued */
    peer.mode = FAKE_PEER_ANSWER;
    fake_peer_release_held(&peer);
    assert_true(fake_peer_run_until(loop, called, &c, 5000));
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.parts[0].error, GR_ERR_NONE);
    assert_int_equal(x.calls, 0); /* cancelled in flight */
    assert_int_equal(b3.calls, 1);
    assert_int_equal(peer.requests, 2); /* the held one, then b3 and c together */
    assert_int_equal(gr_txn_verifier_requests(v), 2);
    assert_int_equal(fake.seen_count, 4);
    assert_string_equal(fake.seen[2].txn_id, "txn-a");
    assert_int_equal(fake.seen[2].producer_epoch, 1);
    assert_int_equal(fake.seen[2].request, 2);
    assert_string_equal(fake.seen[3].txn_id, "txn-c");
    assert_int_equal(fake.seen[3].request, 2);
    gr_txn_verifier_free(v);
}

/* The peer hangs up on the request: every question of it ends NETWORK_EXCEPTION; a top-level
 * CLUSTER_AUTHORIZATION_FAILED reaches every partition as INVALID_TXN_STATE; freed with a question in
 * flight to a silent peer: never called back. */
static void test_errors_and_free(void **state)
{
    (void)state;
    struct gr_txn_verifier *v = gr_txn_verifier_new(loop, peer.bc);
    peer.mode = FAKE_PEER_HANG_UP;
    struct rec a, b;
    rec_init(&a, "txn-a", 11, 0, 2, T2, (const int32_t[]){0, 1});
    rec_init(&b, "txn-b", 12, 0, 1, T1, (const int32_t[]){0});
    assert_int_equal(gr_txn_verifier_ask(v, 2, &a.q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b.q), 0);
    assert_true(fake_peer_run_until(loop, called, &b, 5000));
    assert_int_equal(a.parts[0].error, GR_ERR_NETWORK_EXCEPTION);
    assert_int_equal(a.parts[1].error, GR_ERR_NETWORK_EXCEPTION);
    assert_int_equal(b.parts[0].error, GR_ERR_NETWORK_EXCEPTION);
    peer.mode = FAKE_PEER_ANSWER;
    fake.top_error = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
    rec_init(&a, "txn-a", 11, 0, 2, T2, (const int32_t[]){0, 1});
    assert_int_equal(gr_txn_verifier_ask(v, 2, &a.q), 0);
    assert_true(fake_peer_run_until(loop, called, &a, 5000));
    assert_int_equal(a.parts[0].error, GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(a.parts[1].error, GR_ERR_INVALID_TXN_STATE);
    fake.top_error = GR_ERR_NONE;
    peer.mode = FAKE_PEER_SILENT;
    rec_init(&b, "txn-b", 12, 0, 1, T1, (const int32_t[]){0});
    int before = peer.requests;
    assert_int_equal(gr_txn_verifier_ask(v, 2, &b.q), 0);
    fake_peer_run_until(loop, called, &b, 300);
    assert_true(peer.requests > before);
    gr_txn_verifier_free(v);
    assert_int_equal(b.calls, 0);
    assert_null(b.q.dest);
}

/* At most GR_TXN_VERIFY_PENDING_MAX questions wait for one broker: the next is refused (-ENOSPC), while a
 * question replacing a queued one of its id is still taken. */
static void test_queue_bound(void **state)
{
    (void)state;
    struct gr_txn_verifier *v = gr_txn_verifier_new(loop, peer.bc);
    static struct rec r[GR_TXN_VERIFY_PENDING_MAX + 1];
    static char ids[GR_TXN_VERIFY_PENDING_MAX + 1][16];
    for (int i = 0; i <= GR_TXN_VERIFY_PENDING_MAX; i++) {
        snprintf(ids[i], sizeof ids[i], "id-%d", i);
        rec_init(&r[i], ids[i], i, 0, 1, T1, (const int32_t[]){0});
    }
    for (int i = 0; i < GR_TXN_VERIFY_PENDING_MAX; i++) /* not sent: the connection is not ready yet */
        assert_int_equal(gr_txn_verifier_ask(v, 2, &r[i].q), 0);
    assert_int_equal(gr_txn_verifier_ask(v, 2, &r[GR_TXN_VERIFY_PENDING_MAX].q), -ENOSPC);
    struct rec again;
    rec_init(&again, "id-7", 7, 0, 1, T1, (const int32_t[]){0});
    assert_int_equal(gr_txn_verifier_ask(v, 2, &again.q), 0);
    assert_int_equal(gr_txn_verifier_pending(v), GR_TXN_VERIFY_PENDING_MAX + 1); /* r[7] answered, due */
    gr_txn_verifier_free(v);
    assert_int_equal(r[7].calls, 0);
}

/* The verification guard over a real partition, with the coordinator's answer from the peer: the guard is
 * taken before the question, the peer answers NONE (in the transaction), and the coordinator's abort marker
 * lands on the partition before the append: the append is refused INVALID_TXN_STATE and opens no
 * transaction. Without the marker the same sequence appends. */
static void test_marker_between_verdict_and_append(void **state)
{
    (void)state;
    char dir[256];
    th_tmpdir(dir, sizeof dir);
    struct gr_store_config sc;
    th_config(&sc, dir);
    struct gr_store *store;
    assert_int_equal(gr_store_open(&sc, &store), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(store, "t", 1, NULL, NULL, 0, &t), 0);
    struct gr_log *log = gr_topic_log(t, 0);
    struct gr_partitions_config pc = {store, false};
    struct gr_partitions *ps = gr_partitions_create(&pc);
    struct gr_partition *part = gr_partition_get(ps, log);
    assert_non_null(part);
    struct gr_arena arena;
    gr_arena_init(&arena, 0);
    struct gr_txn_verifier *v = gr_txn_verifier_new(loop, peer.bc);
    for (int round = 0; round < 2; round++) {
        bool marker_first = round == 0;
        int64_t pid = 40 + round;
        uint64_t guard = 0;
        assert_int_equal(gr_partition_txn_verify_start(part, pid, 0, &guard), 0);
        assert_true(guard != GR_TXN_GUARD_SENTINEL);
        struct rec q;
        rec_init(&q, "txn-g", pid, 0, 1, T1, (const int32_t[]){0});
        assert_int_equal(gr_txn_verifier_ask(v, 2, &q.q), 0);
        assert_true(fake_peer_run_until(loop, called, &q, 5000));
        assert_int_equal(q.parts[0].error, GR_ERR_NONE); /* the verdict: in the transaction */
        if (marker_first) {
            struct gr_partition_marker m = {
                .producer_id = pid, .producer_epoch = 0, .now_ms = 1700000000000LL};
            struct gr_append_result res;
            assert_int_equal(gr_partition_write_marker(part, &m, &res), 0);
        }
        struct th_batch_spec s = {.count = 1,
                                  .ts0 = 1700000000000LL,
                                  .ts_step = 1,
                                  .tag = 1,
                                  .value_bytes = 8,
                                  .producer_id = pid,
                                  .producer_epoch = 0,
                                  .base_sequence = 0,
                                  .transactional = true};
        size_t len;
        uint8_t *b = th_batch(&s, &len);
        struct gr_produce_args args = {.records = b,
                                       .records_len = (int64_t)len,
                                       .api_version = 11,
                                       .now_ms = 1700000000000LL,
                                       .acks = 1,
                                       .txn_verified = true,
                                       .txn_guarded = true,
                                       .txn_guard = guard};
        struct gr_produce_result r;
        int16_t err = gr_partition_produce(part, gr_topic_policy(t), &args, &arena, &r);
        free(b);
        const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(log), pid);
        if (marker_first) {
            assert_int_equal(err, GR_ERR_INVALID_TXN_STATE);
            assert_true(!e || e->current_txn_first_offset < 0); /* no transaction the coordinator ended */
        } else {
            assert_int_equal(err, GR_ERR_NONE);
            assert_true(e && e->current_txn_first_offset >= 0);
        }
    }
    gr_txn_verifier_free(v);
    gr_arena_reset(&arena);
    gr_partitions_destroy(ps);
    gr_store_close(store);
    th_rmtree(dir);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(60);
    loop = ev_default_loop(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_routes_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_in_flight_and_same_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_and_free, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marker_between_verdict_and_append, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
