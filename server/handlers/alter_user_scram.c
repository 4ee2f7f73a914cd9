/*
 * alter_user_scram.c: AlterUserScramCredentials' decisions on a store (server/handlers/alter_user_scram.h).
 */
#include "server/handlers/alter_user_scram.h"

#include <errno.h>

#include "server/handlers/handlers.h"

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

bool gr_scram_alter_decide(struct gr_scram_alter *dc, struct gr_scram_store *s)
{
    struct gr_req *req = dc->req;
    struct gr_alter_user_scram_credentials_request *body = req->body;
    struct gr_alter_user_scram_credentials_response *resp = req->resp;
    int32_t *first = dc->first, nd = dc->nd, n = dc->n;
    bool *repeated = dc->repeated;
    int16_t *code = dc->code;
    const char **msg = dc->msg;
    struct gr_scram_alter_state *st = dc->st;
    resp->results.count = 0;
    st->ok_count = 0;
    for (int32_t i = 0; i < n; i++)
        code[i] = 0, msg[i] = NULL;
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
            gr_scram_alter_result_t *r = &resp->results.items[resp->results.count++];
            gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result_init(r);
            r->user = i < nd ? body->deletions.items[i].name : body->upsertions.items[i - nd].name;
            r->error_code = code[i];
            if (code[i])
                r->error_message = gr_str_c(msg[i]);
            else
                st->ok_count++;
        }
    st->ok = resp->results.items;
    return changed;
}
