/*
 * offsets_log.c: __consumer_offsets on the segment store: create/find, append as RecordBatch v2, replay,
 * durability checks (see offsets_log.h for the rules). Its size is bounded by log compaction
 * (storage/cleaner.c), as in Kafka.
 */
#include "coordinator/offsets_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "protocol/record_batch.h"
#include "protocol/txn_marker.h"

struct gr_offsets_log {
    struct gr_store *store;
    struct gr_topic *topic;
    int32_t partitions;
    struct gr_partitions *parts; /* appends go through the partition layer when set */
};

struct gr_topic_op *gr_offsets_log_create_op(int32_t partitions)
{
    static const char *const keys[] = {"cleanup.policy", "segment.bytes"};
    char seg[32];
    snprintf(seg, sizeof seg, "%d", GR_OFFSETS_SEGMENT_BYTES);
    const char *const values[] = {"compact", seg};
    struct gr_topic_op *op = gr_topic_op_create(GR_OFFSETS_TOPIC, partitions, keys, values, 2, false);
    if (op) gr_topic_op_keep_active_open(op); /* the coordinator appends without waiting for a reopen */
    return op;
}

int gr_offsets_log_open(struct gr_store *store, int32_t partitions, struct gr_offsets_log **out)
{
    struct gr_topic *t = gr_store_topic_find(store, GR_OFFSETS_TOPIC, strlen(GR_OFFSETS_TOPIC));
    if (!t) { /* synchronous: at start, or without an I/O pool (tests) */
        struct gr_topic_op *op = gr_offsets_log_create_op(partitions);
        if (!op) return -ENOMEM;
        gr_topic_op_begin(store, op);
        gr_topic_op_run(op);
        int rc = gr_topic_op_finish(store, op, &t);
        gr_topic_op_free(op);
        if (rc) return rc;
        GR_INFO("created %s with %d partitions", GR_OFFSETS_TOPIC, partitions);
    } else if (gr_topic_partition_count(t) != partitions) {
        GR_WARN("%s has %d partitions; offsets.topic.num.partitions=%d is ignored", GR_OFFSETS_TOPIC,
                gr_topic_partition_count(t), partitions);
    }
    return gr_offsets_log_attach(store, t, out);
}

int gr_offsets_log_attach(struct gr_store *store, struct gr_topic *t, struct gr_offsets_log **out)
{
    struct gr_offsets_log *ol = calloc(1, sizeof *ol);
    if (!ol) return -ENOMEM;
    ol->store = store;
    ol->topic = t;
    ol->partitions = gr_topic_partition_count(t);
    *out = ol;
    return 0;
}

void gr_offsets_log_close(struct gr_offsets_log *ol)
{
    if (!ol) return;
    free(ol);
}

int32_t gr_offsets_log_partitions(const struct gr_offsets_log *ol)
{
    return ol->partitions;
}

struct gr_log *gr_offsets_log_log(struct gr_offsets_log *ol, int32_t partition)
{
    return gr_topic_log(ol->topic, partition);
}

void gr_offsets_log_set_partitions(struct gr_offsets_log *ol, struct gr_partitions *parts)
{
    ol->parts = parts;
}

/* ---- append ---- */

/* Appends one whole batch (borrowed; the append writes its base offset) through the partition layer when set,
 * else straight to storage. */
static int append_raw(struct gr_offsets_log *ol, struct gr_log *log, uint8_t *batch, size_t len)
{
    struct gr_append_result res;
    if (!ol->parts) return gr_log_append(log, batch, len, -1, &res); /* no partition layer (tools, tests) */
    struct gr_partition *part = gr_partition_get(ol->parts, log);
    return part ? gr_partition_append(part, batch, len, -1, &res) : -ENOMEM;
}

static int append_batch_params(struct gr_offsets_log *ol, struct gr_log *log,
                               const struct gr_coord_record *recs, int count, int64_t wall_ms,
                               const struct gr_batch_params *bp);

static int append_batch(struct gr_offsets_log *ol, struct gr_log *log, const struct gr_coord_record *recs,
                        int count, int64_t wall_ms)
{
    struct gr_batch_params bp = {0, -1, GR_CODEC_NONE, 0, -1, -1, -1, -1};
    return append_batch_params(ol, log, recs, count, wall_ms, &bp);
}

