/* test_sasl.c: the SASL layer's pure parts (issue #23): Kafka's JAAS form (server/jaas.c; each malformed
 * input refused with where), the PLAIN message split and password comparison (server/sasl_plain.c), PLAIN's
 * step through its mechanism table with users from a listener's JAAS config (Kafka's messages, the
 * principal), and the connection state machine (server/sasl.c) on a broker struct with only its config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/time.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "server/jaas.h"
#include "server/sasl.h"
#include "server/sasl_plain.h"

#define PLAIN_JAAS                                                                                           \
    "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "                   \
    "password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=\"alice-secret\";"

static void test_jaas_good(void **state)
{
    (void)state;
    struct gr_jaas j;
    char err[300];
    assert_int_equal(gr_jaas_parse(PLAIN_JAAS, &j, err, sizeof err), 0);
    assert_string_equal(j.module, "org.apache.kafka.common.security.plain.PlainLoginModule");
    assert_string_equal(j.flag, "required");
    assert_int_equal(j.count, 4);
    assert_string_equal(gr_jaas_option(&j, "user_alice"), "alice-secret");
    assert_string_equal(gr_jaas_option(&j, "username"), "admin");
    assert_null(gr_jaas_option(&j, "user_bob"));
    gr_jaas_free(&j);
    /* escapes as StreamTokenizer reads them, single quotes, bare words, comments, no options at all */
    assert_int_equal(
        gr_jaas_parse("  M optional /* c */ a=\"x\\\"y\\\\z\\n\\101\" b='q r' c=bare-word_1.$ // t\n;", &j,
                      err, sizeof err),
        0);
    assert_string_equal(j.flag, "optional");
    assert_string_equal(gr_jaas_option(&j, "a"), "x\"y\\z\nA");
    assert_string_equal(gr_jaas_option(&j, "b"), "q r");
    assert_string_equal(gr_jaas_option(&j, "c"), "bare-word_1.$");
    gr_jaas_free(&j);
    assert_int_equal(gr_jaas_parse("M sufficient;", &j, err, sizeof err), 0);
    assert_int_equal(j.count, 0);
    gr_jaas_free(&j);
}

