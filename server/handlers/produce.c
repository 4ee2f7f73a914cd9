/*
 * produce.c: Produce (key 0), served v3-v13 (advertised from v0; v0-v2 close the connection in dispatch).
 *
 * Per partition: exactly one RecordBatch v2, validated in place (CRC-32C, lengths, offset deltas, records),
 * size against max.message.bytes, each record of a compressed batch against max.decompressed.message.bytes
 * (Kafka 4.4: INVALID_RECORD, no message), zstd only from v7, keys on compacted topics and every record's
 * timestamp against message.timestamp.before/after.max.ms (a refused batch names each refused record in
 * record_errors, KIP-467, as Kafka's LogValidator; the records are walked again only then), the header's max
 * timestamp set to the records' maximum (CreateTime) or to the append time (LogAppendTime, by storage) with
 * the CRC recomputed when it changes (Kafka's LogValidator), then appended in place (storage patches base
 * offset and leader epoch). Durability, named: acks=0   accepted: no response at all; any partition error
 * closes the connection (as Kafka does) acks=1   written: answered once the batch is in the page cache
 *   acks=-1  durable: with gregor.acks.all.fsync (default) answered once a group-commit fdatasync covers
 *            the batch, or REQUEST_TIMED_OUT after timeout_ms; otherwise as acks=1 (Kafka's behaviour)
 * A topic whose compression.type names a codec (uncompressed, gzip, snappy, lz4, zstd) gets every batch in
 * that codec: a batch in another codec is decompressed and recompressed by the broker, as Kafka does
 * (snappy in the xerial framing Java readers expect); compression.type=producer stores batches as sent.
 * Idempotence: storage judges each batch with a producer id (storage/producer_state.h) as it appends it;
 * OUT_OF_ORDER_SEQUENCE_NUMBER and INVALID_PRODUCER_EPOCH are per-partition errors, and a duplicate of one
 * of the producer's last 5 batches is answered with the original's offsets once the ORIGINAL batch is as
 * durable as acks asks (a retry is never acknowledged before the batch it repeats).
 * Transactions are not built: a request with a transactional id, or whose first batch of some partition has
 * the transactional bit, is refused on every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the
 * latter is Kafka's answer without a transactional id); control batches are INVALID_RECORD.
 *
 * Files closed by the fd cap (gregor.open.files.max): an idle partition's active segment file may be
 * closed. Before its appends a Produce pins the active file of EVERY partition it names
 * (gr_log_append_prepare), open or closed, so the cap closes none of them while the request runs, even when
 * it names more partitions than the cap (they exceed it until the next cap pass after the appends). When
 * some were closed, the request is parked BEFORE any append while one I/O pool job (allocated once per
 * request) reopens them, so the network thread never opens a file; then it appends and drops the pins.
 * Only a roll of one of its partitions meanwhile (retention rolling an expired active segment) takes
 * another round; a file the pool could not open answers KAFKA_STORAGE_ERROR for its partition. To keep the
 * order of appends to a partition (idempotent producers pipeline), a later Produce naming a partition of a
 * parked one queues behind it (partition/gate.c, per-partition order); a Produce sharing no partition with
 * the gate goes ahead at once. Out of request memory, the connection is closed before any append. Read next:
 * server/handlers/fetch.c.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "common/limits.h"
#include "protocol/compress.h"
#include "protocol/record_batch.h"
#include "server/handlers/handlers.h"

struct produce_wait {
    struct gr_produce_response_partition_produce_response *pr;
    struct gr_log *log;
    int64_t end_offset; /* durable once the log's durable offset reaches this */
};

struct produce_state {
    struct produce_wait *waits;
    int count;
    /* the append gate (see the top of the file; pins and the reopen round in req->cold) */
    struct gr_log **logs; /* the request's partitions that exist (arena) */
    int nlogs;
    struct gr_gate_entry *entries; /* its places in their gate queues (arena, nlogs) */
    struct gr_append_gate gate;
    bool txn_refused; /* every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no appends) */
};

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

