/*
 * txn_marker.c: the end-transaction marker's key, value and record bytes (layout and rules in
 * txn_marker.h). Every read checks the length first; nothing here allocates.
 */
#include "protocol/txn_marker.h"

#include <assert.h>

#include "protocol/crc32c.h"
#include "protocol/record_batch.h"

_Static_assert(GR_TXN_MARKER_BATCH_BYTES == GR_BATCH_HEADER_BYTES + GR_TXN_MARKER_RECORD_BYTES,
               "a marker batch is its header and one record");

enum gr_control_type gr_txn_marker_control_type(int16_t id)
{
    if (id >= GR_CONTROL_ABORT && id <= GR_CONTROL_KRAFT_VOTERS) return (enum gr_control_type)id;
    return GR_CONTROL_UNKNOWN;
}

void gr_txn_marker_key_encode(uint8_t out[GR_TXN_MARKER_KEY_BYTES], enum gr_control_type type)
{
    assert(type != GR_CONTROL_UNKNOWN && "an UNKNOWN control type has no key (ControlRecordType.recordKey)");
    gr_put_be16(out, 0);
    gr_put_be16(out + 2, (uint16_t)type);
}

int gr_txn_marker_key_decode(const uint8_t *key, int32_t len, enum gr_control_type *type)
{
    if (!key || len < GR_TXN_MARKER_KEY_BYTES) return GR_TXN_MARKER_SHORT_KEY;
    if ((int16_t)gr_be16(key) < 0) return GR_TXN_MARKER_BAD_KEY_VERSION;
    *type = gr_txn_marker_control_type((int16_t)gr_be16(key + 2));
    return GR_TXN_MARKER_OK;
}

void gr_txn_marker_value_encode(uint8_t out[GR_TXN_MARKER_VALUE_BYTES], int32_t coordinator_epoch)
{
    gr_put_be16(out, 0);
    gr_put_be32(out + 2, (uint32_t)coordinator_epoch);
}

int gr_txn_marker_value_decode(const uint8_t *value, int32_t len, int32_t *coordinator_epoch)
{
    if (!value || len < GR_TXN_MARKER_VALUE_BYTES) return GR_TXN_MARKER_SHORT_VALUE;
    if ((int16_t)gr_be16(value) < 0) return GR_TXN_MARKER_BAD_VALUE_VERSION;
    *coordinator_epoch = (int32_t)gr_be32(value + 2);
    return GR_TXN_MARKER_OK;
}

int gr_txn_marker_decode(const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len,
                         struct gr_txn_marker *marker)
{
    enum gr_control_type type;
    int err = gr_txn_marker_key_decode(key, key_len, &type);
    if (err) return err;
    if (type != GR_CONTROL_ABORT && type != GR_CONTROL_COMMIT) return GR_TXN_MARKER_NOT_END_TXN;
    int32_t epoch;
    err = gr_txn_marker_value_decode(value, value_len, &epoch);
    if (err) return err;
    marker->commit = type == GR_CONTROL_COMMIT;
    marker->coordinator_epoch = epoch;
    return GR_TXN_MARKER_OK;
}

void gr_txn_marker_record_encode(uint8_t out[GR_TXN_MARKER_RECORD_BYTES], const struct gr_txn_marker *marker)
{
    /* zig-zag varints: 16 -> 32, 0 -> 0, 4 -> 8, 6 -> 12; each fits one byte */
    out[0] = 2 * (GR_TXN_MARKER_RECORD_BYTES - 1); /* record length: the bytes after this varint */
    out[1] = 0;                                    /* record attributes (unused) */
    out[2] = 0;                                    /* timestamp delta */
    out[3] = 0;                                    /* offset delta */
    out[4] = 2 * GR_TXN_MARKER_KEY_BYTES;
    gr_txn_marker_key_encode(out + 5, marker->commit ? GR_CONTROL_COMMIT : GR_CONTROL_ABORT);
    out[9] = 2 * GR_TXN_MARKER_VALUE_BYTES;
    gr_txn_marker_value_encode(out + 10, marker->coordinator_epoch);
    out[16] = 0; /* header count */
}

void gr_txn_marker_batch_encode(uint8_t out[GR_TXN_MARKER_BATCH_BYTES], int64_t base_offset,
                                int32_t leader_epoch, int64_t timestamp_ms, int64_t producer_id,
                                int16_t producer_epoch, const struct gr_txn_marker *marker)
{
    uint8_t *b = out;
    gr_put_be64(b + GR_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
    gr_put_be32(b + GR_BATCH_OFF_LENGTH, GR_TXN_MARKER_BATCH_BYTES - GR_BATCH_LOG_OVERHEAD);
    gr_put_be32(b + GR_BATCH_OFF_LEADER_EPOCH, (uint32_t)leader_epoch);
    b[GR_BATCH_OFF_MAGIC] = 2;
    gr_put_be16(b + GR_BATCH_OFF_ATTRIBUTES, GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL);
    gr_put_be32(b + GR_BATCH_OFF_LAST_OFFSET_DELTA, 0);
    gr_put_be64(b + GR_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)timestamp_ms);
    gr_put_be64(b + GR_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)timestamp_ms);
    gr_put_be64(b + GR_BATCH_OFF_PRODUCER_ID, (uint64_t)producer_id);
    gr_put_be16(b + GR_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)producer_epoch);
    gr_put_be32(b + GR_BATCH_OFF_BASE_SEQUENCE, (uint32_t)-1);
    gr_put_be32(b + GR_BATCH_OFF_RECORD_COUNT, 1);
    gr_txn_marker_record_encode(b + GR_BATCH_HEADER_BYTES, marker);
    uint32_t crc =
        gr_crc32c(0, b + GR_BATCH_OFF_ATTRIBUTES, GR_TXN_MARKER_BATCH_BYTES - GR_BATCH_OFF_ATTRIBUTES);
    gr_put_be32(b + GR_BATCH_OFF_CRC, crc);
}
