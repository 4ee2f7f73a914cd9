/*
 * sasl_oauth.c: SASL/OAUTHBEARER (see sasl_oauth.h). The exchange: the client's initial response is parsed
 * (a malformed one, or a scheme other than bearer, fails with the generic message, as Kafka's SaslException);
 * a token the validator refuses is answered with the JSON error as a challenge, and the client's \x01 then
 * fails with that JSON as the message (any other token after it is a fresh initial response, as Kafka's
 * evaluateResponse). An authzid other than the token's principal fails with Kafka's message. On success the
 * principal is User:<principal claim> and the credential lifetime is exp - now (KIP-368).
 */
#include "server/sasl_oauth.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "common/log.h"
#include "common/strlist.h"
#include "common/time.h"
#include "server/config.h"
#include "server/jaas.h"
#include "server/jwks_fetch.h"

#define OAUTH_MODULE "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#define SECURED_HANDLER "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
#define SECURED_HANDLER_OLD                                                                                  \
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
#define UNSECURED_HANDLER                                                                                    \
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."                                      \
    "OAuthBearerUnsecuredValidatorCallbackHandler"
#define SCOPES_MAX 64
#define CLAIM_NAME_MAX 256

/* ---- the initial response ---- */

static int is_value_char(unsigned char c)
{
    return (c >= 0x21 && c <= 0x7e) || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int is_token_char(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.';
}

int gr_oauth_parse_initial(const uint8_t *in, size_t len, struct gr_oauth_initial *out, const char **why)
{
    static const char *bad = "Invalid OAUTHBEARER client first message";
    const char *p = (const char *)in, *end = p + len;
    memset(out, 0, sizeof *out);
    *why = bad;
    if (len < 4 || p[0] != 'n' || p[1] != ',') return -1;
    p += 2;
    if (p < end && *p == 'a') { /* a=SASLNAME: \x01-\x7F except '=' and ',', or =2C / =3D */
        if (end - p < 2 || p[1] != '=') return -1;
        p += 2;
        out->authzid = p;
        while (p < end && *p != ',') {
            unsigned char c = (unsigned char)*p;
            if (c == '=') {
                if (end - p < 3 || (memcmp(p + 1, "2C", 2) && memcmp(p + 1, "3D", 2))) return -1;
                p += 3;
                continue;
            }
            if (c < 0x01 || c > 0x7f) return -1;
            p++;
        }
        out->authzid_len = (size_t)(p - out->authzid);
        if (!out->authzid_len) return -1;
    }
    if (end - p < 2 || p[0] != ',' || p[1] != 0x01) return -1;
    p += 2;
    const char *auth = NULL, *auth_end = NULL;
    int pairs = 0;
    while (p < end && *p != 0x01) { /* KEY=VALUE\x01 */
        const char *k = p;
        while (p < end && isalpha((unsigned char)*p))
            p++;
        if (p == k || p >= end || *p != '=') return -1;
        size_t kl = (size_t)(p - k);
        const char *v = ++p;
        while (p < end && *p != 0x01) {
            if (!is_value_char((unsigned char)*p)) return -1;
            p++;
        }
        if (p == v || p >= end) return -1;
        if (kl == 4 && !memcmp(k, "auth", 4)) { /* a later duplicate wins, as Utils.parseMap */
            auth = v;
            auth_end = p;
        } else {
            pairs++;
        }
        p++; /* the pair's \x01 */
    }
    if (p >= end || *p != 0x01 || p + 1 != end) return -1;
    if (!auth) {
        *why = "Invalid OAUTHBEARER client first message: 'auth' not specified";
        return -1;
    }
    /* auth: (?<scheme>\w+) +(?<token>[-_.a-zA-Z0-9]+) */
    const char *s = auth;
    while (s < auth_end && (isalnum((unsigned char)*s) || *s == '_'))
        s++;
    const char *scheme_end = s;
    while (s < auth_end && *s == ' ')
        s++;
    const char *tok = s;
    while (s < auth_end && is_token_char((unsigned char)*s))
        s++;
    if (scheme_end == auth || tok == scheme_end || s == tok || s != auth_end) {
        *why = "Invalid OAUTHBEARER client first message: invalid 'auth' format";
        return -1;
    }
    if (scheme_end - auth != 6 || strncasecmp(auth, "bearer", 6)) {
        *why = "Invalid scheme in OAUTHBEARER client first message";
        return -1;
    }
    out->token = tok;
    out->token_len = (size_t)(s - tok);
    out->extensions = pairs;
    *why = NULL;
    return 0;
}

long gr_oauth_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
    while (len && in[len - 1] == '=')
        len--;
    if (len % 4 == 1) return -1;
    size_t need = len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
    if (need > cap) return -1;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        int v;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '-')
            v = 62;
        else if (c == '_')
            v = 63;
        else
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)o;
}

/* ---- the validator ---- */

