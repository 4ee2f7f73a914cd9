#!/usr/bin/env python3
"""
gen_codec.py: generates the Kafka message codec from the files in protocol/schema.

Schema format (the project's own; facts from Apache Kafka's message definitions):
    api <key> <snake_name>
    request|response <message_name> valid <versions> flexible <versions|none>
      <field> <type> v<versions> [null=<versions>] [tagged=<versions> tag=<n>] [default=<value>]
        <nested fields of a struct or []struct type, one indent deeper>
    A struct type already declared in the same message may be used again with no nested fields (it reuses
    the first declaration: Kafka's commonStructs).
Versions are "N+", "N-M", "N" or "none". Types: bool int8 int16 uint16 int32 uint32 int64 float64 string
bytes records uuid, []<primitive>, <Struct>, []<Struct>.

Outputs (committed; `make test` regenerates and fails on a difference):
    protocol/gen/messages.h       structs and decode/encode/size/init prototypes, the message table
    protocol/gen/messages.c       the codec (linked into the broker), and per response a walker that counts its
                                  error codes (<response>_count_errors, Kafka's AbstractResponse.errorCounts)
    protocol/gen/messages_test.c  JSON dump (Kafka JsonConverter shape) and random fill, for tests only
Usage: gen_codec.py <schema_dir> <out_dir>
"""
import os
import re
import sys

PRIMS = {
    'bool': ('bool', 1), 'int8': ('int8_t', 1), 'int16': ('int16_t', 2), 'uint16': ('uint16_t', 2),
    'int32': ('int32_t', 4), 'uint32': ('uint32_t', 4), 'int64': ('int64_t', 8), 'float64': ('double', 8),
    'uuid': ('struct gr_uuid', 16), 'string': ('struct gr_str', None), 'bytes': ('struct gr_bytes', None),
    'records': ('struct gr_records', None),
}
PRIM_ARRAYS = {'int32': 'struct gr_int32_array', 'int64': 'struct gr_int64_array', 'string': 'struct gr_str_array'}
C_KEYWORDS = {'default', 'register', 'signed', 'unsigned', 'int', 'char', 'long', 'short', 'struct', 'union',
              'auto', 'static', 'const', 'volatile', 'switch', 'case', 'break', 'continue', 'return', 'for',
              'while', 'do', 'if', 'else', 'goto', 'sizeof', 'typedef', 'enum', 'extern', 'inline', 'float',
              'double', 'void', 'bool'}


class Versions:
    def __init__(self, s):
        self.text = s
        if s == 'none':
            self.lo, self.hi = 1, 0
        elif s.endswith('+'):
            self.lo, self.hi = int(s[:-1]), 32767
        elif '-' in s:
            a, b = s.split('-')
            self.lo, self.hi = int(a), int(b)
        else:
            self.lo = self.hi = int(s)

    def empty(self):
        return self.lo > self.hi

    def cond(self, var='v'):
        if self.empty():
            return '0'
        if self.lo <= 0 and self.hi >= 32767:
            return '1'
        if self.hi >= 32767:
            return '%s >= %d' % (var, self.lo)
        if self.lo == self.hi:
            return '%s == %d' % (var, self.lo)
        if self.lo <= 0:
            return '%s <= %d' % (var, self.hi)
        return '(%s >= %d && %s <= %d)' % (var, self.lo, var, self.hi)

    def contains(self, v):
        return self.lo <= v <= self.hi


class Field:
    def __init__(self, name, typ, versions, attrs):
        self.name = name + '_' if name in C_KEYWORDS else name
        self.kafka_name = name
        self.typ = typ
        self.versions = Versions(versions)
        self.nullable = Versions(attrs.get('null', 'none'))
        self.tagged = Versions(attrs['tagged']) if 'tagged' in attrs else None
        self.tag = int(attrs['tag']) if 'tag' in attrs else None
        self.default = attrs.get('default')
        self.fields = []      # for struct types
        self.struct = None    # Struct for struct types

    @property
    def is_array(self):
        return self.typ.startswith('[]')

    @property
    def elem(self):
        return self.typ[2:] if self.is_array else self.typ

    @property
    def is_struct(self):
        return self.elem not in PRIMS

    def json_key(self):
        parts = self.kafka_name.split('_')
        return parts[0] + ''.join(p[:1].upper() + p[1:] for p in parts[1:])


class Struct:
    def __init__(self, cname, fields, msg):
        self.cname = cname    # full C struct name without 'struct '
        self.fields = fields
        self.msg = msg

    def regular(self):
        return [f for f in self.fields if f.tagged is None]

    def tagged(self):
        return sorted([f for f in self.fields if f.tagged is not None], key=lambda f: f.tag)


class Message:
    def __init__(self, api_key, kind, name, valid, flexible, header=-1):
        self.api_key = api_key
        self.header = header  # response header version fixed by the schema (`header N`), -1: by flexible
        self.kind = kind
        self.name = name
        self.valid = Versions(valid)
        self.flexible = Versions(flexible)
        self.structs = []     # in dependency order (children first)
        self.top = None


