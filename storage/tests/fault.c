/*
 * fault.c: see fault.h. All state is under one mutex: the store's flusher threads call in concurrently.
 */
#include "storage/tests/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/sys.h"

struct rule {
    long target; /* fail when the op's count reaches this (0: no rule) */
    int err;
    bool sticky;
};

struct rec {
    char *path;
    uint8_t *data;
    size_t len;
    struct rec *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[F_OPS];
static long counts[F_OPS];
static long short_target;
static size_t short_bytes;
static char root[PATH_MAX];
static size_t root_len;
static bool tracking, crashed;
static long io_count, crash_at;
static struct rec *recs;

/* ---- bookkeeping ---- */

/* Counts a call of op; returns the errno to fail it with, or 0. */
static _Thread_local long thread_counts[F_OPS];

long fault_count_this_thread(enum fault_op op)
{
    return thread_counts[op];
}

static int account(enum fault_op op, bool mutating)
{
    thread_counts[op]++;
    pthread_mutex_lock(&mu);
    long c = ++counts[op];
    int err = 0;
    struct rule *r = &rules[op];
    if (r->target && (c == r->target || (r->sticky && c > r->target))) err = r->err;
    if (!err && mutating && tracking) {
        if (crashed) {
            err = EIO;
        } else {
            io_count++;
            if (crash_at > 0 && io_count >= crash_at) {
                crashed = true;
                err = EIO;
            }
        }
    }
    pthread_mutex_unlock(&mu);
    return err;
}

static bool fd_path(int fd, char *out, size_t cap)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n < 0) return false;
    out[n] = '\0';
    return true;
}

static bool at_path(int dirfd, const char *name, char *out, size_t cap)
{
    if (name[0] == '/') {
        snprintf(out, cap, "%s", name);
        return true;
    }
    char dir[PATH_MAX];
    if (dirfd == AT_FDCWD) {
        if (!getcwd(dir, sizeof(dir))) return false;
    } else if (!fd_path(dirfd, dir, sizeof(dir))) {
        return false;
    }
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < cap;
}

static bool under_root(const char *path)
{
    return tracking && strncmp(path, root, root_len) == 0 &&
           (path[root_len] == '/' || path[root_len] == '\0');
}

static struct rec **rec_find(const char *path)
{
    for (struct rec **pp = &recs; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->path, path) == 0) return pp;
    return NULL;
}

static void rec_drop(const char *path)
{
    struct rec **pp = rec_find(path);
    if (!pp) return;
    struct rec *r = *pp;
    *pp = r->next;
    free(r->path);
    free(r->data);
    free(r);
}

/* Names given by linkat to unnamed (O_TMPFILE) files, by inode: /proc/self/fd still shows the old text. */
#define LINKED_MAX 4096
static struct {
    ino_t ino;
    char path[PATH_MAX];
} linked[LINKED_MAX];
static int linked_count;

static void linked_note(ino_t ino, const char *path)
{
    pthread_mutex_lock(&mu);
    int i = linked_count < LINKED_MAX ? linked_count++ : (int)(ino % LINKED_MAX);
    linked[i].ino = ino;
    snprintf(linked[i].path, sizeof(linked[i].path), "%s", path);
    pthread_mutex_unlock(&mu);
}

static bool linked_path(ino_t ino, char *out, size_t cap)
{
    bool found = false;
    pthread_mutex_lock(&mu);
    for (int i = linked_count - 1; i >= 0 && !found; i--)
        if (linked[i].ino == ino) {
            snprintf(out, cap, "%s", linked[i].path);
            found = true;
        }
    pthread_mutex_unlock(&mu);
    return found;
}

