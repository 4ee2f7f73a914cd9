/*
 * test_replica.c: the follower's log (storage/replica.c, storage/truncate.c): appends as follower keep the
 * leader's bytes (offsets, epochs, timestamps), one write per chunk, refusals write nothing, the leader
 * epoch cache and producer state learn the batches; truncations to the middle of the active segment, to a
 * segment boundary, across segments and fully (below the log start), each checked in memory and after a
 * reopen; the log start offset raised from the leader's; a crash at every syscall of a truncation; with an
 * I/O pool, a truncation whose files are closed, indexes unloaded and pages not in the page cache makes no
 * call that may wait for the disk on the calling thread (its reads go to the pool, it answers -EAGAIN until
 * they are in, appends wait meanwhile), and a log deleted meanwhile is left alone by the pool's completion.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "storage/internal.h"
#include "storage/iopool.h"
#include "storage/sys.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

static void open_log(struct th_store_fx *f, const char *segment_bytes)
{
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    struct gr_topic *t = gr_store_topic_find(f->store, "r", 1);
    if (!t) {
        const char *k[] = {"segment.bytes"}, *v[] = {segment_bytes};
        assert_int_equal(gr_store_topic_create(f->store, "r", 1, k, v, 1, &t), 0);
    }
    f->log = gr_topic_log(t, 0);
    assert_non_null(f->log);
}

static void reopen(struct th_store_fx *f)
{
    gr_store_close(f->store);
    f->store = NULL;
    open_log(f, NULL);
}

/* A leader's batch: `count` records, tag, timestamps from ts, producer pid (-1 none) at sequence seq,
   stamped with base offset `base` and partition leader epoch `epoch` (both outside the CRC span). */
static uint8_t *leader_batch(int64_t base, int32_t epoch, int32_t count, int64_t ts, uint32_t tag,
                             int64_t pid, int32_t seq, size_t *len)
{
    struct th_batch_spec s = {.count = count,
                              .ts0 = ts,
                              .ts_step = 1,
                              .tag = tag,
                              .value_bytes = 40,
                              .producer_id = pid,
                              .producer_epoch = 0,
                              .base_sequence = pid >= 0 ? seq : -1};
    uint8_t *b = th_batch(&s, len);
    gr_batch_set_base_offset(b, base);
    gr_batch_set_leader_epoch(b, epoch);
    return b;
}

/* The leader's log used by most tests: batch i holds 3 records at offsets 3i..3i+2, tag i, timestamps from
   1000 + 10i; epoch 0 for i < 2, 2 for i < 3, else 5; producer 7 writes batches 0..n-2 (sequence 3i),
   producer 9 only the last one. */
struct chunk {
    uint8_t *bytes;
    size_t len;
    size_t end[64]; /* end position of batch i */
    int n;
};

static int32_t epoch_of(int i)
{
    return i < 2 ? 0 : i < 3 ? 2 : 5;
}

static void chunk_build(struct chunk *c, int n)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    for (int i = 0; i < n; i++) {
        size_t blen;
        int64_t pid = i == n - 1 ? 9 : 7;
        uint8_t *b =
            leader_batch(3 * i, epoch_of(i), 3, 1000 + 10 * i, (uint32_t)i, pid, pid == 7 ? 3 * i : 0, &blen);
        c->bytes = realloc(c->bytes, c->len + blen);
        memcpy(c->bytes + c->len, b, blen);
        c->len += blen;
        c->end[i] = c->len;
        free(b);
    }
}

static int append_chunk(struct gr_log *log, const struct chunk *c, int from, int to)
{
    size_t a = from ? c->end[from - 1] : 0;
    struct gr_append_result res;
    int err = gr_log_append_replica(log, c->bytes + a, c->end[to - 1] - a, &res);
    if (err == 0) {
        assert_int_equal(res.base_offset, 3 * from);
        assert_int_equal(res.last_offset, 3 * to - 1);
    }
    return err;
}

/* Concatenation of every segment file of the log, in order. */
static uint8_t *log_file_bytes(struct gr_log *log, size_t *len)
{
    uint8_t *all = NULL;
    *len = 0;
    for (int i = 0; i < log->seg_count; i++) {
        struct gr_segment *seg = log->segs[i];
        char name[GR_SEGMENT_NAME_BYTES];
        gr_segment_file_name(name, seg->base_offset, ".log");
        int fd = openat(log->dir_fd, name, O_RDONLY);
        assert_true(fd >= 0);
        off_t size = lseek(fd, 0, SEEK_END);
        all = realloc(all, *len + (size_t)size + 1);
        assert_int_equal(pread(fd, all + *len, (size_t)size, 0), size);
        *len += (size_t)size;
        close(fd);
    }
    return all;
}

/* The epoch cache's entries that batches carry (an open adds one at the log end offset: not counted). */
static void assert_epochs(struct gr_log *log, const struct gr_epoch_entry *want, int n)
{
    int count = log->epoch_count;
    while (count && log->epochs[count - 1].start_offset >= gr_log_end_offset(log))
        count--;
    assert_int_equal(count, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(log->epochs[i].epoch, want[i].epoch);
        assert_int_equal(log->epochs[i].start_offset, want[i].start_offset);
    }
}