def parse_schema(path):
    msgs = []
    api_key = None
    api_name = None
    stack = []  # (indent, field list)
    cur = None
    for lineno, raw in enumerate(open(path), 1):
        line = raw.rstrip('\n')
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        indent = (len(line) - len(line.lstrip(' '))) // 2
        toks = line.split()
        if indent == 0:
            if toks[0] == 'api':
                api_key, api_name = int(toks[1]), toks[2]
                continue
            if toks[0] in ('request', 'response'):
                header = -1
                if len(toks) == 8 and toks[6] == 'header' and toks[0] == 'response':
                    header = int(toks[7])
                elif len(toks) != 6:
                    raise SystemExit('%s:%d: expected <kind> <name> valid <v> flexible <v> [header <n>]' % (path, lineno))
                cur = Message(api_key, toks[0], toks[1], toks[3], toks[5], header)
                cur.api_name = api_name
                cur.root_fields = []
                stack = [(0, cur.root_fields)]
                msgs.append(cur)
                continue
            raise SystemExit('%s:%d: unknown line' % (path, lineno))
        if toks[0] == 'struct':
            raise SystemExit('%s:%d: common structs are not supported yet' % (path, lineno))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        attrs = dict(t.split('=', 1) for t in toks[3:])
        assert toks[2].startswith('v'), (path, lineno)
        f = Field(toks[0], toks[1], toks[2][1:], attrs)
        stack[-1][1].append(f)
        stack.append((indent, f.fields))
    return msgs


def build_structs(msg):
    # A struct type is declared (with its fields) once per message; a later field of the same type is written
    # without nested fields and reuses it (Kafka's "commonStructs", e.g. AddPartitionsToTxnTopic in both the
    # v0-3 and the v4+ shape of AddPartitionsToTxn).
    declared = {}

    def visit(fields, cname):
        s = Struct(cname, fields, msg)
        for f in fields:
            if f.is_struct:
                sub = 'gr_%s_%s' % (msg.name, snake(f.elem))
                if not f.fields:
                    if sub not in declared:
                        raise SystemExit('struct type %s without fields in %s' % (f.typ, msg.name))
                    f.struct = declared[sub]
                    continue
                if sub in declared:
                    raise SystemExit('struct type %s declared twice in %s' % (f.typ, msg.name))
                f.struct = visit(f.fields, sub)
                declared[sub] = f.struct
        msg.structs.append(s)
        return s
    msg.top = visit(msg.root_fields, 'gr_' + msg.name)


def snake(n):
    s = re.sub(r'([a-z0-9])([A-Z])', r'\1_\2', n)
    s = re.sub(r'([A-Z]+)([A-Z][a-z])', r'\1_\2', s)
    return s.lower()


def c_type(f):
    if f.is_array:
        if f.is_struct:
            return 'struct %s_array' % f.struct.cname
        if f.elem not in PRIM_ARRAYS:
            raise SystemExit('unsupported array type ' + f.typ)
        return PRIM_ARRAYS[f.elem]
    if f.is_struct:
        return 'struct ' + f.struct.cname
    return PRIMS[f.typ][0]


def int_literal(typ, d):
    v = int(d, 0)
    limits = {'int8': 'INT8', 'int16': 'INT16', 'int32': 'INT32', 'int64': 'INT64'}
    bits = {'int8': 8, 'int16': 16, 'int32': 32, 'int64': 64}
    if typ in bits:
        if v == -(1 << (bits[typ] - 1)):
            return limits[typ] + '_MIN'
        if v == (1 << (bits[typ] - 1)) - 1:
            return limits[typ] + '_MAX'
    return '%dLL' % v if typ in ('int64', 'uint32') else str(v)


def default_expr(f):
    """C expression for the field's default value (not for struct fields)."""
    d = f.default
    if f.is_array:
        return None
    t = f.typ
    if t in ('int8', 'int16', 'uint16', 'int32', 'uint32', 'int64'):
        return int_literal(t, d) if d is not None else '0'
    if t == 'float64':
        return d if d is not None else '0.0'
    if t == 'bool':
        return 'true' if d == 'true' else 'false'
    if t == 'string':
        if d == 'null':
            return 'GR_STR_NULL'
        s = '' if d in (None, '""') else d
        return '((struct gr_str){"%s", %d})' % (s, len(s))
    if t == 'records':
        if d == 'null' or d is None:
            return 'GR_RECORDS_NULL'
        return 'gr_records_mem((struct gr_bytes){(const uint8_t *)"", 0})'
    if t == 'bytes':
        if d == 'null':
            return 'GR_BYTES_NULL'
        return '((struct gr_bytes){(const uint8_t *)"", 0})'
    if t == 'uuid':
        return '((struct gr_uuid){{0}})'
    raise SystemExit('no default for ' + t)


def array_default_null(f):
    return f.default == 'null'


class W:
    def __init__(self):
        self.lines = []

    def __call__(self, s=''):
        self.lines.append(s)

    def text(self):
        return '\n'.join(self.lines) + '\n'


def fx_decl(msg):
    return 'const bool fx = %s;\n    (void)fx;\n    (void)v;' % msg.flexible.cond()