/* A partition's error. Kafka 4.4 sends an error_message only for record validation refusals (its
   RecordValidationException: refused keys and timestamps, with record_errors) and a few request-level
   refusals; errors met in the log (batch framing and CRC, batch-level INVALID_RECORD, sequence and epoch,
   sizes, storage) and timeouts carry null: `msg` is NULL for those. */
static void set_error(struct gr_produce_response_partition_produce_response *pr, int16_t code,
                      const char *msg)
{
    pr->error_code = code;
    pr->base_offset = -1;
    pr->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
}

/* One refused record's message, as Kafka's LogValidator words it (in the request arena; NULL when out of
   memory). `key_msg` is the shared message of null-key refusals; `partial` names the record as Kafka's
   skip-key-value iterator prints it (a compressed batch kept in its codec). */
static struct gr_str refusal_message(struct gr_req *req, const struct gr_record_refusal *rf,
                                     const struct gr_record_rules *rules, bool partial, struct gr_str key_msg)
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
    char *m = gr_arena_strndup(&req->arena, buf, strlen(buf));
    return m ? gr_str_c(m) : GR_STR_NULL;
}

/* Kafka's error_message of a RecordValidationException: a fixed text for timestamps, else the count and
   the first three record errors as Java prints a List of RecordError. */
static const char *refusals_summary(struct gr_req *req, int total, bool timestamp,
                                    const struct gr_produce_response_batch_index_and_error_message *items,
                                    int n)
{
    if (timestamp) return "One or more records have been rejected due to invalid timestamp";
    char buf[1536];
    int len =
        snprintf(buf, sizeof buf,
                 "One or more records have been rejected due to %d record errors in total, and only showing "
                 "the first three errors at most: [",
                 total);
    for (int i = 0; i < n && i < 3 && len < (int)sizeof buf; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "%sRecordError(batchIndex=%d, message='%.*s')",
                        i ? ", " : "", items[i].batch_index, items[i].batch_index_error_message.len,
                        items[i].batch_index_error_message.ptr ? items[i].batch_index_error_message.ptr : "");
    if (len < (int)sizeof buf) len += snprintf(buf + len, sizeof buf - (size_t)len, "]");
    if (len >= (int)sizeof buf) len = (int)sizeof buf - 1;
    return gr_arena_strndup(&req->arena, buf, (size_t)len);
}

/* Answers a batch some records of which the per-record rules refuse as Kafka answers its
   RecordValidationException: INVALID_TIMESTAMP when any refusal is a timestamp one, else INVALID_RECORD;
   record_errors lists the refused records (batch_index, message; at most GR_PRODUCE_RECORD_ERRORS_MAX);
   error_message summarises; log_start_offset is the partition's. Returns false (nothing set) when no
   record is refused or memory ran out: the caller then answers with the batch-level error. */
static bool refuse_records(struct gr_req *req, struct gr_topic *t, int32_t partition, struct gr_log *log,
                           const uint8_t *batch, size_t len, const struct gr_record_rules *rules,
                           bool partial, struct gr_produce_response_partition_produce_response *pr)
{
    int total = gr_batch_refused_records(batch, len, rules, NULL, 0);
    if (total <= 0) return false;
    int n = total < GR_PRODUCE_RECORD_ERRORS_MAX ? total : GR_PRODUCE_RECORD_ERRORS_MAX;
    struct gr_record_refusal *rf = gr_arena_calloc(&req->arena, (size_t)n, sizeof *rf);
    struct gr_produce_response_batch_index_and_error_message *items =
        gr_arena_calloc(&req->arena, (size_t)n, sizeof *items);
    char key_buf[GR_TOPIC_NAME_BYTES_MAX + 96];
    snprintf(key_buf, sizeof key_buf,
             "Compacted topic cannot accept message without key in topic partition %s-%d", gr_topic_name(t),
             partition);
    char *key_msg = gr_arena_strndup(&req->arena, key_buf, strlen(key_buf));
    if (!rf || !items || !key_msg || gr_batch_refused_records(batch, len, rules, rf, n) != total)
        return false;
    bool timestamp = false;
    for (int i = 0; i < n; i++) {
        gr_produce_response_batch_index_and_error_message_init(&items[i]);
        items[i].batch_index = rf[i].batch_index;
        items[i].batch_index_error_message = refusal_message(req, &rf[i], rules, partial, gr_str_c(key_msg));
        timestamp |= rf[i].err != GR_BATCH_ERR_RECORD_KEY;
    }
    set_error(pr, timestamp ? GR_ERR_INVALID_TIMESTAMP : GR_ERR_INVALID_RECORD,
              refusals_summary(req, total, timestamp, items, n));
    pr->record_errors.items = items;
    pr->record_errors.count = n;
    pr->log_start_offset = gr_log_start_offset(log);
    return true;
}

