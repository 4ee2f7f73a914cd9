/*
 * TxnPipeline BROKER IN OUT PARTITIONS GROUP TXN_ID PER_TXN DELAY_MS: the read-process-write process of the
 * exactly-once fault runs on the Java 4.x client (compat-tests/txn/eos.py --pipeline java starts it, kill -9s it
 * and starts it again), with the contract of compat-tests/txn/pipeline.py (the confluent-kafka one):
 *
 * a KafkaConsumer reads topic IN with isolation.level=read_committed in group GROUP, its partitions assigned by
 * hand (assign(), no group membership: a restarted process starts at once from the group's committed offsets,
 * which a read_committed consumer fetches with require_stable, KIP-447); each record KEY -> VALUE becomes
 * KEY -> VALUE + ":out" on the same partition of OUT, sent by a KafkaProducer with transactional.id TXN_ID
 * (transaction.timeout.ms 10000) whose transaction also carries the consumed offsets (sendOffsetsToTransaction
 * with the consumer's group metadata); a transaction is committed every PER_TXN records, or when a poll returns
 * nothing. DELAY_MS is slept after each record. Prints "pipeline: commit N: ..." after each commit.
 *
 * Errors, as KafkaProducer's javadoc says (its transactional example, commitTransaction/abortTransaction):
 *   - ProducerFencedException, InvalidProducerEpochException (both ApplicationRecoverableException, KIP-1050:
 *     the producer must be closed), OutOfOrderSequenceException, AuthorizationException,
 *     UnsupportedVersionException: close the producer and exit with status 3; eos.py starts a new process, whose
 *     initTransactions fences the old epoch and aborts what it left open;
 *   - TimeoutException from commitTransaction / abortTransaction: the same call again (the request may already
 *     be on its way; another operation is not allowed), up to COMMIT_TRIES times, then exit 3;
 *   - any other KafkaException: abortTransaction, seek the consumer back to the offsets of the last committed
 *     transaction (the aborted records are read and written again), begin a new transaction, go on;
 *   - a failure of the abort itself, or of initTransactions / the first positions: exit 3.
 * Env TXN_PIPELINE_ABORT_EVERY=M (M > 0): every M-th transaction takes the abortable path above instead of its
 * commit ("injected abort"), so the abort, the seek back and the records read again are exercised even when the
 * client rides through every fault without an error (as it does in eos.py's seeds 1-3).
 * Read next: compat-tests/txn/eos.py (the faults and the checks), compat-tests/txn/pipeline.py.
 */
package dev.gregor.streams;

import java.time.Duration;
import java.util.*;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.*;

public final class TxnPipeline {
    static final int COMMIT_TRIES = 6; // x max.block.ms 10 s: a commit or abort given up after ~60 s

    /** Thrown to end the process with status 3 (eos.py starts it again). */
    static final class Fatal extends RuntimeException {
        Fatal(String what, Exception cause) {
            super(what + ": " + cause, cause);
        }
    }

    static boolean fatal(Exception e) {
        return e instanceof ProducerFencedException || e instanceof InvalidProducerEpochException
                || e instanceof OutOfOrderSequenceException || e instanceof AuthorizationException
                || e instanceof UnsupportedVersionException;
    }

    /** commitTransaction (commit=true) or abortTransaction, retried on TimeoutException only. */
    static void finish(KafkaProducer<byte[], byte[]> p, boolean commit) {
        for (int i = 1; ; i++) {
            try {
                if (commit) p.commitTransaction();
                else p.abortTransaction();
                return;
            } catch (TimeoutException e) {
                System.out.println("pipeline: " + (commit ? "commitTransaction" : "abortTransaction") + " timed out (try " + i + "): " + e.getMessage());
                if (i == COMMIT_TRIES) throw new Fatal((commit ? "commit" : "abort") + " timed out " + i + " times", e);
            }
        }
    }

    public static void main(String[] args) {
        String broker = args[0], src = args[1], dst = args[2], group = args[4], tid = args[5];
        int parts = Integer.parseInt(args[3]), perTxn = Integer.parseInt(args[6]);
        long delayMs = Long.parseLong(args[7]);
        int abortEvery = Integer.parseInt(System.getenv().getOrDefault("TXN_PIPELINE_ABORT_EVERY", "0"));
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        // the one broker is killed and restarted every few seconds: reconnect within 250 ms, not up to 1 s
        cp.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 250);
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 10000);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10000);
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 250);
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < parts; i++) tps.add(new TopicPartition(src, i));
        int rc = 0;
        KafkaProducer<byte[], byte[]> p = null;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer());
            p.initTransactions();
            c.assign(tps);
            Map<Integer, Long> base = new TreeMap<>(); // partition -> next offset after the last committed transaction
            for (TopicPartition tp : tps) base.put(tp.partition(), c.position(tp, Duration.ofSeconds(30)));
            System.out.println("pipeline: started at " + base);
            p.beginTransaction();
            Deque<ConsumerRecord<byte[], byte[]>> buf = new ArrayDeque<>();
            Map<Integer, Long> pending = new TreeMap<>();
            int n = 0, commits = 0, aborts = 0, txns = 0;
            while (true) {
                try {
                    if (buf.isEmpty()) c.poll(Duration.ofMillis(100)).forEach(buf::add);
                    ConsumerRecord<byte[], byte[]> m = buf.poll();
                    if (m != null) {
                        byte[] v = Arrays.copyOf(m.value(), m.value().length + 4);
                        System.arraycopy(":out".getBytes(), 0, v, m.value().length, 4);
                        p.send(new ProducerRecord<>(dst, m.partition(), m.key(), v));
                        pending.put(m.partition(), m.offset() + 1);
                        n++;
                        if (delayMs > 0) Thread.sleep(delayMs);
                    }
                    if (n > 0 && (n >= perTxn || m == null)) {
                        if (abortEvery > 0 && ++txns % abortEvery == 0) throw new KafkaException("injected abort");
                        Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                        pending.forEach((part, o) -> offs.put(new TopicPartition(src, part), new OffsetAndMetadata(o)));
                        p.sendOffsetsToTransaction(offs, c.groupMetadata());
                        finish(p, true);
                        commits++;
                        base.putAll(pending);
                        System.out.println("pipeline: commit " + commits + ": " + n + " records, offsets " + pending);
                        pending.clear();
                        n = 0;
                        p.beginTransaction();
                    }
                } catch (KafkaException e) {
                    if (fatal(e)) throw e;
                    // abortable: abort, read again from the last committed offsets, go on
                    aborts++;
                    System.out.println("pipeline: abort " + aborts + " on " + e + "; back to " + base);
                    finish(p, false);
                    buf.clear();
                    pending.clear();
                    n = 0;
                    for (TopicPartition tp : tps) c.seek(tp, base.get(tp.partition()));
                    p.beginTransaction();
                }
            }
        } catch (Exception e) {
            System.out.println("pipeline: ending on " + e);
            rc = 3;
        } finally {
            if (p != null) {
                try {
                    p.close(Duration.ZERO); // fenced or failed: nothing more to send
                } catch (Exception ignored) { }
            }
        }
        System.out.flush();
        System.exit(rc);
    }
}