# ---------------------------------------------------------------- header
def gen_header(msgs, out):
    w = W()
    w('/* GENERATED by tools/gen_codec.py from the protocol/schema files. Do not edit. */')
    w('/*')
    w(' * messages.h: one C struct per Kafka request/response body and per nested struct, with init, decode,')
    w(' * size and encode functions. Field names are the snake_case of Kafka\'s; strings, bytes and records')
    w(' * are views into the decoded frame; arrays live in the reader\'s arena. A records field to encode may')
    w(' * instead be a file range (struct gr_records): size() counts its bytes, encode() hands it to the')
    w(' * writer\'s chunk list, and *_file_bytes() tells how much of size() that is. Fields absent at a version')
    w(' * keep their defaults on decode and are skipped on encode. Unknown tagged fields are kept in')
    w(' * `unknown_tags` and written back in tag order. Read next: protocol/wire.h, protocol/api.h.')
    w(' */')
    w('#ifndef GR_GEN_MESSAGES_H')
    w('#define GR_GEN_MESSAGES_H')
    w('#include "protocol/wire.h"')
    w('')
    for m in msgs:
        for s in m.structs:
            w('struct %s;' % s.cname)
    w('')
    for m in msgs:
        w('/* ---- %s (api key %d %s, versions %s, flexible %s) ---- */' %
          (m.name, m.api_key, m.kind, m.valid.text, m.flexible.text))
        for s in m.structs:
            w('struct %s {' % s.cname)
            for f in s.fields:
                extra = ' /* v%s%s%s */' % (f.versions.text, ', nullable v' + f.nullable.text if not f.nullable.empty() else '',
                                           ', tag %d v%s' % (f.tag, f.tagged.text) if f.tagged else '')
                w('    %s %s;%s' % (c_type(f), f.name, extra))
            w('    struct gr_tags unknown_tags;')
            w('};')
            if s is not m.top:
                w('struct %s_array {' % s.cname)
                w('    struct %s *items;' % s.cname)
                w('    int32_t count; /* -1 = null */')
                w('};')
                w('/* Sets every field of `m` to its default. */')
                w('void %s_init(struct %s *m);' % (s.cname, s.cname))
        c = m.top.cname
        w('/* Sets every field to its default (Kafka\'s "default", else 0 / empty / null for records). */')
        w('void %s_init(struct %s *m);' % (c, c))
        w('/* Decodes a %s body at `version` (%s) from `rd`; arrays come from rd->arena. Returns 0 or the' % (m.name, m.valid.text))
        w(' * reader\'s sticky enum gr_wire_err. Does not check that the reader is exhausted. */')
        w('int %s_decode(struct gr_rd *rd, int16_t version, struct %s *m);' % (c, c))
        w('/* Bytes that %s_encode writes for `m` at `version`. */' % c)
        w('size_t %s_size(const struct %s *m, int16_t version);' % (c, c))
        w('/* Encodes `m` at `version`; the writer must have %s_size() bytes of room. */' % c)
        w('void %s_encode(struct gr_wr *wr, const struct %s *m, int16_t version);' % (c, c))
        if has_records(m.top):
            w('/* Bytes of the file-kind records fields of `m` at `version`: counted by %s_size() but sent from' % c)
            w(' * files, not written to memory. Sets *ranges to their number (the writer then needs a chunk list with')
            w(' * room for 2 * *ranges + 1 chunks). */')
            w('size_t %s_file_bytes(const struct %s *m, int16_t version, int *ranges);' % (c, c))
        if m.kind == 'response' and has_errors(m.top):
            w('/* Adds one to counts[code + 1] for each error field of `m` (%s, every version: Kafka\'s' % ', '.join(ERROR_FIELDS))
            w(' * errorCounts() reads its in-memory response), the top-level ones only when `top`; a code outside')
            w(' * 0..nslots-2 counts in slot 0 (-1, UNKNOWN_SERVER_ERROR, as Errors.forCode). */')
            w('void %s_count_errors(const struct %s *m, bool top, uint64_t *counts, int nslots);' % (c, c))
        w('')
    w('/* One row per message: the generic face of the codec, for tests and tools. */')
    w('struct gr_msg_ops {')
    w('    int16_t api_key;')
    w('    bool response;')
    w('    const char *name;')
    w('    int16_t version_min, version_max; /* Kafka 4.4.0 validVersions */')
    w('    int16_t flexible_min;             /* first flexible version, -1 none */')
    w('    int16_t header_version;           /* response header version fixed by the schema, -1: by flexible_min */')
    w('    size_t struct_bytes;')
    w('    void (*init)(void *m);')
    w('    int (*decode)(struct gr_rd *rd, int16_t version, void *m);')
    w('    size_t (*size)(const void *m, int16_t version);')
    w('    void (*encode)(struct gr_wr *wr, const void *m, int16_t version);')
    w('    /* the *_file_bytes() function; NULL when the message has no records field */')
    w('    size_t (*file_bytes)(const void *m, int16_t version, int *ranges);')
    w('    /* the *_count_errors() function of a response; NULL for requests */')
    w('    void (*count_errors)(const void *m, bool top, uint64_t *counts, int nslots);')
    w('};')
    w('extern const struct gr_msg_ops gr_msg_ops_table[];')
    w('extern const int gr_msg_ops_count;')
    w('/* Returns the row for (api_key, response) or NULL. */')
    w('const struct gr_msg_ops *gr_msg_ops_find(int16_t api_key, bool response);')
    w('')
    w('/* Test support (messages_test.c, not linked into the broker). */')
    w('struct gr_sb;')
    w('struct gr_rng;')
    w('/* Appends the JSON rendering of `m` at `version` in the shape of Kafka\'s JsonConverter. */')
    w('typedef void (*gr_msg_json_fn)(struct gr_sb *sb, const void *m, int16_t version);')
    w('/* Fills `m` with random field values valid at `version`, arrays and views from `arena`. */')
    w('typedef void (*gr_msg_random_fn)(struct gr_rng *rng, struct gr_arena *arena, void *m, int16_t version);')
    w('struct gr_msg_test_ops {')
    w('    int16_t api_key;')
    w('    bool response;')
    w('    gr_msg_json_fn json;')
    w('    gr_msg_random_fn random;')
    w('};')
    w('extern const struct gr_msg_test_ops gr_msg_test_ops_table[];')
    w('const struct gr_msg_test_ops *gr_msg_test_ops_find(int16_t api_key, bool response);')
    w('#endif')
    open(os.path.join(out, 'messages.h'), 'w').write(w.text())


# ---------------------------------------------------------------- codec
def min_wire_expr(f):
    """Minimal encoded size of a field when present (for array element bounds)."""
    if f.is_array:
        return '(fx ? 1 : 4)'
    if f.is_struct:
        return 'minsz_%s(v)' % f.struct.cname
    t = f.typ
    if t == 'string':
        return '(fx ? 1 : 2)'
    if t in ('bytes', 'records'):
        return '(fx ? 1 : 4)'
    return str(PRIMS[t][1])


