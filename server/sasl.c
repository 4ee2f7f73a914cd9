/*
 * sasl.c: the SASL layer (see sasl.h): the served mechanisms, each listener's enabled set, and each
 * connection's state machine, after Kafka's SaslServerAuthenticator (states INITIAL/HANDSHAKE_OR_VERSIONS,
 * HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED and the re-authentication ones).
 */
#include "server/sasl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/log.h"
#include "common/oauth_login.h"
#include "common/strlist.h"
#include "common/time.h"
#include "protocol/errors.h"
#include "protocol/header.h"
#include "server/broker.h"
#include "server/jaas.h"
#include "server/sasl_oauth.h"
#include "server/sasl_plain.h"
#include "server/sasl_scram.h"

/* The mechanisms Gregor serves (server/sasl_mech.h's interface). */
static const struct gr_sasl_mech *const served[] = {
    &gr_sasl_mech_plain,
    &gr_sasl_mech_scram_sha256,
    &gr_sasl_mech_scram_sha512,
    &gr_sasl_mech_oauthbearer,
};
#define NSERVED ((int)(sizeof served / sizeof served[0]))
#define GR_SASL_ENABLED_MAX 8

struct gr_sasl_listener {
    struct gr_broker *b;
    int count;
    const struct gr_sasl_mech *mechs[GR_SASL_ENABLED_MAX]; /* enabled, in the configured order */
    void *ctx[GR_SASL_ENABLED_MAX];                        /* each one's listener_new context */
    int64_t reauth_ms[GR_SASL_ENABLED_MAX];                /* each one's connections.max.reauth.ms */
    char *names;                                           /* "PLAIN,SCRAM-SHA-256" */
};

enum state {
    S_INITIAL,      /* ApiVersions or SaslHandshake */
    S_HANDSHAKE,    /* after ApiVersions: SaslHandshake only */
    S_AUTH,         /* after SaslHandshake v1: SaslAuthenticate only */
    S_AUTH_RAW,     /* after SaslHandshake v0: raw tokens */
    S_REAUTH_BAD,   /* re-authentication asked for another mechanism: the next token fails */
    S_COMPLETE,     /* authenticated */
    S_REAUTH_SHAKE, /* authenticated, re-authenticating: SaslHandshake taken by the gate */
    S_FAILED,
};

struct gr_sasl {
    struct gr_sasl_listener *l;
    enum state state;
    char peer[64];
    const struct gr_sasl_mech *mech; /* the handshake's mechanism */
    int64_t reauth_ms;               /* its connections.max.reauth.ms on this listener */
    struct gr_sasl_exchange *x;
    bool reauth;        /* the current exchange re-authenticates */
    bool client_reauth; /* the client used SaslAuthenticate v1+ (can re-authenticate) */
    int64_t expiry_ms;  /* monotonic; 0 = the session does not expire */
    char principal[GR_PRINCIPAL_MAX + 1];
    char bad_mech_msg[200];
};

static const struct gr_sasl_mech *served_find(const char *name, size_t len)
{
    for (int i = 0; i < NSERVED; i++)
        if (strlen(served[i]->name) == len && !memcmp(served[i]->name, name, len)) return served[i];
    return NULL;
}

