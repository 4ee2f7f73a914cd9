/*
 * test_txns_crash.c: the transaction coordinator (server/txns.c over coordinator/txn.c), the data partitions
 * its markers go to and the group coordinator's transactional offsets, over the real segment store, crashed
 * at every mutating I/O call of two whole transactions (storage/tests/fault.h crash mode) and restarted.
 * One run: a broker on a fresh directory with __transaction_state, __consumer_offsets and a data topic "d"
 * (2 partitions) made and loaded, then tracked; the client's calls in order: InitProducerId,
 * AddPartitionsToTxn d-0 d-1, a transactional batch to each (acked once committed), AddOffsetsToTxn "g",
 * TxnOffsetCommit d-0 = 42, EndTxn COMMIT (the markers, CompleteCommit), then the same with offset 77 and
 * EndTxn ABORT. The run stops at its first error (a client giving up). Crash point n: the n-th mutating
 * call and every later one fail; fault_crash_apply leaves what a power loss may leave (synced bytes only,
 * then a second pass with torn unsynced tails); a new broker opens the directory, loads the coordinators
 * from __transaction_state and __consumer_offsets, completes each PrepareX, and the restarted client's
 * InitProducerId aborts what was left open. Then what a client may see: a transaction whose EndTxn was
 * answered ends in that result in both data partitions; no transaction ends committed in one partition and
 * aborted in the other; every acknowledged batch is in its log and ended; LSO = HW = log end; the group's
 * offset is 42 iff the first transaction committed, never 77, with no pending offset left.
 * Read next: storage/tests/test_faults.c (crash mode on the store alone), coordinator/tests/test_txn.c
 * (crash_at_every_step over a fake log), server/tests/test_txns.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/time.h"
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "coordinator/txn.h"
#include "partition/partition.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"
#include "protocol/txn_marker.h"
#include "server/groups.h"
#include "server/producer_ids.h"
#include "server/tests/fixture.h"
#include "server/txns.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

#define TXN_PARTS 2   /* transaction.state.log.num.partitions and offsets.topic.num.partitions here */
#define WAIT_MS 20000 /* a wait gives up after this long (monotonic ms): a bound, never an assertion */
#define NOT_YET INT16_MIN

static const char *const TXN_ID = "tx";

/* What the client was told (the run stops at its first error). */
struct run {
    int64_t pid;
    int16_t epoch;
    bool data_acked[2][2]; /* [transaction][partition]: the batch's append committed */
    bool offsets_acked[2]; /* TxnOffsetCommit answered NONE */
    bool end_ok[2];        /* EndTxn answered NONE: its PrepareX durable */
};

static void settings(struct gr_broker *b)
{
    b->cfg.settings.transaction_state_log_num_partitions = TXN_PARTS;
    b->cfg.settings.offsets_topic_num_partitions = TXN_PARTS;
}

/* Turn i of a wait (i = 0 starts it): one turn of the loop and the pool, a short sleep letting the flusher
 * threads report. Returns false when the wait should give up: WAIT_MS passed, or the machine crashed (what
 * did not happen 300 turns after, never will: the client records no answer, the conservative side). */
static bool turn(struct gr_broker *b, int i)
{
    static int64_t start;
    if (i == 0) start = gr_time_mono_ms();
    if ((fault_crashed() && i > 300) || gr_time_mono_ms() - start > WAIT_MS) return false;
    gr_iopool_drain(b->iopool);
    ev_run(b->loop, EVRUN_NOWAIT);
    if (i > 50) usleep(100);
    return true;
}

static void record_answer(struct gr_txns_waiter *w, const struct gr_txn_result *res)
{
    *(int16_t *)w->ctx = res->error_code;
    w->answered = true;
}

static int16_t wait_answer(struct gr_broker *b, volatile int16_t *ans)
{
    for (int i = 0; *ans == NOT_YET && turn(b, i); i++)
        ;
    return *ans;
}

/* A partition waiter's result into ctx (1: committed, -1: failed). */
static void committed(struct gr_partition_waiter *pw, int err)
{
    *(int *)pw->ctx = err == 0 ? 1 : -1;
}

