/*
 * test_compress.c: the codecs of compress.h. Round trips for each codec; the exact bytes Kafka readers
 * need (xerial snappy header, lz4 frame descriptor and its KIP-57 header checksum, gzip magic); raw
 * snappy as librdkafka writes it; concatenated gzip members, zstd frames and xerial streams; refusal of
 * truncated, trailing, lying and oversized input; streaming reads in tiny pieces; reuse of one
 * decompressor across codecs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "protocol/compress.h"

static const enum gr_codec codecs[] = {GR_CODEC_GZIP, GR_CODEC_SNAPPY, GR_CODEC_LZ4, GR_CODEC_ZSTD};
#define NCODECS (sizeof codecs / sizeof codecs[0])
#define MiB (1024 * 1024)

/* Compressible but not trivial input: words from a small vocabulary chosen by a fixed PRNG. */
static uint8_t *make_input(size_t n)
{
    static const char *words[] = {"kafka ",  "gregor ", "batch ", "record ",
                                  "offset ", "{\"k\":", "42}, ",  "\n"};
    uint8_t *b = malloc(n ? n : 1);
    uint32_t x = 12345;
    size_t i = 0;
    while (i < n) {
        x = x * 1103515245u + 12345u;
        const char *w = words[(x >> 16) % 8];
        for (size_t j = 0; w[j] && i < n; j++)
            b[i++] = (uint8_t)w[j];
    }
    return b;
}

static void roundtrip(enum gr_codec codec, const uint8_t *in, size_t n)
{
    uint8_t *c, *d;
    size_t clen, dlen;
    assert_int_equal(gr_compress(codec, in, n, &c, &clen), 0);
    assert_int_equal(gr_decompress(codec, c, clen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, n);
    if (n) assert_memory_equal(d, in, n);
    free(c);
    free(d);
}

static void test_roundtrip_all_codecs(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 100, 32 * 1024, 32 * 1024 + 1, 65536 + 3, 1 * MiB + 17};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint8_t *in = make_input(sizes[s]);
        for (size_t c = 0; c < NCODECS; c++)
            roundtrip(codecs[c], in, sizes[s]);
        roundtrip(GR_CODEC_NONE, in, sizes[s]);
        free(in);
    }
}

static void test_snappy_xerial_header_and_blocks(void **state)
{
    (void)state;
    static const uint8_t header[16] = {0x82, 0x53, 0x4E, 0x41, 0x50, 0x50, 0x59, 0x00,
                                       0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01};
    size_t n = 70000; /* three blocks: 32768 + 32768 + 4464 */
    uint8_t *in = make_input(n), *c;
    size_t clen;
    assert_int_equal(gr_compress(GR_CODEC_SNAPPY, in, n, &c, &clen), 0);
    assert_memory_equal(c, header, 16);
    size_t pos = 16, off = 0, blocks = 0;
    char out[32768];
    while (pos < clen) {
        uint32_t blen = ((uint32_t)c[pos] << 24) | ((uint32_t)c[pos + 1] << 16) |
                        ((uint32_t)c[pos + 2] << 8) | c[pos + 3];
        size_t ulen = sizeof out;
        assert_int_equal(snappy_uncompress((const char *)c + pos + 4, blen, out, &ulen), SNAPPY_OK);
        size_t expect = n - off < 32768 ? n - off : 32768;
        assert_int_equal(ulen, expect);
        assert_memory_equal(out, in + off, ulen);
        off += ulen;
        pos += 4 + blen;
        blocks++;
    }
    assert_int_equal(pos, clen);
    assert_int_equal(blocks, 3);
    assert_int_equal(off, n);
    free(c);
    free(in);
}

