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

enum gr_codec { GR_CODEC_NONE = 0, GR_CODEC_GZIP = 1, GR_CODEC_SNAPPY = 2, GR_CODEC_LZ4 = 3, GR_CODEC_ZSTD = 4 };

static inline uint16_t gr_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t gr_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t gr_be64(const uint8_t *p) { return ((uint64_t)gr_be32(p) << 32) | gr_be32(p + 4); }
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
static inline int64_t gr_batch_base_offset(const uint8_t *b) { return (int64_t)gr_be64(b + GR_BATCH_OFF_BASE_OFFSET); }
static inline int32_t gr_batch_length(const uint8_t *b) { return (int32_t)gr_be32(b + GR_BATCH_OFF_LENGTH); }
/* Total bytes of the batch on the wire / on disk: 12 + batch length. */
static inline int64_t gr_batch_total_bytes(const uint8_t *b) { return GR_BATCH_LOG_OVERHEAD + (int64_t)gr_batch_length(b); }
static inline int32_t gr_batch_leader_epoch(const uint8_t *b) { return (int32_t)gr_be32(b + GR_BATCH_OFF_LEADER_EPOCH); }
static inline int8_t gr_batch_magic(const uint8_t *b) { return (int8_t)b[GR_BATCH_OFF_MAGIC]; }
static inline uint32_t gr_batch_crc(const uint8_t *b) { return gr_be32(b + GR_BATCH_OFF_CRC); }
static inline int16_t gr_batch_attributes(const uint8_t *b) { return (int16_t)gr_be16(b + GR_BATCH_OFF_ATTRIBUTES); }
static inline int32_t gr_batch_last_offset_delta(const uint8_t *b) { return (int32_t)gr_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA); }
static inline int64_t gr_batch_base_timestamp(const uint8_t *b) { return (int64_t)gr_be64(b + GR_BATCH_OFF_BASE_TIMESTAMP); }
static inline int64_t gr_batch_max_timestamp(const uint8_t *b) { return (int64_t)gr_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP); }
static inline int64_t gr_batch_producer_id(const uint8_t *b) { return (int64_t)gr_be64(b + GR_BATCH_OFF_PRODUCER_ID); }
static inline int16_t gr_batch_producer_epoch(const uint8_t *b) { return (int16_t)gr_be16(b + GR_BATCH_OFF_PRODUCER_EPOCH); }
static inline int32_t gr_batch_base_sequence(const uint8_t *b) { return (int32_t)gr_be32(b + GR_BATCH_OFF_BASE_SEQUENCE); }
static inline int32_t gr_batch_record_count(const uint8_t *b) { return (int32_t)gr_be32(b + GR_BATCH_OFF_RECORD_COUNT); }
/* Offset of the last record in the batch: base offset + last offset delta. */
static inline int64_t gr_batch_last_offset(const uint8_t *b) { return gr_batch_base_offset(b) + gr_batch_last_offset_delta(b); }

/* Patches the fields outside the CRC span (no CRC recompute needed). */
static inline void gr_batch_set_base_offset(uint8_t *b, int64_t off) { gr_put_be64(b + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)off); }
static inline void gr_batch_set_leader_epoch(uint8_t *b, int32_t e) { gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)e); }

#endif
