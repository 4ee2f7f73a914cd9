/*
 * handlers.h: one function per API. A handler reads req->body (the decoded request struct of its API),
 * fills req->resp (already initialised to defaults) and returns a gr_handler_rc; it never touches sockets,
 * size prefixes or version checks (dispatch.c owns those). Read next: any handlers/<api>.c.
 */
#ifndef GR_HANDLERS_H
#define GR_HANDLERS_H

#include "cluster/topic_writer.h"
#include "common/acl.h"
#include "protocol/errors.h"
#include "server/broker.h"
#include "server/internal_topics.h"

/* One handler per row of server/apis.def: enum gr_handler_rc gr_handle_<handler>(struct gr_req *req), e.g.
 * gr_handle_produce. Each takes a decoded request (req->body, req->resp initialised), fills req->resp and
 * returns DONE, WAIT (parked), NO_RESPONSE or CLOSE; its own file's opening paragraph gives the rules. */
#define GR_API(key, id, name, advertised_min, served_min, served_max, handler, needs_groups)                 \
    enum gr_handler_rc gr_handle_##handler(struct gr_req *req);
#include "server/apis.def"
#undef GR_API

/* The late answers of the group APIs, called by server/groups.c's coordinator hooks for a parked waiter:
 * each fills req->resp from the coordinator's result (views valid only during the call: the caller sends
 * the response at once, so they are referenced, not copied). */
struct gr_join_result;
struct gr_sync_result;
/* JoinGroup (handlers/join_group.c): error, generation, protocol (per version), leader, member list. */
void gr_join_group_fill(struct gr_req *req, const struct gr_join_result *res);
/* SyncGroup (handlers/sync_group.c): error, protocol type and name, the member's assignment. */
void gr_sync_group_fill(struct gr_req *req, const struct gr_sync_result *res);

/* Fetch (handlers/fetch_aborted.c): when `rd` (a gr_partition_fetch just done on `log`'s partition) has an
   aborted_upper_bound, fills rp->aborted_transactions with the aborted transactions overlapping
   [rd->fetch_offset, it) (gr_partition_aborted_txns), in the request's arena. False when out of request
   memory. */
struct gr_fetch_read;
struct gr_fetch_response_partition_data;
bool gr_fetch_fill_aborted(struct gr_req *req, struct gr_log *log, const struct gr_fetch_read *rd,
                           struct gr_fetch_response_partition_data *rp);

/* The ACL checks of Produce, Fetch and Metadata (handlers/authorize.c, KafkaApis; server/acls.h), each
 * true (nothing denied) without an authorizer. */
struct gr_image_topic;
/* Topic operations topic `it` allows the request's principal, as Metadata's TopicAuthorizedOperations bits
 * (Kafka's AclOperation codes among READ..ALTER_CONFIGS). */
int32_t gr_topic_authorized_ops(struct gr_req *req, const struct gr_image_topic *it);
/* DescribeCluster's cluster_authorized_operations when asked for (AuthHelper.computeDescribeClusterResponse):
 * 0 without DESCRIBE on the cluster, else the cluster operations (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
 * DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE as AclOperation code bits) the principal is allowed; all
 * of them without an authorizer. */
int32_t gr_cluster_authorized_ops(struct gr_req *req);
/* TxnOffsetCommit's and AddOffsetsToTxn's first checks (KafkaApis): TRANSACTIONAL_ID_AUTHORIZATION_FAILED
 * without WRITE on the transactional id, else GROUP_AUTHORIZATION_FAILED without READ on the group, else
 * NONE. */
int16_t gr_txn_group_refused(struct gr_req *req, struct gr_str transactional_id, struct gr_str group_id);
/* The config APIs' check of one resource (ConfigHelper for DescribeConfigs, ControllerApis for AlterConfigs
 * and IncrementalAlterConfigs): `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the topic (type 2), on the
 * cluster (broker 4, broker logger 8, client metrics 16) or on the group (32). Returns NONE when allowed or
 * the type is none of these (the handler refuses it), else TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED
 * with *msg Kafka's message for it ("Topic authorization failed." ...). */
int16_t gr_config_resource_denied(struct gr_req *req, int8_t type, struct gr_str name, enum gr_acl_op op,
                                  const char **msg);
/* Whether the request's principal may DESCRIBE topic `it` (Metadata's all-topics list leaves it out). */
bool gr_topic_describable(struct gr_req *req, const struct gr_image_topic *it);
/* Fetch: a response partition's defaults (index, -1 high watermark, empty records, empty aborted list);
 * `denied`: Kafka's error answer TOPIC_AUTHORIZATION_FAILED (-1 offsets, null aborted list). */
struct gr_fetch_response_partition_data;
void gr_fetch_partition_init(struct gr_fetch_response_partition_data *rp, int32_t index, bool denied);
/* Metadata's check of one named topic (`name`, or the topic `it` a v10+ id resolved to; `it` NULL when it
 * does not exist): TOPIC_AUTHORIZATION_FAILED without DESCRIBE on it, or when it would be auto-created
 * (`may_create`) without CREATE on the cluster or the topic; else NONE. */
