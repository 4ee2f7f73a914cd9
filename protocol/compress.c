/*
 * compress.c: gzip (zlib), snappy (snappy-c), lz4 (LZ4F frame API) and zstd (streaming API) behind one
 * streaming decompressor and two whole-buffer helpers; formats and bounds are in compress.h.
 *
 * Each codec's read function writes at most `room` bytes, where room never exceeds the bytes still
 * allowed by out_bytes_max plus one: producing that extra byte is how a stream longer than the bound is
 * detected without ever holding more than the bound. Codec contexts are created on first use and reset
 * (not freed) between streams. Read next: protocol/record_batch.c.
 */
#include "protocol/compress.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0x00};
#define XERIAL_HEADER_BYTES 16
#define LZ4_FRAME_MAGIC 0x184D2204u
#define LZ4_FLG_BLOCK_INDEPENDENT 0x20

static inline uint32_t load_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static int fail(struct gr_dstream *ds, int err)
{
    ds->state = err;
    return err;
}

void gr_dstream_init(struct gr_dstream *ds)
{
    memset(ds, 0, sizeof *ds);
}

/* Makes room for `n` bytes in the snappy block buffer. */
static int blk_reserve(struct gr_dstream *ds, size_t n)
{
    if (n <= ds->blk_cap && ds->blk) return 0;
    size_t cap = n ? n : 1;
    uint8_t *b = malloc(cap);
    if (!b) return GR_COMPRESS_ERR_NO_MEMORY;
    free(ds->blk);
    ds->blk = b;
    ds->blk_cap = cap;
    return 0;
}

/* Decompresses one raw snappy block of `n` bytes at `p` into ds->blk, checking its claimed size first. */
static int snappy_block(struct gr_dstream *ds, const uint8_t *p, size_t n)
{
    size_t ulen;
    if (snappy_uncompressed_length((const char *)p, n, &ulen) != SNAPPY_OK) return GR_COMPRESS_ERR_CORRUPT;
    if ((uint64_t)ulen > (uint64_t)n * GR_SNAPPY_EXPANSION_MAX) return GR_COMPRESS_ERR_CORRUPT;
    if ((uint64_t)ulen > ds->out_bytes_max - ds->out_bytes) return GR_COMPRESS_ERR_TOO_LARGE;
    int r = blk_reserve(ds, ulen);
    if (r) return r;
    size_t got = ulen;
    if (snappy_uncompress((const char *)p, n, (char *)ds->blk, &got) != SNAPPY_OK || got != ulen)
        return GR_COMPRESS_ERR_CORRUPT;
    ds->blk_pos = 0;
    ds->blk_len = ulen;
    return 0;
}

static int start_snappy(struct gr_dstream *ds)
{
    ds->blk_pos = ds->blk_len = 0;
    if (ds->in_len >= sizeof xerial_magic && memcmp(ds->in, xerial_magic, sizeof xerial_magic) == 0) {
        if (ds->in_len < XERIAL_HEADER_BYTES) return GR_COMPRESS_ERR_CORRUPT;
        ds->xerial = true;
        ds->in_pos = XERIAL_HEADER_BYTES;
        return 0;
    }
    ds->xerial = false;
    int r = snappy_block(ds, ds->in, ds->in_len);
    if (r) return r;
    ds->in_pos = ds->in_len;
    ds->whole = true;
    return 0;
}

static int start_gzip(struct gr_dstream *ds)
{
    if (!ds->zlib) {
        ds->zlib = calloc(1, sizeof(z_stream));
        if (!ds->zlib) return GR_COMPRESS_ERR_NO_MEMORY;
    }
    z_stream *z = ds->zlib;
    if (!ds->zlib_ready) {
        if (inflateInit2(z, 15 + 16) != Z_OK) return GR_COMPRESS_ERR_NO_MEMORY; /* gzip header required */
        ds->zlib_ready = true;
    } else if (inflateReset(z) != Z_OK) {
        return GR_COMPRESS_ERR_CORRUPT;
    }
    return 0;
}

