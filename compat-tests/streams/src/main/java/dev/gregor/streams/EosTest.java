/*
 * EosTest: exactly-once runs against a broker (issue #21), each a driver process that starts the app under test
 * as a child JVM, kill -9s it at seeded moments, restarts it, and checks the end state under read_committed.
 *
 *   EosTest streams BOOTSTRAP SEED WORKDIR   Kafka Streams, processing.guarantee=exactly_once_v2: a stateful
 *       word count (flatMapValues -> groupBy(word) -> count(), so Streams makes a repartition topic and a
 *       changelog topic itself) fed 3000 lines of 5 seeded-random words over ~8 s while running; the instance is
 *       killed (SIGKILL) at a seeded time in [2.5, 5.5] s of the feed (once RUNNING, and after it wrote output)
 *       and restarted on the same state dir; the last count per word in the output topic (read_committed) must
 *       equal the words fed, exactly. Env EOS_GUARANTEE=at_least_once makes it fail (the replay over-counts).
 *   EosTest pipeline BOOTSTRAP SEED WORKDIR  a read-process-write pipeline on the plain Java client: a group
 *       consumer reads topic A (read_committed), a transactional producer writes "out-" + value to topic B with
 *       the consumed offsets in each transaction (sendOffsetsToTransaction with the group metadata, KIP-447),
 *       one transaction per poll (flushed, then held 100 ms, so a kill usually lands inside one); 3000 records;
 *       killed twice, a seeded 200..1000 ms after an instance's first commit, and restarted with the same
 *       transactional.id (its InitProducerId fences the dead one and aborts its open transaction); B under
 *       read_committed must hold every input record exactly once, in order per key.
 *   EosTest streams-app BOOTSTRAP IN OUT STATE_DIR / pipeline-app BOOTSTRAP A B GROUP TXN_ID: the child apps.
 *
 * Each run prints "<name>: 1 passed, 0 failed" or "... 0 passed, 1 failed" with the reason, and exits 0 / 1.
 * Read next: ../../../../../../run.sh (builds, starts Gregor, runs both).
 */
package dev.gregor.streams;

import java.io.File;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

public final class EosTest {
    static final String[] VOCAB = new String[50];
    static {
        for (int i = 0; i < VOCAB.length; i++) VOCAB[i] = "w" + i;
    }

