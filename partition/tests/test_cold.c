/*
 * test_cold.c: the cold-read engine (partition/cold.c) and read planning (partition/read.c) on real logs in
 * a temporary directory, no server and no event loop: the test plays the owning thread and drives the I/O
 * pool itself (gr_iopool_drain runs the jobs' done on this thread, as the server's loop does).
 *
 * Covers: the engine's done hook is called exactly once: at once when nothing is cold, after the pool round
 * when a lookup needed a file the fd cap closed (then the lookup succeeds with the file pinned), never after
 * cancel nor once the set is stopped; without a pool lookups read the blocking way; gr_cold_check_range
 * notes a range once. Read planning: Fetch's epoch check, zstd rule, offset out of range, KIP-74 budget
 * (the first partition with data gets a whole batch past the budget, the next nothing), the visible-offset
 * bound (durable mode); ListOffsets' special timestamps per version and lookups; OffsetForLeaderEpoch. The
 * append gate (gate.c): produces queued behind a file reopen keep their order, a produce sharing no
 * partition goes ahead, a stop while gated runs nothing.
 * Read next: partition/partition.h.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "partition/partition.h"
#include "protocol/errors.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

#define PARTS 4

struct fx {
    char dir[256];
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_partitions *ps;
    struct gr_iopool *pool;
    int calls; /* done hook calls */
};

static void count_done(struct gr_cold *c)
{
    struct fx *f = c->ctx;
    f->calls++;
}

/* Appends `count` records (timestamps ts, ts+1, ...) to partition p and makes them durable. */
static void append(struct fx *f, int p, int32_t count, int64_t ts)
{
    struct gr_log *log = gr_topic_log(f->topic, p);
    size_t len;
    uint8_t *b = th_simple(count, ts, 7, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
    gr_partition_appended(gr_partition_get(f->ps, log));
    gr_log_flush_async(log);
    assert_int_equal(th_wait_durable(log, gr_log_end_offset(log)), 0);
    gr_partition_flushed(gr_partition_get(f->ps, log));
}

static int setup_mode(void **state, bool durable)
{
    struct fx *f = calloc(1, sizeof *f);
    th_tmpdir(f->dir, sizeof f->dir);
    th_flush_reset();
    fault_install();
    struct gr_store_config sc;
    th_config(&sc, f->dir);
    sc.open_segment_fds_max = 1; /* idle partitions' files are closed by the cap */
    assert_int_equal(gr_store_open(&sc, &f->store), 0);
    const char *keys[] = {"compression.type"}, *zstd[] = {"zstd"};
    struct gr_topic *z;
    assert_int_equal(gr_store_topic_create(f->store, "c", PARTS, NULL, NULL, 0, &f->topic), 0);
    assert_int_equal(gr_store_topic_create(f->store, "z", 1, keys, zstd, 1, &z), 0);
    struct gr_partitions_config pc = {f->store, durable};
    assert_non_null(f->ps = gr_partitions_create(&pc));
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &f->pool), 0);
    for (int p = 0; p < PARTS; p++)
        append(f, p, 3, 1000 + 10 * p);
    gr_store_quiesce(f->store);
    gr_store_fds_trim(f->store);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_mode(state, false);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    gr_iopool_destroy(f->pool);
    gr_partitions_destroy(f->ps);
    gr_store_close(f->store);
    fault_uninstall();
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* A partition whose file the cap closed (a no-wait read needs the pool), or -1. */
static int closed_partition(struct fx *f)
{
    for (int p = 0; p < PARTS; p++) {
        struct gr_log_slice s, cold;
        struct gr_log *log = gr_topic_log(f->topic, p);
        int rc = gr_log_read_nowait(log, 0, 1 << 20, gr_log_end_offset(log), true, &s, &cold);
        gr_log_slice_release(&s);
        gr_log_slice_release(&cold);
        if (rc == -EAGAIN) return p;
    }
    return -1;
}

