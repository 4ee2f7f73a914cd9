/*
 * test_txn.c: the transaction coordinator's state machine (coordinator/txn.h) with a fake clock and a fake
 * binding: appends are recorded (the "log" of __transaction_state) and reported only when a test says so,
 * marker rounds likewise, producer ids come from a counter. Each test names the Kafka behaviour
 * (TransactionCoordinator / TransactionStateManager / TransactionMetadata, 4.x) it checks. The load tests
 * replay the recorded log into a fresh coordinator, up to every durable step, as a crash would leave it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/tests/capture.h"
#include "coordinator/txn.h"
#include "protocol/errors.h"

#define MAX_RECS 256
#define MAX_WRITES 64

struct res {
    int calls;
    struct gr_txn_result r;
};

struct fake {
    int64_t now;
    int64_t next_pid;
    int16_t pid_error;
    int16_t append_error; /* returned by the append hook itself */
    struct gr_coord_record recs[MAX_RECS];
    int32_t rec_part[MAX_RECS];
    int nrecs;
    struct gr_txn_write *writes[MAX_WRITES];
    int nwrites;
    struct gr_txn_marker_job *jobs[MAX_WRITES];
    bool job_commit[MAX_WRITES];
    int16_t job_epoch[MAX_WRITES];
    int16_t job_tv[MAX_WRITES]; /* the markers' transaction version (WriteTxnMarkers v2) */
    int32_t job_parts[MAX_WRITES], job_coord_epoch[MAX_WRITES];
    int njobs;
    int markers_sent;
    struct gr_txn_coord *tc;
};

static int64_t f_now(void *ctx)
{
    return ((struct fake *)ctx)->now;
}

static int16_t f_append(void *ctx, int32_t partition, const struct gr_coord_record *rec,
                        struct gr_txn_write *w)
{
    struct fake *f = ctx;
    if (f->append_error) return f->append_error;
    assert_true(f->nrecs < MAX_RECS && f->nwrites < MAX_WRITES);
    struct gr_coord_record *c = &f->recs[f->nrecs];
    c->key = malloc(rec->key_len);
    memcpy(c->key, rec->key, rec->key_len);
    c->key_len = rec->key_len;
    c->value = NULL;
    c->value_len = rec->value_len;
    if (rec->value) {
        c->value = malloc(rec->value_len);
        memcpy(c->value, rec->value, rec->value_len);
    }
    f->rec_part[f->nrecs++] = partition;
    f->writes[f->nwrites++] = w;
    return 0;
}

static void f_markers(void *ctx, const struct gr_txn_markers *m)
{
    struct fake *f = ctx;
    assert_true(f->njobs < MAX_WRITES);
    f->job_commit[f->njobs] = m->commit;
    f->job_epoch[f->njobs] = m->producer_epoch;
    f->job_tv[f->njobs] = m->transaction_version;
    f->job_parts[f->njobs] = m->partition_count;
    f->job_coord_epoch[f->njobs] = m->coordinator_epoch;
    f->jobs[f->njobs++] = m->job;
    f->markers_sent++;
}

static int16_t f_pid(void *ctx, int64_t *pid)
{
    struct fake *f = ctx;
    if (f->pid_error) return f->pid_error;
    *pid = f->next_pid++;
    return 0;
}

static void f_done(void *ctx, void *waiter, const struct gr_txn_result *r)
{
    (void)ctx;
    struct res *res = waiter;
    res->calls++;
    res->r = *r;
}

static struct gr_txn_config config(void)
{
    struct gr_txn_config cfg;
    gr_txn_config_defaults(&cfg);
    return cfg;
}

/* A coordinator owning every partition at coordinator epoch `epoch`. */
static struct gr_txn_coord *make(struct fake *f, int32_t epoch)
{
    struct gr_txn_config cfg = config();
    struct gr_txn_hooks h = {f, f_now, f_append, f_markers, f_pid, f_done, NULL};
    if (!f->next_pid) f->next_pid = 1000;
    if (!f->now) f->now = 1700000000000LL;
    struct gr_txn_coord *tc = gr_txn_create(&cfg, &h);
    assert_non_null(tc);
    for (int32_t p = 0; p < cfg.partitions; p++) {
        assert_int_equal(gr_txn_load_begin(tc, p, epoch), 0);
        assert_true(gr_txn_load_done(tc, p, epoch) >= 0);
    }
    f->tc = tc;
    return tc;
}

static void reset(struct fake *f)
{
    gr_txn_destroy(f->tc);
    gr_coord_records_free(f->recs, f->nrecs);
    memset(f, 0, sizeof *f);
}

/* Reports the oldest write in flight with `err`. */
static void report(struct fake *f, int16_t err)
{
    assert_true(f->nwrites > 0);
    struct gr_txn_write *w = f->writes[0];
    memmove(f->writes, f->writes + 1, (size_t)--f->nwrites * sizeof *f->writes);
    gr_txn_write_done(f->tc, w, err);
}

static void report_markers(struct fake *f, int16_t err)
{
    assert_true(f->njobs > 0);
    struct gr_txn_marker_job *j = f->jobs[0];
    f->njobs--;
    memmove(f->jobs, f->jobs + 1, (size_t)f->njobs * sizeof *f->jobs);
    memmove(f->job_commit, f->job_commit + 1, (size_t)f->njobs * sizeof *f->job_commit);
    memmove(f->job_epoch, f->job_epoch + 1, (size_t)f->njobs * sizeof *f->job_epoch);
    memmove(f->job_tv, f->job_tv + 1, (size_t)f->njobs * sizeof *f->job_tv);
    memmove(f->job_parts, f->job_parts + 1, (size_t)f->njobs * sizeof *f->job_parts);
    memmove(f->job_coord_epoch, f->job_coord_epoch + 1, (size_t)f->njobs * sizeof *f->job_coord_epoch);
    gr_txn_markers_done(f->tc, j, err);
}

static struct gr_txn_info info(struct fake *f, const char *id)
{
    struct gr_txn_info i;
    assert_int_equal(gr_txn_describe(f->tc, gr_str_c(id), &i), 0);
    return i;
}

/* The state of the last record written (decoded). */
static int last_state(struct fake *f)
{
    struct gr_coord_record *r = &f->recs[f->nrecs - 1];
    if (!r->value) return GR_TXN_DEAD;
    struct gr_arena a;
    gr_arena_init(&a, 0);
    struct gr_txn_log_value v;
    assert_int_equal(gr_txn_log_value_decode(r->value, r->value_len, &a, &v), 0);
    gr_arena_reset(&a);
    return v.state;
}

static const struct gr_txn_tp T0[] = {{{"t", 1}, 0}, {{"t", 1}, 1}};

/* InitProducerId -> Empty (durable first), AddPartitions -> Ongoing; returns the producer id. */
static int64_t begin(struct fake *f, const char *id, int32_t timeout_ms)
{
    struct res r = {0};
    gr_txn_init_producer_id(f->tc, &r, gr_str_c(id), timeout_ms, -1, -1);
    assert_int_equal(r.calls, 0);
    report(f, 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.r.error_code, 0);
    struct res a = {0};
    gr_txn_add_partitions(f->tc, &a, gr_str_c(id), r.r.producer_id, r.r.producer_epoch, T0, 2);
    report(f, 0);
    assert_int_equal(a.r.error_code, 0);
    return r.r.producer_id;
}

/* InitProducerId for a new id: a new producer id at epoch 0, answered only once its Empty record is
 * committed; a second one bumps the epoch (handleInitProducerId, prepareIncrementProducerEpoch). */
static void test_init_producer_id(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    assert_int_equal(r.calls, 0);
    assert_int_equal(f.nrecs, 1);
    assert_int_equal(f.rec_part[0], gr_txn_partition_for(gr_str_c("txn"), 50));
    assert_int_equal(last_state(&f), GR_TXN_EMPTY);
    assert_int_equal(info(&f, "txn").pending, GR_TXN_EMPTY);
    report(&f, 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_EMPTY);
    assert_int_equal(i.pending, -1);
    assert_int_equal(i.timeout_ms, 60000);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 30000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 1);
    assert_int_equal(info(&f, "txn").timeout_ms, 30000);
    reset(&f);
}

/* INVALID_TRANSACTION_TIMEOUT for 0 and above transaction.max.timeout.ms (validateTransactionTimeoutMs),
 * INVALID_REQUEST for an empty id; a producer id allocation error is answered as is. */
