/*
 * limits.h: every maximum Gregor enforces on what comes off the wire or off the disk, with its unit last
 * and the reason for its value. Configurable limits keep their Kafka configuration name in the comment;
 * the values here are the defaults or hard ceilings. Read next: server/config.h.
 */
#ifndef GR_LIMITS_H
#define GR_LIMITS_H

/* Largest request frame accepted (Kafka socket.request.max.bytes default, 100 MiB). */
#define GR_FRAME_BYTES_MAX (100 * 1024 * 1024)
/* Smallest request frame: api key, api version, correlation id (int16 + int16 + int32). */
#define GR_FRAME_BYTES_MIN 8
/* Longest topic name (Kafka Topic.MAX_NAME_LENGTH). */
#define GR_TOPIC_NAME_BYTES_MAX 249
/* Partitions per topic accepted by CreateTopics/CreatePartitions: bounds memory and open files. */
#define GR_PARTITIONS_PER_TOPIC_MAX 10000

/* Cluster metadata in etcd (cluster/layout.h keys, cluster/values.h values). Everything read from etcd is
 * bounded by these before it is allocated. */
/* Longest gregor.metadata.etcd.prefix: keys stay short (etcd keeps every key in memory, per revision). */
#define GR_CLUSTER_PREFIX_BYTES_MAX 128
/* Longest key of the layout: prefix + "/" + cluster id (22) + "/topics/" + a 249-byte topic name, rounded
 * up (cluster/layout.c checks the sum at compile time). */
#define GR_CLUSTER_KEY_BYTES_MAX 512
/* Replicas of one partition in a topic record and node ids in one ISR. Kafka bounds it only by the broker
 * count (and a short); 16 is far above any replication factor in practice (3 is usual) and keeps a
 * 10,000-partition assignment under the topic value cap. */
#define GR_CLUSTER_REPLICAS_MAX 16
/* num.replica.fetchers' ceiling: fetchers (one connection each) a follower runs per source broker. Kafka sets
 * none; each costs a connection and its buffers per leader broker, and more than a few never helps on one
 * network path. */
#define GR_REPLICA_FETCHERS_MAX 64
/* Transaction markers to other brokers (server/txn_markers.h): markers in one WriteTxnMarkers request (Kafka
 * drains a broker's whole queue into one request; a bound keeps one request's size and the work one answer
 * triggers small) and markers waiting per destination broker (Kafka's queues are unbounded; a coordinator
 * has at most one marker round per transactional id, so this is only reached with thousands of ids
 * completing at once toward one broker, and a refused marker is retried after 100 ms). */
#define GR_TXN_MARKERS_BATCH_MAX 256
#define GR_TXN_MARKERS_QUEUED_MAX 8192
/* Produce requests waiting for one coordinator broker's verification (server/txns.c,
 * AddPartitionsToTxnManager): each holds a parked request already bounded by the request memory budget; past
 * this a transactional Produce answers NOT_ENOUGH_REPLICAS (retriable) at once rather than queue. */
#define GR_TXN_VERIFY_PENDING_MAX 4096
/* One verification request to a coordinator broker (server/txn_verifier.h, AddPartitionsToTxnManager's
 * batch): at most this many transactions, and partitions across them (a single question larger than the
 * partition bound still goes, alone). Kafka drains a broker's whole map into one request; a bound keeps
 * one request's size and the work its answer triggers small. */
#define GR_TXN_VERIFY_BATCH_TXNS_MAX 128
#define GR_TXN_VERIFY_BATCH_PARTS_MAX 2048
/* Verification entries per partition (partition.h gr_partition_txn_verify_start, Kafka's
 * ProducerStateManager.verificationStates, which only expiry bounds): one per producer id with a question
 * in flight; when full the oldest entry goes (a request still holding its guard then fails at append with
 * INVALID_TXN_STATE: a refusal, never a transaction the coordinator does not know). */
#define GR_TXN_GUARDS_MAX 1024
/* Controlled shutdown (server/membership.c): the longest a SIGTERMed cluster broker keeps serving while it
 * waits for the controller to move its leaderships away (issue #20: "at most 30 s"). Kafka bounds the same
 * wait by the broker's shutdown timeout; etcd-side moves take milliseconds, so 30 s only passes when the
 * controller or etcd cannot act, and then the broker stops anyway (a second SIGTERM stops it at once). */