struct gr_sasl_listener *gr_sasl_listener_new(struct gr_broker *b, const char *listener, char *err,
                                              size_t cap)
{
    struct gr_sasl_settings ss;
    gr_config_sasl(&b->cfg, listener, NULL, &ss);
    struct gr_sasl_listener *l = calloc(1, sizeof *l);
    if (!l || !(l->names = calloc(1, strlen(ss.enabled_mechanisms) + 1))) {
        free(l);
        snprintf(err, cap, "out of memory for listener %s's SASL settings", listener);
        return NULL;
    }
    l->b = b;
    const char *list = ss.enabled_mechanisms, *p;
    size_t n;
    while (gr_list_next(&list, &p, &n)) {
        const struct gr_sasl_mech *m = served_find(p, n);
        if (!m) {
            char names[256] = "";
            for (int i = 0; i < NSERVED; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                         served[i]->name);
            snprintf(err, cap,
                     "%s: listener %s enables SASL mechanism '%.*s', which Gregor does not serve (served: "
                     "%s; Kafka's default is GSSAPI, so a SASL listener needs this key set)",
                     ss.enabled_mechanisms_key, listener, (int)(n > 64 ? 64 : n), p, names);
            gr_sasl_listener_free(l);
            return NULL;
        }
        bool dup = false;
        for (int i = 0; i < l->count; i++)
            dup |= l->mechs[i] == m;
        if (!dup && l->count < GR_SASL_ENABLED_MAX) {
            void *ctx = NULL;
            if (m->listener_new && !(ctx = m->listener_new(&b->cfg, listener, err, cap))) {
                gr_sasl_listener_free(l);
                return NULL;
            }
            struct gr_sasl_settings ms;
            gr_config_sasl(&b->cfg, listener, m->name, &ms);
            l->reauth_ms[l->count] =
                ms.reauth_ms ? strtoll(ms.reauth_ms, NULL, 10) : b->cfg.settings.connections_max_reauth_ms;
            l->mechs[l->count] = m;
            l->ctx[l->count++] = ctx;
            if (l->names[0]) strcat(l->names, ",");
            strcat(l->names, m->name);
        }
    }
    if (!l->count) {
        snprintf(err, cap, "%s: listener %s enables no SASL mechanism", ss.enabled_mechanisms_key, listener);
        gr_sasl_listener_free(l);
        return NULL;
    }
    if (ss.broker_jaas_config)
        GR_WARN("config: sasl.jaas.config is a client setting a broker never reads (Kafka neither): listener "
                "%s's users come from listener.name.<listener>.<mechanism>.sasl.jaas.config",
                listener);
    return l;
}

void gr_sasl_listener_free(struct gr_sasl_listener *l)
{
    if (!l) return;
    for (int i = 0; i < l->count; i++)
        if (l->mechs[i]->listener_free) l->mechs[i]->listener_free(l->ctx[i]);
    free(l->names);
    free(l);
}

const char *gr_sasl_listener_mechanisms(const struct gr_sasl_listener *l)
{
    return l->names;
}

struct gr_sasl *gr_sasl_new(struct gr_sasl_listener *l, const char *peer)
{
    struct gr_sasl *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->l = l;
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    return s;
}

static void exchange_end(struct gr_sasl *s)
{
    if (s->x) s->mech->free(s->x);
    s->x = NULL;
}

void gr_sasl_free(struct gr_sasl *s)
{
    if (!s) return;
    exchange_end(s);
    free(s);
}

static const char *key_name(int16_t key)
{
    const struct gr_api *api = gr_api_find(key);
    return api ? api->name : "unknown";
}

