/*
 * metrics_help.c: HELP texts of the /metrics families (server/metrics_help.h). Each text says what the value
 * is, its unit, and the Kafka MBean or exporter it carries the name of.
 */
#include "server/metrics_help.h"

#include <stddef.h>
#include <string.h>

static const struct {
    const char *name, *help;
} help[] = {
    /* kafka.server:type=BrokerTopicMetrics (JMX exporter names); with and without a topic label */
    {"kafka_server_brokertopicmetrics_messagesin_total", "Records appended as leader from clients' Produce."},
    {"kafka_server_brokertopicmetrics_bytesin_total",
     "Bytes of record batches appended as leader from clients' Produce."},
    {"kafka_server_brokertopicmetrics_bytesout_total",
     "Bytes of records returned to clients' Fetch (not followers')."},
    {"kafka_server_brokertopicmetrics_bytesrejected_total", "Bytes of Produce requests rejected."},
    {"kafka_server_brokertopicmetrics_totalproducerequests_total",
     "Produce partitions that reached the append, refused ones included."},
    {"kafka_server_brokertopicmetrics_totalfetchrequests_total",
     "Fetch partitions read (clients and followers), errors included."},
    {"kafka_server_brokertopicmetrics_failedproducerequests_total",
     "Produce partition-requests that failed."},
    {"kafka_server_brokertopicmetrics_failedfetchrequests_total",
     "Client Fetch partition-requests that failed."},
    {"kafka_server_brokertopicmetrics_replicationbytesin_total",
     "Bytes appended from replica fetching (as follower)."},
    {"kafka_server_brokertopicmetrics_replicationbytesout_total", "Bytes returned to followers' Fetch."},
    /* kafka.network:type=RequestMetrics */
    {"kafka_network_requestmetrics_requests_total", "Requests served, by Kafka API name and version."},
    {"kafka_network_requestmetrics_errors_total", "Error codes returned, by Kafka API name and error name."},
    {"kafka_network_requestmetrics_requestqueuetimems",
     "Time a request waited before handling, milliseconds."},
    {"kafka_network_requestmetrics_localtimems", "Time handling a request on this broker, milliseconds."},
    {"kafka_network_requestmetrics_remotetimems",
     "Time waiting on others (long-poll Fetch, acks=all), milliseconds."},
    {"kafka_network_requestmetrics_responsequeuetimems",
     "Time a response waited before sending, milliseconds."},
    {"kafka_network_requestmetrics_responsesendtimems", "Time sending a response, milliseconds."},
    {"kafka_network_requestmetrics_totaltimems",
     "Time from request received to response sent, milliseconds."},
    {"kafka_network_socketserver_networkprocessoravgidlepercent",
     "Fraction of the last minute the network thread was idle (0 to 1)."},
    {"kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
     "Fraction of the last minute the request handlers were idle (0 to 1)."},
    /* kafka.server:type=ReplicaManager */
    {"kafka_server_replicamanager_partitioncount", "Partitions with a replica on this broker."},
    {"kafka_server_replicamanager_leadercount", "Partitions this broker leads."},
    {"kafka_server_replicamanager_underreplicatedpartitions",
     "Partitions led here whose ISR is smaller than the replica set."},
    {"kafka_server_replicamanager_underminisrpartitioncount",
     "Partitions led here whose ISR is below min.insync.replicas."},
    {"kafka_server_replicamanager_atminisrpartitioncount",
     "Partitions led here whose ISR equals min.insync.replicas."},
    {"kafka_server_replicamanager_offlinereplicacount", "Replicas on this broker that are offline."},
    {"kafka_server_replicamanager_reassigningpartitions",
     "Partitions led here whose reassignment (kafka-reassign-partitions.sh) is in progress."},
    {"kafka_server_replicamanager_isrshrinks_total", "ISR shrinks of partitions led here."},
    {"kafka_server_replicamanager_isrexpands_total", "ISR expansions of partitions led here."},
    /* kafka.controller:type=KafkaController */
    {"kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, 0 elsewhere."},
    {"kafka_controller_kafkacontroller_offlinepartitionscount",
     "Partitions without a live leader (controller's view)."},
    {"kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster (controller's view)."},
    {"kafka_controller_kafkacontroller_globalpartitioncount",
     "Partitions in the cluster (controller's view)."},
    {"kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
     "Partitions whose leader is not their preferred replica (controller's view)."},
    /* kafka.log:type=Log, kafka.cluster:type=Partition */
    {"kafka_log_log_size", "Bytes of a partition's log on this broker."},
    {"kafka_log_log_logstartoffset", "A partition's log start offset."},
    {"kafka_log_log_logendoffset", "A partition's log end offset."},
    {"kafka_log_log_numlogsegments", "Segments of a partition's log."},
    {"kafka_cluster_partition_underreplicated",
     "1 when a partition led here has an ISR smaller than its replicas."},
    {"kafka_cluster_partition_underminisr",
     "1 when a partition led here has an ISR below min.insync.replicas."},
    {"kafka_cluster_partition_insyncreplicascount", "Size of a partition's ISR (on its leader)."},
    {"kafka_cluster_partition_replicascount", "Replicas of a partition (on its leader)."},
    {"kafka_cluster_partition_atminisr",
     "1 when a partition led here has an ISR equal to min.insync.replicas."},
    {"kafka_cluster_partition_laststableoffsetlag",
     "High watermark minus last stable offset (open transactions)."},
    /* kafka_exporter's names and values */
    {"kafka_brokers", "Brokers in the cluster."},
    {"kafka_topic_partitions", "Partitions of a topic."},
    {"kafka_topic_partition_current_offset", "A partition's high watermark."},
    {"kafka_topic_partition_oldest_offset", "A partition's log start offset."},
    {"kafka_topic_partition_leader", "Broker id of a partition's leader."},
    {"kafka_topic_partition_replicas", "Replicas of a partition."},
    {"kafka_topic_partition_in_sync_replica", "In-sync replicas of a partition."},
    {"kafka_topic_partition_leader_is_preferred", "1 when a partition's leader is its preferred replica."},
    {"kafka_topic_partition_under_replicated_partition",
     "1 when a partition's ISR is smaller than its replicas."},
    {"kafka_consumergroup_current_offset", "A group's committed offset in a partition."},
    {"kafka_consumergroup_current_offset_sum",
     "Sum of a group's current_offset values over a topic's partitions (-1 for each without a commit)."},
    {"kafka_consumergroup_lag", "High watermark minus committed offset; -1 without a commit; not clamped."},
    {"kafka_consumergroup_lag_sum", "Sum of a group's lags over a topic's partitions with a commit."},
    {"kafka_consumergroup_members", "Members of a consumer group."},
    /* Gregor's own */
    {"gregor_consumergroup_lag_records", "High watermark minus max(committed, log start); never negative."},
    {"gregor_consumergroup_lag_bytes",
     "Log bytes from the batch holding the committed offset to the log end."},
    {"gregor_consumergroup_lag_seconds",
     "Seconds since the append of the batch holding the committed offset; 0 when caught up."},
    {"gregor_consumergroup_retention_headroom_records",
     "Committed offset minus log start offset; negative: records already deleted unread."},
    {"gregor_consumergroup_retention_headroom_seconds",
     "Earliest time in seconds before retention may delete the segment holding the committed offset."},
    {"gregor_consumergroup_min_retention_headroom_seconds",
     "Smallest retention headroom in seconds over a group's partitions."},
    {"gregor_consumergroup_records_lost_total",
     "Records deleted by retention or DeleteRecords before a group read them."},
    {"gregor_metrics_remote_partition_errors_total",
     "Partitions left out of a scrape: their leader did not answer the coordinator's partition summary "
     "request in 500 ms, or answered an error (cluster mode)."},
    {"gregor_consumergroup_status",
     "Burrow's status of a group: 0 NOTFOUND, 1 OK, 2 WARN, 3 ERR, 4 STOP, 5 STALL, 6 REWIND."},
    {"gregor_request_latency_seconds",
     "Request latency in seconds by Kafka API name (long-poll waits excluded)."},
    {"gregor_metrics_series_dropped",
     "Per-partition series left out of this scrape by gregor.metrics.partition.series.max."},
    {"gregor_metrics_remote_summary_errors_total",
     "Partition summaries a partition's leader did not give the group coordinator in time."},
    {"gregor_tls_connections_total",
     "TLS connections of an SSL or SASL_SSL listener whose handshake finished, by how Fetch's file ranges "
     "are "
     "sent: ktls (the kernel encrypts: SSL_sendfile) or userspace (pread + SSL_write)."},
    {"gregor_fetch_sessions", "Incremental fetch sessions (KIP-227) in the cache."},
    {"gregor_fetch_session_partitions", "Partitions held by all incremental fetch sessions."},
    {"gregor_fetch_session_requests_total",
     "Fetch requests by session kind: full (epoch 0), incremental, sessionless (v < 7, epoch -1, or a "
     "session emptied or over its bound), error (unknown session, wrong epoch, topic id use)."},
    {"gregor_replica_fetcher_requests_total",
     "Fetch requests this broker's replica fetcher sent to leaders, by fetch session kind (KIP-227): full "
     "(epoch 0, or no session) or incremental."},
    {"gregor_replica_fetcher_session_resets_total",
     "Times a replica fetcher connection went back to a full fetch: a session error, an answer outside "
     "its session, a lost answer."},
    {"gregor_build_info", "Constant 1, labelled with Gregor's version and git revision."},
    /* the Prometheus client libraries' process collector */
    {"process_cpu_seconds_total", "User and system CPU time spent, seconds."},
    {"process_resident_memory_bytes", "Resident memory size, bytes."},
    {"process_open_fds", "Open file descriptors."},
    {"process_max_fds", "Maximum open file descriptors (RLIMIT_NOFILE)."},
    {"process_start_time_seconds", "Start time of the process since the Unix epoch, seconds."},
};

const char *gr_metrics_help(const char *name)
{
    for (size_t i = 0; i < sizeof help / sizeof help[0]; i++)
        if (!strcmp(help[i].name, name)) return help[i].help;
    return NULL;
}
