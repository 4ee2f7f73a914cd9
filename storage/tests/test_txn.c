/*
 * test_txn.c: transactions in one partition log (issue #21, slice E), each against Kafka 4.x's
 * ProducerAppendInfo / ProducerStateManager / UnifiedLog / TransactionIndex behaviour: a transactional batch
 * opens its producer's transaction, an end-transaction marker (gr_log_write_marker) closes it with the
 * epoch checks of appendEndTxnMarker (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED), a
 * non-transactional batch while it is open is INVALID_TXN_STATE; the first unstable offset with interleaved
 * producers, held by completed transactions until the high watermark passes their marker and raised to the
 * log start offset; the aborted-transaction index (.txnindex, 34-byte entries) with its last stable offset,
 * an abort spanning segments, collection with Kafka's stop rule, truncation, a clean restart, a kill -9
 * (copy of a running store: the index rebuilt by recovery's replay), crashes at many I/O points (the
 * storage fault shim's crash mode), a follower learning the same from the batches it copies, and
 * producer.id.expiration.ms never expiring a producer with an open transaction.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/time.h"
#include "storage/internal.h"
#include "storage/lag.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_log *log;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    th_flush_hook(&f->cfg);
    th_flush_reset();
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"1000"};
    assert_int_equal(gr_store_topic_create(f->store, "t", 1, k, v, 1, &t), 0);
    f->log = gr_topic_log(t, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (f->store) gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

static void reopen(struct fx *f)
{
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "t", 1), 0);
    assert_non_null(f->log);
}

/* Appends `count` records of pid/epoch from sequence seq (transactional or not); returns the result. */
static int send(struct gr_log *log, int64_t pid, int16_t epoch, int32_t seq, int32_t count, bool txn,
                int64_t *base)
{
    static uint32_t tag;
    struct th_batch_spec s = {.count = count,
                              .ts0 = 1700000000000 + tag,
                              .ts_step = 1,
                              .tag = tag++,
                              .value_bytes = 10,
                              .producer_id = pid,
                              .producer_epoch = epoch,
                              .base_sequence = seq,
                              .transactional = txn};
    size_t len;
    uint8_t *b = th_batch(&s, &len);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    gr_store_quiesce(log->store);
    if (err == 0 && base) *base = res.base_offset;
    return err;
}

static int64_t send_ok(struct gr_log *log, int64_t pid, int16_t epoch, int32_t seq, int32_t count, bool txn)
{
    int64_t base = -1, leo = gr_log_end_offset(log);
    assert_int_equal(send(log, pid, epoch, seq, count, txn, &base), 0);
    assert_int_equal(base, leo);
    return base;
}

/* A marker of transaction version `tv` (WriteTxnMarkers v2's TransactionVersion). */
static int marker_tv(struct gr_log *log, int64_t pid, int16_t epoch, int32_t coord, int type, int16_t tv,
                     int64_t *offset)
{
    struct gr_append_result res;
    int err = gr_log_write_marker(log, pid, epoch, coord, type, tv, 1700000000000, &res);
    gr_store_quiesce(log->store);
    if (err == 0 && offset) *offset = res.base_offset;
    return err;
}

static int marker(struct gr_log *log, int64_t pid, int16_t epoch, int32_t coord, int type, int64_t *offset)
{
    struct gr_append_result res;
    int err = gr_log_write_marker(log, pid, epoch, coord, type, 0, 1700000000000, &res);
    gr_store_quiesce(log->store);
    if (err == 0 && offset) *offset = res.base_offset;
    return err;
}

static int64_t marker_ok(struct gr_log *log, int64_t pid, int16_t epoch, int32_t coord, int type)
{
    int64_t off = -1, leo = gr_log_end_offset(log);
    assert_int_equal(marker(log, pid, epoch, coord, type, &off), 0);
    assert_int_equal(off, leo);
    assert_int_equal(gr_log_end_offset(log), leo + 1);
    return off;
}

static const struct gr_producer_entry *entry(struct gr_log *log, int64_t pid)
{
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(log), pid);
    assert_non_null(e);
    return e;
}

static int aborted(struct gr_log *log, int64_t from, int64_t upper, struct gr_aborted_txn *out, int cap)
{
    return gr_log_aborted_txns(log, from, upper, out, cap);
}

static void assert_atx(const struct gr_aborted_txn *t, int64_t pid, int64_t first, int64_t last, int64_t lso)
{
    assert_int_equal(t->producer_id, pid);
    assert_int_equal(t->first_offset, first);
    assert_int_equal(t->last_offset, last);
    assert_int_equal(t->last_stable_offset, lso);
}

