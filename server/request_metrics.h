/*
 * request_metrics.h: how long each request took, where, and how busy the network thread is (issue #22,
 * request timing).
 *
 * Timestamps (monotonic microseconds, struct gr_req_times in every request; 0 = not reached):
 *   recv   its frame was fully read (server/net.c, conn_add_request); for a request held behind earlier
 *          ones on its connection, when they are all answered and sent (Kafka mutes a connection while a
 *          request is in flight and reads the next one only after its response is sent, so time spent
 *          behind, say, a long-poll Fetch is no part of its times);
 *   start  it was dispatched: decoding and its handler begin (server/dispatch.c);
 *   local  its handler first declared a wait (gr_req_await: long-poll Fetch, acks=all, verification, a
 *          coordinator's answer, any park) or, when it never waited, its answer was encoded;
 *   wake   the wait ended: gr_req_finish was entered for a request that had waited;
 *   done   its answer was encoded and queued on its connection (gr_req_finish, gr_req_finish_silent);
 *   send   its connection began writing its answer (it is the FIFO head and finished);
 *   end    the last byte of its answer was written (or, with no answer, it left the FIFO).
 * Kafka's RequestChannel.updateRequestMetrics times (kafka.network.RequestMetrics) are then:
 *   requestqueuetimems = start - recv (Kafka: dequeued by a handler thread - received by the processor);
 *   localtimems        = local - start (Kafka: apiLocalComplete - dequeue);
 *   remotetimems       = done - local (Kafka: responseComplete - apiLocalComplete: the purgatory wait; the
 *                        encoding of a parked request's answer falls here too, as Kafka serialises before
 *                        responseComplete);
 *   responsequeuetimems= send - done (Kafka: responseDequeue - responseComplete);
 *   responsesendtimems = end - send;  totaltimems = end - recv.
 * They are recorded when a request leaves its connection's FIFO after its last byte (server/net.c,
 * release_head); a request whose connection closed first is not recorded (Kafka records those at close).
 * Names: Kafka's API name; a Fetch is recorded under FetchConsumer (replica id < 0) or FetchFollower
 * (replica id >= 0) and under Fetch (RequestMetrics.consumerFetchMetricName / followFetchMetricName).
 *
 * Quantiles (kafka_network_requestmetrics_*ms{request,quantile}; Kafka: Yammer histograms over an
 * exponentially decaying reservoir biased to about 5 minutes): each is a log-linear histogram of
 * microseconds (HDR-style: values below 16 us exact, then 8 sub-buckets per power of two up to 2^36 us,
 * about 19 hours; larger values land in the last bucket), kept in GR_RT_WINDOWS rotating windows of
 * GR_RT_WINDOW_MS each: a window is cleared when its slot is reused, and a quantile reads the current window
 * and the GR_RT_WINDOWS - 1 before it (the last 4 to 5 minutes). Memory is fixed per request name (made on
 * its first request, never per request). A quantile q is the nearest rank: the ceil(q * n)-th smallest
 * observation's bucket, reported as the bucket's midpoint, so it is off by at most 1/16 (6.25 %) of the
 * value (a bucket [m * 2^s, (m + 1) * 2^s) with m >= 8 spans at most 1/8 of its lower bound) and exact
 * below 16 us; milliseconds are printed as floats. A name with nothing in the window reports NaN.
 * `_count` counts every observation since start (Yammer's Histogram.count).
 *
 * gregor_request_latency_seconds{request} (histogram, cumulative since start; API name only): buckets
 * le = 0.000256 * 2^i s, i = 0..17 (up to 33.554432 s), +Inf, _sum and _count, of totaltime less a Fetch's
 * wait (wake - local for a Fetch: the long poll, which is remotetimems); other waits (acks=all, coordinator
 * joins, verification) count. The same duration, less also JoinGroup's and SyncGroup's wait for the rebalance
 * (long polls too: the initial rebalance delay alone is 3 s), over gregor.log.slow.request.ms, logs one
 * rate-limited key=value line (GR_WARN_KV_RATELIMITED) naming api, version, client_id (its first 63 bytes),
 * correlation_id, peer and duration_ms.
 *
 * Idle fractions over the last minute (the current 10-second slot and the 5 before: 50 to 60 s, less since
 * start), both 0..1 as Kafka's gauges:
 *   kafka_network_socketserver_networkprocessoravgidlepercent: time the network thread spent blocked in
 *     libev's poll (from its ev_prepare watcher to its ev_check watcher) over wall time. Gregor has one
 * network thread doing everything, so this is how idle the whole broker loop is.
 *   kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent: 1 - time spent running request
 *     handlers over wall time, where handler time is each gr_req_run call (decoding is before it; the
 *     handler's first run and, when it answers at once, its encoding), outermost calls only. Re-checks of
 *     parked requests and their completions on other events are not counted (Kafka's handler threads do not
 *     run purgatory completions either, those run on whichever thread completes them).
 * Read next: server/request.c (the lifecycle the timestamps follow), server/metrics.c (the page).
 */
