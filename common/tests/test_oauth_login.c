/* test_oauth_login.c: the OAUTHBEARER login's unsecured JWS (common/oauth_login.h): the options Kafka's
 * OAuthBearerUnsecuredLoginCallbackHandler takes, and the token decoded back (header, claims, iat/exp). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/oauth_login.h"

/* Decodes base64url (no padding) `in` (`n` bytes) into a NUL-terminated string in `out`. */
static void b64url_decode(const char *in, size_t n, char *out, size_t cap)
{
    char tmp[4096];
    assert_true(n + 4 < sizeof tmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(in[i] != '+' && in[i] != '/' && in[i] != '=');
        tmp[k++] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
    }
    size_t pad = 0;
    while (k % 4)
        tmp[k++] = '=', pad++;
    int w = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)tmp, (int)k);
    assert_true(w >= (int)pad && (size_t)w < cap);
    out[(size_t)w - pad] = 0; /* EVP_DecodeBlock counts the padding as zero bytes */
}

/* Splits token "h.c." and decodes header and claims as JSON. */
static void decode(const char *tok, json_t **hdr, json_t **claims)
{
    const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    assert_non_null(d2);
    assert_string_equal(d2, "."); /* an empty signature */
    char h[4096], c[4096];
    b64url_decode(tok, (size_t)(d1 - tok), h, sizeof h);
    b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), c, sizeof c);
    *hdr = json_loads(h, 0, NULL);
    *claims = json_loads(c, 0, NULL);
    assert_non_null(*hdr);
    assert_non_null(*claims);
}

static void token_has_claims_iat_exp(void **state)
{
    (void)state;
    struct gr_oauth_login *l = gr_oauth_login_new();
    char err[512];
    assert_int_equal(
        gr_oauth_login_option(l, "unsecuredLoginStringClaim_sub", "broker \"1\"", err, sizeof err), 0);
    assert_int_equal(gr_oauth_login_option(l, "unsecuredLoginLifetimeSeconds", "30", err, sizeof err), 0);
    assert_int_equal(gr_oauth_login_option(l, "unsecuredLoginNumberClaim_n", "-1.5e3", err, sizeof err), 0);
    assert_int_equal(gr_oauth_login_option(l, "unsecuredLoginListClaim_scope", "|a||b c|", err, sizeof err),
                     0);
    assert_int_equal(gr_oauth_login_option(l, "unsecuredValidatorRequiredScope", "a", err, sizeof err), 1);
    assert_int_equal(gr_oauth_login_check(l, err, sizeof err), 0);
    assert_string_equal(gr_oauth_login_principal(l), "broker \"1\"");
    char tok[GR_OAUTH_LOGIN_TOKEN_MAX + 1];
    int n = gr_oauth_login_token(l, 1700000000123LL, tok, sizeof tok);
    assert_true(n > 0 && (size_t)n == strlen(tok));
    json_t *h, *c;
    decode(tok, &h, &c);
    assert_string_equal(json_string_value(json_object_get(h, "alg")), "none");
    assert_int_equal(json_object_size(h), 1);
    assert_string_equal(json_string_value(json_object_get(c, "sub")), "broker \"1\"");
    assert_true(json_number_value(json_object_get(c, "iat")) == 1700000000.123);
    assert_true(json_number_value(json_object_get(c, "exp")) == 1700000030.123);
    assert_true(json_number_value(json_object_get(c, "n")) == -1500.0);
    json_t *sc = json_object_get(c, "scope");
    assert_int_equal(json_array_size(sc), 2);
    assert_string_equal(json_string_value(json_array_get(sc, 0)), "a");
    assert_string_equal(json_string_value(json_array_get(sc, 1)), "b c");
    json_decref(h);
    json_decref(c);
    /* a small buffer: refused, never overrun */
    char small[20];
    assert_int_equal(gr_oauth_login_token(l, 1700000000123LL, small, sizeof small), -1);
    gr_oauth_login_free(l);
}

static void bad_options_refused(void **state)
{
    (void)state;
    struct gr_oauth_login *l = gr_oauth_login_new();
    char err[512];
    const char *bad[][2] = {{"unsecuredLoginStringClaim_exp", "1"},  {"unsecuredLoginNumberClaim_x", "1e"},
                            {"unsecuredLoginNumberClaim_y", "0x10"}, {"unsecuredLoginListClaim_z", ""},
                            {"unsecuredLoginLifetimeSeconds", "0"},  {"unsecuredLoginLifetimeSeconds", "5s"},
                            {"unsecuredLoginExtension_t", "v"},      {"unsecuredLoginStringClaim_", "v"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(gr_oauth_login_option(l, bad[i][0], bad[i][1], err, sizeof err), -1);
        assert_non_null(strstr(err, bad[i][0]));
    }
    /* no principal claim: refused at check, naming the option to set */
    assert_int_equal(gr_oauth_login_check(l, err, sizeof err), -1);
    assert_non_null(strstr(err, "unsecuredLoginStringClaim_sub"));
    assert_int_equal(gr_oauth_login_option(l, "unsecuredLoginPrincipalClaimName", "who", err, sizeof err), 0);
    assert_int_equal(gr_oauth_login_option(l, "unsecuredLoginStringClaim_who", "b", err, sizeof err), 0);
    assert_int_equal(gr_oauth_login_option(l, "unsecuredLoginStringClaim_who", "c", err, sizeof err), -1);
    assert_int_equal(gr_oauth_login_check(l, err, sizeof err), 0);
    assert_string_equal(gr_oauth_login_principal(l), "b");
    gr_oauth_login_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(token_has_claims_iat_exp),
        cmocka_unit_test(bad_options_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