/* The .txnindex of the segment at `base` in directory `dir`: its size (-1 absent) and first entry. */
static long txnindex_file(const char *dir, int64_t base, struct gr_aborted_txn *first)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/t-0/%020lld.txnindex", dir, (long long)base);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t b[GR_TXN_INDEX_ENTRY_BYTES];
    if (first && st.st_size >= GR_TXN_INDEX_ENTRY_BYTES) {
        assert_int_equal(pread(fd, b, sizeof(b), 0), (ssize_t)sizeof(b));
        assert_int_equal(gr_be16(b), 0); /* version 0 */
        *first = (struct gr_aborted_txn){.producer_id = (int64_t)gr_be64(b + 2),
                                         .first_offset = (int64_t)gr_be64(b + 10),
                                         .last_offset = (int64_t)gr_be64(b + 18),
                                         .last_stable_offset = (int64_t)gr_be64(b + 26)};
    }
    close(fd);
    return (long)st.st_size;
}

/* Base offset of the segment holding `offset`. */
static int64_t seg_base(struct gr_log *log, int64_t offset)
{
    return log->segs[gr_log_seg_index_for(log, offset)]->base_offset;
}

static void test_marker_closes_with_epoch_checks(void **state)
{
    struct fx *f = *state;
    assert_int_equal(send_ok(f->log, 1, 0, 0, 3, true), 0);
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, 0);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    /* ProducerAppendInfo.appendDataBatch: a non-transactional write while the transaction is open */
    assert_int_equal(send(f->log, 1, 0, 3, 1, false, NULL), GR_LOG_ERR_INVALID_TXN_STATE);
    assert_int_equal(send_ok(f->log, 1, 0, 3, 2, true), 3); /* the same transaction goes on */
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, 0);
    /* a marker below the producer's epoch: INVALID_PRODUCER_EPOCH, nothing written */
    send_ok(f->log, 2, 3, 0, 1, true);
    assert_int_equal(marker(f->log, 2, 2, 0, GR_CONTROL_COMMIT, NULL), GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_log_end_offset(f->log), 6);
    int64_t m = marker_ok(f->log, 1, 0, 5, GR_CONTROL_COMMIT);
    assert_int_equal(m, 6);
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, -1);
    assert_int_equal(entry(f->log, 1)->coordinator_epoch, 5);
    /* checkCoordinatorEpoch: a lower coordinator epoch is fenced, an equal one is not */
    assert_int_equal(marker(f->log, 1, 0, 4, GR_CONTROL_ABORT, NULL),
                     GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED);
    marker_ok(f->log, 1, 0, 5, GR_CONTROL_ABORT); /* an empty transaction: no index entry */
    /* a marker at a higher producer epoch bumps the entry's epoch (a fence's abort) */
    marker_ok(f->log, 1, 1, 5, GR_CONTROL_ABORT);
    assert_int_equal(entry(f->log, 1)->producer_epoch, 1);
    assert_int_equal(marker(f->log, 1, 0, 5, GR_CONTROL_ABORT, NULL), GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    struct gr_aborted_txn a[4];
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 4), 0);
    /* the committed transaction holds the first unstable offset until the high watermark passes its marker;
       producer 2's open transaction (at 5) then does */
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    gr_log_set_high_watermark(f->log, m);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    gr_log_set_high_watermark(f->log, m + 1);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 5);
    marker_ok(f->log, 2, 3, 0, GR_CONTROL_COMMIT);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1);
    /* a marker of a producer the partition never saw is accepted (an empty transaction) */
    marker_ok(f->log, 77, 0, 0, GR_CONTROL_ABORT);
    assert_int_equal(
        gr_log_write_marker(f->log, -1, 0, 0, GR_CONTROL_ABORT, 0, 0, &(struct gr_append_result){0}),
        -EINVAL);
}

/* The marker's transaction version picks checkProducerEpoch's rule (KIP-1228, Kafka 4.x ProducerAppendInfo):
   versions 0 and 1 refuse only an epoch below the producer's, so a marker at the data's own epoch closes the
   transaction; version 2 markers carry the epoch the coordinator bumped, so one at or below the producer's
   epoch is INVALID_PRODUCER_EPOCH (nothing written, the transaction stays open), except the same epoch once
   no transaction of the producer is open: a retried marker, written again (KAFKA-19999). */
