/*
 * txn.h: the transaction coordinator (Kafka's TransactionCoordinator, TransactionStateManager and
 * TransactionMetadata, transaction version 1: KIP-98, KIP-360, KIP-447, KIP-890 part 1) as plain state with
 * hooks. No sockets, no event loop, no disk: time comes from the now_ms hook, durability from the append
 * hook (told later, through gr_txn_write_done, whether the record was committed), transaction markers go out
 * through send_markers (told later, through gr_txn_markers_done, when every partition has its marker),
 * producer ids come from alloc_producer_id. Parked requests are opaque waiters handed back exactly once
 * through the done hook, possibly inside the call that handed them over.
 *
 * States (enum gr_txn_state, txn_records.h) and Kafka's valid previous states of each:
 *   Empty <- Empty, CompleteCommit, CompleteAbort           (InitProducerId)
 *   Ongoing <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn, AddOffsetsToTxn)
 *   PrepareCommit <- Ongoing; PrepareAbort <- Ongoing, PrepareEpochFence    (EndTxn, a fence, a timeout)
 *                                  (version 2: PrepareAbort also <- Empty, CompleteCommit, CompleteAbort)
 *   CompleteCommit <- PrepareCommit; CompleteAbort <- PrepareAbort          (after the markers)
 *   Dead <- Empty, CompleteCommit, CompleteAbort            (expiry: a tombstone, the id leaves the cache)
 *   PrepareEpochFence <- Ongoing (a pending state only, never written: InitProducerId or the timeout pass
 *                                 bumps the epoch, then the open transaction is aborted at that epoch)
 * A transition is "pending" from the moment its record is handed to the append hook until the hook reports
 * it; only then does the state change and the request get its answer (every transition is durable before
 * it is answered). While a transition is pending, requests that would start another answer
 * CONCURRENT_TRANSACTIONS, as Kafka's pendingTransitionInProgress.
 *
 * EndTxn: Ongoing -> PrepareX (durable; EndTxn answered) -> markers to every partition (pending CompleteX)
 * -> CompleteX (durable). A retried EndTxn answers CONCURRENT_TRANSACTIONS while PrepareX, NONE after
 * CompleteX of the same result, INVALID_TXN_STATE for the other result (endTransactionWithTV1).
 * Transaction version 2 (KIP-890 part 2, gr_txn_end_tv with version 2: EndTxn v5+): PrepareX at a bumped
 * epoch, PrepareAbort also from Empty / CompleteX (no partition, no marker), a next producer id at epoch
 * exhaustion; each transaction's client version (TransactionLogValue tag 2) with the previous / next
 * producer ids (tags 0, 1) is written to its records and restored on load.
 *
 * Ownership of __transaction_state partitions (TransactionStateManager's cache and loadingPartitions):
 * a partition is not owned (NOT_COORDINATOR), loading (COORDINATOR_LOAD_IN_PROGRESS: gr_txn_load_begin,
 * gr_txn_replay of each record, gr_txn_load_done) or owned at a coordinator epoch. A write that completes
 * after its partition was unloaded or reloaded at another epoch changes nothing and answers
 * NOT_COORDINATOR. At gr_txn_load_done every PrepareCommit / PrepareAbort is completed (markers sent again,
 * then CompleteX written), as Kafka's loadTransactionsForTxnTopicPartition.
 *
 * Timers (gr_txn_tick with the now_ms clock): every
 * transaction.abort.timed.out.transaction.cleanup.interval.ms an Ongoing transaction past txnStartTimestamp +
 * timeout (and not pending) is aborted with an epoch bump (abortTimedOutTransactions:
 * prepareFenceProducerEpoch then PrepareAbort; KAFKA-20090: an epoch at INT16_MAX is not bumped, and a
 * version 2 transaction whose epoch is exhausted draws its next producer id for PrepareAbort, so
 * CompleteAbort moves it to that id at epoch 0 as EndTxn v5 would; InitProducerId's fence of an Ongoing one
 * does the same); every transaction.remove.expired.transaction.cleanup.interval.ms an id in Empty /
 * CompleteCommit / CompleteAbort, not pending, whose last update is at least transactional.id.expiration.ms
 * old gets a tombstone and leaves the cache once it is durable; a CompleteX write that failed with
 * COORDINATOR_NOT_AVAILABLE is retried at the next tick (Kafka's txnLogAppendRetryQueue).
 *
 * Invariants: at most one write and one marker round in flight per transactional id; a waiter is answered
 * exactly once; after gr_txn_destroy no hook is called (the binding must not report writes or markers
 * afterwards). Single-threaded: the owner's thread only.
 * Read next: coordinator/txn_records.h (the records), coordinator/tests/test_txn.c (every behaviour).
 */
