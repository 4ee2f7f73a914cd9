/*
 * wire.h: Kafka's byte-level primitives, hand-written once. A reader (struct gr_rd) walks a bounded byte
 * range with a sticky error: every read is bounds-checked, a failed read returns 0/empty and sets `err`,
 * and later reads do nothing, so decoders check once per struct. A writer (struct gr_wr) fills a buffer
 * whose size the caller computed with the matching size functions; overrunning it is a programmer error
 * (assert). Strings, bytes and records decoded from a frame are views into it, never copies.
 *
 * Encodings (Kafka protocol guide, KIP-482 for the compact/flexible forms):
 *   int8..int64, uint16, uint32, float64  big-endian fixed width
 *   varint / varlong                       zig-zag, 7 bits per byte, at most 5 / 10 bytes
 *   unsigned varint                        7 bits per byte, at most 5 bytes
 *   string / bytes                         int16 / int32 length, -1 = null
 *   compact string / bytes                 unsigned varint length + 1, 0 = null
 *   array / compact array                  int32 count (-1 null) / unsigned varint count + 1 (0 null)
 *   tagged fields                          uvarint count, then (uvarint tag, uvarint size, bytes), tags
 * ascending Read next: protocol/gen/messages.h (generated), protocol/header.h.
 */
#ifndef GR_WIRE_H
#define GR_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/arena.h"

/* Decode errors (the sticky `err` of a reader). Peer errors, never asserts. */
enum gr_wire_err {
    GR_WIRE_OK = 0,
    GR_WIRE_SHORT = 1,      /* read past the end of the range */
    GR_WIRE_BAD_VARINT = 2, /* varint longer than its maximum */
    GR_WIRE_BAD_LENGTH = 3, /* negative length where null is not allowed, or length beyond the range */
    GR_WIRE_BAD_TAGS = 4,   /* tags not ascending and unique, or too many */
    GR_WIRE_NO_MEMORY = 5,  /* arena ceiling reached */
    GR_WIRE_NULL = 6,       /* null in a field that is not nullable at this version */
};

/* A string view; len -1 means null. Not NUL-terminated. */
struct gr_str {
    const char *ptr;
    int32_t len;
};
/* A bytes view; len -1 means null. */
struct gr_bytes {
    const uint8_t *ptr;
    int32_t len;
};
struct gr_uuid {
    uint8_t b[16];
};
/* One unknown tagged field, kept so that it survives a decode/encode round trip. */
struct gr_tag {
    uint32_t tag;
    struct gr_bytes data;
};
struct gr_tags {
    struct gr_tag *items;
    int32_t count;
};
/* Arrays of primitives; count -1 means null. */
struct gr_int32_array {
    int32_t *items;
    int32_t count;
};
struct gr_int64_array {
    int64_t *items;
    int32_t count;
};
struct gr_str_array {
    struct gr_str *items;
    int32_t count;
};

#define GR_STR_NULL ((struct gr_str){NULL, -1})
#define GR_BYTES_NULL ((struct gr_bytes){NULL, -1})
/* A string view of a C string literal or NUL-terminated buffer (borrows it). */
static inline struct gr_str gr_str_c(const char *s)
{
    return (struct gr_str){s, s ? (int32_t)strlen(s) : -1};
}
/* True when both views are non-null and hold the same bytes. */
static inline bool gr_str_eq(struct gr_str a, struct gr_str b)
{
    return a.len >= 0 && a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0);
}
/* True when the view equals the NUL-terminated string `s`. */
static inline bool gr_str_eq_c(struct gr_str a, const char *s)
{
    return gr_str_eq(a, gr_str_c(s));
}

struct gr_rd {
    const uint8_t *p;       /* next byte */
    const uint8_t *end;     /* one past the last byte */
    int err;                /* enum gr_wire_err, sticky */
    struct gr_arena *arena; /* where arrays are allocated (borrowed) */
};

struct gr_wr_ext;

struct gr_wr {
    uint8_t *p;
    uint8_t *end;
    struct gr_wr_ext *ext; /* optional: takes bytes fields that are not in memory (zero-copy fetch) */
};

/* A hook for bytes/records fields whose data is not in memory (a file range sent with sendfile). When
 * gr_wr_bytes meets a non-empty field it first offers the pointer to `take`; if `take` returns true it
 * has recorded the range itself and the writer does not copy anything (the length prefix is written). */
struct gr_wr_ext {
    bool (*take)(struct gr_wr_ext *ext, struct gr_wr *wr, const uint8_t *ptr, size_t len);
};