static void test_init_invalid(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), GR_TXN_MAX_TIMEOUT_MS + 1, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TRANSACTION_TIMEOUT);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 0, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TRANSACTION_TIMEOUT);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c(""), 1000, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_REQUEST);
    f.pid_error = GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(r.calls, 4);
    assert_int_equal(f.nrecs, 0);
    f.pid_error = 0;
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), GR_TXN_MAX_TIMEOUT_MS, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    reset(&f);
}

/* NOT_COORDINATOR for a partition not owned, COORDINATOR_LOAD_IN_PROGRESS while loading, for every API
 * (getTransactionState). */
static void test_ownership_errors(void **state)
{
    (void)state;
    struct fake f = {0};
    struct gr_txn_coord *tc = make(&f, 0);
    int32_t p = gr_txn_partition_for(gr_str_c("txn"), 50);
    for (int round = 0; round < 2; round++) {
        int16_t want = round == 0 ? GR_ERR_NOT_COORDINATOR : GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
        if (round == 0)
            gr_txn_unload(tc, p);
        else
            gr_txn_load_begin(tc, p, 1);
        struct res r = {0};
        gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, -1, -1);
        assert_int_equal(r.r.error_code, want);
        gr_txn_add_partitions(tc, &r, gr_str_c("txn"), 1, 0, T0, 1);
        assert_int_equal(r.r.error_code, want);
        gr_txn_add_offsets(tc, &r, gr_str_c("txn"), 1, 0, gr_str_c("g"));
        assert_int_equal(r.r.error_code, want);
        gr_txn_end(tc, &r, gr_str_c("txn"), 1, 0, true);
        assert_int_equal(r.r.error_code, want);
        int16_t errs[2];
        gr_txn_verify_partitions(tc, gr_str_c("txn"), 1, 0, T0, 2, errs);
        assert_int_equal(errs[0], want);
        assert_int_equal(errs[1], want);
        struct gr_txn_info i;
        assert_int_equal(gr_txn_describe(tc, gr_str_c("txn"), &i), want);
        assert_int_equal(r.calls, 4);
    }
    assert_int_equal(f.nrecs, 0);
    assert_int_equal(gr_txn_load_done(tc, p, 0), -ESTALE); /* a stale epoch */
    assert_int_equal(gr_txn_load_done(tc, p, 1), 0);
    struct res r = {0};
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    reset(&f);
}

/* A commit end to end: AddPartitionsToTxn (durable Ongoing; a subset answered at once without a write),
 * AddOffsetsToTxn (the group's __consumer_offsets partition), EndTxn: PrepareCommit durable -> answered ->
 * markers -> CompleteCommit durable; meanwhile CONCURRENT_TRANSACTIONS; afterwards a retried commit gets
 * NONE and an abort INVALID_TXN_STATE (handleEndTransaction). */
static void test_commit_flow(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 3);
    int64_t pid = begin(&f, "txn", 60000);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_ONGOING);
    assert_int_equal(i.start_ms, f.now);
    assert_int_equal(i.partition_count, 2);
    struct res r = {0};
    int n = f.nrecs;
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 0, T0 + 1, 1);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(f.nrecs, n); /* already in: no write */
    f.now += 5;
    gr_txn_add_offsets(f.tc, &r, gr_str_c("txn"), pid, 0, gr_str_c("group"));
    assert_int_equal(r.calls, 1);
    report(&f, 0);
    assert_int_equal(r.calls, 2);
    struct gr_txn_tp co = {gr_str_c("__consumer_offsets"), gr_coord_partition_for(gr_str_c("group"), 50)};
    assert_true(gr_txn_has_partition(f.tc, gr_str_c("txn"), co));
    assert_int_equal(info(&f, "txn").start_ms, f.now - 5); /* the transaction's start stays */
    struct res e = {0};
    gr_txn_end(f.tc, &e, gr_str_c("txn"), pid, 0, true);
    assert_int_equal(e.calls, 0);
    assert_int_equal(last_state(&f), GR_TXN_PREPARE_COMMIT);
    assert_int_equal(f.markers_sent, 0); /* no marker before PrepareCommit is durable */
    report(&f, 0);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.r.error_code, 0);
    assert_int_equal(e.r.producer_id, -1); /* transaction version 1: no id or epoch in the answer */
    assert_int_equal(f.markers_sent, 1);
    assert_true(f.job_commit[0]);
    assert_int_equal(f.job_parts[0], 3);
    assert_int_equal(f.job_epoch[0], 0);
    assert_int_equal(f.job_tv[0], 0); /* version 1: the legacy marker rule */
    assert_int_equal(f.job_coord_epoch[0], 3);
    assert_int_equal(info(&f, "txn").state, GR_TXN_PREPARE_COMMIT);
    /* while the markers go out */
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, false);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS); /* pending CompleteCommit */
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 0, T0, 1);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    n = f.nrecs;
    report_markers(&f, 0);
    assert_int_equal(f.nrecs, n + 1);
    assert_int_equal(last_state(&f), GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(info(&f, "txn").state, GR_TXN_PREPARE_COMMIT);
    report(&f, 0);
    i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(i.partition_count, 0);
    assert_int_equal(i.pending, -1);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, -1);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, false);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    /* the next transaction starts at its first AddPartitions */
    f.now += 100;
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 0, T0, 1);
    report(&f, 0);
    assert_int_equal(info(&f, "txn").start_ms, f.now);
    assert_int_equal(info(&f, "txn").partition_count, 1);
    reset(&f);
}

/* EndTxn's errors: unknown id or other producer id -> INVALID_PRODUCER_ID_MAPPING, old epoch ->
 * PRODUCER_FENCED, Empty -> INVALID_TXN_STATE, PrepareAbort + commit -> INVALID_TXN_STATE, PrepareAbort +
 * abort -> CONCURRENT_TRANSACTIONS; AddPartitions' same checks. */
static void test_end_errors(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    gr_txn_end(f.tc, &r, gr_str_c("nope"), 1, 0, true);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    int64_t pid = r.r.producer_id; /* epoch 1 */
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 1, true);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid + 1, 1, true);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true);
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 0, T0, 1);
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid + 1, 1, T0, 1);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    gr_txn_add_partitions(f.tc, &r, gr_str_c(""), pid, 1, T0, 1);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_REQUEST);
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 1, T0, 2);
    report(&f, 0);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 1, false);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_false(f.job_commit[0]);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 1, true);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS); /* pending CompleteAbort */
    report_markers(&f, GR_ERR_NOT_COORDINATOR);                       /* fenced: left in PrepareAbort */
    assert_int_equal(info(&f, "txn").pending, -1);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 1, true);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 1, false);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    reset(&f);
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A refused state change logs one WARN line per refusal naming the transition (Kafka's TransactionMetadata
 * .prepareTransitionTo: "... is not a valid previous state ..."): EndTxn from Empty, ABORT after
 * CompleteCommit; an accepted EndTxn and its retries (CONCURRENT_TRANSACTIONS, NONE) log nothing. */
static void test_refused_transition_warns(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    int64_t pid = r.r.producer_id; /* epoch 0 */
    gr_log_set_level(GR_LOG_INFO);
    capture();
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true); /* Empty: refused */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    char *out = captured();
    assert_int_equal(count_of(out, " level=warn component=coordinator "), 1);
    assert_non_null(strstr(out,
                           "txn txn: transition from Empty to PrepareCommit refused: Empty is not a valid "
                           "previous state of PrepareCommit"));
    free(out);

    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 0, T0, 1);
    report(&f, 0);
    capture();
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true); /* accepted */
    report(&f, 0);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true); /* a retry while PrepareCommit: CONCURRENT */
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, false); /* ABORT while CompleteCommit is pending */
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    report_markers(&f, 0);
    report(&f, 0);
    assert_int_equal(info(&f, "txn").state, GR_TXN_COMPLETE_COMMIT);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true); /* a retry after CompleteCommit: NONE */
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, false); /* ABORT after CompleteCommit: refused */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    out = captured();
    assert_int_equal(count_of(out, " level=warn component=coordinator "), 1);
    assert_non_null(strstr(out,
                           "transition from CompleteCommit to PrepareAbort refused: CompleteCommit is not a "
                           "valid previous state of PrepareAbort"));
    free(out);
    reset(&f);
}

/* InitProducerId while a transaction is Ongoing fences the old producer: the epoch is bumped, PrepareAbort
 * is written at the new epoch, the caller gets CONCURRENT_TRANSACTIONS (and again while the abort
 * completes); the old epoch gets PRODUCER_FENCED; once CompleteAbort is durable a retry bumps once more
 * (prepareFenceProducerEpoch, endTransaction with isFromClient = false). */
