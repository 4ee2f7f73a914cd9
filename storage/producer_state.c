/*
 * producer_state.c: the producer id map (open addressing, linear probing, backward-shift deletion) and its
 * snapshot codec. See producer_state.h for the invariants and the snapshot format.
 */
#include "storage/producer_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "protocol/record_batch.h"
#include "protocol/crc32c.h"

#define PS_ENTRY_FIXED_BYTES 31
#define PS_BATCH_BYTES 28
#define PS_HEADER_BYTES 18

void gr_producer_state_init(struct gr_producer_state *ps)
{
    memset(ps, 0, sizeof(*ps));
}

void gr_producer_state_free(struct gr_producer_state *ps)
{
    free(ps->slots);
    free(ps->txns);
    memset(ps, 0, sizeof(*ps));
}

void gr_producer_state_reset(struct gr_producer_state *ps, int64_t end_offset)
{
    for (size_t i = 0; i < ps->cap; i++)
        ps->slots[i].producer_id = -1;
    ps->count = 0;
    ps->end_offset = end_offset;
    ps->txn_count = 0;
    ps->txn_completed = 0;
}

/* Room for one more transaction. 0 or -ENOMEM. */
static int txn_reserve(struct gr_producer_state *ps)
{
    if (ps->txn_count < ps->txn_cap) return 0;
    size_t ncap = ps->txn_cap ? ps->txn_cap * 2 : 8;
    struct gr_producer_txn *n = realloc(ps->txns, ncap * sizeof(*n));
    if (!n) return -ENOMEM;
    ps->txns = n;
    ps->txn_cap = ncap;
    return 0;
}

/* Inserts an open transaction, keeping txns ordered by first offset (at the end in every append order). */
static int txn_open(struct gr_producer_state *ps, int64_t pid, int64_t first_offset)
{
    if (txn_reserve(ps) < 0) return -ENOMEM;
    size_t i = ps->txn_count;
    while (i > 0 && ps->txns[i - 1].first_offset > first_offset)
        i--;
    memmove(&ps->txns[i + 1], &ps->txns[i], (ps->txn_count - i) * sizeof(ps->txns[0]));
    ps->txns[i] =
        (struct gr_producer_txn){.producer_id = pid, .first_offset = first_offset, .last_offset = -1};
    ps->txn_count++;
    return 0;
}

/* Drops completed transactions whose marker is below `offset`. */
static void txn_drop_completed_below(struct gr_producer_state *ps, int64_t offset)
{
    if (ps->txn_completed == 0) return;
    size_t k = 0;
    for (size_t i = 0; i < ps->txn_count; i++) {
        struct gr_producer_txn *t = &ps->txns[i];
        if (t->last_offset >= 0 && t->last_offset < offset) {
            ps->txn_completed--;
            continue;
        }
        ps->txns[k++] = *t;
    }
    ps->txn_count = k;
}

void gr_producer_state_on_high_watermark(struct gr_producer_state *ps, int64_t high_watermark)
{
    txn_drop_completed_below(ps, high_watermark);
}

int64_t gr_producer_state_first_unstable(const struct gr_producer_state *ps)
{
    return ps->txn_count ? ps->txns[0].first_offset : -1;
}

