/*
 * metrics_cluster.h: the replica manager's, the partitions', the controller's and kafka_exporter's topic
 * families of /metrics (issue #22), from the metadata image (cluster/image.h), the local logs and their
 * partition objects (partition/partition.h), written by gr_metrics_render (server/metrics.c).
 *
 * Replica manager (Kafka's ReplicaManager gauges and meters, as the JMX exporter names them):
 *   kafka_server_replicamanager_partitioncount      local logs (allPartitions: every replica held here);
 *   kafka_server_replicamanager_leadercount         of them, online and led here (leaderPartitionsIterator:
 *                                                   the image's leader is this node, not self-fenced);
 *   kafka_server_replicamanager_offlinereplicacount local logs offline (a failed fsync: gr_log_offline);
 *   kafka_server_replicamanager_{underreplicatedpartitions,underminisrpartitioncount,atminisrpartitioncount}
 *                                                   led partitions that are so (Partition.isUnderReplicated:
 *                                                   ISR < replicas; isUnderMinIsr: ISR < effective min ISR;
 *                                                   isAtMinIsr: ISR = it), counted by the leader only;
 *   kafka_server_replicamanager_{isrshrinks,isrexpands}_total  ISR changes this broker as leader wrote
 *                                                   (cluster/roles.h isr_shrinks / isr_expands; 0 on a single
 *                                                   node, which never changes an ISR).
 * The ISR is the leader's committed ISR (gr_partition_isr, Partition.partitionState.isr) once the partition
 * has its role, else the image's; the effective min ISR is min(the topic's min.insync.replicas, else the
 * broker's; the replication factor) (Partition.effectiveMinIsr).
 * Per partition led here (Kafka's kafka.cluster:type=Partition gauges; Kafka registers them on every replica
 * with 0 on followers, Gregor writes them on the leader only so sum() over brokers counts each once):
 *   kafka_cluster_partition_{underreplicated,underminisr,atminisr}  0 or 1;
 *   kafka_cluster_partition_{insyncreplicascount,replicascount}     ISR size, replication factor;
 *   kafka_cluster_partition_laststableoffsetlag  high watermark - last stable offset (lastStableOffsetLag).
 * Controller (KRaft's ControllerMetadataMetrics, kafka.controller:type=KafkaController), from the image:
 *   kafka_controller_kafkacontroller_{globaltopiccount,globalpartitioncount}  every topic (internal ones
 *   included, as KRaft counts topicsById) and partition; offlinepartitionscount: partitions without a leader;
 *   preferredreplicaimbalancecount: partitions whose leader is not their first replica
 *   (PartitionRegistration.hasPreferredLeader; a leaderless one counts too). KRaft writes these on every
 *   controller, standby ones included; Gregor writes them on the active controller only, 0 elsewhere (as
 *   ZooKeeper-era Kafka did), so both sum() and max() over brokers give the cluster's figure. A single node
 *   is its own controller. (activecontrollercount stays in server/metrics.c.)
 * kafka_exporter (danielqsj/kafka_exporter's names and values):
 *   kafka_brokers (live brokers: the image's unfenced ones) and kafka_topic_partitions{topic} on the active
 *   controller only (a single node: itself); per partition, written by its leader only (so sum() over
 *   brokers counts each once; a partition without a leader has none, as kafka_exporter's offsets fail then):
 *   kafka_topic_partition_current_offset (the high watermark, ListOffsets latest), _oldest_offset (the log
 *   start offset), _leader (its node id), _replicas, _in_sync_replica, _leader_is_preferred (leader = first
 *   replica: 1) and _under_replicated_partition (ISR < replicas: 1), all {topic,partition}.
 * Network thread; no disk I/O; work and memory bounded by the local partitions and the image's topics.
 * Read next: server/metrics.c, cluster/roles.h (the ISR change counters).
 */
#ifndef GR_METRICS_CLUSTER_H
#define GR_METRICS_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/prom_text.h"

struct gr_broker;
struct gr_image;

/* The controller's figures of an image (ControllerMetadataMetricsPublisher.publishSnapshot's counts). */
struct gr_metrics_ctl_counts {
    int64_t topics;     /* GlobalTopicCount: every topic, internal ones included */
    int64_t partitions; /* GlobalPartitionCount */
    int64_t offline;    /* OfflinePartitionsCount: leader -1 */
    int64_t imbalance;  /* PreferredReplicaImbalanceCount: leader != first replica (or no replica) */
    int64_t brokers;    /* kafka_exporter's kafka_brokers: registered and not fenced */
};

/* Counts `img`'s topics, partitions and brokers into *c as the struct says. O(partitions + brokers). */
void gr_metrics_ctl_counts(const struct gr_image *img, struct gr_metrics_ctl_counts *c);

/* A led partition's replication conditions (Partition.isUnderReplicated, isUnderMinIsr, isAtMinIsr). */
struct gr_metrics_isr_state {
    bool under_replicated; /* isr < replicas */
    bool under_min_isr;    /* isr < effective min ISR */
    bool at_min_isr;       /* isr = effective min ISR */
};
/* The conditions of a partition with `replicas` assigned replicas and `isr` in sync whose topic's
   min.insync.replicas is `min_isr` (< 1 taken as 1): the effective min ISR is min(min_isr, replicas). */
struct gr_metrics_isr_state gr_metrics_isr_state(int32_t replicas, int32_t isr, int32_t min_isr);

struct gr_metrics_cluster_slice; /* where a sliced write stands (metrics_cluster.c) */
/* The same families in steps (server/metrics_page.h): with *state NULL, writes the replica manager's counts
   and takes a snapshot of the partitions led here (values and topic names copied), then writes the
   per-partition families from it until out->len reaches `budget`; later calls go on; the last one writes
   the controller's and cluster-wide figures (read then) and frees the state. Returns 1 when more remain, 0
   when done, -1 out of memory. */
int gr_metrics_cluster_render_step(struct gr_broker *b, struct gr_metrics_cluster_slice **state,
                                   size_t budget, struct gr_prom_buf *out);
/* Frees a sliced write's state left unfinished (a page freed mid-way); NULL ignored. */
void gr_metrics_cluster_slice_free(struct gr_metrics_cluster_slice *st);

#endif
