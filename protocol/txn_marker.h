/*
 * txn_marker.h: the end-transaction marker, the one record of a control batch (attributes: transactional and
 * control bits set) that the transaction coordinator has each partition leader append to end a transaction
 * (WriteTxnMarkers). Facts: Kafka 4.4.0's ControlRecordType (key), EndTransactionMarker and EndTxnMarker.json
 * (value), DefaultRecord (record framing), clients/.../record/internal/.
 *
 * Record key (ControlRecordTypeSchema, prefixed by its version), 4 bytes, big-endian:
 *   OFFSET SIZE MEANING
 *    0      2   key version: 0 (a higher version is read as version 0, a negative one is refused)
 *    2      2   control type: 0 ABORT, 1 COMMIT; 2-6 are KRaft's (LEADER_CHANGE, SNAPSHOT_HEADER,
 *               SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS); any other id is UNKNOWN
 * Record value (EndTxnMarker, prefixed by its version), 6 bytes, big-endian:
 *   OFFSET SIZE MEANING
 *    0      2   value version: 0 (a higher version is read as version 0, a negative one is refused)
 *    2      4   coordinator epoch when the marker was written (a leader refuses a marker older than
 *               the producer's: TRANSACTION_COORDINATOR_FENCED)
 * Bytes after these are ignored when reading (a later version may append fields), as Kafka does.
 * The record (DefaultRecord, no headers), 17 bytes: length 16, attributes 0, timestamp delta 0, offset
 * delta 0, key length 4, key, value length 6, value, header count 0 (varints zig-zag encoded).
 * Pure byte functions: no allocation, no I/O. Read next: protocol/record_batch.h (the batch around it).
 */
#ifndef GR_TXN_MARKER_H
#define GR_TXN_MARKER_H

#include <stdbool.h>
#include <stdint.h>

#define GR_TXN_MARKER_KEY_BYTES 4     /* ControlRecordType.CURRENT_CONTROL_RECORD_KEY_SIZE */
#define GR_TXN_MARKER_VALUE_BYTES 6   /* EndTransactionMarker's value at version 0 */
#define GR_TXN_MARKER_RECORD_BYTES 17 /* DefaultRecord.sizeInBytes(0, 0, 4, 6, no headers) */
#define GR_TXN_MARKER_BATCH_BYTES 78  /* the 61-byte batch header and the one record */

/* Control record types (ControlRecordType's ids). */
enum gr_control_type {
    GR_CONTROL_UNKNOWN = -1, /* any id Kafka does not define: a reader skips the record */
    GR_CONTROL_ABORT = 0,
    GR_CONTROL_COMMIT = 1,
    GR_CONTROL_LEADER_CHANGE = 2,
    GR_CONTROL_SNAPSHOT_HEADER = 3,
    GR_CONTROL_SNAPSHOT_FOOTER = 4,
    GR_CONTROL_KRAFT_VERSION = 5,
    GR_CONTROL_KRAFT_VOTERS = 6,
};

/* Why a control key or marker value was refused (Kafka throws InvalidRecordException for the first four,
 * IllegalArgumentException for the last). */
enum gr_txn_marker_err {
    GR_TXN_MARKER_OK = 0,
    GR_TXN_MARKER_SHORT_KEY = -1,         /* key null or under 4 bytes */
    GR_TXN_MARKER_BAD_KEY_VERSION = -2,   /* key version negative */
    GR_TXN_MARKER_SHORT_VALUE = -3,       /* value null or under 6 bytes */
    GR_TXN_MARKER_BAD_VALUE_VERSION = -4, /* value version negative */
    GR_TXN_MARKER_NOT_END_TXN = -5,       /* control type other than ABORT or COMMIT */
};

/* A decoded end-transaction marker. */
struct gr_txn_marker {
    bool commit;               /* COMMIT (true) or ABORT (false) */
    int32_t coordinator_epoch; /* EndTxnMarker.CoordinatorEpoch */
};

/* Maps a control type id off the wire to enum gr_control_type: GR_CONTROL_UNKNOWN for ids Kafka does not
 * define (ControlRecordType.fromTypeId). */
enum gr_control_type gr_txn_marker_control_type(int16_t id);

/* Writes the 4-byte control record key (version 0, `type`) to `out` (ControlRecordType.recordKey).
 * `type` must not be GR_CONTROL_UNKNOWN (asserted). */
void gr_txn_marker_key_encode(uint8_t out[GR_TXN_MARKER_KEY_BYTES], enum gr_control_type type);

/* Reads a control record key: `key` borrowed, `len` its length (-1 = null). On success returns 0 and sets
 * *type (GR_CONTROL_UNKNOWN for an id Kafka does not define); otherwise a negative gr_txn_marker_err
 * (ControlRecordType.parseTypeId: under 4 bytes or a negative version is refused; a version above 0 is read
 * as version 0). */
int gr_txn_marker_key_decode(const uint8_t *key, int32_t len, enum gr_control_type *type);

/* Writes the 6-byte end-transaction marker value (version 0, `coordinator_epoch`) to `out`
 * (EndTransactionMarker.serializeValue). */
void gr_txn_marker_value_encode(uint8_t out[GR_TXN_MARKER_VALUE_BYTES], int32_t coordinator_epoch);

/* Reads an end-transaction marker value: `value` borrowed, `len` its length (-1 = null). Returns 0 and sets
 * *coordinator_epoch, or a negative gr_txn_marker_err (EndTransactionMarker.deserializeValue: under 6 bytes
 * or a negative version refused; a version above 0 read as version 0, trailing bytes ignored). */
int gr_txn_marker_value_decode(const uint8_t *value, int32_t len, int32_t *coordinator_epoch);

/* Reads a whole marker from a control record's key and value (EndTransactionMarker.deserialize): the key
 * first, then GR_TXN_MARKER_NOT_END_TXN unless its type is ABORT or COMMIT, then the value. Returns 0 and
 * fills *marker, or a negative gr_txn_marker_err. */
int gr_txn_marker_decode(const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len,
                         struct gr_txn_marker *marker);

/* Writes the marker's record (DefaultRecord, offset delta 0, timestamp delta 0, no headers: the layout
 * above) to `out`: exactly GR_TXN_MARKER_RECORD_BYTES bytes, as Kafka's MemoryRecordsBuilder
 * .appendEndTxnMarker writes it inside the control batch (the batch header is the caller's). */
void gr_txn_marker_record_encode(uint8_t out[GR_TXN_MARKER_RECORD_BYTES], const struct gr_txn_marker *marker);

/* Writes the whole control batch holding one marker to `out`: exactly GR_TXN_MARKER_BATCH_BYTES bytes, as
 * Kafka's MemoryRecords.writeEndTransactionalMarker builds it: magic 2, attributes transactional | control
 * (no compression, CreateTime), last offset delta 0, base and max timestamp `timestamp_ms`, the producer's
 * id and epoch, base sequence -1, record count 1, the record of gr_txn_marker_record_encode, CRC-32C over
 * attributes..end. `base_offset` and `leader_epoch` lie outside the CRC, so an append may overwrite them. */
void gr_txn_marker_batch_encode(uint8_t out[GR_TXN_MARKER_BATCH_BYTES], int64_t base_offset,
                                int32_t leader_epoch, int64_t timestamp_ms, int64_t producer_id,
                                int16_t producer_epoch, const struct gr_txn_marker *marker);

#endif
