/*
 * records.c: encode and decode the __consumer_offsets keys and values (formats in records.h), the group ->
 * partition hash and the consumer-protocol subscription parse. Decoders trust nothing: every length is
 * checked by the wire reader (protocol/wire.h) against the bytes at hand.
 */
#include "coordinator/records.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gr_coord_records_free(struct gr_coord_record *recs, int count)
{
    for (int i = 0; i < count; i++) {
        free(recs[i].key);
        free(recs[i].value);
        recs[i].key = recs[i].value = NULL;
    }
}

/* ---- decoding ---- */

static void skip_tags(struct gr_rd *rd)
{
    uint32_t n = gr_rd_tag_count(rd);
    for (uint32_t i = 0; i < n && !rd->err; i++) {
        (void)gr_rd_uvarint(rd);
        uint32_t size = gr_rd_uvarint(rd);
        gr_rd_skip(rd, size);
    }
}

enum gr_coord_key_type gr_coord_key_decode(const uint8_t *key, size_t len, struct gr_offset_commit_key *ok,
                                           struct gr_str *group)
{
    struct gr_rd rd;
    gr_rd_init(&rd, key, len, NULL);
    int16_t version = gr_rd_int16(&rd);
    if (rd.err) return GR_COORD_KEY_UNKNOWN;
    if (version == 0 || version == 1) {
        ok->group = gr_rd_string(&rd, false, false);
        ok->topic = gr_rd_string(&rd, false, false);
        ok->partition = gr_rd_int32(&rd);
        return rd.err ? GR_COORD_KEY_UNKNOWN : GR_COORD_KEY_OFFSET_COMMIT;
    }
    if (version == 2) {
        *group = gr_rd_string(&rd, false, false);
        return rd.err ? GR_COORD_KEY_UNKNOWN : GR_COORD_KEY_GROUP_METADATA;
    }
    return GR_COORD_KEY_UNKNOWN;
}

int gr_offset_commit_value_decode(const uint8_t *value, size_t len, struct gr_offset_commit_value *out)
{
    struct gr_rd rd;
    gr_rd_init(&rd, value, len, NULL);
    int16_t v = gr_rd_int16(&rd);
    if (rd.err || v < 0 || v > 4) return -1;
    bool flex = v >= 4;
    out->offset = gr_rd_int64(&rd);
    out->leader_epoch = v >= 3 ? gr_rd_int32(&rd) : -1;
    out->metadata = gr_rd_string(&rd, flex, false);
    out->commit_timestamp_ms = gr_rd_int64(&rd);
    out->expire_timestamp_ms = v == 1 ? gr_rd_int64(&rd) : -1;
    if (flex) skip_tags(&rd);
    return rd.err ? -1 : 0;
}

int gr_group_metadata_value_decode(const uint8_t *value, size_t len, struct gr_arena *arena,
                                   struct gr_group_metadata_value *out)
{
    struct gr_rd rd;
    gr_rd_init(&rd, value, len, arena);
    int16_t v = gr_rd_int16(&rd);
    if (rd.err || v < 0 || v > 4) return -1;
    bool flex = v >= 4;
    out->protocol_type = gr_rd_string(&rd, flex, false);
    out->generation = gr_rd_int32(&rd);
    out->protocol = gr_rd_string(&rd, flex, true);
    out->leader = gr_rd_string(&rd, flex, true);
    out->current_state_timestamp_ms = v >= 2 ? gr_rd_int64(&rd) : -1;
    /* smallest member: four empty strings, two ints, two empty bytes */
    int32_t n = gr_rd_array_len(&rd, flex, false, flex ? 14 : 24);
    if (rd.err) return -1;
    out->member_count = n;
    out->members = n > 0 ? gr_rd_alloc(&rd, (size_t)n, sizeof *out->members) : NULL;
    for (int32_t i = 0; i < n && !rd.err; i++) {
        struct gr_group_metadata_member *m = &out->members[i];
        m->member_id = gr_rd_string(&rd, flex, false);
        m->group_instance_id = v >= 3 ? gr_rd_string(&rd, flex, true) : GR_STR_NULL;
        m->client_id = gr_rd_string(&rd, flex, false);
        m->client_host = gr_rd_string(&rd, flex, false);
        m->rebalance_timeout_ms = v >= 1 ? gr_rd_int32(&rd) : -1;
        m->session_timeout_ms = gr_rd_int32(&rd);
        m->subscription = gr_rd_bytes(&rd, flex, false);
        m->assignment = gr_rd_bytes(&rd, flex, false);
        if (flex) skip_tags(&rd);
    }
    if (flex) skip_tags(&rd);
    return rd.err ? -1 : 0;
}

