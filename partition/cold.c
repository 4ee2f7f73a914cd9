/*
 * cold.c: the one cold-read engine (partition.h, "Cold reads"): a caller's lookups and reads run without
 * waiting for the disk; what they could not do (a segment file closed by the fd cap, index files not loaded,
 * a page of batch headers or data not in the page cache) is noted, then handed to the I/O pool in ONE job
 * per round, installed on the owning thread, and the caller's done hook runs exactly once per wait.
 *
 * Invariants: at most one job in flight per engine (c->job); noted work (lookups and data ranges) is owned
 * by the engine until it is moved into the job; the job owns its slices and, once done on the owning thread,
 * installs them, keeps the lookups' references as pins (until gr_cold_release: the fd cap cannot close a
 * file reopened for this caller between its rounds) and drops the data ranges' copies. A cancelled or
 * stopped engine's job releases everything itself and calls no hook. After GR_COLD_ROUNDS_MAX rounds with
 * lookups (pages evicted again each time), or without a pool, or out of memory, the lookups read the
 * blocking way, as the handlers did before.
 * Read next: storage/log.h (the no-wait reads and slices), storage/iopool.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "partition/partition.h"

struct gr_cold_job {
    struct gr_io_job job;
    struct gr_cold *c; /* NULL once cancelled: done releases and frees */
    struct gr_partitions *ps;
    int count;
    int ranges;                   /* slices[0, ranges): data ranges; the rest: lookups (pinned after) */
    struct gr_log_slice slices[]; /* retained copies or moved lookups: valid even if the log goes */
};

void gr_cold_init(struct gr_cold *c, struct gr_partitions *ps, struct gr_iopool *pool, gr_cold_done_fn done,
                  void *ctx)
{
    *c = (struct gr_cold){.done = done, .ctx = ctx, .ps = ps, .pool = pool};
}

/* Appends `s` to a growing array; false when out of memory. */
static bool slices_push(struct gr_log_slice **arr, int *count, int *cap, const struct gr_log_slice *s)
{
    if (*count == *cap) {
        int ncap = *cap ? *cap * 2 : 8;
        struct gr_log_slice *n = realloc(*arr, (size_t)ncap * sizeof *n);
        if (!n) return false;
        *arr = n;
        *cap = ncap;
    }
    (*arr)[(*count)++] = *s;
    return true;
}

static void slices_release(struct gr_log_slice *arr, int *count)
{
    for (int i = 0; i < *count; i++)
        gr_log_slice_release(&arr[i]);
    *count = 0;
}

/* Whether lookups still go the no-wait way (a pool, rounds left). */
static bool no_wait(const struct gr_cold *c)
{
    return c->pool && c->rounds < GR_COLD_ROUNDS_MAX;
}

/* Notes a lookup's cold work; false (work released) when out of memory: the caller reads blocking. */
static bool note(struct gr_cold *c, struct gr_log_slice *cold)
{
    if (slices_push(&c->work, &c->work_count, &c->work_cap, cold)) return true;
    gr_log_slice_release(cold);
    return false;
}

int gr_cold_read(struct gr_cold *c, struct gr_log *log, int64_t offset, int64_t max_bytes,
                 int64_t upper_bound, bool min_one, struct gr_log_slice *slice)
{
    if (!no_wait(c)) return gr_log_read(log, offset, max_bytes, upper_bound, min_one, slice);
    struct gr_log_slice cold;
    int rc = gr_log_read_nowait(log, offset, max_bytes, upper_bound, min_one, slice, &cold);
    if (rc != -EAGAIN) return rc;
    if (note(c, &cold)) return -EAGAIN;
    return gr_log_read(log, offset, max_bytes, upper_bound, min_one, slice);
}

int gr_cold_offset_for_time(struct gr_cold *c, struct gr_log *log, int64_t ts, int64_t upper_bound,
                            int64_t *offset, int64_t *timestamp, int32_t *leader_epoch)
{
    if (!no_wait(c)) return gr_log_offset_for_time(log, ts, upper_bound, offset, timestamp, leader_epoch);
    struct gr_log_slice cold;
    int rc = gr_log_offset_for_time_nowait(log, ts, upper_bound, offset, timestamp, leader_epoch, &cold);
    if (rc != -EAGAIN) return rc;
    if (note(c, &cold)) return -EAGAIN;
    return gr_log_offset_for_time(log, ts, upper_bound, offset, timestamp, leader_epoch);
}

int gr_cold_max_timestamp(struct gr_cold *c, struct gr_log *log, int64_t upper_bound, int64_t *offset,
                          int64_t *timestamp, int32_t *leader_epoch)
{
    if (!no_wait(c)) return gr_log_max_timestamp(log, upper_bound, offset, timestamp, leader_epoch);
    struct gr_log_slice cold;
    int rc = gr_log_max_timestamp_nowait(log, upper_bound, offset, timestamp, leader_epoch, &cold);
    if (rc != -EAGAIN) return rc;
    if (note(c, &cold)) return -EAGAIN;
    return gr_log_max_timestamp(log, upper_bound, offset, timestamp, leader_epoch);
}