#ifndef GR_COORD_TXN_H
#define GR_COORD_TXN_H

#include <stdbool.h>
#include <stdint.h>

#include "coordinator/txn_records.h"
#include "protocol/wire.h"

/* Kafka's settings and defaults (TransactionStateManagerConfig / TransactionLogConfig). */
#define GR_TXN_MAX_TIMEOUT_MS 900000        /* transaction.max.timeout.ms */
#define GR_TXN_ID_EXPIRATION_MS 604800000LL /* transactional.id.expiration.ms (7 days) */
#define GR_TXN_ABORT_TIMED_OUT_INTERVAL_MS                                                                   \
    10000 /* transaction.abort.timed.out.transaction.cleanup.interval.ms */
#define GR_TXN_REMOVE_EXPIRED_INTERVAL_MS                                                                    \
    3600000                                  /* transaction.remove.expired.transaction.cleanup.interval.ms */
#define GR_TXN_STATE_LOG_PARTITIONS 50       /* transaction.state.log.num.partitions */
#define GR_TXN_STATE_LOG_PARTITIONS_MAX 1000 /* a bound on the partitions array (Gregor's) */
/* The first EndTxn version of transaction version 2 (EndTxnRequest.json: v5 adds the response's ProducerId
   and ProducerEpoch; Kafka's handleEndTxnRequest uses TV_2 above v4). */
#define GR_TXN_END_TXN_V2_MIN 5
/* The first Produce and TxnOffsetCommit versions of transaction version 2: the broker adds the partition (the
   group's offsets partition) to the transaction itself (KIP-890 part 2; Kafka's
   produceRequestVersionToTransactionSupportedOperation / txnOffsetCommitRequestVersionTo...: addPartition).
 */
#define GR_TXN_PRODUCE_V2_MIN 12
#define GR_TXN_TXN_OFFSET_COMMIT_V2_MIN 5
/* Kafka's TransactionMetadata.isEpochExhausted: an epoch at or above this gets a new producer id. */
#define GR_TXN_EPOCH_EXHAUSTED (INT16_MAX - 1)

struct gr_txn_config {
    int32_t max_timeout_ms;              /* transaction.max.timeout.ms */
    int64_t id_expiration_ms;            /* transactional.id.expiration.ms */
    int64_t abort_timed_out_interval_ms; /* transaction.abort.timed.out.transaction.cleanup.interval.ms */
    int64_t remove_expired_interval_ms;  /* transaction.remove.expired.transaction.cleanup.interval.ms */
    int32_t partitions;                  /* transaction.state.log.num.partitions (1..PARTITIONS_MAX) */
    int32_t offsets_partitions;          /* partitions of __consumer_offsets (AddOffsetsToTxn) */
    int16_t log_value_version;           /* TransactionLogValue version written (1: transaction.version 1) */
};

/* Fills `cfg` with Kafka's defaults (offsets_partitions 50, log_value_version 1). */
void gr_txn_config_defaults(struct gr_txn_config *cfg);

struct gr_txn_coord;
struct gr_txn_write;      /* an append in flight (opaque; reported with gr_txn_write_done) */
struct gr_txn_marker_job; /* a marker round in flight (opaque; reported with gr_txn_markers_done) */

/* A topic partition named in a request or a transaction. Borrowed views. */
struct gr_txn_tp {
    struct gr_str topic;
    int32_t partition;
};

/* What send_markers gets: WriteTxnMarkers' content for one transaction. Borrowed for the call only. */
struct gr_txn_markers {
    struct gr_str transactional_id;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t coordinator_epoch; /* the __transaction_state partition's, for TRANSACTION_COORDINATOR_FENCED */
    bool commit;               /* COMMIT or ABORT marker */
    /* the transaction's clientTransactionVersion (0, or 2 for a version 2 transaction: its marker carries
       the bumped epoch), sent as WriteTxnMarkers v2's TransactionVersion (KIP-1228) */
    int16_t transaction_version;
    const struct gr_txn_tp *partitions;
    int32_t partition_count; /* may be 0: then report done at once */
    struct gr_txn_marker_job *job;
};

