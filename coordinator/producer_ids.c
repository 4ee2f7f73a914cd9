/*
 * producer_ids.c: block allocation of producer ids with a durable block end. See producer_ids.h.
 */
#include "coordinator/producer_ids.h"

#include <errno.h>

#include "protocol/crc32c.h"
#include "protocol/record_batch.h"

#define PID_RECORD_VERSION 1

void gr_producer_ids_encode(int64_t next_block_start, uint8_t *buf)
{
    gr_put_be16(buf, PID_RECORD_VERSION);
    gr_put_be64(buf + 6, (uint64_t)next_block_start);
    gr_put_be32(buf + 2, gr_crc32c(0, buf + 6, 8));
}

int gr_producer_ids_decode(const uint8_t *buf, size_t len, int64_t *next_block_start)
{
    if (len != GR_PRODUCER_ID_RECORD_BYTES || gr_be16(buf) != PID_RECORD_VERSION) return -EINVAL;
    if (gr_be32(buf + 2) != gr_crc32c(0, buf + 6, 8)) return -EINVAL;
    int64_t v = (int64_t)gr_be64(buf + 6);
    if (v < 0) return -EINVAL;
    *next_block_start = v;
    return 0;
}

int gr_producer_ids_open(struct gr_producer_ids *ids, const struct gr_producer_id_io *io)
{
    ids->io = *io;
    ids->next = ids->block_end = ids->saved_end = 0;
    ids->saving = false;
    uint8_t buf[GR_PRODUCER_ID_RECORD_BYTES];
    int err = io->load(io->ctx, buf, sizeof buf);
    if (err == -ENOENT) return 0;
    if (err < 0) return err;
    int64_t start;
    if (gr_producer_ids_decode(buf, sizeof buf, &start) < 0) return -EINVAL;
    ids->next = ids->block_end = ids->saved_end = start;
    return 0;
}

int gr_producer_ids_take(struct gr_producer_ids *ids, int64_t *producer_id)
{
    if (ids->next == ids->block_end) {
        if (ids->saved_end == ids->block_end)
            return ids->block_end > INT64_MAX - GR_PRODUCER_ID_BLOCK_SIZE ? -EOVERFLOW : -EAGAIN;
        ids->block_end = ids->saved_end; /* the prefetched block follows the current one */
    }
    *producer_id = ids->next++;
    return 0;
}

bool gr_producer_ids_prefetch(struct gr_producer_ids *ids, uint8_t *buf)
{
    if (ids->saving || ids->saved_end != ids->block_end) return false;
    if (ids->block_end - ids->next > GR_PRODUCER_ID_PREFETCH_LEFT) return false;
    if (ids->block_end > INT64_MAX - GR_PRODUCER_ID_BLOCK_SIZE) return false;
    ids->saving = true;
    ids->saving_end = ids->block_end + GR_PRODUCER_ID_BLOCK_SIZE;
    gr_producer_ids_encode(ids->saving_end, buf);
    return true;
}

void gr_producer_ids_saved(struct gr_producer_ids *ids, int err)
{
    if (!ids->saving) return;
    ids->saving = false;
    if (err == 0 && ids->saving_end > ids->saved_end) ids->saved_end = ids->saving_end;
}

int gr_producer_ids_next(struct gr_producer_ids *ids, int64_t *producer_id)
{
    int r = gr_producer_ids_take(ids, producer_id);
    if (r != -EAGAIN) return r;
    if (ids->saving) return -EAGAIN; /* an asynchronous save is in flight */
    /* Used up: save the next block's end now (no prefetch in this mode: one save per block). */
    int64_t end = ids->block_end + GR_PRODUCER_ID_BLOCK_SIZE;
    uint8_t buf[GR_PRODUCER_ID_RECORD_BYTES];
    gr_producer_ids_encode(end, buf);
    int err = ids->io.save(ids->io.ctx, buf, sizeof buf);
    if (err < 0) return err;
    ids->saved_end = end;
    return gr_producer_ids_take(ids, producer_id);
}
