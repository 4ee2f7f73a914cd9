/*
 * rdk_txn.c: the transactions benchmark client (bench/txn.py), a small librdkafka program; the same binary
 * and settings run against both brokers. Modes:
 *
 *   endtxn   one transactional producer (acks=all, linger.ms=0) runs --warmup + --count transactions of
 *            --records records each (--size bytes, partition 0 of --topic): begin_transaction, produce,
 *            rd_kafka_flush (every record acknowledged), then commit_transaction. Times per transaction:
 *            commit = the commit_transaction call after the flush (the EndTxn request and its answer, nothing
 *            else is left to send), flush_commit = flush + commit, txn = begin to commit's return. With
 *            --rtt (debug=protocol, parsed in the log callback) also librdkafka's own round-trip time of each
 *            EndTxn response ("Received EndTxnResponse (..., rtt X ms)": socket write of the request to the
 *            read of its answer on the client's broker thread), the closest the client gets to the broker's
 *            request time. Percentiles p50/p99/p99.9 over the timed transactions, in ms.
 *   produce  as fast as the client goes for --seconds: with --every N a transactional producer commits
 *            every N records (begin, N x produce, commit_transaction, which flushes), with --every 0 an
 *            idempotent producer without transactions (flush at the end). acks=all, linger.ms=5.
 *            Throughput = records in committed transactions (resp. acknowledged) / (last commit's return -
 *            first produce call), after --warmup transactions (idempotent: flushed batches of 100 records)
 *            that are not counted.
 *
 * Settings made explicit (librdkafka 2.0.2 defaults otherwise): acks=all, enable.idempotence=true,
 * transactional.id (--txn-id, default rdk-txn-<pid>) except for --every 0, linger.ms (0 in endtxn, --linger
 * in produce, default 5), queue.buffering.max.messages=500000, queue.buffering.max.kbytes=65536. Values are
 * random upper-case letters (as rdk_perf). --debug CONTEXTS sets librdkafka's debug= and prints its log to
 * stderr with CLOCK_MONOTONIC ms (where a transaction's time goes). Prints one JSON object on stdout; exit 0
 * only when every transaction committed and every record was delivered. Read next: bench/txn.py
 * (orchestration), bench/rdk_perf.c (the non-transactional client).
 */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POOL_BYTES (1 << 20)
#define SIZE_MAX_BYTES 65536
#define COUNT_MAX 1000000 /* transactions per endtxn run: far beyond a bench run */

struct opts {
    const char *mode, *brokers, *topic, *txn_id, *debug;
    int size, records, every, linger_ms, rtt;
    long count, warmup;
    double seconds;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "rdk_txn: %s: %s\n", what, why);
    exit(2);
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

/* Dies with the error's text when err is set (a transactional call failed: the run is void). */
static void check(const char *what, rd_kafka_error_t *err)
{
    if (!err) return;
    char buf[600];
    snprintf(buf, sizeof buf, "%s (%s%s)", rd_kafka_error_string(err), rd_kafka_error_name(err),
             rd_kafka_error_txn_requires_abort(err) ? ", abortable" : "");
    die(what, buf);
}

static atomic_llong dr_ok, dr_failed;
static atomic_int dr_first_err;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (!dr_failed) dr_first_err = m->err;
        dr_failed++;
    } else {
        dr_ok++;
    }
}

/* EndTxn round-trip times (us) from librdkafka's protocol debug log; written by its broker thread. */
static int64_t *rtt_us;
static atomic_long rtt_n;
static long rtt_cap;
static atomic_int rtt_on; /* set after the warm-up transactions */
static int log_print;     /* --debug: every log line to stderr, with CLOCK_MONOTONIC ms */

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    (void)level;
    if (log_print) fprintf(stderr, "%.3f %s %s\n", (double)now_ns() / 1e6, fac, buf);
    const char *p = strstr(buf, "Received EndTxnResponse");
    if (!p || !rtt_on) return;
    const char *r = strstr(p, "rtt ");
    if (!r) return;
    double ms = atof(r + 4);
    long i = rtt_n;
    if (i < rtt_cap) {
        rtt_us[i] = (int64_t)(ms * 1000.0);
        rtt_n = i + 1;
    }
}

static uint8_t *payload_pool(void)
{
    uint8_t *pool = malloc(POOL_BYTES + SIZE_MAX_BYTES);
    if (!pool) die("pool", "out of memory");
    uint64_t seed = 7;
    for (size_t i = 0; i < POOL_BYTES + SIZE_MAX_BYTES; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        pool[i] = (uint8_t)('A' + (seed >> 33) % 26);
    }
    return pool;
}

