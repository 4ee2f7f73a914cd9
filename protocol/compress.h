/*
 * compress.h: the four Kafka record-batch codecs (gzip, snappy, lz4, zstd) as a streaming decompressor
 * for validating and reading batches in bounded memory, plus whole-buffer compress/decompress helpers for
 * the broker's own writes and for tests.
 *
 * Formats, as Kafka's readers accept them (facts from kafka-clients and snappy-java):
 *   gzip    RFC 1952 members (gzip header required, as java.util.zip.GZIPInputStream); concatenated
 *           members are read in turn.
 *   snappy  either one raw snappy block (what librdkafka writes) or the snappy-java "xerial" framing
 *           (what the Java client writes):
 *             OFFSET SIZE MEANING
 *              0      8   magic 82 53 4E 41 50 50 59 00
 *              8      4   version, int32 big-endian (we write 1)
 *             12      4   compatible version, int32 big-endian (we write 1)
 *             16      -   blocks: int32 big-endian compressed length, then that many bytes of raw snappy
 *           A second 16-byte header between blocks (concatenated streams) is skipped.
 *   lz4     one LZ4 frame (lz4 frame format v1) with a correct header checksum (KIP-57). Frames with
 *           linked (dependent) blocks are refused: Kafka's Java reader rejects them.
 *   zstd    zstd frames (concatenated frames allowed); window at most 2^GR_ZSTD_WINDOW_LOG_MAX.
 * Bytes after the end of the compressed stream are an error (Kafka's Java readers would ignore them; we
 * refuse rather than store bytes no reader looks at).
 *
 * Invariants: no decompressor ever produces more than the caller's out_bytes_max in total, and none
 * allocates from a size read off the wire before checking it against that bound (a raw snappy block's
 * claimed length is also checked against the format's maximum expansion, 64 output bytes per 3 input
 * bytes). Read next: protocol/record_batch.c (the users of gr_dstream).
 */
#ifndef GR_COMPRESS_H
#define GR_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/record_batch.h" /* enum gr_codec */

/* zstd window accepted when decompressing: 2^27 = 128 MiB is zstd's own default limit and what Kafka's
 * zstd-jni reader accepts, so batches a Java producer writes at level 22 still decode. Memory used is
 * min(window, frame content size). */
#define GR_ZSTD_WINDOW_LOG_MAX 27
/* Largest output of a raw snappy block per input byte: a copy element yields at most 64 bytes from 3
 * input bytes (rounded up to 22). A claimed uncompressed length above 22 * input is a lie. */
#define GR_SNAPPY_EXPANSION_MAX 22
/* Uncompressed bytes per block in our xerial snappy output (snappy-java's default block size). */
#define GR_SNAPPY_BLOCK_BYTES (32 * 1024)
/* A decompressor keeps a snappy block buffer at most this large between batches; bigger ones are freed by
 * gr_dstream_trim. */
#define GR_DSTREAM_KEEP_BYTES (1024 * 1024)

/* Errors (peer errors: the compressed bytes came off the wire or the disk). */
enum gr_compress_err {
    GR_COMPRESS_OK = 0,
    GR_COMPRESS_ERR_CORRUPT = -1,   /* malformed, truncated, bad checksum, or bytes after the stream */
    GR_COMPRESS_ERR_TOO_LARGE = -2, /* output exceeds the caller's bound: a decompression bomb */
    GR_COMPRESS_ERR_UNSUPPORTED =
        -3,                         /* unknown codec, or a form Kafka's readers refuse (lz4 linked blocks) */
    GR_COMPRESS_ERR_NO_MEMORY = -4, /* allocation failed */
};

/* A streaming decompressor over one compressed buffer. Fields are private. Reusable: gr_dstream_start
 * again (any codec) keeps the codec contexts already created, so steady-state validation allocates
 * nothing. Not thread-safe; one per thread or per reader. */
struct gr_dstream {
    enum gr_codec codec;
    const uint8_t *in; /* borrowed compressed input */
    size_t in_len;
    size_t in_pos;
    uint64_t out_bytes;     /* produced so far */
    uint64_t out_bytes_max; /* bound on out_bytes */
    int state;              /* 0 running, 1 ended, < 0 sticky enum gr_compress_err */
    bool member_ended;      /* gzip: the current member ended; zstd: the last frame ended */
    void *zlib;             /* z_stream *, created on first gzip use */
    bool zlib_ready;        /* inflateInit2 done on zlib */
    void *zstd;             /* ZSTD_DStream * */
    void *lz4;              /* LZ4F_dctx * */
    bool lz4_clean;         /* lz4's last frame ended cleanly: reusable (else recreated: a context left
                               mid-frame by a damaged frame can refuse the next good one) */
    uint8_t *blk;           /* snappy: decompressed block (raw snappy: the whole output) */
    size_t blk_cap;
    size_t blk_pos;
    size_t blk_len;
    bool xerial; /* snappy: xerial framing */
    bool whole;  /* snappy raw: blk holds the entire output */
};

/* Initialises an idle decompressor (no allocation). */
void gr_dstream_init(struct gr_dstream *ds);
/* Starts decompressing `in_len` bytes at `in` (borrowed until the next start or free) with `codec`,
 * producing at most `out_bytes_max` bytes in total. Returns 0 or a negative enum gr_compress_err (a raw
 * snappy block is decompressed here whole, so its errors show up here). GR_CODEC_NONE is a programmer
 * error. */
int gr_dstream_start(struct gr_dstream *ds, enum gr_codec codec, const uint8_t *in, size_t in_len,
                     uint64_t out_bytes_max);
/* Writes up to `cap` (> 0) decompressed bytes to `out`; sets *got to the count, 0 meaning the stream
 * ended cleanly (all input consumed, checksums verified). Returns 0 or a negative enum gr_compress_err,
 * sticky until the next start. */
int gr_dstream_read(struct gr_dstream *ds, uint8_t *out, size_t cap, size_t *got);
/* When the entire output is already in memory (raw snappy), returns true with a borrowed view of it
 * (valid until the next start/trim/free) and marks it consumed; otherwise false. */
bool gr_dstream_whole(struct gr_dstream *ds, const uint8_t **p, size_t *n);
/* Frees buffers above GR_DSTREAM_KEEP_BYTES; the decompressor stays usable. */
void gr_dstream_trim(struct gr_dstream *ds);
/* Frees every context and buffer; the decompressor is idle again (re-usable after init). */
void gr_dstream_free(struct gr_dstream *ds);

/* Compresses `n` bytes at `in` with `codec` in the form Kafka readers expect (see above; gzip level 6,
 * lz4 64 KiB independent blocks, zstd level 3, snappy xerial-framed 32 KiB blocks). On success returns 0
 * and *out (returns new, caller frees with free()) / *out_len. GR_CODEC_NONE copies. Returns
 * GR_COMPRESS_ERR_TOO_LARGE when n > INT32_MAX, GR_COMPRESS_ERR_NO_MEMORY, GR_COMPRESS_ERR_UNSUPPORTED for
 * an unknown codec. */
int gr_compress(enum gr_codec codec, const uint8_t *in, size_t n, uint8_t **out, size_t *out_len);
/* Decompresses the whole of `in` (any accepted form above) into a new buffer of at most `out_bytes_max`
 * bytes. On success returns 0 and *out (returns new, free() it; non-NULL even when empty) / *out_len.
 * Errors as enum gr_compress_err. */
int gr_decompress(enum gr_codec codec, const uint8_t *in, size_t n, uint64_t out_bytes_max, uint8_t **out,
                  size_t *out_len);

#endif
