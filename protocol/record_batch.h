/*
 * record_batch.h: RecordBatch v2 (magic 2), the unit Gregor validates, stores and serves unchanged.
 *
 * Header layout (Kafka DefaultRecordBatch; all big-endian):
 *   OFFSET SIZE MEANING
 *    0      8   base offset (overwritten by the broker on append)
 *    8      4   batch length: bytes after this field (total size = 12 + batch length)
 *   12      4   partition leader epoch (overwritten by the broker on append)
 *   16      1   magic (2)
 *   17      4   CRC-32C of bytes 21..end (attributes to the last record)
 *   21      2   attributes: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3 timestamp
 *               type (1 = LogAppendTime), bit 4 transactional, bit 5 control, bit 6 delete horizon set
 *   23      4   last offset delta
 *   27      8   base timestamp (first timestamp)
 *   35      8   max timestamp
 *   43      8   producer id (-1 none)
 *   51      2   producer epoch
 *   53      4   base sequence (-1 none)
 *   57      4   record count
 *   61      -   records (compressed as a whole when codec != 0)
 * Base offset and partition leader epoch lie outside the CRC span, so patching them needs no CRC
 * recompute. Read next: protocol/record_batch.c (validation), storage/ (how batches are stored).
 */
#ifndef GR_RECORD_BATCH_H
#define GR_RECORD_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_BATCH_HEADER_BYTES 61
#define GR_BATCH_LOG_OVERHEAD 12 /* base offset + batch length */
#define GR_BATCH_OFF_BASE_OFFSET 0
#define GR_BATCH_OFF_LENGTH 8
#define GR_BATCH_OFF_LEADER_EPOCH 12
#define GR_BATCH_OFF_MAGIC 16
#define GR_BATCH_OFF_CRC 17
#define GR_BATCH_OFF_ATTRIBUTES 21
#define GR_BATCH_OFF_LAST_OFFSET_DELTA 23
#define GR_BATCH_OFF_BASE_TIMESTAMP 27
#define GR_BATCH_OFF_MAX_TIMESTAMP 35
#define GR_BATCH_OFF_PRODUCER_ID 43
#define GR_BATCH_OFF_PRODUCER_EPOCH 51
#define GR_BATCH_OFF_BASE_SEQUENCE 53
#define GR_BATCH_OFF_RECORD_COUNT 57

#define GR_BATCH_ATTR_CODEC_MASK 0x07
#define GR_BATCH_ATTR_LOG_APPEND_TIME 0x08
#define GR_BATCH_ATTR_TRANSACTIONAL 0x10
#define GR_BATCH_ATTR_CONTROL 0x20
#define GR_BATCH_ATTR_DELETE_HORIZON 0x40

enum gr_codec {
    GR_CODEC_NONE = 0,
    GR_CODEC_GZIP = 1,
    GR_CODEC_SNAPPY = 2,
    GR_CODEC_LZ4 = 3,
    GR_CODEC_ZSTD = 4
};

static inline uint16_t gr_be16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t gr_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t gr_be64(const uint8_t *p)
{
    return ((uint64_t)gr_be32(p) << 32) | gr_be32(p + 4);
}
static inline void gr_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void gr_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void gr_put_be64(uint8_t *p, uint64_t v)
{
    gr_put_be32(p, (uint32_t)(v >> 32));
    gr_put_be32(p + 4, (uint32_t)v);
}

