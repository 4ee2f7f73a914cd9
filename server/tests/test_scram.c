/*
 * test_scram.c: the SCRAM server mechanisms (server/sasl_scram.h) and the credential store
 * (server/scram_store.h). RFC 7677's SCRAM-SHA-256 exchange byte for byte (user "user", password "pencil",
 * its nonces and salt); a SCRAM-SHA-512 exchange computed with Python's hashlib/hmac (the same script
 * reproduces RFC 7677's messages exactly); a wrong proof and an unknown user fail alike, at the same step,
 * with the same message; each malformed client-first and client-final message is refused; saslname escapes,
 * extensions and tokenauth; the store's file across a reload, and a damaged or truncated file refused;
 * Kafka's upsertion checks (ScramControlManager.validateUpsertion).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "protocol/errors.h"
#include "server/sasl_scram.h"
#include "server/scram_store.h"
#include "server/security_etcd.h"

static const char *GENERIC256 = "Authentication failed during authentication due to invalid credentials with "
                                "SASL mechanism SCRAM-SHA-256";

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++)
        sscanf(h + 2 * i, "%2hhx", &out[i]);
    return n;
}

/* RFC 7677 section 3: salt, iterations; the salted password Hi("pencil", salt, 4096). */
static void add_rfc_user(struct gr_scram_store *s, const char *name)
{
    uint8_t salt[32], salted[32];
    int sl = gr_scram_unb64("W22ZaJ0SNY7soEsUEjb6gQ==", 24, salt, sizeof salt);
    assert_int_equal(sl, 16);
    unhex("c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d", salted);
    assert_int_equal(
        gr_scram_store_upsert(s, name, strlen(name), GR_SCRAM_SHA_256, 4096, salt, (size_t)sl, salted, 32),
        0);
}

struct step {
    enum gr_sasl_step_rc rc;
    char out[4096];
    char principal[256];
    char err[256];
};

static struct step step(struct gr_sasl_exchange *x, const struct gr_sasl_mech *m, const char *in, size_t len)
{
    struct step r;
    memset(&r, 0, sizeof r);
    uint8_t *out = (uint8_t *)"junk";
    size_t out_len = 99;
    int64_t life = -1;
    r.rc = m->step(x, (const uint8_t *)in, len, &out, &out_len, r.principal, sizeof r.principal, &life, r.err,
                   sizeof r.err);
    if (r.rc == GR_SASL_FAIL) {
        assert_null(out);
        assert_int_equal(out_len, 0);
    } else {
        assert_true(out_len < sizeof r.out);
        memcpy(r.out, out, out_len);
        assert_int_equal(life, 0);
    }
    free(out);
    return r;
}

static struct step step_s(struct gr_sasl_exchange *x, const struct gr_sasl_mech *m, const char *in)
{
    return step(x, m, in, strlen(in));
}

