/*
 * test_tls_client.c: the inter-broker client's TLS side (issue #23): gr_tls_client_ctx_new's settings
 * (ssl.endpoint.identification.algorithm, a bad keystore named), and handshakes between a client session
 * (common/tls_io.h gr_tls_client_new) and a listener's server session (gr_tls_new) over a socketpair, with
 * certificates made here (an EC CA, a leaf for IP 127.0.0.1, a second CA): the right host verifies, another
 * address or another CA fails with OpenSSL's reason, host verification off takes any address, and a server
 * that requires a client certificate gets the client's keystore. No timing: the two sides are stepped in
 * turn a bounded number of times.
 * Also kTLS (gregor.ssl.ktls.enable): the server context asks for it (SSL_OP_ENABLE_KTLS) unless the key is
 * false; gr_tls_send_path says userspace before the handshake and for a socketpair (the kernel never encrypts
 * it), ktls only when the handshake is done and the (injected) BIO query says the kernel encrypts; the
 * tcp_available_ulp word match and the start-up probe's wording.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "server/config.h"
#include "server/tls.h"

static char dir[] = "/tmp/gregor-tls-client-XXXXXX";
static char ca_pem[128], other_ca_pem[128], ks_pem[128], client_ks_pem[128];
/* run by handshake() on the server session once both sides finished (NULL: nothing) */
static void (*after_handshake)(struct ssl_st *srv);

static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, const char *san,
                       long serial)
{
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
    X509_EXTENSION *e =
        X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, issuer ? "CA:FALSE" : "CA:TRUE");
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    if (san) {
        e = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
    }
    assert_true(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
    return x;
}

static void write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (key) assert_int_equal(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL), 1);
    assert_int_equal(PEM_write_X509(f, cert), 1);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(ca_pem, sizeof ca_pem, "%s/ca.pem", dir);
    snprintf(other_ca_pem, sizeof other_ca_pem, "%s/other.pem", dir);
    snprintf(ks_pem, sizeof ks_pem, "%s/ks.pem", dir);
    snprintf(client_ks_pem, sizeof client_ks_pem, "%s/client.pem", dir);
    EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *other_key = EVP_EC_gen("P-256"), *leaf_key = EVP_EC_gen("P-256"),
             *client_key = EVP_EC_gen("P-256");
    X509 *ca = make_cert(ca_key, "test CA", NULL, NULL, NULL, 1);
    X509 *other = make_cert(other_key, "other CA", NULL, NULL, NULL, 2);
    X509 *leaf = make_cert(leaf_key, "broker", ca, ca_key, "IP:127.0.0.1", 3);
    X509 *client = make_cert(client_key, "client", ca, ca_key, NULL, 4);
    write_pem(ca_pem, NULL, ca);
    write_pem(other_ca_pem, NULL, other);
    write_pem(ks_pem, leaf_key, leaf);
    write_pem(client_ks_pem, client_key, client);
    X509_free(ca);
    X509_free(other);
    X509_free(leaf);
    X509_free(client);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(other_key);
    EVP_PKEY_free(leaf_key);
    EVP_PKEY_free(client_key);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    const char *files[] = {ca_pem, other_ca_pem, ks_pem, client_ks_pem};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(files[i]);
    rmdir(dir);
    return 0;
}

/* Kafka's defaults as gr_config_ssl gives them, with a PEM keystore and truststore. */
static void settings(struct gr_config *cfg, struct gr_ssl_settings *s, const char *keystore,
                     const char *trust)
{
    gr_config_init(cfg);
    gr_config_ssl(cfg, "INTERNAL", s);
    s->keystore_type = "PEM";
    s->truststore_type = "PEM";
    s->keystore_location = keystore;
    s->truststore_location = trust;
}

static void test_client_ctx_settings(void **state)
{
    (void)state;
    struct gr_config cfg;
    struct gr_ssl_settings s;
    settings(&cfg, &s, NULL, ca_pem);
    assert_string_equal(s.endpoint_identification_algorithm, "https"); /* Kafka's default */
    char err[1024] = "";
    bool vh = false;
    struct ssl_ctx_st *ctx = gr_tls_client_ctx_new("INTERNAL", &s, &vh, err, sizeof err);
    assert_non_null(ctx); /* a client needs no keystore */
    assert_true(vh);
    gr_tls_ctx_free(ctx);
    s.endpoint_identification_algorithm = "HTTPS";
    ctx = gr_tls_client_ctx_new("INTERNAL", &s, &vh, err, sizeof err);
    assert_non_null(ctx);
    assert_true(vh);
    gr_tls_ctx_free(ctx);
    s.endpoint_identification_algorithm = "";
    ctx = gr_tls_client_ctx_new("INTERNAL", &s, &vh, err, sizeof err);
    assert_non_null(ctx);
    assert_false(vh);
    gr_tls_ctx_free(ctx);
    s.endpoint_identification_algorithm = "ldaps";
    assert_null(gr_tls_client_ctx_new("INTERNAL", &s, &vh, err, sizeof err));
    assert_non_null(strstr(err, "ssl.endpoint.identification.algorithm"));
    s.endpoint_identification_algorithm = "https";
    s.keystore_location = "/nonexistent/ks.pem";
    assert_null(gr_tls_client_ctx_new("INTERNAL", &s, &vh, err, sizeof err));
    assert_non_null(strstr(err, "ssl.keystore.location"));
    assert_non_null(strstr(err, "INTERNAL"));
    s.keystore_location = NULL;
    s.enabled_protocols = "TLSv9";
    assert_null(gr_tls_client_ctx_new("INTERNAL", &s, &vh, err, sizeof err));
    assert_non_null(strstr(err, "ssl.enabled.protocols"));
    gr_config_free(&cfg);
}

