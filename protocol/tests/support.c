/* support.c: string builder, JSON writers and random generator for the codec tests; see support.h. */
#include "protocol/tests/support.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gr_sb_init(struct gr_sb *sb)
{
    sb->buf = NULL;
    sb->len = sb->cap = 0;
}

void gr_sb_free(struct gr_sb *sb)
{
    free(sb->buf);
    gr_sb_init(sb);
}

static void sb_reserve(struct gr_sb *sb, size_t extra)
{
    if (sb->len + extra + 1 <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    sb->buf = realloc(sb->buf, cap);
    if (!sb->buf) abort();
    sb->cap = cap;
}

void gr_sb_putc(struct gr_sb *sb, char c)
{
    sb_reserve(sb, 1);
    sb->buf[sb->len++] = c;
    sb->buf[sb->len] = 0;
}

void gr_sb_puts(struct gr_sb *sb, const char *s)
{
    size_t n = strlen(s);
    sb_reserve(sb, n);
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = 0;
}

void gr_sb_printf(struct gr_sb *sb, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        gr_sb_puts(sb, tmp);
        return;
    }
    sb_reserve(sb, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void gr_sb_json_key(struct gr_sb *sb, const char *key, bool *first)
{
    if (!*first) gr_sb_putc(sb, ',');
    *first = false;
    gr_sb_putc(sb, '"');
    gr_sb_puts(sb, key);
    gr_sb_puts(sb, "\":");
}

void gr_sb_json_bool(struct gr_sb *sb, bool v)
{
    gr_sb_puts(sb, v ? "true" : "false");
}
void gr_sb_json_int(struct gr_sb *sb, int64_t v)
{
    gr_sb_printf(sb, "%lld", (long long)v);
}

void gr_sb_json_double(struct gr_sb *sb, double v)
{
    if (isnan(v))
        gr_sb_puts(sb, "\"NaN\"");
    else if (isinf(v))
        gr_sb_puts(sb, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
        gr_sb_printf(sb, "%.17g", v);
}

void gr_sb_json_str(struct gr_sb *sb, struct gr_str s)
{
    if (s.len < 0) {
        gr_sb_puts(sb, "null");
        return;
    }
    gr_sb_putc(sb, '"');
    for (int32_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\') {
            gr_sb_putc(sb, '\\');
            gr_sb_putc(sb, (char)c);
        } else if (c < 0x20) {
            gr_sb_printf(sb, "\\u%04x", c);
        } else {
            gr_sb_putc(sb, (char)c);
        }
    }
    gr_sb_putc(sb, '"');
}

static void b64(struct gr_sb *sb, const uint8_t *p, size_t n, bool url)
{
    const char *tab = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                          : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        gr_sb_putc(sb, tab[v >> 18]);
        gr_sb_putc(sb, tab[(v >> 12) & 63]);
        gr_sb_putc(sb, tab[(v >> 6) & 63]);
        gr_sb_putc(sb, tab[v & 63]);
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        gr_sb_putc(sb, tab[v >> 18]);
        gr_sb_putc(sb, tab[(v >> 12) & 63]);
        if (!url) gr_sb_puts(sb, "==");
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        gr_sb_putc(sb, tab[v >> 18]);
        gr_sb_putc(sb, tab[(v >> 12) & 63]);
        gr_sb_putc(sb, tab[(v >> 6) & 63]);
        if (!url) gr_sb_putc(sb, '=');
    }
}

void gr_sb_json_bytes(struct gr_sb *sb, struct gr_bytes b)
{
    if (b.len < 0) {
        gr_sb_puts(sb, "null");
        return;
    }
    gr_sb_putc(sb, '"');
    b64(sb, b.ptr, (size_t)b.len, false);
    gr_sb_putc(sb, '"');
}

void gr_sb_json_records(struct gr_sb *sb, struct gr_records r)
{
    assert(r.kind == GR_RECORDS_MEM && "only memory records render as JSON");
    gr_sb_json_bytes(sb, r.mem);
}

void gr_sb_json_uuid(struct gr_sb *sb, struct gr_uuid u)
{
    gr_sb_putc(sb, '"');
    b64(sb, u.b, 16, true);
    gr_sb_putc(sb, '"');
}

void gr_rng_seed(struct gr_rng *rng, uint64_t seed)
{
    rng->s = seed ? seed : 0x9E3779B97F4A7C15ull;
}

uint64_t gr_rng_u64(struct gr_rng *rng)
{
    rng->s ^= rng->s >> 12;
    rng->s ^= rng->s << 25;
    rng->s ^= rng->s >> 27;
    return rng->s * 0x2545F4914F6CDD1Dull;
}

uint32_t gr_rng_below(struct gr_rng *rng, uint32_t n)
{
    return n ? (uint32_t)(gr_rng_u64(rng) % n) : 0;
}
bool gr_rng_bool(struct gr_rng *rng)
{
    return gr_rng_u64(rng) & 1;
}

int32_t gr_rng_int32(struct gr_rng *rng)
{
    static const int32_t edges[] = {0, -1, 1, INT32_MIN, INT32_MAX};
    if (gr_rng_below(rng, 5) == 0) return edges[gr_rng_below(rng, 5)];
    return (int32_t)gr_rng_u64(rng);
}

int64_t gr_rng_int64(struct gr_rng *rng)
{
    static const int64_t edges[] = {0, -1, 1, INT64_MIN, INT64_MAX};
    if (gr_rng_below(rng, 5) == 0) return edges[gr_rng_below(rng, 5)];
    return (int64_t)gr_rng_u64(rng);
}

double gr_rng_double(struct gr_rng *rng)
{
    return ((double)(int64_t)gr_rng_u64(rng)) / 1e6;
}

struct gr_uuid gr_rng_uuid(struct gr_rng *rng)
{
    struct gr_uuid u;
    uint64_t a = gr_rng_u64(rng), b = gr_rng_u64(rng);
    memcpy(u.b, &a, 8);
    memcpy(u.b + 8, &b, 8);
    return u;
}

struct gr_str gr_rng_str(struct gr_rng *rng, struct gr_arena *a, bool nullable)
{
    if (nullable && gr_rng_below(rng, 5) == 0) return GR_STR_NULL;
    uint32_t n = gr_rng_below(rng, 13);
    char *s = gr_arena_alloc(a, n * 2 + 1);
    uint32_t len = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (gr_rng_below(rng, 10) == 0) { /* U+00E9 */
            s[len++] = (char)0xC3;
            s[len++] = (char)0xA9;
        } else {
            s[len++] = (char)('a' + gr_rng_below(rng, 26));
        }
    }
    return (struct gr_str){s, (int32_t)len};
}

