/*
 * config.c: the configuration table and its parsing; see config.h. Defaults are Apache Kafka 4.1's unless
 * the comment says why Gregor differs (one node: replication factors fixed at 1,
 * offsets.topic.replication.factor, transaction.state.log.replication.factor and
 * transaction.state.log.min.isr 1 unless set; min.insync.replicas only in cluster mode).
 */
#include "server/config.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster/layout.h" /* gr_cluster_prefix_check */
#include "common/limits.h"  /* GR_CLUSTER_REPLICAS_MAX */
#include "common/log.h"     /* gr_log_format_parse */

#define I32 INT32_MIN, INT32_MAX
#define I64 INT64_MIN, INT64_MAX
#define POS32 1, INT32_MAX

static const struct gr_config_def defs[] = {
    {"listeners", GR_CFG_LIST, "PLAINTEXT://127.0.0.1:9092", 0, 0,
     "Listeners to bind: NAME://host:port, comma-separated; port 0 binds a free port."},
    {"advertised.listeners", GR_CFG_LIST, NULL, 0, 0,
     "Addresses advertised to clients, per listener name; a listener not named here advertises its own "
     "address."},
    {"listener.security.protocol.map", GR_CFG_STRING,
     "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", 0, 0,
     "Security protocol per listener name (Gregor serves PLAINTEXT only)."},
    {"node.id", GR_CFG_INT, "1", 0, INT32_MAX, "The node id of this broker."},
    {"broker.id", GR_CFG_INT, "-1", -1, INT32_MAX, "Alias of node.id, kept for ZooKeeper-era configs."},
    {"log.dirs", GR_CFG_STRING, NULL, 0, 0, "Directory holding the partition logs (one directory)."},
    {"log.dir", GR_CFG_STRING, "data", 0, 0, "Used when log.dirs is not set."},
    {"num.partitions", GR_CFG_INT, "1", POS32, "Default partition count for auto-created topics."},
    {"auto.create.topics.enable", GR_CFG_BOOLEAN, "true", 0, 0, "Create a topic when Metadata asks for it."},
    {"default.replication.factor", GR_CFG_INT, "1", 1, GR_CLUSTER_REPLICAS_MAX,
     "Replication factor of auto-created topics (one node: 1)."},
    {"offsets.topic.replication.factor", GR_CFG_INT, "3", 1, GR_CLUSTER_REPLICAS_MAX,
     "Replicas of each __consumer_offsets partition; in a cluster its creation waits until that many "
     "brokers are registered. Gregor: a single-node broker uses 1 when it is not set, and refuses to start "
     "when it is set above 1."},
    {"offsets.topic.num.partitions", GR_CFG_INT, "50", POS32, "Partitions of __consumer_offsets."},
    {"transaction.state.log.num.partitions", GR_CFG_INT, "50", 1, 1000,
     "Partitions of __transaction_state, made on first use; an existing topic keeps its count. Gregor: at "
     "most 1000."},
    {"transaction.state.log.replication.factor", GR_CFG_INT, "3", 1, GR_CLUSTER_REPLICAS_MAX,
     "Replicas of each __transaction_state partition; in a cluster its creation waits until that many "
     "brokers are registered. Gregor: a single-node broker uses 1 when it is not set, and refuses to start "
     "when it is set above 1."},
    {"transaction.state.log.min.isr", GR_CFG_INT, "2", POS32,
     "The min.insync.replicas of __transaction_state: replicas in the ISR a coordinator write needs. Gregor: "
     "a single-node broker uses 1 when it is not set, and refuses to start when it is set above 1."},
    {"transaction.state.log.segment.bytes", GR_CFG_INT, "104857600", POS32,
     "The segment.bytes of __transaction_state (small segments keep its compaction and the coordinator load "
     "quick)."},
    {"transaction.abort.timed.out.transaction.cleanup.interval.ms", GR_CFG_INT, "10000", POS32,
     "How often the transaction coordinator looks for transactions past their timeout and aborts them (ms)."},
    {"transaction.max.timeout.ms", GR_CFG_INT, "900000", POS32,
     "The longest transaction.timeout.ms a producer may ask for (ms); InitProducerId asking for more gets "
     "INVALID_TRANSACTION_TIMEOUT."},
    {"transactional.id.expiration.ms", GR_CFG_INT, "604800000", POS32,
     "How long the transaction coordinator keeps a transactional id whose producer sent no transaction "
     "request, once no transaction of it is open (ms)."},
    {"transaction.remove.expired.transaction.cleanup.interval.ms", GR_CFG_INT, "3600000", POS32,
     "How often the transaction coordinator removes the transactional ids past "
     "transactional.id.expiration.ms "
     "(ms)."},
    {"min.insync.replicas", GR_CFG_INT, "1", 1, INT32_MAX,
     "Replicas (the leader included) that must be in the ISR for an acks=all produce to succeed; a topic's "
     "min.insync.replicas overrides it. A single-node broker accepts only 1."},
    {"message.max.bytes", GR_CFG_INT, "1048588", 0, INT32_MAX,
     "Largest record batch size allowed, in bytes."},
    {"log.segment.bytes", GR_CFG_INT, "1073741824", 14, INT32_MAX, "Size of a single log segment, in bytes."},
    {"log.roll.ms", GR_CFG_LONG, NULL, 1, INT64_MAX, "Maximum time before a new segment is rolled (ms)."},
    {"log.roll.hours", GR_CFG_INT, "168", POS32, "Maximum time before a new segment is rolled (hours)."},
    {"log.retention.ms", GR_CFG_LONG, NULL, -1, INT64_MAX, "Time to keep a segment (ms); -1 unlimited."},
    {"log.retention.minutes", GR_CFG_INT, NULL, -1, INT32_MAX, "Time to keep a segment (minutes)."},
    {"log.retention.hours", GR_CFG_INT, "168", -1, INT32_MAX, "Time to keep a segment (hours)."},
    {"log.retention.bytes", GR_CFG_LONG, "-1", I64,
     "Maximum partition size before old segments are deleted; -1 unlimited."},
    {"log.retention.check.interval.ms", GR_CFG_LONG, "300000", 1, INT64_MAX,
     "How often retention runs (ms)."},
    {"log.index.interval.bytes", GR_CFG_INT, "4096", 0, INT32_MAX, "Bytes between offset index entries."},
    {"log.index.size.max.bytes", GR_CFG_INT, "10485760", 4, INT32_MAX,
     "Maximum size of an offset index, in bytes."},
    {"log.flush.interval.messages", GR_CFG_LONG, "9223372036854775807", 1, INT64_MAX,
     "Messages appended before a flush."},
    {"log.flush.interval.ms", GR_CFG_LONG, NULL, 0, INT64_MAX, "Maximum time data stays unflushed (ms)."},
    {"log.cleanup.policy", GR_CFG_LIST, "delete", 0, 0,
     "Default cleanup policy: delete, compact, or compact,delete."},
    {"log.cleaner.enable", GR_CFG_BOOLEAN, "true", 0, 0, "Whether the log cleaner (compaction) runs."},
    {"log.cleaner.dedupe.buffer.size", GR_CFG_LONG, "134217728", 24, INT64_MAX,
     "Memory of the cleaner's key map, in bytes (24 per key)."},
    {"log.cleaner.io.max.bytes.per.second", GR_CFG_DOUBLE, "1.7976931348623157E308", 0, 0,
     "Cleaner read+write rate limit, in bytes per second."},
    {"log.cleaner.backoff.ms", GR_CFG_LONG, "15000", 0, INT64_MAX,
     "Sleep of the cleaner when no log needs cleaning (ms)."},
    {"log.cleaner.delete.retention.ms", GR_CFG_LONG, "86400000", 0, INT64_MAX,
     "How long tombstones survive compaction (ms)."},
    {"log.cleaner.min.cleanable.ratio", GR_CFG_DOUBLE, "0.5", 0, 0,
     "Dirty share of a log that triggers its compaction."},
    {"log.cleaner.min.compaction.lag.ms", GR_CFG_LONG, "0", 0, INT64_MAX,
     "Shortest time a record stays uncompacted (ms)."},
    {"log.cleaner.max.compaction.lag.ms", GR_CFG_LONG, "9223372036854775807", 1, INT64_MAX,
     "Longest time a record may stay uncompacted (ms)."},
    {"log.message.timestamp.type", GR_CFG_STRING, "CreateTime", 0, 0, "CreateTime or LogAppendTime."},
    {"log.message.timestamp.before.max.ms", GR_CFG_LONG, "9223372036854775807", 0, INT64_MAX,
     "Largest allowed age of a record timestamp (ms)."},
    {"log.message.timestamp.after.max.ms", GR_CFG_LONG, "3600000", 0, INT64_MAX,
     "Largest allowed lead of a record timestamp over the broker clock (ms)."},
    {"compression.type", GR_CFG_STRING, "producer", 0, 0,
     "Topic compression: producer keeps what the producer sent."},
    {"socket.request.max.bytes", GR_CFG_INT, "104857600", 1, INT32_MAX,
     "Largest request frame accepted, in bytes."},
    {"queued.max.request.bytes", GR_CFG_LONG, "-1", -1, INT64_MAX,
     "Bytes of requests held before sockets stop being read; -1 unlimited."},
    {"max.connections", GR_CFG_INT, "2147483647", 0, INT32_MAX, "Maximum concurrent connections."},
    {"connections.max.idle.ms", GR_CFG_LONG, "600000", -1, INT64_MAX,
     "Idle connections are closed after this (ms); -1 never."},
    {"connections.max.reauth.ms", GR_CFG_LONG, "0", I64,
     "KIP-368: a SASL session's longest lifetime (ms), told to the client in SaslAuthenticate v1+; a "
     "connection that has not re-authenticated by then is closed at its next request. 0 or less: off."},
    {"sasl.server.max.receive.size", GR_CFG_INT, "524288", POS32,
     "Largest frame a SASL connection may send before it is authenticated, in bytes; a larger announced "
     "size closes the connection before anything is allocated."},
    {"connection.failed.authentication.delay.ms", GR_CFG_INT, "100", 0, INT32_MAX,
     "How long the answer to a failed SASL authentication is held before it is sent and the connection "
     "closed (ms): slows password guessing without blocking the loop."},
    {"fetch.max.bytes", GR_CFG_INT, "57671680", 1024, INT32_MAX, "Maximum bytes returned by one Fetch."},
    {"max.incremental.fetch.session.cache.slots", GR_CFG_INT, "1000", 0, INT32_MAX,
     "Most incremental fetch sessions (KIP-227) the broker keeps; 0: none are made."},
    {"min.incremental.fetch.session.eviction.ms", GR_CFG_INT, "120000", 0, INT32_MAX,
     "How long a fetch session is kept from eviction by a less valuable new one (ms)."},
    {"delete.topic.enable", GR_CFG_BOOLEAN, "true", 0, 0, "Whether topics can be deleted."},
    {"group.min.session.timeout.ms", GR_CFG_INT, "6000", 0, INT32_MAX,
     "Smallest session timeout a group member may use (ms)."},
    {"group.max.session.timeout.ms", GR_CFG_INT, "1800000", 0, INT32_MAX,
     "Largest session timeout a group member may use (ms)."},
    {"group.initial.rebalance.delay.ms", GR_CFG_INT, "3000", 0, INT32_MAX,
     "Delay of the first rebalance of an empty group (ms)."},
    {"group.max.size", GR_CFG_INT, "2147483647", 1, INT32_MAX, "Maximum members of one group."},
    {"offsets.retention.minutes", GR_CFG_INT, "10080", 1, INT32_MAX,
     "Committed offsets of empty groups expire after this."},
    {"offset.metadata.max.bytes", GR_CFG_INT, "4096", 0, INT32_MAX,
     "Largest offset commit metadata, in bytes."},
    {"producer.id.expiration.ms", GR_CFG_INT, "86400000", 1, INT32_MAX,
     "Producer ids expire after this much silence (ms)."},
    {"producer.id.expiration.check.interval.ms", GR_CFG_INT, "600000", 1, INT32_MAX,
     "How often expired producer ids are dropped (ms)."},
    {"transaction.partition.verification.enable", GR_CFG_BOOLEAN, "true", 0, 0,
     "The leader asks the transaction coordinator whether a transactional Produce batch's partition (and a "
     "TxnOffsetCommit's __consumer_offsets partition) is in the producer's ongoing transaction before "
     "appending it (KIP-890 part 1); false: appended unasked. Dynamic."},
    {"gregor.listener.file", GR_CFG_STRING, NULL, 0, 0,
     "Gregor: file that receives host:port of the bound listener (for tests using port 0)."},
    {"gregor.admin.listeners", GR_CFG_STRING, "http://127.0.0.1:9644", 0, 0,
     "Gregor: the admin HTTP listener (/metrics, /v1/status/live, /v1/status/ready), http://host:port with "
     "an IPv4 address; port 0 binds a free port; empty disables it."},
    {"gregor.admin.listener.file", GR_CFG_STRING, NULL, 0, 0,
     "Gregor: file that receives host:port of the bound admin listener (for tests using port 0)."},
    {"gregor.admin.connections.max.idle.ms", GR_CFG_LONG, "30000", 1000, 86400000,
     "Gregor: an admin HTTP connection idle this long is closed (ms, rounded up to whole seconds); tests of "
     "the idle close lower it."},
    {"gregor.metrics.partition.series.max", GR_CFG_INT, "10000", 0, INT32_MAX,
     "Gregor: the most (group, topic, partition) rows whose per-partition consumer-group series /metrics "
     "writes in one scrape; past it the rows with the largest lag are kept and the samples left out are "
     "counted in gregor_metrics_series_dropped. Per-topic and per-group aggregates are always written."},
    {"gregor.transaction.version", GR_CFG_INT, "2", 0, 2,
     "The cluster's transaction.version feature level at its creation (KIP-890; ApiVersions' finalized "
     "features): 0, 1 or 2; 2 by default, as Kafka 4.x formats a new cluster. Clients that read it choose "
     "their rules: at 2 the Java 4.x client and franz-go bump the epoch per transaction (EndTxn v5) and let "
     "the broker add partitions (KIP-890 part 2); the broker serves both versions whatever the level. In a "
     "cluster the level lives in the metadata store's features key, written by the broker that creates the "
     "cluster; on one node in the log directory's gregor-features file. A stored level stands: only a value "
     "given here that differs from the one at the last start changes it on one node, never the default, so "
     "an upgrade keeps an existing level (kafka-features.sh upgrade raises it)."},
    {"gregor.acks.all.fsync", GR_CFG_BOOLEAN, "true", 0, 0,
     "Gregor: acks=-1 is answered once the batch is fsynced, and the high watermark follows the fsynced "
     "offset. false: Kafka's page-cache behaviour."},
    {"gregor.flusher.threads", GR_CFG_INT, "2", 1, 64, "Gregor: threads running fdatasync for group commit."},
    {"gregor.flush.syncfs.min.partitions", GR_CFG_INT, "16", 0, INT32_MAX,
     "Gregor: group commit makes the waiting partitions durable with one syncfs of the log directory's file "
     "system instead of one fdatasync per file when at least this many wait at once; 0 never. A syncfs error "
     "names no file: every partition of that round goes offline."},
    {"gregor.io.threads", GR_CFG_INT, "2", 1, 64,
     "Gregor: threads of the I/O pool doing disk work that may block (reading cold data into the page cache "
     "before a Fetch sends it, statvfs)."},
    {"gregor.open.files.max", GR_CFG_INT, "1024", 4, INT32_MAX,
     "Gregor: segment files (.log) kept open at once, active segments included; the least recently used idle "
     "ones are closed and reopened on the I/O pool when needed. Partition directories (one descriptor each) "
     "and connections come on top; the soft RLIMIT_NOFILE is raised to the hard limit at start."},
    {"gregor.connection.unsent.bytes.max", GR_CFG_LONG, "1048576", 1, INT64_MAX,
     "Gregor: bytes of answers built for one connection and not yet sent (a client not reading them) past "
     "which the connection stops reading requests until they drain; one answer may exceed it."},
    {"gregor.unsent.bytes.max", GR_CFG_LONG, "67108864", 1, INT64_MAX,
     "Gregor: bytes of answers built and not yet sent across the broker past which connections holding "
     "unsent answers stop reading requests until they drain; a connection with nothing unsent still takes "
     "one request."},
    {"gregor.ssl.ktls.enable", GR_CFG_BOOLEAN, "true", 0, 0,
     "Gregor: SSL listeners ask OpenSSL for kernel TLS (SSL_OP_ENABLE_KTLS); a connection whose sends the "
     "kernel then encrypts writes Fetch's file ranges with SSL_sendfile (zero copy), any other with pread + "
     "SSL_write. Needs the kernel's tls module (tcp_available_ulp); false: always pread + SSL_write."},
    {"gregor.log.level", GR_CFG_STRING, "INFO", 0, 0, "Gregor: DEBUG, INFO, WARN or ERROR."},
    {"gregor.log.format", GR_CFG_STRING, "logfmt", 0, 0,
     "Gregor: the layout of the log lines on stderr: logfmt (ts=... level=... component=... msg=... "
     "key=value) or json (one JSON object per line with the same keys)."},
    {"gregor.log.slow.request.ms", GR_CFG_LONG, "1000", 0, INT64_MAX / 1000,
     "Gregor: a request whose total time (from its frame read to its answer's last byte, less its long-poll "
     "wait: a Fetch's, JoinGroup's or SyncGroup's) exceeds this many ms logs one line (rate-limited) with "
     "its "
     "api, version, client_id, correlation_id, peer and duration_ms."},
    {"gregor.metadata.etcd.endpoints", GR_CFG_LIST, NULL, 0, 0,
     "Gregor: the etcd cluster that keeps the cluster metadata, as http://host:port, comma-separated (at "
     "most "
     "8). Unset or empty: a single-node broker, its metadata in its log directory and no etcd. Set: a "
     "cluster member (topics, partition leaders, brokers and producer ids in etcd, under "
     "gregor.metadata.etcd.prefix)."},
    {"gregor.metadata.etcd.prefix", GR_CFG_STRING, "/gregor", 0, 0,
     "Gregor: the etcd key prefix of the cluster: <prefix>/cluster_id holds the cluster id and every other "
     "key lives under <prefix>/<cluster id>/. Absolute, no trailing '/', [a-zA-Z0-9._-] segments, at most "
     "128 "
     "bytes."},
    {"broker.session.timeout.ms", GR_CFG_INT, "9000", 1, INT32_MAX,
     "The length of time in milliseconds that a broker lease lasts if no heartbeats are made (Gregor: the "
     "TTL "
     "of the etcd lease its registration is bound to, rounded up to whole seconds)."},
    {"broker.heartbeat.interval.ms", GR_CFG_INT, "2000", 1, INT32_MAX,
     "The length of time in milliseconds between broker heartbeats (Gregor: etcd lease keepalives); must be "
     "less than broker.session.timeout.ms."},
    {"controller.quorum.fetch.timeout.ms", GR_CFG_INT, "2000", 1, INT32_MAX,
     "How long in milliseconds a lost controller goes unnoticed before another broker may take over (Kafka: "
     "a KRaft voter's wait for the quorum leader before it starts an election; Gregor: the TTL of the etcd "
     "lease the controller key is bound to, rounded up to whole seconds)."},
    {"broker.rack", GR_CFG_STRING, NULL, 0, 0,
     "Rack of the broker, used by rack-aware replica placement and reported in Metadata and DescribeCluster "
     "(1 to 255 printable ASCII characters)."},
    {"security.inter.broker.protocol", GR_CFG_STRING, "PLAINTEXT", 0, 0,
     "Security protocol used to communicate between brokers (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); when "
     "inter.broker.listener.name is unset, brokers reach each other on the listener of this name. Setting "
     "both "
     "is an error."},
    /* Replication (issue #20): Kafka's ReplicationConfigs names and defaults. Where Kafka defines no range,
       Gregor refuses the values that cannot work (a timeout or interval below 1 ms, a negative size). */
    {"controlled.shutdown.enable", GR_CFG_BOOLEAN, "true", 0, 0,
     "Enable controlled shutdown of the server (Gregor, cluster mode: at SIGTERM the broker marks its "
     "registration shutting_down and keeps serving until the controller has moved every partition it leads "
     "to another live ISR member, at most 30 s; false: it marks and leaves at once)."},
    {"replica.lag.time.max.ms", GR_CFG_LONG, "30000", 1, INT64_MAX,
     "If a follower hasn't sent any fetch requests or hasn't consumed up to the leader's log end offset for "
     "at least this time (ms), the leader removes it from the ISR."},
    {"replica.fetch.max.bytes", GR_CFG_INT, "1048576", 0, INT32_MAX,
     "Bytes of records a follower asks for per partition in one fetch; not an absolute maximum: the first "
     "record batch is returned even when larger."},
    {"replica.fetch.response.max.bytes", GR_CFG_INT, "10485760", 0, INT32_MAX,
     "Bytes a follower asks for in one whole fetch response; not an absolute maximum: the first record batch "
     "is returned even when larger."},
    {"replica.fetch.wait.max.ms", GR_CFG_INT, "500", 0, INT32_MAX,
     "Longest time (ms) a leader holds a follower's fetch waiting for data; at most "
     "replica.socket.timeout.ms "
     "and replica.lag.time.max.ms."},
    {"replica.fetch.min.bytes", GR_CFG_INT, "1", 0, INT32_MAX,
     "Bytes a follower's fetch waits for (up to replica.fetch.wait.max.ms)."},
    {"replica.fetch.backoff.ms", GR_CFG_INT, "1000", 0, INT32_MAX,
     "Time (ms) a follower waits after a fetch error or a lost connection to its leader before trying "
     "again."},
    {"replica.socket.timeout.ms", GR_CFG_INT, "30000", 1, INT32_MAX,
     "Timeout (ms) of a request from one broker to another (a follower's fetch); at least "
     "replica.fetch.wait.max.ms."},
    {"num.replica.fetchers", GR_CFG_INT, "1", 1, GR_REPLICA_FETCHERS_MAX,
     "Fetchers (connections) a follower runs per source broker (Gregor: at most 64)."},
    {"leader.replication.throttled.rate", GR_CFG_LONG, "9223372036854775807", 0, INT64_MAX,
     "Kafka's cap (bytes/s) on leaders' replication of throttled replicas, set by "
     "kafka-reassign-partitions.sh "
     "--throttle: accepted (also dynamically) and not applied, Gregor replicates at full speed."},
    {"follower.replication.throttled.rate", GR_CFG_LONG, "9223372036854775807", 0, INT64_MAX,
     "Kafka's cap (bytes/s) on followers' fetching of throttled replicas, set by "
     "kafka-reassign-partitions.sh "
     "--throttle: accepted (also dynamically) and not applied, Gregor replicates at full speed."},
    {"replica.high.watermark.checkpoint.interval.ms", GR_CFG_LONG, "5000", 1, INT64_MAX,
     "How often (ms) the high watermarks are saved to replication-offset-checkpoint."},
    {"unclean.leader.election.enable", GR_CFG_BOOLEAN, "false", 0, 0,
     "Whether a replica outside the ISR may be elected leader as a last resort, even though records may be "
     "lost; a topic's unclean.leader.election.enable overrides it."},
    {"auto.leader.rebalance.enable", GR_CFG_BOOLEAN, "true", 0, 0,
     "Whether the controller moves leaderships back to preferred replicas (the first of each assignment) "
     "every leader.imbalance.check.interval.seconds, where the preferred replica is live and in the ISR."},
    {"leader.imbalance.check.interval.seconds", GR_CFG_LONG, "300", 1, INT64_MAX,
     "How often (s) the controller checks for partitions not led by their preferred replica."},
    {"leader.imbalance.per.broker.percentage", GR_CFG_INT, "10", 0, 100,
     "Accepted for Kafka's configs; as in Kafka 4.x's controller it is not used: every imbalanced partition "
     "whose preferred replica can lead is moved back."},
    {"sasl.mechanism.inter.broker.protocol", GR_CFG_STRING, "GSSAPI", 0, 0,
     "SASL mechanism used for communication between brokers when the inter-broker listener is SASL_PLAINTEXT "
     "or SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Gregor serves no GSSAPI, Kafka's default, so such "
     "a listener needs this set); the broker's username and password come from that listener's "
     "listener.name.<listener>.<mechanism>.sasl.jaas.config."},
    {"inter.broker.listener.name", GR_CFG_STRING, NULL, 0, 0,
     "Name of the listener brokers use to reach each other; must be one of the names in listeners. Unset: "
     "the listener named after security.inter.broker.protocol (PLAINTEXT), else the first in listeners."},
    /* ACLs (issue #23), Kafka's names (ServerConfigs, StandardAuthorizer) */
    {"authorizer.class.name", GR_CFG_STRING, "", 0, 0,
     "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer switches ACL checks on "
     "(server/acls.h); empty: no authorization, as in Kafka."},
    {"super.users", GR_CFG_STRING, NULL, 0, 0,
     "Principals allowed everything, semicolon-separated (User:admin;User:CN=ops,O=example)."},
    {"allow.everyone.if.no.acl.found", GR_CFG_BOOLEAN, "false", 0, 0,
     "Whether a resource with no ACL at all is open to every principal."},
};