static void test_fence_ongoing(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t pid = begin(&f, "txn", 60000);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    assert_int_equal(r.calls, 0);
    assert_int_equal(last_state(&f), GR_TXN_PREPARE_ABORT);
    struct res old = {0};
    gr_txn_end(f.tc, &old, gr_str_c("txn"), pid, 0, true);
    assert_int_equal(old.r.error_code, GR_ERR_PRODUCER_FENCED);
    report(&f, 0);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    assert_int_equal(f.njobs, 1);
    assert_false(f.job_commit[0]);
    assert_int_equal(f.job_epoch[0], 1);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_add_partitions(f.tc, &old, gr_str_c("txn"), pid, 0, T0, 1);
    /* a transition in progress is checked first (Kafka 4.x, KAFKA-18660); the epoch once it is done */
    assert_int_equal(old.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    report_markers(&f, 0);
    report(&f, 0);
    assert_int_equal(info(&f, "txn").state, GR_TXN_COMPLETE_ABORT);
    gr_txn_add_partitions(f.tc, &old, gr_str_c("txn"), pid, 0, T0, 1);
    assert_int_equal(old.r.error_code, GR_ERR_PRODUCER_FENCED);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, pid);
    assert_int_equal(r.r.producer_epoch, 2);
    reset(&f);
}

/* A fence whose PrepareAbort append fails: the caller gets the mapped error, the transaction stays Ongoing
 * with the bumped epoch, and the next attempt does not bump again (hasFailedEpochFence). */
static void test_fence_write_fails(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    begin(&f, "txn", 60000);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    report(&f, GR_ERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(r.r.error_code, GR_ERR_COORDINATOR_NOT_AVAILABLE);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_ONGOING);
    assert_int_equal(i.producer_epoch, 1);
    assert_int_equal(i.pending, -1);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    assert_int_equal(last_state(&f), GR_TXN_PREPARE_ABORT);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    assert_int_equal(f.job_epoch[0], 1); /* not 2 */
    reset(&f);
}

/* Append errors as TransactionStateManager.appendTransactionToLog maps them; a failed transition leaves
 * the state as it was and clears the pending state. */
static void test_append_errors(void **state)
{
    (void)state;
    const int16_t in[] = {GR_ERR_UNKNOWN_TOPIC_OR_PARTITION,
                          GR_ERR_NOT_ENOUGH_REPLICAS,
                          GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                          GR_ERR_REQUEST_TIMED_OUT,
                          GR_ERR_NOT_LEADER_OR_FOLLOWER,
                          GR_ERR_KAFKA_STORAGE_ERROR,
                          GR_ERR_MESSAGE_TOO_LARGE,
                          GR_ERR_RECORD_LIST_TOO_LARGE,
                          GR_ERR_CORRUPT_MESSAGE};
    const int16_t out[] = {
        GR_ERR_COORDINATOR_NOT_AVAILABLE, GR_ERR_COORDINATOR_NOT_AVAILABLE, GR_ERR_COORDINATOR_NOT_AVAILABLE,
        GR_ERR_COORDINATOR_NOT_AVAILABLE, GR_ERR_NOT_COORDINATOR,           GR_ERR_NOT_COORDINATOR,
        GR_ERR_UNKNOWN_SERVER_ERROR,      GR_ERR_UNKNOWN_SERVER_ERROR,      GR_ERR_CORRUPT_MESSAGE};
    struct fake f = {0};
    make(&f, 0);
    int64_t pid = begin(&f, "txn", 60000);
    for (size_t k = 0; k < sizeof in / sizeof in[0]; k++) {
        assert_int_equal(gr_txn_append_error(in[k]), out[k]);
        struct res r = {0};
        gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), pid, 0, (struct gr_txn_tp[]){{{"u", 1}, 0}}, 1);
        report(&f, in[k]);
        assert_int_equal(r.r.error_code, out[k]);
        struct gr_txn_info i = info(&f, "txn");
        assert_int_equal(i.partition_count, 2);
        assert_int_equal(i.pending, -1);
        /* refused by the append hook itself: answered at once, mapped the same way */
        f.append_error = in[k];
        gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true);
        assert_int_equal(r.r.error_code, out[k]);
        assert_int_equal(r.calls, 2);
        f.append_error = 0;
        assert_int_equal(info(&f, "txn").state, GR_TXN_ONGOING);
    }
    reset(&f);
}

/* KIP-360: InitProducerId with the producer's current id and epoch bumps and records the last epoch; a
 * retry with that last epoch gets the same epoch again; another id or epoch gets PRODUCER_FENCED
 * (isValidProducerId, prepareIncrementProducerEpoch). */
static void test_kip360(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    int64_t pid = r.r.producer_id;
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, pid, 0);
    report(&f, 0);
    assert_int_equal(r.r.producer_epoch, 1);
    assert_int_equal(info(&f, "txn").last_producer_epoch, 0);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, pid, 0); /* the response was lost */
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_epoch, 1);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, pid + 7, 1);
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 1000, pid, 5);
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    reset(&f);
}

/* An exhausted epoch (>= 32766) gets a new producer id at epoch 0, the old id kept as the previous one;
 * KIP-360 with the old id and exhausted epoch is then accepted (prepareProducerIdRotation). */
static void test_epoch_exhausted(void **state)
{
    (void)state;
    struct fake f = {0};
    struct gr_txn_coord *tc = make(&f, 0);
    int32_t p = gr_txn_partition_for(gr_str_c("txn"), 50);
    struct gr_coord_record rec;
    struct gr_txn_log_value v = {77, -1, -1, 32766, 1000, GR_TXN_COMPLETE_COMMIT, NULL, 0, f.now, f.now, 0};
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 1), 0);
    gr_txn_load_begin(tc, p, 1);
    assert_int_equal(gr_txn_replay(tc, p, rec.key, rec.key_len, rec.value, rec.value_len), 0);
    gr_txn_load_done(tc, p, 1);
    gr_coord_records_free(&rec, 1);
    struct res r = {0};
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, 77, 32766);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.previous_producer_id, 77);
    assert_int_equal(i.last_producer_epoch, 32766);
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, 77, 32766); /* retry: same answer */
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    reset(&f);
}

/* A fence that takes the epoch to 32767 (an Ongoing transaction at 32766): the abort completes at 32767,
 * and the producer's retry gets a new producer id at epoch 0 (the comment on the Ongoing case of Kafka's
 * prepareInitProducerIdTransit: "if fencing the current producer exhausts the available epochs ... we will
 * generate a new producerId"). */
static void test_fence_exhausts_epoch(void **state)
{
    (void)state;
    struct fake f = {0};
    struct gr_txn_coord *tc = make(&f, 0);
    int32_t p = gr_txn_partition_for(gr_str_c("txn"), 50);
    static const int32_t ids[] = {0};
    static const struct gr_txn_topic_parts topics[] = {{{"t", 1}, ids, 1}};
    struct gr_txn_log_value v = {77, -1, -1, 32766, 1000, GR_TXN_ONGOING, topics, 1, f.now, f.now, 0};
    struct gr_coord_record rec;
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 1), 0);
    gr_txn_load_begin(tc, p, 1);
    assert_int_equal(gr_txn_replay(tc, p, rec.key, rec.key_len, rec.value, rec.value_len), 0);
    gr_txn_load_done(tc, p, 1);
    gr_coord_records_free(&rec, 1);
    struct res r = {0};
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    assert_int_equal(f.job_epoch[0], INT16_MAX);
    report_markers(&f, 0);
    report(&f, 0);
    assert_int_equal(info(&f, "txn").state, GR_TXN_COMPLETE_ABORT);
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    assert_int_equal(info(&f, "txn").previous_producer_id, 77);
    reset(&f);
}

/* AddPartitionsToTxn with VerifyOnly: NONE for partitions in the transaction, TRANSACTION_ABORTABLE for
 * others, CONCURRENT_TRANSACTIONS while PrepareX, PRODUCER_FENCED / INVALID_PRODUCER_ID_MAPPING
 * (handleVerifyPartitionsInTransaction). */