/* After a successful sync: the file's current content is durable. */
static void record_durable(int fd)
{
    char path[PATH_MAX];
    struct stat st;
    if (!fd_path(fd, path, sizeof(path)) || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) return;
    if (st.st_nlink == 0) return; /* unlinked, or an O_TMPFILE not yet named: no name survives a crash */
    size_t pl = strlen(path);
    if (pl > 10 && strcmp(path + pl - 10, " (deleted)") == 0 && !linked_path(st.st_ino, path, sizeof(path)))
        return; /* a named O_TMPFILE keeps its old /proc text: use the name linkat gave it */
    pthread_mutex_lock(&mu);
    if (under_root(path)) {
        uint8_t *data = malloc((size_t)st.st_size + 1);
        int rfd = open(path, O_RDONLY); /* the synced fd may be write-only */
        ssize_t n = rfd >= 0 ? pread(rfd, data, (size_t)st.st_size, 0) : -1;
        if (rfd >= 0) close(rfd);
        if (n < 0) {
            fprintf(stderr, "fault: cannot read %s to record it\n", path);
            abort();
        }
        rec_drop(path);
        struct rec *r = calloc(1, sizeof(*r));
        r->path = strdup(path);
        r->data = data;
        r->len = (size_t)n;
        r->next = recs;
        recs = r;
    }
    pthread_mutex_unlock(&mu);
}

static int record_tree_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type != FTW_F || !S_ISREG(st->st_mode)) return 0;
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        record_durable(fd);
        close(fd);
    }
    return 0;
}

/* After a successful syncfs: every file under the root is durable as it is now. */
static void record_all_durable(void)
{
    pthread_mutex_lock(&mu);
    bool t = tracking;
    char r[PATH_MAX];
    snprintf(r, sizeof(r), "%s", root);
    pthread_mutex_unlock(&mu);
    if (t) nftw(r, record_tree_entry, 16, FTW_PHYS);
}

static void records_rename(const char *from, const char *to)
{
    pthread_mutex_lock(&mu);
    if (!tracking) {
        pthread_mutex_unlock(&mu);
        return;
    }
    size_t fl = strlen(from);
    rec_drop(to);
    for (struct rec *r = recs; r; r = r->next) {
        if (strcmp(r->path, from) == 0) {
            free(r->path);
            r->path = strdup(to);
        } else if (strncmp(r->path, from, fl) == 0 && r->path[fl] == '/') {
            char *np;
            if (asprintf(&np, "%s%s", to, r->path + fl) > 0) {
                free(r->path);
                r->path = np;
            }
        }
    }
    pthread_mutex_unlock(&mu);
}

/* ---- the wrappers ---- */

static int f_openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) { /* as storage/sys.c */
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    int err = account(F_OPEN, (flags & (O_CREAT | O_TRUNC | O_TMPFILE)) != 0);
    if (err) {
        errno = err;
        return -1;
    }
    return openat(dirfd, path, flags, mode);
}

static ssize_t f_pread(int fd, void *buf, size_t n, off_t pos)
{
    int err = account(F_PREAD, false);
    if (err) {
        errno = err;
        return -1;
    }
    return pread(fd, buf, n, pos);
}

static int f_cachestat(int fd, int64_t pos, int64_t len, int64_t *cached_pages)
{
    int err = account(F_CACHESTAT, false);
    if (err) {
        errno = err;
        return -1;
    }
    return gr_sys_libc.cachestat(fd, pos, len, cached_pages);
}

static ssize_t f_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t pos, int flags)
{
    int err = account(F_PREADV2, false);
    if (err) {
        errno = err;
        return -1;
    }
    return preadv2(fd, iov, iovcnt, pos, flags);
}

static size_t short_check(size_t n)
{
    pthread_mutex_lock(&mu);
    if (short_target && counts[F_PWRITE] == short_target && n > short_bytes) n = short_bytes;
    pthread_mutex_unlock(&mu);
    return n;
}

static ssize_t f_pwrite(int fd, const void *buf, size_t n, off_t pos)
{
    int err = account(F_PWRITE, true);
    if (err) {
        errno = err;
        return -1;
    }
    return pwrite(fd, buf, short_check(n), pos);
}

static ssize_t f_pwritev(int fd, const struct iovec *iov, int iovcnt, off_t pos)
{
    int err = account(F_PWRITE, true);
    if (err) {
        errno = err;
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    size_t n = short_check(total);
    if (n == total) return pwritev(fd, iov, iovcnt, pos);
    uint8_t *tmp = malloc(total);
    size_t o = 0;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(tmp + o, iov[i].iov_base, iov[i].iov_len);
        o += iov[i].iov_len;
    }
    ssize_t r = pwrite(fd, tmp, n, pos);
    free(tmp);
    return r;
}