static rd_kafka_t *producer_new(const struct opts *o, bool transactional, int linger_ms)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char v[64];
    conf_set(conf, "bootstrap.servers", o->brokers);
    conf_set(conf, "acks", "all");
    conf_set(conf, "enable.idempotence", "true");
    snprintf(v, sizeof v, "%d", linger_ms);
    conf_set(conf, "linger.ms", v);
    conf_set(conf, "queue.buffering.max.messages", "500000");
    conf_set(conf, "queue.buffering.max.kbytes", "65536");
    if (transactional) {
        if (o->txn_id)
            conf_set(conf, "transactional.id", o->txn_id);
        else {
            snprintf(v, sizeof v, "rdk-txn-%d", (int)getpid());
            conf_set(conf, "transactional.id", v);
        }
    }
    if (o->rtt || o->debug) {
        conf_set(conf, "debug", o->debug ? o->debug : "protocol");
        log_print = o->debug != NULL;
        rd_kafka_conf_set_log_cb(conf, log_cb);
    }
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("producer", err);
    return rk;
}

/* Produces one record to partition 0 (or the partitioner's choice, -1), waiting while the queue is full. */
static void produce_one(rd_kafka_t *rk, const char *topic, const uint8_t *pool, long long i, int size)
{
    const uint8_t *val = pool + (size_t)(i * 4099) % POOL_BYTES;
    for (;;) {
        rd_kafka_resp_err_t e =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_VALUE((void *)val, (size_t)size), RD_KAFKA_V_END);
        if (!e) return;
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) die("produce", rd_kafka_err2str(e));
        rd_kafka_poll(rk, 5);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Prints "name": {"p50":..,"p99":..,"p999":..,"max":..} in ms of n sorted-in-place samples (ns or us). */
static void pct(const char *name, int64_t *v, long n, double unit_per_ms, bool comma)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    if (n == 0) {
        printf("\"%s\": null%s", name, comma ? ", " : "");
        return;
    }
#define AT(q) ((double)v[(long)((double)(n - 1) * (q) + 0.5)] / unit_per_ms)
    printf("\"%s\": {\"p50\": %.3f, \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}%s", name, AT(0.5), AT(0.99),
           AT(0.999), (double)v[n - 1] / unit_per_ms, comma ? ", " : "");
#undef AT
}

static int run_endtxn(const struct opts *o)
{
    uint8_t *pool = payload_pool();
    long total = o->warmup + o->count;
    int64_t *commit = calloc((size_t)o->count, sizeof *commit), *fc = calloc((size_t)o->count, sizeof *fc),
            *txn = calloc((size_t)o->count, sizeof *txn);
    rtt_cap = o->count + 16;
    rtt_us = calloc((size_t)rtt_cap, sizeof *rtt_us);
    if (!commit || !fc || !txn || !rtt_us) die("endtxn", "out of memory");
    rd_kafka_t *rk = producer_new(o, true, 0);
    check("init_transactions", rd_kafka_init_transactions(rk, 60000));
    long long rec = 0;
    int64_t t_start = 0;
    for (long i = 0; i < total; i++) {
        if (i == o->warmup) {
            rtt_on = 1;
            t_start = now_ns();
        }
        int64_t t0 = now_ns();
        check("begin_transaction", rd_kafka_begin_transaction(rk));
        for (int r = 0; r < o->records; r++)
            produce_one(rk, o->topic, pool, rec++, o->size);
        rd_kafka_resp_err_t fe = rd_kafka_flush(rk, 60000);
        if (fe) die("flush", rd_kafka_err2str(fe));
        int64_t t1 = now_ns();
        check("commit_transaction", rd_kafka_commit_transaction(rk, 60000));
        int64_t t2 = now_ns();
        if (i >= o->warmup) {
            long j = i - o->warmup;
            commit[j] = t2 - t1;
            fc[j] = t2 - t1 + (t1 - t0); /* the flush is in t0..t1 with the produce calls (cheap) */
            txn[j] = t2 - t0;
        }
    }
    double secs = (double)(now_ns() - t_start) / 1e9;
    rtt_on = 0;
    long nrtt = rtt_n;
    printf("{\"mode\": \"endtxn\", \"records_per_txn\": %d, \"size\": %d, \"txns\": %ld, \"seconds\": %.3f, "
           "\"txns_per_s\": %.1f, \"delivered\": %lld, \"failed\": %lld, \"value_bytes\": %lld, ",
           o->records, o->size, o->count, secs, (double)o->count / secs, (long long)dr_ok,
           (long long)dr_failed, (long long)o->count * o->records * o->size);
    pct("commit_ms", commit, o->count, 1e6, true);
    pct("flush_commit_ms", fc, o->count, 1e6, true);
    pct("txn_ms", txn, o->count, 1e6, true);
    printf("\"rtt_n\": %ld, ", nrtt);
    pct("endtxn_rtt_ms", rtt_us, nrtt, 1e3, false);
    printf("}\n");
    rd_kafka_destroy(rk);
    return dr_failed ? 1 : 0;
}

