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
 * In a cluster (server/security_etcd.h) the request is one etcd txn over its users' keys, all or nothing,
 * answered once etcd acknowledged it (KAFKA_STORAGE_ERROR for the accepted users when it did not); a request
 * naming more than GR_SECURITY_SCRAM_TXN_USERS (128) distinct users is refused whole, INVALID_REQUEST for
 * each (Gregor's bound: etcd's max-txn-ops; Kafka has none).
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
#include "server/handlers/alter_user_scram.h"
#include "server/handlers/handlers.h"
#include "server/scram_store.h"
#include "server/security_etcd.h"
#include "storage/store.h"

static void stored(struct gr_req *req, void *item, int err, struct gr_topic *t)
{
    (void)req;
    (void)t;
    struct gr_scram_alter_state *st = item;
    st->err = err;
    if (err)
        GR_ERROR("writing %s: %s (SCRAM credentials changed in memory only)", GR_SCRAM_FILE, strerror(-err));
}

static void all_done(struct gr_req *req)
{
    struct gr_scram_alter_state *st = req->hstate;
    if (!st || !st->err) return;
    for (int32_t i = 0; i < st->ok_count; i++) {
        st->ok[i].error_code = GR_ERR_KAFKA_STORAGE_ERROR;
        st->ok[i].error_message = gr_str_c("The broker could not write its SCRAM credentials file");
    }
}

static int scram_apply(void *ctx, struct gr_scram_store *s)
{
    return gr_scram_alter_decide(ctx, s) ? 1 : 0;
}

/* More users than one etcd txn holds: every user refused, nothing written (Gregor's bound, Kafka has none).
 */
static enum gr_handler_rc too_many_users(struct gr_req *req, const struct gr_req_key *keys, int32_t n)
{
    struct gr_alter_user_scram_credentials_response *resp = req->resp;
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && gr_str_eq(keys[i].name, keys[i - 1].name)) continue;
        gr_scram_alter_result_t *r = &resp->results.items[resp->results.count++];
        gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result_init(r);
        r->user = keys[i].name;
        r->error_code = GR_ERR_INVALID_REQUEST;
        r->error_message = gr_str_c("At most 128 users per AlterUserScramCredentials in a cluster (one etcd "
                                    "transaction): nothing was changed");
    }
    return GR_HANDLER_DONE;
}

static void scram_done(void *ctx, int err)
{
    struct gr_scram_alter *dc = ctx;
    dc->st->err = err;
    if (err) GR_ERROR("writing SCRAM credentials to etcd: %s", strerror(-err));
    all_done(dc->req);
    gr_req_finish(dc->req);
}

/* Cluster mode: one etcd txn over the request's users (server/security_etcd.h). */
static enum gr_handler_rc alter_etcd(struct gr_req *req, struct gr_scram_alter *dc,
                                     const struct gr_req_key *keys, int32_t n)
{
    struct gr_scram_store *s = &req->broker->scram;
    struct gr_scram_alter_state *st = dc->st;
    int32_t users = 0; /* keys are sorted: each distinct name once */
    for (int32_t i = 0; i < n; i++)
        users += i == 0 || !gr_str_eq(keys[i].name, keys[i - 1].name);
    if (users > GR_SECURITY_SCRAM_TXN_USERS) return too_many_users(req, keys, n);
    struct gr_security_user *us = gr_arena_calloc(&req->arena, (size_t)users + 1, sizeof *us);
    if (!us) return GR_HANDLER_CLOSE;
    int32_t u = 0; /* an empty or null name (refused by the checks) has no key: not read nor written */
    for (int32_t i = 0; i < n; i++)
        if (keys[i].name.len > 0 && (i == 0 || !gr_str_eq(keys[i].name, keys[i - 1].name)))
            us[u++] = (struct gr_security_user){keys[i].name.ptr, (size_t)keys[i].name.len};
    if (u == 0) {
        struct gr_scram_store none = {0};
        gr_scram_alter_decide(dc, &none); /* every entry refused by its checks */
        gr_scram_store_clear(&none);
        return GR_HANDLER_DONE;
    }
    if (gr_security_scram_update(req->broker, us, (size_t)u, scram_apply, scram_done, dc) == 0)
        return gr_req_await(req, NULL); /* scram_done finishes it */
    size_t len; /* not started: the rows as they would be on a copy, each accepted one failed */
    char *text = gr_scram_store_format(s, &len);
    struct gr_scram_store copy = {0};
    char err[256];
    if (!text || gr_scram_store_parse(&copy, text, len, err, sizeof err) < 0) {
        if (text) OPENSSL_cleanse(text, len);
        free(text);
        gr_scram_store_clear(&copy);
        return GR_HANDLER_CLOSE;
    }
    OPENSSL_cleanse(text, len);
    free(text);
    gr_scram_alter_decide(dc, &copy);
    gr_scram_store_clear(&copy);
    st->err = -EIO;
    all_done(req);
    return GR_HANDLER_DONE;
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
    struct gr_scram_alter_state *st = gr_arena_calloc(&req->arena, 1, sizeof *st);
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
            gr_scram_alter_result_t *r = &resp->results.items[resp->results.count++];
            gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result_init(r);
            r->user = keys[i].name;
            r->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        }
        return GR_HANDLER_DONE;
    }
    struct gr_scram_alter *dc = gr_arena_calloc(&req->arena, 1, sizeof *dc);
    if (!dc) return GR_HANDLER_CLOSE;
    *dc = (struct gr_scram_alter){req, first, repeated, code, msg, nd, n, st};
    req->hstate = st;
    if (gr_security_etcd_on(req->broker)) return alter_etcd(req, dc, keys, n);
    bool changed = gr_scram_alter_decide(dc, s);
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
