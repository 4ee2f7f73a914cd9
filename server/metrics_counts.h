/*
 * metrics_counts.h: request and byte counts of issue #22 beyond the first slice (server/metrics.h).
 *
 * - kafka_network_requestmetrics_errors_total{request,error}: as Kafka's RequestChannel.updateErrorMetrics,
 *   every answered response's errorCounts() (AbstractResponse subclasses), NONE included, under the API's
 *   name (Fetch only under `Fetch`). The walk over the response is generated (protocol/gen, the
 *   *_count_errors functions: every ErrorCode field); the few APIs where Kafka reads fewer fields choose
 *   whether the top-level ones count (gr_metrics_counts_top). A Produce with acks=0 that closes its
 *   connection counts its errors too (RequestChannel.closeConnection); one answered with nothing does not
 *   (sendNoOpResponse). Fixed-size counters: API x error code, no allocation.
 * - requests_total's Fetch split: each Fetch also counted under FetchConsumer (replica id < 0) or
 *   FetchFollower (Kafka's RequestMetrics names), by version.
 * - kafka_server_brokertopicmetrics_replicationbytesout_total: record bytes a leader sent in answers to
 *   followers' Fetch (BrokerTopicStats.updateBytesOut with isFollower); replicationbytesin_total: record
 * bytes a follower appended from its leader (ReplicaFetcherThread.processPartitionData; the fetcher's
 *   batches_bytes, cluster/fetcher.h). Both only in the all-topics metric, as Kafka's BrokerTopicMetrics
 *   (its replication meters exist only without a topic).
 * - Which append and read errors Kafka counts as failed produce/fetch requests (the per-topic counters
 *   themselves live with the other BrokerTopicMetrics in server/metrics.c).
 * Read next: server/metrics.c (the calls), tools/gen_codec.py (gen_count_errors).
 */
#ifndef GR_METRICS_COUNTS_H
#define GR_METRICS_COUNTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prom_text.h"

struct gr_req;
struct gr_fetcher_stats;

#define GR_COUNTS_APIS 64         /* rows of the API table counted (server/apis.def has fewer) */
#define GR_COUNTS_ERROR_SLOTS 136 /* error codes -1..134 (protocol/errors.h); slot = code + 1 */
#define GR_COUNTS_VERSIONS 32     /* Fetch versions counted (as GR_METRICS_API_VERSIONS) */

struct gr_metrics_counts {
    uint64_t errors[GR_COUNTS_APIS][GR_COUNTS_ERROR_SLOTS]; /* by row of gr_api_table, by code + 1 */
    uint64_t fetch_consumer[GR_COUNTS_VERSIONS], fetch_follower[GR_COUNTS_VERSIONS];
    uint64_t replication_bytes_out;
};

/* Whether Kafka counts the top-level error fields of `resp`, a response of API `api_key` (the other fields
   always count): not Metadata's (MetadataResponse.errorCounts reads topics and partitions only), not
   FindCoordinator's when it has coordinators (v4+), not OffsetFetch's when it has groups (v8+), not
   AddPartitionsToTxn's when it has v0-3 results. */
bool gr_metrics_counts_top(int16_t api_key, const void *resp);
/* Counts the error codes of response `resp` of API `api_key` (its generated *_count_errors walk, with
   gr_metrics_counts_top). An API outside the table or without error fields counts nothing. */
void gr_metrics_counts_response(struct gr_metrics_counts *c, int16_t api_key, const void *resp);
/* A decoded request `req` is about to be handled: a Fetch is counted under FetchConsumer or FetchFollower
   at its version (replica id >= 0: a follower; v15+ the ReplicaState's). Other APIs: nothing. */
void gr_metrics_counts_request(struct gr_req *req);
/* Request `req` is answered (gr_metrics_answered): its response's error codes, and for a follower's Fetch
   the record bytes of its partitions as replication bytes out. */
void gr_metrics_counts_answered(struct gr_req *req);
/* Request `req` closes its connection instead of answering: a Produce with acks=0 counts its response's
   errors (Kafka's RequestChannel.closeConnection); other requests count nothing. */
void gr_metrics_counts_closed(struct gr_req *req);
/* Whether a Produce partition's append error `err` counts as a failed produce request: Kafka's
   ReplicaManager.appendToLocalLog marks FailedProduceRequestsPerSec for any append error except
   UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
   CORRUPT_MESSAGE and KAFKA_STORAGE_ERROR. NONE is not a failure. */
bool gr_metrics_counts_produce_failed(int16_t err);
/* Whether a Fetch partition's read error `err` counts as a failed fetch request: Kafka's
   ReplicaManager.readFromLog marks FailedFetchRequestsPerSec for any read error except
   UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, FENCED_LEADER_EPOCH,
   REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, INCONSISTENT_TOPIC_ID and OFFSET_OUT_OF_RANGE (handled apart);
   UNKNOWN_TOPIC_ID never reaches it (KafkaApis answers it before). NONE is not a failure. */
bool gr_metrics_counts_fetch_failed(int16_t err);
/* Writes kafka_network_requestmetrics_errors_total (a series once its count is not 0) and the two
   replication byte counters; `fs` is the follower fetcher's counters, NULL when there is none (single node:
   replication bytes in 0), and with `fs` gregor_replica_fetcher_requests_total{kind="full"|"incremental"}
   and gregor_replica_fetcher_session_resets_total (the fetcher's KIP-227 sessions). Returns false when `out`
   failed. */
bool gr_metrics_counts_render(const struct gr_metrics_counts *c, const struct gr_fetcher_stats *fs,
                              struct gr_prom_buf *out);
/* Writes the FetchConsumer and FetchFollower samples of kafka_network_requestmetrics_requests_total (the
   family's TYPE line is the caller's), a version once its count is not 0. */
void gr_metrics_counts_render_fetch_split(const struct gr_metrics_counts *c, struct gr_prom_buf *out);

#endif
