/*
 * test_oauth.c: SASL/OAUTHBEARER (server/sasl_oauth.h). The client initial response's parser against Kafka's
 * OAuthBearerClientInitialResponse rules; base64url; the unsecured validator (Kafka's
 * OAuthBearerUnsecuredValidatorCallbackHandler: alg none, exp/iat with clock skew, principal and scope claim
 * names, required scope as insufficient_scope); the signed validator with RS256 and ES256 tokens signed here
 * with keys made here (a JWKS file in a temporary directory): expired, wrong audience and issuer, unknown
 * kid, a flipped signature byte, alg none or HS256, a key of the wrong type, the allowed-URLs rule; the
 * mechanism's exchange (the JSON challenge, the \x01 answer, the authzid check, lifetime from exp); and
 * seeded random mutations of valid tokens and responses, none of which may crash or be accepted with an empty
 * principal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "common/time.h"
#include "server/config.h"
#include "server/sasl_oauth.h"

#define NOW_MS 1700000000000LL /* a fixed "now" for the validators (no clock in these checks) */
#define NOW_S 1700000000LL

static void b64url(const uint8_t *in, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v =
            (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        if (i + 1 < n) out[o++] = a[v >> 6 & 63];
        if (i + 2 < n) out[o++] = a[v & 63];
    }
    out[o] = 0;
}

static void b64s(const char *s, char *out)
{
    b64url((const uint8_t *)s, strlen(s), out);
}

/* An unsecured JWS: header {"alg":"none"}, the given claims, empty signature. */
static char *unsecured(const char *claims)
{
    static char buf[8192];
    char h[64], c[4096];
    b64s("{\"alg\":\"none\"}", h);
    b64s(claims, c);
    snprintf(buf, sizeof buf, "%s.%s.", h, c);
    return buf;
}

static struct gr_oauth_validator *unsecured_v(const char *principal_claim, const char *required_scope,
                                              const char *skew)
{
    struct gr_oauth_options o = {0};
    o.principal_claim = principal_claim;
    o.required_scope = required_scope;
    o.clock_skew = skew;
    char err[400];
    struct gr_oauth_validator *v = gr_oauth_validator_new(&o, err, sizeof err);
    assert_non_null(v);
    return v;
}

static int check(struct gr_oauth_validator *v, const char *tok, struct gr_oauth_result *r)
{
    return gr_oauth_validate(v, tok, strlen(tok), NOW_MS, r);
}

