/*
 * log_dir_usage.h: the "log dir usage" query of a store (DescribeLogDirs): the log directory's absolute path
 * and the size and free space of the file system holding it. realpath and statvfs may wait for the disk, so
 * the query runs as an I/O pool job (storage/iopool.h) and answers through a done hook on the owning thread,
 * called exactly once. The query is a struct the caller embeds (e.g. in a request's arena); storage never
 * allocates or frees it. Read next: server/handlers/describe_log_dirs.c (its one caller).
 */
#ifndef GR_STORAGE_LOG_DIR_USAGE_H
#define GR_STORAGE_LOG_DIR_USAGE_H

#include <limits.h>
#include <stdint.h>

#include "storage/iopool.h"
#include "storage/store.h"

struct gr_log_dir_usage;
/* Called exactly once per query, on the thread that calls gr_iopool_complete (or inside
   gr_store_log_dir_usage without a pool); the results below are set. */
typedef void (*gr_log_dir_usage_fn)(struct gr_log_dir_usage *u);

struct gr_log_dir_usage {
    gr_log_dir_usage_fn done;
    void *ctx;
    /* results, valid from the done call on: */
    const char *path;     /* the absolute path (realpath), or the configured log.dirs when realpath failed */
    int64_t total_bytes;  /* statvfs f_blocks * f_frsize (bytes); -1 when statvfs failed */
    int64_t usable_bytes; /* statvfs f_bavail * f_frsize (bytes, what an unprivileged writer can use); -1 */
    /* private: */
    struct gr_io_job job;
    const char *dir;
    char abs[PATH_MAX];
};

/* Starts the query of `store`'s log directory on `pool` (inline when NULL: the hook is then called before
   this returns). `u->done` (and ctx) must be set; `u` is borrowed until its done hook runs. Network thread
   only. Never fails: each missing fact is reported as above. */
void gr_store_log_dir_usage(struct gr_store *store, struct gr_iopool *pool, struct gr_log_dir_usage *u);

#endif
