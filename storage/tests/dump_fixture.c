/*
 * dump_fixture.c: writes a log directory for kafka_dump_check.sh, which runs Apache Kafka's own
 * DumpLogSegments over it. Topic "dump", 1 partition, segment.bytes 3000: 60 batches of 1..4 records
 * cycling through the five codecs, producer ids on every third batch, one LogAppendTime batch (number 7),
 * values "<batch>:<record>". Prints "batches 60 records <n> last_offset <n-1>" and exits 0.
 * Topic "cdump" (cleanup.policy=compact, segment.bytes 3000): 80 batches of keyed records (10 keys, every
 * seventh record a tombstone, five codecs, a producer id on every fourth batch), cleaned twice so that
 * batches with tombstones carry a delete horizon and emptied batches remain as headers. Prints
 * "compacted records <kept> last_offset <n>" on a second line.
 * Usage: dump_fixture <empty dir>
 */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "storage/cleaner.h"
#include "storage/store.h"
#include "storage/tests/helpers.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    struct gr_store_config cfg;
    gr_store_config_defaults(&cfg);
    cfg.log_dir = argv[1];
    cfg.index_interval_bytes = 200;
    struct gr_store *store;
    if (gr_store_open(&cfg, &store) < 0) return 1;
    struct gr_topic *t;
    const char *k[] = {"segment.bytes"}, *v[] = {"3000"};
    if (gr_store_topic_create(store, "dump", 1, k, v, 1, &t) < 0) return 1;
    struct gr_log *log = gr_topic_log(t, 0);
    enum gr_codec codecs[] = {GR_CODEC_NONE, GR_CODEC_GZIP, GR_CODEC_SNAPPY, GR_CODEC_LZ4, GR_CODEC_ZSTD};
    int64_t records = 0;
    int32_t next_seq[2] = {0, 0}; /* per producer: the idempotence rules want each batch to follow the last */
    for (uint32_t i = 0; i < 60; i++) {
        struct th_batch_spec s = {.count = (int32_t)(i % 4) + 1,
                                  .ts0 = 1700000000000 + 1000 * i,
                                  .ts_step = 7,
                                  .tag = i,
                                  .codec = codecs[i % 5],
                                  .producer_id = i % 3 == 0 ? 4000 + (int64_t)(i % 2) : -1,
                                  .producer_epoch = 3,
                                  .base_sequence = i % 3 == 0 ? next_seq[i % 2] : -1,
                                  .value_bytes = 20};
        size_t len;
        uint8_t *b = th_batch(&s, &len);
        struct gr_append_result res;
        if (gr_log_append(log, b, len, i == 7 ? 1800000000000 : -1, &res) < 0) return 1;
        gr_store_quiesce(store); /* spare ready at the roll (storage/roll.c) */
        free(b);
        records += s.count;
        if (i % 3 == 0) next_seq[i % 2] += s.count;
    }
    printf("batches 60 records %lld last_offset %lld segments %d\n", (long long)records,
           (long long)records - 1, gr_log_segment_count(log));

    const char *ck[] = {"segment.bytes", "cleanup.policy"}, *cv[] = {"3000", "compact"};
    if (gr_store_topic_create(store, "cdump", 1, ck, cv, 2, &t) < 0) return 1;
    log = gr_topic_log(t, 0);
    int n = 0, cseq = 0; /* producer 5000's next sequence: each of its batches follows the last */
    for (int i = 0; i < 80; i++) {
        struct gr_record_in recs[4];
        char keys[4][8], vals[4][16];
        int cnt = i % 4 + 1;
        for (int r = 0; r < cnt; r++, n++) {
            snprintf(keys[r], sizeof keys[r], "k%d", n % 10);
            int vl = snprintf(vals[r], sizeof vals[r], "v%d", n);
            bool tomb = n % 7 == 3;
            recs[r] =
                (struct gr_record_in){.timestamp = 1700000000000 + n,
                                      .key = {(const uint8_t *)keys[r], (int32_t)strlen(keys[r])},
                                      .value = {tomb ? NULL : (const uint8_t *)vals[r], tomb ? -1 : vl}};
        }
        struct gr_batch_params bp = {.partition_leader_epoch = -1,
                                     .codec = codecs[i % 5],
                                     .log_append_time = -1,
                                     .producer_id = i % 4 == 0 ? 5000 : -1,
                                     .producer_epoch = i % 4 == 0 ? 1 : -1,
                                     .base_sequence = i % 4 == 0 ? cseq : -1};
        uint8_t *b;
        size_t len;
        if (gr_batch_build(&bp, recs, cnt, &b, &len)) return 1;
        struct gr_append_result res;
        if (gr_log_append(log, b, len, -1, &res) < 0) return 1;
        gr_store_quiesce(store); /* spare ready at the roll (storage/roll.c) */
        free(b);
        if (i % 4 == 0) cseq += cnt;
    }
    gr_log_set_high_watermark(log, gr_log_end_offset(log));
    struct gr_clean_stats st1, st2;
    if (gr_log_clean_now(log, 1800000000000, &st1) < 0 || gr_log_clean_now(log, 1800000001000, &st2) < 0)
        return 1;
    gr_store_quiesce(store);
    printf("compacted records %lld last_offset %lld\n", (long long)st2.records_kept,
           (long long)gr_log_end_offset(log) - 1);
    gr_store_close(store);
    return 0;
}
