/*
 * Scenario: the client-matrix scenario (compat-tests/clients/README.md) with Apache Kafka's Java client.
 * Usage: Scenario BOOTSTRAP quick|full RESULT_JSON (env CODEC, default lz4).
 * Each step is a method that returns a detail line or throws with the message a user would see; the result
 * file is rewritten after every step. Group members run in their own threads (a KafkaConsumer is used by
 * one thread only) and take commit/stop requests through flags. Records: keys k0..k49 round robin, values
 * "v-<key>-<seq>-" padded to 100 bytes, headers h-seq=<seq>, h-src=java.
 * Read next: ../../../../../../../lib/scenario.py (the same steps for the Python clients).
 */
package dev.gregor.clients;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Scenario {
    static final int KEYS = 50;
    static final String CLIENT = System.getenv().getOrDefault("CLIENT_NAME", "java");

    static final class Failed extends Exception {
        Failed(String m) { super(m); }
    }

    /** One consumed record: partition, offset, key, value, headers. */
    record Rec(int p, long off, byte[] k, byte[] v, List<Header> h) {}

    final String bootstrap, mode, out, codec;
    final int n, m;
    /** Partitions of the topic and members of the group in step 3: MATRIX_PARTITIONS / MATRIX_MEMBERS (make
     * test-cluster: 12 and 3, a topic led by three brokers and a group spanning them); 6 and 2 otherwise. */
    final int parts, nMembers;
    final String topic, bigTopic, group;
    final List<Map<String, Object>> steps = new ArrayList<>();
    final Set<String> done = new HashSet<>();
    final Map<String, Object> result = new LinkedHashMap<>();
    final Map<String, Rec> seen = new ConcurrentHashMap<>();   // "p:off" -> record
    final Map<String, Integer> byMember = new ConcurrentHashMap<>();
    volatile int dups = 0;
    final Map<String, Member> members = new LinkedHashMap<>();
    Map<Integer, Long> end3 = new HashMap<>();
    long tsMid;
    boolean idempotentOk = true;
    Admin admin;

    Scenario(String bootstrap, String mode, String out) {
        this.bootstrap = bootstrap;
        this.mode = mode;
        this.out = out;
        this.codec = System.getenv().getOrDefault("CODEC", "lz4");
        this.n = mode.equals("full") ? 10000 : 300;
        this.m = mode.equals("full") ? 1000 : 100;
        this.parts = envInt("MATRIX_PARTITIONS", 6, 1, 1000);
        this.nMembers = envInt("MATRIX_MEMBERS", 2, 2, 16);
        String sfx = UUID.randomUUID().toString().substring(0, 6);
        topic = CLIENT + "-main-" + sfx;
        bigTopic = CLIENT + "-big-" + sfx;
        group = CLIENT + "-group-" + sfx;
        result.put("client", CLIENT);
        result.put("version", clientVersion());
        result.put("language", "Java " + System.getProperty("java.version"));
        result.put("install_error", null);
        result.put("steps", steps);
    }

    /** A whole number from the environment variable name, def when unset or not a number, bounded to lo..hi. */
    static int envInt(String name, int def, int lo, int hi) {
        try {
            return Math.max(lo, Math.min(hi, Integer.parseInt(System.getenv().getOrDefault(name, ""))));
        } catch (NumberFormatException e) {
            return def;
        }
    }

    /** kafka-clients' version from the kafka/kafka-version.properties resource in its jar (AppInfoParser moved
     * between 4.x releases). */
    static String clientVersion() {
        try (var in = Admin.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "?");
        } catch (Exception e) {
            return "?";
        }
    }

    // ---- records --------------------------------------------------------------------------------------
    static String keyOf(long seq) { return "k" + (seq % KEYS); }

    static byte[] valueOf(String key, long seq) {
        StringBuilder sb = new StringBuilder("v-" + key + "-" + seq + "-");
        while (sb.length() < 100) sb.append('x');
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    Properties producerProps(String codec, boolean idempotent) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 20);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, 32768);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotent);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    String produce(String t, long from, long to, String codec, boolean idempotent) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(codec, idempotent))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (long s = from; s < to; s++) {
                String k = keyOf(s);
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(t, k.getBytes(StandardCharsets.UTF_8), valueOf(k, s));
                r.headers().add("h-seq", Long.toString(s).getBytes(StandardCharsets.UTF_8));
                r.headers().add("h-src", CLIENT.getBytes(StandardCharsets.UTF_8));
                fs.add(p.send(r));
            }
            p.flush();
            for (Future<RecordMetadata> f : fs) {
                try {
                    f.get(30, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    throw (e.getCause() instanceof Exception) ? (Exception) e.getCause() : e;
                }
            }
        }
        return idempotent ? "enable.idempotence=true" : "enable.idempotence=false";
    }

    Properties consumerProps(String group, String reset) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10000);
        c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 200);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return c;
    }

    volatile long lastDeliveryMs = 0;

    /** Waits until no member has been handed a record for 1.5 s: after the first rebalance a member re-reads,
     * from the last commit, partitions another member read before; committing before it has caught up would
     * make step 4 see those records again. */
    void waitQuiet() throws InterruptedException {
        long deadline = System.currentTimeMillis() + 20000;
        while (System.currentTimeMillis() < deadline && System.currentTimeMillis() - lastDeliveryMs < 1500) Thread.sleep(100);
    }

    synchronized void sink(String member, List<Rec> recs) {
        lastDeliveryMs = System.currentTimeMillis();
        for (Rec r : recs) {
            String k = r.p + ":" + r.off;
            if (seen.putIfAbsent(k, r) != null) dups++;
            byMember.merge(member, 1, Integer::sum);
        }
    }

    /** Checks count, content, headers and per-key order of the unique records against seq [from, to). */
    int checkRecords(Collection<Rec> recs, long from, long to) throws Failed {
        Map<Long, Rec> got = new TreeMap<>();
        for (Rec r : recs) {
            Map<String, byte[]> h = new HashMap<>();
            for (Header x : r.h) h.put(x.key(), x.value());
            if (h.get("h-src") == null || !new String(h.get("h-src"), StandardCharsets.UTF_8).equals(CLIENT))
                throw new Failed("p" + r.p + "@" + r.off + ": header h-src missing or wrong");
            long seq;
            try {
                seq = Long.parseLong(new String(h.get("h-seq"), StandardCharsets.UTF_8));
            } catch (Exception e) {
                throw new Failed("p" + r.p + "@" + r.off + ": header h-seq missing or bad");
            }
            String k = keyOf(seq);
            if (!Arrays.equals(r.k, k.getBytes(StandardCharsets.UTF_8)) || !Arrays.equals(r.v, valueOf(k, seq)))
                throw new Failed("p" + r.p + "@" + r.off + ": seq " + seq + ": key/value differ from what was produced");
            if (got.put(seq, r) != null) throw new Failed("seq " + seq + " stored twice");
        }
        int missing = 0;
        long firstMissing = -1;
        for (long s = from; s < to; s++)
            if (!got.containsKey(s)) { missing++; if (firstMissing < 0) firstMissing = s; }
        long extra = got.keySet().stream().filter(s -> s < from || s >= to).count();
        if (missing > 0 || extra > 0)
            throw new Failed(got.size() + " records, expected " + (to - from) + ": " + missing + " missing (first seq "
                    + firstMissing + "), " + extra + " unexpected");
        Map<Long, Rec> last = new HashMap<>();
        for (Map.Entry<Long, Rec> e : got.entrySet()) {
            long k = e.getKey() % KEYS;
            Rec prev = last.get(k);
            Rec r = e.getValue();
            if (prev != null) {
                if (prev.p != r.p) throw new Failed("key k" + k + " in partitions " + prev.p + " and " + r.p);
                if (r.off <= prev.off) throw new Failed("key k" + k + " out of order: seq " + e.getKey() + " at offset " + r.off + " after " + prev.off);
            }
            last.put(k, r);
        }
        return got.size();
    }

    // ---- group members --------------------------------------------------------------------------------
    final class Member extends Thread {
        final String name;
        final KafkaConsumer<byte[], byte[]> c;
        volatile Set<Integer> assigned = Set.of();
        volatile boolean commitReq, stopReq;
        final CountDownLatch stopped = new CountDownLatch(1);
        volatile CountDownLatch commitDone = new CountDownLatch(1);
        volatile String commitErr, error;

        Member(String name) {
            super("member-" + name);
            setDaemon(true);
            this.name = name;
            c = new KafkaConsumer<>(consumerProps(group, "earliest"));
            c.subscribe(List.of(topic));
        }

        @Override public void run() {
            try {
                while (!stopReq) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                    Set<Integer> a = new HashSet<>();
                    for (TopicPartition tp : c.assignment()) a.add(tp.partition());
                    assigned = a;
                    if (!rs.isEmpty()) {
                        List<Rec> l = new ArrayList<>();
                        for (ConsumerRecord<byte[], byte[]> r : rs)
                            l.add(new Rec(r.partition(), r.offset(), r.key(), r.value(), Arrays.asList(r.headers().toArray())));
                        sink(name, l);
                    }
                    if (commitReq) {
                        try {
                            c.commitSync(Duration.ofSeconds(15));
                        } catch (Exception e) {
                            commitErr = e.getClass().getSimpleName() + ": " + e.getMessage();
                        }
                        commitReq = false;
                        commitDone.countDown();
                    }
                }
            } catch (Exception e) {
                error = e.getClass().getSimpleName() + ": " + e.getMessage();
            } finally {
                try { c.close(Duration.ofSeconds(10)); } catch (Exception ignored) { }
                stopped.countDown();
            }
        }

        void commit() throws Exception {
            commitDone = new CountDownLatch(1);
            commitErr = null;
            commitReq = true;
            if (!commitDone.await(20, TimeUnit.SECONDS)) throw new Failed("member " + name + ": commit did not finish in 20 s");
            if (commitErr != null) throw new Failed("member " + name + ": commit: " + commitErr);
        }

        void halt() throws InterruptedException {
            stopReq = true;
            stopped.await(20, TimeUnit.SECONDS);
        }
    }

    // ---- steps ----------------------------------------------------------------------------------------
    String s1() throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, parts, (short) 1),
                new NewTopic(bigTopic, 1, (short) 1).configs(Map.of("max.message.bytes", "65536")))).all().get(20, TimeUnit.SECONDS);
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS).get(topic);
        if (d.partitions().size() != parts) throw new Failed("topic has " + d.partitions().size() + " partitions, expected " + parts);
        return topic + ": " + parts + " partitions via Admin.createTopics (describeTopics agrees); " + bigTopic + " with max.message.bytes=65536";
    }

    long logEndSum(String t, int parts) throws Exception {
        Map<TopicPartition, OffsetSpec> q = new HashMap<>();
        for (int p = 0; p < parts; p++) q.put(new TopicPartition(t, p), OffsetSpec.latest());
        long s = 0;
        for (ListOffsetsResult.ListOffsetsResultInfo i : admin.listOffsets(q).all().get(20, TimeUnit.SECONDS).values()) s += i.offset();
        return s;
    }

    String s2() throws Exception {
        long t0 = System.nanoTime();
        String note;
        try {
            note = produce(topic, 0, n, codec, true);
        } catch (Exception e) {
            String err = e.getClass().getSimpleName() + ": " + e.getMessage();
            if (logEndSum(topic, parts) != 0) throw e;
            produce(topic, 0, n, codec, false);
            idempotentOk = false;
            done.add("2");
            throw new Failed("with idempotence: " + err + " (the later steps use the same records produced with enable.idempotence=false)");
        }
        double s = (System.nanoTime() - t0) / 1e9;
        return String.format("%d records, %s, acks=all, %s, %.0f rec/s", n, codec, note, n / s);
    }

    String s3() throws Exception {
        for (int i = 0; i < nMembers; i++) { // a and b (step 4 replaces a with c), then m3, m4, ...
            String name = i == 0 ? "a" : i == 1 ? "b" : "m" + (i + 1);
            members.put(name, new Member(name));
        }
        members.values().forEach(Thread::start);
        long deadline = System.currentTimeMillis() + 60000;
        while (System.currentTimeMillis() < deadline && seen.size() < n) {
            for (Member mb : members.values()) if (mb.error != null) throw new Failed("member " + mb.name + ": " + mb.error);
            Thread.sleep(100);
        }
        deadline = System.currentTimeMillis() + 20000;
        while (System.currentTimeMillis() < deadline) { // stable: every member holds partitions, a split of all
            Set<Integer> u = new HashSet<>();
            int total = 0;
            for (Member mb : members.values()) { u.addAll(mb.assigned); total += mb.assigned.size(); }
            if (members.values().stream().noneMatch(x -> x.assigned.isEmpty()) && u.size() == parts && total == parts) break;
            Thread.sleep(100);
        }
        waitQuiet();
        int got = checkRecords(new ArrayList<>(seen.values()), 0, n);
        Map<String, Set<Integer>> asg = new TreeMap<>();
        Set<Integer> all = new HashSet<>();
        for (Member mb : members.values()) { asg.put(mb.name, new TreeSet<>(mb.assigned)); all.addAll(mb.assigned); }
        if (asg.values().stream().anyMatch(Set::isEmpty)) throw new Failed("a member holds no partition: " + asg);
        if (all.size() != parts || asg.values().stream().mapToInt(Set::size).sum() != parts)
            throw new Failed("assignment does not split the " + parts + " partitions: " + asg);
        for (Member mb : members.values()) mb.commit();
        for (Rec r : seen.values()) end3.merge(r.p, r.off + 1, Math::max);
        return got + " records, " + dups + " redelivered by the first rebalance, assignment " + asg + ", per member " + byMember + "; committed";
    }

    String s4() throws Exception {
        Member a = members.remove("a");
        a.halt();
        if (a.error != null) throw new Failed("member a: " + a.error);
        Member c = new Member("c");
        members.put("c", c);
        c.start();
        long deadline = System.currentTimeMillis() + 30000;
        Map<String, Set<Integer>> asg = new TreeMap<>();
        boolean settled = false;
        while (System.currentTimeMillis() < deadline) {
            asg.clear();
            int total = 0;
            Set<Integer> all = new HashSet<>();
            for (Member mb : members.values()) { asg.put(mb.name, mb.assigned); total += mb.assigned.size(); all.addAll(mb.assigned); }
            if (asg.values().stream().noneMatch(Set::isEmpty) && all.size() == parts && total == parts) { settled = true; break; }
            Thread.sleep(100);
        }
        if (!settled) throw new Failed("group did not settle without a and with c: " + asg);
        int before = seen.size();
        int dupsBefore = dups;
        Thread.sleep(500);
        tsMid = System.currentTimeMillis();
        Thread.sleep(10);
        produce(topic, n, n + m, codec, idempotentOk);
        deadline = System.currentTimeMillis() + 40000;
        while (System.currentTimeMillis() < deadline && seen.size() < before + m) Thread.sleep(100);
        List<Rec> fresh = new ArrayList<>();
        for (Rec r : seen.values()) if (r.off >= end3.getOrDefault(r.p, 0L)) fresh.add(r);
        int got = checkRecords(fresh, n, n + m);
        for (Member mb : members.values()) mb.commit();
        int again = dups - dupsBefore;
        if (again > 0) throw new Failed(again + " records below the committed offsets were delivered again after the restart");
        return "member a left, member c joined; " + got + " new records consumed from the committed offsets, none redelivered; committed";
    }

    String s5() throws Exception {
        ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(group)).all().get(20, TimeUnit.SECONDS).get(group);
        if (!g.groupState().toString().equalsIgnoreCase("stable") || g.members().size() != nMembers)
            throw new Failed("describe group: state " + g.groupState() + ", " + g.members().size() + " members; expected Stable with " + nMembers);
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
        Map<TopicPartition, OffsetSpec> qe = new HashMap<>(), ql = new HashMap<>(), qm = new HashMap<>(), qf = new HashMap<>();
        for (int p = 0; p < parts; p++) {
            TopicPartition tp = new TopicPartition(topic, p);
            qe.put(tp, OffsetSpec.earliest());
            ql.put(tp, OffsetSpec.latest());
            qm.put(tp, OffsetSpec.forTimestamp(tsMid));
            qf.put(tp, OffsetSpec.forTimestamp(System.currentTimeMillis() + 3600000));
        }
        var e = admin.listOffsets(qe).all().get(20, TimeUnit.SECONDS);
        var l = admin.listOffsets(ql).all().get(20, TimeUnit.SECONDS);
        var mid = admin.listOffsets(qm).all().get(20, TimeUnit.SECONDS);
        var fut = admin.listOffsets(qf).all().get(20, TimeUnit.SECONDS);
        long sum = 0;
        for (int p = 0; p < parts; p++) {
            TopicPartition tp = new TopicPartition(topic, p);
            if (e.get(tp).offset() != 0) throw new Failed("earliest offset of partition " + p + ": " + e.get(tp).offset());
            long le = l.get(tp).offset();
            sum += le;
            OffsetAndMetadata c = committed.get(tp);
            if (c == null || c.offset() != le) throw new Failed("partition " + p + ": committed " + c + ", log end " + le + ": lag not 0");
            long e3 = end3.getOrDefault(p, 0L);
            long want = le > e3 ? e3 : -1;
            if (mid.get(tp).offset() != want)
                throw new Failed("listOffsets(forTimestamp phase-4 start) partition " + p + ": " + mid.get(tp).offset() + ", expected " + want);
            if (fut.get(tp).offset() != -1)
                throw new Failed("listOffsets(future timestamp) partition " + p + ": " + fut.get(tp).offset() + ", expected -1");
        }
        if (sum != n + m) throw new Failed("latest offsets sum to " + sum + ", expected " + (n + m));
        return "group " + g.groupState() + " (" + g.members().size() + " members, protocol " + g.partitionAssignor()
                + "), lag 0 on " + parts + " partitions; earliest 0, latest sum " + sum + ", by timestamp ok";
    }

    String s6a() throws Exception {
        String t = CLIENT + "-missing-" + UUID.randomUUID().toString().substring(0, 6);
        Properties p = producerProps("none", false);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 6000);
        String err;
        try (KafkaProducer<byte[], byte[]> pr = new KafkaProducer<>(p)) {
            pr.send(new ProducerRecord<>(t, "x".getBytes())).get(15, TimeUnit.SECONDS);
            throw new Failed("produce to missing topic " + t + " succeeded");
        } catch (ExecutionException e) {
            err = e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
        } catch (org.apache.kafka.common.KafkaException e) {
            err = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        if (admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(t))
            throw new Failed("topic " + t + " was created although auto.create.topics.enable=false");
        return "client error: " + err + "; topic not created";
    }

    String s6b() throws Exception {
        byte[] big = new byte[100000];
        new Random(1).nextBytes(big);
        Properties p = producerProps("none", idempotentOk);
        try (KafkaProducer<byte[], byte[]> pr = new KafkaProducer<>(p)) {
            pr.send(new ProducerRecord<>(bigTopic, "big".getBytes(), big)).get(30, TimeUnit.SECONDS);
            throw new Failed("100 KB record accepted by a topic with max.message.bytes=65536");
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (!(c instanceof org.apache.kafka.common.errors.RecordTooLargeException))
                throw new Failed("wrong error: " + c.getClass().getSimpleName() + ": " + c.getMessage());
            return "client error: " + c.getClass().getSimpleName() + ": " + c.getMessage();
        }
    }

    String fetchAt(String reset) throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(null, reset))) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seek(tp, 1000000);
            long deadline = System.currentTimeMillis() + 15000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(300));
                for (ConsumerRecord<byte[], byte[]> r : rs) return "record " + r.offset();
            }
            return "timeout";
        }
    }

    String s6c() throws Exception {
        try {
            String r = fetchAt("none");
            throw new Failed("expected OffsetOutOfRangeException, got " + r);
        } catch (OffsetOutOfRangeException | NoOffsetForPartitionException e) {
            return "client error: " + e.getClass().getSimpleName() + ": " + e.getMessage();
        }
    }

    String s6d() throws Exception {
        String r = fetchAt("earliest");
        if (!r.equals("record 0")) throw new Failed("expected the record at offset 0, got " + r);
        return "reset to earliest: first record at offset 0";
    }

    String s2codec(String c) throws Exception {
        String t = CLIENT + "-" + c + "-" + UUID.randomUUID().toString().substring(0, 6);
        admin.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all().get(20, TimeUnit.SECONDS);
        String note = produce(t, 0, 1000, c, idempotentOk);
        List<Rec> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> cs = new KafkaConsumer<>(consumerProps(null, "earliest"))) {
            cs.assign(List.of(new TopicPartition(t, 0)));
            long deadline = System.currentTimeMillis() + 30000;
            while (got.size() < 1000 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<byte[], byte[]> r : cs.poll(Duration.ofMillis(300)))
                    got.add(new Rec(r.partition(), r.offset(), r.key(), r.value(), Arrays.asList(r.headers().toArray())));
        }
        checkRecords(got, 0, 1000);
        return "1000 records with " + c + " read back (" + note + ")";
    }


    // ---- step 7: transactions -------------------------------------------------------------------------
    /** Reads every partition of t from offset 0 up to the end the consumer sees at isolation (read_committed:
     * the last stable offset), returns the values in partition/offset order. */
    List<String> readAll(String t, int parts, String isolation) throws Exception {
        Properties cp = consumerProps(null, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        List<String> vals = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < parts; p++) tps.add(new TopicPartition(t, p));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(15));
            if (isolation.equals("read_committed")) {
                // commitTransaction returns once the commit is decided; its markers follow (Kafka's order), so
                // the last stable offset may still be short of them: wait (up to 10 s) until it reaches the
                // high watermark, or a read right after a commit misses that transaction's records
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (TopicPartition tp : tps) latest.put(tp, OffsetSpec.latest());
                long until = System.currentTimeMillis() + 10000;
                while (System.currentTimeMillis() < until) {
                    Map<TopicPartition, Long> hw = new HashMap<>();
                    admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all()
                        .get(15, TimeUnit.SECONDS).forEach((tp, info) -> hw.put(tp, info.offset()));
                    if (hw.equals(end)) break;
                    Thread.sleep(100);
                    end = c.endOffsets(tps, Duration.ofSeconds(15));
                }
            }
            long deadline = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < deadline) {
                boolean atEnd = true;
                for (TopicPartition tp : tps) if (c.position(tp, Duration.ofSeconds(10)) < end.get(tp)) atEnd = false;
                if (atEnd) break;
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300)))
                    vals.add(new String(r.value(), StandardCharsets.UTF_8));
            }
        }
        return vals;
    }

    static List<String> txnValues(String tag, int k) {
        List<String> l = new ArrayList<>();
        for (int i = 0; i < k; i++) l.add("tx-" + tag + "-" + i);
        return l;
    }

    /** Step 7 (README "7 transactions"): a transactional producer commits 20 records, aborts 20, commits 20;
     * a read_committed reader sees exactly the 40 committed ones (a read_uncommitted one all 60); then a
     * consume-transform-produce pass (KIP-447: sendOffsetsToTransaction with the consumer's group metadata)
     * copies them to a second topic, and the group's committed offsets equal the source's end. */
    String s7() throws Exception {
        String sfx = UUID.randomUUID().toString().substring(0, 6);
        String t = CLIENT + "-txn-" + sfx, t2 = CLIENT + "-txnout-" + sfx, g = CLIENT + "-txngroup-" + sfx;
        admin.createTopics(List.of(new NewTopic(t, 3, (short) 1), new NewTopic(t2, 3, (short) 1))).all().get(20, TimeUnit.SECONDS);
        Properties pp = producerProps("lz4", true);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, CLIENT + "-tx-" + sfx);
        List<String> want = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            p.initTransactions();
            for (String tag : List.of("c1", "a", "c2")) {
                p.beginTransaction();
                int i = 0;
                for (String v : txnValues(tag, 20))
                    p.send(new ProducerRecord<>(t, ("k" + (i++ % 10)).getBytes(StandardCharsets.UTF_8), v.getBytes(StandardCharsets.UTF_8)));
                p.flush();
                if (tag.equals("a")) p.abortTransaction();
                else { p.commitTransaction(); want.addAll(txnValues(tag, 20)); }
            }
        }
        List<String> rc = readAll(t, 3, "read_committed"), ru = readAll(t, 3, "read_uncommitted");
        if (rc.size() != want.size() || !new HashSet<>(rc).equals(new HashSet<>(want)))
            throw new Failed("read_committed saw " + rc.size() + " records, expected the 40 committed: " + rc);
        if (ru.size() != 60) throw new Failed("read_uncommitted saw " + ru.size() + " records, expected 60 (aborted included)");
        // consume-transform-produce with the offsets in the transaction
        Properties cp = consumerProps(g, "earliest");
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, CLIENT + "-ctp-" + sfx);
        int copied = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp); KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            p.initTransactions();
            c.subscribe(List.of(t));
            long deadline = System.currentTimeMillis() + 30000;
            while (copied < want.size() && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(300));
                if (rs.isEmpty()) continue;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    p.send(new ProducerRecord<>(t2, r.key(), ("out-" + new String(r.value(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8)));
                    offs.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                p.sendOffsetsToTransaction(offs, c.groupMetadata());
                p.commitTransaction();
            }
        }
        List<String> out2 = readAll(t2, 3, "read_committed");
        Set<String> want2 = new HashSet<>();
        for (String v : want) want2.add("out-" + v);
        if (out2.size() != want.size() || !new HashSet<>(out2).equals(want2))
            throw new Failed("consume-transform-produce: read_committed saw " + out2.size() + " records in " + t2 + ", expected 40");
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
        Map<TopicPartition, OffsetSpec> ql = new HashMap<>();
        for (int p = 0; p < 3; p++) ql.put(new TopicPartition(t, p), OffsetSpec.latest());
        var l = admin.listOffsets(ql, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get(20, TimeUnit.SECONDS);
        for (TopicPartition tp : ql.keySet()) {
            OffsetAndMetadata c = committed.get(tp);
            if (c == null && l.get(tp).offset() == 0) continue; // no key of the 10 went to this partition
            // the last committed record of a partition is followed by its commit marker: the group's offset is
            // the record after it (r.offset + 1), the marker's own offset; the partition's end is one past it
            if (c == null || c.offset() != l.get(tp).offset() - 1)
                throw new Failed("group " + g + " committed " + c + " for " + tp + ", expected " + (l.get(tp).offset() - 1) + " (the end less its commit marker)");
        }
        return "committed 20, aborted 20, committed 20 (transactional.id, initTransactions); read_committed saw exactly the 40 committed, "
                + "read_uncommitted 60; consume-transform-produce (sendOffsetsToTransaction, group metadata) copied " + copied
                + " to " + t2 + ", read_committed there 40, group offsets at the end";
    }

    // ---- driver ---------------------------------------------------------------------------------------
    interface Step { String run() throws Exception; }

    void step(String id, String name, Step fn, String... needs) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("id", id);
        e.put("name", name);
        for (String d : needs) {
            if (!done.contains(d)) {
                e.put("ok", false);
                e.put("error", "skipped: step " + d + " failed");
                e.put("detail", null);
                steps.add(e);
                save();
                System.out.println("step " + id + " " + name + ": skipped");
                return;
            }
        }
        long t0 = System.nanoTime();
        try {
            String d = fn.run();
            e.put("ok", true);
            e.put("error", null);
            e.put("detail", d);
            done.add(id);
        } catch (Throwable x) {
            Throwable c = (x instanceof ExecutionException && x.getCause() != null) ? x.getCause() : x;
            e.put("ok", false);
            e.put("error", (c instanceof Failed ? "" : c.getClass().getSimpleName() + ": ") + c.getMessage());
            e.put("detail", null);
            x.printStackTrace(System.out);
        }
        e.put("detail", String.format("%s (%.1fs)", e.get("detail") == null ? "" : e.get("detail"), (System.nanoTime() - t0) / 1e9).trim());
        steps.add(e);
        save();
        System.out.println("step " + id + " " + name + ": " + (Boolean.TRUE.equals(e.get("ok")) ? "ok " + e.get("detail") : "FAIL " + e.get("error")));
    }

    static String json(Object o) {
        if (o == null) return "null";
        if (o instanceof Boolean || o instanceof Number) return o.toString();
        if (o instanceof Map<?, ?> mp) {
            StringJoiner j = new StringJoiner(", ", "{", "}");
            for (Map.Entry<?, ?> e : mp.entrySet()) j.add(json(e.getKey().toString()) + ": " + json(e.getValue()));
            return j.toString();
        }
        if (o instanceof List<?> l) {
            StringJoiner j = new StringJoiner(",\n  ", "[\n  ", "]");
            for (Object x : l) j.add(json(x));
            return l.isEmpty() ? "[]" : j.toString();
        }
        String s = o.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> { if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch)); else b.append(ch); }
            }
        }
        return b.append('"').toString();
    }

    synchronized void save() {
        try {
            Path tmp = Path.of(out + ".tmp");
            Files.writeString(tmp, json(result) + "\n");
            Files.move(tmp, Path.of(out), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    void run() throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 20000);
        admin = Admin.create(ap);
        save();
        step("1", "create-topic", this::s1);
        step("2", "produce", this::s2, "1");
        step("3", "group-consume", this::s3, "2");
        step("4", "restart-resume", this::s4, "3");
        step("5", "describe-lag-list-offsets", this::s5, "4");
        for (Member mb : members.values()) mb.halt();
        step("6a", "produce-missing-topic-noautocreate", this::s6a);
        step("6b", "record-too-large", this::s6b, "1");
        step("6c", "out-of-range-none", this::s6c, "2");
        step("6d", "out-of-range-earliest", this::s6d, "2");
        if (mode.equals("full"))
            for (String c : List.of("none", "gzip", "snappy", "lz4", "zstd"))
                step("2-" + c, "produce-" + c, () -> s2codec(c));
        if (System.getenv().getOrDefault("TXN", "0").equals("1")) step("7", "transactions", this::s7);
        admin.close(Duration.ofSeconds(5));
    }

    public static void main(String[] args) throws Exception {
        new Scenario(args[0], args[1], args[2]).run();
        System.exit(0);
    }
}
