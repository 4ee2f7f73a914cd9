/*
 * alter_user_scram_credentials.c: AlterUserScramCredentials (key 51, KIP-554), v0. Kafka's rules
 * (ScramControlManager.alterCredentials): deletions then upsertions are taken in order; the first entry of a
 * user decides: refused by its checks (empty name UNACCEPTABLE_CREDENTIAL, unknown mechanism
 * UNSUPPORTED_SASL_MECHANISM, a deletion of a credential that does not exist RESOURCE_NOT_FOUND, iterations
 * outside 4096..16384 UNACCEPTABLE_CREDENTIAL), else DUPLICATE_RESOURCE when the user is named again. One
 * result per user: accepted deletions, accepted upsertions, then the refused users. An upsertion carries the
 * salt and the salted password the client computed; the store keeps StoredKey and ServerKey only.
 * The accepted changes take effect in the broker's store at once and the credentials file is rewritten on
 * the I/O pool; the answer waits for the write (KAFKA_STORAGE_ERROR for every accepted user when it fails:
 * the change then stays in memory until the next successful write or a restart).
 * Authorization: Kafka requires ALTER on the CLUSTER resource (KafkaApis, CLUSTER_AUTHORIZATION_FAILED for
 * each distinct user, names sorted, message null: AlterUserScramCredentialsRequest.getErrorResponse), checked
 * before anything else: a refused request changes nothing.
 * Read next: server/scram_store.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/scram_store.h"
#include "storage/store.h"

typedef struct gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result result_t;

struct alter_state {
    result_t *ok; /* the accepted users' rows: [0, ok_count) */
    int32_t ok_count;
    int err;
};

static void stored(struct gr_req *req, void *item, int err, struct gr_topic *t)
{
    (void)req;
    (void)t;
    struct alter_state *st = item;
    st->err = err;
    if (err)
        GR_ERROR("writing %s: %s (SCRAM credentials changed in memory only)", GR_SCRAM_FILE, strerror(-err));
}

static void all_done(struct gr_req *req)
{
    struct alter_state *st = req->hstate;
    if (!st || !st->err) return;
    for (int32_t i = 0; i < st->ok_count; i++) {
        st->ok[i].error_code = GR_ERR_KAFKA_STORAGE_ERROR;
        st->ok[i].error_message = gr_str_c("The broker could not write its SCRAM credentials file");
    }
}

typedef struct gr_alter_user_scram_credentials_request_scram_credential_deletion deletion_t;
typedef struct gr_alter_user_scram_credentials_request_scram_credential_upsertion upsertion_t;

/* Kafka's checks of a user's first entry `i` (deletions first, then upsertions at nd + j). */
static int16_t check(const struct gr_scram_store *s,
                     const struct gr_alter_user_scram_credentials_request *body, int32_t nd, int32_t i,
                     const char **msg)
{
    if (i >= nd) {
        const upsertion_t *u = &body->upsertions.items[i - nd];
        size_t salt_len = u->salt.len > 0 ? (size_t)u->salt.len : 0;
        return gr_scram_check_upsert((size_t)u->name.len, u->mechanism, u->iterations, salt_len, msg);
    }
    const deletion_t *d = &body->deletions.items[i];
    if (d->name.len == 0) return *msg = "Username must not be empty", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (!gr_scram_digest_len(d->mechanism))
        return *msg = "Unknown SCRAM mechanism", GR_ERR_UNSUPPORTED_SASL_MECHANISM;
    if (!gr_scram_store_cred(s, d->name.ptr, (size_t)d->name.len, d->mechanism))
        return *msg = "Attempt to delete a user credential that does not exist", GR_ERR_RESOURCE_NOT_FOUND;
    return GR_ERR_NONE;
}

