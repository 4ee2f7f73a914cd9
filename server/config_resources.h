/*
 * config_resources.h: the resources of the config APIs (DescribeConfigs, AlterConfigs,
 * IncrementalAlterConfigs) as Kafka 4.x resolves them: the resource-name checks with Kafka's error codes
 * and messages (topic names, this node's id, the logger resource), what DescribeConfigs shows for the one
 * logger, IncrementalAlterConfigs on that logger (Kafka's RuntimeLoggerManager), and the durable writes of a
 * new topic-level set (storage's topic operation FIFO) or dynamic broker set (server/dynconf.h), whose
 * outcome the response waits for. The values themselves (validation, sources, synonyms) are
 * server/topic_configs.h's. Called only on the network thread, from the config handlers; uses req->hstate
 * for the pending writes. Read next: server/topic_configs.h, server/handlers/alter_configs.c.
 */
#ifndef GR_CONFIG_RESOURCES_H
#define GR_CONFIG_RESOURCES_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/image.h"
#include "server/broker.h"
#include "server/tls_reload.h"
#include "server/topic_configs.h"

/* AlterConfigs and IncrementalAlterConfigs (Kafka's ConfigAdminManager, ConfigurationControlManager).
 * Each check returns a Kafka error code and sets *msg (static or in the request arena) when it is not
 * NONE. */
/* A TOPIC resource name: "" is INVALID_REQUEST, an invalid name INVALID_TOPIC_EXCEPTION. */
int16_t gr_alter_topic_check(struct gr_req *req, struct gr_str name, const char **msg);
/* Single node (no gregor.metadata.etcd.endpoints): INVALID_CONFIG when the new topic config set holds a value
 * only a cluster honours (gr_tcfg_single_node_refusal: min.insync.replicas other than 1); else NONE. */
int16_t gr_alter_topic_single_node(struct gr_req *req, const struct gr_tcfg_set *set, const char **msg);
/* UNKNOWN_TOPIC_OR_PARTITION with Kafka's "The topic 'x' does not exist." */
int16_t gr_alter_topic_missing(struct gr_req *req, struct gr_str name, const char **msg);
/* Any other resource type: INVALID_REQUEST "Unknown resource type N". */
int16_t gr_alter_unknown_type(struct gr_req *req, int8_t type, const char **msg);
/* Submits the replacement of topic `t`'s topic-level configs with `set` through the broker's topic writer
 * (single node: storage's topic operation FIFO, file work on the I/O pool; cluster: the topic record in
 * etcd) and returns NONE (UNKNOWN_SERVER_ERROR with *msg when out of
 * memory). Its failure (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION when deleted meanwhile,
 * KAFKA_STORAGE_ERROR) is written to *code_out and *message_out by gr_alter_topics_stored, which the
 * handler passes to gr_req_topic_ops_wait. Uses req->hstate. */
int16_t gr_alter_topic_store(struct gr_req *req, const struct gr_image_topic *t,
                             const struct gr_tcfg_set *set, const char **msg, int16_t *code_out,
                             struct gr_str *message_out);
/* Copies the outcomes of the config writes submitted by gr_alter_topic_store into their response entries. */
void gr_alter_topics_stored(struct gr_req *req);
/* A BROKER resource name: "" (the cluster-wide default) or this node id, else INVALID_REQUEST with Kafka's
 * messages (ConfigAdminManager.validateResourceNameIsCurrentNodeId). */
int16_t gr_alter_broker_name(struct gr_req *req, struct gr_str name, const char **msg);
/* The listener SSL store keys of a new, validated dynamic broker set `set` of resource `name` (certificate
 * reload, server/tls_reload.h): at the cluster-default level ("") INVALID_REQUEST "Cannot update these
 * configs at default cluster level, broker id must be specified: [k, ...]" (Kafka's DynamicBrokerConfig);
 * per broker, the new contexts of the SSL listeners that `named` (`nnamed` keys the request sets or
 * deletes) concerns are built and checked (gr_tls_reload_prepare, INVALID_REQUEST with Kafka's message).
 * Returns NONE with *reload (NULL when nothing to reload, or validate_only: built, checked, freed). */
