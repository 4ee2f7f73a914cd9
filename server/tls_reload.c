/*
 * tls_reload.c: certificate reload without restart; see tls_reload.h. The checks follow Kafka's
 * SslFactory.createNewSslEngineFactory and CertificateEntries.ensureCompatible (a PEM keystore is one entry,
 * alias "kafka" as Kafka's PEM store names it); the messages are Kafka's, with Gregor's reason when the new
 * store cannot be built at all.
 */
#include "server/tls_reload.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cluster/broker_client.h"
#include "cluster/remote_summary.h"
#include "common/log.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "server/config.h"
#include "server/tls.h"

#define WRAP "Validation of dynamic config update of SSLFactory failed: "
#define CONFIG_EXC "org.apache.kafka.common.config.ConfigException: "

struct gr_tls_reload {
    int count;
    int listener[GR_LISTENERS_MAX];
    SSL_CTX *ctx[GR_LISTENERS_MAX];
    SSL_CTX *ib_ctx; /* the inter-broker listener is among them: its new client context, else NULL */
};

void gr_tls_reload_free(struct gr_tls_reload *r)
{
    if (!r) return;
    for (int i = 0; i < r->count; i++)
        gr_tls_ctx_free(r->ctx[i]);
    gr_tls_ctx_free(r->ib_ctx);
    free(r);
}

void gr_tls_reload_apply(struct gr_broker *b, struct gr_tls_reload *r)
{
    if (!r) return;
    for (int i = 0; i < r->count; i++) {
        struct gr_listener *l = &b->listeners[r->listener[i]];
        gr_tls_ctx_free(l->tls_ctx); /* each connection's SSL object keeps its own reference */
        l->tls_ctx = r->ctx[i];
        r->ctx[i] = NULL;
        GR_INFO("listener %s: new TLS context (keystore/truststore reloaded): new handshakes use it",
                l->name);
    }
    r->count = 0;
    if (r->ib_ctx) {
        /* the inter-broker clients read their context at each connect (loop thread, as this handler) */
        SSL_CTX *old = b->ib_tls_ctx;
        b->ib_tls_ctx = r->ib_ctx;
        r->ib_ctx = NULL;
        if (b->broker_client) gr_broker_client_set_tls_ctx(b->broker_client, b->ib_tls_ctx);
        if (b->remote_summary) gr_remote_summary_set_tls_ctx(b->remote_summary, b->ib_tls_ctx);
        gr_tls_ctx_free(old); /* established inter-broker connections keep their SSL object's reference */
        GR_INFO("listener %s: new inter-broker client TLS context: new connections to other brokers use it",
                b->cfg.settings.inter_broker_listener);
    }
    free(r);
}

/* Whether one of `named` is listener.name.<listener in lower case>.<anything>. */
static bool names_listener(const char *listener, const char *const *named, int nnamed)
{
    char prefix[GR_LISTENER_NAME_BYTES_MAX + 32];
    size_t n = (size_t)snprintf(prefix, sizeof prefix, "listener.name.");
    for (size_t i = 0; listener[i] && n < sizeof prefix - 2; i++)
        prefix[n++] = (char)tolower((unsigned char)listener[i]);
    prefix[n++] = '.';
    prefix[n] = 0;
    for (int i = 0; i < nnamed; i++)
        if (!strncmp(named[i], prefix, n)) return true;
    return false;
}

/* Java's X500Principal.toString form is close to RFC 2253 with ", " between RDNs. */
static void dn_text(const X509 *x, char *out, size_t cap)
{
    out[0] = 0;
    BIO *bio = BIO_new(BIO_s_mem());
    if (!bio) return;
    X509_NAME_print_ex(bio, X509_get_subject_name(x), 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
    int n = BIO_read(bio, out, (int)cap - 1);
    out[n > 0 ? n : 0] = 0;
    BIO_free(bio);
}

/* The SubjectAltNames as Java's getSubjectAlternativeNames prints them: [[2, dns], [7, ip], ...]. */
static void san_text(const GENERAL_NAMES *names, char *out, size_t cap)
{
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names) && o < cap; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        char v[64] = "?";
        if (g->type == GEN_DNS || g->type == GEN_EMAIL || g->type == GEN_URI) {
            const ASN1_IA5STRING *s = g->d.ia5;
            snprintf(v, sizeof v, "%.*s", ASN1_STRING_length(s) < 60 ? ASN1_STRING_length(s) : 60,
                     (const char *)ASN1_STRING_get0_data(s));
        } else if (g->type == GEN_IPADD && ASN1_STRING_length(g->d.ip) == 4) {
            const unsigned char *a = ASN1_STRING_get0_data(g->d.ip);
            snprintf(v, sizeof v, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
        }
        o += (size_t)snprintf(out + o, cap - o, "%s[%d, %s]", i ? ", " : "", g->type, v);
    }
    if (o < cap) snprintf(out + o, cap - o, "]");
}