static void rfc7677_sha256(void **state)
{
    (void)state;
    struct gr_scram_store s = {0};
    add_rfc_user(&s, "user");
    const struct gr_sasl_mech *m = &gr_sasl_mech_scram_sha256;
    assert_string_equal(m->name, "SCRAM-SHA-256");
    struct gr_sasl_exchange *x =
        gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
    assert_non_null(x);
    struct step r = step_s(x, m, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    assert_int_equal(r.rc, GR_SASL_CONTINUE);
    assert_string_equal(
        r.out, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
    r = step_s(x, m,
               "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
               "Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    assert_int_equal(r.rc, GR_SASL_DONE);
    assert_string_equal(r.out, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    assert_string_equal(r.principal, "User:user");
    r = step_s(x, m, "c=biws"); /* a step after DONE */
    assert_int_equal(r.rc, GR_SASL_FAIL);
    m->free(x);
    gr_scram_store_clear(&s);
}

/* Computed with Python hashlib.pbkdf2_hmac / hmac (salt "QSXCR+Q6sek8bf92" as bytes, 4096 iterations). */
static void computed_sha512(void **state)
{
    (void)state;
    struct gr_scram_store s = {0};
    uint8_t salted[64];
    unhex("b3a3c6c9dd254c41930fdfcce26b4296ad330afd8d6ac10987a654de61285df9209247b7e37a30a24d300d596652929722"
          "9f88d7"
          "a3cbdd3cfbdf60ee87ad80f2",
          salted);
    assert_int_equal(gr_scram_store_upsert(&s, "user", 4, GR_SCRAM_SHA_512, 4096,
                                           (const uint8_t *)"QSXCR+Q6sek8bf92", 16, salted, 64),
                     0);
    const struct gr_sasl_mech *m = &gr_sasl_mech_scram_sha512;
    assert_string_equal(m->name, "SCRAM-SHA-512");
    struct gr_sasl_exchange *x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_512, "3rfcNHYJY1ZVvWVs7j");
    struct step r = step_s(x, m, "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL");
    assert_int_equal(r.rc, GR_SASL_CONTINUE);
    assert_string_equal(r.out,
                        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=UVNYQ1IrUTZzZWs4YmY5Mg==,i=4096");
    r = step_s(x, m,
               "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=D4I0zSF302mJRBAI53JN6oa/"
               "r+CccopDlSe4emzcsufGQx2b"
               "69WJp11obtjv6j+QVymK+tbx3nX/uhdfEJAmhA==");
    assert_int_equal(r.rc, GR_SASL_DONE);
    assert_string_equal(
        r.out, "v=S4Hcv0uvda30Sp3OIDyDo+LwR64IwWJ4PHbMc6096iao7Tb5KNaqUrKQKUBqFe/wzXcRUV7qA23p+y77zUyJ0A==");
    assert_string_equal(r.principal, "User:user");
    m->free(x);
    /* the SHA-256 mechanism does not find a SHA-512 credential: it fails at the proof */
    x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, "N");
    assert_int_equal(step_s(x, &gr_sasl_mech_scram_sha256, "n,,n=user,r=fyko").rc, GR_SASL_CONTINUE);
    gr_sasl_mech_scram_sha256.free(x);
    gr_scram_store_clear(&s);
}

/* A wrong proof and an unknown user: the same step, the same message. */
static void wrong_proof_and_unknown_user(void **state)
{
    (void)state;
    struct gr_scram_store s = {0};
    add_rfc_user(&s, "user");
    const struct gr_sasl_mech *m = &gr_sasl_mech_scram_sha256;
    const char *nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    struct gr_sasl_exchange *x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, nonce);
    assert_int_equal(step_s(x, m, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO").rc, GR_SASL_CONTINUE);
    struct step r = step_s(/* one bit of the proof changed */
                           x, m,
                           "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
                           "Ute9ytag9zjfMHgsqmmiz7AndVA=");
    assert_int_equal(r.rc, GR_SASL_FAIL);
    assert_string_equal(r.err, GENERIC256);
    m->free(x);

    x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, nonce);
    r = step_s(x, m, "n,,n=nobody,r=rOprNGfwEbeRWgbNEkqO");
    assert_int_equal(r.rc, GR_SASL_CONTINUE); /* answered like a known user */
    assert_true(strncmp(r.out, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=", 53) == 0);
    assert_non_null(strstr(r.out, ",i=4096"));
    char first[512];
    strcpy(first, r.out);
    r = step_s(x, m,
               "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
               "Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    assert_int_equal(r.rc, GR_SASL_FAIL);
    assert_string_equal(r.err, GENERIC256);
    m->free(x);
    /* the made-up salt is stable for the name (a second try cannot tell it from a stored one) */
    x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, nonce);
    r = step_s(x, m, "n,,n=nobody,r=rOprNGfwEbeRWgbNEkqO");
    assert_string_equal(r.out, first);
    m->free(x);
    gr_scram_store_clear(&s);
}

/* Each malformed client-first message fails (the exchange then refuses any further step). */
static void malformed_client_first(void **state)
{
    (void)state;
    struct gr_scram_store s = {0};
    add_rfc_user(&s, "user");
    static const char *bad[] = {
        "",
        "n",
        "n,",
        "n,,",
        "y,,n=user,r=abc",            /* client supports channel binding */
        "p=tls-unique,,n=user,r=abc", /* channel binding requested */
        "n,,n=,r=abc",                /* empty name */
        "n,,n=us=er,r=abc",           /* '=' not an escape */
        "n,,n=user=2,r=abc",          /* cut escape */
        "n,,n=user",                  /* no nonce */
        "n,,n=user,r=",               /* empty nonce */
        "n,,n=user,r=a b",            /* not printable */
        "n,,m=ext,n=user,r=abc",      /* mandatory extension */
        "n,,n=user,r=abc,",           /* empty extension */
        "n,,n=user,r=abc,1=2",        /* extension name not letters */
        "n,,n=user,r=abc,k",          /* extension without value */
        "n,,r=abc,n=user",            /* order */
        "n,a=,n=user,r=abc",          /* empty authzid */
        "n,,n=user,r=abc,k=v,",       /* trailing comma */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct gr_sasl_exchange *x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, NULL);
        struct step r = step_s(x, &gr_sasl_mech_scram_sha256, bad[i]);
        if (r.rc != GR_SASL_FAIL) fail_msg("accepted: \"%s\"", bad[i]);
        assert_string_equal(r.err, GENERIC256);
        assert_int_equal(step_s(x, &gr_sasl_mech_scram_sha256, "n,,n=user,r=abc").rc, GR_SASL_FAIL);
        gr_sasl_mech_scram_sha256.free(x);
    }
    /* embedded NUL, an authzid other than the user (Kafka's own message), too long a name or nonce */
    struct gr_sasl_exchange *x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, NULL);
    assert_int_equal(step(x, &gr_sasl_mech_scram_sha256, "n,,n=user,r=ab\0c", 16).rc, GR_SASL_FAIL);
    gr_sasl_mech_scram_sha256.free(x);
    x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, NULL);
    struct step r = step_s(x, &gr_sasl_mech_scram_sha256, "n,a=admin,n=user,r=abc");
    assert_int_equal(r.rc, GR_SASL_FAIL);
    assert_string_equal(
        r.err, "Authentication failed: Client requested an authorization id that is different from username");
    gr_sasl_mech_scram_sha256.free(x);
    char *big = malloc(8192);
    for (int k = 0; k < 4; k++) { /* a name or nonce one past its bound fails, at the bound passes */
        size_t name = k == 0 ? GR_SCRAM_NAME_MAX + 1 : k == 1 ? GR_SCRAM_NAME_MAX : 4;
        size_t nonce = k == 2 ? GR_SCRAM_NONCE_MAX + 1 : k == 3 ? GR_SCRAM_NONCE_MAX : 3;
        int o = sprintf(big, "n,,n=");
        memset(big + o, 'u', name);
        o += (int)name;
        o += sprintf(big + o, ",r=");
        memset(big + o, 'r', nonce);
        big[o + (int)nonce] = 0;
        x = gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, NULL);
        assert_int_equal(step_s(x, &gr_sasl_mech_scram_sha256, big).rc,
                         k % 2 ? GR_SASL_CONTINUE : GR_SASL_FAIL);
        gr_sasl_mech_scram_sha256.free(x);
    }
    free(big);
    assert_null(gr_scram_exchange_new(&s, 3, NULL));
    assert_null(gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, "a,b"));
    gr_scram_store_clear(&s);
}

