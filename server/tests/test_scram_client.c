/*
 * test_scram_client.c: the SCRAM client (common/scram_client.h) against RFC 7677's exchange byte for byte,
 * and against Gregor's own server mechanism (server/sasl_scram.h) for SHA-256 and SHA-512: a right password
 * authenticates and the server's signature verifies; a wrong password is refused by the server; a server
 * that does not know the credential (a signature from other keys) is refused by the client; each malformed
 * or out-of-bounds server message (nonce not extending the client's, iterations below 4096 or above 16384,
 * a salt over 256 bytes, a token over GR_SCRAM_CLIENT_TOKEN_MAX, "e=" errors) fails with a reason.
 * It sits in server/tests because it needs the server mechanism; the client itself is common/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "common/scram_client.h"
#include "server/sasl_scram.h"
#include "server/scram_store.h"

static void add_user(struct gr_scram_store *s, const char *name, const char *password, int mech)
{
    const uint8_t salt[] = "0123456789abcdef";
    uint8_t salted[64];
    size_t dl = gr_scram_digest_len(mech);
    assert_int_equal(PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, 16, 4096,
                                       mech == GR_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512(), (int)dl,
                                       salted),
                     1);
    assert_int_equal(gr_scram_store_upsert(s, name, strlen(name), mech, 4096, salt, 16, salted, dl), 0);
}

static void rfc7677_client(void **state)
{
    (void)state;
    struct gr_scram_client *c = gr_scram_client_new(false, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
    assert_non_null(c);
    size_t n;
    const char *first = gr_scram_client_first(c, &n);
    assert_string_equal(first, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    assert_int_equal(n, strlen(first));
    const char *sf = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    char out[GR_SCRAM_CLIENT_FINAL_MAX], err[256];
    size_t ol = 0;
    assert_int_equal(
        gr_scram_client_final(c, (const uint8_t *)sf, strlen(sf), out, sizeof out, &ol, err, sizeof err), 0);
    assert_string_equal(out, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
                             "Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    assert_int_equal(ol, strlen(out));
    const char *bad = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G8=";
    const char *good = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    assert_int_equal(gr_scram_client_verify(c, (const uint8_t *)good, strlen(good), err, sizeof err), 0);
    gr_scram_client_free(c);
    /* the same exchange with a signature one bit off: refused */
    c = gr_scram_client_new(false, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
    gr_scram_client_first(c, &n);
    assert_int_equal(
        gr_scram_client_final(c, (const uint8_t *)sf, strlen(sf), out, sizeof out, &ol, err, sizeof err), 0);
    assert_int_equal(gr_scram_client_verify(c, (const uint8_t *)bad, strlen(bad), err, sizeof err), -1);
    assert_non_null(strstr(err, "signature does not verify"));
    gr_scram_client_free(c);
}

/* One exchange between the client and the server mechanism. Returns 0 when both sides succeed; 1 when the
 * server refused the proof; 2 when the client refused the server's signature. */
static int exchange(struct gr_scram_store *store, int mech, const char *user, const char *password)
{
    const struct gr_sasl_mech *m =
        mech == GR_SCRAM_SHA_256 ? &gr_sasl_mech_scram_sha256 : &gr_sasl_mech_scram_sha512;
    struct gr_sasl_exchange *x = gr_scram_exchange_new(store, mech, NULL);
    struct gr_scram_client *c = gr_scram_client_new(mech == GR_SCRAM_SHA_512, user, password, NULL);
    assert_non_null(x);
    assert_non_null(c);
    size_t n;
    const char *first = gr_scram_client_first(c, &n);
    uint8_t *out = NULL;
    size_t out_len = 0;
    int64_t life;
    char principal[256], err[256];
    assert_int_equal(m->step(x, (const uint8_t *)first, n, &out, &out_len, principal, sizeof principal, &life,
                             err, sizeof err),
                     GR_SASL_CONTINUE);
    char fin[GR_SCRAM_CLIENT_FINAL_MAX];
    size_t fl;
    assert_int_equal(gr_scram_client_final(c, out, out_len, fin, sizeof fin, &fl, err, sizeof err), 0);
    free(out);
    out = NULL;
    enum gr_sasl_step_rc rc = m->step(x, (const uint8_t *)fin, fl, &out, &out_len, principal,
                                      sizeof principal, &life, err, sizeof err);
    int result = 1;
    if (rc == GR_SASL_DONE) {
        char want[300];
        snprintf(want, sizeof want, "User:%s", user);
        assert_string_equal(principal, want);
        result = gr_scram_client_verify(c, out, out_len, err, sizeof err) == 0 ? 0 : 2;
    }
    free(out);
    m->free(x);
    gr_scram_client_free(c);
    return result;
}

