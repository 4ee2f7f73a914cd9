/*
 * log.c: stderr logging with a level filter, structured lines (logfmt or JSON), and per-site rate limiting
 * of repeated lines; see log.h. A line is rendered into one stack buffer (escaping per format, cut to
 * GR_LOG_LINE_MAX keeping it well-formed) and written with one fwrite on the unbuffered stderr, so lines of
 * different threads do not interleave. Rate limiting: each site counts the lines of its current window under
 * one mutex (the lines themselves are written outside it); a site with drops joins a list so that
 * gr_log_ratelimit_flush can report its count after the flood even if the site never fires again.
 * Read next: common/limits.h.
 */
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/time.h>
#include <sys/types.h>

#include "common/limits.h"
#include "common/time.h"

static enum gr_log_level min_level = GR_LOG_INFO;
static enum gr_log_format line_format = GR_LOG_LOGFMT;
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

void gr_log_set_format(enum gr_log_format format)
{
    line_format = format;
}

int gr_log_format_parse(const char *name, enum gr_log_format *out)
{
    if (!name) return -1;
    if (!strcasecmp(name, "logfmt")) {
        *out = GR_LOG_LOGFMT;
        return 0;
    }
    if (!strcasecmp(name, "json")) {
        *out = GR_LOG_JSON;
        return 0;
    }
    return -1;
}

void gr_log_set_clock(int64_t (*mono_ms)(void))
{
    rl_clock = mono_ms ? mono_ms : gr_time_mono_ms;
}

const char *gr_log_component(const char *file)
{
    static const char *const names[] = {"common",  "protocol", "storage", "partition", "coordinator",
                                        "cluster", "server",   "bench",   "tools"};
    if (!file) return "gregor";
    /* the directories of `file` from the innermost out: server/handlers/x.c is "server" */
    const char *end = strrchr(file, '/');
    while (end) {
        const char *start = end;
        while (start > file && start[-1] != '/')
            start--;
        size_t len = (size_t)(end - start);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i]) == len && !memcmp(names[i], start, len)) return names[i];
        if (start == file) break;
        end = start - 1;
    }
    return "gregor";
}

/* ---- rendering ---- */

/* The line being built: `cap` bytes of which the last few are kept for the closing characters. */
struct out {
    char *buf;
    size_t len, cap;
    bool full; /* something did not fit: later pieces are dropped */
};

#define OUT_RESERVE 4 /* the closing '"', '}', '\n' and the NUL always fit */

static bool fits(const struct out *o, size_t n)
{
    return !o->full && o->len + n + OUT_RESERVE <= o->cap;
}

static void put(struct out *o, const char *s, size_t n)
{
    if (!fits(o, n)) {
        o->full = true;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at p (2..4 bytes; overlong forms, surrogates and code points above
 * U+10FFFF are not valid), 0 if the bytes there are not one. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
    unsigned c = p[0];
    size_t n;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    if (left < n) return 0;
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

/* Whether logfmt must quote `s`: empty, or a space, '"', '=', '\\', a control character or a byte that is
 * not valid UTF-8 in it. */
static bool logfmt_needs_quotes(const char *s)
{
    if (!*s) return true;
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (*p) {
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f) return true;
        if (*p >= 0x80) {
            size_t n = utf8_seq(p, left);
            if (!n) return true;
            p += n, left -= n;
        } else {
            p++, left--;
        }
    }
    return false;
}

/* Appends s escaped for the inside of a quoted value, the same escapes for a JSON string and a quoted logfmt
 * value: '"' '\\' and control characters escaped, valid UTF-8 copied, other bytes as \ufffd. Each character
 * goes in whole or the output is full. */
static void put_escaped(struct out *o, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = strlen(s);
    while (*p && !o->full) {
        char esc[8];
        const char *piece = esc;
        size_t n = 1, plen = 2;
        switch (*p) {
        case '"':
            piece = "\\\"";
            break;
        case '\\':
            piece = "\\\\";
            break;
        case '\n':
            piece = "\\n";
            break;
        case '\r':
            piece = "\\r";
            break;
        case '\t':
            piece = "\\t";
            break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                plen = 6;
            } else if (*p < 0x80) {
                piece = (const char *)p;
                plen = 1;
            } else if ((n = utf8_seq(p, left))) {
                piece = (const char *)p;
                plen = n;
            } else {
                n = 1;
                piece = "\\ufffd";
                plen = 6;
            }
        }
        put(o, piece, plen);
        p += n;
        left -= n;
    }
}