static size_t ps_hash(int64_t pid, size_t cap)
{
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static struct gr_producer_entry *ps_lookup(const struct gr_producer_state *ps, int64_t pid)
{
    if (ps->cap == 0 || pid < 0) return NULL;
    for (size_t i = ps_hash(pid, ps->cap);; i = (i + 1) & (ps->cap - 1)) {
        if (ps->slots[i].producer_id == pid) return &ps->slots[i];
        if (ps->slots[i].producer_id < 0) return NULL;
    }
}

const struct gr_producer_entry *gr_producer_state_find(const struct gr_producer_state *ps,
                                                       int64_t producer_id)
{
    return ps_lookup(ps, producer_id);
}

size_t gr_producer_state_count(const struct gr_producer_state *ps)
{
    return ps->count;
}

const struct gr_producer_entry *gr_producer_state_next(const struct gr_producer_state *ps, size_t *cursor)
{
    while (*cursor < ps->cap) {
        const struct gr_producer_entry *e = &ps->slots[(*cursor)++];
        if (e->producer_id >= 0) return e;
    }
    return NULL;
}

static int ps_grow(struct gr_producer_state *ps)
{
    size_t ncap = ps->cap ? ps->cap * 2 : 16;
    struct gr_producer_entry *ns = malloc(ncap * sizeof(*ns));
    if (!ns) return -ENOMEM;
    for (size_t i = 0; i < ncap; i++)
        ns[i].producer_id = -1;
    for (size_t i = 0; i < ps->cap; i++) {
        if (ps->slots[i].producer_id < 0) continue;
        size_t j = ps_hash(ps->slots[i].producer_id, ncap);
        while (ns[j].producer_id >= 0)
            j = (j + 1) & (ncap - 1);
        ns[j] = ps->slots[i];
    }
    free(ps->slots);
    ps->slots = ns;
    ps->cap = ncap;
    return 0;
}

/* Returns the entry for pid, inserting an empty one (epoch -1) if absent; NULL on -ENOMEM. */
static struct gr_producer_entry *ps_insert(struct gr_producer_state *ps, int64_t pid)
{
    struct gr_producer_entry *e = ps_lookup(ps, pid);
    if (e) return e;
    if ((ps->count + 1) * 4 > ps->cap * 3 && ps_grow(ps) < 0) return NULL;
    size_t i = ps_hash(pid, ps->cap);
    while (ps->slots[i].producer_id >= 0)
        i = (i + 1) & (ps->cap - 1);
    e = &ps->slots[i];
    memset(e, 0, sizeof(*e));
    e->producer_id = pid;
    e->producer_epoch = -1;
    e->coordinator_epoch = -1;
    e->last_timestamp_ms = -1;
    e->current_txn_first_offset = -1;
    ps->count++;
    return e;
}

static void ps_remove_slot(struct gr_producer_state *ps, size_t i)
{
    /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
    size_t mask = ps->cap - 1;
    ps->slots[i].producer_id = -1;
    for (size_t j = (i + 1) & mask; ps->slots[j].producer_id >= 0; j = (j + 1) & mask) {
        size_t home = ps_hash(ps->slots[j].producer_id, ps->cap);
        /* Move j into the hole at i if its home is not cyclically in (i, j]. */
        bool in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            ps->slots[i] = ps->slots[j];
            ps->slots[j].producer_id = -1;
            i = j;
        }
    }
    ps->count--;
}

int32_t gr_producer_entry_last_seq(const struct gr_producer_entry *e)
{
    return e->batch_count ? e->batches[e->batch_count - 1].last_seq : -1;
}

const struct gr_producer_batch *gr_producer_entry_find_batch(const struct gr_producer_entry *e,
                                                             int32_t first_seq, int32_t last_seq)
{
    for (int i = 0; i < e->batch_count; i++)
        if (e->batches[i].first_seq == first_seq && e->batches[i].last_seq == last_seq) return &e->batches[i];
    return NULL;
}

/* Kafka's sequence arithmetic: sequences wrap from INT32_MAX to 0. */
static int32_t seq_add(int32_t seq, int32_t delta)
{
    if (seq > INT32_MAX - delta) return delta - (INT32_MAX - seq) - 1;
    return seq + delta;
}

/* Kafka's ProducerAppendInfo.inSequence: next == last + 1, or 0 after INT32_MAX. */
static bool in_sequence(int32_t last_seq, int32_t next_seq)
{
    return (int64_t)next_seq == (int64_t)last_seq + 1 || (next_seq == 0 && last_seq == INT32_MAX);
}

/* ProducerAppendInfo.checkProducerEpoch and checkCoordinatorEpoch for a marker (origin COORDINATOR) of
   transaction version `version` (WriteTxnMarkers' TransactionVersion, KIP-1228): below 2 an epoch below the
   producer's is refused; at 2 the coordinator bumped the epoch before the marker, so an epoch at or below the
   producer's is refused too, except the same epoch when no transaction of the producer is open here: a
   retried marker (coordinator reload, lost answer) that Kafka writes again (KAFKA-19999). */
static enum gr_producer_verdict check_marker(const struct gr_producer_entry *e, const uint8_t *b, size_t len,
                                             int16_t version)
{
    if (!e || e->producer_epoch < 0) return GR_PRODUCER_ACCEPT;
    int16_t epoch = gr_batch_producer_epoch(b);
    bool invalid = version >= 2 ? epoch <= e->producer_epoch : epoch < e->producer_epoch;
    if (invalid && !(version >= 2 && epoch == e->producer_epoch && e->current_txn_first_offset < 0))
        return GR_PRODUCER_INVALID_EPOCH;
    int type;
    int32_t coordinator_epoch;
    if (gr_control_marker_parse(b, len, &type, &coordinator_epoch) == 0 &&
        e->coordinator_epoch > coordinator_epoch)
        return GR_PRODUCER_COORDINATOR_FENCED;
    return GR_PRODUCER_ACCEPT;
}

