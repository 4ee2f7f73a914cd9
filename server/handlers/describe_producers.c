/*
 * describe_producers.c: DescribeProducers (key 61, KIP-664), v0. For each requested partition, the producers
 * its idempotence state holds (storage/producer_state.h): producer id, epoch, last sequence (-1 when no
 * batch is remembered), last timestamp (max timestamp of its last batch), the coordinator epoch of its last
 * transaction marker (-1 before any) and the first offset of its open transaction (-1 when none), as Kafka's
 * UnifiedLog.activeProducers (kafka-transactions.sh describe-producers and find-hanging read them). An
 * unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION, as Kafka's ReplicaManager answers on a broker
 * that hosts no such partition. Authorization (KafkaApis): READ on the topic, before existence, else each
 * partition TOPIC_AUTHORIZATION_FAILED "Topic authorization failed.". Read next: storage/producer_state.h.
 */
#include "server/acls.h"
#include "server/handlers/handlers.h"
#include "server/route.h"
#include "storage/producer_state.h"

static int16_t describe_partition(struct gr_req *req, const struct gr_image_topic *it,
                                  struct gr_describe_producers_response_partition_response *rp)
{
    struct gr_route r; /* another broker's: NOT_LEADER_OR_FOLLOWER (server/route.h) */
    int16_t err = gr_route_partition(req->broker, it, rp->partition_index, false, &r);
    if (err) return err;
    struct gr_log *log = r.log;
    if (gr_log_offline(log)) return GR_ERR_KAFKA_STORAGE_ERROR;
    const struct gr_producer_state *ps = gr_log_producer_state(log);
    size_t n = gr_producer_state_count(ps);
    rp->active_producers.items = gr_arena_calloc(&req->arena, n + 1, sizeof *rp->active_producers.items);
    if (!rp->active_producers.items) return GR_ERR_UNKNOWN_SERVER_ERROR;
    size_t cur = 0, i = 0;
    const struct gr_producer_entry *e;
    while ((e = gr_producer_state_next(ps, &cur)) != NULL && i < n) {
        struct gr_describe_producers_response_producer_state *out = &rp->active_producers.items[i++];
        gr_describe_producers_response_producer_state_init(out);
        out->producer_id = e->producer_id;
        out->producer_epoch = e->producer_epoch;
        out->last_sequence = gr_producer_entry_last_seq(e);
        out->last_timestamp = e->last_timestamp_ms;
        out->coordinator_epoch = e->coordinator_epoch;
        out->current_txn_start_offset = e->current_txn_first_offset;
    }
    rp->active_producers.count = (int32_t)i;
    return GR_ERR_NONE;
}

enum gr_handler_rc gr_handle_describe_producers(struct gr_req *req)
{
    struct gr_describe_producers_request *body = req->body;
    struct gr_describe_producers_response *resp = req->resp;
    int32_t nt = body->topics.count > 0 ? body->topics.count : 0;
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)nt + 1, sizeof *resp->topics.items);
    if (!resp->topics.items) return GR_HANDLER_CLOSE;
    resp->topics.count = nt;
    for (int32_t i = 0; i < nt; i++) {
        struct gr_describe_producers_request_topic_request *qt = &body->topics.items[i];
        struct gr_describe_producers_response_topic_response *rt = &resp->topics.items[i];
        gr_describe_producers_response_topic_response_init(rt);
        rt->name = qt->name;
        const struct gr_image_topic *t = gr_route_topic(req->broker, qt->name);
        int32_t np = qt->partition_indexes.count > 0 ? qt->partition_indexes.count : 0;
        rt->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *rt->partitions.items);
        if (!rt->partitions.items) return GR_HANDLER_CLOSE;
        rt->partitions.count = np;
        for (int32_t p = 0; p < np; p++) {
            struct gr_describe_producers_response_partition_response *rp = &rt->partitions.items[p];
            gr_describe_producers_response_partition_response_init(rp);
            rp->partition_index = qt->partition_indexes.items[p];
            if (!gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, qt->name)) {
                rp->error_code = GR_ERR_TOPIC_AUTHORIZATION_FAILED;
                rp->error_message = gr_str_c("Topic authorization failed.");
                continue;
            }
            rp->error_code = describe_partition(req, t, rp);
            /* Kafka 4.4 names an unknown topic with the error's default message (Errors.message()); an
               unknown partition of a known topic gets none */
            if (!t && rp->error_code == GR_ERR_UNKNOWN_TOPIC_OR_PARTITION)
                rp->error_message = gr_str_c("This server does not host this topic-partition.");
        }
    }
    return GR_HANDLER_DONE;
}
