/*
 * test_cleaner.c: log compaction (storage/cleaner.c). Random keyed streams with tombstones in every codec
 * cleaned against a model (after cleaning and tombstone expiry a full read holds exactly the model's
 * latest value per key), reopen after clean and unclean shutdown (recovery accepts the offset gaps),
 * the last batch of an active producer kept empty, readers during cleaning never seeing a key go
 * backwards, the cleaner thread picking the dirtiest log, a crash at every I/O step of a cleaning and
 * its swap, and the figures (bytes per second, time, dirty ratio before/after) printed for the notes.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/time.h"
#include "storage/cleaner.h"
#include "storage/internal.h"
#include "storage/tests/fault.h"
#include "storage/tests/helpers.h"

#define NKEYS 60
#define T0 1700000000000LL

/* The model: per key the sequence number of its latest value, -1 never written, -2 deleted. */
struct model {
    int64_t latest[NKEYS + 1]; /* index NKEYS: the sentinel key */
    int64_t seq;
};

struct rec_seen {
    int64_t offset;
    int key;       /* -1 keyless */
    int64_t value; /* -2 tombstone */
};

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return rng_state >> 8;
}

/* Appends one batch of `n` records with random keys (tombstone 1 in 6), codec as given. */
static void append_random(struct gr_log *log, struct model *m, int n, enum gr_codec codec, int64_t ts,
                          int64_t pid, int32_t seq)
{
    struct gr_record_in recs[32];
    char keys[32][16], vals[32][24];
    for (int i = 0; i < n; i++) {
        int k = (int)(rnd() % NKEYS);
        bool tomb = rnd() % 6 == 0;
        int64_t s = ++m->seq;
        snprintf(keys[i], sizeof(keys[i]), "k%03d", k);
        int vl = snprintf(vals[i], sizeof(vals[i]), "v%lld", (long long)s);
        recs[i] = (struct gr_record_in){.timestamp = ts + i,
                                        .key = {(const uint8_t *)keys[i], 4},
                                        .value = {tomb ? NULL : (const uint8_t *)vals[i], tomb ? -1 : vl}};
        m->latest[k] = tomb ? -2 : s;
    }
    struct gr_batch_params bp = {.base_offset = 0,
                                 .partition_leader_epoch = -1,
                                 .codec = codec,
                                 .log_append_time = -1,
                                 .producer_id = pid,
                                 .producer_epoch = pid >= 0 ? 0 : -1,
                                 .base_sequence = pid >= 0 ? seq : -1};
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_build(&bp, recs, n, &b, &len), 0);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
    gr_store_quiesce(
        log->store); /* a spare asked for at half a limit is ready at the roll (storage/roll.c) */
}

/* A batch for the sentinel key, large enough to roll the segment, so every random record is sealed. */
static void append_sentinel(struct gr_log *log, struct model *m, int64_t ts)
{
    static char big[3000];
    memset(big, 's', sizeof(big));
    struct gr_record_in r = {.timestamp = ts,
                             .key = {(const uint8_t *)"zzzz", 4},
                             .value = {(const uint8_t *)big, (int32_t)sizeof(big)}};
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .codec = GR_CODEC_NONE,
                                 .log_append_time = -1,
                                 .producer_id = -1,
                                 .producer_epoch = -1,
                                 .base_sequence = -1};
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_build(&bp, &r, 1, &b, &len), 0);
    struct gr_append_result res;
    assert_int_equal(gr_log_append(log, b, len, -1, &res), 0);
    free(b);
    gr_store_quiesce(
        log->store); /* a spare asked for at half a limit is ready at the roll (storage/roll.c) */
    m->latest[NKEYS] = ++m->seq;
}

/* Reads every record of the log (slices from the log start to the end), checking CRCs through the
   validator for stored data and that offsets only go up. Returns the count; records in *out. */
