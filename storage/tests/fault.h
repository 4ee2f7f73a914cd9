/*
 * fault.h: fault injection for storage tests through the syscall shim (storage/sys.h).
 *
 * Targeted faults: fail the n-th future call of one operation with an errno, once or from then on, or make
 * the n-th pwrite short. Crash mode: every file under a root is tracked; an fdatasync/fsync that succeeds
 * records the file's content as durable (a rename carries the record to the new name, an unlink drops it).
 * At the crash point (the n-th mutating call, or fault_crash_now) that call and every later mutating call
 * fail with EIO and change nothing. fault_crash_apply then rewrites every file to what a power loss could
 * have left: its durable content, plus (when tearing) a random prefix of the bytes written after it; files
 * never synced keep a random prefix (tearing) or nothing. Directory entries are treated as durable at once
 * (the model does not lose renames or creations), which is weaker than a real file system.
 * Read next: test_faults.c.
 */
#ifndef GR_STORAGE_TEST_FAULT_H
#define GR_STORAGE_TEST_FAULT_H

#include <stdbool.h>
#include <stddef.h>

enum fault_op {
    F_OPEN,
    F_PWRITE,
    F_FDATASYNC,
    F_FSYNC,
    F_FTRUNCATE,
    F_RENAME,
    F_UNLINK,
    F_MKDIR,
    F_PREAD,
    F_CACHESTAT, /* a failing cachestat makes residency fall back to preadv2 (ENOSYS) or report -errno */
    F_PREADV2,   /* an EAGAIN here reads as "not in the page cache" */
    F_SYNCFS,    /* crash mode: a successful syncfs makes every tracked file's content durable */
    F_LINK,      /* linkat: naming a segment file created unnamed ahead of a roll */
    F_OPS
};

/* Routes gr_sys through the fault layer with an empty plan; fault_uninstall restores libc. */
void fault_install(void);
void fault_uninstall(void);
/* The nth (1-based) future call of `op` fails with `err` (positive errno); `sticky`: and every later one. */
void fault_fail(enum fault_op op, int nth, int err, bool sticky);
/* Removes the rule of `op`. */
void fault_clear(enum fault_op op);
/* The nth future pwrite/pwritev writes only `bytes` bytes (really) and returns that count. */
void fault_short_write(int nth, size_t bytes);
/* Calls of `op` since install. */
long fault_count(enum fault_op op);
/* Calls of `op` made by the calling thread (since it started): tells network-thread work from flusher work.
 */
long fault_count_this_thread(enum fault_op op);

/* Crash mode: track files under `root` (absolute path); files already there count as durable. */
void fault_crash_track(const char *root);
/* Crash when the mutating-call counter reaches `nth` (1-based, counted since fault_crash_track). */
void fault_crash_at(long nth);
void fault_crash_now(void);
bool fault_crashed(void);
/* Mutating calls counted since fault_crash_track. */
long fault_io_count(void);
/* Rewrites files under the tracked root to a post-crash state (see above); deterministic for a seed. */
void fault_crash_apply(unsigned seed, bool tear);

#endif
