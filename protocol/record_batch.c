/*
 * record_batch.c: RecordBatch v2 validation (in place, in Kafka's order), splitting of concatenated
 * batches, a record iterator, and a builder. The header layout is in record_batch.h.
 *
 * Record layout inside the records section (after decompression when the codec is not 0), Kafka
 * DefaultRecord; "varint" is zig-zag, at most 5 bytes, "varlong" at most 10:
 *   FIELD              ENCODING  MEANING
 *   length             varint    bytes of the fields below
 *   attributes         int8      unused (0)
 *   timestamp delta    varlong   ms after the batch's base timestamp
 *   offset delta       varint    offset after the batch's base offset
 *   key length, key    varint    -1 = null key, then that many bytes
 *   value length, value varint   -1 = null value, then that many bytes
 *   header count       varint    >= 0
 *   headers            -         per header: key length varint (>= 0) + key, value length varint
 *                                (-1 = null) + value
 *
 * All record reading goes through a `struct gr_records_src`: for an uncompressed batch it is the batch's
 * own bytes (no copy, no allocation); for a compressed one a window that a streaming decompressor fills.
 * A record that fits in the window is parsed in place; a bigger one (validation keeps a fixed 64 KiB
 * window) is parsed field by field while its key, value and header bytes are skipped as they stream by,
 * so validation memory is constant whatever the record sizes. The iterator instead grows its window to
 * the largest record, since it hands out views. Read next: protocol/compress.c, storage/.
 */
#include "protocol/record_batch.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "protocol/compress.h"
#include "protocol/crc32c.h"

/* Smallest batch length field: the 61-byte header minus base offset and batch length. */
#define BATCH_LENGTH_MIN (GR_BATCH_HEADER_BYTES - GR_BATCH_LOG_OVERHEAD)
/* Smallest record: length, attributes, timestamp delta, offset delta, key length, value length and
 * header count, one byte each. */
#define RECORD_BYTES_MIN 7
/* Window through which validation reads decompressed records (per thread, allocated once). */
#define VALIDATE_WINDOW_BYTES (64 * 1024)
/* First window of an iterator over a compressed batch; it grows to the largest record. */
#define ITER_WINDOW_BYTES (64 * 1024)

int16_t gr_batch_err_kafka(int err)
{
    switch (err) {
    case GR_BATCH_OK:
        return 0;
    case GR_BATCH_ERR_LENGTH:
    case GR_BATCH_ERR_CRC:
    case GR_BATCH_ERR_DECOMPRESS:
        return 2; /* CORRUPT_MESSAGE */
    case GR_BATCH_ERR_CODEC:
        return 76; /* UNSUPPORTED_COMPRESSION_TYPE */
    case GR_BATCH_ERR_TOO_LARGE:
        return 10; /* MESSAGE_TOO_LARGE */
    case GR_BATCH_ERR_NO_MEMORY:
        return -1; /* UNKNOWN_SERVER_ERROR */
    case GR_BATCH_ERR_TIMESTAMP:
    case GR_BATCH_ERR_TIMESTAMP_TYPE:
        return 32; /* INVALID_TIMESTAMP */
    case GR_BATCH_ERR_RECORD_KEY:
    case GR_BATCH_ERR_TRUNCATED:
    case GR_BATCH_ERR_EXTRA_BYTES:
    case GR_BATCH_ERR_MAGIC:
    case GR_BATCH_ERR_OFFSETS:
    case GR_BATCH_ERR_CONTROL:
    case GR_BATCH_ERR_SEQUENCE:
    case GR_BATCH_ERR_RECORD:
    case GR_BATCH_ERR_COUNT:
    case GR_BATCH_ERR_TRAILING:
        return 87; /* INVALID_RECORD */
    }
    assert(!"unknown gr_batch_err");
    return -1;
}

/* ---- varints ---- */

/* Decodes an unsigned little-endian base-128 number of at most `bytes_max` bytes from the `avail` bytes
 * at p. Returns the bytes used, 0 when it does not end within them. Bits above 64 (or above 32 for a
 * varint's 5th byte, once truncated) are dropped, as Kafka's ByteUtils does. */