def read_prim(t, nullable):
    if t == 'string':
        return 'gr_rd_string(rd, fx, %s)' % nullable
    if t in ('bytes', 'records'):
        return 'gr_rd_%s(rd, fx, %s)' % (t, nullable)
    return 'gr_rd_%s(rd)' % t


def write_prim(t, val):
    if t == 'string':
        return 'gr_wr_string(wr, %s, fx);' % val
    if t in ('bytes', 'records'):
        return 'gr_wr_%s(wr, %s, fx);' % (t, val)
    return 'gr_wr_%s(wr, %s);' % (t, val)


def size_prim(t, val):
    if t == 'string':
        return 'gr_sz_string(%s, fx)' % val
    if t in ('bytes', 'records'):
        return 'gr_sz_%s(%s, fx)' % (t, val)
    return str(PRIMS[t][1])


def gen_decode_field(w, f, ind, target):
    """Emit code decoding field f into lvalue `target` from rd."""
    p = '    ' * ind
    nullable = f.nullable.cond()
    if f.is_array:
        elem_min = min_wire_expr(Field('x', f.elem, '0+', {})) if not f.is_struct else 'minsz_%s(v)' % f.struct.cname
        if f.elem in ('int32', 'int64'):
            elem_min = str(PRIMS[f.elem][1])
        w(p + '{')
        w(p + '    int32_t n = gr_rd_array_len(rd, fx, %s, %s);' % (nullable, elem_min))
        w(p + '    %s.count = n;' % target)
        w(p + '    %s.items = NULL;' % target)
        w(p + '    if (n > 0) {')
        ctype = ('struct ' + f.struct.cname) if f.is_struct else PRIMS[f.elem][0]
        w(p + '        %s.items = gr_rd_alloc(rd, (size_t)n, sizeof(%s));' % (target, ctype))
        w(p + '        for (int32_t i = 0; i < n && !rd->err; i++)')
        if f.is_struct:
            w(p + '            dec_%s(rd, v, &%s.items[i]);' % (f.struct.cname, target))
        else:
            w(p + '            %s.items[i] = %s;' % (target, read_prim(f.elem, '0')))
        w(p + '        if (rd->err) %s.count = 0;' % target)
        w(p + '    }')
        w(p + '}')
    elif f.is_struct:
        w(p + 'dec_%s(rd, v, &%s);' % (f.struct.cname, target))
    else:
        w(p + '%s = %s;' % (target, read_prim(f.typ, nullable)))


def gen_encode_field(w, f, ind, val):
    p = '    ' * ind
    if f.is_array:
        w(p + 'gr_wr_array_len(wr, %s.count, fx);' % val)
        w(p + 'for (int32_t i = 0; i < %s.count; i++)' % val)
        if f.is_struct:
            w(p + '    enc_%s(wr, v, &%s.items[i]);' % (f.struct.cname, val))
        else:
            w(p + '    ' + write_prim(f.elem, '%s.items[i]' % val))
    elif f.is_struct:
        w(p + 'enc_%s(wr, v, &%s);' % (f.struct.cname, val))
    else:
        w(p + write_prim(f.typ, val))


def size_field_expr(w, f, ind, val, acc):
    p = '    ' * ind
    if f.is_array:
        w(p + '%s += gr_sz_array_len(%s.count, fx);' % (acc, val))
        if f.is_struct:
            w(p + 'for (int32_t i = 0; i < %s.count; i++)' % val)
            w(p + '    %s += sz_%s(&%s.items[i], v);' % (acc, f.struct.cname, val))
        elif f.elem == 'string':
            w(p + 'for (int32_t i = 0; i < %s.count; i++)' % val)
            w(p + '    %s += gr_sz_string(%s.items[i], fx);' % (acc, val))
        else:
            w(p + 'if (%s.count > 0) %s += (size_t)%s.count * %d;' % (val, acc, val, PRIMS[f.elem][1]))
    elif f.is_struct:
        w(p + '%s += sz_%s(&%s, v);' % (acc, f.struct.cname, val))
    else:
        w(p + '%s += %s;' % (acc, size_prim(f.typ, val)))


def isdef_expr(f, val):
    if f.is_array:
        return '%s.count %s' % (val, '< 0' if array_default_null(f) else '== 0')
    if f.is_struct:
        return 'isdef_%s(&%s)' % (f.struct.cname, val)
    t = f.typ
    if t == 'string':
        if f.default == 'null':
            return '%s.len < 0' % val
        d = '' if f.default in (None, '""') else f.default
        return 'gr_str_eq(%s, gr_str_c("%s"))' % (val, d)
    if t == 'records':
        return 'gr_records_len(%s) %s' % (val, '< 0' if default_expr(f) == 'GR_RECORDS_NULL' else '== 0')
    if t == 'bytes':
        return '%s.len %s' % (val, '< 0' if default_expr(f) == 'GR_BYTES_NULL' else '== 0')
    if t == 'uuid':
        return 'uuid_is_zero(%s)' % val
    if t == 'float64':
        return '(%s == %s)' % (val, default_expr(f))
    return '(%s == %s)' % (val, default_expr(f))