#define GR_CONTROLLED_SHUTDOWN_WAIT_MS 30000
/* Listeners in one broker registration (server/broker.h GR_LISTENERS_MAX is the same number). */
#define GR_CLUSTER_LISTENERS_MAX 8
/* Listener names (Gregor keeps 63 bytes, struct gr_listener), advertised host names (DNS: 253; 255 with
 * room), broker.rack. */
#define GR_CLUSTER_LISTENER_NAME_BYTES_MAX 63
#define GR_CLUSTER_HOST_BYTES_MAX 255
#define GR_CLUSTER_RACK_BYTES_MAX 255
/* Topic configs in one topic record (Kafka 4.4 defines 37 topic configs), the length of a config name
 * and of its value (Kafka bounds neither; the longest real values are replica lists). */
#define GR_CLUSTER_TOPIC_CONFIGS_MAX 128
#define GR_CLUSTER_CONFIG_NAME_BYTES_MAX 255
#define GR_CLUSTER_CONFIG_VALUE_BYTES_MAX 65536
/* Finalized features in the features value (Kafka 4.x finalizes 4: metadata.version, kraft.version,
 * transaction.version, group.version) and the length of a feature name. */
#define GR_CLUSTER_FEATURES_MAX 32
#define GR_CLUSTER_FEATURE_NAME_BYTES_MAX 63
/* Byte caps of one value, per key kind: a decoder refuses a longer value before parsing it. The topic
 * record is the only large one: 10,000 partitions x 16 replicas of short node ids fit in 1 MiB, and a
 * txn carrying it stays under etcd's 1.5 MiB request limit (--max-request-bytes default). */
#define GR_CLUSTER_TOPIC_VALUE_BYTES_MAX (1024 * 1024)
#define GR_CLUSTER_SMALL_VALUE_BYTES_MAX (16 * 1024)
/* Producer ids per block taken from etcd's counter (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE). */
#define GR_CLUSTER_PRODUCER_ID_BLOCK_SIZE 1000
/* etcd endpoints in gregor.metadata.etcd.endpoints (etcd clusters have 3 or 5 members; 8 leaves room), and
 * the length of one: "http://" + a 255-byte host + ":" + a 5-digit port. */
#define GR_ETCD_ENDPOINTS_MAX 8
#define GR_ETCD_ENDPOINT_BYTES_MAX (7 + GR_CLUSTER_HOST_BYTES_MAX + 1 + 5)

/* Tagged fields in one tagged-field section: each needs an arena slot, the frame bounds the rest. */
#define GR_TAGGED_FIELDS_MAX 1024
/* Longest varint (5 bytes) and varlong (10 bytes) encodings: a longer one is malformed. */
#define GR_VARINT_BYTES_MAX 5
#define GR_VARLONG_BYTES_MAX 10
/* Default message.max.bytes (Kafka 4.x: 1048588 = 1 MiB + record batch overhead). */
#define GR_MESSAGE_BYTES_DEFAULT 1048588
/* Default max.decompressed.message.bytes (Kafka 4.4: the largest Java array, no bound beyond it); Gregor's
 * GR_DECOMPRESSED_BATCH_BYTES_MAX bounds a whole batch first. */
#define GR_MAX_DECOMPRESSED_MESSAGE_BYTES_DEFAULT 2147483639
/* Decompressed size of one record batch accepted while validating: bounds a decompression bomb. */
#define GR_DECOMPRESSED_BATCH_BYTES_MAX (256 * 1024 * 1024)
/* Refused records listed in one Produce partition's record_errors (KIP-467). Kafka lists every one; a
 * compressed batch may hold tens of millions of 7-byte records, and each entry costs ~150 bytes of response
 * memory, so the list stops here (~1.5 MB) while error_message still counts them all. An uncompressed batch
 * under the default max.message.bytes holds at most ~150,000 records. */
#define GR_PRODUCE_RECORD_ERRORS_MAX 10000
/* Rate limit of repeated log lines (GR_WARN_RATELIMITED and friends): at most this many lines per call
 * site per window, then one line with the count of those suppressed. A hostile peer can make a warning
 * per frame (22 MB of log in 3 minutes from 8 connections was measured); 10 lines per 10 s per site keeps
 * the first occurrences and a count, like the Linux kernel's printk_ratelimit (10 per 5 s). */
