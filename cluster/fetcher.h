/*
 * fetcher.h: the replica fetcher (issue #20; Kafka's ReplicaFetcherManager + ReplicaFetcherThread +
 * AbstractFetcherThread), which keeps this broker's follower partitions copying their leaders' logs with
 * Kafka's own Fetch (v15+: ReplicaState {ReplicaId = node.id, ReplicaEpoch = this broker's epoch}; earlier
 * versions the ReplicaId field), on the broker's loop through the inter-broker client
 * (cluster/broker_client.h, purpose GR_BROKER_CLIENT_REPLICA_FETCHER, index = fetcher id).
 *
 * Its owner (the role binding, which follows the metadata image and calls gr_partition_set_role) adds a
 * partition when this broker becomes its follower under a leader and leader epoch, and removes it when it
 * stops being one (leader, not a replica, deleted, offline). A partition is fetched on the connection to its
 * leader with fetcher id = Kafka's AbstractFetcherManager.getFetcherId: abs(31 * Java's String.hashCode of
 * the topic name + partition) % num.replica.fetchers, one request in flight per connection (a ListOffsets
 * for the partitions out of range first, else one Fetch for every partition ready). The connection needs
 * Fetch v12+ (DivergingEpoch; v13+ by topic id, v12 when a topic id is all zeros) and ListOffsets.
 *
 * Per partition, each fetch names FetchOffset = the local log end offset, CurrentLeaderEpoch = the epoch it
 * was added under, LastFetchedEpoch = the leader epoch of the local log's last batch (KIP-320; Kafka takes it
 * from the last appended batch; -1 when the log is empty), the local
 * LogStartOffset and PartitionMaxBytes = replica.fetch.max.bytes; request MaxWaitMs =
 * replica.fetch.wait.max.ms, MinBytes = replica.fetch.min.bytes, MaxBytes = replica.fetch.response.max.bytes,
 * IsolationLevel 0. Each connection keeps a fetch session (KIP-227, cluster/fetch_session_client.h, as
 * Kafka's replica fetcher's FetchSessionHandler): the first Fetch is full (session id 0, epoch 0) and asks
 * the leader for a session; then incremental ones (epoch 1, 2, ...) carry only the partitions whose fields
 * above changed (FetchOffset moves when records were appended) or that are new, and forget
 * (forgotten_topics_data) those not ready this time (delayed, out of range, waiting on disk, removed, moved
 * to another leader). A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), an answer
 * naming partitions outside the session, a lost answer or a request not sent make the next Fetch full again
 * (no backoff for the session errors; FETCH_SESSION_TOPIC_ID_ERROR and other top-level errors back off); a
 * leader that makes no session (session id 0) gets full fetches asking again each time. A new leader is a new
 * connection and a new session. An incremental answer omits the partitions without news: such a partition is
 * simply fetched again by the next request, with nothing taken.
 *
 * Each answer (ReplicaFetcherThread.processPartitionData and AbstractFetcherThread.processFetchRequest):
 *   - records: appended as they came (gr_partition_append_as_follower, the answer kept without a copy), then
 *     the leader's log start offset raised to (gr_partition_raise_log_start_offset) and its high watermark
 *     taken (gr_partition_set_follower_high_watermark);
 *   - DivergingEpoch set: truncated to min(its end offset, log end offset) when the local log holds that
 *     epoch (else to the end of the largest local epoch below it), as
 *     AbstractFetcherThread.truncateOnFetchResponse / getOffsetTruncationState; that answer's records and
 *     watermarks are not taken (the next fetch, from the new end, brings them);
 *   - OFFSET_OUT_OF_RANGE: when the leader's log end offset is below ours (an unclean election), truncated to
 *     it; when ours is below the leader's log start offset, truncated fully and started at it
 *     (AbstractFetcherThread.handleOutOfRangeError, via ListOffsets latest/earliest to the leader);
 *   - FENCED_LEADER_EPOCH (at the epoch it was added under): not fetched again until the owner re-adds it
 *     (AbstractFetcherThread.onPartitionFenced, markPartitionFailed);
 *   - UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_*, any other error, and records that fail
 *     their CRC: retried after replica.fetch.backoff.ms (Kafka's partitionsWithError, delayPartitions);
 *   - a storage error on append or truncation: the partition is marked failed and not fetched again until
 *     re-added (Kafka marks it failed and the log dir offline); logged once. But an append refused for a
 *     full log dir (ENOSPC, EDQUOT: storage undid any partial write) is retried after
 *     replica.fetch.backoff.ms, so the follower resumes once space is freed (Kafka would take the dir
 *     offline and, with one log dir, halt the broker; issue #24's disk-full nemesis).
 * An append or truncation answering -EAGAIN (a truncation's reads on the I/O pool or its file work still
 * running) is retried a little later, and a partition whose log has such work pending is left out of the
 * Fetch until it is done; a truncation waiting for its reads is retried as soon as gr_fetcher_flushed tells
 * of their end, even while its connection's Fetch for other partitions is in flight.
 * With fsync gating on (gregor.acks.all.fsync=true) the next Fetch of a partition is sent only after what the
 * previous answer appended is fsynced (its log's flushed offset reached its log end offset), so the log end
 * offset the leader learns from FetchOffset is durable here; the connection's next Fetch waits for it (an
 * fsync is short; a Fetch sent without the partition would hold it back for up to MaxWaitMs). Both disk
 * waits (the durable offset, a truncation's file work) end on other threads, whose completions storage
 * reports through the store's on_flushed; the server hands each to the loop and, after gr_partition_flushed,
 * tells the fetcher (gr_fetcher_flushed), which sends the waiting connection's next request at once. A
 * backstop look every disk_poll_ms (100 ms) covers a completion that never arrives (the server drops one it
 * cannot queue for want of memory). Lost connections, timeouts and undecodable answers back off
 * replica.fetch.backoff.ms (the inter-broker client closes and reconnects).
 *
 * Re-entrancy: the fetcher's appends, truncations and watermark changes fire partition waiters; their done
 * hooks may call gr_fetcher_add, gr_fetcher_remove and gr_fetcher_flushed (never gr_fetcher_free). What they
 * remove is unhashed at once and freed when the fetcher's callback returns; the pumps they ask for run then.
 *
 * Logs (INFO, as AbstractFetcherManager's "Added fetcher to broker ..." / "Removed fetcher for partitions"):
 * the partitions added (leader, leader epoch, fetch offset, the leader moved from) and removed, one line each
 * per pass of the owner, written at the next pump; an out-of-range answer (rate-limited).
 *
 * Network thread only. Bounds: at most GR_FETCHER_PARTITIONS_MAX partitions, at most one Fetch in flight per
 * connection, every size taken from the answer checked against the request's caps. Read next:
 * cluster/fetcher.c, partition/follower.c, cluster/broker_client.h.
 */
