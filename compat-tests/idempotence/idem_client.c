/*
 * idem_client.c: the librdkafka client of the idempotence compat suite (test code only; run.sh compiles it
 * with `cc ... -lrdkafka` into a temporary directory, never into the broker).
 *
 * Modes:
 *   create  BROKER TOPIC PARTITIONS          rd_kafka_CreateTopics (replication 1); exit 0 when created.
 *   produce BROKER TOPIC PARTITIONS N LOG [--no-idempotence]
 *           N records, record i to partition i % PARTITIONS, value "idem:<i, 9 digits>:<tag>" where tag is
 *           a function of i, with enable.idempotence=true, acks=all, message.timeout.ms=3600000 (longer than
 *           any run), small batches (batch.num.messages=50) so that there are many Produce requests to cut,
 *           and fast reconnects. LOG gets one line per delivery report: "i ok partition offset" or
 *           "i err <code> <name>"; it is flushed every 100 ms so run.sh can follow progress. At the end it
 *           prints "produce: delivered D failed F resent S request-retries R disconnects X epochs E fatal
 * 0|1" from librdkafka's statistics: resent = records transmitted (top-level txmsgs) minus records delivered
 * or failed, i.e. records sent more than once; request-retries and disconnects = sums of the brokers'
 * txretries and disconnects; epochs = the idempotence state's epoch_cnt. Exit 0 when every record was
 * delivered, 1 when some delivery failed, 3 on a fatal error (e.g. the broker does not support the idempotent
 * producer). IDEM_STATS_DUMP=FILE in the environment: the last statistics JSON is written there (debugging).
 *           --no-idempotence turns idempotence off (and allows 5 in flight with retries): the suite's
 *           self-check that the proxy really makes duplicates, which the checker must then find.
 *   dump    BROKER TOPIC PARTITIONS OUT       assign() every partition from the beginning (no group), read
 *           up to the high watermark found at start, write "partition offset value\n" per record to OUT.
 * Invariants: a record's value is a pure function of its number, so check.py can tell a record that was
 * never sent (bad value) from a sent one. Read next: check.py (the assertions), run.sh.
 */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *log_fp;
static long long delivered, failed;
static int fatal;
static long long stat_retries, stat_disconnects, stat_txmsgs, stat_epochs, stats_seen;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "idem_client: %s: %s\n", what, why);
    exit(2);
}

static void set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char err[256];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) die(k, err);
}

/* value of record i: "idem:%09lld:" then a tag derived from i */
static int value_of(char *buf, size_t size, long long i)
{
    return snprintf(buf, size, "idem:%09lld:%08llx", i,
                    (unsigned long long)((i * 2654435761ULL) & 0xffffffffULL));
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    long long i = (long long)(intptr_t)m->_private;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        delivered++;
        fprintf(log_fp, "%lld ok %d %" PRId64 "\n", i, (int)m->partition, m->offset);
    } else {
        failed++;
        fprintf(log_fp, "%lld err %d %s\n", i, (int)m->err, rd_kafka_err2name(m->err));
    }
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)opaque;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        fprintf(stderr, "idem_client: FATAL error %s: %s\n", rd_kafka_err2name(orig), why);
        fatal = 1;
    } else if (err != RD_KAFKA_RESP_ERR__TRANSPORT && err != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
        fprintf(stderr, "idem_client: error %s: %s\n", rd_kafka_err2name(err), reason);
    }
}

/* Sum of every `"key":<int>` in a statistics JSON document (only broker objects carry these keys). */
/* The value of the first (or last) `"key":<int>` in a statistics JSON document; 0 when absent. */
static long long nth_key(const char *json, const char *key, int last)
{
    char pat[64];
    const char *found = NULL;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    for (const char *p = strstr(json, pat); p; p = last ? strstr(p + 1, pat) : NULL)
        found = p;
    return found ? strtoll(found + strlen(pat), NULL, 10) : 0;
}

static long long sum_key(const char *json, const char *key)
{
    char pat[64];
    long long sum = 0;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    for (const char *p = strstr(json, pat); p; p = strstr(p + 1, pat))
        sum += strtoll(p + strlen(pat), NULL, 10);
    return sum;
}

static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    (void)len;
    (void)opaque;
    if (getenv("IDEM_STATS_DUMP")) {
        FILE *f = fopen(getenv("IDEM_STATS_DUMP"), "w");
        if (f) {
            fwrite(json, 1, len, f);
            fclose(f);
        }
    }
    stat_retries = sum_key(json, "txretries");
    stat_disconnects = sum_key(json, "disconnects");
    stat_txmsgs = nth_key(json, "txmsgs", 1); /* the top-level count comes last, after "topics" */
    stat_epochs = nth_key(json, "epoch_cnt", 0);
    stats_seen++;
    return 0;
}