#define GR_LOG_RATELIMIT_LINES 10
#define GR_LOG_RATELIMIT_WINDOW_MS 10000

/* Answer bytes (response memory and its request's arena) built for one connection and not yet sent, past
 * which the connection stops reading requests (gregor.connection.unsent.bytes.max default): a client that
 * pipelines without reading its answers pins at most this plus one answer. Kafka sends one answer at a
 * time per connection; Gregor pipelines up to 64 requests, so it needs a byte bound too. */
#define GR_CONN_UNSENT_BYTES_DEFAULT (1024 * 1024)
/* The same across the broker (gregor.unsent.bytes.max default): past it, connections with answers
 * unsent stop reading until they drain; a connection with nothing unsent still takes one request, so the
 * overshoot is at most one answer per connection. */
#define GR_UNSENT_BYTES_DEFAULT (64 * 1024 * 1024)
/* Back-off of the listeners after accept failed for want of descriptors (EMFILE/ENFILE): one retry per
 * period instead of a spinning accept loop. */
#define GR_ACCEPT_BACKOFF_MS 100
/* An out-of-descriptors episode ends (and is logged with its counts) after this long without a failure. */
#define GR_ACCEPT_EPISODE_QUIET_MS 1000
/* Connections accepted on the spare descriptor and closed at once per failed accept round: drains the
 * backlog so that waiting clients see a closed connection instead of hanging. */
#define GR_ACCEPT_REFUSE_PER_ROUND_MAX 64
/* Bytes of request frames and answers freed since the last malloc_trim(0) above which the once-a-second
 * housekeeping gives freed heap memory back to the system (glibc keeps it otherwise). */
#define GR_TRIM_RELEASED_BYTES_MIN (8 * 1024 * 1024)

/* ---- cluster metadata (cluster/image.h): what one broker knows about the cluster ---- */
/* Listeners of one broker (e.g. INTERNAL and EXTERNAL, as in a container setup): bounds the listener table
 * of this broker and of every broker registration read from etcd. */
#define GR_LISTENERS_MAX 8
/* Longest listener name and advertised host (bytes, without the NUL): a name is a short token
 * (PLAINTEXT, INTERNAL); a host is a DNS name (at most 253) or an address. */
#define GR_LISTENER_NAME_BYTES_MAX 63
#define GR_HOST_BYTES_MAX 255
/* Longest broker.rack (bytes): Kafka sets no bound; one DNS label-ish token is plenty. */
#define GR_RACK_BYTES_MAX 255
/* Longest cluster id (bytes): Kafka's is 22 chars of base64url; a hand-set one may be longer. */
#define GR_CLUSTER_ID_BYTES_MAX 64
/* Brokers in one cluster image: Kafka sets no bound; the image is an array searched by node id, and every
 * Metadata answer lists each live broker, so the count is kept far below what a 1 MiB answer can hold. */
#define GR_IMAGE_BROKERS_MAX 1024
/* Observers of one metadata image (cluster/image.h): the controller, topic waits, local replicas, tests. */
#define GR_IMAGE_OBSERVERS_MAX 8
/* Replicas (and so ISR and offline replicas) of one partition: Kafka bounds it by the broker count; a
 * replication factor above 16 buys nothing and costs memory per partition. */
#define GR_IMAGE_REPLICAS_MAX 16
/* Topics and partitions the image holds: bound what an etcd prefix can make one broker allocate (about
 * 100 bytes per partition, 400 per topic). */
#define GR_IMAGE_TOPICS_MAX 100000
#define GR_IMAGE_PARTITIONS_MAX 1000000
/* Local replica operations (cluster/replicas.h: make or delete one partition's log, create or delete a
 * sparse topic) one pass of the replica manager submits before it yields to the loop: each is a few
 * fsyncs on the I/O pool, so a 1,000-partition topic is made in about 30 passes while requests are served
 * in between. */
#define GR_REPLICA_OPS_PER_PASS_MAX 32
/* Back-off of the replica manager after a failed operation (ENOSPC, EIO...): from the first to the last
 * delay, doubling, so a failing disk is retried without a busy loop. */
#define GR_REPLICA_RETRY_MS_MIN 100
#define GR_REPLICA_RETRY_MS_MAX 10000

#endif