static int f_sync(int fd, bool data_only)
{
    int err = account(data_only ? F_FDATASYNC : F_FSYNC, true);
    if (err) {
        errno = err;
        return -1; /* nothing reached the disk */
    }
    int r = data_only ? fdatasync(fd) : fsync(fd);
    if (r == 0) record_durable(fd); /* checks `tracking` under the lock */
    return r;
}

static int f_fdatasync(int fd)
{
    return f_sync(fd, true);
}
static int f_fsync(int fd)
{
    return f_sync(fd, false);
}

static int f_syncfs(int fd)
{
    int err = account(F_SYNCFS, true);
    if (err) {
        errno = err;
        return -1; /* nothing reached the disk */
    }
    int r = syncfs(fd);
    if (r == 0) record_all_durable();
    return r;
}

static int f_linkat(int od, const char *op, int nd, const char *np, int flags)
{
    int err = account(F_LINK, true);
    if (err) {
        errno = err;
        return -1;
    }
    int r = linkat(od, op, nd, np, flags);
    char to[PATH_MAX];
    struct stat st;
    if (r == 0 && at_path(nd, np, to, sizeof(to)) && stat(to, &st) == 0) linked_note(st.st_ino, to);
    return r;
}

static int f_ftruncate(int fd, off_t len)
{
    int err = account(F_FTRUNCATE, true);
    if (err) {
        errno = err;
        return -1;
    }
    return ftruncate(fd, len);
}

static int f_renameat(int od, const char *op, int nd, const char *np)
{
    int err = account(F_RENAME, true);
    if (err) {
        errno = err;
        return -1;
    }
    char from[PATH_MAX], to[PATH_MAX];
    bool paths = at_path(od, op, from, sizeof(from)) && at_path(nd, np, to, sizeof(to));
    int r = renameat(od, op, nd, np);
    if (r == 0 && paths) records_rename(from, to);
    return r;
}

static int f_unlinkat(int dirfd, const char *path, int flags)
{
    int err = account(F_UNLINK, true);
    if (err) {
        errno = err;
        return -1;
    }
    char full[PATH_MAX];
    bool have = at_path(dirfd, path, full, sizeof(full));
    int r = unlinkat(dirfd, path, flags);
    if (r == 0 && have && !(flags & AT_REMOVEDIR)) {
        pthread_mutex_lock(&mu);
        rec_drop(full);
        pthread_mutex_unlock(&mu);
    }
    return r;
}

static int f_mkdirat(int dirfd, const char *path, mode_t mode)
{
    int err = account(F_MKDIR, true);
    if (err) {
        errno = err;
        return -1;
    }
    return mkdirat(dirfd, path, mode);
}

/* ---- control ---- */

static void clear_records(void)
{
    while (recs)
        rec_drop(recs->path);
}

void fault_install(void)
{
    pthread_mutex_lock(&mu);
    memset(rules, 0, sizeof(rules));
    memset(counts, 0, sizeof(counts));
    short_target = 0;
    tracking = crashed = false;
    io_count = crash_at = 0;
    linked_count = 0;
    clear_records();
    pthread_mutex_unlock(&mu);
    gr_sys.openat = f_openat;
    gr_sys.pread = f_pread;
    gr_sys.pwrite = f_pwrite;
    gr_sys.pwritev = f_pwritev;
    gr_sys.fdatasync = f_fdatasync;
    gr_sys.fsync = f_fsync;
    gr_sys.ftruncate = f_ftruncate;
    gr_sys.renameat = f_renameat;
    gr_sys.unlinkat = f_unlinkat;
    gr_sys.mkdirat = f_mkdirat;
    gr_sys.cachestat = f_cachestat;
    gr_sys.preadv2 = f_preadv2;
    gr_sys.syncfs = f_syncfs;
    gr_sys.linkat = f_linkat;
}

void fault_uninstall(void)
{
    gr_sys_reset();
    pthread_mutex_lock(&mu);
    tracking = crashed = false;
    clear_records();
    pthread_mutex_unlock(&mu);
}