static inline size_t dec_uvarint(const uint8_t *p, size_t avail, int bytes_max, uint64_t *out)
{
    uint64_t v = 0;
    size_t n = avail < (size_t)bytes_max ? avail : (size_t)bytes_max;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

static inline int32_t unzigzag32(uint64_t raw)
{
    uint32_t u = (uint32_t)raw;
    return (int32_t)(u >> 1) ^ -(int32_t)(u & 1);
}

static inline int64_t unzigzag64(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}
static inline uint32_t zigzag32(int32_t v)
{
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}
static inline uint64_t zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline size_t sz_uvarint(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_uvarint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* ---- record source ---- */

static int compress_err_to_batch(int r)
{
    switch (r) {
    case GR_COMPRESS_ERR_TOO_LARGE:
        return GR_BATCH_ERR_TOO_LARGE;
    case GR_COMPRESS_ERR_NO_MEMORY:
        return GR_BATCH_ERR_NO_MEMORY;
    default:
        return GR_BATCH_ERR_DECOMPRESS;
    }
}

/* Default reason for an error found below the record level. */
static const char *err_why(int err)
{
    switch (err) {
    case GR_BATCH_ERR_TOO_LARGE:
        return "decompressed records exceed the decompressed batch size limit";
    case GR_BATCH_ERR_NO_MEMORY:
        return "out of memory while decompressing";
    case GR_BATCH_ERR_DECOMPRESS:
        return "compressed records are corrupt, truncated, or in a form Kafka refuses";
    default:
        return "malformed record";
    }
}

/* Grows the window (owned by the src's user) to hold at least `need` bytes, up to cap_max. */
static int src_grow(struct gr_records_src *s, size_t need)
{
    size_t have = (size_t)(s->end - s->p);
    size_t cap = s->cap;
    while (cap < need && cap < s->cap_max)
        cap = cap > s->cap_max / 2 ? s->cap_max : cap * 2;
    if (cap == s->cap) return 0;
    memmove(s->buf, s->p, have);
    uint8_t *nb = realloc(s->buf, cap);
    if (!nb) return GR_BATCH_ERR_NO_MEMORY;
    s->buf = nb;
    s->cap = cap;
    s->p = nb;
    s->end = nb + have;
    return 0;
}

/* Makes `need` bytes available at s->p when the stream still has them (fewer only at its end, or when
 * the window cannot grow that far). Returns the bytes available, or a negative gr_batch_err. */
static int64_t src_fill(struct gr_records_src *s, size_t need)
{
    size_t have = (size_t)(s->end - s->p);
    if (have >= need || s->eof) return (int64_t)have;
    if (need > s->cap) {
        if (s->cap_max > s->cap) {
            int r = src_grow(s, need);
            if (r) return r;
        }
        if (need > s->cap) need = s->cap;
    }
    if (s->p != s->buf) {
        memmove(s->buf, s->p, have);
        s->p = s->buf;
        s->end = s->buf + have;
    }
    while (have < need) {
        size_t got;
        int r = gr_dstream_read(s->ds, s->buf + have, s->cap - have, &got);
        if (r) return compress_err_to_batch(r);
        if (!got) {
            s->eof = true;
            break;
        }
        have += got;
        s->end = s->buf + have;
    }
    return (int64_t)have;
}

/* Consumes `n` bytes, reading through the decompressor as needed. */
static int src_skip(struct gr_records_src *s, uint64_t n)
{
    while (n) {
        size_t have = (size_t)(s->end - s->p);
        if (!have) {
            int64_t r = src_fill(s, 1);
            if (r < 0) return (int)r;
            if (r == 0) return GR_BATCH_ERR_RECORD;
            have = (size_t)r;
        }
        size_t take = (uint64_t)have < n ? have : (size_t)n;
        s->p += take;
        n -= take;
    }
    return 0;
}

/* ---- one record ---- */

struct rec_fields {
    int8_t attributes;
    int64_t timestamp_delta;
    int32_t offset_delta;
    int32_t key_len; /* < 0: null */
    int32_t value_len;
    int32_t header_count;
    const uint8_t *key; /* views, set only when the whole record was in memory */
    const uint8_t *value;
    const uint8_t *headers;
    size_t headers_bytes;
};

/* Reads through one record larger than the window (the slow path): `left` bytes of it remain. Views are
 * never set: the bytes stream past. */
struct rec_cursor {
    struct gr_records_src *s;
    uint64_t left;
    const char *why;
};

static int cur_fail(struct rec_cursor *c, const char *why)
{
    c->why = why;
    return GR_BATCH_ERR_RECORD;
}

static int cur_uvarint(struct rec_cursor *c, int bytes_max, uint64_t *v)
{
    size_t want = c->left < (uint64_t)bytes_max ? (size_t)c->left : (size_t)bytes_max;
    size_t have = (size_t)(c->s->end - c->s->p);
    if (have < want) {
        int64_t r = src_fill(c->s, want);
        if (r < 0) return (int)r;
        have = (size_t)r;
    }
    size_t k = dec_uvarint(c->s->p, have < want ? have : want, bytes_max, v);
    if (!k) return cur_fail(c, "record field varint overruns the record or is too long");
    c->s->p += k;
    c->left -= k;
    return 0;
}

static int cur_u8(struct rec_cursor *c, uint8_t *v)
{
    if (!c->left) return cur_fail(c, "record too short for its attributes");
    if (c->s->p == c->s->end) {
        int64_t r = src_fill(c->s, 1);
        if (r < 0) return (int)r;
        if (r == 0) return cur_fail(c, "records end inside a record");
    }
    *v = *c->s->p++;
    c->left--;
    return 0;
}

static int cur_varint(struct rec_cursor *c, int32_t *v)
{
    uint64_t raw = 0;
    int r = cur_uvarint(c, GR_VARINT_BYTES_MAX, &raw);
    *v = unzigzag32(raw);
    return r;
}

/* Consumes `len` bytes of key/value/header data (none when len < 0, i.e. null). */
static int cur_bytes(struct rec_cursor *c, int32_t len, const uint8_t **view)
{
    *view = NULL;
    if (len < 0) return 0;
    if ((uint64_t)len > c->left) return cur_fail(c, "key, value or header longer than its record");
    int r = src_skip(c->s, (uint64_t)len);
    if (r) return r;
    c->left -= (uint64_t)len;
    return 0;
}

static int cur_headers(struct rec_cursor *c, int32_t count)
{
    for (int32_t i = 0; i < count; i++) {
        int32_t len;
        const uint8_t *view;
        int r = cur_varint(c, &len);
        if (r) return r;
        if (len < 0) return cur_fail(c, "negative header key length");
        if ((r = cur_bytes(c, len, &view))) return r;
        if ((r = cur_varint(c, &len))) return r;
        if ((r = cur_bytes(c, len, &view))) return r;
    }
    return 0;
}

static int cur_body(struct rec_cursor *c, struct rec_fields *f)
{
    uint64_t raw;
    int r;
    if ((r = cur_u8(c, (uint8_t *)&f->attributes))) return r;
    if ((r = cur_uvarint(c, GR_VARLONG_BYTES_MAX, &raw))) return r;
    f->timestamp_delta = unzigzag64(raw);
    if ((r = cur_varint(c, &f->offset_delta))) return r;
    if ((r = cur_varint(c, &f->key_len))) return r;
    if ((r = cur_bytes(c, f->key_len, &f->key))) return r;
    if ((r = cur_varint(c, &f->value_len))) return r;
    if ((r = cur_bytes(c, f->value_len, &f->value))) return r;
    if ((r = cur_varint(c, &f->header_count))) return r;
    if (f->header_count < 0) return cur_fail(c, "negative header count");
    if ((uint64_t)f->header_count * 2 > c->left) return cur_fail(c, "more headers than the record can hold");
    f->headers = NULL;
    f->headers_bytes = 0;
    if ((r = cur_headers(c, f->header_count))) return r;
    if (c->left) return cur_fail(c, "record length larger than its fields");
    return 0;
}

/* Decodes a varint at *pp within [*pp, end), one-byte values without a loop. */
static inline bool mem_uvarint(const uint8_t **pp, const uint8_t *end, int bytes_max, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (p < end && !(*p & 0x80)) {
        *v = *p;
        *pp = p + 1;
        return true;
    }
    size_t k = dec_uvarint(p, (size_t)(end - p), bytes_max, v);
    *pp = p + k;
    return k != 0;
}

/* Parses a record body lying whole in [p, end) (the fast path: every uncompressed record, and every
 * decompressed one that fits the window). Same checks as cur_body; returns 0 or GR_BATCH_ERR_RECORD. */
static int parse_mem(const uint8_t *p, const uint8_t *end, struct rec_fields *f, const char **why)
{
    uint64_t raw;
    int32_t n;
#define MEM_FAIL(reason)                                                                                     \
    do {                                                                                                     \
        *why = (reason);                                                                                     \
        return GR_BATCH_ERR_RECORD;                                                                          \
    } while (0)
#define MEM_VARINT(dst, max, conv)                                                                           \
    do {                                                                                                     \
        if (!mem_uvarint(&p, end, (max), &raw))                                                              \
            MEM_FAIL("record field varint overruns the record or is too long");                              \
        (dst) = conv(raw);                                                                                   \
    } while (0)
#define MEM_BYTES(len, view)                                                                                 \
    do {                                                                                                     \
        (view) = NULL;                                                                                       \
        if ((len) >= 0) {                                                                                    \
            if ((size_t)(len) > (size_t)(end - p)) MEM_FAIL("key, value or header longer than its record");  \
            (view) = p;                                                                                      \
            p += (len);                                                                                      \
        }                                                                                                    \
    } while (0)
    if (p == end) MEM_FAIL("record too short for its attributes");
    f->attributes = (int8_t)*p++;
    MEM_VARINT(f->timestamp_delta, GR_VARLONG_BYTES_MAX, unzigzag64);
    MEM_VARINT(f->offset_delta, GR_VARINT_BYTES_MAX, unzigzag32);
    MEM_VARINT(f->key_len, GR_VARINT_BYTES_MAX, unzigzag32);
    MEM_BYTES(f->key_len, f->key);
    MEM_VARINT(f->value_len, GR_VARINT_BYTES_MAX, unzigzag32);
    MEM_BYTES(f->value_len, f->value);
    MEM_VARINT(f->header_count, GR_VARINT_BYTES_MAX, unzigzag32);
    if (f->header_count < 0) MEM_FAIL("negative header count");
    if ((uint64_t)f->header_count * 2 > (uint64_t)(end - p))
        MEM_FAIL("more headers than the record can hold");
    f->headers = p;
    for (int32_t i = 0; i < f->header_count; i++) {
        const uint8_t *view;
        MEM_VARINT(n, GR_VARINT_BYTES_MAX, unzigzag32);
        if (n < 0) MEM_FAIL("negative header key length");
        MEM_BYTES(n, view);
        MEM_VARINT(n, GR_VARINT_BYTES_MAX, unzigzag32);
        MEM_BYTES(n, view);
        (void)view;
    }
    f->headers_bytes = (size_t)(p - f->headers);
    if (p != end) MEM_FAIL("record length larger than its fields");
    return 0;
#undef MEM_BYTES
#undef MEM_VARINT
#undef MEM_FAIL
}

/* Reads the next record. Returns 1 with *f filled, 0 at the clean end of the records, or a negative
 * gr_batch_err with *why set. `need_views`: the whole record must be in memory (the window grows). */
static int read_record(struct gr_records_src *s, struct rec_fields *f, bool need_views, const char **why)
{
    size_t have = (size_t)(s->end - s->p);
    if (have < GR_VARINT_BYTES_MAX && !s->eof) {
        int64_t r = src_fill(s, GR_VARINT_BYTES_MAX);
        if (r < 0) {
            *why = err_why((int)r);
            return (int)r;
        }
        have = (size_t)r;
    }
    if (!have) return 0;
    const uint8_t *p = s->p;
    uint64_t raw;
    if (!mem_uvarint(&p, s->end, GR_VARINT_BYTES_MAX, &raw) || unzigzag32(raw) < 0) {
        *why = "bad record length";
        return GR_BATCH_ERR_RECORD;
    }
    int32_t len = unzigzag32(raw);
    if (len > s->record_len_max) s->record_len_max = len;
    s->p = p;
    have = (size_t)(s->end - p);
    if (have < (size_t)len && !s->eof) {
        if ((uint64_t)len > GR_DECOMPRESSED_BATCH_BYTES_MAX) {
            *why = err_why(GR_BATCH_ERR_TOO_LARGE); /* refused before any window grows towards it */
            return GR_BATCH_ERR_TOO_LARGE;
        }
        int64_t r = src_fill(s, (size_t)len);
        if (r < 0) {
            *why = err_why((int)r);
            return (int)r;
        }
        have = (size_t)r;
    }
    if (have >= (size_t)len) {
        int r = parse_mem(s->p, s->p + len, f, why);
        s->p += len;
        return r ? r : 1;
    }
    if (s->eof || need_views) {
        bool bomb = !s->eof;
        *why = bomb ? err_why(GR_BATCH_ERR_TOO_LARGE) : "record length runs past the end of the records";
        return bomb ? GR_BATCH_ERR_TOO_LARGE : GR_BATCH_ERR_RECORD;
    }
    /* Bigger than the window: parse while streaming, skipping key, value and header bytes. */
    struct rec_cursor c = {s, (uint64_t)len, NULL};
    int r = cur_body(&c, f);
    if (r) {
        *why = c.why ? c.why : err_why(r);
        return r;
    }
    return 1;
}

/* ---- validation ---- */

#define FAIL(err, reason)                                                                                    \
    do {                                                                                                     \
        if (why) *why = (reason);                                                                            \
        return (err);                                                                                        \
    } while (0)

/* Framing shared by validation and iteration: 17 bytes, magic 2, length >= 49, length == len - 12. */
static int check_framing(const uint8_t *p, size_t len, const char **why)
{
    if (len < GR_BATCH_OFF_MAGIC + 1) FAIL(GR_BATCH_ERR_TRUNCATED, "fewer than 17 bytes: no batch header");
    if (p[GR_BATCH_OFF_MAGIC] != 2)
        FAIL(GR_BATCH_ERR_MAGIC, "magic is not 2: only RecordBatch v2 is accepted");
    int32_t blen = gr_batch_length(p);
    if (blen < BATCH_LENGTH_MIN) FAIL(GR_BATCH_ERR_LENGTH, "batch length below the v2 minimum of 49");
    uint64_t total = GR_BATCH_LOG_OVERHEAD + (uint64_t)blen;
    if (total > len) FAIL(GR_BATCH_ERR_TRUNCATED, "batch length claims more bytes than there are");
    if (total < len) FAIL(GR_BATCH_ERR_EXTRA_BYTES, "bytes after the batch: exactly one batch is allowed");
    return 0;
}

static void read_info(const uint8_t *p, struct gr_batch_info *info)
{
    info->base_offset = gr_batch_base_offset(p);
    info->batch_length = gr_batch_length(p);
    info->partition_leader_epoch = gr_batch_leader_epoch(p);
    info->attributes = gr_batch_attributes(p);
    info->codec = (enum gr_codec)(info->attributes & GR_BATCH_ATTR_CODEC_MASK);
    info->last_offset_delta = gr_batch_last_offset_delta(p);
    info->base_timestamp = gr_batch_base_timestamp(p);
    info->max_timestamp = gr_batch_max_timestamp(p);
    info->producer_id = gr_batch_producer_id(p);
    info->producer_epoch = gr_batch_producer_epoch(p);
    info->base_sequence = gr_batch_base_sequence(p);
    info->record_count = gr_batch_record_count(p);
    info->records_max_timestamp = -1;
    info->records_max_timestamp_offset_delta = -1;
    info->records_min_timestamp = -1;
    info->has_null_key = false;
    info->records_bytes = 0;
    info->records_body_bytes_max = 0;
}

/* The batch-level rules of Kafka's LogValidator.validateBatch, before any record is read. */
static int check_counts(const struct gr_batch_info *info, unsigned flags, const char **why)
{
    int64_t count = info->record_count, lod = info->last_offset_delta;
    if (flags & GR_BATCH_CHECK_CLIENT) {
        if (lod < 0) FAIL(GR_BATCH_ERR_OFFSETS, "negative last offset delta");
        if (count <= 0) FAIL(GR_BATCH_ERR_OFFSETS, "record count must be at least 1");
        if (lod != count - 1) FAIL(GR_BATCH_ERR_OFFSETS, "last offset delta is not record count - 1");
        if (info->attributes & GR_BATCH_ATTR_CONTROL)
            FAIL(GR_BATCH_ERR_CONTROL, "clients may not write control batches");
        if (info->producer_id >= 0 && info->base_sequence < 0)
            FAIL(GR_BATCH_ERR_SEQUENCE, "negative base sequence with a producer id");
    } else {
        if (count < 0) FAIL(GR_BATCH_ERR_OFFSETS, "negative record count");
        if (lod < count - 1) FAIL(GR_BATCH_ERR_OFFSETS, "last offset delta below record count - 1");
    }
    return 0;
}

static int scan_records(struct gr_records_src *s, unsigned flags, struct gr_batch_info *info,
                        const char **why)
{
    int64_t max_ts = -1, min_ts = -1;
    int32_t max_ts_delta = -1, prev_delta = -1;
    bool null_key = false, client = flags & GR_BATCH_CHECK_CLIENT;
    const char *reason = NULL;
    for (int32_t i = 0; i < info->record_count; i++) {
        struct rec_fields f;
        int r = read_record(s, &f, false, &reason);
        info->records_body_bytes_max = s->record_len_max;
        if (r < 0) FAIL(r, reason);
        if (r == 0) FAIL(GR_BATCH_ERR_COUNT, "fewer records than the record count");
        if (client ? f.offset_delta != i
                   : (f.offset_delta <= prev_delta || f.offset_delta > info->last_offset_delta))
            FAIL(GR_BATCH_ERR_OFFSETS,
                 client ? "offset deltas are not 0, 1, 2, ..." : "offset deltas out of order");
        prev_delta = f.offset_delta;
        int64_t ts = (int64_t)((uint64_t)info->base_timestamp + (uint64_t)f.timestamp_delta);
        if (ts > max_ts) {
            max_ts = ts;
            max_ts_delta = f.offset_delta;
        }
        if (ts != -1 && (min_ts == -1 || ts < min_ts)) min_ts = ts;
        null_key |= f.key_len < 0;
    }
    int64_t left = src_fill(s, 1);
    if (left < 0) FAIL((int)left, err_why((int)left));
    if (left > 0) FAIL(GR_BATCH_ERR_TRAILING, "bytes after the last record");
    info->records_max_timestamp = max_ts;
    info->records_max_timestamp_offset_delta = max_ts_delta;
    info->records_min_timestamp = min_ts;
    info->has_null_key = null_key;
    return 0;
}

/* Per-thread decompressor and window for validation: created on the first compressed batch, reused. */
struct validate_ctx {
    struct gr_dstream ds; /* all-zero is gr_dstream_init's state */
    uint8_t *win;
};
static _Thread_local struct validate_ctx tl_ctx;

void gr_batch_thread_cleanup(void)
{
    gr_dstream_free(&tl_ctx.ds);
    free(tl_ctx.win);
    tl_ctx.win = NULL;
}

static int validate_compressed(const uint8_t *rec, size_t rec_len, unsigned flags, struct gr_batch_info *info,
                               const char **why)
{
    struct validate_ctx *ctx = &tl_ctx;
    if (!ctx->win && !(ctx->win = malloc(VALIDATE_WINDOW_BYTES)))
        FAIL(GR_BATCH_ERR_NO_MEMORY, "out of memory");
    struct gr_records_src s = {.buf = ctx->win, .cap = VALIDATE_WINDOW_BYTES, .ds = &ctx->ds};
    s.p = s.end = s.buf;
    int r = gr_dstream_start(&ctx->ds, info->codec, rec, rec_len, GR_DECOMPRESSED_BATCH_BYTES_MAX);
    if (r) {
        r = compress_err_to_batch(r);
        if (why) *why = err_why(r);
    } else {
        size_t whole_len;
        if (gr_dstream_whole(&ctx->ds, &s.p, &whole_len)) {
            s.end = s.p + whole_len;
            s.eof = true;
        }
        r = scan_records(&s, flags, info, why);
        info->records_bytes = ctx->ds.out_bytes;
    }
    gr_dstream_trim(&ctx->ds);
    return r;
}

int gr_batch_validate_ex(const uint8_t *p, size_t len, unsigned flags, struct gr_batch_info *info,
                         const char **why)
{
    assert(p || len == 0);
    struct gr_batch_info local;
    if (!info) info = &local;
    int r = check_framing(p, len, why);
    if (r) return r;
    read_info(p, info);
    if (gr_batch_crc(p) != gr_batch_crc_compute(p, len)) FAIL(GR_BATCH_ERR_CRC, "CRC-32C mismatch");
    if (info->codec > GR_CODEC_ZSTD) FAIL(GR_BATCH_ERR_CODEC, "unknown compression codec");
    if ((r = check_counts(info, flags, why))) return r;
    if (flags & GR_BATCH_CHECK_HEADER_ONLY) return 0;

    const uint8_t *rec = p + GR_BATCH_HEADER_BYTES;
    size_t rec_len = len - GR_BATCH_HEADER_BYTES;
    if (info->codec != GR_CODEC_NONE && rec_len > 0)
        return validate_compressed(rec, rec_len, flags, info, why);
    if ((uint64_t)info->record_count > rec_len / RECORD_BYTES_MIN)
        FAIL(GR_BATCH_ERR_COUNT, "fewer records than the record count");
    struct gr_records_src s = {.p = rec, .end = rec + rec_len, .eof = true};
    info->records_bytes = rec_len;
    return scan_records(&s, flags, info, why);
}

int gr_batch_validate(const uint8_t *p, size_t len, struct gr_batch_info *info, const char **why)
{
    return gr_batch_validate_ex(p, len, GR_BATCH_CHECK_CLIENT, info, why);
}

/* ---- timestamps (Kafka LogValidator.validateTimestamp, DefaultRecordBatch.setMaxTimestamp) ---- */

/* True when `ts` is outside [now - before, now + after], computed without overflow: a difference that
   does not fit in int64 is beyond any bound (bounds are at most INT64_MAX). */
static bool ts_out_of_bounds(int64_t ts, int64_t now, int64_t before, int64_t after)
{
    int64_t age;
    if (__builtin_sub_overflow(now, ts, &age)) return true;
    return age > before || (age < 0 && age < -after);
}

int gr_batch_apply_timestamps(uint8_t *b, size_t len, struct gr_batch_info *info, bool log_append_time,
                              int64_t before_max_ms, int64_t after_max_ms, int64_t now_ms, const char **why)
{
    assert(b && len >= GR_BATCH_HEADER_BYTES && info && before_max_ms >= 0 && after_max_ms >= 0);
    bool producer_lat = (info->attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    if (log_append_time) {
        if (producer_lat)
            FAIL(GR_BATCH_ERR_TIMESTAMP, "Producer should not set timestamp type to LogAppendTime");
        return 0;
    }
    /* Under a producer-set LogAppendTime bit every record reads as the header's max timestamp. */
    int64_t lo = producer_lat ? info->max_timestamp : info->records_min_timestamp;
    int64_t hi = producer_lat ? info->max_timestamp : info->records_max_timestamp;
    if (producer_lat && hi == -1)
        FAIL(GR_BATCH_ERR_TIMESTAMP, "Producer should not set timestamp type to LogAppendTime");
    if ((lo != -1 && ts_out_of_bounds(lo, now_ms, before_max_ms, after_max_ms)) ||
        (hi != -1 && ts_out_of_bounds(hi, now_ms, before_max_ms, after_max_ms)))
        FAIL(GR_BATCH_ERR_TIMESTAMP,
             "A record timestamp is outside message.timestamp.before.max.ms / after.max.ms");
    int64_t max_ts = hi > -1 ? hi : -1; /* Kafka's running max starts at NO_TIMESTAMP (-1) */
    if (!producer_lat && max_ts == info->max_timestamp) return 0; /* as sent: no write, no CRC pass */
    info->attributes = (int16_t)(info->attributes & ~GR_BATCH_ATTR_LOG_APPEND_TIME);
    info->max_timestamp = max_ts;
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)info->attributes);
    gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_ts);
    gr_batch_crc_store(b, len);
    return 0;
}

