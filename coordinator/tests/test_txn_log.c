/*
 * test_txn_log.c: the coordinator's writes as __transaction_state batches (coordinator/txn_log.h) and the
 * load of a partition from those bytes: a transaction is driven through every durable step with each write
 * laid down as the batch Kafka writes (one uncompressed record, no producer id), then the partition's
 * bytes cut after every whole batch, and in the middle of the next (a torn tail), are loaded into a fresh
 * coordinator, whose state must be the one the log says; control batches and records that do not parse
 * are skipped.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/txn_log.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"

#define BUF_BYTES 65536
#define MAX_BATCHES 32

struct res {
    int calls;
    struct gr_txn_result r;
};

/* One __transaction_state partition's bytes (every id of these tests hashes to it). */
struct fake {
    int64_t now, next_pid;
    int32_t part;
    uint8_t buf[BUF_BYTES];
    size_t len;
    size_t ends[MAX_BATCHES]; /* byte end of each batch */
    int nbatches;
    struct gr_txn_write *writes[8];
    int nwrites;
    struct gr_txn_marker_job *jobs[8];
    int njobs;
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
    assert_int_equal(partition, f->part);
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_txn_log_batch(rec, f->now, &b, &len), 0);
    assert_true(f->len + len <= BUF_BYTES && f->nbatches < MAX_BATCHES);
    gr_batch_set_base_offset(b, f->nbatches); /* the log assigns offsets */
    memcpy(f->buf + f->len, b, len);
    free(b);
    f->len += len;
    f->ends[f->nbatches++] = f->len;
    f->writes[f->nwrites++] = w;
    return 0;
}

static void f_markers(void *ctx, const struct gr_txn_markers *m)
{
    struct fake *f = ctx;
    f->jobs[f->njobs++] = m->job;
}

static int16_t f_pid(void *ctx, int64_t *pid)
{
    *pid = ((struct fake *)ctx)->next_pid++;
    return 0;
}

static void f_done(void *ctx, void *waiter, const struct gr_txn_result *r)
{
    (void)ctx;
    ((struct res *)waiter)->calls++;
    ((struct res *)waiter)->r = *r;
}

static struct gr_txn_coord *make(struct fake *f, bool load_all)
{
    struct gr_txn_config cfg;
    gr_txn_config_defaults(&cfg);
    struct gr_txn_hooks h = {f, f_now, f_append, f_markers, f_pid, f_done, NULL};
    struct gr_txn_coord *tc = gr_txn_create(&cfg, &h);
    assert_non_null(tc);
    if (load_all) {
        gr_txn_load_begin(tc, f->part, 0);
        gr_txn_load_done(tc, f->part, 0);
    }
    return tc;
}

static void commit_write(struct fake *f)
{
    assert_true(f->nwrites > 0);
    struct gr_txn_write *w = f->writes[0];
    memmove(f->writes, f->writes + 1, (size_t)--f->nwrites * sizeof *f->writes);
    gr_txn_write_done(f->tc, w, 0);
}

static void markers_written(struct fake *f)
{
    assert_true(f->njobs > 0);
    struct gr_txn_marker_job *j = f->jobs[0];
    memmove(f->jobs, f->jobs + 1, (size_t)--f->njobs * sizeof *f->jobs);
    gr_txn_markers_done(f->tc, j, 0);
}

/* The batch of one write: magic 2, no compression, no producer id, one record with the key and value,
 * the write's timestamp; a tombstone has a null value. It passes the broker's own batch validation. */