static void parse_initial(void **state)
{
    (void)state;
    struct gr_oauth_initial m;
    const char *why;
    static const char ok1[] = "n,,\x01"
                              "auth=Bearer abc.def.\x01\x01";
    assert_int_equal(gr_oauth_parse_initial((const uint8_t *)ok1, strlen(ok1), &m, &why), 0);
    assert_int_equal(m.token_len, 8);
    assert_memory_equal(m.token, "abc.def.", 8);
    assert_int_equal(m.authzid_len, 0);
    assert_int_equal(m.extensions, 0);
    static const char ok2[] = "n,a=al=2Cice,\x01"
                              "auth=bEaReR  x-y_z.0\x01traceId=a b=c\x01other=1\x01\x01";
    assert_int_equal(gr_oauth_parse_initial((const uint8_t *)ok2, strlen(ok2), &m, &why), 0);
    assert_int_equal(m.authzid_len, 8);
    assert_memory_equal(m.authzid, "al=2Cice", 8);
    assert_memory_equal(m.token, "x-y_z.0", 7);
    assert_int_equal(m.extensions, 2);
    static const struct {
        const char *in;
        const char *why;
    } bad[] = {
        {"", "Invalid OAUTHBEARER client first message"},
        {"y,,\x01"
         "auth=Bearer a\x01\x01",
         "Invalid OAUTHBEARER client first message"},
        {"n,,\x01"
         "auth=Bearer a\x01",
         "Invalid OAUTHBEARER client first message"}, /* no final \x01 */
        {"n,,\x01"
         "auth=Bearer a\x01\x01x",
         "Invalid OAUTHBEARER client first message"},                             /* trailing */
        {"n,,auth=Bearer a\x01\x01", "Invalid OAUTHBEARER client first message"}, /* no \x01 */
        {"n,a=,\x01"
         "auth=Bearer a\x01\x01",
         "Invalid OAUTHBEARER client first message"}, /* empty authzid */
        {"n,a=x=41,\x01"
         "auth=Bearer a\x01\x01",
         "Invalid OAUTHBEARER client first message"}, /* bad escape */
        {"n,,\x01"
         "k1=v\x01"
         "auth=Bearer a\x01\x01",
         "Invalid OAUTHBEARER client first message"}, /* key digit */
        {"n,,\x01"
         "k=\x01"
         "auth=Bearer a\x01\x01",
         "Invalid OAUTHBEARER client first message"}, /* empty value */
        {"n,,\x01"
         "k=\xc3\xa9\x01"
         "auth=Bearer a\x01\x01",
         "Invalid OAUTHBEARER client first message"},
        {"n,,\x01"
         "k=v\x01\x01",
         "Invalid OAUTHBEARER client first message: 'auth' not specified"},
        {"n,,\x01"
         "auth=Bearer\x01\x01",
         "Invalid OAUTHBEARER client first message: invalid 'auth' format"},
        {"n,,\x01"
         "auth=Bearer a+b\x01\x01",
         "Invalid OAUTHBEARER client first message: invalid 'auth' format"},
        {"n,,\x01"
         "auth=Basic abc\x01\x01",
         "Invalid scheme in OAUTHBEARER client first message"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        assert_int_equal(gr_oauth_parse_initial((const uint8_t *)bad[i].in, strlen(bad[i].in), &m, &why), -1);
        assert_string_equal(why, bad[i].why);
    }
    static const char nul[] = "n,,\x01"
                              "a=b\0c\x01"
                              "auth=Bearer a\x01\x01";
    assert_int_equal(gr_oauth_parse_initial((const uint8_t *)nul, sizeof nul - 1, &m, &why), -1);
}

static void base64url(void **state)
{
    (void)state;
    uint8_t out[16];
    assert_int_equal(gr_oauth_b64url_decode("", 0, out, sizeof out), 0);
    assert_int_equal(gr_oauth_b64url_decode("Zm9vYg", 6, out, sizeof out), 4);
    assert_memory_equal(out, "foob", 4);
    assert_int_equal(gr_oauth_b64url_decode("Zm9vYg==", 8, out, sizeof out), 4);
    assert_int_equal(gr_oauth_b64url_decode("-_8", 3, out, sizeof out), 2);
    assert_int_equal(out[0], 0xfb);
    assert_int_equal(out[1], 0xff);
    assert_int_equal(gr_oauth_b64url_decode("Zm9v+g", 6, out, sizeof out), -1); /* '+': not base64url */
    assert_int_equal(gr_oauth_b64url_decode("Zm9vY", 5, out, sizeof out), -1);  /* 4n+1 characters */
    assert_int_equal(gr_oauth_b64url_decode("Zm9vYmFy", 8, out, 5), -1);        /* no room */
}

static void unsecured_tokens(void **state)
{
    (void)state;
    struct gr_oauth_validator *v = unsecured_v(NULL, NULL, NULL);
    struct gr_oauth_result r;
    char claims[512];
    snprintf(claims, sizeof claims, "{\"sub\":\"alice\",\"iat\":%lld,\"exp\":%lld}", NOW_S - 10,
             NOW_S + 3600);
    assert_int_equal(check(v, unsecured(claims), &r), 0);
    assert_string_equal(r.principal, "alice");
    assert_int_equal(r.exp_ms, (NOW_S + 3600) * 1000);
    snprintf(claims, sizeof claims, "{\"sub\":\"alice\",\"exp\":%lld.5}", NOW_S + 1);
    assert_int_equal(check(v, unsecured(claims), &r), 0);
    assert_int_equal(r.exp_ms, (NOW_S + 1) * 1000 + 500);
    struct {
        const char *claims;
        const char *why;
    } bad[] = {
        {"{\"sub\":\"alice\",\"exp\":%lld}", "The indicated time"}, /* exp == now: on or after */
        {"{\"sub\":\"alice\"}", "No expiration time in JWT"},
        {"{\"sub\":\"alice\",\"exp\":\"9999999999\"}", "The 'exp' claim was not of type Number"},
        {"{\"exp\":%lld9}", "No principal name in JWT claim: sub"},
        {"{\"sub\":\"  \",\"exp\":%lld9}", "No principal name in JWT claim: sub"},
        {"{\"sub\":7,\"exp\":%lld9}", "No principal name in JWT claim: sub"},
        {"{\"sub\":\"a\",\"exp\":%lld9,\"iat\":99999999999}", "The Issued At value"},
        {"{\"sub\":\"a\",\"exp\":%lld,\"iat\":%lld}", "The indicated time"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(claims, sizeof claims, bad[i].claims, NOW_S, NOW_S);
        assert_int_equal(check(v, unsecured(claims), &r), -1);
        assert_string_equal(r.status, "invalid_token");
        assert_non_null(strstr(r.why, bad[i].why));
    }
    /* iat after exp, both valid on their own */
    snprintf(claims, sizeof claims, "{\"sub\":\"a\",\"exp\":%lld,\"iat\":%lld}", NOW_S + 3, NOW_S + 4);
    struct gr_oauth_validator *skewed = unsecured_v(NULL, NULL, "5000");
    assert_int_equal(check(skewed, unsecured(claims), &r), -1);
    assert_non_null(strstr(r.why, "was not after the Issued At time"));
    /* clock skew: exp 2 s ago passes with 5000 ms of skew, fails without */
    snprintf(claims, sizeof claims, "{\"sub\":\"a\",\"exp\":%lld}", NOW_S - 2);
    assert_int_equal(check(skewed, unsecured(claims), &r), 0);
    assert_int_equal(check(v, unsecured(claims), &r), -1);
    gr_oauth_validator_free(skewed);
    /* the header: alg must be none, no signature, no '..' */
    char h[64], c[256], tok[512];
    snprintf(claims, sizeof claims, "{\"sub\":\"a\",\"exp\":%lld}", NOW_S + 60);
    b64s(claims, c);
    b64s("{\"alg\":\"HS256\"}", h);
    snprintf(tok, sizeof tok, "%s.%s.", h, c);
    assert_int_equal(check(v, tok, &r), -1);
    assert_string_equal(r.why, "Unsecured JWS must have 'none' for an algorithm");
    b64s("{\"alg\":\"none\"}", h);
    snprintf(tok, sizeof tok, "%s.%s.c2ln", h, c);
    assert_int_equal(check(v, tok, &r), -1);
    assert_string_equal(r.why, "Unsecured JWS must not contain a digital signature");
    snprintf(tok, sizeof tok, "%s..", h);
    assert_int_equal(check(v, tok, &r), -1);
    snprintf(tok, sizeof tok, "%s.%s", h, c);
    assert_int_equal(check(v, tok, &r), -1);
    snprintf(tok, sizeof tok, "%s.%s..", h, c);
    assert_int_equal(check(v, tok, &r), -1);
    snprintf(tok, sizeof tok, "%s.%s.", h, "e30K!"); /* bad base64 */
    assert_int_equal(check(v, tok, &r), -1);
    b64s("[1,2]", c); /* JSON, not an object */
    snprintf(tok, sizeof tok, "%s.%s.", h, c);
    assert_int_equal(check(v, tok, &r), -1);
    b64s("{\"sub\":", c);
    snprintf(tok, sizeof tok, "%s.%s.", h, c);
    assert_int_equal(check(v, tok, &r), -1);
    gr_oauth_validator_free(v);
}

static void unsecured_claim_names_and_scope(void **state)
{
    (void)state;
    struct gr_oauth_validator *v = unsecured_v("principal", "read write", NULL);
    struct gr_oauth_result r;
    char claims[512];
    snprintf(claims, sizeof claims,
             "{\"sub\":\"x\",\"principal\":\"bob\",\"scope\":[\"write\",\" read \"],\"exp\":%lld}",
             NOW_S + 60);
    assert_int_equal(check(v, unsecured(claims), &r), 0);
    assert_string_equal(r.principal, "bob");
    snprintf(claims, sizeof claims, "{\"principal\":\"bob\",\"scope\":\"read\",\"exp\":%lld}", NOW_S + 60);
    assert_int_equal(check(v, unsecured(claims), &r), -1);
    assert_string_equal(r.status, "insufficient_scope");
    assert_string_equal(r.scope, "[read, write]");
    snprintf(claims, sizeof claims, "{\"principal\":\"bob\",\"exp\":%lld}", NOW_S + 60);
    assert_int_equal(check(v, unsecured(claims), &r), -1);
    assert_string_equal(r.status, "insufficient_scope");
    snprintf(claims, sizeof claims, "{\"sub\":\"bob\",\"scope\":[\"read\",\"write\"],\"exp\":%lld}",
             NOW_S + 60);
    assert_int_equal(check(v, unsecured(claims), &r), -1); /* no "principal" claim */
    assert_string_equal(r.status, "invalid_token");
    gr_oauth_validator_free(v);
    struct gr_oauth_options o = {0};
    char err[400];
    o.clock_skew = "-1";
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "unsecuredValidatorAllowableClockSkewMs"));
    o.clock_skew = NULL;
    o.principal_claim = "  ";
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "unsecuredValidatorPrincipalClaimName"));
}