/* ---- encoding ---- */

static uint8_t *alloc_writer(struct gr_wr *wr, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (p) gr_wr_init(wr, p, n);
    return p;
}

int gr_offset_commit_record(struct gr_coord_record *rec, const char *group, const char *topic,
                            int32_t partition, const struct gr_offset_commit_value *value)
{
    struct gr_str g = gr_str_c(group), t = gr_str_c(topic);
    size_t klen = 2 + gr_sz_string(g, false) + gr_sz_string(t, false) + 4;
    struct gr_wr wr;
    uint8_t *key = alloc_writer(&wr, klen);
    if (!key) return -ENOMEM;
    gr_wr_int16(&wr, GR_OFFSET_COMMIT_KEY_VERSION);
    gr_wr_string(&wr, g, false);
    gr_wr_string(&wr, t, false);
    gr_wr_int32(&wr, partition);
    uint8_t *val = NULL;
    size_t vlen = 0;
    if (value) {
        bool expire = value->expire_timestamp_ms >= 0;
        struct gr_str md = value->metadata.len >= 0 ? value->metadata : gr_str_c("");
        vlen = 2 + 8 + (expire ? 0 : 4) + gr_sz_string(md, false) + 8 + (expire ? 8 : 0);
        val = alloc_writer(&wr, vlen);
        if (!val) {
            free(key);
            return -ENOMEM;
        }
        gr_wr_int16(&wr, expire ? GR_OFFSET_COMMIT_VALUE_VERSION_EXPIRE : GR_OFFSET_COMMIT_VALUE_VERSION);
        gr_wr_int64(&wr, value->offset);
        if (!expire) gr_wr_int32(&wr, value->leader_epoch);
        gr_wr_string(&wr, md, false);
        gr_wr_int64(&wr, value->commit_timestamp_ms);
        if (expire) gr_wr_int64(&wr, value->expire_timestamp_ms);
    }
    *rec = (struct gr_coord_record){key, klen, val, vlen};
    return 0;
}

static size_t group_value_size(const struct gr_group_metadata_value *v)
{
    size_t n = 2 + gr_sz_string(v->protocol_type, false) + 4 + gr_sz_string(v->protocol, false) +
               gr_sz_string(v->leader, false) + 8 + 4;
    for (int32_t i = 0; i < v->member_count; i++) {
        const struct gr_group_metadata_member *m = &v->members[i];
        n += gr_sz_string(m->member_id, false) + gr_sz_string(m->group_instance_id, false) +
             gr_sz_string(m->client_id, false) + gr_sz_string(m->client_host, false) + 4 + 4 +
             gr_sz_bytes(m->subscription, false) + gr_sz_bytes(m->assignment, false);
    }
    return n;
}