static bool wait_committed(struct gr_broker *b, struct gr_log *log, int64_t end)
{
    struct gr_partition *part = gr_broker_partition(b, log);
    if (!part) return false;
    int done = 0;
    struct gr_partition_waiter pw;
    gr_partition_waiter_init(&pw, committed, &done);
    gr_partition_wait_committed(part, &pw, end);
    for (int i = 0; done == 0 && turn(b, i); i++)
        ;
    if (done == 0) { /* bounded: never reached (the log's flushes failed quietly): fail the waiter */
        gr_partition_fail(part, -EIO);
        return false;
    }
    return done == 1;
}

static int16_t init_pid(struct gr_broker *b, struct run *r)
{
    for (int attempt = 0; attempt < 200; attempt++) {
        volatile int16_t ans = NOT_YET;
        struct gr_txns_waiter w = {.answer = record_answer, .ctx = (void *)&ans};
        gr_txn_init_producer_id(b->txn, &w, gr_str_c(TXN_ID), 60000, -1, -1);
        int16_t e = wait_answer(b, &ans);
        if (e == GR_ERR_CONCURRENT_TRANSACTIONS || e == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS) {
            for (int i = 0; i < 100; i++)
                turn(b, i);
            continue;
        }
        if (e != GR_ERR_NONE) return e;
        struct gr_txn_info info;
        assert_int_equal(gr_txn_describe(b->txn, gr_str_c(TXN_ID), &info), GR_ERR_NONE);
        r->pid = info.producer_id;
        r->epoch = info.producer_epoch;
        return e;
    }
    return GR_ERR_CONCURRENT_TRANSACTIONS;
}

static struct gr_log *data_log(struct gr_broker *b, int32_t p)
{
    struct gr_topic *t = gr_store_topic_find(b->store, "d", 1);
    return t ? gr_topic_log(t, p) : NULL;
}

/* Waits until the id is at rest (no pending transition, not PrepareX): true when it got there. */
static bool until_rest(struct gr_broker *b)
{
    for (int i = 0;; i++) {
        struct gr_txn_info info;
        if (b->txn && gr_txn_describe(b->txn, gr_str_c(TXN_ID), &info) == GR_ERR_NONE && info.pending == -1 &&
            info.state != GR_TXN_PREPARE_COMMIT && info.state != GR_TXN_PREPARE_ABORT)
            return true;
        if (!turn(b, i)) return false;
    }
}

/* One transaction k (0: commit with offset 42, 1: abort with offset 77); false at the client's first error.
 */
static bool transaction(struct gr_broker *b, struct run *r, int k)
{
    struct gr_txn_tp tps[2] = {{gr_str_c("d"), 0}, {gr_str_c("d"), 1}};
    volatile int16_t ans = NOT_YET;
    struct gr_txns_waiter w = {.answer = record_answer, .ctx = (void *)&ans};
    gr_txn_add_partitions(b->txn, &w, gr_str_c(TXN_ID), r->pid, r->epoch, tps, 2);
    if (wait_answer(b, &ans) != GR_ERR_NONE) return false;
    for (int32_t p = 0; p < 2; p++) {
        struct gr_log *log = data_log(b, p);
        struct gr_partition *part = log ? gr_broker_partition(b, log) : NULL;
        if (!part) return false;
        struct th_batch_spec s = {.count = 2,
                                  .ts0 = 1000,
                                  .ts_step = 1,
                                  .tag = (uint32_t)(10 * k + p),
                                  .value_bytes = 20,
                                  .producer_id = r->pid,
                                  .producer_epoch = r->epoch,
                                  .base_sequence = 2 * k,
                                  .transactional = true};
        size_t len;
        uint8_t *batch = th_batch(&s, &len);
        struct gr_append_result res;
        int rc = gr_partition_append(part, batch, len, -1, &res);
        free(batch);
        if (rc != 0 || !wait_committed(b, log, res.last_offset + 1)) return false;
        r->data_acked[k][p] = true;
    }
    ans = NOT_YET;
    w = (struct gr_txns_waiter){.answer = record_answer, .ctx = (void *)&ans};
    gr_txn_add_offsets(b->txn, &w, gr_str_c(TXN_ID), r->pid, r->epoch, gr_str_c("g"));
    if (wait_answer(b, &ans) != GR_ERR_NONE) return false;
    struct gr_commit_partition cp = {0, k == 0 ? 42 : 77, -1, gr_str_c(""), 0};
    struct gr_commit_topic ct = {gr_str_c("d"), &cp, 1};
    struct gr_txn_commit_params params = {.group_id = gr_str_c("g"),
                                          .member_id = gr_str_c(""),
                                          .group_instance_id = GR_STR_NULL,
                                          .generation_id = -1,
                                          .producer_id = r->pid,
                                          .producer_epoch = r->epoch,
                                          .topics = &ct,
                                          .topic_count = 1};
    int32_t wp = -1;
    int64_t wend = -1;
    gr_coord_txn_commit(b->coord, &params, &wp, &wend);
    if (cp.error_code != GR_ERR_NONE) return false;
    if (wend >= 0) {
        struct gr_log *olog = gr_offsets_log_log(gr_groups_offsets_log(b), wp);
        if (!olog || !wait_committed(b, olog, wend)) return false;
    }
    r->offsets_acked[k] = true;
    ans = NOT_YET;
    w = (struct gr_txns_waiter){.answer = record_answer, .ctx = (void *)&ans};
    gr_txn_end(b->txn, &w, gr_str_c(TXN_ID), r->pid, r->epoch, k == 0);
    if (wait_answer(b, &ans) != GR_ERR_NONE) return false;
    r->end_ok[k] = true;
    return until_rest(b); /* the markers and CompleteX before the next transaction */
}