static void test_marker_epoch_by_transaction_version(void **state)
{
    struct fx *f = *state;
    /* version 1: data at epoch 4, the marker at epoch 4 closes it; one at 3 is refused */
    send_ok(f->log, 1, 4, 0, 2, true);
    for (int16_t tv = 0; tv <= 1; tv++)
        assert_int_equal(marker_tv(f->log, 1, 3, 0, GR_CONTROL_COMMIT, tv, NULL),
                         GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    int64_t m1 = -1;
    assert_int_equal(marker_tv(f->log, 1, 4, 0, GR_CONTROL_COMMIT, 1, &m1), 0);
    assert_int_equal(m1, 2);
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, -1);
    assert_int_equal(entry(f->log, 1)->producer_epoch, 4);

    /* version 2: data at epoch 7; markers at 6 and at 7 are refused and change nothing */
    int64_t first = send_ok(f->log, 2, 7, 0, 3, true);
    int64_t leo = gr_log_end_offset(f->log);
    assert_int_equal(marker_tv(f->log, 2, 6, 0, GR_CONTROL_ABORT, 2, NULL),
                     GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(marker_tv(f->log, 2, 7, 0, GR_CONTROL_ABORT, 2, NULL),
                     GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(gr_log_end_offset(f->log), leo);
    assert_int_equal(entry(f->log, 2)->current_txn_first_offset, first);
    assert_int_equal(entry(f->log, 2)->producer_epoch, 7);
    /* the bumped epoch 8 closes it (an aborted transaction: one index entry) */
    int64_t m2 = -1;
    assert_int_equal(marker_tv(f->log, 2, 8, 0, GR_CONTROL_ABORT, 2, &m2), 0);
    assert_int_equal(m2, leo);
    assert_int_equal(entry(f->log, 2)->current_txn_first_offset, -1);
    assert_int_equal(entry(f->log, 2)->producer_epoch, 8);
    struct gr_aborted_txn a[2];
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 2), 1);
    assert_int_equal(a[0].producer_id, 2);
    assert_int_equal(a[0].first_offset, first);
    assert_int_equal(a[0].last_offset, m2);
    /* a retried version 2 marker at the same epoch, nothing open: written again, no second index entry */
    int64_t m3 = -1;
    assert_int_equal(marker_tv(f->log, 2, 8, 0, GR_CONTROL_ABORT, 2, &m3), 0);
    assert_int_equal(m3, m2 + 1);
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 2), 1);
    /* below it still refused at version 2 */
    assert_int_equal(marker_tv(f->log, 2, 7, 0, GR_CONTROL_ABORT, 2, NULL),
                     GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    /* the next transaction at epoch 8: a marker at 8 is refused while it is open (no retry any more), the
       coordinator's at 9 closes it; a late data batch at epoch 8 after that is refused (the zombie) */
    int64_t next = send_ok(f->log, 2, 8, 0, 1, true);
    assert_int_equal(marker_tv(f->log, 2, 8, 0, GR_CONTROL_COMMIT, 2, NULL),
                     GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(entry(f->log, 2)->current_txn_first_offset, next);
    assert_int_equal(marker_tv(f->log, 2, 9, 0, GR_CONTROL_COMMIT, 2, NULL), 0);
    assert_int_equal(entry(f->log, 2)->current_txn_first_offset, -1);
    assert_int_equal(send(f->log, 2, 8, 1, 1, true, NULL), GR_LOG_ERR_INVALID_PRODUCER_EPOCH);
    /* version 2 to a producer the partition never saw (no epoch yet): accepted */
    assert_int_equal(marker_tv(f->log, 3, 0, 0, GR_CONTROL_ABORT, 2, NULL), 0);
    /* the coordinator epoch check follows the epoch check at version 2 too */
    assert_int_equal(marker_tv(f->log, 3, 1, -1, GR_CONTROL_ABORT, 2, NULL),
                     GR_LOG_ERR_TRANSACTION_COORDINATOR_FENCED);
}

/* producer.id.expiration.ms (ProducerStateManager.isProducerExpired): a producer with an open transaction is
   never expired however silent; once its marker closed it, it expires as any other. */
static void test_open_txn_never_expires(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 1, 0, 0, 2, true);  /* transaction open */
    send_ok(f->log, 2, 0, 0, 1, false); /* idempotent only */
    int64_t far = INT64_MAX / 2;
    assert_int_equal(gr_log_expire_producers(f->log, far, 1), 1); /* only producer 2 */
    assert_null(gr_producer_state_find(gr_log_producer_state(f->log), 2));
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, 0); /* kept */
    marker_ok(f->log, 1, 0, 0, GR_CONTROL_COMMIT);
    assert_int_equal(gr_log_expire_producers(f->log, far, 1), 1);
    assert_null(gr_producer_state_find(gr_log_producer_state(f->log), 1));
}