enum gr_sasl_gate gr_sasl_gate(struct gr_sasl *s, const uint8_t *frame, size_t len, int64_t now_ms,
                               const char **why)
{
    *why = NULL;
    if (s->state == S_FAILED) {
        *why = "SASL authentication failed";
        return GR_SASL_CLOSE;
    }
    if (s->state == S_AUTH_RAW) return GR_SASL_RAW;
    int16_t key, version;
    int32_t corr;
    if (gr_request_header_peek(frame, len, &key, &version, &corr)) {
        *why = "not a Kafka request during SASL authentication";
        return GR_SASL_CLOSE;
    }
    switch (s->state) {
    case S_INITIAL:
        if (key == GR_API_API_VERSIONS) {
            const struct gr_api *api = gr_api_find(key);
            /* an unsupported version is answered (KIP-511) and leaves the state as it was, as Kafka's */
            if (api && version <= api->served_max)
                s->state = S_HANDSHAKE; /* one ApiVersions, then the handshake (Kafka's HANDSHAKE_REQUEST) */
            return GR_SASL_PASS;
        }
        /* fall through */
    case S_HANDSHAKE:
    case S_REAUTH_SHAKE:
        if (key == GR_API_SASL_HANDSHAKE) return GR_SASL_PASS;
        GR_LOG_RATELIMITED(GR_LOG_INFO, "connection %s: unexpected %s request during SASL handshake, closing",
                           s->peer, key_name(key));
        *why = "unexpected request during SASL handshake";
        return GR_SASL_CLOSE;
    case S_AUTH:
    case S_REAUTH_BAD:
        if (key == GR_API_SASL_AUTHENTICATE) return GR_SASL_PASS;
        GR_LOG_RATELIMITED(GR_LOG_INFO,
                           "connection %s: unexpected %s request during SASL authentication, closing",
                           s->peer, key_name(key));
        *why = "unexpected request during SASL authentication";
        return GR_SASL_CLOSE;
    case S_COMPLETE:
        if (key == GR_API_SASL_HANDSHAKE && s->client_reauth) { /* KIP-368: re-authentication begins */
            s->state = S_REAUTH_SHAKE;
            return GR_SASL_PASS;
        }
        if (s->expiry_ms && now_ms > s->expiry_ms) { /* Kafka: SocketServer closes an expired channel */
            GR_LOG_RATELIMITED(GR_LOG_INFO,
                               "connection %s: SASL session expired (connections.max.reauth.ms) without "
                               "re-authentication, closing",
                               s->peer);
            *why = "SASL session expired";
            return GR_SASL_CLOSE;
        }
        return GR_SASL_PASS;
    default:
        *why = "SASL state";
        return GR_SASL_CLOSE;
    }
}

int64_t gr_sasl_frame_max(const struct gr_sasl *s, int64_t socket_max)
{
    if (s->state == S_COMPLETE) return socket_max;
    return s->l->b->cfg.settings.sasl_server_max_receive_size;
}

bool gr_sasl_failed(const struct gr_sasl *s)
{
    return s->state == S_FAILED;
}

bool gr_sasl_in_handshake(const struct gr_sasl *s)
{
    return s->state != S_COMPLETE;
}

static void fail(struct gr_sasl *s, const char *mech, const char *msg)
{
    GR_LOG_RATELIMITED(GR_LOG_INFO, "Failed %s with %s (SASL mechanism %s: %s), closing",
                       s->reauth ? "re-authentication" : "authentication", s->peer, mech, msg);
    exchange_end(s);
    s->state = S_FAILED;
}

bool gr_sasl_handshake(struct gr_sasl *s, int16_t version, const struct gr_sasl_handshake_request *body,
                       struct gr_sasl_handshake_response *resp, struct gr_arena *arena)
{
    if (!s || (s->state != S_INITIAL && s->state != S_HANDSHAKE && s->state != S_REAUTH_SHAKE)) {
        resp->error_code = GR_ERR_ILLEGAL_SASL_STATE; /* KafkaApis: a handshake after authentication */
        return false;
    }
    struct gr_sasl_listener *l = s->l;
    resp->mechanisms.items = gr_arena_calloc(arena, (size_t)l->count, sizeof *resp->mechanisms.items);
    resp->mechanisms.count = resp->mechanisms.items ? l->count : 0;
    for (int i = 0; i < resp->mechanisms.count; i++)
        resp->mechanisms.items[i] = gr_str_c(l->mechs[i]->name);
    int at = -1;
    for (int i = 0; i < l->count && body->mechanism.len >= 0; i++)
        if (gr_str_eq_c(body->mechanism, l->mechs[i]->name)) at = i;
    bool reauth = s->state == S_REAUTH_SHAKE;
    if (at < 0 || (reauth && version == 0)) {
        resp->error_code = GR_ERR_UNSUPPORTED_SASL_MECHANISM;
        s->reauth = reauth;
        fail(s, "(none)", "Unsupported SASL mechanism requested");
        return true;
    }
    const struct gr_sasl_mech *m = l->mechs[at];
    if (reauth && m != s->mech) { /* Kafka answers the handshake, then fails the next token */
        snprintf(
            s->bad_mech_msg, sizeof s->bad_mech_msg,
            "SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism "
            "'%s'",
            m->name, s->mech->name);
        s->reauth = true;
        s->state = S_REAUTH_BAD;
        return false;
    }
    exchange_end(s);
    s->mech = m;
    s->reauth_ms = l->reauth_ms[at];
    s->x = m->start_listener ? m->start_listener(l->b, l->ctx[at]) : m->start(l->b);
    if (!s->x) {
        resp->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
        s->state = S_FAILED;
        return false;
    }
    s->reauth = reauth;
    s->state = version == 0 ? S_AUTH_RAW : S_AUTH;
    return false;
}

