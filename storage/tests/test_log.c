/*
 * test_log.c: appends, reads across rolls, index and time-index lookups, KIP-74, upper bounds, offsets by
 * time (plain and compressed batches), max timestamp, LogAppendTime, leader epochs, clean reopen.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/time.h"
#include "storage/internal.h"
#include "storage/tests/helpers.h"

static void open_store(struct th_store_fx *f)
{
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
}

static void reopen(struct th_store_fx *f, const char *topic)
{
    gr_store_close(f->store);
    f->store = NULL;
    open_store(f);
    f->topic = gr_store_topic_find(f->store, topic, strlen(topic));
    assert_non_null(f->topic);
    f->log = gr_topic_log(f->topic, 0);
    assert_non_null(f->log);
}

static void create(struct th_store_fx *f, const char *name, const char *const *keys,
                   const char *const *values, int n)
{
    assert_int_equal(gr_store_topic_create(f->store, name, 1, keys, values, n, &f->topic), 0);
    f->log = gr_topic_log(f->topic, 0);
    assert_non_null(f->log);
}

/* Appends batch number `tag` of `count` records at timestamp ts; returns its base offset. */
static int64_t append(struct gr_log *log, int32_t count, int64_t ts, uint32_t tag)
{
    size_t len;
    uint8_t *b = th_simple(count, ts, tag, &len);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    assert_int_equal(err, 0);
    /* Lets a spare segment file asked for at half a roll limit be made before the next append, so that
       rolls happen where Kafka's do (a roll without a spare waits for one: storage/roll.c). */
    gr_store_quiesce(log->store);
    return res.base_offset;
}

static void test_append_read_across_rolls(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    const char *k[] = {"segment.bytes"}, *v[] = {"1000"};
    create(f, "t", k, v, 1);
    assert_int_equal(gr_log_end_offset(f->log), 0);
    for (uint32_t i = 0; i < 60; i++)
        assert_int_equal(append(f->log, 5, 1000 + i, i), (int64_t)i * 5);
    assert_int_equal(gr_log_end_offset(f->log), 300);
    assert_true(gr_log_segment_count(f->log) > 5);
    /* Segments are contiguous and each stays within segment.bytes. */
    for (int i = 0; i < f->log->seg_count; i++) {
        assert_true(f->log->segs[i]->size_bytes <= 1000);
        if (i + 1 < f->log->seg_count)
            assert_int_equal(f->log->segs[i]->next_offset, f->log->segs[i + 1]->base_offset);
    }
    struct th_seen *seen;
    int n = th_read_all(f->log, 0, INT64_MAX, &seen);
    assert_int_equal(n, 60);
    for (int i = 0; i < n; i++) {
        assert_int_equal(seen[i].base_offset, i * 5);
        assert_int_equal(seen[i].last_offset, i * 5 + 4);
        assert_int_equal(seen[i].tag, (uint32_t)i);
        assert_int_equal(seen[i].leader_epoch, 0);
        assert_int_equal(seen[i].max_timestamp, 1000 + i + 4);
    }
    free(seen);
    /* A read from inside a batch starts at that batch. */
    n = th_read_all(f->log, 123, INT64_MAX, &seen);
    assert_int_equal(n, 60 - 24);
    assert_int_equal(seen[0].base_offset, 120);
    free(seen);
    /* Files on disk in Kafka's naming (a segment made from a spare file gets its names in the flush its
       roll requested: storage/roll.c). */
    gr_store_quiesce(f->store);
    char path[256];
    snprintf(path, sizeof(path), "%s/t-0/00000000000000000000.log", f->dir);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof(path), "%s/t-0/%020lld.index", f->dir, (long long)f->log->segs[1]->base_offset);
    assert_int_equal(access(path, F_OK), 0);
    /* The same after a clean reopen. */
    reopen(f, "t");
    assert_int_equal(gr_log_end_offset(f->log), 300);
    n = th_read_all(f->log, 0, INT64_MAX, &seen);
    assert_int_equal(n, 60);
    assert_int_equal(seen[59].tag, 59);
    assert_int_equal(seen[0].leader_epoch, 0);
    free(seen);
    assert_int_equal(append(f->log, 1, 5000, 60), 300);
    n = th_read_all(f->log, 300, INT64_MAX, &seen);
    assert_int_equal(n, 1);
    assert_int_equal(seen[0].leader_epoch, 1); /* a new epoch per open */
    free(seen);
}