static int read_records(struct gr_log *log, struct rec_seen **out)
{
    int n = 0, cap = 256;
    struct rec_seen *v = malloc(sizeof(*v) * (size_t)cap);
    int64_t off = gr_log_start_offset(log), end = gr_log_end_offset(log), prev = -1;
    while (off < end) {
        struct gr_log_slice s;
        assert_int_equal(gr_log_read(log, off, 1 << 20, end, true, &s), 0);
        if (s.bytes == 0) break;
        uint8_t *buf = th_slice_bytes(&s);
        size_t pos = 0;
        const uint8_t *b;
        size_t blen;
        int r;
        while ((r = gr_batch_next(buf, (size_t)s.bytes, &pos, &b, &blen)) == 1) {
            const char *why = NULL;
            struct gr_batch_info info;
            int vr = gr_batch_validate_ex(b, blen, 0, &info, &why);
            if (vr) fail_msg("stored batch at %lld invalid: %s", (long long)gr_batch_base_offset(b), why);
            assert_true(gr_batch_base_offset(b) > prev);
            struct gr_record_iter it;
            assert_int_equal(gr_record_iter_init(&it, b, blen), 0);
            struct gr_record rec;
            while ((r = gr_record_iter_next(&it, &rec)) == 1) {
                assert_true(rec.offset > prev);
                prev = rec.offset;
                if (n == cap) v = realloc(v, sizeof(*v) * (size_t)(cap *= 2));
                int key = -1;
                if (rec.key.len == 4 && rec.key.ptr[0] == 'k')
                    key = atoi((const char *)rec.key.ptr + 1) % 1000;
                else if (rec.key.len == 4 && rec.key.ptr[0] == 'z')
                    key = NKEYS;
                int64_t val = -2;
                if (rec.value.len >= 0 && key < NKEYS) {
                    char tmp[24];
                    int l = rec.value.len < 23 ? rec.value.len : 23;
                    memcpy(tmp, rec.value.ptr, (size_t)l);
                    tmp[l] = 0;
                    val = atoll(tmp + 1);
                } else if (rec.value.len >= 0) {
                    val = 0;
                }
                v[n++] = (struct rec_seen){rec.offset, key, val};
            }
            assert_int_equal(r, 0);
            gr_record_iter_close(&it);
            if (gr_batch_last_offset(b) > prev) prev = gr_batch_last_offset(b);
            off = gr_batch_last_offset(b) + 1;
        }
        free(buf);
        gr_log_slice_release(&s);
    }
    *out = v;
    return n;
}

/* The latest value per key in a read equals the model's (tombstones: absent or a tombstone). With
   `exact`, every key appears at most once and deleted keys are gone (everything cleaned and expired). */
static void check_against_model(struct gr_log *log, const struct model *m, bool exact)
{
    struct rec_seen *v;
    int n = read_records(log, &v);
    int64_t last[NKEYS + 1];
    int times[NKEYS + 1] = {0};
    for (int k = 0; k <= NKEYS; k++)
        last[k] = -1;
    for (int i = 0; i < n; i++) {
        assert_true(v[i].key >= 0); /* no keyless records in these logs */
        last[v[i].key] = v[i].value;
        times[v[i].key]++;
    }
    for (int k = 0; k < NKEYS; k++) {
        if (m->latest[k] == -2) {
            if (exact)
                assert_int_equal(times[k], 0);
            else
                assert_true(last[k] == -2 || last[k] == -1);
        } else if (m->latest[k] >= 0) {
            if (last[k] != m->latest[k])
                fail_msg("key %d: read %lld, model %lld", k, (long long)last[k], (long long)m->latest[k]);
            if (exact) assert_int_equal(times[k], 1);
        } else {
            assert_int_equal(times[k], 0);
        }
    }
    free(v);
}

struct fx {
    char dir[64];
    struct gr_store_config cfg;
    struct gr_store *store;
    struct gr_topic *topic;
    struct gr_log *log;
};

