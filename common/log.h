/*
 * log.h: the broker's diagnostic log (stderr), one line per event, never per request at the default level.
 * Not to be confused with storage/ partition logs. Structured lines (issue #22), logfmt by default:
 *     ts=2026-12-03T16:00:00.123Z level=info component=server msg="gregor 0.1 started in 12 ms" key=value
 * or JSON lines with gregor.log.format=json, the same keys in the same order:
 *     {"ts":"2026-12-03T16:00:00.123Z","level":"info","component":"server","msg":"...","key":"value"}
 * ts: UTC, milliseconds; level: debug, info, warn or error; component: the top directory of the calling
 * source file (common, protocol, storage, partition, coordinator, cluster, server; from __FILE__); msg: the
 * message text; then the call's extra keys (gr_log_kv, GR_*_KV). logfmt quotes a value (msg always) that is
 * empty or holds a space, '"', '=', '\\' or a control character, and escapes '"' and '\\' and control
 * characters inside the quotes (\n \r \t, others \u00XX); JSON escapes per RFC 8259. Bytes that are not
 * valid UTF-8 become U+FFFD (\ufffd) in both. A line longer than GR_LOG_LINE_MAX is cut: the msg text first
 * loses its end, extra keys that no longer fit are left out whole, and the line stays well-formed.
 */
#ifndef GR_LOG_H
#define GR_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gr_log_level { GR_LOG_DEBUG = 0, GR_LOG_INFO = 1, GR_LOG_WARN = 2, GR_LOG_ERROR = 3 };

/* The line layout (gregor.log.format). */
enum gr_log_format { GR_LOG_LOGFMT = 0, GR_LOG_JSON = 1 };

#define GR_LOG_LINE_MAX 8192 /* bytes of one rendered line, newline included */
#define GR_LOG_MSG_MAX 2048  /* bytes of a printf-formatted msg before escaping */
#define GR_LOG_KV_MAX 16     /* extra keys on one line; more are left out */

/* Sets the lowest level printed (default GR_LOG_INFO). */
void gr_log_set_level(enum gr_log_level level);
/* The lowest level printed now. */
enum gr_log_level gr_log_get_level(void);
/* Sets the line layout (default GR_LOG_LOGFMT); main.c sets it from gregor.log.format at start. */
void gr_log_set_format(enum gr_log_format format);
/* Parses a gregor.log.format value: "logfmt" or "json" (any case). Returns 0 and sets *out, or -1 (server/
 * config.c refuses the value with a message naming the key). */
int gr_log_format_parse(const char *name, enum gr_log_format *out);
/* The component of a source file: the nearest enclosing directory of `file` (a __FILE__, relative or
 * absolute) named after a layer (common ... server), or "bench"/"tools", else "gregor". Static string. */
const char *gr_log_component(const char *file);

/* One extra key of a line: `key` ([A-Za-z0-9_.-]; other characters become '_'; ts, level, component and msg
 * get a leading '_' so keys stay unique), `value` (text, escaped as above), `number`: the value is written
 * as a JSON number when it is one (the GR_*_KV forms set it for %d %i %u %f %e %g values). */
struct gr_log_pair {
    const char *key;
    const char *value;
    bool number;
};

/* Renders one line (with its '\n') into buf (cap bytes, NUL-terminated): ts as given, the level's lower-case
 * name, component, msg, then the n extra keys. Returns the length without the NUL. Never fails: too long a
 * line is cut as the file comment says (cap below 64 may drop the msg). Used by the writers and unit tests.
 */
size_t gr_log_render(char *buf, size_t cap, enum gr_log_format format, const char *ts,
                     enum gr_log_level level, const char *component, const char *msg,
                     const struct gr_log_pair *kv, size_t n);

/* Prints one line at `level` if it is at or above the configured level: msg = the printf-formatted text
 * (cut at GR_LOG_MSG_MAX), component from `file`. Use the GR_INFO... macros (they pass __FILE__). */
