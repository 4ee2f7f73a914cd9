/*
 * test_offsets_log.c: the coordinator on the real segment store: __consumer_offsets is created with
 * cleanup.policy=compact, commits are durable after the flusher's fsync, everything survives a close and
 * reopen (replay), and the bounded rewrite moves the log start offset without losing live keys.
 */

#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coordinator/offsets_log.h"
#include "storage/cleaner.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"

struct env {
    char dir[64];
    struct gr_store *store;
    struct gr_offsets_log *ol;
    struct gr_coordinator *c;
    struct gr_partitions *parts; /* the offsets partitions' waits (this test plays the owning thread) */
    int64_t mono;
};

static int64_t mono(void *ctx)
{
    return ((struct env *)ctx)->mono;
}
static int64_t wall(void *ctx)
{
    (void)ctx;
    return 1700000000000LL;
}
static int append(void *ctx, int32_t partition, const struct gr_coord_record *recs, int count, int64_t *end)
{
    struct env *e = ctx;
    return gr_offsets_log_append(e->ol, partition, recs, count, 1700000000000LL, end);
}
static int wait_committed(void *ctx, int32_t partition, int64_t end, struct gr_partition_waiter *w)
{
    struct env *e = ctx;
    gr_partition_wait_committed(gr_partition_get(e->parts, gr_offsets_log_log(e->ol, partition)), w, end);
    return 0;
}
static int append_txn(void *ctx, int32_t partition, const struct gr_coord_txn_write *w,
                      const struct gr_coord_record *recs, int count, int64_t *end)
{
    struct env *e = ctx;
    return gr_offsets_log_append_txn(e->ol, partition, w, recs, count, 1700000000000LL, end);
}
static void join_done(void *ctx, void *waiter, const struct gr_join_result *res)
{
    (void)ctx;
    *(int16_t *)waiter = res->error_code;
}
static void sync_done(void *ctx, void *waiter, const struct gr_sync_result *res)
{
    (void)ctx;
    *(int16_t *)waiter = res->error_code;
}

static void open_all(struct env *e)
{
    struct gr_store_config sc;
    gr_store_config_defaults(&sc);
    sc.log_dir = e->dir;
    assert_int_equal(gr_store_open(&sc, &e->store), 0);
    assert_int_equal(gr_offsets_log_open(e->store, 3, &e->ol), 0);
    struct gr_partitions_config pc = {e->store, true};
    assert_non_null(e->parts = gr_partitions_create(&pc));
    gr_offsets_log_set_partitions(e->ol, e->parts);
    struct gr_coord_config cfg;
    gr_coord_config_defaults(&cfg);
    cfg.offsets_partitions = gr_offsets_log_partitions(e->ol);
    struct gr_coord_hooks hooks = {e, mono, wall, append, join_done, sync_done, NULL, wait_committed};
    e->c = gr_coord_create(&cfg, &hooks);
    assert_non_null(e->c);
    gr_coord_set_append_txn(e->c, append_txn);
    assert_true(gr_offsets_log_load(e->ol, e->c) >= 0);
}