static void test_jaas_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "login module not specified"},
        {"   // only a comment", "login module not specified"},
        {"M", "expected a control flag"},
        {"M mandatory a=\"b\";", "invalid control flag"},
        {"M required a=\"b\"", "missing ';'"},
        {"M required a \"b\";", "expected '=' after an option key"},
        {"M required a=;", "expected an option value"},
        {"M required a=\"b;", "unterminated quoted value"},
        {"M required a=\"b\\", "unterminated quoted value"},
        {"M required a=\"b\" /* x", "unterminated comment"},
        {"M required a=\"b\"; N required;", "more than one login module entry"},
        {"M required a=\"1\" a=\"2\";", "option 'a' given twice"},
        {"M required a=\"b\"; ;", "unexpected text after ';'"},
        {"M required a=\"b\" @;", "unexpected character"},
        {"\"M\" required;", "expected a login module class name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gr_jaas j;
        char err[300] = "";
        int rc = gr_jaas_parse(bad[i].text, &j, err, sizeof err);
        if (rc != -1 || !strstr(err, bad[i].why))
            fail_msg("'%s': rc %d, err '%s', expected '%s'", bad[i].text, rc, err, bad[i].why);
        gr_jaas_free(&j);
    }
    /* a value past GR_JAAS_VALUE_MAX is refused, not truncated */
    size_t n = GR_JAAS_VALUE_MAX + 40;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memcpy(big, "M required a=\"", 14);
    memset(big + 14, 'x', n - 14);
    big[n] = 0;
    struct gr_jaas j;
    char err[300] = "";
    assert_int_equal(gr_jaas_parse(big, &j, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 4096 bytes"));
    gr_jaas_free(&j);
    free(big);
}

static void test_plain_parse(void **state)
{
    (void)state;
    struct gr_plain_msg m;
    assert_int_equal(gr_sasl_plain_parse((const uint8_t *)"\0alice\0pw", 9, &m), 0);
    assert_int_equal(m.authzid_len, 0);
    assert_memory_equal(m.user, "alice", 5);
    assert_int_equal(m.user_len, 5);
    assert_memory_equal(m.pass, "pw", 2);
    assert_int_equal(m.pass_len, 2);
    assert_int_equal(gr_sasl_plain_parse((const uint8_t *)"z\0u\0p\0extra", 11, &m),
                     0); /* Kafka 4.x: ignored */
    assert_int_equal(m.authzid_len, 1);
    assert_int_equal(m.pass_len, 1);
    assert_int_equal(gr_sasl_plain_parse((const uint8_t *)"\0alice\0", 7, &m), -1); /* no password */
    assert_int_equal(gr_sasl_plain_parse((const uint8_t *)"\0\0pw", 4, &m), -1);    /* no user */
    assert_int_equal(gr_sasl_plain_parse((const uint8_t *)"alice", 5, &m), -1);     /* one part */
    assert_int_equal(gr_sasl_plain_parse((const uint8_t *)"", 0, &m), -1);
    assert_true(gr_sasl_plain_equal((const uint8_t *)"abc", 3, (const uint8_t *)"abc", 3));
    assert_false(gr_sasl_plain_equal((const uint8_t *)"abd", 3, (const uint8_t *)"abc", 3));
    assert_false(gr_sasl_plain_equal((const uint8_t *)"ab", 2, (const uint8_t *)"abc", 3));
    assert_false(gr_sasl_plain_equal((const uint8_t *)"abcd", 4, (const uint8_t *)"abc", 3));
    assert_false(gr_sasl_plain_equal((const uint8_t *)"", 0, (const uint8_t *)"abc", 3));
    /* a shorter input padded with zero bytes must not match an expected password ending in zero bytes */
    assert_false(gr_sasl_plain_equal((const uint8_t *)"a", 1, (const uint8_t *)"a\0", 2));
}

/* One PLAIN step on the mechanism table with the given listener context. */
static enum gr_sasl_step_rc plain_step(void *ctx, const char *tok, size_t len, char *principal, char *err)
{
    const struct gr_sasl_mech *m = &gr_sasl_mech_plain;
    struct gr_sasl_exchange *x = m->start_listener(NULL, ctx);
    assert_non_null(x);
    uint8_t *out;
    size_t out_len;
    int64_t life = -1;
    principal[0] = 0;
    enum gr_sasl_step_rc rc = m->step(x, (const uint8_t *)tok, len, &out, &out_len, principal,
                                      GR_PRINCIPAL_MAX + 1, &life, err, 300);
    assert_null(out);
    assert_int_equal(out_len, 0);
    assert_int_equal(life, 0);
    /* a second step on a finished exchange fails */
    char p2[8], e2[300];
    int64_t l2;
    assert_int_equal(m->step(x, (const uint8_t *)tok, len, &out, &out_len, p2, sizeof p2, &l2, e2, sizeof e2),
                     GR_SASL_FAIL);
    m->free(x);
    return rc;
}

static void test_plain_mechanism(void **state)
{
    (void)state;
    struct gr_config cfg;
    gr_config_init(&cfg);
    char err[1024], principal[GR_PRINCIPAL_MAX + 1];
    const struct gr_sasl_mech *m = &gr_sasl_mech_plain;
    assert_null(m->listener_new(&cfg, "SASL_PLAINTEXT", err, sizeof err));
    assert_non_null(strstr(err, "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"));
    assert_int_equal(gr_config_set(&cfg, "listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN_JAAS),
                     0);
    void *ctx = m->listener_new(&cfg, "SASL_PLAINTEXT", err, sizeof err);
    assert_non_null(ctx);
    assert_int_equal(plain_step(ctx, "\0alice\0alice-secret", 19, principal, err), GR_SASL_DONE);
    assert_string_equal(principal, "User:alice");
    assert_int_equal(plain_step(ctx, "alice\0alice\0alice-secret", 24, principal, err), GR_SASL_DONE);
    assert_int_equal(plain_step(ctx, "\0alice\0admin-secret", 19, principal, err), GR_SASL_FAIL);
    assert_string_equal(err, "Authentication failed: Invalid username or password");
    assert_int_equal(plain_step(ctx, "\0bob\0alice-secret", 17, principal, err), GR_SASL_FAIL);
    assert_string_equal(err, "Authentication failed: Invalid username or password");
    assert_int_equal(plain_step(ctx, "\0alice\0alice-secre", 18, principal, err), GR_SASL_FAIL);
    assert_int_equal(plain_step(ctx, "\0alice\0alice-secretX", 20, principal, err), GR_SASL_FAIL);
    assert_int_equal(plain_step(ctx, "admin\0alice\0alice-secret", 24, principal, err), GR_SASL_FAIL);
    assert_string_equal(
        err, "Authentication failed: Client requested an authorization id that is different from username");
    assert_int_equal(plain_step(ctx, "\0alice\0", 7, principal, err), GR_SASL_FAIL);
    assert_string_equal(err, ""); /* the generic message: the SASL layer writes it */
    assert_string_equal(principal, "");
    /* "user_" options only: "username" is not a user named "name" */
    assert_int_equal(plain_step(ctx, "\0name\0admin", 11, principal, err), GR_SASL_FAIL);
    m->listener_free(ctx);
    /* another login module, and a malformed config, are refused at start naming the key */
    assert_int_equal(gr_config_set(&cfg, "listener.name.sp.plain.sasl.jaas.config",
                                   "org.apache.kafka.common.security.scram.ScramLoginModule required;"),
                     0);
    assert_null(m->listener_new(&cfg, "SP", err, sizeof err));
    assert_non_null(strstr(err, "listener.name.sp.plain.sasl.jaas.config: the login module is"));
    assert_int_equal(gr_config_set(&cfg, "listener.name.sp.plain.sasl.jaas.config", "x required a=\"b\""), 0);
    assert_null(m->listener_new(&cfg, "SP", err, sizeof err));
    assert_non_null(strstr(err, "listener.name.sp.plain.sasl.jaas.config: cannot parse the JAAS config"));
    assert_null(strstr(err, "\"b\""));
    gr_config_free(&cfg);
}

static int16_t handshake(struct gr_sasl *s, int16_t v, const char *mech, struct gr_arena *a)
{
    struct gr_sasl_handshake_request body = {.mechanism = gr_str_c(mech)};
    struct gr_sasl_handshake_response resp;
    gr_sasl_handshake_response_init(&resp);
    gr_sasl_handshake(s, v, &body, &resp, a);
    return resp.error_code;
}

static int16_t authenticate(struct gr_sasl *s, int16_t v, const char *tok, size_t len, struct gr_arena *a,
                            const char **principal, int64_t *life)
{
    struct gr_sasl_authenticate_request body = {.auth_bytes = {(const uint8_t *)tok, (int32_t)len}};
    struct gr_sasl_authenticate_response resp;
    gr_sasl_authenticate_response_init(&resp);
    gr_sasl_authenticate(s, v, &body, &resp, a, principal);
    *life = resp.session_lifetime_ms;
    return resp.error_code;
}

/* A request frame's first bytes: key, version, correlation id (what the gate peeks). */
static size_t hdr(uint8_t *p, int16_t key)
{
    memset(p, 0, 16);
    p[0] = (uint8_t)(key >> 8);
    p[1] = (uint8_t)key;
    p[3] = 1;
    p[9] = 0xff; /* client id: null */
    p[8] = 0xff;
    return 10;
}

static void test_state_machine(void **state)
{
    (void)state;
    struct gr_broker *b = calloc(1, sizeof *b);
    assert_non_null(b);
    gr_config_init(&b->cfg);
    char err[1024];
    assert_null(gr_sasl_listener_new(b, "SP", err, sizeof err)); /* Kafka's default: GSSAPI */
    assert_non_null(strstr(err, "sasl.enabled.mechanisms: listener SP enables SASL mechanism 'GSSAPI'"));
    assert_int_equal(gr_config_set(&b->cfg, "sasl.enabled.mechanisms", "PLAIN"), 0);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sp.plain.sasl.jaas.config", PLAIN_JAAS), 0);
    assert_int_equal(gr_config_set(&b->cfg, "connections.max.reauth.ms", "5000"), 0);
    struct gr_sasl_listener *l = gr_sasl_listener_new(b, "SP", err, sizeof err);
    assert_non_null(l);
    assert_string_equal(gr_sasl_listener_mechanisms(l), "PLAIN");
    struct gr_arena a;
    gr_arena_init(&a, 1 << 16);
    uint8_t f[16];
    const char *why, *principal;
    int64_t life;

    struct gr_sasl *s = gr_sasl_new(l, "127.0.0.1:1");
    assert_int_equal(gr_sasl_frame_max(s, 104857600), 524288);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), 0, &why), GR_SASL_CLOSE);
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:2");
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_API_VERSIONS), 0, &why), GR_SASL_PASS);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_API_VERSIONS), 0, &why), GR_SASL_CLOSE); /* only once */
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:3");
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_SASL_AUTHENTICATE), 0, &why), GR_SASL_CLOSE);
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:4");
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_SASL_HANDSHAKE), 0, &why), GR_SASL_PASS);
    assert_int_equal(handshake(s, 1, "PLAIN", &a), 0);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), 0, &why), GR_SASL_CLOSE);
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:5");
    assert_int_equal(handshake(s, 1, "PLAIN", &a), 0);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_SASL_AUTHENTICATE), 0, &why), GR_SASL_PASS);
    assert_int_equal(authenticate(s, 1, "\0alice\0alice-secret", 19, &a, &principal, &life), 0);
    assert_string_equal(principal, "User:alice");
    assert_int_equal(life, 5000);
    assert_false(gr_sasl_in_handshake(s));
    assert_int_equal(gr_sasl_frame_max(s, 104857600), 104857600);
    int64_t now = gr_time_mono_ms();
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), now, &why), GR_SASL_PASS);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), now + 6000, &why),
                     GR_SASL_CLOSE); /* expired */
    /* re-authentication: the handshake passes even after expiry, the principal must not change */
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_SASL_HANDSHAKE), now + 6000, &why), GR_SASL_PASS);
    assert_int_equal(handshake(s, 1, "PLAIN", &a), 0);
    assert_int_equal(authenticate(s, 2, "\0alice\0alice-secret", 19, &a, &principal, &life), 0);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), now + 1000, &why), GR_SASL_PASS);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_SASL_HANDSHAKE), now, &why), GR_SASL_PASS);
    assert_int_equal(handshake(s, 1, "PLAIN", &a), 0);
    assert_int_equal(authenticate(s, 2, "\0admin\0admin-secret", 19, &a, &principal, &life),
                     GR_ERR_SASL_AUTHENTICATION_FAILED);
    assert_null(principal);
    assert_true(gr_sasl_failed(s));
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), now, &why), GR_SASL_CLOSE);
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:6"); /* unknown mechanism */
    assert_int_equal(handshake(s, 1, "SCRAM-SHA-256", &a), GR_ERR_UNSUPPORTED_SASL_MECHANISM);
    assert_true(gr_sasl_failed(s));
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:7"); /* v0: raw tokens */
    assert_int_equal(handshake(s, 0, "PLAIN", &a), 0);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_METADATA), 0, &why), GR_SASL_RAW);
    uint8_t *out;
    size_t out_len;
    assert_int_equal(gr_sasl_raw_token(s, (const uint8_t *)"\0alice\0x", 8, &out, &out_len, &principal),
                     GR_SASL_FAIL);
    assert_true(gr_sasl_failed(s));
    gr_sasl_free(s);

    s = gr_sasl_new(l, "127.0.0.1:8"); /* authenticated with v0 SaslAuthenticate: no re-authentication */
    assert_int_equal(handshake(s, 1, "PLAIN", &a), 0);
    assert_int_equal(authenticate(s, 0, "\0alice\0alice-secret", 19, &a, &principal, &life), 0);
    assert_int_equal(gr_sasl_gate(s, f, hdr(f, GR_API_SASL_HANDSHAKE), now, &why), GR_SASL_PASS);
    assert_int_equal(handshake(s, 1, "PLAIN", &a), GR_ERR_ILLEGAL_SASL_STATE); /* KafkaApis' answer */
    gr_sasl_free(s);

    assert_int_equal(handshake(NULL, 1, "PLAIN", &a), GR_ERR_ILLEGAL_SASL_STATE); /* no SASL listener */
    /* connections.max.reauth.ms per listener and per listener and mechanism (Kafka's prefixes) */
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sq.connections.max.reauth.ms", "x"), -1);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sq.plain.connections.max.reauth.ms", "9e3"), -1);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sq.plain.sasl.jaas.config", PLAIN_JAAS), 0);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sr.plain.sasl.jaas.config", PLAIN_JAAS), 0);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sq.connections.max.reauth.ms", "6000"), 0);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sr.connections.max.reauth.ms", "6000"), 0);
    assert_int_equal(gr_config_set(&b->cfg, "listener.name.sq.plain.connections.max.reauth.ms", "7000"), 0);
    const char *names[] = {"SQ", "SR", "SP"};
    const int64_t want[] = {7000, 6000, 5000};
    for (int i = 0; i < 3; i++) {
        struct gr_sasl_listener *li = gr_sasl_listener_new(b, names[i], err, sizeof err);
        assert_non_null(li);
        s = gr_sasl_new(li, "127.0.0.1:9");
        assert_int_equal(handshake(s, 1, "PLAIN", &a), 0);
        assert_int_equal(authenticate(s, 1, "\0alice\0alice-secret", 19, &a, &principal, &life), 0);
        assert_int_equal(life, want[i]);
        gr_sasl_free(s);
        gr_sasl_listener_free(li);
    }
    gr_arena_reset(&a);
    gr_sasl_listener_free(l);
    gr_config_free(&b->cfg);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jaas_good),     cmocka_unit_test(test_jaas_malformed),
        cmocka_unit_test(test_plain_parse),   cmocka_unit_test(test_plain_mechanism),
        cmocka_unit_test(test_state_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
