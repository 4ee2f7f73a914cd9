/*
 * prom_text.c: the Prometheus text format writer (common/prom_text.h).
 */
#include "common/prom_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gr_prom_buf_init(struct gr_prom_buf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

void gr_prom_buf_free(struct gr_prom_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

bool gr_prom_put(struct gr_prom_buf *b, const char *s, size_t len)
{
    if (b->failed) return false;
    if (b->max && b->len + len > b->max) {
        b->failed = true;
        return false;
    }
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return false;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = 0;
    return true;
}

int gr_prom_utf8_len(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    if (s[0] < 0x80) return 1;
    int n = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
            : s[0] >= 0xe0 && s[0] <= 0xef ? 3
            : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                           : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || (s[0] == 0xf0 && s[1] < 0x90) ||
        (s[0] == 0xf4 && s[1] > 0x8f))
        return 0; /* overlong, surrogate, above U+10FFFF */
    return n;
}

bool gr_prom_put_escaped(struct gr_prom_buf *b, const char *s)
{
    const char *run = s;
    while (*s) {
        int n = gr_prom_utf8_len(s);
        const char *esc = *s == '\\'   ? "\\\\"
                          : *s == '"'  ? "\\\""
                          : *s == '\n' ? "\\n"
                          : !n         ? "\xef\xbf\xbd"
                                       : NULL;
        if (!esc) {
            s += n;
            continue;
        }
        gr_prom_put(b, run, (size_t)(s - run));
        gr_prom_put(b, esc, strlen(esc));
        run = ++s;
    }
    return gr_prom_put(b, run, (size_t)(s - run));
}

bool gr_prom_add_help(struct gr_prom_buf *b, const char *(*help)(const char *name))
{
    if (b->failed || !b->len) return !b->failed;
    struct gr_prom_buf o;
    gr_prom_buf_init(&o, b->max);
    char name[256], helped[256] = "";
    const char *p = b->data, *end = b->data + b->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl + 1 : end;
        if (eol - p > 7 && !memcmp(p, "# HELP ", 7)) { /* a renderer's own HELP line: keep, note its name */
            size_t n = strcspn(p + 7, " \n");
            if (n < sizeof helped) {
                memcpy(helped, p + 7, n);
                helped[n] = 0;
            }
        } else if (eol - p > 7 && !memcmp(p, "# TYPE ", 7)) {
            size_t n = strcspn(p + 7, " \n");
            const char *text = NULL;
            if (n < sizeof name) {
                memcpy(name, p + 7, n);
                name[n] = 0;
                text = strcmp(name, helped) ? help(name) : NULL;
            }
            if (text) {
                gr_prom_put(&o, "# HELP ", 7);
                gr_prom_put(&o, name, n);
                gr_prom_put(&o, " ", 1);
                for (const char *t = text; *t; t++)
                    gr_prom_put(&o,
                                *t == '\\'   ? "\\\\"
                                : *t == '\n' ? "\\n"
                                             : t,
                                *t == '\\' || *t == '\n' ? 2 : 1);
                gr_prom_put(&o, "\n", 1);
            }
            helped[0] = 0;
        }
        gr_prom_put(&o, p, (size_t)(eol - p));
        p = eol;
    }
    if (o.failed) {
        gr_prom_buf_free(&o);
        b->failed = true;
        return false;
    }
    gr_prom_buf_free(b);
    *b = o;
    return true;
}

bool gr_prom_type(struct gr_prom_buf *b, const char *name, const char *type)
{
    gr_prom_put(b, "# TYPE ", 7);
    gr_prom_put(b, name, strlen(name));
    gr_prom_put(b, " ", 1);
    gr_prom_put(b, type, strlen(type));
    return gr_prom_put(b, "\n", 1);
}

static void put_head(struct gr_prom_buf *b, const char *name, const struct gr_prom_label *labels, int n)
{
    gr_prom_put(b, name, strlen(name));
    if (n <= 0) return;
    gr_prom_put(b, "{", 1);
    for (int i = 0; i < n; i++) {
        if (i) gr_prom_put(b, ",", 1);
        gr_prom_put(b, labels[i].name, strlen(labels[i].name));
        gr_prom_put(b, "=\"", 2);
        gr_prom_put_escaped(b, labels[i].value ? labels[i].value : "");
        gr_prom_put(b, "\"", 1);
    }
    gr_prom_put(b, "}", 1);
}

bool gr_prom_sample(struct gr_prom_buf *b, const char *name, const struct gr_prom_label *labels, int n,
                    double value)
{
    put_head(b, name, labels, n);
    char v[40];
    if (isnan(value))
        snprintf(v, sizeof v, " NaN\n");
    else if (isinf(value))
        snprintf(v, sizeof v, value > 0 ? " +Inf\n" : " -Inf\n");
    else if (snprintf(v, sizeof v, " %.15g\n", value) > 0 && strtod(v, NULL) != value)
        snprintf(v, sizeof v, " %.17g\n", value); /* the shortest of the two that reads back exactly */
    return gr_prom_put(b, v, strlen(v));
}

bool gr_prom_sample_u64(struct gr_prom_buf *b, const char *name, const struct gr_prom_label *labels, int n,
                        uint64_t value)
{
    put_head(b, name, labels, n);
    char v[32];
    int len = snprintf(v, sizeof v, " %" PRIu64 "\n", value);
    return gr_prom_put(b, v, (size_t)len);
}