/* Batch errors Kafka meets inside the log (LogValidator's batch checks, the record iterator): answered with
   the partition's log start offset; framing, CRC and size errors come before the log and answer -1. */
static bool batch_err_in_log(int rc)
{
    return rc == GR_BATCH_ERR_OFFSETS || rc == GR_BATCH_ERR_CONTROL || rc == GR_BATCH_ERR_SEQUENCE ||
           rc == GR_BATCH_ERR_RECORD || rc == GR_BATCH_ERR_COUNT || rc == GR_BATCH_ERR_TRAILING;
}

/* Validates and appends one partition's records; fills `pr`. Returns the appended log (and in *end_offset
 * the offset after the batch, or after the original batch of a duplicate: what must be durable before the
 * answer) or NULL. */
static struct gr_log *produce_partition(struct gr_req *req, struct gr_topic *t, int32_t partition,
                                        struct gr_bytes records,
                                        struct gr_produce_response_partition_produce_response *pr,
                                        int64_t *end_offset)
{
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    struct gr_log *log = t ? gr_topic_log(t, partition) : NULL;
    if (!log) {
        set_error(pr, GR_ERR_UNKNOWN_TOPIC_OR_PARTITION, NULL);
        return NULL;
    }
    if (records.len <= 0) {
        set_error(pr, GR_ERR_INVALID_RECORD, NULL);
        return NULL;
    }
    size_t tail = 0;
    int nbatches = gr_batches_count(records.ptr, (size_t)records.len, &tail);
    if (nbatches != 1 || tail) {
        set_error(pr, GR_ERR_INVALID_RECORD, NULL);
        return NULL;
    }
    /* Typed topic policy (storage/store.h), resolved against the broker defaults when configs change. */
    const struct gr_log_config *policy = gr_topic_policy(t);
    /* max.message.bytes, checked here once, on the batch as sent (before validation, as Kafka's
       analyzeAndValidateRecords); a recompressed batch's size is checked by the log's append (-EMSGSIZE). */
    if (records.len > policy->max_message_bytes) {
        set_error(pr, GR_ERR_MESSAGE_TOO_LARGE, NULL);
        return NULL;
    }
    struct gr_batch_info info = {0}; /* codec NONE and no record length when framing fails */
    const char *why = NULL;
    int rc = gr_batch_validate_ex(records.ptr, (size_t)records.len, GR_BATCH_CHECK_CLIENT, &info, &why);
    /* Kafka 4.4 reads a compressed batch's records with max.decompressed.message.bytes as the largest record
       it takes: a longer record's length stops the read, before any later record (or its own bytes) is
       checked. Its InvalidRecordException carries no message to the client. */
    bool too_long =
        info.codec != GR_CODEC_NONE && info.records_body_bytes_max > policy->max_decompressed_message_bytes;
    if (rc && !too_long) {
        set_error(pr, gr_batch_err_kafka(rc), NULL);
        if (batch_err_in_log(rc)) pr->log_start_offset = gr_log_start_offset(log);
        return NULL;
    }
    if (info.attributes & (GR_BATCH_ATTR_TRANSACTIONAL | GR_BATCH_ATTR_CONTROL)) {
        set_error(pr, GR_ERR_INVALID_RECORD, NULL);
        return NULL;
    }
    if (info.codec == GR_CODEC_ZSTD && v < 7) {
        set_error(pr, GR_ERR_UNSUPPORTED_COMPRESSION_TYPE, NULL);
        return NULL;
    }
    if (too_long) {
        set_error(pr, GR_ERR_INVALID_RECORD, NULL);
        pr->log_start_offset = gr_log_start_offset(log); /* met in the log, as Kafka */
        return NULL;
    }
    uint8_t *batch = (uint8_t *)records.ptr, *rewritten = NULL; /* the request buffer: ours to patch */
    size_t batch_len = (size_t)records.len;
    int64_t after = policy->message_timestamp_after_max_ms;
    int64_t before = policy->message_timestamp_before_max_ms;
    struct gr_record_rules rules = {.key_required = info.has_null_key && policy->compact_policy,
                                    .log_append_time = policy->log_append_time,
                                    .before_max_ms = before < 0 ? 0 : before,
                                    .after_max_ms = after < 0 ? 0 : after,
                                    .now_ms = gr_time_wall_ms()};
    int64_t now = rules.now_ms;
    bool lat = rules.log_append_time;
    int want = (int)policy->compression_type; /* a codec, or -1: keep the producer's */
    /* Kafka's LogValidator: keys (compacted topics), then every record's timestamp within the bounds; the
       header's max timestamp := the records' maximum (CreateTime; CRC recomputed only when it changes). A
       refusal walks the records again to name each refused one (record_errors). */
    rc = rules.key_required /* only looked up for a batch with a null key */
             ? GR_BATCH_ERR_RECORD_KEY
             : gr_batch_apply_timestamps(batch, batch_len, &info, lat, rules.before_max_ms,
                                         rules.after_max_ms, now, &why);
    if (rc) {
        bool partial = info.codec != GR_CODEC_NONE && (want < 0 || want == (int)info.codec);
        if (!refuse_records(req, t, partition, log, batch, batch_len, &rules, partial, pr))
            set_error(pr, gr_batch_err_kafka(rc),
                      rc == GR_BATCH_ERR_RECORD_KEY ? "Compacted topic cannot accept message without key"
                                                    : why);
        return NULL;
    }
    if (want >= 0 && want != (int)info.codec) {
        int16_t err = recompress(batch, batch_len, &info, (enum gr_codec)want, &rewritten, &batch_len);
        if (err) {
            set_error(pr, err, NULL);
            return NULL;
        }
        batch = rewritten;
    }
    if (b->iopool && !gr_log_append_ready(log)) { /* the pool could not reopen it (see pin_or_open) */
        free(rewritten);
        set_error(pr, GR_ERR_KAFKA_STORAGE_ERROR, NULL);
        return NULL;
    }
    struct gr_append_result res;
    rc = gr_log_append(log, batch, batch_len, lat ? now : -1, &res);
    free(rewritten);
    if (rc == GR_LOG_ERR_OUT_OF_ORDER_SEQUENCE) {
        set_error(pr, GR_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, NULL);
        pr->log_start_offset = gr_log_start_offset(log); /* as Kafka: an error met in the log */
        return NULL;
    }
    if (rc == GR_LOG_ERR_INVALID_PRODUCER_EPOCH) {
        set_error(pr, GR_ERR_INVALID_PRODUCER_EPOCH, NULL);
        pr->log_start_offset = gr_log_start_offset(log);
        return NULL;
    }
    if (rc == -EMSGSIZE) {
        set_error(pr, GR_ERR_MESSAGE_TOO_LARGE, NULL);
        return NULL;
    }
    if (rc) {
        GR_WARN_RATELIMITED("append to %s-%d failed: %s", gr_topic_name(t), partition, strerror(-rc));
        set_error(pr, GR_ERR_KAFKA_STORAGE_ERROR, NULL);
        return NULL;
    }
    pr->error_code = GR_ERR_NONE;
    pr->base_offset = res.base_offset;
    /* A duplicate is answered as Kafka does: the original's offsets, its max timestamp as log append time. */
    pr->log_append_time_ms = lat || res.duplicate ? res.log_append_time_ms : -1;
    pr->log_start_offset = res.log_start_offset;
    *end_offset = res.last_offset + 1;
    return log;
}

