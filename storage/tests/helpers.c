/*
 * helpers.c: see helpers.h.
 */
#include "storage/tests/helpers.h"
#include "storage/producer_state.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void th_tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/gr-storage-test-XXXXXX");
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        abort();
    }
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void th_rmtree(const char *path)
{
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

uint8_t *th_batch(const struct th_batch_spec *spec, size_t *len)
{
    struct gr_record_in *recs = calloc((size_t)spec->count, sizeof(*recs));
    char **vals = calloc((size_t)spec->count, sizeof(char *));
    for (int32_t i = 0; i < spec->count; i++) {
        size_t vb = spec->value_bytes < 24 ? 24 : spec->value_bytes;
        vals[i] = malloc(vb);
        memset(vals[i], 'x', vb);
        int n = snprintf(vals[i], vb, "%u:%d", spec->tag, i);
        vals[i][n] = spec->value_bytes < 24 ? '\0' : 'x';
        recs[i].timestamp = spec->ts0 + spec->ts_step * i;
        recs[i].key.ptr = NULL;
        recs[i].key.len = -1;
        recs[i].value.ptr = (const uint8_t *)vals[i];
        recs[i].value.len = spec->value_bytes < 24 ? n : (int32_t)spec->value_bytes;
    }
    struct gr_batch_params bp = {
        .base_offset = 0,
        .partition_leader_epoch = -1,
        .codec = spec->codec,
        .attributes = spec->transactional ? GR_BATCH_ATTR_TRANSACTIONAL : 0,
        .log_append_time = -1,
        .producer_id = spec->producer_id,
        .producer_epoch = spec->producer_id >= 0 ? spec->producer_epoch : -1,
        .base_sequence = spec->producer_id >= 0 ? spec->base_sequence : -1,
    };
    uint8_t *out = NULL;
    int err = gr_batch_build(&bp, recs, spec->count, &out, len);
    for (int32_t i = 0; i < spec->count; i++)
        free(vals[i]);
    free(vals);
    free(recs);
    if (err) {
        fprintf(stderr, "gr_batch_build failed: %d\n", err);
        abort();
    }
    return out;
}

uint8_t *th_simple(int32_t count, int64_t ts, uint32_t tag, size_t *len)
{
    struct th_batch_spec s = {.count = count, .ts0 = ts, .ts_step = 1, .tag = tag, .producer_id = -1};
    return th_batch(&s, len);
}

/* ---- flush recorder ---- */

#define TH_LOGS_MAX 64
static pthread_mutex_t th_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t th_cv = PTHREAD_COND_INITIALIZER;
static struct {
    struct gr_log *log;
    int64_t durable;
    int err;
} th_logs[TH_LOGS_MAX];
static int th_nlogs, th_nerrors, th_last_err;
static int64_t th_max_durable;

static void th_on_flushed(void *ctx, struct gr_log *log, int64_t durable, int err)
{
    (void)ctx;
    pthread_mutex_lock(&th_mu);
    int i;
    for (i = 0; i < th_nlogs && th_logs[i].log != log; i++)
        ;
    if (i == th_nlogs && th_nlogs < TH_LOGS_MAX) {
        th_logs[i].log = log;
        th_logs[i].durable = -1;
        th_nlogs++;
    }
    if (i < TH_LOGS_MAX) {
        if (err == 0 && durable > th_logs[i].durable) th_logs[i].durable = durable;
        if (err) th_logs[i].err = err;
    }
    if (err) {
        th_nerrors++;
        th_last_err = err;
    } else if (durable > th_max_durable) {
        th_max_durable = durable;
    }
    pthread_cond_broadcast(&th_cv);
    pthread_mutex_unlock(&th_mu);
}

void th_flush_reset(void)
{
    pthread_mutex_lock(&th_mu);
    th_nlogs = th_nerrors = th_last_err = 0;
    th_max_durable = -1;
    memset(th_logs, 0, sizeof(th_logs));
    pthread_mutex_unlock(&th_mu);
}

void th_flush_hook(struct gr_store_config *cfg)
{
    th_flush_reset();
    cfg->on_flushed = th_on_flushed;
    cfg->on_flushed_ctx = NULL;
}

int th_wait_durable(struct gr_log *log, int64_t offset)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&th_mu);
    int result = -ETIMEDOUT;
    for (;;) {
        int i;
        for (i = 0; i < th_nlogs && th_logs[i].log != log; i++)
            ;
        if (i < th_nlogs && th_logs[i].err) {
            result = th_logs[i].err;
            break;
        }
        if (i < th_nlogs && th_logs[i].durable >= offset) {
            result = 0;
            break;
        }
        if (pthread_cond_timedwait(&th_cv, &th_mu, &dl) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&th_mu);
    return result;
}

int th_flush_errors(int *last_err)
{
    pthread_mutex_lock(&th_mu);
    int n = th_nerrors;
    if (last_err) *last_err = th_last_err;
    pthread_mutex_unlock(&th_mu);
    return n;
}

