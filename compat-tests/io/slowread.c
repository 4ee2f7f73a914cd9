/*
 * slowread.c: an LD_PRELOAD library for the io suite that models a slow disk: every pread(2) of at least
 * 64 KiB from a file whose name ends in ".log" sleeps GREGOR_TEST_SLOW_PREAD_MS first. Only the I/O pool's
 * read-in of cold ranges (1 MiB preads) and start-up scans read that much at once; the network thread's
 * header lookups read 8 KiB and are not slowed. Built by io/run.sh with cc; test support only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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
    if (!real_pread) real_pread = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    maybe_sleep(fd, n);
    return real_pread(fd, buf, n, pos);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t pos)
{
    return pread(fd, buf, n, pos);
}
