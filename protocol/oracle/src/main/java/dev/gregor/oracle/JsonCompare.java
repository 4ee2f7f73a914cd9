/*
 * JsonCompare: schema-directed semantic comparison of Kafka's JSON for a
 * message (expected, from <Message>DataJsonConverter.write) with the JSON
 * Gregor's C dumper wrote for the same bytes (actual).
 *
 * Rules (see README.md for the JSON format itself):
 *  - object keys are matched after normalization (lowercase, underscores
 *    removed), so "topicId" == "topic_id"; a key unknown to the schema fails;
 *  - a key present on one side only passes iff the other side's value equals
 *    the field's default at that version (tagged fields at their default are
 *    omitted by Kafka; C may print them anyway, or omit them the same way);
 *  - integers compare by value whatever the JSON number form; float64 compare
 *    as doubles with NaN == NaN (and "NaN"/"Infinity"/"-Infinity" strings are
 *    accepted for them, as Jackson quotes them);
 *  - bytes and uuid strings, when not identical, compare by decoded bytes,
 *    accepting base64 or base64url, with or without padding;
 *  - records: Kafka always prints "" for non-null records; C may print "" or
 *    the base64 of the actual record bytes (checked against the decoded
 *    message by reflection).
 * compareStruct returns null when equal, else a one-line description with
 * the JSON path of the first difference.
 *
 * Read next: Oracle.java (check mode).
 */