#ifndef GR_REQUEST_METRICS_H
#define GR_REQUEST_METRICS_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/prom_text.h"

struct gr_broker;
struct gr_req;

#define GR_RT_WINDOWS 5       /* rotating windows a quantile reads */
#define GR_RT_WINDOW_MS 60000 /* each window's length */
#define GR_RT_SUB_BITS 3      /* 2^3 = 8 sub-buckets per power of two */
#define GR_RT_MAX_EXP 36      /* values up to 2^36 - 1 us; larger ones clamp */
#define GR_RT_BUCKETS (((GR_RT_MAX_EXP - GR_RT_SUB_BITS) + 1) << GR_RT_SUB_BITS) /* 272 */
#define GR_RT_LAT_BUCKETS 18 /* gregor_request_latency_seconds finite buckets: 256 us << i */
#define GR_RT_IDLE_SLOTS 6   /* idle accounting: slots of GR_RT_IDLE_SLOT_US */
#define GR_RT_IDLE_SLOT_US 10000000LL
#define GR_RT_FETCH_CONSUMER 128 /* request slots: API keys 0..127, then the two Fetch kinds */
#define GR_RT_FETCH_FOLLOWER 129
#define GR_RT_SLOTS 130

#define GR_RT_CLIENT_ID_BYTES 64 /* a client id kept for the slow-request line: up to 63 bytes, truncated */

/* A request's timestamps (see the top of this file); monotonic microseconds, 0 = not reached. */
struct gr_req_times {
    int64_t recv, start, local, wake, done, send;
    /* its client id, copied when its answer is queued (the header's points into the frame, freed then) */
    char client_id[GR_RT_CLIENT_ID_BYTES];
};

/* The six RequestMetrics times, in this order everywhere. */
enum gr_rt_metric {
    GR_RT_REQUEST_QUEUE,
    GR_RT_LOCAL,
    GR_RT_REMOTE,
    GR_RT_RESPONSE_QUEUE,
    GR_RT_RESPONSE_SEND,
    GR_RT_TOTAL,
    GR_RT_METRICS
};

/* One quantile histogram over rotating windows (see the top of this file). */
struct gr_rt_hist {
    int64_t epoch[GR_RT_WINDOWS]; /* now_ms / GR_RT_WINDOW_MS of the window in each slot */
    uint32_t counts[GR_RT_WINDOWS][GR_RT_BUCKETS];
    uint64_t total; /* observations since start */
};

/* One request name's figures. */
struct gr_rt_request {
    const char *name; /* static: the API table's name or "FetchConsumer"/"FetchFollower" */
    struct gr_rt_hist h[GR_RT_METRICS];
    uint64_t lat[GR_RT_LAT_BUCKETS]; /* per bucket (not cumulative): 256 << (i-1) < us <= 256 << i */
    uint64_t lat_count;
    double lat_sum_s;
};

/* The network thread's busy and idle time in slots of GR_RT_IDLE_SLOT_US. */
struct gr_rt_idle {
    int64_t epoch[GR_RT_IDLE_SLOTS]; /* t / GR_RT_IDLE_SLOT_US of each slot's data */
    int64_t idle_us[GR_RT_IDLE_SLOTS], busy_us[GR_RT_IDLE_SLOTS];
    int64_t started_us; /* accounting start: the window never reaches before it */
};

/* The broker's request timing (b->metrics.reqtime), owned by the network thread. */
struct gr_reqtime {
    struct gr_rt_request *req[GR_RT_SLOTS]; /* made on a name's first request */
    struct gr_rt_idle idle;
    struct ev_loop *loop; /* NULL until gr_reqtime_start */
    ev_prepare prepare_w;
    ev_check check_w;
    int64_t poll_from_us; /* when the loop was last about to block */
    int handler_depth;    /* gr_req_run nesting: only the outermost call is counted */
    int64_t handler_from_us;
};

/* ---- the structure (pure functions of their inputs; unit-tested) ---- */

/* The bucket of `us` microseconds: exact below 16, then 8 per power of two; values >= 2^36 go to the last. */
int gr_rt_bucket(uint64_t us);
/* The value a quantile landing in bucket `idx` reports: its midpoint in microseconds ((lower + upper) / 2 of
   the integers it holds). */
