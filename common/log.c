/*
 * log.c: stderr logging with a level filter, and per-site rate limiting of repeated lines; see log.h.
 * Rate limiting: each site counts the lines of its current window under one mutex (the lines themselves
 * are written outside it); a site with drops joins a list so that gr_log_ratelimit_flush can report its
 * count after the flood even if the site never fires again. Read next: common/limits.h.
 */
#include "common/log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <sys/time.h>

#include "common/limits.h"
#include "common/time.h"

static enum gr_log_level min_level = GR_LOG_INFO;
static pthread_mutex_t rl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gr_log_site *rl_sites; /* sites with drops (under rl_mu) */
static int64_t (*rl_clock)(void) = gr_time_mono_ms;

void gr_log_set_level(enum gr_log_level level)
{
    min_level = level;
}

enum gr_log_level gr_log_get_level(void)
{
    return min_level;
}

void gr_log_set_clock(int64_t (*mono_ms)(void))
{
    rl_clock = mono_ms ? mono_ms : gr_time_mono_ms;
}

static void write_line(enum gr_log_level level, const char *fmt, va_list ap)
{
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "%s.%03dZ %s %s\n", stamp, (int)(tv.tv_usec / 1000), names[level], line);
}

void gr_log_write(enum gr_log_level level, const char *fmt, ...)
{
    if (level < min_level) return;
    va_list ap;
    va_start(ap, fmt);
    write_line(level, fmt, ap);
    va_end(ap);
}

static void write_fmt(enum gr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void write_fmt(enum gr_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_line(level, fmt, ap);
    va_end(ap);
}

/* Ends the site's window if it is over (under rl_mu); returns the drops to report, 0 if none. */
static uint64_t window_roll_locked(struct gr_log_site *site, int64_t now)
{
    if (site->window_start_ms && gr_ms_sub_sat(now, site->window_start_ms) < GR_LOG_RATELIMIT_WINDOW_MS)
        return 0;
    uint64_t dropped = site->suppressed;
    site->window_start_ms = now ? now : 1; /* 0 means "no window yet" */
    site->printed = 0;
    site->suppressed = 0;
    return dropped;
}

/* The last two components of the site's "path/file.c:line" (__FILE__ may be absolute). */
static const char *short_where(const char *where)
{
    const char *last = NULL, *prev = NULL;
    for (const char *p = where; *p; p++)
        if (*p == '/') {
            prev = last;
            last = p;
        }
    return prev ? prev + 1 : where;
}

static void report(const struct gr_log_site *site, int level, uint64_t dropped)
{
    write_fmt((enum gr_log_level)level,
              "%s: %" PRIu64 " similar messages suppressed (at most %d lines per %d s from one place)",
              short_where(site->where), dropped, GR_LOG_RATELIMIT_LINES, GR_LOG_RATELIMIT_WINDOW_MS / 1000);
}

void gr_log_write_limited(struct gr_log_site *site, enum gr_log_level level, const char *fmt, ...)
{
    if (level < min_level) return;
    int64_t now = rl_clock();
    pthread_mutex_lock(&rl_mu);
    uint64_t dropped = window_roll_locked(site, now);
    int prev_level = site->level;
    site->level = level;
    bool print = site->printed < GR_LOG_RATELIMIT_LINES;
    if (print) {
        site->printed++;
    } else {
        site->suppressed++;
        if (!site->listed) {
            site->listed = true;
            site->next = rl_sites;
            rl_sites = site;
        }
    }
    pthread_mutex_unlock(&rl_mu);
    if (dropped) report(site, prev_level, dropped);
    if (!print) return;
    va_list ap;
    va_start(ap, fmt);
    write_line(level, fmt, ap);
    va_end(ap);
}

void gr_log_ratelimit_flush(int64_t now_ms)
{
    for (;;) {
        struct gr_log_site *due = NULL;
        uint64_t dropped = 0;
        int level = GR_LOG_WARN;
        pthread_mutex_lock(&rl_mu);
        for (struct gr_log_site *s = rl_sites; s && !due; s = s->next)
            if (s->suppressed && gr_ms_sub_sat(now_ms, s->window_start_ms) >= GR_LOG_RATELIMIT_WINDOW_MS) {
                due = s;
                level = s->level;
                dropped = window_roll_locked(s, now_ms);
            }
        pthread_mutex_unlock(&rl_mu);
        if (!due) return;
        report(due, level, dropped);
    }
}