/* The refusal of one record under `rules`, or 0 (Kafka's validateKey, then validateTimestamp). */
static int record_refused(const struct gr_record *rec, bool producer_lat, const struct gr_record_rules *rules)
{
    if (rules->key_required && rec->key.len < 0) return GR_BATCH_ERR_RECORD_KEY;
    if (!rules->log_append_time && rec->timestamp != -1)
        return ts_out_of_bounds(rec->timestamp, rules->now_ms, rules->before_max_ms, rules->after_max_ms)
                   ? GR_BATCH_ERR_TIMESTAMP
                   : 0;
    return producer_lat ? GR_BATCH_ERR_TIMESTAMP_TYPE : 0;
}

int gr_batch_refused_records(const uint8_t *b, size_t len, const struct gr_record_rules *rules,
                             struct gr_record_refusal *out, int32_t out_max)
{
    assert(b && rules && (out || out_max == 0));
    bool producer_lat = (gr_batch_attributes(b) & GR_BATCH_ATTR_LOG_APPEND_TIME) != 0;
    struct gr_record_iter it;
    struct gr_record rec;
    int r = gr_record_iter_init(&it, b, len), n = 0;
    for (int32_t i = 0; r == 0 && (r = gr_record_iter_next(&it, &rec)) == 1; i++) {
        int err = record_refused(&rec, producer_lat, rules);
        if (err && n < out_max)
            out[n] =
                (struct gr_record_refusal){i, err, rec.offset, rec.timestamp, rec.key.len, rec.value.len};
        n += err != 0;
        r = 0;
    }
    gr_record_iter_close(&it);
    return r < 0 ? r : n;
}

