/*
 * sys.h: the thin syscall shim every storage file goes through, so tests can inject faults (short write,
 * ENOSPC, EIO on fsync) and simulate a crash (storage/tests/fault.c). `gr_sys` is a table of function
 * pointers with libc's signatures; by default they are libc's. A test replaces entries before opening a
 * store and restores them with gr_sys_reset() after closing it.
 *
 * The gr_sys_* wrappers below return -errno instead of -1/errno (and retry EINTR), which is the storage
 * convention. Only mutating and durability calls need to be here; plain reads go through pread too so a
 * test can fail them.
 *
 * Invariant: the table is changed only while no store is open (the flusher threads read it unlocked).
 * Read next: storage/segment.c, storage/tests/fault.h.
 */
#ifndef GR_STORAGE_SYS_H
#define GR_STORAGE_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct gr_sys_ops {
    int (*openat)(int dirfd, const char *path, int flags, ...);
    int (*close)(int fd);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t pos);
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t pos);
    ssize_t (*pwritev)(int fd, const struct iovec *iov, int iovcnt, off_t pos);
    int (*fdatasync)(int fd);
    int (*fsync)(int fd);
    int (*ftruncate)(int fd, off_t len);
    int (*renameat)(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
    int (*unlinkat)(int dirfd, const char *path, int flags);
    int (*mkdirat)(int dirfd, const char *path, mode_t mode);
    /* Page-cache residency of [pos, pos + len): the number of cached pages into *cached_pages. Default:
       Linux cachestat(2) (6.5+); -1/ENOSYS where it is missing (callers then fall back to preadv2). */
    int (*cachestat)(int fd, int64_t pos, int64_t len, int64_t *cached_pages);
    /* preadv2(2); storage uses it with RWF_NOWAIT to probe residency without blocking. */
    ssize_t (*preadv2)(int fd, const struct iovec *iov, int iovcnt, off_t pos, int flags);
    /* syncfs(2): every file of the file system holding fd (group commit of many logs at once). */
    int (*syncfs)(int fd);
    /* linkat(2): gives a name to a segment file created unnamed (O_TMPFILE) ahead of a roll. */
    int (*linkat)(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags);
};

extern struct gr_sys_ops gr_sys;
/* libc's entries (what gr_sys_reset restores), for a test wrapper that calls through. */
extern const struct gr_sys_ops gr_sys_libc;

/* Restores libc's functions in every entry. */
void gr_sys_reset(void);

/* Wrappers: same arguments as the syscalls; return >= 0 on success, -errno on failure. */
int gr_sys_openat(int dirfd, const char *path, int flags, int mode);
int gr_sys_close(int fd);
/* Reads exactly n bytes unless the file ends first: returns bytes read (short only at EOF) or -errno. */
ssize_t gr_sys_pread_full(int fd, void *buf, size_t n, int64_t pos);
/* One pwrite/pwritev call as issued (may be short); the caller handles a short result. */
ssize_t gr_sys_pwrite(int fd, const void *buf, size_t n, int64_t pos);
ssize_t gr_sys_pwritev(int fd, const struct iovec *iov, int iovcnt, int64_t pos);
/* Writes all n bytes (looping over short writes); returns 0 or -errno (-ENOSPC if a write returns 0). */
int gr_sys_pwrite_full(int fd, const void *buf, size_t n, int64_t pos);
int gr_sys_fdatasync(int fd);
int gr_sys_fsync(int fd);
/* One syncfs of the file system holding fd: 0 or -errno. The error (Linux >= 5.8 reports writeback errors
   here) names no file: the caller must treat every file it relied on as failed. Never retried. */
int gr_sys_syncfs(int fd);
int gr_sys_ftruncate(int fd, int64_t len);
int gr_sys_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
int gr_sys_unlinkat(int dirfd, const char *path, int flags);
int gr_sys_mkdirat(int dirfd, const char *path, int mode);
/* Links the open file `fd` (e.g. an O_TMPFILE) as dirfd/name (through /proc/self/fd, which needs no
   privilege, unlike AT_EMPTY_PATH). 0 or -errno. */
int gr_sys_link_fd(int fd, int dirfd, const char *name);
/* Residency of [pos, pos + len) of fd: 1 when every page is in the page cache, 0 when some page is not,
   -errno when it cannot be told. Never waits for the disk (cachestat, else a 1-byte preadv2 RWF_NOWAIT of
   the first and last page). */
int gr_sys_range_resident(int fd, int64_t pos, int64_t len);

/* Audit of blocking calls on one thread (the server's network thread must never wait for the disk; issue
   #4). After gr_sys_audit_this_thread(report) on a thread, every wrapper above that may block on the disk
   (openat, fdatasync, fsync, syncfs, ftruncate, renameat, unlinkat, mkdirat, link_fd, and a pread_full of
   a range not in the page cache) and every gr_sys_audit_note made on THAT thread calls
   report(op, fd, path) before the call (fd -1 or path NULL when the call has none). Append pwrites to the
   page cache are not reported. report NULL turns the audit off for the calling thread. Costs one
   thread-local test per call when off. */
void gr_sys_audit_this_thread(void (*report)(const char *op, int fd, const char *path));
/* For blocking calls made outside the wrappers (fstatat, directory listings): reports `op` as above when
   the calling thread is audited. */
void gr_sys_audit_note(const char *op, int fd, const char *path);

#endif