static bool produce_recheck(struct gr_req *req)
{
    struct produce_state *st = req->hstate;
    for (int i = 0; i < st->count; i++) {
        struct produce_wait *w = &st->waits[i];
        if (!w->log) continue;
        if (gr_log_offline(w->log)) {
            set_error(w->pr, GR_ERR_KAFKA_STORAGE_ERROR, NULL);
            w->log = NULL;
        } else if (gr_partition_visible_offset(gr_broker_partition(req->broker, w->log)) >= w->end_offset) {
            w->log = NULL;
        } else {
            return false;
        }
    }
    gr_req_finish(req);
    return true;
}

static void produce_expire(struct gr_req *req)
{
    struct produce_state *st = req->hstate;
    for (int i = 0; i < st->count; i++)
        if (st->waits[i].log) set_error(st->waits[i].pr, GR_ERR_REQUEST_TIMED_OUT, NULL);
    gr_req_finish(req);
}

/* Allocates the response's topic and partition arrays (arena, initialised). Returns false when out of
   memory: the caller closes the connection (never a write through NULL). */
static bool alloc_responses(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    struct gr_produce_response *resp = req->resp;
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    resp->responses.items = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *resp->responses.items);
    if (!resp->responses.items) return false;
    resp->responses.count = ntopics;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_produce_response_topic_produce_response *tr = &resp->responses.items[i];
        gr_produce_response_topic_produce_response_init(tr);
        int32_t np = body->topic_data.items[i].partition_data.count;
        if (np < 0) np = 0;
        tr->partition_responses.items =
            gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *tr->partition_responses.items);
        if (!tr->partition_responses.items) return false;
        tr->partition_responses.count = np;
    }
    return true;
}

