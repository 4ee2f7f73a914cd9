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

/* Shared helpers (handlers/common.c). */
/* Validates a topic name as Kafka does (1..249 chars of [a-zA-Z0-9._-], not "." or ".."). */
bool gr_topic_name_valid(struct gr_str name);
/* Whether another live topic collides with `name` once '.' and '_' are treated alike (Kafka's rule). */
bool gr_topic_name_collides(struct gr_broker *b, struct gr_str name);
/* Creates a topic with the broker's defaults for an auto-create or CreateTopics; returns a Kafka error
 * code (NONE, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_CONFIG,
 * KAFKA_STORAGE_ERROR). `error_message` (may be NULL) receives a static message. */
int16_t gr_topic_create(struct gr_broker *b, struct gr_str name, int32_t partitions, const char *const *keys,
                        const char *const *values, int count, bool validate_only, const char **error_message,
                        struct gr_topic **out);
/* Looks a topic up by a name view. */
struct gr_topic *gr_topic_lookup(struct gr_broker *b, struct gr_str name);
/* A NUL-terminated copy of a view in the request arena. */
char *gr_req_strdup(struct gr_req *req, struct gr_str s);
/* The topic id as a gr_uuid. */
struct gr_uuid gr_topic_uuid(const struct gr_topic *t);

#endif
