/*
 * flusher.c: the store's background threads. They do the only blocking disk work the network thread
 * hands off: fdatasync of logs (group commit: one fdatasync covers every append made before it started),
 * flush.ms deadlines, and housekeeping jobs (writing producer snapshots and checkpoints, DeleteRecords'
 * log-start checkpoint with its completion, truncating the bytes of a failed write, making spare segment
 * files, unlinking deleted segments and snapshots, removing deleted partition directories).
 *
 * Invariants: a log is at most once in the flush queue and flushed by at most one thread at a time
 * (flush_queued / flush_running / flush_again, under fl.mu); housekeeping jobs run in FIFO order on thread
 * 0 only, so a write and a later unlink of the same name never race; flushes run on every thread; jobs
 * marked any_thread (spare segment files, undoing a failed write) run first on whichever thread is free,
 * and one extra thread runs nothing else, so a roll's next file or an undo never waits behind fdatasyncs
 * (with a small segment.bytes and acks=all, every flusher thread can be in an fdatasync when a log asks
 * for its next file; the roll would then create it on the network thread, storage/roll.c).
 * gr_flusher_stop drains everything queued before joining. Group commit policy: a thread that finds at
 * least cfg.flush_syncfs_min_logs logs queued takes them all and makes them durable with ONE syncfs of
 * the log directory's file system (gr_log_flush_begin for each, syncfs, gr_log_flush_end for each with
 * its result: a failed syncfs takes every one of them offline, since it names no file); otherwise each log
 * gets its own fdatasync calls. Read next: log.c (gr_log_flush_now).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "storage/internal.h"
#include "storage/sys.h"

struct thread_arg {
    struct gr_store *store;
    int index; /* 0..flusher_threads-1; flusher_threads: the any_thread-jobs-only thread */
};

void gr_job_free(struct gr_job *job)
{
    if (!job) return;
    if (job->dir_fd >= 0) close(job->dir_fd);
    for (int i = 0; job->names && i < job->name_count; i++)
        free(job->names[i]);
    free(job->names);
    free(job->data);
    free(job);
}

static void rmtree(int parent_fd, const char *name)
{
    int fd = gr_sys_openat(parent_fd, name, O_RDONLY | O_DIRECTORY, 0);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        if (!d) {
            gr_sys_close(fd);
        } else {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
                int err = gr_sys_unlinkat(dirfd(d), de->d_name, 0);
                if (err < 0)
                    GR_WARN_RATELIMITED("storage: unlinking %s/%s failed (%s)", name, de->d_name,
                                        strerror(-err));
            }
            closedir(d);
        }
    }
    int err = gr_sys_unlinkat(parent_fd, name, AT_REMOVEDIR);
    if (err < 0 && err != -ENOENT)
        GR_WARN_RATELIMITED("storage: removing directory %s failed (%s)", name, strerror(-err));
    gr_dir_sync(parent_fd);
}

int gr_job_run(struct gr_job *job)
{
    int err = 0;
    switch (job->type) {
    case GR_JOB_WRITE_FILE:
        err = gr_file_write_if_changed(job->dir_fd, job->names[0], job->data, job->len);
        if (err < 0) GR_WARN_RATELIMITED("storage: writing %s failed (%s)", job->names[0], strerror(-err));
        if (err < 0 && job->failed) atomic_store(job->failed, true); /* the owner writes it again later */
        break;
    case GR_JOB_UNLINK:
        if (job->ino) {
            struct stat st;
            if (fstatat(job->dir_fd, job->names[0], &st, 0) == 0 &&
                (st.st_ino != job->ino || st.st_dev != job->dev))
                break; /* the name now belongs to a newer file: leave it */
        }
        for (int i = 0; i < job->name_count; i++) {
            err = gr_sys_unlinkat(job->dir_fd, job->names[i], 0);
            if (err < 0 && err != -ENOENT)
                GR_WARN_RATELIMITED("storage: unlinking %s failed (%s)", job->names[i], strerror(-err));
        }
        gr_dir_sync(job->dir_fd);
        break;
    case GR_JOB_RMTREE:
        rmtree(job->dir_fd, job->names[0]);
        break;
    case GR_JOB_CALL:
        err = job->fn(job->arg);
        job->arg = NULL;
        break;
    case GR_JOB_SPARE:
        gr_roll_spare_job_run(job);
        break;
    }
    return err;
}