static void test_snappy_raw_and_concatenated_xerial(void **state)
{
    (void)state;
    size_t n = 50000;
    uint8_t *in = make_input(n), *d;
    size_t dlen;
    /* Raw snappy, one block, as librdkafka writes it. */
    size_t rlen = snappy_max_compressed_length(n);
    char *raw = malloc(rlen);
    assert_int_equal(snappy_compress((const char *)in, n, raw, &rlen), SNAPPY_OK);
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, (uint8_t *)raw, rlen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, n);
    assert_memory_equal(d, in, n);
    free(d);
    /* Two xerial streams back to back (the second header is skipped). */
    uint8_t *a, *b;
    size_t alen, blen;
    assert_int_equal(gr_compress(GR_CODEC_SNAPPY, in, 20000, &a, &alen), 0);
    assert_int_equal(gr_compress(GR_CODEC_SNAPPY, in + 20000, n - 20000, &b, &blen), 0);
    uint8_t *cat = malloc(alen + blen);
    memcpy(cat, a, alen);
    memcpy(cat + alen, b, blen);
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, cat, alen + blen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, n);
    assert_memory_equal(d, in, n);
    free(d);
    /* A header alone is an empty stream. */
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, a, 16, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, 0);
    free(d);
    /* Block length beyond the input, and a partial length field, are corrupt. */
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, a, alen - 1, 64 * MiB, &d, &dlen),
                     GR_COMPRESS_ERR_CORRUPT);
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, a, 18, 64 * MiB, &d, &dlen), GR_COMPRESS_ERR_CORRUPT);
    free(cat);
    free(a);
    free(b);
    free(raw);
    free(in);
}

static void test_snappy_lying_lengths(void **state)
{
    (void)state;
    uint8_t *d;
    size_t dlen;
    /* Raw block claiming 1 GiB (varint 80 80 80 80 04) from 7 bytes: refused by the expansion bound
     * before any allocation. */
    static const uint8_t lie[] = {0x80, 0x80, 0x80, 0x80, 0x04, 0x00, 0x61};
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, lie, sizeof lie, 2048ull * MiB, &d, &dlen),
                     GR_COMPRESS_ERR_CORRUPT);
    /* Claiming 100 bytes from 7 (within 22x) but holding one literal: snappy refuses it. */
    static const uint8_t short_lie[] = {100, 0x00, 0x61, 0x00, 0x00, 0x00, 0x00};
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, short_lie, sizeof short_lie, MiB, &d, &dlen),
                     GR_COMPRESS_ERR_CORRUPT);
    /* An honest block larger than the caller's bound. */
    uint8_t *in = make_input(100000), *c;
    size_t clen;
    assert_int_equal(gr_compress(GR_CODEC_SNAPPY, in, 100000, &c, &clen), 0);
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, c, clen, 99999, &d, &dlen), GR_COMPRESS_ERR_TOO_LARGE);
    assert_int_equal(gr_decompress(GR_CODEC_SNAPPY, c, clen, 100000, &d, &dlen), 0);
    assert_int_equal(dlen, 100000);
    free(d);
    free(c);
    free(in);
}

