/*
 * sys.c: the default syscall table (libc) and the -errno wrappers. See sys.h.
 */
#include "storage/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sys_openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    /* O_TMPFILE creates a file too and takes the mode (without it the file gets mode 0000, which a
       non-root broker cannot reopen after the roll names it). O_TMPFILE includes O_DIRECTORY's bit. */
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return openat(dirfd, path, flags, mode);
}

#if defined(__linux__) && !defined(SYS_cachestat)
#define SYS_cachestat 451 /* the same number on every architecture (added in Linux 6.5) */
#endif

static int sys_cachestat(int fd, int64_t pos, int64_t len, int64_t *cached_pages)
{
#ifdef SYS_cachestat
    struct {
        uint64_t off, len;
    } range = {(uint64_t)pos, (uint64_t)len};
    struct {
        uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
    } cs;
    if (syscall(SYS_cachestat, (unsigned)fd, &range, &cs, 0u) < 0) return -1;
    *cached_pages = (int64_t)cs.nr_cache;
    return 0;
#else
    (void)fd, (void)pos, (void)len, (void)cached_pages;
    errno = ENOSYS;
    return -1;
#endif
}

const struct gr_sys_ops gr_sys_libc = {
    .openat = sys_openat,
    .close = close,
    .pread = pread,
    .pwrite = pwrite,
    .pwritev = pwritev,
    .fdatasync = fdatasync,
    .fsync = fsync,
    .ftruncate = ftruncate,
    .renameat = renameat,
    .unlinkat = unlinkat,
    .mkdirat = mkdirat,
    .cachestat = sys_cachestat,
    .preadv2 = preadv2,
    .syncfs = syncfs,
    .linkat = linkat,
};

struct gr_sys_ops gr_sys = {
    .openat = sys_openat,
    .close = close,
    .pread = pread,
    .pwrite = pwrite,
    .pwritev = pwritev,
    .fdatasync = fdatasync,
    .fsync = fsync,
    .ftruncate = ftruncate,
    .renameat = renameat,
    .unlinkat = unlinkat,
    .mkdirat = mkdirat,
    .cachestat = sys_cachestat,
    .preadv2 = preadv2,
    .syncfs = syncfs,
    .linkat = linkat,
};

void gr_sys_reset(void)
{
    gr_sys = gr_sys_libc;
}

static _Thread_local void (*audit_report)(const char *op, int fd, const char *path);

void gr_sys_audit_this_thread(void (*report)(const char *op, int fd, const char *path))
{
    audit_report = report;
}

void gr_sys_audit_note(const char *op, int fd, const char *path)
{
    if (audit_report) audit_report(op, fd, path);
}

#define AUDIT(op, fd, path)                                                                                  \
    do {                                                                                                     \
        if (audit_report) audit_report(op, fd, path);                                                        \
    } while (0)

int gr_sys_openat(int dirfd, const char *path, int flags, int mode)
{
    AUDIT("openat", dirfd, path);
    for (;;) {
        int fd = gr_sys.openat(dirfd, path, flags | O_CLOEXEC, mode);
        if (fd >= 0) return fd;
        if (errno != EINTR) return -errno;
    }
}

int gr_sys_close(int fd)
{
    if (fd < 0) return 0;
    /* Linux closes the descriptor even when close() reports EINTR: never retry. */
    return gr_sys.close(fd) == 0 ? 0 : -errno;
}