/* leader-epoch-checkpoint on disk (after the checkpoint pass) equals `want`. */
static void assert_epoch_file(struct th_store_fx *f, const struct gr_epoch_entry *want, int n)
{
    gr_store_checkpoint(f->store);
    gr_store_quiesce(f->store);
    struct gr_epoch_entry *e;
    int count;
    assert_int_equal(gr_epoch_ckpt_read(f->log->dir_fd, &e, &count), 0);
    assert_int_equal(count, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(e[i].epoch, want[i].epoch);
        assert_int_equal(e[i].start_offset, want[i].start_offset);
    }
    free(e);
}

static void test_append_keeps_bytes_epochs_producers(void **state)
{
    struct th_store_fx *f = *state;
    fault_install(); /* counts the writes (installed while no store is open, as sys.h asks) */
    open_log(f, "1000000");
    struct chunk c;
    chunk_build(&c, 6);
    long writes = fault_count_this_thread(F_PWRITE);
    assert_int_equal(append_chunk(f->log, &c, 0, 6), 0);
    assert_int_equal(fault_count_this_thread(F_PWRITE) - writes, 1); /* one write for the whole chunk */
    assert_int_equal(gr_log_leader_epoch(f->log), 5);                /* the batches' newest epoch */
    reopen(f);
    gr_store_close(f->store);
    fault_uninstall();
    open_log(f, NULL);
    assert_int_equal(gr_log_end_offset(f->log), 18);
    size_t len;
    uint8_t *disk = log_file_bytes(f->log, &len);
    assert_int_equal(len, c.len);
    assert_memory_equal(disk, c.bytes, c.len); /* offsets, epochs, timestamps, CRCs as the leader wrote */
    free(disk);
    const struct gr_epoch_entry want[] = {{0, 0}, {2, 6}, {5, 9}};
    assert_epochs(f->log, want, 3);
    int64_t end;
    int32_t ep;
    assert_int_equal(gr_log_end_offset_for_epoch(f->log, 2, &end, &ep), 0);
    assert_int_equal(end, 9);
    /* Producer 7 wrote sequences 0..14 (batches 0..4), producer 9 one batch: both known, so a retry of the
       last batch of producer 7 is a duplicate once this replica leads. */
    const struct gr_producer_entry *p7 = gr_producer_state_find(gr_log_producer_state(f->log), 7);
    assert_non_null(p7);
    assert_int_equal(gr_producer_entry_last_seq(p7), 14);
    assert_non_null(gr_producer_entry_find_batch(p7, 12, 14));
    assert_non_null(gr_producer_state_find(gr_log_producer_state(f->log), 9));
    assert_epoch_file(f, want, 3);
    reopen(f);
    assert_int_equal(gr_log_end_offset(f->log), 18);
    assert_int_equal(gr_producer_entry_last_seq(gr_producer_state_find(gr_log_producer_state(f->log), 7)),
                     14);
    free(c.bytes);
}

static int audit_reports;
static void audit_report(const char *op, int fd, const char *path)
{
    (void)fd;
    print_message("blocking call on the appending thread: %s %s\n", op, path ? path : "");
    audit_reports++;
}

/* Appends as follower across rolls whose spare files are ready make no call that waits for the disk on the
   calling thread (the network thread's rule), and the truncation's file half runs elsewhere: its ftruncate,
   unlinks, fsyncs and creates are never made on the calling thread. */
static void test_no_disk_wait_on_the_calling_thread(void **state)
{
    struct th_store_fx *f = *state;
    open_log(f, "1000");
    struct chunk c;
    chunk_build(&c, 30);
    audit_reports = 0;
    for (int i = 0; i < 30; i++) {
        gr_sys_audit_this_thread(audit_report);
        assert_int_equal(append_chunk(f->log, &c, i, i + 1), 0);
        gr_sys_audit_this_thread(NULL);
        gr_store_quiesce(f->store); /* the spare file for the next roll is made meanwhile */
    }
    assert_int_equal(audit_reports, 0);
    assert_true(gr_log_segment_count(f->log) > 3);
    gr_store_close(f->store);
    f->store = NULL;
    fault_install(); /* while no store is open (storage/sys.h); counts this thread's calls */
    open_log(f, NULL);
    long trunc0 = fault_count_this_thread(F_FTRUNCATE), unl0 = fault_count_this_thread(F_UNLINK);
    long sync0 = fault_count_this_thread(F_FDATASYNC) + fault_count_this_thread(F_FSYNC);
    assert_int_equal(gr_log_truncate_to(f->log, 13), 0);
    assert_int_equal(fault_count_this_thread(F_FTRUNCATE), trunc0);
    assert_int_equal(fault_count_this_thread(F_UNLINK), unl0);
    assert_int_equal(fault_count_this_thread(F_FDATASYNC) + fault_count_this_thread(F_FSYNC), sync0);
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    f->store = NULL;
    fault_uninstall();
    free(c.bytes);
}

