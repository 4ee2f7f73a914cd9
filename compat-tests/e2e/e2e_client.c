/*
 * e2e_client.c: a librdkafka test client for the end-to-end compat tests (never linked into the broker;
 * e2e/run.sh compiles it with `cc ... -lrdkafka` into a temporary directory).
 *
 * Modes:
 *   create   BROKER TOPIC PARTITIONS            CreateTopics through rd_kafka_CreateTopics; exit 0 when
 * created produce  BROKER TOPIC PARTITIONS N SIZE [ACKLOG] N records of SIZE bytes with acks=-1, linger.ms=5;
 * record `seq` goes to partition seq % PARTITIONS and its payload is payload_fill(seq) (the sequence number
 * in decimal, then bytes derived from it). Every acknowledged record is appended to ACKLOG as "partition
 * offset seq\n" (one write(2) per line, so a kill -9 of this process leaves whole lines). Exits 0 when all N
 * are acknowledged. verify   BROKER TOPIC PARTITIONS N SIZE      assign() every partition from the beginning
 * (no group) and check every record: partition p holds exactly the seqs p, p+P, p+2P, ... at offsets 0, 1, 2,
 * ... with payload_fill(seq) byte for byte. Exits 0 when all N were seen and correct. dump     BROKER TOPIC
 * PARTITIONS OUT         consume every partition from the beginning to its end (partition EOF) and write
 * "partition offset payload-seq\n" per record to OUT. Invariants: the payload of a record is a pure function
 * of its sequence number, so a consumer can check it without the producer's state. Read next: e2e/run.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE_MAX_BYTES 65536

static int ack_fd = -1;
static long long acked, failed_deliveries;
static char last_error[512];

static void payload_fill(char *buf, size_t size, long long seq)
{
    int n = snprintf(buf, size, "%012lld:", seq);
    for (size_t i = (size_t)n; i < size; i++)
        buf[i] = (char)('a' + (seq * 7 + (long long)i) % 26);
}

static long long payload_seq(const char *p, size_t len)
{
    if (len < 13 || p[12] != ':') return -1;
    long long v = 0;
    for (int i = 0; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

static rd_kafka_conf_t *base_conf(const char *broker)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", broker, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "conf: %s\n", err);
        exit(2);
    }
    return conf;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "conf %s=%s: %s\n", k, v, err);
        exit(2);
    }
}

static int mode_create(const char *broker, const char *topic, int partitions)
{
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, base_conf(broker), err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        return 2;
    }
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, -1, err, sizeof err);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = 1;
    if (ev && rd_kafka_event_error(ev) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        size_t n;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        if (n == 1 && rd_kafka_topic_result_error(res[0]) == RD_KAFKA_RESP_ERR_NO_ERROR)
            rc = 0;
        else if (n == 1)
            fprintf(stderr, "create %s: %s\n", topic, rd_kafka_err2str(rd_kafka_topic_result_error(res[0])));
    } else {
        fprintf(stderr, "create %s: %s\n", topic, ev ? rd_kafka_event_error_string(ev) : "timed out");
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        failed_deliveries++;
        snprintf(last_error, sizeof last_error, "%s", rd_kafka_err2str(m->err));
        return;
    }
    acked++;
    if (ack_fd >= 0) {
        char line[96];
        int n = snprintf(line, sizeof line, "%" PRId32 " %" PRId64 " %lld\n", m->partition, m->offset,
                         payload_seq(m->payload, m->len));
        if (write(ack_fd, line, (size_t)n) != n) {
            perror("ack log");
            exit(2);
        }
    }
}

static int mode_produce(const char *broker, const char *topic, int partitions, long long n, size_t size,
                        const char *acklog)
{
    char err[512];
    if (acklog) {
        ack_fd = open(acklog, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
        if (ack_fd < 0) {
            perror(acklog);
            return 2;
        }
    }
    rd_kafka_conf_t *conf = base_conf(broker);
    conf_set(conf, "acks", "-1");
    conf_set(conf, "linger.ms", "5");
    conf_set(conf, "queue.buffering.max.messages", "200000");
    conf_set(conf, "message.timeout.ms", "120000");
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        return 2;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    char *buf = malloc(size);
    for (long long seq = 0; seq < n; seq++) {
        payload_fill(buf, size, seq);
        for (;;) {
            if (rd_kafka_produce(rkt, (int32_t)(seq % partitions), RD_KAFKA_MSG_F_COPY, buf, size, NULL, 0,
                                 NULL) == 0)
                break;
            if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                fprintf(stderr, "produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
                return 1;
            }
            rd_kafka_poll(rk, 10);
        }
        rd_kafka_poll(rk, 0);
    }
    while (rd_kafka_outq_len(rk) > 0)
        rd_kafka_poll(rk, 50);
    free(buf);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    printf("produced %lld, acknowledged %lld, failed %lld%s%s\n", n, acked, failed_deliveries,
           failed_deliveries ? ", last error: " : "", failed_deliveries ? last_error : "");
    return acked == n && failed_deliveries == 0 ? 0 : 1;
}

static rd_kafka_t *assigned_consumer(const char *broker, const char *topic, int partitions)
{
    char err[512];
    rd_kafka_conf_t *conf = base_conf(broker);
    conf_set(conf, "group.id", "e2e-unused"); /* required by the API; assign() never joins a group */
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.partition.eof", "true");
    conf_set(conf, "fetch.message.max.bytes", "4194304");
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", err);
        exit(2);
    }
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(tp, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, tp);
    rd_kafka_topic_partition_list_destroy(tp);
    if (e) {
        fprintf(stderr, "assign: %s\n", rd_kafka_err2str(e));
        exit(2);
    }
    return rk;
}

