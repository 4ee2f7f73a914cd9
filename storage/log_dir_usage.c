/*
 * log_dir_usage.c: the "log dir usage" query (see log_dir_usage.h): realpath and statvfs of the store's log
 * directory, on an I/O pool thread.
 */
#include "storage/log_dir_usage.h"

#include <stdbool.h>
#include <stdlib.h>
#include <sys/statvfs.h>

#include "storage/internal.h"

/* On a pool thread: touches only the query. */
static void usage_run(struct gr_io_job *job)
{
    struct gr_log_dir_usage *u =
        (struct gr_log_dir_usage *)((char *)job - offsetof(struct gr_log_dir_usage, job));
    u->path = realpath(u->dir, u->abs) ? u->abs : u->dir;
    struct statvfs sv;
    if (statvfs(u->dir, &sv) == 0) {
        u->total_bytes = (int64_t)sv.f_blocks * (int64_t)sv.f_frsize;
        u->usable_bytes = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
    } else {
        u->total_bytes = u->usable_bytes = -1;
    }
}

static void usage_done(struct gr_io_job *job)
{
    struct gr_log_dir_usage *u =
        (struct gr_log_dir_usage *)((char *)job - offsetof(struct gr_log_dir_usage, job));
    u->done(u);
}

void gr_store_log_dir_usage(struct gr_store *store, struct gr_iopool *pool, struct gr_log_dir_usage *u)
{
    u->dir = store->log_dir;
    u->path = u->dir;
    u->total_bytes = u->usable_bytes = -1;
    u->job = (struct gr_io_job){.run = usage_run, .done = usage_done};
    if (!pool) {
        usage_run(&u->job);
        usage_done(&u->job);
        return;
    }
    gr_iopool_submit(pool, &u->job);
}