/* An open adds an entry for the next epoch at the log end offset; a follower's batches of an older epoch
   replace it; when this replica then leads in exactly that next epoch the entry comes back. */
static void test_open_epoch_then_follower_then_leader(void **state)
{
    struct th_store_fx *f = *state;
    open_log(f, "1000000");
    struct chunk c;
    chunk_build(&c, 4); /* epochs 0, 0, 2, 5 */
    assert_int_equal(append_chunk(f->log, &c, 0, 3), 0);
    reopen(f); /* the open's entry: (3, 9) */
    assert_int_equal(gr_log_leader_epoch(f->log), 3);
    assert_int_equal(append_chunk(f->log, &c, 3, 4), 0); /* the leader's epoch-5 batch at 9 */
    const struct gr_epoch_entry want[] = {{0, 0}, {2, 6}, {5, 9}};
    assert_epochs(f->log, want, 3);
    assert_int_equal(f->log->epoch_count, 3);
    assert_int_equal(gr_log_set_leader_epoch(f->log, 6), 0); /* elected */
    assert_int_equal(f->log->epochs[3].epoch, 6);
    assert_int_equal(f->log->epochs[3].start_offset, 12);
    reopen(f); /* the file has no batch of epoch 6 yet: this open adds (6, 12) again */
    assert_int_equal(gr_log_leader_epoch(f->log), 6);
    size_t blen;
    uint8_t *b = leader_batch(12, 2, 1, 0, 1, -1, 0, &blen); /* below the cache's epochs: a regression */
    struct gr_append_result res;
    assert_int_equal(gr_log_append_replica(f->log, b, blen, &res), 0);
    free(b);
    const struct gr_epoch_entry after[] = {{0, 0}, {2, 12}};
    assert_epochs(f->log, after, 2); /* Kafka's assign: later entries removed, logged */
    assert_int_equal(gr_log_set_leader_epoch(f->log, 6), 0); /* the open's epoch, its entry gone */
    assert_int_equal(f->log->epochs[f->log->epoch_count - 1].epoch, 6);
    assert_int_equal(f->log->epochs[f->log->epoch_count - 1].start_offset, 13);
    free(c.bytes);
}

static void test_append_refusals_write_nothing(void **state)
{
    struct th_store_fx *f = *state;
    open_log(f, "1000000");
    struct chunk c;
    chunk_build(&c, 4);
    assert_int_equal(append_chunk(f->log, &c, 0, 1), 0);
    int64_t size = f->log->size_bytes;
    struct gr_append_result res;
    /* A CRC-corrupt second batch refuses the whole call. */
    uint8_t *bad = malloc(c.len);
    memcpy(bad, c.bytes, c.len);
    bad[c.end[1] - 5] ^= 0x40;
    assert_int_equal(gr_log_append_replica(f->log, bad + c.end[0], c.end[2] - c.end[0], &res), -EBADMSG);
    /* A gap (batch 3 after batch 1), an overlap (batch 0 again), a partial tail. */
    memcpy(bad, c.bytes, c.len);
    size_t n1 = c.end[1] - c.end[0];
    memcpy(bad, c.bytes + c.end[0], n1);
    memcpy(bad + n1, c.bytes + c.end[2], c.end[3] - c.end[2]);
    assert_int_equal(gr_log_append_replica(f->log, bad, n1 + c.end[3] - c.end[2], &res), -ERANGE);
    assert_int_equal(gr_log_append_replica(f->log, c.bytes, c.end[1], &res), -ERANGE);
    assert_int_equal(gr_log_append_replica(f->log, c.bytes + c.end[0], n1 - 1, &res), -EBADMSG);
    assert_int_equal(res.base_offset, -1);
    assert_int_equal(gr_log_end_offset(f->log), 3);
    assert_int_equal(f->log->size_bytes, size);
    size_t len;
    uint8_t *disk = log_file_bytes(f->log, &len);
    assert_int_equal(len, (size_t)size);
    free(disk);
    /* The right chunk still goes. */
    assert_int_equal(append_chunk(f->log, &c, 1, 4), 0);
    free(bad);
    free(c.bytes);
}

static void test_append_splits_at_rolls(void **state)
{
    struct th_store_fx *f = *state;
    open_log(f, "1000");
    struct chunk c;
    chunk_build(&c, 40);
    assert_int_equal(append_chunk(f->log, &c, 0, 40), 0);
    gr_store_quiesce(f->store);
    assert_int_equal(gr_log_end_offset(f->log), 120);
    assert_true(gr_log_segment_count(f->log) > 3);
    for (int i = 0; i + 1 < f->log->seg_count; i++) {
        /* A roll waits for its spare file up to 2 x segment.bytes, as gr_log_append's (storage/roll.c). */
        assert_true(f->log->segs[i]->size_bytes <= 2000 + 300);
        assert_int_equal(f->log->segs[i]->next_offset, f->log->segs[i + 1]->base_offset);
    }
    size_t len;
    uint8_t *disk = log_file_bytes(f->log, &len);
    assert_int_equal(len, c.len);
    assert_memory_equal(disk, c.bytes, c.len);
    free(disk);
    struct th_seen *seen;
    assert_int_equal(th_read_all(f->log, 0, INT64_MAX, &seen), 40);
    assert_int_equal(seen[39].leader_epoch, 5);
    free(seen);
    free(c.bytes);
}