enum gr_producer_verdict gr_producer_state_check(const struct gr_producer_state *ps, const uint8_t *b,
                                                 size_t len, int16_t marker_version,
                                                 const struct gr_producer_batch **dup)
{
    *dup = NULL;
    int64_t pid = gr_batch_producer_id(b);
    if (pid < 0) return GR_PRODUCER_ACCEPT;
    const struct gr_producer_entry *e = ps_lookup(ps, pid);
    if (gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL) return check_marker(e, b, len, marker_version);
    if (!e || e->producer_epoch < 0) return GR_PRODUCER_ACCEPT; /* no state: any sequence (Kafka 4.x) */
    int16_t epoch = gr_batch_producer_epoch(b);
    int32_t first_seq = gr_batch_base_sequence(b);
    if (first_seq < 0) {
        /* NO_SEQUENCE (-1): a coordinator's write (the group coordinator's transactional offset commits;
           client batches carry a sequence >= 0). Kafka checks sequences and looks for duplicates for origin
           CLIENT only (ProducerAppendInfo.maybeValidateDataBatch,
           UnifiedLog.analyzeAndValidateProducerState): the epoch alone is checked. */
        return epoch < e->producer_epoch ? GR_PRODUCER_INVALID_EPOCH : GR_PRODUCER_ACCEPT;
    }
    if (epoch == e->producer_epoch) {
        *dup = gr_producer_entry_find_batch(e, first_seq, seq_add(first_seq, gr_batch_last_offset_delta(b)));
        if (*dup) return GR_PRODUCER_DUPLICATE;
    }
    if (epoch < e->producer_epoch) return GR_PRODUCER_INVALID_EPOCH;
    if (epoch != e->producer_epoch) {
        if (first_seq != 0) return GR_PRODUCER_OUT_OF_ORDER;
    } else if (!in_sequence(gr_producer_entry_last_seq(e), first_seq)) {
        return GR_PRODUCER_OUT_OF_ORDER;
    }
    if (e->current_txn_first_offset >= 0 && !(gr_batch_attributes(b) & GR_BATCH_ATTR_TRANSACTIONAL))
        return GR_PRODUCER_INVALID_TXN_STATE;
    return GR_PRODUCER_ACCEPT;
}

int gr_producer_state_reserve(struct gr_producer_state *ps, int64_t producer_id)
{
    if (txn_reserve(ps) < 0) return -ENOMEM;
    if (producer_id < 0 || ps_lookup(ps, producer_id)) return 0;
    if ((ps->count + 1) * 4 > ps->cap * 3) return ps_grow(ps);
    return 0;
}

/* Zig-zag varint / varlong (Kafka's record encoding); NULL when it does not fit before `end`. */
static const uint8_t *read_varlong(const uint8_t *p, const uint8_t *end, int64_t *v)
{
    uint64_t raw = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return NULL;
        uint8_t c = *p++;
        raw |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return p;
        }
    }
    return NULL;
}

int gr_control_marker_parse(const uint8_t *b, size_t len, int *type, int32_t *coordinator_epoch)
{
    if (len < GR_BATCH_HEADER_BYTES || (int64_t)len < gr_batch_total_bytes(b) ||
        !(gr_batch_attributes(b) & GR_BATCH_ATTR_CONTROL) ||
        (gr_batch_attributes(b) & GR_BATCH_ATTR_CODEC_MASK) || gr_batch_record_count(b) < 1)
        return -EINVAL;
    const uint8_t *p = b + GR_BATCH_HEADER_BYTES, *end = b + gr_batch_total_bytes(b);
    int64_t rec_len, skip, key_len, value_len;
    if (!(p = read_varlong(p, end, &rec_len)) || rec_len <= 0 || rec_len > end - p) return -EINVAL;
    end = p + rec_len;
    if (p >= end) return -EINVAL;
    p++; /* record attributes */
    if (!(p = read_varlong(p, end, &skip)) || !(p = read_varlong(p, end, &skip))) return -EINVAL;
    if (!(p = read_varlong(p, end, &key_len)) || key_len < 4 || key_len > end - p) return -EINVAL;
    int16_t key_type = (int16_t)gr_be16(p + 2); /* key: version int16, type int16 */
    p += key_len;
    if (key_type != GR_CONTROL_ABORT && key_type != GR_CONTROL_COMMIT) return -EINVAL;
    if (!(p = read_varlong(p, end, &value_len)) || value_len < 6 || value_len > end - p) return -EINVAL;
    *type = key_type;
    *coordinator_epoch = (int32_t)gr_be32(p + 2); /* value: version int16, coordinator epoch int32 */
    return 0;
}