/* Until every __transaction_state partition is loaded (bounded): true when they are. */
static bool until_loaded(struct gr_broker *b)
{
    for (int i = 0; gr_txns_loaded(b) < TXN_PARTS && turn(b, i); i++)
        ;
    return gr_txns_loaded(b) == TXN_PARTS;
}

/* A broker on a fresh directory with every topic made, loaded and durable (not tracked). */
static struct gr_broker *setup_broker(char *dir, size_t cap)
{
    struct gr_broker *b = srv_broker_open(
        dir, cap,
        &(struct srv_broker_opts){.iopool = true, .node_id = 1, .hwm_durable = true, .on_flushed = true});
    settings(b);
    assert_int_equal(gr_producer_ids_start(b), 0);
    assert_int_equal(gr_groups_ensure(b), 0);
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(b->store, "d", 2, NULL, NULL, 0, &t), 0);
    assert_int_equal(gr_txns_start(b), -ENOENT);
    struct gr_req *req = srv_req_new(b, GR_API_FIND_COORDINATOR, 3, 1 << 16);
    req->api = gr_api_find(GR_API_FIND_COORDINATOR);
    req->body = gr_arena_calloc(&req->arena, 1, sizeof(struct gr_find_coordinator_request));
    req->resp = gr_arena_calloc(&req->arena, 1, sizeof(struct gr_find_coordinator_response));
    gr_find_coordinator_request_init(req->body);
    gr_find_coordinator_response_init(req->resp);
    ((struct gr_find_coordinator_request *)req->body)->key = gr_str_c(TXN_ID);
    ((struct gr_find_coordinator_request *)req->body)->key_type = 1;
    assert_true(gr_txns_defer(req)); /* created on the pool, then the handler runs and frees it */
    assert_true(until_loaded(b));
    for (int i = 0; i < 200; i++)
        turn(b, i);
    return b;
}

static void workload(struct gr_broker *b, struct run *r)
{
    memset(r, 0, sizeof *r);
    r->pid = -1;
    if (init_pid(b, r) != GR_ERR_NONE) return;
    if (!transaction(b, r, 0)) return;
    transaction(b, r, 1);
}

enum outcome { NONE_SEEN, OPEN, COMMITTED, ABORTED };

/* Reads data partition p: the outcome of each of the two transactions' batches (by tag), and checks the
 * batches are contiguous with good CRCs. */
