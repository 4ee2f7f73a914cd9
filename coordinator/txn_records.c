/*
 * txn_records.c: encode and decode the __transaction_state keys and values (formats in txn_records.h) and
 * the transactional id -> partition hash. Decoders trust nothing: every length and count is checked by the
 * wire reader (protocol/wire.h) against the bytes at hand before anything is allocated.
 */
#include "coordinator/txn_records.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[GR_TXN_STATE_COUNT] = {
    "Empty",          "Ongoing",       "PrepareCommit", "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "Dead",          "PrepareEpochFence",
};

const char *gr_txn_state_name(enum gr_txn_state state)
{
    return (unsigned)state < GR_TXN_STATE_COUNT ? state_names[state] : "Unknown";
}

/* ---- encoding ---- */

#define TAG_PREVIOUS_PRODUCER_ID 0
#define TAG_NEXT_PRODUCER_ID 1
#define TAG_CLIENT_TRANSACTION_VERSION 2

static size_t value_size(const struct gr_txn_log_value *v, bool flex)
{
    size_t n = 2 + 8 + 2 + 4 + 1 + 8 + 8;
    n += gr_sz_array_len(v->topic_count, flex);
    for (int32_t i = 0; i < v->topic_count; i++) {
        n += gr_sz_string(v->topics[i].topic, flex) + gr_sz_array_len(v->topics[i].count, flex);
        n += 4 * (size_t)v->topics[i].count + (flex ? 1 : 0);
    }
    if (flex) {
        uint32_t tags = 0;
        size_t body = 0;
        if (v->previous_producer_id != -1) tags++, body += 2 + 8; /* tag, size, int64 */
        if (v->next_producer_id != -1) tags++, body += 2 + 8;
        if (v->client_transaction_version != 0) tags++, body += 2 + 2;
        n += gr_sz_uvarint(tags) + body;
    }
    return n;
}

static void write_value(struct gr_wr *wr, const struct gr_txn_log_value *v, int16_t version)
{
    bool flex = version >= 1;
    gr_wr_int16(wr, version);
    gr_wr_int64(wr, v->producer_id);
    gr_wr_int16(wr, v->producer_epoch);
    gr_wr_int32(wr, v->timeout_ms);
    gr_wr_int8(wr, v->state);
    gr_wr_array_len(wr, v->topic_count, flex);
    for (int32_t i = 0; i < v->topic_count; i++) {
        gr_wr_string(wr, v->topics[i].topic, flex);
        gr_wr_array_len(wr, v->topics[i].count, flex);
        for (int32_t k = 0; k < v->topics[i].count; k++)
            gr_wr_int32(wr, v->topics[i].partitions[k]);
        if (flex) gr_wr_uvarint(wr, 0);
    }
    gr_wr_int64(wr, v->last_update_ms);
    gr_wr_int64(wr, v->start_ms);
    if (!flex) return;
    uint32_t tags =
        (v->previous_producer_id != -1) + (v->next_producer_id != -1) + (v->client_transaction_version != 0);
    gr_wr_uvarint(wr, tags); /* ascending tag order, as the generated writer */
    if (v->previous_producer_id != -1) {
        gr_wr_uvarint(wr, TAG_PREVIOUS_PRODUCER_ID);
        gr_wr_uvarint(wr, 8);
        gr_wr_int64(wr, v->previous_producer_id);
    }
    if (v->next_producer_id != -1) {
        gr_wr_uvarint(wr, TAG_NEXT_PRODUCER_ID);
        gr_wr_uvarint(wr, 8);
        gr_wr_int64(wr, v->next_producer_id);
    }
    if (v->client_transaction_version != 0) {
        gr_wr_uvarint(wr, TAG_CLIENT_TRANSACTION_VERSION);
        gr_wr_uvarint(wr, 2);
        gr_wr_int16(wr, v->client_transaction_version);
    }
}

int gr_txn_log_record(struct gr_coord_record *rec, struct gr_str txn_id, const struct gr_txn_log_value *value,
                      int16_t value_version)
{
    if (txn_id.len < 0 || value_version < 0 || value_version > GR_TXN_LOG_VALUE_VERSION) return -EINVAL;
    if (value && value->topic_count < -1) return -EINVAL;
    if (value)
        for (int32_t i = 0; i < value->topic_count; i++)
            if (value->topics[i].count < 0 || value->topics[i].topic.len < 0) return -EINVAL;
    size_t klen = 2 + gr_sz_string(txn_id, false);
    uint8_t *key = malloc(klen);
    if (!key) return -ENOMEM;
    struct gr_wr wr;
    gr_wr_init(&wr, key, klen);
    gr_wr_int16(&wr, GR_TXN_LOG_KEY_VERSION);
    gr_wr_string(&wr, txn_id, false);
    uint8_t *val = NULL;
    size_t vlen = 0;
    if (value) {
        vlen = value_size(value, value_version >= 1);
        val = malloc(vlen);
        if (!val) {
            free(key);
            return -ENOMEM;
        }
        gr_wr_init(&wr, val, vlen);
        write_value(&wr, value, value_version);
        assert(wr.p == wr.end);
    }
    *rec = (struct gr_coord_record){key, klen, val, vlen};
    return 0;
}