/* ---- signed tokens ---- */

static char dir[64];
static char jwks_path[128], jwks_url[160];
static EVP_PKEY *rsa_key, *ec_key, *rsa_small;

static void put_bn(EVP_PKEY *k, const char *name, char *out)
{
    BIGNUM *bn = NULL;
    assert_int_equal(EVP_PKEY_get_bn_param(k, name, &bn), 1);
    uint8_t buf[1024];
    int n = BN_bn2bin(bn, buf);
    b64url(buf, (size_t)n, out);
    BN_free(bn);
}

static void ec_xy(EVP_PKEY *k, char *x, char *y)
{
    uint8_t pt[65];
    size_t n = 0;
    assert_int_equal(EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt, &n), 1);
    assert_int_equal(n, 65);
    b64url(pt + 1, 32, x);
    b64url(pt + 33, 32, y);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/gregor-oauth.XXXXXX");
    assert_non_null(mkdtemp(dir));
    rsa_key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    rsa_small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    ec_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(rsa_key);
    assert_non_null(ec_key);
    assert_non_null(rsa_small);
    static char n[600], e[16], n2[300], e2[16], x[64], y[64];
    put_bn(rsa_key, OSSL_PKEY_PARAM_RSA_N, n);
    put_bn(rsa_key, OSSL_PKEY_PARAM_RSA_E, e);
    put_bn(rsa_small, OSSL_PKEY_PARAM_RSA_N, n2);
    put_bn(rsa_small, OSSL_PKEY_PARAM_RSA_E, e2);
    ec_xy(ec_key, x, y);
    snprintf(jwks_path, sizeof jwks_path, "%s/jwks.json", dir);
    snprintf(jwks_url, sizeof jwks_url, "file://%s", jwks_path);
    FILE *f = fopen(jwks_path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"rsa1\",\"use\":\"sig\",\"alg\":\"RS256\",\"n\":\"%s\","
            "\"e\":\"%s\"},"
            "{\"kty\":\"EC\",\"kid\":\"ec1\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"},"
            "{\"kty\":\"RSA\",\"kid\":\"small\",\"n\":\"%s\",\"e\":\"%s\"},"
            "{\"kty\":\"oct\",\"kid\":\"hmac\",\"k\":\"c2VjcmV0\"}]}",
            n, e, x, y, n2, e2);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(rsa_key);
    EVP_PKEY_free(rsa_small);
    EVP_PKEY_free(ec_key);
    unlink(jwks_path);
    rmdir(dir);
    return 0;
}