static int start_zstd(struct gr_dstream *ds)
{
    if (!ds->zstd) {
        ds->zstd = ZSTD_createDStream();
        if (!ds->zstd) return GR_COMPRESS_ERR_NO_MEMORY;
        if (ZSTD_isError(ZSTD_DCtx_setParameter(ds->zstd, ZSTD_d_windowLogMax, GR_ZSTD_WINDOW_LOG_MAX)))
            return GR_COMPRESS_ERR_NO_MEMORY;
    }
    ZSTD_DCtx_reset(ds->zstd, ZSTD_reset_session_only);
    /* A frame that declares its size up front is refused before any work when it exceeds the bound. */
    unsigned long long declared = ZSTD_getFrameContentSize(ds->in, ds->in_len);
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR &&
        declared > ds->out_bytes_max)
        return GR_COMPRESS_ERR_TOO_LARGE;
    return 0;
}

static int start_lz4(struct gr_dstream *ds)
{
    /* Frame header: magic (4, little-endian), FLG, BD, [content size 8], [dict id 4], HC. */
    if (ds->in_len < 7) return GR_COMPRESS_ERR_CORRUPT;
    uint32_t magic = (uint32_t)ds->in[0] | ((uint32_t)ds->in[1] << 8) | ((uint32_t)ds->in[2] << 16) |
                     ((uint32_t)ds->in[3] << 24);
    if (magic != LZ4_FRAME_MAGIC) return GR_COMPRESS_ERR_CORRUPT;
    if (!(ds->in[4] & LZ4_FLG_BLOCK_INDEPENDENT)) return GR_COMPRESS_ERR_UNSUPPORTED;
    if (ds->lz4 && !ds->lz4_clean) { /* LZ4F_resetDecompressionContext does not undo every damaged state */
        LZ4F_freeDecompressionContext(ds->lz4);
        ds->lz4 = NULL;
    }
    ds->lz4_clean = false;
    if (!ds->lz4) {
        LZ4F_dctx *dctx;
        if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
            return GR_COMPRESS_ERR_NO_MEMORY;
        ds->lz4 = dctx;
    }
    LZ4F_resetDecompressionContext(ds->lz4);
    return 0;
}

int gr_dstream_start(struct gr_dstream *ds, enum gr_codec codec, const uint8_t *in, size_t in_len,
                     uint64_t out_bytes_max)
{
    assert(codec != GR_CODEC_NONE);
    assert(in || in_len == 0);
    ds->codec = codec;
    ds->in = in;
    ds->in_len = in_len;
    ds->in_pos = 0;
    ds->out_bytes = 0;
    ds->out_bytes_max = out_bytes_max;
    ds->state = 0;
    ds->member_ended = false;
    ds->xerial = false;
    ds->whole = false;
    ds->blk_pos = ds->blk_len = 0;
    int r;
    switch (codec) {
    case GR_CODEC_GZIP:
        r = start_gzip(ds);
        break;
    case GR_CODEC_SNAPPY:
        r = start_snappy(ds);
        break;
    case GR_CODEC_LZ4:
        r = start_lz4(ds);
        break;
    case GR_CODEC_ZSTD:
        r = start_zstd(ds);
        break;
    default:
        r = GR_COMPRESS_ERR_UNSUPPORTED;
        break;
    }
    return r ? fail(ds, r) : 0;
}

