/*
 * test_cleaner.c: log compaction (storage/cleaner.c). Random keyed streams with tombstones in every codec
 * cleaned against a model (after cleaning and tombstone expiry a full read holds exactly the model's
 * latest value per key), reopen after clean and unclean shutdown (recovery accepts the offset gaps),
 * the last batch of an active producer kept empty, readers during cleaning never seeing a key go
 * backwards, the cleaner thread picking the dirtiest log, a crash at every I/O step of a cleaning and
 * its swap, and the figures (bytes per second, time, dirty ratio before/after) printed for the notes.
 * Transactions: committed and aborted transactions interleaved with plain records, cleaned round after
 * round (a read_committed read holds exactly the committed latest values, the markers as Kafka keeps them,
 * the .txnindex files on disk, nothing cleaned at or past the last stable offset, an unclean reopen), and
 * the crash at every step again with a transactional workload.
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

/* ---- transactions ---- */

/* The transactional workload's writes, in offset order: each record's key and value, and the transaction
   it belongs to (-1 plain); txn_outcome[t]: 1 committed, 0 aborted, -1 open. */
struct txn_write {
    int64_t offset;
    int key;
    int64_t value; /* -2 tombstone */
    int txn;
};

struct txn_model {
    struct txn_write w[4096];
    int nw;
    int txn_outcome[256];
    int ntxn;
    int64_t seq;
    int32_t pseq[8]; /* next sequence per producer id 1..7 */
};

/* Appends one batch of `n` records (keys from `keys`, value "v<seq>", tombstone where tomb[i]) as producer
   `pid` (-1 plain) in transaction `txn`. Returns the append's error (0 on success). */
static int txn_append(struct gr_log *log, struct txn_model *m, int64_t pid, int txn, const int *keys,
                      const bool *tomb, int n, int64_t ts)
{
    struct gr_record_in recs[16];
    char kb[16][8], vb[16][24];
    for (int i = 0; i < n; i++) {
        snprintf(kb[i], sizeof(kb[i]), "k%03d", keys[i]);
        int vl = snprintf(vb[i], sizeof(vb[i]), "v%lld", (long long)(m->seq + 1 + i));
        recs[i] = (struct gr_record_in){
            .timestamp = ts + i,
            .key = {(const uint8_t *)kb[i], 4},
            .value = {tomb && tomb[i] ? NULL : (const uint8_t *)vb[i], tomb && tomb[i] ? -1 : vl}};
    }
    struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                 .codec = GR_CODEC_NONE,
                                 .attributes = pid >= 0 ? GR_BATCH_ATTR_TRANSACTIONAL : 0,
                                 .log_append_time = -1,
                                 .producer_id = pid,
                                 .producer_epoch = pid >= 0 ? 0 : -1,
                                 .base_sequence = pid >= 0 ? m->pseq[pid] : -1};
    uint8_t *b;
    size_t len;
    assert_int_equal(gr_batch_build(&bp, recs, n, &b, &len), 0);
    struct gr_append_result res;
    int err = gr_log_append(log, b, len, -1, &res);
    free(b);
    gr_store_quiesce(log->store);
    if (err) return err;
    if (pid >= 0) m->pseq[pid] += n;
    for (int i = 0; i < n; i++) {
        m->seq++;
        m->w[m->nw++] = (struct txn_write){res.base_offset + i, keys[i], tomb && tomb[i] ? -2 : m->seq, txn};
    }
    return 0;
}

static int txn_end(struct gr_log *log, struct txn_model *m, int64_t pid, int txn, bool commit)
{
    struct gr_append_result res;
    int err = gr_log_write_marker(log, pid, 0, 1, commit ? GR_CONTROL_COMMIT : GR_CONTROL_ABORT, 0, T0, &res);
    gr_store_quiesce(log->store);
    if (err == 0) m->txn_outcome[txn] = commit ? 1 : 0;
    return err;
}

/* The committed latest value per key of the writes below `end` (model conventions: -1 never, -2 deleted).
 */
static void txn_latest(const struct txn_model *m, int64_t end, struct model *out)
{
    memset(out, 0xff, sizeof(*out));
    for (int i = 0; i < m->nw; i++)
        if (m->w[i].offset < end && (m->w[i].txn < 0 || m->txn_outcome[m->w[i].txn] == 1))
            out->latest[m->w[i].key] = m->w[i].value;
}

/* Where a read_committed fetch stops: the last stable offset (the high watermark is the log end here). */
static int64_t committed_end(struct gr_log *log)
{
    int64_t fuo = gr_log_first_unstable_offset(log);
    return fuo >= 0 ? fuo : gr_log_end_offset(log);
}