int16_t gr_metadata_topic_authorized(struct gr_req *req, struct gr_str name, const struct gr_image_topic *it,
                                     bool may_create);
/* gr_route_partition (server/route.h, by name) when the principal may DESCRIBE the topic `name`, else
 * TOPIC_AUTHORIZATION_FAILED with *r cleared (not pending): ListOffsets' check. */
struct gr_route;
int16_t gr_route_described(struct gr_req *req, const struct gr_image_topic *it, struct gr_str name,
                           int32_t partition, struct gr_route *r);
/* Produce: per topic_data entry, whether WRITE on the topic is denied (a v13 id checked by its topic's name;
 * an unknown id is not denied); *txn_refused when transactional records come without a transactional id
 * (gr_produce_txn_refused) or without WRITE on it. NULL when out of request memory. */
bool *gr_produce_topics_denied(struct gr_req *req, bool *txn_refused);
/* Fetch: per requested topic, whether it is denied: READ on the topic for a consumer (replica_id < 0),
 * CLUSTER_ACTION on the cluster for a follower; sets *all_denied when every topic is (else leaves it). NULL
 * when out of memory. */
bool *gr_fetch_topics_denied(struct gr_req *req, int32_t replica_id, bool *all_denied);

/* Shared helpers (handlers/common.c). */
/* The client's address as Kafka shows a member's host ("/127.0.0.1"), in the request arena ("" when out of
 * memory; "/" when the connection is gone). */
struct gr_str gr_req_client_host(struct gr_req *req);
/* Validates a topic name as Kafka does (1..249 chars of [a-zA-Z0-9._-], not "." or ".."). */
bool gr_topic_name_valid(struct gr_str name);
/* Whether another live topic collides with `name` once '.' and '_' are treated alike (Kafka's rule). */
bool gr_topic_name_collides(struct gr_broker *b, struct gr_str name);
/* Outcome of a topic creation submitted by gr_topic_create: res->error_code (NONE, TOPIC_ALREADY_EXISTS,
 * INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_REPLICATION_FACTOR, REQUEST_TIMED_OUT,
 * KAFKA_STORAGE_ERROR), its message, the topic's id and partition count, and the local storage topic when
 * this broker holds it (cluster/topic_writer.h). On the network thread; `req` has not been answered. */
typedef void (*gr_topic_created_fn)(struct gr_req *req, void *item, const struct gr_topic_change *res);
/* Creates a topic for an auto-create or CreateTopics. Checks the request now (name, existence, collision,
 * partition count, config names) and returns a Kafka error code (NONE, INVALID_TOPIC_EXCEPTION,
 * TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_CONFIG) with a static `error_message` (may be NULL).
 * When the checks pass and not `validate_only`, submits the creation to the broker's topic writer (checked
 * again when its turn comes) and returns NONE; `done(req, item, res)` then reports the outcome
 * (gr_req_topic_ops_wait makes the response wait for it). timeout_ms: how long the answer may wait for the
 * new partitions' leaders (cluster mode; the request's timeout). replication_factor: resolved (-1 replaced by
 * default.replication.factor), checked by the caller (gr_topic_rf_check) and again by the writer.
 * assignment: NULL (placed by the writer) or `partitions` rows of replication_factor node ids, the first
 * the preferred leader, shaped by the caller (the writer checks the nodes). */
int16_t gr_topic_create(struct gr_req *req, struct gr_str name, int32_t partitions,
                        int32_t replication_factor, const int32_t *assignment, const char *const *keys,
                        const char *const *values, int count, bool validate_only, const char **error_message,
                        int64_t timeout_ms, gr_topic_created_fn done, void *item);
/* A Metadata auto-creation (Kafka's AutoTopicCreationManager): gr_topic_create with num.partitions,
 * default.replication.factor, no configs (a coordinator's internal topic: server/internal_topics.h's layout),
 * waiting at most GR_TOPIC_WRITER_AUTO_CREATE_WAIT_MS. */
int16_t gr_topic_auto_create(struct gr_req *req, struct gr_str name, gr_topic_created_fn done, void *item);
/* The replication factor check of CreateTopics (the broker's topic writer decides: one broker, one replica
 * per partition; a cluster, 1..GR_CLUSTER_REPLICAS_MAX, placement checks the live brokers). Returns NONE or
 * INVALID_REPLICATION_FACTOR with a message in the arena. */
int16_t gr_topic_rf_check(struct gr_req *req, int32_t rf, const char **msg);
/* The layout CreateTopics asks for one topic (handlers/topic_layout.c): without assignments, *parts and *rf
 * from num_partitions and replication_factor (-1: num.partitions, default.replication.factor), the factor
 * checked by gr_topic_rf_check; with them (num_partitions and replication_factor must be -1, else
 * INVALID_REQUEST), Kafka's checks of a manual assignment (INVALID_REPLICA_ASSIGNMENT: a partition twice, an
 * empty list, a broker not registered or named twice, another factor than the partitions before, partitions
 * not 0..n-1), then gr_topic_rf_check on its factor; *assignment (arena) holds *parts rows of *rf node ids,
 * by partition. Returns NONE or a Kafka error code with *msg (static or arena). */