static int read_gzip(struct gr_dstream *ds, uint8_t *out, size_t room, size_t *got)
{
    z_stream *z = ds->zlib;
    z->next_out = out;
    z->avail_out = (uInt)room;
    while (z->avail_out) {
        if (ds->member_ended) {
            if (ds->in_pos == ds->in_len) {
                ds->state = 1;
                break;
            }
            /* Another member may follow; anything else after the stream is refused. */
            if (ds->in_len - ds->in_pos < 2 || ds->in[ds->in_pos] != 0x1f || ds->in[ds->in_pos + 1] != 0x8b)
                return GR_COMPRESS_ERR_CORRUPT;
            if (inflateReset(z) != Z_OK) return GR_COMPRESS_ERR_CORRUPT;
            ds->member_ended = false;
        }
        size_t in_left = ds->in_len - ds->in_pos;
        size_t in_before = ds->in_pos;
        uInt out_before = z->avail_out;
        z->next_in = (Bytef *)(uintptr_t)(ds->in + ds->in_pos);
        z->avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
        int zr = inflate(z, Z_NO_FLUSH);
        ds->in_pos = (size_t)((const uint8_t *)z->next_in - ds->in);
        if (zr == Z_STREAM_END) {
            ds->member_ended = true;
            continue;
        }
        if (zr == Z_MEM_ERROR) return GR_COMPRESS_ERR_NO_MEMORY;
        if (zr != Z_OK && zr != Z_BUF_ERROR) return GR_COMPRESS_ERR_CORRUPT;
        if (z->avail_out == out_before && ds->in_pos == in_before)
            return GR_COMPRESS_ERR_CORRUPT; /* no progress */
        /* Not ended, room left, input used up: the stream is truncated. */
        if (z->avail_out && ds->in_pos == ds->in_len) return GR_COMPRESS_ERR_CORRUPT;
    }
    *got = room - z->avail_out;
    return 0;
}

static int read_zstd(struct gr_dstream *ds, uint8_t *out, size_t room, size_t *got)
{
    ZSTD_outBuffer ob = {out, room, 0};
    ZSTD_inBuffer ib = {ds->in, ds->in_len, ds->in_pos};
    while (ob.pos < ob.size) {
        if (ds->member_ended && ib.pos == ib.size) {
            ds->state = 1;
            break;
        }
        size_t zr = ZSTD_decompressStream(ds->zstd, &ob, &ib);
        if (ZSTD_isError(zr)) {
            return ZSTD_getErrorCode(zr) == ZSTD_error_memory_allocation ? GR_COMPRESS_ERR_NO_MEMORY
                                                                         : GR_COMPRESS_ERR_CORRUPT;
        }
        ds->member_ended = zr == 0;
        /* Output room left means zstd flushed all it could; needing more input with none left is truncation.
         */
        if (zr != 0 && ob.pos < ob.size && ib.pos == ib.size) return GR_COMPRESS_ERR_CORRUPT;
    }
    ds->in_pos = ib.pos;
    *got = ob.pos;
    return 0;
}

static int read_lz4(struct gr_dstream *ds, uint8_t *out, size_t room, size_t *got)
{
    size_t done = 0;
    while (done < room) {
        if (ds->member_ended) {
            if (ds->in_pos != ds->in_len) return GR_COMPRESS_ERR_CORRUPT; /* bytes after the frame */
            ds->state = 1;
            ds->lz4_clean = true;
            break;
        }
        size_t dst = room - done, src = ds->in_len - ds->in_pos;
        size_t lr = LZ4F_decompress(ds->lz4, out + done, &dst, ds->in + ds->in_pos, &src, NULL);
        if (LZ4F_isError(lr)) return GR_COMPRESS_ERR_CORRUPT;
        ds->in_pos += src;
        done += dst;
        if (lr == 0) {
            ds->member_ended = true;
            continue;
        }
        if (dst == 0 && (src == 0 || ds->in_pos == ds->in_len))
            return GR_COMPRESS_ERR_CORRUPT; /* truncated */
    }
    *got = done;
    return 0;
}

static int read_snappy(struct gr_dstream *ds, uint8_t *out, size_t room, size_t *got)
{
    size_t done = 0;
    while (done < room) {
        if (ds->blk_pos < ds->blk_len) {
            size_t n = ds->blk_len - ds->blk_pos;
            if (n > room - done) n = room - done;
            memcpy(out + done, ds->blk + ds->blk_pos, n);
            ds->blk_pos += n;
            done += n;
            continue;
        }
        size_t left = ds->in_len - ds->in_pos;
        if (left == 0) {
            ds->state = 1;
            break;
        }
        const uint8_t *p = ds->in + ds->in_pos;
        if (left >= XERIAL_HEADER_BYTES && memcmp(p, xerial_magic, sizeof xerial_magic) == 0) {
            ds->in_pos += XERIAL_HEADER_BYTES; /* a concatenated stream's header */
            continue;
        }
        if (left < 4) return GR_COMPRESS_ERR_CORRUPT;
        uint32_t clen = load_be32(p);
        if (clen > left - 4) return GR_COMPRESS_ERR_CORRUPT;
        int r = snappy_block(ds, p + 4, clen);
        if (r) return r;
        ds->in_pos += 4 + (size_t)clen;
    }
    *got = done;
    return 0;
}

