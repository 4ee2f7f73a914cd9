/*
 * test_producer_ids.c: producer id block allocation (coordinator/producer_ids.h): ids in order from 0, one
 * durable save per block of 1000 and always BEFORE the block's first id is handed out, no reuse across
 * restarts (a restart skips the rest of the block), a failed save hands out nothing, a damaged record
 * refuses to open, the record codec.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coordinator/producer_ids.h"

struct mem_disk {
    uint8_t rec[GR_PRODUCER_ID_RECORD_BYTES];
    bool present;
    int saves;
    int fail_save; /* next save returns this when non-zero */
};

static int mem_load(void *ctx, uint8_t *buf, size_t len)
{
    struct mem_disk *d = ctx;
    if (!d->present) return -ENOENT;
    assert_int_equal(len, sizeof d->rec);
    memcpy(buf, d->rec, len);
    return 0;
}

static int mem_save(void *ctx, const uint8_t *buf, size_t len)
{
    struct mem_disk *d = ctx;
    if (d->fail_save) {
        int e = d->fail_save;
        d->fail_save = 0;
        return e;
    }
    assert_int_equal(len, sizeof d->rec);
    memcpy(d->rec, buf, len);
    d->present = true;
    d->saves++;
    return 0;
}

static int64_t saved_end(const struct mem_disk *d)
{
    int64_t v = -1;
    assert_int_equal(gr_producer_ids_decode(d->rec, sizeof d->rec, &v), 0);
    return v;
}

static void test_fresh_and_blocks(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_ids ids;
    assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
    assert_int_equal(d.saves, 0);
    for (int64_t i = 0; i < 2500; i++) {
        int64_t pid;
        assert_int_equal(gr_producer_ids_next(&ids, &pid), 0);
        assert_int_equal(pid, i);
        /* every id handed out is below the durable block end */
        assert_true(pid < saved_end(&d));
    }
    assert_int_equal(d.saves, 3);
    assert_int_equal(saved_end(&d), 3000);
}

static void test_no_reuse_across_restarts(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    int64_t highest = -1;
    for (int round = 0; round < 4; round++) {
        struct gr_producer_ids ids; /* a restart: the in-memory position is lost */
        assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
        for (int i = 0; i < 10 + 700 * round; i++) {
            int64_t pid;
            assert_int_equal(gr_producer_ids_next(&ids, &pid), 0);
            assert_true(pid > highest);
            highest = pid;
        }
    }
    /* rounds hand out 10, 710, 1410, 2110 ids from 0, 1000, 2000 and 4000: each restart skips the rest of
       the block it finds saved */
    assert_int_equal(highest, 4000 + 2110 - 1);
    assert_int_equal(saved_end(&d), 7000);
}

static void test_failed_save_hands_out_nothing(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_ids ids;
    assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
    int64_t pid = 77;
    d.fail_save = -EIO;
    assert_int_equal(gr_producer_ids_next(&ids, &pid), -EIO);
    assert_int_equal(pid, 77);
    assert_false(d.present);
    assert_int_equal(gr_producer_ids_next(&ids, &pid), 0);
    assert_int_equal(pid, 0);
    for (int i = 1; i < 1000; i++)
        assert_int_equal(gr_producer_ids_next(&ids, &pid), 0);
    assert_int_equal(pid, 999);
    d.fail_save = -ENOSPC; /* the next block's save fails: nothing from it is handed out */
    assert_int_equal(gr_producer_ids_next(&ids, &pid), -ENOSPC);
    assert_int_equal(saved_end(&d), 1000);
    assert_int_equal(gr_producer_ids_next(&ids, &pid), 0);
    assert_int_equal(pid, 1000);
    assert_int_equal(saved_end(&d), 2000);
}

static void test_damaged_record(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    gr_producer_ids_encode(5000, d.rec);
    d.present = true;
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_ids ids;
    assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
    int64_t pid;
    assert_int_equal(gr_producer_ids_next(&ids, &pid), 0);
    assert_int_equal(pid, 5000);
    d.rec[9] ^= 1; /* a flipped bit in the value: CRC mismatch */
    assert_int_equal(gr_producer_ids_open(&ids, &io), -EINVAL);
    gr_producer_ids_encode(-8, d.rec); /* a negative value never comes from us */
    assert_int_equal(gr_producer_ids_open(&ids, &io), -EINVAL);
    int64_t v;
    assert_int_equal(gr_producer_ids_decode(d.rec, 13, &v), -EINVAL);
    gr_producer_ids_encode(123456789012LL, d.rec);
    assert_int_equal(gr_producer_ids_decode(d.rec, sizeof d.rec, &v), 0);
    assert_int_equal(v, 123456789012LL);
    d.rec[0] = 9; /* unknown version */
    assert_int_equal(gr_producer_ids_decode(d.rec, sizeof d.rec, &v), -EINVAL);
}

static void test_exhausted(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    gr_producer_ids_encode(INT64_MAX - 10, d.rec);
    d.present = true;
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_ids ids;
    assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
    int64_t pid;
    assert_int_equal(gr_producer_ids_next(&ids, &pid), -EOVERFLOW);
}

/* Asynchronous use (Kafka's prefetch): the next block's save starts when 90% of the block is handed out,
   runs "elsewhere" (here: completed later by the test), and no id is ever handed out before its block end
   is durable: a take that finds the block used up with the save still in flight gets -EAGAIN. */