/* Header accessors over a batch whose first GR_BATCH_HEADER_BYTES bytes are present (caller checks). */
static inline int64_t gr_batch_base_offset(const uint8_t *b)
{
    return (int64_t)gr_be64(b + GR_BATCH_OFF_BASE_OFFSET);
}
static inline int32_t gr_batch_length(const uint8_t *b)
{
    return (int32_t)gr_be32(b + GR_BATCH_OFF_LENGTH);
}
/* Total bytes of the batch on the wire / on disk: 12 + batch length. */
static inline int64_t gr_batch_total_bytes(const uint8_t *b)
{
    return GR_BATCH_LOG_OVERHEAD + (int64_t)gr_batch_length(b);
}
static inline int32_t gr_batch_leader_epoch(const uint8_t *b)
{
    return (int32_t)gr_be32(b + GR_BATCH_OFF_LEADER_EPOCH);
}
static inline int8_t gr_batch_magic(const uint8_t *b)
{
    return (int8_t)b[GR_BATCH_OFF_MAGIC];
}
static inline uint32_t gr_batch_crc(const uint8_t *b)
{
    return gr_be32(b + GR_BATCH_OFF_CRC);
}
static inline int16_t gr_batch_attributes(const uint8_t *b)
{
    return (int16_t)gr_be16(b + GR_BATCH_OFF_ATTRIBUTES);
}
static inline int32_t gr_batch_last_offset_delta(const uint8_t *b)
{
    return (int32_t)gr_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA);
}
static inline int64_t gr_batch_base_timestamp(const uint8_t *b)
{
    return (int64_t)gr_be64(b + GR_BATCH_OFF_BASE_TIMESTAMP);
}
static inline int64_t gr_batch_max_timestamp(const uint8_t *b)
{
    return (int64_t)gr_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP);
}
static inline int64_t gr_batch_producer_id(const uint8_t *b)
{
    return (int64_t)gr_be64(b + GR_BATCH_OFF_PRODUCER_ID);
}
static inline int16_t gr_batch_producer_epoch(const uint8_t *b)
{
    return (int16_t)gr_be16(b + GR_BATCH_OFF_PRODUCER_EPOCH);
}
static inline int32_t gr_batch_base_sequence(const uint8_t *b)
{
    return (int32_t)gr_be32(b + GR_BATCH_OFF_BASE_SEQUENCE);
}
static inline int32_t gr_batch_record_count(const uint8_t *b)
{
    return (int32_t)gr_be32(b + GR_BATCH_OFF_RECORD_COUNT);
}
/* Offset of the last record in the batch: base offset + last offset delta (both off the wire or the disk:
 * wraps as Kafka's Java long does instead of overflowing). */
static inline int64_t gr_batch_last_offset(const uint8_t *b)
{
    return (int64_t)((uint64_t)gr_batch_base_offset(b) + (uint64_t)(int64_t)gr_batch_last_offset_delta(b));
}

/* Patches the fields outside the CRC span (no CRC recompute needed). */
static inline void gr_batch_set_base_offset(uint8_t *b, int64_t off)
{
    gr_put_be64(b + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)off);
}
static inline void gr_batch_set_leader_epoch(uint8_t *b, int32_t e)
{
    gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)e);
}

/* ---- Validation, splitting, iteration and building: protocol/record_batch.c ---- */

#include "protocol/wire.h" /* struct gr_bytes */

/* Why a batch was refused. Peer errors, never asserts; gr_batch_err_kafka gives the Kafka error code a
 * Produce response carries for each (mapping follows Kafka's broker: CorruptRecordException ->
 * CORRUPT_MESSAGE, InvalidRecordException -> INVALID_RECORD). */