static void test_index_lookups_every_offset(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    const char *k[] = {"segment.bytes", "index.interval.bytes"}, *v[] = {"4000", "150"};
    create(f, "idx", k, v, 2);
    int64_t base[80];
    for (uint32_t i = 0; i < 80; i++)
        base[i] = append(f->log, (int32_t)(i % 4) + 1, 100 + i, i);
    int64_t leo = gr_log_end_offset(f->log);
    /* Indexes exist and point at batch starts. */
    int entries = 0;
    for (int s = 0; s < f->log->seg_count; s++)
        entries += f->log->segs[s]->idx_count;
    assert_true(entries > 10);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t off = 0; off < leo; off++) {
            int i = 0;
            while (i + 1 < 80 && base[i + 1] <= off)
                i++;
            struct gr_log_slice s;
            assert_int_equal(gr_log_read(f->log, off, 1, INT64_MAX, true, &s), 0);
            assert_int_equal(s.first_batch_offset, base[i]);
            uint8_t *bytes = th_slice_bytes(&s);
            assert_int_equal(gr_batch_base_offset(bytes), base[i]);
            assert_int_equal(s.bytes, gr_batch_total_bytes(bytes));
            free(bytes);
            gr_log_slice_release(&s);
        }
        reopen(f, "idx"); /* second pass: sealed indexes loaded from their files */
    }
}

static void test_kip74_and_bounds(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    create(f, "k", NULL, NULL, 0);
    for (uint32_t i = 0; i < 10; i++)
        append(f->log, 10, 1000, i); /* offsets 0..99 */
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, 0, 1, INT64_MAX, true, &s), 0);
    int64_t one = s.bytes;
    assert_true(one > 61);
    gr_log_slice_release(&s);
    /* KIP-74: without min_one a too-small max_bytes gives nothing; with it, the whole first batch. */
    assert_int_equal(gr_log_read(f->log, 0, one - 1, INT64_MAX, false, &s), 0);
    assert_int_equal(s.bytes, 0);
    assert_int_equal(s.fd, -1);
    assert_int_equal(gr_log_read(f->log, 0, one - 1, INT64_MAX, true, &s), 0);
    assert_int_equal(s.bytes, one);
    gr_log_slice_release(&s);
    /* max_bytes of 2.5 batches: two whole batches. */
    assert_int_equal(gr_log_read(f->log, 5, one * 5 / 2, INT64_MAX, false, &s), 0);
    assert_int_equal(s.bytes, 2 * one);
    assert_int_equal(s.first_batch_offset, 0);
    gr_log_slice_release(&s);
    /* Upper bound (high watermark) 35: batches 0..29 only; one inside the bound batch: nothing. */
    assert_int_equal(gr_log_read(f->log, 0, 1 << 20, 35, true, &s), 0);
    assert_int_equal(s.bytes, 3 * one);
    gr_log_slice_release(&s);
    assert_int_equal(gr_log_read(f->log, 30, 1 << 20, 35, true, &s), 0);
    assert_int_equal(s.bytes, 0);
    assert_int_equal(gr_log_read(f->log, 40, 1 << 20, 35, true, &s), 0); /* between HWM and LEO */
    assert_int_equal(s.bytes, 0);
    assert_int_equal(gr_log_read(f->log, 100, 1 << 20, INT64_MAX, true, &s), 0); /* at LEO */
    assert_int_equal(s.bytes, 0);
    assert_int_equal(gr_log_read(f->log, 101, 1 << 20, INT64_MAX, true, &s), -ERANGE);
    assert_int_equal(gr_log_read(f->log, -1, 1 << 20, INT64_MAX, true, &s), -ERANGE);
}