#define NDEFS ((int)(sizeof defs / sizeof defs[0]))
_Static_assert(sizeof defs / sizeof defs[0] <= 128, "grow gr_config.values");

const struct gr_config_def *gr_config_defs(int *count)
{
    *count = NDEFS;
    return defs;
}

/* Key -> row index through an open-addressing table built on first use (lookups sit on the produce
 * path: handlers read broker defaults per request). */
#define KEY_SLOTS 256
_Static_assert(KEY_SLOTS >= 2 * (sizeof defs / sizeof defs[0]), "grow KEY_SLOTS");
static int16_t key_slots[KEY_SLOTS];
static bool key_slots_ready;

static uint32_t key_hash(const char *key)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *key; key++)
        h = (h ^ (uint8_t)*key) * 16777619u;
    return h;
}

static int find(const char *key)
{
    if (!key_slots_ready) {
        for (int i = 0; i < KEY_SLOTS; i++)
            key_slots[i] = -1;
        for (int i = 0; i < NDEFS; i++) {
            uint32_t h = key_hash(defs[i].name) % KEY_SLOTS;
            while (key_slots[h] >= 0)
                h = (h + 1) % KEY_SLOTS;
            key_slots[h] = (int16_t)i;
        }
        key_slots_ready = true;
    }
    for (uint32_t h = key_hash(key) % KEY_SLOTS; key_slots[h] >= 0; h = (h + 1) % KEY_SLOTS)
        if (strcmp(defs[key_slots[h]].name, key) == 0) return key_slots[h];
    return -1;
}