static int run_produce(const struct opts *o)
{
    uint8_t *pool = payload_pool();
    bool txnl = o->every > 0;
    rd_kafka_t *rk = producer_new(o, txnl, o->linger_ms);
    if (txnl) check("init_transactions", rd_kafka_init_transactions(rk, 60000));
    long long rec = 0, committed = 0, txns = 0;
    /* --warmup transactions (idempotent: batches of 100 records, flushed) before the clock starts: the first
     * transaction pays for the topic's metadata and the first AddPartitionsToTxn. */
    for (long w = 0; w < o->warmup; w++) {
        if (txnl) check("begin_transaction", rd_kafka_begin_transaction(rk));
        for (int r = 0; r < (txnl ? o->every : 100); r++)
            produce_one(rk, o->topic, pool, rec++, o->size);
        if (txnl)
            check("commit_transaction", rd_kafka_commit_transaction(rk, 120000));
        else if (rd_kafka_flush(rk, 120000))
            die("flush", "warm-up not delivered");
    }
    long long base = dr_ok;
    int64_t t0 = now_ns(), end = t0 + (int64_t)(o->seconds * 1e9), last = t0;
    if (txnl) {
        while (now_ns() < end) {
            check("begin_transaction", rd_kafka_begin_transaction(rk));
            for (int r = 0; r < o->every; r++) {
                produce_one(rk, o->topic, pool, rec++, o->size);
                rd_kafka_poll(rk, 0);
            }
            check("commit_transaction", rd_kafka_commit_transaction(rk, 120000));
            committed += o->every;
            txns++;
            last = now_ns();
        }
    } else {
        while (now_ns() < end) {
            for (int r = 0; r < 1000; r++)
                produce_one(rk, o->topic, pool, rec++, o->size);
            rd_kafka_poll(rk, 0);
        }
        rd_kafka_resp_err_t fe = rd_kafka_flush(rk, 120000);
        if (fe) die("flush", rd_kafka_err2str(fe));
        committed = dr_ok - base;
        last = now_ns();
    }
    double secs = (double)(last - t0) / 1e9;
    printf("{\"mode\": \"produce\", \"every\": %d, \"size\": %d, \"txns\": %lld, \"records\": %lld, "
           "\"seconds\": %.3f, \"msgs_per_s\": %.1f, \"mb_per_s\": %.2f, \"value_bytes\": %lld, "
           "\"delivered\": %lld, \"failed\": %lld}\n",
           o->every, o->size, txns, committed, secs, (double)committed / secs,
           (double)committed * o->size / secs / 1e6, committed * o->size, (long long)dr_ok,
           (long long)dr_failed);
    rd_kafka_destroy(rk);
    return dr_failed || dr_ok != rec ? 1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: rdk_txn endtxn|produce -b BROKERS -t TOPIC [-s SIZE] [--records N] [--count N]\n"
                    "       [--warmup N] [--rtt] [--every N] [-d SECONDS] [--linger MS] [--txn-id ID]\n"
                    "       [--debug CONTEXTS (librdkafka debug=, printed to stderr)]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = {
        .size = 1024, .records = 1, .every = 100, .linger_ms = 5, .count = 1000, .warmup = 50, .seconds = 5};
    if (argc < 2) usage();
    o.mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--rtt")) {
            o.rtt = 1;
            continue;
        }
        if (!v) usage();
        i++;
        if (!strcmp(a, "-b"))
            o.brokers = v;
        else if (!strcmp(a, "-t"))
            o.topic = v;
        else if (!strcmp(a, "-s"))
            o.size = atoi(v);
        else if (!strcmp(a, "--records"))
            o.records = atoi(v);
        else if (!strcmp(a, "--count"))
            o.count = atol(v);
        else if (!strcmp(a, "--warmup"))
            o.warmup = atol(v);
        else if (!strcmp(a, "--every"))
            o.every = atoi(v);
        else if (!strcmp(a, "-d"))
            o.seconds = atof(v);
        else if (!strcmp(a, "--linger"))
            o.linger_ms = atoi(v);
        else if (!strcmp(a, "--txn-id"))
            o.txn_id = v;
        else if (!strcmp(a, "--debug"))
            o.debug = v;
        else
            usage();
    }
    if (!o.brokers || !o.topic || o.size < 1 || o.size > SIZE_MAX_BYTES || o.records < 1 ||
        o.records > 100000 || o.count < 1 || o.count > COUNT_MAX || o.warmup < 0 || o.warmup > COUNT_MAX ||
        o.every < 0 || o.every > 1000000 || o.seconds <= 0 || o.seconds > 3600)
        usage();
    if (!strcmp(o.mode, "endtxn")) return run_endtxn(&o);
    if (!strcmp(o.mode, "produce")) return run_produce(&o);
    usage();
}