def gen_codec(msgs, out):
    w = W()
    w('/* GENERATED by tools/gen_codec.py from the protocol/schema files. Do not edit. */')
    w('/* messages.c: the Kafka message codec; see messages.h. */')
    w('#include "protocol/gen/messages.h"')
    w('')
    w('#include <stdint.h>')
    w('')
    w('static inline bool uuid_is_zero(struct gr_uuid u)')
    w('{')
    w('    static const struct gr_uuid zero;')
    w('    return memcmp(u.b, zero.b, 16) == 0;')
    w('}')
    w('')
    w('/* Stores one unknown tagged field; `cap` is the section\'s field count. */')
    w('static void keep_unknown_tag(struct gr_rd *rd, struct gr_tags *t, uint32_t cap, uint32_t tag, const uint8_t *p, uint32_t n)')
    w('{')
    w('    if (!t->items) {')
    w('        t->items = gr_rd_alloc(rd, cap, sizeof *t->items);')
    w('        if (!t->items) return;')
    w('    }')
    w('    t->items[t->count].tag = tag;')
    w('    t->items[t->count].data = (struct gr_bytes){p, (int32_t)n};')
    w('    t->count++;')
    w('}')
    w('')
    w('/* One error code counted: counts[code + 1], a code outside the table in slot 0 (-1, as Errors.forCode). */')
    w('static inline void count_error(uint64_t *counts, int nslots, int16_t code)')
    w('{')
    w('    int i = code + 1;')
    w('    counts[i >= 0 && i < nslots ? i : 0]++;')
    w('}')
    w('')
    w('static void write_unknown_tag(struct gr_wr *wr, const struct gr_tag *t)')
    w('{')
    w('    gr_wr_uvarint(wr, t->tag);')
    w('    gr_wr_uvarint(wr, (uint32_t)t->data.len);')
    w('    gr_wr_raw(wr, t->data.ptr, (size_t)t->data.len);')
    w('}')
    w('')
    for m in msgs:
        for s in m.structs:
            w('static void dec_%s(struct gr_rd *rd, int16_t v, struct %s *m);' % (s.cname, s.cname))
            w('static void enc_%s(struct gr_wr *wr, int16_t v, const struct %s *m);' % (s.cname, s.cname))
            w('static size_t sz_%s(const struct %s *m, int16_t v);' % (s.cname, s.cname))
            w('static size_t minsz_%s(int16_t v) __attribute__((unused));' % s.cname)
            w('static bool isdef_%s(const struct %s *m) __attribute__((unused));' % (s.cname, s.cname))
            if has_records(s):
                w('static size_t fb_%s(const struct %s *m, int16_t v, int *ranges);' % (s.cname, s.cname))
    w('')
    for m in msgs:
        for s in m.structs:
            gen_struct_codec(w, m, s)
        if m.kind == 'response':
            gen_count_errors(w, m)
        c = m.top.cname
        w('int %s_decode(struct gr_rd *rd, int16_t version, struct %s *m)' % (c, c))
        w('{')
        w('    dec_%s(rd, version, m);' % c)
        w('    return rd->err;')
        w('}')
        w('')
        w('size_t %s_size(const struct %s *m, int16_t version) { return sz_%s(m, version); }' % (c, c, c))
        w('')
        w('void %s_encode(struct gr_wr *wr, const struct %s *m, int16_t version) { enc_%s(wr, version, m); }' % (c, c, c))
        w('')
        if has_records(m.top):
            w('size_t %s_file_bytes(const struct %s *m, int16_t version, int *ranges)' % (c, c))
            w('{')
            w('    *ranges = 0;')
            w('    return fb_%s(m, version, ranges);' % c)
            w('}')
            w('')
        for fn, sig in (('init', 'void *m'),):
            pass
        w('static void ops_init_%s(void *m) { %s_init(m); }' % (c, c))
        w('static int ops_decode_%s(struct gr_rd *rd, int16_t v, void *m) { return %s_decode(rd, v, m); }' % (c, c))
        w('static size_t ops_size_%s(const void *m, int16_t v) { return %s_size(m, v); }' % (c, c))
        w('static void ops_encode_%s(struct gr_wr *wr, const void *m, int16_t v) { %s_encode(wr, m, v); }' % (c, c))
        if has_records(m.top):
            w('static size_t ops_file_bytes_%s(const void *m, int16_t v, int *ranges) { return %s_file_bytes(m, v, ranges); }' % (c, c))
        w('')
    w('const struct gr_msg_ops gr_msg_ops_table[] = {')
    for m in msgs:
        c = m.top.cname
        w('    {%d, %s, "%s", %d, %d, %d, %d, sizeof(struct %s), ops_init_%s, ops_decode_%s, ops_size_%s, ops_encode_%s, %s, %s},' %
          (m.api_key, 'true' if m.kind == 'response' else 'false', m.name, m.valid.lo, m.valid.hi,
           -1 if m.flexible.empty() else m.flexible.lo, m.header, c, c, c, c, c,
           'ops_file_bytes_' + c if has_records(m.top) else 'NULL',
           'ops_count_errors_' + c if m.kind == 'response' and has_errors(m.top) else 'NULL'))
    w('};')
    w('const int gr_msg_ops_count = %d;' % len(msgs))
    w('')
    w('const struct gr_msg_ops *gr_msg_ops_find(int16_t api_key, bool response)')
    w('{')
    w('    for (int i = 0; i < gr_msg_ops_count; i++)')
    w('        if (gr_msg_ops_table[i].api_key == api_key && gr_msg_ops_table[i].response == response)')
    w('            return &gr_msg_ops_table[i];')
    w('    return NULL;')
    w('}')
    open(os.path.join(out, 'messages.c'), 'w').write(w.text())