/* Kafka's KafkaApis.handleProduceRequest: a request is refused as a whole
   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition) when it has a transactional id (transactions are
   not built) or, without one, when the first batch of any partition has the transactional bit
   (RequestUtils.hasTransactionalRecords). */
static bool produce_txn_refused(const struct gr_produce_request *body)
{
    if (body->transactional_id.len >= 0) return true;
    for (int32_t i = 0; i < body->topic_data.count; i++) {
        const struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        for (int32_t p = 0; p < td->partition_data.count; p++) {
            struct gr_bytes rec = td->partition_data.items[p].records.mem;
            size_t pos = 0, len;
            const uint8_t *batch;
            if (rec.len > 0 && gr_batch_next(rec.ptr, (size_t)rec.len, &pos, &batch, &len) == 1 &&
                (gr_batch_attributes(batch) & GR_BATCH_ATTR_TRANSACTIONAL))
                return true;
        }
    }
    return false;
}

/* Validates and appends every partition, then answers or parks for durability. */
static enum gr_handler_rc produce_run(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    struct gr_produce_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    bool bad_acks = body->acks != 0 && body->acks != 1 && body->acks != -1;
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    struct produce_state *st = req->hstate;
    st->count = 0;
    if (!alloc_responses(req)) return GR_HANDLER_CLOSE; /* before any append: nothing half done */
    bool any_error = false;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        struct gr_produce_response_topic_produce_response *tr = &resp->responses.items[i];
        tr->name = td->name;
        tr->topic_id = td->topic_id;
        struct gr_topic *t =
            v >= 13 ? gr_store_topic_find_id(b->store, td->topic_id.b) : gr_topic_lookup(b, td->name);
        int16_t topic_err = GR_ERR_NONE;
        const char *topic_msg = NULL;
        if (!t)
            topic_err = v >= 13 ? GR_ERR_UNKNOWN_TOPIC_ID : GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        else if (strcmp(gr_topic_name(t), "__consumer_offsets") == 0) {
            topic_err = GR_ERR_INVALID_TOPIC_EXCEPTION; /* no message, as Kafka 4.4 */
        }
        if (bad_acks) topic_err = GR_ERR_INVALID_REQUIRED_ACKS;
        if (st->txn_refused) {
            topic_err = GR_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            /* Kafka sends no message for a transactional batch without a transactional id */
            topic_msg =
                body->transactional_id.len >= 0 ? "Transactions are not supported by this broker yet" : NULL;
        }
        int32_t np = tr->partition_responses.count;
        for (int32_t p = 0; p < np; p++) {
            struct gr_produce_request_partition_produce_data *pd = &td->partition_data.items[p];
            struct gr_produce_response_partition_produce_response *pr = &tr->partition_responses.items[p];
            gr_produce_response_partition_produce_response_init(pr);
            pr->index = pd->index;
            if (topic_err) {
                set_error(pr, topic_err, topic_msg);
                any_error = true;
                continue;
            }
            int64_t end_offset = -1;
            struct gr_log *log = produce_partition(req, t, pd->index, pd->records.mem, pr, &end_offset);
            if (!log) {
                any_error = true;
                continue;
            }
            st->waits[st->count++] = (struct produce_wait){pr, log, end_offset};
        }
    }
    for (int i = 0; i < st->count; i++) /* flushes soon, or wakes the waiters of the visible data */
        gr_partition_appended(gr_broker_partition(b, st->waits[i].log));
    if (body->acks == 0) return any_error ? GR_HANDLER_CLOSE : GR_HANDLER_NO_RESPONSE;
    if (body->acks == -1 && st->count) {
        req->recheck = produce_recheck;
        req->expire = produce_expire;
        if (produce_recheck(req)) return GR_HANDLER_WAIT; /* already committed: finished inside recheck */
        int64_t timeout = body->timeout_ms > 0 ? body->timeout_ms : 0;
        gr_broker_park(b, req, gr_time_mono_ms() + timeout);
        bool held = false; /* cannot be: the recheck above saw every waited partition short of its offset */
        for (int i = 0; i < st->count; i++)
            if (st->waits[i].log &&
                gr_req_wait_committed(req, st->waits[i].log, st->waits[i].end_offset) == 0)
                held = true;
        if (held) produce_recheck(req);
        return GR_HANDLER_WAIT;
    }
    return GR_HANDLER_DONE;
}