static void test_warm_done_at_once(void **state)
{
    struct fx *f = *state;
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, f->pool, count_done, f);
    gr_cold_wait(&c); /* nothing noted */
    assert_int_equal(f->calls, 1);
    assert_false(gr_cold_waiting(&c));
    assert_int_equal(gr_iopool_pending(f->pool), 0); /* no job */
    gr_cold_release(&c);
    assert_int_equal(f->calls, 1);
}

static void test_round_then_done_once(void **state)
{
    struct fx *f = *state;
    int p = closed_partition(f);
    assert_true(p >= 0);
    struct gr_log *log = gr_topic_log(f->topic, p);
    long opens = fault_count_this_thread(F_OPEN);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, f->pool, count_done, f);
    struct gr_log_slice s;
    assert_int_equal(gr_cold_read(&c, log, 0, 1 << 20, gr_log_end_offset(log), true, &s), -EAGAIN);
    assert_true(gr_cold_pending(&c));
    gr_cold_wait(&c);
    assert_int_equal(f->calls, 0); /* not before the round */
    assert_true(gr_cold_waiting(&c));
    assert_false(gr_cold_pending(&c));
    gr_iopool_drain(f->pool);
    assert_int_equal(f->calls, 1);
    assert_false(gr_cold_waiting(&c));
    assert_int_equal(gr_cold_rounds(&c), 1);
    assert_true(gr_cold_pin_count(&c) >= 1);
    gr_store_fds_trim(f->store); /* the pin keeps the reopened file open */
    assert_int_equal(gr_cold_read(&c, log, 0, 1 << 20, gr_log_end_offset(log), true, &s), 0);
    assert_true(s.bytes > 0);
    assert_int_equal(s.first_batch_offset, 0);
    gr_log_slice_release(&s);
    assert_int_equal(fault_count_this_thread(F_OPEN), opens); /* this thread opened nothing */
    gr_cold_release(&c);
    assert_int_equal(gr_cold_pin_count(&c), 0);
    assert_int_equal(f->calls, 1);
}

static void test_cancel_runs_nothing(void **state)
{
    struct fx *f = *state;
    int p = closed_partition(f);
    assert_true(p >= 0);
    struct gr_log *log = gr_topic_log(f->topic, p);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, f->pool, count_done, f);
    int64_t off, ts;
    int32_t epoch;
    assert_int_equal(gr_cold_max_timestamp(&c, log, gr_log_end_offset(log), &off, &ts, &epoch), -EAGAIN);
    gr_cold_wait(&c);
    gr_cold_cancel(&c);
    assert_false(gr_cold_waiting(&c));
    gr_cold_cancel(&c); /* idle: nothing */
    gr_iopool_drain(f->pool);
    assert_int_equal(f->calls, 0);
    assert_int_equal(gr_cold_pin_count(&c), 0); /* the job released its work */
    gr_cold_release(&c);
    /* released while waiting: the same */
    gr_store_fds_trim(f->store);
    assert_true((p = closed_partition(f)) >= 0);
    log = gr_topic_log(f->topic, p);
    gr_cold_init(&c, f->ps, f->pool, count_done, f);
    assert_int_equal(gr_cold_offset_for_time(&c, log, 0, gr_log_end_offset(log), &off, &ts, &epoch), -EAGAIN);
    gr_cold_wait(&c);
    gr_cold_release(&c);
    gr_iopool_drain(f->pool);
    assert_int_equal(f->calls, 0);
}

static void test_stop_runs_nothing(void **state)
{
    struct fx *f = *state;
    int p = closed_partition(f);
    assert_true(p >= 0);
    struct gr_log *log = gr_topic_log(f->topic, p);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, f->pool, count_done, f);
    struct gr_log_slice s;
    assert_int_equal(gr_cold_read(&c, log, 0, 1 << 20, gr_log_end_offset(log), true, &s), -EAGAIN);
    gr_cold_wait(&c);
    gr_partitions_stop(f->ps);
    assert_true(gr_partitions_stopped(f->ps));
    gr_iopool_drain(f->pool);
    assert_int_equal(f->calls, 0);
    assert_false(gr_cold_waiting(&c));
    gr_cold_release(&c);
}

