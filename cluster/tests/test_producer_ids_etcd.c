/*
 * test_producer_ids_etcd.c: producer id blocks through etcd's counter (cluster/producer_ids_etcd.h) against
 * a real etcd started by cluster/tests/etcd-tests.sh (ETCD_ENDPOINT; ETCD_CTL pauses and resumes it), each
 * run under its own key prefix. Covers: two sources ("brokers" 1 and 2, each its own etcd client) racing
 * for 200 blocks each hand out no id twice, every block whole, contiguous and in order, and the counter
 * ends past every block; a new source (a restart) starts above every id handed out before; a hand-written
 * bad value (negative, above INT64_MAX - 1000, not JSON) is refused (LOAD_IN_PROGRESS, the value left as
 * it was) and a good one put back is used; etcd paused -> LOAD_IN_PROGRESS within the request timeout,
 * then ids again after it resumes. Ends with "producer ids: N passed, N failed".
 */
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/etcd.h"
#include "cluster/layout.h"
#include "cluster/producer_ids_etcd.h"
#include "cluster/tests/testkit.h"
#include "cluster/values.h"
#include "common/time.h"
#include "protocol/errors.h"

#define BLOCKS 200
#define REQUEST_TIMEOUT_MS 1000

static struct ev_loop *loop;
static struct gr_etcd *etcd1, *etcd2;
static struct gr_cluster_layout lay;
static char pid_key[GR_CLUSTER_KEY_BUF];
static const char *ctl;

static int64_t epoch_of(void *ctx)
{
    return *(const int64_t *)ctx;
}

static int64_t epoch_one = 7;

static struct gr_producer_ids_etcd *source(struct gr_etcd *e, int32_t broker, uint64_t seed)
{
    struct gr_producer_ids_etcd_config cfg = {.loop = loop,
                                              .etcd = e,
                                              .lay = &lay,
                                              .broker_id = broker,
                                              .broker_epoch = epoch_of,
                                              .ctx = &epoch_one,
                                              .seed = seed};
    return gr_producer_ids_etcd_new(&cfg);
}

/* ---- one allocator driven by InitProducerId-like waits ---- */

struct taker {
    struct gr_producer_ids_etcd *src;
    struct gr_producer_id_waiter w;
    bool waiting;
    int64_t *ids; /* handed out, in order */
    int64_t count, want;
    int64_t load_in_progress; /* answers with COORDINATOR_LOAD_IN_PROGRESS */
    int64_t retry_at_ms;
    int16_t last_error;
};

static void taker_done(struct gr_producer_id_waiter *w, int16_t error_code, int64_t producer_id)
{
    struct taker *t = w->ctx;
    t->waiting = false;
    t->last_error = error_code;
    if (error_code == GR_ERR_NONE) {
        if (t->count < t->want) t->ids[t->count++] = producer_id;
    } else {
        t->load_in_progress++;
        t->retry_at_ms = gr_time_mono_ms() + GR_PRODUCER_ID_RETRY_BACKOFF_MS + 5;
    }
}

/* Asks for ids until one is parked, the wanted count is reached, or an error came back (then not before
 * the manager's back-off). */
static void taker_pump(struct taker *t)
{
    while (!t->waiting && t->count < t->want && gr_time_mono_ms() >= t->retry_at_ms) {
        t->w = (struct gr_producer_id_waiter){.done = taker_done, .ctx = t};
        t->waiting = true;
        gr_producer_id_wait(gr_producer_ids_etcd_manager(t->src), &t->w);
        if (t->last_error && !t->waiting) break;
    }
}

struct pair {
    struct taker *a, *b;
};

static bool pair_done(void *arg)
{
    struct pair *p = arg;
    taker_pump(p->a);
    if (p->b) taker_pump(p->b);
    return p->a->count >= p->a->want && (!p->b || p->b->count >= p->b->want);
}