/* ---- the produce gate: until the partition is appendable (partition/gate.c) ---- */

/* Appends every partition of a request whose files are pinned and open, then drops the pins. */
static enum gr_handler_rc produce_run_pinned(struct gr_req *req)
{
    enum gr_handler_rc rc = produce_run(req);
    gr_cold_unpin(&req->cold);
    return rc;
}

/* A gated request's turn: its partitions are appendable (or nothing could be pinned: -ENOMEM). */
static void gate_done(struct gr_append_gate *g, int err)
{
    struct gr_req *req = g->ctx;
    gr_req_unpark(req);
    gr_req_complete(req, err ? GR_HANDLER_CLOSE : produce_run_pinned(req));
}

/* The request's partitions that exist, found as produce_run finds them (distinct: merge_duplicates ran),
   with room for their gate entries. Returns false when out of memory. */
static bool collect_logs(struct gr_req *req, struct produce_state *st, int total)
{
    struct gr_produce_request *body = req->body;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    st->logs = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->logs);
    st->entries = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->entries);
    if (!st->logs || !st->entries) return false;
    for (int32_t i = 0; i < body->topic_data.count; i++) {
        struct gr_produce_request_topic_produce_data *td = &body->topic_data.items[i];
        struct gr_topic *t =
            v >= 13 ? gr_store_topic_find_id(b->store, td->topic_id.b) : gr_topic_lookup(b, td->name);
        for (int32_t p = 0; t && p < td->partition_data.count; p++) {
            struct gr_log *log = gr_topic_log(t, td->partition_data.items[p].index);
            if (log && st->nlogs < total) st->logs[st->nlogs++] = log;
        }
    }
    return true;
}