#ifndef GR_CLUSTER_FETCHER_H
#define GR_CLUSTER_FETCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ev_loop;
struct gr_broker_client;
struct gr_image;
struct gr_partition;

/* The most partitions one broker follows (Kafka has no such cap; this bounds the fetcher's tables). */
#define GR_FETCHER_PARTITIONS_MAX 100000

struct gr_fetcher_config {
    int32_t node_id;             /* this broker's node.id: ReplicaId */
    int32_t num_fetchers;        /* num.replica.fetchers, 1..GR_REPLICA_FETCHERS_MAX */
    int32_t max_wait_ms;         /* replica.fetch.wait.max.ms */
    int32_t min_bytes;           /* replica.fetch.min.bytes */
    int32_t partition_max_bytes; /* replica.fetch.max.bytes */
    int32_t response_max_bytes;  /* replica.fetch.response.max.bytes */
    int64_t backoff_ms;          /* replica.fetch.backoff.ms */
    bool fsync_gate; /* gregor.acks.all.fsync: next fetch only after the previous append is fsynced */
    int64_t (*now_ms)(void *ctx); /* the clock (monotonic ms) for delays and the timers; NULL:
                                     gr_time_mono_ms (tests pass their own) */
    void *clock_ctx;
    int64_t disk_poll_ms; /* the backstop: how often a connection whose partitions wait on disk is looked at
                             without gr_fetcher_flushed (ms); 0: 100 (tests pass a long one) */
};