static void test_offsets_for_time(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    const char *k[] = {"segment.bytes"}, *v[] = {"2000"};
    create(f, "time", k, v, 1);
    /* Batch i: 4 records at 10000 + 100 i + {0, 10, 20, 30}. Codecs rotate. */
    enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_GZIP, GR_CODEC_SNAPPY, GR_CODEC_LZ4, GR_CODEC_ZSTD};
    for (uint32_t i = 0; i < 40; i++) {
        struct th_batch_spec spec = {.count = 4,
                                     .ts0 = 10000 + 100 * i,
                                     .ts_step = 10,
                                     .tag = i,
                                     .codec = codecs[i % 5],
                                     .producer_id = -1,
                                     .value_bytes = 30};
        size_t len;
        uint8_t *b = th_batch(&spec, &len);
        struct gr_append_result res;
        assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
        assert_int_equal(res.base_offset, 4 * i);
        free(b);
        gr_store_quiesce(f->store); /* the spare asked for at half the segment is ready at the roll */
    }
    assert_true(gr_log_segment_count(f->log) > 2);
    int64_t off, ts;
    int32_t epoch;
    for (int pass = 0; pass < 2; pass++) {
        /* Exact record timestamps, inside compressed batches too. */
        for (uint32_t i = 0; i < 40; i++) {
            for (int r = 0; r < 4; r++) {
                assert_int_equal(
                    gr_log_offset_for_time(f->log, 10000 + 100 * i + 10 * r, INT64_MAX, &off, &ts, &epoch),
                    0);
                assert_int_equal(off, 4 * i + r);
                assert_int_equal(ts, 10000 + 100 * i + 10 * r);
                assert_int_equal(epoch, 0); /* written in the first open's epoch */
            }
            /* Between records: the next one. Between batches: the next batch's first. */
            assert_int_equal(
                gr_log_offset_for_time(f->log, 10000 + 100 * i + 15, INT64_MAX, &off, &ts, &epoch), 0);
            assert_int_equal(off, 4 * i + 2);
            assert_int_equal(ts, 10000 + 100 * i + 20);
            if (i < 39) {
                assert_int_equal(
                    gr_log_offset_for_time(f->log, 10000 + 100 * i + 50, INT64_MAX, &off, &ts, &epoch), 0);
                assert_int_equal(off, 4 * (i + 1));
            }
        }
        assert_int_equal(gr_log_offset_for_time(f->log, 0, INT64_MAX, &off, &ts, &epoch), 0);
        assert_int_equal(off, 0);
        assert_int_equal(ts, 10000);
        assert_int_equal(gr_log_offset_for_time(f->log, 20000, INT64_MAX, &off, &ts, &epoch), -ENOENT);
        /* Nothing at/above the upper bound: batch 10 (offsets 40..43) is excluded by bound 42. */
        assert_int_equal(gr_log_offset_for_time(f->log, 11000, 42, &off, &ts, &epoch), -ENOENT);
        assert_int_equal(gr_log_offset_for_time(f->log, 10900, 42, &off, &ts, &epoch), 0);
        assert_int_equal(off, 36);
        /* Max timestamp: the last record of the last batch; below a bound: of the last batch below it. */
        assert_int_equal(gr_log_max_timestamp(f->log, INT64_MAX, &off, &ts, &epoch), 0);
        assert_int_equal(off, 159);
        assert_int_equal(ts, 10000 + 3900 + 30);
        assert_int_equal(gr_log_max_timestamp(f->log, 42, &off, &ts, &epoch), 0);
        assert_int_equal(off, 39);
        assert_int_equal(ts, 10930);
        reopen(f, "time");
    }
}

static void test_max_timestamp_first_of_equals(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    create(f, "mt", NULL, NULL, 0);
    /* Timestamps not monotonic: the maximum 9000 appears in batch 1 (record 2) and again in batch 3. */
    int64_t ts0[] = {1000, 8980, 500, 9000, 700};
    int64_t step[] = {1, 10, 1, 0, 1};
    for (int i = 0; i < 5; i++) {
        struct th_batch_spec spec = {.count = 3,
                                     .ts0 = ts0[i],
                                     .ts_step = step[i],
                                     .tag = (uint32_t)i,
                                     .codec = i == 1 ? GR_CODEC_LZ4 : GR_CODEC_NONE,
                                     .producer_id = -1};
        size_t len;
        uint8_t *b = th_batch(&spec, &len);
        struct gr_append_result res;
        assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
        free(b);
    }
    int64_t off, ts;
    int32_t epoch;
    assert_int_equal(gr_log_max_timestamp(f->log, INT64_MAX, &off, &ts, &epoch), 0);
    assert_int_equal(ts, 9000);
    assert_int_equal(off, 5); /* batch 1 = offsets 3..5, record 2 carries 9000 */
    assert_int_equal(epoch, 0);
    /* First record with timestamp >= 600: offset 1? no: batch 0 has 1000..1002 >= 600, offset 0. */
    assert_int_equal(gr_log_offset_for_time(f->log, 600, INT64_MAX, &off, &ts, &epoch), 0);
    assert_int_equal(off, 0);
    assert_int_equal(ts, 1000);
    /* >= 8995: batch 1 record 2 (9000) comes before batch 3. */
    assert_int_equal(gr_log_offset_for_time(f->log, 8995, INT64_MAX, &off, &ts, &epoch), 0);
    assert_int_equal(off, 5);
}