/* A request topic (by name, or by topic id from v13) or partition, sortable to find repeats in O(n log n): a
   Produce may name millions of partitions (a 100 MiB frame of empty entries), so no pairwise comparison. */
struct pd_key {
    struct gr_str name;   /* topic keys: the name (by_id false) */
    const uint8_t *id;    /* topic keys: the topic id (by_id true) */
    int32_t topic, index; /* partition keys: the first request topic of its name or id, the partition index */
    int32_t pos;          /* request order: topic index, or partition position over the whole request */
    int32_t k, p;         /* partition keys: where it is (request topic k, entry p) */
};

/* Orders topic keys by name (or id) only. */
static int topic_name_cmp(const struct pd_key *a, const struct pd_key *b)
{
    if (a->id) return memcmp(a->id, b->id, 16);
    int32_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = n > 0 ? memcmp(a->name.ptr, b->name.ptr, (size_t)n) : 0;
    return c ? c : (a->name.len > b->name.len) - (a->name.len < b->name.len);
}

static int topic_key_cmp(const void *x, const void *y)
{
    const struct pd_key *a = x, *b = y;
    int c = topic_name_cmp(a, b);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

static int part_key_cmp(const void *x, const void *y)
{
    const struct pd_key *a = x, *b = y;
    if (a->topic != b->topic) return a->topic < b->topic ? -1 : 1;
    if (a->index != b->index) return a->index < b->index ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static int pos_cmp(const void *x, const void *y)
{
    const struct pd_key *a = x, *b = y;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Kafka keeps the request's partitions in a map: a topic named twice is one topic, and a partition named
   twice is one partition whose records are those of its LAST occurrence (the earlier ones are neither
   appended nor answered). Rewrites body->topic_data so: topics in order of first occurrence (by name, by
   topic id from v13), each partition at its first occurrence with its last occurrence's records. Sorts, so
   O(n log n) in the request's topics and partitions; a request without repeats is left as it is. Returns
   false when out of memory (arena). */
static bool merge_duplicates(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    bool by_id = req->hdr.request_api_version >= 13;
    int32_t nt = body->topic_data.count > 0 ? body->topic_data.count : 0, total = 0;
    struct gr_produce_request_topic_produce_data *td = body->topic_data.items;
    for (int32_t i = 0; i < nt; i++)
        total += td[i].partition_data.count > 0 ? td[i].partition_data.count : 0;
    if (nt <= 1 && total <= 1) return true;
    struct pd_key *keys = gr_arena_calloc(&req->arena, (size_t)(nt > total ? nt : total) + 1, sizeof *keys);
    int32_t *first = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *first);
    if (!keys || !first) return false;
    for (int32_t i = 0; i < nt; i++)
        keys[i] = (struct pd_key){.name = td[i].name, .id = by_id ? td[i].topic_id.b : NULL, .pos = i};
    qsort(keys, (size_t)nt, sizeof *keys, topic_key_cmp);
    bool dup = false;
    for (int32_t i = 0; i < nt;
         i++) { /* equal keys sort by position: the first one is the first occurrence */
        bool same = i > 0 && topic_name_cmp(&keys[i - 1], &keys[i]) == 0;
        first[keys[i].pos] = same ? first[keys[i - 1].pos] : keys[i].pos;
        dup |= same;
    }
    int32_t n = 0;
    for (int32_t k = 0; k < nt; k++)
        for (int32_t p = 0; p < td[k].partition_data.count; p++, n++)
            keys[n] = (struct pd_key){
                .topic = first[k], .index = td[k].partition_data.items[p].index, .pos = n, .k = k, .p = p};
    qsort(keys, (size_t)n, sizeof *keys, part_key_cmp);
    int32_t kept = 0; /* each run of equal (topic, index): the first's place, the last's records */
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && keys[i].topic == keys[i - 1].topic && keys[i].index == keys[i - 1].index) {
            keys[kept - 1].k = keys[i].k; /* the records of the later occurrence */
            keys[kept - 1].p = keys[i].p;
            dup = true;
            continue;
        }
        keys[kept++] = keys[i];
    }
    if (!dup) return true;
    qsort(keys, (size_t)kept, sizeof *keys, pos_cmp); /* request order of first occurrences */
    struct gr_produce_request_topic_produce_data *out =
        gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *out);
    int32_t *count = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *count);
    struct gr_produce_request_partition_produce_data *pd =
        gr_arena_calloc(&req->arena, (size_t)kept + 1, sizeof *pd);
    int32_t *slot = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *slot);
    if (!out || !count || !pd || !slot) return false;
    for (int32_t i = 0; i < kept; i++)
        count[keys[i].topic]++;
    int32_t nout = 0, at = 0;
    for (int32_t i = 0; i < nt;
         i++) { /* topics in order of first occurrence, each with its partitions' room */
        if (first[i] != i) continue;
        out[nout] = td[i];
        out[nout].partition_data.items = pd + at;
        out[nout].partition_data.count = td[i].partition_data.count < 0 && count[i] == 0 ? -1 : 0; /* null */
        slot[i] = nout++;
        at += count[i];
    }
    for (int32_t i = 0; i < kept; i++) {
        struct gr_produce_request_topic_produce_data *o = &out[slot[keys[i].topic]];
        struct gr_produce_request_partition_produce_data e = td[keys[i].k].partition_data.items[keys[i].p];
        e.index = keys[i].index;
        o->partition_data.items[o->partition_data.count++] = e;
    }
    body->topic_data.items = out;
    body->topic_data.count = nout;
    return true;
}

