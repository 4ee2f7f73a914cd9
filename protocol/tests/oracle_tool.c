/*
 * oracle_tool.c: Gregor's half of the cross-check against Kafka's own message classes (protocol/oracle).
 *   gr_oracle_tool decode IN OUT   for each vector Kafka wrote (api, kind, version, hex, json): decode the
 *                                  bytes, require every byte consumed, re-encode and require the same bytes,
 *                                  then write the vector back with Gregor's JSON rendering for the Java side
 *                                  to compare against Kafka's reading of the same bytes.
 *   gr_oracle_tool gen OUT SEED N  write N random vectors per message and version for Kafka to decode.
 * Line format: api_key TAB kind TAB version TAB hex TAB json. Ends with "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/gen/messages.h"
#include "protocol/header.h"
#include "protocol/tests/support.h"

static int decode_file(const char *in, const char *out)
{
    FILE *f = fopen(in, "r");
    FILE *o = fopen(out, "w");
    if (!f || !o) {
        perror("open");
        return 2;
    }
    size_t cap = 0;
    char *line = NULL;
    ssize_t len;
    int passed = 0, failed = 0, skipped = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        char *fields[5];
        char *p = line;
        int nf = 0;
        for (; nf < 5; nf++) {
            fields[nf] = p;
            char *tab = strchr(p, nf < 4 ? '\t' : '\n');
            if (!tab) {
                if (nf == 4) {
                    nf++;
                    break;
                }
                break;
            }
            *tab = 0;
            p = tab + 1;
        }
        if (nf < 5) continue;
        int16_t api = (int16_t)atoi(fields[0]);
        bool response = strcmp(fields[1], "response") == 0;
        int16_t v = (int16_t)atoi(fields[2]);
        const struct gr_msg_ops *ops = gr_msg_ops_find(api, response);
        const struct gr_msg_test_ops *tops = gr_msg_test_ops_find(api, response);
        if (!ops || v < ops->version_min || v > ops->version_max) {
            skipped++;
            continue;
        }
        size_t hexlen = strlen(fields[3]);
        uint8_t *bytes = malloc(hexlen / 2 + 1);
        long n = gr_hex_decode(fields[3], hexlen, bytes);
        struct gr_arena a;
        gr_arena_init(&a, 0);
        void *m = gr_arena_alloc(&a, ops->struct_bytes);
        struct gr_rd rd;
        gr_rd_init(&rd, bytes, n < 0 ? 0 : (size_t)n, &a);
        int err = n < 0 ? -1 : ops->decode(&rd, v, m);
        bool ok = err == 0 && gr_rd_left(&rd) == 0;
        if (!ok) {
            fprintf(stderr, "FAIL decode %s v%d: err %d, %zu bytes left\n", ops->name, v, err,
                    gr_rd_left(&rd));
        } else {
            size_t sz = ops->size(m, v);
            uint8_t *re = malloc(sz + 1);
            struct gr_wr wr;
            gr_wr_init(&wr, re, sz);
            ops->encode(&wr, m, v);
            if (sz != (size_t)n || memcmp(re, bytes, sz) != 0) {
                ok = false;
                size_t at = 0;
                while (at < sz && at < (size_t)n && re[at] == bytes[at])
                    at++;
                fprintf(stderr, "FAIL re-encode %s v%d: size %zu vs %ld, first difference at byte %zu\n",
                        ops->name, v, sz, n, at);
            }
            free(re);
        }
        if (ok) {
            struct gr_sb sb;
            gr_sb_init(&sb);
            tops->json(&sb, m, v);
            fprintf(o, "%d\t%s\t%d\t%s\t%s\n", api, fields[1], v, fields[3], sb.buf);
            gr_sb_free(&sb);
            passed++;
        } else {
            failed++;
        }
        free(bytes);
        gr_arena_reset(&a);
    }
    free(line);
    fclose(f);
    fclose(o);
    fprintf(stderr, "decode: %d skipped (versions Gregor does not encode)\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

static int gen_file(const char *out, uint64_t seed, int per_version)
{
    FILE *o = fopen(out, "w");
    if (!o) {
        perror("open");
        return 2;
    }
    struct gr_rng rng;
    gr_rng_seed(&rng, seed);
    int written = 0;
    for (int i = 0; i < gr_msg_ops_count; i++) {
        const struct gr_msg_ops *ops = &gr_msg_ops_table[i];
        /* Gregor-internal APIs (protocol/header.h GR_API_KEY_INTERNAL_MIN: PartitionSummary) have no Kafka
           class to decode them; their codec is checked by its own unit test (test_part_summary_local.c) */
        if (ops->api_key >= GR_API_KEY_INTERNAL_MIN) continue;
        const struct gr_msg_test_ops *tops = gr_msg_test_ops_find(ops->api_key, ops->response);
        for (int16_t v = ops->version_min; v <= ops->version_max; v++) {
            for (int r = 0; r < per_version; r++) {
                struct gr_arena a;
                gr_arena_init(&a, 0);
                void *m = gr_arena_alloc(&a, ops->struct_bytes);
                tops->random(&rng, &a, m, v);
                size_t sz = ops->size(m, v);
                uint8_t *buf = malloc(sz + 1);
                struct gr_wr wr;
                gr_wr_init(&wr, buf, sz);
                ops->encode(&wr, m, v);
                struct gr_sb sb, hex;
                gr_sb_init(&sb);
                gr_sb_init(&hex);
                gr_sb_hex(&hex, buf, sz);
                tops->json(&sb, m, v);
                fprintf(o, "%d\t%s\t%d\t%s\t%s\n", ops->api_key, ops->response ? "response" : "request", v,
                        hex.buf ? hex.buf : "", sb.buf);
                gr_sb_free(&sb);
                gr_sb_free(&hex);
                free(buf);
                gr_arena_reset(&a);
                written++;
            }
        }
    }
    fclose(o);
    fprintf(stderr, "gen: %d vectors\n", written);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "decode") == 0) return decode_file(argv[2], argv[3]);
    if (argc == 5 && strcmp(argv[1], "gen") == 0)
        return gen_file(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
    fprintf(stderr, "usage: gr_oracle_tool decode IN OUT | gen OUT SEED N\n");
    return 2;
}