struct jwk {
    char *kid;
    EVP_PKEY *pkey;
    int ec; /* 1: EC (curve bits in `bits`), 0: RSA */
    int bits;
};

/* One whole key set: built off to the side, then swapped in under the validator's lock. */
struct keyset {
    int nkeys;
    struct jwk keys[GR_OAUTH_KEYS_MAX];
};

struct gr_oauth_validator {
    int secured;
    char principal_claim[CLAIM_NAME_MAX], scope_claim[CLAIM_NAME_MAX];
    int nscopes;
    char *scopes[SCOPES_MAX];
    char scope_text[256]; /* "[a, b]" as Java's List.toString */
    int64_t skew_ms;
    int naud;
    char *aud[16];
    char *issuer;
    pthread_mutex_t mu; /* guards ks and missing: the loop validates, the JWKS thread swaps */
    struct keyset *ks;
    struct gr_jwks_missing missing;
    struct gr_jwks_fetcher *fetcher; /* http(s) URLs only */
};

static void keyset_free(struct keyset *ks)
{
    if (!ks) return;
    for (int i = 0; i < ks->nkeys; i++) {
        free(ks->keys[i].kid);
        EVP_PKEY_free(ks->keys[i].pkey);
    }
    free(ks);
}

void gr_oauth_validator_free(struct gr_oauth_validator *v)
{
    if (!v) return;
    for (int i = 0; i < v->nscopes; i++)
        free(v->scopes[i]);
    for (int i = 0; i < v->naud; i++)
        free(v->aud[i]);
    free(v->issuer);
    gr_jwks_fetcher_stop(v->fetcher); /* before the keys: its thread may be swapping */
    keyset_free(v->ks);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

static int copy_claim_name(char *dst, const char *src, const char *def, const char *key, char *err,
                           size_t cap)
{
    if (!src) src = def;
    while (isspace((unsigned char)*src))
        src++;
    size_t n = strlen(src);
    while (n && isspace((unsigned char)src[n - 1]))
        n--;
    if (!n || n >= CLAIM_NAME_MAX) {
        snprintf(err, cap, "%s must be a non-blank claim name of at most %d bytes", key, CLAIM_NAME_MAX - 1);
        return -1;
    }
    memcpy(dst, src, n);
    dst[n] = 0;
    return 0;
}

/* Decodes the base64url JSON member `name` of object `o` into `out` (`cap` bytes); returns its length or -1.
 */
static long b64_member(json_t *o, const char *name, uint8_t *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? gr_oauth_b64url_decode(s, strlen(s), out, cap) : -1;
}

static EVP_PKEY *jwk_rsa(json_t *k, int *bits)
{
    uint8_t n[1024], e[16];
    long nl = b64_member(k, "n", n, sizeof n), el = b64_member(k, "e", e, sizeof e);
    if (nl <= 0 || el <= 0) return NULL;
    BIGNUM *bn = BN_bin2bn(n, (int)nl, NULL), *be = BN_bin2bn(e, (int)el, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = NULL;
    EVP_PKEY *pkey = NULL;
    if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) && (params = OSSL_PARAM_BLD_to_param(bld)) &&
        (ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL)) && EVP_PKEY_fromdata_init(ctx) == 1)
        if (EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    if (pkey) *bits = EVP_PKEY_get_bits(pkey);
    return pkey;
}

static EVP_PKEY *jwk_ec(json_t *k, int *bits)
{
    const char *crv = json_string_value(json_object_get(k, "crv"));
    const char *group = NULL;
    size_t cl = 0;
    if (crv && !strcmp(crv, "P-256"))
        group = "prime256v1", cl = 32;
    else if (crv && !strcmp(crv, "P-384"))
        group = "secp384r1", cl = 48;
    if (!group) return NULL;
    uint8_t pt[1 + 2 * 48];
    pt[0] = 4;
    if (b64_member(k, "x", pt + 1, cl) != (long)cl || b64_member(k, "y", pt + 1 + cl, cl) != (long)cl)
        return NULL;
    OSSL_PARAM params[3] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, pt, 1 + 2 * cl),
        OSSL_PARAM_construct_end(),
    };
    EVP_PKEY *pkey = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx && EVP_PKEY_fromdata_init(ctx) == 1 &&
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    *bits = (int)cl * 8;
    return pkey;
}

/* Parses JWKS `buf` (`n` bytes) from `src` (named in messages). Returns the key set, or NULL after writing
 * into `err` why (not JSON, no "keys" array, no usable key). Keys Gregor cannot use are skipped (logged). */
