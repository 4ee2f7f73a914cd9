/*
 * Oracle: Kafka's own message classes (kafka-clients 4.4.0) as the reference
 * for Gregor's C codec. Two modes:
 *
 *   gen OUTFILE [SEED] [PER_VERSION]   write random test vectors
 *   check INFILE                       verify vectors written by the C codec
 *
 * Vector file: UTF-8 text, one vector per line, five TAB-separated fields,
 * no header:
 *
 *   FIELD      MEANING
 *   api_key    Kafka api key (decimal); -1 for the header messages
 *   kind       request | response | request_header | response_header
 *   version    message version used for the bytes (decimal)
 *   hex        lowercase hex of the serialized message body (no size prefix,
 *              no request/response header)
 *   json       one-line JSON as <Message>DataJsonConverter.write(msg, version)
 *
 * gen is deterministic for a given SEED: each (message, version) gets its own
 * java.util.Random seeded from SEED, api key, kind and version, so a skipped
 * message does not shift the others. check decodes each hex with Kafka,
 * requires no leftover bytes, compares Kafka's JSON with the line's JSON
 * semantically (JsonCompare), re-encodes and compares bytes, prints one FAIL
 * line per failing vector and finally "N passed, N failed"; exit status 1 if
 * anything failed (2 on usage or I/O errors).
 *
 * Read next: Schema.java, RandomMessages.java, JsonCompare.java, README.md.
 */
package dev.gregor.oracle;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

public final class Oracle {
    /** Api key and Kafka message name stem for every API in Gregor's codec (served or codec only). */
    private static final Object[][] APIS = {
        {0, "Produce"}, {1, "Fetch"}, {2, "ListOffsets"}, {3, "Metadata"}, {8, "OffsetCommit"},
        {9, "OffsetFetch"}, {10, "FindCoordinator"}, {11, "JoinGroup"}, {12, "Heartbeat"},
        {13, "LeaveGroup"}, {14, "SyncGroup"}, {15, "DescribeGroups"}, {16, "ListGroups"}, {17, "SaslHandshake"},
        {18, "ApiVersions"}, {19, "CreateTopics"}, {20, "DeleteTopics"}, {21, "DeleteRecords"},
        {22, "InitProducerId"}, {23, "OffsetForLeaderEpoch"}, {24, "AddPartitionsToTxn"},
        {25, "AddOffsetsToTxn"}, {26, "EndTxn"}, {27, "WriteTxnMarkers"}, {28, "TxnOffsetCommit"},
        {29, "DescribeAcls"}, {30, "CreateAcls"}, {31, "DeleteAcls"},
        {32, "DescribeConfigs"},
        {33, "AlterConfigs"}, {34, "AlterReplicaLogDirs"}, {35, "DescribeLogDirs"}, {36, "SaslAuthenticate"}, {37, "CreatePartitions"}, {42, "DeleteGroups"}, {43, "ElectLeaders"},
        {44, "IncrementalAlterConfigs"}, {45, "AlterPartitionReassignments"},
        {46, "ListPartitionReassignments"}, {47, "OffsetDelete"}, {48, "DescribeClientQuotas"},
        {50, "DescribeUserScramCredentials"},
        {51, "AlterUserScramCredentials"}, {57, "UpdateFeatures"}, {60, "DescribeCluster"},
        {61, "DescribeProducers"}, {65, "DescribeTransactions"}, {66, "ListTransactions"},
    };

    /** Header messages: file name, kind, versions used (narrower than validVersions for RequestHeader). */
    private static final Object[][] HEADERS = {
        {"RequestHeader", "request_header", 1, 2},
        {"ResponseHeader", "response_header", 0, 1},
    };

    private static final String PKG = "org.apache.kafka.common.message.";

    /** A message spec bound to its Kafka classes. */
    static final class Bound {
        final Schema.MessageSpec spec;
        final int minVersion;
        final int maxVersion;
        final Constructor<?> ctor;   // new XData(Readable, short)
        final Method read;           // XDataJsonConverter.read(JsonNode, short)
        final Method write;          // XDataJsonConverter.write(XData, short)

        Bound(Schema.MessageSpec spec, int minVersion, int maxVersion) throws ReflectiveOperationException {
            this.spec = spec;
            this.minVersion = minVersion;
            this.maxVersion = maxVersion;
            Class<?> data = Class.forName(PKG + spec.name + "Data");
            Class<?> conv = Class.forName(PKG + spec.name + "DataJsonConverter");
            ctor = data.getConstructor(Readable.class, short.class);
            read = conv.getMethod("read", JsonNode.class, short.class);
            write = conv.getMethod("write", data, short.class);
        }

        String label() {
            return spec.apiKey + " " + spec.kind;
        }
    }

    private static final ObjectMapper OUT = new ObjectMapper();
    private static final JsonMapper IN = JsonMapper.builder()
        .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
        .build();