/* What a read_committed consumer gets reading from the log start to the end: the records of every batch
   except the data batches of aborted transactions (Kafka's CompletedFetch: the aborted transactions of the
   fetch, a producer's data skipped from its aborted transaction's first offset to its ABORT marker). Also
   counts the control batches with and without records. Stops at the last stable offset. Returns the record
   count (*out malloc'd). */
static int read_committed(struct gr_log *log, struct rec_seen **out, int *markers, int *empty_markers)
{
    int64_t end = committed_end(log);
    struct gr_aborted_txn atx[512];
    int natx = gr_log_aborted_txns(log, gr_log_start_offset(log), end, atx, 512);
    assert_true(natx <= 512);
    int64_t abort_pids[512];
    int nab = 0, next = 0, n = 0, cap = 256;
    *markers = *empty_markers = 0;
    struct rec_seen *v = malloc(sizeof(*v) * (size_t)cap);
    int64_t off = gr_log_start_offset(log);
    while (off < end) {
        struct gr_log_slice s;
        assert_int_equal(gr_log_read(log, off, 1 << 20, end, true, &s), 0);
        if (s.bytes == 0) break;
        uint8_t *buf = th_slice_bytes(&s);
        size_t pos = 0;
        const uint8_t *b;
        size_t blen;
        while (gr_batch_next(buf, (size_t)s.bytes, &pos, &b, &blen) == 1 && gr_batch_base_offset(b) < end) {
            const char *why = NULL;
            struct gr_batch_info info;
            if (gr_batch_validate_ex(b, blen, 0, &info, &why))
                fail_msg("stored batch at %lld invalid: %s", (long long)gr_batch_base_offset(b), why);
            int64_t pid = gr_batch_producer_id(b);
            while (next < natx && atx[next].first_offset <= gr_batch_last_offset(b))
                abort_pids[nab++] = atx[next++].producer_id;
            off = gr_batch_last_offset(b) + 1;
            bool aborted_pid = false;
            for (int i = 0; i < nab; i++)
                aborted_pid |= abort_pids[i] == pid;
            if (gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL) {
                int type;
                int32_t ce;
                if (gr_batch_record_count(b) == 0) {
                    (*empty_markers)++;
                    continue;
                }
                (*markers)++;
                if (gr_control_marker_parse(b, blen, &type, &ce) == 0 && type == GR_CONTROL_ABORT)
                    for (int i = 0; i < nab; i++)
                        if (abort_pids[i] == pid) abort_pids[i--] = abort_pids[--nab];
                continue;
            }
            if ((gr_batch_attributes(b) & GR_BATCH_ATTR_TRANSACTIONAL) && aborted_pid) continue;
            struct gr_record_iter it;
            assert_int_equal(gr_record_iter_init(&it, b, blen), 0);
            struct gr_record rec;
            int r;
            while ((r = gr_record_iter_next(&it, &rec)) == 1) {
                if (n == cap) v = realloc(v, sizeof(*v) * (size_t)(cap *= 2));
                int key =
                    rec.key.len == 4 && rec.key.ptr[0] == 'k' ? atoi((const char *)rec.key.ptr + 1) : NKEYS;
                int64_t val = 0;
                if (rec.value.len < 0) {
                    val = -2;
                } else if (key < NKEYS) {
                    char tmp[24];
                    int l = rec.value.len < 23 ? rec.value.len : 23;
                    memcpy(tmp, rec.value.ptr, (size_t)l);
                    tmp[l] = 0;
                    val = atoll(tmp + 1);
                }
                v[n++] = (struct rec_seen){rec.offset, key, val};
            }
            assert_int_equal(r, 0);
            gr_record_iter_close(&it);
        }
        free(buf);
        gr_log_slice_release(&s);
    }
    *out = v;
    return n;
}

/* The committed read holds the model's latest value of every key below NKEYS (tombstones: absent or a
   tombstone); with `exact`, each key once and deleted keys gone. Returns the markers seen. */