/* An answer: error_code (Kafka's, before version shaping: gr_txn_error_for_version), and for InitProducerId
 * and version 2's EndTxn the producer id and epoch (-1 on errors, and always -1 for the other APIs:
 * endTransactionWithTV1 answers EndTxn with NO_PRODUCER_ID / NO_PRODUCER_EPOCH). */
struct gr_txn_result {
    int16_t error_code;
    int64_t producer_id;
    int16_t producer_epoch;
};

struct gr_txn_hooks {
    void *ctx;
    /* Wall-clock milliseconds (Kafka's time.milliseconds: timestamps written and timeouts). */
    int64_t (*now_ms)(void *ctx);
    /* Appends `rec` (borrowed for the call) to partition `partition` of __transaction_state with acks=-1.
       Returns 0: in flight, and gr_txn_write_done(w, error) follows exactly once (0 once the record is
       committed, else the append's Kafka error code); or a Kafka error code: nothing appended, no report. */
    int16_t (*append)(void *ctx, int32_t partition, const struct gr_coord_record *rec,
                      struct gr_txn_write *w);
    /* Sends the markers of one transaction (the binding retries each partition until written, as Kafka's
       TransactionMarkerChannelManager); gr_txn_markers_done(m->job, error) follows exactly once. */
    void (*send_markers)(void *ctx, const struct gr_txn_markers *m);
    /* A new producer id into *producer_id: returns 0, or Kafka's error code (COORDINATOR_LOAD_IN_PROGRESS
       while no block is ready, as RPCProducerIdManager.generateProducerId). */
    int16_t (*alloc_producer_id)(void *ctx, int64_t *producer_id);
    /* Answers a request's waiter (exactly once per waiter). */
    void (*done)(void *ctx, void *waiter, const struct gr_txn_result *res);
    /* Optional (NULL: over cfg.offsets_partitions): the __consumer_offsets partition of `group_id` for
       AddOffsetsToTxn, the group coordinator's (Kafka's TransactionCoordinator asks
       groupCoordinator.partitionFor, over the topic's actual partition count). */
    int32_t (*offsets_partition)(void *ctx, struct gr_str group_id);
};

/* Creates a coordinator owning no partition. Copies cfg and hooks. Returns new (gr_txn_destroy) or NULL
   (out of memory, or cfg->partitions outside 1..GR_TXN_STATE_LOG_PARTITIONS_MAX). */
struct gr_txn_coord *gr_txn_create(const struct gr_txn_config *cfg, const struct gr_txn_hooks *hooks);
/* Frees everything; waiters still held are dropped without a done call; writes and marker jobs in flight
   become invalid (the binding must not report them). */
void gr_txn_destroy(struct gr_txn_coord *tc);

/* ---- ownership and load (TransactionStateManager.loadTransactionsForTxnTopicPartition) ---- */

/* Starts loading partition `p` at `coordinator_epoch` (its leader epoch, or the single-node counter): the
   partition's ids answer COORDINATOR_LOAD_IN_PROGRESS until gr_txn_load_done; what the cache held for `p`
   is dropped (its writes in flight will answer NOT_COORDINATOR). Returns 0 or -EINVAL (p out of range). */
int gr_txn_load_begin(struct gr_txn_coord *tc, int32_t p, int32_t coordinator_epoch);
/* Applies one record of partition `p` read in log order (value NULL: a tombstone): the latest record per
   transactional id wins (TransactionLog.read). Returns 0 (applied), 1 (skipped: a key or value version this
   coordinator does not know, as Kafka skips them), -1 (malformed: skipped, and logged), -EINVAL (p not
   loading), -ENOMEM. */
int gr_txn_replay(struct gr_txn_coord *tc, int32_t p, const uint8_t *key, size_t key_len,
                  const uint8_t *value, size_t value_len);
/* Ends the load of `p` at `coordinator_epoch` (a stale epoch does nothing: returns -ESTALE): the partition
   is owned; every PrepareCommit / PrepareAbort is completed (markers, then CompleteX). Returns the number of
   transactional ids loaded. */
int gr_txn_load_done(struct gr_txn_coord *tc, int32_t p, int32_t coordinator_epoch);
/* Resigns partition `p` (onResignation): its ids leave the cache; writes and markers in flight change
   nothing when reported, their waiters answer NOT_COORDINATOR then. */
void gr_txn_unload(struct gr_txn_coord *tc, int32_t p);

/* ---- requests (each answers `waiter` through hooks.done exactly once) ---- */

/* InitProducerId with a transactional id (TransactionCoordinator.handleInitProducerId). txn_id must not be
   null (the idempotent path does not come here); expected_producer_id -1: none (KIP-360's fields absent,
   with expected_epoch -1). */