/* ProducerAppendInfo.appendEndTxnMarker (no checks: gr_producer_state_check ran them for a leader). */
static void apply_marker(struct gr_producer_state *ps, struct gr_producer_entry *e, const uint8_t *b,
                         size_t len, struct gr_completed_txn *done)
{
    int type;
    int32_t coordinator_epoch;
    int16_t epoch = gr_batch_producer_epoch(b);
    if (gr_control_marker_parse(b, len, &type, &coordinator_epoch) < 0) {
        /* An empty control batch (its marker cleaned away) or an unreadable one: only the epoch. */
        if (epoch > e->producer_epoch) {
            e->producer_epoch = epoch;
            e->batch_count = 0;
        }
        return;
    }
    int64_t offset = gr_batch_base_offset(b);
    if (e->current_txn_first_offset >= 0) {
        struct gr_producer_txn *t = NULL;
        for (size_t i = 0; i < ps->txn_count; i++)
            if (ps->txns[i].producer_id == e->producer_id && ps->txns[i].last_offset < 0) {
                t = &ps->txns[i];
                break;
            }
        int64_t lso = offset + 1; /* ProducerStateManager.lastStableOffset / findNextIncompleteTxn */
        for (size_t i = 0; i < ps->txn_count; i++)
            if (ps->txns[i].last_offset < 0 && ps->txns[i].producer_id != e->producer_id) {
                lso = ps->txns[i].first_offset;
                break;
            }
        if (done)
            *done = (struct gr_completed_txn){.producer_id = e->producer_id,
                                              .first_offset = e->current_txn_first_offset,
                                              .last_offset = offset,
                                              .last_stable_offset = lso,
                                              .aborted = type == GR_CONTROL_ABORT};
        if (t) { /* completed: holds the first unstable offset until the high watermark passes it */
            t->last_offset = offset;
            ps->txn_completed++;
        }
    }
    if (epoch != e->producer_epoch) { /* ProducerStateEntry.maybeUpdateProducerEpoch */
        e->producer_epoch = epoch;
        e->batch_count = 0;
    }
    e->current_txn_first_offset = -1;
    e->coordinator_epoch = coordinator_epoch;
}

int gr_producer_state_update(struct gr_producer_state *ps, const uint8_t *b, size_t len,
                             struct gr_completed_txn *done)
{
    if (done) *done = (struct gr_completed_txn){.producer_id = -1, .first_offset = -1, .last_offset = -1};
    int64_t last_offset = gr_batch_last_offset(b);
    int64_t pid = gr_batch_producer_id(b);
    if (pid >= 0) {
        if (txn_reserve(ps) < 0) return -ENOMEM;
        struct gr_producer_entry *e = ps_insert(ps, pid);
        if (!e) return -ENOMEM;
        int16_t attrs = gr_batch_attributes(b);
        e->last_timestamp_ms = gr_batch_max_timestamp(b);
        if (attrs & GR_BATCH_ATTR_CONTROL) {
            apply_marker(ps, e, b, len, done); /* a commit/abort marker closes the transaction */
        } else {
            int16_t epoch = gr_batch_producer_epoch(b);
            if (epoch != e->producer_epoch) {
                /* A new epoch (or the first batch) starts a fresh sequence history. */
                e->producer_epoch = epoch;
                e->batch_count = 0;
            }
            if ((attrs & GR_BATCH_ATTR_TRANSACTIONAL) && e->current_txn_first_offset < 0) {
                e->current_txn_first_offset = gr_batch_base_offset(b);
                txn_open(ps, pid, e->current_txn_first_offset); /* cannot fail: reserved above */
            }
            int32_t first_seq = gr_batch_base_sequence(b);
            int32_t delta = gr_batch_last_offset_delta(b);
            if (first_seq >= 0 && delta >= 0) {
                if (e->batch_count == GR_PRODUCER_BATCHES_MAX) {
                    memmove(&e->batches[0], &e->batches[1],
                            sizeof(e->batches[0]) * (GR_PRODUCER_BATCHES_MAX - 1));
                    e->batch_count--;
                }
                struct gr_producer_batch *pb = &e->batches[e->batch_count++];
                pb->first_seq = first_seq;
                pb->last_seq = seq_add(first_seq, delta);
                pb->last_offset = last_offset;
                pb->offset_delta = delta;
                pb->timestamp_ms = e->last_timestamp_ms;
            }
        }
    }
    if (last_offset + 1 > ps->end_offset) ps->end_offset = last_offset + 1;
    return 0;
}