/* ---------------------------------------------------------------- truncation */

/* The log of `n` leader batches over segments of segment.bytes 1000 (about 5 batches each). */
static void build(struct th_store_fx *f, struct chunk *c, int n)
{
    open_log(f, "1000");
    chunk_build(c, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(append_chunk(f->log, c, i, i + 1), 0);
        gr_store_quiesce(f->store); /* spare files ready: rolls where segment.bytes says */
    }
}

/* Everything a truncation to a batch boundary `end` (batch end/3 is the first to go) must show. */
static void check_cut(struct th_store_fx *f, const struct chunk *c, int64_t end)
{
    int kept = (int)(end / 3);
    assert_int_equal(gr_log_end_offset(f->log), end);
    struct th_seen *seen;
    assert_int_equal(th_read_all(f->log, gr_log_start_offset(f->log), INT64_MAX, &seen),
                     kept - gr_log_start_offset(f->log) / 3);
    free(seen);
    /* Index lookups land on the right batches; the cut offsets are out of range. */
    for (int64_t off = gr_log_start_offset(f->log); off < end; off += 2) {
        struct gr_log_slice s;
        assert_int_equal(gr_log_read(f->log, off, 1, INT64_MAX, true, &s), 0);
        assert_int_equal(s.first_batch_offset, off - off % 3);
        gr_log_slice_release(&s);
        int64_t o, ts;
        int32_t ep;
        assert_int_equal(gr_log_offset_for_time(f->log, 1000 + 10 * (off / 3), INT64_MAX, &o, &ts, &ep), 0);
        assert_int_equal(o, off - off % 3);
        assert_int_equal(ep, epoch_of((int)(off / 3)));
    }
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, end + 1, 100, INT64_MAX, true, &s), -ERANGE);
    /* The epoch cache keeps the entries below the end. */
    struct gr_epoch_entry want[3] = {{0, 0}, {2, 6}, {5, 9}};
    int n = end > 9 ? 3 : end > 6 ? 2 : 1;
    assert_epochs(f->log, want, n);
    assert_epoch_file(f, want, n);
    /* Producer 9 (only the last batch) is gone; producer 7's last sequence is its last kept batch's. */
    const struct gr_producer_state *ps = gr_log_producer_state(f->log);
    assert_null(gr_producer_state_find(ps, 9));
    const struct gr_producer_entry *p7 = gr_producer_state_find(ps, 7);
    assert_non_null(p7);
    assert_int_equal(gr_producer_entry_last_seq(p7), 3 * kept - 1);
    (void)c;
}

/* Truncates to `offset`, waits for the file half, appends the leader's new history from the end (epoch 7),
   checks, then checks again after a reopen. */
static void truncate_and_check(struct th_store_fx *f, struct chunk *c, int64_t offset, int64_t end)
{
    assert_int_equal(gr_log_truncate_to(f->log, offset), 0);
    check_cut(f, c, end);
    gr_store_quiesce(f->store);
    assert_false(gr_log_truncation_pending(f->log));
    assert_int_equal(gr_log_durable_offset(f->log) <= end, true);
    int64_t ls = gr_log_start_offset(f->log);
    struct gr_producer_state before;
    gr_producer_state_init(&before);
    struct th_seen *seen;
    assert_true(th_read_all_ps(f->log, ls, INT64_MAX, &seen, &before) >= 0);
    free(seen);
    reopen(f);
    check_cut(f, c, end);
    assert_true(gr_producer_state_equal(&before, gr_log_producer_state(f->log)));
    gr_producer_state_free(&before);
    /* The new leader's batch continues at the end, in a new epoch. */
    size_t blen;
    uint8_t *b = leader_batch(end, 7, 2, 5000, 77, -1, 0, &blen);
    struct gr_append_result res;
    assert_int_equal(gr_log_append_replica(f->log, b, blen, &res), 0);
    assert_int_equal(res.base_offset, end);
    assert_int_equal(f->log->epochs[f->log->epoch_count - 1].epoch, 7);
    assert_int_equal(f->log->epochs[f->log->epoch_count - 1].start_offset, end);
    free(b);
    reopen(f);
    assert_int_equal(gr_log_end_offset(f->log), end + 2);
    assert_true(th_read_all(f->log, ls, INT64_MAX, &seen) >= 0);
    free(seen);
}