void gr_txn_init_producer_id(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int32_t timeout_ms,
                             int64_t expected_producer_id, int16_t expected_epoch);
/* AddPartitionsToTxn (handleAddPartitionsToTransaction): one error for every partition of the request. */
void gr_txn_add_partitions(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                           int16_t producer_epoch, const struct gr_txn_tp *parts, int32_t count);
/* AddPartitionsToTxn with the transaction version of the client that adds (prepareAddPartitions records it
   in the transaction: 0 for AddPartitionsToTxn from a client, 2 for the implicit add of a transactional
   Produce v12+ or TxnOffsetCommit v5+, as Kafka's AddPartitionsToTxnManager). Checks in Kafka 4.x's order
   (KAFKA-18660): a transition in progress (CONCURRENT_TRANSACTIONS), then the producer id
   (INVALID_PRODUCER_ID_MAPPING) and epoch (PRODUCER_FENCED), then PrepareX (CONCURRENT_TRANSACTIONS). */
void gr_txn_add_partitions_tv(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id,
                              int64_t producer_id, int16_t producer_epoch, const struct gr_txn_tp *parts,
                              int32_t count, int16_t client_version);
/* AddOffsetsToTxn (handleAddOffsetsToTransaction): adds the group's __consumer_offsets partition
   (hooks.offsets_partition, or records.h gr_coord_partition_for over cfg.offsets_partitions without it). */
void gr_txn_add_offsets(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                        int16_t producer_epoch, struct gr_str group_id);
/* gr_txn_add_offsets with the client's transaction version (gr_txn_add_partitions_tv): TxnOffsetCommit v5+
   adds the group's offsets partition implicitly with version 2. */
void gr_txn_add_offsets_tv(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                           int16_t producer_epoch, struct gr_str group_id, int16_t client_version);
/* EndTxn (handleEndTransaction, from a client of transaction version 1: EndTxn v0-v4). */
void gr_txn_end(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                int16_t producer_epoch, bool commit);
/* EndTxn with the client's transaction version, which the request version decides (EndTxn v5+: 2), not the
   finalized level (Kafka's handleEndTransaction). Below 2: gr_txn_end. At 2 (endTransaction, KIP-890 part
   2): every EndTxn bumps the epoch (PrepareX written at epoch + 1, last epoch = the request's; markers carry
   the bumped epoch); at an epoch >= GR_TXN_EPOCH_EXHAUSTED a next producer id is drawn (alloc_producer_id)
   and kept in the record, and CompleteX moves to it at epoch 0. The answer, once PrepareX is durable,
   carries the producer id and epoch of the next transaction (the next id at epoch 0 after an exhaustion,
   KAFKA-18660). An abort from Empty / CompleteCommit / CompleteAbort bumps the epoch with no marker; a
   commit from Empty or a Complete state is INVALID_TXN_STATE; a retry (epoch == current - 1, or the last
   epoch of the previous producer id after an exhaustion) answers NONE with the current id and epoch after
   CompleteX of the same result, CONCURRENT_TRANSACTIONS during PrepareX; any other epoch PRODUCER_FENCED. */
void gr_txn_end_tv(struct gr_txn_coord *tc, void *waiter, struct gr_str txn_id, int64_t producer_id,
                   int16_t producer_epoch, bool commit, int16_t client_version);
/* AddPartitionsToTxn with VerifyOnly (handleVerifyPartitionsInTransaction), answered at once: fills
   errors[i] for parts[i]: NONE when in the ongoing transaction, TRANSACTION_ABORTABLE when not, or one
   error for all (INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
   INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS while PrepareX). */
void gr_txn_verify_partitions(struct gr_txn_coord *tc, struct gr_str txn_id, int64_t producer_id,
                              int16_t producer_epoch, const struct gr_txn_tp *parts, int32_t count,
                              int16_t *errors);

/* ---- reports from the binding ---- */

/* The append `w` finished: error 0 (committed) or the append's Kafka error code, mapped as
   TransactionStateManager.appendTransactionToLog (gr_txn_append_error). Then the transition completes or
   is dropped and the waiter (if any) is answered. `w` is freed. */
void gr_txn_write_done(struct gr_txn_coord *tc, struct gr_txn_write *w, int16_t error);
/* The marker round `job` finished: error 0 (every partition has its marker) writes CompleteX; an error
   (the coordinator was fenced: TRANSACTION_COORDINATOR_FENCED, NOT_COORDINATOR) leaves PrepareX for the
   next coordinator. `job` is freed. */
