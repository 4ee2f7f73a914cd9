/*
 * route.h: where a partition request goes, decided from the metadata image (cluster/image.h) and nothing
 * else: the local log when the image says this node leads the partition, otherwise the error Kafka's
 * ReplicaManager answers (getPartitionOrError) with the leader's identity, so the client can move. The
 * same code serves single-node mode (the image says this node leads everything it holds) and cluster mode.
 *
 *   - topic unknown to the image: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when addressed by id);
 *   - partition index out of range: UNKNOWN_TOPIC_OR_PARTITION;
 *   - another broker leads it, or none does: NOT_LEADER_OR_FOLLOWER, leader id (-1: none) and epoch;
 *   - this node leads it, no local log yet: NOT_LEADER_OR_FOLLOWER with pending set (the replica manager
 *     is making it: Produce and Fetch wait for it, server/logwait.h; the other APIs answer the error);
 *   - this node leads it: NONE, the local topic and log.
 *
 * In cluster mode, while the member has evidence its lease is gone (img->self_fenced, cluster/member.h),
 * every partition answers NOT_LEADER_OR_FOLLOWER until the broker has registered again.
 *
 * Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and DescribeProducers use it; the
 * leader-epoch checks (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) stay in partition/. The hot path is one
 * hash lookup per topic and an array index per partition, no allocation. Leader hints (Produce v10+
 * CurrentLeader and NodeEndpoints, KIP-951; Fetch v12+ CurrentLeader, v16+ NodeEndpoints) name the leader
 * through the listener the request came in on. Read next: cluster/image.h, server/handlers/produce.c.
 */
#ifndef GR_SERVER_ROUTE_H
#define GR_SERVER_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/image.h"
#include "server/broker.h"

/* A routed partition: on NONE, the local storage topic and log (borrowed); always the image's leader and
 * leader epoch when the topic and partition are known (else -1, -1). */
struct gr_route {
    struct gr_topic *topic;
    struct gr_log *log;
    int32_t leader_id;
    int32_t leader_epoch;
    bool pending; /* NOT_LEADER_OR_FOLLOWER because this node leads it but its local log is not made yet:
                     Produce and Fetch wait for it (server/logwait.h) */
};

/* Returns borrowed: the image's topic named `name`, NULL when unknown (or a null name). */
static inline struct gr_image_topic *gr_route_topic(const struct gr_broker *b, struct gr_str name)
{
    return name.len >= 0 ? gr_image_topic_find(b->image, name.ptr, (size_t)name.len) : NULL;
}
/* Returns borrowed: the image's topic with this 16-byte id, NULL when unknown. */
static inline struct gr_image_topic *gr_route_topic_id(const struct gr_broker *b, const uint8_t id[16])
{
    return gr_image_topic_find_id(b->image, id);
}

/* The topic as a request names it: by its 16-byte id when `by_id` (Produce v13+, Fetch v13+), else by name.
 */
static inline struct gr_image_topic *gr_route_topic_by(const struct gr_broker *b, bool by_id,
                                                       struct gr_str name, const uint8_t id[16])
{
    return by_id ? gr_route_topic_id(b, id) : gr_route_topic(b, name);
}

/* Routes partition `partition` of `it` (NULL: the topic is unknown; `by_id`: it was named by id) as the
 * table above says, filling *r. Returns the Kafka error code (GR_ERR_NONE: r->topic and r->log are the
 * local ones). */
int16_t gr_route_partition(const struct gr_broker *b, const struct gr_image_topic *it, int32_t partition,
                           bool by_id, struct gr_route *r);

/* Wakes the requests waiting for a local log (server/logwait.h) of a partition that no longer routes pending
 * (not led here any more, this broker fenced, the topic gone, or the log made): they run again and get its
 * route's answer. For the image observer (server/membership.c), after each applied batch. Returns how many
 * waiters woke. */
int gr_route_logwaits_settle(struct gr_broker *b);

/* Returns borrowed: the endpoint of live broker `node_id` on the listener `req` came in on, NULL when the
 * broker is unknown, fenced, or lacks that listener; *rack (may be NULL) gets its rack or NULL. */
const struct gr_image_listener *gr_route_endpoint(const struct gr_req *req, int32_t node_id,
                                                  const char **rack);

/* Produce v10+ (KIP-951): a partition answered NOT_LEADER_OR_FOLLOWER gets CurrentLeader {leader id, leader
 * epoch} from `r`; below v10 nothing. */
void gr_route_produce_leader(const struct gr_req *req,
                             struct gr_produce_response_partition_produce_response *pr,
                             const struct gr_route *r);
/* Produce v10+: fills the response's NodeEndpoints with every leader a partition's CurrentLeader names,
 * once each, through the request's listener (a leader without it is left out). Out of arena memory the
 * hints are left out (the answer stays valid). */
void gr_route_produce_endpoints(struct gr_req *req);
/* Fetch v12+: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH gets CurrentLeader from
 * `r`; below v12 nothing. */
void gr_route_fetch_leader(const struct gr_req *req, struct gr_fetch_response_partition_data *rp,
                           const struct gr_route *r);
/* Fetch: a partition routed pending (led here, its log not made yet: server/logwait.h) is answered as the new
 * empty log it will be (error NONE, high watermark, LSO and log start 0, no records); returns true then,
 * false (rp untouched) for any other route. */
bool gr_route_fetch_pending(struct gr_fetch_response_partition_data *rp, const struct gr_route *r);
/* Fetch's long poll on every partition the parked Fetch `req` names (its body): until data arrives past
 * what a fetch under `iso` reads now (the visible offset, or the log end offset for a follower) when it is
 * led here (gr_req_wait_data), until its log is made and then until data when pending
 * (gr_req_wait_log_data); nothing for an unknown partition or one not led here (the deadline answers). */
void gr_route_fetch_wait(struct gr_req *req, enum gr_fetch_isolation iso);
/* Fetch v16+: NodeEndpoints as gr_route_produce_endpoints (recomputed on every call: a parked fetch fills
 * again). */
void gr_route_fetch_endpoints(struct gr_req *req);

#endif