/* Runs until both takers have what they want (b may be NULL) or ms pass. */
static bool take_all(struct taker *a, struct taker *b, int64_t ms)
{
    struct pair p = {a, b};
    return testkit_run_until(loop, pair_done, &p, ms);
}

/* True when neither source has a save (a prefetch) under way. */
static bool pair_idle(void *ctx)
{
    const struct pair *p = ctx;
    return !gr_producer_ids_etcd_stats(p->a->src).in_flight &&
           !gr_producer_ids_etcd_stats(p->b->src).in_flight;
}

/* One id from `src` within ms: its error code (0: *pid set). */
static int16_t take_one(struct gr_producer_ids_etcd *src, int64_t *pid, int64_t ms)
{
    int64_t one = -1;
    struct taker t = {.src = src, .ids = &one, .want = 1};
    t.w = (struct gr_producer_id_waiter){.done = taker_done, .ctx = &t};
    t.waiting = true;
    gr_producer_id_wait(gr_producer_ids_etcd_manager(src), &t.w);
    int64_t end = gr_time_mono_ms() + ms;
    while (t.waiting && gr_time_mono_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    if (t.waiting) {
        gr_producer_id_wait_cancel(&t.w);
        return -1;
    }
    *pid = one;
    return t.last_error;
}

/* ---- etcd by hand ---- */

struct got {
    int fired;
    enum gr_etcd_status status;
    char value[512];
    size_t value_len;
    bool present;
};

static void on_got(void *ctx, const struct gr_etcd_result *res)
{
    struct got *g = ctx;
    g->fired = 1;
    g->status = res->status;
    if (res->status == GR_ETCD_OK && res->op.kv_count == 1 && res->op.kvs[0].value_len < sizeof g->value) {
        g->present = true;
        memcpy(g->value, res->op.kvs[0].value, res->op.kvs[0].value_len);
        g->value_len = res->op.kvs[0].value_len;
    }
}

static struct got get_counter(void)
{
    struct got g = {0};
    struct gr_etcd_op op = {.type = GR_ETCD_OP_RANGE, .key = pid_key};
    if (gr_etcd_range(etcd1, &op, on_got, &g)) {
        int64_t end = gr_time_mono_ms() + 5000;
        while (!g.fired && gr_time_mono_ms() < end)
            ev_run(loop, EVRUN_ONCE);
    }
    return g;
}

static bool put_counter(const char *value)
{
    struct got g = {0};
    struct gr_etcd_op op = {
        .type = GR_ETCD_OP_PUT, .key = pid_key, .value = value, .value_len = strlen(value)};
    if (!gr_etcd_put(etcd1, &op, on_got, &g)) return false;
    int64_t end = gr_time_mono_ms() + 5000;
    while (!g.fired && gr_time_mono_ms() < end)
        ev_run(loop, EVRUN_ONCE);
    return g.fired && g.status == GR_ETCD_OK;
}

static int64_t counter_next(void)
{
    struct got g = get_counter();
    struct gr_cluster_producer_ids v;
    char err[GR_CLUSTER_ERR_BYTES];
    if (!g.present || gr_cluster_producer_ids_decode(g.value, g.value_len, &v, err) < 0) return -1;
    return v.next_producer_id;
}

/* ---- the tests ---- */

static int64_t highest_seen = -1;

/* Checks that `t`'s ids are whole blocks of 1000 in increasing order; marks each block in `owner`. */
static bool blocks_whole(const struct taker *t, uint8_t *owner, int64_t owner_blocks, uint8_t who)
{
    for (int64_t i = 0; i < t->count; i++) {
        int64_t id = t->ids[i];
        if (i % GR_PRODUCER_ID_BLOCK_SIZE == 0) {
            if (id % GR_PRODUCER_ID_BLOCK_SIZE != 0) return false;
            if (i > 0 && id <= t->ids[i - 1]) return false;
            int64_t blk = id / GR_PRODUCER_ID_BLOCK_SIZE;
            if (blk >= owner_blocks || owner[blk]) return false; /* taken twice */
            owner[blk] = who;
        } else if (id != t->ids[i - 1] + 1) {
            return false;
        }
        if (id > highest_seen) highest_seen = id;
    }
    return true;
}

static void test_race(void)
{
    struct taker a = {.src = source(etcd1, 1, 11), .want = BLOCKS * GR_PRODUCER_ID_BLOCK_SIZE};
    struct taker b = {.src = source(etcd2, 2, 22), .want = BLOCKS * GR_PRODUCER_ID_BLOCK_SIZE};
    a.ids = malloc(sizeof(int64_t) * (size_t)a.want);
    b.ids = malloc(sizeof(int64_t) * (size_t)b.want);
    CHECK(a.src && b.src && a.ids && b.ids);
    if (!a.src || !b.src || !a.ids || !b.ids) return;
    CHECK(take_all(&a, &b, 120000));
    CHECK(a.count == a.want && b.count == b.want);
    /* a prefetch may still be in flight: its block can be taken in etcd before its answer is counted */
    struct pair idle = {&a, &b};
    CHECK(testkit_run_until(loop, pair_idle, &idle, 10000));
    int64_t owner_blocks = 4 * BLOCKS + 8;
    uint8_t *owner = calloc((size_t)owner_blocks, 1);
    CHECK(blocks_whole(&a, owner, owner_blocks, 1));
    CHECK(blocks_whole(&b, owner, owner_blocks, 2));
    int64_t taken = 0;
    for (int64_t i = 0; i < owner_blocks; i++)
        taken += owner[i] != 0;
    CHECK(taken == 2 * BLOCKS);
    struct gr_producer_ids_etcd_stats sa = gr_producer_ids_etcd_stats(a.src),
                                      sb = gr_producer_ids_etcd_stats(b.src);
    printf("producer ids: race: %" PRIu64 " + %" PRIu64 " blocks taken, %" PRIu64 " + %" PRIu64
           " compares lost, %" PRId64 " + %" PRId64 " LOAD_IN_PROGRESS\n",
           sa.blocks, sb.blocks, sa.lost, sb.lost, a.load_in_progress, b.load_in_progress);
    CHECK(sa.blocks >= BLOCKS && sb.blocks >= BLOCKS);
    CHECK(sa.refused == 0 && sb.refused == 0);
    /* the counter is past every block handed out (and the prefetched ones) */
    int64_t next = counter_next();
    CHECK(next > highest_seen);
    CHECK(next == (int64_t)(sa.blocks + sb.blocks) * GR_PRODUCER_ID_BLOCK_SIZE);
    gr_producer_ids_etcd_free(a.src);
    gr_producer_ids_etcd_free(b.src);
    free(owner);
    free(a.ids);
    free(b.ids);
}

static void test_restart(void)
{
    struct gr_producer_ids_etcd *src = source(etcd1, 1, 33);
    int64_t pid = -1;
    CHECK(take_one(src, &pid, 5000) == GR_ERR_NONE);
    CHECK(pid > highest_seen);
    CHECK(pid % GR_PRODUCER_ID_BLOCK_SIZE == 0);
    int64_t second = -1;
    CHECK(take_one(src, &second, 5000) == GR_ERR_NONE && second == pid + 1);
    highest_seen = second;
    gr_producer_ids_etcd_free(src);
}

static void test_bad_values(void)
{
    const char *bad[] = {
        "{\"version\":1,\"next_producer_id\":-5,\"broker_id\":1,\"broker_epoch\":1}",
        "{\"version\":1,\"next_producer_id\":9223372036854775000,\"broker_id\":1,\"broker_epoch\":1}",
        "not json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(put_counter(bad[i]));
        struct gr_producer_ids_etcd *src = source(etcd1, 1, 44 + i);
        int64_t pid = 0;
        CHECK(take_one(src, &pid, 5000) == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
        CHECK(pid == -1);
        CHECK(gr_producer_ids_etcd_stats(src).refused >= 1);
        struct got g = get_counter(); /* left as it was */
        CHECK(g.present && g.value_len == strlen(bad[i]) && memcmp(g.value, bad[i], g.value_len) == 0);
        gr_producer_ids_etcd_free(src);
    }
    /* a good value put back by hand: used from there, after the manager's back-off */
    char good[160];
    int64_t base = (highest_seen / GR_PRODUCER_ID_BLOCK_SIZE + 5) * GR_PRODUCER_ID_BLOCK_SIZE;
    snprintf(good, sizeof good,
             "{\"version\":1,\"next_producer_id\":%" PRId64 ",\"broker_id\":3,\"broker_epoch\":9}", base);
    struct gr_producer_ids_etcd *src = source(etcd1, 1, 55);
    CHECK(put_counter("{\"version\":1,\"next_producer_id\":-1}"));
    int64_t pid = 0;
    CHECK(take_one(src, &pid, 5000) == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    CHECK(put_counter(good));
    usleep((GR_PRODUCER_ID_RETRY_BACKOFF_MS + 10) * 1000);
    int16_t ec = take_one(src, &pid, 5000);
    CHECK(ec == GR_ERR_NONE && pid == base);
    CHECK(counter_next() == base + GR_PRODUCER_ID_BLOCK_SIZE);
    highest_seen = pid;
    gr_producer_ids_etcd_free(src);
}

static int run_ctl(const char *action)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s", ctl, action);
    return system(cmd);
}

static void test_paused(void)
{
    if (!ctl) {
        printf("producer ids: ETCD_CTL unset: pause test skipped\n");
        CHECK(0);
        return;
    }
    CHECK(run_ctl("stop") == 0);
    struct gr_producer_ids_etcd *src = source(etcd1, 1, 66);
    int64_t t0 = gr_time_mono_ms(), pid = 0;
    int16_t ec = take_one(src, &pid, REQUEST_TIMEOUT_MS + 3000);
    int64_t waited = gr_time_mono_ms() - t0;
    printf("producer ids: etcd paused: error %d after %" PRId64 " ms\n", ec, waited);
    CHECK(ec == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    CHECK(waited >= REQUEST_TIMEOUT_MS - 100 && waited < REQUEST_TIMEOUT_MS + 2000);
    /* still paused: the next request is refused too (after the back-off, a new attempt times out) */
    usleep((GR_PRODUCER_ID_RETRY_BACKOFF_MS + 10) * 1000);
    CHECK(take_one(src, &pid, REQUEST_TIMEOUT_MS + 3000) == GR_ERR_COORDINATOR_LOAD_IN_PROGRESS);
    CHECK(run_ctl("cont") == 0);
    usleep((GR_PRODUCER_ID_RETRY_BACKOFF_MS + 10) * 1000);
    ec = take_one(src, &pid, 10000);
    CHECK(ec == GR_ERR_NONE);
    CHECK(pid > highest_seen);
    gr_producer_ids_etcd_free(src);
}

int main(void)
{
    ctl = getenv("ETCD_CTL");
    loop = ev_default_loop(0);
    if (!(etcd1 = testkit_etcd(loop, REQUEST_TIMEOUT_MS)) ||
        !(etcd2 = testkit_etcd(loop, REQUEST_TIMEOUT_MS)))
        return 2;
    if (testkit_layout(&lay, "producer-ids", 9) != 0 || gr_cluster_key_producer_ids(&lay, pid_key) < 0)
        return 2;
    const struct testkit_case tests[] = {
        {"two brokers race for 200 blocks each: no id twice, whole blocks in order", test_race},
        {"a restart continues above every id handed out", test_restart},
        {"a bad counter value is refused and left alone; a good one is used", test_bad_values},
        {"etcd paused: LOAD_IN_PROGRESS, then ids again after it resumes", test_paused},
    };
    testkit_run_cases(tests, sizeof tests / sizeof tests[0]);
    gr_etcd_free(etcd1);
    gr_etcd_free(etcd2);
    printf("producer ids: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