    private Oracle() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 2 && args[0].equals("gen")) {
            long seed = args.length >= 3 ? Long.parseLong(args[2]) : 1;
            int perVersion = args.length >= 4 ? Integer.parseInt(args[3]) : 20;
            System.exit(gen(Path.of(args[1]), seed, perVersion));
        } else if (args.length == 2 && args[0].equals("check")) {
            System.exit(check(Path.of(args[1])));
        }
        System.err.println("usage: oracle gen OUTFILE [SEED] [PER_VERSION]\n"
            + "       oracle check INFILE");
        System.exit(2);
    }

    /** All messages, in file order: per API its request then its response, then the headers. */
    static List<Bound> messages() throws Exception {
        List<Bound> out = new ArrayList<>();
        for (Object[] api : APIS) {
            int key = (Integer) api[0];
            for (String kind : new String[] {"request", "response"}) {
                String name = api[1] + (kind.equals("request") ? "Request" : "Response");
                Schema.MessageSpec s = Schema.load(name, key, kind);
                out.add(new Bound(s, s.valid.lo, s.valid.hi));
            }
        }
        for (Object[] h : HEADERS) {
            Schema.MessageSpec s = Schema.load((String) h[0], -1, (String) h[1]);
            out.add(new Bound(s, Math.max(s.valid.lo, (Integer) h[2]), Math.min(s.valid.hi, (Integer) h[3])));
        }
        return out;
    }

    static Message fromJson(Bound b, JsonNode node, int v) throws Exception {
        return (Message) unwrap(() -> b.read.invoke(null, node, (short) v));
    }

    static String toJson(Bound b, Message m, int v) throws Exception {
        JsonNode n = (JsonNode) unwrap(() -> b.write.invoke(null, m, (short) v));
        return OUT.writeValueAsString(n);
    }

    static byte[] toBytes(Message m, int v) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = m.size(cache, (short) v);
        ByteBuffer buf = ByteBuffer.allocate(size);
        m.write(new ByteBufferAccessor(buf), cache, (short) v);
        if (buf.position() != size) {
            throw new IllegalStateException("wrote " + buf.position() + " bytes, size() said " + size);
        }
        return buf.array();
    }

    // ---------------------------------------------------------------- gen

    static int gen(Path outFile, long seed, int perVersion) throws Exception {
        List<Bound> msgs = messages();
        Map<String, Integer> perApi = new LinkedHashMap<>();
        List<String> skipped = new ArrayList<>();
        int total = 0;
        if (outFile.getParent() != null) {
            Files.createDirectories(outFile.getParent());
        }
        try (BufferedWriter w = Files.newBufferedWriter(outFile, StandardCharsets.UTF_8)) {
            for (Bound b : msgs) {
                for (int v = b.minVersion; v <= b.maxVersion; v++) {
                    Random r = new Random(seed * 0x9E3779B97F4A7C15L
                        ^ ((long) (b.spec.apiKey + 2) << 40) ^ ((long) b.spec.kind.hashCode() << 16) ^ v);
                    RandomMessages gen = new RandomMessages(r);
                    int ok = 0;
                    String firstError = null;
                    for (int i = 0; i < perVersion; i++) {
                        try {
                            JsonNode node = gen.struct(b.spec.root, v);
                            Message m = fromJson(b, node, v);
                            byte[] bytes = toBytes(m, v);
                            String json = toJson(b, m, v);
                            w.write(b.spec.apiKey + "\t" + b.spec.kind + "\t" + v + "\t" + hex(bytes) + "\t"
                                + json + "\n");
                            ok++;
                        } catch (Exception ex) {
                            if (firstError == null) {
                                firstError = ex.toString();
                            }
                        }
                    }
                    if (firstError != null) {
                        String what = b.spec.name + " v" + v + " (" + (perVersion - ok) + "/" + perVersion
                            + " failed): " + firstError;
                        System.err.println("warning: skipped " + what);
                        skipped.add(what);
                    }
                    perApi.merge(b.spec.apiKey + " " + b.spec.name, ok, Integer::sum);
                    total += ok;
                }
            }
        }
        System.err.println("vectors written per message:");
        for (Map.Entry<String, Integer> e : perApi.entrySet()) {
            System.err.printf("  %-40s %d%n", e.getKey(), e.getValue());
        }
        System.err.println("total " + total + " vectors to " + outFile);
        System.err.println(skipped.isEmpty() ? "skipped: none" : "skipped: " + skipped.size());
        for (String s : skipped) {
            System.err.println("  " + s);
        }
        return 0;
    }

    // ---------------------------------------------------------------- check

    static int check(Path inFile) throws Exception {
        Map<String, Bound> byKey = new HashMap<>();
        for (Bound b : messages()) {
            byKey.put(b.label(), b);
        }
        JsonCompare cmp = new JsonCompare();
        int passed = 0;
        int failed = 0;
        int lineNo = 0;
        try (BufferedReader rd = Files.newBufferedReader(inFile, StandardCharsets.UTF_8)) {
            String line;
            while ((line = rd.readLine()) != null) {
                lineNo++;
                if (line.isEmpty()) {
                    continue;
                }
                String[] p = line.split("\t", -1);
                String where = p.length >= 3 ? p[0] + " " + p[1] + " v" + p[2] : "?";
                String failure;
                try {
                    failure = p.length != 5 ? "expected 5 TAB-separated fields, got " + p.length
                        : checkOne(byKey, cmp, p);
                } catch (Exception ex) {
                    failure = "oracle error: " + ex;
                }
                if (failure == null) {
                    passed++;
                } else {
                    failed++;
                    System.out.println("FAIL line " + lineNo + ": " + where + ": " + failure);
                }
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        return failed == 0 ? 0 : 1;
    }

    /** Checks one vector; null when it passes, else the reason(s). */
    private static String checkOne(Map<String, Bound> byKey, JsonCompare cmp, String[] p) throws Exception {
        Bound b = byKey.get(p[0].trim() + " " + p[1].trim());
        if (b == null) {
            return "unknown api key / kind '" + p[0] + "' '" + p[1] + "'";
        }
        int v;
        try {
            v = Integer.parseInt(p[2].trim());
        } catch (NumberFormatException ex) {
            return "bad version '" + p[2] + "'";
        }
        if (!b.spec.valid.contains(v)) {
            return "version " + v + " not in Kafka's validVersions " + b.spec.valid + " for " + b.spec.name;
        }
        byte[] bytes = unhex(p[3]);
        if (bytes == null) {
            return "hex field is not lowercase hex of even length";
        }
        ByteBuffer buf = ByteBuffer.wrap(bytes);
        Message m;
        try {
            m = (Message) unwrap(() -> b.ctor.newInstance(new ByteBufferAccessor(buf), (short) v));
        } catch (Exception ex) {
            return "kafka cannot decode the bytes (" + bytes.length + " bytes, failed near offset "
                + buf.position() + "): " + ex;
        }
        if (buf.hasRemaining()) {
            return "kafka decoded the message but " + buf.remaining() + " byte(s) are left over at offset "
                + buf.position() + " of " + bytes.length;
        }
        List<String> problems = new ArrayList<>();
        JsonNode act;
        try {
            act = IN.readTree(p[4]);
        } catch (JsonProcessingException ex) {
            act = null;
            problems.add("json does not parse: " + ex.getOriginalMessage());
        }
        if (act != null) {
            JsonNode exp = IN.readTree(toJson(b, m, v));
            String d = cmp.compareStruct(b.spec.root, exp, act, v, "$", m);
            if (d != null) {
                problems.add("json " + d);
            }
        }
        byte[] again = toBytes(m, v);
        if (!java.util.Arrays.equals(again, bytes)) {
            int i = 0;
            while (i < again.length && i < bytes.length && again[i] == bytes[i]) {
                i++;
            }
            problems.add("bytes differ at offset " + i + " (C " + bytes.length + " bytes, kafka re-encode "
                + again.length + " bytes)" + (i < bytes.length && i < again.length
                ? String.format(": C 0x%02x, kafka 0x%02x", bytes[i] & 0xff, again[i] & 0xff) : ""));
        }
        return problems.isEmpty() ? null : String.join("; ", problems);
    }

    // ---------------------------------------------------------------- helpers

    private interface ReflectiveCall {
        Object call() throws ReflectiveOperationException;
    }

    /** Runs a reflective call, rethrowing the target's own exception instead of the wrapper. */
    private static Object unwrap(ReflectiveCall c) throws Exception {
        try {
            return c.call();
        } catch (InvocationTargetException ex) {
            Throwable t = ex.getCause();
            if (t instanceof Exception) {
                throw (Exception) t;
            }
            if (t instanceof Error) {
                throw (Error) t;
            }
            throw ex;
        }
    }

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static String hex(byte[] b) {
        char[] out = new char[b.length * 2];
        for (int i = 0; i < b.length; i++) {
            out[2 * i] = HEX[(b[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[b[i] & 0xf];
        }
        return new String(out);
    }

    /** Lowercase hex to bytes; null if malformed. */
    static byte[] unhex(String s) {
        if (s.length() % 2 != 0) {
            return null;
        }
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            int hi = Character.digit(s.charAt(2 * i), 16);
            int lo = Character.digit(s.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0 || Character.isUpperCase(s.charAt(2 * i)) || Character.isUpperCase(s.charAt(2 * i + 1))) {
                return null;
            }
            out[i] = (byte) ((hi << 4) | lo);
        }
        return out;
    }
}