/* ---- splitting ---- */

int gr_batch_next(const uint8_t *p, size_t len, size_t *pos, const uint8_t **batch, size_t *batch_len)
{
    assert(*pos <= len);
    size_t left = len - *pos;
    const uint8_t *b = p + *pos;
    if (left == 0) return 0;
    if (left < GR_BATCH_LOG_OVERHEAD) return GR_BATCH_ERR_TRUNCATED;
    int32_t blen = gr_batch_length(b);
    if (left > GR_BATCH_OFF_MAGIC && b[GR_BATCH_OFF_MAGIC] != 2) return GR_BATCH_ERR_MAGIC;
    if (blen < BATCH_LENGTH_MIN) return GR_BATCH_ERR_LENGTH;
    uint64_t total = GR_BATCH_LOG_OVERHEAD + (uint64_t)blen;
    if (total > left) return GR_BATCH_ERR_TRUNCATED;
    *batch = b;
    *batch_len = (size_t)total;
    *pos += (size_t)total;
    return 1;
}

int gr_batches_count(const uint8_t *p, size_t len, size_t *tail_bytes)
{
    size_t pos = 0, blen;
    const uint8_t *b;
    int count = 0, r;
    if (tail_bytes) *tail_bytes = 0;
    while ((r = gr_batch_next(p, len, &pos, &b, &blen)) == 1)
        count++;
    if (r == GR_BATCH_ERR_TRUNCATED) {
        if (tail_bytes) *tail_bytes = len - pos;
        return count;
    }
    return r < 0 ? r : count;
}

