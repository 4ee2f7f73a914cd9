/*
 * test_sys_audit.c: the blocking-call audit of storage/sys.h. An audited thread reports each wrapper that
 * may wait for the disk, with its op name and path; a cold pread is reported and a resident one is not;
 * another thread and a thread whose audit was turned off report nothing. The server's
 * GREGOR_NET_THREAD_AUDIT mode rests on this, so a silent audit would let every net-thread check pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/sys.h"

static char seen[4096];
static int seen_count;

static void report(const char *op, int fd, const char *path)
{
    (void)fd;
    size_t n = strlen(seen);
    snprintf(seen + n, sizeof seen - n, "%s:%s;", op, path ? path : "-");
    seen_count++;
}

static char dir[] = "/tmp/gr_audit_XXXXXX";

static void *other_thread(void *arg)
{
    int dfd = *(int *)arg;
    int fd = gr_sys_openat(dfd, "b", O_CREAT | O_RDWR, 0644);
    if (fd >= 0) {
        gr_sys_fdatasync(fd);
        gr_sys_close(fd);
    }
    gr_sys_unlinkat(dfd, "b", 0);
    return NULL;
}

static void test_audited_thread_reports_each_blocking_call(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    seen[0] = 0;
    seen_count = 0;
    gr_sys_audit_this_thread(report);
    int fd = gr_sys_openat(dfd, "a", O_CREAT | O_RDWR, 0644);
    assert_true(fd >= 0);
    char buf[8192];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(gr_sys_pwrite_full(fd, buf, sizeof buf, 0), 0); /* a page-cache write: not reported */
    assert_int_equal(gr_sys_fdatasync(fd), 0);
    assert_int_equal(gr_sys_fsync(fd), 0);
    assert_int_equal(gr_sys_ftruncate(fd, 4096), 0);
    assert_int_equal(gr_sys_mkdirat(dfd, "d", 0755), 0);
    assert_int_equal(gr_sys_renameat(dfd, "d", dfd, "e"), 0);
    assert_int_equal(gr_sys_unlinkat(dfd, "e", AT_REMOVEDIR), 0);
    assert_int_equal(gr_sys_syncfs(fd), 0);
    gr_sys_audit_note("fstatat", dfd, "a");
    assert_string_equal(seen, "openat:a;fdatasync:-;fsync:-;ftruncate:-;mkdirat:d;renameat:d;unlinkat:e;"
                              "syncfs:-;fstatat:a;");
    assert_int_equal(seen_count, 9);

    /* Resident pages read without a report; after dropping them from the page cache, a report. */
    seen[0] = 0;
    seen_count = 0;
    assert_int_equal(gr_sys_pread_full(fd, buf, 4096, 0), 4096);
    assert_int_equal(gr_sys_pread_full(fd, buf, 8192, 0), 4096); /* past the end: nothing there to wait for */
    assert_int_equal(seen_count, 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    if (gr_sys_range_resident(fd, 0, 4096) == 0) { /* some file systems (tmpfs) never drop pages */
        assert_int_equal(gr_sys_pread_full(fd, buf, 4096, 0), 4096);
        assert_string_equal(seen, "cold pread:-;");
    }

    /* Another thread is not audited. */
    seen[0] = 0;
    seen_count = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &dfd), 0);
    pthread_join(th, NULL);
    assert_int_equal(seen_count, 0);

    /* Turned off: nothing. */
    gr_sys_audit_this_thread(NULL);
    assert_int_equal(gr_sys_fdatasync(fd), 0);
    assert_int_equal(gr_sys_unlinkat(dfd, "a", 0), 0);
    assert_int_equal(seen_count, 0);
    gr_sys_close(fd);
    close(dfd);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audited_thread_reports_each_blocking_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