int gr_group_metadata_record(struct gr_coord_record *rec, const char *group,
                             const struct gr_group_metadata_value *value)
{
    struct gr_str g = gr_str_c(group);
    size_t klen = 2 + gr_sz_string(g, false);
    struct gr_wr wr;
    uint8_t *key = alloc_writer(&wr, klen);
    if (!key) return -ENOMEM;
    gr_wr_int16(&wr, GR_GROUP_METADATA_KEY_VERSION);
    gr_wr_string(&wr, g, false);
    uint8_t *val = NULL;
    size_t vlen = 0;
    if (value) {
        vlen = group_value_size(value);
        val = alloc_writer(&wr, vlen);
        if (!val) {
            free(key);
            return -ENOMEM;
        }
        gr_wr_int16(&wr, GR_GROUP_METADATA_VALUE_VERSION);
        gr_wr_string(&wr, value->protocol_type, false);
        gr_wr_int32(&wr, value->generation);
        gr_wr_string(&wr, value->protocol, false);
        gr_wr_string(&wr, value->leader, false);
        gr_wr_int64(&wr, value->current_state_timestamp_ms);
        gr_wr_array_len(&wr, value->member_count, false);
        for (int32_t i = 0; i < value->member_count; i++) {
            const struct gr_group_metadata_member *m = &value->members[i];
            gr_wr_string(&wr, m->member_id, false);
            gr_wr_string(&wr, m->group_instance_id, false);
            gr_wr_string(&wr, m->client_id, false);
            gr_wr_string(&wr, m->client_host, false);
            gr_wr_int32(&wr, m->rebalance_timeout_ms);
            gr_wr_int32(&wr, m->session_timeout_ms);
            gr_wr_bytes(&wr, m->subscription, false);
            gr_wr_bytes(&wr, m->assignment, false);
        }
    }
    *rec = (struct gr_coord_record){key, klen, val, vlen};
    return 0;
}

/* ---- Java string facts ---- */

/* Decodes one UTF-8 code point at s[*i] (advancing *i); an invalid or truncated sequence yields U+FFFD
 * and consumes one byte, as Java's decoder replaces malformed input. */
static uint32_t utf8_next(const uint8_t *s, int32_t len, int32_t *i)
{
    uint8_t c = s[*i];
    int need;
    uint32_t cp, min;
    if (c < 0x80) {
        (*i)++;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        need = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        need = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        need = 3, cp = c & 0x07, min = 0x10000;
    } else {
        (*i)++;
        return 0xFFFD;
    }
    for (int k = 1; k <= need; k++) {
        if (*i + k >= len || (s[*i + k] & 0xC0) != 0x80) {
            (*i)++;
            return 0xFFFD;
        }
        cp = (cp << 6) | (s[*i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        (*i)++;
        return 0xFFFD;
    }
    *i += need + 1;
    return cp;
}

int32_t gr_java_string_hash(struct gr_str s)
{
    uint32_t h = 0;
    const uint8_t *p = (const uint8_t *)s.ptr;
    for (int32_t i = 0; i < s.len;) {
        uint32_t cp = utf8_next(p, s.len, &i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
    }
    return (int32_t)h;
}

int32_t gr_java_string_length(struct gr_str s)
{
    int32_t n = 0;
    const uint8_t *p = (const uint8_t *)s.ptr;
    for (int32_t i = 0; i < s.len;)
        n += utf8_next(p, s.len, &i) >= 0x10000 ? 2 : 1;
    return n;
}

int32_t gr_coord_partition_for(struct gr_str group_id, int32_t partitions)
{
    int32_t h = gr_java_string_hash(group_id);
    int32_t a = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
    return a % partitions;
}

int gr_consumer_subscription_topics(struct gr_bytes metadata, void (*fn)(void *ctx, struct gr_str topic),
                                    void *ctx)
{
    if (metadata.len < 0) return -1;
    struct gr_rd rd;
    gr_rd_init(&rd, metadata.ptr, (size_t)metadata.len, NULL);
    int16_t version = gr_rd_int16(&rd);
    if (rd.err || version < 0) return -1;
    int32_t n = gr_rd_array_len(&rd, false, false, 2);
    if (rd.err) return -1;
    /* parse everything first so a malformed list reports no topics at all */
    const uint8_t *start = rd.p;
    for (int32_t i = 0; i < n && !rd.err; i++)
        (void)gr_rd_string(&rd, false, false);
    if (rd.err) return -1;
    gr_rd_init(&rd, start, (size_t)(metadata.ptr + metadata.len - start), NULL);
    for (int32_t i = 0; i < n; i++)
        fn(ctx, gr_rd_string(&rd, false, false));
    return 0;
}