/* Steps a client handshake and a server's first read in turn (at most 50 rounds). Returns 1 when both ended
 * with the handshake done and a byte read by the server, -1 when either failed (reason in why). */
static int handshake(const char *server_trust, const char *client_auth, const char *client_ks,
                     const char *client_trust, const char *host, bool verify_host, char *why, size_t cap)
{
    struct gr_config cfg, ccfg;
    struct gr_ssl_settings ss, cs;
    settings(&cfg, &ss, ks_pem, server_trust);
    ss.client_auth = client_auth;
    char err[1024] = "";
    struct ssl_ctx_st *sctx = gr_tls_ctx_new("INTERNAL", &ss, err, sizeof err);
    assert_non_null(sctx);
    settings(&ccfg, &cs, client_ks, client_trust);
    bool vh;
    struct ssl_ctx_st *cctx = gr_tls_client_ctx_new("INTERNAL", &cs, &vh, err, sizeof err);
    assert_non_null(cctx);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    struct ssl_st *srv = gr_tls_new(sctx, sv[0]);
    struct ssl_st *cli = gr_tls_client_new(cctx, sv[1], host, verify_host);
    assert_non_null(srv);
    assert_non_null(cli);
    int result = 0;
    bool cdone = false, sent = false;
    why[0] = 0;
    for (int round = 0; round < 50 && result == 0; round++) {
        enum gr_tls_want want;
        if (!cdone) {
            int rc = gr_tls_handshake(cli, &want, why, cap);
            if (rc == 1) cdone = true;
            if (rc < 0 && want == GR_TLS_WANT_NONE) result = -1;
        }
        if (cdone && !sent) {
            ssize_t n = gr_tls_write(cli, "k", 1, &want, why, cap);
            if (n == 1) sent = true;
            if (n < 0 && want == GR_TLS_WANT_NONE) result = -1;
        }
        if (result) break; /* the client's reason stands */
        char c;
        char swhy[400] = "";
        ssize_t n = gr_tls_read(srv, &c, 1, &want, swhy, sizeof swhy);
        if (n == 1 && c == 'k') result = 1;
        if (n == 0 || (n < 0 && want == GR_TLS_WANT_NONE)) {
            snprintf(why, cap, "server: %s", swhy);
            result = -1;
        }
    }
    if (result == 1 && after_handshake) after_handshake(srv);
    gr_tls_free(cli);
    gr_tls_free(srv);
    close(sv[0]);
    close(sv[1]);
    gr_tls_ctx_free(sctx);
    gr_tls_ctx_free(cctx);
    gr_config_free(&cfg);
    gr_config_free(&ccfg);
    return result;
}

static void test_handshakes(void **state)
{
    (void)state;
    char why[400];
    /* the peer's certificate names 127.0.0.1 and chains to the truststore */
    assert_int_equal(handshake(ca_pem, "none", NULL, ca_pem, "127.0.0.1", true, why, sizeof why), 1);
    /* another address: refused with OpenSSL's reason */
    assert_int_equal(handshake(ca_pem, "none", NULL, ca_pem, "127.0.0.2", true, why, sizeof why), -1);
    assert_non_null(strstr(why, "IP address mismatch"));
    /* ssl.endpoint.identification.algorithm empty: the address is not checked, the chain still is */
    assert_int_equal(handshake(ca_pem, "none", NULL, ca_pem, "127.0.0.2", false, why, sizeof why), 1);
    assert_int_equal(handshake(ca_pem, "none", NULL, other_ca_pem, "127.0.0.2", false, why, sizeof why), -1);
    /* a truststore of another CA */
    assert_int_equal(handshake(ca_pem, "none", NULL, other_ca_pem, "127.0.0.1", true, why, sizeof why), -1);
    assert_non_null(strstr(why, "certificate verify failed"));
    /* ssl.client.auth=required: without a keystore the server refuses; with ours it takes it */
    assert_int_equal(handshake(ca_pem, "required", NULL, ca_pem, "127.0.0.1", true, why, sizeof why), -1);
    assert_int_equal(handshake(ca_pem, "required", client_ks_pem, ca_pem, "127.0.0.1", true, why, sizeof why),
                     1);
    /* a server that trusts another CA refuses our client certificate */
    assert_int_equal(
        handshake(other_ca_pem, "required", client_ks_pem, ca_pem, "127.0.0.1", true, why, sizeof why), -1);
}

