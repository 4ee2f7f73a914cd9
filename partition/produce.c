/*
 * produce.c: one partition's share of a Produce (gr_partition_produce, partition.h): Kafka's
 * UnifiedLog.analyzeAndValidateRecords and LogValidator, with the topic's typed policy (storage/store.h
 * struct gr_log_config), the recompression to the topic's compression.type, and the append through
 * gr_partition_append (storage judges producer ids, sequences and epochs as it appends: producer_state.h).
 *
 * Exactly one RecordBatch v2 per partition, validated in place (CRC-32C, lengths, offset deltas, records),
 * size against max.message.bytes (once, on the batch as sent), each record of a compressed batch against
 * max.decompressed.message.bytes (Kafka 4.4: INVALID_RECORD, no message), zstd only from Produce v7, keys on
 * compacted topics and every record's timestamp against message.timestamp.before/after.max.ms (a refused
 * batch names each refused record, KIP-467, as Kafka's LogValidator; the records are walked again only
 * then), the header's max timestamp set to the records' maximum (CreateTime) or to the append time
 * (LogAppendTime, by storage) with the CRC recomputed when it changes, then appended in place (storage
 * patches base offset and leader epoch). A topic whose compression.type names a codec gets every batch in
 * that codec (decompressed and recompressed here when sent in another, snappy in the xerial framing Java
 * readers expect); compression.type=producer stores batches as sent.
 *
 * Replication (Partition.appendRecordsToLeader, DelayedProduce): acks=-1 is refused NOT_ENOUGH_REPLICAS
 * before the append while the ISR is below the effective min ISR; once appended, its wait until committed
 * is judged by gr_partition_produce_acked (the high watermark past the batch, then the maximal ISR against
 * the effective min ISR: NOT_ENOUGH_REPLICAS_AFTER_APPEND; a leader turned follower: NOT_LEADER_OR_FOLLOWER).
 *
 * Answers are plain values (struct gr_produce_result); the refusal messages live in the caller's arena.
 * No request, response or event loop is known here. Owning thread only (partition.h).
 * Read next: server/handlers/produce.c (the request around it), protocol/record_batch.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "partition/partition.h"
#include "protocol/compress.h"
#include "protocol/errors.h"
#include "protocol/record_batch.h"

/* Rewrites a validated batch with `codec`: the same records, header fields and producer fields, a new
 * CRC. Returns 0 and a new buffer (caller frees), or a Kafka error code. */
static int16_t recompress(const uint8_t *batch, size_t len, const struct gr_batch_info *info,
                          enum gr_codec codec, uint8_t **out, size_t *out_len)
{
    const uint8_t *records = batch + GR_BATCH_HEADER_BYTES;
    size_t records_len = len - GR_BATCH_HEADER_BYTES;
    uint8_t *plain = NULL;
    if (info->codec != GR_CODEC_NONE) {
        size_t plain_len;
        if (gr_decompress(info->codec, records, records_len, GR_DECOMPRESSED_BATCH_BYTES_MAX, &plain,
                          &plain_len))
            return GR_ERR_CORRUPT_MESSAGE;
        records = plain;
        records_len = plain_len;
    }
    struct gr_batch_params bp = {
        .base_offset = 0,
        .partition_leader_epoch = -1,
        .codec = codec,
        .attributes =
            (int16_t)(info->attributes & ~GR_BATCH_ATTR_CODEC_MASK & ~GR_BATCH_ATTR_LOG_APPEND_TIME),
        .log_append_time = -1,
        .producer_id = info->producer_id,
        .producer_epoch = info->producer_epoch,
        .base_sequence = info->base_sequence,
    };
    int rc = gr_batch_assemble(&bp, info->record_count, info->last_offset_delta, info->base_timestamp,
                               info->max_timestamp, records, records_len, out, out_len);
    free(plain);
    return rc ? GR_ERR_UNKNOWN_SERVER_ERROR : GR_ERR_NONE;
}

/* Sets an error answer. Kafka 4.4 sends an error_message only for record validation refusals (its
   RecordValidationException: refused keys and timestamps, with record_errors) and a few request-level
   refusals; errors met in the log (batch framing and CRC, batch-level INVALID_RECORD, sequence and epoch,
   sizes, storage) carry null: `msg` is NULL for those. Returns `code`. */
static int16_t fail(struct gr_produce_result *out, int16_t code, const char *msg)
{
    out->error_code = code;
    out->error_message = msg;
    out->base_offset = -1;
    return code;
}

/* One refused record's message, as Kafka's LogValidator words it (in `arena`; NULL when out of memory).
   `key_msg` is the shared message of null-key refusals; `partial` names the record as Kafka's
   skip-key-value iterator prints it (a compressed batch kept in its codec). */