uint32_t gr_batch_crc_compute(const uint8_t *b, size_t len)
{
    assert(len >= GR_BATCH_HEADER_BYTES);
    return gr_crc32c(0, b + GR_BATCH_OFF_ATTRIBUTES, len - GR_BATCH_OFF_ATTRIBUTES);
}

void gr_batch_crc_store(uint8_t *b, size_t len)
{
    gr_put_be32(b + GR_BATCH_OFF_CRC, gr_batch_crc_compute(b, len));
}

/* ---- iteration ---- */

bool gr_record_header_next(struct gr_bytes *headers, struct gr_record_header *h)
{
    if (headers->len <= 0) return false;
    const uint8_t *p = headers->ptr, *end = p + headers->len;
    uint64_t raw;
    size_t k = dec_uvarint(p, (size_t)(end - p), GR_VARINT_BYTES_MAX, &raw);
    int32_t klen = unzigzag32(raw);
    if (!k || klen < 0 || (size_t)klen > (size_t)(end - p) - k) return false;
    p += k;
    h->key = (struct gr_bytes){p, klen};
    p += klen;
    k = dec_uvarint(p, (size_t)(end - p), GR_VARINT_BYTES_MAX, &raw);
    int32_t vlen = unzigzag32(raw);
    if (!k || (vlen >= 0 && (size_t)vlen > (size_t)(end - p) - k)) return false;
    p += k;
    h->value = vlen < 0 ? (struct gr_bytes){NULL, -1} : (struct gr_bytes){p, vlen};
    if (vlen > 0) p += vlen;
    headers->len -= (int32_t)(p - headers->ptr);
    headers->ptr = p;
    return true;
}