static int queue_push_locked(struct gr_flusher *fl, struct gr_log *log)
{
    if (fl->queue_count == fl->queue_cap) {
        int ncap = fl->queue_cap ? fl->queue_cap * 2 : 64;
        struct gr_log **n = malloc(sizeof(*n) * (size_t)ncap);
        if (!n) return -ENOMEM;
        for (int i = 0; i < fl->queue_count; i++)
            n[i] = fl->queue[(fl->queue_head + i) % fl->queue_cap];
        free(fl->queue);
        fl->queue = n;
        fl->queue_cap = ncap;
        fl->queue_head = 0;
    }
    fl->queue[(fl->queue_head + fl->queue_count) % fl->queue_cap] = log;
    fl->queue_count++;
    log->flush_queued = true;
    return 0;
}

static struct gr_log *queue_pop_locked(struct gr_flusher *fl)
{
    if (fl->queue_count == 0) return NULL;
    struct gr_log *log = fl->queue[fl->queue_head];
    fl->queue_head = (fl->queue_head + 1) % fl->queue_cap;
    fl->queue_count--;
    log->flush_queued = false;
    return log;
}

static void timed_remove_locked(struct gr_flusher *fl, struct gr_log *log)
{
    if (!atomic_load(&log->on_timed_list)) return;
    for (struct gr_log **pp = &fl->timed; *pp; pp = &(*pp)->timed_next) {
        if (*pp == log) {
            *pp = log->timed_next;
            break;
        }
    }
    log->timed_next = NULL;
    atomic_store(&log->on_timed_list, false);
}

/* Under fl->mu: queues a flush of `log` unless one is queued; marks it for another round if running. */
static int request_locked(struct gr_flusher *fl, struct gr_log *log)
{
    timed_remove_locked(fl, log);
    if (log->flush_running) {
        log->flush_again = true;
        return 0;
    }
    if (log->flush_queued) return 0;
    int err = queue_push_locked(fl, log);
    if (err == 0) pthread_cond_broadcast(&fl->cv);
    return err;
}

void gr_flusher_request(struct gr_log *log)
{
    struct gr_flusher *fl = &log->store->fl;
    if (!fl->threads) {
        gr_log_flush_now(log, true);
        return;
    }
    pthread_mutex_lock(&fl->mu);
    int err = request_locked(fl, log);
    pthread_mutex_unlock(&fl->mu);
    if (err < 0) gr_log_flush_now(log, true); /* no memory to queue: flush on the caller's thread */
}

void gr_flusher_timed_add(struct gr_log *log, int64_t deadline_mono_ms)
{
    struct gr_flusher *fl = &log->store->fl;
    pthread_mutex_lock(&fl->mu);
    if (!atomic_load(&log->on_timed_list) && !log->flush_queued) {
        log->flush_deadline_mono_ms = deadline_mono_ms;
        log->timed_next = fl->timed;
        fl->timed = log;
        atomic_store(&log->on_timed_list, true);
        pthread_cond_broadcast(&fl->cv);
    }
    pthread_mutex_unlock(&fl->mu);
}

