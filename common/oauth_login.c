/*
 * oauth_login.c: the unsecured JWS a broker logs in with over OAUTHBEARER (common/oauth_login.h).
 */
#include "common/oauth_login.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

enum claim_kind { C_STRING, C_NUMBER, C_LIST };

struct claim {
    enum claim_kind kind;
    char *name, *value;
};

struct gr_oauth_login {
    int count;
    struct claim claims[GR_OAUTH_LOGIN_CLAIMS_MAX];
    char *principal_claim; /* NULL: "sub" */
    int64_t lifetime_s;
};

struct gr_oauth_login *gr_oauth_login_new(void)
{
    struct gr_oauth_login *l = calloc(1, sizeof *l);
    if (l) l->lifetime_s = GR_OAUTH_LOGIN_LIFETIME_DEFAULT_S;
    return l;
}

void gr_oauth_login_free(struct gr_oauth_login *l)
{
    if (!l) return;
    for (int i = 0; i < l->count; i++) {
        free(l->claims[i].name);
        free(l->claims[i].value);
    }
    free(l->principal_claim);
    free(l);
}

static const char *principal_name(const struct gr_oauth_login *l)
{
    return l->principal_claim ? l->principal_claim : "sub";
}

/* Whether `s` is a JSON number (RFC 8259 section 6). */
static bool json_number(const char *s)
{
    if (*s == '-') s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9')) return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == 0;
}

int gr_oauth_login_option(struct gr_oauth_login *l, const char *key, const char *value, char *err, size_t cap)
{
    static const char *const prefixes[] = {"unsecuredLoginStringClaim_", "unsecuredLoginNumberClaim_",
                                           "unsecuredLoginListClaim_"};
    if (strncmp(key, "unsecuredLogin", 14)) return 1;
    if (!strcmp(key, "unsecuredLoginPrincipalClaimName")) {
        if (!*value) {
            snprintf(err, cap, "%s: empty", key);
            return -1;
        }
        free(l->principal_claim);
        return (l->principal_claim = strdup(value)) ? 0 : (snprintf(err, cap, "out of memory"), -1);
    }
    if (!strcmp(key, "unsecuredLoginLifetimeSeconds")) {
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v <= 0 || v > 10LL * 365 * 86400) {
            snprintf(err, cap, "%s: must be a positive whole number of seconds", key);
            return -1;
        }
        l->lifetime_s = v;
        return 0;
    }
    if (!strcmp(key, "unsecuredLoginScopeClaimName"))
        return 0; /* names the list claim of scopes: nothing to do */
    int kind = -1;
    const char *name = NULL;
    for (int k = 0; k < 3 && kind < 0; k++)
        if (!strncmp(key, prefixes[k], strlen(prefixes[k]))) kind = k, name = key + strlen(prefixes[k]);
    if (kind < 0) {
        snprintf(err, cap,
                 "%.80s: not an option of Kafka's OAuthBearerUnsecuredLoginCallbackHandler Gregor knows "
                 "(unsecuredLoginStringClaim_<name>, unsecuredLoginNumberClaim_<name>, "
                 "unsecuredLoginListClaim_<name>, unsecuredLoginPrincipalClaimName, "
                 "unsecuredLoginLifetimeSeconds, unsecuredLoginScopeClaimName; extensions are not sent)",
                 key);
        return -1;
    }
    const char *why = NULL;
    if (!*name || strlen(name) > 256)
        why = "the claim name must be 1 to 256 bytes";
    else if (!strcmp(name, "iat") || !strcmp(name, "exp"))
        why = "iat and exp are set from the clock and unsecuredLoginLifetimeSeconds";
    else if (kind == C_NUMBER && !json_number(value))
        why = "not a number";
    else if (kind == C_LIST && !*value)
        why = "a list claim starts with its delimiter";
    else if (l->count >= GR_OAUTH_LOGIN_CLAIMS_MAX)
        why = "too many claims";
    for (int i = 0; !why && i < l->count; i++)
        if (!strcmp(l->claims[i].name, name)) why = "the claim is given twice";
    if (why) {
        snprintf(err, cap, "%.120s: %s", key, why);
        return -1;
    }
    struct claim *c = &l->claims[l->count];
    c->kind = (enum claim_kind)kind;
    c->name = strdup(name);
    c->value = strdup(value);
    if (!c->name || !c->value) {
        free(c->name);
        free(c->value);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    l->count++;
    return 0;
}