static int append_batch_params(struct gr_offsets_log *ol, struct gr_log *log,
                               const struct gr_coord_record *recs, int count, int64_t wall_ms,
                               const struct gr_batch_params *bp)
{
    struct gr_record_in *in = calloc((size_t)count, sizeof *in);
    if (!in) return -ENOMEM;
    for (int i = 0; i < count; i++) {
        in[i].timestamp = wall_ms;
        in[i].key = (struct gr_bytes){recs[i].key, (int32_t)recs[i].key_len};
        in[i].value =
            recs[i].value ? (struct gr_bytes){recs[i].value, (int32_t)recs[i].value_len} : GR_BYTES_NULL;
    }
    uint8_t *batch;
    size_t len;
    int rc = gr_batch_build(bp, in, count, &batch, &len);
    free(in);
    if (rc) return rc == GR_BATCH_ERR_TOO_LARGE ? -EMSGSIZE : -ENOMEM;
    rc = append_raw(ol, log, batch, len);
    free(batch);
    return rc;
}

int gr_offsets_log_append_txn(struct gr_offsets_log *ol, int32_t partition,
                              const struct gr_coord_txn_write *w, const struct gr_coord_record *recs,
                              int count, int64_t wall_ms, int64_t *end_offset)
{
    struct gr_log *log = gr_topic_log(ol->topic, partition);
    if (!log) return -EINVAL;
    int rc;
    if (w->kind == GR_COORD_TXN_RECORDS) {
        if (count < 1) return -EINVAL;
        /* one batch: a transaction's commit must not be split (the caller checked max.message.bytes) */
        struct gr_batch_params bp = {
            0, -1, GR_CODEC_NONE, GR_BATCH_ATTR_TRANSACTIONAL, -1, w->producer_id, w->producer_epoch, -1};
        rc = append_batch_params(ol, log, recs, count, wall_ms, &bp);
    } else {
        uint8_t batch[GR_TXN_MARKER_BATCH_BYTES];
        struct gr_txn_marker m = {w->kind == GR_COORD_TXN_COMMIT, w->coordinator_epoch};
        gr_txn_marker_batch_encode(batch, 0, -1, wall_ms, w->producer_id, w->producer_epoch, &m);
        rc = append_raw(ol, log, batch, sizeof batch);
    }
    if (rc) return rc;
    gr_log_flush_async(log);
    *end_offset = gr_log_end_offset(log);
    return 0;
}

int gr_offsets_log_append(struct gr_offsets_log *ol, int32_t partition, const struct gr_coord_record *recs,
                          int count, int64_t wall_ms, int64_t *end_offset)
{
    struct gr_log *log = gr_topic_log(ol->topic, partition);
    if (!log) return -EINVAL;
    int first = 0;
    size_t bytes = 0;
    for (int i = 0; i < count; i++) {
        size_t rec_bytes = recs[i].key_len + recs[i].value_len + 32;
        if (i > first && bytes + rec_bytes > GR_OFFSETS_BATCH_BYTES_MAX) {
            int rc = append_batch(ol, log, recs + first, i - first, wall_ms);
            if (rc) return rc;
            first = i;
            bytes = 0;
        }
        bytes += rec_bytes;
    }
    if (count > first) {
        int rc = append_batch(ol, log, recs + first, count - first, wall_ms);
        if (rc) return rc;
    }
    gr_log_flush_async(log); /* whatever the visible-offset rule: group state is made durable soon */
    *end_offset = gr_log_end_offset(log);
    return 0;
}

int gr_offsets_log_durable(struct gr_offsets_log *ol, int32_t partition, int64_t end_offset)
{
    struct gr_log *log = gr_topic_log(ol->topic, partition);
    if (!log || gr_log_offline(log)) return -EROFS;
    return gr_log_durable_offset(log) >= end_offset ? 1 : 0;
}

/* ---- load ---- */

