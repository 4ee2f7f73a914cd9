/*
 * produce_request.h: request shaping for Produce, before any partition is touched: Kafka keeps a
 * ProduceRequest's partitions in a map, so a topic or partition named twice is one; a transactional request
 * is refused as a whole; the response's arrays mirror the request's, and a partition's entry is filled
 * from its plain produce result (partition/partition.h gr_produce_result) or an error. Pure over the
 * decoded request (protocol/gen), the result and an arena: no broker, no partition state.
 * Read next: server/handlers/produce.c (its caller).
 */
#ifndef GR_PRODUCE_REQUEST_H
#define GR_PRODUCE_REQUEST_H

#include <stdbool.h>

#include "common/arena.h"
#include "partition/partition.h"
#include "protocol/gen/messages.h"
#include "server/broker.h"

struct gr_req;

/* Kafka keeps the request's partitions in a map: a topic named twice is one topic, and a partition named
   twice is one partition whose records are those of its LAST occurrence (the earlier ones are neither
   appended nor answered). Rewrites the request's topic_data so: topics in order of first occurrence (by name,
   or by topic id when `by_id`: Produce v13), each partition at its first occurrence with its last
   occurrence's records. Sorts, so O(n log n) in the request's topics and partitions; a request without
   repeats is left as it is. Returns false when out of memory (`arena`: the request's; the new arrays live
   there). */
bool gr_produce_merge_duplicates(struct gr_produce_request *body, bool by_id, struct gr_arena *arena);

/* Allocates the response's topic and partition arrays (arena, initialised). Returns false when out of
   memory: the caller closes the connection (never a write through NULL). */
bool gr_produce_response_alloc(const struct gr_produce_request *body, struct gr_produce_response *resp,
                               struct gr_arena *arena);
/* The number of partition entries the request holds (negative counts as 0). */
int gr_produce_request_partitions(const struct gr_produce_request *body);
/* True when the request has a transactional id or the first batch of any partition has the transactional
   bit (RequestUtils.hasTransactionalRecords). */
bool gr_produce_request_transactional(const struct gr_produce_request *body);
/* (produce_txn.c) Kafka's KafkaApis.handleProduceRequest: a request whose first batch of some partition is
   transactional but which has no transactional id is refused as a whole
   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition, no message, as Kafka sends none); returns true
   then. A request with a transactional id is taken (its transactional batches verified per partition:
   gr_produce_txn_verify). */
bool gr_produce_txn_refused(struct gr_req *req);
/* KIP-890 part 1 for one partition of `req` (topic `topic`, a NUL-terminated name): server/txns.h
   gr_txns_check_produce (`log`: the partition's; asked and appended in one loop turn, so no marker can come
   between), or the remote coordinator's verdict (gr_txns_remote_verdict; then args->txn_guarded and
   txn_guard are set: the partition checks the guard again at the append). Sets args->txn_verified. Returns
   1 (a transactional batch verified), 0 (nothing to verify), or -1 with `pr` filled with the error (nothing
   appended). */
int gr_produce_txn_verify(struct gr_req *req, const struct gr_log *log, const char *topic, int32_t partition,
                          struct gr_bytes records, struct gr_produce_response_partition_produce_response *pr,
                          struct gr_produce_args *args);
/* Before the appends, once the local logs are made: in cluster mode, when the coordinator of the request's
   transactional id is on another broker, the request waits while it verifies the transactional partitions
   (server/txns.h gr_txns_verify_remote): returns true with *rc for the handler to return (`run` runs again
   with the answer). False: go on now. */
bool gr_produce_txn_remote(struct gr_req *req, gr_handler_fn run, enum gr_handler_rc *rc);
/* Sets a partition's error with no message (`msg` NULL: null on the wire) or a static one; base_offset -1. */
void gr_produce_partition_error(struct gr_produce_response_partition_produce_response *pr, int16_t code,
                                const char *msg);
/* Copies one partition's produce result into its response entry (record errors, KIP-467, into `arena`).
   Out of memory: the refusal without its record list. */
void gr_produce_fill_partition(const struct gr_produce_result *r,
                               struct gr_produce_response_partition_produce_response *pr,
                               struct gr_arena *arena);

#endif
