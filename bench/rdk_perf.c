/*
 * rdk_perf.c: the client-driven benchmark client, a small librdkafka program (rdkafka_performance is not
 * packaged). The same binary and settings run against both brokers. Modes:
 *
 *   produce  as fast as the client goes for --seconds (or --count messages), partitions round-robin,
 *            null keys, values of --size random upper-case letters (like Kafka's ProducerPerformance), then
 *            flush; throughput = acknowledged messages / (last delivery report - first produce call);
 *            per-message delivery latency (librdkafka's rd_kafka_message_latency: produce call to delivery
 *            report) as p50/p99/p99.9 of the records produced after --warmup s (1: the client's start-up,
 *            metadata and connections, took about a second against Gregor's cluster); with --rate, paced
 *            like e2e instead of as fast as it goes; --idempotence true turns enable.idempotence on;
 *            --trace-partition P --trace FILE writes one line per delivery report of partition P (-2: every
 *            partition): CLOCK_MONOTONIC ns, partition, broker id (the broker that acknowledged it, -1 on
 *            error), offset, error name, delivery latency in us (bench/cluster.py's failover timing);
 *            -X key=value sets any librdkafka setting last, the consumer's too in consume and e2e
 *            (bench/failover.py's debug=eos,...: librdkafka logs to stderr; bench/security.py's
 *            security.protocol, ssl.ca.location, sasl.*)
 *   consume  assign every partition at the beginning (no group), read up to the high watermarks queried at
 *            start; throughput = messages / (last message - assign)
 *   e2e      producer and consumer in one process: messages at a fixed --rate carry their CLOCK_MONOTONIC
 *            send time (ns, first 8 bytes); the consumer thread records receive time - send time; the first
 *            --warmup seconds (1) are not counted; production starts once the consumer has received the
 *            record already in the topic (so the consumer's start-up is not measured). With a --rate above
 *            what the pair sustains, recv_msgs_per_s is the pair's maximum (how run.py sets the e2e rate)
 *
 * Settings every mode makes explicit (librdkafka 2.0.2 defaults otherwise): linger.ms (--linger, default
 * 5; rdkafka_performance's own default is 1000), acks (--acks), compression.codec (--codec),
 * queue.buffering.max.messages=500000, queue.buffering.max.kbytes=65536 (bounds the flush tail of a
 * timed run), statistics.interval.ms=250 (produce reports librdkafka's average batch size); consumers get a
 * group.id but only assign(), never join or commit. Prints one JSON object on stdout; exit 0 only when every
 * message was delivered (produce, e2e) or read (consume). Read next: bench/run.py (orchestration),
 * bench/replay.c (the broker-limited load generator).
 */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POOL_BYTES (1 << 20)
#define PARTITIONS_MAX 10000
#define EXTRA_CONF_MAX 16 /* -X settings per run: a handful (debug=..., a timeout) is the use */

struct opts {
    const char *mode, *brokers, *topic, *acks, *codec, *idempotence, *trace_file;
    const char *extra[EXTRA_CONF_MAX]; /* -X key=value, borrowed from argv, applied last */
    int partitions, size, linger_ms, trace_partition, extra_n;
    double seconds, rate, warmup_s;
    long long count;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "rdk_perf: %s: %s\n", what, why);
    exit(2);
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

/* ---- producer side ---- */

struct prod_stats {
    atomic_llong ok, failed, bytes;
    atomic_llong last_dr_ns;
    int first_error;
};
static struct prod_stats pstats;

/* Delivery latencies (us) of the produce mode, and the delivery trace of one partition (--trace-partition):
 * both grow by doubling, both only in the delivery report callback (the polling thread). */
struct trace_rec {
    int64_t ns, offset, latency_us;
    int32_t partition, broker;
    int err;
};
static int64_t *dr_lat_us;
static size_t dr_nlat, dr_cap;
static int64_t dr_lat_from_ns = INT64_MAX; /* latencies of messages produced from then on are recorded */
static struct trace_rec *trace;
static size_t trace_n, trace_cap;
static int trace_partition = -1;
#define LAT_SAMPLES_MAX (64u << 20) /* 512 MiB of int64: far beyond a bench run; past it, not recorded */
#define TRACE_RECS_MAX (16u << 20)

/* Produce batch sizes from librdkafka's statistics (topics.<t>.batchsize / batchcnt: per-interval
 * histograms), summed over the intervals: how much the client batched against this broker. */
