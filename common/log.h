/*
 * log.h: the broker's diagnostic log (stderr), one line per event, never per request at the default level.
 * Not to be confused with storage/ partition logs. Lines: "<ISO time> <LEVEL> <message>".
 */
#ifndef GR_LOG_H
#define GR_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum gr_log_level { GR_LOG_DEBUG = 0, GR_LOG_INFO = 1, GR_LOG_WARN = 2, GR_LOG_ERROR = 3 };

/* Sets the lowest level printed (default GR_LOG_INFO). */
void gr_log_set_level(enum gr_log_level level);
/* The lowest level printed now. */
enum gr_log_level gr_log_get_level(void);
/* Prints one formatted line at `level` if it is at or above the configured level. */
void gr_log_write(enum gr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One rate-limited call site (a "kind" of repeated message): zero-initialised, static, one per site (the
 * GR_*_RATELIMITED macros make it). Fields are private to log.c. */
struct gr_log_site {
    const char *where;       /* "file:line" of the site */
    int64_t window_start_ms; /* monotonic start of the current window */
    uint32_t printed;        /* lines printed in the window */
    uint64_t suppressed;     /* lines dropped in the window, not yet reported */
    int level;               /* level of the last line, for the suppressed-count line */
    bool listed;             /* on the list that gr_log_ratelimit_flush walks */
    struct gr_log_site *next;
};

/* Like gr_log_write, at most GR_LOG_RATELIMIT_LINES lines per GR_LOG_RATELIMIT_WINDOW_MS for `site`
 * (borrowed, static); the lines beyond are dropped and counted. When a window with drops ends, the next
 * call (or gr_log_ratelimit_flush) first prints one "<where>: M similar messages suppressed (at most N
 * lines per S s from one place)" line at the same level. Thread-safe. Levels below the configured one neither
 * print nor count. */
void gr_log_write_limited(struct gr_log_site *site, enum gr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints the pending suppressed counts of every site whose window ended by `now_ms` (monotonic ms,
 * gr_time_mono_ms). Called from the broker's housekeeping pass (every second), so a count is reported
 * within a window of the flood ending even when the site stays quiet afterwards. */
void gr_log_ratelimit_flush(int64_t now_ms);
/* Test hook: the monotonic clock the limiter reads (NULL restores gr_time_mono_ms). */
void gr_log_set_clock(int64_t (*mono_ms)(void));

#define GR_LOG_STR2(x) #x
#define GR_LOG_STR(x) GR_LOG_STR2(x)
#define GR_LOG_RATELIMITED(level, ...)                                                                       \
    do {                                                                                                     \
        static struct gr_log_site gr_log_site_ = {.where = __FILE__ ":" GR_LOG_STR(__LINE__)};               \
        gr_log_write_limited(&gr_log_site_, level, __VA_ARGS__);                                             \
    } while (0)
/* Rate-limited forms for warnings a peer or a failing disk can repeat at will (per frame, per connection,
 * per append). Never for lines tests or operators count one by one (the network-thread audit). */
#define GR_WARN_RATELIMITED(...) GR_LOG_RATELIMITED(GR_LOG_WARN, __VA_ARGS__)
#define GR_ERROR_RATELIMITED(...) GR_LOG_RATELIMITED(GR_LOG_ERROR, __VA_ARGS__)

#define GR_DEBUG(...) gr_log_write(GR_LOG_DEBUG, __VA_ARGS__)
#define GR_INFO(...) gr_log_write(GR_LOG_INFO, __VA_ARGS__)
#define GR_WARN(...) gr_log_write(GR_LOG_WARN, __VA_ARGS__)
#define GR_ERROR(...) gr_log_write(GR_LOG_ERROR, __VA_ARGS__)

#endif
