/*
 * sasl_scram.c: the SCRAM server mechanisms (RFC 5802, RFC 7677). See sasl_scram.h.
 */
#include "server/sasl_scram.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "server/broker.h"

_Static_assert(GR_SCRAM_NAME_MAX + 5 <= GR_PRINCIPAL_MAX, "a SCRAM user's principal must fit");

#define B64_LEN(n) (4 * (((n) + 2) / 3))
#define GS2_MAX (3 + 2 + 3 * GR_SCRAM_NAME_MAX + 1) /* "n,a=<escaped authzid>," */
#define FAKE_ITERATIONS 4096
#define FAKE_SALT_LEN 26 /* as long as the salts Kafka's admin client makes (ScramFormatter) */

enum state { CLIENT_FIRST, CLIENT_FINAL, ENDED };

struct gr_sasl_exchange {
    int mech;
    enum state state;
    const struct gr_scram_store *store;
    char server_nonce[64];
    bool unknown; /* no credential: a made-up one, the proof always fails */
    struct gr_scram_cred cred;
    char user[GR_SCRAM_NAME_MAX + 1];
    size_t user_len;
    char gs2[GS2_MAX]; /* the gs2 header as sent, for the channel binding check */
    size_t gs2_len;
    char *auth_msg; /* client-first-bare "," server-first "," (client-final-without-proof appended later) */
    size_t auth_len;
    char *nonce; /* client nonce + server nonce */
    size_t nonce_len;
};

static const EVP_MD *md_of(int mech)
{
    return mech == GR_SCRAM_SHA_256 ? EVP_sha256() : EVP_sha512();
}

/* A per-process secret for the made-up credentials of unknown users. */
static uint8_t fake_secret[32];
static bool fake_secret_set;

struct gr_sasl_exchange *gr_scram_exchange_new(const struct gr_scram_store *store, int mech,
                                               const char *server_nonce)
{
    if (!gr_scram_digest_len(mech) || !store) return NULL;
    struct gr_sasl_exchange *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->mech = mech;
    x->store = store;
    if (server_nonce) {
        size_t n = strlen(server_nonce);
        if (n == 0 || n >= sizeof x->server_nonce) return free(x), NULL;
        for (size_t i = 0; i < n; i++)
            if (server_nonce[i] < 0x21 || server_nonce[i] > 0x7e || server_nonce[i] == ',')
                return free(x), NULL;
        memcpy(x->server_nonce, server_nonce, n + 1);
    } else {
        uint8_t r[18];
        if (RAND_bytes(r, sizeof r) != 1) return free(x), NULL;
        gr_scram_b64(r, sizeof r, x->server_nonce); /* 24 characters, none of them ',' */
    }
    if (!fake_secret_set) {
        if (RAND_bytes(fake_secret, sizeof fake_secret) != 1) return free(x), NULL;
        fake_secret_set = true;
    }
    return x;
}

static void scram_free(struct gr_sasl_exchange *x)
{
    if (!x) return;
    if (x->auth_msg) OPENSSL_cleanse(x->auth_msg, x->auth_len);
    free(x->auth_msg);
    free(x->nonce);
    OPENSSL_cleanse(x, sizeof *x);
    free(x);
}

static enum gr_sasl_step_rc failed(struct gr_sasl_exchange *x, char *err, size_t cap, const char *msg)
{
    x->state = ENDED;
    OPENSSL_cleanse(&x->cred, sizeof x->cred);
    if (msg)
        snprintf(err, cap, "%s", msg);
    else
        snprintf(
            err, cap,
            "Authentication failed during authentication due to invalid credentials with SASL mechanism %s",
            gr_scram_mech_name(x->mech));
    return GR_SASL_FAIL;
}

/* Decodes a saslname (RFC 5802: ',' as "=2C", '=' as "=3D", no other '=') of `n` bytes into out (at most
 * `cap` bytes). Returns the length or -1. Kafka's SASLNAME also refuses NUL. */