/* One step of the exchange; on FAIL *msg holds the message for the client. */
static enum gr_sasl_step_rc step(struct gr_sasl *s, const uint8_t *in, size_t len, uint8_t **out,
                                 size_t *out_len, int64_t *lifetime_out, char *msg, size_t cap)
{
    *out = NULL;
    *out_len = 0;
    *lifetime_out = 0;
    msg[0] = 0;
    if (s->state == S_REAUTH_BAD) {
        snprintf(msg, cap, "%s", s->bad_mech_msg);
        fail(s, s->mech->name, msg);
        return GR_SASL_FAIL;
    }
    char principal[GR_PRINCIPAL_MAX + 1] = "";
    int64_t cred_ms = 0;
    enum gr_sasl_step_rc rc = GR_SASL_FAIL;
    if (len <= GR_SASL_TOKEN_MAX)
        rc = s->mech->step(s->x, in, len, out, out_len, principal, sizeof principal, &cred_ms, msg, cap);
    if (rc == GR_SASL_DONE && s->reauth && strcmp(principal, s->principal)) {
        /* KIP-368: SaslServerAuthenticator.ensurePrincipalUnchanged, "Type.name" */
        const char *oc = strchr(s->principal, ':'), *nc = strchr(principal, ':');
        snprintf(msg, cap, "Cannot change principals during re-authentication from %.*s.%.200s: %.*s.%.200s",
                 oc ? (int)(oc - s->principal) : 0, s->principal, oc ? oc + 1 : s->principal,
                 nc ? (int)(nc - principal) : 0, principal, nc ? nc + 1 : principal);
        free(*out);
        *out = NULL;
        *out_len = 0;
        rc = GR_SASL_FAIL;
    }
    if (rc == GR_SASL_FAIL) {
        if (!msg[0])
            snprintf(msg, cap,
                     "Authentication failed during %s due to invalid credentials with SASL mechanism %s",
                     s->reauth ? "re-authentication" : "authentication", s->mech->name);
        fail(s, s->mech->name, msg);
        return rc;
    }
    if (rc == GR_SASL_DONE) {
        /* KIP-368: the session lives connections.max.reauth.ms, bounded by the credential's own lifetime */
        int64_t max = s->reauth_ms, life = 0;
        if (max > 0 || cred_ms > 0) {
            life = max > 0 && cred_ms > 0 ? (max < cred_ms ? max : cred_ms) : (max > 0 ? max : cred_ms);
            s->expiry_ms = gr_time_mono_ms() + life;
        } else {
            s->expiry_ms = 0;
        }
        *lifetime_out = life;
        snprintf(s->principal, sizeof s->principal, "%s", principal);
        exchange_end(s);
        s->state = S_COMPLETE;
        GR_DEBUG("connection %s: SASL %s %s as %s", s->peer, s->mech->name,
                 s->reauth ? "re-authenticated" : "authenticated", s->principal);
        s->reauth = false;
    }
    return rc;
}