static int check_committed(struct gr_log *log, const struct txn_model *tm, bool exact, int *empty_markers)
{
    struct model m;
    txn_latest(tm, committed_end(log), &m);
    struct rec_seen *v;
    int markers, em;
    int n = read_committed(log, &v, &markers, &em);
    int64_t last[NKEYS + 1];
    int times[NKEYS + 1] = {0};
    for (int k = 0; k <= NKEYS; k++)
        last[k] = -1;
    for (int i = 0; i < n; i++) {
        last[v[i].key] = v[i].value;
        times[v[i].key]++;
    }
    for (int k = 0; k < NKEYS; k++) {
        if (m.latest[k] == -2) {
            if (exact && times[k]) fail_msg("key %d: deleted, read %d times", k, times[k]);
            if (!exact) assert_true(last[k] == -2 || last[k] == -1);
        } else if (m.latest[k] >= 0) {
            if (last[k] != m.latest[k])
                fail_msg("key %d: read %lld, model %lld", k, (long long)last[k], (long long)m.latest[k]);
            if (exact && times[k] != 1) fail_msg("key %d: read %d times", k, times[k]);
        } else if (times[k]) {
            fail_msg("key %d: never committed, read %d times (value %lld)", k, times[k], (long long)last[k]);
        }
    }
    free(v);
    if (empty_markers) *empty_markers = em;
    return markers;
}

/* Every .txnindex file in the partition directory belongs to a segment (.log) of the log; returns how many
   there are and the number of entries in them (sum of sizes / 34). */
static int txnindex_files(const char *dir, int *entries)
{
    char pdir[128];
    snprintf(pdir, sizeof(pdir), "%s/c-0", dir);
    DIR *d = opendir(pdir);
    assert_non_null(d);
    struct dirent *de;
    int files = 0;
    *entries = 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 9 || strcmp(de->d_name + l - 9, ".txnindex") != 0) continue;
        char logname[64], path[128 + sizeof de->d_name + 2];
        snprintf(logname, sizeof(logname), "%.*s.log", (int)(l - 9), de->d_name);
        if (faccessat(dirfd(d), logname, F_OK, 0) != 0) fail_msg("%s has no segment", de->d_name);
        snprintf(path, sizeof(path), "%s/%s", pdir, de->d_name);
        FILE *fp = fopen(path, "rb");
        assert_non_null(fp);
        fseek(fp, 0, SEEK_END);
        long sz = ftell(fp);
        fclose(fp);
        assert_int_equal(sz % GR_TXN_INDEX_ENTRY_BYTES, 0);
        assert_true(sz > 0);
        *entries += (int)(sz / GR_TXN_INDEX_ENTRY_BYTES);
        files++;
    }
    closedir(d);
    return files;
}

/* A big plain record for key NKEYS: rolls the segment. */
static void txn_roll(struct gr_log *log, struct txn_model *m)
{
    struct model dummy;
    append_sentinel(log, &dummy, T0);
    (void)m;
}

/* A cleaning and its swap to the end (the housekeeping renames done). */
static void txn_clean(struct fx *f, int64_t now, struct gr_clean_stats *st)
{
    assert_int_equal(gr_log_clean_now(f->log, now, st), 0);
    gr_store_quiesce(f->store);
}

