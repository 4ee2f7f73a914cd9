/*
 * residency.c: cold-read support for slices (see log.h): whether a slice's file range is in the page
 * cache, and reading it in on an I/O pool thread, so the network thread's sendfile never waits for the
 * disk. The check costs one cachestat(2) call (about 2 us for a 1 MiB range on this machine's kernel,
 * against about 130 us for mmap + mincore + munmap); without cachestat a 1-byte preadv2(RWF_NOWAIT) of the
 * first and last page is the fallback. Read next: storage/iopool.h, server/handlers/fetch.c.
 */
#include <errno.h>
#include <stdlib.h>

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

int gr_log_slice_prefetch(const struct gr_log_slice *slice)
{
    if (slice->bytes <= 0 || slice->fd < 0) return 0;
    size_t cap = slice->bytes < PREFETCH_CHUNK_BYTES ? (size_t)slice->bytes : PREFETCH_CHUNK_BYTES;
    uint8_t *buf = malloc(cap);
    if (!buf) return -ENOMEM;
    int err = 0;
    for (int64_t done = 0; done < slice->bytes && err == 0;) {
        size_t n = slice->bytes - done < (int64_t)cap ? (size_t)(slice->bytes - done) : cap;
        ssize_t r = gr_sys_pread_full(slice->fd, buf, n, slice->file_pos + done);
        if (r < 0) err = (int)r;
        else if ((size_t)r < n) err = -EIO; /* the file ended early: the sender will see it too */
        done += (int64_t)n;
    }
    free(buf);
    return err;
}