enum gr_batch_err {
    GR_BATCH_OK = 0,
    /* Fewer bytes than 17 or than 12 + batch length: INVALID_RECORD (87). */
    GR_BATCH_ERR_TRUNCATED = -1,
    /* Batch length below the v2 minimum (49): CORRUPT_MESSAGE (2). */
    GR_BATCH_ERR_LENGTH = -2,
    /* Bytes after the one batch (Produce v3+ carries exactly one per partition): INVALID_RECORD. */
    GR_BATCH_ERR_EXTRA_BYTES = -3,
    /* Magic != 2 (Produce v3+ carries only v2 batches): INVALID_RECORD. */
    GR_BATCH_ERR_MAGIC = -4,
    /* CRC-32C mismatch: CORRUPT_MESSAGE (2). */
    GR_BATCH_ERR_CRC = -5,
    /* Compression codec 5..7: UNSUPPORTED_COMPRESSION_TYPE (76). */
    GR_BATCH_ERR_CODEC = -6,
    /* Record count, last offset delta or offset deltas inconsistent: INVALID_RECORD. */
    GR_BATCH_ERR_OFFSETS = -7,
    /* Control batch from a client: INVALID_RECORD. */
    GR_BATCH_ERR_CONTROL = -8,
    /* Producer id set but base sequence < 0: INVALID_RECORD. */
    GR_BATCH_ERR_SEQUENCE = -9,
    /* A record's fields do not parse or do not fill its length: INVALID_RECORD. */
    GR_BATCH_ERR_RECORD = -10,
    /* Fewer records than the record count: INVALID_RECORD. */
    GR_BATCH_ERR_COUNT = -11,
    /* Bytes after the last counted record: INVALID_RECORD. */
    GR_BATCH_ERR_TRAILING = -12,
    /* Compressed records corrupt, truncated, or in a form Kafka refuses: CORRUPT_MESSAGE (2). */
    GR_BATCH_ERR_DECOMPRESS = -13,
    /* Decompressed records exceed GR_DECOMPRESSED_BATCH_BYTES_MAX (a bomb), or a batch to build exceeds
     * INT32_MAX bytes: MESSAGE_TOO_LARGE (10), on which a Java producer splits the batch. */
    GR_BATCH_ERR_TOO_LARGE = -14,
    /* Allocation failed: UNKNOWN_SERVER_ERROR (-1). */
    GR_BATCH_ERR_NO_MEMORY = -15,
    /* A record timestamp outside message.timestamp.before/after.max.ms, or a producer-set LogAppendTime
     * the topic does not allow (gr_batch_apply_timestamps): INVALID_TIMESTAMP (32). */
    GR_BATCH_ERR_TIMESTAMP = -16,
    /* A null key on a compacted topic (gr_batch_refused_records): INVALID_RECORD. */
    GR_BATCH_ERR_RECORD_KEY = -17,
    /* A producer-set LogAppendTime where Kafka refuses it (gr_batch_refused_records): INVALID_TIMESTAMP. */
    GR_BATCH_ERR_TIMESTAMP_TYPE = -18,
};

/* Returns the Kafka error code for a gr_batch_err (0 for GR_BATCH_OK). */
int16_t gr_batch_err_kafka(int err);

/* What gr_batch_validate learned about a batch. Header fields are copied as sent. */
struct gr_batch_info {
    int64_t base_offset;
    int32_t batch_length; /* bytes after the length field; total = 12 + batch_length */
    int32_t partition_leader_epoch;
    int16_t attributes;
    enum gr_codec codec;
    int32_t last_offset_delta;
    int64_t base_timestamp; /* ms */
    int64_t max_timestamp;  /* ms, from the header */
    int64_t producer_id;    /* -1 none */
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t record_count;
    /* From the record scan (unset: -1 / 0 / false when GR_BATCH_CHECK_HEADER_ONLY): */
    int64_t records_max_timestamp; /* max of base timestamp + timestamp delta over records (the create
                                      times, even under LogAppendTime), -1 if none above -1 (Kafka's
                                      NO_TIMESTAMP start); Kafka rewrites the header's max timestamp to
                                      this value when they differ */
    int32_t records_max_timestamp_offset_delta; /* offset delta of the first record with that maximum, -1 */
    int64_t records_min_timestamp;  /* min of the records' create times other than -1 (NO_TIMESTAMP, which
                                       no bound applies to), -1 if every record has -1 */
    bool has_null_key;              /* some record has a null key (compacted topics refuse those) */
    uint64_t records_bytes;         /* size of the records section after decompression */
    int32_t records_body_bytes_max; /* largest record length (the varint: the record's bytes after it) read,
                                       including the record a scan failed on once its length was read: what
                                       Kafka 4.4 bounds by max.decompressed.message.bytes in a compressed
                                       batch; 0 when no record length was read */
};

/* Flags of gr_batch_validate_ex.
 * GR_BATCH_CHECK_CLIENT: the rules for batches from producers (Kafka LogValidator, origin CLIENT): record
 * count >= 1, last offset delta == count - 1, offset deltas exactly 0..count-1, no control batch, base
 * sequence >= 0 when a producer id is set. Without it (stored or compacted data): count >= 0, last
 * offset delta >= count - 1, offset deltas strictly increasing within [0, last offset delta]. Stricter
 * than Kafka in one place: Kafka rewrites a compressed batch whose deltas are not 0..n-1 and ignores the
 * deltas of an uncompressed one; we refuse both (every current client writes 0..n-1).
 * GR_BATCH_CHECK_HEADER_ONLY: stop after the header checks and the CRC (segment recovery). */