static void test_truncate_middle_of_active(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    build(f, &c, 20);
    int64_t active_base = f->log->segs[f->log->seg_count - 1]->base_offset;
    int64_t cut = active_base + 4; /* inside the active segment's second batch */
    truncate_and_check(f, &c, cut, cut - cut % 3);
    free(c.bytes);
}

static void test_truncate_segment_boundary(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    build(f, &c, 20);
    assert_true(f->log->seg_count >= 3);
    int64_t base = f->log->segs[1]->base_offset;
    truncate_and_check(f, &c, base, base);
    assert_int_equal(f->log->segs[f->log->seg_count - 1]->base_offset <= base + 2, true);
    free(c.bytes);
}

static void test_truncate_across_segments(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    build(f, &c, 20);
    assert_true(f->log->seg_count >= 3);
    int64_t cut = f->log->segs[0]->next_offset - 2; /* inside the last batch of the first segment */
    int segs_before = f->log->seg_count;
    truncate_and_check(f, &c, cut, cut - cut % 3);
    assert_true(f->log->seg_count < segs_before);
    free(c.bytes);
}

static void test_truncate_below_log_start_is_full(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    build(f, &c, 20);
    int64_t first = f->log->segs[1]->base_offset;
    assert_int_equal(gr_log_raise_start_offset(f->log, first + 1), 1); /* the leader's log start */
    assert_int_equal(gr_log_start_offset(f->log), first + 1);
    assert_int_equal(gr_log_raise_start_offset(f->log, 2), 0);  /* never down */
    assert_int_equal(gr_log_truncate_to(f->log, first - 3), 0); /* below the first segment */
    assert_int_equal(gr_log_start_offset(f->log), first - 3);
    assert_int_equal(gr_log_end_offset(f->log), first - 3);
    assert_int_equal(f->log->epoch_count, 0);
    assert_int_equal(gr_producer_state_count(gr_log_producer_state(f->log)), 0);
    gr_store_quiesce(f->store);
    reopen(f);
    assert_int_equal(gr_log_start_offset(f->log), first - 3);
    assert_int_equal(gr_log_end_offset(f->log), first - 3);
    assert_int_equal(gr_log_segment_count(f->log), 1);
    assert_int_equal(gr_producer_state_count(gr_log_producer_state(f->log)), 0);
    /* The leader's batches from there on are taken. */
    size_t blen;
    uint8_t *b = leader_batch(first - 3, 8, 3, 9000, 1, 7, 100, &blen);
    struct gr_append_result res;
    assert_int_equal(gr_log_append_replica(f->log, b, blen, &res), 0);
    free(b);
    const struct gr_epoch_entry want[] = {{8, first - 3}};
    assert_epochs(f->log, want, 1);
    free(c.bytes);
}

static void test_truncate_fully_and_start_at(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    build(f, &c, 10);
    assert_int_equal(gr_log_truncate_fully_and_start_at(f->log, 500), 0);
    assert_int_equal(gr_log_start_offset(f->log), 500);
    assert_int_equal(gr_log_end_offset(f->log), 500);
    assert_int_equal(gr_log_durable_offset(f->log), 500);
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, 0, 100, INT64_MAX, true, &s), -ERANGE);
    gr_store_quiesce(f->store);
    assert_epoch_file(f, NULL, 0);
    reopen(f);
    assert_int_equal(gr_log_start_offset(f->log), 500);
    assert_int_equal(gr_log_end_offset(f->log), 500);
    assert_int_equal(gr_log_segment_count(f->log), 1);
    free(c.bytes);
}

static void test_truncate_refusals(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    build(f, &c, 4);
    assert_int_equal(gr_log_truncate_to(f->log, -1), -EINVAL);
    assert_int_equal(gr_log_truncate_to(f->log, 12), 0); /* at the end: nothing */
    assert_int_equal(gr_log_end_offset(f->log), 12);
    assert_false(gr_log_truncation_pending(f->log));
    free(c.bytes);
}

/* ---------------------------------------------------------------- crash mode */

#define CRASH_BATCHES 20

/* The log before the crash runs: 20 leader batches over segments of 700 bytes, durable, closed cleanly. */
static void crash_build(const struct gr_store_config *cfg, struct chunk *c)
{
    struct gr_store *store;
    assert_int_equal(gr_store_open(cfg, &store), 0);
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"700"};
    assert_int_equal(gr_store_topic_create(store, "r", 1, k, v, 1, &t), 0);
    struct gr_log *log = gr_topic_log(t, 0);
    for (int i = 0; i < CRASH_BATCHES; i++) {
        assert_int_equal(append_chunk(log, c, i, i + 1), 0);
        gr_store_quiesce(store);
    }
    gr_store_close(store);
}

/* Failure mode instead of crash mode: the fail_nth-th call of fail_op after the open fails with EIO. */
static int fail_op = -1, fail_nth;

/* The truncation run whose syscalls are crashed: open, truncate (to `offset`, or fully when `full`), close.
 */
