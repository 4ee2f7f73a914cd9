/*
 * slowread.c: an LD_PRELOAD library for the io suite that models a slow disk: every pread(2) of at least
 * 64 KiB from a file whose name ends in ".log" sleeps GREGOR_TEST_SLOW_PREAD_MS first. Only the I/O pool's
 * read-in of cold ranges (1 MiB preads) and start-up scans read that much at once; the network thread's
 * header lookups read 8 KiB and are not slowed. With GREGOR_TEST_SLOW_OPEN_MS (or _US, microseconds), every
 * openat(2) of a segment file (.log, .index, .timeindex) sleeps that long while the file named by
 * GREGOR_TEST_SLOW_OPEN_FLAG exists (the test creates it once the broker has started, so the start-up
 * opens are not slowed). Built by io/run.sh with cc; test support only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t (*real_pread)(int, void *, size_t, off_t);

static void maybe_sleep(int fd, size_t n)
{
    const char *ms = getenv("GREGOR_TEST_SLOW_PREAD_MS");
    if (!ms || n < 65536) return;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 4) return;
    path[len] = '\0';
    if (strcmp(path + len - 4, ".log") == 0) usleep((useconds_t)atoi(ms) * 1000);
}

ssize_t pread(int fd, void *buf, size_t n, off_t pos)
{
    if (!real_pread) real_pread = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    maybe_sleep(fd, n);
    return real_pread(fd, buf, n, pos);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t pos)
{
    return pread(fd, buf, n, pos);
}

static int (*real_openat)(int, const char *, int, ...);

static int has_suffix(const char *s, const char *sfx)
{
    size_t n = strlen(s), m = strlen(sfx);
    return n >= m && strcmp(s + n - m, sfx) == 0;
}

static void maybe_sleep_open(const char *path)
{
    const char *ms = getenv("GREGOR_TEST_SLOW_OPEN_MS"), *us = getenv("GREGOR_TEST_SLOW_OPEN_US");
    const char *flag = getenv("GREGOR_TEST_SLOW_OPEN_FLAG");
    if ((!ms && !us) || !flag || !path) return;
    if (!has_suffix(path, ".log") && !has_suffix(path, ".index") && !has_suffix(path, ".timeindex")) return;
    if (access(flag, F_OK) == 0) usleep(us ? (useconds_t)atoi(us) : (useconds_t)atoi(ms) * 1000);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    if (!real_openat) real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    maybe_sleep_open(path);
    return real_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return openat(dirfd, path, flags, mode);
}
