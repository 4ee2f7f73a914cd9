/*
 * wire.c: the primitive readers and writers of wire.h. Every read checks the bytes left first; every
 * write asserts the room the size functions promised.
 */
#include "protocol/wire.h"

#include <assert.h>

#include "common/limits.h"

static inline bool need(struct gr_rd *rd, size_t n)
{
    if (rd->err) return false;
    if ((size_t)(rd->end - rd->p) < n) {
        gr_rd_fail(rd, GR_WIRE_SHORT);
        return false;
    }
    return true;
}

int8_t gr_rd_int8(struct gr_rd *rd)
{
    if (!need(rd, 1)) return 0;
    return (int8_t)*rd->p++;
}

uint16_t gr_rd_uint16(struct gr_rd *rd)
{
    if (!need(rd, 2)) return 0;
    uint16_t v = (uint16_t)((rd->p[0] << 8) | rd->p[1]);
    rd->p += 2;
    return v;
}

int16_t gr_rd_int16(struct gr_rd *rd)
{
    return (int16_t)gr_rd_uint16(rd);
}

uint32_t gr_rd_uint32(struct gr_rd *rd)
{
    if (!need(rd, 4)) return 0;
    uint32_t v =
        ((uint32_t)rd->p[0] << 24) | ((uint32_t)rd->p[1] << 16) | ((uint32_t)rd->p[2] << 8) | rd->p[3];
    rd->p += 4;
    return v;
}

int32_t gr_rd_int32(struct gr_rd *rd)
{
    return (int32_t)gr_rd_uint32(rd);
}

int64_t gr_rd_int64(struct gr_rd *rd)
{
    uint64_t hi = gr_rd_uint32(rd);
    uint64_t lo = gr_rd_uint32(rd);
    return (int64_t)((hi << 32) | lo);
}

double gr_rd_float64(struct gr_rd *rd)
{
    uint64_t u = (uint64_t)gr_rd_int64(rd);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

bool gr_rd_bool(struct gr_rd *rd)
{
    return gr_rd_int8(rd) != 0;
}

struct gr_uuid gr_rd_uuid(struct gr_rd *rd)
{
    struct gr_uuid u = {{0}};
    if (!need(rd, 16)) return u;
    memcpy(u.b, rd->p, 16);
    rd->p += 16;
    return u;
}

static uint64_t rd_uvarlong(struct gr_rd *rd, int bytes_max)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes_max; i++) {
        if (!need(rd, 1)) return 0;
        uint8_t b = *rd->p++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) return v;
    }
    gr_rd_fail(rd, GR_WIRE_BAD_VARINT);
    return 0;
}

uint32_t gr_rd_uvarint(struct gr_rd *rd)
{
    uint64_t v = rd_uvarlong(rd, GR_VARINT_BYTES_MAX);
    if (v > UINT32_MAX) {
        gr_rd_fail(rd, GR_WIRE_BAD_VARINT);
        return 0;
    }
    return (uint32_t)v;
}

int32_t gr_rd_varint(struct gr_rd *rd)
{
    uint32_t u = gr_rd_uvarint(rd);
    return (int32_t)((u >> 1) ^ (~(u & 1) + 1));
}

