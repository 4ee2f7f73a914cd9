/*
 * txn_offset_commit.c: TxnOffsetCommit (key 28), v0-5 (v5: its partition added implicitly, below). As Kafka's
 * KafkaApis.handleTxnOffsetCommitRequest: a partition of an unknown topic (or beyond its partition count)
 * gets UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator; the rest go to the group coordinator
 * (gr_coord_txn_commit: INVALID_GROUP_ID, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, and KIP-447's
 * generation, member and instance checks from v3, as per-partition errors), which writes them as one
 * transactional batch of the producer's id and epoch to __consumer_offsets and holds them pending until the
 * transaction's marker (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile). The answer
 * waits until the batch is committed on the offsets partition, as OffsetCommit's (offset_commit.c): after
 * offsets.commit.timeout.ms the partitions get COORDINATOR_NOT_AVAILABLE. Before the group coordinator,
 * KIP-890 part 1's verification (server/txns.h gr_txns_check_txn_offset_commit, as Kafka 4.x's
 * CoordinatorRuntime.scheduleTransactionalWriteOperation): the group's __consumer_offsets partition must be
 * in the producer's ongoing transaction, else every partition gets the error (INVALID_TXN_STATE below v4,
 * TRANSACTION_ABORTABLE from v4, INVALID_PRODUCER_EPOCH when fenced...) and nothing is written; in cluster
 * mode a coordinator on another broker is asked first (gr_txns_verify_offsets_remote, parked); v5+ has
 * the coordinator add the partition instead (transaction version 2). Authorization (KafkaApis), first: WRITE
 * on the transactional id, else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group,
 * else GROUP_AUTHORIZATION_FAILED on every partition; READ on each topic, else its partitions
 * TOPIC_AUTHORIZATION_FAILED (before existence; never committed). Read next: coordinator/txn_offsets.c.
 */
#include "coordinator/coordinator.h"
#include "coordinator/offsets_log.h"
#include "server/acls.h"
#include "server/groups.h"
#include "server/handlers/handlers.h"
#include "server/route.h"
#include "server/txns.h"

#define TXN_COMMIT_TIMEOUT_MS 5000 /* Kafka's offsets.commit.timeout.ms default */

typedef struct gr_txn_offset_commit_response_txn_offset_commit_response_partition resp_partition;

struct txn_commit_state {
    int32_t partition;  /* of __consumer_offsets */
    int64_t end_offset; /* committed from here */
    struct gr_commit_partition *cps;
    resp_partition **dst;
    int32_t count;
    struct gr_commit_topic *cts; /* the valid partitions by topic (nct of them), for the group coordinator */
    int32_t nct;
};

static void copy_errors(struct txn_commit_state *st, int16_t unresolved)
{
    for (int32_t i = 0; i < st->count; i++) {
        int16_t e = st->cps[i].error_code;
        st->dst[i]->error_code = e == GR_ERR_NONE && unresolved ? unresolved : e;
    }
}

static struct gr_log *commit_log(struct gr_req *req, const struct txn_commit_state *st)
{
    struct gr_offsets_log *ol = gr_groups_offsets_log(req->broker);
    return ol ? gr_offsets_log_log(ol, st->partition) : NULL;
}

static bool txn_commit_recheck(struct gr_req *req)
{
    struct txn_commit_state *st = req->hstate;
    struct gr_log *log = commit_log(req, st);
    int16_t err = GR_ERR_NOT_LEADER_OR_FOLLOWER; /* the coordinator is gone */
    if (log && gr_partition_produce_acked(gr_broker_partition(req->broker, log), st->end_offset, &err))
        return false;
    if (err == GR_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND) err = GR_ERR_NONE; /* written with acks=1 */
    copy_errors(st, gr_coord_write_error(err));
    gr_req_finish(req);
    return true;
}

static void txn_commit_expire(struct gr_req *req)
{
    copy_errors(req->hstate, gr_coord_write_error(GR_ERR_REQUEST_TIMED_OUT));
    gr_req_finish(req);
}

/* Hands the valid partitions (`nct` topics) to the group coordinator: st->partition and st->end_offset get
 * where the transactional batch was appended (end_offset < 0: answered at once). v0-2 carry no generation,
 * member or instance id (KIP-447 came with v3). */
static void txn_send(struct gr_req *req, struct txn_commit_state *st, struct gr_commit_topic *cts,
                     int32_t nct)
{
    struct gr_txn_offset_commit_request *body = req->body;
    int16_t v = req->hdr.request_api_version;
    struct gr_txn_commit_params p = {
        .group_id = body->group_id,
        .member_id = v >= 3 ? body->member_id : gr_str_c(""),
        .group_instance_id = v >= 3 ? body->group_instance_id : GR_STR_NULL,
        .generation_id = v >= 3 ? body->generation_id_or_member_epoch : -1,
        .producer_id = body->producer_id,
        .producer_epoch = body->producer_epoch,
        .topics = cts,
        .topic_count = nct,
    };
    gr_coord_txn_commit(req->broker->coord, &p, &st->partition, &st->end_offset);
}

/* KIP-890 part 1 (server/txns.h gr_txns_check_txn_offset_commit): true when the transaction does not hold the
 * group's offsets partition, every valid partition then answering the error (nothing is written). */