/* A strict JSON number (RFC 8259 section 6): -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and an integer
 * within int64 (parsers such as jansson refuse larger ones: those stay strings). */
static bool is_json_number(const char *s)
{
    if (!strpbrk(s, ".eE")) {
        errno = 0;
        char *end;
        (void)strtoll(s, &end, 10);
        if (errno == ERANGE) return false;
    }
    const char *p = s;
    if (*p == '-') p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == 0;
}

/* The key as written: [A-Za-z0-9_.-] kept, other bytes '_', the four fixed keys prefixed with '_'. */
static void clean_key(char *dst, size_t cap, const char *key)
{
    size_t i = 0;
    if (!key || !*key) key = "_";
    if (!strcmp(key, "ts") || !strcmp(key, "level") || !strcmp(key, "component") || !strcmp(key, "msg"))
        dst[i++] = '_';
    for (const char *p = key; *p && i + 1 < cap; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        dst[i++] = ok ? c : '_';
    }
    dst[i] = 0;
}

/* Appends one "key=value" (logfmt, with its leading space) or ",\"key\":value" (JSON) whole, or nothing. */
static void put_pair(struct out *o, enum gr_log_format format, const char *key, const char *value,
                     bool number, bool quote_always)
{
    if (o->full) return;
    size_t mark = o->len;
    char k[64];
    clean_key(k, sizeof k, key);
    if (!value) value = "";
    if (format == GR_LOG_JSON) {
        puts_(o, ",\"");
        puts_(o, k);
        puts_(o, "\":");
        if (number && is_json_number(value)) {
            puts_(o, value);
        } else {
            puts_(o, "\"");
            put_escaped(o, value);
            puts_(o, "\"");
        }
    } else {
        puts_(o, " ");
        puts_(o, k);
        puts_(o, "=");
        if (quote_always || logfmt_needs_quotes(value)) {
            puts_(o, "\"");
            put_escaped(o, value);
            puts_(o, "\"");
        } else {
            puts_(o, value);
        }
    }
    if (o->full) { /* left out whole: the line stays well-formed; a shorter key after it may still fit */
        o->len = mark;
        o->full = false;
    }
}

size_t gr_log_render(char *buf, size_t cap, enum gr_log_format format, const char *ts,
                     enum gr_log_level level, const char *component, const char *msg,
                     const struct gr_log_pair *kv, size_t n)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    if (cap == 0) return 0;
    if (cap < OUT_RESERVE + 1) {
        buf[0] = 0;
        return 0;
    }
    struct out o = {buf, 0, cap, false};
    const char *lvl = (unsigned)level < 4 ? names[level] : "error";
    if (!msg) msg = "";
    if (format == GR_LOG_JSON) {
        puts_(&o, "{\"ts\":\"");
        puts_(&o, ts);
        puts_(&o, "\",\"level\":\"");
        puts_(&o, lvl);
        puts_(&o, "\",\"component\":\"");
        puts_(&o, component);
        puts_(&o, "\",\"msg\":\"");
    } else {
        puts_(&o, "ts=");
        puts_(&o, ts);
        puts_(&o, " level=");
        puts_(&o, lvl);
        puts_(&o, " component=");
        puts_(&o, component);
        puts_(&o, " msg=\"");
    }
    if (o.full) { /* not even the fixed keys fit: an empty line */
        buf[0] = '\n';
        buf[1] = 0;
        return 1;
    }
    put_escaped(&o, msg); /* cut here if it is too long */
    o.full = false;
    o.buf[o.len++] = '"'; /* from the reserve */
    for (size_t i = 0; i < n; i++)
        put_pair(&o, format, kv[i].key, kv[i].value, kv[i].number, false);
    if (format == GR_LOG_JSON) o.buf[o.len++] = '}';
    o.buf[o.len++] = '\n';
    o.buf[o.len] = 0;
    return o.len;
}

/* Writes one line at `level` (already filtered) with the current format and time. */
static void emit(const char *file, enum gr_log_level level, const char *msg, const struct gr_log_pair *kv,
                 size_t n)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40], stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts, sizeof ts, "%s.%03dZ", stamp, (int)(tv.tv_usec / 1000));
    char line[GR_LOG_LINE_MAX];
    size_t len = gr_log_render(line, sizeof line, line_format, ts, level, gr_log_component(file), msg, kv, n);
    fwrite(line, 1, len, stderr);
}