static void read_outcomes(struct gr_log *log, int32_t p, enum outcome out[2], long point)
{
    out[0] = out[1] = NONE_SEEN;
    int open_k[8], open_n = 0;
    int64_t next = gr_log_start_offset(log), end = gr_log_end_offset(log);
    while (next < end) {
        struct gr_log_slice s;
        assert_int_equal(gr_log_read(log, next, 1 << 20, end, true, &s), 0);
        if (s.bytes == 0) break;
        uint8_t *buf = th_slice_bytes(&s);
        size_t pos = 0, bl;
        const uint8_t *bt;
        while (gr_batch_next(buf, (size_t)s.bytes, &pos, &bt, &bl) == 1) {
            assert_int_equal(gr_batch_crc_compute(bt, bl), gr_batch_crc(bt));
            assert_int_equal(gr_batch_base_offset(bt), next);
            next = gr_batch_last_offset(bt) + 1;
            struct gr_record_iter it;
            struct gr_record rec;
            assert_int_equal(gr_record_iter_init(&it, bt, bl), 0);
            assert_int_equal(gr_record_iter_next(&it, &rec), 1);
            if (gr_batch_attributes(bt) & GR_BATCH_ATTR_CONTROL) {
                struct gr_txn_marker m;
                assert_int_equal(
                    gr_txn_marker_decode(rec.key.ptr, rec.key.len, rec.value.ptr, rec.value.len, &m), 0);
                for (int i = 0; i < open_n; i++)
                    out[open_k[i]] = m.commit ? COMMITTED : ABORTED;
                open_n = 0;
            } else {
                assert_true(gr_batch_attributes(bt) & GR_BATCH_ATTR_TRANSACTIONAL);
                char tmp[16] = {0};
                memcpy(tmp, rec.value.ptr, rec.value.len < 15 ? (size_t)rec.value.len : 15);
                unsigned tag = (unsigned)strtoul(tmp, NULL, 10);
                int k = (int)tag / 10;
                if (k > 1 || (int)tag % 10 != p || out[k] != NONE_SEEN || open_n == 8) {
                    print_error("crash point %ld: d-%d holds tag %u out of place\n", point, (int)p, tag);
                    fail();
                }
                out[k] = OPEN;
                open_k[open_n++] = k;
            }
            gr_record_iter_close(&it);
        }
        free(buf);
        gr_log_slice_release(&s);
    }
    assert_int_equal(next, end);
}