/* Three producers interleaved: P1 and P2 transactional, P3 idempotent only. */
static void test_interleaved_producers(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 1, 0, 0, 3, true);  /* 0..2 */
    send_ok(f->log, 2, 0, 0, 2, true);  /* 3..4 */
    send_ok(f->log, 1, 0, 3, 2, true);  /* 5..6 */
    send_ok(f->log, 3, 0, 0, 2, false); /* 7..8 */
    assert_int_equal(marker_ok(f->log, 2, 0, 0, GR_CONTROL_ABORT), 9);
    /* P2's entry: its last stable offset is the first offset of P1's open transaction */
    struct gr_aborted_txn a[4];
    assert_int_equal(aborted(f->log, 0, 10, a, 4), 1);
    assert_atx(&a[0], 2, 3, 9, 0);
    assert_int_equal(marker_ok(f->log, 1, 0, 0, GR_CONTROL_COMMIT), 10);
    send_ok(f->log, 2, 0, 2, 1, true); /* 11: P2's next transaction */
    assert_int_equal(marker_ok(f->log, 2, 0, 0, GR_CONTROL_ABORT), 12);
    assert_int_equal(aborted(f->log, 0, 13, a, 4), 2);
    assert_atx(&a[1], 2, 11, 12, 13); /* no other open transaction: its marker + 1 */
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    gr_log_set_high_watermark(f->log, 10); /* P2's first abort (9) is below: P1's commit (10) still holds */
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    gr_log_set_high_watermark(f->log, 11);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 11);
    gr_log_set_high_watermark(f->log, 13);
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1);
    /* collection: lastOffset >= start and firstOffset < upper bound */
    assert_int_equal(aborted(f->log, 10, 13, a, 4), 1);
    assert_atx(&a[0], 2, 11, 12, 13);
    assert_int_equal(aborted(f->log, 0, 3, a, 4), 0);   /* both start at or past 3 */
    assert_int_equal(aborted(f->log, 0, 4, a, 4), 1);   /* the first one overlaps [0, 4) */
    assert_int_equal(aborted(f->log, 13, 13, a, 4), 0); /* both ended below 13 */
    assert_int_equal(aborted(f->log, 0, 13, a, 1), 2);  /* more than cap: the count, cap written */
}

/* An aborted transaction whose batches span three segments: its entry is in the marker's segment and a
   fetch from any of its offsets collects it; Kafka's stop rule; the file after a flush; a clean restart. */
static void test_abort_spanning_segments(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 5, 0, 0, 2, true); /* 0..1 */
    for (int i = 0; i < 12; i++) {
        send_ok(f->log, 6, 0, 5 * i, 5, false);
        send_ok(f->log, 5, 0, 2 + i, 1, true);
    }
    int64_t m = marker_ok(f->log, 5, 0, 3, GR_CONTROL_ABORT);
    assert_true(seg_base(f->log, m) > seg_base(f->log, 2));
    assert_true(gr_log_segment_count(f->log) >= 3);
    struct gr_aborted_txn a[4];
    int64_t end = gr_log_end_offset(f->log);
    for (int64_t from = 0; from <= m; from += 7) {
        assert_int_equal(aborted(f->log, from, end, a, 4), 1);
        assert_atx(&a[0], 5, 0, m, m + 1);
    }
    /* a fetch of the first segment alone (upper bound: the next segment's base) still learns of the abort
       whose marker lies in a later segment */
    assert_int_equal(aborted(f->log, 0, f->log->segs[1]->base_offset, a, 4), 1);
    assert_atx(&a[0], 5, 0, m, m + 1);
    /* a later abort whose last stable offset is past the upper bound stops the search there */
    int64_t p = send_ok(f->log, 7, 0, 0, 1, true);
    int64_t m2 = marker_ok(f->log, 7, 0, 0, GR_CONTROL_ABORT);
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 4), 2);
    assert_atx(&a[1], 7, p, m2, m2 + 1);
    assert_int_equal(aborted(f->log, 0, m + 1, a, 4), 1); /* stops at the first entry (lso m + 1) */
    /* roll past the marker and flush: the sealed segment's .txnindex is written in Kafka's format */
    int64_t mseg = seg_base(f->log, m);
    while (seg_base(f->log, gr_log_end_offset(f->log)) == mseg)
        send_ok(f->log, 8, 0, (int32_t)gr_log_end_offset(f->log), 5, false);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, gr_log_end_offset(f->log)), 0);
    gr_store_quiesce(f->store);
    struct gr_aborted_txn file;
    assert_int_equal(txnindex_file(f->dir, mseg, &file), 2 * GR_TXN_INDEX_ENTRY_BYTES);
    assert_atx(&file, 5, 0, m, m + 1);
    assert_int_equal(txnindex_file(f->dir, 0, NULL), -1); /* no entry, no file (as Kafka) */
    reopen(f);
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 4), 2);
    assert_atx(&a[0], 5, 0, m, m + 1);
    assert_atx(&a[1], 7, p, m2, m2 + 1);
}