/* ---- decoding ---- */

int gr_txn_log_key_decode(const uint8_t *key, size_t len, struct gr_str *txn_id)
{
    struct gr_rd rd;
    gr_rd_init(&rd, key, len, NULL);
    int16_t version = gr_rd_int16(&rd);
    if (rd.err) return -1;
    if (version != GR_TXN_LOG_KEY_VERSION) return 1;
    *txn_id = gr_rd_string(&rd, false, false);
    return rd.err ? -1 : 0;
}

static void read_tags(struct gr_rd *rd, struct gr_txn_log_value *out)
{
    uint32_t n = gr_rd_tag_count(rd);
    for (uint32_t i = 0; i < n && !rd->err; i++) {
        uint32_t tag = gr_rd_uvarint(rd);
        uint32_t size = gr_rd_uvarint(rd);
        if (rd->err) return;
        if (size > gr_rd_left(rd)) {
            gr_rd_fail(rd, -EINVAL);
            return;
        }
        struct gr_rd sub;
        gr_rd_init(&sub, rd->p, size, NULL);
        if (tag == TAG_PREVIOUS_PRODUCER_ID && size == 8)
            out->previous_producer_id = gr_rd_int64(&sub);
        else if (tag == TAG_NEXT_PRODUCER_ID && size == 8)
            out->next_producer_id = gr_rd_int64(&sub);
        else if (tag == TAG_CLIENT_TRANSACTION_VERSION && size == 2)
            out->client_transaction_version = gr_rd_int16(&sub);
        else if (tag <= TAG_CLIENT_TRANSACTION_VERSION)
            gr_rd_fail(rd, -EINVAL); /* a known tag of the wrong size */
        gr_rd_skip(rd, size);
    }
}

int gr_txn_log_value_decode(const uint8_t *value, size_t len, struct gr_arena *arena,
                            struct gr_txn_log_value *out)
{
    struct gr_rd rd;
    gr_rd_init(&rd, value, len, arena);
    int16_t version = gr_rd_int16(&rd);
    if (rd.err) return -1;
    if (version < 0 || version > GR_TXN_LOG_VALUE_VERSION) return 1;
    bool flex = version >= 1;
    memset(out, 0, sizeof *out);
    out->previous_producer_id = out->next_producer_id = -1;
    out->producer_id = gr_rd_int64(&rd);
    out->producer_epoch = gr_rd_int16(&rd);
    out->timeout_ms = gr_rd_int32(&rd);
    out->state = gr_rd_int8(&rd);
    if (!rd.err && (out->state < 0 || out->state >= GR_TXN_STATE_COUNT)) return -1;
    /* smallest topic entry: an empty string and an empty array (+ tags) */
    int32_t n = gr_rd_array_len(&rd, flex, true, flex ? 3 : 6);
    if (rd.err) return -1;
    out->topic_count = n;
    struct gr_txn_topic_parts *topics = n > 0 ? gr_rd_alloc(&rd, (size_t)n, sizeof *topics) : NULL;
    for (int32_t i = 0; i < n && !rd.err; i++) {
        topics[i].topic = gr_rd_string(&rd, flex, false);
        int32_t k = gr_rd_array_len(&rd, flex, false, 4);
        if (rd.err) break;
        int32_t *ids = k > 0 ? gr_rd_alloc(&rd, (size_t)k, sizeof *ids) : NULL;
        for (int32_t j = 0; j < k && !rd.err; j++)
            ids[j] = gr_rd_int32(&rd);
        topics[i].partitions = ids;
        topics[i].count = k;
        if (flex) {
            uint32_t tags = gr_rd_tag_count(&rd);
            for (uint32_t t = 0; t < tags && !rd.err; t++) {
                (void)gr_rd_uvarint(&rd);
                gr_rd_skip(&rd, gr_rd_uvarint(&rd));
            }
        }
    }
    out->topics = topics;
    out->last_update_ms = gr_rd_int64(&rd);
    out->start_ms = gr_rd_int64(&rd);
    if (flex) read_tags(&rd, out);
    return rd.err ? -1 : 0;
}

int32_t gr_txn_partition_for(struct gr_str txn_id, int32_t partitions)
{
    return gr_coord_partition_for(txn_id, partitions);
}