/* A JWS of header `hdr` and claims `claims` signed with `k` (RSA: PKCS#1 v1.5 SHA-256; EC: ES256, R||S). */
static char *sign(const char *hdr, const char *claims, EVP_PKEY *k, int ec)
{
    static char tok[8192];
    char h[512], c[4096];
    b64s(hdr, h);
    b64s(claims, c);
    int n = snprintf(tok, sizeof tok, "%s.%s", h, c);
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    uint8_t sig[512];
    size_t sl = sizeof sig;
    assert_int_equal(EVP_DigestSignInit(m, NULL, EVP_sha256(), NULL, k), 1);
    assert_int_equal(EVP_DigestSign(m, sig, &sl, (const uint8_t *)tok, (size_t)n), 1);
    EVP_MD_CTX_free(m);
    uint8_t raw[64];
    if (ec) {
        const uint8_t *p = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)sl);
        assert_non_null(es);
        const BIGNUM *r, *s;
        ECDSA_SIG_get0(es, &r, &s);
        BN_bn2binpad(r, raw, 32);
        BN_bn2binpad(s, raw + 32, 32);
        ECDSA_SIG_free(es);
        memcpy(sig, raw, 64);
        sl = 64;
    }
    tok[n++] = '.';
    b64url(sig, sl, tok + n);
    return tok;
}

static struct gr_oauth_validator *signed_v(const char *aud, const char *iss, const char *sub_claim)
{
    struct gr_oauth_options o = {0};
    o.secured = 1;
    o.jwks_url = jwks_url;
    o.allowed_urls = jwks_url;
    o.expected_audience = aud;
    o.expected_issuer = iss;
    o.principal_claim = sub_claim;
    char err[400];
    struct gr_oauth_validator *v = gr_oauth_validator_new(&o, err, sizeof err);
    if (!v) fprintf(stderr, "%s\n", err);
    assert_non_null(v);
    return v;
}