void gr_config_init(struct gr_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    gr_config_resolve(cfg);
}

void gr_config_free(struct gr_config *cfg)
{
    for (int i = 0; i < cfg->ssl_count; i++) {
        free(cfg->ssl_keys[i]);
        free(cfg->ssl_values[i]);
    }
    for (int i = 0; i < cfg->ssl_dyn_count; i++) {
        free(cfg->ssl_dyn_keys[i]);
        free(cfg->ssl_dyn_values[i]);
    }
    for (int i = 0; i < NDEFS; i++) {
        free(cfg->values[i]);
        free(cfg->dynamic[0][i]);
        free(cfg->dynamic[1][i]);
    }
    memset(cfg, 0, sizeof *cfg);
}

static bool parse_long(const char *s, int64_t *out)
{
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

/* One entry of gregor.metadata.etcd.endpoints, trimmed: http://host:port with a host of [a-zA-Z0-9.-] or a
   bracketed IPv6 address and a port in 1..65535. Returns 0 or -1 with the reason in `why`. */
static int endpoint_check(const char *e, size_t len, const char **why)
{
    *why = "is not http://host:port";
    if (len > GR_ETCD_ENDPOINT_BYTES_MAX) return -1;
    if (len >= 8 && !strncmp(e, "https://", 8)) {
        *why = "uses https, which Gregor does not speak to etcd (plain http only)";
        return -1;
    }
    if (len < 7 || strncmp(e, "http://", 7)) return -1;
    const char *h = e + 7, *end = e + len, *colon = NULL;
    if (h < end && *h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb || rb == h + 1 || rb + 1 >= end || rb[1] != ':') return -1;
        for (const char *p = h + 1; p < rb; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.') return -1;
        colon = rb + 1;
    } else {
        for (colon = h; colon < end && *colon != ':'; colon++)
            if (!isalnum((unsigned char)*colon) && *colon != '.' && *colon != '-') return -1;
        if (colon == h || colon >= end) return -1;
    }
    int64_t port = 0;
    const char *p = colon + 1;
    if (p == end || end - p > 5) return -1;
    for (; p < end; p++) {
        if (!isdigit((unsigned char)*p)) return -1;
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535) {
        *why = "has a port outside [1, 65535]";
        return -1;
    }
    return 0;
}

/* Splits gregor.metadata.etcd.endpoints at commas, trims spaces and checks each entry; copies them into
   `out` when it is not NULL. Returns the count (0 for an empty list) or -1 after printing why. */
static int endpoints_parse(const char *list, char out[][GR_ETCD_ENDPOINT_BYTES_MAX + 1])
{
    int count = 0;
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p), *b = p;
        while (b < end && isspace((unsigned char)*b))
            b++;
        const char *e = end;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        const char *why = NULL;
        if (e == b && (comma || count)) why = "is empty";
        if (!why && e > b && count == GR_ETCD_ENDPOINTS_MAX) why = "is one too many (at most 8 endpoints)";
        if (!why && e > b && endpoint_check(b, (size_t)(e - b), &why) == 0) why = NULL;
        if (why) {
            fprintf(stderr, "config: gregor.metadata.etcd.endpoints: entry '%.*s' %s\n", (int)(e - b), b,
                    why);
            return -1;
        }
        if (e > b && out) snprintf(out[count], GR_ETCD_ENDPOINT_BYTES_MAX + 1, "%.*s", (int)(e - b), b);
        count += e > b;
        p = comma ? comma + 1 : end;
    }
    return count;
}

