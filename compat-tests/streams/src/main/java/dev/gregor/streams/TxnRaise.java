/*
 * TxnRaise BROKER TOPIC_A TOPIC_B TXN_ID K MAX_S TRIGGER_FILE STOP_FILE: the Java 4.x transactional producer of
 * compat-tests/cluster/txn_raise.py (issue #25: transaction.version raised from 1 to 2 on a running cluster).
 *
 * One KafkaProducer (enable.idempotence, acks=all, transactional.id TXN_ID, connections.max.idle.ms 2000 so that
 * a connection it opened at start and no longer uses is closed, and a later need for that broker opens a new one,
 * whose ApiVersions answer carries the cluster's current FinalizedFeaturesEpoch) runs transactions back to back:
 * beginTransaction, K records to TOPIC_A (key "k<T>-<I>", value "a-<T>-<I>", T the transaction's number from 0,
 * I from 0 to K-1), commitTransaction. Once TRIGGER_FILE exists each transaction also sends K records to TOPIC_B
 * (value "b-<T>-<I>"). Ends when STOP_FILE exists or MAX_S seconds have passed.
 *
 * The Java client reads ApiVersions only when it opens a connection, and adopts a finalized transaction.version
 * at beginTransaction only when it saw a newer FinalizedFeaturesEpoch (TransactionManager
 * .maybeUpdateTransactionV2Enabled), so it keeps version 1 after the raise until it connects to a broker again:
 * here, to TOPIC_B's leader once the trigger file exists.
 *
 * Any exception inside a transaction is a failure: printed, the transaction aborted (if the producer allows it;
 * a fatal error ends the run). Prints "txnraise: <s> s committed <n> failed <n> b <n>" once a second and at the
 * end "txnraise: total committed <n> failed <n> b_txns <n> first_b <T or -1> records_a <n> records_b <n>";
 * exit 0 only with 0 failures (1 otherwise, 2 on bad arguments).
 * Read next: compat-tests/cluster/txn_raise.py.
 */
package dev.gregor.streams;

import java.io.File;
import java.util.Properties;

import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnRaise {
    public static void main(String[] args) {
        if (args.length != 8) {
            System.out.println("usage: TxnRaise BROKER TOPIC_A TOPIC_B TXN_ID K MAX_S TRIGGER_FILE STOP_FILE");
            System.exit(2);
        }
        String broker = args[0], topicA = args[1], topicB = args[2], tid = args[3];
        int k = Integer.parseInt(args[4]);
        long maxMs = Long.parseLong(args[5]) * 1000;
        File trigger = new File(args[6]), stop = new File(args[7]);
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.CONNECTIONS_MAX_IDLE_MS_CONFIG, 2000);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 30000);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 1);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        long committed = 0, failed = 0, bTxns = 0, firstB = -1, recA = 0, recB = 0;
        long t0 = System.currentTimeMillis(), nextPrint = t0 + 1000;
        int rc;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            p.initTransactions();
            System.out.println("txnraise: initialised in " + (System.currentTimeMillis() - t0) + " ms");
            for (long t = 0; ; t++) {
                long now = System.currentTimeMillis();
                if (now >= nextPrint) {
                    System.out.println("txnraise: " + (now - t0) / 1000 + " s committed " + committed + " failed " + failed + " b " + bTxns);
                    nextPrint += 1000 * ((now - nextPrint) / 1000 + 1);
                }
                if (now - t0 >= maxMs || stop.exists()) break;
                boolean toB = trigger.exists();
                try {
                    p.beginTransaction();
                    for (int i = 0; i < k; i++) p.send(new ProducerRecord<>(topicA, "k" + t + "-" + i, "a-" + t + "-" + i));
                    if (toB) {
                        for (int i = 0; i < k; i++) p.send(new ProducerRecord<>(topicB, "k" + t + "-" + i, "b-" + t + "-" + i));
                    }
                    p.commitTransaction();
                    committed++;
                    recA += k;
                    if (toB) {
                        if (firstB < 0) {
                            firstB = t;
                            System.out.println("txnraise: first transaction with " + topicB + ": " + t + " at " + (System.currentTimeMillis() - t0) + " ms");
                        }
                        bTxns++;
                        recB += k;
                    }
                } catch (KafkaException e) {
                    failed++;
                    System.out.println("txnraise: transaction " + t + " failed: " + e);
                    try {
                        p.abortTransaction();
                    } catch (Exception e2) {
                        System.out.println("txnraise: abortTransaction failed too, ending: " + e2);
                        break;
                    }
                }
            }
            rc = failed == 0 ? 0 : 1;
        } catch (Exception e) {
            System.out.println("txnraise: ending on " + e);
            failed++;
            rc = 1;
        }
        System.out.println("txnraise: total committed " + committed + " failed " + failed + " b_txns " + bTxns + " first_b " + firstB
                + " records_a " + recA + " records_b " + recB);
        System.out.flush();
        System.exit(rc);
    }
}