def gen_struct_codec(w, m, s):
    c = s.cname
    pub = '' if s is m.top or True else 'static '
    # init
    w('%svoid %s_init(struct %s *m)' % (pub, c, c))
    w('{')
    for f in s.fields:
        if f.is_array:
            w('    m->%s.items = NULL;' % f.name)
            w('    m->%s.count = %s;' % (f.name, '-1' if array_default_null(f) else '0'))
        elif f.is_struct:
            w('    %s_init(&m->%s);' % (f.struct.cname, f.name))
        else:
            w('    m->%s = %s;' % (f.name, default_expr(f)))
    w('    m->unknown_tags.items = NULL;')
    w('    m->unknown_tags.count = 0;')
    w('}')
    w('')
    # isdef
    w('static bool isdef_%s(const struct %s *m)' % (c, c))
    w('{')
    conds = [isdef_expr(f, 'm->' + f.name) for f in s.fields] + ['m->unknown_tags.count == 0']
    w('    return ' + ' &&\n           '.join(conds) + ';')
    w('}')
    w('')
    # minsz
    w('static size_t minsz_%s(int16_t v)' % c)
    w('{')
    w('    ' + fx_decl(m))
    w('    size_t n = fx ? 1 : 0;')
    for f in s.regular():
        w('    if (%s) n += %s;' % (f.versions.cond(), min_wire_expr(f)))
    w('    (void)v;')
    w('    return n;')
    w('}')
    w('')
    # decode
    w('static void dec_%s(struct gr_rd *rd, int16_t v, struct %s *m)' % (c, c))
    w('{')
    w('    ' + fx_decl(m))
    w('    %s_init(m);' % c)
    for f in s.regular():
        if f.versions.empty():
            continue
        w('    if (%s) {' % f.versions.cond())
        gen_decode_field(w, f, 2, 'm->' + f.name)
        w('    }')
    w('    if (!fx || rd->err) return;')
    w('    uint32_t ntags = gr_rd_tag_count(rd);')
    w('    int64_t last_tag = -1;')
    w('    for (uint32_t t = 0; t < ntags && !rd->err; t++) {')
    w('        uint32_t tag = gr_rd_uvarint(rd);')
    w('        uint32_t len = gr_rd_uvarint(rd);')
    w('        if (rd->err) return;')
    w('        if ((int64_t)tag <= last_tag) {')
    w('            gr_rd_fail(rd, GR_WIRE_BAD_TAGS);')
    w('            return;')
    w('        }')
    w('        last_tag = tag;')
    w('        if (len > gr_rd_left(rd)) {')
    w('            gr_rd_fail(rd, GR_WIRE_SHORT);')
    w('            return;')
    w('        }')
    w('        const uint8_t *body = rd->p;')
    w('        switch (tag) {')
    for f in s.tagged():
        w('        case %d:' % f.tag)
        w('            if (%s) {' % f.tagged.cond())
        w('                struct gr_rd sub = *rd;')
        w('                sub.end = body + len;')
        w('                {')
        w('                    struct gr_rd *outer = rd;')
        w('                    rd = &sub;')
        gen_decode_field(w, f, 5, 'm->' + f.name)
        w('                    rd = outer;')
        w('                }')
        w('                if (sub.err || sub.p != sub.end) {')
        w('                    gr_rd_fail(rd, sub.err ? sub.err : GR_WIRE_BAD_LENGTH);')
        w('                    return;')
        w('                }')
        w('                break;')
        w('            }')
        w('            keep_unknown_tag(rd, &m->unknown_tags, ntags, tag, body, len); /* not known at this version */')
        w('            break;')
    w('        default:')
    w('            keep_unknown_tag(rd, &m->unknown_tags, ntags, tag, body, len);')
    w('        }')
    w('        rd->p = body + len;')
    w('    }')
    w('}')
    w('')
    # size
    w('static size_t sz_%s(const struct %s *m, int16_t v)' % (c, c))
    w('{')
    w('    ' + fx_decl(m))
    w('    size_t n = 0;')
    for f in s.regular():
        if f.versions.empty():
            continue
        w('    if (%s) {' % f.versions.cond())
        size_field_expr(w, f, 2, 'm->' + f.name, 'n')
        w('    }')
    w('    if (fx) {')
    w('        uint32_t count = (uint32_t)m->unknown_tags.count;')
    for f in s.tagged():
        w('        if (%s && !(%s)) {' % (f.tagged.cond(), isdef_expr(f, 'm->' + f.name)))
        w('            size_t body = 0;')
        size_field_expr(w, f, 3, 'm->' + f.name, 'body')
        w('            n += gr_sz_uvarint(%d) + gr_sz_uvarint((uint32_t)body) + body;' % f.tag)
        w('            count++;')
        w('        }')
    w('        n += gr_sz_uvarint(count) + gr_sz_unknown_tags(&m->unknown_tags);')
    w('    }')
    w('    (void)m;')
    w('    return n;')
    w('}')
    w('')
    # encode
    w('static void enc_%s(struct gr_wr *wr, int16_t v, const struct %s *m)' % (c, c))
    w('{')
    w('    ' + fx_decl(m))
    for f in s.regular():
        if f.versions.empty():
            continue
        w('    if (%s) {' % f.versions.cond())
        gen_encode_field(w, f, 2, 'm->' + f.name)
        w('    }')
    w('    if (!fx) return;')
    tagged = s.tagged()
    w('    uint32_t count = (uint32_t)m->unknown_tags.count;')
    for i, f in enumerate(tagged):
        w('    const bool has%d = %s && !(%s);' % (i, f.tagged.cond(), isdef_expr(f, 'm->' + f.name)))
        w('    count += has%d;' % i)
    w('    gr_wr_uvarint(wr, count);')
    w('    int32_t u = 0;')
    for i, f in enumerate(tagged):
        if f.tag > 0:
            w('    while (u < m->unknown_tags.count && m->unknown_tags.items[u].tag < %d)' % f.tag)
            w('        write_unknown_tag(wr, &m->unknown_tags.items[u++]);')
        w('    if (has%d) {' % i)
        w('        size_t body = 0;')
        size_field_expr(w, f, 2, 'm->' + f.name, 'body')
        w('        gr_wr_uvarint(wr, %d);' % f.tag)
        w('        gr_wr_uvarint(wr, (uint32_t)body);')
        gen_encode_field(w, f, 2, 'm->' + f.name)
        w('    }')
    w('    while (u < m->unknown_tags.count)')
    w('        write_unknown_tag(wr, &m->unknown_tags.items[u++]);')
    w('}')
    w('')
    if has_records(s):
        gen_file_bytes(w, m, s)