static int do_create(const char *broker, const char *topic, int parts)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[256];
    set(conf, "bootstrap.servers", broker);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, parts, 1, err, sizeof err);
    if (!nt) die("NewTopic", err);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = 1;
    if (!ev) {
        fprintf(stderr, "create: no answer in 30 s\n");
    } else if (rd_kafka_event_error(ev)) {
        fprintf(stderr, "create: %s\n", rd_kafka_event_error_string(ev));
    } else {
        size_t n;
        const rd_kafka_topic_result_t **r =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        if (n == 1 && rd_kafka_topic_result_error(r[0]) == RD_KAFKA_RESP_ERR_NO_ERROR)
            rc = 0;
        else if (n == 1)
            fprintf(stderr, "create: %s\n", rd_kafka_topic_result_error_string(r[0]));
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

static int do_produce(const char *broker, const char *topic, int parts, long long n, const char *log_path,
                      int idempotence)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[256];
    set(conf, "bootstrap.servers", broker);
    set(conf, "enable.idempotence", idempotence ? "true" : "false");
    set(conf, "acks", "all");
    set(conf, "message.timeout.ms", "3600000");
    set(conf, "linger.ms", "2");
    set(conf, "batch.num.messages", "50");
    set(conf, "max.in.flight.requests.per.connection", "5");
    set(conf, "retry.backoff.ms", "20");
    set(conf, "reconnect.backoff.ms", "20");
    set(conf, "reconnect.backoff.max.ms", "300");
    set(conf, "statistics.interval.ms", "500");
    if (!idempotence) set(conf, "retries", "1000000");
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_stats_cb(conf, stats_cb);
    log_fp = fopen(log_path, "w");
    if (!log_fp) die("open", log_path);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    double t0 = now_s(), last_flush = 0;
    char val[64];
    for (long long i = 0; i < n && !fatal; i++) {
        int len = value_of(val, sizeof val, i);
        for (;;) {
            rd_kafka_resp_err_t e = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION((int32_t)(i % parts)),
                RD_KAFKA_V_VALUE(val, (size_t)len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_OPAQUE((void *)(intptr_t)i), RD_KAFKA_V_END);
            if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                fprintf(log_fp, "%lld err %d %s\n", i, (int)e, rd_kafka_err2name(e));
                failed++;
                break;
            }
            rd_kafka_poll(rk, 10);
        }
        rd_kafka_poll(rk, 0);
        if (now_s() - last_flush > 0.1) {
            fflush(log_fp);
            last_flush = now_s();
        }
    }
    while (!fatal && rd_kafka_outq_len(rk) > 0) {
        rd_kafka_poll(rk, 100);
        fflush(log_fp);
    }
    /* statistics taken after the last delivery (one interval is 500 ms) */
    long long seen = stats_seen;
    for (double until = now_s() + 2; stats_seen < seen + 1 && now_s() < until;)
        rd_kafka_poll(rk, 100);
    fflush(log_fp);
    printf("produce: delivered %lld failed %lld resent %lld request-retries %lld disconnects %lld epochs "
           "%lld fatal %d"
           " in %.1f s\n",
           delivered, failed, stat_txmsgs > delivered + failed ? stat_txmsgs - delivered - failed : 0,
           stat_retries, stat_disconnects, stat_epochs, fatal, now_s() - t0);
    fflush(stdout);
    if (fatal) {
        /* the remaining messages fail with the fatal error; their reports do not matter here */
        rd_kafka_purge(rk,
                       RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT | RD_KAFKA_PURGE_F_NON_BLOCKING);
        rd_kafka_flush(rk, 2000);
        fflush(log_fp);
    }
    rd_kafka_destroy(rk);
    fclose(log_fp);
    return fatal ? 3 : failed ? 1 : 0;
}

static int do_dump(const char *broker, const char *topic, int parts, const char *out_path)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[256];
    set(conf, "bootstrap.servers", broker);
    set(conf, "group.id", "idem-dump");
    set(conf, "enable.auto.commit", "false");
    set(conf, "enable.partition.eof", "true");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) die("rd_kafka_new", err);
    FILE *out = fopen(out_path, "w");
    if (!out) die("open", out_path);
    int64_t *hwm = calloc((size_t)parts, sizeof *hwm);
    int64_t *next = calloc((size_t)parts, sizeof *next);
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++) {
        int64_t lo;
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hwm[p], 30000);
        if (e) die("query_watermark_offsets", rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_add(tp, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(rk, tp);
    rd_kafka_topic_partition_list_destroy(tp);
    int done = 0;
    for (int p = 0; p < parts; p++)
        done += hwm[p] == 0;
    double deadline = now_s() + 300;
    long long records = 0;
    while (done < parts && now_s() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m) continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition >= 0 && m->partition < parts) {
            fprintf(out, "%d %" PRId64 " %.*s\n", (int)m->partition, m->offset, (int)m->len,
                    (const char *)m->payload);
            records++;
            if (m->offset + 1 >= hwm[m->partition] && next[m->partition] < hwm[m->partition]) done++;
            next[m->partition] = m->offset + 1;
        } else if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            fprintf(stderr, "dump: %s\n", rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);
    }
    fclose(out);
    printf("dump: %lld records from %d partitions%s\n", records, parts,
           done < parts ? " (TIMED OUT before the end)" : "");
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(hwm);
    free(next);
    return done < parts ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "create")) return do_create(argv[2], argv[3], atoi(argv[4]));
    if (argc >= 7 && !strcmp(argv[1], "produce"))
        return do_produce(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]), argv[6],
                          !(argc >= 8 && !strcmp(argv[7], "--no-idempotence")));
    if (argc >= 6 && !strcmp(argv[1], "dump")) return do_dump(argv[2], argv[3], atoi(argv[4]), argv[5]);
    fprintf(stderr,
            "usage: idem_client create|produce|dump ... (see the comment at the top of idem_client.c)\n");
    return 2;
}