/* The cluster-mode keys' own rules (gr_config_check has those between keys). 0 or -1 after printing. */
static int validate_cluster(const char *name, const char *value)
{
    if (!strcmp(name, "gregor.metadata.etcd.endpoints")) return endpoints_parse(value, NULL) < 0 ? -1 : 0;
    if (!strcmp(name, "gregor.metadata.etcd.prefix")) {
        char err[300];
        if (gr_cluster_prefix_check(value, err, sizeof err) == 0) return 0;
        fprintf(stderr, "config: %s\n", err);
        return -1;
    }
    if (!strcmp(name, "broker.rack")) {
        size_t n = strlen(value);
        bool ok = n >= 1 && n <= GR_CLUSTER_RACK_BYTES_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = value[i] >= ' ' && value[i] <= '~';
        if (ok) return 0;
        fprintf(stderr, "config: broker.rack must be 1 to %d printable ASCII characters, got '%.64s'\n",
                GR_CLUSTER_RACK_BYTES_MAX, value);
        return -1;
    }
    if (!strcmp(name, "security.inter.broker.protocol") && strcmp(value, "PLAINTEXT") &&
        strcmp(value, "SSL") && strcmp(value, "SASL_PLAINTEXT") && strcmp(value, "SASL_SSL")) {
        fprintf(
            stderr,
            "config: security.inter.broker.protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got "
            "'%.64s'\n",
            value);
        return -1;
    }
    if (!strcmp(name, "authorizer.class.name") && *value && strcmp(value, GR_CONFIG_STANDARD_AUTHORIZER)) {
        fprintf(stderr, "config: authorizer.class.name must be empty or %s, got '%.200s'%s\n",
                GR_CONFIG_STANDARD_AUTHORIZER, value,
                strcmp(value, "kafka.security.authorizer.AclAuthorizer")
                    ? ""
                    : " (Kafka 4 removed AclAuthorizer with ZooKeeper)");
        return -1;
    }
    if (!strcmp(name, "inter.broker.listener.name") && !*value) {
        fprintf(stderr, "config: inter.broker.listener.name must name a listener, got ''\n");
        return -1;
    }
    return 0;
}

static int validate(const struct gr_config_def *d, const char *value)
{
    int64_t v;
    switch (d->type) {
    case GR_CFG_BOOLEAN:
        if (strcasecmp(value, "true") && strcasecmp(value, "false")) {
            fprintf(stderr, "config: %s must be true or false, got '%s'\n", d->name, value);
            return -1;
        }
        return 0;
    case GR_CFG_INT:
    case GR_CFG_LONG:
        if (!parse_long(value, &v) || (d->type == GR_CFG_INT && (v < INT32_MIN || v > INT32_MAX))) {
            fprintf(stderr, "config: %s must be a%s integer, got '%s'\n", d->name,
                    d->type == GR_CFG_INT ? " 32-bit" : "n", value);
            return -1;
        }
        if ((d->min || d->max) && (v < d->min || v > d->max)) {
            fprintf(stderr, "config: %s must be in [%lld, %lld], got %lld\n", d->name, (long long)d->min,
                    (long long)d->max, (long long)v);
            return -1;
        }
        return 0;
    default:
        if (strcmp(d->name, "log.message.timestamp.type") == 0 && strcmp(value, "CreateTime") &&
            strcmp(value, "LogAppendTime")) {
            fprintf(stderr,
                    "config: log.message.timestamp.type must be CreateTime or LogAppendTime, got '%s'\n",
                    value);
            return -1;
        }
        if (strcmp(d->name, "gregor.log.level") == 0 && strcasecmp(value, "DEBUG") &&
            strcasecmp(value, "INFO") && strcasecmp(value, "WARN") && strcasecmp(value, "ERROR")) {
            fprintf(stderr, "config: gregor.log.level must be DEBUG, INFO, WARN or ERROR, got '%s'\n", value);
            return -1;
        }
        enum gr_log_format lf;
        if (strcmp(d->name, "gregor.log.format") == 0 && gr_log_format_parse(value, &lf) < 0) {
            fprintf(stderr, "config: gregor.log.format must be logfmt or json, got '%s'\n", value);
            return -1;
        }
        if (strcmp(d->name, "log.cleanup.policy") == 0 && strcmp(value, "delete") &&
            strcmp(value, "compact") && strcmp(value, "compact,delete") && strcmp(value, "delete,compact")) {
            fprintf(stderr,
                    "config: log.cleanup.policy must be delete, compact or compact,delete, got '%s'\n",
                    value);
            return -1;
        }
        if (validate_cluster(d->name, value)) return -1;
        if (d->type == GR_CFG_DOUBLE) {
            char *end;
            errno = 0;
            double x = strtod(value, &end);
            if (errno || end == value || *end || x < 0) {
                fprintf(stderr, "config: %s must be a non-negative number, got '%s'\n", d->name, value);
                return -1;
            }
        }
        return 0;
    }
}

