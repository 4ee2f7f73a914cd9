/*
 * metrics.h: the broker's counters and their /metrics page (issue #22, first slice).
 *
 * Counters live on the network thread, which handles every request: a plain increment per request (by API
 * name and version, Kafka's RequestMetrics "RequestsPerSec") and per partition of a Produce appended as
 * leader or a client Fetch answered (Kafka's BrokerTopicMetrics, counted as ReplicaManager.appendToLocalLog
 * and KafkaApis.handleFetchRequest count them: MessagesInPerSec, BytesInPerSec, BytesOutPerSec,
 * TotalProduceRequestsPerSec, TotalFetchRequestsPerSec), overall and per topic. Replication fetches are not
 * counted in these. Per-topic counters are allocated when a topic is first counted, never per request.
 * gr_metrics_render (server/metrics_page.h) writes them, with the logs' sizes and offsets read from the store
 * on the loop, in the names Kafka's JMX exporter gives them (kafka_server_brokertopicmetrics_*_total, ...).
 * Read next: common/prom_text.h (the format), server/admin_http.c (the listener that serves the page).
 */
#ifndef GR_METRICS_H
#define GR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/prom_text.h"
#include "server/metrics_counts.h"
#include "server/metrics_status.h"

struct gr_broker;
struct gr_req;
struct gr_image_topic;
struct gr_produce_result;
struct gr_reqtime;

#define GR_METRICS_API_KEYS 128    /* Kafka API keys counted (above: Gregor-internal ones, not counted) */
#define GR_METRICS_API_VERSIONS 32 /* versions counted per key */

/* BrokerTopicMetrics counters of one topic, or of all topics. */
struct gr_topic_counters {
    uint64_t messages_in, bytes_in, bytes_out, produce_requests, fetch_requests;
    uint64_t failed_produce, failed_fetch, bytes_rejected; /* server/metrics_counts.h says which errors */
};

struct gr_metrics_topic; /* one topic's counters in the table (metrics.c) */

struct gr_metrics {
    struct gr_topic_counters all;
    uint64_t requests[GR_METRICS_API_KEYS][GR_METRICS_API_VERSIONS];
    struct gr_metrics_topic *topics; /* open-addressing table keyed by topic name */
    size_t topic_cap, topic_count;
    int64_t start_time_ms; /* wall clock at start: process_start_time_seconds */
    const char *version;   /* gregor_build_info's version label (main.c's GREGOR_VERSION) */
    /* errors, the Fetch split, replication bytes (server/metrics_counts.h) */
    struct gr_metrics_counts counts;
    /* records lost to retention per (group, topic) (metrics_status.h) */
    struct gr_metrics_status status;
    /* request timing and idle fractions (server/request_metrics.h), made by gr_reqtime_start */
    struct gr_reqtime *reqtime;
};

/* Zeroes `m` and notes the start time (wall clock). */
void gr_metrics_init(struct gr_metrics *m);
/* Frees the per-topic table. */
void gr_metrics_free(struct gr_metrics *m);
/* One request of API `key` at `version` served (after the version check). Out-of-range keys are ignored. */
void gr_metrics_request(struct gr_metrics *m, int16_t key, int16_t version);
/* A Produce partition appended as leader: `records` records in `bytes` bytes of record batches (Kafka's
   MessagesInPerSec / BytesInPerSec), for `topic` and overall. */
void gr_metrics_produced(struct gr_metrics *m, const char *topic, size_t topic_len, uint64_t records,
                         uint64_t bytes);
/* A TotalProduceRequestsPerSec mark for one Produce partition of `topic` (and overall) that reached the
   append, whatever its outcome: Kafka's ReplicaManager.appendToLocalLog marks every partition it is given
   (refused, duplicate and not-leader ones too); partitions KafkaApis answers first (unknown topic or
   partition, failed transaction verification) are not marked. */
void gr_metrics_produce_partition(struct gr_metrics *m, const char *topic, size_t topic_len);
/* A Produce partition of topic `it` (NULL: unknown, nothing counted) answered `error_code` without reaching
   gr_partition_produce: marks TotalProduceRequestsPerSec where Kafka's appendToLocalLog would have (not
   leader or follower, storage errors, internal topics), not where KafkaApis answers first
   (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INVALID_REQUIRED_ACKS,
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED). */
void gr_metrics_produce_refused(struct gr_metrics *m, const struct gr_image_topic *it, int16_t error_code);
/* One Produce partition's append result `r` of `bytes` record bytes to topic `it`: marks
   TotalProduceRequestsPerSec (gr_metrics_produce_partition), then counts messages and bytes in when appended
   (not refused, not a duplicate retry, which Kafka does not write again); a refused append marks
   FailedProduceRequestsPerSec (gr_metrics_counts_produce_failed says which errors) or, for
   MESSAGE_TOO_LARGE, BytesRejectedPerSec with all `bytes` (UnifiedLog.analyzeAndValidateRecords). */
void gr_metrics_appended(struct gr_metrics *m, const struct gr_image_topic *it,
                         const struct gr_produce_result *r, size_t bytes);
/* Request `req` is answered (gr_req_finish, before encoding): every Fetch (a client's or a follower's) marks
   TotalFetchRequestsPerSec for each partition of a known topic in its response not answered
   UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID (ReplicaManager.fetchMessages marks each partition it read),
   FailedFetchRequestsPerSec for one answered with an error gr_metrics_counts_fetch_failed names; a client's
   Fetch (replica id < 0) also counts its record bytes with gr_metrics_fetched. Every API:
   gr_metrics_counts_answered (errors, replication bytes). */
void gr_metrics_answered(struct gr_req *req);
/* A client Fetch answered for one partition of `topic`: `bytes` record bytes sent (BytesOutPerSec).
   Followers' bytes are not counted here (Kafka counts them as replication bytes out). */
void gr_metrics_fetched(struct gr_metrics *m, const char *topic, size_t topic_len, uint64_t bytes);
/* A TotalFetchRequestsPerSec mark for one Fetch partition of `topic` (and overall). */
void gr_metrics_fetch_partition(struct gr_metrics *m, const char *topic, size_t topic_len);
/* The counters of `topic`, or NULL when it was never counted. */
const struct gr_topic_counters *gr_metrics_topic(const struct gr_metrics *m, const char *topic);

struct gr_metrics_log_slice; /* where the page's first section stands (metrics.c) */
/* The page's first section in steps: with *state NULL, writes the counters above and takes a snapshot of
   the partitions held here (topic names copied, sizes and offsets read now), then writes kafka_log_log_*
   from it until out->len reaches `budget`; later calls go on; the last one writes the controller count and
   frees the state. Returns 1 when more remain, 0 when done, -1 out of memory (out->failed set). */
int gr_metrics_render_head_step(struct gr_broker *b, struct gr_metrics_log_slice **state, size_t budget,
                                struct gr_prom_buf *out);
/* Frees an unfinished first section's state (a page freed mid-way); NULL ignored. */
void gr_metrics_log_slice_free(struct gr_metrics_log_slice *st);
/* The page's last step: process_* figures from /proc/self and gregor_build_info. */
bool gr_metrics_render_tail(struct gr_broker *b, struct gr_prom_buf *out);

/* Writes the counter families of `m` only (no store, no process figures): what gr_metrics_render writes
   first; split out so unit tests can check exact lines. `topics`/`ntopics` name the topics to list (those
   in the store); a topic never counted is listed with zeros. */
bool gr_metrics_render_counters(const struct gr_metrics *m, const char *const *topics, int ntopics,
                                struct gr_prom_buf *out);

#endif