static double batch_bytes_sum, batch_bytes_cnt, batch_msgs_sum, batch_msgs_cnt;

static void hist_add(const char *json, const char *name, double *sum, double *cnt)
{
    const char *h = strstr(json, name);
    if (!h) return;
    const char *s = strstr(h, "\"sum\":"), *c = strstr(h, "\"cnt\":");
    if (!s || !c) return;
    *sum += atof(s + 6);
    *cnt += atof(c + 6);
}

static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    (void)len;
    (void)opaque;
    const char *topics = strstr(json, "\"topics\":");
    if (topics) {
        hist_add(topics, "\"batchsize\":", &batch_bytes_sum, &batch_bytes_cnt);
        hist_add(topics, "\"batchcnt\":", &batch_msgs_sum, &batch_msgs_cnt);
    }
    return 0;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (!pstats.failed) pstats.first_error = m->err;
        pstats.failed++;
    } else {
        pstats.ok++;
        pstats.bytes += (long long)m->len;
    }
    int64_t t = now_ns(), lat_us = rd_kafka_message_latency(m);
    if (!m->err && t - lat_us * 1000 >= dr_lat_from_ns) { /* produced after the warm-up */
        if (dr_nlat == dr_cap && dr_cap < LAT_SAMPLES_MAX) {
            dr_cap = dr_cap ? dr_cap * 2 : 65536;
            dr_lat_us = realloc(dr_lat_us, dr_cap * sizeof *dr_lat_us);
            if (!dr_lat_us) die("latency", "out of memory");
        }
        if (dr_nlat < dr_cap) dr_lat_us[dr_nlat++] = lat_us;
    }
    pstats.last_dr_ns = t;
    if (m->partition == trace_partition || trace_partition == -2) {
        if (trace_n == trace_cap && trace_cap < TRACE_RECS_MAX) {
            trace_cap = trace_cap ? trace_cap * 2 : 65536;
            trace = realloc(trace, trace_cap * sizeof *trace);
            if (!trace) die("trace", "out of memory");
        }
        if (trace_n < trace_cap)
            trace[trace_n++] = (struct trace_rec){
                t, m->offset, lat_us, m->partition, m->err ? -1 : rd_kafka_message_broker_id(m), m->err};
    }
}

/* Applies the -X key=value settings (after the mode's own, so they win). */
static void conf_extra(rd_kafka_conf_t *conf, const struct opts *o)
{
    for (int i = 0; i < o->extra_n; i++) {
        char k[128];
        const char *eq = strchr(o->extra[i], '=');
        if (!eq || eq == o->extra[i] || (size_t)(eq - o->extra[i]) >= sizeof k) die("-X", o->extra[i]);
        memcpy(k, o->extra[i], (size_t)(eq - o->extra[i]));
        k[eq - o->extra[i]] = '\0';
        conf_set(conf, k, eq + 1);
    }
}

static rd_kafka_t *producer_new(const struct opts *o)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char v[32];
    conf_set(conf, "bootstrap.servers", o->brokers);
    conf_set(conf, "acks", o->acks);
    snprintf(v, sizeof v, "%d", o->linger_ms);
    conf_set(conf, "linger.ms", v);
    conf_set(conf, "compression.codec", o->codec);
    conf_set(conf, "queue.buffering.max.messages", "500000");
    conf_set(conf, "queue.buffering.max.kbytes", "65536");
    conf_set(conf, "statistics.interval.ms", "250");
    if (o->idempotence) conf_set(conf, "enable.idempotence", o->idempotence);
    conf_extra(conf, o);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_stats_cb(conf, stats_cb);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("producer", err);
    return rk;
}

static uint8_t *payload_pool(void)
{
    uint8_t *pool = malloc(POOL_BYTES + 65536);
    uint64_t seed = 7;
    for (size_t i = 0; i < POOL_BYTES + 65536; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        pool[i] = (uint8_t)('A' + (seed >> 33) % 26);
    }
    return pool;
}

/* Produces one message (copied), serving callbacks while the queue is full. Returns false on a hard error. */
static bool produce_one(rd_kafka_t *rk, const struct opts *o, int32_t partition, void *val)
{
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_PARTITION(partition),
            RD_KAFKA_V_VALUE(val, (size_t)o->size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (!err) return true;
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "rdk_perf: produce: %s\n", rd_kafka_err2str(err));
            return false;
        }
        rd_kafka_poll(rk, 1);
    }
}

static int cmp_i64(const void *a, const void *b);
static double pct_ms(const int64_t *v, size_t n, double q);