package dev.gregor.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import com.fasterxml.jackson.databind.node.DoubleNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.LongNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import org.apache.kafka.common.record.internal.MemoryRecords; // common.record until 4.1

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class JsonCompare {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    private static final String ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA";

    private final Map<String, Method> accessors = new HashMap<>();

    /**
     * Compares expected (Kafka) and actual (C) objects for struct s at version v.
     * javaObj is the decoded Kafka object for s (used only for records), may be null.
     */
    String compareStruct(Schema.StructSpec s, JsonNode exp, JsonNode act, int v, String path, Object javaObj) {
        if (!exp.isObject() || !act.isObject()) {
            return path + ": expected an object, kafka=" + kind(exp) + " c=" + kind(act);
        }
        Map<String, Map.Entry<String, JsonNode>> e = normalizedFields(exp);
        Map<String, Map.Entry<String, JsonNode>> a = normalizedFields(act);
        if (e == null) {
            return path + ": kafka object has two keys that normalize alike";
        }
        if (a == null) {
            return path + ": C object has two keys that normalize alike (e.g. fooBar and foo_bar)";
        }
        // Walk in schema order so the first reported difference is the first field.
        for (Schema.FieldSpec f : s.fields) {
            Map.Entry<String, JsonNode> ee = e.remove(f.norm);
            Map.Entry<String, JsonNode> ae = a.remove(f.norm);
            String fp = path + "." + f.camel;
            if (ee == null && ae == null) {
                continue;
            }
            if (ee != null && ae != null) {
                String d = compareField(f, ee.getValue(), ae.getValue(), v, fp, child(javaObj, f));
                if (d != null) {
                    return d;
                }
                continue;
            }
            JsonNode present = ee != null ? ee.getValue() : ae.getValue();
            String side = ee != null ? "kafka" : "C";
            String other = ee != null ? "C" : "kafka";
            JsonNode def = defaultValue(f, v);
            String d = compareField(f, def, present, v, fp, null);
            if (d != null) {
                return fp + ": key present on " + side + " side only (" + trunc(present) + "), "
                    + other + " side omits it, and the value is not the default " + trunc(def)
                    + (f.versions.contains(v) ? (f.tagged.contains(v) ? " [tagged field]" : "")
                        : " [field not in version " + v + "]");
            }
        }
        if (!e.isEmpty()) {
            return path + ": kafka key(s) not in schema: " + e.keySet();
        }
        if (!a.isEmpty()) {
            return path + ": C key(s) unknown to the schema of " + s.name + ": "
                + a.values().stream().map(Map.Entry::getKey).toList();
        }
        return null;
    }

    private String compareField(Schema.FieldSpec f, JsonNode exp, JsonNode act, int v, String path, Object javaObj) {
        if (!f.isArray) {
            return compareValue(f, exp, act, v, path, javaObj);
        }
        if (exp.isNull() || act.isNull()) {
            return exp.isNull() && act.isNull() ? null
                : path + ": null mismatch, kafka=" + trunc(exp) + " c=" + trunc(act);
        }
        if (!exp.isArray() || !act.isArray()) {
            return path + ": expected an array, kafka=" + kind(exp) + " c=" + kind(act);
        }
        if (exp.size() != act.size()) {
            return path + ": array length kafka=" + exp.size() + " c=" + act.size();
        }
        // Keyed arrays decode to ImplicitLinkedHashMultiCollection (insertion-ordered, not a List).
        List<?> list = javaObj instanceof List ? (List<?>) javaObj
            : javaObj instanceof Collection ? new ArrayList<>((Collection<?>) javaObj) : null;
        for (int i = 0; i < exp.size(); i++) {
            Object elem = list != null && i < list.size() ? list.get(i) : null;
            String d = compareValue(f, exp.get(i), act.get(i), v, path + "[" + i + "]", elem);
            if (d != null) {
                return d;
            }
        }
        return null;
    }

    /** Compares one non-array value of field f's (element) type. */
    private String compareValue(Schema.FieldSpec f, JsonNode exp, JsonNode act, int v, String path, Object javaObj) {
        if (exp.isNull() || act.isNull()) {
            return exp.isNull() && act.isNull() ? null
                : path + ": null mismatch, kafka=" + trunc(exp) + " c=" + trunc(act);
        }
        if (f.isStruct()) {
            return compareStruct(f.struct, exp, act, v, path, javaObj);
        }
        switch (f.type) {
            case "bool":
                if (!act.isBoolean() || exp.asBoolean() != act.asBoolean()) {
                    return path + ": kafka=" + exp + " c=" + trunc(act);
                }
                return null;
            case "int8":
            case "int16":
            case "uint16":
            case "int32":
            case "uint32":
            case "int64":
                if (!act.isNumber() || !exp.isNumber() || exp.decimalValue().compareTo(act.decimalValue()) != 0) {
                    return path + ": kafka=" + exp + " c=" + trunc(act);
                }
                return null;
            case "float64": {
                Double x = asDouble(exp);
                Double y = asDouble(act);
                if (x == null || y == null || !(x.doubleValue() == y.doubleValue() || (x.isNaN() && y.isNaN()))) {
                    return path + ": kafka=" + exp + " c=" + trunc(act);
                }
                return null;
            }
            case "string":
                if (!act.isTextual() || !exp.asText().equals(act.asText())) {
                    return path + ": kafka=" + exp + " c=" + trunc(act);
                }
                return null;
            case "uuid":
            case "bytes": {
                if (!act.isTextual() || !exp.isTextual()) {
                    return path + ": kafka=" + trunc(exp) + " c=" + trunc(act) + " (expected a string)";
                }
                if (exp.asText().equals(act.asText())) {
                    return null;
                }
                byte[] x = decodeBase64(exp.asText());
                byte[] y = decodeBase64(act.asText());
                if (y == null) {
                    return path + ": C value is not base64/base64url: " + trunc(act);
                }
                if (x == null || !Arrays.equals(x, y)) {
                    return path + ": " + f.type + " differ, kafka=" + trunc(exp) + " c=" + trunc(act);
                }
                return null;
            }
            case "records": {
                if (!act.isTextual() || !exp.isTextual()) {
                    return path + ": kafka=" + trunc(exp) + " c=" + trunc(act) + " (expected a string)";
                }
                if (exp.asText().equals(act.asText())) {
                    return null;
                }
                byte[] y = decodeBase64(act.asText());
                if (y == null) {
                    return path + ": C records value is not base64: " + trunc(act);
                }
                byte[] x = recordBytes(javaObj);
                if (x == null) {
                    return path + ": kafka prints records as " + exp + " and the decoded record bytes are "
                        + "not available to compare with C's " + trunc(act);
                }
                if (!Arrays.equals(x, y)) {
                    return path + ": record bytes differ (kafka decoded " + x.length + " bytes, C json has "
                        + y.length + ")";
                }
                return null;
            }
            default:
                return path + ": unhandled schema type " + f.type;
        }
    }

    /** The JSON Kafka would print for field f holding its default value at version v. */
    static JsonNode defaultValue(Schema.FieldSpec f, int v) {
        String d = f.dflt;
        if (f.isArray) {
            return "null".equals(d) ? NullNode.instance : F.arrayNode();
        }
        if (f.isStruct()) {
            return "null".equals(d) ? NullNode.instance : defaultStruct(f.struct, v);
        }
        switch (f.type) {
            case "bool":
                return BooleanNode.valueOf(d != null && d.trim().equalsIgnoreCase("true"));
            case "int8":
            case "int16":
            case "uint16":
            case "int32":
            case "uint32":
            case "int64":
                return new LongNode(parseIntDefault(d));
            case "float64":
                return new DoubleNode(d == null || d.isBlank() ? 0.0 : Double.parseDouble(d.trim()));
            case "string":
                return "null".equals(d) ? NullNode.instance : new TextNode(d == null ? "" : d);
            case "bytes":
                return "null".equals(d) ? NullNode.instance : new TextNode("");
            case "records":
                return NullNode.instance;
            case "uuid":
                return new TextNode(d == null || d.isBlank() ? ZERO_UUID : d.trim());
            default:
                throw new IllegalStateException("unhandled type " + f.type);
        }
    }

    static ObjectNode defaultStruct(Schema.StructSpec s, int v) {
        ObjectNode o = F.objectNode();
        for (Schema.FieldSpec f : s.fields) {
            if (f.versions.contains(v) && !f.tagged.contains(v)) {
                o.set(f.camel, defaultValue(f, v));
            }
        }
        return o;
    }

    private static long parseIntDefault(String d) {
        if (d == null || d.isBlank()) {
            return 0;
        }
        String s = d.trim();
        boolean neg = s.startsWith("-");
        if (neg) {
            s = s.substring(1);
        }
        long x = s.startsWith("0x") || s.startsWith("0X") ? Long.parseUnsignedLong(s.substring(2), 16)
            : Long.parseLong(s);
        return neg ? -x : x;
    }

    private static Double asDouble(JsonNode n) {
        if (n.isNumber()) {
            return n.doubleValue();
        }
        if (n.isTextual()) {
            switch (n.asText()) {
                case "NaN":
                    return Double.NaN;
                case "Infinity":
                case "+Infinity":
                    return Double.POSITIVE_INFINITY;
                case "-Infinity":
                    return Double.NEGATIVE_INFINITY;
                default:
                    return null;
            }
        }
        return null;
    }

    /** Decodes base64 or base64url, padded or not; null if it is neither. */
    static byte[] decodeBase64(String s) {
        String t = s.replace('-', '+').replace('_', '/');
        int eq = t.indexOf('=');
        if (eq >= 0) {
            for (int i = eq; i < t.length(); i++) {
                if (t.charAt(i) != '=') {
                    return null;
                }
            }
            t = t.substring(0, eq);
        }
        if (t.length() % 4 == 1) {
            return null;
        }
        while (t.length() % 4 != 0) {
            t = t + "=";
        }
        try {
            return Base64.getDecoder().decode(t);
        } catch (IllegalArgumentException ex) {
            return null;
        }
    }

    private static byte[] recordBytes(Object o) {
        if (o instanceof MemoryRecords) {
            ByteBuffer b = ((MemoryRecords) o).buffer().duplicate();
            byte[] out = new byte[b.remaining()];
            b.get(out);
            return out;
        }
        return null; // other BaseRecords kinds never come out of the wire decoder
    }

    /** The Java value of field f inside decoded Kafka object parent (via its generated accessor), or null. */
    private Object child(Object parent, Schema.FieldSpec f) {
        if (parent == null || !(f.isStruct() || f.type.equals("records"))) {
            return null;
        }
        String key = parent.getClass().getName() + "#" + f.camel;
        Method m = accessors.get(key);
        if (m == null && !accessors.containsKey(key)) {
            try {
                m = parent.getClass().getMethod(f.camel);
            } catch (NoSuchMethodException ex) {
                m = null;
            }
            accessors.put(key, m);
        }
        if (m == null) {
            return null;
        }
        try {
            return m.invoke(parent);
        } catch (ReflectiveOperationException ex) {
            return null;
        }
    }

    private static Map<String, Map.Entry<String, JsonNode>> normalizedFields(JsonNode o) {
        Map<String, Map.Entry<String, JsonNode>> out = new LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = o.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (out.put(Schema.normalize(e.getKey()), e) != null) {
                return null;
            }
        }
        return out;
    }

    private static String kind(JsonNode n) {
        return n.getNodeType().toString().toLowerCase();
    }

    static String trunc(JsonNode n) {
        String s = n.toString();
        return s.length() > 80 ? s.substring(0, 77) + "..." : s;
    }
}
