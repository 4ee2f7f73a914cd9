/*
 * fetch_session_client.h: the client side of an incremental fetch session (KIP-227; Kafka's
 * FetchSessionHandler and FetchMetadata in clients), for one Fetch connection to one leader. Pure logic: it
 * decides what each Fetch names (session id, epoch, the partitions to carry, forgotten_topics_data) and
 * follows the answers; the caller (cluster/fetcher.c) builds, sends and reads the requests.
 *
 * The metadata of the next request, as Kafka's:
 *   - INITIAL (session id 0, epoch 0): a full fetch asking the leader for a session;
 *   - (id, 0) ("close existing, attempt new"): a full fetch closing session id and asking for a new one;
 *   - (id, epoch >= 1): incremental. The epoch goes 1, 2, ..., INT32_MAX, then 1 again (never 0 after the
 *     first; FetchMetadata.nextEpoch).
 * Each request: gr_fsc_begin, gr_fsc_add for every partition wanted now (Kafka's Builder.add), gr_fsc_build.
 * A full fetch carries every partition added and they become the session's. An incremental one carries the
 * partitions added since the last request or whose fields (topic id, fetch offset, log start offset, max
 * bytes, current leader epoch, last fetched epoch: Kafka's PartitionData.equals) changed, and forgets (in
 * forgotten_topics_data) the session's partitions not added this time (Builder.build). Answers
 * (FetchSessionHandler.handleResponse): a top-level error: FETCH_SESSION_ID_NOT_FOUND gives INITIAL, any
 * other (70, 71, 106, ...) (id, 0). A full fetch's answer must name exactly the session's partitions (else
 * INITIAL, answer not used); session id 0 in it means the leader made no session: INITIAL again (the next
 * request is full and asks again), else (that id, 1). An incremental answer may name only the session's
 * partitions (else (id, 0), answer not used) and omits those without news (absent is not an error); session
 * id 0 in it means the leader closed the session: INITIAL; else the epoch moves on. A request not sent or not
 * answered (timeout, lost connection, undecodable) gives (id, 0) (handleError).
 *
 * A session made by topic ids (Fetch v13+: every partition has a non-zero id and the connection serves
 * v13+) keys its partitions by (topic id, partition), one made by names by (name, partition). When the mode
 * the partitions call for differs from the session's, the request is full ((id, 0)): the leader would answer
 * FETCH_SESSION_TOPIC_ID_ERROR to an incremental one (KIP-516). Kafka's "replaced" partitions (same name, a
 * new topic id) come out as the old id forgotten and the new one added.
 *
 * Bounds: at most GR_FSC_PARTITIONS_MAX partitions per request (the fetcher's own cap); the answer's
 * partitions are only looked up, never trusted for a size. Not thread-safe (the network loop). Read next:
 * cluster/fetcher.c; server/fetch_session.h is the leader's side.
 */
#ifndef GR_CLUSTER_FETCH_SESSION_CLIENT_H
#define GR_CLUSTER_FETCH_SESSION_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

struct gr_fetch_response;

/* Partitions one request may name (the fetcher follows at most GR_FETCHER_PARTITIONS_MAX). */
#define GR_FSC_PARTITIONS_MAX 100000

/* One partition of a Fetch (Kafka's FetchRequest.PartitionData). */
struct gr_fsc_part {
    const char *topic;    /* the topic name; borrowed by gr_fsc_add (the session keeps a copy) */
    uint8_t topic_id[16]; /* all zeros: no id (the request then goes by names, v12) */
    int32_t partition;
    int64_t fetch_offset, log_start_offset;
    int32_t current_leader_epoch, last_fetched_epoch, partition_max_bytes;
};

/* A partition the next request forgets (forgotten_topics_data: by name before v13, by id from v13). */
struct gr_fsc_forgotten {
    const char *topic; /* owned by the session until the next gr_fsc_begin */
    uint8_t topic_id[16];
    int32_t partition;
};

/* What gr_fsc_build decided; its arrays are the session's, valid until the next gr_fsc_begin. */
struct gr_fsc_plan {
    int32_t session_id, session_epoch; /* the request's SessionId and SessionEpoch */
    bool full;                         /* epoch 0: every partition added is carried */
    bool topic_ids;                    /* the request goes by topic ids (v13+), else by names (v12) */
    const int32_t *send; /* indexes (in gr_fsc_add order, ascending) of the partitions to carry */
    int32_t send_count;
    const struct gr_fsc_forgotten *forgotten; /* in the session's order */
    int32_t forgotten_count;
};

/* Counters (tests, logs). */
struct gr_fsc_stats {
    int64_t full, incremental; /* requests built of each kind */
    int64_t resets;            /* answers or failures that sent the next request back to a full fetch */
};

struct gr_fsc;

/* Returns new: a session handler at INITIAL with no partitions, or NULL without memory. */
struct gr_fsc *gr_fsc_new(void);
/* Frees `s` (NULL is fine); nothing is sent to the leader (its session expires or is evicted there). */
void gr_fsc_free(struct gr_fsc *s);

/* Starts the next request: forgets what the last plan lent (its forgotten names). */
void gr_fsc_begin(struct gr_fsc *s);
/* Names `p` (copied) as wanted in the request being built; each (topic, partition) at most once per
   request. Returns 0, -EINVAL (no topic, negative partition, over GR_FSC_PARTITIONS_MAX) or -ENOMEM. */
int gr_fsc_add(struct gr_fsc *s, const struct gr_fsc_part *p);
/* Decides the request (Kafka's Builder.build) into *out: full or incremental, what it carries and forgets.
   `ids_served`: the connection serves Fetch v13+ (topic ids). Returns 0, or -ENOMEM with the session left
   as it was before gr_fsc_begin (the caller sends nothing and may call gr_fsc_failed). */
int gr_fsc_build(struct gr_fsc *s, bool ids_served, struct gr_fsc_plan *out);
/* Follows the answer `r` (decoded at `version`) to the request last built (handleResponse). Returns true
   when its partitions may be used: false after a top-level error or when it names partitions outside the
   session (or, for a full fetch, omits some); the next request is then full. */
bool gr_fsc_response(struct gr_fsc *s, const struct gr_fetch_response *r, int16_t version);
/* The request last built was not sent, or got no answer (handleError): the next one is full, closing the
   session. */
void gr_fsc_failed(struct gr_fsc *s);

/* FetchMetadata.nextEpoch: the epoch after `epoch` (1, 2, ..., INT32_MAX, then 1; a negative one stays -1).
 */
int32_t gr_fsc_next_epoch(int32_t epoch);

/* The next request's metadata (tests, logs): session id and epoch; partitions in the session. */
int32_t gr_fsc_session_id(const struct gr_fsc *s);
int32_t gr_fsc_epoch(const struct gr_fsc *s);
int32_t gr_fsc_partitions(const struct gr_fsc *s);
/* Returns borrowed: the counters. */
const struct gr_fsc_stats *gr_fsc_stats(const struct gr_fsc *s);

#endif
