/*
 * sasl_plain.c: SASL/PLAIN (see sasl_plain.h). One step: the client's only message is
 * [authzid] NUL authcid NUL passwd; the answer is an empty token on success. Messages as Kafka's
 * PlainSaslServer: an empty user name or password, or a user name that does not fit a principal, get the
 * generic message (empty err, see sasl_mech.h); a wrong password and an unknown user alike get
 * "Authentication failed: Invalid username or password" (an unknown user is compared against a dummy
 * password so both take the same time); an authzid other than the user name gets "Authentication failed:
 * Client requested an authorization id that is different from username". The principal is User:<name>.
 */
#include "server/sasl_plain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/config.h"
#include "server/jaas.h"

#define PLAIN_MODULE "org.apache.kafka.common.security.plain.PlainLoginModule"

struct gr_sasl_exchange {
    const struct gr_jaas *users; /* the listener's JAAS entry (borrowed: lives as long as the broker) */
    int finished;                /* a step was taken: any later one fails */
};

int gr_sasl_plain_parse(const uint8_t *in, size_t len, struct gr_plain_msg *out)
{
    const uint8_t *end = in + len, *p = in;
    const uint8_t *parts[3] = {p, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        parts[i] = p;
        const uint8_t *nul = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        if (!nul) {
            lens[i] = (size_t)(end - p);
            p = end;
            for (int k = i + 1; k < 3; k++) {
                parts[k] = end;
                lens[k] = 0;
            }
            break;
        }
        lens[i] = (size_t)(nul - p);
        p = nul + 1;
    }
    out->authzid = parts[0];
    out->authzid_len = lens[0];
    out->user = parts[1];
    out->user_len = lens[1];
    out->pass = parts[2];
    out->pass_len = lens[2];
    return out->user_len && out->pass_len ? 0 : -1;
}

int gr_sasl_plain_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    unsigned acc = alen != blen;
    for (size_t i = 0; i < blen; i++)
        acc |= (unsigned)(b[i] ^ (i < alen ? a[i] : (uint8_t)~b[i]));
    return acc == 0;
}

static void *plain_listener_new(const struct gr_config *cfg, const char *listener, char *err, size_t cap)
{
    struct gr_sasl_settings ss;
    gr_config_sasl(cfg, listener, "PLAIN", &ss);
    if (!ss.jaas_config) {
        snprintf(err, cap,
                 "%s is not set: listener %s serves PLAIN and needs its users (%s required "
                 "user_<name>=\"<password>\" ...;)%s",
                 ss.jaas_config_key, listener, PLAIN_MODULE,
                 ss.broker_jaas_config ? "; sasl.jaas.config is a client setting a broker never reads" : "");
        return NULL;
    }
    struct gr_jaas *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, cap, "%s: out of memory", ss.jaas_config_key);
        return NULL;
    }
    char why[300];
    if (gr_jaas_parse(ss.jaas_config, j, why, sizeof why)) {
        snprintf(err, cap, "%s: cannot parse the JAAS config: %s", ss.jaas_config_key, why);
        gr_jaas_free(j);
        free(j);
        return NULL;
    }
    if (strcmp(j->module, PLAIN_MODULE)) {
        snprintf(err, cap, "%s: the login module is '%.200s', PLAIN needs %s", ss.jaas_config_key, j->module,
                 PLAIN_MODULE);
        gr_jaas_free(j);
        free(j);
        return NULL;
    }
    return j;
}

static void plain_listener_free(void *ctx)
{
    if (!ctx) return;
    gr_jaas_free(ctx);
    free(ctx);
}

static struct gr_sasl_exchange *plain_start_listener(struct gr_broker *b, void *ctx)
{
    (void)b;
    struct gr_sasl_exchange *x = calloc(1, sizeof *x);
    if (x) x->users = ctx;
    return x;
}

static struct gr_sasl_exchange *plain_start(struct gr_broker *b)
{
    (void)b;
    return calloc(1, sizeof(struct gr_sasl_exchange)); /* no users: every step fails */
}

static enum gr_sasl_step_rc plain_step(struct gr_sasl_exchange *x, const uint8_t *in, size_t in_len,
                                       uint8_t **out, size_t *out_len, char *principal, size_t principal_cap,
                                       int64_t *lifetime_ms, char *err, size_t err_cap)
{
    *out = NULL;
    *out_len = 0;
    *lifetime_ms = 0;
    err[0] = 0;
    if (x->finished) return GR_SASL_FAIL;
    x->finished = 1;
    struct gr_plain_msg m;
    if (gr_sasl_plain_parse(in, in_len, &m)) return GR_SASL_FAIL; /* generic message */
    if (m.user_len + sizeof "user_" > GR_JAAS_VALUE_MAX || m.user_len + sizeof "User:" > principal_cap)
        return GR_SASL_FAIL;
    char key[GR_JAAS_VALUE_MAX + 8];
    memcpy(key, "user_", 5);
    memcpy(key + 5, m.user, m.user_len);
    key[5 + m.user_len] = 0;
    const char *expected = x->users && strlen(key) == 5 + m.user_len ? gr_jaas_option(x->users, key) : NULL;
    static const char dummy[] = "gregor-plain-dummy-password-for-unknown-users";
    const char *cmp = expected ? expected : dummy;
    int ok = gr_sasl_plain_equal(m.pass, m.pass_len, (const uint8_t *)cmp, strlen(cmp)) && expected;
    if (!ok) {
        snprintf(err, err_cap, "Authentication failed: Invalid username or password");
        return GR_SASL_FAIL;
    }
    if (m.authzid_len && (m.authzid_len != m.user_len || memcmp(m.authzid, m.user, m.user_len))) {
        snprintf(
            err, err_cap,
            "Authentication failed: Client requested an authorization id that is different from username");
        return GR_SASL_FAIL;
    }
    snprintf(principal, principal_cap, "User:%.*s", (int)m.user_len, (const char *)m.user);
    return GR_SASL_DONE;
}

static void plain_free(struct gr_sasl_exchange *x)
{
    free(x);
}

const struct gr_sasl_mech gr_sasl_mech_plain = {
    .name = "PLAIN",
    .start = plain_start,
    .step = plain_step,
    .free = plain_free,
    .listener_new = plain_listener_new,
    .listener_free = plain_listener_free,
    .start_listener = plain_start_listener,
};