/* The log start offset moved into an open transaction raises the first unstable offset to it. */
static void test_log_start_inside_open_txn(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 1, 0, 0, 3, true); /* 0..2, stays open */
    for (int i = 0; i < 4; i++)
        send_ok(f->log, 2, 0, 2 * i, 2, false); /* 3..10 */
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 11), 0);
    gr_log_set_high_watermark(f->log, 11);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    assert_int_equal(gr_log_delete_records(f->log, 5), 0);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 5);
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, 0); /* still open: never dropped */
    marker_ok(f->log, 1, 0, 0, GR_CONTROL_ABORT);
    struct gr_aborted_txn a[2];
    assert_int_equal(aborted(f->log, 5, gr_log_end_offset(f->log), a, 2), 1);
    assert_atx(&a[0], 1, 0, 11, 12);
    gr_log_set_high_watermark(f->log, 12);
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1);
}

/* Truncation drops the entries whose marker is at or past the cut, reopens the transaction the marker had
   closed, and rewrites the cut segment's .txnindex. */
static void test_truncation(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 1, 0, 0, 3, true);
    int64_t m1 = marker_ok(f->log, 1, 0, 0, GR_CONTROL_ABORT); /* 3 */
    send_ok(f->log, 2, 0, 0, 2, true);
    int64_t m2 = marker_ok(f->log, 2, 0, 0, GR_CONTROL_ABORT); /* 6 */
    int64_t mseg = seg_base(f->log, m2);
    while (seg_base(f->log, gr_log_end_offset(f->log)) == mseg)
        send_ok(f->log, 9, 0, (int32_t)gr_log_end_offset(f->log), 5, false);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, gr_log_end_offset(f->log)), 0);
    gr_store_quiesce(f->store);
    assert_int_equal(txnindex_file(f->dir, mseg, NULL), 2 * GR_TXN_INDEX_ENTRY_BYTES);
    assert_int_equal(gr_log_truncate_to(f->log, m2), 0);
    gr_store_quiesce(f->store);
    struct gr_aborted_txn a[4];
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 4), 1);
    assert_atx(&a[0], 1, 0, m1, m1 + 1);
    assert_int_equal(entry(f->log, 2)->current_txn_first_offset, 4); /* open again */
    /* P1's abort (3) holds the first unstable offset at 0 until the high watermark passes it */
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    assert_int_equal(gr_log_first_unstable_offset(f->log), 4);
    assert_int_equal(txnindex_file(f->dir, mseg, NULL), GR_TXN_INDEX_ENTRY_BYTES);
    /* a replay below an unchanged high watermark leaves no completed transaction holding the LSO back: P1's
       abort (3) and P2's reopened transaction at 4 are below the high watermark 6 */
    send_ok(f->log, 2, 0, 2, 1, true);
    marker_ok(f->log, 2, 0, 0, GR_CONTROL_COMMIT); /* 6..7 */
    gr_log_set_high_watermark(f->log, 8);
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1);
    assert_int_equal(gr_log_truncate_to(f->log, 7), 0); /* the commit goes: P2 open again at 4 */
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_high_watermark(f->log), 7);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 4);
    assert_int_equal(marker_ok(f->log, 2, 0, 0, GR_CONTROL_COMMIT), 7);
    gr_log_set_high_watermark(f->log, 8);
    assert_int_equal(gr_log_truncate_to(f->log, 8), 0); /* nothing to cut: nothing changes */
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1);
    send_ok(f->log, 9, 0, 1000, 1, false); /* 8 */
    gr_log_set_high_watermark(f->log, 9);
    assert_int_equal(gr_log_truncate_to(f->log, 8), 0); /* the replay completes P1 (3) and P2 (7) again */
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_high_watermark(f->log), 8);
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1); /* both below the high watermark 8 */
    assert_int_equal(gr_log_truncate_to(f->log, m1), 0);
    gr_store_quiesce(f->store);
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 4), 0);
    assert_int_equal(txnindex_file(f->dir, mseg, NULL), -1);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
    reopen(f);
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), a, 4), 0);
    assert_int_equal(entry(f->log, 1)->current_txn_first_offset, 0);
    assert_int_equal(gr_log_first_unstable_offset(f->log), 0);
}

/* kill -9 (a copy of the running store without the clean marker): recovery's replay rebuilds the entries of
   the segments it re-validates (never written to a file) and the open transactions. */