#define GR_BATCH_CHECK_CLIENT 0x1u
#define GR_BATCH_CHECK_HEADER_ONLY 0x2u

/* Validates the `len` bytes at `p` (borrowed) as exactly one RecordBatch v2 from a producer: same as
 * gr_batch_validate_ex(p, len, GR_BATCH_CHECK_CLIENT, info, why). */
int gr_batch_validate(const uint8_t *p, size_t len, struct gr_batch_info *info, const char **why);

/* Validates one batch in place. Order (Kafka's: ProduceRequest magic check, then batch framing and
 * CRC, then LogValidator's batch and record checks): 17 bytes present; magic 2; batch length >= 49;
 * 12 + batch length == len; CRC-32C of bytes 21..end; codec 0..4; count/offset rules (see flags);
 * control and sequence rules (client); then every record, decompressing in constant memory: record
 * length varint >= 0 and equal to the bytes its fields take, attributes, timestamp delta, offset delta,
 * key, value, header count >= 0, headers (key length >= 0); no bytes after the last record; the
 * decompressed size bounded by GR_DECOMPRESSED_BATCH_BYTES_MAX. A negative key/value/header value length
 * means null (as Kafka reads it). `info` (may be NULL) is filled; `why` (may be NULL) gets a static
 * reason on failure. Returns 0 or a negative enum gr_batch_err. No allocation for uncompressed batches;
 * compressed ones use this thread's reusable decompressor (see gr_batch_thread_cleanup). */
int gr_batch_validate_ex(const uint8_t *p, size_t len, unsigned flags, struct gr_batch_info *info,
                         const char **why);

/* Kafka LogValidator's timestamp rules for a client batch that gr_batch_validate_ex accepted (`info` from
 * it), applied in place to the `len` bytes at `b` (borrowed, writable: the request buffer):
 * - CreateTime topic (`log_append_time` false): every record's timestamp other than -1 must lie within
 *   [now_ms - before_max_ms, now_ms + after_max_ms] (KIP-937; exact arithmetic, no overflow). A record's
 *   timestamp is base timestamp + delta, or the header's max timestamp when the producer set the
 *   LogAppendTime bit (then a max timestamp of -1 is refused, as Kafka does). The header's max timestamp
 *   then becomes the records' maximum (-1 when none is above -1) and the LogAppendTime bit is cleared
 *   (DefaultRecordBatch.setMaxTimestamp(CREATE_TIME, max)); when that changes covered bytes the CRC-32C
 *   is recomputed (one pass over the batch), otherwise nothing is written.
 * - LogAppendTime topic: no bounds apply; a batch whose producer already set the LogAppendTime bit is
 *   refused (Kafka: "Producer should not set timestamp type to LogAppendTime"). Setting max timestamp :=
 *   now and the bit is left to the append (storage's gr_log_append), which recomputes the CRC once.
 * Bounds are ms >= 0 (INT64_MAX: unlimited). Returns 0 (info->max_timestamp and info->attributes updated
 * to what the header now says) or GR_BATCH_ERR_TIMESTAMP with *why (may be NULL) set to a static reason;
 * the batch is not modified on error. */
int gr_batch_apply_timestamps(uint8_t *b, size_t len, struct gr_batch_info *info, bool log_append_time,
                              int64_t before_max_ms, int64_t after_max_ms, int64_t now_ms, const char **why);

/* Kafka LogValidator's per-record rules (validateKey, then validateTimestamp) for a client batch. */
struct gr_record_rules {
    bool key_required;                           /* compacted topic: a null key is refused */
    bool log_append_time;                        /* the topic's message.timestamp.type is LogAppendTime */
    int64_t before_max_ms, after_max_ms, now_ms; /* bounds as for gr_batch_apply_timestamps */
};