static void signed_tokens(void **state)
{
    (void)state;
    struct gr_oauth_validator *v = signed_v("kafka,other", "https://issuer.example", NULL);
    struct gr_oauth_result r;
    char claims[512];
    snprintf(claims, sizeof claims,
             "{\"sub\":\"carol\",\"aud\":[\"x\",\"kafka\"],\"iss\":\"https://issuer.example\",\"iat\":%lld,"
             "\"exp\":%lld}",
             NOW_S, NOW_S + 600);
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0), &r), 0);
    assert_string_equal(r.principal, "carol");
    assert_int_equal(r.exp_ms, (NOW_S + 600) * 1000);
    assert_int_equal(check(v, sign("{\"alg\":\"ES256\",\"kid\":\"ec1\"}", claims, ec_key, 1), &r), 0);
    assert_string_equal(r.principal, "carol");
    /* a flipped signature byte */
    char *t = sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0);
    size_t tl = strlen(t);
    t[tl - 5] = t[tl - 5] == 'A' ? 'B' : 'A';
    assert_int_equal(check(v, t, &r), -1);
    assert_string_equal(r.status, "invalid_token");
    assert_non_null(strstr(r.why, "does not verify"));
    t = sign("{\"alg\":\"ES256\",\"kid\":\"ec1\"}", claims, ec_key, 1);
    tl = strlen(t);
    t[tl - 3] = t[tl - 3] == 'A' ? 'B' : 'A';
    assert_int_equal(check(v, t, &r), -1);
    /* a signature by another key under a known kid */
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_small, 0), &r), -1);
    /* unknown kid, no kid, a key of the wrong type, a too small RSA key, unsupported algorithms */
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"nope\"}", claims, rsa_key, 0), &r), -1);
    assert_non_null(strstr(r.why, "no JWKS key for the token's kid 'nope'"));
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\"}", claims, rsa_key, 0), &r), -1);
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"ec1\"}", claims, rsa_key, 0), &r), -1);
    assert_int_equal(check(v, sign("{\"alg\":\"ES256\",\"kid\":\"rsa1\"}", claims, ec_key, 1), &r), -1);
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"small\"}", claims, rsa_small, 0), &r), -1);
    assert_int_equal(check(v, sign("{\"alg\":\"HS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0), &r), -1);
    assert_non_null(strstr(r.why, "'HS256' is not accepted"));
    assert_int_equal(check(v, unsecured(claims), &r), -1); /* alg none */
    /* claims */
    struct {
        const char *claims;
        const char *why;
    } bad[] = {
        {"{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld}",
         NULL},
        {"{\"sub\":\"c\",\"aud\":\"kafkaX\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld}",
         "Audience (aud) claim does not hold"},
        {"{\"sub\":\"c\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld}",
         "Audience (aud) claim is missing"},
        {"{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://evil.example\",\"iat\":%lld,\"exp\":%lld}",
         "Issuer"},
        {"{\"sub\":\"c\",\"aud\":\"kafka\",\"iat\":%lld,\"exp\":%lld}", "Issuer"},
        {"{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld1}",
         NULL},
        {"{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"iat\":%lld}",
         "No expiration time"},
        {"{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"exp\":%lld9}",
         "No Issued At"},
        {"{\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld}",
         "No principal name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(claims, sizeof claims, bad[i].claims, NOW_S, NOW_S + 600);
        int rc = check(v, sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0), &r);
        if (!bad[i].why) {
            assert_int_equal(rc, 0);
            continue;
        }
        assert_int_equal(rc, -1);
        assert_string_equal(r.status, "invalid_token");
        if (!strstr(r.why, bad[i].why)) fail_msg("case %zu: '%s' lacks '%s'", i, r.why, bad[i].why);
    }
    /* expired: 31 s ago is past the default 30 s of skew, 29 s ago is not */
    snprintf(claims, sizeof claims,
             "{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld}",
             NOW_S - 100, NOW_S - 31);
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0), &r), -1);
    assert_non_null(strstr(r.why, "Expiration Time"));
    snprintf(claims, sizeof claims,
             "{\"sub\":\"c\",\"aud\":\"kafka\",\"iss\":\"https://issuer.example\",\"iat\":%lld,\"exp\":%lld}",
             NOW_S - 100, NOW_S - 29);
    assert_int_equal(check(v, sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0), &r), 0);
    gr_oauth_validator_free(v);
    /* sasl.oauthbearer.sub.claim.name; no audience or issuer expected */
    v = signed_v(NULL, NULL, "client_id");
    snprintf(claims, sizeof claims, "{\"sub\":\"c\",\"client_id\":\" svc-1\\t\",\"iat\":%lld,\"exp\":%lld}",
             NOW_S, NOW_S + 60);
    assert_int_equal(check(v, sign("{\"alg\":\"ES256\",\"kid\":\"ec1\"}", claims, ec_key, 1), &r), 0);
    assert_string_equal(r.principal, "svc-1"); /* trimmed, as Kafka's validateClaimSubject */
    gr_oauth_validator_free(v);
}