static void crash_truncate(const struct gr_store_config *cfg, int64_t offset, bool full)
{
    struct gr_store *store;
    assert_int_equal(gr_store_open(cfg, &store), 0);
    struct gr_log *log = gr_topic_log(gr_store_topic_find(store, "r", 1), 0);
    if (fail_op >= 0)
        fault_fail((enum fault_op)fail_op, fail_nth, EIO, false);
    else
        fault_crash_track(cfg->log_dir);
    if (full)
        gr_log_truncate_fully_and_start_at(log, offset);
    else
        gr_log_truncate_to(log, offset);
    gr_store_quiesce(store);
    gr_store_close(store);
}

/* After the crash: a prefix of the old log at least up to the cut (or, for a full truncation, either the old
   log's prefix or the empty log at the offset), batches as written, epochs and producers consistent. */
static void crash_check(const struct gr_store_config *cfg, int64_t cut, bool full, long point)
{
    struct gr_store *store;
    if (gr_store_open(cfg, &store) < 0) fail_msg("crash point %ld: reopen failed", point);
    struct gr_log *log = gr_topic_log(gr_store_topic_find(store, "r", 1), 0);
    int64_t ls = gr_log_start_offset(log), leo = gr_log_end_offset(log);
    bool restarted = full && ls == cut && leo == cut;
    if (!restarted && (ls != 0 || leo < (full ? 0 : cut) || leo > 3 * CRASH_BATCHES))
        fail_msg("crash point %ld: log [%ld, %ld), cut %ld", point, (long)ls, (long)leo, (long)cut);
    struct th_seen *seen;
    struct gr_producer_state replay;
    gr_producer_state_init(&replay);
    int n = th_read_all_ps(log, ls, INT64_MAX, &seen, &replay);
    if (n < 0) fail_msg("crash point %ld: log unreadable", point);
    assert_int_equal(n ? seen[n - 1].last_offset + 1 : ls, leo);
    for (int i = 0; i < n; i++) {
        if (seen[i].base_offset != 3 * (int64_t)seen[i].tag ||
            seen[i].leader_epoch != epoch_of((int)seen[i].tag))
            fail_msg("crash point %ld: batch at %ld is not the one written", point,
                     (long)seen[i].base_offset);
        if (gr_log_epoch_for_offset(log, seen[i].base_offset) != seen[i].leader_epoch)
            fail_msg("crash point %ld: epoch cache disagrees at %ld", point, (long)seen[i].base_offset);
    }
    free(seen);
    gr_producer_state_truncate_head(&replay, ls);
    if (!gr_producer_state_equal(&replay, gr_log_producer_state(log)))
        fail_msg("crash point %ld: producer state differs from the log", point);
    gr_producer_state_free(&replay);
    size_t blen;
    uint8_t *b = leader_batch(leo, 9, 1, 0, 999, -1, 0, &blen);
    struct gr_append_result res;
    assert_int_equal(gr_log_append_replica(log, b, blen, &res), 0);
    free(b);
    gr_store_close(store);
}

/* Copies the built log directory `from` into the fresh directory `to` (each crash starts from it). */
static void copy_dir(const char *from, const char *to)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "cp -a '%s'/. '%s'/", from, to);
    assert_int_equal(system(cmd), 0);
}

static void crash_at_every_point(int64_t offset, bool full)
{
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1)); /* expected I/O errors by the hundred */
    struct chunk c;
    chunk_build(&c, CRASH_BATCHES);
    char built[64], dir[64];
    struct gr_store_config cfg;
    th_tmpdir(built, sizeof(built));
    th_config(&cfg, built);
    crash_build(&cfg, &c);
    th_tmpdir(dir, sizeof(dir));
    copy_dir(built, dir);
    th_config(&cfg, dir);
    fault_install();
    crash_truncate(&cfg, offset, full); /* a dry run counts the mutating calls */
    long total = fault_io_count();
    fault_uninstall();
    th_rmtree(dir);
    assert_true(total > 5);
    int64_t cut = full ? offset : offset - offset % 3;
    for (long iter = 0; iter < 2 * total; iter++) {
        long point = iter % total + 1;
        th_tmpdir(dir, sizeof(dir));
        copy_dir(built, dir);
        th_config(&cfg, dir);
        fault_install();
        fault_crash_at(point);
        crash_truncate(&cfg, offset, full);
        fault_crash_apply((unsigned)iter, iter >= total); /* second pass: torn unsynced tails too */
        fault_uninstall();
        th_flush_reset();
        crash_check(&cfg, cut, full, point);
        th_rmtree(dir);
    }
    th_rmtree(built);
    gr_log_set_level(GR_LOG_INFO);
    print_message("truncation crash mode: %ld I/O points, each crashed twice\n", total);
    free(c.bytes);
}

/* Each syscall of a truncation failing (EIO) in turn: the log goes offline or finishes, and the next open
   recovers as after a crash. */