/* Settings Gregor had and removed: given, each is ignored (as an unknown key) with one line saying why. */
static const struct {
    const char *key, *why;
} removed[] = {
    {"gregor.cluster.replication.enable",
     "a cluster always replicates (replication factors above 1 are taken)"},
    {"gregor.transaction.coordinator.test.enable", "transactions are always on (issue #21)"},
};

/* The ssl.* keys Gregor reads (issue #23), with Kafka's defaults (SslConfigs, BrokerSecurityConfigs). */
static const struct {
    const char *key, *default_value;
} ssl_defs[] = {
    {"ssl.keystore.type", "JKS"},
    {"ssl.keystore.location", NULL},
    {"ssl.keystore.key", NULL},
    {"ssl.keystore.certificate.chain", NULL},
    {"ssl.keystore.password", NULL},
    {"ssl.key.password", NULL},
    {"ssl.truststore.type", "JKS"},
    {"ssl.truststore.location", NULL},
    {"ssl.truststore.certificates", NULL},
    {"ssl.truststore.password", NULL},
    {"ssl.client.auth", "none"},
    {"ssl.enabled.protocols", "TLSv1.2,TLSv1.3"},
    {"ssl.cipher.suites", NULL},
    {"ssl.principal.mapping.rules", "DEFAULT"},
    {"ssl.endpoint.identification.algorithm", "https"},
    {"ssl.allow.dn.changes", "false"},
    {"ssl.allow.san.changes", "false"},
};
#define NSSL ((int)(sizeof ssl_defs / sizeof ssl_defs[0]))

/* Whether `key` is one of the SASL keys kept beside the ssl.* ones (issue #23; not table rows, so never
   shown by DescribeConfigs or the start-up dump, as Kafka hides JAAS configs): sasl.enabled.mechanisms,
   sasl.jaas.config, listener.name.<l>.sasl.enabled.mechanisms, listener.name.<l>.<mechanism>.sasl.jaas.config
   (BrokerSecurityConfigs, SaslConfigs, JaasContext.loadServerContext), and the per-listener forms of the
   connections.max.reauth.ms table row: listener.name.<l>.connections.max.reauth.ms and
   listener.name.<l>.<mechanism>.connections.max.reauth.ms (Kafka's listener and mechanism prefixes). */
static bool sasl_key(const char *key)
{
    static const char prefix[] = "listener.name.";
    if (!strcmp(key, "sasl.enabled.mechanisms") || !strcmp(key, "sasl.jaas.config")) return true;
    /* OAUTHBEARER's validation keys (SaslConfigs, KIP-768) and the stand-in for Kafka's JVM system property
       org.apache.kafka.sasl.oauthbearer.allowed.urls (a broker has no JVM to pass -D to) */
    if (!strncmp(key, "sasl.oauthbearer.", 17) ||
        !strcmp(key, "org.apache.kafka.sasl.oauthbearer.allowed.urls"))
        return true;
    if (strncmp(key, prefix, sizeof prefix - 1)) return false;
    const char *l = key + sizeof prefix - 1, *dot = strchr(l, '.');
    if (!dot || dot == l) return false;
    if (!strcmp(dot + 1, "sasl.enabled.mechanisms") || !strcmp(dot + 1, "connections.max.reauth.ms"))
        return true;
    const char *m = dot + 1, *mdot = strchr(m, '.');
    return mdot && mdot != m &&
           (!strcmp(mdot + 1, "sasl.jaas.config") || !strcmp(mdot + 1, "connections.max.reauth.ms") ||
            !strcmp(mdot + 1, "sasl.server.callback.handler.class") ||
            !strncmp(mdot + 1, "sasl.oauthbearer.", 17));
}

/* The ssl_defs row of `key` (ssl.<x>, or listener.name.<listener>.ssl.<x>), or -1. */
static int ssl_row(const char *key)
{
    static const char prefix[] = "listener.name.";
    if (!strncmp(key, prefix, sizeof prefix - 1)) {
        const char *dot = strchr(key + sizeof prefix - 1, '.');
        if (!dot || dot == key + sizeof prefix - 1) return -1;
        key = dot + 1;
    }
    for (int i = 0; i < NSSL; i++)
        if (!strcmp(key, ssl_defs[i].key)) return i;
    return -1;
}

/* Sets an ssl.* key (see ssl_row) after checking its own form; same returns as gr_config_set. Store types
   (JKS, PKCS12) are checked only for an SSL listener (server/tls.c), as Kafka opens a store only when used.
 */
static int ssl_set(struct gr_config *cfg, const char *key, int row, const char *value)
{
    const char *name = row >= 0 ? ssl_defs[row].key : key; /* row -1: a SASL key (sasl_key) */
    if (!strcmp(name, "ssl.client.auth") && strcmp(value, "none") && strcmp(value, "requested") &&
        strcmp(value, "required")) {
        fprintf(stderr, "config: %s must be none, requested or required, got '%.64s'\n", key, value);
        return -1;
    }
    int i = 0;
    while (i < cfg->ssl_count && strcmp(cfg->ssl_keys[i], key))
        i++;
    if (i == GR_CONFIG_SSL_KEYS_MAX) {
        fprintf(stderr, "config: more than %d ssl.* keys, %s refused\n", GR_CONFIG_SSL_KEYS_MAX, key);
        return -1;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        fprintf(stderr, "config: out of memory for %s\n", key);
        return -1;
    }
    if (i == cfg->ssl_count) {
        cfg->ssl_count++;
    } else {
        free(cfg->ssl_keys[i]);
        free(cfg->ssl_values[i]);
    }
    cfg->ssl_keys[i] = k;
    cfg->ssl_values[i] = v;
    return 0;
}

static const char *ssl_lookup(const struct gr_config *cfg, const char *key)
{
    for (int i = 0; i < cfg->ssl_count; i++)
        if (!strcmp(cfg->ssl_keys[i], key)) return cfg->ssl_values[i];
    return NULL;
}

/* Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: what a listener's SslFactory takes at runtime. */
static const char *const ssl_reconfigurable[] = {
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
};

/* The ssl.* part of listener.name.<l>.ssl.*, or NULL. */
static const char *listener_suffix(const char *key)
{
    static const char prefix[] = "listener.name.";
    if (strncmp(key, prefix, sizeof prefix - 1)) return NULL;
    const char *l = key + sizeof prefix - 1, *dot = strchr(l, '.');
    return dot && dot != l ? dot + 1 : NULL;
}

bool gr_config_ssl_dynamic_key(const char *key)
{
    const char *base = listener_suffix(key);
    for (size_t i = 0; base && i < sizeof ssl_reconfigurable / sizeof ssl_reconfigurable[0]; i++)
        if (!strcmp(base, ssl_reconfigurable[i])) return true;
    return false;
}

bool gr_config_ssl_key_sensitive(const char *key)
{
    const char *base = listener_suffix(key);
    if (!base) base = key;
    return strstr(base, "password") != NULL || !strcmp(base, "ssl.keystore.key") ||
           !strcmp(base, "ssl.keystore.certificate.chain") || !strcmp(base, "ssl.truststore.certificates");
}

void gr_config_ssl_with(const struct gr_config *cfg, const char *listener, const char *const *keys,
                        const char *const *values, int count, struct gr_ssl_settings *out)
{
    const char **f[NSSL] = {&out->keystore_type,
                            &out->keystore_location,
                            &out->keystore_key,
                            &out->keystore_certificate_chain,
                            &out->keystore_password,
                            &out->key_password,
                            &out->truststore_type,
                            &out->truststore_location,
                            &out->truststore_certificates,
                            &out->truststore_password,
                            &out->client_auth,
                            &out->enabled_protocols,
                            &out->cipher_suites,
                            &out->principal_mapping_rules,
                            &out->endpoint_identification_algorithm,
                            &out->allow_dn_changes,
                            &out->allow_san_changes};
    char lower[GR_LISTENER_NAME_BYTES_MAX + 1];
    size_t n = 0;
    for (; listener[n] && n < GR_LISTENER_NAME_BYTES_MAX; n++)
        lower[n] = (char)tolower((unsigned char)listener[n]);
    lower[n] = 0;
    for (int i = 0; i < NSSL; i++) {
        char key[GR_LISTENER_NAME_BYTES_MAX + 64];
        snprintf(key, sizeof key, "listener.name.%s.%s", lower, ssl_defs[i].key);
        const char *v = NULL;
        for (int k = 0; k < count && !v; k++) /* dynamic per-broker first (Kafka's precedence) */
            if (!strcmp(keys[k], key) && gr_config_ssl_dynamic_key(key)) v = values[k];
        if (!v) v = ssl_lookup(cfg, key);
        if (!v) v = ssl_lookup(cfg, ssl_defs[i].key);
        *f[i] = v ? v : ssl_defs[i].default_value;
    }
    out->ktls_enable = gr_config_bool(cfg, "gregor.ssl.ktls.enable");
}