static void open_store(struct fx *f)
{
    assert_int_equal(gr_store_open(&f->cfg, &f->store), 0);
    f->topic = gr_store_topic_find(f->store, "c", 1);
    f->log = f->topic ? gr_topic_log(f->topic, 0) : NULL;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    f->cfg.cleaner_enable = false; /* tests drive cleanings themselves unless they say otherwise */
    open_store(f);
    const char *k[] = {"cleanup.policy", "segment.bytes", "delete.retention.ms", "min.cleanable.dirty.ratio"};
    const char *v[] = {"compact", "2000", "1000", "0.01"};
    assert_int_equal(gr_store_topic_create(f->store, "c", 1, k, v, 4, &f->topic), 0);
    f->log = gr_topic_log(f->topic, 0);
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

static const enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_GZIP, GR_CODEC_SNAPPY, GR_CODEC_LZ4,
                                       GR_CODEC_ZSTD};

static void fill(struct fx *f, struct model *m, int batches, int64_t ts)
{
    for (int i = 0; i < batches; i++)
        append_random(f->log, m, 1 + (int)(rnd() % 8), codecs[rnd() % 5], ts + i, -1, 0);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
}

static void test_random_streams_against_model(void **state)
{
    struct fx *f = *state;
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    int64_t now = T0;
    for (int round = 0; round < 6; round++) {
        fill(f, &m, 60, now);
        int64_t leo = gr_log_end_offset(f->log);
        struct gr_clean_stats st;
        int err = gr_log_clean_now(f->log, now, &st);
        assert_int_equal(err, 0);
        assert_true(st.segments_in > 0);
        assert_true(st.bytes_written <= st.bytes_read);
        assert_int_equal(gr_log_end_offset(f->log), leo); /* offsets unchanged */
        check_against_model(f->log, &m, false);
        now += 100;
    }
    append_sentinel(f->log, &m, now);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    assert_int_equal(gr_log_clean_now(f->log, now, NULL), 0);        /* stamps horizons on new tombstones */
    assert_int_equal(gr_log_clean_now(f->log, now + 5000, NULL), 0); /* every horizon passed */
    check_against_model(f->log, &m, true);
    assert_true(gr_log_dirty_ratio(f->log, now + 5000) < 0.01);
    /* Clean close and reopen, then an unclean one (full validation of every segment with its gaps). */
    int64_t leo = gr_log_end_offset(f->log);
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    open_store(f);
    assert_int_equal(gr_log_end_offset(f->log), leo);
    check_against_model(f->log, &m, true);
    gr_store_close(f->store);
    char marker[128];
    snprintf(marker, sizeof(marker), "%s/.kafka_cleanshutdown", f->dir);
    assert_int_equal(unlink(marker), 0);
    char rp[128];
    snprintf(rp, sizeof(rp), "%s/recovery-point-offset-checkpoint", f->dir);
    unlink(rp);
    open_store(f);
    assert_int_equal(gr_log_end_offset(f->log), leo);
    check_against_model(f->log, &m, true);
    /* The log takes appends again and a later cleaning keeps working. */
    fill(f, &m, 30, now + 6000);
    append_sentinel(f->log, &m, now + 6000);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    assert_int_equal(gr_log_clean_now(f->log, now + 6000, NULL), 0);
    assert_int_equal(gr_log_clean_now(f->log, now + 9000, NULL), 0);
    check_against_model(f->log, &m, true);
}