static void test_fail_each_truncation_syscall(void **state)
{
    (void)state;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    static const enum fault_op ops[] = {F_OPEN,      F_PWRITE, F_FDATASYNC, F_FSYNC,
                                        F_FTRUNCATE, F_RENAME, F_UNLINK};
    struct chunk c;
    chunk_build(&c, CRASH_BATCHES);
    char built[64], dir[64];
    struct gr_store_config cfg;
    th_tmpdir(built, sizeof(built));
    th_config(&cfg, built);
    crash_build(&cfg, &c);
    long checked = 0;
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
        th_tmpdir(dir, sizeof(dir));
        copy_dir(built, dir);
        th_config(&cfg, dir);
        fault_install();
        long before = fault_count(ops[k]);
        crash_truncate(&cfg, 13, false); /* a dry run counts the calls of this kind */
        long n = fault_count(ops[k]) - before;
        fault_uninstall();
        th_rmtree(dir);
        for (fail_nth = 1; fail_nth <= n; fail_nth++, checked++) {
            th_tmpdir(dir, sizeof(dir));
            copy_dir(built, dir);
            th_config(&cfg, dir);
            fault_install();
            fail_op = (int)ops[k];
            crash_truncate(&cfg, 13, false);
            fail_op = -1;
            fault_uninstall();
            th_flush_reset();
            crash_check(&cfg, 12, false, 1000 * (long)k + fail_nth);
            th_rmtree(dir);
        }
    }
    th_rmtree(built);
    gr_log_set_level(GR_LOG_INFO);
    print_message("truncation failure mode: %ld failed calls checked\n", checked);
    assert_true(checked > 10);
    free(c.bytes);
}

static void test_crash_mid_truncation(void **state)
{
    (void)state;
    crash_at_every_point(13, false); /* across segments: later ones deleted, a sealed one cut */
}

static void test_crash_mid_full_truncation(void **state)
{
    (void)state;
    crash_at_every_point(200, true);
}

/* ---------------------------------------------------------------- truncation reads on the I/O pool */

/* Simulated page cache (gr_sys.cachestat): while `sim_cold`, a file counts as resident only once a thread
   other than the test's read it (the pool's prefetch, index load or snapshot read); the audit of the test's
   thread then reports each read it would make of a file nobody read in. */
static bool sim_cold;
static bool sim_stuck; /* the pool's reads warm nothing (pages evicted again at once) */
static pthread_t sim_main;
static ino_t sim_warm[256];
static int sim_warm_count;
static pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;

static bool sim_is_warm(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return false;
    pthread_mutex_lock(&sim_mu);
    bool warm = false;
    for (int i = 0; i < sim_warm_count && !warm; i++)
        warm = sim_warm[i] == st.st_ino;
    pthread_mutex_unlock(&sim_mu);
    return warm;
}

static ssize_t sim_pread(int fd, void *buf, size_t n, off_t pos)
{
    struct stat st;
    if (!sim_stuck && !pthread_equal(pthread_self(), sim_main) && fstat(fd, &st) == 0) {
        pthread_mutex_lock(&sim_mu);
        bool known = false;
        for (int i = 0; i < sim_warm_count && !known; i++)
            known = sim_warm[i] == st.st_ino;
        if (!known && sim_warm_count < 256) sim_warm[sim_warm_count++] = st.st_ino;
        pthread_mutex_unlock(&sim_mu);
    }
    return gr_sys_libc.pread(fd, buf, n, pos);
}

static int sim_cachestat(int fd, int64_t pos, int64_t len, int64_t *cached_pages)
{
    if (!sim_cold) return gr_sys_libc.cachestat(fd, pos, len, cached_pages);
    long page = sysconf(_SC_PAGESIZE);
    *cached_pages = sim_is_warm(fd) ? (len + page - 1) / page : 0;
    return 0;
}

static int pool_audit_reports;
static char pool_audit_first[160];
static void pool_audit_report(const char *op, int fd, const char *path)
{
    (void)fd;
    if (!pool_audit_reports++)
        snprintf(pool_audit_first, sizeof pool_audit_first, "%s %s", op, path ? path : "");
    print_message("disk wait on the truncating thread: %s %s\n", op, path ? path : "");
}

/* The log of build() (30 batches over 1000-byte segments), reopened with a pool, one open .log file at a
   time and every page "cold": the files of older segments are closed and their indexes not loaded. */
static struct gr_iopool *cold_log(struct th_store_fx *f, struct chunk *c)
{
    build(f, c, 30);
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    f->store = NULL;
    sim_main = pthread_self();
    sim_warm_count = 0;
    gr_sys.pread = sim_pread; /* while no store is open (storage/sys.h) */
    gr_sys.cachestat = sim_cachestat;
    f->cfg.open_segment_fds_max = 1;
    open_log(f, NULL);
    struct gr_iopool *pool;
    assert_int_equal(gr_iopool_create(2, NULL, NULL, &pool), 0);
    gr_store_set_iopool(f->store, pool);
    assert_true(f->log->seg_count >= 5);
    assert_true(f->log->snapshot_count >= 2);
    sim_warm_count = 0;
    sim_cold = true;
    return pool;
}