static void test_prefetch_async(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_ids ids;
    assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
    int64_t pid = -7;
    uint8_t rec[GR_PRODUCER_ID_RECORD_BYTES];
    assert_int_equal(gr_producer_ids_take(&ids, &pid), -EAGAIN); /* nothing saved yet */
    assert_true(gr_producer_ids_prefetch(&ids, rec));
    assert_false(gr_producer_ids_prefetch(&ids, rec)); /* one save in flight at most */
    assert_int_equal(gr_producer_ids_take(&ids, &pid), -EAGAIN);
    assert_int_equal(pid, -7);
    assert_int_equal(mem_save(&d, rec, sizeof rec), 0);
    gr_producer_ids_saved(&ids, 0);
    assert_int_equal(saved_end(&d), 1000);
    for (int64_t i = 0; i < 900; i++) {
        assert_int_equal(gr_producer_ids_take(&ids, &pid), 0);
        assert_int_equal(pid, i);
        if (i < 899) assert_false(gr_producer_ids_prefetch(&ids, rec)); /* not before 90% */
    }
    assert_true(gr_producer_ids_prefetch(&ids, rec)); /* 100 left: fetch the next block */
    int64_t v;
    assert_int_equal(gr_producer_ids_decode(rec, sizeof rec, &v), 0);
    assert_int_equal(v, 2000);
    for (int64_t i = 900; i < 1000; i++)
        assert_int_equal(gr_producer_ids_take(&ids, &pid), 0);
    assert_int_equal(pid, 999);
    assert_int_equal(gr_producer_ids_take(&ids, &pid), -EAGAIN); /* 1000's block end not durable yet */
    /* The save fails: still nothing; a new prefetch retries it. */
    gr_producer_ids_saved(&ids, -EIO);
    assert_int_equal(gr_producer_ids_take(&ids, &pid), -EAGAIN);
    assert_int_equal(saved_end(&d), 1000);
    assert_true(gr_producer_ids_prefetch(&ids, rec));
    assert_int_equal(mem_save(&d, rec, sizeof rec), 0);
    gr_producer_ids_saved(&ids, 0);
    assert_int_equal(gr_producer_ids_take(&ids, &pid), 0);
    assert_int_equal(pid, 1000);
    /* Many ids through a slow disk: saves complete only when a take would otherwise wait. */
    int saves = d.saves;
    bool in_flight = false;
    for (int64_t want = 1001; want < 4500; want++) {
        int r = gr_producer_ids_take(&ids, &pid);
        if (r == -EAGAIN) {
            assert_true(in_flight);
            assert_int_equal(mem_save(&d, rec, sizeof rec), 0);
            gr_producer_ids_saved(&ids, 0);
            in_flight = false;
            r = gr_producer_ids_take(&ids, &pid);
        }
        assert_int_equal(r, 0);
        assert_int_equal(pid, want);
        assert_true(pid < saved_end(&d)); /* never beyond a durable block end */
        if (!in_flight && gr_producer_ids_prefetch(&ids, rec)) in_flight = true;
    }
    assert_int_equal(d.saves - saves, 3); /* 2000, 3000, 4000: one per block */
    /* A restart resumes above everything saved (the prefetched block is skipped, never reused). */
    if (in_flight) {
        assert_int_equal(mem_save(&d, rec, sizeof rec), 0);
        gr_producer_ids_saved(&ids, 0);
    }
    struct gr_producer_ids again;
    assert_int_equal(gr_producer_ids_open(&again, &io), 0);
    assert_true(gr_producer_ids_prefetch(&again, rec));
    assert_int_equal(mem_save(&d, rec, sizeof rec), 0);
    gr_producer_ids_saved(&again, 0);
    assert_int_equal(gr_producer_ids_take(&again, &pid), 0);
    assert_true(pid > 4499);
}

/* A shared counter (cluster mode): the saved next block starts where the counter said, above the block in
   use; a counter below it is refused and changes nothing. */
static void test_claimed_block(void **state)
{
    (void)state;
    struct mem_disk d = {0};
    struct gr_producer_id_io io = {mem_load, mem_save, &d};
    struct gr_producer_ids ids;
    assert_int_equal(gr_producer_ids_open(&ids, &io), 0);
    uint8_t buf[GR_PRODUCER_ID_RECORD_BYTES];
    int64_t pid = -1;
    assert_int_equal(gr_producer_ids_claimed(&ids, 5000), -ERANGE); /* no save in flight */
    assert_true(gr_producer_ids_prefetch(&ids, buf));
    assert_int_equal(gr_producer_ids_claimed(&ids, 7000), 0);
    gr_producer_ids_saved(&ids, 0);
    for (int i = 0; i < 900; i++) {
        assert_int_equal(gr_producer_ids_take(&ids, &pid), 0);
        assert_int_equal(pid, 7000 + i);
    }
    assert_true(gr_producer_ids_prefetch(&ids, buf));               /* 90% handed out */
    assert_int_equal(gr_producer_ids_claimed(&ids, 7500), -ERANGE); /* below the block in use */
    assert_int_equal(gr_producer_ids_claimed(&ids, 12000), 0);
    gr_producer_ids_saved(&ids, 0);
    for (int i = 900; i < 1000; i++) {
        assert_int_equal(gr_producer_ids_take(&ids, &pid), 0);
        assert_int_equal(pid, 7000 + i);
    }
    assert_int_equal(gr_producer_ids_take(&ids, &pid), 0);
    assert_int_equal(pid, 12000); /* the claimed block, not 8000 */
    assert_int_equal(d.saves, 0); /* the counter's save is the binding's, never the file's */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_and_blocks),
        cmocka_unit_test(test_no_reuse_across_restarts),
        cmocka_unit_test(test_failed_save_hands_out_nothing),
        cmocka_unit_test(test_damaged_record),
        cmocka_unit_test(test_exhausted),
        cmocka_unit_test(test_prefetch_async),
        cmocka_unit_test(test_claimed_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