int16_t gr_alter_broker_tls(struct gr_req *req, struct gr_str name, const struct gr_tcfg_set *set,
                            const char *const *named, int nnamed, bool validate_only,
                            struct gr_tls_reload **reload, const char **msg);
/* Submits the durable replacement of the dynamic broker set of resource `name` ("" = the cluster-wide
 * default level, else this broker's) with `set` (validated, e.g. by gr_bcfg_replace; arrays must live as
 * long as the request): the file (server/dynconf.h) is written on the I/O pool, then the set applies at
 * once (gr_dynconf_commit) and `reload` (from gr_alter_broker_tls, NULL for none; taken over, freed when
 * the write fails) swaps the listeners' TLS contexts. Failure reporting, hstate use and returns as
 * gr_alter_topic_store. */
int16_t gr_alter_broker_store(struct gr_req *req, struct gr_str name, const struct gr_tcfg_set *set,
                              struct gr_tls_reload *reload, const char **msg, int16_t *code_out,
                              struct gr_str *message_out);

/* IncrementalAlterConfigs on a BROKER_LOGGER resource (Kafka's RuntimeLoggerManager): `name` must be this
 * node id ("Node id must be an integer, but it is: x", "Unexpected node id. Expected n, but received n");
 * every operation is checked first (APPEND/SUBTRACT and unknown ops INVALID_REQUEST, a logger other than
 * "root" INVALID_CONFIG, DELETE of root INVALID_REQUEST, a level other than Kafka's six INVALID_CONFIG),
 * then, unless validate_only, each SET applies at once (TRACE runs as DEBUG, FATAL as ERROR; not
 * persisted, as in Kafka). Returns the error code, *msg set when not NONE. */
int16_t gr_alter_logger(struct gr_req *req, struct gr_str name, const struct gr_tcfg_op *ops, int n,
                        bool validate_only, const char **msg);

/* DescribeConfigs (Kafka's ConfigHelper). Checks return a Kafka error code, *msg set when not NONE (NULL
 * when the arena is exhausted). */
/* A TOPIC resource name: "" or an invalid name is INVALID_TOPIC_EXCEPTION. */
int16_t gr_describe_topic_check(struct gr_req *req, struct gr_str name, const char **msg);
/* Topic `t`'s topic-level value of `name` (the image's copy: every broker has it), normalised as Kafka's
 * LogConfig prints it (CreateTopics stores values as the request gave them, as Kafka's metadata does: "
 * 3600000" is shown "3600000"); NULL if unset.
 */
const char *gr_describe_topic_value(struct gr_req *req, const struct gr_image_topic *t, const char *name);
/* A BROKER resource name: "" (the cluster-wide dynamic defaults) or this node id, else INVALID_REQUEST. */
int16_t gr_describe_broker_check(struct gr_req *req, struct gr_str name, const char **msg);
/* Fills `e` with the i-th (< cfg->ssl_dyn_count) dynamic listener SSL store config of this broker
 * (certificate reload, server/tls_reload.h) as Kafka shows a per-broker dynamic listener config:
 * DYNAMIC_BROKER_CONFIG, not read-only, PASSWORD-typed ones (gr_config_ssl_key_sensitive) null and
 * sensitive. Strings borrowed from cfg. */
void gr_describe_listener_ssl_entry(const struct gr_config *cfg, int i, struct gr_cfg_entry *e);
/* A BROKER_LOGGER resource name: this node id, else INVALID_REQUEST ("" included). */
int16_t gr_describe_logger_check(struct gr_req *req, struct gr_str name, const char **msg);
/* Fills `e` with the one logger, "root", at its current level (DYNAMIC_BROKER_LOGGER_CONFIG, not read-only:
 * IncrementalAlterConfigs changes it). */
void gr_describe_logger_entry(struct gr_cfg_entry *e);

#endif