static void test_verify(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t pid = begin(&f, "txn", 60000);
    const struct gr_txn_tp q[] = {{{"t", 1}, 1}, {{"t", 1}, 2}, {{"u", 1}, 0}};
    int16_t e[3];
    gr_txn_verify_partitions(f.tc, gr_str_c("txn"), pid, 0, q, 3, e);
    assert_int_equal(e[0], GR_ERR_NONE);
    assert_int_equal(e[1], GR_ERR_TRANSACTION_ABORTABLE);
    assert_int_equal(e[2], GR_ERR_TRANSACTION_ABORTABLE);
    gr_txn_verify_partitions(f.tc, gr_str_c("txn"), pid, 1, q, 3, e);
    assert_int_equal(e[2], GR_ERR_PRODUCER_FENCED);
    gr_txn_verify_partitions(f.tc, gr_str_c("txn"), pid + 1, 0, q, 3, e);
    assert_int_equal(e[0], GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    gr_txn_verify_partitions(f.tc, gr_str_c("other"), pid, 0, q, 3, e);
    assert_int_equal(e[0], GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    struct res r = {0};
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true);
    report(&f, 0);
    gr_txn_verify_partitions(f.tc, gr_str_c("txn"), pid, 0, q, 3, e);
    assert_int_equal(e[0], GR_ERR_CONCURRENT_TRANSACTIONS);
    assert_int_equal(e[1], GR_ERR_CONCURRENT_TRANSACTIONS);
    reset(&f);
}

/* The abort pass every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms) aborts an Ongoing
 * transaction past start + timeout with an epoch bump, leaves a younger one alone (abortTimedOutTransactions,
 * timedOutTransactions). */
static void test_timeout_abort(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t t0 = f.now;
    int64_t pid = begin(&f, "old", 1000);
    begin(&f, "young", 60000);
    int n = f.nrecs;
    f.now = t0 + 5000;
    gr_txn_tick(f.tc); /* past the timeout, but the pass is not due yet */
    assert_int_equal(f.nrecs, n);
    assert_int_equal(gr_txn_next_deadline_ms(f.tc), t0 + GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS);
    f.now = t0 + GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS;
    gr_txn_tick(f.tc);
    assert_int_equal(f.nrecs, n + 1);
    assert_int_equal(last_state(&f), GR_TXN_PREPARE_ABORT);
    report(&f, 0);
    assert_int_equal(f.njobs, 1);
    assert_false(f.job_commit[0]);
    assert_int_equal(f.job_epoch[0], 1);
    report_markers(&f, 0);
    report(&f, 0);
    struct gr_txn_info i = info(&f, "old");
    assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(i.producer_epoch, 1);
    assert_int_equal(info(&f, "young").state, GR_TXN_ONGOING);
    struct res r = {0};
    gr_txn_end(f.tc, &r, gr_str_c("old"), pid, 0, true); /* the timed-out producer is fenced */
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    reset(&f);
}

/* Ids idle past transactional.id.expiration.ms in Empty/CompleteX get a tombstone at the hourly pass and
 * leave the cache once it is durable; an Ongoing one stays (removeExpiredTransactionalIds, shouldExpire). */
static void test_expire(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t t0 = f.now;
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("idle"), 1000, -1, -1);
    report(&f, 0);
    begin(&f, "busy", GR_TXN_MAX_TIMEOUT_MS);
    /* a week later, both passes run: "busy" (past its 15 minutes) is aborted, "idle" is not old enough */
    f.now = t0 + GR_TXN_ID_EXPIRATION_MS - 1;
    gr_txn_tick(f.tc);
    assert_int_equal(f.nwrites, 1);
    assert_int_equal(last_state(&f), GR_TXN_PREPARE_ABORT);
    report(&f, 0);
    report_markers(&f, 0);
    report(&f, 0);
    int n = f.nrecs;
    f.now += GR_TXN_REMOVE_EXPIRED_INTERVAL_MS; /* the next expiry pass */
    gr_txn_tick(f.tc);
    /* "idle" (last update t0) is expired; "busy" was updated just now by its abort */
    assert_int_equal(f.nrecs, n + 1);
    assert_null(f.recs[n].value);
    struct gr_str id;
    assert_int_equal(gr_txn_log_key_decode(f.recs[n].key, f.recs[n].key_len, &id), 0);
    assert_true(gr_str_eq_c(id, "idle"));
    assert_int_equal(info(&f, "idle").pending, GR_TXN_DEAD);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("idle"), 1000, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    report(&f, 0);
    struct gr_txn_info i;
    assert_int_equal(gr_txn_describe(f.tc, gr_str_c("idle"), &i), GR_ERR_TRANSACTIONAL_ID_NOT_FOUND);
    assert_int_equal(info(&f, "busy").state, GR_TXN_COMPLETE_ABORT);
    /* a new InitProducerId starts over with a new producer id */
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("idle"), 1000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.producer_epoch, 0);
    assert_int_equal(r.r.producer_id, 1002);
    reset(&f);
}

/* A CompleteX append failing with COORDINATOR_NOT_AVAILABLE is retried at the next tick, keeping the
 * pending state (TransactionMarkerChannelManager's retry queue); NOT_COORDINATOR gives up. */
static void test_complete_retry(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t pid = begin(&f, "txn", 60000);
    struct res r = {0};
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, true);
    report(&f, 0);
    report_markers(&f, 0);
    int n = f.nrecs;
    report(&f, GR_ERR_REQUEST_TIMED_OUT);
    assert_int_equal(info(&f, "txn").pending, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(gr_txn_next_deadline_ms(f.tc), 0);
    gr_txn_tick(f.tc);
    assert_int_equal(f.nrecs, n + 1);
    assert_int_equal(last_state(&f), GR_TXN_COMPLETE_COMMIT);
    report(&f, 0);
    assert_int_equal(info(&f, "txn").state, GR_TXN_COMPLETE_COMMIT);
    reset(&f);
}

/* A write reported after its partition was unloaded (or reloaded at a new epoch) changes nothing and
 * answers NOT_COORDINATOR (appendTransactionToLog's coordinator epoch check). */
static void test_unload_during_write(void **state)
{
    (void)state;
    struct fake f = {0};
    struct gr_txn_coord *tc = make(&f, 0);
    int32_t p = gr_txn_partition_for(gr_str_c("txn"), 50);
    struct res r = {0};
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, -1, -1);
    gr_txn_unload(tc, p);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NOT_COORDINATOR);
    gr_txn_load_begin(tc, p, 1);
    gr_txn_load_done(tc, p, 1);
    gr_txn_init_producer_id(tc, &r, gr_str_c("txn"), 1000, -1, -1);
    gr_txn_load_begin(tc, p, 2); /* reloaded while the write is in flight */
    gr_txn_load_done(tc, p, 2);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NOT_COORDINATOR);
    assert_int_equal(r.calls, 2);
    reset(&f);
}

/* Version gates of the issue (KafkaApis): PRODUCER_FENCED and TRANSACTION_ABORTABLE shaped per version. */
static void test_error_for_version(void **state)
{
    (void)state;
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_INIT_PRODUCER_ID, 3, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_INIT_PRODUCER_ID, 4, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_PRODUCER_FENCED);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_ADD_PARTITIONS, 1, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_ADD_PARTITIONS, 2, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_PRODUCER_FENCED);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_ADD_OFFSETS, 1, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_END_TXN, 1, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_END_TXN, 2, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_PRODUCER_FENCED);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_PRODUCE, 12, GR_ERR_PRODUCER_FENCED),
                     GR_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_PRODUCE, 10, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_PRODUCE, 11, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_TRANSACTION_ABORTABLE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_ADD_PARTITIONS, 4, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_ADD_PARTITIONS, 5, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_TRANSACTION_ABORTABLE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_ADD_OFFSETS, 3, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_END_TXN, 3, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_TXN_OFFSET_COMMIT, 3, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_INIT_PRODUCER_ID, 4, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_INVALID_TXN_STATE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_INIT_PRODUCER_ID, 5, GR_ERR_TRANSACTION_ABORTABLE),
                     GR_ERR_TRANSACTION_ABORTABLE);
    assert_int_equal(gr_txn_error_for_version(GR_TXN_API_END_TXN, 0, GR_ERR_CONCURRENT_TRANSACTIONS),
                     GR_ERR_CONCURRENT_TRANSACTIONS);
}

/* ---- load ---- */

/* Replays the first `k` records of `f` (every partition) into a fresh coordinator `g` at coordinator epoch
 * `epoch`; load_done completes prepared transactions. */