static void signed_settings(void **state)
{
    (void)state;
    struct gr_oauth_options o = {0};
    char err[400];
    o.secured = 1;
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "sasl.oauthbearer.jwks.endpoint.url is not set"));
    o.jwks_url = jwks_url; /* not allowed: Kafka 4.x's empty default allows no URL */
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "org.apache.kafka.sasl.oauthbearer.allowed.urls"));
    o.allowed_urls = "file:///other, file:///x";
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    char list[400];
    snprintf(list, sizeof list, "file:///other , %s", jwks_url);
    o.allowed_urls = list;
    struct gr_oauth_validator *v = gr_oauth_validator_new(&o, err, sizeof err);
    assert_non_null(v);
    gr_oauth_validator_free(v);
    o.jwks_url = o.allowed_urls = "ftp://idp.example/jwks"; /* http(s): compat-tests/oauth fetches one */
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "is not a file: URL with an absolute path, nor an http:// or https:// URL"));
    /* a file that is not a JWKS, and one larger than the bound */
    char path[200], url[220];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    snprintf(url, sizeof url, "file:%s", path);
    FILE *f = fopen(path, "w");
    fputs("{\"keys\":{}}", f);
    fclose(f);
    o.jwks_url = o.allowed_urls = url;
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "is not a JWKS"));
    f = fopen(path, "w");
    fputs("{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"k\",\"n\":\"!!\",\"e\":\"AQAB\"}]}", f);
    fclose(f);
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "no usable signing key"));
    f = fopen(path, "w");
    for (int i = 0; i < GR_OAUTH_JWKS_MAX / 8 + 1; i++)
        fputs("        ", f);
    fclose(f);
    assert_null(gr_oauth_validator_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "larger than"));
    unlink(path);
}

/* ---- the mechanism ---- */

struct step {
    enum gr_sasl_step_rc rc;
    char out[512];
    size_t out_len;
    char principal[1100];
    char err[512];
    int64_t life;
};

static struct step step(struct gr_sasl_exchange *x, const char *in, size_t len)
{
    const struct gr_sasl_mech *m = &gr_sasl_mech_oauthbearer;
    struct step r;
    memset(&r, 0, sizeof r);
    uint8_t *out = NULL;
    r.rc = m->step(x, (const uint8_t *)in, len, &out, &r.out_len, r.principal, sizeof r.principal, &r.life,
                   r.err, sizeof r.err);
    if (out) {
        assert_true(r.out_len < sizeof r.out);
        memcpy(r.out, out, r.out_len);
    }
    free(out);
    return r;
}

static struct step step_tok(struct gr_sasl_exchange *x, const char *authzid, const char *tok)
{
    static char buf[10000];
    int n = snprintf(buf, sizeof buf,
                     "n,%s%s,\x01"
                     "auth=Bearer %s\x01\x01",
                     authzid ? "a=" : "", authzid ? authzid : "", tok);
    return step(x, buf, (size_t)n);
}