/* Each malformed or mismatched client-final message fails with the generic message. */
static void malformed_client_final(void **state)
{
    (void)state;
    struct gr_scram_store s = {0};
    add_rfc_user(&s, "user");
    const char *N = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const char *P = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    char bad[12][256];
    int n = 0;
    snprintf(bad[n++], 256, "c=biws,r=%sX,p=%s", N, P);               /* nonce longer */
    snprintf(bad[n++], 256, "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=%s", P); /* client nonce only */
    snprintf(bad[n++], 256, "c=eSws,r=%s,p=%s", N, P);                /* channel binding "y,," */
    snprintf(bad[n++], 256, "c=biw,r=%s,p=%s", N, P);                 /* bad base64 */
    snprintf(bad[n++], 256, "c=biws,r=%s", N);                        /* no proof */
    snprintf(bad[n++], 256, "c=biws,r=%s,p=dHzb", N);                 /* short proof */
    snprintf(bad[n++], 256, "c=biws,r=%s,p=%s==", N, P);              /* long proof */
    snprintf(bad[n++], 256, "r=%s,c=biws,p=%s", N, P);                /* order */
    snprintf(bad[n++], 256, "c=biws,r=%s,p=%.43s!", N, P);            /* bad proof character */
    snprintf(bad[n++], 256, "c=biws,r=%s,x,p=%s", N, P);              /* bad extension */
    snprintf(bad[n++], 256, "%s", "");
    for (int i = 0; i < n; i++) {
        struct gr_sasl_exchange *x =
            gr_scram_exchange_new(&s, GR_SCRAM_SHA_256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
        assert_int_equal(step_s(x, &gr_sasl_mech_scram_sha256, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO").rc,
                         GR_SASL_CONTINUE);
        struct step r = step_s(x, &gr_sasl_mech_scram_sha256, bad[i]);
        if (r.rc != GR_SASL_FAIL) fail_msg("accepted: \"%s\"", bad[i]);
        assert_string_equal(r.err, GENERIC256);
        gr_sasl_mech_scram_sha256.free(x);
    }
    gr_scram_store_clear(&s);
}

/* A client's side for the exchanges the RFCs have no vector for: the proof for an auth message. */
static void client_proof(const char *salted_hex, const char *auth, char *out)
{
    uint8_t salted[32], ck[32], sk[32], sig[32], proof[32];
    unsigned int n;
    unhex(salted_hex, salted);
    HMAC(EVP_sha256(), salted, 32, (const uint8_t *)"Client Key", 10, ck, &n);
    EVP_Digest(ck, 32, sk, &n, EVP_sha256(), NULL);
    HMAC(EVP_sha256(), sk, 32, (const uint8_t *)auth, strlen(auth), sig, &n);
    for (int i = 0; i < 32; i++)
        proof[i] = ck[i] ^ sig[i];
    gr_scram_b64(proof, 32, out);
}

/* Runs one exchange as `cfirst` (gs2 header + bare) with channel binding `cb`, final extension `ext`. */
static struct step exchange_n(struct gr_scram_store *s, const char *cfirst, size_t bare_at, const char *cb,
                              const char *ext, const char *nonce_prefix, const char *nonce_suffix)
{
    struct gr_sasl_exchange *x = gr_scram_exchange_new(s, GR_SCRAM_SHA_256, "SN");
    struct step r = step_s(x, &gr_sasl_mech_scram_sha256, cfirst);
    assert_int_equal(r.rc, GR_SASL_CONTINUE);
    char nonce[256], without[512], auth[8192], proof[64], final[1024];
    snprintf(nonce, sizeof nonce, "%s", nonce_prefix);
    sscanf(r.out, "r=%100[^,]", nonce + strlen(nonce));
    strcat(nonce, nonce_suffix);
    snprintf(without, sizeof without, "c=%s,r=%s%s", cb, nonce, ext);
    snprintf(auth, sizeof auth, "%s,%s,%s", cfirst + bare_at, r.out, without);
    client_proof("c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d", auth, proof);
    snprintf(final, sizeof final, "%s,p=%s", without, proof);
    r = step_s(x, &gr_sasl_mech_scram_sha256, final);
    gr_sasl_mech_scram_sha256.free(x);
    return r;
}

static struct step exchange(struct gr_scram_store *s, const char *cfirst, size_t bare_at, const char *cb,
                            const char *ext)
{
    return exchange_n(s, cfirst, bare_at, cb, ext, "", "");
}

/* saslname escapes, an authzid equal to the user, extensions ignored, tokenauth=true refused. */
static void names_and_extensions(void **state)
{
    (void)state;
    struct gr_scram_store s = {0};
    add_rfc_user(&s, "a,b=c");
    add_rfc_user(&s, "user");
    struct step r = exchange(&s, "n,,n=a=2Cb=3Dc,r=CN", 3, "biws", "");
    assert_int_equal(r.rc, GR_SASL_DONE);
    assert_string_equal(r.principal, "User:a,b=c");
    r = exchange(&s, "n,a=user,n=user,r=CN", 9, "bixhPXVzZXIs", ""); /* base64("n,a=user,") */
    assert_int_equal(r.rc, GR_SASL_DONE);
    r = exchange(&s, "n,,n=user,r=CN,foo=bar", 3, "biws", ",ext=1");
    assert_int_equal(r.rc, GR_SASL_DONE);
    r = exchange(&s, "n,,n=user,r=CN,tokenauth=true", 3, "biws", "");
    assert_int_equal(r.rc, GR_SASL_FAIL); /* delegation tokens: none here */
    assert_string_equal(r.err, GENERIC256);
    r = exchange(&s, "n,,n=user,r=CN,tokenauth=false", 3, "biws", "");
    assert_int_equal(r.rc, GR_SASL_DONE);
    /* the channel binding must be the gs2 header sent first */
    r = exchange(&s, "n,a=user,n=user,r=CN", 9, "biws", "");
    assert_int_equal(r.rc, GR_SASL_FAIL);
    /* a final message naming another nonce fails even with a proof made for it (a replayed exchange) */
    r = exchange_n(&s, "n,,n=user,r=CN", 3, "biws", "", "", "X");
    assert_int_equal(r.rc, GR_SASL_FAIL);
    r = exchange_n(&s, "n,,n=user,r=CN", 3, "biws", "", "", "");
    assert_int_equal(r.rc, GR_SASL_DONE);
    /* librdkafka 2.0.2 (Debian bookworm's, under kcat) sends the client nonce twice ("r=" CN CN SN): Kafka's
     * ScramSaslServer takes any nonce ending with client + server nonce, and so does Gregor */
    r = exchange_n(&s, "n,,n=user,r=CN", 3, "biws", "", "CN", "");
    assert_int_equal(r.rc, GR_SASL_DONE);
    assert_string_equal(r.principal, "User:user");
    r = exchange_n(&s, "n,,n=user,r=CN", 3, "biws", "", "CN", "X"); /* but not one ending elsewhere */
    assert_int_equal(r.rc, GR_SASL_FAIL);
    gr_scram_store_clear(&s);
}

static char tmpdir[64];

static void write_file(const char *text, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, GR_SCRAM_FILE);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

/* The store's file: a reload gives the same credentials (and the exchange still passes); deletions; a
 * damaged, truncated or foreign file is refused; no file is an empty store. */
/* A cluster's per-user etcd values (server/security_etcd.h): the key of a name with '/', a space and
 * non-ASCII, one user's text parsed back under its key, and refused under another user's key, as garbage
 * or holding two users; gr_scram_store_set_user replaces, gr_scram_store_remove removes. */
static void etcd_user_values(void **state)
{
    (void)state;
    const char *name = "a/b \xc3\xbc";
    char key[256], err[160];
    assert_int_equal(gr_security_scram_key("/g/CID/", name, strlen(name), key, sizeof key), 36);
    assert_string_equal(key, "/g/CID/security/scram/a%2Fb%20%C3%BC");
    assert_int_equal(gr_security_scram_key("/g/CID/", "", 0, key, sizeof key), -EINVAL);
    assert_int_equal(gr_security_scram_key("/g/CID/", name, strlen(name), key, 30), -EINVAL);
    struct gr_scram_store all = {0}, one = {0}, got = {0};
    add_rfc_user(&all, name);
    add_rfc_user(&all, "other");
    assert_int_equal(gr_scram_store_set_user(&one, gr_scram_store_find(&all, name, strlen(name))), 0);
    size_t len, len2;
    char *text = gr_scram_store_format(&one, &len), *two = gr_scram_store_format(&all, &len2);
    assert_non_null(text);
    assert_non_null(two);
    const char *seg = "a%2Fb%20%C3%BC";
    assert_int_equal(gr_security_scram_parse(seg, strlen(seg), text, len, &got, err, sizeof err), 0);
    assert_int_equal(got.count, 1);
    assert_memory_equal(got.users[0].name, name, strlen(name));
    assert_memory_equal(gr_scram_store_cred(&got, name, strlen(name), GR_SCRAM_SHA_256)->stored_key,
                        gr_scram_store_cred(&all, name, strlen(name), GR_SCRAM_SHA_256)->stored_key, 32);
    assert_int_equal(gr_security_scram_parse("other", 5, text, len, &got, err, sizeof err), -1);
    assert_int_equal(got.count, 0);
    assert_int_equal(gr_security_scram_parse("a/b", 3, text, len, &got, err, sizeof err), -1);
    assert_int_equal(gr_security_scram_parse(seg, strlen(seg), "garbage", 7, &got, err, sizeof err), -1);
    assert_int_equal(gr_security_scram_parse("other", 5, two, len2, &got, err, sizeof err), -1);
    /* set_user replaces a user's credentials whole (the SHA-512 one it had is gone) */
    uint8_t salted[64] = {7};
    assert_int_equal(
        gr_scram_store_upsert(&all, "other", 5, GR_SCRAM_SHA_512, 4096, (const uint8_t *)"s", 1, salted, 64),
        0);
    struct gr_scram_user u = one.users[0];
    u.name = (char *)"other";
    u.name_len = 5;
    assert_int_equal(gr_scram_store_set_user(&all, &u), 0);
    assert_int_equal(all.count, 2);
    assert_null(gr_scram_store_cred(&all, "other", 5, GR_SCRAM_SHA_512));
    assert_non_null(gr_scram_store_cred(&all, "other", 5, GR_SCRAM_SHA_256));
    assert_int_equal(gr_scram_store_remove(&all, "other", 5), 0);
    assert_int_equal(gr_scram_store_remove(&all, "other", 5), -ENOENT);
    assert_int_equal(all.count, 1);
    free(text);
    free(two);
    gr_scram_store_clear(&all);
    gr_scram_store_clear(&one);
    gr_scram_store_clear(&got);
}

static void store_file(void **state)
{
    (void)state;
    strcpy(tmpdir, "/tmp/gr-scram-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    struct gr_scram_store s = {0}, t = {0};
    assert_int_equal(gr_scram_store_load(&t, tmpdir), 0); /* no file */
    assert_int_equal(t.count, 0);
    add_rfc_user(&s, "user");
    add_rfc_user(&s, "we ird\nname");
    uint8_t salted[64] = {1};
    assert_int_equal(
        gr_scram_store_upsert(&s, "user", 4, GR_SCRAM_SHA_512, 8192, (const uint8_t *)"salt", 4, salted, 64),
        0);
    size_t len;
    char *text = gr_scram_store_format(&s, &len);
    assert_non_null(text);
    write_file(text, len);
    assert_int_equal(gr_scram_store_load(&t, tmpdir), 0);
    assert_int_equal(t.count, 2);
    for (int m = GR_SCRAM_SHA_256; m <= GR_SCRAM_SHA_512; m++) {
        const struct gr_scram_cred *a = gr_scram_store_cred(&s, "user", 4, m),
                                   *b = gr_scram_store_cred(&t, "user", 4, m);
        assert_non_null(b);
        assert_int_equal(a->iterations, b->iterations);
        assert_int_equal(a->salt_len, b->salt_len);
        assert_memory_equal(a->salt, b->salt, a->salt_len);
        assert_memory_equal(a->stored_key, b->stored_key, gr_scram_digest_len(m));
        assert_memory_equal(a->server_key, b->server_key, gr_scram_digest_len(m));
    }
    assert_int_equal(gr_scram_store_cred(&t, "user", 4, GR_SCRAM_SHA_512)->iterations, 8192);
    assert_non_null(gr_scram_store_cred(&t, "we ird\nname", 11, GR_SCRAM_SHA_256));
    /* the reloaded store authenticates RFC 7677's exchange */
    struct gr_sasl_exchange *x =
        gr_scram_exchange_new(&t, GR_SCRAM_SHA_256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
    assert_int_equal(step_s(x, &gr_sasl_mech_scram_sha256, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO").rc,
                     GR_SASL_CONTINUE);
    assert_int_equal(step_s(x, &gr_sasl_mech_scram_sha256,
                            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+"
                            "Ute9ytag9zjfMHgsqmmiz7AndVQ=")
                         .rc,
                     GR_SASL_DONE);
    gr_sasl_mech_scram_sha256.free(x);

    /* damaged: one byte changed anywhere; truncated; another file */
    char err[160];
    for (size_t i = 0; i < len; i += 7) {
        char *copy = malloc(len);
        memcpy(copy, text, len);
        copy[i] ^= 0x01;
        if (gr_scram_store_parse(&t, copy, len, err, sizeof err) == 0)
            fail_msg("byte %zu changed: accepted", i);
        free(copy);
    }
    for (size_t cut = 0; cut < len; cut += 5)
        if (gr_scram_store_parse(&t, text, cut, err, sizeof err) == 0) fail_msg("cut at %zu: accepted", cut);
    write_file(text, len - 3);
    assert_int_equal(gr_scram_store_load(&t, tmpdir), -1);
    assert_int_equal(t.count, 0);
    write_file("hello\n", 6);
    assert_int_equal(gr_scram_store_load(&t, tmpdir), -1);
    free(text);

    /* deletions: the user goes with its last credential; a reload agrees */
    assert_int_equal(gr_scram_store_delete(&s, "user", 4, GR_SCRAM_SHA_512), 0);
    assert_int_equal(gr_scram_store_delete(&s, "user", 4, GR_SCRAM_SHA_512), -ENOENT);
    assert_int_equal(gr_scram_store_delete(&s, "we ird\nname", 11, GR_SCRAM_SHA_256), 0);
    assert_int_equal(s.count, 1);
    text = gr_scram_store_format(&s, &len);
    write_file(text, len);
    free(text);
    assert_int_equal(gr_scram_store_load(&t, tmpdir), 0);
    assert_int_equal(t.count, 1);
    assert_null(gr_scram_store_cred(&t, "user", 4, GR_SCRAM_SHA_512));
    assert_non_null(gr_scram_store_cred(&t, "user", 4, GR_SCRAM_SHA_256));
    gr_scram_store_clear(&s);
    gr_scram_store_clear(&t);
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, GR_SCRAM_FILE);
    unlink(path);
    rmdir(tmpdir);
}

/* Kafka's upsertion checks and Gregor's bounds. */
static void upsert_checks(void **state)
{
    (void)state;
    const char *msg = NULL;
    assert_int_equal(gr_scram_check_upsert(5, 1, 4096, 16, &msg), 0);
    assert_int_equal(gr_scram_check_upsert(5, 2, 16384, 16, &msg), 0);
    assert_int_equal(gr_scram_check_upsert(0, 1, 4096, 16, &msg), GR_ERR_UNACCEPTABLE_CREDENTIAL);
    assert_string_equal(msg, "Username must not be empty");
    assert_int_equal(gr_scram_check_upsert(5, 0, 4096, 16, &msg), GR_ERR_UNSUPPORTED_SASL_MECHANISM);
    assert_string_equal(msg, "Unknown SCRAM mechanism");
    assert_int_equal(gr_scram_check_upsert(5, 3, 4096, 16, &msg), GR_ERR_UNSUPPORTED_SASL_MECHANISM);
    assert_int_equal(gr_scram_check_upsert(5, 1, 4095, 16, &msg), GR_ERR_UNACCEPTABLE_CREDENTIAL);
    assert_string_equal(msg, "Too few iterations");
    assert_int_equal(gr_scram_check_upsert(5, 1, 16385, 16, &msg), GR_ERR_UNACCEPTABLE_CREDENTIAL);
    assert_string_equal(msg, "Too many iterations");
    assert_int_equal(gr_scram_check_upsert(GR_SCRAM_NAME_MAX + 1, 1, 4096, 16, &msg),
                     GR_ERR_UNACCEPTABLE_CREDENTIAL);
    assert_int_equal(gr_scram_check_upsert(5, 1, 4096, GR_SCRAM_SALT_MAX + 1, &msg),
                     GR_ERR_UNACCEPTABLE_CREDENTIAL);
    struct gr_scram_store s = {0};
    uint8_t k[32] = {0};
    assert_int_equal(gr_scram_store_upsert(&s, "a\0b", 3, 1, 4096, k, 4, k, 32), -EINVAL);
    assert_int_equal(gr_scram_store_upsert(&s, "ab", 2, 0, 4096, k, 4, k, 32), -EINVAL);
    assert_int_equal(s.count, 0);
    uint8_t b[8];
    assert_int_equal(gr_scram_unb64("YWJj", 4, b, sizeof b), 3);
    assert_int_equal(gr_scram_unb64("YWI=", 4, b, sizeof b), 2);
    assert_int_equal(gr_scram_unb64("YQ==", 4, b, sizeof b), 1);
    assert_int_equal(gr_scram_unb64("Y===", 4, b, sizeof b), -1);
    assert_int_equal(gr_scram_unb64("Y=Jj", 4, b, sizeof b), -1);
    assert_int_equal(gr_scram_unb64("YWJ", 3, b, sizeof b), -1);
    assert_int_equal(gr_scram_unb64("YR==", 4, b, sizeof b), -1); /* not canonical: pad bits set */
    assert_int_equal(gr_scram_unb64("YWJ=", 4, b, sizeof b), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rfc7677_sha256),
        cmocka_unit_test(computed_sha512),
        cmocka_unit_test(wrong_proof_and_unknown_user),
        cmocka_unit_test(malformed_client_first),
        cmocka_unit_test(malformed_client_final),
        cmocka_unit_test(names_and_extensions),
        cmocka_unit_test(store_file),
        cmocka_unit_test(etcd_user_values),
        cmocka_unit_test(upsert_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
