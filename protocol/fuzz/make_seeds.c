/*
 * make_seeds.c: writes a seed corpus for fuzz_protocol into the directory given as argv[1]: for every
 * API x version of the codec one request frame and one response frame (random field values from the
 * test support's generator, a fixed seed, so the corpus is the same on every run), and record batches
 * built by gr_batch_build with each codec under several flag sets (stored rules; client rules with the
 * "recompute CRC" flag; the same plus recompression), and, per compressing codec, a batch holding a
 * 100 KB record, bigger than the validator's 64 KiB window, so that its streaming path is reached. The golden
 * frames captured from real clients are added by protocol/fuzz/run.sh. Input layout: see fuzz_protocol.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/record_batch.h"
#include "protocol/tests/support.h"

/* Seeds above this are skipped (libFuzzer runs with -max_len in run.sh; big seeds slow every mutation). */
#define SEED_BYTES_MAX 8192

static int write_seed(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "make_seeds: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t w = fwrite(p, 1, n, f);
    if (fclose(f) != 0 || w != n) {
        fprintf(stderr, "make_seeds: short write to %s\n", path);
        return -1;
    }
    return 0;
}

/* One frame for ops at version v: mode byte, then (request) header + body or (response) key, version,
 * response header, body. Returns the number of seeds written (0 or 1), -1 on I/O error. */
static int message_seed(const char *dir, const struct gr_msg_ops *ops, int16_t v, struct gr_rng *rng)
{
    const struct gr_msg_test_ops *tops = gr_msg_test_ops_find(ops->api_key, ops->response);
    if (!tops) return 0;
    struct gr_arena a;
    gr_arena_init(&a, 0);
    void *m = gr_arena_alloc(&a, ops->struct_bytes);
    int written = 0;
    for (int attempt = 0; attempt < 20 && !written; attempt++) {
        tops->random(rng, &a, m, v);
        size_t body = ops->size(m, v);
        struct gr_request_header h = {ops->api_key, v, 1000 + v, gr_str_c("seed-client"), {NULL, 0}};
        int16_t hv = ops->response ? gr_response_header_version(ops, v)
                                   : gr_request_header_version(v, ops->flexible_min);
        size_t head = ops->response ? 4 + gr_response_header_size(hv) : gr_request_header_size(&h, hv);
        size_t n = 1 + head + body;
        if (n > SEED_BYTES_MAX) continue;
        uint8_t *buf = malloc(n);
        struct gr_wr wr;
        gr_wr_init(&wr, buf, n);
        gr_wr_int8(&wr, ops->response ? 1 : 0);
        if (ops->response) {
            gr_wr_int16(&wr, ops->api_key);
            gr_wr_int16(&wr, v);
            gr_response_header_encode(&wr, hv, 1000 + v);
        } else {
            gr_request_header_encode(&wr, &h, hv);
        }
        ops->encode(&wr, m, v);
        char name[128];
        snprintf(name, sizeof name, "%s-%s-v%d", ops->response ? "resp" : "req", ops->name, v);
        written = write_seed(dir, name, buf, n) == 0 ? 1 : -1;
        free(buf);
    }
    gr_arena_reset(&a);
    return written;
}

static int batch_seeds(const char *dir)
{
    static const char *codec_names[] = {"none", "gzip", "snappy", "lz4", "zstd"};
    struct gr_record_header hdrs[2] = {{{(const uint8_t *)"h1", 2}, {(const uint8_t *)"v", 1}},
                                       {{(const uint8_t *)"h2", 2}, GR_BYTES_NULL}};
    struct gr_record_in recs[3] = {
        {1700000000000, GR_BYTES_NULL, {(const uint8_t *)"hello", 5}, NULL, 0},
        {1700000000005, {(const uint8_t *)"key", 3}, {(const uint8_t *)"world world world", 17}, hdrs, 2},
        {1700000000003, {(const uint8_t *)"", 0}, GR_BYTES_NULL, NULL, 0},
    };
    /* a record bigger than the validator's 64 KiB window (its streaming path), compressible */
    static uint8_t big_value[100000];
    for (size_t i = 0; i < sizeof big_value; i++)
        big_value[i] = (uint8_t)("gregor fuzz seed "[i % 17]);
    struct gr_record_in big[2] = {
        {1700000000000, {(const uint8_t *)"big", 3}, {big_value, (int32_t)sizeof big_value}, hdrs, 2},
        {1700000000001, GR_BYTES_NULL, {(const uint8_t *)"small", 5}, NULL, 0},
    };
    int count = 0;
    for (int c = GR_CODEC_GZIP; c <= GR_CODEC_ZSTD; c++) {
        struct gr_batch_params bp = {0, -1, (enum gr_codec)c, 0, 0, -1, -1, -1};
        uint8_t *b;
        size_t n;
        if (gr_batch_build(&bp, big, 2, &b, &n) != 0) return -1;
        if (n + 2 > SEED_BYTES_MAX) { /* snappy expands too little to fit; skip */
            free(b);
            continue;
        }
        uint8_t *seed = malloc(n + 2);
        memcpy(seed + 2, b, n);
        seed[0] = 2;
        seed[1] = (uint8_t)(1 | 4 | 8 | ((c % 4 + 1) << 4)); /* client rules, CRC fix, recompress */
        char name[64];
        snprintf(name, sizeof name, "batch-%s-big-record", codec_names[c]);
        if (write_seed(dir, name, seed, n + 2) != 0) return -1;
        count++;
        free(seed);
        free(b);
    }
    for (int c = 0; c <= GR_CODEC_ZSTD; c++) {
        for (int idem = 0; idem < 2; idem++) {
            struct gr_batch_params bp = {
                0, -1, (enum gr_codec)c, 0, 0, idem ? 4000 : -1, idem ? 0 : -1, idem ? 0 : -1};
            uint8_t *b;
            size_t n;
            if (gr_batch_build(&bp, recs, 3, &b, &n) != 0) return -1;
            uint8_t *seed = malloc(n + 2);
            memcpy(seed + 2, b, n);
            seed[0] = 2;
            /* 0: stored rules; 5: client rules + CRC fix; 0x2d / 0x4d: also recompress to gzip / lz4 */
            static const uint8_t flag_sets[] = {0, 5, 0x2d, 0x4d};
            for (size_t f = 0; f < sizeof flag_sets; f++) {
                int flags = flag_sets[f];
                seed[1] = (uint8_t)flags;
                char name[64];
                snprintf(name, sizeof name, "batch-%s-%s-f%d", codec_names[c], idem ? "idem" : "plain",
                         flags);
                if (write_seed(dir, name, seed, n + 2) != 0) return -1;
                count++;
            }
            free(seed);
            free(b);
        }
    }
    return count;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    struct gr_rng rng;
    gr_rng_seed(&rng, 20240509);
    int total = 0;
    for (int i = 0; i < gr_msg_ops_count; i++) {
        const struct gr_msg_ops *ops = &gr_msg_ops_table[i];
        for (int16_t v = ops->version_min; v <= ops->version_max; v++) {
            int r = message_seed(argv[1], ops, v, &rng);
            if (r < 0) return 1;
            total += r;
        }
    }
    int b = batch_seeds(argv[1]);
    if (b < 0) return 1;
    total += b;
    printf("make_seeds: %d seeds written to %s\n", total, argv[1]);
    return 0;
}