/* Restarts on the crashed directory, drives everything to rest and checks what a client may see. */
static void check(char *dir, const struct run *r, long point)
{
    struct gr_broker *b = srv_broker_open(
        dir, 0,
        &(struct srv_broker_opts){
            .iopool = true, .node_id = 1, .hwm_durable = true, .on_flushed = true, .reuse_dir = true});
    settings(b);
    assert_int_equal(gr_producer_ids_start(b), 0);
    assert_int_equal(gr_groups_ensure(b), 0);
    assert_int_equal(gr_txns_start(b), 0);
    assert_true(until_loaded(b));
    if (r->pid >= 0) { /* InitProducerId was answered: the id is known after the load */
        struct gr_txn_info info;
        if (gr_txn_describe(b->txn, gr_str_c(TXN_ID), &info) != GR_ERR_NONE) {
            print_error("crash point %ld: InitProducerId answered, the id unknown after the load\n", point);
            fail();
        }
        assert_true(until_rest(b)); /* PrepareX completed by the load */
    }
    /* the second EndTxn answered: its result already, before any client comes back */
    if (r->end_ok[1]) {
        struct gr_txn_info info;
        assert_int_equal(gr_txn_describe(b->txn, gr_str_c(TXN_ID), &info), GR_ERR_NONE);
        if (info.state != GR_TXN_COMPLETE_ABORT) {
            print_error("crash point %ld: EndTxn answered, state %d after the load\n", point,
                        (int)info.state);
            fail();
        }
    }
    struct run again;
    assert_int_equal(init_pid(b, &again), GR_ERR_NONE); /* the client restarts: aborts what is open */
    assert_true(until_rest(b));
    for (int i = 0; i < 200; i++)
        turn(b, i);
    enum outcome o[2][2]; /* [partition][transaction] */
    for (int32_t p = 0; p < 2; p++) {
        struct gr_log *log = data_log(b, p);
        assert_non_null(log);
        struct gr_partition *part = gr_broker_partition(b, log);
        assert_int_equal(gr_partition_visible_offset(part), gr_log_end_offset(log));
        assert_int_equal(gr_partition_last_stable_offset(part), gr_partition_visible_offset(part));
        read_outcomes(log, p, o[p], point);
    }
    for (int k = 0; k < 2; k++) {
        for (int32_t p = 0; p < 2; p++) {
            if (o[p][k] == OPEN) {
                print_error("crash point %ld: transaction %d still open in d-%d at rest\n", point, k, (int)p);
                fail();
            }
            if (r->data_acked[k][p] && o[p][k] == NONE_SEEN) {
                print_error("crash point %ld: acknowledged batch of transaction %d lost from d-%d\n", point,
                            k, (int)p);
                fail();
            }
            if (r->end_ok[k] && o[p][k] != (k == 0 ? COMMITTED : ABORTED)) {
                print_error("crash point %ld: EndTxn %d answered but d-%d ended %d\n", point, k, (int)p,
                            (int)o[p][k]);
                fail();
            }
        }
        if (o[0][k] != NONE_SEEN && o[1][k] != NONE_SEEN && o[0][k] != o[1][k]) {
            print_error("crash point %ld: transaction %d half committed (d-0 %d, d-1 %d)\n", point, k,
                        (int)o[0][k], (int)o[1][k]);
            fail();
        }
        assert_true(k == 0 || (o[0][k] != COMMITTED && o[1][k] != COMMITTED)); /* only aborted */
    }
    bool committed0 = o[0][0] == COMMITTED || o[1][0] == COMMITTED;
    int64_t off = -2;
    int32_t le;
    struct gr_str md;
    assert_int_equal(gr_coord_offset_fetch(b->coord, gr_str_c("g"), gr_str_c("d"), 0, true, &off, &le, &md),
                     GR_ERR_NONE);
    if (off != (committed0 ? 42 : -1)) {
        print_error("crash point %ld: offset %ld, first transaction %s\n", point, (long)off,
                    committed0 ? "committed" : "not committed");
        fail();
    }
    assert_int_equal(gr_coord_txn_pending_count(b->coord, gr_str_c("g")), 0);
    srv_broker_close(b, dir, NULL);
}

static void test_crash_at_every_io_point(void **state)
{
    (void)state;
    gr_log_set_level(getenv("GR_CRASH_VERBOSE") ? GR_LOG_DEBUG : (enum gr_log_level)(GR_LOG_ERROR + 1));
    char dir[64];
    struct run r;
    /* A dry run counts the I/O points and shows the whole workload succeeds and reads back as it should. */
    fault_install();
    struct gr_broker *b = setup_broker(dir, sizeof dir);
    fault_crash_track(dir);
    workload(b, &r);
    long total = fault_io_count();
    srv_broker_close(b, NULL, NULL);
    fault_uninstall();
    assert_true(r.end_ok[0] && r.end_ok[1] && r.offsets_acked[1]);
    check(dir, &r, 0); /* no crash: committed then aborted in both partitions, offset 42 */
    assert_true(total > 20);
    long checked = 0, answered = 0;
    long step = getenv("GR_CRASH_STEP") ? atol(getenv("GR_CRASH_STEP")) : 1;
    for (long iter = 0; iter < 2 * total; iter += step) {
        long point = iter % total + 1;
        bool tear = iter >= total; /* first pass: synced bytes only; second: plus torn unsynced tails */
        fault_install();
        b = setup_broker(dir, sizeof dir);
        fault_crash_track(dir);
        fault_crash_at(point);
        workload(b, &r);
        srv_broker_close(b, NULL, NULL);
        fault_crash_apply((unsigned)iter, tear);
        fault_uninstall();
        check(dir, &r, point);
        checked++;
        answered += r.end_ok[0];
    }
    gr_log_set_level(GR_LOG_INFO);
    print_message(
        "txn crash mode: %ld I/O points, %ld crashes checked, %ld after the first EndTxn was answered\n",
        total, checked, answered);
    assert_true(answered > 0 && answered < checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_at_every_io_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