ERROR_FIELDS = ('error_code', 'partition_error_code')  # the fields Kafka's errorCounts() reads


def is_error_field(f):
    return not f.is_array and f.typ == 'int16' and f.kafka_name in ERROR_FIELDS


def has_errors(s):
    """True when struct s holds an error field (ERROR_FIELDS), directly or in a nested struct."""
    return any(is_error_field(f) or (f.is_struct and has_errors(f.struct)) for f in s.fields)


def gen_count_errors(w, m):
    """ce_<struct> walkers of response m and its public <top>_count_errors: every error field, at every
    version (Kafka counts its in-memory response, where a field absent at the version holds its default)."""
    for s in m.structs:
        if not has_errors(s):
            continue
        c = s.cname
        top = s is m.top
        if top:
            w('void %s_count_errors(const struct %s *m, bool top, uint64_t *counts, int nslots)' % (c, c))
        else:
            w('static void ce_%s(const struct %s *m, uint64_t *counts, int nslots)' % (c, c))
        w('{')
        for f in s.fields:
            if is_error_field(f):
                w('    %scount_error(counts, nslots, m->%s);' % ('if (top) ' if top else '', f.name))
            elif f.is_struct and has_errors(f.struct):
                if f.is_array:
                    w('    for (int32_t i = 0; i < m->%s.count; i++)' % f.name)
                    w('        ce_%s(&m->%s.items[i], counts, nslots);' % (f.struct.cname, f.name))
                else:
                    w('    ce_%s(&m->%s, counts, nslots);' % (f.struct.cname, f.name))
        if top:
            w('    (void)top;')
        w('}')
        w('')
    if has_errors(m.top):
        c = m.top.cname
        w('static void ops_count_errors_%s(const void *m, bool top, uint64_t *counts, int nslots) { %s_count_errors(m, top, counts, nslots); }' % (c, c))
        w('')


def has_records(s):
    """True when struct s holds a records field, directly or in a nested struct."""
    return any(f.typ == 'records' or (f.is_struct and has_records(f.struct)) for f in s.fields)


def gen_file_bytes(w, m, s):
    """fb_<struct>: bytes and number of the file-kind records fields that encode() would hand to the chunk list."""
    c = s.cname
    w('static size_t fb_%s(const struct %s *m, int16_t v, int *ranges)' % (c, c))
    w('{')
    w('    ' + fx_decl(m))
    w('    size_t n = 0;')
    for f in s.regular() + s.tagged():
        if f.versions.empty() or not (f.typ == 'records' or (f.is_struct and has_records(f.struct))):
            continue
        cond = f.versions.cond()
        if f.tagged:
            cond = 'fx && %s && !(%s)' % (f.tagged.cond(), isdef_expr(f, 'm->' + f.name))
        val = 'm->' + f.name
        w('    if (%s) {' % cond)
        if f.typ == 'records':
            w('        if (%s.kind == GR_RECORDS_FILE && %s.file.bytes > 0) {' % (val, val))
            w('            n += (size_t)%s.file.bytes;' % val)
            w('            (*ranges)++;')
            w('        }')
        elif f.is_array:
            w('        for (int32_t i = 0; i < %s.count; i++)' % val)
            w('            n += fb_%s(&%s.items[i], v, ranges);' % (f.struct.cname, val))
        else:
            w('        n += fb_%s(&%s, v, ranges);' % (f.struct.cname, val))
        w('    }')
    w('    return n;')
    w('}')
    w('')


# ---------------------------------------------------------------- test support
def gen_test(msgs, out):
    w = W()
    w('/* GENERATED by tools/gen_codec.py from the protocol/schema files. Do not edit. */')
    w('/* messages_test.c: JSON rendering (Kafka JsonConverter shape) and random fill, for tests only. */')
    w('#include "protocol/gen/messages.h"')
    w('#include "protocol/tests/support.h"')
    w('')
    for m in msgs:
        for s in m.structs:
            w('static void json_%s(struct gr_sb *sb, int16_t v, const struct %s *m);' % (s.cname, s.cname))
            w('static void rnd_%s(struct gr_rng *rng, struct gr_arena *a, int16_t v, struct %s *m);' % (s.cname, s.cname))
    w('')
    for m in msgs:
        for s in m.structs:
            gen_struct_test(w, m, s)
        c = m.top.cname
        w('static void ops_json_%s(struct gr_sb *sb, const void *m, int16_t v) { json_%s(sb, v, m); }' % (c, c))
        w('static void ops_rnd_%s(struct gr_rng *rng, struct gr_arena *a, void *m, int16_t v) { rnd_%s(rng, a, v, m); }' % (c, c))
        w('')
    w('const struct gr_msg_test_ops gr_msg_test_ops_table[] = {')
    for m in msgs:
        c = m.top.cname
        w('    {%d, %s, ops_json_%s, ops_rnd_%s},' % (m.api_key, 'true' if m.kind == 'response' else 'false', c, c))
    w('};')
    w('')
    w('const struct gr_msg_test_ops *gr_msg_test_ops_find(int16_t api_key, bool response)')
    w('{')
    w('    for (int i = 0; i < gr_msg_ops_count; i++)')
    w('        if (gr_msg_test_ops_table[i].api_key == api_key && gr_msg_test_ops_table[i].response == response)')
    w('            return &gr_msg_test_ops_table[i];')
    w('    return NULL;')
    w('}')
    open(os.path.join(out, 'messages_test.c'), 'w').write(w.text())


