/*
 * ssl_principal.c: ssl.principal.mapping.rules (Kafka's SslPrincipalMapper); see ssl_principal.h.
 */
#include "server/ssl_principal.h"

#include <ctype.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ssl_rule {
    bool is_default;
    regex_t re;
    char *replacement;
    char case_mode; /* 0, 'L' or 'U' */
};

struct gr_ssl_rules {
    struct ssl_rule rules[GR_SSL_RULES_MAX];
    int count;
};

void gr_ssl_rules_free(struct gr_ssl_rules *r)
{
    if (!r) return;
    for (int i = 0; i < r->count; i++) {
        if (!r->rules[i].is_default) regfree(&r->rules[i].re);
        free(r->rules[i].replacement);
    }
    free(r);
}

/* Reads up to the next unescaped '/' from *p into a malloc'd string ("\/" becomes '/', other escapes are
   kept for the regex); NULL when there is none. */
static char *until_slash(const char **p)
{
    const char *s = *p;
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            if (s[i + 1] != '/') out[k++] = s[i];
            out[k++] = s[++i];
        } else if (s[i] == '/') {
            out[k] = 0;
            *p = s + i + 1;
            return out;
        } else {
            out[k++] = s[i];
        }
    }
    free(out);
    return NULL;
}

static struct gr_ssl_rules *fail(struct gr_ssl_rules *r, char *err, size_t cap, const char *why,
                                 const char *at)
{
    snprintf(err, cap, "ssl.principal.mapping.rules: %s: '%.120s'", why, at);
    gr_ssl_rules_free(r);
    return NULL;
}

struct gr_ssl_rules *gr_ssl_rules_parse(const char *value, char *err, size_t cap)
{
    struct gr_ssl_rules *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, cap, "ssl.principal.mapping.rules: out of memory");
        return NULL;
    }
    const char *p = value && *value ? value : "DEFAULT";
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p) break;
        if (r->count == GR_SSL_RULES_MAX) return fail(r, err, cap, "too many rules", p);
        struct ssl_rule *rule = &r->rules[r->count];
        const char *start = p;
        if (!strncmp(p, "DEFAULT", 7)) {
            rule->is_default = true;
            p += 7;
            r->count++;
        } else if (!strncmp(p, "RULE:", 5)) {
            p += 5;
            char *pat = until_slash(&p);
            char *rep = pat ? until_slash(&p) : NULL;
            if (!rep) {
                free(pat);
                return fail(r, err, cap, "Invalid rule", start);
            }
            if (*p == 'L' || *p == 'U') rule->case_mode = *p++;
            /* anchored: Kafka's matcher.matches() wants the whole name */
            size_t n = strlen(pat);
            char *anch = malloc(n + 5);
            if (!anch) {
                free(pat);
                free(rep);
                return fail(r, err, cap, "out of memory", start);
            }
            snprintf(anch, n + 5, "^(%s)$", pat);
            int rc = regcomp(&rule->re, anch, REG_EXTENDED);
            free(anch);
            free(pat);
            if (rc) {
                free(rep);
                return fail(r, err, cap, "the pattern does not compile", start);
            }
            rule->replacement = rep;
            r->count++;
        } else {
            return fail(r, err, cap, "Invalid rule", start);
        }
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == ',' || *p == '\n') {
            p++;
            continue;
        }
        if (*p) return fail(r, err, cap, "Invalid rule", start);
    }
    if (!r->count) return fail(r, err, cap, "no rule", value);
    return r;
}

int gr_ssl_rules_apply(const struct gr_ssl_rules *r, const char *dn, char *out, size_t cap)
{
    for (int i = 0; i < r->count; i++) {
        const struct ssl_rule *rule = &r->rules[i];
        if (rule->is_default) {
            if (strlen(dn) >= cap) return -1;
            strcpy(out, dn);
            return 0;
        }
        regmatch_t m[11]; /* 0: the whole name, 1: the anchor's group, 2..10: the pattern's $1..$9 */
        if (regexec(&rule->re, dn, 11, m, 0)) continue;
        size_t k = 0;
        for (const char *s = rule->replacement; *s; s++) {
            const char *piece = s;
            size_t n = 1;
            if (*s == '\\' && s[1]) {
                piece = ++s;
            } else if (*s == '$' && s[1] >= '0' && s[1] <= '9') {
                int g = s[1] - '0';
                s++;
                regmatch_t gm = g == 0 ? m[0] : m[g + 1];
                if (gm.rm_so < 0) continue;
                piece = dn + gm.rm_so;
                n = (size_t)(gm.rm_eo - gm.rm_so);
            }
            if (k + n >= cap) return -1;
            memcpy(out + k, piece, n);
            k += n;
        }
        out[k] = 0;
        for (size_t j = 0; j < k; j++)
            if (rule->case_mode == 'L')
                out[j] = (char)tolower((unsigned char)out[j]);
            else if (rule->case_mode == 'U')
                out[j] = (char)toupper((unsigned char)out[j]);
        return 0;
    }
    return -1;
}
