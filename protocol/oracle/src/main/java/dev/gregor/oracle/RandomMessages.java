/*
 * RandomMessages: builds a random JSON tree that Kafka's
 * <Message>DataJsonConverter.read(node, version) accepts, following the
 * schema (Schema.java) for exactly one message version.
 *
 * Invariants: only fields present at the version are emitted (every present
 * non-tagged field is always emitted, since the converter requires it); a
 * tagged field is omitted ~40% of the time (so it keeps its default and is
 * absent on the wire); null is produced only where the field is nullable at
 * that version; array elements are never null. Values come in the JSON node
 * types Kafka's own writer uses (ShortNode for int8/int16, IntNode for
 * int32/uint16, LongNode for int64/uint32, DoubleNode, BinaryNode, TextNode).
 * All randomness comes from the java.util.Random passed in, so a seed fully
 * determines the output.
 *
 * Read next: Oracle.java (turns the tree into a message and serializes it).
 */
package dev.gregor.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.BinaryNode;
import com.fasterxml.jackson.databind.node.BooleanNode;
import com.fasterxml.jackson.databind.node.DoubleNode;
import com.fasterxml.jackson.databind.node.IntNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.LongNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.ShortNode;
import com.fasterxml.jackson.databind.node.TextNode;
import org.apache.kafka.common.Uuid;

import java.util.Random;

final class RandomMessages {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;

    private static final String ALNUM =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    /** Characters JSON must escape (or that are easy to get wrong), incl. NUL and DEL. */
    private static final int[] SPECIAL = {
        '"', '\\', '\t', '\n', '\r', '\b', '\f', '/', 0x00, 0x01, 0x1f, 0x7f, ' ', '\'',
    };
    /** Non-ASCII code points: 2-, 3- and 4-byte UTF-8, incl. U+2028 and a supplementary one. */
    private static final int[] NON_ASCII = {
        0xe9, 0xdf, 0xfc, 0x436, 0x4e2d, 0x65e5, 0x20ac, 0x2028, 0xfeff, 0x1f642, 0x10348, 0xfffd,
    };

    private final Random r;

    RandomMessages(Random r) {
        this.r = r;
    }

    ObjectNode struct(Schema.StructSpec s, int v) {
        ObjectNode o = F.objectNode();
        for (Schema.FieldSpec f : s.fields) {
            if (!f.versions.contains(v)) {
                continue;
            }
            if (f.tagged.contains(v) && r.nextInt(10) < 4) {
                continue; // left at its default: not on the wire, not in the JSON
            }
            o.set(f.camel, field(f, v));
        }
        return o;
    }

    private JsonNode field(Schema.FieldSpec f, int v) {
        boolean nullable = f.nullable.contains(v);
        if (f.isArray) {
            if (nullable && r.nextInt(7) == 0) {
                return NullNode.instance;
            }
            ArrayNode a = F.arrayNode();
            int n = r.nextInt(4);
            for (int i = 0; i < n; i++) {
                a.add(value(f, v, false));
            }
            return a;
        }
        return value(f, v, nullable);
    }

    private JsonNode value(Schema.FieldSpec f, int v, boolean nullable) {
        if (f.isStruct()) {
            if (nullable && r.nextInt(6) == 0) {
                return NullNode.instance;
            }
            return struct(f.struct, v);
        }
        switch (f.type) {
            case "bool":
                return BooleanNode.valueOf(r.nextBoolean());
            case "int8":
                return new ShortNode((short) pickLong(Byte.MIN_VALUE, Byte.MAX_VALUE));
            case "int16":
                return new ShortNode((short) pickLong(Short.MIN_VALUE, Short.MAX_VALUE));
            case "uint16":
                return new IntNode((int) pickLong(0, 0xffff));
            case "int32":
                return new IntNode((int) pickLong(Integer.MIN_VALUE, Integer.MAX_VALUE));
            case "uint32":
                return new LongNode(pickLong(0, 0xffffffffL));
            case "int64":
                return new LongNode(pickLong(Long.MIN_VALUE, Long.MAX_VALUE));
            case "float64":
                return new DoubleNode(pickDouble());
            case "uuid":
                if (r.nextInt(10) == 0) {
                    return new TextNode(Uuid.ZERO_UUID.toString());
                }
                return new TextNode(new Uuid(r.nextLong(), r.nextLong()).toString());
            case "string":
                if (nullable && r.nextInt(6) == 0) {
                    return NullNode.instance;
                }
                return new TextNode(string());
            case "bytes":
            case "records":
                if (nullable && r.nextInt(6) == 0) {
                    return NullNode.instance;
                }
                byte[] b = new byte[r.nextInt(41)];
                r.nextBytes(b);
                return new BinaryNode(b);
            default:
                throw new IllegalStateException("unhandled type " + f.type);
        }
    }

    /** Uniform in [lo, hi] most of the time, an extreme or small value otherwise. */
    private long pickLong(long lo, long hi) {
        switch (r.nextInt(8)) {
            case 0:
                return lo;
            case 1:
                return hi;
            case 2: {
                long[] small = {-1, 0, 1, 2, 127, 128, 255, 256, 16383, 16384, -64, -65};
                long x = small[r.nextInt(small.length)];
                return Math.max(lo, Math.min(hi, x));
            }
            default: {
                if (lo == Long.MIN_VALUE && hi == Long.MAX_VALUE) {
                    long x = r.nextLong();
                    // vary the magnitude so all varint/varlong lengths show up
                    return x >> r.nextInt(64);
                }
                long span = hi - lo + 1; // fits: all other ranges are narrower than 2^63
                long x = lo + Math.floorMod(r.nextLong(), span);
                if (r.nextBoolean()) {
                    int shift = r.nextInt(32);
                    long y = x >> shift;
                    if (y >= lo && y <= hi) {
                        x = y;
                    }
                }
                return x;
            }
        }
    }

    private double pickDouble() {
        double[] special = {0.0, -0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY,
            Double.MIN_VALUE, Double.MAX_VALUE, -Double.MAX_VALUE, 1.0, -1.5, 0.1, 1e21, 1e-7};
        switch (r.nextInt(4)) {
            case 0:
                return special[r.nextInt(special.length)];
            case 1: {
                double d = Double.longBitsToDouble(r.nextLong());
                // one canonical NaN: the JSON form cannot carry a NaN payload
                return Double.isNaN(d) ? Double.NaN : d;
            }
            default:
                return (r.nextDouble() - 0.5) * Math.pow(10, r.nextInt(20) - 5);
        }
    }

    private String string() {
        int len = r.nextInt(13);
        int mode = r.nextInt(10); // 0-6 plain ASCII, 7-8 with non-ASCII, 9 with JSON specials
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < len; i++) {
            int pick = r.nextInt(4);
            if (mode >= 7 && mode <= 8 && pick == 0) {
                sb.appendCodePoint(NON_ASCII[r.nextInt(NON_ASCII.length)]);
            } else if (mode == 9 && pick == 0) {
                sb.appendCodePoint(SPECIAL[r.nextInt(SPECIAL.length)]);
            } else {
                sb.append(ALNUM.charAt(r.nextInt(ALNUM.length())));
            }
        }
        return sb.toString();
    }
}