static void test_tombstone_kept_until_horizon(void **state)
{
    struct fx *f = *state;
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    fill(f, &m, 80, T0);
    append_sentinel(f->log, &m, T0);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    assert_int_equal(gr_log_clean_now(f->log, T0, NULL), 0);
    /* Before the horizon: each deleted key still shows its tombstone (latest record), exactly once. */
    struct rec_seen *v;
    int n = read_records(f->log, &v);
    int tombs = 0, deleted = 0;
    for (int k = 0; k < NKEYS; k++)
        deleted += m.latest[k] == -2;
    for (int i = 0; i < n; i++)
        tombs += v[i].value == -2;
    free(v);
    assert_int_equal(tombs, deleted);
    assert_true(deleted > 0);
    /* Still before: nothing changes. At the horizon (delete.retention.ms = 1000 later): gone. */
    assert_int_equal(gr_log_clean_now(f->log, T0 + 999, NULL), 0);
    n = read_records(f->log, &v);
    tombs = 0;
    for (int i = 0; i < n; i++)
        tombs += v[i].value == -2;
    free(v);
    assert_int_equal(tombs, deleted);
    assert_int_equal(gr_log_clean_now(f->log, T0 + 1000, NULL), 0);
    check_against_model(f->log, &m, true);
}

static void test_producer_last_batch_kept_empty(void **state)
{
    struct fx *f = *state;
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    /* Producer 7 writes keys that later non-producer batches overwrite, in every key. */
    append_random(f->log, &m, 4, GR_CODEC_NONE, T0, 7, 0);
    append_random(f->log, &m, 4, GR_CODEC_LZ4, T0, 7, 4);
    int64_t last7 = gr_log_end_offset(f->log) - 1;
    for (int k = 0; k < NKEYS; k++) {
        char key[8], val[16];
        snprintf(key, sizeof(key), "k%03d", k);
        int vl = snprintf(val, sizeof(val), "v%lld", (long long)++m.seq);
        m.latest[k] = m.seq;
        struct gr_record_in r = {
            .timestamp = T0, .key = {(const uint8_t *)key, 4}, .value = {(const uint8_t *)val, vl}};
        struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                     .log_append_time = -1,
                                     .producer_id = -1,
                                     .producer_epoch = -1,
                                     .base_sequence = -1};
        uint8_t *b;
        size_t len;
        assert_int_equal(gr_batch_build(&bp, &r, 1, &b, &len), 0);
        struct gr_append_result res;
        assert_int_equal(gr_log_append(f->log, b, len, -1, &res), 0);
        gr_store_quiesce(f->store); /* spare ready at the roll (storage/roll.c) */
        free(b);
    }
    append_sentinel(f->log, &m, T0);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    assert_int_equal(gr_log_clean_now(f->log, T0, NULL), 0);
    check_against_model(f->log, &m, true);
    /* The producer's last batch is still there, empty, with its producer fields and sequence. */
    struct gr_log_slice s;
    assert_int_equal(gr_log_read(f->log, last7, 1 << 20, gr_log_end_offset(f->log), true, &s), 0);
    uint8_t *buf = th_slice_bytes(&s);
    assert_int_equal(gr_batch_producer_id(buf), 7);
    assert_int_equal(gr_batch_base_sequence(buf), 4);
    assert_int_equal(gr_batch_record_count(buf), 0);
    assert_int_equal(gr_batch_last_offset(buf), last7);
    free(buf);
    gr_log_slice_release(&s);
    /* Producer state rebuilt from the segments alone (snapshots removed) still knows producer 7. */
    gr_store_close(f->store);
    char pdir[sizeof f->dir + 8];
    snprintf(pdir, sizeof(pdir), "%s/c-0", f->dir);
    DIR *pd = opendir(pdir);
    assert_non_null(pd);
    struct dirent *de;
    int removed = 0;
    while ((de = readdir(pd)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 9 && strcmp(de->d_name + l - 9, ".snapshot") == 0) {
            assert_int_equal(unlinkat(dirfd(pd), de->d_name, 0), 0);
            removed++;
        }
    }
    closedir(pd);
    assert_true(removed > 0); /* the rebuild below must really start without a snapshot */
    open_store(f);
    const struct gr_producer_entry *e = gr_producer_state_find(gr_log_producer_state(f->log), 7);
    assert_non_null(e);
    assert_int_equal(gr_producer_entry_last_seq(e), 7);
}

/* A reader walking the log while cleanings are installed between its reads never sees a key's value go
   back to an older one. */