static void test_recovery_after_kill(void **state)
{
    struct fx *f = *state;
    send_ok(f->log, 1, 0, 0, 2, true);
    for (int i = 0; i < 10; i++) {
        send_ok(f->log, 2, 0, 3 * i, 3, true);
        marker_ok(f->log, 2, 0, 1, i % 2 ? GR_CONTROL_COMMIT : GR_CONTROL_ABORT);
    }
    send_ok(f->log, 3, 0, 0, 1, true); /* left open */
    struct gr_aborted_txn before[8], after[8];
    int n = aborted(f->log, 0, gr_log_end_offset(f->log), before, 8);
    assert_int_equal(n, 5);
    assert_int_equal(before[0].last_stable_offset, 0); /* P1's open transaction */
    int64_t fuo = gr_log_first_unstable_offset(f->log);
    assert_true(gr_log_segment_count(f->log) > 1);
    char copy[128], cmd[512];
    snprintf(copy, sizeof(copy), "%s-copy", f->dir);
    snprintf(cmd, sizeof(cmd), "cp -a %s %s && rm -f %s/.kafka_cleanshutdown %s/t-0/*.txnindex", f->dir, copy,
             copy, copy);
    assert_int_equal(system(cmd), 0);
    struct gr_store_config cfg = f->cfg;
    cfg.log_dir = copy;
    struct gr_store *s2;
    assert_int_equal(gr_store_open(&cfg, &s2), 0);
    struct gr_log *log2 = gr_topic_log(gr_store_topic_find(s2, "t", 1), 0);
    assert_int_equal(gr_log_end_offset(log2), gr_log_end_offset(f->log));
    assert_int_equal(aborted(log2, 0, gr_log_end_offset(log2), after, 8), n);
    assert_memory_equal(before, after, sizeof(before[0]) * (size_t)n);
    assert_int_equal(gr_log_first_unstable_offset(log2), fuo);
    assert_int_equal(entry(log2, 3)->current_txn_first_offset, entry(f->log, 3)->current_txn_first_offset);
    gr_store_close(s2);
    th_rmtree(copy);
    /* a clean restart keeps them too (files written at close) */
    reopen(f);
    assert_int_equal(aborted(f->log, 0, gr_log_end_offset(f->log), after, 8), n);
    assert_memory_equal(before, after, sizeof(before[0]) * (size_t)n);
    assert_int_equal(gr_log_first_unstable_offset(f->log), fuo);
}

/* The crash workload: transactions of two producers, aborts and commits, rolls and flushes; stops at the
   first refused append (the crash point reached). Returns the number of aborted entries it made. */
#define CRASH_ROUNDS 24
static void crash_workload(const struct gr_store_config *cfg, struct gr_aborted_txn *ref, int *nref)
{
    struct gr_store *store;
    *nref = 0;
    if (gr_store_open(cfg, &store) < 0) return;
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"1000"};
    if (gr_store_topic_create(store, "t", 1, k, v, 1, &t) == 0) {
        struct gr_log *log = gr_topic_log(t, 0);
        for (int i = 0; i < CRASH_ROUNDS; i++) {
            int64_t pid = 1 + i % 2;
            if (send(log, pid, 0, i / 2 * 4, 4, true, NULL) < 0) break;
            if (i % 3 != 2 && marker(log, pid, 0, 0, i % 4 ? GR_CONTROL_ABORT : GR_CONTROL_COMMIT, NULL) < 0)
                break;
            if (i % 5 == 4) gr_log_flush_async(log);
        }
        *nref = gr_log_aborted_txns(log, 0, INT64_MAX, ref, 64);
    }
    gr_store_close(store);
}

/* A crash at many I/O points (the storage fault shim's crash mode, as test_faults.c): after recovery the
   aborted-transaction entries are exactly those of the reference run whose marker survived, and a restart
   after that keeps them. */