int gr_record_iter_init(struct gr_record_iter *it, const uint8_t *batch, size_t len)
{
    memset(it, 0, sizeof *it);
    int r = check_framing(batch, len, NULL);
    if (r) return it->err = r;
    it->batch = batch;
    int16_t attrs = gr_batch_attributes(batch);
    enum gr_codec codec = (enum gr_codec)(attrs & GR_BATCH_ATTR_CODEC_MASK);
    if (codec > GR_CODEC_ZSTD) return it->err = GR_BATCH_ERR_CODEC;
    it->base_offset = gr_batch_base_offset(batch);
    it->base_timestamp = gr_batch_base_timestamp(batch);
    it->max_timestamp = gr_batch_max_timestamp(batch);
    it->log_append_time = attrs & GR_BATCH_ATTR_LOG_APPEND_TIME;
    it->record_count = gr_batch_record_count(batch);
    it->last_offset_delta = gr_batch_last_offset_delta(batch);
    it->prev_offset_delta = -1;
    if (it->record_count < 0) return it->err = GR_BATCH_ERR_OFFSETS;

    const uint8_t *rec = batch + GR_BATCH_HEADER_BYTES;
    size_t rec_len = len - GR_BATCH_HEADER_BYTES;
    if (codec == GR_CODEC_NONE || rec_len == 0) {
        it->src = (struct gr_records_src){.p = rec, .end = rec + rec_len, .eof = true};
        return 0;
    }
    if (!(it->ds = malloc(sizeof *it->ds))) return it->err = GR_BATCH_ERR_NO_MEMORY;
    gr_dstream_init(it->ds);
    if ((r = gr_dstream_start(it->ds, codec, rec, rec_len, GR_DECOMPRESSED_BATCH_BYTES_MAX)))
        return it->err = compress_err_to_batch(r);
    size_t whole_len;
    if (gr_dstream_whole(it->ds, &it->src.p, &whole_len)) {
        it->src.end = it->src.p + whole_len;
        it->src.eof = true;
        return 0;
    }
    if (!(it->src.buf = malloc(ITER_WINDOW_BYTES))) return it->err = GR_BATCH_ERR_NO_MEMORY;
    it->src.cap = ITER_WINDOW_BYTES;
    it->src.cap_max = GR_DECOMPRESSED_BATCH_BYTES_MAX;
    it->src.p = it->src.end = it->src.buf;
    it->src.ds = it->ds;
    return 0;
}