static void cold_log_end(struct th_store_fx *f, struct gr_iopool *pool)
{
    sim_cold = false;
    gr_iopool_drain(pool);
    gr_store_set_iopool(f->store, NULL);
    gr_iopool_destroy(pool);
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    f->store = NULL;
    gr_sys_reset();
    f->cfg.open_segment_fds_max = 1024;
}

/* A truncation into an older segment (its file closed, its index not loaded, a producer snapshot below the
   cut, batches to replay after it, all cold) answers -EAGAIN while its reads run on the pool, makes no call
   that may wait for the disk on the calling thread, and ends as the blocking one does (check_cut: segments,
   indexes, epochs, producer state; again after a reopen). Meanwhile appends answer -EAGAIN and the log
   reads as truncation pending. */
static void test_truncate_reads_on_the_pool(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    struct gr_iopool *pool = cold_log(f, &c);
    /* inside the older segment starting at the oldest snapshot kept (72: the snapshot is read, then batch
       72..74 replayed from that closed segment) */
    int64_t cut = f->log->snapshots[0] + 4, end = cut - cut % 3;
    assert_true(cut < f->log->segs[f->log->seg_count - 1]->base_offset);
    pool_audit_reports = 0;
    int rounds = 0, rc;
    for (;;) {
        gr_sys_audit_this_thread(pool_audit_report);
        rc = gr_log_truncate_to(f->log, cut);
        gr_sys_audit_this_thread(NULL);
        if (rc != -EAGAIN || rounds > 40) break;
        rounds++;
        assert_true(gr_log_truncation_pending(f->log));
        assert_int_equal(append_chunk(f->log, &c, 29, 30), -EAGAIN); /* appends wait for it */
        gr_iopool_drain(pool); /* the warm job's done runs here, on the owner's thread */
    }
    assert_int_equal(rc, 0);
    if (pool_audit_reports) print_message("first: %s\n", pool_audit_first);
    assert_int_equal(pool_audit_reports, 0);
    print_message("truncation done after %d pool rounds\n", rounds);
    assert_true(rounds >= 3); /* the closed file and its index, the snapshot, the headers */
    sim_cold = false;
    check_cut(f, &c, end);
    gr_store_quiesce(f->store);
    assert_false(gr_log_truncation_pending(f->log));
    cold_log_end(f, pool);
    open_log(f, NULL);
    check_cut(f, &c, end);
    free(c.bytes);
}

/* Pages evicted again after every pool round: after TRUNC_ROUNDS_MAX (16) rounds the truncation reads on the
   calling thread (as without a pool) and ends as the blocking one does. */
static void test_truncate_rounds_capped(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    struct gr_iopool *pool = cold_log(f, &c);
    sim_stuck = true;
    int64_t cut = f->log->snapshots[0] + 4, end = cut - cut % 3;
    int rounds = 0, rc;
    while ((rc = gr_log_truncate_to(f->log, cut)) == -EAGAIN && rounds <= 40) {
        rounds++;
        gr_iopool_drain(pool);
    }
    sim_stuck = false;
    assert_int_equal(rc, 0);
    assert_int_equal(rounds, 16);
    sim_cold = false;
    check_cut(f, &c, end);
    cold_log_end(f, pool);
    free(c.bytes);
}

/* A log deleted while its truncation's reads are on the pool: the job's completion leaves it (offline,
   still allocated until the store closes) and the truncation then answers -EROFS. */
static void test_truncate_log_deleted_while_reading(void **state)
{
    struct th_store_fx *f = *state;
    struct chunk c;
    struct gr_iopool *pool = cold_log(f, &c);
    int64_t cut = f->log->segs[1]->base_offset + 4;
    assert_int_equal(gr_log_truncate_to(f->log, cut), -EAGAIN);
    assert_int_equal(gr_store_topic_delete(f->store, gr_store_topic_find(f->store, "r", 1)), 0);
    gr_iopool_drain(pool);
    assert_false(gr_log_truncation_pending(f->log));
    assert_int_equal(gr_log_truncate_to(f->log, cut), -EROFS);
    cold_log_end(f, pool);
    free(c.bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_keeps_bytes_epochs_producers, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test_setup_teardown(test_append_refusals_write_nothing, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test_setup_teardown(test_open_epoch_then_follower_then_leader, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test_setup_teardown(test_no_disk_wait_on_the_calling_thread, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test_setup_teardown(test_append_splits_at_rolls, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_middle_of_active, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_segment_boundary, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_across_segments, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_below_log_start_is_full, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_fully_and_start_at, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_refusals, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_reads_on_the_pool, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_rounds_capped, th_store_setup, th_store_teardown),
        cmocka_unit_test_setup_teardown(test_truncate_log_deleted_while_reading, th_store_setup,
                                        th_store_teardown),
        cmocka_unit_test(test_fail_each_truncation_syscall),
        cmocka_unit_test(test_crash_mid_truncation),
        cmocka_unit_test(test_crash_mid_full_truncation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