static void reload(struct fake *f, struct fake *g, int k, int32_t epoch)
{
    struct gr_txn_config cfg = config();
    struct gr_txn_hooks h = {g, f_now, f_append, f_markers, f_pid, f_done, NULL};
    g->now = f->now;
    g->next_pid = f->next_pid;
    g->tc = gr_txn_create(&cfg, &h);
    assert_non_null(g->tc);
    for (int32_t p = 0; p < cfg.partitions; p++)
        gr_txn_load_begin(g->tc, p, epoch);
    for (int i = 0; i < k; i++)
        assert_int_equal(gr_txn_replay(g->tc, f->rec_part[i], f->recs[i].key, f->recs[i].key_len,
                                       f->recs[i].value, f->recs[i].value_len),
                         0);
    for (int32_t p = 0; p < cfg.partitions; p++)
        assert_true(gr_txn_load_done(g->tc, p, epoch) >= 0);
}

/* Several ids in every resting state, written, then reloaded: each id comes back with its state, producer
 * id, epoch, timeout, partitions and timestamps; a tombstoned id is gone (the latest record per id wins). */
static void test_load_rebuild(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    int64_t p1 = begin(&f, "committed", 60000);
    gr_txn_end(f.tc, &r, gr_str_c("committed"), p1, 0, true);
    report(&f, 0);
    report_markers(&f, 0);
    report(&f, 0);
    int64_t p2 = begin(&f, "aborted", 50000);
    gr_txn_end(f.tc, &r, gr_str_c("aborted"), p2, 0, false);
    report(&f, 0);
    report_markers(&f, 0);
    report(&f, 0);
    begin(&f, "ongoing", 40000);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("empty"), 30000, -1, -1);
    report(&f, 0);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("gone"), 30000, -1, -1);
    report(&f, 0);
    f.now += GR_TXN_ID_EXPIRATION_MS;
    /* expire "gone" only: keep the others fresh */
    const char *keep[] = {"committed", "aborted", "empty"};
    for (int i = 0; i < 3; i++) {
        gr_txn_init_producer_id(f.tc, &r, gr_str_c(keep[i]), 30000, -1, -1);
        report(&f, 0);
    }
    struct gr_coord_record rec;
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("gone"), NULL, 1), 0); /* its tombstone, by hand */
    f.recs[f.nrecs] = rec;
    f.rec_part[f.nrecs++] = gr_txn_partition_for(gr_str_c("gone"), 50);
    struct fake g = {0};
    reload(&f, &g, f.nrecs, 7);
    const char *ids[] = {"committed", "aborted", "ongoing", "empty"};
    for (int i = 0; i < 4; i++) {
        struct gr_txn_info a = info(&f, ids[i]), b = info(&g, ids[i]);
        assert_int_equal(a.state, b.state);
        assert_int_equal(a.producer_id, b.producer_id);
        assert_int_equal(a.producer_epoch, b.producer_epoch);
        assert_int_equal(a.timeout_ms, b.timeout_ms);
        assert_int_equal(a.partition_count, b.partition_count);
        /* Empty is written with start -1 while memory keeps the last start (completeTransitionTo(Empty)
           leaves txnStartTimestamp alone): compare what the log says */
        assert_int_equal(b.start_ms, a.state == GR_TXN_EMPTY ? -1 : a.start_ms);
        assert_int_equal(a.last_update_ms, b.last_update_ms);
    }
    assert_int_equal(info(&g, "ongoing").state, GR_TXN_ONGOING);
    assert_int_equal(info(&g, "ongoing").partition_count, 2);
    assert_true(gr_txn_has_partition(g.tc, gr_str_c("ongoing"), T0[1]));
    assert_int_equal(info(&g, "committed").state, GR_TXN_EMPTY);
    struct gr_txn_info i;
    assert_int_equal(gr_txn_describe(g.tc, gr_str_c("gone"), &i), GR_ERR_TRANSACTIONAL_ID_NOT_FOUND);
    assert_int_equal(g.markers_sent, 0);
    /* bad records are skipped without harm */
    int32_t p = gr_txn_partition_for(gr_str_c("empty"), 50);
    gr_txn_load_begin(g.tc, p, 8);
    assert_int_equal(gr_txn_replay(g.tc, p, (const uint8_t *)"\x00", 1, NULL, 0), -1);
    assert_int_equal(gr_txn_replay(g.tc, p, (const uint8_t *)"\x00\x01\x00\x00", 4, NULL, 0), 1);
    assert_int_equal(gr_txn_replay(g.tc, p, rec.key, rec.key_len, (const uint8_t *)"\x00\x09", 2), 1);
    assert_int_equal(gr_txn_replay(g.tc, p, rec.key, rec.key_len, (const uint8_t *)"\x00\x01\x00", 3), -1);
    assert_int_equal(gr_txn_replay(g.tc, (p + 1) % 50, rec.key, rec.key_len, NULL, 0),
                     -EINVAL); /* not loading */
    gr_txn_load_done(g.tc, p, 8);
    reset(&g);
    reset(&f);
}

/* Runs one transaction through every durable step (InitProducerId, AddPartitions, AddOffsets, EndTxn,
 * markers, CompleteX), then for each prefix of its records (a crash after that many durable writes)
 * reloads it into a new coordinator and drives it to rest: a prefix ending in PrepareX completes at load
 * (markers of that result at the stored epoch, then CompleteX); one ending Ongoing is aborted by the
 * timeout pass with an epoch bump; the client's EndTxn retry is answered as Kafka answers it. */
static void crash_at_every_step(bool commit)
{
    struct fake f = {0};
    make(&f, 0);
    int64_t pid = begin(&f, "txn", 20000);
    struct res r = {0};
    gr_txn_add_offsets(f.tc, &r, gr_str_c("txn"), pid, 0, gr_str_c("g"));
    report(&f, 0);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), pid, 0, commit);
    report(&f, 0);
    report_markers(&f, 0);
    report(&f, 0);
    assert_int_equal(f.nrecs, 5); /* Empty, Ongoing, Ongoing, PrepareX, CompleteX */
    for (int k = 1; k <= f.nrecs; k++) {
        struct fake g = {0};
        reload(&f, &g, k, 5);
        struct gr_txn_info i = info(&g, "txn");
        if (k == 4) { /* PrepareX: completed at load */
            assert_int_equal(g.markers_sent, 1);
            assert_true(g.job_commit[0] == commit);
            assert_int_equal(g.job_parts[0], 3);
            assert_int_equal(g.job_epoch[0], 0);
            assert_int_equal(g.job_coord_epoch[0], 5);
            gr_txn_end(g.tc, &r, gr_str_c("txn"), pid, 0, commit);
            assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
            report_markers(&g, 0);
            report(&g, 0);
            i = info(&g, "txn");
            assert_int_equal(i.state, commit ? GR_TXN_COMPLETE_COMMIT : GR_TXN_COMPLETE_ABORT);
            gr_txn_end(g.tc, &r, gr_str_c("txn"), pid, 0, commit);
            assert_int_equal(r.r.error_code, GR_ERR_NONE);
        } else if (k == 2 || k == 3) { /* Ongoing: the timeout pass aborts it */
            assert_int_equal(g.markers_sent, 0);
            assert_int_equal(i.state, GR_TXN_ONGOING);
            assert_int_equal(i.partition_count, k == 2 ? 2 : 3);
            g.now += 20000; /* past the timeout, but the first pass runs one interval after start */
            gr_txn_tick(g.tc);
            assert_int_equal(g.nrecs, 0);
            g.now += GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS;
            gr_txn_tick(g.tc);
            assert_int_equal(g.nrecs, 1);
            report(&g, 0);
            assert_int_equal(g.markers_sent, 1);
            assert_false(g.job_commit[0]);
            assert_int_equal(g.job_epoch[0], 1);
            report_markers(&g, 0);
            report(&g, 0);
            i = info(&g, "txn");
            assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
            gr_txn_end(g.tc, &r, gr_str_c("txn"), pid, 0, commit);
            assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
        } else { /* Empty or CompleteX: at rest */
            assert_int_equal(g.markers_sent, 0);
            assert_int_equal(i.state, k == 1   ? GR_TXN_EMPTY
                                      : commit ? GR_TXN_COMPLETE_COMMIT
                                               : GR_TXN_COMPLETE_ABORT);
            assert_int_equal(i.partition_count, 0);
        }
        assert_int_equal(i.pending, -1);
        reset(&g);
    }
    reset(&f);
}

static void test_crash_commit(void **state)
{
    (void)state;
    crash_at_every_step(true);
}

static void test_crash_abort(void **state)
{
    (void)state;
    crash_at_every_step(false);
}

/* A crash during a fence (the PrepareAbort at the bumped epoch durable, markers not done): the load
 * completes the abort at the bumped epoch, and the new producer's InitProducerId retry then succeeds. */