/* xxHash32 of a short input (< 16 bytes), seed 0: the lz4 frame header checksum's hash. */
static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}
static uint32_t xxh32_short(const uint8_t *p, size_t n)
{
    const uint32_t P1 = 0x9E3779B1u, P2 = 0x85EBCA77u, P3 = 0xC2B2AE3Du, P4 = 0x27D4EB2Fu, P5 = 0x165667B1u;
    uint32_t h = P5 + (uint32_t)n;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w = (uint32_t)p[i] | ((uint32_t)p[i + 1] << 8) | ((uint32_t)p[i + 2] << 16) |
                     ((uint32_t)p[i + 3] << 24);
        h = rotl32(h + w * P3, 17) * P4;
    }
    for (; i < n; i++)
        h = rotl32(h + p[i] * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

static void test_lz4_frame_header(void **state)
{
    (void)state;
    uint8_t *in = make_input(200000), *c, *d;
    size_t clen, dlen;
    assert_int_equal(gr_compress(GR_CODEC_LZ4, in, 200000, &c, &clen), 0);
    /* Magic 0x184D2204 little-endian; FLG 0x60 = version 01, independent blocks, no checksums, no
     * content size; BD 0x40 = 64 KiB blocks; HC = second byte of xxh32(FLG..BD). */
    static const uint8_t magic[4] = {0x04, 0x22, 0x4D, 0x18};
    assert_memory_equal(c, magic, 4);
    assert_int_equal(c[4], 0x60);
    assert_int_equal(c[5], 0x40);
    assert_int_equal(c[6], (xxh32_short(c + 4, 2) >> 8) & 0xFF);
    /* A wrong header checksum is refused. */
    c[6] ^= 0x01;
    assert_int_equal(gr_decompress(GR_CODEC_LZ4, c, clen, 64 * MiB, &d, &dlen), GR_COMPRESS_ERR_CORRUPT);
    c[6] ^= 0x01;
    assert_int_equal(gr_decompress(GR_CODEC_LZ4, c, clen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, 200000);
    free(d);
    free(c);
    /* Linked blocks are valid lz4 but Kafka's Java reader refuses them, so do we. */
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockMode = LZ4F_blockLinked;
    size_t bound = LZ4F_compressFrameBound(200000, &prefs);
    uint8_t *linked = malloc(bound);
    size_t llen = LZ4F_compressFrame(linked, bound, in, 200000, &prefs);
    assert_false(LZ4F_isError(llen));
    assert_int_equal(gr_decompress(GR_CODEC_LZ4, linked, llen, 64 * MiB, &d, &dlen),
                     GR_COMPRESS_ERR_UNSUPPORTED);
    /* The content checksum and content size options of other writers are accepted. */
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    prefs.frameInfo.contentSize = 200000;
    bound = LZ4F_compressFrameBound(200000, &prefs);
    free(linked);
    linked = malloc(bound);
    llen = LZ4F_compressFrame(linked, bound, in, 200000, &prefs);
    assert_false(LZ4F_isError(llen));
    assert_int_equal(gr_decompress(GR_CODEC_LZ4, linked, llen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, 200000);
    assert_memory_equal(d, in, 200000);
    free(d);
    linked[llen - 1] ^= 0x55; /* content checksum now wrong */
    assert_int_equal(gr_decompress(GR_CODEC_LZ4, linked, llen, 64 * MiB, &d, &dlen), GR_COMPRESS_ERR_CORRUPT);
    free(linked);
    free(in);
}

static void test_gzip_forms(void **state)
{
    (void)state;
    uint8_t *in = make_input(30000), *a, *b, *d;
    size_t alen, blen, dlen;
    assert_int_equal(gr_compress(GR_CODEC_GZIP, in, 10000, &a, &alen), 0);
    assert_int_equal(gr_compress(GR_CODEC_GZIP, in + 10000, 20000, &b, &blen), 0);
    assert_int_equal(a[0], 0x1f);
    assert_int_equal(a[1], 0x8b);
    assert_int_equal(a[2], 8); /* deflate */
    /* Two members back to back read as one stream. */
    uint8_t *cat = malloc(alen + blen + 3);
    memcpy(cat, a, alen);
    memcpy(cat + alen, b, blen);
    assert_int_equal(gr_decompress(GR_CODEC_GZIP, cat, alen + blen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, 30000);
    assert_memory_equal(d, in, 30000);
    free(d);
    /* Trailing bytes that are not a member are refused. */
    memcpy(cat + alen, "abc", 3);
    assert_int_equal(gr_decompress(GR_CODEC_GZIP, cat, alen + 3, 64 * MiB, &d, &dlen),
                     GR_COMPRESS_ERR_CORRUPT);
    /* A zlib (RFC 1950) stream is not gzip: refused, as Java's GZIPInputStream would. */
    uLongf zlen = compressBound(10000);
    uint8_t *z = malloc(zlen);
    assert_int_equal(compress(z, &zlen, in, 10000), Z_OK);
    assert_int_equal(gr_decompress(GR_CODEC_GZIP, z, zlen, 64 * MiB, &d, &dlen), GR_COMPRESS_ERR_CORRUPT);
    /* A flipped byte in the CRC-32 trailer is caught. */
    a[alen - 5] ^= 0x80;
    assert_int_equal(gr_decompress(GR_CODEC_GZIP, a, alen, 64 * MiB, &d, &dlen), GR_COMPRESS_ERR_CORRUPT);
    free(z);
    free(cat);
    free(a);
    free(b);
    free(in);
}

static void test_zstd_frames_and_declared_size(void **state)
{
    (void)state;
    uint8_t *in = make_input(3 * MiB), *a, *b, *d;
    size_t alen, blen, dlen;
    assert_int_equal(gr_compress(GR_CODEC_ZSTD, in, MiB, &a, &alen), 0);
    assert_int_equal(gr_compress(GR_CODEC_ZSTD, in + MiB, 2 * MiB, &b, &blen), 0);
    uint8_t *cat = malloc(alen + blen);
    memcpy(cat, a, alen);
    memcpy(cat + alen, b, blen);
    assert_int_equal(gr_decompress(GR_CODEC_ZSTD, cat, alen + blen, 64 * MiB, &d, &dlen), 0);
    assert_int_equal(dlen, 3 * MiB);
    assert_memory_equal(d, in, 3 * MiB);
    free(d);
    /* The 2 MiB frame declares its size: refused at start against a 1 MiB bound, before decoding. */
    struct gr_dstream ds;
    gr_dstream_init(&ds);
    assert_int_equal(gr_dstream_start(&ds, GR_CODEC_ZSTD, b, blen, MiB), GR_COMPRESS_ERR_TOO_LARGE);
    size_t got;
    uint8_t one[16];
    assert_int_equal(gr_dstream_read(&ds, one, sizeof one, &got), GR_COMPRESS_ERR_TOO_LARGE);
    assert_int_equal(got, 0);
    gr_dstream_free(&ds);
    /* The concatenation passes the start check (first frame is 1 MiB) but is cut at the bound. */
    assert_int_equal(gr_decompress(GR_CODEC_ZSTD, cat, alen + blen, 2 * MiB, &d, &dlen),
                     GR_COMPRESS_ERR_TOO_LARGE);
    free(cat);
    free(a);
    free(b);
    free(in);
}

static void test_truncation_everywhere(void **state)
{
    (void)state;
    uint8_t *in = make_input(5000), *c, *d;
    size_t clen, dlen;
    for (size_t k = 0; k < NCODECS; k++) {
        assert_int_equal(gr_compress(codecs[k], in, 5000, &c, &clen), 0);
        for (size_t cut = 0; cut < clen; cut++) {
            int r = gr_decompress(codecs[k], c, cut, 64 * MiB, &d, &dlen);
            if (codecs[k] == GR_CODEC_SNAPPY && r == 0) {
                /* xerial: a prefix ending on a block boundary is a shorter valid stream (header only here).
                 */
                assert_int_equal(cut, 16);
                assert_int_equal(dlen, 0);
                free(d);
                continue;
            }
            if (r != GR_COMPRESS_ERR_CORRUPT) fail_msg("codec %d cut %zu/%zu: %d", codecs[k], cut, clen, r);
        }
        /* And one byte too many. */
        uint8_t *more = malloc(clen + 1);
        memcpy(more, c, clen);
        more[clen] = 0;
        assert_int_equal(gr_decompress(codecs[k], more, clen + 1, 64 * MiB, &d, &dlen),
                         GR_COMPRESS_ERR_CORRUPT);
        free(more);
        free(c);
    }
    free(in);
}

static void test_bound_on_output(void **state)
{
    (void)state;
    size_t n = 4 * MiB;
    uint8_t *zeros = calloc(1, n), *c, *d;
    size_t clen, dlen;
    for (size_t k = 0; k < NCODECS; k++) {
        assert_int_equal(gr_compress(codecs[k], zeros, n, &c, &clen), 0);
        assert_true(clen < n / 16);
        assert_int_equal(gr_decompress(codecs[k], c, clen, n - 1, &d, &dlen), GR_COMPRESS_ERR_TOO_LARGE);
        assert_int_equal(gr_decompress(codecs[k], c, clen, n, &d, &dlen), 0);
        assert_int_equal(dlen, n);
        free(d);
        free(c);
    }
    free(zeros);
}

static void test_streaming_small_reads_and_reuse(void **state)
{
    (void)state;
    size_t n = 150000;
    uint8_t *in = make_input(n), *out = malloc(n + 1);
    struct gr_dstream ds;
    gr_dstream_init(&ds);
    for (int round = 0; round < 2; round++) /* the second round reuses every context */
        for (size_t k = 0; k < NCODECS; k++) {
            uint8_t *c;
            size_t clen, len = 0, got;
            assert_int_equal(gr_compress(codecs[k], in, n, &c, &clen), 0);
            assert_int_equal(gr_dstream_start(&ds, codecs[k], c, clen, n), 0);
            do {
                assert_int_equal(gr_dstream_read(&ds, out + len, 7 < n + 1 - len ? 7 : n + 1 - len, &got), 0);
                len += got;
            } while (got);
            assert_int_equal(len, n);
            assert_memory_equal(out, in, n);
            assert_int_equal(gr_dstream_read(&ds, out, 7, &got), 0); /* stays ended */
            assert_int_equal(got, 0);
            gr_dstream_trim(&ds);
            free(c);
        }
    gr_dstream_free(&ds);
    free(out);
    free(in);
}

/* A context left mid-frame by a damaged LZ4 frame (found by the fuzz replay: this frame declares a content
 * size and its block lies) must not damage the next, valid frame on the same decompressor: the validator
 * keeps one per thread, so a producer's bad batch would otherwise get the next good batch refused as corrupt.
 */
static void test_lz4_context_after_a_damaged_frame(void **state)
{
    (void)state;
    static const uint8_t damaged[] = {
        0x04, 0x22, 0x4d, 0x18, 0x68, 0x40, 0x82, 0x32, 0x00, 0x00, 0x00, 0xf7, 0x08, 0x16, 0x00, 0x00, 0x00,
        0x01, 0x0a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x46, 0x00, 0x0a, 0x02, 0x06, 0x6b, 0x65, 0x79, 0x22,
        0x77, 0x6f, 0x72, 0x6c, 0x64, 0x20, 0x06, 0x00, 0xf0, 0x02, 0x04, 0x04, 0x68, 0x31, 0x00, 0x76, 0x04,
        0x68, 0x32, 0x01, 0x0c, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    size_t n = 501;
    uint8_t *in = make_input(n), *out = malloc(64 * 1024);
    uint8_t *c;
    size_t clen, got, len;
    assert_int_equal(gr_compress(GR_CODEC_LZ4, in, n, &c, &clen), 0);
    struct gr_dstream ds;
    gr_dstream_init(&ds);
    for (int k = 0; k < 3; k++) {
        int r = gr_dstream_start(&ds, GR_CODEC_LZ4, damaged, sizeof damaged, 1 << 20);
        if (r == 0) {
            while ((r = gr_dstream_read(&ds, out, 64 * 1024, &got)) == 0 && got)
                ;
        }
        assert_true(r < 0); /* the damaged frame fails, wherever it does */
        assert_int_equal(gr_dstream_start(&ds, GR_CODEC_LZ4, c, clen, 1 << 20), 0);
        len = 0;
        do {
            assert_int_equal(gr_dstream_read(&ds, out + len, 64 * 1024 - len, &got), 0);
            len += got;
        } while (got);
        assert_int_equal(len, n);
        assert_memory_equal(out, in, n);
    }
    gr_dstream_free(&ds);
    free(c);
    free(out);
    free(in);
}

static void test_trim_releases_big_snappy_buffer(void **state)
{
    (void)state;
    size_t n = 3 * MiB;
    uint8_t *in = make_input(n);
    size_t rlen = snappy_max_compressed_length(n);
    char *raw = malloc(rlen);
    assert_int_equal(snappy_compress((const char *)in, n, raw, &rlen), SNAPPY_OK);
    struct gr_dstream ds;
    gr_dstream_init(&ds);
    assert_int_equal(gr_dstream_start(&ds, GR_CODEC_SNAPPY, (uint8_t *)raw, rlen, 64 * MiB), 0);
    const uint8_t *p;
    size_t len;
    assert_true(gr_dstream_whole(&ds, &p, &len));
    assert_int_equal(len, n);
    assert_memory_equal(p, in, n);
    assert_false(gr_dstream_whole(&ds, &p, &len)); /* consumed */
    assert_true(ds.blk_cap >= n);
    gr_dstream_trim(&ds);
    assert_null(ds.blk);
    assert_int_equal(ds.blk_cap, 0);
    /* Still usable: a small xerial stream keeps its (small) block buffer across trim. */
    uint8_t *c, out[64];
    size_t clen, got;
    assert_int_equal(gr_compress(GR_CODEC_SNAPPY, in, 50, &c, &clen), 0);
    assert_int_equal(gr_dstream_start(&ds, GR_CODEC_SNAPPY, c, clen, 64 * MiB), 0);
    assert_false(gr_dstream_whole(&ds, &p, &len));
    assert_int_equal(gr_dstream_read(&ds, out, sizeof out, &got), 0);
    assert_int_equal(got, 50);
    assert_memory_equal(out, in, 50);
    gr_dstream_trim(&ds);
    assert_non_null(ds.blk);
    gr_dstream_free(&ds);
    free(c);
    free(raw);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_codecs),
        cmocka_unit_test(test_snappy_xerial_header_and_blocks),
        cmocka_unit_test(test_snappy_raw_and_concatenated_xerial),
        cmocka_unit_test(test_snappy_lying_lengths),
        cmocka_unit_test(test_lz4_frame_header),
        cmocka_unit_test(test_gzip_forms),
        cmocka_unit_test(test_zstd_frames_and_declared_size),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_bound_on_output),
        cmocka_unit_test(test_streaming_small_reads_and_reuse),
        cmocka_unit_test(test_trim_releases_big_snappy_buffer),
        cmocka_unit_test(test_lz4_context_after_a_damaged_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