static void exchange(void **state)
{
    (void)state;
    const struct gr_sasl_mech *m = &gr_sasl_mech_oauthbearer;
    assert_string_equal(m->name, "OAUTHBEARER");
    struct gr_config cfg;
    gr_config_init(&cfg);
    char err[600];
    assert_null(m->listener_new(&cfg, "SP", err, sizeof err));
    assert_non_null(strstr(err, "listener.name.sp.oauthbearer.sasl.jaas.config is not set"));
    assert_int_equal(gr_config_set(&cfg, "listener.name.sp.oauthbearer.sasl.jaas.config",
                                   "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
                     0);
    assert_null(m->listener_new(&cfg, "SP", err, sizeof err));
    assert_non_null(
        strstr(err, "OAUTHBEARER needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"));
    assert_int_equal(
        gr_config_set(&cfg, "listener.name.sp.oauthbearer.sasl.jaas.config",
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                      "unsecuredValidatorRequiredScope=\"produce\";"),
        0);
    assert_int_equal(gr_config_set(&cfg, "listener.name.sp.oauthbearer.sasl.server.callback.handler.class",
                                   "com.example.Handler"),
                     0);
    assert_null(m->listener_new(&cfg, "SP", err, sizeof err));
    assert_non_null(strstr(err, "'com.example.Handler' is not a handler"));
    assert_int_equal(
        gr_config_set(&cfg, "listener.name.sp.oauthbearer.sasl.server.callback.handler.class",
                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"),
        0);
    assert_null(m->listener_new(&cfg, "SP", err, sizeof err)); /* no JWKS URL */
    assert_non_null(strstr(err, "sasl.oauthbearer.jwks.endpoint.url is not set"));
    assert_int_equal(gr_config_set(&cfg, "sasl.oauthbearer.jwks.endpoint.url", jwks_url), 0);
    assert_int_equal(gr_config_set(&cfg, "org.apache.kafka.sasl.oauthbearer.allowed.urls", jwks_url), 0);
    /* a per-listener key wins over the broker-wide one (Kafka's listener.name.<l>.<mechanism>. prefix) */
    assert_int_equal(gr_config_set(&cfg, "sasl.oauthbearer.expected.issuer", "https://all"), 0);
    assert_string_equal(gr_config_sasl_option(&cfg, "SP", "OAUTHBEARER", "sasl.oauthbearer.expected.issuer"),
                        "https://all");
    assert_int_equal(
        gr_config_set(&cfg, "listener.name.sp.oauthbearer.sasl.oauthbearer.expected.issuer", "https://sp"),
        0);
    assert_string_equal(gr_config_sasl_option(&cfg, "SP", "OAUTHBEARER", "sasl.oauthbearer.expected.issuer"),
                        "https://sp");
    assert_string_equal(
        gr_config_sasl_option(&cfg, "OTHER", "OAUTHBEARER", "sasl.oauthbearer.expected.issuer"),
        "https://all");
    assert_null(gr_config_sasl_option(&cfg, "SP", "OAUTHBEARER", "sasl.oauthbearer.expected.audience"));
    void *sctx = m->listener_new(&cfg, "SP", err, sizeof err);
    assert_non_null(sctx);
    assert_int_equal(gr_config_set(&cfg, "listener.name.sp.oauthbearer.sasl.server.callback.handler.class",
                                   "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                                   "OAuthBearerUnsecuredValidatorCallbackHandler"),
                     0);
    void *ctx = m->listener_new(&cfg, "SP", err, sizeof err);
    assert_non_null(ctx);

    int64_t now_s = gr_time_wall_ms() / 1000;
    char claims[256];
    snprintf(claims, sizeof claims, "{\"sub\":\"alice\",\"scope\":\"produce\",\"exp\":%lld}",
             (long long)now_s + 100);
    char good[1024];
    snprintf(good, sizeof good, "%s", unsecured(claims));
    /* success: User:alice, lifetime bounded by exp (at most 100 s) */
    struct gr_sasl_exchange *x = m->start_listener(NULL, ctx);
    struct step r = step_tok(x, NULL, good);
    assert_int_equal(r.rc, GR_SASL_DONE);
    assert_string_equal(r.principal, "User:alice");
    assert_int_equal(r.out_len, 0);
    assert_true(r.life > 50000 && r.life <= 100000); /* exp - now: generous below, for a stalled machine */
    assert_int_equal(step_tok(x, NULL, good).rc, GR_SASL_FAIL); /* a step after DONE */
    m->free(x);
    /* authzid equal to the principal, then different */
    x = m->start_listener(NULL, ctx);
    assert_int_equal(step_tok(x, "alice", good).rc, GR_SASL_DONE);
    m->free(x);
    x = m->start_listener(NULL, ctx);
    r = step_tok(x, "bob", good);
    assert_int_equal(r.rc, GR_SASL_FAIL);
    assert_string_equal(r.err, "Authentication failed: Client requested an authorization id (bob) that is "
                               "different from the token's principal name (alice)");
    m->free(x);
    /* a refused token: the JSON challenge, then \x01 fails with it */
    snprintf(claims, sizeof claims, "{\"sub\":\"alice\",\"scope\":\"produce\",\"exp\":%lld}",
             (long long)now_s - 5);
    x = m->start_listener(NULL, ctx);
    r = step_tok(x, NULL, unsecured(claims));
    assert_int_equal(r.rc, GR_SASL_CONTINUE);
    assert_int_equal(r.out_len, strlen("{\"status\":\"invalid_token\"}"));
    assert_memory_equal(r.out, "{\"status\":\"invalid_token\"}", r.out_len);
    r = step(x, "\x01", 1);
    assert_int_equal(r.rc, GR_SASL_FAIL);
    assert_string_equal(r.err, "{\"status\":\"invalid_token\"}");
    m->free(x);
    /* missing scope: insufficient_scope with the required scope */
    snprintf(claims, sizeof claims, "{\"sub\":\"alice\",\"exp\":%lld}", (long long)now_s + 100);
    x = m->start_listener(NULL, ctx);
    r = step_tok(x, NULL, unsecured(claims));
    assert_int_equal(r.rc, GR_SASL_CONTINUE);
    assert_memory_equal(r.out, "{\"status\":\"insufficient_scope\", \"scope\":\"[produce]\"}", r.out_len);
    /* another initial response after the error is taken afresh (Kafka's evaluateResponse) */
    r = step_tok(x, NULL, good);
    assert_int_equal(r.rc, GR_SASL_DONE);
    m->free(x);
    /* malformed: the generic message (empty err) */
    x = m->start_listener(NULL, ctx);
    r = step(x,
             "n,,\x01"
             "auth=Basic abc\x01\x01",
             22);
    assert_int_equal(r.rc, GR_SASL_FAIL);
    assert_string_equal(r.err, "");
    m->free(x);
    x = m->start_listener(NULL, ctx);
    assert_int_equal(step(x, "\x01", 1).rc, GR_SASL_FAIL); /* \x01 with no error before it */
    m->free(x);
    /* the secured listener refuses the unsecured token with invalid_token */
    x = m->start_listener(NULL, sctx);
    r = step_tok(x, NULL, good);
    assert_int_equal(r.rc, GR_SASL_CONTINUE);
    assert_memory_equal(r.out, "{\"status\":\"invalid_token\"}", r.out_len);
    m->free(x);
    m->listener_free(ctx);
    m->listener_free(sctx);
    gr_config_free(&cfg);
}

/* Seeded random mutations of valid tokens and initial responses: never a crash, never a success with an
 * empty principal; the unmutated inputs still pass (so the loop exercised the accepting path). */
static void mutations(void **state)
{
    (void)state;
    struct gr_oauth_validator *uv = unsecured_v(NULL, NULL, NULL);
    struct gr_oauth_validator *sv = signed_v(NULL, NULL, NULL);
    char claims[256], base[3][8192];
    snprintf(claims, sizeof claims, "{\"sub\":\"alice\",\"iat\":%lld,\"exp\":%lld,\"scope\":[\"a\",\"b\"]}",
             NOW_S, NOW_S + 60);
    snprintf(base[0], sizeof base[0], "%s", unsecured(claims));
    snprintf(base[1], sizeof base[1], "%s", sign("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", claims, rsa_key, 0));
    snprintf(base[2], sizeof base[2], "%s", sign("{\"alg\":\"ES256\",\"kid\":\"ec1\"}", claims, ec_key, 1));
    struct gr_oauth_result r;
    assert_int_equal(check(uv, base[0], &r), 0);
    assert_int_equal(check(sv, base[1], &r), 0);
    assert_int_equal(check(sv, base[2], &r), 0);
    static const char alphabet[] = "AZaz09-_.=+/\x01 {}\":,";
    uint32_t seed = 20261204;
    int accepted = 0;
    for (int i = 0; i < 3000; i++) {
        char t[8192];
        int which = i % 3;
        size_t n = strlen(base[which]);
        memcpy(t, base[which], n + 1);
        int edits = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 4;
        for (int e = 0; e < edits; e++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % (n ? n : 1);
            int op = (int)(seed >> 4) % 3;
            if (op == 0 && n)
                t[at] = alphabet[(seed >> 12) % (sizeof alphabet - 1)];
            else if (op == 1 && n)
                n = at;                  /* truncate */
            else if (n < sizeof t - 2) { /* insert */
                memmove(t + at + 1, t + at, n - at);
                t[at] = alphabet[(seed >> 12) % (sizeof alphabet - 1)];
                n++;
            }
            t[n] = 0;
        }
        int rc = gr_oauth_validate(which ? sv : uv, t, n, NOW_MS, &r);
        assert_true(rc == 0 || rc == -1);
        if (rc == 0) {
            assert_true(r.principal[0] != 0);
            if (which) { /* signed: the signed bytes are as they were */
                size_t signed_len = (size_t)(strrchr(base[which], '.') - base[which]);
                assert_true(n > signed_len);
                assert_memory_equal(t, base[which], signed_len + 1);
            }
            accepted++;
        } else {
            assert_non_null(r.status);
        }
        struct gr_oauth_initial m;
        const char *why;
        (void)gr_oauth_parse_initial((const uint8_t *)t, n, &m, &why);
    }
    assert_true(accepted < 3000);
    gr_oauth_validator_free(uv);
    gr_oauth_validator_free(sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_initial),    cmocka_unit_test(base64url),
        cmocka_unit_test(unsecured_tokens), cmocka_unit_test(unsecured_claim_names_and_scope),
        cmocka_unit_test(signed_tokens),    cmocka_unit_test(signed_settings),
        cmocka_unit_test(exchange),         cmocka_unit_test(mutations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