int64_t th_reported_durable(void)
{
    pthread_mutex_lock(&th_mu);
    int64_t d = th_max_durable;
    pthread_mutex_unlock(&th_mu);
    return d;
}

void th_config(struct gr_store_config *cfg, const char *dir)
{
    gr_store_config_defaults(cfg);
    cfg->log_dir = dir;
    cfg->index_interval_bytes = 100;
    cfg->flusher_threads = 2;
    /* Tests use segments of a few KB: a roll waiting for its next file stops at 2 x segment.bytes, so
       segment counts do not depend on how fast the spare thread runs. */
    cfg->roll_wait_bytes_min = 0;
    th_flush_hook(cfg);
}

int th_store_setup(void **state)
{
    struct th_store_fx *f = calloc(1, sizeof(*f));
    th_tmpdir(f->dir, sizeof(f->dir));
    th_config(&f->cfg, f->dir);
    *state = f;
    return 0;
}

int th_store_teardown(void **state)
{
    struct th_store_fx *f = *state;
    if (f->store) gr_store_close(f->store);
    th_rmtree(f->dir);
    free(f);
    return 0;
}

/* ---- reading ---- */

uint8_t *th_slice_bytes(const struct gr_log_slice *s)
{
    uint8_t *buf = malloc((size_t)s->bytes + 1);
    ssize_t r = pread(s->fd, buf, (size_t)s->bytes, s->file_pos);
    if (r != s->bytes) {
        free(buf);
        return NULL;
    }
    return buf;
}

static uint32_t first_tag(const uint8_t *b, size_t len)
{
    struct gr_record_iter it;
    struct gr_record rec;
    uint32_t tag = UINT32_MAX;
    if (gr_record_iter_init(&it, b, len) == 0 && gr_record_iter_next(&it, &rec) == 1 && rec.value.len > 0) {
        char tmp[16] = {0};
        memcpy(tmp, rec.value.ptr, rec.value.len < 15 ? (size_t)rec.value.len : 15);
        tag = (uint32_t)strtoul(tmp, NULL, 10);
    }
    gr_record_iter_close(&it);
    return tag;
}

int th_read_all(struct gr_log *log, int64_t from, int64_t upper_bound, struct th_seen **out)
{
    return th_read_all_ps(log, from, upper_bound, out, NULL);
}

int th_read_all_ps(struct gr_log *log, int64_t from, int64_t upper_bound, struct th_seen **out,
                   struct gr_producer_state *ps)
{
    int n = 0, cap = 64;
    struct th_seen *v = malloc(sizeof(*v) * (size_t)cap);
    int64_t next = from;
    for (;;) {
        struct gr_log_slice s;
        int err = gr_log_read(log, next, 1 << 20, upper_bound, true, &s);
        if (err) {
            fprintf(stderr, "th_read_all: read at %ld: %d\n", (long)next, err);
            free(v);
            return -1;
        }
        if (s.bytes == 0) break;
        uint8_t *buf = th_slice_bytes(&s);
        size_t pos = 0;
        const uint8_t *b;
        size_t bl;
        int r;
        while ((r = gr_batch_next(buf, (size_t)s.bytes, &pos, &b, &bl)) == 1) {
            if (gr_batch_crc_compute(b, bl) != gr_batch_crc(b)) {
                fprintf(stderr, "th_read_all: bad CRC at %ld\n", (long)gr_batch_base_offset(b));
                r = -100;
                break;
            }
            if (n > 0 && gr_batch_base_offset(b) != v[n - 1].last_offset + 1) {
                fprintf(stderr, "th_read_all: gap after %ld\n", (long)v[n - 1].last_offset);
                r = -101;
                break;
            }
            if (n == cap) {
                cap *= 2;
                v = realloc(v, sizeof(*v) * (size_t)cap);
            }
            v[n].base_offset = gr_batch_base_offset(b);
            v[n].last_offset = gr_batch_last_offset(b);
            v[n].max_timestamp = gr_batch_max_timestamp(b);
            v[n].leader_epoch = gr_batch_leader_epoch(b);
            v[n].record_count = gr_batch_record_count(b);
            v[n].producer_id = gr_batch_producer_id(b);
            v[n].base_sequence = gr_batch_base_sequence(b);
            v[n].tag = first_tag(b, bl);
            if (ps) gr_producer_state_update(ps, b, bl, NULL);
            n++;
        }
        free(buf);
        int64_t slice_bytes = s.bytes;
        gr_log_slice_release(&s);
        if (r != 0 || pos != (size_t)slice_bytes) {
            fprintf(stderr, "th_read_all: slice not whole batches (r=%d)\n", r);
            free(v);
            return -1;
        }
        next = v[n - 1].last_offset + 1;
    }
    *out = v;
    return n;
}
