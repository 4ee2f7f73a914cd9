/*
 * api_versions.c: ApiVersions (key 18). Lists every API served (every row of server/apis.def), advertised
 * min to served max, except the Gregor-internal APIs (key >= GR_API_KEY_INTERNAL_MIN: PartitionSummary),
 * which only brokers send one another and no Kafka client may see.
 * v3+ carries the client's software name and version, which must match KIP-511's pattern
 * [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? or the answer is INVALID_REQUEST. v5 (KIP-1242) names the
 * cluster id and node id the client means to reach, both or neither (null and -1): one without the other
 * is INVALID_REQUEST, either differing from this broker's is REBOOTSTRAP_REQUIRED; both answers carry no
 * API list, as Kafka 4.4 answers. The unsupported-version fallback lives in dispatch.c.
 * v3+ features (KIP-584, tagged): SupportedFeatures transaction.version 0..GR_TRANSACTION_VERSION_MAX; the
 * finalized level and FinalizedFeaturesEpoch from the image (cluster/image.h: etcd's features key, or one
 * node's gregor-features file); a level of 0 is not listed as finalized (Kafka lists only levels above 0).
 * Gregor advertises no other feature (group.version, share.version...: their protocols are not served).
 */
#include "cluster/image.h"
#include "server/handlers/handlers.h"

/* The highest transaction.version Gregor serves: 2 (KIP-890 part 2: EndTxn v5, Produce v12+ and
   TxnOffsetCommit v5+ adding partitions, coordinator/txn.h gr_txn_end_tv). */
#define GR_TRANSACTION_VERSION_MAX 2

static bool kip511_valid(struct gr_str s)
{
    if (s.len <= 0) return false;
    for (int32_t i = 0; i < s.len; i++) {
        char c = s.ptr[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        bool edge = i == 0 || i == s.len - 1;
        if (!alnum && (edge || (c != '-' && c != '.'))) return false;
    }
    return true;
}

enum gr_handler_rc gr_handle_api_versions(struct gr_req *req)
{
    struct gr_api_versions_request *body = req->body;
    struct gr_api_versions_response *resp = req->resp;
    if (req->hdr.request_api_version >= 3 &&
        (!kip511_valid(body->client_software_name) || !kip511_valid(body->client_software_version))) {
        resp->error_code = GR_ERR_INVALID_REQUEST;
        return GR_HANDLER_DONE;
    }
    if (req->hdr.request_api_version >= 5) {
        struct gr_broker *b = req->broker;
        bool has_cluster = body->cluster_id.len >= 0, has_node = body->node_id != -1;
        if (has_cluster != has_node) {
            resp->error_code = GR_ERR_INVALID_REQUEST;
            return GR_HANDLER_DONE;
        }
        if (has_cluster &&
            (!gr_str_eq_c(body->cluster_id, gr_store_cluster_id(b->store)) || body->node_id != b->node_id)) {
            resp->error_code = GR_ERR_REBOOTSTRAP_REQUIRED;
            return GR_HANDLER_DONE;
        }
    }
    int n;
    const struct gr_api *apis = gr_api_table(&n);
    resp->api_keys.items = gr_arena_calloc(&req->arena, (size_t)n, sizeof *resp->api_keys.items);
    resp->api_keys.count = 0;
    for (int i = 0; i < n; i++) {
        if (apis[i].api_key >= GR_API_KEY_INTERNAL_MIN) continue; /* never advertised */
        struct gr_api_versions_response_api_version *av = &resp->api_keys.items[resp->api_keys.count++];
        gr_api_versions_response_api_version_init(av);
        av->api_key = apis[i].api_key;
        av->min_version = apis[i].advertised_min;
        av->max_version = apis[i].served_max;
    }
    if (req->hdr.request_api_version >= 3) {
        const struct gr_image *img = req->broker->image;
        resp->supported_features.items =
            gr_arena_calloc(&req->arena, 1, sizeof *resp->supported_features.items);
        resp->finalized_features.items =
            gr_arena_calloc(&req->arena, 1, sizeof *resp->finalized_features.items);
        if (!resp->supported_features.items || !resp->finalized_features.items) return GR_HANDLER_CLOSE;
        gr_api_versions_response_supported_feature_key_init(&resp->supported_features.items[0]);
        resp->supported_features.items[0].name = gr_str_c("transaction.version");
        resp->supported_features.items[0].min_version = 0;
        resp->supported_features.items[0].max_version = GR_TRANSACTION_VERSION_MAX;
        resp->supported_features.count = 1;
        resp->finalized_features_epoch = img->features_epoch;
        resp->finalized_features.count = 0;
        if (img->transaction_version > 0) {
            struct gr_api_versions_response_finalized_feature_key *f = &resp->finalized_features.items[0];
            gr_api_versions_response_finalized_feature_key_init(f);
            f->name = gr_str_c("transaction.version");
            f->min_version_level = f->max_version_level = img->transaction_version;
            resp->finalized_features.count = 1;
        }
    }
    return GR_HANDLER_DONE;
}