static void test_reader_never_goes_backwards(void **state)
{
    struct fx *f = *state;
    f->cfg.cleaner_enable = true;
    f->store->cfg.cleaner_enable = true;
    f->store->cfg.cleaner_backoff_ms = 0;
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    int64_t seen[NKEYS];
    for (int k = 0; k < NKEYS; k++)
        seen[k] = -1;
    int64_t pos = 0, now = T0;
    int cleanings = 0;
    for (int round = 0; round < 40; round++) {
        fill(f, &m, 10, now);
        struct gr_clean_stats st;
        cleanings += gr_store_cleaner_tick(f->store, now, &st);
        /* read a little: one slice */
        int64_t end = gr_log_end_offset(f->log);
        if (pos < gr_log_start_offset(f->log)) pos = gr_log_start_offset(f->log);
        struct gr_log_slice s;
        if (pos < end && gr_log_read(f->log, pos, 700, end, true, &s) == 0 && s.bytes > 0) {
            uint8_t *buf = th_slice_bytes(&s);
            size_t p = 0;
            const uint8_t *b;
            size_t blen;
            while (gr_batch_next(buf, (size_t)s.bytes, &p, &b, &blen) == 1) {
                struct gr_record_iter it;
                assert_int_equal(gr_record_iter_init(&it, b, blen), 0);
                struct gr_record rec;
                while (gr_record_iter_next(&it, &rec) == 1) {
                    if (rec.offset < pos) continue;
                    int k = atoi((const char *)rec.key.ptr + 1) % 1000;
                    if (rec.value.len >= 0) {
                        char tmp[24];
                        memcpy(tmp, rec.value.ptr, (size_t)rec.value.len);
                        tmp[rec.value.len] = 0;
                        int64_t val = atoll(tmp + 1);
                        assert_true(val > seen[k]);
                        seen[k] = val;
                    }
                }
                gr_record_iter_close(&it);
                pos = gr_batch_last_offset(b) + 1;
            }
            free(buf);
            gr_log_slice_release(&s);
        }
        now += 10;
        usleep(2000);
    }
    gr_store_cleaner_drain(f->store, now);
    print_message("reader: %d cleanings installed by the cleaner thread while reading\n", cleanings);
    assert_true(cleanings > 0);
    check_against_model(f->log, &m, false);
}

/* The figures for the notes: one large cleaning of a log with few keys. */
static void test_metrics(void **state)
{
    struct fx *f = *state;
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    const char *k[] = {"cleanup.policy", "segment.bytes", "delete.retention.ms"};
    const char *v[] = {"compact", "1048576", "1000"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "big", 1, k, v, 3, &t), 0);
    struct gr_log *log = gr_topic_log(t, 0);
    for (int i = 0; i < 20000; i++)
        append_random(log, &m, 16, i % 2 ? GR_CODEC_LZ4 : GR_CODEC_NONE, T0 + i, -1, 0);
    append_sentinel(log, &m, T0);
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    struct gr_clean_stats st;
    int64_t t0 = gr_time_mono_ms();
    assert_int_equal(gr_log_clean_now(log, T0, &st), 0);
    int64_t ms = gr_time_mono_ms() - t0;
    print_message(
        "cleaning: %d segments %lld bytes -> %d segments %lld bytes, %lld/%lld records kept, %lld ms "
        "(%.1f MB/s read), dirty ratio %.3f -> %.3f\n",
        st.segments_in, (long long)st.bytes_read, st.segments_out, (long long)st.bytes_written,
        (long long)st.records_kept, (long long)st.records_read, (long long)ms,
        ms ? (double)st.bytes_read / (double)ms / 1000.0 : 0.0, st.dirty_ratio_before, st.dirty_ratio_after);
    assert_true(st.dirty_ratio_before > 0.9);
    assert_true(st.dirty_ratio_after < 0.1);
    assert_true(st.bytes_written < st.bytes_read / 10);
}