static void test_crash_points(void **state)
{
    (void)state;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    char dir[64];
    struct gr_store_config cfg;
    struct gr_aborted_txn ref[64], got[64], junk[64];
    int nref = 0, njunk;
    th_tmpdir(dir, sizeof(dir));
    th_config(&cfg, dir);
    fault_install();
    fault_crash_track(dir);
    crash_workload(&cfg, ref, &nref);
    long total = fault_io_count();
    fault_uninstall();
    th_rmtree(dir);
    assert_true(nref >= 6);
    long step = total / 60 + 1, with_entries = 0;
    for (long iter = 0; iter < 2 * total; iter += step) {
        long point = iter % total + 1;
        th_tmpdir(dir, sizeof(dir));
        th_config(&cfg, dir);
        fault_install();
        fault_crash_track(dir);
        fault_crash_at(point);
        crash_workload(&cfg, junk, &njunk);
        fault_crash_apply((unsigned)iter, iter >= total);
        fault_uninstall();
        th_flush_reset();
        for (int round = 0; round < 2; round++) { /* the recovery, then a clean restart */
            struct gr_store *store;
            assert_int_equal(gr_store_open(&cfg, &store), 0);
            struct gr_topic *t = gr_store_topic_find(store, "t", 1);
            if (t) {
                struct gr_log *log = gr_topic_log(t, 0);
                int64_t end = gr_log_end_offset(log);
                int want = 0;
                while (want < nref && ref[want].last_offset < end)
                    want++;
                int n = gr_log_aborted_txns(log, 0, INT64_MAX, got, 64);
                if (n != want)
                    fail_msg("crash point %ld round %d: %d entries, want %d", point, round, n, want);
                assert_memory_equal(got, ref, sizeof(ref[0]) * (size_t)n);
                with_entries += n > 0;
            }
            gr_store_close(store);
        }
        th_rmtree(dir);
    }
    gr_log_set_level(GR_LOG_INFO);
    assert_true(with_entries > 0);
}

/* A follower copying the leader's batches (gr_log_append_replica) learns the same producer state, open
   transactions and aborted-transaction index. */
static void test_follower_learns(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t2;
    const char *k[] = {"segment.bytes"}, *v[] = {"1000"};
    assert_int_equal(gr_store_topic_create(f->store, "u", 1, k, v, 1, &t2), 0);
    struct gr_log *fl = gr_topic_log(t2, 0);
    send_ok(f->log, 1, 0, 0, 2, true);
    send_ok(f->log, 2, 0, 0, 2, true);
    marker_ok(f->log, 2, 0, 4, GR_CONTROL_ABORT);
    for (int i = 0; i < 8; i++)
        send_ok(f->log, 1, 0, 2 + 3 * i, 3, true);
    marker_ok(f->log, 1, 0, 4, GR_CONTROL_ABORT);
    send_ok(f->log, 3, 0, 0, 1, true); /* left open */
    int64_t next = 0, end = gr_log_end_offset(f->log);
    while (next < end) {
        struct gr_log_slice s;
        assert_int_equal(gr_log_read(f->log, next, 1 << 20, end, true, &s), 0);
        uint8_t *bytes = th_slice_bytes(&s);
        struct gr_append_result res;
        assert_int_equal(gr_log_append_replica(fl, bytes, (size_t)s.bytes, &res), 0);
        free(bytes);
        gr_log_slice_release(&s);
        gr_store_quiesce(f->store);
        next = gr_log_end_offset(fl);
    }
    struct gr_aborted_txn a[4], b[4];
    int n = aborted(f->log, 0, end, a, 4);
    assert_int_equal(n, 2);
    assert_int_equal(aborted(fl, 0, end, b, 4), n);
    assert_memory_equal(a, b, sizeof(a[0]) * (size_t)n);
    assert_int_equal(gr_log_first_unstable_offset(fl), gr_log_first_unstable_offset(f->log));
    assert_true(gr_producer_state_equal(gr_log_producer_state(f->log), gr_log_producer_state(fl)));
    assert_int_equal(entry(fl, 2)->coordinator_epoch, 4);
}

/* The end of the latest non-control batch (gr_log_data_end_offset) and the caught-up offset it gives
   (storage/lag.h): a commit marker after data leaves it at the data's end, so a group committed at the
   marker's offset has nothing to read and gr_log_lag reports 0 bytes and 0 seconds; a truncation lowers it
   to the new end and a marker appended after it leaves it there; a reopen sets it to the log end offset (the
   conservative bound); a follower's multi-batch append with a trailing marker ends it at the last data
   batch, and a marker-only append leaves it. */