static void write_msg(const char *file, enum gr_log_level level, const char *fmt, va_list ap)
{
    char msg[GR_LOG_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    emit(file, level, msg, NULL, 0);
}

void gr_log_write_at(const char *file, enum gr_log_level level, const char *fmt, ...)
{
    if (level < min_level) return;
    va_list ap;
    va_start(ap, fmt);
    write_msg(file, level, fmt, ap);
    va_end(ap);
}

void gr_log_kv_at(const char *file, enum gr_log_level level, const char *msg, ...)
{
    if (level < min_level) return;
    struct gr_log_pair kv[GR_LOG_KV_MAX];
    size_t n = 0;
    va_list ap;
    va_start(ap, msg);
    for (const char *key; (key = va_arg(ap, const char *));) {
        const char *value = va_arg(ap, const char *);
        if (n < GR_LOG_KV_MAX) kv[n++] = (struct gr_log_pair){key, value, false};
    }
    va_end(ap);
    emit(file, level, msg, kv, n);
}

/* ---- the printf-style key list ---- */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* Formats one conversion spec (`spec`, NUL-terminated, '*' already replaced) taking its argument from *ap
 * by the type its length modifier and conversion name. Returns the characters written to dst (cut at cap),
 * or -1 for a conversion this does not take (%n, wide strings): nothing is consumed then. */
static int format_one(char *dst, size_t cap, const char *spec, char conv, const char *len, va_list *ap)
{
    bool hh = !strcmp(len, "hh"), h = !strcmp(len, "h"), l = !strcmp(len, "l"), ll = !strcmp(len, "ll");
    bool j = !strcmp(len, "j"), z = !strcmp(len, "z"), t = !strcmp(len, "t"), L = !strcmp(len, "L");
    switch (conv) {
    case 'd':
    case 'i':
        if (l) return snprintf(dst, cap, spec, va_arg(*ap, long));
        if (ll) return snprintf(dst, cap, spec, va_arg(*ap, long long));
        if (j) return snprintf(dst, cap, spec, va_arg(*ap, intmax_t));
        if (z) return snprintf(dst, cap, spec, va_arg(*ap, ssize_t));
        if (t) return snprintf(dst, cap, spec, va_arg(*ap, ptrdiff_t));
        (void)hh, (void)h;
        return snprintf(dst, cap, spec, va_arg(*ap, int));
    case 'u':
    case 'o':
    case 'x':
    case 'X':
        if (l) return snprintf(dst, cap, spec, va_arg(*ap, unsigned long));
        if (ll) return snprintf(dst, cap, spec, va_arg(*ap, unsigned long long));
        if (j) return snprintf(dst, cap, spec, va_arg(*ap, uintmax_t));
        if (z) return snprintf(dst, cap, spec, va_arg(*ap, size_t));
        if (t) return snprintf(dst, cap, spec, va_arg(*ap, ptrdiff_t));
        return snprintf(dst, cap, spec, va_arg(*ap, unsigned));
    case 'c':
        if (l) return -1;
        return snprintf(dst, cap, spec, va_arg(*ap, int));
    case 's':
        if (l) return -1;
        {
            const char *s = va_arg(*ap, const char *);
            return snprintf(dst, cap, spec, s ? s : "(null)");
        }
    case 'p':
        return snprintf(dst, cap, spec, va_arg(*ap, void *));
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
    case 'a':
    case 'A':
        if (L) return snprintf(dst, cap, spec, va_arg(*ap, long double));
        return snprintf(dst, cap, spec, va_arg(*ap, double));
    default:
        return -1;
    }
}

#pragma GCC diagnostic pop

/* Formats the value sub-format [f, end) into dst (cap bytes) from *ap. Sets *number when the sub-format is
 * one %d %i %u %f %e %g conversion and nothing else. Returns false at a conversion it cannot take (the rest
 * of the arguments are then not consumed: the caller stops). */
static bool format_value(char *dst, size_t cap, const char *f, const char *end, va_list *ap, bool *number)
{
    size_t len = 0;
    int convs = 0;
    bool literal = false, numeric = false;
    dst[0] = 0;
    while (f < end) {
        if (*f != '%' || (f + 1 < end && f[1] == '%')) {
            if (len + 1 < cap) dst[len++] = *f;
            f += *f == '%' ? 2 : 1;
            literal = true;
            continue;
        }
        char spec[48];
        size_t s = 0;
        spec[s++] = *f++;
        while (f < end && strchr("-+#0'", *f) && s < 20)
            spec[s++] = *f++;
        if (f < end && *f == '*') {
            s += (size_t)snprintf(spec + s, sizeof spec - s, "%d", va_arg(*ap, int));
            f++;
        } else {
            while (f < end && *f >= '0' && *f <= '9' && s < 30)
                spec[s++] = *f++;
        }
        if (f < end && *f == '.') {
            spec[s++] = *f++;
            if (f < end && *f == '*') {
                s += (size_t)snprintf(spec + s, sizeof spec - s, "%d", va_arg(*ap, int));
                f++;
            } else {
                while (f < end && *f >= '0' && *f <= '9' && s < 40)
                    spec[s++] = *f++;
            }
        }
        char lenmod[3] = {0};
        size_t m = 0;
        while (f < end && strchr("hljztL", *f) && m < 2) {
            lenmod[m++] = *f;
            spec[s++] = *f++;
        }
        if (f >= end) return false;
        char conv = *f++;
        spec[s++] = conv;
        spec[s] = 0;
        int w = format_one(dst + len, cap - len, spec, conv, lenmod, ap);
        if (w < 0) return false;
        len += (size_t)w < cap - len ? (size_t)w : cap - len - 1;
        convs++;
        numeric = strchr("diufeEgG", conv) != NULL;
    }
    dst[len] = 0;
    *number = convs == 1 && !literal && numeric;
    return true;
}

#define KV_VALUES_MAX 4096 /* bytes of all formatted values of one line */

/* gr_log_kvf_at's body over a va_list (the plain and the rate-limited forms share it). */
static void kvf_v(const char *file, enum gr_log_level level, const char *msg, const char *kvfmt, va_list args)
{
    va_list ap; /* a copy: format_value takes a va_list's address, which a parameter's array type is not */
    va_copy(ap, args);
    struct gr_log_pair kv[GR_LOG_KV_MAX];
    char keys[GR_LOG_KV_MAX][64];
    char values[KV_VALUES_MAX];
    size_t n = 0, used = 0;
    const char *p = kvfmt ? kvfmt : "";
    while (*p && n < GR_LOG_KV_MAX) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        const char *tok_end = strchr(p, ' ');
        if (!tok_end) tok_end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(tok_end - p));
        const char *vstart = eq ? eq + 1 : p;
        size_t klen = eq ? (size_t)(eq - p) : 0;
        if (klen >= sizeof keys[n]) klen = sizeof keys[n] - 1;
        memcpy(keys[n], p, klen);
        keys[n][klen] = 0;
        if (!klen) snprintf(keys[n], sizeof keys[n], "arg%zu", n);
        bool number = false;
        size_t room = sizeof values - used;
        if (room < 2) break;
        if (!format_value(values + used, room, vstart, tok_end, &ap, &number)) break;
        kv[n] = (struct gr_log_pair){keys[n], values + used, number};
        used += strlen(values + used) + 1;
        n++;
        p = tok_end;
    }
    va_end(ap);
    emit(file, level, msg, kv, n);
}