void gr_config_ssl(const struct gr_config *cfg, const char *listener, struct gr_ssl_settings *out)
{
    gr_config_ssl_with(cfg, listener, (const char *const *)cfg->ssl_dyn_keys,
                       (const char *const *)cfg->ssl_dyn_values, cfg->ssl_dyn_count, out);
}

void gr_config_sasl(const struct gr_config *cfg, const char *listener, const char *mechanism,
                    struct gr_sasl_settings *out)
{
    char lower[GR_LISTENER_NAME_BYTES_MAX + 1], mech[64];
    size_t n = 0;
    for (; listener[n] && n < GR_LISTENER_NAME_BYTES_MAX; n++)
        lower[n] = (char)tolower((unsigned char)listener[n]);
    lower[n] = 0;
    for (n = 0; mechanism && mechanism[n] && n < sizeof mech - 1; n++)
        mech[n] = (char)tolower((unsigned char)mechanism[n]);
    mech[n] = 0;
    char key[GR_LISTENER_NAME_BYTES_MAX + 128];
    snprintf(key, sizeof key, "listener.name.%s.sasl.enabled.mechanisms", lower);
    out->enabled_mechanisms_key = "sasl.enabled.mechanisms";
    out->enabled_mechanisms = ssl_lookup(cfg, key);
    if (out->enabled_mechanisms) {
        snprintf(out->enabled_key_buf, sizeof out->enabled_key_buf, "%s", key);
        out->enabled_mechanisms_key = out->enabled_key_buf;
    } else {
        out->enabled_mechanisms = ssl_lookup(cfg, "sasl.enabled.mechanisms");
    }
    if (!out->enabled_mechanisms) out->enabled_mechanisms = "GSSAPI";
    snprintf(out->jaas_config_key, sizeof out->jaas_config_key, "listener.name.%s.%s.sasl.jaas.config", lower,
             mech);
    out->jaas_config = ssl_lookup(cfg, out->jaas_config_key);
    out->broker_jaas_config = ssl_lookup(cfg, "sasl.jaas.config");
    snprintf(key, sizeof key, "listener.name.%s.%s.connections.max.reauth.ms", lower, mech);
    out->reauth_ms = mech[0] ? ssl_lookup(cfg, key) : NULL;
    if (!out->reauth_ms) {
        snprintf(key, sizeof key, "listener.name.%s.connections.max.reauth.ms", lower);
        out->reauth_ms = ssl_lookup(cfg, key);
    }
}

const char *gr_config_sasl_option(const struct gr_config *cfg, const char *listener, const char *mechanism,
                                  const char *name)
{
    char key[GR_LISTENER_NAME_BYTES_MAX + 256];
    size_t n = (size_t)snprintf(key, sizeof key, "listener.name.");
    for (size_t i = 0; listener[i] && i < GR_LISTENER_NAME_BYTES_MAX && n < sizeof key - 1; i++)
        key[n++] = (char)tolower((unsigned char)listener[i]);
    key[n++] = '.';
    for (size_t i = 0; mechanism[i] && i < 63 && n < sizeof key - 1; i++)
        key[n++] = (char)tolower((unsigned char)mechanism[i]);
    snprintf(key + n, sizeof key - n, ".%s", name);
    const char *v = ssl_lookup(cfg, key);
    return v ? v : ssl_lookup(cfg, name);
}

int gr_config_set(struct gr_config *cfg, const char *key, const char *value)
{
    int ssl = ssl_row(key);
    if (ssl >= 0) return ssl_set(cfg, key, ssl, value);
    if (sasl_key(key)) {
        size_t kl = strlen(key), sl = strlen("connections.max.reauth.ms");
        if (kl > sl && !strcmp(key + kl - sl, "connections.max.reauth.ms")) { /* a long, as the table row */
            char *e;
            errno = 0;
            (void)strtoll(value, &e, 10);
            if (!value[0] || *e || errno) {
                fprintf(stderr, "config: %s must be a long (milliseconds), got '%.64s'\n", key, value);
                return -1;
            }
        }
        return ssl_set(cfg, key, -1, value);
    }
    int i = find(key);
    for (size_t r = 0; i < 0 && r < sizeof removed / sizeof removed[0]; r++)
        if (!strcmp(key, removed[r].key)) {
            fprintf(stderr, "config: %s was removed and is ignored: %s\n", key, removed[r].why);
            return 1;
        }
    if (i < 0) {
        fprintf(stderr, "config: unknown key '%s' ignored\n", key);
        return 1;
    }
    if (validate(&defs[i], value)) return -1;
    free(cfg->values[i]);
    cfg->values[i] = strdup(value);
    cfg->from_file[i] = true;
    gr_config_resolve(cfg);
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

int gr_config_set_kv(struct gr_config *cfg, const char *kv)
{
    char *buf = strdup(kv); /* an inline PEM value (ssl.keystore.key) runs to kilobytes */
    if (!buf) {
        fprintf(stderr, "config: out of memory\n");
        return -1;
    }
    char *sep = strpbrk(buf, "=:");
    if (!sep) {
        fprintf(stderr, "config: expected key=value, got '%.200s'\n", kv);
        free(buf);
        return -1;
    }
    *sep = 0;
    int rc = gr_config_set(cfg, trim(buf), trim(sep + 1));
    free(buf);
    return rc;
}

int gr_config_load_file(struct gr_config *cfg, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "config: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[4096];
    static char acc[65536]; /* a value continued over lines: inline PEM keys and certificate chains */
    acc[0] = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        char *l = trim(line);
        if (!acc[0] && (*l == '#' || *l == '!' || !*l)) continue;
        size_t n = strlen(l);
        bool cont = n && l[n - 1] == '\\';
        if (cont) l[n - 1] = 0;
        strncat(acc, l, sizeof acc - strlen(acc) - 1);
        if (cont) continue;
        if (gr_config_set_kv(cfg, acc) < 0) rc = -1;
        acc[0] = 0;
    }
    fclose(f);
    return rc;
}

const char *gr_config_str(const struct gr_config *cfg, const char *key)
{
    int i = find(key);
    assert(i >= 0 && "unknown config key");
    if (cfg->dynamic[GR_CFG_LEVEL_BROKER][i]) return cfg->dynamic[GR_CFG_LEVEL_BROKER][i];
    if (cfg->dynamic[GR_CFG_LEVEL_DEFAULT][i]) return cfg->dynamic[GR_CFG_LEVEL_DEFAULT][i];
    return cfg->values[i] ? cfg->values[i] : defs[i].default_value;
}

int64_t gr_config_int(const struct gr_config *cfg, const char *key)
{
    const char *s = gr_config_str(cfg, key);
    int64_t v = 0;
    if (s) parse_long(s, &v);
    return v;
}

bool gr_config_bool(const struct gr_config *cfg, const char *key)
{
    const char *s = gr_config_str(cfg, key);
    return s && strcasecmp(s, "true") == 0;
}

bool gr_config_is_set(const struct gr_config *cfg, const char *key)
{
    int i = find(key);
    assert(i >= 0);
    return cfg->from_file[i] || cfg->dynamic[0][i] || cfg->dynamic[1][i];
}

void gr_config_set_dynamic(struct gr_config *cfg, enum gr_config_level level, const char *const *keys,
                           const char *const *values, int count)
{
    for (int i = 0; i < NDEFS; i++) {
        free(cfg->dynamic[level][i]);
        cfg->dynamic[level][i] = NULL;
    }
    /* the listener SSL keys: the new store is built before the old one is freed (`keys` may borrow it) */
    char *dk[GR_CONFIG_SSL_KEYS_MAX], *dv[GR_CONFIG_SSL_KEYS_MAX];
    int nd = 0;
    for (int k = 0; k < count; k++) {
        if (gr_config_ssl_dynamic_key(keys[k])) {
            assert(level == GR_CFG_LEVEL_BROKER && "listener SSL keys are per-broker only");
            if (nd == GR_CONFIG_SSL_KEYS_MAX) continue; /* bounded by the validation */
            dk[nd] = strdup(keys[k]);
            dv[nd] = strdup(values[k]);
            if (!dk[nd] || !dv[nd]) { /* out of memory: the key reads as unset */
                free(dk[nd]);
                free(dv[nd]);
                continue;
            }
            nd++;
            continue;
        }
        int i = find(keys[k]);
        assert(i >= 0 && "unknown config key");
        free(cfg->dynamic[level][i]);
        cfg->dynamic[level][i] = strdup(values[k]);
    }
    if (level == GR_CFG_LEVEL_BROKER) {
        for (int i = 0; i < cfg->ssl_dyn_count; i++) {
            free(cfg->ssl_dyn_keys[i]);
            free(cfg->ssl_dyn_values[i]);
        }
        memcpy(cfg->ssl_dyn_keys, dk, (size_t)nd * sizeof dk[0]);
        memcpy(cfg->ssl_dyn_values, dv, (size_t)nd * sizeof dv[0]);
        cfg->ssl_dyn_count = nd;
    }
    gr_config_resolve(cfg);
}

