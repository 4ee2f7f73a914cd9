/*
 * jaas.c: the JAAS configuration parser (see jaas.h): a small tokenizer (words, quoted strings, the
 * punctuation = and ;), then the grammar module flag (key = value)* ; with exactly one entry.
 */
#include "server/jaas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum tok { T_END, T_WORD, T_STRING, T_EQ, T_SEMI, T_BAD };

struct lexer {
    const char *p;
    char buf[GR_JAAS_VALUE_MAX + 1];
    size_t len;
    const char *why;
};

static int word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '$' || c == '.' || (unsigned char)c >= 0x80;
}

static int put(struct lexer *lx, char c)
{
    if (lx->len == GR_JAAS_VALUE_MAX) {
        lx->why = "a key or value longer than 4096 bytes";
        return -1;
    }
    lx->buf[lx->len++] = c;
    return 0;
}

static enum tok next(struct lexer *lx)
{
    lx->len = 0;
    for (;;) {
        while (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\n' || *lx->p == '\r' || *lx->p == '\f')
            lx->p++;
        if (lx->p[0] == '/' && lx->p[1] == '/') {
            while (*lx->p && *lx->p != '\n')
                lx->p++;
            continue;
        }
        if (lx->p[0] == '/' && lx->p[1] == '*') {
            const char *e = strstr(lx->p + 2, "*/");
            if (!e) {
                lx->why = "an unterminated comment";
                return T_BAD;
            }
            lx->p = e + 2;
            continue;
        }
        break;
    }
    char c = *lx->p;
    if (!c) return T_END;
    if (c == '=' || c == ';') {
        lx->p++;
        return c == '=' ? T_EQ : T_SEMI;
    }
    if (c == '"' || c == '\'') {
        char q = c;
        lx->p++;
        for (;;) {
            c = *lx->p;
            if (!c || c == '\n' || c == '\r') {
                lx->why = "an unterminated quoted value";
                return T_BAD;
            }
            lx->p++;
            if (c == q) break;
            if (c == '\\') {
                c = *lx->p++;
                if (!c) {
                    lx->why = "an unterminated quoted value";
                    return T_BAD;
                }
                switch (c) {
                case 'a':
                    c = 7;
                    break;
                case 'b':
                    c = '\b';
                    break;
                case 'f':
                    c = '\f';
                    break;
                case 'n':
                    c = '\n';
                    break;
                case 'r':
                    c = '\r';
                    break;
                case 't':
                    c = '\t';
                    break;
                case 'v':
                    c = '\v';
                    break;
                default:
                    if (c >= '0' && c <= '7') { /* up to three octal digits, the first at most 3 */
                        int v = c - '0', digits = 1, maxd = c <= '3' ? 3 : 2;
                        while (digits < maxd && *lx->p >= '0' && *lx->p <= '7') {
                            v = v * 8 + (*lx->p++ - '0');
                            digits++;
                        }
                        c = (char)v;
                    }
                }
            }
            if (put(lx, c)) return T_BAD;
        }
        lx->buf[lx->len] = 0;
        return T_STRING;
    }
    if (!word_char(c)) {
        lx->why = "an unexpected character";
        return T_BAD;
    }
    while (word_char(*lx->p))
        if (put(lx, *lx->p++)) return T_BAD;
    lx->buf[lx->len] = 0;
    return T_WORD;
}

static int fail(struct lexer *lx, const char *text, char *err, size_t cap, const char *what)
{
    snprintf(err, cap, "%s at offset %zu", lx->why ? lx->why : what, (size_t)(lx->p - text));
    return -1;
}

int gr_jaas_parse(const char *text, struct gr_jaas *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    struct lexer *lx = calloc(1, sizeof *lx);
    if (!lx) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    lx->p = text;
    int rc = -1;
    enum tok t = next(lx);
    if (t == T_END) {
        snprintf(err, cap, "login module not specified");
        goto done;
    }
    if (t != T_WORD) {
        fail(lx, text, err, cap, "expected a login module class name");
        goto done;
    }
    out->module = strdup(lx->buf);
    if (next(lx) != T_WORD) {
        fail(lx, text, err, cap, "expected a control flag (required, requisite, sufficient, optional)");
        goto done;
    }
    if (strcmp(lx->buf, "required") && strcmp(lx->buf, "requisite") && strcmp(lx->buf, "sufficient") &&
        strcmp(lx->buf, "optional")) {
        fail(lx, text, err, cap, "invalid control flag (required, requisite, sufficient, optional)");
        goto done;
    }
    out->flag = strdup(lx->buf);
    for (;;) {
        t = next(lx);
        if (t == T_SEMI) break;
        if (t != T_WORD) {
            fail(lx, text, err, cap,
                 t == T_END ? "missing ';' after the login module" : "expected an option key");
            goto done;
        }
        if (out->count == GR_JAAS_OPTIONS_MAX) {
            snprintf(err, cap, "more than %d options", GR_JAAS_OPTIONS_MAX);
            goto done;
        }
        char *key = strdup(lx->buf);
        if (!key) {
            snprintf(err, cap, "out of memory");
            goto done;
        }
        if (next(lx) != T_EQ) {
            free(key);
            fail(lx, text, err, cap, "expected '=' after an option key");
            goto done;
        }
        t = next(lx);
        if (t != T_STRING && t != T_WORD) {
            free(key);
            fail(lx, text, err, cap, "expected an option value");
            goto done;
        }
        for (int i = 0; i < out->count; i++)
            if (!strcmp(out->keys[i], key)) { /* JaasConfig keeps the last; a repeated key is a mistake */
                snprintf(err, cap, "option '%.100s' given twice", key);
                free(key);
                goto done;
            }
        char **k = realloc(out->keys, (size_t)(out->count + 1) * sizeof *k);
        if (k) out->keys = k;
        char **v = k ? realloc(out->values, (size_t)(out->count + 1) * sizeof *v) : NULL;
        if (v) out->values = v;
        char *val = v ? strdup(lx->buf) : NULL;
        if (!val) {
            free(key);
            snprintf(err, cap, "out of memory");
            goto done;
        }
        out->keys[out->count] = key;
        out->values[out->count] = val;
        out->count++;
    }
    t = next(lx);
    if (t != T_END) {
        if (t == T_WORD)
            snprintf(err, cap, "more than one login module entry (a broker's JAAS config holds one)");
        else
            fail(lx, text, err, cap, "unexpected text after ';'");
        goto done;
    }
    rc = 0;
done:
    memset(lx->buf, 0, sizeof lx->buf); /* may hold a password */
    free(lx);
    return rc;
}

const char *gr_jaas_option(const struct gr_jaas *j, const char *key)
{
    for (int i = 0; i < j->count; i++)
        if (!strcmp(j->keys[i], key)) return j->values[i];
    return NULL;
}

void gr_jaas_free(struct gr_jaas *j)
{
    for (int i = 0; i < j->count; i++) {
        free(j->keys[i]);
        if (j->values[i]) {
            memset(j->values[i], 0, strlen(j->values[i]));
            free(j->values[i]);
        }
    }
    free(j->keys);
    free(j->values);
    free(j->module);
    free(j->flag);
    memset(j, 0, sizeof *j);
}