void gr_cold_check_range(struct gr_cold *c, const struct gr_log_slice *slice)
{
    if (c->ranges_read || !c->pool || slice->bytes <= 0) return;
    if (gr_log_slice_resident(slice) != 0) return; /* resident, or cannot be told: sent as is */
    struct gr_log_slice copy;
    gr_log_slice_retain(slice, &copy);
    if (!slices_push(&c->ranges, &c->range_count, &c->range_cap, &copy)) gr_log_slice_release(&copy);
}

int gr_cold_pin_append(struct gr_cold *c, struct gr_log *log)
{
    struct gr_log_slice pin;
    int r = gr_log_append_prepare(log, &pin);
    if (r < 0) return r;
    if (r == 1 ? slices_push(&c->work, &c->work_count, &c->work_cap, &pin)
               : slices_push(&c->pins, &c->pin_count, &c->pin_cap, &pin))
        return r;
    gr_log_slice_release(&pin);
    return -ENOMEM;
}

void gr_cold_unpin(struct gr_cold *c)
{
    gr_cold_reset(c);
    slices_release(c->pins, &c->pin_count);
}

bool gr_cold_pending(const struct gr_cold *c)
{
    return c->work_count + c->range_count > 0;
}

bool gr_cold_waiting(const struct gr_cold *c)
{
    return c->job != NULL;
}

int gr_cold_rounds(const struct gr_cold *c)
{
    return c->rounds;
}

void gr_cold_reset(struct gr_cold *c)
{
    slices_release(c->work, &c->work_count);
    slices_release(c->ranges, &c->range_count);
}

static void job_run(struct gr_io_job *job)
{
    struct gr_cold_job *j = (struct gr_cold_job *)job;
    job->result = 0;
    for (int i = 0; i < j->count; i++) {
        int r = gr_log_slice_prefetch(&j->slices[i]);
        if (r < 0) job->result = r; /* the send, or the lookup done again, meets the same error */
    }
}

static void job_done(struct gr_io_job *job)
{
    struct gr_cold_job *j = (struct gr_cold_job *)job;
    struct gr_cold *c = j->c;
    bool run = c && !(j->ps && gr_partitions_stopped(j->ps));
    for (int i = 0; i < j->count; i++) {
        if (run && i >= j->ranges) {
            gr_log_slice_install(&j->slices[i]);
            if (slices_push(&c->pins, &c->pin_count, &c->pin_cap, &j->slices[i])) continue;
        }
        gr_log_slice_release(&j->slices[i]);
    }
    free(j);
    if (!c) return;
    c->job = NULL;
    if (run) c->done(c);
}

/* Moves the noted work into one job. NULL when out of memory (the work is then dropped). */
static struct gr_cold_job *take_work(struct gr_cold *c)
{
    int n = c->range_count + c->work_count;
    struct gr_cold_job *j = malloc(sizeof *j + (size_t)n * sizeof j->slices[0]);
    if (!j) {
        gr_cold_reset(c);
        return NULL;
    }
    *j = (struct gr_cold_job){.job = {.run = job_run, .done = job_done}, .c = c, .ps = c->ps};
    for (int i = 0; i < c->range_count; i++)
        j->slices[j->count++] = c->ranges[i];
    j->ranges = j->count;
    for (int i = 0; i < c->work_count; i++)
        j->slices[j->count++] = c->work[i];
    c->range_count = c->work_count = 0;
    return j;
}

void gr_cold_wait(struct gr_cold *c)
{
    if (!gr_cold_pending(c) || !c->pool) {
        gr_cold_reset(c);
        c->done(c); /* already warm */
        return;
    }
    bool lookups = c->work_count > 0, ranges = c->range_count > 0;
    struct gr_cold_job *j = take_work(c);
    if (ranges) c->ranges_read = true; /* data ranges are read in once per caller */
    if (!j) { /* no memory for the job: what it would have done is done the blocking way */
        c->rounds = GR_COLD_ROUNDS_MAX;
        c->done(c);
        return;
    }
    if (lookups) c->rounds++;
    c->job = j;
    gr_iopool_submit(c->pool, &j->job);
}

void gr_cold_cancel(struct gr_cold *c)
{
    if (!c->job) return;
    c->job->c = NULL; /* its done releases what it holds and calls nothing */
    c->job = NULL;
}

void gr_cold_release(struct gr_cold *c)
{
    gr_cold_cancel(c);
    gr_cold_reset(c);
    slices_release(c->pins, &c->pin_count);
    free(c->work);
    free(c->ranges);
    free(c->pins);
    c->work = c->ranges = c->pins = NULL;
    c->work_cap = c->range_cap = c->pin_cap = 0;
}

int gr_cold_pin_count(const struct gr_cold *c)
{
    return c->pin_count;
}