static void test_no_pool_blocking(void **state)
{
    struct fx *f = *state;
    int p = closed_partition(f);
    assert_true(p >= 0);
    struct gr_log *log = gr_topic_log(f->topic, p);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, NULL, count_done, f);
    struct gr_log_slice s;
    assert_int_equal(gr_cold_read(&c, log, 0, 1 << 20, gr_log_end_offset(log), true, &s), 0);
    assert_true(s.bytes > 0);
    gr_cold_check_range(&c, &s); /* no pool: nothing to read in */
    assert_false(gr_cold_pending(&c));
    gr_log_slice_release(&s);
    gr_cold_wait(&c);
    assert_int_equal(f->calls, 1);
    gr_cold_release(&c);
}

static void test_check_range_once(void **state)
{
    struct fx *f = *state;
    struct gr_log *log = gr_topic_log(f->topic, 0);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(log, 0, 1 << 20, gr_log_end_offset(log), true, &s), 0);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, f->pool, count_done, f);
    gr_cold_check_range(&c, &s);
    bool cold = gr_cold_pending(&c); /* the page cache decides; either way one wait, one done */
    gr_cold_wait(&c);
    gr_iopool_drain(f->pool);
    assert_int_equal(f->calls, 1);
    assert_int_equal(gr_cold_pin_count(&c), 0); /* data ranges are not pinned */
    if (cold) {
        gr_cold_check_range(&c, &s); /* once per caller */
        assert_false(gr_cold_pending(&c));
    }
    gr_log_slice_release(&s);
    gr_cold_release(&c);
}

/* Fetch planning of partition p of topic "c" (warm reads: no pool). */
static int plan_fetch(struct fx *f, struct gr_log *log, struct gr_fetch_budget *bud, struct gr_fetch_read *rd)
{
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, NULL, count_done, f);
    int rc = gr_partition_fetch(gr_partition_get(f->ps, log), &c, bud, rd);
    gr_cold_release(&c);
    return rc;
}