const char *gr_config_dynamic(const struct gr_config *cfg, enum gr_config_level level, const char *key)
{
    if (gr_config_ssl_dynamic_key(key)) {
        for (int i = 0; level == GR_CFG_LEVEL_BROKER && i < cfg->ssl_dyn_count; i++)
            if (!strcmp(cfg->ssl_dyn_keys[i], key)) return cfg->ssl_dyn_values[i];
        return NULL;
    }
    int i = find(key);
    return i < 0 ? NULL : cfg->dynamic[level][i];
}

int64_t gr_config_retention_ms(const struct gr_config *cfg)
{
    if (gr_config_is_set(cfg, "log.retention.ms")) return gr_config_int(cfg, "log.retention.ms");
    if (gr_config_is_set(cfg, "log.retention.minutes")) {
        int64_t m = gr_config_int(cfg, "log.retention.minutes");
        return m < 0 ? -1 : m * 60000;
    }
    int64_t h = gr_config_int(cfg, "log.retention.hours");
    return h < 0 ? -1 : h * 3600000;
}

int64_t gr_config_roll_ms(const struct gr_config *cfg)
{
    if (gr_config_is_set(cfg, "log.roll.ms")) return gr_config_int(cfg, "log.roll.ms");
    return gr_config_int(cfg, "log.roll.hours") * 3600000;
}

/* The listener brokers connect to (Kafka's interBrokerListenerName): inter.broker.listener.name when set,
   else the listener named after security.inter.broker.protocol (ListenerName.forSecurityProtocol), else, as
   Gregor always did, the first name in listeners. Written into out (GR_LISTENER_NAME_BYTES_MAX + 1 bytes). */
static void inter_broker_listener(const struct gr_broker_settings *s, char *out)
{
    const size_t cap = GR_LISTENER_NAME_BYTES_MAX + 1;
    if (s->inter_broker_listener_name) {
        snprintf(out, cap, "%s", s->inter_broker_listener_name);
        return;
    }
    out[0] = '\0';
    for (const char *p = s->listeners; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *sep = strstr(p, "://"), *comma = strchr(p, ',');
        if (!sep || (comma && comma < sep)) break;
        size_t n = (size_t)(sep - p);
        if (!out[0] || (n == strlen(s->security_inter_broker_protocol) &&
                        !strncmp(p, s->security_inter_broker_protocol, n)))
            snprintf(out, cap, "%.*s", (int)n, p);
        if (n == strlen(s->security_inter_broker_protocol) &&
            !strncmp(p, s->security_inter_broker_protocol, n))
            return;
        p = comma ? comma + 1 : sep + strlen(sep);
    }
}

/* default.replication.factor, offsets.topic.replication.factor, transaction.state.log.replication.factor
   and transaction.state.log.min.isr above 1 need a cluster: a single-node broker would refuse every creation
   using them (or, for the min ISR, every write to __transaction_state). (The internal topics' settings left
   unset are already 1 there: gr_config_resolve.) Returns 0 or -1 (printed). */
static int replication_factors_check(const struct gr_broker_settings *s)
{
    if (s->gregor_metadata_etcd_endpoint_count > 0) return 0;
    int32_t rf[4] = {s->default_replication_factor, s->offsets_topic_replication_factor,
                     s->transaction_state_log_replication_factor, s->transaction_state_log_min_isr};
    const char *name[4] = {"default.replication.factor", "offsets.topic.replication.factor",
                           "transaction.state.log.replication.factor", "transaction.state.log.min.isr"};
    for (int i = 0; i < 4; i++)
        if (rf[i] != 1) {
            fprintf(stderr,
                    "config: %s must be 1 on a single-node broker (no gregor.metadata.etcd.endpoints), "
                    "got %d\n",
                    name[i], (int)rf[i]);
            return -1;
        }
    return 0;
}