void gr_flusher_forget_log(struct gr_log *log)
{
    struct gr_flusher *fl = &log->store->fl;
    pthread_mutex_lock(&fl->mu);
    timed_remove_locked(fl, log);
    if (log->flush_queued) {
        int kept = 0;
        for (int i = 0; i < fl->queue_count; i++) {
            struct gr_log *q = fl->queue[(fl->queue_head + i) % fl->queue_cap];
            if (q != log) fl->queue[(fl->queue_head + kept++) % fl->queue_cap] = q;
        }
        fl->queue_count = kept;
        log->flush_queued = false;
    }
    log->flush_again = false;
    while (log->flush_running)
        pthread_cond_wait(&fl->idle_cv, &fl->mu);
    pthread_mutex_unlock(&fl->mu);
}

void gr_flusher_job(struct gr_store *store, struct gr_job *job)
{
    struct gr_flusher *fl = &store->fl;
    if (!fl->threads) {
        gr_job_run(job);
        gr_job_free(job);
        return;
    }
    pthread_mutex_lock(&fl->mu);
    job->next = NULL;
    struct gr_job **head = job->any_thread ? &fl->any_head : &fl->jobs_head;
    struct gr_job **tail = job->any_thread ? &fl->any_tail : &fl->jobs_tail;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
    pthread_cond_broadcast(&fl->cv);
    pthread_mutex_unlock(&fl->mu);
}

/* The body of gr_store_write_file and gr_store_write_file_flagged. */
static int write_file(struct gr_store *store, int dir_fd, const char *name, uint8_t *data, size_t len,
                      bool sync, atomic_bool *failed)
{
    struct gr_flusher *fl = &store->fl;
    if (!fl->threads) {
        int err = gr_file_write_if_changed(dir_fd, name, data, len);
        free(data);
        if (err < 0 && failed) atomic_store(failed, true);
        return err;
    }
    struct gr_job *job = calloc(1, sizeof(*job));
    if (!job) {
        free(data);
        return -ENOMEM;
    }
    job->type = GR_JOB_WRITE_FILE;
    job->data = data; /* owned by the job from here: gr_job_free frees it */
    job->len = len;
    job->failed = failed;
    job->dir_fd = dup(dir_fd);
    int err = job->dir_fd < 0 ? -errno : 0; /* EMFILE/ENFILE as it is, not as ENOMEM (issue 26) */
    if (err == 0 && (!(job->names = calloc(1, sizeof(char *))) || !(job->names[0] = strdup(name))))
        err = -ENOMEM;
    if (err < 0) {
        gr_job_free(job);
        return err;
    }
    job->name_count = 1;
    job->wait = sync;
    gr_flusher_job(store, job);
    if (!sync) return 0;
    gr_sys_audit_note("wait for a file write", dir_fd, name);
    pthread_mutex_lock(&fl->mu);
    while (!job->finished)
        pthread_cond_wait(&fl->idle_cv, &fl->mu);
    err = job->result;
    pthread_mutex_unlock(&fl->mu);
    gr_job_free(job);
    return err;
}

int gr_store_write_file(struct gr_store *store, int dir_fd, const char *name, uint8_t *data, size_t len,
                        bool sync)
{
    return write_file(store, dir_fd, name, data, len, sync, NULL);
}

int gr_store_write_file_flagged(struct gr_store *store, int dir_fd, const char *name, uint8_t *data,
                                size_t len, atomic_bool *failed)
{
    return write_file(store, dir_fd, name, data, len, false, failed);
}

void gr_flusher_quiesce(struct gr_store *store)
{
    struct gr_flusher *fl = &store->fl;
    if (!fl->threads) return;
    pthread_mutex_lock(&fl->mu);
    while (fl->queue_count || fl->jobs_head || fl->any_head || fl->busy)
        pthread_cond_wait(&fl->idle_cv, &fl->mu);
    pthread_mutex_unlock(&fl->mu);
}

