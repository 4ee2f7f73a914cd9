/*
 * handlers.h: one function per API. A handler reads req->body (the decoded request struct of its API),
 * fills req->resp (already initialised to defaults) and returns a gr_handler_rc; it never touches sockets,
 * size prefixes or version checks (dispatch.c owns those). Read next: any handlers/<api>.c.
 */
#ifndef GR_HANDLERS_H
#define GR_HANDLERS_H

#include "protocol/errors.h"
#include "server/broker.h"

enum gr_handler_rc gr_handle_produce(struct gr_req *req);
enum gr_handler_rc gr_handle_fetch(struct gr_req *req);
enum gr_handler_rc gr_handle_list_offsets(struct gr_req *req);
enum gr_handler_rc gr_handle_metadata(struct gr_req *req);
enum gr_handler_rc gr_handle_find_coordinator(struct gr_req *req);
enum gr_handler_rc gr_handle_api_versions(struct gr_req *req);
enum gr_handler_rc gr_handle_create_topics(struct gr_req *req);
enum gr_handler_rc gr_handle_delete_topics(struct gr_req *req);
enum gr_handler_rc gr_handle_delete_records(struct gr_req *req);
enum gr_handler_rc gr_handle_offset_for_leader_epoch(struct gr_req *req);
enum gr_handler_rc gr_handle_describe_configs(struct gr_req *req);
enum gr_handler_rc gr_handle_alter_configs(struct gr_req *req);
enum gr_handler_rc gr_handle_incremental_alter_configs(struct gr_req *req);
enum gr_handler_rc gr_handle_describe_log_dirs(struct gr_req *req);
enum gr_handler_rc gr_handle_create_partitions(struct gr_req *req);
enum gr_handler_rc gr_handle_describe_cluster(struct gr_req *req);
enum gr_handler_rc gr_handle_init_producer_id(struct gr_req *req);
enum gr_handler_rc gr_handle_describe_producers(struct gr_req *req);
/* Consumer groups (coordinator/): */
enum gr_handler_rc gr_handle_join_group(struct gr_req *req);
enum gr_handler_rc gr_handle_sync_group(struct gr_req *req);
enum gr_handler_rc gr_handle_heartbeat(struct gr_req *req);
enum gr_handler_rc gr_handle_leave_group(struct gr_req *req);
enum gr_handler_rc gr_handle_offset_commit(struct gr_req *req);
enum gr_handler_rc gr_handle_offset_fetch(struct gr_req *req);
enum gr_handler_rc gr_handle_offset_delete(struct gr_req *req);
enum gr_handler_rc gr_handle_list_groups(struct gr_req *req);
enum gr_handler_rc gr_handle_describe_groups(struct gr_req *req);
enum gr_handler_rc gr_handle_delete_groups(struct gr_req *req);

/* The group coordinator's server binding (handlers/join_group.c). gr_groups_start opens (creating when
 * missing) __consumer_offsets, replays it into a new b->coord and starts its timers on b->loop; returns 0
 * or -errno. gr_groups_stop stops the timers and frees b->coord without answering parked JoinGroup /
 * SyncGroup requests (call it before freeing parked requests and before closing the store). */
int gr_groups_start(struct gr_broker *b);
/* Lazy start, as Kafka creates __consumer_offsets on first group use: at broker start the coordinator is
 * started only when __consumer_offsets already exists (its replay takes milliseconds); on a new data
 * directory the first group request (any API of gr_api_uses_groups) or a Metadata / CreateTopics naming
 * __consumer_offsets goes through gr_groups_defer, which has the topic (offsets.topic.num.partitions
 * partitions, compacted) created on the I/O pool and then calls this. Called with the topic missing (no
 * I/O pool, tests) it creates the topic synchronously on the calling thread. Returns 0 when b->coord exists
 * afterwards, else -errno (logged, retried by the next group request; handlers then answer
 * COORDINATOR_NOT_AVAILABLE as they do for a missing b->coord). */
int gr_groups_ensure(struct gr_broker *b);
/* True for the APIs served by the group coordinator (OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup,
 * Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete). */
bool gr_api_uses_groups(int16_t api_key);
void gr_groups_stop(struct gr_broker *b);
/* Lazy coordinator start without blocking the network thread: for a request that needs the coordinator
 * (or names __consumer_offsets) while b->coord is NULL. When __consumer_offsets exists it starts the
 * coordinator now (gr_groups_ensure) and returns false; else it parks `req`, submits the topic's creation
 * to the I/O pool (once for all waiting requests) and returns true: when the creation completed the
 * coordinator is started and every waiting request's handler runs (gr_dispatch_handler), or the request is
 * freed when its connection closed meanwhile. Returns false (go on now: handlers answer
 * COORDINATOR_NOT_AVAILABLE without b->coord) when b->coord exists, when `req` already waited once, or out
 * of memory. */
bool gr_groups_defer(struct gr_req *req);
/* Returns borrowed: the __consumer_offsets binding (durability checks), NULL when groups are not started. */
struct gr_offsets_log *gr_groups_offsets_log(struct gr_broker *b);
/* The client's address as Kafka shows a member's host ("/127.0.0.1"), in the request arena. */
struct gr_str gr_req_client_host(struct gr_req *req);