static bool says_yes(const struct ssl_st *ssl)
{
    (void)ssl;
    return true;
}

static bool says_no(const struct ssl_st *ssl)
{
    (void)ssl;
    return false;
}

static int paths_checked;

static void check_send_path(struct ssl_st *srv)
{
    assert_false(
        gr_tls_ktls_send(srv)); /* a unix socketpair: no tls ULP on it, OpenSSL stays in user space */
    assert_int_equal(gr_tls_send_path(srv, NULL), GR_TLS_SEND_USERSPACE);
    assert_int_equal(gr_tls_send_path(srv, says_yes), GR_TLS_SEND_KTLS);
    assert_int_equal(gr_tls_send_path(srv, says_no), GR_TLS_SEND_USERSPACE);
    paths_checked++;
}

static void test_ktls(void **state)
{
    (void)state;
    struct gr_config cfg;
    struct gr_ssl_settings s;
    settings(&cfg, &s, ks_pem, ca_pem);
    assert_true(s.ktls_enable); /* gregor.ssl.ktls.enable defaults to true */
    char err[1024] = "";
    struct ssl_ctx_st *ctx = gr_tls_ctx_new("INTERNAL", &s, err, sizeof err);
    assert_non_null(ctx);
    assert_true(SSL_CTX_get_options(ctx) & SSL_OP_ENABLE_KTLS);
    /* a session whose handshake has not run: userspace, whatever the BIO says */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    struct ssl_st *fresh = gr_tls_new(ctx, sv[0]);
    assert_non_null(fresh);
    assert_int_equal(gr_tls_send_path(fresh, says_yes), GR_TLS_SEND_USERSPACE);
    gr_tls_free(fresh);
    close(sv[0]);
    close(sv[1]);
    gr_tls_ctx_free(ctx);
    gr_config_free(&cfg);
    /* the key off: the context does not ask OpenSSL for kTLS */
    gr_config_init(&cfg);
    assert_int_equal(gr_config_set(&cfg, "gregor.ssl.ktls.enable", "false"), 0);
    gr_config_ssl(&cfg, "INTERNAL", &s);
    assert_false(s.ktls_enable);
    s.keystore_type = "PEM";
    s.keystore_location = ks_pem;
    ctx = gr_tls_ctx_new("INTERNAL", &s, err, sizeof err);
    assert_non_null(ctx);
    assert_false(SSL_CTX_get_options(ctx) & SSL_OP_ENABLE_KTLS);
    gr_tls_ctx_free(ctx);
    gr_config_free(&cfg);
    /* after a real handshake */
    char why[400];
    after_handshake = check_send_path;
    assert_int_equal(handshake(ca_pem, "none", NULL, ca_pem, "127.0.0.1", true, why, sizeof why), 1);
    after_handshake = NULL;
    assert_int_equal(paths_checked, 1);
}

static void test_ulp_listed(void **state)
{
    (void)state;
    assert_true(gr_tls_ulp_listed("mptcp tls\n", "tls"));
    assert_true(gr_tls_ulp_listed("tls", "tls"));
    assert_true(gr_tls_ulp_listed("espintcp tls mptcp", "tls"));
    assert_false(gr_tls_ulp_listed("mptcp\n", "tls")); /* this machine's kernel */
    assert_false(gr_tls_ulp_listed("tlsx espintcp", "tls"));
    assert_false(gr_tls_ulp_listed("xtls", "tls"));
    assert_false(gr_tls_ulp_listed("", "tls"));
    assert_false(gr_tls_ulp_listed(NULL, "tls"));
    char why[300];
    assert_false(gr_tls_ktls_probe(false, why, sizeof why));
    assert_string_equal(why, "off (gregor.ssl.ktls.enable=false)");
    /* on: the answer depends on the kernel; its words do not */
    bool on = gr_tls_ktls_probe(true, why, sizeof why);
    if (on)
        assert_true(!strncmp(why, "available", 9));
    else
        assert_true(!strncmp(why, "unavailable: ", 13));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_ctx_settings),
        cmocka_unit_test(test_handshakes),
        cmocka_unit_test(test_ktls),
        cmocka_unit_test(test_ulp_listed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