/* Applies the accepted entry `i` to the store. Returns its error code (NONE when applied). */
static int16_t apply(struct gr_scram_store *s, const struct gr_alter_user_scram_credentials_request *body,
                     int32_t nd, int32_t i, const char **msg)
{
    int err;
    if (i < nd) {
        const deletion_t *d = &body->deletions.items[i];
        err = gr_scram_store_delete(s, d->name.ptr, (size_t)d->name.len, d->mechanism);
    } else {
        const upsertion_t *u = &body->upsertions.items[i - nd];
        err = gr_scram_store_upsert(s, u->name.ptr, (size_t)u->name.len, u->mechanism, u->iterations,
                                    u->salt.ptr, u->salt.len > 0 ? (size_t)u->salt.len : 0,
                                    u->salted_password.ptr,
                                    u->salted_password.len > 0 ? (size_t)u->salted_password.len : 0);
    }
    if (err == -ENOSPC)
        return *msg = "Too many users with SCRAM credentials (10000)", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (err == -EINVAL) return *msg = "Username must not contain NUL", GR_ERR_UNACCEPTABLE_CREDENTIAL;
    if (err) return *msg = "Out of memory", GR_ERR_UNKNOWN_SERVER_ERROR;
    return GR_ERR_NONE;
}

enum gr_handler_rc gr_handle_alter_user_scram_credentials(struct gr_req *req)
{
    struct gr_alter_user_scram_credentials_request *body = req->body;
    struct gr_alter_user_scram_credentials_response *resp = req->resp;
    struct gr_scram_store *s = &req->broker->scram;
    int32_t nd = body->deletions.count > 0 ? body->deletions.count : 0;
    int32_t nu = body->upsertions.count > 0 ? body->upsertions.count : 0;
    int32_t n = nd + nu;
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    int16_t *code = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *code);
    const char **msg = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *msg);
    resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
    struct alter_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
    if (!keys || !code || !msg || !resp->results.items || !st) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        keys[i] = (struct gr_req_key){
            i < nd ? body->deletions.items[i].name : body->upsertions.items[i - nd].name, 0, i};
    bool *repeated; /* keys are sorted by the call: names are read from the request after it */
    int32_t *first = gr_req_keys_first(req, keys, n, &repeated);
    if (!first) return GR_HANDLER_CLOSE;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_ALTER)) { /* KafkaApis: each user once, sorted */
        for (int32_t i = 0; i < n; i++) {
            if (i > 0 && gr_str_eq(keys[i].name, keys[i - 1].name)) continue;
            result_t *r = &resp->results.items[resp->results.count++];
            gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result_init(r);
            r->user = keys[i].name;
            r->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        }
        return GR_HANDLER_DONE;
    }
    bool changed = false;
    for (int32_t i = 0; i < n; i++) { /* each user's first entry decides */
        if (first[i] != i) continue;
        code[i] = check(s, body, nd, i, &msg[i]);
        if (!code[i] && repeated[i])
            code[i] = GR_ERR_DUPLICATE_RESOURCE,
            msg[i] = "A user credential cannot be altered twice in the same request";
    }
    for (int32_t i = 0; i < n; i++) /* every check before the first change: deletions see the old store */
        if (first[i] == i && !code[i]) changed |= (code[i] = apply(s, body, nd, i, &msg[i])) == GR_ERR_NONE;
    for (int pass = 0; pass < 2; pass++) /* accepted users first (deletions, upsertions), then refused ones */
        for (int32_t i = 0; i < n; i++) {
            if (first[i] != i || (pass == 0) != (code[i] == 0)) continue;
            result_t *r = &resp->results.items[resp->results.count++];
            gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result_init(r);
            r->user = i < nd ? body->deletions.items[i].name : body->upsertions.items[i - nd].name;
            r->error_code = code[i];
            if (code[i])
                r->error_message = gr_str_c(msg[i]);
            else
                st->ok_count++;
        }
    st->ok = resp->results.items;
    req->hstate = st;
    if (!changed) return GR_HANDLER_DONE;
    size_t len;
    char *file = gr_scram_store_format(s, &len);
    struct gr_topic_op *op = file ? gr_topic_op_meta_write(GR_SCRAM_FILE, file, len) : NULL;
    if (file) OPENSSL_cleanse(file, len);
    free(file);
    if (!gr_req_topic_op(req, op, stored, st)) return GR_HANDLER_CLOSE;
    return gr_req_topic_ops_wait(req, all_done);
}