static struct keyset *parse_keys(const char *buf, size_t n, const char *src, char *err, size_t cap)
{
    json_error_t je;
    json_t *root = json_loadb(buf, n, 0, &je);
    json_t *keys = json_object_get(root, "keys");
    if (!json_is_array(keys)) {
        json_decref(root);
        snprintf(err, cap, "%.200s is not a JWKS (a JSON object with a \"keys\" array)", src);
        return NULL;
    }
    struct keyset *ks = calloc(1, sizeof *ks);
    if (!ks) {
        json_decref(root);
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const char *kty = json_string_value(json_object_get(k, "kty"));
        const char *kid = json_string_value(json_object_get(k, "kid"));
        const char *use = json_string_value(json_object_get(k, "use"));
        if (!kty || !kid || strlen(kid) > 512 || (use && strcmp(use, "sig"))) continue;
        if (ks->nkeys == GR_OAUTH_KEYS_MAX) break;
        struct jwk *w = &ks->keys[ks->nkeys];
        w->ec = !strcmp(kty, "EC");
        w->pkey = w->ec ? jwk_ec(k, &w->bits) : !strcmp(kty, "RSA") ? jwk_rsa(k, &w->bits) : NULL;
        if (!w->pkey && (w->ec || !strcmp(kty, "RSA"))) {
            GR_WARN("config: sasl.oauthbearer.jwks.endpoint.url: key '%.64s' of %.200s (kty %.16s) is not a "
                    "usable RSA or EC P-256/P-384 public key, skipped",
                    kid, src, kty);
            continue;
        }
        if (!w->pkey) continue; /* another key type (oct, OKP): not for signatures Gregor checks */
        w->kid = strdup(kid);
        if (!w->kid) {
            EVP_PKEY_free(w->pkey);
            w->pkey = NULL;
            break;
        }
        ks->nkeys++;
    }
    json_decref(root);
    if (!ks->nkeys) {
        keyset_free(ks);
        snprintf(err, cap, "%.200s holds no usable signing key (RSA, EC P-256/P-384, each with a kid)", src);
        return NULL;
    }
    return ks;
}

/* Reads a file: JWKS once (at start). */
static int load_jwks_file(struct gr_oauth_validator *v, const char *url, char *err, size_t cap)
{
    static const char key[] = "sasl.oauthbearer.jwks.endpoint.url";
    const char *path = NULL;
    if (!strncmp(url, "file://", 7))
        path = url + 7;
    else if (!strncmp(url, "file:", 5))
        path = url + 5;
    if (!path || path[0] != '/') {
        snprintf(err, cap,
                 "%s: '%.200s' is not a file: URL with an absolute path, nor an http:// or https:// URL", key,
                 url);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: cannot open %.200s", key, path);
        return -1;
    }
    char *buf = malloc(GR_OAUTH_JWKS_MAX + 1);
    size_t n = buf ? fread(buf, 1, GR_OAUTH_JWKS_MAX + 1, f) : 0;
    fclose(f);
    if (!buf || n > GR_OAUTH_JWKS_MAX) {
        free(buf);
        snprintf(err, cap, "%s: %.200s is larger than %d bytes", key, path, GR_OAUTH_JWKS_MAX);
        return -1;
    }
    char why[300];
    v->ks = parse_keys(buf, n, path, why, sizeof why);
    free(buf);
    if (!v->ks) {
        snprintf(err, cap, "%s: %s", key, why);
        return -1;
    }
    return 0;
}

/* gr_jwks_apply_fn: a fetched body replaces the key set whole (on the JWKS thread). */
static int apply_body(void *arg, const char *body, size_t len, char *err, size_t cap)
{
    struct gr_oauth_validator *v = arg;
    struct keyset *ks = parse_keys(body, len, "the response", err, cap);
    if (!ks) return -1;
    pthread_mutex_lock(&v->mu);
    struct keyset *old = v->ks;
    v->ks = ks;
    for (int i = 0; i < ks->nkeys; i++) /* RefreshingHttpsJwks.refresh: found kids ask again at once */
        gr_jwks_missing_forget(&v->missing, ks->keys[i].kid);
    pthread_mutex_unlock(&v->mu);
    keyset_free(old);
    GR_INFO("OAuth JWKS: %d key(s) in use", ks->nkeys);
    return 0;
}

/* Parses a non-negative ms setting `val` of `key` (NULL: `def`). Returns 0 or -1 with `err`. */
static int parse_ms(const char *key, const char *val, int64_t def, int64_t min, int64_t *out, char *err,
                    size_t cap)
{
    if (!val) {
        *out = def;
        return 0;
    }
    char *e;
    long long x = strtoll(val, &e, 10);
    if (!val[0] || *e || x < min) {
        snprintf(err, cap, "%s must be an integer of at least %lld (ms), got '%.32s'", key, (long long)min,
                 val);
        return -1;
    }
    *out = x;
    return 0;
}