static int saslname(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        if (c == 0 || c == ',') return -1;
        if (c == '=') {
            if (i + 2 >= n) return -1;
            if (in[i + 1] == '2' && in[i + 2] == 'C')
                c = ',';
            else if (in[i + 1] == '3' && in[i + 2] == 'D')
                c = '=';
            else
                return -1;
            i += 2;
        }
        if (o >= cap) return -1;
        out[o++] = c;
    }
    return (int)o;
}

static bool printable(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e || p[i] == ',') return false;
    return n > 0;
}

/* The extensions after the nonce: (",<letters>=<value without ',' or NUL>")*. Sets *token when
 * tokenauth=true (any case) is among them. */
static bool extensions(const char *p, size_t n, bool *token)
{
    size_t i = 0;
    while (i < n) {
        if (p[i++] != ',') return false;
        size_t k = i;
        while (i < n && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z')))
            i++;
        if (i == k || i >= n || p[i] != '=') return false;
        size_t klen = i - k, v = ++i;
        while (i < n && p[i] != ',' && p[i] != 0)
            i++;
        if (i == v) return false;
        if (klen == 9 && strncmp(p + k, "tokenauth", 9) == 0 && i - v == 4 &&
            strncasecmp(p + v, "true", 4) == 0)
            *token = true;
    }
    return true;
}

static bool field(const char *p, size_t n, size_t *i, char name, size_t *start, size_t *len)
{
    if (*i + 2 > n || p[*i] != name || p[*i + 1] != '=') return false;
    *start = *i + 2;
    const char *comma = memchr(p + *start, ',', n - *start);
    *len = (comma ? (size_t)(comma - p) : n) - *start;
    *i = *start + *len;
    return true;
}

/* A salt and credential for an unknown user: stable per name within the process, never matching. */
static void fake_cred(struct gr_sasl_exchange *x)
{
    uint8_t h[32];
    unsigned int n = 0;
    HMAC(EVP_sha256(), fake_secret, sizeof fake_secret, (const uint8_t *)x->user, x->user_len, h, &n);
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    for (int i = 0; i < FAKE_SALT_LEN; i++)
        x->cred.salt[i] = (uint8_t)digits[h[i] % 36];
    x->cred.salt_len = FAKE_SALT_LEN;
    x->cred.iterations = FAKE_ITERATIONS;
    RAND_bytes(x->cred.stored_key, sizeof x->cred.stored_key);
    RAND_bytes(x->cred.server_key, sizeof x->cred.server_key);
    x->unknown = true;
}

static enum gr_sasl_step_rc client_first(struct gr_sasl_exchange *x, const char *p, size_t n, uint8_t **out,
                                         size_t *out_len, char *err, size_t cap)
{
    /* gs2-header: "n," [ "a=" saslname ] "," */
    if (n < 3 || p[0] != 'n' || p[1] != ',') return failed(x, err, cap, NULL);
    size_t i = 2;
    char authz[GR_SCRAM_NAME_MAX];
    int authz_len = 0;
    if (p[i] == 'a') {
        size_t s, l;
        if (!field(p, n, &i, 'a', &s, &l) || (authz_len = saslname(p + s, l, authz, sizeof authz)) <= 0)
            return failed(x, err, cap, NULL);
    }
    if (i >= n || p[i] != ',') return failed(x, err, cap, NULL);
    i++;
    if (i > sizeof x->gs2) return failed(x, err, cap, NULL);
    memcpy(x->gs2, p, i);
    x->gs2_len = i;
    size_t bare = i;
    /* client-first-message-bare: "n=" saslname ",r=" nonce extensions ("m=" refused) */
    size_t s, l;
    if (!field(p, n, &i, 'n', &s, &l)) return failed(x, err, cap, NULL);
    int ul = saslname(p + s, l, x->user, GR_SCRAM_NAME_MAX);
    if (ul <= 0) return failed(x, err, cap, NULL);
    x->user_len = (size_t)ul;
    x->user[ul] = 0;
    if (i >= n || p[i] != ',') return failed(x, err, cap, NULL);
    i++;
    size_t ns, nl;
    if (!field(p, n, &i, 'r', &ns, &nl) || nl > GR_SCRAM_NONCE_MAX || !printable(p + ns, nl))
        return failed(x, err, cap, NULL);
    bool token = false;
    if (!extensions(p + i, n - i, &token)) return failed(x, err, cap, NULL);
    if (authz_len > 0 && ((size_t)authz_len != x->user_len || memcmp(authz, x->user, x->user_len) != 0))
        return failed(
            x, err, cap,
            "Authentication failed: Client requested an authorization id that is different from username");

    const struct gr_scram_cred *c =
        token ? NULL : gr_scram_store_cred(x->store, x->user, x->user_len, x->mech);
    if (c && c->iterations >= GR_SCRAM_ITERATIONS_MIN)
        x->cred = *c;
    else
        fake_cred(x);

    size_t snl = strlen(x->server_nonce);
    x->nonce_len = nl + snl;
    x->nonce = malloc(x->nonce_len + 1);
    char *sf = malloc(2 + x->nonce_len + 3 + B64_LEN(GR_SCRAM_SALT_MAX) + 3 + 12 + 1);
    x->auth_msg = malloc((n - bare) + 1 + 2 + x->nonce_len + 3 + B64_LEN(GR_SCRAM_SALT_MAX) + 3 + 12 + 1);
    if (!x->nonce || !sf || !x->auth_msg) return free(sf), failed(x, err, cap, "Out of memory");
    memcpy(x->nonce, p + ns, nl);
    memcpy(x->nonce + nl, x->server_nonce, snl + 1);
    char salt[B64_LEN(GR_SCRAM_SALT_MAX) + 1];
    gr_scram_b64(x->cred.salt, x->cred.salt_len, salt);
    int sfl = sprintf(sf, "r=%s,s=%s,i=%d", x->nonce, salt, x->cred.iterations);
    memcpy(x->auth_msg, p + bare, n - bare);
    x->auth_len = n - bare;
    x->auth_msg[x->auth_len++] = ',';
    memcpy(x->auth_msg + x->auth_len, sf, (size_t)sfl);
    x->auth_len += (size_t)sfl;
    x->auth_msg[x->auth_len++] = ',';
    *out = (uint8_t *)sf;
    *out_len = (size_t)sfl;
    x->state = CLIENT_FINAL;
    return GR_SASL_CONTINUE;
}

static enum gr_sasl_step_rc client_final(struct gr_sasl_exchange *x, const char *p, size_t n, uint8_t **out,
                                         size_t *out_len, char *principal, size_t principal_cap, char *err,
                                         size_t cap)
{
    /* "c=" base64(gs2 header) ",r=" nonce extensions ",p=" base64(proof), the proof last */
    size_t i = 0, s, l;
    uint8_t cb[GS2_MAX];
    if (!field(p, n, &i, 'c', &s, &l) || l > B64_LEN(sizeof cb)) return failed(x, err, cap, NULL);
    int cbl = gr_scram_unb64(p + s, l, cb, sizeof cb);
    if (cbl < 0 || (size_t)cbl != x->gs2_len || memcmp(cb, x->gs2, x->gs2_len) != 0)
        return failed(x, err, cap, NULL);
    if (i >= n || p[i] != ',') return failed(x, err, cap, NULL);
    i++;
    /* Kafka's ScramSaslServer takes a nonce that ends with client + server nonce (endsWith), and
     * librdkafka before 2.x's fix sends the client nonce twice ("r=" client client server): accepted alike.
     * The proof covers the message as sent, so nothing else changes. */
    if (!field(p, n, &i, 'r', &s, &l) || l < x->nonce_len ||
        memcmp(p + s + (l - x->nonce_len), x->nonce, x->nonce_len) != 0)
        return failed(x, err, cap, NULL);
    /* the proof: the last ",p=" */
    size_t pp = n;
    for (size_t k = n; k >= i + 3; k--)
        if (p[k - 3] == ',' && p[k - 2] == 'p' && p[k - 1] == '=') {
            pp = k - 3;
            break;
        }
    if (pp == n) return failed(x, err, cap, NULL);
    bool token = false;
    if (!extensions(p + i, pp - i, &token)) return failed(x, err, cap, NULL);
    size_t dl = gr_scram_digest_len(x->mech);
    uint8_t proof[GR_SCRAM_KEY_MAX];
    size_t pl = n - (pp + 3);
    if (pl != B64_LEN(dl) || gr_scram_unb64(p + pp + 3, pl, proof, sizeof proof) != (int)dl)
        return failed(x, err, cap, NULL);
    char *am = realloc(x->auth_msg, x->auth_len + pp);
    if (!am) return failed(x, err, cap, "Out of memory");
    x->auth_msg = am;
    memcpy(am + x->auth_len, p, pp);
    x->auth_len += pp;

    /* ClientSignature = HMAC(StoredKey, AuthMessage); ClientKey = proof XOR it; H(ClientKey) = StoredKey? */
    const EVP_MD *md = md_of(x->mech);
    uint8_t sig[EVP_MAX_MD_SIZE], key[EVP_MAX_MD_SIZE], stored[EVP_MAX_MD_SIZE];
    unsigned int a = 0, b = 0;
    bool ok = HMAC(md, x->cred.stored_key, (int)dl, (uint8_t *)am, x->auth_len, sig, &a) != NULL && a == dl;
    for (size_t k = 0; k < dl; k++)
        key[k] = proof[k] ^ sig[k];
    ok = ok && EVP_Digest(key, dl, stored, &b, md, NULL) == 1 && b == dl;
    ok = ok && CRYPTO_memcmp(stored, x->cred.stored_key, dl) == 0 && !x->unknown;
    OPENSSL_cleanse(key, sizeof key);
    OPENSSL_cleanse(sig, sizeof sig);
    if (!ok) return failed(x, err, cap, NULL);
    if ((size_t)snprintf(principal, principal_cap, "User:%s", x->user) >= principal_cap)
        return failed(x, err, cap, NULL);
    uint8_t server_sig[EVP_MAX_MD_SIZE];
    if (!HMAC(md, x->cred.server_key, (int)dl, (uint8_t *)am, x->auth_len, server_sig, &a) || a != dl)
        return failed(x, err, cap, NULL);
    char *sf = malloc(2 + B64_LEN(dl) + 1);
    if (!sf) return failed(x, err, cap, "Out of memory");
    memcpy(sf, "v=", 2);
    gr_scram_b64(server_sig, dl, sf + 2);
    *out = (uint8_t *)sf;
    *out_len = strlen(sf);
    x->state = ENDED;
    OPENSSL_cleanse(&x->cred, sizeof x->cred);
    return GR_SASL_DONE;
}

static enum gr_sasl_step_rc scram_step(struct gr_sasl_exchange *x, const uint8_t *in, size_t in_len,
                                       uint8_t **out, size_t *out_len, char *principal, size_t principal_cap,
                                       int64_t *lifetime_ms, char *err, size_t err_cap)
{
    *out = NULL;
    *out_len = 0;
    *lifetime_ms = 0;
    if (in_len > GR_SASL_TOKEN_MAX || (in_len && memchr(in, 0, in_len))) return failed(x, err, err_cap, NULL);
    const char *p = (const char *)in;
    switch (x->state) {
    case CLIENT_FIRST:
        return client_first(x, p, in_len, out, out_len, err, err_cap);
    case CLIENT_FINAL:
        return client_final(x, p, in_len, out, out_len, principal, principal_cap, err, err_cap);
    default:
        return failed(x, err, err_cap, NULL);
    }
}

static struct gr_sasl_exchange *start_256(struct gr_broker *b)
{
    return gr_scram_exchange_new(&b->scram, GR_SCRAM_SHA_256, NULL);
}

static struct gr_sasl_exchange *start_512(struct gr_broker *b)
{
    return gr_scram_exchange_new(&b->scram, GR_SCRAM_SHA_512, NULL);
}

const struct gr_sasl_mech gr_sasl_mech_scram_sha256 = {
    .name = "SCRAM-SHA-256", .start = start_256, .step = scram_step, .free = scram_free};
const struct gr_sasl_mech gr_sasl_mech_scram_sha512 = {
    .name = "SCRAM-SHA-512", .start = start_512, .step = scram_step, .free = scram_free};