/* Thread 0: moves logs whose flush.ms deadline passed into the queue; returns the next deadline. */
static int64_t timed_scan_locked(struct gr_flusher *fl)
{
    int64_t now = gr_time_mono_ms(), next = INT64_MAX;
    struct gr_log **pp = &fl->timed;
    while (*pp) {
        struct gr_log *log = *pp;
        if (log->flush_deadline_mono_ms <= now) {
            *pp = log->timed_next;
            log->timed_next = NULL;
            atomic_store(&log->on_timed_list, false);
            if (log->flush_running)
                log->flush_again = true;
            else if (!log->flush_queued)
                queue_push_locked(fl, log);
            continue;
        }
        if (log->flush_deadline_mono_ms < next) next = log->flush_deadline_mono_ms;
        pp = &log->timed_next;
    }
    return next;
}

static void wait_until(struct gr_flusher *fl, int64_t deadline_mono_ms)
{
    if (deadline_mono_ms == INT64_MAX) {
        pthread_cond_wait(&fl->cv, &fl->mu);
        return;
    }
    int64_t wait_ms = deadline_mono_ms - gr_time_mono_ms();
    if (wait_ms <= 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += wait_ms / 1000;
    ts.tv_nsec += (wait_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&fl->cv, &fl->mu, &ts);
}

/* One syncfs for `n` logs (each marked flush_running by the caller). */
static void flush_batch_syncfs(struct gr_store *store, struct gr_log **logs, int n)
{
    struct gr_flush_ticket *t = calloc((size_t)n, sizeof(*t));
    bool *began = calloc((size_t)n, sizeof(bool));
    if (!t || !began) {
        free(t);
        free(began);
        for (int i = 0; i < n; i++)
            gr_log_flush_now(logs[i], true);
        return;
    }
    int *werr = calloc((size_t)n, sizeof(int));
    const char **what = calloc((size_t)n, sizeof(char *));
    if (!werr || !what) {
        free(t);
        free(began);
        free(werr);
        free(what);
        for (int i = 0; i < n; i++)
            gr_log_flush_now(logs[i], true);
        return;
    }
    for (int i = 0; i < n; i++) {
        began[i] = gr_log_flush_begin(logs[i], &t[i]) == 0;
        /* names and index files first: the syncfs must cover them (nothing durable without its name) */
        if (began[i]) werr[i] = gr_log_flush_write(logs[i], &t[i], &what[i]);
    }
    int err = gr_sys_syncfs(store->root_fd);
    for (int i = 0; i < n; i++)
        if (began[i])
            gr_log_flush_end(logs[i], &t[i], werr[i] ? werr[i] : err, werr[i] ? what[i] : "syncfs", true);
    free(werr);
    free(what);
    free(t);
    free(began);
}

static void *flusher_main(void *p)
{
    struct thread_arg *arg = p;
    struct gr_store *store = arg->store;
    struct gr_flusher *fl = &arg->store->fl;
    int index = arg->index;
    bool any_only = index == fl->thread_count_flushing;
    free(arg);
    pthread_mutex_lock(&fl->mu);
    for (;;) {
        bool any = fl->any_head != NULL;
        if (any_only && !any) {
            if (fl->stop) break;
            pthread_cond_wait(&fl->cv, &fl->mu);
            continue;
        }
        if (any || (index == 0 && fl->jobs_head)) {
            struct gr_job **head = any ? &fl->any_head : &fl->jobs_head;
            struct gr_job **tail = any ? &fl->any_tail : &fl->jobs_tail;
            struct gr_job *job = *head;
            *head = job->next;
            if (!*head) *tail = NULL;
            fl->busy++;
            pthread_mutex_unlock(&fl->mu);
            int result = gr_job_run(job);
            bool waited = job->wait;
            if (!waited) gr_job_free(job);
            pthread_mutex_lock(&fl->mu);
            if (waited) {
                job->result = result;
                job->finished = true; /* the waiter frees it */
            }
            fl->busy--;
            pthread_cond_broadcast(&fl->idle_cv);
            continue;
        }
        int batch_min = store->cfg.flush_syncfs_min_logs;
        if (batch_min > 0 && fl->queue_count >= batch_min) {
            int n = fl->queue_count;
            struct gr_log **logs = malloc(sizeof(*logs) * (size_t)n);
            if (logs) {
                for (int i = 0; i < n; i++) {
                    logs[i] = queue_pop_locked(fl);
                    logs[i]->flush_running = true;
                }
                fl->busy++;
                pthread_mutex_unlock(&fl->mu);
                flush_batch_syncfs(store, logs, n);
                pthread_mutex_lock(&fl->mu);
                for (int i = 0; i < n; i++) {
                    logs[i]->flush_running = false;
                    if (logs[i]->flush_again) {
                        logs[i]->flush_again = false;
                        queue_push_locked(fl, logs[i]);
                    }
                }
                free(logs);
                fl->busy--;
                pthread_cond_broadcast(&fl->cv);
                pthread_cond_broadcast(&fl->idle_cv);
                continue;
            }
        }
        struct gr_log *log = queue_pop_locked(fl);
        if (log) {
            log->flush_running = true;
            fl->busy++;
            pthread_mutex_unlock(&fl->mu);
            gr_log_flush_now(log, true);
            pthread_mutex_lock(&fl->mu);
            log->flush_running = false;
            fl->busy--;
            if (log->flush_again) {
                log->flush_again = false;
                queue_push_locked(fl, log);
                pthread_cond_broadcast(&fl->cv);
            }
            pthread_cond_broadcast(&fl->idle_cv);
            continue;
        }
        int64_t next = index == 0 ? timed_scan_locked(fl) : INT64_MAX;
        if (fl->queue_count) continue;
        if (fl->stop) break;
        wait_until(fl, next);
    }
    pthread_mutex_unlock(&fl->mu);
    return NULL;
}

int gr_flusher_start(struct gr_store *store)
{
    struct gr_flusher *fl = &store->fl;
    int n = store->cfg.flusher_threads > 0 ? store->cfg.flusher_threads : 1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&fl->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&fl->idle_cv, NULL);
    pthread_mutex_init(&fl->mu, NULL);
    fl->thread_count_flushing = n;
    fl->threads = calloc((size_t)n + 1, sizeof(pthread_t));
    if (!fl->threads) return -ENOMEM;
    for (int i = 0; i <= n; i++) { /* thread n: any_thread jobs only */
        struct thread_arg *arg = malloc(sizeof(*arg));
        if (arg) {
            arg->store = store;
            arg->index = i;
        }
        int err = arg ? pthread_create(&fl->threads[i], NULL, flusher_main, arg) : ENOMEM;
        if (err) {
            free(arg);
            fl->thread_count = i;
            gr_flusher_stop(store);
            return -err;
        }
        fl->thread_count = i + 1;
    }
    return 0;
}