/* Counters (tests and logs). */
struct gr_fetcher_stats {
    int64_t partitions;          /* partitions being fetched */
    int64_t fetches_sent;        /* Fetch requests sent */
    int64_t fetches_incremental; /* of which incremental (KIP-227: a session's epoch >= 1) */
    int64_t session_resets;      /* answers or failures that sent a connection back to a full fetch */
    int64_t batches_bytes;       /* bytes of records appended */
    int64_t truncations;         /* truncations made (diverging epoch, out of range) */
    int64_t failed_partitions;   /* partitions marked failed (storage errors) */
    int64_t append_nospace; /* appends refused for a full log dir (ENOSPC, EDQUOT): retried, not failed */
};

struct gr_fetcher;

/* Makes a fetcher on `loop` using `bc` (connections) and `img` (this broker's epoch: its registration;
   the leaders' addresses are bc's business); all borrowed and outliving it. Returns new, or NULL with a
   reason in err for a bad config or without memory. */
struct gr_fetcher *gr_fetcher_new(struct ev_loop *loop, struct gr_broker_client *bc, struct gr_image *img,
                                  const struct gr_fetcher_config *cfg, char *err, size_t err_len);
/* Stops every fetch (answers in flight are dropped), closes its connections, frees. Never from inside a
   partition waiter's done hook that the fetcher's own appends fire (asserted; gr_fetcher_add,
   gr_fetcher_remove and gr_fetcher_flushed may be called there). */
void gr_fetcher_free(struct gr_fetcher *f);

/* Makes `part` (which the owner has just made GR_PARTITION_FOLLOWER at `leader_epoch` with
   gr_partition_set_role; borrowed until removed) fetch from broker `leader_id` for topic `topic` (name,
   copied) / `topic_id` (copied) partition `partition` (AbstractFetcherManager.addFetcherForPartitions).
   Called again for the same partition with a newer leader or epoch it moves it (a fetch in flight for it is
   ignored when answered) and clears a failed or fenced mark; with the same leader and epoch it only clears
   those marks. Returns 0, or -EINVAL (bad argument: empty or over-long topic, negative partition or epoch, a
   leader that is this broker), -ENOSPC (GR_FETCHER_PARTITIONS_MAX), -ENOMEM or the client's open error. */
int gr_fetcher_add(struct gr_fetcher *f, struct gr_partition *part, const char *topic,
                   const uint8_t topic_id[16], int32_t partition, int32_t leader_id, int32_t leader_epoch);
/* Stops fetching `part` (AbstractFetcherManager.removeFetcherForPartitions): no append to it after this
   call, even from an answer in flight. Unknown partitions are ignored. */
void gr_fetcher_remove(struct gr_fetcher *f, struct gr_partition *part);
/* Storage reported a flush or a truncation's file work done on `part`'s log (the store's on_flushed, handed
   to the network thread by the server, which calls this after gr_partition_flushed): when `part` is fetched
   here and its connection is idle, the connection is pumped from the loop's next pass (a zero timer: one
   pump per connection for a batch of completions, never inside a fetcher callback), so a Fetch held by the
   fsync gate or a partition held by pending file work goes out at once. A truncation of `part` waiting for
   its reads on the I/O pool is retried here at once (outside a fetcher walk), even while its connection has
   a request in flight. A partition not fetched here (a leader's, removed, unknown) is ignored; calling it
   when nothing changed is harmless. */
void gr_fetcher_flushed(struct gr_fetcher *f, struct gr_partition *part);
/* Whether `part` is being fetched: added, not removed, not marked failed or fenced. */
bool gr_fetcher_active(const struct gr_fetcher *f, const struct gr_partition *part);
/* Returns borrowed: the counters. */
const struct gr_fetcher_stats *gr_fetcher_stats(const struct gr_fetcher *f);

#endif