int gr_record_iter_next(struct gr_record_iter *it, struct gr_record *rec)
{
    if (it->err) return it->err;
    assert(it->batch); /* not closed */
    if (it->records_read == it->record_count) return 0;
    struct rec_fields f;
    const char *why;
    int r = read_record(&it->src, &f, true, &why);
    if (r == 0) r = GR_BATCH_ERR_COUNT;
    if (r < 0) return it->err = r;
    if (f.offset_delta <= it->prev_offset_delta || f.offset_delta > it->last_offset_delta)
        return it->err = GR_BATCH_ERR_OFFSETS;
    it->prev_offset_delta = f.offset_delta;
    it->records_read++;
    rec->offset_delta = f.offset_delta;
    rec->offset =
        (int64_t)((uint64_t)it->base_offset + (uint64_t)(int64_t)f.offset_delta); /* wraps as Java's */
    rec->timestamp = it->log_append_time
                         ? it->max_timestamp
                         : (int64_t)((uint64_t)it->base_timestamp + (uint64_t)f.timestamp_delta);
    rec->attributes = f.attributes;
    rec->key = f.key_len < 0 ? (struct gr_bytes){NULL, -1} : (struct gr_bytes){f.key, f.key_len};
    rec->value = f.value_len < 0 ? (struct gr_bytes){NULL, -1} : (struct gr_bytes){f.value, f.value_len};
    rec->header_count = f.header_count;
    rec->headers = (struct gr_bytes){f.headers, (int32_t)f.headers_bytes};
    return 1;
}

void gr_record_iter_close(struct gr_record_iter *it)
{
    if (it->ds) {
        gr_dstream_free(it->ds);
        free(it->ds);
    }
    free(it->src.buf);
    it->ds = NULL;
    it->src.buf = NULL;
    it->src.p = it->src.end = NULL;
    it->src.ds = NULL;
    it->batch = NULL;
}

/* ---- building ---- */

static inline size_t sz_bytes_field(struct gr_bytes b)
{
    return b.len < 0 ? 1 : sz_uvarint(zigzag32(b.len)) + (size_t)b.len;
}

/* Size of a record's fields after its length varint. */
static uint64_t record_body_bytes(const struct gr_record_in *r, int64_t base_timestamp, int32_t offset_delta)
{
    uint64_t n = 1 + sz_uvarint(zigzag64((int64_t)((uint64_t)r->timestamp - (uint64_t)base_timestamp))) +
                 sz_uvarint(zigzag32(offset_delta)) + sz_bytes_field(r->key) + sz_bytes_field(r->value) +
                 sz_uvarint(zigzag32(r->header_count));
    for (int32_t i = 0; i < r->header_count; i++) {
        assert(r->headers[i].key.len >= 0);
        n += sz_bytes_field(r->headers[i].key) + sz_bytes_field(r->headers[i].value);
    }
    return n;
}

static uint8_t *put_bytes_field(uint8_t *p, struct gr_bytes b)
{
    p = put_uvarint(p, zigzag32(b.len < 0 ? -1 : b.len));
    if (b.len > 0) {
        memcpy(p, b.ptr, (size_t)b.len);
        p += b.len;
    }
    return p;
}

static uint8_t *put_record(uint8_t *p, const struct gr_record_in *r, int64_t base_timestamp,
                           int32_t offset_delta, uint64_t body_bytes)
{
    p = put_uvarint(p, zigzag32((int32_t)body_bytes));
    *p++ = 0; /* attributes */
    p = put_uvarint(p, zigzag64((int64_t)((uint64_t)r->timestamp - (uint64_t)base_timestamp)));
    p = put_uvarint(p, zigzag32(offset_delta));
    p = put_bytes_field(p, r->key);
    p = put_bytes_field(p, r->value);
    p = put_uvarint(p, zigzag32(r->header_count));
    for (int32_t i = 0; i < r->header_count; i++) {
        p = put_bytes_field(p, r->headers[i].key);
        p = put_bytes_field(p, r->headers[i].value);
    }
    return p;
}