void gr_txn_markers_done(struct gr_txn_coord *tc, struct gr_txn_marker_job *job, int16_t error);

/* ---- timers ---- */

/* Runs what is due at hooks.now_ms: the abort pass, the expiry pass, CompleteX retries. */
void gr_txn_tick(struct gr_txn_coord *tc);
/* The next time (now_ms clock) gr_txn_tick has work. */
int64_t gr_txn_next_deadline_ms(const struct gr_txn_coord *tc);

/* ---- inspection (DescribeTransactions, ListTransactions; tests) ---- */

struct gr_txn_info {
    enum gr_txn_state state;
    int pending; /* the pending state, -1 none */
    int64_t producer_id, previous_producer_id;
    int16_t producer_epoch, last_producer_epoch;
    int32_t timeout_ms;
    int64_t start_ms, last_update_ms;
    int32_t partition_count;
    int64_t next_producer_id; /* version 2: drawn at epoch exhaustion until CompleteX, else -1 */
    int16_t client_version;   /* the transaction's clientTransactionVersion (0, or 2) */
};
/* Fills *out for `txn_id`: 0, or Kafka's error: TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR,
   COORDINATOR_LOAD_IN_PROGRESS. */
int16_t gr_txn_describe(const struct gr_txn_coord *tc, struct gr_str txn_id, struct gr_txn_info *out);
/* True when `tp` is in the transaction of `txn_id` (false when the id is unknown). */
bool gr_txn_has_partition(const struct gr_txn_coord *tc, struct gr_str txn_id, struct gr_txn_tp tp);
/* The partitions of `txn_id`'s transaction (TransactionMetadata.topicPartitions) into out[0..cap), in the
   order they were added: returns how many there are (more than cap: only cap written; 0 for an unknown id).
   The topics are views borrowed until the coordinator next changes. DescribeTransactions. */
int32_t gr_txn_partitions(const struct gr_txn_coord *tc, struct gr_str txn_id, struct gr_txn_tp *out,
                          int32_t cap);

/* ListTransactions' filters (TransactionStateManager.listTransactionStates): an id is listed unless it is
   Dead, its producer id is not among `producer_ids` (count > 0), its state not among `states` (when
   `filter_states`: an empty set then lists nothing, as request state names all unknown do), or
   duration_ms >= 0 and now - its transaction start <= duration_ms (KIP-994). */
struct gr_txn_list_filter {
    const int64_t *producer_ids;
    int32_t producer_id_count;
    const enum gr_txn_state *states;
    int32_t state_count;
    bool filter_states;
    int64_t duration_ms; /* -1: none */
};
/* One listed transaction (views borrowed for the call). */
struct gr_txn_listing {
    struct gr_str transactional_id;
    int64_t producer_id;
    enum gr_txn_state state;
};
/* Calls `fn` for every transactional id of the owned partitions that `f` keeps. Returns NONE, or
   COORDINATOR_LOAD_IN_PROGRESS (nothing listed) while any partition is loading, as Kafka. */
int16_t gr_txn_list(const struct gr_txn_coord *tc, const struct gr_txn_list_filter *f,
                    void (*fn)(void *ctx, const struct gr_txn_listing *l), void *ctx);

/* ---- error shaping ---- */

/* An append error as TransactionStateManager maps it: UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
   NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER,
   KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE -> UNKNOWN_SERVER_ERROR;
   others unchanged. */
int16_t gr_txn_append_error(int16_t error);

enum gr_txn_api {
    GR_TXN_API_PRODUCE,
    GR_TXN_API_INIT_PRODUCER_ID,
    GR_TXN_API_ADD_PARTITIONS,
    GR_TXN_API_ADD_OFFSETS,
    GR_TXN_API_END_TXN,
    GR_TXN_API_TXN_OFFSET_COMMIT,
};
/* The error an API `version` may carry (KafkaApis' version gates): PRODUCER_FENCED becomes
   INVALID_PRODUCER_EPOCH below InitProducerId v4, AddPartitionsToTxn v2, AddOffsetsToTxn v2, EndTxn v2 and
   in every Produce response; TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE below Produce v11,
   TxnOffsetCommit v4, AddPartitionsToTxn v5, AddOffsetsToTxn v4, EndTxn v4, InitProducerId v5. */
int16_t gr_txn_error_for_version(enum gr_txn_api api, int16_t version, int16_t error);

#endif