/* The last offset an entry is known by: its last batch, else its open transaction's start. */
static int64_t entry_last_offset(const struct gr_producer_entry *e)
{
    if (e->batch_count) return e->batches[e->batch_count - 1].last_offset;
    return e->current_txn_first_offset;
}

size_t gr_producer_state_expire(struct gr_producer_state *ps, int64_t now_ms, int64_t expiration_ms)
{
    size_t dropped = 0;
    for (size_t i = 0; i < ps->cap;) {
        struct gr_producer_entry *e = &ps->slots[i];
        if (e->producer_id >= 0 && e->current_txn_first_offset < 0 &&
            e->last_timestamp_ms <= gr_ms_sub_sat(now_ms, expiration_ms)) {
            ps_remove_slot(ps, i); /* the slot may now hold a shifted entry: look at it again */
            dropped++;
            continue;
        }
        i++;
    }
    return dropped;
}

void gr_producer_state_truncate_head(struct gr_producer_state *ps, int64_t log_start_offset)
{
    txn_drop_completed_below(ps, log_start_offset);
    for (size_t i = 0; i < ps->cap;) {
        struct gr_producer_entry *e = &ps->slots[i];
        if (e->producer_id >= 0 && entry_last_offset(e) < log_start_offset &&
            e->current_txn_first_offset < 0) {
            ps_remove_slot(ps, i); /* the slot may now hold a shifted entry: look at it again */
            continue;
        }
        if (e->producer_id >= 0) {
            /* Forget batches that are no longer in the log (their offsets cannot be returned). */
            int drop = 0;
            while (drop < e->batch_count && e->batches[drop].last_offset < log_start_offset)
                drop++;
            if (drop) {
                memmove(&e->batches[0], &e->batches[drop],
                        sizeof(e->batches[0]) * (size_t)(e->batch_count - drop));
                e->batch_count -= drop;
            }
        }
        i++;
    }
}

static bool entry_equal(const struct gr_producer_entry *a, const struct gr_producer_entry *b)
{
    if (a->producer_epoch != b->producer_epoch || a->coordinator_epoch != b->coordinator_epoch ||
        a->last_timestamp_ms != b->last_timestamp_ms ||
        a->current_txn_first_offset != b->current_txn_first_offset || a->batch_count != b->batch_count)
        return false;
    for (int i = 0; i < a->batch_count; i++) {
        const struct gr_producer_batch *x = &a->batches[i], *y = &b->batches[i];
        if (x->first_seq != y->first_seq || x->last_seq != y->last_seq || x->last_offset != y->last_offset ||
            x->offset_delta != y->offset_delta || x->timestamp_ms != y->timestamp_ms)
            return false;
    }
    return true;
}

bool gr_producer_state_equal(const struct gr_producer_state *a, const struct gr_producer_state *b)
{
    if (a->count != b->count) return false;
    size_t cur = 0;
    const struct gr_producer_entry *e;
    while ((e = gr_producer_state_next(a, &cur)) != NULL) {
        const struct gr_producer_entry *f = gr_producer_state_find(b, e->producer_id);
        if (!f || !entry_equal(e, f)) return false;
    }
    return true;
}

size_t gr_producer_state_encoded_bytes(const struct gr_producer_state *ps)
{
    size_t n = PS_HEADER_BYTES;
    size_t cur = 0;
    const struct gr_producer_entry *e;
    while ((e = gr_producer_state_next(ps, &cur)) != NULL)
        n += PS_ENTRY_FIXED_BYTES + (size_t)e->batch_count * PS_BATCH_BYTES;
    return n;
}