void gr_config_resolve(struct gr_config *cfg)
{
    struct gr_broker_settings *s = &cfg->settings;
    s->node_id = (int32_t)gr_config_int(cfg, "node.id");
    if (gr_config_is_set(cfg, "broker.id") && gr_config_int(cfg, "broker.id") >= 0)
        s->node_id = (int32_t)gr_config_int(cfg, "broker.id");
    s->log_dir = gr_config_str(cfg, "log.dirs");
    if (!s->log_dir) s->log_dir = gr_config_str(cfg, "log.dir");
    s->listeners = gr_config_str(cfg, "listeners");
    s->advertised_listeners = gr_config_str(cfg, "advertised.listeners");
    s->listener_security_protocol_map = gr_config_str(cfg, "listener.security.protocol.map");
    s->gregor_listener_file = gr_config_str(cfg, "gregor.listener.file");
    s->num_partitions = (int32_t)gr_config_int(cfg, "num.partitions");
    s->auto_create_topics_enable = gr_config_bool(cfg, "auto.create.topics.enable");
    s->default_replication_factor = (int16_t)gr_config_int(cfg, "default.replication.factor");
    s->offsets_topic_num_partitions = (int32_t)gr_config_int(cfg, "offsets.topic.num.partitions");
    s->message_max_bytes = (int32_t)gr_config_int(cfg, "message.max.bytes");
    s->log_message_timestamp_type_log_append_time =
        strcmp(gr_config_str(cfg, "log.message.timestamp.type"), "LogAppendTime") == 0;
    s->log_message_timestamp_before_max_ms = gr_config_int(cfg, "log.message.timestamp.before.max.ms");
    s->log_message_timestamp_after_max_ms = gr_config_int(cfg, "log.message.timestamp.after.max.ms");
    s->compression_type = gr_compression_type_parse(gr_config_str(cfg, "compression.type"));
    const char *policy = gr_config_str(cfg, "log.cleanup.policy");
    s->log_cleanup_policy_delete = strstr(policy, "delete") != NULL;
    s->log_cleanup_policy_compact = strstr(policy, "compact") != NULL;
    s->log_retention_check_interval_ms = gr_config_int(cfg, "log.retention.check.interval.ms");
    s->socket_request_max_bytes = (int32_t)gr_config_int(cfg, "socket.request.max.bytes");
    s->queued_max_request_bytes = gr_config_int(cfg, "queued.max.request.bytes");
    s->max_connections = (int32_t)gr_config_int(cfg, "max.connections");
    s->connections_max_idle_ms = gr_config_int(cfg, "connections.max.idle.ms");
    s->connections_max_reauth_ms = gr_config_int(cfg, "connections.max.reauth.ms");
    s->sasl_server_max_receive_size = (int32_t)gr_config_int(cfg, "sasl.server.max.receive.size");
    s->failed_auth_delay_ms = (int32_t)gr_config_int(cfg, "connection.failed.authentication.delay.ms");
    s->fetch_max_bytes = (int32_t)gr_config_int(cfg, "fetch.max.bytes");
    s->fetch_session_slots = (int32_t)gr_config_int(cfg, "max.incremental.fetch.session.cache.slots");
    s->fetch_session_eviction_ms = gr_config_int(cfg, "min.incremental.fetch.session.eviction.ms");
    s->delete_topic_enable = gr_config_bool(cfg, "delete.topic.enable");
    s->group_min_session_timeout_ms = (int32_t)gr_config_int(cfg, "group.min.session.timeout.ms");
    s->group_max_session_timeout_ms = (int32_t)gr_config_int(cfg, "group.max.session.timeout.ms");
    s->group_initial_rebalance_delay_ms = (int32_t)gr_config_int(cfg, "group.initial.rebalance.delay.ms");
    s->group_max_size = (int32_t)gr_config_int(cfg, "group.max.size");
    s->offsets_retention_ms = gr_config_int(cfg, "offsets.retention.minutes") * 60000;
    s->offset_metadata_max_bytes = (int32_t)gr_config_int(cfg, "offset.metadata.max.bytes");
    s->producer_id_expiration_ms = gr_config_int(cfg, "producer.id.expiration.ms");
    s->producer_id_expiration_check_interval_ms =
        gr_config_int(cfg, "producer.id.expiration.check.interval.ms");
    s->transaction_partition_verification_enable =
        gr_config_bool(cfg, "transaction.partition.verification.enable");
    s->gregor_acks_all_fsync = gr_config_bool(cfg, "gregor.acks.all.fsync");
    s->gregor_transaction_version = (int16_t)gr_config_int(cfg, "gregor.transaction.version");
    s->gregor_open_files_max = (int32_t)gr_config_int(cfg, "gregor.open.files.max");
    s->gregor_connection_unsent_bytes_max = gr_config_int(cfg, "gregor.connection.unsent.bytes.max");
    s->gregor_unsent_bytes_max = gr_config_int(cfg, "gregor.unsent.bytes.max");
    s->gregor_log_slow_request_ms = gr_config_int(cfg, "gregor.log.slow.request.ms");
    s->gregor_ssl_ktls_enable = gr_config_bool(cfg, "gregor.ssl.ktls.enable");
    s->gregor_metrics_partition_series_max =
        (int32_t)gr_config_int(cfg, "gregor.metrics.partition.series.max");
    const char *endpoints = gr_config_str(cfg, "gregor.metadata.etcd.endpoints");
    int n = endpoints ? endpoints_parse(endpoints, s->gregor_metadata_etcd_endpoints) : 0;
    s->gregor_metadata_etcd_endpoint_count = n > 0 ? n : 0; /* values were validated when set */
    s->gregor_metadata_etcd_prefix = gr_config_str(cfg, "gregor.metadata.etcd.prefix");
    /* Kafka's default is 3; a single-node broker has one replica to give, so unset means 1 there */
    s->offsets_topic_replication_factor =
        s->gregor_metadata_etcd_endpoint_count == 0 &&
                !gr_config_is_set(cfg, "offsets.topic.replication.factor")
            ? 1
            : (int16_t)gr_config_int(cfg, "offsets.topic.replication.factor");
    /* the same for __transaction_state's replication factor and min ISR (Kafka's defaults 3 and 2) */
    bool one_node = s->gregor_metadata_etcd_endpoint_count == 0;
    s->transaction_state_log_num_partitions =
        (int32_t)gr_config_int(cfg, "transaction.state.log.num.partitions");
    s->transaction_state_log_replication_factor =
        one_node && !gr_config_is_set(cfg, "transaction.state.log.replication.factor")
            ? 1
            : (int16_t)gr_config_int(cfg, "transaction.state.log.replication.factor");
    s->transaction_state_log_min_isr = one_node && !gr_config_is_set(cfg, "transaction.state.log.min.isr")
                                           ? 1
                                           : (int32_t)gr_config_int(cfg, "transaction.state.log.min.isr");
    s->transaction_state_log_segment_bytes =
        (int32_t)gr_config_int(cfg, "transaction.state.log.segment.bytes");
    s->transaction_abort_interval_ms =
        (int32_t)gr_config_int(cfg, "transaction.abort.timed.out.transaction.cleanup.interval.ms");
    s->transaction_max_timeout_ms = (int32_t)gr_config_int(cfg, "transaction.max.timeout.ms");
    s->transactional_id_expiration_ms = (int32_t)gr_config_int(cfg, "transactional.id.expiration.ms");
    s->transaction_remove_expired_interval_ms =
        (int32_t)gr_config_int(cfg, "transaction.remove.expired.transaction.cleanup.interval.ms");
    s->broker_session_timeout_ms = (int32_t)gr_config_int(cfg, "broker.session.timeout.ms");
    s->broker_heartbeat_interval_ms = (int32_t)gr_config_int(cfg, "broker.heartbeat.interval.ms");
    s->controller_quorum_fetch_timeout_ms = (int32_t)gr_config_int(cfg, "controller.quorum.fetch.timeout.ms");
    s->broker_rack = gr_config_str(cfg, "broker.rack");
    s->inter_broker_listener_name = gr_config_str(cfg, "inter.broker.listener.name");
    s->security_inter_broker_protocol = gr_config_str(cfg, "security.inter.broker.protocol");
    s->sasl_mechanism_inter_broker_protocol = gr_config_str(cfg, "sasl.mechanism.inter.broker.protocol");
    s->authorizer_enabled = !!*gr_config_str(cfg, "authorizer.class.name");
    s->super_users = gr_config_str(cfg, "super.users");
    s->allow_everyone_if_no_acl_found = gr_config_bool(cfg, "allow.everyone.if.no.acl.found");
    s->min_insync_replicas = (int32_t)gr_config_int(cfg, "min.insync.replicas");
    s->replica_lag_time_max_ms = gr_config_int(cfg, "replica.lag.time.max.ms");
    s->replica_fetch_max_bytes = (int32_t)gr_config_int(cfg, "replica.fetch.max.bytes");
    s->replica_fetch_response_max_bytes = (int32_t)gr_config_int(cfg, "replica.fetch.response.max.bytes");
    s->replica_fetch_wait_max_ms = (int32_t)gr_config_int(cfg, "replica.fetch.wait.max.ms");
    s->replica_fetch_min_bytes = (int32_t)gr_config_int(cfg, "replica.fetch.min.bytes");
    s->replica_fetch_backoff_ms = (int32_t)gr_config_int(cfg, "replica.fetch.backoff.ms");
    s->replica_socket_timeout_ms = (int32_t)gr_config_int(cfg, "replica.socket.timeout.ms");
    s->num_replica_fetchers = (int32_t)gr_config_int(cfg, "num.replica.fetchers");
    s->replica_high_watermark_checkpoint_interval_ms =
        gr_config_int(cfg, "replica.high.watermark.checkpoint.interval.ms");
    s->unclean_leader_election_enable = gr_config_bool(cfg, "unclean.leader.election.enable");
    s->auto_leader_rebalance_enable = gr_config_bool(cfg, "auto.leader.rebalance.enable");
    s->leader_imbalance_check_interval_s = gr_config_int(cfg, "leader.imbalance.check.interval.seconds");
    s->controlled_shutdown_enable = gr_config_bool(cfg, "controlled.shutdown.enable");
    inter_broker_listener(s, s->inter_broker_listener);
}

/* Whether `name` is the name of one of `listeners` ("NAME://host:port, ..."), as Gregor compares listener
   names (exactly). Lists the names into `names` for the message. */
static bool listener_named(const char *listeners, const char *name, char *names, size_t cap)
{
    bool found = false;
    size_t o = 0;
    names[0] = '\0';
    for (const char *p = listeners; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *sep = strstr(p, "://"), *comma = strchr(p, ',');
        if (!sep || (comma && comma < sep)) break;
        found |= (size_t)(sep - p) == strlen(name) && !strncmp(p, name, (size_t)(sep - p));
        if (o < cap) o += (size_t)snprintf(names + o, cap - o, "%s%.*s", o ? "," : "", (int)(sep - p), p);
        p = comma ? comma + 1 : sep + strlen(sep);
    }
    return found;
}

int gr_config_check(const struct gr_config *cfg)
{
    const struct gr_broker_settings *s = &cfg->settings;
    if (s->broker_heartbeat_interval_ms >= s->broker_session_timeout_ms) {
        fprintf(
            stderr,
            "config: broker.heartbeat.interval.ms (%d) must be less than broker.session.timeout.ms (%d)\n",
            (int)s->broker_heartbeat_interval_ms, (int)s->broker_session_timeout_ms);
        return -1;
    }
    if (gr_config_is_set(cfg, "inter.broker.listener.name") &&
        gr_config_is_set(cfg, "security.inter.broker.protocol")) {
        fprintf(stderr,
                "config: Only one of inter.broker.listener.name and security.inter.broker.protocol should "
                "be set.\n");
        return -1;
    }
    if (s->replica_fetch_wait_max_ms > s->replica_socket_timeout_ms) {
        fprintf(stderr,
                "config: replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to "
                "prevent unnecessary socket timeouts\n");
        return -1;
    }
    if (s->replica_fetch_wait_max_ms > s->replica_lag_time_max_ms) {
        fprintf(stderr, "config: replica.fetch.wait.max.ms should always be less than or equal to "
                        "replica.lag.time.max.ms to prevent frequent changes in ISR\n");
        return -1;
    }
    if (replication_factors_check(s)) return -1;
    if (s->gregor_metadata_etcd_endpoint_count == 0 && s->min_insync_replicas != 1) {
        fprintf(stderr,
                "config: min.insync.replicas must be 1 on a single-node broker (no "
                "gregor.metadata.etcd.endpoints), got %d\n",
                (int)s->min_insync_replicas);
        return -1;
    }
    char names[512];
    /* security.inter.broker.protocol other than PLAINTEXT names the listener of that name (Kafka's
       ListenerName.forSecurityProtocol), which must exist; only PLAINTEXT falls back to the first listener */
    const char *ib = s->inter_broker_listener_name;
    if (!ib && strcmp(s->security_inter_broker_protocol, "PLAINTEXT")) ib = s->security_inter_broker_protocol;
    if (ib && !listener_named(s->listeners, ib, names, sizeof names)) {
        fprintf(stderr,
                "config: inter.broker.listener.name must be a listener name defined in listeners. The valid "
                "options "
                "based on currently configured listeners are %s\n",
                names);
        return -1;
    }
    return 0;
}