double gr_rt_bucket_value_us(int idx);
/* Adds one observation of `us` microseconds at wall-independent time `now_ms` (monotonic ms). */
void gr_rt_hist_add(struct gr_rt_hist *h, uint64_t us, int64_t now_ms);
/* The q-quantile (q_ppm = q * 10^6, e.g. 999000) of the observations in the windows current at `now_ms`:
   nearest rank ceil(q * n), its bucket's midpoint in microseconds; NaN when the windows are empty. */
double gr_rt_hist_quantile_us(const struct gr_rt_hist *h, uint32_t q_ppm, int64_t now_ms);
/* The `nq` quantiles `q_ppm` at once into out[0..nq) (as gr_rt_hist_quantile_us), the windows summed once:
   what a scrape uses. */
void gr_rt_hist_quantiles_us(const struct gr_rt_hist *h, const uint32_t *q_ppm, int nq, int64_t now_ms,
                             double *out);
/* Adds the span [from_us, to_us) to the idle (busy = false) or busy account of `id`, split over slots. */
void gr_rt_idle_add(struct gr_rt_idle *id, int64_t from_us, int64_t to_us, bool busy);
/* The idle (busy = false: idle time) or busy fraction of the window ending at `now_us`: the time accounted in
   the current slot and the GR_RT_IDLE_SLOTS - 1 before it, over the wall time from the later of that window's
   start and started_us to now_us; clamped to 0..1, NaN when no time has passed. */
double gr_rt_idle_fraction(const struct gr_rt_idle *id, int64_t now_us, bool busy);

/* Records one finished request under slot `slot` (an API key 0..127) named `name`, and, when `fetch_kind` is
   GR_RT_FETCH_CONSUMER or GR_RT_FETCH_FOLLOWER (else 0), under that name too: the six times from `t` and
   `end_us` (missing stamps take the one before), at `now_ms`. Returns the latency in microseconds
   (totaltime less a Fetch's wait), also recorded in the slot's latency histogram. A name's figures are
   allocated on its first request; out of memory it is not recorded (returns the latency all the same). */
int64_t gr_reqtime_observe(struct gr_reqtime *rt, int slot, const char *name, int fetch_kind,
                           const struct gr_req_times *t, int64_t end_us, int64_t now_ms);
/* Writes the families of `rt` at `now_us` (monotonic): the six summaries, gregor_request_latency_seconds and
   the two idle gauges (those only once gr_reqtime_start ran). Returns false when `out` failed. */
bool gr_reqtime_render_at(const struct gr_reqtime *rt, int64_t now_us, struct gr_prom_buf *out);
/* Frees `rt` (its names' figures, its watchers stopped); NULL is fine. */
void gr_reqtime_free(struct gr_reqtime *rt);

/* ---- the broker's hooks (each one line at its call site) ---- */

/* Makes b->metrics.reqtime (if not yet) and starts the idle accounting on b->loop: an ev_prepare and an
   ev_check watcher (unreferenced: they never keep the loop running). Returns -ENOMEM or 0. */
int gr_reqtime_start(struct gr_broker *b);
/* Stamps: the frame read (net.c), dispatch (dispatch.c), a declared wait (gr_req_await), finishing entered
   (gr_req_finish), the answer queued (gr_req_finish / gr_req_finish_silent), its first write (net.c). Each
   keeps an earlier stamp (a request waits more than once: the first wait ends local time). */
void gr_reqtime_received(struct gr_req *req);
void gr_reqtime_started(struct gr_req *req);
void gr_reqtime_parked(struct gr_req *req);
void gr_reqtime_finishing(struct gr_req *req);
void gr_reqtime_queued(struct gr_req *req);
void gr_reqtime_sending(struct gr_req *req);
/* The last byte of `req`'s answer is written (or none was due): records it (gr_reqtime_observe; only once
   gr_reqtime_start made b->metrics.reqtime: nothing is allocated here) and logs it when slower than
   gregor.log.slow.request.ms; `peer` is its connection's peer for the log line. */
void gr_reqtime_sent(struct gr_req *req, const char *peer);
/* Around each gr_req_run: handler time for requesthandleravgidlepercent. enter returns a token for exit;
   `b` is passed (not the request: a handler may free its request). */
int64_t gr_reqtime_handler_enter(struct gr_broker *b);
void gr_reqtime_handler_exit(struct gr_broker *b, int64_t token);
/* Writes the request timing families of broker `b` (gr_reqtime_render_at now). False when `out` failed. */
bool gr_reqtime_render(struct gr_broker *b, struct gr_prom_buf *out);

#endif
