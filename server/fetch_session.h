/*
 * fetch_session.h: the broker's incremental fetch sessions (KIP-227; Kafka's FetchSession, FetchSessionCache
 * and FetchManager.newContext in core). A Fetch (v7+) with session id 0 and epoch 0 is a full fetch that
 * creates a session when the cache has a slot (max.incremental.fetch.session.cache.slots) or can evict one
 * (Kafka's rule: first the least recently used session idle longer than
 * min.incremental.fetch.session.eviction.ms; else the smallest evictable one, by (privileged, partitions,
 * id), when the new one is worth more: followers' sessions are privileged). Epoch -1: a full fetch without a
 * session; any session named in a full fetch is closed. An incremental fetch (id, epoch > 0) updates and adds
 * the partitions it names, removes forgotten_topics_data, and is answered with the partitions that have
 * news (Kafka's CachedPartition.maybeUpdateResponseData: records, a changed high watermark or log start
 * offset, an error, a preferred read replica, a diverging epoch). Errors: FETCH_SESSION_ID_NOT_FOUND (70),
 * INVALID_FETCH_SESSION_EPOCH (71), FETCH_SESSION_TOPIC_ID_ERROR (106: a session made with topic ids
 * (v13+) used by names, or the reverse). Single-threaded (the network loop). Bounds: the slots, and
 * GR_FSESS_MAX_PARTITIONS per session and GR_FSESS_MAX_BYTES of memory for all (over either, the session
 * is closed and the request answered sessionless, or a full fetch gets no session).
 */
#ifndef GR_FETCH_SESSION_H
#define GR_FETCH_SESSION_H

#include <stdbool.h>
#include <stdint.h>

struct gr_arena;
struct gr_fetch_request;
struct gr_fetch_response;

#define GR_FSESS_MAX_PARTITIONS 200000   /* partitions one session may hold (ours; Kafka has no such bound) */
#define GR_FSESS_MAX_BYTES (256LL << 20) /* memory of all sessions' partitions and names (ours) */

struct gr_fsess_cache;

/* What one request does with the cache, kept by the handler from begin to end. */
enum gr_fsess_kind {
    GR_FSESS_NONE = 0, /* v < 7 or epoch -1: sessionless */
    GR_FSESS_FULL,     /* epoch 0: a session is made at the answer when there is a slot */
    GR_FSESS_INCR,     /* incremental: body rewritten to the session's partitions, answer filtered */
    GR_FSESS_NOMEM,    /* out of memory at the start: the connection is closed */
};
struct gr_fsess_req {
    enum gr_fsess_kind kind;
    int32_t session_id; /* GR_FSESS_INCR: the session */
    bool privileged;    /* from a follower (replica id >= 0) */
    int16_t version;    /* the request's: sessions made at v13+ use topic ids */
    int64_t now_ms;     /* when it began: the time a session made or touched at its answer records */
};

/* What the cache counts, for /metrics (server/metrics.c renders it): gregor_fetch_sessions,
   gregor_fetch_session_partitions, gregor_fetch_session_requests_total{kind}. */
struct gr_fsess_counts {
    int64_t sessions, partitions;                    /* now in the cache */
    uint64_t full, incremental, sessionless, errors; /* Fetch requests by kind, since start */
};

/* A cache of at most `slots` sessions (0: none made), evictable after `eviction_ms` of idleness, counting
   into `counts` (the caller's, kept up to date); NULL out of memory. Session ids come from a generator
   seeded by `seed`. */
struct gr_fsess_cache *gr_fsess_cache_new(int32_t slots, int64_t eviction_ms, uint64_t seed,
                                          struct gr_fsess_counts *counts);
/* Frees the cache and its sessions (NULL is fine). */
void gr_fsess_cache_free(struct gr_fsess_cache *c);

/* Starts a Fetch of `version` at `now_ms`: classifies it (out->kind), closes or checks the session it
   names, applies an incremental fetch to its session and rewrites body->topics (arena memory) to the
   session's partitions (`c` NULL: no sessions, every incremental fetch gets 70). Returns 0 (go on), 1 when
   `resp` holds a session error (70, 71, 106 at the top, session id 0, no topics: answer it at once), or -1
   out of memory (close the connection). */
int gr_fsess_begin(struct gr_fsess_cache *c, int16_t version, struct gr_fetch_request *body,
                   struct gr_fetch_response *resp, bool privileged, int64_t now_ms, struct gr_arena *arena,
                   struct gr_fsess_req *out);
/* Finishes the answer `resp` to `body` started as `r`: a full fetch makes its session (resp->session_id:
   the new id, else 0); an incremental one records the high watermarks and log start offsets sent and drops
   the partitions without news (resp->session_id: the session's id). */
void gr_fsess_end(struct gr_fsess_cache *c, const struct gr_fsess_req *r, const struct gr_fetch_request *body,
                  struct gr_fetch_response *resp, int64_t now_ms);

/* The fetch handler's calls. gr_fsess_start: gr_fsess_begin for `req` (a Fetch) with the broker's cache,
   the request's version, body, response and arena, the monotonic clock; returns true when the answer is a
   session error (resp filled, body->topics emptied: answer at once) or memory ran out (body->topics
   emptied; gr_fsess_finish then closes the connection). gr_fsess_finish: gr_fsess_end for `req`, then
   gr_req_finish (sends the answer), or closes the connection after an out-of-memory start. */
struct gr_req;
bool gr_fsess_start(struct gr_req *req, struct gr_fsess_req *out, bool privileged);
void gr_fsess_finish(struct gr_req *req, const struct gr_fsess_req *r);

#endif