/* log.cleaner.io.max.bytes.per.second bounds the cleaner's reads + writes. */
static void test_io_rate_bounded(void **state)
{
    struct fx *f = *state;
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    const char *k[] = {"cleanup.policy", "segment.bytes"};
    const char *v[] = {"compact", "1048576"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(f->store, "rate", 1, k, v, 2, &t), 0);
    struct gr_log *log = gr_topic_log(t, 0);
    for (int i = 0; i < 8000; i++)
        append_random(log, &m, 16, GR_CODEC_NONE, T0 + i, -1, 0);
    append_sentinel(log, &m, T0);
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    f->store->cfg.cleaner_io_bytes_per_second = 4e6; /* about 2.4 MB to read: >= 0.6 s */
    struct gr_clean_stats st;
    int64_t t0 = gr_time_mono_ms();
    assert_int_equal(gr_log_clean_now(log, T0, &st), 0);
    int64_t ms = gr_time_mono_ms() - t0;
    double floor_ms =
        (double)(2 * st.bytes_read + st.bytes_written) * 1000.0 / 4e6; /* map pass + copy pass */
    print_message(
        "rate-limited cleaning: %lld bytes read twice, %lld written in %lld ms (floor %.0f ms at 4 MB/s)\n",
        (long long)st.bytes_read, (long long)st.bytes_written, (long long)ms, floor_ms);
    assert_true(st.bytes_read > 1500000);
    assert_true((double)ms >= floor_ms * 0.9);
    check_against_model(log, &m, false);
}

/* A dedupe buffer too small for the dirty section: the cleaning stops where the map filled and the next
   ones finish the job. */
static void test_small_dedupe_buffer(void **state)
{
    struct fx *f = *state;
    f->store->cfg.cleaner_dedupe_buffer_bytes = 24 * 40; /* 36 keys */
    struct model m;
    memset(&m, 0xff, sizeof(m));
    m.seq = 0;
    fill(f, &m, 80, T0);
    append_sentinel(f->log, &m, T0);
    gr_log_set_high_watermark(f->log, gr_log_end_offset(f->log));
    struct gr_clean_stats st;
    int rounds = 0;
    int64_t end = -1;
    while (rounds < 40) {
        int err = gr_log_clean_now(f->log, T0 + 5000, &st);
        assert_int_equal(err, 0);
        if (st.first_dirty_offset >= st.end_offset) break; /* nothing was dirty any more */
        assert_true(st.keys_mapped <= 36);
        assert_true(st.end_offset > end);
        end = st.end_offset;
        rounds++;
        check_against_model(f->log, &m, false);
    }
    assert_true(rounds > 1);
    /* After the map covered everything once, a cleaning from the start leaves exactly the latest values. */
    f->store->cfg.cleaner_dedupe_buffer_bytes = 1 << 20;
    f->log->cleaner_checkpoint = 0;
    assert_int_equal(gr_log_clean_now(f->log, T0 + 5000, NULL), 0);
    assert_int_equal(gr_log_clean_now(f->log, T0 + 9000, NULL), 0);
    check_against_model(f->log, &m, true);
}

/* ---- crash at every step ---- */

static void crash_prepare(const char *dir, struct model *m)
{
    struct gr_store_config cfg;
    th_config(&cfg, dir);
    cfg.cleaner_enable = false;
    struct gr_store *store;
    assert_int_equal(gr_store_open(&cfg, &store), 0);
    const char *k[] = {"cleanup.policy", "segment.bytes", "delete.retention.ms"};
    const char *v[] = {"compact", "1500", "0"};
    struct gr_topic *t;
    assert_int_equal(gr_store_topic_create(store, "c", 1, k, v, 3, &t), 0);
    struct gr_log *log = gr_topic_log(t, 0);
    memset(m, 0xff, sizeof(*m));
    m->seq = 0;
    rng_state = 777;
    for (int i = 0; i < 40; i++)
        append_random(log, m, 1 + (int)(rnd() % 6), codecs[i % 5], T0 + i, -1, 0);
    append_sentinel(log, m, T0);
    gr_store_close(store);
}