static void close_all(struct env *e)
{
    gr_coord_destroy(e->c);
    gr_partitions_destroy(e->parts);
    gr_offsets_log_close(e->ol);
    gr_store_close(e->store);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    strcpy(e->dir, "/tmp/gr-offsets-log-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    e->mono = 1000;
    open_all(e);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    close_all(e);
    nftw(e->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(e);
    return 0;
}

static int16_t commit(struct env *e, const char *group, const char *topic, int32_t partition, int64_t offset,
                      int32_t *wp, int64_t *we)
{
    struct gr_commit_partition cp = {partition, offset, 3, gr_str_c("meta"), -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_commit_params p = {gr_str_c(group), gr_str_c(""), GR_STR_NULL, -1, -1, 8, &ct, 1};
    gr_coord_commit(e->c, &p, wp, we);
    return cp.error_code;
}

static void wait_durable(struct env *e, int32_t partition, int64_t end)
{
    for (int i = 0; i < 500; i++) {
        int d = gr_offsets_log_durable(e->ol, partition, end);
        assert_true(d >= 0);
        if (d) return;
        usleep(10000);
    }
    fail_msg("offsets partition %d never became durable up to %lld", partition, (long long)end);
}

static int64_t fetch(struct env *e, const char *group, const char *topic, int32_t partition)
{
    int64_t off;
    int32_t epoch;
    struct gr_str md;
    if (!gr_coord_offset_get(e->c, gr_str_c(group), gr_str_c(topic), partition, &off, &epoch, &md)) return -1;
    assert_int_equal(epoch, 3);
    assert_int_equal(md.len, 4);
    return off;
}

static void test_topic_created_compacted(void **state)
{
    struct env *e = *state;
    struct gr_topic *t = gr_store_topic_find(e->store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    assert_non_null(t);
    assert_int_equal(gr_topic_partition_count(t), 3);
    assert_string_equal(gr_topic_config_get(t, "cleanup.policy"), "compact");
    assert_string_equal(gr_topic_config_get(t, "segment.bytes"), "104857600");
}

static void test_commit_durable_and_survives_restart(void **state)
{
    struct env *e = *state;
    int32_t wp;
    int64_t we;
    assert_int_equal(commit(e, "grp-a", "t", 0, 100, &wp, &we), 0);
    assert_int_equal(wp, gr_coord_partition(e->c, gr_str_c("grp-a")));
    assert_int_equal(we, 1);
    wait_durable(e, wp, we);
    assert_int_equal(commit(e, "grp-b", "t", 1, 200, &wp, &we), 0);
    assert_int_equal(commit(e, "grp-b", "t", 1, 201, &wp, &we), 0);
    wait_durable(e, wp, we);
    /* a consumer group through join/sync: its metadata is written too */
    int16_t jerr = -99, serr = -99;
    struct gr_join_protocol pr = {gr_str_c("range"), {(const uint8_t *)"m", 1}};
    struct gr_join_params jp = {
        .group_id = gr_str_c("cg"),
        .member_id = gr_str_c(""),
        .group_instance_id = gr_str_c("static-1"),
        .protocol_type = gr_str_c("consumer"),
        .client_id = gr_str_c("c"),
        .client_host = gr_str_c("/h"),
        .reason = GR_STR_NULL,
        .session_timeout_ms = 10000,
        .rebalance_timeout_ms = 10000,
        .protocols = &pr,
        .protocol_count = 1,
        .api_version = 5,
        .waiter = &jerr,
    };
    assert_int_equal(gr_coord_join(e->c, &jp), GR_COORD_PARKED);
    e->mono += 3000;
    gr_coord_tick(e->c);
    assert_int_equal(jerr, 0);
    struct gr_group *g = gr_coord_group_find(e->c, gr_str_c("cg"));
    char mid[128];
    strcpy(mid, gr_member_id(gr_group_member_at(g, 0)));
    struct gr_sync_assignment as = {gr_str_c(mid), {(const uint8_t *)"ASSIGN", 6}};
    struct gr_sync_params sp = {
        gr_str_c("cg"), gr_str_c(mid), gr_str_c("static-1"), GR_STR_NULL, GR_STR_NULL, 1, &as, 1, 3, &serr};
    /* the assignment is answered once its record is fsynced: the partition's flush completion wakes it (the
       test hands the completions over as the server's loop does; no timer is involved) */
    gr_coord_sync(e->c, &sp);
    for (int i = 0; i < 500 && serr == -99; i++) {
        usleep(10000);
        for (int32_t p = 0; p < gr_offsets_log_partitions(e->ol); p++)
            gr_partition_flushed(gr_partition_get(e->parts, gr_offsets_log_log(e->ol, p)));
    }
    assert_int_equal(serr, 0);

    close_all(e);
    open_all(e);
    assert_int_equal(fetch(e, "grp-a", "t", 0), 100);
    assert_int_equal(fetch(e, "grp-b", "t", 1), 201);
    g = gr_coord_group_find(e->c, gr_str_c("cg"));
    assert_non_null(g);
    assert_int_equal(gr_group_state(g), GR_GROUP_STABLE);
    assert_int_equal(gr_group_generation(g), 1);
    assert_string_equal(gr_member_id(gr_group_member_at(g, 0)), mid);
    assert_memory_equal(gr_member_assignment(gr_group_member_at(g, 0)).ptr, "ASSIGN", 6);
    /* the restarted static member rejoins without a rebalance */
    jerr = -99;
    assert_int_equal(gr_coord_join(e->c, &jp), GR_COORD_ANSWERED);
    assert_int_equal(jerr, 0);
    assert_int_equal(gr_group_state(g), GR_GROUP_STABLE);
}

/* __consumer_offsets is bounded by real compaction: after many commits of the same keys a cleaning keeps
   one record per key, and replay gives the same committed offsets. */
static void test_compaction_bounds_the_log(void **state)
{
    struct env *e = *state;
    struct gr_topic *t = gr_store_topic_find(e->store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    assert_non_null(t);
    const char *k[] = {"cleanup.policy", "segment.bytes"}, *v[] = {"compact", "2000"};
    assert_int_equal(gr_topic_config_set_all(e->store, t, k, v, 2), 0); /* small segments: rolls happen */
    int32_t wp = -1;
    int64_t we = -1;
    for (int i = 0; i < 300; i++) {
        assert_int_equal(commit(e, "busy", "t", i % 3, i, &wp, &we), 0);
        gr_store_quiesce(e->store); /* spare ready at the roll (storage/roll.c) */
    }
    assert_int_equal(commit(e, "busy", "u", 0, 77, &wp, &we), 0);
    wait_durable(e, wp, we);
    struct gr_log *log = gr_offsets_log_log(e->ol, wp);
    int64_t end_before = gr_log_end_offset(log), size_before = gr_log_size_bytes(log);
    assert_true(gr_log_segment_count(log) > 3);
    gr_log_set_high_watermark(log, end_before);
    struct gr_clean_stats st;
    assert_int_equal(gr_log_clean_now(log, 1700000000000LL, &st), 0);
    assert_int_equal(gr_log_end_offset(log), end_before); /* offsets unchanged */
    assert_true(gr_log_size_bytes(log) < size_before / 4);
    assert_true(st.records_kept < 40); /* the 4 live keys, plus what the active segment holds back */
    close_all(e);
    open_all(e);
    assert_int_equal(fetch(e, "busy", "t", 0), 297);
    assert_int_equal(fetch(e, "busy", "t", 1), 298);
    assert_int_equal(fetch(e, "busy", "t", 2), 299);
    assert_int_equal(fetch(e, "busy", "u", 0), 77);
}

static int16_t txn_commit(struct env *e, const char *group, int64_t pid, const char *topic, int32_t partition,
                          int64_t offset, int32_t *wp, int64_t *we)
{
    struct gr_commit_partition cp = {partition, offset, 3, gr_str_c("meta"), -99};
    struct gr_commit_topic ct = {gr_str_c(topic), &cp, 1};
    struct gr_txn_commit_params p = {gr_str_c(group), gr_str_c(""), GR_STR_NULL, -1, pid, 0, &ct, 1};
    gr_coord_txn_commit(e->c, &p, wp, we);
    return cp.error_code;
}

static int16_t stable(struct env *e, const char *group, const char *topic, int32_t partition, int64_t *off)
{
    int32_t epoch;
    struct gr_str md;
    return gr_coord_offset_fetch(e->c, gr_str_c(group), gr_str_c(topic), partition, true, off, &epoch, &md);
}

/* TxnOffsetCommit batches and markers through the offsets log (transactional batch, control batch), read
 * back by a restart's load: a committed transaction's offset is the group's, an aborted one's is not, an
 * open one stays pending (UNSTABLE_OFFSET_COMMIT) and completes after the load. */
static void test_transactional_batches_survive_restart(void **state)
{
    struct env *e = *state;
    int32_t wp;
    int64_t we, off;
    assert_int_equal(commit(e, "g", "t", 0, 5, &wp, &we), 0);
    assert_int_equal(txn_commit(e, "g", 1000, "t", 0, 9, &wp, &we), 0);
    assert_int_equal(txn_commit(e, "g", 1001, "t", 1, 19, &wp, &we), 0);
    assert_int_equal(gr_coord_txn_complete(e->c, wp, 1000, 0, 2, true, &we), 0);
    assert_int_equal(gr_coord_txn_complete(e->c, wp, 1001, 0, 2, false, &we), 0);
    assert_int_equal(txn_commit(e, "g", 1002, "t", 2, 29, &wp, &we), 0); /* left open */
    wait_durable(e, wp, we);
    /* the bytes: a transactional batch with the producer id, a control batch with the marker */
    struct gr_log *log = gr_offsets_log_log(e->ol, wp);
    struct gr_log_slice sl;
    assert_int_equal(gr_log_read(log, gr_log_start_offset(log), 1 << 20, gr_log_end_offset(log), true, &sl),
                     0);
    uint8_t *buf = malloc((size_t)sl.bytes);
    assert_int_equal(gr_offsets_log_read_slice(&sl, buf), 0);
    size_t pos = 0, blen;
    const uint8_t *b;
    int txn_batches = 0, markers = 0;
    while (gr_batch_next(buf, (size_t)sl.bytes, &pos, &b, &blen) == 1) {
        int16_t a = gr_batch_attributes(b);
        int64_t pid = (int64_t)gr_be64(b + GR_BATCH_OFF_PRODUCER_ID);
        if (a & GR_BATCH_ATTR_CONTROL) {
            assert_true(a & GR_BATCH_ATTR_TRANSACTIONAL);
            markers++;
        } else if (a & GR_BATCH_ATTR_TRANSACTIONAL) {
            assert_true(pid >= 1000 && pid <= 1002);
            txn_batches++;
        } else {
            assert_int_equal(pid, -1);
        }
    }
    assert_int_equal(txn_batches, 3);
    assert_int_equal(markers, 2);
    free(buf);
    gr_log_slice_release(&sl);

    close_all(e);
    open_all(e);
    assert_int_equal(stable(e, "g", "t", 0, &off), 0);
    assert_int_equal(off, 9);
    assert_int_equal(stable(e, "g", "t", 1, &off), 0);
    assert_int_equal(off, -1);
    assert_int_equal(stable(e, "g", "t", 2, &off), GR_ERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(gr_coord_txn_complete(e->c, wp, 1002, 0, 2, true, &we), 0);
    assert_int_equal(stable(e, "g", "t", 2, &off), 0);
    assert_int_equal(off, 29);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_topic_created_compacted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_durable_and_survives_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_bounds_the_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transactional_batches_survive_restart, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