int gr_dstream_read(struct gr_dstream *ds, uint8_t *out, size_t cap, size_t *got)
{
    assert(cap > 0);
    *got = 0;
    if (ds->state < 0) return ds->state;
    if (ds->state == 1) return 0;
    uint64_t allowed = ds->out_bytes_max - ds->out_bytes; /* + 1 to notice a stream longer than the bound */
    size_t room = cap;
    if (allowed < UINT64_MAX && (uint64_t)room > allowed + 1) room = (size_t)(allowed + 1);
    if (room > UINT_MAX) room = UINT_MAX; /* zlib counts in uInt */
    int r;
    switch (ds->codec) {
    case GR_CODEC_GZIP:
        r = read_gzip(ds, out, room, got);
        break;
    case GR_CODEC_SNAPPY:
        r = read_snappy(ds, out, room, got);
        break;
    case GR_CODEC_LZ4:
        r = read_lz4(ds, out, room, got);
        break;
    case GR_CODEC_ZSTD:
        r = read_zstd(ds, out, room, got);
        break;
    default:
        r = GR_COMPRESS_ERR_UNSUPPORTED;
        break;
    }
    if (r) {
        *got = 0;
        return fail(ds, r);
    }
    ds->out_bytes += *got;
    if (ds->out_bytes > ds->out_bytes_max) {
        *got = 0;
        return fail(ds, GR_COMPRESS_ERR_TOO_LARGE);
    }
    return 0;
}

bool gr_dstream_whole(struct gr_dstream *ds, const uint8_t **p, size_t *n)
{
    if (ds->state < 0 || ds->codec != GR_CODEC_SNAPPY || !ds->whole || ds->blk_pos != 0) return false;
    *p = ds->blk;
    *n = ds->blk_len;
    ds->out_bytes = ds->blk_len;
    ds->blk_pos = ds->blk_len;
    ds->state = 1;
    return true;
}

void gr_dstream_trim(struct gr_dstream *ds)
{
    if (ds->blk_cap > GR_DSTREAM_KEEP_BYTES) {
        free(ds->blk);
        ds->blk = NULL;
        ds->blk_cap = ds->blk_pos = ds->blk_len = 0;
        ds->whole = false;
    }
}

void gr_dstream_free(struct gr_dstream *ds)
{
    if (ds->zlib) {
        if (ds->zlib_ready) inflateEnd(ds->zlib);
        free(ds->zlib);
    }
    if (ds->zstd) ZSTD_freeDStream(ds->zstd);
    if (ds->lz4) LZ4F_freeDecompressionContext(ds->lz4);
    free(ds->blk);
    gr_dstream_init(ds);
}

/* ---- whole-buffer compression ---- */

static int compress_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return GR_COMPRESS_ERR_NO_MEMORY;
    size_t bound = deflateBound(&z, (uLong)n);
    uint8_t *buf = malloc(bound);
    if (!buf) {
        deflateEnd(&z);
        return GR_COMPRESS_ERR_NO_MEMORY;
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)bound;
    int zr = deflate(&z, Z_FINISH);
    deflateEnd(&z);
    assert(zr == Z_STREAM_END); /* deflateBound guarantees the room */
    (void)zr;
    *out = buf;
    *out_len = bound - z.avail_out;
    return 0;
}