static void crash_clean(const char *dir)
{
    struct gr_store_config cfg;
    th_config(&cfg, dir);
    cfg.cleaner_enable = false;
    struct gr_store *store;
    if (gr_store_open(&cfg, &store) < 0) return;
    struct gr_log *log = gr_topic_log(gr_store_topic_find(store, "c", 1), 0);
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    gr_log_clean_now(log, T0, NULL);
    gr_store_quiesce(store);
    gr_store_close(store);
}

static void crash_check(const char *dir, const struct model *m, int64_t leo, long point)
{
    struct gr_store_config cfg;
    th_config(&cfg, dir);
    cfg.cleaner_enable = false;
    struct gr_store *store;
    int err = gr_store_open(&cfg, &store);
    if (err) fail_msg("crash at I/O %ld: reopen failed (%d)", point, err);
    struct gr_log *log = gr_topic_log(gr_store_topic_find(store, "c", 1), 0);
    if (gr_log_end_offset(log) != leo)
        fail_msg("crash at I/O %ld: log end %lld, want %lld", point, (long long)gr_log_end_offset(log),
                 (long long)leo);
    check_against_model(log, m, false);
    /* No leftovers of the swap. */
    char pdir[128];
    snprintf(pdir, sizeof(pdir), "%s/c-0", dir);
    DIR *d = opendir(pdir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".swap") || strstr(de->d_name, ".cleaned") || strstr(de->d_name, ".deleted"))
            fail_msg("crash at I/O %ld: %s left over", point, de->d_name);
    closedir(d);
    /* And it cleans to the exact latest values afterwards. */
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    assert_int_equal(gr_log_clean_now(log, T0 + 10, NULL), 0);
    assert_int_equal(gr_log_clean_now(log, T0 + 20, NULL), 0);
    gr_store_quiesce(store);
    check_against_model(log, m, true);
    gr_store_close(store);
}

static void test_crash_at_every_step(void **state)
{
    (void)state;
    gr_log_set_level((enum gr_log_level)(GR_LOG_ERROR + 1));
    char dir[64];
    struct model m;
    th_tmpdir(dir, sizeof(dir));
    crash_prepare(dir, &m);
    /* Dry run: count the mutating I/O calls of open + clean + swap + close. */
    fault_install();
    fault_crash_track(dir);
    crash_clean(dir);
    long total = fault_io_count();
    fault_uninstall();
    th_rmtree(dir);
    assert_true(total > 10);
    long checked = 0;
    for (long iter = 0; iter < 2 * total; iter++) {
        long point = iter % total + 1;
        bool tear = iter >= total;
        th_tmpdir(dir, sizeof(dir));
        crash_prepare(dir, &m);
        struct gr_store_config cfg;
        th_config(&cfg, dir);
        struct gr_store *s0;
        assert_int_equal(gr_store_open(&cfg, &s0), 0);
        int64_t leo = gr_log_end_offset(gr_topic_log(gr_store_topic_find(s0, "c", 1), 0));
        gr_store_close(s0);
        fault_install();
        fault_crash_track(dir);
        fault_crash_at(point);
        crash_clean(dir);
        fault_crash_apply((unsigned)iter, tear);
        fault_uninstall();
        th_flush_reset();
        crash_check(dir, &m, leo, point);
        checked++;
        th_rmtree(dir);
    }
    gr_log_set_level(GR_LOG_INFO);
    print_message("cleaner crash mode: %ld I/O points, %ld crashes checked\n", total, checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_random_streams_against_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstone_kept_until_horizon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_producer_last_batch_kept_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_never_goes_backwards, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_dedupe_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_rate_bounded, setup, teardown),
        cmocka_unit_test(test_crash_at_every_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