static void test_crash_during_fence(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t pid = begin(&f, "txn", 60000);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    struct fake g = {0};
    reload(&f, &g, f.nrecs, 1);
    assert_int_equal(g.markers_sent, 1);
    assert_false(g.job_commit[0]);
    assert_int_equal(g.job_epoch[0], 1);
    gr_txn_init_producer_id(g.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    report_markers(&g, 0);
    report(&g, 0);
    gr_txn_init_producer_id(g.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    report(&g, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, pid);
    assert_int_equal(r.r.producer_epoch, 2);
    reset(&g);
    reset(&f);
}

struct seen_list {
    int n;
    char ids[8][16];
    int64_t pids[8];
    enum gr_txn_state states[8];
};
static void seen_one(void *ctx, const struct gr_txn_listing *l)
{
    struct seen_list *s = ctx;
    assert_true(s->n < 8 && l->transactional_id.len < 16);
    memcpy(s->ids[s->n], l->transactional_id.ptr, (size_t)l->transactional_id.len);
    s->ids[s->n][l->transactional_id.len] = '\0';
    s->pids[s->n] = l->producer_id;
    s->states[s->n++] = l->state;
}
static struct seen_list list_of(struct fake *f, const struct gr_txn_list_filter *flt, int16_t want)
{
    struct seen_list s = {0};
    assert_int_equal(gr_txn_list(f->tc, flt, seen_one, &s), want);
    return s;
}

/* ListTransactions' filters (listTransactionStates): producer ids, states (an empty state set lists
 * nothing), the duration (now - start > DurationFilter); COORDINATOR_LOAD_IN_PROGRESS while a partition
 * loads, the ids of a partition not owned left out; gr_txn_partitions in the order added. */
static void test_list_and_partitions(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    int64_t a = begin(&f, "a", 60000); /* Ongoing over t-0, t-1 */
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("b"), 60000, -1, -1);
    report(&f, 0);
    int64_t b = r.r.producer_id; /* Empty */
    struct gr_txn_tp tps[4];
    assert_int_equal(gr_txn_partitions(f.tc, gr_str_c("a"), tps, 1), 2); /* cap 1: one written */
    assert_int_equal(gr_txn_partitions(f.tc, gr_str_c("a"), tps, 4), 2);
    assert_true(gr_str_eq_c(tps[0].topic, "t") && tps[0].partition == 0 && tps[1].partition == 1);
    assert_int_equal(gr_txn_partitions(f.tc, gr_str_c("b"), tps, 4), 0);
    assert_int_equal(gr_txn_partitions(f.tc, gr_str_c("none"), tps, 4), 0);
    struct gr_txn_list_filter all = {.duration_ms = -1};
    assert_int_equal(list_of(&f, &all, 0).n, 2);
    int64_t pids[] = {b};
    struct gr_txn_list_filter by_pid = {.producer_ids = pids, .producer_id_count = 1, .duration_ms = -1};
    struct seen_list s = list_of(&f, &by_pid, 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.ids[0], "b");
    assert_int_equal(s.states[0], GR_TXN_EMPTY);
    enum gr_txn_state ongoing[] = {GR_TXN_ONGOING};
    struct gr_txn_list_filter by_state = {
        .states = ongoing, .state_count = 1, .filter_states = true, .duration_ms = -1};
    s = list_of(&f, &by_state, 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.ids[0], "a");
    assert_int_equal(s.pids[0], a);
    struct gr_txn_list_filter none = {.filter_states = true, .duration_ms = -1};
    assert_int_equal(list_of(&f, &none, 0).n, 0);
    struct gr_txn_list_filter dur = {
        .states = ongoing, .state_count = 1, .filter_states = true, .duration_ms = 5000};
    assert_int_equal(list_of(&f, &dur, 0).n, 0); /* started now */
    f.now += 5001;
    assert_int_equal(list_of(&f, &dur, 0).n, 1);
    int32_t pa = gr_txn_partition_for(gr_str_c("a"), 50);
    gr_txn_unload(f.tc, pa);
    s = list_of(&f, &all, 0);
    assert_true(s.n == 1 && strcmp(s.ids[0], "b") == 0); /* a's partition not owned: left out */
    assert_int_equal(gr_txn_load_begin(f.tc, pa, 1), 0);
    assert_int_equal(list_of(&f, &all, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS).n, 0);
    reset(&f);
}

/* ---- transaction version 2 (KIP-890 part 2: TransactionCoordinator.endTransaction, EndTxn v5+) ---- */

/* The decoded value of the last record written. */
static struct gr_txn_log_value last_value(struct fake *f)
{
    struct gr_coord_record *r = &f->recs[f->nrecs - 1];
    struct gr_arena a;
    gr_arena_init(&a, 0);
    struct gr_txn_log_value v;
    assert_int_equal(gr_txn_log_value_decode(r->value, r->value_len, &a, &v), 0);
    v.topics = NULL; /* freed with the arena */
    gr_arena_reset(&a);
    return v;
}

/* Commit with EndTxn v5: PrepareCommit at epoch + 1 (last epoch = the request's, client version 2 in the
 * record), answered with the producer id and the bumped epoch once durable, markers at the bumped epoch,
 * CompleteCommit keeps it; then Kafka's table for CompleteCommit: commit retry (epoch - 1) -> NONE with the
 * current id and epoch, abort retry -> INVALID_TXN_STATE, commit at the current epoch -> INVALID_TXN_STATE,
 * an older epoch -> PRODUCER_FENCED, abort at the current epoch -> epoch bump with no marker. */
static void test_v2_commit_bumps_epoch(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 2);
    int64_t pid = begin(&f, "txn", 60000);
    struct res e = {0};
    gr_txn_end_tv(f.tc, &e, gr_str_c("txn"), pid, 0, true, 2);
    assert_int_equal(e.calls, 0);
    struct gr_txn_log_value v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_PREPARE_COMMIT);
    assert_int_equal(v.producer_epoch, 1);
    assert_int_equal(v.client_transaction_version, 2);
    assert_int_equal(v.previous_producer_id, pid);
    assert_int_equal(v.next_producer_id, -1);
    assert_int_equal(f.markers_sent, 0);
    report(&f, 0);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.r.error_code, 0);
    assert_int_equal(e.r.producer_id, pid);
    assert_int_equal(e.r.producer_epoch, 1);
    assert_int_equal(f.markers_sent, 1);
    assert_true(f.job_commit[0]);
    assert_int_equal(f.job_epoch[0], 1); /* markers carry the bumped epoch */
    assert_int_equal(f.job_tv[0], 2);    /* and version 2: the partition wants an epoch above the data's */
    assert_int_equal(f.job_parts[0], 2);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_PREPARE_COMMIT);
    assert_int_equal(i.producer_epoch, 1);
    assert_int_equal(i.last_producer_epoch, 0);
    assert_int_equal(i.client_version, 2);
    struct res r = {0};
    /* while PrepareCommit with CompleteCommit pending: the retry is concurrent, and so is an EndTxn at the
       bumped epoch the answer handed out (KAFKA-18464: the pending state is checked before the epoch; an
       empty abort, or the Java 4.4 client's commit sent ahead of its records), even an epoch never valid */
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 0, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, false, 2);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 5, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid + 1, 1, true, 2); /* the id is checked first */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    /* an implicit add of the next transaction while CompleteCommit is pending: concurrent, not fenced */
    gr_txn_add_partitions_tv(f.tc, &r, gr_str_c("txn"), pid, 1, T0, 1, 2);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    report_markers(&f, 0);
    v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(v.producer_epoch, 1);
    assert_int_equal(v.client_transaction_version, 2);
    report(&f, 0);
    i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(i.producer_id, pid);
    assert_int_equal(i.producer_epoch, 1);
    assert_int_equal(i.last_producer_epoch, 0);
    assert_int_equal(i.partition_count, 0);
    r = (struct res){0};
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 0, true, 2); /* retry */
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, pid);
    assert_int_equal(r.r.producer_epoch, 1);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 0, false, 2); /* abort retry after a commit */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, true, 2); /* commit with nothing open */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid + 1, 1, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    assert_int_equal(r.calls, 4);
    /* abort at the current epoch from CompleteCommit: bumped, no partition */
    int n = f.nrecs;
    f.now += 7;
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, false, 2);
    assert_int_equal(f.nrecs, n + 1);
    v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_PREPARE_ABORT);
    assert_int_equal(v.producer_epoch, 2);
    assert_int_equal(v.start_ms, f.now); /* no partition added: the update time starts it */
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_epoch, 2);
    assert_int_equal(f.job_parts[0], 0);
    assert_false(f.job_commit[0]);
    report_markers(&f, 0);
    report(&f, 0);
    i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(i.producer_epoch, 2);
    /* the next transaction: an implicit add at the new epoch records version 2 */
    gr_txn_add_partitions_tv(f.tc, &r, gr_str_c("txn"), pid, 2, T0, 2, 2);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(last_value(&f).client_transaction_version, 2);
    assert_int_equal(info(&f, "txn").state, GR_TXN_ONGOING);
    gr_txn_add_partitions_tv(f.tc, &r, gr_str_c("txn"), pid, 1, T0, 2, 2); /* a zombie's epoch */
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    reset(&f);
}