void gr_producer_state_encode(const struct gr_producer_state *ps, uint8_t *buf)
{
    gr_put_be16(buf, GR_PRODUCER_SNAPSHOT_VERSION);
    gr_put_be64(buf + 6, (uint64_t)ps->end_offset);
    gr_put_be32(buf + 14, (uint32_t)ps->count);
    uint8_t *p = buf + PS_HEADER_BYTES;
    size_t cur = 0;
    const struct gr_producer_entry *e;
    while ((e = gr_producer_state_next(ps, &cur)) != NULL) {
        gr_put_be64(p, (uint64_t)e->producer_id);
        gr_put_be16(p + 8, (uint16_t)e->producer_epoch);
        gr_put_be32(p + 10, (uint32_t)e->coordinator_epoch);
        gr_put_be64(p + 14, (uint64_t)e->last_timestamp_ms);
        gr_put_be64(p + 22, (uint64_t)e->current_txn_first_offset);
        p[30] = (uint8_t)e->batch_count;
        p += PS_ENTRY_FIXED_BYTES;
        for (int i = 0; i < e->batch_count; i++) {
            const struct gr_producer_batch *pb = &e->batches[i];
            gr_put_be32(p, (uint32_t)pb->first_seq);
            gr_put_be32(p + 4, (uint32_t)pb->last_seq);
            gr_put_be64(p + 8, (uint64_t)pb->last_offset);
            gr_put_be32(p + 16, (uint32_t)pb->offset_delta);
            gr_put_be64(p + 20, (uint64_t)pb->timestamp_ms);
            p += PS_BATCH_BYTES;
        }
    }
    size_t len = (size_t)(p - buf);
    gr_put_be32(buf + 2, gr_crc32c(0, buf + 6, len - 6));
}

int gr_producer_state_decode(struct gr_producer_state *ps, const uint8_t *buf, size_t len)
{
    gr_producer_state_reset(ps, 0);
    if (len < PS_HEADER_BYTES || gr_be16(buf) != GR_PRODUCER_SNAPSHOT_VERSION) return -EINVAL;
    if (gr_be32(buf + 2) != gr_crc32c(0, buf + 6, len - 6)) return -EINVAL;
    int64_t end_offset = (int64_t)gr_be64(buf + 6);
    uint32_t n = gr_be32(buf + 14);
    if (end_offset < 0 || n > (len - PS_HEADER_BYTES) / PS_ENTRY_FIXED_BYTES) return -EINVAL;
    const uint8_t *p = buf + PS_HEADER_BYTES, *end = buf + len;
    for (uint32_t k = 0; k < n; k++) {
        if ((size_t)(end - p) < PS_ENTRY_FIXED_BYTES) goto bad;
        int64_t pid = (int64_t)gr_be64(p);
        int bc = p[30];
        if (pid < 0 || bc > GR_PRODUCER_BATCHES_MAX || ps_lookup(ps, pid) ||
            (size_t)(end - p) < PS_ENTRY_FIXED_BYTES + (size_t)bc * PS_BATCH_BYTES)
            goto bad;
        struct gr_producer_entry *e = ps_insert(ps, pid);
        if (!e) {
            gr_producer_state_reset(ps, 0);
            return -ENOMEM;
        }
        e->producer_epoch = (int16_t)gr_be16(p + 8);
        e->coordinator_epoch = (int32_t)gr_be32(p + 10);
        e->last_timestamp_ms = (int64_t)gr_be64(p + 14);
        e->current_txn_first_offset = (int64_t)gr_be64(p + 22);
        e->batch_count = bc;
        p += PS_ENTRY_FIXED_BYTES;
        for (int i = 0; i < bc; i++) {
            struct gr_producer_batch *pb = &e->batches[i];
            pb->first_seq = (int32_t)gr_be32(p);
            pb->last_seq = (int32_t)gr_be32(p + 4);
            pb->last_offset = (int64_t)gr_be64(p + 8);
            pb->offset_delta = (int32_t)gr_be32(p + 16);
            pb->timestamp_ms = (int64_t)gr_be64(p + 20);
            p += PS_BATCH_BYTES;
        }
    }
    if (p != end) goto bad;
    ps->end_offset = end_offset;
    /* The open transactions (a snapshot keeps no completed ones: Kafka's unreplicatedTxns are not in it). */
    size_t cur = 0;
    const struct gr_producer_entry *oe;
    while ((oe = gr_producer_state_next(ps, &cur)) != NULL)
        if (oe->current_txn_first_offset >= 0 &&
            txn_open(ps, oe->producer_id, oe->current_txn_first_offset) < 0) {
            gr_producer_state_reset(ps, 0);
            return -ENOMEM;
        }
    return 0;
bad:
    gr_producer_state_reset(ps, 0);
    return -EINVAL;
}
