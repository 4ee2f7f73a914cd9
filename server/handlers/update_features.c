/*
 * update_features.c: UpdateFeatures (key 57, v0-2; KIP-584, KIP-778): kafka-features.sh upgrade/downgrade.
 * ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top. Each update is checked as Kafka 4.4's
 * FeatureControlManager does (cluster/features.h gr_features_check) against the finalized level; the first
 * refused one fails the whole request with INVALID_UPDATE_VERSION at the top and QuorumController's message
 * ("The update failed for all features since the following feature had an error: ..."), no results. An
 * update is typed by UpgradeType (v1+) or AllowDowngrade (v0: true = SAFE_DOWNGRADE, as
 * UpdateFeaturesRequest.getFeature reads it). A name given twice: its last entry counts (Kafka's map).
 * Success: NONE at the top (message null) and, v0-1 only, one result per entry (NONE, "NONE"); v2 has no
 * results. ValidateOnly (v1+) or an unchanged level: nothing is written.
 * Any broker takes it (Kafka forwards it to the controller; here the store decides): one node rewrites
 * <log_dir>/gregor-features on the I/O pool (storage's meta write: temporary file, fdatasync, rename) with
 * the epoch + 1; a cluster writes etcd's features key in a txn comparing its mod_revision with the image's
 * epoch (changed meanwhile, or etcd failing: FEATURE_UPDATE_FAILED). Once written, the image takes the new
 * level and epoch at once (ApiVersions answers them; in a cluster every broker's feed applies the same
 * pair, epoch = the key's mod_revision).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cluster/features.h"
#include "cluster/image.h"
#include "cluster/member.h"
#include "common/log.h"
#include "server/acls.h"
#include "server/handlers/handlers.h"

struct features_write {
    int16_t level;
    int64_t epoch; /* one node: the file's new epoch (cluster: set by the txn's answer) */
};

static void top(struct gr_req *req, int16_t err, const char *msg)
{
    struct gr_update_features_response *resp = req->resp;
    resp->error_code = err;
    resp->error_message = msg ? gr_str_c(msg) : GR_STR_NULL;
    resp->results.count = 0;
}

/* The image takes a written level and epoch, unless it already saw a later one (the epoch never goes down).
 */
static void take(struct gr_broker *b, int16_t level, int64_t epoch)
{
    if (epoch <= b->image->features_epoch) return;
    b->image->transaction_version = level; /* read by ApiVersions only: no observer to tell */
    b->image->features_epoch = epoch;
}

static void stored(struct gr_req *req, void *item, int err, struct gr_topic *t)
{
    (void)t;
    struct features_write *w = item;
    struct gr_broker *b = req->broker;
    if (err) {
        GR_ERROR("writing %s: %s (transaction.version stays %d)", GR_FEATURES_FILE, strerror(-err),
                 (int)b->image->transaction_version);
        b->features_file.level = b->image->transaction_version; /* the epoch stays: never down */
        top(req, GR_ERR_FEATURE_UPDATE_FAILED, "The broker could not write its features file");
        return;
    }
    take(b, w->level, w->epoch);
    GR_INFO("features: transaction.version %d, finalized features epoch %lld (UpdateFeatures)", (int)w->level,
            (long long)w->epoch);
}

static void written(void *ctx, int err, int64_t epoch)
{
    struct gr_req *req = ctx;
    struct features_write *w = req->hstate;
    if (err == -EAGAIN)
        top(req, GR_ERR_FEATURE_UPDATE_FAILED, "The finalized features changed during the update: retry");
    else if (err)
        top(req, GR_ERR_FEATURE_UPDATE_FAILED, "The metadata store could not be written");
    else {
        take(req->broker, w->level, epoch);
        GR_INFO("features: transaction.version %d, finalized features epoch %lld (UpdateFeatures)",
                (int)w->level, (long long)epoch);
    }
    gr_req_finish(req);
}