void gr_log_kvf_at(const char *file, enum gr_log_level level, const char *msg, const char *kvfmt, ...)
{
    if (level < min_level) return;
    va_list ap;
    va_start(ap, kvfmt);
    kvf_v(file, level, msg, kvfmt, ap);
    va_end(ap);
}

/* ---- rate limiting ---- */

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
    char count[24], lines[16], window[16];
    snprintf(count, sizeof count, "%" PRIu64, dropped);
    snprintf(lines, sizeof lines, "%d", GR_LOG_RATELIMIT_LINES);
    snprintf(window, sizeof window, "%d", GR_LOG_RATELIMIT_WINDOW_MS / 1000);
    struct gr_log_pair kv[] = {{"site", short_where(site->where), false},
                               {"suppressed", count, true},
                               {"max_lines", lines, true},
                               {"window_s", window, true}};
    emit(site->where, (enum gr_log_level)level, "similar messages suppressed", kv, sizeof kv / sizeof kv[0]);
}

/* Counts one line of `site` in its window: true when it may be printed (the pending count of a window that
   ended is printed first). */
static bool limit_admit(struct gr_log_site *site, enum gr_log_level level)
{
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
    return print;
}

void gr_log_write_limited(struct gr_log_site *site, enum gr_log_level level, const char *fmt, ...)
{
    if (level < min_level || !limit_admit(site, level)) return;
    va_list ap;
    va_start(ap, fmt);
    write_msg(site->where, level, fmt, ap);
    va_end(ap);
}

void gr_log_kvf_limited(struct gr_log_site *site, enum gr_log_level level, const char *msg, const char *kvfmt,
                        ...)
{
    if (level < min_level || !limit_admit(site, level)) return;
    va_list ap;
    va_start(ap, kvfmt);
    kvf_v(site->where, level, msg, kvfmt, ap);
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