static void test_log_append_time(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    create(f, "lat", NULL, NULL, 0);
    append(f->log, 2, 100, 0);
    size_t len;
    uint8_t *b = th_simple(3, 100, 1, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, 777777, &res), 0);
    free(b);
    assert_int_equal(res.base_offset, 2);
    assert_int_equal(res.log_append_time_ms, 777777);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, 2, 1 << 20, INT64_MAX, true, &s), 0);
    uint8_t *bytes = th_slice_bytes(&s);
    assert_int_equal(gr_batch_max_timestamp(bytes), 777777);
    assert_true(gr_batch_attributes(bytes) & GR_BATCH_ATTR_LOG_APPEND_TIME);
    assert_int_equal(gr_batch_crc(bytes), gr_batch_crc_compute(bytes, (size_t)s.bytes)); /* recomputed */
    assert_int_equal(gr_batch_validate_ex(bytes, (size_t)s.bytes, 0, NULL, NULL), 0);
    free(bytes);
    gr_log_slice_release(&s);
    int64_t off, ts;
    int32_t epoch;
    assert_int_equal(gr_log_offset_for_time(f->log, 200, INT64_MAX, &off, &ts, &epoch), 0);
    assert_int_equal(off, 2); /* every record of a LogAppendTime batch carries the append time */
    assert_int_equal(ts, 777777);
}

static void test_size_limits(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    const char *k[] = {"max.message.bytes"}, *v[] = {"200"};
    create(f, "small", k, v, 1);
    size_t len;
    uint8_t *b = th_simple(20, 0, 0, &len);
    assert_true(len > 200);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), -EMSGSIZE);
    assert_int_equal(gr_log_append(f->log, b, 60, -1, &res), -EINVAL);
    assert_int_equal(gr_log_append(f->log, b, len - 1, -1, &res), -EINVAL);
    free(b);
    assert_int_equal(gr_log_end_offset(f->log), 0);
    b = th_simple(1, 0, 0, &len);
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
}

static void read_file(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

static void test_leader_epochs(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    create(f, "ep", NULL, NULL, 0);
    assert_int_equal(gr_log_leader_epoch(f->log), 0);
    append(f->log, 10, 0, 0);
    reopen(f, "ep");
    assert_int_equal(gr_log_leader_epoch(f->log), 1);
    char path[256], buf[256];
    snprintf(path, sizeof(path), "%s/ep-0/leader-epoch-checkpoint", f->dir);
    read_file(path, buf, sizeof(buf));
    assert_string_equal(buf, "0\n1\n0 0\n"); /* an open writes no epoch that no batch carries yet */
    reopen(f, "ep"); /* no appends in epoch 1: the next open derives epoch 1 again (never a lower one) */
    assert_int_equal(gr_log_leader_epoch(f->log), 1);
    append(f->log, 5, 0, 1);
    gr_store_quiesce(f->store); /* the first batch of an epoch queues the checkpoint write */
    read_file(path, buf, sizeof(buf));
    assert_string_equal(buf, "0\n2\n0 0\n1 10\n");
    reopen(f, "ep");
    assert_int_equal(gr_log_leader_epoch(f->log), 2);
    append(f->log, 1, 0, 2);
    gr_store_quiesce(f->store);
    read_file(path, buf, sizeof(buf));
    assert_string_equal(buf, "0\n3\n0 0\n1 10\n2 15\n");
    int64_t end;
    int32_t e;
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 0, &end, &e), 0);
    assert_int_equal(end, 10);
    assert_int_equal(e, 0);
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 1, &end, &e), 0);
    assert_int_equal(end, 15);
    assert_int_equal(e, 1);
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 2, &end, &e), 0);
    assert_int_equal(end, 16);
    assert_int_equal(e, 2);
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 3, &end, &e), -ENOENT);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 9), 0);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 10), 1);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 15), 2);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 16), -1);
}

