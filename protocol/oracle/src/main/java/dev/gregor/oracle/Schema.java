/*
 * Schema: an in-memory model of Kafka's message definition files
 * (common/message/<Name>.json, shipped as resources inside kafka-clients).
 *
 * Only what the oracle needs is modelled: per field its name, type, the
 * version ranges in which it exists / is nullable / is tagged, its default,
 * and for struct-typed fields (inline, or named in "commonStructs") the
 * nested field list. Versions are absolute message versions, as in the files.
 *
 * Invariants: every struct-typed FieldSpec has a non-null `struct`; every
 * StructSpec's `byNorm` maps the normalized field name (lowercase, no
 * underscores) to its field, so both Kafka's camelCase JSON keys and Gregor's
 * snake_case keys look fields up the same way.
 *
 * Read next: RandomMessages.java (uses this to build valid random messages),
 * JsonCompare.java (uses this for type-directed comparison), Oracle.java.
 */
package dev.gregor.oracle;

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.json.JsonMapper;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

final class Schema {
    private Schema() {
    }

    static final Set<String> PRIMITIVES = Set.of(
        "bool", "int8", "int16", "uint16", "int32", "uint32", "int64",
        "float64", "string", "bytes", "records", "uuid");

    /** A version range; lo > hi means "none". */
    static final class Versions {
        final int lo;
        final int hi;

        Versions(int lo, int hi) {
            this.lo = lo;
            this.hi = hi;
        }

        static final Versions NONE = new Versions(1, 0);

        static Versions parse(String s) {
            if (s == null) {
                return NONE;
            }
            s = s.trim();
            if (s.isEmpty() || s.equals("none")) {
                return NONE;
            }
            if (s.endsWith("+")) {
                return new Versions(Integer.parseInt(s.substring(0, s.length() - 1).trim()), Short.MAX_VALUE);
            }
            int dash = s.indexOf('-');
            if (dash > 0) {
                return new Versions(Integer.parseInt(s.substring(0, dash).trim()),
                    Integer.parseInt(s.substring(dash + 1).trim()));
            }
            int v = Integer.parseInt(s);
            return new Versions(v, v);
        }

        boolean contains(int v) {
            return v >= lo && v <= hi;
        }

        boolean isEmpty() {
            return lo > hi;
        }

        @Override
        public String toString() {
            return isEmpty() ? "none" : (hi == Short.MAX_VALUE ? lo + "+" : lo + "-" + hi);
        }
    }

    static final class FieldSpec {
        String name;       // as in the file, e.g. "TopicId"
        String camel;      // Kafka's JSON key, e.g. "topicId"
        String norm;       // normalized key, e.g. "topicid"
        boolean isArray;
        String type;       // element type for arrays, the type otherwise ("int32", "FetchTopic")
        Versions versions;
        Versions nullable;
        Versions tagged;
        int tag = -1;
        String dflt;       // raw "default" string or null
        StructSpec struct; // when type is a struct

        boolean isStruct() {
            return struct != null;
        }

        @Override
        public String toString() {
            return name + ":" + (isArray ? "[]" : "") + type;
        }
    }

    static final class StructSpec {
        final String name;
        final List<FieldSpec> fields = new ArrayList<>();
        final Map<String, FieldSpec> byNorm = new HashMap<>();

        StructSpec(String name) {
            this.name = name;
        }
    }

    static final class MessageSpec {
        String name;       // "FetchRequest"
        int apiKey;        // -1 for headers
        String kind;       // "request", "response", "request_header", "response_header"
        Versions valid;
        StructSpec root;
    }

    static String normalize(String key) {
        return key.replace("_", "").toLowerCase(Locale.ROOT);
    }

    private static final JsonMapper COMMENT_MAPPER = JsonMapper.builder()
        .enable(JsonReadFeature.ALLOW_JAVA_COMMENTS)
        .enable(JsonReadFeature.ALLOW_TRAILING_COMMA)
        .build();

    /** Loads common/message/<name>.json from the classpath (the kafka-clients jar). */
    static MessageSpec load(String name, int apiKey, String kind) throws IOException {
        String res = "common/message/" + name + ".json";
        JsonNode root;
        try (InputStream in = Schema.class.getClassLoader().getResourceAsStream(res)) {
            if (in == null) {
                throw new IOException("resource not found on classpath: " + res);
            }
            root = COMMENT_MAPPER.readTree(in);
        }
        // Every named struct: commonStructs plus all inline definitions.
        Map<String, JsonNode> structNodes = new LinkedHashMap<>();
        JsonNode common = root.get("commonStructs");
        if (common != null) {
            for (JsonNode s : common) {
                structNodes.put(s.get("name").asText(), s.get("fields"));
            }
        }
        collectInline(root.get("fields"), structNodes);

        MessageSpec m = new MessageSpec();
        m.name = name;
        m.apiKey = apiKey;
        m.kind = kind;
        m.valid = Versions.parse(root.get("validVersions").asText());
        Map<String, StructSpec> built = new HashMap<>();
        m.root = buildStruct(name, root.get("fields"), structNodes, built);
        return m;
    }

    private static void collectInline(JsonNode fields, Map<String, JsonNode> out) {
        if (fields == null) {
            return;
        }
        for (JsonNode f : fields) {
            JsonNode sub = f.get("fields");
            if (sub != null) {
                String t = f.get("type").asText();
                if (t.startsWith("[]")) {
                    t = t.substring(2);
                }
                out.put(t, sub);
                collectInline(sub, out);
            }
        }
    }

    private static StructSpec buildStruct(String name, JsonNode fields, Map<String, JsonNode> structNodes,
                                          Map<String, StructSpec> built) {
        StructSpec existing = built.get(name);
        if (existing != null) {
            return existing;
        }
        StructSpec s = new StructSpec(name);
        built.put(name, s);
        for (JsonNode fn : fields) {
            FieldSpec f = new FieldSpec();
            f.name = fn.get("name").asText();
            f.camel = Character.toLowerCase(f.name.charAt(0)) + f.name.substring(1);
            f.norm = normalize(f.name);
            String t = fn.get("type").asText();
            f.isArray = t.startsWith("[]");
            f.type = f.isArray ? t.substring(2) : t;
            f.versions = Versions.parse(text(fn, "versions"));
            f.nullable = Versions.parse(text(fn, "nullableVersions"));
            f.tagged = Versions.parse(text(fn, "taggedVersions"));
            if (fn.has("tag")) {
                f.tag = fn.get("tag").asInt();
            }
            f.dflt = text(fn, "default");
            if (!PRIMITIVES.contains(f.type)) {
                JsonNode sub = structNodes.get(f.type);
                if (sub == null) {
                    throw new IllegalStateException(name + "." + f.name + ": unknown struct type " + f.type);
                }
                f.struct = buildStruct(f.type, sub, structNodes, built);
            }
            s.fields.add(f);
            s.byNorm.put(f.norm, f);
        }
        return s;
    }

    private static String text(JsonNode n, String key) {
        JsonNode v = n.get(key);
        return v == null || v.isNull() ? null : v.asText();
    }
}