ssize_t gr_sys_pread_full(int fd, void *buf, size_t n, int64_t pos)
{
    if (audit_report && n > 0) { /* only the part inside the file: pages past its end are never read */
        struct stat st;
        int64_t end = pos + (int64_t)n;
        if (fstat(fd, &st) == 0 && end > st.st_size) end = st.st_size;
        if (end > pos && gr_sys_range_resident(fd, pos, end - pos) == 0) audit_report("cold pread", fd, NULL);
    }
    size_t done = 0;
    while (done < n) {
        ssize_t r = gr_sys.pread(fd, (char *)buf + done, n - done, (off_t)(pos + (int64_t)done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

ssize_t gr_sys_pwrite(int fd, const void *buf, size_t n, int64_t pos)
{
    for (;;) {
        ssize_t r = gr_sys.pwrite(fd, buf, n, (off_t)pos);
        if (r >= 0) return r;
        if (errno != EINTR) return -errno;
    }
}

ssize_t gr_sys_pwritev(int fd, const struct iovec *iov, int iovcnt, int64_t pos)
{
    for (;;) {
        ssize_t r = gr_sys.pwritev(fd, iov, iovcnt, (off_t)pos);
        if (r >= 0) return r;
        if (errno != EINTR) return -errno;
    }
}

int gr_sys_pwrite_full(int fd, const void *buf, size_t n, int64_t pos)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = gr_sys_pwrite(fd, (const char *)buf + done, n - done, pos + (int64_t)done);
        if (r < 0) return (int)r;
        if (r == 0) return -ENOSPC;
        done += (size_t)r;
    }
    return 0;
}

int gr_sys_fdatasync(int fd)
{
    AUDIT("fdatasync", fd, NULL);
    /* No EINTR retry: a failed fdatasync is never retried as proof of anything (fsyncgate). */
    return gr_sys.fdatasync(fd) == 0 ? 0 : -errno;
}

int gr_sys_fsync(int fd)
{
    AUDIT("fsync", fd, NULL);
    return gr_sys.fsync(fd) == 0 ? 0 : -errno;
}

int gr_sys_link_fd(int fd, int dirfd, const char *name)
{
    AUDIT("linkat", dirfd, name);
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    return gr_sys.linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) == 0 ? 0 : -errno;
}

int gr_sys_syncfs(int fd)
{
    AUDIT("syncfs", fd, NULL);
    return gr_sys.syncfs(fd) == 0 ? 0 : -errno;
}

int gr_sys_ftruncate(int fd, int64_t len)
{
    AUDIT("ftruncate", fd, NULL);
    for (;;) {
        if (gr_sys.ftruncate(fd, (off_t)len) == 0) return 0;
        if (errno != EINTR) return -errno;
    }
}

int gr_sys_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    AUDIT("renameat", olddirfd, oldpath);
    return gr_sys.renameat(olddirfd, oldpath, newdirfd, newpath) == 0 ? 0 : -errno;
}

int gr_sys_unlinkat(int dirfd, const char *path, int flags)
{
    AUDIT("unlinkat", dirfd, path);
    return gr_sys.unlinkat(dirfd, path, flags) == 0 ? 0 : -errno;
}

int gr_sys_mkdirat(int dirfd, const char *path, int mode)
{
    AUDIT("mkdirat", dirfd, path);
    return gr_sys.mkdirat(dirfd, path, (mode_t)mode) == 0 ? 0 : -errno;
}

int gr_sys_range_resident(int fd, int64_t pos, int64_t len)
{
    if (len <= 0) return 1;
    long page = sysconf(_SC_PAGESIZE);
    int64_t first = pos / page, last = (pos + len - 1) / page, cached = 0;
    if (gr_sys.cachestat(fd, first * page, (last - first + 1) * page, &cached) == 0)
        return cached >= last - first + 1;
    if (errno != ENOSYS && errno != EOPNOTSUPP) return -errno;
    /* No cachestat: probe the first and the last page without waiting (RWF_NOWAIT fails with EAGAIN when
       the page would have to be read). */
    char byte;
    struct iovec v = {&byte, 1};
    int64_t probes[2] = {pos, pos + len - 1};
    for (int i = 0; i < 2; i++) {
        ssize_t r = gr_sys.preadv2(fd, &v, 1, (off_t)probes[i], RWF_NOWAIT);
        if (r < 0) return errno == EAGAIN ? 0 : -errno;
    }
    return 1;
}