static void trace_write(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) die(path, "cannot open");
    for (size_t i = 0; i < trace_n; i++)
        fprintf(f, "%" PRId64 " %d %d %" PRId64 " %s %" PRId64 "\n", trace[i].ns, trace[i].partition,
                trace[i].broker, trace[i].offset, trace[i].err ? rd_kafka_err2name(trace[i].err) : "-",
                trace[i].latency_us);
    fclose(f);
}

static int run_produce(const struct opts *o)
{
    rd_kafka_t *rk = producer_new(o);
    uint8_t *pool = payload_pool();
    long long sent = 0;
    int64_t t0 = now_ns(), end = t0 + (int64_t)(o->seconds * 1e9);
    dr_lat_from_ns = t0 + (int64_t)(o->warmup_s * 1e9);
    bool ok = true;
    while (ok && (o->count ? sent < o->count : now_ns() < end)) {
        long long due = sent + 1000;
        if (o->rate > 0) { /* paced: what is due by now, then a 200 us nap */
            due = (long long)((double)(now_ns() - t0) / 1e9 * o->rate);
            struct timespec d = {0, 200000};
            nanosleep(&d, NULL);
        }
        for (; sent < due && ok && (!o->count || sent < o->count); sent++)
            ok = produce_one(rk, o, (int32_t)(sent % o->partitions), pool + (sent * 7919) % POOL_BYTES);
        rd_kafka_poll(rk, 0);
    }
    if (rd_kafka_flush(rk, 60000)) fprintf(stderr, "rdk_perf: flush timed out\n");
    rd_kafka_poll(rk, 300); /* one more statistics interval */
    double secs = (double)(pstats.last_dr_ns - t0) / 1e9;
    if (secs <= 0) secs = 1e-9;
    for (size_t i = 0; i < dr_nlat; i++)
        dr_lat_us[i] *= 1000; /* us -> ns, for pct_ms */
    qsort(dr_lat_us, dr_nlat, sizeof *dr_lat_us, cmp_i64);
    printf("{\"mode\": \"produce\", \"sent\": %lld, \"delivered\": %lld, \"failed\": %lld, \"first_error\": "
           "\"%s\", "
           "\"value_bytes\": %lld, \"seconds\": %.4f, \"msgs_per_s\": %.1f, \"mb_per_s\": %.3f, "
           "\"batch_bytes_avg\": %.0f, \"batch_msgs_avg\": %.1f, \"lat_count\": %zu, \"p50_ms\": %.3f, "
           "\"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f}\n",
           sent, (long long)pstats.ok, (long long)pstats.failed,
           pstats.failed ? rd_kafka_err2name(pstats.first_error) : "", (long long)pstats.bytes, secs,
           (double)pstats.ok / secs, (double)pstats.bytes / secs / 1e6,
           batch_bytes_cnt ? batch_bytes_sum / batch_bytes_cnt : 0,
           batch_msgs_cnt ? batch_msgs_sum / batch_msgs_cnt : 0, dr_nlat, pct_ms(dr_lat_us, dr_nlat, 0.5),
           pct_ms(dr_lat_us, dr_nlat, 0.99), pct_ms(dr_lat_us, dr_nlat, 0.999),
           pct_ms(dr_lat_us, dr_nlat, 1.0));
    if (o->trace_file) trace_write(o->trace_file);
    rd_kafka_destroy(rk);
    free(pool);
    return ok && pstats.failed == 0 && pstats.ok == sent ? 0 : 1;
}

/* ---- consumer side ---- */

static rd_kafka_t *consumer_new(const struct opts *o)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", o->brokers);
    conf_set(conf, "group.id", "gregor-bench"); /* librdkafka's assign() wants one; never joined */
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.partition.eof", "false");
    conf_extra(conf, o);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("consumer", err);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

static void assign_all(rd_kafka_t *rk, const struct opts *o)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(o->partitions);
    for (int p = 0; p < o->partitions; p++)
        rd_kafka_topic_partition_list_add(l, o->topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, l);
    if (err) die("assign", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(l);
}

