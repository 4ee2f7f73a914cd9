// GoldenFlow.java BOOTSTRAP NAME: the Java client (kafka-clients) flow used to capture golden frames.
// Same shape as kafka_python_flow.py: Admin.createTopics golden-NAME (2 partitions), two records to
// partition 0 per compression type (none, gzip, snappy, lz4, zstd; one producer and flush each), consume
// in group golden-NAME-group (classic protocol) with commitSync, then Admin.listOffsets. client.id is
// golden-NAME. Compiled and run by capture.sh against the kafka-clients jar in ~/.m2.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class GoldenFlow {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], name = args[1], topic = "golden-" + name, cid = "golden-" + name;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("client.id", cid);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        }
        Thread.sleep(1000);
        int sent = 0;
        for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("client.id", cid);
            pp.put("compression.type", codec);
            pp.put("acks", "all");
            pp.put("linger.ms", "50");
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 2; i++) {
                    ProducerRecord<String, String> r = new ProducerRecord<>(topic, 0, "k" + i, codec + " value " + i + " gregor golden frame".repeat(8));
                    if (i == 1) r.headers().add("h", "x".getBytes());
                    p.send(r);
                }
                p.flush();
            }
            sent += 2;
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("client.id", cid);
        cp.put("group.id", cid + "-group");
        cp.put("auto.offset.reset", "earliest");
        cp.put("enable.auto.commit", "false");
        cp.put("fetch.max.wait.ms", "200");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        int got = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            while (got < sent && System.currentTimeMillis() < deadline) got += c.poll(Duration.ofMillis(500)).count();
            c.commitSync();
            System.out.println(name + ": consumed " + got + " of " + sent + "; committed "
                               + c.committed(Set.of(new TopicPartition(topic, 0))));
        }
        try (Admin admin = Admin.create(ap)) {
            System.out.println("latest " + admin.listOffsets(Map.of(new TopicPartition(topic, 0), OffsetSpec.latest()))
                                               .all().get());
        }
    }
}