static int compress_snappy(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len)
{
    size_t blocks = (n + GR_SNAPPY_BLOCK_BYTES - 1) / GR_SNAPPY_BLOCK_BYTES;
    size_t bound = XERIAL_HEADER_BYTES + blocks * (4 + snappy_max_compressed_length(GR_SNAPPY_BLOCK_BYTES));
    uint8_t *buf = malloc(bound);
    if (!buf) return GR_COMPRESS_ERR_NO_MEMORY;
    memcpy(buf, xerial_magic, sizeof xerial_magic);
    store_be32(buf + 8, 1);  /* version */
    store_be32(buf + 12, 1); /* compatible version */
    size_t pos = XERIAL_HEADER_BYTES;
    for (size_t off = 0; off < n; off += GR_SNAPPY_BLOCK_BYTES) {
        size_t chunk = n - off < GR_SNAPPY_BLOCK_BYTES ? n - off : GR_SNAPPY_BLOCK_BYTES;
        size_t clen = bound - pos - 4;
        if (snappy_compress((const char *)in + off, chunk, (char *)buf + pos + 4, &clen) != SNAPPY_OK) {
            free(buf);
            return GR_COMPRESS_ERR_NO_MEMORY;
        }
        store_be32(buf + pos, (uint32_t)clen);
        pos += 4 + clen;
    }
    *out = buf;
    *out_len = pos;
    return 0;
}

static int compress_lz4(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    size_t bound = LZ4F_compressFrameBound(n, &prefs);
    uint8_t *buf = malloc(bound);
    if (!buf) return GR_COMPRESS_ERR_NO_MEMORY;
    size_t r = LZ4F_compressFrame(buf, bound, in, n, &prefs);
    if (LZ4F_isError(r)) {
        free(buf);
        return GR_COMPRESS_ERR_NO_MEMORY;
    }
    *out = buf;
    *out_len = r;
    return 0;
}

static int compress_zstd(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len)
{
    size_t bound = ZSTD_compressBound(n);
    uint8_t *buf = malloc(bound);
    if (!buf) return GR_COMPRESS_ERR_NO_MEMORY;
    size_t r = ZSTD_compress(buf, bound, in, n, ZSTD_CLEVEL_DEFAULT);
    if (ZSTD_isError(r)) {
        free(buf);
        return GR_COMPRESS_ERR_NO_MEMORY;
    }
    *out = buf;
    *out_len = r;
    return 0;
}

int gr_compress(enum gr_codec codec, const uint8_t *in, size_t n, uint8_t **out, size_t *out_len)
{
    assert(in || n == 0);
    if (n > INT32_MAX) return GR_COMPRESS_ERR_TOO_LARGE;
    switch (codec) {
    case GR_CODEC_NONE: {
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf) return GR_COMPRESS_ERR_NO_MEMORY;
        if (n) memcpy(buf, in, n);
        *out = buf;
        *out_len = n;
        return 0;
    }
    case GR_CODEC_GZIP:
        return compress_gzip(in, n, out, out_len);
    case GR_CODEC_SNAPPY:
        return compress_snappy(in, n, out, out_len);
    case GR_CODEC_LZ4:
        return compress_lz4(in, n, out, out_len);
    case GR_CODEC_ZSTD:
        return compress_zstd(in, n, out, out_len);
    }
    return GR_COMPRESS_ERR_UNSUPPORTED;
}

int gr_decompress(enum gr_codec codec, const uint8_t *in, size_t n, uint64_t out_bytes_max, uint8_t **out,
                  size_t *out_len)
{
    if (codec == GR_CODEC_NONE) {
        if (n > out_bytes_max) return GR_COMPRESS_ERR_TOO_LARGE;
        return gr_compress(GR_CODEC_NONE, in, n, out, out_len);
    }
    struct gr_dstream ds;
    gr_dstream_init(&ds);
    int r = gr_dstream_start(&ds, codec, in, n, out_bytes_max);
    if (r) goto done;
    const uint8_t *whole;
    size_t whole_len;
    if (gr_dstream_whole(&ds, &whole, &whole_len)) {
        *out = ds.blk; /* take the buffer instead of copying it */
        *out_len = whole_len;
        ds.blk = NULL;
        goto done;
    }
    size_t cap = 64 * 1024, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        r = GR_COMPRESS_ERR_NO_MEMORY;
        goto done;
    }
    for (;;) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                r = GR_COMPRESS_ERR_NO_MEMORY;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got;
        r = gr_dstream_read(&ds, buf + len, cap - len, &got);
        if (r || got == 0) break;
        len += got;
    }
    if (r) {
        free(buf);
    } else {
        *out = buf;
        *out_len = len;
    }
done:
    gr_dstream_free(&ds);
    return r;
}
