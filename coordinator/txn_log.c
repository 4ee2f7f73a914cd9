/*
 * txn_log.c: one write as one RecordBatch v2, and the replay of a partition's batches (txn_log.h).
 */
#include "coordinator/txn_log.h"

#include <errno.h>

#include "common/log.h"
#include "protocol/record_batch.h"

int gr_txn_log_batch(const struct gr_coord_record *rec, int64_t wall_ms, uint8_t **batch, size_t *len)
{
    struct gr_record_in in = {
        .timestamp = wall_ms,
        .key = {rec->key, (int32_t)rec->key_len},
        .value = rec->value ? (struct gr_bytes){rec->value, (int32_t)rec->value_len} : GR_BYTES_NULL,
    };
    struct gr_batch_params bp = {0, -1, GR_CODEC_NONE, 0, -1, -1, -1, -1};
    int rc = gr_batch_build(&bp, &in, 1, batch, len);
    if (rc) return rc == GR_BATCH_ERR_TOO_LARGE ? -EMSGSIZE : -ENOMEM;
    return 0;
}

int64_t gr_txn_log_replay(struct gr_txn_coord *tc, int32_t p, const uint8_t *buf, size_t len, int64_t from,
                          int64_t *count)
{
    size_t pos = 0;
    const uint8_t *b;
    size_t blen;
    int64_t next = from;
    while (gr_batch_next(buf, len, &pos, &b, &blen) == 1) {
        int64_t last = gr_batch_last_offset(b);
        if (last < from) continue;
        next = last + 1;
        if (gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL) continue;
        struct gr_record_iter it;
        if (gr_record_iter_init(&it, b, blen) == 0) {
            struct gr_record rec;
            int rc;
            while ((rc = gr_record_iter_next(&it, &rec)) == 1) {
                if (rec.offset < from || rec.key.len < 0) continue;
                int r = gr_txn_replay(tc, p, rec.key.ptr, (size_t)rec.key.len,
                                      rec.value.len >= 0 ? rec.value.ptr : NULL,
                                      rec.value.len >= 0 ? (size_t)rec.value.len : 0);
                if (r == 0) (*count)++;
                if (r < 0)
                    GR_WARN_RATELIMITED("%s-%d: record at offset %lld not applied (%d)", GR_TXN_STATE_TOPIC,
                                        p, (long long)rec.offset, r);
            }
            if (rc < 0)
                GR_WARN_RATELIMITED("%s-%d: batch at offset %lld is corrupt (%d)", GR_TXN_STATE_TOPIC, p,
                                    (long long)gr_batch_base_offset(b), rc);
        }
        gr_record_iter_close(&it);
    }
    return next;
}