enum gr_handler_rc gr_handle_produce(struct gr_req *req)
{
    struct gr_produce_request *body = req->body;
    struct gr_broker *b = req->broker;
    if (!merge_duplicates(req)) return GR_HANDLER_CLOSE; /* before any append: nothing half done */
    int32_t ntopics = body->topic_data.count > 0 ? body->topic_data.count : 0;
    int total = 0;
    for (int32_t i = 0; i < ntopics; i++)
        total += body->topic_data.items[i].partition_data.count > 0
                     ? body->topic_data.items[i].partition_data.count
                     : 0;
    struct produce_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
    if (!st) return GR_HANDLER_CLOSE;
    st->waits = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->waits);
    if (!st->waits) return GR_HANDLER_CLOSE;
    req->hstate = st;
    st->txn_refused = produce_txn_refused(body);
    bool bad_acks = body->acks != 0 && body->acks != 1 && body->acks != -1;
    if (!b->iopool || bad_acks || st->txn_refused) return produce_run(req); /* no appends */
    if (!collect_logs(req, st, total)) return GR_HANDLER_CLOSE;
    gr_cold_init(&req->cold, b->parts, b->iopool, NULL, NULL); /* the gate sets its hook */
    int r = gr_gate_enter(&st->gate, b->parts, &req->cold, st->logs, st->entries, st->nlogs, gate_done, req);
    if (r < 0) return GR_HANDLER_CLOSE;
    if (r == 1) return produce_run_pinned(req);
    /* Parked before any append (no recheck, no deadline: the gate runs it); finishing it unparks it. */
    gr_broker_park(b, req, INT64_MAX);
    return GR_HANDLER_WAIT;
}