/* One record a rule refuses (Kafka's ProduceResponse.RecordError, before its message is written). */
struct gr_record_refusal {
    int32_t batch_index; /* the record's position in the batch, from 0 */
    int err;             /* GR_BATCH_ERR_RECORD_KEY, GR_BATCH_ERR_TIMESTAMP (out of bounds) or
                            GR_BATCH_ERR_TIMESTAMP_TYPE (the producer set LogAppendTime) */
    int64_t offset;      /* base offset as sent + offset delta */
    int64_t timestamp;   /* the record's timestamp (the header's max under the LogAppendTime bit) */
    int32_t key_bytes, value_bytes; /* lengths as sent, -1 null (Kafka prints them in the type message) */
};

/* Walks every record of a batch that gr_batch_validate_ex accepted (`b`, `len` borrowed) and applies
 * `rules` to each, as Kafka's LogValidator does (a record gets at most one refusal: its key first). Writes
 * the first `out_max` refusals to `out` (may be NULL when out_max is 0) and returns how many records were
 * refused in all (0: none), or a negative gr_batch_err when the records cannot be read. Meant for the error
 * path: the accepted path needs only gr_batch_apply_timestamps. */
int gr_batch_refused_records(const uint8_t *b, size_t len, const struct gr_record_rules *rules,
                             struct gr_record_refusal *out, int32_t out_max);

/* Frees the calling thread's cached decompressor and window (call before a thread that validated
 * compressed batches exits; harmless otherwise). */
void gr_batch_thread_cleanup(void);

/* Splits concatenated batches (a Produce `records` field, or a stored segment's bytes). Given the bytes
 * [p, p + len) and a position *pos (start at 0), returns 1 with the next batch in *batch (borrowed) /
 * *batch_len and *pos advanced past it; 0 when *pos == len; GR_BATCH_ERR_TRUNCATED when fewer bytes
 * remain than a whole batch (a partial tail; *pos unchanged); GR_BATCH_ERR_MAGIC when the magic byte is
 * not 2; GR_BATCH_ERR_LENGTH when the batch length is below 49. Only the framing is checked, not the CRC. */
int gr_batch_next(const uint8_t *p, size_t len, size_t *pos, const uint8_t **batch, size_t *batch_len);

/* Counts the whole batches in [p, p + len): returns the count, or a negative gr_batch_err as
 * gr_batch_next reports it (other than a partial tail). *tail_bytes (may be NULL) gets the bytes of a
 * partial batch at the end (0 if none). */
int gr_batches_count(const uint8_t *p, size_t len, size_t *tail_bytes);

/* CRC-32C of bytes 21..len of a batch (`len` >= 61). */
uint32_t gr_batch_crc_compute(const uint8_t *b, size_t len);
/* Recomputes and stores the CRC after covered bytes changed (e.g. LogAppendTime set). */
void gr_batch_crc_store(uint8_t *b, size_t len);

/* One record header; a null value has len -1 (keys are never null). */
struct gr_record_header {
    struct gr_bytes key;
    struct gr_bytes value;
};

/* One record as an iterator yields it. Views borrow the batch or the iterator's window and stay valid
 * until the next gr_record_iter_next / _close. */
struct gr_record {
    int64_t offset; /* base offset + offset delta */
    int32_t offset_delta;
    int64_t timestamp;     /* ms: base timestamp + delta, or the batch max timestamp under LogAppendTime */
    int8_t attributes;     /* unused by Kafka so far; as sent */
    struct gr_bytes key;   /* len -1: null; 0: empty */
    struct gr_bytes value; /* len -1: null; 0: empty */
    int32_t header_count;
    struct gr_bytes headers; /* the header_count encoded headers; walk with gr_record_header_next */
};

/* Reads the next header from *headers (advancing it). Returns true with *h filled, false when none is
 * left (or the bytes do not parse; the iterator has checked them already). */
bool gr_record_header_next(struct gr_bytes *headers, struct gr_record_header *h);

struct gr_dstream;

/* Where a batch's record bytes come from: the batch itself (uncompressed), a whole decompressed buffer,
 * or a decompressor feeding a window. Private to record_batch.c; here so iterators can live on the stack. */
struct gr_records_src {
    const uint8_t *p;       /* next unread byte */
    const uint8_t *end;     /* end of the bytes at hand */
    uint8_t *buf;           /* window the decompressor fills */
    size_t cap;             /* window size */
    size_t cap_max;         /* above cap: the window may be reallocated up to this (its owner frees buf) */
    struct gr_dstream *ds;  /* NULL when the records are at hand whole */
    bool eof;               /* nothing more will arrive */
    int32_t record_len_max; /* largest record length varint read so far (0 before the first) */
};