/* Writes `level`: the file on one node, the features key in a cluster. */
static enum gr_handler_rc write_level(struct gr_req *req, int16_t level)
{
    struct gr_broker *b = req->broker;
    struct features_write *w = gr_arena_calloc(&req->arena, 1, sizeof *w);
    if (!w) return GR_HANDLER_CLOSE;
    w->level = level;
    req->hstate = w;
    if (b->member) {
        int rc = gr_features_etcd_write(gr_member_etcd(b->member), gr_member_layout(b->member), level,
                                        b->image->features_epoch, written, req);
        if (rc < 0) {
            top(req, GR_ERR_FEATURE_UPDATE_FAILED, "The metadata store could not be written");
            return GR_HANDLER_DONE;
        }
        return gr_req_await(req, NULL); /* written() finishes it */
    }
    struct gr_features_file next = b->features_file;
    next.level = level;
    next.epoch++;
    w->epoch = next.epoch;
    char text[GR_FEATURES_FILE_BYTES_MAX];
    int len = gr_features_file_format(&next, text, sizeof text);
    struct gr_topic_op *op = len > 0 ? gr_topic_op_meta_write(GR_FEATURES_FILE, text, (size_t)len) : NULL;
    b->features_file = next; /* a later update decides against this one */
    if (!gr_req_topic_op(req, op, stored, w)) return GR_HANDLER_CLOSE;
    return gr_req_topic_ops_wait(req, NULL);
}

enum gr_handler_rc gr_handle_update_features(struct gr_req *req)
{
    struct gr_update_features_request *body = req->body;
    struct gr_update_features_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t version = req->hdr.request_api_version;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_ALTER)) {
        top(req, GR_ERR_CLUSTER_AUTHORIZATION_FAILED, gr_error_message(GR_ERR_CLUSTER_AUTHORIZATION_FAILED));
        return GR_HANDLER_DONE;
    }
    int32_t n = body->feature_updates.count > 0 ? body->feature_updates.count : 0;
    struct gr_req_key *keys = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *keys);
    int32_t *last = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *last);
    if (!keys || !last) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        keys[i] = (struct gr_req_key){body->feature_updates.items[i].feature, 0, i};
    bool *repeated;
    int32_t *first = n ? gr_req_keys_first(req, keys, n, &repeated) : last;
    if (!first) return GR_HANDLER_CLOSE;
    for (int32_t i = 0; i < n; i++)
        last[first[i]] = i; /* ascending: the last entry of each name wins */
    /* one node: the level as last submitted (writes queue in order); a cluster: the image's (etcd's key) */
    int16_t current = b->member ? b->image->transaction_version : b->features_file.level, level = current;
    int32_t controller = b->image->controller_id >= 0 ? b->image->controller_id : b->node_id;
    for (int32_t i = 0; i < n; i++) {
        const struct gr_update_features_request_feature_update_key *u = &body->feature_updates.items[i];
        if (last[first[i]] != i) continue;
        int upgrade = version == 0 ? (u->allow_downgrade ? GR_FEATURE_SAFE_DOWNGRADE : GR_FEATURE_UPGRADE)
                                   : u->upgrade_type;
        char msg[GR_FEATURES_MSG_BYTES], *full = gr_arena_alloc(&req->arena, GR_FEATURES_MSG_BYTES + 96);
        if (!full) return GR_HANDLER_CLOSE;
        const char *name = u->feature.len > 0 ? u->feature.ptr : "";
        size_t name_len = u->feature.len > 0 ? (size_t)u->feature.len : 0;
        int16_t err = gr_features_check(name, name_len, u->max_version_level, upgrade, current, controller,
                                        msg, sizeof msg);
        if (err) {
            snprintf(full, GR_FEATURES_MSG_BYTES + 96,
                     "The update failed for all features since the following feature had an error: %s", msg);
            top(req, err, full);
            return GR_HANDLER_DONE;
        }
        level = u->max_version_level; /* only transaction.version passes the check */
    }
    resp->error_code = GR_ERR_NONE;
    resp->error_message = GR_STR_NULL;
    if (version <= 1) {
        resp->results.items = gr_arena_calloc(&req->arena, (size_t)n + 1, sizeof *resp->results.items);
        if (!resp->results.items) return GR_HANDLER_CLOSE;
        for (int32_t i = 0; i < n; i++) {
            gr_update_features_response_updatable_feature_result_init(&resp->results.items[i]);
            resp->results.items[i].feature = body->feature_updates.items[i].feature;
            resp->results.items[i].error_code = GR_ERR_NONE;
            resp->results.items[i].error_message = gr_str_c("NONE"); /* Errors.NONE.message() */
        }
        resp->results.count = n;
    }
    if ((version >= 1 && body->validate_only) || level == current) return GR_HANDLER_DONE;
    return write_level(req, level);
}