static void test_data_end_offset(void **state)
{
    struct fx *f = *state;
    struct gr_topic *t2, *t3;
    assert_int_equal(gr_store_topic_create(f->store, "c", 1, NULL, NULL, 0, &t2), 0);
    assert_int_equal(gr_store_topic_create(f->store, "cf", 1, NULL, NULL, 0, &t3), 0);
    struct gr_log *l = gr_topic_log(t2, 0), *fl = gr_topic_log(t3, 0);
    assert_int_equal(gr_log_data_end_offset(l), 0);
    send_ok(l, 1, 0, 0, 5, true); /* 0..4 */
    assert_int_equal(gr_log_data_end_offset(l), 5);
    assert_int_equal(marker_ok(l, 1, 0, 0, GR_CONTROL_COMMIT), 5); /* the marker at 5, hw 6 */
    assert_int_equal(gr_log_data_end_offset(l), 5);
    assert_int_equal(gr_lag_caught_up(gr_log_data_end_offset(l), 6), 5);
    gr_log_set_high_watermark(l, 6);
    struct gr_log_lag v;
    int64_t now = gr_time_wall_ms();
    assert_int_equal(gr_log_lag(l, 5, now, &v), 0); /* caught up at the marker */
    assert_int_equal(v.bytes, 0);
    assert_true(v.seconds == 0);
    assert_int_equal(gr_log_lag(l, 6, now, &v), 0);
    assert_int_equal(v.bytes, 0);
    assert_int_equal(gr_log_lag(l, 4, now, &v), 0); /* one record left: its batch to the log end */
    assert_int_equal(v.bytes, l->segs[0]->size_bytes);
    /* The hw below the data's end (not yet replicated): the hw stands. */
    gr_log_set_high_watermark(l, 3);
    assert_int_equal(gr_log_lag(l, 3, now, &v), 0);
    assert_int_equal(v.bytes, 0);
    assert_int_equal(gr_log_lag(l, 2, now, &v), 0);
    assert_true(v.bytes > 0);
    gr_log_set_high_watermark(l, 6);
    send_ok(l, 3, 0, 0, 2, true); /* 6..7, left open */
    send_ok(l, 1, 0, 5, 3, true); /* 8..10 */
    assert_int_equal(marker_ok(l, 1, 0, 0, GR_CONTROL_ABORT), 11);
    assert_int_equal(gr_log_data_end_offset(l), 11);
    assert_int_equal(gr_log_truncate_to(l, 11), 0); /* the marker goes: data end unchanged */
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_data_end_offset(l), 11);
    assert_int_equal(gr_log_truncate_to(l, 9), 0); /* into P1's batch: cut at its start, 8 */
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_end_offset(l), 8);
    assert_int_equal(gr_log_data_end_offset(l), 8);
    assert_int_equal(marker_ok(l, 3, 0, 0, GR_CONTROL_COMMIT), 8); /* a marker only after the truncation */
    assert_int_equal(gr_log_data_end_offset(l), 8);
    /* A follower copies 0..8 in one append (data, marker, data, marker): it ends at the last data batch. */
    struct gr_log_slice sl;
    assert_int_equal(gr_log_read(l, 0, 1 << 20, 9, true, &sl), 0);
    uint8_t *bytes = th_slice_bytes(&sl);
    size_t nbytes = (size_t)sl.bytes;
    gr_log_slice_release(&sl);
    struct gr_append_result res;
    assert_int_equal(gr_log_append_replica(fl, bytes, nbytes, &res), 0);
    free(bytes);
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_end_offset(fl), 9);
    assert_int_equal(gr_log_data_end_offset(fl), 8);
    /* A marker-only buffer leaves it; a data batch after it moves it. */
    send_ok(l, 2, 0, 0, 2, true); /* 9..10 */
    assert_int_equal(marker_ok(l, 2, 0, 0, GR_CONTROL_COMMIT), 11);
    assert_int_equal(gr_log_read(l, 9, 1 << 20, 12, true, &sl), 0);
    bytes = th_slice_bytes(&sl);
    nbytes = (size_t)sl.bytes;
    gr_log_slice_release(&sl);
    size_t first = (size_t)gr_batch_total_bytes(bytes);
    assert_true(first < nbytes);
    assert_int_equal(gr_log_append_replica(fl, bytes, first, &res), 0); /* data 9..10 */
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_data_end_offset(fl), 11);
    assert_int_equal(gr_log_append_replica(fl, bytes + first, nbytes - first, &res), 0); /* marker 11 */
    free(bytes);
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_end_offset(fl), 12);
    assert_int_equal(gr_log_data_end_offset(fl), 11);
    assert_int_equal(gr_log_data_end_offset(l), 11);
    /* Reopen: the log end offset (batch attributes are not read at open), until the next data append. */
    gr_store_close(f->store);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    l = gr_topic_log(gr_store_topic_find(f->store, "c", 1), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "t", 1), 0);
    assert_int_equal(gr_log_end_offset(l), 12);
    assert_int_equal(gr_log_data_end_offset(l), 12);
    send_ok(l, 9, 0, 0, 1, false); /* 12 */
    assert_int_equal(gr_log_data_end_offset(l), 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_marker_closes_with_epoch_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marker_epoch_by_transaction_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_txn_never_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interleaved_producers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_spanning_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_start_inside_open_txn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovery_after_kill, setup, teardown),
        cmocka_unit_test(test_crash_points),
        cmocka_unit_test_setup_teardown(test_follower_learns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_end_offset, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