/* Empty under version 2: commit -> INVALID_TXN_STATE (nothing to commit), abort -> PrepareAbort at epoch + 1
 * with no marker, then CompleteAbort; an abort retry at the old epoch -> NONE with the new epoch, a commit
 * retry -> INVALID_TXN_STATE; from Empty a retry epoch is fenced (PRODUCER_FENCED). Version 1 still refuses
 * the abort from Empty. */
static void test_v2_abort_from_empty(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    report(&f, 0);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    report(&f, 0);
    int64_t pid = r.r.producer_id;
    assert_int_equal(r.r.producer_epoch, 1);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, false, 0);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE); /* version 1 */
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 0, false, 2);
    assert_int_equal(r.r.error_code, GR_ERR_PRODUCER_FENCED);
    int calls = r.calls, n = f.nrecs;
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, false, 2);
    assert_int_equal(r.calls, calls);
    assert_int_equal(f.nrecs, n + 1);
    assert_int_equal(last_state(&f), GR_TXN_PREPARE_ABORT);
    report(&f, 0);
    assert_int_equal(r.calls, calls + 1);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, pid);
    assert_int_equal(r.r.producer_epoch, 2);
    assert_int_equal(f.njobs, 1);
    assert_int_equal(f.job_parts[0], 0); /* nothing to mark */
    report_markers(&f, 0);
    assert_int_equal(last_state(&f), GR_TXN_COMPLETE_ABORT);
    report(&f, 0);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(i.producer_epoch, 2);
    assert_int_equal(i.last_producer_epoch, 1);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, false, 2);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_epoch, 2);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 1, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), pid, 2, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_TXN_STATE);
    reset(&f);
}

/* Epoch exhaustion under version 2: an EndTxn at epoch 32766 draws a next producer id (kept in PrepareX's
 * record as NextProducerId), the markers go out at 32767 under the old id, the answer is the next id at
 * epoch 0, CompleteX moves to it (previous id = the old one, last epoch 32766); a retry with the old id and
 * epoch 32766 answers NONE with the new pair. A producer id allocation error answers it with nothing
 * written. */
static void test_v2_epoch_exhaustion(void **state)
{
    (void)state;
    struct fake f = {0};
    struct gr_txn_coord *tc = make(&f, 0);
    int32_t p = gr_txn_partition_for(gr_str_c("txn"), 50);
    int32_t ids[] = {0};
    struct gr_txn_topic_parts tps[] = {{{"t", 1}, ids, 1}};
    struct gr_coord_record rec;
    struct gr_txn_log_value v = {77, -1, -1, 32766, 1000, GR_TXN_ONGOING, tps, 1, f.now, f.now, 2};
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), &v, 1), 0);
    gr_txn_load_begin(tc, p, 1);
    assert_int_equal(gr_txn_replay(tc, p, rec.key, rec.key_len, rec.value, rec.value_len), 0);
    gr_txn_load_done(tc, p, 1);
    gr_coord_records_free(&rec, 1);
    assert_int_equal(info(&f, "txn").client_version, 2);
    struct res r = {0};
    int n = f.nrecs;
    f.pid_error = GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    gr_txn_end_tv(tc, &r, gr_str_c("txn"), 77, 32766, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    assert_int_equal(f.nrecs, n);
    f.pid_error = 0;
    gr_txn_end_tv(tc, &r, gr_str_c("txn"), 77, 32766, true, 2);
    v = last_value(&f);
    assert_int_equal(v.producer_id, 77);
    assert_int_equal(v.producer_epoch, 32767);
    assert_int_equal(v.next_producer_id, 1000);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    assert_int_equal(f.job_epoch[0], 32767);
    assert_int_equal(info(&f, "txn").next_producer_id, 1000);
    report_markers(&f, 0);
    v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(v.producer_id, 1000);
    assert_int_equal(v.producer_epoch, 0);
    assert_int_equal(v.previous_producer_id, 77);
    assert_int_equal(v.next_producer_id, -1);
    report(&f, 0);
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.producer_id, 1000);
    assert_int_equal(i.producer_epoch, 0);
    assert_int_equal(i.previous_producer_id, 77);
    assert_int_equal(i.last_producer_epoch, 32766);
    assert_int_equal(i.next_producer_id, -1);
    r = (struct res){0};
    gr_txn_end_tv(tc, &r, gr_str_c("txn"), 77, 32766, true, 2); /* retry on overflow */
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    gr_txn_end_tv(tc, &r, gr_str_c("txn"), 77, 32765, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    /* an id loaded without a previous producer id (-1): a request naming producer id -1 is no overflow retry
     */
    int32_t py = gr_txn_partition_for(gr_str_c("y"), 50);
    v = (struct gr_txn_log_value){88, -1, -1, 0, 1000, GR_TXN_COMPLETE_COMMIT, NULL, 0, f.now, f.now, 0};
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("y"), &v, 1), 0);
    gr_txn_load_begin(tc, py, 2);
    assert_int_equal(gr_txn_replay(tc, py, rec.key, rec.key_len, rec.value, rec.value_len), 0);
    gr_txn_load_done(tc, py, 2);
    gr_coord_records_free(&rec, 1);
    gr_txn_end_tv(tc, &r, gr_str_c("y"), -1, 32766, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    assert_int_equal(r.r.producer_id, -1);
    /* the new producer id's first transaction */
    gr_txn_add_partitions_tv(tc, &r, gr_str_c("txn"), 1000, 0, T0, 1, 2);
    report(&f, 0);
    assert_int_equal(r.r.error_code, 0);
    reset(&f);
}

/* Loads `id` into the coordinator as an Ongoing transaction of producer `pid` at `epoch` with client version
 * `tv`, one partition (t-0), started at f->now with a timeout of 1000 ms. */
static void load_ongoing(struct fake *f, const char *id, int64_t pid, int16_t epoch, int16_t tv)
{
    int32_t p = gr_txn_partition_for(gr_str_c(id), 50);
    static const int32_t ids[] = {0};
    static const struct gr_txn_topic_parts topics[] = {{{"t", 1}, ids, 1}};
    struct gr_txn_log_value v = {pid, -1, -1, epoch, 1000, GR_TXN_ONGOING, topics, 1, f->now, f->now, tv};
    struct gr_coord_record rec;
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c(id), &v, 1), 0);
    gr_txn_load_begin(f->tc, p, 1);
    assert_int_equal(gr_txn_replay(f->tc, p, rec.key, rec.key_len, rec.value, rec.value_len), 0);
    gr_txn_load_done(f->tc, p, 1);
    gr_coord_records_free(&rec, 1);
}

/* KAFKA-20090: a version 2 transaction that times out at the exhausted epoch 32766 is fenced to 32767 and
 * aborted, and the fence path draws the next producer id as EndTxn v5 does: PrepareAbort at 32767 keeps it
 * (NextProducerId), the markers go out at 32767 with transaction version 2, CompleteAbort moves to the next
 * id at epoch 0 (previous id the old one). The producer's late EndTxn v5 abort with the old id and 32766 is
 * a retry (retryOnOverflow): NONE with the new pair, and the new id's first transaction works; the old id at
 * any epoch is INVALID_PRODUCER_ID_MAPPING. An allocation error leaves the transaction Ongoing with nothing
 * written until the next pass. Before the fix the abort completed at 32767 under the old id and the next
 * EndTxn v5 had no epoch left to bump to. */
