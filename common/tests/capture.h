/*
 * capture.h: stderr captured into a temporary file for tests that check what was logged (common/log.h
 * writes to stderr). capture() starts, captured() ends and returns the text. One capture at a time.
 */
#ifndef GR_COMMON_TESTS_CAPTURE_H
#define GR_COMMON_TESTS_CAPTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

static char capture_path[64];
static int capture_saved_fd = -1;

/* Sends stderr to a fresh file (mkstemp under /tmp) until captured() is called. */
static inline void capture(void)
{
    snprintf(capture_path, sizeof capture_path, "/tmp/gr-log-test-XXXXXX");
    int fd = mkstemp(capture_path);
    assert_true(fd >= 0);
    fflush(stderr);
    capture_saved_fd = dup(2);
    assert_true(capture_saved_fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
}

/* Restores stderr and removes the file; returns the captured text (up to 1 MiB, malloc'd: the caller frees).
 */
static inline char *captured(void)
{
    fflush(stderr);
    dup2(capture_saved_fd, 2);
    close(capture_saved_fd);
    capture_saved_fd = -1;
    FILE *f = fopen(capture_path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(capture_path);
    return buf;
}

#endif