/* The producer id allocator's server binding (handlers/init_producer_id.c). gr_producer_ids_start loads the
 * saved block end from the log directory into a new b->producer_ids (b->store must be open); returns 0 or
 * -errno (a damaged file is -EINVAL: the broker must not start). gr_producer_ids_stop frees it. */
int gr_producer_ids_start(struct gr_broker *b);
void gr_producer_ids_stop(struct gr_broker *b);

/* Shared helpers (handlers/common.c). */
/* Validates a topic name as Kafka does (1..249 chars of [a-zA-Z0-9._-], not "." or ".."). */
bool gr_topic_name_valid(struct gr_str name);
/* Whether another live topic collides with `name` once '.' and '_' are treated alike (Kafka's rule). */
bool gr_topic_name_collides(struct gr_broker *b, struct gr_str name);
/* Outcome of a topic creation submitted by gr_topic_create: a Kafka error code (NONE,
 * TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, KAFKA_STORAGE_ERROR), a static message
 * (NULL with NONE) and the live topic (NULL on error). On the network thread; `req` has not been answered. */
typedef void (*gr_topic_created_fn)(struct gr_req *req, void *item, int16_t code, const char *msg,
                                    struct gr_topic *t);
/* Creates a topic for an auto-create or CreateTopics. Checks the request now (name, existence, collision,
 * partition count, config names) and returns a Kafka error code (NONE, INVALID_TOPIC_EXCEPTION,
 * TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_CONFIG) with a static `error_message` (may be NULL).
 * When the checks pass and not `validate_only`, submits the creation (storage: checked again against the
 * state when its turn comes, file work on the I/O pool) and returns NONE; `done(req, item, ...)` then
 * reports the outcome (gr_req_topic_ops_wait makes the response wait for it). */
int16_t gr_topic_create(struct gr_req *req, struct gr_str name, int32_t partitions, const char *const *keys,
                        const char *const *values, int count, bool validate_only, const char **error_message,
                        gr_topic_created_fn done, void *item);

/* Topic metadata operations of one request (handlers/topic_ops.c, storage/store.h gr_topic_op_*): the
 * file work runs on the I/O pool, one operation at a time in submission order (storage's FIFO), while the
 * request waits; the network thread serves other connections meanwhile (Gregor issue #4). */
typedef void (*gr_req_topic_cb)(struct gr_req *req, void *item, int err, struct gr_topic *t);
/* Submits `op` (taken over; NULL = out of memory, reported as -ENOMEM) for `req`: cb(req, item, err, t)
 * runs on the network thread when it completed (err as gr_topic_op_finish returns it), possibly before
 * this returns. Returns false when out of arena memory (op freed, cb not called). */
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
/* Whether `name` is one of Kafka's internal topics (__consumer_offsets, __transaction_state). */
bool gr_topic_is_internal(const char *name);

/* Resource checks shared by AlterConfigs and IncrementalAlterConfigs (handlers/alter_configs.c). Each
 * returns a Kafka error code and sets *msg (static or in the request arena) when it is not NONE. */
struct gr_tcfg_set;
/* A TOPIC resource name: "" is INVALID_REQUEST, an invalid name INVALID_TOPIC_EXCEPTION. */
int16_t gr_alter_topic_check(struct gr_req *req, struct gr_str name, const char **msg);
/* UNKNOWN_TOPIC_OR_PARTITION with Kafka's "The topic 'x' does not exist." */
int16_t gr_alter_topic_missing(struct gr_req *req, struct gr_str name, const char **msg);
/* Submits the durable replacement of topic `t`'s topic-level configs with `set` (storage's topic
 * operation FIFO, file work on the I/O pool) and returns NONE (UNKNOWN_SERVER_ERROR with *msg when out of
 * memory). Its failure (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION when deleted meanwhile,
 * KAFKA_STORAGE_ERROR) is written to *code_out and *message_out by gr_alter_topics_stored, which the
 * handler passes to gr_req_topic_ops_wait. Uses req->hstate. */
int16_t gr_alter_topic_store(struct gr_req *req, struct gr_topic *t, const struct gr_tcfg_set *set,
                             const char **msg, int16_t *code_out, struct gr_str *message_out);
/* Copies the outcomes of the config writes submitted by gr_alter_topic_store into their response entries. */
void gr_alter_topics_stored(struct gr_req *req);
/* A BROKER resource name: "" (the cluster-wide default) or this node id, else INVALID_REQUEST with Kafka's
 * messages (ConfigAdminManager.validateResourceNameIsCurrentNodeId). */
int16_t gr_alter_broker_name(struct gr_req *req, struct gr_str name, const char **msg);
/* Submits the durable replacement of the dynamic broker set of resource `name` ("" = the cluster-wide
 * default level, else this broker's) with `set` (validated, e.g. by gr_bcfg_replace; arrays must live as
 * long as the request): the file (server/dynconf.h) is written on the I/O pool, then the set applies at
 * once (gr_dynconf_commit). Failure reporting, hstate use and returns as gr_alter_topic_store. */
int16_t gr_alter_broker_store(struct gr_req *req, struct gr_str name, const struct gr_tcfg_set *set,
                              const char **msg, int16_t *code_out, struct gr_str *message_out);

#endif