static int run_consume(const struct opts *o)
{
    rd_kafka_t *rk = consumer_new(o);
    int64_t *hw = calloc((size_t)o->partitions, sizeof *hw);
    long long want = 0;
    for (int p = 0; p < o->partitions; p++) {
        int64_t lo;
        rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, o->topic, p, &lo, &hw[p], 10000);
        if (err) die("watermarks", rd_kafka_err2str(err));
        want += hw[p] - lo;
    }
    int64_t t0 = now_ns(), last = t0, idle_since = t0;
    assign_all(rk, o);
    long long msgs = 0, bytes = 0;
    int done = 0;
    char *reached = calloc((size_t)o->partitions, 1);
    for (int p = 0; p < o->partitions; p++)
        if (hw[p] == 0) reached[p] = 1, done++;
    while (done < o->partitions) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            if (now_ns() - idle_since > 10LL * 1000000000LL) {
                fprintf(stderr, "rdk_perf: consume: no message for 10 s\n");
                break;
            }
            continue;
        }
        if (m->err) {
            fprintf(stderr, "rdk_perf: consume: %s\n", rd_kafka_message_errstr(m));
        } else {
            msgs++;
            bytes += (long long)m->len;
            last = idle_since = now_ns();
            if (m->partition >= 0 && m->partition < o->partitions && !reached[m->partition] &&
                m->offset + 1 >= hw[m->partition]) {
                reached[m->partition] = 1;
                done++;
            }
        }
        rd_kafka_message_destroy(m);
    }
    double secs = (double)(last - t0) / 1e9;
    if (secs <= 0) secs = 1e-9;
    printf("{\"mode\": \"consume\", \"expected\": %lld, \"msgs\": %lld, \"value_bytes\": %lld, \"seconds\": "
           "%.4f, "
           "\"msgs_per_s\": %.1f, \"mb_per_s\": %.3f}\n",
           want, msgs, bytes, secs, (double)msgs / secs, (double)bytes / secs / 1e6);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return done == o->partitions && msgs >= want ? 0 : 1;
}

/* ---- end-to-end latency ---- */

struct e2e {
    const struct opts *o;
    rd_kafka_t *consumer;
    int64_t count_from_ns; /* messages sent before this are warm-up */
    atomic_bool stop;
    atomic_bool ready; /* the consumer has received its first message (the topic's probe record) */
    atomic_llong received;
    atomic_llong last_recv_ns;
    int64_t *lat_ns;
    size_t nlat, cap;
};