static void test_transactions_cleaned(void **state)
{
    struct fx *f = *state;
    static struct txn_model tm;
    memset(&tm, 0, sizeof(tm));
    struct gr_log *log = f->log;
    int k01[] = {0, 1}, k02[] = {0, 2}, k13[] = {1, 3}, k4[] = {4}, k0[] = {0}, k5[] = {5}, k6[] = {6},
        k7[] = {7};
    /* plain k0 k1; txn 0 (pid 1, committed) k0 k2; txn 1 (pid 2, aborted) k1 k3 interleaved; plain k4 */
    assert_int_equal(txn_append(log, &tm, -1, -1, k01, NULL, 2, T0), 0);
    tm.txn_outcome[0] = tm.txn_outcome[1] = -1;
    assert_int_equal(txn_append(log, &tm, 1, 0, k02, NULL, 2, T0), 0);
    assert_int_equal(txn_append(log, &tm, 2, 1, k13, NULL, 2, T0), 0);
    txn_roll(log, &tm);
    assert_int_equal(txn_append(log, &tm, -1, -1, k4, NULL, 1, T0), 0);
    assert_int_equal(txn_end(log, &tm, 1, 0, true), 0);
    assert_int_equal(txn_end(log, &tm, 2, 1, false), 0);
    /* txn 2 (pid 2, aborted) overwrites k0; txn 3 (pid 1, committed) k5 */
    tm.txn_outcome[2] = tm.txn_outcome[3] = -1;
    assert_int_equal(txn_append(log, &tm, 2, 2, k0, NULL, 1, T0), 0);
    txn_roll(log, &tm);
    assert_int_equal(txn_append(log, &tm, 1, 3, k5, NULL, 1, T0), 0);
    assert_int_equal(txn_end(log, &tm, 2, 2, false), 0);
    assert_int_equal(txn_end(log, &tm, 1, 3, true), 0);
    txn_roll(log, &tm);
    /* txn 4 (pid 3) left open: nothing at or above its first offset is cleaned */
    tm.txn_outcome[4] = -1;
    int64_t lso = gr_log_end_offset(log);
    assert_int_equal(txn_append(log, &tm, 3, 4, k6, NULL, 1, T0), 0);
    txn_roll(log, &tm);
    assert_int_equal(txn_append(log, &tm, -1, -1, k7, NULL, 1, T0), 0);
    txn_roll(log, &tm);
    assert_int_equal(txn_append(log, &tm, -1, -1, k7, NULL, 1, T0), 0);
    txn_roll(log, &tm);
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    assert_int_equal(gr_log_first_unstable_offset(log), lso);
    int files, entries;
    assert_int_equal(txnindex_files(f->dir, &entries), 2); /* one per segment with an ABORT marker */
    assert_int_equal(entries, 2);

    /* Round 1: aborted data gone (and never in the key map: k0 keeps txn 0's value, k1 the plain one);
       every marker stays (a batch of each transaction was read); the ABORT entries move into the cleaned
       segments' .txnindex; the merged segments' files are gone. */
    struct gr_clean_stats st;
    txn_clean(f, T0, &st);
    assert_true(st.segments_in > 0);
    assert_true(st.end_offset <= lso);
    int em;
    int markers = check_committed(log, &tm, false, &em);
    assert_int_equal(markers, 4);
    assert_int_equal(em, 0);
    files = txnindex_files(f->dir, &entries);
    assert_int_equal(entries, 2);
    assert_true(files >= 1);
    struct gr_aborted_txn atx[8];
    int natx = gr_log_aborted_txns(log, 0, gr_log_end_offset(log), atx, 8);
    assert_int_equal(natx, 2);
    assert_int_equal(atx[0].producer_id, 2);
    assert_int_equal(atx[1].producer_id, 2);
    {
        struct rec_seen *v;
        int mk, e2, n = read_records(log, &v), k7_times = 0;
        (void)mk;
        (void)e2;
        for (int i = 0; i < n; i++) {
            assert_true(v[i].key != 3); /* k3 existed only in the aborted txn 1 */
            k7_times += v[i].key == 7;
        }
        assert_int_equal(k7_times, 2); /* above the last stable offset: not cleaned */
        free(v);
    }

    /* Round 2: nothing of txn 1 is left, so its ABORT marker gets a delete horizon and its entry is
       dropped; txn 2's data batch is producer 2's last, kept empty (its sequence), so its marker and entry
       stay (Kafka: a batch of the transaction is still there); the COMMIT markers stay (data there). */
    txn_clean(f, T0 + 10, NULL);
    markers = check_committed(log, &tm, false, &em);
    assert_int_equal(markers + em, 4);
    assert_int_equal(txnindex_files(f->dir, &entries), 1);
    assert_int_equal(entries, 1);
    assert_int_equal(gr_log_aborted_txns(log, 0, gr_log_end_offset(log), atx, 8), 1);
    assert_int_equal(atx[0].producer_id, 2);
    assert_int_equal(atx[0].first_offset, tm.w[7].offset); /* txn 2's batch (k0) */

    /* Round 3, past delete.retention.ms (1000): txn 1's ABORT marker is gone (or left empty where a
       segment's last batch must stay); the others remain. */
    txn_clean(f, T0 + 2000, NULL);
    markers = check_committed(log, &tm, false, &em);
    assert_int_equal(markers, 3);

    /* Plain records overwrite every committed key: the committed data batches go, then their COMMIT
       markers after their horizon. */
    int ow[] = {0, 2, 5};
    assert_int_equal(txn_append(log, &tm, -1, -1, ow, NULL, 3, T0), 0);
    txn_roll(log, &tm);
    assert_int_equal(txn_end(log, &tm, 3, 4, true), 0); /* closes the open one: all cleanable now */
    txn_roll(log, &tm);
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    assert_int_equal(gr_log_first_unstable_offset(log), -1);
    txn_clean(f, T0 + 3000, &st);
    txn_clean(f, T0 + 3010, NULL);
    txn_clean(f, T0 + 5000, NULL);
    markers = check_committed(log, &tm, true, &em);
    /* txn 0's COMMIT went with its data; txn 3's stays with producer 1's last batch (kept empty), txn 2's
       ABORT with producer 2's, txn 4's COMMIT with its data (k6, the latest) */
    assert_int_equal(markers, 3);

    /* Reopen after an unclean shutdown (every segment replayed, empty control batches included): same
       read, no open transaction. */
    gr_store_quiesce(f->store);
    gr_store_close(f->store);
    char path[128];
    snprintf(path, sizeof(path), "%s/.kafka_cleanshutdown", f->dir);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof(path), "%s/recovery-point-offset-checkpoint", f->dir);
    unlink(path);
    open_store(f);
    assert_int_equal(gr_log_first_unstable_offset(f->log), -1);
    int markers2 = check_committed(f->log, &tm, true, NULL);
    assert_int_equal(markers2, markers);
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