static const char *refusal_message(struct gr_arena *arena, const struct gr_record_refusal *rf,
                                   const struct gr_record_rules *rules, bool partial, const char *key_msg)
{
    char buf[320];
    if (rf->err == GR_BATCH_ERR_RECORD_KEY) return key_msg;
    if (rf->err == GR_BATCH_ERR_TIMESTAMP) /* Java's long arithmetic wraps: so does the message's */
        snprintf(buf, sizeof buf,
                 "Timestamp %lld of message with offset %lld is out of range. The timestamp should be within "
                 "[%lld, %lld]",
                 (long long)rf->timestamp, (long long)rf->offset,
                 (long long)(int64_t)((uint64_t)rules->now_ms - (uint64_t)rules->before_max_ms),
                 (long long)(int64_t)((uint64_t)rules->now_ms + (uint64_t)rules->after_max_ms));
    else
        snprintf(buf, sizeof buf,
                 "Invalid timestamp type in message %s(offset=%lld, timestamp=%lld, key=%d bytes, "
                 "value=%d bytes). Producer should not set timestamp type to LogAppendTime.",
                 partial ? "PartialDefaultRecord" : "DefaultRecord", (long long)rf->offset,
                 (long long)rf->timestamp, partial || rf->key_bytes >= 0 ? rf->key_bytes : 0,
                 partial || rf->value_bytes >= 0 ? rf->value_bytes : 0);
    return gr_arena_strndup(arena, buf, strlen(buf));
}

/* Kafka's error_message of a RecordValidationException: a fixed text for timestamps, else the count and
   the first three record errors as Java prints a List of RecordError (in `arena`; NULL when out of
   memory). */
static const char *refusals_summary(struct gr_arena *arena, int total, bool timestamp,
                                    const struct gr_produce_record_error *items, int n)
{
    if (timestamp) return "One or more records have been rejected due to invalid timestamp";
    char buf[1536];
    int len =
        snprintf(buf, sizeof buf,
                 "One or more records have been rejected due to %d record errors in total, and only showing "
                 "the first three errors at most: [",
                 total);
    for (int i = 0; i < n && i < 3 && len < (int)sizeof buf; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%sRecordError(batchIndex=%d, message='%s')",
                        i ? ", " : "", items[i].batch_index, items[i].message ? items[i].message : "");
    if (len < (int)sizeof buf) len += snprintf(buf + len, sizeof buf - (size_t)len, "]");
    if (len >= (int)sizeof buf) len = (int)sizeof buf - 1;
    return gr_arena_strndup(arena, buf, (size_t)len);
}

/* Answers a batch some records of which the per-record rules refuse as Kafka answers its
   RecordValidationException: INVALID_TIMESTAMP when any refusal is a timestamp one, else INVALID_RECORD;
   record_errors lists the refused records (at most GR_PRODUCE_RECORD_ERRORS_MAX); error_message
   summarises; log_start_offset is the partition's. Returns false (nothing set) when no record is refused or
   memory ran out: the caller then answers with the batch-level error. */
static bool refuse_records(struct gr_arena *arena, struct gr_log *log, const uint8_t *batch, size_t len,
                           const struct gr_record_rules *rules, bool partial, struct gr_produce_result *out)
{
    int total = gr_batch_refused_records(batch, len, rules, NULL, 0);
    if (total <= 0) return false;
    int n = total < GR_PRODUCE_RECORD_ERRORS_MAX ? total : GR_PRODUCE_RECORD_ERRORS_MAX;
    struct gr_record_refusal *rf = gr_arena_calloc(arena, (size_t)n, sizeof *rf);
    struct gr_produce_record_error *items = gr_arena_calloc(arena, (size_t)n, sizeof *items);
    char key_buf[GR_TOPIC_NAME_BYTES_MAX + 96];
    snprintf(key_buf, sizeof key_buf,
             "Compacted topic cannot accept message without key in topic partition %s-%d",
             gr_topic_name(gr_log_topic(log)), gr_log_partition(log));
    char *key_msg = gr_arena_strndup(arena, key_buf, strlen(key_buf));
    if (!rf || !items || !key_msg || gr_batch_refused_records(batch, len, rules, rf, n) != total)
        return false;
    bool timestamp = false;
    for (int i = 0; i < n; i++) {
        items[i].batch_index = rf[i].batch_index;
        items[i].message = refusal_message(arena, &rf[i], rules, partial, key_msg);
        timestamp |= rf[i].err != GR_BATCH_ERR_RECORD_KEY;
    }
    fail(out, timestamp ? GR_ERR_INVALID_TIMESTAMP : GR_ERR_INVALID_RECORD,
         refusals_summary(arena, total, timestamp, items, n));
    out->record_errors = items;
    out->record_error_count = n;
    out->log_start_offset = gr_log_start_offset(log);
    return true;
}

