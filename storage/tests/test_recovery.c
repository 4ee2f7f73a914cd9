/*
 * test_recovery.c: opening a log directory after damage. Torn last batch, flipped byte (active and sealed
 * segments), a segment that ends short of the next one, missing / truncated / garbage indexes, a copy
 * taken while the store runs (kill -9: data written, indexes never written), lost and corrupt producer
 * snapshots, and a clean-shutdown marker that lies.
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

#include "storage/internal.h"
#include "storage/tests/helpers.h"

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_log *log;
    int64_t base[64]; /* base offset of batch i */
    int nbatches;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
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

/* Topic "r" with the given segment.bytes, n batches of 3 records, producer 42 on even batches. */
static void fill(struct fx *f, const char *segment_bytes, int n)
{
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {segment_bytes};
    assert_int_equal(gr_store_topic_create(f->store, "r", 1, k, v, 1, &t), 0);
    f->log = gr_topic_log(t, 0);
    for (int i = 0; i < n; i++) {
        struct th_batch_spec s = {.count = 3,
                                  .ts0 = 1000 + 10 * i,
                                  .ts_step = 1,
                                  .tag = (uint32_t)i,
                                  .producer_id = i % 2 == 0 ? 42 : -1,
                                  .producer_epoch = 1,
                                  .base_sequence = 3 * (i / 2),
                                  .value_bytes = 40};
        size_t len;
        uint8_t *b = th_batch(&s, &len);
        struct gr_append_result res;
        assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
        free(b);
        gr_store_quiesce(
            f->store); /* a spare asked for at half a limit is ready at the roll (storage/roll.c) */
        f->base[i] = res.base_offset;
    }
    f->nbatches = n;
}

static void path_of(struct fx *f, char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", f->dir, name);
}

static void close_store(struct fx *f)
{
    gr_store_close(f->store);
    f->store = NULL;
    f->log = NULL;
}

/* Reopens; `unclean` removes the clean-shutdown marker, `forget_rp` the recovery-point checkpoint. */
static void reopen(struct fx *f, bool unclean, bool forget_rp)
{
    if (f->store) close_store(f);
    char p[512];
    if (unclean) {
        path_of(f, p, sizeof(p), ".kafka_cleanshutdown");
        assert_int_equal(unlink(p), 0);
    }
    if (forget_rp) {
        path_of(f, p, sizeof(p), "recovery-point-offset-checkpoint");
        assert_int_equal(unlink(p), 0);
    }
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->log = gr_topic_log(gr_store_topic_find(f->store, "r", 1), 0);
    assert_non_null(f->log);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void seg_path(struct fx *f, char *out, size_t cap, int64_t base, const char *sfx)
{
    snprintf(out, cap, "%s/r-0/%020lld%s", f->dir, (long long)base, sfx);
}

static void flip_byte(const char *path, int64_t pos)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, pos), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, pos), 1);
    close(fd);
}

/* Every batch 0..expect-1 readable in order with its tag; the producer state equals a replay of it. */
static void check_log(struct fx *f, int expect)
{
    struct th_seen *seen;
    struct gr_producer_state ps;
    gr_producer_state_init(&ps);
    int n = th_read_all_ps(f->log, 0, INT64_MAX, &seen, &ps);
    assert_int_equal(n, expect);
    for (int i = 0; i < n; i++) {
        assert_int_equal(seen[i].tag, (uint32_t)i);
        assert_int_equal(seen[i].base_offset, f->base[i]);
    }
    free(seen);
    assert_int_equal(gr_log_end_offset(f->log), expect ? f->base[expect - 1] + 3 : 0);
    assert_true(gr_producer_state_equal(&ps, gr_log_producer_state(f->log)));
    gr_producer_state_free(&ps);
}

static void test_torn_last_batch(void **state)
{
    struct fx *f = *state;
    fill(f, "100000", 10);
    close_store(f);
    char p[512];
    seg_path(f, p, sizeof(p), 0, ".log");
    int64_t size = file_size(p);
    assert_int_equal(truncate(p, size - 7), 0);
    reopen(f, true, false);
    check_log(f, 9);
    assert_int_equal(file_size(p), size - (size / 10)); /* equal-sized batches: exactly one dropped */
    /* Appends go on from the truncation point, in a new leader epoch. */
    size_t len;
    uint8_t *b = th_simple(1, 0, 9, &len);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
    free(b);
    assert_int_equal(res.base_offset, 27);
    assert_int_equal(gr_log_epoch_for_offset(f->log, 27), 1);
}