    // ---- the apps under test (child JVMs) ----------------------------------------------------------------
    static void streamsApp(String bootstrap, String in, String out, String stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, "eos-wordcount-" + in);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // env EOS_GUARANTEE=at_least_once shows the check can fail: the replay after the kill double-counts
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, System.getenv().getOrDefault("EOS_GUARANTEE", StreamsConfig.EXACTLY_ONCE_V2));
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(in)
                .flatMapValues(v -> Arrays.asList(v.split(" ")))
                .groupBy((k, w) -> w)
                .count(Materialized.as("counts-store"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams ks = new KafkaStreams(b.build(), p);
        ks.setUncaughtExceptionHandler(e -> {
            System.out.println("streams-app: uncaught " + e);
            e.printStackTrace(System.out);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        ks.setStateListener((n, o) -> System.out.println("streams-app: state " + o + " -> " + n));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> ks.close(Duration.ofSeconds(10))));
        ks.start();
    }

    static void pipelineApp(String bootstrap, String a, String b, String group, String tid) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp); KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            p.initTransactions();
            c.subscribe(List.of(a));
            long n = 0;
            while (true) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                if (rs.isEmpty()) continue;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (ConsumerRecord<String, String> r : rs) {
                    p.send(new ProducerRecord<>(b, r.key(), "out-" + r.value()));
                    offs.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                p.flush(); // the records are in the log, the transaction open: most kills land here
                Thread.sleep(100);
                p.sendOffsetsToTransaction(offs, c.groupMetadata());
                p.commitTransaction();
                n += rs.count();
                if (n == rs.count()) System.out.println("pipeline-app: first commit");
                if (n % 1000 < rs.count()) System.out.println("pipeline-app: " + n + " records copied");
            }
        } catch (Exception e) {
            System.out.println("pipeline-app: " + e);
            e.printStackTrace(System.out);
            System.exit(1);
        }
    }

    // ---- driver helpers ------------------------------------------------------------------------------------
    final String bootstrap, workdir;
    final long seed;
    final Random rnd;
    final Admin admin;
    final String sfx;

    EosTest(String bootstrap, long seed, String workdir) {
        this.bootstrap = bootstrap;
        this.seed = seed;
        this.workdir = workdir;
        this.rnd = new Random(seed);
        this.sfx = Long.toHexString(System.nanoTime() & 0xffffff);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        admin = Admin.create(ap);
    }

    Process child(String name, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
                "-Xmx256m", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"), EosTest.class.getName()));
        cmd.addAll(List.of(args));
        File log = new File(workdir, name + ".log");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log));
        System.out.println("driver: start " + name + " (" + String.join(" ", args) + "), log " + log);
        return pb.start();
    }

    /** SIGKILL (Process.destroyForcibly on Linux) and wait. */
    static void kill9(Process p) throws Exception {
        p.destroyForcibly();
        p.waitFor(10, TimeUnit.SECONDS);
    }

    /** Waits (up to 60 s) until the app's log (all its instances) holds n lines containing what. */
    void waitLog(Process app, String name, String what, int n) throws Exception {
        File log = new File(workdir, name);
        long deadline = System.currentTimeMillis() + 60000;
        while (System.currentTimeMillis() < deadline && app.isAlive()) {
            long c = 0;
            try {
                c = java.nio.file.Files.readAllLines(log.toPath()).stream().filter(l -> l.contains(what)).count();
            } catch (java.io.IOException ignored) { }
            if (c >= n) return;
            Thread.sleep(100);
        }
        throw new IllegalStateException(name + ": no " + n + " lines with \"" + what + "\" in 60 s: " + tail(log, 6));
    }

    KafkaProducer<String, String> producer() {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(pp);
    }

    <V> KafkaConsumer<String, V> reader(String isolation, Deserializer<V> vd) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        return new KafkaConsumer<>(cp, new StringDeserializer(), vd);
    }

    /** Every record of topic t (all partitions) from offset 0 up to its end at isolation, in partition order. */
    <V> List<ConsumerRecord<String, V>> readAll(String t, String isolation, Deserializer<V> vd) {
        List<ConsumerRecord<String, V>> out = new ArrayList<>();
        try (KafkaConsumer<String, V> c = reader(isolation, vd)) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(t, Duration.ofSeconds(10)).forEach(pi -> tps.add(new TopicPartition(t, pi.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(10));
            long deadline = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < deadline) {
                boolean atEnd = true;
                for (TopicPartition tp : tps) if (c.position(tp, Duration.ofSeconds(10)) < end.get(tp)) atEnd = false;
                if (atEnd) break;
                for (ConsumerRecord<String, V> r : c.poll(Duration.ofMillis(300))) out.add(r);
            }
        }
        return out;
    }

    void createTopics(String... names) throws Exception {
        List<NewTopic> l = new ArrayList<>();
        for (String n : names) l.add(new NewTopic(n, 3, (short) 1));
        admin.createTopics(l).all().get(30, TimeUnit.SECONDS);
    }

    static String tail(File f, int lines) {
        try {
            List<String> l = java.nio.file.Files.readAllLines(f.toPath());
            return String.join(" | ", l.subList(Math.max(0, l.size() - lines), l.size()));
        } catch (Exception e) {
            return "(no log)";
        }
    }

    // ---- the Streams run -----------------------------------------------------------------------------------
    String streams() throws Exception {
        String in = "eos-words-" + sfx, out = "eos-counts-" + sfx;
        createTopics(in, out);
        String state = new File(workdir, "streams-state").getPath();
        Map<String, Long> want = new TreeMap<>();
        long killAtMs = 2500 + rnd.nextInt(3000);
        int lines = 3000;
        Process app = child("streams-app", "streams-app", bootstrap, in, out, state);
        waitLog(app, "streams-app.log", "REBALANCING -> RUNNING", 1);
        long t0 = System.currentTimeMillis();
        int outAtKill = 0;
        boolean killed = false;
        try (KafkaProducer<String, String> p = producer()) {
            for (int i = 0; i < lines; i++) {
                StringBuilder sb = new StringBuilder();
                for (int w = 0; w < 5; w++) {
                    String word = VOCAB[rnd.nextInt(VOCAB.length)];
                    want.merge(word, 1L, Long::sum);
                    sb.append(w == 0 ? "" : " ").append(word);
                }
                p.send(new ProducerRecord<>(in, "line" + i, sb.toString()));
                if (i % 30 == 29) { p.flush(); Thread.sleep(80); }
                if (!killed && System.currentTimeMillis() - t0 >= killAtMs) {
                    outAtKill = readAll(out, "read_uncommitted", new LongDeserializer()).size();
                    kill9(app);
                    killed = true;
                    System.out.println("driver: kill -9 streams-app at " + (System.currentTimeMillis() - t0) + " ms, line " + i);
                    app = child("streams-app", "streams-app", bootstrap, in, out, state);
                }
            }
            p.flush();
        }
        if (!killed) throw new IllegalStateException("the feed ended before the seeded kill time " + killAtMs + " ms");
        if (outAtKill == 0) throw new IllegalStateException("the first instance had written no output when it was killed: not a mid-run kill");
        Map<String, Long> got = new TreeMap<>();
        long deadline = System.currentTimeMillis() + 120000;
        int outRecords = 0;
        while (System.currentTimeMillis() < deadline) {
            got.clear();
            List<ConsumerRecord<String, Long>> rs = readAll(out, "read_committed", new LongDeserializer());
            for (ConsumerRecord<String, Long> r : rs) got.put(r.key(), r.value());
            outRecords = rs.size();
            if (got.equals(want)) break;
            if (!app.isAlive()) break;
            Thread.sleep(2000);
        }
        int uncommitted = readAll(out, "read_uncommitted", new LongDeserializer()).size();
        app.destroy(); // SIGTERM: the shutdown hook closes Streams
        if (!app.waitFor(20, TimeUnit.SECONDS)) kill9(app);
        Set<String> internal = new TreeSet<>();
        for (String t : admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get(10, TimeUnit.SECONDS))
            if (t.contains("eos-wordcount-" + in)) internal.add(t);
        if (!got.equals(want)) {
            List<String> diff = new ArrayList<>();
            for (String w : VOCAB)
                if (!Objects.equals(got.get(w), want.get(w))) diff.add(w + " got " + got.get(w) + " want " + want.get(w));
            throw new IllegalStateException("final counts differ on " + diff.size() + " words: " + String.join(", ", diff.subList(0, Math.min(8, diff.size())))
                    + "; app log: " + tail(new File(workdir, "streams-app.log"), 6));
        }
        long total = want.values().stream().mapToLong(Long::longValue).sum();
        return String.format("seed %d: %d lines (%d words, %d distinct) fed while running; kill -9 at %d ms and restart; "
                + "the first instance had written %d count updates by then; final counts exact under read_committed (%d count updates committed, "
                + "%d read_uncommitted); internal topics made by Streams: %s",
                seed, lines, total, want.size(), killAtMs, outAtKill, outRecords, uncommitted, internal);
    }

    // ---- the Java pipeline run -----------------------------------------------------------------------------
    String pipeline() throws Exception {
        String a = "eos-a-" + sfx, b = "eos-b-" + sfx, g = "eos-pipeline-" + sfx, tid = "eos-pipeline-tx-" + sfx;
        createTopics(a, b);
        int n = 3000;
        try (KafkaProducer<String, String> p = producer()) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(a, "k" + (i % 50), "s" + i));
            p.flush();
        }
        // each kill lands a seeded 200..1000 ms after the instance committed its first transaction
        long[] kills = {200 + rnd.nextInt(800), 200 + rnd.nextInt(800)};
        int[] atKill = new int[kills.length];
        Process app = child("pipeline-app", "pipeline-app", bootstrap, a, b, g, tid);
        for (int i = 0; i < kills.length; i++) {
            waitLog(app, "pipeline-app.log", "pipeline-app: first commit", i + 1);
            Thread.sleep(kills[i]);
            atKill[i] = readAll(b, "read_uncommitted", new StringDeserializer()).size();
            kill9(app);
            System.out.println("driver: kill -9 pipeline-app " + kills[i] + " ms after its first commit; B holds " + atKill[i] + " records (read_uncommitted)");
            if (atKill[i] >= n) throw new IllegalStateException("the pipeline had finished before kill " + (i + 1) + ": not a mid-run kill");
            app = child("pipeline-app", "pipeline-app", bootstrap, a, b, g, tid);
        }
        List<ConsumerRecord<String, String>> got = List.of();
        long deadline = System.currentTimeMillis() + 120000;
        while (System.currentTimeMillis() < deadline) {
            got = readAll(b, "read_committed", new StringDeserializer());
            if (got.size() >= n || !app.isAlive()) break;
            Thread.sleep(1000);
        }
        Thread.sleep(1000);
        got = readAll(b, "read_committed", new StringDeserializer());
        int uncommitted = readAll(b, "read_uncommitted", new StringDeserializer()).size();
        app.destroy();
        if (!app.waitFor(20, TimeUnit.SECONDS)) kill9(app);
        Map<String, Integer> seen = new HashMap<>();
        Map<String, Integer> lastSeqOfKey = new HashMap<>();
        int dups = 0, misordered = 0;
        for (ConsumerRecord<String, String> r : got) { // partition order: per key, offsets increase
            int s = Integer.parseInt(r.value().substring("out-s".length()));
            if (seen.merge(r.value(), 1, Integer::sum) > 1) dups++;
            Integer prev = lastSeqOfKey.put(r.key(), s);
            if (prev != null && prev >= s) misordered++;
        }
        int missing = 0;
        for (int i = 0; i < n; i++) if (!seen.containsKey("out-s" + i)) missing++;
        if (missing > 0 || dups > 0 || misordered > 0 || got.size() != n)
            throw new IllegalStateException(String.format("read_committed of %s: %d records, %d missing, %d duplicated, %d out of order per key (want %d exactly once); app log: %s",
                    b, got.size(), missing, dups, misordered, n, tail(new File(workdir, "pipeline-app.log"), 6)));
        return String.format("seed %d: %d records copied A -> B with the offsets in each transaction; kill -9 %d and %d ms after an "
                + "instance's first commit (B held %d and %d records), restarted each time; read_committed of B: every record exactly once, "
                + "in order per key; read_uncommitted %d (%d aborted)",
                seed, n, kills[0], kills[1], atKill[0], atKill[1], uncommitted, uncommitted - n);
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "streams-app" -> { streamsApp(args[1], args[2], args[3], args[4]); return; }
            case "pipeline-app" -> { pipelineApp(args[1], args[2], args[3], args[4], args[5]); return; }
            default -> { }
        }
        String name = args[0].equals("streams") ? "streams-eos" : "java-pipeline-eos";
        EosTest t = new EosTest(args[1], Long.parseLong(args[2]), args[3]);
        int rc = 0;
        try {
            String d = args[0].equals("streams") ? t.streams() : t.pipeline();
            System.out.println(name + ": ok: " + d);
            System.out.println(name + ": 1 passed, 0 failed");
        } catch (Exception e) {
            e.printStackTrace(System.out);
            System.out.println(name + ": FAIL: " + e.getMessage());
            System.out.println(name + ": 0 passed, 1 failed");
            rc = 1;
        }
        t.admin.close(Duration.ofSeconds(5));
        System.exit(rc);
    }
}