static void write_header(uint8_t *b, const struct gr_batch_params *bp, int32_t record_count,
                         int32_t last_offset_delta, int64_t base_timestamp, int64_t max_timestamp,
                         size_t section_bytes)
{
    gr_put_be64(b + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)bp->base_offset);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, (uint32_t)(BATCH_LENGTH_MIN + section_bytes));
    gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)bp->partition_leader_epoch);
    b[GR_BATCH_OFF_MAGIC] = 2;
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, (uint16_t)(bp->attributes | bp->codec));
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)last_offset_delta);
    gr_put_be64(b + GR_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)base_timestamp);
    gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_timestamp);
    gr_put_be64(b + GR_BATCH_OFF_PRODUCER_ID, (uint64_t)bp->producer_id);
    gr_put_be16(b + GR_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)bp->producer_epoch);
    gr_put_be32(b + GR_BATCH_OFF_BASE_SEQUENCE, (uint32_t)bp->base_sequence);
    gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, (uint32_t)record_count);
}

int gr_batch_assemble(const struct gr_batch_params *bp, int32_t record_count, int32_t last_offset_delta,
                      int64_t base_timestamp, int64_t max_timestamp, const uint8_t *records,
                      size_t records_len, uint8_t **out, size_t *out_len)
{
    assert((bp->attributes & GR_BATCH_ATTR_CODEC_MASK) == 0);
    assert(bp->codec >= GR_CODEC_NONE && bp->codec <= GR_CODEC_ZSTD);
    assert(records || records_len == 0);
    const uint8_t *section = records;
    size_t section_len = records_len;
    uint8_t *compressed = NULL;
    if (bp->codec != GR_CODEC_NONE) {
        int r = gr_compress(bp->codec, records, records_len, &compressed, &section_len);
        if (r) return r == GR_COMPRESS_ERR_NO_MEMORY ? GR_BATCH_ERR_NO_MEMORY : GR_BATCH_ERR_TOO_LARGE;
        section = compressed;
    }
    if (section_len > (size_t)INT32_MAX - BATCH_LENGTH_MIN) {
        free(compressed);
        return GR_BATCH_ERR_TOO_LARGE;
    }
    size_t total = GR_BATCH_HEADER_BYTES + section_len;
    uint8_t *b = malloc(total);
    if (!b) {
        free(compressed);
        return GR_BATCH_ERR_NO_MEMORY;
    }
    write_header(b, bp, record_count, last_offset_delta, base_timestamp, max_timestamp, section_len);
    if (section_len) memcpy(b + GR_BATCH_HEADER_BYTES, section, section_len);
    free(compressed);
    gr_batch_crc_store(b, total);
    *out = b;
    *out_len = total;
    return 0;
}

uint64_t gr_batch_build_bytes(const struct gr_record_in *recs, int32_t count)
{
    assert(count >= 1 && recs);
    uint64_t section = 0;
    for (int32_t i = 0; i < count; i++) {
        uint64_t body = record_body_bytes(&recs[i], recs[0].timestamp, i);
        section += sz_uvarint(zigzag32(body > INT32_MAX ? INT32_MAX : (int32_t)body)) + body;
    }
    return GR_BATCH_HEADER_BYTES + section;
}

int gr_batch_build(const struct gr_batch_params *bp, const struct gr_record_in *recs, int32_t count,
                   uint8_t **out, size_t *out_len)
{
    assert(count >= 1 && recs);
    int64_t base_ts = recs[0].timestamp, max_ts = -1; /* -1: Kafka's NO_TIMESTAMP */
    uint64_t section = 0;
    for (int32_t i = 0; i < count; i++) {
        uint64_t body = record_body_bytes(&recs[i], base_ts, i);
        if (body > INT32_MAX) return GR_BATCH_ERR_TOO_LARGE;
        section += sz_uvarint(zigzag32((int32_t)body)) + body;
        if (section > INT32_MAX) return GR_BATCH_ERR_TOO_LARGE;
        if (recs[i].timestamp > max_ts) max_ts = recs[i].timestamp;
    }
    if (bp->attributes & GR_BATCH_ATTR_LOG_APPEND_TIME) max_ts = bp->log_append_time;
    /* Uncompressed: encode straight into the batch. Compressed: encode, then assemble compresses. */
    size_t offset = bp->codec == GR_CODEC_NONE ? GR_BATCH_HEADER_BYTES : 0;
    if (section > (uint64_t)INT32_MAX - BATCH_LENGTH_MIN) return GR_BATCH_ERR_TOO_LARGE;
    uint8_t *buf = malloc(offset + (size_t)section + 1);
    if (!buf) return GR_BATCH_ERR_NO_MEMORY;
    uint8_t *p = buf + offset;
    for (int32_t i = 0; i < count; i++)
        p = put_record(p, &recs[i], base_ts, i, record_body_bytes(&recs[i], base_ts, i));
    assert((uint64_t)(p - buf - offset) == section);
    if (bp->codec == GR_CODEC_NONE) {
        assert((bp->attributes & GR_BATCH_ATTR_CODEC_MASK) == 0);
        write_header(buf, bp, count, count - 1, base_ts, max_ts, (size_t)section);
        gr_batch_crc_store(buf, offset + (size_t)section);
        *out = buf;
        *out_len = offset + (size_t)section;
        return 0;
    }
    int r = gr_batch_assemble(bp, count, count - 1, base_ts, max_ts, buf, (size_t)section, out, out_len);
    free(buf);
    return r;
}