void gr_flusher_stop(struct gr_store *store)
{
    struct gr_flusher *fl = &store->fl;
    if (!fl->threads) return;
    pthread_mutex_lock(&fl->mu);
    fl->stop = true;
    pthread_cond_broadcast(&fl->cv);
    pthread_mutex_unlock(&fl->mu);
    for (int i = 0; i < fl->thread_count; i++)
        pthread_join(fl->threads[i], NULL);
    free(fl->threads);
    fl->threads = NULL;
    fl->thread_count = 0;
    /* Anything queued after the threads left runs here (none in practice: stop drains first). */
    while (fl->any_head) {
        struct gr_job *job = fl->any_head;
        fl->any_head = job->next;
        gr_job_run(job);
        gr_job_free(job);
    }
    fl->any_tail = NULL;
    while (fl->jobs_head) {
        struct gr_job *job = fl->jobs_head;
        fl->jobs_head = job->next;
        gr_job_run(job);
        gr_job_free(job);
    }
    fl->jobs_tail = NULL;
    free(fl->queue);
    fl->queue = NULL;
    fl->queue_count = fl->queue_cap = fl->queue_head = 0;
    pthread_cond_destroy(&fl->cv);
    pthread_cond_destroy(&fl->idle_cv);
    pthread_mutex_destroy(&fl->mu);
}