void gr_log_write_at(const char *file, enum gr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define gr_log_write(level, ...) gr_log_write_at(__FILE__, level, __VA_ARGS__)

/* Extra keys as strings: gr_log_kv(GR_LOG_WARN, "slow request", "api", "Produce", "duration_ms", "12.5",
 * NULL): `msg` is the text as is (not a format), then key, value pairs ended by NULL (a NULL value is
 * written as an empty string); at most GR_LOG_KV_MAX pairs. Values are JSON strings. */
void gr_log_kv_at(const char *file, enum gr_log_level level, const char *msg, ...) __attribute__((sentinel));
#define gr_log_kv(level, msg, ...) gr_log_kv_at(__FILE__, level, msg, __VA_ARGS__)

/* Extra keys printf-style: `kvfmt` is "key=<format> key=<format> ...", tokens separated by single spaces,
 * each key's value formatted from its own conversions (so a %s value may hold spaces and quotes: it is
 * escaped as one value); a value that is one %d %i %u %f %e %g conversion alone is a JSON number. `msg` is
 * the text as is. Checked by the compiler like printf; '*' widths and precisions work (%.*s for a string
 * with a length); no %n, no %ls, no ' ' flag, no positional (%1$) arguments (a value stops the keys there).
 * The slow-request line (issue #22) is one call:
 *     GR_WARN_KV("slow request", "api=%s version=%d client_id=%s correlation_id=%d peer=%s duration_ms=%.1f",
 *                api_name, version, client_id, correlation_id, peer, ms);
 * giving msg="slow request" api=Produce version=9 client_id="my app" correlation_id=7 peer=... */
void gr_log_kvf_at(const char *file, enum gr_log_level level, const char *msg, const char *kvfmt, ...)
    __attribute__((format(printf, 4, 5)));
#define GR_DEBUG_KV(...) gr_log_kvf_at(__FILE__, GR_LOG_DEBUG, __VA_ARGS__)
#define GR_INFO_KV(...) gr_log_kvf_at(__FILE__, GR_LOG_INFO, __VA_ARGS__)
#define GR_WARN_KV(...) gr_log_kvf_at(__FILE__, GR_LOG_WARN, __VA_ARGS__)
#define GR_ERROR_KV(...) gr_log_kvf_at(__FILE__, GR_LOG_ERROR, __VA_ARGS__)

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
 * call (or gr_log_ratelimit_flush) first prints one line at the same level, component of the site:
 * msg="similar messages suppressed" site=<dir/file.c:line> suppressed=M max_lines=N window_s=S.
 * Thread-safe. Levels below the configured one neither print nor count. */
void gr_log_write_limited(struct gr_log_site *site, enum gr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* gr_log_kvf_at's form (msg as is, keys printf-style) under `site`'s limit, as gr_log_write_limited: for
 * key=value lines a peer can repeat at will (the slow-request line, records lost to retention). */
void gr_log_kvf_limited(struct gr_log_site *site, enum gr_log_level level, const char *msg, const char *kvfmt,
                        ...) __attribute__((format(printf, 4, 5)));
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
#define GR_WARN_KV_RATELIMITED(...)                                                                          \
    do {                                                                                                     \
        static struct gr_log_site gr_log_site_ = {.where = __FILE__ ":" GR_LOG_STR(__LINE__)};               \
        gr_log_kvf_limited(&gr_log_site_, GR_LOG_WARN, __VA_ARGS__);                                         \
    } while (0)
#define GR_ERROR_RATELIMITED(...) GR_LOG_RATELIMITED(GR_LOG_ERROR, __VA_ARGS__)

#define GR_DEBUG(...) gr_log_write_at(__FILE__, GR_LOG_DEBUG, __VA_ARGS__)
#define GR_INFO(...) gr_log_write_at(__FILE__, GR_LOG_INFO, __VA_ARGS__)
#define GR_WARN(...) gr_log_write_at(__FILE__, GR_LOG_WARN, __VA_ARGS__)
#define GR_ERROR(...) gr_log_write_at(__FILE__, GR_LOG_ERROR, __VA_ARGS__)

#endif