struct gr_bytes gr_rng_bytes(struct gr_rng *rng, struct gr_arena *a, bool nullable)
{
    if (nullable && gr_rng_below(rng, 5) == 0) return GR_BYTES_NULL;
    uint32_t n = gr_rng_below(rng, 41);
    uint8_t *p = gr_arena_alloc(a, n + 1);
    for (uint32_t i = 0; i < n; i++)
        p[i] = (uint8_t)gr_rng_u64(rng);
    return (struct gr_bytes){p, (int32_t)n};
}

void gr_rng_unknown_tags(struct gr_rng *rng, struct gr_arena *a, struct gr_tags *t)
{
    int32_t n = 1 + (int32_t)gr_rng_below(rng, 3);
    t->items = gr_arena_calloc(a, (size_t)n, sizeof *t->items);
    uint32_t tag = 10000;
    for (int32_t i = 0; i < n; i++) {
        tag += 1 + gr_rng_below(rng, 100);
        t->items[i].tag = tag;
        t->items[i].data = gr_rng_bytes(rng, a, false);
    }
    t->count = n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long gr_hex_decode(const char *hex, size_t hex_len, uint8_t *out)
{
    if (hex_len % 2) return -1;
    for (size_t i = 0; i < hex_len; i += 2) {
        int hi = hexval(hex[i]), lo = hexval(hex[i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return (long)(hex_len / 2);
}

void gr_sb_hex(struct gr_sb *sb, const uint8_t *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        gr_sb_putc(sb, digits[p[i] >> 4]);
        gr_sb_putc(sb, digits[p[i] & 15]);
    }
}
