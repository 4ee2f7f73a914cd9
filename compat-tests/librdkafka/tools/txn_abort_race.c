/* txn_abort_race: librdkafka 2.0.2's abort_transaction() right after a commit (test 0098's "Test 2 - rapid
 * abort / committing"): one record per transaction, no flush, abort and commit in turn, on one producer.
 *
 *   cc -O1 -o txn_abort_race txn_abort_race.c -lrdkafka
 *   txn_abort_race BOOTSTRAP TOPIC ROUNDS [DEBUG|-] [ABORT_DELAY_US]
 *
 * Prints `OK N rounds` (exit 0) or `FAIL round I` (exit 1, the error on stderr); exit 2 on a setup error.
 * ABORT_DELAY_US (default 0) sleeps between produce() and abort_transaction(), so librdkafka's
 * AddPartitionsToTxn timer fires first. The failure it shows is librdkafka's, not the broker's: when that
 * AddPartitionsToTxn is answered CONCURRENT_TRANSACTIONS (the previous commit still in PrepareCommit),
 * rd_kafka_txn_handle_AddPartitionsToTxn counts the request as sent anyway (txn_req_cnt back up), so
 * abort_transaction() sends EndTxn(abort) for a transaction the coordinator never began; Kafka 4.x
 * (TransactionCoordinator.endTransactionWithTV1: PrepareCommit or CompleteCommit with ABORT) and Gregor
 * answer INVALID_TXN_STATE, fatal for the producer. Against three Kafka 4.4.0 brokers it fails as against
 * three Gregor brokers (2026-12-03, rdk0098). Not part of any make target. */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void set(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char e[256];
    if (rd_kafka_conf_set(c, k, v, e, sizeof e) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s: %s\n", k, e);
        exit(2);
    }
}

static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *o)
{
    (void)rk;
    (void)m;
    (void)o;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s BOOTSTRAP TOPIC ROUNDS [DEBUG|-] [ABORT_DELAY_US]\n", argv[0]);
        return 2;
    }
    char id[64], e[256];
    snprintf(id, sizeof id, "txn-abort-race-%ld-%d", (long)time(NULL), (int)getpid());
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    set(c, "bootstrap.servers", argv[1]);
    set(c, "transactional.id", id);
    set(c, "linger.ms", "5"); /* as 0098 */
    if (argc > 4 && strcmp(argv[4], "-") != 0) set(c, "debug", argv[4]);
    rd_kafka_conf_set_dr_msg_cb(c, dr);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, e, sizeof e);
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", e);
        return 2;
    }
    rd_kafka_error_t *err = rd_kafka_init_transactions(rk, 30000);
    if (err) {
        fprintf(stderr, "init_transactions: %s\n", rd_kafka_error_string(err));
        return 2;
    }
    int rounds = atoi(argv[3]);
    int delay_us = argc > 5 ? atoi(argv[5]) : 0;
    for (int i = 0; i < rounds; i++) {
        int commit = i % 2 == 1;
        if ((err = rd_kafka_begin_transaction(rk))) {
            fprintf(stderr, "round %d begin: %s\n", i, rd_kafka_error_string(err));
            printf("FAIL round %d\n", i);
            return 1;
        }
        if (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(argv[2]), RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_VALUE("abcd", 4), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END)) {
            fprintf(stderr, "round %d: produce failed\n", i);
            return 2;
        }
        if (!commit && delay_us > 0) usleep((useconds_t)delay_us);
        err = commit ? rd_kafka_commit_transaction(rk, 30000) : rd_kafka_abort_transaction(rk, 30000);
        if (err) {
            fprintf(stderr, "round %d %s: %s\n", i, commit ? "commit" : "abort", rd_kafka_error_string(err));
            printf("FAIL round %d\n", i);
            return 1;
        }
        rd_kafka_poll(rk, 0);
    }
    printf("OK %d rounds\n", rounds);
    rd_kafka_destroy(rk);
    return 0;
}