static void against_server(void **state)
{
    (void)state;
    struct gr_scram_store s = {0}, other = {0};
    add_user(&s, "broker", "s3cret", GR_SCRAM_SHA_256);
    add_user(&s, "broker", "s3cret-512", GR_SCRAM_SHA_512);
    add_user(&s, "a,b=c", "pw", GR_SCRAM_SHA_512); /* escaped name: =2C, =3D */
    assert_int_equal(exchange(&s, GR_SCRAM_SHA_256, "broker", "s3cret"), 0);
    assert_int_equal(exchange(&s, GR_SCRAM_SHA_512, "broker", "s3cret-512"), 0);
    assert_int_equal(exchange(&s, GR_SCRAM_SHA_512, "a,b=c", "pw"), 0);
    assert_int_equal(exchange(&s, GR_SCRAM_SHA_256, "broker", "wrong"), 1);
    assert_int_equal(exchange(&s, GR_SCRAM_SHA_512, "broker", "s3cret"), 1); /* the 256 password */
    assert_int_equal(exchange(&s, GR_SCRAM_SHA_256, "nobody", "s3cret"), 1);
    gr_scram_store_clear(&s);
    gr_scram_store_clear(&other);
}

/* A server-first message `sf` given to a fresh client with nonce "abc": returns the result, reason in err. */
static int first_answer(const char *sf, size_t len, char *err, size_t cap)
{
    struct gr_scram_client *c = gr_scram_client_new(true, "u", "p", "abc");
    size_t n;
    gr_scram_client_first(c, &n);
    char out[GR_SCRAM_CLIENT_FINAL_MAX];
    size_t ol;
    int rc = gr_scram_client_final(c, (const uint8_t *)sf, len, out, sizeof out, &ol, err, cap);
    gr_scram_client_free(c);
    return rc;
}

static void malformed_server(void **state)
{
    (void)state;
    char err[256];
    const char *ok = "r=abcXYZ,s=c2FsdA==,i=4096";
    assert_int_equal(first_answer(ok, strlen(ok), err, sizeof err), 0);
    struct {
        const char *msg, *why;
    } cases[] = {
        {"r=xyzXYZ,s=c2FsdA==,i=4096", "does not extend"},
        {"r=abc,s=c2FsdA==,i=4096", "does not extend"}, /* no server part */
        {"r=abcXYZ,s=c2FsdA==,i=4095", "iteration"},
        {"r=abcXYZ,s=c2FsdA==,i=16385", "iteration"},
        {"r=abcXYZ,s=c2FsdA==,i=99999999999999999999", "iteration"},
        {"r=abcXYZ,s=c2FsdA==,i=", "iteration"},
        {"r=abcXYZ,s=c2FsdA==,i=4x96", "iteration"},
        {"r=abcXYZ,s=c2Fsd,i=4096", "salt"},
        {"r=abcXYZ,s=,i=4096", "salt"},
        {"r=abcXYZ,i=4096", "malformed"},
        {"s=c2FsdA==,i=4096,r=abcXYZ", "malformed"},
        {"e=other-error", "error"},
        {"", "malformed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        assert_int_equal(first_answer(cases[i].msg, strlen(cases[i].msg), err, sizeof err), -1);
        if (!strstr(err, cases[i].why)) fail_msg("case %zu: '%s' gave '%s'", i, cases[i].msg, err);
    }
    /* a salt of 300 bytes (400 base64 characters) and a token over the cap */
    char big[GR_SCRAM_CLIENT_TOKEN_MAX + 64];
    int o = snprintf(big, sizeof big, "r=abcXYZ,s=");
    for (int i = 0; i < 400; i++)
        big[o++] = 'A';
    o += snprintf(big + o, sizeof big - (size_t)o, ",i=4096");
    assert_int_equal(first_answer(big, (size_t)o, err, sizeof err), -1);
    assert_non_null(strstr(err, "salt"));
    memset(big, 'a', sizeof big);
    memcpy(big, "r=abc", 5);
    assert_int_equal(first_answer(big, GR_SCRAM_CLIENT_TOKEN_MAX + 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "too long"));
    /* server-final "e=": the reason is quoted, bounded */
    struct gr_scram_client *c = gr_scram_client_new(true, "u", "p", "abc");
    size_t n, ol;
    gr_scram_client_first(c, &n);
    char out[GR_SCRAM_CLIENT_FINAL_MAX];
    assert_int_equal(
        gr_scram_client_final(c, (const uint8_t *)ok, strlen(ok), out, sizeof out, &ol, err, sizeof err), 0);
    assert_int_equal(gr_scram_client_verify(c, (const uint8_t *)"e=invalid-proof", 15, err, sizeof err), -1);
    assert_non_null(strstr(err, "invalid-proof"));
    gr_scram_client_free(c);
    /* bad arguments */
    assert_null(gr_scram_client_new(false, "", "p", NULL));
    assert_null(gr_scram_client_new(false, "u", "", NULL));
    assert_null(gr_scram_client_new(false, "u", "p", "a,b"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rfc7677_client),
        cmocka_unit_test(against_server),
        cmocka_unit_test(malformed_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