void fault_fail(enum fault_op op, int nth, int err, bool sticky)
{
    pthread_mutex_lock(&mu);
    rules[op].target = counts[op] + nth;
    rules[op].err = err;
    rules[op].sticky = sticky;
    pthread_mutex_unlock(&mu);
}

void fault_clear(enum fault_op op)
{
    pthread_mutex_lock(&mu);
    memset(&rules[op], 0, sizeof(rules[op]));
    pthread_mutex_unlock(&mu);
}

void fault_short_write(int nth, size_t bytes)
{
    pthread_mutex_lock(&mu);
    short_target = counts[F_PWRITE] + nth;
    short_bytes = bytes;
    pthread_mutex_unlock(&mu);
}

long fault_count(enum fault_op op)
{
    pthread_mutex_lock(&mu);
    long c = counts[op];
    pthread_mutex_unlock(&mu);
    return c;
}

/* Files present when tracking starts were written by a store closed cleanly: durable as they are. */
static int existing_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag != FTW_F || !S_ISREG(st->st_mode)) return 0;
    uint8_t *data = malloc((size_t)st->st_size + 1);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, data, (size_t)st->st_size, 0) : -1;
    if (fd >= 0) close(fd);
    if (n < 0) n = 0;
    struct rec *r = calloc(1, sizeof(*r));
    r->path = strdup(path);
    r->data = data;
    r->len = (size_t)n;
    r->next = recs;
    recs = r;
    return 0;
}

void fault_crash_track(const char *dir)
{
    pthread_mutex_lock(&mu);
    if (!realpath(dir, root)) snprintf(root, sizeof(root), "%s", dir);
    root_len = strlen(root);
    tracking = true;
    crashed = false;
    io_count = 0;
    crash_at = 0;
    clear_records();
    nftw(root, existing_cb, 16, FTW_PHYS);
    pthread_mutex_unlock(&mu);
}

void fault_crash_at(long nth)
{
    pthread_mutex_lock(&mu);
    crash_at = nth;
    pthread_mutex_unlock(&mu);
}

void fault_crash_now(void)
{
    pthread_mutex_lock(&mu);
    crashed = true;
    pthread_mutex_unlock(&mu);
}

bool fault_crashed(void)
{
    pthread_mutex_lock(&mu);
    bool c = crashed;
    pthread_mutex_unlock(&mu);
    return c;
}

long fault_io_count(void)
{
    pthread_mutex_lock(&mu);
    long c = io_count;
    pthread_mutex_unlock(&mu);
    return c;
}

static unsigned apply_seed;
static bool apply_tear;

static int apply_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag != FTW_F || !S_ISREG(st->st_mode)) return 0;
    size_t cur_len = (size_t)st->st_size;
    uint8_t *cur = malloc(cur_len + 1);
    int fd = open(path, O_RDONLY);
    ssize_t got = fd >= 0 ? pread(fd, cur, cur_len, 0) : -1;
    if (fd >= 0) close(fd);
    if (got < 0) got = 0;
    cur_len = (size_t)got;
    struct rec **pp = rec_find(path);
    const uint8_t *base = pp ? (*pp)->data : NULL;
    size_t base_len = pp ? (*pp)->len : 0;
    size_t extra = 0;
    if (apply_tear && cur_len > base_len) extra = (size_t)rand_r(&apply_seed) % (cur_len - base_len + 1);
    fd = open(path, O_WRONLY | O_TRUNC);
    if (fd >= 0) {
        if (base_len && write(fd, base, base_len) != (ssize_t)base_len) perror("fault_crash_apply");
        if (extra && pwrite(fd, cur + base_len, extra, (off_t)base_len) != (ssize_t)extra)
            perror("fault_crash_apply");
        close(fd);
    }
    free(cur);
    return 0;
}

void fault_crash_apply(unsigned seed, bool tear)
{
    pthread_mutex_lock(&mu);
    apply_seed = seed;
    apply_tear = tear;
    nftw(root, apply_cb, 16, FTW_PHYS);
    tracking = false;
    clear_records();
    pthread_mutex_unlock(&mu);
}