static void test_flipped_byte_active(void **state)
{
    struct fx *f = *state;
    fill(f, "100000", 10);
    close_store(f);
    char p[512];
    seg_path(f, p, sizeof(p), 0, ".log");
    int64_t size = file_size(p);
    flip_byte(p, size / 10 * 5 + 70); /* inside batch 5's records */
    reopen(f, true, false);
    check_log(f, 5);
    assert_int_equal(file_size(p), size / 10 * 5);
}

static void test_flipped_byte_sealed_deep_recovery(void **state)
{
    struct fx *f = *state;
    fill(f, "700", 30);
    int segs = gr_log_segment_count(f->log);
    assert_true(segs >= 6);
    int64_t victim = f->log->segs[2]->base_offset; /* a sealed segment */
    int first = 0;
    while (f->base[first] != victim)
        first++;
    close_store(f);
    char p[512];
    seg_path(f, p, sizeof(p), victim, ".log");
    flip_byte(p, 30); /* the CRC field's neighbourhood of the segment's first batch: attributes */
    /* Without a recovery point every segment is validated: the log ends where the damage starts. */
    reopen(f, true, true);
    check_log(f, first);
    assert_int_equal(gr_log_segment_count(f->log), 3);
    assert_int_equal(file_size(p), 0);
    seg_path(f, p, sizeof(p), f->base[first + 3], ".log");
    assert_int_equal(file_size(p), -1); /* later segments deleted */
}

static void test_segment_ending_short_of_next(void **state)
{
    struct fx *f = *state;
    fill(f, "700", 30);
    int64_t second = f->log->segs[1]->base_offset, third = f->log->segs[2]->base_offset;
    int64_t seg_bytes = f->log->segs[1]->size_bytes;
    int idx = 0;
    while (f->base[idx] != third)
        idx++;
    close_store(f);
    /* Segment 1 loses its last batch exactly at a batch boundary: no torn bytes, but a hole before
       segment 2. Nothing after the hole may be served. */
    char p[512];
    seg_path(f, p, sizeof(p), second, ".log");
    int64_t one = seg_bytes * 3 / (third - second);
    assert_int_equal(truncate(p, seg_bytes - one), 0);
    reopen(f, true, true);
    check_log(f, idx - 1);
    assert_int_equal(gr_log_segment_count(f->log), 2);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, fp);
    fclose(fp);
    return buf;
}

static void check_every_offset(struct fx *f)
{
    for (int i = 0; i < f->nbatches; i++) {
        for (int64_t off = f->base[i]; off < f->base[i] + 3; off++) {
            struct gr_log_slice s;
            assert_int_equal(gr_log_read(f->log, off, 1, INT64_MAX, true, &s), 0);
            assert_int_equal(s.first_batch_offset, f->base[i]);
            gr_log_slice_release(&s);
            int64_t o, ts;
            int32_t e;
            assert_int_equal(
                gr_log_offset_for_time(f->log, 1000 + 10 * i + (off - f->base[i]), INT64_MAX, &o, &ts, &e),
                0);
            assert_int_equal(o, off);
        }
    }
}