/* Starts the refresher of an http(s) JWKS URL (first fetch included). */
static int start_jwks_fetch(struct gr_oauth_validator *v, const struct gr_oauth_options *o, char *err,
                            size_t cap)
{
    struct gr_jwks_fetch_opts fo = {.url = o->jwks_url};
    if (parse_ms("sasl.oauthbearer.jwks.endpoint.refresh.ms", o->refresh_ms, 3600000, 1, &fo.refresh_ms, err,
                 cap) ||
        parse_ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", o->backoff_ms, 100, 0, &fo.backoff_ms,
                 err, cap) ||
        parse_ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", o->backoff_max_ms, 10000, 0,
                 &fo.backoff_max_ms, err, cap))
        return -1;
    if (fo.backoff_max_ms < fo.backoff_ms) { /* Kafka's Retry constructor */
        snprintf(err, cap,
                 "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms (%lld) is less than "
                 "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms (%lld)",
                 (long long)fo.backoff_max_ms, (long long)fo.backoff_ms);
        return -1;
    }
    if (o->truststore_location || o->truststore_certificates) {
        if (!o->truststore_type || strcasecmp(o->truststore_type, "PEM")) {
            snprintf(
                err, cap,
                "the JAAS option ssl.truststore.type is '%.32s': Gregor reads the JWKS endpoint's truststore "
                "as PEM only (ssl.truststore.type=\"PEM\")",
                o->truststore_type ? o->truststore_type : "JKS (Kafka's default)");
            return -1;
        }
        fo.ca_file = o->truststore_location;
        fo.ca_pem = o->truststore_certificates;
    }
    v->fetcher = gr_jwks_fetcher_start(&fo, apply_body, v, err, cap);
    return v->fetcher ? 0 : -1;
}

static int url_allowed(const char *url, const char *allowed)
{
    if (!allowed) return 0;
    size_t ul = strlen(url);
    for (const char *p = allowed; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t n = (size_t)(e - p);
        while (n && p[n - 1] == ' ')
            n--;
        if (n && n == ul && !memcmp(p, url, n)) return 1;
        p = e;
    }
    return 0;
}

struct gr_oauth_validator *gr_oauth_validator_new(const struct gr_oauth_options *o, char *err, size_t cap)
{
    struct gr_oauth_validator *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    v->secured = o->secured;
    pthread_mutex_init(&v->mu, NULL);
    const char *pk = o->secured ? "sasl.oauthbearer.sub.claim.name" : "unsecuredValidatorPrincipalClaimName";
    const char *sk = o->secured ? "sasl.oauthbearer.scope.claim.name" : "unsecuredValidatorScopeClaimName";
    if (copy_claim_name(v->principal_claim, o->principal_claim, "sub", pk, err, cap) ||
        copy_claim_name(v->scope_claim, o->scope_claim, "scope", sk, err, cap))
        goto fail;
    const char *skk =
        o->secured ? "sasl.oauthbearer.clock.skew.seconds" : "unsecuredValidatorAllowableClockSkewMs";
    const char *skew = o->clock_skew ? o->clock_skew : o->secured ? "30" : "0";
    char *e;
    long long sv = strtoll(skew, &e, 10);
    if (!skew[0] || *e || sv < 0 || sv > 86400000LL) {
        snprintf(err, cap, "%s must be a non-negative integer, got '%.32s'", skk, skew);
        goto fail;
    }
    v->skew_ms = o->secured ? sv * 1000 : sv;
    if (o->required_scope) { /* space-delimited; Kafka keeps the list order for its message */
        size_t tl = 1;
        snprintf(v->scope_text, sizeof v->scope_text, "[");
        for (const char *p = o->required_scope; *p;) {
            while (*p == ' ')
                p++;
            const char *q = p;
            while (*q && *q != ' ')
                q++;
            if (q > p) {
                if (v->nscopes == SCOPES_MAX || !(v->scopes[v->nscopes] = strndup(p, (size_t)(q - p)))) {
                    snprintf(err, cap, "unsecuredValidatorRequiredScope: more than %d scopes", SCOPES_MAX);
                    goto fail;
                }
                tl += (size_t)snprintf(v->scope_text + tl,
                                       tl < sizeof v->scope_text ? sizeof v->scope_text - tl : 0, "%s%s",
                                       v->nscopes ? ", " : "", v->scopes[v->nscopes]);
                if (tl >= sizeof v->scope_text) tl = sizeof v->scope_text - 1;
                v->nscopes++;
            }
            p = q;
        }
        snprintf(v->scope_text + tl, sizeof v->scope_text - tl, "]");
    }
    if (!o->secured) return v;
    if (o->expected_audience) {
        const char *list = o->expected_audience, *p;
        size_t n;
        while (gr_list_next(&list, &p, &n))
            if (v->naud == 16 || !(v->aud[v->naud++] = strndup(p, n))) {
                snprintf(err, cap, "sasl.oauthbearer.expected.audience: more than 16 audiences");
                goto fail;
            }
    }
    if (o->expected_issuer && o->expected_issuer[0] && !(v->issuer = strdup(o->expected_issuer))) {
        snprintf(err, cap, "out of memory");
        goto fail;
    }
    if (!o->jwks_url || !o->jwks_url[0]) {
        snprintf(err, cap,
                 "sasl.oauthbearer.jwks.endpoint.url is not set: %s validates signed JWTs against its keys",
                 SECURED_HANDLER);
        goto fail;
    }
    /* Kafka 4.x: ConfigurationUtils.throwIfURLIsNotAllowed */
    if (!url_allowed(o->jwks_url, o->allowed_urls)) {
        snprintf(
            err, cap,
            "Invalid value %.200s for configuration sasl.oauthbearer.jwks.endpoint.url: The URL cannot be "
            "accessed due to restrictions. Update the system property "
            "'org.apache.kafka.sasl.oauthbearer.allowed.urls' to allow the URL to be accessed. (Gregor reads "
            "it from server.properties; Kafka 4.x allows no URL by default)",
            o->jwks_url);
        goto fail;
    }
    if (!strncmp(o->jwks_url, "https://", 8) || !strncmp(o->jwks_url, "http://", 7)) {
        if (start_jwks_fetch(v, o, err, cap)) goto fail;
    } else if (load_jwks_file(v, o->jwks_url, err, cap)) {
        goto fail;
    }
    return v;
fail:
    gr_oauth_validator_free(v);
    return NULL;
}