def json_prim(t, val):
    return {
        'bool': 'gr_sb_json_bool(sb, %s);', 'int8': 'gr_sb_json_int(sb, %s);', 'int16': 'gr_sb_json_int(sb, %s);',
        'uint16': 'gr_sb_json_int(sb, %s);', 'int32': 'gr_sb_json_int(sb, %s);', 'uint32': 'gr_sb_json_int(sb, %s);',
        'int64': 'gr_sb_json_int(sb, %s);', 'float64': 'gr_sb_json_double(sb, %s);',
        'string': 'gr_sb_json_str(sb, %s);', 'bytes': 'gr_sb_json_bytes(sb, %s);',
        'records': 'gr_sb_json_records(sb, %s);', 'uuid': 'gr_sb_json_uuid(sb, %s);',
    }[t] % val


def rnd_prim(t, nullable):
    return {
        'bool': 'gr_rng_bool(rng)', 'int8': '(int8_t)gr_rng_u64(rng)', 'int16': '(int16_t)gr_rng_u64(rng)',
        'uint16': '(uint16_t)gr_rng_u64(rng)', 'int32': 'gr_rng_int32(rng)', 'uint32': '(uint32_t)gr_rng_u64(rng)',
        'int64': 'gr_rng_int64(rng)', 'float64': 'gr_rng_double(rng)',
        'string': 'gr_rng_str(rng, a, %s)' % nullable, 'bytes': 'gr_rng_bytes(rng, a, %s)' % nullable,
        'records': 'gr_records_mem(gr_rng_bytes(rng, a, %s))' % nullable, 'uuid': 'gr_rng_uuid(rng)',
    }[t]


def gen_struct_test(w, m, s):
    c = s.cname
    w('static void json_%s(struct gr_sb *sb, int16_t v, const struct %s *m)' % (c, c))
    w('{')
    w('    gr_sb_putc(sb, \'{\');')
    w('    bool first = true;')
    for f in s.fields:
        vc = f.tagged.cond() if f.tagged else f.versions.cond()
        if f.versions.empty():
            continue
        w('    if (%s) {' % vc)
        w('        gr_sb_json_key(sb, "%s", &first);' % f.json_key())
        val = 'm->' + f.name
        if f.is_array:
            w('        if (%s.count < 0) {' % val)
            w('            gr_sb_puts(sb, "null");')
            w('        } else {')
            w('            gr_sb_putc(sb, \'[\');')
            w('            for (int32_t i = 0; i < %s.count; i++) {' % val)
            w('                if (i) gr_sb_putc(sb, \',\');')
            if f.is_struct:
                w('                json_%s(sb, v, &%s.items[i]);' % (f.struct.cname, val))
            else:
                w('                ' + json_prim(f.elem, '%s.items[i]' % val))
            w('            }')
            w('            gr_sb_putc(sb, \']\');')
            w('        }')
        elif f.is_struct:
            w('        json_%s(sb, v, &%s);' % (f.struct.cname, val))
        else:
            w('        ' + json_prim(f.typ, val))
        w('    }')
    w('    gr_sb_putc(sb, \'}\');')
    w('    (void)v;')
    w('    (void)first;')
    w('}')
    w('')
    w('static void rnd_%s(struct gr_rng *rng, struct gr_arena *a, int16_t v, struct %s *m)' % (c, c))
    w('{')
    w('    %s_init(m);' % c)
    w('    (void)v;')
    for f in s.fields:
        if f.versions.empty():
            continue
        vc = f.versions.cond()
        if f.tagged:
            vc = '(%s) && (%s) && gr_rng_bool(rng)' % (vc, f.tagged.cond())
        nullable = f.nullable.cond()
        val = 'm->' + f.name
        w('    if (%s) {' % vc)
        if f.is_array:
            w('        if ((%s) && gr_rng_below(rng, 5) == 0) {' % nullable)
            w('            %s.count = -1;' % val)
            w('        } else {')
            w('            %s.count = (int32_t)gr_rng_below(rng, 4);' % val)
            ctype = ('struct ' + f.struct.cname) if f.is_struct else PRIMS[f.elem][0]
            w('            %s.items = gr_arena_calloc(a, (size_t)%s.count + 1, sizeof(%s));' % (val, val, ctype))
            w('            for (int32_t i = 0; i < %s.count; i++)' % val)
            if f.is_struct:
                w('                rnd_%s(rng, a, v, &%s.items[i]);' % (f.struct.cname, val))
            else:
                w('                %s.items[i] = %s;' % (val, rnd_prim(f.elem, '0')))
            w('        }')
        elif f.is_struct:
            w('        rnd_%s(rng, a, v, &%s);' % (f.struct.cname, val))
        else:
            w('        %s = %s;' % (val, rnd_prim(f.typ, nullable)))
        w('    }')
    w('    if ((%s) && gr_rng_below(rng, 4) == 0)' % m.flexible.cond())
    w('        gr_rng_unknown_tags(rng, a, &m->unknown_tags);')
    w('}')
    w('')


def main():
    sdir, out = sys.argv[1], sys.argv[2]
    msgs = []
    for fn in sorted(os.listdir(sdir)):
        if fn.endswith('.schema'):
            msgs.extend(parse_schema(os.path.join(sdir, fn)))
    msgs.sort(key=lambda m: (m.api_key, m.kind))
    for m in msgs:
        build_structs(m)
    os.makedirs(out, exist_ok=True)
    gen_header(msgs, out)
    gen_codec(msgs, out)
    gen_test(msgs, out)


if __name__ == '__main__':
    main()