static void *e2e_consumer(void *arg)
{
    struct e2e *e = arg;
    while (!e->stop) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(e->consumer, 50);
        if (!m) continue;
        int64_t t = now_ns();
        if (!m->err) e->ready = true;
        if (!m->err && m->len == (size_t)e->o->size) { /* not the 16-byte probe records */
            int64_t sent;
            memcpy(&sent, m->payload, 8);
            e->received++;
            e->last_recv_ns = t;
            if (sent >= e->count_from_ns) {
                if (e->nlat == e->cap) {
                    e->cap = e->cap ? e->cap * 2 : 65536;
                    e->lat_ns = realloc(e->lat_ns, e->cap * sizeof *e->lat_ns);
                }
                e->lat_ns[e->nlat++] = t - sent;
            }
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(const int64_t *v, size_t n, double q)
{
    return n ? (double)v[(size_t)(q * (double)(n - 1) + 0.5)] / 1e6 : -1;
}

static int run_e2e(const struct opts *o)
{
    if (o->rate <= 0 || o->size < 8) die("e2e", "needs --rate > 0 and --size >= 8");
    struct e2e e = {.o = o};
    e.consumer = consumer_new(o);
    assign_all(e.consumer, o);
    pthread_t th;
    pthread_create(&th, NULL, e2e_consumer, &e);
    rd_kafka_t *rk = producer_new(o);
    uint8_t *pool = payload_pool();
    /* A consumer takes about a second to find its partition leader and offset; messages sent meanwhile
     * would measure that. Wait for the first record already in the topic (bench/replay create leaves one). */
    int64_t ready_by = now_ns() + 10LL * 1000000000LL;
    while (!e.ready && now_ns() < ready_by)
        usleep(1000);
    if (!e.ready) fprintf(stderr, "rdk_perf: e2e: consumer received nothing in 10 s; measuring anyway\n");
    int64_t t0 = now_ns(), end = t0 + (int64_t)(o->seconds * 1e9);
    e.count_from_ns = t0 + (int64_t)(o->warmup_s * 1e9);
    long long sent = 0;
    bool ok = true;
    while (ok) {
        int64_t t = now_ns();
        if (t >= end) break;
        long long due = (long long)((double)(t - t0) / 1e9 * o->rate);
        while (ok && sent < due && ((sent & 1023) || now_ns() < end)) { /* unthrottled: still stop on time */
            uint8_t *val = pool + (sent * 7919) % POOL_BYTES;
            int64_t ts = now_ns();
            memcpy(val, &ts, 8); /* F_COPY copies it out before the next message overwrites the pool */
            ok = produce_one(rk, o, (int32_t)(sent % o->partitions), val);
            sent++;
        }
        rd_kafka_poll(rk, 0);
        struct timespec d = {0, 200000};
        nanosleep(&d, NULL);
    }
    rd_kafka_flush(rk, 30000);
    int64_t wait_end = now_ns() + 10LL * 1000000000LL;
    while (e.received < pstats.ok && now_ns() < wait_end)
        usleep(1000);
    e.stop = true;
    pthread_join(th, NULL);
    qsort(e.lat_ns, e.nlat, sizeof *e.lat_ns, cmp_i64);
    double recv_s = (double)(e.last_recv_ns - t0) / 1e9;
    printf("{\"mode\": \"e2e\", \"rate\": %.0f, \"sent\": %lld, \"delivered\": %lld, \"received\": %lld, "
           "\"recv_msgs_per_s\": %.1f, \"lat_count\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": "
           "%.3f, "
           "\"max_ms\": %.3f}\n",
           o->rate, sent, (long long)pstats.ok, (long long)e.received,
           recv_s > 0 ? (double)e.received / recv_s : 0, e.nlat, pct_ms(e.lat_ns, e.nlat, 0.5),
           pct_ms(e.lat_ns, e.nlat, 0.99), pct_ms(e.lat_ns, e.nlat, 0.999), pct_ms(e.lat_ns, e.nlat, 1.0));
    rd_kafka_destroy(rk);
    rd_kafka_consumer_close(e.consumer);
    rd_kafka_destroy(e.consumer);
    free(pool);
    return ok && pstats.failed == 0 && e.received == sent && e.nlat > 0 ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: rdk_perf produce|consume|e2e -b HOST:PORT -t TOPIC [-P partitions] [-s value bytes]\n"
            "       [-d seconds] [-n count] [--acks 1|all] [--codec none|zstd] [--linger ms] [--rate msg/s]\n"
            "       [--warmup s (e2e: messages sent in the first s seconds are not counted, 1)]\n"
            "       [--idempotence true|false] [--trace-partition P --trace FILE (produce)]\n"
            "       [-X key=value (any librdkafka setting, e.g. debug=eos,msg; up to 16)]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = {.acks = "1",
                     .codec = "none",
                     .partitions = 1,
                     .size = 100,
                     .linger_ms = 5,
                     .seconds = 3,
                     .warmup_s = 1,
                     .trace_partition = -1};
    if (argc < 2) usage();
    o.mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        i++;
        if (!strcmp(a, "-b"))
            o.brokers = v;
        else if (!strcmp(a, "-t"))
            o.topic = v;
        else if (!strcmp(a, "-P"))
            o.partitions = atoi(v);
        else if (!strcmp(a, "-s"))
            o.size = atoi(v);
        else if (!strcmp(a, "-d"))
            o.seconds = atof(v);
        else if (!strcmp(a, "-n"))
            o.count = atoll(v);
        else if (!strcmp(a, "--acks"))
            o.acks = v;
        else if (!strcmp(a, "--codec"))
            o.codec = v;
        else if (!strcmp(a, "--linger"))
            o.linger_ms = atoi(v);
        else if (!strcmp(a, "--rate"))
            o.rate = atof(v);
        else if (!strcmp(a, "--warmup"))
            o.warmup_s = atof(v);
        else if (!strcmp(a, "--idempotence"))
            o.idempotence = v;
        else if (!strcmp(a, "--trace-partition"))
            o.trace_partition = atoi(v);
        else if (!strcmp(a, "--trace"))
            o.trace_file = v;
        else if (!strcmp(a, "-X") && o.extra_n < EXTRA_CONF_MAX)
            o.extra[o.extra_n++] = v;
        else
            usage();
    }
    if (!o.brokers || !o.topic || o.partitions < 1 || o.partitions > PARTITIONS_MAX || o.size < 1 ||
        o.size > 65536)
        usage();
    signal(SIGPIPE, SIG_IGN);
    trace_partition = o.trace_file ? o.trace_partition : -1;
    if (!strcmp(o.mode, "produce")) return run_produce(&o);
    if (!strcmp(o.mode, "consume")) return run_consume(&o);
    if (!strcmp(o.mode, "e2e")) return run_e2e(&o);
    usage();
    return 2;
}
