/* header.c: request/response header codec; see header.h for the layouts. */
#include "protocol/header.h"

#include "protocol/gen/messages.h"

int gr_request_header_peek(const uint8_t *p, size_t len, int16_t *api_key, int16_t *api_version,
                           int32_t *correlation_id)
{
    struct gr_rd rd;
    gr_rd_init(&rd, p, len, NULL);
    *api_key = gr_rd_int16(&rd);
    *api_version = gr_rd_int16(&rd);
    *correlation_id = gr_rd_int32(&rd);
    return rd.err;
}

int gr_request_header_decode(struct gr_rd *rd, int16_t header_version, struct gr_request_header *h)
{
    h->request_api_key = gr_rd_int16(rd);
    h->request_api_version = gr_rd_int16(rd);
    h->correlation_id = gr_rd_int32(rd);
    h->client_id = header_version >= 1 ? gr_rd_string(rd, false, true) : GR_STR_NULL;
    h->unknown_tags.items = NULL;
    h->unknown_tags.count = 0;
    if (header_version >= 2 && !rd->err) {
        uint32_t n = gr_rd_tag_count(rd);
        int64_t last = -1;
        for (uint32_t i = 0; i < n && !rd->err; i++) {
            uint32_t tag = gr_rd_uvarint(rd);
            uint32_t sz = gr_rd_uvarint(rd);
            if (rd->err) break;
            if ((int64_t)tag <= last) {
                gr_rd_fail(rd, GR_WIRE_BAD_TAGS);
                break;
            }
            last = tag;
            if (sz > gr_rd_left(rd)) {
                gr_rd_fail(rd, GR_WIRE_SHORT);
                break;
            }
            if (!h->unknown_tags.items)
                h->unknown_tags.items = gr_rd_alloc(rd, n, sizeof *h->unknown_tags.items);
            if (rd->err) break;
            h->unknown_tags.items[h->unknown_tags.count++] = (struct gr_tag){tag, {rd->p, (int32_t)sz}};
            rd->p += sz;
        }
    }
    return rd->err;
}

int16_t gr_request_header_version(int16_t api_version, int16_t flexible_min)
{
    return (flexible_min >= 0 && api_version >= flexible_min) ? 2 : 1;
}

int16_t gr_response_header_version(const struct gr_msg_ops *ops, int16_t api_version)
{
    if (ops->header_version >= 0) return ops->header_version;
    return (ops->flexible_min >= 0 && api_version >= ops->flexible_min) ? 1 : 0;
}

size_t gr_response_header_size(int16_t header_version)
{
    return header_version >= 1 ? 5 : 4;
}

void gr_response_header_encode(struct gr_wr *wr, int16_t header_version, int32_t correlation_id)
{
    gr_wr_int32(wr, correlation_id);
    if (header_version >= 1) gr_wr_uvarint(wr, 0);
}

size_t gr_request_header_size(const struct gr_request_header *h, int16_t header_version)
{
    size_t n = 8 + gr_sz_string(h->client_id, false);
    if (header_version >= 2)
        n += gr_sz_uvarint((uint32_t)h->unknown_tags.count) + gr_sz_unknown_tags(&h->unknown_tags);
    return n;
}

void gr_request_header_encode(struct gr_wr *wr, const struct gr_request_header *h, int16_t header_version)
{
    gr_wr_int16(wr, h->request_api_key);
    gr_wr_int16(wr, h->request_api_version);
    gr_wr_int32(wr, h->correlation_id);
    gr_wr_string(wr, h->client_id, false);
    if (header_version >= 2) {
        gr_wr_uvarint(wr, (uint32_t)h->unknown_tags.count);
        for (int32_t i = 0; i < h->unknown_tags.count; i++) {
            gr_wr_uvarint(wr, h->unknown_tags.items[i].tag);
            gr_wr_uvarint(wr, (uint32_t)h->unknown_tags.items[i].data.len);
            gr_wr_raw(wr, h->unknown_tags.items[i].data.ptr, (size_t)h->unknown_tags.items[i].data.len);
        }
    }
}