static int mode_verify(const char *broker, const char *topic, int partitions, long long n, size_t size)
{
    rd_kafka_t *rk = assigned_consumer(broker, topic, partitions);
    long long *next_offset = calloc((size_t)partitions, sizeof *next_offset);
    long long *next_seq = calloc((size_t)partitions, sizeof *next_seq);
    for (int p = 0; p < partitions; p++)
        next_seq[p] = p;
    char *want = malloc(size);
    long long seen = 0, bad = 0;
    time_t last_progress = time(NULL);
    while (seen < n && bad < 10) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m) {
            if (time(NULL) - last_progress > 60) {
                fprintf(stderr, "no progress for 60 s at %lld of %lld records\n", seen, n);
                break;
            }
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->err) {
            fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(m));
            bad++;
            rd_kafka_message_destroy(m);
            continue;
        }
        last_progress = time(NULL);
        int p = m->partition;
        if (p < 0 || p >= partitions) {
            fprintf(stderr, "record from partition %d\n", p);
            bad++;
        } else {
            payload_fill(want, size, next_seq[p]);
            if (m->offset != next_offset[p]) {
                fprintf(stderr, "partition %d: offset %" PRId64 ", expected %lld\n", p, m->offset,
                        next_offset[p]);
                bad++;
            } else if (m->len != size || memcmp(m->payload, want, size) != 0) {
                fprintf(stderr,
                        "partition %d offset %" PRId64
                        ": payload of seq %lld expected, got seq %lld (%zu bytes)\n",
                        p, m->offset, next_seq[p], payload_seq(m->payload, m->len), m->len);
                bad++;
            }
            next_offset[p] = m->offset + 1;
            next_seq[p] += partitions;
            seen++;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    printf("verified %lld of %lld records, %lld bad\n", seen, n, bad);
    return seen == n && bad == 0 ? 0 : 1;
}

static int mode_dump(const char *broker, const char *topic, int partitions, const char *out)
{
    FILE *f = fopen(out, "w");
    if (!f) {
        perror(out);
        return 2;
    }
    rd_kafka_t *rk = assigned_consumer(broker, topic, partitions);
    int eofs = 0;
    char *at_eof = calloc((size_t)partitions, 1);
    long long n = 0;
    time_t start = time(NULL);
    while (eofs < partitions && time(NULL) - start < 120) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (m->partition >= 0 && m->partition < partitions && !at_eof[m->partition]) {
                at_eof[m->partition] = 1;
                eofs++;
            }
        } else if (m->err) {
            fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(m));
        } else {
            fprintf(f, "%" PRId32 " %" PRId64 " %lld\n", m->partition, m->offset,
                    payload_seq(m->payload, m->len));
            n++;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    fclose(f);
    printf("dumped %lld records, %d of %d partitions at their end\n", n, eofs, partitions);
    return eofs == partitions ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "create") == 0) return mode_create(argv[2], argv[3], atoi(argv[4]));
    if ((argc == 7 || argc == 8) && strcmp(argv[1], "produce") == 0) {
        size_t size = (size_t)atol(argv[6]);
        if (size < 16 || size > SIZE_MAX_BYTES) return 2;
        return mode_produce(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]), size,
                            argc == 8 ? argv[7] : NULL);
    }
    if (argc == 7 && strcmp(argv[1], "verify") == 0) {
        size_t size = (size_t)atol(argv[6]);
        if (size < 16 || size > SIZE_MAX_BYTES) return 2;
        return mode_verify(argv[2], argv[3], atoi(argv[4]), atoll(argv[5]), size);
    }
    if (argc == 6 && strcmp(argv[1], "dump") == 0) return mode_dump(argv[2], argv[3], atoi(argv[4]), argv[5]);
    fprintf(stderr, "usage: see the comment at the top of e2e_client.c\n");
    return 2;
}