static bool txn_unverified(struct gr_req *req, struct txn_commit_state *st)
{
    struct gr_txn_offset_commit_request *body = req->body;
    int16_t err =
        gr_txns_check_txn_offset_commit(req, body->transactional_id, body->group_id, body->producer_id,
                                        body->producer_epoch, req->hdr.request_api_version);
    for (int32_t i = 0; err && i < st->count; i++)
        st->dst[i]->error_code = err;
    return err != GR_ERR_NONE;
}

static enum gr_handler_rc txn_commit_run(struct gr_req *req);

enum gr_handler_rc gr_handle_txn_offset_commit(struct gr_req *req)
{
    struct gr_txn_offset_commit_request *body = req->body;
    struct gr_txn_offset_commit_response *resp = req->resp;
    struct gr_broker *b = req->broker;
    int16_t v = req->hdr.request_api_version;
    int32_t ntopics = body->topics.count > 0 ? body->topics.count : 0;
    int32_t total = 0;
    for (int32_t i = 0; i < ntopics; i++)
        total += body->topics.items[i].partitions.count > 0 ? body->topics.items[i].partitions.count : 0;
    struct txn_commit_state *st = gr_arena_alloc(&req->arena, sizeof *st);
    struct gr_commit_topic *cts = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *cts);
    resp->topics.items = gr_arena_calloc(&req->arena, (size_t)ntopics + 1, sizeof *resp->topics.items);
    if (!st || !cts || !resp->topics.items) return GR_HANDLER_CLOSE;
    st->cps = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->cps);
    st->dst = gr_arena_calloc(&req->arena, (size_t)total + 1, sizeof *st->dst);
    if (!st->cps || !st->dst) return GR_HANDLER_CLOSE;
    resp->topics.count = ntopics;
    int16_t refused = gr_txn_group_refused(req, body->transactional_id, body->group_id);
    int32_t k = 0, nct = 0;
    for (int32_t i = 0; i < ntopics; i++) {
        struct gr_txn_offset_commit_request_txn_offset_commit_request_topic *rt = &body->topics.items[i];
        struct gr_txn_offset_commit_response_txn_offset_commit_response_topic *tr = &resp->topics.items[i];
        gr_txn_offset_commit_response_txn_offset_commit_response_topic_init(tr);
        tr->name = rt->name;
        int32_t np = rt->partitions.count > 0 ? rt->partitions.count : 0;
        tr->partitions.items = gr_arena_calloc(&req->arena, (size_t)np + 1, sizeof *tr->partitions.items);
        if (!tr->partitions.items) return GR_HANDLER_CLOSE;
        tr->partitions.count = np;
        const struct gr_image_topic *t = gr_route_topic(b, rt->name);
        int16_t topic_refused = refused ? refused
                                : gr_req_authorized(req, GR_ACL_OP_READ, GR_ACL_RES_TOPIC, rt->name)
                                    ? GR_ERR_NONE
                                    : GR_ERR_TOPIC_AUTHORIZATION_FAILED;
        int32_t first = k;
        for (int32_t j = 0; j < np; j++) {
            struct gr_txn_offset_commit_request_txn_offset_commit_request_partition *rp =
                &rt->partitions.items[j];
            resp_partition *pr = &tr->partitions.items[j];
            gr_txn_offset_commit_response_txn_offset_commit_response_partition_init(pr);
            pr->partition_index = rp->partition_index;
            if (topic_refused) {
                pr->error_code = topic_refused;
                continue;
            }
            if (!t || rp->partition_index < 0 || rp->partition_index >= t->partition_count) {
                pr->error_code = GR_ERR_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
            if (!b->coord) {
                pr->error_code = GR_ERR_COORDINATOR_NOT_AVAILABLE;
                continue;
            }
            st->cps[k] = (struct gr_commit_partition){rp->partition_index, rp->committed_offset,
                                                      v >= 2 ? rp->committed_leader_epoch : -1,
                                                      rp->committed_metadata, 0};
            st->dst[k++] = pr;
        }
        if (k > first) cts[nct++] = (struct gr_commit_topic){rt->name, &st->cps[first], k - first};
    }
    st->count = k;
    if (k == 0) return GR_HANDLER_DONE;
    *st = (struct txn_commit_state){.cps = st->cps, .dst = st->dst, .count = k, .cts = cts, .nct = nct};
    req->hstate = st;
    enum gr_handler_rc rc;
    if (gr_txns_verify_offsets_remote(req, body->transactional_id, body->group_id, body->producer_id,
                                      body->producer_epoch, txn_commit_run, &rc))
        return rc; /* a coordinator on another broker answers first */
    return txn_commit_run(req);
}

/* Verifies (the verdict, then the guard, in this call), writes through the group coordinator and waits
   until the batch is committed. */
static enum gr_handler_rc txn_commit_run(struct gr_req *req)
{
    struct txn_commit_state *st = req->hstate;
    if (txn_unverified(req, st)) return GR_HANDLER_DONE;
    txn_send(req, st, st->cts, st->nct);
    if (st->end_offset < 0) {
        copy_errors(st, GR_ERR_NONE);
        return GR_HANDLER_DONE;
    }
    gr_req_await(req, &(struct gr_await){.recheck = txn_commit_recheck,
                                         .expire = txn_commit_expire,
                                         .timeout_ms = TXN_COMMIT_TIMEOUT_MS});
    if (txn_commit_recheck(req)) return GR_HANDLER_WAIT; /* already committed: finished inside */
    if (gr_req_wait_committed(req, commit_log(req, st), st->end_offset) == 0) txn_commit_recheck(req);
    return GR_HANDLER_WAIT;
}