/* The transactional variant (crash_txn): two producers' transactions committed and aborted between plain
   batches, every transaction ended before the sentinel. */
static bool crash_txn;
static struct txn_model crash_tm;

static void crash_txn_workload(struct gr_log *log)
{
    memset(&crash_tm, 0, sizeof(crash_tm));
    int open_txn[3] = {-1, -1, -1};
    for (int i = 0; i < 40; i++) {
        int keys[6];
        bool tomb[6];
        int n = 1 + (int)(rnd() % 5);
        for (int k = 0; k < n; k++) {
            keys[k] = (int)(rnd() % 20);
            tomb[k] = rnd() % 6 == 0;
        }
        int what = (int)(rnd() % 4); /* 0 plain, 1-2 producer 1/2 writes, 3 a producer ends its txn */
        if (what == 0) {
            assert_int_equal(txn_append(log, &crash_tm, -1, -1, keys, tomb, n, T0 + i), 0);
        } else if (what < 3) {
            if (open_txn[what] < 0) {
                open_txn[what] = crash_tm.ntxn++;
                crash_tm.txn_outcome[open_txn[what]] = -1;
            }
            assert_int_equal(txn_append(log, &crash_tm, what, open_txn[what], keys, tomb, n, T0 + i), 0);
        } else {
            int p = 1 + (int)(rnd() % 2);
            if (open_txn[p] >= 0) assert_int_equal(txn_end(log, &crash_tm, p, open_txn[p], rnd() % 2), 0);
            open_txn[p] = -1;
        }
    }
    for (int p = 1; p < 3; p++)
        if (open_txn[p] >= 0) assert_int_equal(txn_end(log, &crash_tm, p, open_txn[p], p == 1), 0);
}

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
    if (crash_txn) {
        crash_txn_workload(log);
    } else {
        for (int i = 0; i < 40; i++)
            append_random(log, m, 1 + (int)(rnd() % 6), codecs[i % 5], T0 + i, -1, 0);
    }
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
    if (crash_txn) {
        assert_int_equal(gr_log_first_unstable_offset(log), -1);
        check_committed(log, &crash_tm, false, NULL);
        int entries;
        txnindex_files(dir, &entries); /* every .txnindex belongs to a segment */
    } else {
        check_against_model(log, m, false);
    }
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
    if (crash_txn) {
        check_committed(log, &crash_tm, true, NULL);
        int entries;
        txnindex_files(dir, &entries);
    } else {
        check_against_model(log, m, true);
    }
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
    print_message("cleaner crash mode%s: %ld I/O points, %ld crashes checked\n",
                  crash_txn ? " (transactions)" : "", total, checked);
}

/* The same with transactions: the .txnindex of the cleaned segments and the merged ones' files. */
static void test_crash_with_transactions(void **state)
{
    crash_txn = true;
    /* The workload makes the case: aborted transactions whose ABORT markers stay, with entries, in the
       cleaned segments' .txnindex. */
    char dir[64];
    struct model m;
    th_tmpdir(dir, sizeof(dir));
    crash_prepare(dir, &m);
    int aborted = 0, entries;
    for (int t = 0; t < crash_tm.ntxn; t++)
        aborted += crash_tm.txn_outcome[t] == 0;
    assert_true(aborted >= 3);
    crash_clean(dir);
    assert_true(txnindex_files(dir, &entries) > 0);
    assert_true(entries > 0);
    th_rmtree(dir);
    test_crash_at_every_step(state);
    crash_txn = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_random_streams_against_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstone_kept_until_horizon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_producer_last_batch_kept_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transactions_cleaned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_never_goes_backwards, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_dedupe_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_rate_bounded, setup, teardown),
        cmocka_unit_test(test_crash_at_every_step),
        cmocka_unit_test(test_crash_with_transactions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