static void test_batch_format(void **state)
{
    (void)state;
    struct gr_coord_record rec;
    struct gr_txn_log_value v = {1000, -1, -1, 0, 60000, GR_TXN_EMPTY, NULL, -1, 1700000000000LL, -1, 0};
    for (int tomb = 0; tomb < 2; tomb++) {
        assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), tomb ? NULL : &v, 1), 0);
        uint8_t *b;
        size_t len;
        assert_int_equal(gr_txn_log_batch(&rec, 1700000000123LL, &b, &len), 0);
        struct gr_batch_info info;
        const char *why = NULL;
        assert_int_equal(gr_batch_validate(b, len, &info, &why), 0);
        assert_int_equal(gr_batch_magic(b), 2);
        assert_int_equal(gr_batch_attributes(b), 0);
        assert_int_equal(gr_batch_producer_id(b), -1);
        assert_int_equal(gr_batch_record_count(b), 1);
        assert_int_equal(gr_batch_max_timestamp(b), 1700000000123LL);
        struct gr_record_iter it;
        assert_int_equal(gr_record_iter_init(&it, b, len), 0);
        struct gr_record r;
        assert_int_equal(gr_record_iter_next(&it, &r), 1);
        assert_int_equal(r.key.len, (int32_t)rec.key_len);
        assert_memory_equal(r.key.ptr, rec.key, rec.key_len);
        if (tomb) {
            assert_int_equal(r.value.len, -1);
        } else {
            assert_int_equal(r.value.len, (int32_t)rec.value_len);
            assert_memory_equal(r.value.ptr, rec.value, rec.value_len);
        }
        gr_record_iter_close(&it);
        free(b);
        gr_coord_records_free(&rec, 1);
    }
}

/* Loads the first `bytes` of f's partition into a fresh coordinator; returns it (via g). */
static int64_t load(struct fake *f, struct fake *g, size_t bytes, int64_t *count)
{
    g->part = f->part;
    g->now = f->now;
    g->next_pid = 5000;
    g->tc = make(g, false);
    gr_txn_load_begin(g->tc, g->part, 1);
    int64_t next = gr_txn_log_replay(g->tc, g->part, f->buf, bytes, 0, count);
    gr_txn_load_done(g->tc, g->part, 1);
    return next;
}

/* The states the log holds after each batch of the commit below. */
static const enum gr_txn_state after_batch[] = {GR_TXN_EMPTY, GR_TXN_ONGOING, GR_TXN_PREPARE_COMMIT,
                                                GR_TXN_COMPLETE_COMMIT, GR_TXN_EMPTY};

/* A transaction's batches, cut after each one and inside the next: the load applies the whole batches
 * only (the offset it returns is the next batch's), the state is the last whole batch's, a PrepareCommit
 * goes on to its markers; loading in two slices (from = the first slice's end) gives the same state. */
static void test_load_every_prefix(void **state)
{
    (void)state;
    struct fake f = {.now = 1700000000000LL, .next_pid = 1000};
    f.part = gr_txn_partition_for(gr_str_c("txn"), 50);
    f.tc = make(&f, true);
    struct res r = {0};
    gr_txn_init_producer_id(f.tc, &r, gr_str_c("txn"), 60000, -1, -1);
    commit_write(&f);
    const struct gr_txn_tp tp = {gr_str_c("t"), 0};
    gr_txn_add_partitions(f.tc, &r, gr_str_c("txn"), 1000, 0, &tp, 1);
    commit_write(&f);
    gr_txn_end(f.tc, &r, gr_str_c("txn"), 1000, 0, true);
    commit_write(&f);
    markers_written(&f);
    commit_write(&f);
    f.now += GR_TXN_ID_EXPIRATION_MS + GR_TXN_REMOVE_EXPIRED_INTERVAL_MS;
    gr_txn_tick(f.tc); /* the tombstone */
    commit_write(&f);
    assert_int_equal(f.nbatches, 5);
    for (int k = 0; k <= f.nbatches; k++) {
        size_t whole = k ? f.ends[k - 1] : 0;
        size_t cuts[2] = {whole, k < f.nbatches ? whole + (f.ends[k] - whole) / 2 : whole};
        for (int c = 0; c < 2; c++) {
            struct fake g = {0};
            int64_t count = 0;
            assert_int_equal(load(&f, &g, cuts[c], &count), k);
            assert_int_equal(count, k);
            struct gr_txn_info i;
            int16_t err = gr_txn_describe(g.tc, gr_str_c("txn"), &i);
            if (k == 0 || k == 5) {
                assert_int_equal(err, GR_ERR_TRANSACTIONAL_ID_NOT_FOUND);
            } else {
                assert_int_equal(err, 0);
                assert_int_equal(i.state, after_batch[k - 1]);
                assert_int_equal(i.producer_id, 1000);
                assert_int_equal(g.njobs, k == 3 ? 1 : 0); /* PrepareCommit: markers again */
            }
            gr_txn_destroy(g.tc);
        }
    }
    /* two slices */
    struct fake g = {.part = f.part, .now = f.now, .next_pid = 5000};
    g.tc = make(&g, false);
    gr_txn_load_begin(g.tc, g.part, 1);
    int64_t count = 0;
    int64_t next = gr_txn_log_replay(g.tc, g.part, f.buf, f.ends[2], 0, &count);
    assert_int_equal(next, 3);
    assert_int_equal(gr_txn_log_replay(g.tc, g.part, f.buf, f.ends[3], next, &count), 4);
    assert_int_equal(count, 4);
    gr_txn_load_done(g.tc, g.part, 1);
    struct gr_txn_info i;
    assert_int_equal(gr_txn_describe(g.tc, gr_str_c("txn"), &i), 0);
    assert_int_equal(i.state, GR_TXN_COMPLETE_COMMIT);
    gr_txn_destroy(g.tc);
    gr_txn_destroy(f.tc);
}