int16_t gr_topic_layout(struct gr_req *req, const struct gr_create_topics_request_creatable_topic *qt,
                        int32_t *parts, int32_t *rf, int32_t **assignment, const char **msg);

/* Topic metadata operations of one request (handlers/topic_ops.c, storage/store.h gr_topic_op_*): the
 * file work runs on the I/O pool, one operation at a time in submission order (storage's FIFO), while the
 * request waits; the network thread serves other connections meanwhile (Gregor issue #4). */
typedef void (*gr_req_topic_cb)(struct gr_req *req, void *item, int err, struct gr_topic *t);
/* The changes of the broker's topic writer (cluster/topic_writer.h) for `req`: cb(req, item, res) runs on the
 * network thread when the change completed, possibly before the call returns. Each returns false when out of
 * arena memory (cb not called). Arguments are copied by the writer. */
typedef void (*gr_req_change_cb)(struct gr_req *req, void *item, const struct gr_topic_change *res);
bool gr_req_topic_create(struct gr_req *req, const struct gr_topic_create_args *a, gr_req_change_cb cb,
                         void *item);
bool gr_req_topic_delete(struct gr_req *req, const uint8_t id[16], int64_t timeout_ms, gr_req_change_cb cb,
                         void *item);
/* assignment: NULL (placed), or assignment_count new partitions of assignment_rf node ids each, one row per
 * partition (gr_topic_writer_add_partitions). */
bool gr_req_topic_grow(struct gr_req *req, const uint8_t id[16], int32_t new_total, const int32_t *assignment,
                       int32_t assignment_count, int32_t assignment_rf, int64_t timeout_ms,
                       gr_req_change_cb cb, void *item);
bool gr_req_topic_set_configs(struct gr_req *req, const uint8_t id[16], const char *const *keys,
                              const char *const *values, int count, gr_req_change_cb cb, void *item);
/* A storage operation that is no topic change (the dynamic broker config file, gr_topic_op_meta_write) in
 * the same wait: submits `op` (taken over; NULL = out of memory, reported as -ENOMEM) for `req`: cb(req,
 * item, err, t) runs on the network thread when it completed (err as gr_topic_op_finish returns it), possibly
 * before this returns. Returns false when out of arena memory (op freed, cb not called). */
bool gr_req_topic_op(struct gr_req *req, struct gr_topic_op *op, gr_req_topic_cb cb, void *item);
/* Ends a handler that may have submitted topic operations: when none is pending, runs all_done(req) (may
 * be NULL) and returns GR_HANDLER_DONE; else parks the request (no deadline: the operations always
 * complete, at shutdown too) and returns GR_HANDLER_WAIT; the last completion runs all_done and answers. */
enum gr_handler_rc gr_req_topic_ops_wait(struct gr_req *req, void (*all_done)(struct gr_req *req));
/* For the topic admin APIs (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
 * IncrementalAlterConfigs), called first by the handler: when topic operations submitted earlier have not
 * completed (e.g. a DeleteTopics pipelined just before on the same connection), parks `req` behind them and
 * returns true (the handler returns GR_HANDLER_WAIT; it runs again from the start once they completed, so
 * its checks see their results, as when every operation was synchronous). Returns false (go on) when none
 * is pending, when `req` already waited once, or out of memory. */
bool gr_req_topic_barrier(struct gr_req *req);
/* Looks a topic up by a name view. */
struct gr_topic *gr_topic_lookup(struct gr_broker *b, struct gr_str name);
/* A NUL-terminated copy of a view in the request arena. */
char *gr_req_strdup(struct gr_req *req, struct gr_str s);
/* The topic id as a gr_uuid. */
struct gr_uuid gr_topic_uuid(const struct gr_topic *t);
/* A request entry's key for gr_req_keys_first: the bytes of a name (or a topic id's 16 bytes as a view) and a
 * kind that separates key spaces (a config resource type; by name versus by id). */
struct gr_req_key {
    struct gr_str name;
    int32_t kind;
    int32_t pos; /* the entry's index in the request; set by the caller to i for keys[i] */
};
/* Finds repeated entries of a request in O(n log n) (a frame may name millions of entries, so never
 * pairwise): sorts `keys` (n entries, keys[i].pos == i on entry) and returns an arena array first[n] where
 * first[i] is the index of the first entry whose kind and bytes equal entry i's (first[i] == i for a first
 * occurrence); *repeated (arena, n bools) is true for every entry whose key occurs more than once. Returns
 * NULL when out of memory (the caller closes the connection). Kafka answers such duplicates once, or refuses
 * them (CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs, IncrementalAlterConfigs). */
int32_t *gr_req_keys_first(struct gr_req *req, struct gr_req_key *keys, int32_t n, bool **repeated);

#endif
