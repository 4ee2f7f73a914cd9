/*
 * internal_topics.h: the shape of the coordinators' internal topics, __consumer_offsets and
 * __transaction_state, for every path that may make them (the coordinators' own creation, a Metadata
 * auto-creation, CreateTopics), so that no request makes a coordinator's topic of another partition count,
 * replication factor or configs. Kafka's AutoTopicCreationManager.creatableTopic gives the auto-creation
 * this shape; Kafka's controller would make a CreateTopics naming them as asked, which Gregor does not
 * (README "Transactions and exactly-once").
 * Read next: server/txns.c (__transaction_state), coordinator/offsets_log.h (__consumer_offsets).
 */
#ifndef GR_SERVER_INTERNAL_TOPICS_H
#define GR_SERVER_INTERNAL_TOPICS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/arena.h"
#include "protocol/wire.h"
#include "server/config.h"

/* Whether `name` is one of Kafka's internal topics (Topic.isInternal: __consumer_offsets,
 * __transaction_state). */
bool gr_topic_is_internal(const char *name);

/* __transaction_state's topic configs, as Kafka's TransactionLog.transactionTopicConfigs: cleanup.policy
 * compact, compression.type uncompressed, min.insync.replicas transaction.state.log.min.isr, segment.bytes
 * transaction.state.log.segment.bytes, unclean.leader.election.enable false. */
#define GR_TXN_TOPIC_CONFIGS 5
struct gr_txn_topic_configs {
    const char *keys[GR_TXN_TOPIC_CONFIGS];
    const char *values[GR_TXN_TOPIC_CONFIGS]; /* point into the struct */
    char isr[16], seg[16];
};
/* Fills `c` from the settings `s`. */
void gr_txn_topic_configs(const struct gr_broker_settings *s, struct gr_txn_topic_configs *c);

/* The layout of the coordinator's topic `name`: for __consumer_offsets offsets.topic.num.partitions
 * partitions of offsets.topic.replication.factor replicas, cleanup.policy compact and segment.bytes
 * GR_OFFSETS_SEGMENT_BYTES (coordinator/offsets_log.h); for __transaction_state
 * transaction.state.log.num.partitions of transaction.state.log.replication.factor, gr_txn_topic_configs.
 * For those two names sets *partitions, *replication_factor, *assignment (NULL: placed by the writer),
 * *keys / *values (copied into `arena`) and *count and returns true; false for any other name or out of
 * memory (nothing set). */
bool gr_internal_topic_layout(struct gr_arena *arena, const struct gr_broker_settings *s, struct gr_str name,
                              int32_t *partitions, int32_t *replication_factor, int32_t **assignment,
                              const char ***keys, const char ***values, int32_t *count);

#endif