/* Batch errors Kafka meets inside the log (LogValidator's batch checks, the record iterator): answered with
   the partition's log start offset; framing, CRC and size errors come before the log and answer -1. */
static bool batch_err_in_log(int rc)
{
    return rc == GR_BATCH_ERR_OFFSETS || rc == GR_BATCH_ERR_CONTROL || rc == GR_BATCH_ERR_SEQUENCE ||
           rc == GR_BATCH_ERR_RECORD || rc == GR_BATCH_ERR_COUNT || rc == GR_BATCH_ERR_TRAILING;
}

/* The append and its answer (the batch validated, in the topic's codec). */
static int16_t append(struct gr_partition *part, const struct gr_produce_args *args, uint8_t *batch,
                      size_t batch_len, bool lat, struct gr_produce_result *out)
{
    struct gr_log *log = gr_partition_log(part);
    if (args->require_open && !gr_log_append_ready(log)) /* the caller's reopen could not open it */
        return fail(out, GR_ERR_KAFKA_STORAGE_ERROR, NULL);
    struct gr_append_result res;
    int rc = gr_partition_append(part, batch, batch_len, lat ? args->now_ms : -1, &res);
    if (rc == GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE || rc == GR_LOG_ERR_INVALID_PRODUCER_EPOCH ||
        rc == GR_LOG_ERR_INVALID_TXN_STATE) {
        fail(out,
             rc == GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE ? GR_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER
             : rc == GR_LOG_ERR_INVALID_TXN_STATE   ? GR_ERR_INVALID_TXN_STATE
                                                    : GR_ERR_INVALID_PRODUCER_EPOCH,
             NULL);
        out->log_start_offset = gr_log_start_offset(log); /* as Kafka: an error met in the log */
        return out->error_code;
    }
    if (rc == -EMSGSIZE) return fail(out, GR_ERR_MESSAGE_TOO_LARGE, NULL);
    if (rc) {
        GR_WARN_RATELIMITED("append to %s-%d failed: %s", gr_topic_name(gr_log_topic(log)),
                            gr_log_partition(log), strerror(-rc));
        return fail(out, GR_ERR_KAFKA_STORAGE_ERROR, NULL);
    }
    out->base_offset = res.base_offset;
    /* A duplicate is answered as Kafka does: the original's offsets, its max timestamp as log append time. */
    out->log_append_time_ms = lat || res.duplicate ? res.log_append_time_ms : -1;
    out->log_start_offset = res.log_start_offset;
    out->end_offset = res.last_offset + 1;
    out->duplicate = res.duplicate;
    return GR_ERR_NONE;
}