int gr_oauth_login_check(const struct gr_oauth_login *l, char *err, size_t cap)
{
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->claims[i].name, principal_name(l))) {
            if (l->claims[i].kind == C_STRING && l->claims[i].value[0]) return 0;
            break;
        }
    snprintf(err, cap,
             "unsecuredLoginStringClaim_%.200s: must be set (non-empty): it names the principal this "
             "broker logs in as",
             principal_name(l));
    return -1;
}

const char *gr_oauth_login_principal(const struct gr_oauth_login *l)
{
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->claims[i].name, principal_name(l)) && l->claims[i].kind == C_STRING)
            return l->claims[i].value;
    return "";
}

/* A growing text bounded by its capacity; `over` once something did not fit. */
struct buf {
    char *p;
    size_t len, cap;
    bool over;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->over || n >= b->cap - b->len) {
        b->over = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A JSON string (RFC 8259 section 7): quotes, backslash and control characters escaped. */
static void put_json_str(struct buf *b, const char *s, size_t n)
{
    put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(b, esc, 6);
        } else {
            put(b, (const char *)&s[i], 1);
        }
    }
    put(b, "\"", 1);
}

/* Appends base64url without padding (RFC 7515 section 2) of `in`. */
static void put_b64url(struct buf *b, const char *in, size_t n)
{
    size_t need = 4 * ((n + 2) / 3) + 1;
    if (b->over || need >= b->cap - b->len) {
        b->over = true;
        return;
    }
    int w = EVP_EncodeBlock((unsigned char *)b->p + b->len, (const unsigned char *)in, (int)n);
    char *p = b->p + b->len;
    while (w > 0 && p[w - 1] == '=')
        w--;
    for (int i = 0; i < w; i++)
        p[i] = p[i] == '+' ? '-' : p[i] == '/' ? '_' : p[i];
    b->len += (size_t)w;
    b->p[b->len] = 0;
}

int gr_oauth_login_token(const struct gr_oauth_login *l, int64_t now_ms, char *out, size_t cap)
{
    if (cap > GR_OAUTH_LOGIN_TOKEN_MAX + 1) cap = GR_OAUTH_LOGIN_TOKEN_MAX + 1;
    char *claims = malloc(GR_OAUTH_LOGIN_TOKEN_MAX);
    if (!claims || cap < 2) {
        free(claims);
        return -1;
    }
    struct buf c = {claims, 0, GR_OAUTH_LOGIN_TOKEN_MAX, false};
    char num[64];
    /* Kafka's handler: iat = now / 1000.0, exp = iat + lifetime, both seconds as JSON numbers */
    snprintf(num, sizeof num, "{\"iat\":%lld.%03lld,\"exp\":%lld.%03lld", (long long)(now_ms / 1000),
             (long long)(now_ms % 1000), (long long)(now_ms / 1000 + l->lifetime_s),
             (long long)(now_ms % 1000));
    puts_(&c, num);
    for (int i = 0; i < l->count; i++) {
        const struct claim *cl = &l->claims[i];
        put(&c, ",", 1);
        put_json_str(&c, cl->name, strlen(cl->name));
        put(&c, ":", 1);
        if (cl->kind == C_STRING) {
            put_json_str(&c, cl->value, strlen(cl->value));
        } else if (cl->kind == C_NUMBER) {
            puts_(&c, cl->value);
        } else { /* the first character is the delimiter; empty items are skipped, as Kafka's split */
            char d = cl->value[0];
            const char *p = cl->value + 1;
            bool first = true;
            put(&c, "[", 1);
            while (*p) {
                const char *e = strchr(p, d);
                size_t n = e ? (size_t)(e - p) : strlen(p);
                if (n) {
                    if (!first) put(&c, ",", 1);
                    put_json_str(&c, p, n);
                    first = false;
                }
                p += n + (e ? 1 : 0);
            }
            put(&c, "]", 1);
        }
    }
    put(&c, "}", 1);
    struct buf o = {out, 0, cap, false};
    out[0] = 0;
    put_b64url(&o, "{\"alg\":\"none\"}", 14);
    put(&o, ".", 1);
    if (!c.over) put_b64url(&o, claims, c.len);
    put(&o, ".", 1);
    bool bad = c.over || o.over;
    free(claims);
    return bad ? -1 : (int)o.len;
}