/* Every SubjectAltName of `old` is in `new` (Kafka: newEntry.subjectAltNames.containsAll(old)). */
static bool san_contains(const GENERAL_NAMES *new_names, const GENERAL_NAMES *old_names)
{
    for (int i = 0; old_names && i < sk_GENERAL_NAME_num(old_names); i++) {
        bool found = false;
        for (int k = 0; !found && new_names && k < sk_GENERAL_NAME_num(new_names); k++)
            found = GENERAL_NAME_cmp(sk_GENERAL_NAME_value(old_names, i),
                                     sk_GENERAL_NAME_value(new_names, k)) == 0;
        if (!found) return false;
    }
    return true;
}

static bool is_true(const char *v)
{
    return v && !strcasecmp(v, "true");
}

/* CertificateEntries.ensureCompatible for the one certificate of each keystore. 0, or -1 with msg. */
static int compatible(SSL_CTX *oldc, SSL_CTX *newc, const struct gr_ssl_settings *s, char *msg, size_t cap)
{
    X509 *o = SSL_CTX_get0_certificate(oldc), *n = SSL_CTX_get0_certificate(newc);
    if (!o || !n) return 0;
    char od[512], nd[512];
    if (!is_true(s->allow_dn_changes) && X509_NAME_cmp(X509_get_subject_name(o), X509_get_subject_name(n))) {
        dn_text(o, od, sizeof od);
        dn_text(n, nd, sizeof nd);
        snprintf(msg, cap,
                 WRAP CONFIG_EXC "Keystore DistinguishedName does not match:  existing={alias=kafka, DN=%s}, "
                                 "new={alias=kafka, DN=%s}",
                 od, nd);
        return -1;
    }
    if (is_true(s->allow_san_changes)) return 0;
    GENERAL_NAMES *os = X509_get_ext_d2i(o, NID_subject_alt_name, NULL, NULL);
    GENERAL_NAMES *ns = X509_get_ext_d2i(n, NID_subject_alt_name, NULL, NULL);
    int rc = 0;
    if (!san_contains(ns, os)) {
        san_text(os, od, sizeof od);
        san_text(ns, nd, sizeof nd);
        snprintf(msg, cap,
                 WRAP CONFIG_EXC "Keystore SubjectAltNames do not match:  existing={alias=kafka, SAN=%s}, "
                                 "new={alias=kafka, SAN=%s}",
                 od, nd);
        rc = -1;
    }
    GENERAL_NAMES_free(os);
    GENERAL_NAMES_free(ns);
    return rc;
}

int16_t gr_tls_reload_prepare(struct gr_broker *b, const char *const *keys, const char *const *values,
                              int count, const char *const *named, int nnamed, struct gr_tls_reload **out,
                              char *msg, size_t cap)
{
    *out = NULL;
    int nssl = 0;
    for (int i = 0; i < count; i++)
        nssl += gr_config_ssl_dynamic_key(keys[i]);
    if (nssl > GR_CONFIG_SSL_KEYS_MAX) {
        snprintf(msg, cap, "More than %d dynamic listener SSL configs", GR_CONFIG_SSL_KEYS_MAX);
        return GR_ERR_INVALID_REQUEST;
    }
    struct gr_tls_reload *r = NULL;
    for (int i = 0; i < b->listener_count; i++) {
        struct gr_listener *l = &b->listeners[i];
        if (!l->tls_ctx || !names_listener(l->name, named, nnamed)) continue;
        struct gr_ssl_settings olds, news;
        gr_config_ssl(&b->cfg, l->name, &olds);
        gr_config_ssl_with(&b->cfg, l->name, keys, values, count, &news);
        if (!r && !(r = calloc(1, sizeof *r))) {
            snprintf(msg, cap, "Out of memory");
            return GR_ERR_UNKNOWN_SERVER_ERROR;
        }
        char err[900];
        SSL_CTX *ctx = gr_tls_ctx_new(l->name, &news, err, sizeof err);
        if (!ctx) {
            snprintf(msg, cap, WRAP CONFIG_EXC "%s", err);
            goto refused;
        }
        r->listener[r->count] = i;
        r->ctx[r->count++] = ctx;
        if (compatible(l->tls_ctx, ctx, &news, msg, cap)) goto refused;
        bool had_trust = olds.truststore_location || olds.truststore_certificates;
        if (!had_trust && (news.truststore_location || news.truststore_certificates)) {
            snprintf(msg, cap,
                     WRAP CONFIG_EXC
                     "Cannot add SSL truststore to an existing listener for which no truststore "
                     "was configured.");
            goto refused;
        }
        /* the inter-broker listener: its outgoing side too (Kafka's inter-broker clients add their
           channel builder to the broker's reconfigurables); the same failure wrapping */
        if (b->ib_tls_ctx && !strcmp(l->name, b->cfg.settings.inter_broker_listener)) {
            bool verify_host; /* ssl.endpoint.identification.algorithm is not reconfigurable: unchanged */
            if (!(r->ib_ctx = gr_tls_client_ctx_new(l->name, &news, &verify_host, err, sizeof err))) {
                snprintf(msg, cap, WRAP CONFIG_EXC "%s", err);
                goto refused;
            }
        }
    }
    *out = r;
    return GR_ERR_NONE;
refused:
    gr_tls_reload_free(r);
    return GR_ERR_INVALID_REQUEST;
}
