/*
 * iopool.c: the I/O thread pool (see iopool.h). One mutex guards two FIFO lists: `todo` (submitted, not
 * yet taken by a thread) and `finished` (run, done() not yet called). `pending` counts submitted jobs whose
 * done() has not run; gr_iopool_drain waits for it to reach zero. Read next: storage/log.c (prefetch).
 */
#include "storage/iopool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct gr_iopool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* todo non-empty or stop */
    pthread_cond_t idle_cv; /* a job finished */
    struct gr_io_job *todo_head, *todo_tail;
    struct gr_io_job *fin_head, *fin_tail;
    int pending;
    bool stop;
    void (*notify)(void *ctx);
    void *ctx;
    pthread_t *threads;
    int thread_count;
};

static void list_push(struct gr_io_job **head, struct gr_io_job **tail, struct gr_io_job *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

static void *pool_main(void *p)
{
    struct gr_iopool *pool = p;
    pthread_mutex_lock(&pool->mu);
    for (;;) {
        struct gr_io_job *job = pool->todo_head;
        if (!job) {
            if (pool->stop) break;
            pthread_cond_wait(&pool->work_cv, &pool->mu);
            continue;
        }
        pool->todo_head = job->next;
        if (!pool->todo_head) pool->todo_tail = NULL;
        pthread_mutex_unlock(&pool->mu);
        job->run(job);
        pthread_mutex_lock(&pool->mu);
        list_push(&pool->fin_head, &pool->fin_tail, job);
        pthread_cond_broadcast(&pool->idle_cv);
        if (pool->notify) {
            pthread_mutex_unlock(&pool->mu);
            pool->notify(pool->ctx);
            pthread_mutex_lock(&pool->mu);
        }
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

int gr_iopool_create(int threads, void (*notify)(void *ctx), void *ctx, struct gr_iopool **out)
{
    if (threads < 1) threads = 1;
    struct gr_iopool *pool = calloc(1, sizeof(*pool));
    if (!pool) return -ENOMEM;
    pool->threads = calloc((size_t)threads, sizeof(pthread_t));
    if (!pool->threads) {
        free(pool);
        return -ENOMEM;
    }
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->work_cv, NULL);
    pthread_cond_init(&pool->idle_cv, NULL);
    pool->notify = notify;
    pool->ctx = ctx;
    for (int i = 0; i < threads; i++) {
        int err = pthread_create(&pool->threads[i], NULL, pool_main, pool);
        if (err) {
            gr_iopool_destroy(pool);
            return -err;
        }
        pool->thread_count = i + 1;
    }
    *out = pool;
    return 0;
}

void gr_iopool_submit(struct gr_iopool *pool, struct gr_io_job *job)
{
    pthread_mutex_lock(&pool->mu);
    list_push(&pool->todo_head, &pool->todo_tail, job);
    pool->pending++;
    pthread_cond_signal(&pool->work_cv);
    pthread_mutex_unlock(&pool->mu);
}

int gr_iopool_complete(struct gr_iopool *pool)
{
    pthread_mutex_lock(&pool->mu);
    struct gr_io_job *job = pool->fin_head;
    pool->fin_head = pool->fin_tail = NULL;
    pthread_mutex_unlock(&pool->mu);
    int n = 0;
    while (job) {
        struct gr_io_job *next = job->next; /* done() may free the job */
        job->done(job);
        n++;
        job = next;
    }
    if (n) {
        pthread_mutex_lock(&pool->mu);
        pool->pending -= n;
        pthread_mutex_unlock(&pool->mu);
    }
    return n;
}

int gr_iopool_pending(struct gr_iopool *pool)
{
    pthread_mutex_lock(&pool->mu);
    int n = pool->pending;
    pthread_mutex_unlock(&pool->mu);
    return n;
}

void gr_iopool_drain(struct gr_iopool *pool)
{
    for (;;) {
        gr_iopool_complete(pool);
        pthread_mutex_lock(&pool->mu);
        if (pool->pending == 0) {
            pthread_mutex_unlock(&pool->mu);
            return;
        }
        if (!pool->fin_head) pthread_cond_wait(&pool->idle_cv, &pool->mu);
        pthread_mutex_unlock(&pool->mu);
    }
}

void gr_iopool_destroy(struct gr_iopool *pool)
{
    if (!pool) return;
    if (pool->thread_count) gr_iopool_drain(pool);
    pthread_mutex_lock(&pool->mu);
    pool->stop = true;
    pthread_cond_broadcast(&pool->work_cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->thread_count; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->work_cv);
    pthread_cond_destroy(&pool->idle_cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool);
}