/* A control batch (a marker someone wrote into the partition) is skipped; a record whose key does not
 * parse is skipped and the next batch still applies. */
static void test_load_skips(void **state)
{
    (void)state;
    int32_t part = gr_txn_partition_for(gr_str_c("txn"), 50);
    uint8_t buf[4096];
    size_t len = 0;
    struct gr_txn_log_value v1 = {7, -1, -1, 0, 1000, GR_TXN_EMPTY, NULL, -1, 10, -1, 0};
    struct gr_txn_log_value v2 = {7, -1, -1, 3, 1000, GR_TXN_COMPLETE_ABORT, NULL, 0, 20, 15, 0};
    const struct gr_txn_log_value *vals[] = {&v1, &v2, NULL, &v2};
    for (int k = 0; k < 4; k++) {
        struct gr_coord_record rec;
        if (vals[k]) {
            assert_int_equal(gr_txn_log_record(&rec, gr_str_c("txn"), vals[k], 1), 0);
        } else { /* a key of one byte */
            rec = (struct gr_coord_record){malloc(1), 1, NULL, 0};
            rec.key[0] = 0;
        }
        uint8_t *b;
        size_t blen;
        assert_int_equal(gr_txn_log_batch(&rec, 100, &b, &blen), 0);
        gr_batch_set_base_offset(b, k);
        if (k == 1) {                       /* v2 as a control batch first: must not apply */
            b[22] |= GR_BATCH_ATTR_CONTROL; /* attributes: int16 at offset 21, low byte at 22 */
            gr_batch_crc_store(b, blen);
        }
        memcpy(buf + len, b, blen);
        len += blen;
        free(b);
        gr_coord_records_free(&rec, 1);
    }
    struct fake g = {.part = part, .now = 100, .next_pid = 1};
    g.tc = make(&g, false);
    gr_txn_load_begin(g.tc, part, 0);
    int64_t count = 0;
    /* replay up to the control batch and the bad key only: still Empty */
    size_t pos = 0, upto = 0;
    const uint8_t *b;
    size_t blen;
    for (int k = 0; k < 3 && gr_batch_next(buf, len, &pos, &b, &blen) == 1; k++)
        upto = pos;
    assert_int_equal(gr_txn_log_replay(g.tc, part, buf, upto, 0, &count), 3);
    assert_int_equal(count, 1);
    struct gr_txn_info i;
    gr_txn_load_done(g.tc, part, 0);
    assert_int_equal(gr_txn_describe(g.tc, gr_str_c("txn"), &i), 0);
    assert_int_equal(i.state, GR_TXN_EMPTY);
    gr_txn_load_begin(g.tc, part, 1);
    count = 0;
    assert_int_equal(gr_txn_log_replay(g.tc, part, buf, len, 0, &count), 4);
    assert_int_equal(count, 2);
    gr_txn_load_done(g.tc, part, 1);
    assert_int_equal(gr_txn_describe(g.tc, gr_str_c("txn"), &i), 0);
    assert_int_equal(i.state, GR_TXN_COMPLETE_ABORT);
    assert_int_equal(i.producer_epoch, 3);
    gr_txn_destroy(g.tc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_format),
        cmocka_unit_test(test_load_every_prefix),
        cmocka_unit_test(test_load_skips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