/* Starts a reader over [p, p+len) allocating arrays from `arena` (borrowed). */
static inline void gr_rd_init(struct gr_rd *rd, const void *p, size_t len, struct gr_arena *arena)
{
    rd->p = p;
    rd->end = rd->p + len;
    rd->err = 0;
    rd->arena = arena;
}
/* Bytes left to read. */
static inline size_t gr_rd_left(const struct gr_rd *rd)
{
    return (size_t)(rd->end - rd->p);
}
/* Sets the sticky error (first error wins). */
static inline void gr_rd_fail(struct gr_rd *rd, int err)
{
    if (!rd->err) rd->err = err;
    rd->p = rd->end;
}

/* Starts a writer over [p, p+len). */
static inline void gr_wr_init(struct gr_wr *wr, void *p, size_t len)
{
    wr->p = p;
    wr->end = wr->p + len;
    wr->ext = NULL;
}

/* Fixed-width reads: return the value, or 0 with the error set. */
int8_t gr_rd_int8(struct gr_rd *rd);
int16_t gr_rd_int16(struct gr_rd *rd);
uint16_t gr_rd_uint16(struct gr_rd *rd);
int32_t gr_rd_int32(struct gr_rd *rd);
uint32_t gr_rd_uint32(struct gr_rd *rd);
int64_t gr_rd_int64(struct gr_rd *rd);
double gr_rd_float64(struct gr_rd *rd);
bool gr_rd_bool(struct gr_rd *rd);
struct gr_uuid gr_rd_uuid(struct gr_rd *rd);
/* Variable-length integers (zig-zag for the signed forms). Overlong encodings set GR_WIRE_BAD_VARINT. */
uint32_t gr_rd_uvarint(struct gr_rd *rd);
int32_t gr_rd_varint(struct gr_rd *rd);
int64_t gr_rd_varlong(struct gr_rd *rd);
/* Strings and bytes as views. `compact` selects the KIP-482 form; `nullable` allows null (len -1),
 * otherwise null sets GR_WIRE_NULL. */
struct gr_str gr_rd_string(struct gr_rd *rd, bool compact, bool nullable);
struct gr_bytes gr_rd_bytes(struct gr_rd *rd, bool compact, bool nullable);
/* Reads an array count (-1 = null if nullable) and checks that count * `elem_bytes_min` fits in the
 * bytes left, so no allocation is made for elements that cannot be there. */
int32_t gr_rd_array_len(struct gr_rd *rd, bool compact, bool nullable, size_t elem_bytes_min);
/* Skips `n` bytes. */
void gr_rd_skip(struct gr_rd *rd, size_t n);
/* Reads a tagged-field section header: returns the number of fields (bounded by GR_TAGGED_FIELDS_MAX). */
uint32_t gr_rd_tag_count(struct gr_rd *rd);
/* Allocates `n` * `size` zeroed bytes from the reader's arena, or sets GR_WIRE_NO_MEMORY. */
void *gr_rd_alloc(struct gr_rd *rd, size_t n, size_t size);

/* Writes; the caller sized the buffer, so running out is a programmer error (assert). */
void gr_wr_int8(struct gr_wr *wr, int8_t v);
void gr_wr_int16(struct gr_wr *wr, int16_t v);
void gr_wr_uint16(struct gr_wr *wr, uint16_t v);
void gr_wr_int32(struct gr_wr *wr, int32_t v);
void gr_wr_uint32(struct gr_wr *wr, uint32_t v);
void gr_wr_int64(struct gr_wr *wr, int64_t v);
void gr_wr_float64(struct gr_wr *wr, double v);
void gr_wr_bool(struct gr_wr *wr, bool v);
void gr_wr_uuid(struct gr_wr *wr, struct gr_uuid v);
void gr_wr_uvarint(struct gr_wr *wr, uint32_t v);
void gr_wr_varint(struct gr_wr *wr, int32_t v);
void gr_wr_varlong(struct gr_wr *wr, int64_t v);
void gr_wr_raw(struct gr_wr *wr, const void *p, size_t n);
void gr_wr_string(struct gr_wr *wr, struct gr_str s, bool compact);
void gr_wr_bytes(struct gr_wr *wr, struct gr_bytes b, bool compact);
/* Writes an array count (-1 for null), in the compact or classic form. */
void gr_wr_array_len(struct gr_wr *wr, int32_t count, bool compact);

/* Sizes in bytes of the encodings above. */
size_t gr_sz_uvarint(uint32_t v);
size_t gr_sz_varint(int32_t v);
size_t gr_sz_varlong(int64_t v);
size_t gr_sz_string(struct gr_str s, bool compact);
size_t gr_sz_bytes(struct gr_bytes b, bool compact);
size_t gr_sz_array_len(int32_t count, bool compact);

/* Unknown tagged fields: size and write of a list kept from decoding (already sorted by tag). */
size_t gr_sz_unknown_tags(const struct gr_tags *t);

#endif