static void test_fetch_plan(void **state)
{
    struct fx *f = *state;
    struct gr_log *l0 = gr_topic_log(f->topic, 0), *l1 = gr_topic_log(f->topic, 1);
    int32_t epoch = gr_log_leader_epoch(l0);
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, 10, 1 << 20); /* smaller than one batch */
    assert_int_equal(bud.left, 10);
    struct gr_fetch_read rd = {.fetch_offset = 0,
                               .current_leader_epoch = epoch,
                               .partition_max_bytes = 1 << 20,
                               .version = 12,
                               .replica_id = -1, /* a consumer */
                               .last_fetched_epoch = -1};
    assert_int_equal(plan_fetch(f, l0, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.high_watermark, 3);
    assert_int_equal(rd.log_start_offset, 0);
    assert_true(rd.slice.bytes > 10); /* KIP-74: the first partition with data gets a whole batch */
    assert_true(bud.have_data);
    assert_int_equal(bud.left, 0);
    gr_log_slice_release(&rd.slice);
    rd = (struct gr_fetch_read){.fetch_offset = 0,
                                .current_leader_epoch = -1,
                                .partition_max_bytes = 1 << 20,
                                .version = 12,
                                .replica_id = -1, /* a consumer */
                                .last_fetched_epoch = -1};
    assert_int_equal(plan_fetch(f, l1, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.slice.bytes, 0); /* the budget is spent */
    gr_fetch_budget_init(&bud, 0, 1 << 20);
    assert_int_equal(bud.left, 1 << 20); /* 0: the broker's cap */
    rd.current_leader_epoch = epoch + 1;
    assert_int_equal(plan_fetch(f, l1, &bud, &rd), GR_ERR_UNKNOWN_LEADER_EPOCH);
    if (epoch > 0) {
        rd.current_leader_epoch = epoch - 1;
        assert_int_equal(plan_fetch(f, l1, &bud, &rd), GR_ERR_FENCED_LEADER_EPOCH);
    }
    rd.current_leader_epoch = -1;
    rd.fetch_offset = 4; /* past the log end */
    assert_int_equal(plan_fetch(f, l1, &bud, &rd), GR_ERR_OFFSET_OUT_OF_RANGE);
    rd.fetch_offset = 3; /* at the visible offset: nothing */
    assert_int_equal(plan_fetch(f, l1, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.slice.bytes, 0);
    struct gr_log *zl = gr_topic_log(gr_store_topic_find(f->store, "z", 1), 0);
    rd.fetch_offset = 0;
    rd.version = 9; /* cannot carry zstd (KIP-110) */
    assert_int_equal(plan_fetch(f, zl, &bud, &rd), GR_ERR_UNSUPPORTED_COMPRESSION_TYPE);
    rd.version = 10;
    assert_int_equal(plan_fetch(f, zl, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(bud.left, 1 << 20); /* nothing read */
}

static int setup_durable(void **state)
{
    return setup_mode(state, true);
}

/* In durable mode the visible offset is the durable offset: an append not yet flushed is not read. */
static void test_fetch_visible_bound(void **state)
{
    struct fx *f = *state;
    struct gr_log *log = gr_topic_log(f->topic, 2);
    size_t len;
    uint8_t *b = th_simple(2, 5000, 9, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0); /* not flushed: not visible */
    free(b);
    struct gr_fetch_budget bud;
    gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
    struct gr_fetch_read rd = {.fetch_offset = 3,
                               .current_leader_epoch = -1,
                               .partition_max_bytes = 1 << 20,
                               .version = 12,
                               .replica_id = -1, /* a consumer */
                               .last_fetched_epoch = -1};
    assert_int_equal(plan_fetch(f, log, &bud, &rd), GR_ERR_NONE);
    assert_int_equal(rd.high_watermark, 3);
    assert_int_equal(rd.slice.bytes, 0);
    assert_false(bud.have_data);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, NULL, count_done, f);
    struct gr_offset_answer a;
    assert_int_equal(gr_partition_list_offset(gr_partition_get(f->ps, log), &c, 11, -1, -1, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 3); /* latest: the visible offset, not the log end (5) */
    assert_int_equal(gr_log_end_offset(log), 5);
    gr_cold_release(&c);
}

static void test_list_offsets_plan(void **state)
{
    struct fx *f = *state;
    struct gr_log *log = gr_topic_log(f->topic, 1); /* records at offsets 0-2, timestamps 1010-1012 */
    struct gr_partition *part = gr_partition_get(f->ps, log);
    int32_t epoch = gr_log_leader_epoch(log);
    struct gr_cold c = {0};
    gr_cold_init(&c, f->ps, NULL, count_done, f);
    struct gr_offset_answer a;
    assert_int_equal(gr_partition_list_offset(part, &c, 1, -1, -1, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 3);
    assert_int_equal(a.timestamp, -1);
    assert_int_equal(a.leader_epoch, epoch);
    assert_int_equal(gr_partition_list_offset(part, &c, 1, -1, -2, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 0);
    assert_int_equal(gr_partition_list_offset(part, &c, 6, -1, -3, &a), GR_ERR_UNSUPPORTED_VERSION);
    assert_int_equal(a.offset, -1);
    assert_int_equal(gr_partition_list_offset(part, &c, 7, -1, -3, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 2); /* the largest timestamp */
    assert_int_equal(a.timestamp, 1012);
    assert_int_equal(gr_partition_list_offset(part, &c, 7, -1, -4, &a), GR_ERR_UNSUPPORTED_VERSION);
    assert_int_equal(gr_partition_list_offset(part, &c, 8, -1, -4, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 0);
    assert_int_equal(gr_partition_list_offset(part, &c, 8, -1, -5, &a), GR_ERR_UNSUPPORTED_VERSION);
    assert_int_equal(gr_partition_list_offset(part, &c, 9, -1, -5, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, -1); /* nothing tiered */
    assert_int_equal(gr_partition_list_offset(part, &c, 10, -1, -6, &a), GR_ERR_UNSUPPORTED_VERSION);
    assert_int_equal(gr_partition_list_offset(part, &c, 11, -1, -6, &a), GR_ERR_NONE);
    assert_int_equal(gr_partition_list_offset(part, &c, 11, -1, -7, &a), GR_ERR_UNSUPPORTED_VERSION);
    assert_int_equal(gr_partition_list_offset(part, &c, 11, -1, 1011, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, 1); /* the first record at or after 1011 */
    assert_int_equal(a.timestamp, 1011);
    assert_int_equal(gr_partition_list_offset(part, &c, 11, -1, 5000, &a), GR_ERR_NONE);
    assert_int_equal(a.offset, -1); /* none */
    assert_int_equal(a.timestamp, -1);
    assert_int_equal(gr_partition_list_offset(part, &c, 11, epoch + 1, -1, &a), GR_ERR_UNKNOWN_LEADER_EPOCH);
    assert_int_equal(a.offset, -1);
    gr_cold_release(&c);
}

static void test_epoch_end_offset(void **state)
{
    struct fx *f = *state;
    struct gr_log *log = gr_topic_log(f->topic, 0);
    struct gr_partition *part = gr_partition_get(f->ps, log);
    int32_t epoch = gr_log_leader_epoch(log), e;
    int64_t end;
    assert_int_equal(gr_partition_epoch_end_offset(part, -1, epoch, &e, &end), GR_ERR_NONE);
    assert_int_equal(e, epoch);
    assert_int_equal(end, 3); /* the current epoch ends at the log end offset */
    assert_int_equal(gr_partition_epoch_end_offset(part, -1, epoch + 1, &e, &end), GR_ERR_NONE);
    assert_int_equal(e, -1);
    assert_int_equal(end, -1);
    assert_int_equal(gr_partition_epoch_end_offset(part, -1, -1, &e, &end), GR_ERR_NONE);
    assert_int_equal(e, -1);
    assert_int_equal(gr_partition_epoch_end_offset(part, epoch + 1, epoch, &e, &end),
                     GR_ERR_UNKNOWN_LEADER_EPOCH);
    assert_int_equal(end, -1);
}

/* Fetch with LastFetchedEpoch (KIP-320): partition 1 holds epochs 0 [0,3), 2 [3,5) and 5 [5,6). */
static void test_fetch_diverging_epoch(void **state)
{
    struct fx *f = *state;
    struct gr_log *log = gr_topic_log(f->topic, 1);
    assert_int_equal(gr_log_leader_epoch(log), 0);
    assert_int_equal(gr_log_set_leader_epoch(log, 2), 0);
    append(f, 1, 2, 2000);
    assert_int_equal(gr_log_set_leader_epoch(log, 5), 0);
    append(f, 1, 1, 3000);
    assert_int_equal(gr_log_end_offset(log), 6);
    struct {
        int32_t current, last_fetched;
        int64_t fetch_offset;
        int err;
        int32_t div_epoch;
        int64_t div_end, first; /* first offset returned, -1 none */
    } cases[] = {
        {5, -1, 3, GR_ERR_NONE, -1, -1, 3},                 /* not given: a plain read */
        {5, 5, 6, GR_ERR_NONE, -1, -1, -1},                 /* current epoch, at the end: nothing yet */
        {5, 2, 5, GR_ERR_NONE, -1, -1, 5},                  /* epoch 2 ends at 5: no divergence */
        {5, 2, 6, GR_ERR_NONE, 2, 5, -1},                   /* the fetcher went past epoch 2's end */
        {5, 3, 5, GR_ERR_NONE, 2, 5, -1},                   /* epoch 3 unknown here: the largest below, 2 */
        {5, 1, 3, GR_ERR_NONE, 0, 3, -1},                   /* epoch 1 unknown: 0, which ends at 3 */
        {5, 0, 3, GR_ERR_NONE, -1, -1, 3},                  /* epoch 0 ends at 3: read on */
        {-1, 6, 6, GR_ERR_OFFSET_OUT_OF_RANGE, -1, -1, -1}, /* above the current epoch: no end known */
        {4, 2, 5, GR_ERR_FENCED_LEADER_EPOCH, -1, -1, -1},  /* the epoch check comes first */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gr_fetch_budget bud;
        gr_fetch_budget_init(&bud, 1 << 20, 1 << 20);
        struct gr_fetch_read rd = {.fetch_offset = cases[i].fetch_offset,
                                   .current_leader_epoch = cases[i].current,
                                   .partition_max_bytes = 1 << 20,
                                   .version = 12,
                                   .replica_id = -1, /* a consumer */
                                   .last_fetched_epoch = cases[i].last_fetched};
        assert_int_equal(plan_fetch(f, log, &bud, &rd), cases[i].err); /* warm: just appended */
        assert_int_equal(rd.diverging_epoch, cases[i].div_epoch);
        assert_int_equal(rd.diverging_end_offset, cases[i].div_end);
        if (cases[i].first < 0) {
            assert_int_equal(rd.slice.bytes, 0);
        } else {
            assert_true(rd.slice.bytes > 0);
            assert_int_equal(rd.slice.first_batch_offset, cases[i].first);
        }
        gr_log_slice_release(&rd.slice);
    }
}

/* A Produce as the gate sees it: its logs, its entries, its engine; done appends one batch tagged `tag`. */
struct gated {
    struct fx *f;
    struct gr_append_gate gate;
    struct gr_cold cold;
    struct gr_log *logs[PARTS];
    struct gr_gate_entry entries[PARTS];
    uint32_t tag;
    int calls, err;
    int *order, *order_n; /* done order (tags) */
};

static void gated_append(struct gated *g)
{
    for (int i = 0; i < g->gate.count; i++) {
        assert_true(gr_log_append_ready(g->logs[i])); /* pinned and open: no open on this thread */
        size_t len;
        uint8_t *b = th_simple(1, 2000, g->tag, &len);
        struct gr_append_result res;
        assert_int_equal(gr_log_append(g->logs[i], b, len, -1, &res), 0);
        free(b);
    }
    gr_cold_unpin(&g->cold);
}

static void gated_done(struct gr_append_gate *gate, int err)
{
    struct gated *g = gate->ctx;
    g->calls++;
    g->err = err;
    g->order[(*g->order_n)++] = (int)g->tag;
    gated_append(g);
}

/* Enters the gate with partitions parts[0..n). Returns gr_gate_enter's result. */
static int gated_enter(struct fx *f, struct gated *g, const int *parts, int n, uint32_t tag, int *order,
                       int *order_n)
{
    *g = (struct gated){.f = f, .tag = tag, .order = order, .order_n = order_n};
    for (int i = 0; i < n; i++)
        g->logs[i] = gr_topic_log(f->topic, parts[i]);
    gr_cold_init(&g->cold, f->ps, f->pool, NULL, NULL);
    return gr_gate_enter(&g->gate, f->ps, &g->cold, g->logs, g->entries, n, gated_done, g);
}

/* The tag of the record at `offset` of partition p. */
static uint32_t tag_at(struct fx *f, int p, int64_t offset)
{
    struct th_seen *seen;
    struct gr_log *log = gr_topic_log(f->topic, p);
    int n = th_read_all(log, offset, gr_log_end_offset(log), &seen);
    assert_true(n >= 1);
    uint32_t tag = seen[0].tag;
    free(seen);
    return tag;
}

/* Produces queued behind a file reopen keep their order: A needs the pool to reopen p's file, B names p
   too and waits behind A (even though B itself needs nothing), C names another closed partition only and
   is not held by them; A runs before B, each done exactly once, and p's records are A's then B's. */
static void test_gate_order(void **state)
{
    struct fx *f = *state;
    int p = closed_partition(f);
    assert_true(p >= 0);
    int q = (p + 1) % PARTS, order[8], order_n = 0;
    int64_t end_p = gr_log_end_offset(gr_topic_log(f->topic, p));
    struct gated *a = calloc(3, sizeof *a), *b = a + 1, *c = a + 2;
    assert_int_equal(gated_enter(f, a, (int[]){p}, 1, 1, order, &order_n), 0); /* a round reopens p */
    assert_true(gr_cold_waiting(&a->cold));
    assert_int_equal(gated_enter(f, b, (int[]){q, p}, 2, 2, order, &order_n), 0); /* behind a on p */
    assert_false(gr_cold_waiting(&b->cold));                                      /* b waits, no round */
    assert_int_equal(gr_gate_queued(f->ps), 2);
    gr_iopool_drain(f->pool);
    assert_int_equal(a->calls, 1);
    assert_int_equal(b->calls, 1);
    assert_int_equal(a->err, 0);
    assert_int_equal(b->err, 0);
    assert_int_equal(order_n, 2);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    assert_int_equal(gr_gate_queued(f->ps), 0);
    assert_int_equal(tag_at(f, p, end_p), 1);
    assert_int_equal(tag_at(f, p, end_p + 1), 2);
    /* a Produce sharing no partition with the queued ones is not held by them */
    gr_store_fds_trim(f->store);
    p = closed_partition(f);
    assert_true(p >= 0);
    q = -1;
    for (int i = 0; i < PARTS && q < 0; i++)
        if (i != p && gr_log_append_ready(gr_topic_log(f->topic, i))) q = i;
    gr_cold_release(&a->cold);
    assert_int_equal(gated_enter(f, a, (int[]){p}, 1, 3, order, &order_n), 0);
    if (q >= 0) {
        assert_int_equal(gated_enter(f, c, (int[]){q}, 1, 4, order, &order_n), 1); /* at once, no done */
        gated_append(c);
        assert_int_equal(c->calls, 0);
    }
    gr_iopool_drain(f->pool);
    assert_int_equal(a->calls, 1);
    assert_int_equal(order[order_n - 1], 3);
    for (int i = 0; i < 3; i++)
        gr_cold_release(&a[i].cold);
    free(a);
}

/* A stop while a gated Produce waits for its reopen runs nothing. */
static void test_gate_stop(void **state)
{
    struct fx *f = *state;
    int p = closed_partition(f), order[4], order_n = 0;
    assert_true(p >= 0);
    struct gated *a = calloc(2, sizeof *a), *b = a + 1;
    assert_int_equal(gated_enter(f, a, (int[]){p}, 1, 1, order, &order_n), 0);
    assert_int_equal(gated_enter(f, b, (int[]){p}, 1, 2, order, &order_n), 0);
    gr_partitions_stop(f->ps);
    gr_iopool_drain(f->pool);
    assert_int_equal(a->calls + b->calls, 0);
    gr_cold_release(&a->cold);
    gr_cold_release(&b->cold);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_warm_done_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_then_done_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_runs_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_runs_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_pool_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_range_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_visible_bound, setup_durable, teardown),
        cmocka_unit_test_setup_teardown(test_list_offsets_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_end_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_diverging_epoch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_stop, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
