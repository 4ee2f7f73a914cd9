/*
 * wire.h: Kafka's byte-level primitives, hand-written once. A reader (struct gr_rd) walks a bounded byte
 * range with a sticky error: every read is bounds-checked, a failed read returns 0/empty and sets `err`,
 * and later reads do nothing, so decoders check once per struct. A writer (struct gr_wr) fills a buffer
 * whose size the caller computed with the matching size functions; overrunning it is a programmer error
 * (assert). Strings, bytes and records decoded from a frame are views into it, never copies. A records
 * field to encode may instead name a range of an open file (struct gr_records, file kind): the writer
 * writes its length prefix and appends the range to its chunk list (struct gr_chunks), so a message
 * leaves as memory chunks and file ranges in wire order (zero-copy Fetch: writev plus sendfile).
 *
 * Encodings (Kafka protocol guide, KIP-482 for the compact/flexible forms):
 *   int8..int64, uint16, uint32, float64  big-endian fixed width
 *   varint / varlong                       zig-zag, 7 bits per byte, at most 5 / 10 bytes
 *   unsigned varint                        7 bits per byte, at most 5 bytes
 *   string / bytes                         int16 / int32 length, -1 = null
 *   records                                as bytes (memory or a file range)
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

/* A range of an open file: the content of a records field sent with sendfile. protocol/ never reads it;
 * whoever fills it keeps the descriptor open until the bytes are sent (the server: the request's slices). */
struct gr_file_range {
    int fd;
    int64_t pos;   /* offset of the first byte in the file */
    int32_t bytes; /* at least 0 */
};

/* A records field (Kafka's "records" type): bytes in memory, or a file range. Decoding always gives the
 * memory kind, a view into the frame (len -1 = null). The file kind is never null; size() counts its bytes
 * and encode() writes its length prefix, then hands the range to the writer's chunk list. */
enum gr_records_kind { GR_RECORDS_MEM = 0, GR_RECORDS_FILE = 1 };
struct gr_records {
    enum gr_records_kind kind;
    union {
        struct gr_bytes mem;       /* GR_RECORDS_MEM */
        struct gr_file_range file; /* GR_RECORDS_FILE */
    };
};

#define GR_RECORDS_NULL ((struct gr_records){.kind = GR_RECORDS_MEM, .mem = {NULL, -1}})
/* A memory-kind records value viewing `b` (borrows it; len -1 = null). */
static inline struct gr_records gr_records_mem(struct gr_bytes b)
{
    return (struct gr_records){.kind = GR_RECORDS_MEM, .mem = b};
}
/* A file-kind records value: `bytes` bytes of descriptor `fd` from `pos` (borrows the descriptor). */
static inline struct gr_records gr_records_file(int fd, int64_t pos, int32_t bytes)
{
    return (struct gr_records){.kind = GR_RECORDS_FILE, .file = {fd, pos, bytes}};
}
/* Length of the records on the wire, -1 for null. */
static inline int32_t gr_records_len(struct gr_records r)
{
    return r.kind == GR_RECORDS_FILE ? r.file.bytes : r.mem.len;
}

/* One piece of an encoded message: written memory, or a file range (mem NULL) sent with sendfile. */
struct gr_chunk {
    const uint8_t *mem; /* NULL for a file range */
    size_t len;
    int fd;
    int64_t file_pos;
};

/* The output sink of an encoding that may meet file-kind records: the writer cuts its memory into chunks
 * around each file range, so the message goes out as memory, file range, memory, ... in wire order. An
 * encoding with R file ranges needs room for 2 * R + 1 chunks (the generated *_file_bytes() counts R). */
struct gr_chunks {
    struct gr_chunk *items; /* room for `cap` chunks (borrowed) */
    int count;
    int cap;
    const uint8_t *mark; /* first written byte not yet in a chunk */
};

struct gr_wr {
    uint8_t *p;
    uint8_t *end;
    struct gr_chunks *chunks; /* NULL: a file-kind records field is a programmer error */
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
    wr->chunks = NULL;
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
/* A records field: the memory kind viewing the frame, read as bytes. */
struct gr_records gr_rd_records(struct gr_rd *rd, bool compact, bool nullable);
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
/* Writes a records field: the length prefix (bytes form), then the memory bytes, or for the file kind
 * the range as a chunk of wr->chunks (which must be attached and have room for two more chunks). */
void gr_wr_records(struct gr_wr *wr, struct gr_records r, bool compact);
/* Attaches `chunks` to `wr` with room for `cap` chunks in `items`; memory chunks start at wr->p. */
void gr_wr_chunks_begin(struct gr_wr *wr, struct gr_chunks *chunks, struct gr_chunk *items, int cap);
/* Closes the last memory chunk of an attached chunk list (the bytes written since the last file range) and
 * detaches it; returns the number of chunks. */
int gr_wr_chunks_end(struct gr_wr *wr);
/* Writes an array count (-1 for null), in the compact or classic form. */
void gr_wr_array_len(struct gr_wr *wr, int32_t count, bool compact);

/* Sizes in bytes of the encodings above. */
size_t gr_sz_uvarint(uint32_t v);
size_t gr_sz_varint(int32_t v);
size_t gr_sz_varlong(int64_t v);
size_t gr_sz_string(struct gr_str s, bool compact);
size_t gr_sz_bytes(struct gr_bytes b, bool compact);
/* Wire bytes of a records field, prefix included, file-kind bytes included. */
size_t gr_sz_records(struct gr_records r, bool compact);
size_t gr_sz_array_len(int32_t count, bool compact);

/* Unknown tagged fields: size and write of a list kept from decoding (already sorted by tag). */
size_t gr_sz_unknown_tags(const struct gr_tags *t);

#endif