bool gr_sasl_authenticate(struct gr_sasl *s, int16_t version, const struct gr_sasl_authenticate_request *body,
                          struct gr_sasl_authenticate_response *resp, struct gr_arena *arena,
                          const char **principal)
{
    *principal = NULL;
    if (!s || (s->state != S_AUTH && s->state != S_REAUTH_BAD)) {
        /* KafkaApis: SaslAuthenticate after authentication (or on a listener without SASL) */
        resp->error_code = GR_ERR_ILLEGAL_SASL_STATE;
        resp->error_message = gr_str_c("SaslAuthenticate request received after successful authentication");
        return false;
    }
    if (version > 0) s->client_reauth = true; /* any SaslAuthenticate v1+ says it can re-authenticate */
    uint8_t *out;
    size_t out_len;
    int64_t life;
    char msg[512];
    size_t in_len = body->auth_bytes.len > 0 ? (size_t)body->auth_bytes.len : 0;
    enum gr_sasl_step_rc rc = step(s, body->auth_bytes.ptr, in_len, &out, &out_len, &life, msg, sizeof msg);
    if (rc == GR_SASL_FAIL) {
        resp->error_code = GR_ERR_SASL_AUTHENTICATION_FAILED;
        size_t n = strlen(msg);
        char *m = gr_arena_alloc(arena, n + 1);
        if (m) memcpy(m, msg, n + 1);
        resp->error_message = m ? gr_str_c(m) : gr_str_c("SASL Authentication failed.");
        return true;
    }
    uint8_t *copy = out_len ? gr_arena_alloc(arena, out_len) : NULL;
    if (copy) memcpy(copy, out, out_len);
    free(out);
    if (out_len && !copy) {
        resp->error_code = GR_ERR_UNKNOWN_SERVER_ERROR;
        s->state = S_FAILED;
        return false;
    }
    resp->auth_bytes.ptr = copy;
    resp->auth_bytes.len = (int32_t)out_len;
    resp->session_lifetime_ms = life;
    if (rc == GR_SASL_DONE) *principal = s->principal;
    return false;
}

enum gr_sasl_step_rc gr_sasl_raw_token(struct gr_sasl *s, const uint8_t *in, size_t len, uint8_t **out,
                                       size_t *out_len, const char **principal)
{
    *principal = NULL;
    int64_t life;
    char msg[512];
    enum gr_sasl_step_rc rc = step(s, in, len, out, out_len, &life, msg, sizeof msg);
    if (rc == GR_SASL_DONE) *principal = s->principal;
    return rc;
}

/* OAUTHBEARER between brokers: the login's unsecuredLogin* options of the listener's OAuthBearerLoginModule
 * entry `j` (read from `key`), as Kafka's default OAuthBearerUnsecuredLoginCallbackHandler takes them; the
 * token's subject becomes b->ib_sasl_username (logs). Returns 0 or -1 with a message naming the key. */
static int inter_broker_oauth(struct gr_broker *b, const struct gr_jaas *j, const char *key,
                              const char *listener, char *err, size_t cap)
{
    char why[400] = "";
    struct gr_oauth_login *lg = gr_oauth_login_new();
    int rc = lg ? 0 : -1;
    for (int i = 0; lg && rc == 0 && i < j->count; i++)
        rc = gr_oauth_login_option(lg, j->keys[i], j->values[i], why, sizeof why) < 0 ? -1 : 0;
    if (lg && rc == 0) rc = gr_oauth_login_check(lg, why, sizeof why);
    if (rc == 0 && !(b->ib_sasl_username = strdup(gr_oauth_login_principal(lg)))) rc = -1;
    if (rc) {
        snprintf(err, cap, "%s: the inter-broker listener %s logs in with OAUTHBEARER: %s", key, listener,
                 why[0] ? why : "out of memory");
        gr_oauth_login_free(lg);
        return -1;
    }
    b->ib_sasl_mechanism = gr_sasl_mech_oauthbearer.name;
    b->ib_oauth_login = lg;
    return 0;
}