/* Cluster mode: the controller's leader epoch taken by the log (gr_log_set_leader_epoch): new batches carry
 * it, the cache gets an entry at the log end offset, a lower epoch changes nothing, and a second raise before
 * any batch replaces the entry no batch carries. */
static void test_set_leader_epoch(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    create(f, "se", NULL, NULL, 0);
    append(f->log, 10, 0, 0);
    assert_int_equal(gr_log_set_leader_epoch(f->log, 5), 0);
    assert_int_equal(gr_log_leader_epoch(f->log), 5);
    assert_int_equal(gr_log_set_leader_epoch(f->log, 3), 0); /* lower: kept */
    assert_int_equal(gr_log_leader_epoch(f->log), 5);
    assert_int_equal(gr_log_set_leader_epoch(f->log, 7), 0); /* no batch in epoch 5: its entry becomes 7 */
    assert_int_equal(gr_log_leader_epoch(f->log), 7);
    append(f->log, 2, 0, 1);
    gr_store_quiesce(f->store);
    char path[256], buf[256];
    snprintf(path, sizeof(path), "%s/se-0/leader-epoch-checkpoint", f->dir);
    read_file(path, buf, sizeof(buf));
    assert_string_equal(buf, "0\n2\n0 0\n7 10\n");
    assert_int_equal(gr_log_epoch_for_offset(f->log, 9), 0);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 10), 7);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 11), 7);
    int64_t end;
    int32_t e;
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 5, &end, &e), 0); /* no batch: epoch 0's end */
    assert_int_equal(e, 0);
    assert_int_equal(end, 10);
}

static void test_group_commit_flush(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    create(f, "fl", NULL, NULL, 0);
    for (uint32_t i = 0; i < 20; i++)
        append(f->log, 1, 0, i);
    assert_int_equal(gr_log_durable_offset(f->log), 0);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 20), 0);
    assert_int_equal(gr_log_durable_offset(f->log), 20);
    assert_int_equal(f->log->recovery_point, 20);
    /* flush.messages = 5: every fifth record triggers a flush by itself. */
    const char *k[] = {"flush.messages"}, *v[] = {"5"};
    assert_int_equal(gr_topic_config_set_all(f->store, f->topic, k, v, 1), 0);
    for (uint32_t i = 0; i < 5; i++)
        append(f->log, 1, 0, 20 + i);
    assert_int_equal(th_wait_durable(f->log, 25), 0);
    /* flush.ms = 50: a lone append becomes durable within the deadline without any request. */
    const char *k2[] = {"flush.ms"}, *v2[] = {"50"};
    assert_int_equal(gr_topic_config_set_all(f->store, f->topic, k2, v2, 1), 0);
    append(f->log, 1, 0, 25);
    assert_int_equal(th_wait_durable(f->log, 26), 0);
    assert_int_equal(gr_log_durable_offset(f->log), 26);
}

static void test_roll_triggers(void **state)
{
    struct th_store_fx *f = *state;
    open_store(f);
    /* A full index: segment.index.bytes 24 holds 3 offset entries (and 2 time entries): roll. */
    const char *k[] = {"segment.index.bytes", "index.interval.bytes"}, *v[] = {"24", "1"};
    create(f, "ix", k, v, 2);
    for (uint32_t i = 0; i < 12; i++)
        append(f->log, 1, 1000 + i, i);
    assert_true(gr_log_segment_count(f->log) >= 4);
    for (int i = 0; i < f->log->seg_count; i++)
        assert_true(f->log->segs[i]->idx_count <= 3);
    struct th_seen *seen;
    assert_int_equal(th_read_all(f->log, 0, INT64_MAX, &seen), 12);
    free(seen);

    /* segment.ms against record timestamps (Kafka's rule): a batch 2 s after the segment's first. */
    const char *k2[] = {"segment.ms"}, *v2[] = {"1000"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "tm", 1, k2, v2, 1, &t), 0);
    struct gr_log *log = gr_topic_log(t, 0);
    append(log, 1, 10000, 0);
    append(log, 1, 10900, 1);
    assert_int_equal(gr_log_segment_count(log), 1);
    append(log, 1, 12000, 2);
    assert_int_equal(gr_log_segment_count(log), 2);
    assert_int_equal(log->segs[1]->base_offset, 2);

    /* Relative offsets must fit 4 bytes: a batch whose last offset would be > base + 2^31-1 rolls. */
    assert_int_equal(gr_store_topic_create(f->store, "big", 1, NULL, NULL, 0, &t), 0);
    log = gr_topic_log(t, 0);
    size_t len;
    uint8_t *b = th_simple(1, 0, 0, &len);
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(INT32_MAX - 10));
    gr_batch_crc_store(b, len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    assert_int_equal(gr_log_end_offset(log), (int64_t)INT32_MAX - 9);
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, 20);
    gr_batch_crc_store(b, len);
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    assert_int_equal(res.base_offset, (int64_t)INT32_MAX - 9);
    assert_int_equal(gr_log_segment_count(log), 2);
    assert_int_equal(log->segs[1]->base_offset, (int64_t)INT32_MAX - 9);
    free(b);
    reopen(f, "big");
    assert_int_equal(gr_log_end_offset(f->log), (int64_t)INT32_MAX + 12);
}