static int fail_r(struct gr_oauth_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_r(struct gr_oauth_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
    if (!r->status) r->status = "invalid_token";
    return -1;
}

/* Decodes one base64url JSON object of a compact serialization. Returns it (caller decrefs) or NULL. */
static json_t *part_json(const char *p, size_t n)
{
    uint8_t *buf = malloc(n / 4 * 3 + 3);
    if (!buf) return NULL;
    long l = gr_oauth_b64url_decode(p, n, buf, n / 4 * 3 + 3);
    json_t *o = l >= 0 ? json_loadb((const char *)buf, (size_t)l, JSON_DECODE_ANY, NULL) : NULL;
    free(buf);
    if (o && !json_is_object(o)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static int64_t secs_to_ms(double s)
{
    double ms = round(s * 1000.0);
    if (!(ms > -9.0e15)) return INT64_MIN / 2; /* NaN too */
    if (ms > 9.0e15) return INT64_MAX / 2;
    return (int64_t)ms;
}

/* Whether `scope` (the token's scope claim: a string, or an array of strings) holds `want`, trimmed. */
static int scope_has(json_t *scope, const char *want)
{
    size_t wl = strlen(want);
    json_t *one = scope;
    size_t i = 0, n = json_is_array(scope) ? json_array_size(scope) : 1;
    for (; i < n; i++) {
        if (json_is_array(scope)) one = json_array_get(scope, i);
        const char *s = json_string_value(one);
        if (!s) continue;
        while (isspace((unsigned char)*s))
            s++;
        size_t l = strlen(s);
        while (l && isspace((unsigned char)s[l - 1]))
            l--;
        if (l == wl && !memcmp(s, want, wl)) return 1;
    }
    return 0;
}

static int verify_sig(const struct jwk *k, const char *alg, const uint8_t *data, size_t dl,
                      const uint8_t *sig, size_t sl)
{
    const EVP_MD *md = NULL;
    int ec = alg[0] == 'E', bits = atoi(alg + 2);
    if (bits == 256)
        md = EVP_sha256();
    else if (bits == 384)
        md = EVP_sha384();
    else if (bits == 512)
        md = EVP_sha512();
    if (!md || ec != k->ec) return 0;
    if (!ec && k->bits < 2048) return 0; /* RFC 7518 3.3, as jose4j */
    uint8_t der[160];
    if (ec) { /* JWS: R || S, each the curve's size; OpenSSL wants DER */
        size_t cl = (size_t)k->bits / 8;
        if (bits != k->bits || sl != 2 * cl) return 0;
        ECDSA_SIG *es = ECDSA_SIG_new();
        BIGNUM *br = BN_bin2bn(sig, (int)cl, NULL), *bs = BN_bin2bn(sig + cl, (int)cl, NULL);
        if (!es || !br || !bs || ECDSA_SIG_set0(es, br, bs) != 1) {
            ECDSA_SIG_free(es);
            BN_free(br);
            BN_free(bs);
            return 0;
        }
        int dlen = i2d_ECDSA_SIG(es, NULL);
        uint8_t *dp = der;
        if (dlen <= 0 || dlen > (int)sizeof der || i2d_ECDSA_SIG(es, &dp) != dlen) {
            ECDSA_SIG_free(es);
            return 0;
        }
        ECDSA_SIG_free(es);
        sig = der;
        sl = (size_t)dlen;
    }
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestVerifyInit(c, NULL, md, NULL, k->pkey) == 1 &&
             EVP_DigestVerify(c, sig, sl, data, dl) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}

int gr_oauth_validate(const struct gr_oauth_validator *v, const char *token, size_t len, int64_t now_ms,
                      struct gr_oauth_result *r)
{
    memset(r, 0, sizeof *r);
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', (size_t)(token + len - d1 - 1)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', (size_t)(token + len - d2 - 1)))
        return fail_r(r, "not a JWS compact serialization of 3 dot-separated values");
    if (!v->secured && (d2 == d1 + 1 || d1 == token))
        return fail_r(r, "Malformed compact serialization contains '..'");
    json_t *hdr = part_json(token, (size_t)(d1 - token));
    json_t *claims = part_json(d1 + 1, (size_t)(d2 - d1 - 1));
    int rc = -1;
    if (!hdr || !claims) {
        fail_r(r, "malformed Base64 URL encoded value or JSON");
        goto out;
    }
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    size_t siglen = (size_t)(token + len - d2 - 1);
    if (!v->secured) {
        if (!alg || strcmp(alg, "none")) {
            fail_r(r, "Unsecured JWS must have 'none' for an algorithm");
            goto out;
        }
        if (siglen) {
            fail_r(r, "Unsecured JWS must not contain a digital signature");
            goto out;
        }
    } else {
        if (!alg || (strcmp(alg, "RS256") && strcmp(alg, "RS384") && strcmp(alg, "RS512") &&
                     strcmp(alg, "ES256") && strcmp(alg, "ES384"))) {
            fail_r(r, "signature algorithm '%.16s' is not accepted", alg ? alg : "(none)");
            goto out;
        }
        const char *kid = json_string_value(json_object_get(hdr, "kid"));
        uint8_t sig[1024];
        long sl = gr_oauth_b64url_decode(d2 + 1, siglen, sig, sizeof sig);
        struct gr_oauth_validator *mv = (struct gr_oauth_validator *)v; /* the lock and the missing kids */
        pthread_mutex_lock(&mv->mu);
        const struct jwk *k = NULL;
        for (int i = 0; kid && v->ks && i < v->ks->nkeys; i++)
            if (!strcmp(v->ks->keys[i].kid, kid)) k = &v->ks->keys[i];
        int ok =
            k && sl > 0 && verify_sig(k, alg, (const uint8_t *)token, (size_t)(d2 - token), sig, (size_t)sl);
        /* RefreshingHttpsJwksVerificationKeyResolver: an unknown kid is refused now and asks for a refresh
         * (rate-limited per kid), so that a retry after the refresh finds it */
        int expedite = !k && kid && v->fetcher && gr_jwks_missing_ask(&mv->missing, kid, gr_time_mono_ms());
        pthread_mutex_unlock(&mv->mu);
        if (expedite) gr_jwks_fetcher_expedite(v->fetcher);
        if (!k) {
            fail_r(r, "no JWKS key for the token's kid '%.64s'%s", kid ? kid : "(none)",
                   expedite ? " (a JWKS refresh was asked for)" : "");
            goto out;
        }
        if (!ok) {
            fail_r(r, "the %s signature does not verify with key '%.64s'", alg, kid);
            goto out;
        }
    }
    json_t *exp = json_object_get(claims, "exp"), *iat = json_object_get(claims, "iat");
    if (!json_is_number(exp)) {
        fail_r(r, exp ? "The 'exp' claim was not of type Number" : "No expiration time in JWT");
        goto out;
    }
    if (iat && !json_is_number(iat)) {
        fail_r(r, "The 'iat' claim was not of type Number");
        goto out;
    }
    if (v->secured && !iat) {
        fail_r(r, "No Issued At (iat) claim present");
        goto out;
    }
    json_t *pc = json_object_get(claims, v->principal_claim);
    const char *principal = json_string_value(pc);
    size_t pl = principal ? strlen(principal) : 0;
    int blank = 1;
    for (size_t i = 0; i < pl; i++)
        blank &= isspace((unsigned char)principal[i]) != 0;
    if (!principal || blank) {
        fail_r(r, "No principal name in JWT claim: %.64s", v->principal_claim);
        goto out;
    }
    if (pl + sizeof "User:" > sizeof r->principal) {
        fail_r(r, "the principal claim is longer than %zu bytes", sizeof r->principal - sizeof "User:");
        goto out;
    }
    json_t *scope = json_object_get(claims, v->scope_claim);
    if (scope && !json_is_string(scope) && !json_is_array(scope)) {
        fail_r(r, "The '%.64s' claim was not of type List", v->scope_claim);
        goto out;
    }
    int64_t exp_ms = secs_to_ms(json_number_value(exp));
    int64_t iat_ms = iat ? secs_to_ms(json_number_value(iat)) : 0;
    if (iat && !v->secured && now_ms + v->skew_ms < iat_ms) {
        fail_r(r,
               "The Issued At value (%.0f seconds) was after the indicated time (%lld ms) plus allowable "
               "clock skew (%lld ms)",
               json_number_value(iat), (long long)now_ms, (long long)v->skew_ms);
        goto out;
    }
    if (now_ms - v->skew_ms >= exp_ms) {
        fail_r(r,
               "The indicated time (%lld ms) minus allowable clock skew (%lld ms) was on or after the "
               "Expiration Time value (%.0f seconds)",
               (long long)now_ms, (long long)v->skew_ms, json_number_value(exp));
        goto out;
    }
    if (iat && !v->secured && exp_ms <= iat_ms) {
        fail_r(r, "The Expiration Time time (%.0f seconds) was not after the Issued At time (%.0f seconds)",
               json_number_value(exp), json_number_value(iat));
        goto out;
    }
    if (v->secured) {
        json_t *nbf = json_object_get(claims, "nbf");
        if (nbf && (!json_is_number(nbf) || secs_to_ms(json_number_value(nbf)) > now_ms + v->skew_ms)) {
            fail_r(r, "the token is not yet valid (nbf)");
            goto out;
        }
        if (v->issuer) {
            const char *iss = json_string_value(json_object_get(claims, "iss"));
            if (!iss || strcmp(iss, v->issuer)) {
                fail_r(r, "Issuer (iss) claim value does not match the expected one");
                goto out;
            }
        }
        if (v->naud) {
            json_t *aud = json_object_get(claims, "aud");
            int hit = 0;
            for (int i = 0; i < v->naud && aud; i++)
                hit |= scope_has(aud, v->aud[i]) && (json_is_string(aud) || json_is_array(aud));
            if (!hit) {
                fail_r(r, "Audience (aud) claim %s",
                       aud ? "does not hold an expected audience" : "is missing");
                goto out;
            }
        }
    }
    for (int i = 0; i < v->nscopes; i++)
        if (!scope || !scope_has(scope, v->scopes[i])) {
            r->status = "insufficient_scope";
            snprintf(r->scope, sizeof r->scope, "%s", v->scope_text);
            fail_r(r,
                   "The provided scope was missing a required scope (%.64s). All required scope elements: %s",
                   v->scopes[i], v->scope_text);
            goto out;
        }
    if (v->secured) { /* OAuthBearerUtils.validateClaimSubject: the trimmed value */
        while (isspace((unsigned char)*principal)) {
            principal++;
            pl--;
        }
        while (pl && isspace((unsigned char)principal[pl - 1]))
            pl--;
    }
    memcpy(r->principal, principal, pl);
    r->principal[pl] = 0;
    r->exp_ms = exp_ms;
    rc = 0;
out:
    json_decref(hdr);
    json_decref(claims);
    return rc;
}

/* ---- the mechanism ---- */

struct gr_sasl_exchange {
    const struct gr_oauth_validator *v; /* borrowed from the listener */
    int finished;
    char error[400]; /* the JSON error sent as a challenge; "" when none */
};

static void *oauth_listener_new(const struct gr_config *cfg, const char *listener, char *err, size_t cap)
{
    struct gr_sasl_settings ss;
    gr_config_sasl(cfg, listener, "OAUTHBEARER", &ss);
    if (!ss.jaas_config) {
        snprintf(err, cap,
                 "%s is not set: listener %s serves OAUTHBEARER and needs a JAAS config (%s required;)%s",
                 ss.jaas_config_key, listener, OAUTH_MODULE,
                 ss.broker_jaas_config ? "; sasl.jaas.config is a client setting a broker never reads" : "");
        return NULL;
    }
    struct gr_jaas j;
    char why[300];
    if (gr_jaas_parse(ss.jaas_config, &j, why, sizeof why)) {
        snprintf(err, cap, "%s: cannot parse the JAAS config: %s", ss.jaas_config_key, why);
        gr_jaas_free(&j);
        return NULL;
    }
    if (strcmp(j.module, OAUTH_MODULE)) {
        snprintf(err, cap, "%s: the login module is '%.200s', OAUTHBEARER needs %s", ss.jaas_config_key,
                 j.module, OAUTH_MODULE);
        gr_jaas_free(&j);
        return NULL;
    }
    const char *handler =
        gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.server.callback.handler.class");
    struct gr_oauth_options o = {0};
    if (handler && (!strcmp(handler, SECURED_HANDLER) || !strcmp(handler, SECURED_HANDLER_OLD))) {
        o.secured = 1;
        o.principal_claim =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.sub.claim.name");
        o.scope_claim =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.scope.claim.name");
        o.clock_skew =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.clock.skew.seconds");
        o.jwks_url =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.jwks.endpoint.url");
        o.allowed_urls = gr_config_sasl_option(cfg, listener, "oauthbearer",
                                               "org.apache.kafka.sasl.oauthbearer.allowed.urls");
        o.expected_audience =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.expected.audience");
        o.expected_issuer =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.expected.issuer");
        o.refresh_ms =
            gr_config_sasl_option(cfg, listener, "oauthbearer", "sasl.oauthbearer.jwks.endpoint.refresh.ms");
        o.backoff_ms = gr_config_sasl_option(cfg, listener, "oauthbearer",
                                             "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms");
        o.backoff_max_ms = gr_config_sasl_option(cfg, listener, "oauthbearer",
                                                 "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms");
        o.truststore_type = gr_jaas_option(&j, "ssl.truststore.type");
        o.truststore_location = gr_jaas_option(&j, "ssl.truststore.location");
        o.truststore_certificates = gr_jaas_option(&j, "ssl.truststore.certificates");
    } else if (!handler || !strcmp(handler, UNSECURED_HANDLER)) {
        o.principal_claim = gr_jaas_option(&j, "unsecuredValidatorPrincipalClaimName");
        o.scope_claim = gr_jaas_option(&j, "unsecuredValidatorScopeClaimName");
        o.required_scope = gr_jaas_option(&j, "unsecuredValidatorRequiredScope");
        o.clock_skew = gr_jaas_option(&j, "unsecuredValidatorAllowableClockSkewMs");
    } else {
        snprintf(err, cap,
                 "listener.name.%s.oauthbearer.sasl.server.callback.handler.class: '%.200s' is not a handler "
                 "Gregor knows (%s for signed JWTs, unset for unsecured JWS)",
                 listener, handler, SECURED_HANDLER);
        gr_jaas_free(&j);
        return NULL;
    }
    char verr[400];
    struct gr_oauth_validator *v = gr_oauth_validator_new(&o, verr, sizeof verr);
    gr_jaas_free(&j);
    if (!v) snprintf(err, cap, "listener %s, OAUTHBEARER: %s", listener, verr);
    return v;
}

static void oauth_listener_free(void *ctx)
{
    gr_oauth_validator_free(ctx);
}

static struct gr_sasl_exchange *oauth_start_listener(struct gr_broker *b, void *ctx)
{
    (void)b;
    struct gr_sasl_exchange *x = calloc(1, sizeof *x);
    if (x) x->v = ctx;
    return x;
}

static struct gr_sasl_exchange *oauth_start(struct gr_broker *b)
{
    (void)b;
    return calloc(1, sizeof(struct gr_sasl_exchange)); /* no validator: every step fails */
}

static enum gr_sasl_step_rc oauth_step(struct gr_sasl_exchange *x, const uint8_t *in, size_t in_len,
                                       uint8_t **out, size_t *out_len, char *principal, size_t principal_cap,
                                       int64_t *lifetime_ms, char *err, size_t err_cap)
{
    *out = NULL;
    *out_len = 0;
    *lifetime_ms = 0;
    err[0] = 0;
    if (x->finished) return GR_SASL_FAIL;
    if (in_len == 1 && in[0] == 0x01 && x->error[0]) { /* the client's answer to our error */
        snprintf(err, err_cap, "%s", x->error);
        x->finished = 1;
        return GR_SASL_FAIL;
    }
    x->error[0] = 0;
    struct gr_oauth_initial m;
    const char *why;
    if (!x->v || gr_oauth_parse_initial(in, in_len, &m, &why)) {
        if (x->v) GR_DEBUG("OAUTHBEARER: %s", why);
        x->finished = 1;
        return GR_SASL_FAIL; /* SaslException: the generic message */
    }
    struct gr_oauth_result r;
    int64_t now = gr_time_wall_ms();
    if (gr_oauth_validate(x->v, m.token, m.token_len, now, &r)) {
        GR_LOG_RATELIMITED(GR_LOG_INFO, "OAUTHBEARER token refused (%s): %s", r.status, r.why);
        if (r.scope[0])
            snprintf(x->error, sizeof x->error, "{\"status\":\"%s\", \"scope\":\"%s\"}", r.status, r.scope);
        else
            snprintf(x->error, sizeof x->error, "{\"status\":\"%s\"}", r.status);
        size_t n = strlen(x->error);
        if (!(*out = malloc(n))) {
            x->finished = 1;
            return GR_SASL_FAIL;
        }
        memcpy(*out, x->error, n);
        *out_len = n;
        return GR_SASL_CONTINUE;
    }
    x->finished = 1;
    size_t pl = strlen(r.principal);
    if (m.authzid_len && (m.authzid_len != pl || memcmp(m.authzid, r.principal, pl))) {
        snprintf(
            err, err_cap,
            "Authentication failed: Client requested an authorization id (%.*s) that is different from the "
            "token's principal name (%.*s)",
            (int)(m.authzid_len > 200 ? 200 : m.authzid_len), m.authzid, (int)(pl > 200 ? 200 : pl),
            r.principal);
        return GR_SASL_FAIL;
    }
    if (pl + sizeof "User:" > principal_cap) return GR_SASL_FAIL;
    snprintf(principal, principal_cap, "User:%s", r.principal);
    *lifetime_ms = r.exp_ms - now > 0 ? r.exp_ms - now : 1; /* within the clock skew: expires at once */
    return GR_SASL_DONE;
}

static void oauth_free(struct gr_sasl_exchange *x)
{
    free(x);
}

const struct gr_sasl_mech gr_sasl_mech_oauthbearer = {
    .name = "OAUTHBEARER",
    .start = oauth_start,
    .step = oauth_step,
    .free = oauth_free,
    .listener_new = oauth_listener_new,
    .listener_free = oauth_listener_free,
    .start_listener = oauth_start_listener,
};
