/*
 * TxnBench MODE BROKER TOPIC TXN_ID COUNT_OR_SECONDS [WARMUP]: the Java 4.4 transactional producer of
 * bench/txn_tv2.py (issue #25's measurements: EndTxn latency and transactional throughput at transaction version
 * 2 against 1, Gregor against Apache Kafka 4.4). One KafkaProducer: acks=all, enable.idempotence, transactional.id
 * TXN_ID, 1 KiB values (random bytes, no key), other settings default. The client picks transaction version 2
 * (EndTxn v5, partitions added by the Produce itself, an epoch bump per transaction) when the broker it connects
 * to finalizes transaction.version 2, else version 1 (AddPartitionsToTxn, EndTxn v4).
 *
 * MODE latency: linger.ms=0; WARMUP uncounted transactions, then COUNT transactions of one record one after the
 *   other: begin, send, flush (the record acknowledged), commitTransaction. "commit_ms" times commitTransaction
 *   alone after the flush (the EndTxn round trip: at version 1 the AddPartitionsToTxn went before the Produce, at
 *   version 2 there is none and the new epoch comes in EndTxn's answer, so nothing else is left to send);
 *   "flush_commit_ms" times begin + send + flush + commit.
 * MODE throughput: linger.ms=5; WARMUP uncounted transactions, then for COUNT_OR_SECONDS seconds transactions of
 *   100 records back to back (begin, 100 sends, flush, commitTransaction): records/s and transactions/s over the
 *   time to the last commit. The flush before the commit works around a race in the 4.4 client at transaction
 *   version 2 (bench/results-txn.md, the note under the throughput table): its sender thread reads "no batch
 *   incomplete" (RecordAccumulator.hasIncomplete) before it takes the transaction manager's lock in
 *   TransactionManager.nextRequest; when this thread begins the next transaction, appends its 100 records and
 *   enqueues its EndTxn in between, the EndTxn goes out before any of those records, the coordinator finds the
 *   previous transaction complete and nothing added, and answers INVALID_TXN_STATE (Kafka's coordinator does the
 *   same), fatal to the producer. At version 1 the AddPartitionsToTxn queued first closes that window. The warm-up
 *   transactions flush too.
 *
 * Prints one JSON line on stdout: mode, txns, records, seconds, txns_per_s, records_per_s, mb_per_s, value_bytes,
 * client_tv2 (the client's own TransactionManager.isTransactionV2Enabled() after the run, read by reflection; null
 * if that fails) and, for latency, commit_ms / flush_commit_ms as {p50, p99, p999, max} in ms (nearest rank, as
 * bench/rdk_txn.c) and flush_commit_over_10ms, how many whole transactions took 10 ms or more (at version 2 a
 * Produce that meets the previous transaction still completing waits for the leader's 20 ms retry of the implicit
 * add; at version 1 the client's AddPartitionsToTxn retries). Exit 0; 1 with {"error": ...} on any exception (the transaction is not retried); 2 on bad
 * arguments. -Dtxnbench.props=k=v,k=v adds producer settings (for a diagnosis; bench/txn_tv2.py passes none).
 * Read next: bench/txn_tv2.py.
 */