int64_t gr_rd_varlong(struct gr_rd *rd)
{
    uint64_t u = rd_uvarlong(rd, GR_VARLONG_BYTES_MAX);
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

/* Reads a length in the classic (int16/int32) or compact (uvarint N+1) form; -1 = null. */
static int64_t rd_len(struct gr_rd *rd, bool compact, bool wide)
{
    if (compact) return (int64_t)gr_rd_uvarint(rd) - 1;
    return wide ? gr_rd_int32(rd) : gr_rd_int16(rd);
}

static const uint8_t *rd_span(struct gr_rd *rd, bool compact, bool nullable, bool wide, int32_t *len_out)
{
    int64_t len = rd_len(rd, compact, wide);
    *len_out = -1;
    if (rd->err) return NULL;
    if (len < 0) {
        if (len != -1)
            gr_rd_fail(rd, GR_WIRE_BAD_LENGTH);
        else if (!nullable)
            gr_rd_fail(rd, GR_WIRE_NULL);
        return NULL;
    }
    if (len > INT32_MAX || (uint64_t)len > gr_rd_left(rd)) {
        gr_rd_fail(rd, GR_WIRE_BAD_LENGTH);
        return NULL;
    }
    const uint8_t *p = rd->p;
    rd->p += len;
    *len_out = (int32_t)len;
    return p;
}

struct gr_str gr_rd_string(struct gr_rd *rd, bool compact, bool nullable)
{
    struct gr_str s;
    s.ptr = (const char *)rd_span(rd, compact, nullable, false, &s.len);
    if (rd->err) s = (struct gr_str){"", 0};
    return s;
}

struct gr_bytes gr_rd_bytes(struct gr_rd *rd, bool compact, bool nullable)
{
    struct gr_bytes b;
    b.ptr = rd_span(rd, compact, nullable, true, &b.len);
    if (rd->err) b = (struct gr_bytes){(const uint8_t *)"", 0};
    return b;
}

struct gr_records gr_rd_records(struct gr_rd *rd, bool compact, bool nullable)
{
    return gr_records_mem(gr_rd_bytes(rd, compact, nullable));
}

int32_t gr_rd_array_len(struct gr_rd *rd, bool compact, bool nullable, size_t elem_bytes_min)
{
    int64_t n = rd_len(rd, compact, true);
    if (rd->err) return 0;
    if (n < 0) {
        if (n != -1)
            gr_rd_fail(rd, GR_WIRE_BAD_LENGTH);
        else if (!nullable)
            gr_rd_fail(rd, GR_WIRE_NULL);
        return rd->err ? 0 : -1;
    }
    if (elem_bytes_min == 0) elem_bytes_min = 1;
    if ((uint64_t)n > gr_rd_left(rd) / elem_bytes_min) {
        gr_rd_fail(rd, GR_WIRE_BAD_LENGTH);
        return 0;
    }
    return (int32_t)n;
}

void gr_rd_skip(struct gr_rd *rd, size_t n)
{
    if (need(rd, n)) rd->p += n;
}

uint32_t gr_rd_tag_count(struct gr_rd *rd)
{
    uint32_t n = gr_rd_uvarint(rd);
    /* each field needs at least 2 bytes (tag, size) */
    if (!rd->err && (n > GR_TAGGED_FIELDS_MAX || n > gr_rd_left(rd) / 2)) {
        gr_rd_fail(rd, GR_WIRE_BAD_TAGS);
        return 0;
    }
    return rd->err ? 0 : n;
}

void *gr_rd_alloc(struct gr_rd *rd, size_t n, size_t size)
{
    if (rd->err) return NULL;
    if (n == 0) return NULL;
    void *p = gr_arena_calloc(rd->arena, n, size);
    if (!p) gr_rd_fail(rd, GR_WIRE_NO_MEMORY);
    return p;
}

/* ---- writers ---- */

static inline void room(struct gr_wr *wr, size_t n)
{
    assert((size_t)(wr->end - wr->p) >= n && "encode overran the size computed by size()");
    (void)n;
}

void gr_wr_int8(struct gr_wr *wr, int8_t v)
{
    room(wr, 1);
    *wr->p++ = (uint8_t)v;
}

void gr_wr_uint16(struct gr_wr *wr, uint16_t v)
{
    room(wr, 2);
    wr->p[0] = (uint8_t)(v >> 8);
    wr->p[1] = (uint8_t)v;
    wr->p += 2;
}

void gr_wr_int16(struct gr_wr *wr, int16_t v)
{
    gr_wr_uint16(wr, (uint16_t)v);
}

void gr_wr_uint32(struct gr_wr *wr, uint32_t v)
{
    room(wr, 4);
    wr->p[0] = (uint8_t)(v >> 24);
    wr->p[1] = (uint8_t)(v >> 16);
    wr->p[2] = (uint8_t)(v >> 8);
    wr->p[3] = (uint8_t)v;
    wr->p += 4;
}

void gr_wr_int32(struct gr_wr *wr, int32_t v)
{
    gr_wr_uint32(wr, (uint32_t)v);
}

void gr_wr_int64(struct gr_wr *wr, int64_t v)
{
    gr_wr_uint32(wr, (uint32_t)((uint64_t)v >> 32));
    gr_wr_uint32(wr, (uint32_t)v);
}

void gr_wr_float64(struct gr_wr *wr, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    gr_wr_int64(wr, (int64_t)u);
}

void gr_wr_bool(struct gr_wr *wr, bool v)
{
    gr_wr_int8(wr, v ? 1 : 0);
}

void gr_wr_uuid(struct gr_wr *wr, struct gr_uuid v)
{
    gr_wr_raw(wr, v.b, 16);
}

static void wr_uvarlong(struct gr_wr *wr, uint64_t v)
{
    while (v >= 0x80) {
        room(wr, 1);
        *wr->p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    room(wr, 1);
    *wr->p++ = (uint8_t)v;
}

void gr_wr_uvarint(struct gr_wr *wr, uint32_t v)
{
    wr_uvarlong(wr, v);
}
void gr_wr_varint(struct gr_wr *wr, int32_t v)
{
    wr_uvarlong(wr, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}
void gr_wr_varlong(struct gr_wr *wr, int64_t v)
{
    wr_uvarlong(wr, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void gr_wr_raw(struct gr_wr *wr, const void *p, size_t n)
{
    room(wr, n);
    if (n) memcpy(wr->p, p, n);
    wr->p += n;
}

static void wr_len(struct gr_wr *wr, int32_t len, bool compact, bool wide)
{
    if (compact)
        gr_wr_uvarint(wr, (uint32_t)(len + 1));
    else if (wide)
        gr_wr_int32(wr, len);
    else
        gr_wr_int16(wr, (int16_t)len);
}

void gr_wr_string(struct gr_wr *wr, struct gr_str s, bool compact)
{
    wr_len(wr, s.len < 0 ? -1 : s.len, compact, false);
    if (s.len > 0) gr_wr_raw(wr, s.ptr, (size_t)s.len);
}

void gr_wr_bytes(struct gr_wr *wr, struct gr_bytes b, bool compact)
{
    wr_len(wr, b.len < 0 ? -1 : b.len, compact, true);
    if (b.len > 0) gr_wr_raw(wr, b.ptr, (size_t)b.len);
}

/* Cuts the memory written since the last cut into a chunk (none when empty). */
static void chunks_cut(struct gr_wr *wr)
{
    struct gr_chunks *c = wr->chunks;
    if (wr->p == c->mark) return;
    assert(c->count < c->cap && "chunk list smaller than 2 * file ranges + 1");
    c->items[c->count++] = (struct gr_chunk){c->mark, (size_t)(wr->p - c->mark), -1, 0};
    c->mark = wr->p;
}

void gr_wr_records(struct gr_wr *wr, struct gr_records r, bool compact)
{
    if (r.kind == GR_RECORDS_MEM) {
        gr_wr_bytes(wr, r.mem, compact);
        return;
    }
    assert(r.kind == GR_RECORDS_FILE && r.file.bytes >= 0);
    wr_len(wr, r.file.bytes, compact, true);
    if (r.file.bytes == 0) return;
    assert(wr->chunks && "a file-kind records field needs a chunk list (gr_wr_chunks_begin)");
    chunks_cut(wr);
    struct gr_chunks *c = wr->chunks;
    assert(c->count < c->cap && "chunk list smaller than 2 * file ranges + 1");
    c->items[c->count++] = (struct gr_chunk){NULL, (size_t)r.file.bytes, r.file.fd, r.file.pos};
}

void gr_wr_chunks_begin(struct gr_wr *wr, struct gr_chunks *chunks, struct gr_chunk *items, int cap)
{
    *chunks = (struct gr_chunks){items, 0, cap, wr->p};
    wr->chunks = chunks;
}

int gr_wr_chunks_end(struct gr_wr *wr)
{
    assert(wr->chunks);
    chunks_cut(wr);
    int n = wr->chunks->count;
    wr->chunks = NULL;
    return n;
}

void gr_wr_array_len(struct gr_wr *wr, int32_t count, bool compact)
{
    wr_len(wr, count < 0 ? -1 : count, compact, true);
}

size_t gr_sz_uvarint(uint32_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t gr_sz_varint(int32_t v)
{
    return gr_sz_uvarint(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

size_t gr_sz_varlong(int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

size_t gr_sz_string(struct gr_str s, bool compact)
{
    size_t body = s.len > 0 ? (size_t)s.len : 0;
    return (compact ? gr_sz_uvarint((uint32_t)((s.len < 0 ? -1 : s.len) + 1)) : 2) + body;
}

size_t gr_sz_bytes(struct gr_bytes b, bool compact)
{
    size_t body = b.len > 0 ? (size_t)b.len : 0;
    return (compact ? gr_sz_uvarint((uint32_t)((b.len < 0 ? -1 : b.len) + 1)) : 4) + body;
}

size_t gr_sz_records(struct gr_records r, bool compact)
{
    return gr_sz_bytes((struct gr_bytes){NULL, gr_records_len(r)}, compact);
}

size_t gr_sz_array_len(int32_t count, bool compact)
{
    return compact ? gr_sz_uvarint((uint32_t)((count < 0 ? -1 : count) + 1)) : 4;
}

size_t gr_sz_unknown_tags(const struct gr_tags *t)
{
    size_t n = 0;
    for (int32_t i = 0; i < t->count; i++)
        n += gr_sz_uvarint(t->items[i].tag) + gr_sz_uvarint((uint32_t)t->items[i].data.len) +
             (size_t)t->items[i].data.len;
    return n;
}
