/*
 * residency.c: cold-read support for slices (see log.h): whether a slice's file range is in the page
 * cache, and reading it in on an I/O pool thread, so the network thread's sendfile never waits for the
 * disk. The check costs one cachestat(2) call (about 2 us for a 1 MiB range on this machine's kernel,
 * against about 130 us for mmap + mincore + munmap); without cachestat a 1-byte preadv2(RWF_NOWAIT) of the
 * first and last page is the fallback. Read next: storage/iopool.h, server/handlers/fetch.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "storage/internal.h"
#include "storage/sys.h"

#define PREFETCH_CHUNK_BYTES (1024 * 1024) /* pread size when reading a range into the page cache */

int gr_log_slice_resident(const struct gr_log_slice *slice)
{
    if (slice->bytes <= 0 || slice->fd < 0) return 1;
    return gr_sys_range_resident(slice->fd, slice->file_pos, slice->bytes);
}

void gr_log_slice_retain(const struct gr_log_slice *slice, struct gr_log_slice *copy)
{
    *copy = *slice;
    if (slice->ref) gr_segment_ref(slice->ref);
}

/* A `cold` slice carrying pool work (open the .log, load indexes): bytes -1, fd -1, work the gr_seg_load. */
#define COLD_SEG_LOAD (-1)

int gr_log_nowait_cold(struct gr_read_nowait *nw, struct gr_log_slice *cold)
{
    if (!nw->seg || nw->kind == 0) return -EIO; /* cannot happen: -EAGAIN comes only from a noted read */
    if (nw->kind == 1) {
        *cold = (struct gr_log_slice){.fd = nw->fd,
                                      .file_pos = nw->pos,
                                      .bytes = nw->len,
                                      .first_batch_offset = nw->seg->base_offset,
                                      .ref = nw->seg};
    } else {
        struct gr_seg_load *ld = gr_seg_load_new(nw->seg, true, nw->kind == 2);
        if (!ld) return -ENOMEM;
        *cold = (struct gr_log_slice){.fd = -1,
                                      .file_pos = 0,
                                      .bytes = COLD_SEG_LOAD,
                                      .first_batch_offset = nw->seg->base_offset,
                                      .ref = nw->seg,
                                      .work = ld};
    }
    gr_segment_ref(nw->seg);
    return -EAGAIN;
}

int gr_log_read_nowait(struct gr_log *log, int64_t offset, int64_t max_bytes, int64_t upper_bound,
                       bool min_one, struct gr_log_slice *slice, struct gr_log_slice *cold)
{
    struct gr_read_nowait nw = {0};
    *cold = (struct gr_log_slice){.fd = -1, .file_pos = 0, .bytes = 0, .first_batch_offset = -1, .ref = NULL};
    gr_segment_nowait_set(&nw);
    int r = gr_log_read(log, offset, max_bytes, upper_bound, min_one, slice);
    gr_segment_nowait_set(NULL);
    if (r != -EAGAIN) return r;
    return gr_log_nowait_cold(&nw, cold);
}

void gr_log_slice_install(struct gr_log_slice *slice)
{
    if (!slice->work) return;
    if (slice->ref) gr_seg_load_install(slice->ref, slice->work);
    gr_seg_load_free(slice->work);
    slice->work = NULL;
}

int gr_log_slice_prefetch(const struct gr_log_slice *slice)
{
    if (slice->work) {
        struct gr_seg_load *ld = slice->work;
        gr_seg_load_run(ld);
        return gr_seg_load_err(ld);
    }
    if (slice->bytes <= 0 || slice->fd < 0) return 0;
    size_t cap = slice->bytes < PREFETCH_CHUNK_BYTES ? (size_t)slice->bytes : PREFETCH_CHUNK_BYTES;
    uint8_t *buf = malloc(cap);
    if (!buf) return -ENOMEM;
    int err = 0;
    for (int64_t done = 0; done < slice->bytes && err == 0;) {
        size_t n = slice->bytes - done < (int64_t)cap ? (size_t)(slice->bytes - done) : cap;
        ssize_t r = gr_sys_pread_full(slice->fd, buf, n, slice->file_pos + done);
        if (r < 0)
            err = (int)r;
        else if ((size_t)r < n)
            err = -EIO; /* the file ended early: the sender will see it too */
        done += (int64_t)n;
    }
    free(buf);
    return err;
}