package dev.gregor.streams;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnBench {
    static final int SIZE = 1024;
    static final int RECORDS_PER_TXN = 100;

    public static void main(String[] args) {
        if (args.length < 5 || args.length > 6 || !(args[0].equals("latency") || args[0].equals("throughput"))) {
            System.out.println("usage: TxnBench latency|throughput BROKER TOPIC TXN_ID COUNT_OR_SECONDS [WARMUP]");
            System.exit(2);
        }
        boolean lat = args[0].equals("latency");
        String broker = args[1], topic = args[2], tid = args[3];
        double amount = Double.parseDouble(args[4]);
        int warmup = args.length > 5 ? Integer.parseInt(args[5]) : 20;
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, lat ? 0 : 5);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60000);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60000);
        // more producer settings for a diagnosis, not used by bench/txn_tv2.py: -Dtxnbench.props=k=v,k=v
        for (String kv : System.getProperty("txnbench.props", "").split(",")) {
            int eq = kv.indexOf('=');
            if (eq > 0) pp.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        byte[][] pool = new byte[64][SIZE];
        Random rnd = new Random(42);
        for (byte[] v : pool) rnd.nextBytes(v);
        int rc = 0;
        StringBuilder out = new StringBuilder();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer())) {
            p.initTransactions();
            long rec = 0;
            int per = lat ? 1 : RECORDS_PER_TXN;
            for (int w = 0; w < warmup; w++) {
                p.beginTransaction();
                for (int r = 0; r < per; r++) p.send(new ProducerRecord<>(topic, pool[(int) (rec++ % pool.length)]));
                p.flush(); // the client race of the header comment
                p.commitTransaction();
            }
            long txns = 0, t0 = System.nanoTime(), last = t0;
            if (lat) {
                int n = (int) amount;
                long[] commit = new long[n], fc = new long[n];
                for (int i = 0; i < n; i++) {
                    long a = System.nanoTime();
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(topic, pool[(int) (rec++ % pool.length)]));
                    p.flush();
                    long b = System.nanoTime();
                    p.commitTransaction();
                    long c = System.nanoTime();
                    commit[i] = c - b;
                    fc[i] = c - a;
                }
                last = System.nanoTime();
                txns = n;
                long slow = Arrays.stream(fc).filter(x -> x >= 10_000_000L).count();
                out.append(", ").append(pct("commit_ms", commit)).append(", ").append(pct("flush_commit_ms", fc))
                        .append(", \"flush_commit_over_10ms\": ").append(slow);
            } else {
                long end = t0 + (long) (amount * 1e9);
                while (System.nanoTime() < end) {
                    p.beginTransaction();
                    for (int r = 0; r < per; r++) p.send(new ProducerRecord<>(topic, pool[(int) (rec++ % pool.length)]));
                    p.flush(); // the client race of the header comment
                    p.commitTransaction();
                    txns++;
                    last = System.nanoTime();
                }
            }
            double secs = (last - t0) / 1e9;
            long records = txns * per;
            System.out.println("{\"mode\": \"" + args[0] + "\", \"records_per_txn\": " + per + ", \"size\": " + SIZE
                    + ", \"txns\": " + txns + ", \"records\": " + records + ", \"seconds\": " + fmt(secs)
                    + ", \"txns_per_s\": " + fmt(txns / secs) + ", \"records_per_s\": " + fmt(records / secs)
                    + ", \"mb_per_s\": " + fmt(records * (double) SIZE / secs / 1e6) + ", \"value_bytes\": "
                    + records * SIZE + ", \"client_tv2\": " + clientTv2(p) + out + "}");
        } catch (Exception e) {
            String msg = String.valueOf(e).replace("\\", "\\\\").replace("\"", "'");
            System.out.println("{\"error\": \"" + msg + "\"}");
            System.err.println("txnbench: " + msg); // bench/run.py's run_json reports the tail of stderr
            rc = 1;
        }
        System.out.flush();
        System.exit(rc);
    }

    static String fmt(double v) {
        return String.format(java.util.Locale.ROOT, "%.3f", v);
    }

    /** "name": {"p50": .., "p99": .., "p999": .., "max": ..} in ms of nanosecond samples (sorted in place). */
    static String pct(String name, long[] v) {
        if (v.length == 0) return "\"" + name + "\": null";
        Arrays.sort(v);
        double[] q = {0.5, 0.99, 0.999};
        String[] k = {"p50", "p99", "p999"};
        StringBuilder s = new StringBuilder("\"" + name + "\": {");
        for (int i = 0; i < q.length; i++)
            s.append('"').append(k[i]).append("\": ").append(fmt(v[(int) ((v.length - 1) * q[i] + 0.5)] / 1e6)).append(", ");
        return s.append("\"max\": ").append(fmt(v[v.length - 1] / 1e6)).append('}').toString();
    }

    /** The client's TransactionManager.isTransactionV2Enabled() as "true"/"false", or "null" if unreadable. */
    static String clientTv2(KafkaProducer<?, ?> p) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(p);
            Method m = tm.getClass().getMethod("isTransactionV2Enabled");
            return String.valueOf(m.invoke(tm));
        } catch (ReflectiveOperationException | RuntimeException e) {
            return "null";
        }
    }
}