int gr_offsets_log_read_slice(const struct gr_log_slice *s, uint8_t *buf)
{
    size_t done = 0;
    while (done < (size_t)s->bytes) {
        ssize_t n = pread(s->fd, buf + done, (size_t)s->bytes - done, s->file_pos + (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -EIO; /* the file is shorter than the index said */
        done += (size_t)n;
    }
    return 0;
}

int64_t gr_offsets_log_replay(struct gr_coordinator *c, const uint8_t *buf, size_t len, int64_t from,
                              int64_t *count)
{
    return gr_offsets_log_replay_partition(c, -1, buf, len, from, count);
}

/* A control batch: its end-transaction marker completes the producer's pending offsets (Kafka's
   CoordinatorLoaderImpl reads the control record and replays it as replayEndTransactionMarker). */
static void replay_control(struct gr_coordinator *c, int32_t partition, const uint8_t *b, size_t blen,
                           int64_t *count)
{
    int64_t pid = (int64_t)gr_be64(b + GR_BATCH_OFF_PRODUCER_ID);
    struct gr_record_iter it;
    if (gr_record_iter_init(&it, b, blen) == 0) {
        struct gr_record rec;
        while (gr_record_iter_next(&it, &rec) == 1) {
            struct gr_txn_marker m;
            if (gr_txn_marker_decode(rec.key.ptr, rec.key.len, rec.value.ptr, rec.value.len, &m) != 0)
                continue; /* another control type: not a transaction's end */
            gr_coord_txn_marker_apply(c, partition, pid, m.commit);
            (*count)++;
        }
    }
    gr_record_iter_close(&it);
}

int64_t gr_offsets_log_replay_partition(struct gr_coordinator *c, int32_t partition, const uint8_t *buf,
                                        size_t len, int64_t from, int64_t *count)
{
    size_t pos = 0;
    const uint8_t *b;
    size_t blen;
    int64_t next = from;
    while (gr_batch_next(buf, len, &pos, &b, &blen) == 1) {
        int64_t last = gr_batch_last_offset(b);
        if (last < from) continue;
        next = last + 1;
        int16_t attrs = gr_batch_attributes(b);
        if (attrs & GR_BATCH_ATTR_CONTROL) {
            if (attrs & GR_BATCH_ATTR_TRANSACTIONAL) replay_control(c, partition, b, blen, count);
            continue;
        }
        /* a transactional batch's records stay pending under its producer id until the marker */
        int64_t pid =
            attrs & GR_BATCH_ATTR_TRANSACTIONAL ? (int64_t)gr_be64(b + GR_BATCH_OFF_PRODUCER_ID) : -1;
        struct gr_record_iter it;
        if (gr_record_iter_init(&it, b, blen) == 0) {
            struct gr_record rec;
            int rc;
            while ((rc = gr_record_iter_next(&it, &rec)) == 1) {
                if (rec.offset < from || rec.key.len < 0) continue;
                if (gr_coord_replay_record(c, rec.offset, pid, rec.key.ptr, (size_t)rec.key.len,
                                           rec.value.len >= 0 ? rec.value.ptr : NULL,
                                           rec.value.len >= 0 ? (size_t)rec.value.len : 0) < 0)
                    GR_WARN_RATELIMITED("%s: record at offset %lld does not parse, skipped", GR_OFFSETS_TOPIC,
                                        (long long)rec.offset);
                else
                    (*count)++;
            }
            if (rc < 0)
                GR_WARN_RATELIMITED("%s: batch at offset %lld is corrupt (%d)", GR_OFFSETS_TOPIC,
                                    (long long)gr_batch_base_offset(b), rc);
        }
        gr_record_iter_close(&it);
    }
    return next;
}

int64_t gr_offsets_log_load_partition(struct gr_offsets_log *ol, struct gr_coordinator *c, int32_t p)
{
    struct gr_log *log = gr_topic_log(ol->topic, p);
    if (!log) return -ENOENT;
    int64_t count = 0;
    int64_t off = gr_log_start_offset(log), end = gr_log_end_offset(log);
    while (off < end) {
        struct gr_log_slice s;
        int rc = gr_log_read(log, off, GR_OFFSETS_LOAD_BYTES, end, true, &s);
        if (rc) {
            GR_ERROR("%s-%d: reading offset %lld failed: %s", GR_OFFSETS_TOPIC, p, (long long)off,
                     strerror(-rc));
            return rc;
        }
        if (s.bytes == 0) break;
        uint8_t *buf = malloc((size_t)s.bytes);
        rc = buf ? gr_offsets_log_read_slice(&s, buf) : -ENOMEM;
        int64_t bytes = s.bytes;
        gr_log_slice_release(&s);
        if (rc) {
            free(buf);
            return rc;
        }
        int64_t next = gr_offsets_log_replay_partition(c, p, buf, (size_t)bytes, off, &count);
        free(buf);
        if (next <= off) break; /* no whole batch advanced: a torn tail */
        off = next;
    }
    return count;
}

int64_t gr_offsets_log_load(struct gr_offsets_log *ol, struct gr_coordinator *c)
{
    int64_t count = 0;
    for (int32_t p = 0; p < ol->partitions; p++) {
        int64_t n = gr_offsets_log_load_partition(ol, c, p);
        if (n < 0) return n;
        count += n;
    }
    gr_coord_load_done(c);
    return count;
}