static void test_v2_fence_at_exhaustion(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    load_ongoing(&f, "txn", 77, 32766, 2);
    int n = f.nrecs;
    f.pid_error = GR_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    f.now += GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS + 1;
    gr_txn_tick(f.tc);
    assert_int_equal(f.nrecs, n); /* no id: nothing written, still Ongoing at 32766 */
    struct gr_txn_info i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_ONGOING);
    assert_int_equal(i.producer_epoch, 32766);
    f.pid_error = 0;
    f.now += GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS + 1;
    gr_txn_tick(f.tc);
    assert_int_equal(f.nrecs, n + 1);
    struct gr_txn_log_value v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_PREPARE_ABORT);
    assert_int_equal(v.producer_id, 77);
    assert_int_equal(v.producer_epoch, 32767);
    assert_int_equal(v.next_producer_id, 1000);
    assert_int_equal(v.client_transaction_version, 2);
    report(&f, 0);
    assert_int_equal(f.njobs, 1);
    assert_false(f.job_commit[0]);
    assert_int_equal(f.job_epoch[0], 32767);
    assert_int_equal(f.job_tv[0], 2);
    assert_int_equal(f.job_parts[0], 1);
    report_markers(&f, 0);
    v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(v.producer_id, 1000);
    assert_int_equal(v.producer_epoch, 0);
    assert_int_equal(v.previous_producer_id, 77);
    assert_int_equal(v.next_producer_id, -1);
    report(&f, 0);
    i = info(&f, "txn");
    assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(i.producer_id, 1000);
    assert_int_equal(i.producer_epoch, 0);
    assert_int_equal(i.previous_producer_id, 77);
    /* the producer's own abort, late, with the old id and epoch: a retry */
    struct res r = {0};
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), 77, 32766, false, 2);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), 77, 32767, false, 2); /* the fenced epoch was never handed out */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    gr_txn_add_partitions_tv(f.tc, &r, gr_str_c("txn"), 77, 32766, T0, 1, 2); /* the zombie */
    assert_int_equal(r.r.error_code, GR_ERR_INVALID_PRODUCER_ID_MAPPING);
    gr_txn_add_partitions_tv(f.tc, &r, gr_str_c("txn"), 1000, 0, T0, 1, 2);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    gr_txn_end_tv(f.tc, &r, gr_str_c("txn"), 1000, 0, true, 2);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 1);
    reset(&f);
}

/* KAFKA-20090's other half: fencing an epoch already at INT16_MAX does not bump it (it would wrap to a
 * negative epoch): a transaction left Ongoing at 32767 (version 1) is aborted by InitProducerId at 32767
 * (markers at 32767, CONCURRENT_TRANSACTIONS), and the retry rotates to a new producer id at epoch 0; the
 * timeout pass also takes such a transaction (it used to be skipped, and hung). */
static void test_fence_at_max_epoch(void **state)
{
    (void)state;
    struct fake f = {0};
    make(&f, 0);
    load_ongoing(&f, "a", 5, INT16_MAX, 0);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("a"), 1000, -1, -1);
    struct gr_txn_log_value v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_PREPARE_ABORT);
    assert_int_equal(v.producer_epoch, INT16_MAX);
    assert_int_equal(v.next_producer_id, -1); /* version 1: the InitProducerId retry rotates */
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_CONCURRENT_TRANSACTIONS);
    assert_int_equal(f.job_epoch[0], INT16_MAX);
    assert_int_equal(f.job_tv[0], 0);
    report_markers(&f, 0);
    report(&f, 0);
    assert_int_equal(info(&f, "a").state, GR_TXN_COMPLETE_ABORT);
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("a"), 1000, -1, -1);
    report(&f, 0);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_id, 1000);
    assert_int_equal(r.r.producer_epoch, 0);
    /* the timeout pass: a version 2 transaction at 32767 is aborted at 32767 onto a next producer id */
    load_ongoing(&f, "b", 6, INT16_MAX, 2);
    f.now += GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS + 1;
    gr_txn_tick(f.tc);
    v = last_value(&f);
    assert_int_equal(v.state, GR_TXN_PREPARE_ABORT);
    assert_int_equal(v.producer_id, 6);
    assert_int_equal(v.producer_epoch, INT16_MAX);
    assert_int_equal(v.next_producer_id, 1001);
    report(&f, 0);
    report_markers(&f, 0);
    report(&f, 0);
    struct gr_txn_info i = info(&f, "b");
    assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(i.producer_id, 1001);
    assert_int_equal(i.producer_epoch, 0);
    reset(&f);
}

/* Version 2's state comes back from the log: a PrepareCommit written by EndTxn v5 and replayed into a new
 * coordinator is completed at the bumped epoch (markers at epoch 1, CompleteCommit keeping the last epoch),
 * and the retry rule works on the restored state; a PrepareCommit with a next producer id completes onto it.
 */
static void test_v2_load_restores_version(void **state)
{
    (void)state;
    struct fake f = {0}, g = {0};
    make(&f, 1);
    int64_t pid = begin(&f, "txn", 60000);
    struct res e = {0};
    gr_txn_end_tv(f.tc, &e, gr_str_c("txn"), pid, 0, true, 2);
    report(&f, 0); /* PrepareCommit durable, markers out: then the coordinator moves */
    reload(&f, &g, f.nrecs, 2);
    struct gr_txn_info i = info(&g, "txn");
    assert_int_equal(i.client_version, 2);
    assert_int_equal(i.producer_epoch, 1);
    assert_int_equal(i.state, GR_TXN_PREPARE_COMMIT);
    assert_int_equal(g.njobs, 1); /* load_done completes it */
    assert_int_equal(g.job_epoch[0], 1);
    assert_true(g.job_commit[0]);
    report_markers(&g, 0);
    struct gr_txn_log_value v = last_value(&g);
    assert_int_equal(v.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(v.producer_epoch, 1);
    assert_int_equal(v.client_transaction_version, 2);
    report(&g, 0);
    struct res r = {0};
    gr_txn_end_tv(g.tc, &r, gr_str_c("txn"), pid, 0, true, 2);
    assert_int_equal(r.r.error_code, GR_ERR_NONE);
    assert_int_equal(r.r.producer_epoch, 1);
    reset(&g);
    reset(&f);
    /* a replayed PrepareCommit with NextProducerId */
    struct fake h = {0};
    struct gr_txn_coord *tc = make(&h, 0);
    int32_t p = gr_txn_partition_for(gr_str_c("x"), 50);
    int32_t ids[] = {3};
    struct gr_txn_topic_parts tps[] = {{{"t", 1}, ids, 1}};
    struct gr_coord_record rec;
    v = (struct gr_txn_log_value){5, 5, 900, 32767, 1000, GR_TXN_PREPARE_COMMIT, tps, 1, h.now, h.now, 2};
    assert_int_equal(gr_txn_log_record(&rec, gr_str_c("x"), &v, 1), 0);
    gr_txn_load_begin(tc, p, 4);
    assert_int_equal(gr_txn_replay(tc, p, rec.key, rec.key_len, rec.value, rec.value_len), 0);
    gr_txn_load_done(tc, p, 4);
    gr_coord_records_free(&rec, 1);
    assert_int_equal(h.njobs, 1);
    assert_int_equal(h.job_epoch[0], 32767);
    report_markers(&h, 0);
    report(&h, 0);
    i = info(&h, "x");
    assert_int_equal(i.state, GR_TXN_COMPLETE_COMMIT);
    assert_int_equal(i.producer_id, 900);
    assert_int_equal(i.producer_epoch, 0);
    assert_int_equal(i.previous_producer_id, 5);
    reset(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_producer_id),
        cmocka_unit_test(test_list_and_partitions),
        cmocka_unit_test(test_init_invalid),
        cmocka_unit_test(test_ownership_errors),
        cmocka_unit_test(test_commit_flow),
        cmocka_unit_test(test_end_errors),
        cmocka_unit_test(test_fence_ongoing),
        cmocka_unit_test(test_refused_transition_warns),
        cmocka_unit_test(test_fence_write_fails),
        cmocka_unit_test(test_append_errors),
        cmocka_unit_test(test_kip360),
        cmocka_unit_test(test_epoch_exhausted),
        cmocka_unit_test(test_fence_exhausts_epoch),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_timeout_abort),
        cmocka_unit_test(test_expire),
        cmocka_unit_test(test_complete_retry),
        cmocka_unit_test(test_unload_during_write),
        cmocka_unit_test(test_error_for_version),
        cmocka_unit_test(test_load_rebuild),
        cmocka_unit_test(test_crash_commit),
        cmocka_unit_test(test_crash_abort),
        cmocka_unit_test(test_crash_during_fence),
        cmocka_unit_test(test_v2_commit_bumps_epoch),
        cmocka_unit_test(test_v2_abort_from_empty),
        cmocka_unit_test(test_v2_epoch_exhaustion),
        cmocka_unit_test(test_v2_load_restores_version),
        cmocka_unit_test(test_v2_fence_at_exhaustion),
        cmocka_unit_test(test_fence_at_max_epoch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