/* Appends one record whose header says max timestamp `max_ts` (the record itself at ts 10000, CRC valid),
   as a batch from before Produce corrected headers, or from a crafted segment, would. */
static void append_header_ts(struct gr_log *log, int64_t max_ts)
{
    size_t len;
    uint8_t *b = th_simple(1, 10000, 0, &len);
    gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_ts);
    gr_batch_crc_store(b, len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
    gr_store_quiesce(log->store);
}

/* Header timestamps at INT64_MIN / INT64_MAX: segment.ms and retention use saturating differences (no
   signed overflow: the sanitizer build aborts on one), so a header far in the past does not roll and a
   retention pass at any clock value neither overflows nor deletes what is not expired. */
static void test_extreme_header_timestamps(void **state)
{
    struct th_store_fx *f = *state;
    th_flush_hook(&f->cfg);
    open_store(f);
    const char *k[] = {"segment.ms", "retention.ms"}, *v[] = {"1000", "60000"};
    create(f, "ext", k, v, 2);
    append(f->log, 1, 10000, 0);
    append(f->log, 1, 10900, 1); /* past half of segment.ms: the next segment's file is made ahead */
    append(f->log, 1, 12000, 2); /* segment.ms passed: roll; rolling timestamp 12000 */
    assert_int_equal(gr_log_segment_count(f->log), 2);
    append_header_ts(f->log, INT64_MIN); /* INT64_MIN - 12000 saturates: far in the past, no roll */
    assert_int_equal(gr_log_segment_count(f->log), 2);
    append_header_ts(f->log, INT64_MAX); /* far ahead: segment.ms passed, roll */
    assert_int_equal(gr_log_segment_count(f->log), 3);
    append_header_ts(f->log, INT64_MIN); /* INT64_MIN - INT64_MAX saturates: no roll */
    assert_int_equal(gr_log_segment_count(f->log), 3);
    assert_int_equal(f->log->segs[1]->max_timestamp_ms, 12000);
    assert_int_equal(f->log->segs[2]->max_timestamp_ms, INT64_MAX);
    gr_log_flush_async(f->log);
    assert_int_equal(th_wait_durable(f->log, 6), 0);
    /* A clock at INT64_MIN: nothing is older than retention.ms (and no overflow). */
    gr_log_retention(f->log, INT64_MIN);
    assert_int_equal(gr_log_start_offset(f->log), 0);
    /* Now: the first two segments (max timestamps 10900, 12000) are expired; the INT64_MAX one never is. */
    gr_log_retention(f->log, gr_time_wall_ms());
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_start_offset(f->log), 4);
    assert_int_equal(gr_log_segment_count(f->log), 1);
    /* A clock at INT64_MAX: the INT64_MAX segment is still not older than retention.ms. */
    gr_log_retention(f->log, INT64_MAX);
    assert_int_equal(gr_log_start_offset(f->log), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_read_across_rolls, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_index_lookups_every_offset, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_kip74_and_bounds, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_offsets_for_time, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_max_timestamp_first_of_equals, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test_setup_teardown(test_log_append_time, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_size_limits, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_leader_epochs, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_set_leader_epoch, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_group_commit_flush, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_roll_triggers, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_extreme_header_timestamps, th_store_setup, th_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