static void test_bad_indexes_rebuilt(void **state)
{
    struct fx *f = *state;
    fill(f, "1500", 40);
    int64_t b1 = f->log->segs[1]->base_offset, b2 = f->log->segs[2]->base_offset,
            b3 = f->log->segs[3]->base_offset;
    close_store(f);
    char p1[512], p2[512], p3[512], t3[512];
    seg_path(f, p1, sizeof(p1), b1, ".index");
    seg_path(f, p2, sizeof(p2), b2, ".index");
    seg_path(f, p3, sizeof(p3), b3, ".index");
    seg_path(f, t3, sizeof(t3), b3, ".timeindex");
    size_t l1, l2, lt;
    char *orig1 = slurp(p1, &l1), *orig2 = slurp(p2, &l2), *origt = slurp(t3, &lt);
    assert_true(l1 >= 16 && l1 % 8 == 0 && l2 >= 16);
    assert_true(lt >= 12 && lt % 12 == 0);
    /* Segment 1: index missing. Segment 2: garbage. Segment 3: truncated to half, time index gone. */
    assert_int_equal(unlink(p1), 0);
    FILE *fp = fopen(p2, "r+b");
    fseek(fp, 8, SEEK_SET);
    fwrite("\x7f\xff\xff\xff\x00\x00\x00\x01", 1, 8, fp); /* relative offsets no longer increasing */
    fclose(fp);
    assert_int_equal(truncate(p3, (off_t)(l1 / 16 * 8)), 0);
    assert_int_equal(unlink(t3), 0);
    reopen(f, false, false);
    check_every_offset(f);
    check_log(f, 40);
    /* Rebuilt files are byte-identical to the ones written at roll. */
    size_t n1, n2, nt;
    char *new1 = slurp(p1, &n1), *new2 = slurp(p2, &n2), *newt = slurp(t3, &nt);
    assert_non_null(new1);
    assert_int_equal(n1, l1);
    assert_memory_equal(new1, orig1, l1);
    assert_int_equal(n2, l2);
    assert_memory_equal(new2, orig2, l2);
    assert_int_equal(nt, lt);
    assert_memory_equal(newt, origt, lt);
    free(orig1);
    free(orig2);
    free(origt);
    free(new1);
    free(new2);
    free(newt);
}

static void test_killed_process_copy(void **state)
{
    struct fx *f = *state;
    fill(f, "1500", 25);
    /* Copy the directory while the store runs: appended bytes are in the page cache, the active
       segment's index never reached a file, no clean marker, recovery point 0. */
    gr_store_quiesce(f->store); /* cp must not race a snapshot rename; the copy is still "killed" */
    char copy[128], cmd[512];
    snprintf(copy, sizeof(copy), "%s-copy", f->dir);
    snprintf(cmd, sizeof(cmd), "cp -a %s %s", f->dir, copy);
    assert_int_equal(system(cmd), 0);
    struct gr_store_config cfg = f->cfg;
    cfg.log_dir = copy;
    struct gr_store *s2;
    assert_int_equal(gr_store_open(&cfg, &s2), 0);
    struct gr_log *saved = f->log;
    f->log = gr_topic_log(gr_store_topic_find(s2, "r", 1), 0);
    check_every_offset(f);
    check_log(f, 25);
    assert_int_equal(gr_log_leader_epoch(f->log), 1);
    gr_store_close(s2);
    f->log = saved;
    th_rmtree(copy);
}

static void test_snapshots_lost_or_corrupt(void **state)
{
    struct fx *f = *state;
    fill(f, "700", 30);
    close_store(f);
    char cmd[512];
    /* Corrupt every snapshot: recovery ignores them and replays the whole log. */
    snprintf(
        cmd, sizeof(cmd),
        "for s in %s/r-0/*.snapshot; do printf 'junk' | dd of=$s bs=1 seek=8 conv=notrunc 2>/dev/null; done",
        f->dir);
    assert_int_equal(system(cmd), 0);
    reopen(f, true, false);
    check_log(f, 30);
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(f->log), 42);
    assert_non_null(e);
    assert_int_equal(gr_producer_entry_last_seq(e), 3 * 14 + 2);
    close_store(f);
    snprintf(cmd, sizeof(cmd), "rm -f %s/r-0/*.snapshot", f->dir);
    assert_int_equal(system(cmd), 0);
    reopen(f, true, false);
    check_log(f, 30);
    assert_int_equal(gr_producer_entry_last_seq(gr_producer_state_find(gr_log_producer_state(f->log), 42)),
                     44);
}

static void test_lying_clean_marker(void **state)
{
    struct fx *f = *state;
    fill(f, "100000", 6);
    close_store(f);
    /* A torn write after the marker was written: the tail scan notices and recovers the segment. */
    char p[512];
    seg_path(f, p, sizeof(p), 0, ".log");
    FILE *fp = fopen(p, "ab");
    fwrite("\x00\x00\x00\x00\x00\x00\x00\x12\x00\x00\x00\x99", 1, 12, fp);
    fclose(fp);
    reopen(f, false, false);
    check_log(f, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torn_last_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte_active, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_byte_sealed_deep_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segment_ending_short_of_next, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_indexes_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_process_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshots_lost_or_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lying_clean_marker, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