int16_t gr_partition_produce(struct gr_partition *part, const struct gr_log_config *policy,
                             const struct gr_produce_args *args, struct gr_arena *arena,
                             struct gr_produce_result *out)
{
    *out = (struct gr_produce_result){
        .base_offset = -1, .log_append_time_ms = -1, .log_start_offset = -1, .end_offset = -1};
    struct gr_log *log = gr_partition_log(part);
    if (!args->records || args->records_len <= 0) return fail(out, GR_ERR_INVALID_RECORD, NULL);
    size_t tail = 0;
    if (gr_batches_count(args->records, (size_t)args->records_len, &tail) != 1 || tail)
        return fail(out, GR_ERR_INVALID_RECORD, NULL);
    /* Partition.appendRecordsToLeader: a follower refuses, and acks=-1 with the ISR below the effective min
       ISR is refused before anything is appended (acks 0 and 1 are appended regardless). Kafka answers the
       latter with the partition's log start offset (its generic append failure), the former with -1. */
    int16_t acks_err = gr_partition_check_produce_acks(part, args->acks);
    if (acks_err) {
        fail(out, acks_err, NULL);
        if (acks_err == GR_ERR_NOT_ENOUGH_REPLICAS) out->log_start_offset = gr_log_start_offset(log);
        return acks_err;
    }
    /* max.message.bytes, checked here once, on the batch as sent (before validation, as Kafka's
       analyzeAndValidateRecords); a recompressed batch's size is checked by the log's append (-EMSGSIZE). */
    if (args->records_len > policy->max_message_bytes) return fail(out, GR_ERR_MESSAGE_TOO_LARGE, NULL);
    struct gr_batch_info info = {0}; /* codec NONE and no record length when framing fails */
    const char *why = NULL;
    int rc =
        gr_batch_validate_ex(args->records, (size_t)args->records_len, GR_BATCH_CHECK_CLIENT, &info, &why);
    /* Kafka 4.4 reads a compressed batch's records with max.decompressed.message.bytes as the largest record
       it takes: a longer record's length stops the read, before any later record (or its own bytes) is
       checked. Its InvalidRecordException carries no message to the client. */
    bool too_long =
        info.codec != GR_CODEC_NONE && info.records_body_bytes_max > policy->max_decompressed_message_bytes;
    if (rc && !too_long) {
        fail(out, gr_batch_err_kafka(rc), NULL);
        if (batch_err_in_log(rc)) out->log_start_offset = gr_log_start_offset(log);
        return out->error_code;
    }
    /* A client never writes control batches (Kafka's LogValidator for origin CLIENT); a transactional batch
       is taken only once the caller verified its transaction (KIP-890; until then refused). */
    if ((info.attributes & GR_BATCH_ATTR_CONTROL) ||
        ((info.attributes & GR_BATCH_ATTR_TRANSACTIONAL) && !args->txn_verified))
        return fail(out, GR_ERR_INVALID_RECORD, NULL);
    /* A verdict given before this call still holds only if no marker of the producer ended its transaction
       here since the guard was taken (UnifiedLog.analyzeAndValidateProducerState: InvalidTxnStateException
       "Record was not part of an ongoing transaction", answered INVALID_TXN_STATE without a message). The
       append below follows in this same call. */
    if ((info.attributes & GR_BATCH_ATTR_TRANSACTIONAL) && args->txn_guarded &&
        !gr_partition_txn_guard_holds(part, gr_batch_producer_id(args->records),
                                      gr_batch_producer_epoch(args->records), args->txn_guard))
        return fail(out, GR_ERR_INVALID_TXN_STATE, NULL);
    if (info.codec == GR_CODEC_ZSTD && args->api_version < 7)
        return fail(out, GR_ERR_UNSUPPORTED_COMPRESSION_TYPE, NULL);
    if (too_long) {
        fail(out, GR_ERR_INVALID_RECORD, NULL);
        out->log_start_offset = gr_log_start_offset(log); /* met in the log, as Kafka */
        return out->error_code;
    }
    uint8_t *batch = args->records; /* the caller's buffer: ours to patch */
    size_t batch_len = (size_t)args->records_len;
    int64_t after = policy->message_timestamp_after_max_ms;
    int64_t before = policy->message_timestamp_before_max_ms;
    struct gr_record_rules rules = {.key_required = info.has_null_key && policy->compact_policy,
                                    .log_append_time = policy->log_append_time,
                                    .before_max_ms = before < 0 ? 0 : before,
                                    .after_max_ms = after < 0 ? 0 : after,
                                    .now_ms = args->now_ms};
    bool lat = rules.log_append_time;
    int want = (int)policy->compression_type; /* a codec, or -1: keep the producer's */
    /* Kafka's LogValidator: keys (compacted topics), then every record's timestamp within the bounds; the
       header's max timestamp := the records' maximum (CreateTime; CRC recomputed only when it changes). A
       refusal walks the records again to name each refused one (record_errors). */
    rc = rules.key_required /* only looked up for a batch with a null key */
             ? GR_BATCH_ERR_RECORD_KEY
             : gr_batch_apply_timestamps(batch, batch_len, &info, lat, rules.before_max_ms,
                                         rules.after_max_ms, rules.now_ms, &why);
    if (rc) {
        bool partial = info.codec != GR_CODEC_NONE && (want < 0 || want == (int)info.codec);
        if (!refuse_records(arena, log, batch, batch_len, &rules, partial, out))
            fail(out, gr_batch_err_kafka(rc),
                 rc == GR_BATCH_ERR_RECORD_KEY ? "Compacted topic cannot accept message without key" : why);
        return out->error_code;
    }
    if (want < 0 || want == (int)info.codec) return append(part, args, batch, batch_len, lat, out);
    uint8_t *rewritten = NULL;
    int16_t err = recompress(batch, batch_len, &info, (enum gr_codec)want, &rewritten, &batch_len);
    if (err) return fail(out, err, NULL);
    err = append(part, args, rewritten, batch_len, lat, out);
    free(rewritten);
    return err;
}

int gr_partition_produce_acked(struct gr_partition *part, int64_t end_offset, int16_t *error_code)
{
    *error_code = GR_ERR_NONE;
    if (gr_log_offline(gr_partition_log(part)))
        *error_code = GR_ERR_KAFKA_STORAGE_ERROR; /* ReplicaManager.getPartitionOrError: offline */
    else if (gr_partition_role(part) == GR_PARTITION_FOLLOWER)
        *error_code = GR_ERR_NOT_LEADER_OR_FOLLOWER; /* leaderLogIfLocal is None */
    else if (gr_partition_visible_offset(part) < end_offset)
        return 1; /* the high watermark has not passed the batch yet */
    else
        *error_code = gr_partition_check_enough_replicas(part);
    return 0;
}