int gr_sasl_inter_broker_setup(struct gr_broker *b, const char *listener, const struct gr_sasl_listener *l,
                               char *err, size_t cap)
{
    const char *mech = b->cfg.settings.sasl_mechanism_inter_broker_protocol;
    const struct gr_sasl_mech *m = mech ? served_find(mech, strlen(mech)) : NULL;
    if (!m) {
        snprintf(
            err, cap,
            "sasl.mechanism.inter.broker.protocol: the inter-broker listener %s is SASL, and Gregor speaks "
            "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER to other brokers, got '%.64s'%s",
            listener, mech ? mech : "", mech && !strcmp(mech, "GSSAPI") ? " (Kafka's default: set it)" : "");
        return -1;
    }
    bool enabled = false;
    for (int i = 0; i < l->count; i++)
        enabled |= l->mechs[i] == m;
    if (!enabled) {
        /* Kafka's KafkaConfig: sasl.mechanism.inter.broker.protocol must be included in
           sasl.enabled.mechanisms when SASL is used for inter-broker communication */
        struct gr_sasl_settings ss;
        gr_config_sasl(&b->cfg, listener, NULL, &ss);
        snprintf(err, cap,
                 "sasl.mechanism.inter.broker.protocol: %s must be included in %s (%s) of the inter-broker "
                 "listener %s",
                 m->name, ss.enabled_mechanisms_key, l->names, listener);
        return -1;
    }
    struct gr_sasl_settings ms;
    gr_config_sasl(&b->cfg, listener, m->name, &ms);
    struct gr_jaas j;
    char jerr[300];
    if (!ms.jaas_config) {
        snprintf(err, cap,
                 "%s: unset, and it holds this broker's username and password for the inter-broker "
                 "listener %s",
                 ms.jaas_config_key, listener);
        return -1;
    }
    if (gr_jaas_parse(ms.jaas_config, &j, jerr, sizeof jerr)) {
        snprintf(err, cap, "%s: %s", ms.jaas_config_key, jerr);
        gr_jaas_free(&j);
        return -1;
    }
    if (m == &gr_sasl_mech_oauthbearer) {
        int rc = inter_broker_oauth(b, &j, ms.jaas_config_key, listener, err, cap);
        gr_jaas_free(&j);
        return rc;
    }
    const char *user = gr_jaas_option(&j, "username"), *pass = gr_jaas_option(&j, "password");
    if (!user || !*user || !pass || !*pass || strlen(user) > GR_PRINCIPAL_MAX - 5) {
        snprintf(
            err, cap,
            "%s: the inter-broker listener %s needs this broker's own credentials in it: username=\"...\" "
            "password=\"...\" (%s)",
            ms.jaas_config_key, listener,
            !user || !*user   ? "no username"
            : !pass || !*pass ? "no password"
                              : "username too long");
        gr_jaas_free(&j);
        return -1;
    }
    b->ib_sasl_mechanism = m->name;
    b->ib_sasl_username = strdup(user);
    b->ib_sasl_password = strdup(pass);
    gr_jaas_free(&j);
    if (!b->ib_sasl_username || !b->ib_sasl_password) {
        gr_sasl_inter_broker_free(b);
        snprintf(err, cap, "out of memory for the inter-broker SASL credentials");
        return -1;
    }
    return 0;
}

void gr_sasl_inter_broker_free(struct gr_broker *b)
{
    if (b->ib_sasl_password) OPENSSL_cleanse(b->ib_sasl_password, strlen(b->ib_sasl_password));
    free(b->ib_sasl_password);
    free(b->ib_sasl_username);
    b->ib_sasl_password = b->ib_sasl_username = NULL;
    gr_oauth_login_free(b->ib_oauth_login);
    b->ib_oauth_login = NULL;
    b->ib_sasl_mechanism = NULL;
}
