/*
 * describe_client_quotas.c: DescribeClientQuotas (key 48, KIP-546), v0-1. Gregor keeps no client quotas
 * (quota.* and the user/client-id/ip quota entities are not built), so every valid filter matches no entity:
 * an empty entry list, as Kafka answers when none is set. kafka-configs.sh --describe --entity-type users
 * sends it beside DescribeUserScramCredentials and fails when the API is missing. A filter component with
 * an unknown match type (not 0 exact, 1 default, 2 any) or an entity type other than user, client-id or ip is
 * INVALID_REQUEST (Kafka refuses both; its messages differ per case and are not reproduced).
 * Authorization: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED with a null entry list
 * (KafkaApis, DescribeClientQuotasRequest.getErrorResponse).
 * Read next: handlers/describe_user_scram_credentials.c.
 */
#include "server/acls.h"
#include "server/handlers/handlers.h"

enum gr_handler_rc gr_handle_describe_client_quotas(struct gr_req *req)
{
    struct gr_describe_client_quotas_request *body = req->body;
    struct gr_describe_client_quotas_response *resp = req->resp;
    if (!gr_req_authorized_cluster(req, GR_ACL_OP_DESCRIBE_CONFIGS)) { /* KafkaApis: entries null */
        resp->error_code = GR_ERR_CLUSTER_AUTHORIZATION_FAILED;
        resp->entries.items = NULL;
        resp->entries.count = -1;
        return GR_HANDLER_DONE;
    }
    for (int32_t i = 0; i < body->components.count; i++) {
        const struct gr_describe_client_quotas_request_component_data *c = &body->components.items[i];
        if (c->match_type < 0 || c->match_type > 2) {
            resp->error_code = GR_ERR_INVALID_REQUEST;
            resp->error_message = gr_str_c("Unknown match type");
            return GR_HANDLER_DONE;
        }
        if (!gr_str_eq_c(c->entity_type, "user") && !gr_str_eq_c(c->entity_type, "client-id") &&
            !gr_str_eq_c(c->entity_type, "ip")) {
            resp->error_code = GR_ERR_INVALID_REQUEST;
            resp->error_message = gr_str_c("Unknown entity type");
            return GR_HANDLER_DONE;
        }
    }
    resp->entries.items = NULL;
    resp->entries.count = 0;
    return GR_HANDLER_DONE;
}