/* Iterator over the records of one batch (validate it first; the iterator re-checks record structure
 * and offset-delta order as it goes but not the CRC). Holds its own decompressor and a window that grows
 * to the largest record (bounded by GR_DECOMPRESSED_BATCH_BYTES_MAX). Fields are private. */
struct gr_record_iter {
    const uint8_t *batch; /* borrowed */
    int64_t base_offset;
    int64_t base_timestamp;
    int64_t max_timestamp;
    bool log_append_time;
    int32_t record_count;
    int32_t records_read;
    int32_t last_offset_delta;
    int32_t prev_offset_delta;
    struct gr_records_src src;
    struct gr_dstream *ds; /* owned, compressed batches only; src.buf is owned too */
    int err;               /* sticky gr_batch_err */
};

/* Starts iterating the `len`-byte batch at `batch` (borrowed until _close). Checks the header framing
 * (magic, lengths, codec); returns 0 or a negative gr_batch_err (the iterator then needs only _close). */
int gr_record_iter_init(struct gr_record_iter *it, const uint8_t *batch, size_t len);
/* Yields the next record: returns 1 with *rec filled, 0 after record_count records, or a negative
 * gr_batch_err (sticky). */
int gr_record_iter_next(struct gr_record_iter *it, struct gr_record *rec);
/* Frees the iterator's decompressor and window. Safe after a failed init and twice. */
void gr_record_iter_close(struct gr_record_iter *it);

/* One record to build. */
struct gr_record_in {
    int64_t timestamp;                      /* ms */
    struct gr_bytes key;                    /* len -1: null */
    struct gr_bytes value;                  /* len -1: null */
    const struct gr_record_header *headers; /* borrowed; header keys must not be null */
    int32_t header_count;
};

/* Batch-level fields of a batch to build. */
struct gr_batch_params {
    int64_t base_offset;            /* producers send 0; the broker assigns */
    int32_t partition_leader_epoch; /* producers send -1 */
    enum gr_codec codec;
    int16_t attributes;      /* extra attribute bits (GR_BATCH_ATTR_LOG_APPEND_TIME, _TRANSACTIONAL,
                                _CONTROL); codec bits must be 0 */
    int64_t log_append_time; /* ms; the max timestamp when GR_BATCH_ATTR_LOG_APPEND_TIME is set */
    int64_t producer_id;     /* -1 none */
    int16_t producer_epoch;  /* -1 none */
    int32_t base_sequence;   /* -1 none */
};

/* Builds a complete RecordBatch v2 holding `count` (>= 1) records with offset deltas 0..count-1, base
 * timestamp = the first record's, max timestamp = the largest (or log_append_time), records compressed
 * with bp->codec, CRC set. Returns 0 with *out (returns new, free() it) / *out_len, or
 * GR_BATCH_ERR_TOO_LARGE (batch over INT32_MAX bytes) / GR_BATCH_ERR_NO_MEMORY. */
int gr_batch_build(const struct gr_batch_params *bp, const struct gr_record_in *recs, int32_t count,
                   uint8_t **out, size_t *out_len);

/* The exact size in bytes of the batch gr_batch_build would make of `count` (>= 1) records (borrowed)
 * with GR_CODEC_NONE: header plus encoded records, no allocation. Lets a writer check a limit such as
 * max.message.bytes before building. */
uint64_t gr_batch_build_bytes(const struct gr_record_in *recs, int32_t count);

/* Lower level: wraps an already encoded records section (`records_len` bytes, uncompressed, borrowed)
 * into a batch: compresses it with bp->codec, writes the header with the given counts and timestamps,
 * sets the CRC. Lets callers re-wrap records (recompression) and tests craft malformed record bytes
 * under a valid CRC. Returns as gr_batch_build. */
int gr_batch_assemble(const struct gr_batch_params *bp, int32_t record_count, int32_t last_offset_delta,
                      int64_t base_timestamp, int64_t max_timestamp, const uint8_t *records,
                      size_t records_len, uint8_t **out, size_t *out_len);

#endif
